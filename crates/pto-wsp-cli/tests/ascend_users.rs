//! Workloads written as users write them — built-in kernels only, from the documentation —
//! run on simpler's `a2a3sim` without edits (`examples/users/`, at small bindings): MoE with
//! its routing computed by the workload, RMSNorm then GEMM, variable-length decode attention.
//! Each must PASS `run --target ascend_a2a3sim`'s comparison with `cpu_sim`, and each side's
//! results are checked against an `f64` reference written here.
//!
//! Needs the checkouts and venv of `scripts/prepare-simpler.sh`; without them each test prints
//! one `skipped: …` line and passes. Simulator runs never overlap (a process lock here, the
//! nextest test group of `ascend_sim` tests).

#[allow(dead_code)] // this crate uses a few of the shared helpers
mod common;

use pto_wsp_cli::cmd::run::RunOptions;
use pto_wsp_cli::cmd::run::ascend::{AscendOutcome, Toolchain, run_ascend};
use std::sync::Mutex;

static SIM: Mutex<()> = Mutex::new(());

/// Runs `examples/users/NAME.wsp` under `binds` on both back ends, or says why not.
fn run_user(name: &str, binds: &[&str]) -> Option<AscendOutcome> {
    if let Err(why) = Toolchain::find() {
        common::toolchain_skipped(common::Needs::Simpler, &why);
        return None;
    }
    common::toolchain_ran(common::Needs::Simpler);
    let _one_at_a_time = SIM.lock().unwrap_or_else(|e| e.into_inner());
    let path = format!("examples/users/{name}.wsp");
    let text = std::fs::read_to_string(common::root().join(&path)).unwrap();
    let opts = RunOptions {
        progress: false,
        threads: 2,
        binds: binds.iter().map(|s| s.to_string()).collect(),
        ..RunOptions::default()
    };
    let out = run_ascend(&path, &text, "ascend_a2a3sim", &opts).unwrap_or_else(|e| panic!("{e}"));
    println!("{}", out.report);
    assert!(out.passed, "{name}: a2a3sim and cpu_sim disagree");
    Some(out)
}

fn get<'a>(v: &'a [(String, Vec<f64>)], name: &str) -> &'a [f64] {
    &v.iter().find(|(n, _)| n == name).unwrap().1
}

/// max |got − want| over max(1, max |want|): the error relative to the result's scale.
fn rel_err(got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    let scale = want.iter().fold(1e-30f64, |m, x| m.max(x.abs()));
    got.iter()
        .zip(want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max)
        / scale
}

#[test]
fn ascend_sim_user_rmsnorm_then_gemm_matches_its_reference() {
    let (t, h, w) = (32usize, 96usize, 128usize);
    let Some(out) = run_user("rmsnorm_gemm", &["tokens=32", "hidden=96", "width=128"]) else {
        return;
    };
    let (x, nw, wm) = (
        get(&out.inputs, "X"),
        get(&out.inputs, "NW"),
        get(&out.inputs, "W"),
    );
    let mut xn_ref = vec![0f64; t * h];
    for r in 0..t {
        let row = &x[r * h..(r + 1) * h];
        let inv = 1.0 / (row.iter().map(|v| v * v).sum::<f64>() / h as f64 + 1e-5).sqrt();
        for c in 0..h {
            xn_ref[r * h + c] = row[c] * inv * nw[c];
        }
    }
    for (side, outs) in [("cpu_sim", &out.cpu_outputs), ("a2a3sim", &out.sim_outputs)] {
        // XN is f16: one rounding (2^-11 relative) plus the f32 steps.
        let e = rel_err(get(outs, "XN"), &xn_ref);
        println!("rmsnorm_gemm {side}: XN {e:.2e} (f16)");
        assert!(e < 1e-3, "{side}: XN error {e}");
        // Z = XN · W from that side's own XN (f16 products, exact in f32; f32 sums).
        let xn = get(outs, "XN");
        let z_ref: Vec<f64> = (0..t * w)
            .map(|i| (0..h).map(|k| xn[i / w * h + k] * wm[k * w + i % w]).sum())
            .collect();
        let e = rel_err(get(outs, "Z"), &z_ref);
        println!("rmsnorm_gemm {side}: Z {e:.2e}");
        assert!(e < 1e-5, "{side}: Z error {e}");
    }
}

#[test]
fn ascend_sim_user_variable_length_decode_attention_matches_its_reference() {
    let lens = [100usize, 300];
    let Some(out) = run_user("varlen_decode", &["batch=2", "kv_lens=[100, 300]"]) else {
        return;
    };
    let f32s = |n: &str| -> Vec<f32> { get(&out.inputs, n).iter().map(|&v| v as f32).collect() };
    let (q, k, v) = (f32s("Q"), f32s("K"), f32s("V"));
    let (d, kvh, cache) = (128usize, 4usize, 1024usize);
    let mut reference = Vec::new();
    for (b, &len) in lens.iter().enumerate() {
        for qh in 0..16 {
            let g = qh / 4;
            // The keys and values of KV head g, contiguous.
            let gather = |t: &[f32]| -> Vec<f32> {
                (0..len)
                    .flat_map(|j| {
                        let at = ((b * cache + j) * kvh + g) * d;
                        t[at..at + d].to_vec()
                    })
                    .collect()
            };
            let qrow = &q[(b * 16 + qh) * d..(b * 16 + qh + 1) * d];
            reference.extend(common::attention_reference(
                qrow,
                &gather(&k),
                &gather(&v),
                len,
                d,
                1.0 / (d as f64).sqrt(),
            ));
        }
    }
    for (side, outs) in [("cpu_sim", &out.cpu_outputs), ("a2a3sim", &out.sim_outputs)] {
        let e = rel_err(get(outs, "OUT"), &reference);
        println!("varlen_decode {side}: OUT {e:.2e}");
        assert!(e < 1e-5, "{side}: OUT error {e}");
    }
}

#[test]
fn ascend_sim_user_moe_with_computed_routing_matches_its_reference() {
    let (t, h, f, experts) = (24usize, 40usize, 24usize, 8usize);
    let Some(out) = run_user("moe_routed_ffn", &["tokens=24", "hidden=40", "ffn=24"]) else {
        return;
    };
    let x = get(&out.inputs, "X");
    let (w1, w3, w2) = (
        get(&out.inputs, "W1"),
        get(&out.inputs, "W3"),
        get(&out.inputs, "W2"),
    );
    for (side, outs) in [("cpu_sim", &out.cpu_outputs), ("a2a3sim", &out.sim_outputs)] {
        // The routing each side computed (integers, equal on both sides: out.passed), each
        // token's output the sum over its experts of its router weight times the expert's FFN.
        let (count, list, probs) = (get(outs, "COUNT"), get(outs, "LIST"), get(outs, "PROBS"));
        let routed: usize = count.iter().map(|&c| c as usize).sum();
        assert_eq!(routed, 2 * t, "{side}: every token goes to two experts");
        let mut y_ref = vec![0f64; t * h];
        for e in 0..experts {
            for i in 0..count[e] as usize {
                let tok = list[e * t + i] as usize;
                let xr = &x[tok * h..(tok + 1) * h];
                let mut a = vec![0f64; f];
                for (j, aj) in a.iter_mut().enumerate() {
                    let g: f64 = (0..h).map(|k| xr[k] * w1[(e * h + k) * f + j]).sum();
                    let u: f64 = (0..h).map(|k| xr[k] * w3[(e * h + k) * f + j]).sum();
                    *aj = g / (1.0 + (-g).exp()) * u;
                }
                for c in 0..h {
                    let y: f64 = (0..f).map(|j| a[j] * w2[(e * f + j) * h + c]).sum();
                    y_ref[tok * h + c] += probs[tok * experts + e] * y;
                }
            }
        }
        let err = rel_err(get(outs, "Y"), &y_ref);
        println!("moe_routed_ffn {side}: Y {err:.2e}");
        assert!(err < 1e-5, "{side}: Y error {err}");
    }
}
