//! Running a finished graph: every task of a [`TaskGraphStorage`] once, in an order its edges
//! allow, on the workers of a [`WorkerPool`].
//!
//! A [`StaticGraph`] wraps the storage with what a run needs beside it: the sources (tasks with
//! no predecessor) and one join counter per task, reset from the stored fan-in at the start of
//! every run — so the same graph runs any number of times ("run-only" in the benchmarks). A
//! successor is ready when its counter reaches zero; the predecessor that finds the counter at
//! 1 is the last one and skips the read-modify-write (the common single-predecessor case costs
//! one load).

use std::time::Instant;

use pto_wsp_graph::TaskId;
use pto_wsp_graph::counters::Counters;
use pto_wsp_graph::order_check::check_storage;
use pto_wsp_graph::ready::ReadyKind;
use pto_wsp_graph::storage::TaskGraphStorage;
use pto_wsp_ir::{DepsMode, GateScope};

use crate::engine::{Engine, Meta, RunGraph, WorkerReport};
use crate::exec::{Exec, ExecError, UnorderedRun};
use crate::pool::WorkerPool;
use crate::stats::RunStats;
use crate::sync::{Arc, AtomicBool, AtomicU32, Ordering};

/// How workers are split into pools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolSplit {
    /// Every worker runs every task.
    Single,
    /// Workers `0..vector` run vector (and `Any`) tasks, the others cube (and `Any`) tasks.
    /// Clamped so each side has a worker; with one worker it acts as `Single`.
    ByExecUnit {
        /// Number of vector workers.
        vector: usize,
    },
}

/// An issue gate: at most `depth` tasks issued and unfinished per scope instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GateConfig {
    /// The depth `D`.
    pub depth: u32,
    /// Global, per stream or per pool.
    pub scope: GateScope,
    /// Number of streams (for `per_stream`).
    pub streams: u64,
}

/// How a graph runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunConfig {
    /// Ready policy.
    pub ready: ReadyKind,
    /// Pools.
    pub pools: PoolSplit,
    /// Honour each task's dispatch target (`target mod threads`) when queueing it.
    pub placement: bool,
    /// Issue gate, if any.
    pub gate: Option<GateConfig>,
    /// Dependency batching: completions released in batches of this many (1 = off).
    pub batch: u32,
    /// Record the wall-clock span of every task.
    pub trace: bool,
}

impl Default for RunConfig {
    fn default() -> RunConfig {
        RunConfig {
            ready: ReadyKind::WorkSteal,
            pools: PoolSplit::Single,
            placement: false,
            gate: None,
            batch: 1,
            trace: false,
        }
    }
}

/// A finished graph prepared for running (any number of times, one run at a time).
#[derive(Debug)]
pub struct StaticGraph {
    storage: TaskGraphStorage,
    sources: Vec<TaskId>,
    /// Fan-out of task `t` is `fanout[first[t]..first[t + 1]]`: the CSR offsets without the
    /// rest of the node, so releasing a task touches 8 bytes of it, not its 44-byte node.
    first: Box<[u32]>,
    /// Stored fan-in of every task, the value join counters are reset to.
    fanin: Box<[u32]>,
    join: Box<[AtomicU32]>,
    priorities: Vec<i64>,
    busy: AtomicBool,
}

impl StaticGraph {
    /// Prepares `storage`.
    pub fn new(storage: TaskGraphStorage) -> StaticGraph {
        let sources = storage
            .tasks
            .iter()
            .filter(|n| n.fanin == 0)
            .map(|n| n.id)
            .collect();
        let join = storage.tasks.iter().map(|_| AtomicU32::new(0)).collect();
        let mut first: Vec<u32> = storage.tasks.iter().map(|n| n.fanout_start).collect();
        first.push(storage.fanout.len() as u32);
        debug_assert!(
            storage
                .tasks
                .iter()
                .enumerate()
                .all(|(i, n)| { n.fanout_start + n.fanout_count == first[i + 1] })
        );
        let fanin = storage.tasks.iter().map(|n| n.fanin).collect();
        StaticGraph {
            storage,
            sources,
            first: first.into_boxed_slice(),
            fanin,
            join,
            priorities: Vec::new(),
            busy: AtomicBool::new(false),
        }
    }

    /// Sets the priority key of every task (used by the priority ready policy; higher first).
    /// Tasks beyond `keys` get 0.
    pub fn with_priorities(mut self, keys: Vec<i64>) -> StaticGraph {
        self.priorities = keys;
        self
    }

    /// The graph.
    pub fn storage(&self) -> &TaskGraphStorage {
        &self.storage
    }

    /// Number of tasks.
    pub fn len(&self) -> usize {
        self.storage.tasks.len()
    }

    /// Whether the graph has no task.
    pub fn is_empty(&self) -> bool {
        self.storage.tasks.is_empty()
    }

    /// The tasks with no predecessor.
    pub fn sources(&self) -> &[TaskId] {
        &self.sources
    }

    /// The order check of `--check` for a finished graph built under `deps`: every two tasks
    /// whose regions conflict must be ordered by a path of its edges
    /// ([`pto_wsp_graph::order_check`]); otherwise [`ExecError::Unordered`] names the first
    /// pair. A checked run calls it before [`WorkerPool::run`] (nothing else orders the tasks
    /// of a finished graph).
    pub fn check_order(&self, deps: DepsMode) -> Result<(), ExecError> {
        check_storage(&self.storage)
            .map_err(|pair| ExecError::Unordered(Box::new(UnorderedRun::new(pair, deps))))
    }
}

impl RunGraph for StaticGraph {
    #[inline]
    fn meta(&self, t: TaskId) -> Meta {
        let n = &self.storage.tasks[t.index()];
        Meta {
            pool: n.pool(),
            affinity: n.affinity(),
            stream: n.stream,
        }
    }

    #[inline]
    fn priority(&self, t: TaskId) -> i64 {
        self.priorities.get(t.index()).copied().unwrap_or(0)
    }

    #[inline]
    fn release(&self, t: TaskId, alone: bool, mut ready: impl FnMut(TaskId)) {
        let (a, b) = (self.first[t.index()], self.first[t.index() + 1]);
        if alone {
            // The only thread touching the counters during the run (they were reset before it
            // started, and the run's start orders that): a plain load and store, no locked
            // read-modify-write to serialise the cache misses of a wide fan-out.
            for &s in &self.storage.fanout[a as usize..b as usize] {
                let c = &self.join[s.index()];
                let v = c.load(Ordering::Relaxed);
                if v == 1 {
                    ready(s);
                } else {
                    c.store(v - 1, Ordering::Relaxed);
                }
            }
            return;
        }
        for &s in &self.storage.fanout[a as usize..b as usize] {
            let c = &self.join[s.index()];
            // Acquire on both paths: the last predecessor acquires the release sequence of
            // the others' decrements, so their work happens before `s` runs.
            if c.load(Ordering::Acquire) == 1 || c.fetch_sub(1, Ordering::AcqRel) == 1 {
                ready(s);
            }
        }
    }
}

/// Turns the engine's outcome into stats or the first error.
pub(crate) fn finish_stats(
    error: Option<ExecError>,
    reports: Vec<WorkerReport>,
    t0: Instant,
    counters: &Counters,
    workers: usize,
) -> Result<RunStats, ExecError> {
    let run_ns = t0.elapsed().as_nanos() as u64;
    if let Some(e) = error {
        return Err(e);
    }
    let mut per_worker = vec![0; workers];
    let mut spans = Vec::new();
    for r in reports {
        per_worker[r.worker] = r.tasks;
        spans.extend(r.spans);
    }
    Ok(RunStats {
        tasks: per_worker.iter().sum(),
        per_worker,
        edges: 0,
        build_ns: 0,
        run_ns,
        counters: counters.snapshot(),
        spans,
        ..RunStats::default()
    })
}

impl WorkerPool {
    /// Runs every task of `graph` once, in an order its edges allow, with `exec` running each
    /// task. Fails with the first task failure (the rest of the run is abandoned) or if `graph`
    /// is already running elsewhere.
    pub fn run<E: Exec>(
        &self,
        graph: &StaticGraph,
        config: &RunConfig,
        exec: &E,
    ) -> Result<RunStats, ExecError> {
        if graph.busy.swap(true, Ordering::Acquire) {
            return Err(ExecError::Setup(
                "this graph is already running on another pool".into(),
            ));
        }
        struct Idle<'a>(&'a AtomicBool);
        impl Drop for Idle<'_> {
            fn drop(&mut self) {
                self.0.store(false, Ordering::Release);
            }
        }
        let _busy = Idle(&graph.busy);
        for (c, &f) in graph.join.iter().zip(graph.fanin.iter()) {
            c.store(f, Ordering::Relaxed);
        }
        let workers = self.threads();
        let counters = Arc::new(Counters::new(workers + 1));
        // Under FIFO and priority the sources go through the shared queue, in id order.
        let claimed: &[TaskId] = if config.ready == ReadyKind::WorkSteal {
            &graph.sources
        } else {
            &[]
        };
        let engine = Engine::new(
            graph,
            exec,
            config,
            workers,
            claimed,
            Some(graph.len() as u64),
            None,
            Arc::clone(&counters),
        );
        if claimed.is_empty() {
            for &s in &graph.sources {
                engine.push_external(s);
            }
        }
        let r = self.broadcast(&|w| engine.worker(w));
        let (error, reports, t0) = engine.into_outcome();
        let error = match r {
            Err(p) => Some(ExecError::Internal(p.0)),
            Ok(()) => error,
        };
        let mut stats = finish_stats(error, reports, t0, &counters, workers)?;
        stats.edges = graph.storage.edge_count() as u64;
        stats.wired_edges = stats.edges;
        Ok(stats)
    }
}
