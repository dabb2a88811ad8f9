//! The `pto-wsp` command-line tool: check, format and expand `.wsp` modules.
//!
//! Why: a user (or CI) needs one command to see whether a module is valid, what its canonical
//! form is, and which tasks it generates under given bindings.
//! Promise: exit code 0 on success, 1 on any error caused by the input (rendered with
//! `file:line:column` when it has a location, never a panic or backtrace), 2 on a usage error.
//! Printing lives in the `pto_wsp_cli` library so tests can call it directly.

#![forbid(unsafe_code)]

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use pto_wsp::ir::ExpandOptions;
use pto_wsp_cli::{CliError, report};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// The process's allocator. Building a task graph allocates tens of bytes per task in a few
/// large arrays and frees them when the run ends; the system allocator returns such blocks to
/// the kernel and faults them in again, page by page, on the next build (a third of a 1M-task
/// build's time). mimalloc keeps freed memory for reuse (and measured faster on a first build
/// in a fresh process too). Tensor buffers do not go through it (see `pto_wsp::kernels::TensorStore`).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Check, format and expand pto-wsp workload modules (`.wsp` files).
#[derive(Parser, Debug)]
#[command(name = "pto-wsp", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Parse and validate a module; print a one-line summary.
    Check {
        /// The `.wsp` file.
        file: PathBuf,
    },
    /// Print the canonical form of a module (keeping its leading comment block).
    Fmt {
        /// The `.wsp` file.
        file: PathBuf,
        /// Print nothing; exit 1 if the file is not already canonical.
        #[arg(long, conflicts_with = "write")]
        check: bool,
        /// Rewrite the file in canonical form.
        #[arg(long)]
        write: bool,
    },
    /// Validate and expand a module; print its tasks and counts.
    Expand {
        /// The `.wsp` file.
        file: PathBuf,
        /// Bind a symbol, slot or integer tensor (after the file's `//@ bind` defaults).
        #[arg(long = "bind", value_name = "NAME=VALUE")]
        binds: Vec<String>,
        /// List at most this many tasks (counts always cover every task).
        #[arg(long, default_value_t = 40, value_name = "N")]
        limit: usize,
        /// Override the schedule's number of executors (1 to 65536).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=pto_wsp::ir::schedule::limits::EXECUTORS))]
        executors: Option<u64>,
        /// List no tasks, only the counts.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Encode a module as workload bytecode; report its size against the expanded task list
    /// and run every executor's interpreter, checking each against the reference expander.
    Bytecode {
        /// The `.wsp` file.
        file: PathBuf,
        /// Bind a symbol, slot or integer tensor (after the file's `//@ bind` defaults).
        #[arg(long = "bind", value_name = "NAME=VALUE")]
        binds: Vec<String>,
        /// Print a readable listing of the bytecode.
        #[arg(long)]
        disasm: bool,
        /// Print per-executor statistics (tasks stepped over, skipped in whole iterations).
        #[arg(long)]
        stats: bool,
        /// Override the schedule's number of executors (1 to 65536).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=pto_wsp::ir::schedule::limits::EXECUTORS))]
        executors: Option<u64>,
    },
    /// Run a module on the CPU simulation; print run statistics. With no file, run the main job:
    /// one LLM decode step (examples/llm_decode.wsp), checked against an f64 reference. Kernels
    /// come from the built-in registry, mapped by the file's `//@ alias` lines.
    Run {
        /// The `.wsp` file (default: the main job).
        file: Option<PathBuf>,
        /// Run the module's plans (Plan-Descriptor-Execute, docs/PDE.md) even when it also has a
        /// workload; a module with plans and no workload or pipeline runs them without it.
        #[arg(long)]
        plans: bool,
        /// Bind a symbol, slot or integer tensor (after the file's `//@ bind` defaults).
        #[arg(long = "bind", value_name = "NAME=VALUE")]
        binds: Vec<String>,
        /// Worker threads (0 = one per core).
        #[arg(long, default_value_t = 0, value_name = "N")]
        threads: usize,
        /// Where to run: `cpu_sim` (our CPU simulation), or `ascend_a2a3sim` (emit for the
        /// Ascend runtime simpler, build and run on its simulator, compare every written tensor
        /// with cpu_sim on the same inputs; needs scripts/prepare-simpler.sh).
        #[arg(long, default_value = "cpu_sim")]
        target: String,
        /// Seed of the generated inputs (every tensor not bound or given by --input).
        #[arg(long, default_value_t = 1, value_name = "N")]
        seed: u64,
        /// Read tensor NAME from a numpy .npy file (element type and shape must match).
        #[arg(long = "input", value_name = "NAME=PATH.npy")]
        inputs: Vec<String>,
        /// Write tensor NAME to a numpy .npy file after the run.
        #[arg(long = "output", value_name = "NAME=PATH.npy")]
        outputs: Vec<String>,
        /// Write the wall-clock span of every task as Chrome trace-event JSON (Perfetto).
        #[arg(long, value_name = "FILE")]
        trace: Option<PathBuf>,
        /// Debug checks: fail on two conflicting tasks in flight at once, and on any two tasks
        /// whose regions conflict that no path of the run's graph orders (names both and the
        /// `deps` mode). Host runs only; refused with --device-gen and for pipelines.
        #[arg(long)]
        check: bool,
        /// Run every kernel that has no implementation as an empty kernel (to measure the
        /// runtime on modules whose kernels are not implemented yet); generates no inputs.
        #[arg(long)]
        empty_kernels: bool,
        /// Build the graph and model it (`trace cycles`, --machine) without running any kernel
        /// or generating inputs: for modelling workloads too large to run here.
        #[arg(long)]
        model_only: bool,
        /// Draw no progress bar.
        #[arg(long, short)]
        quiet: bool,
        /// Device-generation mode: every worker thread interprets the workload bytecode and
        /// runs its own tasks as they are generated (no host-built graph).
        #[arg(long)]
        device_gen: bool,
        /// After the run, compare tensor NAME with a numpy .npy golden (numpy.isclose's rule);
        /// prints the errors and PASS or FAIL; exit 1 on FAIL.
        #[arg(long = "expect", value_name = "NAME=PATH.npy")]
        expect: Vec<String>,
        /// Relative tolerance of --expect: |actual - expected| <= atol + rtol * |expected|.
        #[arg(long, default_value_t = pto_wsp_cli::expect::DEFAULT_RTOL, value_name = "R")]
        rtol: f64,
        /// Absolute tolerance of --expect.
        #[arg(long, default_value_t = pto_wsp_cli::expect::DEFAULT_ATOL, value_name = "A")]
        atol: f64,
        /// Under `trace cycles`: cycles the model charges orchestration per submitted task
        /// (default 0, generation is free); makes start policies and `timing` visible.
        #[arg(long, default_value_t = 0, value_name = "N")]
        issue_cycles: u64,
        /// Fail (writing no --output) when an output tensor has elements no task wrote; by
        /// default that is a warning naming the tensor and the unwritten elements.
        #[arg(long)]
        strict: bool,
        /// Model the run on a machine: a shipped machine (`ascend910b`, `unit`) or a machine
        /// file (TOML, see docs/BACKENDS.md); overrides `trace cycles device(NAME)`. Reports
        /// the makespan under device and host generation.
        #[arg(long, value_name = "NAME|FILE")]
        machine: Option<String>,
        /// Draw the run as an SVG timeline: the device model's lanes (orchestrator,
        /// schedulers, cores) when the run is modelled on a machine, else one lane per worker.
        #[arg(long, value_name = "OUT.svg")]
        timeline: Option<PathBuf>,
    },
    /// List every registered back end: its targets and capabilities.
    Targets,
    /// Search the schedule space the module leaves open on the device timeline model of a
    /// machine, within a time budget: prints the best schedules with their modelled makespans
    /// next to the module's own, and can write the best one back as .wsp text.
    Tune {
        /// The `.wsp` file.
        file: PathBuf,
        /// The machine: a shipped name (`ascend910b`, `unit`) or a machine file.
        #[arg(long, default_value = "ascend910b", value_name = "NAME|FILE")]
        machine: String,
        /// Search time budget in seconds.
        #[arg(long, default_value_t = 60.0, value_name = "SECONDS")]
        budget: f64,
        /// Bind a symbol, slot or integer tensor (after the file's `//@ bind` defaults).
        #[arg(long = "bind", value_name = "NAME=VALUE")]
        binds: Vec<String>,
        /// Also try these values of a symbol (e.g. a chunk size): NAME=V1,V2,...
        #[arg(long = "tune", value_name = "NAME=V1,V2,...")]
        symbols: Vec<String>,
        /// Schedules listed.
        #[arg(long, default_value_t = 5, value_name = "K")]
        top: usize,
        /// Seed of the random restarts.
        #[arg(long, default_value_t = 1, value_name = "N")]
        seed: u64,
        /// Write the module with the best schedule to this file.
        #[arg(long, value_name = "OUT.wsp")]
        write: Option<PathBuf>,
        /// Draw no progress bar.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Validate and resolve a module, check that a target supports it, and compile it: an
    /// emitting target writes its artefact to OUT, a running one (`cpu_sim`) reports.
    Compile {
        /// The `.wsp` file.
        file: PathBuf,
        /// The target (see `pto-wsp targets`).
        #[arg(long, default_value = "cpu_sim")]
        target: String,
        /// Where an emitting target writes its artefact.
        #[arg(short = 'o', long = "out", value_name = "OUT")]
        out: Option<PathBuf>,
    },
    /// Emit code for a target. `emit kernels FILE -o DIR`: every kernel written in tile
    /// instructions as a PTO-ISA C++ header, a host driver running the workload's tasks of those
    /// kernels on `.npy` inputs, and a Makefile (`make -C DIR`, `PTO_ISA_ROOT` defaults to
    /// `$HOME/.cache/pto-wsp/pto-isa`). `emit ascend FILE -o DIR`: the workload for the Ascend
    /// runtime simpler (see docs/BACKENDS.md).
    Emit {
        /// What to emit.
        what: EmitWhat,
        /// The `.wsp` file.
        file: PathBuf,
        /// The output directory (created if needed).
        #[arg(short = 'o', long = "out", value_name = "DIR")]
        out: PathBuf,
        /// Bind a symbol, slot or integer tensor (after the file's `//@ bind` defaults).
        #[arg(long = "bind", value_name = "NAME=VALUE")]
        binds: Vec<String>,
        /// `emit ascend`: the Ascend target (`ascend_a2a3sim` or `ascend_a2a3`).
        #[arg(long, default_value = "ascend_a2a3sim")]
        target: String,
    },
    /// Measure the CPU runtime's per-task overhead on Taskflow's benchmark shapes.
    Bench {
        /// Shapes: chain:N, tree:LEVELS, independent:N, wavefront:SIDE,
        /// random:LEVELS:WIDTH[:SEED] (default: the five standard shapes, ~1M tasks each).
        shapes: Vec<pto_wsp::cpu::shapes::Shape>,
        /// Use the quick standard shapes (~20K tasks each) when no shape is given.
        #[arg(long)]
        quick: bool,
        /// Comma-separated worker thread counts.
        #[arg(long, value_delimiter = ',', default_values_t = [1, 2], value_name = "LIST",
              value_parser = clap::value_parser!(u16).range(1..))]
        threads: Vec<u16>,
        /// Runs per figure (the best is reported).
        #[arg(long, default_value_t = 5, value_name = "N",
              value_parser = clap::value_parser!(u32).range(1..))]
        repeat: u32,
        /// Sequence lengths of the LLaMA-layer section, comma-separated; 0 skips it (default:
        /// 1024,4096,16384; 1024 with --quick).
        #[arg(long, value_delimiter = ',', value_name = "LIST",
              value_parser = clap::value_parser!(i64).range(0..=1 << 20))]
        llama: Vec<i64>,
        /// Skip the kernel section (GEMM and decode attention against direct baselines).
        #[arg(long)]
        no_kernels: bool,
        /// Skip the main-job section (an LLM decode step end to end: build, run, check).
        #[arg(long)]
        no_main_job: bool,
        /// Sequence lengths of the device-generation section (host build then run, host
        /// streamed and device generation on the LLaMA layer), comma-separated; 0 skips it
        /// (default: 16384; 1024 with --quick).
        #[arg(long, value_delimiter = ',', value_name = "LIST",
              value_parser = clap::value_parser!(i64).range(0..=1 << 20))]
        devgen: Vec<i64>,
        /// Run only the device-generation section.
        #[arg(long)]
        devgen_only: bool,
        /// Run the whole bench in N separate processes (this program re-run N times, one after
        /// the other) and print each figure as median[min-max] over them; numbers equal in
        /// every process are printed as they are. 1: one process, printed as it runs.
        #[arg(long, default_value_t = 1, value_name = "N",
              value_parser = clap::value_parser!(u32).range(1..=1000))]
        processes: u32,
    },
}

/// What `pto-wsp emit` writes.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum EmitWhat {
    /// Kernels written in tile instructions, as PTO-ISA C++ with a host driver.
    Kernels,
    /// The workload for the Ascend runtime (simpler): orchestration C++, one AICore kernel file
    /// per kernel, a numpy-only runner and a README of the schedule directives it cannot honour.
    Ascend,
}

fn main() -> ExitCode {
    // A panic is a bug in pto-wsp, never the user's fault: say so in one line, no backtrace.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("error: internal error in pto-wsp (please report it): {info}");
    }));
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(err) => {
            match err.downcast_ref::<CliError>() {
                Some(e) => eprint!("{e}"),
                None => eprintln!("error: {err:#}"),
            }
            ExitCode::from(1)
        }
    }
}

/// Reads a source file as UTF-8 text.
fn read(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read `{}`", path.display()))
}

/// Writes to stdout; a closed pipe (`pto-wsp expand ... | head`) is not an error.
/// Fails the run, naming the tensors, when an `--expect` golden did not match.
fn check_expectations(
    name: &str,
    expectations: &[pto_wsp_cli::expect::ExpectResult],
) -> anyhow::Result<()> {
    let failed: Vec<&str> = expectations
        .iter()
        .filter(|e| !e.passed)
        .map(|e| e.tensor.as_str())
        .collect();
    if failed.is_empty() {
        return Ok(());
    }
    Err(CliError::plain(format!(
        "{name}: {} do(es) not match the --expect golden (see the expect lines above)",
        failed.join(", ")
    ))
    .into())
}

fn emit(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(e).context("cannot write to stdout")
        }
        _ => Ok(()),
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Targets => emit(&pto_wsp_cli::targets::targets_report())?,
        Command::Tune {
            file,
            machine,
            budget,
            binds,
            symbols,
            top,
            seed,
            write,
            quiet,
        } => {
            let name = file.display().to_string();
            let text = read(&file)?;
            if !(budget.is_finite() && budget > 0.0) {
                anyhow::bail!("`--budget {budget}`: give a positive number of seconds");
            }
            let symbols = symbols
                .iter()
                .map(|s| {
                    let (n, vs) = s
                        .split_once('=')
                        .ok_or_else(|| anyhow::anyhow!("`--tune {s}`: write NAME=V1,V2,..."))?;
                    Ok((n.to_string(), vs.split(',').map(str::to_string).collect()))
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            let o = pto_wsp_cli::tune::TuneOptions {
                machine,
                budget: std::time::Duration::from_secs_f64(budget),
                binds,
                symbols,
                top,
                progress: !quiet,
                seed,
            };
            let r = pto_wsp_cli::tune::tune(&name, &text, &o)?;
            emit(&pto_wsp_cli::tune::report(&name, &o, &r))?;
            if let Some(out) = write {
                let written = pto_wsp_cli::tune::written(&name, &text, &o, &r)?;
                std::fs::write(&out, written)?;
                eprintln!("wrote {}", out.display());
            }
        }
        Command::Compile { file, target, out } => {
            let name = file.display().to_string();
            let loaded = pto_wsp_cli::load_source(&name, &read(&file)?)?;
            emit(&pto_wsp_cli::targets::compile_loaded(
                &loaded,
                &target,
                out.as_deref(),
            )?)?;
        }
        Command::Emit {
            what: EmitWhat::Kernels,
            file,
            out,
            binds,
            ..
        } => {
            let name = file.display().to_string();
            let loaded = pto_wsp_cli::load_source(&name, &read(&file)?)?;
            let bindings = pto_wsp_cli::bindings_for(&loaded, &binds)?;
            let emitted = pto_wsp_cli::cmd::emit::kernels(&loaded, &bindings)?;
            pto_wsp_cli::cmd::emit::write_files(&emitted.files, &out)?;
            emit(&pto_wsp_cli::cmd::emit::kernels_summary(&emitted, &out))?;
        }
        Command::Emit {
            what: EmitWhat::Ascend,
            file,
            out,
            binds,
            target,
        } => {
            let name = file.display().to_string();
            let loaded = pto_wsp_cli::load_source(&name, &read(&file)?)?;
            let bindings = pto_wsp_cli::bindings_for(&loaded, &binds)?;
            let tree = pto_wsp_cli::cmd::emit::ascend(&loaded, &bindings, &target)?;
            pto_wsp_cli::cmd::emit::write_files(&tree.files, &out)?;
            emit(&pto_wsp_cli::cmd::emit::ascend_summary(&tree, &out))?;
        }
        Command::Check { file } => {
            let name = file.display().to_string();
            let loaded = pto_wsp_cli::load_source(&name, &read(&file)?)?;
            emit(&format!(
                "{}\n",
                pto_wsp_cli::check_summary(&name, &loaded.module)
            ))?;
        }
        Command::Fmt { file, check, write } => {
            let name = file.display().to_string();
            let text = read(&file)?;
            let formatted = pto_wsp_cli::format_source(&name, &text)?;
            if check {
                if let Some(line) = pto_wsp_cli::first_difference(&text, &formatted) {
                    return Err(CliError::plain(format!(
                        "{name} is not in canonical form (first difference at line {line}; \
                         run `pto-wsp fmt --write {name}`)"
                    ))
                    .into());
                }
            } else if write {
                if let Some(line) = pto_wsp_cli::first_dropped_comment(&text) {
                    return Err(CliError::plain(format!(
                        "{name}:{line}: `fmt --write` would drop this comment (only the leading \
                         comment block is kept); move it into the header or use `fmt` without \
                         `--write`"
                    ))
                    .into());
                }
                if formatted != text {
                    std::fs::write(&file, &formatted)
                        .with_context(|| format!("cannot write `{name}`"))?;
                }
            } else {
                emit(&formatted)?;
            }
        }
        Command::Expand {
            file,
            binds,
            limit,
            executors,
            quiet,
        } => {
            let name = file.display().to_string();
            let loaded = pto_wsp_cli::load_source(&name, &read(&file)?)?;
            let bindings = pto_wsp_cli::bindings_for(&loaded, &binds)?;
            let options = ExpandOptions {
                limit: None,
                executors,
            };
            let start = Instant::now();
            let expansion = pto_wsp_cli::expand_loaded(&loaded, &bindings, &options)?;
            let elapsed = start.elapsed().as_secs_f64();
            let opts = report::ReportOptions {
                limit: if quiet { 0 } else { limit },
            };
            emit(&report::expand_report(
                &loaded.module,
                &bindings,
                &expansion,
                &opts,
            ))?;
            let n = expansion.tasks.len();
            let rate = if elapsed > 0.0 {
                format!("{:.0}", n as f64 / elapsed)
            } else {
                "inf".to_string()
            };
            eprintln!(
                "expanded {n} tasks in {:.2} ms ({rate} tasks/s)",
                elapsed * 1000.0
            );
        }
        Command::Bytecode {
            file,
            binds,
            disasm,
            stats,
            executors,
        } => {
            let name = file.display().to_string();
            let loaded = pto_wsp_cli::load_source(&name, &read(&file)?)?;
            let bindings = pto_wsp_cli::bindings_for(&loaded, &binds)?;
            let options = ExpandOptions {
                limit: None,
                executors,
            };
            // An entry with computed reads generates tasks from values only a run computes: no
            // expander list to check the interpreters against.
            let expansion = if pto_wsp_cli::bytecode::computed_tensors(&loaded.module).is_empty() {
                Some(pto_wsp_cli::expand_loaded(&loaded, &bindings, &options)?)
            } else {
                None
            };
            let opts = pto_wsp_cli::bytecode::BytecodeOptions {
                disasm,
                stats,
                executors,
            };
            let report = pto_wsp_cli::bytecode::bytecode_report(
                &name,
                &loaded.module,
                &bindings,
                expansion.as_ref(),
                &opts,
            )?;
            emit(&report.text)?;
            if expansion.is_none() {
                return Ok(ExitCode::SUCCESS);
            }
            let secs = report.elapsed.as_secs_f64();
            let rate = if secs > 0.0 {
                format!("{:.1}", report.tasks as f64 / secs / 1e6)
            } else {
                "inf".to_string()
            };
            eprintln!(
                "interpreted {} tasks on {} executors (one after another) in {:.2} ms ({rate} M tasks/s, task checks included); slowest executor {:.2} ms",
                report.tasks,
                report.executors,
                secs * 1000.0,
                report.slowest.as_secs_f64() * 1000.0
            );
        }
        Command::Run {
            file,
            plans,
            binds,
            threads,
            target,
            seed,
            inputs,
            outputs,
            trace,
            check,
            empty_kernels,
            model_only,
            quiet,
            device_gen,
            expect,
            rtol,
            atol,
            issue_cycles,
            strict,
            machine,
            timeline,
        } => {
            let (name, text, main_job) = match &file {
                Some(f) => (f.display().to_string(), read(f)?, false),
                None => (
                    pto_wsp_cli::llm::NAME.to_string(),
                    pto_wsp_cli::llm::SOURCE.to_string(),
                    true,
                ),
            };
            let opts = pto_wsp_cli::exec::RunOptions {
                binds,
                threads,
                trace: trace.clone(),
                debug_checks: check,
                issue_cycles,
                empty_kernels,
                model_only,
                seed,
                inputs,
                outputs,
                progress: !quiet,
                device_gen,
                expect,
                rtol,
                atol,
                on_task: None,
                strict,
                machine,
                timeline,
            };
            if target.starts_with("ascend") {
                let outcome = pto_wsp_cli::ascend_run::run_ascend(&name, &text, &target, &opts)?;
                emit(&outcome.report)?;
                return Ok(if outcome.passed {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::from(1)
                });
            }
            if target != "cpu_sim" {
                anyhow::bail!(
                    "`pto-wsp run --target {target}`: runnable targets are cpu_sim and ascend_a2a3sim"
                );
            }
            if !main_job
                && let Some(outcome) = pto_wsp_cli::plan_run::run(&name, &text, &opts, plans)?
            {
                emit(&outcome.report)?;
                check_expectations(&name, &outcome.expectations)?;
                return Ok(ExitCode::SUCCESS);
            }
            let mut header = Ok(());
            let outcome = pto_wsp_cli::exec::run(&name, &text, main_job, &opts, &mut |line| {
                if header.is_ok() {
                    header = emit(line);
                }
            })?;
            header?;
            emit(&outcome.report)?;
            if let Some(path) = trace {
                eprintln!(
                    "wrote {} task spans to {}",
                    outcome.stats.spans.len(),
                    path.display()
                );
            }
            check_expectations(&name, &outcome.expectations)?;
            if outcome.comparison.is_some_and(|c| !c.passed) {
                return Err(CliError::plain(format!(
                    "{name}: the output does not match the reference (see the check line above)"
                ))
                .into());
            }
        }
        Command::Bench {
            shapes,
            quick,
            threads,
            repeat,
            llama,
            no_kernels,
            no_main_job,
            devgen,
            devgen_only,
            processes,
        } => {
            if processes > 1 && std::env::var_os(pto_wsp_cli::bench_median::CHILD_ENV).is_none() {
                let args: Vec<String> = std::env::args().skip(1).collect();
                emit(&pto_wsp_cli::bench_median::over_processes(
                    &args, processes,
                )?)?;
                return Ok(ExitCode::SUCCESS);
            }
            let threads = threads.into_iter().map(usize::from).collect();
            let mut opts = pto_wsp_cli::bench::BenchOptions::new(shapes, quick, threads, repeat);
            if !llama.is_empty() {
                opts.llama = llama.into_iter().filter(|&s| s > 0).collect();
            }
            if no_kernels {
                opts.kernels = None;
            }
            if no_main_job {
                opts.main_job = None;
            }
            if !devgen.is_empty() {
                opts.devgen = devgen.into_iter().filter(|&s| s > 0).collect();
            }
            opts.devgen_only = devgen_only;
            pto_wsp_cli::bench::bench(&opts, emit)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
