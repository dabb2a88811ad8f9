//! The device-generation section of `pto-wsp bench`: the LLaMA-7B prefill layer
//! (`examples/llama7b_layer.wsp`, 248,832 tasks at 16K tokens) with every kernel empty, run end
//! to end three ways in one process, back to back:
//!
//! - `finished`: host build, then run — the reference expander fed into the
//!   dependency-inferring builder on this thread, the graph finished (CSR), then run on the pool
//!   ([`StaticGraph`], [`WorkerPool::run`]);
//! - `streamed`: [`pto_wsp::Program::execute`] of a host build — an orchestration thread
//!   expanding and building while the workers run (window and all);
//! - `devgen`: [`pto_wsp::Program::execute`] in device-generation mode
//!   ([`CompileOptions::device_gen`]) — every worker interprets the bytecode and runs its own
//!   tasks as they are generated (`pto_wsp::cpu::devgen`).
//!
//! Why: the on-device generation specification's claim is that executor-local generation beats
//! building the graph on the host and shipping it. The machine this runs on is shared and noisy, so
//! each round runs the three modes one after the other and the section reports, besides each mode's
//! best time, the **median over rounds of the per-round ratios** `finished / devgen` and `streamed
//! / devgen` (above 1: device generation is faster).
//!
//! The last column, `idle`, is the share of the executors' time in the fastest device-generation
//! round that they spent waiting with nothing to run (`ExecutorStats::wait_ns` over executors ×
//! run time): what the exchange between executors costs in latency, apart from instructions.
//!
//! Every mode runs the same kernels (registered, empty) through the same kernel executor, under
//! the example's schedule with its `deps` mode replaced (`exact`, the cheapest inference, and the
//! example's own `hybrid`). Every run is checked to have run exactly the workload's tasks, barrier
//! tasks counted apart (`bench_llama::ran_exactly`).

use crate::CliError;
use crate::bench::thousands;
use crate::bench_llama::{empty_kernels, plan};
use crate::bench_once::PerTask;
use pto_wsp::cpu::{KernelExec, PoolSplit, RunConfig, StaticGraph, WorkerPool};
use pto_wsp::graph::ExecDomain;
use pto_wsp::graph::builder::{ExactMap, GraphBuilder};
use pto_wsp::graph::feed::{NoHooks, feed};
use pto_wsp::graph::ready::ReadyKind;
use pto_wsp::ir::{Bindings, DepsMode, ExpandOptions, PoolsPolicy};
use pto_wsp::kernels::{KernelRegistry, TensorStore};
use pto_wsp::{CompileOptions, LoweredPlan, compile};
use std::time::{Duration, Instant};

/// The modes, in the order each round runs them.
const MODES: [&str; 3] = ["finished", "streamed", "devgen"];

/// The median of `xs` (not empty).
fn median(xs: Vec<f64>) -> f64 {
    crate::bench_median::median(&xs).unwrap_or(0.0)
}

/// What the host's build-then-run needs besides the module: the same kernels, tensors and
/// worker configuration a [`Program`] of the module uses.
struct Finished<'m> {
    plan: &'m LoweredPlan,
    deps: DepsMode,
    registry: KernelRegistry,
    ids: Vec<Option<pto_wsp::kernels::KernelId>>,
    names: Vec<String>,
    store: TensorStore,
    config: RunConfig,
    /// A pool of the same size as the programs'.
    pool: WorkerPool,
}

impl<'m> Finished<'m> {
    fn new(
        plan: &'m LoweredPlan,
        b: &Bindings,
        deps: DepsMode,
        threads: usize,
        registry: KernelRegistry,
    ) -> Result<Self, CliError> {
        // The schedule as shipped (validated); `deps` is this run's own.
        let (module, c) = (plan.module(), plan.config());
        Ok(Finished {
            plan,
            deps,
            ids: module
                .kernels
                .iter()
                .map(|k| registry.lookup(&k.name.name))
                .collect(),
            names: module.kernels.iter().map(|k| k.name.name.clone()).collect(),
            registry,
            store: TensorStore::new(module, b)
                .map_err(|e| CliError::plain(format!("bench: tensors: {e}")))?,
            config: RunConfig {
                ready: ReadyKind::from(&c.ready),
                pools: match c.pools {
                    PoolsPolicy::Single => PoolSplit::Single,
                    PoolsPolicy::ByExecUnit => PoolSplit::ByExecUnit {
                        vector: threads / 2,
                    },
                },
                placement: plan.sched().placement(),
                gate: None,
                batch: 1,
                trace: false,
            },
            pool: WorkerPool::new(threads).map_err(|e| CliError::plain(format!("bench: {e}")))?,
        })
    }

    /// Expand, build, finish, run; the time, the tasks run and the barrier tasks among them.
    fn run(&self, b: &Bindings) -> Result<(Duration, (u64, u64)), CliError> {
        let t0 = Instant::now();
        let mut builder = GraphBuilder::with_exact_map(self.deps, ExactMap::Growable);
        let fed = feed(
            self.plan.resolved(),
            b,
            &ExpandOptions::default(),
            &mut builder,
            &mut NoHooks,
            ExecDomain::default(),
        )
        .map_err(|e| CliError::plain(format!("bench: build: {e}")))?;
        let graph = StaticGraph::new(builder.finish());
        let exec = KernelExec::new(
            graph.storage(),
            &self.store,
            &self.registry,
            &self.ids,
            &self.names,
            false,
        );
        let s = self
            .pool
            .run(&graph, &self.config, &exec)
            .map_err(|e| CliError::plain(format!("bench: finished run: {e}")))?;
        Ok((t0.elapsed(), (s.tasks, u64::from(fed.barrier_tasks))))
    }
}

/// Runs the section for sequence lengths `seqs` on `threads`, `repeat` rounds per figure;
/// device generation partitioned (`partition`: each executor interprets only its own tasks) or
/// walking every task.
pub fn devgen<E: From<CliError>>(
    seqs: &[i64],
    threads: &[usize],
    repeat: u32,
    partition: bool,
    out: &mut impl FnMut(&str) -> Result<(), E>,
) -> Result<(), E> {
    if seqs.is_empty() {
        return Ok(());
    }
    out(&format!(
        "\nDevice generation: LLaMA-7B prefill layer, empty kernels, end to end, ns/task \
         (best of {repeat} rounds); finished = host build then run, streamed = host build while \
         running (Program::execute), devgen = every worker interprets the bytecode ({}) and \
         runs its own tasks; speedup = median over rounds of (mode time / devgen time) within a \
         round; idle = executors' time waiting with nothing to run in the fastest devgen round\n\
         {:>6} {:>7} {:>9} {:>7} {:>9} {:>9} {:>9} {:>16} {:>16} {:>6}\n",
        if partition {
            "partitioned: only its own tasks"
        } else {
            "walk: every task"
        },
        "seq",
        "deps",
        "tasks",
        "threads",
        "finished",
        "streamed",
        "devgen",
        "finished/devgen",
        "streamed/devgen",
        "idle"
    ))?;
    for &seq in seqs {
        for mode in [DepsMode::Exact, DepsMode::Hybrid] {
            let lowered = plan(mode)?;
            let b = Bindings::new().symbol("seq", seq);
            let mut tasks = 0u64;
            pto_wsp::ir::expand_each(lowered.resolved(), &b, &ExpandOptions::default(), |_, _| {
                tasks += 1
            })
            .map_err(|e| CliError::plain(format!("bench: expand: {e}")))?;
            for &t in threads {
                let run = Modes {
                    lowered: &lowered,
                    bindings: &b,
                    mode,
                    threads: t,
                    tasks,
                    partition,
                };
                run.exactly_once()?;
                let (best, ratios, idle) = run.timed(repeat)?;
                let n = tasks.max(1) as f64;
                let [r0, r1] = ratios;
                out(&format!(
                    "{seq:>6} {:>7} {:>9} {t:>7} {:>9.0} {:>9.0} {:>9.0} {:>15.2}x {:>15.2}x \
                     {:>5.1}%\n",
                    if mode == DepsMode::Hybrid {
                        "hybrid"
                    } else {
                        "exact"
                    },
                    thousands(tasks as usize),
                    best[0] / n,
                    best[1] / n,
                    best[2] / n,
                    median(r0),
                    median(r1),
                    idle * 100.0,
                ))?;
            }
        }
    }
    Ok(())
}

/// One row of the section: the three modes on one thread count.
struct Modes<'a> {
    lowered: &'a LoweredPlan,
    bindings: &'a Bindings,
    mode: DepsMode,
    threads: usize,
    /// The tasks the expander generates.
    tasks: u64,
    /// Device generation partitioned, or walking every task.
    partition: bool,
}

impl Modes<'_> {
    /// The facade's program in streamed (`device_gen` false) or device-generation mode.
    fn program(
        &self,
        device_gen: bool,
        kernels: KernelRegistry,
    ) -> Result<pto_wsp::Program, CliError> {
        compile(
            self.lowered.clone(),
            CompileOptions {
                threads: self.threads,
                kernels,
                device_gen,
                device_gen_partition: self.partition,
                ..CompileOptions::default()
            },
        )
        .map_err(|e| CliError::plain(e.to_string()))
    }

    /// Untimed: every task exactly once in each mode (`crate::bench_once`).
    fn exactly_once(&self) -> Result<(), CliError> {
        let (b, m) = (self.bindings, self.lowered.module());
        for (k, name) in MODES.iter().enumerate() {
            let once = PerTask::new(self.tasks as usize);
            let ran = if k == 0 {
                Finished::new(self.lowered, b, self.mode, self.threads, once.kernels(m))?
                    .run(b)?
                    .1
            } else {
                let s = self
                    .program(k == 2, once.kernels(m))?
                    .execute(b)
                    .map_err(|e| CliError::plain(format!("bench: {name} run: {e}")))?;
                (s.tasks, s.barriers)
            };
            crate::bench_llama::ran_exactly(name, ran, self.tasks, 0)?;
            once.check(name, 0)?;
        }
        Ok(())
    }

    /// `repeat` rounds of the three modes back to back: each mode's best time (ns), per round
    /// finished / devgen and streamed / devgen, and the executors' idle share in the fastest
    /// device-generation round.
    #[allow(clippy::type_complexity)]
    fn timed(&self, repeat: u32) -> Result<([f64; 3], [Vec<f64>; 2], f64), CliError> {
        let (b, m) = (self.bindings, self.lowered.module());
        let mut streamed = self.program(false, empty_kernels(m))?;
        let mut dev = self.program(true, empty_kernels(m))?;
        let finished = Finished::new(self.lowered, b, self.mode, self.threads, empty_kernels(m))?;
        let mut best = [f64::MAX; 3];
        let mut ratios = [Vec::new(), Vec::new()];
        let mut idle = 0.0;
        for _ in 0..repeat {
            let mut round = [0.0f64; 3];
            for (k, name) in MODES.iter().enumerate() {
                let (dt, ran) = match k {
                    0 => finished.run(b)?,
                    _ => {
                        let p = if k == 1 { &mut streamed } else { &mut dev };
                        let t0 = Instant::now();
                        let s = p
                            .execute(b)
                            .map_err(|e| CliError::plain(format!("bench: {name} run: {e}")))?;
                        let dt = t0.elapsed();
                        if k == 2 && (dt.as_nanos() as f64) < best[2] {
                            idle = idle_share(&s);
                        }
                        (dt, (s.tasks, s.barriers))
                    }
                };
                // The example has no structural order: no barrier task.
                crate::bench_llama::ran_exactly(name, ran, self.tasks, 0)?;
                round[k] = dt.as_nanos() as f64;
                best[k] = best[k].min(round[k]);
            }
            ratios[0].push(round[0] / round[2]);
            ratios[1].push(round[1] / round[2]);
        }
        Ok((best, ratios, idle))
    }
}

/// The share of a device-generation run's executor time spent waiting with nothing to run.
fn idle_share(s: &pto_wsp::cpu::RunStats) -> f64 {
    let Some(d) = &s.device_gen else {
        return 0.0;
    };
    let waited: u64 = d.executors.iter().map(|e| e.wait_ns).sum();
    let total = s.run_ns as f64 * d.executors.len() as f64;
    if total > 0.0 {
        waited as f64 / total
    } else {
        0.0
    }
}
