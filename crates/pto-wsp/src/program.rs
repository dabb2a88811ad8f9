//! The back-end interface (the back-end architecture specification): [`lower`] a module into a
//! [`LoweredPlan`], [`compile`] the plan for a target into a [`Program`], and run it.
//!
//! Back ends implement [`crate::Backend`] and live in a registry ([`crate::backends`],
//! [`crate::get_backend`], [`crate::register_backend`]); `cpu_sim` (the CPU simulation of
//! `pto-wsp-cpu`, this module) and `bytecode` (an emitting back end) are registered by default.
//!
//! # What running a program does
//!
//! [`Program::execute`] allocates (or reuses) the tensors for the bindings, then runs a
//! *streamed* graph: the orchestration generates the workload's tasks under the bindings
//! and feeds each into the dependency-inferring builder, while the workers run every task whose
//! predecessors are done (start policy, window, gates, batching and dispatch from the
//! schedule). The generator is the bytecode interpreter (the workload encoded once at compile
//! time, `pto_wsp_cpu::feed_bytecode`) whenever the bytecode can express the module, else the
//! reference expander (`pto_wsp_bytecode::supports` says what the bytecode cannot express:
//! per-row ragged lengths, multi-producer channels; or [`CompileOptions::host_expander`]).
//! Either stops at each computed read until its producers complete. Both feed the builder the same
//! tasks and the same order announcements, so the graph is the same; an interpreter error is
//! reported in the expander's words. Kernels come from the [`KernelRegistry`] of the
//! [`CompileOptions`]; every kernel the module can run must be registered (else
//! [`CompileError::UnknownKernel`]).
//!
//! The orchestration runs on the thread that calls [`Program::execute`] (a module nested
//! deeper than [`CALLER_DEPTH`] levels on an orchestration thread whose stack holds any depth
//! the validator accepts; [`Program::execute_async`] always on its own thread). The workers are
//! the program's pool, started by [`compile`], or a pool shared by many programs
//! ([`CompileOptions::pool`]): runs on a shared pool take turns. A program keeps its run tables
//! (the task table, the task states, device generation's owner table) from one run to the next
//! and resets them, so a program run many times reuses their memory.
//!
//! A module whose entry is a CSP pipeline runs differently: each process on its own thread,
//! running its own tasks in order, connected by bounded channels of the declared depth
//! ([`pto_wsp_cpu::csp`]); a deadlock is reported naming the waiting processes and channels.
//! With [`CompileOptions::device_gen`], [`compile`] also encodes the workload as bytecode and
//! a run is a *device-generation* run instead: no orchestration thread; every worker thread
//! interprets the bytecode, infers the dependencies into its own tasks and runs them as they
//! are generated (`pto_wsp_cpu::devgen`). Same tasks, same edges, same numbers. A pipeline entry
//! runs as processes on threads in either mode.
//!
//! A run can be cancelled from another thread ([`Program::cancel`]): the kernel registry refuses
//! every later kernel call and the generator stops at its next task, so the run ends at the
//! tasks in flight and [`Program::synchronize`] reports [`RunError::Cancelled`]; the tensors
//! then hold what the completed tasks wrote. [`Program::wait`] waits for the run with a timeout
//! (the Python binding checks for Ctrl-C between waits). After a host run, the elements of the
//! output tensors no task wrote are reported ([`Program::coverage`], `coverage`).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use pto_wsp_cpu::sim::simulate;
use pto_wsp_cpu::table::Writer;
use pto_wsp_cpu::{
    BytecodeFeedError, CycleStats, ExecError, GateConfig, GenStats, KeptBuilder, KernelExec,
    PoolSplit, Producers, RunConfig, RunStats, SimError, SimMachine, SimReady, SimSchedule,
    SimTask, StreamConfig, TaskTable, WorkerPool, feed_bytecode, task_costs,
};
use pto_wsp_graph::builder::ExactMap;
use pto_wsp_graph::feed::{FeedError, FeedHooks, FeedTask, Origins, feed};
use pto_wsp_graph::ready::ReadyKind;
use pto_wsp_graph::state::TaskStates;
use pto_wsp_graph::{ExecDomain, TaskId};
use pto_wsp_ir::resolve::Sched;
use pto_wsp_ir::{
    Bindings, DataRead, ExpandError, ExpandOptions, ExpandedTask, Module, PoolsPolicy, ReadRefused,
    ReadyPolicy, ResolveError, ResolveOptions, Resolved, ScheduleConfig, SourceFile, TracePolicy,
    Unsupported, ValidationError, resolve, validate, validate_for_run,
};
use pto_wsp_kernels::{KernelId, KernelRegistry, StoreError, TensorStore};

pub mod coverage;
mod device;
pub use coverage::{TensorRole, plan_roles, roles};
mod devgen;
pub(crate) mod modes;

pub use coverage::Unwritten;

/// Options of [`compile`].
#[derive(Clone)]
pub struct CompileOptions {
    /// Target name (default `cpu_sim`).
    pub target: String,
    /// Worker threads; 0 means one per core (with [`CompileOptions::pool`]: the pool's, and any
    /// other count is refused).
    pub threads: usize,
    /// Run on this worker pool instead of starting one for the program. Programs that share a
    /// pool take turns on it (a run waits for the one in progress on another program), and
    /// compiling one starts no thread: what a process that compiles and runs many programs
    /// (tests, fuzzing, a server) uses so that it pays for its threads once.
    pub pool: Option<Arc<WorkerPool>>,
    /// Record the wall-clock span of every task (also on when the schedule says `trace wall`).
    pub profiling: bool,
    /// Record regions in flight and fail loudly on a conflict.
    pub debug_checks: bool,
    /// Prove that every two tasks whose regions conflict are ordered by a path of the run's
    /// graph, and fail the run naming the first pair that is not (`run --check`;
    /// `pto_wsp_graph::order_check`). Host runs only: compiling with it for device
    /// generation or a CSP pipeline fails with [`CompileError::CheckUnsupported`].
    pub check_order: bool,
    /// Vector workers under `pools by_exec_unit` (default: half, at least one each side).
    pub vector_workers: Option<usize>,
    /// The kernels tasks run.
    pub kernels: KernelRegistry,
    /// Device-generation mode: compile the workload to bytecode and let every worker thread
    /// interpret it and run its own tasks as they are generated, instead of a host thread
    /// building the graph (see [`crate::program`]'s docs and `pto_wsp_cpu::devgen`).
    pub device_gen: bool,
    /// Device-generation mode: let each executor interpret only its own tasks where the
    /// program allows it (`pto_wsp_cpu::devgen`, "Partitioned generation"); `false` makes every
    /// executor walk every task. Default: `DevGenConfig::default().partition` of
    /// `pto_wsp_cpu::devgen`. Same tasks, same edges, same numbers either way.
    pub device_gen_partition: bool,
    /// Streams (the compile option `num_streams`): overrides the schedule's `streams N;` when set.
    pub num_streams: Option<u64>,
    /// Executors dispatch targets range over (the compile option `num_aicpus`; on `cpu_sim` the
    /// modelled executors): overrides the schedule's `executors N;` when set.
    pub num_aicpus: Option<u64>,
    /// Tile grid dimensions for spatial back ends (the compile option `grid`, AIE); `cpu_sim`
    /// ignores it.
    pub grid: Vec<u64>,
    /// Optimisation level 0–3 (default 2), for back ends that have choices to
    /// make; `cpu_sim` has none yet and ignores it.
    pub opt_level: u8,
    /// Cycles the cycle model (`trace cycles`) charges orchestration for submitting each task
    /// (default 0: generation is free). With a cost, the start policy and `timing batched(n)`
    /// show in the modelled makespan.
    pub issue_cycles: u64,
    /// Host runs generate their tasks with the reference expander even when the bytecode can
    /// express the module (default `false`: the bytecode interpreter feeds the builder, the
    /// expander only for what `pto_wsp_bytecode::supports` refuses). Same tasks, same edges;
    /// for comparisons and benchmarks.
    pub host_expander: bool,
    /// Check after each host run that every output tensor was fully written
    /// ([`Program::coverage`]; default `true`). Costs a bitmap of one bit per element of the
    /// output tensors and a pass over each task's written boxes on the generating thread.
    pub coverage: bool,
    /// Values an emitting back end bakes into its artefact (symbols, slots, contents of integer
    /// tensors: `ascend`, `pto_isa`); a running back end takes its bindings at each run and
    /// ignores these.
    pub bindings: Bindings,
    /// The machine the device timeline model runs each traced run on (overrides the
    /// schedule's `trace cycles device(NAME)`; `None`: the schedule's, if any).
    pub machine: Option<crate::machine::Machine>,
    /// Record the device model's timeline (per-task times, orchestrator and scheduler
    /// intervals) for pictures.
    pub record_timeline: bool,
}

impl Default for CompileOptions {
    fn default() -> CompileOptions {
        CompileOptions {
            target: "cpu_sim".into(),
            threads: 0,
            pool: None,
            profiling: false,
            debug_checks: false,
            check_order: false,
            vector_workers: None,
            kernels: KernelRegistry::with_builtins(),
            device_gen: false,
            device_gen_partition: pto_wsp_cpu::devgen::DevGenConfig::default().partition,
            num_streams: None,
            num_aicpus: None,
            grid: Vec::new(),
            opt_level: 2,
            issue_cycles: 0,
            host_expander: false,
            coverage: true,
            bindings: Bindings::new(),
            machine: None,
            record_timeline: false,
        }
    }
}

impl std::fmt::Debug for CompileOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompileOptions")
            .field("target", &self.target)
            .field("threads", &self.threads)
            .field("pool", &self.pool)
            .field("profiling", &self.profiling)
            .field("debug_checks", &self.debug_checks)
            .field("check_order", &self.check_order)
            .field("kernels", &self.kernels.len())
            .field("device_gen", &self.device_gen)
            .field("device_gen_partition", &self.device_gen_partition)
            .field("num_streams", &self.num_streams)
            .field("num_aicpus", &self.num_aicpus)
            .field("grid", &self.grid)
            .field("opt_level", &self.opt_level)
            .field("issue_cycles", &self.issue_cycles)
            .finish()
    }
}

/// Why lowering or compiling failed.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    /// `trace cycles device(NAME)` names no shipped machine.
    #[error(
        "`device({name})` at byte {at}: no shipped machine of this name (shipped: {shipped}; a \
         machine file is given with --machine FILE)"
    )]
    UnknownMachine {
        /// The name.
        name: String,
        /// Byte offset in the source.
        at: usize,
        /// Shipped machine names.
        shipped: String,
    },
    /// The module is invalid.
    #[error("the module has {} validation error(s); the first: {}", .0.len(), .0[0])]
    Invalid(Vec<ValidationError>),
    /// No back end serves the target.
    #[error("unknown target `{target}` (available: {available})")]
    UnknownTarget {
        /// The target asked for.
        target: String,
        /// Targets the registry knows.
        available: String,
    },
    /// A kernel the module can run has no implementation in the registry.
    #[error(
        "kernel `{name}` has no implementation registered (register it, or use a built-in: {known})"
    )]
    UnknownKernel {
        /// The kernel.
        name: String,
        /// Byte offset of its declaration in the source (0 if built, not parsed).
        at: usize,
        /// Registered kernel names.
        known: String,
    },
    /// The worker threads could not be started (too many asked for, or the OS refused one).
    #[error(transparent)]
    Threads(#[from] pto_wsp_cpu::PoolError),
    /// [`CompileOptions::threads`] asks for another count than the shared pool has.
    #[error(
        "threads {threads} does not match the shared worker pool's {pool} threads (give 0, or {pool})"
    )]
    PoolThreads {
        /// The count asked for.
        threads: usize,
        /// The shared pool's threads.
        pool: usize,
    },
    /// The order check was asked for in a mode that does not implement it.
    #[error(
        "--check (the order check: every conflicting pair of tasks ordered by the graph) is not implemented for {mode}; run without --check, or as a host run"
    )]
    CheckUnsupported {
        /// The mode: device generation or a CSP pipeline.
        mode: &'static str,
    },
    /// Device-generation mode: the workload cannot be encoded as bytecode.
    #[error("device generation: cannot encode the workload as bytecode: {0}")]
    Bytecode(String),
    /// The entry point cannot be resolved (see [`pto_wsp_ir::resolve`](mod@pto_wsp_ir::resolve)).
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    /// The back end cannot run or emit a construct the module uses (with its location).
    #[error(transparent)]
    Unsupported(#[from] Unsupported),
    /// [`compile`] asked for a program from a back end that emits an artefact.
    #[error("target `{target}` emits an artefact, not a runnable program (use `compile_target`)")]
    NotRunnable {
        /// The target.
        target: String,
    },
    /// A back end could not be registered.
    #[error("cannot register back end `{name}`: {reason}")]
    Registry {
        /// The back end's name.
        name: String,
        /// Why.
        reason: String,
    },
    /// An emitting back end failed to produce its artefact.
    #[error("back end `{backend}`: {message}")]
    Emit {
        /// The back end.
        backend: String,
        /// What went wrong.
        message: String,
    },
    /// An emitter of `pto-wsp-backends` refused the program or failed, at a source location
    /// when it has one.
    #[error(transparent)]
    Emitter(#[from] pto_wsp_backends::EmitError),
}

impl pto_wsp_ir::Diagnostic for CompileError {
    /// Where the failure is in the source, when it has a place there (a construct a back end
    /// does not support, a resolution or emitter error; the first validation error).
    fn loc(&self) -> pto_wsp_ir::Loc {
        match self {
            CompileError::Invalid(errors) => errors
                .first()
                .map_or(pto_wsp_ir::Loc::NONE, pto_wsp_ir::Diagnostic::loc),
            CompileError::Resolve(e) => pto_wsp_ir::Diagnostic::loc(e),
            CompileError::Unsupported(e) => e.loc,
            CompileError::Emitter(e) => e.loc,
            _ => pto_wsp_ir::Loc::NONE,
        }
    }
}

/// Why running a program failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Tensors could not be allocated for the bindings (a missing symbol, a bad array).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The run failed.
    #[error(transparent)]
    Exec(#[from] ExecError),
    /// `synchronize` without an `execute_async` in progress.
    #[error("no run in progress")]
    NotRunning,
    /// A pipeline run failed: a deadlock (naming the waiting processes and channels), a task's
    /// failure, or two processes' accesses that no channel orders (see [`pto_wsp_cpu::csp`]).
    #[error(transparent)]
    Pipeline(#[from] pto_wsp_cpu::CspError),
    /// [`Program::cancel`] stopped the run; the tasks that had completed wrote their results.
    #[error("the run was cancelled")]
    Cancelled,
}

impl pto_wsp_ir::Diagnostic for RunError {
    /// Where the run failed in the source, when the generator knows it (an error of a computed
    /// read: [`ExecError::BuildAt`]; a pipeline's computed read that met another process's
    /// running task: [`pto_wsp_cpu::CspError::ReadConflict`]); [`pto_wsp_ir::Loc::NONE`]
    /// otherwise.
    fn loc(&self) -> pto_wsp_ir::Loc {
        match self {
            RunError::Exec(e) => pto_wsp_ir::Diagnostic::loc(e),
            RunError::Pipeline(e) => pto_wsp_ir::Diagnostic::loc(e),
            _ => pto_wsp_ir::Loc::NONE,
        }
    }

    fn label(&self) -> Option<String> {
        match self {
            RunError::Exec(e) => pto_wsp_ir::Diagnostic::label(e),
            RunError::Pipeline(e) => pto_wsp_ir::Diagnostic::label(e),
            _ => None,
        }
    }

    /// A pipeline's unordered pair ([`pto_wsp_cpu::CspError::Race`]): the second statement.
    fn related(&self) -> Vec<(pto_wsp_ir::Loc, String)> {
        match self {
            RunError::Pipeline(e) => pto_wsp_ir::Diagnostic::related(e),
            _ => Vec::new(),
        }
    }
}

/// A module lowered for back ends: validated and resolved, once (the schedule folded into the
/// resolved program's [`Sched`]). Every back end, the expander and the front ends read this one
/// resolution ([`LoweredPlan::resolved`]); nothing on the way to a run or an artefact resolves
/// the module again.
#[derive(Clone, Debug)]
pub struct LoweredPlan {
    /// The resolved entry point, which owns the module.
    resolved: Arc<Resolved>,
    /// The text the module was parsed from, when it was: emitting back ends write its
    /// `file:line:column` positions into what they emit ([`LoweredPlan::with_source`]).
    pub source: Option<Arc<SourceFile>>,
}

impl LoweredPlan {
    /// The plan with the text its module was parsed from, so that positions emitted code names
    /// read `file:line:column`.
    pub fn with_source(mut self, source: SourceFile) -> LoweredPlan {
        self.source = Some(Arc::new(source));
        self
    }

    /// The module's entry point, resolved (what [`crate::Backend::supports`] reads).
    pub fn resolved(&self) -> &Resolved {
        &self.resolved
    }

    /// The module.
    pub fn module(&self) -> &Module {
        &self.resolved.module
    }

    /// The schedule, folded, with its defaults: the one schedule form every consumer reads
    /// (the resolved program's).
    pub fn sched(&self) -> &Sched {
        &self.resolved.schedule
    }

    /// The schedule's settings as written, with defaults filled in ([`Sched::config`]).
    pub fn config(&self) -> &ScheduleConfig {
        &self.resolved.schedule.config
    }

    /// The same resolved program under other run-time settings, for comparisons and tests:
    /// `f` edits the folded schedule's settings that only the runtime reads (`deps`,
    /// `task_window`, `start`, `timing`, the `ready` order, `pools`, `pipeline_depth`,
    /// `batch_deps`, `trace none` / `wall`). Unchecked: `validate_for_run`'s rules for the new
    /// settings are not applied again (under `deps exact` the caller answers for every
    /// dependency being found), and settings resolution decided keep the resolved meaning
    /// (per-task dispatch, stream, priority and cost keys; use [`CompileOptions::num_aicpus`] /
    /// [`CompileOptions::num_streams`] for the counts).
    pub fn with_config_unchecked(self, f: impl FnOnce(&mut ScheduleConfig)) -> LoweredPlan {
        let mut resolved = Resolved::clone(&self.resolved);
        f(&mut resolved.schedule.config);
        LoweredPlan {
            resolved: Arc::new(resolved),
            source: self.source,
        }
    }

    /// Applies the overrides of `options` (`num_streams`, `num_aicpus`) to the resolved
    /// schedule, so every consumer (expander, bytecode, cost model) sees them; nothing is
    /// resolved again.
    fn with_overrides(self, options: &CompileOptions) -> Result<LoweredPlan, CompileError> {
        if options.num_aicpus.is_none() && options.num_streams.is_none() {
            return Ok(self);
        }
        let resolved =
            Resolved::clone(&self.resolved).with_counts(options.num_aicpus, options.num_streams)?;
        Ok(LoweredPlan {
            resolved: Arc::new(resolved),
            source: self.source,
        })
    }
}

/// Validates `module`, resolves its entry point (every check that needs no runtime value) and
/// folds its schedule: the one resolution of the module on its way to a run or an artefact.
pub fn lower(module: &Module) -> Result<LoweredPlan, CompileError> {
    validate(module).map_err(CompileError::Invalid)?;
    let resolved = resolve(module, &ResolveOptions::default())?;
    Ok(LoweredPlan {
        resolved: Arc::new(resolved),
        source: None,
    })
}

/// Compiles `plan` into a runnable program for `options.target`, through the back-end
/// registry ([`crate::get_backend`]); a target whose back end emits an artefact gives
/// [`CompileError::NotRunnable`] (use [`crate::compile_target`]).
pub fn compile(plan: LoweredPlan, options: CompileOptions) -> Result<Program, CompileError> {
    match crate::backend::compile_target(&plan, &options)? {
        crate::backend::Output::Program(p) => Ok(*p),
        crate::backend::Output::Artefact(_) => Err(CompileError::NotRunnable {
            target: options.target.clone(),
        }),
    }
}

/// The `cpu_sim` back end's compilation (see [`crate::backend::CpuSim`]).
pub(crate) fn compile_cpu(
    plan: LoweredPlan,
    options: CompileOptions,
) -> Result<Program, CompileError> {
    // What running needs beyond expansion (the default exact dependencies held to the
    // tile-grid rule, ...): refused here, where host runs, device-generation runs and
    // `trace cycles` all pass.
    validate_for_run(plan.module()).map_err(CompileError::Invalid)?;
    let plan = plan.with_overrides(&options)?;
    let mode = run_mode(&plan, &options);
    if options.check_order {
        check_order_refused(mode)?;
    }
    let kernels = kernel_ids(&plan, &options)?;
    let names = plan
        .module()
        .kernels
        .iter()
        .map(|k| k.name.name.clone())
        .collect();
    modes::refused(plan.module(), mode)?;
    // Tensors the generator reads computed values of (`docs/SEMANTICS.md`): their writers are
    // tracked during a run so a read can wait on them; none in most modules.
    let r = plan.resolved();
    modes::data_refused(r, mode)?;
    let computed = (0..r.arrays.len())
        .map(|t| r.arrays[t] && r.written[t])
        .collect();
    let read_only = read_only_tensors(r);
    let outputs = coverage::outputs(r);
    let writers = coverage::writers(r, &outputs);
    let notes = modes::notes(plan.module(), mode);
    let bytecode = if options.device_gen {
        Some(devgen::compile_bytecode(plan.resolved())?)
    } else {
        None
    };
    // A host run's generator: the bytecode interpreter when it can express the module (the
    // first refusal of `pto_wsp_bytecode::supports`, or a table too wide for the format, keeps
    // the reference expander). Both serve computed reads through the same hooks: the generator
    // stops at each one until the producers complete.
    let host_bytecode = if matches!(mode, modes::Mode::Host) && !options.host_expander {
        devgen::compile_bytecode(plan.resolved()).ok()
    } else {
        None
    };
    let machine = machine_of(&plan, &options)?;
    if machine.is_some() {
        modes::machine_refused(mode)?;
    }
    let on_caller = pto_wsp_ir::total_depth(plan.module()) <= CALLER_DEPTH;
    // The program holds the pool once (its options keep no second reference).
    let mut options = options;
    let pool = match options.pool.take() {
        Some(pool) if options.threads == 0 || options.threads == pool.threads() => pool,
        Some(pool) => {
            return Err(CompileError::PoolThreads {
                threads: options.threads,
                pool: pool.threads(),
            });
        }
        None => Arc::new(WorkerPool::new(options.threads)?),
    };
    Ok(Program {
        inner: Arc::new(Inner {
            plan,
            kernels,
            names,
            computed,
            read_only,
            outputs,
            writers,
            pool,
            options,
            bytecode,
            host_bytecode,
            notes,
            machine,
            on_caller,
            tables: Mutex::new(None),
            devgen_tables: Mutex::new(None),
            coverage: Mutex::new(None),
        }),
        store: Arc::new(Mutex::new(None)),
        running: None,
        last: None,
        coverage: Vec::new(),
        compile_ms: 0.0,
    })
}

/// Per tensor of `r`'s module: whether no task statement of the entry passes it to a kernel
/// parameter that writes it (`out` / `inout`). A tensor is named statically by every region
/// (no tensor is chosen at run time, none aliases another), and a statement counts whether or
/// not its loops ever run it, so `true` is safe: no task of any run writes the tensor, and its
/// reads need no edge (docs/RUNTIME.md, "Read-only tensors"). The mask a program
/// hands its builder ([`pto_wsp_graph::builder::GraphBuilder::set_read_only`]) and its device
/// generation tables.
pub fn read_only_tensors(r: &Resolved) -> Vec<bool> {
    r.written.iter().map(|&w| !w).collect()
}

/// How a program compiled with `options` runs `plan`'s entry point.
fn run_mode(plan: &LoweredPlan, options: &CompileOptions) -> modes::Mode {
    let module = plan.module();
    if module
        .entry_name()
        .and_then(|e| module.pipeline(e))
        .is_some()
    {
        modes::Mode::Pipeline
    } else if options.device_gen {
        modes::Mode::DeviceGen
    } else {
        modes::Mode::Host
    }
}

/// Refuses the order check in a mode that builds no one graph the checker could see (never
/// silently passed).
fn check_order_refused(mode: modes::Mode) -> Result<(), CompileError> {
    match mode {
        modes::Mode::Pipeline => Err(CompileError::CheckUnsupported {
            mode: "CSP pipelines (processes on threads ordered by channels)",
        }),
        modes::Mode::DeviceGen => Err(CompileError::CheckUnsupported {
            mode: "device generation (--device-gen: each executor wires its own tasks)",
        }),
        modes::Mode::Host => Ok(()),
    }
}

/// The registry's id of each kernel of the module, in order (`None` for a kernel with tiers
/// the registry does not hold); a kernel neither has is an error listing the known names.
fn kernel_ids(
    plan: &LoweredPlan,
    options: &CompileOptions,
) -> Result<Vec<Option<KernelId>>, CompileError> {
    let mut kernels = Vec::new();
    for k in &plan.module().kernels {
        let id = options.kernels.lookup(&k.name.name);
        if id.is_none() && k.tiers.is_none() {
            let mut known: Vec<&str> = options.kernels.names().collect();
            known.sort();
            return Err(CompileError::UnknownKernel {
                name: k.name.name.clone(),
                at: k.name.loc.start as usize,
                known: known.join(", "),
            });
        }
        kernels.push(id);
    }
    Ok(kernels)
}

/// The machine runs are modelled on: the options', else the one the schedule's `trace cycles`
/// names (a shipped description), else none.
fn machine_of(
    plan: &LoweredPlan,
    options: &CompileOptions,
) -> Result<Option<crate::machine::Machine>, CompileError> {
    Ok(match (&options.machine, &plan.config().trace) {
        (Some(m), _) => Some(m.clone()),
        (None, TracePolicy::Cycles(_, Some(name))) => {
            Some(crate::machine::shipped(&name.name).ok_or_else(|| {
                CompileError::UnknownMachine {
                    name: name.name.clone(),
                    at: name.loc.start as usize,
                    shipped: crate::machine::shipped_names().join(", "),
                }
            })?)
        }
        _ => None,
    })
}

struct Inner {
    plan: LoweredPlan,
    kernels: Vec<Option<KernelId>>,
    names: Vec<String>,
    /// Per tensor: whether the entry reads computed values of it.
    computed: Vec<bool>,
    /// Per tensor: written by no task of the entry ([`read_only_tensors`]), so its reads skip
    /// dependency inference on both generators and in device generation.
    read_only: Vec<bool>,
    /// Per tensor: whether runs must write all of it (`coverage::outputs`).
    outputs: Vec<bool>,
    /// Per module kernel: whether its tasks may write such a tensor (`coverage::writers`).
    writers: Vec<bool>,
    /// The program's own pool, or the one [`CompileOptions::pool`] shares.
    pool: Arc<WorkerPool>,
    options: CompileOptions,
    /// The decoded bytecode, in device-generation mode.
    bytecode: Option<pto_wsp_bytecode::Program>,
    /// The decoded bytecode that generates a host run's tasks, when it can express the module
    /// (else the reference expander does).
    host_bytecode: Option<pto_wsp_bytecode::Program>,
    /// Directives that compile but do nothing in this program's mode (`modes::notes`).
    notes: Vec<String>,
    /// The machine of the device timeline model, if runs are modelled on one.
    machine: Option<crate::machine::Machine>,
    /// Whether [`Program::execute`] orchestrates on the calling thread: the module is at most
    /// [`CALLER_DEPTH`] levels deep.
    on_caller: bool,
    /// A host run's task table, task states and builder (its TensorMap and buffers), made by
    /// the first host run, kept across runs and reset before each (their memory is reused: no
    /// fresh pages, no map grown again, per run).
    tables: Mutex<Option<(TaskTable, TaskStates, KeptBuilder)>>,
    /// A device-generation run's tables, made by the first such run and kept likewise.
    devgen_tables: Mutex<Option<pto_wsp_cpu::DevGenTables>>,
    /// A host run's coverage bitmaps, made by the first checked run and reset before each
    /// (zeroed in place: an allocation of one bit per output element per run no more).
    coverage: Mutex<Option<coverage::Coverage>>,
}

/// The deepest module (nesting plus calls, as the validator counts them) whose run
/// [`Program::execute`] orchestrates on the calling thread; deeper ones run on a thread with
/// [`pto_wsp_cpu::WALK_STACK_BYTES`] of stack. Held by a test that runs a module this deep on a
/// thread of 512 KiB in an unoptimised build (a quarter of the 2 MiB a spawned Rust thread has
/// by default).
pub const CALLER_DEPTH: usize = 16;

/// A compiled program: runs its workload on the CPU simulation (see the module docs).
pub struct Program {
    inner: Arc<Inner>,
    store: Arc<Mutex<Option<TensorStore>>>,
    running: Option<Running>,
    last: Option<(RunStats, f64)>,
    /// The output tensors the last completed run left partly unwritten.
    coverage: Vec<Unwritten>,
    /// Milliseconds [`crate::compile_target`] took (resolution, checks and compilation).
    compile_ms: f64,
}

/// A run in progress: its thread, the flag it raises when it ends, and its start.
struct Running {
    handle: JoinHandle<Result<(RunStats, Vec<Unwritten>), RunError>>,
    done: Arc<Done>,
    t0: Instant,
}

/// Raised by a run's thread as it ends (what [`Program::wait`] waits on).
#[derive(Default)]
struct Done {
    ended: Mutex<bool>,
    signal: Condvar,
}

impl Done {
    fn raise(&self) {
        *self.ended.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.signal.notify_all();
    }

    /// Whether the run ended within `timeout`.
    fn wait(&self, timeout: Duration) -> bool {
        let g = self.ended.lock().unwrap_or_else(|p| p.into_inner());
        let (g, _) = self
            .signal
            .wait_timeout_while(g, timeout, |ended| !*ended)
            .unwrap_or_else(|p| p.into_inner());
        *g
    }
}

/// A program's figures (the back-end architecture specification's `ProgramStats`): what it was
/// compiled for and its last run.
#[derive(Clone, Debug)]
pub struct ProgramStats {
    /// Tasks of the last run (barrier tasks of structural order included).
    pub num_tasks: u64,
    /// Streams of the schedule the program runs.
    pub num_streams: u64,
    /// Executors: the worker threads that ran tasks.
    pub num_executors: usize,
    /// Milliseconds spent compiling (resolution, back-end checks, compilation).
    pub compile_time_ms: f64,
    /// Wall-clock milliseconds of the last run.
    pub execute_time_ms: f64,
    /// The CPU runtime's own statistics of the last run.
    pub run: RunStats,
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Program")
            .field("threads", &self.inner.pool.threads())
            .finish_non_exhaustive()
    }
}

/// Records each task's expander index (and, when the schedule asks, its priority key for the
/// workers and its `cycles(EXPR)` cost for the model) and stops feeding when the run failed.
struct Hooks<'p> {
    origins: &'p mut Origins,
    probe: pto_wsp_cpu::AbortProbe<'p>,
    priorities: Option<Writer<'p, i64>>,
    costs: Option<&'p mut Vec<Option<u64>>>,
    /// Writers of tensors read as computed values, when there are such tensors.
    producers: Option<Producers>,
    store: &'p TensorStore,
    generation: &'p mut GenStats,
    /// The output tensors' written elements, when the run checks them.
    coverage: Option<&'p mut coverage::Coverage>,
    /// Raised by [`Program::cancel`]: the generator stops at its next task.
    kernels: &'p KernelRegistry,
    /// Whether any of `priorities`, `costs` and `producers` is set (asked once per task, not
    /// three times).
    records: bool,
}

impl Hooks<'_> {
    /// Sets [`Hooks::records`] from the fields; call once the hooks are built.
    fn with_records(mut self) -> Self {
        self.records =
            self.priorities.is_some() || self.costs.is_some() || self.producers.is_some();
        self
    }

    /// Marks the regions task `t` writes in the coverage bitmaps.
    #[inline(never)]
    fn mark(c: &mut coverage::Coverage, t: &dyn FeedTask) {
        // A region the builder refuses fails the run below; here it only marks.
        let _ = t.try_for_each_region(&mut |access, tensor, start, size| {
            c.mark(access, tensor, start, size);
            Ok(())
        });
    }

    /// The per-task records some schedules ask for: priority key, cycle cost, producers.
    #[inline(never)]
    fn record(&mut self, id: pto_wsp_graph::TaskId, task: Option<(u32, &dyn FeedTask)>) {
        if let Some(w) = &mut self.priorities {
            w.push(task.map_or(0, |(_, t)| t.priority()));
        }
        if let Some(c) = &mut self.costs {
            c.push(task.and_then(|(_, t)| t.cost()));
        }
        if let (Some(p), Some((_, t))) = (&mut self.producers, task) {
            p.record(id, t);
        }
    }
}

impl FeedHooks for Hooks<'_> {
    type Error = ();
    #[inline]
    fn before_submit(
        &mut self,
        id: pto_wsp_graph::TaskId,
        task: Option<(u32, &dyn FeedTask)>,
    ) -> Result<(), ()> {
        if self.probe.failed() || self.kernels.is_cancelled() {
            return Err(());
        }
        debug_assert_eq!(id.index(), self.origins.len());
        match task {
            Some((_, t)) => {
                self.origins.push_user();
                if let Some(c) = &mut self.coverage
                    && c.tracks(t.kernel())
                {
                    Hooks::mark(c, t);
                }
            }
            None => self.origins.push_barrier(),
        }
        if self.records {
            self.record(id, task);
        }
        Ok(())
    }

    fn read(
        &mut self,
        read: &DataRead<'_>,
        out: &mut Vec<i64>,
        wait: &mut dyn FnMut(&[TaskId]) -> Option<bool>,
    ) -> Result<(), ReadRefused> {
        let Some(p) = &mut self.producers else {
            return Err(ReadRefused::Unsupported(
                "the run tracks no producer of this tensor".into(),
            ));
        };
        p.serve(read, wait, self.store, self.generation, out)
    }
}

/// The reference expander's error for `module` under `bindings`, if it finds one (every task
/// discarded as generated: nothing is kept; a computed read stops it with
/// [`ExpandError::ComputedRead`]).
fn expander_error(res: &Resolved, bindings: &Bindings) -> Option<ExpandError> {
    struct Discard;
    impl pto_wsp_ir::ExpandSink for Discard {
        fn task(&mut self, _: u32, _: &ExpandedTask) -> std::ops::ControlFlow<()> {
            std::ops::ControlFlow::Continue(())
        }
        fn order(&mut self, _: pto_wsp_ir::OrderEdge) {}
    }
    pto_wsp_ir::expand_with(res, bindings, &ExpandOptions::default(), &mut Discard).err()
}

impl Inner {
    fn run_config(&self) -> (RunConfig, StreamConfig) {
        let c = self.plan.config();
        let threads = self.pool.threads();
        let run = RunConfig {
            ready: ReadyKind::from(&c.ready),
            pools: match c.pools {
                PoolsPolicy::Single => PoolSplit::Single,
                PoolsPolicy::ByExecUnit => PoolSplit::ByExecUnit {
                    vector: self.options.vector_workers.unwrap_or(threads / 2),
                },
            },
            placement: self.plan.sched().placement(),
            gate: c.pipeline_depth.map(|(depth, scope)| GateConfig {
                depth: depth.min(u32::MAX as u64) as u32,
                scope,
                streams: c.streams,
            }),
            batch: c.batch_deps.clamp(1, u32::MAX as u64) as u32,
            trace: self.options.profiling || matches!(c.trace, TracePolicy::Wall),
        };
        let stream = StreamConfig {
            deps: c.deps,
            exact: ExactMap::Growable,
            start: c.start,
            window: c.task_window,
            record_edges: self.cycles(),
            timing: c.timing,
            streams: c.streams,
            check_order: self.options.check_order,
        };
        (run, stream)
    }

    /// Whether the schedule asks for the cycle-cost model.
    fn cycles(&self) -> bool {
        matches!(self.plan.config().trace, TracePolicy::Cycles(..)) || self.machine.is_some()
    }

    /// Runs once under `bindings` on `store`; with the output tensors left partly unwritten
    /// (host runs with [`CompileOptions::coverage`]; empty otherwise).
    fn execute(
        &self,
        bindings: &Bindings,
        store: &mut TensorStore,
    ) -> Result<(RunStats, Vec<Unwritten>), RunError> {
        // Host runs feed every task through the hooks that mark coverage; device generation and
        // pipelines do not, and are not checked.
        let host = self.bytecode.is_none() && !self.plan.resolved().csp;
        let mut kept = self.coverage.lock().unwrap_or_else(|p| p.into_inner());
        let cover = if self.options.coverage && host && !self.outputs.is_empty() {
            let c = match kept.as_mut() {
                Some(c) => {
                    c.reset(&self.outputs, store);
                    c
                }
                None => kept.insert(coverage::Coverage::new(&self.outputs, &self.writers, store)),
            };
            c.any().then_some(c)
        } else {
            None
        };
        // A cancelled run ends with the first refused kernel's error, or not at all when the
        // generator stopped first: either way it is reported as cancelled.
        let run = self.execute_run(bindings, store, cover);
        if self.options.kernels.is_cancelled() {
            return Err(RunError::Cancelled);
        }
        let stats = run?;
        // Only a checked run made the bitmaps (the options and mode are the program's).
        let unwritten = kept
            .as_ref()
            .filter(|c| c.any())
            .map(|c| c.report(store))
            .unwrap_or_default();
        Ok((stats, unwritten))
    }

    /// One run of the entry point: a device-generation run, a pipeline, or a host run.
    fn execute_run(
        &self,
        bindings: &Bindings,
        store: &mut TensorStore,
        cover: Option<&mut coverage::Coverage>,
    ) -> Result<RunStats, RunError> {
        let module = self.plan.module();
        // A pipeline is a program, not a graph (its bounded channels order its processes), so
        // it runs as processes on threads in either mode.
        let pipeline = module
            .entry_name()
            .and_then(|e| module.pipeline(e))
            .is_some();
        match (&self.bytecode, pipeline) {
            (_, true) => self.execute_pipeline(bindings, store),
            (Some(bytecode), false) => self.execute_devgen(bytecode, bindings, store),
            (None, false) => self.execute_host(bindings, store, cover),
        }
    }

    /// A pipeline's run: processes on threads with bounded channels (`pto_wsp_cpu::csp`).
    fn execute_pipeline(
        &self,
        bindings: &Bindings,
        store: &mut TensorStore,
    ) -> Result<RunStats, RunError> {
        let options = pto_wsp_cpu::CspOptions {
            trace: self.options.profiling || matches!(self.plan.config().trace, TracePolicy::Wall),
            cycles: self.cycles(),
            ..pto_wsp_cpu::CspOptions::default()
        };
        Ok(pto_wsp_cpu::run_pipeline(
            self.plan.resolved(),
            bindings,
            store,
            &self.options.kernels,
            &self.kernels,
            &self.names,
            options,
        )?)
    }

    /// A host run: the generator feeds the streamed builder while the pool runs the tasks;
    /// then tasks are named by their expander index and the models run on the finished graph.
    fn execute_host(
        &self,
        bindings: &Bindings,
        store: &mut TensorStore,
        cover: Option<&mut coverage::Coverage>,
    ) -> Result<RunStats, RunError> {
        let (run, stream) = self.run_config();
        // The program's table and task states, emptied: the last run's memory, no fresh pages.
        let mut tables = self.tables.lock().unwrap_or_else(|p| p.into_inner());
        let (table, states, kept) =
            tables.get_or_insert_with(|| (TaskTable::new(), TaskStates::new(), KeptBuilder::new()));
        table.reset();
        states.reset();
        let (table, states) = (&*table, &*states);
        let exec = KernelExec::new(
            table,
            store,
            &self.options.kernels,
            &self.kernels,
            &self.names,
            self.options.debug_checks,
        );
        let mut origins = Origins::new(TaskId(0));
        let mut costs = Vec::new();
        let mut generation = GenStats::default();
        let mut summary = None;
        let priority = matches!(self.plan.config().ready, ReadyPolicy::Priority(_));
        let tracked = self.computed.iter().any(|&c| c);
        let shared: &TensorStore = store;
        let r = self
            .pool
            .run_streaming_on(table, states, kept, &run, &stream, &exec, |b| {
                let mut hooks = Hooks {
                    origins: &mut origins,
                    probe: b.sink().abort_probe(),
                    priorities: priority.then(|| table.priority_writer()).flatten(),
                    costs: self.cycles().then_some(&mut costs),
                    producers: tracked.then(|| Producers::new(self.computed.clone())),
                    store: shared,
                    generation: &mut generation,
                    coverage: cover,
                    kernels: &self.options.kernels,
                    records: false,
                }
                .with_records();
                summary = self.generate(bindings, b, &mut hooks)?;
                Ok(())
            });
        let mut stats = r.map_err(|e| self.as_user_knows(e, &origins))?;
        stats.barriers = u64::from(origins.barrier_tasks());
        if let Some(s) = summary {
            generation.loops_at_max = s.loops_at_max;
        }
        stats.generation = generation;
        // Spans name tasks as the user knows them too (barrier tasks run no kernel, no span).
        for s in &mut stats.spans {
            s.task = origins.index_of(TaskId(s.task)).unwrap_or(u32::MAX);
        }
        self.add_models(&mut stats, table, store, &costs, &origins)?;
        Ok(stats)
    }

    /// Feeds every task of the entry point under `bindings` into `b`: through the bytecode
    /// interpreter when it can express the module, else the reference expander. The
    /// expansion's summary, or `None` when a hook stopped the feed (the run failed or was
    /// cancelled: the pool reports why).
    fn generate(
        &self,
        bindings: &Bindings,
        b: &mut pto_wsp_cpu::StreamBuilder<'_>,
        hooks: &mut Hooks<'_>,
    ) -> Result<Option<pto_wsp_ir::ExpandSummary>, ExecError> {
        b.set_read_only(&self.read_only);
        // Bindings the bytecode refuses go to the expander, which names the mistake.
        let bound = self
            .host_bytecode
            .as_ref()
            .and_then(|p| p.bind(bindings).ok().map(|b| (p, b)));
        let fed = match &bound {
            Some((program, bound)) => {
                match feed_bytecode(program, bound, b, hooks, ExecDomain::default()) {
                    Ok(s) => Ok(s),
                    Err(BytecodeFeedError::Feed(e)) => Err(e),
                    Err(BytecodeFeedError::Interp(e)) => {
                        return Err(self.interp_error(bindings, &e));
                    }
                }
            }
            None => feed(
                self.plan.resolved(),
                bindings,
                &ExpandOptions::default(),
                b,
                hooks,
                ExecDomain::default(),
            ),
        };
        match fed {
            Ok(s) => Ok(Some(s.expand)),
            Err(FeedError::Hook(())) => Ok(None),
            Err(FeedError::Expand(e)) => Err(ExecError::build(&e)),
            Err(FeedError::Build(e)) => Err(ExecError::Build(e.to_string())),
        }
    }

    /// The error of a bytecode generator that stopped with `e`: the user sees the reference
    /// expander's message for the same mistake, placed at its statement (the interpreter's,
    /// placed by its statement table, when the expander finds none before a computed read,
    /// which it cannot serve without running tasks, and for an error of a computed read
    /// itself).
    fn interp_error(&self, bindings: &Bindings, e: &pto_wsp_bytecode::InterpError) -> ExecError {
        match expander_error(self.plan.resolved(), bindings)
            .filter(|x| !matches!(x, ExpandError::ComputedRead { .. }))
        {
            Some(x) => ExecError::build(&x),
            None => ExecError::build(e),
        }
    }

    /// `e` with its tasks named as the user knows them: by their expander index (and an
    /// unordered pair's kernels and tensor by name).
    fn as_user_knows(&self, e: ExecError, origins: &Origins) -> ExecError {
        match e {
            ExecError::Kernel {
                task,
                kernel,
                message,
                panicked,
            } => ExecError::Kernel {
                task: origins.index_of(TaskId(task)).unwrap_or(task),
                kernel,
                message,
                panicked,
            },
            ExecError::Unordered(mut u) => {
                let name = |k: u32| {
                    self.names
                        .get(k as usize)
                        .cloned()
                        .unwrap_or_else(|| format!("kernel #{k}"))
                };
                let (e, l) = (u.pair.earlier, u.pair.later);
                u.kernels = [name(e.kernel), name(l.kernel)];
                if let Some(t) = self.plan.module().tensors.get(u.pair.tensor() as usize) {
                    u.tensor = t.name.name.clone();
                }
                u.indices = [e.task, l.task].map(|t| origins.index_of(t).unwrap_or(t.0));
                ExecError::Unordered(u)
            }
            other => other,
        }
    }

    /// The cycle-cost model and the device timeline model of a finished host run, when the
    /// program asks for them.
    fn add_models(
        &self,
        stats: &mut RunStats,
        table: &TaskTable,
        store: &mut TensorStore,
        costs: &[Option<u64>],
        origins: &Origins,
    ) -> Result<(), RunError> {
        if self.cycles() {
            stats.cycles = Some(self.model(table, store, costs, &stats.edge_list)?);
        }
        if let Some(m) = &self.machine {
            stats.device = self.device_model(m, table, store, costs, &stats.edge_list)?;
            let index = origins.to_vec();
            for d in &mut stats.device {
                d.task_index.clone_from(&index);
            }
        }
        Ok(())
    }

    /// The cycle-cost model of a finished run (see [`pto_wsp_cpu::sim`]).
    fn model(
        &self,
        table: &TaskTable,
        store: &mut TensorStore,
        given: &[Option<u64>],
        edges: &[(u32, u32)],
    ) -> Result<CycleStats, RunError> {
        let n = table.len();
        let cost = task_costs(table, n, store, &self.options.kernels, &self.kernels, given);
        let c = self.plan.config();
        let priority = matches!(c.ready, ReadyPolicy::Priority(_));
        let tasks: Vec<SimTask> = (0..n)
            .map(|i| {
                let id = TaskId(i as u32);
                let node = table
                    .node(id)
                    .expect("every task of a finished run is published");
                SimTask {
                    cost: cost[i],
                    pool: node.pool(),
                    target: node.affinity(),
                    stream: node.stream,
                    priority: if priority { table.priority(id) } else { 0 },
                }
            })
            .collect();
        let executors = c.executors.clamp(1, u32::MAX as u64) as u32;
        let machine = SimMachine {
            executors,
            vector: matches!(c.pools, PoolsPolicy::ByExecUnit).then_some(executors / 2),
            placement: self.plan.sched().placement(),
        };
        simulate(&tasks, edges, &machine, &self.sim_schedule()).map_err(model_error)
    }

    /// The device timeline model of a finished run on `m`: device generation, then host
    /// generation (see [`device`]).
    fn device_model(
        &self,
        m: &crate::machine::Machine,
        table: &TaskTable,
        store: &mut TensorStore,
        given: &[Option<u64>],
        edges: &[(u32, u32)],
    ) -> Result<Vec<pto_wsp_cpu::DeviceRun>, RunError> {
        let c = &self.plan.config();
        let kernels = device::Kernels {
            module: self.plan.module(),
            registry: &self.options.kernels,
            ids: &self.kernels,
            names: &self.names,
        };
        let priority = matches!(c.ready, ReadyPolicy::Priority(_));
        let tasks = device::device_tasks(m, table, table.len(), store, &kernels, given, priority);
        let follow = device::Follow {
            schedule: self.sim_schedule(),
            executors: c.executors.clamp(1, u32::MAX as u64) as u32,
            dispatch: c.dispatch.clone(),
        };
        [false, true]
            .into_iter()
            .map(|host| {
                device::model(
                    m,
                    &tasks,
                    edges,
                    &follow,
                    host,
                    self.options.record_timeline,
                    &self.names,
                )
                .map_err(model_error)
            })
            .collect()
    }

    /// The schedule the cycle models follow.
    fn sim_schedule(&self) -> SimSchedule {
        let c = &self.plan.config();
        SimSchedule {
            issue_cycles: self.options.issue_cycles,
            window: c.task_window,
            gate: c.pipeline_depth,
            start: c.start,
            timing: c.timing,
            ready: match c.ready {
                ReadyPolicy::Fifo => SimReady::Fifo,
                ReadyPolicy::Priority(_) => SimReady::Priority,
                ReadyPolicy::WorkSteal => SimReady::WorkSteal,
            },
            streams: c.streams.clamp(1, u32::MAX as u64) as u32,
            batch_deps: c.batch_deps,
        }
    }
}

/// A model's refusal as a run error.
fn model_error(e: SimError) -> RunError {
    match e {
        SimError::WindowFull { .. } => {
            RunError::Exec(ExecError::Setup(format!("cycle model: {e}")))
        }
        e => RunError::Exec(ExecError::Internal(format!("cycle model: {e}"))),
    }
}

impl Program {
    /// The tensors for `bindings`, allocated (zeroed) if there are none yet or the bindings
    /// give them other shapes; write inputs here before [`Program::execute`].
    pub fn tensors(
        &mut self,
        bindings: &Bindings,
    ) -> Result<std::sync::MutexGuard<'_, Option<TensorStore>>, RunError> {
        let mut g = self.store.lock().unwrap_or_else(|p| p.into_inner());
        let fresh = TensorStore::new(self.inner.plan.module(), bindings)?;
        let same = g.as_ref().is_some_and(|s| {
            s.len() == fresh.len() && (0..s.len() as u32).all(|i| s.info(i) == fresh.info(i))
        });
        if !same {
            *g = Some(fresh);
        }
        Ok(g)
    }

    /// Runs the workload under `bindings` and waits for it. The orchestration (generating the
    /// tasks and feeding the graph) runs on the calling thread while the pool's workers run the
    /// tasks, so a run starts no thread; a module nested deeper than [`CALLER_DEPTH`] levels
    /// (nesting plus calls) runs it on a thread of its own instead, whose stack holds any depth
    /// the validator accepts. Waits first for a run still in progress.
    pub fn execute(&mut self, bindings: &Bindings) -> Result<RunStats, RunError> {
        if self.running.is_some() {
            let _ = self.synchronize();
        }
        if !self.inner.on_caller {
            self.execute_async(bindings)?;
            return self.synchronize();
        }
        drop(self.tensors(bindings)?);
        self.inner.options.kernels.clear_cancel();
        let t0 = Instant::now();
        let r = catch_unwind(AssertUnwindSafe(|| {
            let mut g = self.store.lock().unwrap_or_else(|p| p.into_inner());
            let s = g.as_mut().expect("tensors allocated before the run");
            self.inner.execute(bindings, s)
        }))
        .unwrap_or_else(|_| Err(ExecError::Internal("the orchestration panicked".into()).into()));
        self.finish(r, t0)
    }

    /// Starts a run under `bindings` on a background thread; [`Program::synchronize`] waits
    /// for it. Waits first for a run still in progress.
    pub fn execute_async(&mut self, bindings: &Bindings) -> Result<(), RunError> {
        if self.running.is_some() {
            let _ = self.synchronize();
        }
        drop(self.tensors(bindings)?);
        self.inner.options.kernels.clear_cancel();
        // The clock starts before the orchestration thread exists, so the end-to-end time
        // contains the run's own clock ([`RunStats::run_ns`] starts on that thread).
        let t0 = Instant::now();
        let inner = Arc::clone(&self.inner);
        let store = Arc::clone(&self.store);
        let bindings = bindings.clone();
        let done = Arc::new(Done::default());
        let raise = Arc::clone(&done);
        let handle = std::thread::Builder::new()
            .name("pto-wsp-orchestrator".into())
            .stack_size(pto_wsp_cpu::WALK_STACK_BYTES)
            .spawn(move || {
                let r = {
                    let mut g = store.lock().unwrap_or_else(|p| p.into_inner());
                    let s = g.as_mut().expect("tensors allocated before the run");
                    inner.execute(&bindings, s)
                };
                raise.raise();
                r
            })
            .map_err(|e| ExecError::Setup(format!("cannot start the orchestration thread: {e}")))?;
        self.running = Some(Running { handle, done, t0 });
        Ok(())
    }

    /// Waits for the run started by [`Program::execute_async`].
    pub fn synchronize(&mut self) -> Result<RunStats, RunError> {
        let run = self.running.take().ok_or(RunError::NotRunning)?;
        let r = run.handle.join().unwrap_or_else(|_| {
            Err(ExecError::Internal("the orchestration thread panicked".into()).into())
        });
        self.finish(r, run.t0)
    }

    /// Records a run that ended with `r` (started at `t0`) as the last one.
    fn finish(
        &mut self,
        r: Result<(RunStats, Vec<Unwritten>), RunError>,
        t0: Instant,
    ) -> Result<RunStats, RunError> {
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        let (s, unwritten) = r?;
        self.last = Some((s.clone(), ms));
        self.coverage = unwritten;
        Ok(s)
    }

    /// Waits up to `timeout` for the run in progress to end; `true` when it has ended (or
    /// none is in progress), after which [`Program::synchronize`] returns at once.
    pub fn wait(&self, timeout: Duration) -> bool {
        match &self.running {
            Some(run) => run.done.wait(timeout),
            None => true,
        }
    }

    /// Cancels the run in progress, from any thread that can reach the program: no kernel
    /// starts after this call and the generator stops at its next task; the run ends when
    /// the tasks in flight do, and [`Program::synchronize`] then returns
    /// [`RunError::Cancelled`]. The tensors hold what the completed tasks wrote. Does nothing
    /// when no run is in progress (the next run clears it).
    pub fn cancel(&self) {
        if self.running.is_some() {
            self.inner.options.kernels.cancel();
        }
    }

    /// The output tensors the last completed run left partly unwritten (see
    /// [`coverage`](crate::program::coverage)); empty when every output was fully written, before
    /// the first run, and for runs that do not check (device generation, pipelines,
    /// [`CompileOptions::coverage`] off).
    pub fn coverage(&self) -> &[Unwritten] {
        &self.coverage
    }

    /// Whether no run is in progress (or the one in progress has finished).
    pub fn is_complete(&self) -> bool {
        self.running.as_ref().is_none_or(|r| r.handle.is_finished())
    }

    /// Wall-clock milliseconds of the last completed run (orchestration and execution).
    pub fn elapsed_ms(&self) -> Option<f64> {
        self.last.as_ref().map(|(_, ms)| *ms)
    }

    /// The back-end architecture specification's program statistics of the last completed run, with
    /// compile time, streams and executors.
    pub fn program_stats(&self) -> Option<ProgramStats> {
        let (run, ms) = self.last.as_ref()?;
        Some(ProgramStats {
            num_tasks: run.tasks,
            num_streams: self.inner.plan.config().streams,
            num_executors: self.inner.pool.threads(),
            compile_time_ms: self.compile_ms,
            execute_time_ms: *ms,
            run: run.clone(),
        })
    }

    /// Milliseconds compilation took.
    pub fn compile_time_ms(&self) -> f64 {
        self.compile_ms
    }

    pub(crate) fn set_compile_time_ms(&mut self, ms: f64) {
        self.compile_ms = ms;
    }

    /// Directives of the schedule that compile but do nothing in this program's mode (a CSP
    /// pipeline's `dispatch`, device generation's `ready work_steal`, ...), one sentence each
    /// naming the directive, the mode and why (`docs/SEMANTICS.md`, "Schedule directives").
    pub fn notes(&self) -> &[String] {
        &self.inner.notes
    }

    /// Statistics of the last completed run.
    pub fn stats(&self) -> Option<&RunStats> {
        self.last.as_ref().map(|(s, _)| s)
    }

    /// The plan this program runs.
    pub fn plan(&self) -> &LoweredPlan {
        &self.inner.plan
    }

    /// Number of worker threads.
    pub fn threads(&self) -> usize {
        self.inner.pool.threads()
    }

    /// Whether a host run's tasks come from the bytecode interpreter (`false`: the reference
    /// expander generates them — for modules the bytecode cannot express, under
    /// [`CompileOptions::host_expander`], and in device-generation and pipeline programs, which
    /// do not run the host feed).
    pub fn host_bytecode(&self) -> bool {
        self.inner.host_bytecode.is_some()
    }
}
