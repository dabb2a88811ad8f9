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
//! Promise: `Display` prints a body so that the parser reads back an equal body.

use crate::expr::Expr;
use crate::loc::{Ident, Loc};
use crate::tile_isa::TileOp;
use crate::types::DType;

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
}

/// One operand of an instruction as written.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum InstArg {
    /// A tile, a tile parameter, or a scalar parameter / local (the validator decides which).
    Name(Ident),
    /// Any other expression (a float literal or an integer expression).
    Expr(Expr),
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
}

impl std::fmt::Display for InstArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InstArg::Name(id) => f.write_str(&id.name),
            InstArg::Expr(e) => write!(f, "{e}"),
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
                write!(
                    f,
                    "{pad}tile {}: {} {}[{}, {}]",
                    t.name, t.kind, t.dtype, t.rows, t.cols
                )?;
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
pub type OnInst<'f> = dyn FnMut(&Walk<'_>, TileOp, &[InstArg]) -> Result<(), BodyError> + 'f;

/// The valid rows × cols of every tile in scope, and the integer locals, while walking a body.
pub struct Walk<'k> {
    kernel: &'k crate::module::KernelDecl,
    env: std::collections::HashMap<String, crate::value::Value>,
    tiles: std::collections::HashMap<String, (u64, u64)>,
}

impl<'k> Walk<'k> {
    /// A walk of `kernel`'s body with its scalar parameters bound to the raw values `scalars`
    /// (in declaration order, as a task passes them).
    pub fn new(
        kernel: &'k crate::module::KernelDecl,
        scalars: &[u64],
    ) -> Result<Walk<'k>, BodyError> {
        use crate::module::ParamKind;
        use crate::types::ScalarType;
        use crate::value::Value;
        let mut env = std::collections::HashMap::new();
        let mut it = scalars.iter();
        for p in &kernel.params {
            if let ParamKind::Scalar(t) = p.kind {
                let Some(&raw) = it.next() else {
                    return Err(BodyError {
                        kernel: kernel.name.name.clone(),
                        message: format!("scalar parameter `{}` is not given", p.name),
                    });
                };
                let v = match t.carrier() {
                    ScalarType::Bool => Value::Bool(raw != 0),
                    ScalarType::I64 => Value::I64(raw as i64),
                    ScalarType::U64 => Value::U64(raw),
                };
                env.insert(p.name.name.clone(), v);
            }
        }
        Ok(Walk {
            kernel,
            env,
            tiles: std::collections::HashMap::new(),
        })
    }

    fn err(&self, message: String) -> BodyError {
        BodyError {
            kernel: self.kernel.name.name.clone(),
            message,
        }
    }

    /// Evaluates an integer expression of the body.
    pub fn int(&self, e: &Expr) -> Result<i64, BodyError> {
        match crate::eval::eval(e, &self.env) {
            Ok(crate::value::Value::I64(v)) => Ok(v),
            Ok(crate::value::Value::U64(v)) => Ok(v as i64),
            Ok(v) => Err(self.err(format!("`{e}` is {v}, not an integer"))),
            Err(x) => Err(self.err(format!("`{e}`: {x}"))),
        }
    }

    /// The valid rows × cols of tile `name`.
    pub fn valid(&self, name: &str) -> (u64, u64) {
        self.tiles.get(name).copied().unwrap_or((0, 0))
    }

    /// Walks `body` in program order, calling `on_inst` for each instruction executed.
    pub fn run(&mut self, body: &[KStmt], on_inst: &mut OnInst<'_>) -> Result<(), BodyError> {
        for s in body {
            match &s.kind {
                KStmtKind::Tile(t) => {
                    let (vr, vc) = match &t.valid {
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
                    self.tiles.insert(t.name.name.clone(), (vr, vc));
                }
                KStmtKind::Let { name, value } => {
                    let v = self.int(value)?;
                    self.env
                        .insert(name.name.clone(), crate::value::Value::I64(v));
                }
                KStmtKind::For { var, count, body } => {
                    let n = self.int(count)?;
                    for i in 0..n.max(0) {
                        self.env
                            .insert(var.name.clone(), crate::value::Value::I64(i));
                        self.run(body, on_inst)?;
                    }
                }
                KStmtKind::If {
                    cond,
                    then_body,
                    else_body,
                } => {
                    let c = match crate::eval::eval(cond, &self.env) {
                        Ok(crate::value::Value::Bool(b)) => b,
                        Ok(v) => return Err(self.err(format!("`{cond}` is {v}, not bool"))),
                        Err(x) => return Err(self.err(format!("`{cond}`: {x}"))),
                    };
                    self.run(if c { then_body } else { else_body }, on_inst)?;
                }
                KStmtKind::Inst { op, args } => on_inst(self, *op, args)?,
            }
        }
        Ok(())
    }
}

/// The cycles one instruction costs under the default model ([`crate::tile_isa::CostRule`]):
/// valid rows × cols of the destination (source for `TSTORE`), M × K × N for `TMATMUL`.
pub fn inst_cycles(w: &Walk<'_>, op: TileOp, args: &[InstArg]) -> u64 {
    use crate::tile_isa::{CostRule, Operand};
    let tile = |kind: Operand, nth: usize| -> (u64, u64) {
        let mut seen = 0;
        for (k, a) in op.operands().iter().zip(args) {
            if *k == kind
                && let InstArg::Name(id) = a
            {
                if seen == nth {
                    return w.valid(&id.name);
                }
                seen += 1;
            }
        }
        (0, 0)
    };
    match op.cost_rule() {
        CostRule::DstValid => {
            let (r, c) = tile(crate::tile_isa::Operand::Dst, 0);
            r * c
        }
        CostRule::SrcValid => {
            let (r, c) = tile(crate::tile_isa::Operand::Src, 0);
            r * c
        }
        CostRule::Sort5N => {
            let (r, c) = tile(crate::tile_isa::Operand::Dst, 0);
            5 * r * c
        }
        CostRule::MKN => {
            let (m, k) = tile(crate::tile_isa::Operand::Src, 0);
            let (_, n) = tile(crate::tile_isa::Operand::Src, 1);
            m * k * n
        }
    }
}

/// The cycles of one run of `kernel`'s body with scalar parameters `scalars`: the sum of
/// [`inst_cycles`] over the instructions executed.
pub fn body_cycles(kernel: &crate::module::KernelDecl, scalars: &[u64]) -> Result<u64, BodyError> {
    let Some(body) = &kernel.body else {
        return Ok(0);
    };
    let mut w = Walk::new(kernel, scalars)?;
    let mut total = 0u64;
    w.run(body, &mut |w, op, args| {
        total += inst_cycles(w, op, args);
        Ok(())
    })?;
    Ok(total)
}
