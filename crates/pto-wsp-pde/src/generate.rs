//! Descriptor generation (the PDE specification's `PTO_DESCRIPTOR_GEN`, `PTO_FOR_EACH`,
//! `PTO_EMIT_DESCRIPTOR`): the generator block is ordinary Rust — loops over a [`BoundSpace`], `if`
//! / `continue`, [`crate::select_tier`] — calling [`Emitter::emit`] for each unit of work and
//! [`Emitter::alloc_workspace`] for its workspace slot. The emitter checks each descriptor against
//! the space and the tier table (a few compares, no allocation) and hands it to a [`Sink`]: a
//! vector for measuring, the bounded queue of a launch for running.

use crate::descriptor::{Descriptor, MAX_AXES, NO_WORKSPACE, PREFETCH_TIER};
use crate::error::{PdeError, Result};
use crate::space::BoundSpace;
use crate::tier::Tiers;

/// Where emitted descriptors go.
pub trait Sink {
    /// Takes one checked descriptor; an error stops generation.
    fn push(&mut self, d: Descriptor) -> Result<()>;
}

impl Sink for Vec<Descriptor> {
    #[inline]
    fn push(&mut self, d: Descriptor) -> Result<()> {
        Vec::push(self, d);
        Ok(())
    }
}

/// The generator's handle: checks and emits descriptors, allocates workspace.
pub struct Emitter<'a, S> {
    space: &'a BoundSpace,
    tiers: &'a Tiers,
    counts: [u32; MAX_AXES],
    rank: usize,
    ws_used: u64,
    ws_capacity: u64,
    emitted: u64,
    prefetch: Option<Prefetch>,
    sink: S,
}

/// `prefetch(axis, depth)` as the emitter applies it (see [`Emitter::prefetch`]).
struct Prefetch {
    axis: usize,
    depth: u32,
    count: u32,
    /// Values of the axis seen so far, one bit each.
    seen: Vec<u64>,
    issued: u64,
}

/// Most iterations an axis under `prefetch` may have (its seen-set is one bit per value).
pub const MAX_PREFETCH_AXIS: u32 = 1 << 24;

impl<'a, S: Sink> Emitter<'a, S> {
    /// An emitter for `space` and `tiers` with `workspace` elements of workspace, into `sink`.
    pub fn new(space: &'a BoundSpace, tiers: &'a Tiers, workspace: u64, sink: S) -> Self {
        let mut counts = [0; MAX_AXES];
        let rank = space.axes().len();
        for (k, c) in counts.iter_mut().enumerate().take(rank) {
            *c = space.count(k);
        }
        Emitter {
            space,
            tiers,
            counts,
            rank,
            ws_used: 0,
            ws_capacity: workspace,
            emitted: 0,
            prefetch: None,
            sink,
        }
    }

    /// `prefetch(axis, depth)` (the PDE specification's `PTO_PREFETCH`): the first time a
    /// descriptor of value `v` of axis `axis` (by position) is emitted, a prefetch descriptor for
    /// value `v + depth` (if the axis has it) is pushed just before it — tier [`PREFETCH_TIER`],
    /// that value at the axis's index, every other index 0, no workspace. So the data of `v +
    /// depth` is fetched while `v` is processed, and under an affinity on the same axis it is
    /// fetched by the dispatch threads that will process `v + depth`. Refuses an unknown axis, a
    /// depth of 0 and an axis of more than [`MAX_PREFETCH_AXIS`] iterations.
    pub fn prefetch(&mut self, axis: usize, depth: u32) -> Result<()> {
        let err = |problem: String| PdeError::Space {
            space: self.space.name().to_string(),
            problem,
        };
        if axis >= self.rank {
            return Err(err(format!(
                "`prefetch` names axis {axis}, which the space does not have"
            )));
        }
        let name = &self.space.space().axes()[axis].name;
        if depth == 0 {
            return Err(err(format!(
                "`prefetch({name}, 0)`: the depth must be at least 1"
            )));
        }
        let count = self.counts[axis];
        if count > MAX_PREFETCH_AXIS {
            return Err(err(format!(
                "`prefetch({name}, {depth})`: the axis has {count} iterations, more than the \
                 {MAX_PREFETCH_AXIS} prefetch can track"
            )));
        }
        self.prefetch = Some(Prefetch {
            axis,
            depth,
            count,
            seen: vec![0; (count as usize).div_ceil(64)],
            issued: 0,
        });
        Ok(())
    }

    /// Prefetch descriptors pushed so far.
    pub fn prefetches(&self) -> u64 {
        self.prefetch.as_ref().map_or(0, |p| p.issued)
    }

    /// The space being generated.
    pub fn space(&self) -> &'a BoundSpace {
        self.space
    }

    /// The tier table.
    pub fn tiers(&self) -> &'a Tiers {
        self.tiers
    }

    /// Descriptors emitted so far.
    pub fn emitted(&self) -> u64 {
        self.emitted
    }

    /// Workspace elements allocated so far.
    pub fn workspace_used(&self) -> u64 {
        self.ws_used
    }

    /// The sink (for callers that own it).
    pub fn into_sink(self) -> S {
        self.sink
    }

    fn out_of_range(&self, field: String, value: u64, limit: u64) -> PdeError {
        PdeError::FieldOutOfRange {
            space: self.space.name().to_string(),
            field,
            value,
            limit,
        }
    }

    /// Allocates the workspace slot of tier `tier` for the work at `indices`: the tier's
    /// workspace size, placed after the previous slot. Returns its offset, or [`NO_WORKSPACE`]
    /// for a tier with no workspace; refuses an unknown tier and an allocation past the
    /// planned capacity, naming the tier and the indices.
    #[inline]
    pub fn alloc_workspace(&mut self, tier: u32, indices: &[u32]) -> Result<u32> {
        let Some(t) = self.tiers.get(tier) else {
            return Err(self.out_of_range("tier".into(), tier.into(), self.tiers.len() as u64));
        };
        if t.workspace == 0 {
            return Ok(NO_WORKSPACE);
        }
        let end = self.ws_used + u64::from(t.workspace);
        if end > self.ws_capacity || end > u64::from(NO_WORKSPACE) {
            return Err(PdeError::WorkspaceOverflow {
                space: self.space.name().to_string(),
                tier: t.name.clone(),
                indices: indices.to_vec(),
                needed: t.workspace.into(),
                used: self.ws_used,
                capacity: self.ws_capacity,
            });
        }
        let at = self.ws_used as u32;
        self.ws_used = end;
        Ok(at)
    }

    /// Checks `d` (its tier exists, every index is below its axis's iteration count, unused
    /// indices are 0, `start <= end`) and emits it.
    #[inline]
    pub fn emit(&mut self, d: Descriptor) -> Result<()> {
        if d.tier as usize >= self.tiers.len() {
            return Err(self.out_of_range("tier".into(), d.tier.into(), self.tiers.len() as u64));
        }
        for k in 0..MAX_AXES {
            let limit = if k < self.rank { self.counts[k] } else { 1 };
            if d.indices[k] >= limit {
                let name = match self.space.space().axes().get(k) {
                    Some(a) => a.name.clone(),
                    None => format!("indices[{k}] (no such axis)"),
                };
                return Err(self.out_of_range(name, d.indices[k].into(), limit.into()));
            }
        }
        if d.start > d.end {
            return Err(self.out_of_range("start".into(), d.start.into(), u64::from(d.end) + 1));
        }
        if let Some(p) = &mut self.prefetch {
            let v = d.indices[p.axis];
            let (word, bit) = ((v / 64) as usize, 1u64 << (v % 64));
            if p.seen[word] & bit == 0 {
                p.seen[word] |= bit;
                if let Some(t) = v.checked_add(p.depth).filter(|&t| t < p.count) {
                    let mut indices = [0; MAX_AXES];
                    indices[p.axis] = t;
                    p.issued += 1;
                    self.sink.push(Descriptor {
                        tier: PREFETCH_TIER,
                        indices,
                        workspace: NO_WORKSPACE,
                        ..Descriptor::default()
                    })?;
                }
            }
        }
        self.emitted += 1;
        self.sink.push(d)
    }
}

/// Runs generator `body` for `space` and `tiers` on this thread, collecting its descriptors.
/// Returns them and the workspace elements used.
pub fn generate_vec(
    space: &BoundSpace,
    tiers: &Tiers,
    workspace: u64,
    capacity_hint: usize,
    body: impl FnOnce(&mut Emitter<'_, Vec<Descriptor>>) -> Result<()>,
) -> Result<(Vec<Descriptor>, u64)> {
    let mut e = Emitter::new(space, tiers, workspace, Vec::with_capacity(capacity_hint));
    body(&mut e)?;
    let used = e.workspace_used();
    Ok((e.into_sink(), used))
}
