//! Streamed build+run alone (the builder on the calling thread while the workers run), ns per
//! task, best of N: a small target for profilers (`perf record`, `valgrind --tool=callgrind`),
//! which `pto-wsp bench` buries among its other sections.
//!
//! `cargo run --release -p pto-wsp-cpu --example stream_costs -- SHAPE THREADS RUNS [BUILDER]`,
//! e.g. `independent:1000000 1 5` (default). `BUILDER` is `explicit` (the explicit-edge builder,
//! as `pto-wsp bench` runs the shapes; the default) or `general` (the general builder with no
//! TensorMap). The system allocator, not the CLI's mimalloc.

use pto_wsp_cpu::shapes::Shape;
use pto_wsp_cpu::{ExecError, NoopExec, RunConfig, StreamConfig, TaskTable, WorkerPool};
use pto_wsp_ir::DepsMode;
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let shape: Shape = args
        .next()
        .unwrap_or_else(|| "independent:1000000".into())
        .parse()
        .expect("a shape: chain:N, tree:LEVELS, independent:N, wavefront:SIDE, random:L:W");
    let threads: usize = args.next().map_or(1, |s| s.parse().expect("threads"));
    let runs: usize = args.next().map_or(5, |s| s.parse().expect("runs"));
    let general = match args.next().as_deref() {
        None | Some("explicit") => false,
        Some("general") => true,
        Some(other) => panic!("builder: explicit or general, not {other}"),
    };
    let pool = WorkerPool::new(threads).expect("a worker pool");
    let sc = StreamConfig {
        deps: DepsMode::Explicit,
        ..StreamConfig::default()
    };
    let mut best = f64::INFINITY;
    let mut wired = Vec::new();
    for _ in 0..runs {
        let table = TaskTable::new();
        let t0 = Instant::now();
        let s = if general {
            pool.run_streaming(&table, &RunConfig::default(), &sc, &NoopExec, |b| {
                shape.build(b).map_err(|e| ExecError::Build(e.to_string()))
            })
        } else {
            pool.run_streaming_explicit(&table, &RunConfig::default(), &sc, &NoopExec, |b| {
                shape.build(b).map_err(|e| ExecError::Build(e.to_string()))
            })
        }
        .expect("the streamed run");
        let ns = t0.elapsed().as_nanos() as f64 / shape.tasks() as f64;
        assert_eq!(s.tasks, shape.tasks() as u64, "every task ran");
        best = best.min(ns);
        wired.push(format!("{}/{}", s.wired_edges, s.edges));
    }
    // Edges wired (the producer had not completed yet) of those inferred, per run: a streamed
    // chain whose workers wait at the builder's frontier wires almost none.
    println!(
        "{shape} threads {threads}: streamed build+run {best:.1} ns/task (best of {runs}); wired/inferred edges {}",
        wired.join(" ")
    );
}
