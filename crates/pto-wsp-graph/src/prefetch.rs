//! A cache prefetch hint, an `unsafe` call that never accesses memory.
//!
//! Why: an exact-key lookup's first cost is a cache miss on its home slot (the slot table of a
//! large build does not fit the L2). Announcing the slot when a region is added to a task, before
//! the task is submitted, lets those misses overlap the rest of the task's building instead of
//! stalling each lookup in turn.
//! Promise: [`prefetch_index`] has no effect a program can observe except timing; it never
//! reads or writes memory architecturally and never faults, whatever the address.

/// Hints the CPU to bring the cache line of `slice[i]` into the cache (a no-op off x86-64).
/// Nothing is read, so `i` is not checked against the length: an index out of bounds is
/// harmless (the address is formed with wrapping arithmetic and never dereferenced), and an
/// index the caller knows to be in bounds costs no bounds check.
#[inline(always)]
pub fn prefetch_index<T>(slice: &[T], i: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetcht0` is a hint: it performs no architectural memory access and cannot
    // fault whatever the address (`sse` is part of the x86-64 baseline, so the target feature
    // is always present), and `wrapping_add` forms the address without the in-bounds
    // requirement of `add`.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            slice.as_ptr().wrapping_add(i).cast::<i8>(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (slice, i);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A prefetch reads nothing and faults nowhere: in bounds, one past the end, far out of
    /// bounds and off an empty slice; the data is unchanged.
    #[test]
    fn a_prefetch_of_any_index_is_harmless() {
        let v: Vec<u64> = (0..16).collect();
        for i in [0, 7, 15, 16, 1 << 40, usize::MAX] {
            prefetch_index(&v, i);
        }
        prefetch_index::<u64>(&[], 3);
        assert_eq!(v, (0..16).collect::<Vec<u64>>());
    }
}
