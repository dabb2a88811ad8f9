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

use crate::types::Region;

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
}

/// The marks of one tensor, oldest first.
#[derive(Clone, Debug, Default)]
pub struct Marks {
    list: Vec<Mark>,
}

impl Marks {
    /// The newest mark whose box lies inside `region`, if any.
    #[inline]
    pub fn within(&self, region: &Region) -> Option<Mark> {
        self.list
            .iter()
            .rev()
            .find(|m| region.covers(&m.region))
            .copied()
    }

    /// Records `mark`, dropping the marks whose boxes it contains (its promise implies theirs:
    /// it covers every write they cover, and more), evicting the oldest beyond [`MAX_MARKS`].
    pub fn insert(&mut self, mark: Mark) {
        self.list.retain(|m| !mark.region.covers(&m.region));
        if self.list.len() == MAX_MARKS {
            self.list.remove(0);
        }
        self.list.push(mark);
    }

    /// Forgets every mark.
    pub fn clear(&mut self) {
        self.list.clear();
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
        }
    }

    #[test]
    fn a_mark_replaces_the_marks_it_contains_and_the_oldest_is_evicted() {
        let mut marks = Marks::default();
        marks.insert(m(0, 4, 1));
        marks.insert(m(8, 4, 2));
        marks.insert(m(0, 8, 3)); // contains the first
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
            marks.insert(m(100 + 2 * i, 1, 10 + i));
        }
        assert_eq!(marks.len(), MAX_MARKS);
        assert_eq!(
            marks.within(&Region::new_2d(0, 0, 16, 0, 8)),
            None,
            "evicted"
        );
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
