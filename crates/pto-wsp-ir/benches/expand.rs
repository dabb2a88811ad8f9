//! Expander throughput on the LLaMA-7B prefill layer (`examples/llama7b_layer.wsp`).
//!
//! Run with `cargo bench -p pto-wsp-ir --bench expand`. For each sequence length it measures, in
//! one process: a hand-written baseline (the same 486 tasks per 32-row tile produced by plain
//! nested Rust loops into a flat vector of fixed-size records: the floor for "enumerate the
//! tasks"), the streaming expander (`expand_each`, nothing stored) and the storing expander
//! (`expand`). Best of several runs; prints ns/task and tasks/s and the ratio to the baseline.

use pto_wsp_ir::{Bindings, ExpandOptions, expand, expand_each, parse};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// One task of the baseline: kernel, two scalar params, four 2-d regions.
#[derive(Clone, Copy)]
struct FlatTask {
    kernel: u32,
    params: [i64; 2],
    regions: [[i64; 4]; 4],
}

/// The layer's task list by hand: per tile, the same kernels and regions as the example.
fn baseline(seq: i64, out: &mut Vec<FlatTask>) {
    out.clear();
    let mut push = |kernel: u32, a: i64, b: i64| {
        out.push(FlatTask {
            kernel,
            params: [a, b],
            regions: [[a, 32, b, 128]; 4],
        });
    };
    for t in 0..seq / 32 {
        let r = t * 32;
        push(0, r, 0);
        for h in 0..32 {
            for k in 1..=5 {
                push(k, r, h * 128);
            }
        }
        for j in 0..32 {
            push(6, r, j * 128);
        }
        push(7, r, 0);
        push(0, r, 0);
        for f in 0..86 {
            for k in 8..=10 {
                push(k, r, f * 128);
            }
        }
        for j in 0..32 {
            push(11, r, j * 128);
        }
        push(7, r, 0);
    }
}

/// Best wall time of `f` over enough runs to take at least ~0.5 s (at least 3 runs).
fn best(mut f: impl FnMut() -> usize) -> (Duration, usize) {
    let mut best = Duration::MAX;
    let mut n = 0;
    let start = Instant::now();
    let mut runs = 0;
    while runs < 3 || start.elapsed() < Duration::from_millis(500) {
        let t = Instant::now();
        n = black_box(f());
        best = best.min(t.elapsed());
        runs += 1;
    }
    (best, n)
}

fn main() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/llama7b_layer.wsp"
    );
    let text = std::fs::read_to_string(path).expect("examples/llama7b_layer.wsp");
    // Resolved once, as a program is: the figures are of the expansion alone.
    let module = pto_wsp_ir::resolve(&parse(&text).expect("example parses"), &Default::default())
        .expect("example resolves");
    let options = ExpandOptions::default();
    println!(
        "{:>7} {:>8} | {:>20} | {:>20} | {:>20}",
        "seq", "tasks", "baseline", "expand_each", "expand"
    );
    for seq in [1024i64, 4096, 16384] {
        let bindings = Bindings::new().symbol("seq", seq);
        let mut flat = Vec::new();
        let (tb, nb) = best(|| {
            baseline(seq, &mut flat);
            let check = flat.iter().fold(0i64, |a, t| {
                a.wrapping_add(t.kernel as i64 + t.params[1] + t.regions[3][2])
            });
            flat.len() + (check & 1) as usize
        });
        let (ts, ns) = best(|| {
            let mut acc = 0usize;
            let summary = expand_each(&module, &bindings, &options, |_, task| {
                acc = acc.wrapping_add(task.kernel as usize);
            })
            .expect("expands");
            black_box(acc);
            summary.tasks as usize
        });
        let (te, ne) = best(|| {
            expand(&module, &bindings, &options)
                .expect("expands")
                .tasks
                .len()
        });
        assert_eq!(
            nb & !1,
            ns & !1,
            "baseline and expander disagree on the task count"
        );
        assert_eq!(ns, ne);
        let cell = |d: Duration| {
            let per = d.as_nanos() as f64 / ns as f64;
            format!("{per:6.1} ns {:5.2} M/s", 1e3 / per)
        };
        println!(
            "{seq:>7} {ns:>8} | {} | {} | {}   (expand_each {:.1}x baseline, expand {:.1}x)",
            cell(tb),
            cell(ts),
            cell(te),
            ts.as_secs_f64() / tb.as_secs_f64(),
            te.as_secs_f64() / tb.as_secs_f64()
        );
    }
}
