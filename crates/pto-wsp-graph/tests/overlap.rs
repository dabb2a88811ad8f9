//! The overlap map driven directly, against brute-force oracles over richer boxes than
//! `tests/deps.rs` generates: several grids per tensor (the first box chooses the cell side),
//! cells past the dense table (sparse cells), a tensor id past the dense grid table, boxes of
//! more than `LARGE_CELLS` cells, boxes that share cells but not elements (a third dimension),
//! boxes of rank 1 to 4 on one tensor, boxes ending at the largest coordinates, and `clear`
//! between parts of a stream.
//!
//! Two oracles, neither looking at the map's cells:
//! - `OverlapMap::pairwise` (no coverage marks) must report, access by access, exactly what a
//!   plain list of records predicts: every earlier record whose box intersects the access's
//!   (write records for a read, all records for a write), of another task, with its kind; a
//!   write drops the records its box covers. Its counters follow from the same list.
//! - `OverlapMap::new` (with marks) must report only conflicting tasks or a mark's task (a later
//!   read of a box containing a box the earlier task read), and order every conflicting pair
//!   through the edges it reports.

use proptest::array::uniform4;
use proptest::prelude::*;
use pto_wsp_graph::tensor_map::{MapStats, OverlapMap, TensorMap};
use pto_wsp_graph::types::{Access, EdgeKind, Region, TaskId};
use std::collections::BTreeSet;

/// One step of a stream: a task's accesses, or `clear`.
#[derive(Clone, Debug)]
enum Step {
    Task(Vec<(Region, Access)>),
    Clear,
}

/// A tensor id: two dense ones and one past the dense grid table.
fn tensor() -> impl Strategy<Value = u32> {
    prop_oneof![Just(0u32), Just(1u32), Just(70_000u32)]
}

/// Where a tile grid starts: at the origin, or where its cells cross index 4096 (the dense
/// table's edge) in the first or the second dimension for cell sides of 4 to 16 rows and 8 to
/// 32 columns.
fn base() -> impl Strategy<Value = (u32, u32)> {
    prop_oneof![
        3 => Just((0u32, 0u32)),
        1 => Just((16_376, 0)),
        1 => Just((65_520, 0)),
        1 => Just((0, 32_752)),
        1 => Just((0, 131_056)),
    ]
}

fn tiles(t: u32, (br, bc): (u32, u32), row: u32, rows: u32, col: u32, cols: u32) -> Region {
    Region::new_2d(t, br + row * 4, rows * 4, bc + col * 8, cols * 8)
}

fn region() -> impl Strategy<Value = Region> {
    prop_oneof![
        // 4 x 8 tiles, prefixes of a tile column, rows of tiles, boxes of tiles
        4 => (tensor(), base(), 0u32..6, 0u32..4)
            .prop_map(|(t, b, r, c)| tiles(t, b, r, 1, c, 1)),
        2 => (tensor(), base(), 0u32..6, 0u32..4)
            .prop_map(|(t, b, r, c)| tiles(t, b, 0, r + 1, c, 1)),
        1 => (tensor(), base(), 0u32..6).prop_map(|(t, b, r)| tiles(t, b, r, 1, 0, 4)),
        1 => (tensor(), base(), 0u32..6, 1u32..4, 0u32..4, 1u32..3)
            .prop_map(|(t, b, r, n, c, m)| tiles(t, b, r, n, c, m)),
        // unaligned boxes
        1 => (tensor(), 0u32..30, 1u32..12, 0u32..36, 1u32..12)
            .prop_map(|(t, r, n, c, m)| Region::new_2d(t, r, n, c, m)),
        // single elements and boxes of up to 40,000 of them (more than LARGE_CELLS cells of the
        // grid a first single element chooses)
        1 => (0u32..200, 0u32..200).prop_map(|(r, c)| Region::new_2d(2, r, 1, c, 1)),
        1 => (0u32..64, 1u32..200, 0u32..64, 1u32..200)
            .prop_map(|(r, n, c, m)| Region::new_2d(2, r, n, c, m)),
        // three dimensions: boxes in one cell of the first two that miss in the third
        2 => (0u32..12, 1u32..5, 0u32..12, 1u32..5, 0u32..3, 1u32..3).prop_map(
            |(r, n, c, m, z, k)| {
                let (s, e) = ([r, c, z].map(i64::from), [n, m, k].map(i64::from));
                Region::new(3, &s, &e).unwrap()
            }
        ),
        // rank 1 to 4 on one tensor (the dimensions past the rank are start 0, size 1, so boxes
        // of different ranks meet), and boxes ending at the largest coordinates
        1 => (1usize..=4, uniform4(0i64..6), uniform4(1i64..4)).prop_map(|(rank, s, z)| {
            Region::new(4, &s[..rank], &z[..rank]).unwrap()
        }),
        1 => (0u32..6, 1u32..4, 0u32..6, 1u32..4).prop_map(|(r, n, c, m)| {
            Region::new_2d(5, u32::MAX - 9 + r, n, u32::MAX - 9 + c, m)
        }),
    ]
}

fn access() -> impl Strategy<Value = Access> {
    prop_oneof![Just(Access::In), Just(Access::Out), Just(Access::InOut)]
}

fn stream() -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        30 => prop::collection::vec((region(), access()), 1..5).prop_map(Step::Task),
        1 => Just(Step::Clear),
    ];
    prop::collection::vec(step, 1..140)
}

/// One access record of the oracle.
#[derive(Clone, Copy, Debug)]
struct Rec {
    region: Region,
    task: u32,
    write: bool,
}

/// The records of the accesses so far, minus those a later write covered.
#[derive(Default)]
struct Oracle {
    recs: Vec<Rec>,
    hits: u64,
    misses: u64,
}

impl Oracle {
    /// What `task`'s access must report: (predecessor, kind) pairs.
    fn access(&mut self, task: u32, region: Region, access: Access) -> BTreeSet<(u32, u8)> {
        let (reads, writes) = (access.reads(), access.writes());
        let mut want = BTreeSet::new();
        let mut hit = false;
        for r in &self.recs {
            if r.region.intersects(&region) && (writes || r.write) {
                hit = true;
                let kind = match (r.write, reads) {
                    (true, true) => EdgeKind::Raw,
                    (true, false) => EdgeKind::Waw,
                    (false, _) => EdgeKind::War,
                };
                if r.task != task {
                    want.insert((r.task, kind_code(kind)));
                }
            }
        }
        if writes {
            self.recs.retain(|r| !region.covers(&r.region));
        }
        self.recs.push(Rec {
            region,
            task,
            write: writes,
        });
        if hit {
            self.hits += 1;
        } else {
            self.misses += 1;
        }
        want
    }

    /// Bounds on the map's live count: every live record separate (upper), and reads of one
    /// box joined into one (lower: reads of one box are all a map may join).
    fn live_bounds(&self) -> (u64, u64) {
        let writes = self.recs.iter().filter(|r| r.write).count();
        let read_boxes: BTreeSet<_> = self
            .recs
            .iter()
            .filter(|r| !r.write)
            .map(|r| region_key(&r.region))
            .collect();
        ((writes + read_boxes.len()) as u64, self.recs.len() as u64)
    }
}

fn kind_code(k: EdgeKind) -> u8 {
    match k {
        EdgeKind::Raw => 0,
        EdgeKind::Waw => 1,
        EdgeKind::War => 2,
        EdgeKind::Explicit => 3,
    }
}

fn region_key(r: &Region) -> (u32, u32, [u32; 4], [u32; 4]) {
    (r.tensor, r.rank, r.start, r.size)
}

/// Checks the map's counters against the oracle's after an access; `before` is the map's
/// counters before it.
fn check_stats(s: MapStats, before: MapStats, o: &Oracle, at: &str) -> Result<(), TestCaseError> {
    prop_assert_eq!(
        (s.hits, s.misses),
        (o.hits, o.misses),
        "hits, misses {}",
        at
    );
    let (lo, hi) = o.live_bounds();
    prop_assert!(
        lo <= s.live && s.live <= hi,
        "live {} not in {}..={} {}",
        s.live,
        lo,
        hi,
        at
    );
    // Within one access the live count rises by at most one (its own record) before covered
    // records go.
    prop_assert!(
        s.high_water >= s.live.max(before.high_water)
            && s.high_water <= before.high_water.max(before.live + 1),
        "high water {} after {:?}, live {} {}",
        s.high_water,
        before,
        s.live,
        at
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(pto_wsp_ir::soak::cases(128)))]

    /// Without marks the map reports, access by access, exactly the oracle's predecessors and
    /// kinds, and counts a hit exactly when the oracle meets a record.
    #[test]
    fn the_pairwise_map_reports_every_intersecting_record_and_nothing_else(steps in stream()) {
        check_pairwise(&steps)?;
    }

    /// With marks: every reported predecessor conflicts with the task or is a mark's (the task
    /// reads a box containing a box the predecessor read), none is from before a `clear`, and
    /// every conflicting pair since the last `clear` is ordered through the reported edges.
    #[test]
    fn the_map_with_marks_orders_every_conflicting_pair(steps in stream()) {
        check_marks(&steps)?;
    }
}

/// Boxes whose cells lie past 2^31 in both dimensions of a grid of one-element cells (the first
/// box chooses it), on both maps: found as near the origin, and without memory in proportion to
/// the coordinates (such a cell is hashed, not indexed, and a delegating mark there is not
/// tracked per column of cells).
#[test]
fn boxes_far_from_the_origin_are_found_like_near_ones() {
    const X: u32 = 4_000_000_000;
    let at = |row: u32, rows: u32, col: u32| Region::new_2d(5, row, rows, col, 1);
    let (i, o, io) = (Access::In, Access::Out, Access::InOut);
    let mut steps = vec![Step::Task(vec![(at(0, 1, 0), o)])];
    for r in 0..4 {
        steps.push(Step::Task(vec![(at(X + r, 1, X), o)]));
    }
    steps.extend([
        // A mark of two cells, then a read of four that delegates the first two to it.
        Step::Task(vec![(at(X, 2, X), i)]),
        Step::Task(vec![(at(X, 4, X), i)]),
        // A write under the delegating mark, then readers of it.
        Step::Task(vec![(at(X + 1, 1, X), o)]),
        Step::Task(vec![(at(X, 1, X), i), (at(X + 1, 1, X), i)]),
        Step::Task(vec![(at(X, 1, 0), io), (at(X + 2, 2, X), io)]),
        Step::Task(vec![(at(X, 4, X), i), (at(X, 1, 0), i)]),
        Step::Task(vec![(at(X - 1, 6, X), o)]),
    ]);
    check_pairwise(&steps).unwrap();
    check_marks(&steps).unwrap();
}

/// Runs `steps` on `OverlapMap::pairwise`, checking each access against [`Oracle`].
fn check_pairwise(steps: &[Step]) -> Result<(), TestCaseError> {
    let mut m = OverlapMap::pairwise();
    let mut o = Oracle::default();
    for (t, step) in steps.iter().enumerate() {
        let Step::Task(accesses) = step else {
            m.clear();
            o = Oracle::default();
            prop_assert_eq!(m.stats(), MapStats::default());
            continue;
        };
        for (i, &(r, a)) in accesses.iter().enumerate() {
            let before = m.stats();
            let mut got = BTreeSet::new();
            m.access(TaskId(t as u32), &r, a, &mut |p: TaskId, k| {
                got.insert((p.0, kind_code(k)));
            });
            let want = o.access(t as u32, r, a);
            let at = format!("task {t} access {i} ({r:?}, {a:?})");
            prop_assert_eq!(got, want, "{}", at);
            check_stats(m.stats(), before, &o, &at)?;
        }
    }
    Ok(())
}

/// Runs `steps` on `OverlapMap::new`, checking the edges against the conflicts (see
/// `the_map_with_marks_orders_every_conflicting_pair`).
fn check_marks(steps: &[Step]) -> Result<(), TestCaseError> {
    let mut m = OverlapMap::new();
    let mut preds: Vec<Vec<usize>> = Vec::new();
    let mut start = 0; // first task since the last clear
    for (t, step) in steps.iter().enumerate() {
        let mut ps = BTreeSet::new();
        match step {
            Step::Clear => {
                m.clear();
                start = t + 1;
            }
            Step::Task(accesses) => {
                for &(r, a) in accesses {
                    m.access(TaskId(t as u32), &r, a, &mut |p: TaskId, _| {
                        ps.insert(p.0 as usize);
                    });
                }
            }
        }
        for &p in &ps {
            prop_assert!(
                p >= start && p < t && (conflict(&steps[p], step) || mark_edge(&steps[p], step)),
                "edge {} -> {} without conflict or mark (last clear before {})",
                p,
                t,
                start
            );
        }
        preds.push(ps.into_iter().collect());
    }
    // One lookup per access since the last clear.
    let since: usize = steps[start..].iter().map(|s| regions(s).len()).sum();
    let s = m.stats();
    prop_assert_eq!(s.hits + s.misses, since as u64);
    let reach = closure(&preds);
    for j in 0..steps.len() {
        let first = steps[..j]
            .iter()
            .rposition(|s| matches!(s, Step::Clear))
            .map_or(0, |c| c + 1);
        for p in first..j {
            if conflict(&steps[p], &steps[j]) {
                prop_assert!(
                    reach[j].contains(&p),
                    "conflicting task {} does not reach {}",
                    p,
                    j
                );
            }
        }
    }
    Ok(())
}

fn regions(s: &Step) -> &[(Region, Access)] {
    match s {
        Step::Task(a) => a,
        Step::Clear => &[],
    }
}

/// Whether two tasks touch a common element and one of them writes it.
fn conflict(a: &Step, b: &Step) -> bool {
    regions(a).iter().any(|&(ra, aa)| {
        regions(b)
            .iter()
            .any(|&(rb, ab)| ra.intersects(&rb) && (aa.writes() || ab.writes()))
    })
}

/// Whether `b` (later) may wait for `a` through a coverage mark: `b` reads a box containing a
/// box `a` read.
fn mark_edge(a: &Step, b: &Step) -> bool {
    regions(a).iter().any(|&(ra, aa)| {
        aa == Access::In
            && regions(b)
                .iter()
                .any(|&(rb, ab)| ab == Access::In && rb.covers(&ra))
    })
}

/// `reach[j]`: every task with a path of edges to `j`.
fn closure(preds: &[Vec<usize>]) -> Vec<BTreeSet<usize>> {
    let mut reach: Vec<BTreeSet<usize>> = Vec::with_capacity(preds.len());
    for ps in preds {
        let mut r = BTreeSet::new();
        for &p in ps {
            r.insert(p);
            r.extend(reach[p].iter().copied());
        }
        reach.push(r);
    }
    reach
}

/// A step of a stream worked by hand: (box, access, edges, probes so far, hit).
type WorkedStep = (Region, Access, &'static [(u32, EdgeKind)], u64, bool);

/// Replays `stream` into `m` as tasks 0, 1, …: each access must report exactly its edges, and
/// the probe, hit and miss counters after it must be the stream's.
fn replay_worked(m: &mut OverlapMap, stream: &[WorkedStep]) {
    let mut hits = 0;
    for (t, &(r, a, want, probes, hit)) in stream.iter().enumerate() {
        let mut got = Vec::new();
        m.access(TaskId(t as u32), &r, a, &mut |p: TaskId, k| {
            got.push((p.0, k))
        });
        got.sort_by_key(|&(p, k)| (p, kind_code(k)));
        assert_eq!(got, want, "task {t}");
        hits += hit as u64;
        let s = m.stats();
        assert_eq!(
            (s.probes, s.hits, s.misses),
            (probes, hits, t as u64 + 1 - hits),
            "task {t}"
        );
    }
}

/// Counters and edges worked out by hand, access by access, on both maps (no read covers more
/// than one cell, so no mark is made). The first box, 4 x 8, makes the cells 4 rows by 8
/// columns; a probe is a record met in a cell that does not intersect the access. Each kind of
/// meeting that can miss is here: a cell's own write met by a read of one cell and by a write of
/// two cells, its own reads met by a write of one cell and of two, a write record met by a read
/// of one cell and by a write, a read record met by a write.
#[test]
fn counters_and_edges_of_a_hand_worked_stream() {
    let b = |row, rows, col, cols| Region::new_2d(0, row, rows, col, cols);
    let (i, o) = (Access::In, Access::Out);
    const RAW: EdgeKind = EdgeKind::Raw;
    const WAW: EdgeKind = EdgeKind::Waw;
    const WAR: EdgeKind = EdgeKind::War;
    let stream: [WorkedStep; 17] = [
        (b(0, 4, 0, 8), o, &[], 0, false),
        // Rows 0-1: does not cover the cell's own write (task 0), so gets a record.
        (b(0, 2, 0, 8), o, &[(0, WAW)], 0, true),
        // Rows 2-3: misses task 1's record; becomes the cell's own reads.
        (b(2, 2, 0, 8), i, &[(0, RAW)], 1, true),
        // Rows 0-1: another box than the own reads, so a read record.
        (b(0, 2, 0, 8), i, &[(0, RAW), (1, RAW)], 1, true),
        // Rows 2-3 written: misses task 1's write record and task 3's read record.
        (b(2, 2, 0, 8), o, &[(0, WAW), (2, WAR)], 3, true),
        // The next cell down: rows 4-5 written, 6-7 read (missing the own write).
        (b(4, 2, 0, 8), o, &[], 3, false),
        (b(6, 2, 0, 8), i, &[], 4, false),
        // Rows 4-5 again: the own write is covered, the own reads missed.
        (b(4, 2, 0, 8), o, &[(5, WAW)], 5, true),
        // Two cells: covers the own write and reads of the first.
        (b(4, 4, 0, 16), o, &[(6, WAR), (7, WAW)], 5, true),
        // The third row of cells: a write of columns 0-3 of rows 8-9, a read of rows 10-11
        // (missing it), then a write of two cells that misses both.
        (b(8, 2, 0, 4), o, &[], 5, false),
        (b(10, 2, 0, 4), i, &[], 6, false),
        (b(8, 4, 4, 8), o, &[], 8, false),
        // The fourth row of cells: its own write (task 12), then write records of rows 12-13
        // and 14-15; a write of rows 12-13 drops the first and keeps the second (its
        // reference moves to the front of the list, which is cut to one), so the read of rows
        // 12-13 after it misses task 14's record once.
        (b(12, 4, 0, 8), o, &[], 8, false),
        (b(12, 2, 0, 8), o, &[(12, WAW)], 8, true),
        (b(14, 2, 0, 8), o, &[(12, WAW)], 9, true),
        (b(12, 2, 0, 8), o, &[(12, WAW), (13, WAW)], 10, true),
        (b(12, 2, 0, 8), i, &[(12, RAW), (15, RAW)], 11, true),
    ];
    for mut m in [OverlapMap::pairwise(), OverlapMap::new()] {
        replay_worked(&mut m, &stream);
        // Live: the write records of tasks 1, 4, 8, 11, 13 (until task 15), 14 and 15, task
        // 3's read record, the own writes of tasks 0, 9 and 12, the own reads of tasks 10 and
        // 16; at most one more within an access.
        let s = m.stats();
        assert_eq!((s.live, s.high_water), (12, 12));
    }
}

/// Readers of one box that completed are pruned to a count as their list grows, and the next
/// write still reports every reader: each live one by id, the pruned ones as
/// [`TaskId::FORGOTTEN`]. For a tile (one cell: the cell's own reads) and for a box of two
/// cells (its readers join the first one's record through its mark); tasks retire five behind.
#[test]
fn completed_readers_of_one_box_are_pruned_to_a_count_the_next_write_reports() {
    for r in [Region::new_2d(0, 0, 4, 0, 8), Region::new_2d(0, 0, 8, 0, 8)] {
        let mut m = OverlapMap::new();
        // The first box makes the cells 4 x 8: the second box is two cells.
        m.access(
            TaskId(0),
            &Region::new_2d(0, 0, 4, 0, 8),
            Access::Out,
            &mut |_, _| {},
        );
        m.access(TaskId(1), &r, Access::Out, &mut |_, _| {});
        for t in 2..=61u32 {
            m.retire_before(TaskId(t.saturating_sub(5)));
            m.access(TaskId(t), &r, Access::In, &mut |_, _| {});
        }
        let (mut ids, mut forgotten) = (Vec::new(), 0);
        m.access(TaskId(62), &r, Access::Out, &mut |p: TaskId, _| {
            if p == TaskId::FORGOTTEN {
                forgotten += 1;
            } else {
                ids.push(p.0);
            }
        });
        ids.sort_unstable();
        ids.dedup();
        let readers: Vec<u32> = ids.iter().copied().filter(|&p| p >= 2).collect();
        assert!(forgotten > 0, "{r:?}: nothing pruned");
        assert_eq!(
            readers.len() + forgotten,
            60,
            "{r:?}: {ids:?} and {forgotten}"
        );
        // The writer, and every reader not completed (56 to 61) by id.
        assert!(ids.contains(&1), "{r:?}: {ids:?}");
        assert!((56..=61).all(|t| ids.contains(&t)), "{r:?}: {ids:?}");
    }
}

/// A reader that delegates the cells inside the mark it used is not listed in them, even in
/// cells it visits (one written since the mark): a later write of such a cell waits for the
/// cell's writer, the mark's reader listed there and the newest delegating reader of the chain,
/// not for the delegating reader it replaced (which that newest reader follows). Worked by hand.
#[test]
fn a_delegating_reader_is_not_listed_in_the_cells_inside_its_mark() {
    let rows = |row: u32, rows: u32| Region::new_2d(0, row, rows, 0, 8);
    let mut m = OverlapMap::new();
    let mut run = |t: u32, r: Region, a: Access| {
        let mut got = Vec::new();
        m.access(TaskId(t), &r, a, &mut |p: TaskId, _| got.push(p.0));
        got.sort_unstable();
        got.dedup();
        got
    };
    // Four tiles of 4 rows (the cells), written by tasks 0-3.
    for t in 0..4 {
        assert_eq!(run(t, rows(4 * t, 4), Access::Out), Vec::<u32>::new());
    }
    // Task 4 reads tiles 0-1 (a mark, listed in both cells); task 5 rewrites tile 1.
    assert_eq!(run(4, rows(0, 8), Access::In), vec![0, 1]);
    assert_eq!(run(5, rows(4, 4), Access::Out), vec![1, 4]);
    // Task 6 reads tiles 0-3 through task 4's mark: visits tile 1 (written since), delegates
    // tiles 0-1 to the mark. Task 7 reads tiles 0-5 through task 6's mark and takes its place.
    assert_eq!(run(6, rows(0, 16), Access::In), vec![2, 3, 4, 5]);
    assert_eq!(run(7, rows(0, 24), Access::In), vec![6]);
    // Tile 0: its writer, task 4 (listed there) and task 7 (the newest delegating mark).
    assert_eq!(run(8, rows(0, 4), Access::Out), vec![0, 4, 7]);
    // Tile 1: the same with its second writer.
    assert_eq!(run(9, rows(4, 4), Access::Out), vec![4, 5, 7]);
}

/// The tensor's large lists, worked by hand on both maps: a first single element makes the
/// cells one element, so a box of 100 x 100 elements has more than `LARGE_CELLS` cells and goes
/// on the large list, while a box of 64 x 64 has exactly `LARGE_CELLS` and is listed in its
/// cells only. A covering write compacts the large list; every later read of one element scans
/// it, meeting each live record once (each predecessor is reported once, by the sink's calls,
/// not deduplicated here).
#[test]
fn large_lists_hold_each_live_record_once() {
    let b = |row, rows, col, cols| Region::new_2d(7, row, rows, col, cols);
    let (i, o) = (Access::In, Access::Out);
    const RAW: EdgeKind = EdgeKind::Raw;
    const WAW: EdgeKind = EdgeKind::Waw;
    let stream: [WorkedStep; 9] = [
        // One element: the cell side.
        (b(0, 1, 0, 1), o, &[], 0, false),
        // A (large) covers it; B (large) misses A; C (large, A's box) drops A and misses B.
        (b(0, 100, 0, 100), o, &[(0, WAW)], 0, true),
        (b(200, 100, 0, 100), o, &[], 1, false),
        (b(0, 100, 0, 100), o, &[(1, WAW)], 2, true),
        // Reads of one element: outside both (two probes), inside B (one probe, for C).
        (b(350, 1, 50, 1), i, &[], 4, false),
        (b(250, 1, 50, 1), i, &[(2, RAW)], 5, true),
        // Exactly LARGE_CELLS cells, away from A, B and C (which it misses): listed in its
        // cells, not on the large list, so the reads of one element meet B and C only there.
        (b(400, 64, 200, 64), o, &[], 7, false),
        (b(350, 1, 50, 1), i, &[], 9, false),
        (b(410, 1, 210, 1), i, &[(6, RAW)], 11, true),
    ];
    for mut m in [OverlapMap::pairwise(), OverlapMap::new()] {
        replay_worked(&mut m, &stream);
    }
}
