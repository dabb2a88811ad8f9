//! A kernel using both the cube and the vector core, split into per-core parts joined through
//! global memory.
//!
//! Why: on a2a3 one AI Core is either a cube core (L1, L0A/B/C, the matrix unit) or a vector core
//! (UB, the vector unit); a tile moves between them only through global memory. simpler's
//! `tensormap_and_ringbuffer` runtime offers mixed tasks (an AIC and two AIV kernels started
//! together) and PTO-ISA offers TPUSH / TPOP (a GM FIFO with cross-core flags), but PTO-ISA's CPU
//! simulation of TPUSH / TPOP has no cross-core wait at the pinned commit, so on `a2a3sim` they
//! would race. What both the simulator and the device run correctly is what simpler's own a2a3
//! attention does: dependent tasks through global memory (the first writes a tensor the runtime
//! allocates, the next reads it, the runtime's TensorMap orders them). A kernel that needs both
//! cores therefore becomes a sequence of parts, each a kernel for one core, run as dependent
//! tasks.
//!
//! Promise: [`split`] returns one part for a single-core kernel (the kernel itself) and, for a
//! mixed kernel, parts that alternate cores, in order. Each part keeps the kernel's scalar
//! parameters, the region parameters it loads or stores, and gains *scratch* parameters: a tile
//! whose value one part computes and a later part uses is stored by the first (`TSTORE` into an
//! `out` scratch region of the tile's declared shape) and loaded by the second; a cross-core
//! `TMOV` becomes a store in one part and a load (through a `mat` tile for `left` / `right`) in
//! the next. Control flow (`let`, `if`) is repeated in every part that needs it (conditions
//! depend only on scalars, so every part takes the same branch); a `for` loop runs in one part.
//! Running the parts in order computes what the kernel computes. What cannot be split this way
//! is a [`DeviceError`]: a loop using both cores, an L0 tile (left / right / acc) used by two
//! parts, a tile used by two parts but declared inside a block.

use super::check::{DeviceError, place};
use super::{Core, Run, Source};
use crate::kernel_body::{InstArg, KStmt, KStmtKind, TileDecl, TileKind};
use crate::loc::{Ident, Loc};
use crate::module::{KernelDecl, KernelParam, ParamKind};
use crate::tile_isa::{Operand, TileOp};
use crate::types::{Access, DType, ExecPool};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Where the way parts are joined comes from.
pub const SPLIT_SOURCE: Source = Source {
    project: "simpler",
    file: "examples/a2a3/tensormap_and_ringbuffer/paged_attention/kernels/orchestration/paged_attention_orch.cpp",
    check: "QK on the AIC writes `sij` (a tensor the runtime allocates, add_output(TensorCreateInfo)), \
            softmax on the AIV reads it: dependent tasks through global memory (PTO-ISA \
            include/pto/cpu/TPush.hpp has no cross-core wait, so TPUSH / TPOP race on a2a3sim)",
};

/// What a parameter of a part is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartParam {
    /// The original kernel's parameter of this index (a region or a scalar).
    Original(usize),
    /// Scratch region `id` of [`Split::scratch`]: written by this part (`out`) or read (`in`).
    Scratch {
        /// Index into [`Split::scratch`].
        id: usize,
        /// Whether this part writes it.
        output: bool,
    },
}

/// A region in global memory that carries a tile from one part to a later one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scratch {
    /// The tile it carries (for messages).
    pub tile: String,
    /// Element type.
    pub dtype: DType,
    /// Rows (the tile's declared rows).
    pub rows: u64,
    /// Columns (the tile's declared columns).
    pub cols: u64,
    /// The part that writes it.
    pub producer: usize,
}

/// One part: a kernel for one core.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    /// The core it runs on.
    pub core: Core,
    /// The part as a kernel with a body (the original kernel when it is not split).
    pub kernel: KernelDecl,
    /// What each of `kernel.params` is.
    pub params: Vec<PartParam>,
}

/// The parts of a kernel, in the order they run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Split {
    /// The parts (one for a single-core kernel).
    pub parts: Vec<Part>,
    /// The scratch regions joining them.
    pub scratch: Vec<Scratch>,
}

/// A tile of the body: its declaration and whether it is declared at the top level.
struct TileInfo {
    decl: TileDecl,
    top: bool,
}

/// A schedulable unit: one instruction, or a `for` loop as a whole.
struct Unit {
    /// Cores: `(first, second)`, equal unless it is a cross-core `TMOV` (source core, then
    /// destination core).
    cores: (Core, Core),
    cross: bool,
    /// Tiles read / written, by tile id. For a cross `TMOV`, reads are the source half's and
    /// writes the destination half's.
    reads: Vec<usize>,
    writes: Vec<usize>,
    /// Assigned phases of the two halves (equal unless cross).
    phase: (usize, usize),
}

struct Flat<'k> {
    k: &'k KernelDecl,
    tiles: Vec<TileInfo>,
    units: Vec<Unit>,
    /// Unit index of each instruction or loop statement, keyed by its address in the body.
    unit_of: HashMap<*const KStmt, usize>,
    /// Tile id of each declaration statement.
    tile_of: HashMap<*const KStmt, usize>,
    /// The first `GETVAL` (a scalar read whose local later statements may use on any core).
    getval: Option<Loc>,
}

fn cannot_host(k: &KernelDecl, loc: Loc, why: String) -> DeviceError {
    DeviceError {
        kernel: k.name.name.clone(),
        message: format!(
            "it uses the cube and the vector core, so it runs as parts, one per core, joined \
             through global memory (dependent tasks: the runtime joins the two cores at task \
             boundaries); {why}"
        ),
        source: SPLIT_SOURCE,
        loc,
    }
}

impl<'k> Flat<'k> {
    fn lookup(&self, scope: &[(String, usize)], name: &str) -> Option<usize> {
        scope.iter().rev().find(|(n, _)| n == name).map(|(_, i)| *i)
    }

    /// Flattens `body`; `in_loop` is the loop statement being collected, if any.
    fn block(
        &mut self,
        body: &'k [KStmt],
        scope: &mut Vec<(String, usize)>,
        top: bool,
    ) -> Result<(), DeviceError> {
        let mark = scope.len();
        for s in body {
            match &s.kind {
                KStmtKind::Tile(t) => {
                    let id = self.tiles.len();
                    self.tiles.push(TileInfo {
                        decl: t.clone(),
                        top,
                    });
                    self.tile_of.insert(s as *const _, id);
                    scope.push((t.name.name.clone(), id));
                }
                KStmtKind::Let { .. } | KStmtKind::LetFloat { .. } | KStmtKind::Check { .. } => {}
                KStmtKind::GetVal { .. } => {
                    self.getval.get_or_insert(s.loc);
                }
                KStmtKind::If {
                    then_body,
                    else_body,
                    ..
                } => {
                    self.block(then_body, scope, false)?;
                    self.block(else_body, scope, false)?;
                }
                KStmtKind::For { body: inner, .. } => {
                    let mut unit = Unit {
                        cores: (Core::Aiv, Core::Aiv),
                        cross: false,
                        reads: Vec::new(),
                        writes: Vec::new(),
                        phase: (0, 0),
                    };
                    let mut cores = BTreeSet::new();
                    let mut local = scope.clone();
                    self.loop_body(inner, &mut local, &mut unit, &mut cores)?;
                    if cores.len() > 1 || unit.cross {
                        return Err(cannot_host(
                            self.k,
                            s.loc,
                            "this `for` loop uses both cores, and a loop runs in one part; \
                             write one loop per core"
                                .into(),
                        ));
                    }
                    if let Some(c) = cores.first() {
                        unit.cores = (*c, *c);
                        self.unit_of.insert(s as *const _, self.units.len());
                        self.units.push(unit);
                    }
                }
                KStmtKind::Inst { op, args } => {
                    if let Some(u) = self.inst(*op, args, scope, s)? {
                        self.unit_of.insert(s as *const _, self.units.len());
                        self.units.push(u);
                    }
                }
            }
        }
        scope.truncate(mark);
        Ok(())
    }

    /// Collects the accesses and cores of a loop's instructions into `unit`.
    fn loop_body(
        &mut self,
        body: &'k [KStmt],
        scope: &mut Vec<(String, usize)>,
        unit: &mut Unit,
        cores: &mut BTreeSet<Core>,
    ) -> Result<(), DeviceError> {
        for s in body {
            match &s.kind {
                KStmtKind::Tile(t) => {
                    let id = self.tiles.len();
                    self.tiles.push(TileInfo {
                        decl: t.clone(),
                        top: false,
                    });
                    self.tile_of.insert(s as *const _, id);
                    scope.push((t.name.name.clone(), id));
                }
                KStmtKind::Let { .. } | KStmtKind::LetFloat { .. } | KStmtKind::Check { .. } => {}
                KStmtKind::GetVal { .. } => {
                    self.getval.get_or_insert(s.loc);
                }
                KStmtKind::For { body, .. } => self.loop_body(body, scope, unit, cores)?,
                KStmtKind::If {
                    then_body,
                    else_body,
                    ..
                } => {
                    self.loop_body(then_body, scope, unit, cores)?;
                    self.loop_body(else_body, scope, unit, cores)?;
                }
                KStmtKind::Inst { op, args } => {
                    if let Some(u) = self.inst(*op, args, scope, s)? {
                        cores.insert(u.cores.0);
                        cores.insert(u.cores.1);
                        unit.cross |= u.cross;
                        unit.reads.extend(u.reads);
                        unit.writes.extend(u.writes);
                    }
                }
            }
        }
        Ok(())
    }

    fn inst(
        &mut self,
        op: TileOp,
        args: &[InstArg],
        scope: &[(String, usize)],
        s: &KStmt,
    ) -> Result<Option<Unit>, DeviceError> {
        let mut ids = Vec::new();
        for (kind, a) in op.operands().iter().zip(args) {
            if matches!(kind, Operand::Dst | Operand::Src)
                && let Some(id) = a.tile_name()
                && let Some(t) = self.lookup(scope, &id.name)
            {
                ids.push((*kind, t));
            }
        }
        let decls: Vec<(Operand, TileDecl)> = ids
            .iter()
            .map(|(o, i)| (*o, self.tiles[*i].decl.clone()))
            .collect();
        let refs: Vec<(Operand, &TileDecl)> = decls.iter().map(|(o, t)| (*o, t)).collect();
        let m = place(op, &refs).map_err(|v| DeviceError {
            kernel: self.k.name.name.clone(),
            message: v.message,
            source: v.source,
            loc: s.loc,
        })?;
        let mut reads: Vec<usize> = ids
            .iter()
            .filter(|(o, _)| *o == Operand::Src)
            .map(|(_, i)| *i)
            .collect();
        let writes: Vec<usize> = ids
            .iter()
            .filter(|(o, _)| *o == Operand::Dst)
            .map(|(_, i)| *i)
            .collect();
        if op == TileOp::MatmulAcc {
            reads.extend(writes.iter().copied());
        }
        let (cores, cross) = match m.run {
            Run::On { core, .. } => ((core, core), false),
            Run::Cross { from, to } => ((from, to), true),
        };
        Ok(Some(Unit {
            cores,
            cross,
            reads,
            writes,
            phase: (0, 0),
        }))
    }
}

/// The phase of `core` at or after `lo` when phase 0 runs on `start`.
fn at_or_after(lo: usize, core: Core, start: Core) -> usize {
    let parity = usize::from(core != start);
    if lo % 2 == parity { lo } else { lo + 1 }
}

/// The phase of `core` at or before `hi` (and at least 0) when phase 0 runs on `start`.
fn at_or_before(hi: usize, core: Core, start: Core) -> Option<usize> {
    let parity = usize::from(core != start);
    if hi % 2 == parity {
        Some(hi)
    } else {
        hi.checked_sub(1)
    }
}

/// Assigns phases as soon as possible; returns the number of phases.
fn asap(units: &mut [Unit], tiles: usize, start: Core) -> usize {
    let mut last = vec![0usize; tiles];
    let mut phases = 0;
    for u in units.iter_mut() {
        let lo_src = u.reads.iter().map(|&t| last[t]).max().unwrap_or(0);
        let lo_dst = u.writes.iter().map(|&t| last[t]).max().unwrap_or(0);
        if u.cross {
            let p1 = at_or_after(lo_src, u.cores.0, start);
            let p2 = at_or_after(lo_dst.max(p1 + 1), u.cores.1, start);
            u.phase = (p1, p2);
        } else {
            let p = at_or_after(lo_src.max(lo_dst), u.cores.0, start);
            u.phase = (p, p);
        }
        for &t in &u.reads {
            last[t] = last[t].max(u.phase.0);
        }
        for &t in &u.writes {
            last[t] = last[t].max(u.phase.1);
        }
        phases = phases.max(u.phase.1 + 1);
    }
    phases
}

/// Moves units with a later user of their tiles as late as that user allows (a load next to
/// the instruction that consumes it); units with no later user stay.
fn alap(units: &mut [Unit], tiles: usize, start: Core) {
    // The earliest phase at which a later unit touches each tile.
    let mut next: Vec<Option<usize>> = vec![None; tiles];
    for u in units.iter_mut().rev() {
        let hi_src = u.reads.iter().filter_map(|&t| next[t]).min();
        let hi_dst = u.writes.iter().filter_map(|&t| next[t]).min();
        if u.cross {
            if let Some(hi) = hi_dst
                && let Some(p2) = at_or_before(hi, u.cores.1, start)
                && p2 >= u.phase.1
            {
                u.phase.1 = p2;
            }
            let bound = hi_src.map_or(u.phase.1 - 1, |h| h.min(u.phase.1 - 1));
            if let Some(p1) = at_or_before(bound, u.cores.0, start)
                && p1 >= u.phase.0
            {
                u.phase.0 = p1;
            }
        } else if let Some(hi) = hi_src.into_iter().chain(hi_dst).min()
            && let Some(p) = at_or_before(hi, u.cores.0, start)
            && p >= u.phase.0
        {
            u.phase = (p, p);
        }
        for &t in &u.reads {
            next[t] = Some(next[t].map_or(u.phase.0, |n| n.min(u.phase.0)));
        }
        for &t in &u.writes {
            next[t] = Some(next[t].map_or(u.phase.1, |n| n.min(u.phase.1)));
        }
    }
}

/// Splits `k` into parts (one for a kernel that uses one core).
pub fn split(k: &KernelDecl) -> Result<Split, DeviceError> {
    let body: &[KStmt] = k.body.as_deref().unwrap_or(&[]);
    let mut flat = Flat {
        k,
        tiles: Vec::new(),
        units: Vec::new(),
        unit_of: HashMap::new(),
        tile_of: HashMap::new(),
        getval: None,
    };
    flat.block(body, &mut Vec::new(), true)?;
    let used: BTreeSet<Core> = flat
        .units
        .iter()
        .flat_map(|u| [u.cores.0, u.cores.1])
        .collect();
    if used.len() <= 1 && !flat.units.iter().any(|u| u.cross) {
        let core = used.first().copied().unwrap_or(match k.pool {
            ExecPool::Cube => Core::Aic,
            _ => Core::Aiv,
        });
        let params = (0..k.params.len()).map(PartParam::Original).collect();
        return Ok(Split {
            parts: vec![Part {
                core,
                kernel: k.clone(),
                params,
            }],
            scratch: Vec::new(),
        });
    }
    if let Some(loc) = flat.getval {
        return Err(cannot_host(
            k,
            loc,
            "a GETVAL's local may be used by either part; read single elements in a kernel \
             that uses one core"
                .into(),
        ));
    }
    // Both cores: try starting with each, keep the fewer phases.
    let ntiles = flat.tiles.len();
    // (phases, start core, each unit's phases)
    type Best = (usize, Core, Vec<(usize, usize)>);
    let mut best: Option<Best> = None;
    for start in [Core::Aic, Core::Aiv] {
        let n = asap(&mut flat.units, ntiles, start);
        alap(&mut flat.units, ntiles, start);
        let phases: Vec<(usize, usize)> = flat.units.iter().map(|u| u.phase).collect();
        if best.as_ref().is_none_or(|b| n < b.0) {
            best = Some((n, start, phases));
        }
    }
    let (_, start, phases) = best.expect("two starts were tried");
    for (u, p) in flat.units.iter_mut().zip(&phases) {
        u.phase = *p;
    }
    // Number the non-empty phases, merging neighbours on the same core.
    let mut present: BTreeSet<usize> = BTreeSet::new();
    for u in &flat.units {
        present.insert(u.phase.0);
        present.insert(u.phase.1);
    }
    let core_of = |p: usize| {
        if p.is_multiple_of(2) {
            start
        } else {
            start.other()
        }
    };
    let mut part_of: BTreeMap<usize, usize> = BTreeMap::new();
    let mut cores: Vec<Core> = Vec::new();
    for p in present {
        if cores.last() != Some(&core_of(p)) {
            cores.push(core_of(p));
        }
        part_of.insert(p, cores.len() - 1);
    }
    for u in &mut flat.units {
        u.phase = (part_of[&u.phase.0], part_of[&u.phase.1]);
    }
    Builder::new(&flat, body, cores).build()
}

/// Writes the parts from the phase assignment.
struct Builder<'f, 'k> {
    flat: &'f Flat<'k>,
    body: &'k [KStmt],
    cores: Vec<Core>,
    /// Per tile: the parts that touch it.
    touched: Vec<BTreeSet<usize>>,
    /// Per tile: the parts that write it.
    written: Vec<BTreeSet<usize>>,
    scratch: Vec<Scratch>,
    /// (part, tile) → scratch id of the tile's value stored at the end of that part.
    live_out: BTreeMap<(usize, usize), usize>,
    /// Cross-core TMOV statement → scratch id.
    cross: HashMap<*const KStmt, usize>,
    names: BTreeSet<String>,
    fresh: usize,
}

impl<'f, 'k> Builder<'f, 'k> {
    fn new(flat: &'f Flat<'k>, body: &'k [KStmt], cores: Vec<Core>) -> Self {
        let n = flat.tiles.len();
        let mut touched = vec![BTreeSet::new(); n];
        let mut written = vec![BTreeSet::new(); n];
        for u in &flat.units {
            for &t in &u.reads {
                touched[t].insert(u.phase.0);
            }
            for &t in &u.writes {
                touched[t].insert(u.phase.1);
                written[t].insert(u.phase.1);
            }
        }
        let mut names: BTreeSet<String> =
            flat.k.params.iter().map(|p| p.name.name.clone()).collect();
        names.extend(flat.tiles.iter().map(|t| t.decl.name.name.clone()));
        Builder {
            flat,
            body,
            cores,
            touched,
            written,
            scratch: Vec::new(),
            live_out: BTreeMap::new(),
            cross: HashMap::new(),
            names,
            fresh: 0,
        }
    }

    fn fresh(&mut self, stem: &str) -> String {
        loop {
            self.fresh += 1;
            let n = format!("pw_{stem}{}", self.fresh);
            if self.names.insert(n.clone()) {
                return n;
            }
        }
    }

    fn build(mut self) -> Result<Split, DeviceError> {
        let k = self.flat.k;
        // Tiles used by two parts: top-level, and not L0.
        for (t, info) in self.flat.tiles.iter().enumerate() {
            let parts = &self.touched[t];
            if parts.len() < 2 {
                continue;
            }
            let d = &info.decl;
            if matches!(d.kind, TileKind::Left | TileKind::Right | TileKind::Acc) {
                return Err(cannot_host(
                    k,
                    d.name.loc,
                    format!(
                        "`{}` ({}, {}) would be used by two parts, but L0A / L0B / L0C tiles are \
                         neither stored nor reloaded; keep its uses on one side of the vector work",
                        d.name,
                        d.kind,
                        super::buffer(d.kind).name
                    ),
                ));
            }
            if !info.top {
                return Err(cannot_host(
                    k,
                    d.name.loc,
                    format!(
                        "tile `{}` is used by two parts but declared inside a block; declare it at \
                         the top of the body",
                        d.name
                    ),
                ));
            }
            // Stored at the end of each writing part that a later part uses.
            for &p in &self.written[t] {
                if parts.iter().any(|&q| q > p) {
                    let id = self.scratch.len();
                    self.scratch.push(Scratch {
                        tile: d.name.name.clone(),
                        dtype: d.dtype,
                        rows: d.rows,
                        cols: d.cols,
                        producer: p,
                    });
                    self.live_out.insert((p, t), id);
                }
            }
        }
        // Cross-core TMOVs.
        let mut cross_stmts = Vec::new();
        collect_cross(self.body, self.flat, &mut cross_stmts);
        for (s, u) in cross_stmts {
            let unit = &self.flat.units[u];
            let dst = &self.flat.tiles[unit.writes[0]].decl;
            let id = self.scratch.len();
            self.scratch.push(Scratch {
                tile: dst.name.name.clone(),
                dtype: dst.dtype,
                rows: dst.rows,
                cols: dst.cols,
                producer: unit.phase.0,
            });
            self.cross.insert(s, id);
        }
        let mut parts = Vec::new();
        for p in 0..self.cores.len() {
            parts.push(self.part(p));
        }
        Ok(Split {
            parts,
            scratch: self.scratch,
        })
    }

    /// The scratch id holding tile `t`'s value at the start of part `p`, if an earlier part
    /// wrote it.
    fn live_in(&self, p: usize, t: usize) -> Option<usize> {
        let q = self.written[t].range(..p).next_back()?;
        self.live_out.get(&(*q, t)).copied()
    }

    fn part(&mut self, p: usize) -> Part {
        let k = self.flat.k;
        let mut scratch_params: Vec<(String, usize, bool)> = Vec::new();
        let mut regions_used: BTreeSet<String> = BTreeSet::new();
        let mut body = self.stmts(self.body, p, &mut scratch_params, &mut regions_used);
        // Live-out stores at the end.
        let outs: Vec<(usize, usize)> = self
            .live_out
            .iter()
            .filter(|((q, _), _)| *q == p)
            .map(|((_, t), id)| (*t, *id))
            .collect();
        for (t, id) in outs {
            let name = self.param_name(id, true, &mut scratch_params);
            let tile = self.flat.tiles[t].decl.name.name.clone();
            body.push(inst(TileOp::Store, &[&name, &tile]));
        }
        let mut params = Vec::new();
        let mut kinds = Vec::new();
        for (i, prm) in k.params.iter().enumerate() {
            let keep = match prm.kind {
                ParamKind::Scalar(_) => true,
                ParamKind::Tile { .. } => regions_used.contains(&prm.name.name),
            };
            if keep {
                params.push(prm.clone());
                kinds.push(PartParam::Original(i));
            }
        }
        for (name, id, output) in &scratch_params {
            let s = &self.scratch[*id];
            params.push(KernelParam {
                name: Ident::new(name.clone()),
                kind: ParamKind::Tile {
                    access: if *output { Access::Out } else { Access::In },
                    dtype: s.dtype,
                    shape: vec![Some(s.rows), Some(s.cols)],
                },
            });
            kinds.push(PartParam::Scratch {
                id: *id,
                output: *output,
            });
        }
        let core = self.cores[p];
        Part {
            core,
            kernel: KernelDecl {
                name: Ident::new(format!("{}_part{p}", k.name.name)),
                params,
                pool: match core {
                    Core::Aic => ExecPool::Cube,
                    Core::Aiv => ExecPool::Vector,
                },
                tiers: None,
                body: Some(body),
            },
            params: kinds,
        }
    }

    /// The name of scratch `id`'s parameter in the part being built (added once).
    fn param_name(
        &mut self,
        id: usize,
        output: bool,
        params: &mut Vec<(String, usize, bool)>,
    ) -> String {
        if let Some((n, _, _)) = params.iter().find(|(_, i, o)| *i == id && *o == output) {
            return n.clone();
        }
        let n = self.fresh(if output { "out" } else { "in" });
        params.push((n.clone(), id, output));
        n
    }

    fn stmts(
        &mut self,
        body: &'k [KStmt],
        p: usize,
        scratch: &mut Vec<(String, usize, bool)>,
        regions: &mut BTreeSet<String>,
    ) -> Vec<KStmt> {
        let mut out = Vec::new();
        for s in body {
            let key = s as *const KStmt;
            match &s.kind {
                KStmtKind::Tile(_) => {
                    let t = self.flat.tile_of[&key];
                    let needed = self.touched[t].contains(&p) || self.cross_needs(t, p);
                    if needed {
                        out.push(s.clone());
                        if let Some(id) = self.live_in(p, t) {
                            let name = self.param_name(id, false, scratch);
                            let tile = self.flat.tiles[t].decl.name.name.clone();
                            out.push(at(inst(TileOp::Load, &[&tile, &name]), s.loc));
                        }
                    }
                }
                // Integer and float locals and checks go to every part (a GETVAL refuses a split).
                KStmtKind::Let { .. }
                | KStmtKind::LetFloat { .. }
                | KStmtKind::Check { .. }
                | KStmtKind::GetVal { .. } => out.push(s.clone()),
                KStmtKind::If {
                    cond,
                    then_body,
                    else_body,
                } => {
                    let t = self.stmts(then_body, p, scratch, regions);
                    let e = self.stmts(else_body, p, scratch, regions);
                    if has_inst(&t) || has_inst(&e) {
                        out.push(KStmt {
                            kind: KStmtKind::If {
                                cond: cond.clone(),
                                then_body: t,
                                else_body: e,
                            },
                            loc: s.loc,
                        });
                    }
                }
                KStmtKind::For { body: inner, .. } => {
                    if let Some(&u) = self.flat.unit_of.get(&key)
                        && self.flat.units[u].phase.0 == p
                    {
                        note_regions(inner, regions);
                        out.push(s.clone());
                    }
                }
                KStmtKind::Inst { op, args } => {
                    let Some(&u) = self.flat.unit_of.get(&key) else {
                        continue;
                    };
                    let unit = &self.flat.units[u];
                    if let Some(&id) = self.cross.get(&key) {
                        let names: Vec<String> = args.iter().map(|a| a.to_string()).collect();
                        if unit.phase.0 == p {
                            let n = self.param_name(id, true, scratch);
                            out.push(at(inst(TileOp::Store, &[&n, &names[1]]), s.loc));
                        }
                        if unit.phase.1 == p {
                            let n = self.param_name(id, false, scratch);
                            let dst = self.flat.tiles[unit.writes[0]].decl.clone();
                            if matches!(dst.kind, TileKind::Left | TileKind::Right) {
                                let m = self.fresh("m");
                                out.push(at(
                                    KStmt::new(KStmtKind::Tile(TileDecl {
                                        name: Ident::new(m.clone()),
                                        kind: TileKind::Mat,
                                        ..dst.clone()
                                    })),
                                    s.loc,
                                ));
                                out.push(at(inst(TileOp::Load, &[&m, &n]), s.loc));
                                out.push(at(inst(TileOp::Mov, &[&names[0], &m]), s.loc));
                            } else {
                                out.push(at(inst(TileOp::Load, &[&names[0], &n]), s.loc));
                            }
                        }
                    } else if unit.phase.0 == p {
                        if matches!(op, TileOp::Load | TileOp::Store | TileOp::StoreAdd) {
                            let g = if *op == TileOp::Load { 1 } else { 0 };
                            if let Some(a) = args.get(g) {
                                regions.insert(a.to_string());
                            }
                        }
                        out.push(s.clone());
                    }
                }
            }
        }
        out
    }

    /// Whether part `p` handles a cross-core TMOV touching tile `t` (its declaration is then
    /// needed in the part).
    fn cross_needs(&self, t: usize, p: usize) -> bool {
        self.flat.units.iter().any(|u| {
            u.cross
                && ((u.reads.contains(&t) && u.phase.0 == p)
                    || (u.writes.contains(&t) && u.phase.1 == p))
        })
    }
}

fn collect_cross(body: &[KStmt], flat: &Flat<'_>, out: &mut Vec<(*const KStmt, usize)>) {
    for s in body {
        match &s.kind {
            KStmtKind::Inst { .. } => {
                if let Some(&u) = flat.unit_of.get(&(s as *const KStmt))
                    && flat.units[u].cross
                {
                    out.push((s as *const KStmt, u));
                }
            }
            KStmtKind::If {
                then_body,
                else_body,
                ..
            } => {
                collect_cross(then_body, flat, out);
                collect_cross(else_body, flat, out);
            }
            _ => {}
        }
    }
}

fn note_regions(body: &[KStmt], regions: &mut BTreeSet<String>) {
    for s in body {
        match &s.kind {
            KStmtKind::Inst { op, args } => {
                if matches!(op, TileOp::Load | TileOp::Store | TileOp::StoreAdd) {
                    let g = if *op == TileOp::Load { 1 } else { 0 };
                    if let Some(a) = args.get(g) {
                        regions.insert(a.to_string());
                    }
                }
            }
            KStmtKind::For { body, .. } => note_regions(body, regions),
            KStmtKind::If {
                then_body,
                else_body,
                ..
            } => {
                note_regions(then_body, regions);
                note_regions(else_body, regions);
            }
            _ => {}
        }
    }
}

fn has_inst(body: &[KStmt]) -> bool {
    body.iter().any(|s| match &s.kind {
        KStmtKind::Inst { .. } | KStmtKind::For { .. } => true,
        KStmtKind::If {
            then_body,
            else_body,
            ..
        } => has_inst(then_body) || has_inst(else_body),
        _ => false,
    })
}

fn inst(op: TileOp, names: &[&str]) -> KStmt {
    KStmt::inst(op, names)
}

fn at(mut s: KStmt, loc: Loc) -> KStmt {
    s.loc = loc;
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(src: &str) -> KernelDecl {
        let m = crate::parse(src).expect("parses");
        crate::validate(&m).expect("valid");
        m.kernels[0].clone()
    }

    const MIXED: &str = "tensor X: f32[16, 16];\ntensor Y: f32[16, 16];\n\
        kernel k(in x: f32[16, 16], out y: f32[16, 16]) @cube {\n\
        tile xm: mat f32[16, 16];\ntile l: left f32[16, 16];\ntile r: right f32[16, 16];\n\
        tile c: acc f32[16, 16];\ntile v: vec f32[16, 16];\n\
        TLOAD(xm, x);\nTMOV(l, xm);\nTMOV(r, xm);\nTMATMUL(c, l, r);\nTMOV(v, c);\nTEXP(v, v);\nTSTORE(y, v);\n}\n\
        workload main() {\n    task k(X[0 +: 16, 0 +: 16], Y[0 +: 16, 0 +: 16]);\n}\n";

    #[test]
    fn a_single_core_kernel_is_one_part_the_kernel_itself() {
        let k = kernel(
            "tensor X: f32[8, 8];\nkernel k(inout x: f32[8, 8]) @vector {\ntile t: vec f32[8, 8];\n\
             TLOAD(t, x);\nTEXP(t, t);\nTSTORE(x, t);\n}\nworkload main() {\n    task k(X[0 +: 8, 0 +: 8]);\n}\n",
        );
        let s = split(&k).unwrap();
        assert_eq!(s.parts.len(), 1);
        assert_eq!(s.parts[0].core, Core::Aiv);
        assert_eq!(s.parts[0].kernel, k);
        assert!(s.scratch.is_empty());
    }

    #[test]
    fn a_cube_then_vector_kernel_is_two_parts_joined_by_one_scratch() {
        let s = split(&kernel(MIXED)).unwrap();
        let cores: Vec<Core> = s.parts.iter().map(|p| p.core).collect();
        assert_eq!(cores, [Core::Aic, Core::Aiv]);
        // The accumulator crosses once: the cube part stores it, the vector part loads it.
        assert_eq!(s.scratch.len(), 1);
        assert_eq!(
            (s.scratch[0].rows, s.scratch[0].cols, s.scratch[0].producer),
            (16, 16, 0)
        );
        let text = |i: usize| {
            let mut out = String::new();
            for st in s.parts[i].kernel.body.as_ref().unwrap() {
                out.push_str(&format!("{:?}\n", st.kind));
            }
            out
        };
        assert!(
            text(0).contains("Store") && !text(0).contains("Exp"),
            "{}",
            text(0)
        );
        assert!(
            text(1).contains("Exp") && !text(1).contains("Matmul"),
            "{}",
            text(1)
        );
        // Every part keeps the regions it touches only.
        assert_eq!(
            s.parts[0].params,
            [
                PartParam::Original(0),
                PartParam::Scratch {
                    id: 0,
                    output: true
                }
            ]
        );
        assert_eq!(
            s.parts[1].params,
            [
                PartParam::Original(1),
                PartParam::Scratch {
                    id: 0,
                    output: false
                }
            ]
        );
    }
}
