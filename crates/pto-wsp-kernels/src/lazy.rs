//! Seeded tensor contents made where they are first used, not before the run.
//!
//! Why: a model's generated inputs are hundreds of megabytes (the main job's are 570 MB). Filled
//! before the run, every byte is written once into memory the kernel must first clear, then read
//! back from memory by the task that uses it: the preparation alone took longer than the run.
//! Here a large tensor filled from the seed is only *promised*: its buffer is cut into chunks,
//! and the first reader of a chunk (a task's view, or a read of the whole tensor) makes it, on
//! whichever thread asks, so generation is spread over every worker, lands in the cache of the
//! core that reads it next, and is never done for parts of a tensor nobody reads (a KV cache
//! beyond each request's length).
//!
//! Promises: a chunk is made exactly once, by one thread, and every reader that asked for it
//! sees its bytes complete (each chunk is guarded by a [`std::sync::Once`]: the filler's writes
//! happen before any waiter returns). The bytes are those of [`crate::seed::fill`] for the same
//! seed and range, whatever the chunking and the order of first reads (element `k` is the
//! stream's output `k + 1`). Readers of different chunks never wait for each other; readers of
//! one chunk wait for its filler only.

use crate::seed::{SeedRange, fill_chunk};
use pto_wsp_ir::DType;
use std::sync::Once;

/// Bytes per chunk: a multiple of every element size times the generator's block, small enough
/// that two threads asking for one tensor share its work, large enough that the per-chunk check
/// costs nothing next to the bytes it guards.
pub(crate) const CHUNK: usize = 256 << 10;

/// The promise of a tensor's seeded contents, chunk by chunk.
pub(crate) struct LazyFill {
    dtype: DType,
    seed: u64,
    range: Option<SeedRange>,
    /// One per [`CHUNK`] of the buffer (the last one possibly shorter).
    chunks: Box<[Once]>,
}

impl LazyFill {
    /// The promise for a buffer of `len` bytes of `dtype` elements.
    pub(crate) fn new(len: usize, dtype: DType, seed: u64, range: Option<SeedRange>) -> LazyFill {
        LazyFill {
            dtype,
            seed,
            range,
            chunks: (0..len.div_ceil(CHUNK)).map(|_| Once::new()).collect(),
        }
    }

    /// Whether every chunk is made.
    #[cfg(test)]
    pub(crate) fn is_complete(&self) -> bool {
        self.chunks.iter().all(Once::is_completed)
    }

    /// Makes bytes `lo .. hi` of the buffer at `base` (`len` bytes) hold their seeded values:
    /// the chunks covering them are made here unless already made, waiting only for a chunk
    /// another thread is making. `start` picks where among them to begin (callers that ask at
    /// the same time with different `start`s mostly make different chunks).
    ///
    /// # Safety
    ///
    /// `base` is valid for writes of `len` bytes, and nothing reads or writes a byte of a chunk
    /// not yet made except through this promise (every reader of the buffer asks here first).
    pub(crate) unsafe fn ensure(
        &self,
        base: *mut u8,
        len: usize,
        lo: usize,
        hi: usize,
        start: usize,
    ) {
        let hi = hi.min(len);
        if lo >= hi {
            return;
        }
        let (first, last) = (lo / CHUNK, (hi - 1) / CHUNK);
        let n = last - first + 1;
        for i in 0..n {
            let c = first + (start + i) % n;
            let once = &self.chunks[c];
            if once.is_completed() {
                continue;
            }
            once.call_once(|| {
                let at = c * CHUNK;
                let end = (at + CHUNK).min(len);
                // SAFETY: `at .. end` lies in the buffer (the caller's promise on `base` and
                // `len`); this `Once` gives the chunk to this thread alone until it is made, and
                // nothing else touches an unmade chunk (the caller's promise).
                let bytes = unsafe { std::slice::from_raw_parts_mut(base.add(at), end - at) };
                let size = self.dtype.size_bytes().max(1);
                fill_chunk(bytes, self.dtype, self.seed, (at / size) as u64, self.range);
            });
        }
    }

    /// Makes every chunk, on every core when there is much left to make.
    ///
    /// # Safety
    ///
    /// As [`LazyFill::ensure`].
    pub(crate) unsafe fn ensure_all(&self, base: *mut u8, len: usize) {
        let left = self.chunks.iter().filter(|c| !c.is_completed()).count();
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        if left < 8 || threads < 2 {
            // SAFETY: the caller's promise.
            unsafe { self.ensure(base, len, 0, len, 0) };
            return;
        }
        let n = self.chunks.len();
        // Raw pointers are not `Send`: the address crosses the scope as an integer.
        let addr = base as usize;
        std::thread::scope(|s| {
            for k in 0..threads {
                s.spawn(move || {
                    let base = addr as *mut u8;
                    // SAFETY: the caller's promise; the chunks' `Once`s keep the threads apart.
                    unsafe { self.ensure(base, len, 0, len, k * n / threads) };
                });
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every order of first reads, from several threads at once, gives the eager fill's bytes.
    #[test]
    fn chunks_made_in_any_order_are_the_eager_fill() {
        for dtype in [DType::F16, DType::F32, DType::U8] {
            let range = dtype.is_float().then_some(SeedRange { lo: -0.5, hi: 0.25 });
            // Not a whole number of chunks.
            let len = (5 * CHUNK + 3 * 64 + dtype.size_bytes() * 7) / dtype.size_bytes()
                * dtype.size_bytes();
            let mut eager = vec![0u8; len];
            crate::seed::fill(&mut eager, dtype, 42, range);
            let mut lazy = vec![0u8; len];
            let promise = LazyFill::new(len, dtype, 42, range);
            let addr = lazy.as_mut_ptr() as usize;
            std::thread::scope(|s| {
                for k in 0..3usize {
                    let p = &promise;
                    s.spawn(move || {
                        // Overlapping spans from different starting chunks.
                        let (lo, hi) = (k * CHUNK + 17, len - k * 1000);
                        // SAFETY: `lazy` outlives the scope; only the promise writes it.
                        unsafe { p.ensure(addr as *mut u8, len, lo, hi, k) };
                    });
                }
            });
            // SAFETY: as above.
            unsafe { promise.ensure_all(lazy.as_mut_ptr(), len) };
            assert!(promise.is_complete());
            assert!(lazy == eager, "{dtype}");
        }
    }

    #[test]
    fn an_unread_chunk_stays_unmade() {
        let len = 4 * CHUNK;
        let mut buf = vec![0u8; len];
        let promise = LazyFill::new(len, DType::F32, 1, None);
        // SAFETY: `buf` is valid for `len` bytes and only the promise writes it.
        unsafe { promise.ensure(buf.as_mut_ptr(), len, CHUNK, 2 * CHUNK, 0) };
        assert!(buf[..CHUNK].iter().all(|&b| b == 0));
        assert!(buf[CHUNK..2 * CHUNK].iter().any(|&b| b != 0));
        assert!(buf[2 * CHUNK..].iter().all(|&b| b == 0));
        assert!(!promise.is_complete());
    }
}
