//! A cache prefetch hint, an `unsafe` call that never accesses memory.
//!
//! Why: an exact-key lookup's first cost is a cache miss on its home slot (the slot table of a
//! large build does not fit the L2). Announcing the slot when a region is added to a task, before
//! the task is submitted, lets those misses overlap the rest of the task's building instead of
//! stalling each lookup in turn.
//! Promise: [`prefetch`] has no effect a program can observe except timing; it never reads or
//! writes memory architecturally and never faults, whatever the address.

/// Hints the CPU to bring the cache line holding `x` into the cache (a no-op off x86-64).
#[inline(always)]
pub fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetcht0` is a hint: it performs no architectural memory access and cannot
    // fault, and `sse` is part of the x86-64 baseline, so the target feature is always present.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            (x as *const T).cast::<i8>(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}
