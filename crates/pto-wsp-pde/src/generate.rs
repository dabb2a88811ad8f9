//! Descriptor generation (seed 001 §6.2–6.4): the generator block is ordinary Rust — loops over a
//! [`BoundSpace`], `if` / `continue`, [`crate::select_tier`] — calling [`Emitter::emit`] for each
//! unit of work and [`Emitter::alloc_workspace`] for its workspace slot. The emitter checks each
//! descriptor against the space and the tier table (a few compares, no allocation) and hands it
//! to a [`Sink`]: a vector for measuring, the bounded queue of a launch for running.

use crate::descriptor::{Descriptor, MAX_AXES, NO_WORKSPACE};
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
    sink: S,
}

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
            sink,
        }
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
