//! The task-graph builder (the back-end architecture specification's shared infrastructure): tasks
//! come in one at a time, in program order, naming the regions they read and write; the builder
//! infers the edges and stores everything flat.
//!
//! Why: dependency inference is the hard, shared part of every back end; generated code and the
//! CPU simulation only call `alloc_task`, `add_input`/`add_output`/`add_inout`, `add_param`,
//! `submit`.
//!
//! Promises:
//! - Task ids are 0, 1, 2, ... in `alloc_task` order.
//! - Edges by [`DepsMode`]: **exact** — a region depends on earlier accesses to the *same* region
//!   key; **overlap** and **hybrid** — on earlier accesses to any *intersecting* box of the same
//!   tensor (hybrid is served by the overlap map, so its edges are overlap's by construction);
//!   **explicit** — no inference. In every mode, [`GraphBuilder::add_explicit_dep`] edges are
//!   added. Inferred edges are read-after-write (input after the last writer), write-after-write
//!   (output after the last writer) and write-after-read (output after every reader since the
//!   last write).
//! - A task never gets the same predecessor twice, never itself, and only earlier tasks.
//! - Every edge goes to an [`EdgeSink`] the moment its successor is submitted: the default
//!   [`CollectEdges`] keeps them for [`GraphBuilder::finish`], which lays them out as CSR
//!   fan-out; a streaming runtime plugs in its own sink.
//! - [`GraphBuilder::retire_before`] forgets TensorMap records of completed tasks; edges between
//!   live tasks are unchanged by it.
//! - A sink that [`EdgeSink::forgets_tasks`] (a streamed run's) gets each task once, in
//!   [`EdgeSink::publish`]: the builder then keeps no task once submitted (its node, params and
//!   regions are staged in buffers reused by the next task, so they stay in the cache; a task
//!   submitted in one call, [`GraphBuilder::submit_task`], has no staged node at all: it is
//!   built at submission and handed to the sink) and only a dedup stamp per task after the
//!   completed prefix.
//! - Regions handed in already built ([`GraphBuilder::add_ios`]: a task's regions as one slice
//!   in the builder's layout; [`GraphBuilder::submit_ios`]: the same at submission, read in
//!   place when the sink forgets tasks) or with their slot hash ([`GraphBuilder::add_access_hashed`], so
//!   the exact map does not hash them again) build exactly what [`GraphBuilder::add_access`]
//!   builds, region for region.
//! - Nothing allocates per task in the steady state: regions, params and edges go to flat
//!   vectors, dedup uses a stamp per task id.
//! - [`GraphBuilder::reset`] and [`GraphBuilder::finish_into`] start the next build keeping every
//!   allocation (maps, buffers, the previous graph's vectors); so do [`GraphBuilder::into_parts`]
//!   and [`GraphBuilder::from_parts`] for a build whose sink is new each time (a streamed run's).
//!   The graph built afterwards is the one a fresh builder with the same map configuration builds.
//! - Reads of tensors no task of the build writes ([`GraphBuilder::set_read_only`], decided by
//!   the caller from its program) skip the map: such a read has no writer before it and none
//!   after it, so it needs no edge; the task keeps the region. The edges are those of the build
//!   without the mask but for the overlap map's coverage marks between two such reads
//!   (read-after-read order, never needed). Without that call every tensor is tracked.

use crate::storage::{TaskGraphStorage, TaskNode};
use crate::tensor_map::{AnyTensorMap, MapStats, TensorMap};
use crate::types::{
    Access, EdgeKind, ExecDomain, ExecPool, NO_AFFINITY, Region, RegionError, SchedTags, TaskId,
    TaskIo, pool_code,
};
use pto_wsp_ir::{DepsMode, ExpandedTask};

/// Receives edges as the builder infers them.
pub trait EdgeSink {
    /// `succ` must wait for `pred` (`pred < succ`; reported once per pair, while `succ` is being
    /// submitted, before [`EdgeSink::submitted`] for `succ`).
    fn edge(&mut self, pred: TaskId, succ: TaskId);
    /// Every edge into `task` has been reported.
    fn submitted(&mut self, task: TaskId);
    /// The task is complete (its fan-in, params and regions are final) and about to be reported
    /// [`EdgeSink::submitted`]; `params` and `io` are its scalar params and regions. A streaming
    /// sink stores what workers will need here, before the task can become ready. The default
    /// does nothing.
    fn publish(&mut self, node: &TaskNode, params: &[u64], io: &[TaskIo]) {
        let _ = (node, params, io);
    }
    /// Forgets every edge: [`GraphBuilder::reset`] starts a new build with task 0. The default
    /// does nothing (for sinks that hand edges on at once).
    fn clear(&mut self) {}
    /// Asked every [`RETIRE_EVERY`] submissions: a task id below which every task has
    /// *completed*, if the sink knows one newer than the last it returned. The builder then
    /// forgets the TensorMap records of those tasks ([`GraphBuilder::retire_before`]), so a graph
    /// built while it runs keeps a map the size of what is in flight, not of everything
    /// submitted. The sink must have *acquired* those completions (a later task may then get no
    /// edge from them). The default knows nothing.
    fn retire_hint(&mut self) -> Option<TaskId> {
        None
    }
    /// Whether the builder may forget each task once submitted (nodes, params, regions): a sink
    /// that keeps what it needs in [`EdgeSink::publish`] and never calls
    /// [`GraphBuilder::finish`]. Then the builder stages the open task in buffers the next task
    /// reuses, and keeps only a dedup stamp per task after the last [`EdgeSink::retire_hint`].
    /// Asked once, when the builder is made. The default is `false`.
    fn forgets_tasks(&self) -> bool {
        false
    }
    /// Waits until every task of `tasks` (all submitted) has completed, for a generator that
    /// reads what they compute (`docs/SEMANTICS.md`, "Computed reads"): `Some(waited)` (whether
    /// it had to wait), or `None` when it cannot — the sink runs no task, or the run failed.
    /// The default cannot.
    fn wait_complete(&mut self, tasks: &[TaskId]) -> Option<bool> {
        let _ = tasks;
        None
    }
}

/// Most regions of a task whose [`TensorMap::prefetch`] hints the builder keeps (in a fixed
/// array): a task with more passes none.
const MAX_HINTS: usize = 8;

/// The submission's edge closure for a producer not in the window of held tasks it tracks:
/// counts a `FORGOTTEN` producer (inferred, never wired) or a duplicate among the forgotten ones
/// named again; `true` when the edge is new and must be wired. Out of line (and marked cold
/// although a streamed run's forgotten producers are not rare), so the closure's case of a
/// producer it tracks keeps fewer registers: measured cheaper per task on the LLaMA layer.
#[cold]
#[inline(never)]
fn pred_outside_seen(
    p: TaskId,
    kind: EdgeKind,
    st: &mut BuildStats,
    seen_old: &mut std::collections::HashSet<u32>,
) -> bool {
    if p == TaskId::FORGOTTEN {
        // A completed task the map kept only as a count: inferred, never wired.
        *st.kind_mut(kind) += 1;
        st.forgotten += 1;
        return false;
    }
    if !seen_old.insert(p.0) {
        // A forgotten (completed) task: rare, only explicit dependencies name one.
        st.duplicates += 1;
        return false;
    }
    true
}

/// What a submission's inference borrows of the builder (split, so the task's regions may be
/// the builder's own buffer or the caller's slice).
struct Inference<'a, M, S> {
    map: &'a mut M,
    sink: &'a mut S,
    /// The dedup stamps, from id `seen_base`.
    seen: &'a mut Vec<u32>,
    seen_old: &'a mut std::collections::HashSet<u32>,
    seen_base: u32,
    stats: &'a mut BuildStats,
    /// The prefetch hints of the task's regions and how many regions got one.
    hints: (&'a [u64; MAX_HINTS], usize),
    explicit: &'a [u32],
    read_only: &'a [bool],
}

/// Infers the edges into `task` from its regions `ios` and its explicit dependencies, reports
/// each new one to the sink and counts it; returns the task's fan-in. `MASKED`: reads
/// [`skips_map`] names skip the map. Nothing can fail here (the caller checked room first).
///
/// [`GraphBuilder::submit_with`] keeps its own copy of this loop: calling this there changed
/// how the compiler laid out both submissions (measured per task: 31 instructions more on the
/// program's bytecode path, 46 on the reference expander, 8 on the graph crate's `build` bench).
#[inline(always)]
fn infer<M: TensorMap, S: EdgeSink, const MASKED: bool>(
    parts: Inference<'_, M, S>,
    task: TaskId,
    ios: &[TaskIo],
) -> u32 {
    let Inference {
        map,
        sink,
        seen,
        seen_old,
        seen_base: base,
        stats: st,
        hints: (hints, nhints),
        explicit,
        read_only,
    } = parts;
    let cur = task.0;
    let mut fanin = 0u32;
    // Counted straight into the build's counters; the kind is a constant at every call site of
    // the map, so each count is one add.
    if !seen_old.is_empty() {
        seen_old.clear();
    }
    let mut pred = |p: TaskId, kind: EdgeKind| {
        // One compare for the common case, a held task: `FORGOTTEN` (`u32::MAX`) and ids below
        // `base` both land past `seen` (ids held are below `u32::MAX`).
        if let Some(s) = seen.get_mut(p.0.wrapping_sub(base) as usize) {
            if *s == cur {
                st.duplicates += 1;
                return;
            }
            *s = cur;
        } else if !pred_outside_seen(p, kind, st, seen_old) {
            return;
        }
        fanin += 1;
        *st.kind_mut(kind) += 1;
        sink.edge(p, task);
    };
    // Hints go back only when every region got one (a map that gave some only would otherwise
    // see them shifted onto the wrong regions), and a task of more than `MAX_HINTS` regions
    // gets none.
    let hinted = nhints == ios.len() && ios.len() <= MAX_HINTS;
    for (k, io) in ios.iter().enumerate() {
        if MASKED && skips_map(read_only, io) {
            continue;
        }
        let hint = if hinted { hints.get(k).copied() } else { None };
        map.access_hinted(task, &io.region, hint, io.access(), &mut pred);
    }
    for &d in explicit {
        pred(TaskId(d), EdgeKind::Explicit);
    }
    fanin
}

/// How often [`GraphBuilder::submit`] asks its sink for [`EdgeSink::retire_hint`].
pub const RETIRE_EVERY: u32 = 4096;

/// The non-streaming sink: keeps each task's predecessors (CSR by successor) for
/// [`GraphBuilder::finish`].
#[derive(Clone, Debug, Default)]
pub struct CollectEdges {
    preds: Vec<u32>,
    ends: Vec<u32>,
}

impl CollectEdges {
    /// The predecessors of every submitted task, in submission order: `(preds, ends)` where task
    /// `i`'s are `preds[ends[i-1] .. ends[i]]`.
    pub fn preds(&self) -> (&[u32], &[u32]) {
        (&self.preds, &self.ends)
    }
}

impl EdgeSink for CollectEdges {
    #[inline]
    fn edge(&mut self, pred: TaskId, _succ: TaskId) {
        self.preds.push(pred.0);
    }

    #[inline]
    fn submitted(&mut self, _task: TaskId) {
        self.ends.push(self.preds.len() as u32);
    }

    fn clear(&mut self) {
        self.preds.clear();
        self.ends.clear();
    }
}

/// Which exact-key map `exact` mode uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExactMap {
    /// [`FixedExactMap`] with this many entries.
    Fixed(usize),
    /// [`DynamicExactMap`] (a std hash map; the simple reference).
    Dynamic,
    /// [`FixedExactMap::growable`]: the bounded map's table, doubling instead of refusing — the
    /// fastest unbounded choice, and what [`GraphBuilder::new`] and the runtime use.
    Growable,
}

/// A user mistake while building.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// A region with more dimensions than [`crate::types::MAX_RANK`].
    #[error(
        "task #{}: region of tensor {tensor} has rank {rank}; at most {max} dimensions are tracked",
        task.0
    )]
    RankTooHigh {
        /// The task.
        task: TaskId,
        /// The tensor.
        tensor: u32,
        /// The region's rank.
        rank: usize,
        /// [`crate::types::MAX_RANK`].
        max: usize,
    },
    /// Any other region that cannot be represented.
    #[error("task #{}: {source}", task.0)]
    BadRegion {
        /// The task.
        task: TaskId,
        /// What is wrong.
        source: RegionError,
    },
    /// An explicit dependency on a task that is not earlier.
    #[error("task #{}: explicit dependency on task #{}, which is not earlier", task.0, dep.0)]
    ForwardDep {
        /// The task.
        task: TaskId,
        /// The dependency named.
        dep: TaskId,
    },
    /// More than 65,535 regions or params in one task.
    #[error("task #{}: {count} {what}; at most 65535", task.0)]
    TooMany {
        /// The task.
        task: TaskId,
        /// `"regions"` or `"params"`.
        what: &'static str,
        /// How many.
        count: usize,
    },
    /// The bounded TensorMap cannot be sure to hold the task's regions (see
    /// [`FixedExactMap`]). Nothing of the task was recorded; it is still open.
    #[error(
        "task #{}: the fixed TensorMap ({capacity} entries) may not hold its {regions} region(s); \
         retire completed tasks or use a larger or dynamic map",
        task.0
    )]
    TensorMapFull {
        /// The task.
        task: TaskId,
        /// The map's capacity.
        capacity: usize,
        /// The task's region count.
        regions: usize,
    },
}

/// What [`GraphBuilder::alloc_task`] takes of a task, for [`GraphBuilder::submit_task`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskHead {
    /// Kernel id.
    pub kernel: u32,
    /// Domain the task runs in.
    pub domain: ExecDomain,
    /// Pool the task runs in.
    pub pool: ExecPool,
    /// Stream.
    pub stream: u32,
    /// Affinity, if any.
    pub affinity: Option<u32>,
}

/// Where [`GraphBuilder::submit_task`]'s caller appends the task's scalar params, in order.
#[derive(Debug)]
pub struct ParamsOut<'a>(&'a mut Vec<u64>);

impl ParamsOut<'_> {
    /// Appends a param (as [`GraphBuilder::add_param`]).
    #[inline]
    pub fn push(&mut self, value: u64) {
        self.0.push(value);
    }
}

/// Why [`GraphBuilder::submit_task`] failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SubmitError<E> {
    /// The builder refused the task.
    Build(BuildError),
    /// The caller's hook refused it.
    Before(E),
}

/// Counters of a build.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BuildStats {
    /// Tasks submitted.
    pub tasks: u64,
    /// Read-after-write edges.
    pub raw: u64,
    /// Write-after-write edges.
    pub waw: u64,
    /// Write-after-read edges.
    pub war: u64,
    /// Explicit edges (not already inferred).
    pub explicit: u64,
    /// Predecessor reports dropped because the task already had that predecessor.
    pub duplicates: u64,
    /// Of the inferred edges, those to completed tasks the TensorMap kept only as a count
    /// ([`TaskId::FORGOTTEN`], after [`GraphBuilder::retire_before`]): counted in `raw` / `waw` /
    /// `war`, never reported to the sink (nothing to wire).
    pub forgotten: u64,
    /// The TensorMap's counters.
    pub map: MapStats,
}

impl BuildStats {
    /// The counter of edges of `kind`.
    #[inline]
    fn kind_mut(&mut self, kind: EdgeKind) -> &mut u64 {
        match kind {
            EdgeKind::Raw => &mut self.raw,
            EdgeKind::Waw => &mut self.waw,
            EdgeKind::War => &mut self.war,
            EdgeKind::Explicit => &mut self.explicit,
        }
    }

    /// Edges of every kind.
    pub fn edges(&self) -> u64 {
        self.raw + self.waw + self.war + self.explicit
    }
}

/// Whether `io` is a read of a tensor `read_only` marks (written by no task of the build): it
/// needs no edge, so the map neither records nor looks it up.
#[inline]
pub fn skips_map(read_only: &[bool], io: &TaskIo) -> bool {
    // The tensor first: without a mask (the usual builder) one compare with an empty length.
    read_only.get(io.region.tensor as usize) == Some(&true) && io.access() == Access::In
}

/// Builds a task graph, inferring edges through a [`TensorMap`] `M` and reporting them to an
/// [`EdgeSink`] `S`.
#[derive(Debug)]
pub struct GraphBuilder<M: TensorMap = AnyTensorMap, S: EdgeSink = CollectEdges> {
    map: M,
    sink: S,
    tasks: Vec<TaskNode>,
    params: Vec<u64>,
    io: Vec<TaskIo>,
    /// [`TensorMap::prefetch`]'s hints for the first regions of the open task, in order.
    hints: [u64; MAX_HINTS],
    /// Regions of the open task added so far that got a hint (counted past [`MAX_HINTS`]).
    nhints: usize,
    /// `seen[p] == t` while task `t` is being submitted and already has predecessor `p`.
    seen: Vec<u32>,
    explicit: Vec<u32>,
    open: bool,
    stats: BuildStats,
    /// Submissions until the next [`EdgeSink::retire_hint`].
    retire_in: u32,
    /// Id of `tasks[0]`: tasks below it were forgotten ([`EdgeSink::forgets_tasks`]).
    base: u32,
    /// The sink forgets tasks (asked once): `tasks`, `params` and `io` hold the open task only.
    staged: bool,
    /// Id of `seen[0]` (stamps below it were dropped behind the completed prefix).
    seen_base: u32,
    /// Position of `params[0]` / `io[0]` among every param / region ever added.
    params_base: usize,
    io_base: usize,
    /// Forgotten predecessors already reported for the task being submitted.
    seen_old: std::collections::HashSet<u32>,
    /// Per tensor: no task of this build writes it ([`GraphBuilder::set_read_only`]); tensors
    /// past the end are tracked.
    read_only: Vec<bool>,
}

impl GraphBuilder {
    /// A builder for `deps` with the default maps: dynamic exact keys for `exact`, the overlap map
    /// for `overlap` and `hybrid`, none for `explicit`.
    pub fn new(deps: DepsMode) -> GraphBuilder {
        GraphBuilder::with_exact_map(deps, ExactMap::Growable)
    }

    /// Like [`GraphBuilder::new`], choosing the exact-key map.
    pub fn with_exact_map(deps: DepsMode, exact: ExactMap) -> GraphBuilder {
        GraphBuilder::with_map(AnyTensorMap::for_mode(deps, exact), CollectEdges::default())
    }
}

/// A builder's TensorMap and buffers without its sink ([`GraphBuilder::into_parts`]): what a
/// runtime keeps from one build to the next when every build has a sink of its own (a streamed
/// run's sink borrows that run's tables), so that [`GraphBuilder::from_parts`] starts the next
/// build on the same allocations instead of growing a new map and new vectors from nothing.
#[derive(Debug)]
pub struct BuilderParts<M: TensorMap = AnyTensorMap> {
    map: M,
    tasks: Vec<TaskNode>,
    params: Vec<u64>,
    io: Vec<TaskIo>,
    seen: Vec<u32>,
    explicit: Vec<u32>,
    seen_old: std::collections::HashSet<u32>,
    read_only: Vec<bool>,
}

impl<M: TensorMap> BuilderParts<M> {
    /// Parts holding `map` and empty buffers.
    pub fn new(map: M) -> BuilderParts<M> {
        BuilderParts {
            map,
            tasks: Vec::new(),
            params: Vec::new(),
            io: Vec::new(),
            seen: Vec::new(),
            explicit: Vec::new(),
            seen_old: std::collections::HashSet::new(),
            read_only: Vec::new(),
        }
    }
}

impl<M: TensorMap, S: EdgeSink> GraphBuilder<M, S> {
    /// A builder over a given map and sink.
    pub fn with_map(map: M, sink: S) -> GraphBuilder<M, S> {
        GraphBuilder::assemble(BuilderParts::new(map), sink)
    }

    /// A builder over `sink` on the map and buffers of an earlier build, emptied (the map
    /// [`TensorMap::clear`]ed, every buffer cleared, every allocation kept): the graph built
    /// afterwards is the one [`GraphBuilder::with_map`] with a new map of the same configuration
    /// builds.
    pub fn from_parts(mut parts: BuilderParts<M>, sink: S) -> GraphBuilder<M, S> {
        parts.map.clear();
        parts.tasks.clear();
        parts.params.clear();
        parts.io.clear();
        parts.seen.clear();
        parts.explicit.clear();
        parts.seen_old.clear();
        parts.read_only.clear();
        GraphBuilder::assemble(parts, sink)
    }

    /// Ends the build for a sink that keeps what it needs (a streamed run's): the map and buffers,
    /// for [`GraphBuilder::from_parts`], and the sink. An open task is dropped.
    pub fn into_parts(self) -> (BuilderParts<M>, S) {
        let parts = BuilderParts {
            map: self.map,
            tasks: self.tasks,
            params: self.params,
            io: self.io,
            seen: self.seen,
            explicit: self.explicit,
            seen_old: self.seen_old,
            read_only: self.read_only,
        };
        (parts, self.sink)
    }

    /// A builder over `parts` (as they are) and `sink`, at task 0.
    fn assemble(parts: BuilderParts<M>, sink: S) -> GraphBuilder<M, S> {
        let staged = sink.forgets_tasks();
        GraphBuilder {
            map: parts.map,
            sink,
            tasks: parts.tasks,
            params: parts.params,
            io: parts.io,
            hints: [0; MAX_HINTS],
            nhints: 0,
            seen: parts.seen,
            explicit: parts.explicit,
            open: false,
            stats: BuildStats::default(),
            retire_in: RETIRE_EVERY,
            base: 0,
            staged,
            seen_base: 0,
            params_base: 0,
            io_base: 0,
            seen_old: parts.seen_old,
            read_only: parts.read_only,
        }
    }

    /// Tensor `t` is written by no task of this build when `read_only[t]` (tensors past the end
    /// are tracked): its reads skip the map (module docs). Call before the first task; it lasts
    /// until [`GraphBuilder::reset`] (a builder from [`GraphBuilder::from_parts`] starts with
    /// every tensor tracked). A tensor marked here that a task then writes loses the edges of
    /// its reads: the caller must mark only tensors it knows no task writes.
    pub fn set_read_only(&mut self, read_only: &[bool]) {
        self.read_only.clear();
        self.read_only.extend_from_slice(read_only);
    }

    /// Reserves room for `tasks` tasks with `regions` regions and `params` params in all.
    pub fn reserve(&mut self, tasks: usize, regions: usize, params: usize) {
        self.tasks.reserve(tasks);
        self.seen.reserve(tasks);
        self.io.reserve(regions);
        self.params.reserve(params);
    }

    /// Opens a new task and returns its id; regions, params and explicit dependencies added next
    /// belong to it until [`GraphBuilder::submit`].
    ///
    /// # Panics
    /// If a task is already open (submit it first), or after `u32::MAX - 1` tasks.
    #[inline]
    pub fn alloc_task(
        &mut self,
        kernel: u32,
        domain: ExecDomain,
        pool: ExecPool,
        stream: u32,
        affinity: Option<u32>,
    ) -> TaskId {
        assert!(
            !self.open,
            "alloc_task: task #{} is still open",
            self.len() - 1
        );
        let id = u32::try_from(self.len())
            .ok()
            .filter(|&i| i < u32::MAX)
            .expect("alloc_task: more than 2^32 - 2 tasks");
        self.tasks.push(TaskNode {
            id: TaskId(id),
            kernel,
            stream,
            affinity: affinity.unwrap_or(NO_AFFINITY),
            fanin: 0,
            fanout_start: 0,
            fanout_count: 0,
            params_start: (self.params_base + self.params.len()) as u32,
            io_start: (self.io_base + self.io.len()) as u32,
            params_count: 0,
            io_count: 0,
            tags: SchedTags::NONE,
            domain,
            pool: pool_code(pool),
        });
        self.seen.push(u32::MAX);
        self.open = true;
        TaskId(id)
    }

    /// Keeps `hint` for the open task's next region. Past [`MAX_HINTS`] regions it overwrites
    /// an earlier one, which is never read: a task of more regions gets no hint back (so the
    /// store needs no test).
    #[inline(always)]
    fn keep_hint(&mut self, hint: u64) {
        let n = self.nhints;
        self.hints[n % MAX_HINTS] = hint;
        self.nhints = n + 1;
    }

    #[inline]
    fn current(&self) -> TaskId {
        assert!(self.open, "no open task: call alloc_task first");
        TaskId(self.len() as u32 - 1)
    }

    /// The open task reads `region`.
    #[inline]
    pub fn add_input(&mut self, region: Region) {
        self.add_access(region, Access::In);
    }

    /// The open task writes `region` (without reading it).
    #[inline]
    pub fn add_output(&mut self, region: Region) {
        self.add_access(region, Access::Out);
    }

    /// The open task reads and writes `region`.
    #[inline]
    pub fn add_inout(&mut self, region: Region) {
        self.add_access(region, Access::InOut);
    }

    /// The open task accesses `region` as `access`.
    ///
    /// # Panics
    /// If no task is open.
    #[inline]
    pub fn add_access(&mut self, region: Region, access: Access) {
        let _ = self.current();
        // Hashed and prefetched now, as early as the builder can, for `submit` to pass back.
        if let Some(hint) = self.map.prefetch(&region) {
            self.keep_hint(hint);
        }
        self.io.push(TaskIo::new(region, access));
    }

    /// [`GraphBuilder::add_access`] given `slot_hash`, the region's [`Region::slot_hash`]
    /// computed by the caller (a generator that keeps each region with its hash, so the exact
    /// map neither hashes it again nor keeps a hint of its own: [`TensorMap::prefetch_hashed`]).
    /// A wrong hash is a caller's bug: the exact map would file the key under the wrong slot
    /// (checked in debug builds).
    #[inline]
    pub fn add_access_hashed(&mut self, region: Region, access: Access, slot_hash: u64) {
        let _ = self.current();
        debug_assert_eq!(slot_hash, region.slot_hash(), "a region's carried hash");
        if let Some(hint) = self.map.prefetch_hashed(&region, slot_hash) {
            self.keep_hint(hint);
        }
        self.io.push(TaskIo::new(region, access));
    }

    /// The open task accesses every region of `io`, in order, as each entry says: what
    /// [`GraphBuilder::add_access`] does for each, for a generator that keeps its regions in the
    /// builder's layout (checked regions, so no conversion per region, and one call per task).
    #[inline]
    pub fn add_ios(&mut self, io: &[TaskIo]) {
        let _ = self.current();
        for r in io {
            if let Some(hint) = self.map.prefetch(&r.region) {
                self.keep_hint(hint);
            }
        }
        self.io.extend_from_slice(io);
    }

    /// The open task accesses the box `start .. start + size` of `tensor` as `access`; errors
    /// name the task and the tensor.
    pub fn add_region(
        &mut self,
        access: Access,
        tensor: u32,
        start: &[i64],
        size: &[i64],
    ) -> Result<(), BuildError> {
        let task = self.current();
        let region = Region::new(tensor, start, size).map_err(|e| match e {
            RegionError::RankTooHigh { tensor, rank } => BuildError::RankTooHigh {
                task,
                tensor,
                rank,
                max: crate::types::MAX_RANK,
            },
            source => BuildError::BadRegion { task, source },
        })?;
        self.add_access(region, access);
        Ok(())
    }

    /// Appends a scalar param to the open task.
    #[inline]
    pub fn add_param(&mut self, value: u64) {
        let _ = self.current();
        self.params.push(value);
    }

    /// Sets the open task's schedule tags.
    pub fn set_tags(&mut self, tags: SchedTags) {
        let t = self.current();
        self.tasks[(t.0 - self.base) as usize].tags = tags;
    }

    /// The open task must wait for `dep`, an earlier task.
    pub fn add_explicit_dep(&mut self, dep: TaskId) -> Result<(), BuildError> {
        let task = self.current();
        if dep >= task {
            return Err(BuildError::ForwardDep { task, dep });
        }
        self.explicit.push(dep.0);
        Ok(())
    }

    /// Closes the open task: infers its edges, reports them to the sink, returns its id.
    ///
    /// On error the task stays open and nothing of it reached the map or the sink.
    pub fn submit(&mut self) -> Result<TaskId, BuildError> {
        self.submit_any(None)
    }

    /// [`GraphBuilder::add_ios`]`(io)` then [`GraphBuilder::submit`], in one call: the same
    /// graph, the same counters, the same task handed to the sink. For a sink that
    /// [`EdgeSink::forgets_tasks`], when the open task has no region yet, `io` is not copied
    /// into the builder: the map reads it and the sink's [`EdgeSink::publish`] gets it as it is
    /// (one copy of a task's regions fewer between a generator and the sink).
    ///
    /// On error the task stays open without `io` (what the map or the sink saw of it: nothing).
    #[inline]
    pub fn submit_ios(&mut self, io: &[TaskIo]) -> Result<TaskId, BuildError> {
        let node = self.tasks.last().filter(|_| self.open);
        let direct = self.staged
            && node.is_some_and(|n| n.io_start as usize - self.io_base == self.io.len());
        if !direct {
            self.add_ios(io);
            return self.submit();
        }
        if self.read_only.is_empty() {
            self.submit_direct::<false>(io)
        } else {
            self.submit_direct::<true>(io)
        }
    }

    /// [`GraphBuilder::submit_ios`] for a staged builder whose open task has no region yet:
    /// the map and the sink read `io` in place; `MASKED` as in [`GraphBuilder::submit_with`].
    #[inline]
    fn submit_direct<const MASKED: bool>(&mut self, io: &[TaskIo]) -> Result<TaskId, BuildError> {
        for r in io {
            if let Some(hint) = self.map.prefetch(&r.region) {
                if let Some(h) = self.hints.get_mut(self.nhints) {
                    *h = hint;
                }
                self.nhints += 1;
            }
        }
        let r = self.submit_with::<MASKED>(Some(io));
        if r.is_err() {
            self.nhints = 0;
        }
        r
    }

    /// [`GraphBuilder::submit_with`] for a builder with or without a read-only mask: two
    /// instances, so a builder without one runs no test per region (a test there cost its
    /// register allocation about 50 instructions per task).
    #[inline]
    fn submit_any(&mut self, ext: Option<&[TaskIo]>) -> Result<TaskId, BuildError> {
        if self.read_only.is_empty() {
            self.submit_with::<false>(ext)
        } else {
            self.submit_with::<true>(ext)
        }
    }

    /// Whether `task`, of `nio` regions and `nparams` params, fits a node and the map.
    #[inline]
    fn check_counts(&self, task: TaskId, nio: usize, nparams: usize) -> Result<(), BuildError> {
        if (nio | nparams) > u16::MAX as usize {
            let (what, count) = if nio > u16::MAX as usize {
                ("regions", nio)
            } else {
                ("params", nparams)
            };
            return Err(BuildError::TooMany { task, what, count });
        }
        if let Err(full) = self.map.has_room(nio) {
            return Err(BuildError::TensorMapFull {
                task,
                capacity: full.capacity,
                regions: nio,
            });
        }
        Ok(())
    }

    /// [`GraphBuilder::submit`], with the open task's regions in `ext` (none added to the
    /// builder) when it is `Some`; `MASKED`: reads [`skips_map`] names skip the map.
    #[inline]
    fn submit_with<const MASKED: bool>(
        &mut self,
        ext: Option<&[TaskIo]>,
    ) -> Result<TaskId, BuildError> {
        let task = self.current();
        let node = self.tasks[(task.0 - self.base) as usize];
        let io_at = node.io_start as usize - self.io_base;
        let params_at = node.params_start as usize - self.params_base;
        let nio = ext.map_or(self.io.len() - io_at, <[TaskIo]>::len);
        let nparams = self.params.len() - params_at;
        self.check_counts(task, nio, nparams)?;
        let cur = task.0;
        let mut fanin = 0u32;
        // Sliced before the map's accesses, which leave it alone.
        let params = &self.params[params_at..];
        {
            let (seen, seen_old, base) = (&mut self.seen, &mut self.seen_old, self.seen_base);
            // Counted straight into the build's counters (nothing can fail from here on); the
            // kind is a constant at every call site of the map, so each count is one add.
            let st = &mut self.stats;
            if !seen_old.is_empty() {
                seen_old.clear();
            }
            let sink = &mut self.sink;
            let mut pred = |p: TaskId, kind: EdgeKind| {
                // One compare for the common case, a held task: `FORGOTTEN` (`u32::MAX`) and
                // ids below `base` both land past `seen` (ids held are below `u32::MAX`).
                if let Some(s) = seen.get_mut(p.0.wrapping_sub(base) as usize) {
                    if *s == cur {
                        st.duplicates += 1;
                        return;
                    }
                    *s = cur;
                } else if !pred_outside_seen(p, kind, st, seen_old) {
                    return;
                }
                fanin += 1;
                *st.kind_mut(kind) += 1;
                sink.edge(p, task);
            };
            // Hints go back only when every region got one (a map that gave some only would
            // otherwise see them shifted onto the wrong regions), and a task of more than
            // `MAX_HINTS` regions gets none.
            let hinted = self.nhints == nio && nio <= MAX_HINTS;
            let hints = &self.hints;
            let ios = ext.unwrap_or(&self.io[io_at..]);
            let read_only = &self.read_only;
            for (k, io) in ios.iter().enumerate() {
                if MASKED && skips_map(read_only, io) {
                    continue;
                }
                let hint = if hinted {
                    Some(hints[k % MAX_HINTS])
                } else {
                    None
                };
                self.map
                    .access_hinted(task, &io.region, hint, io.access(), &mut pred);
            }
            for &d in &self.explicit {
                pred(TaskId(d), EdgeKind::Explicit);
            }
        }
        self.explicit.clear();
        self.nhints = 0;
        let n = &mut self.tasks[(task.0 - self.base) as usize];
        n.fanin = fanin;
        n.io_count = nio as u16;
        n.params_count = nparams as u16;
        // By reference: a copy right after these narrow stores stalls on store forwarding.
        let ios = ext.unwrap_or(&self.io[io_at..]);
        self.sink.publish(n, params, ios);
        self.sink.submitted(task);
        self.open = false;
        if self.staged {
            // Written once, to the sink: the buffers are the next task's.
            self.base += 1;
            self.params_base += self.params.len();
            self.io_base += self.io.len();
            self.tasks.clear();
            self.params.clear();
            self.io.clear();
        }
        self.after_submit();
        Ok(task)
    }

    /// The end of a submission: the retire period's count, the task's count.
    #[inline]
    fn after_submit(&mut self) {
        self.retire_in -= 1;
        if self.retire_in == 0 {
            self.retire_in = RETIRE_EVERY;
            if let Some(oldest_live) = self.sink.retire_hint() {
                self.map.retire_before(oldest_live);
                if self.staged {
                    self.forget_before(oldest_live);
                }
            }
        }
        self.stats.tasks += 1;
    }

    /// A whole task in one call: [`GraphBuilder::alloc_task`] with `head`,
    /// [`GraphBuilder::add_param`] for each param `params` pushes, [`GraphBuilder::add_explicit_dep`] for
    /// each of `deps`, then `before(id)` (the caller's hook: the task is filled and nothing of
    /// it has reached the map or the sink), then [`GraphBuilder::submit_ios`]`(io)` — the same
    /// graph, counters and sink calls, and the same errors in the same order. On any error the
    /// task is abandoned ([`GraphBuilder::abandon`]: its id is reused).
    ///
    /// Why: a generator that keeps its regions built (the bytecode interpreter) submits each
    /// task this way; for a builder whose sink [`EdgeSink::forgets_tasks`], with no task open,
    /// no task is opened: the params go to the staged buffer, the regions are read in place and
    /// the node is built once, at submission, for the sink (no staged node written, read back
    /// and cleared, none of the open task's checks).
    ///
    /// # Panics
    /// As [`GraphBuilder::alloc_task`].
    #[inline]
    pub fn submit_task<E>(
        &mut self,
        head: TaskHead,
        params: impl FnOnce(&mut ParamsOut<'_>),
        io: &[TaskIo],
        deps: impl IntoIterator<Item = TaskId>,
        before: impl FnOnce(TaskId) -> Result<(), E>,
    ) -> Result<TaskId, SubmitError<E>> {
        if !self.staged || self.open {
            return self.submit_task_opened(head, params, io, deps, before);
        }
        // Staged and nothing open: the buffers hold nothing (each submission empties them).
        debug_assert!(self.tasks.is_empty() && self.params.is_empty() && self.io.is_empty());
        let id = self.base;
        assert!(id < u32::MAX, "alloc_task: more than 2^32 - 2 tasks");
        let task = TaskId(id);
        params(&mut ParamsOut(&mut self.params));
        let filled = deps.into_iter().try_for_each(|dep| {
            if dep >= task {
                return Err(BuildError::ForwardDep { task, dep });
            }
            self.explicit.push(dep.0);
            Ok(())
        });
        let hooked = filled
            .map_err(SubmitError::Build)
            .and_then(|()| before(task).map_err(SubmitError::Before));
        let r = hooked.and_then(|()| {
            // The program's one-call submission, which sets a mask: always the instance that
            // tests it (right with an empty mask too), so its callers inline one instance.
            self.submit_staged::<true>(task, head, io)
                .map_err(SubmitError::Build)
        });
        if r.is_err() {
            self.params.clear();
            self.explicit.clear();
            self.nhints = 0;
        }
        r
    }

    /// [`GraphBuilder::submit_task`] for a staged builder with no task open, its params and
    /// explicit dependencies in place: the node is built here and handed to the sink, never
    /// kept (no staged node, no open task). On error nothing reached the map or the sink.
    /// Out of line, as `submit_with` is: inlined, it made `submit_task` large enough that the
    /// interpreter's task statement stopped being inlined into its loop (measured: +21 per
    /// task on a builder that keeps its tasks, the `build bc` column).
    #[inline(never)]
    fn submit_staged<const MASKED: bool>(
        &mut self,
        task: TaskId,
        head: TaskHead,
        io: &[TaskIo],
    ) -> Result<TaskId, BuildError> {
        for r in io {
            if let Some(hint) = self.map.prefetch(&r.region) {
                if let Some(h) = self.hints.get_mut(self.nhints) {
                    *h = hint;
                }
                self.nhints += 1;
            }
        }
        let nparams = self.params.len();
        self.check_counts(task, io.len(), nparams)?;
        self.seen.push(u32::MAX);
        let fanin = infer::<M, S, MASKED>(
            Inference {
                map: &mut self.map,
                sink: &mut self.sink,
                seen: &mut self.seen,
                seen_old: &mut self.seen_old,
                seen_base: self.seen_base,
                stats: &mut self.stats,
                hints: (&self.hints, self.nhints),
                explicit: &self.explicit,
                read_only: &self.read_only,
            },
            task,
            io,
        );
        self.explicit.clear();
        self.nhints = 0;
        let node = TaskNode {
            id: task,
            kernel: head.kernel,
            stream: head.stream,
            affinity: head.affinity.unwrap_or(NO_AFFINITY),
            fanin,
            fanout_start: 0,
            fanout_count: 0,
            params_start: self.params_base as u32,
            io_start: self.io_base as u32,
            params_count: nparams as u16,
            io_count: io.len() as u16,
            tags: SchedTags::NONE,
            domain: head.domain,
            pool: pool_code(head.pool),
        };
        self.sink.publish(&node, &self.params, io);
        self.sink.submitted(task);
        // Written once, to the sink: the buffers are the next task's.
        self.base += 1;
        self.params_base += nparams;
        self.params.clear();
        self.after_submit();
        Ok(task)
    }

    /// [`GraphBuilder::submit_task`] through the open task's calls (a builder that keeps its
    /// tasks, or one with a task open).
    #[inline]
    fn submit_task_opened<E>(
        &mut self,
        head: TaskHead,
        params: impl FnOnce(&mut ParamsOut<'_>),
        io: &[TaskIo],
        deps: impl IntoIterator<Item = TaskId>,
        before: impl FnOnce(TaskId) -> Result<(), E>,
    ) -> Result<TaskId, SubmitError<E>> {
        let id = self.alloc_task(
            head.kernel,
            head.domain,
            head.pool,
            head.stream,
            head.affinity,
        );
        params(&mut ParamsOut(&mut self.params));
        let r = deps
            .into_iter()
            .try_for_each(|d| self.add_explicit_dep(d))
            .map_err(SubmitError::Build)
            .and_then(|()| before(id).map_err(SubmitError::Before))
            .and_then(|()| self.submit_ios(io).map_err(SubmitError::Build));
        if r.is_err() {
            self.abandon();
        }
        r
    }

    /// Opens, fills and submits a task the expander generated, running in `domain`. Scalar
    /// params are stored as [`pto_wsp_ir::Value::to_bits`].
    pub fn submit_expanded(
        &mut self,
        task: &ExpandedTask,
        domain: ExecDomain,
    ) -> Result<TaskId, BuildError> {
        let id = self.alloc_task(task.kernel, domain, task.pool, task.stream, task.target);
        let r = (|| {
            for p in &task.params {
                self.add_param(p.to_bits());
            }
            for r in &task.regions {
                self.add_region(r.access, r.tensor, &r.start, &r.size)?;
            }
            self.submit()
        })();
        if r.is_err() {
            self.abandon();
        }
        r.map(|_| id)
    }

    /// Drops the open task, if any (its id will be reused by the next `alloc_task`).
    pub fn abandon(&mut self) {
        if self.open {
            let n = self.tasks.pop().expect("an open task exists");
            self.io.truncate(n.io_start as usize - self.io_base);
            self.params
                .truncate(n.params_start as usize - self.params_base);
            self.seen.pop();
            self.explicit.clear();
            self.nhints = 0;
            self.open = false;
        }
    }

    /// Tasks older than `oldest_live` have completed: the TensorMap may forget their records, so
    /// it does not grow with the number of tasks under a task window. Edges between live tasks
    /// are unchanged. The unbounded maps (exact and overlap) keep tombstones, so the edges
    /// counted ([`BuildStats::edges`]) are those of a build that never retires (edges to
    /// completed tasks are reported to the sink, or counted as [`BuildStats::forgotten`], and
    /// wired by nobody); the bounded exact map forgets completed tasks outright (see
    /// [`crate::tensor_map`]), so later tasks get no edges from those.
    pub fn retire_before(&mut self, oldest_live: TaskId) {
        self.map.retire_before(oldest_live);
    }

    /// Drops the dedup stamps, and unless they are staged the nodes, params and regions, of the
    /// tasks below `oldest_live` (all submitted), once they are at least half of what the
    /// builder holds (so each task is moved at most once on average). Afterwards
    /// [`GraphBuilder::finish`] is no longer possible.
    fn forget_before(&mut self, oldest_live: TaskId) {
        let submitted = self.seen.len() - usize::from(self.open);
        let k = ((oldest_live.0.saturating_sub(self.seen_base)) as usize).min(submitted);
        if k == 0 || k < self.seen.len() / 2 {
            return;
        }
        self.seen.drain(..k);
        self.seen_base += k as u32;
        if self.staged {
            return;
        }
        // Not staged: the nodes start where the stamps did.
        let (params_to, io_to) = match self.tasks.get(k) {
            Some(n) => (
                n.params_start as usize - self.params_base,
                n.io_start as usize - self.io_base,
            ),
            None => (self.params.len(), self.io.len()),
        };
        self.tasks.drain(..k);
        self.params.drain(..params_to);
        self.io.drain(..io_to);
        self.base += k as u32;
        self.params_base += params_to;
        self.io_base += io_to;
    }

    /// Tasks whose nodes, params and regions the builder holds now (all of them unless its sink
    /// [`EdgeSink::forgets_tasks`]; then the open one at most).
    pub fn held_tasks(&self) -> usize {
        self.tasks.len()
    }

    /// Forgets every task, edge and TensorMap record, keeping every allocation: the next task is
    /// task 0 again and the build that follows gives exactly what a new builder with the same map
    /// configuration would. A runtime that builds the same workload again (every decode step)
    /// reuses one builder this way instead of faulting in fresh tables each time.
    pub fn reset(&mut self) {
        self.tasks.clear();
        self.params.clear();
        self.io.clear();
        self.seen.clear();
        self.nhints = 0;
        self.base = 0;
        self.seen_base = 0;
        self.params_base = 0;
        self.io_base = 0;
        self.explicit.clear();
        self.open = false;
        self.stats = BuildStats::default();
        self.retire_in = RETIRE_EVERY;
        self.map.clear();
        self.sink.clear();
        self.read_only.clear();
    }

    /// Number of tasks allocated (including an open one).
    pub fn len(&self) -> usize {
        self.base as usize + self.tasks.len()
    }

    /// Whether no task was allocated.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The counters so far.
    pub fn stats(&self) -> BuildStats {
        BuildStats {
            map: self.map.stats(),
            ..self.stats
        }
    }

    /// The sink.
    pub fn sink(&self) -> &S {
        &self.sink
    }

    /// The edge sink, mutably (a streaming sink's gate and state).
    pub fn sink_mut(&mut self) -> &mut S {
        &mut self.sink
    }

    /// The map.
    pub fn map(&self) -> &M {
        &self.map
    }

    /// Ends the build for any sink: the storage has tasks, params and regions, fan-in counts but
    /// no fan-out (the sink has the edges).
    ///
    /// # Panics
    /// If a task is open, or tasks were forgotten ([`EdgeSink::forgets_tasks`]).
    pub fn finish_with_sink(self) -> (TaskGraphStorage, S) {
        assert!(!self.open, "finish: a task is still open");
        assert_eq!(
            self.base, 0,
            "finish: the sink let the builder forget tasks"
        );
        (
            TaskGraphStorage {
                tasks: self.tasks,
                fanout: Vec::new(),
                params: self.params,
                io: self.io,
            },
            self.sink,
        )
    }
}

impl<M: TensorMap> GraphBuilder<M, CollectEdges> {
    /// Ends the build: lays the collected edges out as CSR fan-out.
    ///
    /// # Panics
    /// If a task is open.
    pub fn finish(self) -> TaskGraphStorage {
        let (mut g, sink) = self.finish_with_sink();
        let mut cursor = Vec::new();
        lay_out_fanout(&mut g.tasks, &sink, &mut g.fanout, &mut cursor);
        g
    }

    /// Ends the build like [`GraphBuilder::finish`], writing the graph into `out` and
    /// [`GraphBuilder::reset`]ting the builder, with no allocation once capacities have grown:
    /// `out`'s previous contents are dropped and its vectors become the builder's buffers for the
    /// next build. The reuse loop of a runtime that rebuilds a workload: `b.finish_into(&mut g)`.
    ///
    /// # Panics
    /// If a task is open.
    pub fn finish_into(&mut self, out: &mut TaskGraphStorage) {
        assert!(!self.open, "finish: a task is still open");
        std::mem::swap(&mut self.tasks, &mut out.tasks);
        std::mem::swap(&mut self.params, &mut out.params);
        std::mem::swap(&mut self.io, &mut out.io);
        lay_out_fanout(&mut out.tasks, &self.sink, &mut out.fanout, &mut self.seen);
        self.reset();
    }
}

/// Lays the collected predecessor lists out as CSR fan-out (`cursor` is scratch).
pub(crate) fn lay_out_fanout(
    tasks: &mut [TaskNode],
    sink: &CollectEdges,
    fanout: &mut Vec<TaskId>,
    cursor: &mut Vec<u32>,
) {
    let (preds, ends) = (&sink.preds, &sink.ends);
    debug_assert_eq!(ends.len(), tasks.len());
    cursor.clear();
    cursor.resize(tasks.len(), 0);
    for &p in preds {
        cursor[p as usize] += 1;
    }
    let mut at = 0u32;
    for (t, c) in tasks.iter_mut().zip(cursor.iter_mut()) {
        t.fanout_start = at;
        t.fanout_count = *c;
        *c = at;
        at += t.fanout_count;
    }
    fanout.clear();
    fanout.resize(preds.len(), TaskId(0));
    let mut begin = 0usize;
    for (succ, &end) in ends.iter().enumerate() {
        for &p in &preds[begin..end as usize] {
            let c = &mut cursor[p as usize];
            fanout[*c as usize] = TaskId(succ as u32);
            *c += 1;
        }
        begin = end as usize;
    }
}
