//! The host run's generator: the bytecode interpreter feeding the builder
//! (`pto_wsp::cpu::feed_bytecode`) against the reference expander feeding it
//! (`pto_wsp::graph::feed::feed`). The same graph — tasks (kernel, pool, stream, target,
//! params, regions), barriers, explicit dependencies and inferred edges, task for task — and
//! the user tasks are the expander's own task list (the independent reference), on every
//! example and on random workloads under random schedules. Modules the bytecode cannot express
//! keep the expander; an interpreter error is reported in the expander's words.

use std::collections::BTreeSet;

use proptest::prelude::*;
use pto_wsp::cpu::feed_bytecode;
use pto_wsp::graph::builder::GraphBuilder;
use pto_wsp::graph::feed::{FeedSummary, FeedTask, NO_ORIGIN, feed};
use pto_wsp::graph::storage::TaskGraphStorage;
use pto_wsp::graph::types::Region;
use pto_wsp::graph::{ExecDomain, TaskId};
use pto_wsp::ir::DepsMode;
use pto_wsp::ir::{Bindings, ExpandOptions, Module, expand, parse};
use pto_wsp::kernels::KernelRegistry;
use pto_wsp::program::read_only_tensors;
use pto_wsp::{CompileOptions, compile, lower};

use super::resolved;
use crate::differential::module_text;
use crate::example;

/// One task of a built graph as everything downstream sees it.
type Row = (u32, String, u32, Option<u32>, Vec<u64>, Vec<String>);

fn rows(g: &TaskGraphStorage) -> Vec<Row> {
    (0..g.len())
        .map(|i| {
            let id = TaskId(i as u32);
            let n = &g.tasks[i];
            (
                n.kernel,
                format!("{:?}", n.pool()),
                n.stream,
                n.affinity(),
                g.params_of(id).to_vec(),
                g.io_of(id)
                    .iter()
                    .map(|io| format!("{:?} {:?}", io.access(), io.region))
                    .collect(),
            )
        })
        .collect()
}

fn edges(g: &TaskGraphStorage) -> BTreeSet<(u32, u32)> {
    g.edges().map(|(p, s)| (p.0, s.0)).collect()
}

/// Records each user task's priority and cost as the hooks see them.
#[derive(Default)]
struct Keys(Vec<(Option<u32>, i64, Option<u64>)>);

impl pto_wsp::graph::feed::FeedHooks for Keys {
    type Error = std::convert::Infallible;
    fn before_submit(
        &mut self,
        _: TaskId,
        task: Option<(u32, &dyn FeedTask)>,
    ) -> Result<(), Self::Error> {
        self.0.push(match task {
            Some((i, t)) => (Some(i), t.priority(), t.cost()),
            None => (None, 0, None),
        });
        Ok(())
    }
}

fn by_expander(m: &Module, b: &Bindings) -> (FeedSummary, TaskGraphStorage, Keys) {
    by_expander_in(m, b, lower(m).unwrap().config().deps, &[])
}

/// [`by_expander`] under `deps`, the builder's read-only mask `read_only`.
fn by_expander_in(
    m: &Module,
    b: &Bindings,
    deps: DepsMode,
    read_only: &[bool],
) -> (FeedSummary, TaskGraphStorage, Keys) {
    let mut builder = GraphBuilder::new(deps);
    builder.set_read_only(read_only);
    let mut keys = Keys::default();
    let s = feed(
        &resolved(m),
        b,
        &ExpandOptions::default(),
        &mut builder,
        &mut keys,
        ExecDomain::default(),
    )
    .unwrap();
    (s, builder.finish(), keys)
}

fn by_bytecode(m: &Module, b: &Bindings) -> (FeedSummary, TaskGraphStorage, Keys) {
    by_bytecode_in(m, b, lower(m).unwrap().config().deps, &[])
}

/// [`by_bytecode`] under `deps`, the builder's read-only mask `read_only`.
fn by_bytecode_in(
    m: &Module,
    b: &Bindings,
    deps: DepsMode,
    read_only: &[bool],
) -> (FeedSummary, TaskGraphStorage, Keys) {
    let bytes = pto_wsp::bytecode::encode(&resolved(m), &Default::default()).unwrap();
    let program = pto_wsp::bytecode::Program::decode(&bytes).unwrap();
    let bound = program.bind(b).unwrap();
    let mut builder = GraphBuilder::new(deps);
    builder.set_read_only(read_only);
    let mut keys = Keys::default();
    let s = feed_bytecode(
        &program,
        &bound,
        &mut builder,
        &mut keys,
        ExecDomain::default(),
    )
    .unwrap();
    (s, builder.finish(), keys)
}

/// Both generators build the same graph, and its user tasks are the expander's task list.
fn check_same_graph(name: &str, m: &Module, b: &Bindings) {
    let (xs, xg, xk) = by_expander(m, b);
    let (bs, bg, bk) = by_bytecode(m, b);
    assert_eq!(
        (bs.user_tasks, bs.barrier_tasks, bs.first),
        (xs.user_tasks, xs.barrier_tasks, xs.first),
        "{name}: task and barrier counts"
    );
    assert_eq!(
        bs.origins, xs.origins,
        "{name}: barriers in the same places"
    );
    assert_eq!(rows(&bg), rows(&xg), "{name}: tasks");
    assert_eq!(edges(&bg), edges(&xg), "{name}: edges");
    assert_eq!(bk.0, xk.0, "{name}: priorities and costs");
    assert_eq!(bs.expand.tasks, xs.expand.tasks, "{name}");
    check_read_only_skip(name, m, b);

    // The independent reference: the expander's own task list, in index order.
    let x = expand(&resolved(m), b, &ExpandOptions::default()).unwrap();
    assert_eq!(x.tasks.len(), bs.user_tasks as usize, "{name}");
    let origin = bs.origins.to_vec();
    let all = rows(&bg);
    let user: Vec<&Row> = all
        .iter()
        .zip(&origin)
        .filter(|(_, o)| **o != NO_ORIGIN)
        .map(|(r, _)| r)
        .collect();
    for (i, (t, r)) in x.tasks.iter().zip(user).enumerate() {
        let params: Vec<u64> = t.params.iter().map(|p| p.to_bits()).collect();
        let regions: Vec<String> = t
            .regions
            .iter()
            .map(|g| {
                let region = Region::new(g.tensor, &g.start, &g.size).unwrap();
                format!("{:?} {region:?}", g.access)
            })
            .collect();
        assert_eq!(
            (r.0, &r.1, r.2, r.3, &r.4, &r.5),
            (
                t.kernel,
                &format!("{:?}", t.pool),
                t.stream,
                t.target,
                &params,
                &regions
            ),
            "{name}: task {i}"
        );
    }
}

/// Reads of the tensors no task writes skip the map (`read_only_tensors`, what a program hands
/// its builder): from either generator, in every inferring mode, the same tasks (regions kept)
/// as a builder that tracks every tensor; the same edges in `exact`; in `overlap` and `hybrid`
/// the same but for coverage marks' edges between reads of read-only tensors.
fn check_read_only_skip(name: &str, m: &Module, b: &Bindings) {
    let read_only = read_only_tensors(&resolved(m));
    for deps in [DepsMode::Exact, DepsMode::Overlap, DepsMode::Hybrid] {
        let (_, all, _) = by_expander_in(m, b, deps, &[]);
        let (_, xg, _) = by_expander_in(m, b, deps, &read_only);
        let (_, bg, _) = by_bytecode_in(m, b, deps, &read_only);
        assert_eq!(edges(&bg), edges(&xg), "{name}: {deps:?}: masked edges");
        for (g, by) in [(&xg, "expander"), (&bg, "bytecode")] {
            assert_eq!(rows(g), rows(&all), "{name}: {deps:?}, {by}: tasks");
            if deps == DepsMode::Exact {
                assert_eq!(edges(g), edges(&all), "{name}: {deps:?}, {by}: edges");
            } else {
                only_marks_dropped(&all, &edges(g), &read_only, &format!("{name}: {deps:?}"));
            }
        }
    }
}

/// The overlap maps' edges under the read-only mask are a subset of `all`'s, and each dropped
/// edge joins two tasks that both read a read-only tensor (a coverage mark's edge; that the
/// masked graph still orders every conflicting pair is checked against the brute-force oracle
/// in the graph crate's `deps` tests).
fn only_marks_dropped(
    all: &TaskGraphStorage,
    got: &BTreeSet<(u32, u32)>,
    read_only: &[bool],
    what: &str,
) {
    let every = edges(all);
    assert!(
        got.is_subset(&every),
        "{what}: an edge the unmasked build lacks"
    );
    for &(p, s) in every.difference(got) {
        let (a, b) = (all.io_of(TaskId(p)), all.io_of(TaskId(s)));
        let read_only_reads = a.iter().any(|x| {
            read_only.get(x.region.tensor as usize) == Some(&true)
                && b.iter().any(|y| y.region.tensor == x.region.tensor)
        });
        assert!(read_only_reads, "{what}: edge {p} -> {s} dropped");
    }
}

const EXAMPLES: [&str; 8] = [
    "mha",
    "gemm",
    "decode_ragged",
    "moe",
    "tiered",
    "csp_pipeline",
    "llama7b_layer",
    "stream_window",
];

#[test]
fn every_example_builds_the_expanders_graph_from_the_bytecode() {
    for name in EXAMPLES {
        let (module, mut b) = example(name);
        match name {
            "llama7b_layer" => b.bind_str(&module, "seq=128").unwrap(),
            "gemm" => b.bind_str(&module, "M=1024").unwrap(),
            _ => {}
        }
        check_same_graph(name, &module, &b);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: pto_wsp::ir::soak::cases(48), ..ProptestConfig::default() })]

    /// Random workloads under random schedules: the same graph from either generator.
    #[test]
    fn random_workloads_build_the_expanders_graph_from_the_bytecode(seed in any::<u64>()) {
        let (text, _) = module_text(seed);
        let module = parse(&text).unwrap();
        check_same_graph(&text, &module, &Bindings::new());
    }
}

fn compiled(m: &Module, host_expander: bool) -> pto_wsp::Program {
    let mut kernels = KernelRegistry::new();
    for k in &m.kernels {
        kernels.register(&k.name.name, |_| Ok(()));
    }
    compile(
        lower(m).unwrap(),
        CompileOptions {
            threads: 2,
            kernels,
            host_expander,
            ..CompileOptions::default()
        },
    )
    .unwrap()
}

#[test]
fn host_runs_generate_with_the_bytecode_unless_it_cannot_express_the_module() {
    let (llama, _) = example("llama7b_layer");
    assert!(compiled(&llama, false).host_bytecode());
    assert!(!compiled(&llama, true).host_bytecode());
    // A computed read (the generator reads what tasks write): the bytecode expresses it, and the
    // host feed serves it as the expander does (waiting on the producers).
    let path = format!(
        "{}/../../examples/datadep/early_exit.wsp",
        env!("CARGO_MANIFEST_DIR")
    );
    let early = parse(&std::fs::read_to_string(path).unwrap()).unwrap();
    let r = lower(&early).unwrap();
    assert!(pto_wsp::bytecode::supports(r.resolved()).is_ok());
    assert!(compiled(&early, false).host_bytecode());
    // A module the bytecode cannot express: a ragged axis whose row lengths are an expression.
    let ragged = parse(
        "tensor L: i64[4]; tensor X: f32[4, 8, 4];
         axis C = ragged(4, L, (L + 1) / 2);
         kernel k(inout x: f32[1, 1, 4]);
         workload main() { parallel_for r, c in C { task k(X[r, c, 0 +: 4]); } }",
    )
    .unwrap();
    let r = lower(&ragged).unwrap();
    assert!(pto_wsp::bytecode::supports(r.resolved()).is_err());
    assert!(!compiled(&ragged, false).host_bytecode());
}

#[test]
fn an_interpreter_error_is_reported_in_the_expanders_words() {
    let m = parse(
        "symbol N: i64; tensor X: f32[8, 4]; axis I = dense_dyn(N);
         kernel k(inout x: f32[1, 4]);
         workload main() { parallel_for i in I { task k(X[i, 0 +: 4]); } }",
    )
    .unwrap();
    let mut b = Bindings::new();
    b.bind_str(&m, "N=10").unwrap();
    let want = expand(&resolved(&m), &b, &ExpandOptions::default())
        .unwrap_err()
        .to_string();
    for host_expander in [false, true] {
        let mut p = compiled(&m, host_expander);
        assert_eq!(p.host_bytecode(), !host_expander);
        let err = p.execute(&b).unwrap_err().to_string();
        assert!(err.contains(&want), "{err} / {want}");
    }
    // And the program runs again under good bindings.
    let mut b = Bindings::new();
    b.bind_str(&m, "N=8").unwrap();
    let mut p = compiled(&m, false);
    assert_eq!(p.execute(&b).unwrap().tasks, 8);
}

#[test]
fn host_runs_count_the_same_tasks_with_either_generator() {
    let (m, mut b) = example("llama7b_layer");
    b.bind_str(&m, "seq=128").unwrap();
    let x = expand(&resolved(&m), &b, &ExpandOptions::default()).unwrap();
    let (s, _, _) = by_expander(&m, &b);
    for host_expander in [false, true] {
        let stats = compiled(&m, host_expander).execute(&b).unwrap();
        assert_eq!(
            stats.tasks,
            (x.tasks.len() + s.barrier_tasks as usize) as u64,
            "host_expander {host_expander}"
        );
        assert_eq!(stats.barriers, u64::from(s.barrier_tasks));
    }
}

/// A layer in miniature: `W` is read by every task and written by none (read-only), `A` is
/// written by one task and read by the others, `V` is read by three tasks and then written by a
/// fourth (its write-after-read edges must stay).
const READ_ONLY_MODULE: &str = "tensor W: f32[4, 4];
tensor A: f32[4, 4];
tensor V: f32[4, 4];
tensor B: f32[4, 4];
axis I = dense(3);
kernel produce(in w: f32[?, ?], out a: f32[?, ?]);
kernel consume(in a: f32[?, ?], in w: f32[?, ?], in v: f32[?, ?], out b: f32[?, ?]);
kernel overwrite(in w: f32[?, ?], out v: f32[?, ?]);
workload main() {
    task produce(W[0 +: 4, 0 +: 4], A[0 +: 4, 0 +: 4]);
    parallel_for i in I {
        task consume(A[0 +: 4, 0 +: 4], W[0 +: 4, 0 +: 4], V[0 +: 4, 0 +: 4], B[i +: 1, 0 +: 4]);
    }
    task overwrite(W[0 +: 4, 0 +: 4], V[0 +: 4, 0 +: 4]);
}
schedule for main {
    task_graph { deps DEPS; }
}
";

/// The edges of `tasks` by brute force: for each task and region, a read waits for the last
/// earlier writer of an intersecting box of its tensor, a write for that writer and every
/// reader since it.
fn brute_force_edges(tasks: &[pto_wsp::ir::ExpandedTask]) -> BTreeSet<(u32, u32)> {
    let meets = |a: &pto_wsp::ir::ExpandedRegion, b: &pto_wsp::ir::ExpandedRegion| {
        a.tensor == b.tensor
            && (0..a.start.len())
                .all(|d| a.start[d] < b.start[d] + b.size[d] && b.start[d] < a.start[d] + a.size[d])
    };
    let mut out = BTreeSet::new();
    for (j, t) in tasks.iter().enumerate() {
        for r in &t.regions {
            let mut readers = Vec::new();
            for i in (0..j).rev() {
                let (mut wrote, mut read) = (false, false);
                for q in tasks[i].regions.iter().filter(|q| meets(q, r)) {
                    wrote |= q.access.writes();
                    read |= q.access.reads();
                }
                if wrote {
                    out.insert((i as u32, j as u32));
                    break;
                }
                if read {
                    readers.push(i as u32);
                }
            }
            if r.access.writes() {
                out.extend(readers.into_iter().map(|i| (i, j as u32)));
            }
        }
    }
    out
}

/// The read-only analysis marks exactly the tensor no task writes, and with its mask a tensor
/// written by one task keeps its readers' edges and a write after reads keeps its
/// write-after-read edges: the brute-force edges, from either generator, in every inferring
/// mode, and in a host run (by count).
#[test]
fn read_only_tensors_skip_the_map_and_every_edge_stays() {
    for (deps, word) in [
        (DepsMode::Exact, "exact"),
        (DepsMode::Overlap, "overlap"),
        (DepsMode::Hybrid, "hybrid"),
    ] {
        let m = parse(&READ_ONLY_MODULE.replace("DEPS", word)).unwrap();
        let b = Bindings::new();
        let read_only = read_only_tensors(&resolved(&m));
        assert_eq!(read_only, [true, false, false, false], "W only");
        let x = expand(&resolved(&m), &b, &ExpandOptions::default()).unwrap();
        let expected = brute_force_edges(&x.tasks);
        // RAW on `A` (0 -> 1, 2, 3), WAR on `V` (1, 2, 3 -> 4): none through `W`.
        assert!((1..4).all(|i| expected.contains(&(0, i)) && expected.contains(&(i, 4))));
        let (_, xg, _) = by_expander_in(&m, &b, deps, &read_only);
        let (_, bg, _) = by_bytecode_in(&m, &b, deps, &read_only);
        assert_eq!(edges(&xg), expected, "{word}: expander");
        assert_eq!(edges(&bg), expected, "{word}: bytecode");
        for host_expander in [false, true] {
            let s = compiled(&m, host_expander).execute(&b).unwrap();
            assert_eq!(s.edges, expected.len() as u64, "{word}: host run");
        }
    }
}
