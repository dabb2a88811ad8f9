//! Kernel bodies: a kernel written in PTO tile instructions instead of named as a built-in.
//!
//! Why: a user writes their own tile kernels (the PDE specification's kernel API, the back-end
//! architecture specification); the same body must run on the CPU simulation, be costed per
//! instruction and be emitted as PTO-ISA C++. This module holds the body's IR — typed tile
//! declarations, scalar locals, counted loops, `if`, and instructions from the one table in
//! [`crate::tile_isa`] — and its canonical text.
//!
//! Text form (after the kernel's parameter list and pool, instead of `;`):
//! ```text
//! kernel rms(in x: f32[8, 64], out y: f32[8, 64], eps: f64) @vector {
//!     tile xt: vec f32[8, 64];
//!     tile s: vec f32[8, 1] valid(rows, 1);
//!     let half: i64 = 4;
//!     for i in range(2) { TLOAD(xt, x, i * half, 0); }
//!     if half > 2 { TROWSUM(s, xt); } else { TEXPANDS(s, 0.0); }
//!     TSTORE(y, xt);
//! }
//! ```
//! Inside a body, the extents of a tile parameter `x` (its region seen as rows × cols) are the
//! integer names `rows(x)` and `cols(x)` ([`extent_name`]), so that one body serves regions of
//! any size (`?` dimensions). Further statements: `check COND else "message";` fails the task
//! with the message (`{name}` in it is replaced by the value of the integer `name`), and
//! `let v: i64 = GETVAL(t, r, c);` reads one element of an integer tile. A tile may be an array
//! (`tile acc[16]: vec f32[1, 128];`, operands `acc[g]`). Float operands are literals, float
//! parameters and locals (`let s: f32 = ...;`), `inf`, `-inf`, `f32(EXPR)` of an integer
//! expression or `rsqrt(EXPR)`.
//!
//! Promise: `Display` prints a body so that the parser reads back an equal body.

use crate::expr::Expr;
use crate::loc::{Ident, Loc};
use crate::resolve::body::{Arg, Body, BodyKind, BodyStmt, IntExpr};
use crate::tile_isa::TileOp;
use crate::types::DType;
use crate::value::Value;

/// The PTO tile kinds (where a tile lives on the device).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TileKind {
    /// Vector unit buffer (`TileType::Vec`).
    Vec,
    /// L1 matrix buffer (`TileType::Mat`).
    Mat,
    /// Left matmul operand (`TileType::Left`).
    Left,
    /// Right matmul operand (`TileType::Right`).
    Right,
    /// Matmul accumulator (`TileType::Acc`).
    Acc,
}

crate::types::keyword_impl!(TileKind {
    Vec = "vec",
    Mat = "mat",
    Left = "left",
    Right = "right",
    Acc = "acc",
});

/// `tile NAME: KIND DTYPE[ROWS, COLS] [valid(VROWS, VCOLS)];`
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TileDecl {
    /// The tile's name.
    pub name: Ident,
    /// Where it lives.
    pub kind: TileKind,
    /// Element type (`f32`, `f16` or `bf16`).
    pub dtype: DType,
    /// Declared rows (static).
    pub rows: u64,
    /// Declared columns (static).
    pub cols: u64,
    /// Valid rows and columns, expressions over the kernel's integer parameters and locals
    /// declared before the tile; `None` = the declared shape.
    pub valid: Option<(Expr, Expr)>,
    /// `tile NAME[N]: ...`: an array of `N` tiles of this type (each element its own buffer),
    /// named in operands as `NAME[i]`; `None` = one tile.
    pub count: Option<u64>,
}

/// The most elements of a tile array.
pub const MAX_TILE_ARRAY: u64 = 1024;

/// The name standing for a region extent in a body: `rows(x)` or `cols(x)` of tile parameter
/// `x` (the region seen as rows × cols).
pub fn extent_name(rows: bool, of: &str) -> String {
    format!("{}({of})", if rows { "rows" } else { "cols" })
}

/// The parts of a name made by [`extent_name`]: (`true` for rows, the tile parameter).
pub fn parse_extent(name: &str) -> Option<(bool, &str)> {
    let (rows, rest) = if let Some(r) = name.strip_prefix("rows(") {
        (true, r)
    } else {
        (false, name.strip_prefix("cols(")?)
    };
    Some((rows, rest.strip_suffix(')')?))
}

/// A float operand written other than as a literal or a parameter.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum FloatArg {
    /// `inf` or `-inf`.
    Inf {
        /// `-inf`.
        negative: bool,
    },
    /// `f32(EXPR)`: the value of an integer expression as a float.
    OfInt(Expr),
    /// `rsqrt(EXPR)`: `1 / √EXPR` of an integer expression, computed in `f64` and rounded once
    /// to `f32` (attention's default scale `1/√D`).
    InvSqrt(Expr),
}

/// One operand of an instruction as written.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum InstArg {
    /// A tile, a tile parameter, or a scalar parameter / local (the validator decides which).
    Name(Ident),
    /// `NAME[INDEX]`: element `INDEX` of a tile array.
    Index(Ident, Expr),
    /// Any other expression (a float literal or an integer expression).
    Expr(Expr),
    /// `inf`, `-inf` or `f32(EXPR)`.
    Float(FloatArg),
}

impl InstArg {
    /// The tile (or tile array) this operand names, if it names one.
    pub fn tile_name(&self) -> Option<&Ident> {
        match self {
            InstArg::Name(id) | InstArg::Index(id, _) => Some(id),
            _ => None,
        }
    }
}

/// A statement of a kernel body.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KStmt {
    /// What it does.
    pub kind: KStmtKind,
    /// Where it was written.
    pub loc: Loc,
}

impl KStmt {
    /// A statement with no source location.
    pub fn new(kind: KStmtKind) -> KStmt {
        KStmt {
            kind,
            loc: Loc::NONE,
        }
    }

    /// `OP(ARGS);` with every operand a name (tiles, tile parameters, scalar parameters).
    pub fn inst(op: TileOp, names: &[&str]) -> KStmt {
        KStmt::new(KStmtKind::Inst {
            op,
            args: names
                .iter()
                .map(|n| InstArg::Name(Ident::new(*n)))
                .collect(),
        })
    }

    /// `tile NAME: KIND DTYPE[ROWS, COLS];`
    pub fn tile(name: &str, kind: TileKind, dtype: DType, rows: u64, cols: u64) -> KStmt {
        KStmt::new(KStmtKind::Tile(TileDecl {
            name: Ident::new(name),
            kind,
            dtype,
            rows,
            cols,
            valid: None,
            count: None,
        }))
    }
}

/// The statements of a kernel body.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum KStmtKind {
    /// `tile ...;` (see [`TileDecl`]).
    Tile(TileDecl),
    /// `let NAME: i64 = EXPR;`: an immutable integer local.
    Let {
        /// The local's name.
        name: Ident,
        /// Its value.
        value: Expr,
    },
    /// `for VAR in range(COUNT) { ... }`: `VAR` runs `0 .. COUNT`.
    For {
        /// The loop variable (`i64`).
        var: Ident,
        /// Number of iterations.
        count: Expr,
        /// The body.
        body: Vec<KStmt>,
    },
    /// `if COND { ... } else { ... }`.
    If {
        /// A `bool` expression.
        cond: Expr,
        /// Taken when it holds.
        then_body: Vec<KStmt>,
        /// Taken otherwise.
        else_body: Vec<KStmt>,
    },
    /// `OP(ARGS);`: one tile instruction.
    Inst {
        /// The instruction.
        op: TileOp,
        /// Its operands as written.
        args: Vec<InstArg>,
    },
    /// `let NAME: f32 = VALUE;`: an immutable float local, usable wherever a float operand is;
    /// `VALUE` is a float operand (a literal, a float parameter or local, `inf`, `-inf`,
    /// `f32(EXPR)`, `rsqrt(EXPR)`).
    LetFloat {
        /// The local's name.
        name: Ident,
        /// Its value.
        value: InstArg,
    },
    /// `check COND else "MESSAGE";`: the task fails with `MESSAGE` (each `{name}` replaced by
    /// the value of the integer `name` in scope) unless `COND` holds; nothing after it runs.
    Check {
        /// A `bool` expression.
        cond: Expr,
        /// The message, without quotes.
        message: String,
    },
    /// `let NAME: i64 = GETVAL(TILE, ROW, COL);`: one element of an integer tile (PTO-ISA's
    /// `GetValue` on the scalar unit), an immutable local.
    GetVal {
        /// The local's name.
        name: Ident,
        /// The tile (a name or an array element).
        tile: InstArg,
        /// Row within the tile's valid part.
        row: Expr,
        /// Column within the tile's valid part.
        col: Expr,
    },
}

impl std::fmt::Display for InstArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InstArg::Name(id) => f.write_str(&id.name),
            InstArg::Index(id, e) => write!(f, "{id}[{e}]"),
            InstArg::Expr(e) => write!(f, "{e}"),
            InstArg::Float(FloatArg::Inf { negative }) => {
                f.write_str(if *negative { "-inf" } else { "inf" })
            }
            InstArg::Float(FloatArg::OfInt(e)) => write!(f, "f32({e})"),
            InstArg::Float(FloatArg::InvSqrt(e)) => write!(f, "rsqrt({e})"),
        }
    }
}

/// Writes `body` at `indent` levels of four spaces, one statement per line.
pub(crate) fn print_body(
    f: &mut std::fmt::Formatter<'_>,
    body: &[KStmt],
    indent: usize,
) -> std::fmt::Result {
    let pad = "    ".repeat(indent);
    for s in body {
        match &s.kind {
            KStmtKind::Tile(t) => {
                write!(f, "{pad}tile {}", t.name)?;
                if let Some(n) = t.count {
                    write!(f, "[{n}]")?;
                }
                write!(f, ": {} {}[{}, {}]", t.kind, t.dtype, t.rows, t.cols)?;
                if let Some((r, c)) = &t.valid {
                    write!(f, " valid({r}, {c})")?;
                }
                writeln!(f, ";")?;
            }
            KStmtKind::Let { name, value } => writeln!(f, "{pad}let {name}: i64 = {value};")?,
            KStmtKind::For { var, count, body } => {
                writeln!(f, "{pad}for {var} in range({count}) {{")?;
                print_body(f, body, indent + 1)?;
                writeln!(f, "{pad}}}")?;
            }
            KStmtKind::If {
                cond,
                then_body,
                else_body,
            } => {
                writeln!(f, "{pad}if {cond} {{")?;
                print_body(f, then_body, indent + 1)?;
                if else_body.is_empty() {
                    writeln!(f, "{pad}}}")?;
                } else {
                    writeln!(f, "{pad}}} else {{")?;
                    print_body(f, else_body, indent + 1)?;
                    writeln!(f, "{pad}}}")?;
                }
            }
            KStmtKind::Check { cond, message } => {
                writeln!(f, "{pad}check {cond} else \"{message}\";")?
            }
            KStmtKind::LetFloat { name, value } => writeln!(f, "{pad}let {name}: f32 = {value};")?,
            KStmtKind::GetVal {
                name,
                tile,
                row,
                col,
            } => writeln!(f, "{pad}let {name}: i64 = GETVAL({tile}, {row}, {col});")?,
            KStmtKind::Inst { op, args } => {
                write!(f, "{pad}{}(", op.mnemonic())?;
                for (i, a) in args.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{a}")?;
                }
                writeln!(f, ");")?;
            }
        }
    }
    Ok(())
}

/// Why a body could not be walked (cycle model, execution): an expression that does not
/// evaluate, a valid size out of the tile, a missing scalar parameter.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("kernel `{kernel}`: {message}")]
pub struct BodyError {
    /// The kernel.
    pub kernel: String,
    /// What went wrong.
    pub message: String,
}

/// What [`Walk::run`] calls for each instruction executed.
pub type OnInst<'f> = dyn FnMut(&Walk<'_>, TileOp, &[Arg]) -> Result<(), BodyError> + 'f;

/// The valid rows × cols of every tile and the value slots while walking a resolved body
/// ([`crate::resolve::body`]).
pub struct Walk<'b> {
    body: &'b Body,
    env: Vec<Value>,
    tiles: Vec<(u64, u64)>,
}

impl<'b> Walk<'b> {
    /// A walk of `body` with its scalar parameters bound to the raw values `scalars` (in
    /// declaration order, as a task passes them); region extents (`rows(x)`, `cols(x)`) are 0
    /// (see [`Walk::with_regions`]).
    pub fn new(body: &'b Body, scalars: &[u64]) -> Result<Walk<'b>, BodyError> {
        Walk::with_regions(body, scalars, &[])
    }

    /// [`Walk::new`] with the rows × cols of the task's regions (one per tile parameter, in
    /// order; missing ones count as 0 × 0), which `rows(x)` and `cols(x)` name.
    pub fn with_regions(
        body: &'b Body,
        scalars: &[u64],
        regions: &[(u64, u64)],
    ) -> Result<Walk<'b>, BodyError> {
        use crate::types::ScalarType;
        let mut env = vec![Value::I64(0); body.values.len()];
        for (i, p) in body.scalars.iter().enumerate() {
            let Some(&raw) = scalars.get(i) else {
                return Err(BodyError {
                    kernel: body.kernel.clone(),
                    message: format!("scalar parameter `{}` is not given", p.name),
                });
            };
            env[i] = match p.ty.carrier() {
                ScalarType::Bool => Value::Bool(raw != 0),
                ScalarType::I64 => Value::I64(raw as i64),
                ScalarType::U64 => Value::U64(raw),
            };
        }
        for (i, r) in body.regions.iter().enumerate() {
            let (rows, cols) = regions.get(i).copied().unwrap_or((0, 0));
            env[r.extents.0 as usize] = Value::I64(rows as i64);
            env[r.extents.1 as usize] = Value::I64(cols as i64);
        }
        Ok(Walk {
            body,
            env,
            tiles: vec![(0, 0); body.tiles.len()],
        })
    }

    fn err(&self, message: String) -> BodyError {
        BodyError {
            kernel: self.body.kernel.clone(),
            message,
        }
    }

    /// Evaluates an integer expression of the body.
    pub fn int(&self, e: &IntExpr) -> Result<i64, BodyError> {
        match e.compiled.eval(&self.env) {
            Ok(Value::I64(v)) => Ok(v),
            Ok(Value::U64(v)) => Ok(v as i64),
            Ok(v) => Err(self.err(format!("`{}` is {v}, not an integer", e.text))),
            Err(x) => Err(self.err(format!("`{}`: {x}", e.text))),
        }
    }

    /// The valid rows × cols of tile `tile` (an index into [`Body::tiles`]).
    pub fn valid(&self, tile: u32) -> (u64, u64) {
        self.tiles.get(tile as usize).copied().unwrap_or((0, 0))
    }

    /// Walks the body in program order, calling `on_inst` for each instruction executed.
    pub fn run(&mut self, on_inst: &mut OnInst<'_>) -> Result<(), BodyError> {
        let body = self.body;
        self.block(&body.stmts, on_inst)
    }

    fn block(&mut self, body: &'b [BodyStmt], on_inst: &mut OnInst<'_>) -> Result<(), BodyError> {
        for s in body {
            match &s.kind {
                BodyKind::Tile { tile, valid } => {
                    let t = &self.body.tiles[*tile as usize].decl;
                    let (vr, vc) = match valid {
                        None => (t.rows, t.cols),
                        Some((r, c)) => {
                            let (r, c) = (self.int(r)?, self.int(c)?);
                            if r < 0 || c < 0 || r as u64 > t.rows || c as u64 > t.cols {
                                return Err(self.err(format!(
                                    "tile `{}`: valid {r} x {c} is outside its {} x {}",
                                    t.name, t.rows, t.cols
                                )));
                            }
                            (r as u64, c as u64)
                        }
                    };
                    self.tiles[*tile as usize] = (vr, vc);
                }
                BodyKind::Let { slot, value } => {
                    let v = self.int(value)?;
                    self.env[*slot as usize] = Value::I64(v);
                }
                BodyKind::For { slot, count, body } => {
                    let n = self.int(count)?;
                    for i in 0..n.max(0) {
                        self.env[*slot as usize] = Value::I64(i);
                        self.block(body, on_inst)?;
                    }
                }
                BodyKind::If {
                    cond,
                    then_body,
                    else_body,
                } => {
                    let c = match cond.compiled.eval(&self.env) {
                        Ok(Value::Bool(b)) => b,
                        Ok(v) => return Err(self.err(format!("`{}` is {v}, not bool", cond.text))),
                        Err(x) => return Err(self.err(format!("`{}`: {x}", cond.text))),
                    };
                    self.block(if c { then_body } else { else_body }, on_inst)?;
                }
                BodyKind::Inst { op, args } => on_inst(self, *op, args)?,
                // The cost model knows no tile contents: an element read counts as 0, and a
                // check is not evaluated (a failing one stops the task, which costs no more).
                BodyKind::GetVal { slot, .. } => self.env[*slot as usize] = Value::I64(0),
                BodyKind::Check { .. } | BodyKind::LetFloat { .. } => {}
            }
        }
        Ok(())
    }
}

/// The cycles one instruction costs under the default model ([`crate::tile_isa::CostRule`]):
/// valid rows × cols of the destination (source for `TSTORE`), M × K × N for `TMATMUL`.
pub fn inst_cycles(w: &Walk<'_>, op: TileOp, args: &[Arg]) -> u64 {
    use crate::tile_isa::{CostRule, Operand};
    let tile = |kind: Operand, nth: usize| -> (u64, u64) {
        let mut seen = 0;
        for (k, a) in op.operands().iter().zip(args) {
            if *k == kind
                && let Arg::Tile(t) = a
            {
                if seen == nth {
                    return w.valid(t.tile);
                }
                seen += 1;
            }
        }
        (0, 0)
    };
    match op.cost_rule() {
        CostRule::DstValid => {
            let (r, c) = tile(Operand::Dst, 0);
            r * c
        }
        CostRule::SrcValid => {
            let (r, c) = tile(Operand::Src, 0);
            r * c
        }
        CostRule::Sort5N => {
            let (r, c) = tile(Operand::Src, 0);
            5 * r * c
        }
        CostRule::One => 1,
        CostRule::MKN => {
            let (m, k) = tile(Operand::Src, 0);
            let (_, n) = tile(Operand::Src, 1);
            m * k * n
        }
    }
}

/// The cycles of one run of `kernel`'s body with scalar parameters `scalars`: the sum of
/// [`inst_cycles`] over the instructions executed.
pub fn body_cycles(kernel: &crate::module::KernelDecl, scalars: &[u64]) -> Result<u64, BodyError> {
    body_cycles_with(kernel, scalars, &[])
}

/// [`body_cycles`] with the rows × cols of the task's regions ([`Walk::with_regions`]).
pub fn body_cycles_with(
    kernel: &crate::module::KernelDecl,
    scalars: &[u64],
    regions: &[(u64, u64)],
) -> Result<u64, BodyError> {
    if kernel.body.is_none() {
        return Ok(0);
    }
    let body = crate::resolve::resolve_body(kernel).map_err(|e| BodyError {
        kernel: kernel.name.name.clone(),
        message: e.to_string(),
    })?;
    cycles(&body, scalars, regions)
}

/// The cycles of one run of a resolved body: the sum of [`inst_cycles`] over the instructions
/// executed, with scalar parameters `scalars` and the rows × cols of the task's regions.
pub fn cycles(body: &Body, scalars: &[u64], regions: &[(u64, u64)]) -> Result<u64, BodyError> {
    let mut w = Walk::with_regions(body, scalars, regions)?;
    let mut total = 0u64;
    w.run(&mut |w, op, args| {
        total += inst_cycles(w, op, args);
        Ok(())
    })?;
    Ok(total)
}
