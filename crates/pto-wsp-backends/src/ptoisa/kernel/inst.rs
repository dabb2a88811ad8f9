//! One tile instruction of a kernel body as PTO-ISA C++: its operands written (integer
//! operands and offsets named before the call, so their division checks come first), the call
//! the instruction table's `CppForm` gives, and, for a load or store, the region part it moves
//! checked and viewed as a global tensor.
//!
//! Why apart: the rest of the body emitter declares tiles and writes control flow; this is the
//! one place an instruction's C++ shape is decided.

use super::{KernelCx, Mode, RETURN, elem, tile_type};
use crate::EmitError;
use pto_wsp_ir::kernel_body::{KStmt, KStmtKind, TileDecl, TileKind};
use pto_wsp_ir::resolve::body::{Arg, TileRef};
use pto_wsp_ir::tile_isa::{CMP_MODES, CppForm, Operand};
use pto_wsp_ir::{DType, Loc, TileOp};
use std::fmt::Write as _;

/// An instruction's operands as C++.
struct Operands<'t> {
    /// The tile and region operands in order (`gt_` for the region), then the float ones.
    cpp: Vec<String>,
    /// Its tile operands.
    tiles: Vec<&'t TileRef>,
    /// Its region operand: name, index and element type.
    global: Option<(String, usize, DType)>,
    /// Its optional integer operands (offsets into the region).
    offsets: Vec<String>,
    /// Its integer operands.
    ints: Vec<String>,
    /// Its mode word (compare mode, triangle, pad value), empty if none.
    word: String,
}

impl KernelCx<'_> {
    /// Writes the instruction statement `s` (`op` over `args`; `src`: its source position).
    pub(super) fn inst(
        &mut self,
        s: &KStmt,
        op: TileOp,
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
        let mut ops = self.operands(op, args, loc, &where_, out, pad)?;
        if !ops.offsets.is_empty() || !ops.ints.is_empty() {
            // Offsets and integer operands are evaluated (and their divisions checked) before
            // the instruction.
            for (i, o) in ops
                .offsets
                .iter_mut()
                .chain(ops.ints.iter_mut())
                .enumerate()
            {
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
            return self.trans(s, &ops.cpp, args, loc, out, pad);
        }
        let call = self.call(s, op, form, &ops, &where_, out, pad);
        match ops.global.take() {
            None if call.starts_with("if (") => {
                let _ = writeln!(out, "{pad}{call}");
            }
            None => {
                let _ = writeln!(out, "{pad}{call};");
            }
            Some(global) => self.through_region(&call, global, &ops, &where_, out, pad),
        }
        Ok(())
    }

    /// Writes what the operands of `op` need before the call (tile references) and returns
    /// them as C++.
    fn operands<'t>(
        &mut self,
        op: TileOp,
        args: &'t [Arg],
        loc: Loc,
        where_: &str,
        out: &mut String,
        pad: &str,
    ) -> Result<Operands<'t>, EmitError> {
        let mn = op.mnemonic();
        // The element type of the first tile operand: float operands take it.
        let tile_elem = args
            .iter()
            .find_map(|a| match a {
                Arg::Tile(t) => elem(self.decl(t).dtype),
                _ => None,
            })
            .unwrap_or("float");
        let mut ops = Operands {
            cpp: Vec::new(),
            tiles: Vec::new(),
            global: None,
            offsets: Vec::new(),
            ints: Vec::new(),
            word: String::new(),
        };
        for (i, kind) in op.operands().iter().enumerate() {
            let a = args.get(i);
            match kind {
                Operand::Dst | Operand::Src => {
                    let Some(Arg::Tile(a)) = a else {
                        return Err(self.err(loc, format!("{mn}: a tile operand is missing")));
                    };
                    ops.cpp.push(self.tile_ref(a, loc, where_, out, pad)?);
                    ops.tiles.push(a);
                }
                Operand::Global => {
                    let Some(&Arg::Region(ri)) = a else {
                        return Err(self.err(loc, format!("{mn}: a tile parameter is missing")));
                    };
                    let r = &self.body.regions[ri as usize];
                    ops.global = Some((r.name.clone(), ri as usize, r.dtype));
                    ops.cpp.push("gt_".to_string());
                }
                Operand::Float => {
                    let v = match a {
                        Some(Arg::Float(f)) => self.float(f, loc, where_)?,
                        _ => "0.0f".to_string(),
                    };
                    ops.cpp.push(format!("static_cast<{tile_elem}>({v})"));
                }
                Operand::CmpMode => {
                    let w = match a {
                        Some(&Arg::Word(w)) => CMP_MODES.get(w as usize).copied(),
                        _ => None,
                    };
                    ops.word = format!("pto::CmpMode::{}", w.unwrap_or_default());
                }
                Operand::TriMode => {
                    ops.word = match a {
                        Some(Arg::Word(1)) => "1".into(),
                        _ => "0".into(),
                    };
                }
                Operand::PadMode => {
                    ops.word = match a {
                        Some(Arg::Word(1)) => "pto::PadValue::Min".into(),
                        Some(Arg::Word(2)) => "pto::PadValue::Max".into(),
                        _ => "pto::PadValue::Zero".into(),
                    };
                }
                Operand::Int => {
                    let Some(Arg::Int(e)) = a else {
                        return Err(self.err(loc, format!("{mn}: an integer operand is missing")));
                    };
                    ops.ints.push(self.expr(e, loc, where_)?);
                }
                Operand::OptInt => {
                    ops.offsets.push(match a {
                        Some(Arg::Int(e)) => self.expr(e, loc, where_)?,
                        _ => "int64_t{0}".to_string(),
                    });
                }
            }
        }
        Ok(ops)
    }

    /// The call of `op` in its C++ form `form` (writing the scratch tile it takes, if any).
    #[allow(clippy::too_many_arguments)]
    fn call(
        &mut self,
        s: &KStmt,
        op: TileOp,
        form: CppForm,
        ops: &Operands<'_>,
        where_: &str,
        out: &mut String,
        pad: &str,
    ) -> String {
        let mn = op.mnemonic();
        let (cpp, ints, word) = (&ops.cpp, &ops.ints, &ops.word);
        let dst_elem = ops
            .tiles
            .first()
            .and_then(|a| elem(self.decl(a).dtype))
            .unwrap_or("float");
        // A store of an accumulator into a region of another type converts (the cube's fix
        // pipe); PTO-ISA's CPU simulation refuses mixed sizes, so the helper does it there.
        let converting_store = op == TileOp::Store
            && ops
                .global
                .as_ref()
                .zip(ops.tiles.first().map(|a| self.decl(a)))
                .is_some_and(|((_, _, dt), t)| *dt != t.dtype);
        match form {
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
                let mut args = cpp.clone();
                if tmp {
                    args.push(self.temp_tile(s, &cpp[1], out, pad));
                }
                args.extend(ints.iter().cloned());
                if !word.is_empty() {
                    args.push(word.clone());
                }
                if op == TileOp::SetVal {
                    let code = self.check(format!(
                        "{where_}: ({{0}}, {{1}}) is outside the tile ({{2}} x {{3}})"
                    ));
                    format!(
                        "if (!pto_wsp_rt::{name}(st, {code}, {})) {RETURN}",
                        args.join(", ")
                    )
                } else {
                    format!("pto_wsp_rt::{name}({})", args.join(", "))
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
        }
    }

    /// Writes `call` (a load or store) in a block that checks the region part it moves (region
    /// `ri`, named `g`, of element type `gdt`) and views it as the global tensor `gt_`.
    fn through_region(
        &mut self,
        call: &str,
        (g, ri, gdt): (String, usize, DType),
        ops: &Operands<'_>,
        where_: &str,
        out: &mut String,
        pad: &str,
    ) {
        // The tile whose valid part moves: the destination of TLOAD, the source of TSTORE.
        let t = ops
            .cpp
            .iter()
            .find(|c| c.as_str() != "gt_")
            .cloned()
            .unwrap_or_default();
        let stacked = ops
            .tiles
            .first()
            .is_some_and(|a| self.decl(a).kind == TileKind::Vec);
        let (r0, c0) = (
            ops.offsets
                .first()
                .cloned()
                .unwrap_or_else(|| "int64_t{0}".into()),
            ops.offsets
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
