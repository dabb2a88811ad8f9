//! Dependency inference against brute-force oracles.
//!
//! The oracle: tasks `i < j` conflict iff some region of `i` and some region of `j` name the same
//! tensor, intersect (overlap modes) or are the identical box (exact mode), and at least one of
//! the two accesses writes. The inferred graph must order exactly the pairs the oracle's graph
//! orders (equal transitive closures), with no edge between non-conflicting tasks; random
//! topological executions with several tasks in flight must never run two conflicting tasks at
//! once.

use proptest::prelude::*;
use pto_wsp_graph::builder::{BuildError, ExactMap, GraphBuilder};
use pto_wsp_graph::storage::TaskGraphStorage;
use pto_wsp_graph::tensor_map::{DynamicExactMap, FixedExactMap, OverlapMap, TensorMap};
use pto_wsp_graph::types::{Access, ExecDomain, ExecPool, Region, TaskId};
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
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

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
            (DepsMode::Exact, ExactMap::Dynamic),
            (DepsMode::Overlap, ExactMap::Dynamic),
        ] {
            let full = build(&tasks, mode, exact);
            // Before submitting task `at`, tasks older than `at - lag` are complete.
            let mut oldest = vec![0usize; tasks.len()];
            let mut cur = 0usize;
            let mut points: Vec<(usize, usize)> = retire.clone();
            points.sort_unstable();
            let b = GraphBuilder::with_exact_map(mode, exact);
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

/// The LLaMA example at two row tiles, through the expander, in hybrid mode: the same
/// reachability as the overlap oracle.
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
    pto_wsp_ir::expand_each(&module, &bindings, &Default::default(), |_, t| {
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
    for (j, ps) in got.iter().enumerate() {
        for p in ps {
            assert!(
                want[j].binary_search(p).is_ok(),
                "edge {p} -> {j} without conflict"
            );
        }
    }
    assert_eq!(closure(tasks.len(), &got), closure(tasks.len(), &want));
    assert_eq!(stats.tasks, 972);
    assert!(stats.raw > 0 && stats.war == 0, "{stats:?}");
    random_execution(&g, &tasks, true, 8, 12345);
}
