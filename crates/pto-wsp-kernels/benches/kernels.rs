//! Kernel benchmarks: the built-in kernels called as an engine calls them — through
//! the registry, on a `TaskContext` over a `TensorStore` — against a baseline doing the same
//! work directly, in the same process.
//!
//! - GEMM: `matmul` on `n × n` tiles (n = 64, 128, 256) against the `gemm` crate called
//!   directly on plain vectors; `f32`, and `f16` inputs with an `f32` output (the direct
//!   baseline converts both inputs to `f32`, then calls `gemm`).
//! - Decode attention: `attn_decode_chunk` over one KV chunk (512 rows of 128) against a
//!   `memcpy` of as many bytes as the chunk's keys and values, reported as GB/s of K + V read.
//!
//! Criterion measures each benchmark for the record; then a summary pass times each pair back
//! to back, interleaved, best of several rounds, and prints the ratios (the figure that
//! survives a shared, noisy machine). `cargo bench -p pto-wsp-kernels --bench kernels`.

use criterion::{BenchmarkId, Criterion, Throughput};
use pto_wsp_kernels::KernelRegistry;
use pto_wsp_kernels::bench::{
    AttnCase, GemmCase, HEAD_DIM, KV_ROWS, SIZES, compare, fma_peak_gflops,
};
use std::time::Duration;

fn criterion_benches(c: &mut Criterion, reg: &KernelRegistry) {
    let matmul = reg.lookup("matmul").expect("matmul");
    let attn = reg.lookup("attn_decode_chunk").expect("attn_decode_chunk");
    for f16_inputs in [false, true] {
        let mut group = c.benchmark_group(if f16_inputs {
            "gemm_f16_f32acc"
        } else {
            "gemm_f32"
        });
        for n in SIZES {
            let mut case = GemmCase::new(n, f16_inputs);
            group.throughput(Throughput::Elements(case.flops()));
            group.bench_function(BenchmarkId::new("kernel", n), |b| {
                b.iter(|| case.kernel(reg, matmul))
            });
            group.bench_function(BenchmarkId::new("gemm_direct", n), |b| {
                b.iter(|| case.direct())
            });
        }
        group.finish();
    }
    let mut group = c.benchmark_group("attn_decode_chunk");
    for dtype in ["f16", "f32"] {
        for g in [1, 4] {
            let mut case = AttnCase::new(g, dtype);
            group.throughput(Throughput::Bytes(case.bytes()));
            let id = format!("{dtype}_g{g}");
            group.bench_function(BenchmarkId::new("kernel", &id), |b| {
                b.iter(|| case.kernel(reg, attn))
            });
            group.bench_function(BenchmarkId::new("memcpy", &id), |b| b.iter(|| case.copy()));
        }
    }
    group.finish();
}

fn summary(reg: &KernelRegistry) {
    let matmul = reg.lookup("matmul").expect("matmul");
    let attn = reg.lookup("attn_decode_chunk").expect("attn_decode_chunk");
    println!("\nsummary (interleaved, best of 11 rounds of ~40 ms each)");
    let peak = fma_peak_gflops();
    if let Some(p) = peak {
        println!("f32 FMA peak of one core (10 independent 8-lane chains): {p:.1} GFLOP/s");
    }
    println!("GEMM through TaskContext views vs gemm called directly:");
    println!(
        "{:>17} {:>5} {:>14} {:>14} {:>7}",
        "inputs", "n", "kernel GF/s", "direct GF/s", "ratio"
    );
    for f16_inputs in [false, true] {
        for n in SIZES {
            let case = std::cell::RefCell::new(GemmCase::new(n, f16_inputs));
            let (tk, td) = compare(
                || case.borrow().kernel(reg, matmul),
                || case.borrow_mut().direct(),
            );
            let case = case.borrow();
            let gf = |t: Duration| case.flops() as f64 / t.as_secs_f64() / 1e9;
            println!(
                "{:>17} {:>5} {:>14.1} {:>14.1} {:>6.0}%",
                case.label(),
                n,
                gf(tk),
                gf(td),
                100.0 * td.as_secs_f64() / tk.as_secs_f64()
            );
        }
    }
    println!(
        "\ndecode attention chunk ({KV_ROWS} x {HEAD_DIM} keys and values) vs memcpy of the same bytes:"
    );
    println!(
        "{:>6} {:>3} {:>9} {:>12} {:>12} {:>12} {:>7} {:>10}",
        "kv", "G", "KV bytes", "kernel µs", "kernel GB/s", "memcpy GB/s", "ratio", "% FMA pk"
    );
    for dtype in ["f16", "f32"] {
        for g in [1, 2, 4, 8] {
            let case = std::cell::RefCell::new(AttnCase::new(g, dtype));
            let (tk, tc) = compare(
                || case.borrow().kernel(reg, attn),
                || case.borrow_mut().copy(),
            );
            let case = case.borrow();
            let gbs = |t: Duration| case.bytes() as f64 / t.as_secs_f64() / 1e9;
            // q·k and p·v: 2 flops each per (query, key, column).
            let flops = 4.0 * (case.g * KV_ROWS * HEAD_DIM) as f64;
            let of_peak = peak.map_or(f64::NAN, |p| 100.0 * flops / tk.as_secs_f64() / 1e9 / p);
            println!(
                "{:>6} {:>3} {:>9} {:>12.2} {:>12.1} {:>12.1} {:>6.0}% {:>9.0}%",
                case.dtype,
                case.g,
                case.bytes(),
                tk.as_secs_f64() * 1e6,
                gbs(tk),
                gbs(tc),
                100.0 * tc.as_secs_f64() / tk.as_secs_f64(),
                of_peak
            );
        }
    }
}

fn main() {
    let reg = KernelRegistry::with_builtins();
    let summary_only = std::env::var_os("KERNELS_BENCH_SUMMARY_ONLY").is_some();
    if !summary_only {
        let mut c = Criterion::default()
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(2))
            .configure_from_args();
        criterion_benches(&mut c, &reg);
        c.final_summary();
    }
    summary(&reg);
}
