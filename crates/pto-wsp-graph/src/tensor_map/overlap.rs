//! The overlap map: a read or write conflicts with every earlier access whose box intersects it.
//!
//! Why: exact keys miss dependencies between different boxes of one tensor (attention reads the
//! K/V prefix written tile by tile; an output projection reads a whole row written by 32 head
//! tasks). Overlap finds them, and must do so without scanning every live access of a tensor.
//!
//! How: every access is a *record* (box, task, read or write). Each tensor gets a coarse uniform
//! grid over its first two dimensions, with the cell side in each dimension the largest power of
//! two not above the first box recorded for that tensor (so tiles of a tiled loop usually fill
//! one cell each). A record is listed in every cell its box touches (cells live in one FxHash map
//! from (tensor, cell x, cell y) to a bucket with separate write and read lists); a record that
//! would touch more than [`LARGE_CELLS`] cells goes on the tensor's short "large" list instead,
//! which every lookup on that tensor scans. A lookup visits the cells its box touches — or, if
//! that is more cells than the tensor has buckets, the tensor's buckets — and deduplicates
//! records by a visit stamp. A read looks at write records only; a write at both.
//!
//! A write drops every record its box covers (it follows each of them, so it stands in for them
//! from now on); a record removed this way, or by [`TensorMap::retire_before`], is freed at once
//! and its cell references, tagged with a epoch, die lazily the next time a lookup passes.

use super::{FxHashMap, MapStats, TensorMap};
use crate::types::{Access, EdgeKind, FX_K, Region, TaskId};
use std::hash::{Hash, Hasher};

/// A record touching more cells than this goes on its tensor's "large" list.
pub const LARGE_CELLS: u64 = 4096;
/// Tensor ids below this index a vector directly; larger ids go through a hash map.
const DENSE_TENSORS: u32 = 1 << 16;

#[derive(Clone, Copy, Debug)]
struct Record {
    region: Region,
    task: u32,
    epoch: u32,
    visit: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Ref {
    rec: u32,
    epoch: u32,
}

#[derive(Clone, Debug, Default)]
struct Bucket {
    writes: Vec<Ref>,
    reads: Vec<Ref>,
    cell: CellKey,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
struct CellKey {
    tensor: u32,
    cx: u32,
    cy: u32,
}

impl Hash for CellKey {
    #[inline]
    fn hash<H: Hasher>(&self, state: &mut H) {
        let h = ((self.tensor as u64) << 32 | self.cx as u64).wrapping_mul(FX_K);
        let h = (h.rotate_left(5) ^ self.cy as u64).wrapping_mul(FX_K);
        state.write_u64(h ^ (h >> 29));
    }
}

#[derive(Clone, Debug, Default)]
struct Grid {
    shift: [u32; 2],
    large_writes: Vec<Ref>,
    large_reads: Vec<Ref>,
    buckets: Vec<u32>,
}

/// Overlap TensorMap (see the module docs).
#[derive(Debug, Default)]
pub struct OverlapMap {
    records: Vec<Record>,
    free: Vec<u32>,
    cells: FxHashMap<CellKey, u32>,
    buckets: Vec<Bucket>,
    free_buckets: Vec<u32>,
    grids: Vec<Grid>,
    dense: Vec<u32>,
    sparse: FxHashMap<u32, u32>,
    stamp: u32,
    stats: MapStats,
}

const NIL: u32 = u32::MAX;

/// Range of cells a region touches: `(x0, x1, y0, y1)` inclusive.
#[inline]
fn cell_range(shift: [u32; 2], r: &Region) -> (u32, u32, u32, u32) {
    (
        r.start[0] >> shift[0],
        ((r.end(0) - 1) >> shift[0]) as u32,
        r.start[1] >> shift[1],
        ((r.end(1) - 1) >> shift[1]) as u32,
    )
}

/// What a scan does with the records it meets.
struct Scan<'a, F> {
    records: &'a mut Vec<Record>,
    free: &'a mut Vec<u32>,
    stats: &'a mut MapStats,
    pred: &'a mut F,
    region: &'a Region,
    task: u32,
    stamp: u32,
    writes: bool,
    reads: bool,
    hit: bool,
}

impl<F: FnMut(TaskId, EdgeKind)> Scan<'_, F> {
    /// Visits one list of references (write records if `write_list`), dropping stale references
    /// and records the access covers.
    #[inline]
    fn list(&mut self, list: &mut Vec<Ref>, write_list: bool) {
        let mut keep = 0;
        for i in 0..list.len() {
            let rf = list[i];
            let rec = &mut self.records[rf.rec as usize];
            if rec.epoch != rf.epoch {
                continue; // the record died: drop the reference
            }
            if rec.visit != self.stamp {
                rec.visit = self.stamp;
                if rec.region.intersects(self.region) {
                    self.hit = true;
                    if rec.task != self.task {
                        let kind = match (write_list, self.reads) {
                            (true, true) => EdgeKind::Raw,
                            (true, false) => EdgeKind::Waw,
                            (false, _) => EdgeKind::War,
                        };
                        (self.pred)(TaskId(rec.task), kind);
                    }
                    if self.writes && self.region.covers(&rec.region) {
                        rec.epoch = rec.epoch.wrapping_add(1);
                        self.free.push(rf.rec);
                        self.stats.live -= 1;
                        continue;
                    }
                } else {
                    self.stats.probes += 1;
                }
            }
            list[keep] = rf;
            keep += 1;
        }
        list.truncate(keep);
    }

    #[inline]
    fn bucket(&mut self, b: &mut Bucket) {
        self.list(&mut b.writes, true);
        if self.writes {
            self.list(&mut b.reads, false);
        }
    }
}

impl OverlapMap {
    /// An empty map.
    pub fn new() -> OverlapMap {
        OverlapMap::default()
    }

    fn grid_of(&mut self, r: &Region) -> usize {
        let slot = if r.tensor < DENSE_TENSORS {
            let t = r.tensor as usize;
            if t >= self.dense.len() {
                self.dense.resize(t + 1, NIL);
            }
            &mut self.dense[t]
        } else {
            self.sparse.entry(r.tensor).or_insert(NIL)
        };
        if *slot == NIL {
            *slot = self.grids.len() as u32;
            // Cell side: the largest power of two not above the first box's extent.
            let shift = [r.size[0].ilog2(), r.size[1].ilog2()];
            self.grids.push(Grid {
                shift,
                ..Grid::default()
            });
        }
        *slot as usize
    }

    fn new_record(&mut self, region: Region, task: u32) -> Ref {
        self.stats.live += 1;
        self.stats.high_water = self.stats.high_water.max(self.stats.live);
        if let Some(i) = self.free.pop() {
            let rec = &mut self.records[i as usize];
            rec.region = region;
            rec.task = task;
            Ref {
                rec: i,
                epoch: rec.epoch,
            }
        } else {
            self.records.push(Record {
                region,
                task,
                epoch: 0,
                visit: 0,
            });
            Ref {
                rec: (self.records.len() - 1) as u32,
                epoch: 0,
            }
        }
    }

    fn next_stamp(&mut self) -> u32 {
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            for r in &mut self.records {
                r.visit = 0;
            }
            self.stamp = 1;
        }
        self.stamp
    }
}

impl TensorMap for OverlapMap {
    fn access<F: FnMut(TaskId, EdgeKind)>(
        &mut self,
        task: TaskId,
        region: &Region,
        access: Access,
        pred: &mut F,
    ) {
        let g = self.grid_of(region);
        let stamp = self.next_stamp();
        let writes = access.writes();
        let OverlapMap {
            records,
            free,
            cells,
            buckets,
            grids,
            stats,
            ..
        } = self;
        let grid = &mut grids[g];
        let (x0, x1, y0, y1) = cell_range(grid.shift, region);
        let ncells = (x1 - x0) as u64 + 1;
        let ncells = ncells * ((y1 - y0) as u64 + 1);
        let mut scan = Scan {
            records,
            free,
            stats,
            pred,
            region,
            task: task.0,
            stamp,
            writes,
            reads: access.reads(),
            hit: false,
        };
        if ncells <= grid.buckets.len() as u64 {
            for cx in x0..=x1 {
                for cy in y0..=y1 {
                    let key = CellKey {
                        tensor: region.tensor,
                        cx,
                        cy,
                    };
                    if let Some(&b) = cells.get(&key) {
                        scan.bucket(&mut buckets[b as usize]);
                    }
                }
            }
        } else {
            for &b in &grid.buckets {
                let bucket = &mut buckets[b as usize];
                let c = bucket.cell;
                if (x0..=x1).contains(&c.cx) && (y0..=y1).contains(&c.cy) {
                    scan.bucket(bucket);
                }
            }
        }
        scan.list(&mut grid.large_writes, true);
        if writes {
            scan.list(&mut grid.large_reads, false);
        }
        if scan.hit {
            self.stats.hits += 1;
        } else {
            self.stats.misses += 1;
        }

        // Record the access (an inout records only its write: the write covers the read).
        let rf = self.new_record(*region, task.0);
        let OverlapMap {
            cells,
            buckets,
            free_buckets,
            grids,
            ..
        } = self;
        let grid = &mut grids[g];
        if ncells > LARGE_CELLS {
            if writes {
                grid.large_writes.push(rf);
            } else {
                grid.large_reads.push(rf);
            }
            return;
        }
        for cx in x0..=x1 {
            for cy in y0..=y1 {
                let key = CellKey {
                    tensor: region.tensor,
                    cx,
                    cy,
                };
                let b = *cells.entry(key).or_insert_with(|| {
                    let b = match free_buckets.pop() {
                        Some(b) => b,
                        None => {
                            buckets.push(Bucket::default());
                            (buckets.len() - 1) as u32
                        }
                    };
                    buckets[b as usize].cell = key;
                    grid.buckets.push(b);
                    b
                });
                let bucket = &mut buckets[b as usize];
                if writes {
                    bucket.writes.push(rf);
                } else {
                    bucket.reads.push(rf);
                }
            }
        }
    }

    fn retire_before(&mut self, oldest_live: TaskId) {
        let OverlapMap {
            records,
            free,
            cells,
            buckets,
            free_buckets,
            grids,
            stats,
            ..
        } = self;
        // Mark: a record is alive iff some list holds a reference with its epoch.
        let mut alive = vec![false; records.len()];
        let live_ref = |rf: &Ref, records: &[Record]| records[rf.rec as usize].epoch == rf.epoch;
        let mark = |list: &Vec<Ref>, alive: &mut Vec<bool>| {
            for rf in list {
                if live_ref(rf, records) {
                    alive[rf.rec as usize] = true;
                }
            }
        };
        for b in buckets.iter() {
            mark(&b.writes, &mut alive);
            mark(&b.reads, &mut alive);
        }
        for g in grids.iter() {
            mark(&g.large_writes, &mut alive);
            mark(&g.large_reads, &mut alive);
        }
        for (i, r) in records.iter_mut().enumerate() {
            if alive[i] && r.task < oldest_live.0 {
                r.epoch = r.epoch.wrapping_add(1);
                free.push(i as u32);
                stats.live -= 1;
            }
        }
        let compact = |list: &mut Vec<Ref>| list.retain(|rf| live_ref(rf, records));
        for g in grids.iter_mut() {
            compact(&mut g.large_writes);
            compact(&mut g.large_reads);
            g.buckets.retain(|&b| {
                let bucket = &mut buckets[b as usize];
                compact(&mut bucket.writes);
                compact(&mut bucket.reads);
                if bucket.writes.is_empty() && bucket.reads.is_empty() {
                    cells.remove(&bucket.cell);
                    free_buckets.push(b);
                    false
                } else {
                    true
                }
            });
        }
    }

    fn stats(&self) -> MapStats {
        self.stats
    }
}
