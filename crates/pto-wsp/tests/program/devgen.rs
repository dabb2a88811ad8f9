//! Device-generation mode (`CompileOptions::device_gen`) against host-built runs.
//!
//! Every example and random workloads run with each worker thread interpreting the bytecode
//! and running its own tasks, on 1, 2 and 4 threads with debug checks on. They must run exactly
//! the reference expander's tasks, each once, and leave every tensor bit for bit as the host
//! build does (kernels that do order-sensitive arithmetic on every region: a missing
//! dependency changes the numbers, and the debug checks fail a conflicting pair in flight).
//! Small windows (one own task in flight per executor), failing and panicking kernels (the host
//! run's error, and the program runs again), and bindings that change the task set.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use proptest::prelude::*;
use pto_wsp::cpu::devgen::{DevGenConfig, DevGenTables};
use pto_wsp::cpu::{NoopExec, WorkerPool};
use pto_wsp::graph::ExecDomain;
use pto_wsp::graph::builder::GraphBuilder;
use pto_wsp::graph::feed::{NoHooks, feed};
use pto_wsp::ir::{
    Access, Bindings, DType, DepsMode, ExpandOptions, Module, ReadyPolicy, ScheduleItemKind,
    StartPolicy, TaskGraphItem, Timing, TracePolicy, WindowMode, parse,
};
use pto_wsp::kernels::{KernelError, KernelRegistry, TaskContext};
use pto_wsp::{CompileOptions, RunError, compile, lower};

use super::resolved;
use crate::differential::{check_text_in, module_text};
use crate::{Key, example, expected};

/// The examples with kernels that a generic numeric kernel can run (all of them).
const EXAMPLES: [&str; 7] = [
    "mha",
    "gemm",
    "decode_ragged",
    "moe",
    "tiered",
    "csp_pipeline",
    "llama7b_layer",
];

fn is_float(ctx: &TaskContext<'_>, i: usize) -> bool {
    matches!(
        ctx.info(i).map(|t| t.dtype),
        Ok(DType::F32 | DType::F16 | DType::Bf16)
    )
}

/// Order-sensitive arithmetic on any task: a value from the params and samples of every region
/// the task reads (first and last row, first 16 columns), written into the first two rows of
/// every region it writes (an `inout` region's old values count).
fn numeric(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    let mut acc = 0.0f32;
    let mut n = 1.0f32;
    for (k, p) in ctx.params().iter().enumerate() {
        acc += ((*p as i64).rem_euclid(97)) as f32 * 0.01 * (k + 1) as f32;
    }
    let mut buf = Vec::new();
    for i in 0..ctx.num_regions() {
        if is_float(ctx, i) && ctx.io(i)?.access() == Access::In {
            let r = ctx.read_float(i)?;
            for row in [0, r.rows() - 1] {
                for &x in r.row(row, &mut buf).iter().take(16) {
                    acc += x;
                    n += 1.0;
                }
            }
        }
    }
    let mut writes = Vec::new();
    for i in 0..ctx.num_regions() {
        let access = ctx.io(i)?.access();
        if is_float(ctx, i) && access != Access::In {
            writes.push((i, access == Access::InOut, ctx.write_float(i)?));
        }
    }
    let mut row = Vec::new();
    for (_, inout, w) in &writes {
        if *inout {
            row.resize(w.cols(), 0.0);
            for r in [0, w.rows() - 1] {
                w.load_row(r, &mut row);
                for &x in row.iter().take(16) {
                    acc += x;
                    n += 1.0;
                }
            }
        }
    }
    let mean = acc / n;
    for (i, inout, w) in &mut writes {
        row.resize(w.cols(), 0.0);
        for r in 0..w.rows().min(2) {
            w.load_row(r, &mut row);
            for (c, x) in row.iter_mut().take(16).enumerate() {
                let old = if *inout { *x * 0.5 } else { 0.0 };
                *x = old + mean * 0.25 + c as f32 * 0.01 + *i as f32 * 0.1;
            }
            w.store_row(r, &row);
        }
    }
    Ok(())
}

/// Every kernel of `module` runs [`numeric`] and logs what it was called with.
fn numeric_registry(module: &Module, log: &Arc<Mutex<Vec<Key>>>) -> KernelRegistry {
    let mut r = KernelRegistry::new();
    for k in &module.kernels {
        let name = k.name.name.clone();
        let log = Arc::clone(log);
        r.register(&name.clone(), move |ctx| {
            numeric(ctx)?;
            let regions = crate::region_keys(ctx);
            log.lock()
                .unwrap()
                .push((name.clone(), ctx.params().to_vec(), regions));
            Ok(())
        });
    }
    r
}

/// What a run left behind: every tensor's bytes, and the tasks its kernels saw.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    tensors: Vec<Vec<u8>>,
    tasks: BTreeMap<Key, usize>,
}

/// Runs `module` under `b` once on `threads` threads (debug checks on), tensors filled with a
/// fixed pattern when they are small (zeros otherwise: the kernels still write values that
/// depend on every task before them); `window` overrides the schedule's task window (stall).
fn run(
    module: &Module,
    b: &Bindings,
    threads: usize,
    device_gen: bool,
    window: Option<u64>,
) -> Outcome {
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut plan = if device_gen {
        lower(&device_gen_view(module)).unwrap()
    } else {
        lower(module).unwrap()
    };
    if let Some(w) = window {
        plan = plan.with_config_unchecked(|c| c.task_window = Some((w, WindowMode::Stall)));
    }
    let mut p = compile(
        plan,
        CompileOptions {
            threads,
            debug_checks: true,
            kernels: numeric_registry(module, &log),
            device_gen,
            ..CompileOptions::default()
        },
    )
    .unwrap();
    {
        let mut g = p.tensors(b).unwrap();
        let s = g.as_mut().unwrap();
        let bytes: u64 = s.infos().iter().map(|t| t.size_bytes()).sum();
        if bytes <= 16 << 20 {
            s.fill_random(0x5eed);
        }
    }
    let stats = p
        .execute(b)
        .unwrap_or_else(|e| panic!("threads {threads} device_gen {device_gen}: {e}"));
    // A pipeline runs as processes on threads in either mode.
    let pipeline = module
        .entry_name()
        .and_then(|e| module.pipeline(e))
        .is_some();
    assert_eq!(stats.device_gen.is_some(), device_gen && !pipeline);
    let g = p.tensors(b).unwrap();
    let s = g.as_ref().unwrap();
    let tensors = (0..s.len() as u32).map(|t| s.bytes(t).to_vec()).collect();
    let mut tasks = BTreeMap::new();
    for k in log.lock().unwrap().drain(..) {
        *tasks.entry(k).or_insert(0) += 1;
    }
    Outcome { tensors, tasks }
}

/// The example with `llama7b_layer` shrunk to `seq = 128` (1,944 tasks).
fn small_example(name: &str) -> (Module, Bindings) {
    let (module, mut b) = example(name);
    if name == "llama7b_layer" {
        b.bind_str(&module, "seq=128").unwrap();
    }
    (module, b)
}

/// Checks a device-generation run of `module` under `b` against the expander's tasks and the
/// host run's numbers.
fn check_against_host(
    name: &str,
    module: &Module,
    b: &Bindings,
    threads: &[usize],
    window: Option<u64>,
) {
    let want = expected(module, b);
    let host = run(module, b, 2, false, window);
    assert_eq!(host.tasks, want, "{name}: host tasks");
    for &t in threads {
        let dev = run(module, b, t, true, window);
        assert_eq!(
            dev.tasks, want,
            "{name}: device-generation tasks, {t} threads"
        );
        for (k, (d, h)) in dev.tensors.iter().zip(&host.tensors).enumerate() {
            assert!(
                d == h,
                "{name}: tensor `{}` differs from the host run, {t} threads, window {window:?}",
                module.tensors[k].name.name
            );
        }
    }
}

#[test]
fn every_example_matches_the_host_run_bit_for_bit() {
    for name in EXAMPLES {
        let (module, b) = small_example(name);
        check_against_host(name, &module, &b, &[1, 2, 4], None);
    }
}

/// One own task in flight per executor: generation pauses after every own task until it ran.
#[test]
fn windows_of_one_task_neither_deadlock_nor_change_the_numbers() {
    for name in EXAMPLES {
        let (module, b) = small_example(name);
        // The schedule's window is shared out: 1 task per executor even on 4 threads.
        check_against_host(name, &module, &b, &[2, 4], Some(1));
    }
}

/// Bindings that change the task set, on one compiled program (one bytecode) run again and
/// again, each run checked against the host.
#[test]
fn bindings_that_change_the_task_set() {
    let cases: [(&str, &[&str]); 5] = [
        (
            "decode_ragged",
            &["nreq=3", "kv_chunks=[8, 2, 1]", "kv_lens=[4096, 700, 100]"],
        ),
        (
            "tiered",
            &["prefill=true", "req_len=[100, 11000, 2500, 7000, 9000, 64]"],
        ),
        (
            "moe",
            &[
                "routes=5",
                "route_indptr=[0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 5]",
                "route_experts=[7, 7, 1, 0, 7]",
            ],
        ),
        ("csp_pipeline", &["ntiles=5"]),
        ("llama7b_layer", &["seq=64"]),
    ];
    for (name, binds) in cases {
        let (module, first) = small_example(name);
        let mut second = first.clone();
        for s in binds {
            second.bind_str(&module, s).unwrap();
        }
        let (a, b) = (expected(&module, &first), expected(&module, &second));
        assert_ne!(a, b, "{name}: the bindings must change the task set");
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut p = compile(
            lower(&device_gen_view(&module)).unwrap(),
            CompileOptions {
                threads: 2,
                debug_checks: true,
                kernels: numeric_registry(&module, &log),
                device_gen: true,
                ..CompileOptions::default()
            },
        )
        .unwrap();
        for (bindings, want) in [(&first, &a), (&second, &b), (&first, &a)] {
            p.execute(bindings).unwrap();
            let mut got = BTreeMap::new();
            for k in log.lock().unwrap().drain(..) {
                *got.entry(k).or_insert(0) += 1;
            }
            assert_eq!(&got, want, "{name}");
        }
        check_against_host(name, &module, &second, &[2], None);
    }
}

/// A failing or panicking kernel gives exactly the host run's error (task by its expander index,
/// kernel, message); every executor stops; the program runs again.
#[test]
fn a_failing_kernel_gives_the_host_error_and_the_program_runs_again() {
    for (name, fail_at, threads) in [
        ("gemm", 3u32, 2),
        ("llama7b_layer", 1500, 4),
        ("csp_pipeline", 20, 3),
    ] {
        let (module, b) = small_example(name);
        for panics in [false, true] {
            let fail = Arc::new(Mutex::new(true));
            let mut r = KernelRegistry::new();
            for k in &module.kernels {
                let f = Arc::clone(&fail);
                r.register(&k.name.name, move |ctx| {
                    if *f.lock().unwrap() && ctx.task() == fail_at {
                        if panics {
                            panic!("tile exploded");
                        }
                        return Err(KernelError::Message("tile exploded".into()));
                    }
                    Ok(())
                });
            }
            let mut errors = Vec::new();
            for device_gen in [false, true] {
                *fail.lock().unwrap() = true;
                let mut p = compile(
                    lower(&if device_gen {
                        device_gen_view(&module)
                    } else {
                        module.clone()
                    })
                    .unwrap(),
                    CompileOptions {
                        threads,
                        kernels: r.clone(),
                        device_gen,
                        ..CompileOptions::default()
                    },
                )
                .unwrap();
                let err = p.execute(&b).unwrap_err();
                // A pipeline runs as processes on threads in either mode (its error names the
                // process); a workload's is an `ExecError`.
                assert!(
                    name == "csp_pipeline" || matches!(err, RunError::Exec(_)),
                    "{err}"
                );
                errors.push(err.to_string());
                *fail.lock().unwrap() = false;
                p.execute(&b).unwrap();
            }
            let verb = if panics { "panicked" } else { "failed" };
            let first = if name == "csp_pipeline" {
                "process `"
            } else {
                "task #"
            };
            assert!(errors[1].starts_with(first), "{}", errors[1]);
            assert!(
                errors[1].contains(&format!("{verb}: tile exploded")),
                "{}",
                errors[1]
            );
            if name == "csp_pipeline" {
                // Both runs are the same processes on threads, whose task numbering follows
                // the run: compare the form, not the task.
                assert!(errors[0].starts_with(first), "{}", errors[0]);
                assert!(errors[0].contains(&format!("{verb}: tile exploded")));
            } else {
                assert_eq!(
                    errors[0], errors[1],
                    "{name}: host and device-generation errors"
                );
            }
        }
    }
}

/// A binding the interpreter refuses at run time (a region outside its tensor) fails the run
/// with a build error at the task statement's `file:line:column` on every thread count; the
/// program runs again with good bindings.
#[test]
fn interpretation_errors_stop_every_executor() {
    let text = "
symbol n: i64;
symbol m: i64;
tensor X: f32[8, 4];
axis I = dense_dyn(n);
kernel k(inout x: f32[1, 4]);
workload main() {
    for_each i in I {
        task k(X[i * m, 0 +: 4]);
    }
}
";
    let module = parse(text).unwrap();
    let mut r = KernelRegistry::new();
    r.register("k", |_| Ok(()));
    for threads in [1, 2, 4] {
        let mut p = compile(
            lower(&device_gen_view(&module)).unwrap(),
            CompileOptions {
                threads,
                kernels: r.clone(),
                device_gen: true,
                ..CompileOptions::default()
            },
        )
        .unwrap();
        let bad = Bindings::new().symbol("n", 8i64).symbol("m", 2i64);
        let err = p.execute(&bad).unwrap_err();
        // At the task statement, from the bytecode's statement-location table.
        let rendered = pto_wsp::ir::SourceFile::new("d.wsp", text).render(&err);
        let want = "error: task #4 (`k`): region argument 0 of `X` is out of bounds in dimension \
                    0: start 8, size 1, extent 8\n --> d.wsp:9:9\n";
        assert!(rendered.starts_with(want), "{rendered}");
        let good = Bindings::new().symbol("n", 8i64).symbol("m", 1i64);
        let s = p.execute(&good).unwrap();
        assert_eq!(s.tasks, 8);
    }
}

/// Whether device generation refuses schedule item `k` (`docs/SEMANTICS.md`, "Schedule
/// directives"): stated here independently of the back end's table, which
/// [`device_generation_refuses_what_it_cannot_honour`] checks against it.
fn refused_by_device_gen(k: &ScheduleItemKind) -> bool {
    match k {
        ScheduleItemKind::Timing(t) => *t != Timing::Immediate,
        ScheduleItemKind::PipelineDepth(..) | ScheduleItemKind::DispatchThreshold(_) => true,
        ScheduleItemKind::BatchDeps(n) => *n > 1,
        ScheduleItemKind::TaskWindow(_, m) => *m != WindowMode::Stall,
        _ => false,
    }
}

fn task_graph_refused_by_device_gen(t: &TaskGraphItem) -> bool {
    match t {
        TaskGraphItem::Start(s) => *s != StartPolicy::Immediate,
        TaskGraphItem::Ready(r) => matches!(r, ReadyPolicy::Priority(_)),
        TaskGraphItem::Trace(t) => matches!(t, TracePolicy::Cycles(..)),
        _ => false,
    }
}

/// `module` without the schedule directives device generation refuses: what a user who wants
/// a device-generation run of it writes.
pub(crate) fn device_gen_view(module: &Module) -> Module {
    let mut m = module.clone();
    if let Some(s) = &mut m.schedule {
        s.items.retain(|i| !refused_by_device_gen(&i.kind));
        for i in &mut s.items {
            if let ScheduleItemKind::TaskGraph(items) = &mut i.kind {
                items.retain(|t| !task_graph_refused_by_device_gen(t));
            }
        }
    }
    m
}

/// Each directive device generation cannot honour fails to compile for it, naming the
/// directive and the mode; the same module compiles for a host run.
#[test]
fn device_generation_refuses_what_it_cannot_honour() {
    let directives = [
        "timing batched(2);",
        "timing rate_limit(4);",
        "pipeline_depth 2 global;",
        "batch_deps 4;",
        "task_window 8 abort;",
        "task_window 8 benchmark;",
        "task_graph { start after_orchestration; }",
        "task_graph { ready priority(i); }",
        "task_graph { trace cycles(1); }",
    ];
    for d in directives {
        let module = parse(&format!(
            "tensor X: f32[4]; axis I = dense(4); kernel k(out x: f32[1]);
             workload main() {{ parallel_for i in I {{ task k(X[i]); }} }}
             schedule for main {{ {d} }}"
        ))
        .unwrap();
        let s = module.schedule.as_ref().unwrap();
        assert!(
            s.items.iter().any(|i| refused_by_device_gen(&i.kind)
                || matches!(&i.kind, ScheduleItemKind::TaskGraph(t) if t.iter().any(task_graph_refused_by_device_gen))),
            "{d}"
        );
        assert!(
            device_gen_view(&module)
                .schedule
                .unwrap()
                .items
                .iter()
                .all(|i| !matches!(&i.kind, ScheduleItemKind::TaskGraph(t) if !t.is_empty()))
        );
        let mut r = KernelRegistry::new();
        r.register("k", |_| Ok(()));
        let options = |device_gen| CompileOptions {
            kernels: r.clone(),
            device_gen,
            ..CompileOptions::default()
        };
        let err = compile(lower(&module).unwrap(), options(true))
            .err()
            .unwrap_or_else(|| panic!("{d} compiled for device generation"))
            .to_string();
        let name = d
            .trim_start_matches("task_graph { ")
            .trim_end_matches(" }")
            .trim_end_matches(';');
        assert!(
            err.contains(&format!("`{name}`")) && err.contains("device generation"),
            "{d}: {err}"
        );
        compile(lower(&module).unwrap(), options(false)).unwrap();
        compile(lower(&device_gen_view(&module)).unwrap(), options(true)).unwrap();
    }
}

/// A run longer than the retire period (each executor's map replica retires completed tasks as
/// it goes), with every `for_each` iteration on another executor than the last: exact tasks,
/// orders and numbers, in both inference modes, with windows of 4 tasks and of one.
#[test]
fn long_runs_retire_completed_tasks_and_stay_exact() {
    for (mode, deps) in [(DepsMode::Exact, "exact"), (DepsMode::Overlap, "overlap")] {
        for window in [4, 1] {
            let text = format!(
                "tensor T0: f32[8, 8];
tensor T1: f32[8, 8];
tensor T2: f32[8, 8];
axis A2 = dense(2);
axis A4 = dense(4);
axis R = dense(64);
kernel kr(in a: f32[?, ?], out b: f32[?, ?], id: i64);
kernel ki(inout a: f32[?, ?], id: i64);
kernel k2(in a: f32[?, ?], in b: f32[?, ?], out c: f32[?, ?], id: i64);
workload main() {{
    parallel_for o in A2 {{
        for_each r in R {{
            parallel_for i in A4 {{
                parallel_for j in A4 {{
                    task ki(T0[i * 2 +: 2, j * 2 +: 2], (((o * 64 + r) * 4 + i) * 4 + j) * 4);
                    task kr(T0[j * 2 +: 2, i * 2 +: 2], T1[i * 2 +: 2, j * 2 +: 2], (((o * 64 + r) * 4 + i) * 4 + j) * 4 + 1);
                    task k2(T1[j * 2 +: 2, i * 2 +: 2], T0[i * 2 +: 2, 0 +: 2], T2[i * 2 +: 2, j * 2 +: 2], (((o * 64 + r) * 4 + i) * 4 + j) * 4 + 2);
                }}
            }}
        }}
    }}
}}
schedule for main {{
    executors 3;
    dispatch affinity(r + o);
    task_graph {{
        deps {deps};
    }}
    task_window {window} stall;
}}
"
            );
            let m = parse(&text).unwrap();
            let n = pto_wsp::ir::expand(&resolved(&m), &Bindings::new(), &ExpandOptions::default())
                .unwrap()
                .tasks
                .len();
            assert!(
                n > pto_wsp::graph::builder::RETIRE_EVERY as usize,
                "{n} tasks"
            );
            check_text_in(&text, mode, true);
        }
    }
}

/// A random module with its task window replaced by one task.
fn with_window_one(text: &str) -> String {
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("task_window"))
        .collect();
    let mut out = kept.join("\n");
    // The schedule is the last block: put the window before its closing brace.
    let end = out.rfind('}').unwrap();
    out.insert_str(end, "    task_window 1 stall;\n");
    out.push('\n');
    out
}

/// Every task of `module` under `b`, from the reference expander, fed into a builder under
/// `deps` that never retires.
fn reference_builder(module: &Module, b: &Bindings, deps: DepsMode) -> GraphBuilder {
    let mut builder = GraphBuilder::new(deps);
    feed(
        &resolved(module),
        b,
        &ExpandOptions::default(),
        &mut builder,
        &mut NoHooks,
        ExecDomain::default(),
    )
    .unwrap();
    builder
}

/// The edges a device-generation run wires into each executor's own tasks, over all
/// executors, against the host builder's graph (the feeder's numbering, barriers included):
/// the same set, in every dependency mode, on 1 to 4 executors, under windows of 1, 2 and 64 own
/// tasks per executor, with each executor generating only its own tasks where the program
/// allows it (and checked to: each executor walked its own tasks and the barriers, nothing
/// else), and once with every executor walking every task. The runs on each executor count
/// share one set of tables, so every run but the first reuses what the executors kept from the
/// run before, in another mode or window. (Programs under the builder's retire period, so no
/// record is retired.) On two and four executors, reads of tensors no task writes skip the
/// executors' maps, as in a program's runs.
fn check_edges(name: &str, module: &Module, b: &Bindings) -> bool {
    let bytes = pto_wsp::bytecode::encode(&resolved(module), &Default::default()).unwrap();
    let program = pto_wsp::bytecode::Program::decode(&bytes).unwrap();
    let bound = program.bind(b).unwrap();
    let partitions = !program.computed_tensors().contains(&true) && !program.skips_order_edges();
    let pools: Vec<WorkerPool> = (1..=4).map(|t| WorkerPool::new(t).unwrap()).collect();
    // Tables on two and four executors skip the reads of tensors no task writes, as a
    // program's do; on one and three they track every tensor.
    let read_only = pto_wsp::program::read_only_tensors(&resolved(module));
    let mut tables: Vec<DevGenTables> = (1..=4)
        .map(|t| {
            let mut tables = DevGenTables::new();
            if t % 2 == 0 {
                tables.set_read_only(&read_only);
            }
            tables
        })
        .collect();
    for deps in [
        DepsMode::Exact,
        DepsMode::Overlap,
        DepsMode::Hybrid,
        DepsMode::Explicit,
    ] {
        let graph = reference_builder(module, b, deps).finish();
        assert!(
            graph.len() < pto_wsp::graph::builder::RETIRE_EVERY as usize,
            "{name}"
        );
        let host: BTreeSet<(u32, u32)> = graph.edges().map(|(p, s)| (p.0, s.0)).collect();
        // The host builder given the program's read-only mask: the reference of the masked
        // tables (the same edges in `exact`, fewer coverage marks' in the overlap modes).
        let mut masked = GraphBuilder::new(deps);
        masked.set_read_only(&read_only);
        feed(
            &resolved(module),
            b,
            &ExpandOptions::default(),
            &mut masked,
            &mut NoHooks,
            ExecDomain::default(),
        )
        .unwrap();
        let host_masked: BTreeSet<(u32, u32)> =
            masked.finish().edges().map(|(p, s)| (p.0, s.0)).collect();
        assert!(host_masked.is_subset(&host), "{name}");
        if deps == DepsMode::Exact {
            assert_eq!(host_masked, host, "{name}");
        }
        let runs = [1, 2, 3, 4]
            .into_iter()
            .flat_map(|t| [(t, 1, true), (t, 2, true), (t, 64, true)])
            .chain([(3, 2, false), (4, 2, false)]);
        for (threads, window, partition) in runs {
            let config = DevGenConfig {
                deps,
                window,
                record_edges: true,
                partition,
                ..DevGenConfig::default()
            };
            let s = pools[threads - 1]
                .run_devgen_on(
                    &mut tables[threads - 1],
                    &program,
                    &bound,
                    &config,
                    &NoopExec,
                )
                .unwrap();
            let what = format!(
                "{name}: {deps:?}, {threads} threads, window {window}, partition {partition}"
            );
            assert_eq!(s.tasks as usize, graph.len(), "{what}: tasks and barriers");
            let dev: BTreeSet<(u32, u32)> = s.edge_list.iter().copied().collect();
            assert_eq!(dev.len(), s.edge_list.len(), "{what}: an edge wired twice");
            let want = if threads % 2 == 0 {
                &host_masked
            } else {
                &host
            };
            assert_eq!(&dev, want, "{what}");
            let walked: Vec<u64> = s
                .device_gen
                .unwrap()
                .executors
                .iter()
                .map(|e| e.walked)
                .collect();
            if partition && partitions && threads > 1 {
                // Each executor walked its own tasks and every barrier.
                assert_eq!(
                    walked.iter().sum::<u64>(),
                    s.tasks + s.barriers * (threads as u64 - 1),
                    "{what}: {walked:?}"
                );
            } else {
                assert!(walked.iter().all(|&w| w == s.tasks), "{what}: {walked:?}");
            }
        }
    }
    partitions
}

#[test]
fn every_example_wires_exactly_the_host_builders_edges() {
    let mut partitioned = Vec::new();
    for name in EXAMPLES {
        let (module, mut b) = small_example(name);
        if name == "gemm" {
            b.bind_str(&module, "M=1024").unwrap();
        }
        if check_edges(name, &module, &b) {
            partitioned.push(name);
        }
    }
    eprintln!("generated partitioned: {partitioned:?}");
    // The examples whose executors skip no order edge and make no computed read (`gemm`
    // skips a `for_each` over its K tiles inside a hoisted tile: every executor walks it).
    for name in ["mha", "decode_ragged", "moe", "tiered", "llama7b_layer"] {
        assert!(partitioned.contains(&name), "{name}: {partitioned:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: pto_wsp::ir::soak::cases(32), ..ProptestConfig::default() })]

    /// Random workloads under random schedules (the generator of `differential.rs`): the
    /// expander's tasks, every conflicting pair and order edge ordered, and the sequential
    /// reference's numbers bit for bit (hence the host run's), on 1, 2 and 4 threads.
    #[test]
    fn random_workloads_match_the_expander_and_the_sequential_reference(seed in any::<u64>()) {
        let (text, mode) = module_text(seed);
        check_text_in(&text, mode, true);
    }

    /// Random workloads wire exactly the host builder's edges.
    #[test]
    fn random_workloads_wire_exactly_the_host_builders_edges(seed in any::<u64>()) {
        let (text, _) = module_text(seed);
        let module = parse(&text).unwrap();
        let _ = check_edges(&text, &module, &Bindings::new());
    }

    /// The same with one own task in flight per executor.
    #[test]
    fn random_workloads_with_windows_of_one(seed in any::<u64>()) {
        let (text, mode) = module_text(seed);
        check_text_in(&with_window_one(&text), mode, true);
    }
}

/// The edges dependency inference finds do not depend on timing (README's `edges:` line): the
/// LLaMA layer with exact inference at `seq = 1024` (15,000+ tasks, so the maps retire several times),
/// with kernels that do nothing (tasks complete at once, as early as they can), reports the
/// same `edges` host-built without a window, streamed under windows of 2 to 4,096 tasks on 1
/// and 2 threads, and in device generation; equal to what a builder that never retires finds
/// for the same tasks. (Only the wired share may vary.)
/// Executors take a task's regions from the interpreter's boxes, and build them from the
/// coordinates when the interpreter hands none (a region of rank above `MAX_RANK`, which no
/// runtime accepts): such a task stops the run with the host builder's refusal, named by the
/// task, on 1-4 executors (its owner builds every region of its own task; the others, of its
/// regions on their tensors), walking or partitioned, while the tasks before it, with boxes, ran.
#[test]
fn a_region_without_a_box_is_refused_naming_its_task() {
    let text = "tensor A: f32[4, 2, 2, 2, 8];
tensor C: f32[32, 8];
tensor D: f32[32, 8];
axis I = dense(4);
kernel w2(in c: f32[?, ?], out d: f32[?, ?], id: i64);
kernel w5(in a: f32[?, ?, ?, ?, ?], out d: f32[?, ?], id: i64);
workload main() {
    parallel_for i in I {
        task w2(C[i * 8 +: 8, 0 +: 8], D[i * 8 +: 8, 0 +: 8], i);
    }
    task w5(A[0 +: 4, 0 +: 2, 0 +: 2, 0 +: 2, 0 +: 8], D[0 +: 8, 0 +: 8], 9);
}
schedule for main {
    dispatch affinity(0);
    task_graph { deps hybrid; }
}
";
    let module = parse(text).unwrap();
    // The host builder refuses the task too.
    let mut builder = GraphBuilder::new(DepsMode::Hybrid);
    let host = feed(
        &resolved(&module),
        &Bindings::new(),
        &ExpandOptions::default(),
        &mut builder,
        &mut NoHooks,
        ExecDomain::default(),
    );
    assert!(host.is_err(), "{host:?}");
    let bytes = pto_wsp::bytecode::encode(&resolved(&module), &Default::default()).unwrap();
    let program = pto_wsp::bytecode::Program::decode(&bytes).unwrap();
    let bound = program.bind(&Bindings::new()).unwrap();
    for threads in 1..=4 {
        let pool = WorkerPool::new(threads).unwrap();
        let mut tables = DevGenTables::new();
        for partition in [false, true] {
            let config = DevGenConfig {
                deps: DepsMode::Hybrid,
                partition,
                ..DevGenConfig::default()
            };
            let err = pool
                .run_devgen_on(&mut tables, &program, &bound, &config, &NoopExec)
                .expect_err("a region of rank 5 has no box");
            let message = err.to_string();
            assert!(
                message.contains("task #4") && message.contains("rank"),
                "{threads} threads, partition {partition}: {message}"
            );
        }
    }
}

#[test]
fn the_inferred_edge_count_is_the_same_in_every_mode() {
    let path = format!(
        "{}/../../examples/llama7b_layer.wsp",
        env!("CARGO_MANIFEST_DIR")
    );
    let module = parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let mut b = Bindings::new();
    b.bind_str(&module, "seq=1024").unwrap();
    // As `pto-wsp bench` does: exact keys, a cost reference (it misses attention's prefix
    // dependencies, which kernels that do nothing do not mind).
    edges_found_in_every_mode(
        &module,
        &b,
        DepsMode::Exact,
        &[
            (false, StartPolicy::Immediate, 1, None),
            (false, StartPolicy::Immediate, 2, Some(2)),
            (false, StartPolicy::Immediate, 2, Some(64)),
            (false, StartPolicy::Immediate, 1, Some(4096)),
            (true, StartPolicy::Immediate, 1, Some(4)),
            (true, StartPolicy::Immediate, 2, Some(64)),
        ],
    );
}

/// Overlap inference finds the same edges in every mode. A workload of prefix reads (each
/// attention-like task reads the rows of every earlier tile of its column block: coverage marks)
/// and covering writes (a task rewrites the whole tensor each round: records dropped), long
/// enough to retire several times, runs finished, streamed under windows of 2 to 4096 tasks on
/// 1 and 2 threads, and in device generation on 1, 2 and 4 (two executors then infer no
/// tensor); in `overlap` and `hybrid` every run counts the edges of the reference, a builder
/// fed every task that never retires.
#[test]
fn overlap_inference_finds_the_same_edges_in_every_mode() {
    let text = |deps: &str| {
        format!(
            "tensor K: f32[64, 64];
tensor O: f32[64, 64];
axis R = dense(256);
axis H = dense(4);
axis T = dense(8);
kernel w(out k: f32[?, ?], id: i64);
kernel attn(in k: f32[?, ?], out o: f32[?, ?], id: i64);
kernel reset(out k: f32[?, ?], id: i64);
workload main() {{
    parallel_for r in R {{
        parallel_for h in H {{
            parallel_for t in T {{
                task w(K[t * 8 +: 8, h * 16 +: 16], r);
                task attn(K[0 +: (t + 1) * 8, h * 16 +: 16], O[t * 8 +: 8, h * 16 +: 16], r);
            }}
        }}
        task reset(K[0 +: 64, 0 +: 64], r);
    }}
}}
schedule for main {{
    task_graph {{ deps {deps}; }}
}}
"
        )
    };
    for (mode, deps) in [(DepsMode::Overlap, "overlap"), (DepsMode::Hybrid, "hybrid")] {
        edges_found_in_every_mode(
            &parse(&text(deps)).unwrap(),
            &Bindings::new(),
            mode,
            &[
                (false, StartPolicy::AfterOrchestration, 2, None),
                (false, StartPolicy::Immediate, 1, None),
                (false, StartPolicy::Immediate, 2, Some(2)),
                (false, StartPolicy::Immediate, 2, Some(64)),
                (false, StartPolicy::Immediate, 1, Some(4096)),
                (true, StartPolicy::Immediate, 1, Some(4)),
                (true, StartPolicy::Immediate, 2, Some(64)),
                // Four executors, each inferring a quarter of the tensors and sealing a task
                // only once the others have inferred it, under a window of 2 tasks.
                (true, StartPolicy::Immediate, 4, Some(2)),
            ],
        );
    }
}

/// Runs `module` under `mode` once per `(device_gen, start, threads, window)` with kernels that
/// do nothing, and checks that every run counts the edges of the reference (every task fed into
/// a builder that never retires, long enough to retire several times in the runs), with nothing
/// for the report to warn of, and that some run wired fewer edges than it found.
fn edges_found_in_every_mode(
    module: &Module,
    b: &Bindings,
    mode: DepsMode,
    runs: &[(bool, StartPolicy, usize, Option<u64>)],
) {
    let reference = reference_builder(module, b, mode).stats();
    assert!(reference.tasks > 3 * u64::from(pto_wsp::graph::builder::RETIRE_EVERY));
    assert_eq!(reference.forgotten, 0);
    let mut kernels = KernelRegistry::new();
    for k in &module.kernels {
        kernels.register(&k.name.name, |_| Ok(()));
    }
    let mut wired = BTreeSet::new();
    for &(device_gen, start, threads, window) in runs {
        let plan = if device_gen {
            lower(&device_gen_view(module)).unwrap()
        } else {
            lower(module).unwrap()
        };
        let plan = plan.with_config_unchecked(|c| {
            c.task_window = window.map(|w| (w, WindowMode::Stall));
            c.start = start;
            c.deps = mode;
        });
        let mut p = compile(
            plan,
            CompileOptions {
                threads,
                kernels: kernels.clone(),
                device_gen,
                ..CompileOptions::default()
            },
        )
        .unwrap();
        let s = p.execute(b).unwrap();
        let what = format!(
            "{mode:?}: device_gen {device_gen}, {start:?}, {threads} thread(s), window {window:?}"
        );
        assert_eq!(s.tasks, reference.tasks, "{what}");
        assert_eq!(s.edges, reference.edges(), "{what}: edges found");
        assert_eq!(s.edges_unnamed, 0, "{what}: the report warns of nothing");
        assert!(s.wired_edges <= s.edges, "{what}");
        wired.insert(s.wired_edges);
    }
    // Tasks completed early in some runs: fewer edges were wired than found.
    assert!(
        wired.iter().any(|&w| w < reference.edges()),
        "{mode:?}: {wired:?}"
    );
}
