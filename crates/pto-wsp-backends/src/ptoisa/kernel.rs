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
//!
//! How: the body is read in its resolved form (`pto_wsp_ir::resolve::body`): tiles, regions,
//! integers and floats are slots, named in the C++ by the names the slots carry. The surface
//! statements are walked beside it only as the keys of the device plans (`alloc`, `sync`) and
//! for the source text in comments.

use super::kernel_error;
use crate::{EmitError, Input};
use pto_wsp_ir::device::{
    alloc::Plan,
    padded_shape,
    sync::{Doubles, SyncPlan},
};
use pto_wsp_ir::kernel_body::{KStmt, KStmtKind, TileDecl, TileKind};
use pto_wsp_ir::resolve::body::{
    Arg, Body, BodyKind, BodyStmt, FloatVal, IntExpr, MsgPart, TileRef, resolve_body,
};
use pto_wsp_ir::tile_isa::{CMP_MODES, CppForm, Operand};
use pto_wsp_ir::{BinOp, DType, Expr, KernelDecl, Loc, ParamKind, ParamType, TileOp, UnOp};
use std::fmt::Write as _;

/// The shortest run of alike operators [`KernelCx::chain`] writes flat.
const FLAT_RUN: usize = 32;

/// The operators C++ groups alike (one precedence, left to right, each written infix), so a run
/// of them needs no parentheses inside; `None` for the ones written as calls or comparisons.
fn cpp_group(op: BinOp) -> Option<u8> {
    match op {
        BinOp::Add | BinOp::Sub => Some(0),
        BinOp::Mul => Some(1),
        BinOp::And => Some(2),
        BinOp::Or => Some(3),
        BinOp::Div
        | BinOp::Rem
        | BinOp::Min
        | BinOp::Max
        | BinOp::Eq
        | BinOp::Ne
        | BinOp::Lt
        | BinOp::Le
        | BinOp::Gt
        | BinOp::Ge => None,
    }
}

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
        DType::I32 => Some("int32_t"),
        DType::U32 => Some("uint32_t"),
        DType::I64 => Some("int64_t"),
        DType::U64 => Some("uint64_t"),
        DType::U8 => Some("uint8_t"),
        DType::Bf16 => None,
    }
}

/// The PTO-ISA C++ type of a tile: its device shape, valid rows and columns `DYNAMIC`.
pub(crate) fn tile_type(t: &TileDecl) -> Result<String, String> {
    let e = elem(t.dtype).ok_or_else(|| {
        format!(
            "tile `{}` is {}: the emitter writes f32, f16 and integer tiles only (PTO-ISA's CPU \
             simulation has no bf16 arithmetic with this g++)",
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

/// One kernel while its body is written.
struct KernelCx<'a> {
    decl: &'a KernelDecl,
    /// The body, resolved.
    body: &'a Body,
    input: &'a Input<'a>,
    mode: Mode<'a>,
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

impl<'a> KernelCx<'a> {
    fn err(&self, loc: Loc, message: String) -> EmitError {
        kernel_error(&self.decl.name.name, message, loc)
    }

    /// A new check with `message`; returns its status code.
    fn check(&mut self, message: String) -> i64 {
        self.messages.push(message);
        self.first_code + self.messages.len() as i64 - 1
    }

    /// An integer or boolean expression as C++ (value slots are the `v_` locals and parameters,
    /// region extents `g_x.rows` / `g_x.cols`); a division or remainder records a check named by
    /// `where_`.
    fn expr(&mut self, e: &IntExpr, loc: Loc, where_: &str) -> Result<String, EmitError> {
        let mut slots = e.slots().iter();
        self.cexpr(&e.text, &mut slots, loc, where_)
    }

    /// The C++ of `slot`, a value slot.
    fn value(&self, slot: u32) -> String {
        for r in &self.body.regions {
            if r.extents.0 == slot {
                return format!("g_{}.rows", r.name);
            }
            if r.extents.1 == slot {
                return format!("g_{}.cols", r.name);
            }
        }
        format!("v_{}", self.body.values[slot as usize].name)
    }

    /// [`KernelCx::expr`] of a subexpression: `slots` gives the value slot of each name, in
    /// the order they are written.
    fn cexpr(
        &mut self,
        e: &Expr,
        slots: &mut std::slice::Iter<'_, u32>,
        loc: Loc,
        where_: &str,
    ) -> Result<String, EmitError> {
        Ok(match e {
            Expr::Int(v) => format!("int64_t{{{v}}}"),
            Expr::UInt(v) => format!("static_cast<int64_t>(UINT64_C({v}))"),
            Expr::Bool(b) => b.to_string(),
            Expr::Float(_) => {
                return Err(self.err(loc, format!("`{e}` is a float where an integer is needed")));
            }
            Expr::Name(id) => match slots.next() {
                Some(&slot) => self.value(slot),
                None => return Err(self.err(loc, format!("`{id}` is not resolved"))),
            },
            Expr::Unary(op, x) => {
                let x = self.cexpr(x, slots, loc, where_)?;
                match op {
                    UnOp::Neg => format!("(-{x})"),
                    UnOp::Not => format!("(!{x})"),
                }
            }
            Expr::Binary(..) => self.chain(e, slots, loc, where_)?,
            Expr::Ternary(c, a, b) => {
                let c = self.cexpr(c, slots, loc, where_)?;
                let a = self.cexpr(a, slots, loc, where_)?;
                let b = self.cexpr(b, slots, loc, where_)?;
                format!("({c} ? {a} : {b})")
            }
        })
    }

    /// A chain of binary operations, read along its left operands in a loop. A run of at least
    /// [`FLAT_RUN`] operators C++ groups alike (`+ -`, `*`, `&&`, `||`) is written flat,
    /// `(x + y - z …)`, so the C++ nests no deeper for a long sum; shorter runs one pair of
    /// parentheses per operator.
    fn chain(
        &mut self,
        e: &Expr,
        slots: &mut std::slice::Iter<'_, u32>,
        loc: Loc,
        where_: &str,
    ) -> Result<String, EmitError> {
        let (first, rest) = e.left_spine();
        let mut acc = self.cexpr(first, slots, loc, where_)?;
        let mut i = 0;
        while i < rest.len() {
            let group = cpp_group(rest[i].0);
            let run = rest[i..]
                .iter()
                .take_while(|(op, _)| group.is_some() && cpp_group(*op) == group)
                .count();
            if run >= FLAT_RUN {
                let mut flat = format!("({acc}");
                for (op, b) in &rest[i..i + run] {
                    let b = self.cexpr(b, slots, loc, where_)?;
                    let _ = write!(flat, " {op} {b}");
                }
                flat.push(')');
                acc = flat;
                i += run;
            } else {
                let (op, b) = rest[i];
                let b = self.cexpr(b, slots, loc, where_)?;
                acc = self.binary(op, &acc, &b, where_);
                i += 1;
            }
        }
        Ok(acc)
    }

    /// `a op b` as C++, `a` and `b` written already.
    fn binary(&mut self, op: BinOp, a: &str, b: &str, where_: &str) -> String {
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

    /// `if (failed) return;` after a statement whose expressions may divide.
    fn after_divisions(&self, before: usize, out: &mut String, pad: &str) {
        if self.messages.len() > before {
            let _ = writeln!(out, "{pad}if (pto_wsp_rt::failed(st)) {RETURN}");
        }
    }

    /// The declaration of the tile an operand names.
    fn decl(&self, t: &TileRef) -> &'a TileDecl {
        &self.body.tiles[t.tile as usize].decl
    }

    /// A tile operand as C++: `t_x`, or `t_x[i]` for an array element, its index evaluated and
    /// checked first (written to `out`).
    fn tile_ref(
        &mut self,
        a: &TileRef,
        loc: Loc,
        where_: &str,
        out: &mut String,
        pad: &str,
    ) -> Result<String, EmitError> {
        let d = self.decl(a);
        let Some(e) = &a.index else {
            return Ok(format!("t_{}", d.name));
        };
        let len = d.count.unwrap_or(0);
        let before = self.messages.len();
        let i = self.expr(e, loc, where_)?;
        self.fresh += 1;
        let var = format!("ix{}_", self.fresh);
        let _ = writeln!(out, "{pad}const int64_t {var} = {i};");
        self.after_divisions(before, out, pad);
        let code = self.check(format!(
            "kernel `{}`: tile array `{}`: index {{0}} is outside 0..{{1}}",
            self.decl.name.name, d.name
        ));
        let _ = writeln!(
            out,
            "{pad}if (!pto_wsp_rt::in_range(st, {code}, {var}, {len})) {RETURN}"
        );
        Ok(format!("t_{}[{var}]", d.name))
    }

    /// A float operand as C++ (a `float` expression).
    fn float(&mut self, a: &FloatVal, loc: Loc, where_: &str) -> Result<String, EmitError> {
        Ok(match a {
            FloatVal::Lit(f) => format!("{f:?}f"),
            FloatVal::Slot(i) => format!("v_{}", self.body.floats[*i as usize].name),
            FloatVal::Inf { negative } => {
                format!("({}__builtin_inff())", if *negative { "-" } else { "" })
            }
            FloatVal::OfInt(e) => format!("static_cast<float>({})", self.expr(e, loc, where_)?),
            FloatVal::InvSqrt(e) => format!("pto_wsp_rt::inv_sqrt({})", self.expr(e, loc, where_)?),
        })
    }

    /// A `check` message for the status table: its text with each `{name}` replaced by a
    /// numbered value (`{0}`…`{6}`), and the C++ of those values.
    fn message(
        &mut self,
        parts: &[MsgPart],
        loc: Loc,
        where_: &str,
    ) -> Result<(String, Vec<String>), EmitError> {
        let mut msg = String::new();
        let mut values = Vec::new();
        for part in parts {
            match part {
                MsgPart::Text(t) => msg.push_str(t),
                MsgPart::Value(e) => {
                    let _ = write!(msg, "{{{}}}", values.len());
                    values.push(self.expr(e, loc, where_)?);
                }
            }
        }
        if values.len() > 7 {
            return Err(self.err(
                loc,
                format!(
                    "check message quotes {} values; a task's status holds at most 7",
                    values.len()
                ),
            ));
        }
        Ok((msg, values))
    }

    /// `TASSIGN<addr>(var)` in device mode.
    fn assign(&self, var: &str, addr: Option<u64>, out: &mut String, pad: &str) {
        if let Mode::Device { .. } = self.mode
            && let Some(a) = addr
        {
            let _ = writeln!(out, "{pad}TASSIGN<{a:#x}>({var});");
        }
    }

    /// Writes `body` (the surface statements, the keys of the device plans) and `resolved` (the
    /// same statements resolved).
    fn body(
        &mut self,
        body: &[KStmt],
        resolved: &[BodyStmt],
        out: &mut String,
        depth: usize,
    ) -> Result<(), EmitError> {
        let pad = "    ".repeat(depth);
        let kname = self.decl.name.name.clone();
        for (s, b) in body.iter().zip(resolved) {
            let src = self.input.position(s.loc);
            let before = self.messages.len();
            match (&b.kind, &s.kind) {
                (BodyKind::Tile { tile, valid }, _) => {
                    self.tile_decl(s, *tile, valid.as_ref(), &src, out, &pad)?
                }
                (BodyKind::Let { slot, value }, _) => {
                    let name = &self.body.values[*slot as usize].name;
                    let where_ = format!("kernel `{kname}`: `{name}`");
                    let v = self.expr(value, s.loc, &where_)?;
                    let _ = writeln!(out, "{pad}const int64_t v_{name} = {v};");
                    self.after_divisions(before, out, &pad);
                }
                (BodyKind::LetFloat { slot, value }, _) => {
                    let name = &self.body.floats[*slot as usize].name;
                    let where_ = format!("kernel `{kname}`: `{name}`");
                    let v = self.float(value, s.loc, &where_)?;
                    let _ = writeln!(out, "{pad}const float v_{name} = {v};");
                    self.after_divisions(before, out, &pad);
                }
                (BodyKind::Check { cond, message }, _) => {
                    let where_ = format!("kernel `{kname}`: check");
                    let c = self.expr(cond, s.loc, &where_)?;
                    self.fresh += 1;
                    let cv = format!("c{}_", self.fresh);
                    let _ = writeln!(out, "{pad}const bool {cv} = {c};");
                    self.after_divisions(before, out, &pad);
                    let (text, values) = self.message(message, s.loc, &where_)?;
                    let code = self.check(format!("kernel `{kname}`: {text}"));
                    let _ = writeln!(out, "{pad}if (!{cv}) {{");
                    let mut args = vec!["st".to_string(), code.to_string()];
                    args.extend(values);
                    let _ = writeln!(
                        out,
                        "{pad}    pto_wsp_rt::fail({});\n{pad}    {RETURN}\n{pad}}}",
                        args.join(", ")
                    );
                }
                (
                    BodyKind::GetVal {
                        slot,
                        tile,
                        row,
                        col,
                    },
                    _,
                ) => {
                    let where_ = format!("kernel `{kname}`: GETVAL");
                    let t = self.tile_ref(tile, s.loc, &where_, out, &pad)?;
                    let (r, c) = (
                        self.expr(row, s.loc, &where_)?,
                        self.expr(col, s.loc, &where_)?,
                    );
                    self.after_divisions(before, out, &pad);
                    if let Mode::Device { sync, .. } = self.mode {
                        for x in sync.before(s) {
                            let _ = writeln!(out, "{pad}{}", x.cpp_in(self.half));
                        }
                    }
                    let code = self.check(format!(
                        "{where_}: ({{0}}, {{1}}) is outside the tile ({{2}} x {{3}})"
                    ));
                    let name = &self.body.values[*slot as usize].name;
                    let _ = writeln!(out, "{pad}int64_t v_{name} = 0;");
                    let _ = writeln!(
                        out,
                        "{pad}if (!pto_wsp_rt::get_value(st, {code}, {t}, {r}, {c}, v_{name})) {RETURN}",
                    );
                }
                (
                    BodyKind::For {
                        slot,
                        count,
                        body: rbody,
                    },
                    KStmtKind::For { body: sbody, .. },
                ) => {
                    let var = self.body.values[*slot as usize].name.clone();
                    let where_ = format!("kernel `{kname}`: the count of `for {var}`");
                    let n = self.expr(count, s.loc, &where_)?;
                    // Sibling loops may reuse a variable: each count has a fresh name.
                    self.fresh += 1;
                    let cnt = format!("{var}_n{}_", self.fresh);
                    let _ = writeln!(out, "{pad}const int64_t {cnt} = {n};");
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
                            "{pad}for (int64_t v_{var} = 0; v_{var} < {cnt}; ++v_{var}) {{",
                        );
                        self.body(sbody, rbody, out, depth + 1)?;
                        let _ = writeln!(out, "{pad}}}");
                    } else {
                        self.doubled_loop((&var, &cnt), &doubled, (sbody, rbody), out, depth)?;
                    }
                    if let Mode::Device { sync, .. } = self.mode {
                        for x in sync.epilogue(s) {
                            let _ = writeln!(out, "{pad}{}", x.cpp_in(self.half));
                        }
                    }
                }
                (
                    BodyKind::If {
                        cond,
                        then_body: rthen,
                        else_body: relse,
                    },
                    KStmtKind::If {
                        then_body: sthen,
                        else_body: selse,
                        ..
                    },
                ) => {
                    let where_ = format!("kernel `{kname}`: the condition of `if`");
                    let c = self.expr(cond, s.loc, &where_)?;
                    self.fresh += 1;
                    let cv = format!("c{}_", self.fresh);
                    let _ = writeln!(out, "{pad}const bool {cv} = {c};");
                    self.after_divisions(before, out, &pad);
                    let _ = writeln!(out, "{pad}if ({cv}) {{");
                    self.body(sthen, rthen, out, depth + 1)?;
                    let _ = writeln!(out, "{pad}}} else {{");
                    self.body(selse, relse, out, depth + 1)?;
                    let _ = writeln!(out, "{pad}}}");
                }
                (BodyKind::Inst { op, args }, _) => self.inst(s, *op, args, &src, out, &pad)?,
                _ => {
                    return Err(self.err(s.loc, "the resolved body does not match it".into()));
                }
            }
            if let Mode::Device { sync, .. } = self.mode {
                for x in sync.after(s) {
                    let _ = writeln!(out, "{pad}{}", x.cpp_in(self.half));
                }
            }
        }
        Ok(())
    }

    /// A tile declaration (`s`): its valid sizes checked, the tile (or an array of tiles) made
    /// and, on the device, placed in its buffer.
    fn tile_decl(
        &mut self,
        s: &KStmt,
        tile: u32,
        valid: Option<&(IntExpr, IntExpr)>,
        src: &str,
        out: &mut String,
        pad: &str,
    ) -> Result<(), EmitError> {
        let t = &self.body.tiles[tile as usize].decl;
        let kname = self.decl.name.name.clone();
        let before = self.messages.len();
        let ty = tile_type(t).map_err(|m| self.err(s.loc, m))?;
        let where_ = format!("kernel `{kname}`: tile `{}`", t.name);
        let (vr, vc) = match valid {
            None => (
                format!("int64_t{{{}}}", t.rows),
                format!("int64_t{{{}}}", t.cols),
            ),
            Some((r, c)) => (self.expr(r, s.loc, &where_)?, self.expr(c, s.loc, &where_)?),
        };
        let n = &t.name.name;
        let count = t.count.map(|c| format!("[{c}]")).unwrap_or_default();
        let _ = writeln!(
            out,
            "{pad}// tile {n}{count}: {} {}[{}, {}] ({src})",
            t.kind, t.dtype, t.rows, t.cols
        );
        let _ = writeln!(out, "{pad}const int64_t vr_{n} = {vr}, vc_{n} = {vc};");
        self.after_divisions(before, out, pad);
        let code = self.check(format!(
            "kernel `{kname}`: tile `{n}`: valid {{0}} x {{1}} is outside its {} x {}",
            t.rows, t.cols
        ));
        let _ = writeln!(
            out,
            "{pad}if (!pto_wsp_rt::check_valid(st, {code}, vr_{n}, vc_{n}, {}, {})) {RETURN}",
            t.rows, t.cols
        );
        let args = format!("(static_cast<size_t>(vr_{n}), static_cast<size_t>(vc_{n}))");
        match (self.mode, t.count) {
            (_, Some(c)) => {
                let all = vec![format!("{ty}{args}"); c as usize];
                let _ = writeln!(out, "{pad}{ty} t_{n}[{c}] = {{{}}};", all.join(", "));
                if let Mode::Device { alloc, .. } = self.mode
                    && let Some(base) = alloc.tile(s)
                {
                    let step = pto_wsp_ir::device::alloc::element_bytes(t);
                    for i in 0..c {
                        self.assign(&format!("t_{n}[{i}]"), Some(base + i * step), out, pad);
                    }
                }
            }
            (Mode::Device { alloc, doubles, .. }, None) if doubles.doubled(s) => {
                // Two buffers; the loop picks one per iteration (`t_{n}` there).
                for (b, addr) in [alloc.tile(s), alloc.second(s)].into_iter().enumerate() {
                    let _ = writeln!(out, "{pad}{ty} t_{n}_b{b}{args};");
                    self.assign(&format!("t_{n}_b{b}"), addr, out, pad);
                }
                if self.in_doubled_body(n) {
                    let _ = writeln!(out, "{pad}auto &t_{n} = t_{n}_b{};", self.half);
                }
            }
            (_, None) => {
                let _ = writeln!(out, "{pad}{ty} t_{n}{args};");
                if let Mode::Device { alloc, .. } = self.mode {
                    self.assign(&format!("t_{n}"), alloc.tile(s), out, pad);
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
    /// `(var, cnt)`: the loop variable and the name of its count.
    fn doubled_loop(
        &mut self,
        (var, cnt): (&str, &str),
        doubled: &[String],
        (body, resolved): (&[KStmt], &[BodyStmt]),
        out: &mut String,
        depth: usize,
    ) -> Result<(), EmitError> {
        let pad = "    ".repeat(depth);
        let _ = writeln!(
            out,
            "{pad}for (int64_t {var}_p_ = 0; {var}_p_ < {cnt}; {var}_p_ += 2) {{ // two iterations per pass: buffers 0 and 1"
        );
        let saved = (self.half, std::mem::take(&mut self.doubled_now));
        for h in 0..2 {
            let inner = "    ".repeat(depth + 1);
            if h == 0 {
                let _ = writeln!(out, "{inner}{{");
            } else {
                let _ = writeln!(out, "{inner}if ({var}_p_ + 1 < {cnt}) {{");
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
            self.body(body, resolved, out, depth + 2)?;
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
        args: &[Arg],
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
        let written: Vec<String> = match &s.kind {
            KStmtKind::Inst { args, .. } => args.iter().map(|a| a.to_string()).collect(),
            _ => Vec::new(),
        };
        let _ = writeln!(out, "{pad}// {mn}({}) ({src})", written.join(", "));
        let before = self.messages.len();
        // The element type of the first tile operand: float operands take it.
        let tile_elem = args
            .iter()
            .find_map(|a| match a {
                Arg::Tile(t) => elem(self.decl(t).dtype),
                _ => None,
            })
            .unwrap_or("float");
        let mut cpp: Vec<String> = Vec::new();
        let mut tiles: Vec<&TileRef> = Vec::new();
        let mut global: Option<(String, usize, DType)> = None;
        let mut offsets: Vec<String> = Vec::new();
        let mut ints: Vec<String> = Vec::new();
        let mut word = String::new();
        for (i, kind) in op.operands().iter().enumerate() {
            let a = args.get(i);
            match kind {
                Operand::Dst | Operand::Src => {
                    let Some(Arg::Tile(a)) = a else {
                        return Err(self.err(loc, format!("{mn}: a tile operand is missing")));
                    };
                    cpp.push(self.tile_ref(a, loc, &where_, out, pad)?);
                    tiles.push(a);
                }
                Operand::Global => {
                    let Some(&Arg::Region(ri)) = a else {
                        return Err(self.err(loc, format!("{mn}: a tile parameter is missing")));
                    };
                    let r = &self.body.regions[ri as usize];
                    global = Some((r.name.clone(), ri as usize, r.dtype));
                    cpp.push("gt_".to_string());
                }
                Operand::Float => {
                    let v = match a {
                        Some(Arg::Float(f)) => self.float(f, loc, &where_)?,
                        _ => "0.0f".to_string(),
                    };
                    cpp.push(format!("static_cast<{tile_elem}>({v})"));
                }
                Operand::CmpMode => {
                    let w = match a {
                        Some(&Arg::Word(w)) => CMP_MODES.get(w as usize).copied(),
                        _ => None,
                    };
                    word = format!("pto::CmpMode::{}", w.unwrap_or_default());
                }
                Operand::TriMode => {
                    word = match a {
                        Some(Arg::Word(1)) => "1".into(),
                        _ => "0".into(),
                    };
                }
                Operand::PadMode => {
                    word = match a {
                        Some(Arg::Word(1)) => "pto::PadValue::Min".into(),
                        Some(Arg::Word(2)) => "pto::PadValue::Max".into(),
                        _ => "pto::PadValue::Zero".into(),
                    };
                }
                Operand::Int => {
                    let Some(Arg::Int(e)) = a else {
                        return Err(self.err(loc, format!("{mn}: an integer operand is missing")));
                    };
                    ints.push(self.expr(e, loc, &where_)?);
                }
                Operand::OptInt => {
                    offsets.push(match a {
                        Some(Arg::Int(e)) => self.expr(e, loc, &where_)?,
                        _ => "int64_t{0}".to_string(),
                    });
                }
            }
        }
        if !offsets.is_empty() || !ints.is_empty() {
            // Offsets and integer operands are evaluated (and their divisions checked) before
            // the instruction.
            for (i, o) in offsets.iter_mut().chain(ints.iter_mut()).enumerate() {
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
        if op == TileOp::Trans {
            return self.trans(s, &cpp, args, loc, out, pad);
        }
        let dst_elem = tiles
            .first()
            .and_then(|a| elem(self.decl(a).dtype))
            .unwrap_or("float");
        // A store of an accumulator into a region of another type converts (the cube's fix
        // pipe); PTO-ISA's CPU simulation refuses mixed sizes, so the helper does it there.
        let converting_store = op == TileOp::Store
            && global
                .as_ref()
                .zip(tiles.first().map(|a| self.decl(a)))
                .is_some_and(|((_, _, dt), t)| *dt != t.dtype);
        let call = match form {
            _ if converting_store => format!("pto_wsp_rt::store_cvt({})", cpp.join(", ")),
            CppForm::Direct if op == TileOp::MrgSort => format!(
                "TMRGSORT({}, {}, static_cast<uint32_t>({}))",
                cpp[0], cpp[1], ints[0]
            ),
            CppForm::Direct => format!("{mn}({})", cpp.join(", ")),
            CppForm::WithTmp => {
                let tmp = self.temp_tile(s, &cpp[1], out, pad);
                format!("{mn}({}, {tmp})", cpp.join(", "))
            }
            CppForm::Helper { name, tmp } => {
                let mut ops = cpp.clone();
                if tmp {
                    ops.push(self.temp_tile(s, &cpp[1], out, pad));
                }
                ops.extend(ints.iter().cloned());
                if !word.is_empty() {
                    ops.push(word.clone());
                }
                if op == TileOp::SetVal {
                    let code = self.check(format!(
                        "{where_}: ({{0}}, {{1}}) is outside the tile ({{2}} x {{3}})"
                    ));
                    format!(
                        "if (!pto_wsp_rt::{name}(st, {code}, {})) {RETURN}",
                        ops.join(", ")
                    )
                } else {
                    format!("pto_wsp_rt::{name}({})", ops.join(", "))
                }
            }
            CppForm::WithRound => {
                format!("{mn}({}, pto::RoundMode::CAST_RINT)", cpp.join(", "))
            }
            CppForm::AccTwice => format!("{mn}({c}, {c}, {}, {})", cpp[1], cpp[2], c = cpp[0]),
            CppForm::Template => match op {
                TileOp::Ci => format!(
                    "TCI<std::remove_reference_t<decltype({t})>, {dst_elem}, 0>({t}, static_cast<{dst_elem}>({}))",
                    ints[0],
                    t = cpp[0]
                ),
                TileOp::Tri => format!(
                    "TTRI<std::remove_reference_t<decltype({t})>, {word}>({t}, static_cast<int>({}))",
                    ints[0],
                    t = cpp[0]
                ),
                _ => format!("pto_wsp_rt::fill_pad<{word}>({})", cpp.join(", ")),
            },
            CppForm::Missing(_) => unreachable!("refused above"),
        };
        match global {
            None if call.starts_with("if (") => {
                let _ = writeln!(out, "{pad}{call}");
            }
            None => {
                let _ = writeln!(out, "{pad}{call};");
            }
            Some((g, ri, gdt)) => {
                // The tile whose valid part moves: the destination of TLOAD, the source of TSTORE.
                let t = cpp
                    .iter()
                    .find(|c| c.as_str() != "gt_")
                    .cloned()
                    .unwrap_or_default();
                let stacked = tiles
                    .first()
                    .is_some_and(|a| self.decl(a).kind == TileKind::Vec);
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
                let e = elem(gdt).unwrap_or("float");
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

    /// A scratch tile shaped like the tile `like` (C++), placed on the device where the plan
    /// puts instruction `s`'s scratch; returns its name.
    fn temp_tile(&mut self, s: &KStmt, like: &str, out: &mut String, pad: &str) -> String {
        self.fresh += 1;
        let t = format!("tmp{}_", self.fresh);
        let _ = writeln!(
            out,
            "{pad}std::remove_reference_t<decltype({like})> {t}({like}.GetValidRow(), {like}.GetValidCol());"
        );
        if let Mode::Device { alloc, .. } = self.mode {
            self.assign(&t, alloc.temp(s), out, pad);
        }
        t
    }

    /// `TTRANS(dst, src)` (`cpp`: the operands as C++). PTO-ISA's `TTRANS` handles vector tiles
    /// only; in host mode a left / right / accumulator / matrix operand goes through a vector
    /// tile and `TMOV` (copies, exact in any order). In device mode the rules allow vector tiles
    /// only.
    fn trans(
        &mut self,
        s: &KStmt,
        cpp: &[String],
        args: &[Arg],
        loc: Loc,
        out: &mut String,
        pad: &str,
    ) -> Result<(), EmitError> {
        let (Some(Arg::Tile(dt)), Some(Arg::Tile(st))) = (args.first(), args.get(1)) else {
            return Err(self.err(loc, "TTRANS: operands must be tiles".into()));
        };
        let (d, sd) = (self.decl(dt).clone(), self.decl(st).clone());
        let (dref, sref) = (cpp[0].clone(), cpp[1].clone());
        self.fresh += 1;
        let k = self.fresh;
        let plain = |t: &TileDecl| TileDecl {
            name: pto_wsp_ir::Ident::new(String::new()),
            kind: TileKind::Vec,
            count: None,
            ..t.clone()
        };
        let mut src = sref.clone();
        if sd.kind != TileKind::Vec {
            let ty = tile_type(&plain(&sd)).map_err(|m| self.err(loc, m))?;
            let _ = writeln!(
                out,
                "{pad}{ty} tsrc{k}_({sref}.GetValidRow(), {sref}.GetValidCol());\n{pad}TMOV(tsrc{k}_, {sref});"
            );
            src = format!("tsrc{k}_");
        }
        let _ = writeln!(
            out,
            "{pad}std::remove_reference_t<decltype({src})> tmp{k}_({src}.GetValidRow(), {src}.GetValidCol());"
        );
        if let Mode::Device { alloc, .. } = self.mode {
            self.assign(&format!("tmp{k}_"), alloc.temp(s), out, pad);
        }
        if d.kind == TileKind::Vec {
            let _ = writeln!(out, "{pad}TTRANS({dref}, {src}, tmp{k}_);");
        } else {
            let ty = tile_type(&plain(&d)).map_err(|m| self.err(loc, m))?;
            let _ = writeln!(
                out,
                "{pad}{ty} tdst{k}_({dref}.GetValidRow(), {dref}.GetValidCol());\n\
                 {pad}TTRANS(tdst{k}_, {src}, tmp{k}_);\n{pad}TMOV({dref}, tdst{k}_);"
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
    let body = resolve_body(k).map_err(|e| {
        let loc = pto_wsp_ir::Diagnostic::loc(&e);
        kernel_error(&k.name.name, e, loc)
    })?;
    let mut cx = KernelCx {
        decl: k,
        body: &body,
        input,
        mode,
        fresh: 0,
        messages: Vec::new(),
        first_code,
        half: 0,
        doubled_now: Vec::new(),
    };
    let mut params = vec!["__gm__ pto_wsp_rt::Status *st".to_string()];
    for p in &k.params {
        let n = &p.name.name;
        match &p.kind {
            ParamKind::Tile { dtype, .. } => {
                let e = elem(*dtype).ok_or_else(|| {
                    cx.err(
                        p.name.loc,
                        format!("tile parameter `{n}` is {dtype}: the emitter writes f32, f16 and integer regions only"),
                    )
                })?;
                params.push(format!("const pto_wsp_rt::Gm<{e}> &g_{n}"));
            }
            ParamKind::Scalar(t) => {
                let ty = match t {
                    ParamType::Bool => "bool",
                    ParamType::I64 | ParamType::U64 => "int64_t",
                    ParamType::F32 | ParamType::F64 => "float",
                };
                params.push(format!("{ty} v_{n}"));
            }
        }
    }
    let mut text = String::new();
    cx.body(k.body.as_deref().unwrap_or(&[]), &body.stmts, &mut text, 1)?;
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
    out.push_str(&text);
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
