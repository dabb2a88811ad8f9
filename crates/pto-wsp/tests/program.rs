//! Programs against the reference expander: every example, under every ready policy and with
//! 1, 2 and 4 threads, runs exactly the expander's task multiset (kernel, params, regions), with
//! debug checks on (a conflicting pair in flight fails the run); errors name task and kernel;
//! unknown kernels and missing bindings are reported; the program runs again after a failure.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use pto_wsp::ir::{Bindings, ExpandOptions, Module, ReadyPolicy, expand, parse};
use pto_wsp::kernels::{KernelError, KernelRegistry};
use pto_wsp::{CompileError, CompileOptions, RunError, compile, lower};

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

/// A registry where every kernel of `module` records what it was called with.
fn recording(module: &Module, log: &Arc<Mutex<Vec<Key>>>) -> KernelRegistry {
    let mut r = KernelRegistry::new();
    for k in &module.kernels {
        let name = k.name.name.clone();
        let log = Arc::clone(log);
        r.register(&name.clone(), move |ctx| {
            let regions = ctx
                .regions()
                .iter()
                .map(|io| {
                    let rank = io.region.rank as usize;
                    (
                        io.region.tensor,
                        io.region.start[..rank].iter().map(|&x| x as i64).collect(),
                        io.region.size[..rank].iter().map(|&x| x as i64).collect(),
                    )
                })
                .collect();
            log.lock()
                .unwrap()
                .push((name.clone(), ctx.params().to_vec(), regions));
            Ok(())
        });
    }
    r
}

fn expected(module: &Module, b: &Bindings) -> BTreeMap<Key, usize> {
    let e = expand(module, b, &ExpandOptions::default()).unwrap();
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
    ] {
        let (module, mut b) = example(name);
        if name == "llama7b_layer" {
            b.bind_str(&module, "seq=128").unwrap();
        }
        let want = expected(&module, &b);
        for threads in [1, 2, 4] {
            for ready in [ReadyPolicy::Fifo, ReadyPolicy::WorkSteal] {
                let log = Arc::new(Mutex::new(Vec::new()));
                let mut plan = lower(&module).unwrap();
                plan.config.ready = ready.clone();
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
