//! Idle workers: spin briefly, then park; wake one sleeper when work appears.
//!
//! Why: waking a parked thread costs microseconds, spinning costs a core. A worker that finds no
//! work first retries for a short while (so a task made ready a moment later is picked up at
//! once), then parks on a condition variable and uses no CPU until someone publishes work or the
//! run ends.
//!
//! # Protocol (no lost wake-ups)
//!
//! - `events`: a counter bumped whenever work is published to parked workers or the run's state
//!   changes (finished, aborted, orchestration done).
//! - `sleepers`: workers parked or about to park.
//!
//! A worker about to park reads `events` (E), increments `sleepers` (SeqCst), then *re-checks
//! for work* ([`Idle::park`]'s `has_work` callback), and parks only while `events == E`.
//! A publisher first makes its work visible (a queue push), then executes a SeqCst fence and
//! reads `sleepers`; if it is non-zero it bumps `events` and notifies one sleeper under the lock.
//! By the SeqCst total order, either the publisher sees the increment of `sleepers` (and wakes
//! someone, whose `events` check fails), or the parking worker's re-check comes after the push
//! and finds the work. The sleeper that wakes and finds nothing parks again; the one that finds
//! work wakes another if work remains (the worker loop notifies after each push).
//!
//! State changes ([`Idle::wake_all`]) bump `events` under the lock and notify everyone.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering, fence};
use std::sync::{Condvar, Mutex};

/// Spin rounds (each a few `spin_loop` hints) before yielding.
const SPIN_ROUNDS: u32 = 64;
/// Yield rounds before parking.
const YIELD_ROUNDS: u32 = 16;

/// Sleep/wake coordination of one run's workers (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Idle {
    events: AtomicU64,
    sleepers: AtomicUsize,
    lock: Mutex<()>,
    cv: Condvar,
}

impl Idle {
    /// A publisher made work visible: wake one sleeper if anyone sleeps.
    #[inline]
    pub(crate) fn notify_one(&self) {
        fence(Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            let _g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
            self.events.fetch_add(1, Ordering::SeqCst);
            self.cv.notify_one();
        }
    }

    /// The run's state changed (finished, aborted, orchestration done): wake everyone.
    pub(crate) fn wake_all(&self) {
        let _g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        self.events.fetch_add(1, Ordering::SeqCst);
        self.cv.notify_all();
    }

    /// The backoff step before parking: `round` counts consecutive failed searches. Returns
    /// `false` once the worker should park.
    #[inline]
    pub(crate) fn backoff(round: u32) -> bool {
        if round < SPIN_ROUNDS {
            for _ in 0..(1 << (round / 16).min(4)) {
                std::hint::spin_loop();
            }
            true
        } else if round < SPIN_ROUNDS + YIELD_ROUNDS {
            std::thread::yield_now();
            true
        } else {
            false
        }
    }

    /// Park until work may have appeared or the state changed. `has_work` is the re-check made
    /// after announcing the sleep; if it returns `true` the worker does not park.
    pub(crate) fn park(&self, has_work: impl FnOnce() -> bool) {
        let seen = self.events.load(Ordering::SeqCst);
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        if !has_work() {
            let mut g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
            while self.events.load(Ordering::SeqCst) == seen {
                g = self.cv.wait(g).unwrap_or_else(|p| p.into_inner());
            }
        }
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
    }
}
