//! Elementwise kernels: arithmetic, broadcasts, activations, copy and the engine kernels on
//! every float type.

use super::*;
use pto_wsp_kernels::ViewProblem;

/// Float types of (a, b, out) tried for every operation: all f32, low-precision inputs into an
/// f32 output, mixed inputs into low-precision outputs.
const COMBOS: [(&str, &str, &str); 4] = [
    ("f32", "f32", "f32"),
    ("f16", "f16", "f32"),
    ("bf16", "f32", "f16"),
    ("f16", "bf16", "bf16"),
];

fn abc(ta: &str, tb: &str, to: &str, seed: u64) -> TensorStore {
    store(
        &format!(
            "tensor A: {ta}[6, 40];\ntensor B: {tb}[6, 40];\ntensor O: {to}[6, 40];\n\
             tensor R: {tb}[40];\ntensor C: {tb}[6, 1];\ntensor N: i32[6, 40];"
        ),
        seed,
    )
}

type Op = fn(f64, f64) -> f64;
type Unary = fn(f64) -> f64;

const BINARY: [(&str, Op); 6] = [
    ("add", |x, y| x + y),
    ("sub", |x, y| x - y),
    ("mul", |x, y| x * y),
    ("div", |x, y| x / y),
    ("max", |x: f64, y: f64| x.max(y)),
    ("min", |x: f64, y: f64| x.min(y)),
];

#[test]
fn binary_ops_are_one_correctly_rounded_operation_on_every_type() {
    let reg = KernelRegistry::with_builtins();
    for (seed, (ta, tb, to)) in COMBOS.into_iter().enumerate() {
        for (name, op) in BINARY {
            let s = abc(ta, tb, to, 10 + seed as u64);
            // A region of A and B in the middle, the whole O: 3 x 40 rows of each.
            let a = part(&s, "A", &[1, 0], &[3, 40], Access::In);
            let b = part(&s, "B", &[3, 0], &[3, 40], Access::In);
            let o = part(&s, "O", &[2, 0], &[3, 40], Access::Out);
            run(&reg, &s, name, &[], &[a, b, o]).unwrap();
            let (x, y, got) = (get(&s, "A"), get(&s, "B"), get(&s, "O"));
            let want: Vec<f64> = (0..120).map(|k| op(x[40 + k], y[120 + k])).collect();
            assert_rounded(
                &format!("{name} {ta},{tb}->{to}"),
                &got[80..200],
                &want,
                dtype(&s, "O"),
            );
        }
    }
}

#[test]
fn broadcast_forms_apply_the_vector_along_rows_or_columns() {
    let reg = KernelRegistry::with_builtins();
    for (seed, (ta, tb, to)) in COMBOS.into_iter().enumerate() {
        for (name, op) in BINARY {
            let s = abc(ta, tb, to, 20 + seed as u64);
            let (x, r, c) = (get(&s, "A"), get(&s, "R"), get(&s, "C"));
            let (a, o) = (whole(&s, "A", Access::In), whole(&s, "O", Access::Out));
            let row = format!("{name}_row");
            run(&reg, &s, &row, &[], &[a, whole(&s, "R", Access::In), o]).unwrap();
            let want: Vec<f64> = (0..240).map(|k| op(x[k], r[k % 40])).collect();
            assert_rounded(
                &format!("{row} {ta},{tb}->{to}"),
                &get(&s, "O"),
                &want,
                dtype(&s, "O"),
            );
            let col = format!("{name}_col");
            run(&reg, &s, &col, &[], &[a, whole(&s, "C", Access::In), o]).unwrap();
            let want: Vec<f64> = (0..240).map(|k| op(x[k], c[k / 40])).collect();
            assert_rounded(
                &format!("{col} {ta},{tb}->{to}"),
                &get(&s, "O"),
                &want,
                dtype(&s, "O"),
            );
        }
    }
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

fn gelu_tanh(x: f64) -> f64 {
    let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
    0.5 * x * (1.0 + u.tanh())
}

#[test]
fn activations_match_their_formulas() {
    let reg = KernelRegistry::with_builtins();
    let unary: [(&str, Unary); 5] = [
        ("exp", f64::exp),
        ("rsqrt", |x| 1.0 / x.sqrt()),
        ("relu", |x| x.max(0.0)),
        ("silu", |x| x * sigmoid(x)),
        ("gelu", gelu_tanh),
    ];
    for (seed, (ta, _, to)) in COMBOS.into_iter().enumerate() {
        for (name, func) in unary {
            let mut s = abc(ta, ta, to, 30 + seed as u64);
            // Inputs spread over [-4, 4), plus the edge values of each function.
            let mut x: Vec<f64> = get(&s, "A").iter().map(|v| 4.0 * v).collect();
            x[..6].copy_from_slice(&[0.0, -0.0, 1e-3, -1e-3, 3.999, -3.999]);
            put(&mut s, "A", &x);
            let x = get(&s, "A");
            run(
                &reg,
                &s,
                name,
                &[],
                &[whole(&s, "A", Access::In), whole(&s, "O", Access::Out)],
            )
            .unwrap();
            let want: Vec<f64> = x.iter().map(|&v| func(v)).collect();
            let rel = tol(dtype(&s, "O"), F32_TOL);
            assert_close(
                &format!("{name} {ta}->{to}"),
                &get(&s, "O"),
                &want,
                &want,
                rel,
            );
        }
    }
    // swiglu = silu(gate) * up
    let s = abc("f16", "f32", "f32", 39);
    let (a, b, o) = (
        whole(&s, "A", Access::In),
        whole(&s, "B", Access::In),
        whole(&s, "O", Access::Out),
    );
    run(&reg, &s, "swiglu", &[], &[a, b, o]).unwrap();
    let (x, y) = (get(&s, "A"), get(&s, "B"));
    let want: Vec<f64> = x
        .iter()
        .zip(&y)
        .map(|(&g, &u)| g * sigmoid(g) * u)
        .collect();
    assert_close(
        "swiglu",
        &get(&s, "O"),
        &want,
        &want,
        tol(DType::F32, F32_TOL),
    );
}

#[test]
fn copy_converts_between_float_types_and_copies_bits_within_one() {
    let reg = KernelRegistry::with_builtins();
    let s = store(
        "tensor A: f32[4, 8];\ntensor H: f16[4, 8];\ntensor B: bf16[4, 8];\n\
         tensor I: i64[4, 8];\ntensor J: i64[2, 16];\ntensor K: i32[4, 8];",
        41,
    );
    let w = |n: &str| whole(&s, n, Access::Out);
    let r = |n: &str| whole(&s, n, Access::In);
    run(&reg, &s, "copy", &[], &[r("A"), w("H")]).unwrap();
    assert_rounded("copy f32->f16", &get(&s, "H"), &get(&s, "A"), DType::F16);
    run(&reg, &s, "copy", &[], &[r("H"), w("B")]).unwrap();
    assert_rounded("copy f16->bf16", &get(&s, "B"), &get(&s, "H"), DType::Bf16);
    run(&reg, &s, "copy", &[], &[r("B"), w("A")]).unwrap();
    assert_eq!(get(&s, "A"), get(&s, "B"));
    // Same element type: bits, integers included; rows x cols must still match.
    run(
        &reg,
        &s,
        "copy",
        &[],
        &[r("I"), part(&s, "J", &[0, 0], &[2, 16], Access::Out)],
    )
    .expect_err("4 x 8 is not 2 x 16");
    let j = part(&s, "J", &[0, 0], &[2, 8], Access::Out);
    run(
        &reg,
        &s,
        "copy",
        &[],
        &[part(&s, "I", &[1, 0], &[2, 8], Access::In), j],
    )
    .unwrap();
    let (src, dst) = (s.read::<i64>("I").unwrap(), s.read::<i64>("J").unwrap());
    assert_eq!(dst[..8], src[8..16]);
    assert_eq!(dst[16..24], src[16..24]);
    // Different integer types, or an integer and a float: no conversion.
    let err = expect_err(
        &reg,
        &s,
        "copy",
        &[],
        &[r("K"), w("I")],
        &["region 0", "`K`", "i32"],
    );
    assert!(matches!(err, KernelError::View { index: 0, .. }), "{err:?}");
    expect_err(
        &reg,
        &s,
        "copy",
        &[],
        &[r("A"), w("I")],
        &["region 1", "`I`"],
    );
}

#[test]
fn fill_scale_accumulate_work_on_low_precision_types() {
    let reg = KernelRegistry::with_builtins();
    let s = store(
        "tensor H: f16[3, 5];\ntensor B: bf16[3, 5];\ntensor F: f32[3, 5];",
        43,
    );
    let (h, b) = (get(&s, "H"), get(&s, "B"));
    run(
        &reg,
        &s,
        "scale",
        &[f(0.3)],
        &[whole(&s, "H", Access::In), whole(&s, "F", Access::Out)],
    )
    .unwrap();
    let want: Vec<f64> = h.iter().map(|&x| (x as f32 * 0.3f32) as f64).collect();
    assert_eq!(get(&s, "F"), want);
    run(
        &reg,
        &s,
        "accumulate",
        &[],
        &[whole(&s, "H", Access::In), whole(&s, "B", Access::InOut)],
    )
    .unwrap();
    let want: Vec<f64> = h.iter().zip(&b).map(|(x, y)| x + y).collect();
    assert_rounded(
        "accumulate f16 into bf16",
        &get(&s, "B"),
        &want,
        DType::Bf16,
    );
    run(&reg, &s, "fill", &[f(-2.5)], &[whole(&s, "B", Access::Out)]).unwrap();
    assert!(get(&s, "B").iter().all(|&x| x == -2.5));
}

#[test]
fn elementwise_errors_name_kernel_and_regions() {
    let reg = KernelRegistry::with_builtins();
    let s = abc("f32", "f32", "f32", 50);
    let a = whole(&s, "A", Access::In);
    let b_short = part(&s, "B", &[0, 0], &[6, 39], Access::In);
    let o = whole(&s, "O", Access::Out);
    for name in ["add", "sub", "mul", "div", "max", "min", "swiglu"] {
        let err = expect_err(
            &reg,
            &s,
            name,
            &[],
            &[a, b_short, o],
            &[
                &format!("kernel `{name}`"),
                "region 1 is 6 x 39",
                "region 2 is 6 x 40",
            ],
        );
        assert!(matches!(err, KernelError::Shape { ref kernel, .. } if kernel == name));
    }
    // Broadcast vectors of the wrong length.
    let b_row = part(&s, "B", &[0, 0], &[1, 39], Access::In);
    expect_err(
        &reg,
        &s,
        "add_row",
        &[],
        &[a, b_row, o],
        &["`add_row`", "region 1", "39", "must hold 40"],
    );
    expect_err(
        &reg,
        &s,
        "mul_col",
        &[],
        &[a, whole(&s, "R", Access::In), o],
        &["`mul_col`", "region 1", "must hold 6"],
    );
    // Output shaped unlike the input.
    let o_small = part(&s, "O", &[0, 0], &[5, 40], Access::Out);
    for name in ["exp", "rsqrt", "relu", "silu", "gelu", "copy"] {
        expect_err(
            &reg,
            &s,
            name,
            &[],
            &[a, o_small],
            &[name, "region 0 is 6 x 40", "region 1 is 5 x 40"],
        );
    }
    expect_err(
        &reg,
        &s,
        "scale",
        &[f(2.0)],
        &[a, o_small],
        &["`scale`", "region 1 is 5 x 40"],
    );
    expect_err(&reg, &s, "scale", &[], &[a, o], &["parameter 0"]);
    // Integer tensors are not floats.
    let n = whole(&s, "N", Access::In);
    let err = run(&reg, &s, "exp", &[], &[n, o]).unwrap_err();
    assert!(
        matches!(
            err,
            KernelError::View { index: 0, ref tensor, problem: ViewProblem::DType { dtype: DType::I32, element: "f32, f16 or bf16" } } if tensor == "N"
        ),
        "{err:?}"
    );
    // accumulate reads its output: `out` is refused.
    let err = expect_err(
        &reg,
        &s,
        "accumulate",
        &[],
        &[a, o],
        &["`accumulate`", "region 1 is `out`", "inout"],
    );
    assert!(matches!(
        err,
        KernelError::Access {
            index: 1,
            access: Access::Out,
            ..
        }
    ));
    // Output overlapping an input is refused by the views.
    let o_on_a = whole(&s, "A", Access::Out);
    let err = expect_err(
        &reg,
        &s,
        "relu",
        &[],
        &[a, o_on_a],
        &["region 1", "overlaps"],
    );
    assert!(matches!(err, KernelError::View { index: 1, .. }));
    // A missing region.
    assert_eq!(
        run(&reg, &s, "gelu", &[], &[a]).unwrap_err(),
        KernelError::Region { index: 1, count: 1 }
    );
}
