//! The specification's example, DeepSeek V3.2 indexer attention: its numbers against an `f64`
//! reference written here with plain loops, and its two prologs running at the same time.

use pto_wsp_ptog::examples::deepseek::*;
use pto_wsp_ptog::examples::library;
use pto_wsp_ptog::{Device, DeviceConfig, RunReport, assemble};

fn load() -> Device {
    let checked = assemble(PROGRAM).unwrap_or_else(|e| panic!("{e}"));
    let lib = library(&pto_wsp::WorkloadNode::maker(2)).unwrap_or_else(|e| panic!("{e}"));
    let cfg = DeviceConfig {
        trace: true,
        ..DeviceConfig::default()
    };
    Device::new(checked, cfg, &lib).unwrap_or_else(|e| panic!("{e}"))
}

fn get(dev: &Device, name: &str) -> Vec<f64> {
    let v: Vec<f32> = dev
        .store()
        .read(name)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    v.into_iter().map(f64::from).collect()
}

/// `a [n, k] · b [k, m]`.
fn matmul(a: &[f64], b: &[f64], n: usize, k: usize, m: usize) -> Vec<f64> {
    let mut c = vec![0.0; n * m];
    for i in 0..n {
        for p in 0..k {
            let x = a[i * k + p];
            for j in 0..m {
                c[i * m + j] += x * b[p * m + j];
            }
        }
    }
    c
}

/// Each row divided by its root mean square (ε 1e-6), times `g`.
fn rmsnorm(x: &[f64], g: &[f64], cols: usize) -> Vec<f64> {
    let mut y = x.to_vec();
    for row in y.chunks_mut(cols) {
        let ms = row.iter().map(|v| v * v).sum::<f64>() / cols as f64;
        let inv = 1.0 / (ms + 1e-6).sqrt();
        for (v, w) in row.iter_mut().zip(g) {
            *v *= inv * w;
        }
    }
    y
}

/// Rotate-half RoPE per head, token `t` at position `t`, θ = 10000.
fn rope(x: &mut [f64]) {
    let half = HEAD_DIM / 2;
    for t in 0..TOKENS {
        for h in 0..HEADS {
            let base = t * HEADS * HEAD_DIM + h * HEAD_DIM;
            for i in 0..half {
                let a = t as f64 * 10_000f64.powf(-2.0 * i as f64 / HEAD_DIM as f64);
                let (s, c) = a.sin_cos();
                let (x1, x2) = (x[base + i], x[base + half + i]);
                x[base + i] = x1 * c - x2 * s;
                x[base + half + i] = x2 * c + x1 * s;
            }
        }
    }
}

fn close(what: &str, got: &[f64], want: &[f64], rel: f64) {
    assert_eq!(got.len(), want.len(), "{what}");
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1e-30);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= rel * scale,
            "{what}[{i}]: {g} against {w} (scale {scale})"
        );
    }
}

/// Checks every output of a run against the reference.
fn check_numbers(dev: &Device) {
    let x = get(dev, "HIDDEN");
    let w = |n: &str| get(dev, n);
    // MLA prolog.
    let cq = rmsnorm(
        &matmul(&x, &w("W_DQ"), TOKENS, HIDDEN, LATENT),
        &w("G_Q"),
        LATENT,
    );
    let mut q = matmul(&cq, &w("W_UQ"), TOKENS, LATENT, HEADS * HEAD_DIM);
    let ckv = rmsnorm(
        &matmul(&x, &w("W_DKV"), TOKENS, HIDDEN, LATENT),
        &w("G_KV"),
        LATENT,
    );
    let mut k = matmul(&ckv, &w("W_UK"), TOKENS, LATENT, HEADS * HEAD_DIM);
    let v = matmul(&ckv, &w("W_UV"), TOKENS, LATENT, HEADS * HEAD_DIM);
    rope(&mut q);
    rope(&mut k);
    close("Q_TENSOR", &get(dev, "Q_TENSOR"), &q, 1e-4);
    close("K_CACHE", &get(dev, "K_CACHE"), &k, 1e-4);
    close("V_CACHE", &get(dev, "V_CACHE"), &v, 1e-4);
    // Indexer prolog.
    let qi = matmul(&x, &w("W_QI"), TOKENS, HIDDEN, INDEX_HEADS * INDEX_DIM);
    let ki = matmul(&x, &w("W_KI"), TOKENS, HIDDEN, INDEX_DIM);
    let wi = matmul(&x, &w("W_WI"), TOKENS, HIDDEN, INDEX_HEADS);
    close("QK_INDEX", &get(dev, "QK_INDEX"), &qi, 1e-4);
    close("K_INDEX", &get(dev, "K_INDEX"), &ki, 1e-4);
    close("W_INDEX", &get(dev, "W_INDEX"), &wi, 1e-4);
    // Lightning indexer: the selection is the reference's top keys, up to rounding.
    let topk: Vec<i32> = dev.store().read("TOPK_INDICES").unwrap();
    let mut selected = Vec::with_capacity(TOKENS);
    for t in 0..TOKENS {
        let score = |s: usize| -> f64 {
            (0..INDEX_HEADS)
                .map(|h| {
                    let dot: f64 = (0..INDEX_DIM)
                        .map(|d| {
                            qi[t * INDEX_HEADS * INDEX_DIM + h * INDEX_DIM + d]
                                * ki[s * INDEX_DIM + d]
                        })
                        .sum();
                    wi[t * INDEX_HEADS + h] * dot.max(0.0)
                })
                .sum()
        };
        let scores: Vec<f64> = (0..=t).map(score).collect();
        let row = &topk[t * TOP_K..(t + 1) * TOP_K];
        let want = TOP_K.min(t + 1);
        let sel: Vec<usize> = row[..want].iter().map(|&s| s as usize).collect();
        assert!(row[want..].iter().all(|&s| s == -1), "query {t}: {row:?}");
        let mut distinct = sel.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), want, "query {t}: {row:?}");
        assert!(
            sel.iter().all(|&s| s <= t),
            "query {t} selects a later key: {row:?}"
        );
        let mut sorted = scores.clone();
        sorted.sort_by(|a, b| b.total_cmp(a));
        let kth = sorted[want - 1];
        let tol = 1e-4 * sorted[0].abs().max(1.0);
        for &s in &sel {
            assert!(
                scores[s] >= kth - tol,
                "query {t}: key {s} (score {}) is below the {want}th best ({kth})",
                scores[s]
            );
        }
        selected.push(sel);
    }
    // Sparse attention over the selected keys.
    let width = HEADS * HEAD_DIM;
    let mut out = vec![0.0; TOKENS * width];
    let scale = 1.0 / (HEAD_DIM as f64).sqrt();
    for t in 0..TOKENS {
        for h in 0..HEADS {
            let col = |r: usize, d: usize| r * width + h * HEAD_DIM + d;
            let s: Vec<f64> = selected[t]
                .iter()
                .map(|&j| {
                    scale
                        * (0..HEAD_DIM)
                            .map(|d| q[col(t, d)] * k[col(j, d)])
                            .sum::<f64>()
                })
                .collect();
            let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
            let z: f64 = e.iter().sum();
            for d in 0..HEAD_DIM {
                out[col(t, d)] = selected[t]
                    .iter()
                    .zip(&e)
                    .map(|(&j, p)| p / z * v[col(j, d)])
                    .sum();
            }
        }
    }
    close("OUTPUT", &get(dev, "OUTPUT"), &out, 2e-3);
}

/// Whether an instance of kernel `a` and one of kernel `b` were running at the same time.
fn overlapped(r: &RunReport, a: usize, b: usize) -> bool {
    let spans = |k: usize| r.trace.iter().filter(move |t| t.kernel == k);
    spans(a).any(|x| spans(b).any(|y| x.start < y.end && y.start < x.end))
}

#[test]
fn deepseek_indexer_attention_matches_its_reference_and_runs_the_prologs_at_once() {
    let mut dev = load();
    let names: Vec<String> = dev.checked().graphs[0]
        .kernels
        .iter()
        .map(|k| k.name.clone())
        .collect();
    let idx = |name: &str| names.iter().position(|k| k == name).unwrap();
    let (mla, indexer) = (idx("MLA_PROLOG"), idx("INDEXER_PROLOG"));
    // The two prologs have no worker in common: each has half the cores.
    let masks = dev.placement(0).to_vec();
    assert_eq!(masks[mla] & masks[indexer], 0, "{masks:?}");
    // Timing decides whether an instance of one starts before the other's end; the placement
    // allows it in every run, and it shows within a few (the first, nearly always).
    let mut seen = false;
    for seed in 0..20u64 {
        dev.store_mut().fill_random(seed + 17);
        let report = dev.run().unwrap_or_else(|e| panic!("{e}"));
        check_numbers(&dev);
        assert_eq!(report.kernel_runs, 4);
        assert_eq!(report.instances, 1 + 4 + 4 + 4);
        for t in &report.trace {
            assert_ne!(
                masks[t.kernel] & (1u128 << t.worker),
                0,
                "{t:?} outside its placement"
            );
        }
        // Dependencies: SPARSE_FA starts after both its producers end.
        let end = |k: usize| {
            report
                .trace
                .iter()
                .filter(|t| t.kernel == k)
                .map(|t| t.end)
                .max()
        };
        let start = |k: usize| {
            report
                .trace
                .iter()
                .filter(|t| t.kernel == k)
                .map(|t| t.start)
                .min()
        };
        let (lightning, fa) = (idx("LIGHTNING_INDEXER"), idx("SPARSE_FA"));
        assert!(start(fa) > end(mla) && start(fa) > end(lightning));
        assert!(start(lightning) > end(indexer));
        if overlapped(&report, mla, indexer) {
            eprintln!("the prologs overlapped in run {}", seed + 1);
            seen = true;
            break;
        }
    }
    assert!(
        seen,
        "the two prologs never ran at the same time in 20 runs"
    );
}
