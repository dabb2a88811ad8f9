//! The text `pto-wsp bench` prints: the CPU runtime's per-task overhead on Taskflow's benchmark
//! shapes, next to same-process baselines and the runtime's speed targets.
//!
//! Why: absolute figures drift on shared machines, so every figure is measured in one process
//! against a plain sequential loop and rayon doing the same (empty) work, and the project's speed
//! targets are printed beside the figures so a reader sees at once which are met.
//!
//! What is measured, per shape and thread count (best of [`BenchOptions::repeat`] runs, the clock
//! read around the call only; setup and drops are outside it):
//! - `seq`: [`Prepared::run_sequential`] (one thread; printed once per shape);
//! - `rayon`: [`Prepared::run_rayon`] on a rayon pool of that many threads;
//! - `run-only`: [`WorkerPool::run`] of a prebuilt [`StaticGraph`] (build excluded);
//! - `build+run (stream)`: [`WorkerPool::run_streaming_explicit`] building the shape while it runs
//!   (the explicit-edge builder: the shapes name every edge and no region);
//! - `build+run (finish)`: [`Shape::storage`], [`StaticGraph::new`] and [`WorkerPool::run`];
//! - `run-only/rayon`: the ratio of the two.
//!
//! Then thread scaling (a busy-spin kernel of [`BenchOptions::spin`] per task, run-only, speedup
//! against one thread), idle CPU (process CPU time while a streamed run has nothing to do, and
//! while a gate blocks every ready task behind one sleeping task), the LLaMA layer end to end
//! ([`crate::bench_llama`]), the kernels against direct baselines and the main job end to end
//! ([`crate::bench_kernels`]), and device generation against host builds on the LLaMA layer
//! ([`crate::bench_devgen`]).
//!
//! Best-of-N within one process hides how much a figure moves between processes: `pto-wsp bench
//! --processes N` runs all of this in N processes and prints medians with their spread
//! ([`crate::bench_median`]).
//!
//! Promise: every section checks that each task ran exactly once, barrier tasks apart
//! ([`crate::bench_once`]): one untimed run per configuration counts every task (the baselines,
//! run-only, both build+run modes, thread scaling), the idle runs count in the measured run (a
//! relaxed add on three tasks), and every timed run is checked by its totals; a mismatch is an
//! error naming the section and the first task that ran zero or several times, not a figure.
//! The shapes have no barrier tasks. Nothing here panics on the options given. The output is not
//! deterministic (it is made of timings); it names every shape it measured.

use crate::CliError;
use crate::bench_once::{Counted, PerTask};
use pto_wsp::cpu::baseline::Prepared;
use pto_wsp::cpu::shapes::{Shape, Size};
use pto_wsp::cpu::{
    Exec, ExecError, GateConfig, NoopExec, RunConfig, RunStats, StaticGraph, StreamConfig,
    TaskFailure, TaskTable, WorkerPool,
};
use pto_wsp::graph::TaskId;
use pto_wsp::ir::{DepsMode, GateScope};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Run-only target on one thread for dependent shapes (ns/task).
const TARGET_RUN_1: f64 = 15.0;
/// Run-only target on two threads for dependent shapes (ns/task).
const TARGET_RUN_2: f64 = 40.0;
/// Build+run target (ns/task).
const TARGET_BUILD_RUN: f64 = 100.0;
/// Thread-scaling target: speedup of 2 threads over 1.
const TARGET_SPEEDUP: f64 = 1.9;
/// Idle CPU target, percent of one core.
const TARGET_IDLE: f64 = 10.0;
/// Clock ticks per second of `/proc/self/stat` (`sysconf(_SC_CLK_TCK)`, 100 on Linux).
const CLK_TCK: u64 = 100;

/// What `pto-wsp bench` measures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BenchOptions {
    /// The shapes of the main table.
    pub shapes: Vec<Shape>,
    /// Thread counts (each at least 1).
    pub threads: Vec<usize>,
    /// Runs per figure; the best is reported (at least 1).
    pub repeat: u32,
    /// The shapes of the thread-scaling section.
    pub scaling: Vec<Shape>,
    /// The busy-spin time per task of the thread-scaling section.
    pub spin: Duration,
    /// How long the idle-CPU runs stay idle (nothing is measured when zero).
    pub idle: Duration,
    /// Sequence lengths of the LLaMA-layer section (none: no section).
    pub llama: Vec<i64>,
    /// The kernel section ([`crate::bench_kernels`]); `None`: no section.
    pub kernels: Option<crate::bench_kernels::KernelBench>,
    /// Bindings of the main-job section (after the job's defaults); `None`: no section.
    pub main_job: Option<Vec<String>>,
    /// Sequence lengths of the device-generation section ([`crate::bench_devgen`]; none: no
    /// section).
    pub devgen: Vec<i64>,
    /// Run only the device-generation section.
    pub devgen_only: bool,
    /// Device generation partitioned (each executor interprets only its own tasks) or not
    /// (each walks every task); default: the engine's.
    pub devgen_partition: bool,
}

impl BenchOptions {
    /// The options of `pto-wsp bench [SHAPE...] [--quick] --threads LIST --repeat N`: `shapes`,
    /// or the [standard](Shape::standard) shapes at full (or, with `quick`, quick) size when it is
    /// empty; thread scaling on `independent:2000` and `wavefront:45` with 10 µs tasks; one
    /// second of idleness.
    pub fn new(shapes: Vec<Shape>, quick: bool, threads: Vec<usize>, repeat: u32) -> BenchOptions {
        let shapes = if shapes.is_empty() {
            Shape::standard(if quick { Size::Quick } else { Size::Full })
        } else {
            shapes
        };
        BenchOptions {
            shapes,
            threads,
            repeat,
            scaling: vec![Shape::Independent(2000), Shape::Wavefront(45)],
            spin: Duration::from_micros(10),
            idle: Duration::from_secs(1),
            llama: if quick {
                vec![1024]
            } else {
                vec![1024, 4096, 16384]
            },
            kernels: Some(crate::bench_kernels::KernelBench::new(quick)),
            main_job: Some(Vec::new()),
            devgen: if quick { vec![1024] } else { vec![16384] },
            devgen_only: false,
            devgen_partition: pto_wsp::cpu::devgen::DevGenConfig::default().partition,
        }
    }
}

/// Runs the benchmark and returns everything it prints.
pub fn bench_report(opts: &BenchOptions) -> Result<String, CliError> {
    let mut text = String::new();
    bench(opts, |s| {
        text.push_str(s);
        Ok::<(), CliError>(())
    })?;
    Ok(text)
}

/// Runs the benchmark, handing `out` its text a line or a few at a time (as soon as each figure
/// is known, so a long run shows progress). Stops at the first error of `out`.
///
/// # Errors
/// A [`CliError`] for bad options (no thread count, a zero thread count or repeat, a shape too
/// large to build) or a failed run; any error `out` returns.
pub fn bench<E: From<CliError>>(
    opts: &BenchOptions,
    mut out: impl FnMut(&str) -> Result<(), E>,
) -> Result<(), E> {
    if opts.threads.is_empty() || opts.threads.contains(&0) {
        return Err(CliError::plain("bench: thread counts must be at least 1").into());
    }
    if opts.repeat == 0 {
        return Err(CliError::plain("bench: --repeat must be at least 1").into());
    }
    if let Some(s) = opts.shapes.iter().chain(&opts.scaling).find(|s| !s.fits()) {
        return Err(CliError::plain(format!("bench: shape `{s}` is too large")).into());
    }
    let threads = opts
        .threads
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",");
    out(&format!(
        "pto-wsp bench: ns/task, best of {} run{}, threads {threads}\n{}\n",
        opts.repeat,
        if opts.repeat == 1 { "" } else { "s" },
        machine_line()
    ))?;
    out(&format!(
        "targets: run-only <= {TARGET_RUN_1} ns/task on 1 thread and <= {TARGET_RUN_2} \
         on 2 for dependent shapes (chain, tree, wavefront, random); build+run <= \
         {TARGET_BUILD_RUN} ns/task\n"
    ))?;
    if !opts.devgen_only {
        main_table(opts, &mut out)?;
        scaling(opts, &mut out)?;
        idle(opts, &mut out)?;
        crate::bench_llama::llama(&opts.llama, &opts.threads, opts.repeat, &mut out)?;
        if let Some(k) = &opts.kernels {
            crate::bench_kernels::kernels(k, &mut out)?;
        }
        if let Some(binds) = &opts.main_job {
            crate::bench_kernels::main_job(binds, &opts.threads, opts.repeat.min(3), &mut out)?;
        }
    }
    crate::bench_devgen::devgen(
        &opts.devgen,
        &opts.threads,
        opts.repeat,
        opts.devgen_partition,
        &mut out,
    )?;
    Ok(())
}

/// `machine: N cores (available_parallelism), MODEL`.
pub fn machine_line() -> String {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU model".to_string());
    format!("machine: {cores} cores (available_parallelism), {model}")
}

/// Whether the run-only speed targets apply to `shape` (it has dependencies).
fn dependent(shape: &Shape) -> bool {
    !matches!(shape, Shape::Independent(_))
}

/// Best (smallest) time of `repeat` calls of `f`; `f` times itself and returns the time.
pub(crate) fn best(
    repeat: u32,
    mut f: impl FnMut() -> Result<Duration, CliError>,
) -> Result<f64, CliError> {
    let mut min = Duration::MAX;
    for _ in 0..repeat {
        min = min.min(f()?);
    }
    Ok(min.as_nanos() as f64)
}

/// A run's error, or a run that did not execute every task, as a [`CliError`].
fn checked(what: &str, shape: &Shape, r: Result<u64, ExecError>) -> Result<(), CliError> {
    match r {
        Ok(n) if n == shape.tasks() as u64 => Ok(()),
        Ok(n) => Err(CliError::plain(format!(
            "bench: {what} ran {n} of the {} tasks of {shape}",
            shape.tasks()
        ))),
        Err(e) => Err(CliError::plain(format!("bench: {what} on {shape}: {e}"))),
    }
}

/// Runs `shape` streamed on `pool` (built while it runs, by the explicit-edge builder: the
/// shapes name every edge and no region) with `exec`.
fn stream_run<X: Exec>(
    pool: &WorkerPool,
    table: &TaskTable,
    shape: &Shape,
    exec: &X,
) -> Result<RunStats, ExecError> {
    let sc = StreamConfig {
        deps: DepsMode::Explicit,
        ..StreamConfig::default()
    };
    pool.run_streaming_explicit(table, &RunConfig::default(), &sc, exec, |b| {
        shape.build(b).map_err(|e| ExecError::Build(e.to_string()))
    })
}

/// `ns` per task with one decimal, or `-` for an empty shape.
fn per_task(ns: f64, tasks: usize) -> String {
    if tasks == 0 {
        "-".to_string()
    } else {
        format!("{:.1}", ns / tasks as f64)
    }
}

/// `ok` or `MISS` for `value <= target`.
fn verdict(value: f64, target: f64) -> &'static str {
    if value <= target { "ok" } else { "MISS" }
}

/// 1,234,567.
pub(crate) fn thousands(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The main table: one block per shape, one row per thread count.
fn main_table<E: From<CliError>>(
    opts: &BenchOptions,
    out: &mut impl FnMut(&str) -> Result<(), E>,
) -> Result<(), E> {
    let mut pools = Vec::new();
    for &t in &opts.threads {
        let rayon = rayon::ThreadPoolBuilder::new()
            .num_threads(t)
            .build()
            .map_err(|e| CliError::plain(format!("bench: cannot start a rayon pool: {e}")))?;
        pools.push((
            t,
            WorkerPool::new(t).map_err(|e| CliError::plain(format!("bench: {e}")))?,
            rayon,
        ));
    }
    let r = opts.repeat;
    for shape in &opts.shapes {
        let n = shape.tasks();
        out(&format!(
            "\n{shape}: {} tasks, {} edges{}\n{:>7} {:>8} {:>8} {:>9} {:>19} {:>19} {:>15}  targets\n",
            thousands(n),
            thousands(shape.edges()),
            if dependent(shape) { ", dependent" } else { "" },
            "threads",
            "seq",
            "rayon",
            "run-only",
            "build+run (stream)",
            "build+run (finish)",
            "run-only/rayon",
        ))?;
        let prepared = Prepared::new(*shape);
        let graph = StaticGraph::new(shape.storage());
        // Untimed: the baselines run every task exactly once too.
        let once = PerTask::new(n);
        checked(
            "seq",
            shape,
            Ok(prepared.for_each_sequential(|t| once.hit(t))),
        )?;
        once.check(&format!("seq baseline on {shape}"), 0)?;
        let seq = best(r, || {
            let t0 = Instant::now();
            let k = prepared.run_sequential();
            let dt = t0.elapsed();
            checked("seq", shape, Ok(k))?;
            Ok(dt)
        })?;
        for (i, (t, pool, rayon)) in pools.iter().enumerate() {
            let row = Row {
                shape,
                prepared: &prepared,
                graph: &graph,
                threads: *t,
                pool,
                rayon,
                repeat: r,
            };
            row.exactly_once()?;
            let figures = row.figures()?;
            let seq = if i == 0 {
                per_task(seq, n)
            } else {
                String::new()
            };
            out(&row.text(&seq, &figures))?;
        }
    }
    Ok(())
}

/// One row of the main table: a shape on one thread count.
struct Row<'a> {
    shape: &'a Shape,
    prepared: &'a Prepared,
    graph: &'a StaticGraph,
    threads: usize,
    pool: &'a WorkerPool,
    rayon: &'a rayon::ThreadPool,
    repeat: u32,
}

/// A row's best times (ns): rayon, run-only, build+run streamed, build+run to the finish.
struct Figures {
    rayon: f64,
    run_only: f64,
    stream: f64,
    finish: f64,
}

impl Row<'_> {
    /// Untimed: every task exactly once in each runtime mode and the rayon baseline
    /// (`crate::bench_once`).
    fn exactly_once(&self) -> Result<(), CliError> {
        let (shape, pool, n) = (self.shape, self.pool, self.shape.tasks());
        let once = PerTask::new(n);
        checked(
            "rayon",
            shape,
            Ok(self.prepared.for_each_rayon(self.rayon, |t| once.hit(t))),
        )?;
        once.check(
            &format!("rayon baseline on {shape}, {} threads", self.threads),
            0,
        )?;
        let once = PerTask::new(n);
        checked(
            "run-only",
            shape,
            pool.run(self.graph, &RunConfig::default(), &once)
                .map(|s| s.tasks),
        )?;
        once.check("run-only", 0)?;
        let once = PerTask::new(n);
        let table = TaskTable::new();
        checked(
            "build+run (stream)",
            shape,
            stream_run(pool, &table, shape, &once).map(|s| s.tasks),
        )?;
        once.check("build+run (stream)", 0)?;
        let once = PerTask::new(n);
        let g = StaticGraph::new(shape.storage());
        checked(
            "build+run (finish)",
            shape,
            pool.run(&g, &RunConfig::default(), &once).map(|s| s.tasks),
        )?;
        once.check("build+run (finish)", 0)
    }

    /// The timed runs, each the best of `repeat`.
    fn figures(&self) -> Result<Figures, CliError> {
        let (shape, pool, r) = (self.shape, self.pool, self.repeat);
        let rayon = best(r, || {
            let t0 = Instant::now();
            let k = self.prepared.run_rayon(self.rayon);
            let dt = t0.elapsed();
            checked("rayon", shape, Ok(k))?;
            Ok(dt)
        })?;
        let run_only = best(r, || {
            let t0 = Instant::now();
            let s = pool.run(self.graph, &RunConfig::default(), &NoopExec);
            let dt = t0.elapsed();
            checked("run-only", shape, s.map(|s| s.tasks))?;
            Ok(dt)
        })?;
        let stream = best(r, || {
            let t0 = Instant::now();
            let table = TaskTable::new();
            let s = stream_run(pool, &table, shape, &NoopExec);
            let dt = t0.elapsed();
            drop(table);
            checked("build+run (stream)", shape, s.map(|s| s.tasks))?;
            Ok(dt)
        })?;
        let finish = best(r, || {
            let t0 = Instant::now();
            let g = StaticGraph::new(shape.storage());
            let s = pool.run(&g, &RunConfig::default(), &NoopExec);
            let dt = t0.elapsed();
            drop(g);
            checked("build+run (finish)", shape, s.map(|s| s.tasks))?;
            Ok(dt)
        })?;
        Ok(Figures {
            rayon,
            run_only,
            stream,
            finish,
        })
    }

    /// The row's line: per-task figures (`seq`: the sequential baseline's, on the first row
    /// only), the ratio to rayon and the targets met or missed.
    fn text(&self, seq: &str, f: &Figures) -> String {
        let (t, n) = (self.threads, self.shape.tasks());
        let ratio = if f.rayon > 0.0 && n > 0 {
            format!("{:.2}x", f.run_only / f.rayon)
        } else {
            "-".to_string()
        };
        let mut targets = Vec::new();
        let run_target = match t {
            1 => Some(TARGET_RUN_1),
            2 => Some(TARGET_RUN_2),
            _ => None,
        };
        if n > 0 {
            let nf = n as f64;
            if let (true, Some(tr)) = (dependent(self.shape), run_target) {
                targets.push(format!(
                    "run-only <= {tr}: {}",
                    verdict(f.run_only / nf, tr)
                ));
            }
            targets.push(format!(
                "build+run <= {TARGET_BUILD_RUN}: stream {}, finish {}",
                verdict(f.stream / nf, TARGET_BUILD_RUN),
                verdict(f.finish / nf, TARGET_BUILD_RUN)
            ));
        }
        format!(
            "{t:>7} {seq:>8} {:>8} {:>9} {:>19} {:>19} {ratio:>15}  {}\n",
            per_task(f.rayon, n),
            per_task(f.run_only, n),
            per_task(f.stream, n),
            per_task(f.finish, n),
            targets.join("; ")
        )
    }
}

/// A task that busy-spins for a fixed time (thread scaling).
#[derive(Clone, Copy, Debug)]
struct Spin(Duration);

impl Exec for Spin {
    fn run(&self, _task: TaskId, _worker: usize) -> Result<(), TaskFailure> {
        let t0 = Instant::now();
        while t0.elapsed() < self.0 {
            std::hint::spin_loop();
        }
        Ok(())
    }
}

/// Thread scaling: run-only with a busy-spin kernel, 1 thread against each thread count.
fn scaling<E: From<CliError>>(
    opts: &BenchOptions,
    out: &mut impl FnMut(&str) -> Result<(), E>,
) -> Result<(), E> {
    if opts.scaling.is_empty() {
        return Ok(());
    }
    let mut counts = vec![1];
    counts.extend(opts.threads.iter().copied().filter(|&t| t != 1));
    out(&format!(
        "\nthread scaling: run-only, {} µs busy-spin per task, ms per run (best of {}), speedup \
         over 1 thread (target >= {TARGET_SPEEDUP}x on 2)\n{:>18} {:>7} {:>10} {:>8}\n",
        opts.spin.as_micros(),
        opts.repeat,
        "shape",
        "threads",
        "ms",
        "speedup"
    ))?;
    let mut pools: Vec<(usize, WorkerPool)> = Vec::new();
    for &t in &counts {
        pools.push((
            t,
            WorkerPool::new(t).map_err(|e| CliError::plain(format!("bench: {e}")))?,
        ));
    }
    let exec = Spin(opts.spin);
    for shape in &opts.scaling {
        let graph = StaticGraph::new(shape.storage());
        let mut one = 0.0;
        for (t, pool) in &pools {
            // Untimed: every task exactly once, with the section's own spinning kernel.
            let counted = Counted {
                once: PerTask::new(shape.tasks()),
                inner: exec,
            };
            checked(
                "thread scaling",
                shape,
                pool.run(&graph, &RunConfig::default(), &counted)
                    .map(|s| s.tasks),
            )?;
            counted
                .once
                .check(&format!("thread scaling on {shape}, {t} threads"), 0)?;
            let ns = best(opts.repeat, || {
                let t0 = Instant::now();
                let s = pool.run(&graph, &RunConfig::default(), &exec);
                let dt = t0.elapsed();
                checked("thread scaling", shape, s.map(|s| s.tasks))?;
                Ok(dt)
            })?;
            if *t == 1 {
                one = ns;
            }
            let speedup = if ns > 0.0 { one / ns } else { 0.0 };
            let target = match t {
                2 => format!(
                    "  {}",
                    if speedup >= TARGET_SPEEDUP {
                        "ok"
                    } else {
                        "MISS"
                    }
                ),
                _ => String::new(),
            };
            out(&format!(
                "{:>18} {t:>7} {:>10.2} {:>7.2}x{target}\n",
                shape.to_string(),
                ns / 1e6,
                speedup
            ))?;
        }
    }
    Ok(())
}

/// CPU time (user + system) this process has used so far, from `/proc/self/stat` (fields 14
/// and 15, in clock ticks); `None` where that file is unreadable (not Linux).
fn process_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // `pid (comm) state ...`: comm may hold spaces and parentheses, so split after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state): field 14 (utime) is index 11, field 15 (stime) index 12.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(Duration::from_nanos(
        (utime + stime) * (1_000_000_000 / CLK_TCK),
    ))
}

/// `cpu` over `wall` as a percentage of one core, with the target's verdict.
fn idle_figure(cpu: Option<(Duration, Duration)>, wall: Duration) -> String {
    match cpu {
        Some((c0, c1)) if !wall.is_zero() => {
            let pct = c1.saturating_sub(c0).as_secs_f64() / wall.as_secs_f64() * 100.0;
            format!(
                "{pct:>5.1}% of one core over {:.2} s (target < {TARGET_IDLE}%: {})",
                wall.as_secs_f64(),
                if pct < TARGET_IDLE { "ok" } else { "MISS" }
            )
        }
        _ => "n/a (no /proc/self/stat)".to_string(),
    }
}

/// A task whose first run (of any task) sleeps for a fixed time; the others do nothing.
#[derive(Debug)]
struct SleepFirst {
    time: Duration,
    slept: AtomicBool,
}

impl Exec for SleepFirst {
    fn run(&self, _task: TaskId, _worker: usize) -> Result<(), TaskFailure> {
        if !self.slept.swap(true, Ordering::Relaxed) {
            std::thread::sleep(self.time);
        }
        Ok(())
    }
}

/// Idle CPU: process CPU time while 2 workers have nothing to do.
fn idle<E: From<CliError>>(
    opts: &BenchOptions,
    out: &mut impl FnMut(&str) -> Result<(), E>,
) -> Result<(), E> {
    if opts.idle.is_zero() {
        return Ok(());
    }
    out(&format!(
        "\nidle CPU: process CPU time (utime + stime, {} ms ticks) with 2 workers\n",
        1000 / CLK_TCK
    ))?;
    let pool = WorkerPool::new(2).map_err(|e| CliError::plain(format!("bench: {e}")))?;
    let one = Shape::Independent(1);

    // A streamed run whose producer submits a task, sleeps, then submits another.
    let mut measured = None;
    let table = TaskTable::new();
    let sc = StreamConfig {
        deps: DepsMode::Explicit,
        ..StreamConfig::default()
    };
    // The measured runs count their tasks (three relaxed adds in a second of idleness).
    let counted = Counted {
        once: PerTask::new(2),
        inner: NoopExec,
    };
    let s = pool.run_streaming(&table, &RunConfig::default(), &sc, &counted, |b| {
        one.build(b).map_err(|e| ExecError::Build(e.to_string()))?;
        let c0 = process_cpu();
        let t0 = Instant::now();
        std::thread::sleep(opts.idle);
        let c1 = process_cpu();
        measured = Some((c0.zip(c1), t0.elapsed()));
        one.build(b).map_err(|e| ExecError::Build(e.to_string()))
    });
    checked("idle stream", &Shape::Independent(2), s.map(|s| s.tasks))?;
    counted.once.check("idle CPU (streamed)", 0)?;
    let (cpu, wall) = measured.unwrap_or((None, Duration::ZERO));
    out(&format!(
        "{:>22}: {}\n",
        "streamed, producer idle",
        idle_figure(cpu, wall)
    ))?;

    // A finished graph of 3 independent tasks behind a global gate of depth 1: the first task
    // sleeps, the other worker holds ready tasks the gate does not let it start.
    let shape = Shape::Independent(3);
    let graph = StaticGraph::new(shape.storage());
    let config = RunConfig {
        gate: Some(GateConfig {
            depth: 1,
            scope: GateScope::Global,
            streams: 1,
        }),
        ..RunConfig::default()
    };
    let exec = Counted {
        once: PerTask::new(shape.tasks()),
        inner: SleepFirst {
            time: opts.idle,
            slept: AtomicBool::new(false),
        },
    };
    let c0 = process_cpu();
    let t0 = Instant::now();
    let s = pool.run(&graph, &config, &exec);
    let wall = t0.elapsed();
    let c1 = process_cpu();
    let stalls = s.as_ref().map_or(0, |s| s.counters.gate_stalls);
    checked("idle gate", &shape, s.map(|s| s.tasks))?;
    exec.once.check("idle CPU (gate-blocked)", 0)?;
    out(&format!(
        "{:>22}: {} ({stalls} gate stalls)\n",
        "gate-blocked",
        idle_figure(c0.zip(c1), wall)
    ))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{BenchOptions, idle, main_table, scaling};
    use crate::CliError;
    use crate::bench_once::{Fault, inject};
    use pto_wsp::cpu::shapes::Shape;
    use std::time::Duration;

    /// Small options: one independent shape of 8 tasks on 1 and 2 threads, no other section.
    fn small() -> BenchOptions {
        let mut o = BenchOptions::new(vec![Shape::Independent(8)], true, vec![1, 2], 1);
        o.scaling = vec![Shape::Independent(8)];
        o.spin = Duration::from_micros(1);
        o.idle = Duration::from_millis(1);
        o.llama = Vec::new();
        o.kernels = None;
        o.main_job = None;
        o.devgen = Vec::new();
        o
    }

    /// The errors of `section` with task `task` miscounted as `records` runs in its 1st, 2nd, ...
    /// per-task check, until a fault past its last check lets it pass.
    pub(crate) fn errors(
        task: u32,
        records: u32,
        mut section: impl FnMut() -> Result<(), CliError>,
    ) -> Vec<String> {
        let mut errors = Vec::new();
        for nth in 0..100 {
            inject(Some(Fault { task, records, nth }));
            let r = section();
            inject(None);
            match r {
                Ok(()) => return errors,
                Err(e) => errors.push(e.to_string()),
            }
        }
        panic!("the section never passed: {errors:?}");
    }

    fn sink(_: &str) -> Result<(), CliError> {
        Ok(())
    }

    #[test]
    fn every_check_of_the_shape_sections_rejects_a_task_run_twice_or_never() {
        let o = small();
        for (records, says) in [(2, "ran task 3 2 times"), (0, "(the first: task 3)")] {
            let main = errors(3, records, || main_table(&o, &mut sink));
            let mut want = vec!["seq baseline on independent:8".to_string()];
            for t in [1, 2] {
                want.push(format!("rayon baseline on independent:8, {t} threads"));
                want.extend(
                    ["run-only", "build+run (stream)", "build+run (finish)"].map(String::from),
                );
            }
            assert_eq!(main.len(), want.len(), "{main:?}");
            for (e, w) in main.iter().zip(&want) {
                assert!(
                    e.contains(&format!("the {w} run")) && e.contains(says),
                    "{e}"
                );
            }
            let scale = errors(3, records, || scaling(&o, &mut sink));
            assert_eq!(scale.len(), 2, "{scale:?}");
            for (e, t) in scale.iter().zip([1, 2]) {
                assert!(
                    e.contains(&format!(
                        "the thread scaling on independent:8, {t} threads run"
                    )) && e.contains(says),
                    "{e}"
                );
            }
            let idle = errors(1, records, || idle(&o, &mut sink));
            assert_eq!(idle.len(), 2, "{idle:?}");
            for (e, w) in idle.iter().zip(["streamed", "gate-blocked"]) {
                assert!(e.contains(&format!("the idle CPU ({w}) run")), "{e}");
            }
        }
    }

    #[test]
    fn the_workload_sections_reject_a_task_run_twice_or_never() {
        let (l, d) = (crate::bench_llama::llama, crate::bench_devgen::devgen);
        for records in [0, 2] {
            // The first check of each: the LLaMA layer at 64 tokens on one thread, hybrid deps.
            let fault = Fault {
                task: 5,
                records,
                nth: 0,
            };
            inject(Some(fault));
            let e = l(&[64], &[1], 1, &mut sink).unwrap_err().to_string();
            inject(Some(fault));
            let e2 = d(&[64], &[1], 1, true, &mut sink).unwrap_err().to_string();
            inject(Some(fault));
            let binds = [
                "nreq=2",
                "kv_heads=1",
                "ffn=128",
                "max_chunks=2",
                "kv_lens=[3, 400]",
            ]
            .map(String::from);
            let e3 = crate::bench_kernels::main_job(&binds, &[1], 1, &mut sink)
                .unwrap_err()
                .to_string();
            inject(None);
            for (e, what) in [(e, "LLaMA"), (e2, "finished"), (e3, "main job (1 threads)")] {
                let says = if records == 0 {
                    "(the first: task 5)"
                } else {
                    "ran task 5 2 times"
                };
                assert!(
                    e.contains(&format!("the {what} run")) && e.contains(says),
                    "{e}"
                );
            }
        }
    }
}
