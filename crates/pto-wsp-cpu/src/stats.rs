//! What a run reports: counts, times, stalls, high-water marks, and (when traced) the wall-clock
//! span of every task.

use pto_wsp_graph::counters::CounterSnapshot;
use pto_wsp_graph::tensor_map::MapStats;

use crate::devgen::DevGenStats;
use crate::sim::CycleStats;

/// The wall-clock span of one task on one worker (nanoseconds since the run started).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// The task: its graph id in a run of a task graph; its expander index (as `pto-wsp
    /// expand` lists it) in a device-generation run and in every run through `Program`.
    pub task: u32,
    /// The worker that ran it.
    pub worker: u32,
    /// Start.
    pub start_ns: u64,
    /// End.
    pub end_ns: u64,
}

/// Statistics of one run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Tasks run (barrier tasks of structural order included).
    pub tasks: u64,
    /// Of [`RunStats::tasks`], the barrier tasks inserted to join structural orders
    /// (`for_each`, `sequential` with several earlier tasks): they run no kernel.
    pub barriers: u64,
    /// Tasks run per worker.
    pub per_worker: Vec<u64>,
    /// Edges of the graph (inferred, explicit and structural), as the dependency inference
    /// found them.
    pub edges: u64,
    /// Of [`RunStats::edges`], those wired to a producer still running when its consumer was
    /// added (the rest cost nothing: the producer had completed). Depends on timing.
    pub wired_edges: u64,
    /// Of [`RunStats::edges`], those to completed readers the TensorMap kept only as a count
    /// ([`pto_wsp_graph::TaskId::FORGOTTEN`]): a count cannot be deduplicated, so one such
    /// reader reaching a task twice counts twice, and only then can `edges` differ from the
    /// count of a build that never retires. 0 for a graph built before running.
    pub edges_unnamed: u64,
    /// Nanoseconds spent building the graph (0 for a graph built before the run).
    pub build_ns: u64,
    /// Nanoseconds from the start of the run to its last completion.
    pub run_ns: u64,
    /// Scheduler counters: ready-queue traffic, steals, window and gate stalls, batches,
    /// high-water marks.
    pub counters: CounterSnapshot,
    /// Wall-clock spans of every task, when tracing was on (ordered by worker, then start).
    pub spans: Vec<Span>,
    /// Every edge (predecessor, successor) of a streamed run's graph, when
    /// [`crate::StreamConfig::record_edges`] was on; empty otherwise.
    pub edge_list: Vec<(u32, u32)>,
    /// The cycle-cost model's result, when the run was traced in cycles (`trace cycles`).
    pub cycles: Option<CycleStats>,
    /// The device timeline model's runs (device generation, then host generation), when the
    /// run was traced on a machine (`trace cycles device(NAME)`, `--machine`).
    pub device: Vec<crate::sim::DeviceRun>,
    /// The TensorMap of a streamed run at its end: hits, misses, live entries and their
    /// high-water mark (the distinct regions not yet covered by a write: the maps keep
    /// tombstones of completed tasks, so that the edges found do not depend on timing). For a
    /// device-generation run, the sum over the executors' maps (each holds its share of the
    /// tensors; the high-water figure is the sum of theirs, an upper bound of the whole's).
    pub tensor_map: MapStats,
    /// Most per-task entries a streamed or device-generation run held at once (task states,
    /// task table, per-executor task records; whole chunks of
    /// [`pto_wsp_graph::arena::CHUNK`]): under a task window it follows the tasks between the
    /// oldest unfinished one and the newest generated, not the task count. 0 for a finished
    /// graph.
    pub held_tasks_peak: u64,
    /// Per-executor figures of a device-generation run ([`crate::devgen`]); `None` for host
    /// builds.
    pub device_gen: Option<DevGenStats>,
    /// The generator's computed reads and how often and how long it waited on them
    /// ([`crate::datadep`]); `while` loops that reached their bound.
    pub generation: crate::datadep::GenStats,
}

impl RunStats {
    /// Tasks per millisecond of wall-clock run time.
    pub fn tasks_per_ms(&self) -> f64 {
        if self.run_ns == 0 {
            0.0
        } else {
            self.tasks as f64 * 1e6 / self.run_ns as f64
        }
    }

    /// Nanoseconds per task of the run.
    pub fn ns_per_task(&self) -> f64 {
        if self.tasks == 0 {
            0.0
        } else {
            self.run_ns as f64 / self.tasks as f64
        }
    }
}
