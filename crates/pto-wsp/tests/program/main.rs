//! Programs against the reference expander: every example, under every ready policy and with
//! 1, 2 and 4 threads, runs exactly the expander's task multiset (kernel, params, regions), with
//! debug checks on (a conflicting pair in flight fails the run); errors name task and kernel;
//! unknown kernels and missing bindings are reported; the program runs again after a failure.
//! With real kernels, every example against an independent reference ([`numeric`]).

mod backend;
mod chains;
mod coverage;
mod csp_race;
mod datadep;
mod devgen;
mod differential;
mod host_feed;
mod model;
mod numeric;
mod plan;
mod shared_pool;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use pto_wsp::ir::{Bindings, ExpandOptions, Module, ReadyPolicy, expand, parse, parse_expr};
use pto_wsp::kernels::{KernelError, KernelRegistry, TaskContext};
use pto_wsp::{CompileError, CompileOptions, RunError, compile, lower};

/// `module` resolved, as a front end would before expanding it.
fn resolved(module: &Module) -> pto_wsp::ir::Resolved {
    pto_wsp::ir::resolve(module, &Default::default()).unwrap()
}

fn example(name: &str) -> (Module, Bindings) {
    let path = format!("{}/../../examples/{name}.wsp", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    let module = parse(&text).unwrap();
    let mut b = Bindings::new();
    for line in text.lines() {
        if let Some(spec) = line.strip_prefix("//@ bind ") {
            b.bind_str(&module, spec.trim()).unwrap();
        }
    }
    (module, b)
}

type Key = (String, Vec<u64>, Vec<(u32, Vec<i64>, Vec<i64>)>);

/// A task's regions as (tensor, starts, sizes), as the run handed them to its kernel.
fn region_keys(ctx: &TaskContext<'_>) -> Vec<(u32, Vec<i64>, Vec<i64>)> {
    ctx.regions()
        .iter()
        .map(|io| {
            let rank = io.region.rank as usize;
            (
                io.region.tensor,
                io.region.start[..rank].iter().map(|&x| x as i64).collect(),
                io.region.size[..rank].iter().map(|&x| x as i64).collect(),
            )
        })
        .collect()
}

/// A registry where every kernel of `module` records what it was called with.
fn recording(module: &Module, log: &Arc<Mutex<Vec<Key>>>) -> KernelRegistry {
    let mut r = KernelRegistry::new();
    for k in &module.kernels {
        let name = k.name.name.clone();
        let log = Arc::clone(log);
        r.register(&name.clone(), move |ctx| {
            let regions = region_keys(ctx);
            log.lock()
                .unwrap()
                .push((name.clone(), ctx.params().to_vec(), regions));
            Ok(())
        });
    }
    r
}

fn expected(module: &Module, b: &Bindings) -> BTreeMap<Key, usize> {
    let e = expand(&resolved(module), b, &ExpandOptions::default()).unwrap();
    let mut m = BTreeMap::new();
    for t in &e.tasks {
        let key = (
            module.kernels[t.kernel as usize].name.name.clone(),
            t.params.iter().map(|p| p.to_bits()).collect(),
            t.regions
                .iter()
                .map(|r| (r.tensor, r.start.clone(), r.size.clone()))
                .collect(),
        );
        *m.entry(key).or_insert(0) += 1;
    }
    m
}

#[test]
fn every_example_runs_the_expanders_tasks_under_every_policy() {
    for name in [
        "mha",
        "gemm",
        "decode_ragged",
        "moe",
        "tiered",
        "llama7b_layer",
        "softmax_3pass",
        "rmsnorm",
        "llama_block",
        "llm_decode",
    ] {
        let (module, mut b) = example(name);
        if name == "llama7b_layer" {
            b.bind_str(&module, "seq=128").unwrap();
        }
        let want = expected(&module, &b);
        for threads in [1, 2, 4] {
            for ready in [
                ReadyPolicy::Fifo,
                ReadyPolicy::WorkSteal,
                ReadyPolicy::Priority(parse_expr("0").unwrap()),
            ] {
                let log = Arc::new(Mutex::new(Vec::new()));
                let plan = lower(&module)
                    .unwrap()
                    .with_config_unchecked(|c| c.ready = ready.clone());
                let mut p = compile(
                    plan,
                    CompileOptions {
                        threads,
                        debug_checks: true,
                        kernels: recording(&module, &log),
                        ..CompileOptions::default()
                    },
                )
                .unwrap();
                let stats = p.execute(&b).unwrap();
                let mut got = BTreeMap::new();
                for k in log.lock().unwrap().drain(..) {
                    *got.entry(k).or_insert(0) += 1;
                }
                assert_eq!(got, want, "{name} threads {threads} {ready:?}");
                assert!(stats.tasks >= want.values().sum::<usize>() as u64);
            }
        }
    }
}

#[test]
fn a_failing_kernel_names_task_and_kernel_and_the_program_runs_again() {
    let (module, b) = example("gemm");
    for panics in [false, true] {
        let mut r = KernelRegistry::new();
        let fail = Arc::new(Mutex::new(true));
        for k in &module.kernels {
            let f = Arc::clone(&fail);
            r.register(&k.name.name, move |ctx| {
                if *f.lock().unwrap() && ctx.task() == 3 {
                    if panics {
                        panic!("tile exploded");
                    }
                    return Err(KernelError::Message("tile exploded".into()));
                }
                Ok(())
            });
        }
        let mut p = compile(
            lower(&module).unwrap(),
            CompileOptions {
                threads: 2,
                kernels: r,
                ..CompileOptions::default()
            },
        )
        .unwrap();
        let err = p.execute(&b).unwrap_err().to_string();
        let verb = if panics { "panicked" } else { "failed" };
        assert!(err.starts_with("task #"), "{err}");
        assert!(err.contains(&format!("{verb}: tile exploded")), "{err}");
        assert!(err.contains("(kernel `"), "{err}");
        *fail.lock().unwrap() = false;
        p.execute(&b).unwrap();
    }
}

#[test]
fn unknown_kernels_and_missing_bindings_are_reported() {
    let (module, _) = example("gemm");
    let err = compile(
        lower(&module).unwrap(),
        CompileOptions {
            kernels: KernelRegistry::new(),
            ..CompileOptions::default()
        },
    )
    .unwrap_err();
    assert!(matches!(err, CompileError::UnknownKernel { .. }));
    assert!(err.to_string().contains("has no implementation registered"));
    let (module, _) = example("decode_ragged");
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut p = compile(
        lower(&module).unwrap(),
        CompileOptions {
            kernels: recording(&module, &log),
            ..CompileOptions::default()
        },
    )
    .unwrap();
    let err = p.execute(&Bindings::new()).unwrap_err();
    assert!(matches!(err, RunError::Store(_)), "{err}");
    let symbol = &module.symbols[0].name.name;
    assert!(err.to_string().contains(symbol.as_str()), "{err}");
}

/// One thread, every task held until orchestration ends: tasks run in priority order (higher
/// first, ties in submission order), the key evaluated per task.
#[test]
fn priority_keys_order_ready_tasks() {
    let text = "
symbol n: i64;
tensor X: f32[n];
axis I = dense_dyn(n);
kernel k(out x: f32[1], i: i64);
workload main() {
    parallel_for i in I {
        task k(X[i], i);
    }
}
schedule for main {
    task_graph {
        ready priority(i % 3 * 10 - i);
        start after_orchestration;
    }
}
";
    let module = parse(text).unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut r = KernelRegistry::new();
    let o = Arc::clone(&order);
    r.register("k", move |ctx| {
        o.lock().unwrap().push(ctx.param_i64(0)?);
        Ok(())
    });
    let mut p = compile(
        lower(&module).unwrap(),
        CompileOptions {
            threads: 1,
            kernels: r,
            ..CompileOptions::default()
        },
    )
    .unwrap();
    let n = 12i64;
    p.execute(&Bindings::new().symbol("n", n)).unwrap();
    let mut want: Vec<i64> = (0..n).collect();
    want.sort_by_key(|&i| (std::cmp::Reverse(i % 3 * 10 - i), i));
    assert_eq!(*order.lock().unwrap(), want);
}

/// `trace cycles(EXPR)`: the model's makespan on the schedule's executors, checked against the
/// closed form of a fork-join graph; `trace cycles` uses each kernel's cost function.
#[test]
fn cycle_model_reports_the_simulated_makespan() {
    let text = "
symbol n: i64;
tensor X: f32[n];
tensor Y: f32[1];
axis I = dense_dyn(n);
kernel k(out x: f32[1], i: i64);
kernel sum(in x: f32[?], out y: f32[1]);
workload main() {
    parallel_for i in I {
        task k(X[i], i);
    }
    task sum(X[0 +: n], Y[0]);
}
schedule for main {
    executors 3;
    dispatch work_steal;
    task_graph {
        deps overlap;
        trace cycles(100);
    }
}
";
    let module = parse(text).unwrap();
    let mut r = KernelRegistry::new();
    r.register("k", |_| Ok(()));
    r.register("sum", |_| Ok(()));
    r.set_cost("k", |ctx| 7 * ctx.param_u64(0).unwrap_or(0) + 1);
    r.set_cost("sum", |_| 5);
    for threads in [1, 2] {
        let mut p = compile(
            lower(&module).unwrap(),
            CompileOptions {
                threads,
                kernels: r.clone(),
                ..CompileOptions::default()
            },
        )
        .unwrap();
        let s = p.execute(&Bindings::new().symbol("n", 7i64)).unwrap();
        let c = s.cycles.expect("cycles traced");
        // 7 tasks of 100 on 3 executors: 3 rounds; then the sum (100).
        assert_eq!(c.total_cycles, 400, "threads {threads}");
        assert_eq!((c.work_cycles, c.critical_path), (800, 200));
        assert_eq!(c.busy.len(), 3);
    }
    // Kernel cost functions: k(i) costs 7i + 1 and sum 5. List schedule on 3 executors, ready
    // tasks in id order: executor loads (1+22+43, 8+29, 15+36) -> the last of the 7 ends at 66.
    let module = parse(&text.replace("trace cycles(100);", "trace cycles;")).unwrap();
    let mut p = compile(
        lower(&module).unwrap(),
        CompileOptions {
            threads: 2,
            kernels: r,
            ..CompileOptions::default()
        },
    )
    .unwrap();
    let c = p
        .execute(&Bindings::new().symbol("n", 7i64))
        .unwrap()
        .cycles
        .unwrap();
    let work: u64 = (0..7).map(|i| 7 * i + 1).sum::<u64>() + 5;
    assert_eq!((c.work_cycles, c.critical_path), (work, 43 + 5));
    assert_eq!(c.total_cycles, 66 + 5);
}
