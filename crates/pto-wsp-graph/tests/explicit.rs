//! The explicit-edge builder against the general builder in explicit mode and against a naive
//! adjacency: the same graph (nodes, CSR fan-out, fan-in), the same sink calls, the same
//! counters and errors, on random task lists with duplicate, short and long predecessor lists.

use proptest::prelude::*;
use pto_wsp_graph::builder::{BuildError, CollectEdges, EdgeSink, GraphBuilder, RETIRE_EVERY};
use pto_wsp_graph::explicit::{ExplicitBuilder, ExplicitEdges, ExplicitTask};
use pto_wsp_graph::storage::{TaskGraphStorage, TaskNode};
use pto_wsp_graph::types::{ExecDomain, ExecPool, SchedTags, TaskId, TaskIo};
use pto_wsp_ir::DepsMode;
use std::collections::BTreeSet;

/// One task of a generated graph: its fields and its predecessor list (earlier ids, possibly
/// repeated).
#[derive(Clone, Debug)]
struct Spec {
    task: ExplicitTask,
    preds: Vec<u32>,
}

fn task_strategy() -> impl Strategy<Value = ExplicitTask> {
    (
        0u32..4,
        prop_oneof![
            Just(ExecDomain::HostCpu),
            Just(ExecDomain::AscendAiCore),
            Just(ExecDomain::AmdAieTile)
        ],
        prop_oneof![
            Just(ExecPool::Any),
            Just(ExecPool::Vector),
            Just(ExecPool::Cube)
        ],
        0u32..3,
        proptest::option::of(0u32..4),
        0u16..4,
    )
        .prop_map(
            |(kernel, domain, pool, stream, affinity, tags)| ExplicitTask {
                kernel,
                domain,
                pool,
                stream,
                affinity,
                tags: SchedTags(tags),
            },
        )
}

/// Up to `n` tasks; task `i` names up to 24 predecessors (so both the short and the long
/// deduplication run), drawn from `0..i` with repeats.
fn graph_strategy(n: usize) -> impl Strategy<Value = Vec<Spec>> {
    proptest::collection::vec(
        (
            task_strategy(),
            proptest::collection::vec(any::<u32>(), 0..24),
        ),
        0..n,
    )
    .prop_map(|v| {
        v.into_iter()
            .enumerate()
            .map(|(i, (task, raw))| Spec {
                task,
                preds: if i == 0 {
                    Vec::new()
                } else {
                    // Few distinct values, so duplicates are common.
                    raw.into_iter()
                        .map(|r| (r % (i as u32).min(6 + r % 3)) + (i as u32).saturating_sub(6))
                        .map(|p| p.min(i as u32 - 1))
                        .collect()
                },
            })
            .collect()
    })
}

fn ids(preds: &[u32]) -> Vec<TaskId> {
    preds.iter().map(|&p| TaskId(p)).collect()
}

fn build_general(specs: &[Spec]) -> (TaskGraphStorage, [u64; 3]) {
    let mut b = GraphBuilder::new(DepsMode::Explicit);
    for s in specs {
        b.add_explicit(&s.task, &ids(&s.preds)).unwrap();
    }
    let st = b.stats();
    (b.finish(), [st.tasks, st.explicit, st.duplicates])
}

fn build_explicit(specs: &[Spec]) -> (TaskGraphStorage, [u64; 3]) {
    let mut b = ExplicitBuilder::new();
    for s in specs {
        b.add(&s.task, &ids(&s.preds)).unwrap();
    }
    let st = b.stats();
    (b.finish(), [st.tasks, st.explicit, st.duplicates])
}

/// The graph written out from the specs alone: each task's distinct predecessors.
fn oracle(specs: &[Spec]) -> Vec<BTreeSet<u32>> {
    specs
        .iter()
        .map(|s| s.preds.iter().copied().collect())
        .collect()
}

fn check_against_oracle(specs: &[Spec], g: &TaskGraphStorage) {
    let want = oracle(specs);
    assert_eq!(g.tasks.len(), specs.len());
    let mut got = vec![BTreeSet::new(); specs.len()];
    for (p, s) in g.edges() {
        assert!(p < s, "edge {p:?} -> {s:?} goes backwards");
        assert!(got[s.index()].insert(p.0), "edge {p:?} -> {s:?} twice");
    }
    assert_eq!(got, want);
    for (i, (n, s)) in g.tasks.iter().zip(specs).enumerate() {
        assert_eq!(n.id, TaskId(i as u32));
        assert_eq!(n.fanin as usize, want[i].len());
        assert_eq!(n.kernel, s.task.kernel);
        assert_eq!(n.stream, s.task.stream);
        assert_eq!(n.affinity(), s.task.affinity);
        assert_eq!(n.pool(), s.task.pool);
        assert_eq!(n.domain, s.task.domain);
        assert_eq!(n.tags, s.task.tags);
        assert_eq!((n.params_count, n.io_count), (0, 0));
    }
}

/// Every call a builder makes on its sink, in order.
#[derive(Debug, Default, PartialEq, Eq)]
struct Recording {
    calls: Vec<Call>,
    forgets: bool,
}

#[derive(Debug, PartialEq, Eq)]
enum Call {
    Edge(u32, u32),
    Publish(TaskNode, usize, usize),
    Submitted(u32),
    RetireHint,
}

impl EdgeSink for Recording {
    fn edge(&mut self, pred: TaskId, succ: TaskId) {
        self.calls.push(Call::Edge(pred.0, succ.0));
    }
    fn submitted(&mut self, task: TaskId) {
        self.calls.push(Call::Submitted(task.0));
    }
    fn publish(&mut self, node: &TaskNode, params: &[u64], io: &[TaskIo]) {
        self.calls
            .push(Call::Publish(*node, params.len(), io.len()));
    }
    fn retire_hint(&mut self) -> Option<TaskId> {
        self.calls.push(Call::RetireHint);
        None
    }
    fn forgets_tasks(&self) -> bool {
        self.forgets
    }
}

fn record<B: ExplicitEdges>(b: &mut B, specs: &[Spec]) {
    for s in specs {
        b.add_explicit(&s.task, &ids(&s.preds)).unwrap();
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The same graph and counters as the general builder, and the graph the specs name.
    #[test]
    fn the_explicit_builder_builds_the_general_builders_graph(specs in graph_strategy(120)) {
        let (general, gs) = build_general(&specs);
        let (explicit, es) = build_explicit(&specs);
        check_against_oracle(&specs, &general);
        check_against_oracle(&specs, &explicit);
        prop_assert_eq!(&explicit.tasks, &general.tasks);
        prop_assert_eq!(&explicit.fanout, &general.fanout);
        prop_assert!(explicit.params.is_empty() && explicit.io.is_empty());
        prop_assert_eq!(es, gs);
    }

    /// The same sink calls in the same order (edges of lists of up to 16 in the order given;
    /// longer lists in increasing order), whether or not the sink forgets tasks.
    #[test]
    fn the_sink_sees_what_the_general_builder_reports(
        specs in graph_strategy(60),
        forgets in any::<bool>(),
    ) {
        let mut g = GraphBuilder::with_map(
            pto_wsp_graph::tensor_map::AnyTensorMap::None,
            Recording { forgets, ..Recording::default() },
        );
        record(&mut g, &specs);
        let mut e = ExplicitBuilder::with_sink(Recording { forgets, ..Recording::default() });
        record(&mut e, &specs);
        let (mut want, mut got) = (g.sink().calls.iter(), e.sink().calls.iter());
        for s in &specs {
            // The edges of one task: equal as lists when short, as sets when long.
            let distinct: BTreeSet<u32> = s.preds.iter().copied().collect();
            let w: Vec<_> = want.by_ref().take(distinct.len()).collect();
            let o: Vec<_> = got.by_ref().take(distinct.len()).collect();
            if s.preds.len() <= 16 {
                prop_assert_eq!(&w, &o);
            } else {
                let ws: BTreeSet<_> = w.iter().map(|c| format!("{c:?}")).collect();
                let os: BTreeSet<_> = o.iter().map(|c| format!("{c:?}")).collect();
                prop_assert_eq!(ws, os);
                let increasing = o.windows(2).all(|p| match (p[0], p[1]) {
                    (Call::Edge(a, _), Call::Edge(b, _)) => a < b,
                    _ => false,
                });
                prop_assert!(increasing, "long list not in increasing order: {:?}", o);
            }
            // Then publish and submitted.
            prop_assert_eq!(want.next(), got.next());
            prop_assert_eq!(want.next(), got.next());
        }
        prop_assert_eq!(want.next(), None);
        prop_assert_eq!(got.next(), None);
    }
}

#[test]
fn both_builders_ask_for_a_retire_hint_every_retire_period() {
    let specs: Vec<Spec> = (0..2 * RETIRE_EVERY + 5)
        .map(|i| Spec {
            task: ExplicitTask::host(0),
            preds: if i == 0 { vec![] } else { vec![i - 1] },
        })
        .collect();
    let mut g = GraphBuilder::with_map(
        pto_wsp_graph::tensor_map::AnyTensorMap::None,
        Recording::default(),
    );
    record(&mut g, &specs);
    let mut e = ExplicitBuilder::with_sink(Recording::default());
    record(&mut e, &specs);
    let hints = |r: &Recording| {
        r.calls
            .iter()
            .enumerate()
            .filter(|(_, c)| **c == Call::RetireHint)
            .map(|(i, _)| i)
            .collect::<Vec<_>>()
    };
    assert_eq!(hints(e.sink()).len(), 2);
    assert_eq!(hints(e.sink()), hints(g.sink()));
    assert_eq!(e.sink().calls, g.sink().calls);
}

#[test]
fn a_dependency_that_is_not_earlier_fails_and_leaves_nothing() {
    for bad in [
        vec![0, 2],
        vec![2],
        vec![0, 5, 1],
        vec![0; 20].into_iter().chain([3]).collect(),
    ] {
        let mut g = GraphBuilder::with_map(
            pto_wsp_graph::tensor_map::AnyTensorMap::None,
            Recording::default(),
        );
        let mut e = ExplicitBuilder::with_sink(Recording::default());
        let t = ExplicitTask::host(1);
        for b in [&mut g as &mut dyn ExplicitEdges, &mut e] {
            b.add_explicit(&t, &[]).unwrap();
            b.add_explicit(&t, &[TaskId(0)]).unwrap();
        }
        let ge = g.add_explicit(&t, &ids(&bad)).unwrap_err();
        let ee = e.add_explicit(&t, &ids(&bad)).unwrap_err();
        assert_eq!(ee, ge);
        let dep = *bad.iter().find(|&&p| p >= 2).unwrap();
        assert_eq!(
            ee,
            BuildError::ForwardDep {
                task: TaskId(2),
                dep: TaskId(dep)
            }
        );
        // Nothing of the refused task reached the sink; the next task takes its id.
        assert_eq!(e.sink().calls, g.sink().calls);
        for b in [&g as &dyn ExplicitEdges, &e] {
            assert_eq!(b.tasks_added(), 2, "the refused task is not counted");
        }
        assert_eq!(e.add(&t, &[TaskId(1)]).unwrap(), TaskId(2));
        assert_eq!(g.add_explicit(&t, &[TaskId(1)]).unwrap(), TaskId(2));
        assert_eq!(e.sink().calls, g.sink().calls);
        assert_eq!(e.len(), 3);
        assert!(!e.is_empty());
        for b in [&g as &dyn ExplicitEdges, &e] {
            assert_eq!(b.tasks_added(), 3);
        }
    }
}

#[test]
fn an_empty_build_is_an_empty_graph() {
    let b = ExplicitBuilder::new();
    assert!(b.is_empty());
    let g = b.finish();
    assert_eq!(g, GraphBuilder::new(DepsMode::Explicit).finish());
    assert!(g.tasks.is_empty() && g.fanout.is_empty());
    let _ = CollectEdges::default();
}
