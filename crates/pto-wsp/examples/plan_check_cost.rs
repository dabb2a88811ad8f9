//! What checking a plan's promise of independent descriptors costs (`docs/BENCHMARKS.md`): the
//! same launches with the check on (every descriptor's regions evaluated on the generator's
//! thread and recorded in the interval ledger) and off (only the regions in flight compared),
//! alternated in one process, on a worst case of tiny kernels (a 16-element copy per
//! descriptor) and on the decode attention example.
//!
//! Run: `cargo run --release -p pto-wsp --example plan_check_cost [REPS]`.

use pto_wsp::driver::aliases::apply_aliases;
use pto_wsp::driver::{bindings_for, load_source};
use pto_wsp::kernels::{KernelRegistry, TensorStore};
use pto_wsp::plan::{PlanOptions, run_plans};
use std::time::Instant;

/// `n` rows of 64 columns, each 16-column tile copied to its own workspace slot: `4 n`
/// descriptors of a 16-element copy, the cheapest kernel a plan can run.
fn copies(n: usize) -> String {
    format!(
        "//@ alias cp=copy
symbol n: i64;
tensor X: f32[n, 64];
tensor W: f32[n * 64];
kernel cp(in x: f32[?, ?], out y: f32[?]);
space S {{
    axis r from 0 to n;
    axis c from 0 to 64;
    tile(c, 16);
}}
tiers T {{
    tier only default workspace 16;
}}
plan p over S with T {{
    workspace W;
    kernel only => cp(X[r, start +: 16], W[workspace +: 16]);
    generate {{
        for i in r {{
            for j, lo, hi in c {{
                let ws = alloc(0, i, j);
                emit(tier = 0, r = i, c = j, start = lo, end = hi, workspace = ws);
            }}
        }}
    }}
}}
//@ bind n={n}
"
    )
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn measure(label: &str, name: &str, text: &str, reps: usize) {
    let loaded = load_source(name, text).expect("the module loads");
    let bindings = bindings_for(&loaded, &[]).expect("bindings");
    let mut registry = KernelRegistry::with_builtins();
    apply_aliases(&loaded, &mut registry).expect("aliases");
    let module = &loaded.module;
    let mut store = TensorStore::new(module, &bindings).expect("store");
    store.fill_random(7);
    for threads in [1, 2] {
        let (mut on, mut off) = (Vec::new(), Vec::new());
        let mut descriptors = 0;
        for rep in 0..2 * reps {
            let check = rep % 2 == 0;
            let opts = PlanOptions {
                dispatch_threads: threads,
                check_independence: check,
                ..PlanOptions::default()
            };
            let t = Instant::now();
            let stats = run_plans(module, &bindings, &mut store, &registry, opts).expect("runs");
            let dt = t.elapsed().as_secs_f64();
            descriptors = stats.iter().map(|s| s.launch.descriptors).sum::<u64>();
            if check { on.push(dt) } else { off.push(dt) }
        }
        let (on, off) = (median(&mut on), median(&mut off));
        println!(
            "{label}, {threads} dispatch thread(s): {descriptors} descriptors; check on {:.2} ms, \
             off {:.2} ms: +{:.1}% ({:.0} ns per descriptor)",
            on * 1e3,
            off * 1e3,
            (on / off - 1.0) * 100.0,
            (on - off) * 1e9 / descriptors as f64
        );
    }
}

fn main() {
    let reps: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(15);
    measure("tiny copies (n = 4096)", "copies.wsp", &copies(4096), reps);
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/pde/decode_attention.wsp"
    );
    let text = std::fs::read_to_string(path).expect("the example");
    measure(
        "decode attention example",
        "decode_attention.wsp",
        &text,
        reps,
    );
}
