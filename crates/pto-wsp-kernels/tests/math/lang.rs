//! Kernels written in tile instructions (`pto_wsp_kernels::lang`): every instruction against a
//! naive reference, on tiles whose valid rows and columns are ragged (5 x 11 of 8 x 16), with
//! the elements outside the valid part checked untouched.
//!
//! Tolerances: single correctly rounded `f32` operations (`+ - * /`, max, min, sqrt, neg, abs,
//! moves, broadcasts) are checked exactly against the same operation in `f32`; `exp` (the fast
//! `exp` of the built-ins, ≤ 2e-7 relative), `log` (the standard library's, ≤ 1 ulp) and `1/√x`
//! (two roundings) within 4 `f32` ulps relative (`5e-7`) of the `f64` value; sums and products
//! within `1e-6` of `Σ|terms|`.

use super::*;
use pto_wsp_ir::{Operand, ShapeRule, TileOp};
use pto_wsp_kernels::lang::register_bodies;

const R: usize = 8;
const C: usize = 16;
const VR: usize = 5;
const VC: usize = 11;

/// Shapes (rows, cols) of dst, src a, src b for an instruction's rule.
fn shapes(rule: ShapeRule) -> [(usize, usize); 3] {
    match rule {
        ShapeRule::RowReduce => [(R, 1), (R, C), (R, C)],
        ShapeRule::ColReduce => [(1, C), (R, C), (R, C)],
        ShapeRule::RowExpand => [(R, C), (R, 1), (R, C)],
        ShapeRule::RowExpandBinary => [(R, C), (R, C), (R, 1)],
        ShapeRule::ColExpandBinary => [(R, C), (R, C), (1, C)],
        ShapeRule::ColExpand => [(R, C), (1, C), (R, C)],
        ShapeRule::Transpose => [(C, R), (R, C), (R, C)],
        _ => [(R, C), (R, C), (R, C)],
    }
}

/// Valid part of a `rows x cols` tile: ragged where the dimension is not 1.
fn valid((r, c): (usize, usize)) -> (usize, usize) {
    (if r == 1 { 1 } else { VR }, if c == 1 { 1 } else { VC })
}

fn naive_unary(op: TileOp, x: f32) -> f64 {
    let v = x as f64;
    match op {
        TileOp::Exp => v.exp(),
        TileOp::Log => v.ln(),
        TileOp::Sqrt => (x.sqrt()) as f64,
        TileOp::Rsqrt => 1.0 / v.sqrt(),
        TileOp::Abs => x.abs() as f64,
        TileOp::Relu => (if x < 0.0 { 0.0 } else { x }) as f64,
        TileOp::Neg => (-x) as f64,
        TileOp::Recip => (1.0 / x) as f64,
        _ => unreachable!(),
    }
}

fn naive_binary(op: TileOp, a: f32, b: f32) -> f32 {
    match op {
        TileOp::Add | TileOp::Adds | TileOp::RowExpandAdd | TileOp::ColExpandAdd => a + b,
        TileOp::Sub | TileOp::Subs | TileOp::RowExpandSub | TileOp::ColExpandSub => a - b,
        TileOp::Mul | TileOp::Muls | TileOp::RowExpandMul | TileOp::ColExpandMul => a * b,
        TileOp::Div | TileOp::Divs | TileOp::RowExpandDiv | TileOp::ColExpandDiv => a / b,
        TileOp::Max | TileOp::Maxs | TileOp::RowExpandMax | TileOp::ColExpandMax => a.max(b),
        TileOp::Min | TileOp::Mins | TileOp::RowExpandMin | TileOp::ColExpandMin => a.min(b),
        _ => unreachable!(),
    }
}

/// The instructions of the float test below: every one but loads, stores, products and those
/// on masks, indices, records or single elements (tested in `special.rs`).
fn float_arithmetic(op: TileOp) -> bool {
    use ShapeRule as S;
    !matches!(
        op.shape_rule(),
        S::Load
            | S::Store
            | S::Matmul
            | S::Compare
            | S::Select
            | S::Sort32
            | S::MrgSort
            | S::SortPart
            | S::Index
            | S::Tri
            | S::Gather
            | S::Scatter
            | S::FillPad
            | S::SetVal
    )
}

#[test]
fn every_vector_instruction_matches_a_naive_reference_on_ragged_tiles() {
    let mut tested = 0;
    for &op in TileOp::ALL {
        let rule = op.shape_rule();
        if !float_arithmetic(op) {
            continue;
        }
        let [sd, sa, sb] = shapes(rule);
        let kinds = op.operands();
        let n_src = kinds.iter().filter(|k| **k == Operand::Src).count();
        let scalar = kinds.contains(&Operand::Float);
        // A transpose's destination is valid over the source's valid cols x rows.
        let dvalid = if rule == ShapeRule::Transpose {
            (VC, VR)
        } else {
            valid(sd)
        };
        let tile = |n: &str, (r, c): (usize, usize)| {
            let (vr, vc) = if n == "td" { dvalid } else { valid((r, c)) };
            format!("    tile {n}: vec f32[{r}, {c}] valid({vr}, {vc});\n")
        };
        let mut body = tile("td", sd) + &tile("ta", sa) + &tile("tb", sb);
        body += "    TLOAD(ta, a);\n    TLOAD(tb, b);\n    TLOAD(td, d);\n";
        let args = match (op, n_src, scalar) {
            (_, 0, true) => "td, -0.75".to_string(),
            (_, 1, true) => "td, ta, 1.5".to_string(),
            (_, 1, false) => "td, ta".to_string(),
            _ => "td, ta, tb".to_string(),
        };
        body += &format!("    {}({args});\n    TSTORE(d, td);\n", op.mnemonic());
        let text = format!(
            "tensor A: f32[{}, {}];\ntensor B: f32[{}, {}];\ntensor D: f32[{}, {}];\n\
             kernel k(in a: f32[{0}, {1}], in b: f32[{2}, {3}], inout d: f32[{4}, {5}]) {{\n{body}}}\n\
             workload main() {{ task k(A[0 +: {0}, 0 +: {1}], B[0 +: {2}, 0 +: {3}], D[0 +: {4}, 0 +: {5}]); }}\n",
            sa.0, sa.1, sb.0, sb.1, sd.0, sd.1
        );
        let m = module(&text);
        pto_wsp_ir::validate(&m).unwrap_or_else(|e| panic!("{op:?}: {e:?}\n{text}"));
        let mut s = TensorStore::new(&m, &Bindings::new()).unwrap();
        let mut rng = crate::Rng(op as u64 + 1);
        // Positive inputs in [0.5, 2) for log / sqrt / rsqrt / recip / div; signed otherwise.
        let positive = matches!(
            op,
            TileOp::Log | TileOp::Sqrt | TileOp::Rsqrt | TileOp::Recip | TileOp::Div
        );
        let mut draw = |n: usize| -> Vec<f32> {
            (0..n)
                .map(|_| {
                    let u = (rng.next() >> 40) as f32 / (1u64 << 24) as f32;
                    if positive {
                        0.5 + 1.5 * u
                    } else {
                        4.0 * u - 2.0
                    }
                })
                .collect()
        };
        let (a, b, d0) = (draw(sa.0 * sa.1), draw(sb.0 * sb.1), draw(sd.0 * sd.1));
        s.write("A", &a).unwrap();
        s.write("B", &b).unwrap();
        s.write("D", &d0).unwrap();
        let mut reg = KernelRegistry::new();
        register_bodies(&m, &mut reg);
        let regions = [
            io(0, &[0, 0], &[sa.0 as i64, sa.1 as i64], Access::In),
            io(1, &[0, 0], &[sb.0 as i64, sb.1 as i64], Access::In),
            io(2, &[0, 0], &[sd.0 as i64, sd.1 as i64], Access::InOut),
        ];
        run(&reg, &s, "k", &[], &regions).unwrap_or_else(|e| panic!("{op:?}: {e}"));
        let got = s.read::<f32>("D").unwrap();
        let (vr, vc) = dvalid;
        let (var, vac) = valid(sa);
        for r in 0..sd.0 {
            for c in 0..sd.1 {
                let i = r * sd.1 + c;
                if r >= vr || c >= vc {
                    assert_eq!(
                        got[i].to_bits(),
                        d0[i].to_bits(),
                        "{op:?}: ({r}, {c}) outside the valid part changed"
                    );
                    continue;
                }
                let at = |x: &[f32], cols: usize, r: usize, c: usize| x[r * cols + c];
                let exact: Option<f32> = match op {
                    TileOp::Expands => Some(-0.75),
                    TileOp::Mov | TileOp::Cvt => Some(at(&a, sa.1, r, c)),
                    TileOp::Trans => Some(at(&a, sa.1, c, r)),
                    TileOp::Add
                    | TileOp::Sub
                    | TileOp::Mul
                    | TileOp::Div
                    | TileOp::Max
                    | TileOp::Min => Some(naive_binary(op, at(&a, sa.1, r, c), at(&b, sb.1, r, c))),
                    TileOp::Adds
                    | TileOp::Subs
                    | TileOp::Muls
                    | TileOp::Divs
                    | TileOp::Maxs
                    | TileOp::Mins => Some(naive_binary(op, at(&a, sa.1, r, c), 1.5)),
                    TileOp::Sqrt | TileOp::Abs | TileOp::Neg | TileOp::Recip | TileOp::Relu => {
                        Some(naive_unary(op, at(&a, sa.1, r, c)) as f32)
                    }
                    TileOp::RowMax => Some(
                        (0..vac)
                            .map(|j| at(&a, sa.1, r, j))
                            .fold(f32::MIN, f32::max),
                    ),
                    TileOp::RowMin => Some(
                        (0..vac)
                            .map(|j| at(&a, sa.1, r, j))
                            .fold(f32::MAX, f32::min),
                    ),
                    TileOp::ColMax => Some(
                        (0..var)
                            .map(|i| at(&a, sa.1, i, c))
                            .fold(f32::MIN, f32::max),
                    ),
                    TileOp::ColMin => Some(
                        (0..var)
                            .map(|i| at(&a, sa.1, i, c))
                            .fold(f32::MAX, f32::min),
                    ),
                    TileOp::RowExpand => Some(at(&a, 1, r, 0)),
                    TileOp::ColExpand => Some(at(&a, sa.1, 0, c)),
                    TileOp::RowExpandAdd
                    | TileOp::RowExpandSub
                    | TileOp::RowExpandMul
                    | TileOp::RowExpandDiv
                    | TileOp::RowExpandMax
                    | TileOp::RowExpandMin => {
                        Some(naive_binary(op, at(&a, sa.1, r, c), at(&b, 1, r, 0)))
                    }
                    TileOp::ColExpandAdd
                    | TileOp::ColExpandSub
                    | TileOp::ColExpandMul
                    | TileOp::ColExpandDiv
                    | TileOp::ColExpandMax
                    | TileOp::ColExpandMin => {
                        Some(naive_binary(op, at(&a, sa.1, r, c), at(&b, sb.1, 0, c)))
                    }
                    _ => None,
                };
                match exact {
                    Some(want) => assert_eq!(
                        got[i].to_bits(),
                        want.to_bits(),
                        "{op:?} at ({r}, {c}): {} vs {want}",
                        got[i]
                    ),
                    None => {
                        let (want, scale, tol) = match op {
                            TileOp::Exp | TileOp::Log | TileOp::Rsqrt => {
                                let w = naive_unary(op, at(&a, sa.1, r, c));
                                (w, w.abs(), 5e-7)
                            }
                            TileOp::RowExpandExpDif => {
                                let x = at(&a, sa.1, r, c) - at(&b, 1, r, 0);
                                let w = (x as f64).exp();
                                (w, w.abs(), 5e-7)
                            }
                            TileOp::ColExpandExpDif => {
                                let x = at(&a, sa.1, r, c) - at(&b, sb.1, 0, c);
                                let w = (x as f64).exp();
                                (w, w.abs(), 5e-7)
                            }
                            TileOp::RowSum => {
                                let t: Vec<f64> =
                                    (0..vac).map(|j| at(&a, sa.1, r, j) as f64).collect();
                                (t.iter().sum(), t.iter().map(|x| x.abs()).sum(), 1e-6)
                            }
                            TileOp::ColSum => {
                                let t: Vec<f64> =
                                    (0..var).map(|i| at(&a, sa.1, i, c) as f64).collect();
                                (t.iter().sum(), t.iter().map(|x| x.abs()).sum(), 1e-6)
                            }
                            _ => unreachable!("{op:?} has no reference"),
                        };
                        assert!(
                            ((got[i] as f64) - want).abs() <= tol * scale,
                            "{op:?} at ({r}, {c}): {} vs {want}",
                            got[i]
                        );
                    }
                }
            }
        }
        tested += 1;
    }
    assert_eq!(
        tested,
        TileOp::ALL
            .iter()
            .filter(|&&op| float_arithmetic(op))
            .count(),
        "every vector instruction is tested"
    );
    assert!(tested >= 46, "{tested}");
}

#[test]
fn matmul_and_matmul_acc_match_a_naive_product_on_ragged_tiles() {
    // c (5 x 9 valid of 8 x 16) = a (5 x 7 of 8 x 8) . b (7 x 9 of 8 x 16), then += again.
    let text = "\
tensor A: f32[8, 8];
tensor B: f32[8, 16];
tensor D: f32[8, 16];
kernel k(in a: f32[8, 8], in b: f32[8, 16], inout d: f32[8, 16], acc: bool) @cube {
    tile ta: left f32[8, 8] valid(5, 7);
    tile tb: right f32[8, 16] valid(7, 9);
    tile tc: acc f32[8, 16] valid(5, 9);
    TLOAD(ta, a);
    TLOAD(tb, b);
    TMATMUL(tc, ta, tb);
    if acc {
        TMATMUL_ACC(tc, ta, tb);
    }
    TSTORE(d, tc);
}
workload main() { task k(A[0 +: 8, 0 +: 8], B[0 +: 8, 0 +: 16], D[0 +: 8, 0 +: 16], true); }
";
    let m = module(text);
    pto_wsp_ir::validate(&m).unwrap();
    for (acc, times) in [(0u64, 1.0), (1, 2.0)] {
        let mut s = TensorStore::new(&m, &Bindings::new()).unwrap();
        let mut rng = crate::Rng(7 + acc);
        let (a, b, d0) = (rng.f32s(64), rng.f32s(128), rng.f32s(128));
        s.write("A", &a).unwrap();
        s.write("B", &b).unwrap();
        s.write("D", &d0).unwrap();
        let mut reg = KernelRegistry::new();
        register_bodies(&m, &mut reg);
        let regions = [
            io(0, &[0, 0], &[8, 8], Access::In),
            io(1, &[0, 0], &[8, 16], Access::In),
            io(2, &[0, 0], &[8, 16], Access::InOut),
        ];
        run(&reg, &s, "k", &[acc], &regions).unwrap();
        let got = s.read::<f32>("D").unwrap();
        for r in 0..8 {
            for c in 0..16 {
                let i = r * 16 + c;
                if r >= 5 || c >= 9 {
                    assert_eq!(got[i].to_bits(), d0[i].to_bits());
                    continue;
                }
                let terms: Vec<f64> = (0..7)
                    .map(|p| a[r * 8 + p] as f64 * b[p * 16 + c] as f64)
                    .collect();
                let want: f64 = times * terms.iter().sum::<f64>();
                let scale: f64 = times * terms.iter().map(|t| t.abs()).sum::<f64>();
                assert!(
                    ((got[i] as f64) - want).abs() <= 1e-6 * scale,
                    "({r}, {c}): {} vs {want}",
                    got[i]
                );
            }
        }
    }
}

#[test]
fn loads_outside_the_region_are_errors_not_panics() {
    let text = "\
tensor A: f32[8, 8];
kernel k(inout a: f32[8, 8], row: i64) @vector {
    tile t: vec f32[4, 8];
    TLOAD(t, a, row, 0);
    TSTORE(a, t, row, 0);
}
workload main() { task k(A[0 +: 8, 0 +: 8], 4); }
";
    let m = module(text);
    // The module's own task loads in range (`check` would refuse row 5 before any run); the
    // executor is then called with row 5 directly.
    pto_wsp_ir::validate(&m).unwrap();
    let s = TensorStore::new(&m, &Bindings::new()).unwrap();
    let mut reg = KernelRegistry::new();
    register_bodies(&m, &mut reg);
    let regions = [io(0, &[0, 0], &[8, 8], Access::InOut)];
    run(&reg, &s, "k", &[4], &regions).unwrap();
    let e = run(&reg, &s, "k", &[5], &regions).unwrap_err();
    assert_eq!(
        e.to_string(),
        "kernel `k`: TLOAD: 4 x 8 at (5, 0) is outside region 0 (8 x 8)"
    );
}

/// The executor fuses `TTRANS; TMATMUL` (into a product with the transposed operand),
/// `TMUL(q, x, x); TROWSUM` (into sums of squares) and `TROWEXPANDSUB; TEXP; TROWSUM` (into one
/// `exp` pass): each fused form, each form kept apart because its temporary tile is used again
/// (`extra`), and each fused form declining at run time (`k` = 9: the left operand's valid part
/// is not contiguous; `lr` = 3: fewer valid sum rows than exp rows) must give the naive result,
/// within 1e-6 of the sum of magnitudes (`exp` within 5e-7 relative).
#[test]
fn fused_instruction_sequences_match_a_naive_reference_in_every_form() {
    for (k, lr, extra) in [(11, 5, false), (11, 5, true), (9, 3, false)] {
        let extra = if extra {
            "    TMOV(tbt, tbt);\n    TMOV(sq, sq);\n"
        } else {
            ""
        };
        let text = format!(
            "\
tensor A: f32[8, 11];
tensor B: f32[8, 11];
tensor S: f32[8, 8];
tensor E: f32[8, 11];
tensor L: f32[8, 1];
tensor Q: f32[8, 1];
kernel k(in a: f32[8, 11], in b: f32[8, 11], inout s: f32[8, 8], inout e: f32[8, 11],
         inout l: f32[8, 1], inout q: f32[8, 1]) @cube {{
    tile ta: left f32[8, 11] valid(5, {k});
    tile tb: vec f32[8, 11] valid(7, {k});
    tile tbt: right f32[11, 8] valid({k}, 7);
    tile c: acc f32[8, 8] valid(5, 7);
    TLOAD(ta, a);
    TLOAD(tb, b);
    TTRANS(tbt, tb);
    TMATMUL(c, ta, tbt);
    TSTORE(s, c);
    tile x: vec f32[8, 11] valid(5, 11);
    tile m: vec f32[8, 1] valid(5, 1);
    tile lt: vec f32[8, 1] valid({lr}, 1);
    TLOAD(x, a);
    TROWMAX(m, x);
    TROWEXPANDSUB(x, x, m);
    TEXP(x, x);
    TROWSUM(lt, x);
    TSTORE(e, x);
    TSTORE(l, lt);
    tile y: vec f32[8, 11] valid(6, 11);
    tile sq: vec f32[8, 11] valid(6, 11);
    tile qt: vec f32[8, 1] valid(6, 1);
    TLOAD(y, b);
    TMUL(sq, y, y);
    TROWSUM(qt, sq);
    TSTORE(q, qt);
{extra}}}
workload main() {{ task k(A[0 +: 8, 0 +: 11], B[0 +: 8, 0 +: 11], S[0 +: 8, 0 +: 8],
                          E[0 +: 8, 0 +: 11], L[0 +: 8, 0 +: 1], Q[0 +: 8, 0 +: 1]); }}
"
        );
        let m = module(&text);
        pto_wsp_ir::validate(&m).unwrap_or_else(|e| panic!("{e:?}\n{text}"));
        let mut st = TensorStore::new(&m, &Bindings::new()).unwrap();
        let mut rng = crate::Rng(k as u64 * 31 + lr as u64);
        let (a, b) = (rng.f32s(88), rng.f32s(88));
        let (s0, e0, l0, q0) = (rng.f32s(64), rng.f32s(88), rng.f32s(8), rng.f32s(8));
        for (name, v) in [
            ("A", &a),
            ("B", &b),
            ("S", &s0),
            ("E", &e0),
            ("L", &l0),
            ("Q", &q0),
        ] {
            st.write(name, v).unwrap();
        }
        let mut reg = KernelRegistry::new();
        register_bodies(&m, &mut reg);
        let regions = [
            io(0, &[0, 0], &[8, 11], Access::In),
            io(1, &[0, 0], &[8, 11], Access::In),
            io(2, &[0, 0], &[8, 8], Access::InOut),
            io(3, &[0, 0], &[8, 11], Access::InOut),
            io(4, &[0, 0], &[8, 1], Access::InOut),
            io(5, &[0, 0], &[8, 1], Access::InOut),
        ];
        run(&reg, &st, "k", &[], &regions).unwrap();
        let close = |got: f32, want: f64, scale: f64, tol: f64, what: &str| {
            assert!(
                (got as f64 - want).abs() <= tol * scale,
                "k {k}, lr {lr}, extra {}: {what}: {got} vs {want}",
                !extra.is_empty()
            );
        };
        let s = st.read::<f32>("S").unwrap();
        for i in 0..8 {
            for j in 0..8 {
                if i >= 5 || j >= 7 {
                    assert_eq!(s[i * 8 + j].to_bits(), s0[i * 8 + j].to_bits());
                    continue;
                }
                let t: Vec<f64> = (0..k)
                    .map(|p| a[i * 11 + p] as f64 * b[j * 11 + p] as f64)
                    .collect();
                let mag = t.iter().map(|x| x.abs()).sum();
                close(
                    s[i * 8 + j],
                    t.iter().sum(),
                    mag,
                    1e-6,
                    &format!("S[{i}][{j}]"),
                );
            }
        }
        let (e, l, q) = (
            st.read::<f32>("E").unwrap(),
            st.read::<f32>("L").unwrap(),
            st.read::<f32>("Q").unwrap(),
        );
        for i in 0..8 {
            let row = &a[i * 11..i * 11 + 11];
            let mx = row.iter().copied().fold(f32::MIN, f32::max);
            let want: Vec<f64> = row.iter().map(|&x| ((x - mx) as f64).exp()).collect();
            for c in 0..11 {
                if i >= 5 {
                    assert_eq!(e[i * 11 + c].to_bits(), e0[i * 11 + c].to_bits());
                } else {
                    close(
                        e[i * 11 + c],
                        want[c],
                        want[c],
                        // Results below the smallest normal f32 are flushed to 0 (documented).
                        if want[c] < f32::MIN_POSITIVE as f64 {
                            1.0
                        } else {
                            5e-7
                        },
                        &format!("E[{i}][{c}]"),
                    );
                }
            }
            if i < lr {
                let sum: f64 = want.iter().sum();
                close(l[i], sum, sum, 1e-6, &format!("L[{i}]"));
            } else {
                assert_eq!(l[i].to_bits(), l0[i].to_bits());
            }
            if i < 6 {
                let sq: f64 = b[i * 11..i * 11 + 11]
                    .iter()
                    .map(|&x| (x as f64).powi(2))
                    .sum();
                close(q[i], sq, sq, 1e-6, &format!("Q[{i}]"));
            } else {
                assert_eq!(q[i].to_bits(), q0[i].to_bits());
            }
        }
    }
}
