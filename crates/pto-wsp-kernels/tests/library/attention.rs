//! Split-KV decode attention (chunk and merge) and causal attention.

use super::*;
use DType::{Bf16, F16, F32};

/// Types of q, of k and v, of o; query rows g, keys s, head dimension d.
type Chunk = (DType, DType, DType, usize, usize, usize);

fn chunk((q, kv, o, g, s, d): Chunk, params: &[(&str, Scalar)], seed: u64) -> Outcome {
    check(
        "attn_decode_chunk",
        Family::Sum,
        &[
            input(q, g, d),
            input(kv, s, d),
            input(kv, s, d),
            output(o, g, d),
            output(F32, g, 1),
            output(F32, 1, g),
        ],
        params,
        seed,
    )
}

#[test]
fn decode_chunk_on_full_ragged_and_empty_chunks() {
    for (n, &(g, s, d)) in [
        (1, 1, 1),
        (4, 256, 128),
        (4, 200, 64),
        (16, 65, 128),
        (1, 513, 8),
    ]
    .iter()
    .enumerate()
    {
        let seed = 1000 + n as u64;
        for (q, kv, o) in [
            (F32, F32, F32),
            (F32, F16, F32),
            (F16, F16, F32),
            (Bf16, Bf16, Bf16),
            (F16, F16, F16),
        ] {
            chunk((q, kv, o, g, s, d), &[], seed);
            let n_valid = (s * 2 / 3) as i64;
            chunk(
                (q, kv, o, g, s, d),
                &[("cs", Scalar::I(5)), ("ce", Scalar::I(5 + n_valid))],
                seed,
            );
            chunk(
                (q, kv, o, g, s, d),
                &[
                    ("cs", Scalar::I(3)),
                    ("ce", Scalar::I(3)),
                    ("scale", Scalar::F(0.5)),
                ],
                seed,
            );
            chunk(
                (q, kv, o, g, s, d),
                &[("cs", Scalar::I(0)), ("ce", Scalar::I(1))],
                seed,
            );
        }
    }
    // End before start: refused by both.
    let o = chunk(
        (F32, F32, F32, 2, 8, 4),
        &[("cs", Scalar::I(5)), ("ce", Scalar::I(2))],
        1,
    );
    let (b, l) = o.failed.expect("both refuse");
    assert!(b.contains("chunk_end 2 is before chunk_start 5"), "{b}");
    assert!(l.contains("chunk_end 2 is before chunk_start 5"), "{l}");
    summary(&["attn_decode_chunk"]);
}

#[test]
fn merge_of_partials_including_empty_ones() {
    for (n, &(h, c, d)) in [(1, 1, 1), (2, 4, 128), (3, 70, 64), (8, 5, 128)]
        .iter()
        .enumerate()
    {
        let seed = 1100 + n as u64;
        let mut rng = Rng(seed);
        // Running maxes, some chunks empty (-inf with l = 0).
        let m: Vec<f64> = (0..h * c)
            .map(|i| {
                if i % 3 == 1 {
                    f64::NEG_INFINITY
                } else {
                    rng.unit() * 5.0
                }
            })
            .collect();
        let l: Vec<f64> = m
            .iter()
            .map(|&x| {
                if x == f64::NEG_INFINITY {
                    0.0
                } else {
                    1.0 + rng.unit().abs() * 30.0
                }
            })
            .collect();
        for (t, y) in [(F32, F32), (F32, F16), (F16, F16)] {
            let base = vec![
                input(t, h * c, d),
                reg(F32, h * c, 1, Access::In, Fill::Values(m.clone())),
                reg(F32, 1, h * c, Access::In, Fill::Values(l.clone())),
                output(y, h, d),
            ];
            check("attn_merge", Family::Sum, &base, &[], seed);
            let mut five = base.clone();
            five.push(output(F32, h, 1));
            check("attn_merge", Family::Sum, &five, &[], seed);
            let mut six = five.clone();
            six.push(output(F32, 1, h));
            check("attn_merge", Family::Sum, &six, &[], seed);
        }
    }
    // Every chunk of a head empty: zeros, M = -inf, l = 0 on both.
    let (h, c, d) = (2, 3, 8);
    check(
        "attn_merge",
        Family::Sum,
        &[
            input(F32, h * c, d),
            reg(
                F32,
                h * c,
                1,
                Access::In,
                Fill::Values(vec![f64::NEG_INFINITY; h * c]),
            ),
            reg(F32, h * c, 1, Access::In, Fill::Zero),
            output(F32, h, d),
            output(F32, h, 1),
            output(F32, h, 1),
        ],
        &[],
        3,
    );
    summary(&["attn_merge"]);
}

#[test]
fn causal_attention() {
    for (n, &(tq, s, d, kv_len)) in [
        (1, 1, 1, 1),
        (1, 300, 128, 300),
        (16, 64, 64, 40),
        (20, 200, 128, 150),
        (33, 100, 16, 100),
    ]
    .iter()
    .enumerate()
    {
        let seed = 1200 + n as u64;
        for (t, o) in [(F32, F32), (F16, F32), (F16, F16), (Bf16, Bf16)] {
            let regions = [
                input(t, tq, d),
                input(t, s, d),
                input(t, s, d),
                output(o, tq, d),
            ];
            check(
                "attn_causal",
                Family::Sum,
                &regions,
                &[("kv_len", Scalar::I(kv_len))],
                seed,
            );
            check(
                "attn_causal",
                Family::Sum,
                &regions,
                &[("kv_len", Scalar::I(kv_len)), ("scale", Scalar::F(0.2))],
                seed,
            );
            if kv_len as usize == s {
                check("attn_causal", Family::Sum, &regions, &[], seed);
            }
        }
    }
    summary(&["attn_causal"]);
}
