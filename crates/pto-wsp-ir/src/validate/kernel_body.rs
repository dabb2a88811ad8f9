//! Checks of kernel bodies (`crate::kernel_body`), on the body resolved once
//! ([`crate::resolve::body`]): operand and expression types, each instruction's shape and
//! element-type rule from the one table in [`crate::tile_isa`], tiles read before any
//! instruction wrote them, and loads or stores of a static part larger than the parameter's
//! declared shape. What a name means, and whether an operand is of its instruction's kind, is
//! resolution's to say: its mistakes are reported here as they are, and this module looks no
//! name up.
//!
//! Promise: every mistake is a [`ValidationError::KernelBody`] naming the kernel and the
//! instruction or declaration, at the `file:line:column` of the statement.

use super::ValidationError;
use super::typeck::{self, Expected, Site};
use crate::expr::Expr;
use crate::kernel_body::{MAX_TILE_ARRAY, TileDecl, TileKind};
use crate::loc::{Ident, Loc};
use crate::module::KernelDecl;
use crate::resolve::body::{
    Arg, Body, BodyKind, BodyStmt, FloatVal, IntExpr, MsgPart, RegionParam, TileRef,
    resolve_body_all,
};
use crate::tile_isa::{Elems, Operand, ShapeRule, TileOp};
use crate::types::{Access, DType, ScalarType};
use std::collections::HashSet;

mod shapes;

struct Ctx<'a> {
    k: &'a KernelDecl,
    body: &'a Body,
    /// Tiles some instruction may have written (flow-sensitive: see [`Ctx::stmt`]).
    written: HashSet<u32>,
    /// The tiles written anywhere in each enclosing loop's body, innermost last.
    loops: Vec<HashSet<u32>>,
    /// `if`s entered since the innermost loop: a read under one may depend on the iteration (a
    /// branch taken after the first, `if i > 0`), so it only needs a write somewhere in the loop.
    ifs_in_loop: usize,
    errors: &'a mut Vec<ValidationError>,
}

/// The tiles the instructions of `body` write (destinations), recursively.
fn writes_in(body: &[BodyStmt], out: &mut HashSet<u32>) {
    for s in body {
        match &s.kind {
            BodyKind::Inst { op, args } => {
                for (kind, a) in op.operands().iter().zip(args) {
                    if *kind == Operand::Dst
                        && let Arg::Tile(t) = a
                    {
                        out.insert(t.tile);
                    }
                }
            }
            BodyKind::For { body, .. } => writes_in(body, out),
            BodyKind::If {
                then_body,
                else_body,
                ..
            } => {
                writes_in(then_body, out);
                writes_in(else_body, out);
            }
            _ => {}
        }
    }
}

/// Checks `k`'s body, if it has one, pushing every mistake to `errors` (in statement order).
pub(crate) fn check(k: &KernelDecl, errors: &mut Vec<ValidationError>) {
    if k.body.is_none() {
        return;
    }
    if k.tiers.is_some() {
        errors.push(err(
            k,
            "a kernel with a body cannot have tiers".into(),
            k.name.loc,
        ));
    }
    let (body, problems) = resolve_body_all(k);
    let mut found: Vec<ValidationError> = problems
        .into_iter()
        .map(|p| err(k, p.message, p.loc))
        .collect();
    let mut cx = Ctx {
        k,
        body: &body,
        written: HashSet::new(),
        loops: Vec::new(),
        ifs_in_loop: 0,
        errors: &mut found,
    };
    cx.block(&body.stmts);
    found.sort_by_key(|e| {
        let loc = e.loc();
        if loc.is_known() { loc.start } else { u32::MAX }
    });
    errors.extend(found);
}

fn err(k: &KernelDecl, message: String, loc: Loc) -> ValidationError {
    ValidationError::KernelBody {
        kernel: k.name.name.clone(),
        message,
        loc,
        path: format!("kernel {}", k.name),
    }
}

/// A tile operand as the shape rules see it.
struct TileUse<'b> {
    /// Index into [`Body::tiles`].
    tile: u32,
    decl: &'b TileDecl,
    /// The operand's spelling (`t` or `t[i]`).
    name: String,
}

/// The declaration of a tile operand.
fn d<'b>(x: &TileUse<'b>) -> &'b TileDecl {
    x.decl
}

impl<'a> Ctx<'a> {
    fn push(&mut self, message: String, loc: Loc) {
        let e = err(self.k, message, loc);
        self.errors.push(e);
    }

    /// Checks that `e` has type `want`, reporting the names resolution found meaning nothing
    /// there, as `what`.
    fn expr(&mut self, e: &IntExpr, want: ScalarType, what: &str, loc: Loc) {
        let path = format!("kernel {}", self.k.name);
        let site = Site {
            fallback: loc,
            path: &path,
        };
        // The type of each name is its value slot's, the slots given in the order the names
        // are written.
        let body = self.body;
        let mut slots = e.slots().iter();
        let mut type_of = |id: &Ident| -> Option<ScalarType> {
            let slot = *slots.next()?;
            body.values
                .get(slot as usize)
                .filter(|v| v.name == id.name)?;
            body.value_type(slot)
        };
        let expected = match want {
            ScalarType::Bool => Expected::Bool,
            t => Expected::Exact(t),
        };
        let mut errors = Vec::new();
        typeck::expect_type(
            &e.text,
            expected,
            &|| what.to_string(),
            &mut type_of,
            &site,
            &mut errors,
        );
        self.errors.extend(errors);
        for m in e.unresolved() {
            self.push(format!("{what}: {m}"), loc);
        }
    }

    fn block(&mut self, body: &[BodyStmt]) {
        for s in body {
            self.stmt(s);
        }
    }

    fn stmt(&mut self, s: &BodyStmt) {
        let loc = s.loc;
        match &s.kind {
            BodyKind::Tile { tile, valid } => self.tile_decl(*tile, valid.as_ref(), loc),
            BodyKind::Let { slot, value } => {
                let what = format!("the value of `{}`", self.slot_name(*slot));
                self.expr(value, ScalarType::I64, &what, loc);
            }
            BodyKind::For { count, body, .. } => {
                self.expr(count, ScalarType::I64, "the iteration count", loc);
                // The first iteration sees what was written before the loop; after it, what
                // any iteration wrote may have been written.
                let before = self.written.clone();
                let mut w = HashSet::new();
                writes_in(body, &mut w);
                self.loops.push(w);
                let ifs = std::mem::replace(&mut self.ifs_in_loop, 0);
                self.block(body);
                self.ifs_in_loop = ifs;
                self.loops.pop();
                self.written.extend(before);
            }
            BodyKind::If {
                cond,
                then_body,
                else_body,
            } => {
                self.expr(cond, ScalarType::Bool, "the condition of `if`", loc);
                let before = self.written.clone();
                self.ifs_in_loop += 1;
                self.block(then_body);
                let after_then = std::mem::replace(&mut self.written, before);
                self.block(else_body);
                self.ifs_in_loop -= 1;
                self.written.extend(after_then);
            }
            BodyKind::LetFloat { value, .. } => {
                self.float_operand("the value of a float local", 0, value, loc);
            }
            BodyKind::Check { cond, message } => {
                self.expr(cond, ScalarType::Bool, "the condition of `check`", loc);
                for part in message {
                    if let MsgPart::Value(v) = part {
                        for m in v.unresolved() {
                            self.push(
                                format!("the message of `check` names {{{}}}: {m}", v.text),
                                loc,
                            );
                        }
                    }
                }
            }
            BodyKind::GetVal { tile, row, col, .. } => {
                if let Some(t) = self.tile_use("GETVAL", 1, tile, loc) {
                    if !t.decl.dtype.is_integer() {
                        self.push(
                            format!(
                                "GETVAL: `{}` is {}: GETVAL reads integer tiles",
                                t.name, t.decl.dtype
                            ),
                            loc,
                        );
                    }
                    self.read(&t, "GETVAL", loc);
                }
                self.expr(row, ScalarType::I64, "the row of GETVAL", loc);
                self.expr(col, ScalarType::I64, "the column of GETVAL", loc);
            }
            BodyKind::Inst { op, args } => self.inst(*op, args, loc),
        }
    }

    /// The name of value slot `slot`.
    fn slot_name(&self, slot: u32) -> &'a str {
        self.body
            .values
            .get(slot as usize)
            .map_or("?", |v| v.name.as_str())
    }

    fn tile_decl(&mut self, tile: u32, valid: Option<&(IntExpr, IntExpr)>, loc: Loc) {
        let Some(slot) = self.body.tiles.get(tile as usize) else {
            return;
        };
        let t = &slot.decl;
        if t.kind != TileKind::Vec && !t.dtype.is_float() {
            self.push(
                format!(
                    "tile `{}`: a {} tile holds f32, f16 or bf16, not {}",
                    t.name, t.kind, t.dtype
                ),
                loc,
            );
        }
        if t.rows == 0 || t.cols == 0 || t.rows * t.cols > 1 << 20 {
            self.push(
                format!(
                    "tile `{}`: {} x {} is not between 1 and 2^20 elements",
                    t.name, t.rows, t.cols
                ),
                loc,
            );
        }
        if let Some(n) = t.count
            && !(1..=MAX_TILE_ARRAY).contains(&n)
        {
            self.push(
                format!(
                    "tile `{}`: an array of {n} tiles is not between 1 and {MAX_TILE_ARRAY}",
                    t.name
                ),
                loc,
            );
        }
        if let Some((r, c)) = valid {
            let what = format!("valid rows of tile `{}`", t.name);
            self.expr(r, ScalarType::I64, &what, loc);
            let what = format!("valid columns of tile `{}`", t.name);
            self.expr(c, ScalarType::I64, &what, loc);
        }
        // A declaration (in a loop: every iteration's) makes a tile nothing has written yet.
        self.written.remove(&tile);
    }

    /// Tile operand `n` of `mn` as the rules see it, its index checked; `None` when resolution
    /// found none (and said why).
    fn tile_use(&mut self, mn: &str, n: usize, t: &TileRef, loc: Loc) -> Option<TileUse<'a>> {
        let decl = &self.body.tiles.get(t.tile as usize)?.decl;
        let name = match &t.index {
            None => decl.name.name.clone(),
            Some(e) => {
                self.expr(
                    e,
                    ScalarType::I64,
                    &format!("{mn} operand {n}: the index of `{}`", decl.name),
                    loc,
                );
                format!("{}[{}]", decl.name, e.text)
            }
        };
        Some(TileUse {
            tile: t.tile,
            decl,
            name,
        })
    }

    fn read(&mut self, t: &TileUse<'_>, mn: &str, loc: Loc) {
        let guarded = self.ifs_in_loop > 0 && self.loops.iter().any(|w| w.contains(&t.tile));
        if !self.written.contains(&t.tile) && !guarded {
            self.push(
                format!(
                    "{mn} reads tile `{}` before any instruction writes it",
                    t.name
                ),
                loc,
            );
            // Reported once.
            self.written.insert(t.tile);
        }
    }

    /// The integer operand of `f32(...)` / `rsqrt(...)`.
    fn float_operand(&mut self, mn: &str, n: usize, v: &FloatVal, loc: Loc) {
        if let FloatVal::OfInt(e) | FloatVal::InvSqrt(e) = v {
            let what = format!("{mn} operand {n}: the operand of `f32` / `rsqrt`");
            self.expr(e, ScalarType::I64, &what, loc);
        }
    }

    fn inst(&mut self, op: TileOp, args: &[Arg], loc: Loc) {
        let mn = op.mnemonic();
        let body = self.body;
        let mut tiles: Vec<TileUse<'a>> = Vec::new();
        let mut dst_at = usize::MAX;
        let mut global: Option<&'a RegionParam> = None;
        let mut ints: Vec<&IntExpr> = Vec::new();
        for (i, (kind, a)) in op.operands().iter().zip(args).enumerate() {
            let n = i + 1;
            match a {
                Arg::Tile(t) => {
                    let Some(t) = self.tile_use(mn, n, t, loc) else {
                        return;
                    };
                    if *kind == Operand::Dst {
                        dst_at = tiles.len();
                    }
                    tiles.push(t);
                }
                Arg::Region(r) => match body.regions.get(*r as usize) {
                    Some(g) => global = Some(g),
                    None => return,
                },
                Arg::Float(v) => self.float_operand(mn, n, v, loc),
                Arg::Word(_) => {}
                Arg::Int(e) => {
                    self.expr(e, ScalarType::I64, &format!("{mn} operand {n}"), loc);
                    ints.push(e);
                }
            }
        }
        // Reads first (an instruction may read and write one tile), then the write.
        for (i, t) in tiles.iter().enumerate() {
            let reads_dst = matches!(op, TileOp::MatmulAcc | TileOp::Scatter);
            if i != dst_at || reads_dst {
                self.read(t, mn, loc);
            }
        }
        if let Some(d) = tiles.get(dst_at) {
            self.written.insert(d.tile);
        }
        self.elems(op, &tiles, loc);
        self.shapes(op, &tiles, global, loc);
        if let Some(g) = global {
            self.static_fit(op, &tiles[0], g, &ints, loc);
        }
    }

    /// The element-type column of the table ([`Elems`]).
    fn elems(&mut self, op: TileOp, t: &[TileUse], loc: Loc) {
        if op.elems() != Elems::Float {
            return;
        }
        // Masks and index operands are checked by their shape rules.
        let skip = |i: usize| match op.shape_rule() {
            ShapeRule::Compare => i == 0,
            ShapeRule::Select => i == 1,
            ShapeRule::Sort32 => i == 2,
            _ => false,
        };
        for (i, x) in t.iter().enumerate() {
            if !skip(i) && !x.decl.dtype.is_float() {
                self.push(
                    format!(
                        "{}: `{}` is {}: this instruction takes f32, f16 or bf16 tiles",
                        op.mnemonic(),
                        x.name,
                        x.decl.dtype
                    ),
                    loc,
                );
                return;
            }
        }
    }

    /// A load or store whose part is static (literal offsets, a tile without `valid` or with
    /// literal valid sizes) must fit the parameter's declared rows × cols (when the declared
    /// shape has no `?`).
    fn static_fit(
        &mut self,
        op: TileOp,
        t: &TileUse,
        g: &RegionParam,
        ints: &[&IntExpr],
        loc: Loc,
    ) {
        let Some(dims) = g.shape.iter().copied().collect::<Option<Vec<u64>>>() else {
            return;
        };
        let Some((&cols, outer)) = dims.split_last() else {
            return;
        };
        let rows: u64 = outer.iter().product();
        let lit = |a: Option<&&IntExpr>| match a.map(|e| &e.text) {
            None => Some(0),
            Some(Expr::Int(v)) => u64::try_from(*v).ok(),
            _ => None,
        };
        let (Some(r0), Some(c0)) = (lit(ints.first()), lit(ints.get(1))) else {
            return;
        };
        let (vr, vc) = match &t.decl.valid {
            None => (t.decl.rows, t.decl.cols),
            Some((Expr::Int(r), Expr::Int(c))) => match (u64::try_from(*r), u64::try_from(*c)) {
                (Ok(r), Ok(c)) => (r, c),
                _ => return,
            },
            Some(_) => return,
        };
        if r0 + vr > rows || c0 + vc > cols {
            let verb = if op == TileOp::Load {
                "loads"
            } else {
                "stores"
            };
            self.push(
                format!(
                    "{}: tile `{}` {verb} {vr} x {vc} at ({r0}, {c0}), outside `{}`, declared \
                     {rows} x {cols} (rows x cols)",
                    op.mnemonic(),
                    t.name,
                    g.name
                ),
                loc,
            );
        }
    }

    /// The shape column of the table ([`shapes::problems`]), the rule of a load or store
    /// against its region parameter, and the element types of a broadcast binary.
    fn shapes(&mut self, op: TileOp, t: &[TileUse], global: Option<&RegionParam>, loc: Loc) {
        let bad = match op.shape_rule() {
            ShapeRule::Load | ShapeRule::Store => global
                .map(|g| self.global_rule(op, &t[0], g))
                .unwrap_or_default(),
            ShapeRule::RowExpandBinary | ShapeRule::ColExpandBinary => {
                let bad = shapes::problems(op, t);
                self.same_types(op, t, loc);
                bad
            }
            _ => shapes::problems(op, t),
        };
        for why in bad {
            self.push(format!("{}: {why}", op.mnemonic()), loc);
        }
    }

    /// Operands 1 and 2 of a broadcast binary have the destination's element type.
    fn same_types(&mut self, op: TileOp, t: &[TileUse], loc: Loc) {
        for x in &t[1..] {
            if x.decl.dtype != t[0].decl.dtype {
                self.push(
                    format!(
                        "{}: `{}` is {} but `{}` is {}: operands must have the same element type",
                        op.mnemonic(),
                        t[0].name,
                        t[0].decl.dtype,
                        x.name,
                        x.decl.dtype
                    ),
                    loc,
                );
                return;
            }
        }
    }

    /// The access and element-type rules of a load or store.
    fn global_rule(&self, op: TileOp, t: &TileUse, g: &RegionParam) -> Vec<String> {
        let mut bad = Vec::new();
        let name = &g.name;
        let access = g.access;
        let load = op == TileOp::Load;
        if load && !access.reads() {
            bad.push(format!(
                "`{name}` is `{access}`: only `in` / `inout` parameters can be loaded"
            ));
        }
        if !load && !access.writes() {
            bad.push(format!(
                "`{name}` is `{access}`: only `out` / `inout` parameters can be stored to"
            ));
        }
        if op == TileOp::StoreAdd && access != Access::InOut {
            bad.push(format!(
                "`{name}` is `{access}`: TSTOREADD reads the region, declare it `inout`"
            ));
        }
        // The cube's fix pipe converts an f32 accumulator into an f16 / bf16 region.
        let fix_pipe = !load
            && t.decl.kind == TileKind::Acc
            && t.decl.dtype == DType::F32
            && matches!(g.dtype, DType::F16 | DType::Bf16);
        if g.dtype != t.decl.dtype && !fix_pipe {
            bad.push(format!(
                "`{name}` holds {} but tile `{}` is {}: use TCVT on the tile",
                g.dtype, t.name, t.decl.dtype
            ));
        }
        bad
    }
}
