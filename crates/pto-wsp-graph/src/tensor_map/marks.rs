//! Coverage marks: a read that covered many earlier writes stands in for them afterwards.
//!
//! Why: a causal-attention task reads the whole K/V prefix, written tile by tile by tasks that
//! are not ordered with each other. Wiring every reader to every earlier writer costs one edge
//! per writer (quadratic in sequence length); no earlier task already follows them all, so the
//! transitive reduction is quadratic too. A mark trades a little extra order for bounded edges:
//! a later read of a box that contains the mark's box waits for the mark's task, which itself
//! followed every writer of the mark's box recorded before it.
//!
//! Promise (the invariant every mark keeps): a mark `(box, task, seq)` means that `task` happens
//! after (through edges, transitively) every task that wrote a region intersecting `box` in an
//! access recorded before sequence number `seq`. That stays true for ever: a mark is never
//! invalidated, only evicted (which only costs edges). A reader using a mark therefore needs an
//! edge to the mark's task (unless it is the reader itself, or completed) and direct edges only
//! to the writers the mark does not cover. Added order: the reader also waits for the mark's
//! task, which read (never wrote) the data — extra order, never less.
//!
//! A mark may also *delegate*: a read that used a mark of a smaller box and becomes the mark of
//! its own box is not listed in the cells wholly inside the used mark's box (so a prefix read
//! touches the cells of its new tiles only, not the whole prefix). A delegating mark answers for
//! that read's write-after-read duty: every write whose box intersects it waits for its task
//! ([`Marks::war`]). So a delegating mark is removed only when a task that follows it takes its
//! place (the next read of the chain) or a write covering its box follows it; never merely
//! evicted, and never because its task completed: which marks exist, and so which edges they
//! give, depends on the order of the accesses alone, not on timing (a write still reports a
//! completed mark's task, which the runtimes wire to nobody).

use super::geometry::{covers, meets};
use crate::types::{MAX_RANK, Region};

/// Marks kept per tensor; the oldest is evicted beyond this (a thrashing workload gets today's
/// edges, never wrong ones).
pub const MAX_MARKS: usize = 64;

/// One coverage mark (see the module promise).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mark {
    /// The box read.
    pub region: Region,
    /// The reading task.
    pub task: u32,
    /// The sequence number of the read access (writes recorded before it are covered).
    pub seq: u64,
    /// Whether the read left some cells of its box to this mark (see the module docs).
    pub delegates: bool,
    /// The read's access record in the overlap map and that record's epoch: later reads of
    /// exactly this box join the record instead of adding their own (the map's business; a
    /// mark built elsewhere may hold anything here).
    pub record: (u32, u32),
}

/// The marks of one tensor, oldest first.
#[derive(Clone, Debug, Default)]
pub struct Marks {
    list: Vec<Mark>,
    /// How many marks of `list` delegate.
    delegating: usize,
    /// A box containing every delegating mark's box (meaningful while `delegating > 0`): a
    /// write outside it meets none of them ([`Marks::war`] in O(1)).
    delegating_box: Region,
    /// Where the last mark [`Marks::within`] found was in `list` (a hint: checked by sequence
    /// number before use, so a stale one only costs the search it would have saved).
    found: usize,
}

/// The smallest box containing `a` and `b` (same tensor).
#[inline]
fn union(a: &Region, b: &Region) -> Region {
    let mut u = *a;
    u.rank = a.rank.max(b.rank);
    for d in 0..MAX_RANK {
        let lo = a.start[d].min(b.start[d]);
        let hi = a.end(d).max(b.end(d));
        u.start[d] = lo;
        // Both ends fit in u32 (`Region::new` checks every box), so their span does.
        u.size[d] = (hi - lo as u64) as u32;
    }
    u
}

impl Marks {
    /// The newest mark whose box lies inside `region`, if any.
    #[inline]
    pub fn within(&mut self, region: &Region) -> Option<Mark> {
        // Columns first: the marks of a prefix chain per column tile differ in their columns.
        let i = self.list.iter().rposition(|m| {
            region.start[1] <= m.region.start[1]
                && m.region.end(1) <= region.end(1)
                && covers(region, &m.region)
        })?;
        // The read that used the mark usually inserts its own next: `insert` finds it here.
        self.found = i;
        Some(self.list[i])
    }

    /// Records `mark`, whose task follows `used` (the mark its read used, if any; marks are
    /// told apart by their sequence numbers, unique per map). When `used` is kept, `mark`
    /// takes its place. Otherwise it drops the marks without delegation whose boxes `mark`
    /// contains (its promise implies theirs: it covers every write they cover, and more) and,
    /// beyond [`MAX_MARKS`], evicts the oldest mark that does not delegate. Returns whether
    /// `mark` was recorded: it is refused when only delegating marks could make room, which
    /// cannot happen when `used` is one of the marks. What is kept depends on the order of the
    /// accesses only, never on which tasks completed, so neither do the edges marks give.
    pub fn insert(&mut self, mark: Mark, used: Option<Mark>) -> bool {
        // The common case, a read extending the mark it used (a prefix chain): the new mark
        // takes the used one's place. Marks it contains stay (they cost list room, never order).
        let at_hint = |u: &Mark| self.list.get(self.found).is_some_and(|m| m.seq == u.seq);
        if let Some(u) = used
            && let Some(i) = match at_hint(&u) {
                true => Some(self.found),
                false => self.list.iter().rposition(|m| m.seq == u.seq),
            }
        {
            self.list[i] = mark;
            match (u.delegates, mark.delegates) {
                // A chain's second read, the first to delegate (`used` did not): one more
                // delegating mark, no walk over the list.
                (false, true) => self.add_delegating(&mark.region),
                (true, true) => self.delegating_box = union(&self.delegating_box, &mark.region),
                (true, false) => self.recount(),
                (false, false) => {}
            }
            return true;
        }
        // `used`, if any, is not in the list (it was looked for above by its sequence number,
        // unique per map). Only marks without delegation are dropped or evicted below, so the
        // delegating count and box stand. Most inserts (a row read per tile) drop nothing:
        // find that out reading only, columns first, before moving any mark.
        let drops = |m: &Mark| {
            !m.delegates
                && mark.region.start[1] <= m.region.start[1]
                && m.region.end(1) <= mark.region.end(1)
                && covers(&mark.region, &m.region)
        };
        if self.list.iter().any(drops) {
            self.list.retain(|m| !drops(m));
        }
        if self.list.len() == MAX_MARKS {
            match self.list.iter().position(|m| !m.delegates) {
                Some(i) => {
                    self.list.remove(i);
                }
                None => return false,
            }
        }
        if mark.delegates {
            self.add_delegating(&mark.region);
        }
        self.list.push(mark);
        true
    }

    /// Counts one more delegating mark, of box `region`.
    #[inline]
    fn add_delegating(&mut self, region: &Region) {
        self.delegating_box = if self.delegating == 0 {
            *region
        } else {
            union(&self.delegating_box, region)
        };
        self.delegating += 1;
    }

    /// A write of `region` by `task`: calls `pred(t)` for the task `t` of every delegating mark
    /// of a task other than `task` whose box intersects `region` (write after read; completed
    /// tasks too, which the caller wires to nobody), and drops the delegating marks it covers
    /// (the writer follows them now).
    #[inline]
    pub fn war(&mut self, region: &Region, task: u32, mut pred: impl FnMut(u32)) {
        if self.delegating == 0 || !meets(&self.delegating_box, region) {
            return;
        }
        // Most writes meet no mark: find that out reading only, columns first (the marks of a
        // prefix chain per column tile differ in their columns).
        let meets_mark = |m: &Mark| {
            m.delegates
                && (m.region.start[1] as u64) < region.end(1)
                && (region.start[1] as u64) < m.region.end(1)
                && meets(&m.region, region)
        };
        if !self.list.iter().any(meets_mark) {
            return;
        }
        let mut dropped = false;
        self.list.retain(|m| {
            if !m.delegates || !meets(&m.region, region) {
                return true;
            }
            if m.task != task {
                pred(m.task);
            }
            let covered = covers(region, &m.region);
            dropped |= covered;
            !covered
        });
        if dropped {
            self.recount();
        }
    }

    fn recount(&mut self) {
        self.delegating = 0;
        for m in self.list.iter().filter(|m| m.delegates) {
            self.delegating_box = if self.delegating == 0 {
                m.region
            } else {
                union(&self.delegating_box, &m.region)
            };
            self.delegating += 1;
        }
    }

    /// Forgets every mark.
    pub fn clear(&mut self) {
        self.list.clear();
        self.delegating = 0;
    }

    /// How many marks are kept.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether no mark is kept.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}

/// Columns of cells tracked one by one by [`CellSeqs`]; writes to columns past it share one
/// maximum.
const TRACKED_COLS: usize = 1024;

/// Writes remembered per column of cells.
const RECENT: usize = 4;

/// The most recent writes to one column of cells, newest first: rows `lo..=hi`, sequence number.
#[derive(Clone, Copy, Debug, Default)]
struct Recent {
    writes: [(u32, u32, u64); RECENT],
    /// The sequence number of the newest write no longer in `writes` (0: none).
    dropped: u64,
}

/// The recent writes per column of cells of a tensor's grid: whether any write touched a
/// rectangle of cells since a sequence number, in O(columns) without visiting the cells. Exact
/// for the last [`RECENT`] writes of each column; older than those, it answers "maybe" (so the
/// cells are visited).
#[derive(Clone, Debug, Default)]
pub struct CellSeqs {
    cols: Vec<Recent>,
    /// The newest write to a column at or past [`TRACKED_COLS`].
    far: u64,
}

impl CellSeqs {
    /// A write with sequence number `seq` (higher than any before) touched the cells of rows
    /// `x0..=x1` in columns `y0..=y1`.
    #[inline]
    pub fn set(&mut self, (x0, x1, y0, y1): (u32, u32, u32, u32), seq: u64) {
        if y1 as usize >= TRACKED_COLS {
            self.far = seq;
        }
        let hi = (y1 as usize).min(TRACKED_COLS - 1);
        if y0 as usize > hi {
            return;
        }
        if hi >= self.cols.len() {
            self.cols.resize_with(hi + 1, Recent::default);
        }
        for c in &mut self.cols[y0 as usize..=hi] {
            if c.writes[RECENT - 1].2 != 0 {
                c.dropped = c.writes[RECENT - 1].2;
            }
            c.writes.copy_within(0..RECENT - 1, 1);
            c.writes[0] = (x0, x1, seq);
        }
    }

    /// Whether no write to a cell of `(x0..=x1, y0..=y1)` has a sequence number at or after
    /// `seq` (false when it cannot tell).
    #[inline]
    pub fn all_older(&self, (x0, x1, y0, y1): (u32, u32, u32, u32), seq: u64) -> bool {
        if y1 as usize >= TRACKED_COLS && self.far >= seq {
            return false;
        }
        let hi = (y1 as usize).min(self.cols.len().saturating_sub(1));
        (y0 as usize..=hi).all(|cy| {
            let Some(c) = self.cols.get(cy) else {
                return true;
            };
            c.dropped < seq
                && c.writes
                    .iter()
                    .take_while(|w| w.2 >= seq)
                    .all(|&(lo, hi, _)| hi < x0 || x1 < lo)
        })
    }

    /// Forgets every write.
    pub fn clear(&mut self) {
        self.cols.clear();
        self.far = 0;
    }
}

/// The cells `(x0..=x1, y0..=y1)` of a grid with cell sides `1 << shift` that lie wholly inside
/// `mark` in the first two dimensions, when `mark` agrees with `read` in every further
/// dimension (so a record touching such a cell and intersecting `read` intersects `mark`);
/// `None` when there is no such cell.
#[inline]
pub fn inner_cells(shift: [u32; 2], mark: &Region, read: &Region) -> Option<(u32, u32, u32, u32)> {
    if mark.start[2..] != read.start[2..] || mark.size[2..] != read.size[2..] {
        return None;
    }
    let inner = |d: usize| {
        let side = 1u64 << shift[d];
        let lo = (mark.start[d] as u64).div_ceil(side);
        let hi = mark.end(d) / side; // exclusive
        (lo < hi).then(|| (lo as u32, (hi - 1) as u32))
    };
    let (x0, x1) = inner(0)?;
    let (y0, y1) = inner(1)?;
    Some((x0, x1, y0, y1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(row: u32, rows: u32, task: u32) -> Mark {
        Mark {
            region: Region::new_2d(0, row, rows, 0, 8),
            task,
            seq: task as u64,
            delegates: false,
            record: (0, 0),
        }
    }

    #[test]
    fn a_mark_replaces_the_marks_it_contains_and_the_oldest_is_evicted() {
        let mut marks = Marks::default();
        assert!(marks.insert(m(0, 4, 1), None));
        assert!(marks.insert(m(8, 4, 2), None));
        assert!(marks.insert(m(0, 8, 3), None)); // contains the first
        assert_eq!(marks.len(), 2);
        assert_eq!(
            marks.within(&Region::new_2d(0, 0, 16, 0, 8)),
            Some(m(0, 8, 3))
        );
        assert_eq!(
            marks.within(&Region::new_2d(0, 8, 4, 0, 8)),
            Some(m(8, 4, 2))
        );
        assert_eq!(marks.within(&Region::new_2d(0, 1, 4, 0, 8)), None);
        for i in 0..MAX_MARKS as u32 {
            marks.insert(m(100 + 2 * i, 1, 10 + i), None);
        }
        assert_eq!(marks.len(), MAX_MARKS);
        assert_eq!(
            marks.within(&Region::new_2d(0, 0, 16, 0, 8)),
            None,
            "evicted"
        );
    }

    #[test]
    fn delegating_marks_answer_writes_and_are_never_evicted() {
        let mut marks = Marks::default();
        let d = |row, task| Mark {
            delegates: true,
            ..m(row, 1, task)
        };
        for i in 0..MAX_MARKS as u32 {
            assert!(marks.insert(d(2 * i, 10 + i), None));
        }
        assert!(
            !marks.insert(d(1000, 99), None),
            "no delegating mark is evicted (whether its task completed or not)"
        );
        assert!(!marks.insert(m(1000, 1, 99), None));
        // The used mark makes room for its successor.
        assert!(marks.insert(d(0, 98), Some(d(0, 10))));
        assert_eq!(marks.within(&Region::new_2d(0, 0, 1, 0, 8)), Some(d(0, 98)));
        // A write over rows 4..8 intersects the marks of tasks 12, 13 (rows 4, 6) and covers them.
        let mut got = Vec::new();
        marks.war(&Region::new_2d(0, 4, 4, 0, 8), 200, |t| got.push(t));
        assert_eq!(got, vec![12, 13]);
        assert_eq!(marks.len(), MAX_MARKS - 2);
        // A partial overlap reports without dropping.
        got.clear();
        marks.war(&Region::new_2d(0, 8, 1, 0, 4), 200, |t| got.push(t));
        assert_eq!((got, marks.len()), (vec![14], MAX_MARKS - 2));
        // The covered marks made room.
        assert!(marks.insert(d(1000, 99), None));
        assert!(marks.insert(m(1002, 1, 100), None));
        // Full again: a plain mark makes room for the next, the oldest plain one going.
        assert!(marks.insert(m(1004, 1, 101), None));
        assert_eq!(marks.within(&Region::new_2d(0, 1002, 1, 0, 8)), None);
        assert_eq!(
            marks.within(&Region::new_2d(0, 1004, 1, 0, 8)),
            Some(m(1004, 1, 101))
        );
    }

    #[test]
    fn a_successor_takes_the_used_marks_place_and_writes_find_it_where_it_grew() {
        let d = |row, rows, task| Mark {
            delegates: true,
            ..m(row, rows, task)
        };
        let mut marks = Marks::default();
        assert!(marks.insert(m(100, 2, 1), None));
        assert!(marks.insert(d(0, 2, 2), None));
        // The prefix grows: rows 0..8 replace rows 0..2 (same place, still two marks).
        assert!(marks.insert(d(0, 8, 3), Some(d(0, 2, 2))));
        assert_eq!(marks.len(), 2);
        assert_eq!(
            marks.within(&Region::new_2d(0, 0, 8, 0, 8)),
            Some(d(0, 8, 3))
        );
        let mut got = Vec::new();
        marks.war(&Region::new_2d(0, 50, 1, 0, 8), 9, |t| got.push(t));
        assert!(got.is_empty(), "outside every delegating mark");
        marks.war(&Region::new_2d(0, 7, 1, 0, 8), 9, |t| got.push(t));
        assert_eq!(got, vec![3], "inside the grown mark only");
        // A plain successor of a delegating mark: the delegating count follows.
        assert!(marks.insert(m(0, 16, 4), Some(d(0, 8, 3))));
        got.clear();
        marks.war(&Region::new_2d(0, 7, 1, 0, 8), 9, |t| got.push(t));
        assert!(got.is_empty(), "no delegating mark left");
    }

    /// Every write meets every delegating mark its box intersects (the oracle: `intersects` of
    /// each mark, in the test), wherever the marks lie: marks recorded without a used mark (each
    /// one grows the box of delegating marks), some near the top of the coordinate range where a
    /// box's size would not fit in `u32` if it were computed wrongly, writes that intersect one
    /// mark without covering it (nothing is dropped), then writes that cover them.
    #[test]
    fn writes_meet_every_delegating_mark_wherever_it_lies() {
        let top = u32::MAX - 1;
        let rows = [(1 << 31) - (1 << 20), top, 1 << 31, top - 5, 7, 0, 1 << 20];
        let mut marks = Marks::default();
        assert!(marks.is_empty());
        let mut kept = Vec::new();
        for (i, &row) in rows.iter().enumerate() {
            let mark = Mark {
                region: Region::new_2d(0, row, 1, 0, 8),
                task: 10 + i as u32,
                seq: 10 + i as u64,
                delegates: true,
                record: (0, 0),
            };
            assert!(marks.insert(mark, None));
            kept.push(mark);
            assert!(!marks.is_empty());
            assert_eq!(marks.len(), kept.len());
            // Every mark so far answers a write of part of its box.
            for m in &kept {
                let write = Region::new_2d(0, m.region.start[0], 1, 2, 4);
                let mut got = Vec::new();
                marks.war(&write, 99, |t| got.push(t));
                let want: Vec<u32> = kept
                    .iter()
                    .filter(|k| k.region.intersects(&write))
                    .map(|k| k.task)
                    .collect();
                assert_eq!(got, want, "write at row {}", m.region.start[0]);
            }
        }
        // Whole-row writes cover the marks: each is reported once more, then dropped.
        for (i, m) in kept.iter().enumerate() {
            let mut got = Vec::new();
            marks.war(&m.region, 99, |t| got.push(t));
            assert_eq!(got, vec![m.task]);
            assert_eq!(marks.len(), kept.len() - i - 1);
        }
        assert!(marks.is_empty());
    }

    /// The box of two regions is the smallest containing both (computed here per dimension),
    /// also near the top of the coordinate range.
    #[test]
    fn union_is_the_smallest_box_containing_both() {
        let top = u32::MAX - 1;
        let boxes = [
            Region::new_2d(0, 0, 1, 0, 1),
            Region::new_2d(0, 5, 3, 9, 2),
            Region::new_2d(0, (1 << 31) - 7, 2, 1 << 30, 5),
            Region::new_2d(0, top, 1, top - 3, 4),
            Region::new(0, &[3, 4, 5], &[1, 2, 3]).unwrap(),
        ];
        for a in &boxes {
            for b in &boxes {
                let u = union(a, b);
                assert_eq!(u.rank, a.rank.max(b.rank));
                for d in 0..MAX_RANK {
                    let lo = a.start[d].min(b.start[d]);
                    let hi = (a.start[d] as u64 + a.size[d] as u64)
                        .max(b.start[d] as u64 + b.size[d] as u64);
                    assert_eq!((u.start[d], u.end(d)), (lo, hi), "{a:?} {b:?} dim {d}");
                }
            }
        }
    }

    #[test]
    fn cell_seqs_tell_whether_a_rectangle_was_written_since() {
        let mut c = CellSeqs::default();
        assert!(c.all_older((0, 100, 0, 5000), 1));
        c.set((3, 3, 2, 2), 5);
        c.set((7, 7, 2000, 2000), 9);
        assert!(c.all_older((0, 10, 0, 1), 6), "other columns");
        assert!(c.all_older((4, 10, 0, 5), 6), "other rows");
        assert!(!c.all_older((0, 3, 2, 2), 5));
        assert!(c.all_older((0, 3, 2, 2), 6));
        assert!(!c.all_older((0, 0, 1500, 3000), 9), "a far column");
        assert!(c.all_older((0, 0, 1500, 3000), 10));
        c.clear();
        assert!(c.all_older((0, 100, 0, 5000), 1));
        // Column 0: writes to rows 10, 11, 12, 13, 14 (seq 1..=5); the first is forgotten.
        for (i, row) in (10..15).enumerate() {
            c.set((row, row, 0, 1), i as u64 + 1);
        }
        assert!(c.all_older((0, 9, 0, 1), 2), "rows below every kept write");
        assert!(!c.all_older((0, 12, 0, 0), 3), "row 12 written at 3");
        assert!(c.all_older((0, 12, 0, 0), 4));
        assert!(
            !c.all_older((0, 9, 0, 0), 1),
            "the dropped write may have touched them"
        );
        assert!(c.all_older((0, 9, 0, 0), 2));
    }

    #[test]
    fn inner_cells_are_the_cells_wholly_inside_the_mark() {
        let read = Region::new_2d(0, 0, 100, 0, 64);
        // Side 16 x 32: rows 4..=35 cover cells 1..=2 (16..48) wholly, columns 0..64 cells 0..=1.
        let mark = Region::new_2d(0, 4, 44, 0, 64);
        assert_eq!(inner_cells([4, 5], &mark, &read), Some((1, 2, 0, 1)));
        assert_eq!(
            inner_cells([4, 5], &Region::new_2d(0, 4, 8, 0, 64), &read),
            None
        );
        let mut deeper = mark;
        deeper.rank = 3;
        deeper.size[2] = 2;
        assert_eq!(
            inner_cells([4, 5], &deeper, &read),
            None,
            "other dims differ"
        );
    }
}
