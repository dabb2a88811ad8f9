//! Ready-queue sets: where a task waits between "its last predecessor completed" and "a worker
//! starts it" (the concurrency-mechanisms specification's FIFO and work-stealing queues; the
//! back-end architecture specification's `ReadyQueueSet`).
//!
//! A [`ReadyQueueSet`] holds one queue per pool — vector, cube and `Any` — under one of three
//! policies ([`ReadyKind`]):
//!
//! - **FIFO** ([`FifoQueue`]): one mutex-guarded `VecDeque` per pool. Tasks pop strictly in the
//!   order they were pushed to that pool. Mutex acquire/release orders a push before the pop that
//!   returns it.
//! - **Priority** ([`PriorityQueue`]): one mutex-guarded max-heap per pool, by an `i64` key, ties
//!   by the smaller task id (submission order). A worker of pool P takes the better of the tops
//!   of P and `Any` (locks taken in pool order vector, cube, any, so never a cycle).
//! - **Work stealing**: per worker and pool a Chase-Lev deque (`crossbeam-deque`; the owner pushes
//!   and pops LIFO at the bottom, thieves steal FIFO at the top), per worker and pool an *inbox*
//!   injector for affinity placement by other threads ([`ReadyQueueSet::push_to`]), and a global
//!   injector per pool. A worker looks, in order: its deque, its inbox, the global injector, then
//!   the deques and inboxes of the other workers starting at a pseudo-random victim. Crossbeam
//!   gives each successful pop or steal of a pushed item exactly once, with the push happening
//!   before the pop.
//!
//! A task placed on one worker ([`ReadyQueueSet::push_to`]: its dispatch target) goes under
//! FIFO and priority to that worker's own queue of its pool, which only that worker pops, before
//! the shared queues (strict FIFO / priority order among the tasks placed on it); under work
//! stealing to the worker's inbox, which idle workers may steal from.
//!
//! A worker of pool P pops from P, then from `Any`; [`ReadyQueueSet::try_pop_any`] (a worker that
//! runs anything) looks at `Any`, vector, cube. Workers own a [`LocalReady`] handle (the deques
//! are single-owner); any thread may push or pop through the set itself.
//!
//! This module never blocks and never spins: `try_pop` returning `None` means "nothing visible
//! now"; parking idle workers belongs to the worker pool.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use crossbeam_deque::{Injector, Steal, Stealer, Worker};
use pto_wsp_ir::{ExecPool, ReadyPolicy};

use crate::TaskId;
use crate::counters::{Counters, pool_index};
use crate::sync::{Arc, Mutex, lock};

/// Which queue structure a [`ReadyQueueSet`] uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReadyKind {
    /// One shared FIFO per pool.
    Fifo,
    /// Per-worker deques with stealing and affinity inboxes.
    WorkSteal,
    /// One shared max-heap per pool.
    Priority,
}

impl From<&ReadyPolicy> for ReadyKind {
    fn from(p: &ReadyPolicy) -> ReadyKind {
        match p {
            ReadyPolicy::Fifo => ReadyKind::Fifo,
            ReadyPolicy::WorkSteal => ReadyKind::WorkSteal,
            ReadyPolicy::Priority(_) => ReadyKind::Priority,
        }
    }
}

/// A strict FIFO of task ids shared by any number of threads (a mutex around a `VecDeque`).
#[derive(Debug, Default)]
pub struct FifoQueue {
    q: Mutex<VecDeque<TaskId>>,
}

impl FifoQueue {
    /// An empty queue.
    pub fn new() -> FifoQueue {
        FifoQueue {
            q: Mutex::new(VecDeque::new()),
        }
    }

    /// Append `task`; returns the queue length after the push.
    pub fn push(&self, task: TaskId) -> usize {
        let mut q = lock(&self.q);
        q.push_back(task);
        q.len()
    }

    /// Take the oldest task.
    pub fn try_pop(&self) -> Option<TaskId> {
        lock(&self.q).pop_front()
    }

    /// Number of queued tasks.
    pub fn len(&self) -> usize {
        lock(&self.q).len()
    }

    /// Whether the queue is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Heap entry: larger key first, then smaller task id.
type PrioEntry = (i64, Reverse<u32>);

/// A max-heap of task ids by an `i64` key, ties by the smaller task id (submission order).
#[derive(Debug, Default)]
pub struct PriorityQueue {
    heap: Mutex<BinaryHeap<PrioEntry>>,
}

impl PriorityQueue {
    /// An empty queue.
    pub fn new() -> PriorityQueue {
        PriorityQueue {
            heap: Mutex::new(BinaryHeap::new()),
        }
    }

    /// Insert `task` with priority `key` (higher first); returns the length after the push.
    pub fn push(&self, task: TaskId, key: i64) -> usize {
        let mut h = lock(&self.heap);
        h.push((key, Reverse(task.0)));
        h.len()
    }

    /// Take the task with the highest key (smallest id among equal keys).
    pub fn try_pop(&self) -> Option<TaskId> {
        lock(&self.heap).pop().map(|(_, Reverse(t))| TaskId(t))
    }

    /// Number of queued tasks.
    pub fn len(&self) -> usize {
        lock(&self.heap).len()
    }

    /// Whether the queue is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Shared parts of a work-stealing pool: the global injector, per-worker inboxes and stealers.
#[derive(Debug)]
struct StealPool {
    injector: Injector<TaskId>,
    inboxes: Box<[Injector<TaskId>]>,
    stealers: Box<[Stealer<TaskId>]>,
}

#[derive(Debug)]
enum Queues {
    Fifo([FifoQueue; 3]),
    Priority([PriorityQueue; 3]),
    Steal {
        pools: Box<[StealPool; 3]>,
        /// Deques not yet claimed by [`ReadyQueueSet::local`], one triple per worker.
        unclaimed: Mutex<Vec<Option<[Worker<TaskId>; 3]>>>,
    },
}

/// Ready queues for vector, cube and `Any` pools under one policy (see the module docs).
#[derive(Debug)]
pub struct ReadyQueueSet {
    kind: ReadyKind,
    workers: usize,
    queues: Queues,
    /// Per-worker queues of placed tasks under FIFO and priority ([`ReadyQueueSet::push_to`]).
    placed: Placed,
    counters: Arc<Counters>,
}

/// Tasks placed on one worker under FIFO and priority: one queue per worker and pool, popped
/// only by that worker, before the shared queues.
#[derive(Debug)]
enum Placed {
    /// Work stealing: placement goes to the inboxes.
    None,
    Fifo(Box<[[FifoQueue; 3]]>),
    Priority(Box<[[PriorityQueue; 3]]>),
}

impl ReadyQueueSet {
    /// A set of kind `kind` for `workers` workers (at least 1), counting into `counters`.
    pub fn new(kind: ReadyKind, workers: usize, counters: Arc<Counters>) -> ReadyQueueSet {
        let workers = workers.max(1);
        let queues = match kind {
            ReadyKind::Fifo => Queues::Fifo([FifoQueue::new(), FifoQueue::new(), FifoQueue::new()]),
            ReadyKind::Priority => Queues::Priority([
                PriorityQueue::new(),
                PriorityQueue::new(),
                PriorityQueue::new(),
            ]),
            ReadyKind::WorkSteal => {
                let mut deques: Vec<[Worker<TaskId>; 3]> = (0..workers)
                    .map(|_| [Worker::new_lifo(), Worker::new_lifo(), Worker::new_lifo()])
                    .collect();
                let pool = |p: usize, deques: &mut Vec<[Worker<TaskId>; 3]>| StealPool {
                    injector: Injector::new(),
                    inboxes: (0..workers).map(|_| Injector::new()).collect(),
                    stealers: deques.iter_mut().map(|d| d[p].stealer()).collect(),
                };
                let pools = Box::new([
                    pool(0, &mut deques),
                    pool(1, &mut deques),
                    pool(2, &mut deques),
                ]);
                Queues::Steal {
                    pools,
                    unclaimed: Mutex::new(deques.into_iter().map(Some).collect()),
                }
            }
        };
        let placed = match kind {
            ReadyKind::Fifo => Placed::Fifo(
                (0..workers)
                    .map(|_| [FifoQueue::new(), FifoQueue::new(), FifoQueue::new()])
                    .collect(),
            ),
            ReadyKind::Priority => Placed::Priority(
                (0..workers)
                    .map(|_| {
                        [
                            PriorityQueue::new(),
                            PriorityQueue::new(),
                            PriorityQueue::new(),
                        ]
                    })
                    .collect(),
            ),
            ReadyKind::WorkSteal => Placed::None,
        };
        ReadyQueueSet {
            kind,
            workers,
            queues,
            placed,
            counters,
        }
    }

    /// The policy of this set.
    pub fn kind(&self) -> ReadyKind {
        self.kind
    }

    /// Number of workers the set was made for.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// The counters this set reports to.
    pub fn counters(&self) -> &Arc<Counters> {
        &self.counters
    }

    /// Claim worker `worker`'s handle (its deques under work stealing). Returns `None` if the
    /// index is out of range or the handle was already claimed and is still alive.
    pub fn local(&self, worker: usize) -> Option<LocalReady<'_>> {
        if worker >= self.workers {
            return None;
        }
        let deques = match &self.queues {
            Queues::Steal { unclaimed, .. } => Some(lock(unclaimed)[worker].take()?),
            Queues::Fifo(_) | Queues::Priority(_) => None,
        };
        Some(LocalReady {
            set: self,
            worker,
            deques,
            rng: 0x9E37_79B9_7F4A_7C15 ^ (worker as u64).wrapping_mul(0xA24B_AED4_963E_E407),
            pushes: [0; 3],
            pops: [0; 3],
            len_hwm: 0,
        })
    }

    /// Push a ready task to `pool` (priority 0 under the priority policy; the global injector
    /// under work stealing).
    pub fn push(&self, pool: ExecPool, task: TaskId) {
        self.push_with_priority(pool, task, 0);
    }

    /// Push a ready task with priority `key` (used only by the priority policy).
    pub fn push_with_priority(&self, pool: ExecPool, task: TaskId, key: i64) {
        let p = pool_index(pool);
        let len = match &self.queues {
            Queues::Fifo(q) => q[p].push(task),
            Queues::Priority(q) => q[p].push(task, key),
            Queues::Steal { pools, .. } => {
                pools[p].injector.push(task);
                1
            }
        };
        self.counters.ready_push(pool);
        self.counters.ready_len(len as u64);
    }

    /// Push a ready task for worker `worker` (affinity placement) in `pool`. Under work stealing
    /// it goes to that worker's inbox, which the worker drains before the global injector (other
    /// workers steal from it only when idle); under FIFO and priority to that worker's own queue
    /// of `pool` (priority 0: see [`ReadyQueueSet::push_to_with_priority`]), which only it pops.
    pub fn push_to(&self, worker: usize, pool: ExecPool, task: TaskId) {
        self.push_to_with_priority(worker, pool, task, 0);
    }

    /// [`ReadyQueueSet::push_to`] with priority `key` (used only by the priority policy).
    pub fn push_to_with_priority(&self, worker: usize, pool: ExecPool, task: TaskId, key: i64) {
        let p = pool_index(pool);
        let w = worker % self.workers;
        let len = match (&self.queues, &self.placed) {
            (Queues::Steal { pools, .. }, _) => {
                pools[p].inboxes[w].push(task);
                1
            }
            (_, Placed::Fifo(q)) => q[w][p].push(task),
            (_, Placed::Priority(q)) => q[w][p].push(task, key),
            (_, Placed::None) => unreachable!("FIFO and priority sets have placed queues"),
        };
        self.counters.ready_push(pool);
        self.counters.ready_len(len as u64);
    }

    /// Pop a task placed on `worker` for a worker of `pool` (`pool`, then `Any`; every pool
    /// for a worker of `Any`). FIFO and priority only; `None` under work stealing.
    fn pop_placed(&self, worker: usize, pool: ExecPool) -> Option<TaskId> {
        let (t, from) = match &self.placed {
            Placed::None => return None,
            Placed::Fifo(q) => {
                let q = &q[worker];
                let order: &[ExecPool] = match pool {
                    ExecPool::Any => &[ExecPool::Any, ExecPool::Vector, ExecPool::Cube],
                    p => &[p, ExecPool::Any],
                };
                order
                    .iter()
                    .find_map(|&p| q[pool_index(p)].try_pop().map(|t| (t, p)))?
            }
            Placed::Priority(q) => {
                let q = &q[worker];
                match pool {
                    ExecPool::Any => [ExecPool::Any, ExecPool::Vector, ExecPool::Cube]
                        .into_iter()
                        .find_map(|p| q[pool_index(p)].try_pop().map(|t| (t, p)))?,
                    p => better_of_pair(q, p)?,
                }
            }
        };
        self.counters.ready_pop(from);
        Some(t)
    }

    /// Whether worker `worker`, of `pool`, would find a task now: [`ReadyQueueSet::has_work_for`]
    /// or a task placed on it.
    pub fn has_work_for_worker(&self, worker: usize, pool: ExecPool) -> bool {
        let placed = |lens: &dyn Fn(usize) -> usize| match pool {
            ExecPool::Any => (0..3).any(|p| lens(p) > 0),
            p => lens(pool_index(p)) > 0 || lens(2) > 0,
        };
        let mine = match &self.placed {
            Placed::None => false,
            Placed::Fifo(q) => placed(&|p| q[worker % self.workers][p].len()),
            Placed::Priority(q) => placed(&|p| q[worker % self.workers][p].len()),
        };
        mine || self.has_work_for(pool)
    }

    /// Pop a task for a worker of `pool` that has no [`LocalReady`] handle: from `pool`, then from
    /// `Any`. Under work stealing this steals (injector, inboxes, deques).
    pub fn try_pop(&self, pool: ExecPool) -> Option<TaskId> {
        self.pop_shared(pool, 0)
    }

    /// Pop a task from any pool (`Any`, vector, cube), for a worker that runs everything.
    pub fn try_pop_any(&self) -> Option<TaskId> {
        [ExecPool::Any, ExecPool::Vector, ExecPool::Cube]
            .into_iter()
            .find_map(|p| self.pop_one(p, 0))
    }

    /// Pop for `pool` then `Any` without a local deque; `start` picks the first victim.
    fn pop_shared(&self, pool: ExecPool, start: usize) -> Option<TaskId> {
        if let (Queues::Priority(q), false) = (&self.queues, pool == ExecPool::Any) {
            return self.pop_priority_pair(q, pool);
        }
        self.pop_one(pool, start).or_else(|| {
            if pool == ExecPool::Any {
                None
            } else {
                self.pop_one(ExecPool::Any, start)
            }
        })
    }

    /// Better of the tops of `pool` and `Any` (locks in pool index order).
    fn pop_priority_pair(&self, q: &[PriorityQueue; 3], pool: ExecPool) -> Option<TaskId> {
        let (t, from) = better_of_pair(q, pool)?;
        self.counters.ready_pop(from);
        Some(t)
    }

    /// Pop from exactly one pool's shared queues.
    fn pop_one(&self, pool: ExecPool, start: usize) -> Option<TaskId> {
        let p = pool_index(pool);
        let t = match &self.queues {
            Queues::Fifo(q) => q[p].try_pop(),
            Queues::Priority(q) => q[p].try_pop(),
            Queues::Steal { pools, .. } => {
                let sp = &pools[p];
                steal_retry(|| sp.injector.steal()).or_else(|| {
                    let t = self.steal_victims(sp, start, usize::MAX);
                    if t.is_some() {
                        self.counters.steal();
                    }
                    t
                })
            }
        }?;
        self.counters.ready_pop(pool);
        Some(t)
    }

    /// Steal from the inboxes and deques of every worker except `me`, starting at `start`.
    fn steal_victims(&self, sp: &StealPool, start: usize, me: usize) -> Option<TaskId> {
        let n = self.workers;
        (0..n)
            .map(|k| (start + k) % n)
            .filter(|&v| v != me)
            .find_map(|v| {
                steal_retry(|| sp.stealers[v].steal())
                    .or_else(|| steal_retry(|| sp.inboxes[v].steal()))
            })
    }

    /// Number of queued tasks (approximate while others push and pop).
    pub fn len(&self) -> usize {
        (0..3).map(|p| self.pool_len(p)).sum()
    }

    /// Tasks queued in the pool of index `p`, placed ones included (approximate while others
    /// push and pop).
    fn pool_len(&self, p: usize) -> usize {
        let placed = match &self.placed {
            Placed::None => 0,
            Placed::Fifo(q) => q.iter().map(|w| w[p].len()).sum(),
            Placed::Priority(q) => q.iter().map(|w| w[p].len()).sum(),
        };
        self.shared_len(p) + placed
    }

    /// Tasks any worker may take in the pool of index `p`: not placed on one worker under FIFO
    /// and priority (approximate while others push and pop).
    fn shared_len(&self, p: usize) -> usize {
        match &self.queues {
            Queues::Fifo(q) => q[p].len(),
            Queues::Priority(q) => q[p].len(),
            Queues::Steal { pools, .. } => {
                let sp = &pools[p];
                sp.injector.len()
                    + sp.inboxes.iter().map(Injector::len).sum::<usize>()
                    + sp.stealers.iter().map(Stealer::len).sum::<usize>()
            }
        }
    }

    /// Whether a worker of `pool` would find a task now that is not placed on another worker:
    /// one queued in `pool` or `Any` (in any pool for a worker of `Any`). Approximate while
    /// others push and pop, exact once they stopped. An idle worker re-checks
    /// [`ReadyQueueSet::has_work_for_worker`], which adds the tasks placed on it.
    pub fn has_work_for(&self, pool: ExecPool) -> bool {
        match pool {
            ExecPool::Any => (0..3).any(|p| self.shared_len(p) > 0),
            p => {
                self.shared_len(pool_index(p)) > 0 || self.shared_len(pool_index(ExecPool::Any)) > 0
            }
        }
    }

    /// Whether no task is queued (approximate while others push and pop).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Retry a crossbeam steal until it is not `Retry`.
fn steal_retry(mut f: impl FnMut() -> Steal<TaskId>) -> Option<TaskId> {
    loop {
        match f() {
            Steal::Success(t) => return Some(t),
            Steal::Empty => return None,
            Steal::Retry => crate::sync::spin_hint(),
        }
    }
}

/// One worker's handle on a [`ReadyQueueSet`]: under work stealing it owns the worker's deques
/// (push and pop LIFO, no contention unless a thief is at the same end); under FIFO and priority
/// it forwards to the shared queues. Dropping it moves any task left in its deques to the global
/// injectors, so nothing is lost.
#[derive(Debug)]
pub struct LocalReady<'a> {
    set: &'a ReadyQueueSet,
    worker: usize,
    deques: Option<[Worker<TaskId>; 3]>,
    rng: u64,
    /// Pushes and pops through the deques, counted here and added to the shared counters when
    /// the handle drops (the per-task path stays free of shared atomics).
    pushes: [u64; 3],
    pops: [u64; 3],
    len_hwm: u64,
}

impl LocalReady<'_> {
    /// The worker index of this handle.
    pub fn worker(&self) -> usize {
        self.worker
    }

    /// Push a ready task (found by this worker) to `pool`: onto this worker's deque under work
    /// stealing, else a shared push.
    pub fn push(&mut self, pool: ExecPool, task: TaskId) {
        self.push_with_priority(pool, task, 0);
    }

    /// Push with a priority key (used only by the priority policy).
    pub fn push_with_priority(&mut self, pool: ExecPool, task: TaskId, key: i64) {
        match &self.deques {
            Some(d) => {
                let p = pool_index(pool);
                let w = &d[p];
                w.push(task);
                self.pushes[p] += 1;
                self.len_hwm = self.len_hwm.max(w.len() as u64);
            }
            None => self.set.push_with_priority(pool, task, key),
        }
    }

    /// Pop a task for a worker of `pool`: `pool` first, then `Any`.
    pub fn try_pop(&mut self, pool: ExecPool) -> Option<TaskId> {
        if self.deques.is_none() {
            return self
                .set
                .pop_placed(self.worker, pool)
                .or_else(|| self.set.pop_shared(pool, 0));
        }
        self.pop_local(pool).or_else(|| {
            if pool == ExecPool::Any {
                None
            } else {
                self.pop_local(ExecPool::Any)
            }
        })
    }

    /// Pop from this worker's own deque of `pool` only (LIFO; no inbox, injector or stealing):
    /// the cheap first look of a busy worker. `None` under FIFO and priority (no own deques).
    #[inline]
    pub fn pop_own(&mut self, pool: ExecPool) -> Option<TaskId> {
        let p = pool_index(pool);
        let t = self.deques.as_ref()?[p].pop()?;
        self.pops[p] += 1;
        Some(t)
    }

    /// Pop a task from any pool (`Any`, vector, cube).
    pub fn try_pop_any(&mut self) -> Option<TaskId> {
        if self.deques.is_none() {
            return self
                .set
                .pop_placed(self.worker, ExecPool::Any)
                .or_else(|| self.set.try_pop_any());
        }
        [ExecPool::Any, ExecPool::Vector, ExecPool::Cube]
            .into_iter()
            .find_map(|p| self.pop_local(p))
    }

    /// Work-stealing pop from one pool: own deque, own inbox, global injector, victims.
    fn pop_local(&mut self, pool: ExecPool) -> Option<TaskId> {
        let p = pool_index(pool);
        let Some(deques) = &self.deques else {
            return self.set.pop_one(pool, 0);
        };
        let Queues::Steal { pools, .. } = &self.set.queues else {
            return self.set.pop_one(pool, 0);
        };
        let own = &deques[p];
        let sp = &pools[p];
        let counters = &self.set.counters;
        let t = own
            .pop()
            .or_else(|| steal_retry(|| sp.inboxes[self.worker].steal_batch_and_pop(own)))
            .or_else(|| steal_retry(|| sp.injector.steal_batch_and_pop(own)))
            .or_else(|| {
                // xorshift64: a private victim sequence, no shared state.
                self.rng ^= self.rng << 13;
                self.rng ^= self.rng >> 7;
                self.rng ^= self.rng << 17;
                let start = (self.rng % self.set.workers as u64) as usize;
                let t = self.set.steal_victims(sp, start, self.worker);
                if t.is_some() {
                    counters.steal();
                }
                t
            })?;
        self.pops[p] += 1;
        Some(t)
    }
}

impl Drop for LocalReady<'_> {
    fn drop(&mut self) {
        let c = &self.set.counters;
        for (p, pool) in [ExecPool::Vector, ExecPool::Cube, ExecPool::Any]
            .into_iter()
            .enumerate()
        {
            if self.pushes[p] > 0 {
                c.ready_pushes(pool, self.pushes[p]);
            }
            if self.pops[p] > 0 {
                c.ready_pops(pool, self.pops[p]);
            }
        }
        c.ready_len(self.len_hwm);
        let Some(deques) = self.deques.take() else {
            return;
        };
        if let Queues::Steal { pools, unclaimed } = &self.set.queues {
            for (p, w) in deques.iter().enumerate() {
                while let Some(t) = w.pop() {
                    pools[p].injector.push(t);
                }
            }
            // Give the (now empty) deques back so the worker slot can be claimed again.
            lock(unclaimed)[self.worker] = Some(deques);
        }
    }
}

/// Pops the better of the tops of `pool`'s heap and `Any`'s (locks in pool index order), with
/// the pool it came from.
fn better_of_pair(q: &[PriorityQueue; 3], pool: ExecPool) -> Option<(TaskId, ExecPool)> {
    let mut mine = lock(&q[pool_index(pool)].heap);
    let mut any = lock(&q[2].heap);
    let take_any = match (mine.peek(), any.peek()) {
        (Some(a), Some(b)) => b > a,
        (None, Some(_)) => true,
        (_, None) => false,
    };
    let (from, heap) = if take_any {
        (ExecPool::Any, &mut *any)
    } else {
        (pool, &mut *mine)
    };
    heap.pop().map(|(_, Reverse(t))| (TaskId(t), from))
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn set(kind: ReadyKind, workers: usize) -> ReadyQueueSet {
        ReadyQueueSet::new(kind, workers, Arc::new(Counters::new(1)))
    }

    /// The standalone queues report their length after each push and as they drain, and pop
    /// in their order (FIFO: push order; priority: highest key, then smallest id).
    #[test]
    fn standalone_queues_count_and_order() {
        let f = FifoQueue::new();
        assert!(f.is_empty());
        assert_eq!((f.push(TaskId(5)), f.push(TaskId(3))), (1, 2));
        assert!(!f.is_empty());
        assert_eq!(f.len(), 2);
        assert_eq!(f.try_pop(), Some(TaskId(5)));
        assert_eq!(f.len(), 1);
        assert_eq!(f.try_pop(), Some(TaskId(3)));
        assert!(f.is_empty());
        assert_eq!(f.try_pop(), None);

        let q = PriorityQueue::new();
        assert!(q.is_empty());
        let lens = [
            q.push(TaskId(4), 1),
            q.push(TaskId(9), 7),
            q.push(TaskId(2), 1),
        ];
        assert_eq!(lens, [1, 2, 3]);
        assert!(!q.is_empty());
        assert_eq!(q.len(), 3);
        let order: Vec<_> = std::iter::from_fn(|| q.try_pop()).collect();
        assert_eq!(order, [TaskId(9), TaskId(2), TaskId(4)]);
        assert!(q.is_empty());
    }

    /// A set reports its policy, worker count (0 taken as 1), counters and length (placed
    /// tasks included), and counts every push, pop and the longest queue it saw.
    #[test]
    fn set_reports_its_shape_length_and_counts() {
        for kind in [ReadyKind::Fifo, ReadyKind::Priority, ReadyKind::WorkSteal] {
            let counters = Arc::new(Counters::new(1));
            let s = ReadyQueueSet::new(kind, 0, counters.clone());
            assert_eq!((s.kind(), s.workers()), (kind, 1));
            assert!(Arc::ptr_eq(s.counters(), &counters));
            assert_eq!(s.len(), 0, "{kind:?}");
            assert!(s.is_empty(), "{kind:?}");
            assert_eq!(ReadyQueueSet::new(kind, 3, counters.clone()).workers(), 3);
            // Nothing queued: no worker of any pool has work; a task placed on worker 0 in
            // `Any` is work for it whatever its pool.
            let pools = [ExecPool::Vector, ExecPool::Cube, ExecPool::Any];
            let other = ReadyQueueSet::new(kind, 2, Arc::new(Counters::new(1)));
            for pool in pools {
                assert!(!other.has_work_for_worker(0, pool), "{kind:?} {pool:?}");
            }
            other.push_to(0, ExecPool::Any, TaskId(9));
            for pool in pools {
                assert!(other.has_work_for_worker(0, pool), "{kind:?} {pool:?}");
            }
            s.push(ExecPool::Vector, TaskId(1));
            s.push(ExecPool::Vector, TaskId(2));
            s.push_to(0, ExecPool::Cube, TaskId(3));
            assert_eq!(s.len(), 3, "{kind:?}");
            assert!(!s.is_empty(), "{kind:?}");
            {
                let mut l = s.local(0).unwrap();
                assert_eq!(l.worker(), 0);
                let mut got = vec![l.try_pop_any().unwrap(), l.try_pop_any().unwrap()];
                got.push(l.try_pop_any().unwrap());
                got.sort();
                assert_eq!(got, [TaskId(1), TaskId(2), TaskId(3)], "{kind:?}");
                assert_eq!(l.try_pop_any(), None, "{kind:?}");
            }
            assert!(s.is_empty(), "{kind:?}");
            let snap = counters.snapshot();
            assert_eq!(snap.ready_pushes, [2, 1, 0], "{kind:?}");
            assert_eq!(snap.ready_pops, [2, 1, 0], "{kind:?}");
            let longest = if kind == ReadyKind::WorkSteal { 1 } else { 2 };
            assert_eq!(snap.ready_len_hwm, longest, "{kind:?}");
        }
    }

    /// Under work stealing a worker's own pushes go to its deque (popped LIFO by `pop_own`,
    /// counted when the handle drops, with the deque's longest length); under FIFO there is no
    /// own deque.
    #[test]
    fn own_deque_pushes_pops_and_counts() {
        let counters = Arc::new(Counters::new(1));
        let s = ReadyQueueSet::new(ReadyKind::WorkSteal, 2, counters.clone());
        {
            let mut l = s.local(1).unwrap();
            for t in 0..3 {
                l.push(ExecPool::Cube, TaskId(t));
            }
            assert_eq!(s.len(), 3);
            assert_eq!(l.pop_own(ExecPool::Vector), None);
            assert_eq!(l.pop_own(ExecPool::Cube), Some(TaskId(2)));
            assert_eq!(l.pop_own(ExecPool::Cube), Some(TaskId(1)));
        }
        let snap = counters.snapshot();
        assert_eq!(snap.ready_pushes, [0, 3, 0]);
        assert_eq!(snap.ready_pops, [0, 2, 0]);
        assert_eq!(snap.ready_len_hwm, 3);
        // The task left in the deque went to the injector when the handle dropped.
        assert_eq!(s.try_pop(ExecPool::Cube), Some(TaskId(0)));

        let f = set(ReadyKind::Fifo, 1);
        let mut l = f.local(0).unwrap();
        l.push(ExecPool::Vector, TaskId(4));
        assert_eq!(l.pop_own(ExecPool::Vector), None);
        assert_eq!(l.try_pop(ExecPool::Vector), Some(TaskId(4)));
    }

    #[test]
    fn pool_then_any() {
        for kind in [ReadyKind::Fifo, ReadyKind::Priority, ReadyKind::WorkSteal] {
            let s = set(kind, 2);
            s.push(ExecPool::Any, TaskId(1));
            s.push(ExecPool::Cube, TaskId(2));
            assert_eq!(s.try_pop(ExecPool::Vector), Some(TaskId(1)), "{kind:?}");
            assert_eq!(s.try_pop(ExecPool::Vector), None, "{kind:?}");
            assert_eq!(s.try_pop(ExecPool::Cube), Some(TaskId(2)), "{kind:?}");
            s.push(ExecPool::Vector, TaskId(3));
            assert_eq!(s.try_pop_any(), Some(TaskId(3)), "{kind:?}");
            assert!(s.is_empty());
        }
    }

    #[test]
    fn has_work_for_sees_only_poppable_pools_and_placed_tasks_only_for_their_worker() {
        for kind in [ReadyKind::Fifo, ReadyKind::Priority, ReadyKind::WorkSteal] {
            let s = set(kind, 2);
            s.push_to(1, ExecPool::Cube, TaskId(1));
            assert!(!s.has_work_for_worker(1, ExecPool::Vector), "{kind:?}");
            assert!(s.has_work_for_worker(1, ExecPool::Cube), "{kind:?}");
            assert!(s.has_work_for_worker(1, ExecPool::Any), "{kind:?}");
            // A task placed on worker 1 is for worker 0 too only when it may steal.
            let stealing = kind == ReadyKind::WorkSteal;
            assert_eq!(
                s.has_work_for_worker(0, ExecPool::Cube),
                stealing,
                "{kind:?}"
            );
            if stealing {
                assert_eq!(s.try_pop(ExecPool::Cube), Some(TaskId(1)), "{kind:?}");
            } else {
                assert_eq!(
                    s.local(0).unwrap().try_pop(ExecPool::Cube),
                    None,
                    "{kind:?}"
                );
                assert_eq!(
                    s.local(1).unwrap().try_pop(ExecPool::Cube),
                    Some(TaskId(1)),
                    "{kind:?}"
                );
            }
            s.push(ExecPool::Any, TaskId(2));
            assert!(s.has_work_for(ExecPool::Vector), "{kind:?}");
        }
    }

    #[test]
    fn local_handle_claimed_once_and_returns_tasks_on_drop() {
        let s = set(ReadyKind::WorkSteal, 2);
        let mut l = s.local(0).expect("first claim");
        assert!(s.local(0).is_none());
        l.push(ExecPool::Vector, TaskId(7));
        drop(l);
        assert_eq!(s.try_pop(ExecPool::Vector), Some(TaskId(7)));
        assert!(s.local(0).is_some());
        assert!(s.local(5).is_none());
    }
}
