//! `pto-wsp run`: a module run on the CPU simulation ([`cpu`]), its plans through
//! Plan-Descriptor-Execute ([`plans`]) or on the Ascend simulator ([`ascend`]), a task-graph
//! program on simulated devices ([`super::ptog`]); with no file, the main job (one LLM decode
//! step checked against an f64 reference, [`crate::llm`]).
//!
//! Promise: the report goes to stdout, notes and timing lines to stderr; a failed `--expect`
//! comparison or reference check fails the command after the report is printed.

pub mod ascend;
pub mod cpu;
mod options;
pub mod plans;
pub mod tolerance;

pub use cpu::{run, run_lowered};
pub use options::{RunOptions, RunOutcome, TaskHook, Times};

use super::{print, read};
use crate::CliError;
use std::path::PathBuf;
use std::process::ExitCode;

/// The arguments of `pto-wsp run`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The `.wsp` file (default: the main job), or a task-graph program (`.ptog`, `.ptoasm`).
    pub file: Option<PathBuf>,
    /// Run the module's plans (Plan-Descriptor-Execute, docs/PDE.md) even when it also has a
    /// workload; a module with plans and no workload or pipeline runs them without it.
    #[arg(long)]
    pub plans: bool,
    /// Bind a symbol, slot or integer tensor (after the file's `//@ bind` defaults).
    #[arg(long = "bind", value_name = "NAME=VALUE")]
    pub binds: Vec<String>,
    /// Worker threads (0 = one per core).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub threads: usize,
    /// Where to run: `cpu_sim` (our CPU simulation), or `ascend_a2a3sim` (emit for the
    /// Ascend runtime simpler, build and run on its simulator, compare every written tensor
    /// with cpu_sim on the same inputs; needs scripts/prepare-simpler.sh).
    #[arg(long, default_value = "cpu_sim")]
    pub target: String,
    /// Seed of the generated inputs (every tensor not bound or given by --input).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub seed: u64,
    /// Read tensor NAME from a numpy .npy file (element type and shape must match).
    #[arg(long = "input", value_name = "NAME=PATH.npy")]
    pub inputs: Vec<String>,
    /// Write tensor NAME to a numpy .npy file after the run.
    #[arg(long = "output", value_name = "NAME=PATH.npy")]
    pub outputs: Vec<String>,
    /// Write the wall-clock span of every task as Chrome trace-event JSON (Perfetto); a run
    /// modelled on a machine (--machine, `trace cycles device(NAME)`) adds the model's
    /// timeline as further processes (cores by kind, orchestrator, scheduler threads).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Debug checks: fail on two conflicting tasks in flight at once, and on any two tasks
    /// whose regions conflict that no path of the run's graph orders (names both and the
    /// `deps` mode). Host runs only; refused with --device-gen and for pipelines.
    #[arg(long)]
    pub check: bool,
    /// Run every kernel that has no implementation as an empty kernel (to measure the
    /// runtime on modules whose kernels are not implemented yet); generates no inputs.
    #[arg(long)]
    pub empty_kernels: bool,
    /// Build the graph and model it (`trace cycles`, --machine) without running any kernel
    /// or generating inputs: for modelling workloads too large to run here.
    #[arg(long)]
    pub model_only: bool,
    /// Model the run on a machine: a shipped machine (`ascend910b`, `ascend910b4`,
    /// `ascend950`, `unit`) or a machine
    /// file (TOML, see docs/BACKENDS.md); overrides `trace cycles device(NAME)`. Reports
    /// the makespan under device and host generation.
    #[arg(long, value_name = "NAME|FILE")]
    pub machine: Option<String>,
    /// Draw the run as an SVG timeline: the device model's lanes (orchestrator,
    /// schedulers, cores) when the run is modelled on a machine, else one lane per worker.
    #[arg(long, value_name = "OUT.svg")]
    pub timeline: Option<PathBuf>,
    /// Draw no progress bar.
    #[arg(long, short)]
    pub quiet: bool,
    /// Device-generation mode: every worker thread interprets the workload bytecode and
    /// runs its own tasks as they are generated (no host-built graph).
    #[arg(long)]
    pub device_gen: bool,
    /// After the run, compare tensor NAME with a numpy .npy golden (numpy.isclose's rule);
    /// prints the errors and PASS or FAIL; exit 1 on FAIL.
    #[arg(long = "expect", value_name = "NAME=PATH.npy")]
    pub expect: Vec<String>,
    /// Relative tolerance of --expect: |actual - expected| <= atol + rtol * |expected|.
    #[arg(long, default_value_t = crate::expect::DEFAULT_RTOL, value_name = "R")]
    pub rtol: f64,
    /// Absolute tolerance of --expect.
    #[arg(long, default_value_t = crate::expect::DEFAULT_ATOL, value_name = "A")]
    pub atol: f64,
    /// Under `trace cycles`: cycles the model charges orchestration per submitted task
    /// (default 0, generation is free); makes start policies and `timing` visible.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub issue_cycles: u64,
    /// Before running, apply a device's rules to every kernel a task may run (memory
    /// hierarchy, buffer capacities, element types, the cube / vector split), as `check
    /// --target ascend_a2a3` does, so a kernel that runs here but not on the device is
    /// refused at its line. Known devices: a2a3.
    #[arg(long, value_name = "DEVICE")]
    pub device_rules: Option<String>,
    /// Fail (writing no --output) when an output tensor has elements no task wrote; by
    /// default that is a warning naming the tensor and the unwritten elements.
    #[arg(long)]
    pub strict: bool,
    /// For a task-graph binary (`.ptog`, docs/ISA.md): a `.wsp` module whose kernels
    /// (bodies and `//@ alias` lines) the binary's kernel nodes run.
    #[arg(long, value_name = "FILE.wsp")]
    pub kernels: Option<PathBuf>,
    /// For a task-graph binary: another device's binary (device 1, 2, ... in order), run at
    /// the same time; devices exchange notifications (`SY_NOTIFY`).
    #[arg(long = "device", value_name = "FILE.ptog")]
    pub devices: Vec<PathBuf>,
    /// For a task-graph binary: cube, vector and AICPU cores of each device (default 2,4,1).
    #[arg(long, value_name = "AIC,AIV,AICPU")]
    pub cores: Option<String>,
}

impl Args {
    /// The run's options (the flags the engines read).
    fn options(&self) -> RunOptions {
        RunOptions {
            binds: self.binds.clone(),
            threads: self.threads,
            trace: self.trace.clone(),
            debug_checks: self.check,
            issue_cycles: self.issue_cycles,
            empty_kernels: self.empty_kernels,
            seed: self.seed,
            inputs: self.inputs.clone(),
            outputs: self.outputs.clone(),
            progress: !self.quiet,
            device_gen: self.device_gen,
            expect: self.expect.clone(),
            rtol: self.rtol,
            atol: self.atol,
            on_task: None,
            strict: self.strict,
            model_only: self.model_only,
            machine: self.machine.clone(),
            timeline: self.timeline.clone(),
            collect_warnings: false,
            skip_coverage: false,
        }
    }
}

/// Runs `pto-wsp run`: the Ascend simulator, the module's plans, or the CPU simulation.
pub fn main(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(code) = super::ptog::run_main(&args)? {
        return Ok(code);
    }
    let (name, text, main_job) = match &args.file {
        Some(f) => (f.display().to_string(), read(f)?, false),
        None => (
            crate::llm::NAME.to_string(),
            crate::llm::SOURCE.to_string(),
            true,
        ),
    };
    let opts = args.options();
    if let Some(device) = &args.device_rules {
        print(&format!(
            "{}\n",
            super::targets::device_rules(&name, &text, device)?
        ))?;
    }
    let target = &args.target;
    if target.starts_with("ascend") {
        let outcome = if main_job {
            ascend::run_main_job_ascend(target, &opts)?
        } else {
            ascend::run_ascend(&name, &text, target, &opts)?
        };
        print(&outcome.report)?;
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
    if !main_job && let Some(outcome) = plans::run(&name, &text, &opts, args.plans)? {
        print(&outcome.report)?;
        check_expectations(&name, &outcome.expectations)?;
        return Ok(ExitCode::SUCCESS);
    }
    on_cpu(&name, &text, main_job, &opts)?;
    Ok(ExitCode::SUCCESS)
}

/// The CPU run of `pto-wsp run`: the main job's header and the report printed, the trace's
/// line on stderr, then the checks.
fn on_cpu(name: &str, text: &str, main_job: bool, opts: &RunOptions) -> anyhow::Result<()> {
    let mut header = Ok(());
    let outcome = run(name, text, main_job, opts, &mut |line| {
        if header.is_ok() {
            header = print(line);
        }
    })?;
    header?;
    print(&outcome.report)?;
    if let Some(path) = &opts.trace {
        let modelled: Vec<String> = outcome
            .stats
            .device
            .iter()
            .map(|d| {
                let g = if d.host_generation { "host" } else { "device" };
                format!("the model on {} ({g} generation)", d.machine)
            })
            .collect();
        eprintln!(
            "wrote {} task spans{} to {}",
            outcome.stats.spans.len(),
            if modelled.is_empty() {
                String::new()
            } else {
                format!(" and {}", modelled.join(" and "))
            },
            path.display()
        );
    }
    check_expectations(name, &outcome.expectations)?;
    if outcome.comparison.is_some_and(|c| !c.passed) {
        return Err(CliError::plain(format!(
            "{name}: the output does not match the reference (see the check line above)"
        ))
        .into());
    }
    Ok(())
}

/// Fails the run, naming the tensors, when an `--expect` golden did not match.
fn check_expectations(
    name: &str,
    expectations: &[crate::expect::ExpectResult],
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
