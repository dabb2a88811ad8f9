//! Idle workers: spin briefly, then park; wake a sleeper that can run the work that appeared.
//!
//! Why: waking a parked thread costs microseconds, spinning costs a core. A worker that finds no
//! work first retries for a short while (so a task made ready a moment later is picked up at
//! once), then parks on its own condition variable and uses no CPU until someone hands it work
//! or the run's state changes.
//!
//! Why one slot per worker and not one shared condition variable: workers are not
//! interchangeable. Under a pool split a vector worker cannot run a cube task, and a placed task
//! waits in its target's inbox. A shared `notify_one` may wake a worker that cannot run the task
//! while the one that can stays parked (and the woken one, seeing a non-empty queue it cannot
//! pop, would spin). So a publisher names which workers fit ([`Idle::notify`]) and wakes one of
//! those, and a worker's pre-park re-check looks only at queues it can pop.
//!
//! # Protocol (no lost wake-ups)
//!
//! Per worker: `asleep` (set while parked or about to park) and a wake token (`woken`, under the
//! slot's mutex). Shared: `sleepers`, the number of workers with `asleep` set (a fast path for
//! publishers: zero means nobody to wake).
//!
//! - A worker about to park sets `asleep`, increments `sleepers`, executes a SeqCst fence, then
//!   *re-checks for work* (the `has_work` callback of [`Idle::park`]: the queues it can pop, the
//!   run's flags). Only if there is none does it wait, under the slot's mutex, until its token is
//!   set; it then clears the token.
//! - A publisher first makes its work visible (a queue push), executes a SeqCst fence, and reads
//!   `sleepers`; if non-zero it looks for a fitting worker whose `asleep` it can swap from
//!   `true` to `false` (the swap *claims* that sleeper, so two publishers never spend their
//!   wake-ups on the same one), and sets that worker's token under its mutex and notifies.
//!
//! By the SeqCst order of the two fences, either the publisher sees `asleep` (and hands the
//! sleeper a token, which it cannot miss because token and wait share the mutex), or the
//! worker's re-check comes after the push and finds the work. A token set for a worker that did
//! not wait after all stays set and makes its next park return at once: one extra search, never a
//! lost wake-up.
//!
//! State changes ([`Idle::wake_all`]: finished, aborted, orchestration done) are made visible
//! first, then every worker's token is set.

use crossbeam_utils::CachePadded;

use crate::sync::{
    AtomicBool, AtomicUsize, Condvar, Mutex, Ordering, fence, lock, spin_hint, wait,
};

/// Spin rounds (each a few `spin_loop` hints) before yielding.
#[cfg(not(loom))]
const SPIN_ROUNDS: u32 = 64;
/// Yield rounds before parking.
#[cfg(not(loom))]
const YIELD_ROUNDS: u32 = 16;
/// Under loom, one yield and then park: the models explore the park path, not the spinning.
#[cfg(loom)]
const SPIN_ROUNDS: u32 = 0;
#[cfg(loom)]
const YIELD_ROUNDS: u32 = 1;

/// One worker's parking place.
#[derive(Debug, Default)]
struct Slot {
    asleep: AtomicBool,
    woken: Mutex<bool>,
    cv: Condvar,
}

impl Slot {
    fn wake(&self) {
        let mut w = lock(&self.woken);
        *w = true;
        self.cv.notify_one();
    }
}

/// Sleep/wake coordination of one run's workers (see the module docs).
#[derive(Debug)]
pub(crate) struct Idle {
    sleepers: CachePadded<AtomicUsize>,
    slots: Box<[CachePadded<Slot>]>,
}

impl Idle {
    /// Coordination for `workers` workers.
    pub(crate) fn new(workers: usize) -> Idle {
        Idle {
            sleepers: CachePadded::new(AtomicUsize::new(0)),
            slots: (0..workers.max(1))
                .map(|_| CachePadded::default())
                .collect(),
        }
    }

    /// A publisher made work visible that the workers for which `fits` holds can run: wake one
    /// of them if one sleeps, trying `prefer` first (the worker the work was placed on).
    #[inline]
    pub(crate) fn notify(&self, prefer: Option<usize>, fits: impl Fn(usize) -> bool) {
        fence(Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            self.notify_slow(prefer, fits);
        }
    }

    #[cold]
    fn notify_slow(&self, prefer: Option<usize>, fits: impl Fn(usize) -> bool) {
        let n = self.slots.len();
        let start = prefer.unwrap_or(0) % n;
        for k in 0..n {
            let w = (start + k) % n;
            let slot = &self.slots[w];
            if fits(w)
                && slot.asleep.load(Ordering::SeqCst)
                && slot.asleep.swap(false, Ordering::SeqCst)
            {
                slot.wake();
                return;
            }
        }
    }

    /// Whether some worker is parked, or about to (a relaxed load: a hint for batching, not a
    /// wake-up decision — [`Idle::notify`] makes those).
    #[inline]
    pub(crate) fn any_asleep(&self) -> bool {
        self.sleepers.load(Ordering::Relaxed) > 0
    }

    /// Whether every worker is parked, or about to, so nobody looks for work unless woken (a
    /// relaxed load: a hint for batching, not a wake-up decision — [`Idle::notify`] makes those).
    #[inline]
    pub(crate) fn all_asleep(&self) -> bool {
        self.sleepers.load(Ordering::Relaxed) >= self.slots.len()
    }

    /// Workers parked or about to park (tests wait for a parked worker with it).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn sleeping(&self) -> usize {
        self.sleepers.load(Ordering::SeqCst)
    }

    /// Whether worker `w` is parked (or about to) and no wake-up has claimed it yet: a
    /// notification claims a sleeper in the notifier's thread, so a test can see whom it chose.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn is_asleep(&self, w: usize) -> bool {
        self.slots[w].asleep.load(Ordering::SeqCst)
    }

    /// The run's state changed (finished, aborted, orchestration done): wake everyone. The change
    /// must be visible (stored) before the call.
    pub(crate) fn wake_all(&self) {
        fence(Ordering::SeqCst);
        for slot in self.slots.iter() {
            slot.asleep.store(false, Ordering::SeqCst);
            slot.wake();
        }
    }

    /// The backoff step before parking: `round` counts consecutive failed searches. Returns
    /// `false` once the worker should park.
    #[inline]
    pub(crate) fn backoff(round: u32) -> bool {
        if round < SPIN_ROUNDS {
            for _ in 0..(1 << (round / 16).min(4)) {
                spin_hint();
            }
            true
        } else if round < SPIN_ROUNDS + YIELD_ROUNDS {
            crate::sync::thread::yield_now();
            true
        } else {
            false
        }
    }

    /// Park worker `w` until it is handed work or the state changed. `has_work` is the re-check
    /// made after announcing the sleep; if it returns `true` the worker does not park.
    pub(crate) fn park(&self, w: usize, has_work: impl FnOnce() -> bool) {
        let slot = &self.slots[w];
        slot.asleep.store(true, Ordering::SeqCst);
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if !has_work() {
            let mut g = lock(&slot.woken);
            while !*g {
                g = wait(&slot.cv, g);
            }
            *g = false;
        }
        slot.asleep.store(false, Ordering::SeqCst);
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sync::AtomicU32;

    /// A vector-only notification must reach the sleeping worker that fits, not another sleeper.
    #[test]
    fn notify_wakes_a_fitting_sleeper() {
        let idle = Idle::new(2);
        let work = AtomicU32::new(0);
        std::thread::scope(|s| {
            // Worker 0 cannot run the work; it parks and must stay parked until wake_all.
            let h0 = s.spawn(|| {
                idle.park(0, || false);
                work.load(Ordering::SeqCst)
            });
            let h1 = s.spawn(|| {
                idle.park(1, || work.load(Ordering::SeqCst) > 0);
                work.load(Ordering::SeqCst)
            });
            // Wait until both announced their sleep (they may still be before their wait).
            while idle.sleepers.load(Ordering::SeqCst) < 2 {
                std::thread::yield_now();
            }
            work.store(1, Ordering::SeqCst);
            idle.notify(None, |w| w == 1);
            assert_eq!(h1.join().unwrap(), 1);
            assert!(idle.slots[0].asleep.load(Ordering::SeqCst));
            work.store(2, Ordering::SeqCst);
            idle.wake_all();
            assert_eq!(h0.join().unwrap(), 2);
        });
    }
}
