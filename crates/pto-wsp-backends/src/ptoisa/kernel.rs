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

mod inst;

use super::kernel_error;
use crate::{EmitError, Input};
use pto_wsp_ir::device::{
    alloc::Plan,
    padded_shape,
    sync::{Doubles, SyncPlan},
};
use pto_wsp_ir::kernel_body::{KStmt, KStmtKind, TileDecl, TileKind};
use pto_wsp_ir::resolve::body::{
    Body, BodyKind, BodyStmt, FloatVal, IntExpr, MsgPart, TileRef, resolve_body,
};
use pto_wsp_ir::{BinOp, DType, Expr, KernelDecl, Loc, ParamKind, ParamType, UnOp};
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
        for (s, b) in body.iter().zip(resolved) {
            self.stmt(s, b, out, depth, &pad)?;
            if let Mode::Device { sync, .. } = self.mode {
                for x in sync.after(s) {
                    let _ = writeln!(out, "{pad}{}", x.cpp_in(self.half));
                }
            }
        }
        Ok(())
    }

    /// Writes one statement: `s` surface, `b` resolved, at `depth` (indented by `pad`).
    fn stmt(
        &mut self,
        s: &KStmt,
        b: &BodyStmt,
        out: &mut String,
        depth: usize,
        pad: &str,
    ) -> Result<(), EmitError> {
        let src = self.input.position(s.loc);
        match (&b.kind, &s.kind) {
            (BodyKind::Tile { tile, valid }, _) => {
                self.tile_decl(s, *tile, valid.as_ref(), &src, out, pad)
            }
            (BodyKind::Let { slot, value }, _) => self.let_int(s, *slot, value, out, pad),
            (BodyKind::LetFloat { slot, value }, _) => self.let_float(s, *slot, value, out, pad),
            (BodyKind::Check { cond, message }, _) => self.check_stmt(s, cond, message, out, pad),
            (
                BodyKind::GetVal {
                    slot,
                    tile,
                    row,
                    col,
                },
                _,
            ) => self.get_val(s, *slot, tile, (row, col), out, pad),
            (
                BodyKind::For {
                    slot,
                    count,
                    body: rbody,
                },
                KStmtKind::For { body: sbody, .. },
            ) => self.for_loop(s, *slot, count, (sbody, rbody), out, depth),
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
            ) => self.if_else(s, cond, [(sthen, rthen), (selse, relse)], out, depth),
            (BodyKind::Inst { op, args }, _) => self.inst(s, *op, args, &src, out, pad),
            _ => Err(self.err(s.loc, "the resolved body does not match it".into())),
        }
    }

    /// `let NAME: i64 = VALUE;` (`slot`: NAME's value slot).
    fn let_int(
        &mut self,
        s: &KStmt,
        slot: u32,
        value: &IntExpr,
        out: &mut String,
        pad: &str,
    ) -> Result<(), EmitError> {
        let before = self.messages.len();
        let name = &self.body.values[slot as usize].name;
        let where_ = format!("kernel `{}`: `{name}`", self.decl.name.name);
        let v = self.expr(value, s.loc, &where_)?;
        let _ = writeln!(out, "{pad}const int64_t v_{name} = {v};");
        self.after_divisions(before, out, pad);
        Ok(())
    }

    /// `let NAME: f32 = VALUE;` (`slot`: NAME's float slot).
    fn let_float(
        &mut self,
        s: &KStmt,
        slot: u32,
        value: &FloatVal,
        out: &mut String,
        pad: &str,
    ) -> Result<(), EmitError> {
        let before = self.messages.len();
        let name = &self.body.floats[slot as usize].name;
        let where_ = format!("kernel `{}`: `{name}`", self.decl.name.name);
        let v = self.float(value, s.loc, &where_)?;
        let _ = writeln!(out, "{pad}const float v_{name} = {v};");
        self.after_divisions(before, out, pad);
        Ok(())
    }

    /// `check COND else "MESSAGE";`: a failure writes the message's code and values.
    fn check_stmt(
        &mut self,
        s: &KStmt,
        cond: &IntExpr,
        message: &[MsgPart],
        out: &mut String,
        pad: &str,
    ) -> Result<(), EmitError> {
        let before = self.messages.len();
        let kname = self.decl.name.name.clone();
        let where_ = format!("kernel `{kname}`: check");
        let c = self.expr(cond, s.loc, &where_)?;
        self.fresh += 1;
        let cv = format!("c{}_", self.fresh);
        let _ = writeln!(out, "{pad}const bool {cv} = {c};");
        self.after_divisions(before, out, pad);
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
        Ok(())
    }

    /// `let NAME: i64 = GETVAL(TILE, ROW, COL);`, the position checked against the tile.
    fn get_val(
        &mut self,
        s: &KStmt,
        slot: u32,
        tile: &TileRef,
        (row, col): (&IntExpr, &IntExpr),
        out: &mut String,
        pad: &str,
    ) -> Result<(), EmitError> {
        let before = self.messages.len();
        let where_ = format!("kernel `{}`: GETVAL", self.decl.name.name);
        let t = self.tile_ref(tile, s.loc, &where_, out, pad)?;
        let (r, c) = (
            self.expr(row, s.loc, &where_)?,
            self.expr(col, s.loc, &where_)?,
        );
        self.after_divisions(before, out, pad);
        if let Mode::Device { sync, .. } = self.mode {
            for x in sync.before(s) {
                let _ = writeln!(out, "{pad}{}", x.cpp_in(self.half));
            }
        }
        let code = self.check(format!(
            "{where_}: ({{0}}, {{1}}) is outside the tile ({{2}} x {{3}})"
        ));
        let name = &self.body.values[slot as usize].name;
        let _ = writeln!(out, "{pad}int64_t v_{name} = 0;");
        let _ = writeln!(
            out,
            "{pad}if (!pto_wsp_rt::get_value(st, {code}, {t}, {r}, {c}, v_{name})) {RETURN}",
        );
        Ok(())
    }

    /// `for VAR in range(COUNT) { BODY }` (`slot`: VAR's value slot), double-buffered where
    /// the device plan says so.
    fn for_loop(
        &mut self,
        s: &KStmt,
        slot: u32,
        count: &IntExpr,
        (sbody, rbody): (&[KStmt], &[BodyStmt]),
        out: &mut String,
        depth: usize,
    ) -> Result<(), EmitError> {
        let pad = "    ".repeat(depth);
        let before = self.messages.len();
        let var = self.body.values[slot as usize].name.clone();
        let where_ = format!("kernel `{}`: the count of `for {var}`", self.decl.name.name);
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
        Ok(())
    }

    /// `if COND { THEN } else { ELSE }` (`arms`: the two bodies, surface and resolved).
    fn if_else(
        &mut self,
        s: &KStmt,
        cond: &IntExpr,
        arms: [(&[KStmt], &[BodyStmt]); 2],
        out: &mut String,
        depth: usize,
    ) -> Result<(), EmitError> {
        let pad = "    ".repeat(depth);
        let before = self.messages.len();
        let where_ = format!("kernel `{}`: the condition of `if`", self.decl.name.name);
        let c = self.expr(cond, s.loc, &where_)?;
        self.fresh += 1;
        let cv = format!("c{}_", self.fresh);
        let _ = writeln!(out, "{pad}const bool {cv} = {c};");
        self.after_divisions(before, out, &pad);
        let [(sthen, rthen), (selse, relse)] = arms;
        let _ = writeln!(out, "{pad}if ({cv}) {{");
        self.body(sthen, rthen, out, depth + 1)?;
        let _ = writeln!(out, "{pad}}} else {{");
        self.body(selse, relse, out, depth + 1)?;
        let _ = writeln!(out, "{pad}}}");
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
