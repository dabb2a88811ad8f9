//! `topk`: stable top-k indices (ties by smaller index), optional values.

use super::*;
use proptest::prelude::*;

/// Reference: sort all indices by (value descending, index ascending), NaN last; take `k`.
fn topk_ref(row: &[f64], k: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..row.len()).collect();
    idx.sort_by(|&a, &b| {
        let key = |i: usize| {
            if row[i].is_nan() {
                f64::NEG_INFINITY
            } else {
                row[i]
            }
        };
        let nan = |i: usize| row[i].is_nan();
        nan(a)
            .cmp(&nan(b))
            .then(key(b).partial_cmp(&key(a)).unwrap())
            .then(a.cmp(&b))
    });
    idx.truncate(k);
    idx
}

fn check_topk(rows: usize, n: usize, k: usize, ties: bool, ty: &str, ity: &str, seed: u64) {
    let reg = KernelRegistry::with_builtins();
    let mut s = store(
        &format!(
            "tensor X: {ty}[{rows}, {n}];\ntensor I: {ity}[{rows}, {k}];\ntensor V: f32[{rows}, {k}];"
        ),
        seed,
    );
    if ties {
        // Few distinct values: many ties.
        let x: Vec<f64> = get(&s, "X").iter().map(|v| (v * 3.0).round()).collect();
        put(&mut s, "X", &x);
    }
    let x = get(&s, "X");
    run(
        &reg,
        &s,
        "topk",
        &[],
        &[
            whole(&s, "X", Access::In),
            whole(&s, "I", Access::Out),
            whole(&s, "V", Access::Out),
        ],
    )
    .unwrap();
    let got: Vec<i64> = match ity {
        "i32" => s
            .read::<i32>("I")
            .unwrap()
            .into_iter()
            .map(i64::from)
            .collect(),
        "u32" => s
            .read::<u32>("I")
            .unwrap()
            .into_iter()
            .map(i64::from)
            .collect(),
        "u8" => s
            .read::<u8>("I")
            .unwrap()
            .into_iter()
            .map(i64::from)
            .collect(),
        "u64" => s
            .read::<u64>("I")
            .unwrap()
            .into_iter()
            .map(|v| v as i64)
            .collect(),
        _ => s.read::<i64>("I").unwrap(),
    };
    let vals = get(&s, "V");
    for r in 0..rows {
        let row = &x[r * n..(r + 1) * n];
        let want = topk_ref(row, k);
        let got_r: Vec<usize> = got[r * k..(r + 1) * k]
            .iter()
            .map(|&v| v as usize)
            .collect();
        assert_eq!(got_r, want, "row {r} of {rows} x {n}, k {k}, {ty} -> {ity}");
        for (j, &ix) in want.iter().enumerate() {
            let (g, w) = (vals[r * k + j], row[ix]);
            assert!(g == w || (g.is_nan() && w.is_nan()), "value {j} of row {r}");
        }
    }
}

#[test]
fn topk_is_stable_on_ties_and_every_index_type() {
    for (ity, seed) in [
        ("i32", 400),
        ("u32", 401),
        ("i64", 402),
        ("u64", 403),
        ("u8", 404),
    ] {
        check_topk(5, 60, 7, true, "f16", ity, seed);
        check_topk(3, 200, 200, true, "f32", ity, seed + 10);
        check_topk(4, 33, 1, false, "bf16", ity, seed + 20);
    }
}

#[test]
fn topk_orders_nan_last_and_zeros_by_index() {
    let reg = KernelRegistry::with_builtins();
    let mut s = store("tensor X: f32[1, 8];\ntensor I: i32[1, 8];", 410);
    let x = [
        0.0,
        f64::NAN,
        -0.0,
        1.0,
        f64::NEG_INFINITY,
        -0.0,
        1.0,
        f64::NAN,
    ];
    put(&mut s, "X", &x);
    run(
        &reg,
        &s,
        "topk",
        &[],
        &[whole(&s, "X", Access::In), whole(&s, "I", Access::Out)],
    )
    .unwrap();
    assert_eq!(s.read::<i32>("I").unwrap(), [3, 6, 0, 2, 5, 4, 1, 7]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(pto_wsp_ir::soak::cases(32)))]

    #[test]
    fn topk_matches_sorting_for_random_shapes(
        rows in 1usize..5,
        n in 1usize..120,
        kf in 0.0f64..1.0,
        ties in any::<bool>(),
        seed in 0u64..1000,
    ) {
        let k = 1 + ((n - 1) as f64 * kf) as usize;
        check_topk(rows, n, k, ties, "f32", "i64", seed);
    }
}

#[test]
fn topk_errors_name_kernel_and_regions() {
    let reg = KernelRegistry::with_builtins();
    let s = store(
        "tensor X: f32[3, 300];\ntensor I: i32[3, 5];\ntensor J: u8[3, 5];\ntensor F: f32[3, 5];\n\
         tensor W: i32[3, 301];\ntensor R: i32[2, 5];\ntensor V: f32[3, 4];",
        420,
    );
    let x = whole(&s, "X", Access::In);
    let w = |n: &str| whole(&s, n, Access::Out);
    const K: &str = "kernel `topk`";
    expect_err(
        &reg,
        &s,
        "topk",
        &[],
        &[x, w("F")],
        &[K, "region 1", "integer tensor", "f32"],
    );
    expect_err(
        &reg,
        &s,
        "topk",
        &[],
        &[x, w("J")],
        &[K, "region 0 is 3 x 300", "up to 299", "u8"],
    );
    expect_err(
        &reg,
        &s,
        "topk",
        &[],
        &[x, w("W")],
        &[K, "region 1 is 3 x 301", "at most 300 columns"],
    );
    expect_err(
        &reg,
        &s,
        "topk",
        &[],
        &[x, w("R")],
        &[K, "region 1 is 2 x 5", "one row per input row"],
    );
    expect_err(
        &reg,
        &s,
        "topk",
        &[],
        &[x, w("I"), w("V")],
        &[K, "region 2 is 3 x 4", "shaped like the indices"],
    );
    expect_err(
        &reg,
        &s,
        "topk",
        &[],
        &[x, w("I"), w("F"), w("V")],
        &[K, "4 regions", "2 or 3"],
    );
    let err = run(&reg, &s, "topk", &[], &[w("I"), w("F")]).unwrap_err();
    assert!(matches!(err, KernelError::View { index: 0, .. }), "{err:?}");
}
