//! Resolution: a module's entry point as one resolved program that every consumer reads.
//!
//! Why: the reference expander, the bytecode encoder and every back end to come (Ascend
//! orchestration code, the task-graph ISA, AIE MLIR) need the same work done on a [`Module`]
//! before they can do their own: names resolved, calls inlined, expressions typed and folded,
//! the schedule folded into its per-task keys, and every check that needs no runtime value. It
//! is done once, here, so every consumer resolves names by the same rules and reports the same
//! mistakes the same way; a back end only adds what is particular to its target.
//!
//! Promises:
//! - [`resolve`] never panics, on any module (validated or not): a name that means nothing where
//!   it stands, a wrong number of arguments or loop variables, a call cycle, an ill-typed
//!   expression, a bad schedule setting, … is a [`ResolveError`] naming the thing, with the
//!   source location of the statement it is in (when the module was parsed from text).
//! - Bindings are not needed: the result serves every sequence length and every bound array.
//! - Tables are arenas indexed by typed ids ([`TensorId`], [`KernelId`], [`AxisId`],
//!   [`ChannelId`], [`ExprId`]); every variable of the inlined program (loop, `consume`, call
//!   parameter) is its own register, numbered after the symbols and slots in program order.
//! - Which symbols and tensors count as *used* (so must be bound) is decided here, once.
//! - A program is resolved once: the facade's `lower` is the one caller of [`resolve`] on the
//!   way from a module to a run or an artefact, and every consumer (the expander, the bytecode
//!   encoder, every back end, the front ends) reads that [`Resolved`]. The feature
//!   `resolution-count` counts resolutions ([`resolutions`]) so a test can hold that true.
//!
//! Kernel bodies are resolved here too, one kernel at a time ([`body::resolve_body`]), and a
//! plan's `generate` block once per run ([`generate::resolve_generator`]): every reader of a
//! body (the cycle model, the CPU executor, the emitters) and the plan generator read the slot
//! form.
//!
//! How: see `walk.rs` (the one pass over the entry point), `texpr.rs` (typed expressions),
//! `body.rs` (kernel bodies) and `generate.rs` (plan generators).

mod bind;
pub mod body;
#[cfg(feature = "resolution-count")]
mod count;
pub mod generate;
mod texpr;
mod walk;

#[cfg(feature = "resolution-count")]
pub use count::resolutions;

pub use bind::{BindingError, array_value, slot_value, symbol_value};
pub use body::resolve_body;
pub use texpr::{Reg, TExpr};
pub use walk::resolve;

use crate::loc::Loc;
use crate::module::Module;
use crate::schedule::ScheduleConfig;
use crate::source::Diagnostic;
use crate::types::{Access, ExecPool, ScalarType};

macro_rules! typed_id {
    ($(#[$doc:meta] $name:ident),* $(,)?) => {$(
        #[$doc]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub u32);

        impl $name {
            /// The index as a `usize`.
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }
    )*};
}

typed_id! {
    /// Index into [`Module::tensors`].
    TensorId,
    /// Index into [`Module::kernels`].
    KernelId,
    /// Index into [`Resolved::axes`] (axes in order of first use).
    AxisId,
    /// Index into [`Resolved::channels`] (a pipeline's channels in declaration order).
    ChannelId,
    /// Index into [`Resolved::exprs`].
    ExprId,
}

/// Options of [`resolve`].
#[derive(Clone, Copy, Debug, Default)]
pub struct ResolveOptions {
    /// Override the schedule's executor count.
    pub executors: Option<u64>,
}

/// A module's entry point, resolved (see the module docs).
#[derive(Clone, Debug)]
pub struct Resolved {
    /// The module (declarations: tensor types, kernel parameters and pools, names), as it was
    /// resolved.
    pub module: Module,
    /// The entry point's name.
    pub entry: String,
    /// Whether the entry is a pipeline.
    pub csp: bool,
    /// The processes: a workload entry is one process with no channels.
    pub processes: Vec<Process>,
    /// The channels of a pipeline entry.
    pub channels: Vec<Channel>,
    /// The type of every register: symbols, then slots, then variables.
    pub regs: Vec<ScalarType>,
    /// Per symbol: whether the entry can read it (then it must be bound).
    pub symbols_used: Vec<bool>,
    /// Axes the entry iterates, in order of first use.
    pub axes: Vec<Axis>,
    /// Per tensor: its dimensions (over symbols only) when a region or `load` uses it.
    pub shapes: Vec<Option<Vec<ExprId>>>,
    /// Per tensor: whether the entry reads its contents (a ragged or sparse axis, `load`).
    pub arrays: Vec<bool>,
    /// Per tensor: where the entry first reads its contents ([`Loc::NONE`] when it does not).
    pub array_reads: Vec<Loc>,
    /// Per tensor: whether a task of the entry writes it (`out` / `inout`). A read of such a
    /// tensor's contents is a *computed read*: it sees the values the run's earlier tasks
    /// wrote, so only a consumer that runs the tasks can serve it (`docs/SEMANTICS.md`).
    pub written: Vec<bool>,
    /// Per kernel: its tiers, when a task names it and it has some.
    pub tiers: Vec<Option<Tiers>>,
    /// Per kernel: whether a task names it or a tier chooses it.
    pub kernels_used: Vec<bool>,
    /// The schedule, folded.
    pub schedule: Sched,
    /// Every expression, with what it is for messages.
    pub exprs: Vec<ExprInfo>,
    /// Number of task statements ([`Task::id`] is below it).
    pub n_tasks: u32,
}

/// An expression of the arena.
#[derive(Clone, Debug)]
pub struct ExprInfo {
    /// The typed tree.
    pub expr: TExpr,
    /// What it is and where, for messages ("the start of dimension 0 of argument `q` of task
    /// `attn` in workload `main`").
    pub what: String,
}

/// A process of the entry (a workload entry is a single process).
#[derive(Clone, Debug)]
pub struct Process {
    /// Its name (the workload's name for a workload entry).
    pub name: String,
    /// Its statements.
    pub body: Vec<Stmt>,
    /// The channels it closes when it ends.
    pub produces: Vec<ChannelId>,
    /// Where it was declared.
    pub loc: Loc,
}

/// A channel of a pipeline entry.
#[derive(Clone, Debug)]
pub struct Channel {
    /// Its name.
    pub name: String,
    /// Indices of the processes that list it in `produces`.
    pub producers: Vec<u32>,
    /// Indices of the processes that list it in `consumes`.
    pub consumers: Vec<u32>,
    /// Declared depth.
    pub depth: u64,
}

/// An axis the entry iterates.
#[derive(Clone, Debug)]
pub struct Axis {
    /// Its name.
    pub name: String,
    /// Its extent.
    pub kind: AxisExtent,
}

/// How far an axis goes.
#[derive(Clone, Debug)]
pub enum AxisExtent {
    /// `dense(E)` / `dense_dyn(E)`: `0..E`.
    Dense(ExprId),
    /// `ragged(ROWS, LENGTHS)`: rows `0..ROWS`, row `r` of length `LENGTHS[r]`;
    /// `ragged(ROWS, LENGTHS, EXPR)`: row `r` of length `EXPR` with `LENGTHS[r]` in a register.
    Ragged {
        /// The row count.
        rows: ExprId,
        /// The lengths tensor.
        lengths: TensorId,
        /// How a row's length follows from its element (`None`: it is the element).
        per_row: Option<RowLength>,
    },
    /// `sparse(ROWS, INDPTR, INDICES)`: CSR entries, iterated with `select`.
    Sparse {
        /// The row count.
        rows: ExprId,
        /// The CSR offsets.
        indptr: TensorId,
        /// The CSR index values.
        indices: TensorId,
    },
}

/// The length of a row of `ragged(ROWS, LENGTHS, EXPR)`: set register `element` to
/// `LENGTHS[r]`, then evaluate `length`.
#[derive(Clone, Copy, Debug)]
pub struct RowLength {
    /// The register the row's element is written to.
    pub element: Reg,
    /// The row's length (an integer expression of `element`, symbols and slots).
    pub length: ExprId,
}

/// A kernel's tiers: the first case whose condition (over the task's scalar arguments,
/// [`TExpr::Arg`], and symbols) holds chooses its variant, else the default.
#[derive(Clone, Debug)]
pub struct Tiers {
    /// `(condition, variant)` in order.
    pub cases: Vec<(ExprId, KernelId)>,
    /// The default variant.
    pub default: KernelId,
}

/// A resolved statement with the location of the statement it came from.
#[derive(Clone, Debug)]
pub struct Stmt {
    /// What it does.
    pub kind: StmtKind,
    /// Where it was written.
    pub loc: Loc,
}

/// The resolved statements.
#[derive(Clone, Debug)]
pub enum StmtKind {
    /// A loop over an axis: `parallel_for` / `for_each` over a dense or ragged axis (one or two
    /// variables), or `select` over a sparse axis (two variables, never ordered).
    Loop(Box<Loop>),
    /// `if`.
    If {
        /// A `bool` expression.
        cond: ExprId,
        /// Taken when it holds.
        then_body: Vec<Stmt>,
        /// Taken otherwise.
        else_body: Vec<Stmt>,
    },
    /// `while COND max MAX { }`: iterations ordered like `for_each`.
    While {
        /// A `bool` expression, evaluated before every iteration.
        cond: ExprId,
        /// The iteration bound (an integer, evaluated once when the loop starts).
        max: ExprId,
        /// The body.
        body: Vec<Stmt>,
    },
    /// `break if COND`: leaves the innermost enclosing `while` (never across a call or a
    /// `consume`).
    Break {
        /// A `bool` expression.
        cond: ExprId,
    },
    /// `combine` (unordered) or `sequential` (ordered) block.
    Block {
        /// Whether consecutive non-empty children are ordered.
        ordered: bool,
        /// The children.
        body: Vec<Stmt>,
    },
    /// One task.
    Task(Box<Task>),
    /// `set SLOT = EXPR` (the expression has the slot's type).
    Set {
        /// The slot's register.
        slot: Reg,
        /// The value.
        value: ExprId,
    },
    /// `load SLOT = TENSOR[..]` (an integer slot).
    Load {
        /// The slot's register.
        slot: Reg,
        /// The integer tensor.
        tensor: TensorId,
        /// One integer expression per dimension.
        index: Vec<ExprId>,
    },
    /// An inlined `call`: the arguments are written to the callee's parameter registers
    /// (evaluated in the caller, in order), then the callee's body runs.
    Call {
        /// The callee.
        workload: String,
        /// `(parameter register, argument)` (the argument has the parameter's type).
        args: Vec<(Reg, ExprId)>,
        /// The callee's body.
        body: Vec<Stmt>,
    },
    /// `send CHANNEL(EXPR)` (an integer).
    Send {
        /// The channel.
        channel: ChannelId,
        /// The token.
        value: ExprId,
    },
    /// `consume CHANNEL as v { }` (`v` is an `i64` register).
    Consume {
        /// The channel.
        channel: ChannelId,
        /// The variable's register.
        var: Reg,
        /// The body.
        body: Vec<Stmt>,
    },
}

/// A loop.
#[derive(Clone, Debug)]
pub struct Loop {
    /// `for_each` (iterations ordered) or not.
    pub ordered: bool,
    /// The axis.
    pub axis: AxisId,
    /// The loop variables' registers (`i64`): one for dense axes, two for ragged and sparse.
    pub vars: Vec<Reg>,
    /// The body.
    pub body: Vec<Stmt>,
}

/// A task statement.
#[derive(Clone, Debug)]
pub struct Task {
    /// Its number among the task statements of the resolved entry (inlined calls included),
    /// in program order from 0: an index for a consumer's per-task tables.
    pub id: u32,
    /// The kernel the statement names (its tiers, if any, choose the one that runs).
    pub kernel: KernelId,
    /// One argument per kernel parameter, in parameter order.
    pub args: Vec<TaskArg>,
    /// The schedule's per-task expressions resolved where the task stands, in the order of
    /// [`Sched`]'s key layout: dispatch keys, `stream_by`, the pool metric, the priority key,
    /// the cycle cost.
    pub keys: Vec<ExprId>,
}

/// A task argument.
#[derive(Clone, Debug)]
pub enum TaskArg {
    /// A scalar of the parameter's type.
    Scalar(ExprId),
    /// A region: `(start, size)` per dimension, no size meaning 1; integer expressions.
    Region {
        /// The tensor.
        tensor: TensorId,
        /// How the kernel uses it.
        access: Access,
        /// Per dimension.
        dims: Vec<(ExprId, Option<ExprId>)>,
    },
}

/// The schedule folded into what decides each task's placement.
#[derive(Clone, Debug)]
pub struct Sched {
    /// The schedule as written, with defaults filled in.
    pub config: ScheduleConfig,
    /// Executors dispatch targets range over (1 ..= 2^32).
    pub executors: u64,
    /// Streams (1 ..= 2^32).
    pub streams: u64,
    /// The dispatch policy with key slots for its expressions (`None` when no task exists).
    pub dispatch: Option<DispatchPlan>,
    /// How many leading task keys the dispatch policy reads.
    pub n_dispatch_keys: usize,
    /// Whether tasks carry a `stream_by` key.
    pub stream_by: bool,
    /// `dispatch_threshold` pool levels and the default pool; tasks carry its metric.
    pub pools: Option<(Vec<(i64, ExecPool)>, ExecPool)>,
    /// Whether tasks carry a `ready priority(EXPR)` key.
    pub priority: bool,
    /// Whether tasks carry a `trace cycles(EXPR)` cost.
    pub cost: bool,
}

/// Refuses an executor or stream count outside `1 ..= 2^32`.
pub(crate) fn check_count(what: &str, n: u64) -> Result<(), ResolveError> {
    if n == 0 || n > u64::from(u32::MAX) + 1 {
        return Err(ResolveError::BadSchedule {
            message: format!("{what} must be between 1 and 2^32, not {n}"),
        });
    }
    Ok(())
}

impl Sched {
    /// Whether tasks are placed on dispatch targets (any dispatch policy but `work_steal`; no
    /// task, nothing placed): the one reading of the `dispatch` directive for every runtime.
    pub fn placement(&self) -> bool {
        self.dispatch
            .as_ref()
            .is_some_and(|d| *d != DispatchPlan::WorkSteal)
    }

    /// Where the `stream_by` key is among a task's keys.
    pub fn stream_slot(&self) -> Option<usize> {
        self.stream_by.then_some(self.n_dispatch_keys)
    }

    /// Where the pool metric is among a task's keys.
    pub fn pool_slot(&self) -> Option<usize> {
        self.pools
            .is_some()
            .then_some(self.n_dispatch_keys + usize::from(self.stream_by))
    }

    /// Where the priority key is among a task's keys.
    pub fn priority_slot(&self) -> Option<usize> {
        self.priority.then_some(
            self.n_dispatch_keys + usize::from(self.stream_by) + usize::from(self.pools.is_some()),
        )
    }

    /// Where the cycle cost is among a task's keys.
    pub fn cost_slot(&self) -> Option<usize> {
        self.cost.then_some(
            self.n_dispatch_keys
                + usize::from(self.stream_by)
                + usize::from(self.pools.is_some())
                + usize::from(self.priority),
        )
    }

    /// How many keys every task carries.
    pub fn n_keys(&self) -> usize {
        self.n_dispatch_keys
            + usize::from(self.stream_by)
            + usize::from(self.pools.is_some())
            + usize::from(self.priority)
            + usize::from(self.cost)
    }
}

/// A dispatch policy whose expressions are slots into each task's keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DispatchPlan {
    /// The task index modulo `n`.
    RoundRobin(u64),
    /// Key `slot` modulo the executors.
    Affinity(u32),
    /// `splitmix64` of key `slot` modulo the executors.
    Hash(u32),
    /// The metric in key `slot` picks the first level whose bound is above it, else the default.
    Threshold(u32, Vec<(i64, DispatchPlan)>, Box<DispatchPlan>),
    /// Partition `k` starts at task index `starts[k]` (`starts[0] == 0`).
    StaticPartition(Vec<u64>),
    /// No fixed executor.
    WorkSteal,
}

impl DispatchPlan {
    /// Whether the plan never looks at the task index (a tree of `affinity`, `hash` and
    /// `threshold`).
    pub fn index_free(&self) -> bool {
        match self {
            DispatchPlan::Affinity(_) | DispatchPlan::Hash(_) => true,
            DispatchPlan::Threshold(_, levels, otherwise) => {
                levels.iter().all(|(_, d)| d.index_free()) && otherwise.index_free()
            }
            DispatchPlan::RoundRobin(_)
            | DispatchPlan::StaticPartition(_)
            | DispatchPlan::WorkSteal => false,
        }
    }
}

impl Resolved {
    /// The program with the executor and stream counts `executors` / `streams` where given
    /// (run-time options that override the schedule's `executors N;` / `streams N;`), checked
    /// as the schedule's are, meaning what the same item written last in the schedule means:
    /// without a `dispatch` item the default `round_robin` ranges over the new executor count.
    /// Nothing else depends on them, so nothing is resolved again.
    pub fn with_counts(
        mut self,
        executors: Option<u64>,
        streams: Option<u64>,
    ) -> Result<Resolved, ResolveError> {
        if let Some(n) = executors {
            check_count("executors", n)?;
            self.schedule.executors = n;
            self.schedule.config.executors = n;
            if !self.dispatch_written() {
                self.schedule.config.dispatch = crate::schedule::Dispatch::RoundRobin(n);
                if let Some(d @ DispatchPlan::RoundRobin(_)) = &mut self.schedule.dispatch {
                    *d = DispatchPlan::RoundRobin(n);
                }
            }
        }
        if let Some(n) = streams {
            check_count("streams", n)?;
            self.schedule.streams = n;
            self.schedule.config.streams = n;
        }
        Ok(self)
    }

    /// Whether the module's schedule has a `dispatch` item (else the dispatch is the default
    /// `round_robin` over the executors).
    fn dispatch_written(&self) -> bool {
        self.module.schedule.as_ref().is_some_and(|s| {
            s.items
                .iter()
                .any(|i| matches!(i.kind, crate::schedule::ScheduleItemKind::Dispatch(_)))
        })
    }

    /// The typed tree of expression `id`.
    pub fn expr(&self, id: ExprId) -> &TExpr {
        &self.exprs[id.index()].expr
    }

    /// What expression `id` is, for messages.
    pub fn what(&self, id: ExprId) -> &str {
        &self.exprs[id.index()].what
    }

    /// Number of symbols (registers `0 .. n_symbols`).
    pub fn n_symbols(&self) -> u32 {
        self.module.symbols.len() as u32
    }

    /// Number of slots (registers `n_symbols .. n_symbols + n_slots`).
    pub fn n_slots(&self) -> u32 {
        self.module.slots.len() as u32
    }

    /// Whether the entry reads the contents of tensor `t` and a task of the entry writes it:
    /// a computed read (`docs/SEMANTICS.md`, "Computed reads").
    pub fn computed(&self, t: TensorId) -> bool {
        self.arrays[t.index()] && self.written[t.index()]
    }

    /// The tensors the entry reads computed values of, with where each is first read.
    pub fn computed_reads(&self) -> Vec<(TensorId, Loc)> {
        (0..self.arrays.len() as u32)
            .map(TensorId)
            .filter(|&t| self.computed(t))
            .map(|t| (t, self.array_reads[t.index()]))
            .collect()
    }

    /// Whether the entry has a `while` loop.
    pub fn has_while(&self) -> bool {
        let mut found = false;
        self.each_stmt(&mut |s| found |= matches!(s.kind, StmtKind::While { .. }));
        found
    }

    /// Calls `f` on every statement of every process, outermost first (inlined calls included).
    pub fn each_stmt(&self, f: &mut impl FnMut(&Stmt)) {
        for p in &self.processes {
            walk_stmts(&p.body, f);
        }
    }
}

/// Calls `f` on every statement of `body`, nested ones included, in program order.
fn walk_stmts(body: &[Stmt], f: &mut impl FnMut(&Stmt)) {
    for s in body {
        f(s);
        match &s.kind {
            StmtKind::Loop(l) => walk_stmts(&l.body, f),
            StmtKind::If {
                then_body,
                else_body,
                ..
            } => {
                walk_stmts(then_body, f);
                walk_stmts(else_body, f);
            }
            StmtKind::Block { body, .. }
            | StmtKind::Call { body, .. }
            | StmtKind::While { body, .. }
            | StmtKind::Consume { body, .. } => walk_stmts(body, f),
            StmtKind::Task(_)
            | StmtKind::Break { .. }
            | StmtKind::Set { .. }
            | StmtKind::Load { .. }
            | StmtKind::Send { .. } => {}
        }
    }
}

/// Why a module's entry point could not be resolved. Each names the thing and where it is; the
/// location is that of the statement (or declaration) it is in, [`Loc::NONE`] when built without
/// text or when the mistake is in the schedule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// The module has no entry point.
    #[error("no entry point: {reason}")]
    NoEntryPoint {
        /// Why none was found.
        reason: String,
    },
    /// A name that means nothing where it is used.
    #[error("unknown {kind} `{name}` in {context}")]
    UnknownName {
        /// What kind of thing was expected (`axis`, `kernel`, `tensor`, `name`, ...).
        kind: &'static str,
        /// The name.
        name: String,
        /// Where it was used.
        context: String,
        /// The statement it is in.
        loc: Loc,
    },
    /// A structural mistake the validator reports too (wrong arity, wrong argument kind, ...).
    #[error("malformed module: {message}")]
    Malformed {
        /// What is wrong, and where.
        message: String,
        /// The statement it is in.
        loc: Loc,
    },
    /// Workloads call each other in a cycle.
    #[error("recursive call: {}", chain.join(" -> "))]
    Recursion {
        /// The call chain, ending with the workload called again.
        chain: Vec<String>,
        /// The call that closes the cycle.
        loc: Loc,
    },
    /// A schedule setting that cannot be honoured (zero executors or streams, ...).
    #[error("bad schedule: {message}")]
    BadSchedule {
        /// What is wrong.
        message: String,
    },
    /// An expression whose types do not fit.
    #[error("type error in {context}: {message}")]
    Type {
        /// What was being resolved, and where.
        context: String,
        /// What is wrong.
        message: String,
        /// The statement it is in.
        loc: Loc,
    },
}

impl Diagnostic for ResolveError {
    fn loc(&self) -> Loc {
        match self {
            ResolveError::UnknownName { loc, .. }
            | ResolveError::Malformed { loc, .. }
            | ResolveError::Recursion { loc, .. }
            | ResolveError::Type { loc, .. } => *loc,
            ResolveError::NoEntryPoint { .. } | ResolveError::BadSchedule { .. } => Loc::NONE,
        }
    }
}

/// A construct a back end cannot run or emit: what it is and where (see
/// `pto_wsp::Backend::supports`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("back end `{backend}` does not support {construct}")]
pub struct Unsupported {
    /// The back end.
    pub backend: String,
    /// The construct, named as the user wrote it ("a `send` of a u64 token on channel `c`").
    pub construct: String,
    /// Where it is.
    pub loc: Loc,
}

impl Diagnostic for Unsupported {
    fn loc(&self) -> Loc {
        self.loc
    }
}
