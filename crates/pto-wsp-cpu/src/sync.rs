//! This crate's one door to synchronisation, so that `--cfg loom` builds run the CPU back end's
//! protocols under loom's model checker: the ready ring, the idle / park / wake protocol, the
//! worker pool's hand-off and device generation's inboxes and seal (`loom_models.rs`).
//!
//! Atomics, locks and condition variables are [`pto_wsp_graph::sync`]'s (std's, or loom's under
//! `--cfg loom`); this module adds what only this crate needs: threads ([`thread`]) and the
//! inbox of a device-generation executor ([`Inbox`]). Nothing else in the crate names
//! `std::sync::atomic`, `std::sync::{Mutex, Condvar}`, `std::thread::spawn` / `Builder` or a
//! `crossbeam` queue that threads hand work through.
//!
//! What is not swapped under loom, on purpose: the `std::thread::scope` of CSP pipelines
//! ([`crate::csp`]; loom has no scoped threads, and a pipeline's channels are its locks, which do
//! come through here), and the work-stealing deques of the graph crate's ready queues (crossbeam's;
//! the models run FIFO queues, which are the graph crate's loom-visible mutex queues, or treat a
//! deque push and pop as one atomic step).

pub(crate) use pto_wsp_graph::sync::{
    Arc, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Condvar, Mutex, MutexGuard, Ordering,
    fence, lock, spin_hint, wait,
};

/// Threads: `std::thread`'s, or loom's model threads under `--cfg loom`.
pub(crate) mod thread {
    #[cfg(loom)]
    pub(crate) use loom::thread::{Builder, JoinHandle, yield_now};
    #[cfg(not(loom))]
    pub(crate) use std::thread::{Builder, JoinHandle, yield_now};
}

/// A multi-producer queue of task ids (or of entries naming one: `T`) that one consumer
/// drains: a device-generation executor's inbox (its completion notifications). Pushing happens
/// before the pop that returns the value. A `crossbeam` injector, or under loom a mutex around a
/// `VecDeque` (loom sees every push, pop and emptiness check).
#[derive(Debug, Default)]
pub(crate) struct Inbox<T = u32> {
    #[cfg(not(loom))]
    q: crossbeam_deque::Injector<T>,
    #[cfg(loom)]
    q: Mutex<std::collections::VecDeque<T>>,
}

impl<T> Inbox<T> {
    /// Appends `v`.
    #[inline]
    pub(crate) fn push(&self, v: T) {
        #[cfg(not(loom))]
        self.q.push(v);
        #[cfg(loom)]
        lock(&self.q).push_back(v);
    }

    /// Takes the oldest value, if any.
    #[inline]
    pub(crate) fn pop(&self) -> Option<T> {
        #[cfg(not(loom))]
        loop {
            match self.q.steal() {
                crossbeam_deque::Steal::Success(v) => return Some(v),
                crossbeam_deque::Steal::Empty => return None,
                crossbeam_deque::Steal::Retry => {}
            }
        }
        #[cfg(loom)]
        lock(&self.q).pop_front()
    }

    /// Whether nothing is queued (the pre-park re-check of the idle protocol).
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        #[cfg(not(loom))]
        return self.q.is_empty();
        #[cfg(loom)]
        lock(&self.q).is_empty()
    }
}
