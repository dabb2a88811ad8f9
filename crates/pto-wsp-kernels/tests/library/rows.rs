//! Row reductions, softmax, RMSNorm and RoPE (with cos / sin tables).

use super::*;
use DType::{Bf16, F16, F32};

const PAIRS: [(DType, DType); 4] = [(F32, F32), (F16, F16), (Bf16, Bf16), (F16, F32)];

/// A `rows × cols` region whose rows `minus_inf` are all `-inf`, others random `±scale`.
fn with_inf_rows(
    t: DType,
    rows: usize,
    cols: usize,
    minus_inf: &[usize],
    scale: f64,
    seed: u64,
) -> Reg {
    let mut rng = Rng(seed);
    let v = (0..rows * cols)
        .map(|i| {
            if minus_inf.contains(&(i / cols)) {
                f64::NEG_INFINITY
            } else {
                rng.unit() * scale
            }
        })
        .collect();
    reg(t, rows, cols, Access::In, Fill::Values(v))
}

#[test]
fn row_sum_max_mean() {
    for (n, &(r, c)) in SHAPES.iter().enumerate() {
        let seed = 400 + n as u64;
        for &(a, b) in &PAIRS {
            for (op, fam) in [
                ("row_sum", Family::Sum),
                ("row_max", Family::Exact),
                ("row_mean", Family::Sum),
            ] {
                check(op, fam, &[input(a, r, c), output(b, r, 1)], &[], seed);
                check(op, fam, &[input(a, r, c), output(b, 1, r)], &[], seed);
            }
        }
        check(
            "row_max",
            Family::Exact,
            &[with_inf_rows(F32, r, c, &[0], 1e4, seed), output(F32, r, 1)],
            &[],
            seed,
        );
    }
    summary(&["row_sum", "row_max", "row_mean"]);
}

#[test]
fn softmax_with_minus_inf_rows_and_large_magnitudes() {
    for (n, &(r, c)) in SHAPES.iter().enumerate() {
        let seed = 500 + n as u64;
        for &(a, b) in &PAIRS {
            for scale in [1.0, 0.125, -1.0] {
                check(
                    "softmax",
                    Family::Sum,
                    &[input(a, r, c), output(b, r, c)],
                    &[("scale", Scalar::F(scale))],
                    seed,
                );
            }
            check(
                "softmax",
                Family::Sum,
                &[input(a, r, c), output(b, r, c)],
                &[],
                seed,
            );
        }
        let rows: Vec<usize> = (0..r).step_by(3).collect();
        check(
            "softmax",
            Family::Sum,
            &[
                with_inf_rows(F32, r, c, &rows, 1e4, seed),
                output(F32, r, c),
            ],
            &[],
            seed,
        );
        check(
            "softmax",
            Family::Sum,
            &[with_inf_rows(F32, r, c, &[], 3e38, seed), output(F32, r, c)],
            &[("s", Scalar::F(1.0))],
            seed,
        );
    }
    summary(&["softmax"]);
}

#[test]
fn rmsnorm_with_weights_as_a_row_or_a_column() {
    for (n, &(r, c)) in SHAPES.iter().enumerate() {
        let seed = 600 + n as u64;
        for &(a, b) in &PAIRS {
            check(
                "rmsnorm",
                Family::Sum,
                &[input(a, r, c), input(a, 1, c), output(b, r, c)],
                &[],
                seed,
            );
            check(
                "rmsnorm",
                Family::Sum,
                &[input(a, r, c), input(a, c, 1), output(b, r, c)],
                &[("eps", Scalar::F(1e-6))],
                seed,
            );
        }
        check(
            "rmsnorm",
            Family::Sum,
            &[
                reg(F32, r, c, Access::In, Fill::Random(1e4)),
                input(F32, 1, c),
                output(F32, r, c),
            ],
            &[("eps", Scalar::F(0.5))],
            seed,
        );
    }
    // eps = 0 and a zero row: NaN on both.
    check(
        "rmsnorm",
        Family::Sum,
        &[
            reg(F32, 2, 8, Access::In, Fill::Zero),
            input(F32, 1, 8),
            output(F32, 2, 8),
        ],
        &[("eps", Scalar::F(0.0))],
        1,
    );
    summary(&["rmsnorm"]);
}

/// cos / sin tables `tokens × half` for positions `pos ..`, as the host fills them.
fn tables(tokens: usize, half: usize, pos: usize) -> (Reg, Reg) {
    let mut c = Vec::new();
    let mut s = Vec::new();
    for t in 0..tokens {
        for i in 0..half {
            let a = (pos + t) as f64 * 10000f64.powf(-2.0 * i as f64 / (2 * half) as f64);
            c.push(a.cos());
            s.push(a.sin());
        }
    }
    (
        reg(F32, tokens, half, Access::In, Fill::Values(c)),
        reg(F32, tokens, half, Access::In, Fill::Values(s)),
    )
}

#[test]
fn rope_with_tables_rotates_as_the_builtin() {
    for (tokens, h, d) in [
        (1, 1, 2),
        (1, 32, 128),
        (16, 1, 64),
        (3, 5, 130),
        (2, 9, 600),
    ] {
        let (cs, sn) = tables(tokens, d / 2, 17);
        for t in FLOATS {
            let x = reg(t, tokens * h, d, Access::InOut, Fill::Random(4.0));
            check(
                "rope",
                Family::Exact,
                &[x.clone(), cs.clone(), sn.clone()],
                &[],
                tokens as u64,
            );
            let k = reg(t, tokens * (h + 1), d, Access::InOut, Fill::Random(4.0));
            check(
                "rope",
                Family::Exact,
                &[x, k, cs.clone(), sn.clone()],
                &[],
                9,
            );
        }
    }
    // Odd d, and rows not a multiple of the tokens: refused by both.
    let (cs, sn) = tables(2, 3, 0);
    let o = check(
        "rope",
        Family::Exact,
        &[
            reg(F32, 4, 7, Access::InOut, Fill::Zero),
            cs.clone(),
            sn.clone(),
        ],
        &[],
        1,
    );
    assert!(o.failed.is_some());
    let o = check(
        "rope",
        Family::Exact,
        &[reg(F32, 3, 6, Access::InOut, Fill::Zero), cs, sn],
        &[],
        1,
    );
    let (b, l) = o.failed.expect("both refuse");
    assert!(
        b.contains("its rows are not a multiple of the 2 token(s)"),
        "{b}"
    );
    assert!(
        l.contains("its rows are not a multiple of the 2 token(s)"),
        "{l}"
    );
    summary(&["rope"]);
}
