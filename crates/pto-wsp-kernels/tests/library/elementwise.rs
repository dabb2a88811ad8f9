//! Basic and element-wise built-ins: fill, copy, scale, add_scalar, accumulate, counter, the
//! binary operations and their row / column broadcasts, the activations.

use super::*;
use DType::{Bf16, F16, F32, I32, I64, U8};

/// Input / output type pairs each unary kernel runs at.
const PAIRS: [(DType, DType); 5] = [
    (F32, F32),
    (F16, F16),
    (Bf16, Bf16),
    (F16, F32),
    (F32, Bf16),
];

#[test]
fn fill_copy_scale_add_scalar_counter_and_accumulate() {
    for (n, &(r, c)) in SHAPES.iter().enumerate() {
        let seed = 100 + n as u64;
        for &t in &FLOATS {
            check(
                "fill",
                Family::Exact,
                &[output(t, r, c)],
                &[("value", Scalar::F(-0.3125))],
                seed,
            );
            check(
                "counter",
                Family::Exact,
                &[reg(t, r, c, Access::InOut, Fill::Random(4.0))],
                &[],
                seed,
            );
        }
        for &(a, b) in &PAIRS {
            check(
                "copy",
                Family::Exact,
                &[input(a, r, c), output(b, r, c)],
                &[],
                seed,
            );
            check(
                "scale",
                Family::Exact,
                &[input(a, r, c), output(b, r, c)],
                &[("f", Scalar::F(1e4))],
                seed,
            );
            check(
                "add_scalar",
                Family::Exact,
                &[input(a, r, c), output(b, r, c)],
                &[("v", Scalar::F(-2.5))],
                seed,
            );
            check(
                "accumulate",
                Family::Exact,
                &[
                    input(a, r, c),
                    reg(b, r, c, Access::InOut, Fill::Random(1e4)),
                ],
                &[],
                seed,
            );
        }
        for &t in &[I32, I64, U8] {
            check(
                "copy",
                Family::Exact,
                &[
                    reg(
                        t,
                        r,
                        c,
                        Access::In,
                        Fill::Values((0..r * c).map(|i| (i * 7 % 251) as f64).collect()),
                    ),
                    output(t, r, c),
                ],
                &[],
                seed,
            );
        }
    }
    summary(&[
        "fill",
        "counter",
        "copy",
        "scale",
        "add_scalar",
        "accumulate",
    ]);
}

#[test]
fn binary_operations_and_broadcasts() {
    let ops = ["add", "sub", "mul", "div", "max", "min"];
    let types = [
        (F32, F32, F32),
        (F16, F16, F16),
        (Bf16, Bf16, Bf16),
        (F16, F32, F32),
    ];
    for (n, &(r, c)) in SHAPES.iter().enumerate() {
        let seed = 200 + n as u64;
        for op in ops {
            for &(a, b, y) in &types {
                check(
                    op,
                    Family::Exact,
                    &[input(a, r, c), input(b, r, c), output(y, r, c)],
                    &[],
                    seed,
                );
                // The vector as one row and as one column.
                let row = format!("{op}_row");
                check(
                    &row,
                    Family::Exact,
                    &[input(a, r, c), input(b, 1, c), output(y, r, c)],
                    &[],
                    seed,
                );
                check(
                    &row,
                    Family::Exact,
                    &[input(a, r, c), input(b, c, 1), output(y, r, c)],
                    &[],
                    seed,
                );
                let col = format!("{op}_col");
                check(
                    &col,
                    Family::Exact,
                    &[input(a, r, c), input(b, r, 1), output(y, r, c)],
                    &[],
                    seed,
                );
                check(
                    &col,
                    Family::Exact,
                    &[input(a, r, c), input(b, 1, r), output(y, r, c)],
                    &[],
                    seed,
                );
            }
        }
    }
    // Large magnitudes.
    let big = |t| reg(t, 5, 65, Access::In, Fill::Random(3e38));
    for op in ops {
        check(
            op,
            Family::Exact,
            &[big(F32), big(F32), output(F32, 5, 65)],
            &[],
            7,
        );
    }
    let names: Vec<String> = ops
        .iter()
        .flat_map(|o| [o.to_string(), format!("{o}_row"), format!("{o}_col")])
        .collect();
    summary(&names.iter().map(String::as_str).collect::<Vec<_>>());
}

#[test]
fn shape_mismatches_are_refused_by_both() {
    let o = check(
        "add",
        Family::Exact,
        &[input(F32, 4, 6), input(F32, 5, 6), output(F32, 4, 6)],
        &[],
        1,
    );
    let (b, l) = o.failed.expect("both refuse");
    assert!(
        b.contains("region 1 is 5 x 6 (rows x cols) but region 2 is 4 x 6"),
        "{b}"
    );
    assert!(
        l.contains("region 1 is 5 x 6 (rows x cols) but region 2 is 4 x 6"),
        "{l}"
    );
    let o = check(
        "add_row",
        Family::Exact,
        &[input(F32, 4, 6), input(F32, 1, 5), output(F32, 4, 6)],
        &[],
        1,
    );
    let (b, l) = o.failed.expect("both refuse");
    assert!(
        b.contains("5 element(s), but it must hold 6: one per column of region 0"),
        "{b}"
    );
    assert!(
        l.contains("5 element(s), but it must hold 6: one per column of region 0"),
        "{l}"
    );
}

#[test]
fn activations() {
    let ops = [
        ("exp", Family::Transcendental),
        ("rsqrt", Family::Exact),
        ("relu", Family::Exact),
        ("silu", Family::Transcendental),
        ("gelu", Family::Transcendental),
    ];
    for (n, &(r, c)) in SHAPES.iter().enumerate() {
        let seed = 300 + n as u64;
        for (op, family) in ops {
            for &(a, b) in &PAIRS {
                let x = match op {
                    "rsqrt" => reg(
                        a,
                        r,
                        c,
                        Access::In,
                        Fill::Values((0..r * c).map(|i| 0.01 + (i % 97) as f64).collect()),
                    ),
                    "exp" => reg(a, r, c, Access::In, Fill::Random(20.0)),
                    _ => reg(a, r, c, Access::In, Fill::Random(8.0)),
                };
                check(op, family, &[x, output(b, r, c)], &[], seed);
            }
        }
        for &(a, b) in &PAIRS {
            check(
                "swiglu",
                Family::Transcendental,
                &[
                    reg(a, r, c, Access::In, Fill::Random(8.0)),
                    input(a, r, c),
                    output(b, r, c),
                ],
                &[],
                seed,
            );
        }
    }
    summary(&["exp", "rsqrt", "relu", "silu", "gelu", "swiglu"]);
}
