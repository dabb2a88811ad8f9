//! The PTO-ISA back end: kernels written in tile instructions as PTO-ISA C++ (`pto-wsp emit
//! kernels`, target `pto_isa`).
//!
//! Why: a kernel body (`pto_wsp_ir::kernel_body`) must run on the device too, where the tile
//! library is PTO-ISA (`#include <pto/pto-inst.hpp>`). This module writes each kernel with a
//! body as one C++ header calling PTO-ISA's API, plus a host driver that loads the module's
//! tensors from `.npy` files, runs every task of the workload whose kernel has a body (in
//! program order, which respects every dependency) on copies of its regions, and writes the
//! tensors those tasks write; with a Makefile. Built with `-D__CPU_SIM` it runs under PTO-ISA's
//! CPU simulation, which is how the tests compare it with our own CPU executor.
//!
//! Promise: every instruction is written as the one instruction table says
//! (`pto_wsp_ir::tile_isa::CppForm`); an instruction PTO-ISA lacks, an element type or an
//! expression the emitter cannot write is an [`EmitError`] at the statement's
//! `file:line:column`, naming the kernel and the instruction, and nothing is emitted. The
//! emitted kernels raise the same shape errors as the CPU executor (a region part out of its
//! region, a valid size out of its tile) with the same messages.
//!
//! Tile mapping: PTO-ISA tiles need 32-byte aligned rows (vector tiles) and whole fractals
//! (left / right / accumulator tiles), so each tile is declared with its shape rounded up to
//! those units and its valid rows × cols set to ours (always `DYNAMIC`, so that tiles of one
//! declared shape share one C++ type): the padding is never read.

use crate::{EmitError, Files, Input};
use pto_wsp_ir::kernel_body::{InstArg, KStmt, KStmtKind, TileDecl, TileKind};
use pto_wsp_ir::tile_isa::{CppForm, Operand};
use pto_wsp_ir::{
    BinOp, DType, ExpandOptions, Expr, KernelDecl, Loc, ParamKind, ParamType, UnOp, Value,
};
use pto_wsp_kernels::TensorStore;
use std::collections::HashMap;
use std::fmt::Write as _;

/// The most tasks a driver is written for (each task is a few lines of straight-line C++).
pub const MAX_EMITTED_TASKS: usize = 1 << 16;

/// The back end's name in the registry, and its one target.
pub const NAME: &str = "ptoisa";
/// The target: PTO-ISA C++ kernels with a host driver (built by its Makefile for PTO-ISA's CPU
/// simulation).
pub const TARGET: &str = "pto_isa";

/// The kernel-side support header every emitted kernel includes.
pub(crate) const RT_HPP: &str = include_str!("ptoisa/pto_wsp_rt.hpp");
/// The host-side support header the driver includes (tensors, `.npy`, regions).
const HOST_HPP: &str = include_str!("ptoisa/pto_wsp_host.hpp");

/// A kernel-body construct the emitter cannot write as PTO-ISA C++, at `loc`.
fn kernel_error(kernel: &str, message: impl std::fmt::Display, loc: Loc) -> EmitError {
    EmitError::at(
        loc,
        format!("kernel `{kernel}`: cannot emit PTO-ISA C++: {message}"),
    )
}

/// The emitted files, in memory.
#[derive(Debug, Clone)]
pub struct Emitted {
    /// `(file name, contents)`, every file of the output directory.
    pub files: Files,
    /// The kernels emitted (those with a body), in module order.
    pub kernels: Vec<String>,
    /// The tensors the driver writes after the run (those the emitted kernels' tasks write).
    pub written: Vec<String>,
    /// Tasks of kernels without a body, which the driver does not run.
    pub skipped_tasks: usize,
    /// Tensors that a skipped task writes before an emitted task reads them: the driver reads
    /// them from the input directory instead (their contents there must be what the skipped
    /// tasks would have written).
    pub read_after_skipped: Vec<String>,
}

/// Emits every kernel of the module that has a body, and a driver running the entry workload's
/// tasks under the input's bindings.
pub fn emit_kernels(input: &Input<'_>) -> Result<Emitted, EmitError> {
    let module = &input.resolved.module;
    let mut files = vec![("pto_wsp_rt.hpp".to_string(), RT_HPP.to_string())];
    let mut kernels = Vec::new();
    for k in module.kernels.iter().filter(|k| k.body.is_some()) {
        let text = emit_kernel(k, input)?;
        files.push((format!("{}.hpp", k.name.name), text));
        kernels.push(k.name.name.clone());
    }
    if kernels.is_empty() {
        return Err(EmitError::plain("no kernel has a body: nothing to emit"));
    }
    let store = tensor_store(input)?;
    let expansion = pto_wsp_ir::expand(
        input.resolved,
        input.bindings,
        &ExpandOptions {
            limit: Some(MAX_EMITTED_TASKS + 1),
            executors: None,
        },
    )
    .map_err(|e| expand_error(input, &e))?;
    if expansion.tasks.len() > MAX_EMITTED_TASKS || expansion.truncated {
        return Err(EmitError::plain(format!(
            "the workload has more than {MAX_EMITTED_TASKS} tasks; the emitted driver lists its \
             tasks one by one and is limited to that many"
        )));
    }
    let driver = emit_driver(input, &store, &expansion.tasks, &kernels)?;
    files.push(("driver.cpp".to_string(), driver.text));
    files.push(("pto_wsp_host.hpp".to_string(), HOST_HPP.to_string()));
    files.push(("Makefile".to_string(), MAKEFILE.to_string()));
    Ok(Emitted {
        files,
        kernels,
        written: driver.written,
        skipped_tasks: driver.skipped,
        read_after_skipped: driver.read_after_skipped,
    })
}

/// The module's tensors under the input's bindings (their evaluated shapes).
pub(crate) fn tensor_store(input: &Input<'_>) -> Result<TensorStore, EmitError> {
    TensorStore::new(&input.resolved.module, input.bindings)
        .map_err(|e| EmitError::plain(format!("tensor shapes: {e}")))
}

/// An expansion error, at its location when it has one.
pub(crate) fn expand_error(input: &Input<'_>, e: &pto_wsp_ir::ExpandError) -> EmitError {
    let loc = pto_wsp_ir::Diagnostic::loc(e);
    if loc.is_known() {
        EmitError::at(loc, e.to_string())
    } else {
        EmitError::plain(format!("expansion of {} failed: {e}", input.name()))
    }
}

/// The Makefile of an emitted directory.
const MAKEFILE: &str = "\
# Generated by `pto-wsp emit kernels`. Builds the host driver against PTO-ISA's CPU simulation.
PTO_ISA_ROOT ?= $(HOME)/.cache/pto-wsp/pto-isa
CXX ?= g++
CXXFLAGS ?= -O1
HEADERS := $(wildcard *.hpp)

driver: driver.cpp $(HEADERS)
\t$(CXX) -std=c++2b -D__CPU_SIM $(CXXFLAGS) -I$(PTO_ISA_ROOT)/include -I. driver.cpp -o driver -lpthread

# make run IN=dir-with-inputs OUT=dir-for-outputs
run: driver
\t./driver $(IN) $(OUT)

clean:
\trm -f driver

.PHONY: run clean
";

/// The C++ element type of a tile or region.
fn elem(dtype: DType) -> Option<&'static str> {
    match dtype {
        DType::F32 => Some("float"),
        DType::F16 => Some("half"),
        _ => None,
    }
}

fn round_up(n: u64, unit: u64) -> u64 {
    n.div_ceil(unit) * unit
}

/// The PTO-ISA C++ type of a tile (see the module docs for the padding).
fn tile_type(t: &TileDecl) -> Result<String, String> {
    let e = elem(t.dtype).ok_or_else(|| {
        format!(
            "tile `{}` is {}: the emitter writes f32 and f16 tiles only (PTO-ISA's CPU \
             simulation has no bf16 matmul)",
            t.name, t.dtype
        )
    })?;
    // Elements in 32 bytes, and the 16-row / 16-column fractal units.
    let align = 32 / t.dtype.size_bytes() as u64;
    let rows16 = |r: u64| if r == 1 { 1 } else { round_up(r, 16) };
    Ok(match t.kind {
        TileKind::Vec => format!(
            "pto::Tile<pto::TileType::Vec, {e}, {}, {}, pto::BLayout::RowMajor, pto::DYNAMIC, pto::DYNAMIC>",
            t.rows,
            round_up(t.cols, align)
        ),
        TileKind::Mat => format!(
            "pto::Tile<pto::TileType::Mat, {e}, {}, {}, pto::BLayout::ColMajor, pto::DYNAMIC, pto::DYNAMIC, pto::SLayout::RowMajor, 512>",
            rows16(t.rows),
            round_up(t.cols, align)
        ),
        TileKind::Left => format!(
            "pto::TileLeft<{e}, {}, {}, pto::DYNAMIC, pto::DYNAMIC>",
            rows16(t.rows),
            round_up(t.cols, align)
        ),
        TileKind::Right => format!(
            "pto::TileRight<{e}, {}, {}, pto::DYNAMIC, pto::DYNAMIC>",
            round_up(t.rows, align),
            round_up(t.cols, 16)
        ),
        TileKind::Acc => format!(
            "pto::TileAcc<{e}, {}, {}, pto::DYNAMIC, pto::DYNAMIC>",
            rows16(t.rows),
            round_up(t.cols, 16)
        ),
    })
}

/// A C++ string literal of `s`.
fn c_str(s: &str) -> String {
    let mut out = String::from("\"");
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// What the names of one kernel mean while its body is written.
struct KernelCx<'a> {
    decl: &'a KernelDecl,
    input: &'a Input<'a>,
    /// Tiles declared so far: name → declaration.
    tiles: HashMap<String, TileDecl>,
    /// Tile parameters: name → (region index, element type).
    globals: HashMap<String, (usize, DType)>,
    /// Float scalar parameters.
    floats: Vec<String>,
    /// Counter for fresh C++ names.
    fresh: usize,
}

impl KernelCx<'_> {
    fn err(&self, loc: Loc, message: String) -> EmitError {
        kernel_error(&self.decl.name.name, message, loc)
    }

    /// An integer or boolean expression as C++ (names are the `v_` locals and parameters).
    fn expr(&self, e: &Expr, loc: Loc, where_: &str) -> Result<String, EmitError> {
        Ok(match e {
            Expr::Int(v) => format!("int64_t{{{v}}}"),
            Expr::UInt(v) => format!("static_cast<int64_t>(UINT64_C({v}))"),
            Expr::Bool(b) => b.to_string(),
            Expr::Float(_) => {
                return Err(self.err(loc, format!("`{e}` is a float where an integer is needed")));
            }
            Expr::Name(id) => format!("v_{}", id.name),
            Expr::Unary(op, x) => {
                let x = self.expr(x, loc, where_)?;
                match op {
                    UnOp::Neg => format!("(-{x})"),
                    UnOp::Not => format!("(!{x})"),
                }
            }
            Expr::Binary(op, a, b) => {
                let (a, b) = (self.expr(a, loc, where_)?, self.expr(b, loc, where_)?);
                let infix = |s: &str| format!("({a} {s} {b})");
                match op {
                    BinOp::Add => infix("+"),
                    BinOp::Sub => infix("-"),
                    BinOp::Mul => infix("*"),
                    BinOp::Div => format!("pto_wsp_rt::idiv({a}, {b}, {})", c_str(where_)),
                    BinOp::Rem => format!("pto_wsp_rt::irem({a}, {b}, {})", c_str(where_)),
                    BinOp::Min => format!("std::min<int64_t>({a}, {b})"),
                    BinOp::Max => format!("std::max<int64_t>({a}, {b})"),
                    BinOp::Eq => infix("=="),
                    BinOp::Ne => infix("!="),
                    BinOp::Lt => infix("<"),
                    BinOp::Le => infix("<="),
                    BinOp::Gt => infix(">"),
                    BinOp::Ge => infix(">="),
                    BinOp::And => infix("&&"),
                    BinOp::Or => infix("||"),
                }
            }
            Expr::Ternary(c, a, b) => format!(
                "({} ? {} : {})",
                self.expr(c, loc, where_)?,
                self.expr(a, loc, where_)?,
                self.expr(b, loc, where_)?
            ),
        })
    }

    fn name<'n>(&self, a: &'n InstArg) -> &'n str {
        match a {
            InstArg::Name(id) => &id.name,
            InstArg::Expr(_) => "",
        }
    }

    fn body(&mut self, body: &[KStmt], out: &mut String, depth: usize) -> Result<(), EmitError> {
        let pad = "    ".repeat(depth);
        let kname = self.decl.name.name.clone();
        for s in body {
            let src = self.position(s.loc);
            match &s.kind {
                KStmtKind::Tile(t) => {
                    let ty = tile_type(t).map_err(|m| self.err(s.loc, m))?;
                    let (vr, vc) = match &t.valid {
                        None => (
                            format!("int64_t{{{}}}", t.rows),
                            format!("int64_t{{{}}}", t.cols),
                        ),
                        Some((r, c)) => {
                            (self.expr(r, s.loc, &kname)?, self.expr(c, s.loc, &kname)?)
                        }
                    };
                    let n = &t.name.name;
                    let _ = writeln!(
                        out,
                        "{pad}// tile {n}: {} {}[{}, {}] ({src})",
                        t.kind, t.dtype, t.rows, t.cols
                    );
                    let _ = writeln!(out, "{pad}const int64_t vr_{n} = {vr}, vc_{n} = {vc};");
                    let _ = writeln!(
                        out,
                        "{pad}pto_wsp_rt::check_valid({}, {}, vr_{n}, vc_{n}, {}, {});",
                        c_str(&kname),
                        c_str(n),
                        t.rows,
                        t.cols
                    );
                    let _ = writeln!(
                        out,
                        "{pad}{ty} t_{n}(static_cast<size_t>(vr_{n}), static_cast<size_t>(vc_{n}));"
                    );
                    self.tiles.insert(n.clone(), t.clone());
                }
                KStmtKind::Let { name, value } => {
                    let v = self.expr(value, s.loc, &kname)?;
                    let _ = writeln!(out, "{pad}const int64_t v_{} = {v};", name.name);
                }
                KStmtKind::For { var, count, body } => {
                    let n = self.expr(count, s.loc, &kname)?;
                    let _ = writeln!(
                        out,
                        "{pad}for (int64_t v_{v} = 0, {v}_n_ = {n}; v_{v} < {v}_n_; ++v_{v}) {{",
                        v = var.name
                    );
                    self.body(body, out, depth + 1)?;
                    let _ = writeln!(out, "{pad}}}");
                }
                KStmtKind::If {
                    cond,
                    then_body,
                    else_body,
                } => {
                    let c = self.expr(cond, s.loc, &kname)?;
                    let _ = writeln!(out, "{pad}if ({c}) {{");
                    self.body(then_body, out, depth + 1)?;
                    let _ = writeln!(out, "{pad}}} else {{");
                    self.body(else_body, out, depth + 1)?;
                    let _ = writeln!(out, "{pad}}}");
                }
                KStmtKind::Inst { op, args } => self.inst(*op, args, s.loc, &src, out, &pad)?,
            }
        }
        Ok(())
    }

    fn position(&self, loc: Loc) -> String {
        self.input.position(loc)
    }

    fn inst(
        &mut self,
        op: pto_wsp_ir::TileOp,
        args: &[InstArg],
        loc: Loc,
        src: &str,
        out: &mut String,
        pad: &str,
    ) -> Result<(), EmitError> {
        let mn = op.mnemonic();
        let form = op.cpp_form();
        if let CppForm::Missing(why) = form {
            return Err(self.err(loc, format!("{mn} has no PTO-ISA equivalent: {why}")));
        }
        let kname = self.decl.name.name.clone();
        let where_ = format!("kernel `{kname}`: {mn}");
        let written: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let _ = writeln!(out, "{pad}// {mn}({}) ({src})", written.join(", "));
        // The element type of the first tile operand: float operands take it.
        let tile_elem = args
            .iter()
            .find_map(|a| self.tiles.get(self.name(a)))
            .and_then(|t| elem(t.dtype))
            .unwrap_or("float");
        let mut cpp: Vec<String> = Vec::new();
        let mut global: Option<(String, usize, DType)> = None;
        let mut offsets: Vec<String> = Vec::new();
        for (i, kind) in op.operands().iter().enumerate() {
            let a = args.get(i);
            match kind {
                Operand::Dst | Operand::Src => {
                    let n = a.map(|a| self.name(a)).unwrap_or("");
                    cpp.push(format!("t_{n}"));
                }
                Operand::Global => {
                    let n = a.map(|a| self.name(a)).unwrap_or("");
                    let Some(&(ri, dt)) = self.globals.get(n) else {
                        return Err(self.err(loc, format!("{mn}: `{n}` is not a tile parameter")));
                    };
                    global = Some((n.to_string(), ri, dt));
                    cpp.push("gt_".to_string());
                }
                Operand::Float => {
                    let v = match a {
                        Some(InstArg::Expr(Expr::Float(f))) => format!("{:?}f", f.value() as f32),
                        Some(InstArg::Name(id)) if self.floats.contains(&id.name) => {
                            format!("v_{}", id.name)
                        }
                        Some(other) => {
                            return Err(self.err(
                                loc,
                                format!("{mn}: float operand `{other}` is not a float literal or a float parameter"),
                            ));
                        }
                        None => "0.0f".to_string(),
                    };
                    cpp.push(format!("static_cast<{tile_elem}>({v})"));
                }
                Operand::CmpMode => {
                    return Err(self.err(loc, format!("{mn}: comparison modes are not emitted")));
                }
                Operand::OptInt => {
                    offsets.push(match a {
                        None => "int64_t{0}".to_string(),
                        Some(InstArg::Name(id)) => format!("v_{}", id.name),
                        Some(InstArg::Expr(e)) => self.expr(e, loc, &where_)?,
                    });
                }
            }
        }
        if op == pto_wsp_ir::TileOp::Trans {
            return self.trans(args, loc, out, pad);
        }
        let call = match form {
            CppForm::Direct => format!("{mn}({})", cpp.join(", ")),
            CppForm::WithTmp => {
                // A scratch tile shaped like the source (unused by the CPU simulation).
                self.fresh += 1;
                let tmp = format!("tmp{}_", self.fresh);
                let _ = writeln!(
                    out,
                    "{pad}decltype({s}) {tmp}({s}.GetValidRow(), {s}.GetValidCol());",
                    s = cpp[1]
                );
                format!("{mn}({}, {tmp})", cpp.join(", "))
            }
            CppForm::WithRound => {
                format!("{mn}({}, pto::RoundMode::CAST_RINT)", cpp.join(", "))
            }
            CppForm::AccTwice => format!("{mn}({c}, {c}, {}, {})", cpp[1], cpp[2], c = cpp[0]),
            CppForm::Missing(_) => unreachable!("refused above"),
        };
        match global {
            None => {
                let _ = writeln!(out, "{pad}{call};");
            }
            Some((g, ri, _)) => {
                // The tile whose valid part moves: the destination of TLOAD, the source of TSTORE.
                let t = cpp
                    .iter()
                    .find(|c| c.starts_with("t_"))
                    .cloned()
                    .unwrap_or_default();
                let (r0, c0) = (
                    offsets
                        .first()
                        .cloned()
                        .unwrap_or_else(|| "int64_t{0}".into()),
                    offsets
                        .get(1)
                        .cloned()
                        .unwrap_or_else(|| "int64_t{0}".into()),
                );
                let _ = writeln!(out, "{pad}{{");
                let _ = writeln!(
                    out,
                    "{pad}    auto gt_ = pto_wsp_rt::part(g_{g}, g_{g}_rows, g_{g}_cols, {r0}, {c0}, {t}.GetValidRow(), {t}.GetValidCol(), {ri}, {});",
                    c_str(&where_)
                );
                let _ = writeln!(out, "{pad}    {call};");
                let _ = writeln!(out, "{pad}}}");
            }
        }
        Ok(())
    }
}

impl KernelCx<'_> {
    /// `TTRANS(dst, src)`. PTO-ISA's CPU `TTRANS` handles plain (vector) tiles only, so a
    /// left / right / accumulator / matrix operand goes through a vector tile and `TMOV`
    /// (copies, exact in any order).
    fn trans(
        &mut self,
        args: &[InstArg],
        loc: Loc,
        out: &mut String,
        pad: &str,
    ) -> Result<(), EmitError> {
        let (dn, sn) = (self.name(&args[0]), self.name(&args[1]));
        let (Some(d), Some(s)) = (self.tiles.get(dn).cloned(), self.tiles.get(sn).cloned()) else {
            return Err(self.err(loc, "TTRANS: operands must be tiles".into()));
        };
        self.fresh += 1;
        let k = self.fresh;
        let plain = |t: &TileDecl, name: String| TileDecl {
            name: pto_wsp_ir::Ident::new(name),
            kind: TileKind::Vec,
            ..t.clone()
        };
        let mut src = format!("t_{sn}");
        if s.kind != TileKind::Vec {
            let ty = tile_type(&plain(&s, String::new())).map_err(|m| self.err(loc, m))?;
            let _ = writeln!(
                out,
                "{pad}{ty} tsrc{k}_(t_{sn}.GetValidRow(), t_{sn}.GetValidCol());\n{pad}TMOV(tsrc{k}_, t_{sn});"
            );
            src = format!("tsrc{k}_");
        }
        let _ = writeln!(
            out,
            "{pad}decltype({src}) tmp{k}_({src}.GetValidRow(), {src}.GetValidCol());"
        );
        if d.kind == TileKind::Vec {
            let _ = writeln!(out, "{pad}TTRANS(t_{dn}, {src}, tmp{k}_);");
        } else {
            let ty = tile_type(&plain(&d, String::new())).map_err(|m| self.err(loc, m))?;
            let _ = writeln!(
                out,
                "{pad}{ty} tdst{k}_(t_{dn}.GetValidRow(), t_{dn}.GetValidCol());\n\
                 {pad}TTRANS(tdst{k}_, {src}, tmp{k}_);\n{pad}TMOV(t_{dn}, tdst{k}_);"
            );
        }
        Ok(())
    }
}

/// C++ keywords and names a kernel function may not take (other names are prefixed).
const CPP_RESERVED: &[&str] = &[
    "alignas",
    "alignof",
    "and",
    "and_eq",
    "asm",
    "auto",
    "bitand",
    "bitor",
    "bool",
    "break",
    "case",
    "catch",
    "char",
    "char8_t",
    "char16_t",
    "char32_t",
    "class",
    "compl",
    "concept",
    "const",
    "consteval",
    "constexpr",
    "constinit",
    "const_cast",
    "continue",
    "co_await",
    "co_return",
    "co_yield",
    "decltype",
    "default",
    "delete",
    "do",
    "double",
    "dynamic_cast",
    "else",
    "enum",
    "explicit",
    "export",
    "extern",
    "false",
    "float",
    "for",
    "friend",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "main",
    "mutable",
    "namespace",
    "new",
    "noexcept",
    "not",
    "not_eq",
    "nullptr",
    "operator",
    "or",
    "or_eq",
    "private",
    "protected",
    "public",
    "register",
    "reinterpret_cast",
    "requires",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "static_assert",
    "static_cast",
    "struct",
    "switch",
    "template",
    "this",
    "thread_local",
    "throw",
    "true",
    "try",
    "typedef",
    "typeid",
    "typename",
    "union",
    "unsigned",
    "using",
    "virtual",
    "void",
    "volatile",
    "wchar_t",
    "while",
    "xor",
    "xor_eq",
];

/// One kernel as a C++ header: `void NAME(regions..., scalars...)` in namespace
/// `pto_wsp_kernels`.
pub(crate) fn emit_kernel(k: &KernelDecl, input: &Input<'_>) -> Result<String, EmitError> {
    if CPP_RESERVED.contains(&k.name.name.as_str())
        || k.name.name.starts_with('T') && pto_wsp_ir::TileOp::parse(&k.name.name).is_some()
    {
        return Err(kernel_error(
            &k.name.name,
            "the kernel's name is a C++ keyword or a PTO-ISA instruction; rename it",
            k.name.loc,
        ));
    }
    let mut cx = KernelCx {
        decl: k,
        input,
        tiles: HashMap::new(),
        globals: HashMap::new(),
        floats: Vec::new(),
        fresh: 0,
    };
    let mut params = Vec::new();
    let mut ri = 0;
    for p in &k.params {
        let n = &p.name.name;
        match &p.kind {
            ParamKind::Tile { dtype, .. } => {
                let e = elem(*dtype).ok_or_else(|| {
                    cx.err(
                        p.name.loc,
                        format!("tile parameter `{n}` is {dtype}: the emitter writes f32 and f16 regions only"),
                    )
                })?;
                params.push(format!(
                    "{e} *g_{n}, int64_t g_{n}_rows, int64_t g_{n}_cols"
                ));
                cx.globals.insert(n.clone(), (ri, *dtype));
                ri += 1;
            }
            ParamKind::Scalar(t) => {
                let ty = match t {
                    ParamType::Bool => "bool",
                    ParamType::I64 | ParamType::U64 => "int64_t",
                    ParamType::F32 | ParamType::F64 => {
                        cx.floats.push(n.clone());
                        "float"
                    }
                };
                params.push(format!("{ty} v_{n}"));
            }
        }
    }
    let mut body = String::new();
    cx.body(k.body.as_deref().unwrap_or(&[]), &mut body, 1)?;
    let name = &k.name.name;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "// Generated by `pto-wsp emit kernels`: kernel `{name}` ({}). Do not edit.",
        input.position(k.name.loc)
    );
    out.push_str("#pragma once\n#include \"pto_wsp_rt.hpp\"\n\nnamespace pto_wsp_kernels {\n\n");
    let _ = writeln!(
        out,
        "// Regions are row-major rows x cols blocks; float parameters arrive as f32.\n\
         inline void {name}({})\n{{",
        params.join(", ")
    );
    out.push_str("    using namespace pto;\n");
    for p in &k.params {
        let n = &p.name.name;
        match p.kind {
            ParamKind::Tile { .. } => {
                let _ = writeln!(out, "    (void)g_{n}; (void)g_{n}_rows; (void)g_{n}_cols;");
            }
            ParamKind::Scalar(_) => {
                let _ = writeln!(out, "    (void)v_{n};");
            }
        }
    }
    out.push_str(&body);
    out.push_str("}\n\n} // namespace pto_wsp_kernels\n");
    Ok(out)
}

struct Driver {
    text: String,
    written: Vec<String>,
    skipped: usize,
    read_after_skipped: Vec<String>,
}

/// The host driver: tensors, then every task of a kernel with a body, in program order.
fn emit_driver(
    input: &Input<'_>,
    store: &TensorStore,
    tasks: &[pto_wsp_ir::ExpandedTask],
    kernels: &[String],
) -> Result<Driver, EmitError> {
    let module = &input.resolved.module;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "// Generated by `pto-wsp emit kernels` from {}. Do not edit.\n\
         // Usage: driver IN_DIR OUT_DIR. Reads IN_DIR/NAME.npy for every tensor that has one (the\n\
         // others start zeroed), runs the tasks of the kernels below in program order, writes\n\
         // OUT_DIR/NAME.npy for every tensor they write.",
        input.name()
    );
    for k in kernels {
        let _ = writeln!(out, "#include \"{k}.hpp\"");
    }
    out.push_str("#include \"pto_wsp_host.hpp\"\n\n#include <cstdio>\n#include <exception>\n\n");
    out.push_str("int main(int argc, char **argv)\n{\n");
    out.push_str(
        "    if (argc != 3) {\n        std::fprintf(stderr, \"usage: %s IN_DIR OUT_DIR\\n\", argv[0]);\n        return 2;\n    }\n",
    );
    out.push_str("    const std::string in = argv[1], out = argv[2];\n");
    out.push_str("    std::vector<pto_wsp_host::Tensor> T = {\n");
    for info in store.infos() {
        let descr = pto_wsp_kernels::npy::descr(info.dtype);
        if info.shape.len() > 4 {
            return Err(EmitError::plain(format!(
                "tensor `{}` has {} dimensions; the driver handles at most 4",
                info.name,
                info.shape.len()
            )));
        }
        let mut shape: Vec<String> = info.shape.iter().map(|d| d.to_string()).collect();
        shape.resize(4, "0".into());
        let _ = writeln!(
            out,
            "        {{{{{}, {}, {}, {}, {{{}}}}}, {{}}}},",
            c_str(&info.name),
            c_str(descr),
            info.dtype.size_bytes(),
            info.shape.len(),
            shape.join(", ")
        );
    }
    out.push_str("    };\n    std::string current = \"reading inputs\";\n    try {\n");
    out.push_str(
        "        for (auto &t : T) {\n            t.bytes.assign(static_cast<size_t>(t.elements()) * t.info.esize, 0);\n            pto_wsp_host::read_npy(in + \"/\" + t.info.name + \".npy\", t);\n        }\n",
    );
    let mut written: Vec<u32> = Vec::new();
    let mut skipped = 0;
    let mut skipped_names: Vec<String> = Vec::new();
    // Tensors written by skipped tasks so far, and those of them an emitted task then reads.
    let mut skipped_writes: Vec<u32> = Vec::new();
    let mut read_after_skipped: Vec<u32> = Vec::new();
    for (ti, task) in tasks.iter().enumerate() {
        let k = &module.kernels[task.kernel as usize];
        if k.body.is_none() {
            skipped += 1;
            for r in task.regions.iter().filter(|r| r.access.writes()) {
                if !skipped_writes.contains(&r.tensor) {
                    skipped_writes.push(r.tensor);
                }
            }
            if !skipped_names.contains(&k.name.name) {
                skipped_names.push(k.name.name.clone());
            }
            continue;
        }
        let _ = writeln!(
            out,
            "        {{ // task {ti}: {}\n            current = \"task {ti} ({})\";",
            k.name.name, k.name.name
        );
        let mut args = Vec::new();
        for (ri, r) in task.regions.iter().enumerate() {
            let info = store.info(r.tensor);
            let e = elem(info.dtype).ok_or_else(|| {
                EmitError::plain(format!(
                    "task {ti} ({}): region {ri} is of tensor `{}` ({}); the driver handles f32 and f16",
                    k.name.name, info.name, info.dtype
                ))
            })?;
            let list = |v: &[i64]| {
                v.iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let _ = writeln!(
                out,
                "            pto_wsp_host::Region<{e}> r{ri}(T[{}], {{{}}}, {{{}}});",
                r.tensor,
                list(&r.start),
                list(&r.size)
            );
            args.push(format!("r{ri}.data.data(), r{ri}.rows, r{ri}.cols"));
            if r.access.reads()
                && skipped_writes.contains(&r.tensor)
                && !read_after_skipped.contains(&r.tensor)
            {
                read_after_skipped.push(r.tensor);
            }
            if r.access.writes() && !written.contains(&r.tensor) {
                written.push(r.tensor);
            }
        }
        let scalar_types = k.scalar_types();
        for (v, t) in task.params.iter().zip(&scalar_types) {
            args.push(match (t, v) {
                (ParamType::F32 | ParamType::F64, Value::U64(bits)) => {
                    format!("pto_wsp_rt::f32_param(UINT64_C({bits:#x}))")
                }
                (_, Value::Bool(b)) => b.to_string(),
                (_, Value::I64(i)) => format!("int64_t{{{i}}}"),
                (_, Value::U64(u)) => format!("static_cast<int64_t>(UINT64_C({u}))"),
            });
        }
        let _ = writeln!(
            out,
            "            pto_wsp_kernels::{}({});",
            k.name.name,
            args.join(", ")
        );
        for (ri, r) in task.regions.iter().enumerate() {
            if r.access.writes() {
                let _ = writeln!(out, "            r{ri}.store();");
            }
        }
        out.push_str("        }\n");
    }
    let names: Vec<String> = written
        .iter()
        .map(|&t| store.info(t).name.clone())
        .collect();
    for &t in &written {
        let _ = writeln!(
            out,
            "        pto_wsp_host::write_npy(out + \"/{}.npy\", T[{t}]);",
            store.info(t).name
        );
    }
    if skipped > 0 {
        let _ = writeln!(
            out,
            "        std::printf(\"skipped {skipped} task(s) of kernels without a body: {}\\n\");",
            skipped_names.join(", ")
        );
    }
    out.push_str(
        "    } catch (const std::exception &e) {\n        std::fprintf(stderr, \"error: %s: %s\\n\", current.c_str(), e.what());\n        return 1;\n    }\n    return 0;\n}\n",
    );
    Ok(Driver {
        text: out,
        written: names,
        skipped,
        read_after_skipped: read_after_skipped
            .iter()
            .map(|&t| store.info(t).name.clone())
            .collect(),
    })
}
