//! The kernels a design calls, as plain C++ for the AIE compiler.
//!
//! Why: every core calls its kernels as external functions (`func.func private` + `func.call`,
//! linked from one object file with `link_with`). The kernel language's bodies are written here
//! as portable scalar C++ loops over row-major tiles (`extern "C"`, no PTO-ISA headers), so an
//! AIE C++ compiler (Peano's `clang++ --target=aie2-none-unknown-elf`) can build them.
//!
//! Promise: one function per called kernel, its parameters in call order as the MLIR
//! declaration gives them (an object as a pointer to its elements, `bf16` as `uint16_t` bits,
//! a scalar by value); tiles compute in `float`, rounded to their element type where they are
//! stored, as the CPU executor does. An instruction without a scalar form here is refused,
//! naming it and its kernel, before anything is written. The code is correct, not tuned: it
//! uses no AIE vector intrinsics.

use super::design::{AieDesign, ArgType};
use crate::EmitError;
use pto_wsp_ir::kernel_body::{InstArg, KStmt, KStmtKind};
use pto_wsp_ir::module::ParamKind;
use pto_wsp_ir::{DType, KernelDecl, Module, TileOp};
use std::collections::HashMap;
use std::fmt::Write as _;

const PRELUDE: &str =
    "// Kernels of an AIE design, written by pto-wsp from kernels in tile instructions.
// Plain scalar C++ over row-major tiles; build with an AIE C++ compiler into the object file the
// design's cores link (`link_with`).
#include <stdint.h>
#include <math.h>

static inline float pto_bf16_load(uint16_t v) {
  uint32_t b = (uint32_t)v << 16;
  float f;
  __builtin_memcpy(&f, &b, 4);
  return f;
}

static inline uint16_t pto_bf16_store(float f) {
  uint32_t b;
  __builtin_memcpy(&b, &f, 4);
  b += 0x7FFFu + ((b >> 16) & 1u);
  return (uint16_t)(b >> 16);
}

";

/// The C++ of every kernel `design` calls.
pub fn cpp(design: &AieDesign, module: &Module) -> Result<String, EmitError> {
    let mut out = String::from(PRELUDE);
    out.push_str("extern \"C\" {\n");
    for k in &design.kernels {
        let decl = &module.kernels[k.decl];
        out.push_str(&kernel(decl, &k.params)?);
    }
    out.push_str("}\n");
    Ok(out)
}

/// (rows, cols) of a region or tile seen as a matrix.
fn rc(shape: &[u64]) -> (u64, u64) {
    match shape {
        [] => (1, 1),
        [c] => (1, *c),
        s => (s[..s.len() - 1].iter().product(), s[s.len() - 1]),
    }
}

struct Cx<'a> {
    decl: &'a KernelDecl,
    /// Regions: name → (rows, cols, dtype).
    regions: HashMap<String, (u64, u64, DType)>,
    /// Tiles: name → (rows, cols, dtype).
    tiles: HashMap<String, (u64, u64, DType)>,
    out: String,
}

fn kernel(decl: &KernelDecl, params: &[ArgType]) -> Result<String, EmitError> {
    let mut cx = Cx {
        decl,
        regions: HashMap::new(),
        tiles: HashMap::new(),
        out: String::new(),
    };
    let mut sig = Vec::new();
    for (p, ty) in decl.params.iter().zip(params) {
        match (&p.kind, ty) {
            (ParamKind::Tile { dtype, .. }, ArgType::Object(o)) => {
                if *dtype == DType::F16 {
                    return Err(EmitError::at(
                        p.name.loc,
                        format!(
                            "kernel `{}`: parameter `{}` is f16, which AIE2 cores have no arithmetic for; use bf16 or f32",
                            decl.name, p.name
                        ),
                    ));
                }
                let (r, c) = rc(&o.shape);
                cx.regions.insert(p.name.name.clone(), (r, c, *dtype));
                sig.push(format!("{} *{}", ctype(*dtype), p.name));
            }
            (ParamKind::Scalar(_), ArgType::Scalar(t)) => {
                let c = match *t {
                    "f32" => "float",
                    "f64" => "double",
                    "i1" => "bool",
                    _ => "int64_t",
                };
                sig.push(format!("{c} {}", p.name));
            }
            _ => {
                return Err(EmitError::plain(format!(
                    "kernel `{}`: parameters disagree with the design",
                    decl.name
                )));
            }
        }
    }
    let _ = writeln!(cx.out, "void {}({}) {{", decl.name, sig.join(", "));
    for s in decl.body.as_deref().unwrap_or(&[]) {
        cx.stmt(s)?;
    }
    cx.out.push_str("}\n\n");
    Ok(cx.out)
}

fn ctype(d: DType) -> &'static str {
    match d {
        DType::F32 => "float",
        DType::F16 | DType::Bf16 => "uint16_t",
        DType::I32 => "int32_t",
        DType::U32 => "uint32_t",
        DType::I64 => "int64_t",
        DType::U64 => "uint64_t",
        DType::U8 => "uint8_t",
    }
}

/// Reading element `e` of a region of type `d` as float.
fn load(d: DType, e: &str) -> String {
    match d {
        DType::Bf16 => format!("pto_bf16_load({e})"),
        _ => format!("(float)({e})"),
    }
}

/// Rounding `v` to element type `d` for storing.
fn store(d: DType, v: &str) -> String {
    match d {
        DType::Bf16 => format!("pto_bf16_store({v})"),
        DType::F32 => v.to_string(),
        other => format!("({})({v})", ctype(other)),
    }
}

impl Cx<'_> {
    fn refuse(&self, s: &KStmt, what: &str) -> EmitError {
        EmitError::at(
            s.loc,
            format!(
                "kernel `{}`: {what} has no scalar C++ form for AIE kernels yet",
                self.decl.name
            ),
        )
    }

    fn tile(&self, s: &KStmt, a: &InstArg) -> Result<(String, (u64, u64, DType)), EmitError> {
        let name = a
            .tile_name()
            .ok_or_else(|| self.refuse(s, "an indexed or computed tile operand"))?;
        let t = self
            .tiles
            .get(name.as_str())
            .ok_or_else(|| self.refuse(s, "a tile operand that is not a tile"))?;
        Ok((name.name.clone(), *t))
    }

    fn float(&self, a: &InstArg) -> String {
        match a {
            InstArg::Name(n) => format!("(float)({n})"),
            InstArg::Expr(e) => format!("(float)({e})"),
            InstArg::Index(n, e) => format!("(float)({n}[{e}])"),
            InstArg::Float(_) => "0.0f /* unsupported float form */".into(),
        }
    }

    fn stmt(&mut self, s: &KStmt) -> Result<(), EmitError> {
        match &s.kind {
            KStmtKind::Tile(t) => {
                if t.count.is_some() || t.valid.is_some() {
                    return Err(
                        self.refuse(s, &format!("tile `{}` with a count or valid sizes", t.name))
                    );
                }
                self.tiles
                    .insert(t.name.name.clone(), (t.rows, t.cols, t.dtype));
                let _ = writeln!(self.out, "  float {}[{}];", t.name, t.rows * t.cols);
                Ok(())
            }
            KStmtKind::Inst { op, args } => self.inst(s, *op, args),
            _ => Err(self.refuse(
                s,
                "a statement other than a tile declaration or an instruction",
            )),
        }
    }

    fn each(&mut self, n: u64, body: &str) {
        let _ = writeln!(self.out, "  for (int i = 0; i < {n}; i++) {body}");
    }

    /// The global-memory parameter operand `arg` names: its name, row pitch and element type;
    /// `refusal` when it names none.
    fn parameter(
        &self,
        s: &KStmt,
        arg: &InstArg,
        refusal: &str,
    ) -> Result<(String, u64, DType), EmitError> {
        let g = arg.tile_name().map(|n| n.name.clone()).unwrap_or_default();
        let &(_, gc, gd) = self
            .regions
            .get(&g)
            .ok_or_else(|| self.refuse(s, refusal))?;
        Ok((g, gc, gd))
    }

    fn inst(&mut self, s: &KStmt, op: TileOp, args: &[InstArg]) -> Result<(), EmitError> {
        let name = op.mnemonic();
        if args.len() > 3 && matches!(op, TileOp::Load | TileOp::Store) {
            return Err(self.refuse(s, &format!("`{name}` at an offset")));
        }
        match op {
            TileOp::Load => {
                let (t, (tr, tc, _)) = self.tile(s, &args[0])?;
                let (g, gc, gd) = self.parameter(s, &args[1], "`TLOAD` from a non-parameter")?;
                let _ = writeln!(
                    self.out,
                    "  for (int r = 0; r < {tr}; r++) for (int c = 0; c < {tc}; c++) {t}[r * {tc} + c] = {};",
                    load(gd, &format!("{g}[r * {gc} + c]"))
                );
            }
            TileOp::Store => {
                let (t, (tr, tc, _)) = self.tile(s, &args[1])?;
                let (g, gc, gd) = self.parameter(s, &args[0], "`TSTORE` to a non-parameter")?;
                let _ = writeln!(
                    self.out,
                    "  for (int r = 0; r < {tr}; r++) for (int c = 0; c < {tc}; c++) {g}[r * {gc} + c] = {};",
                    store(gd, &format!("{t}[r * {tc} + c]"))
                );
            }
            TileOp::Expands => {
                let (d, (r, c, dt)) = self.tile(s, &args[0])?;
                let v = self.float(&args[1]);
                self.each(r * c, &format!("{d}[i] = {};", round(dt, &v)));
            }
            TileOp::Adds | TileOp::Muls => {
                let (d, (r, c, dt)) = self.tile(s, &args[0])?;
                let (a, _) = self.tile(s, &args[1])?;
                let v = self.float(&args[2]);
                let o = if op == TileOp::Adds { "+" } else { "*" };
                self.each(
                    r * c,
                    &format!("{d}[i] = {};", round(dt, &format!("{a}[i] {o} {v}"))),
                );
            }
            TileOp::Add | TileOp::Sub | TileOp::Mul | TileOp::Div => {
                let (d, (r, c, dt)) = self.tile(s, &args[0])?;
                let (a, _) = self.tile(s, &args[1])?;
                let (b, _) = self.tile(s, &args[2])?;
                let o = match op {
                    TileOp::Add => "+",
                    TileOp::Sub => "-",
                    TileOp::Mul => "*",
                    _ => "/",
                };
                self.each(
                    r * c,
                    &format!("{d}[i] = {};", round(dt, &format!("{a}[i] {o} {b}[i]"))),
                );
            }
            TileOp::Neg | TileOp::Exp | TileOp::Mov => {
                let (d, (r, c, dt)) = self.tile(s, &args[0])?;
                let (a, _) = self.tile(s, &args[1])?;
                let v = match op {
                    TileOp::Neg => format!("-{a}[i]"),
                    TileOp::Exp => format!("expf({a}[i])"),
                    _ => format!("{a}[i]"),
                };
                self.each(r * c, &format!("{d}[i] = {};", round(dt, &v)));
            }
            TileOp::Matmul => {
                let (d, (m, n, dt)) = self.tile(s, &args[0])?;
                let (a, (_, k, _)) = self.tile(s, &args[1])?;
                let (b, _) = self.tile(s, &args[2])?;
                let _ = writeln!(
                    self.out,
                    "  for (int i = 0; i < {m}; i++) for (int j = 0; j < {n}; j++) {{ float acc = 0.0f; for (int k = 0; k < {k}; k++) acc += {a}[i * {k} + k] * {b}[k * {n} + j]; {d}[i * {n} + j] = {}; }}",
                    round(dt, "acc")
                );
            }
            _ => return Err(self.refuse(s, &format!("instruction `{name}`"))),
        }
        Ok(())
    }
}

/// `v` rounded to a tile of element type `d` (tiles hold floats; a `bf16` tile keeps `bf16`
/// values).
fn round(d: DType, v: &str) -> String {
    match d {
        DType::Bf16 => format!("pto_bf16_load(pto_bf16_store({v}))"),
        _ => v.to_string(),
    }
}
