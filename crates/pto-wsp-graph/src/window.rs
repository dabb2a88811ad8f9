//! The task window (`task_window N MODE`, the concurrency-mechanisms specification's
//! `WindowState`): at most `N` tasks in flight — submitted and not yet completed — so that per-task
//! metadata stays bounded while the graph is built as it runs.
//!
//! The submitter calls [`WindowState::enter`] once per task before submitting it; completion
//! calls [`WindowState::leave`] (or [`WindowState::leave_n`] for a batch). When the window is
//! full, the mode decides: `stall` blocks the submitter until a completion frees a slot (it
//! sleeps on a condition variable, never spins), `abort` returns a [`WindowError`], `benchmark`
//! counts the overflow and admits the task anyway.
//!
//! # Orderings and the no-lost-wakeup argument
//!
//! `in_flight` is changed with a compare-exchange on entry and a `fetch_sub` on exit; `waiters`
//! counts stalled submitters. A stalled submitter, holding the mutex, increments `waiters`, then
//! re-reads `in_flight`, and waits only if the window is still full. A completer decrements
//! `in_flight`, then reads `waiters`, and if it is non-zero takes the mutex and notifies. Each
//! side puts a `SeqCst` fence between its write and its read (a store-buffering pattern): of the
//! two fences, whichever comes second in their total order makes its side see the other's write.
//! So either the completer sees the waiter (and notifies; since it must take the mutex first, the
//! notification lands after the submitter is waiting), or the submitter sees the decrement (and
//! does not wait). The fences are needed for loom, which models `SeqCst` *accesses* only as
//! acquire/release (it reported a lost wakeup in the gate without them), and they make the
//! argument independent of the accesses' own orderings. On the fast path (window not full,
//! nobody stalled) entry is one compare-exchange and exit one `fetch_sub`, a fence and a load.
//! The window is a pure count: it orders nothing else.

use pto_wsp_ir::WindowMode;

use crate::counters::Counters;
use crate::sync::{Arc, AtomicBool, AtomicUsize, Condvar, Mutex, Ordering, fence, lock, wait};

/// The task window refused a task (mode `abort`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WindowError {
    /// The window was full.
    #[error("task window of {capacity} is full ({in_flight} tasks in flight) — mode abort")]
    Full {
        /// The window size `N`.
        capacity: usize,
        /// Tasks in flight when the submission was refused.
        in_flight: usize,
    },
    /// The window was closed ([`WindowState::close`]): the run is stopping.
    #[error("task window closed: the run is stopping")]
    Closed,
}

/// Bounded count of in-flight tasks (see the module docs).
#[derive(Debug)]
pub struct WindowState {
    capacity: usize,
    mode: WindowMode,
    in_flight: AtomicUsize,
    waiters: AtomicUsize,
    high_water: AtomicUsize,
    closed: AtomicBool,
    lock: Mutex<()>,
    space: Condvar,
    counters: Arc<Counters>,
}

impl WindowState {
    /// A window of `capacity` tasks (at least 1) in `mode`, counting into `counters`.
    pub fn new(capacity: usize, mode: WindowMode, counters: Arc<Counters>) -> WindowState {
        WindowState {
            capacity: capacity.max(1),
            mode,
            in_flight: AtomicUsize::new(0),
            waiters: AtomicUsize::new(0),
            high_water: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            lock: Mutex::new(()),
            space: Condvar::new(),
            counters,
        }
    }

    /// The window size.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The overflow mode.
    pub fn mode(&self) -> WindowMode {
        self.mode
    }

    /// Tasks in flight now.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// Most tasks in flight at once so far (above the capacity only in mode `benchmark`).
    pub fn high_water(&self) -> usize {
        self.high_water.load(Ordering::Relaxed)
    }

    /// Submitters currently stalled (mode `stall`).
    pub fn stalled(&self) -> usize {
        self.waiters.load(Ordering::SeqCst)
    }

    /// Admit one task. `stall` waits for space; `abort` fails when full; `benchmark` counts the
    /// overflow and admits.
    pub fn enter(&self) -> Result<(), WindowError> {
        let mut cur = self.in_flight.load(Ordering::SeqCst);
        loop {
            if self.closed.load(Ordering::SeqCst) {
                return Err(WindowError::Closed);
            }
            if cur >= self.capacity {
                match self.mode {
                    WindowMode::Stall => {
                        self.wait_for_space();
                        cur = self.in_flight.load(Ordering::SeqCst);
                        continue;
                    }
                    WindowMode::Abort => {
                        self.counters.window_overflow();
                        return Err(WindowError::Full {
                            capacity: self.capacity,
                            in_flight: cur,
                        });
                    }
                    WindowMode::Benchmark => {
                        self.counters.window_overflow();
                        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                        self.admitted(now);
                        return Ok(());
                    }
                }
            }
            match self.in_flight.compare_exchange_weak(
                cur,
                cur + 1,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => {
                    self.admitted(cur + 1);
                    return Ok(());
                }
                Err(now) => cur = now,
            }
        }
    }

    fn admitted(&self, now: usize) {
        if now > self.high_water.load(Ordering::Relaxed) {
            self.high_water.fetch_max(now, Ordering::Relaxed);
        }
        self.counters.submitted(1);
        self.counters.in_flight(now as u64);
    }

    /// Block until the window is not full (or a completion woke us; the caller re-checks).
    fn wait_for_space(&self) {
        self.counters.window_stall();
        let mut g = lock(&self.lock);
        self.waiters.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        while self.in_flight.load(Ordering::SeqCst) >= self.capacity
            && !self.closed.load(Ordering::SeqCst)
        {
            g = wait(&self.space, g);
        }
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        drop(g);
    }

    /// Stop admitting: a stalled submitter wakes and every later [`WindowState::enter`] fails
    /// with [`WindowError::Closed`] (the run failed and nobody will complete tasks any more).
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let _g = lock(&self.lock);
        self.space.notify_all();
    }

    /// One task completed.
    pub fn leave(&self) {
        self.leave_n(1);
    }

    /// `n` tasks completed (a batch).
    pub fn leave_n(&self, n: usize) {
        if n == 0 {
            return;
        }
        let before = self.in_flight.fetch_sub(n, Ordering::SeqCst);
        debug_assert!(
            before >= n,
            "window: {n} completions with {before} in flight"
        );
        self.counters.completed(n as u64);
        fence(Ordering::SeqCst);
        if self.waiters.load(Ordering::SeqCst) > 0 {
            let _g = lock(&self.lock);
            self.space.notify_all();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn abort_message_names_window() {
        let w = WindowState::new(2, WindowMode::Abort, Arc::new(Counters::new(1)));
        w.enter().unwrap();
        w.enter().unwrap();
        let e = w.enter().unwrap_err();
        assert_eq!(
            e.to_string(),
            "task window of 2 is full (2 tasks in flight) — mode abort"
        );
        w.leave();
        w.enter().unwrap();
    }
}
