//! Dependency inference against brute-force oracles.
//!
//! The oracle: tasks `i < j` conflict iff some region of `i` and some region of `j` name the same
//! tensor, intersect (overlap modes) or are the identical box (exact mode), and at least one of
//! the two accesses writes. In exact mode the inferred graph must order exactly the pairs the
//! oracle's graph orders (equal transitive closures), with no edge between non-conflicting
//! tasks. In overlap modes every conflicting earlier task must reach its successor through the
//! inferred graph, and an edge between non-conflicting tasks is only a coverage mark's (the
//! successor reads a box containing a box the predecessor read: `tensor_map::marks`). Random
//! topological executions with several tasks in flight must never run two conflicting tasks at
//! once.

use proptest::prelude::*;
use pto_wsp_graph::builder::{
    BuildError, BuildStats, CollectEdges, EdgeSink, ExactMap, GraphBuilder,
};
use pto_wsp_graph::storage::TaskGraphStorage;
use pto_wsp_graph::tensor_map::{
    AnyTensorMap, DynamicExactMap, FixedExactMap, OverlapMap, TensorMap,
};
use pto_wsp_graph::types::{Access, ExecDomain, ExecPool, Region, TaskId, TaskIo};
use pto_wsp_ir::DepsMode;

/// One generated task: regions with accesses, and explicit dependencies (as offsets back).
#[derive(Clone, Debug)]
struct GenTask {
    regions: Vec<(Region, Access)>,
    explicit: Vec<u32>,
}

fn region_strategy() -> impl Strategy<Value = Region> {
    // Three tensors; boxes on a small grid so identical, nested and partially overlapping boxes
    // all occur often.
    (0u32..3, 0u32..3, 1u32..3, 0u32..3, 1u32..3)
        .prop_map(|(t, r, rs, c, cs)| Region::new_2d(t, r * 2, rs * 2, c * 2, cs * 2))
}

fn access_strategy() -> impl Strategy<Value = Access> {
    prop_oneof![Just(Access::In), Just(Access::Out), Just(Access::InOut)]
}

fn task_strategy() -> impl Strategy<Value = GenTask> {
    (
        prop::collection::vec((region_strategy(), access_strategy()), 1..4),
        prop::collection::vec(1u32..8, 0..2),
    )
        .prop_map(|(regions, explicit)| GenTask { regions, explicit })
}

fn stream_strategy() -> impl Strategy<Value = Vec<GenTask>> {
    prop::collection::vec(task_strategy(), 1..200)
}

fn explicit_deps(tasks: &[GenTask], j: usize) -> Vec<usize> {
    tasks[j]
        .explicit
        .iter()
        .filter(|&&d| d as usize <= j && d > 0)
        .map(|&d| j - d as usize)
        .collect()
}

/// Builds the stream with `builder`, calling `before_submit(j, builder)` before each submit.
fn build_with<M: TensorMap>(
    tasks: &[GenTask],
    mut b: GraphBuilder<M>,
    mut before_submit: impl FnMut(usize, &mut GraphBuilder<M>),
) -> TaskGraphStorage {
    for (j, t) in tasks.iter().enumerate() {
        let id = b.alloc_task(j as u32 % 5, ExecDomain::HostCpu, ExecPool::Any, 0, None);
        assert_eq!(id, TaskId(j as u32));
        for &(r, a) in &t.regions {
            b.add_access(r, a);
        }
        for d in explicit_deps(tasks, j) {
            b.add_explicit_dep(TaskId(d as u32)).unwrap();
        }
        before_submit(j, &mut b);
        b.submit().unwrap();
    }
    b.finish()
}

fn build(tasks: &[GenTask], mode: DepsMode, exact: ExactMap) -> TaskGraphStorage {
    build_with(tasks, GraphBuilder::with_exact_map(mode, exact), |_, _| {})
}

/// Whether tasks `i` and `j` conflict under the mode's notion of "same data".
fn conflict(a: &GenTask, b: &GenTask, overlap: bool) -> bool {
    a.regions.iter().any(|&(ra, aa)| {
        b.regions.iter().any(|&(rb, ab)| {
            let same = if overlap {
                ra.intersects(&rb)
            } else {
                ra == rb
            };
            same && (aa.writes() || ab.writes())
        })
    })
}

/// Whether `b` (later) may wait for `a` through a coverage mark: `b` reads a box containing a box
/// `a` read.
fn mark_edge(a: &GenTask, b: &GenTask) -> bool {
    a.regions.iter().any(|&(ra, aa)| {
        aa == Access::In
            && b.regions
                .iter()
                .any(|&(rb, ab)| ab == Access::In && rb.covers(&ra))
    })
}

/// The overlap modes' promise, checked against the oracle's predecessors `want`: every edge
/// joins conflicting tasks, is explicit, or is a mark's; every oracle pair is ordered through the
/// graph (the successor is reachable from the predecessor).
fn check_overlap_edges(tasks: &[GenTask], got: &[Vec<usize>], want: &[Vec<usize>]) {
    for (j, ps) in got.iter().enumerate() {
        for &p in ps {
            assert!(
                want[j].binary_search(&p).is_ok() || mark_edge(&tasks[p], &tasks[j]),
                "edge {p} -> {j} without conflict or mark"
            );
        }
    }
    let reach = closure(tasks.len(), got);
    for (j, ps) in want.iter().enumerate() {
        for &p in ps {
            assert!(
                reach[j][p / 64] >> (p % 64) & 1 == 1,
                "conflicting task {p} does not reach {j}"
            );
        }
    }
}

/// `reach[j]` = bitset of tasks that reach `j`, for a graph whose edges go forward.
type Bits = Vec<u64>;

fn closure(n: usize, preds: &[Vec<usize>]) -> Vec<Bits> {
    let words = n.div_ceil(64);
    let mut reach: Vec<Bits> = Vec::with_capacity(n);
    for (j, ps) in preds.iter().enumerate().take(n) {
        let mut r = vec![0u64; words];
        for &p in ps {
            assert!(p < j, "edge {p} -> {j} goes backwards");
            for (rw, pw) in r.iter_mut().zip(&reach[p]) {
                *rw |= pw;
            }
            r[p / 64] |= 1 << (p % 64);
        }
        reach.push(r);
    }
    reach
}

fn graph_preds(g: &TaskGraphStorage) -> Vec<Vec<usize>> {
    let mut preds = vec![Vec::new(); g.len()];
    for (p, s) in g.edges() {
        preds[s.index()].push(p.index());
    }
    preds
}

/// Each task's predecessors, sorted, from a sink's flat list and per-task ends.
fn sorted_preds(preds: &[u32], ends: &[u32]) -> Vec<Vec<usize>> {
    let mut begin = 0;
    ends.iter()
        .map(|&end| {
            let mut p: Vec<usize> = preds[begin as usize..end as usize]
                .iter()
                .map(|&p| p as usize)
                .collect();
            p.sort_unstable();
            begin = end;
            p
        })
        .collect()
}

/// Oracle predecessors: every conflicting earlier task plus explicit deps (or only the explicit
/// deps when `inference` is off).
fn oracle_preds(tasks: &[GenTask], inference: Option<bool>) -> Vec<Vec<usize>> {
    (0..tasks.len())
        .map(|j| {
            let mut p: Vec<usize> = match inference {
                Some(overlap) => (0..j)
                    .filter(|&i| conflict(&tasks[i], &tasks[j], overlap))
                    .collect(),
                None => Vec::new(),
            };
            p.extend(explicit_deps(tasks, j));
            p.sort_unstable();
            p.dedup();
            p
        })
        .collect()
}

/// Structural checks every built graph must pass: CSR consistent, no duplicates, forward edges,
/// fan-in equal to the number of predecessors.
fn check_storage(g: &TaskGraphStorage) {
    let preds = graph_preds(g);
    for (i, t) in g.tasks.iter().enumerate() {
        assert_eq!(t.id, TaskId(i as u32));
        let succ = g.successors(t.id);
        assert!(
            succ.windows(2).all(|w| w[0] < w[1]),
            "fan-out sorted, no dup"
        );
        assert!(succ.iter().all(|s| s.0 > t.id.0));
        assert_eq!(t.fanin as usize, preds[i].len());
    }
}

fn check_mode(tasks: &[GenTask], mode: DepsMode, exact: ExactMap) -> TaskGraphStorage {
    let g = build(tasks, mode, exact);
    check_storage(&g);
    let inference = match mode {
        DepsMode::Exact => Some(false),
        DepsMode::Overlap | DepsMode::Hybrid => Some(true),
        DepsMode::Explicit => None,
    };
    let want = oracle_preds(tasks, inference);
    let got = graph_preds(&g);
    if inference.is_none() {
        for (g, w) in got.iter().zip(&want) {
            let mut g = g.clone();
            g.sort_unstable();
            assert_eq!(&g, w, "explicit mode: edges are exactly the explicit ones");
        }
    } else if inference == Some(true) {
        check_overlap_edges(tasks, &got, &want);
    } else {
        // Every edge joins conflicting tasks (or was asked for).
        for (j, ps) in got.iter().enumerate() {
            for p in ps {
                assert!(
                    want[j].binary_search(p).is_ok(),
                    "{mode:?}: edge {p} -> {j} without conflict"
                );
            }
        }
        assert_eq!(
            closure(tasks.len(), &got),
            closure(tasks.len(), &want),
            "{mode:?}: reachability"
        );
    }
    g
}

/// Runs the graph in a random topological order with at most `k` tasks in flight, asserting
/// that no two conflicting tasks are ever in flight together.
fn random_execution(g: &TaskGraphStorage, tasks: &[GenTask], overlap: bool, k: usize, seed: u64) {
    let mut rng = seed | 1;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut remaining: Vec<u32> = g.tasks.iter().map(|t| t.fanin).collect();
    let mut ready: Vec<usize> = (0..g.len()).filter(|&i| remaining[i] == 0).collect();
    let mut in_flight: Vec<usize> = Vec::new();
    let mut done = 0;
    while done < g.len() {
        let start =
            !ready.is_empty() && in_flight.len() < k && (in_flight.is_empty() || next() % 2 == 0);
        if start {
            let t = ready.swap_remove(next() as usize % ready.len());
            for &o in &in_flight {
                assert!(
                    !conflict(&tasks[o], &tasks[t], overlap),
                    "conflicting tasks {o} and {t} in flight together"
                );
            }
            in_flight.push(t);
        } else {
            assert!(
                !in_flight.is_empty(),
                "deadlock: nothing ready, nothing running"
            );
            let t = in_flight.swap_remove(next() as usize % in_flight.len());
            done += 1;
            for s in g.successors(TaskId(t as u32)) {
                remaining[s.index()] -= 1;
                if remaining[s.index()] == 0 {
                    ready.push(s.index());
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: pto_wsp_ir::soak::cases(48), ..ProptestConfig::default() })]

    #[test]
    fn overlap_and_hybrid_match_the_oracle(tasks in stream_strategy(), seed: u64) {
        for mode in [DepsMode::Overlap, DepsMode::Hybrid] {
            let g = check_mode(&tasks, mode, ExactMap::Dynamic);
            random_execution(&g, &tasks, true, 4, seed);
        }
    }

    #[test]
    fn exact_matches_the_exact_oracle_and_maps_agree(tasks in stream_strategy(), seed: u64) {
        let dynamic = check_mode(&tasks, DepsMode::Exact, ExactMap::Dynamic);
        let fixed = check_mode(&tasks, DepsMode::Exact, ExactMap::Fixed(1024));
        prop_assert_eq!(&dynamic, &fixed);
        // A map barely large enough for the 108 possible keys (plus a task's worst case) agrees.
        let tight = build(&tasks, DepsMode::Exact, ExactMap::Fixed(108 + 3));
        prop_assert_eq!(&dynamic, &tight);
        // The growable table, from one key up: it doubles many times along the way.
        let grown = build_with(
            &tasks,
            GraphBuilder::with_map(AnyTensorMap::Fixed(FixedExactMap::growable(1)), CollectEdges::default()),
            |_, _| {},
        );
        prop_assert_eq!(&dynamic, &grown);
        prop_assert_eq!(&dynamic, &build(&tasks, DepsMode::Exact, ExactMap::Growable));
        random_execution(&dynamic, &tasks, false, 4, seed);
    }

    #[test]
    fn explicit_mode_has_only_explicit_edges(tasks in stream_strategy()) {
        check_mode(&tasks, DepsMode::Explicit, ExactMap::Dynamic);
    }

    #[test]
    fn retiring_completed_tasks_keeps_edges_among_live_tasks(
        tasks in stream_strategy(),
        retire in prop::collection::vec((0usize..200, 0usize..20), 0..8),
    ) {
        for (mode, exact) in [
            (DepsMode::Exact, ExactMap::Fixed(1024)),
            // A crowded table: retiring deletes keys from the middle of long probe runs.
            (DepsMode::Exact, ExactMap::Fixed(108 + 3)),
            (DepsMode::Exact, ExactMap::Dynamic),
            (DepsMode::Exact, ExactMap::Growable),
            (DepsMode::Overlap, ExactMap::Dynamic),
        ] {
            let full = build(&tasks, mode, exact);
            let b = match exact {
                // From one key up, growing while it retires.
                ExactMap::Growable => GraphBuilder::with_map(
                    AnyTensorMap::Fixed(FixedExactMap::growable(1)),
                    CollectEdges::default(),
                ),
                _ => GraphBuilder::with_exact_map(mode, exact),
            };
            // Before submitting task `at`, tasks older than `at - lag` are complete.
            let mut oldest = vec![0usize; tasks.len()];
            let mut cur = 0usize;
            let mut points: Vec<(usize, usize)> = retire.clone();
            points.sort_unstable();
            let windowed = build_with(&tasks, b, |j, b| {
                for &(at, lag) in points.iter().filter(|&&(at, _)| at == j) {
                    cur = cur.max(at.saturating_sub(lag));
                    b.retire_before(TaskId(cur as u32));
                }
                oldest[j] = cur;
            });
            let (full_p, win_p) = (graph_preds(&full), graph_preds(&windowed));
            for j in 0..tasks.len() {
                let mut live_full: Vec<usize> = full_p[j].iter().copied().filter(|&p| p >= oldest[j]).collect();
                let mut live_win: Vec<usize> = win_p[j].iter().copied().filter(|&p| p >= oldest[j]).collect();
                live_full.sort_unstable();
                live_win.sort_unstable();
                prop_assert_eq!(live_full, live_win, "{:?}: task {} preds", mode, j);
                // Edges from completed tasks may be dropped, never invented.
                for p in &win_p[j] {
                    prop_assert!(full_p[j].contains(p));
                }
            }
        }
    }

    /// The bounded map retires lazily (an access log, or a sweep once the log overflows): under
    /// the same retires every way gives the same graph and keeps the same number of live keys.
    #[test]
    fn lazy_retire_builds_what_a_sweep_builds(
        tasks in stream_strategy(),
        retire in prop::collection::vec((0usize..200, 0usize..20), 0..8),
    ) {
        let mut points: Vec<(usize, usize)> = retire.clone();
        points.sort_unstable();
        let run = |map: AnyTensorMap| {
            let mut cur = 0usize;
            let mut live = Vec::new();
            let b = GraphBuilder::with_map(map, CollectEdges::default());
            let g = build_with(&tasks, b, |j, b| {
                for &(at, lag) in points.iter().filter(|&&(at, _)| at == j) {
                    cur = cur.max(at.saturating_sub(lag));
                    b.retire_before(TaskId(cur as u32));
                    live.push(b.stats().map.live);
                }
            });
            (g, live)
        };
        // A log too small for anything: every retire that frees sweeps.
        for (capacity, lazy_maps) in [
            (1024, vec![FixedExactMap::new(1024)]),
            (
                108 + 3,
                vec![FixedExactMap::new(108 + 3), FixedExactMap::with_log_limit(108 + 3, 7)],
            ),
        ] {
            let (swept, swept_live) =
                run(AnyTensorMap::Fixed(FixedExactMap::with_log_limit(capacity, 0)));
            for map in lazy_maps {
                let (lazy, lazy_live) = run(AnyTensorMap::Fixed(map));
                prop_assert_eq!(&lazy, &swept);
                prop_assert_eq!(&lazy_live, &swept_live);
            }
        }
    }

    /// Retiring changes no edge found, whatever the map: the unbounded exact maps (and the
    /// bounded one while at most half full) keep a tombstone per key, the overlap map keeps the records of completed tasks until a write
    /// covers them and decides its coverage marks by the order of accesses alone. However
    /// tasks retire, a build counts the edges a build that never retires finds (more only when
    /// a completed reader pruned to a count reaches a task twice, which a count cannot
    /// deduplicate), wires none it does not find, and holds no more entries than that build.
    #[test]
    fn retiring_changes_no_edge_found(
        tasks in stream_strategy(),
        retire in prop::collection::vec((0usize..200, 0usize..20), 0..8),
    ) {
        let mut points: Vec<(usize, usize)> =
            retire.iter().map(|&(at, lag)| (at, at.saturating_sub(lag))).collect();
        points.sort_unstable();
        let keys: std::collections::HashSet<Region> =
            tasks.iter().flat_map(|t| t.regions.iter().map(|&(r, _)| r)).collect();
        for (mode, map) in [
            (DepsMode::Exact, AnyTensorMap::Dynamic(DynamicExactMap::new())),
            (DepsMode::Exact, AnyTensorMap::Fixed(FixedExactMap::growable(1))),
            // Bounded, never more than half full (at most 108 distinct keys): no key is freed.
            (DepsMode::Exact, AnyTensorMap::Fixed(FixedExactMap::new(2 * 108))),
            (DepsMode::Overlap, AnyTensorMap::Overlap(OverlapMap::new())),
        ] {
            let full = build(&tasks, mode, ExactMap::Dynamic);
            let mut b = GraphBuilder::with_map(map, CollectEdges::default());
            feed_retiring(&mut b, &tasks, points.iter().copied());
            check_same_edges_found(&b, &full)?;
            let bound = if mode == DepsMode::Exact {
                keys.len() as u64
            } else {
                let mut plain = GraphBuilder::with_exact_map(mode, ExactMap::Dynamic);
                feed_retiring(&mut plain, &tasks, []);
                plain.stats().map.high_water
            };
            prop_assert!(b.stats().map.high_water <= bound, "{:?}", mode);
        }
    }
}

/// How a test hands a task's regions to the builder.
#[derive(Clone, Copy, Debug)]
enum Entry {
    /// `add_access`, one region at a time.
    Plain,
    /// `add_access_hashed`, each region with its slot hash.
    Hashed,
    /// `add_ios`, the task's regions in one slice.
    Batched,
    /// Hashed and plain regions alternating within a task.
    Mixed,
}

/// Builds the stream over `map`, handing regions in as `entry` says; the graph and counters.
fn build_entering<M: TensorMap>(
    tasks: &[GenTask],
    map: M,
    entry: Entry,
) -> (TaskGraphStorage, BuildStats) {
    let mut b = GraphBuilder::with_map(map, CollectEdges::default());
    let mut io = Vec::new();
    for (j, t) in tasks.iter().enumerate() {
        b.alloc_task(j as u32 % 5, ExecDomain::HostCpu, ExecPool::Any, 0, None);
        match entry {
            Entry::Plain => t.regions.iter().for_each(|&(r, a)| b.add_access(r, a)),
            Entry::Hashed => t
                .regions
                .iter()
                .for_each(|&(r, a)| b.add_access_hashed(r, a, r.slot_hash())),
            Entry::Batched => {
                io.clear();
                io.extend(t.regions.iter().map(|&(r, a)| TaskIo::new(r, a)));
                b.add_ios(&io);
            }
            Entry::Mixed => {
                for (k, &(r, a)) in t.regions.iter().enumerate() {
                    if (j + k) % 2 == 0 {
                        b.add_access_hashed(r, a, r.slot_hash());
                    } else {
                        b.add_access(r, a);
                    }
                }
            }
        }
        for d in explicit_deps(tasks, j) {
            b.add_explicit_dep(TaskId(d as u32)).unwrap();
        }
        b.submit().unwrap();
    }
    let stats = b.stats();
    (b.finish(), stats)
}

/// A sink that forgets tasks (a streamed run's kind): keeps each task's predecessors, in the
/// order reported, and what it was published with.
#[derive(Default)]
struct Forgetting {
    preds: Vec<Vec<u32>>,
    published: Vec<(u32, Vec<u64>, Vec<TaskIo>)>,
}

impl EdgeSink for Forgetting {
    fn edge(&mut self, pred: TaskId, succ: TaskId) {
        if self.preds.len() <= succ.0 as usize {
            self.preds.resize(succ.0 as usize + 1, Vec::new());
        }
        self.preds[succ.0 as usize].push(pred.0);
    }
    fn submitted(&mut self, task: TaskId) {
        if self.preds.len() <= task.0 as usize {
            self.preds.resize(task.0 as usize + 1, Vec::new());
        }
    }
    fn publish(&mut self, node: &pto_wsp_graph::storage::TaskNode, params: &[u64], io: &[TaskIo]) {
        self.published
            .push((node.kernel, params.to_vec(), io.to_vec()));
    }
    fn forgets_tasks(&self) -> bool {
        true
    }
}

/// Builds the stream over `map` into a [`Forgetting`] sink, each task's regions given at
/// submission (`submit_ios`) when `at_submit`, else one at a time (`add_access`); every task
/// has a param, and every third task a region added before the rest come at submission.
fn build_forgetting<M: TensorMap>(tasks: &[GenTask], map: M, at_submit: bool) -> Forgetting {
    build_forgetting_masked(tasks, map, at_submit, &[])
}

/// [`build_forgetting`] with the builder's read-only mask `read_only`
/// ([`GraphBuilder::set_read_only`]).
fn build_forgetting_masked<M: TensorMap>(
    tasks: &[GenTask],
    map: M,
    at_submit: bool,
    read_only: &[bool],
) -> Forgetting {
    let mut b = GraphBuilder::with_map(map, Forgetting::default());
    b.set_read_only(read_only);
    let mut io = Vec::new();
    for (j, t) in tasks.iter().enumerate() {
        b.alloc_task(j as u32 % 5, ExecDomain::HostCpu, ExecPool::Any, 0, None);
        b.add_param(j as u64 * 7);
        for d in explicit_deps(tasks, j) {
            b.add_explicit_dep(TaskId(d as u32)).unwrap();
        }
        if at_submit {
            let first = usize::from(j % 3 == 0);
            for &(r, a) in &t.regions[..first] {
                b.add_access(r, a);
            }
            io.clear();
            io.extend(t.regions[first..].iter().map(|&(r, a)| TaskIo::new(r, a)));
            b.submit_ios(&io).unwrap();
        } else {
            t.regions.iter().for_each(|&(r, a)| b.add_access(r, a));
            b.submit().unwrap();
        }
        assert!(
            b.held_tasks() <= 1,
            "a forgetting sink's builder holds no task"
        );
    }
    b.into_parts().1
}

/// One map of each kind (exact fixed, exact dynamic, overlap), fresh: the submission tests build
/// the same stream with each.
fn three_maps() -> Vec<AnyTensorMap> {
    vec![
        AnyTensorMap::Fixed(FixedExactMap::growable(1)),
        AnyTensorMap::Dynamic(DynamicExactMap::new()),
        AnyTensorMap::Overlap(OverlapMap::new()),
    ]
}
proptest! {
    #![proptest_config(ProptestConfig::with_cases(pto_wsp_ir::soak::cases(64)))]

    /// Regions given at submission (`submit_ios`, read in place by a builder whose sink forgets
    /// tasks) give every task the predecessors, in order, and the published node, params and
    /// regions that regions added one at a time give, under the exact and the overlap maps.
    #[test]
    fn regions_given_at_submission_build_what_regions_added_build(tasks in stream_strategy()) {
        for k in 0..three_maps().len() {
            let want = build_forgetting(&tasks, three_maps().swap_remove(k), false);
            let got = build_forgetting(&tasks, three_maps().swap_remove(k), true);
            prop_assert_eq!(&got.preds, &want.preds, "map {}", k);
            prop_assert_eq!(&got.published, &want.published, "map {}", k);
            prop_assert_eq!(want.published.len(), tasks.len());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(pto_wsp_ir::soak::cases(64)))]

    /// The entry points for regions a generator keeps built (`add_access_hashed` with the slot
    /// hash carried, `add_ios` with the task's regions in the builder's layout) build the graph
    /// `add_access` builds, with the same counters (probes included), under every map: the
    /// exact maps small (no prefetch of their own) and large (prefetching), growable from one
    /// key, and the overlap map; also with hashed and plain regions mixed in one task.
    #[test]
    fn regions_handed_in_built_or_hashed_build_what_add_access_builds(
        tasks in stream_strategy(),
    ) {
        let maps = || -> Vec<AnyTensorMap> {
            vec![
                AnyTensorMap::Fixed(FixedExactMap::new(1024)),
                AnyTensorMap::Fixed(FixedExactMap::new(1 << 15)),
                AnyTensorMap::Fixed(FixedExactMap::growable(1)),
                AnyTensorMap::Dynamic(DynamicExactMap::new()),
                AnyTensorMap::Overlap(OverlapMap::new()),
            ]
        };
        for (k, map) in maps().into_iter().enumerate() {
            let want = build_entering(&tasks, map, Entry::Plain);
            for entry in [Entry::Hashed, Entry::Batched, Entry::Mixed] {
                let got = build_entering(&tasks, maps().swap_remove(k), entry);
                prop_assert_eq!(&got, &want, "map {} entered {:?}", k, entry);
            }
        }
        // And the fixed map straight (not behind the run-time choice).
        let want = build_entering(&tasks, FixedExactMap::new(1 << 15), Entry::Plain);
        let got = build_entering(&tasks, FixedExactMap::new(1 << 15), Entry::Hashed);
        prop_assert_eq!(&got, &want);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(pto_wsp_ir::soak::cases(32)))]

    /// Tasks of more regions than the builder keeps hints for (up to 20: past the eighth, a
    /// region's hint overwrites an earlier one, and such a task gets none back) build, over the
    /// fixed map large enough to prefetch and over a growable one, whatever the entry point,
    /// the graph the dynamic map builds from plain regions (which keeps no hint at all).
    #[test]
    fn tasks_of_more_regions_than_hints_build_what_the_dynamic_map_builds(
        tasks in prop::collection::vec(
            (
                prop::collection::vec((region_strategy(), access_strategy()), 1..20),
                prop::collection::vec(1u32..8, 0..2),
            )
                .prop_map(|(regions, explicit)| GenTask { regions, explicit }),
            1..60,
        ),
    ) {
        let want = build_entering(&tasks, DynamicExactMap::new(), Entry::Plain);
        for entry in [Entry::Plain, Entry::Hashed, Entry::Batched, Entry::Mixed] {
            let got = build_entering(&tasks, FixedExactMap::new(1 << 15), entry);
            prop_assert_eq!(&got.0, &want.0, "large fixed map, entered {:?}", entry);
            let got = build_entering(&tasks, FixedExactMap::growable(1), entry);
            prop_assert_eq!(&got.0, &want.0, "growable map, entered {:?}", entry);
        }
    }
}

/// `tasks` with every access of tensor `t` made a read when bit `t` of `reads_only` is set.
fn reading_only(tasks: &[GenTask], reads_only: u8) -> Vec<GenTask> {
    let mut out = tasks.to_vec();
    for (r, a) in out.iter_mut().flat_map(|t| t.regions.iter_mut()) {
        if reads_only >> r.tensor & 1 == 1 {
            *a = Access::In;
        }
    }
    out
}

/// Per tensor of the generated streams: whether no task of `tasks` writes it (plain loops).
fn unwritten(tasks: &[GenTask]) -> Vec<bool> {
    (0..3)
        .map(|t| {
            !tasks
                .iter()
                .flat_map(|g| &g.regions)
                .any(|&(r, a)| r.tensor == t && a.writes())
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(pto_wsp_ir::soak::cases(64)))]

    /// Reads of tensors no task writes skip the map ([`GraphBuilder::set_read_only`]): the same
    /// published tasks (regions kept) under each map, regions added one at a time or given at
    /// submission; under the exact maps the same predecessors, in order; under the overlap map
    /// the same but for coverage marks' edges between reads of read-only tensors (no conflict:
    /// [`check_fewer_marks`]). The streams have 0 to 3 of their 3 tensors read-only.
    #[test]
    fn reads_of_read_only_tensors_skip_the_map_and_change_no_edge(
        tasks in stream_strategy(),
        reads_only in 0u8..8,
    ) {
        let tasks = reading_only(&tasks, reads_only);
        let read_only = unwritten(&tasks);
        for k in 0..three_maps().len() {
            for at_submit in [false, true] {
                let want = build_forgetting(&tasks, three_maps().swap_remove(k), at_submit);
                let got = build_forgetting_masked(
                    &tasks,
                    three_maps().swap_remove(k),
                    at_submit,
                    &read_only,
                );
                prop_assert_eq!(&got.published, &want.published, "map {}", k);
                if k < 2 {
                    prop_assert_eq!(&got.preds, &want.preds, "map {}", k);
                } else {
                    check_fewer_marks(&tasks, &got.preds, &want.preds);
                }
            }
        }
    }
}

/// The overlap map under a read-only mask against the same map without: each task's
/// predecessors are a subset of the unmasked ones, every edge missing is one a coverage mark can
/// give (read after read; where the two tasks also conflict elsewhere, another path orders
/// them), and the masked graph still meets the overlap modes' promise against the brute-force
/// oracle (every conflicting pair ordered).
fn check_fewer_marks(tasks: &[GenTask], got: &[Vec<u32>], want: &[Vec<u32>]) {
    let sorted = |p: &[Vec<u32>]| -> Vec<Vec<usize>> {
        (0..tasks.len())
            .map(|j| {
                let mut v: Vec<usize> = p
                    .get(j)
                    .map_or(Vec::new(), |v| v.iter().map(|&x| x as usize).collect());
                v.sort_unstable();
                v
            })
            .collect()
    };
    let (got, want) = (sorted(got), sorted(want));
    for (j, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            g.iter().all(|p| w.contains(p)),
            "task {j}: {g:?} not in {w:?}"
        );
        for &p in w.iter().filter(|p| !g.contains(p)) {
            assert!(mark_edge(&tasks[p], &tasks[j]), "edge {p} -> {j} dropped");
        }
    }
    check_overlap_edges(tasks, &got, &oracle_preds(tasks, Some(true)));
}

/// A read-only mask lasts for one build: a builder reset, or made from the parts of a masked
/// build, tracks every tensor again (a write after a read of tensor 0 waits for the read).
#[test]
fn a_read_only_mask_lasts_for_one_build() {
    let read_then_write = |b: &mut GraphBuilder| {
        one_task(b, &[(r(0, 0, 4), Access::In)]);
        one_task(b, &[(r(0, 0, 4), Access::Out)])
    };
    let mut b = GraphBuilder::new(DepsMode::Exact);
    b.set_read_only(&[true]);
    read_then_write(&mut b);
    // Marked wrongly (task 1 writes tensor 0): the write-after-read edge is lost.
    assert_eq!(b.stats().edges(), 0);
    b.reset();
    read_then_write(&mut b);
    assert_eq!(b.stats().edges(), 1);
    let (parts, sink) = b.into_parts();
    let mut b = GraphBuilder::from_parts(parts, sink);
    read_then_write(&mut b);
    assert_eq!(b.stats().edges(), 1);
}

fn r(t: u32, row: u32, rows: u32) -> Region {
    Region::new_2d(t, row, rows, 0, 8)
}

fn one_task(b: &mut GraphBuilder, regions: &[(Region, Access)]) -> TaskId {
    b.alloc_task(0, ExecDomain::HostCpu, ExecPool::Vector, 0, None);
    for &(reg, a) in regions {
        b.add_access(reg, a);
    }
    b.submit().unwrap()
}

#[test]
fn duplicate_predecessors_are_suppressed() {
    for mode in [DepsMode::Exact, DepsMode::Overlap, DepsMode::Hybrid] {
        let mut b = GraphBuilder::new(mode);
        let w = one_task(
            &mut b,
            &[(r(0, 0, 8), Access::Out), (r(1, 0, 8), Access::Out)],
        );
        // Reads both outputs of `w` (and one twice) and names it explicitly too.
        b.alloc_task(0, ExecDomain::HostCpu, ExecPool::Vector, 0, None);
        b.add_input(r(0, 0, 8));
        b.add_input(r(1, 0, 8));
        b.add_inout(r(1, 0, 8));
        b.add_explicit_dep(w).unwrap();
        b.submit().unwrap();
        let stats = b.stats();
        let g = b.finish();
        assert_eq!(g.successors(w), &[TaskId(1)], "{mode:?}");
        assert_eq!(g.tasks[1].fanin, 1);
        assert_eq!(stats.edges(), 1);
        assert_eq!(stats.duplicates, 3, "{mode:?}");
    }
}

#[test]
fn write_after_read_orders_every_reader_since_the_last_write() {
    for mode in [DepsMode::Exact, DepsMode::Overlap] {
        let mut b = GraphBuilder::new(mode);
        let w0 = one_task(&mut b, &[(r(0, 0, 8), Access::Out)]);
        let readers: Vec<TaskId> = (0..5)
            .map(|_| one_task(&mut b, &[(r(0, 0, 8), Access::In)]))
            .collect();
        let w1 = one_task(&mut b, &[(r(0, 0, 8), Access::Out)]);
        let late = one_task(&mut b, &[(r(0, 0, 8), Access::In)]);
        let w2 = one_task(&mut b, &[(r(0, 0, 8), Access::Out)]);
        let stats = b.stats();
        let g = b.finish();
        let preds = graph_preds(&g);
        let mut want: Vec<usize> = readers.iter().map(|t| t.index()).collect();
        want.push(w0.index()); // write after write
        want.sort_unstable();
        let mut got = preds[w1.index()].clone();
        got.sort_unstable();
        assert_eq!(got, want, "{mode:?}");
        // Only readers since the last write: w2 follows `late` and w1, not the first readers.
        let mut got = preds[w2.index()].clone();
        got.sort_unstable();
        assert_eq!(got, vec![w1.index(), late.index()]);
        assert_eq!(stats.war, 6);
        assert_eq!(stats.waw, 2);
        assert_eq!(stats.raw, 6);
    }
}

#[test]
fn exact_mode_misses_partial_overlap_and_overlap_mode_finds_it() {
    let regions = |b: &mut GraphBuilder| {
        one_task(b, &[(r(0, 0, 16), Access::Out)]);
        one_task(b, &[(r(0, 8, 8), Access::In)]);
    };
    let mut exact = GraphBuilder::new(DepsMode::Exact);
    regions(&mut exact);
    assert_eq!(exact.finish().edge_count(), 0);
    let mut overlap = GraphBuilder::new(DepsMode::Overlap);
    regions(&mut overlap);
    assert_eq!(overlap.finish().edge_count(), 1);
}

#[test]
fn region_errors_name_the_task_and_tensor() {
    let mut b = GraphBuilder::new(DepsMode::Overlap);
    one_task(&mut b, &[(r(0, 0, 8), Access::Out)]);
    b.alloc_task(0, ExecDomain::HostCpu, ExecPool::Vector, 0, None);
    let e = b
        .add_region(Access::In, 7, &[0, 0, 0, 0, 0], &[1, 1, 1, 1, 1])
        .unwrap_err();
    assert!(
        matches!(
            e,
            BuildError::RankTooHigh {
                task: TaskId(1),
                tensor: 7,
                rank: 5,
                max: 4
            }
        ),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains("task #1") && msg.contains("tensor 7") && msg.contains("rank 5"),
        "{msg}"
    );
    let e = b.add_region(Access::In, 3, &[-1], &[4]).unwrap_err();
    assert!(
        e.to_string().contains("task #1") && e.to_string().contains("tensor 3"),
        "{e}"
    );
    let e = b.add_region(Access::In, 3, &[0], &[0]).unwrap_err();
    assert!(matches!(e, BuildError::BadRegion { .. }));
    let e = b.add_region(Access::In, 3, &[0, 1], &[4]).unwrap_err();
    assert!(matches!(e, BuildError::BadRegion { .. }));
    b.add_region(Access::In, 3, &[0, 0, 0, 0], &[1, 2, 3, 4])
        .unwrap();
    let e = b.add_explicit_dep(TaskId(1)).unwrap_err();
    assert_eq!(
        e,
        BuildError::ForwardDep {
            task: TaskId(1),
            dep: TaskId(1)
        }
    );
    b.submit().unwrap();
}

#[test]
fn a_full_fixed_map_refuses_the_task_cleanly_and_retiring_makes_room() {
    let mut b = GraphBuilder::with_exact_map(DepsMode::Exact, ExactMap::Fixed(4));
    for i in 0..4 {
        one_task(&mut b, &[(r(0, i * 8, 8), Access::Out)]);
    }
    b.alloc_task(0, ExecDomain::HostCpu, ExecPool::Vector, 0, None);
    b.add_input(r(0, 0, 8));
    let e = b.submit().unwrap_err();
    assert!(
        matches!(
            e,
            BuildError::TensorMapFull {
                task: TaskId(4),
                capacity: 4,
                regions: 1
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("task #4"));
    // Tasks 0..3 completed: their keys go, and the open task fits (no edge from a completed task).
    b.retire_before(TaskId(4));
    assert_eq!(b.stats().map.live, 0);
    assert_eq!(b.submit().unwrap(), TaskId(4));
    assert_eq!(b.stats().map.high_water, 4);
    assert_eq!(b.finish().edge_count(), 0);
}

/// A task holds at most 65,535 regions and 65,535 params (the node's 16-bit counts): exactly
/// that many of each is accepted; one more of either is refused naming which and how many
/// (the regions when both are over).
#[test]
fn a_task_of_more_than_65535_regions_or_params_is_refused() {
    const MAX: usize = u16::MAX as usize;
    for (nio, nparams, want) in [
        (MAX, MAX, None),
        (MAX + 1, 0, Some(("regions", MAX + 1))),
        (0, MAX + 1, Some(("params", MAX + 1))),
        (MAX, MAX + 1, Some(("params", MAX + 1))),
        (MAX + 1, MAX + 1, Some(("regions", MAX + 1))),
    ] {
        let mut b = GraphBuilder::with_exact_map(DepsMode::Explicit, ExactMap::Dynamic);
        b.alloc_task(0, ExecDomain::HostCpu, ExecPool::Any, 0, None);
        for i in 0..nio {
            b.add_input(Region::new_2d(0, i as u32, 1, 0, 1));
        }
        for i in 0..nparams {
            b.add_param(i as u64);
        }
        match (b.submit(), want) {
            (Ok(t), None) => assert_eq!(t, TaskId(0)),
            (Err(BuildError::TooMany { task, what, count }), Some(w)) => {
                assert_eq!(
                    (task, (what, count)),
                    (TaskId(0), w),
                    "{nio} regions, {nparams} params"
                )
            }
            (got, want) => panic!("{nio} regions, {nparams} params: {got:?}, want {want:?}"),
        }
    }
}

/// Readers of one key that completed and were pruned to a count still count as inferred
/// write-after-read edges of the next write, and are never wired: 60 readers of a key written
/// by task 0 while tasks retire five behind, then a write of it.
#[test]
fn pruned_readers_count_as_edges_and_are_not_wired() {
    let key = r(0, 0, 8);
    let mut b = GraphBuilder::with_exact_map(DepsMode::Exact, ExactMap::Dynamic);
    one_task(&mut b, &[(key, Access::Out)]);
    for t in 1..=60u32 {
        b.retire_before(TaskId(t.saturating_sub(5)));
        one_task(&mut b, &[(key, Access::In)]);
    }
    one_task(&mut b, &[(key, Access::Out)]);
    let s = b.stats();
    assert!(s.forgotten > 0, "{s:?}");
    // Every reader follows the writer and precedes the last write, once each.
    assert_eq!((s.raw, s.war, s.waw), (60, 60, 1), "{s:?}");
    let g = b.finish();
    let mut last: Vec<u32> = graph_preds(&g)[61].iter().map(|&p| p as u32).collect();
    last.sort_unstable();
    // Wired: the writer and the readers reported by id, each once.
    assert_eq!(last.len() as u64, 1 + 60 - s.forgotten, "{last:?}");
    assert_eq!(last[0], 0);
    assert!(
        last.windows(2).all(|w| w[0] < w[1] && w[1] <= 60),
        "{last:?}"
    );
}

#[test]
fn maps_can_be_used_directly_and_count() {
    fn run<M: TensorMap>(mut m: M) -> (Vec<(u32, u32)>, pto_wsp_graph::tensor_map::MapStats) {
        let mut edges = Vec::new();
        let a = r(0, 0, 8);
        for (t, acc) in [
            (0, Access::Out),
            (1, Access::In),
            (2, Access::In),
            (3, Access::InOut),
        ] {
            m.access(TaskId(t), &a, acc, &mut |p: TaskId, _| edges.push((p.0, t)));
        }
        (edges, m.stats())
    }
    for (edges, stats) in [
        run(FixedExactMap::new(8)),
        run(DynamicExactMap::new()),
        run(OverlapMap::new()),
    ] {
        let mut edges = edges;
        edges.sort_unstable();
        assert_eq!(edges, vec![(0, 1), (0, 2), (0, 3), (1, 3), (2, 3)]);
        assert_eq!((stats.hits, stats.misses), (3, 1));
        assert!(stats.live >= 1 && stats.high_water >= stats.live);
    }
}

#[test]
fn storage_layout_and_bytes() {
    let mut b = GraphBuilder::new(DepsMode::Exact);
    let t0 = b.alloc_task(3, ExecDomain::AscendAiCore, ExecPool::Cube, 2, Some(5));
    b.add_param(42);
    b.add_param(7);
    b.add_output(r(0, 0, 8));
    b.submit().unwrap();
    b.alloc_task(4, ExecDomain::HostCpu, ExecPool::Vector, 0, None);
    b.add_input(r(0, 0, 8));
    b.add_output(r(1, 0, 8));
    b.submit().unwrap();
    let g = b.finish();
    let n = g.tasks[t0.index()];
    assert_eq!(
        (n.kernel, n.stream, n.affinity(), n.pool(), n.domain),
        (3, 2, Some(5), ExecPool::Cube, ExecDomain::AscendAiCore)
    );
    assert_eq!(g.params_of(t0), &[42, 7]);
    assert_eq!(g.io_of(TaskId(1)).len(), 2);
    assert_eq!(g.io_of(TaskId(1))[0].access(), Access::In);
    assert_eq!(g.tasks[1].affinity(), None);
    let bytes = g.bytes();
    assert_eq!(
        bytes.tasks,
        2 * std::mem::size_of::<pto_wsp_graph::storage::TaskNode>()
    );
    assert_eq!(bytes.fanout, 4);
    assert_eq!(bytes.params, 16);
    assert_eq!(bytes.total(), bytes.tasks + 4 + 16 + 3 * 44);
}

/// The LLaMA example at two row tiles, through the expander, in hybrid mode: every conflicting
/// pair of the overlap oracle ordered, every other edge a mark's.
#[test]
fn llama_layer_two_tiles_matches_the_oracle() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/llama7b_layer.wsp"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let module = pto_wsp_ir::parse(&text).unwrap();
    let bindings = pto_wsp_ir::Bindings::new().symbol("seq", 64i64);
    let mut b = GraphBuilder::new(DepsMode::Hybrid);
    let mut tasks = Vec::new();
    let resolved = pto_wsp_ir::resolve(&module, &Default::default()).unwrap();
    pto_wsp_ir::expand_each(&resolved, &bindings, &Default::default(), |_, t| {
        b.submit_expanded(t, ExecDomain::HostCpu).unwrap();
        tasks.push(GenTask {
            regions: t
                .regions
                .iter()
                .map(|r| (Region::new(r.tensor, &r.start, &r.size).unwrap(), r.access))
                .collect(),
            explicit: Vec::new(),
        });
    })
    .unwrap();
    assert_eq!(tasks.len(), 2 * 486);
    let stats = b.stats();
    let g = b.finish();
    check_storage(&g);
    let want = oracle_preds(&tasks, Some(true));
    let got = graph_preds(&g);
    check_overlap_edges(&tasks, &got, &want);
    assert_eq!(stats.tasks, 972);
    assert!(stats.raw > 0 && stats.war == 0, "{stats:?}");
    random_execution(&g, &tasks, true, 8, 12345);
}

/// One step of a covering-read stream: a tile `(row, col)` of a `rows` x `cols` tile grid is
/// written (`Out` or `InOut`), or a prefix / row / arbitrary box of tiles is read, or written
/// after being read (write after many readers).
#[derive(Clone, Debug)]
enum Step {
    Write(u32, u32, Access),
    ReadPrefix(u32, u32),
    ReadRow(u32),
    ReadBox(u32, u32, u32, u32),
    WriteBox(u32, u32, u32, u32),
}

/// Tiles of 4 x 8 elements on tensor 0 (and tensor 1 for a second operand of some reads).
fn tile_box(row: u32, rows: u32, col: u32, cols: u32) -> Region {
    Region::new_2d(0, row * 4, rows * 4, col * 8, cols * 8)
}

fn step_strategy() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0u32..12, 0u32..4, access_strategy()).prop_map(|(r, c, a)| Step::Write(r, c, match a {
            Access::In => Access::Out,
            a => a,
        })),
        4 => (0u32..12, 0u32..4).prop_map(|(r, c)| Step::ReadPrefix(r, c)),
        1 => (0u32..12).prop_map(Step::ReadRow),
        1 => (0u32..12, 1u32..4, 0u32..4, 1u32..3).prop_map(|(r, n, c, m)| Step::ReadBox(r, n, c, m)),
        1 => (0u32..12, 1u32..6, 0u32..4, 1u32..3).prop_map(|(r, n, c, m)| Step::WriteBox(r, n, c, m)),
    ]
}

fn covering_tasks(steps: &[Step]) -> Vec<GenTask> {
    steps
        .iter()
        .map(|s| {
            let regions = match *s {
                Step::Write(r, c, a) => vec![(tile_box(r, 1, c, 1), a)],
                // A causal-attention task: its own query tile, the K prefix of its column.
                Step::ReadPrefix(r, c) => vec![
                    (tile_box(r, 1, c, 1), Access::In),
                    (tile_box(0, r + 1, c, 1), Access::In),
                    (Region::new_2d(1, r * 4, 4, c * 8, 8), Access::Out),
                ],
                Step::ReadRow(r) => vec![(tile_box(r, 1, 0, 4), Access::In)],
                Step::ReadBox(r, n, c, m) => vec![(tile_box(r, n, c, m), Access::In)],
                Step::WriteBox(r, n, c, m) => vec![(tile_box(r, n, c, m), Access::Out)],
            };
            GenTask {
                regions,
                explicit: Vec::new(),
            }
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: pto_wsp_ir::soak::cases(96), ..ProptestConfig::default() })]

    /// Streams dominated by covering reads (prefixes, rows, boxes of tiles) and writes after
    /// them: every conflicting pair is ordered through the graph, every other edge is a mark's,
    /// and random executions never run conflicting tasks together — with and without retiring.
    #[test]
    fn covering_reads_order_every_conflicting_writer(
        steps in prop::collection::vec(step_strategy(), 1..160),
        retire_lag in prop::option::of(1usize..40),
        seed: u64,
    ) {
        let tasks = covering_tasks(&steps);
        let want = oracle_preds(&tasks, Some(true));
        let g = check_mode(&tasks, DepsMode::Hybrid, ExactMap::Dynamic);
        random_execution(&g, &tasks, true, 4, seed);
        if let Some(lag) = retire_lag {
            // Tasks older than `lag` submissions complete: conflicting pairs among live tasks are
            // still ordered through live tasks (paths may run through retired ones only where
            // the retired task completed first, which a real run guarantees).
            let b = GraphBuilder::with_exact_map(DepsMode::Hybrid, ExactMap::Dynamic);
            let mut oldest = vec![0usize; tasks.len()];
            let w = build_with(&tasks, b, |j, b| {
                let o = j.saturating_sub(lag);
                b.retire_before(TaskId(o as u32));
                oldest[j] = o;
            });
            let got = graph_preds(&w);
            let full = graph_preds(&g);
            for j in 0..tasks.len() {
                let live = |ps: &Vec<usize>| {
                    let mut v: Vec<usize> = ps.iter().copied().filter(|&p| p >= oldest[j]).collect();
                    v.sort_unstable();
                    v
                };
                prop_assert_eq!(live(&got[j]), live(&full[j]), "task {}", j);
            }
            let _ = want;
        }
    }
}

/// The K-prefix pattern of causal attention over `tiles` row tiles and `heads` columns: per tile,
/// a projection writes each head's K tile, rope updates it in place, and attention reads the
/// prefix of its head's column. Returns (tasks, edges).
fn prefix_edges(tiles: u32, heads: u32) -> (usize, usize) {
    let mut tasks = Vec::new();
    for t in 0..tiles {
        for h in 0..heads {
            tasks.push(GenTask {
                regions: vec![(tile_box(t, 1, h, 1), Access::Out)],
                explicit: Vec::new(),
            });
            tasks.push(GenTask {
                regions: vec![(tile_box(t, 1, h, 1), Access::InOut)],
                explicit: Vec::new(),
            });
            tasks.push(GenTask {
                regions: vec![
                    (tile_box(0, t + 1, h, 1), Access::In),
                    (Region::new_2d(1, t * 4, 4, h * 8, 8), Access::Out),
                ],
                explicit: Vec::new(),
            });
        }
        // An output projection per head reading the whole attention row (32 writers each).
        for _ in 0..heads {
            tasks.push(GenTask {
                regions: vec![(Region::new_2d(1, t * 4, 4, 0, heads * 8), Access::In)],
                explicit: Vec::new(),
            });
        }
    }
    let g = build(&tasks, DepsMode::Hybrid, ExactMap::Dynamic);
    if tiles <= 16 {
        check_overlap_edges(&tasks, &graph_preds(&g), &oracle_preds(&tasks, Some(true)));
    }
    (tasks.len(), g.edge_count())
}

/// Prefix and row reads cost O(1) edges per task however long the prefix: without marks,
/// attention alone wires `tiles / 2` edges per task on average.
#[test]
fn covering_reads_cost_bounded_edges_per_task_whatever_the_prefix_length() {
    let (n16, e16) = prefix_edges(16, 8);
    let (n256, e256) = prefix_edges(256, 8);
    let (p16, p256) = (e16 as f64 / n16 as f64, e256 as f64 / n256 as f64);
    // Per tile and head (4 tasks), once the prefix spans two tiles: rope after the projection
    // (1), attention after rope and its previous mark (2), output projections after the first
    // of them (1) plus the first's 8 writers: 1 + 2 + 15 / 8 = 4.875 edges, 1.22 per task
    // (the first tiles cost less).
    assert!(
        (p256 - p16).abs() < 0.02,
        "edges per task grew: {p16} at 16 tiles, {p256} at 256"
    );
    assert!(p256 <= 4.875 / 4.0, "{p256} edges per task");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: pto_wsp_ir::soak::cases(24), ..ProptestConfig::default() })]

    /// A builder reused through `reset` / `finish_into` (after a different stream, with records,
    /// reader chunks and grids left over) builds exactly what a fresh builder builds.
    #[test]
    fn a_reused_builder_builds_the_same_graph(
        first in stream_strategy(),
        second in stream_strategy(),
        retire_at in 0usize..200,
    ) {
        for (mode, exact) in [
            (DepsMode::Exact, ExactMap::Fixed(1024)),
            (DepsMode::Exact, ExactMap::Fixed(108 + 3)),
            (DepsMode::Exact, ExactMap::Dynamic),
            (DepsMode::Overlap, ExactMap::Dynamic),
            (DepsMode::Explicit, ExactMap::Dynamic),
        ] {
            let fresh = build(&second, mode, exact);
            let mut f = GraphBuilder::with_exact_map(mode, exact);
            feed(&mut f, &first, retire_at);
            let fresh_first = f.finish();
            let mut b = GraphBuilder::with_exact_map(mode, exact);
            let mut out = TaskGraphStorage::default();
            // finish_into, twice (the second time `out` holds a graph to recycle).
            for _ in 0..2 {
                feed(&mut b, &first, retire_at);
                b.finish_into(&mut out);
                prop_assert_eq!(&out, &fresh_first, "{:?} first", mode);
                prop_assert!(b.is_empty());
                prop_assert_eq!(b.stats().tasks, 0);
            }
            feed(&mut b, &second, usize::MAX);
            b.finish_into(&mut out);
            prop_assert_eq!(&out, &fresh, "{:?} after finish_into", mode);
            // reset, with a task left open.
            feed(&mut b, &first, retire_at);
            b.alloc_task(0, ExecDomain::HostCpu, ExecPool::Any, 0, None);
            b.reset();
            feed(&mut b, &second, usize::MAX);
            prop_assert_eq!(&b.finish(), &fresh, "{:?} after reset", mode);
            // into_parts / from_parts with a new sink each build (a streamed run's way), with a
            // task left open the first time.
            let mut b = GraphBuilder::with_exact_map(mode, exact);
            feed(&mut b, &first, retire_at);
            b.alloc_task(0, ExecDomain::HostCpu, ExecPool::Any, 0, None);
            for _ in 0..2 {
                let (parts, _) = b.into_parts();
                b = GraphBuilder::from_parts(parts, CollectEdges::default());
                prop_assert!(b.is_empty());
                prop_assert_eq!(b.stats(), BuildStats::default());
                feed(&mut b, &first, retire_at);
            }
            let (parts, _) = b.into_parts();
            let mut b = GraphBuilder::from_parts(parts, CollectEdges::default());
            feed(&mut b, &second, usize::MAX);
            prop_assert_eq!(&b.finish(), &fresh, "{:?} after from_parts", mode);
        }
    }
}

/// A sink that claims every task older than `lag` submissions has completed.
#[derive(Default)]
struct Lagging {
    inner: CollectEdges,
    lag: u32,
    submitted: u32,
    hints: Vec<(u32, u32)>,
}

impl pto_wsp_graph::builder::EdgeSink for Lagging {
    fn edge(&mut self, pred: TaskId, succ: TaskId) {
        self.inner.edge(pred, succ);
    }
    fn submitted(&mut self, task: TaskId) {
        self.inner.submitted(task);
        self.submitted = task.0 + 1;
    }
    fn retire_hint(&mut self) -> Option<TaskId> {
        let w = self.submitted.saturating_sub(self.lag);
        self.hints.push((self.submitted, w));
        Some(TaskId(w))
    }
}

/// The builder asks its sink for a retire watermark every `RETIRE_EVERY` submissions and
/// retires the map below it. Both maps keep tombstones of completed tasks: the build finds and
/// reports every edge of the build without retiring (the runtimes wire none to a completed
/// task), and the map holds what that build holds, one entry (exact) or at most a write and a
/// joined read record (overlap, one-cell tiles) per distinct box, never one per task.
#[test]
fn the_sinks_retire_hint_keeps_every_edge_and_a_map_bounded_by_boxes() {
    use pto_wsp_graph::builder::RETIRE_EVERY;
    let n = 3 * RETIRE_EVERY as usize + 100;
    // Phases of 500 tasks, each over the 16 tiles of its own tensor: within a phase every tile
    // is rewritten and reread many times.
    let tasks: Vec<GenTask> = (0..n)
        .map(|j| {
            let t = (j / 500) as u32;
            let tile =
                |k: usize| Region::new_2d(t, (k % 4) as u32 * 2, 2, (k / 4 % 4) as u32 * 2, 2);
            GenTask {
                regions: vec![
                    (tile(j * 7), Access::In),
                    (
                        tile(j * 13 + 5),
                        if j % 3 == 0 {
                            Access::InOut
                        } else {
                            Access::Out
                        },
                    ),
                ],
                explicit: vec![],
            }
        })
        .collect();
    let boxes: std::collections::HashSet<Region> = tasks
        .iter()
        .flat_map(|t| t.regions.iter().map(|&(r, _)| r))
        .collect();
    for mode in [DepsMode::Exact, DepsMode::Overlap] {
        let plain = build(&tasks, mode, ExactMap::Dynamic);
        let mut b = GraphBuilder::with_map(
            AnyTensorMap::for_mode(mode, ExactMap::Dynamic),
            Lagging {
                lag: 100,
                ..Lagging::default()
            },
        );
        for t in &tasks {
            b.alloc_task(0, ExecDomain::HostCpu, ExecPool::Any, 0, None);
            for &(r, a) in &t.regions {
                b.add_access(r, a);
            }
            b.submit().unwrap();
        }
        let hints = b.sink().hints.clone();
        assert_eq!(hints.len(), n / RETIRE_EVERY as usize, "{mode:?}");
        assert!(
            hints.iter().all(|&(_, w)| w > 0),
            "{mode:?}: nothing retired"
        );
        assert_eq!(b.map().stats().live, plain_live(&tasks, mode), "{mode:?}");
        let per_box = if mode == DepsMode::Exact { 1 } else { 2 };
        assert!(
            b.map().stats().high_water <= per_box * boxes.len() as u64,
            "{mode:?}: {} records for {} boxes",
            b.map().stats().high_water,
            boxes.len()
        );
        // The edges of the build without retiring, every one reported (no reader list grew
        // long enough to prune to a count).
        assert_eq!(b.stats().forgotten, 0, "{mode:?}");
        assert_eq!(b.stats().edges(), plain.edge_count() as u64, "{mode:?}");
        let (preds, ends) = b.sink().inner.preds();
        let got = sorted_preds(preds, ends);
        let mut want = graph_preds(&plain);
        want.iter_mut().for_each(|p| p.sort_unstable());
        assert_eq!(got, want, "{mode:?}");
    }
}

/// Mostly reads of a few boxes (tiles and whole rows of tiles) of two tensors, so that reads of
/// one box follow each other and join one record (single-cell tiles, and rows through a mark).
fn read_heavy_stream_strategy() -> impl Strategy<Value = Vec<GenTask>> {
    let region = (0u32..2, 0u32..3, any::<bool>(), 0u32..3).prop_map(|(t, r, row, c)| {
        if row {
            Region::new_2d(t, r * 2, 2, 0, 6)
        } else {
            Region::new_2d(t, r * 2, 2, c * 2, 2)
        }
    });
    let access =
        prop_oneof![6 => Just(Access::In), 1 => Just(Access::Out), 1 => Just(Access::InOut)];
    let task = prop::collection::vec((region, access), 1..3).prop_map(|regions| GenTask {
        regions,
        explicit: vec![],
    });
    prop::collection::vec(task, 1..200)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: pto_wsp_ir::soak::cases(48), ..ProptestConfig::default() })]

    /// Joined read records keep the oracle's promise, and retiring changes no edge found: the
    /// records of completed tasks stay as tombstones (reported, wired to nobody).
    #[test]
    fn joined_reads_match_the_oracle_with_and_without_retiring(
        tasks in read_heavy_stream_strategy(),
        every in 1usize..20,
        lag in 0usize..30,
        seed: u64,
    ) {
        for mode in [DepsMode::Overlap, DepsMode::Hybrid] {
            let g = check_mode(&tasks, mode, ExactMap::Dynamic);
            random_execution(&g, &tasks, true, 4, seed);
        }
        let full = build(&tasks, DepsMode::Overlap, ExactMap::Dynamic);
        let mut b = GraphBuilder::with_exact_map(DepsMode::Overlap, ExactMap::Dynamic);
        let retire = (1..tasks.len())
            .filter(|j| j % every == 0)
            .map(|j| (j, j.saturating_sub(lag)));
        feed_retiring(&mut b, &tasks, retire);
        check_same_edges_found(&b, &full)?;
    }
}

/// Feeds `tasks`, retiring below `oldest` before task `at` for each `(at, oldest)` (in order).
fn feed_retiring<M: TensorMap>(
    b: &mut GraphBuilder<M>,
    tasks: &[GenTask],
    retire: impl IntoIterator<Item = (usize, usize)>,
) {
    let mut retire = retire.into_iter().peekable();
    let mut cur = 0usize;
    for (j, t) in tasks.iter().enumerate() {
        while let Some(&(at, oldest)) = retire.peek()
            && at <= j
        {
            cur = cur.max(oldest);
            b.retire_before(TaskId(cur as u32));
            retire.next();
        }
        b.alloc_task(0, ExecDomain::HostCpu, ExecPool::Any, 0, None);
        for &(r, a) in &t.regions {
            b.add_access(r, a);
        }
        for d in explicit_deps(tasks, j) {
            b.add_explicit_dep(TaskId(d as u32)).unwrap();
        }
        b.submit().unwrap();
    }
}

/// A retiring build `b` found the edges of `full`, built without retiring: the same edges
/// reported to the sink, except completed readers pruned to a count (`forgotten`), which are
/// counted and never wired. A count cannot be deduplicated, so a pruned reader that reaches one
/// successor twice counts twice (the documented exception): with no count, the graphs are
/// equal; with one, the count is never below and nothing is invented.
fn check_same_edges_found<M: TensorMap>(
    b: &GraphBuilder<M>,
    full: &TaskGraphStorage,
) -> Result<(), TestCaseError> {
    let st = b.stats();
    let (preds, ends) = b.sink().preds();
    prop_assert_eq!(preds.len() as u64 + st.forgotten, st.edges());
    let got = sorted_preds(preds, ends);
    let mut want = graph_preds(full);
    want.iter_mut().for_each(|p| p.sort_unstable());
    if st.forgotten == 0 {
        prop_assert_eq!(st.edges(), full.edge_count() as u64);
        prop_assert_eq!(got, want);
    } else {
        prop_assert!(st.edges() >= full.edge_count() as u64);
        for (j, ps) in got.iter().enumerate() {
            for p in ps {
                prop_assert!(want[j].contains(p), "task {}: edge from {} invented", j, p);
            }
        }
    }
    Ok(())
}

/// Records the map holds at the end of a build without retiring.
fn plain_live(tasks: &[GenTask], mode: DepsMode) -> u64 {
    let mut b = GraphBuilder::with_exact_map(mode, ExactMap::Dynamic);
    for t in tasks {
        b.alloc_task(0, ExecDomain::HostCpu, ExecPool::Any, 0, None);
        for &(r, a) in &t.regions {
            b.add_access(r, a);
        }
        b.submit().unwrap();
    }
    b.map().stats().live
}

/// Feeds `tasks` (retiring everything older than `retire_at - 10` once, at task `retire_at`).
fn feed<M: TensorMap>(b: &mut GraphBuilder<M>, tasks: &[GenTask], retire_at: usize) {
    for (j, t) in tasks.iter().enumerate() {
        if j == retire_at {
            b.retire_before(TaskId(j.saturating_sub(10) as u32));
        }
        b.alloc_task(j as u32 % 5, ExecDomain::HostCpu, ExecPool::Any, 0, None);
        for &(r, a) in &t.regions {
            b.add_access(r, a);
        }
        for d in explicit_deps(tasks, j) {
            b.add_explicit_dep(TaskId(d as u32)).unwrap();
        }
        b.submit().unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// The feeder: the reference expander straight into a builder, structural order as explicit
// dependencies. Checked against the expansion: every order edge and every conflicting pair is
// ordered by reachability, and the user tasks are the expander's tasks, in order.

mod feeding {
    use super::*;
    use pto_wsp_graph::feed::{
        BARRIER_KERNEL, FeedError, FeedHooks, FeedTask, Feeder, NO_ORIGIN, NoHooks,
    };
    use pto_wsp_ir::{Bindings, ExpandOptions, ExpandedTask, Module, Resolved};

    /// `m` resolved, as a front end resolves it once before expanding or feeding it.
    fn resolved(m: &Module) -> Resolved {
        pto_wsp_ir::resolve(m, &Default::default()).unwrap()
    }

    /// [`pto_wsp_graph::feed::feed`] of `m`, resolved.
    fn feed<M: TensorMap, S: pto_wsp_graph::builder::EdgeSink, H: FeedHooks>(
        m: &Module,
        b: &Bindings,
        o: &ExpandOptions,
        builder: &mut GraphBuilder<M, S>,
        hooks: &mut H,
        domain: ExecDomain,
    ) -> Result<pto_wsp_graph::feed::FeedSummary, FeedError<H::Error>> {
        pto_wsp_graph::feed::feed(&resolved(m), b, o, builder, hooks, domain)
    }

    const MODES: [DepsMode; 4] = [
        DepsMode::Exact,
        DepsMode::Overlap,
        DepsMode::Explicit,
        DepsMode::Hybrid,
    ];

    /// Records every hook call; fails the `fail_before`-th `before_submit` or the
    /// `fail_after`-th `after_submit` (0-based).
    #[derive(Default)]
    struct Recording {
        calls: Vec<(TaskId, Option<u32>, bool)>,
        fail_before: Option<usize>,
        fail_after: Option<usize>,
        befores: usize,
        afters: usize,
    }

    impl FeedHooks for Recording {
        type Error = String;
        fn before_submit(
            &mut self,
            id: TaskId,
            task: Option<(u32, &dyn FeedTask)>,
        ) -> Result<(), String> {
            self.befores += 1;
            if self.fail_before == Some(self.befores - 1) {
                return Err(format!("refused #{}", id.0));
            }
            self.calls.push((id, task.map(|(i, _)| i), false));
            Ok(())
        }
        fn after_submit(&mut self, id: TaskId) -> Result<(), String> {
            self.afters += 1;
            self.calls.push((id, None, true));
            if self.fail_after == Some(self.afters - 1) {
                return Err(format!("gave up after #{}", id.0));
            }
            Ok(())
        }
    }

    fn gen_task(t: &ExpandedTask) -> GenTask {
        GenTask {
            regions: t
                .regions
                .iter()
                .map(|r| (Region::new(r.tensor, &r.start, &r.size).unwrap(), r.access))
                .collect(),
            explicit: Vec::new(),
        }
    }

    /// Feeds `m` in `mode` and checks the graph against the expansion; returns the number of
    /// barriers.
    fn check_feed(name: &str, m: &Module, b: &Bindings, mode: DepsMode) -> u32 {
        let x = pto_wsp_ir::expand(&resolved(m), b, &ExpandOptions::default()).unwrap();
        let mut builder = GraphBuilder::new(mode);
        let mut hooks = Recording::default();
        let s = feed(
            m,
            b,
            &ExpandOptions::default(),
            &mut builder,
            &mut hooks,
            ExecDomain::AscendAiCore,
        )
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        let stats = builder.stats();
        let g = builder.finish();
        check_storage(&g);
        assert_eq!(s.first, TaskId(0));
        assert_eq!(s.user_tasks as usize, x.tasks.len(), "{name}");
        assert_eq!((s.user_tasks + s.barrier_tasks) as usize, g.len());
        let origin = s.origins.to_vec();
        assert_eq!(origin.len(), g.len());
        assert_eq!(s.expand.tasks as usize, x.tasks.len());
        assert!(!s.expand.stopped && !s.expand.truncated);

        // Hooks: before then after, for every task in id order.
        assert_eq!(hooks.calls.len(), 2 * g.len());
        for (id, pair) in hooks.calls.chunks(2).enumerate() {
            let o = origin[id];
            let index = (o != NO_ORIGIN).then_some(o);
            assert_eq!(pair[0], (TaskId(id as u32), index, false));
            assert_eq!(pair[1], (TaskId(id as u32), None, true));
        }

        // (c) the user tasks are the expander's, in order; barriers are empty.
        let mut ids = Vec::with_capacity(x.tasks.len());
        let mut nodes = Vec::with_capacity(g.len());
        for (id, &o) in origin.iter().enumerate() {
            let n = &g.tasks[id];
            assert_eq!(n.domain, ExecDomain::AscendAiCore);
            let tid = TaskId(id as u32);
            assert_eq!(s.index_of(tid), (o != NO_ORIGIN).then_some(o));
            if o == NO_ORIGIN {
                assert_eq!(n.kernel, BARRIER_KERNEL);
                assert!(g.io_of(tid).is_empty() && g.params_of(tid).is_empty());
                assert!(n.fanin >= 2, "a barrier joins at least two tasks");
                nodes.push(GenTask {
                    regions: Vec::new(),
                    explicit: Vec::new(),
                });
                continue;
            }
            assert_eq!(o as usize, ids.len(), "{name}: user tasks in index order");
            ids.push(id);
            let t = &x.tasks[o as usize];
            assert_eq!(
                (n.kernel, n.pool(), n.stream, n.affinity()),
                (t.kernel, t.pool, t.stream, t.target)
            );
            let params: Vec<u64> = t.params.iter().map(|p| p.to_bits()).collect();
            assert_eq!(g.params_of(tid), &params[..]);
            let gt = gen_task(t);
            let io: Vec<(Region, Access)> = g
                .io_of(tid)
                .iter()
                .map(|io| (io.region, io.access()))
                .collect();
            assert_eq!(io, gt.regions);
            nodes.push(gt);
        }

        let reach = closure(g.len(), &graph_preds(&g));
        let reaches = |a: usize, b: usize| reach[b][a / 64] >> (a % 64) & 1 == 1;
        // (a) every structural order edge.
        for e in &x.order {
            for bi in e.before.clone() {
                for ai in e.after.clone() {
                    assert!(
                        reaches(ids[bi as usize], ids[ai as usize]),
                        "{name} {mode:?}: order edge {e:?} not implied for {bi} -> {ai}"
                    );
                }
            }
        }
        // (b) every conflicting pair.
        let overlap = match mode {
            DepsMode::Exact => Some(false),
            DepsMode::Overlap | DepsMode::Hybrid => Some(true),
            DepsMode::Explicit => None,
        };
        if let Some(overlap) = overlap {
            for j in 0..x.tasks.len() {
                for i in 0..j {
                    if conflict(&nodes[ids[i]], &nodes[ids[j]], overlap) {
                        assert!(
                            reaches(ids[i], ids[j]),
                            "{name} {mode:?}: conflicting tasks {i} and {j} unordered"
                        );
                    }
                }
            }
            random_execution(&g, &nodes, overlap, 6, 0x5eed + g.len() as u64);
        } else {
            assert_eq!(
                stats.raw + stats.waw + stats.war,
                0,
                "{name}: explicit mode"
            );
        }
        // Edges for order: |before| (through a barrier) + |after| per edge, at most.
        let bound: usize = x
            .order
            .iter()
            .map(|e| {
                e.after.len()
                    + if e.before.len() > 1 {
                        e.before.len()
                    } else {
                        0
                    }
            })
            .sum();
        assert!(
            stats.explicit as usize <= bound,
            "{name} {mode:?}: {} explicit edges, bound {bound}",
            stats.explicit
        );
        s.barrier_tasks
    }

    /// Every example with its `//@ bind` defaults, the big ones made small.
    fn examples() -> Vec<(String, Module, Bindings)> {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
        let mut paths: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "wsp"))
            .collect();
        paths.sort();
        assert!(paths.len() >= 7, "{paths:?}");
        paths
            .into_iter()
            .map(|p| {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                let text = std::fs::read_to_string(&p).unwrap();
                let m = pto_wsp_ir::parse(&text).unwrap();
                let mut b = Bindings::new();
                let small: &[&str] = match name.as_str() {
                    "llama7b_layer.wsp" => &["seq=64"],
                    "gemm.wsp" => &["M=512", "N=256", "K=512"],
                    "mha.wsp" => &["seq=128"],
                    _ => &[],
                };
                let defaults = text
                    .lines()
                    .filter_map(|l| l.trim_start().strip_prefix("//@ bind"));
                for spec in defaults.chain(small.iter().copied()) {
                    b.bind_str(&m, spec.trim()).unwrap();
                }
                (name, m, b)
            })
            .collect()
    }

    #[test]
    fn examples_feed_in_every_mode() {
        let mut tasks = 0;
        for (name, m, b) in examples() {
            for mode in MODES {
                check_feed(&name, &m, &b, mode);
            }
            tasks += pto_wsp_ir::expand(&resolved(&m), &b, &ExpandOptions::default())
                .unwrap()
                .tasks
                .len();
        }
        assert!(tasks > 1500, "{tasks} tasks");
    }

    /// A random nest of loops (`parallel_for` / `for_each` over `A0..A3`), `sequential` blocks
    /// and tasks reading, writing or updating `X[row, col +: 2]`.
    #[derive(Clone, Debug)]
    enum Node {
        Loop {
            ordered: bool,
            extent: u8,
            body: Vec<Node>,
        },
        Seq(Vec<Node>),
        Task {
            kernel: u8,
            row: u8,
            col: u8,
        },
    }

    fn node() -> impl Strategy<Value = Node> {
        (0u8..3, 0u8..4, 0u8..4)
            .prop_map(|(kernel, row, col)| Node::Task { kernel, row, col })
            .prop_recursive(4, 40, 4, |inner| {
                prop_oneof![
                    (
                        any::<bool>(),
                        0u8..4,
                        prop::collection::vec(inner.clone(), 0..3)
                    )
                        .prop_map(|(ordered, extent, body)| Node::Loop {
                            ordered,
                            extent,
                            body
                        }),
                    prop::collection::vec(inner, 0..4).prop_map(Node::Seq),
                ]
            })
    }

    /// The module's text.
    fn render(nodes: &[Node]) -> String {
        fn body(out: &mut String, nodes: &[Node], depth: usize) {
            for n in nodes {
                match n {
                    Node::Loop {
                        ordered,
                        extent,
                        body: b,
                    } => {
                        let kw = if *ordered { "for_each" } else { "parallel_for" };
                        out.push_str(&format!("{kw} v{depth} in A{extent} {{ "));
                        body(out, b, depth + 1);
                        out.push_str("} ");
                    }
                    Node::Seq(b) => {
                        out.push_str("sequential { ");
                        body(out, b, depth);
                        out.push_str("} ");
                    }
                    Node::Task { kernel, row, col } => {
                        let k = ["kin", "kout", "kio"][*kernel as usize];
                        let row = match depth {
                            0 => row.to_string(),
                            d => format!("v{} + {row}", d - 1),
                        };
                        out.push_str(&format!("task {k}(X[{row}, {col} +: 2]); "));
                    }
                }
            }
        }
        let mut out = String::from(
            "tensor X: f32[8, 8];
             axis A0 = dense(0); axis A1 = dense(1); axis A2 = dense(2); axis A3 = dense(3);
             kernel kin(in x: f32[1, 2]);
             kernel kout(out x: f32[1, 2]);
             kernel kio(inout x: f32[1, 2]);
             workload main() { ",
        );
        body(&mut out, nodes, 0);
        out.push('}');
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: pto_wsp_ir::soak::cases(64), ..ProptestConfig::default() })]

        #[test]
        fn random_nests_feed_in_every_mode(nodes in prop::collection::vec(node(), 1..5)) {
            let text = render(&nodes);
            let m = pto_wsp_ir::parse(&text).unwrap();
            for mode in MODES {
                check_feed(&text, &m, &Bindings::new(), mode);
            }
        }
    }

    /// Order edges with many earlier tasks (barriers), nested `for_each` and `sequential`,
    /// empty iterations, and tasks whose regions conflict across the structure.
    const ORDERED: &str = "
symbol n: i64;
tensor A: f32[64, 64];
tensor B: f32[64, 64];
axis I = dense_dyn(n);
axis J = dense(4);
kernel k(in a: f32[1, 16], out b: f32[1, 16], j: i64) @vector;
kernel r(inout b: f32[4, 64]) @cube;
workload main() {
    sequential {
        for_each i in I {
            parallel_for j in J {
                if i % 3 != 1 { task k(A[i, j * 16 +: 16], B[i, j * 16 +: 16], j); }
            }
            for_each j in J { task k(B[i, j * 16 +: 16], A[i + 8, j * 16 +: 16], j); }
        }
        task r(B[0 +: 4, 0 +: 64]);
        combine { }
        parallel_for i in I {
            for_each j in J { task k(A[i + 8, j * 16 +: 16], B[i + 16, j * 16 +: 16], i); }
        }
    }
}
";

    #[test]
    fn nested_order_edges_through_barriers() {
        let m = pto_wsp_ir::parse(ORDERED).unwrap();
        for n in [0i64, 1, 2, 4, 7] {
            let b = Bindings::new().symbol("n", n);
            for mode in MODES {
                let barriers = check_feed("ORDERED", &m, &b, mode);
                if n >= 2 {
                    assert!(barriers > 0);
                }
            }
        }
    }

    #[test]
    fn a_failing_hook_stops_the_feed_and_abandons_the_task() {
        let m = pto_wsp_ir::parse(ORDERED).unwrap();
        let b = Bindings::new().symbol("n", 3i64);
        let full = feed(
            &m,
            &b,
            &ExpandOptions::default(),
            &mut GraphBuilder::new(DepsMode::Exact),
            &mut NoHooks,
            ExecDomain::HostCpu,
        )
        .unwrap();
        let full_origin = full.origins.to_vec();
        let total = full_origin.len();
        let mut barrier_failures = 0;
        for k in 0..total {
            // before_submit fails for task k: k tasks stay, k is abandoned.
            let mut builder = GraphBuilder::new(DepsMode::Exact);
            let mut hooks = Recording {
                fail_before: Some(k),
                ..Recording::default()
            };
            let mut feeder = Feeder::new(&mut builder, &mut hooks, ExecDomain::HostCpu);
            let r =
                pto_wsp_ir::expand_with(&resolved(&m), &b, &ExpandOptions::default(), &mut feeder);
            let summary = r.clone().unwrap();
            assert!(summary.stopped);
            let fed_users = (0..summary.tasks)
                .filter(|&i| feeder.task_id(i).is_some())
                .count();
            assert_eq!(feeder.submitted(), k);
            // The expander stopped at the task after the last one fed (a failed barrier is
            // reported by the `task` call that follows its announcement).
            let users = full_origin[..k].iter().filter(|&&o| o != NO_ORIGIN).count();
            assert_eq!((fed_users, summary.tasks as usize), (users, users + 1));
            let err = feeder.finish(r).unwrap_err();
            assert_eq!(err, FeedError::Hook(format!("refused #{k}")));
            assert_eq!(builder.len(), k, "the failing task is abandoned");
            if full_origin[k] == NO_ORIGIN {
                barrier_failures += 1;
            }
            let g = builder.finish();
            check_storage(&g);

            // after_submit fails for task k: k + 1 tasks stay, all mapped.
            let mut builder = GraphBuilder::new(DepsMode::Exact);
            let mut hooks = Recording {
                fail_after: Some(k),
                ..Recording::default()
            };
            let mut feeder = Feeder::new(&mut builder, &mut hooks, ExecDomain::HostCpu);
            let r =
                pto_wsp_ir::expand_with(&resolved(&m), &b, &ExpandOptions::default(), &mut feeder);
            assert_eq!(feeder.submitted(), k + 1);
            for (id, &o) in full_origin[..=k].iter().enumerate() {
                let id = TaskId(id as u32);
                assert_eq!(feeder.index_of(id), (o != NO_ORIGIN).then_some(o));
                if o != NO_ORIGIN {
                    assert_eq!(feeder.task_id(o), Some(id));
                }
            }
            let err = feeder.finish(r).unwrap_err();
            assert_eq!(err, FeedError::Hook(format!("gave up after #{k}")));
            assert_eq!(builder.len(), k + 1);
        }
        assert!(barrier_failures > 0, "some failures hit a barrier");
    }

    #[test]
    fn builder_and_expander_errors_come_back() {
        // A 5-d region: the builder refuses it.
        let m = pto_wsp_ir::parse(
            "tensor T: f32[2, 2, 2, 2, 2];
             kernel k(in t: f32[1, 1, 1, 1, 1]);
             axis I = dense(3);
             workload main() { parallel_for i in I { task k(T[0, 0, 0, 0, 0]); } }",
        )
        .unwrap();
        let mut builder = GraphBuilder::new(DepsMode::Overlap);
        let err = feed(
            &m,
            &Bindings::new(),
            &ExpandOptions::default(),
            &mut builder,
            &mut NoHooks,
            ExecDomain::HostCpu,
        )
        .unwrap_err();
        assert!(
            matches!(
                err,
                FeedError::Build(BuildError::RankTooHigh {
                    task: TaskId(0),
                    rank: 5,
                    ..
                })
            ),
            "{err:?}"
        );
        assert!(builder.is_empty());
        // An unbound symbol: the expander's error.
        let m = pto_wsp_ir::parse(ORDERED).unwrap();
        let err = feed(
            &m,
            &Bindings::new(),
            &ExpandOptions::default(),
            &mut GraphBuilder::new(DepsMode::Exact),
            &mut NoHooks,
            ExecDomain::HostCpu,
        )
        .unwrap_err();
        assert!(
            matches!(&err, FeedError::Expand(pto_wsp_ir::ExpandError::Binding(pto_wsp_ir::BindingError::MissingSymbol { name })) if name == "n"),
            "{err:?}"
        );
        assert_eq!(err.to_string(), "symbol `n` is not bound");
    }

    #[test]
    fn a_feed_after_earlier_tasks_maps_ids_and_indices() {
        let m = pto_wsp_ir::parse(ORDERED).unwrap();
        let b = Bindings::new().symbol("n", 2i64);
        let mut builder = GraphBuilder::new(DepsMode::Overlap);
        for _ in 0..3 {
            builder.alloc_task(0, ExecDomain::HostCpu, ExecPool::Any, 0, None);
            builder.submit().unwrap();
        }
        let x = pto_wsp_ir::expand(&resolved(&m), &b, &ExpandOptions::default()).unwrap();
        let mut hooks = NoHooks;
        let mut feeder = Feeder::new(&mut builder, &mut hooks, ExecDomain::HostCpu);
        let r = pto_wsp_ir::expand_with(&resolved(&m), &b, &ExpandOptions::default(), &mut feeder);
        for i in 0..x.tasks.len() as u32 {
            let id = feeder.task_id(i).unwrap();
            assert!(id.0 >= 3);
            assert_eq!(feeder.index_of(id), Some(i));
        }
        assert_eq!(feeder.task_id(x.tasks.len() as u32), None);
        assert_eq!(feeder.index_of(TaskId(0)), None);
        let s = feeder.finish(r).unwrap();
        assert_eq!(s.first, TaskId(3));
        assert_eq!(s.origins.len() + 3, builder.len());
        assert_eq!(s.index_of(TaskId(2)), None);
        let first_user = s.origins.to_vec().iter().position(|&o| o == 0).unwrap();
        assert_eq!(s.index_of(TaskId(3 + first_user as u32)), Some(0));
        // Truncated: the order edges clipped at the limit still hold.
        let opts = ExpandOptions {
            limit: Some(x.tasks.len() / 2),
            ..ExpandOptions::default()
        };
        let mut builder = GraphBuilder::new(DepsMode::Explicit);
        let s = feed(
            &m,
            &b,
            &opts,
            &mut builder,
            &mut NoHooks,
            ExecDomain::HostCpu,
        )
        .unwrap();
        assert!(s.expand.truncated);
        assert_eq!(s.user_tasks as usize, x.tasks.len() / 2);
    }
}

/// A map that hints only regions of even tensors and records the hint each access got.
#[derive(Default)]
struct EvenHints {
    got: Vec<(u32, Option<u64>)>,
}

impl TensorMap for EvenHints {
    fn access<F: FnMut(TaskId, pto_wsp_graph::types::EdgeKind)>(
        &mut self,
        _: TaskId,
        region: &Region,
        _: Access,
        _: &mut F,
    ) {
        self.got.push((region.tensor, None));
    }
    fn prefetch(&self, region: &Region) -> Option<u64> {
        region
            .tensor
            .is_multiple_of(2)
            .then_some(100 + region.tensor as u64)
    }
    fn access_hinted<F: FnMut(TaskId, pto_wsp_graph::types::EdgeKind)>(
        &mut self,
        _: TaskId,
        region: &Region,
        hint: Option<u64>,
        _: Access,
        _: &mut F,
    ) {
        self.got.push((region.tensor, hint));
    }
    fn retire_before(&mut self, _: TaskId) {}
    fn clear(&mut self) {}
    fn stats(&self) -> pto_wsp_graph::tensor_map::MapStats {
        Default::default()
    }
}

/// Each region gets its own hint when every region of the task has one, and no region gets a
/// hint otherwise (never another region's).
#[test]
fn hints_reach_their_own_regions_or_none() {
    let mut b = GraphBuilder::with_map(EvenHints::default(), CollectEdges::default());
    let tasks: [&[u32]; 3] = [&[0, 2, 4], &[0, 1, 2], &[3, 6]];
    for tensors in tasks {
        b.alloc_task(0, ExecDomain::HostCpu, ExecPool::Any, 0, None);
        for &t in tensors {
            b.add_input(Region::new_2d(t, 0, 1, 0, 1));
        }
        b.submit().unwrap();
    }
    let mut want = Vec::new();
    for tensors in tasks {
        let all = tensors.iter().all(|t| t.is_multiple_of(2));
        want.extend(tensors.iter().map(|&t| (t, all.then_some(100 + t as u64))));
    }
    assert_eq!(b.map().got, want);
    assert!(want.iter().any(|w| w.1.is_some()) && want.iter().any(|w| w.1.is_none()));
}

/// Every call a builder makes on its sink, for comparing two builders' outputs.
#[derive(Debug, PartialEq, Eq)]
enum SinkCall {
    Edge(u32, u32),
    Publish(pto_wsp_graph::storage::TaskNode, Vec<u64>, Vec<TaskIo>),
    Submitted(u32),
    Hint(Option<u32>),
}

/// A sink that records every call and says every task more than `lag` behind the newest has
/// completed; `forgets` lets the builder drop submitted tasks (as a streamed run's sink does).
struct Recorder {
    calls: Vec<SinkCall>,
    forgets: bool,
    submitted: u32,
    lag: u32,
}

impl EdgeSink for Recorder {
    fn edge(&mut self, pred: TaskId, succ: TaskId) {
        self.calls.push(SinkCall::Edge(pred.0, succ.0));
    }
    fn submitted(&mut self, task: TaskId) {
        self.submitted = task.0 + 1;
        self.calls.push(SinkCall::Submitted(task.0));
    }
    fn publish(&mut self, node: &pto_wsp_graph::storage::TaskNode, params: &[u64], io: &[TaskIo]) {
        self.calls
            .push(SinkCall::Publish(*node, params.to_vec(), io.to_vec()));
    }
    fn retire_hint(&mut self) -> Option<TaskId> {
        let h = self.submitted.checked_sub(self.lag);
        self.calls.push(SinkCall::Hint(h));
        h.map(TaskId)
    }
    fn forgets_tasks(&self) -> bool {
        self.forgets
    }
}

/// A builder whose sink forgets tasks (each task staged, then handed to the sink once) makes
/// the same calls on its sink as one that keeps every task, in every mode, across several
/// retire periods, with explicit dependencies on tasks whose stamps were already dropped
/// (repeated, so the forgotten-predecessor dedup runs) and params.
#[test]
fn a_builder_that_forgets_submitted_tasks_reports_what_one_that_keeps_them_reports() {
    use pto_wsp_graph::builder::RETIRE_EVERY;
    let n = 3 * RETIRE_EVERY + 700;
    for (mode, seed) in [
        (DepsMode::Exact, 1u64),
        (DepsMode::Overlap, 2),
        (DepsMode::Hybrid, 3),
        (DepsMode::Explicit, 4),
    ] {
        let run = |forgets: bool| {
            let sink = Recorder {
                calls: Vec::new(),
                forgets,
                submitted: 0,
                lag: 300,
            };
            let map = AnyTensorMap::for_mode(mode, ExactMap::Growable);
            let mut b = GraphBuilder::with_map(map, sink);
            let mut x = seed;
            let mut next = || {
                x = pto_wsp_ir::expand::splitmix64(x);
                x
            };
            for j in 0..n {
                let r = next();
                b.alloc_task((r % 5) as u32, ExecDomain::HostCpu, ExecPool::Any, 0, None);
                for k in 0..(r >> 8) % 4 {
                    let t = ((r >> (12 + 4 * k)) % 3) as u32;
                    let row = ((r >> (20 + 3 * k)) % 64) as u32;
                    let access =
                        [Access::In, Access::Out, Access::InOut][((r >> (40 + k)) % 3) as usize];
                    b.add_access(
                        Region::new_2d(t, row * 2, 2 + (k as u32 % 2) * 2, 0, 4),
                        access,
                    );
                }
                if r % 7 == 0 {
                    b.add_param(r);
                }
                if j > 0 && r % 5 == 0 {
                    // An earlier task, often one far behind the completed prefix, named twice.
                    let d = (r >> 30) as u32 % j;
                    b.add_explicit_dep(TaskId(d)).unwrap();
                    b.add_explicit_dep(TaskId(d)).unwrap();
                }
                b.submit().unwrap();
            }
            if forgets {
                assert!(
                    b.held_tasks() <= 1,
                    "a forgetting builder holds {}",
                    b.held_tasks()
                );
            } else {
                assert_eq!(b.held_tasks(), n as usize);
            }
            let stats = b.stats();
            (b.sink_mut().calls.split_off(0), stats)
        };
        let (kept, kept_stats) = run(false);
        let (forgot, forgot_stats) = run(true);
        assert_eq!(kept.len(), forgot.len(), "{mode:?}");
        for (i, (a, b)) in kept.iter().zip(&forgot).enumerate() {
            assert_eq!(a, b, "{mode:?}: call {i}");
        }
        assert_eq!(kept_stats, forgot_stats, "{mode:?}");
        assert!(kept.iter().any(|c| matches!(c, SinkCall::Hint(Some(_)))));
    }
}

/// How [`build_whole`] submits each task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Whole {
    /// `alloc_task`, `add_param`, `add_explicit_dep`, `submit_ios` (`abandon` on a refusal).
    Calls,
    /// One `submit_task`.
    OneCall,
}

/// Builds the stream into `b`, each task with its index as kernel, stream and params, its
/// regions given at submission. Before the task `j` with `refused[j]`, two attempts that fail
/// and leave nothing: one whose hook refuses, one naming a dependency on itself (a forward
/// one). Returns the errors met, in order, with the id each hook was given.
fn build_whole<M: TensorMap, S: EdgeSink>(
    tasks: &[GenTask],
    b: &mut GraphBuilder<M, S>,
    how: Whole,
    refused: &[bool],
) -> Vec<String> {
    use pto_wsp_graph::builder::{SubmitError, TaskHead};
    let mut seen = Vec::new();
    let mut io = Vec::new();
    for (j, t) in tasks.iter().enumerate() {
        io.clear();
        io.extend(t.regions.iter().map(|&(r, a)| TaskIo::new(r, a)));
        let head = TaskHead {
            kernel: j as u32 % 7,
            domain: ExecDomain::HostCpu,
            pool: if j % 2 == 0 {
                ExecPool::Any
            } else {
                ExecPool::Vector
            },
            stream: j as u32 % 3,
            affinity: (j % 4 == 1).then_some(j as u32 % 5),
        };
        let params = [j as u64 * 7, j as u64 ^ 0x55];
        let mut deps: Vec<TaskId> = explicit_deps(tasks, j)
            .into_iter()
            .map(|d| TaskId(d as u32))
            .collect();
        let mut attempts = vec![(false, true)];
        if refused.get(j).copied().unwrap_or(false) {
            attempts.insert(0, (true, false));
            attempts.insert(0, (false, false));
        }
        for (forward, accept) in attempts {
            let next = TaskId(b.len() as u32);
            if forward {
                deps.push(next);
            }
            let r = match how {
                Whole::OneCall => b
                    .submit_task(
                        head,
                        |out| params.iter().for_each(|&p| out.push(p)),
                        &io,
                        deps.iter().copied(),
                        |id| {
                            seen.push(format!("hook {}", id.0));
                            if accept { Ok(()) } else { Err(id.0) }
                        },
                    )
                    .map_err(|e| match e {
                        SubmitError::Build(e) => format!("build {e}"),
                        SubmitError::Before(id) => format!("refused {id}"),
                    }),
                Whole::Calls => {
                    let id = b.alloc_task(
                        head.kernel,
                        head.domain,
                        head.pool,
                        head.stream,
                        head.affinity,
                    );
                    params.iter().for_each(|&p| b.add_param(p));
                    let r = deps
                        .iter()
                        .try_for_each(|&d| b.add_explicit_dep(d))
                        .map_err(|e| format!("build {e}"))
                        .and_then(|()| {
                            seen.push(format!("hook {}", id.0));
                            if accept {
                                Ok(())
                            } else {
                                Err(format!("refused {}", id.0))
                            }
                        })
                        .and_then(|()| b.submit_ios(&io).map_err(|e| format!("build {e}")));
                    if r.is_err() {
                        b.abandon();
                    }
                    r
                }
            };
            if forward {
                deps.pop();
            }
            match r {
                Ok(id) => assert_eq!(id, next, "task {j}: the next id"),
                Err(e) => seen.push(e),
            }
        }
        assert_eq!(b.len(), j + 1, "task {j}: one task more");
    }
    seen
}

/// A sink that forgets tasks and keeps every node, params and regions published, and every edge.
#[derive(Default, Debug, PartialEq)]
struct Published {
    edges: Vec<(u32, u32)>,
    submitted: Vec<u32>,
    nodes: Vec<(pto_wsp_graph::storage::TaskNode, Vec<u64>, Vec<TaskIo>)>,
}

impl EdgeSink for Published {
    fn edge(&mut self, pred: TaskId, succ: TaskId) {
        self.edges.push((pred.0, succ.0));
    }
    fn submitted(&mut self, task: TaskId) {
        self.submitted.push(task.0);
    }
    fn publish(&mut self, node: &pto_wsp_graph::storage::TaskNode, params: &[u64], io: &[TaskIo]) {
        self.nodes.push((*node, params.to_vec(), io.to_vec()));
    }
    fn forgets_tasks(&self) -> bool {
        true
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(pto_wsp_ir::soak::cases(64)))]

    /// A task submitted in one call (`submit_task`) builds what the open task's calls build —
    /// the same edges, nodes, params, regions and counters, for a sink that forgets tasks (the
    /// staged path) and for one that keeps them (the finished graph) — and a refusal (the
    /// hook's, or a forward dependency) leaves nothing, as `abandon` does, with the same error.
    #[test]
    fn one_call_submission_builds_what_the_open_task_calls_build(
        tasks in stream_strategy(),
        refused in prop::collection::vec(any::<bool>(), 0..200),
    ) {
        for k in 0..three_maps().len() {
            let run = |how| {
                let map = three_maps().swap_remove(k);
                let mut b = GraphBuilder::with_map(map, Published::default());
                let seen = build_whole(&tasks, &mut b, how, &refused);
                let stats = b.stats();
                (seen, stats, b.into_parts().1)
            };
            let (want, got) = (run(Whole::Calls), run(Whole::OneCall));
            prop_assert_eq!(&got, &want, "staged, map {}", k);
            prop_assert_eq!(want.2.nodes.len(), tasks.len());
            let run = |how| {
                let map = three_maps().swap_remove(k);
                let mut b = GraphBuilder::with_map(map, CollectEdges::default());
                let seen = build_whole(&tasks, &mut b, how, &refused);
                let stats = b.stats();
                (seen, stats, b.finish())
            };
            let (want, got) = (run(Whole::Calls), run(Whole::OneCall));
            prop_assert_eq!(&got, &want, "kept, map {}", k);
        }
    }
}
