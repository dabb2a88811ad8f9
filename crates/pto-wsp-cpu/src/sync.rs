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

    /// Takes the oldest value, if any. An empty inbox (the common case: an executor looks at
    /// it after every own task) is answered by two plain loads: the injector's `steal` finds
    /// it empty only after a sequentially consistent fence.
    #[inline]
    pub(crate) fn pop(&self) -> Option<T> {
        #[cfg(not(loom))]
        {
            if self.q.is_empty() {
                return None;
            }
            loop {
                match self.q.steal() {
                    crossbeam_deque::Steal::Success(v) => return Some(v),
                    crossbeam_deque::Steal::Empty => return None,
                    crossbeam_deque::Steal::Retry => {}
                }
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::Inbox;

    /// `pop` answers an empty inbox without stealing: it must still return every value pushed,
    /// in order, whether the inbox emptied in between or not, and across the injector's blocks.
    #[test]
    fn an_inbox_pops_every_value_pushed_in_order_and_none_when_empty() {
        let q = Inbox::<u32>::default();
        assert_eq!(q.pop(), None);
        let mut next = 0u32;
        let mut expect = 0u32;
        for round in 1..200u32 {
            for _ in 0..round % 70 {
                q.push(next);
                next += 1;
            }
            for _ in 0..(round * 7) % 90 {
                match q.pop() {
                    Some(v) => {
                        assert_eq!(v, expect);
                        expect += 1;
                    }
                    None => {
                        assert_eq!(expect, next, "a value pushed was not popped");
                        assert!(q.is_empty());
                    }
                }
            }
        }
        while let Some(v) = q.pop() {
            assert_eq!(v, expect);
            expect += 1;
        }
        assert_eq!(expect, next);
    }

    /// Values pushed by another thread are all popped by this one (the injector's
    /// synchronisation behind the emptiness test).
    #[test]
    fn an_inbox_fed_by_another_thread_delivers_everything() {
        const N: u32 = 20_000;
        let q = Inbox::<u32>::default();
        std::thread::scope(|s| {
            s.spawn(|| (0..N).for_each(|v| q.push(v)));
            let mut expect = 0;
            while expect < N {
                if let Some(v) = q.pop() {
                    assert_eq!(v, expect);
                    expect += 1;
                } else {
                    super::thread::yield_now();
                }
            }
        });
        assert_eq!(q.pop(), None);
    }
}
