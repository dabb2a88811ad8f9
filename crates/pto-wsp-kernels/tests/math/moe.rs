//! The mixture-of-experts expert kernel against an `f64` reference.

use super::*;

/// `gate[t] · ((silu(x W1) ⊙ (x W3)) W2)[t]` in `f64`; (output, output scale: the same with
/// absolute values of every term, for the tolerance).
fn expert(
    x: &[f64],
    gate: &[f64],
    w1: &[f64],
    w3: &[f64],
    w2: &[f64],
    h: usize,
    f: usize,
) -> (Vec<f64>, Vec<f64>) {
    let t = x.len() / h;
    let (mut y, mut mag) = (vec![0.0; t * h], vec![0.0; t * h]);
    for r in 0..t {
        let mut a = vec![0.0; f];
        let mut amag = vec![0.0; f];
        for j in 0..f {
            let (mut g, mut u, mut gm, mut um) = (0.0, 0.0, 0.0, 0.0);
            for c in 0..h {
                g += x[r * h + c] * w1[c * f + j];
                u += x[r * h + c] * w3[c * f + j];
                gm += (x[r * h + c] * w1[c * f + j]).abs();
                um += (x[r * h + c] * w3[c * f + j]).abs();
            }
            let sg = 1.0 / (1.0 + (-g).exp());
            a[j] = g * sg * u;
            // silu' is bounded by 1.1, so an error in g moves silu(g) by at most 1.1x it.
            amag[j] = 1.1 * gm * um + (g * sg).abs() * um;
        }
        for c in 0..h {
            let (mut s, mut m) = (0.0, 0.0);
            for j in 0..f {
                s += a[j] * w2[j * h + c];
                m += amag[j] * w2[j * h + c].abs();
            }
            y[r * h + c] = gate[r] * s;
            mag[r * h + c] = (gate[r] * m).abs();
        }
    }
    (y, mag)
}

#[test]
fn moe_expert_matches_reference() {
    let reg = KernelRegistry::with_builtins();
    for (k, (xt, wt, yt)) in [
        ("f32", "f32", "f32"),
        ("f16", "f16", "f32"),
        ("bf16", "f16", "bf16"),
    ]
    .into_iter()
    .enumerate()
    {
        for (t, h, ff) in [(1, 8, 16), (4, 32, 48), (16, 64, 96), (3, 5, 7)] {
            let s = store(
                &format!(
                    "tensor X: {xt}[{t}, {h}];\ntensor G: f32[{t}, 1];\ntensor W1: {wt}[{h}, {ff}];\n\
                     tensor W3: {wt}[{h}, {ff}];\ntensor W2: {wt}[{ff}, {h}];\ntensor Y: {yt}[{t}, {h}];"
                ),
                1000 + k as u64 * 7 + t as u64,
            );
            let list = [
                whole(&s, "X", Access::In),
                whole(&s, "G", Access::In),
                whole(&s, "W1", Access::In),
                whole(&s, "W3", Access::In),
                whole(&s, "W2", Access::In),
                whole(&s, "Y", Access::Out),
            ];
            run(&reg, &s, "moe_expert", &[], &list).unwrap();
            let (want, mag) = expert(
                &get(&s, "X"),
                &get(&s, "G"),
                &get(&s, "W1"),
                &get(&s, "W3"),
                &get(&s, "W2"),
                h,
                ff,
            );
            assert_close(
                &format!("moe_expert {xt}/{wt}->{yt} t {t} h {h} f {ff}"),
                &get(&s, "Y"),
                &want,
                &mag,
                tol(dtype(&s, "Y"), F32_TOL),
            );
        }
    }
}

#[test]
fn moe_expert_checks_every_shape() {
    const K: &str = "kernel `moe_expert`";
    let reg = KernelRegistry::with_builtins();
    let s = store(
        "tensor X: f32[4, 8];\ntensor G: f32[4];\ntensor W1: f32[8, 6];\ntensor W3: f32[8, 6];\n\
         tensor W2: f32[6, 8];\ntensor Y: f32[4, 8];\ntensor G3: f32[3];\ntensor W3b: f32[8, 5];\n\
         tensor W2b: f32[6, 7];\ntensor Yb: f32[4, 7];",
        1050,
    );
    let good = [
        whole(&s, "X", Access::In),
        whole(&s, "G", Access::In),
        whole(&s, "W1", Access::In),
        whole(&s, "W3", Access::In),
        whole(&s, "W2", Access::In),
        whole(&s, "Y", Access::Out),
    ];
    run(&reg, &s, "moe_expert", &[], &good).unwrap();
    for (i, name, needles) in [
        (1, "G3", vec![K, "region 1", "must hold 4"]),
        (3, "W3b", vec![K, "region 3", "8 x 6"]),
        (4, "W2b", vec![K, "region 4", "6 x 8"]),
        (5, "Yb", vec![K, "region 5", "4 x 7"]),
    ] {
        let mut list = good;
        list[i] = whole(&s, name, if i == 5 { Access::Out } else { Access::In });
        expect_err(&reg, &s, "moe_expert", &[], &list, &needles);
    }
}
