//! A builder for graphs whose every edge is named: each task comes with its predecessors, and no
//! region is inferred (the Taskflow shapes of `pto-wsp bench`, a generator that knows its
//! dependencies).
//!
//! Why: the general [`GraphBuilder`] keeps an open task, its regions and params, a TensorMap
//! call, a dedup stamp per task id and a list of explicit dependencies, all of which cost
//! instructions on every task even when no region is named. When nothing is inferred a task is
//! complete the moment it is named, so [`ExplicitBuilder::add`] takes the node's fields and the
//! predecessor list in one call and writes the task once: into its own node array for a
//! finished graph, or straight to the sink for a streamed one (a sink that
//! [`EdgeSink::forgets_tasks`] gets each node in [`EdgeSink::publish`] and the builder keeps
//! nothing).
//!
//! Promises:
//! - For the same tasks and predecessor lists, the graph [`ExplicitBuilder::finish`] lays out
//!   is the one the general builder in [`DepsMode::Explicit`] mode builds with
//!   [`GraphBuilder::add_explicit_dep`] (same nodes, same CSR fan-out, same fan-in), and a sink
//!   gets the same edges (duplicates dropped; in the order given, except that a list longer than
//!   16 is reported in increasing order) and the same
//!   `edge` / `publish` / `submitted` / `retire_hint` sequence. [`ExplicitEdges`] lets one
//!   generator feed either.
//! - A task never gets the same predecessor twice, never itself, and only earlier tasks: a
//!   predecessor that is not earlier fails with [`BuildError::ForwardDep`] and nothing of the
//!   task reaches the sink.
//! - Nothing allocates per task once the node and edge vectors have grown.
//!
//! [`DepsMode::Explicit`]: pto_wsp_ir::DepsMode::Explicit

use crate::builder::{BuildError, BuildStats, CollectEdges, EdgeSink, GraphBuilder, RETIRE_EVERY};
use crate::storage::{TaskGraphStorage, TaskNode};
use crate::tensor_map::TensorMap;
use crate::types::{ExecDomain, ExecPool, NO_AFFINITY, SchedTags, TaskId, pool_code};

/// The fields of a task an explicit-edge generator sets (everything of a [`TaskNode`] but its
/// id, its edges and its params and regions, of which it has none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExplicitTask {
    /// The kernel that runs.
    pub kernel: u32,
    /// Where it runs.
    pub domain: ExecDomain,
    /// The pool it runs in.
    pub pool: ExecPool,
    /// Its stream.
    pub stream: u32,
    /// The executor it is pinned to, if any.
    pub affinity: Option<u32>,
    /// Its schedule tags.
    pub tags: SchedTags,
}

impl ExplicitTask {
    /// Kernel `kernel` on a host CPU thread of any pool, stream 0, no affinity, no tags.
    pub const fn host(kernel: u32) -> ExplicitTask {
        ExplicitTask {
            kernel,
            domain: ExecDomain::HostCpu,
            pool: ExecPool::Any,
            stream: 0,
            affinity: None,
            tags: SchedTags::NONE,
        }
    }
}

/// A builder a generator of explicit edges can feed: the general [`GraphBuilder`] (any mode;
/// the task names no region) or the [`ExplicitBuilder`].
pub trait ExplicitEdges {
    /// Tasks added so far (the next task's id).
    fn tasks_added(&self) -> usize;
    /// Adds `task`, after every task of `preds` (all earlier); returns its id. On an error
    /// nothing of the task is kept.
    fn add_explicit(&mut self, task: &ExplicitTask, preds: &[TaskId])
    -> Result<TaskId, BuildError>;
}

impl<M: TensorMap, S: EdgeSink> ExplicitEdges for GraphBuilder<M, S> {
    fn tasks_added(&self) -> usize {
        self.len()
    }

    #[inline]
    fn add_explicit(
        &mut self,
        task: &ExplicitTask,
        preds: &[TaskId],
    ) -> Result<TaskId, BuildError> {
        self.alloc_task(
            task.kernel,
            task.domain,
            task.pool,
            task.stream,
            task.affinity,
        );
        if task.tags != SchedTags::NONE {
            self.set_tags(task.tags);
        }
        for &p in preds {
            if let Err(e) = self.add_explicit_dep(p) {
                self.abandon();
                return Err(e);
            }
        }
        self.submit()
    }
}

/// Predecessor lists up to this length are deduplicated by comparing with the earlier entries;
/// longer ones through a sorted copy.
const SHORT_PREDS: usize = 16;

/// Builds a graph of named edges, reporting them to an [`EdgeSink`] `S` (module docs).
#[derive(Debug)]
pub struct ExplicitBuilder<S: EdgeSink = CollectEdges> {
    sink: S,
    /// The nodes, unless the sink forgets tasks.
    tasks: Vec<TaskNode>,
    /// `!sink.forgets_tasks()`, asked once.
    keep: bool,
    /// The next task's id.
    next: u32,
    /// Scratch for deduplicating a long predecessor list.
    sorted: Vec<u32>,
    stats: BuildStats,
    /// Submissions until the next [`EdgeSink::retire_hint`].
    retire_in: u32,
}

impl ExplicitBuilder {
    /// A builder that collects the graph for [`ExplicitBuilder::finish`].
    pub fn new() -> ExplicitBuilder {
        ExplicitBuilder::with_sink(CollectEdges::default())
    }
}

impl Default for ExplicitBuilder {
    fn default() -> ExplicitBuilder {
        ExplicitBuilder::new()
    }
}

impl<S: EdgeSink> ExplicitBuilder<S> {
    /// A builder reporting to `sink`.
    pub fn with_sink(sink: S) -> ExplicitBuilder<S> {
        let keep = !sink.forgets_tasks();
        ExplicitBuilder {
            sink,
            tasks: Vec::new(),
            keep,
            next: 0,
            sorted: Vec::new(),
            stats: BuildStats::default(),
            retire_in: RETIRE_EVERY,
        }
    }

    /// Reserves room for `tasks` more tasks (nodes, when kept).
    pub fn reserve(&mut self, tasks: usize) {
        if self.keep {
            self.tasks.reserve(tasks);
        }
    }

    /// Adds `task`, to run after every task of `preds`; returns its id. Duplicates in `preds`
    /// count once (and in [`BuildStats::duplicates`]).
    ///
    /// # Errors
    /// [`BuildError::ForwardDep`] when a predecessor is not earlier; nothing of the task is kept
    /// and the next task gets the same id.
    ///
    /// # Panics
    /// After `u32::MAX` tasks (ids stay below [`TaskId::FORGOTTEN`]).
    #[inline]
    pub fn add(&mut self, task: &ExplicitTask, preds: &[TaskId]) -> Result<TaskId, BuildError> {
        let id = TaskId(self.next);
        assert!(id.0 < u32::MAX, "add: more than 2^32 - 1 tasks");
        // One pass for the common case (every predecessor earlier), before anything is reported.
        if preds.iter().any(|&p| p >= id) {
            let dep = *preds.iter().find(|&&p| p >= id).expect("found above");
            return Err(BuildError::ForwardDep { task: id, dep });
        }
        let fanin = if preds.len() <= SHORT_PREDS {
            let mut fanin = 0u32;
            for (k, &p) in preds.iter().enumerate() {
                if preds[..k].contains(&p) {
                    continue;
                }
                self.sink.edge(p, id);
                fanin += 1;
            }
            fanin
        } else {
            self.long_preds(id, preds)
        };
        self.stats.explicit += u64::from(fanin);
        self.stats.duplicates += (preds.len() - fanin as usize) as u64;
        let node = TaskNode {
            id,
            kernel: task.kernel,
            stream: task.stream,
            affinity: task.affinity.unwrap_or(NO_AFFINITY),
            fanin,
            fanout_start: 0,
            fanout_count: 0,
            params_start: 0,
            io_start: 0,
            params_count: 0,
            io_count: 0,
            tags: task.tags,
            domain: task.domain,
            pool: pool_code(task.pool),
        };
        self.sink.publish(&node, &[], &[]);
        self.sink.submitted(id);
        if self.keep {
            self.tasks.push(node);
        }
        self.next += 1;
        self.stats.tasks += 1;
        self.retire_in -= 1;
        if self.retire_in == 0 {
            // Nothing to forget here (no map, no held tasks when the sink forgets them), but the
            // sink frees what it holds behind the completed prefix when asked.
            self.retire_in = RETIRE_EVERY;
            let _ = self.sink.retire_hint();
        }
        Ok(id)
    }

    /// Reports the distinct predecessors of a long list, in increasing order; returns how many.
    #[cold]
    fn long_preds(&mut self, id: TaskId, preds: &[TaskId]) -> u32 {
        self.sorted.clear();
        self.sorted.extend(preds.iter().map(|p| p.0));
        self.sorted.sort_unstable();
        self.sorted.dedup();
        for &p in &self.sorted {
            self.sink.edge(TaskId(p), id);
        }
        self.sorted.len() as u32
    }

    /// Tasks added so far.
    pub fn len(&self) -> usize {
        self.next as usize
    }

    /// Whether no task was added.
    pub fn is_empty(&self) -> bool {
        self.next == 0
    }

    /// The counters so far (every edge is [`BuildStats::explicit`]; the map's are zero).
    pub fn stats(&self) -> BuildStats {
        self.stats
    }

    /// The sink.
    pub fn sink(&self) -> &S {
        &self.sink
    }

    /// The sink, mutably.
    pub fn sink_mut(&mut self) -> &mut S {
        &mut self.sink
    }
}

impl ExplicitBuilder<CollectEdges> {
    /// Ends the build: the nodes and the collected edges laid out as CSR fan-out (no params, no
    /// regions).
    pub fn finish(self) -> TaskGraphStorage {
        let mut tasks = self.tasks;
        let mut fanout = Vec::new();
        let mut cursor = Vec::new();
        crate::builder::lay_out_fanout(&mut tasks, &self.sink, &mut fanout, &mut cursor);
        TaskGraphStorage {
            tasks,
            fanout,
            params: Vec::new(),
            io: Vec::new(),
        }
    }
}

impl<S: EdgeSink> ExplicitEdges for ExplicitBuilder<S> {
    fn tasks_added(&self) -> usize {
        self.len()
    }

    #[inline]
    fn add_explicit(
        &mut self,
        task: &ExplicitTask,
        preds: &[TaskId],
    ) -> Result<TaskId, BuildError> {
        self.add(task, preds)
    }
}
