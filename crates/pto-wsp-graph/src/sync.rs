//! The one door through which the runtime reaches atomics and locks, so that `--cfg loom` builds
//! swap in loom's model-checked versions. Nothing else in the crate may name
//! `std::sync::atomic` or `std::sync::{Mutex, Condvar}` directly; the CPU back end reaches them
//! through its own `sync` module, which re-exports these and adds threads and its inbox.
//!
//! Three things here are *not* swapped under loom, on purpose:
//!
//! - [`OnceLock`] is always `std`'s. The runtime uses it only to make the directory pages of
//!   its per-task arenas ([`crate::arena`]), which are never freed; std's `OnceLock` orders a
//!   page's making before any use of it. Loom has no `OnceLock` and cannot see std's
//!   synchronisation, so under loom every page is made when the arena is (several threads may
//!   grow one arena: device generation's owner table), while the chunk pointers stored *in* the
//!   pages and the protocol stored in the chunks (loom atomics) are model-checked.
//! - [`UnmodelledMutex`] is `std`'s mutex, for the arenas' list of spare chunks: under loom no
//!   chunk is kept for reuse (the list stays empty) and no loom operation runs while it is held.
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

/// `std`'s mutex even under loom (see the module docs: the arenas' spare chunks only).
pub use std::sync::Mutex as UnmodelledMutex;

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
