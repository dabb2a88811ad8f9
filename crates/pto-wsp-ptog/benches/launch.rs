//! Launch-to-completion overhead of a task graph per kernel node (empty kernels, graphs of
//! about 1,000 nodes), next to the task-graph runtime's per-task overhead on the same DAGs in
//! the same process.
//!
//! Run with `cargo bench -p pto-wsp-ptog --bench launch` (criterion; `-- --quick` for a short
//! run). Throughput is in nodes (tasks) per second; the time per node is its inverse.
//! - `ptog/one_launch/SHAPE`: a device run of a program that launches the graph once and waits
//!   (control thread start, launch, every node, sync, shutdown);
//! - `ptog/launches_20/SHAPE`: one device run launching the graph 20 times, waiting for each
//!   (the per-launch cost without the device run's);
//! - `taskgraph/SHAPE`: `pto_wsp_cpu`'s finished-graph run of the same DAG (`StaticGraph`,
//!   work stealing, `NoopExec`) on a pool of as many workers: the baseline.
//!
//! Both sides have two workers (the device: two vector cores).

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use pto_wsp_cpu::shapes::Shape;
use pto_wsp_cpu::{NoopExec, RunConfig, StaticGraph, WorkerPool};
use pto_wsp_ptog::check::check;
use pto_wsp_ptog::examples::shapes::program;
use pto_wsp_ptog::{Device, DeviceConfig, Library};

const WORKERS: u32 = 2;

fn shapes() -> Vec<Shape> {
    [
        "independent:1000",
        "chain:1000",
        "wavefront:32",
        "random:50:20",
    ]
    .iter()
    .map(|s| s.parse().expect("a shape"))
    .collect()
}

fn device(shape: &Shape, launches: u64) -> Device {
    let checked = check(program(shape, launches)).expect("the shape program checks");
    let mut lib = Library::new();
    lib.add_fn("nop", |_| Ok(()));
    let cfg = DeviceConfig {
        aic: 0,
        aiv: WORKERS,
        aicpu: 0,
        ..DeviceConfig::default()
    };
    Device::new(checked, cfg, &lib).expect("loads")
}

fn bench(c: &mut Criterion) {
    let pool = WorkerPool::new(WORKERS as usize).expect("pool");
    let mut g = c.benchmark_group("launch");
    for shape in shapes() {
        let n = shape.tasks() as u64;
        g.throughput(Throughput::Elements(n));
        let mut one = device(&shape, 1);
        g.bench_with_input(
            BenchmarkId::new("ptog/one_launch", shape),
            &shape,
            |b, _| b.iter(|| one.run().expect("runs")),
        );
        g.throughput(Throughput::Elements(20 * n));
        let mut twenty = device(&shape, 20);
        g.bench_with_input(
            BenchmarkId::new("ptog/launches_20", shape),
            &shape,
            |b, _| b.iter(|| twenty.run().expect("runs")),
        );
        g.throughput(Throughput::Elements(n));
        let graph = StaticGraph::new(shape.storage());
        let cfg = RunConfig::default();
        g.bench_with_input(BenchmarkId::new("taskgraph", shape), &shape, |b, _| {
            b.iter(|| pool.run(&graph, &cfg, &NoopExec).expect("runs"))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
