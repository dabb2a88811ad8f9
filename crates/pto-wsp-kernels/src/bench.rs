//! Same-process kernel benchmarks: the built-ins called as an engine calls them — through the
//! registry, on a [`TaskContext`] over a [`TensorStore`] — next to a baseline doing the same work
//! directly, timed back to back.
//!
//! Why here: the criterion bench (`benches/kernels.rs`) and `pto-wsp bench` measure the same
//! cases, and only this crate may build task contexts (an `unsafe` constructor) and call `gemm`.
//!
//! - [`GemmCase`]: `matmul` on `n × n` tiles against the `gemm` crate on plain vectors (`f32`, and
//!   `f16` inputs with an `f32` output: the direct baseline converts both inputs, then calls
//!   `gemm`).
//! - [`AttnCase`]: `attn_decode_chunk` over one KV chunk (512 rows of 128) against a copy of as
//!   many bytes as the chunk's keys and values, with both copy buffers placed to avoid 4K
//!   aliasing.
//! - [`compare`]: two closures timed interleaved, best of 11 rounds of about 40 ms each — the
//!   ratio survives a shared, noisy machine. [`fma_peak_gflops`]: one core's `f32` FMA peak.
//!
//! Promise: nothing here panics on a machine without AVX2 (the peak is then `None`); every case
//! builds its own store, so cases are independent.

use crate::{KernelId, KernelRegistry, TaskContext, TensorStore};
use half::f16;
use half::slice::HalfFloatSliceExt;
use pto_wsp_ir::task_io::{Region, TaskIo};
use pto_wsp_ir::{Access, Bindings, parse};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// A store with `A`, `B` (of `dtype`) and `C` (`f32`), all `n × n`, filled at random.
fn gemm_store(n: usize, dtype: &str) -> TensorStore {
    let text = format!(
        "tensor A: {dtype}[{n}, {n}];\ntensor B: {dtype}[{n}, {n}];\ntensor C: f32[{n}, {n}];"
    );
    let m = parse(&text).expect("bench module parses");
    let mut s = TensorStore::new(&m, &Bindings::new()).expect("store");
    s.fill_random(7);
    s
}

fn full(tensor: u32, shape: &[i64], access: Access) -> TaskIo {
    let start = vec![0; shape.len()];
    TaskIo::new(Region::new(tensor, &start, shape).expect("region"), access)
}

/// Runs kernel `id` once on `io`.
fn call(reg: &KernelRegistry, id: KernelId, store: &TensorStore, params: &[u64], io: &[TaskIo]) {
    // SAFETY: the store belongs to the case calling this; cases are not `Sync` (`NotSync`), so
    // only this thread can reach it, and it makes one context at a time (the kernel runs to the
    // end before anything else here touches the store).
    let ctx = unsafe { TaskContext::new(store, 0, 0, params, io) };
    reg.call(id, &ctx).expect("kernel runs");
}

/// The direct baseline: `c = a · b` on `n × n` `f32` matrices.
fn gemm_direct(n: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
    assert!(a.len() >= n * n && b.len() >= n * n && c.len() >= n * n);
    // SAFETY: all three buffers hold n × n contiguous elements (checked above) and do not overlap.
    unsafe {
        gemm::gemm(
            n,
            n,
            n,
            c.as_mut_ptr(),
            1,
            n as isize,
            false,
            a.as_ptr(),
            1,
            n as isize,
            b.as_ptr(),
            1,
            n as isize,
            1.0f32,
            1.0f32,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

/// Keeps a case on one thread: its store is reached through task contexts, which must not run
/// at the same time on the same regions.
type NotSync = std::marker::PhantomData<std::cell::Cell<()>>;

/// The GEMM tile sizes measured.
pub const SIZES: [usize; 3] = [64, 128, 256];

/// One GEMM comparison: the kernel through the registry and the direct call, ready to run.
pub struct GemmCase {
    /// The tile size.
    pub n: usize,
    f16_inputs: bool,
    store: TensorStore,
    io: [TaskIo; 3],
    a: Vec<f32>,
    b: Vec<f32>,
    ah: Vec<f16>,
    bh: Vec<f16>,
    c: Vec<f32>,
    _one_thread: NotSync,
}

impl GemmCase {
    /// `n × n` tiles, `f16` inputs if `f16_inputs`, filled at random.
    pub fn new(n: usize, f16_inputs: bool) -> GemmCase {
        let store = gemm_store(n, if f16_inputs { "f16" } else { "f32" });
        let sh = [n as i64, n as i64];
        let io = [
            full(0, &sh, Access::In),
            full(1, &sh, Access::In),
            full(2, &sh, Access::Out),
        ];
        let (a, b, ah, bh) = if f16_inputs {
            let ah = store.read::<f16>("A").expect("A");
            let bh = store.read::<f16>("B").expect("B");
            (vec![0.0; n * n], vec![0.0; n * n], ah, bh)
        } else {
            let a = store.read::<f32>("A").expect("A");
            let b = store.read::<f32>("B").expect("B");
            (a, b, Vec::new(), Vec::new())
        };
        GemmCase {
            n,
            f16_inputs,
            store,
            io,
            a,
            b,
            ah,
            bh,
            c: vec![0.0; n * n],
            _one_thread: NotSync::default(),
        }
    }

    /// Runs the kernel `id` of `reg` (the built-in `matmul`) once.
    pub fn kernel(&self, reg: &KernelRegistry, id: KernelId) {
        call(reg, id, &self.store, &[], &self.io);
    }

    /// Does the same product with `gemm` called directly.
    pub fn direct(&mut self) {
        if self.f16_inputs {
            self.ah.convert_to_f32_slice(&mut self.a);
            self.bh.convert_to_f32_slice(&mut self.b);
        }
        gemm_direct(self.n, &self.a, &self.b, &mut self.c);
        black_box(&self.c);
    }

    /// Flops of one product.
    pub fn flops(&self) -> u64 {
        2 * (self.n as u64).pow(3)
    }

    /// `f32` or `f16 in, f32 acc`.
    pub fn label(&self) -> &'static str {
        if self.f16_inputs {
            "f16 in, f32 acc"
        } else {
            "f32"
        }
    }
}

/// Keys and values in the attention chunk.
pub const KV_ROWS: usize = 512;
/// Head dimension of the attention chunk.
pub const HEAD_DIM: usize = 128;

/// One decode-attention comparison: a chunk of `KV_ROWS × HEAD_DIM` keys and values of
/// `dtype`, `g` query rows; and two byte buffers the size of the keys and values.
pub struct AttnCase {
    /// Query rows.
    pub g: usize,
    /// Element type of the keys and values.
    pub dtype: &'static str,
    store: TensorStore,
    io: [TaskIo; 6],
    /// `bytes` to copy from `src[src_at..]` to `dst[dst_at..]`.
    bytes: usize,
    src: Vec<u8>,
    dst: Vec<u8>,
    src_at: usize,
    dst_at: usize,
    _one_thread: NotSync,
}

impl AttnCase {
    /// `g` query rows over a chunk of `dtype` keys and values, filled at random.
    pub fn new(g: usize, dtype: &'static str) -> AttnCase {
        let text = format!(
            "tensor Q: {dtype}[{g}, {HEAD_DIM}];\ntensor K: {dtype}[{KV_ROWS}, {HEAD_DIM}];\n\
             tensor V: {dtype}[{KV_ROWS}, {HEAD_DIM}];\ntensor O: f32[{g}, {HEAD_DIM}];\n\
             tensor M: f32[{g}];\ntensor L: f32[{g}];"
        );
        let m = parse(&text).expect("bench module parses");
        let mut store = TensorStore::new(&m, &Bindings::new()).expect("store");
        store.fill_random(11);
        let (g64, s, d) = (g as i64, KV_ROWS as i64, HEAD_DIM as i64);
        let io = [
            full(0, &[g64, d], Access::In),
            full(1, &[s, d], Access::In),
            full(2, &[s, d], Access::In),
            full(3, &[g64, d], Access::Out),
            full(4, &[g64], Access::Out),
            full(5, &[g64], Access::Out),
        ];
        let bytes = (store.info(1).size_bytes() + store.info(2).size_bytes()) as usize;
        // Both buffers cache-line aligned, and 2 KiB apart modulo 4 KiB: on this machine's
        // AMD EPYC a copy whose destination sits 16 bytes past its source modulo 4 KiB (what
        // two same-sized heap blocks often give) runs at under 2 GB/s instead of ~30 (4K
        // aliasing in `rep movsb`); the baseline should be the machine's copy speed.
        let src: Vec<u8> = (0..bytes + 8192).map(|i| i as u8).collect();
        let dst = vec![0u8; bytes + 8192];
        let page = |v: &Vec<u8>| (4096 - v.as_ptr() as usize % 4096) % 4096;
        let (src_at, dst_at) = (page(&src), page(&dst) + 2048);
        AttnCase {
            g,
            dtype,
            store,
            io,
            bytes,
            src,
            dst,
            src_at,
            dst_at,
            _one_thread: NotSync::default(),
        }
    }

    /// Runs the kernel `id` of `reg` (the built-in `attn_decode_chunk`) once.
    pub fn kernel(&self, reg: &KernelRegistry, id: KernelId) {
        call(reg, id, &self.store, &[], &self.io);
    }

    /// Copies as many bytes as the chunk's keys and values.
    pub fn copy(&mut self) {
        let n = self.bytes;
        self.dst[self.dst_at..self.dst_at + n]
            .copy_from_slice(black_box(&self.src[self.src_at..self.src_at + n]));
        black_box(&self.dst);
    }

    /// Bytes of the chunk's keys and values.
    pub fn bytes(&self) -> u64 {
        self.bytes as u64
    }
}

/// The built-in `softmax` on one `rows × cols` `f32` tile (scale 1/8), filled at random: with
/// [`AttnCase`], the case measured with the fast `exp` against the standard library's
/// ([`crate::fast::with_std_exp`]).
pub struct SoftmaxCase {
    /// Rows of the tile.
    pub rows: usize,
    /// Columns of the tile.
    pub cols: usize,
    store: TensorStore,
    io: [TaskIo; 2],
    _one_thread: NotSync,
}

impl SoftmaxCase {
    /// A `rows × cols` tile.
    pub fn new(rows: usize, cols: usize) -> SoftmaxCase {
        let text = format!("tensor X: f32[{rows}, {cols}];\ntensor Y: f32[{rows}, {cols}];");
        let m = parse(&text).expect("bench module parses");
        let mut store = TensorStore::new(&m, &Bindings::new()).expect("store");
        store.fill_random(5);
        let sh = [rows as i64, cols as i64];
        SoftmaxCase {
            rows,
            cols,
            store,
            io: [full(0, &sh, Access::In), full(1, &sh, Access::Out)],
            _one_thread: NotSync::default(),
        }
    }

    /// Runs the kernel `id` of `reg` (the built-in `softmax`) once.
    pub fn kernel(&self, reg: &KernelRegistry, id: KernelId) {
        call(reg, id, &self.store, &[0.125f64.to_bits()], &self.io);
    }
}

/// Best time per call of `f` over `rounds` rounds of enough calls to last about `target`.
fn best_per_call(target: Duration, mut f: impl FnMut()) -> impl FnMut() -> Duration {
    // Calibrate the number of calls per round.
    let start = Instant::now();
    let mut calls = 0u32;
    while start.elapsed() < target / 4 || calls < 3 {
        f();
        calls += 1;
    }
    let per = start.elapsed() / calls;
    let reps = ((target.as_nanos() / per.as_nanos().max(1)) as u32).max(3);
    move || {
        let t = Instant::now();
        for _ in 0..reps {
            f();
        }
        t.elapsed() / reps
    }
}

/// A kernel written in tile instructions and the built-in it re-expresses, on the same tiles
/// (the modules are `examples/kernels/softmax.wsp`, `rmsnorm_gemm.wsp` and
/// `decode_attention.wsp`): softmax and RMSNorm on an 8 × 64 tile, a GEMM tile `c += a·b` of
/// 16 × 64 · 64 × 16, a split-KV decode attention chunk (one query, 64 keys of 64) and the
/// merge of 4 partial states.
pub struct LangCase {
    store: TensorStore,
    reg: KernelRegistry,
    lang: (KernelId, Vec<TaskIo>, Vec<u64>),
    builtin: (KernelId, Vec<TaskIo>, Vec<u64>),
    /// The case's name.
    pub label: &'static str,
}

impl LangCase {
    /// Every case: softmax, RMSNorm, GEMM tile, decode attention chunk and merge.
    pub fn all() -> Vec<LangCase> {
        let softmax = include_str!("../../../examples/kernels/softmax.wsp");
        let rms_gemm = include_str!("../../../examples/kernels/rmsnorm_gemm.wsp");
        let io = |t: u32, r: i64, c: i64, a: Access| {
            TaskIo::new(Region::new(t, &[0, 0], &[r, c]).expect("region"), a)
        };
        let vec_io =
            |t: u32, n: i64, a: Access| TaskIo::new(Region::new(t, &[0], &[n]).expect("region"), a);
        let row = |t: u32, n: i64| vec_io(t, n, Access::In);
        let f = |v: f64| v.to_bits();
        let mut cases = vec![
            LangCase::new(
                "softmax 8x64",
                softmax,
                (
                    "softmax_tile",
                    vec![io(0, 8, 64, Access::In), io(1, 8, 64, Access::Out)],
                    vec![f(0.125)],
                ),
                (
                    "softmax",
                    vec![io(0, 8, 64, Access::In), io(2, 8, 64, Access::Out)],
                    vec![f(0.125)],
                ),
            ),
            LangCase::new(
                "rmsnorm 8x64",
                rms_gemm,
                (
                    "rmsnorm_tile",
                    vec![
                        io(0, 8, 64, Access::In),
                        row(1, 64),
                        io(2, 8, 64, Access::Out),
                    ],
                    vec![f(1e-6)],
                ),
                (
                    "rmsnorm",
                    vec![
                        io(0, 8, 64, Access::In),
                        row(1, 64),
                        io(3, 8, 64, Access::Out),
                    ],
                    vec![f(1e-6)],
                ),
            ),
            LangCase::new(
                "gemm tile 16x64x16",
                rms_gemm,
                (
                    "gemm_tile",
                    vec![
                        io(4, 16, 64, Access::In),
                        io(5, 64, 16, Access::In),
                        io(6, 16, 16, Access::InOut),
                    ],
                    vec![],
                ),
                (
                    "matmul_acc",
                    vec![
                        io(4, 16, 64, Access::In),
                        io(5, 64, 16, Access::In),
                        io(7, 16, 16, Access::InOut),
                    ],
                    vec![],
                ),
            ),
        ];
        cases.extend(LangCase::attention());
        cases
    }

    /// The decode attention chunk and merge cases.
    fn attention() -> Vec<LangCase> {
        let io = |t: u32, r: i64, c: i64, a: Access| {
            TaskIo::new(Region::new(t, &[0, 0], &[r, c]).expect("region"), a)
        };
        let vec_io =
            |t: u32, n: i64, a: Access| TaskIo::new(Region::new(t, &[0], &[n]).expect("region"), a);
        let row = |t: u32, n: i64| vec_io(t, n, Access::In);
        let attn = include_str!("../../../examples/kernels/decode_attention.wsp");
        // A full chunk of 64 keys: tensors Q 0, K 1, V 2, then (o, m, l) 3-5 for the language
        // kernel and 7-9 for the built-in; the merge reads 4 partial states into OUT 6 / 10.
        let chunk = |o: u32| {
            vec![
                io(0, 1, 64, Access::In),
                io(1, 64, 64, Access::In),
                io(2, 64, 64, Access::In),
                io(o, 1, 64, Access::Out),
                vec_io(o + 1, 1, Access::Out),
                vec_io(o + 2, 1, Access::Out),
            ]
        };
        let merge = |o: u32, y: u32| {
            vec![
                io(o, 4, 64, Access::In),
                row(o + 1, 4),
                row(o + 2, 4),
                io(y, 1, 64, Access::Out),
            ]
        };
        vec![
            LangCase::new(
                "attn chunk 1x64, 64 keys",
                attn,
                ("chunk", chunk(3), vec![0, 64]),
                ("attn_decode_chunk", chunk(7), vec![0, 64]),
            ),
            LangCase::new(
                "attn merge 4 x 64",
                attn,
                ("merge", merge(3, 6), vec![]),
                ("attn_merge", merge(7, 10), vec![]),
            ),
        ]
    }

    fn new(
        label: &'static str,
        text: &str,
        lang: (&str, Vec<TaskIo>, Vec<u64>),
        builtin: (&str, Vec<TaskIo>, Vec<u64>),
    ) -> LangCase {
        let m = parse(text).expect("example parses");
        let mut store = TensorStore::new(&m, &Bindings::new()).expect("store");
        store.fill_random(7);
        let mut reg = KernelRegistry::with_builtins();
        crate::lang::register_bodies(&m, &mut reg);
        let id = |n: &str| reg.lookup(n).expect("kernel registered");
        LangCase {
            lang: (id(lang.0), lang.1, lang.2),
            builtin: (id(builtin.0), builtin.1, builtin.2),
            store,
            reg,
            label,
        }
    }

    /// Runs the language kernel once.
    pub fn lang(&self) {
        call(
            &self.reg,
            self.lang.0,
            &self.store,
            &self.lang.2,
            &self.lang.1,
        );
    }

    /// Runs the built-in once.
    pub fn builtin(&self) {
        call(
            &self.reg,
            self.builtin.0,
            &self.store,
            &self.builtin.2,
            &self.builtin.1,
        );
    }
}

/// Times `a` and `b` interleaved, best of 11 rounds of about 40 ms each; returns the best time
/// per call of each.
pub fn compare(a: impl FnMut(), b: impl FnMut()) -> (Duration, Duration) {
    compare_with(a, b, Duration::from_millis(40), 11)
}

/// [`compare`] with rounds of about `target` each, `rounds` of them (at least one).
pub fn compare_with(
    mut a: impl FnMut(),
    mut b: impl FnMut(),
    target: Duration,
    rounds: usize,
) -> (Duration, Duration) {
    const ROUNDS: usize = 1;
    let rounds = rounds.max(ROUNDS);
    let mut ta = best_per_call(target, &mut a);
    let mut tb = best_per_call(target, &mut b);
    let (mut best_a, mut best_b) = (Duration::MAX, Duration::MAX);
    for _ in 0..rounds {
        best_a = best_a.min(ta());
        best_b = best_b.min(tb());
    }
    (best_a, best_b)
}

/// Peak `f32` FMA throughput of one core in GFLOP/s, if the CPU has AVX2 and FMA: ten
/// independent 8-lane accumulators, enough to cover the FMA latency. The roofline the compute
/// bound kernels are measured against.
#[cfg(target_arch = "x86_64")]
pub fn fma_peak_gflops() -> Option<f64> {
    use std::arch::x86_64::*;
    #[target_feature(enable = "avx2,fma")]
    fn run(iters: u64) -> f32 {
        let mut acc = [_mm256_set1_ps(0.0); 10];
        let (a, b) = (_mm256_set1_ps(0.999_999), _mm256_set1_ps(1e-7));
        for _ in 0..iters {
            for x in acc.iter_mut() {
                *x = _mm256_fmadd_ps(*x, a, b);
            }
        }
        let mut out = [0f32; 8];
        let mut s = _mm256_setzero_ps();
        for x in acc {
            s = _mm256_add_ps(s, x);
        }
        // SAFETY: `out` holds 8 f32.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), s) };
        out.iter().sum()
    }
    if !(std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma"))
    {
        return None;
    }
    let iters = 2_000_000u64;
    let mut best = f64::MAX;
    for _ in 0..7 {
        let t = Instant::now();
        // SAFETY: AVX2 and FMA were detected above.
        black_box(unsafe { run(black_box(iters)) });
        best = best.min(t.elapsed().as_secs_f64());
    }
    Some((iters * 10 * 16) as f64 / best / 1e9)
}

/// Peak `f32` FMA throughput of one core: unknown off x86-64.
#[cfg(not(target_arch = "x86_64"))]
pub fn fma_peak_gflops() -> Option<f64> {
    None
}
