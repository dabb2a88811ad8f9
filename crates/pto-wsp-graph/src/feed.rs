//! Feeding a task generator straight into a [`GraphBuilder`]: the streaming front of a runtime
//! that builds its task graph while workers run it. The generator is the reference expander
//! ([`feed`]) or any other that reports the same tasks and order announcements through
//! [`Feeder::push_task`], [`Feeder::open_edge`] and [`Feeder::close_edge`] (the host run feeds
//! the bytecode interpreter this way: `pto_wsp_cpu::bytecode_feed`).
//!
//! Why: a back end must honour two kinds of order — the data dependencies the builder infers from
//! regions, and the structural order edges of `for_each`, `sequential` and CSP that the expander
//! reports as index ranges. A streaming builder must wire a constraint before it submits the first
//! task it applies to, and must be able to stop the expansion when the runtime gives up. The
//! expander announces every edge before its later range starts ([`ExpandSink::order_begin`]) and
//! lets a sink stop it; this module turns those announcements into explicit dependencies.
//!
//! Promises:
//! - Every task the generator reports is submitted, in order, as a task of the caller's
//!   [`ExecDomain`] with the expanded kernel, pool, stream, target (as affinity), params
//!   ([`pto_wsp_ir::Value::to_bits`]) and regions — what [`GraphBuilder::submit_expanded`] makes.
//! - Every structural order edge `before -> after` is implied by the built graph: each task of
//!   `after` gets an explicit dependency on the one task of `before` when there is one, else on a
//!   **barrier** — a task with kernel [`BARRIER_KERNEL`], no regions or params, depending on every
//!   task of `before`, submitted when the edge is announced. So an edge costs `|before| + |after|`
//!   explicit dependencies (or `|after|`), not `|before| x |after|`.
//! - Ids differ from expander indices once barriers exist; [`Origins`] ([`FeedSummary::origins`],
//!   [`Feeder::index_of`] / [`Feeder::task_id`]) maps between them, holding the barriers' places
//!   only: nothing of the feed grows per task, so a streamed run's memory follows its window.
//! - [`FeedHooks::before_submit`] runs for every task (barriers included) after its id is known
//!   and before it is submitted (so before any edge into it reaches the builder's [`EdgeSink`]);
//!   [`FeedHooks::after_submit`] right after.
//! - The first failure (builder, hook) stops the expansion at once; the failing task is
//!   abandoned (its id is not used) and the error comes back from [`Feeder::finish`] / [`feed`].
//!
//! ```
//! use pto_wsp_graph::builder::GraphBuilder;
//! use pto_wsp_graph::feed::{NoHooks, feed};
//! use pto_wsp_graph::ExecDomain;
//! use pto_wsp_ir::{Bindings, DepsMode, ExpandOptions, parse, resolve};
//!
//! let m = parse(
//!     "tensor X: f32[4, 8]; axis I = dense(3); axis J = dense(2);
//!      kernel k(inout x: f32[1, 4]);
//!      workload main() { for_each i in I { parallel_for j in J { task k(X[i, j * 4 +: 4]); } } }",
//! )
//! .unwrap();
//! let m = resolve(&m, &Default::default()).unwrap();
//! let mut b = GraphBuilder::new(DepsMode::Explicit);
//! let s = feed(&m, &Bindings::new(), &ExpandOptions::default(), &mut b, &mut NoHooks,
//!              ExecDomain::HostCpu).unwrap();
//! // Two edges between iterations of two tasks each: a barrier before iterations 1 and 2.
//! assert_eq!((s.user_tasks, s.barrier_tasks), (6, 2));
//! assert_eq!(b.finish().edge_count(), 2 * (2 + 2));
//! ```

use crate::builder::{BuildError, EdgeSink, GraphBuilder};
use crate::tensor_map::TensorMap;
use crate::types::{ExecDomain, ExecPool, TaskId, TaskIo};
use pto_wsp_ir::{
    Access, Bindings, DataRead, ExpandError, ExpandOptions, ExpandSink, ExpandSummary,
    ExpandedTask, OrderEdge, ReadRefused, Resolved,
};
use std::convert::Infallible;
use std::ops::{ControlFlow, Range};

/// The kernel id of a barrier task (it runs nothing; it only joins dependencies).
pub const BARRIER_KERNEL: u32 = u32::MAX;

/// [`Origins::to_vec`]'s entry for a barrier task.
pub const NO_ORIGIN: u32 = u32::MAX;

/// The map between the task ids of a feed and the expander's indices: tasks are numbered in
/// submission order from `first`, user tasks and barriers interleaved, so it is enough to know
/// how many user tasks came before each barrier. Memory grows per barrier, not per task.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Origins {
    first: u32,
    users: u32,
    /// For barrier `j`: the user tasks submitted before it (non-decreasing).
    barriers: Vec<u32>,
}

impl Origins {
    /// An empty map whose first task is `first`.
    pub fn new(first: TaskId) -> Origins {
        Origins {
            first: first.0,
            users: 0,
            barriers: Vec::new(),
        }
    }

    /// The next task is the user task with the next expander index.
    pub fn push_user(&mut self) {
        self.users += 1;
    }

    /// User tasks up to expander index `index` (exclusive) were generated elsewhere: the next
    /// user task recorded has index `index`. Does nothing if `index` is not ahead.
    pub fn skip_users_to(&mut self, index: u32) {
        self.users = self.users.max(index);
    }

    /// The next task is a barrier.
    pub fn push_barrier(&mut self) {
        self.barriers.push(self.users);
    }

    /// Tasks recorded (user tasks and barriers).
    pub fn len(&self) -> usize {
        self.users as usize + self.barriers.len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// User tasks recorded.
    pub fn user_tasks(&self) -> u32 {
        self.users
    }

    /// Barriers recorded.
    pub fn barrier_tasks(&self) -> u32 {
        self.barriers.len() as u32
    }

    /// Barriers among the first `rel` tasks (`rel` counted from `first`).
    fn barriers_before(&self, rel: u32) -> usize {
        // Barrier j sits at relative id `users_before + j`, strictly increasing in j.
        let (mut lo, mut hi) = (0usize, self.barriers.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.barriers[mid] + (mid as u32) < rel {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// The expander index of task `id`; `None` for a barrier or a task not recorded.
    pub fn index_of(&self, id: TaskId) -> Option<u32> {
        let rel = id.0.checked_sub(self.first)?;
        if rel as usize >= self.len() {
            return None;
        }
        let k = self.barriers_before(rel);
        if self.barriers.get(k).is_some_and(|&u| u + k as u32 == rel) {
            return None;
        }
        Some(rel - k as u32)
    }

    /// The id of the user task with expander index `index`, if recorded.
    pub fn task_id(&self, index: u32) -> Option<TaskId> {
        if index >= self.users {
            return None;
        }
        // Barriers before it: those with at most `index` user tasks before them.
        let k = self.barriers.partition_point(|&u| u <= index);
        Some(TaskId(self.first + index + k as u32))
    }

    /// For each task recorded, its expander index or [`NO_ORIGIN`] for a barrier (one entry per
    /// task: for tests and small graphs).
    pub fn to_vec(&self) -> Vec<u32> {
        let mut v = Vec::with_capacity(self.len());
        let mut next = 0u32;
        for &u in &self.barriers {
            v.extend(next..u);
            next = u;
            v.push(NO_ORIGIN);
        }
        v.extend(next..self.users);
        v
    }
}

/// A callback over a task's regions: `(access, tensor, start, size)`.
pub type RegionFn<'a> = dyn FnMut(Access, u32, &[i64], &[i64]) -> Result<(), BuildError> + 'a;

/// What the feed reads of one generated task, whichever generator made it (the reference
/// expander's [`ExpandedTask`], the bytecode interpreter's task view). Object-safe, so hooks see
/// every generator's tasks through one type.
pub trait FeedTask {
    /// Kernel that runs (after choosing a tier), as a module kernel index.
    fn kernel(&self) -> u32;
    /// Pool the task runs in.
    fn pool(&self) -> ExecPool;
    /// Stream.
    fn stream(&self) -> u32;
    /// Dispatch target (the task's affinity); `None` under `work_steal`.
    fn target(&self) -> Option<u32>;
    /// Ready-queue priority key (0 unless the schedule says `ready priority(EXPR)`).
    fn priority(&self) -> i64;
    /// Cycle cost under `trace cycles(EXPR)`; `None` otherwise.
    fn cost(&self) -> Option<u64>;
    /// Calls `f` with each scalar param's bits ([`pto_wsp_ir::Value::to_bits`]), in order.
    fn for_each_param(&self, f: &mut dyn FnMut(u64));
    /// Calls `f` with each region `(access, tensor, start, size)`, in order, stopping at the
    /// first error.
    fn try_for_each_region(&self, f: &mut RegionFn<'_>) -> Result<(), BuildError>;
    /// The regions already as the builder keeps them, when the generator has them so: exactly
    /// what [`FeedTask::try_for_each_region`] reports, in order, each region one that
    /// [`crate::types::Region::new`] accepts. The feed then hands them to the builder in one
    /// call ([`GraphBuilder::submit_ios`]: not even copied, for a sink that keeps no task)
    /// instead of converting each. The default is `None`.
    fn io(&self) -> Option<&[TaskIo]> {
        None
    }
}

impl FeedTask for ExpandedTask {
    fn kernel(&self) -> u32 {
        self.kernel
    }
    fn pool(&self) -> ExecPool {
        self.pool
    }
    fn stream(&self) -> u32 {
        self.stream
    }
    fn target(&self) -> Option<u32> {
        self.target
    }
    fn priority(&self) -> i64 {
        self.priority
    }
    fn cost(&self) -> Option<u64> {
        self.cost
    }
    fn for_each_param(&self, f: &mut dyn FnMut(u64)) {
        for p in &self.params {
            f(p.to_bits());
        }
    }
    fn try_for_each_region(&self, f: &mut RegionFn<'_>) -> Result<(), BuildError> {
        for r in &self.regions {
            f(r.access, r.tensor, &r.start, &r.size)?;
        }
        Ok(())
    }
}

/// What a runtime does around each submission.
pub trait FeedHooks {
    /// Why a hook failed.
    type Error;
    /// Task `id` is allocated and filled (regions, params, explicit dependencies) but not yet
    /// submitted: no edge into it has been reported to the builder's sink. `task` is the
    /// expander index and task, or `None` for a barrier. An error abandons the task (the builder
    /// reuses its id) and stops the feed.
    fn before_submit(
        &mut self,
        id: TaskId,
        task: Option<(u32, &dyn FeedTask)>,
    ) -> Result<(), Self::Error>;
    /// Task `id` was submitted. An error stops the feed (the task stays submitted).
    fn after_submit(&mut self, id: TaskId) -> Result<(), Self::Error> {
        let _ = id;
        Ok(())
    }
    /// Serves a computed read of the expander ([`ExpandSink::read`]); `wait` waits on
    /// submitted tasks through the builder's sink ([`crate::builder::EdgeSink::wait_complete`]).
    /// The default refuses, as the expander does.
    fn read(
        &mut self,
        read: &DataRead<'_>,
        out: &mut Vec<i64>,
        wait: &mut dyn FnMut(&[TaskId]) -> Option<bool>,
    ) -> Result<(), ReadRefused> {
        let _ = (read, out, wait);
        Err(ReadRefused::Unsupported(
            "this run does not serve reads of computed tensors".into(),
        ))
    }
}

/// Hooks that do nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoHooks;

impl FeedHooks for NoHooks {
    type Error = Infallible;
    fn before_submit(
        &mut self,
        _: TaskId,
        _: Option<(u32, &dyn FeedTask)>,
    ) -> Result<(), Infallible> {
        Ok(())
    }
}

/// Why a feed failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FeedError<E> {
    /// The expander failed (an error of the module or the bindings).
    #[error(transparent)]
    Expand(#[from] ExpandError),
    /// The builder refused a task.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// A hook failed.
    #[error("feed hook failed: {0}")]
    Hook(E),
}

/// What a feed did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeedSummary {
    /// Tasks the expander generated and the builder accepted.
    pub user_tasks: u32,
    /// Barrier tasks added for order edges with more than one earlier task.
    pub barrier_tasks: u32,
    /// Id of the first task the feed allocated (the builder's length when the feed began).
    pub first: TaskId,
    /// Task ids against expander indices.
    pub origins: Origins,
    /// The expander's summary.
    pub expand: ExpandSummary,
}

impl FeedSummary {
    /// The expander index of task `id`; `None` for a barrier or a task the feed did not submit.
    pub fn index_of(&self, id: TaskId) -> Option<u32> {
        self.origins.index_of(id)
    }
}

/// An announced order edge whose later range is being fed.
#[derive(Debug)]
struct Open {
    before: Range<u32>,
    after_start: u32,
    /// The task every task of the later range waits for: the one earlier task, or a barrier.
    dep: TaskId,
}

/// An [`ExpandSink`] that submits every task to a [`GraphBuilder`] and turns structural order
/// edges into explicit dependencies (see the module docs). Run it with
/// [`pto_wsp_ir::expand_with`], then call [`Feeder::finish`]; or use [`feed`].
///
/// # Panics
/// If a task of the builder is open when the feed starts, or if the calls it receives break the
/// [`ExpandSink`] contract (an edge naming a task not yet fed).
#[derive(Debug)]
pub struct Feeder<'b, M: TensorMap, S: EdgeSink, H: FeedHooks> {
    builder: &'b mut GraphBuilder<M, S>,
    hooks: &'b mut H,
    domain: ExecDomain,
    first: TaskId,
    origins: Origins,
    open: Vec<Open>,
    error: Option<FeedError<H::Error>>,
}

impl<'b, M: TensorMap, S: EdgeSink, H: FeedHooks> Feeder<'b, M, S, H> {
    /// A feeder submitting to `builder` (which may already hold tasks) in `domain`.
    pub fn new(builder: &'b mut GraphBuilder<M, S>, hooks: &'b mut H, domain: ExecDomain) -> Self {
        let first = TaskId(builder.len() as u32);
        Feeder {
            builder,
            hooks,
            domain,
            first,
            origins: Origins::new(first),
            open: Vec::new(),
            error: None,
        }
    }

    /// The id of the task with expander index `index`, once fed.
    pub fn task_id(&self, index: u32) -> Option<TaskId> {
        self.origins.task_id(index)
    }

    /// The expander index of task `id`; `None` for a barrier or a task the feed did not submit.
    pub fn index_of(&self, id: TaskId) -> Option<u32> {
        self.origins.index_of(id)
    }

    /// Tasks fed so far (user tasks and barriers).
    pub fn submitted(&self) -> usize {
        self.origins.len()
    }

    /// The first error of the feed (builder or hook), which stops the generator, if any.
    pub fn error(&self) -> Option<&FeedError<H::Error>> {
        self.error.as_ref()
    }

    /// Submits generated task `index` (the next one: tasks arrive in index order), with an
    /// explicit dependency for every open order edge; [`ControlFlow::Break`] once the feed has
    /// failed (the generator must stop). Generic over the task's type, so that reading it
    /// costs no call per field (hooks see it as a [`FeedTask`] object).
    pub fn push_task<T: FeedTask>(&mut self, index: u32, task: &T) -> ControlFlow<()> {
        if self.error.is_none()
            && let Err(e) = self.feed_task(index, task)
        {
            self.error = Some(e);
        }
        if self.error.is_some() {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    }

    /// An order edge is announced ([`ExpandSink::order_begin`]'s contract): every task pushed
    /// until [`Feeder::close_edge`] waits for every task of `before` (through a barrier when
    /// there are several).
    pub fn open_edge(&mut self, before: Range<u32>, after_start: u32) {
        if self.error.is_some() {
            return;
        }
        let dep = if before.len() == 1 {
            self.origins
                .task_id(before.start)
                .expect("an order edge names tasks already fed")
        } else {
            match self.barrier(before.clone()) {
                Ok(id) => id,
                Err(e) => {
                    // Reported by the `push_task` call that follows every announcement.
                    self.error = Some(e);
                    return;
                }
            }
        };
        self.open.push(Open {
            before,
            after_start,
            dep,
        });
    }

    /// The order edge `edge`, announced by [`Feeder::open_edge`], is complete.
    pub fn close_edge(&mut self, edge: &OrderEdge) {
        if let Some(k) = self
            .open
            .iter()
            .rposition(|o| o.before == edge.before && o.after_start == edge.after.start)
        {
            self.open.remove(k);
        }
    }

    /// Ends the feed, given what [`pto_wsp_ir::expand_with`] returned for it: the first error
    /// (the feeder's own, which is what stopped the expansion, else the expander's), or the
    /// summary.
    pub fn finish(
        self,
        expansion: Result<ExpandSummary, ExpandError>,
    ) -> Result<FeedSummary, FeedError<H::Error>> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let expand = expansion?;
        Ok(FeedSummary {
            user_tasks: self.origins.user_tasks(),
            barrier_tasks: self.origins.barrier_tasks(),
            first: self.first,
            origins: self.origins,
            expand,
        })
    }

    /// Hooks and submits the open task `id`, filled with result `filled` (abandoning it on
    /// error), and records it (before `after_submit`, so the maps include it whatever that
    /// hook says).
    /// `io`, when given, is the task's regions, not yet added ([`GraphBuilder::submit_ios`]).
    /// Inlined into each caller, where `io` is known: a generator without built regions (the
    /// expander) gets [`GraphBuilder::submit`] alone, not a test of `io` and a copy of
    /// [`GraphBuilder::submit_ios`] beside it.
    #[inline(always)]
    fn submit_open(
        &mut self,
        id: TaskId,
        filled: Result<(), BuildError>,
        task: Option<(u32, &dyn FeedTask)>,
        io: Option<&[TaskIo]>,
    ) -> Result<(), FeedError<H::Error>> {
        let r = filled
            .map_err(FeedError::Build)
            .and_then(|()| self.hooks.before_submit(id, task).map_err(FeedError::Hook))
            .and_then(|()| {
                match io {
                    Some(io) => self.builder.submit_ios(io),
                    None => self.builder.submit(),
                }
                .map(|_| ())
                .map_err(FeedError::Build)
            });
        if r.is_err() {
            self.builder.abandon();
            return r;
        }
        match task {
            Some(_) => self.origins.push_user(),
            None => self.origins.push_barrier(),
        }
        self.hooks.after_submit(id).map_err(FeedError::Hook)
    }

    #[inline]
    fn feed_task<T: FeedTask>(&mut self, index: u32, task: &T) -> Result<(), FeedError<H::Error>> {
        debug_assert_eq!(
            index,
            self.origins.user_tasks(),
            "tasks arrive in index order"
        );
        let id = self.builder.alloc_task(
            task.kernel(),
            self.domain,
            task.pool(),
            task.stream(),
            task.target(),
        );
        let b = &mut *self.builder;
        // Regions the generator keeps built go to the builder at submission (not copied in).
        let io = task.io();
        let filled = (|| {
            task.for_each_param(&mut |p| b.add_param(p));
            if io.is_none() {
                task.try_for_each_region(&mut |access, tensor, start, size| {
                    b.add_region(access, tensor, start, size)
                })?;
            }
            for o in &self.open {
                b.add_explicit_dep(o.dep)?;
            }
            Ok(())
        })();
        self.submit_open(id, filled, Some((index, task)), io)
    }

    /// A barrier after every task of `before` (expander indices).
    fn barrier(&mut self, before: Range<u32>) -> Result<TaskId, FeedError<H::Error>> {
        let id = self
            .builder
            .alloc_task(BARRIER_KERNEL, self.domain, ExecPool::Any, 0, None);
        let origins = &self.origins;
        let filled = before.clone().try_for_each(|i| {
            let d = origins
                .task_id(i)
                .expect("an order edge names tasks already fed");
            self.builder.add_explicit_dep(d)
        });
        self.submit_open(id, filled, None, None)?;
        Ok(id)
    }
}

impl<M: TensorMap, S: EdgeSink, H: FeedHooks> ExpandSink for Feeder<'_, M, S, H> {
    fn task(&mut self, index: u32, task: &ExpandedTask) -> ControlFlow<()> {
        self.push_task(index, task)
    }

    fn order_begin(&mut self, before: Range<u32>, after_start: u32) {
        self.open_edge(before, after_start);
    }

    fn read(&mut self, read: &DataRead<'_>, out: &mut Vec<i64>) -> Result<(), ReadRefused> {
        let sink = self.builder.sink_mut();
        self.hooks.read(read, out, &mut |t| sink.wait_complete(t))
    }

    fn order(&mut self, edge: OrderEdge) {
        self.close_edge(&edge);
    }
}

/// Expands the resolved entry point `res` under `bindings` straight into `builder` (see
/// [`Feeder`]), calling `hooks` around each submission; tasks run in `domain`.
pub fn feed<M: TensorMap, S: EdgeSink, H: FeedHooks>(
    res: &Resolved,
    bindings: &Bindings,
    options: &ExpandOptions,
    builder: &mut GraphBuilder<M, S>,
    hooks: &mut H,
    domain: ExecDomain,
) -> Result<FeedSummary, FeedError<H::Error>> {
    let mut feeder = Feeder::new(builder, hooks, domain);
    let r = pto_wsp_ir::expand_with(res, bindings, options, &mut feeder);
    feeder.finish(r)
}
