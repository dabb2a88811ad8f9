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
//! kernel, at the location of the statement it is in. This is the one place a body's names are
//! looked up: the validator checks the body [`resolve_body_all`] gives with every such mistake
//! (so its messages about names are this module's), and every consumer reads the [`Body`].
//! Scoping: a name is visible after its declaration to the end of its block; declaring a name
//! that is visible (a parameter, an outer local) is a mistake.

use super::ResolveError;
use crate::eval::Compiled;
use crate::expr::Expr;
use crate::kernel_body::{
    FloatArg, InstArg, KStmt, KStmtKind, TileDecl, extent_name, parse_extent,
};
use crate::loc::{Ident, Loc};
use crate::module::{KernelDecl, ParamKind};
use crate::tile_isa::{CMP_MODES, Operand, PAD_MODES, TRI_MODES, TileOp};
use crate::types::{Access, DType, ParamType, ScalarType};

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

/// A place of a body [`resolve_body_all`] could not resolve: a value slot, tile or region
/// index that stands for a name that means nothing there (never in a body [`resolve_body`]
/// returns).
pub(crate) const UNRESOLVED: u32 = u32::MAX;

impl Body {
    /// The type of value slot `slot`: a scalar parameter's carrier type, `i64` for every other
    /// slot (extents, `let`, `GETVAL`, loop variables); `None` for [`UNRESOLVED`].
    pub fn value_type(&self, slot: u32) -> Option<ScalarType> {
        match self.scalars.get(slot as usize) {
            Some(p) => Some(p.ty.carrier()),
            None if (slot as usize) < self.values.len() => Some(ScalarType::I64),
            None => None,
        }
    }
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
    /// Why each name that means no integer where it stands does not ([`UNRESOLVED`] in
    /// `names`); empty in every body [`resolve_body`] returns.
    unresolved: Vec<String>,
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
            unresolved: Vec::new(),
        })
    }

    /// Why the names of `text` that mean no integer where they stand do not, in the order they
    /// are written: empty in a body [`resolve_body`] returns (see [`resolve_body_all`]).
    pub(crate) fn unresolved(&self) -> &[String] {
        &self.unresolved
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

/// A mistake in a body's names or operands, found by resolution: what is wrong (naming the
/// instruction, operand or declaration) and the location of its statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BodyProblem {
    /// What is wrong.
    pub(crate) message: String,
    /// The statement.
    pub(crate) loc: Loc,
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
    /// Mistakes outside integer expressions (those stay in their [`IntExpr`]).
    problems: Vec<BodyProblem>,
    /// The first mistake of any kind, as [`resolve_body`] reports it.
    first: Option<BodyProblem>,
}

/// Resolves `k`'s body (an empty body when it has none); see the module docs.
pub fn resolve_body(k: &KernelDecl) -> Result<Body, ResolveError> {
    let (body, first) = run(k);
    match first {
        Some(p) => Err(ResolveError::Malformed {
            message: format!("kernel `{}`: {}", k.name, p.message),
            loc: p.loc,
        }),
        None => Ok(body.0),
    }
}

/// Resolves `k`'s body going on past every mistake: the body, where a name that means nothing
/// is [`UNRESOLVED`] (in an [`IntExpr`], with the reason in [`IntExpr::unresolved`]) and an
/// instruction with a wrong number of operands, or a tile or region operand that names
/// nothing, is left out; and every mistake outside integer expressions, in statement order.
/// Empty problems and no unresolved name means [`resolve_body`] gives the same body.
pub(crate) fn resolve_body_all(k: &KernelDecl) -> (Body, Vec<BodyProblem>) {
    run(k).0
}

type Outcome = ((Body, Vec<BodyProblem>), Option<BodyProblem>);

fn run(k: &KernelDecl) -> Outcome {
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
        problems: Vec::new(),
        first: None,
    };
    r.params();
    let stmts = r.block(k.body.as_deref().unwrap_or(&[]));
    r.body.stmts = stmts;
    ((r.body, r.problems), r.first)
}

fn param_slot(name: &str) -> Slot {
    Slot {
        name: name.to_string(),
        loc: Loc::NONE,
    }
}

/// The words of a mode operand and what they are, for messages.
fn words_of(kind: Operand) -> (&'static [&'static str], &'static str) {
    match kind {
        Operand::CmpMode => (CMP_MODES, "a comparison mode"),
        Operand::TriMode => (TRI_MODES, "a triangle"),
        _ => (PAD_MODES, "a padding value"),
    }
}

impl Resolver<'_> {
    /// Records a mistake outside an integer expression.
    fn problem(&mut self, message: String, loc: Loc) {
        let p = BodyProblem { message, loc };
        if self.first.is_none() {
            self.first = Some(p.clone());
        }
        self.problems.push(p);
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

    /// Why `name`, which is `what` where it stands, is no integer or `bool`.
    fn not_a_value(&self, name: &str, what: Option<Local>) -> String {
        match what {
            Some(Local::Tile(_)) => format!("tile `{name}` is not a scalar"),
            Some(Local::Float(i)) if i as usize >= self.body.scalars.len() => {
                format!("`{name}` is a float local, not an integer")
            }
            Some(_) => format!("`{name}` is not an integer or bool scalar"),
            None => match parse_extent(name) {
                Some((_, of)) => format!("`{of}` in `{name}` is not a tile parameter"),
                None => format!("unknown name `{name}`"),
            },
        }
    }

    /// An integer or `bool` expression; a name that means no integer is [`UNRESOLVED`], its
    /// reason kept in the result.
    fn int(&mut self, e: &Expr, loc: Loc) -> IntExpr {
        let mut unresolved = Vec::new();
        let this = &*self;
        let resolved = IntExpr::resolve(e, &mut |n| match this.find(n) {
            Some(Local::Value(i)) => Some(i),
            other => {
                unresolved.push(this.not_a_value(n, other));
                Some(UNRESOLVED)
            }
        });
        // Every name has a slot (or `UNRESOLVED`), so resolution does not fail.
        let mut out = resolved.unwrap_or_else(|_| IntExpr {
            compiled: Compiled::constant(crate::value::Value::I64(0)),
            text: e.clone(),
            names: vec![UNRESOLVED],
            unresolved: Vec::new(),
        });
        if let Some(why) = unresolved.first()
            && self.first.is_none()
        {
            self.first = Some(BodyProblem {
                message: format!("`{e}`: {why}"),
                loc,
            });
        }
        out.unresolved = unresolved;
        out
    }

    /// Declares `name` at `loc` as `what`; a name already visible is a mistake (and the new
    /// declaration hides it).
    fn declare(&mut self, name: &Ident, what: Local, loc: Loc) {
        if self.find(&name.name).is_some() {
            self.problem(format!("`{}` is already declared", name.name), loc);
        }
        self.scope.push((name.name.clone(), what));
    }

    fn declare_value(&mut self, name: &Ident, loc: Loc) -> u32 {
        let slot = self.body.values.len() as u32;
        self.body.values.push(Slot {
            name: name.name.clone(),
            loc,
        });
        self.declare(name, Local::Value(slot), loc);
        slot
    }

    fn block(&mut self, body: &[KStmt]) -> Vec<BodyStmt> {
        let mark = self.scope.len();
        let mut out = Vec::with_capacity(body.len());
        for s in body {
            if let Some(kind) = self.stmt(s) {
                out.push(BodyStmt { kind, loc: s.loc });
            }
        }
        self.scope.truncate(mark);
        out
    }

    /// A statement; `None` for an instruction left out (see [`resolve_body_all`]).
    fn stmt(&mut self, s: &KStmt) -> Option<BodyKind> {
        let loc = s.loc;
        Some(match &s.kind {
            KStmtKind::Tile(t) => {
                let valid = t
                    .valid
                    .as_ref()
                    .map(|(r, c)| (self.int(r, loc), self.int(c, loc)));
                let tile = self.body.tiles.len() as u32;
                self.body.tiles.push(TileSlot {
                    decl: t.clone(),
                    loc,
                });
                self.declare(&t.name, Local::Tile(tile), loc);
                BodyKind::Tile { tile, valid }
            }
            KStmtKind::Let { name, value } => {
                let value = self.int(value, loc);
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
                let tile = self.tile_ref("GETVAL", 1, tile, loc).unwrap_or(TileRef {
                    tile: UNRESOLVED,
                    index: None,
                });
                let (row, col) = (self.int(row, loc), self.int(col, loc));
                BodyKind::GetVal {
                    slot: self.declare_value(name, loc),
                    tile,
                    row,
                    col,
                }
            }
            KStmtKind::LetFloat { name, value } => {
                let value = self.float("the value of a float local", 0, value, loc);
                let slot = self.body.floats.len() as u32;
                self.body.floats.push(Slot {
                    name: name.name.clone(),
                    loc,
                });
                self.declare(name, Local::Float(slot), loc);
                BodyKind::LetFloat { slot, value }
            }
            KStmtKind::Check { cond, message } => BodyKind::Check {
                cond: self.int(cond, loc),
                message: self.message(message, loc),
            },
            KStmtKind::For { var, count, body } => {
                let count = self.int(count, loc);
                let mark = self.scope.len();
                let slot = self.declare_value(var, loc);
                let body = self.block(body);
                self.scope.truncate(mark);
                BodyKind::For { slot, count, body }
            }
            KStmtKind::If {
                cond,
                then_body,
                else_body,
            } => BodyKind::If {
                cond: self.int(cond, loc),
                then_body: self.block(then_body),
                else_body: self.block(else_body),
            },
            KStmtKind::Inst { op, args } => BodyKind::Inst {
                op: *op,
                args: self.inst(*op, args, loc)?,
            },
        })
    }

    /// Tile operand `n` of `mn` (`t` or `t[i]`), `None` (the mistake recorded) when it is none.
    fn tile_ref(&mut self, mn: &str, n: usize, a: &InstArg, loc: Loc) -> Option<TileRef> {
        let (id, index) = match a {
            InstArg::Name(id) => (id, None),
            InstArg::Index(id, e) => (id, Some(e)),
            _ => {
                self.problem(format!("{mn} operand {n} must be a tile"), loc);
                return None;
            }
        };
        let Some(Local::Tile(tile)) = self.find(&id.name) else {
            self.problem(
                format!(
                    "{mn} operand {n}: `{}` is not a tile declared in the body",
                    id.name
                ),
                loc,
            );
            return None;
        };
        let count = self.body.tiles[tile as usize].decl.count;
        let index = match (index, count) {
            (Some(e), Some(_)) => Some(self.int(e, loc)),
            (None, None) => None,
            (None, Some(len)) => {
                self.problem(
                    format!(
                        "{mn} operand {n}: `{}` is an array of {len} tiles: name one, `{}[i]`",
                        id.name, id.name
                    ),
                    loc,
                );
                return None;
            }
            (Some(_), None) => {
                self.problem(
                    format!("{mn} operand {n}: `{}` is one tile, not an array", id.name),
                    loc,
                );
                return None;
            }
        };
        Some(TileRef { tile, index })
    }

    /// Float operand `n` of `mn` (a literal `0` standing for one that is none).
    fn float(&mut self, mn: &str, n: usize, a: &InstArg, loc: Loc) -> FloatVal {
        match a {
            InstArg::Expr(Expr::Float(v)) => return FloatVal::Lit(v.value() as f32),
            InstArg::Float(FloatArg::Inf { negative }) => {
                return FloatVal::Inf {
                    negative: *negative,
                };
            }
            InstArg::Float(FloatArg::OfInt(e)) => return FloatVal::OfInt(self.int(e, loc)),
            InstArg::Float(FloatArg::InvSqrt(e)) => return FloatVal::InvSqrt(self.int(e, loc)),
            InstArg::Name(id) => {
                if let Some(Local::Float(i)) = self.find(&id.name) {
                    return FloatVal::Slot(i);
                }
            }
            _ => {}
        }
        self.problem(
            format!(
                "{mn} operand {n} must be a float literal, an f32 / f64 parameter or local, \
                 `inf`, `-inf`, `f32(INTEGER)` or `rsqrt(INTEGER)`"
            ),
            loc,
        );
        FloatVal::Lit(0.0)
    }

    /// A `check` message cut at its `{name}`s.
    fn message(&mut self, text: &str, loc: Loc) -> Vec<MsgPart> {
        let mut parts = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            let Some(close) = rest[open..].find('}') else {
                self.problem(
                    "the message of `check` has a `{` without its `}`".into(),
                    loc,
                );
                break;
            };
            parts.push(MsgPart::Text(rest[..open].to_string()));
            let name = &rest[open + 1..open + close];
            parts.push(MsgPart::Value(self.int(&Expr::Name(Ident::new(name)), loc)));
            rest = &rest[open + close + 1..];
        }
        parts.push(MsgPart::Text(rest.to_string()));
        parts
    }

    /// The operands of `op`, one per entry of its table row; `None` (the mistake recorded) when
    /// their number is wrong or a tile or region operand names nothing.
    fn inst(&mut self, op: TileOp, args: &[InstArg], loc: Loc) -> Option<Vec<Arg>> {
        let mn = op.mnemonic();
        let kinds = op.operands();
        let required = kinds.iter().filter(|k| **k != Operand::OptInt).count();
        if args.len() < required || args.len() > kinds.len() {
            let range = if required == kinds.len() {
                format!("{required}")
            } else {
                format!("{required} to {}", kinds.len())
            };
            self.problem(
                format!("{mn} takes {range} operands, {} given", args.len()),
                loc,
            );
            return None;
        }
        let mut out = Vec::with_capacity(args.len());
        for (i, (kind, arg)) in kinds.iter().zip(args).enumerate() {
            let n = i + 1;
            let name = match arg {
                InstArg::Name(id) => Some(id),
                _ => None,
            };
            out.push(match kind {
                Operand::Dst | Operand::Src => Arg::Tile(self.tile_ref(mn, n, arg, loc)?),
                Operand::Global => match name.map(|id| (id, self.find(&id.name))) {
                    Some((_, Some(Local::Region(r)))) => Arg::Region(r),
                    Some((id, _)) => {
                        self.problem(
                            format!(
                                "{mn} operand {n}: `{id}` is not a tile parameter of the kernel"
                            ),
                            loc,
                        );
                        return None;
                    }
                    None => {
                        self.problem(format!("{mn} operand {n} must be a tile parameter"), loc);
                        return None;
                    }
                },
                Operand::Float => Arg::Float(self.float(mn, n, arg, loc)),
                Operand::CmpMode | Operand::TriMode | Operand::PadMode => {
                    let (words, what) = words_of(*kind);
                    match name.and_then(|id| words.iter().position(|w| *w == id.name)) {
                        Some(p) => Arg::Word(p as u8),
                        None => {
                            self.problem(
                                format!("{mn} operand {n} must be {what} ({})", words.join(", ")),
                                loc,
                            );
                            Arg::Word(u8::MAX)
                        }
                    }
                }
                Operand::Int | Operand::OptInt => Arg::Int(match arg {
                    InstArg::Name(id) => self.int(&Expr::Name(id.clone()), loc),
                    InstArg::Expr(e) => self.int(e, loc),
                    _ => {
                        self.problem(
                            format!("{mn} operand {n} must be an integer expression"),
                            loc,
                        );
                        IntExpr {
                            compiled: Compiled::constant(crate::value::Value::I64(0)),
                            text: Expr::Name(Ident::new(arg.to_string())),
                            names: vec![UNRESOLVED],
                            unresolved: Vec::new(),
                        }
                    }
                }),
            });
        }
        Some(out)
    }
}
