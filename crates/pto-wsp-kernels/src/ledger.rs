//! A launch's promise of independence, checked regardless of timing: every region its work
//! items touch, kept per tensor in an interval structure, so an item whose region overlaps an
//! earlier item's write (or writes what an earlier item reads) is found when it is recorded —
//! not only if both happen to run at the same moment.
//!
//! Why: [`crate::ConflictChecker`] sees only the regions *in flight*; two work items that write
//! the same box are caught by it only if their kernels overlap in time, which depends on kernel
//! length and scheduling. A caller whose items are promised independent (Plan-Descriptor-Execute
//! dispatch) records each item here before queueing it, so the same input always gives the same
//! verdict.
//!
//! Promises: [`RegionLedger::record`] compares the new item's regions with every region
//! recorded before (never with its own), and either records all of them or none and returns the
//! conflict with the earliest recorded item (ties: the new item's first region in its list).
//! Two accesses conflict when their boxes are of the same tensor, intersect, and at least one
//! writes. Per tensor the boxes are indexed by their start in the first two dimensions (an
//! ordered map of ordered maps), and a query visits only the starts that can reach it (start
//! above the query's start minus the longest extent recorded in that dimension), so a tiling
//! of equal tiles costs `O(log n)` plus the tiles that really overlap a query's rows and
//! columns. Memory: one entry per recorded region until the ledger is dropped.

use crate::check::Conflict;
use pto_wsp_ir::task_io::{Region, TaskIo};
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;

/// Boxes of one tensor, each with a value `T`, indexed by their start in dimensions 0 and 1, so
/// that the boxes meeting a query box are found without visiting the others (module docs). Also
/// the index of [`crate::ledger`]'s callers that keep regions with other data (the pipelines'
/// happens-before check).
#[derive(Debug)]
pub struct RegionIndex<T> {
    by_start: BTreeMap<u32, BTreeMap<u32, Vec<(TaskIo, T)>>>,
    /// The longest extent recorded in dimensions 0 and 1 (never shrinks).
    longest: [u32; 2],
    len: usize,
}

impl<T> Default for RegionIndex<T> {
    fn default() -> Self {
        RegionIndex {
            by_start: BTreeMap::new(),
            longest: [0; 2],
            len: 0,
        }
    }
}

impl<T> RegionIndex<T> {
    /// Adds the box of `io` with `value`.
    pub fn insert(&mut self, io: TaskIo, value: T) {
        let r = &io.region;
        self.longest[0] = self.longest[0].max(r.size[0]);
        self.longest[1] = self.longest[1].max(r.size[1]);
        self.by_start
            .entry(r.start[0])
            .or_default()
            .entry(r.start[1])
            .or_default()
            .push((io, value));
        self.len += 1;
    }

    /// Calls `f` with every recorded box that intersects `r` (same tensor assumed), in order of
    /// start, then insertion.
    pub fn for_each_overlap(&self, r: &Region, mut f: impl FnMut(&TaskIo, &T)) {
        let from = |d: usize| {
            (u64::from(r.start[d]) + 1).saturating_sub(u64::from(self.longest[d])) as u32
        };
        // Starts at or past the query's end cannot reach it.
        let span = |d: usize| {
            let end = u64::from(r.start[d]) + u64::from(r.size[d]);
            let upper = u32::try_from(end).map_or(Bound::Unbounded, Bound::Excluded);
            (Bound::Included(from(d)), upper)
        };
        for (_, row) in self.by_start.range(span(0)) {
            for (_, list) in row.range(span(1)) {
                for (io, v) in list {
                    if io.region.intersects(r) {
                        f(io, v);
                    }
                }
            }
        }
    }

    /// Keeps only the boxes whose value satisfies `keep`.
    pub fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        let mut len = 0;
        self.by_start.retain(|_, row| {
            row.retain(|_, list| {
                list.retain(|(_, v)| keep(v));
                len += list.len();
                !list.is_empty()
            });
            !row.is_empty()
        });
        self.len = len;
    }

    /// Number of boxes recorded.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no box is recorded.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The earliest recorded item whose box intersects `r`.
fn earliest_overlap(boxes: &RegionIndex<u32>, r: &Region) -> Option<(u32, TaskIo)> {
    let mut best: Option<(u32, TaskIo)> = None;
    boxes.for_each_overlap(r, |io, &item| {
        if best.is_none_or(|(b, _)| item < b) {
            best = Some((item, *io));
        }
    });
    best
}

/// Every region a launch's items touch, per tensor (module docs).
#[derive(Debug, Default)]
pub struct RegionLedger {
    tensors: HashMap<u32, (RegionIndex<u32>, RegionIndex<u32>)>,
    regions: usize,
}

impl RegionLedger {
    /// Nothing recorded.
    pub fn new() -> RegionLedger {
        RegionLedger::default()
    }

    /// Records item `item`'s regions `io`, unless one conflicts with a region recorded before:
    /// then nothing is recorded and the conflict is returned (`running` is the earlier item).
    pub fn record(&mut self, item: u32, io: &[TaskIo]) -> Result<(), Conflict> {
        let mut found: Option<(u32, TaskIo, TaskIo)> = None;
        for new in io {
            let Some((writes, reads)) = self.tensors.get(&new.region.tensor) else {
                continue;
            };
            let mut hit = earliest_overlap(writes, &new.region);
            if new.access().writes()
                && let Some(r) = earliest_overlap(reads, &new.region)
                && hit.is_none_or(|(w, _)| r.0 < w)
            {
                hit = Some(r);
            }
            if let Some((old_item, old)) = hit
                && found.is_none_or(|(f, _, _)| old_item < f)
            {
                found = Some((old_item, old, *new));
            }
        }
        if let Some((running, old, new)) = found {
            return Err(Conflict {
                running,
                running_region: old.region,
                running_access: old.access(),
                task: item,
                region: new.region,
                access: new.access(),
            });
        }
        for &x in io {
            let (writes, reads) = self.tensors.entry(x.region.tensor).or_default();
            if x.access().writes() {
                writes.insert(x, item);
            } else {
                reads.insert(x, item);
            }
        }
        self.regions += io.len();
        Ok(())
    }

    /// Number of regions recorded.
    pub fn regions(&self) -> usize {
        self.regions
    }
}
