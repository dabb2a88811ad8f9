//! The few hot loops worth vectorising by hand: the scores and weighted value sums of
//! attention, `exp` over a slice, max and dot products.
//!
//! Why: the workspace builds for baseline x86-64 (SSE2, no FMA), where these loops run at a
//! fraction of what the machines we run on can do, and the compiler does not vectorise the
//! register-blocked forms on its own. On x86-64 CPUs with AVX2, FMA and F16C (checked once per
//! call, cheaply) they run as explicit intrinsics (module `avx2`); elsewhere as plain loops.
//! Key and value rows are read in their storage type (`f32`, `f16`, `bf16`) and converted in
//! registers, with no conversion pass through memory.
//!
//! Promises: both paths compute the same formulas (they may differ in the last bits: fused
//! against separate multiply-adds, and summation order); nothing here reads or writes outside
//! the slices it is given (lengths are checked up front). [`exp`] is accurate to a few units in
//! the last place over the whole `f32` range: `exp(-inf) = 0`, `exp(x) = 0` below about
//! `-87.3` (no subnormal results), `+inf` above about `88.7`, NaN stays NaN.

use crate::tile::{Float, Scratch};
use std::cell::Cell;

#[cfg(target_arch = "x86_64")]
mod avx2;

/// Multiply-add, fused on the AVX2 path and separate (two roundings) on the baseline one, where
/// a fused one would be a slow library call.
trait Mac {
    fn mac(a: f32, b: f32, c: f32) -> f32;
}

struct Fused;
struct Plain;

impl Mac for Fused {
    #[inline(always)]
    fn mac(a: f32, b: f32, c: f32) -> f32 {
        a.mul_add(b, c)
    }
}

impl Mac for Plain {
    #[inline(always)]
    fn mac(a: f32, b: f32, c: f32) -> f32 {
        a * b + c
    }
}

/// Whether the AVX2 + FMA + F16C path runs on this CPU.
#[inline]
pub fn has_simd() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
            && std::arch::is_x86_feature_detected!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

// ---------------------------------------------------------------------------------------------
// exp

const LOG2E: f32 = std::f32::consts::LOG2_E;
/// ln 2 split in two so that `n * LN2_HI` is exact for the `n` that occur.
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
/// 1.5 × 2^23: adding it rounds an `f32` of magnitude below 2^22 to an integer (ties to even),
/// which then sits in the low mantissa bits.
const ROUND: f32 = 12_582_912.0;
/// Below this, `exp` is 0 (the result would be subnormal).
const EXP_LO: f32 = -87.336_55;
/// Above this, `exp` overflows.
const EXP_HI: f32 = 88.722_83;

/// `exp(x)` by range reduction to `|r| <= ln2 / 2` and a degree-6 polynomial (the classic
/// Cephes `expf` coefficients), branch-free so that loops of it vectorise.
#[inline(always)]
fn exp_with<M: Mac>(x: f32) -> f32 {
    let xc = x.clamp(EXP_LO, EXP_HI);
    let t = M::mac(xc, LOG2E, ROUND);
    let n = t - ROUND;
    let ni = (t.to_bits() as i32).wrapping_sub(ROUND.to_bits() as i32);
    let r = M::mac(n, -LN2_LO, M::mac(n, -LN2_HI, xc));
    let mut p = 1.987_569_1e-4;
    p = M::mac(p, r, 1.398_199_9e-3);
    p = M::mac(p, r, 8.333_452e-3);
    p = M::mac(p, r, 4.166_579_6e-2);
    p = M::mac(p, r, 1.666_666_5e-1);
    p = M::mac(p, r, 0.5); // Cephes: 5.0000001201e-1, which is 0.5 in f32
    let y = M::mac(p * r, r, r) + 1.0;
    // 2^n as two factors, so that n = 128 (x near EXP_HI) does not overflow the exponent.
    let half = ni >> 1;
    let s1 = f32::from_bits(((half + 127) << 23) as u32);
    let s2 = f32::from_bits(((ni - half + 127) << 23) as u32);
    let v = y * s1 * s2;
    let v = if x < EXP_LO { 0.0 } else { v };
    let v = if x > EXP_HI { f32::INFINITY } else { v };
    if x.is_nan() { x } else { v }
}

/// `e^x` computed as the vectorised loops here compute it (see the module docs for accuracy).
pub fn exp(x: f32) -> f32 {
    exp_with::<Plain>(x)
}

/// Runs `$fast` (an `avx2` function) when [`has_simd`], else `$plain`.
macro_rules! simd_or {
    ($fast:expr, $plain:expr) => {{
        #[cfg(target_arch = "x86_64")]
        if has_simd() {
            // SAFETY: the CPU has AVX2, FMA and F16C (checked just now), the only requirement
            // of calling the `avx2` functions, which check their slices themselves.
            return unsafe { $fast };
        }
        $plain
    }};
}

thread_local! {
    /// Whether this thread's `exp` is the standard library's (inside [`with_std_exp`]).
    static STD_EXP: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with every `exp` this thread's kernels compute ([`exp_sum`]: softmax, attention,
/// `TEXP`) taken from the standard library's `f32::exp` instead of the fast one: the accurate
/// baseline the fast `exp` is measured against (speed and accuracy side by side in
/// `docs/KERNELS.md`, "Accuracy"). Thread-local and scoped: other threads, and this one after
/// `f` returns (or unwinds), keep the fast `exp`.
pub fn with_std_exp<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            STD_EXP.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(STD_EXP.with(|c| c.replace(true)));
    f()
}

/// Replaces every `x[i]` by `exp(x[i] - shift)` and returns their sum.
pub fn exp_sum(x: &mut [f32], shift: f32) -> f32 {
    if STD_EXP.with(Cell::get) {
        return exp_sum_std(x, shift);
    }
    simd_or!(avx2::exp_sum(x, shift), exp_sum_plain(x, shift))
}

fn exp_sum_std(x: &mut [f32], shift: f32) -> f32 {
    let mut sum = 0.0;
    for v in x {
        *v = (*v - shift).exp();
        sum += *v;
    }
    sum
}

fn exp_sum_plain(x: &mut [f32], shift: f32) -> f32 {
    let mut sum = 0.0;
    for v in x {
        *v = exp_with::<Plain>(*v - shift);
        sum += *v;
    }
    sum
}

/// The largest element, ignoring NaNs (`f32::max`); `-inf` for an empty slice.
pub fn max(x: &[f32]) -> f32 {
    simd_or!(avx2::max(x), max_plain(x))
}

fn max_plain(x: &[f32]) -> f32 {
    x.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b))
}

/// `Σ a[i] b[i]` over the common length.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    simd_or!(avx2::dot(a, b), dot_plain(a, b))
}

fn dot_plain(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    let n = ra.len().min(rb.len());
    let tail: f32 = ra[..n].iter().zip(&rb[..n]).map(|(x, y)| x * y).sum();
    acc.iter().sum::<f32>() + tail
}

/// Attention scores of `q.len() / d` queries (rows of `q`, each `d` wide, in `f32`) against key
/// rows `rows` (each at least `d` long, in their storage type):
/// `out[g * out_stride + j] = Σ_c q[g·d + c] · rows[j][c]`. Panics if a row is shorter than `d`
/// or `out` is too short.
pub fn qk<T: Float>(q: &[f32], d: usize, rows: &[&[T]], out: &mut [f32], out_stride: usize) {
    simd_or!(
        avx2::qk(q, d, rows, out, out_stride),
        qk_plain(q, d, rows, out, out_stride)
    )
}

fn qk_plain<T: Float>(q: &[f32], d: usize, rows: &[&[T]], out: &mut [f32], out_stride: usize) {
    let g = q.len().checked_div(d).unwrap_or(0);
    let mut buf = Scratch::take();
    let kf = buf.slice(d);
    for (j, row) in rows.iter().enumerate() {
        T::load(&row[..d], kf);
        for gi in 0..g {
            out[gi * out_stride + j] = dot_plain(&q[gi * d..(gi + 1) * d], kf);
        }
    }
}

/// Weighted sums of value rows for `acc.len() / d` queries: `acc[g·d + c] += Σ_j
/// p[g·p_stride + j] · rows[j][c]` (each row at least `d` long, in its storage type). Panics if
/// a row is shorter than `d` or `p` is too short.
pub fn pv<T: Float>(p: &[f32], p_stride: usize, rows: &[&[T]], acc: &mut [f32], d: usize) {
    simd_or!(
        avx2::pv(p, p_stride, rows, acc, d),
        pv_plain(p, p_stride, rows, acc, d)
    )
}

fn pv_plain<T: Float>(p: &[f32], p_stride: usize, rows: &[&[T]], acc: &mut [f32], d: usize) {
    let g = acc.len().checked_div(d).unwrap_or(0);
    let mut buf = Scratch::take();
    let vf = buf.slice(d);
    for (j, row) in rows.iter().enumerate() {
        T::load(&row[..d], vf);
        for gi in 0..g {
            let w = p[gi * p_stride + j];
            for (a, &v) in acc[gi * d..(gi + 1) * d].iter_mut().zip(vf.iter()) {
                *a += w * v;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| ((i as u32).wrapping_mul(2_654_435_761) ^ seed) % 2001)
            .map(|v| v as f32 / 1000.0 - 1.0)
            .collect()
    }

    #[test]
    fn exp_is_accurate_over_the_range() {
        let mut worst = 0.0f64;
        let mut x = -87.0f32;
        while x < 88.0 {
            let got = exp(x) as f64;
            let want = (x as f64).exp();
            worst = worst.max(((got - want) / want).abs());
            x += 0.0137;
        }
        assert!(
            worst < 4.0 * f32::EPSILON as f64,
            "worst relative error {worst}"
        );
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp(-100.0), 0.0);
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp(100.0), f32::INFINITY);
        assert!(exp(f32::NAN).is_nan());
        assert!(exp(88.7).is_finite());
    }

    /// The accuracy `docs/KERNELS.md` states: over 10M evenly spaced arguments in the range
    /// softmax and attention use (`x - max`, from the flush-to-zero bound up to 0), `exp` and
    /// the SIMD `exp_sum` are within 2e-7 relative of `f64`'s `exp` of the same `f32`
    /// argument (measured: 8.4e-8 on both paths).
    #[test]
    fn exp_is_within_2e7_relative_over_the_softmax_range() {
        const N: usize = 10_000_000;
        let (lo, hi) = (f64::from(EXP_LO), 0.0f64);
        let mut x: Vec<f32> = (0..N)
            .map(|i| (lo + (hi - lo) * (i as f64 + 0.5) / N as f64) as f32)
            .collect();
        let rel = |got: f32, arg: f32| {
            let want = f64::from(arg).exp();
            ((f64::from(got) - want) / want).abs()
        };
        let plain = x.iter().map(|&a| rel(exp(a), a)).fold(0.0, f64::max);
        let args = x.clone();
        exp_sum(&mut x, 0.0);
        let simd = x
            .iter()
            .zip(&args)
            .map(|(&g, &a)| rel(g, a))
            .fold(0.0, f64::max);
        assert!(
            plain <= 2e-7 && simd <= 2e-7,
            "plain {plain:e}, simd {simd:e}"
        );
    }

    #[test]
    fn with_std_exp_is_the_standard_exp_in_its_scope_only() {
        let x = data(203, 3);
        let mut inside = x.clone();
        let sum = with_std_exp(|| {
            assert!(STD_EXP.with(Cell::get));
            exp_sum(&mut inside, 0.25)
        });
        let mut want = 0.0f32;
        for (got, &v) in inside.iter().zip(&x) {
            let e = (v - 0.25).exp();
            assert_eq!(got.to_bits(), e.to_bits());
            want += e;
        }
        assert_eq!(sum.to_bits(), want.to_bits());
        assert!(!STD_EXP.with(Cell::get), "restored after the scope");
        let unwound = std::panic::catch_unwind(|| with_std_exp(|| panic!("inside")));
        assert!(unwound.is_err());
        assert!(!STD_EXP.with(Cell::get), "restored after a panic");
    }

    #[test]
    fn both_paths_agree() {
        let x = data(203, 5);
        let y = data(203, 9);
        let close = |a: f32, b: f32| (a - b).abs() <= 1e-5 * (1.0 + a.abs());
        assert!(close(dot(&x, &y), dot_plain(&x, &y)));
        assert_eq!(max(&x), max_plain(&x));
        let mut with_nan = x.clone();
        with_nan[17] = f32::NAN;
        assert_eq!(max(&with_nan), max_plain(&with_nan));
        let (mut e1, mut e2) = (x.clone(), x.clone());
        let s1 = exp_sum(&mut e1, 0.5);
        let s2 = exp_sum_plain(&mut e2, 0.5);
        assert!(close(s1, s2));
        for (a, b) in e1.iter().zip(&e2) {
            assert!(close(*a, *b));
        }
    }

    fn check_qk_pv<T: Float>(g: usize, d: usize, n: usize) {
        let q = data(g * d, 1);
        let k: Vec<T> = data(n * d, 2).into_iter().map(T::from_f32).collect();
        let rows: Vec<&[T]> = k.chunks(d).collect();
        let stride = n + 1;
        let (mut out, mut want) = (vec![0.0; g * stride], vec![0.0; g * stride]);
        qk(&q, d, &rows, &mut out, stride);
        qk_plain(&q, d, &rows, &mut want, stride);
        for gi in 0..g {
            for j in 0..n {
                let exact: f64 = (0..d)
                    .map(|c| q[gi * d + c] as f64 * k[j * d + c].to_f32() as f64)
                    .sum();
                for got in [out[gi * stride + j], want[gi * stride + j]] {
                    assert!(
                        (got as f64 - exact).abs() < 1e-4,
                        "qk {g} {d} {n}: {got} vs {exact}"
                    );
                }
            }
        }
        let p = data(g * n, 3);
        let mut acc = data(g * d, 4);
        let mut acc_plain = acc.clone();
        let before = acc.clone();
        pv(&p, n, &rows, &mut acc, d);
        pv_plain(&p, n, &rows, &mut acc_plain, d);
        for gi in 0..g {
            for c in 0..d {
                let exact = before[gi * d + c] as f64
                    + (0..n)
                        .map(|j| p[gi * n + j] as f64 * k[j * d + c].to_f32() as f64)
                        .sum::<f64>();
                for got in [acc[gi * d + c], acc_plain[gi * d + c]] {
                    assert!(
                        (got as f64 - exact).abs() < 1e-4,
                        "pv {g} {d} {n}: {got} vs {exact}"
                    );
                }
            }
        }
    }

    #[test]
    fn qk_and_pv_match_exact_sums_on_every_type_and_shape() {
        let shapes = [
            (1, 128, 37),
            (2, 19, 5),
            (3, 64, 9),
            (4, 33, 3),
            (6, 16, 2),
            (5, 7, 8),
            (9, 72, 17),
            (1, 3, 1),
        ];
        for (g, d, n) in shapes {
            check_qk_pv::<f32>(g, d, n);
            check_qk_pv::<half::f16>(g, d, n);
            check_qk_pv::<half::bf16>(g, d, n);
        }
    }
}
