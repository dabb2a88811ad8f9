//! Row kernels: reductions, softmax, RMSNorm, RoPE.

use super::*;

const ROWS: usize = 7;
const COLS: usize = 50;

fn rows_store(tx: &str, to: &str, seed: u64) -> TensorStore {
    store(
        &format!(
            "tensor X: {tx}[{ROWS}, {COLS}];\ntensor Y: {to}[{ROWS}, {COLS}];\n\
             tensor W: {tx}[{COLS}];\ntensor V: {to}[{ROWS}];\ntensor V2: {to}[1, {ROWS}];"
        ),
        seed,
    )
}

fn row(x: &[f64], r: usize) -> &[f64] {
    &x[r * COLS..(r + 1) * COLS]
}

#[test]
fn row_reductions_match_f64_sums() {
    let reg = KernelRegistry::with_builtins();
    for (seed, (tx, to)) in [
        ("f32", "f32"),
        ("f16", "f32"),
        ("bf16", "f16"),
        ("f32", "bf16"),
    ]
    .into_iter()
    .enumerate()
    {
        let s = rows_store(tx, to, 60 + seed as u64);
        let x = get(&s, "X");
        let xi = whole(&s, "X", Access::In);
        // The output may be shaped rows x 1 or 1 x rows: only its element count matters.
        for (out, name) in [("V", "row_sum"), ("V2", "row_mean"), ("V", "row_max")] {
            run(&reg, &s, name, &[], &[xi, whole(&s, out, Access::Out)]).unwrap();
            let got = get(&s, out);
            let mags: Vec<f64> = (0..ROWS)
                .map(|r| row(&x, r).iter().map(|v| v.abs()).sum())
                .collect();
            match name {
                "row_max" => {
                    let want: Vec<f64> = (0..ROWS)
                        .map(|r| row(&x, r).iter().copied().fold(f64::MIN, f64::max))
                        .collect();
                    assert_rounded(name, &got, &want, dtype(&s, out));
                }
                "row_sum" => {
                    let want: Vec<f64> = (0..ROWS).map(|r| row(&x, r).iter().sum()).collect();
                    assert_close(name, &got, &want, &mags, tol(dtype(&s, out), F32_TOL));
                }
                _ => {
                    let want: Vec<f64> = (0..ROWS)
                        .map(|r| row(&x, r).iter().sum::<f64>() / COLS as f64)
                        .collect();
                    let mags: Vec<f64> = mags.iter().map(|m| m / COLS as f64).collect();
                    assert_close(name, &got, &want, &mags, tol(dtype(&s, out), F32_TOL));
                }
            }
        }
    }
}

fn softmax_ref(x: &[f64], scale: f64) -> Vec<f64> {
    let m = x.iter().map(|v| v * scale).fold(f64::MIN, f64::max);
    let e: Vec<f64> = x.iter().map(|v| (v * scale - m).exp()).collect();
    let s: f64 = e.iter().sum();
    e.iter().map(|v| v / s).collect()
}

#[test]
fn softmax_matches_reference_with_and_without_scale() {
    let reg = KernelRegistry::with_builtins();
    for (seed, (tx, to)) in [
        ("f32", "f32"),
        ("f16", "f32"),
        ("f32", "f16"),
        ("bf16", "bf16"),
    ]
    .into_iter()
    .enumerate()
    {
        for scale in [None, Some(5.5)] {
            let mut s = rows_store(tx, to, 70 + seed as u64);
            // Scores in [-8, 8): a spread wide enough that the max matters.
            let x: Vec<f64> = get(&s, "X").iter().map(|v| 8.0 * v).collect();
            put(&mut s, "X", &x);
            let x = get(&s, "X");
            let params: Vec<u64> = scale.map(f).into_iter().collect();
            run(
                &reg,
                &s,
                "softmax",
                &params,
                &[whole(&s, "X", Access::In), whole(&s, "Y", Access::Out)],
            )
            .unwrap();
            let mut want = Vec::new();
            for r in 0..ROWS {
                want.extend(softmax_ref(row(&x, r), scale.unwrap_or(1.0) as f32 as f64));
            }
            let got = get(&s, "Y");
            // `exp` flushes results below the smallest normal f32 to zero (documented), so
            // probabilities under 2^-126 may read 0.
            let (rel, floor) = tol(dtype(&s, "Y"), F32_TOL);
            let floor = floor.max(f32::MIN_POSITIVE as f64);
            assert_close(
                &format!("softmax {tx}->{to}"),
                &got,
                &want,
                &want,
                (rel, floor),
            );
        }
    }
    // A row of -inf (fully masked) gives zeros, not NaN.
    let mut s = rows_store("f32", "f32", 79);
    let mut x = get(&s, "X");
    x[..COLS].fill(f64::NEG_INFINITY);
    put(&mut s, "X", &x);
    run(
        &reg,
        &s,
        "softmax",
        &[],
        &[whole(&s, "X", Access::In), whole(&s, "Y", Access::Out)],
    )
    .unwrap();
    assert!(get(&s, "Y")[..COLS].iter().all(|&v| v == 0.0));
    let err = expect_err(
        &reg,
        &s,
        "softmax",
        &[f(f64::INFINITY)],
        &[whole(&s, "X", Access::In), whole(&s, "Y", Access::Out)],
        &["`softmax`", "parameter 0", "finite"],
    );
    assert!(matches!(err, KernelError::ParamValue { index: 0, .. }));
}

#[test]
fn rmsnorm_matches_reference() {
    let reg = KernelRegistry::with_builtins();
    for (seed, (tx, to)) in [("f32", "f32"), ("f16", "f32"), ("bf16", "f16")]
        .into_iter()
        .enumerate()
    {
        for eps in [None, Some(0.25)] {
            let s = rows_store(tx, to, 80 + seed as u64);
            let (x, w) = (get(&s, "X"), get(&s, "W"));
            let params: Vec<u64> = eps.map(f).into_iter().collect();
            let list = [
                whole(&s, "X", Access::In),
                whole(&s, "W", Access::In),
                whole(&s, "Y", Access::Out),
            ];
            run(&reg, &s, "rmsnorm", &params, &list).unwrap();
            let e = eps.unwrap_or(1e-6) as f32 as f64;
            let mut want = Vec::new();
            for r in 0..ROWS {
                let xr = row(&x, r);
                let ms = xr.iter().map(|v| v * v).sum::<f64>() / COLS as f64;
                let inv = 1.0 / (ms + e).sqrt();
                want.extend(xr.iter().zip(&w).map(|(v, g)| v * inv * g));
            }
            assert_close(
                &format!("rmsnorm {tx}->{to} eps {eps:?}"),
                &get(&s, "Y"),
                &want,
                &want,
                tol(dtype(&s, "Y"), F32_TOL),
            );
        }
    }
    let s = rows_store("f32", "f32", 89);
    let list = [
        whole(&s, "X", Access::In),
        whole(&s, "W", Access::In),
        whole(&s, "Y", Access::Out),
    ];
    for bad in [-1.0, f64::NAN, f64::INFINITY] {
        let err = expect_err(
            &reg,
            &s,
            "rmsnorm",
            &[f(bad)],
            &list,
            &["`rmsnorm`", "parameter 0", "eps"],
        );
        assert!(matches!(err, KernelError::ParamValue { index: 0, .. }));
    }
    let short_w = part(&s, "W", &[0], &[49], Access::In);
    expect_err(
        &reg,
        &s,
        "rmsnorm",
        &[],
        &[list[0], short_w, list[2]],
        &["`rmsnorm`", "region 1", "must hold 50"],
    );
    let short_y = part(&s, "Y", &[0, 0], &[7, 49], Access::Out);
    expect_err(
        &reg,
        &s,
        "rmsnorm",
        &[],
        &[list[0], list[1], short_y],
        &["`rmsnorm`", "region 0 is 7 x 50", "region 2 is 7 x 49"],
    );
    for name in ["row_sum", "row_max", "row_mean"] {
        expect_err(
            &reg,
            &s,
            name,
            &[],
            &[list[0], part(&s, "V", &[0], &[6], Access::Out)],
            &[name, "region 1", "must hold 7"],
        );
    }
}

/// RoPE reference (rotate-half): `x` is `rows × d`, row `r` at position `pos + r / h`.
fn rope_ref(x: &[f64], d: usize, h: usize, pos: i64, theta: f64) -> (Vec<f64>, Vec<f64>) {
    let mut out = x.to_vec();
    let mut mag = vec![0.0; x.len()];
    let half = d / 2;
    for r in 0..x.len() / d {
        let p = (pos + (r / h) as i64) as f64;
        for i in 0..half {
            let ang = p * theta.powf(-2.0 * i as f64 / d as f64);
            let (sn, cs) = ang.sin_cos();
            let (a, b) = (x[r * d + i], x[r * d + half + i]);
            out[r * d + i] = a * cs - b * sn;
            out[r * d + half + i] = a * sn + b * cs;
            let m = (a * cs).abs() + (b * sn).abs() + (a * sn).abs() + (b * cs).abs();
            mag[r * d + i] = m;
            mag[r * d + half + i] = m;
        }
    }
    (out, mag)
}

#[test]
fn rope_rotates_q_and_k_together_at_their_positions() {
    let reg = KernelRegistry::with_builtins();
    // 6 tokens; q has 4 heads, k has 2, head dim 16: regions [tokens, heads, d].
    for (seed, ty) in ["f32", "f16", "bf16"].into_iter().enumerate() {
        for (pos, theta) in [(0i64, None), (37, None), (4090, Some(500_000.0))] {
            let s = store(
                &format!("tensor Q: {ty}[6, 4, 16];\ntensor K: {ty}[6, 2, 16];"),
                90 + seed as u64,
            );
            let (q, k) = (get(&s, "Q"), get(&s, "K"));
            let mut params = vec![i(pos), i(6)];
            params.extend(theta.map(f));
            run(
                &reg,
                &s,
                "rope",
                &params,
                &[whole(&s, "Q", Access::InOut), whole(&s, "K", Access::InOut)],
            )
            .unwrap();
            let th = theta.unwrap_or(10_000.0);
            let (wq, mq) = rope_ref(&q, 16, 4, pos, th);
            let (wk, mk) = rope_ref(&k, 16, 2, pos, th);
            let t = tol(dtype(&s, "Q"), F32_TOL);
            assert_close(
                &format!("rope q {ty} pos {pos}"),
                &get(&s, "Q"),
                &wq,
                &mq,
                t,
            );
            assert_close(
                &format!("rope k {ty} pos {pos}"),
                &get(&s, "K"),
                &wk,
                &mk,
                t,
            );
        }
    }
    // Default tokens = region 0's rows: one head per row.
    let s = store("tensor Q: f32[5, 8];", 97);
    let q = get(&s, "Q");
    run(&reg, &s, "rope", &[i(3)], &[whole(&s, "Q", Access::InOut)]).unwrap();
    let (want, mag) = rope_ref(&q, 8, 1, 3, 10_000.0);
    assert_close(
        "rope default tokens",
        &get(&s, "Q"),
        &want,
        &mag,
        tol(DType::F32, F32_TOL),
    );
}

#[test]
fn rope_errors_name_the_problem() {
    let reg = KernelRegistry::with_builtins();
    let s = store(
        "tensor Q: f32[6, 4, 16];\ntensor K: f32[6, 2, 16];\ntensor O: f32[6, 7];\ntensor P: f32[5, 16];",
        98,
    );
    let q = whole(&s, "Q", Access::InOut);
    expect_err(&reg, &s, "rope", &[], &[q], &["parameter 0"]);
    expect_err(
        &reg,
        &s,
        "rope",
        &[i(0), i(0)],
        &[q],
        &["`rope`", "parameter 1", "at least 1"],
    );
    expect_err(
        &reg,
        &s,
        "rope",
        &[i(0), i(6), f(-1.0)],
        &[q],
        &["`rope`", "parameter 2", "theta"],
    );
    expect_err(&reg, &s, "rope", &[i(0)], &[], &["`rope`", "no region"]);
    expect_err(
        &reg,
        &s,
        "rope",
        &[i(0)],
        &[whole(&s, "O", Access::InOut)],
        &["`rope`", "region 0 is 6 x 7", "even"],
    );
    expect_err(
        &reg,
        &s,
        "rope",
        &[i(0), i(6)],
        &[q, whole(&s, "P", Access::InOut)],
        &["`rope`", "region 1 is 5 x 16", "multiple of the 6 token"],
    );
    let err = expect_err(
        &reg,
        &s,
        "rope",
        &[i(0), i(6)],
        &[q, whole(&s, "K", Access::Out)],
        &["`rope`", "region 1 is `out`"],
    );
    assert!(matches!(err, KernelError::Access { index: 1, .. }));
    let err = run(
        &reg,
        &s,
        "rope",
        &[i(0), i(6)],
        &[q, whole(&s, "K", Access::In)],
    )
    .unwrap_err();
    assert!(matches!(err, KernelError::View { index: 1, .. }), "{err:?}");
}

/// Regions of no rows have nothing to rotate, whatever the token count: `rope` returns at
/// once, leaving every element as it was, instead of stepping through `tokens` positions (an
/// `i64::MAX` token count once made it loop for ever on regions of no columns either).
#[test]
fn rope_on_regions_of_no_rows_does_nothing_for_any_token_count() {
    let reg = KernelRegistry::with_builtins();
    let s = store("tensor P: f32[5, 16];", 97);
    let before = get(&s, "P");
    for size in [[0, 16], [0, 0]] {
        for tokens in [1, 6, i64::MAX] {
            let mut raw = pto_wsp_ir::task_io::Region {
                tensor: 0,
                rank: 2,
                start: [0; pto_wsp_ir::task_io::MAX_RANK],
                size: [1; pto_wsp_ir::task_io::MAX_RANK],
            };
            raw.start[0] = 1;
            raw.size[..2].copy_from_slice(&size);
            let empty = TaskIo::new(raw, Access::InOut);
            run(&reg, &s, "rope", &[i(3), i(tokens)], &[empty]).unwrap();
        }
    }
    assert_eq!(get(&s, "P"), before);
}
