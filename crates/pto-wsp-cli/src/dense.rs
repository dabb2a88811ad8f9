//! A checked `f64` matrix product for the references the tool computes.
//!
//! Why: the references that check a run (the main job's in [`crate::llm`]) are long products in
//! `f64`; written as plain loops they took longer than the run they check, on a build for
//! baseline x86-64. `gemm`'s `f64` kernels pick the machine's vector units at run time. Its
//! interface is raw pointers and strides; this module is the one place that calls it, with
//! every extent checked against its slice first, so the rest of the crate stays safe code. The
//! `f16` weights are widened to `f64` here too, with F16C where the CPU has it.
//!
//! Promise: [`product`] computes `dst = scale · lhs · rhs` (or adds it to `dst`), each operand
//! read through its strides; it panics, before touching memory, when a view does not cover its
//! operand's extent (a caller's mistake, never the input's).

/// A matrix read from a slice: element `(i, j)` is `data[i · row_stride + j · col_stride]`.
#[derive(Clone, Copy, Debug)]
pub struct Strided<'a> {
    /// The elements.
    pub data: &'a [f64],
    /// Distance between rows.
    pub row_stride: usize,
    /// Distance between columns.
    pub col_stride: usize,
}

impl Strided<'_> {
    /// Whether a `rows × cols` matrix fits in the slice.
    fn covers(&self, rows: usize, cols: usize) -> bool {
        rows == 0
            || cols == 0
            || (rows - 1)
                .checked_mul(self.row_stride)
                .zip((cols - 1).checked_mul(self.col_stride))
                .and_then(|(a, b)| a.checked_add(b))
                .is_some_and(|last| last < self.data.len())
    }
}

/// `dst = scale · lhs · rhs` (`accumulate`: `dst += scale · lhs · rhs`), `lhs` `m × k`, `rhs`
/// `k × n`, `dst` `m × n` row-major with row stride `dst_row_stride`, on the calling thread.
///
/// Panics if an operand's view does not cover its extent.
#[allow(clippy::too_many_arguments)]
pub fn product(
    (m, n, k): (usize, usize, usize),
    dst: &mut [f64],
    dst_row_stride: usize,
    accumulate: bool,
    lhs: Strided<'_>,
    rhs: Strided<'_>,
    scale: f64,
) {
    let out = Strided {
        data: dst,
        row_stride: dst_row_stride,
        col_stride: 1,
    };
    assert!(
        out.covers(m, n) && lhs.covers(m, k) && rhs.covers(k, n),
        "a product's operands do not cover its extents"
    );
    if m == 0 || n == 0 {
        return;
    }
    let stride = |s: usize| isize::try_from(s).expect("a slice's stride fits in isize");
    // SAFETY: every element the product reads or writes is inside its slice (checked above:
    // the last index of each view is within it, strides are non-negative); `dst` is borrowed
    // mutably, so it overlaps neither operand.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            stride(dst_row_stride),
            accumulate,
            lhs.data.as_ptr(),
            stride(lhs.col_stride),
            stride(lhs.row_stride),
            rhs.data.as_ptr(),
            stride(rhs.col_stride),
            stride(rhs.row_stride),
            1.0,
            scale,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

/// `2^112`: scales a half's exponent field, moved into an `f32`'s, to the `f32` exponent (the
/// biases are 15 and 127), subnormal halves included.
const HALF_TO_SINGLE: f32 = f32::from_bits((127 + 112) << 23);

/// One `f16` (its bits) as `f32`, exactly: the sign, exponent and mantissa fields moved into
/// an `f32`'s places and rescaled by one multiplication (exact, and it normalises subnormals);
/// infinities and NaNs, whose exponent field is all ones, keep an all-ones exponent.
#[inline(always)]
fn half_to_single(h: u16) -> f32 {
    let magnitude = u32::from(h & 0x7fff) << 13;
    let scaled = f32::from_bits(magnitude) * HALF_TO_SINGLE;
    let bits = if h & 0x7c00 == 0x7c00 {
        magnitude | 0x7f80_0000
    } else {
        scaled.to_bits()
    };
    f32::from_bits(bits | (u32::from(h & 0x8000) << 16))
}

/// `dst[i] = src[i]` widened to `f64`, exactly (NaNs stay NaN), for `min(len)` elements.
///
/// The main job's reference widens every weight once (218 million values): with F16C, eight
/// at a time by the conversion instructions (`f16 → f32 → f64`, both exact); elsewhere by a
/// branch-free loop the compiler vectorises for the baseline target.
pub fn widen(src: &[half::f16], dst: &mut [f64]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("f16c") && std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: the CPU has the features the function is compiled for (checked above).
        unsafe { widen_f16c(src, dst) };
        return;
    }
    widen_plain(src, dst);
}

/// [`widen`] on any target: the bits rebuilt as an `f32`, then widened.
fn widen_plain(src: &[half::f16], dst: &mut [f64]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = f64::from(half_to_single(s.to_bits()));
    }
}

/// [`widen`] with F16C: eight halves to eight singles in one instruction, then to doubles.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx,f16c")]
fn widen_f16c(src: &[half::f16], dst: &mut [f64]) {
    use std::arch::x86_64::{
        _mm_loadu_si128, _mm256_castps256_ps128, _mm256_cvtph_ps, _mm256_cvtps_pd,
        _mm256_extractf128_ps, _mm256_storeu_pd,
    };
    let n = src.len().min(dst.len());
    let whole = n - n % 8;
    for i in (0..whole).step_by(8) {
        // SAFETY: `i + 8 <= n`, within both slices; the accesses are unaligned ones.
        unsafe {
            let single = _mm256_cvtph_ps(_mm_loadu_si128(src.as_ptr().add(i).cast()));
            let lo = _mm256_cvtps_pd(_mm256_castps256_ps128(single));
            let hi = _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(single));
            _mm256_storeu_pd(dst.as_mut_ptr().add(i), lo);
            _mm256_storeu_pd(dst.as_mut_ptr().add(i + 4), hi);
        }
    }
    widen_plain(&src[whole..n], &mut dst[whole..n]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strided_products_are_the_plain_sums() {
        let (m, n, k) = (3, 5, 7);
        let a: Vec<f64> = (0..m * k).map(|i| i as f64 * 0.5 - 3.0).collect();
        // b given transposed: element (p, j) at j * k + p.
        let bt: Vec<f64> = (0..n * k).map(|i| (i % 11) as f64 - 4.0).collect();
        let mut c = vec![1.0; m * n];
        let lhs = Strided {
            data: &a,
            row_stride: k,
            col_stride: 1,
        };
        let rhs = Strided {
            data: &bt,
            row_stride: 1,
            col_stride: k,
        };
        product((m, n, k), &mut c, n, true, lhs, rhs, 2.0);
        for i in 0..m {
            for j in 0..n {
                let s: f64 = (0..k).map(|p| a[i * k + p] * bt[j * k + p]).sum();
                assert_eq!(c[i * n + j], 1.0 + 2.0 * s);
            }
        }
    }

    /// Both ways of widening (the one this CPU takes and the portable one), on every half and
    /// on lengths that leave a tail of 1 to 7.
    #[test]
    fn every_half_widens_exactly() {
        let all: Vec<half::f16> = (0..=u16::MAX).map(half::f16::from_bits).collect();
        type Widen = fn(&[half::f16], &mut [f64]);
        let ways: [Widen; 2] = [widen, widen_plain];
        for way in ways {
            for cut in 0..8 {
                let src = &all[cut..];
                let mut wide = vec![0.0; src.len()];
                way(src, &mut wide);
                for (h, w) in src.iter().zip(&wide) {
                    if h.is_nan() {
                        assert!(w.is_nan(), "{:#06x}", h.to_bits());
                    } else {
                        assert_eq!(w.to_bits(), h.to_f64().to_bits(), "{:#06x}", h.to_bits());
                    }
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "do not cover")]
    fn a_short_operand_is_refused() {
        let a = [0.0; 5];
        let mut c = [0.0; 4];
        let v = Strided {
            data: &a,
            row_stride: 2,
            col_stride: 1,
        };
        product((2, 2, 3), &mut c, 2, false, v, v, 1.0);
    }
}
