//! The Rust builder API: writing a [`Module`] in Rust instead of text.
//!
//! Why: programs that generate workloads (model definitions, tests, benchmarks) want to build
//! modules with Rust control flow and closures, not by formatting text or nesting IR structs.
//!
//! Promise: the builder produces exactly the IR the text parser produces for the same program —
//! same declarations in the same order, same statements, same expressions — with every
//! [`Loc`] equal to [`Loc::NONE`]. It checks nothing: run
//! [`validate()`](crate::validate()) on the result as on a parsed module.
//!
//! Bodies are closures receiving a [`Body`] to append statements to; [`e`], [`span`], [`at`] and
//! [`region`] build expressions and task arguments.
//!
//! ```
//! use pto_wsp_ir::builder::{ModuleBuilder, e, region, span};
//! use pto_wsp_ir::{expand, AxisKind, Bindings, DType, DepsMode, Dispatch, ExecPool};
//! use pto_wsp_ir::{ExpandOptions, ScalarType, resolve};
//!
//! let mut m = ModuleBuilder::new();
//! m.symbol("seq", ScalarType::I64);
//! m.tensor("Q", DType::F16, [e("seq"), 4096.into()]);
//! m.tensor("O", DType::F16, [e("seq"), 4096.into()]);
//! m.axis("T", AxisKind::DenseDyn(e("seq") / 32));
//! m.axis("H", AxisKind::Dense(32.into()));
//! m.kernel("attn")
//!     .input("q", DType::F16, [Some(32), Some(128)])
//!     .output("o", DType::F16, [Some(32), Some(128)])
//!     .scalar("n", ScalarType::I64)
//!     .pool(ExecPool::Vector);
//! m.workload("main", |w| {
//!     w.parallel_for("t", "T", |w| {
//!         w.parallel_for("h", "H", |w| {
//!             let rows = span(e("t") * 32, 32);
//!             let cols = span(e("h") * 128, 128);
//!             w.task("attn", [
//!                 region("Q", [rows.clone(), cols.clone()]).into(),
//!                 region("O", [rows, cols]).into(),
//!                 e("h").into(),
//!             ]);
//!         });
//!     });
//! });
//! m.schedule("main", |s| {
//!     s.dispatch(Dispatch::Affinity(e("h")));
//!     s.deps(DepsMode::Exact);
//! });
//! let module = m.finish();
//!
//! let program = resolve(&module, &Default::default()).unwrap();
//! let x = expand(&program, &Bindings::new().symbol("seq", 64i64), &ExpandOptions::default())
//!     .unwrap();
//! assert_eq!(x.tasks.len(), 2 * 32);
//! ```

pub mod plan;
pub mod spatial;

use crate::csp::{Channel, Pipeline, Process};
use crate::expr::Expr;
use crate::loc::{Ident, Loc};
use crate::module::{
    AxisDecl, AxisKind, KernelDecl, KernelParam, Module, ParamKind, SlotDecl, SymbolDecl,
    TensorDecl, Tiers, Workload,
};
use crate::schedule::{
    DepsMode, Dispatch, GateScope, Levels, PoolsPolicy, ReadyPolicy, Schedule, ScheduleItem,
    ScheduleItemKind, StartPolicy, TaskGraphItem, Timing, TracePolicy, WindowMode,
};
use crate::types::{Access, DType, ExecPool, ParamType, ScalarType};
use crate::workload::{Arg, LoopOrder, Region, RegionDim, Stmt, StmtKind, TaskStmt};

/// A name expression: `e("h") * 128`.
pub fn e(name: &str) -> Expr {
    Expr::name(name)
}

/// A region dimension `start +: size`.
pub fn span(start: impl Into<Expr>, size: impl Into<Expr>) -> RegionDim {
    RegionDim::span(start, size)
}

/// A region dimension that is a single index (size 1, written as a bare index).
pub fn at(index: impl Into<Expr>) -> RegionDim {
    RegionDim::index(index)
}

/// A region `TENSOR[d0, d1, ...]`.
pub fn region(tensor: &str, dims: impl IntoIterator<Item = RegionDim>) -> Region {
    Region {
        tensor: Ident::new(tensor),
        dims: dims.into_iter().collect(),
    }
}

/// `Levels { metric, levels, otherwise }` for `threshold` dispatch and `dispatch_threshold`.
pub fn levels<T>(
    metric: impl Into<Expr>,
    levels: impl IntoIterator<Item = (i64, T)>,
    otherwise: T,
) -> Levels<T> {
    Levels {
        metric: metric.into(),
        levels: levels.into_iter().collect(),
        otherwise: Box::new(otherwise),
    }
}

impl From<Region> for Arg {
    fn from(r: Region) -> Arg {
        Arg::Region(r)
    }
}

impl From<Expr> for Arg {
    fn from(e: Expr) -> Arg {
        Arg::Scalar(e)
    }
}

impl From<i64> for Arg {
    fn from(v: i64) -> Arg {
        Arg::Scalar(Expr::Int(v))
    }
}

/// The variables a loop, `select` or `consume` binds: `"i"`, `("row", "pos")` or
/// `["row", "pos"]`.
pub trait LoopVars {
    /// The variables, in order.
    fn into_vars(self) -> Vec<Ident>;
}

impl LoopVars for &str {
    fn into_vars(self) -> Vec<Ident> {
        vec![Ident::new(self)]
    }
}

impl LoopVars for String {
    fn into_vars(self) -> Vec<Ident> {
        vec![Ident::new(self)]
    }
}

impl LoopVars for (&str, &str) {
    fn into_vars(self) -> Vec<Ident> {
        vec![Ident::new(self.0), Ident::new(self.1)]
    }
}

impl<const N: usize> LoopVars for [&str; N] {
    fn into_vars(self) -> Vec<Ident> {
        self.into_iter().map(Ident::new).collect()
    }
}

/// Builds a [`Module`]. Declarations keep the order they are added in, per kind.
#[derive(Debug, Default)]
pub struct ModuleBuilder {
    module: Module,
}

impl ModuleBuilder {
    /// An empty module.
    pub fn new() -> ModuleBuilder {
        ModuleBuilder::default()
    }

    /// The module built so far.
    pub fn module(&self) -> &Module {
        &self.module
    }

    /// The finished module.
    pub fn finish(self) -> Module {
        self.module
    }

    /// `symbol NAME: TYPE;`
    pub fn symbol(&mut self, name: &str, ty: ScalarType) -> &mut Self {
        self.module.symbols.push(SymbolDecl {
            name: Ident::new(name),
            ty,
        });
        self
    }

    /// `slot NAME: TYPE;`
    pub fn slot(&mut self, name: &str, ty: ScalarType) -> &mut Self {
        self.module.slots.push(SlotDecl {
            name: Ident::new(name),
            ty,
        });
        self
    }

    /// `tensor NAME: DTYPE[d0, ...];`
    pub fn tensor(
        &mut self,
        name: &str,
        dtype: DType,
        shape: impl IntoIterator<Item = Expr>,
    ) -> &mut Self {
        self.module.tensors.push(TensorDecl {
            name: Ident::new(name),
            dtype,
            shape: shape.into_iter().collect(),
        });
        self
    }

    /// `axis NAME = KIND;`
    pub fn axis(&mut self, name: &str, kind: AxisKind) -> &mut Self {
        self.module.axes.push(AxisDecl {
            name: Ident::new(name),
            kind,
        });
        self
    }

    /// `axis NAME = dense(N);`
    pub fn dense(&mut self, name: &str, extent: impl Into<Expr>) -> &mut Self {
        self.axis(name, AxisKind::Dense(extent.into()))
    }

    /// `axis NAME = dense_dyn(E);`
    pub fn dense_dyn(&mut self, name: &str, extent: impl Into<Expr>) -> &mut Self {
        self.axis(name, AxisKind::DenseDyn(extent.into()))
    }

    /// `axis NAME = ragged(OUTER, LENGTHS);`
    pub fn ragged(&mut self, name: &str, outer: impl Into<Expr>, lengths: &str) -> &mut Self {
        self.axis(
            name,
            AxisKind::Ragged {
                outer: outer.into(),
                lengths: Ident::new(lengths),
                per_row: None,
            },
        )
    }

    /// `axis NAME = ragged(OUTER, LENGTHS, PER_ROW);`: row `r` has `PER_ROW` elements, with the
    /// name `LENGTHS` in `PER_ROW` standing for `LENGTHS[r]`.
    pub fn ragged_by(
        &mut self,
        name: &str,
        outer: impl Into<Expr>,
        lengths: &str,
        per_row: impl Into<Expr>,
    ) -> &mut Self {
        self.axis(
            name,
            AxisKind::Ragged {
                outer: outer.into(),
                lengths: Ident::new(lengths),
                per_row: Some(per_row.into()),
            },
        )
    }

    /// `axis NAME = sparse(OUTER, INDPTR, INDICES);`
    pub fn sparse(
        &mut self,
        name: &str,
        outer: impl Into<Expr>,
        indptr: &str,
        indices: &str,
    ) -> &mut Self {
        self.axis(
            name,
            AxisKind::Sparse {
                outer: outer.into(),
                indptr: Ident::new(indptr),
                indices: Ident::new(indices),
            },
        )
    }

    /// `kernel NAME(...)`: declares the kernel (pool `any`, no parameters yet) and returns a
    /// builder for its parameters, pool and tiers.
    pub fn kernel(&mut self, name: &str) -> KernelBuilder<'_> {
        self.module.kernels.push(KernelDecl {
            name: Ident::new(name),
            params: Vec::new(),
            pool: ExecPool::Any,
            tiers: None,
            body: None,
        });
        let decl = self
            .module
            .kernels
            .last_mut()
            .unwrap_or_else(|| unreachable!("a kernel was just pushed"));
        KernelBuilder { decl }
    }

    /// `workload NAME() { BODY }`.
    pub fn workload(&mut self, name: &str, body: impl FnOnce(&mut Body)) -> &mut Self {
        self.workload_with_params(name, [], body)
    }

    /// `workload NAME(PARAM: TYPE, ...) { BODY }`.
    pub fn workload_with_params<'n>(
        &mut self,
        name: &str,
        params: impl IntoIterator<Item = (&'n str, ScalarType)>,
        body: impl FnOnce(&mut Body),
    ) -> &mut Self {
        self.module.workloads.push(Workload {
            name: Ident::new(name),
            params: params
                .into_iter()
                .map(|(n, t)| (Ident::new(n), t))
                .collect(),
            body: Body::build(body),
            loc: Loc::NONE,
        });
        self
    }

    /// `pipeline NAME { ... }`.
    pub fn pipeline(&mut self, name: &str, f: impl FnOnce(&mut PipelineBuilder)) -> &mut Self {
        let mut p = PipelineBuilder {
            pipeline: Pipeline {
                name: Ident::new(name),
                channels: Vec::new(),
                processes: Vec::new(),
                loc: Loc::NONE,
            },
        };
        f(&mut p);
        self.module.pipelines.push(p.pipeline);
        self
    }

    /// `schedule for TARGET { ... }` (replaces any schedule set before).
    pub fn schedule(&mut self, target: &str, f: impl FnOnce(&mut ScheduleBuilder)) -> &mut Self {
        let mut s = ScheduleBuilder { items: Vec::new() };
        f(&mut s);
        self.module.schedule = Some(Schedule {
            target: Ident::new(target),
            items: s.items,
            loc: Loc::NONE,
        });
        self
    }
}

/// Adds parameters, a pool and tiers to a kernel declared by [`ModuleBuilder::kernel`].
#[derive(Debug)]
pub struct KernelBuilder<'a> {
    decl: &'a mut KernelDecl,
}

impl KernelBuilder<'_> {
    /// A tile parameter `ACCESS NAME: DTYPE[d, ...]` (`None` is `?`, any size).
    pub fn tile(
        self,
        name: &str,
        access: Access,
        dtype: DType,
        shape: impl IntoIterator<Item = Option<u64>>,
    ) -> Self {
        self.decl.params.push(KernelParam {
            name: Ident::new(name),
            kind: ParamKind::Tile {
                access,
                dtype,
                shape: shape.into_iter().collect(),
            },
        });
        self
    }

    /// `in NAME: DTYPE[...]`.
    pub fn input(
        self,
        name: &str,
        dtype: DType,
        shape: impl IntoIterator<Item = Option<u64>>,
    ) -> Self {
        self.tile(name, Access::In, dtype, shape)
    }

    /// `out NAME: DTYPE[...]`.
    pub fn output(
        self,
        name: &str,
        dtype: DType,
        shape: impl IntoIterator<Item = Option<u64>>,
    ) -> Self {
        self.tile(name, Access::Out, dtype, shape)
    }

    /// `inout NAME: DTYPE[...]`.
    pub fn inout(
        self,
        name: &str,
        dtype: DType,
        shape: impl IntoIterator<Item = Option<u64>>,
    ) -> Self {
        self.tile(name, Access::InOut, dtype, shape)
    }

    /// A scalar parameter `NAME: TYPE` (`ScalarType` or [`crate::ParamType`], which adds
    /// `f32` / `f64`).
    pub fn scalar(self, name: &str, ty: impl Into<ParamType>) -> Self {
        self.decl.params.push(KernelParam {
            name: Ident::new(name),
            kind: ParamKind::Scalar(ty.into()),
        });
        self
    }

    /// `@POOL`.
    pub fn pool(self, pool: ExecPool) -> Self {
        self.decl.pool = pool;
        self
    }

    /// A body of tile instructions (`crate::kernel_body`); statements are made with
    /// [`crate::KStmt::new`] and [`crate::KStmt::inst`].
    pub fn body(self, stmts: Vec<crate::kernel_body::KStmt>) -> Self {
        self.decl.body = Some(stmts);
        self
    }

    /// `tiers { COND => VARIANT, ..., else => DEFAULT }`.
    pub fn tiers<'n>(
        self,
        cases: impl IntoIterator<Item = (Expr, &'n str)>,
        default: &str,
    ) -> Self {
        self.decl.tiers = Some(Tiers {
            cases: cases.into_iter().map(|(c, k)| (c, Ident::new(k))).collect(),
            default: Ident::new(default),
        });
        self
    }
}

/// A statement list being built: the body of a workload, loop, branch, block or process.
#[derive(Debug, Default)]
pub struct Body {
    stmts: Vec<Stmt>,
}

impl Body {
    /// Runs `f` on an empty body and returns the statements it added.
    pub fn build(f: impl FnOnce(&mut Body)) -> Vec<Stmt> {
        let mut b = Body::default();
        f(&mut b);
        b.stmts
    }

    /// Appends a statement made by hand.
    pub fn stmt(&mut self, kind: StmtKind) -> &mut Self {
        self.stmts.push(Stmt::new(kind));
        self
    }

    fn lp(
        &mut self,
        order: LoopOrder,
        vars: impl LoopVars,
        axis: &str,
        body: impl FnOnce(&mut Body),
    ) -> &mut Self {
        self.stmt(StmtKind::Loop {
            order,
            vars: vars.into_vars(),
            axis: Ident::new(axis),
            body: Body::build(body),
        })
    }

    /// `parallel_for VARS in AXIS { BODY }` (`"i"`, or `("row", "pos")` over a ragged axis).
    pub fn parallel_for(
        &mut self,
        vars: impl LoopVars,
        axis: &str,
        body: impl FnOnce(&mut Body),
    ) -> &mut Self {
        self.lp(LoopOrder::Parallel, vars, axis, body)
    }

    /// `for_each VARS in AXIS { BODY }`.
    pub fn for_each(
        &mut self,
        vars: impl LoopVars,
        axis: &str,
        body: impl FnOnce(&mut Body),
    ) -> &mut Self {
        self.lp(LoopOrder::Sequential, vars, axis, body)
    }

    /// `select ROW, IDX in AXIS { BODY }`.
    pub fn select(
        &mut self,
        vars: impl LoopVars,
        axis: &str,
        body: impl FnOnce(&mut Body),
    ) -> &mut Self {
        self.stmt(StmtKind::Select {
            vars: vars.into_vars(),
            axis: Ident::new(axis),
            body: Body::build(body),
        })
    }

    /// `if COND { THEN }`.
    pub fn if_then(&mut self, cond: impl Into<Expr>, then: impl FnOnce(&mut Body)) -> &mut Self {
        self.if_else(cond, then, |_| {})
    }

    /// `if COND { THEN } else { ELSE }`.
    pub fn if_else(
        &mut self,
        cond: impl Into<Expr>,
        then: impl FnOnce(&mut Body),
        otherwise: impl FnOnce(&mut Body),
    ) -> &mut Self {
        self.stmt(StmtKind::Cond {
            cond: cond.into(),
            then_body: Body::build(then),
            else_body: Body::build(otherwise),
        })
    }

    /// `while COND max MAX { BODY }`: the body runs while `cond` holds, at most `max` times.
    pub fn while_max(
        &mut self,
        cond: impl Into<Expr>,
        max: impl Into<Expr>,
        body: impl FnOnce(&mut Body),
    ) -> &mut Self {
        self.stmt(StmtKind::While {
            cond: cond.into(),
            max: max.into(),
            body: Body::build(body),
        })
    }

    /// `break if COND;`: leaves the innermost enclosing `while` when `cond` holds.
    pub fn break_if(&mut self, cond: impl Into<Expr>) -> &mut Self {
        self.stmt(StmtKind::Break { cond: cond.into() })
    }

    /// `combine { BODY }`.
    pub fn combine(&mut self, body: impl FnOnce(&mut Body)) -> &mut Self {
        self.stmt(StmtKind::Combine(Body::build(body)))
    }

    /// `sequential { BODY }`.
    pub fn sequential(&mut self, body: impl FnOnce(&mut Body)) -> &mut Self {
        self.stmt(StmtKind::Sequential(Body::build(body)))
    }

    /// `task KERNEL(ARGS);` — arguments are [`Arg`]s: `region(..).into()`, `e("n").into()`,
    /// `Arg::from(7)`.
    pub fn task(&mut self, kernel: &str, args: impl IntoIterator<Item = Arg>) -> &mut Self {
        self.stmt(StmtKind::Task(TaskStmt {
            kernel: Ident::new(kernel),
            args: args.into_iter().collect(),
        }))
    }

    /// `set SLOT = VALUE;`
    pub fn set(&mut self, slot: &str, value: impl Into<Expr>) -> &mut Self {
        self.stmt(StmtKind::SlotSet {
            slot: Ident::new(slot),
            value: value.into(),
        })
    }

    /// `load SLOT = TENSOR[i, ...];`
    pub fn load(
        &mut self,
        slot: &str,
        tensor: &str,
        index: impl IntoIterator<Item = Expr>,
    ) -> &mut Self {
        self.stmt(StmtKind::SlotLoad {
            slot: Ident::new(slot),
            tensor: Ident::new(tensor),
            index: index.into_iter().collect(),
        })
    }

    /// `call WORKLOAD(ARGS);`
    pub fn call(&mut self, workload: &str, args: impl IntoIterator<Item = Expr>) -> &mut Self {
        self.stmt(StmtKind::Call {
            workload: Ident::new(workload),
            args: args.into_iter().collect(),
        })
    }

    /// `send CHANNEL(VALUE);` (in a process).
    pub fn send(&mut self, channel: &str, value: impl Into<Expr>) -> &mut Self {
        self.stmt(StmtKind::Send {
            channel: Ident::new(channel),
            value: value.into(),
        })
    }

    /// `consume CHANNEL as VAR { BODY }` (in a process).
    pub fn consume(&mut self, channel: &str, var: &str, body: impl FnOnce(&mut Body)) -> &mut Self {
        self.stmt(StmtKind::Consume {
            channel: Ident::new(channel),
            var: Ident::new(var),
            body: Body::build(body),
        })
    }
}

/// Adds channels and processes to a pipeline (see [`ModuleBuilder::pipeline`]).
#[derive(Debug)]
pub struct PipelineBuilder {
    pipeline: Pipeline,
}

impl PipelineBuilder {
    /// `channel NAME[DEPTH];`
    pub fn channel(&mut self, name: &str, depth: u64) -> &mut Self {
        self.pipeline.channels.push(Channel {
            name: Ident::new(name),
            depth,
        });
        self
    }

    /// `process NAME(consumes C, ...; produces P, ...) { BODY }`.
    pub fn process<'n>(
        &mut self,
        name: &str,
        consumes: impl IntoIterator<Item = &'n str>,
        produces: impl IntoIterator<Item = &'n str>,
        body: impl FnOnce(&mut Body),
    ) -> &mut Self {
        self.pipeline.processes.push(Process {
            name: Ident::new(name),
            consumes: consumes.into_iter().map(Ident::new).collect(),
            produces: produces.into_iter().map(Ident::new).collect(),
            body: Body::build(body),
            loc: Loc::NONE,
        });
        self
    }
}

/// Adds items to a schedule, in order (see [`ModuleBuilder::schedule`]).
#[derive(Debug)]
pub struct ScheduleBuilder {
    items: Vec<ScheduleItem>,
}

impl ScheduleBuilder {
    /// Appends an item made by hand.
    pub fn item(&mut self, kind: ScheduleItemKind) -> &mut Self {
        self.items.push(ScheduleItem::new(kind));
        self
    }

    /// `executors N;`
    pub fn executors(&mut self, n: u64) -> &mut Self {
        self.item(ScheduleItemKind::Executors(n))
    }

    /// `dispatch POLICY;` (see [`levels`] for `threshold`).
    pub fn dispatch(&mut self, d: Dispatch) -> &mut Self {
        self.item(ScheduleItemKind::Dispatch(d))
    }

    /// `streams N;`
    pub fn streams(&mut self, n: u64) -> &mut Self {
        self.item(ScheduleItemKind::Streams(n))
    }

    /// `stream_by EXPR;`
    pub fn stream_by(&mut self, key: impl Into<Expr>) -> &mut Self {
        self.item(ScheduleItemKind::StreamBy(key.into()))
    }

    /// `timing POLICY;`
    pub fn timing(&mut self, t: Timing) -> &mut Self {
        self.item(ScheduleItemKind::Timing(t))
    }

    /// `task_graph { ... }` with the sub-items `f` adds, as one item.
    pub fn task_graph(&mut self, f: impl FnOnce(&mut TaskGraphBuilder)) -> &mut Self {
        let mut g = TaskGraphBuilder { items: Vec::new() };
        f(&mut g);
        self.item(ScheduleItemKind::TaskGraph(g.items))
    }

    /// Adds a `task_graph` sub-item to the schedule's `task_graph` block (creating the block,
    /// at the end, if there is none yet): `s.deps(..); s.ready(..);` is `task_graph { deps ..;
    /// ready ..; }`.
    fn graph_item(&mut self, it: TaskGraphItem) -> &mut Self {
        let existing = self.items.iter_mut().find_map(|i| match &mut i.kind {
            ScheduleItemKind::TaskGraph(items) => Some(items),
            ScheduleItemKind::Executors(_)
            | ScheduleItemKind::Dispatch(_)
            | ScheduleItemKind::Streams(_)
            | ScheduleItemKind::StreamBy(_)
            | ScheduleItemKind::Timing(_)
            | ScheduleItemKind::TaskWindow(..)
            | ScheduleItemKind::PipelineDepth(..)
            | ScheduleItemKind::BatchDeps(_)
            | ScheduleItemKind::DispatchThreshold(_) => None,
        });
        match existing {
            Some(items) => items.push(it),
            None => {
                self.item(ScheduleItemKind::TaskGraph(vec![it]));
            }
        }
        self
    }

    /// `task_graph { deps MODE; }` (joined with other `task_graph` sub-items).
    pub fn deps(&mut self, mode: DepsMode) -> &mut Self {
        self.graph_item(TaskGraphItem::Deps(mode))
    }

    /// `task_graph { ready POLICY; }` (joined with other `task_graph` sub-items).
    pub fn ready(&mut self, policy: ReadyPolicy) -> &mut Self {
        self.graph_item(TaskGraphItem::Ready(policy))
    }

    /// `task_graph { start POLICY; }` (joined with other `task_graph` sub-items).
    pub fn start(&mut self, policy: StartPolicy) -> &mut Self {
        self.graph_item(TaskGraphItem::Start(policy))
    }

    /// `task_graph { trace POLICY; }` (joined with other `task_graph` sub-items).
    pub fn trace(&mut self, policy: TracePolicy) -> &mut Self {
        self.graph_item(TaskGraphItem::Trace(policy))
    }

    /// `task_graph { pools POLICY; }` (joined with other `task_graph` sub-items).
    pub fn pools(&mut self, policy: PoolsPolicy) -> &mut Self {
        self.graph_item(TaskGraphItem::Pools(policy))
    }

    /// `task_window N MODE;`
    pub fn task_window(&mut self, n: u64, mode: WindowMode) -> &mut Self {
        self.item(ScheduleItemKind::TaskWindow(n, mode))
    }

    /// `pipeline_depth N SCOPE;`
    pub fn pipeline_depth(&mut self, n: u64, scope: GateScope) -> &mut Self {
        self.item(ScheduleItemKind::PipelineDepth(n, scope))
    }

    /// `batch_deps N;`
    pub fn batch_deps(&mut self, n: u64) -> &mut Self {
        self.item(ScheduleItemKind::BatchDeps(n))
    }

    /// `dispatch_threshold(METRIC) { below B: POOL, ..., else: POOL };`
    pub fn dispatch_threshold(&mut self, l: Levels<ExecPool>) -> &mut Self {
        self.item(ScheduleItemKind::DispatchThreshold(l))
    }
}

/// Adds sub-items to a `task_graph { ... }` block (see [`ScheduleBuilder::task_graph`]).
#[derive(Debug)]
pub struct TaskGraphBuilder {
    items: Vec<TaskGraphItem>,
}

impl TaskGraphBuilder {
    /// `deps MODE;`
    pub fn deps(&mut self, mode: DepsMode) -> &mut Self {
        self.items.push(TaskGraphItem::Deps(mode));
        self
    }

    /// `ready POLICY;`
    pub fn ready(&mut self, policy: ReadyPolicy) -> &mut Self {
        self.items.push(TaskGraphItem::Ready(policy));
        self
    }

    /// `start POLICY;`
    pub fn start(&mut self, policy: StartPolicy) -> &mut Self {
        self.items.push(TaskGraphItem::Start(policy));
        self
    }

    /// `trace POLICY;`
    pub fn trace(&mut self, policy: TracePolicy) -> &mut Self {
        self.items.push(TaskGraphItem::Trace(policy));
        self
    }

    /// `pools POLICY;`
    pub fn pools(&mut self, policy: PoolsPolicy) -> &mut Self {
        self.items.push(TaskGraphItem::Pools(policy));
        self
    }
}
