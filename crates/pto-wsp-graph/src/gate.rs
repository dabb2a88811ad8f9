//! Issue gates (`pipeline_depth D SCOPE`, the concurrency-mechanisms specification's `IssueGate`):
//! at most `D` tasks issued and not yet finished per scope — one global limit, one per stream, or
//! one per pool — which is how a schedule asks for double or triple buffering.
//!
//! A gate is a set of counting semaphores, one per scope instance. [`IssueGate::try_acquire`]
//! takes a slot without blocking; [`IssueGate::acquire`] sleeps on a condition variable until a
//! slot frees (never spins). Either returns a [`Permit`] that gives the slot back when dropped.
//!
//! # Bound and orderings
//!
//! Each scope's count changes only by a compare-exchange that refuses to go above `D` and by the
//! permit's `fetch_sub`, so at no point in the count's modification order are more than `D`
//! permits of that scope alive: the bound is exact, not approximate. Sleeping uses the same
//! no-lost-wakeup argument as the task window ([`crate::window`]): a waiter, holding the mutex,
//! increments `waiters`, issues a `SeqCst` fence and re-reads its count before sleeping; a
//! releaser decrements the count, issues a `SeqCst` fence, then reads `waiters` and notifies
//! under the mutex. Releasing a
//! permit happens before the acquisition that reuses its slot (a semaphore's usual
//! release/acquire edge).

use crossbeam_utils::CachePadded;
use pto_wsp_ir::{ExecPool, GateScope};

use crate::counters::{Counters, pool_index};
use crate::sync::{Arc, AtomicU32, AtomicUsize, Condvar, Mutex, Ordering, fence, lock, wait};

/// A counting gate per scope instance (see the module docs).
#[derive(Debug)]
pub struct IssueGate {
    depth: u32,
    scope: GateScope,
    streams: usize,
    slots: Box<[CachePadded<AtomicU32>]>,
    waiters: AtomicUsize,
    lock: Mutex<()>,
    freed: Condvar,
    counters: Arc<Counters>,
}

/// One issued task's slot in an [`IssueGate`]; dropping it (or [`Permit::release`]) frees the
/// slot and wakes a waiter if there is one.
#[derive(Debug)]
#[must_use = "dropping a permit releases it at once"]
pub struct Permit<'a> {
    gate: &'a IssueGate,
    slot: usize,
}

impl Permit<'_> {
    /// The scope instance this permit counts against.
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// Give the slot back (same as dropping the permit).
    pub fn release(self) {}
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        self.gate.release_slot(self.slot);
    }
}

impl IssueGate {
    /// A gate of depth `depth` (at least 1) in `scope`; `streams` (at least 1) is the number of
    /// streams for [`GateScope::PerStream`].
    pub fn new(depth: u32, scope: GateScope, streams: usize, counters: Arc<Counters>) -> IssueGate {
        let streams = streams.max(1);
        let n = match scope {
            GateScope::Global => 1,
            GateScope::PerStream => streams,
            GateScope::PerPool => 3,
        };
        IssueGate {
            depth: depth.max(1),
            scope,
            streams,
            slots: (0..n)
                .map(|_| CachePadded::new(AtomicU32::new(0)))
                .collect(),
            waiters: AtomicUsize::new(0),
            lock: Mutex::new(()),
            freed: Condvar::new(),
            counters,
        }
    }

    /// The depth `D`.
    pub fn depth(&self) -> u32 {
        self.depth
    }

    /// The scope.
    pub fn scope(&self) -> GateScope {
        self.scope
    }

    /// Number of scope instances (1, the stream count, or 3 pools).
    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    /// The scope instance a task of `stream` in `pool` counts against: 0 for a global gate,
    /// `stream mod streams` per stream, the pool index (vector 0, cube 1, any 2) per pool.
    pub fn slot_of(&self, stream: u32, pool: ExecPool) -> usize {
        match self.scope {
            GateScope::Global => 0,
            GateScope::PerStream => stream as usize % self.streams,
            GateScope::PerPool => pool_index(pool),
        }
    }

    /// Issued, unfinished tasks of scope instance `slot` now.
    pub fn in_flight(&self, slot: usize) -> u32 {
        self.slots[slot].load(Ordering::SeqCst)
    }

    /// Take a slot for a task of `stream` in `pool` if its scope has one free; `None` (counted
    /// as a gate stall) if the scope is full.
    pub fn try_acquire(&self, stream: u32, pool: ExecPool) -> Option<Permit<'_>> {
        let slot = self.slot_of(stream, pool);
        if self.take(slot) {
            Some(Permit { gate: self, slot })
        } else {
            self.counters.gate_stall();
            None
        }
    }

    /// Take a slot for a task of `stream` in `pool`, sleeping until one frees if the scope is
    /// full (counted once as a gate stall).
    pub fn acquire(&self, stream: u32, pool: ExecPool) -> Permit<'_> {
        let slot = self.slot_of(stream, pool);
        if self.take(slot) {
            return Permit { gate: self, slot };
        }
        self.counters.gate_stall();
        loop {
            {
                let mut g = lock(&self.lock);
                self.waiters.fetch_add(1, Ordering::SeqCst);
                fence(Ordering::SeqCst);
                while self.slots[slot].load(Ordering::SeqCst) >= self.depth {
                    g = wait(&self.freed, g);
                }
                self.waiters.fetch_sub(1, Ordering::SeqCst);
            }
            if self.take(slot) {
                return Permit { gate: self, slot };
            }
        }
    }

    /// Increment `slot` unless it is at the depth.
    fn take(&self, slot: usize) -> bool {
        let c = &self.slots[slot];
        let mut cur = c.load(Ordering::SeqCst);
        while cur < self.depth {
            match c.compare_exchange_weak(cur, cur + 1, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
        false
    }

    fn release_slot(&self, slot: usize) {
        let before = self.slots[slot].fetch_sub(1, Ordering::SeqCst);
        debug_assert!(before > 0, "gate: release of an empty slot");
        fence(Ordering::SeqCst);
        if self.waiters.load(Ordering::SeqCst) > 0 {
            let _g = lock(&self.lock);
            self.freed.notify_all();
        }
    }
}
