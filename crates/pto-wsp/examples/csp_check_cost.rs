//! What checking a pipeline's order costs (`docs/BENCHMARKS.md`): `examples/csp_pipeline.wsp`
//! run with the happens-before check on (every access recorded with its process's vector clock
//! and compared with the other processes' unordered ones) and off (only the regions in flight
//! compared), alternated in one process, with the example's kernels (`copy`, `silu` on 256 x
//! 1024 `f16` tiles) and with no-op kernels (the worst case: nothing but the pipeline's own
//! work), at 16 and 256 tiles.
//!
//! Run: `cargo run --release -p pto-wsp --example csp_check_cost [REPS]`.

use pto_wsp::cpu::{CspOptions, run_pipeline};
use pto_wsp::driver::aliases::apply_aliases;
use pto_wsp::driver::{bindings_for, load_source};
use pto_wsp::kernels::{KernelRegistry, TensorStore};
use pto_wsp::lower;
use std::time::Instant;

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn measure(text: &str, ntiles: u64, noop: bool, reps: usize) {
    let loaded = load_source("csp_pipeline.wsp", text).expect("the example loads");
    let bind = format!("ntiles={ntiles}");
    let bindings = bindings_for(&loaded, &[bind]).expect("bindings");
    let mut registry = KernelRegistry::with_builtins();
    apply_aliases(&loaded, &mut registry).expect("aliases");
    let module = &loaded.module;
    if noop {
        registry = KernelRegistry::new();
        for k in &module.kernels {
            registry.register(&k.name.name, |_| Ok(()));
        }
    }
    let plan = lower(module).expect("lowers");
    let names: Vec<String> = module.kernels.iter().map(|k| k.name.name.clone()).collect();
    let kernels: Vec<_> = names.iter().map(|n| registry.lookup(n)).collect();
    let mut store = TensorStore::new(module, &bindings).expect("store");
    store.fill_random(7);
    let (mut on, mut off) = (Vec::new(), Vec::new());
    let mut tasks = 0;
    for rep in 0..2 * reps {
        let check = rep % 2 == 0;
        let options = CspOptions {
            check_order: check,
            ..CspOptions::default()
        };
        let t = Instant::now();
        let stats = run_pipeline(
            plan.resolved(),
            &bindings,
            &store,
            &registry,
            &kernels,
            &names,
            options,
        )
        .expect("runs");
        let dt = t.elapsed().as_secs_f64();
        tasks = stats.tasks;
        if check { on.push(dt) } else { off.push(dt) }
    }
    let (on, off) = (median(&mut on), median(&mut off));
    println!(
        "{} kernels, {ntiles} tiles ({tasks} tasks): check on {:.3} ms, off {:.3} ms: {:+.1}% \
         ({:.0} ns per task)",
        if noop { "no-op" } else { "the example's" },
        on * 1e3,
        off * 1e3,
        (on / off - 1.0) * 100.0,
        (on - off) * 1e9 / tasks as f64
    );
}

fn main() {
    let reps: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(21);
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/csp_pipeline.wsp"
    );
    let text = std::fs::read_to_string(path).expect("the example");
    for noop in [false, true] {
        for ntiles in [16, 256] {
            measure(&text, ntiles, noop, reps);
        }
    }
}
