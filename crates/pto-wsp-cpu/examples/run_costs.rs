//! A finished graph run alone ("run-only": the graph built once, then run N times), ns per task,
//! best of N: a small target for profilers (`valgrind --tool=callgrind`), which `pto-wsp bench`
//! buries among its other sections.
//!
//! `cargo run --release -p pto-wsp-cpu --example run_costs -- SHAPE THREADS RUNS`, e.g.
//! `chain:1000000 1 5` (default). Work stealing, empty tasks, the system allocator.

use pto_wsp_cpu::shapes::Shape;
use pto_wsp_cpu::{NoopExec, RunConfig, StaticGraph, WorkerPool};
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let shape: Shape = args
        .next()
        .unwrap_or_else(|| "chain:1000000".into())
        .parse()
        .expect("a shape: chain:N, tree:LEVELS, independent:N, wavefront:SIDE, random:L:W");
    let threads: usize = args.next().map_or(1, |s| s.parse().expect("threads"));
    let runs: usize = args.next().map_or(5, |s| s.parse().expect("runs"));
    let pool = WorkerPool::new(threads).expect("a worker pool");
    let graph = StaticGraph::new(shape.storage());
    let mut best = f64::INFINITY;
    for _ in 0..runs {
        let t0 = Instant::now();
        let s = pool
            .run(&graph, &RunConfig::default(), &NoopExec)
            .expect("the run");
        let ns = t0.elapsed().as_nanos() as f64 / shape.tasks() as f64;
        assert_eq!(s.tasks, shape.tasks() as u64, "every task ran");
        best = best.min(ns);
    }
    println!("{shape} threads {threads}: run-only {best:.1} ns/task (best of {runs})");
}
