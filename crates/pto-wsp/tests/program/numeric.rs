//! Every example run with real kernels against an independent reference in plain Rust.
//!
//! Each example is loaded as `pto-wsp run` loads it (its `//@ bind` defaults, then smaller sizes;
//! its `//@ alias` lines map kernels to built-ins), its tensors filled from a fixed seed, and its
//! outputs compared with a reference computed here in `f64` from those inputs — sharing nothing
//! with the kernels or the runtime. Every example runs on 1, 2 and 4 threads, under each ready
//! policy (`fifo`, `work_steal`, `priority`) and each dispatch policy (the example's own,
//! `work_steal`, `round_robin`, `hash`, `threshold`), with debug checks on (a conflicting
//! pair of tasks in flight fails the run). A pipeline runs its processes on threads; it is run
//! with channel depths 1, 2 and 8.
//!
//! Tolerances (`|got − want| ≤ bound`, per element unless said otherwise), stated once:
//!
//! - **f32 results of one reduction** (`rmsnorm`, the 3-pass softmax): `1e-5 · |want|`;
//!   in `bf16` (`rmsnorm` with every tensor `bf16`): plus one rounding, `2⁻⁸ · |want|`. Inputs
//!   are exact; the error is that of an `f32` sum of up to 4,096 terms (8 interleaved partial
//!   sums), the `exp` of the standard library (< 1 ulp) and one division — about 1e-6 in
//!   practice (the worst-case bound of such a sum, `n/8 · 2⁻²⁴`, is looser).
//! - **f32 products** (GEMM, the MoE expert): `1e-5 · Σ|terms|` — the error of an `f32` dot
//!   product relative to the sum of its terms' magnitudes, the only scale rounding bounds (a
//!   sum can cancel).
//! - **f16 results** (attention outputs, the pipeline): the `f32` bound plus one rounding to
//!   `f16` per `f16` store on the way — `2⁻¹¹` of the value's scale each (MHA stores P and O in
//!   `f16`: `3 · 2⁻¹¹`; split-KV decode stores only O: `2 · 2⁻¹¹`), the scale of an attention
//!   output being `Σ_j p_j |v_j|`; plus `2⁻²⁴` absolute for `f16` subnormals. `f16` inputs add
//!   no error: they are exact in `f32`, and a product of two is exact in `f32`.
//! - **Whole layers** (the LLaMA-style block): normwise, `max |got − want| ≤ 1e-4 · rms(want)`:
//!   chains of `f32` products, softmax and norms, where one element's error depends on many;
//!   measured errors are about 1e-6 of the RMS. Any mistake of order (a missing dependency, a
//!   stale tile) moves outputs by a large fraction of their scale.

use super::resolved;
use half::f16;
use pto_wsp::ir::{Bindings, DType, ExpandOptions, Module, expand, parse};
use pto_wsp::kernels::{KernelRegistry, TensorStore};
use pto_wsp::{CompileOptions, RunError, compile, lower};

// ---------------------------------------------------------------------------------------------
// Loading and running

pub(super) fn source(name: &str) -> String {
    let path = format!("{}/../../examples/{name}.wsp", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The module of `text`, its `//@ bind` defaults then `binds`, and a registry with its
/// `//@ alias` lines applied.
pub(super) fn load(text: &str, binds: &[&str]) -> (Module, Bindings, KernelRegistry) {
    let module = parse(text).unwrap_or_else(|e| panic!("{e:?}"));
    let mut b = Bindings::new();
    let mut reg = KernelRegistry::with_builtins();
    for line in text.lines() {
        if let Some(spec) = line.strip_prefix("//@ bind ") {
            b.bind_str(&module, spec.trim()).unwrap();
        }
        if let Some(spec) = line.strip_prefix("//@ alias ") {
            let (name, target) = spec.split_once('=').unwrap();
            reg.alias(name.trim(), target.trim())
                .unwrap_or_else(|| panic!("alias {spec}"));
        }
    }
    for spec in binds {
        b.bind_str(&module, spec).unwrap();
    }
    (module, b, reg)
}

/// Replaces the schedule line that starts with `key` (after indentation) by `key` `value`.
fn set_line(text: &str, key: &str, value: &str) -> String {
    let mut found = false;
    let out: Vec<String> = text
        .lines()
        .map(|l| {
            let t = l.trim_start();
            if t.starts_with(&format!("{key} ")) && t.ends_with(';') && !l.starts_with("//") {
                found = true;
                format!("{}{key} {value};", &l[..l.len() - t.len()])
            } else {
                l.to_string()
            }
        })
        .collect();
    assert!(found, "no `{key}` line");
    out.join("\n") + "\n"
}

/// The example under every dispatch and ready policy: (label, text).
fn policy_variants(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for dispatch in [
        None,
        Some("work_steal"),
        Some("round_robin(3)"),
        Some("hash(7)"),
        Some("threshold(0) { below 1: round_robin(2), else: work_steal }"),
    ] {
        let t = match dispatch {
            Some(d) => set_line(text, "dispatch", d),
            None => text.to_string(),
        };
        for ready in ["fifo", "work_steal", "priority(0)"] {
            out.push((
                format!("dispatch {} ready {ready}", dispatch.unwrap_or("(own)")),
                set_line(&t, "ready", ready),
            ));
        }
    }
    out
}

/// The inputs: every tensor from `seed`, then `prepare`.
pub(super) fn inputs(
    module: &Module,
    b: &Bindings,
    seed: u64,
    prepare: impl Fn(&mut TensorStore),
) -> TensorStore {
    let mut s = TensorStore::new(module, b).unwrap();
    s.fill_random(seed);
    prepare(&mut s);
    s
}

/// Runs `text` (every policy variant, 1, 2 and 4 threads, debug checks on) from `input` and
/// calls `check` on each result; returns the number of runs.
fn run_everywhere(
    text: &str,
    binds: &[&str],
    input: &TensorStore,
    check: &dyn Fn(&TensorStore, &str),
) -> usize {
    let mut runs = 0;
    for (label, t) in policy_variants(text) {
        let (module, b, reg) = load(&t, binds);
        for threads in [1, 2, 4] {
            let out = run_once(&module, &b, &reg, threads, input)
                .unwrap_or_else(|e| panic!("{label} threads {threads}: {e}"));
            check(&out, &format!("{label} threads {threads}"));
            runs += 1;
        }
    }
    runs
}

pub(super) fn run_once(
    module: &Module,
    b: &Bindings,
    reg: &KernelRegistry,
    threads: usize,
    input: &TensorStore,
) -> Result<TensorStore, RunError> {
    let mut p = compile(
        lower(module).unwrap(),
        CompileOptions {
            threads,
            debug_checks: true,
            kernels: reg.clone(),
            ..CompileOptions::default()
        },
    )
    .unwrap();
    *p.tensors(b)? = Some(input.clone());
    p.execute(b)?;
    let g = p.tensors(b)?;
    Ok(g.as_ref().unwrap().clone())
}

// ---------------------------------------------------------------------------------------------
// Data and comparisons

pub(super) fn get(s: &TensorStore, name: &str) -> Vec<f64> {
    let t = s.index_of(name).unwrap();
    match s.info(t).dtype {
        DType::F32 => s
            .read::<f32>(name)
            .unwrap()
            .iter()
            .map(|&x| x as f64)
            .collect(),
        DType::F16 => s
            .read::<f16>(name)
            .unwrap()
            .iter()
            .map(|x| x.to_f64())
            .collect(),
        DType::Bf16 => s
            .read::<half::bf16>(name)
            .unwrap()
            .iter()
            .map(|x| x.to_f64())
            .collect(),
        d => panic!("{name} is {d}"),
    }
}

fn ints(b: &Bindings, name: &str) -> Vec<usize> {
    b.arrays[name].iter().map(|&v| v as usize).collect()
}

/// Multiplies f16 tensor `name` by `s` (a power of two: exact).
fn scale(s: &mut TensorStore, name: &str, k: f32) {
    let v: Vec<f16> = s
        .read::<f16>(name)
        .unwrap()
        .iter()
        .map(|x| f16::from_f32(x.to_f32() * k))
        .collect();
    s.write(name, &v).unwrap();
}

pub(super) const F16_ROUND: f64 = 1.0 / 2048.0;
pub(super) const F16_FLOOR: f64 = 1.0 / (1u64 << 24) as f64;

/// `|got[i] − want[i]| ≤ rel · scale[i] + floor` for every `i` in `idx`.
pub(super) fn assert_close(
    what: &str,
    got: &[f64],
    want: &[f64],
    scale: &[f64],
    idx: impl Iterator<Item = usize>,
    rel: f64,
    floor: f64,
) {
    let mut n = 0;
    for i in idx {
        let bound = rel * scale[i].abs() + floor;
        assert!(
            (got[i] - want[i]).abs() <= bound,
            "{what}[{i}]: got {}, want {} (error {:e} > {bound:e})",
            got[i],
            want[i],
            (got[i] - want[i]).abs()
        );
        n += 1;
    }
    assert!(n > 0, "{what}: nothing compared");
}

/// `max |got − want| ≤ rel · rms(want)`.
fn assert_normwise(what: &str, got: &[f64], want: &[f64], rel: f64) {
    assert_eq!(got.len(), want.len(), "{what}");
    let rms = (want.iter().map(|v| v * v).sum::<f64>() / want.len() as f64).sqrt();
    let err = got
        .iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs())
        .fold(0.0, f64::max);
    assert!(
        err <= rel * rms,
        "{what}: max error {err:e} > {rel:e} x rms {rms:e}"
    );
}

/// Softmax attention of query `q` over key / value rows `0 .. n` (row `j` of `k` at
/// `k[j * d ..]`), scale `scale`: (output, output scale `Σ p_j |v_j|`).
fn attend(q: &[f64], k: &[f64], v: &[f64], d: usize, n: usize, scale: f64) -> (Vec<f64>, Vec<f64>) {
    let s: Vec<f64> = (0..n)
        .map(|j| scale * (0..d).map(|c| q[c] * k[j * d + c]).sum::<f64>())
        .collect();
    let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
    let l: f64 = e.iter().sum();
    let o = (0..d)
        .map(|c| (0..n).map(|j| e[j] * v[j * d + c]).sum::<f64>() / l)
        .collect();
    let mag = (0..d)
        .map(|c| (0..n).map(|j| e[j] * v[j * d + c].abs()).sum::<f64>() / l)
        .collect();
    (o, mag)
}

fn silu(x: f64) -> f64 {
    x / (1.0 + (-x).exp())
}

// ---------------------------------------------------------------------------------------------
// The examples

#[test]
fn gemm_f16_inputs_f32_accumulator_matches_reference() {
    let text = source("gemm");
    let binds = ["M=256", "N=384", "K=256"];
    let (module, b, _) = load(&text, &binds);
    let input = inputs(&module, &b, 11, |_| {});
    let (m, n, k) = (256, 384, 256);
    let (a, bm) = (get(&input, "A"), get(&input, "B"));
    let mut want = vec![0.0; m * n];
    let mut mag = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            for p in 0..k {
                want[i * n + j] += a[i * k + p] * bm[p * n + j];
                mag[i * n + j] += (a[i * k + p] * bm[p * n + j]).abs();
            }
        }
    }
    let runs = run_everywhere(&text, &binds, &input, &|out, label| {
        assert_close(
            &format!("gemm {label}"),
            &get(out, "C"),
            &want,
            &mag,
            0..m * n,
            1e-5,
            0.0,
        );
    });
    assert_eq!(runs, 45);
}

#[test]
fn multi_head_attention_matches_reference() {
    let text = source("mha");
    let binds = ["batch=1", "seq=128"];
    let (module, b, _) = load(&text, &binds);
    let input = inputs(&module, &b, 12, |_| {});
    let (h, s, d) = (32, 128, 128);
    let (q, k, v) = (get(&input, "Q"), get(&input, "K"), get(&input, "V"));
    let mut want = vec![0.0; h * s * d];
    let mut mag = vec![0.0; h * s * d];
    let scale = 1.0 / (d as f64).sqrt();
    for hi in 0..h {
        let base = hi * s * d;
        for i in 0..s {
            let (o, m) = attend(
                &q[base + i * d..base + (i + 1) * d],
                &k[base..base + s * d],
                &v[base..base + s * d],
                d,
                s,
                scale,
            );
            want[base + i * d..base + (i + 1) * d].copy_from_slice(&o);
            mag[base + i * d..base + (i + 1) * d].copy_from_slice(&m);
        }
    }
    run_everywhere(&text, &binds, &input, &|out, label| {
        let rel = 3.0 * F16_ROUND + 1e-5;
        assert_close(
            &format!("mha {label}"),
            &get(out, "O"),
            &want,
            &mag,
            0..want.len(),
            rel,
            F16_FLOOR,
        );
    });
}

/// Full attention per request and head over its `len` cached tokens.
pub(super) fn decode_reference(
    input: &TensorStore,
    lens: &[usize],
    cap: usize,
) -> (Vec<f64>, Vec<f64>) {
    let (q, k, v) = (get(input, "Qd"), get(input, "Kc"), get(input, "Vc"));
    let d = 128;
    let (mut want, mut mag) = (
        vec![0.0; lens.len() * 32 * d],
        vec![0.0; lens.len() * 32 * d],
    );
    for (r, &len) in lens.iter().enumerate() {
        for h in 0..32 {
            let kv = (r * 8 + h / 4) * cap * d;
            let at = (r * 32 + h) * d;
            let (o, m) = attend(
                &q[at..at + d],
                &k[kv..kv + cap * d],
                &v[kv..kv + cap * d],
                d,
                len,
                1.0 / (d as f64).sqrt(),
            );
            want[at..at + d].copy_from_slice(&o);
            mag[at..at + d].copy_from_slice(&m);
        }
    }
    (want, mag)
}

#[test]
fn ragged_split_kv_decode_matches_reference_and_follows_the_lengths() {
    let text = source("decode_ragged");
    let mut task_counts = Vec::new();
    for (lens, seed) in [([700usize, 200, 1100], 21), ([1536, 1, 20], 22)] {
        let chunks: Vec<usize> = lens.iter().map(|l| l.div_ceil(512)).collect();
        let fmt = |v: &[usize]| {
            format!(
                "[{}]",
                v.iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        let (kl, kc) = (
            format!("kv_lens={}", fmt(&lens)),
            format!("kv_chunks={}", fmt(&chunks)),
        );
        let binds = ["nreq=3", "max_chunks=3", kl.as_str(), kc.as_str()];
        let (module, b, _) = load(&text, &binds);
        let e = expand(&resolved(&module), &b, &ExpandOptions::default()).unwrap();
        assert_eq!(e.tasks.len(), chunks.iter().sum::<usize>() * 8 + 3 * 32);
        task_counts.push(e.tasks.len());
        let input = inputs(&module, &b, seed, |_| {});
        let (want, mag) = decode_reference(&input, &lens, 3 * 512);
        run_everywhere(&text, &binds, &input, &|out, label| {
            assert_close(
                &format!("decode {lens:?} {label}"),
                &get(out, "Od"),
                &want,
                &mag,
                0..want.len(),
                2.0 * F16_ROUND + 2e-5,
                F16_FLOOR,
            );
        });
    }
    assert_ne!(
        task_counts[0], task_counts[1],
        "the lengths drive the task set"
    );
}

#[test]
fn moe_top_k_routing_runs_only_activated_experts_and_matches_reference() {
    let text = source("moe");
    let (hd, ff) = (64usize, 96usize);
    // Routing 0: top-2 experts per tile of 16 tokens by the tile's summed router gates (the
    // gates the run reads, from the same seed); routing 1: a fixed one where tile 1 uses none.
    let top2 = {
        let probe = [
            "tokens=64",
            "hidden=64",
            "ffn=96",
            "routes=8",
            "route_indptr=[0, 2, 4, 6, 8]",
            "route_experts=[0, 1, 0, 1, 0, 1, 0, 1]",
        ];
        let (m, b, _) = load(&text, &probe);
        let g = get(&inputs(&m, &b, 30, |_| {}), "Gates");
        let mut experts = Vec::new();
        for t in 0..4 {
            let score = |e: usize| (t * 16..(t + 1) * 16).map(|r| g[r * 8 + e]).sum::<f64>();
            let mut order: Vec<usize> = (0..8).collect();
            order.sort_by(|&a, &b| score(b).total_cmp(&score(a)).then(a.cmp(&b)));
            experts.extend(order[..2].iter().map(|e| e.to_string()));
        }
        format!("route_experts=[{}]", experts.join(", "))
    };
    let routings: [(&str, &str, usize); 2] = [
        ("route_indptr=[0, 2, 4, 6, 8]", top2.as_str(), 8),
        (
            "route_indptr=[0, 1, 1, 4, 5]",
            "route_experts=[6, 0, 2, 4, 3]",
            5,
        ),
    ];
    let mut sets = Vec::new();
    for (k, (indptr, experts, routes)) in routings.into_iter().enumerate() {
        let r = format!("routes={routes}");
        let binds = [
            "tokens=64",
            "hidden=64",
            "ffn=96",
            r.as_str(),
            indptr,
            experts,
        ];
        let (module, b, _) = load(&text, &binds);
        let e = expand(&resolved(&module), &b, &ExpandOptions::default()).unwrap();
        let experts_run: Vec<(i64, i64)> = e
            .tasks
            .iter()
            .filter(|t| module.kernels[t.kernel as usize].name.name == "expert_ffn")
            .map(|t| (t.regions[0].start[0] / 16, t.regions[2].start[0]))
            .collect();
        assert_eq!(
            experts_run.len(),
            routes,
            "one expert task per activated pair"
        );
        sets.push(experts_run.clone());
        let input = inputs(&module, &b, 30 + k as u64, |s| {
            for w in ["W1", "W3", "W2"] {
                scale(s, w, 0.125);
            }
        });
        let (x, g) = (get(&input, "X"), get(&input, "Gates"));
        let (w1, w3, w2) = (get(&input, "W1"), get(&input, "W3"), get(&input, "W2"));
        let mut want = vec![0.0; 64 * hd];
        let mut mag = vec![0.0; 64 * hd];
        for &(t, e) in &experts_run {
            let (t, e) = (t as usize, e as usize);
            for row in t * 16..(t + 1) * 16 {
                let xr = &x[row * hd..(row + 1) * hd];
                let mut a = vec![0.0; ff];
                let mut am = vec![0.0; ff];
                for j in 0..ff {
                    let (mut gs, mut us, mut gm, mut um) = (0.0, 0.0, 0.0, 0.0);
                    for c in 0..hd {
                        let (p, q) = (
                            xr[c] * w1[(e * hd + c) * ff + j],
                            xr[c] * w3[(e * hd + c) * ff + j],
                        );
                        gs += p;
                        us += q;
                        gm += p.abs();
                        um += q.abs();
                    }
                    a[j] = silu(gs) * us;
                    am[j] = 1.1 * gm * um + silu(gs).abs() * um;
                }
                let gate = g[row * 8 + e];
                for c in 0..hd {
                    let (mut y, mut m) = (0.0, 0.0);
                    for j in 0..ff {
                        y += a[j] * w2[(e * ff + j) * hd + c];
                        m += am[j] * w2[(e * ff + j) * hd + c].abs();
                    }
                    want[row * hd + c] += gate * y;
                    mag[row * hd + c] += (gate * m).abs() + (gate * y).abs();
                }
            }
        }
        run_everywhere(&text, &binds, &input, &|out, label| {
            assert_close(
                &format!("moe routing {k} {label}"),
                &get(out, "Y"),
                &want,
                &mag,
                0..want.len(),
                2e-5,
                1e-30,
            );
        });
    }
    assert_ne!(sets[0], sets[1], "the routing drives the task set");
}

#[test]
fn tiered_attention_picks_tiers_from_loaded_lengths_and_matches_reference() {
    let text = source("tiered");
    // Decode over lengths in all three tiers, then prefill (causal 128-row tiles).
    for (binds, prefill) in [
        (
            vec![
                "nreq=3",
                "heads=2",
                "maxlen=8320",
                "req_len=[300, 2500, 8300]",
            ],
            false,
        ),
        (
            vec![
                "nreq=2",
                "heads=2",
                "maxlen=640",
                "req_len=[200, 640]",
                "prefill=true",
            ],
            true,
        ),
    ] {
        let (module, b, _) = load(&text, &binds);
        let e = expand(&resolved(&module), &b, &ExpandOptions::default()).unwrap();
        let tiers: std::collections::BTreeSet<&str> = e
            .tasks
            .iter()
            .map(|t| module.kernels[t.kernel as usize].name.name.as_str())
            .collect();
        let lens = ints(&b, "req_len");
        if prefill {
            assert_eq!(tiers.into_iter().collect::<Vec<_>>(), ["attn_2k"]);
        } else {
            assert_eq!(
                tiers.into_iter().collect::<Vec<_>>(),
                ["attn_2k", "attn_64k", "attn_8k"]
            );
        }
        let maxlen = if prefill { 640 } else { 8320 };
        let input = inputs(&module, &b, 40, |_| {});
        let (q, k, v) = (get(&input, "Q"), get(&input, "Kc"), get(&input, "Vc"));
        let d = 128;
        let mut want = get(&input, "O");
        let mut mag = vec![0.0; want.len()];
        let mut rows = Vec::new();
        for (r, &len) in lens.iter().enumerate() {
            for h in 0..2 {
                let base = (r * 2 + h) * maxlen * d;
                let qrows: Vec<usize> = if prefill {
                    (0..len).collect()
                } else {
                    vec![len - 1]
                };
                for i in qrows {
                    let (o, m) = attend(
                        &q[base + i * d..base + (i + 1) * d],
                        &k[base..],
                        &v[base..],
                        d,
                        i + 1,
                        1.0 / (d as f64).sqrt(),
                    );
                    want[base + i * d..base + (i + 1) * d].copy_from_slice(&o);
                    mag[base + i * d..base + (i + 1) * d].copy_from_slice(&m);
                    rows.push(base + i * d);
                }
            }
        }
        let idx: Vec<usize> = rows.iter().flat_map(|&r| r..r + d).collect();
        run_everywhere(&text, &binds, &input, &|out, label| {
            assert_close(
                &format!("tiered prefill={prefill} {label}"),
                &get(out, "O"),
                &want,
                &mag,
                idx.iter().copied(),
                F16_ROUND + 1e-5,
                F16_FLOOR,
            );
        });
    }
}

#[test]
fn three_pass_softmax_over_long_rows_matches_reference() {
    let text = source("softmax_3pass");
    let binds = ["rows=32", "ntiles=4"];
    let (module, b, _) = load(&text, &binds);
    let input = inputs(&module, &b, 50, |_| {});
    let n = 4 * 1024;
    let x = get(&input, "X");
    let mut want = vec![0.0; 32 * n];
    for r in 0..32 {
        let row = &x[r * n..(r + 1) * n];
        let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let l: f64 = row.iter().map(|v| (v - m).exp()).sum();
        for (c, v) in row.iter().enumerate() {
            want[r * n + c] = (v - m).exp() / l;
        }
    }
    run_everywhere(&text, &binds, &input, &|out, label| {
        assert_close(
            &format!("softmax {label}"),
            &get(out, "Y"),
            &want,
            &want,
            0..want.len(),
            1e-5,
            0.0,
        );
    });
}

#[test]
fn rmsnorm_matches_reference_in_f32_and_bf16() {
    // bf16: inputs exact in f32, the same f32 computation, one rounding of the output to bf16
    // (2^-8 relative).
    for (ty, rel) in [("f32", 1e-5), ("bf16", 1e-5 + 1.0 / 256.0)] {
        let text = source("rmsnorm").replace("f32", ty);
        let binds = ["tokens=64", "hidden=1024"];
        let (module, b, _) = load(&text, &binds);
        let input = inputs(&module, &b, 60, |_| {});
        let (x, w) = (get(&input, "X"), get(&input, "W"));
        let h = 1024;
        let mut want = vec![0.0; 64 * h];
        for r in 0..64 {
            let row = &x[r * h..(r + 1) * h];
            let inv = 1.0 / (row.iter().map(|v| v * v).sum::<f64>() / h as f64 + 1e-6).sqrt();
            for c in 0..h {
                want[r * h + c] = row[c] * inv * w[c];
            }
        }
        run_everywhere(&text, &binds, &input, &|out, label| {
            assert_close(
                &format!("rmsnorm {ty} {label}"),
                &get(out, "Y"),
                &want,
                &want,
                0..want.len(),
                rel,
                1e-30,
            );
        });
    }
}

/// `y = x · W` for the rows of `x` (`rows × k`), `W` `k × n`.
fn mm(x: &[f64], w: &[f64], k: usize, n: usize) -> Vec<f64> {
    let rows = x.len() / k;
    let mut y = vec![0.0; rows * n];
    for r in 0..rows {
        for p in 0..k {
            let a = x[r * k + p];
            for j in 0..n {
                y[r * n + j] += a * w[p * n + j];
            }
        }
    }
    y
}

fn rms_rows(x: &[f64], w: &[f64]) -> Vec<f64> {
    let h = w.len();
    x.chunks(h)
        .flat_map(|row| {
            let inv = 1.0 / (row.iter().map(|v| v * v).sum::<f64>() / h as f64 + 1e-6).sqrt();
            row.iter().zip(w).map(move |(v, g)| v * inv * g)
        })
        .collect()
}

#[test]
fn llama_style_block_matches_reference() {
    let text = source("llama_block");
    let binds = ["seq=64", "heads=4", "ffn=256"];
    let (module, b, _) = load(&text, &binds);
    let (seq, hd, ff, d) = (64usize, 256usize, 256usize, 64usize);
    let input = inputs(&module, &b, 70, |s| {
        for w in ["Wq", "Wk", "Wv", "Wo", "Wgate", "Wup", "Wdown"] {
            scale(s, w, 1.0 / 16.0);
        }
        // The RoPE tables: cos / sin of position t's angles (the reference below rotates by
        // the angles themselves).
        let (mut cos, mut sin) = (vec![0f32; seq * d / 2], vec![0f32; seq * d / 2]);
        for t in 0..seq {
            for i in 0..d / 2 {
                let ang = t as f64 * 10_000f64.powf(-2.0 * i as f64 / d as f64);
                cos[t * d / 2 + i] = ang.cos() as f32;
                sin[t * d / 2 + i] = ang.sin() as f32;
            }
        }
        s.write("RopeCos", &cos).unwrap();
        s.write("RopeSin", &sin).unwrap();
    });
    let g = |n: &str| get(&input, n);
    let x = g("X");
    let xn1 = rms_rows(&x, &g("NormAttn"));
    let (mut q, mut k, v) = (
        mm(&xn1, &g("Wq"), hd, hd),
        mm(&xn1, &g("Wk"), hd, hd),
        mm(&xn1, &g("Wv"), hd, hd),
    );
    for t in 0..seq {
        for m in [&mut q, &mut k] {
            for h in 0..hd / d {
                let row = &mut m[t * hd + h * d..t * hd + (h + 1) * d];
                for i in 0..d / 2 {
                    let ang = t as f64 * 10_000f64.powf(-2.0 * i as f64 / d as f64);
                    let (s, c) = ang.sin_cos();
                    let (a, bb) = (row[i], row[i + d / 2]);
                    row[i] = a * c - bb * s;
                    row[i + d / 2] = bb * c + a * s;
                }
            }
        }
    }
    let mut attn = vec![0.0; seq * hd];
    for h in 0..hd / d {
        let col = |m: &[f64]| -> Vec<f64> {
            (0..seq)
                .flat_map(|t| m[t * hd + h * d..t * hd + (h + 1) * d].to_vec())
                .collect()
        };
        let (qh, kh, vh) = (col(&q), col(&k), col(&v));
        for t in 0..seq {
            let (o, _) = attend(
                &qh[t * d..(t + 1) * d],
                &kh,
                &vh,
                d,
                t + 1,
                1.0 / (d as f64).sqrt(),
            );
            attn[t * hd + h * d..t * hd + (h + 1) * d].copy_from_slice(&o);
        }
    }
    let ao = mm(&attn, &g("Wo"), hd, hd);
    let h1: Vec<f64> = x.iter().zip(&ao).map(|(a, b)| a + b).collect();
    let xn2 = rms_rows(&h1, &g("NormFfn"));
    let (gate, up) = (mm(&xn2, &g("Wgate"), hd, ff), mm(&xn2, &g("Wup"), hd, ff));
    let act: Vec<f64> = gate.iter().zip(&up).map(|(a, b)| silu(*a) * b).collect();
    let down = mm(&act, &g("Wdown"), ff, hd);
    let want: Vec<f64> = h1.iter().zip(&down).map(|(a, b)| a + b).collect();
    run_everywhere(&text, &binds, &input, &|out, label| {
        assert_normwise(&format!("llama block {label}"), &get(out, "Y"), &want, 1e-4);
    });
}

// ---------------------------------------------------------------------------------------------
// CSP

fn pipeline_text(depth: u64) -> String {
    source("csp_pipeline")
        .replace("channel loaded[2];", &format!("channel loaded[{depth}];"))
        .replace(
            "channel computed[2];",
            &format!("channel computed[{depth}];"),
        )
}

#[test]
fn csp_pipeline_is_correct_for_channel_depths_1_2_and_8() {
    for depth in [1u64, 2, 8] {
        let text = pipeline_text(depth);
        let nbuf = format!("nbuf={}", depth + 2);
        let binds = ["ntiles=12", nbuf.as_str()];
        let (module, b, reg) = load(&text, &binds);
        let input = inputs(&module, &b, 80 + depth, |_| {});
        let want: Vec<f64> = get(&input, "Src")
            .iter()
            .map(|&x| f16::from_f64(silu(x)).to_f64())
            .collect();
        for threads in [1, 2, 4] {
            let out = run_once(&module, &b, &reg, threads, &input)
                .unwrap_or_else(|e| panic!("depth {depth} threads {threads}: {e}"));
            assert_close(
                &format!("pipeline depth {depth} threads {threads}"),
                &get(&out, "Dst"),
                &want,
                &want,
                0..want.len(),
                F16_ROUND + 1e-5,
                F16_FLOOR,
            );
        }
    }
}

fn pipeline_error(text: &str) -> String {
    let (module, b, _) = load(text, &[]);
    let mut reg = KernelRegistry::new();
    for k in &module.kernels {
        reg.register(&k.name.name, |_| Ok(()));
    }
    let mut p = compile(
        lower(&module).unwrap(),
        CompileOptions {
            threads: 2,
            kernels: reg,
            ..CompileOptions::default()
        },
    )
    .unwrap();
    let err = p.execute(&b).expect_err("the pipeline deadlocks");
    assert!(matches!(err, RunError::Pipeline(_)), "{err:?}");
    // The program is reusable after the failure.
    let err2 = p.execute(&b).expect_err("deadlocks again");
    assert_eq!(err.to_string(), err2.to_string());
    err.to_string()
}

const DEADLOCK_HEAD: &str = "
tensor X: f32[64];
axis N = dense(3);
kernel k(inout x: f32[1]);
";

/// A producer that sends three tokens on a depth-1 channel before the one its consumer waits
/// for: fine with unbounded channels (the reference expander), a deadlock with bounded ones.
#[test]
fn bounded_channel_deadlock_is_reported_naming_processes_and_channels() {
    let text = format!(
        "{DEADLOCK_HEAD}
pipeline p {{
    channel data[1];
    channel go[1];
    process producer(produces data, go) {{
        for_each i in N {{
            task k(X[i]);
            send data(i);
        }}
        send go(0);
    }}
    process consumer(consumes data, go) {{
        consume go as g {{
            task k(X[10 + g]);
        }}
        consume data as d {{
            task k(X[20 + d]);
        }}
    }}
}}
"
    );
    let (module, b, _) = load(&text, &[]);
    assert!(
        expand(&resolved(&module), &b, &ExpandOptions::default()).is_ok(),
        "unbounded: no deadlock"
    );
    let msg = pipeline_error(&text);
    for needle in [
        "deadlock in pipeline `p`",
        "process `producer` waits to send on channel `data` (full, 1/1",
        "process `consumer` waits to receive from channel `go` (empty",
    ] {
        assert!(msg.contains(needle), "{msg}\nlacks {needle}");
    }
}

#[test]
fn cyclic_wait_and_abandoned_channel_deadlocks_are_reported() {
    // Each waits for the other first.
    let cycle = format!(
        "{DEADLOCK_HEAD}
pipeline p {{
    channel a[2];
    channel b[2];
    process left(consumes b; produces a) {{
        consume b as x {{
            send a(x);
        }}
    }}
    process right(consumes a; produces b) {{
        consume a as y {{
            send b(y);
        }}
    }}
}}
"
    );
    let msg = pipeline_error(&cycle);
    assert!(
        msg.contains("process `left` waits to receive from channel `b`"),
        "{msg}"
    );
    assert!(
        msg.contains("process `right` waits to receive from channel `a`"),
        "{msg}"
    );
    // The consumer ends without draining its channel: the producer waits on a full channel
    // whose other end is gone.
    let abandoned = format!(
        "{DEADLOCK_HEAD}
pipeline p {{
    channel c[1];
    process producer(produces c) {{
        for_each i in N {{
            send c(i);
            task k(X[i]);
        }}
    }}
    process quitter(consumes c) {{
        task k(X[40]);
    }}
}}
"
    );
    let msg = pipeline_error(&abandoned);
    assert!(
        msg.contains("process `producer` waits to send on channel `c` (full, 1/1; `quitter`, at its other end, has ended)"),
        "{msg}"
    );
}

/// A task that fails in a pipeline stops every process; the error names the process, the
/// task's index among its tasks and the kernel.
#[test]
fn pipeline_task_failures_name_process_and_task() {
    let (module, b, mut reg) = load(&source("csp_pipeline"), &["ntiles=4"]);
    reg.register("store_tile", |ctx| {
        if ctx.num_regions() == 2 {
            return Err(pto_wsp::kernels::KernelError::Message("disk full".into()));
        }
        Ok(())
    });
    let mut p = compile(
        lower(&module).unwrap(),
        CompileOptions {
            threads: 2,
            kernels: reg,
            ..CompileOptions::default()
        },
    )
    .unwrap();
    let msg = p.execute(&b).unwrap_err().to_string();
    assert!(
        msg.contains("process `storer`, its task #0 (kernel `store_tile`) failed: disk full"),
        "{msg}"
    );
}
