//! Tile placement: every tile of a (single-core) kernel body gets an address in its buffer.
//!
//! Why: on the device a tile is a pointer into UB, L1 or L0A/B/C that the kernel assigns
//! (`TASSIGN<addr>(tile)`, which PTO-ISA checks at compile time against the buffer's capacity and
//! alignment); the CPU simulation allocates tiles itself and hides an overflow. Placing them here
//! lets the validator report an overflow at the `.wsp` line, naming the tiles, and gives the
//! emitter the addresses.
//!
//! Promise: [`plan`] places tiles by lexical scope, as a stack per buffer: a tile lives from its
//! declaration to the end of its block, at the buffer's top when declared, aligned to the
//! buffer's alignment, with its padded footprint ([`super::footprint`]); an instruction that needs
//! a scratch tile (PTO-ISA's row reductions and transpose) gets one at the top of the UB stack
//! for its duration; a tile the sync planner double-buffers ([`plan_with`]) gets a second slot
//! right after the first. Live tiles never overlap, every address is aligned, and no buffer is
//! used past its capacity — or [`plan`] returns a [`DeviceError`] listing the live tiles of the
//! full buffer, their sizes and the capacity.

use super::check::DeviceError;
use super::pair::{Pair, resolved, tile_of};
use super::{Buffer, BufferSpec};
use crate::kernel_body::{KStmt, TileDecl};
use crate::module::KernelDecl;
use crate::resolve::body::{Arg, Body, BodyKind};
use crate::source::Diagnostic as _;
use crate::tile_isa::{CppForm, TileOp};
use std::collections::{BTreeMap, HashMap, HashSet};

/// Where each tile of a body lives.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    tiles: HashMap<*const KStmt, u64>,
    doubles: HashMap<*const KStmt, u64>,
    temps: HashMap<*const KStmt, u64>,
    /// The most bytes each buffer holds at once.
    pub peak: BTreeMap<Buffer, u64>,
}

impl Plan {
    /// The address of the tile declared by `decl` (a `tile` statement of the planned body); of
    /// element 0 for a tile array, whose element `i` is [`element_bytes`]` · i` further.
    pub fn tile(&self, decl: &KStmt) -> Option<u64> {
        self.tiles.get(&(decl as *const KStmt)).copied()
    }

    /// The address of the second buffer of a double-buffered tile.
    pub fn second(&self, decl: &KStmt) -> Option<u64> {
        self.doubles.get(&(decl as *const KStmt)).copied()
    }

    /// The address of the scratch tile of instruction `inst`, if it needs one.
    pub fn temp(&self, inst: &KStmt) -> Option<u64> {
        self.temps.get(&(inst as *const KStmt)).copied()
    }
}

/// The scratch bytes `op` needs in UB beside its operands (PTO-ISA's `tmp` operand, shaped like
/// the source), if any.
pub fn temp_bytes(op: TileOp, src: Option<&TileDecl>) -> Option<u64> {
    let needs = matches!(
        op.cpp_form(),
        CppForm::WithTmp | CppForm::Helper { tmp: true, .. }
    );
    needs
        .then(|| src.map(|t| super::footprint(t.kind, t.dtype, t.rows, t.cols)))
        .flatten()
}

/// The bytes one tile of `t` takes in its buffer, aligned: the distance between the elements
/// of a tile array.
pub fn element_bytes(t: &TileDecl) -> u64 {
    align(
        super::footprint(t.kind, t.dtype, t.rows, t.cols),
        super::buffer(t.kind).align,
    )
}

struct Live {
    name: String,
    what: String,
    bytes: u64,
}

struct Planner<'k> {
    k: &'k KernelDecl,
    doubled: &'k HashSet<*const KStmt>,
    plan: Plan,
    /// Per buffer: top of the stack and the live tiles.
    stacks: BTreeMap<Buffer, (u64, Vec<Live>)>,
    /// The body in slot form, beside the written one.
    body: &'k Body,
}

fn align(n: u64, a: u64) -> u64 {
    n.div_ceil(a) * a
}

impl Planner<'_> {
    fn push(&mut self, spec: &BufferSpec, live: Live, s: &KStmt) -> Result<u64, DeviceError> {
        let (top, lives) = self.stacks.entry(spec.buffer).or_default();
        let at = align(*top, spec.align);
        let end = at + live.bytes;
        lives.push(live);
        if end > spec.capacity {
            let list: Vec<String> = lives
                .iter()
                .map(|l| format!("`{}` {} {} bytes", l.name, l.what, group(l.bytes)))
                .collect();
            return Err(DeviceError {
                kernel: self.k.name.name.clone(),
                message: format!(
                    "the tiles live here need {} bytes of {} (with {}-byte alignment), over its \
                     capacity of {} bytes ({} KiB): {}",
                    group(end),
                    spec.name,
                    spec.align,
                    group(spec.capacity),
                    spec.capacity / 1024,
                    list.join(", ")
                ),
                source: spec.source,
                loc: s.loc,
            });
        }
        *top = end;
        let peak = self.plan.peak.entry(spec.buffer).or_default();
        *peak = (*peak).max(end);
        Ok(at)
    }

    /// Places tile `t`, declared by `s` (and its second buffer when it is double-buffered).
    fn tile(&mut self, s: &KStmt, t: &TileDecl) -> Result<(), DeviceError> {
        let spec = super::buffer(t.kind);
        let bytes = match t.count {
            None => super::footprint(t.kind, t.dtype, t.rows, t.cols),
            Some(n) => element_bytes(t) * n,
        };
        let (pr, pc) = super::padded_shape(t.kind, t.dtype, t.rows, t.cols);
        let padded = if (pr, pc) != (t.rows, t.cols) {
            format!(" (padded to {pr} x {pc})")
        } else {
            String::new()
        };
        let array = t.count.map(|n| format!(" x {n}")).unwrap_or_default();
        let what = format!(
            "{} {}[{}, {}]{padded}{array}",
            t.kind, t.dtype, t.rows, t.cols
        );
        let live = Live {
            name: t.name.name.clone(),
            what: what.clone(),
            bytes,
        };
        let at = self.push(spec, live, s)?;
        self.plan.tiles.insert(s as *const _, at);
        if self.doubled.contains(&(s as *const KStmt)) {
            let live = Live {
                name: format!("{} (second buffer)", t.name),
                what,
                bytes,
            };
            let second = self.push(spec, live, s)?;
            self.plan.doubles.insert(s as *const _, second);
        }
        Ok(())
    }

    /// The scratch tile of instruction `s` (`op`, with `src` its second operand when that is a
    /// tile), if it needs one: placed at the top of its stack for the instruction only.
    fn temp(&mut self, s: &KStmt, op: TileOp, src: Option<&TileDecl>) -> Result<(), DeviceError> {
        let (Some(bytes), Some(src)) = (temp_bytes(op, src), src) else {
            return Ok(());
        };
        let spec = super::buffer(src.kind);
        let name = format!("{} scratch", op.mnemonic());
        let before = self.stacks.get(&spec.buffer).map_or(0, |s| s.0);
        let live = Live {
            name,
            what: "like its source".into(),
            bytes,
        };
        let at = self.push(spec, live, s)?;
        self.plan.temps.insert(s as *const _, at);
        let (top, lives) = self.stacks.get_mut(&spec.buffer).expect("pushed");
        lives.pop();
        *top = before;
        Ok(())
    }

    fn block(&mut self, block: Pair<'_>) -> Result<(), DeviceError> {
        let saved: BTreeMap<Buffer, (u64, usize)> = self
            .stacks
            .iter()
            .map(|(b, (top, l))| (*b, (*top, l.len())))
            .collect();
        for (s, b) in block.iter() {
            match &b.kind {
                BodyKind::Tile { tile, .. } => {
                    if let Some(t) = tile_of(self.body, *tile) {
                        self.tile(s, t)?;
                    }
                }
                BodyKind::For { .. } | BodyKind::If { .. } => {
                    for inner in Pair::nested(s, b) {
                        self.block(inner)?;
                    }
                }
                BodyKind::Inst { op, args } => {
                    let src = match args.get(1) {
                        Some(Arg::Tile(r)) => tile_of(self.body, r.tile),
                        _ => None,
                    };
                    self.temp(s, *op, src)?;
                }
                BodyKind::Let { .. }
                | BodyKind::LetFloat { .. }
                | BodyKind::Check { .. }
                | BodyKind::GetVal { .. } => {}
            }
        }
        for (b, (top, lives)) in self.stacks.iter_mut() {
            let (t, n) = saved.get(b).copied().unwrap_or((0, 0));
            *top = t;
            lives.truncate(n);
        }
        Ok(())
    }
}

/// `n` with thousands separators (`1,048,576`).
pub fn group(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Places every tile of `k`'s body (a single-core kernel or part), read in slot form and keyed by
/// the written statements; a body that does not resolve is refused.
pub fn plan(k: &KernelDecl) -> Result<Plan, DeviceError> {
    plan_with(k, &HashSet::new())
}

/// [`plan`], giving the tiles declared by the statements in `doubled` a second buffer.
pub fn plan_with(k: &KernelDecl, doubled: &HashSet<*const KStmt>) -> Result<Plan, DeviceError> {
    let body = resolved(k).map_err(|e| DeviceError {
        kernel: k.name.name.clone(),
        message: format!("its tiles cannot be placed: {e}"),
        source: super::TASSIGN_SOURCE,
        loc: e.loc(),
    })?;
    let mut p = Planner {
        k,
        body: &body,
        doubled,
        plan: Plan::default(),
        stacks: BTreeMap::new(),
    };
    p.block(Pair::top(k, &body))?;
    Ok(p.plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel_body::KStmtKind;

    fn kernel(body: &str) -> KernelDecl {
        let src = format!(
            "tensor X: f32[64, 64];\nkernel k(inout x: f32[64, 64]) @vector {{\n{body}}}\n\
             workload main() {{\n    task k(X[0 +: 64, 0 +: 64]);\n}}\n"
        );
        crate::parse(&src).expect("parses").kernels[0].clone()
    }

    #[test]
    fn tiles_stack_by_block_aligned_and_padded() {
        let k = kernel(
            "tile a: vec f32[8, 3];\nfor i in range(2) {\ntile b: vec f32[8, 8];\nTEXP(b, b);\n}\n\
             tile c: vec f32[8, 8];\nTEXP(c, c);\n",
        );
        let p = plan(&k).unwrap();
        let body = k.body.as_ref().unwrap();
        // `a` is 8 x 3 padded to 8 x 8 (256 bytes); `b` lives in the loop only, so `c` reuses
        // its place.
        assert_eq!(p.tile(&body[0]), Some(0));
        let KStmtKind::For { body: inner, .. } = &body[1].kind else {
            panic!()
        };
        assert_eq!(p.tile(&inner[0]), Some(256));
        assert_eq!(p.tile(&body[2]), Some(256));
        assert_eq!(p.peak[&Buffer::Ub], 512);
    }

    #[test]
    fn an_overflow_names_the_live_tiles() {
        let k = kernel("tile a: vec f32[128, 256];\ntile b: vec f32[65, 256];\nTEXP(a, a);\n");
        let e = plan(&k).unwrap_err();
        assert_eq!(
            e.message,
            "the tiles live here need 197,632 bytes of UB (with 32-byte alignment), over its \
             capacity of 196,608 bytes (192 KiB): `a` vec f32[128, 256] 131,072 bytes, `b` vec \
             f32[65, 256] 66,560 bytes"
        );
    }
}
