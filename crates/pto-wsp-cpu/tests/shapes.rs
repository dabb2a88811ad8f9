//! The benchmark shapes and their baselines: counts, edges against a naive adjacency, text
//! round trip, and every baseline running every task once, after its predecessors.

use proptest::prelude::*;
use pto_wsp_cpu::baseline::{self, Prepared};
use pto_wsp_cpu::shapes::{DEFAULT_SEED, ParseShapeError, Shape, Size};
use pto_wsp_graph::builder::{CollectEdges, EdgeSink, GraphBuilder};
use pto_wsp_graph::storage::TaskGraphStorage;
use pto_wsp_graph::tensor_map::AnyTensorMap;
use pto_wsp_graph::types::{ExecDomain, ExecPool, TaskId};
use std::sync::atomic::{AtomicU8, Ordering};

fn random(levels: u32, width: u32, seed: u64) -> Shape {
    Shape::RandomLevels {
        levels,
        width,
        seed,
    }
}

/// Standard quick shapes and small corner cases.
fn cases() -> Vec<Shape> {
    let mut v = Shape::standard(Size::Quick);
    v.extend([
        Shape::LinearChain(0),
        Shape::LinearChain(1),
        Shape::LinearChain(7),
        Shape::BinaryTree(0),
        Shape::BinaryTree(1),
        Shape::BinaryTree(2),
        Shape::BinaryTree(5),
        Shape::Independent(0),
        Shape::Independent(3),
        Shape::Wavefront(0),
        Shape::Wavefront(1),
        Shape::Wavefront(2),
        Shape::Wavefront(9),
        random(0, 5, 1),
        random(5, 0, 1),
        random(1, 5, 1),
        random(6, 1, 1),
        random(6, 2, 2),
        random(6, 3, 3),
        random(6, 4, 4),
        random(20, 37, 5),
    ]);
    v
}

/// Checks the built storage against `tasks()`, `edges()` and the naive `preds()`.
fn check_storage(shape: Shape, g: &TaskGraphStorage) {
    let preds = shape.preds();
    assert_eq!(g.len(), shape.tasks(), "{shape}: tasks");
    assert_eq!(preds.len(), shape.tasks(), "{shape}: preds()");
    assert_eq!(g.edge_count(), shape.edges(), "{shape}: edges");
    assert_eq!(
        preds.iter().map(Vec::len).sum::<usize>(),
        shape.edges(),
        "{shape}: preds() edges"
    );
    let mut succs = vec![Vec::new(); preds.len()];
    for (t, ps) in preds.iter().enumerate() {
        for &p in ps {
            succs[p as usize].push(TaskId(t as u32));
        }
    }
    for (t, node) in g.tasks.iter().enumerate() {
        let id = TaskId(t as u32);
        assert_eq!(node.id, id);
        assert_eq!(node.kernel, 0);
        assert_eq!(node.stream, 0);
        assert_eq!(node.affinity(), None);
        assert_eq!(node.domain, ExecDomain::HostCpu);
        assert_eq!(node.pool(), ExecPool::Any);
        assert_eq!((node.io_count, node.params_count), (0, 0));
        assert_eq!(
            node.fanin as usize,
            preds[t].len(),
            "{shape}: fan-in of #{t}"
        );
        assert_eq!(g.successors(id), succs[t], "{shape}: successors of #{t}");
    }
    // Id order is topological.
    for (p, s) in g.edges() {
        assert!(p < s, "{shape}: edge {p:?} -> {s:?}");
    }
}

#[test]
fn storage_matches_counts_and_naive_adjacency() {
    for shape in cases() {
        check_storage(shape, &shape.storage());
    }
}

/// The explicit-edge builder (what `storage` uses) and the general builder with no TensorMap
/// build the same graph of every shape, both checked against the naive adjacency.
#[test]
fn the_explicit_builder_and_the_general_builder_build_the_same_shapes() {
    for shape in cases() {
        let mut b = GraphBuilder::with_map(AnyTensorMap::None, CollectEdges::default());
        shape.build(&mut b).unwrap();
        let general = b.finish();
        check_storage(shape, &general);
        let explicit = shape.storage();
        assert_eq!(explicit, general, "{shape}");
    }
}

/// A streamed run of every shape through the explicit-edge builder runs every task once and
/// finds exactly the shape's edges (recorded), on 1 and 2 threads.
#[test]
fn streamed_shapes_through_the_explicit_builder_find_the_shapes_edges() {
    use pto_wsp_cpu::{Exec, RunConfig, StreamConfig, TaskFailure, TaskTable, WorkerPool};
    /// Counts the tasks run.
    struct Count(std::sync::atomic::AtomicUsize);
    impl Exec for Count {
        fn run(&self, _task: TaskId, _worker: usize) -> Result<(), TaskFailure> {
            self.0.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
    }
    for threads in [1, 2] {
        let pool = WorkerPool::new(threads).unwrap();
        for shape in cases() {
            let ran = Count(Default::default());
            let table = TaskTable::new();
            let sc = StreamConfig {
                deps: pto_wsp_ir::DepsMode::Explicit,
                record_edges: true,
                ..StreamConfig::default()
            };
            let stats = pool
                .run_streaming_explicit(&table, &RunConfig::default(), &sc, &ran, |b| {
                    shape
                        .build(b)
                        .map_err(|e| pto_wsp_cpu::ExecError::Build(e.to_string()))
                })
                .unwrap();
            assert_eq!(stats.tasks, shape.tasks() as u64, "{shape}");
            assert_eq!(
                ran.0.into_inner(),
                shape.tasks(),
                "{shape}: every task ran once"
            );
            assert_eq!(stats.edges, shape.edges() as u64, "{shape}");
            let mut got = stats.edge_list.clone();
            got.sort_unstable();
            let mut want: Vec<(u32, u32)> = shape
                .preds()
                .iter()
                .enumerate()
                .flat_map(|(t, ps)| ps.iter().map(move |&p| (p, t as u32)))
                .collect();
            want.sort_unstable();
            assert_eq!(got, want, "{shape} on {threads} threads");
        }
    }
}

#[test]
fn naive_adjacency_is_the_documented_shape() {
    assert_eq!(
        Shape::LinearChain(3).preds(),
        vec![vec![], vec![0], vec![1]]
    );
    assert_eq!(
        Shape::BinaryTree(3).preds(),
        vec![vec![], vec![0], vec![0], vec![1], vec![1], vec![2], vec![2]]
    );
    assert_eq!(
        Shape::Wavefront(3).preds(),
        vec![
            vec![],
            vec![0],
            vec![1],
            vec![0],
            vec![1, 3],
            vec![2, 4],
            vec![3],
            vec![4, 6],
            vec![5, 7]
        ]
    );
    assert_eq!(Shape::Independent(2).preds(), vec![Vec::<u32>::new(); 2]);
    for shape in [random(30, 1, 9), random(30, 3, 9), random(40, 50, 9)] {
        let Shape::RandomLevels { width, .. } = shape else {
            unreachable!()
        };
        let w = width as usize;
        let mut counts = [0usize; 5];
        for (t, ps) in shape.preds().iter().enumerate() {
            if t < w {
                assert!(ps.is_empty(), "{shape}: #{t} in level 0");
                continue;
            }
            let prev = (t / w - 1) * w..(t / w) * w;
            assert!((1..=w.min(4)).contains(&ps.len()), "{shape}: #{t}: {ps:?}");
            assert!(ps.windows(2).all(|p| p[0] < p[1]), "{shape}: #{t}: {ps:?}");
            assert!(ps.iter().all(|&p| prev.contains(&(p as usize))));
            counts[ps.len()] += 1;
        }
        // Every allowed count occurs.
        assert!(
            counts[1..=w.min(4)].iter().all(|&c| c > 0),
            "{shape}: {counts:?}"
        );
    }
    // Fixed seed: the same graph every time; another seed, another graph.
    assert_eq!(random(10, 10, 1).preds(), random(10, 10, 1).preds());
    assert_ne!(random(10, 10, 1).preds(), random(10, 10, 2).preds());
}

#[test]
fn standard_sizes() {
    for (size, lo, hi) in [
        (Size::Quick, 15_000, 25_000),
        (Size::Full, 900_000, 1_100_000),
    ] {
        let shapes = Shape::standard(size);
        let kinds: Vec<_> = shapes.iter().map(Shape::kind).collect();
        assert_eq!(
            kinds,
            ["chain", "tree", "independent", "wavefront", "random"]
        );
        for s in shapes {
            assert!((lo..=hi).contains(&s.tasks()), "{s}: {}", s.tasks());
            assert!(s.fits());
        }
    }
    assert_eq!("quick".parse(), Ok(Size::Quick));
    assert_eq!(Size::Full.to_string().parse(), Ok(Size::Full));
    assert!("big".parse::<Size>().is_err());
}

/// A streaming-style sink: checks that edges come before their successor's `submitted` and
/// counts them.
#[derive(Default)]
struct Checking {
    next: u32,
    edges: usize,
}

impl EdgeSink for Checking {
    fn edge(&mut self, pred: TaskId, succ: TaskId) {
        assert_eq!(succ.0, self.next);
        assert!(pred < succ);
        self.edges += 1;
    }

    fn submitted(&mut self, task: TaskId) {
        assert_eq!(task.0, self.next);
        self.next += 1;
    }
}

#[test]
fn build_is_generic_in_the_sink_and_offsets_ids() {
    for shape in cases() {
        let mut b = GraphBuilder::with_map(AnyTensorMap::None, Checking::default());
        // Two unrelated tasks first: the shape's ids are offset, its edges stay inside it.
        Shape::Independent(2).build(&mut b).unwrap();
        shape.build(&mut b).unwrap();
        assert_eq!(b.len(), shape.tasks() + 2);
        assert_eq!(b.sink().edges, shape.edges(), "{shape}");
        assert_eq!(b.stats().explicit as usize, shape.edges(), "{shape}");
        assert_eq!(b.stats().duplicates, 0, "{shape}");
    }
    let mut b = GraphBuilder::new(pto_wsp_ir::DepsMode::Explicit);
    Shape::Independent(2).build(&mut b).unwrap();
    Shape::Wavefront(2).build(&mut b).unwrap();
    let g = b.finish();
    let edges: Vec<_> = g.edges().map(|(p, s)| (p.0, s.0)).collect();
    assert_eq!(edges, [(2, 3), (2, 4), (3, 5), (4, 5)]);
}

#[test]
fn text_round_trip_and_errors() {
    for shape in cases().into_iter().chain([
        random(3, 4, DEFAULT_SEED),
        random(3, 4, 0),
        random(3, 4, u64::MAX),
        Shape::BinaryTree(31),
        Shape::LinearChain(u32::MAX - 1),
    ]) {
        let text = shape.to_string();
        assert_eq!(text.parse::<Shape>(), Ok(shape), "{text}");
    }
    assert_eq!(Shape::LinearChain(1_000_000).to_string(), "chain:1000000");
    assert_eq!(Shape::BinaryTree(20).to_string(), "tree:20");
    assert_eq!(Shape::Independent(5).to_string(), "independent:5");
    assert_eq!(Shape::Wavefront(1000).to_string(), "wavefront:1000");
    assert_eq!(random(7, 8, DEFAULT_SEED).to_string(), "random:7:8");
    assert_eq!(random(7, 8, 42).to_string(), "random:7:8:42");
    assert_eq!("random:7:8:42".parse(), Ok(random(7, 8, 42)));

    let err = |s: &str| s.parse::<Shape>().unwrap_err();
    assert!(matches!(err("ring:5"), ParseShapeError::UnknownKind(k) if k == "ring"));
    assert!(matches!(err(""), ParseShapeError::UnknownKind(_)));
    for s in [
        "chain",
        "chain:1:2",
        "tree:",
        "wavefront:1:1",
        "random:5",
        "random:1:2:3:4",
    ] {
        assert!(
            matches!(
                err(s),
                ParseShapeError::Arity { .. } | ParseShapeError::Number { .. }
            ),
            "{s}"
        );
    }
    for s in [
        "chain:x",
        "chain:-1",
        "tree:64",
        "independent:4294967296",
        "random:1:2:s",
    ] {
        assert!(matches!(err(s), ParseShapeError::Number { .. }), "{s}");
    }
    for s in [
        "chain:4294967295",
        "tree:32",
        "wavefront:65536",
        "random:65536:65536",
        "random:40000:40000",
    ] {
        assert!(matches!(err(s), ParseShapeError::TooLarge { .. }), "{s}");
    }
    assert!(err("ring:5").to_string().contains("chain:N"));
}

/// Runs a baseline with a recording body; checks every task ran once, after its predecessors.
fn check_visits(shape: Shape, preds: &[Vec<u32>], run: impl FnOnce(&(dyn Fn(u32) + Sync)) -> u64) {
    let done: Vec<AtomicU8> = (0..shape.tasks()).map(|_| AtomicU8::new(0)).collect();
    let body = |t: u32| {
        for &p in &preds[t as usize] {
            assert_eq!(
                done[p as usize].load(Ordering::Acquire),
                1,
                "{shape}: #{t} ran before #{p}"
            );
        }
        done[t as usize].fetch_add(1, Ordering::AcqRel);
    };
    let n = run(&body);
    assert_eq!(n as usize, shape.tasks(), "{shape}: count");
    assert!(
        done.iter().all(|d| d.load(Ordering::Relaxed) == 1),
        "{shape}: some task ran not exactly once"
    );
}

#[test]
fn baselines_run_every_task_once_in_order() {
    let pools: Vec<_> = [1, 2]
        .map(|n| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .build()
                .unwrap()
        })
        .into();
    for shape in cases() {
        let preds = shape.preds();
        let p = Prepared::new(shape);
        assert_eq!(p.shape(), shape);
        check_visits(shape, &preds, |body| p.for_each_sequential(body));
        assert_eq!(p.run_sequential() as usize, shape.tasks());
        assert_eq!(baseline::sequential(shape) as usize, shape.tasks());
        for pool in &pools {
            check_visits(shape, &preds, |body| p.for_each_rayon(pool, body));
            assert_eq!(p.run_rayon(pool) as usize, shape.tasks(), "{shape}");
            assert_eq!(baseline::rayon(shape, pool) as usize, shape.tasks());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(pto_wsp_ir::soak::cases(64)))]

    #[test]
    fn random_small_shapes(kind in 0u8..5, a in 0u32..40, b in 0u32..12, seed: u64) {
        let shape = match kind {
            0 => Shape::LinearChain(a),
            1 => Shape::BinaryTree(b),
            2 => Shape::Independent(a),
            3 => Shape::Wavefront(b),
            _ => random(b, a, seed),
        };
        prop_assert_eq!(shape.to_string().parse::<Shape>(), Ok(shape));
        check_storage(shape, &shape.storage());
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        check_visits(shape, &shape.preds(), |body| Prepared::new(shape).for_each_rayon(&pool, body));
    }
}
