//! Generation rate of the bytecode interpreter on the LLaMA-7B prefill layer
//! (`examples/llama7b_layer.wsp`, 486 tasks per 32-token tile), against the reference expander
//! in the same process.
//!
//! Run with `cargo bench -p pto-wsp-bytecode --bench generate` (criterion; add `-- --quick` for
//! a short run). Every sink is a no-op that only counts, so the figures are pure generation:
//! - `interp/all`: one interpreter generating every task (all executors' tasks on one thread);
//! - `interp/executor_k_of_24`: one executor of the schedule's 24 (`affinity(t)`): it generates
//!   its own tiles and skips the others' whole (throughput counts its own tasks);
//! - `expander/expand_each`: the reference expander streaming the same tasks (the baseline);
//! - `first_task/*`: from the bytes to the first task an executor generates (decode, bind, new
//!   interpreter, run until the sink stops it) — executor 0 and executor 23, whose first tile is
//!   the 24th.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use pto_wsp_bytecode::{
    EncodeOptions, ExecutorConfig, Interpreter, Program, Task, TaskSink, encode,
};
use pto_wsp_ir::{Bindings, ExpandOptions, Module, expand_each, parse};
use std::hint::black_box;
use std::ops::ControlFlow;

fn llama() -> Module {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/llama7b_layer.wsp"
    );
    let text = std::fs::read_to_string(path).expect("examples/llama7b_layer.wsp");
    parse(&text).expect("example parses")
}

/// Counts tasks and touches what a runtime would read.
struct Count(u64);

impl TaskSink for Count {
    #[inline]
    fn task(&mut self, t: &Task<'_>) -> ControlFlow<()> {
        self.0 += u64::from(t.kernel) + 1;
        black_box(t);
        ControlFlow::Continue(())
    }
}

/// Stops at the first task.
struct First(Option<u32>);

impl TaskSink for First {
    fn task(&mut self, t: &Task<'_>) -> ControlFlow<()> {
        self.0 = Some(t.index);
        ControlFlow::Break(())
    }
}

fn bench(c: &mut Criterion) {
    let module = pto_wsp_ir::resolve(&llama(), &Default::default()).expect("resolves");
    let bytes = encode(&module, &EncodeOptions::default()).expect("encodes");
    let prog = Program::decode(&bytes).expect("decodes");
    let seq = 16384i64;
    let bindings = Bindings::new().symbol("seq", seq);
    let bound = prog.bind(&bindings).expect("binds");
    let total = 486 * (seq as u64 / 32);

    let mut g = c.benchmark_group("llama16k");
    g.sample_size(20);
    g.throughput(Throughput::Elements(total));
    g.bench_function("interp/all", |b| {
        let mut interp = Interpreter::new(&prog, &bound, ExecutorConfig::all()).expect("new");
        b.iter(|| {
            let mut sink = Count(0);
            interp.run(&mut sink).expect("runs");
            black_box(sink.0)
        })
    });
    g.bench_function("expander/expand_each", |b| {
        b.iter(|| {
            let mut n = 0u64;
            expand_each(&module, &bindings, &ExpandOptions::default(), |_, t| {
                n += u64::from(t.kernel) + 1;
            })
            .expect("expands");
            black_box(n)
        })
    });
    for k in [0u32, 23] {
        let mut probe = Interpreter::new(&prog, &bound, ExecutorConfig::executor(k)).expect("new");
        let own = u64::from(probe.run(&mut Count(0)).expect("runs").tasks);
        g.throughput(Throughput::Elements(own));
        g.bench_with_input(BenchmarkId::new("interp/executor_of_24", k), &k, |b, &k| {
            let mut interp =
                Interpreter::new(&prog, &bound, ExecutorConfig::executor(k)).expect("new");
            b.iter(|| {
                let mut sink = Count(0);
                interp.run(&mut sink).expect("runs");
                black_box(sink.0)
            })
        });
    }
    g.throughput(Throughput::Elements(1));
    for k in [0u32, 23] {
        g.bench_with_input(BenchmarkId::new("first_task", k), &k, |b, &k| {
            b.iter(|| {
                let prog = Program::decode(black_box(&bytes)).expect("decodes");
                let bound = prog.bind(&bindings).expect("binds");
                let mut interp =
                    Interpreter::new(&prog, &bound, ExecutorConfig::executor(k)).expect("new");
                let mut sink = First(None);
                interp.run(&mut sink).expect("runs");
                black_box(sink.0)
            })
        });
    }
    g.bench_function("decode", |b| {
        b.iter(|| black_box(Program::decode(black_box(&bytes)).expect("decodes").size()))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
