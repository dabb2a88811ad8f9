//! Top-k, row gather, scatter-add and bucketing by index.

use super::*;
use DType::{Bf16, F16, F32, I32, I64, U8, U32, U64};

#[test]
fn topk_with_ties_signed_zeros_and_minus_inf() {
    for (n, &(rows, cols, k)) in [
        (1, 1, 1),
        (3, 2, 2),
        (16, 8, 2),
        (4, 31, 5),
        (2, 33, 33),
        (5, 200, 17),
        (1, 2048, 3),
    ]
    .iter()
    .enumerate()
    {
        let seed = 1300 + n as u64;
        let mut rng = Rng(seed);
        // Few distinct values (ties), signed zeros and -inf.
        let vals: Vec<f64> = (0..rows * cols)
            .map(|i| match i % 11 {
                0 => 0.0,
                1 => -0.0,
                2 => f64::NEG_INFINITY,
                _ => (rng.unit() * 4.0).round() / 2.0,
            })
            .collect();
        for (x, it) in [(F32, I32), (F16, U32), (Bf16, I64), (F32, U64), (F32, U8)] {
            if it == U8 && cols > 256 {
                continue;
            }
            let xr = reg(x, rows, cols, Access::In, Fill::Values(vals.clone()));
            check(
                "topk",
                Family::Exact,
                &[xr.clone(), output(it, rows, k)],
                &[],
                seed,
            );
            check(
                "topk",
                Family::Exact,
                &[xr, output(it, rows, k), output(F32, rows, k)],
                &[],
                seed,
            );
        }
    }
    // k > n and indices that do not fit: refused by both.
    let o = check(
        "topk",
        Family::Exact,
        &[input(F32, 2, 4), output(I32, 2, 5)],
        &[],
        1,
    );
    assert!(o.failed.is_some());
    let o = check(
        "topk",
        Family::Exact,
        &[input(F32, 1, 300), output(U8, 1, 2)],
        &[],
        1,
    );
    let (b, l) = o.failed.expect("both refuse");
    assert!(b.contains("column indices up to 299 do not fit u8"), "{b}");
    assert!(l.contains("column indices up to 299 do not fit u8"), "{l}");
    summary(&["topk"]);
}

fn indices(n: usize, bound: usize, seed: u64) -> Vec<f64> {
    let mut rng = Rng(seed);
    (0..n).map(|_| (rng.next() % bound as u64) as f64).collect()
}

#[test]
fn gather_and_scatter_add_rows_with_repeated_indices() {
    for (n, &(m, nn, d)) in [(1, 1, 1), (8, 16, 64), (5, 12, 513), (40, 3, 7)]
        .iter()
        .enumerate()
    {
        let seed = 1400 + n as u64;
        let idx = indices(nn, m, seed);
        for it in [I32, I64] {
            for (a, b) in [(F32, F32), (F16, F16), (F16, F32), (Bf16, Bf16)] {
                let ix = reg(it, 1, nn, Access::In, Fill::Values(idx.clone()));
                check(
                    "gather_rows",
                    Family::Exact,
                    &[input(a, m, d), ix.clone(), output(b, nn, d)],
                    &[],
                    seed,
                );
                let ixc = reg(it, nn, 1, Access::In, Fill::Values(idx.clone()));
                check(
                    "scatter_add_rows",
                    Family::Exact,
                    &[
                        input(a, nn, d),
                        ixc,
                        reg(b, m, d, Access::InOut, Fill::Random(2.0)),
                    ],
                    &[],
                    seed,
                );
            }
        }
    }
    // An index out of range: refused by both, naming the position and the value; nothing
    // written (the check compares the untouched outputs too).
    let ix = reg(I32, 1, 3, Access::In, Fill::Values(vec![0.0, 7.0, 1.0]));
    let o = check(
        "gather_rows",
        Family::Exact,
        &[input(F32, 4, 2), ix, output(F32, 3, 2)],
        &[],
        1,
    );
    let (b, l) = o.failed.expect("both refuse");
    assert!(
        b.contains("index 1 is 7, outside 0..4 (the rows of region 0)"),
        "{b}"
    );
    assert!(
        l.contains("index 1 is 7, outside 0..4 (the rows of region 0)"),
        "{l}"
    );
    summary(&["gather_rows", "scatter_add_rows"]);
}

#[test]
fn bucket_by_index_with_overflow() {
    for (n, &(t, k, b, c)) in [(1, 1, 1, 1), (16, 2, 8, 32), (5, 3, 4, 15), (16, 2, 8, 6)]
        .iter()
        .enumerate()
    {
        let seed = 1500 + n as u64;
        let idx = indices(t * k, b, seed);
        for (it, ct, lt) in [(I32, I32, I32), (I64, I64, I32)] {
            let o = check(
                "bucket_by_index",
                Family::Exact,
                &[
                    reg(it, t, k, Access::In, Fill::Values(idx.clone())),
                    output(ct, b, 1),
                    output(lt, b, c),
                ],
                &[],
                seed,
            );
            if let Some((bi, li)) = o.failed {
                // Only the overflowing case.
                assert!(bi.contains("more than region 2's 6 columns"), "{bi}");
                assert!(li.contains("more than region 2's 6 columns"), "{li}");
            }
        }
    }
    summary(&["bucket_by_index"]);
}
