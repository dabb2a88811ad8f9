//! The one door through which the runtime reaches atomics, so that `--cfg loom` builds swap in
//! loom's model-checked versions. Nothing else in the crate may name `std::sync::atomic` or
//! `std::sync::{Mutex, Condvar}` directly.
//!
//! Two things here are *not* swapped under loom, on purpose:
//!
//! - [`OnceLock`] is always `std`'s. The runtime uses it only to install the segments of its
//!   growable per-task arenas ([`crate::state`]); a segment is installed by the one thread that
//!   grows the arena and every other thread learns of it through an index that was published
//!   with release/acquire *after* the install, so the lock never blocks a reader. Loom has no
//!   `OnceLock`; using `std`'s keeps the arena free of `unsafe` while the protocol stored *in*
//!   the segments (loom atomics) is still model-checked.
//! - [`shard_hint`] gives each OS thread a stable small number for spreading statistics counters
//!   over cache lines. It carries no synchronisation and any value is correct.

#[cfg(loom)]
pub use loom::sync::atomic::{
    AtomicBool, AtomicI64, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
};
#[cfg(loom)]
pub use loom::sync::{Arc, Condvar, Mutex, MutexGuard};

#[cfg(not(loom))]
pub use std::sync::atomic::{
    AtomicBool, AtomicI64, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
};
#[cfg(not(loom))]
pub use std::sync::{Arc, Condvar, Mutex, MutexGuard};

pub use std::sync::OnceLock;

/// A hint to the CPU (or, under loom, to the model scheduler) that the caller is spinning.
#[inline]
pub fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}

/// A stable number for the calling OS thread, for choosing a statistics shard. Not a
/// synchronisation device: two threads may share a number.
#[inline]
pub fn shard_hint() -> usize {
    // A plain std atomic even under loom: it numbers OS threads round-robin and orders nothing.
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    thread_local! {
        static HINT: usize = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    HINT.with(|h| *h)
}

/// Lock a mutex, ignoring poisoning: every critical section of the runtime leaves its data
/// consistent before anything that can panic, so a poisoned lock still guards valid data.
#[inline]
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// Wait on a condition variable, ignoring poisoning (see [`lock`]).
#[inline]
pub fn wait<'a, T>(cv: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    match cv.wait(guard) {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}
