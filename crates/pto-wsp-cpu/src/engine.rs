//! The worker loop every run shares, whatever feeds it: a finished graph ([`crate::run`]) or an
//! orchestration thread building the graph while it runs ([`crate::stream`]).
//!
//! # The per-task path
//!
//! A worker takes a task, runs it through the [`Exec`], and *releases* it: the graph reports
//! each successor that became ready ([`RunGraph::release`]). Under work stealing the first ready
//! successor the worker can run itself becomes its *next* task directly (no queue traffic; a
//! chain runs without touching a deque); the others are pushed to its own deque (or, when the
//! dispatch policy placed them on another worker, to that worker's inbox), and one parked
//! worker is woken if any sleeps. Under FIFO and priority every ready task goes through the
//! queues, so ready tasks start in submission (or priority) order.
//!
//! With placement on (a `dispatch` other than `work_steal`), a task with a target runs on
//! worker `target mod threads` (within its pool's workers under a pool split): under FIFO and
//! priority it is queued on that worker's own queue, which no other worker pops; under work
//! stealing on that worker's inbox (or its deque), where an idle worker may steal it — counted
//! as a migration ([`pto_wsp_graph::counters::CounterSnapshot::migrations`]).
//!
//! Initial ready tasks of a finished graph (its sources) are not queued: workers claim them in
//! small chunks through one atomic cursor.
//!
//! A streamed run's orchestrator hands the tasks it finds ready to the workers in batches
//! through a [`ReadyRing`] when routing is plain (work stealing, no placement or pool split):
//! a worker that runs dry claims up to a batch and keeps it on its own stack or deque, where
//! idle peers steal from it. Other configurations push each such task to the queue or inbox its
//! routing names (the orchestrator still seals them a batch at a time, [`crate::stream`]).
//!
//! Completions are counted per worker and published when the worker runs out of work, so the
//! per-task path has no shared counter; the run ends when the published count reaches the
//! total (known up front for a finished graph, when orchestration ends for a streamed one).
//!
//! # Failure
//!
//! A failing task (error or panic, reported by the [`Exec`]) records the first [`ExecError`],
//! raises the abort flag and wakes everyone; workers stop taking tasks and return. Nothing is
//! left running and the pool can run again.

use std::ops::Range;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Instant;

use crossbeam_utils::CachePadded;
use pto_wsp_graph::TaskId;
use pto_wsp_graph::counters::{Counters, pool_index};
use pto_wsp_graph::gate::IssueGate;
use pto_wsp_graph::ready::{LocalReady, ReadyKind, ReadyQueueSet};
use pto_wsp_graph::window::WindowState;
use pto_wsp_ir::ExecPool;

use crate::exec::{Exec, ExecError, TaskFailure};
use crate::idle::Idle;
use crate::pool::panic_message;
use crate::ring::{BATCH, ReadyRing};
use crate::run::{PoolSplit, RunConfig};
use crate::stats::Span;
use crate::sync::{Arc, AtomicBool, AtomicU64, AtomicUsize, Mutex, Ordering, lock};

/// What the scheduler needs to know about a task to route it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Meta {
    pub(crate) pool: ExecPool,
    pub(crate) affinity: Option<u32>,
    pub(crate) stream: u32,
}

/// A graph as the worker loop sees it.
pub(crate) trait RunGraph: Sync {
    /// Routing data of `t`.
    fn meta(&self, t: TaskId) -> Meta;
    /// Priority key of `t` (priority policy).
    fn priority(&self, t: TaskId) -> i64;
    /// `t` completed: report every successor that became ready. `alone` promises that this
    /// worker is the only thread releasing tasks in this run (a one-worker run of a finished
    /// graph may then count without read-modify-writes).
    fn release(&self, t: TaskId, alone: bool, ready: impl FnMut(TaskId));
}

/// What one worker reports at the end of a run.
#[derive(Debug, Default)]
pub(crate) struct WorkerReport {
    pub(crate) worker: usize,
    pub(crate) tasks: u64,
    pub(crate) spans: Vec<Span>,
}

/// One run's shared scheduling state.
pub(crate) struct Engine<'a, G: RunGraph, E: Exec> {
    graph: &'a G,
    exec: &'a E,
    workers: usize,
    /// One worker: it is the only thread that releases tasks ([`RunGraph::release`]).
    alone: bool,
    kind: ReadyKind,
    split: PoolSplit,
    placement: bool,
    batch: usize,
    trace: bool,
    /// Publish completions after this many (only matters under a task window).
    leave_every: u64,
    pub(crate) queues: ReadyQueueSet,
    pub(crate) idle: Idle,
    gate: Option<IssueGate>,
    window: Option<&'a WindowState>,
    counters: Arc<Counters>,
    sources: &'a [TaskId],
    /// Batched publication of the orchestrator's ready tasks ([`Engine::with_ready_ring`]).
    ring: Option<ReadyRing>,
    cursor: CachePadded<AtomicUsize>,
    completed: CachePadded<AtomicU64>,
    /// Total tasks of the run; `u64::MAX` while unknown (orchestration still running).
    total: AtomicU64,
    finished: AtomicBool,
    abort: AtomicBool,
    error: Mutex<Option<ExecError>>,
    reports: Mutex<Vec<WorkerReport>>,
    t0: Instant,
}

/// How a worker ended its part of the run.
enum Found {
    Task(TaskId),
    Done,
}

impl<'a, G: RunGraph, E: Exec> Engine<'a, G, E> {
    /// A run of `graph` on `workers` workers. `sources` are the initially ready tasks (claimed
    /// through a cursor); `total` the task count if known.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        graph: &'a G,
        exec: &'a E,
        config: &RunConfig,
        workers: usize,
        sources: &'a [TaskId],
        total: Option<u64>,
        window: Option<&'a WindowState>,
        counters: Arc<Counters>,
    ) -> Self {
        let split = match config.pools {
            // A pool split needs a worker on each side; one worker runs everything.
            PoolSplit::ByExecUnit { vector } if workers >= 2 => PoolSplit::ByExecUnit {
                vector: vector.clamp(1, workers - 1),
            },
            _ => PoolSplit::Single,
        };
        let gate = config.gate.map(|g| {
            IssueGate::new(
                g.depth,
                g.scope,
                g.streams.max(1) as usize,
                Arc::clone(&counters),
            )
        });
        Engine {
            graph,
            exec,
            workers,
            alone: workers == 1,
            kind: config.ready,
            split,
            placement: config.placement,
            batch: config.batch.max(1) as usize,
            trace: config.trace,
            leave_every: window.map_or(u64::MAX, |w| {
                (w.capacity() / (2 * workers.max(1))).clamp(1, 32) as u64
            }),
            queues: ReadyQueueSet::new(config.ready, workers, Arc::clone(&counters)),
            idle: Idle::new(workers),
            gate,
            window,
            counters,
            sources,
            ring: None,
            cursor: CachePadded::new(AtomicUsize::new(0)),
            completed: CachePadded::new(AtomicU64::new(0)),
            total: AtomicU64::new(total.unwrap_or(u64::MAX)),
            finished: AtomicBool::new(false),
            abort: AtomicBool::new(false),
            error: Mutex::new(None),
            reports: Mutex::new(Vec::new()),
            t0: Instant::now(),
        }
    }

    /// Hand the tasks [`Engine::push_external`] is given to the workers in batches through a
    /// [`ReadyRing`], if routing is plain (work stealing, no placement, no pool split; otherwise
    /// nothing changes). The caller must call [`Engine::publish_external`] before it waits for
    /// any task and when it has pushed its last one, and push from one thread only.
    pub(crate) fn with_ready_ring(mut self) -> Self {
        if self.kind == ReadyKind::WorkSteal && !self.needs_meta() {
            self.ring = Some(ReadyRing::new());
        }
        self
    }

    /// The pool worker `w` serves.
    fn pool_of(&self, w: usize) -> ExecPool {
        match self.split {
            PoolSplit::Single => ExecPool::Any,
            PoolSplit::ByExecUnit { vector } if w < vector => ExecPool::Vector,
            PoolSplit::ByExecUnit { .. } => ExecPool::Cube,
        }
    }

    /// The queue pool a task of `pool` goes to.
    #[inline]
    fn queue_pool(&self, pool: ExecPool) -> ExecPool {
        match self.split {
            PoolSplit::Single => ExecPool::Any,
            PoolSplit::ByExecUnit { .. } => pool,
        }
    }

    /// Whether a worker of `mine` may run a task queued in `pool`.
    #[inline]
    fn fits(mine: ExecPool, pool: ExecPool) -> bool {
        mine == ExecPool::Any || pool == ExecPool::Any || mine == pool
    }

    /// Whether routing needs the task's [`Meta`] at all.
    #[inline]
    fn needs_meta(&self) -> bool {
        self.placement || !matches!(self.split, PoolSplit::Single)
    }

    /// The worker the dispatch policy places a task on, if placement is on and the task has a
    /// target: `target mod threads`, or under a pool split the `target mod n`-th of the `n`
    /// workers of its pool (so the worker can run it).
    #[inline]
    fn target_of(&self, m: Meta) -> Option<usize> {
        let a = m.affinity.filter(|_| self.placement)? as usize;
        Some(match (self.split, self.queue_pool(m.pool)) {
            (PoolSplit::ByExecUnit { vector }, ExecPool::Vector) => a % vector,
            (PoolSplit::ByExecUnit { vector }, ExecPool::Cube) => {
                vector + a % (self.workers - vector)
            }
            _ => a % self.workers,
        })
    }

    /// Where a ready task found by worker `me` must be queued, if not by `me`'s usual path: the
    /// worker it is placed on. Under FIFO and priority every placed task goes to its worker's
    /// own queue (only that worker pops it, `me` included); under work stealing only a task
    /// placed on another worker (to its inbox; one placed on `me` takes the usual path, its
    /// deque, where an idle thief may take it — a migration).
    #[inline]
    fn placed(&self, m: Meta, me: usize) -> Option<usize> {
        let target = self.target_of(m)?;
        (target != me || self.kind != ReadyKind::WorkSteal).then_some(target)
    }

    /// Queue `t` (of queue pool `pool`) on worker `target`'s own queue or inbox.
    #[inline]
    fn push_placed(&self, target: usize, pool: ExecPool, t: TaskId) {
        let key = if self.kind == ReadyKind::Priority {
            self.graph.priority(t)
        } else {
            0
        };
        self.queues.push_to_with_priority(target, pool, t, key);
    }

    /// Publish a ready task from outside the workers (the orchestration thread).
    pub(crate) fn push_external(&self, t: TaskId) {
        if let Some(ring) = &self.ring {
            // A parked worker gets the task at once; a spinning or busy one with the batch.
            match ring.push(t, self.idle.any_asleep()) {
                Some(true) => return self.notify(ExecPool::Any, None),
                Some(false) => return,
                // Full: the workers are far behind; the shared queue takes it.
                None => {}
            }
        }
        let m = self.graph.meta(t);
        let pool = self.queue_pool(m.pool);
        let target = match self.target_of(m) {
            Some(target) => {
                self.push_placed(target, pool, t);
                Some(target)
            }
            None if self.kind == ReadyKind::Priority => {
                self.queues
                    .push_with_priority(pool, t, self.graph.priority(t));
                None
            }
            None => {
                self.queues.push(pool, t);
                None
            }
        };
        self.notify(pool, target);
    }

    /// [`Engine::push_external`] for several tasks (a batch of seals): the parked-worker check
    /// and the wake-up are made once for all of them.
    pub(crate) fn push_external_all(&self, ts: &[TaskId]) {
        let Some(ring) = &self.ring else {
            return ts.iter().for_each(|&t| self.push_external(t));
        };
        let urgent = self.idle.any_asleep();
        let mut published = false;
        for &t in ts {
            match ring.push(t, urgent) {
                Some(p) => published |= p,
                // Full: the workers are far behind; the shared queue takes it.
                None => self.push_external(t),
            }
        }
        if published {
            self.notify(ExecPool::Any, None);
        }
    }

    /// Make every task [`Engine::push_external`] holds in a partial batch visible to the workers
    /// (waking one if any sleeps).
    pub(crate) fn publish_external(&self) {
        if let Some(ring) = &self.ring
            && ring.publish()
        {
            self.notify(ExecPool::Any, None);
        }
    }

    /// Claim a batch of the orchestrator's ready tasks: the first is returned, the rest go to
    /// this worker's stack (alone) or deque (peers may steal them), in submission order.
    #[inline]
    fn take_ring(&self, local: &mut LocalReady<'_>, st: &mut WorkerState) -> Option<TaskId> {
        let ring = self.ring.as_ref()?;
        let mut buf = [0u32; BATCH];
        let k = ring.take(&mut buf);
        if k == 0 {
            return None;
        }
        if k > 1 {
            if self.alone {
                st.private
                    .extend(buf[1..k].iter().rev().map(|&t| TaskId(t)));
            } else {
                for &t in buf[1..k].iter().rev() {
                    local.push(ExecPool::Any, TaskId(t));
                }
                self.wake_peers(1 << pool_index(ExecPool::Any));
            }
        }
        Some(TaskId(buf[0]))
    }

    /// Work of queue pool `pool` was published (placed on `target`, if any): wake a sleeping
    /// worker that can run it.
    #[inline]
    fn notify(&self, pool: ExecPool, target: Option<usize>) {
        self.idle
            .notify(target, |w| Self::fits(self.pool_of(w), pool));
    }

    /// The total became known (orchestration ended): wake everyone to re-check for the end.
    pub(crate) fn set_total(&self, total: u64) {
        self.total.store(total, Ordering::SeqCst);
        self.check_finished();
        self.idle.wake_all();
    }

    /// Stop the run with `error` (first error wins).
    pub(crate) fn fail(&self, error: ExecError) {
        {
            let mut e = lock(&self.error);
            if e.is_none() {
                *e = Some(error);
            }
        }
        self.abort.store(true, Ordering::SeqCst);
        if let Some(w) = self.window {
            // A submitter stalled on the window must not wait for completions that never come.
            w.close();
        }
        self.idle.wake_all();
    }

    /// The flag raised when the run is stopping because of an error.
    pub(crate) fn abort_flag(&self) -> &AtomicBool {
        &self.abort
    }

    fn check_finished(&self) -> bool {
        let total = self.total.load(Ordering::SeqCst);
        if total != u64::MAX && self.completed.load(Ordering::SeqCst) >= total {
            if !self.finished.swap(true, Ordering::SeqCst) {
                self.idle.wake_all();
            }
            true
        } else {
            self.finished.load(Ordering::SeqCst)
        }
    }

    /// Run worker `w`'s part of the run; a panic that escapes (an [`Exec`] that broke its
    /// promise, or a runtime bug) fails the run instead of leaving the other workers waiting.
    pub(crate) fn worker(&self, w: usize) {
        // The common configuration gets a loop compiled without the branches it never takes.
        let plain = !self.trace
            && self.gate.is_none()
            && self.batch == 1
            && self.window.is_none()
            && !self.needs_meta();
        let r = catch_unwind(AssertUnwindSafe(|| {
            if plain {
                self.worker_loop::<false>(w)
            } else {
                self.worker_loop::<true>(w)
            }
        }));
        if let Err(p) = r {
            self.fail(ExecError::Internal(format!(
                "worker {w} panicked: {}",
                panic_message(&*p)
            )));
        }
    }

    /// The worker loop. `FULL = false` is the plain configuration (no trace, gate, batching,
    /// window or routing metadata): the same loop with those branches compiled out.
    fn worker_loop<const FULL: bool>(&self, w: usize) {
        let mut local = self
            .queues
            .local(w)
            .expect("each worker claims its own queue handle once");
        let mine = self.pool_of(w);
        let mut st = WorkerState {
            w,
            mine,
            direct: self.kind == ReadyKind::WorkSteal,
            next: None,
            src: 0..0,
            private: Vec::new(),
            done: 0,
            migrated: 0,
            tasks: 0,
            pending: Vec::with_capacity(if self.batch > 1 { self.batch } else { 0 }),
            spans: Vec::new(),
        };
        loop {
            let t = match st.next.take() {
                Some(t) => t,
                None => match self.quick::<FULL>(&mut local, &mut st) {
                    Some(t) => t,
                    None => match self.find(&mut local, &mut st) {
                        Found::Task(t) => t,
                        Found::Done => break,
                    },
                },
            };
            if let Err(f) = self.run_one::<FULL>(t, &mut st) {
                self.fail(ExecError::from_failure(t.0, f));
                break;
            }
            st.done += 1;
            if FULL && st.done >= self.leave_every {
                // Under a window, give slots back as we go, not only when idle.
                self.publish(&mut st);
            }
            if FULL && self.batch > 1 {
                st.pending.push(t);
                if st.pending.len() >= self.batch {
                    self.flush(&mut local, &mut st);
                }
            } else {
                self.release::<FULL>(t, &mut local, &mut st);
            }
        }
        // Aborting: whatever was batched or chosen as next is dropped with the run.
        st.pending.clear();
        self.publish(&mut st);
        if st.migrated > 0 {
            self.counters.migrated(st.migrated);
        }
        lock(&self.reports).push(WorkerReport {
            worker: w,
            tasks: st.tasks,
            spans: st.spans,
        });
    }

    #[inline(always)]
    fn run_one<const FULL: bool>(
        &self,
        t: TaskId,
        st: &mut WorkerState,
    ) -> Result<(), TaskFailure> {
        if !FULL {
            return self.exec.run(t, st.w);
        }
        if self.placement
            && self
                .target_of(self.graph.meta(t))
                .is_some_and(|target| target != st.w)
        {
            st.migrated += 1;
        }
        let permit = match &self.gate {
            Some(g) => {
                let m = self.graph.meta(t);
                Some(g.acquire(m.stream, m.pool))
            }
            None => None,
        };
        let r = if self.trace {
            let s = self.t0.elapsed().as_nanos() as u64;
            let r = self.exec.run(t, st.w);
            let e = self.t0.elapsed().as_nanos() as u64;
            st.spans.push(Span {
                task: t.0,
                worker: st.w as u32,
                start_ns: s,
                end_ns: e,
            });
            r
        } else {
            self.exec.run(t, st.w)
        };
        drop(permit);
        r
    }

    /// Release `t`'s successors: keep one as the next task if allowed, queue the rest.
    #[inline(always)]
    fn release<const FULL: bool>(
        &self,
        t: TaskId,
        local: &mut LocalReady<'_>,
        st: &mut WorkerState,
    ) {
        let mut pushed = 0u8;
        self.graph.release(t, self.alone, |s| {
            pushed |= self.route::<FULL>(s, local, st)
        });
        self.wake_peers(pushed);
    }

    /// A worker queued work in the queue pools of bit mask `pushed` (bit [`pool_index`]): wake
    /// a parked peer that can run it, if there can be one.
    #[inline]
    fn wake_peers(&self, pushed: u8) {
        if pushed != 0 && self.workers > 1 {
            for pool in [ExecPool::Vector, ExecPool::Cube, ExecPool::Any] {
                if pushed & (1 << pool_index(pool)) != 0 {
                    self.notify(pool, None);
                }
            }
        }
    }

    fn flush(&self, local: &mut LocalReady<'_>, st: &mut WorkerState) {
        if st.pending.is_empty() {
            return;
        }
        let pending = std::mem::take(&mut st.pending);
        let mut pushed = 0u8;
        for &t in &pending {
            self.graph.release(t, self.alone, |s| {
                pushed |= self.route::<true>(s, local, st)
            });
        }
        self.counters.batch(pending.len() as u64);
        st.pending = pending;
        st.pending.clear();
        self.wake_peers(pushed);
    }

    /// Route a ready task. Returns the bit ([`pool_index`]) of the queue pool it was pushed to
    /// locally (someone may need waking), or 0 if it became this worker's next task or was
    /// placed on another worker (whom this call wakes).
    #[inline(always)]
    fn route<const FULL: bool>(
        &self,
        s: TaskId,
        local: &mut LocalReady<'_>,
        st: &mut WorkerState,
    ) -> u8 {
        if !FULL || !self.needs_meta() {
            if st.direct && st.next.is_none() {
                st.next = Some(s);
                return 0;
            }
            if st.direct && self.alone {
                // Nobody can steal from a lone worker: a plain stack, LIFO like its deque,
                // without the deque's fences.
                st.private.push(s);
                return 0;
            }
            match self.kind {
                ReadyKind::Priority => {
                    local.push_with_priority(ExecPool::Any, s, self.graph.priority(s))
                }
                ReadyKind::Fifo | ReadyKind::WorkSteal => local.push(ExecPool::Any, s),
            }
            return 1 << pool_index(ExecPool::Any);
        }
        let m = self.graph.meta(s);
        let pool = self.queue_pool(m.pool);
        if let Some(target) = self.placed(m, st.w) {
            self.push_placed(target, pool, s);
            if target != st.w {
                self.notify(pool, Some(target));
            }
            return 0;
        }
        if st.direct && st.next.is_none() && Self::fits(st.mine, pool) {
            st.next = Some(s);
            return 0;
        }
        match self.kind {
            ReadyKind::Priority => local.push_with_priority(pool, s, self.graph.priority(s)),
            ReadyKind::Fifo | ReadyKind::WorkSteal => local.push(pool, s),
        }
        1 << pool_index(pool)
    }

    /// Publish this worker's completion count (and window slots).
    fn publish(&self, st: &mut WorkerState) {
        if st.done > 0 {
            match self.window {
                // The window counts the completions it is told of.
                Some(win) => win.leave_n(st.done as usize),
                None => self.counters.completed(st.done),
            }
            self.completed.fetch_add(st.done, Ordering::SeqCst);
            st.tasks += st.done;
            st.done = 0;
        }
    }

    /// The plain configuration's first look for a next task, without the general search: the
    /// rest of this worker's source chunk, then its own deque. `None` sends the worker to
    /// [`Engine::find`] (which also notices an abort).
    #[inline(always)]
    fn quick<const FULL: bool>(
        &self,
        local: &mut LocalReady<'_>,
        st: &mut WorkerState,
    ) -> Option<TaskId> {
        if FULL || self.abort.load(Ordering::Relaxed) {
            return None;
        }
        if let Some(i) = st.src.next() {
            return Some(self.sources[i]);
        }
        if let Some(t) = st.private.pop() {
            return Some(t);
        }
        local.pop_own(ExecPool::Any)
    }

    /// Next task from this worker's source chunk, a new chunk, or the queues.
    #[inline]
    fn try_find(&self, local: &mut LocalReady<'_>, st: &mut WorkerState) -> Option<TaskId> {
        loop {
            if let Some(i) = st.src.next() {
                let t = self.sources[i];
                if !self.needs_meta() {
                    return Some(t);
                }
                // A source this worker may not run goes where it belongs.
                let m = self.graph.meta(t);
                let pool = self.queue_pool(m.pool);
                match self.placed(m, st.w) {
                    // A source placed on this worker is its own to run.
                    Some(target) if target == st.w => return Some(t),
                    Some(target) => {
                        self.push_placed(target, pool, t);
                        self.notify(pool, Some(target));
                    }
                    None if Self::fits(st.mine, pool) => return Some(t),
                    None => {
                        local.push(pool, t);
                        self.notify(pool, None);
                    }
                }
                continue;
            }
            let claimed = self.cursor.load(Ordering::Relaxed);
            if claimed < self.sources.len() {
                let chunk = ((self.sources.len() - claimed) / (4 * self.workers)).clamp(1, 64);
                let i = self.cursor.fetch_add(chunk, Ordering::Relaxed);
                if i < self.sources.len() {
                    st.src = i..(i + chunk).min(self.sources.len());
                    continue;
                }
            }
            if let Some(t) = st.private.pop() {
                return Some(t);
            }
            if let Some(t) = self.take_ring(local, st) {
                return Some(t);
            }
            return match st.mine {
                ExecPool::Any => local.try_pop_any(),
                p => local.try_pop(p),
            };
        }
    }

    /// Find the next task, spinning and then parking while there is none; `Done` when the run
    /// finished or aborted.
    fn find(&self, local: &mut LocalReady<'_>, st: &mut WorkerState) -> Found {
        let mut round = 0u32;
        loop {
            if self.abort.load(Ordering::Relaxed) {
                return Found::Done;
            }
            if let Some(t) = self.try_find(local, st) {
                return Found::Task(t);
            }
            if !st.pending.is_empty() {
                self.flush(local, st);
                if let Some(t) = st.next.take() {
                    return Found::Task(t);
                }
                continue;
            }
            self.publish(st);
            if self.check_finished() {
                return Found::Done;
            }
            if !Idle::backoff(round) {
                self.idle.park(st.w, || {
                    self.finished.load(Ordering::SeqCst)
                        || self.abort.load(Ordering::SeqCst)
                        || self.queues.has_work_for_worker(st.w, st.mine)
                        || self.ring.as_ref().is_some_and(ReadyRing::has_published)
                        || self.cursor.load(Ordering::SeqCst) < self.sources.len()
                        || self.check_finished()
                });
                round = 0;
            } else {
                round += 1;
            }
        }
    }

    /// After every worker returned: the first error, if any, and the workers' reports.
    pub(crate) fn into_outcome(self) -> (Option<ExecError>, Vec<WorkerReport>, Instant) {
        let error = self.error.into_inner().unwrap_or_else(|p| p.into_inner());
        let mut reports = self.reports.into_inner().unwrap_or_else(|p| p.into_inner());
        reports.sort_by_key(|r| r.worker);
        (error, reports, self.t0)
    }
}

/// A worker's private state.
struct WorkerState {
    w: usize,
    mine: ExecPool,
    direct: bool,
    next: Option<TaskId>,
    src: Range<usize>,
    /// Ready tasks of a lone worker under work stealing (nobody to steal them: no deque).
    private: Vec<TaskId>,
    /// Completions not yet published.
    done: u64,
    /// Tasks this worker ran that were placed on another (work stealing only).
    migrated: u64,
    tasks: u64,
    pending: Vec<TaskId>,
    spans: Vec<Span>,
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::exec::NoopExec;

    /// Tasks of one pool, all placed on executor `on` if any; task 0 releases `succ` when it
    /// completes.
    struct Fan {
        pool: ExecPool,
        on: Option<u32>,
        succ: Vec<TaskId>,
    }

    impl RunGraph for Fan {
        fn meta(&self, _: TaskId) -> Meta {
            Meta {
                pool: self.pool,
                affinity: self.on,
                stream: 0,
            }
        }

        fn priority(&self, _: TaskId) -> i64 {
            0
        }

        fn release(&self, t: TaskId, _: bool, mut ready: impl FnMut(TaskId)) {
            if t == TaskId(0) {
                self.succ.iter().for_each(|&s| ready(s));
            }
        }
    }

    /// A run of `graph` on `workers` workers under `config`, without sources or total.
    fn engine<'a>(graph: &'a Fan, config: &RunConfig, workers: usize) -> Engine<'a, Fan, NoopExec> {
        let counters = Arc::new(Counters::new(workers));
        Engine::new(graph, &NoopExec, config, workers, &[], None, None, counters)
    }

    /// Worker `w`'s private state at the start of its loop.
    fn state<G: RunGraph, E: Exec>(engine: &Engine<'_, G, E>, w: usize) -> WorkerState {
        WorkerState {
            w,
            mine: engine.pool_of(w),
            direct: engine.kind == ReadyKind::WorkSteal,
            next: None,
            src: 0..0,
            private: Vec::new(),
            done: 0,
            migrated: 0,
            tasks: 0,
            pending: Vec::new(),
            spans: Vec::new(),
        }
    }

    /// Parks the workers `parked` of `engine` on threads of `s` (each re-check finds nothing,
    /// so each waits until woken), waits until all have announced their sleep, runs `act`, and
    /// returns which of them `act` claimed for a wake-up: a notification claims a sleeper in
    /// the caller's thread (its `asleep` flag swapped to false), so the answer does not depend
    /// on when the woken thread runs. Every parked worker is then woken and joined.
    fn claimed_by<G: RunGraph, E: Exec>(
        engine: &Engine<'_, G, E>,
        parked: &[usize],
        act: impl FnOnce(),
    ) -> Vec<usize> {
        std::thread::scope(|s| {
            for &w in parked {
                s.spawn(move || engine.idle.park(w, || false));
            }
            // A sleeper is counted after its flag is set: then a notification can claim it.
            while engine.idle.sleeping() < parked.len() {
                std::thread::yield_now();
            }
            act();
            let claimed = parked
                .iter()
                .copied()
                .filter(|&w| !engine.idle.is_asleep(w))
                .collect();
            engine.idle.wake_all();
            claimed
        })
    }

    /// A worker that queued work in a pool wakes one parked peer of that pool and no other:
    /// four workers split into three vector ones (0–2) and a cube one (3), all parked; cube work
    /// claims worker 3 (the only one that can run it), vector work one vector worker.
    #[test]
    fn a_worker_wakes_one_parked_peer_of_the_pool_it_queued_work_in() {
        let config = RunConfig {
            pools: PoolSplit::ByExecUnit { vector: 3 },
            ..RunConfig::default()
        };
        for (pool, fits) in [
            (ExecPool::Cube, (|w| w == 3) as fn(usize) -> bool),
            (ExecPool::Vector, |w| w < 3),
        ] {
            let graph = Fan {
                pool,
                on: None,
                succ: vec![],
            };
            let e = engine(&graph, &config, 4);
            let claimed = claimed_by(&e, &[0, 1, 2, 3], || e.wake_peers(1 << pool_index(pool)));
            assert_eq!(claimed.len(), 1, "{pool:?} work claimed {claimed:?}");
            assert!(
                fits(claimed[0]),
                "{pool:?} work claimed worker {}",
                claimed[0]
            );
        }
    }

    /// A worker that releases more successors than it keeps queues the others and wakes a
    /// parked peer for them: under work stealing with plain routing (the first successor is
    /// the worker's next task, the second goes to its deque) and under FIFO with a pool split
    /// (the vector worker 0 releases a cube task, which only the parked cube worker 1 can run).
    #[test]
    fn a_worker_that_queues_released_tasks_wakes_a_parked_peer() {
        let plain = RunConfig::default();
        let split = RunConfig {
            ready: ReadyKind::Fifo,
            pools: PoolSplit::ByExecUnit { vector: 1 },
            ..RunConfig::default()
        };
        for (config, pool) in [(plain, ExecPool::Any), (split, ExecPool::Cube)] {
            let graph = Fan {
                pool,
                on: None,
                succ: vec![TaskId(1), TaskId(2)],
            };
            let e = engine(&graph, &config, 2);
            let mut local = e.queues.local(0).unwrap();
            let mut st = state(&e, 0);
            let claimed = claimed_by(&e, &[1], || {
                if e.needs_meta() {
                    e.release::<true>(TaskId(0), &mut local, &mut st)
                } else {
                    e.release::<false>(TaskId(0), &mut local, &mut st)
                }
            });
            assert_eq!(claimed, [1], "{pool:?} tasks released by worker 0");
        }
    }

    /// A worker that claims a batch of the orchestrator's ready tasks from the ring keeps the
    /// first, queues the rest on its deque and wakes a parked peer for them.
    #[test]
    fn a_worker_that_takes_a_batch_from_the_ring_wakes_a_parked_peer() {
        let graph = Fan {
            pool: ExecPool::Any,
            on: None,
            succ: vec![],
        };
        let e = engine(&graph, &RunConfig::default(), 2).with_ready_ring();
        // Nobody parked yet: the tasks stay in a batch until published, waking nobody.
        e.push_external_all(&[TaskId(0), TaskId(1), TaskId(2)]);
        e.publish_external();
        let mut local = e.queues.local(0).unwrap();
        let mut st = state(&e, 0);
        let mut first = None;
        let claimed = claimed_by(&e, &[1], || first = e.take_ring(&mut local, &mut st));
        assert_eq!(first, Some(TaskId(0)));
        assert_eq!(claimed, [1]);
    }

    /// The orchestrator's ready tasks, pushed as a batch through the ring while a worker is
    /// parked, are published at once and wake it.
    #[test]
    fn the_orchestrators_batch_wakes_a_parked_worker_through_the_ring() {
        let graph = Fan {
            pool: ExecPool::Any,
            on: None,
            succ: vec![],
        };
        let e = engine(&graph, &RunConfig::default(), 2).with_ready_ring();
        let claimed = claimed_by(&e, &[1], || e.push_external_all(&[TaskId(0), TaskId(1)]));
        assert_eq!(claimed, [1]);
        assert!(e.ring.as_ref().is_some_and(ReadyRing::has_published));
    }

    /// Under FIFO and priority a released task placed on the worker that released it goes to
    /// that worker's own queue, which no other worker pops (under work stealing it would be the
    /// releaser's next task instead).
    #[test]
    fn a_task_placed_on_its_releaser_stays_in_its_own_queue_under_fifo_and_priority() {
        for ready in [ReadyKind::Fifo, ReadyKind::Priority] {
            let config = RunConfig {
                ready,
                placement: true,
                ..RunConfig::default()
            };
            let graph = Fan {
                pool: ExecPool::Any,
                on: Some(0),
                succ: vec![TaskId(1)],
            };
            let e = engine(&graph, &config, 2);
            let (mut mine, mut other) = (e.queues.local(0).unwrap(), e.queues.local(1).unwrap());
            let mut st = state(&e, 0);
            e.release::<true>(TaskId(0), &mut mine, &mut st);
            assert_eq!(st.next, None, "{ready:?}");
            assert_eq!(
                other.try_pop_any(),
                None,
                "{ready:?}: worker 1 took worker 0's task"
            );
            assert_eq!(mine.try_pop_any(), Some(TaskId(1)), "{ready:?}");
        }
    }
}
