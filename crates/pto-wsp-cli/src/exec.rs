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
//! - The time is reported split into build (parse, validate, compile, allocate and fill the
//!   tensors), run (generation and execution, overlapped) and check (the main job's reference).

use crate::files::Outputs;
use crate::progress::{Bar, watch};
use crate::{CliError, Loaded, aliases, llm};
use pto_wsp::cpu::{MAX_THREADS, RunStats};
use pto_wsp::ir::{ExpandOptions, expand_each};
use pto_wsp::kernels::KernelRegistry;
use pto_wsp::{CompileOptions, compile, lower};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// What `pto-wsp run` was asked to do.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// `--bind NAME=VALUE`, after the file's defaults.
    pub binds: Vec<String>,
    /// Worker threads (0: one per core).
    pub threads: usize,
    /// Where to write a Chrome trace of the run.
    pub trace: Option<PathBuf>,
    /// `--check`: regions in flight, and every conflicting pair ordered by the graph (host
    /// runs; refused for device generation and pipelines).
    pub debug_checks: bool,
    /// Orchestration cycles per task in the cycle model ([`CompileOptions::issue_cycles`]).
    pub issue_cycles: u64,
    /// Run kernels without an implementation as empty ones (and generate no inputs).
    pub empty_kernels: bool,
    /// `--model-only`: build the graph and model it, running no kernel (and generating no
    /// inputs).
    pub model_only: bool,
    /// Seed of the generated inputs.
    pub seed: u64,
    /// `--input NAME=PATH.npy`.
    pub inputs: Vec<String>,
    /// `--output NAME=PATH.npy`.
    pub outputs: Vec<String>,
    /// Draw progress bars on stderr (when it is a terminal).
    pub progress: bool,
    /// Device-generation mode (every worker interprets the bytecode; no host-built graph).
    pub device_gen: bool,
    /// `--expect NAME=PATH.npy`: outputs compared with golden files after the run.
    pub expect: Vec<String>,
    /// Relative tolerance of `--expect` (numpy's rule: `|a − e| ≤ atol + rtol·|e|`).
    pub rtol: f64,
    /// Absolute tolerance of `--expect`.
    pub atol: f64,
    /// Called with the task id after every kernel call (`pto-wsp bench` counts each task's
    /// runs with it); `None` for `pto-wsp run`.
    pub on_task: Option<TaskHook>,
    /// `--strict`: an output tensor the run left partly unwritten is an error (nothing is
    /// written to `--output`), not a warning.
    pub strict: bool,
    /// `--machine NAME|FILE`: model the run on this machine (overrides the schedule's
    /// `trace cycles device(NAME)`).
    pub machine: Option<String>,
    /// `--timeline OUT.svg`: draw the run (the device model's, else the wall clock's).
    pub timeline: Option<PathBuf>,
}

/// A function called with a task's id after each kernel call of a run ([`RunOptions::on_task`]).
#[derive(Clone)]
pub struct TaskHook(pub Arc<dyn Fn(u32) + Send + Sync>);

impl std::fmt::Debug for TaskHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TaskHook")
    }
}

impl Default for RunOptions {
    fn default() -> RunOptions {
        RunOptions {
            binds: Vec::new(),
            threads: 0,
            trace: None,
            debug_checks: false,
            issue_cycles: 0,
            empty_kernels: false,
            model_only: false,
            seed: 0,
            inputs: Vec::new(),
            outputs: Vec::new(),
            progress: false,
            device_gen: false,
            expect: Vec::new(),
            rtol: crate::expect::DEFAULT_RTOL,
            atol: crate::expect::DEFAULT_ATOL,
            on_task: None,
            strict: false,
            machine: None,
            timeline: None,
        }
    }
}

/// Wall-clock milliseconds of a run's phases.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Times {
    /// Parse, validate, compile, allocate and fill the tensors.
    pub build_ms: f64,
    /// Generate and run the tasks (overlapped).
    pub run_ms: f64,
    /// Compute the reference and compare (the main job only).
    pub check_ms: f64,
}

/// What a run produced.
#[derive(Debug)]
pub struct RunOutcome {
    /// The run's statistics.
    pub stats: RunStats,
    /// Worker threads.
    pub threads: usize,
    /// The phases' times.
    pub times: Times,
    /// The main job's comparison with its reference.
    pub comparison: Option<llm::Comparison>,
    /// The `--expect` comparisons, in flag order.
    pub expectations: Vec<crate::expect::ExpectResult>,
    /// What `run` prints on stdout.
    pub report: String,
}

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

/// Runs module `text` (shown as `name`); `main_job` adds the main job's input preparation and
/// reference check. `emit` receives lines to print before the report (the main job's header).
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
    let mut bindings = crate::bindings_for(&loaded, &opts.binds)?;
    // Every file the run will write is checked now, not after the run (crate::files).
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

    // Inputs: read and checked against the declarations before anything is allocated for real.
    let inputs = crate::inputs::open_all(name, &loaded.module, &mut bindings, &opts.inputs)?;

    let mut registry = KernelRegistry::with_builtins();
    // Kernels written in tile instructions run as themselves; aliases may not name them.
    pto_wsp::kernels::lang::register_bodies(&loaded.module, &mut registry);
    aliases::apply_aliases(&loaded, &mut registry)?;
    if opts.model_only {
        registry.skip_runs();
    }
    if opts.empty_kernels || opts.model_only {
        for k in &loaded.module.kernels {
            if registry.lookup(&k.name.name).is_none() {
                registry.register(&k.name.name, |_| Ok(()));
            }
        }
    }
    let done = Arc::new(AtomicU64::new(0));
    let count = opts.progress && !opts.empty_kernels && !opts.model_only;
    if count {
        let done = Arc::clone(&done);
        registry = counting(
            registry,
            TaskHook(Arc::new(move |_| {
                done.fetch_add(1, Ordering::Relaxed);
            })),
        );
    }
    if let Some(hook) = &opts.on_task {
        registry = counting(registry, hook.clone());
    }
    let dims = if main_job {
        Some(llm::Dims::from_bindings(&bindings)?)
    } else {
        None
    };
    let plan = lower(&loaded.module).map_err(|e| CliError::plain(e.to_string()))?;
    unbound_host_reads(&loaded, &plan, &bindings)?;
    let options = CompileOptions {
        threads: opts.threads,
        profiling: opts.trace.is_some() || opts.timeline.is_some(),
        debug_checks: opts.debug_checks,
        issue_cycles: opts.issue_cycles,
        check_order: opts.debug_checks,
        kernels: registry,
        device_gen: opts.device_gen,
        machine: match &opts.machine {
            Some(m) => {
                Some(pto_wsp::machine::resolve(m).map_err(|e| CliError::plain(e.to_string()))?)
            }
            None => None,
        },
        record_timeline: opts.timeline.is_some(),
        ..CompileOptions::default()
    };
    let mut program =
        compile(plan, options).map_err(|e| pto_wsp::driver::compile_error(&loaded, &e))?;
    for note in program.notes() {
        eprintln!("note: {note}");
    }
    let mut x0 = Vec::new();
    let mut generated = 0;
    let (read_bytes, read_ms);
    {
        let mut guard = program
            .tensors(&bindings)
            .map_err(|e| CliError::plain(format!("{name}: {e}")))?;
        let store = guard
            .as_mut()
            .ok_or_else(|| CliError::plain("internal error: no tensors allocated"))?;
        if !opts.empty_kernels && !opts.model_only {
            // Only the tensors no input supplies are filled.
            let given: Vec<u32> = inputs
                .iter()
                .filter_map(|i| store.index_of(&i.tensor))
                .collect();
            store.fill_random_except(opts.seed, &given);
            generated = store.len() - given.len();
            if let Some(d) = &dims {
                llm::prepare_inputs(store, d)?;
            }
        }
        let t_read = Instant::now();
        read_bytes = crate::inputs::read_all(&inputs, store)?;
        read_ms = t_read.elapsed().as_secs_f64() * 1e3;
        if let Some(d) = &dims {
            x0 = llm::input(store, d)?;
        }
    }
    let build_ms = t0.elapsed().as_secs_f64() * 1e3;

    let total = if count {
        expand_each(
            &loaded.module,
            &bindings,
            &ExpandOptions::default(),
            |_, _| {},
        )
        .map(|s| u64::from(s.tasks))
        .unwrap_or(0)
    } else {
        0
    };
    if let Some(d) = &dims {
        emit(&format!(
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
            program.threads()
        ));
    }
    let t1 = Instant::now();
    // An error of a computed read is rendered at the read's `file:line:column`.
    let fail = |e: pto_wsp::RunError| {
        if pto_wsp::ir::Diagnostic::loc(&e).is_known() {
            CliError::diagnostic(&loaded.source, &e)
        } else {
            CliError::plain(format!("{name}: {e}"))
        }
    };
    let stats = if count {
        program.execute_async(&bindings).map_err(fail)?;
        let mut bar = Bar::new("running tasks", total, true);
        watch(
            &mut bar,
            || done.load(Ordering::Relaxed),
            || program.is_complete(),
        );
        program.synchronize().map_err(fail)?
    } else {
        program.execute(&bindings).map_err(fail)?
    };
    // The run's end-to-end time is the program's own clock (it starts before the orchestration
    // thread does, so it contains the run's); the bar's polling adds nothing to it.
    let run_ms = program
        .elapsed_ms()
        .unwrap_or_else(|| t1.elapsed().as_secs_f64() * 1e3);
    // Output tensors with elements no task wrote: a warning, or under `--strict` an error
    // before anything is written.
    if let Some(first) = program.coverage().first() {
        if opts.strict {
            return Err(CliError::plain(format!("{name}: {first} (--strict)")));
        }
        for u in program.coverage() {
            eprintln!("warning: {name}: {u}");
        }
    }

    let t2 = Instant::now();
    let guard = program
        .tensors(&bindings)
        .map_err(|e| CliError::plain(format!("{name}: {e}")))?;
    let store = guard
        .as_ref()
        .ok_or_else(|| CliError::plain("internal error: no tensors allocated"))?;
    let comparison = match &dims {
        Some(d) => {
            let progress = AtomicU64::new(0);
            let want = std::thread::scope(|s| {
                let h = s.spawn(|| llm::reference(store, d, &x0, &progress));
                let mut bar = Bar::new("checking", d.reference_work(), opts.progress);
                watch(
                    &mut bar,
                    || progress.load(Ordering::Relaxed),
                    || h.is_finished(),
                );
                h.join()
                    .unwrap_or_else(|_| Err(CliError::plain("the reference panicked")))
            })?;
            Some(llm::compare(&llm::output(store, d)?, &want))
        }
        None => None,
    };
    let check_ms = if comparison.is_some() {
        t2.elapsed().as_secs_f64() * 1e3
    } else {
        0.0
    };

    let expectations = goldens
        .iter()
        .map(|g| g.compare(store, opts.rtol, opts.atol))
        .collect::<Result<Vec<_>, _>>()?;
    let pipeline = {
        let module = &loaded.module;
        module
            .entry_name()
            .and_then(|e| module.pipeline(e))
            .is_some()
    };
    outputs.commit(
        |tensor| store.to_npy(tensor).map_err(|e| e.to_string()),
        || pto_wsp::driver::trace::trace_json(&loaded, &bindings, &stats, pipeline).into_bytes(),
    )?;
    drop(guard);
    if let Some(path) = &opts.timeline {
        let names: Vec<String> = loaded
            .module
            .kernels
            .iter()
            .map(|k| k.name.name.clone())
            .collect();
        let picture = match stats.device.first() {
            Some(d) => crate::timeline::of_device(name, d),
            None => {
                let mut kernel = std::collections::HashMap::new();
                let _ = expand_each(
                    &loaded.module,
                    &bindings,
                    &ExpandOptions::default(),
                    |i, t| {
                        kernel.insert(i, t.kernel);
                    },
                );
                crate::timeline::of_wall(name, &stats, program.threads(), &names, |t| {
                    kernel.get(&t).copied()
                })
            }
        };
        crate::timeline::write(path, &crate::timeline::render(&picture, 1600.0))?;
    }

    let times = Times {
        build_ms,
        run_ms,
        check_ms,
    };
    let module = &loaded.module;
    let pipeline = module.entry_name().and_then(|e| module.pipeline(e));
    let config = &program.plan().config;
    let mut report = match pipeline {
        Some(p) => pipeline_report(name, p, &stats, run_ms),
        None => crate::run_report(
            name,
            &stats,
            program.threads(),
            run_ms,
            crate::Generation::of(config, opts.device_gen),
            crate::Features::of(config),
        ),
    };
    let given: Vec<&str> = inputs.iter().map(|i| i.tensor.as_str()).collect();
    if opts.model_only {
        report.push_str("  data: none generated, no kernel run (--model-only)\n");
    } else if opts.empty_kernels {
        report.push_str("  data: none generated (--empty-kernels)\n");
    } else {
        report.push_str(&format!(
            "  data: {generated} tensor(s) generated from seed {} (integer tensors with bound contents kept){}{}\n",
            opts.seed,
            if main_job {
                " (weights scaled by 1/sqrt(fan-in))"
            } else {
                ""
            },
            if given.is_empty() {
                String::new()
            } else {
                format!(
                    "; read from .npy: {} ({} MB in {} ms, {} GB/s)",
                    given.join(", "),
                    crate::sig(read_bytes as f64 / 1e6, 3),
                    crate::sig(read_ms, 3),
                    crate::sig(read_bytes as f64 / 1e6 / read_ms.max(1e-9), 3)
                )
            }
        ));
    }
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
    report.push_str(&format!(
        "  phases: prepare {} ms (parse, validate, compile, allocate and fill tensors), run {} ms (as above){}\n",
        crate::sig(build_ms, 3),
        crate::sig(run_ms, 3),
        if comparison.is_some() {
            format!(", check {} ms (f64 reference)", crate::sig(check_ms, 3))
        } else {
            String::new()
        }
    ));
    if let Some(c) = &comparison {
        report.push_str(&format!(
            "  check: output X[layers] ({} values) against the f64 reference: max error {:.2e} = {:.2e} of its RMS {:.3}; tolerance {:.0e}: {}\n",
            c.elements,
            c.max_abs,
            c.max_rel_rms,
            c.rms,
            llm::TOLERANCE,
            if c.passed { "PASS" } else { "FAIL" }
        ));
    }
    for e in &expectations {
        report.push_str(&e.line);
    }
    Ok(RunOutcome {
        threads: program.threads(),
        stats,
        times,
        comparison,
        expectations,
        report,
    })
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
    let Ok(r) = plan.resolve() else {
        return Ok(());
    };
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
