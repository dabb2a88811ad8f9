//! The cycle-cost model (`trace cycles`, the concurrency-mechanisms specification's trace policy):
//! given each task's cost in cycles, the graph's edges and the schedule, a deterministic simulation
//! of the run on the *modelled* executors (the schedule's `executors N`, not the host's threads),
//! and its makespan (`total_cycles`).
//!
//! Why a model beside the wall clock: the CPU simulation runs on a handful of host threads, while
//! the target has dozens of cores; a user comparing schedules wants to know what the schedule
//! would do there, independent of how loaded the host is. So the model follows every schedule
//! directive a run honours, with the same meaning (`docs/SEMANTICS.md`, "Schedule directives"):
//!
//! - **Orchestration** submits the tasks one at a time in program order, spending
//!   [`SimSchedule::issue_cycles`] on each (0 by default: generation is free). The **task
//!   window** counts tasks submitted and not finished: `stall` makes the orchestrator wait for a
//!   completion, `abort` fails the model naming the task, `benchmark` counts the overflow.
//! - **Timing** decides when a submitted task is *released* (may start once its predecessors
//!   are done): the rule of [`pto_wsp_graph::timing`] (`immediate`, `batched(n)`,
//!   `interleaved(n)`, `rate_limit(n)` per [`RATE_PERIOD`] cycles), with the model's clock.
//!   Groups and rounds still held are released when orchestration ends or would wait on the
//!   window.
//! - **Start**: no task starts before the start gate opens: at once (`immediate`), once
//!   `threshold(n)` tasks are submitted, or when orchestration ends (`after_orchestration`);
//!   either also opens when orchestration would wait on the window.
//! - **Ready order**: a task is ready at the latest of its release and its predecessors'
//!   finishes. Under `fifo` executors take ready tasks in the order they became ready (task id
//!   on a tie); under `priority` highest key first, then that order; under `work_steal` each
//!   executor has a deque: a task readied by a finishing task goes to that executor's deque
//!   (sources to `id mod executors`), the owner takes its newest task, and an executor with an
//!   empty deque steals the oldest task of the lowest-numbered executor that has one.
//! - **Dispatch targets and pools**: when [`SimMachine::placement`] is on, a task with a target
//!   goes to executor `target mod executors` if that executor serves its pool (under
//!   `work_steal` it may still be stolen: a *migration*, counted); otherwise any executor of its
//!   pool may take it (vector / cube under a pool split).
//! - **Dependency batching** (`batch_deps N`): an executor resolves the completions of the tasks
//!   it ran (readies their successors) once it holds `N` of them, or when it has nothing to run.
//! - **Gates** (`pipeline_depth D SCOPE`): at most `D` tasks of a scope (everything, a stream, a
//!   pool) run at once. An executor that took a task whose scope is full waits, holding it,
//!   until a task of that scope finishes (waiters are served in the order they arrived), as a
//!   host worker blocks on the gate.
//!
//! **Device timing** ([`simulate_device`]): the same schedule-following engine with the costs of
//! a device's control path added (the device timeline model; the machine's figures come from
//! its machine description, converted to one time unit by the caller): each task costs
//! [`DeviceTimes::generate`] on the orchestrator; the executors are the device's cores, each owned by
//! one of [`DeviceTimes::schedulers`] scheduler threads, modelled as serial servers: taking a
//! ready task costs its thread `sched_dispatch`, the kernel starts `land` later (the dispatch
//! write landing plus the core's setup) and occupies the core for its cost; its completion
//! becomes visible `completion` after it ends, and the owning thread then spends
//! `sched_complete + sched_per_edge × successors` before the successors are readied and the
//! core is free again. So a chain of N tasks takes `g + N·(s_d + land + c + f + s_c) + (N−1)·e`
//! and N independent tasks on C free cores `⌈N/C⌉·(land + c + f)` (zero scheduler costs).
//! A core holds one task at a time (no pending slot).
//!
//! A CSP pipeline is modelled apart ([`simulate_pipeline`]): a clock per process, channels of
//! their declared depth.
//!
//! At each instant the model first finishes tasks, then lets orchestration submit, then releases,
//! then lets idle executors take tasks in executor order; a task occupies its executor for its
//! cost. Promises: the result depends only on the inputs (never on the host); `total_cycles` is
//! at least the critical path (longest cost-weighted path) and at least the total work divided by
//! the executors; with one executor, or with `pipeline_depth 1 global`, it is exactly the total
//! work (when orchestration is free and nothing holds releases back).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use pto_wsp_graph::TaskId;
pub use pto_wsp_graph::timing::RATE_PERIOD;
use pto_wsp_graph::timing::ReleaseTiming;
use pto_wsp_ir::{ExecPool, GateScope, StartPolicy, Timing, WindowMode};

/// One task as the model sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimTask {
    /// Cost in cycles.
    pub cost: u64,
    /// The pool it runs in.
    pub pool: ExecPool,
    /// The executor its dispatch policy chose, if any.
    pub target: Option<u32>,
    /// Its stream (`stream_by`, else index mod streams).
    pub stream: u32,
    /// Its `ready priority(..)` key (higher first); ignored under other ready policies.
    pub priority: i64,
}

impl SimTask {
    /// A task of `cost` cycles in the `Any` pool, stream 0, no target, priority 0.
    pub fn with_cost(cost: u64) -> SimTask {
        SimTask {
            cost,
            pool: ExecPool::Any,
            target: None,
            stream: 0,
            priority: 0,
        }
    }
}

/// The modelled machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimMachine {
    /// Number of executors (at least 1).
    pub executors: u32,
    /// Under a pool split: executors `0..vector` run vector tasks, the rest cube tasks (`Any`
    /// tasks run anywhere). `None`: every executor runs everything.
    pub vector: Option<u32>,
    /// Honour dispatch targets (`target mod executors`).
    pub placement: bool,
}

/// The order in which executors take ready tasks (the schedule's `ready` policy).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SimReady {
    /// `fifo`: in the order tasks became ready.
    #[default]
    Fifo,
    /// `priority(..)`: highest [`SimTask::priority`] first.
    Priority,
    /// `work_steal`: per-executor deques with stealing.
    WorkSteal,
}

/// The schedule the model follows (see the module docs for each item's meaning).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimSchedule {
    /// Cycles orchestration spends submitting each task.
    pub issue_cycles: u64,
    /// `task_window N MODE`.
    pub window: Option<(u64, WindowMode)>,
    /// `pipeline_depth D SCOPE`.
    pub gate: Option<(u64, GateScope)>,
    /// `start POLICY`.
    pub start: StartPolicy,
    /// `timing POLICY`.
    pub timing: Timing,
    /// `ready POLICY`.
    pub ready: SimReady,
    /// Number of streams (`streams N`): the rounds of `interleaved(n)`.
    pub streams: u32,
    /// `batch_deps N`: an executor resolves its completions (readies their successors) once it
    /// holds `N`, and whenever it has nothing to run.
    pub batch_deps: u64,
}

impl Default for SimSchedule {
    fn default() -> SimSchedule {
        SimSchedule {
            issue_cycles: 0,
            window: None,
            gate: None,
            start: StartPolicy::Immediate,
            timing: Timing::Immediate,
            ready: SimReady::Fifo,
            streams: 1,
            batch_deps: 1,
        }
    }
}

/// What the model reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CycleStats {
    /// Simulated makespan: the last finish time.
    pub total_cycles: u64,
    /// Sum of every task's cost.
    pub work_cycles: u64,
    /// Longest cost-weighted path through the graph (a lower bound of the makespan).
    pub critical_path: u64,
    /// Busy cycles per modelled executor.
    pub busy: Vec<u64>,
    /// When orchestration submitted its last task.
    pub orchestration_cycles: u64,
    /// Submissions that found a `benchmark` window full.
    pub window_overflows: u64,
    /// Tasks that ran on another executor than their dispatch target (stolen).
    pub migrations: u64,
    /// Start cycle of every task, by task id.
    pub starts: Vec<u64>,
}

impl CycleStats {
    /// Busy cycles over `executors × total_cycles` (1.0 = every executor always busy).
    pub fn utilization(&self) -> f64 {
        let cap = self.total_cycles as f64 * self.busy.len() as f64;
        if cap == 0.0 {
            0.0
        } else {
            self.work_cycles as f64 / cap
        }
    }
}

/// Why the model could not run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    /// An edge names a task that does not exist, or does not go forward.
    #[error("edge {pred} -> {succ} names a task beyond the {tasks} tasks or goes backwards")]
    BadEdge {
        /// Predecessor.
        pred: u32,
        /// Successor.
        succ: u32,
        /// Number of tasks.
        tasks: usize,
    },
    /// A pipeline step names a channel that does not exist.
    #[error("a pipeline step names channel {channel}, which does not exist")]
    BadChannel {
        /// The channel index.
        channel: u32,
    },
    /// The recorded pipeline cannot be replayed (its steps do not come from one run).
    #[error("the recorded pipeline cannot be replayed: {waiting} process(es) wait forever")]
    PipelineStuck {
        /// Processes that never end.
        waiting: usize,
    },
    /// The device timing does not fit the tasks or the machine.
    #[error("device model: {0}")]
    BadDevice(String),
    /// A task's submission found the `abort` window full.
    #[error(
        "task_window {capacity} abort: task {task} was submitted at cycle {cycle} with \
         {capacity} tasks in flight"
    )]
    WindowFull {
        /// The task.
        task: u32,
        /// The window's size.
        capacity: u64,
        /// When.
        cycle: u64,
    },
}

/// Simulates `tasks` with `edges` (predecessor, successor; every edge goes from a lower to a
/// higher task id, as a built graph's do) on `machine` under `schedule` (see the module docs).
pub fn simulate(
    tasks: &[SimTask],
    edges: &[(u32, u32)],
    machine: &SimMachine,
    schedule: &SimSchedule,
) -> Result<CycleStats, SimError> {
    Ok(Model::new(tasks, edges, machine, schedule, None)?.run()?.0)
}

/// The device's control-path costs for [`simulate_device`] (see the module docs), all in the
/// model's time unit.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceTimes {
    /// Generation cost of each task on the orchestrator (by task id; empty: the schedule's
    /// `issue_cycles` for every task).
    pub generate: Vec<u64>,
    /// Scheduler thread owning each executor (by executor; empty: one thread owns all).
    pub owner: Vec<u32>,
    /// Number of scheduler threads (at least 1).
    pub schedulers: u32,
    /// Scheduler time to dispatch one task.
    pub sched_dispatch: u64,
    /// From the dispatch write to the kernel's start (landing plus core setup).
    pub land: u64,
    /// From the kernel's end to its completion being visible to its scheduler thread.
    pub completion: u64,
    /// Scheduler time to process one completion.
    pub sched_complete: u64,
    /// Scheduler time per successor edge of a completion.
    pub sched_per_edge: u64,
    /// Tasks that run on no core (barrier tasks): their scheduler thread completes them at
    /// dispatch, with no handshake (by task id; empty: none).
    pub no_core: Vec<bool>,
    /// Record the timeline (per-task times, orchestrator and scheduler intervals).
    pub record: bool,
}

/// One device-model run of a finished run's graph on a machine, as reports and pictures need
/// it (times in picoseconds).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceRun {
    /// The machine's name.
    pub machine: String,
    /// Host generation (the host builds and uploads the graph first) or device generation.
    pub host_generation: bool,
    /// Time before the device starts: host generation, upload and launch (0 for device
    /// generation).
    pub prefix_ps: u64,
    /// Makespan: [`Self::prefix_ps`] plus the device's part.
    pub makespan_ps: u64,
    /// Core kinds: name, first executor, cores, busy picoseconds.
    pub kinds: Vec<(String, u32, u32, u64)>,
    /// Orchestrator threads generating (0 under host generation) and scheduler threads.
    pub orchestrators: u32,
    /// Scheduler threads.
    pub schedulers: u32,
    /// The engine's statistics (times of the device's part, from its start).
    pub stats: CycleStats,
    /// Device-specific results.
    pub report: DeviceReport,
    /// Kernel of every task (an index into [`Self::kernel_names`]; `u32::MAX` for a barrier).
    pub task_kernel: Vec<u32>,
    /// Kernel names.
    pub kernel_names: Vec<String>,
    /// Expander index of every task (as `pto-wsp expand` lists it; `u32::MAX` for a barrier),
    /// filled in by the run that modelled it; empty: the task ids are the indices.
    pub task_index: Vec<u32>,
    /// What the model approximated for this run, for the report.
    pub notes: Vec<String>,
}

/// What a task waited for, summed over tasks (see [`DeviceReport::waits`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Waits {
    /// Its inputs were done but it was not yet generated (or released).
    pub generation: u64,
    /// Generated, waiting for its predecessors (their completion handshake included).
    pub dependencies: u64,
    /// Ready, but no core of its kind (or gate slot, or its placed core) took it yet.
    pub free_core: u64,
    /// Taken by a core, waiting for its scheduler thread, the dispatch and the core's setup.
    pub dispatch: u64,
}

/// What a control thread does in an [`Interval`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Work {
    /// The orchestrator generates the task.
    Generate,
    /// A scheduler thread dispatches the task to its core.
    Dispatch,
    /// A scheduler thread processes the task's completion (readies its successors).
    Complete,
}

impl Work {
    /// `generate`, `dispatch` or `complete`.
    pub fn name(self) -> &'static str {
        match self {
            Work::Generate => "generate",
            Work::Dispatch => "dispatch",
            Work::Complete => "complete",
        }
    }
}

/// One interval of a modelled control thread, for pictures and traces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interval {
    /// Start.
    pub start: u64,
    /// End.
    pub end: u64,
    /// The task it serves.
    pub task: u32,
    /// What the thread does for it.
    pub work: Work,
}

/// The device-specific results of [`simulate_device`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceReport {
    /// Orchestrator busy time (generation).
    pub orchestrator_busy: u64,
    /// Busy time of each scheduler thread.
    pub scheduler_busy: Vec<u64>,
    /// Where tasks waited, summed over tasks.
    pub waits: Waits,
    /// Executor of each task.
    pub executor: Vec<u32>,
    /// Kernel end of each task (its start is [`CycleStats::starts`]).
    pub ends: Vec<u64>,
    /// When recorded: the orchestrator's generation intervals.
    pub generation: Vec<Interval>,
    /// When recorded: each scheduler thread's dispatch and completion intervals.
    pub scheduling: Vec<Vec<Interval>>,
}

/// Simulates `tasks` on a device: [`simulate`]'s schedule-following with the control-path costs
/// of `device` (see the module docs). `CycleStats::starts` are kernel starts and `busy` counts
/// kernel time only.
pub fn simulate_device(
    tasks: &[SimTask],
    edges: &[(u32, u32)],
    machine: &SimMachine,
    schedule: &SimSchedule,
    device: &DeviceTimes,
) -> Result<(CycleStats, DeviceReport), SimError> {
    if !device.generate.is_empty() && device.generate.len() != tasks.len() {
        return Err(SimError::BadDevice(format!(
            "{} generation costs for {} tasks",
            device.generate.len(),
            tasks.len()
        )));
    }
    if let Some(&o) = device
        .owner
        .iter()
        .find(|&&o| o >= device.schedulers.max(1))
    {
        return Err(SimError::BadDevice(format!(
            "an executor belongs to scheduler {o} of {}",
            device.schedulers.max(1)
        )));
    }
    let (stats, report) = Model::new(tasks, edges, machine, schedule, Some(device))?.run()?;
    Ok((stats, report.unwrap_or_default()))
}

/// Event kinds, handled in this order at one instant. A completion seen at an instant is
/// handled before a task issued at it, so that with free control paths the device timing orders
/// ties exactly as the plain model does (its completion is a `FINISH`, which comes first too).
const FINISH: u8 = 0;
/// Device timing: a task's completion becomes visible to its scheduler thread.
const SEEN: u8 = 1;
const ISSUED: u8 = 2;
const WAKE: u8 = 3;

/// Per-task times and per-thread state of the device timing.
struct Dev<'a> {
    times: &'a DeviceTimes,
    sched_free: Vec<u64>,
    sched_busy: Vec<u64>,
    orch_busy: u64,
    issued_at: Vec<u64>,
    dep_at: Vec<u64>,
    ready_at: Vec<u64>,
    ends: Vec<u64>,
    waits: Waits,
    generation: Vec<Interval>,
    scheduling: Vec<Vec<Interval>>,
}

impl Dev<'_> {
    fn owner(&self, e: usize) -> usize {
        self.times.owner.get(e).map_or(0, |&o| o as usize)
    }

    /// Reserves `cost` of thread `s` from `now` on; returns when it ends.
    fn serve(&mut self, s: usize, now: u64, cost: u64, task: u32, work: Work) -> u64 {
        let begin = now.max(self.sched_free[s]);
        self.sched_free[s] = begin + cost;
        self.sched_busy[s] += cost;
        if self.times.record && cost > 0 {
            self.scheduling[s].push(Interval {
                start: begin,
                end: begin + cost,
                task,
                work,
            });
        }
        begin + cost
    }
}

/// A ready task's place in a queue: `(-priority, ready sequence, task)`, smallest first.
type Key = Reverse<(i64, u64, u32)>;

struct Model<'a> {
    tasks: &'a [SimTask],
    machine: &'a SimMachine,
    sched: &'a SimSchedule,
    execs: usize,
    vector: Option<usize>,
    // Graph.
    first: Vec<u32>,
    succ: Vec<u32>,
    pending: Vec<u32>,
    path: Vec<u64>,
    // Per task.
    released: Vec<bool>,
    readied_by: Vec<u32>,
    exec_of: Vec<u32>,
    starts: Vec<u64>,
    // Time.
    now: u64,
    events: BinaryHeap<Reverse<(u64, u8, u32)>>,
    wake_at: Option<u64>,
    // Orchestration.
    next: usize,
    orch_free: u64,
    issued: usize,
    in_flight: u64,
    orchestration_cycles: u64,
    overflows: u64,
    // Timing.
    timing: ReleaseTiming,
    out: Vec<TaskId>,
    start_open: bool,
    // Ready queues.
    seq: u64,
    shared: [BinaryHeap<Key>; 3],
    own: Vec<BinaryHeap<Key>>,
    deques: Vec<VecDeque<u32>>,
    // Executors.
    running: Vec<bool>,
    holding: Vec<Option<u32>>,
    busy: Vec<u64>,
    // Gate.
    gate_count: Vec<u64>,
    gate_waiters: Vec<VecDeque<usize>>,
    /// `batch_deps`: completions each executor has not resolved yet.
    buffered: Vec<Vec<u32>>,
    // Results.
    done: usize,
    makespan: u64,
    critical: u64,
    migrations: u64,
    dev: Option<Dev<'a>>,
}

impl<'a> Model<'a> {
    fn new(
        tasks: &'a [SimTask],
        edges: &[(u32, u32)],
        machine: &'a SimMachine,
        sched: &'a SimSchedule,
        device: Option<&'a DeviceTimes>,
    ) -> Result<Model<'a>, SimError> {
        let n = tasks.len();
        let execs = machine.executors.max(1) as usize;
        let mut first = vec![0u32; n + 1];
        for &(p, s) in edges {
            if p >= s || s as usize >= n {
                return Err(SimError::BadEdge {
                    pred: p,
                    succ: s,
                    tasks: n,
                });
            }
            first[p as usize + 1] += 1;
        }
        for i in 0..n {
            first[i + 1] += first[i];
        }
        let mut fill = first.clone();
        let mut succ = vec![0u32; edges.len()];
        let mut pending = vec![0u32; n];
        for &(p, s) in edges {
            succ[fill[p as usize] as usize] = s;
            fill[p as usize] += 1;
            pending[s as usize] += 1;
        }
        let scopes = match sched.gate {
            None | Some((_, GateScope::Global)) => 1,
            Some((_, GateScope::PerStream)) => tasks
                .iter()
                .map(|t| t.stream as usize + 1)
                .max()
                .unwrap_or(1),
            Some((_, GateScope::PerPool)) => 3,
        };
        Ok(Model {
            tasks,
            machine,
            sched,
            execs,
            vector: machine
                .vector
                .map(|v| (v as usize).clamp(1, execs.saturating_sub(1).max(1))),
            first,
            succ,
            pending,
            path: vec![0; n],
            released: vec![false; n],
            readied_by: vec![u32::MAX; n],
            exec_of: vec![0; n],
            starts: vec![0; n],
            now: 0,
            events: BinaryHeap::new(),
            wake_at: None,
            next: 0,
            orch_free: 0,
            issued: 0,
            in_flight: 0,
            orchestration_cycles: 0,
            overflows: 0,
            timing: ReleaseTiming::new(&sched.timing, u64::from(sched.streams)),
            out: Vec::new(),
            start_open: matches!(sched.start, StartPolicy::Immediate),
            seq: 0,
            shared: Default::default(),
            own: vec![BinaryHeap::new(); execs],
            deques: vec![VecDeque::new(); execs],
            running: vec![false; execs],
            holding: vec![None; execs],
            busy: vec![0; execs],
            gate_count: vec![0; scopes],
            gate_waiters: vec![VecDeque::new(); scopes],
            done: 0,
            makespan: 0,
            critical: 0,
            migrations: 0,
            buffered: vec![Vec::new(); execs],
            dev: device.map(|times| {
                let threads = times.schedulers.max(1) as usize;
                Dev {
                    times,
                    sched_free: vec![0; threads],
                    sched_busy: vec![0; threads],
                    orch_busy: 0,
                    issued_at: vec![0; n],
                    dep_at: vec![0; n],
                    ready_at: vec![0; n],
                    ends: vec![0; n],
                    waits: Waits::default(),
                    generation: Vec::new(),
                    scheduling: vec![Vec::new(); threads],
                }
            }),
        })
    }

    fn run(mut self) -> Result<(CycleStats, Option<DeviceReport>), SimError> {
        let n = self.tasks.len();
        if n == 0 {
            return Ok(self.stats());
        }
        loop {
            while let Some(&Reverse((t, kind, id))) = self.events.peek() {
                if t != self.now {
                    break;
                }
                self.events.pop();
                match kind {
                    FINISH => self.finish(id),
                    ISSUED => self.issue(id),
                    SEEN => self.seen(id),
                    _ => self.wake_at = None,
                }
            }
            self.orchestrate()?;
            self.dispatch();
            match self.events.peek() {
                Some(&Reverse((t, ..))) => self.now = t,
                None => break,
            }
        }
        debug_assert_eq!(self.done, n, "the model stalled");
        Ok(self.stats())
    }

    fn stats(self) -> (CycleStats, Option<DeviceReport>) {
        let report = self.dev.as_ref().map(|d| DeviceReport {
            orchestrator_busy: d.orch_busy,
            scheduler_busy: d.sched_busy.clone(),
            waits: d.waits,
            executor: self.exec_of.clone(),
            ends: d.ends.clone(),
            generation: d.generation.clone(),
            scheduling: d.scheduling.clone(),
        });
        let stats = CycleStats {
            total_cycles: self.makespan,
            work_cycles: self.tasks.iter().map(|t| t.cost).sum(),
            critical_path: self.critical,
            busy: self.busy,
            orchestration_cycles: self.orchestration_cycles,
            window_overflows: self.overflows,
            migrations: self.migrations,
            starts: self.starts,
        };
        (stats, report)
    }

    fn serves(&self, e: usize, pool: ExecPool) -> bool {
        match (self.vector, pool) {
            (None, _) | (_, ExecPool::Any) => true,
            (Some(v), ExecPool::Vector) => e < v,
            (Some(v), ExecPool::Cube) => e >= v || self.execs == 1,
        }
    }

    /// The executor task `t` is placed on, if placement is on and that executor serves its pool.
    fn placed(&self, t: u32) -> Option<usize> {
        let task = &self.tasks[t as usize];
        task.target
            .filter(|_| self.machine.placement)
            .map(|x| x as usize % self.execs)
            .filter(|&e| self.serves(e, task.pool))
    }

    /// Orchestration submits tasks while it may (the window) and has time (`issue_cycles`).
    fn orchestrate(&mut self) -> Result<(), SimError> {
        let n = self.tasks.len();
        while self.next < n && self.orch_free <= self.now {
            if let Some((capacity, mode)) = self.sched.window
                && self.in_flight >= capacity
            {
                match mode {
                    WindowMode::Stall => {
                        // Waiting for completions needs tasks that can run.
                        self.start_open = true;
                        self.flush_held();
                        return Ok(());
                    }
                    WindowMode::Abort => {
                        return Err(SimError::WindowFull {
                            task: self.next as u32,
                            capacity,
                            cycle: self.now,
                        });
                    }
                    WindowMode::Benchmark => self.overflows += 1,
                }
            }
            if let Some(free) = self.timing.wait_until(self.now) {
                self.wake(free);
                return Ok(());
            }
            let t = self.next as u32;
            self.next += 1;
            self.in_flight += 1;
            let cost = match &mut self.dev {
                Some(d) if !d.times.generate.is_empty() => {
                    let g = d.times.generate[t as usize];
                    d.orch_busy += g;
                    if d.times.record && g > 0 {
                        d.generation.push(Interval {
                            start: self.now,
                            end: self.now + g,
                            task: t,
                            work: Work::Generate,
                        });
                    }
                    g
                }
                Some(d) => {
                    d.orch_busy += self.sched.issue_cycles;
                    self.sched.issue_cycles
                }
                None => self.sched.issue_cycles,
            };
            if cost == 0 {
                self.issue(t);
            } else {
                self.orch_free = self.now + cost;
                self.events.push(Reverse((self.orch_free, ISSUED, t)));
            }
        }
        Ok(())
    }

    /// Task `t` is submitted: timing decides when it is released.
    fn issue(&mut self, t: u32) {
        if let Some(d) = &mut self.dev {
            d.issued_at[t as usize] = self.now;
        }
        self.issued += 1;
        self.orchestration_cycles = self.now;
        let stream = self.tasks[t as usize].stream;
        let mut out = std::mem::take(&mut self.out);
        self.timing
            .submitted(TaskId(t), stream, self.now, |x| out.push(x));
        for x in out.drain(..) {
            self.release(x.0);
        }
        self.out = out;
        let all = self.issued == self.tasks.len();
        if all {
            self.flush_held();
        }
        if let StartPolicy::Threshold(k) = self.sched.start
            && self.issued as u64 >= k
        {
            self.start_open = true;
        }
        if all {
            self.start_open = true;
        }
    }

    /// Releases every group or round timing still holds.
    fn flush_held(&mut self) {
        let mut out = std::mem::take(&mut self.out);
        self.timing.flush(|x| out.push(x));
        for x in out.drain(..) {
            self.release(x.0);
        }
        self.out = out;
    }

    /// Makes sure the model looks again at cycle `at`.
    fn wake(&mut self, at: u64) {
        if self.wake_at != Some(at) {
            self.wake_at = Some(at);
            self.events.push(Reverse((at, WAKE, 0)));
        }
    }

    fn release(&mut self, t: u32) {
        self.released[t as usize] = true;
        if self.pending[t as usize] == 0 {
            self.make_ready(t);
        }
    }

    /// `t` is released and its predecessors are done: queue it.
    fn make_ready(&mut self, t: u32) {
        if let Some(d) = &mut self.dev {
            let i = t as usize;
            d.ready_at[i] = self.now;
            // The later of "generated (and released)" and "inputs done" made it ready.
            d.waits.generation += self.now.saturating_sub(d.dep_at[i]);
            d.waits.dependencies += d.dep_at[i].saturating_sub(d.issued_at[i]);
        }
        self.seq += 1;
        let task = &self.tasks[t as usize];
        let placed = self.placed(t);
        match self.sched.ready {
            SimReady::WorkSteal => {
                let by = self.readied_by[t as usize];
                let home = placed
                    .or_else(|| {
                        (by != u32::MAX)
                            .then_some(by as usize)
                            .filter(|&e| self.serves(e, task.pool))
                    })
                    .unwrap_or_else(|| {
                        let base = t as usize % self.execs;
                        (0..self.execs)
                            .map(|i| (base + i) % self.execs)
                            .find(|&e| self.serves(e, task.pool))
                            .unwrap_or(base)
                    });
                self.deques[home].push_back(t);
            }
            ready => {
                let prio = if ready == SimReady::Priority {
                    task.priority.saturating_neg()
                } else {
                    0
                };
                let key = Reverse((prio, self.seq, t));
                match placed {
                    Some(e) => self.own[e].push(key),
                    None => {
                        let slot = self.slot(task.pool);
                        self.shared[slot].push(key);
                    }
                }
            }
        }
    }

    /// The shared queue of a pool: one for everything without a pool split.
    fn slot(&self, pool: ExecPool) -> usize {
        match (self.vector, pool) {
            (None, _) | (_, ExecPool::Any) => 0,
            (_, ExecPool::Vector) => 1,
            (_, ExecPool::Cube) => 2,
        }
    }

    /// The next task executor `e` takes, if any.
    fn pick(&mut self, e: usize) -> Option<u32> {
        if self.sched.ready == SimReady::WorkSteal {
            if let Some(t) = self.deques[e].pop_back() {
                return Some(t);
            }
            let victim = (0..self.execs).find(|&v| {
                v != e
                    && self.deques[v]
                        .front()
                        .is_some_and(|&t| self.serves(e, self.tasks[t as usize].pool))
            })?;
            return self.deques[victim].pop_front();
        }
        let mut best: Option<(Key, usize)> = None;
        let mut consider = |key: Option<&Key>, q: usize| {
            if let Some(&k) = key
                && best.is_none_or(|(b, _)| k > b)
            {
                best = Some((k, q));
            }
        };
        // Queue ids: 0..3 shared, 3 + e own.
        consider(self.own[e].peek(), 3);
        consider(self.shared[0].peek(), 0);
        if self.vector.is_some() {
            for slot in [1, 2] {
                let pool = if slot == 1 {
                    ExecPool::Vector
                } else {
                    ExecPool::Cube
                };
                if self.serves(e, pool) {
                    consider(self.shared[slot].peek(), slot);
                }
            }
        }
        let (_, q) = best?;
        let Reverse((.., t)) = if q == 3 {
            self.own[e].pop()?
        } else {
            self.shared[q].pop()?
        };
        Some(t)
    }

    /// Idle executors take tasks, in executor order, once the start gate is open; an executor
    /// with nothing to take resolves its buffered completions, and everyone looks again.
    fn dispatch(&mut self) {
        loop {
            let mut resolved = false;
            for e in 0..self.execs {
                if self.running[e] || self.holding[e].is_some() {
                    continue;
                }
                let picked = if self.start_open { self.pick(e) } else { None };
                let Some(t) = picked else {
                    if !self.buffered[e].is_empty() {
                        self.resolve_buffered(e);
                        resolved = true;
                    }
                    continue;
                };
                let scope = self.scope(t);
                match self.sched.gate {
                    Some((depth, _)) if self.gate_count[scope] >= depth => {
                        self.holding[e] = Some(t);
                        self.gate_waiters[scope].push_back(e);
                    }
                    _ => self.start(e, t),
                }
            }
            if !resolved {
                return;
            }
        }
    }

    fn scope(&self, t: u32) -> usize {
        let task = &self.tasks[t as usize];
        match self.sched.gate {
            None | Some((_, GateScope::Global)) => 0,
            Some((_, GateScope::PerStream)) => task.stream as usize,
            Some((_, GateScope::PerPool)) => match task.pool {
                ExecPool::Any => 0,
                ExecPool::Vector => 1,
                ExecPool::Cube => 2,
            },
        }
    }

    fn start(&mut self, e: usize, t: u32) {
        let cost = self.tasks[t as usize].cost;
        if self.sched.gate.is_some() {
            let s = self.scope(t);
            self.gate_count[s] += 1;
        }
        if self.placed(t).is_some_and(|p| p != e) {
            self.migrations += 1;
        }
        self.running[e] = true;
        self.busy[e] += cost;
        self.exec_of[t as usize] = e as u32;
        let now = self.now;
        let Some(d) = &mut self.dev else {
            self.starts[t as usize] = now;
            self.events.push(Reverse((now + cost, FINISH, t)));
            return;
        };
        let i = t as usize;
        let s = d.owner(e);
        let written = d.serve(s, now, d.times.sched_dispatch, t, Work::Dispatch);
        if d.times.no_core.get(i).copied().unwrap_or(false) {
            d.waits.free_core += now - d.ready_at[i];
            self.starts[i] = written;
            d.ends[i] = written;
            self.events.push(Reverse((written, SEEN, t)));
            return;
        }
        let begin = written + d.times.land;
        d.waits.free_core += now - d.ready_at[i];
        d.waits.dispatch += begin - now;
        self.starts[i] = begin;
        d.ends[i] = begin + cost;
        self.events
            .push(Reverse((begin + cost + d.times.completion, SEEN, t)));
    }

    /// Device timing: `t`'s completion is visible; its scheduler thread processes it, then the
    /// task finishes (frees its core, readies its successors).
    fn seen(&mut self, t: u32) {
        let e = self.exec_of[t as usize] as usize;
        let succs = u64::from(self.first[t as usize + 1] - self.first[t as usize]);
        let now = self.now;
        let d = self
            .dev
            .as_mut()
            .expect("completions are seen only under device timing");
        let s = d.owner(e);
        let cost = d.times.sched_complete + d.times.sched_per_edge * succs;
        let done = d.serve(s, now, cost, t, Work::Complete);
        self.events.push(Reverse((done, FINISH, t)));
    }

    fn finish(&mut self, t: u32) {
        let e = self.exec_of[t as usize] as usize;
        self.running[e] = false;
        self.in_flight -= 1;
        self.done += 1;
        self.makespan = self.makespan.max(self.now);
        if self.sched.gate.is_some() {
            let s = self.scope(t);
            self.gate_count[s] -= 1;
            if let Some(w) = self.gate_waiters[s].pop_front() {
                let held = self.holding[w].take().expect("a gate waiter holds a task");
                self.start(w, held);
            }
        }
        let through = self.path[t as usize] + self.tasks[t as usize].cost;
        self.critical = self.critical.max(through);
        if self.sched.batch_deps > 1 {
            self.buffered[e].push(t);
            if self.buffered[e].len() as u64 >= self.sched.batch_deps {
                self.resolve_buffered(e);
            }
        } else {
            self.resolve(t, e);
        }
    }

    fn resolve_buffered(&mut self, e: usize) {
        for t in std::mem::take(&mut self.buffered[e]) {
            self.resolve(t, e);
        }
    }

    /// `t`, finished on executor `e`, no longer holds its successors back.
    fn resolve(&mut self, t: u32, e: usize) {
        let through = self.path[t as usize] + self.tasks[t as usize].cost;
        let range = self.first[t as usize] as usize..self.first[t as usize + 1] as usize;
        for i in range {
            let s = self.succ[i] as usize;
            self.path[s] = self.path[s].max(through);
            self.pending[s] -= 1;
            if self.pending[s] == 0 {
                if let Some(d) = &mut self.dev {
                    d.dep_at[s] = self.now;
                }
                self.readied_by[s] = e as u32;
                if self.released[s] {
                    self.make_ready(s as u32);
                }
            }
        }
    }
}

/// One step of a CSP process, as a pipeline run records it for the model
/// ([`simulate_pipeline`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CspStep {
    /// The process runs a task of this cost (it runs its tasks itself, one after another).
    Task(u64),
    /// The process sends a token on this channel.
    Send(u32),
    /// The process receives a token from this channel.
    Recv(u32),
    /// The process finds this channel closed and drained (its `consume` loop ends).
    Closed(u32),
}

/// A pipeline as the model sees it: each channel's depth and producer, each process's steps.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CspTrace {
    /// Per channel: (depth, producing process).
    pub channels: Vec<(u64, usize)>,
    /// Per process: its steps in program order.
    pub processes: Vec<Vec<CspStep>>,
}

/// The cycle model of a CSP pipeline: a clock per process, advanced by its tasks' costs; the
/// `k`-th send on a channel of depth `d` waits until the consumer has received token `k - d`
/// (the channel holds at most `d`), a receive until its token was sent, a `consume` loop's end
/// until the producer has ended. `total_cycles` is the last process's end; `critical_path` the
/// same with unbounded channels (what depth cannot improve on); `busy` per process.
pub fn simulate_pipeline(trace: &CspTrace) -> Result<CycleStats, SimError> {
    let ends = replay(trace, true)?;
    let unbounded = replay(trace, false)?;
    let busy: Vec<u64> = trace
        .processes
        .iter()
        .map(|steps| {
            steps
                .iter()
                .map(|s| match s {
                    CspStep::Task(c) => *c,
                    _ => 0,
                })
                .sum()
        })
        .collect();
    Ok(CycleStats {
        total_cycles: ends.iter().copied().max().unwrap_or(0),
        work_cycles: busy.iter().sum(),
        critical_path: unbounded.iter().copied().max().unwrap_or(0),
        busy,
        ..CycleStats::default()
    })
}

/// Each process's end time, channels bounded by their depths when `bounded`.
fn replay(trace: &CspTrace, bounded: bool) -> Result<Vec<u64>, SimError> {
    let np = trace.processes.len();
    let nc = trace.channels.len();
    let mut sent: Vec<Vec<u64>> = vec![Vec::new(); nc];
    let mut recvd: Vec<Vec<u64>> = vec![Vec::new(); nc];
    let mut at = vec![0usize; np];
    let mut clock = vec![0u64; np];
    let mut end: Vec<Option<u64>> = vec![None; np];
    let channel = |c: u32| {
        trace
            .channels
            .get(c as usize)
            .copied()
            .ok_or(SimError::BadChannel { channel: c })
    };
    loop {
        let mut progress = false;
        for p in 0..np {
            let steps = &trace.processes[p];
            while at[p] < steps.len() {
                match steps[at[p]] {
                    CspStep::Task(c) => clock[p] += c,
                    CspStep::Send(ch) => {
                        let (depth, _) = channel(ch)?;
                        let k = sent[ch as usize].len() as u64;
                        if bounded && k >= depth {
                            match recvd[ch as usize].get((k - depth) as usize) {
                                Some(&t) => clock[p] = clock[p].max(t),
                                None => break,
                            }
                        }
                        sent[ch as usize].push(clock[p]);
                    }
                    CspStep::Recv(ch) => {
                        channel(ch)?;
                        let k = recvd[ch as usize].len();
                        match sent[ch as usize].get(k) {
                            Some(&t) => clock[p] = clock[p].max(t),
                            None => break,
                        }
                        recvd[ch as usize].push(clock[p]);
                    }
                    CspStep::Closed(ch) => {
                        let (_, producer) = channel(ch)?;
                        match end.get(producer).copied().flatten() {
                            Some(t) => clock[p] = clock[p].max(t),
                            None => break,
                        }
                    }
                }
                at[p] += 1;
                progress = true;
            }
            if at[p] == steps.len() && end[p].is_none() {
                end[p] = Some(clock[p]);
                progress = true;
            }
        }
        if end.iter().all(Option::is_some) {
            return Ok(end.into_iter().flatten().collect());
        }
        if !progress {
            return Err(SimError::PipelineStuck {
                waiting: end.iter().filter(|e| e.is_none()).count(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn any(cost: u64) -> SimTask {
        SimTask::with_cost(cost)
    }

    fn machine(executors: u32) -> SimMachine {
        SimMachine {
            executors,
            vector: None,
            placement: false,
        }
    }

    fn run(tasks: &[SimTask], edges: &[(u32, u32)], m: &SimMachine, s: SimSchedule) -> CycleStats {
        simulate(tasks, edges, m, &s).unwrap()
    }

    fn plain() -> SimSchedule {
        SimSchedule::default()
    }

    #[test]
    fn a_chain_takes_its_total_cost_and_independent_tasks_spread() {
        let chain: Vec<_> = (1..=4).map(any).collect();
        let s = run(&chain, &[(0, 1), (1, 2), (2, 3)], &machine(3), plain());
        assert_eq!(
            (s.total_cycles, s.critical_path, s.work_cycles),
            (10, 10, 10)
        );
        let ind = vec![any(5); 6];
        let s = run(&ind, &[], &machine(3), plain());
        assert_eq!((s.total_cycles, s.critical_path), (10, 5));
        assert_eq!(s.busy, vec![10, 10, 10]);
        assert!((s.utilization() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn placement_and_pools_restrict_executors() {
        // Two tasks placed on executor 1: they serialise although executor 0 is free.
        let placed = vec![
            SimTask {
                target: Some(1),
                ..any(4)
            };
            2
        ];
        let mut m = machine(2);
        assert_eq!(run(&placed, &[], &m, plain()).total_cycles, 4);
        m.placement = true;
        let s = run(&placed, &[], &m, plain());
        assert_eq!(
            (s.total_cycles, s.busy.clone(), s.migrations),
            (8, vec![0, 8], 0)
        );
        // Cube tasks on a 3-executor machine with one vector executor: two cube executors.
        let cube = vec![
            SimTask {
                pool: ExecPool::Cube,
                ..any(3)
            };
            4
        ];
        let m = SimMachine {
            executors: 3,
            vector: Some(1),
            placement: false,
        };
        let s = run(&cube, &[], &m, plain());
        assert_eq!((s.total_cycles, s.busy.clone()), (6, vec![0, 6, 6]));
    }

    #[test]
    fn work_stealing_migrates_placed_tasks_and_counts_it() {
        let placed = vec![
            SimTask {
                target: Some(0),
                ..any(10)
            };
            4
        ];
        let m = SimMachine {
            placement: true,
            ..machine(2)
        };
        for ready in [SimReady::Fifo, SimReady::Priority] {
            let s = run(&placed, &[], &m, SimSchedule { ready, ..plain() });
            assert_eq!((s.total_cycles, s.migrations), (40, 0), "{ready:?}");
        }
        let s = run(
            &placed,
            &[],
            &m,
            SimSchedule {
                ready: SimReady::WorkSteal,
                ..plain()
            },
        );
        assert_eq!(
            (s.total_cycles, s.migrations, s.busy),
            (20, 2, vec![20, 20])
        );
    }

    #[test]
    fn a_gate_of_one_serialises_and_per_stream_gates_are_separate() {
        let ind: Vec<SimTask> = (0..8)
            .map(|i| SimTask {
                stream: i % 2,
                ..any(5 + u64::from(i))
            })
            .collect();
        let work: u64 = ind.iter().map(|t| t.cost).sum();
        let gate = |d, scope| SimSchedule {
            gate: Some((d, scope)),
            ..plain()
        };
        let s = run(&ind, &[], &machine(4), gate(1, GateScope::Global));
        assert_eq!(s.total_cycles, work);
        // One per stream: the two streams overlap, each serial.
        let s = run(&ind, &[], &machine(4), gate(1, GateScope::PerStream));
        let even: u64 = ind.iter().step_by(2).map(|t| t.cost).sum();
        let odd: u64 = ind.iter().skip(1).step_by(2).map(|t| t.cost).sum();
        assert_eq!(s.total_cycles, even.max(odd));
        let s = run(&ind, &[], &machine(4), gate(2, GateScope::Global));
        assert!(
            s.total_cycles < work
                && s.total_cycles > run(&ind, &[], &machine(4), plain()).total_cycles
        );
    }

    #[test]
    fn the_window_stalls_aborts_or_counts() {
        let ind = vec![any(10); 6];
        let win = |n, mode| SimSchedule {
            window: Some((n, mode)),
            ..plain()
        };
        assert_eq!(
            run(&ind, &[], &machine(4), win(1, WindowMode::Stall)).total_cycles,
            60
        );
        assert_eq!(
            run(&ind, &[], &machine(4), win(2, WindowMode::Stall)).total_cycles,
            30
        );
        let s = run(&ind, &[], &machine(4), win(2, WindowMode::Benchmark));
        assert_eq!((s.total_cycles, s.window_overflows), (20, 4));
        assert_eq!(
            simulate(&ind, &[], &machine(4), &win(2, WindowMode::Abort)).unwrap_err(),
            SimError::WindowFull {
                task: 2,
                capacity: 2,
                cycle: 0
            }
        );
    }

    #[test]
    fn start_policies_hold_tasks_until_the_gate_opens() {
        let ind = vec![any(1); 5];
        let at = |start| {
            run(
                &ind,
                &[],
                &machine(8),
                SimSchedule {
                    issue_cycles: 10,
                    start,
                    ..plain()
                },
            )
            .starts
        };
        assert_eq!(at(StartPolicy::Immediate), vec![10, 20, 30, 40, 50]);
        assert_eq!(at(StartPolicy::Threshold(3)), vec![30, 30, 30, 40, 50]);
        assert_eq!(at(StartPolicy::AfterOrchestration), vec![50; 5]);
        // A stalling window opens the gate rather than deadlock: tasks 0 and 1 start when
        // orchestration would wait for task 2, which is submitted once they finish (at 21).
        let s = run(
            &ind,
            &[],
            &machine(8),
            SimSchedule {
                issue_cycles: 10,
                start: StartPolicy::AfterOrchestration,
                window: Some((2, WindowMode::Stall)),
                ..plain()
            },
        );
        assert_eq!(s.starts, vec![20, 20, 31, 41, 51]);
    }

    #[test]
    fn timing_batches_interleaves_and_paces_releases() {
        let ind = vec![any(1); 6];
        let timed = |timing, issue_cycles| SimSchedule {
            timing,
            issue_cycles,
            ..plain()
        };
        let s = run(&ind, &[], &machine(8), timed(Timing::Batched(4), 10));
        assert_eq!(s.starts, vec![40, 40, 40, 40, 60, 60]);
        // Streams 0 0 0 0 1 1 1 1 on one executor: rounds of two from each stream.
        let streamed: Vec<SimTask> = (0..8)
            .map(|i| SimTask {
                stream: i / 4,
                ..any(1)
            })
            .collect();
        let s = run(
            &streamed,
            &[],
            &machine(1),
            SimSchedule {
                streams: 2,
                ..timed(Timing::Interleaved(2), 0)
            },
        );
        let mut order: Vec<u32> = (0..8).collect();
        order.sort_by_key(|&t| s.starts[t as usize]);
        assert_eq!(order, vec![0, 1, 4, 5, 2, 3, 6, 7]);
        let plain_order = run(&streamed, &[], &machine(1), plain()).starts;
        assert_eq!(plain_order, (0..8).collect::<Vec<u64>>());
        let s = run(&ind, &[], &machine(8), timed(Timing::RateLimit(2), 0));
        assert_eq!(s.starts, vec![0, 0, 1000, 1000, 2000, 2000]);
    }

    #[test]
    fn priority_orders_ready_tasks() {
        let tasks: Vec<SimTask> = [1, 3, 2]
            .iter()
            .map(|&p| SimTask {
                priority: p,
                ..any(1)
            })
            .collect();
        let s = run(
            &tasks,
            &[],
            &machine(1),
            SimSchedule {
                ready: SimReady::Priority,
                ..plain()
            },
        );
        assert_eq!(s.starts, vec![2, 0, 1]);
        assert_eq!(run(&tasks, &[], &machine(1), plain()).starts, vec![0, 1, 2]);
    }

    #[test]
    fn batched_completions_hold_successors_until_the_batch_fills_or_the_executor_idles() {
        // 0 -> 2; 0 and 1 on executor 0, 2 on executor 1.
        let tasks = [
            SimTask {
                target: Some(0),
                ..any(10)
            },
            SimTask {
                target: Some(0),
                ..any(30)
            },
            SimTask {
                target: Some(1),
                ..any(10)
            },
        ];
        let m = SimMachine {
            placement: true,
            ..machine(2)
        };
        let s = run(&tasks, &[(0, 2)], &m, plain());
        assert_eq!((s.starts[2], s.total_cycles), (10, 40));
        // Executor 0 holds 0's completion while it runs 1 (a batch of 2 fills at 40).
        let s = run(
            &tasks,
            &[(0, 2)],
            &m,
            SimSchedule {
                batch_deps: 2,
                ..plain()
            },
        );
        assert_eq!((s.starts[2], s.total_cycles), (40, 50));
        // Idle executors resolve at once: a batch larger than the graph still finishes.
        let s = run(
            &tasks,
            &[(0, 2)],
            &m,
            SimSchedule {
                batch_deps: 64,
                ..plain()
            },
        );
        assert_eq!((s.starts[2], s.total_cycles), (40, 50));
    }

    /// Three stages (load 10, compute 30, store 5) over 4 tokens with channels of depth 1:
    /// the computer is the bottleneck, so the store of token k ends at 10 + 30 (k + 1) + 5.
    #[test]
    fn a_pipeline_runs_at_its_slowest_stage_and_shallow_channels_stall_the_loader() {
        use CspStep::*;
        let mut load = Vec::new();
        let mut compute = Vec::new();
        let mut store = Vec::new();
        for _ in 0..4 {
            load.extend([Task(10), Send(0)]);
            compute.extend([Recv(0), Task(30), Send(1)]);
            store.extend([Recv(1), Task(5)]);
        }
        compute.push(Closed(0));
        store.push(Closed(1));
        let trace = |depth| CspTrace {
            channels: vec![(depth, 0), (depth, 1)],
            processes: vec![load.clone(), compute.clone(), store.clone()],
        };
        let s = simulate_pipeline(&trace(1)).unwrap();
        assert_eq!(s.total_cycles, 10 + 30 * 4 + 5);
        assert_eq!((s.work_cycles, s.busy.clone()), (4 * 45, vec![40, 120, 20]));
        assert_eq!(s.critical_path, 10 + 30 * 4 + 5);
        // The computer receives token k at 10 + 30k; with depth 1 the loader's send k waits for
        // receipt k - 1: sends at 10, 20, 40, 70, so the loader ends at 70 (at 40 with depth 8).
        let ends = replay(&trace(1), true).unwrap();
        assert_eq!(ends, vec![70, 130, 135]);
        let ends = replay(&trace(8), true).unwrap();
        assert_eq!(ends, vec![40, 130, 135]);
        // A replay that cannot be a run: a receive nobody sends.
        let bad = CspTrace {
            channels: vec![(1, 0)],
            processes: vec![vec![], vec![Recv(0)]],
        };
        assert!(matches!(
            simulate_pipeline(&bad),
            Err(SimError::PipelineStuck { waiting: 1 })
        ));
    }

    #[test]
    fn bad_edges_are_errors() {
        let t = vec![any(1); 2];
        assert_eq!(
            simulate(&t, &[(0, 2)], &machine(1), &plain())
                .unwrap_err()
                .to_string(),
            "edge 0 -> 2 names a task beyond the 2 tasks or goes backwards"
        );
        assert!(matches!(
            simulate(&t, &[(1, 0)], &machine(1), &plain()),
            Err(SimError::BadEdge {
                pred: 1,
                succ: 0,
                ..
            })
        ));
    }
}

/// Device timing checked against hand computations (letters of the module docs).
#[cfg(test)]
mod device_tests {
    use super::*;

    fn times(g: u64, sd: u64, land: u64, f: u64, sc: u64, e: u64, n: usize) -> DeviceTimes {
        DeviceTimes {
            generate: vec![g; n],
            owner: Vec::new(),
            schedulers: 1,
            sched_dispatch: sd,
            land,
            completion: f,
            sched_complete: sc,
            sched_per_edge: e,
            no_core: Vec::new(),
            record: true,
        }
    }

    fn machine(executors: u32) -> SimMachine {
        SimMachine {
            executors,
            vector: None,
            placement: false,
        }
    }

    #[test]
    fn a_chain_pays_every_handshake() {
        let (g, sd, land, c, f, sc, e) = (7, 3, 11, 100, 13, 5, 2);
        for n in [1u64, 2, 5, 17] {
            let tasks = vec![SimTask::with_cost(c); n as usize];
            let edges: Vec<(u32, u32)> = (1..n as u32).map(|i| (i - 1, i)).collect();
            let dev = times(g, sd, land, f, sc, e, n as usize);
            let (s, r) =
                simulate_device(&tasks, &edges, &machine(4), &SimSchedule::default(), &dev)
                    .unwrap();
            let hand = g + n * (sd + land + c + f + sc) + (n - 1) * e;
            assert_eq!(s.total_cycles, hand, "chain of {n}");
            assert_eq!(r.orchestrator_busy, n * g);
            assert_eq!(r.scheduler_busy, vec![n * (sd + sc) + (n - 1) * e]);
            assert_eq!(r.scheduling[0].len() as u64, 2 * n);
            // Each task is dispatched, then its completion processed (with its successor's
            // edge), in that order on the one scheduler thread; generation is one interval each.
            for (k, iv) in r.scheduling[0].iter().enumerate() {
                let t = (k / 2) as u64;
                let (work, len) = if k % 2 == 0 {
                    (Work::Dispatch, sd)
                } else {
                    (Work::Complete, sc + if t + 1 < n { e } else { 0 })
                };
                assert_eq!(
                    (iv.work, iv.end - iv.start, u64::from(iv.task)),
                    (work, len, t)
                );
            }
            assert!(
                r.generation
                    .iter()
                    .all(|i| i.work == Work::Generate && i.end - i.start == g)
            );
        }
    }

    #[test]
    fn independent_tasks_fill_the_cores_in_rounds() {
        let (land, c, f) = (50, 1000, 200);
        for (n, cores) in [(10u64, 4u32), (8, 4), (1, 3), (25, 5)] {
            let tasks = vec![SimTask::with_cost(c); n as usize];
            let dev = times(0, 0, land, f, 0, 0, n as usize);
            let (s, r) =
                simulate_device(&tasks, &[], &machine(cores), &SimSchedule::default(), &dev)
                    .unwrap();
            assert_eq!(
                s.total_cycles,
                n.div_ceil(u64::from(cores)) * (land + c + f),
                "{n} tasks on {cores} cores"
            );
            // Waiting for a free core: round k's tasks wait k rounds.
            let rounds = n.div_ceil(u64::from(cores));
            let full = n / u64::from(cores);
            let mut free: u64 = (0..full).map(|k| k * u64::from(cores)).sum();
            free += (n - full * u64::from(cores)) * full;
            assert_eq!(r.waits.free_core, free * (land + c + f), "{n} on {cores}");
            assert!(rounds >= 1);
            assert_eq!(r.waits.dispatch, n * land);
        }
    }

    #[test]
    fn slow_generation_bounds_the_run() {
        // g·C > land + c + f: every task finds a free core when generated.
        let (g, sd, land, c, f, sc) = (400, 10, 50, 1000, 200, 30);
        let (n, cores) = (30u64, 4u32);
        assert!(g * u64::from(cores) > sd + land + c + f + sc);
        let tasks = vec![SimTask::with_cost(c); n as usize];
        let dev = times(g, sd, land, f, sc, 0, n as usize);
        let (s, r) =
            simulate_device(&tasks, &[], &machine(cores), &SimSchedule::default(), &dev).unwrap();
        assert_eq!(s.total_cycles, n * g + sd + land + c + f + sc);
        assert_eq!(r.waits.free_core, 0);
        // Each task waited for its own generation: g, 2g, ..., n·g.
        assert_eq!(r.waits.generation, g * n * (n + 1) / 2);
    }

    #[test]
    fn one_busy_scheduler_thread_bounds_the_run() {
        let (sd, sc, c) = (300, 200, 100);
        let n = 40u64;
        let tasks = vec![SimTask::with_cost(c); n as usize];
        let dev = times(0, sd, 0, 0, sc, 0, n as usize);
        let (s, _) =
            simulate_device(&tasks, &[], &machine(16), &SimSchedule::default(), &dev).unwrap();
        assert!(s.total_cycles >= n * (sd + sc), "{}", s.total_cycles);
        assert!(s.total_cycles <= n * (sd + sc) + sd + c + sc);
        // Two threads, each owning half of the cores: about half the time.
        let dev = DeviceTimes {
            schedulers: 2,
            owner: (0..16).map(|e| e % 2).collect(),
            ..dev
        };
        let (s2, r2) =
            simulate_device(&tasks, &[], &machine(16), &SimSchedule::default(), &dev).unwrap();
        assert!(s2.total_cycles >= n * (sd + sc) / 2);
        assert!(s2.total_cycles <= n * (sd + sc) / 2 + sd + c + sc);
        assert_eq!(r2.scheduler_busy.iter().sum::<u64>(), n * (sd + sc));
    }

    #[test]
    fn bad_device_timing_is_refused() {
        let tasks = vec![SimTask::with_cost(1); 3];
        let dev = times(0, 0, 0, 0, 0, 0, 2);
        assert!(matches!(
            simulate_device(&tasks, &[], &machine(1), &SimSchedule::default(), &dev),
            Err(SimError::BadDevice(_))
        ));
        let dev = DeviceTimes {
            owner: vec![1],
            ..times(0, 0, 0, 0, 0, 0, 3)
        };
        assert!(simulate_device(&tasks, &[], &machine(1), &SimSchedule::default(), &dev).is_err());
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    /// Longest cost-weighted path, computed independently (tasks in id order; every edge goes
    /// forward).
    fn longest_path(tasks: &[SimTask], edges: &[(u32, u32)]) -> u64 {
        let mut best = vec![0u64; tasks.len()];
        for s in 0..tasks.len() {
            let before = edges
                .iter()
                .filter(|e| e.1 as usize == s)
                .map(|e| best[e.0 as usize])
                .max()
                .unwrap_or(0);
            best[s] = before + tasks[s].cost;
        }
        best.into_iter().max().unwrap_or(0)
    }

    /// Most intervals `[start, start + cost)` of positive cost among `tasks` that overlap at one
    /// instant, counting only tasks `keep` accepts.
    fn peak(tasks: &[SimTask], starts: &[u64], keep: impl Fn(&SimTask) -> bool) -> u64 {
        let mut ev: Vec<(u64, i64)> = Vec::new();
        for (t, &s) in tasks.iter().zip(starts) {
            if t.cost > 0 && keep(t) {
                ev.push((s, 1));
                ev.push((s + t.cost, -1));
            }
        }
        ev.sort();
        let (mut cur, mut max) = (0i64, 0i64);
        for (_, d) in ev {
            cur += d;
            max = max.max(cur);
        }
        max as u64
    }

    fn schedule() -> impl Strategy<Value = SimSchedule> {
        (
            0u64..4,
            prop_oneof![
                Just(None),
                (1u64..4).prop_map(|n| Some((n, WindowMode::Stall)))
            ],
            prop_oneof![
                Just(None),
                (1u64..3).prop_map(|d| Some((d, GateScope::Global))),
                (1u64..3).prop_map(|d| Some((d, GateScope::PerStream)))
            ],
            prop_oneof![
                Just(StartPolicy::Immediate),
                Just(StartPolicy::AfterOrchestration),
                (0u64..10).prop_map(StartPolicy::Threshold)
            ],
            prop_oneof![
                Just(Timing::Immediate),
                (1u64..4).prop_map(Timing::Batched),
                (1u64..4).prop_map(Timing::Interleaved),
                (1u64..4).prop_map(Timing::RateLimit)
            ],
            prop_oneof![
                Just(SimReady::Fifo),
                Just(SimReady::Priority),
                Just(SimReady::WorkSteal)
            ],
            prop_oneof![Just(1u64), 2u64..5],
        )
            .prop_map(
                |(issue_cycles, window, gate, start, timing, ready, batch_deps)| SimSchedule {
                    issue_cycles,
                    window,
                    gate,
                    start,
                    timing,
                    ready,
                    streams: 2,
                    batch_deps,
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(pto_wsp_ir::soak::cases(256)))]

        #[test]
        fn every_modelled_schedule_is_valid(
            costs in proptest::collection::vec((0u64..50, 0u32..2, -3i64..3, 0u32..4), 1..40),
            picks in proptest::collection::vec((0usize..1000, 0usize..1000), 0..80),
            execs in 1u32..5,
            placement in any::<bool>(),
            sched in schedule(),
        ) {
            let tasks: Vec<SimTask> = costs
                .iter()
                .map(|&(cost, stream, priority, target)| SimTask {
                    cost,
                    pool: ExecPool::Any,
                    target: Some(target),
                    stream,
                    priority,
                })
                .collect();
            let n = tasks.len();
            let mut edges: Vec<(u32, u32)> = picks
                .iter()
                .filter(|_| n > 1)
                .map(|&(a, b)| {
                    let (a, b) = (a % n, b % n);
                    (a.min(b) as u32, a.max(b) as u32)
                })
                .filter(|e| e.0 != e.1)
                .collect();
            edges.sort();
            edges.dedup();
            let m = SimMachine { executors: execs, vector: None, placement };
            let s = simulate(&tasks, &edges, &m, &sched).unwrap();
            // Device timing with free control paths is the same model.
            let (d, _) = simulate_device(&tasks, &edges, &m, &sched, &DeviceTimes::default()).unwrap();
            prop_assert_eq!(&d, &s);
            let work: u64 = tasks.iter().map(|t| t.cost).sum();
            prop_assert_eq!(s.work_cycles, work);
            prop_assert_eq!(s.busy.iter().sum::<u64>(), work);
            prop_assert_eq!(s.critical_path, longest_path(&tasks, &edges));
            prop_assert!(s.total_cycles >= s.critical_path);
            prop_assert!(s.total_cycles >= work.div_ceil(execs as u64));
            // Every edge is respected, and nothing runs before it is submitted.
            for &(p, q) in &edges {
                prop_assert!(s.starts[q as usize] >= s.starts[p as usize] + tasks[p as usize].cost);
            }
            for (i, &st) in s.starts.iter().enumerate() {
                prop_assert!(st >= sched.issue_cycles * (i as u64 + 1));
            }
            // Executors, gates and windows are never oversubscribed.
            prop_assert!(peak(&tasks, &s.starts, |_| true) <= execs as u64);
            match sched.gate {
                Some((d, GateScope::Global)) => {
                    prop_assert!(peak(&tasks, &s.starts, |_| true) <= d);
                    if d == 1 && sched.issue_cycles == 0 && !matches!(sched.timing, Timing::RateLimit(_)) {
                        prop_assert_eq!(s.total_cycles, work);
                    }
                }
                Some((d, GateScope::PerStream)) => {
                    for st in 0..2 {
                        prop_assert!(peak(&tasks, &s.starts, |t| t.stream == st) <= d);
                    }
                }
                _ => {}
            }
            if let Some((w, _)) = sched.window {
                prop_assert!(peak(&tasks, &s.starts, |_| true) <= w);
            }
            if !(placement && sched.ready == SimReady::WorkSteal) {
                prop_assert_eq!(s.migrations, 0);
            }
            if execs == 1 && sched.issue_cycles == 0 && !matches!(sched.timing, Timing::RateLimit(_)) {
                prop_assert_eq!(s.total_cycles, work);
            }
        }
    }
}
