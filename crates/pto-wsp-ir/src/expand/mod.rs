//! The reference expander: the oracle.
//!
//! Why: every back end (sequential, threaded, task-graph, generated code) must generate exactly
//! the tasks a module means. This module defines that meaning operationally, following
//! `docs/SEMANTICS.md` to the letter, as a sequential enumeration simple enough to trust.
//!
//! Promises:
//! - [`expand`] returns the tasks of the module's entry point in program order (for a pipeline,
//!   the Kahn-network order of `SEMANTICS.md`), with every argument evaluated, tiers chosen,
//!   regions bounds-checked, pool, target executor and stream decided, and the structural order
//!   edges (`for_each`, `sequential`, CSP) as index ranges.
//! - It never panics, whatever the module (validated or not) and bindings: every failure is an
//!   [`ExpandError`] naming what went wrong and where.
//! - With [`ExpandOptions::limit`] `= n`, the tasks are the first `n` tasks of the full expansion;
//!   `truncated` is set only when a task beyond the `n`-th exists. Order edges are those of the
//!   full expansion clipped to the prefix (ranges cut at `n`, edges with an empty side dropped).
//! - [`expand_with`] streams the same tasks and edges to an [`ExpandSink`] and announces every
//!   edge before the first task of its later range, so a consumer that wires tasks into a running
//!   graph knows each constraint before it submits a task it applies to; the sink may stop the
//!   expansion. The exact contract is on [`ExpandSink`].
//! - Up-front checks: every symbol the entry can read and every integer tensor it reads must be
//!   bound (a binding with the wrong type is an error even when unused).
//!
//! Choices `SEMANTICS.md` leaves open, made here: a tiered task's pool is the pool of the variant
//! that runs; `hash(e)` is `splitmix64(e as u64) mod E` with [`splitmix64`] the standard mixer
//! (the state increment included); a `for_each` over a ragged axis orders each `(row, pos)`
//! iteration after the previous one; `&&`, `||` and `?:` evaluate lazily (see [`crate::eval`]).
//!
//! How: the expander takes the entry point as [`crate::resolve`](mod@crate::resolve) made it,
//! once, for every consumer (names to registers, calls inlined, expressions typed, schedule keys
//! per task: the checks every consumer shares); the `compile` submodule compiles its
//! expressions and binds it, then an explicit-stack interpreter runs it — see the submodules.

mod compile;
mod run;

use crate::eval::EvalError;
use crate::loc::Loc;
use crate::module::{Module, ParamKind};
use crate::resolve::{BindingError, ResolveError, Resolved};
use crate::source::Diagnostic;
use crate::types::{Access, ExecPool, ScalarType};
use crate::value::{Bindings, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::ops::{ControlFlow, Range};

/// Options of an expansion.
#[derive(Clone, Debug, Default)]
pub struct ExpandOptions {
    /// Stop after this many tasks (the expansion is then marked truncated).
    pub limit: Option<usize>,
    /// Override the schedule's executor count.
    pub executors: Option<u64>,
}

/// The tasks a module generates, in program order, with the structural order constraints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expansion {
    /// Tasks in program (generation) order; a task's index is its position here.
    pub tasks: Vec<ExpandedTask>,
    /// Structural order constraints (`for_each`, `sequential`, CSP), each saying that every task
    /// of one index range precedes every task of another.
    pub order: Vec<OrderEdge>,
    /// Number of executors dispatch targets range over.
    pub executors: u64,
    /// Number of streams.
    pub streams: u64,
    /// Whether generation stopped at [`ExpandOptions::limit`].
    pub truncated: bool,
}

/// One generated task.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ExpandedTask {
    /// Index into [`Module::kernels`] of the kernel that runs (after choosing a tier).
    pub kernel: u32,
    /// Index into [`Module::kernels`] of the kernel the task statement named (differs from
    /// `kernel` when that kernel has tiers).
    pub declared: u32,
    /// Scalar arguments, in parameter order.
    pub params: Vec<Value>,
    /// Region arguments, in parameter order.
    pub regions: Vec<ExpandedRegion>,
    /// Pool the task runs in.
    pub pool: ExecPool,
    /// Executor the dispatch policy chose; `None` under `work_steal`.
    pub target: Option<u32>,
    /// Stream.
    pub stream: u32,
    /// Ready-queue priority key under `ready priority(EXPR)` (higher first); 0 otherwise.
    pub priority: i64,
    /// Cycle cost under `trace cycles(EXPR)` (negative values count as 0); `None` otherwise
    /// (the kernel's own cost function decides under `trace cycles`).
    pub cost: Option<u64>,
    /// Where its `task` statement is written ([`Loc::NONE`] when not known, e.g. a module built
    /// without text); like every [`Loc`], never part of equality.
    pub loc: Loc,
}

/// A region argument with every expression evaluated.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ExpandedRegion {
    /// Index into [`Module::tensors`].
    pub tensor: u32,
    /// How the kernel uses it.
    pub access: Access,
    /// First index per dimension.
    pub start: Vec<i64>,
    /// Size per dimension.
    pub size: Vec<i64>,
}

/// Every task in `before` precedes every task in `after`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OrderEdge {
    /// Earlier tasks (indices into [`Expansion::tasks`]).
    pub before: Range<u32>,
    /// Later tasks.
    pub after: Range<u32>,
}

/// Order tracking of a `for_each` loop or a `sequential` block, shared by every generator of the
/// order edges (the reference expander and the bytecode interpreter): the range of the last
/// non-empty child and where the current child started.
#[derive(Clone, Debug)]
pub struct OrderTrack {
    start: u32,
    prev: Option<Range<u32>>,
}

impl OrderTrack {
    /// Tracking that starts at task index `now`.
    pub fn new(now: u32) -> OrderTrack {
        OrderTrack {
            start: now,
            prev: None,
        }
    }

    /// The current child ends at `now`; the next one starts there. A non-empty child closes
    /// the edge into it (announced when its first task was emitted) by passing it to `order`,
    /// and arms the edge from it into the next child (pushed on `armed`).
    pub fn boundary(
        &mut self,
        now: u32,
        order: impl FnOnce(OrderEdge),
        armed: &mut Vec<Range<u32>>,
    ) {
        if now > self.start {
            let cur = self.start..now;
            if let Some(before) = self.prev.replace(cur.clone()) {
                order(OrderEdge {
                    before,
                    after: cur.clone(),
                });
            }
            armed.push(cur);
        }
        self.start = now;
    }

    /// The tracked frame ends (right after an [`OrderTrack::boundary`]): no child follows, so
    /// the edge armed from the last non-empty child lapses.
    pub fn end(&self, armed: &mut Vec<Range<u32>>) {
        if let Some(prev) = &self.prev
            && let Some(i) = armed.iter().rposition(|b| b == prev)
        {
            armed.remove(i);
        }
    }
}

/// Why an expansion failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    /// The entry point could not be resolved (names, arity, recursion, types, schedule): see
    /// [`ResolveError`], shared by every consumer of [`crate::resolve`](mod@crate::resolve).
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    /// A request that does not fit the module (a process index out of range, ...).
    #[error("malformed request: {message}")]
    Malformed {
        /// What is wrong.
        message: String,
    },
    /// The bindings do not fit (a missing symbol or array, a value of the wrong type): see
    /// [`BindingError`], shared with every other consumer of a resolved program.
    #[error(transparent)]
    Binding(#[from] BindingError),
    /// A bound array has fewer elements than needed.
    #[error("tensor `{tensor}` is bound to {len} element(s), {needed} needed")]
    ArrayTooShort {
        /// The tensor.
        tensor: String,
        /// How many elements were needed.
        needed: u64,
        /// How many are bound.
        len: usize,
    },
    /// A negative loop extent, row count, row length or tensor dimension.
    #[error("{what} is negative ({value})")]
    NegativeLength {
        /// What was negative.
        what: String,
        /// Its value.
        value: i64,
    },
    /// A CSR `indptr` array that is not `OUTER + 1` non-decreasing offsets into the indices.
    #[error("bad sparse indptr `{tensor}`: {message}")]
    BadIndptr {
        /// The indptr tensor.
        tensor: String,
        /// What is wrong.
        message: String,
    },
    /// A task region outside its tensor.
    #[error(
        "task #{task} (`{kernel}`): argument `{param}` region of `{tensor}` is out of bounds in \
         dimension {dim}: start {start}, size {size}, extent {extent}"
    )]
    RegionOutOfBounds {
        /// Index of the task.
        task: u32,
        /// The kernel the task statement names.
        kernel: String,
        /// The kernel parameter.
        param: String,
        /// The tensor.
        tensor: String,
        /// The offending dimension.
        dim: usize,
        /// Start in that dimension.
        start: i64,
        /// Size in that dimension.
        size: i64,
        /// The tensor's extent in that dimension.
        extent: i64,
    },
    /// A `load` index outside the tensor's shape.
    #[error(
        "load from `{tensor}`: index {index} is out of bounds in dimension {dim} (extent {extent})"
    )]
    LoadOutOfBounds {
        /// The tensor.
        tensor: String,
        /// The dimension.
        dim: usize,
        /// The index.
        index: i64,
        /// The extent.
        extent: i64,
        /// The `load` statement.
        loc: Loc,
    },
    /// An expression failed to evaluate.
    #[error("evaluating {context}: {source}")]
    Eval {
        /// What was being evaluated, and where.
        context: String,
        /// Why it failed.
        source: EvalError,
    },
    /// A value of the wrong type where a specific type is needed.
    #[error("{context}: expected {expected}, found a {found}")]
    WrongType {
        /// What was being evaluated, and where.
        context: String,
        /// The expected type.
        expected: String,
        /// The value's type.
        found: ScalarType,
    },
    /// Every unfinished CSP process waits on an empty open channel.
    #[error(
        "deadlock: {}",
        waiting.iter().map(|(p, c)| format!("process `{p}` waits on channel `{c}`"))
            .collect::<Vec<_>>().join(", ")
    )]
    Deadlock {
        /// `(process, channel)` for every waiting process.
        waiting: Vec<(String, String)>,
    },
    /// A computed read (of a tensor tasks of the run write) that the consumer cannot serve:
    /// the plain expander runs no task, so it has no computed value to give.
    #[error("the generator reads tensor `{tensor}`, which tasks of the run write: {reason}")]
    ComputedRead {
        /// The tensor.
        tensor: String,
        /// Why the read could not be served.
        reason: String,
        /// The statement that reads it.
        loc: Loc,
    },
    /// An error of a ragged or sparse axis over computed arrays (a row length, an indptr),
    /// at the loop statement that reads them.
    #[error("{error}")]
    AtRead {
        /// The error.
        error: Box<ExpandError>,
        /// The loop statement.
        loc: Loc,
    },
    /// An error with no place of its own, at the statement that was executing when it
    /// happened (see [`ExpandError::at`]).
    #[error("{error}")]
    At {
        /// The error.
        error: Box<ExpandError>,
        /// The statement.
        loc: Loc,
    },
    /// More than `u32::MAX` tasks.
    #[error("more than 2^32 - 1 tasks")]
    TooManyTasks,
    /// [`expand`] keeps every task in memory and stops past [`MAX_KEPT_TASKS`].
    #[error(
        "the expansion generates more than {limit} tasks, the most the reference expander keeps in memory (`run` streams them instead)"
    )]
    TooManyToKeep {
        /// [`MAX_KEPT_TASKS`].
        limit: usize,
    },
}

impl ExpandError {
    /// `self`, placed at statement `loc` unless it has a place already: every error of a
    /// running statement (an expression that fails, a negative extent, an index out of range)
    /// is reported at the statement's `file:line:column`.
    #[cold]
    pub fn at(self, loc: Loc) -> ExpandError {
        if self.loc().is_known() || !loc.is_known() {
            self
        } else {
            ExpandError::At {
                error: Box::new(self),
                loc,
            }
        }
    }
}

impl Diagnostic for ExpandError {
    fn loc(&self) -> Loc {
        match self {
            ExpandError::Resolve(e) => e.loc(),
            ExpandError::Binding(e) => e.loc(),
            ExpandError::ComputedRead { loc, .. }
            | ExpandError::LoadOutOfBounds { loc, .. }
            | ExpandError::AtRead { loc, .. }
            | ExpandError::At { loc, .. } => *loc,
            _ => Loc::NONE,
        }
    }

    fn label(&self) -> Option<String> {
        match self {
            ExpandError::Binding(e) => e.label(),
            ExpandError::ComputedRead { .. } => Some("computed read".into()),
            _ => None,
        }
    }
}

/// A computed read: the generator needs the contents of a box of a tensor that tasks of the
/// run write (`docs/SEMANTICS.md`, "Computed reads").
#[derive(Clone, Copy, Debug)]
pub struct DataRead<'a> {
    /// Index into [`Module::tensors`] (an integer tensor).
    pub tensor: u32,
    /// First index per dimension.
    pub start: &'a [i64],
    /// Size per dimension (the box lies inside the tensor's evaluated shape).
    pub size: &'a [i64],
    /// The statement that reads it.
    pub loc: Loc,
}

/// Why a sink did not serve a [`DataRead`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadRefused {
    /// The consumer does not run tasks, or cannot read this tensor (the reason says which).
    Unsupported(String),
    /// The run stopped (a task failed, the consumer was cancelled): end the expansion quietly,
    /// as when [`ExpandSink::task`] breaks.
    Stopped,
}

/// The most tasks [`expand`] collects into an [`Expansion`] (a few hundred bytes each):
/// past it, it stops with [`ExpandError::TooManyToKeep`] instead of exhausting memory.
/// Streaming consumers ([`expand_with`], [`expand_each`]) have no such limit.
pub const MAX_KEPT_TASKS: usize = 1 << 20;

/// Receives the expansion as it is generated (see [`expand_with`]).
///
/// # What a streaming consumer may rely on
///
/// Calls arrive in one sequence: tasks in index order, each structural order edge once through
/// [`ExpandSink::order`], and, before it, its announcement through [`ExpandSink::order_begin`].
///
/// - **One announcement per edge.** For every `order(OrderEdge { before, after })` there is
///   exactly one earlier `order_begin(before, after.start)`, and no other `order_begin` calls.
///   It comes after every task of `before` and before `task(after.start, ..)`.
/// - **The interval is the `after` range.** Every task passed to [`ExpandSink::task`] after
///   `order_begin(b, s)` and before its matching `order(..)` is in the `after` range, and every
///   task of the `after` range is passed in that interval. So a consumer that makes every task
///   it receives wait for every announcement still open applies each edge exactly, without
///   knowing where `after` ends.
/// - **Matching.** The matching `order` is the first later one whose `before` equals `b` and
///   whose `after.start` equals `s`. Two announcements open at once with the same `(b, s)` say
///   the same thing about the tasks that follow, so a consumer may close either.
/// - **Nesting.** In a workload (one sequential program) announcements nest: the one opened
///   last closes first (loops and blocks are nested, and a CSP-style single-task edge never
///   occurs). In a pipeline each process's own announcements nest the same way, but the
///   `for_each` / `sequential` announcements of different processes may interleave, because
///   processes run in turns; the single-task CSP edges of task `i` (the process's previous task,
///   the producers of the channel tokens its iteration consumes) are announced right before
///   `task(i, ..)` and closed right after it, innermost.
/// - **Truncation** by [`ExpandOptions::limit`]: edges are clipped at the limit (see
///   [`expand`]), and every announcement is still closed by its clipped edge before
///   [`expand_with`] returns. Nothing is announced for a range with no task.
/// - **Stopping.** When [`ExpandSink::task`] returns [`ControlFlow::Break`], nothing more is
///   called: announcements open at that point are never closed.
/// - On an error, the calls so far stand and nothing more is called.
pub trait ExpandSink {
    /// A task; `index` is its position in generation order. The reference is only valid for
    /// the call (the expander reuses the buffer). [`ControlFlow::Break`] stops the expansion at
    /// once: [`expand_with`] then returns with [`ExpandSummary::stopped`] set.
    fn task(&mut self, index: u32, task: &ExpandedTask) -> ControlFlow<()>;
    /// A structural order edge; emitted once both its ranges are complete (see the trait docs
    /// for how it relates to [`ExpandSink::order_begin`]).
    fn order(&mut self, edge: OrderEdge);
    /// Announces a structural order edge before its `after` range starts: the edge that a later
    /// [`ExpandSink::order`] reports has `before` as its earlier range and starts its later
    /// range at task `after_start`, which comes next. See the trait docs for the guarantees.
    /// The default ignores it.
    fn order_begin(&mut self, before: Range<u32>, after_start: u32) {
        let _ = (before, after_start);
    }
    /// Serves a computed read: appends to `out` the elements of the box `read` describes, in
    /// row-major order, as they are once every task already passed to [`ExpandSink::task`]
    /// that writes an overlapping box has completed (a sink that runs tasks waits on those
    /// producers here). Called only for tensors tasks of the entry write; reads of host-bound
    /// tensors never come here. The default refuses: a consumer that does not run tasks has no
    /// computed value to give.
    fn read(&mut self, read: &DataRead<'_>, out: &mut Vec<i64>) -> Result<(), ReadRefused> {
        let _ = (read, out);
        Err(ReadRefused::Unsupported(
            "the reference expander runs no task, so it cannot see computed values; run the \
             module (the sequential reference run, `pto_wsp::cpu::sequential`, or a back end)"
                .into(),
        ))
    }
}

/// What a streaming expansion reports at the end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpandSummary {
    /// Number of tasks generated (passed to the sink, including one whose
    /// [`ExpandSink::task`] stopped the expansion).
    pub tasks: u32,
    /// Number of executors dispatch targets range over.
    pub executors: u64,
    /// Number of streams.
    pub streams: u64,
    /// Whether generation stopped at [`ExpandOptions::limit`].
    pub truncated: bool,
    /// Whether the sink stopped the expansion ([`ExpandSink::task`] returned
    /// [`ControlFlow::Break`]).
    pub stopped: bool,
    /// How many `while` loops ended because they reached their `max` bound with their
    /// condition still true (not an error).
    pub loops_at_max: u64,
    /// How many computed reads the generator made ([`ExpandSink::read`] calls).
    pub computed_reads: u64,
}

/// The standard SplitMix64 mixer (Steele, Lea, Flood; as in `java.util.SplittableRandom`): adds
/// the golden-ratio increment, then two xor-shift-multiply rounds and a final xor-shift. The
/// `hash(e)` dispatch policy sends a task to `splitmix64(e as u64) mod executors`.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Enumerates the tasks of the resolved entry point `res` under `bindings`.
pub fn expand(
    res: &Resolved,
    bindings: &Bindings,
    options: &ExpandOptions,
) -> Result<Expansion, ExpandError> {
    struct Collect {
        tasks: Vec<ExpandedTask>,
        order: Vec<OrderEdge>,
        /// A task past [`MAX_KEPT_TASKS`] was generated.
        overflow: bool,
    }
    impl ExpandSink for Collect {
        fn task(&mut self, _index: u32, task: &ExpandedTask) -> ControlFlow<()> {
            if self.tasks.len() >= MAX_KEPT_TASKS {
                self.overflow = true;
                return ControlFlow::Break(());
            }
            self.tasks.push(task.clone());
            ControlFlow::Continue(())
        }
        fn order(&mut self, edge: OrderEdge) {
            self.order.push(edge);
        }
    }
    let mut sink = Collect {
        tasks: Vec::new(),
        order: Vec::new(),
        overflow: false,
    };
    let summary = expand_with(res, bindings, options, &mut sink)?;
    if sink.overflow {
        return Err(ExpandError::TooManyToKeep {
            limit: MAX_KEPT_TASKS,
        });
    }
    Ok(Expansion {
        tasks: sink.tasks,
        order: sink.order,
        executors: summary.executors,
        streams: summary.streams,
        truncated: summary.truncated,
    })
}

/// Like [`expand`], but hands every task and order edge to `sink` as it is generated instead of
/// storing them, announcing each order edge before its later range starts (see [`ExpandSink`]);
/// the sink may stop the expansion.
pub fn expand_with(
    res: &Resolved,
    bindings: &Bindings,
    options: &ExpandOptions,
    sink: &mut impl ExpandSink,
) -> Result<ExpandSummary, ExpandError> {
    let program = compile::compile(res, bindings, options.executors)?;
    let mut runner = run::Runner::new(&program, options.limit, sink);
    let tasks = runner.run()?;
    Ok(ExpandSummary {
        tasks,
        executors: program.executors,
        streams: program.streams,
        truncated: runner.truncated,
        stopped: runner.stopped,
        loops_at_max: runner.loops_at_max,
        computed_reads: runner.computed_reads,
    })
}

/// The channels of a pipeline process that runs alone ([`expand_process`]): a CSP runtime's
/// bounded, blocking channels.
///
/// Channels are numbered in their pipeline's declaration order. A process only sends on the
/// channels it `produces` and consumes those it `consumes`; closing the channels a process
/// produces when it ends is the caller's job (it knows when [`expand_process`] returns).
pub trait ChannelPort {
    /// Sends `value` on `channel`, waiting while the channel is full.
    /// [`ControlFlow::Break`] stops the process (the run failed elsewhere, or deadlocked).
    fn send(&mut self, channel: u32, value: Value) -> ControlFlow<()>;
    /// The next token of `channel` in send order, waiting while the channel is empty and open;
    /// `None` once it is closed and drained. [`ControlFlow::Break`] stops the process.
    fn recv(&mut self, channel: u32) -> ControlFlow<(), Option<Value>>;
}

/// Runs one process (index `process` into the pipeline entry's processes, in declaration
/// order) of the resolved pipeline `res` as a sequential program on its own: tasks go to `sink` as they
/// are generated, numbered from 0 within the process (so the index-based schedule decisions —
/// `round_robin` targets, streams without `stream_by` — count this process's tasks); `send` and
/// `consume` go through `port`, which may block. Statements mean what they mean in [`expand`];
/// the process has its own copy of every slot (starting from the bound values), and no CSP order
/// edges are reported (the caller's channels carry that order). A workload entry is its single
/// process 0, with no channels. When the port or the sink stops the process, the summary says
/// [`ExpandSummary::stopped`].
pub fn expand_process(
    res: &Resolved,
    bindings: &Bindings,
    options: &ExpandOptions,
    process: usize,
    port: &mut dyn ChannelPort,
    sink: &mut impl ExpandSink,
) -> Result<ExpandSummary, ExpandError> {
    let program = compile::compile(res, bindings, options.executors)?;
    let mut runner = run::Runner::new(&program, options.limit, sink);
    let tasks = runner.run_alone(process, port)?;
    Ok(ExpandSummary {
        tasks,
        executors: program.executors,
        streams: program.streams,
        truncated: runner.truncated,
        stopped: runner.stopped,
        loops_at_max: runner.loops_at_max,
        computed_reads: runner.computed_reads,
    })
}

/// Like [`expand`], but calls `f(index, task)` for every task as it is generated, storing
/// nothing (order edges are not reported; use [`expand_with`] for those).
pub fn expand_each(
    res: &Resolved,
    bindings: &Bindings,
    options: &ExpandOptions,
    f: impl FnMut(u32, &ExpandedTask),
) -> Result<ExpandSummary, ExpandError> {
    struct Each<F>(F);
    impl<F: FnMut(u32, &ExpandedTask)> ExpandSink for Each<F> {
        fn task(&mut self, index: u32, task: &ExpandedTask) -> ControlFlow<()> {
            (self.0)(index, task);
            ControlFlow::Continue(())
        }
        fn order(&mut self, _edge: OrderEdge) {}
    }
    expand_with(res, bindings, options, &mut Each(f))
}

impl Expansion {
    /// Number of tasks per kernel that runs (index into [`Module::kernels`]).
    pub fn kernel_counts(&self) -> BTreeMap<u32, usize> {
        let mut m = BTreeMap::new();
        for t in &self.tasks {
            *m.entry(t.kernel).or_insert(0) += 1;
        }
        m
    }

    /// Number of tasks per target executor (`None`: no fixed executor, `work_steal`).
    pub fn executor_counts(&self) -> BTreeMap<Option<u32>, usize> {
        let mut m = BTreeMap::new();
        for t in &self.tasks {
            *m.entry(t.target).or_insert(0) += 1;
        }
        m
    }

    /// One line describing task `index`, e.g.
    /// `#12 attn[attn_2k] q=Q[0+:32, 128+:128] n=7 target 3 stream 0 pool vector`
    /// (`attn[attn_2k]`: the task named `attn`, whose tiers chose `attn_2k`). Region dimensions
    /// of size 1 print as the bare index. Never panics: an index out of range, or a module
    /// that does not match, gives a line saying so.
    pub fn describe_task(&self, module: &Module, index: usize) -> String {
        let Some(t) = self.tasks.get(index) else {
            return format!("#{index} (no such task; {} tasks)", self.tasks.len());
        };
        let kname = |k: u32| {
            module
                .kernels
                .get(k as usize)
                .map_or_else(|| format!("<kernel {k}>"), |d| d.name.name.clone())
        };
        let mut s = format!("#{index} {}", kname(t.declared));
        if t.kernel != t.declared {
            let _ = write!(s, "[{}]", kname(t.kernel));
        }
        let mut params = t.params.iter();
        let mut regions = t.regions.iter();
        let write_region = |s: &mut String, r: &ExpandedRegion| {
            let tname = module
                .tensors
                .get(r.tensor as usize)
                .map_or_else(|| format!("<tensor {}>", r.tensor), |d| d.name.name.clone());
            let dims: Vec<String> = r
                .start
                .iter()
                .zip(&r.size)
                .map(|(a, z)| {
                    if *z == 1 {
                        a.to_string()
                    } else {
                        format!("{a}+:{z}")
                    }
                })
                .collect();
            let _ = write!(s, "{tname}[{}]", dims.join(", "));
        };
        if let Some(decl) = module.kernels.get(t.declared as usize) {
            for p in &decl.params {
                match p.kind {
                    ParamKind::Tile { .. } => {
                        if let Some(r) = regions.next() {
                            let _ = write!(s, " {}=", p.name);
                            write_region(&mut s, r);
                        }
                    }
                    ParamKind::Scalar(_) => {
                        if let Some(v) = params.next() {
                            let _ = write!(s, " {}={v}", p.name);
                        }
                    }
                }
            }
        }
        // Anything the declaration did not account for.
        for r in regions {
            s.push(' ');
            write_region(&mut s, r);
        }
        for v in params {
            let _ = write!(s, " {v}");
        }
        match t.target {
            Some(e) => {
                let _ = write!(s, " target {e}");
            }
            None => s.push_str(" target -"),
        }
        let _ = write!(s, " stream {} pool {}", t.stream, t.pool);
        s
    }
}
