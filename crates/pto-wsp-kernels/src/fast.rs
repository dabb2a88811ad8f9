//! The few hot loops worth vectorising by hand: dot products of attention, weighted row sums,
//! `exp` over a slice, max over a slice.
//!
//! Why: the workspace builds for baseline x86-64 (SSE2, no FMA), where these loops run at a
//! quarter of what the machines we run on can do. Each loop is written once, in plain Rust over
//! fixed-width lane arrays that the compiler vectorises, and compiled twice: once for the
//! baseline and once with AVX2 and FMA enabled, chosen at run time by CPU feature detection.
//!
//! Promises: every function gives the same results (up to the rounding difference between a
//! fused and a separate multiply-add) on either path; nothing here reads or writes outside the
//! slices it is given (plain indexing, bounds checked). [`exp`] is accurate to a few units in
//! the last place over the whole `f32` range: `exp(-inf) = 0`, `exp(x) = 0` below about `-87.3`
//! (no subnormal results), `+inf` above about `88.7`, NaN stays NaN.

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

/// Whether the AVX2 + FMA path runs on this CPU.
#[inline]
pub fn has_avx2_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Defines `pub fn $name(args) -> ret` running `$body::<Fused>` compiled with AVX2 and FMA when
/// the CPU has them, else `$body::<Plain>`.
macro_rules! dispatch {
    ($(#[$m:meta])* fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? = $body:ident) => {
        $(#[$m])*
        pub fn $name($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2,fma")]
                fn fast($($arg: $ty),*) $(-> $ret)? {
                    $body::<Fused>($($arg),*)
                }
                if has_avx2_fma() {
                    // SAFETY: the CPU supports AVX2 and FMA (detected just above), the only
                    // requirement of calling a function compiled with those features.
                    return unsafe { fast($($arg),*) };
                }
            }
            $body::<Plain>($($arg),*)
        }
    };
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

#[inline(always)]
fn exp_sum_body<M: Mac>(x: &mut [f32], shift: f32) -> f32 {
    let mut acc = [0f32; 8];
    let mut chunks = x.chunks_exact_mut(8);
    for c in &mut chunks {
        for l in 0..8 {
            let e = exp_with::<M>(c[l] - shift);
            c[l] = e;
            acc[l] += e;
        }
    }
    let mut sum = 0.0;
    for v in chunks.into_remainder() {
        *v = exp_with::<M>(*v - shift);
        sum += *v;
    }
    sum + acc.iter().sum::<f32>()
}

dispatch! {
    /// Replaces every `x[i]` by `exp(x[i] - shift)` and returns their sum (summed in eight lanes,
    /// then across lanes).
    fn exp_sum(x: &mut [f32], shift: f32) -> f32 = exp_sum_body
}

#[inline(always)]
fn max_body<M: Mac>(x: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; 8];
    let mut chunks = x.chunks_exact(8);
    for c in &mut chunks {
        for l in 0..8 {
            acc[l] = acc[l].max(c[l]);
        }
    }
    let mut m = f32::NEG_INFINITY;
    for &v in chunks.remainder() {
        m = m.max(v);
    }
    acc.iter().fold(m, |a, &b| a.max(b))
}

dispatch! {
    /// The largest element, ignoring NaNs (`f32::max`); `-inf` for an empty slice.
    fn max(x: &[f32]) -> f32 = max_body
}

#[inline(always)]
fn dot_body<M: Mac>(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0f32; 32];
    let main = n / 32 * 32;
    for c in (0..main).step_by(32) {
        let (x, y) = (&a[c..c + 32], &b[c..c + 32]);
        for l in 0..32 {
            acc[l] = M::mac(x[l], y[l], acc[l]);
        }
    }
    let mut tail = 0.0;
    for c in main..n {
        tail = M::mac(a[c], b[c], tail);
    }
    reduce(&acc) + tail
}

dispatch! {
    /// `Σ a[i] b[i]` over the common length, in 32 lanes.
    fn dot(a: &[f32], b: &[f32]) -> f32 = dot_body
}

#[inline(always)]
fn reduce<const N: usize>(acc: &[f32; N]) -> f32 {
    // Pairwise over the lanes.
    let mut v = *acc;
    let mut w = N;
    while w > 1 {
        w /= 2;
        for l in 0..w {
            v[l] += v[l + w];
        }
    }
    v[0]
}

// ---------------------------------------------------------------------------------------------
// Attention tiles

/// `out[g * out_stride + j] = Σ_c q[g * d + c] · rows[j][c]` for `g < G`, `j < KB`.
#[inline(always)]
fn qk_tile<M: Mac, const G: usize, const KB: usize>(
    q: &[f32],
    d: usize,
    rows: &[&[f32]],
    out: &mut [f32],
    out_stride: usize,
) {
    let mut acc = [[[0f32; 16]; KB]; G];
    let main = d / 16 * 16;
    let rows: &[&[f32]; KB] = rows.try_into().expect("KB rows");
    for c in (0..main).step_by(16) {
        let mut kv = [[0f32; 16]; KB];
        for (kb, row) in rows.iter().enumerate() {
            kv[kb].copy_from_slice(&row[c..c + 16]);
        }
        for (g, acc_g) in acc.iter_mut().enumerate() {
            let qv = &q[g * d + c..g * d + c + 16];
            for (kb, acc_gk) in acc_g.iter_mut().enumerate() {
                for l in 0..16 {
                    acc_gk[l] = M::mac(qv[l], kv[kb][l], acc_gk[l]);
                }
            }
        }
    }
    for (g, acc_g) in acc.iter().enumerate() {
        for (kb, row) in rows.iter().enumerate() {
            let mut s = reduce(&acc_g[kb]);
            for c in main..d {
                s = M::mac(q[g * d + c], row[c], s);
            }
            out[g * out_stride + kb] = s;
        }
    }
}

/// [`qk_tile`] over any number of rows, `KB` at a time, then one at a time.
#[inline(always)]
fn qk_group<M: Mac, const G: usize, const KB: usize>(
    q: &[f32],
    d: usize,
    rows: &[&[f32]],
    out: &mut [f32],
    out_stride: usize,
) {
    let main = rows.len() / KB * KB;
    for j in (0..main).step_by(KB) {
        qk_tile::<M, G, KB>(q, d, &rows[j..j + KB], &mut out[j..], out_stride);
    }
    for j in main..rows.len() {
        qk_tile::<M, G, 1>(q, d, &rows[j..j + 1], &mut out[j..], out_stride);
    }
}

#[inline(always)]
fn qk_body<M: Mac>(q: &[f32], d: usize, rows: &[&[f32]], out: &mut [f32], out_stride: usize) {
    let g = q.len().checked_div(d).unwrap_or(0);
    let mut g0 = 0;
    while g0 < g {
        let qg = &q[g0 * d..];
        let og = &mut out[g0 * out_stride..];
        match g - g0 {
            1 => qk_group::<M, 1, 4>(qg, d, rows, og, out_stride),
            2 => qk_group::<M, 2, 2>(qg, d, rows, og, out_stride),
            3 => qk_group::<M, 3, 1>(qg, d, rows, og, out_stride),
            _ => qk_group::<M, 4, 1>(qg, d, rows, og, out_stride),
        }
        g0 += 4;
    }
}

dispatch! {
    /// Scores of `q.len() / d` queries (rows of `q`, `d` wide) against key rows `rows` (each at
    /// least `d` long): `out[g * out_stride + j] = Σ_c q[g·d + c] · rows[j][c]`. Panics if
    /// `out` is too short.
    fn qk(q: &[f32], d: usize, rows: &[&[f32]], out: &mut [f32], out_stride: usize) = qk_body
}

/// `acc[g·d + c] += Σ_j p[g·p_stride + j] · rows[j][c]` for `g < G`, all `c < d`, with
/// `NV × 8` columns at a time held in lanes.
#[inline(always)]
fn pv_group<M: Mac, const G: usize, const NV: usize>(
    p: &[f32],
    p_stride: usize,
    rows: &[&[f32]],
    acc: &mut [f32],
    d: usize,
) {
    let w = NV * 8;
    let main = d / w * w;
    for c in (0..main).step_by(w) {
        let mut a = [[[0f32; 8]; NV]; G];
        for (g, a_g) in a.iter_mut().enumerate() {
            for (v, lanes) in a_g.iter_mut().enumerate() {
                let at = g * d + c + v * 8;
                lanes.copy_from_slice(&acc[at..at + 8]);
            }
        }
        for (j, row) in rows.iter().enumerate() {
            let vv = &row[c..c + w];
            for (g, a_g) in a.iter_mut().enumerate() {
                let pj = p[g * p_stride + j];
                for (v, lanes) in a_g.iter_mut().enumerate() {
                    for l in 0..8 {
                        lanes[l] = M::mac(pj, vv[v * 8 + l], lanes[l]);
                    }
                }
            }
        }
        for (g, a_g) in a.iter().enumerate() {
            for (v, lanes) in a_g.iter().enumerate() {
                let at = g * d + c + v * 8;
                acc[at..at + 8].copy_from_slice(lanes);
            }
        }
    }
    for g in 0..G {
        for c in main..d {
            let mut s = acc[g * d + c];
            for (j, row) in rows.iter().enumerate() {
                s = M::mac(p[g * p_stride + j], row[c], s);
            }
            acc[g * d + c] = s;
        }
    }
}

#[inline(always)]
fn pv_body<M: Mac>(p: &[f32], p_stride: usize, rows: &[&[f32]], acc: &mut [f32], d: usize) {
    let g = acc.len().checked_div(d).unwrap_or(0);
    let mut g0 = 0;
    while g0 < g {
        let pg = &p[g0 * p_stride..];
        let ag = &mut acc[g0 * d..];
        match g - g0 {
            1 => pv_group::<M, 1, 8>(pg, p_stride, rows, ag, d),
            2 => pv_group::<M, 2, 4>(pg, p_stride, rows, ag, d),
            3 => pv_group::<M, 3, 2>(pg, p_stride, rows, ag, d),
            _ => pv_group::<M, 4, 2>(pg, p_stride, rows, ag, d),
        }
        g0 += 4;
    }
}

dispatch! {
    /// Weighted sums of value rows for `acc.len() / d` queries: `acc[g·d + c] += Σ_j
    /// p[g·p_stride + j] · rows[j][c]` (each row at least `d` long). Panics if `p` is too short.
    fn pv(p: &[f32], p_stride: usize, rows: &[&[f32]], acc: &mut [f32], d: usize) = pv_body
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

    #[test]
    fn both_paths_agree() {
        let x = data(203, 5);
        let y = data(203, 9);
        let close = |a: f32, b: f32| (a - b).abs() <= 1e-5 * (1.0 + a.abs());
        assert!(close(dot(&x, &y), dot_body::<Plain>(&x, &y)));
        assert_eq!(max(&x), max_body::<Plain>(&x));
        let (mut e1, mut e2) = (x.clone(), x.clone());
        let s1 = exp_sum(&mut e1, 0.5);
        let s2 = exp_sum_body::<Plain>(&mut e2, 0.5);
        assert!(close(s1, s2));
        for (a, b) in e1.iter().zip(&e2) {
            assert!(close(*a, *b));
        }
    }

    #[test]
    fn qk_and_pv_match_loops() {
        for (g, d, n) in [
            (1, 128, 37),
            (2, 19, 5),
            (3, 64, 9),
            (4, 33, 3),
            (6, 16, 2),
            (5, 7, 8),
        ] {
            let q = data(g * d, 1);
            let k = data(n * d, 2);
            let rows: Vec<&[f32]> = k.chunks(d).collect();
            let mut out = vec![0.0; g * (n + 1)];
            qk(&q, d, &rows, &mut out, n + 1);
            for gi in 0..g {
                for j in 0..n {
                    let want: f32 = (0..d).map(|c| q[gi * d + c] * k[j * d + c]).sum();
                    let got = out[gi * (n + 1) + j];
                    assert!((got - want).abs() < 1e-4, "{g} {d} {n}: {got} vs {want}");
                }
            }
            let p = data(g * n, 3);
            let mut acc = data(g * d, 4);
            let before = acc.clone();
            pv(&p, n, &rows, &mut acc, d);
            for gi in 0..g {
                for c in 0..d {
                    let want = before[gi * d + c]
                        + (0..n).map(|j| p[gi * n + j] * k[j * d + c]).sum::<f32>();
                    let got = acc[gi * d + c];
                    assert!((got - want).abs() < 1e-4, "{g} {d} {n}: {got} vs {want}");
                }
            }
        }
    }
}
