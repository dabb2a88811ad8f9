//! The schedule: *how* the tasks a workload generates are run, decided apart from *what* they are
//! (the on-device generation, PDE, concurrency-mechanisms and back-end architecture
//! specifications).
//!
//! A [`Schedule`] is a list of items as written, so that the validator can report a duplicate or
//! a bad combination where it stands; [`Schedule::config`] folds the items into a
//! [`ScheduleConfig`] with every default filled in, which is what back ends read.
//!
//! Schedule expressions (dispatch keys, stream keys, priorities, thresholds, cycle costs) are
//! evaluated once per task; they may name runtime symbols, slots, and loop variables or workload
//! parameters that are bound at *every* task of the entry workload.

use crate::expr::Expr;
use crate::loc::{Ident, Loc};
use crate::types::ExecPool;

/// `schedule for TARGET { ITEMS }`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Schedule {
    /// The entry workload or pipeline this schedule runs.
    pub target: Ident,
    /// The items, in written order.
    pub items: Vec<ScheduleItem>,
    /// Where the declaration was written.
    pub loc: Loc,
}

/// One schedule item with its location.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ScheduleItem {
    /// The item.
    pub kind: ScheduleItemKind,
    /// Where it was written.
    pub loc: Loc,
}

impl ScheduleItem {
    /// An item with no source location.
    pub fn new(kind: ScheduleItemKind) -> ScheduleItem {
        ScheduleItem {
            kind,
            loc: Loc::NONE,
        }
    }
}

/// The schedule items. Each may appear at most once (`task_graph` sub-items likewise).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ScheduleItemKind {
    /// `executors N;` — number of executors tasks are dispatched over (default: `n` of
    /// `round_robin(n)`, else the length of a `static_partition`, else 1).
    Executors(u64),
    /// `dispatch POLICY;` — which executor each task goes to.
    Dispatch(Dispatch),
    /// `streams N;` — number of streams (default 1).
    Streams(u64),
    /// `stream_by EXPR;` — stream of a task is `EXPR mod streams` (default: task index mod
    /// streams).
    StreamBy(Expr),
    /// `timing POLICY;` — when generated tasks are issued.
    Timing(Timing),
    /// `task_graph { ... }` — task-graph runtime policies.
    TaskGraph(Vec<TaskGraphItem>),
    /// `task_window N MODE;` — at most `N` tasks in flight.
    TaskWindow(u64, WindowMode),
    /// `pipeline_depth N SCOPE;` — at most `N` tasks issued and unfinished per scope.
    PipelineDepth(u64, GateScope),
    /// `batch_deps N;` — resolve completions in batches of `N`.
    BatchDeps(u64),
    /// `dispatch_threshold(EXPR) { below N: POOL, ..., else: POOL };` — route a task to a pool by
    /// a metric.
    DispatchThreshold(Levels<ExecPool>),
}

/// Multi-level choice by a metric: the first level whose bound is above the metric wins
/// (`below N: X` means `metric < N`); bounds strictly increase.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Levels<T> {
    /// The metric (an integer expression).
    pub metric: Expr,
    /// `(bound, choice)` pairs in increasing bound order.
    pub levels: Vec<(i64, T)>,
    /// The choice when the metric is at or above every bound.
    pub otherwise: Box<T>,
}

/// Dispatch policies (the on-device generation specification's dispatch configs).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Dispatch {
    /// `round_robin(n)`: task `i` (in generation order) goes to executor `i mod n`.
    RoundRobin(u64),
    /// `affinity(EXPR)`: executor `EXPR mod executors` (tasks with equal keys share an executor).
    Affinity(Expr),
    /// `hash(EXPR)`: executor `splitmix64(EXPR) mod executors`.
    Hash(Expr),
    /// `threshold(EXPR) { below N: POLICY, ..., else: POLICY }`: a policy per level of a metric.
    Threshold(Levels<Dispatch>),
    /// `static_partition(s0, s1, ...)`: executor `k` takes tasks with index in `[s_k, s_{k+1})`,
    /// the last executor everything from its start on. `s0` is 0; starts strictly increase.
    StaticPartition(Vec<u64>),
    /// `work_steal`: no fixed executor; idle executors take work from busy ones.
    WorkSteal,
}

/// Release timing (`pto_wsp_graph::timing`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Timing {
    /// `immediate`: issue each task as soon as it is ready.
    Immediate,
    /// `batched(n)`: issue in groups of `n`.
    Batched(u64),
    /// `interleaved(n)`: alternate between `n` outer-loop groups (the PDE specification's
    /// `PTO_ORDER`).
    Interleaved(u64),
    /// `rate_limit(n)`: at most `n` issues per scheduling round.
    RateLimit(u64),
}

/// One item of a `task_graph { ... }` block.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TaskGraphItem {
    /// `deps MODE;`
    Deps(DepsMode),
    /// `ready POLICY;`
    Ready(ReadyPolicy),
    /// `start POLICY;`
    Start(StartPolicy),
    /// `trace POLICY;`
    Trace(TracePolicy),
    /// `pools POLICY;`
    Pools(PoolsPolicy),
}

impl TaskGraphItem {
    /// The keyword introducing the item (for duplicate detection and messages).
    pub fn keyword(&self) -> &'static str {
        match self {
            TaskGraphItem::Deps(_) => "deps",
            TaskGraphItem::Ready(_) => "ready",
            TaskGraphItem::Start(_) => "start",
            TaskGraphItem::Trace(_) => "trace",
            TaskGraphItem::Pools(_) => "pools",
        }
    }
}

/// How dependencies are found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum DepsMode {
    /// `exact`: a read or write depends on earlier accesses to the *same* region key.
    #[default]
    Exact,
    /// `overlap`: on earlier accesses to any intersecting box.
    Overlap,
    /// `explicit`: only the structural orders (`for_each`, `sequential`, CSP); no inference.
    Explicit,
    /// `hybrid`: exact-key lookup first, overlap search when it misses (same edges as overlap).
    Hybrid,
}

/// Ready-queue policy.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum ReadyPolicy {
    /// `fifo`: ready tasks start in submission order.
    #[default]
    Fifo,
    /// `work_steal`: per-executor deques with stealing.
    WorkSteal,
    /// `priority(EXPR)`: higher value first.
    Priority(Expr),
}

/// When execution starts relative to graph building.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum StartPolicy {
    /// `after_orchestration`: build everything, then run.
    AfterOrchestration,
    /// `immediate`: run tasks as soon as they are built and ready.
    #[default]
    Immediate,
    /// `threshold(n)`: start once `n` tasks are built.
    Threshold(u64),
}

/// What is recorded while running.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum TracePolicy {
    /// `none`.
    #[default]
    None,
    /// `wall`: wall-clock start and end of every task.
    Wall,
    /// `cycles` or `cycles(EXPR)`: a simulated cycle cost per task (the expression, or each
    /// kernel's default cost function), giving a modelled makespan; with `device(NAME)` the
    /// device timeline model of machine NAME (a shipped machine description).
    Cycles(Option<Expr>, Option<Ident>),
}

/// How executors are grouped into pools.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum PoolsPolicy {
    /// `single`: one pool runs every kernel.
    #[default]
    Single,
    /// `by_exec_unit`: separate vector and cube pools.
    ByExecUnit,
}

/// What happens when the task window is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WindowMode {
    /// `stall`: the builder waits for space.
    Stall,
    /// `abort`: the run fails with an error naming the window.
    Abort,
    /// `benchmark`: count the overflow and continue.
    Benchmark,
}

/// Scope of an issue gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GateScope {
    /// `global`: one limit.
    Global,
    /// `per_stream`: one limit per stream.
    PerStream,
    /// `per_pool`: one limit per pool.
    PerPool,
}

crate::types::keyword_impl!(DepsMode { Exact = "exact", Overlap = "overlap", Explicit = "explicit", Hybrid = "hybrid" });
crate::types::keyword_impl!(PoolsPolicy { Single = "single", ByExecUnit = "by_exec_unit" });
crate::types::keyword_impl!(WindowMode { Stall = "stall", Abort = "abort", Benchmark = "benchmark" });
crate::types::keyword_impl!(GateScope { Global = "global", PerStream = "per_stream", PerPool = "per_pool" });

/// Every schedule decision with defaults filled in: what back ends read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleConfig {
    /// Number of executors dispatch targets range over.
    pub executors: u64,
    /// Dispatch policy (default `round_robin(executors)`).
    pub dispatch: Dispatch,
    /// Number of streams.
    pub streams: u64,
    /// Stream key (default: task index).
    pub stream_by: Option<Expr>,
    /// Issue timing.
    pub timing: Timing,
    /// Dependency mode.
    pub deps: DepsMode,
    /// Ready policy.
    pub ready: ReadyPolicy,
    /// Start policy.
    pub start: StartPolicy,
    /// Trace policy.
    pub trace: TracePolicy,
    /// Pools policy.
    pub pools: PoolsPolicy,
    /// Task window, if any.
    pub task_window: Option<(u64, WindowMode)>,
    /// Issue gate, if any.
    pub pipeline_depth: Option<(u64, GateScope)>,
    /// Dependency batching threshold (default 1: no batching).
    pub batch_deps: u64,
    /// Pool routing by metric, if any.
    pub dispatch_threshold: Option<Levels<ExecPool>>,
}

impl Default for ScheduleConfig {
    fn default() -> ScheduleConfig {
        ScheduleConfig {
            executors: 1,
            dispatch: Dispatch::RoundRobin(1),
            streams: 1,
            stream_by: None,
            timing: Timing::Immediate,
            deps: DepsMode::default(),
            ready: ReadyPolicy::default(),
            start: StartPolicy::default(),
            trace: TracePolicy::default(),
            pools: PoolsPolicy::default(),
            task_window: None,
            pipeline_depth: None,
            batch_deps: 1,
            dispatch_threshold: None,
        }
    }
}

impl Schedule {
    /// Folds the items into a [`ScheduleConfig`]. A later duplicate overrides an earlier one (the
    /// validator rejects duplicates; this never fails).
    pub fn config(&self) -> ScheduleConfig {
        let mut c = ScheduleConfig::default();
        let mut executors = None;
        let mut dispatch = None;
        for item in &self.items {
            match &item.kind {
                ScheduleItemKind::Executors(n) => executors = Some(*n),
                ScheduleItemKind::Dispatch(d) => dispatch = Some(d.clone()),
                ScheduleItemKind::Streams(n) => c.streams = *n,
                ScheduleItemKind::StreamBy(e) => c.stream_by = Some(e.clone()),
                ScheduleItemKind::Timing(t) => c.timing = *t,
                ScheduleItemKind::TaskGraph(items) => {
                    for it in items {
                        match it {
                            TaskGraphItem::Deps(d) => c.deps = *d,
                            TaskGraphItem::Ready(r) => c.ready = r.clone(),
                            TaskGraphItem::Start(s) => c.start = *s,
                            TaskGraphItem::Trace(t) => c.trace = t.clone(),
                            TaskGraphItem::Pools(p) => c.pools = *p,
                        }
                    }
                }
                ScheduleItemKind::TaskWindow(n, m) => c.task_window = Some((*n, *m)),
                ScheduleItemKind::PipelineDepth(n, s) => c.pipeline_depth = Some((*n, *s)),
                ScheduleItemKind::BatchDeps(n) => c.batch_deps = *n,
                ScheduleItemKind::DispatchThreshold(l) => c.dispatch_threshold = Some(l.clone()),
            }
        }
        c.executors = executors
            .or(match &dispatch {
                Some(Dispatch::RoundRobin(n)) => Some(*n),
                Some(Dispatch::StaticPartition(starts)) => Some(starts.len() as u64),
                _ => None,
            })
            .unwrap_or(1)
            .max(1);
        c.dispatch = dispatch.unwrap_or(Dispatch::RoundRobin(c.executors));
        c
    }
}

/// The largest values the schedule's sizes may take: each sizes something a runtime allocates
/// (per executor, per batched dependency, per task in flight, per channel token), so each is
/// checked by the validator before anything is allocated.
pub mod limits {
    /// `executors N` (and the command line's `--executors`): per-executor state.
    pub const EXECUTORS: u64 = 1 << 16;
    /// `streams N`: per-stream gates.
    pub const STREAMS: u64 = 1 << 16;
    /// `batch_deps N`: dependencies held back per batch.
    pub const BATCH_DEPS: u64 = 1 << 16;
    /// `task_window N`: tasks in flight.
    pub const TASK_WINDOW: u64 = 1 << 24;
    /// `pipeline_depth N`: tasks in flight per scope.
    pub const PIPELINE_DEPTH: u64 = 1 << 24;
    /// The depth of a CSP channel `channel c[N]`: tokens held.
    pub const CHANNEL_DEPTH: u64 = 1 << 20;
}
