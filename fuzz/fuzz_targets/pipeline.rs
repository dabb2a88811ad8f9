//! Fuzz target for the whole pipeline on generated modules: the bytes choose a small module
//! (bounded loops, ifs, calls, tasks of built-in kernels on overlapping slices of two tensors,
//! a schedule); it is printed, parsed, validated and resolved (once), expanded by the reference
//! expander, encoded as bytecode, decoded and interpreted on two executors (every task generated
//! exactly once, the expander's count), then run on the CPU with debug checks (`run --check`)
//! on the host path and in device generation, both compiled from that one resolution. Nothing
//! may panic, and where both runs succeed their tensors must be equal byte for byte.
//!
//! Modules that generate more than [`MAX_TASKS`] tasks are dropped after expansion: the
//! properties checked here (count agreement, host and device generation agreeing, the debug
//! checks) do not need big graphs, and a few hundred tasks already fill every window size the
//! generator draws (1–64) many times over. The kernel registry and a worker pool of two threads
//! are made once per process: every compiled program runs on that shared pool and orchestrates
//! on the fuzzing thread, so an input starts no thread. Each input still goes validator →
//! expander → bytecode → two runs on two worker threads.

#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use pto_wsp::bytecode::{EncodeOptions, ExecutorConfig, Interpreter, Program, Task, encode};
use pto_wsp::ir::{Bindings, ExpandOptions, expand, parse};
use pto_wsp::kernels::KernelRegistry;
use pto_wsp::{CompileOptions, WorkerPool, compile, lower};

#[path = "common/modules.rs"]
mod modules;

use modules::{Choices, module_text};

/// Inputs whose module generates more tasks than this are not run (see the module docs).
const MAX_TASKS: usize = 256;

/// [`MAX_TASKS`], or `PTO_WSP_FUZZ_MAX_TASKS` when set (to measure what the bound costs).
fn max_tasks() -> usize {
    static N: OnceLock<usize> = OnceLock::new();
    *N.get_or_init(|| {
        std::env::var("PTO_WSP_FUZZ_MAX_TASKS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(MAX_TASKS)
    })
}

/// The built-ins under the generator's kernel names, built once.
fn registry() -> &'static KernelRegistry {
    static R: OnceLock<KernelRegistry> = OnceLock::new();
    R.get_or_init(|| {
        let mut r = KernelRegistry::with_builtins();
        for (k, builtin) in [("inc", "counter"), ("acc", "accumulate"), ("cp", "copy")] {
            r.alias(k, builtin).expect("a built-in");
        }
        r
    })
}

/// The two worker threads every program of the process runs on, started once.
fn pool() -> &'static Arc<WorkerPool> {
    static P: OnceLock<Arc<WorkerPool>> = OnceLock::new();
    P.get_or_init(|| Arc::new(WorkerPool::new(2).expect("two worker threads")))
}

fuzz_target!(|data: &[u8]| {
    let text = module_text(&mut Choices(data));
    let module = match parse(&text) {
        Ok(m) => m,
        Err(e) => panic!("a generated module does not parse: {e}\n{text}"),
    };
    // Validation and resolution, once: both runs compile the same lowered plan, as a program
    // that runs a module twice would.
    let Ok(lowered) = lower(&module) else {
        return;
    };
    let bindings = Bindings::new();
    let options = ExpandOptions {
        limit: Some(max_tasks()),
        executors: None,
    };
    let Ok(x) = expand(lowered.resolved(), &bindings, &options) else {
        return;
    };
    if x.truncated {
        return;
    }

    // Bytecode: every task generated once over two executors, as many as the expander's.
    if let Ok(bytes) = encode(lowered.resolved(), &EncodeOptions::default()) {
        let prog = Program::decode(&bytes).expect("encoded bytecode decodes");
        let bound = prog.bind(&bindings).expect("binds like the expander");
        let mut n = 0usize;
        for me in 0..2 {
            let config = ExecutorConfig {
                executor: Some(me),
                executors: Some(2),
                owners: None,
                max_steps: Some(1_000_000),
            };
            let mut interp = Interpreter::new(&prog, &bound, config).expect("interpreter");
            interp
                .run(&mut |_t: &Task<'_>| {
                    n += 1;
                })
                .expect("interprets like the expander");
        }
        assert_eq!(n, x.tasks.len(), "bytecode tasks against the expander's\n{text}");
    }

    // Runs: host and device generation, with debug checks; equal tensors where both succeed.
    let mut results = Vec::new();
    for device_gen in [false, true] {
        let compiled = compile(
            lowered.clone(),
            CompileOptions {
                threads: 2,
                pool: Some(Arc::clone(pool())),
                debug_checks: true,
                kernels: registry().clone(),
                device_gen,
                ..CompileOptions::default()
            },
        );
        let Ok(mut p) = compiled else {
            results.push(None);
            continue;
        };
        if let Ok(mut g) = p.tensors(&bindings)
            && let Some(s) = g.as_mut()
        {
            s.fill_random(7);
        }
        let tensors = p.execute(&bindings).ok().and_then(|_| {
            let g = p.tensors(&bindings).ok()?;
            let s = g.as_ref()?;
            Some((0..s.len() as u32).map(|t| s.bytes(t).to_vec()).collect::<Vec<_>>())
        });
        results.push(tensors);
    }
    if let [Some(host), Some(dev)] = &results[..] {
        assert!(host == dev, "host and device generation differ\n{text}");
    }
});
