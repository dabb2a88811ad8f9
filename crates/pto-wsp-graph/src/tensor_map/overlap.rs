//! The overlap map: a read or write conflicts with every earlier access whose box intersects it.
//!
//! Why: exact keys miss dependencies between different boxes of one tensor (attention reads the
//! K/V prefix written tile by tile; an output projection reads a whole row written by 32 head
//! tasks). Overlap finds them, and must do so without scanning every live access of a tensor.
//!
//! How: every access is a *record* (box, task, read or write). Each tensor gets a coarse uniform
//! grid over its first two dimensions, with the cell side in each dimension the largest power of
//! two not above the first box recorded for that tensor (so tiles of a tiled loop usually fill
//! one cell each). A record is listed in the bucket of every cell its box touches (a bucket has
//! separate write and read lists); cells with both coordinates below 4096 are found by indexing a
//! per-tensor table grown on demand, others through an FxHash map. A record that would touch
//! more than [`LARGE_CELLS`] cells goes on the tensor's "large" list instead, which every lookup
//! on that tensor scans, and a lookup that large visits the tensor's existing buckets rather than
//! every cell. Lookups deduplicate records by a visit stamp. A read looks at write records only;
//! a write at both. A bucket keeps up to two references per list in itself (no heap block to
//! miss on).
//!
//! The common accesses touch one cell (nearly 90 % of the LLaMA stream's), so a bucket also
//! keeps, in itself and without a record, its cell's *own write* (the newest write of one cell,
//! its task, box and sequence number) and *own reads* (reads of one cell of one box: the newest
//! reader, the earlier ones joined in a reader list, as `OverlapMap::join` does for a record).
//! Each behaves exactly as a record listed in that cell alone would (the general scan meets it
//! in `Scan::bucket`, a covering write drops it, it counts as a live record), so this changes
//! the work, never the edges. A write of one cell takes the fast path
//! (`OverlapMap::write_one_cell`) when the cell's bucket lists no record, the tensor has no
//! "large" records and the write covers the cell's own write: it meets only the own write and
//! reads and the tensor's marks, and becomes the own write. A read of one cell
//! (`OverlapMap::read_one_cell`, out of line, no visit stamp: it cannot meet a record twice)
//! follows the own write and the write lists, then joins or becomes the own reads (a read of
//! another box in that cell gets a record as before).
//!
//! A tensor whose every access so far is exactly one whole cell of its grid (a tiled loop's
//! tiles of the grid's first box, the same rank) is *tiled* (`Tile`): every box in its cells
//! is the cell itself, so its accesses take the one-cell paths without box tests
//! (`OverlapMap::tiled_access`) until the first other access ends that for the tensor. The
//! buckets hold what the general one-cell paths leave, so this too changes the work, never the
//! edges.
//!
//! A write drops every record its box covers (it follows each of them, so it stands in for them
//! from now on); a record removed this way is freed at once and its cell references, tagged with
//! an epoch, die lazily the next time a lookup passes (the covering write's own scan, for every
//! cell of the record's box).
//!
//! Retiring ([`TensorMap::retire_before`]) frees no record: the record of a completed task stays
//! as a *tombstone* until a write covers its box, exactly as in a build that never retires, and
//! a lookup that meets it reports its task (the builder and the runtimes count that edge and
//! wire nothing to a completed task). Joined readers of a record are pruned to a count as their
//! list grows, as the exact maps' readers are ([`super::readers`]), reported as
//! [`TaskId::FORGOTTEN`]. Coverage marks are kept or evicted by the order of the accesses alone
//! ([`super::marks`]). So the edges found do not depend on when tasks completed, and memory
//! follows the boxes not yet covered by a write (what a build that never retires holds), not
//! the number of tasks.
//!
//! A read of more than one cell consults the tensor's coverage marks ([`super::marks`]): with a
//! mark whose box lies inside the read's, the read waits for the mark's task instead of every
//! write the mark covers (writes intersecting the mark's box recorded before it), and skips the
//! write lists of cells wholly inside the mark's box that no newer write touched. Such a read
//! becomes the tensor's mark for its own box unless its box is the mark's (so readers of one
//! box all wait for the first, not for each other in a chain). So a prefix read costs O(1)
//! edges, however many tiles the prefix holds: every conflicting writer still happens before
//! the reader, through the mark's task.
//!
//! A write asks the marks for delegating readers (write after read) only where it may meet
//! one: per column of cells, the rows of every delegating mark recorded since the last clear
//! (`WarRows`, an over-approximation) say where they can be, so the K/V tiles written under
//! the prefix marks of every head do not walk those marks.
//!
//! Reads of one box share one record (*joining*): a read of one cell whose own reads (failing
//! them, whose newest read record) have exactly its box, and a read of exactly a
//! (non-delegating) mark's box with no write to
//! the tensor since the mark, add no record and are listed in no cell; the record's task becomes
//! the new reader and the earlier ones go to the record's reader list. A write meeting the
//! record reports every reader in it (completed ones filtered out), exactly the edges separate
//! records would give, so joining changes the work, never the graph. This is what keeps a row
//! read by every column tile (an attention row read by 32 output projections, a weight tile read
//! by every row tile) from costing one record and one cell visit per reader and cell.

use super::geometry::{covers, meets};
use super::marks::{CellSeqs, Mark, Marks, inner_cells};
use super::readers::{ReaderList, ReaderPool};
use super::{FxHashMap, MapStats, TensorMap};
use crate::types::{Access, EdgeKind, FX_K, Region, TaskId};
use smallvec::SmallVec;
use std::hash::{Hash, Hasher};

/// A record touching more cells than this goes on its tensor's "large" list.
pub const LARGE_CELLS: u64 = 4096;
/// Tensor ids below this index a vector directly; larger ids go through a hash map.
const DENSE_TENSORS: u32 = 1 << 16;

#[derive(Clone, Copy, Debug)]
struct Record {
    region: Region,
    /// The task that made the record or, for a read record that later reads of the same box
    /// joined, the newest of them.
    task: u32,
    epoch: u32,
    visit: u32,
    /// The earlier readers of a joined read record (index in `OverlapMap::groups`), or `NIL`.
    group: u32,
    /// Sequence number of the access that made it (see [`Mark::seq`]).
    seq: u64,
}

const _: () = assert!(std::mem::size_of::<Record>() == 64);
const _: () = assert!(std::mem::size_of::<RefList>() == 24, "as small as a Vec");

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Ref {
    rec: u32,
    epoch: u32,
}

/// A cell's list of record references. Almost every list holds one or two (a tile's writer,
/// its joined readers' record), so they live in the bucket itself: a lookup reads the bucket's
/// line and the records, not a separate heap block per list (the block was a cache miss on
/// every access of the LLaMA stream).
type RefList = SmallVec<[Ref; 2]>;

/// A write of one cell kept in the cell's bucket instead of as a record (a record listed in
/// this cell alone, so it needs no epoch and no visit stamp). `task == NIL`: none.
#[derive(Clone, Copy, Debug)]
struct CellWrite {
    region: Region,
    task: u32,
    /// Sequence number of the write (see [`Mark::seq`]).
    seq: u64,
}

/// Reads of one cell of one box kept in the cell's bucket instead of as a record: the newest
/// reader and the earlier ones that joined it (as `OverlapMap::join` does for a record).
/// `task == NIL`: none.
#[derive(Clone, Copy, Debug)]
struct CellRead {
    region: Region,
    task: u32,
    earlier: ReaderList,
}

#[derive(Clone, Debug)]
struct Bucket {
    /// The cell's own write and reads (see the module docs): checked before the lists.
    own_w: CellWrite,
    own_r: CellRead,
    writes: RefList,
    reads: RefList,
    cell: CellKey,
    /// Sequence number of the newest write listed here or kept in `own_w` (0: none).
    wseq: u64,
}

impl Default for Bucket {
    fn default() -> Self {
        Bucket {
            own_w: CellWrite {
                region: Region::default(),
                task: NIL,
                seq: 0,
            },
            own_r: CellRead {
                region: Region::default(),
                task: NIL,
                earlier: ReaderList::default(),
            },
            writes: RefList::new(),
            reads: RefList::new(),
            cell: CellKey::default(),
            wseq: 0,
        }
    }
}

impl Bucket {
    /// Whether the bucket lists no record (its own write and reads aside).
    #[inline(always)]
    fn lists_nothing(&self) -> bool {
        self.writes.is_empty() && self.reads.is_empty()
    }
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
    /// Set by [`TensorMap::clear`]: the next record chooses the cell side again.
    fresh: bool,
    shift: [u32; 2],
    large_writes: Vec<Ref>,
    large_reads: Vec<Ref>,
    /// Coverage marks of multi-cell reads.
    marks: Marks,
    /// The newest write per cell.
    seqs: CellSeqs,
    /// Where delegating marks may be: see [`WarRows`].
    war_rows: WarRows,
    /// Sequence number of the newest write to the tensor (0: none).
    last_write: u64,
    buckets: Vec<u32>,
    /// `dense[cx][cy]`: bucket of a cell with both coordinates below [`DENSE_CELLS`] (or `NIL`);
    /// rows grow on demand. Other cells go through the shared hash map.
    dense: Vec<Vec<u32>>,
    /// Every access to the tensor since the grid chose its cell side was one whole cell of a
    /// dense cell (see [`Tile`]); cleared by the first other access, until the next clear.
    tiled: bool,
    /// What a whole cell of this grid is.
    tile: Tile,
}

/// A whole cell of a grid, as words of a [`Region`] (see [`Tile::holds`]).
///
/// Why: most tensors of a tiled stream (the LLaMA layer's normalised rows, its per-head
/// queries, its FFN tiles) are only ever written and read a whole cell at a time. While that
/// holds for a tensor, every box met in a cell is the cell itself (same rank too), so a one-cell
/// access of it needs no box test and no equality test: its own write meets and is covered, its
/// own reads have exactly its box, no record is listed anywhere (records come only from boxes
/// of other extents), the tensor has no marks (they come from multi-cell reads) and no write
/// is told to [`CellSeqs`] (see [`OverlapMap::tiled_access`]).
#[derive(Clone, Copy, Debug, Default)]
struct Tile {
    /// The rank of the grid's first box.
    rank: u32,
    /// Bits of `start[0] | start[1] << 32` that a whole cell's start leaves zero.
    mask: u64,
    /// `size[0] | size[1] << 32` of a whole cell.
    size: u64,
}

/// `size[2] | size[3] << 32` past a rank of 2 ([`Region::new`]'s unit dimensions).
const UNIT_SIZES: u64 = 1 | 1 << 32;

impl Tile {
    /// The whole cell of a grid with cell sides `1 << shift`, for boxes of rank `rank`.
    fn new(shift: [u32; 2], rank: u32) -> Tile {
        let side = |d: usize| 1u64 << shift[d];
        Tile {
            rank,
            mask: (side(0) - 1) | (side(1) - 1) << 32,
            size: side(0) | side(1) << 32,
        }
    }

    /// Whether `r` is exactly one whole cell: aligned starts and the cell's sides in the first
    /// two dimensions, start 0 and size 1 in the last two, the grid's rank. Branch-free.
    #[inline(always)]
    fn holds(&self, r: &Region) -> bool {
        let w = |lo: u32, hi: u32| lo as u64 | (hi as u64) << 32;
        ((w(r.start[0], r.start[1]) & self.mask)
            | w(r.start[2], r.start[3])
            | (w(r.size[0], r.size[1]) ^ self.size)
            | (w(r.size[2], r.size[3]) ^ UNIT_SIZES)
            | (r.rank ^ self.rank) as u64)
            == 0
    }
}

/// Columns of cells whose delegating marks [`WarRows`] tracks one by one.
const WAR_COLS: u32 = 1024;
/// A write spanning more columns of cells than this asks [`Marks::war`] without looking.
const WAR_SPAN: u32 = 64;

/// An over-approximation of the boxes of a tensor's delegating marks: per column of cells, the
/// rows (first dimension, `lo..hi`) of every delegating mark recorded in it since the last
/// clear (a mark is merged into each column of cells it touches and never taken out, so what
/// [`Marks`] holds lies inside). A write whose rows miss them in every column it touches meets
/// no delegating mark: [`Marks::war`] would report and drop nothing, so it is not asked. This
/// is what lets the tiles of a causal-attention K/V tensor be written without a walk over the
/// prefix marks of every head (each lies in its own column, above the rows written next).
#[derive(Clone, Debug, Default)]
struct WarRows {
    /// Per column of cells: `(lo, hi)`, or `hi == 0` for none.
    cols: Vec<(u64, u64)>,
    /// A delegating mark touched a column at or past [`WAR_COLS`]: every write asks.
    all: bool,
}

impl WarRows {
    /// A delegating mark of box `r` touching columns of cells `y0..=y1` was recorded.
    fn note(&mut self, r: &Region, (y0, y1): (u32, u32)) {
        if y1 >= WAR_COLS {
            self.all = true;
            return;
        }
        if y1 as usize >= self.cols.len() {
            self.cols.resize(y1 as usize + 1, (0, 0));
        }
        let (lo, hi) = (r.start[0] as u64, r.end(0));
        for c in &mut self.cols[y0 as usize..=y1 as usize] {
            *c = match *c {
                (_, 0) => (lo, hi),
                (l, h) => (l.min(lo), h.max(hi)),
            };
        }
    }

    /// Whether a write of box `r` touching columns of cells `y0..=y1` may meet a delegating
    /// mark (false only when it cannot).
    #[inline(always)]
    fn may_meet(&self, r: &Region, (y0, y1): (u32, u32)) -> bool {
        if self.cols.is_empty() && !self.all {
            return false;
        }
        if self.all || y1 - y0 > WAR_SPAN {
            return true;
        }
        let (lo, hi) = (r.start[0] as u64, r.end(0));
        let last = (y1 as usize).min(self.cols.len().saturating_sub(1));
        (y0 as usize..=last)
            .filter_map(|c| self.cols.get(c))
            .any(|&(l, h)| h != 0 && l < hi && lo < h)
    }

    fn clear(&mut self) {
        self.cols.clear();
        self.all = false;
    }
}

/// Cells with both coordinates below this are found by indexing, not hashing.
const DENSE_CELLS: u32 = 4096;

/// The bucket of a cell, created if missing. The common case, an existing bucket of a dense
/// cell (only cells below [`DENSE_CELLS`] have entries there), is two indexings; everything
/// else is out of line.
#[inline(always)]
fn bucket_of(
    grid: &mut Grid,
    cells: &mut FxHashMap<CellKey, u32>,
    buckets: &mut Vec<Bucket>,
    free_buckets: &mut Vec<u32>,
    key: CellKey,
) -> u32 {
    match dense_bucket(grid, key) {
        Some(b) => b,
        None => new_bucket_of(grid, cells, buckets, free_buckets, key),
    }
}

/// The bucket of a cell through the grid's dense table, if it has one there.
#[inline(always)]
fn dense_bucket(grid: &Grid, key: CellKey) -> Option<u32> {
    grid.dense
        .get(key.cx as usize)
        .and_then(|row| row.get(key.cy as usize))
        .copied()
        .filter(|&b| b != NIL)
}

/// [`bucket_of`] for a sparse cell or a cell without a bucket yet.
#[inline(never)]
fn new_bucket_of(
    grid: &mut Grid,
    cells: &mut FxHashMap<CellKey, u32>,
    buckets: &mut Vec<Bucket>,
    free_buckets: &mut Vec<u32>,
    key: CellKey,
) -> u32 {
    let slot = if key.cx < DENSE_CELLS && key.cy < DENSE_CELLS {
        dense_slot(grid, key)
    } else {
        cells.entry(key).or_insert(NIL)
    };
    if *slot != NIL {
        return *slot;
    }
    let b = fresh_bucket(buckets, free_buckets, key);
    *slot = b;
    grid.buckets.push(b);
    b
}

/// The dense table's entry of a cell with both coordinates below [`DENSE_CELLS`], its row
/// created or lengthened if needed.
#[inline(always)]
fn dense_slot(grid: &mut Grid, key: CellKey) -> &mut u32 {
    let (cx, cy) = (key.cx as usize, key.cy as usize);
    if cx >= grid.dense.len() {
        grid.dense.resize_with(cx + 1, Vec::new);
    }
    if cy >= grid.dense[cx].len() {
        // A new row takes the previous row's length at once (a tiled tensor's rows have the
        // same cells), not one cell at a time through several reallocations.
        let hint = match cx {
            0 => 0,
            _ => grid.dense[cx - 1].len(),
        };
        grid.dense[cx].resize((cy + 1).max(hint), NIL);
    }
    &mut grid.dense[cx][cy]
}

/// An empty bucket for `key` (a freed one if any), not yet listed in its grid.
#[inline(always)]
fn fresh_bucket(buckets: &mut Vec<Bucket>, free_buckets: &mut Vec<u32>, key: CellKey) -> u32 {
    let b = match free_buckets.pop() {
        Some(b) => b,
        None => {
            buckets.push(Bucket::default());
            (buckets.len() - 1) as u32
        }
    };
    buckets[b as usize].cell = key;
    buckets[b as usize].wseq = 0;
    b
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
    /// Earlier readers of joined read records (see [`OverlapMap::join`]); free slots in
    /// `free_groups`, chunks in `group_pool`.
    groups: Vec<ReaderList>,
    free_groups: Vec<u32>,
    group_pool: ReaderPool,
    stamp: u32,
    /// Sequence number of the last access.
    seq: u64,
    /// Tasks below this have completed ([`TensorMap::retire_before`]): only decides which
    /// joined readers may be pruned to a count.
    oldest_live: u32,
    stats: MapStats,
    /// Report every conflicting earlier access, never an earlier reader through a coverage mark
    /// ([`OverlapMap::pairwise`]).
    no_marks: bool,
    /// Tests only: every access takes the general path ([`OverlapMap::access_cells`], asking
    /// the marks every time), the reference the fast paths are checked against.
    #[cfg(test)]
    plain: bool,
    /// Tests only: a read that becomes a delegating mark gets a record listed in its cells as
    /// any read does (the edges before such reads went unlisted), the reference that unlisting
    /// only drops edges other edges imply.
    #[cfg(test)]
    listed_marks: bool,
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

/// A list of references a scan can compact in place: a bucket's [`RefList`] or a grid's
/// "large" `Vec`.
trait Refs {
    fn is_empty(&self) -> bool;
    fn as_mut_slice(&mut self) -> &mut [Ref];
    fn truncate(&mut self, len: usize);
}

impl Refs for Vec<Ref> {
    #[inline(always)]
    fn is_empty(&self) -> bool {
        Vec::is_empty(self)
    }
    #[inline(always)]
    fn as_mut_slice(&mut self) -> &mut [Ref] {
        self
    }
    #[inline(always)]
    fn truncate(&mut self, len: usize) {
        Vec::truncate(self, len)
    }
}

impl Refs for RefList {
    #[inline(always)]
    fn is_empty(&self) -> bool {
        SmallVec::is_empty(self)
    }
    #[inline(always)]
    fn as_mut_slice(&mut self) -> &mut [Ref] {
        self
    }
    #[inline(always)]
    fn truncate(&mut self, len: usize) {
        SmallVec::truncate(self, len)
    }
}

/// What a scan does with the records it meets.
struct Scan<'a, F> {
    records: &'a mut Vec<Record>,
    groups: &'a [ReaderList],
    group_pool: &'a mut ReaderPool,
    free: &'a mut Vec<u32>,
    stats: &'a mut MapStats,
    pred: &'a mut F,
    region: &'a Region,
    task: u32,
    stamp: u32,
    writes: bool,
    reads: bool,
    hit: bool,
    /// The mark a read uses: write records intersecting its box older than its sequence
    /// number are covered (no edge).
    cover: Option<Mark>,
}

impl<F: FnMut(TaskId, EdgeKind)> Scan<'_, F> {
    /// Visits one list of references (write records if `write_list`), dropping stale references
    /// and records the access covers.
    #[inline(always)]
    fn list(&mut self, list: &mut impl Refs, write_list: bool) {
        if !list.is_empty() {
            let refs = list.as_mut_slice();
            let len = refs.len();
            let keep = self.nonempty_list(refs, write_list);
            // Most scans drop nothing: no call into the list's truncation then.
            if keep < len {
                list.truncate(keep);
            }
        }
    }

    /// Scans `list`, moving the references it keeps to its front; their number. Inlined into
    /// each of its few callers: as a call, its prologue and epilogue cost as much as scanning
    /// the one or two references most lists hold.
    #[inline(always)]
    fn nonempty_list(&mut self, list: &mut [Ref], write_list: bool) -> usize {
        let mut keep = 0;
        for i in 0..list.len() {
            let rf = list[i];
            let rec = &mut self.records[rf.rec as usize];
            if rec.epoch != rf.epoch {
                continue; // the record died: drop the reference
            }
            if rec.visit != self.stamp {
                rec.visit = self.stamp;
                if meets(&rec.region, self.region) {
                    self.hit = true;
                    let covered = self
                        .cover
                        .is_some_and(|m| rec.seq < m.seq && meets(&rec.region, &m.region));
                    let kind = match (write_list, self.reads) {
                        (true, true) => EdgeKind::Raw,
                        (true, false) => EdgeKind::Waw,
                        (false, _) => EdgeKind::War,
                    };
                    if rec.group != NIL && !covered {
                        let group = &self.groups[rec.group as usize];
                        report_group(group, self.group_pool, self.task, kind, self.pred);
                    }
                    if rec.task != self.task && !covered {
                        (self.pred)(TaskId(rec.task), kind);
                    }
                    if self.writes && covers(self.region, &rec.region) {
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
        keep
    }

    #[inline]
    fn bucket(&mut self, b: &mut Bucket) {
        if b.own_w.task != NIL {
            self.own_write(&mut b.own_w);
        }
        self.list(&mut b.writes, true);
        if self.writes {
            if b.own_r.task != NIL {
                self.own_reads(&mut b.own_r);
            }
            self.list(&mut b.reads, false);
        }
    }

    /// Whether a bucket's own entry of box `region` meets the access: a hit if so, a probe if
    /// not.
    #[inline(always)]
    fn meets(&mut self, region: &Region) -> bool {
        let meets = meets(region, self.region);
        if meets {
            self.hit = true;
        } else {
            self.stats.probes += 1;
        }
        meets
    }

    /// A bucket's own write, as [`Scan::nonempty_list`] treats a write record listed in that
    /// cell alone.
    #[inline(always)]
    fn own_write(&mut self, w: &mut CellWrite) {
        if !self.meets(&w.region) {
            return;
        }
        let covered = self
            .cover
            .is_some_and(|m| w.seq < m.seq && meets(&w.region, &m.region));
        if w.task != self.task && !covered {
            let kind = if self.reads {
                EdgeKind::Raw
            } else {
                EdgeKind::Waw
            };
            (self.pred)(TaskId(w.task), kind);
        }
        if self.writes && covers(self.region, &w.region) {
            w.task = NIL;
            self.stats.live -= 1;
        }
    }

    /// A bucket's own reads met by a write, as [`Scan::nonempty_list`] treats a joined read
    /// record listed in that cell alone (a write uses no mark, so nothing is covered).
    #[inline(always)]
    fn own_reads(&mut self, r: &mut CellRead) {
        if !self.meets(&r.region) {
            return;
        }
        report_group(
            &r.earlier,
            self.group_pool,
            self.task,
            EdgeKind::War,
            self.pred,
        );
        if r.task != self.task {
            (self.pred)(TaskId(r.task), EdgeKind::War);
        }
        if covers(self.region, &r.region) {
            r.earlier.clear(self.group_pool);
            r.task = NIL;
            self.stats.live -= 1;
        }
    }
}

/// A read of one cell meeting write lists: [`Scan`] for the case where no record can be met
/// twice (a record is listed at most once in a cell's list, and never both in a cell and on
/// its tensor's "large" list), no mark covers anything and nothing is dropped but dead
/// references; so it needs no visit stamp. Reports exactly what [`Scan`] reports there.
struct ReadOne<'a, F> {
    records: &'a [Record],
    groups: &'a [ReaderList],
    group_pool: &'a ReaderPool,
    stats: &'a mut MapStats,
    pred: &'a mut F,
    region: &'a Region,
    task: u32,
}

impl<F: FnMut(TaskId, EdgeKind)> ReadOne<'_, F> {
    /// Reports the live write records of `list` that intersect the read (read after write),
    /// dropping references to dead records; whether any intersected.
    #[inline(always)]
    fn writers(&mut self, list: &mut impl Refs) -> bool {
        if list.is_empty() {
            return false;
        }
        let refs = list.as_mut_slice();
        let (mut keep, mut hit) = (0, false);
        for i in 0..refs.len() {
            let rf = refs[i];
            let rec = &self.records[rf.rec as usize];
            if rec.epoch != rf.epoch {
                continue; // the record died: drop the reference
            }
            if meets(&rec.region, self.region) {
                hit = true;
                if rec.group != NIL {
                    self.group(rec.group);
                }
                if rec.task != self.task {
                    (self.pred)(TaskId(rec.task), EdgeKind::Raw);
                }
            } else {
                self.stats.probes += 1;
            }
            refs[keep] = rf;
            keep += 1;
        }
        if keep < refs.len() {
            list.truncate(keep);
        }
        hit
    }

    /// Reports the joined readers of a group (a write list holds none in practice: joining is
    /// for read records; kept so that this reports what [`Scan`] reports whatever the lists).
    #[cold]
    fn group(&mut self, group: u32) {
        let group = &self.groups[group as usize];
        report_group(group, self.group_pool, self.task, EdgeKind::Raw, self.pred);
    }
}

/// Reports the joined readers of a record's group as predecessors of task `me` (itself
/// excepted): completed readers too (nothing is wired to them), and those pruned to a count as
/// [`TaskId::FORGOTTEN`], so the edges found do not depend on timing.
#[inline(always)]
fn report_group<F: FnMut(TaskId, EdgeKind)>(
    group: &ReaderList,
    pool: &ReaderPool,
    me: u32,
    kind: EdgeKind,
    pred: &mut F,
) {
    group.for_each(pool, |t| {
        if t.0 != me {
            pred(t, kind);
        }
    });
    for _ in 0..group.forgotten() {
        pred(TaskId::FORGOTTEN, kind);
    }
}

/// How a multi-cell access meets the box of the mark it uses.
#[derive(Clone, Copy)]
struct MarkBox {
    /// Cells wholly inside the mark's box: their writes are covered unless newer than it.
    inner: Option<(u32, u32, u32, u32)>,
    /// A read of a larger box than the mark's delegates the inner cells to its own mark (is not
    /// listed there).
    delegate: bool,
    /// The mark's sequence number (0: no mark).
    mark_seq: u64,
    /// When no write touched the inner cells' rows since the mark, they are not visited at all.
    skip_inner: bool,
    /// The read becomes a delegating mark, which answers for it to every later write of its
    /// box: it has no record and is listed in no cell (see [`OverlapMap::access_cells`]).
    unlisted: bool,
}

impl MarkBox {
    #[inline(always)]
    fn new(grid: &Grid, cover: Option<Mark>, region: &Region, ncells: u64) -> MarkBox {
        let inner = cover.and_then(|m| inner_cells(grid.shift, &m.region, region));
        let delegate =
            inner.is_some() && ncells <= LARGE_CELLS && cover.is_some_and(|m| m.region != *region);
        let mark_seq = cover.map_or(0, |m| m.seq);
        let skip_inner = delegate && inner.is_some_and(|r| grid.seqs.all_older(r, mark_seq));
        MarkBox {
            inner,
            delegate,
            mark_seq,
            skip_inner,
            unlisted: false,
        }
    }

    /// Whether cell `(cx, cy)` is wholly inside the mark's box.
    #[inline(always)]
    fn inside(&self, cx: u32, cy: u32) -> bool {
        self.inner.is_some_and(|(ix0, ix1, iy0, iy1)| {
            (ix0..=ix1).contains(&cx) && (iy0..=iy1).contains(&cy)
        })
    }
}

/// Visits every cell of a box of at most [`LARGE_CELLS`] cells: scans its bucket (unless the
/// mark covers it) and lists the access's record `rf` there.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn walk_cells<F: FnMut(TaskId, EdgeKind)>(
    grid: &mut Grid,
    cells: &mut FxHashMap<CellKey, u32>,
    buckets: &mut Vec<Bucket>,
    free_buckets: &mut Vec<u32>,
    scan: &mut Scan<'_, F>,
    (x0, x1, y0, y1): (u32, u32, u32, u32),
    mb: &MarkBox,
    rf: Ref,
    seq: u64,
) {
    let mut cx = x0 as u64;
    while cx <= x1 as u64 {
        let cx32 = cx as u32;
        if let Some((ix0, ix1, iy0, iy1)) = mb.inner
            && mb.skip_inner
            && cx32 == ix0
            && iy0 <= y0
            && y1 <= iy1
        {
            cx = ix1 as u64 + 1; // every cell of these rows is inside
            continue;
        }
        for cy in y0..=y1 {
            let inner_cell = mb.inside(cx32, cy);
            if mb.skip_inner && inner_cell {
                continue;
            }
            let key = CellKey {
                tensor: scan.region.tensor,
                cx: cx32,
                cy,
            };
            let b = bucket_of(grid, cells, buckets, free_buckets, key);
            let bucket = &mut buckets[b as usize];
            if !(bucket.wseq < mb.mark_seq && inner_cell) {
                scan.bucket(bucket);
            }
            if scan.writes {
                bucket.writes.push(rf);
                bucket.wseq = seq;
            } else if !(mb.unlisted || mb.delegate && inner_cell) {
                bucket.reads.push(rf);
            }
        }
        cx += 1;
    }
    if scan.writes {
        grid.seqs.set((x0, x1, y0, y1), seq);
    }
}

/// A box of more than [`LARGE_CELLS`] cells: scans the tensor's existing buckets inside it
/// (unless the mark covers them) rather than every cell.
#[inline(always)]
fn scan_large<F: FnMut(TaskId, EdgeKind)>(
    grid: &Grid,
    buckets: &mut [Bucket],
    scan: &mut Scan<'_, F>,
    (x0, x1, y0, y1): (u32, u32, u32, u32),
    mb: &MarkBox,
) {
    for &b in &grid.buckets {
        let bucket = &mut buckets[b as usize];
        let c = bucket.cell;
        if (x0..=x1).contains(&c.cx)
            && (y0..=y1).contains(&c.cy)
            && !(bucket.wseq < mb.mark_seq && mb.inside(c.cx, c.cy))
        {
            scan.bucket(bucket);
        }
    }
}

impl OverlapMap {
    /// An empty map.
    pub fn new() -> OverlapMap {
        OverlapMap::default()
    }

    /// A map without coverage marks: every predecessor it reports is a conflicting access (an
    /// oracle of conflicting pairs, as the order check needs), at the cost of one edge per
    /// covered writer for covering reads.
    pub fn pairwise() -> OverlapMap {
        OverlapMap {
            no_marks: true,
            ..OverlapMap::default()
        }
    }

    /// Whether a read that becomes a delegating mark still gets a record listed in its cells
    /// (tests only, see `listed_marks`).
    #[inline(always)]
    fn listed_marks(&self) -> bool {
        #[cfg(test)]
        return self.listed_marks;
        #[cfg(not(test))]
        false
    }

    /// Whether every access takes the general path (tests only, see `plain`).
    #[inline(always)]
    fn plain(&self) -> bool {
        #[cfg(test)]
        return self.plain;
        #[cfg(not(test))]
        false
    }

    /// The grid of `r`'s tensor, created (with `r` choosing the cell side) if missing.
    #[inline]
    fn grid_of(&mut self, r: &Region) -> usize {
        if let Some(&g) = self.dense.get(r.tensor as usize)
            && g != NIL
            && !self.grids[g as usize].fresh
        {
            return g as usize;
        }
        self.new_grid_of(r)
    }

    #[cold]
    #[inline(never)]
    fn new_grid_of(&mut self, r: &Region) -> usize {
        // A map whose accesses all take the general path (tests) never tiles.
        let tiled = !self.plain();
        let slot = if r.tensor < DENSE_TENSORS {
            let t = r.tensor as usize;
            if t >= self.dense.len() {
                self.dense.resize(t + 1, NIL);
            }
            &mut self.dense[t]
        } else {
            self.sparse.entry(r.tensor).or_insert(NIL)
        };
        // Cell side: the largest power of two not above the first box's extent.
        let shift = [r.size[0].ilog2(), r.size[1].ilog2()];
        if *slot == NIL {
            *slot = self.grids.len() as u32;
            self.grids.push(Grid {
                fresh: true,
                ..Grid::default()
            });
        }
        let grid = &mut self.grids[*slot as usize];
        if grid.fresh {
            grid.fresh = false;
            grid.shift = shift;
            grid.tiled = tiled;
            grid.tile = Tile::new(shift, r.rank);
        }
        *slot as usize
    }

    fn new_record(&mut self, region: Region, task: u32, seq: u64) -> Ref {
        self.stats.live += 1;
        self.stats.high_water = self.stats.high_water.max(self.stats.live);
        if let Some(i) = self.free.pop() {
            let rec = &mut self.records[i as usize];
            rec.region = region;
            rec.task = task;
            rec.seq = seq;
            if rec.group != NIL {
                self.groups[rec.group as usize].clear(&mut self.group_pool);
                self.free_groups.push(rec.group);
                rec.group = NIL;
            }
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
                group: NIL,
                seq,
            });
            Ref {
                rec: (self.records.len() - 1) as u32,
                epoch: 0,
            }
        }
    }

    /// A read by `task` of exactly the box of the live read record `r`, with no write to the
    /// tensor in between that the caller has not already ordered the task after: `task` joins
    /// the record instead of adding its own. The record's task becomes `task`, the earlier
    /// readers go to its group; a write meeting the record reports all of them, just as it
    /// would report one record per reader (so joining changes no edge, only the work).
    fn join(&mut self, r: u32, task: u32) {
        let rec = &mut self.records[r as usize];
        if rec.task == task {
            return;
        }
        if rec.group == NIL {
            rec.group = self.free_groups.pop().unwrap_or_else(|| {
                self.groups.push(ReaderList::default());
                (self.groups.len() - 1) as u32
            });
        }
        self.groups[rec.group as usize].push(
            TaskId(rec.task),
            &mut self.group_pool,
            self.oldest_live,
        );
        rec.task = task;
    }

    /// Whether `rf` names a live record of exactly `region`.
    #[inline]
    fn same_live_box(&self, rf: Ref, region: &Region) -> bool {
        self.records
            .get(rf.rec as usize)
            .is_some_and(|rec| rec.epoch == rf.epoch && rec.region == *region)
    }

    /// A read of one cell: follows the cell's writers, then joins the cell's own reads if they
    /// have exactly this box (a weight tile or an input row read by many tasks), or becomes
    /// them if the cell has none, else joins or adds a read record as the general path would.
    /// Out of line and without the general scan's machinery (visit stamp, mark cover, covering
    /// writes): more than half of the LLaMA stream's accesses come here.
    #[inline(never)]
    fn read_one_cell<F: FnMut(TaskId, EdgeKind)>(
        &mut self,
        g: usize,
        task: u32,
        region: &Region,
        key: CellKey,
        pred: &mut F,
    ) {
        self.read_cell::<false, F>(g, task, region, key, pred);
    }

    /// [`Self::read_one_cell`]'s body, inlined into it and into [`Self::tiled_access`].
    ///
    /// `TILED`: the tensor is tiled and `region` a whole cell ([`Tile`]): the cell's own write
    /// meets it and its own reads have its box without a test, and no write list holds a record.
    #[inline(always)]
    fn read_cell<const TILED: bool, F: FnMut(TaskId, EdgeKind)>(
        &mut self,
        g: usize,
        task: u32,
        region: &Region,
        key: CellKey,
        pred: &mut F,
    ) {
        let OverlapMap {
            records,
            cells,
            buckets,
            free_buckets,
            grids,
            groups,
            group_pool,
            stats,
            oldest_live,
            ..
        } = self;
        let grid = &mut grids[g];
        let b = bucket_of(grid, cells, buckets, free_buckets, key) as usize;
        let bucket = &mut buckets[b];
        let mut hit = false;
        let w = &bucket.own_w;
        if w.task != NIL {
            if TILED || meets(&w.region, region) {
                hit = true;
                if w.task != task {
                    pred(TaskId(w.task), EdgeKind::Raw);
                }
            } else {
                stats.probes += 1;
            }
        }
        debug_assert!(!TILED || (bucket.lists_nothing() && grid.large_writes.is_empty()));
        // Most one-cell reads find both write lists empty: then nothing is set up for them.
        if !(TILED || (bucket.writes.is_empty() && grid.large_writes.is_empty())) {
            let mut read = ReadOne {
                records,
                groups,
                group_pool,
                stats,
                pred,
                region,
                task,
            };
            hit |= read.writers(&mut bucket.writes) | read.writers(&mut grid.large_writes);
        }
        let r = &mut bucket.own_r;
        if r.task == NIL {
            *r = CellRead {
                region: *region,
                task,
                earlier: ReaderList::default(),
            };
            stats.live += 1;
            stats.high_water = stats.high_water.max(stats.live);
        } else if TILED || r.region == *region {
            debug_assert!(r.region == *region);
            if r.task != task {
                r.earlier.push(TaskId(r.task), group_pool, *oldest_live);
                r.task = task;
            }
        } else {
            self.read_record(b, task, region);
        }
        if hit {
            self.stats.hits += 1;
        } else {
            self.stats.misses += 1;
        }
    }

    /// A read of one cell whose own reads have another box: joins the cell's newest read
    /// record if it has exactly this box, else adds its own record.
    #[cold]
    #[inline(never)]
    fn read_record(&mut self, b: usize, task: u32, region: &Region) {
        match self.buckets[b].reads.last() {
            Some(&rf) if self.same_live_box(rf, region) => self.join(rf.rec, task),
            _ => {
                let rf = self.new_record(*region, task, self.seq);
                self.buckets[b].reads.push(rf);
            }
        }
    }

    /// A write of one cell whose bucket lists no record (or that has no bucket yet, in the
    /// dense table) on a tensor without "large" records, covering the cell's own write if any:
    /// the general path would meet only the cell's own write and reads and the tensor's marks,
    /// so this does only that and becomes the cell's own write (a tiled loop's output tile,
    /// most writes of the LLaMA stream).
    ///
    /// `TILED`: the tensor is tiled and `region` a whole cell ([`Tile`]): the cell's own reads
    /// have its box (met and covered without a test), the tensor has no marks and its writes
    /// are not told to [`CellSeqs`] (see [`OverlapMap::tiled_access`]).
    #[allow(clippy::too_many_arguments)]
    fn write_one_cell<const TILED: bool, F: FnMut(TaskId, EdgeKind)>(
        &mut self,
        g: usize,
        b: Option<u32>,
        task: u32,
        region: &Region,
        reads: bool,
        key: CellKey,
        seq: u64,
        pred: &mut F,
    ) {
        let OverlapMap {
            buckets,
            free_buckets,
            grids,
            group_pool,
            stats,
            ..
        } = self;
        let grid = &mut grids[g];
        let b = match b {
            Some(b) => b,
            None => {
                // The caller checked: a dense cell without a bucket. Its bucket is made here,
                // inline (not through `new_bucket_of`'s call and its sparse-cell branch).
                let b = fresh_bucket(buckets, free_buckets, key);
                *dense_slot(grid, key) = b;
                grid.buckets.push(b);
                b
            }
        };
        let bucket = &mut buckets[b as usize];
        let mut hit = false;
        let w = &mut bucket.own_w;
        if w.task != NIL {
            // The caller checked that this write covers it.
            hit = true;
            if w.task != task {
                let kind = if reads { EdgeKind::Raw } else { EdgeKind::Waw };
                pred(TaskId(w.task), kind);
            }
        } else {
            stats.live += 1;
            stats.high_water = stats.high_water.max(stats.live);
        }
        *w = CellWrite {
            region: *region,
            task,
            seq,
        };
        let r = &mut bucket.own_r;
        if r.task != NIL {
            if TILED || meets(&r.region, region) {
                debug_assert!(!TILED || r.region == *region);
                hit = true;
                report_group(&r.earlier, group_pool, task, EdgeKind::War, pred);
                if r.task != task {
                    pred(TaskId(r.task), EdgeKind::War);
                }
                if TILED || covers(region, &r.region) {
                    r.earlier.clear(group_pool);
                    r.task = NIL;
                    stats.live -= 1;
                }
            } else {
                stats.probes += 1;
            }
        }
        bucket.wseq = seq;
        grid.last_write = seq;
        debug_assert!(!TILED || (grid.marks.is_empty() && grid.war_rows.cols.is_empty()));
        if !TILED {
            grid.seqs.set((key.cx, key.cx, key.cy, key.cy), seq);
        }
        if !TILED && grid.war_rows.may_meet(region, (key.cy, key.cy)) {
            grid.marks.war(region, task, |t| {
                hit = true;
                pred(TaskId(t), EdgeKind::War);
            });
        }
        if hit {
            stats.hits += 1;
        } else {
            stats.misses += 1;
        }
    }

    /// The general access: a new record listed in every cell of its box (or on the tensor's
    /// large list), every record it meets scanned, and a multi-cell read made the mark of its
    /// box.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn access_cells<F: FnMut(TaskId, EdgeKind)>(
        &mut self,
        g: usize,
        task: u32,
        region: &Region,
        access: Access,
        (range, ncells): ((u32, u32, u32, u32), u64),
        cover: Option<Mark>,
        pred: &mut F,
    ) {
        let writes = access.writes();
        let seq = self.seq;
        let stamp = self.next_stamp();
        let mut mb = MarkBox::new(&self.grids[g], cover, region, ncells);
        // The read becomes the mark of its box, unless it is the box of the mark it used; it
        // takes over the used mark's delegation.
        let marks = !self.no_marks && !writes && ncells > 1;
        let new_mark = marks && cover.is_none_or(|m| m.region != *region);
        let delegates = mb.delegate || cover.is_some_and(|m| m.delegates);
        // A read that becomes a delegating mark needs no record: every later write meeting its
        // box meets the mark ([`Marks::war`]) until a task that follows the read replaces the
        // mark (the next read of the chain, whose mark then answers) or a write covering the
        // mark's box drops it (that write followed the read). A record listed in its cells
        // would only give such writes an edge to the read that the mark's edge implies.
        mb.unlisted = new_mark && delegates && ncells <= LARGE_CELLS && !self.listed_marks();
        // The new record (an inout records only its write: the write covers the read). It is
        // listed after each list is scanned, so the scan never meets it.
        let rf = match mb.unlisted {
            true => Ref { rec: NIL, epoch: 0 },
            false => self.new_record(*region, task, seq),
        };
        let plain = self.plain();
        let OverlapMap {
            records,
            free,
            cells,
            buckets,
            free_buckets,
            grids,
            groups,
            group_pool,
            stats,
            ..
        } = self;
        let grid = &mut grids[g];
        let mut scan = Scan {
            records,
            groups,
            group_pool,
            free,
            stats,
            pred,
            region,
            task,
            stamp,
            writes,
            reads: access.reads(),
            hit: cover.is_some(),
            cover,
        };
        if ncells <= LARGE_CELLS {
            walk_cells(
                grid,
                cells,
                buckets,
                free_buckets,
                &mut scan,
                range,
                &mb,
                rf,
                seq,
            );
        } else {
            scan_large(grid, buckets, &mut scan, range, &mb);
        }
        scan.list(&mut grid.large_writes, true);
        if writes {
            grid.last_write = seq;
            scan.list(&mut grid.large_reads, false);
            // Readers that delegated their cells to a mark.
            let Scan { pred, hit, .. } = &mut scan;
            if plain || grid.war_rows.may_meet(region, (range.2, range.3)) {
                grid.marks.war(region, task, |t| {
                    *hit = true;
                    pred(TaskId(t), EdgeKind::War);
                });
            }
        }
        let hit = scan.hit;
        if new_mark {
            let mark = Mark {
                region: *region,
                task,
                seq,
                delegates,
                record: (rf.rec, rf.epoch),
            };
            if mark.delegates {
                grid.war_rows.note(region, (range.2, range.3));
            }
            let recorded = grid.marks.insert(mark, cover);
            // A delegating mark always has a used mark (the first read of a chain delegates
            // nothing), which makes room for it.
            debug_assert!(recorded || !mark.delegates, "a used mark makes room");
        }
        if ncells > LARGE_CELLS {
            if writes {
                grid.large_writes.push(rf);
            } else {
                grid.large_reads.push(rf);
            }
        }
        if hit {
            self.stats.hits += 1;
        } else {
            self.stats.misses += 1;
        }
    }

    /// An access to a tiled tensor: a whole dense cell keeps it tiled and takes the one-cell
    /// paths without box tests (true: done); anything else ends the tiling (false: the caller
    /// takes the general paths).
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn tiled_access<F: FnMut(TaskId, EdgeKind)>(
        &mut self,
        g: usize,
        task: u32,
        region: &Region,
        access: Access,
        seq: u64,
        pred: &mut F,
    ) -> bool {
        let grid = &self.grids[g];
        let key = CellKey {
            tensor: region.tensor,
            cx: region.start[0] >> grid.shift[0],
            cy: region.start[1] >> grid.shift[1],
        };
        if !(grid.tile.holds(region) && key.cx < DENSE_CELLS && key.cy < DENSE_CELLS) {
            // The tiling ends. The buckets already hold what the general paths would have
            // left. The writes so far were not told to `CellSeqs`: every mark of the tensor is
            // made from now on (marks come from multi-cell reads), so those writes are older
            // than every mark, and the only question asked of `CellSeqs` (whether cells were
            // written since a mark) has the same answer.
            self.grids[g].tiled = false;
            return false;
        }
        if access.writes() {
            let b = dense_bucket(grid, key);
            let reads = access.reads();
            self.write_one_cell::<true, F>(g, b, task, region, reads, key, seq, pred);
        } else {
            self.read_cell::<true, F>(g, task, region, key, pred);
        }
        true
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
        let writes = access.writes();
        self.seq += 1;
        let seq = self.seq;
        // A tiled tensor (see `Tile`): out of line, so that this inlined dispatch stays small.
        if self.grids[g].tiled && self.tiled_access(g, task.0, region, access, seq, pred) {
            return;
        }
        let range = cell_range(self.grids[g].shift, region);
        let (x0, x1, y0, y1) = range;
        // One cell (most accesses): decided by two comparisons, the cell count only computed
        // on the general path.
        let one_cell = x0 == x1 && y0 == y1;
        if one_cell && !self.plain() {
            let key = CellKey {
                tensor: region.tensor,
                cx: x0,
                cy: y0,
            };
            if !writes {
                return self.read_one_cell(g, task.0, region, key, pred);
            }
            let grid = &self.grids[g];
            if key.cx < DENSE_CELLS
                && key.cy < DENSE_CELLS
                && grid.large_writes.is_empty()
                && grid.large_reads.is_empty()
            {
                let b = dense_bucket(grid, key);
                if b.is_none_or(|b| {
                    let bucket = &self.buckets[b as usize];
                    bucket.lists_nothing()
                        && (bucket.own_w.task == NIL || covers(region, &bucket.own_w.region))
                }) {
                    let reads = access.reads();
                    return self
                        .write_one_cell::<false, F>(g, b, task.0, region, reads, key, seq, pred);
                }
            }
        }
        let ncells = ((x1 - x0) as u64 + 1) * ((y1 - y0) as u64 + 1);
        // A multi-cell read: the newest mark inside it covers what it covers.
        let cover = if !self.no_marks && !writes && ncells > 1 {
            self.grids[g].marks.within(region)
        } else {
            None
        };
        if let Some(m) = cover
            && m.task != task.0
        {
            pred(TaskId(m.task), EdgeKind::Raw);
        }
        // A read of exactly the mark's box with no write to the tensor since the mark: the mark
        // covers every write it could meet, so it only joins the mark's record (listed in every
        // cell of the box when the mark does not delegate) for write-after-read.
        if let Some(m) = cover
            && !self.plain()
            && m.region == *region
            && !m.delegates
            && self.grids[g].last_write < m.seq
            && self.same_live_box(
                Ref {
                    rec: m.record.0,
                    epoch: m.record.1,
                },
                region,
            )
        {
            self.join(m.record.0, task.0);
            self.stats.hits += 1;
            return;
        }
        self.access_cells(g, task.0, region, access, (range, ncells), cover, pred);
    }

    fn retire_before(&mut self, oldest_live: TaskId) {
        // Records of completed tasks stay as tombstones (see the module docs): later lookups
        // report them as a build that never retires does, and a covering write drops them as
        // it drops any record (its scan also drops the references to them). Retiring only lets
        // joined readers be pruned to a count, and costs O(1) however large the map.
        self.oldest_live = self.oldest_live.max(oldest_live.0);
    }

    fn clear(&mut self) {
        self.records.clear();
        self.free.clear();
        self.groups.clear();
        self.free_groups.clear();
        self.group_pool.clear();
        self.cells.clear();
        self.free_buckets.clear();
        for (i, b) in self.buckets.iter_mut().enumerate().rev() {
            b.writes.clear();
            b.reads.clear();
            b.own_w.task = NIL;
            b.own_r.task = NIL;
            b.own_r.earlier = ReaderList::default();
            self.free_buckets.push(i as u32);
        }
        for g in &mut self.grids {
            g.fresh = true;
            g.large_writes.clear();
            g.large_reads.clear();
            g.marks.clear();
            g.seqs.clear();
            g.war_rows.clear();
            g.last_write = 0;
            g.buckets.clear();
            for row in &mut g.dense {
                row.fill(NIL);
            }
        }
        self.stats = MapStats::default();
        self.seq = 0;
        self.oldest_live = 0;
    }

    fn stats(&self) -> MapStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Runs one access, returning the predecessors it reported, sorted and deduplicated.
    fn access(m: &mut OverlapMap, task: u32, region: Region, access: Access) -> Vec<u32> {
        let mut got = Vec::new();
        m.access(TaskId(task), &region, access, &mut |p: TaskId, _| {
            got.push(p.0)
        });
        got.sort_unstable();
        got.dedup();
        got
    }

    #[test]
    fn readers_of_one_box_share_a_record_and_a_write_still_waits_for_each() {
        let mut m = OverlapMap::new();
        let tile = Region::new_2d(0, 0, 4, 0, 4);
        assert_eq!(access(&mut m, 0, tile, Access::Out), Vec::<u32>::new());
        for t in 1..=40 {
            assert_eq!(access(&mut m, t, tile, Access::In), vec![0], "reader {t}");
        }
        assert_eq!(
            m.stats().live,
            2,
            "one write record, one joined read record"
        );
        // Readers 1..=20 (and the writer) completed: the write still reports them (a build
        // that never retires finds the same predecessors; nothing is wired to completed ones).
        m.retire_before(TaskId(21));
        assert_eq!(
            access(&mut m, 41, tile, Access::Out),
            (0..=40).collect::<Vec<_>>()
        );
        // The write covered the joined record: the next write waits for it alone.
        assert_eq!(access(&mut m, 42, tile, Access::Out), vec![41]);
        assert_eq!(m.stats().live, 1);
    }

    #[test]
    fn a_write_of_a_cell_no_record_lists_still_waits_for_the_reader_that_delegated_it() {
        // The same stream on a map that retires completed tasks and on one that never does:
        // a write of a tile whose reader delegated the tile's cell to a mark still waits for
        // that reader, and retiring changes no edge found (completed tasks stay tombstones).
        let tile = |r: u32| Region::new_2d(0, 4 * r, 4, 0, 4);
        let run = |retire: bool| {
            let mut m = OverlapMap::new();
            for r in 0..4 {
                assert!(access(&mut m, r, tile(r), Access::Out).is_empty());
            }
            // Task 4 reads rows 0..8 (its mark), task 5 rows 0..16: it delegates the cells of
            // the first two tiles to its mark and is listed only in the other two.
            assert_eq!(
                access(&mut m, 4, Region::new_2d(0, 0, 8, 0, 4), Access::In),
                vec![0, 1]
            );
            assert_eq!(
                access(&mut m, 5, Region::new_2d(0, 0, 16, 0, 4), Access::In),
                vec![2, 3, 4]
            );
            if retire {
                m.retire_before(TaskId(5));
            }
            let w0 = access(&mut m, 6, tile(0), Access::Out);
            let w1 = access(&mut m, 7, tile(1), Access::InOut);
            // Under the same write, reading it back: the reader waits for the writer.
            let r0 = access(&mut m, 8, tile(0), Access::In);
            (w0, w1, r0)
        };
        let (w0, w1, r0) = run(true);
        assert!(w0.contains(&5) && w1.contains(&5), "{w0:?} {w1:?}");
        assert_eq!(r0, vec![6]);
        assert_eq!((w0, w1, r0), run(false));
    }

    #[test]
    fn readers_of_a_marks_box_join_its_record() {
        let mut m = OverlapMap::new();
        for c in 0..4 {
            let tile = Region::new_2d(0, 0, 4, 4 * c, 4);
            assert!(access(&mut m, c, tile, Access::Out).is_empty());
        }
        let row = Region::new_2d(0, 0, 4, 0, 16);
        assert_eq!(access(&mut m, 4, row, Access::In), vec![0, 1, 2, 3]);
        for t in 5..=20 {
            // Through the mark of task 4, which follows every writer of the row.
            assert_eq!(access(&mut m, t, row, Access::In), vec![4], "reader {t}");
        }
        assert_eq!(
            m.stats().live,
            5,
            "four write records, one joined read record"
        );
        // A write of one tile waits for its writer and every reader of the row.
        let mut want: Vec<u32> = (4..=20).collect();
        want.insert(0, 2);
        assert_eq!(
            access(&mut m, 21, Region::new_2d(0, 0, 4, 8, 4), Access::Out),
            want
        );
        // After that write the mark no longer covers the row: a reader waits for the new writer
        // (and, through the mark, for the old ones) and gets a record of its own.
        assert_eq!(access(&mut m, 22, row, Access::In), vec![4, 21]);
        assert_eq!(m.stats().live, 6);
    }

    /// A cell's own write and reads (kept in its bucket, no record) are met by the general
    /// path as records would be: a write of two tiles waits for the tile's writer and every
    /// joined reader and drops them; a write inside the tile that does not cover them keeps
    /// them (the next reader still waits for both). The same stream on a map whose
    /// every access takes the general path is the reference.
    #[test]
    fn a_cells_own_write_and_reads_are_met_by_the_general_path() {
        let tile = Region::new_2d(0, 0, 4, 0, 8);
        let two = Region::new_2d(0, 0, 4, 0, 16);
        let part = Region::new_2d(0, 1, 2, 2, 4);
        let stream = [
            (tile, Access::Out),
            (tile, Access::In),
            (tile, Access::In),
            (tile, Access::In),
            (two, Access::Out),
            (tile, Access::In),
            (tile, Access::InOut),
            (tile, Access::In),
            (part, Access::Out),
            (tile, Access::In),
            (tile, Access::Out),
        ];
        let mut fast = OverlapMap::new();
        let mut plain = OverlapMap {
            plain: true,
            ..OverlapMap::default()
        };
        let mut got = Vec::new();
        for (t, &(r, a)) in stream.iter().enumerate() {
            let want = access(&mut plain, t as u32, r, a);
            let have = access(&mut fast, t as u32, r, a);
            assert_eq!(have, want, "task {t}");
            got.push(have);
        }
        // Independently of the reference: what each access must wait for.
        assert_eq!(
            got[4],
            vec![0, 1, 2, 3],
            "the wide write meets the cell's own entries"
        );
        assert_eq!(
            got[6],
            vec![4, 5],
            "the inout write waits for the wide writer and the reader"
        );
        // The wide write's record spans two tiles: a write of one tile does not drop it.
        assert_eq!(
            got[9],
            vec![4, 6, 8],
            "every writer of the tile, the partial one beside"
        );
        assert_eq!(got[10], vec![4, 6, 7, 8, 9]);
    }

    /// `rows` x `cols` tiles of 4 x 8 elements of tensor `t` from tile (`row`, `col`).
    fn tiles(t: u32, row: u32, rows: u32, col: u32, cols: u32) -> Region {
        Region::new_2d(t, row * 4, rows * 4, col * 8, cols * 8)
    }

    /// Tasks of one to four accesses: tiles, column prefixes (causal attention's K/V), rows,
    /// boxes of tiles, unaligned boxes, and on tensor 2 single elements and boxes that span more
    /// than [`LARGE_CELLS`] cells of the grid a first single element chooses.
    fn stream() -> impl Strategy<Value = Vec<Vec<(Region, Access)>>> {
        let access = prop_oneof![Just(Access::In), Just(Access::Out), Just(Access::InOut)];
        let region = prop_oneof![
            4 => (0u32..2, 0u32..10, 0u32..4).prop_map(|(t, r, c)| tiles(t, r, 1, c, 1)),
            2 => (0u32..2, 0u32..10, 0u32..4).prop_map(|(t, r, c)| tiles(t, 0, r + 1, c, 1)),
            1 => (0u32..2, 0u32..10).prop_map(|(t, r)| tiles(t, r, 1, 0, 4)),
            1 => (0u32..2, 0u32..10, 1u32..4, 0u32..4, 1u32..3)
                .prop_map(|(t, r, n, c, m)| tiles(t, r, n, c, m)),
            1 => (0u32..2, 0u32..40, 1u32..12, 0u32..32, 1u32..12)
                .prop_map(|(t, r, n, c, m)| Region::new_2d(t, r, n, c, m)),
            1 => (0u32..200, 0u32..200).prop_map(|(r, c)| Region::new_2d(2, r, 1, c, 1)),
            1 => (0u32..64, 1u32..200, 0u32..64, 1u32..200)
                .prop_map(|(r, n, c, m)| Region::new_2d(2, r, n, c, m)),
        ];
        prop::collection::vec(prop::collection::vec((region, access), 1..5), 1..160)
    }

    /// A whole tile of [`tiles`]' grid, or (rarely) a box that ends a tensor's tiling: the
    /// same box with a rank of 3 or a third dimension of 2 (built directly), a tile's half, a
    /// column prefix, a row; on tensors 0 to 2 (tensor 2's first access may not be a tile).
    fn tiled_stream() -> impl Strategy<Value = Vec<Vec<(Region, Access)>>> {
        let access = prop_oneof![Just(Access::In), Just(Access::Out), Just(Access::InOut)];
        let other = |t: u32, r: u32, c: u32, k: u32| {
            let tile = tiles(t, r, 1, c, 1);
            match k {
                0 => Region { rank: 3, ..tile },
                1 => {
                    let mut deep = Region { rank: 3, ..tile };
                    deep.size[2] = 2;
                    deep
                }
                2 => Region::new_2d(t, r * 4, 2, c * 8, 8),
                3 => tiles(t, 0, r + 1, c, 1),
                _ => tiles(t, r, 1, 0, 4),
            }
        };
        let region = prop_oneof![
            40 => (0u32..3, 0u32..6, 0u32..4).prop_map(|(t, r, c)| tiles(t, r, 1, c, 1)),
            1 => (0u32..3, 0u32..6, 0u32..4, 0u32..5).prop_map(move |(t, r, c, k)| other(t, r, c, k)),
        ];
        prop::collection::vec(prop::collection::vec((region, access), 1..4), 1..200)
    }

    /// Task by task, the predecessors `tasks` find in a map and in one forced down the general
    /// path (`plain`) are the same; with `kinds`, each with the same edge kinds too.
    fn agrees_with_the_general_path(
        tasks: &[Vec<(Region, Access)>],
        kinds: bool,
    ) -> Result<(), TestCaseError> {
        let mut fast = OverlapMap::new();
        let mut plain = OverlapMap {
            plain: true,
            ..OverlapMap::default()
        };
        for (t, regions) in tasks.iter().enumerate() {
            let run = |m: &mut OverlapMap| {
                let mut got = Vec::new();
                for &(r, a) in regions {
                    m.access(TaskId(t as u32), &r, a, &mut |p: TaskId, k| {
                        got.push((p.0, if kinds { k as u8 } else { 0 }));
                    });
                }
                got.sort_unstable();
                got.dedup();
                got
            };
            prop_assert_eq!(run(&mut fast), run(&mut plain), "task {}", t);
        }
        Ok(())
    }

    /// Task by task, a map whose reads that become delegating marks go unlisted finds a subset
    /// of the predecessors the same map finds with those reads listed in their cells
    /// (`listed_marks`), and every predecessor it leaves out is an ancestor of the task through
    /// the edges it found (so it orders every pair the listed map orders). With `general`, both
    /// maps take the general path for every access.
    fn unlisted_marks_drop_only_implied_edges(
        tasks: &[Vec<(Region, Access)>],
        general: bool,
    ) -> Result<(), TestCaseError> {
        let mut unlisted = OverlapMap {
            plain: general,
            ..OverlapMap::default()
        };
        let mut listed = OverlapMap {
            plain: general,
            listed_marks: true,
            ..OverlapMap::default()
        };
        // Ancestors of each task through the unlisted map's edges.
        let mut ancestors: Vec<std::collections::BTreeSet<u32>> = Vec::new();
        for (t, regions) in tasks.iter().enumerate() {
            let run = |m: &mut OverlapMap| {
                let mut got = Vec::new();
                for &(r, a) in regions {
                    m.access(TaskId(t as u32), &r, a, &mut |p: TaskId, _| got.push(p.0));
                }
                got.sort_unstable();
                got.dedup();
                got
            };
            let (have, want) = (run(&mut unlisted), run(&mut listed));
            let mut up = std::collections::BTreeSet::new();
            for &p in &have {
                prop_assert!(want.contains(&p), "task {}: edge from {} is new", t, p);
                up.insert(p);
                up.extend(ancestors[p as usize].iter().copied());
            }
            for &p in &want {
                prop_assert!(up.contains(&p), "task {}: {} no longer before it", t, p);
            }
            ancestors.push(up);
        }
        Ok(())
    }

    /// Column prefixes of growing length on few columns, tiles written under them, rows and
    /// boxes beside: long chains of delegating marks and the writes that meet them.
    fn prefix_stream() -> impl Strategy<Value = Vec<Vec<(Region, Access)>>> {
        let access = prop_oneof![Just(Access::In), Just(Access::Out), Just(Access::InOut)];
        let region = prop_oneof![
            3 => (0u32..8, 0u32..2).prop_map(|(r, c)| tiles(0, r, 1, c, 1)),
            4 => (0u32..8, 0u32..2).prop_map(|(r, c)| tiles(0, 0, r + 1, c, 1)),
            1 => (0u32..8, 1u32..3, 0u32..2).prop_map(|(r, n, c)| tiles(0, r, n, c, 1)),
            1 => (0u32..8).prop_map(|r| tiles(0, r, 1, 0, 2)),
            1 => (0u32..30, 1u32..12, 0u32..16, 1u32..12)
                .prop_map(|(r, n, c, m)| Region::new_2d(0, r, n, c, m)),
        ];
        let one =
            (region, access).prop_map(|(r, a)| (r, if r.size[0] > 4 { Access::In } else { a }));
        prop::collection::vec(prop::collection::vec(one, 1..3), 1..120)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(pto_wsp_ir::soak::cases(256)))]

        /// Reads that become delegating marks have no record (the mark answers for them): only
        /// edges that other edges imply go, on the fast paths and on the general path.
        #[test]
        fn unlisted_marks_keep_every_order(tasks in prefix_stream(), general in any::<bool>()) {
            unlisted_marks_drop_only_implied_edges(&tasks, general)?;
        }

        /// The same over the general streams (single elements, large boxes, other tensors).
        #[test]
        fn unlisted_marks_keep_every_order_in_general_streams(tasks in stream()) {
            unlisted_marks_drop_only_implied_edges(&tasks, false)?;
        }

        /// Column prefixes: the fast paths find the edges of the general path.
        #[test]
        fn prefix_chains_find_the_edges_of_the_general_path(tasks in prefix_stream()) {
            agrees_with_the_general_path(&tasks, true)?;
        }

        /// Tensors accessed a whole tile at a time take the tiled paths (no box tests) until
        /// another box ends it: task by task, the predecessors (and why) the general path
        /// finds.
        #[test]
        fn tiled_tensors_find_the_edges_of_the_general_path(tasks in tiled_stream()) {
            agrees_with_the_general_path(&tasks, true)?;
        }

        /// The fast paths (a read of one cell, a write of a fresh cell, a read joining a mark's
        /// record, writes that skip the marks when no delegating mark can be met) find, task
        /// by task, exactly the predecessors the general path finds.
        #[test]
        fn fast_paths_find_the_edges_of_the_general_path(tasks in stream()) {
            agrees_with_the_general_path(&tasks, false)?;
        }
    }
}
