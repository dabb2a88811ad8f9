//! Device-generation runs (the on-device generation specification's local task queues and
//! cross-executor synchronisation): every executor interprets the workload bytecode itself and runs
//! its own tasks as they are generated. No task list, no graph and no orchestration thread exist
//! anywhere; what crosses executors is one atomic state per task and completion notifications.
//!
//! Why: a host that expands a 200K-task workload and builds its graph before (or while) the
//! executors run pays for every task on one thread, and ships every task to the device. The
//! on-device generation specification ships ~1 KB of bytecode instead and lets each executor (an
//! AICPU) generate its share. This module is that execution model on the CPU simulation: the pool's
//! worker threads are the executors.
//!
//! # Shape of a run
//!
//! `E` executors (the pool's threads) share one [`TaskStates`] (the streaming completion protocol
//! of `pto-wsp-graph`), one owner table and one inbox per executor. Each executor runs an
//! [`Interpreter`] and numbers the tasks exactly as the host's feeder does: tasks and barrier
//! tasks (one per structural order edge with several earlier tasks) in generation order. Where
//! the program allows it, each executor interprets **only its own tasks** (the interpreter's
//! own-tasks-only mode, "Partitioned generation" below); otherwise each interprets every task of
//! the program. Either way every executor sees every order edge at the same global position,
//! so every executor assigns the same ids.
//!
//! - **The TensorMap, partitioned by tensor.** Executor `x` infers the accesses of the tensors
//!   `tensor mod E == x`, of every task (its own and the others'), in its own [`AnyTensorMap`],
//!   in id order, exactly as the host builder does for those tensors (partitioned, the others'
//!   accesses reach it as described below). Every map keeps each
//!   tensor's records apart (no state crosses tensors), so the `E` maps together find exactly
//!   the host build's edges, and each task's accesses are inferred once, not once per
//!   executor. An edge found into another executor's task is *handed over*: appended to that
//!   owner's list from this executor ([`Shared::handed`], in successor order); every
//!   [`POLL_EVERY`] tasks and before any wait an executor hands its edges over and then
//!   publishes how far it has inferred ([`Shared::inferred`], release).
//! - **Sealing.** The owner keeps the predecessors it found for its task in the task's slot and
//!   seals the task once every other executor has published past it (an acquire load, then it
//!   takes what they handed over): it wires the task's edges, its own and the handed ones,
//!   together — so a predecessor found on two tensors by two executors is wired and counted
//!   once — and seals. A barrier accesses no tensor and is sealed at once.
//! - **Ownership.** A task belongs to executor `target mod E`, or `index mod E` when it has no
//!   dispatch target (`work_steal`): the bytecode's rule, with the pool's thread count as `E`
//!   (dispatch targets themselves are the schedule's, exactly the reference expander's). A barrier
//!   task belongs to `id mod E`. The owner alone wires the edges into a task
//!   ([`TaskStates::add_edge`]`(pred, own)`, `pred` of any executor), seals it, keeps its kernel,
//!   params and regions, runs it and completes it.
//! - **Completion.** [`TaskStates::complete`] reports each successor that became ready; one of
//!   the completing executor's goes to its local ready queue, another's into that executor's
//!   inbox (its completion notification ring), and that executor is woken if it sleeps
//!   (`Idle`: a per-executor park slot, spin first, never a busy wait while idle). The owner of a
//!   successor is read from the **owner table**: the owner writes `(owner, slot)` for each of its
//!   tasks before wiring any edge into it.
//! - **Pipelining.** An executor alternates generation and execution: after each of its own
//!   tasks (and every [`POLL_EVERY`] tasks of others) it runs every task that is ready; when its
//!   **window** (own tasks generated and not completed) is full, it runs ready tasks — parking when
//!   there are none — until a slot frees. After generation it runs its remaining tasks and
//!   returns; it needs nothing from the others once its own tasks are complete.
//! - **Forgetting.** Every `RETIRE_EVERY` tasks an executor advances a completed-prefix watermark
//!   ([`TaskStates::is_complete`], an acquire load) and retires its map's records below it, as the
//!   host's streamed build does.
//!
//! # Memory
//!
//! Per executor: a slot per own task in flight (kernel, params, regions, the predecessors it
//! found; reused), its part of the map (the distinct regions of its tensors seen and not yet
//! covered by a write: it keeps tombstones of completed tasks, so it follows the regions, not
//! the tasks), the edges handed over and not yet wired, deduplication stamps for the
//! tasks after its completed prefix, and the barriers' places ([`Origins`]: global index ↔ id).
//! Shared: [`TaskStates`] and the owner table, in chunks. After advancing its prefix an executor
//! frees the edge chunks it filled whose predecessors are all below it
//! ([`EdgeCursor::reclaim`]), publishes the prefix (release) — from then on it answers a
//! predecessor below it as done without touching its state — and frees the task states and owner
//! entries below the minimum of every executor's published prefix; it frees them again at the
//! first id of every chunk it walks into, before it can grow that chunk. And no executor walks
//! more than `span = max(2 · window · E, 2 · RETIRE_EVERY)` tasks past its own prefix
//! (`keep_close`: it runs its ready tasks, else yields). So a run holds state for at most
//! `2 · span` tasks and a chunk, whatever the timing (the proof, and the one narrow window it
//! leaves, are at the test
//! `a_device_generation_run_holds_task_state_for_the_window_not_the_task_count`), not for
//! every task.
//! No executor holds a task list or a graph. What an executor holds is kept for the next run
//! on the same [`DevGenTables`] (emptied, its memory kept: a repeated run grows no vector and
//! builds no map again), and of another executor's task it builds only the regions of its own
//! tensors.
//!
//! # Why this cannot deadlock
//!
//! Dependencies point backwards in the global order. Suppose every executor waits (window full
//! with nothing ready, or generation over with nothing ready) and let `t` be the smallest id of a
//! task not yet completed. If its owner `O` has not generated `t`, every task `O` generated is
//! older than `t`, hence complete: `O`'s window is empty and its generation is not over, so `O` is
//! not waiting. If `O` has generated `t`, every predecessor of `t` is older, hence complete: the
//! last one's completion (or `O`'s own seal) made `t` ready and put it in `O`'s ready queue or
//! inbox, waking `O` — so `O` is not waiting either. Hence some executor always makes progress,
//! with any window of at least one task; the idle protocol's pre-park re-check of the inbox
//! makes sure a wake-up is not lost.
//!
//! Sealing after the others' inference adds one more wait, and it cannot close a cycle: an
//! executor publishes its inference before every wait, and never parks while it holds an
//! unsealed task (it yields instead: another executor's inference is not announced). If `O`
//! holds `t` unsealed, another executor `X` has not published past `t`: either `X` is still
//! walking (it publishes within [`POLL_EVERY`] tasks) or it waits, having published its
//! position `p <= t`; everything `X` waits on is older than `p`, and the smallest unfinished
//! task is older still, so by the argument above it is ready or sealable by its owner. (Inboxes are
//! unbounded queues, but what is in one is always at most its executor's window: a task becomes
//! ready once.)
//!
//! # Partitioned generation
//!
//! Walking every task on every executor costs each executor the interpreter and the region
//! lists of all `E` executors' tasks. Partitioned, executor `x` runs its interpreter with
//! [`ExecutorConfig::executor`]`(x)` and `owners = E`: the interpreter hands it only the tasks
//! it owns (by the same rule as above) and skips a foreign iteration of a hoisting loop whole,
//! in O(1). Every task still carries its global index, and the interpreter announces every order
//! edge on every executor at the same global position, so an executor places its own tasks and
//! every barrier ([`Origins::skip_users_to`]) without walking the others' tasks.
//!
//! What crosses executors are then **accesses**, not tasks:
//!
//! - **Sending.** The owner of a task queues each access of a tensor of another executor's part
//!   of the map as `(id, region, access)` for that executor (its own tensors' accesses stay in
//!   its local queue). Every [`POLL_EVERY`] own tasks and before any wait it appends them to the
//!   executor's mailbox ([`Shared::sent`], one per (from, to) pair, a batch under its lock) and
//!   then publishes its **position** ([`Shared::generated`], release): the accesses of every own
//!   task below it are sent. Its position is the id of its next own task (or barrier) as soon as
//!   it knows it — before it waits for window room — but never more than `span` past its
//!   completed prefix (what `keep_close` allows its walk; the bound on task state held rests on
//!   it), and `u32::MAX` once its generation is over.
//! - **Merging.** An executor infers, in id order, every access of its tensors by a task below
//!   the **watermark**, the smallest position any executor published (acquire loads, then it
//!   takes its mailboxes): its local queue and each mailbox are each in id order, so merging
//!   them by id gives each tensor's accesses in the host build's order. Edges into its own tasks
//!   go into their slots; edges into another executor's tasks are handed over as above, and it
//!   publishes the watermark as how far it has inferred ([`Shared::inferred`]).
//! - **Sealing** is unchanged: the owner seals its task once every executor, itself included,
//!   has inferred past it.
//!
//! The mailboxes are batched vectors under a lock, not lock-free rings: a lock taken once per
//! [`POLL_EVERY`] tasks costs a few instructions per task, needs no `unsafe`, and never fills
//! (a full ring would be one more way to wait); what is in a mailbox is bounded by `keep_close`
//! like everything else.
//!
//! Partitioned generation is chosen by [`DevGenConfig::partition`], off by default: on two
//! executors it measured slower in wall time than the walk on a quiet machine
//! (docs/BENCHMARKS.md; `pto-wsp bench --devgen-generation partitioned|walk` compares the
//! two). Where its waits come from:
//! besides the batching below, the watermark is the position of the executor furthest behind
//! in *id* order, so when dispatch gives whole iterations to executors in turn (the LLaMA
//! layer's `affinity(t)`: tile `t` on executor `t mod 2`), every task of the executor ahead is
//! sealed only once the other has generated its whole earlier iteration (about one tile late),
//! and at the end of generation that executor runs its last tile alone. With it, a
//! program is generated partitioned unless it makes computed reads (every executor serves
//! every read, so every executor must see every task) or an order edge lies inside an iteration
//! an executor may skip ([`Program::skips_order_edges`]: it could not number the barrier).
//! Tasks whose owner is known only late (a `hash` key, `work_steal` by index) are generated
//! partitioned too: the interpreter evaluates the dispatch key of every task (O(1)) and fills
//! only its own.
//!
//! No deadlock either: an executor publishes its position before every wait, merges in every
//! waiting loop (and parks only when no published position lets it infer more; publishing
//! wakes the others), and keeps merging after its own tasks are done until every executor's
//! generation is over. Let `t` be the smallest id not completed and `g` the watermark. If
//! `g <= t`, the executor with the smallest position `g` has generated every own task below `g`,
//! all older than `t` and complete: its window is empty, so it is not waiting on it, and it
//! generates on (publishing a larger position) — `g` passes `t`. Once `g > t`, every executor
//! infers past `t`, `t`'s owner seals it, and the argument above applies.
//!
//! # Publication is batched
//!
//! Publication ([`Executor::publish`]: accesses sent, position, inference, edges handed over)
//! is batched every [`POLL_EVERY`] tasks, which costs nothing while every executor is busy but
//! makes a waiting executor wait for up to a batch of each other executor's tasks per hop (a
//! partitioned task is sealed after two: its owner's position, then the other's inference).
//! Publishing after every own task while another executor waits (a shared count of waiting
//! executors, read once per task) was tried: partitioned generation stayed slower than the
//! walk on a quiet machine, and the count's atomic operations in every waiting loop made the
//! loom models of this module about nine times as long, so it was taken out
//! (docs/BENCHMARKS.md). [`ExecutorStats::wait_ns`] and [`ExecutorStats::seal_yields`] show how
//! long executors wait.
//!
//! # Computed reads
//!
//! A `read` instruction (`docs/SEMANTICS.md`, "Computed reads") reads an element of a tensor
//! tasks of the run write; a `loop` over a ragged or sparse axis whose arrays tasks write reads
//! each such array whole when it starts (a box read, served the same way). Every executor walks
//! every task, so every executor makes every read, at the same place of the same stream, and
//! numbers them alike.
//!
//! - **Producers.** When the program has reads, each executor records the written boxes of
//!   every generated task on a read tensor ([`Producers`]; nothing is recorded otherwise). At a
//!   read it waits until every task generated before the read whose written box overlaps the
//!   element is complete ([`TaskStates::is_complete`], an acquire load, whichever executor owns
//!   it). While it waits it runs its own ready tasks (local queue and inbox); with none it backs
//!   off and yields, never parks: another executor's completion is not announced to it.
//! - **One value per read.** The first executor whose producers are complete reads the store
//!   ([`DirectExec::read`]) and publishes the value under the read's sequence number; the others
//!   take it (the entry is freed when the last has). So no executor can read a write of a task
//!   generated *after* the read: such a task's owner generates it only after passing the read
//!   itself, hence after the value was published, and runs it later still. Every executor thus
//!   sees the value the sequential reference run sees, and all generate the same stream.
//! - **No deadlock.** The argument above still holds with reads as one more way to wait. Let
//!   `t` be the smallest id not completed. If its owner `O` has generated `t`, `t` is ready there
//!   (its predecessors are older, hence complete), and every waiting loop of `O` — full window,
//!   `keep_close`, a read — runs ready tasks, so `O` runs it. If `O` has not generated `t`, `O`
//!   waits on nothing: at a read, its producers were generated before `O`'s position, so they
//!   are older than `t` and complete; its window holds only older own tasks, all complete; its
//!   walk is within `span` of its prefix. In particular an executor waiting on a producer that
//!   it owns itself — one that sits in its own ready queue, or one it generated when its window
//!   was full (the window only delays *generation*, and the producer was generated before the
//!   read) — runs it from inside the read's wait. Tests: `computed_reads_*` below (windows of 1,
//!   producers owned by the reader and by others, 1 to 4 executors).
//!
//! # Memory orderings
//!
//! - The owner's writes of a task's slot and owner-table entry are sequenced before
//!   [`TaskStates::seal`] (and before any `add_edge` into it: the owner wires every edge into
//!   its tasks itself, the handed-over ones too).
//! - An executor appends the edges it hands over (under the list's mutex) before its release
//!   store of [`Shared::inferred`]; an owner that loads that value (acquire) and then locks the
//!   list finds every edge into the tasks below it. A completing executor reads the
//!   owner entry (relaxed) only for successors `complete` reported ready, which happens after the
//!   seal and after the `add_edge`'s release CAS that its `AcqRel` swap acquired.
//! - A task's data effects reach its successors through the protocol of [`TaskStates`] (release
//!   on completion, acquire by the last releaser or the sealing owner) and then through the
//!   inbox (`sync::Inbox`, a `crossbeam` injector: its push happens before the pop that
//!   takes the task).
//! - Partitioned, an executor appends the accesses it sends (under the mailbox's lock) before
//!   its release store of [`Shared::generated`]; an executor that loads that value (acquire)
//!   and then locks the mailbox finds every access of the tasks below it.
//! - The abort flag is raised with `SeqCst` before every executor is woken; executors check it
//!   before every task and every wait.
//!
//! # Errors
//!
//! A kernel error or panic becomes the [`ExecError::Kernel`] of a host run, naming the task by its
//! global index (the expander's) and its kernel. An interpretation error (bindings, arithmetic, a
//! region out of its tensor) becomes [`ExecError::BuildAt`] at its statement's `file:line:column`
//! when the bytecode carries its statement-location table (a module with text), else
//! [`ExecError::Build`]. The first error wins; the abort flag
//! stops every executor (each finishes at most the kernel it is running) and the pool runs again.
//!
//! # What a device-generation run does not do
//!
//! The schedule's host-runtime knobs — ready policy, pools (`by_exec_unit`), issue gates,
//! dependency batching, start policy, window *mode* (`abort`, `benchmark`) — belong to the host
//! build's shared ready queues; here each executor runs its own tasks in the order they become
//! ready, and its window always stalls. The cycle-cost model needs the host-built graph. And the
//! facade runs a *pipeline* entry as processes on threads in either mode (`pto_wsp_cpu::csp`):
//! the expander's unbounded Kahn order, which this module follows, does not honour channel
//! depths, so a pipeline that reuses buffers would read the wrong ones here.

use std::collections::{HashSet, VecDeque};
use std::ops::{ControlFlow, Range};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Instant;

use crossbeam_utils::CachePadded;
use pto_wsp_bytecode::{Bound, ExecutorConfig, Interpreter, Program, Task, TaskSink};
use pto_wsp_graph::TaskId;
use pto_wsp_graph::arena::{CHUNK, ChunkArena};
use pto_wsp_graph::builder::{ExactMap, RETIRE_EVERY, skips_map};
use pto_wsp_graph::counters::CounterSnapshot;
use pto_wsp_graph::feed::BARRIER_KERNEL;
use pto_wsp_graph::feed::Origins;
use pto_wsp_graph::state::{EdgeCursor, TaskStates};
use pto_wsp_graph::tensor_map::{AnyTensorMap, MapStats, TensorMap};
use pto_wsp_graph::types::{EdgeKind, Region, TaskIo};
use pto_wsp_ir::{DataRead, DepsMode, OrderEdge, ReadRefused};

use crate::datadep::{GenStats, Producers, read_ints};

use crate::exec::{ExecError, NoopExec, TaskFailure};
use crate::fifo::Fifo;
use crate::idle::Idle;
use crate::kexec::{KernelExec, TaskSource};
use crate::pool::{WorkerPool, panic_message};
use crate::stats::{RunStats, Span};
use crate::sync::{AtomicBool, AtomicU32, Inbox, Mutex, Ordering, lock, thread};

/// The default window: own tasks in flight per executor.
pub const DEFAULT_WINDOW: usize = 1024;
/// The largest window (a slot number has 24 bits in the owner table).
pub const MAX_WINDOW: usize = (1 << SLOT_BITS) - 1;
/// The most executors (an owner has 8 bits in the owner table).
pub const MAX_EXECUTORS: usize = 256;
/// Tasks of other executors an executor walks between two looks at its ready tasks.
pub const POLL_EVERY: u32 = 32;

const SLOT_BITS: u32 = 24;
const SLOT_MASK: u32 = (1 << SLOT_BITS) - 1;
/// Deduplication stamps added at a time ([`Wiring::seen`]).
const STAMP_BLOCK: usize = 256;
/// Global index of a barrier task's slot (it has none).
const NO_INDEX: u32 = u32::MAX;

/// How a device-generation run infers and bounds its work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DevGenConfig {
    /// Dependency inference mode (each executor's part of the TensorMap).
    pub deps: DepsMode,
    /// The exact-key map for exact mode.
    pub exact: ExactMap,
    /// Own tasks an executor may have generated and not completed before its generation pauses
    /// (clamped to `1..=MAX_WINDOW`).
    pub window: usize,
    /// Record every task's wall-clock span.
    pub trace: bool,
    /// Keep every edge wired into [`RunStats::edge_list`] (predecessor, successor by task id;
    /// edges whose producer had already completed included, those the map kept only as a
    /// count, [`pto_wsp_graph::TaskId::FORGOTTEN`], not): the host build's edges, for tests and
    /// tools.
    pub record_edges: bool,
    /// Let each executor generate only its own tasks where the program allows it (module docs,
    /// "Partitioned generation"); `false` (the default) makes every executor walk every task.
    /// Off by default: on two executors it runs 3 % fewer instructions per task but measured
    /// 3–16 % slower in wall time than the walk on a quiet machine (docs/BENCHMARKS.md).
    pub partition: bool,
}

impl Default for DevGenConfig {
    fn default() -> DevGenConfig {
        DevGenConfig {
            deps: DepsMode::Exact,
            exact: ExactMap::Growable,
            window: DEFAULT_WINDOW,
            trace: false,
            record_edges: false,
            partition: false,
        }
    }
}

/// What one executor of a device-generation run did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExecutorStats {
    /// Tasks its interpreter generated (barrier tasks included): every executor's when each
    /// walks the whole program; partitioned, its own tasks and every barrier.
    pub walked: u64,
    /// Of those, its own (which it ran, unless the run failed).
    pub own: u64,
    /// Of its own, the barrier tasks of structural orders.
    pub barriers: u64,
    /// Edges into its own tasks the protocol accepted (the producer had not completed).
    pub edges: u64,
    /// Edges into its own tasks that cost nothing: the producer had already completed.
    pub refused: u64,
    /// Of `refused`, those to completed readers the map kept only as a count
    /// ([`pto_wsp_graph::TaskId::FORGOTTEN`]; see [`RunStats::edges_unnamed`]).
    pub unnamed: u64,
    /// Successors its completions made ready that belong to another executor (sent to that
    /// executor's inbox).
    pub sent: u64,
    /// Times its window was full when its next own task came.
    pub window_stalls: u64,
    /// Times it parked with nothing to run.
    pub parks: u64,
    /// Most own tasks in flight at once.
    pub in_flight_hwm: u64,
    /// Nanoseconds from the start of the run to the end of its generation.
    pub generated_ns: u64,
    /// Computed reads its interpreter made (every executor makes every read).
    pub computed_reads: u64,
    /// Of those, the reads that waited for a producer still running.
    pub read_stalls: u64,
    /// Nanoseconds spent in those waits.
    pub read_stall_ns: u64,
    /// `while` loops its interpreter ended at their `max` with the condition still true.
    pub loops_at_max: u64,
    /// Nanoseconds it spent waiting with nothing to run (backing off, yielding, parked).
    pub wait_ns: u64,
    /// Of its waits, the yields while an own task waited on another executor's inference.
    pub seal_yields: u64,
    /// Most own tasks generated and not yet sealed at once.
    pub unsealed_hwm: u64,
    /// Sum over its sealed tasks of the ids handed out between generating and sealing each.
    pub seal_lag: u64,
}

/// Per-executor figures of a device-generation run ([`RunStats::device_gen`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DevGenStats {
    /// One entry per executor.
    pub executors: Vec<ExecutorStats>,
}

/// Runs one task given its data (device-generation runs keep each task's data on its executor).
/// Must not panic: an implementation that calls user code catches its panics (a panic that
/// escapes anyway fails the run as an internal error).
pub trait DirectExec: Sync {
    /// Runs task `task` (graph id) with module kernel `kernel`, scalar `params` and regions `io`
    /// on executor `executor`.
    fn run_task(
        &self,
        task: TaskId,
        executor: usize,
        kernel: u32,
        params: &[u64],
        io: &[TaskIo],
    ) -> Result<(), TaskFailure>;

    /// Whether every region inside the tensor shapes `shapes` (as bound, in tensor order) is
    /// inside its tensor for this executor too: then [`DirectExec::run_task_in_bounds`] may
    /// skip any per-region check. Asked once per run. The default: no.
    fn has_shapes(&self, shapes: &[Vec<i64>]) -> bool {
        let _ = shapes;
        false
    }

    /// [`DirectExec::run_task`] for a task whose regions are inside the shapes
    /// [`DirectExec::has_shapes`] accepted (the interpreter checked them): an implementation
    /// may skip its per-region check. The default runs [`DirectExec::run_task`].
    #[inline]
    fn run_task_in_bounds(
        &self,
        task: TaskId,
        executor: usize,
        kernel: u32,
        params: &[u64],
        io: &[TaskIo],
    ) -> Result<(), TaskFailure> {
        self.run_task(task, executor, kernel, params, io)
    }

    /// The elements of the box `read` describes (row-major), for a computed read. Called only
    /// once every task generated before the read whose written box overlaps it has completed,
    /// and before any task generated after it runs (module docs, "Computed reads"). The
    /// default refuses: this executor keeps no tensors.
    fn read(&self, read: &DataRead<'_>) -> Result<Vec<i64>, String> {
        let _ = read;
        Err("this run keeps no tensor contents (no kernels run)".into())
    }
}

impl DirectExec for NoopExec {
    #[inline]
    fn run_task(
        &self,
        _: TaskId,
        _: usize,
        _: u32,
        _: &[u64],
        _: &[TaskIo],
    ) -> Result<(), TaskFailure> {
        Ok(())
    }
}

impl<S: TaskSource> DirectExec for KernelExec<'_, S> {
    #[inline]
    fn run_task(
        &self,
        task: TaskId,
        executor: usize,
        kernel: u32,
        params: &[u64],
        io: &[TaskIo],
    ) -> Result<(), TaskFailure> {
        KernelExec::run_task(self, task, executor, kernel, params, io)
    }

    fn has_shapes(&self, shapes: &[Vec<i64>]) -> bool {
        KernelExec::has_shapes(self, shapes)
    }

    #[inline]
    fn run_task_in_bounds(
        &self,
        task: TaskId,
        executor: usize,
        kernel: u32,
        params: &[u64],
        io: &[TaskIo],
    ) -> Result<(), TaskFailure> {
        KernelExec::run_in_bounds(self, task, executor, kernel, params, io)
    }

    fn read(&self, read: &DataRead<'_>) -> Result<Vec<i64>, String> {
        // SAFETY: the trait's contract: every producer of the box has completed and no later
        // task runs before the read's value is published.
        unsafe { read_ints(self.store(), read) }
    }
}

/// Per task id: `owner << SLOT_BITS | slot`, written by the owner before the task can become
/// ready, read by whoever completes a predecessor. Chunks are allocated on first write, never
/// move, and are freed behind the run's reclamation floor (module docs, "Memory").
struct OwnerTable {
    entries: ChunkArena<AtomicU32>,
}

impl Default for OwnerTable {
    fn default() -> OwnerTable {
        OwnerTable::new()
    }
}

impl OwnerTable {
    fn new() -> OwnerTable {
        OwnerTable {
            entries: ChunkArena::new(|| AtomicU32::new(0)),
        }
    }

    /// Records `(owner, slot)` of task `id`. The common case, a chunk already there, is inline;
    /// making the chunk is out of line.
    #[inline(always)]
    fn set(&self, id: u32, owner: u32, slot: u32) {
        let v = owner << SLOT_BITS | slot;
        match self.entries.try_get(id) {
            Some(e) => e.store(v, Ordering::Relaxed),
            None => self.set_growing(id, v),
        }
    }

    /// [`OwnerTable::set`] into a chunk not made yet.
    #[cold]
    #[inline(never)]
    fn set_growing(&self, id: u32, v: u32) {
        self.entries.get_or_grow(id).store(v, Ordering::Relaxed);
    }

    /// `(owner, slot)` of a task whose owner has written it (see the module docs).
    #[inline]
    fn get(&self, id: u32) -> (usize, usize) {
        let Some(e) = self.entries.try_get(id) else {
            panic!("device generation: task {id} became ready before its owner recorded it");
        };
        let v = e.load(Ordering::Relaxed);
        ((v >> SLOT_BITS) as usize, (v & SLOT_MASK) as usize)
    }
}

/// The tables a device-generation run shares between its executors (task states, owners), and
/// what each executor keeps from one run to the next (its map, slots and queues), kept by a
/// caller across runs and reset before each: the last run's chunks and vectors are reused, so a
/// run asks for no fresh pages and grows nothing it grew before.
#[derive(Default)]
pub struct DevGenTables {
    states: TaskStates,
    owners: OwnerTable,
    /// Per executor: what it keeps from one run to the next ([`Scratch`]).
    scratch: Vec<Scratch>,
    /// Per tensor: written by no task of the program these tables run
    /// ([`DevGenTables::set_read_only`]).
    read_only: Vec<bool>,
}

/// What an executor keeps across the runs of one [`DevGenTables`]: its part of the TensorMap,
/// its task slots and its queues, emptied at the start of each run with their memory kept. A
/// run repeated on the same tables (every execute of a program) then grows no vector and
/// builds no map again, as the host's builder does with [`GraphBuilder::reset`].
///
/// [`GraphBuilder::reset`]: pto_wsp_graph::builder::GraphBuilder::reset
#[derive(Default)]
struct Scratch {
    /// The map and the configuration it was made for (another configuration makes a new one).
    map: Option<(DepsMode, ExactMap, AnyTensorMap)>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    io: Vec<TaskIo>,
    seen: Vec<u32>,
    ready: Fifo<Ready>,
    unsealed: Fifo<(u32, u32)>,
    outbox: Vec<Vec<(u32, u32)>>,
    inbound: Vec<Fifo<(u32, u32)>>,
}

impl std::fmt::Debug for DevGenTables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DevGenTables")
            .field("states", &self.states)
            .finish_non_exhaustive()
    }
}

impl DevGenTables {
    /// Empty tables.
    pub fn new() -> DevGenTables {
        DevGenTables::default()
    }

    /// Tensor `t` is written by no task of the program run on these tables when
    /// `read_only[t]` (tensors past the end are tracked): the executors' maps skip its reads, as
    /// [`GraphBuilder::set_read_only`] makes the host's builder do; it lasts for every later
    /// run. New tables track every tensor. Mark only tensors no task writes.
    ///
    /// [`GraphBuilder::set_read_only`]: pto_wsp_graph::builder::GraphBuilder::set_read_only
    pub fn set_read_only(&mut self, read_only: &[bool]) {
        self.read_only.clear();
        self.read_only.extend_from_slice(read_only);
    }

    /// Empties both for another run, keeping their memory.
    fn reset(&mut self) {
        self.states.reset();
        self.owners.entries.reset();
    }
}

/// How far an executor may walk past its completed prefix: every executor's window twice, and
/// at least two retire periods (the prefix is advanced every [`RETIRE_EVERY`] tasks).
fn span_limit(window: usize, executors: usize) -> u32 {
    (2 * window * executors)
        .max(2 * RETIRE_EVERY as usize)
        .min(u32::MAX as usize / 2) as u32
}

/// Whether `program` can be generated partitioned: it makes no computed read (every executor
/// serves every read, so every executor must see every task) and no order edge lies inside an
/// iteration an executor may skip (else it could not number the barrier tasks).
fn partitions(program: &Program) -> bool {
    !program.computed_tensors().contains(&true) && !program.skips_order_edges()
}

/// One empty `T` per (to, from) pair of `executors` executors, entry `to * executors + from`.
fn per_pair<T: Default>(executors: usize) -> Box<[CachePadded<Mutex<T>>]> {
    (0..executors * executors)
        .map(|_| CachePadded::new(Mutex::new(T::default())))
        .collect()
}

/// `x mod E` for the executor count `E` of a run, a mask when `E` is a power of two (a
/// division per task and per region otherwise).
#[derive(Clone, Copy)]
struct ModE {
    e: u32,
    /// `E - 1` when `E` is a power of two.
    mask: Option<u32>,
}

impl ModE {
    fn new(e: u32) -> ModE {
        ModE {
            e,
            mask: e.is_power_of_two().then(|| e - 1),
        }
    }

    #[inline(always)]
    fn of(self, x: u32) -> u32 {
        match self.mask {
            Some(m) => x & m,
            None => x % self.e,
        }
    }
}

/// What every executor of a run shares.
struct Shared<'r, E: DirectExec> {
    program: &'r Program,
    bound: &'r Bound,
    exec: &'r E,
    /// The executor's tensors have the bound shapes ([`DirectExec::has_shapes`], asked once
    /// per run): the interpreter's regions need no check per task.
    in_bounds: bool,
    config: DevGenConfig,
    executors: u32,
    /// `x mod executors`, the owner of a task or a tensor.
    of: ModE,
    window: usize,
    /// How far an executor may walk past its completed prefix ([`Executor::keep_close`]).
    span: u32,
    states: &'r TaskStates,
    owners: &'r OwnerTable,
    /// Per executor: its completed prefix, published (release) once it touches nothing below.
    lows: Box<[CachePadded<AtomicU32>]>,
    /// Per executor: every task below this id has been inferred by it on its tensors, and the
    /// edges it found into other executors' tasks are in [`Shared::handed`] (release).
    inferred: Box<[CachePadded<AtomicU32>]>,
    /// Edges an executor found into another's tasks, `(successor, predecessor)` in successor
    /// order: entry `to * E + from`.
    handed: Box<[CachePadded<Mutex<Handed>>]>,
    /// Partitioned generation: each executor interprets only its own tasks and sends their
    /// accesses to the executors whose tensors they touch (module docs, "Partitioned
    /// generation"). `false`: every executor walks every task.
    partitioned: bool,
    /// Per executor, partitioned generation: the accesses of every own task below this id are
    /// in [`Shared::sent`] (release).
    generated: Box<[CachePadded<AtomicU32>]>,
    /// Accesses an executor sent for another's tensors, `(task id, access)` in id order:
    /// entry `to * E + from`.
    sent: Box<[CachePadded<Mutex<Vec<Sent>>>]>,
    inboxes: Box<[CachePadded<Inbox<Ready>>]>,
    /// Per executor: what it kept from the tables' last run, taken when it starts and handed
    /// back in its [`Report`].
    scratch: Box<[CachePadded<Mutex<Scratch>>]>,
    idle: Idle,
    abort: AtomicBool,
    error: Mutex<Option<ExecError>>,
    reports: Mutex<Vec<Report>>,
    t0: Instant,
    /// Per tensor: whether the program reads computed values of it (`read` instructions).
    computed: Vec<bool>,
    /// Per tensor: written by no task ([`DevGenTables::set_read_only`]): its reads skip the map.
    read_only: &'r [bool],
    /// Computed reads' values, by the read's sequence number (the same on every executor):
    /// the first executor to pass a read reads the store and publishes the value; the others
    /// take it (module docs, "Computed reads"). With the executors that have yet to take it.
    reads: Mutex<std::collections::HashMap<u64, (Vec<i64>, u32)>>,
}

/// A ready own task as the ready queue and the inbox hold it: its id and its slot (the
/// completing executor read the slot from the owner table; its owner need not look it up
/// again).
type Ready = (u32, u32);

/// Edges one executor found into another's tasks: `(successor, predecessor)` ids.
type Handed = Vec<(u32, u32)>;

/// An access sent to the executor whose part of the TensorMap holds its tensor: the task's id
/// (its owner is the sender) and the region with its access mode.
type Sent = (u32, TaskIo);

/// What one executor hands back at the end.
struct Report {
    executor: usize,
    ran: u64,
    stats: ExecutorStats,
    spans: Vec<Span>,
    map: MapStats,
    edges: Vec<(u32, u32)>,
    /// What the executor keeps for the next run (`None` after a panic: its state is not
    /// trusted).
    scratch: Option<Scratch>,
}

impl<E: DirectExec> Shared<'_, E> {
    /// Stops the run with `error` (the first error wins) and wakes every executor.
    fn fail(&self, error: ExecError) {
        {
            let mut e = lock(&self.error);
            if e.is_none() {
                *e = Some(error);
            }
        }
        self.abort.store(true, Ordering::SeqCst);
        self.idle.wake_all();
    }

    #[inline]
    fn aborted(&self) -> bool {
        self.abort.load(Ordering::Relaxed)
    }

    /// Executor `w`'s whole part of the run; a panic that escapes fails the run.
    fn executor(&self, w: usize) {
        let scratch = std::mem::take(&mut *lock(&self.scratch[w]));
        let mut ex = Executor::new(self, w as u32, scratch);
        let panicked = catch_unwind(AssertUnwindSafe(|| ex.run())).is_err_and(|p| {
            self.fail(ExecError::Internal(format!(
                "executor {w} panicked: {}",
                panic_message(&*p)
            )));
            true
        });
        ex.stats.edges = ex.wiring.accepted;
        ex.stats.refused = ex.wiring.refused;
        ex.stats.unnamed = ex.wiring.unnamed;
        let report = Report {
            executor: w,
            ran: ex.ran,
            stats: ex.stats,
            spans: std::mem::take(&mut ex.spans),
            map: ex.map.stats(),
            edges: ex.wiring.edges.take().unwrap_or_default(),
            scratch: (!panicked).then(|| ex.into_scratch()),
        };
        lock(&self.reports).push(report);
    }
}

/// The run stops (the error, if any, is recorded in [`Shared`]).
struct Stopped;

/// An own task's data, kept from its generation to its completion.
#[derive(Debug, Default)]
struct Slot {
    id: u32,
    /// Global index (the expander's), or [`NO_INDEX`] for a barrier.
    index: u32,
    kernel: u32,
    params: Vec<u64>,
    io: Vec<TaskIo>,
    /// Predecessors this executor found for it (its own tensors' accesses and order edges),
    /// wired at its seal together with the ones the other executors handed over.
    preds: Vec<u32>,
}

/// An announced order edge whose later range is being generated.
struct Open {
    before: Range<u32>,
    after_start: u32,
    /// What every task of the later range waits for: the one earlier task, or a barrier.
    dep: u32,
}

/// Accesses received from one executor, inferred from `head` on. A batch taken from the mailbox
/// when everything before it is inferred is swapped in whole (no copy).
#[derive(Default)]
struct Received {
    sent: Vec<Sent>,
    head: usize,
}

impl Received {
    /// Takes what `mailbox` holds.
    fn take(&mut self, mailbox: &mut Vec<Sent>) {
        if mailbox.is_empty() {
            return;
        }
        if self.head == self.sent.len() {
            self.sent.clear();
            self.head = 0;
            std::mem::swap(&mut self.sent, mailbox);
        } else {
            if self.head > self.sent.len() / 2 {
                self.sent.drain(..self.head);
                self.head = 0;
            }
            self.sent.append(mailbox);
        }
    }

    #[inline]
    fn front(&self) -> Option<&Sent> {
        self.sent.get(self.head)
    }
}

/// One executor: the interpreter's sink, and the runner of its own tasks.
struct Executor<'s, 'r, E: DirectExec> {
    sh: &'s Shared<'r, E>,
    me: u32,
    map: AnyTensorMap,
    /// Ids handed out so far (tasks and barriers).
    next_id: u32,
    /// Global index <-> task id.
    origins: Origins,
    wiring: Wiring,
    open: Vec<Open>,
    /// The regions of the task being generated.
    io: Vec<TaskIo>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    ready: Fifo<Ready>,
    /// Own tasks generated and not sealed yet (id, slot), oldest first: each waits until every
    /// other executor has inferred it ([`Shared::inferred`]).
    unsealed: Fifo<(u32, u32)>,
    /// Per destination executor: edges found into its tasks, not yet handed over.
    outbox: Vec<Vec<(u32, u32)>>,
    /// Per source executor: edges it handed over into own tasks not yet sealed.
    inbound: Vec<Fifo<(u32, u32)>>,
    /// The last value stored in this executor's [`Shared::inferred`].
    published: u32,
    /// Partitioned generation: own tasks' accesses of this executor's tensors, `(id, slot,
    /// access)`, not yet inferred (they are inferred in id order with [`Executor::mail_in`]).
    local: VecDeque<(u32, u32, TaskIo)>,
    /// Per source executor: accesses it sent for this executor's tensors, not yet inferred.
    mail_in: Vec<Received>,
    /// Per destination executor: own tasks' accesses of its tensors, not yet sent.
    mail_out: Vec<Vec<Sent>>,
    /// Partitioned generation: every access of this executor's tensors by a task below this id
    /// has been inferred (`u32::MAX` when every task is, and always when not partitioned).
    merged: u32,
    /// Partitioned generation: the accesses of every own task below this id are queued (in
    /// [`Executor::mail_out`] or [`Executor::local`]); `u32::MAX` once generation is over.
    position: u32,
    /// The last value stored in this executor's [`Shared::generated`].
    sent_to: u32,
    /// The chunk of task state of the last id handed out.
    chunk: u32,
    /// The smallest [`Shared::inferred`] of the others when [`Shared::handed`] was last drained.
    drained: u32,
    in_flight: usize,
    /// Every task below this id has completed (as far as this executor has looked).
    completed_below: u32,
    retire_in: u32,
    poll_in: u32,
    ran: u64,
    stats: ExecutorStats,
    spans: Vec<Span>,
    /// Writers of computed tensors (`None` when the program reads none: nothing is recorded).
    producers: Option<Producers>,
    /// Computed reads made so far (the next read's sequence number).
    reads: u64,
}

impl<'s, 'r, E: DirectExec> Executor<'s, 'r, E> {
    /// Executor `me` of a run, with what it kept from the last run on the same tables, emptied.
    fn new(sh: &'s Shared<'r, E>, me: u32, scratch: Scratch) -> Self {
        let Scratch {
            map,
            mut slots,
            mut free,
            mut io,
            mut seen,
            mut ready,
            mut unsealed,
            mut outbox,
            mut inbound,
        } = scratch;
        let (deps, exact) = (sh.config.deps, sh.config.exact);
        let map = match map {
            Some((d, x, mut m)) if d == deps && x == exact => {
                m.clear();
                m
            }
            _ => AnyTensorMap::for_mode(deps, exact),
        };
        // Every slot is free again (a failed run may have left some in use).
        free.clear();
        free.extend((0..slots.len() as u32).rev());
        for s in &mut slots {
            s.id = 0;
        }
        io.clear();
        seen.clear();
        ready.clear();
        unsealed.clear();
        let e = sh.executors as usize;
        outbox.resize_with(e, Vec::new);
        outbox.iter_mut().for_each(Vec::clear);
        inbound.resize_with(e, Fifo::default);
        inbound.iter_mut().for_each(Fifo::clear);
        Executor {
            sh,
            me,
            map,
            next_id: 0,
            origins: Origins::new(TaskId(0)),
            wiring: Wiring {
                seen,
                seen_base: 0,
                done_below: 0,
                old: HashSet::new(),
                old_for: u32::MAX,
                cursor: EdgeCursor::new(),
                edges: sh.config.record_edges.then(Vec::new),
                accepted: 0,
                refused: 0,
                unnamed: 0,
            },
            open: Vec::new(),
            io,
            slots,
            free,
            ready,
            unsealed,
            outbox,
            inbound,
            published: 0,
            local: VecDeque::new(),
            mail_in: (0..sh.executors).map(|_| Received::default()).collect(),
            mail_out: vec![Vec::new(); sh.executors as usize],
            merged: if sh.partitioned { 0 } else { u32::MAX },
            position: 0,
            sent_to: 0,
            chunk: u32::MAX,
            drained: 0,
            in_flight: 0,
            completed_below: 0,
            retire_in: RETIRE_EVERY,
            poll_in: POLL_EVERY,
            ran: 0,
            stats: ExecutorStats::default(),
            spans: Vec::new(),
            producers: sh
                .computed
                .iter()
                .any(|&c| c)
                .then(|| Producers::new(sh.computed.clone())),
            reads: 0,
        }
    }

    /// What this executor keeps for the next run on the same tables.
    fn into_scratch(self) -> Scratch {
        let config = self.sh.config;
        Scratch {
            map: Some((config.deps, config.exact, self.map)),
            slots: self.slots,
            free: self.free,
            io: self.io,
            seen: self.wiring.seen,
            ready: self.ready,
            unsealed: self.unsealed,
            outbox: self.outbox,
            inbound: self.inbound,
        }
    }

    /// Generate everything (running own tasks on the way), then run what is left.
    fn run(&mut self) {
        let sh = self.sh;
        let config = if sh.partitioned {
            ExecutorConfig {
                executor: Some(self.me),
                owners: Some(sh.executors),
                ..ExecutorConfig::all()
            }
        } else {
            ExecutorConfig::all()
        };
        match Interpreter::new(sh.program, sh.bound, config) {
            Ok(mut interp) => match interp.run(self) {
                Ok(summary) => self.stats.loops_at_max = summary.loops_at_max,
                Err(e) => sh.fail(ExecError::build(&e)),
            },
            Err(e) => sh.fail(ExecError::Build(e.to_string())),
        }
        self.stats.generated_ns = sh.t0.elapsed().as_nanos() as u64;
        self.position = u32::MAX;
        self.publish();
        // Partitioned, the others' tasks may still need this executor's inference.
        while self.in_flight > 0 || self.merged != u32::MAX {
            if self.wait_and_run().is_err() {
                return;
            }
        }
    }

    /// Fails the run with `error`.
    fn stop(&self, error: ExecError) -> Stopped {
        self.sh.fail(error);
        Stopped
    }

    /// The next task's id: the tasks and barriers recorded in [`Executor::origins`] so far
    /// (partitioned, the others' tasks skipped included). Recorded in the dedup stamps.
    /// Inlined into every task's submission; what happens once a chunk or a block of stamps,
    /// or only far ahead, is out of line.
    #[inline]
    fn alloc(&mut self) -> Result<u32, Stopped> {
        let n = self.origins.len();
        if n >= (u32::MAX - 1) as usize {
            return Err(self.too_many());
        }
        let id = n as u32;
        if id - self.completed_below >= self.sh.span {
            self.keep_close(id)?;
        }
        if id / CHUNK as u32 != self.chunk {
            self.enter_chunk(id / CHUNK as u32);
        }
        self.next_id = id + 1;
        let stamps = (self.next_id - self.wiring.seen_base) as usize;
        if stamps > self.wiring.seen.len() {
            self.grow_stamps(stamps);
        }
        self.stats.walked += 1;
        Ok(id)
    }

    /// The run has more tasks than ids.
    #[cold]
    #[inline(never)]
    fn too_many(&self) -> Stopped {
        self.stop(ExecError::Build("more than 2^32 - 2 tasks".into()))
    }

    /// The first id of a chunk of task state this executor walks into: free what every
    /// executor is past before this executor can grow the chunk (module docs, "Memory").
    #[inline(never)]
    fn enter_chunk(&mut self, chunk: u32) {
        self.chunk = chunk;
        self.free_behind_floor();
    }

    /// Room for `stamps` dedup stamps, a block at a time (a stamp past the last id is never
    /// read).
    #[inline(never)]
    fn grow_stamps(&mut self, stamps: usize) {
        self.wiring.seen.resize(stamps + STAMP_BLOCK, u32::MAX);
    }

    /// Keeps this executor's walk within [`Shared::span`] tasks of its completed prefix: an
    /// executor whose own tasks do not wait for the others' could otherwise walk arbitrarily
    /// far ahead, and what every executor holds grows with the distance. While too far ahead it
    /// runs its ready tasks; with none, the prefix waits on another executor's task, so it
    /// yields to it (backing off, never parking: no completion of another executor's task is
    /// announced to this one). Cannot deadlock: the oldest unfinished task's owner has generated
    /// it (every executor is past it) and its predecessors are done, so it is ready there.
    #[inline(never)]
    fn keep_close(&mut self, id: u32) -> Result<(), Stopped> {
        if id - self.completed_below < self.sh.span {
            return Ok(());
        }
        let mut round = 0u32;
        loop {
            self.retire();
            if id - self.completed_below < self.sh.span {
                return Ok(());
            }
            self.help_or_yield(&mut round)?;
        }
    }

    /// One step of waiting on another executor's task: runs an own ready task if there is one,
    /// else backs off, then yields (never parks: no completion of another executor's task is
    /// announced to this one). `Err` when the run stopped.
    fn help_or_yield(&mut self, round: &mut u32) -> Result<(), Stopped> {
        if self.sh.aborted() {
            return Err(Stopped);
        }
        self.publish();
        self.seal_inferred();
        if let Some(t) = self.next_ready() {
            self.run_one(t)?;
            *round = 0;
        } else {
            let t = Instant::now();
            if Idle::backoff(*round) {
                *round += 1;
            } else {
                thread::yield_now();
            }
            self.waited(Some(t));
        }
        Ok(())
    }

    /// Waits until the window has room for one more own task (running ready tasks meanwhile).
    fn make_room(&mut self) -> Result<(), Stopped> {
        if self.in_flight < self.sh.window {
            return Ok(());
        }
        self.stats.window_stalls += 1;
        while self.in_flight >= self.sh.window {
            self.wait_and_run()?;
        }
        Ok(())
    }

    /// A free slot for own task `id` (recorded in the owner table).
    #[inline]
    fn take_slot(&mut self, id: u32) -> usize {
        let slot = match self.free.pop() {
            Some(s) => s as usize,
            None => {
                self.slots.push(Slot::default());
                self.slots.len() - 1
            }
        };
        self.slots[slot].id = id;
        self.sh.owners.set(id, self.me, slot as u32);
        slot
    }

    /// An own task was generated: it counts against the window until it completes.
    fn generated_own(&mut self) {
        self.in_flight += 1;
        self.stats.own += 1;
        self.stats.in_flight_hwm = self.stats.in_flight_hwm.max(self.in_flight as u64);
    }

    /// Own task `id` (in `slot`) has been inferred by every executor: wire the predecessors
    /// this executor found (its slot's `preds`) and those the others handed over, one task's
    /// edges together so that [`Wiring::wire`] reports each predecessor once; seal it, and queue
    /// it if nothing is left to wait for.
    fn seal_own(&mut self, id: u32, slot: usize) {
        let sh = self.sh;
        let Executor {
            slots,
            wiring,
            inbound,
            ready,
            ..
        } = self;
        for &p in &slots[slot].preds {
            wiring.wire(sh.states, TaskId(p), id);
        }
        for q in inbound.iter_mut() {
            while let Some(&(succ, p)) = q.front() {
                if succ != id {
                    break;
                }
                q.pop_front();
                wiring.wire(sh.states, TaskId(p), id);
            }
        }
        // Through the cursor: its cached task-state chunk is this task's (its edges were just
        // wired through it), so the seal looks no chunk up.
        if sh.states.seal_in(&mut wiring.cursor, TaskId(id)) {
            ready.push_back((id, slot as u32));
        }
    }

    /// Seals the own tasks every other executor has inferred, oldest first (an acquire load
    /// of each one's [`Shared::inferred`], then what it handed over).
    fn seal_inferred(&mut self) {
        let Some(&(first, _)) = self.unsealed.front() else {
            return;
        };
        let sh = self.sh;
        if first >= self.drained {
            let (me, e) = (self.me as usize, sh.executors as usize);
            let w = self
                .min_of_others(&sh.inferred, Ordering::Acquire)
                .min(self.merged);
            if w <= first {
                return;
            }
            for (x, q) in self.inbound.iter_mut().enumerate() {
                if x != me {
                    q.append(&mut lock(&sh.handed[me * e + x]));
                }
            }
            self.drained = w;
        }
        while let Some(&(id, slot)) = self.unsealed.front() {
            if id >= self.drained {
                break;
            }
            self.unsealed.pop_front();
            self.stats.seal_lag += u64::from(self.next_id - id);
            self.seal_own(id, slot as usize);
        }
    }

    /// With several executors, in [`Executor::tick`]: publish (every [`POLL_EVERY`] tasks),
    /// then seal what the others have inferred. Out of line, to keep one executor's tick small.
    #[inline(never)]
    fn exchange(&mut self, poll: bool) {
        if poll {
            self.publish();
        }
        self.seal_inferred();
    }

    /// Between two tasks: hands the edges found into the others' tasks over, then says that
    /// every task generated so far is inferred (release), so that their owners may seal them.
    ///
    /// Partitioned, first: sends the own tasks' accesses queued for the others' tensors and
    /// says how far they are sent ([`Shared::generated`], release; waking the others, whose
    /// inference may wait on it), then infers what every executor has sent
    /// ([`Executor::merge`]); what is published as inferred is how far that went.
    fn publish(&mut self) {
        let sh = self.sh;
        if sh.executors == 1 {
            return;
        }
        let (me, e) = (self.me as usize, sh.executors as usize);
        if sh.partitioned {
            // Never published more than `span` past the completed prefix (any position up to
            // the next own task's id is true): the bound on task state held relies on it
            // (the memory test's argument).
            let position = if self.position == u32::MAX {
                u32::MAX
            } else {
                let bound = self.completed_below.saturating_add(sh.span);
                self.position.min(bound).max(self.sent_to)
            };
            if self.sent_to != position {
                for (to, out) in self.mail_out.iter_mut().enumerate() {
                    if !out.is_empty() {
                        let mut mailbox = lock(&sh.sent[to * e + me]);
                        if mailbox.is_empty() {
                            // The whole batch, no copy (the mailbox's empty vector comes back).
                            std::mem::swap(&mut *mailbox, out);
                        } else {
                            mailbox.append(out);
                        }
                    }
                }
                self.sent_to = position;
                sh.generated[me].store(position, Ordering::Release);
                for x in (0..e).filter(|&x| x != me) {
                    sh.idle.notify(Some(x), |w| w == x);
                }
            }
            self.merge();
        }
        let done = if sh.partitioned {
            self.merged
        } else {
            self.next_id
        };
        if self.published == done {
            return;
        }
        for (to, out) in self.outbox.iter_mut().enumerate() {
            if !out.is_empty() {
                lock(&sh.handed[to * e + me]).append(out);
            }
        }
        self.published = done;
        sh.inferred[me].store(done, Ordering::Release);
    }

    /// How far every executor has sent its accesses (acquire loads; this executor's own
    /// position for itself): the accesses of every task below it are known.
    fn sent_everywhere(&self, ordering: Ordering) -> u32 {
        self.min_of_others(&self.sh.generated, ordering)
            .min(self.sent_to)
    }

    /// The smallest value the other executors hold in `cells` (one per executor), `u32::MAX`
    /// when there is no other executor.
    fn min_of_others(&self, cells: &[CachePadded<AtomicU32>], ordering: Ordering) -> u32 {
        let me = self.me as usize;
        cells
            .iter()
            .enumerate()
            .filter(|&(x, _)| x != me)
            .map(|(_, c)| c.load(ordering))
            .min()
            .unwrap_or(u32::MAX)
    }

    /// Partitioned generation: infers, in id order, every access of this executor's tensors by
    /// a task below the smallest position every executor has published ([`Shared::generated`]):
    /// own tasks' from [`Executor::local`] (their predecessors into their slots), the others'
    /// from what they sent (their predecessors queued for their owners, handed over at the
    /// next [`Executor::publish`]). Each executor's accesses arrive in id order, so merging the
    /// sources by id gives every tensor's accesses in the host build's order.
    fn merge(&mut self) {
        let w = self.sent_everywhere(Ordering::Acquire);
        if w <= self.merged {
            return;
        }
        let sh = self.sh;
        let (me, e) = (self.me as usize, sh.executors as usize);
        // Locked after the acquire loads: every access below `w` is there.
        for (x, q) in self.mail_in.iter_mut().enumerate() {
            if x != me {
                q.take(&mut lock(&sh.sent[me * e + x]));
            }
        }
        let Executor {
            map,
            local,
            mail_in,
            slots,
            outbox,
            ..
        } = self;
        loop {
            // The source whose next access has the smallest id below `w`.
            let mut best: Option<(u32, usize)> = local.front().map(|l| (l.0, me));
            for (x, q) in mail_in.iter().enumerate() {
                if let Some(&(id, _)) = q.front()
                    && best.is_none_or(|(b, _)| id < b)
                {
                    best = Some((id, x));
                }
            }
            let Some((id, x)) = best.filter(|&(id, _)| id < w) else {
                break;
            };
            if x == me {
                while let Some(&(_, slot, io)) = local.front().filter(|l| l.0 == id) {
                    local.pop_front();
                    let preds = &mut slots[slot as usize].preds;
                    map.access(TaskId(id), &io.region, io.access(), &mut |p, _| {
                        preds.push(p.0)
                    });
                }
            } else {
                let out = &mut outbox[x];
                let q = &mut mail_in[x];
                while let Some((_, io)) = q.front().filter(|m| m.0 == id) {
                    map.access(TaskId(id), &io.region, io.access(), &mut |p, _| {
                        out.push((id, p.0))
                    });
                    q.head += 1;
                }
            }
        }
        self.merged = w;
    }

    /// One generated task: record its regions; if it is ours, wire, keep and seal it.
    fn submit(&mut self, task: &Task<'_>) -> Result<(), Stopped> {
        let owner = self.sh.of.of(task.target.unwrap_or(task.index));
        let own = owner == self.me;
        if self.sh.partitioned {
            // Only own tasks come: the others' before it were skipped.
            self.origins.skip_users_to(task.index);
            self.position = self.origins.len() as u32;
            if !own {
                return Err(self.stop(ExecError::Internal(format!(
                    "device generation: task #{} of executor {owner} generated by {}",
                    task.index, self.me
                ))));
            }
        }
        if own {
            self.make_room()?;
        }
        let id = self.alloc()?;
        if self.origins.user_tasks() != task.index {
            return Err(self.stop(ExecError::Internal(format!(
                "device generation: task index {} arrived as the {}th task",
                task.index,
                self.origins.user_tasks()
            ))));
        }
        self.origins.push_user();
        match task.io() {
            // Another executor's task with boxes, when no producer is recorded: its boxes of
            // this executor's tensors go to the map as the interpreter holds them (no copy).
            Some(boxes) if !own && self.producers.is_none() => {
                self.room_for_foreign(task, boxes)?;
                self.infer_foreign(id, owner, Some(boxes));
            }
            _ => {
                self.regions(task, id, own)?;
                if own {
                    self.infer_own(task, id);
                } else {
                    self.infer_foreign(id, owner, None);
                }
            }
        }
        self.tick(own)
    }

    /// [`Executor::regions`]' room check for another executor's task handed as `boxes`: the
    /// map must have room for its boxes of this executor's tensors (when it has room for all
    /// of them, it has room for those; else they are counted).
    #[inline(always)]
    fn room_for_foreign(&mut self, task: &Task<'_>, boxes: &[TaskIo]) -> Result<(), Stopped> {
        if self.map.has_room(boxes.len()).is_ok() {
            return Ok(());
        }
        self.room_for_foreign_counted(task, boxes)
    }

    /// [`Executor::room_for_foreign`] when the map has no room for every box.
    #[cold]
    #[inline(never)]
    fn room_for_foreign_counted(
        &mut self,
        task: &Task<'_>,
        boxes: &[TaskIo],
    ) -> Result<(), Stopped> {
        let (of, me) = (self.sh.of, self.me);
        let n = boxes
            .iter()
            .filter(|x| of.of(x.region.tensor) == me)
            .count();
        self.room_for(task, n)
    }

    /// Whether the map has room for `n` more accesses of `task`; when full, the run stops with
    /// an error naming the task.
    #[inline(always)]
    fn room_for(&mut self, task: &Task<'_>, n: usize) -> Result<(), Stopped> {
        match self.map.has_room(n) {
            Ok(()) => Ok(()),
            Err(full) => Err(self.stop(ExecError::Build(format!("task #{}: {full}", task.index)))),
        }
    }

    /// Task `id`'s regions into `self.io` (checked, and recorded as producers of computed
    /// tensors); an error names the task. Of another executor's task only the regions of this
    /// executor's tensors, the only ones it infers, unless producers are recorded (they need
    /// every region): its owner checks the others, with the same error.
    #[inline]
    fn regions(&mut self, task: &Task<'_>, id: u32, own: bool) -> Result<(), Stopped> {
        self.io.clear();
        let me = self.me;
        let every = own || self.producers.is_some();
        if let Some(boxes) = task.io() {
            // The interpreter's boxes, checked as `Region::new` would (`Task::io`).
            if every {
                self.io.extend_from_slice(boxes);
            } else {
                let of = self.sh.of;
                self.io
                    .extend(boxes.iter().filter(|x| of.of(x.region.tensor) == me));
            }
        } else {
            self.regions_from_coords(task, every)?;
        }
        self.room_for(task, self.io.len())?;
        if let Some(p) = &mut self.producers {
            p.record_io(TaskId(id), &self.io);
        }
        Ok(())
    }

    /// [`Executor::regions`] for a task the interpreter hands without boxes (a region of rank
    /// above [`pto_wsp_ir::task_io::MAX_RANK`] or an extent past `u32`): each region checked
    /// and built here, the first bad one the task's error.
    #[cold]
    fn regions_from_coords(&mut self, task: &Task<'_>, every: bool) -> Result<(), Stopped> {
        let me = self.me;
        for r in task.regions() {
            if !every && self.sh.of.of(r.tensor) != me {
                continue;
            }
            match Region::new(r.tensor, r.start, r.size) {
                Ok(region) => self.io.push(TaskIo::new(region, r.access)),
                Err(err) => {
                    return Err(self.stop(ExecError::Build(format!("task #{}: {err}", task.index))));
                }
            }
        }
        Ok(())
    }

    /// Own task `id` (its regions in `self.io`): infer its accesses of this executor's tensors
    /// (module docs, "The TensorMap, partitioned by tensor"), keep its data in a slot, and seal
    /// it — at once when this is the only executor (every edge is found here), else once every
    /// other executor has inferred it ([`Executor::seal_inferred`]).
    #[inline]
    fn infer_own(&mut self, task: &Task<'_>, id: u32) {
        let (e, me) = (self.sh.executors, self.me);
        let slot = self.take_slot(id);
        let sh = self.sh;
        let Executor {
            map,
            io,
            open,
            slots,
            wiring,
            local,
            mail_out,
            ..
        } = self;
        let s = &mut slots[slot];
        s.preds.clear();
        if e == 1 {
            // The only executor: every edge is found here, wired at once.
            let mut pred = |p: TaskId, _: EdgeKind| wiring.wire(sh.states, p, id);
            for x in io.iter().filter(|x| !skips_map(sh.read_only, x)) {
                map.access(TaskId(id), &x.region, x.access(), &mut pred);
            }
            for o in open.iter() {
                pred(TaskId(o.dep), EdgeKind::Explicit);
            }
        } else if sh.partitioned {
            // Inferred in id order with the others' accesses ([`Executor::merge`]).
            for x in io.iter().filter(|x| !skips_map(sh.read_only, x)) {
                let m = sh.of.of(x.region.tensor);
                if m == me {
                    local.push_back((id, slot as u32, *x));
                } else {
                    mail_out[m as usize].push((id, *x));
                }
            }
            s.preds.extend(open.iter().map(|o| o.dep));
        } else {
            let mut pred = |p: TaskId, _: EdgeKind| s.preds.push(p.0);
            let mine = |x: &&TaskIo| sh.of.of(x.region.tensor) == me && !skips_map(sh.read_only, x);
            for x in io.iter().filter(mine) {
                map.access(TaskId(id), &x.region, x.access(), &mut pred);
            }
            s.preds.extend(open.iter().map(|o| o.dep));
        }
        s.index = task.index;
        s.kernel = task.kernel;
        s.params.clear();
        s.params.extend(task.params.iter().map(|v| v.to_bits()));
        std::mem::swap(&mut s.io, io);
        self.generated_own();
        if e == 1 {
            // Wired above, nothing handed over.
            if self.sh.states.seal_in(&mut self.wiring.cursor, TaskId(id)) {
                self.ready.push_back((id, slot as u32));
            }
        } else {
            self.unsealed.push_back((id, slot as u32));
            let n = self.unsealed.len() as u64;
            self.stats.unsealed_hwm = self.stats.unsealed_hwm.max(n);
        }
    }

    /// Another executor's task `id` (its regions in `boxes`, else in `self.io`): infer its
    /// accesses of this executor's tensors and queue the edges found for its owner (handed over
    /// at the next [`Executor::publish`]).
    #[inline(always)]
    fn infer_foreign(&mut self, id: u32, owner: u32, boxes: Option<&[TaskIo]>) {
        let me = self.me;
        let Executor {
            map, io, outbox, ..
        } = self;
        let io: &[TaskIo] = boxes.unwrap_or(io);
        let out = &mut outbox[owner as usize];
        let mut hand = |p: TaskId, _: EdgeKind| out.push((id, p.0));
        let (of, read_only) = (self.sh.of, self.sh.read_only);
        for x in io
            .iter()
            .filter(|x| of.of(x.region.tensor) == me && !skips_map(read_only, x))
        {
            map.access(TaskId(id), &x.region, x.access(), &mut hand);
        }
    }

    /// A barrier after every task of `before` (global indices); its id.
    fn barrier(&mut self, before: Range<u32>) -> Result<u32, Stopped> {
        let next = self.origins.len() as u32;
        if self.sh.partitioned {
            self.position = next;
        }
        let own = self.sh.of.of(next) == self.me;
        if own {
            self.make_room()?;
        }
        let id = self.alloc()?;
        self.origins.push_barrier();
        if own {
            let slot = self.take_slot(id);
            if before.end > self.origins.user_tasks() {
                return Err(self.stop(ExecError::Internal(format!(
                    "device generation: order edge from tasks {before:?} not yet generated"
                ))));
            }
            let s = &mut self.slots[slot];
            s.preds.clear();
            s.preds
                .extend(before.filter_map(|i| self.origins.task_id(i)).map(|p| p.0));
            s.index = NO_INDEX;
            s.kernel = BARRIER_KERNEL;
            self.stats.barriers += 1;
            s.params.clear();
            s.io.clear();
            self.generated_own();
            // A barrier accesses no tensor: no other executor finds an edge into it.
            self.seal_own(id, slot);
        }
        self.tick(own)?;
        Ok(id)
    }

    /// Per generated task: retire the map now and then; run ready tasks after own tasks and
    /// every [`POLL_EVERY`] tasks.
    #[inline(always)]
    fn tick(&mut self, own: bool) -> Result<(), Stopped> {
        if self.sh.partitioned {
            // This task's accesses are queued.
            self.position = self.next_id;
        }
        self.retire_in -= 1;
        if self.retire_in == 0 {
            self.retire_in = RETIRE_EVERY;
            self.retire();
        }
        self.poll_in -= 1;
        let poll = self.poll_in == 0;
        if poll {
            self.poll_in = POLL_EVERY;
        }
        if own || poll {
            if self.sh.executors > 1 {
                self.exchange(poll);
            }
            while let Some(t) = self.next_ready() {
                self.run_one(t)?;
            }
        }
        Ok(())
    }

    /// The ids this executor knows of: those it handed out, and partitioned the others' tasks
    /// up to its position (which it skipped).
    fn horizon(&self) -> u32 {
        if self.position == u32::MAX {
            self.next_id
        } else {
            self.next_id.max(self.position)
        }
    }

    /// Advances the completed prefix (acquire loads, so those tasks' work happens before
    /// anything wired later) and forgets the map's records below it.
    fn retire(&mut self) {
        let before = self.completed_below;
        self.completed_below = self
            .sh
            .states
            .completed_until(TaskId(self.completed_below), TaskId(self.horizon()))
            .0;
        if self.completed_below == before {
            return;
        }
        let done = TaskId(self.completed_below);
        self.map.retire_before(done);
        if let Some(p) = &mut self.producers {
            p.forget_before(done);
        }
        self.wiring.forget_before(done);
        let sh = self.sh;
        // SAFETY: this thread saw every task below `done` complete (acquire loads above) and
        // wired every node of its cursor itself.
        #[allow(unsafe_code)]
        unsafe {
            self.wiring.cursor.reclaim(sh.states, done)
        };
        // From now on this executor names no task below `done` (its wiring answers such
        // predecessors itself): say so, and free what every executor is past.
        sh.lows[self.me as usize].store(done.0, Ordering::Release);
        self.free_behind_floor();
    }

    /// Frees the task states and owner entries below the minimum of every executor's published
    /// prefix ([`Shared::lows`], acquire loads).
    fn free_behind_floor(&self) {
        let sh = self.sh;
        let floor = sh
            .lows
            .iter()
            .map(|l| l.load(Ordering::Acquire))
            .min()
            .unwrap_or(0);
        // SAFETY: every executor published a low at or above `floor` after it last touched a
        // task below it (acquired above), and each low was a completed prefix that executor
        // saw; workers touch only tasks not yet done.
        #[allow(unsafe_code)]
        unsafe {
            sh.states.reclaim_below(TaskId(floor));
            sh.owners.entries.reclaim_below(floor);
        }
    }

    /// Waits until every task of `ids` has completed, running own ready tasks meanwhile (the
    /// module docs, "Computed reads", say why this cannot deadlock). `Some(waited)`, or `None`
    /// when the run stopped.
    fn wait_for(&mut self, ids: &[TaskId]) -> Option<bool> {
        let mut waited = false;
        let mut round = 0u32;
        let mut i = 0;
        while i < ids.len() {
            let t = ids[i];
            if t.0 < self.completed_below || self.sh.states.is_complete(t) {
                i += 1;
                continue;
            }
            waited = true;
            // The producer may be another executor's, whose completion is not announced here.
            self.help_or_yield(&mut round).ok()?;
        }
        Some(waited)
    }

    /// A computed read: waits on its producers, then takes the value the first executor to
    /// get here read (or reads and publishes it).
    fn computed_read(
        &mut self,
        read: &DataRead<'_>,
        out: &mut Vec<i64>,
    ) -> Result<(), ReadRefused> {
        if self.sh.aborted() {
            return Err(ReadRefused::Stopped);
        }
        let Some(mut producers) = self.producers.take() else {
            return Err(ReadRefused::Unsupported(
                "internal: a computed read of a tensor the program does not mark".into(),
            ));
        };
        let mut g = GenStats::default();
        let ok = producers.wait(read, &mut |ids| self.wait_for(ids), &mut g);
        self.producers = Some(producers);
        self.stats.computed_reads += 1;
        self.stats.read_stalls += g.stalls;
        self.stats.read_stall_ns += g.stall_ns;
        if !ok {
            return Err(ReadRefused::Stopped);
        }
        let seq = self.reads;
        self.reads += 1;
        let sh = self.sh;
        let mut table = lock(&sh.reads);
        if let Some((value, left)) = table.get_mut(&seq) {
            out.extend_from_slice(value);
            *left -= 1;
            if *left == 0 {
                table.remove(&seq);
            }
            return Ok(());
        }
        // The first executor here: every producer has completed (waited above) and no task
        // generated after the read has run (its owner has not passed the read: the value is
        // not published yet).
        let value = sh.exec.read(read).map_err(ReadRefused::Unsupported)?;
        out.extend_from_slice(&value);
        if sh.executors > 1 {
            table.insert(seq, (value, sh.executors - 1));
        }
        Ok(())
    }

    /// A ready own task: the local queue first, then the inbox.
    #[inline(always)]
    fn next_ready(&mut self) -> Option<Ready> {
        if let Some(t) = self.ready.pop_front() {
            return Some(t);
        }
        self.sh.inboxes[self.me as usize].pop()
    }

    /// Runs one ready task, waiting for one (spin, then park) if there is none.
    /// Returns without running one when there is nothing left to do (no own task in flight,
    /// every access inferred).
    fn wait_and_run(&mut self) -> Result<(), Stopped> {
        let mut round = 0u32;
        let mut since: Option<Instant> = None;
        loop {
            if self.sh.aborted() {
                return Err(Stopped);
            }
            self.publish();
            self.seal_inferred();
            if let Some(t) = self.next_ready() {
                self.waited(since);
                return self.run_one(t);
            }
            if self.in_flight == 0 && self.merged == u32::MAX {
                self.waited(since);
                return Ok(());
            }
            if since.is_none() {
                since = Some(Instant::now());
            }
            if Idle::backoff(round) {
                round += 1;
                continue;
            }
            if !self.unsealed.is_empty() {
                // Waits on another executor's inference, which is not announced: never park.
                self.stats.seal_yields += 1;
                thread::yield_now();
                continue;
            }
            self.stats.parks += 1;
            let (sh, me) = (self.sh, self.me as usize);
            // Partitioned, another executor's published position may let this one infer more
            // (it wakes this one after publishing).
            let merged = self.merged;
            sh.idle.park(me, || {
                sh.abort.load(Ordering::SeqCst)
                    || !sh.inboxes[me].is_empty()
                    || (sh.partitioned && self.sent_everywhere(Ordering::SeqCst) > merged)
            });
            round = 0;
        }
    }

    /// Adds the time since `since` (a wait's start, if it waited) to the wait figures.
    fn waited(&mut self, since: Option<Instant>) {
        if let Some(t) = since {
            self.stats.wait_ns += t.elapsed().as_nanos() as u64;
        }
    }

    /// Runs own task `t` (ready, in its slot), completes it and routes the successors it made
    /// ready.
    fn run_one(&mut self, (t, slot): Ready) -> Result<(), Stopped> {
        let sh = self.sh;
        let slot = slot as usize;
        debug_assert_eq!(sh.owners.get(t), (self.me as usize, slot));
        let s = &self.slots[slot];
        debug_assert_eq!(s.id, t);
        if s.kernel != BARRIER_KERNEL {
            let start = sh.config.trace.then(|| sh.t0.elapsed().as_nanos() as u64);
            let (task, me) = (TaskId(t), self.me as usize);
            let r = if sh.in_bounds {
                // Every region came from the interpreter, checked against the bound shapes.
                sh.exec
                    .run_task_in_bounds(task, me, s.kernel, &s.params, &s.io)
            } else {
                sh.exec.run_task(task, me, s.kernel, &s.params, &s.io)
            };
            if let Some(start_ns) = start {
                self.spans.push(Span {
                    // The expander's index, as the user knows the task (ids are per run).
                    task: s.index,
                    worker: self.me,
                    start_ns,
                    end_ns: sh.t0.elapsed().as_nanos() as u64,
                });
            }
            if let Err(f) = r {
                return Err(self.stop(ExecError::Kernel {
                    task: f.index.unwrap_or(s.index),
                    kernel: f.kernel,
                    message: f.message,
                    panicked: f.panicked,
                }));
            }
        }
        let (me, ready, stats) = (self.me as usize, &mut self.ready, &mut self.stats);
        sh.states.complete(TaskId(t), |succ| {
            let (o, slot) = sh.owners.get(succ.0);
            let entry = (succ.0, slot as u32);
            if o == me {
                ready.push_back(entry);
            } else {
                sh.inboxes[o].push(entry);
                sh.idle.notify(Some(o), |w| w == o);
                stats.sent += 1;
            }
        });
        self.free.push(slot as u32);
        self.in_flight -= 1;
        self.ran += 1;
        Ok(())
    }
}

/// The wiring of edges into own tasks: deduplication, counts, optional recording.
struct Wiring {
    /// Per task id from `seen_base`: the own task being wired that last reported it as a
    /// predecessor. A vector (an indexed load per edge, no ring arithmetic); the stamps of
    /// done tasks are dropped from its front once they are at least half of it.
    seen: Vec<u32>,
    seen_base: u32,
    /// Every task below this id is done: such a predecessor costs nothing and is not looked up
    /// (its state may be freed).
    done_below: u32,
    /// Predecessors below `seen_base` already reported for the own task `old_for`.
    old: HashSet<u32>,
    old_for: u32,
    cursor: EdgeCursor,
    edges: Option<Vec<(u32, u32)>>,
    accepted: u64,
    refused: u64,
    /// Of `refused`, predecessors reported as `TaskId::FORGOTTEN`.
    unnamed: u64,
}

impl Wiring {
    /// Wires `pred -> succ` (an own task being submitted) unless `pred` was already reported
    /// for it.
    #[inline]
    fn wire(&mut self, states: &TaskStates, pred: TaskId, succ: u32) {
        if pred == TaskId::FORGOTTEN {
            // A completed task the map kept only as a count: found, nothing to wire.
            self.refused += 1;
            self.unnamed += 1;
            return;
        }
        if pred.0 >= self.seen_base {
            let s = &mut self.seen[(pred.0 - self.seen_base) as usize];
            if *s == succ {
                return;
            }
            *s = succ;
        } else {
            if self.old_for != succ {
                self.old_for = succ;
                self.old.clear();
            }
            if !self.old.insert(pred.0) {
                return;
            }
        }
        if let Some(e) = &mut self.edges {
            e.push((pred.0, succ));
        }
        if pred.0 >= self.done_below && states.add_edge_in(&mut self.cursor, pred, TaskId(succ)) {
            self.accepted += 1;
        } else {
            self.refused += 1;
        }
    }

    /// Every task below `done` is done: stop keeping stamps for them (dropped once they are
    /// at least half of the stamps, so the moves cost at most one per stamp; a stamp kept
    /// longer is still a correct one, and [`Wiring::done_below`] answers such a task).
    fn forget_before(&mut self, done: TaskId) {
        self.done_below = done.0;
        let n = (done.0.saturating_sub(self.seen_base) as usize).min(self.seen.len());
        if n * 2 >= self.seen.len() {
            self.seen.drain(..n);
            self.seen_base += n as u32;
        }
    }
}

impl<E: DirectExec> TaskSink for Executor<'_, '_, E> {
    /// The interpreter's boxes ([`Task::io`]) are this executor's regions as they are: no
    /// region is built again from its coordinates.
    #[inline]
    fn wants_boxes(&self) -> bool {
        true
    }

    fn task(&mut self, task: &Task<'_>) -> ControlFlow<()> {
        if self.sh.aborted() {
            return ControlFlow::Break(());
        }
        match self.submit(task) {
            Ok(()) => ControlFlow::Continue(()),
            Err(Stopped) => ControlFlow::Break(()),
        }
    }

    fn order_begin(&mut self, before: Range<u32>, after_start: u32) {
        if self.sh.aborted() {
            return;
        }
        if self.sh.partitioned {
            // The others' tasks before the later range were skipped.
            self.origins.skip_users_to(after_start);
        }
        let dep = if before.len() == 1 {
            match self.origins.task_id(before.start) {
                Some(id) => id.0,
                None => {
                    self.stop(ExecError::Internal(format!(
                        "device generation: order edge from task {} not yet generated",
                        before.start
                    )));
                    return;
                }
            }
        } else {
            match self.barrier(before.clone()) {
                Ok(id) => id,
                // The next `task` call sees the abort and stops the interpreter.
                Err(Stopped) => return,
            }
        };
        self.open.push(Open {
            before,
            after_start,
            dep,
        });
    }

    fn read(&mut self, read: &DataRead<'_>, out: &mut Vec<i64>) -> Result<(), ReadRefused> {
        self.computed_read(read, out)
    }

    fn order(&mut self, edge: OrderEdge) {
        if let Some(k) = self
            .open
            .iter()
            .rposition(|o| o.before == edge.before && o.after_start == edge.after.start)
        {
            self.open.remove(k);
        }
    }
}

impl WorkerPool {
    /// Runs `program` under `bound` in device-generation mode (see the module docs): every
    /// worker is an executor that interprets the program, wires and runs its own tasks. Fails
    /// with the first kernel failure or interpretation error; the pool can run again.
    pub fn run_devgen<E: DirectExec>(
        &self,
        program: &Program,
        bound: &Bound,
        config: &DevGenConfig,
        exec: &E,
    ) -> Result<RunStats, ExecError> {
        self.run_devgen_on(&mut DevGenTables::new(), program, bound, config, exec)
    }

    /// [`WorkerPool::run_devgen`] on `tables`, reset first: a caller running many times keeps
    /// one set of tables (and their memory) across runs.
    pub fn run_devgen_on<E: DirectExec>(
        &self,
        tables: &mut DevGenTables,
        program: &Program,
        bound: &Bound,
        config: &DevGenConfig,
        exec: &E,
    ) -> Result<RunStats, ExecError> {
        tables.reset();
        let executors = self.threads();
        if executors > MAX_EXECUTORS {
            return Err(ExecError::Setup(format!(
                "device generation runs on at most {MAX_EXECUTORS} executors, not {executors}"
            )));
        }
        let mut kept = std::mem::take(&mut tables.scratch);
        kept.resize_with(executors, Scratch::default);
        let scratch = kept
            .into_iter()
            .map(|s| CachePadded::new(Mutex::new(s)))
            .collect();
        let shared = Shared::new(program, bound, exec, config, executors, tables, scratch);
        let job = |w: usize| shared.executor(w);
        let r = self.scope(&job, || ());
        let run_ns = shared.t0.elapsed().as_nanos() as u64;
        if let Err(p) = r {
            return Err(ExecError::Internal(p.0));
        }
        let held = shared.states.peak_tasks().max(shared.owners.entries.peak()) as u64;
        let Shared { error, reports, .. } = shared;
        let mut reports = reports.into_inner().unwrap_or_else(|p| p.into_inner());
        reports.sort_by_key(|r| r.executor);
        tables.scratch = reports
            .iter_mut()
            .map(|r| r.scratch.take().unwrap_or_default())
            .collect();
        if let Some(e) = error.into_inner().unwrap_or_else(|p| p.into_inner()) {
            return Err(e);
        }
        let mut stats = RunStats {
            run_ns,
            held_tasks_peak: held,
            ..RunStats::default()
        };
        add_reports(&mut stats, reports, executors);
        Ok(stats)
    }
}

impl<'r, E: DirectExec> Shared<'r, E> {
    /// The shared state of a run of `program` on `executors` executors, nothing generated yet.
    fn new(
        program: &'r Program,
        bound: &'r Bound,
        exec: &'r E,
        config: &DevGenConfig,
        executors: usize,
        tables: &'r DevGenTables,
        scratch: Box<[CachePadded<Mutex<Scratch>>]>,
    ) -> Shared<'r, E> {
        let window = config.window.clamp(1, MAX_WINDOW);
        let per_executor = || {
            (0..executors)
                .map(|_| CachePadded::new(AtomicU32::new(0)))
                .collect()
        };
        Shared {
            program,
            bound,
            exec,
            in_bounds: exec.has_shapes(bound.shapes()),
            config: *config,
            executors: executors as u32,
            of: ModE::new(executors as u32),
            window,
            span: span_limit(window, executors),
            states: &tables.states,
            owners: &tables.owners,
            lows: per_executor(),
            inferred: per_executor(),
            handed: per_pair(executors),
            partitioned: executors > 1 && config.partition && partitions(program),
            generated: per_executor(),
            sent: per_pair(executors),
            inboxes: (0..executors)
                .map(|_| CachePadded::new(Inbox::default()))
                .collect(),
            scratch,
            idle: Idle::new(executors),
            abort: AtomicBool::new(false),
            error: Mutex::new(None),
            reports: Mutex::new(Vec::new()),
            t0: Instant::now(),
            computed: program.computed_tensors(),
            read_only: &tables.read_only,
            reads: Mutex::new(std::collections::HashMap::new()),
        }
    }
}

/// Adds the executors' reports (in executor order) to `stats`: tasks, edges and spans summed,
/// their maps' figures summed (each holds its tensors' records), the program's computed reads
/// counted once, and each executor's figures in [`RunStats::device_gen`].
fn add_reports(stats: &mut RunStats, reports: Vec<Report>, executors: usize) {
    stats.per_worker = vec![0; executors];
    let mut per = vec![ExecutorStats::default(); executors];
    for r in reports {
        stats.per_worker[r.executor] = r.ran;
        stats.tasks += r.ran;
        stats.edges += r.stats.edges + r.stats.refused;
        stats.wired_edges += r.stats.edges;
        stats.edges_unnamed += r.stats.unnamed;
        stats.barriers += r.stats.barriers;
        stats.build_ns = stats.build_ns.max(r.stats.generated_ns);
        // Each executor's map holds its tensors' records: the run's map is their sum.
        let m = &mut stats.tensor_map;
        m.hits += r.map.hits;
        m.misses += r.map.misses;
        m.probes += r.map.probes;
        m.live += r.map.live;
        m.high_water += r.map.high_water;
        stats.spans.extend(r.spans);
        stats.edge_list.extend(r.edges);
        per[r.executor] = r.stats;
    }
    stats.counters = CounterSnapshot {
        tasks_submitted: per.iter().map(|s| s.own).sum(),
        tasks_completed: stats.tasks,
        window_stalls: per.iter().map(|s| s.window_stalls).sum(),
        in_flight_hwm: per.iter().map(|s| s.in_flight_hwm).max().unwrap_or(0),
        ..CounterSnapshot::default()
    };
    // Every executor makes every computed read and ends every `while`: the program's counts
    // are one executor's; stalls (count and time) are summed over executors.
    stats.generation = GenStats {
        computed_reads: per.first().map_or(0, |s| s.computed_reads),
        stalls: per.iter().map(|s| s.read_stalls).sum(),
        stall_ns: per.iter().map(|s| s.read_stall_ns).sum(),
        loops_at_max: per.first().map_or(0, |s| s.loops_at_max),
    };
    stats.device_gen = Some(DevGenStats { executors: per });
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sync::AtomicU64;

    #[test]
    fn owner_table_keeps_owner_and_slot_anywhere_in_the_index_space() {
        let t = OwnerTable::new();
        for id in [0, 5, 4096, 3 * 4096 + 7, u32::MAX - 2] {
            t.set(id, 200, MAX_WINDOW as u32);
            assert_eq!(t.get(id), (200, MAX_WINDOW));
        }
    }

    fn program(text: &str) -> Program {
        let m = pto_wsp_ir::parse(text).unwrap();
        let r = pto_wsp_ir::resolve(&m, &Default::default()).unwrap();
        let bytes = pto_wsp_bytecode::encode(&r, &Default::default()).unwrap();
        Program::decode(&bytes).unwrap()
    }

    /// A chain of `n` tasks (each reads and writes the same tile) dispatched round robin: every
    /// edge crosses executors.
    fn chain(n: u32, dispatch: &str) -> Program {
        program(&format!(
            "tensor X: f32[4]; axis I = dense({n}); kernel k(inout x: f32[4]);
             workload main() {{ parallel_for i in I {{ task k(X[0 +: 4]); }} }}
             schedule for main {{ executors 64; dispatch {dispatch}; }}"
        ))
    }

    /// Checks that tasks run in id order (a chain) and counts them.
    struct InOrder {
        next: AtomicU64,
        fail_at: Option<u32>,
    }

    impl DirectExec for InOrder {
        fn run_task(
            &self,
            t: TaskId,
            _: usize,
            _: u32,
            _: &[u64],
            _: &[TaskIo],
        ) -> Result<(), TaskFailure> {
            if self.fail_at == Some(t.0) {
                return Err(TaskFailure {
                    index: None,
                    kernel: "k".into(),
                    message: "boom".into(),
                    panicked: false,
                });
            }
            let was = self.next.fetch_add(1, Ordering::SeqCst);
            assert_eq!(was, u64::from(t.0), "task {} ran out of order", t.0);
            Ok(())
        }
    }

    #[test]
    fn chains_across_executors_run_in_order_with_any_window() {
        for dispatch in [
            "round_robin(64)",
            "work_steal",
            "static_partition(0, 100, 250)",
        ] {
            let p = chain(400, dispatch);
            let bound = p.bind(&pto_wsp_ir::Bindings::new()).unwrap();
            for threads in [1, 3, 8] {
                let pool = WorkerPool::new(threads).unwrap();
                for (window, partition) in [(1, true), (2, true), (64, true), (2, false)] {
                    let exec = InOrder {
                        next: AtomicU64::new(0),
                        fail_at: None,
                    };
                    let config = DevGenConfig {
                        window,
                        partition,
                        ..DevGenConfig::default()
                    };
                    let s = pool.run_devgen(&p, &bound, &config, &exec).unwrap();
                    assert_eq!(s.tasks, 400);
                    assert_eq!(exec.next.load(Ordering::SeqCst), 400);
                    let d = s.device_gen.unwrap();
                    assert_eq!(d.executors.len(), threads);
                    // Partitioned, each executor generates only its own tasks.
                    let walked_all = !partition || threads == 1;
                    assert!(
                        d.executors
                            .iter()
                            .all(|e| e.walked == if walked_all { 400 } else { e.own }),
                        "{dispatch}, {threads} threads, window {window}"
                    );
                    assert_eq!(d.executors.iter().map(|e| e.own).sum::<u64>(), 400);
                    assert!(d.executors.iter().all(|e| e.in_flight_hwm <= window as u64));
                }
            }
        }
    }

    /// A device-generation run of a 100K-task chain under a window of 1,024 own tasks per
    /// executor holds task state (task states, owner table) for a bounded number of tasks,
    /// freed behind the slowest executor's published prefix, whatever the task count and
    /// whatever the timing: at most `2 · span + CHUNK` (span: [`span_limit`], 4,096 here), so
    /// nine chunks. The same chain of 10K tasks is held to the same bound.
    ///
    /// Why, under every timing. Write `low(Y)` for executor `Y`'s published prefix and `w(Y)`
    /// for the ids it has walked; a chunk `c` is grown by an executor `X` only for an id below
    /// `w(X)`, so only after `X` allocated `a = c · CHUNK`, and right then `X` frees below
    /// `F = min low(Y)` as it loads them ([`Executor::free_behind_floor`]).
    /// 1. `a < low(X) + span`: `keep_close` allocates only within `span` of `X`'s own prefix.
    /// 2. `F > low(X) - 1 - span`: task `q = low(X) - 1` is complete (`X` acquired its
    ///    completion, or a floor raised by a reclaimer that loaded every low at or above it).
    ///    For each `Y`, `q` completed only after `Y` walked past it — `q` is `Y`'s and `Y`
    ///    generated it, or it is another's and its owner sealed it after acquiring `Y`'s
    ///    published inference past it — and when `Y` allocated `q`, `q - low(Y) < span` held
    ///    with a `low(Y)` stored before; that store happens before `X`'s load, which sees it or
    ///    a later one. (A chain has no barrier task; each barrier right below the prefix, which
    ///    `Y` need not have walked, would add one.)
    /// 3. So `a - F < 2 · span + 1`: every chunk below `c - 2 · span / CHUNK` is freed before
    ///    `c` is grown, and the chunks held are at most `2 · span / CHUNK + 1`.
    ///
    /// One window is outside this argument: when another executor raised the task states'
    /// floor first, `X`'s free leaves the chunks to it, and if that executor is preempted
    /// between raising the floor and taking its chunks out of the arena (a few instructions
    /// per chunk), they are still counted when `X` grows `c`.
    ///
    /// Each executor's own look at the prefix (every `RETIRE_EVERY` walked tasks) lags: the
    /// prefix it sees may be a full window behind its walk. Without the free at each chunk's
    /// first id, chunk `c` could be grown against the floor of the last look — `2 · span`
    /// plus a chunk behind — and a loaded machine held ten chunks.
    #[test]
    fn a_device_generation_run_holds_task_state_for_the_window_not_the_task_count() {
        const WINDOW: usize = 1024;
        let pool = WorkerPool::new(2).unwrap();
        let config = DevGenConfig {
            window: WINDOW,
            ..DevGenConfig::default()
        };
        let span = span_limit(WINDOW, 2) as usize;
        assert_eq!(span % CHUNK, 0);
        let bound_held = (2 * span + CHUNK) as u64;
        for n in [10_000u32, 100_000] {
            let p = chain(n, "work_steal");
            let bound = p.bind(&pto_wsp_ir::Bindings::new()).unwrap();
            let exec = InOrder {
                next: AtomicU64::new(0),
                fail_at: None,
            };
            let s = pool.run_devgen(&p, &bound, &config, &exec).unwrap();
            assert_eq!(exec.next.load(Ordering::SeqCst), u64::from(n));
            assert_eq!(s.edges, u64::from(n - 1));
            assert!(
                s.held_tasks_peak <= bound_held,
                "{n} tasks: held state for {} tasks under a window of {WINDOW}",
                s.held_tasks_peak
            );
        }
    }

    /// A store whose shapes are not the bound program's (here: `X` bound with 8 elements, the
    /// store's with 4) gets every region checked per task again: the task of `X[4 +: 4]`, inside
    /// the bound shape, fails before its (empty) kernel runs with the kernel executor's region
    /// error, on 1 to 3 executors, walking and partitioned. With the store's own shapes the same
    /// program runs.
    #[test]
    fn a_store_not_of_the_bound_shapes_checks_every_region() {
        use pto_wsp_ir::Bindings;
        use pto_wsp_kernels::{KernelRegistry, TensorStore};
        let text = "symbol n: i64;\ntensor X: f32[n];\naxis I = dense(2);\n\
                    kernel k(inout x: f32[4]);\n\
                    workload main() { parallel_for i in I { task k(X[4 * i +: 4]); } }\n";
        let m = pto_wsp_ir::parse(text).unwrap();
        let p = program(text);
        let bound = p.bind(&Bindings::new().symbol("n", 8i64)).unwrap();
        let mut registry = KernelRegistry::new();
        let id = registry.register("k", |_| Ok(()));
        let (kernels, names) = (vec![Some(id)], vec!["k".to_string()]);
        let source = pto_wsp_graph::storage::TaskGraphStorage::default();
        for (n, fails) in [(4i64, true), (8, false)] {
            let store = TensorStore::new(&m, &Bindings::new().symbol("n", n)).unwrap();
            let exec = KernelExec::new(&source, &store, &registry, &kernels, &names, false);
            for threads in 1..=3 {
                let pool = WorkerPool::new(threads).unwrap();
                for partition in [false, true] {
                    let config = DevGenConfig {
                        partition,
                        ..DevGenConfig::default()
                    };
                    let r = pool.run_devgen(&p, &bound, &config, &exec);
                    let what = format!("store of {n}, {threads} executors, {partition}");
                    if !fails {
                        assert_eq!(r.map(|s| s.tasks).ok(), Some(2), "{what}");
                        continue;
                    }
                    match r {
                        Err(ExecError::Kernel { task, message, .. }) => {
                            assert_eq!(task, 1, "{what}");
                            assert!(message.starts_with("region 0: "), "{what}: {message}");
                        }
                        other => panic!("{what}: {other:?}"),
                    }
                }
            }
        }
    }

    #[test]
    fn a_failure_stops_every_executor_and_the_pool_runs_again() {
        let p = chain(2000, "round_robin(64)");
        let bound = p.bind(&pto_wsp_ir::Bindings::new()).unwrap();
        let pool = WorkerPool::new(6).unwrap();
        for fail_at in [0, 1, 777, 1999] {
            let exec = InOrder {
                next: AtomicU64::new(0),
                fail_at: Some(fail_at),
            };
            let config = DevGenConfig {
                window: 3,
                ..DevGenConfig::default()
            };
            let e = pool.run_devgen(&p, &bound, &config, &exec).unwrap_err();
            assert_eq!(
                e,
                ExecError::Kernel {
                    task: fail_at,
                    kernel: "k".into(),
                    message: "boom".into(),
                    panicked: false
                }
            );
            assert_eq!(exec.next.load(Ordering::SeqCst), u64::from(fail_at));
            let ok = InOrder {
                next: AtomicU64::new(0),
                fail_at: None,
            };
            assert_eq!(
                pool.run_devgen(&p, &bound, &config, &ok).unwrap().tasks,
                2000
            );
        }
    }

    /// Tasks on an `i64[8]` tensor held in atomics: kernel 0 `next(in x, out y)`: `y = x - 99`;
    /// kernel 1 `bump(inout x)`: `x += 100`. Reads answer from the same cells.
    struct Cells(Vec<AtomicU64>);

    impl DirectExec for Cells {
        fn run_task(
            &self,
            _: TaskId,
            _: usize,
            kernel: u32,
            _: &[u64],
            io: &[TaskIo],
        ) -> Result<(), TaskFailure> {
            let at = |k: usize| io[k].region.start[0] as usize;
            let get = |i: usize| self.0[i].load(Ordering::SeqCst) as i64;
            let put = |i: usize, v: i64| self.0[i].store(v as u64, Ordering::SeqCst);
            match kernel {
                0 => put(at(1), get(at(0)) - 99),
                _ => put(at(0), get(at(0)) + 100),
            }
            Ok(())
        }

        fn read(&self, read: &DataRead<'_>) -> Result<Vec<i64>, String> {
            let i = read.start[0] as usize;
            Ok(vec![self.0[i].load(Ordering::SeqCst) as i64])
        }
    }

    /// A `while` whose every iteration reads what the task before it computed and then
    /// overwrites the element it read: `s` advances by one per iteration only if every read
    /// waits for its producer (else it sees the old value) and no executor reads after the
    /// overwrite (else it sees `s + 100` and leaves the loop early). Producers are owned by the
    /// reader itself or by others; windows of one task make the reader's own producer sit
    /// behind its full window. The executors must all generate the same 80 tasks.
    #[test]
    fn computed_reads_wait_for_producers_on_any_executor_with_any_window() {
        let text = |dispatch: &str| {
            format!(
                "slot s: i64; tensor A: i64[8];
                 kernel next(in x: i64[1], out y: i64[1]); kernel bump(inout x: i64[1]);
                 workload main() {{
                     while s < 40 max 100 {{
                         task next(A[s % 8], A[(s + 1) % 8]);
                         load s = A[(s + 1) % 8];
                         task bump(A[s % 8]);
                     }}
                 }}
                 schedule for main {{ executors 4; dispatch {dispatch}; }}"
            )
        };
        for dispatch in ["round_robin(4)", "work_steal"] {
            let p = program(&text(dispatch));
            assert_eq!(p.computed_tensors(), vec![true]);
            let bound = p.bind(&pto_wsp_ir::Bindings::new()).unwrap();
            for threads in [1, 2, 3, 4] {
                let pool = WorkerPool::new(threads).unwrap();
                for window in [1, 2, 64] {
                    let cells = Cells((0..8).map(|_| AtomicU64::new(0)).collect());
                    cells.0[0].store(100, Ordering::SeqCst);
                    let config = DevGenConfig {
                        window,
                        ..DevGenConfig::default()
                    };
                    let s = pool.run_devgen(&p, &bound, &config, &cells).unwrap();
                    let what = format!("{dispatch}, {threads} threads, window {window}");
                    // 80 tasks, and a barrier between consecutive iterations (two tasks each).
                    assert_eq!((s.tasks, s.barriers), (80 + 39, 39), "{what}");
                    assert_eq!(s.generation.computed_reads, 40, "{what}");
                    assert_eq!(s.generation.loops_at_max, 0, "{what}");
                    // The last iteration read s = 40 from A[0] and bumped it.
                    assert_eq!(cells.0[0].load(Ordering::SeqCst), 140, "{what}");
                    let d = s.device_gen.unwrap();
                    assert!(d.executors.iter().all(|e| e.computed_reads == 40), "{what}");
                    assert!(d.executors.iter().all(|e| e.walked == 80 + 39), "{what}");
                }
            }
        }
    }

    /// A `while` that reaches its `max` is counted once (not once per executor), and a run
    /// whose reads cannot be served (no tensor contents) fails naming the read's tensor.
    #[test]
    fn computed_reads_count_loops_at_max_and_refuse_without_contents() {
        let p = program(
            "slot s: i64; tensor A: i64[8];
             kernel next(in x: i64[1], out y: i64[1]); kernel bump(inout x: i64[1]);
             workload main() {
                 while s < 40 max 5 {
                     task next(A[s % 8], A[(s + 1) % 8]);
                     load s = A[(s + 1) % 8];
                     task bump(A[s % 8]);
                 }
             }
             schedule for main { executors 4; dispatch round_robin(4); }",
        );
        let bound = p.bind(&pto_wsp_ir::Bindings::new()).unwrap();
        let pool = WorkerPool::new(3).unwrap();
        let cells = Cells((0..8).map(|_| AtomicU64::new(0)).collect());
        cells.0[0].store(100, Ordering::SeqCst);
        let s = pool
            .run_devgen(&p, &bound, &DevGenConfig::default(), &cells)
            .unwrap();
        assert_eq!((s.tasks - s.barriers, s.generation.loops_at_max), (10, 1));
        let e = pool
            .run_devgen(&p, &bound, &DevGenConfig::default(), &NoopExec)
            .unwrap_err();
        assert!(e.to_string().contains("computed read of tensor `A`"), "{e}");
    }

    /// `for_each` iterations of several tasks are ordered through barrier tasks, which have
    /// owners too.
    #[test]
    fn barriers_order_iterations_across_executors() {
        let p = program(
            "tensor X: f32[64]; axis I = dense(50); axis J = dense(4);
             kernel k(out x: f32[1], i: i64);
             workload main() { for_each i in I { parallel_for j in J { task k(X[j], i); } } }
             schedule for main { executors 4; dispatch round_robin(4); }",
        );
        let bound = p.bind(&pto_wsp_ir::Bindings::new()).unwrap();
        struct Iter(Vec<AtomicU64>);
        impl DirectExec for Iter {
            fn run_task(
                &self,
                _: TaskId,
                _: usize,
                _: u32,
                params: &[u64],
                io: &[TaskIo],
            ) -> Result<(), TaskFailure> {
                // Iteration i may start only once every task of iteration i - 1 is done.
                let (i, j) = (params[0], io[0].region.start[0] as usize);
                for k in 0..4 {
                    let seen = self.0[k].load(Ordering::SeqCst);
                    assert!(
                        seen >= i,
                        "iteration {i} started before task {k} of the last ended"
                    );
                }
                self.0[j].store(i + 1, Ordering::SeqCst);
                Ok(())
            }
        }
        for threads in [2, 5] {
            let pool = WorkerPool::new(threads).unwrap();
            let exec = Iter((0..4).map(|_| AtomicU64::new(0)).collect());
            let s = pool
                .run_devgen(
                    &p,
                    &bound,
                    &DevGenConfig {
                        window: 2,
                        ..DevGenConfig::default()
                    },
                    &exec,
                )
                .unwrap();
            // 200 tasks and one barrier per edge between iterations.
            assert_eq!(s.tasks, 200 + 49);
        }
    }

    /// A walking executor's map needs room only for another executor's task's accesses of its
    /// own tensors. With two executors (`A` executor 0's tensor, `B` executor 1's), executor 1
    /// holds two of `B`'s boxes when task #2, executor 0's, writes one box of each tensor: a
    /// fixed map of three entries has room for its one box of `B` (not for both boxes: the
    /// room is then counted), one of two entries has not, and the run's error names the task.
    #[test]
    fn a_fixed_map_has_room_for_another_executors_task_by_its_own_tensors() {
        let p = program(
            "tensor A: f32[4]; tensor B: f32[12]; axis I = dense(2);
             kernel g(out b: f32[4]); kernel f(out a: f32[4], out b: f32[4]);
             workload main() {
                 parallel_for i in I { task g(B[i * 4 +: 4]); }
                 task f(A[0 +: 4], B[8 +: 4]);
             }
             schedule for main { executors 64; dispatch round_robin(64); }",
        );
        let bound = p.bind(&pto_wsp_ir::Bindings::new()).unwrap();
        let pool = WorkerPool::new(2).unwrap();
        for (capacity, fits) in [(3, true), (2, false)] {
            let config = DevGenConfig {
                deps: DepsMode::Exact,
                exact: ExactMap::Fixed(capacity),
                partition: false,
                ..DevGenConfig::default()
            };
            match pool.run_devgen(&p, &bound, &config, &NoopExec) {
                Ok(s) => {
                    assert!(fits, "capacity {capacity}: ran");
                    assert_eq!(s.tasks, 3);
                }
                Err(e) => {
                    assert!(!fits, "capacity {capacity}: {e}");
                    assert!(e.to_string().contains("task #2"), "{e}");
                }
            }
        }
    }
}
