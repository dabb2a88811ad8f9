//! Streamed runs: the graph is built on the calling thread (the orchestrator) while the workers
//! already run the tasks that are ready (start policies and the task window).
//!
//! The orchestrator drives a [`GraphBuilder`] whose edge sink is a [`StreamSink`]. For every
//! submitted task the sink
//!
//! 1. admits it into the task window (`stall` blocks until a worker completes something —
//!    opening the start gate first so the wait cannot deadlock; `abort` fails the run with
//!    [`ExecError::WindowFull`]; `benchmark` counts the overflow and goes on),
//! 2. copies node, params and regions into the run's [`TaskTable`] (workers read tasks there),
//! 3. wires its inferred edges into the streaming protocol of
//!    [`pto_wsp_graph::state::TaskStates`] (an edge whose producer already completed costs
//!    nothing), and seals it: if nothing is left to wait for, the task is ready and passes the
//!    start gate ([`StartGate`]: immediate, threshold, after orchestration) to the ready queues.
//!
//! # Batches
//!
//! When the run has no task window or a stalling one (an `abort` or `benchmark` window judges
//! tasks in flight as they are submitted and never waits, so holding tasks would change its
//! verdicts) the sink seals submitted tasks a batch at a time ([`crate::ring::BATCH`]
//! submissions, or at once while every worker is parked, or while some worker is parked and a
//! held task waits for no predecessor), so the workers trail the builder by about a batch
//! instead of running each task the moment it is sealed: the builder and the workers then work
//! on different task-state cache lines instead of passing each task's lines back and forth (a
//! chain: the worker completes task `k` while the builder wires `k + 1` to it, on the same
//! line). This holds for every routing: when routing is plain (work stealing, no placement or
//! pool split) the engine publishes the tasks found ready through its ready ring; otherwise
//! (a `dispatch` placement or a pool split, as in the LLaMA layer's schedule) each goes to the
//! queue or inbox its routing names, a batch of seals at a time. Unsealed tasks are sealed and
//! published before the orchestrator waits for anything (window, completed prefix, `wait_complete`,
//! `rate_limit` pacing) and when orchestration ends. So a task waits for at most a batch of later
//! submissions, and a producer that waits for a task's completion must do so through the sink
//! ([`EdgeSink::wait_complete`]), not by other means.
//!
//! Held tasks are also cheaper to wire and seal: no worker can see a task before it is sealed,
//! so an edge from a held task is pushed onto its fan-out list by a plain store
//! ([`TaskStates::add_edge_unsealed_in`]), and a batch is sealed newest first, so that a held
//! task whose every accepted edge comes from its own batch is sealed while those producers still
//! cannot have completed: its count is set by a plain store
//! ([`TaskStates::seal_unsealed_preds_in`]), not a read-modify-write. A task with an edge from a
//! task sealed earlier (a worker may be completing it), or one being wired when a batch is
//! sealed, takes the atomic wiring and seal; so a chain costs the orchestrator an atomic
//! read-modify-write only at batch boundaries. (Under a `timing` other than `immediate` tasks
//! are sealed one by one as timing releases them, by the atomic seal.)
//!
//! Tasks that become ready later are released by the worker that completes their last
//! predecessor, exactly as in a finished graph. The run ends when orchestration has ended and
//! every submitted task has completed.
//!
//! Memory follows the window, not the task count: every [`pto_wsp_graph::builder::RETIRE_EVERY`]
//! submissions the sink advances a completed-prefix watermark and frees everything per task
//! below it — the TensorMap's records, the builder's dedup stamps (the builder keeps no task
//! once submitted: [`EdgeSink::forgets_tasks`]), the task states ([`TaskStates::reclaim_below`]) and edge
//! nodes ([`EdgeCursor::reclaim`]) and the task table (unless the run records its graph for the
//! cycle model, which reads the table afterwards). What stays is the tasks between the oldest
//! unfinished one and the newest submitted ([`RunStats::held_tasks_peak`]); under a stalling
//! window the orchestrator keeps that span under `max(2 · window, 2 · RETIRE_EVERY)` tasks.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Instant;

use pto_wsp_graph::TaskId;
use pto_wsp_graph::builder::{
    BuildStats, BuilderParts, EdgeSink, ExactMap, GraphBuilder, RETIRE_EVERY,
};
use pto_wsp_graph::counters::Counters;
use pto_wsp_graph::explicit::ExplicitBuilder;
use pto_wsp_graph::order_check::OrderChecker;
use pto_wsp_graph::start::StartGate;
use pto_wsp_graph::state::{EdgeCursor, TaskStates};
use pto_wsp_graph::storage::TaskNode;
use pto_wsp_graph::tensor_map::{AnyTensorMap, MapStats};
use pto_wsp_graph::timing::ReleaseTiming;
use pto_wsp_graph::types::TaskIo;
use pto_wsp_graph::window::{Reservation, WindowError, WindowState};
use pto_wsp_ir::{DepsMode, StartPolicy, Timing, WindowMode};

use crate::engine::{Engine, Meta, RunGraph};
use crate::exec::{Exec, ExecError, UnorderedRun};
use crate::idle::Idle;
use crate::pool::{WorkerPool, panic_message};
use crate::ring::BATCH;
use crate::run::{RunConfig, finish_stats};
use crate::stats::RunStats;
use crate::sync::{Arc, AtomicBool, Ordering, thread};
use crate::table::{TableWriter, TaskTable};

/// How the graph of a streamed run is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamConfig {
    /// Dependency inference mode.
    pub deps: DepsMode,
    /// The exact-key map for exact mode.
    pub exact: ExactMap,
    /// When workers may start.
    pub start: StartPolicy,
    /// Task window (size, mode), if any.
    pub window: Option<(u64, WindowMode)>,
    /// Keep every edge of the graph in [`RunStats::edge_list`] (for the cycle-cost model).
    pub record_edges: bool,
    /// When submitted tasks are released ([`ReleaseTiming`]).
    pub timing: Timing,
    /// Streams (the rounds of `timing interleaved(n)`).
    pub streams: u64,
    /// Check that every two conflicting tasks are ordered by a path of the graph
    /// ([`pto_wsp_graph::order_check`]); the first that is not fails the run with
    /// [`ExecError::Unordered`] before the later task is released.
    pub check_order: bool,
}

impl Default for StreamConfig {
    fn default() -> StreamConfig {
        StreamConfig {
            deps: DepsMode::Exact,
            exact: ExactMap::Growable,
            start: StartPolicy::Immediate,
            window: None,
            record_edges: false,
            timing: Timing::Immediate,
            streams: 1,
            check_order: false,
        }
    }
}

/// The builder a streamed run's producer fills.
pub type StreamBuilder<'s> = GraphBuilder<AnyTensorMap, StreamSink<'s>>;

/// The builder a streamed run's producer of explicit edges fills
/// ([`WorkerPool::run_streaming_explicit`]).
pub type ExplicitStreamBuilder<'s> = ExplicitBuilder<StreamSink<'s>>;

/// What a streamed run's builder leaves for the next run ([`WorkerPool::run_streaming_on`]): its
/// TensorMap and buffers, emptied when the next run starts but with their allocations, so a
/// caller that runs one workload again and again (a program's `execute`) neither grows a new map
/// through every doubling nor has the kernel zero fresh pages for it each run. Holds nothing
/// until a run has ended; a run under another dependency mode or exact-map choice makes a new
/// map (and keeps that one).
#[derive(Debug, Default)]
pub struct KeptBuilder {
    parts: Option<KeptParts>,
}

impl KeptBuilder {
    /// Nothing kept yet.
    pub fn new() -> KeptBuilder {
        KeptBuilder::default()
    }

    /// Whether a run left a map and buffers.
    pub fn holds_parts(&self) -> bool {
        self.parts.is_some()
    }
}

/// A builder's parts and the map configuration they were made for.
#[derive(Debug)]
struct KeptParts {
    deps: DepsMode,
    exact: ExactMap,
    parts: BuilderParts<AnyTensorMap>,
}

/// Tells a producer whether its streamed run failed (it should stop submitting).
#[derive(Clone, Copy, Debug)]
pub struct AbortProbe<'s>(&'s AtomicBool);

impl AbortProbe<'_> {
    /// Whether the run failed.
    #[inline]
    pub fn failed(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// The graph of a streamed run, as the worker loop sees it.
struct StreamGraph<'t> {
    table: &'t TaskTable,
    states: &'t TaskStates,
}

impl RunGraph for StreamGraph<'_> {
    #[inline]
    fn meta(&self, t: TaskId) -> Meta {
        let n = self
            .table
            .node(t)
            .expect("a task is published before it can become ready");
        Meta {
            pool: n.pool(),
            affinity: n.affinity(),
            stream: n.stream,
        }
    }

    #[inline]
    fn priority(&self, t: TaskId) -> i64 {
        self.table.priority(t)
    }

    #[inline]
    fn release(&self, t: TaskId, _alone: bool, ready: impl FnMut(TaskId)) {
        // The orchestrator wires edges concurrently: always the atomic protocol.
        self.states.complete(t, ready);
    }
}

/// The edge sink of a streamed run (see the module docs).
pub struct StreamSink<'s> {
    states: &'s TaskStates,
    /// Edge nodes, in chunks freed behind the completed prefix.
    cursor: EdgeCursor,
    writer: TableWriter<'s>,
    window: Option<&'s WindowState>,
    start: StartGate,
    timing: ReleaseTiming,
    /// The stream of the task being submitted (from its published node).
    stream: u32,
    /// The run's clock for `timing rate_limit`.
    t0: Instant,
    release: &'s (dyn Fn(TaskId) + Sync),
    /// `release` for the tasks a batch of seals found ready, in one call.
    release_all: &'s (dyn Fn(&[TaskId]) + Sync),
    /// The tasks the batch being sealed found ready (passed to `release_all`).
    ready: Vec<TaskId>,
    /// Makes every task `release` was given visible to the workers.
    publish: &'s (dyn Fn() + Sync),
    /// The workers' parking state: whether some or every worker is parked is a hint to seal at
    /// once rather than batch (read inline, one load per submission).
    idle: &'s Idle,
    /// Submitted tasks not sealed yet, when the engine takes ready tasks in batches, each with
    /// whether some edge it accepted comes from a task sealed before (which may complete at any
    /// time, so its seal must be the atomic one).
    unsealed: Option<Held>,
    /// Tasks from here on are submitted and not sealed (or not submitted yet): an edge from
    /// one is wired without an atomic read-modify-write ([`TaskStates::add_edge_unsealed_in`]).
    /// `u32::MAX` when seals are not batched (every producer may be sealed).
    sealed_below: u32,
    /// The task being submitted waits for a predecessor (an edge to it was accepted).
    waits: bool,
    /// The task being submitted accepted an edge from a sealed task, or a batch was sealed
    /// while it was being wired: its seal must be the atomic one.
    outside: bool,
    /// Some task in `unsealed` waits for no predecessor: sealing makes it ready.
    ready_held: bool,
    fail: &'s (dyn Fn(ExecError) + Sync),
    abort: &'s AtomicBool,
    /// How the orchestrator gives up its core while it waits for a running task.
    pause: &'s (dyn Fn() + Sync),
    refused: u64,
    edges: Option<Vec<(u32, u32)>>,
    /// Every task below this id has completed (as far as the sink has looked).
    completed_below: u32,
    /// Tasks submitted so far.
    submitted: u32,
    /// The prefix last returned by `retire_hint`.
    hinted: u32,
    /// Most tasks after the completed prefix (a stalling window only; [`StreamSink::keep_close`]).
    span: Option<u32>,
    /// Free the task table behind the watermark (not when the graph is recorded).
    reclaim_table: bool,
    /// The order checker and the mode it names, under `check_order`.
    order: Option<(OrderChecker, DepsMode)>,
    /// `edges` or `order` is on: each edge is also shown to them ([`StreamSink::observe_edge`]).
    /// One flag, so an edge of a run that records and checks nothing tests one byte.
    observed: bool,
    /// Window slots reserved for the next submissions, and what was admitted on them.
    slots: Reservation,
}

/// Most window slots the sink reserves at once (a seal batch's worth).
const WINDOW_BATCH: usize = BATCH;

/// The submitted tasks whose seal is deferred, each with whether its seal must be the atomic
/// one: at most [`BATCH`], since the sink seals the batch as soon as it is full. Held in place,
/// so a push is a store and the count's bump, with no room check against a capacity (a `Vec`'s
/// push tests its capacity and keeps a path to grow).
struct Held {
    len: usize,
    tasks: [(TaskId, bool); BATCH],
}

impl Held {
    fn new() -> Held {
        Held {
            len: 0,
            tasks: [(TaskId(0), false); BATCH],
        }
    }

    /// Appends a task; the caller seals the batch once [`Held::is_full`] (so `len < BATCH` here).
    #[inline(always)]
    fn push(&mut self, task: (TaskId, bool)) {
        debug_assert!(
            self.len < BATCH,
            "a full batch is sealed before the next push"
        );
        // The index is below `BATCH` (the batch is sealed when full): the mask only lets the
        // compiler drop the bounds check, and leaves the index unchanged.
        self.tasks[self.len % BATCH] = task;
        self.len += 1;
    }

    #[inline(always)]
    fn is_full(&self) -> bool {
        self.len >= BATCH
    }

    fn as_slice(&self) -> &[(TaskId, bool)] {
        &self.tasks[..self.len]
    }

    fn as_mut_slice(&mut self) -> &mut [(TaskId, bool)] {
        &mut self.tasks[..self.len]
    }

    fn clear(&mut self) {
        self.len = 0;
    }
}

impl std::fmt::Debug for StreamSink<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamSink")
            .field("refused", &self.refused)
            .finish_non_exhaustive()
    }
}

impl<'s> StreamSink<'s> {
    /// Whether the run failed (a window overflow in `abort` mode, or a task failure): the
    /// producer should stop submitting.
    pub fn failed(&self) -> bool {
        self.abort.load(Ordering::Relaxed)
    }

    /// A handle the producer may keep to ask whether the run failed.
    pub fn abort_probe(&self) -> AbortProbe<'s> {
        AbortProbe(self.abort)
    }

    /// Tasks submitted that `timing` has not released yet.
    pub fn timing_held(&self) -> usize {
        self.timing.held()
    }

    /// Edges that cost nothing because their producer had already completed.
    pub fn refused_edges(&self) -> u64 {
        self.refused
    }

    /// Advances the completed prefix over tasks whose completion it observes (`is_complete`
    /// loads with acquire ordering, so their work happens before anything this thread publishes
    /// later): amortised O(1) per task, since the prefix only grows.
    fn advance(&mut self) {
        self.completed_below = self
            .states
            .completed_until(TaskId(self.completed_below), TaskId(self.submitted))
            .0;
    }

    /// Under a stalling window, keeps the tasks submitted after the completed prefix under
    /// `span`: the window counts tasks in flight, and a task that runs long while later ones
    /// complete would otherwise let the orchestrator run arbitrarily far ahead of it, holding
    /// the storage of everything in between. Waits (spinning, then yielding: nothing announces
    /// a completion to the orchestrator) until the oldest unfinished task completes; it is ready
    /// or running, since everything before it is done, and the start gate is opened.
    #[inline]
    fn keep_close(&mut self) {
        let Some(span) = self.span else { return };
        if self.submitted - self.completed_below < span {
            return;
        }
        self.catch_up(span);
    }

    /// [`StreamSink::keep_close`] once `span` tasks are submitted past the completed prefix
    /// this sink knew of (rare: out of line).
    #[cold]
    #[inline(never)]
    fn catch_up(&mut self, span: u32) {
        self.advance();
        if self.submitted - self.completed_below < span {
            return;
        }
        self.open_all();
        let mut round = 0u32;
        loop {
            self.advance();
            if self.submitted - self.completed_below < span || self.failed() {
                return;
            }
            if Idle::backoff(round) {
                round += 1;
            } else {
                (self.pause)();
            }
        }
    }

    /// Seals `task`, passing it to the start gate if nothing is left to wait for.
    #[inline(always)]
    fn seal(
        states: &TaskStates,
        cursor: &mut EdgeCursor,
        start: &mut StartGate,
        release: &(dyn Fn(TaskId) + Sync),
        task: TaskId,
    ) {
        if states.seal_in(cursor, task) {
            start.ready(task, release);
        }
    }

    /// Seals the submitted tasks whose seal was deferred, in submission order, and publishes
    /// those found ready.
    fn seal_batch(&mut self) {
        let Some(unsealed) = &mut self.unsealed else {
            return;
        };
        self.ready_held = false;
        // A task being wired now has producers that are sealed from here on.
        self.outside = true;
        if let Some(&(last, _)) = unsealed.as_slice().last()
            && self.sealed_below != u32::MAX
        {
            self.sealed_below = last.0 + 1;
        }
        let (states, cursor, start, ready) = (
            self.states,
            &mut self.cursor,
            &mut self.start,
            &mut self.ready,
        );
        // Newest first: a task whose every accepted producer is in this batch is sealed while
        // they all are still unsealed (none can have completed), so its count is set by a
        // plain store; the others take the atomic seal. The flag becomes "ready".
        for e in unsealed.as_mut_slice().iter_mut().rev() {
            e.1 = if e.1 {
                states.seal_in(cursor, e.0)
            } else {
                states.seal_unsealed_preds_in(cursor, e.0)
            };
        }
        for &(t, found_ready) in unsealed.as_slice() {
            if found_ready {
                start.ready(t, |r| ready.push(r));
            }
        }
        unsealed.clear();
        if !ready.is_empty() {
            (self.release_all)(ready);
            ready.clear();
        }
        (self.publish)();
    }

    /// Seals every deferred task, releases every task timing holds, opens the start gate and
    /// publishes every released task: the orchestrator calls this before it waits for any
    /// completion, and at the end.
    fn open_all(&mut self) {
        if let Some(win) = self.window {
            win.settle(&mut self.slots);
        }
        self.seal_batch();
        let (states, release) = (self.states, self.release);
        let (cursor, start) = (&mut self.cursor, &mut self.start);
        self.timing
            .flush(|t| Self::seal(states, cursor, start, release, t));
        self.start.force_open(release);
        (self.publish)();
    }

    /// A submission under a `timing` other than `immediate`: paces it (`rate_limit`: waits,
    /// yielding, until the period allows one more release) and seals what timing releases.
    #[cold]
    fn submit_timed(&mut self, task: TaskId) {
        let mut now = self.t0.elapsed().as_nanos() as u64;
        if self.timing.wait_until(now).is_some() {
            // About to wait: what was released must be able to run meanwhile.
            (self.publish)();
        }
        while let Some(free) = self.timing.wait_until(now) {
            if self.failed() {
                break;
            }
            if free - now > 20_000 {
                thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
            now = self.t0.elapsed().as_nanos() as u64;
        }
        let (states, release) = (self.states, self.release);
        let (cursor, start) = (&mut self.cursor, &mut self.start);
        self.timing.submitted(task, self.stream, now, |t| {
            Self::seal(states, cursor, start, release, t)
        });
    }

    /// Shows an edge to the edge list and the order checker, whichever is on (a test's or a
    /// checked run's: out of line, off the edge's path).
    #[cold]
    #[inline(never)]
    fn observe_edge(&mut self, pred: TaskId, succ: TaskId) {
        if let Some(e) = &mut self.edges {
            e.push((pred.0, succ.0));
        }
        if let Some((c, _)) = &mut self.order {
            c.edge(pred);
        }
    }

    /// Admits the task being submitted into the window: on a slot reserved earlier if one is
    /// left, else by reserving up to [`WINDOW_BATCH`] slots at once (the module docs).
    #[inline]
    fn enter_window(&mut self) {
        let Some(win) = self.window else { return };
        self.keep_close();
        if win.take(&mut self.slots) {
            return;
        }
        self.reserve_slots(win);
    }

    /// [`StreamSink::enter_window`] with no reserved slot left.
    #[inline(never)]
    fn reserve_slots(&mut self, win: &'s WindowState) {
        if win.mode() == WindowMode::Stall && win.in_flight() >= win.capacity() {
            // Waiting for completions needs running workers.
            self.open_all();
        }
        if let Err(WindowError::Full {
            capacity,
            in_flight,
        }) = win.reserve(&mut self.slots, WINDOW_BATCH)
        {
            (self.fail)(ExecError::WindowFull {
                capacity,
                in_flight,
            });
        }
    }
}

impl EdgeSink for StreamSink<'_> {
    #[inline(always)]
    fn edge(&mut self, pred: TaskId, succ: TaskId) {
        if self.observed {
            self.observe_edge(pred, succ);
        }
        if pred.0 >= self.sealed_below {
            // Held in the batch being built: not sealed, so not completed.
            self.states
                .add_edge_unsealed_in(&mut self.cursor, pred, succ);
            self.waits = true;
        } else if self
            .states
            .add_edge_in_inlined(&mut self.cursor, pred, succ)
        {
            self.waits = true;
            self.outside = true;
        } else {
            self.refused += 1;
        }
    }

    #[inline(always)]
    fn publish(&mut self, node: &TaskNode, params: &[u64], io: &[TaskIo]) {
        if let Some((c, deps)) = &mut self.order
            && let Err(pair) = c.task(node.id, node.kernel, io)
        {
            // Fails the run before this task can be released; only the first is kept.
            (self.fail)(ExecError::Unordered(Box::new(UnorderedRun::new(
                pair, *deps,
            ))));
        }
        self.enter_window();
        self.stream = node.stream;
        self.writer.push(node, params, io);
    }

    #[inline(always)]
    fn submitted(&mut self, task: TaskId) {
        let (states, release) = (self.states, self.release);
        let waits = std::mem::take(&mut self.waits);
        let outside = std::mem::take(&mut self.outside);
        if !self.timing.is_immediate() {
            self.submit_timed(task);
        } else if let Some(unsealed) = &mut self.unsealed {
            unsealed.push((task, outside));
            self.ready_held |= !waits;
            // Early only when that helps a parked worker: every worker parked, or some parked
            // and a held task is ready once sealed. Not merely because some worker is parked:
            // on two threads a chain always has one (one task is ready at a time), and sealing
            // each task at once would let the running worker complete task `k` while this
            // thread wires `k + 1` to it, on the same state lines (what batches avoid).
            if unsealed.is_full()
                || self.idle.all_asleep()
                || (self.ready_held && self.idle.any_asleep())
            {
                self.seal_batch();
                self.outside = false;
            }
        } else {
            Self::seal(states, &mut self.cursor, &mut self.start, release, task);
        }
        self.start.submitted(release);
        self.submitted = task.0 + 1;
    }

    /// The completed prefix, if it advanced since the last hint; frees what the run holds for
    /// the tasks below it.
    fn retire_hint(&mut self) -> Option<TaskId> {
        if self.edges.is_some() {
            // A recorded graph must hold every inferred edge, also those to tasks that have
            // completed: the TensorMap keeps its records.
            return None;
        }
        self.advance();
        if self.completed_below == self.hinted {
            return None;
        }
        self.hinted = self.completed_below;
        let done = TaskId(self.completed_below);
        if let Some((c, _)) = &mut self.order {
            c.retire_before(done);
        }
        // SAFETY: this thread saw every task below `done` complete (acquire loads in `advance`), it
        // is the only wirer and the table's only writer (and the priority writer's thread), and the
        // builder names such tasks afterwards only as predecessors of edges.
        #[allow(unsafe_code)]
        unsafe {
            self.states.reclaim_below(done);
            self.cursor.reclaim(self.states, done);
            if self.reclaim_table {
                self.writer.reclaim_below(done);
            }
        }
        Some(done)
    }

    fn forgets_tasks(&self) -> bool {
        true
    }

    /// Opens the start gate (the tasks waited on must be able to run), then spins, yielding,
    /// until they have completed or the run failed.
    fn wait_complete(&mut self, tasks: &[TaskId]) -> Option<bool> {
        if tasks.iter().all(|&t| self.states.is_complete(t)) {
            return Some(false);
        }
        self.open_all();
        let mut spins = 0u32;
        loop {
            if self.failed() {
                return None;
            }
            if tasks.iter().all(|&t| self.states.is_complete(t)) {
                return Some(true);
            }
            spins = spins.saturating_add(1);
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                (self.pause)();
            }
        }
    }
}

/// How far a streamed run under a stalling window of `window` tasks may submit past its
/// completed prefix: twice the window, and at least two retire periods (the prefix is looked at
/// every [`RETIRE_EVERY`] submissions).
fn span_limit(window: u64) -> u32 {
    window
        .saturating_mul(2)
        .max(2 * u64::from(RETIRE_EVERY))
        .min(u64::from(u32::MAX / 2)) as u32
}

/// What a streamed run's sink calls on the engine (the orchestrator's side of it).
pub(crate) struct Hooks<'s> {
    pub(crate) release: &'s (dyn Fn(TaskId) + Sync),
    pub(crate) release_all: &'s (dyn Fn(&[TaskId]) + Sync),
    pub(crate) publish: &'s (dyn Fn() + Sync),
    pub(crate) fail: &'s (dyn Fn(ExecError) + Sync),
    pub(crate) idle: &'s Idle,
    pub(crate) abort: &'s AtomicBool,
    /// Called, after spinning, in every round of the orchestrator's waits for tasks to complete
    /// (its completed prefix, `wait_complete`): the engine yields the thread; a test driving
    /// the sink alone completes tasks there, standing in for the workers.
    pub(crate) pause: &'s (dyn Fn() + Sync),
}

impl<'s> StreamSink<'s> {
    /// The sink of a run under `stream`, wiring into `states` and writing `writer`'s table.
    /// `batch_seals`: seal submitted tasks a batch at a time (the module docs, "Batches").
    pub(crate) fn new(
        states: &'s TaskStates,
        writer: TableWriter<'s>,
        window: Option<&'s WindowState>,
        stream: &StreamConfig,
        batch_seals: bool,
        hooks: Hooks<'s>,
    ) -> StreamSink<'s> {
        StreamSink {
            states,
            cursor: EdgeCursor::new(),
            writer,
            window,
            start: StartGate::new(stream.start),
            timing: ReleaseTiming::new(&stream.timing, stream.streams),
            stream: 0,
            t0: Instant::now(),
            release: hooks.release,
            release_all: hooks.release_all,
            ready: Vec::with_capacity(BATCH),
            publish: hooks.publish,
            idle: hooks.idle,
            unsealed: batch_seals.then(Held::new),
            // Only seals held in batches under `immediate` timing leave producers unsealed
            // while their consumers are wired.
            sealed_below: if batch_seals && matches!(stream.timing, Timing::Immediate) {
                0
            } else {
                u32::MAX
            },
            waits: false,
            outside: false,
            ready_held: false,
            fail: hooks.fail,
            abort: hooks.abort,
            pause: hooks.pause,
            refused: 0,
            edges: stream.record_edges.then(Vec::new),
            completed_below: 0,
            submitted: 0,
            hinted: 0,
            span: match stream.window {
                Some((n, WindowMode::Stall)) => Some(span_limit(n)),
                _ => None,
            },
            reclaim_table: !stream.record_edges,
            order: stream
                .check_order
                .then(|| (OrderChecker::new(), stream.deps)),
            observed: stream.record_edges || stream.check_order,
            slots: Reservation::default(),
        }
    }
}

/// What orchestration reports: its time, the edges found (all, wired, forgotten), the edge
/// list when recorded, the TensorMap's figures.
#[derive(Default)]
struct Orchestrated {
    build_ns: u64,
    edges: (u64, u64, u64),
    edge_list: Vec<(u32, u32)>,
    map_stats: MapStats,
}

/// What orchestration needs of the builder a producer fills: the general [`GraphBuilder`] or
/// the [`ExplicitBuilder`], both over a [`StreamSink`].
trait Orchestrator<'s> {
    /// Drops the open task, if any.
    fn abandon(&mut self);
    /// The build's counters.
    fn build_stats(&self) -> BuildStats;
    /// Tasks submitted.
    fn tasks(&self) -> u64;
    /// The sink.
    fn stream_sink(&mut self) -> &mut StreamSink<'s>;
}

impl<'s> Orchestrator<'s> for StreamBuilder<'s> {
    fn abandon(&mut self) {
        GraphBuilder::abandon(self);
    }
    fn build_stats(&self) -> BuildStats {
        self.stats()
    }
    fn tasks(&self) -> u64 {
        self.len() as u64
    }
    fn stream_sink(&mut self) -> &mut StreamSink<'s> {
        self.sink_mut()
    }
}

impl<'s> Orchestrator<'s> for ExplicitStreamBuilder<'s> {
    fn abandon(&mut self) {}
    fn build_stats(&self) -> BuildStats {
        self.stats()
    }
    fn tasks(&self) -> u64 {
        self.len() as u64
    }
    fn stream_sink(&mut self) -> &mut StreamSink<'s> {
        self.sink_mut()
    }
}

/// Which builder a streamed run's producer fills.
trait StreamKind {
    /// The builder over a sink of lifetime `'s`.
    type Builder<'s>: Orchestrator<'s>;
    /// What the builder leaves for the next run.
    type Kept;
    /// The builder `stream` asks for, over `sink`, on what an earlier run left if it fits.
    fn builder<'s>(
        stream: &StreamConfig,
        sink: StreamSink<'s>,
        kept: Option<Self::Kept>,
    ) -> Self::Builder<'s>;
    /// What `builder` leaves for the next run.
    fn keep(builder: Self::Builder<'_>, stream: &StreamConfig) -> Option<Self::Kept>;
}

/// The general builder, inferring edges by `stream.deps`.
struct General;

impl StreamKind for General {
    type Builder<'s> = StreamBuilder<'s>;
    type Kept = KeptParts;
    fn builder<'s>(
        stream: &StreamConfig,
        sink: StreamSink<'s>,
        kept: Option<KeptParts>,
    ) -> StreamBuilder<'s> {
        match kept {
            Some(k) if k.deps == stream.deps && k.exact == stream.exact => {
                GraphBuilder::from_parts(k.parts, sink)
            }
            _ => GraphBuilder::with_map(AnyTensorMap::for_mode(stream.deps, stream.exact), sink),
        }
    }
    fn keep(builder: StreamBuilder<'_>, stream: &StreamConfig) -> Option<KeptParts> {
        Some(KeptParts {
            deps: stream.deps,
            exact: stream.exact,
            parts: builder.into_parts().0,
        })
    }
}

/// The explicit-edge builder: nothing inferred.
struct Explicit;

impl StreamKind for Explicit {
    type Builder<'s> = ExplicitStreamBuilder<'s>;
    type Kept = ();
    fn builder<'s>(
        _: &StreamConfig,
        sink: StreamSink<'s>,
        _: Option<()>,
    ) -> ExplicitStreamBuilder<'s> {
        ExplicitBuilder::with_sink(sink)
    }
    fn keep(_: ExplicitStreamBuilder<'_>, _: &StreamConfig) -> Option<()> {
        None
    }
}

/// Runs `produce` on `builder` (a failure or panic fails the run through `fail`), then ends
/// orchestration ([`end_orchestration`]). A panic of that ending, the orchestration's own code,
/// also fails the run (the workers would otherwise wait for tasks that never come): `None`
/// then.
fn orchestrate<'s, B, P>(
    builder: &mut B,
    produce: P,
    fail: &dyn Fn(ExecError),
    set_total: &dyn Fn(u64),
    t0: Instant,
) -> Option<Orchestrated>
where
    B: Orchestrator<'s>,
    P: FnOnce(&mut B) -> Result<(), ExecError>,
{
    match catch_unwind(AssertUnwindSafe(|| produce(builder))) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => fail(e),
        Err(p) => fail(ExecError::Internal(format!(
            "the graph producer panicked: {}",
            panic_message(&*p)
        ))),
    }
    catch_unwind(AssertUnwindSafe(|| {
        end_orchestration(builder, set_total, t0)
    }))
    .map_err(|p| {
        fail(ExecError::Internal(format!(
            "orchestration panicked: {}",
            panic_message(&*p)
        )))
    })
    .ok()
}

/// Ends orchestration: drops a task left open, seals and publishes everything held, opens the
/// start gate and tells the engine the task count through `set_total`.
fn end_orchestration<'s, B: Orchestrator<'s>>(
    builder: &mut B,
    set_total: &dyn Fn(u64),
    t0: Instant,
) -> Orchestrated {
    builder.abandon();
    let build = builder.build_stats();
    let edges = build.edges();
    let map_stats = build.map;
    let tasks = builder.tasks();
    let sink = builder.stream_sink();
    sink.open_all();
    sink.start.orchestration_done(sink.release);
    (sink.publish)();
    let edge_list = sink.edges.take().unwrap_or_default();
    let wired = edges.saturating_sub(sink.refused + build.forgotten);
    set_total(tasks);
    Orchestrated {
        build_ns: t0.elapsed().as_nanos() as u64,
        edges: (edges, wired, build.forgotten),
        edge_list,
        map_stats,
    }
}

impl WorkerPool {
    /// Runs a graph while `produce` builds it on this thread: every task `produce` submits to
    /// the builder runs once its predecessors have completed (and the start policy allows).
    /// `table` must be empty; `exec` reads tasks from it. Fails with the first task failure,
    /// a window overflow in `abort` mode, or the error `produce` returns.
    pub fn run_streaming<E, P>(
        &self,
        table: &TaskTable,
        config: &RunConfig,
        stream: &StreamConfig,
        exec: &E,
        produce: P,
    ) -> Result<RunStats, ExecError>
    where
        E: Exec,
        P: FnOnce(&mut StreamBuilder<'_>) -> Result<(), ExecError>,
    {
        let mut kept = KeptBuilder::new();
        self.run_streaming_on(
            table,
            &TaskStates::new(),
            &mut kept,
            config,
            stream,
            exec,
            produce,
        )
    }

    /// [`WorkerPool::run_streaming`] with the task states of the run given (new, or
    /// [`TaskStates::reset`] after an earlier run) and the builder's map and buffers kept in
    /// `kept` from one run to the next, so that a caller running many graphs keeps one table,
    /// one set of states and one TensorMap (and their memory) across runs.
    #[allow(clippy::too_many_arguments)]
    pub fn run_streaming_on<E, P>(
        &self,
        table: &TaskTable,
        states: &TaskStates,
        kept: &mut KeptBuilder,
        config: &RunConfig,
        stream: &StreamConfig,
        exec: &E,
        produce: P,
    ) -> Result<RunStats, ExecError>
    where
        E: Exec,
        P: FnOnce(&mut StreamBuilder<'_>) -> Result<(), ExecError>,
    {
        self.run_streamed::<General, E, P>(
            table,
            states,
            &mut kept.parts,
            config,
            stream,
            exec,
            produce,
        )
    }

    /// Like [`WorkerPool::run_streaming`] for a producer that names every edge and no region
    /// (the Taskflow shapes): it fills an [`ExplicitBuilder`], which infers nothing and writes
    /// each task once, into the run's task table. `stream.deps` and `stream.exact` are not read.
    pub fn run_streaming_explicit<E, P>(
        &self,
        table: &TaskTable,
        config: &RunConfig,
        stream: &StreamConfig,
        exec: &E,
        produce: P,
    ) -> Result<RunStats, ExecError>
    where
        E: Exec,
        P: FnOnce(&mut ExplicitStreamBuilder<'_>) -> Result<(), ExecError>,
    {
        let states = TaskStates::new();
        self.run_streamed::<Explicit, E, P>(
            table, &states, &mut None, config, stream, exec, produce,
        )
    }

    /// A streamed run whose producer fills the builder of kind `K`, on `states` (new or reset),
    /// starting from what `kept` holds and leaving the builder's parts there.
    #[allow(clippy::too_many_arguments)]
    fn run_streamed<K, E, P>(
        &self,
        table: &TaskTable,
        states: &TaskStates,
        kept: &mut Option<K::Kept>,
        config: &RunConfig,
        stream: &StreamConfig,
        exec: &E,
        produce: P,
    ) -> Result<RunStats, ExecError>
    where
        K: StreamKind,
        E: Exec,
        P: for<'s> FnOnce(&mut K::Builder<'s>) -> Result<(), ExecError>,
    {
        if !states.is_fresh() {
            return Err(ExecError::Setup(
                "a streamed run needs new or reset task states".into(),
            ));
        }
        if !table.is_empty() {
            return Err(ExecError::Setup(
                "a streamed run needs an empty task table".into(),
            ));
        }
        let Some(writer) = table.writer() else {
            return Err(ExecError::Setup(
                "the task table is in use by another run".into(),
            ));
        };
        let workers = self.threads();
        let counters = Arc::new(Counters::new(workers + 2));
        let window = stream
            .window
            .map(|(n, mode)| WindowState::new(n.max(1) as usize, mode, Arc::clone(&counters)));
        let graph = StreamGraph { table, states };
        let engine = Engine::new(
            &graph,
            exec,
            config,
            workers,
            &[],
            None,
            window.as_ref(),
            Arc::clone(&counters),
        );
        // An `abort` or `benchmark` window judges the tasks in flight as they are submitted and
        // never waits, so held tasks would change its verdicts: no batches under those. Seals
        // are batched whatever the routing; the ready ring is used only when routing is plain.
        let batch_seals = matches!(stream.window, None | Some((_, WindowMode::Stall)));
        let engine = if batch_seals {
            engine.with_ready_ring()
        } else {
            engine
        };
        let release = |t: TaskId| engine.push_external(t);
        let release_all = |ts: &[TaskId]| engine.push_external_all(ts);
        let publish = || engine.publish_external();
        let fail = |e: ExecError| engine.fail(e);
        let set_total = |n: u64| engine.set_total(n);
        let orchestration = || {
            let t0 = Instant::now();
            let hooks = Hooks {
                release: &release,
                release_all: &release_all,
                publish: &publish,
                fail: &fail,
                idle: &engine.idle,
                abort: engine.abort_flag(),
                pause: &thread::yield_now,
            };
            let sink = StreamSink::new(
                graph.states,
                writer,
                window.as_ref(),
                stream,
                batch_seals,
                hooks,
            );
            let mut builder = K::builder(stream, sink, kept.take());
            let done = orchestrate(&mut builder, produce, &fail, &set_total, t0);
            // Nothing of a builder whose orchestration panicked is kept.
            *kept = done.as_ref().and_then(|_| K::keep(builder, stream));
            done.unwrap_or_default()
        };
        let r = self.scope(&|w| engine.worker(w), orchestration);
        let (error, reports, t0) = engine.into_outcome();
        let (done, error) = match r {
            Err(p) => (Orchestrated::default(), Some(ExecError::Internal(p.0))),
            Ok(v) => (v, error),
        };
        let mut stats = finish_stats(error, reports, t0, &counters, workers)?;
        stats.build_ns = done.build_ns;
        (stats.edges, stats.wired_edges, stats.edges_unnamed) = done.edges;
        stats.edge_list = done.edge_list;
        stats.tensor_map = done.map_stats;
        stats.held_tasks_peak = graph.states.peak_tasks().max(table.peak_tasks()) as u64;
        Ok(stats)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sync::{AtomicU32, Mutex};
    use pto_wsp_graph::explicit::ExplicitTask;

    /// Under a stalling window the producer never runs `span_limit(window)` submissions past an
    /// unfinished task, and waits only there. The sink is driven alone, its hooks standing in
    /// for the workers: tasks released are completed (and leave the window) whenever the sink
    /// publishes, except task 0, which "runs" until the sink pauses in a wait for it. So task 0
    /// completes by the time submission `span` returns only if the sink waited for its completed
    /// prefix there; a pause at an earlier submission is a wait the span does not call for.
    #[test]
    fn a_stalling_window_keeps_the_producer_within_its_span_of_an_unfinished_task() {
        const WINDOW: usize = 3;
        let span = span_limit(WINDOW as u64);
        assert_eq!(span % 2, 0);
        let states = TaskStates::new();
        let table = TaskTable::new();
        let counters = Arc::new(Counters::new(1));
        let window = WindowState::new(WINDOW, WindowMode::Stall, counters);
        let released = Mutex::new(Vec::new());
        let at = AtomicU32::new(0);
        let release = |t: TaskId| released.lock().unwrap().push(t);
        let release_all = |ts: &[TaskId]| released.lock().unwrap().extend_from_slice(ts);
        let complete = |t: TaskId| {
            states.complete(t, |_| {});
            window.leave();
        };
        let publish = || {
            released.lock().unwrap().retain(|&t| {
                let runs = t.0 == 0;
                if !runs {
                    complete(t);
                }
                runs
            });
        };
        let pause = || {
            let k = at.load(Ordering::Relaxed);
            assert!(k >= span, "submission {k} waits for task 0 (span {span})");
            let mut held = released.lock().unwrap();
            if let Some(i) = held.iter().position(|t| t.0 == 0) {
                held.swap_remove(i);
                complete(TaskId(0));
            }
        };
        let fail = |e: ExecError| panic!("{e}");
        let idle = Idle::new(1);
        let abort = AtomicBool::new(false);
        let hooks = Hooks {
            release: &release,
            release_all: &release_all,
            publish: &publish,
            fail: &fail,
            idle: &idle,
            abort: &abort,
            pause: &pause,
        };
        let stream = StreamConfig {
            deps: DepsMode::Explicit,
            window: Some((WINDOW as u64, WindowMode::Stall)),
            ..StreamConfig::default()
        };
        let sink = StreamSink::new(
            &states,
            table.writer().unwrap(),
            Some(&window),
            &stream,
            false,
            hooks,
        );
        let mut b = ExplicitBuilder::with_sink(sink);
        for k in 0..span + 4 {
            at.store(k, Ordering::Relaxed);
            b.add(&ExplicitTask::host(0), &[]).unwrap();
            assert!(
                k < span || states.is_complete(TaskId(0)),
                "submission {k} returned while task 0 runs (span {span})"
            );
        }
        assert!(states.is_complete(TaskId(span - 1)));
    }

    /// The producer at its span looks at its completed prefix again before it waits: when the
    /// prefix caught up since it last looked, the submission goes on as any other and releases
    /// nothing `timing` holds. Driven alone as above: task 0 runs until the producer has made
    /// `span` submissions (the last retirement, at submission `span - 1`, saw it running, so
    /// the producer's prefix is a whole span behind), every other task completes as soon as it
    /// is released. Under `batched(5)` the open group (`(k + 1) mod 5` tasks) is held after
    /// every submission `k`, at submission `span` too.
    #[test]
    fn a_producer_at_its_span_with_a_caught_up_prefix_releases_nothing_early() {
        const WINDOW: usize = 64;
        const GROUP: u32 = 5;
        let span = span_limit(WINDOW as u64);
        assert_ne!((span + 1) % GROUP, 0);
        let states = TaskStates::new();
        let table = TaskTable::new();
        let window = WindowState::new(WINDOW, WindowMode::Stall, Arc::new(Counters::new(1)));
        let released = Mutex::new(Vec::new());
        let release = |t: TaskId| released.lock().unwrap().push(t);
        let release_all = |ts: &[TaskId]| released.lock().unwrap().extend_from_slice(ts);
        let complete = |t: TaskId| {
            states.complete(t, |_| {});
            window.leave();
        };
        let (idle, abort) = (Idle::new(1), AtomicBool::new(false));
        let hooks = Hooks {
            release: &release,
            release_all: &release_all,
            publish: &|| {},
            fail: &|e: ExecError| panic!("{e}"),
            idle: &idle,
            abort: &abort,
            pause: &|| panic!("the producer waits though no task runs a span behind"),
        };
        let stream = StreamConfig {
            deps: DepsMode::Explicit,
            window: Some((WINDOW as u64, WindowMode::Stall)),
            timing: Timing::Batched(u64::from(GROUP)),
            ..StreamConfig::default()
        };
        let writer = table.writer().unwrap();
        let sink = StreamSink::new(&states, writer, Some(&window), &stream, false, hooks);
        let mut b = ExplicitBuilder::with_sink(sink);
        for k in 0..span + GROUP {
            b.add(&ExplicitTask::host(0), &[]).unwrap();
            assert_eq!(
                b.sink().timing_held(),
                ((k + 1) % GROUP) as usize,
                "after submission {k}"
            );
            released.lock().unwrap().retain(|&t| {
                let runs = t.0 == 0 && k + 1 < span;
                if !runs {
                    complete(t);
                }
                runs
            });
        }
        assert!(states.is_complete(TaskId(0)));
    }

    /// Ending orchestration tells the engine how many tasks the producer submitted: the total
    /// at which the workers may stop. The sink is driven alone (nothing runs), the producer fills
    /// the explicit builder with chains and sources and counts its own submissions; that count
    /// must reach `set_total`, for no task, one and many. A total too low shows in a whole run
    /// only by a race: a worker leaves once the total completed and it finds no task, but every
    /// task is queued before the total is set, and one released later by a running worker is
    /// found by that worker itself (when every worker may run every task); a task is lost only
    /// if every worker looked for work just before the last publication and saw the total just
    /// after it.
    #[test]
    fn ending_orchestration_tells_the_engine_the_explicit_producers_task_count() {
        for n in [0u32, 1, 2, 37] {
            let states = TaskStates::new();
            let table = TaskTable::new();
            let released = Mutex::new(Vec::new());
            let (idle, abort) = (Idle::new(1), AtomicBool::new(false));
            let hooks = Hooks {
                release: &|t: TaskId| released.lock().unwrap().push(t),
                release_all: &|ts: &[TaskId]| released.lock().unwrap().extend_from_slice(ts),
                publish: &|| {},
                fail: &|e: ExecError| panic!("{e}"),
                idle: &idle,
                abort: &abort,
                pause: &|| panic!("the producer waits though no window is set"),
            };
            let stream = StreamConfig {
                deps: DepsMode::Explicit,
                ..StreamConfig::default()
            };
            let sink =
                StreamSink::new(&states, table.writer().unwrap(), None, &stream, true, hooks);
            let mut b = ExplicitBuilder::with_sink(sink);
            let total = Mutex::new(Vec::new());
            let set_total = |t: u64| total.lock().unwrap().push(t);
            let mut submitted = 0u64;
            let done = orchestrate(
                &mut b,
                |b: &mut ExplicitStreamBuilder<'_>| {
                    for k in 0..n {
                        // Every third task a source, the others after the task before.
                        let preds: &[TaskId] = if k % 3 == 0 { &[] } else { &[TaskId(k - 1)] };
                        b.add(&ExplicitTask::host(0), preds).unwrap();
                        submitted += 1;
                    }
                    Ok(())
                },
                &|e: ExecError| panic!("{e}"),
                &set_total,
                Instant::now(),
            );
            assert!(done.is_some(), "{n} tasks");
            assert_eq!(*total.lock().unwrap(), [submitted], "{n} tasks");
            let sources = released.lock().unwrap().len() as u64;
            assert_eq!(sources, submitted.div_ceil(3), "{n} tasks");
        }
    }
}
