//! Batched publication of a streamed run's ready tasks: the orchestration thread hands the tasks
//! it finds ready (sealed with nothing left to wait for) to the workers through one
//! single-producer, multi-consumer ring, a batch at a time, instead of one push per task into
//! the shared injector.
//!
//! Why: with short tasks the workers wait at the orchestrator's frontier, so a per-task hand-off
//! makes every task's queue slot, and the queue's indices, move between the two cores (the
//! injector's push and steal were a fifth of a streamed run's time). Here the orchestrator
//! writes task ids into slots on lines nobody else writes and makes them visible by one release
//! store per batch; a worker claims up to a batch with one compare-exchange and keeps the tasks
//! on its own stack or deque (where idle peers may steal them).
//!
//! # What it promises
//!
//! - Every task [`ReadyRing::push`] accepted is returned by exactly one [`ReadyRing::take`],
//!   once it is published: when a batch fills ([`BATCH`] tasks), when a worker is parked
//!   (`push` is told so by its caller), or at [`ReadyRing::publish`], which the orchestrator
//!   calls after each batch of seals ([`crate::stream`]), before it waits for anything and when
//!   orchestration ends. So a task may sit unpublished only while the orchestrator is still
//!   submitting, and never while it waits.
//! - What the producer did before `push` (writing the task's table entries, sealing it)
//!   happens before whatever the consumer does after `take` returns it (release store of the
//!   published index, acquire load by the consumer).
//! - `push` never blocks: when the ring is full (consumers are [`CAPACITY`] tasks behind) it
//!   refuses the task and the caller hands it over another way.
//!
//! # Protocol
//!
//! Three monotonic `u64` positions: `tail` (next slot the producer writes; only the producer
//! touches it), `published` (slots below are visible), `claimed` (slots below were taken).
//! The producer writes slot `tail mod CAPACITY` only if `tail - claimed < CAPACITY`, i.e. the
//! slot's previous occupant was claimed. A consumer loads `claimed` and `published`, reads the
//! slots it wants and then compare-exchanges `claimed` forward; the values it read are valid iff
//! the exchange succeeds, since the producer can overwrite slot `c + j` only after `claimed`
//! passed `c + j`, which makes an exchange from `c` fail. Slots are atomics (relaxed), so a
//! racing read is a stale value, never undefined behaviour.

use crossbeam_utils::CachePadded;
use pto_wsp_graph::TaskId;

use crate::sync::{AtomicU32, AtomicU64, Ordering};

/// Tasks per published batch, and most tasks one [`ReadyRing::take`] claims.
#[cfg(not(loom))]
pub(crate) const BATCH: usize = 32;
/// Slots in the ring (a power of two, a multiple of [`BATCH`]).
#[cfg(not(loom))]
pub(crate) const CAPACITY: usize = 1 << 16;
/// Under loom a batch of two in a ring of four, so that the models fill the ring, wrap around
/// and claim several tasks at once within a few operations.
#[cfg(loom)]
pub(crate) const BATCH: usize = 2;
#[cfg(loom)]
pub(crate) const CAPACITY: usize = 4;

/// The producer's private positions (one cache line nobody else writes).
#[derive(Debug, Default)]
struct Producer {
    /// Next position to write.
    tail: AtomicU64,
    /// `claimed` as last loaded (a lower bound of it).
    seen_claimed: AtomicU64,
    /// `published` as last stored.
    seen_published: AtomicU64,
}

/// A single-producer, multi-consumer ring of ready tasks (see the module docs).
#[derive(Debug)]
pub(crate) struct ReadyRing {
    slots: Box<[AtomicU32]>,
    producer: CachePadded<Producer>,
    published: CachePadded<AtomicU64>,
    claimed: CachePadded<AtomicU64>,
}

impl ReadyRing {
    /// An empty ring.
    pub(crate) fn new() -> ReadyRing {
        ReadyRing {
            slots: (0..CAPACITY).map(|_| AtomicU32::new(0)).collect(),
            producer: CachePadded::new(Producer::default()),
            published: CachePadded::new(AtomicU64::new(0)),
            claimed: CachePadded::new(AtomicU64::new(0)),
        }
    }

    /// Producer only (one thread): append `t`. Returns `None` if the ring is full (the task was
    /// not taken), else whether this call published (the caller then wakes a parked worker).
    /// `urgent` publishes at once (a worker is parked) instead of when the batch fills.
    #[inline]
    pub(crate) fn push(&self, t: TaskId, urgent: bool) -> Option<bool> {
        let p = &*self.producer;
        let tail = p.tail.load(Ordering::Relaxed);
        if tail - p.seen_claimed.load(Ordering::Relaxed) >= CAPACITY as u64 {
            let claimed = self.claimed.load(Ordering::Acquire);
            p.seen_claimed.store(claimed, Ordering::Relaxed);
            if tail - claimed >= CAPACITY as u64 {
                return None;
            }
        }
        self.slots[tail as usize & (CAPACITY - 1)].store(t.0, Ordering::Relaxed);
        p.tail.store(tail + 1, Ordering::Relaxed);
        if urgent || tail + 1 - p.seen_published.load(Ordering::Relaxed) >= BATCH as u64 {
            self.publish_to(tail + 1);
            return Some(true);
        }
        Some(false)
    }

    /// Producer only: make every pushed task visible. Returns whether anything new was published.
    pub(crate) fn publish(&self) -> bool {
        let tail = self.producer.tail.load(Ordering::Relaxed);
        if tail == self.producer.seen_published.load(Ordering::Relaxed) {
            return false;
        }
        self.publish_to(tail);
        true
    }

    #[inline]
    fn publish_to(&self, tail: u64) {
        self.producer.seen_published.store(tail, Ordering::Relaxed);
        self.published.store(tail, Ordering::Release);
    }

    /// Whether published tasks wait to be claimed (a worker re-checks this before it parks).
    pub(crate) fn has_published(&self) -> bool {
        self.published.load(Ordering::SeqCst) > self.claimed.load(Ordering::SeqCst)
    }

    /// Consumer: claim up to [`BATCH`] published tasks into `out` (in push order); returns how
    /// many (0 if none is published).
    pub(crate) fn take(&self, out: &mut [u32; BATCH]) -> usize {
        loop {
            let c = self.claimed.load(Ordering::Acquire);
            let p = self.published.load(Ordering::Acquire);
            if p <= c {
                return 0;
            }
            let k = ((p - c) as usize).min(BATCH);
            for (j, o) in out[..k].iter_mut().enumerate() {
                *o = self.slots[(c as usize + j) & (CAPACITY - 1)].load(Ordering::Relaxed);
            }
            if self
                .claimed
                .compare_exchange(c, c + k as u64, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                return k;
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sync::AtomicBool;

    #[test]
    fn publishes_in_batches_and_on_demand() {
        let r = ReadyRing::new();
        let mut out = [0u32; BATCH];
        for i in 0..BATCH as u32 - 1 {
            assert_eq!(r.push(TaskId(i), false), Some(false));
        }
        assert_eq!(
            r.take(&mut out),
            0,
            "nothing visible before the batch fills"
        );
        assert_eq!(r.push(TaskId(BATCH as u32 - 1), false), Some(true));
        assert_eq!(r.take(&mut out), BATCH);
        assert_eq!(out.to_vec(), (0..BATCH as u32).collect::<Vec<_>>());
        assert_eq!(r.push(TaskId(100), false), Some(false));
        assert!(!r.has_published());
        assert!(r.publish());
        assert!(!r.publish());
        assert!(r.has_published());
        assert_eq!(r.take(&mut out), 1);
        assert_eq!(out[0], 100);
        assert_eq!(r.push(TaskId(101), true), Some(true));
        assert_eq!(r.take(&mut out), 1);
        assert_eq!(out[0], 101);
    }

    #[test]
    fn refuses_when_full() {
        let r = ReadyRing::new();
        for i in 0..CAPACITY as u32 {
            assert!(r.push(TaskId(i), false).is_some());
        }
        assert_eq!(r.push(TaskId(0), false), None);
        let mut out = [0u32; BATCH];
        assert_eq!(r.take(&mut out), BATCH);
        assert_eq!(out[0], 0);
        assert!(r.push(TaskId(7), false).is_some());
    }

    /// One producer, three consumers: every pushed task is taken exactly once, whatever the
    /// interleaving (compared with the set pushed).
    #[test]
    fn every_task_is_taken_exactly_once() {
        const N: u32 = 200_000;
        let r = ReadyRing::new();
        let seen: Vec<AtomicU32> = (0..N).map(|_| AtomicU32::new(0)).collect();
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    let mut out = [0u32; BATCH];
                    loop {
                        let finished = done.load(Ordering::Acquire);
                        let k = r.take(&mut out);
                        for &t in &out[..k] {
                            seen[t as usize].fetch_add(1, Ordering::Relaxed);
                        }
                        if k == 0 && finished {
                            return;
                        }
                    }
                });
            }
            let mut i = 0;
            while i < N {
                if r.push(TaskId(i), i % 1000 == 0).is_some() {
                    i += 1;
                } else {
                    std::thread::yield_now();
                }
            }
            r.publish();
            done.store(true, Ordering::Release);
        });
        for (i, c) in seen.iter().enumerate() {
            assert_eq!(c.load(Ordering::Relaxed), 1, "task {i}");
        }
    }
}
