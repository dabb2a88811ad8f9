//! Run statistics of the scheduling core: task counts, ready-queue traffic per pool, steals,
//! window and gate stalls, batches, high-water marks.
//!
//! Counting must not become the contended cache line it is meant to observe, so event counts are
//! sharded: each thread adds to the shard [`crate::sync::shard_hint`] picks (one cache line per
//! shard), and [`Counters::snapshot`] sums the shards. High-water marks are single atomics that are
//! only *written* when the mark rises (a plain load first), so the common case is a read of a
//! line that stays shared.
//!
//! Orderings: every access is `Relaxed`. Counters are statistics, never used to synchronise; a
//! snapshot taken while threads run is a blend of moments, one taken after joining them (or after
//! any other happens-before edge) is exact.

use crossbeam_utils::CachePadded;
use pto_wsp_ir::ExecPool;

use crate::sync::{AtomicU64, Ordering, shard_hint};

/// Index of a pool in per-pool arrays: vector 0, cube 1, any 2.
#[inline]
pub fn pool_index(pool: ExecPool) -> usize {
    match pool {
        ExecPool::Vector => 0,
        ExecPool::Cube => 1,
        ExecPool::Any => 2,
    }
}

/// One shard of event counts.
#[derive(Debug)]
struct Shard {
    submitted: AtomicU64,
    completed: AtomicU64,
    pushes: [AtomicU64; 3],
    pops: [AtomicU64; 3],
    steals: AtomicU64,
    migrations: AtomicU64,
    window_stalls: AtomicU64,
    window_overflows: AtomicU64,
    gate_stalls: AtomicU64,
    batches: AtomicU64,
    batched_tasks: AtomicU64,
}

impl Shard {
    fn new() -> Shard {
        Shard {
            submitted: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            pushes: [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)],
            pops: [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)],
            steals: AtomicU64::new(0),
            migrations: AtomicU64::new(0),
            window_stalls: AtomicU64::new(0),
            window_overflows: AtomicU64::new(0),
            gate_stalls: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            batched_tasks: AtomicU64::new(0),
        }
    }
}

#[inline]
fn bump(a: &AtomicU64, n: u64) {
    a.fetch_add(n, Ordering::Relaxed);
}

#[inline]
fn raise(a: &AtomicU64, v: u64) {
    if v > a.load(Ordering::Relaxed) {
        a.fetch_max(v, Ordering::Relaxed);
    }
}

/// Shared, sharded statistics counters (see the module docs). Components take an
/// `Arc<Counters>`; one `Counters` may be shared by all components of a run.
#[derive(Debug)]
pub struct Counters {
    shards: Box<[CachePadded<Shard>]>,
    in_flight_hwm: CachePadded<AtomicU64>,
    ready_len_hwm: CachePadded<AtomicU64>,
}

impl Default for Counters {
    fn default() -> Self {
        Counters::new(8)
    }
}

/// A plain copy of every counter at one moment (sums over shards).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CounterSnapshot {
    /// Tasks that entered the task window (submitted).
    pub tasks_submitted: u64,
    /// Tasks that left the task window (completed).
    pub tasks_completed: u64,
    /// Ready-queue pushes per pool (index with [`pool_index`]).
    pub ready_pushes: [u64; 3],
    /// Ready-queue pops per pool (the pool the task was found in).
    pub ready_pops: [u64; 3],
    /// Pops that took a task from another worker's deque or inbox.
    pub steals: u64,
    /// Tasks run by a worker other than the one their dispatch target names (`target mod
    /// threads`): only under work stealing, when a thief took a placed task.
    pub migrations: u64,
    /// Submissions that had to wait for window space (mode `stall`).
    pub window_stalls: u64,
    /// Submissions that found the window full in modes `abort` and `benchmark`.
    pub window_overflows: u64,
    /// Gate acquisitions that found their scope full (a failed `try_acquire` or a wait).
    pub gate_stalls: u64,
    /// Dependency batches resolved.
    pub batches: u64,
    /// Completions resolved through batches.
    pub batched_tasks: u64,
    /// Most tasks in flight in the window at once.
    pub in_flight_hwm: u64,
    /// Longest ready queue observed at a push.
    pub ready_len_hwm: u64,
}

impl Counters {
    /// Counters with `shards` shards (at least 1); a shard per worker thread is plenty.
    pub fn new(shards: usize) -> Counters {
        Counters {
            shards: (0..shards.max(1))
                .map(|_| CachePadded::new(Shard::new()))
                .collect(),
            in_flight_hwm: CachePadded::new(AtomicU64::new(0)),
            ready_len_hwm: CachePadded::new(AtomicU64::new(0)),
        }
    }

    #[inline]
    fn local(&self) -> &Shard {
        &self.shards[shard_hint() % self.shards.len()]
    }

    /// `n` tasks submitted.
    #[inline]
    pub fn submitted(&self, n: u64) {
        bump(&self.local().submitted, n);
    }

    /// `n` tasks completed.
    #[inline]
    pub fn completed(&self, n: u64) {
        bump(&self.local().completed, n);
    }

    /// A ready task pushed to `pool`.
    #[inline]
    pub fn ready_push(&self, pool: ExecPool) {
        bump(&self.local().pushes[pool_index(pool)], 1);
    }

    /// `n` ready tasks pushed to `pool` (a worker's locally counted traffic).
    #[inline]
    pub fn ready_pushes(&self, pool: ExecPool, n: u64) {
        bump(&self.local().pushes[pool_index(pool)], n);
    }

    /// `n` ready tasks popped from `pool` (a worker's locally counted traffic).
    #[inline]
    pub fn ready_pops(&self, pool: ExecPool, n: u64) {
        bump(&self.local().pops[pool_index(pool)], n);
    }

    /// A ready task popped from `pool`.
    #[inline]
    pub fn ready_pop(&self, pool: ExecPool) {
        bump(&self.local().pops[pool_index(pool)], 1);
    }

    /// A ready task stolen from another worker.
    #[inline]
    pub fn steal(&self) {
        bump(&self.local().steals, 1);
    }

    /// `n` tasks ran away from the worker their dispatch target names.
    #[inline]
    pub fn migrated(&self, n: u64) {
        bump(&self.local().migrations, n);
    }

    /// A submission waited for window space.
    #[inline]
    pub fn window_stall(&self) {
        bump(&self.local().window_stalls, 1);
    }

    /// A submission found the window full (abort / benchmark).
    #[inline]
    pub fn window_overflow(&self) {
        bump(&self.local().window_overflows, 1);
    }

    /// A gate acquisition found its scope full.
    #[inline]
    pub fn gate_stall(&self) {
        bump(&self.local().gate_stalls, 1);
    }

    /// A dependency batch of `tasks` completions was resolved.
    #[inline]
    pub fn batch(&self, tasks: u64) {
        let s = self.local();
        bump(&s.batches, 1);
        bump(&s.batched_tasks, tasks);
    }

    /// `n` tasks are in flight now.
    #[inline]
    pub fn in_flight(&self, n: u64) {
        raise(&self.in_flight_hwm, n);
    }

    /// A ready queue holds `n` tasks now.
    #[inline]
    pub fn ready_len(&self, n: u64) {
        raise(&self.ready_len_hwm, n);
    }

    /// Sum every shard.
    pub fn snapshot(&self) -> CounterSnapshot {
        let mut s = CounterSnapshot::default();
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        for sh in self.shards.iter() {
            s.tasks_submitted += get(&sh.submitted);
            s.tasks_completed += get(&sh.completed);
            for p in 0..3 {
                s.ready_pushes[p] += get(&sh.pushes[p]);
                s.ready_pops[p] += get(&sh.pops[p]);
            }
            s.steals += get(&sh.steals);
            s.migrations += get(&sh.migrations);
            s.window_stalls += get(&sh.window_stalls);
            s.window_overflows += get(&sh.window_overflows);
            s.gate_stalls += get(&sh.gate_stalls);
            s.batches += get(&sh.batches);
            s.batched_tasks += get(&sh.batched_tasks);
        }
        s.in_flight_hwm = get(&self.in_flight_hwm);
        s.ready_len_hwm = get(&self.ready_len_hwm);
        s
    }
}
