//! Matrix products (the cube path for operands of one type, the exact vector path for mixed
//! types) and the MoE expert.

use super::*;
use DType::{Bf16, F16, F32};

#[test]
fn products_of_one_element_type_on_the_cube() {
    let shapes = [
        (1, 1, 1),
        (1, 63, 65),
        (8, 64, 128),
        (16, 100, 130),
        (17, 257, 33),
        (70, 129, 200),
    ];
    for (n, &(m, k, nn)) in shapes.iter().enumerate() {
        let seed = 700 + n as u64;
        for (a, c) in [
            (F32, F32),
            (F16, F32),
            (F16, F16),
            (Bf16, F32),
            (Bf16, Bf16),
        ] {
            check(
                "matmul",
                Family::Sum,
                &[input(a, m, k), input(a, k, nn), output(c, m, nn)],
                &[],
                seed,
            );
            check(
                "matmul_acc",
                Family::Sum,
                &[
                    input(a, m, k),
                    input(a, k, nn),
                    reg(c, m, nn, Access::InOut, Fill::Random(1.0)),
                ],
                &[],
                seed,
            );
            check(
                "matmul_bt",
                Family::Sum,
                &[input(a, m, k), input(a, nn, k), output(c, m, nn)],
                &[],
                seed,
            );
            check(
                "matmul_bt_acc",
                Family::Sum,
                &[
                    input(a, m, k),
                    input(a, nn, k),
                    reg(c, m, nn, Access::InOut, Fill::Random(1.0)),
                ],
                &[],
                seed,
            );
        }
    }
    summary(&["matmul", "matmul_acc", "matmul_bt", "matmul_bt_acc"]);
}

#[test]
fn mixed_products_exactly_on_the_vector_unit() {
    // The main job's projections: f32 activations times f16 weights, up to 16 rows; and more
    // rows than one group of 16 (a prefill tile), with a remainder group.
    let shapes = [
        (1, 1, 1),
        (4, 63, 65),
        (8, 4096, 128),
        (16, 130, 300),
        (3, 1, 7),
        (40, 70, 130),
    ];
    for (n, &(m, k, nn)) in shapes.iter().enumerate() {
        let seed = 800 + n as u64;
        for (a, b, c) in [
            (F32, F16, F32),
            (F32, Bf16, F32),
            (F16, F32, F16),
            (F32, F16, Bf16),
        ] {
            check(
                "matmul",
                Family::Sum,
                &[input(a, m, k), input(b, k, nn), output(c, m, nn)],
                &[],
                seed,
            );
            check(
                "matmul_acc",
                Family::Sum,
                &[
                    input(a, m, k),
                    input(b, k, nn),
                    reg(c, m, nn, Access::InOut, Fill::Random(1e4)),
                ],
                &[],
                seed,
            );
            check(
                "matmul_bt",
                Family::Sum,
                &[input(a, m, k), input(b, nn, k), output(c, m, nn)],
                &[],
                seed,
            );
        }
    }
    // Any row count of mixed operands has a definition.
    let text = "kernel proj(in x: f32[?, ?], in w: f16[?, ?], out y: f32[?, ?]);\n";
    let m = parse(text).unwrap();
    let k = library::instantiate("matmul", m.kernel("proj").unwrap()).unwrap();
    assert!(k.body.is_some());
    summary(&["matmul", "matmul_acc", "matmul_bt"]);
}

#[test]
fn moe_expert() {
    for (n, &(t, h, f)) in [
        (1, 8, 8),
        (5, 64, 100),
        (16, 128, 70),
        (16, 96, 130),
        (3, 33, 65),
        // More than 16 tokens (two groups, the second partial), and more than 128 output
        // tiles (hidden 1032 = 129 blocks of 8 columns: the hidden dimension in groups).
        (20, 40, 30),
        (16, 1032, 24),
    ]
    .iter()
    .enumerate()
    {
        let seed = 900 + n as u64;
        for (x, w, y) in [(F32, F32, F32), (F16, F16, F32), (Bf16, Bf16, Bf16)] {
            check(
                "moe_expert",
                Family::Sum,
                &[
                    input(x, t, h),
                    reg(F32, t, 1, Access::In, Fill::Random(1.0)),
                    reg(w, h, f, Access::In, Fill::Random(0.3)),
                    reg(w, h, f, Access::In, Fill::Random(0.3)),
                    reg(w, f, h, Access::In, Fill::Random(0.3)),
                    output(y, t, h),
                ],
                &[],
                seed,
            );
        }
    }
    summary(&["moe_expert"]);
}
