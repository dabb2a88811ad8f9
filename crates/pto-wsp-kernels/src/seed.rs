//! Tensor contents from a seed: the same bytes on every machine, made at memory speed.
//!
//! Why: every run without input files fills its tensors from `--seed`, and a model's inputs are
//! hundreds of megabytes (the main job fills 570 MB). Generated one element at a time, the fill
//! took longer than the run it prepares. Here the generator is SplitMix64 (Steele, Lea, Flood
//! 2014), whose `k`-th output is a pure function of the seed and `k`: blocks of outputs are
//! computed independently (vectorised, on x86-64 with AVX-512 or AVX2 when the CPU has them,
//! rounded to `f16` eight at a time with F16C) and large tensors are cut into chunks filled on
//! every core. A float tensor may also have a [`SeedRange`], applied as each value is made, so a
//! weight of a given scale takes one pass over memory, not two.
//!
//! Promises: element `k` of a tensor is made from the stream's `k + 1`-th output, whatever the
//! chunking, the thread count or the instruction set; floats are multiples of `2^-(p-1)` in
//! `[-1, 1)` with `p` the type's significand width (exact in the type), then mapped by the
//! range in `f64` and rounded once through `f32` into the type; integers are in `0 .. 16`.

use crate::tile::Float;
use pto_wsp_ir::DType;

/// Where a float tensor's seeded values land: the seed's `x` in `[-1, 1)` becomes
/// `lo + (x + 1)·(hi − lo)/2`, computed in `f64` and rounded once through `f32` into the
/// tensor's type (for `lo = −hi` a power of two, exactly `hi·x`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SeedRange {
    /// Lower end.
    pub lo: f64,
    /// Upper end.
    pub hi: f64,
}

impl SeedRange {
    /// `x` placed in the range.
    #[inline(always)]
    pub fn map(self, x: f32) -> f32 {
        (self.lo + (x as f64 + 1.0) * ((self.hi - self.lo) / 2.0)) as f32
    }
}

/// Elements below which a tensor is filled on the calling thread alone.
pub(crate) const PARALLEL_FILL: usize = 1 << 20;

/// SplitMix64's increment: its state after `k` outputs is `seed + k·GAMMA`.
const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// Floats made at a time before conversion into the tensor's type.
const BLOCK: usize = 1024;

/// SplitMix64's output for state `z` (the state already advanced).
#[inline(always)]
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Output `k + 1` of the stream seeded with `seed` (element `k`'s).
#[inline(always)]
fn output(seed: u64, k: u64) -> u64 {
    mix(seed.wrapping_add(k.wrapping_add(1).wrapping_mul(GAMMA)))
}

/// The top `p` bits of an output as a multiple of `2^-(p-1)` in `[-1, 1)` (`p ≤ 24`: the
/// integer and the power-of-two scale are exact in `f32`).
#[inline(always)]
fn unit_grid(z: u64, p: u32) -> f32 {
    let half = 1i32 << (p - 1);
    let m = (z >> (64 - p)) as i32;
    (m - half) as f32 * (1.0 / half as f32)
}

/// `out[i]` = element `first + i`'s value on the grid of `p` bits, placed in `range`.
#[inline(always)]
fn grid_block_plain(seed: u64, first: u64, p: u32, range: Option<SeedRange>, out: &mut [f32]) {
    match range {
        None => {
            for (i, x) in out.iter_mut().enumerate() {
                *x = unit_grid(output(seed, first + i as u64), p);
            }
        }
        Some(r) => {
            for (i, x) in out.iter_mut().enumerate() {
                *x = r.map(unit_grid(output(seed, first + i as u64), p));
            }
        }
    }
}

/// [`grid_block_plain`] compiled for AVX-512 (64-bit multiplies in one instruction).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512vl")]
fn grid_block_avx512(seed: u64, first: u64, p: u32, range: Option<SeedRange>, out: &mut [f32]) {
    grid_block_plain(seed, first, p, range, out);
}

/// [`grid_block_plain`] compiled for AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn grid_block_avx2(seed: u64, first: u64, p: u32, range: Option<SeedRange>, out: &mut [f32]) {
    grid_block_plain(seed, first, p, range, out);
}

/// [`grid_block_plain`] with the widest vectors the CPU has.
fn grid_block(seed: u64, first: u64, p: u32, range: Option<SeedRange>, out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512dq")
            && std::arch::is_x86_feature_detected!("avx512vl")
        {
            // SAFETY: the CPU has the features the function is compiled for (checked above).
            unsafe { grid_block_avx512(seed, first, p, range, out) };
            return;
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: as above, for AVX2.
            unsafe { grid_block_avx2(seed, first, p, range, out) };
            return;
        }
    }
    grid_block_plain(seed, first, p, range, out);
}

/// `dst[i] = src[i]` rounded to `f16` (to nearest, ties to even: what [`Float::store`] does),
/// eight at a time with F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx,f16c")]
fn store_f16c(src: &[f32], dst: &mut [half::f16]) {
    use std::arch::x86_64::{
        _MM_FROUND_TO_NEAREST_INT, _mm_storeu_si128, _mm256_cvtps_ph, _mm256_loadu_ps,
    };
    let n = src.len().min(dst.len());
    let whole = n - n % 8;
    for i in (0..whole).step_by(8) {
        // SAFETY: `i + 8 <= n`, within both slices; the accesses are unaligned ones.
        unsafe {
            let v = _mm256_loadu_ps(src.as_ptr().add(i));
            let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v);
            _mm_storeu_si128(dst.as_mut_ptr().add(i).cast(), h);
        }
    }
    half::f16::store(&src[whole..n], &mut dst[whole..n]);
}

/// [`Float::store`] for `f16`, with F16C when the CPU has it.
fn store_f16(src: &[f32], dst: &mut [half::f16]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("f16c") && std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: the CPU has the features the function is compiled for (checked above).
        unsafe { store_f16c(src, dst) };
        return;
    }
    half::f16::store(src, dst);
}

/// Fills `bytes` (elements of `dtype`) from the stream seeded with `seed`, on every core when
/// large; float values mapped by `range` (ignored for integers).
pub(crate) fn fill(bytes: &mut [u8], dtype: DType, seed: u64, range: Option<SeedRange>) {
    let size = dtype.size_bytes().max(1);
    let elements = bytes.len() / size;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if elements < PARALLEL_FILL || threads < 2 {
        fill_chunk(bytes, dtype, seed, 0, range);
        return;
    }
    // Chunks of whole blocks, a few per thread, so a slow core does not hold the rest back.
    let per = elements.div_ceil(threads * 4).next_multiple_of(BLOCK);
    let chunks: Vec<(usize, &mut [u8])> = bytes.chunks_mut(per * size).enumerate().collect();
    let work = std::sync::Mutex::new(chunks);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                while let Some((i, c)) = work.lock().unwrap_or_else(|p| p.into_inner()).pop() {
                    fill_chunk(c, dtype, seed, (i * per) as u64, range);
                }
            });
        }
    });
}

/// Fills `bytes`, whose first element is element `first` of the tensor.
pub(crate) fn fill_chunk(
    bytes: &mut [u8],
    dtype: DType,
    seed: u64,
    first: u64,
    range: Option<SeedRange>,
) {
    match dtype {
        DType::F32 => fill_float::<f32>(bytes, 24, seed, first, range, f32::store),
        DType::F16 => fill_float::<half::f16>(bytes, 11, seed, first, range, store_f16),
        DType::Bf16 => fill_float::<half::bf16>(bytes, 8, seed, first, range, half::bf16::store),
        DType::I32 => fill_int(bytes, seed, first, |v| v as i32),
        DType::U32 => fill_int(bytes, seed, first, |v| v as u32),
        DType::I64 => fill_int(bytes, seed, first, |v| v as i64),
        DType::U64 => fill_int(bytes, seed, first, |v| v),
        DType::U8 => fill_int(bytes, seed, first, |v| v as u8),
    }
}

fn fill_float<T: Float>(
    bytes: &mut [u8],
    p: u32,
    seed: u64,
    first: u64,
    range: Option<SeedRange>,
    store: fn(&[f32], &mut [T]),
) {
    let mut block = [0f32; BLOCK];
    for (c, chunk) in bytemuck::cast_slice_mut::<u8, T>(bytes)
        .chunks_mut(BLOCK)
        .enumerate()
    {
        let b = &mut block[..chunk.len()];
        grid_block(seed, first + (c * BLOCK) as u64, p, range, b);
        store(b, chunk);
    }
}

/// Integers in `0 .. 16`: the top four bits of each output.
fn fill_int<T: crate::Element>(bytes: &mut [u8], seed: u64, first: u64, f: impl Fn(u64) -> T) {
    for (k, x) in bytemuck::cast_slice_mut::<u8, T>(bytes)
        .iter_mut()
        .enumerate()
    {
        *x = f(output(seed, first + k as u64) >> 60);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SplitMix64 written as the sequential generator it is.
    struct SplitMix64(u64);

    impl SplitMix64 {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(GAMMA);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
    }

    /// The values of a sequential pass, element after element, as the promise states them.
    fn sequential(dtype: DType, seed: u64, n: usize, range: Option<SeedRange>) -> Vec<u8> {
        let mut rng = SplitMix64(seed);
        let mut out = Vec::new();
        for _ in 0..n {
            let z = rng.next();
            let float = |p: u32| {
                let half = (1i64 << (p - 1)) as f64;
                let x = ((z >> (64 - p)) as f64 - half) / half;
                let x = x as f32;
                range.map_or(x, |r| r.map(x))
            };
            match dtype {
                DType::F32 => out.extend(float(24).to_ne_bytes()),
                DType::F16 => out.extend(half::f16::from_f32(float(11)).to_ne_bytes()),
                DType::Bf16 => out.extend(half::bf16::from_f32(float(8)).to_ne_bytes()),
                DType::U8 => out.push((z >> 60) as u8),
                DType::I64 => out.extend(((z >> 60) as i64).to_ne_bytes()),
                _ => unreachable!("not tested"),
            }
        }
        out
    }

    #[test]
    fn every_fill_is_the_sequential_stream() {
        let range = SeedRange {
            lo: -0.015625,
            hi: 0.015625,
        };
        let odd = SeedRange { lo: 0.5, hi: 1.0 };
        for dtype in [DType::F32, DType::F16, DType::Bf16, DType::U8, DType::I64] {
            for r in [None, Some(range), Some(odd)] {
                // Past the parallel threshold and not a whole number of blocks.
                let n = PARALLEL_FILL + 12_345;
                let mut par = vec![0u8; n * dtype.size_bytes()];
                fill(&mut par, dtype, 99, r);
                assert!(par == sequential(dtype, 99, n, r), "{dtype} {r:?}");
                let mut small = vec![0u8; 3000 * dtype.size_bytes()];
                fill(&mut small, dtype, 7, r);
                assert!(small == sequential(dtype, 7, 3000, r), "{dtype} {r:?}");
            }
        }
    }

    /// The F16C store rounds every `f32` as the half crate does: the values halfway between
    /// two halves and around every half, subnormals, overflow, infinities and NaN.
    #[test]
    fn f16_stores_round_as_the_half_crate() {
        let mut src: Vec<f32> = (0..=u16::MAX)
            .flat_map(|b| {
                let v = half::f16::from_bits(b).to_f32();
                [
                    v,
                    f32::from_bits(v.to_bits() + 1),
                    f32::from_bits(v.to_bits() + 0x1000),
                ]
            })
            .filter(|v| !v.is_nan())
            .collect();
        src.extend([f32::NAN, 65520.0, 1e-8, -1e-8, 70000.0, f32::INFINITY]);
        let mut got = vec![half::f16::ZERO; src.len()];
        store_f16(&src, &mut got);
        for (s, g) in src.iter().zip(&got) {
            let want = half::f16::from_f32(*s);
            assert!(
                g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan()),
                "{s:e}: {:#06x} against {:#06x}",
                g.to_bits(),
                want.to_bits()
            );
        }
    }

    #[test]
    fn grid_values_are_exact_and_in_range() {
        let mut x = vec![0f32; 10_000];
        for p in [8, 11, 24] {
            grid_block(7, 3, p, None, &mut x);
            let mut plain = vec![0f32; x.len()];
            grid_block_plain(7, 3, p, None, &mut plain);
            assert_eq!(x, plain);
            for &v in &x {
                assert!((-1.0..1.0).contains(&v));
                assert_eq!((v * (1 << (p - 1)) as f32).fract(), 0.0);
            }
        }
    }
}
