//! Prints what the benchmark shapes cost without the runtime: ns per task of building each
//! standard shape into a `TaskGraphStorage`, and of the sequential and rayon (1 and 2 threads)
//! baselines. A stopgap until `pto-wsp bench` exists.
//!
//! `cargo run --release -p pto-wsp-cpu --example shape_costs [quick|full]` (default full). Each
//! figure is the best of several runs in this process.
//! - `build cold`: `Shape::storage` — a fresh builder (no TensorMap), every task and explicit
//!   dependency, CSR fan-out, allocation included;
//! - `build warm`: the same through one builder reused with `finish_into` (no allocation once
//!   grown), with `AnyTensorMap::None` and with a zero-sized map that never matches (whether the
//!   enum's match costs anything);
//! - `seq`, `rayon 1`, `rayon 2`: `Prepared::run_sequential` and `run_rayon` (setup not timed).

use pto_wsp_cpu::baseline::Prepared;
use pto_wsp_cpu::shapes::{Shape, Size};
use pto_wsp_graph::builder::{CollectEdges, GraphBuilder};
use pto_wsp_graph::storage::TaskGraphStorage;
use pto_wsp_graph::tensor_map::{AnyTensorMap, MapStats, TensorMap};
use pto_wsp_graph::types::{Access, EdgeKind, Region, TaskId};
use std::hint::black_box;
use std::time::Instant;

/// A map for explicit-only builds with nothing to dispatch on.
struct NoMap;

impl TensorMap for NoMap {
    #[inline]
    fn access<F: FnMut(TaskId, EdgeKind)>(&mut self, _: TaskId, _: &Region, _: Access, _: &mut F) {}
    fn retire_before(&mut self, _: TaskId) {}
    fn clear(&mut self) {}
    fn stats(&self) -> MapStats {
        MapStats::default()
    }
}

/// Best of `runs` timings of `f`, in ns per task.
fn best(runs: usize, tasks: usize, mut f: impl FnMut()) -> f64 {
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_nanos() as f64 / tasks as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn warm<M: TensorMap>(shape: Shape, map: M, runs: usize) -> f64 {
    let mut b = GraphBuilder::with_map(map, CollectEdges::default());
    let mut g = TaskGraphStorage::default();
    best(runs, shape.tasks(), || {
        shape.build(&mut b).unwrap();
        b.finish_into(&mut g);
        black_box(&g);
    })
}

fn main() {
    let size: Size = std::env::args()
        .nth(1)
        .map(|s| s.parse().unwrap())
        .unwrap_or(Size::Full);
    let pools: Vec<_> = [1, 2]
        .map(|n| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .build()
                .unwrap()
        })
        .into();
    println!(
        "{:<18} {:>8} {:>8} | {:>10} {:>10} {:>10} | {:>7} {:>8} {:>8}",
        "shape",
        "tasks",
        "edges",
        "build cold",
        "warm none",
        "warm zst",
        "seq",
        "rayon 1",
        "rayon 2"
    );
    for shape in Shape::standard(size) {
        let n = shape.tasks();
        let runs = 7;
        let cold = best(runs, n, || {
            black_box(shape.storage());
        });
        let warm_none = warm(shape, AnyTensorMap::None, runs);
        let warm_zst = warm(shape, NoMap, runs);
        let p = Prepared::new(shape);
        let seq = best(runs * 3, n, || assert_eq!(p.run_sequential() as usize, n));
        let ray: Vec<f64> = pools
            .iter()
            .map(|pool| best(runs * 3, n, || assert_eq!(p.run_rayon(pool) as usize, n)))
            .collect();
        println!(
            "{:<18} {:>8} {:>8} | {:>10.1} {:>10.1} {:>10.1} | {:>7.2} {:>8.1} {:>8.1}",
            shape.to_string(),
            n,
            shape.edges(),
            cold,
            warm_none,
            warm_zst,
            seq,
            ray[0],
            ray[1]
        );
    }
}
