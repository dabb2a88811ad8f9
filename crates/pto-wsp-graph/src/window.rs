//! The task window (`task_window N MODE`, the concurrency-mechanisms specification's
//! `WindowState`): at most `N` tasks in flight — submitted and not yet completed — so that per-task
//! metadata stays bounded while the graph is built as it runs.
//!
//! The submitter calls [`WindowState::enter`] once per task before submitting it; completion
//! calls [`WindowState::leave`] (or [`WindowState::leave_n`] for a batch). When the window is
//! full, the mode decides: `stall` blocks the submitter until completions free room (below; it
//! sleeps on a condition variable, never spins), `abort` returns a [`WindowError`], `benchmark`
//! counts the overflow and admits the task anyway.
//!
//! A stalled submitter resumes once an eighth of the window is free ([`resume_margin`]; for a
//! window under 8 tasks, once one slot is): a submitter that outruns the completions would
//! otherwise sleep and be woken for every batch of completions the workers report, one
//! condition-variable round trip per batch on both sides, while the window stays full. Waiting
//! for more room than one slot cannot deadlock: before a submitter stalls everything it
//! submitted can run (the streamed sink publishes its held tasks first), and the tasks in flight
//! depend only on earlier tasks, so they complete and the count falls to zero if need be.
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
//! does not wait). With the resume margin the completer notifies when the count it leaves is
//! below the resume level; every completion after the one that crosses it leaves a count below
//! it too, so the argument holds for the crossing decrement or any later one. The fences are
//! needed for loom, which models `SeqCst` *accesses* only as acquire/release (it reported a
//! lost wakeup in the gate without them), and they make the argument independent of the
//! accesses' own orderings. On the fast path (window not full,
//! nobody stalled) entry is one compare-exchange and exit one `fetch_sub`, a fence and a load.
//! The window is a pure count: it orders nothing else.
//!
//! # Reserved slots
//!
//! A submitter that admits many tasks in a row may take several slots in one step
//! ([`WindowState::reserve`]: as many as the window has free, up to a maximum, the first of them
//! used at once) and hand them to its next tasks with plain bookkeeping ([`WindowState::take`]),
//! giving back what it did not use ([`WindowState::settle`]) before it waits for anything and at
//! the end. A submitter holding a reserved slot would have been admitted at once anyway (the
//! tasks really in flight are the count less the unused reserved slots, so fewer than the
//! capacity), and one holding none enters exactly as [`WindowState::enter`] does: when it
//! blocks, fails or overflows is unchanged. What it observes is unchanged too: each task taken
//! records the tasks really in flight then (the count less the unused slots) into the high
//! water, and the submissions and the high water reach the window and its counters at the
//! settle. Giving slots back is a completion without the completion count: the same fence and
//! wake-up as [`WindowState::leave_n`].

use pto_wsp_ir::WindowMode;

use crate::counters::Counters;
use crate::sync::{Arc, AtomicBool, AtomicUsize, Condvar, Mutex, Ordering, fence, lock, wait};

/// How many slots beyond one a stalled submitter waits to see free before it resumes: an eighth
/// of a window of `capacity` (0 under 8 tasks, so a small window resumes on each completion).
pub fn resume_margin(capacity: usize) -> usize {
    capacity / 8
}

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

/// Window slots one submitter reserved ([`WindowState::reserve`]) and what it admitted on them
/// since its last [`WindowState::settle`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Reservation {
    /// Slots counted in flight and not used yet.
    slots: usize,
    /// Tasks admitted since the last settle.
    used: usize,
    /// Most tasks really in flight when one of them was admitted.
    peak: usize,
}

impl Reservation {
    /// Slots held unused.
    pub fn slots(&self) -> usize {
        self.slots
    }
}

/// Bounded count of in-flight tasks (see the module docs).
#[derive(Debug)]
pub struct WindowState {
    capacity: usize,
    /// A stalled submitter waits while `in_flight >= resume_below` (the module docs).
    resume_below: usize,
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
        let capacity = capacity.max(1);
        WindowState {
            capacity,
            resume_below: capacity - resume_margin(capacity),
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

    /// Admit one task, reserving up to `max - 1` further slots for the next tasks when the
    /// window has them free (mode `stall` waits for space, `abort` fails when full, `benchmark`
    /// overflows by one task only). `r` must hold no unused slot.
    pub fn reserve(&self, r: &mut Reservation, max: usize) -> Result<(), WindowError> {
        debug_assert_eq!(r.slots, 0, "window: reserving while holding slots");
        let mut cur = self.in_flight.load(Ordering::SeqCst);
        loop {
            if cur >= self.capacity {
                // Full (or closed): one task, exactly as `enter` admits it.
                return self.enter();
            }
            if self.closed.load(Ordering::SeqCst) {
                return Err(WindowError::Closed);
            }
            let k = (self.capacity - cur).min(max.max(1));
            match self.in_flight.compare_exchange_weak(
                cur,
                cur + k,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => {
                    r.slots = k - 1;
                    r.used += 1;
                    r.peak = r.peak.max(cur + 1);
                    return Ok(());
                }
                Err(now) => cur = now,
            }
        }
    }

    /// Admit one task on a slot `r` reserved, if it holds one: plain bookkeeping and one load.
    #[inline(always)]
    pub fn take(&self, r: &mut Reservation) -> bool {
        if r.slots == 0 {
            return false;
        }
        r.slots -= 1;
        r.used += 1;
        // The tasks really in flight now, this one included.
        let now = self
            .in_flight
            .load(Ordering::Relaxed)
            .saturating_sub(r.slots);
        if now > r.peak {
            r.peak = now;
        }
        true
    }

    /// Give back the slots `r` holds unused, and record its submissions and high water.
    pub fn settle(&self, r: &mut Reservation) {
        if r.used == 0 && r.slots == 0 {
            return;
        }
        let Reservation { slots, used, peak } = std::mem::take(r);
        if used > 0 {
            self.counters.submitted(used as u64);
            self.high_water.fetch_max(peak, Ordering::Relaxed);
            self.counters.in_flight(peak as u64);
        }
        self.free(slots, 0);
    }

    fn admitted(&self, now: usize) {
        if now > self.high_water.load(Ordering::Relaxed) {
            self.high_water.fetch_max(now, Ordering::Relaxed);
        }
        self.counters.submitted(1);
        self.counters.in_flight(now as u64);
    }

    /// Block until the window has room to resume ([`resume_margin`]) or is closed (or a completion
    /// woke us; the caller re-checks).
    fn wait_for_space(&self) {
        self.counters.window_stall();
        let mut g = lock(&self.lock);
        self.waiters.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        while self.in_flight.load(Ordering::SeqCst) >= self.resume_below
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
        self.free(n, n);
    }

    /// `n` slots are free again, `completed` of them by completions: wake a stalled submitter
    /// (see the module docs).
    fn free(&self, n: usize, completed: usize) {
        if n == 0 {
            return;
        }
        let before = self.in_flight.fetch_sub(n, Ordering::SeqCst);
        let after = before.wrapping_sub(n);
        debug_assert!(
            before >= n,
            "window: {n} slots freed with {before} in flight"
        );
        if completed > 0 {
            self.counters.completed(completed as u64);
        }
        fence(Ordering::SeqCst);
        if after < self.resume_below && self.waiters.load(Ordering::SeqCst) > 0 {
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

    /// A seeded generator of numbers below its argument (a linear congruential step): the
    /// random runs below, repeatable.
    fn below(mut seed: u64) -> impl FnMut(u64) -> u64 {
        move |n| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) % n
        }
    }

    /// Tasks admitted on reserved slots, with completions arriving while slots are held, leave
    /// the window, its verdicts and its counters exactly as entering task by task does (the
    /// oracle: a second window driven by `enter`).
    #[test]
    fn reserved_slots_observe_as_entering_one_by_one() {
        let mut next = below(0x9e37_79b9_7f4a_7c15);
        for mode in [WindowMode::Abort, WindowMode::Benchmark, WindowMode::Stall] {
            for capacity in 1..7 {
                for max in [1, 2, 3, 8] {
                    let (ca, cb) = (Arc::new(Counters::new(1)), Arc::new(Counters::new(1)));
                    let a = WindowState::new(capacity, mode, ca.clone());
                    let b = WindowState::new(capacity, mode, cb.clone());
                    let mut r = Reservation::default();
                    let mut admitted = 0usize;
                    for _ in 0..400 {
                        let real = a.in_flight();
                        if next(3) == 0 && real > 0 {
                            let n = 1 + next(real as u64) as usize;
                            a.leave_n(n);
                            b.leave_n(n);
                            continue;
                        }
                        if mode == WindowMode::Stall && real >= capacity {
                            // Would block: the sink settles before it waits.
                            b.settle(&mut r);
                            assert_eq!(b.in_flight(), real);
                            let n = 1 + next(real as u64) as usize;
                            a.leave_n(n);
                            b.leave_n(n);
                            continue;
                        }
                        if next(5) == 0 {
                            b.settle(&mut r);
                        }
                        let ea = a.enter();
                        let eb = if b.take(&mut r) {
                            Ok(())
                        } else {
                            b.reserve(&mut r, max)
                        };
                        assert_eq!(ea, eb, "{mode:?} capacity {capacity} max {max}");
                        admitted += usize::from(ea.is_ok());
                        assert_eq!(b.in_flight() - r.slots(), a.in_flight());
                        assert!(r.slots() < max);
                    }
                    b.settle(&mut r);
                    assert_eq!(b.in_flight(), a.in_flight());
                    assert_eq!(b.high_water(), a.high_water());
                    assert_eq!(cb.snapshot(), ca.snapshot());
                    assert_eq!(ca.snapshot().tasks_submitted, admitted as u64);
                }
            }
        }
    }

    /// The high water counts the tasks really in flight, never the reserved slots: in runs
    /// that never fill the window (so a count that took the unused reserved slots in would be
    /// above it), it equals an independent count (the most tasks admitted and not yet
    /// completed at once, kept by plain arithmetic), and so does the counters' in-flight mark.
    #[test]
    fn high_water_of_a_window_never_full_is_the_tasks_in_flight() {
        let mut next = below(0x2545_f491_4f6c_dd1d);
        for mode in [WindowMode::Abort, WindowMode::Benchmark, WindowMode::Stall] {
            for capacity in [16usize, 64, 1000] {
                for max in [2, 8, 32] {
                    let counters = Arc::new(Counters::new(1));
                    let w = WindowState::new(capacity, mode, counters.clone());
                    let mut r = Reservation::default();
                    // The independent count: tasks admitted and not completed, and its maximum.
                    let (mut real, mut most) = (0usize, 0usize);
                    // Completions keep the tasks in flight at most half the window.
                    let limit = capacity / 2;
                    for _ in 0..2000 {
                        if real > 0 && (real >= limit || next(3) == 0) {
                            let n = 1 + next(real as u64) as usize;
                            w.leave_n(n);
                            real -= n;
                            continue;
                        }
                        if next(7) == 0 {
                            w.settle(&mut r);
                        }
                        if !w.take(&mut r) {
                            w.reserve(&mut r, max).unwrap();
                        }
                        real += 1;
                        most = most.max(real);
                        assert!(w.in_flight() <= capacity);
                    }
                    w.settle(&mut r);
                    assert!(most < capacity);
                    assert_eq!(w.in_flight(), real);
                    assert_eq!(
                        w.high_water(),
                        most,
                        "{mode:?} capacity {capacity} max {max}"
                    );
                    assert_eq!(counters.snapshot().in_flight_hwm, most as u64);
                }
            }
        }
    }
}
