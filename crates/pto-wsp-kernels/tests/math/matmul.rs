//! Matrix products: `matmul`, `matmul_acc`, `matmul_bt`, `matmul_bt_acc`.

use super::*;
use proptest::prelude::*;

/// `C = [C0 +] A · B` (or `· Bᵀ`) in f64, and the scale `Σ|a||b| (+ |c0|)` of each element.
fn reference(
    a: Mat<'_>,
    b: Mat<'_>,
    c0: Option<&[f64]>,
    (m, n, k): (usize, usize, usize),
    bt: bool,
) -> (Vec<f64>, Vec<f64>) {
    let mut c = vec![0.0; m * n];
    let mut mag = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let (mut s, mut g) = c0.map_or((0.0, 0.0), |c0| (c0[i * n + j], c0[i * n + j].abs()));
            for p in 0..k {
                let bv = if bt { b.at(j, p) } else { b.at(p, j) };
                s += a.at(i, p) * bv;
                g += (a.at(i, p) * bv).abs();
            }
            c[i * n + j] = s;
            mag[i * n + j] = g;
        }
    }
    (c, mag)
}

/// Runs one product on whole tensors `A` (`m×k`), `B` (`k×n` or `n×k`), `C` (`m×n`) of the
/// given types and checks it against the reference.
fn check_product(
    (ta, tb, tc): (&str, &str, &str),
    (m, n, k): (usize, usize, usize),
    acc: bool,
    bt: bool,
    seed: u64,
) {
    let reg = KernelRegistry::with_builtins();
    let (br, bc) = if bt { (n, k) } else { (k, n) };
    let s = store(
        &format!(
            "tensor A: {ta}[{m}, {k}];\ntensor B: {tb}[{br}, {bc}];\ntensor C: {tc}[{m}, {n}];"
        ),
        seed,
    );
    let (a, b, c0) = (get(&s, "A"), get(&s, "B"), get(&s, "C"));
    let name = match (acc, bt) {
        (false, false) => "matmul",
        (true, false) => "matmul_acc",
        (false, true) => "matmul_bt",
        (true, true) => "matmul_bt_acc",
    };
    let c_access = if acc { Access::InOut } else { Access::Out };
    run(
        &reg,
        &s,
        name,
        &[],
        &[
            whole(&s, "A", Access::In),
            whole(&s, "B", Access::In),
            whole(&s, "C", c_access),
        ],
    )
    .unwrap();
    let (want, mag) = reference(
        Mat { data: &a, cols: k },
        Mat { data: &b, cols: bc },
        acc.then_some(&c0[..]),
        (m, n, k),
        bt,
    );
    let t = tol(dtype(&s, "C"), F32_TOL);
    // f16 / bf16 outputs round once: relative to the result, which `mag` bounds.
    assert_close(
        &format!("{name} {ta},{tb}->{tc} {m}x{n}x{k}"),
        &get(&s, "C"),
        &want,
        &mag,
        t,
    );
}

#[test]
fn products_match_reference_on_every_type_combination() {
    let types = [
        ("f32", "f32", "f32"),
        ("f16", "f16", "f32"),
        ("bf16", "bf16", "f32"),
        ("f16", "f32", "f16"),
        ("bf16", "f16", "bf16"),
    ];
    for (t, types) in types.into_iter().enumerate() {
        for (acc, bt) in [(false, false), (true, false), (false, true), (true, true)] {
            check_product(types, (17, 23, 45), acc, bt, 200 + t as u64);
        }
    }
    // A 256-long reduction: the tolerance's worst case.
    check_product(("f32", "f32", "f32"), (8, 8, 256), false, false, 209);
    // Few rows, long reductions (the streamed path of decode-batch projections), every type.
    for (t, types) in [
        ("f32", "f16", "f32"),
        ("f32", "bf16", "f16"),
        ("f16", "f32", "f32"),
    ]
    .into_iter()
    .enumerate()
    {
        for acc in [false, true] {
            check_product(types, (16, 136, 1000), acc, false, 211 + t as u64);
            check_product(types, (1, 9, 130), acc, false, 215 + t as u64);
        }
    }
    check_product(("f16", "f16", "f32"), (64, 64, 256), true, false, 210);
}

#[test]
fn products_work_on_regions_with_uneven_rows_and_offsets() {
    let reg = KernelRegistry::with_builtins();
    // A is rows (1..3) x (1..4) of a 4 x 5 x 10 tensor, cut in two outer dimensions: 6 rows
    // not evenly spaced, so it is gathered; C likewise, so it is computed aside and stored.
    let s = store(
        "tensor T: f32[4, 5, 10];\ntensor B: f32[12, 20];\ntensor U: f32[3, 4, 9];\ntensor V: f16[8, 9];",
        220,
    );
    let a = part(&s, "T", &[1, 1, 2], &[2, 3, 7], Access::In);
    let b = part(&s, "B", &[3, 5], &[7, 9], Access::In);
    let c = part(&s, "U", &[1, 0, 0], &[2, 3, 9], Access::InOut);
    let (t, bb, u0) = (get(&s, "T"), get(&s, "B"), get(&s, "U"));
    run(&reg, &s, "matmul_acc", &[], &[a, b, c]).unwrap();
    let at = |i: usize, p: usize| t[((1 + i / 3) * 5 + 1 + i % 3) * 10 + 2 + p];
    let bat = |p: usize, j: usize| bb[(3 + p) * 20 + 5 + j];
    let cat = |i: usize, j: usize| ((1 + i / 3) * 4 + i % 3) * 9 + j;
    let u = get(&s, "U");
    for i in 0..6 {
        for j in 0..9 {
            let want: f64 = u0[cat(i, j)] + (0..7).map(|p| at(i, p) * bat(p, j)).sum::<f64>();
            let mag: f64 =
                u0[cat(i, j)].abs() + (0..7).map(|p| (at(i, p) * bat(p, j)).abs()).sum::<f64>();
            assert!((u[cat(i, j)] - want).abs() <= F32_TOL * mag, "({i}, {j})");
        }
    }
    // Nothing outside C's region changed.
    for (idx, (&now, &before)) in u.iter().zip(&u0).enumerate() {
        let inside = (idx / 36 >= 1 && idx / 36 < 3) && (idx / 9) % 4 < 3;
        if !inside {
            assert_eq!(now, before, "element {idx} outside the output region");
        }
    }
    // An f16 output region of a wider tensor: rows evenly spaced but not f32.
    let a2 = part(&s, "B", &[0, 0], &[8, 12], Access::In);
    let b2 = part(&s, "B", &[0, 11], &[12, 9], Access::In);
    run(
        &reg,
        &s,
        "matmul",
        &[],
        &[a2, b2, whole(&s, "V", Access::Out)],
    )
    .unwrap();
    let v = get(&s, "V");
    for i in 0..8 {
        for j in 0..9 {
            let want: f64 = (0..12).map(|p| bb[i * 20 + p] * bb[p * 20 + 11 + j]).sum();
            let mag: f64 = (0..12)
                .map(|p| (bb[i * 20 + p] * bb[p * 20 + 11 + j]).abs())
                .sum();
            assert!(
                (v[i * 9 + j] - want).abs() <= (F32_TOL + 1.0 / 2048.0) * mag + 1e-7,
                "({i}, {j})"
            );
        }
    }
}

#[test]
fn accumulating_over_k_tiles_equals_one_product() {
    let reg = KernelRegistry::with_builtins();
    let (m, n, k, kt) = (24, 40, 96, 32);
    for ty in ["f32", "f16", "bf16"] {
        let mut s = store(
            &format!(
                "tensor A: {ty}[{m}, {k}];\ntensor B: {ty}[{k}, {n}];\ntensor C: f32[{m}, {n}];\ntensor D: f32[{m}, {n}];"
            ),
            230,
        );
        put(&mut s, "C", &vec![0.0; m * n]);
        for t in 0..k / kt {
            let a = part(
                &s,
                "A",
                &[0, (t * kt) as i64],
                &[m as i64, kt as i64],
                Access::In,
            );
            let b = part(
                &s,
                "B",
                &[(t * kt) as i64, 0],
                &[kt as i64, n as i64],
                Access::In,
            );
            run(
                &reg,
                &s,
                "matmul_acc",
                &[],
                &[a, b, whole(&s, "C", Access::InOut)],
            )
            .unwrap();
        }
        run(
            &reg,
            &s,
            "matmul",
            &[],
            &[
                whole(&s, "A", Access::In),
                whole(&s, "B", Access::In),
                whole(&s, "D", Access::Out),
            ],
        )
        .unwrap();
        let (a, b) = (get(&s, "A"), get(&s, "B"));
        let (want, mag) = reference(
            Mat { data: &a, cols: k },
            Mat { data: &b, cols: n },
            None,
            (m, n, k),
            false,
        );
        let (tiled, big) = (get(&s, "C"), get(&s, "D"));
        assert_close(
            &format!("tiled {ty}"),
            &tiled,
            &want,
            &mag,
            tol(DType::F32, F32_TOL),
        );
        assert_close(
            &format!("tiled vs one {ty}"),
            &tiled,
            &big,
            &mag,
            tol(DType::F32, 2.0 * F32_TOL),
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(pto_wsp_ir::soak::cases(48)))]

    #[test]
    fn products_match_reference_for_random_shapes(
        m in 1usize..20,
        n in 1usize..20,
        k in 1usize..40,
        types in prop::sample::select(vec![
            ("f32", "f32", "f32"),
            ("f16", "f16", "f32"),
            ("bf16", "f32", "f16"),
        ]),
        acc in any::<bool>(),
        bt in any::<bool>(),
        seed in 0u64..1000,
    ) {
        check_product(types, (m, n, k), acc, bt, seed);
    }
}

#[test]
fn product_errors_name_kernel_regions_and_dimensions() {
    let reg = KernelRegistry::with_builtins();
    let s = store(
        "tensor A: f32[4, 6];\ntensor B: f32[5, 3];\ntensor C: f32[4, 3];\ntensor D: f32[4, 5];\ntensor I: i32[4, 3];",
        240,
    );
    let (a, b, c) = (
        whole(&s, "A", Access::In),
        whole(&s, "B", Access::In),
        whole(&s, "C", Access::Out),
    );
    let err = expect_err(
        &reg,
        &s,
        "matmul",
        &[],
        &[a, b, c],
        &[
            "kernel `matmul`",
            "region 0 is 4 x 6",
            "region 1 is 5 x 3",
            "must have 6 rows",
        ],
    );
    assert!(matches!(err, KernelError::Shape { .. }));
    expect_err(
        &reg,
        &s,
        "matmul_bt",
        &[],
        &[a, b, c],
        &["kernel `matmul_bt`", "must have 6 columns"],
    );
    let b_ok = part(&s, "D", &[0, 0], &[4, 5], Access::In);
    let a_ok = part(&s, "A", &[0, 0], &[4, 4], Access::In);
    expect_err(
        &reg,
        &s,
        "matmul",
        &[],
        &[a_ok, b_ok, c],
        &["`matmul`", "region 2 is 4 x 3", "product is 4 x 5"],
    );
    let err = expect_err(
        &reg,
        &s,
        "matmul_acc",
        &[],
        &[a_ok, b_ok, whole(&s, "D", Access::Out)],
        &["`matmul_acc`", "region 2 is `out`", "inout"],
    );
    assert!(matches!(err, KernelError::Access { index: 2, .. }));
    expect_err(
        &reg,
        &s,
        "matmul",
        &[],
        &[a_ok, b_ok, whole(&s, "I", Access::Out)],
        &["region 2", "`I`", "f32, f16 or bf16"],
    );
    assert_eq!(
        run(&reg, &s, "matmul", &[], &[a, b]).unwrap_err(),
        KernelError::Region { index: 2, count: 2 }
    );
}
