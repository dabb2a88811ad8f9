//! The back-end interface (seed 004 §1.1, §6.3, §9.1): [`lower`] a module into a
//! [`LoweredPlan`], [`compile`] the plan for a target into a [`Program`], and run it.
//!
//! Today one back end is registered, `cpu_sim` (the CPU simulation of `pto-wsp-cpu`); the
//! registry ([`backends`]) answers which targets exist and what each can do, so a front end can
//! ask before compiling.
//!
//! # What running a program does
//!
//! [`Program::execute`] allocates (or reuses) the tensors for the bindings, then runs a
//! *streamed* graph: an orchestration thread expands the workload under the bindings and feeds
//! each task into the dependency-inferring builder, while the workers run every task whose
//! predecessors are done (start policy, window, gates, batching and dispatch from the
//! schedule). Kernels come from the [`KernelRegistry`] of the [`CompileOptions`]; every kernel
//! the module can run must be registered (else [`CompileError::UnknownKernel`]).
//!
//! A module whose entry is a CSP pipeline runs differently: each process on its own thread,
//! running its own tasks in order, connected by bounded channels of the declared depth
//! ([`pto_wsp_cpu::csp`]); a deadlock is reported naming the waiting processes and channels.
//! With [`CompileOptions::device_gen`], [`compile`] also encodes the workload as bytecode and
//! a run is a *device-generation* run instead: no orchestration thread; every worker thread
//! interprets the bytecode, infers the dependencies into its own tasks and runs them as they
//! are generated (`pto_wsp_cpu::devgen`). Same tasks, same edges, same numbers. A pipeline entry
//! runs as processes on threads in either mode.

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use pto_wsp_cpu::sim::simulate;
use pto_wsp_cpu::table::Writer;
use pto_wsp_cpu::{
    CycleStats, ExecError, GateConfig, KernelExec, PoolSplit, RunConfig, RunStats, SimMachine,
    SimTask, StreamConfig, TaskTable, WorkerPool, task_costs,
};
use pto_wsp_graph::builder::ExactMap;
use pto_wsp_graph::feed::{FeedError, FeedHooks, feed};
use pto_wsp_graph::ready::ReadyKind;
use pto_wsp_graph::{ExecDomain, TaskId};
use pto_wsp_ir::{
    Bindings, Dispatch, ExpandOptions, ExpandedTask, Module, PoolsPolicy, ReadyPolicy,
    ScheduleConfig, TracePolicy, ValidationError, validate,
};
use pto_wsp_kernels::{KernelId, KernelRegistry, StoreError, TensorStore};

mod devgen;

/// Options of [`compile`].
#[derive(Clone)]
pub struct CompileOptions {
    /// Target name (default `cpu_sim`).
    pub target: String,
    /// Worker threads; 0 means one per core.
    pub threads: usize,
    /// Record the wall-clock span of every task (also on when the schedule says `trace wall`).
    pub profiling: bool,
    /// Record regions in flight and fail loudly on a conflict.
    pub debug_checks: bool,
    /// Vector workers under `pools by_exec_unit` (default: half, at least one each side).
    pub vector_workers: Option<usize>,
    /// The kernels tasks run.
    pub kernels: KernelRegistry,
    /// Device-generation mode: compile the workload to bytecode and let every worker thread
    /// interpret it and run its own tasks as they are generated, instead of a host thread
    /// building the graph (see [`crate::program`]'s docs and `pto_wsp_cpu::devgen`).
    pub device_gen: bool,
}

impl Default for CompileOptions {
    fn default() -> CompileOptions {
        CompileOptions {
            target: "cpu_sim".into(),
            threads: 0,
            profiling: false,
            debug_checks: false,
            vector_workers: None,
            kernels: KernelRegistry::with_builtins(),
            device_gen: false,
        }
    }
}

impl std::fmt::Debug for CompileOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompileOptions")
            .field("target", &self.target)
            .field("threads", &self.threads)
            .field("profiling", &self.profiling)
            .field("debug_checks", &self.debug_checks)
            .field("kernels", &self.kernels.len())
            .field("device_gen", &self.device_gen)
            .finish()
    }
}

/// Why lowering or compiling failed.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
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
        "kernel `{name}` declared at byte {at} has no implementation registered (register it, or use a built-in: {known})"
    )]
    UnknownKernel {
        /// The kernel.
        name: String,
        /// Byte offset of its declaration in the source (0 if built, not parsed).
        at: usize,
        /// Registered kernel names.
        known: String,
    },
    /// Device-generation mode: the workload cannot be encoded as bytecode.
    #[error("device generation: cannot encode the workload as bytecode: {0}")]
    Bytecode(String),
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
    /// failure, or two processes' tasks conflicting (see [`pto_wsp_cpu::csp`]).
    #[error(transparent)]
    Pipeline(#[from] pto_wsp_cpu::CspError),
}

/// A module lowered for back ends: validated, with its schedule decisions folded.
#[derive(Clone, Debug)]
pub struct LoweredPlan {
    /// The module.
    pub module: Module,
    /// The schedule with defaults filled in.
    pub config: ScheduleConfig,
}

/// Validates `module` and folds its schedule.
pub fn lower(module: &Module) -> Result<LoweredPlan, CompileError> {
    validate(module).map_err(CompileError::Invalid)?;
    Ok(LoweredPlan {
        module: module.clone(),
        config: module
            .schedule
            .as_ref()
            .map(|s| s.config())
            .unwrap_or_default(),
    })
}

/// What a back end can do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Capability {
    /// Runs kernels and produces numbers.
    Execute,
    /// Builds the graph while it runs.
    Streaming,
    /// Wall-clock traces.
    WallTrace,
    /// Executor-local generation from bytecode.
    Bytecode,
}

/// A registered back end.
#[derive(Clone, Copy, Debug)]
pub struct BackendInfo {
    /// Its name.
    pub name: &'static str,
    /// Targets it compiles for.
    pub targets: &'static [&'static str],
    /// What it can do.
    pub capabilities: &'static [Capability],
}

impl BackendInfo {
    /// Whether it can do `c`.
    pub fn supports(&self, c: Capability) -> bool {
        self.capabilities.contains(&c)
    }
}

/// Every registered back end.
pub fn backends() -> &'static [BackendInfo] {
    &[BackendInfo {
        name: "cpu",
        targets: &["cpu_sim"],
        capabilities: &[
            Capability::Execute,
            Capability::Streaming,
            Capability::WallTrace,
            Capability::Bytecode,
        ],
    }]
}

/// Compiles `plan` for `options.target`.
pub fn compile(plan: LoweredPlan, options: CompileOptions) -> Result<Program, CompileError> {
    if !backends()
        .iter()
        .any(|b| b.targets.contains(&options.target.as_str()))
    {
        return Err(CompileError::UnknownTarget {
            target: options.target.clone(),
            available: backends()
                .iter()
                .flat_map(|b| b.targets.iter().copied())
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    let mut kernels = Vec::new();
    for k in &plan.module.kernels {
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
    let names = plan
        .module
        .kernels
        .iter()
        .map(|k| k.name.name.clone())
        .collect();
    let bytecode = if options.device_gen {
        Some(devgen::compile_bytecode(&plan.module)?)
    } else {
        None
    };
    let pool = WorkerPool::new(options.threads);
    Ok(Program {
        inner: Arc::new(Inner {
            plan,
            kernels,
            names,
            pool,
            options,
            bytecode,
        }),
        store: Arc::new(Mutex::new(None)),
        running: None,
        last: None,
    })
}

struct Inner {
    plan: LoweredPlan,
    kernels: Vec<Option<KernelId>>,
    names: Vec<String>,
    pool: WorkerPool,
    options: CompileOptions,
    /// The decoded bytecode, in device-generation mode.
    bytecode: Option<pto_wsp_bytecode::Program>,
}

/// A compiled program: runs its workload on the CPU simulation (see the module docs).
pub struct Program {
    inner: Arc<Inner>,
    store: Arc<Mutex<Option<TensorStore>>>,
    running: Option<(JoinHandle<Result<RunStats, RunError>>, Instant)>,
    last: Option<(RunStats, f64)>,
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
    origin: &'p mut Vec<u32>,
    probe: pto_wsp_cpu::AbortProbe<'p>,
    priorities: Option<Writer<'p, i64>>,
    costs: Option<&'p mut Vec<Option<u64>>>,
}

impl FeedHooks for Hooks<'_> {
    type Error = ();
    fn before_submit(
        &mut self,
        id: pto_wsp_graph::TaskId,
        task: Option<(u32, &ExpandedTask)>,
    ) -> Result<(), ()> {
        if self.probe.failed() {
            return Err(());
        }
        debug_assert_eq!(id.index(), self.origin.len());
        self.origin.push(task.map_or(u32::MAX, |(i, _)| i));
        if let Some(w) = &mut self.priorities {
            w.push(task.map_or(0, |(_, t)| t.priority));
        }
        if let Some(c) = &mut self.costs {
            c.push(task.and_then(|(_, t)| t.cost));
        }
        Ok(())
    }
}

impl Inner {
    fn run_config(&self) -> (RunConfig, StreamConfig) {
        let c = &self.plan.config;
        let threads = self.pool.threads();
        let run = RunConfig {
            ready: ReadyKind::from(&c.ready),
            pools: match c.pools {
                PoolsPolicy::Single => PoolSplit::Single,
                PoolsPolicy::ByExecUnit => PoolSplit::ByExecUnit {
                    vector: self.options.vector_workers.unwrap_or(threads / 2),
                },
            },
            placement: !matches!(c.dispatch, Dispatch::WorkSteal),
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
        };
        (run, stream)
    }

    /// Whether the schedule asks for the cycle-cost model.
    fn cycles(&self) -> bool {
        matches!(self.plan.config.trace, TracePolicy::Cycles(_))
    }

    fn execute(&self, bindings: &Bindings, store: &mut TensorStore) -> Result<RunStats, RunError> {
        let module = &self.plan.module;
        // A pipeline is a program, not a graph (its bounded channels order its processes), so
        // it runs as processes on threads in either mode.
        let pipeline = module
            .entry_name()
            .and_then(|e| module.pipeline(e))
            .is_some();
        if let (Some(bytecode), false) = (&self.bytecode, pipeline) {
            return self.execute_devgen(bytecode, bindings, store);
        }
        if pipeline {
            // A pipeline runs as processes on threads with bounded channels (pto_wsp_cpu::csp).
            let options = pto_wsp_cpu::CspOptions {
                trace: self.options.profiling
                    || matches!(self.plan.config.trace, TracePolicy::Wall),
            };
            return Ok(pto_wsp_cpu::run_pipeline(
                module,
                bindings,
                store,
                &self.options.kernels,
                &self.kernels,
                &self.names,
                options,
            )?);
        }
        let (run, stream) = self.run_config();
        let table = TaskTable::new();
        let exec = KernelExec::new(
            &table,
            store,
            &self.options.kernels,
            &self.kernels,
            &self.names,
            self.options.debug_checks,
        );
        let mut origin = Vec::new();
        let mut costs = Vec::new();
        let priority = matches!(self.plan.config.ready, ReadyPolicy::Priority(_));
        let r = self.pool.run_streaming(&table, &run, &stream, &exec, |b| {
            let probe = b.sink().abort_probe();
            let mut hooks = Hooks {
                origin: &mut origin,
                probe,
                priorities: if priority {
                    table.priority_writer()
                } else {
                    None
                },
                costs: self.cycles().then_some(&mut costs),
            };
            match feed(
                &self.plan.module,
                bindings,
                &ExpandOptions::default(),
                b,
                &mut hooks,
                ExecDomain::default(),
            ) {
                Ok(_) | Err(FeedError::Hook(())) => Ok(()),
                Err(FeedError::Expand(e)) => Err(ExecError::Build(e.to_string())),
                Err(FeedError::Build(e)) => Err(ExecError::Build(e.to_string())),
            }
        });
        // Name tasks as the user knows them: by their expander index.
        let mut stats = r.map_err(|e| match e {
            ExecError::Kernel {
                task,
                kernel,
                message,
                panicked,
            } => ExecError::Kernel {
                task: origin.get(task as usize).copied().unwrap_or(task),
                kernel,
                message,
                panicked,
            },
            other => other,
        })?;
        stats.barriers = origin.iter().filter(|&&i| i == u32::MAX).count() as u64;
        // Spans name tasks as the user knows them too (barrier tasks run no kernel, no span).
        for s in &mut stats.spans {
            s.task = origin.get(s.task as usize).copied().unwrap_or(u32::MAX);
        }
        if self.cycles() {
            stats.cycles = Some(self.model(&table, store, &costs, &stats.edge_list)?);
        }
        Ok(stats)
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
        let tasks: Vec<SimTask> = (0..n)
            .map(|i| {
                let node = table
                    .node(TaskId(i as u32))
                    .expect("every task of a finished run is published");
                SimTask {
                    cost: cost[i],
                    pool: node.pool(),
                    target: node.affinity(),
                }
            })
            .collect();
        let c = &self.plan.config;
        let executors = c.executors.clamp(1, u32::MAX as u64) as u32;
        let machine = SimMachine {
            executors,
            vector: matches!(c.pools, PoolsPolicy::ByExecUnit).then_some(executors / 2),
            placement: !matches!(c.dispatch, Dispatch::WorkSteal),
        };
        simulate(&tasks, edges, &machine)
            .map_err(|e| RunError::Exec(ExecError::Internal(format!("cycle model: {e}"))))
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
        let fresh = TensorStore::new(&self.inner.plan.module, bindings)?;
        let same = g.as_ref().is_some_and(|s| {
            s.len() == fresh.len() && (0..s.len() as u32).all(|i| s.info(i) == fresh.info(i))
        });
        if !same {
            *g = Some(fresh);
        }
        Ok(g)
    }

    /// Runs the workload under `bindings` and waits for it.
    pub fn execute(&mut self, bindings: &Bindings) -> Result<RunStats, RunError> {
        self.execute_async(bindings)?;
        self.synchronize()
    }

    /// Starts a run under `bindings` on a background thread; [`Program::synchronize`] waits
    /// for it. Waits first for a run still in progress.
    pub fn execute_async(&mut self, bindings: &Bindings) -> Result<(), RunError> {
        if self.running.is_some() {
            let _ = self.synchronize();
        }
        drop(self.tensors(bindings)?);
        // The clock starts before the orchestration thread exists, so the end-to-end time
        // contains the run's own clock ([`RunStats::run_ns`] starts on that thread).
        let t0 = Instant::now();
        let inner = Arc::clone(&self.inner);
        let store = Arc::clone(&self.store);
        let bindings = bindings.clone();
        let handle = std::thread::Builder::new()
            .name("pto-wsp-orchestrator".into())
            .spawn(move || {
                let mut g = store.lock().unwrap_or_else(|p| p.into_inner());
                let s = g.as_mut().expect("tensors allocated before the run");
                inner.execute(&bindings, s)
            })
            .map_err(|e| ExecError::Setup(format!("cannot start the orchestration thread: {e}")))?;
        self.running = Some((handle, t0));
        Ok(())
    }

    /// Waits for the run started by [`Program::execute_async`].
    pub fn synchronize(&mut self) -> Result<RunStats, RunError> {
        let (h, t0) = self.running.take().ok_or(RunError::NotRunning)?;
        let r = h.join().unwrap_or_else(|_| {
            Err(ExecError::Internal("the orchestration thread panicked".into()).into())
        });
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        if let Ok(s) = &r {
            self.last = Some((s.clone(), ms));
        }
        r
    }

    /// Whether no run is in progress (or the one in progress has finished).
    pub fn is_complete(&self) -> bool {
        self.running.as_ref().is_none_or(|(h, _)| h.is_finished())
    }

    /// Wall-clock milliseconds of the last completed run (orchestration and execution).
    pub fn elapsed_ms(&self) -> Option<f64> {
        self.last.as_ref().map(|(_, ms)| *ms)
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
}
