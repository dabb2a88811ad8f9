//! One kernel body as PTO-ISA C++: the function `pto_wsp_kernels::NAME` in `NAME.hpp`.
//!
//! Why: the host driver of `emit kernels` (PTO-ISA's CPU simulation) and the Ascend trees
//! (simpler's `a2a3sim` and the device) run the same kernel text; only the latter must also be
//! legal on an a2a3 AI Core: tiles placed in their buffers, pipes synchronised, no exceptions,
//! stdio or heap.
//!
//! Promise: every instruction is written as the instruction table says
//! (`pto_wsp_ir::tile_isa::CppForm`); every tile is declared with its device shape
//! (`pto_wsp_ir::device::padded_shape`, valid part = the declared shape or its `valid(...)`).
//! In [`Mode::Device`] every tile is placed with `TASSIGN<addr>` at the address
//! `pto_wsp_ir::device::alloc` gives (PTO-ISA checks it against the buffer at compile time), every
//! instruction is preceded by the synchronisation `pto_wsp_ir::device::sync` plans, and the body
//! ends by draining every pipe. A failed check (a valid size out of its tile, a region part out of
//! its region, a division by zero) writes its number and values to the task's
//! `pto_wsp_rt::Status` and returns; [`KernelText::messages`] holds the message of each number
//! (the CPU executor's wording, `{0}`…`{5}` for the values). Anything the emitter cannot write is
//! an [`EmitError`] at the statement.

use super::kernel_error;
use crate::{EmitError, Input};
use pto_wsp_ir::device::{
    alloc::Plan,
    padded_shape,
    sync::{Doubles, SyncPlan},
};
use pto_wsp_ir::kernel_body::{InstArg, KStmt, KStmtKind, TileDecl, TileKind};
use pto_wsp_ir::tile_isa::{CppForm, Operand};
use pto_wsp_ir::{BinOp, DType, Expr, KernelDecl, Loc, ParamKind, ParamType, UnOp};
use std::collections::HashMap;
use std::fmt::Write as _;

/// How a kernel is written.
#[derive(Clone, Copy)]
pub(crate) enum Mode<'p> {
    /// For the host driver under PTO-ISA's CPU simulation: any tile kind from anywhere.
    Host,
    /// For an a2a3 AI Core (and `a2a3sim`, which runs the same text): tiles placed by `alloc`,
    /// pipes ordered by `sync`.
    Device {
        /// Where each tile lives.
        alloc: &'p Plan,
        /// The synchronisation before each instruction.
        sync: &'p SyncPlan,
        /// The tiles loops double-buffer.
        doubles: &'p Doubles,
    },
}

/// A kernel's header and the messages of its checks.
#[derive(Debug, Clone)]
pub(crate) struct KernelText {
    /// `NAME.hpp`.
    pub text: String,
    /// Message `i` is the one of status code `first_code + i`.
    pub messages: Vec<String>,
}

/// The C++ element type of a tile or region.
pub(crate) fn elem(dtype: DType) -> Option<&'static str> {
    match dtype {
        DType::F32 => Some("float"),
        DType::F16 => Some("half"),
        _ => None,
    }
}

/// The PTO-ISA C++ type of a tile: its device shape, valid rows and columns `DYNAMIC`.
pub(crate) fn tile_type(t: &TileDecl) -> Result<String, String> {
    let e = elem(t.dtype).ok_or_else(|| {
        format!(
            "tile `{}` is {}: the emitter writes f32 and f16 tiles only (PTO-ISA's CPU \
             simulation has no bf16 matmul)",
            t.name, t.dtype
        )
    })?;
    let (r, c) = padded_shape(t.kind, t.dtype, t.rows, t.cols);
    Ok(match t.kind {
        TileKind::Vec => format!(
            "pto::Tile<pto::TileType::Vec, {e}, {r}, {c}, pto::BLayout::RowMajor, pto::DYNAMIC, pto::DYNAMIC>"
        ),
        TileKind::Mat => format!(
            "pto::Tile<pto::TileType::Mat, {e}, {r}, {c}, pto::BLayout::ColMajor, pto::DYNAMIC, pto::DYNAMIC, pto::SLayout::RowMajor, 512>"
        ),
        TileKind::Left => format!("pto::TileLeft<{e}, {r}, {c}, pto::DYNAMIC, pto::DYNAMIC>"),
        TileKind::Right => format!("pto::TileRight<{e}, {r}, {c}, pto::DYNAMIC, pto::DYNAMIC>"),
        TileKind::Acc => format!("pto::TileAcc<{e}, {r}, {c}, pto::DYNAMIC, pto::DYNAMIC>"),
    })
}

/// A C++ string literal of `s`.
pub(crate) fn c_str(s: &str) -> String {
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

/// What a failed check does: drain the pipes and return (the status is written).
const RETURN: &str = "{ pipe_barrier(PIPE_ALL); return; }";

/// What the names of one kernel mean while its body is written.
struct KernelCx<'a> {
    decl: &'a KernelDecl,
    input: &'a Input<'a>,
    mode: Mode<'a>,
    /// Tiles declared so far: name → declaration.
    tiles: HashMap<String, TileDecl>,
    /// Tile parameters: name → (region index, element type).
    globals: HashMap<String, (usize, DType)>,
    /// Float scalar parameters.
    floats: Vec<String>,
    /// Counter for fresh C++ names.
    fresh: usize,
    /// Messages of the checks written so far.
    messages: Vec<String>,
    first_code: i64,
    /// The half of a double-buffered loop being written (which buffer, which credit event).
    half: usize,
    /// The double-buffered tiles of the loop being written.
    doubled_now: Vec<String>,
}

impl KernelCx<'_> {
    fn err(&self, loc: Loc, message: String) -> EmitError {
        kernel_error(&self.decl.name.name, message, loc)
    }

    /// A new check with `message`; returns its status code.
    fn check(&mut self, message: String) -> i64 {
        self.messages.push(message);
        self.first_code + self.messages.len() as i64 - 1
    }

    /// An integer or boolean expression as C++ (names are the `v_` locals and parameters);
    /// a division or remainder records a check named by `where_`.
    fn expr(&mut self, e: &Expr, loc: Loc, where_: &str) -> Result<String, EmitError> {
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
                    BinOp::Div => {
                        let code = self.check(format!("{where_}: division by zero"));
                        format!("pto_wsp_rt::idiv(st, {code}, {a}, {b})")
                    }
                    BinOp::Rem => {
                        let code = self.check(format!("{where_}: remainder by zero"));
                        format!("pto_wsp_rt::irem(st, {code}, {a}, {b})")
                    }
                    BinOp::Min => format!("pto_wsp_rt::imin({a}, {b})"),
                    BinOp::Max => format!("pto_wsp_rt::imax({a}, {b})"),
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

    /// `if (failed) return;` after a statement whose expressions may divide.
    fn after_divisions(&self, before: usize, out: &mut String, pad: &str) {
        if self.messages.len() > before {
            let _ = writeln!(out, "{pad}if (pto_wsp_rt::failed(st)) {RETURN}");
        }
    }

    fn name<'n>(&self, a: &'n InstArg) -> &'n str {
        match a {
            InstArg::Name(id) => &id.name,
            InstArg::Expr(_) => "",
        }
    }

    /// `TASSIGN<addr>(var)` in device mode.
    fn assign(&self, var: &str, addr: Option<u64>, out: &mut String, pad: &str) {
        if let Mode::Device { .. } = self.mode
            && let Some(a) = addr
        {
            let _ = writeln!(out, "{pad}TASSIGN<{a:#x}>({var});");
        }
    }

    fn body(&mut self, body: &[KStmt], out: &mut String, depth: usize) -> Result<(), EmitError> {
        let pad = "    ".repeat(depth);
        let kname = self.decl.name.name.clone();
        for s in body {
            let src = self.input.position(s.loc);
            let before = self.messages.len();
            match &s.kind {
                KStmtKind::Tile(t) => {
                    let ty = tile_type(t).map_err(|m| self.err(s.loc, m))?;
                    let where_ = format!("kernel `{kname}`: tile `{}`", t.name);
                    let (vr, vc) = match &t.valid {
                        None => (
                            format!("int64_t{{{}}}", t.rows),
                            format!("int64_t{{{}}}", t.cols),
                        ),
                        Some((r, c)) => {
                            (self.expr(r, s.loc, &where_)?, self.expr(c, s.loc, &where_)?)
                        }
                    };
                    let n = &t.name.name;
                    let _ = writeln!(
                        out,
                        "{pad}// tile {n}: {} {}[{}, {}] ({src})",
                        t.kind, t.dtype, t.rows, t.cols
                    );
                    let _ = writeln!(out, "{pad}const int64_t vr_{n} = {vr}, vc_{n} = {vc};");
                    self.after_divisions(before, out, &pad);
                    let code = self.check(format!(
                        "kernel `{kname}`: tile `{n}`: valid {{0}} x {{1}} is outside its {} x {}",
                        t.rows, t.cols
                    ));
                    let _ = writeln!(
                        out,
                        "{pad}if (!pto_wsp_rt::check_valid(st, {code}, vr_{n}, vc_{n}, {}, {})) {RETURN}",
                        t.rows, t.cols
                    );
                    match self.mode {
                        Mode::Device { alloc, doubles, .. } if doubles.doubled(s) => {
                            // Two buffers; the loop picks one per iteration (`t_{n}` there).
                            for (b, addr) in
                                [alloc.tile(s), alloc.second(s)].into_iter().enumerate()
                            {
                                let _ = writeln!(
                                    out,
                                    "{pad}{ty} t_{n}_b{b}(static_cast<size_t>(vr_{n}), static_cast<size_t>(vc_{n}));"
                                );
                                self.assign(&format!("t_{n}_b{b}"), addr, out, &pad);
                            }
                            if self.in_doubled_body(n) {
                                let _ = writeln!(out, "{pad}auto &t_{n} = t_{n}_b{};", self.half);
                            }
                        }
                        _ => {
                            let _ = writeln!(
                                out,
                                "{pad}{ty} t_{n}(static_cast<size_t>(vr_{n}), static_cast<size_t>(vc_{n}));"
                            );
                            if let Mode::Device { alloc, .. } = self.mode {
                                self.assign(&format!("t_{n}"), alloc.tile(s), out, &pad);
                            }
                        }
                    }
                    self.tiles.insert(n.clone(), t.clone());
                }
                KStmtKind::Let { name, value } => {
                    let where_ = format!("kernel `{kname}`: `{name}`");
                    let v = self.expr(value, s.loc, &where_)?;
                    let _ = writeln!(out, "{pad}const int64_t v_{} = {v};", name.name);
                    self.after_divisions(before, out, &pad);
                }
                KStmtKind::For { var, count, body } => {
                    let where_ = format!("kernel `{kname}`: the count of `for {var}`");
                    let n = self.expr(count, s.loc, &where_)?;
                    let _ = writeln!(out, "{pad}const int64_t {v}_n_ = {n};", v = var.name);
                    self.after_divisions(before, out, &pad);
                    let doubled: Vec<String> = match self.mode {
                        Mode::Device { sync, doubles, .. } => {
                            for x in sync.prologue(s) {
                                let _ = writeln!(out, "{pad}{}", x.cpp_in(self.half));
                            }
                            doubles.of_loop(s).iter().map(|d| d.tile.clone()).collect()
                        }
                        Mode::Host => Vec::new(),
                    };
                    if doubled.is_empty() {
                        let _ = writeln!(
                            out,
                            "{pad}for (int64_t v_{v} = 0; v_{v} < {v}_n_; ++v_{v}) {{",
                            v = var.name
                        );
                        self.body(body, out, depth + 1)?;
                        let _ = writeln!(out, "{pad}}}");
                    } else {
                        self.doubled_loop(&var.name, &doubled, body, out, depth)?;
                    }
                    if let Mode::Device { sync, .. } = self.mode {
                        for x in sync.epilogue(s) {
                            let _ = writeln!(out, "{pad}{}", x.cpp_in(self.half));
                        }
                    }
                }
                KStmtKind::If {
                    cond,
                    then_body,
                    else_body,
                } => {
                    let where_ = format!("kernel `{kname}`: the condition of `if`");
                    let c = self.expr(cond, s.loc, &where_)?;
                    self.fresh += 1;
                    let cv = format!("c{}_", self.fresh);
                    let _ = writeln!(out, "{pad}const bool {cv} = {c};");
                    self.after_divisions(before, out, &pad);
                    let _ = writeln!(out, "{pad}if ({cv}) {{");
                    self.body(then_body, out, depth + 1)?;
                    let _ = writeln!(out, "{pad}}} else {{");
                    self.body(else_body, out, depth + 1)?;
                    let _ = writeln!(out, "{pad}}}");
                }
                KStmtKind::Inst { op, args } => self.inst(s, *op, args, &src, out, &pad)?,
            }
            if let Mode::Device { sync, .. } = self.mode {
                for x in sync.after(s) {
                    let _ = writeln!(out, "{pad}{}", x.cpp_in(self.half));
                }
            }
        }
        Ok(())
    }

    /// Whether tile `n` is one of the double-buffered tiles of the loop being written.
    fn in_doubled_body(&self, n: &str) -> bool {
        self.doubled_now.iter().any(|d| d == n)
    }

    /// A loop with double-buffered tiles, two iterations per pass: the first on buffers `_b0`,
    /// the second (when there is one) on `_b1`.
    fn doubled_loop(
        &mut self,
        var: &str,
        doubled: &[String],
        body: &[KStmt],
        out: &mut String,
        depth: usize,
    ) -> Result<(), EmitError> {
        let pad = "    ".repeat(depth);
        let _ = writeln!(
            out,
            "{pad}for (int64_t {var}_p_ = 0; {var}_p_ < {var}_n_; {var}_p_ += 2) {{ // two iterations per pass: buffers 0 and 1"
        );
        let saved = (self.half, std::mem::take(&mut self.doubled_now));
        for h in 0..2 {
            let inner = "    ".repeat(depth + 1);
            if h == 0 {
                let _ = writeln!(out, "{inner}{{");
            } else {
                let _ = writeln!(out, "{inner}if ({var}_p_ + 1 < {var}_n_) {{");
            }
            let body_pad = "    ".repeat(depth + 2);
            let _ = writeln!(out, "{body_pad}const int64_t v_{var} = {var}_p_ + {h};");
            self.half = h;
            self.doubled_now = doubled.to_vec();
            for n in doubled {
                let inside = body
                    .iter()
                    .any(|st| matches!(&st.kind, KStmtKind::Tile(t) if t.name.name == *n));
                if !inside {
                    let _ = writeln!(out, "{body_pad}auto &t_{n} = t_{n}_b{h};");
                }
            }
            self.body(body, out, depth + 2)?;
            let _ = writeln!(out, "{inner}}}");
        }
        (self.half, self.doubled_now) = saved;
        let _ = writeln!(out, "{pad}}}");
        Ok(())
    }

    fn inst(
        &mut self,
        s: &KStmt,
        op: pto_wsp_ir::TileOp,
        args: &[InstArg],
        src: &str,
        out: &mut String,
        pad: &str,
    ) -> Result<(), EmitError> {
        let loc = s.loc;
        let mn = op.mnemonic();
        let form = op.cpp_form();
        if let CppForm::Missing(why) = form {
            return Err(self.err(loc, format!("{mn} has no PTO-ISA equivalent: {why}")));
        }
        let kname = self.decl.name.name.clone();
        let where_ = format!("kernel `{kname}`: {mn}");
        let written: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let _ = writeln!(out, "{pad}// {mn}({}) ({src})", written.join(", "));
        let before = self.messages.len();
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
        if !offsets.is_empty() {
            // Offsets are evaluated (and their divisions checked) before the instruction.
            for (i, o) in offsets.iter_mut().enumerate() {
                self.fresh += 1;
                let var = format!("o{}_{i}", self.fresh);
                let _ = writeln!(out, "{pad}const int64_t {var} = {o};");
                *o = var;
            }
            self.after_divisions(before, out, pad);
        }
        if let Mode::Device { sync, .. } = self.mode {
            for x in sync.before(s) {
                let _ = writeln!(out, "{pad}{}", x.cpp_in(self.half));
            }
        }
        if op == pto_wsp_ir::TileOp::Trans {
            return self.trans(s, args, loc, out, pad);
        }
        let call = match form {
            CppForm::Direct => format!("{mn}({})", cpp.join(", ")),
            CppForm::WithTmp => {
                // A scratch tile shaped like the source.
                self.fresh += 1;
                let tmp = format!("tmp{}_", self.fresh);
                let _ = writeln!(
                    out,
                    "{pad}decltype({s}) {tmp}({s}.GetValidRow(), {s}.GetValidCol());",
                    s = cpp[1]
                );
                if let Mode::Device { alloc, .. } = self.mode {
                    self.assign(&tmp, alloc.temp(s), out, pad);
                }
                format!("{mn}({}, {tmp})", cpp.join(", "))
            }
            CppForm::Helper { name, tmp } => {
                let mut ops = cpp.clone();
                if tmp {
                    self.fresh += 1;
                    let t = format!("tmp{}_", self.fresh);
                    let _ = writeln!(
                        out,
                        "{pad}decltype({s}) {t}({s}.GetValidRow(), {s}.GetValidCol());",
                        s = cpp[1]
                    );
                    if let Mode::Device { alloc, .. } = self.mode {
                        self.assign(&t, alloc.temp(s), out, pad);
                    }
                    ops.push(t);
                }
                format!("pto_wsp_rt::{name}({})", ops.join(", "))
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
                let stacked = self
                    .tiles
                    .get(t.trim_start_matches("t_"))
                    .is_some_and(|d| d.kind == TileKind::Vec);
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
                let code = self.check(format!(
                    "{where_}: {{0}} x {{1}} at ({{2}}, {{3}}) is outside region {ri} ({{4}} x {{5}})"
                ));
                let _code2 = self.check(format!(
                    "{where_}: rows {{0}} to {{1}} of region {ri} are not one run of its layout, \
                     whose rows come in groups of {{2}} (a `vec` tile may cover whole groups, a \
                     matrix tile must stay inside one)"
                ));
                let _code3 = self.check(format!(
                    "{where_}: the rows of region {ri} are {{0}} elements apart; a matrix tile \
                     moves rows at most 65,535 elements apart"
                ));
                let _ = writeln!(out, "{pad}{{");
                let e = elem(self.globals[&g].1).unwrap_or("float");
                let _ = writeln!(out, "{pad}    pto_wsp_rt::Part<{e}> p_;");
                let _ = writeln!(
                    out,
                    "{pad}    if (!pto_wsp_rt::part(st, {code}, g_{g}, {r0}, {c0}, {t}.GetValidRow(), {t}.GetValidCol(), {stacked}, p_)) {RETURN}"
                );
                let view = if stacked { "tensor" } else { "tensor2" };
                let _ = writeln!(out, "{pad}    auto gt_ = pto_wsp_rt::{view}(p_);");
                let _ = writeln!(out, "{pad}    {call};");
                let _ = writeln!(out, "{pad}}}");
            }
        }
        Ok(())
    }

    /// `TTRANS(dst, src)`. PTO-ISA's `TTRANS` handles vector tiles only; in host mode a left /
    /// right / accumulator / matrix operand goes through a vector tile and `TMOV` (copies,
    /// exact in any order). In device mode the rules allow vector tiles only.
    fn trans(
        &mut self,
        s: &KStmt,
        args: &[InstArg],
        loc: Loc,
        out: &mut String,
        pad: &str,
    ) -> Result<(), EmitError> {
        let (dn, sn) = (self.name(&args[0]), self.name(&args[1]));
        let (Some(d), Some(sd)) = (self.tiles.get(dn).cloned(), self.tiles.get(sn).cloned()) else {
            return Err(self.err(loc, "TTRANS: operands must be tiles".into()));
        };
        self.fresh += 1;
        let k = self.fresh;
        let plain = |t: &TileDecl| TileDecl {
            name: pto_wsp_ir::Ident::new(String::new()),
            kind: TileKind::Vec,
            ..t.clone()
        };
        let mut src = format!("t_{sn}");
        if sd.kind != TileKind::Vec {
            let ty = tile_type(&plain(&sd)).map_err(|m| self.err(loc, m))?;
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
        if let Mode::Device { alloc, .. } = self.mode {
            self.assign(&format!("tmp{k}_"), alloc.temp(s), out, pad);
        }
        if d.kind == TileKind::Vec {
            let _ = writeln!(out, "{pad}TTRANS(t_{dn}, {src}, tmp{k}_);");
        } else {
            let ty = tile_type(&plain(&d)).map_err(|m| self.err(loc, m))?;
            let _ = writeln!(
                out,
                "{pad}{ty} tdst{k}_(t_{dn}.GetValidRow(), t_{dn}.GetValidCol());\n\
                 {pad}TTRANS(tdst{k}_, {src}, tmp{k}_);\n{pad}TMOV(t_{dn}, tdst{k}_);"
            );
        }
        Ok(())
    }
}

/// C++ keywords and names a kernel function may not take.
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

/// Whether `name` cannot be a kernel function's name.
pub(crate) fn reserved(name: &str) -> bool {
    CPP_RESERVED.contains(&name)
        || name.starts_with('T') && pto_wsp_ir::TileOp::parse(name).is_some()
}

/// One kernel as a C++ header: `void NAME(status, regions..., scalars...)` in namespace
/// `pto_wsp_kernels`; its checks' status codes start at `first_code` (≥ 1).
pub(crate) fn emit_kernel(
    k: &KernelDecl,
    input: &Input<'_>,
    mode: Mode<'_>,
    first_code: i64,
) -> Result<KernelText, EmitError> {
    if reserved(&k.name.name) {
        return Err(kernel_error(
            &k.name.name,
            "the kernel's name is a C++ keyword or a PTO-ISA instruction; rename it",
            k.name.loc,
        ));
    }
    let mut cx = KernelCx {
        decl: k,
        input,
        mode,
        tiles: HashMap::new(),
        globals: HashMap::new(),
        floats: Vec::new(),
        fresh: 0,
        messages: Vec::new(),
        first_code,
        half: 0,
        doubled_now: Vec::new(),
    };
    let mut params = vec!["__gm__ pto_wsp_rt::Status *st".to_string()];
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
                params.push(format!("const pto_wsp_rt::Gm<{e}> &g_{n}"));
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
        "// Generated by `pto-wsp emit`: kernel `{name}` ({}). Do not edit.",
        input.position(k.name.loc)
    );
    out.push_str("#pragma once\n#include \"pto_wsp_rt.hpp\"\n\nnamespace pto_wsp_kernels {\n\n");
    let _ = writeln!(
        out,
        "// Regions are rows x cols views of global memory; float parameters arrive as f32.\n\
         inline void {name}({})\n{{",
        params.join(", ")
    );
    out.push_str("    using namespace pto;\n");
    for p in &k.params {
        let n = &p.name.name;
        match p.kind {
            ParamKind::Tile { .. } => {
                let _ = writeln!(out, "    (void)g_{n};");
            }
            ParamKind::Scalar(_) => {
                let _ = writeln!(out, "    (void)v_{n};");
            }
        }
    }
    out.push_str(&body);
    if let Mode::Device { sync, .. } = mode {
        for x in &sync.end {
            let _ = writeln!(out, "    {}", x.cpp());
        }
    }
    out.push_str("}\n\n} // namespace pto_wsp_kernels\n");
    Ok(KernelText {
        text: out,
        messages: cx.messages,
    })
}
