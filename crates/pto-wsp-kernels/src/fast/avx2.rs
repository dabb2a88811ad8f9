//! The AVX2 + FMA + F16C versions of the hot loops, with explicit intrinsics.
//!
//! Every public function here is `#[target_feature]`, so calling it is `unsafe` outside code
//! compiled with those features: the caller must have checked [`super::has_simd`]. Each one
//! checks its slices' lengths up front (panicking, like indexing, on a caller's bug) and then
//! reads and writes through pointers only inside the ranges those checks cover.

use super::{EXP_HI, EXP_LO, LN2_HI, LN2_LO, LOG2E, ROUND};
use crate::tile::Float;
use std::arch::x86_64::*;

/// Loads 8 elements at `p` as `f32`.
///
/// # Safety
///
/// `p .. p + 8` must be readable `T`s, and the CPU must have AVX2 and F16C.
#[inline(always)]
unsafe fn load8<T: Float>(p: *const T) -> __m256 {
    // SAFETY: the caller's contract; each arm reinterprets `p` as the type `T::DTYPE` says `T`
    // is (the three `Float` impls, one per dtype), reading 8 elements: 32 bytes for f32, 16
    // for the 16-bit types.
    unsafe {
        match T::DTYPE {
            pto_wsp_ir::DType::F16 => _mm256_cvtph_ps(_mm_loadu_si128(p.cast())),
            pto_wsp_ir::DType::Bf16 => _mm256_castsi256_ps(_mm256_slli_epi32(
                _mm256_cvtepu16_epi32(_mm_loadu_si128(p.cast())),
                16,
            )),
            _ => _mm256_loadu_ps(p.cast()),
        }
    }
}

/// Sum of the 8 lanes.
#[inline(always)]
fn hsum(v: __m256) -> f32 {
    // SAFETY: register-only intrinsics; this is only inlined into functions compiled with
    // AVX2 (every caller below is `#[target_feature(enable = "avx2,...")]`).
    unsafe {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
        _mm_cvtss_f32(s)
    }
}

/// Largest of the 8 lanes (NaN-free input).
#[inline(always)]
fn hmax(v: __m256) -> f32 {
    // SAFETY: as in `hsum`.
    unsafe {
        let s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        let s = _mm_max_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_max_ss(s, _mm_shuffle_ps(s, s, 1));
        _mm_cvtss_f32(s)
    }
}

/// `exp` of 8 lanes: the algorithm of `super::exp_with`, step for step.
#[inline(always)]
fn exp8(x: __m256) -> __m256 {
    // SAFETY: register-only intrinsics, inlined only into AVX2 + FMA functions.
    unsafe {
        let set = _mm256_set1_ps;
        let xc = _mm256_min_ps(_mm256_max_ps(x, set(EXP_LO)), set(EXP_HI));
        let t = _mm256_fmadd_ps(xc, set(LOG2E), set(ROUND));
        let n = _mm256_sub_ps(t, set(ROUND));
        let ni = _mm256_sub_epi32(
            _mm256_castps_si256(t),
            _mm256_set1_epi32(ROUND.to_bits() as i32),
        );
        let r = _mm256_fmadd_ps(n, set(-LN2_LO), _mm256_fmadd_ps(n, set(-LN2_HI), xc));
        let mut p = set(1.987_569_1e-4);
        p = _mm256_fmadd_ps(p, r, set(1.398_199_9e-3));
        p = _mm256_fmadd_ps(p, r, set(8.333_452e-3));
        p = _mm256_fmadd_ps(p, r, set(4.166_579_6e-2));
        p = _mm256_fmadd_ps(p, r, set(1.666_666_5e-1));
        p = _mm256_fmadd_ps(p, r, set(0.5));
        let y = _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(p, r), r, r), set(1.0));
        let half = _mm256_srai_epi32(ni, 1);
        let bias = _mm256_set1_epi32(127);
        let s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, bias), 23));
        let s2 = _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_add_epi32(_mm256_sub_epi32(ni, half), bias),
            23,
        ));
        let v = _mm256_mul_ps(_mm256_mul_ps(y, s1), s2);
        let v = _mm256_blendv_ps(v, set(0.0), _mm256_cmp_ps(x, set(EXP_LO), _CMP_LT_OQ));
        let v = _mm256_blendv_ps(
            v,
            set(f32::INFINITY),
            _mm256_cmp_ps(x, set(EXP_HI), _CMP_GT_OQ),
        );
        _mm256_blendv_ps(v, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q))
    }
}

/// See [`super::exp_sum`].
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn exp_sum(x: &mut [f32], shift: f32) -> f32 {
    let n = x.len();
    let main = n / 8 * 8;
    let p = x.as_mut_ptr();
    let mut acc = _mm256_setzero_ps();
    let sh = _mm256_set1_ps(shift);
    let mut c = 0;
    while c < main {
        // SAFETY: c + 8 <= main <= n: in bounds of `x`, which we borrow mutably.
        unsafe {
            let v = exp8(_mm256_sub_ps(_mm256_loadu_ps(p.add(c)), sh));
            _mm256_storeu_ps(p.add(c), v);
            acc = _mm256_add_ps(acc, v);
        }
        c += 8;
    }
    let mut tail = 0.0;
    for v in &mut x[main..] {
        *v = super::exp_with::<super::Fused>(*v - shift);
        tail += *v;
    }
    hsum(acc) + tail
}

/// See [`super::max`].
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn max(x: &[f32]) -> f32 {
    let main = x.len() / 8 * 8;
    let mut acc = _mm256_set1_ps(f32::NEG_INFINITY);
    let mut c = 0;
    while c < main {
        // SAFETY: c + 8 <= main <= x.len().
        let v = unsafe { _mm256_loadu_ps(x.as_ptr().add(c)) };
        // `max_ps(v, acc)` returns `acc` where `v` is NaN: NaNs are ignored.
        acc = _mm256_max_ps(v, acc);
        c += 8;
    }
    x[main..].iter().fold(hmax(acc), |a, &b| a.max(b))
}

/// See [`super::dot`].
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut c = 0;
    while c + 32 <= n {
        for (l, v) in acc.iter_mut().enumerate() {
            // SAFETY: c + 8l + 8 <= c + 32 <= n, within both slices.
            unsafe {
                *v = _mm256_fmadd_ps(
                    _mm256_loadu_ps(pa.add(c + 8 * l)),
                    _mm256_loadu_ps(pb.add(c + 8 * l)),
                    *v,
                );
            }
        }
        c += 32;
    }
    while c + 8 <= n {
        // SAFETY: c + 8 <= n.
        unsafe {
            acc[0] = _mm256_fmadd_ps(
                _mm256_loadu_ps(pa.add(c)),
                _mm256_loadu_ps(pb.add(c)),
                acc[0],
            );
        }
        c += 8;
    }
    let s = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    let mut tail = 0.0;
    for i in c..n {
        tail = a[i].mul_add(b[i], tail);
    }
    hsum(s) + tail
}

/// Scores of `G` queries (rows of `q`, `d` apart) against `KB` key rows:
/// `out[g * out_stride + kb] = Σ_c q[g·d + c] · rows[kb][c]`.
///
/// # Safety
///
/// `q` readable for `G·d` elements, each `rows[kb]` for `d`, `out` writable at
/// `g·out_stride + kb` for `g < G`, `kb < KB`; the CPU has AVX2, FMA and F16C.
#[inline(always)]
unsafe fn qk_tile<T: Float, const G: usize, const KB: usize>(
    q: *const f32,
    d: usize,
    rows: [*const T; KB],
    out: *mut f32,
    out_stride: usize,
) {
    // SAFETY: every access below is within the ranges of the contract: `c + 8 <= main <= d`
    // for vector loads, `c < d` for the tail.
    unsafe {
        let mut acc = [[_mm256_setzero_ps(); KB]; G];
        let main = d / 8 * 8;
        let mut c = 0;
        while c < main {
            if G == 1 {
                let qv = _mm256_loadu_ps(q.add(c));
                for kb in 0..KB {
                    acc[0][kb] = _mm256_fmadd_ps(qv, load8(rows[kb].add(c)), acc[0][kb]);
                }
            } else {
                let mut kv = [_mm256_setzero_ps(); KB];
                for kb in 0..KB {
                    kv[kb] = load8(rows[kb].add(c));
                }
                for (g, acc_g) in acc.iter_mut().enumerate() {
                    let qv = _mm256_loadu_ps(q.add(g * d + c));
                    for kb in 0..KB {
                        acc_g[kb] = _mm256_fmadd_ps(qv, kv[kb], acc_g[kb]);
                    }
                }
            }
            c += 8;
        }
        for (g, acc_g) in acc.iter().enumerate() {
            for kb in 0..KB {
                let mut s = hsum(acc_g[kb]);
                for c in main..d {
                    s = (*q.add(g * d + c)).mul_add((*rows[kb].add(c)).to_f32(), s);
                }
                *out.add(g * out_stride + kb) = s;
            }
        }
    }
}

/// [`qk_tile`] over all rows for `G` queries: `KB` rows at a time, then one at a time.
///
/// # Safety
///
/// As [`qk_tile`] for every row of `rows` (each at least `d` long) and `out` writable at
/// `g·out_stride + j` for `g < G`, `j < rows.len()`.
#[inline(always)]
unsafe fn qk_group<T: Float, const G: usize, const KB: usize>(
    q: *const f32,
    d: usize,
    rows: &[&[T]],
    out: *mut f32,
    out_stride: usize,
) {
    let main = rows.len() / KB * KB;
    let mut j = 0;
    while j < main {
        let ptrs: [*const T; KB] = std::array::from_fn(|kb| rows[j + kb].as_ptr());
        // SAFETY: rows j .. j + KB exist and are `d` long; `out + j` keeps the contract.
        unsafe { qk_tile::<T, G, KB>(q, d, ptrs, out.add(j), out_stride) };
        j += KB;
    }
    while j < rows.len() {
        // SAFETY: as above, one row.
        unsafe { qk_tile::<T, G, 1>(q, d, [rows[j].as_ptr()], out.add(j), out_stride) };
        j += 1;
    }
}

/// See [`super::qk`].
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn qk<T: Float>(q: &[f32], d: usize, rows: &[&[T]], out: &mut [f32], out_stride: usize) {
    let g = q.len().checked_div(d).unwrap_or(0);
    if g == 0 || rows.is_empty() {
        return;
    }
    assert!(
        rows.iter().all(|r| r.len() >= d),
        "qk: a key row is shorter than d"
    );
    assert!(
        out_stride >= rows.len() && out.len() >= (g - 1) * out_stride + rows.len(),
        "qk: out is too short"
    );
    let mut g0 = 0;
    while g0 < g {
        // SAFETY: queries g0 .. g0 + G are within `q` (G <= g - g0), rows are `d` long and
        // `out` holds `g·out_stride` ≥ every index written (both asserted above).
        unsafe {
            let (qg, og) = (
                q.as_ptr().add(g0 * d),
                out.as_mut_ptr().add(g0 * out_stride),
            );
            match g - g0 {
                1 => qk_group::<T, 1, 8>(qg, d, rows, og, out_stride),
                2 => qk_group::<T, 2, 4>(qg, d, rows, og, out_stride),
                3 => qk_group::<T, 3, 2>(qg, d, rows, og, out_stride),
                _ => qk_group::<T, 4, 2>(qg, d, rows, og, out_stride),
            }
        }
        g0 += 4;
    }
}

/// `acc[g·d + c] += Σ_j p[g·p_stride + j] · rows[j][c]` for `g < G` and the columns `c0 ..
/// c0 + 8·NV`.
///
/// # Safety
///
/// `acc` readable and writable for `G·d` elements, `p` readable at `g·p_stride + j`, each row
/// readable for `c0 + 8·NV <= d` elements; AVX2, FMA and F16C.
#[inline(always)]
unsafe fn pv_cols<T: Float, const G: usize, const NV: usize>(
    p: *const f32,
    p_stride: usize,
    rows: &[&[T]],
    acc: *mut f32,
    d: usize,
    c0: usize,
) {
    // SAFETY: all offsets are within the contract's ranges.
    unsafe {
        let mut a = [[_mm256_setzero_ps(); NV]; G];
        for (g, a_g) in a.iter_mut().enumerate() {
            for (v, lanes) in a_g.iter_mut().enumerate() {
                *lanes = _mm256_loadu_ps(acc.add(g * d + c0 + 8 * v));
            }
        }
        for (j, row) in rows.iter().enumerate() {
            let mut vv = [_mm256_setzero_ps(); NV];
            for (v, x) in vv.iter_mut().enumerate() {
                *x = load8(row.as_ptr().add(c0 + 8 * v));
            }
            for (g, a_g) in a.iter_mut().enumerate() {
                let pj = _mm256_broadcast_ss(&*p.add(g * p_stride + j));
                for v in 0..NV {
                    a_g[v] = _mm256_fmadd_ps(pj, vv[v], a_g[v]);
                }
            }
        }
        for (g, a_g) in a.iter().enumerate() {
            for (v, lanes) in a_g.iter().enumerate() {
                _mm256_storeu_ps(acc.add(g * d + c0 + 8 * v), *lanes);
            }
        }
    }
}

/// [`pv_cols`] over all columns for `G` queries: `8·NV` at a time, then 8, then one by one.
///
/// # Safety
///
/// As [`pv_cols`] with every row at least `d` long.
#[inline(always)]
unsafe fn pv_group<T: Float, const G: usize, const NV: usize>(
    p: *const f32,
    p_stride: usize,
    rows: &[&[T]],
    acc: *mut f32,
    d: usize,
) {
    let mut c = 0;
    // SAFETY: each call covers columns c .. c + 8·NV (or + 8) <= d; the tail reads column c < d.
    unsafe {
        while c + 8 * NV <= d {
            pv_cols::<T, G, NV>(p, p_stride, rows, acc, d, c);
            c += 8 * NV;
        }
        while c + 8 <= d {
            pv_cols::<T, G, 1>(p, p_stride, rows, acc, d, c);
            c += 8;
        }
        for g in 0..G {
            for col in c..d {
                let mut s = *acc.add(g * d + col);
                for (j, row) in rows.iter().enumerate() {
                    s = (*p.add(g * p_stride + j)).mul_add(row[col].to_f32(), s);
                }
                *acc.add(g * d + col) = s;
            }
        }
    }
}

/// See [`super::pv`].
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn pv<T: Float>(p: &[f32], p_stride: usize, rows: &[&[T]], acc: &mut [f32], d: usize) {
    let g = acc.len().checked_div(d).unwrap_or(0);
    if g == 0 || rows.is_empty() {
        return;
    }
    assert!(
        rows.iter().all(|r| r.len() >= d),
        "pv: a value row is shorter than d"
    );
    assert!(
        p_stride >= rows.len() && p.len() >= (g - 1) * p_stride + rows.len(),
        "pv: p is too short"
    );
    let mut g0 = 0;
    while g0 < g {
        // SAFETY: queries g0 .. g0 + G are within `acc` (G·d elements from g0·d) and `p`
        // (asserted above); rows are `d` long.
        unsafe {
            let (pg, ag) = (p.as_ptr().add(g0 * p_stride), acc.as_mut_ptr().add(g0 * d));
            match g - g0 {
                1 => pv_group::<T, 1, 8>(pg, p_stride, rows, ag, d),
                2 => pv_group::<T, 2, 4>(pg, p_stride, rows, ag, d),
                3 => pv_group::<T, 3, 2>(pg, p_stride, rows, ag, d),
                _ => pv_group::<T, 4, 2>(pg, p_stride, rows, ag, d),
            }
        }
        g0 += 4;
    }
}
