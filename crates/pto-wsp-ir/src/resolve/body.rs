//! Kernel bodies in slot form: every name of a body resolved once, here.
//!
//! Why: a kernel body is read by the cycle model ([`crate::kernel_body::Walk`]), the CPU
//! executor, the emitters and the checks. Each used to keep its own table from names to what
//! they mean; they now all read a [`Body`], where a tile is an index into [`Body::tiles`], a
//! tile parameter an index into [`Body::regions`], an integer a *value slot*, a float a *float
//! slot*, and every integer expression is [`Compiled`] against the value slots.
//!
//! Slot layout (one flat array of values and one of floats per run of a body):
//! - value slots: the scalar parameters in order (a float parameter's slot is unused), then
//!   `rows(x)` and `cols(x)` of each tile parameter `x`, then every `let`, `GETVAL` and loop
//!   variable in program order ([`Body::values`] names each);
//! - float slots: the scalar parameters in order (an integer parameter's slot is unused), then
//!   every float local in program order ([`Body::floats`]).
//!
//! Promises: [`resolve_body`] never panics, on any kernel (validated or not); a name that means
//! nothing where it stands, or an operand of the wrong kind, is a [`ResolveError`] naming the
//! kernel, at the location of the statement it is in. Scoping is the validator's: a name is
//! visible after its declaration to the end of its block, inner declarations shadow outer ones.

use super::ResolveError;
use crate::eval::Compiled;
use crate::expr::Expr;
use crate::kernel_body::{FloatArg, InstArg, KStmt, KStmtKind, TileDecl, extent_name};
use crate::loc::{Ident, Loc};
use crate::module::{KernelDecl, ParamKind};
use crate::tile_isa::{CMP_MODES, Operand, PAD_MODES, TRI_MODES, TileOp};
use crate::types::{Access, DType, ParamType};

/// A kernel body with every name resolved (see the module docs).
#[derive(Clone, Debug)]
pub struct Body {
    /// The kernel's name.
    pub kernel: String,
    /// Where the kernel is declared.
    pub loc: Loc,
    /// The scalar parameters in order (value slot and float slot `i` is parameter `i`).
    pub scalars: Vec<ScalarParam>,
    /// The tile parameters in order: the task's regions.
    pub regions: Vec<RegionParam>,
    /// Every tile declaration, in program order (an array is one entry).
    pub tiles: Vec<TileSlot>,
    /// What each value slot holds, by name, for messages and emitted code.
    pub values: Vec<Slot>,
    /// What each float slot holds.
    pub floats: Vec<Slot>,
    /// The statements.
    pub stmts: Vec<BodyStmt>,
}

/// A scalar parameter.
#[derive(Clone, Debug)]
pub struct ScalarParam {
    /// Its name.
    pub name: String,
    /// Its declared type (a float one lives in a float slot, any other in a value slot).
    pub ty: ParamType,
}

/// A tile parameter (one region of a task).
#[derive(Clone, Debug)]
pub struct RegionParam {
    /// Its name.
    pub name: String,
    /// How the kernel uses the region.
    pub access: Access,
    /// The element type.
    pub dtype: DType,
    /// The declared tile shape (innermost last; `None` = any).
    pub shape: Vec<Option<u64>>,
    /// The value slots of `rows(x)` and `cols(x)`.
    pub extents: (u32, u32),
}

/// A tile declaration.
#[derive(Clone, Debug)]
pub struct TileSlot {
    /// The declaration as written (its `valid` expressions are resolved in [`BodyKind::Tile`]).
    pub decl: TileDecl,
    /// Where it is declared.
    pub loc: Loc,
}

impl TileSlot {
    /// The number of tiles: 1, or the length of an array.
    pub fn count(&self) -> usize {
        self.decl.count.unwrap_or(1) as usize
    }
}

/// What a value or float slot holds.
#[derive(Clone, Debug)]
pub struct Slot {
    /// The name it has in the body (`rows(x)` for an extent).
    pub name: String,
    /// Where it is declared ([`Loc::NONE`] for parameters and extents).
    pub loc: Loc,
}

/// An integer or `bool` expression resolved against the value slots.
#[derive(Clone, Debug)]
pub struct IntExpr {
    /// The expression over value slots (constants folded).
    pub compiled: Compiled,
    /// As written, for messages and emitted code.
    pub text: Expr,
    /// The value slot of each name of `text`, in the order they are written (see
    /// [`IntExpr::slots`]).
    names: Vec<u32>,
}

impl IntExpr {
    /// Resolves `e`: `slot_of(name)` is the value slot of a name, `None` when it means nothing
    /// there (an [`crate::eval::EvalError::Unbound`]).
    pub(crate) fn resolve(
        e: &Expr,
        slot_of: &mut impl FnMut(&str) -> Option<u32>,
    ) -> Result<IntExpr, crate::eval::EvalError> {
        let mut names = Vec::new();
        let compiled = Compiled::resolve(e, &mut |n| {
            let slot = slot_of(n)?;
            names.push(slot);
            Some(slot)
        })?;
        Ok(IntExpr {
            compiled,
            text: e.clone(),
            names,
        })
    }

    /// The value slot of each name `text` contains, in the order they are written (a name that
    /// appears twice is listed twice).
    pub fn slots(&self) -> &[u32] {
        &self.names
    }
}

/// A tile operand: a tile, or element `index` of a tile array.
#[derive(Clone, Debug)]
pub struct TileRef {
    /// Index into [`Body::tiles`].
    pub tile: u32,
    /// The element of an array.
    pub index: Option<IntExpr>,
}

/// A float operand.
#[derive(Clone, Debug)]
pub enum FloatVal {
    /// A literal (rounded to `f32`).
    Lit(f32),
    /// `inf` or `-inf`.
    Inf {
        /// `-inf`.
        negative: bool,
    },
    /// A float parameter or local: its float slot.
    Slot(u32),
    /// `f32(EXPR)`.
    OfInt(IntExpr),
    /// `rsqrt(EXPR)`.
    InvSqrt(IntExpr),
}

/// One operand of an instruction, of the kind the instruction table gives it.
#[derive(Clone, Debug)]
pub enum Arg {
    /// A destination or source tile.
    Tile(TileRef),
    /// A tile parameter: index into [`Body::regions`].
    Region(u32),
    /// A float operand.
    Float(FloatVal),
    /// A mode word: its index in [`CMP_MODES`], [`TRI_MODES`] or [`PAD_MODES`].
    Word(u8),
    /// An integer operand.
    Int(IntExpr),
}

/// A piece of a `check` message.
#[derive(Clone, Debug)]
pub enum MsgPart {
    /// Text as written.
    Text(String),
    /// `{name}`: the value of an integer.
    Value(IntExpr),
}

/// A statement of a resolved body.
#[derive(Clone, Debug)]
pub struct BodyStmt {
    /// What it does.
    pub kind: BodyKind,
    /// Where it was written.
    pub loc: Loc,
}

/// The statements of a resolved body (see [`KStmtKind`] for their meaning).
#[derive(Clone, Debug)]
pub enum BodyKind {
    /// A tile declaration and its valid rows and columns.
    Tile {
        /// Index into [`Body::tiles`].
        tile: u32,
        /// Valid rows and columns; `None` = the declared shape.
        valid: Option<(IntExpr, IntExpr)>,
    },
    /// `let NAME: i64 = EXPR;`.
    Let {
        /// The value slot set.
        slot: u32,
        /// Its value.
        value: IntExpr,
    },
    /// `let NAME: f32 = VALUE;`.
    LetFloat {
        /// The float slot set.
        slot: u32,
        /// Its value.
        value: FloatVal,
    },
    /// `for VAR in range(COUNT) { ... }`.
    For {
        /// The loop variable's value slot.
        slot: u32,
        /// Number of iterations.
        count: IntExpr,
        /// The body.
        body: Vec<BodyStmt>,
    },
    /// `if COND { ... } else { ... }`.
    If {
        /// A `bool` expression.
        cond: IntExpr,
        /// Taken when it holds.
        then_body: Vec<BodyStmt>,
        /// Taken otherwise.
        else_body: Vec<BodyStmt>,
    },
    /// `check COND else "MESSAGE";`.
    Check {
        /// A `bool` expression.
        cond: IntExpr,
        /// The message cut at its `{name}`s.
        message: Vec<MsgPart>,
    },
    /// `let NAME: i64 = GETVAL(TILE, ROW, COL);`.
    GetVal {
        /// The value slot set.
        slot: u32,
        /// The tile read.
        tile: TileRef,
        /// Row.
        row: IntExpr,
        /// Column.
        col: IntExpr,
    },
    /// `OP(ARGS);`.
    Inst {
        /// The instruction.
        op: TileOp,
        /// Its operands, one per entry of `op.operands()` (a trailing optional integer that was
        /// not written is absent).
        args: Vec<Arg>,
    },
}

/// What a name means where it is read.
#[derive(Clone, Copy)]
enum Local {
    Tile(u32),
    Region(u32),
    Value(u32),
    Float(u32),
}

struct Resolver<'k> {
    k: &'k KernelDecl,
    scope: Vec<(String, Local)>,
    body: Body,
}

/// Resolves `k`'s body (an empty body when it has none); see the module docs.
pub fn resolve_body(k: &KernelDecl) -> Result<Body, ResolveError> {
    let mut r = Resolver {
        k,
        scope: Vec::new(),
        body: Body {
            kernel: k.name.name.clone(),
            loc: k.name.loc,
            scalars: Vec::new(),
            regions: Vec::new(),
            tiles: Vec::new(),
            values: Vec::new(),
            floats: Vec::new(),
            stmts: Vec::new(),
        },
    };
    r.params();
    let stmts = r.block(k.body.as_deref().unwrap_or(&[]))?;
    r.body.stmts = stmts;
    Ok(r.body)
}

fn param_slot(name: &str) -> Slot {
    Slot {
        name: name.to_string(),
        loc: Loc::NONE,
    }
}

impl Resolver<'_> {
    fn malformed(&self, message: String, loc: Loc) -> ResolveError {
        ResolveError::Malformed {
            message: format!("kernel `{}`: {message}", self.k.name),
            loc,
        }
    }

    fn params(&mut self) {
        let mut regions = Vec::new();
        for p in &self.k.params {
            let name = &p.name.name;
            match &p.kind {
                ParamKind::Scalar(t) => {
                    let i = self.body.scalars.len() as u32;
                    let local = if t.is_float() {
                        Local::Float(i)
                    } else {
                        Local::Value(i)
                    };
                    self.scope.push((name.clone(), local));
                    self.body.scalars.push(ScalarParam {
                        name: name.clone(),
                        ty: *t,
                    });
                    self.body.values.push(param_slot(name));
                    self.body.floats.push(param_slot(name));
                }
                ParamKind::Tile {
                    access,
                    dtype,
                    shape,
                } => {
                    let i = regions.len() as u32;
                    self.scope.push((name.clone(), Local::Region(i)));
                    regions.push(RegionParam {
                        name: name.clone(),
                        access: *access,
                        dtype: *dtype,
                        shape: shape.clone(),
                        extents: (0, 0),
                    });
                }
            }
        }
        for r in &mut regions {
            let rows = self.body.values.len() as u32;
            for (is_rows, slot) in [(true, rows), (false, rows + 1)] {
                let n = extent_name(is_rows, &r.name);
                self.scope.push((n.clone(), Local::Value(slot)));
                self.body.values.push(param_slot(&n));
            }
            r.extents = (rows, rows + 1);
        }
        self.body.regions = regions;
    }

    fn find(&self, name: &str) -> Option<Local> {
        self.scope
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, l)| *l)
    }

    fn int(&self, e: &Expr, loc: Loc) -> Result<IntExpr, ResolveError> {
        IntExpr::resolve(e, &mut |n| match self.find(n) {
            Some(Local::Value(i)) => Some(i),
            _ => None,
        })
        .map_err(|x| self.malformed(format!("`{e}`: {x}"), loc))
    }

    fn declare_value(&mut self, name: &Ident, loc: Loc) -> u32 {
        let slot = self.body.values.len() as u32;
        self.body.values.push(Slot {
            name: name.name.clone(),
            loc,
        });
        self.scope.push((name.name.clone(), Local::Value(slot)));
        slot
    }

    fn block(&mut self, body: &[KStmt]) -> Result<Vec<BodyStmt>, ResolveError> {
        let mark = self.scope.len();
        let mut out = Vec::with_capacity(body.len());
        for s in body {
            out.push(BodyStmt {
                kind: self.stmt(s)?,
                loc: s.loc,
            });
        }
        self.scope.truncate(mark);
        Ok(out)
    }

    fn stmt(&mut self, s: &KStmt) -> Result<BodyKind, ResolveError> {
        let loc = s.loc;
        Ok(match &s.kind {
            KStmtKind::Tile(t) => {
                let valid = match &t.valid {
                    Some((r, c)) => Some((self.int(r, loc)?, self.int(c, loc)?)),
                    None => None,
                };
                let tile = self.body.tiles.len() as u32;
                self.body.tiles.push(TileSlot {
                    decl: t.clone(),
                    loc,
                });
                self.scope.push((t.name.name.clone(), Local::Tile(tile)));
                BodyKind::Tile { tile, valid }
            }
            KStmtKind::Let { name, value } => {
                let value = self.int(value, loc)?;
                BodyKind::Let {
                    slot: self.declare_value(name, loc),
                    value,
                }
            }
            KStmtKind::GetVal {
                name,
                tile,
                row,
                col,
            } => {
                let tile = self.tile_ref(tile, loc)?;
                let (row, col) = (self.int(row, loc)?, self.int(col, loc)?);
                BodyKind::GetVal {
                    slot: self.declare_value(name, loc),
                    tile,
                    row,
                    col,
                }
            }
            KStmtKind::LetFloat { name, value } => {
                let value = self.float(value, loc)?;
                let slot = self.body.floats.len() as u32;
                self.body.floats.push(Slot {
                    name: name.name.clone(),
                    loc,
                });
                self.scope.push((name.name.clone(), Local::Float(slot)));
                BodyKind::LetFloat { slot, value }
            }
            KStmtKind::Check { cond, message } => BodyKind::Check {
                cond: self.int(cond, loc)?,
                message: self.message(message, loc)?,
            },
            KStmtKind::For { var, count, body } => {
                let count = self.int(count, loc)?;
                let mark = self.scope.len();
                let slot = self.declare_value(var, loc);
                let body = self.block(body)?;
                self.scope.truncate(mark);
                BodyKind::For { slot, count, body }
            }
            KStmtKind::If {
                cond,
                then_body,
                else_body,
            } => BodyKind::If {
                cond: self.int(cond, loc)?,
                then_body: self.block(then_body)?,
                else_body: self.block(else_body)?,
            },
            KStmtKind::Inst { op, args } => BodyKind::Inst {
                op: *op,
                args: self.inst(*op, args, loc)?,
            },
        })
    }

    /// A tile operand (`t` or `t[i]`).
    fn tile_ref(&self, a: &InstArg, loc: Loc) -> Result<TileRef, ResolveError> {
        let (id, index) = match a {
            InstArg::Name(id) => (id, None),
            InstArg::Index(id, e) => (id, Some(e)),
            _ => return Err(self.malformed(format!("`{a}` is not a tile"), loc)),
        };
        let Some(Local::Tile(tile)) = self.find(&id.name) else {
            return Err(self.malformed(
                format!("`{}` is not a tile declared in the body", id.name),
                loc,
            ));
        };
        let array = self.body.tiles[tile as usize].decl.count.is_some();
        let index = match (index, array) {
            (Some(e), true) => Some(self.int(e, loc)?),
            (None, false) => None,
            (None, true) => {
                return Err(self.malformed(format!("`{}` is a tile array: name one", id), loc));
            }
            (Some(_), false) => {
                return Err(self.malformed(format!("`{}` is one tile, not an array", id), loc));
            }
        };
        Ok(TileRef { tile, index })
    }

    /// A float operand.
    fn float(&self, a: &InstArg, loc: Loc) -> Result<FloatVal, ResolveError> {
        Ok(match a {
            InstArg::Expr(Expr::Float(v)) => FloatVal::Lit(v.value() as f32),
            InstArg::Float(FloatArg::Inf { negative }) => FloatVal::Inf {
                negative: *negative,
            },
            InstArg::Float(FloatArg::OfInt(e)) => FloatVal::OfInt(self.int(e, loc)?),
            InstArg::Float(FloatArg::InvSqrt(e)) => FloatVal::InvSqrt(self.int(e, loc)?),
            InstArg::Name(id) => match self.find(&id.name) {
                Some(Local::Float(i)) => FloatVal::Slot(i),
                _ => {
                    return Err(self.malformed(
                        format!("`{}` is not a float parameter or local", id.name),
                        loc,
                    ));
                }
            },
            _ => return Err(self.malformed(format!("`{a}` is not a float operand"), loc)),
        })
    }

    /// A `check` message cut at its `{name}`s.
    fn message(&self, text: &str, loc: Loc) -> Result<Vec<MsgPart>, ResolveError> {
        let mut parts = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            let close = rest[open..].find('}').ok_or_else(|| {
                self.malformed(
                    format!("the message `{text}` has a `{{` without its `}}`"),
                    loc,
                )
            })?;
            parts.push(MsgPart::Text(rest[..open].to_string()));
            let name = &rest[open + 1..open + close];
            parts.push(MsgPart::Value(
                self.int(&Expr::Name(Ident::new(name)), loc)?,
            ));
            rest = &rest[open + close + 1..];
        }
        parts.push(MsgPart::Text(rest.to_string()));
        Ok(parts)
    }

    fn inst(&self, op: TileOp, args: &[InstArg], loc: Loc) -> Result<Vec<Arg>, ResolveError> {
        let m = op.mnemonic();
        let kinds = op.operands();
        if args.len() > kinds.len() {
            return Err(self.malformed(
                format!(
                    "{m}: {} operands, expected at most {}",
                    args.len(),
                    kinds.len()
                ),
                loc,
            ));
        }
        let mut out = Vec::with_capacity(args.len());
        for (i, kind) in kinds.iter().enumerate() {
            let Some(arg) = args.get(i) else {
                if *kind == Operand::OptInt {
                    continue;
                }
                return Err(self.malformed(format!("{m}: operand {} is missing", i + 1), loc));
            };
            let name = match arg {
                InstArg::Name(id) => Some(id.name.as_str()),
                _ => None,
            };
            let bad = || {
                self.malformed(
                    format!("{m}: operand {} `{arg}` is not a {kind:?} operand", i + 1),
                    loc,
                )
            };
            let word = |words: &[&str]| {
                name.and_then(|n| words.iter().position(|w| *w == n))
                    .map(|p| Arg::Word(p as u8))
                    .ok_or_else(bad)
            };
            out.push(match kind {
                Operand::Dst | Operand::Src => Arg::Tile(self.tile_ref(arg, loc)?),
                Operand::Global => match name.and_then(|n| self.find(n)) {
                    Some(Local::Region(r)) => Arg::Region(r),
                    _ => return Err(bad()),
                },
                Operand::Float => Arg::Float(self.float(arg, loc)?),
                Operand::CmpMode => word(CMP_MODES)?,
                Operand::TriMode => word(TRI_MODES)?,
                Operand::PadMode => word(PAD_MODES)?,
                Operand::Int | Operand::OptInt => {
                    let e = match arg {
                        InstArg::Name(id) => Expr::Name(id.clone()),
                        InstArg::Expr(e) => e.clone(),
                        _ => return Err(bad()),
                    };
                    Arg::Int(self.int(&e, loc)?)
                }
            });
        }
        Ok(out)
    }
}
