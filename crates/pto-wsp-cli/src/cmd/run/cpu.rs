//! `pto-wsp run`: a module on the CPU simulation, with its data in and out, and the main job.
//!
//! Why: running a workload is only useful with real data — generated reproducibly from a seed,
//! or brought in from numpy / PyTorch as `.npy` files — and with results that can be taken out
//! and compared. The main job (no file given) also checks its own output against an independent
//! reference ([`crate::llm`]).
//!
//! Promises:
//! - Every tensor is first filled from `--seed` ([`TensorStore::fill_random`](pto_wsp::kernels::TensorStore::fill_random), the same bytes on
//!   every machine), except the integer tensors the bindings give contents; then each `--input
//!   NAME=PATH.npy` replaces tensor `NAME`, its element type and shape checked exactly against
//!   the declaration ([`pto_wsp::kernels::npy`]). An integer input also becomes the bound
//!   contents the workload's control flow reads (ragged lengths, routing, `load`), so data and
//!   task set agree; it replaces contents bound by a `//@ bind` default or `--bind` (checked
//!   against the tensor's shape, never against the replaced binding). With `--empty-kernels` nothing is generated (the tensors stay zero).
//! - After the run each `--output NAME=PATH.npy` is written in numpy's format, and each
//!   `--expect NAME=PATH.npy` compared ([`crate::expect`]): one line per comparison, `PASS` or
//!   `FAIL`.
//! - Every failure is a [`CliError`] naming what failed: the flag and file, the tensor, the
//!   source location of a kernel declaration, the task and kernel of a failed task.
//! - The time is reported split into build (parse, validate, compile, allocate the tensors and
//!   fill the small ones; a generated tensor of 1 MiB or more is made where the run first
//!   reads it, [`TensorStore::fill_random_lazy`](pto_wsp::kernels::TensorStore::fill_random_lazy)),
//!   run (generation and execution, overlapped) and check (the main job's reference).

use super::{RunOptions, RunOutcome, TaskHook, Times};
use crate::expect::ExpectResult;
use crate::files::Outputs;
use crate::progress::{Bar, watch};
use crate::{CliError, Loaded, aliases, llm};
use pto_wsp::cpu::{MAX_THREADS, RunStats};
use pto_wsp::ir::{ExpandOptions, expand_each};
use pto_wsp::kernels::KernelRegistry;
use pto_wsp::{CompileOptions, compile};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// A registry running `inner`'s kernels (same names, ids and costs) that also calls `after`
/// with the task's id after each call (the progress bar's count, `pto-wsp bench`'s hook).
fn counting(inner: KernelRegistry, after: TaskHook) -> KernelRegistry {
    let inner = Arc::new(inner);
    let mut out = KernelRegistry::new();
    for name in inner.names() {
        let Some(id) = inner.lookup(name) else {
            continue;
        };
        let (run, after) = (Arc::clone(&inner), after.clone());
        out.register(name, move |ctx| {
            let r = run.call(id, ctx);
            (after.0)(ctx.task());
            r
        });
        let cost = Arc::clone(&inner);
        out.set_cost(name, move |ctx| cost.cost(id, ctx));
    }
    out
}

/// Runs module `text` (shown as `name`); `main_job` adds the main job's header and reference
/// check. `emit` receives lines to print before the report (the main job's header).
pub fn run(
    name: &str,
    text: &str,
    main_job: bool,
    opts: &RunOptions,
    emit: &mut dyn FnMut(&str),
) -> Result<RunOutcome, CliError> {
    let t0 = Instant::now();
    if opts.threads > MAX_THREADS {
        return Err(CliError::plain(format!(
            "`--threads {}` is more than the limit of {MAX_THREADS} worker threads (0 means one per core)",
            opts.threads
        )));
    }
    let loaded = crate::load_source(name, text)?;
    let plan = pto_wsp::driver::lower(&loaded)?;
    run_lowered(&loaded, plan, main_job, opts, emit, t0)
}

/// [`run`] of a module already loaded and lowered (the one resolution of its entry point,
/// shared with the Ascend emitter by `run --target ascend_a2a3sim`); `t0` is when the command
/// started.
pub fn run_lowered(
    loaded: &Loaded,
    plan: pto_wsp::LoweredPlan,
    main_job: bool,
    opts: &RunOptions,
    emit: &mut dyn FnMut(&str),
    t0: Instant,
) -> Result<RunOutcome, CliError> {
    let job = Job::prepare(loaded, main_job, opts)?;
    unbound_host_reads(loaded, &plan, &job.bindings)?;
    let options = CompileOptions {
        threads: opts.threads,
        profiling: opts.trace.is_some() || opts.timeline.is_some(),
        debug_checks: opts.debug_checks,
        issue_cycles: opts.issue_cycles,
        check_order: opts.debug_checks,
        kernels: job.kernels()?,
        device_gen: opts.device_gen,
        machine: match &opts.machine {
            Some(m) => Some(
                pto_wsp::machine::resolve(m, |p| std::fs::read_to_string(p))
                    .map_err(|e| CliError::plain(e.to_string()))?,
            ),
            None => None,
        },
        // The picture and the trace show the modelled control threads too.
        record_timeline: opts.timeline.is_some() || opts.trace.is_some(),
        coverage: !opts.skip_coverage,
        ..CompileOptions::default()
    };
    let mut program =
        compile(plan, options).map_err(|e| pto_wsp::driver::compile_error(loaded, &e))?;
    let mut warnings = Vec::new();
    for note in program.notes() {
        if opts.collect_warnings {
            warnings.push(format!("note: {note}"));
        } else {
            eprintln!("note: {note}");
        }
    }
    let data = job.fill(&mut program)?;
    let build_ms = t0.elapsed().as_secs_f64() * 1e3;
    if let Some(d) = &job.dims {
        emit(&main_job_header(job.name, d, program.threads()));
    }
    let (stats, run_ms) = job.execute(&mut program, &mut warnings)?;
    let (comparison, check_ms, expectations) = job.check(&mut program, &data, &stats)?;
    let times = Times {
        build_ms,
        run_ms,
        check_ms,
    };
    let report = job.report(
        &program,
        &stats,
        &data,
        &times,
        comparison.as_ref(),
        &expectations,
    );
    Ok(RunOutcome {
        threads: program.threads(),
        stats,
        times,
        comparison,
        expectations,
        report,
        warnings,
    })
}

/// One CPU run's inputs, checked before anything runs.
struct Job<'a> {
    loaded: &'a Loaded,
    name: &'a str,
    opts: &'a RunOptions,
    bindings: pto_wsp::ir::Bindings,
    /// The files the run will write, checked now, not after the run (crate::files).
    outputs: Outputs,
    goldens: Vec<crate::expect::Expectation>,
    inputs: Vec<crate::inputs::Input>,
    /// The file's `//@ fill` lines: how generated inputs look.
    fills: Vec<pto_wsp::driver::fills::FillLine>,
    /// The main job's dimensions.
    dims: Option<llm::Dims>,
    /// Whether the progress bar counts tasks (and so kernels count their calls).
    count: bool,
    /// Tasks completed, when counted.
    done: Arc<AtomicU64>,
}

/// What was put into the tensors before the run.
struct Data {
    /// Tensors filled from the seed.
    generated: usize,
    /// Bytes read from `--input` files, and how long that took.
    read_bytes: u64,
    read_ms: f64,
    /// The main job's input (for its reference).
    x0: Vec<f32>,
}

impl<'a> Job<'a> {
    /// Bindings, outputs, goldens and inputs of `loaded` under `opts`, each checked.
    fn prepare(loaded: &'a Loaded, main_job: bool, opts: &'a RunOptions) -> Result<Self, CliError> {
        let name = loaded.source.name.as_str();
        let mut bindings = crate::bindings_for(loaded, &opts.binds)?;
        let tensor_names: Vec<&str> = loaded
            .module
            .tensors
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        let outputs = Outputs::check(&opts.outputs, opts.trace.as_deref(), &tensor_names)?;
        let goldens = opts
            .expect
            .iter()
            .map(|spec| crate::expect::Expectation::read(spec))
            .collect::<Result<Vec<_>, _>>()?;
        // Inputs: read and checked against the declarations before anything is allocated for
        // real.
        let inputs = crate::inputs::open_all(name, &loaded.module, &mut bindings, &opts.inputs)?;
        let fills = pto_wsp::driver::fills::fill_lines(loaded)?;
        let dims = if main_job {
            Some(llm::Dims::from_bindings(&bindings)?)
        } else {
            None
        };
        Ok(Job {
            loaded,
            name,
            opts,
            bindings,
            outputs,
            goldens,
            inputs,
            fills,
            dims,
            count: opts.progress && !opts.empty_kernels && !opts.model_only,
            done: Arc::new(AtomicU64::new(0)),
        })
    }

    /// The run's kernels: built-ins, bodies, aliases, empty kernels when asked, counting when
    /// the progress bar or a hook needs it.
    fn kernels(&self) -> Result<KernelRegistry, CliError> {
        let module = &self.loaded.module;
        let mut registry = KernelRegistry::with_builtins();
        // Kernels written in tile instructions run as themselves; aliases may not name them.
        pto_wsp::kernels::lang::register_bodies(module, &mut registry);
        aliases::apply_aliases(self.loaded, &mut registry)?;
        if self.opts.model_only {
            registry.skip_runs();
        }
        if self.opts.empty_kernels || self.opts.model_only {
            for k in &module.kernels {
                if registry.lookup(&k.name.name).is_none() {
                    registry.register(&k.name.name, |_| Ok(()));
                }
            }
        }
        if self.count {
            let done = Arc::clone(&self.done);
            registry = counting(
                registry,
                TaskHook(Arc::new(move |_| {
                    done.fetch_add(1, Ordering::Relaxed);
                })),
            );
        }
        if let Some(hook) = &self.opts.on_task {
            registry = counting(registry, hook.clone());
        }
        Ok(registry)
    }

    /// `" (A, B as the file's `//@ fill` lines say)"` for the filled tensors no input gives.
    fn shaped(&self, given: &[&str]) -> String {
        let names: Vec<&str> = self
            .fills
            .iter()
            .map(|f| f.tensor.as_str())
            .filter(|t| !given.contains(t))
            .collect();
        if names.is_empty() {
            String::new()
        } else {
            format!(" ({} as the file's `//@ fill` lines say)", names.join(", "))
        }
    }

    /// Allocates the tensors and fills them: from the seed (unless `--empty-kernels`) as the
    /// file's `//@ fill` lines say, then the `--input` files.
    fn fill(&self, program: &mut pto_wsp::Program) -> Result<Data, CliError> {
        let name = self.name;
        let mut guard = program
            .tensors(&self.bindings)
            .map_err(|e| CliError::plain(format!("{name}: {e}")))?;
        let store = guard
            .as_mut()
            .ok_or_else(|| CliError::plain("internal error: no tensors allocated"))?;
        let mut generated = 0;
        if !self.opts.empty_kernels && !self.opts.model_only {
            // Only the tensors no input supplies are filled.
            let given: Vec<u32> = self
                .inputs
                .iter()
                .filter_map(|i| store.index_of(&i.tensor))
                .collect();
            pto_wsp::driver::fills::fill(store, self.opts.seed, &self.fills, &given)
                .map_err(|e| CliError::plain(format!("{name}: {e}")))?;
            generated = store.len() - given.len();
        }
        let t_read = Instant::now();
        let read_bytes = crate::inputs::read_all(&self.inputs, store)?;
        let read_ms = t_read.elapsed().as_secs_f64() * 1e3;
        let x0 = match &self.dims {
            Some(d) => llm::input(store, d)?,
            None => Vec::new(),
        };
        Ok(Data {
            generated,
            read_bytes,
            read_ms,
            x0,
        })
    }

    /// Runs the program (with a progress bar when counted); the statistics and the run's
    /// end-to-end milliseconds. Output tensors left partly unwritten are warned about, or
    /// under `--strict` refused.
    /// Runs the program; its coverage warnings are printed, or pushed on `warnings` when
    /// [`RunOptions::collect_warnings`] asks.
    fn execute(
        &self,
        program: &mut pto_wsp::Program,
        warnings: &mut Vec<String>,
    ) -> Result<(RunStats, f64), CliError> {
        let (name, bindings) = (self.name, &self.bindings);
        let total = if self.count {
            expand_each(
                program.plan().resolved(),
                bindings,
                &ExpandOptions::default(),
                |_, _| {},
            )
            .map(|s| u64::from(s.tasks))
            .unwrap_or(0)
        } else {
            0
        };
        let t1 = Instant::now();
        // An error of a computed read is rendered at the read's `file:line:column`.
        let fail = |e: pto_wsp::RunError| {
            if pto_wsp::ir::Diagnostic::loc(&e).is_known() {
                CliError::diagnostic(&self.loaded.source, &e)
            } else {
                CliError::plain(format!("{name}: {e}"))
            }
        };
        let stats = if self.count {
            program.execute_async(bindings).map_err(fail)?;
            let mut bar = Bar::new("running tasks", total, true);
            watch(
                &mut bar,
                || self.done.load(Ordering::Relaxed),
                || program.is_complete(),
            );
            program.synchronize().map_err(fail)?
        } else {
            program.execute(bindings).map_err(fail)?
        };
        // The run's end-to-end time is the program's own clock (it starts before the
        // orchestration thread does, so it contains the run's); the bar's polling adds nothing.
        let run_ms = program
            .elapsed_ms()
            .unwrap_or_else(|| t1.elapsed().as_secs_f64() * 1e3);
        if let Some(first) = program.coverage().first() {
            if self.opts.strict {
                return Err(CliError::plain(format!("{name}: {first} (--strict)")));
            }
            for u in program.coverage() {
                if self.opts.collect_warnings {
                    warnings.push(format!("warning: {u}"));
                } else {
                    eprintln!("warning: {name}: {u}");
                }
            }
        }
        Ok((stats, run_ms))
    }

    /// After the run: the main job's reference check (and its milliseconds), the `--expect`
    /// comparisons, then the `--output` files and the trace written.
    fn check(
        &self,
        program: &mut pto_wsp::Program,
        data: &Data,
        stats: &RunStats,
    ) -> Result<(Option<llm::Comparison>, f64, Vec<ExpectResult>), CliError> {
        let t2 = Instant::now();
        let plan = program.plan().clone();
        let guard = program
            .tensors(&self.bindings)
            .map_err(|e| CliError::plain(format!("{}: {e}", self.name)))?;
        let store = guard
            .as_ref()
            .ok_or_else(|| CliError::plain("internal error: no tensors allocated"))?;
        let comparison = match &self.dims {
            Some(d) => Some(reference_check(store, d, &data.x0, self.opts.progress)?),
            None => None,
        };
        let check_ms = if comparison.is_some() {
            t2.elapsed().as_secs_f64() * 1e3
        } else {
            0.0
        };
        let expectations = self
            .goldens
            .iter()
            .map(|g| g.compare(store, self.opts.rtol, self.opts.atol))
            .collect::<Result<Vec<_>, _>>()?;
        self.outputs.commit(
            |tensor| store.to_npy(tensor).map_err(|e| e.to_string()),
            || pto_wsp::driver::trace::trace_json(&plan, &self.bindings, stats).into_bytes(),
        )?;
        drop(guard);
        if let Some(path) = &self.opts.timeline {
            self.timeline(path, stats, program.threads(), &plan)?;
        }
        Ok((comparison, check_ms, expectations))
    }

    /// Writes `--timeline`: the device model's lanes when the run was modelled on a machine,
    /// else one lane per worker of the wall clock.
    fn timeline(
        &self,
        path: &std::path::Path,
        stats: &RunStats,
        threads: usize,
        plan: &pto_wsp::LoweredPlan,
    ) -> Result<(), CliError> {
        let module = &self.loaded.module;
        let names: Vec<String> = module.kernels.iter().map(|k| k.name.name.clone()).collect();
        let picture = match stats.device.first() {
            Some(d) => crate::timeline::of_device(self.name, d),
            None => {
                let mut kernel = std::collections::HashMap::new();
                let _ = expand_each(
                    plan.resolved(),
                    &self.bindings,
                    &ExpandOptions::default(),
                    |i, t| {
                        kernel.insert(i, t.kernel);
                    },
                );
                crate::timeline::of_wall(self.name, stats, threads, &names, |t| {
                    kernel.get(&t).copied()
                })
            }
        };
        let mut picture = picture;
        picture.texts = pto_wsp::driver::trace::task_texts(plan, &self.bindings, stats);
        crate::timeline::write(path, &crate::timeline::render(&picture, 1600.0))
    }

    /// What `run` prints on stdout.
    fn report(
        &self,
        program: &pto_wsp::Program,
        stats: &RunStats,
        data: &Data,
        times: &Times,
        comparison: Option<&llm::Comparison>,
        expectations: &[ExpectResult],
    ) -> String {
        let (name, opts) = (self.name, self.opts);
        let module = &self.loaded.module;
        let pipeline = module.entry_name().and_then(|e| module.pipeline(e));
        let sched = program.plan().sched();
        let mut report = match pipeline {
            Some(p) => pipeline_report(name, p, stats, times.run_ms),
            None => crate::run_report(
                name,
                stats,
                program.threads(),
                times.run_ms,
                crate::Generation::of(sched, opts.device_gen),
                crate::Features::of(sched),
            ),
        };
        report.push_str(&self.data_line(data));
        if !opts.outputs.is_empty() {
            report.push_str(&format!(
                "  wrote: {}\n",
                opts.outputs
                    .iter()
                    .map(|s| s.replacen('=', " -> ", 1))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        report.push_str(&phases_line(times, comparison.is_some()));
        if let Some(c) = comparison {
            report.push_str(&check_line(c));
        }
        for e in expectations {
            report.push_str(&e.line);
        }
        report
    }

    /// The report's `data:` line: what was generated and what was read.
    fn data_line(&self, data: &Data) -> String {
        if self.opts.model_only {
            return "  data: none generated, no kernel run (--model-only)\n".to_string();
        }
        if self.opts.empty_kernels {
            return "  data: none generated (--empty-kernels)\n".to_string();
        }
        let given: Vec<&str> = self.inputs.iter().map(|i| i.tensor.as_str()).collect();
        format!(
            "  data: {} tensor(s) generated from seed {} (integer tensors with bound contents kept){}{}\n",
            data.generated,
            self.opts.seed,
            self.shaped(&given),
            if given.is_empty() {
                String::new()
            } else {
                format!(
                    "; read from .npy: {} ({} MB in {} ms, {} GB/s)",
                    given.join(", "),
                    crate::sig(data.read_bytes as f64 / 1e6, 3),
                    crate::sig(data.read_ms, 3),
                    crate::sig(data.read_bytes as f64 / 1e6 / data.read_ms.max(1e-9), 3)
                )
            }
        )
    }
}

/// The main job's first line: its model's dimensions and the worker threads.
fn main_job_header(name: &str, d: &llm::Dims, threads: usize) -> String {
    format!(
        "{name}: one decode step of {} layer(s), hidden {}, {} query / {} KV heads of 128, FFN {}, for {} requests of {} tokens; {} worker thread(s)\n",
        d.layers,
        d.hidden,
        d.kv_heads * 4,
        d.kv_heads,
        d.ffn,
        d.nreq,
        d.lens
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        threads
    )
}

/// The main job's output against its f64 reference, computed on another thread under a
/// progress bar.
fn reference_check(
    store: &pto_wsp::kernels::TensorStore,
    d: &llm::Dims,
    x0: &[f32],
    progress: bool,
) -> Result<llm::Comparison, CliError> {
    let done = AtomicU64::new(0);
    let want = std::thread::scope(|s| {
        let h = s.spawn(|| llm::reference(store, d, x0, &done));
        let mut bar = Bar::new("checking", d.reference_work(), progress);
        watch(
            &mut bar,
            || done.load(Ordering::Relaxed),
            || h.is_finished(),
        );
        h.join()
            .unwrap_or_else(|_| Err(CliError::plain("the reference panicked")))
    })?;
    Ok(llm::compare(&llm::output(store, d)?, &want))
}

/// The report's `phases:` line.
fn phases_line(times: &Times, checked: bool) -> String {
    format!(
        "  phases: prepare {} ms (parse, validate, compile, allocate tensors; large generated inputs are made where the run first reads them), run {} ms (as above){}\n",
        crate::sig(times.build_ms, 3),
        crate::sig(times.run_ms, 3),
        if checked {
            format!(
                ", check {} ms (f64 reference)",
                crate::sig(times.check_ms, 3)
            )
        } else {
            String::new()
        }
    )
}

/// The report's `check:` line of the main job.
fn check_line(c: &llm::Comparison) -> String {
    format!(
        "  check: output X[layers] ({} values) against the f64 reference: max error {:.2e} = {:.2e} of its RMS {:.3}; tolerance {:.0e}: {}\n",
        c.elements,
        c.max_abs,
        c.max_rel_rms,
        c.rms,
        llm::TOLERANCE,
        if c.passed { "PASS" } else { "FAIL" }
    )
}

/// The first lines of the report of a pipeline run: tasks per process (each on its own thread).
fn pipeline_report(
    name: &str,
    p: &pto_wsp::ir::Pipeline,
    stats: &RunStats,
    elapsed_ms: f64,
) -> String {
    let per: Vec<String> = p
        .processes
        .iter()
        .zip(&stats.per_worker)
        .map(|(proc, n)| format!("{} {n}", proc.name))
        .collect();
    let chans: Vec<String> = p
        .channels
        .iter()
        .map(|c| format!("{}[{}]", c.name, c.depth))
        .collect();
    format!(
        "{name}: ran {} tasks in pipeline `{}`: {} processes, one thread each, channels {}\n  \
         time: {elapsed_ms:.3} ms end to end, run {:.3} ms\n  tasks per process: {}\n",
        stats.tasks,
        p.name,
        p.processes.len(),
        chans.join(", "),
        stats.run_ns as f64 / 1e6,
        per.join(", ")
    )
}

/// Refuses, before anything runs, a generator read of a tensor no task writes and `bindings`
/// does not give, pointing at the read (`docs/SEMANTICS.md`, "Computed reads").
fn unbound_host_reads(
    loaded: &Loaded,
    plan: &pto_wsp::LoweredPlan,
    bindings: &pto_wsp::ir::Bindings,
) -> Result<(), CliError> {
    let r = plan.resolved();
    for (t, decl) in loaded.module.tensors.iter().enumerate() {
        if r.arrays[t] && !r.written[t] && !bindings.arrays.contains_key(&decl.name.name) {
            let e = pto_wsp::ir::BindingError::MissingArray {
                tensor: decl.name.name.clone(),
                loc: r.array_reads[t],
            };
            return Err(CliError::diagnostic(&loaded.source, &e));
        }
    }
    Ok(())
}
