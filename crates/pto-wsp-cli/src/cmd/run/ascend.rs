//! `pto-wsp run FILE --target ascend_a2a3sim`: the workload emitted for the Ascend runtime,
//! built and run on its simulator through a local simpler checkout, and compared with our CPU
//! simulation on the same inputs.
//!
//! Why: "the same numbers as ours" must be one command, not a recipe: emit, build, run, compare.
//!
//! Promises:
//! - A missing checkout or venv is an error naming what is missing, where it was looked for,
//!   and the one set-up command (`scripts/prepare-simpler.sh`), before anything runs.
//! - Both sides start from the same tensors: every tensor is generated once from `--seed`
//!   (or given with `--input`) and written as `.npy` for both; every tensor the workload
//!   writes is compared: its largest |a2a3sim − cpu_sim| against a tolerance times cpu_sim's
//!   root mean square, the tolerance derived from the arithmetic that computed the tensor
//!   ([`super::tolerance`]; at least [`F32_TOLERANCE`] / [`F16_TOLERANCE`]; integers exactly),
//!   its derivation shown where it raised the floor. The report names
//!   the inputs (seed, files, the file's `//@ fill` lines), each tensor compared with its error
//!   and tolerance, and ends with `PASS` or `FAIL`. The main job ([`run_main_job_ascend`]) is
//!   also checked against its `f64` reference, which decides its verdict. `--output NAME=PATH`
//!   writes the simulator's result; `--expect`, `--trace`, `--device-gen` and
//!   `--empty-kernels` are refused (they have no meaning here).
//! - The simulator runs in a child process with a deadline ([`RUN_TIMEOUT`], or
//!   `PTO_WSP_ASCEND_TIMEOUT_S`) and the runtime's watchdog (no task completing for a budget the
//!   runner scales by the host's CPUs, or `SIMPLER_SCHEDULER_TIMEOUT_MS`): it never hangs the
//!   tool. Its output is kept in the work directory and its tail shown on failure, with what a
//!   watchdog stop means.

use crate::cmd::run::{RunOptions, RunOutcome};
use crate::{CliError, Loaded, llm};
use pto_wsp::emitters::ascend::AscendTree;
use pto_wsp::kernels::TensorStore;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The simulator run's default deadline.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(600);

/// The floor of the comparison's tolerance for an `f32` output: the largest
/// |a2a3sim − cpu_sim| may always be this fraction of the output's root mean square (cpu_sim's);
/// the arithmetic that computed the tensor may raise it ([`super::tolerance`]). The two sides
/// run the same algorithm in `f32` with different implementations of `exp`, `1/√x` and
/// different summation orders.
pub const F32_TOLERANCE: f64 = 1e-5;
/// The same floor for an `f16` / `bf16` output (one rounding of the output type and then some).
pub const F16_TOLERANCE: f64 = 1e-2;

/// One compared tensor: its name, element type, size, largest absolute difference, the root
/// mean square of cpu_sim's values, and the tolerance (a multiple of that RMS; 0 for integers,
/// compared exactly).
#[derive(Debug, Clone)]
pub struct Compared {
    /// The tensor.
    pub name: String,
    /// Its element type.
    pub dtype: pto_wsp::ir::DType,
    /// Its number of elements.
    pub len: usize,
    /// max |a2a3sim − cpu_sim| over its elements (NaN against NaN counts 0; any other
    /// non-finite mismatch is infinite).
    pub max_abs: f64,
    /// √(Σ cpu_sim² / n) over the finite values the run wrote (changed on either side;
    /// every value when none changed): the tensor's scale
    /// ([`super::tolerance::written_rms`]).
    pub rms: f64,
    /// The tolerance as a multiple of `rms` (integers: exact).
    pub tolerance: f64,
    /// How the tolerance was derived, when the arithmetic raised it above its type's floor
    /// ([`super::tolerance::Tolerance::why`]).
    pub derived: Option<String>,
    /// Whether `max_abs ≤ tolerance · rms` (integers: `max_abs == 0`).
    pub passed: bool,
}

impl Compared {
    /// Compares cpu_sim's `want` with the simulator's `got` under `tolerance`.
    pub fn new(
        name: &str,
        dtype: pto_wsp::ir::DType,
        want: &[f64],
        got: &[f64],
        tolerance: f64,
    ) -> Compared {
        Compared::with_input(name, dtype, want, got, None, (tolerance, None))
    }

    /// As [`Compared::new`], the scale taken over the elements either side changed from
    /// `input`, and the tolerance with how it was derived.
    pub fn with_input(
        name: &str,
        dtype: pto_wsp::ir::DType,
        want: &[f64],
        got: &[f64],
        input: Option<&[f64]>,
        (tolerance, derived): (f64, Option<String>),
    ) -> Compared {
        let mut max_abs = if want.len() == got.len() {
            0f64
        } else {
            f64::INFINITY
        };
        for (&a, &b) in want.iter().zip(got) {
            let e = if a.is_nan() && b.is_nan() || a == b {
                0.0
            } else if a.is_finite() && b.is_finite() {
                (a - b).abs()
            } else {
                f64::INFINITY
            };
            max_abs = max_abs.max(e);
        }
        let rms = super::tolerance::written_rms(want, got, input);
        let passed = if dtype.is_integer() {
            max_abs == 0.0
        } else {
            max_abs <= tolerance * rms
        };
        Compared {
            name: name.to_string(),
            dtype,
            len: want.len(),
            max_abs,
            rms,
            tolerance,
            derived,
            passed,
        }
    }

    /// The report line.
    pub fn line(&self) -> String {
        let verdict = if self.passed { "PASS" } else { "FAIL" };
        if self.dtype.is_integer() {
            return format!(
                "{} ({}, {} values): {} differing values; exact: {verdict}",
                self.name,
                self.dtype,
                self.len,
                if self.max_abs == 0.0 { "no" } else { "some" }
            );
        }
        let rel = if self.rms > 0.0 {
            self.max_abs / self.rms
        } else {
            0.0
        };
        let why = self
            .derived
            .as_ref()
            .map_or(String::new(), |s| format!(" ({s})"));
        format!(
            "{} ({}, {} values): max |a2a3sim - cpu_sim| {:.3e} = {:.2e} x RMS (RMS {:.3e} of the written values); tolerance {:.1e} x RMS{why}: {verdict}",
            self.name, self.dtype, self.len, self.max_abs, rel, self.rms, self.tolerance
        )
    }
}

/// Where simpler, PTO-ISA, the venv and the `g++-15` wrapper are.
#[derive(Debug, Clone)]
pub struct Toolchain {
    /// The simpler checkout (`SIMPLER_ROOT`).
    pub simpler_root: PathBuf,
    /// The PTO-ISA checkout (`PTO_ISA_ROOT`).
    pub pto_isa_root: PathBuf,
    /// The venv's Python with simpler installed (`SIMPLER_VENV`).
    pub python: PathBuf,
    /// The directory holding the `g++-15` wrapper (`PTO_WSP_TOOLS_DIR`).
    pub tools_dir: PathBuf,
}

/// The set-up command every "missing" error names.
pub const SETUP: &str = "scripts/prepare-simpler.sh";

fn cache_dir(var: &str, leaf: &str) -> PathBuf {
    match std::env::var_os(var) {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => {
            let home = std::env::var_os("HOME").unwrap_or_default();
            Path::new(&home).join(".cache/pto-wsp").join(leaf)
        }
    }
}

impl Toolchain {
    /// Finds the toolchain from the environment (defaults under `$HOME/.cache/pto-wsp`), or
    /// says what is missing and how to set it up.
    pub fn find() -> Result<Toolchain, String> {
        let tc = Toolchain {
            simpler_root: cache_dir("SIMPLER_ROOT", "simpler"),
            pto_isa_root: cache_dir("PTO_ISA_ROOT", "pto-isa"),
            python: cache_dir("SIMPLER_VENV", "simpler-venv").join("bin/python"),
            tools_dir: cache_dir("PTO_WSP_TOOLS_DIR", "bin"),
        };
        let checks: [(&str, PathBuf); 5] = [
            (
                "simpler (SIMPLER_ROOT)",
                tc.simpler_root.join("python/simpler"),
            ),
            (
                "simpler's a2a3sim runtimes (built by its install)",
                tc.simpler_root.join("build/lib/a2a3/sim"),
            ),
            (
                "PTO-ISA (PTO_ISA_ROOT)",
                tc.pto_isa_root.join("include/pto/pto-inst.hpp"),
            ),
            (
                "the venv with simpler installed (SIMPLER_VENV)",
                tc.python.clone(),
            ),
            (
                "the g++-15 wrapper (PTO_WSP_TOOLS_DIR)",
                tc.tools_dir.join("g++-15"),
            ),
        ];
        for (what, path) in checks {
            if !path.exists() {
                return Err(format!(
                    "the Ascend simulator target needs simpler and PTO-ISA: {what} is missing \
                     (looked for `{}`); set everything up with one command: {SETUP} (from the \
                     pto-wsp repository; SIMPLER_ROOT, PTO_ISA_ROOT, SIMPLER_VENV and \
                     PTO_WSP_TOOLS_DIR choose the places)",
                    path.display()
                ));
            }
        }
        Ok(tc)
    }

    /// `python runner.py ARGS` with `g++-15` on `PATH` (the runner sets the simulator's
    /// watchdog budget for this host unless `SIMPLER_SCHEDULER_TIMEOUT_MS` is set).
    pub fn runner_command(&self, tree: &Path, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.python);
        cmd.arg(tree.join("runner.py")).args(args);
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut paths = vec![self.tools_dir.clone()];
        paths.extend(std::env::split_paths(&path));
        if let Ok(joined) = std::env::join_paths(paths) {
            cmd.env("PATH", joined);
        }
        cmd.env("PTO_ISA_ROOT", &self.pto_isa_root);
        cmd.arg("--pto-isa-root").arg(&self.pto_isa_root);
        cmd
    }
}

/// Runs `cmd` with stdout and stderr to `log`, killing it after `timeout`. Returns whether it
/// succeeded, and the log's last lines.
pub fn run_logged(mut cmd: Command, log: &Path, timeout: Duration) -> Result<(), String> {
    let file =
        std::fs::File::create(log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
    let err = file.try_clone().map_err(|e| e.to_string())?;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("cannot start {cmd:?}: {e}"))?;
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if start.elapsed() > timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "the simulator run did not finish within {} s and was stopped\n{}",
                    timeout.as_secs(),
                    tail(log)
                ));
            }
            // Polling a child process (not synchronising threads): a coarse period is enough.
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => return Err(format!("waiting for the simulator run: {e}")),
        }
    };
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "the simulator run failed ({status})\n{}{}",
            tail(log),
            watchdog_hint(log)
        ))
    }
}

/// Where the tasks of each kernel named by a failed check (`error: kernel `K`: ...` lines of the
/// runner) are made: a note per kernel listing its `task` statements' `file:line:column`.
fn failed_task_places(loaded: &Loaded, log_tail: &str) -> String {
    let mut kernels: Vec<&str> = Vec::new();
    for line in log_tail.lines() {
        let Some(rest) = line.trim().strip_prefix("error: kernel `") else {
            continue;
        };
        if let Some((k, _)) = rest.split_once('`')
            && !kernels.contains(&k)
        {
            kernels.push(k);
        }
    }
    let mut out = String::new();
    for k in kernels {
        let mut places = Vec::new();
        let mut visit = |body: &[pto_wsp::ir::Stmt]| task_places(body, k, &mut places);
        for w in &loaded.module.workloads {
            visit(&w.body);
        }
        for p in &loaded.module.pipelines {
            for q in &p.processes {
                visit(&q.body);
            }
        }
        if !places.is_empty() {
            let at: Vec<String> = places.iter().map(|l| loaded.source.position(*l)).collect();
            out.push_str(&format!(
                "\nnote: the tasks of kernel `{k}` are made at {}",
                at.join(", ")
            ));
        }
    }
    out
}

/// The locations of the `task K(...)` statements under `body`.
fn task_places(body: &[pto_wsp::ir::Stmt], k: &str, out: &mut Vec<pto_wsp::ir::Loc>) {
    use pto_wsp::ir::StmtKind as S;
    for s in body {
        match &s.kind {
            S::Loop { body, .. }
            | S::Select { body, .. }
            | S::While { body, .. }
            | S::Consume { body, .. }
            | S::Combine(body)
            | S::Sequential(body) => task_places(body, k, out),
            S::Cond {
                then_body,
                else_body,
                ..
            } => {
                task_places(then_body, k, out);
                task_places(else_body, k, out);
            }
            S::Task(t) if t.kernel.name == k => out.push(s.loc),
            _ => {}
        }
    }
}

/// What a stop by the runtime's watchdog means, when the log shows one with tasks still running.
fn watchdog_hint(log: &Path) -> &'static str {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    if text.contains("SCHEDULER_TIMEOUT") && text.contains("running-stalled") {
        "\nnote: the runtime's watchdog saw no task complete within its budget while kernels were \
         running: a kernel that hangs, or kernels slower than the budget on this host (the \
         simulator runs every core's kernel as a host thread); rerun with a larger \
         SIMPLER_SCHEDULER_TIMEOUT_MS (milliseconds) to tell them apart"
    } else {
        ""
    }
}

/// The last 25 lines of a log, without simpler's timing chatter.
fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.contains("[TIMING]") && !l.contains("warning:") && !l.trim().is_empty())
        .collect();
    let from = lines.len().saturating_sub(25);
    format!(
        "last lines of {}:\n{}",
        log.display(),
        lines[from..].join("\n")
    )
}

/// What [`run_ascend`] gives.
#[derive(Debug)]
pub struct AscendOutcome {
    /// The emitted tree.
    pub tree: AscendTree,
    /// The CPU run compared with the simulator's outputs.
    pub cpu: RunOutcome,
    /// Kernel and barrier tasks the simulator ran (from the runtime's dependency record).
    pub sim_tasks: (u64, u64),
    /// Edges the runtime recorded `(pred, succ)`, by submission position.
    pub sim_edges: Vec<(u32, u32)>,
    /// Of those, the ones the orchestration declared (write-after-read, structural order).
    pub sim_explicit_edges: usize,
    /// Whether each task the runtime recorded is a barrier (a dummy task), in submission order.
    pub sim_barriers: Vec<bool>,
    /// Whether each task the runtime recorded continues the task before it (a later part of a
    /// kernel split into cube and vector parts), in submission order.
    pub sim_later_parts: Vec<bool>,
    /// Every tensor's contents before the run (both sides started from these).
    pub inputs: Vec<(String, Vec<f64>)>,
    /// Every written tensor after our CPU run.
    pub cpu_outputs: Vec<(String, Vec<f64>)>,
    /// Every written tensor after the simulator's run.
    pub sim_outputs: Vec<(String, Vec<f64>)>,
    /// Each written tensor compared.
    pub compared: Vec<Compared>,
    /// The main job's output against its `f64` reference (the main job only).
    pub reference: Option<llm::Comparison>,
    /// Wall time of the simulator's run (the runner: build of the kernels and orchestration,
    /// then the run).
    pub sim_wall: Duration,
    /// Whether every compared tensor is within the tolerance; for the main job, whether its
    /// output is within its `f64` reference's tolerance (the comparisons with cpu_sim are then
    /// reported beside it).
    pub passed: bool,
    /// The report to print.
    pub report: String,
}

/// Emits `text` for `target`, runs it on the simulator and on our CPU simulation from the same
/// inputs, and compares every written tensor.
pub fn run_ascend(
    name: &str,
    text: &str,
    target: &str,
    opts: &RunOptions,
) -> Result<AscendOutcome, CliError> {
    run_ascend_with(name, text, target, opts, false)
}

/// [`run_ascend`] of the main job (`pto-wsp run --target ascend_a2a3sim` with no file): the
/// simulator's output also checked against the job's `f64` reference ([`llm::reference`],
/// [`llm::TOLERANCE`]), computed from the inputs both sides started from.
pub fn run_main_job_ascend(target: &str, opts: &RunOptions) -> Result<AscendOutcome, CliError> {
    run_ascend_with(llm::NAME, llm::SOURCE, target, opts, true)
}

/// [`run_ascend`], and for the main job the reference check too.
fn run_ascend_with(
    name: &str,
    text: &str,
    target: &str,
    opts: &RunOptions,
    main_job: bool,
) -> Result<AscendOutcome, CliError> {
    refused(target, opts)?;
    let job = Job::load(name, text, opts, main_job)?;
    let (loaded, bindings) = (&job.loaded, &job.bindings);
    let wanted = wanted_outputs(opts)?;
    // Refusals first, then the toolchain: nothing runs or is written before both are fine.
    // The tree's kernels naming built-ins carry the kernel library's bodies; cpu_sim runs the
    // built-ins themselves (lowered apart only when the library gave any body).
    let (emitted, emitted_plan) = crate::cmd::emit::with_library(loaded)?;
    let tree = crate::cmd::emit::ascend(&emitted, &emitted_plan, bindings, target)?;
    unwritten_output(&wanted, &tree)?;
    let tc = Toolchain::find().map_err(CliError::plain)?;
    let work = Work::new()?;
    crate::cmd::emit::write_files(&tree.files, &work.tree)?;
    let written = write_inputs(loaded, bindings, opts, job.dims.is_some(), &work.input)?;
    let (inputs, input_values) = (written.specs, written.values);
    let sim_start = Instant::now();
    let (sim, work) = simulate_keeping(&tc, work, loaded)?;
    let sim_wall = sim_start.elapsed();
    // Our CPU simulation from the same inputs, its outputs compared with the simulator's.
    let plan = if emitted.module == loaded.module {
        emitted_plan
    } else {
        pto_wsp::driver::lower(loaded)?
    };
    let cpu = run_cpu(
        loaded,
        plan,
        &cpu_options(opts, &tree, &work, inputs),
        &work,
    )?;
    let cpu_outputs = read_outputs(&work.cpu, &tree.written).map_err(CliError::plain)?;
    let sim_outputs = read_outputs(&work.out, &tree.written).map_err(CliError::plain)?;
    for (t, path) in &wanted {
        copy_output(&work, t, path)?;
    }
    let compared = compare(
        loaded,
        bindings,
        opts,
        &input_values,
        &cpu_outputs,
        &sim_outputs,
    );
    let reference = match (&job.dims, &written.store) {
        (Some(d), Some(store)) => Some(against_reference(store, d, &sim_outputs)?),
        _ => None,
    };
    // The main job is judged by its f64 reference (its purpose); its tensors' differences from
    // cpu_sim are reported beside it. Every other module by every written tensor.
    let beyond = compared.iter().filter(|c| !c.passed).count();
    let passed = match &reference {
        Some(c) => c.passed,
        None => beyond == 0,
    };
    let mut report = report(
        name,
        opts,
        &written.shaped,
        &tree,
        &cpu,
        &sim,
        sim_wall,
        &compared,
    );
    if let Some(summary) = &job.expanded {
        let at = report.find('\n').map_or(report.len(), |i| i + 1);
        report.insert_str(at, summary);
    }
    if let Some(c) = &reference {
        with_reference(&mut report, c, beyond, passed);
    }
    let (sim_tasks, (sim_edges, sim_explicit_edges), kinds) = sim;
    Ok(AscendOutcome {
        tree,
        cpu,
        sim_tasks,
        sim_edges,
        sim_explicit_edges,
        sim_barriers: kinds.trim().chars().map(|c| c == 'b').collect(),
        sim_later_parts: kinds.trim().chars().map(|c| c == 'p').collect(),
        inputs: input_values,
        cpu_outputs,
        sim_outputs,
        compared,
        reference,
        sim_wall,
        passed,
        report,
    })
}

/// Refuses an `--output` of a tensor no task of the tree writes.
fn unwritten_output(wanted: &[(String, PathBuf)], tree: &AscendTree) -> Result<(), CliError> {
    match wanted.iter().find(|(t, _)| !tree.written.contains(t)) {
        Some((t, _)) => Err(CliError::plain(format!(
            "`--output {t}=...`: no task of the workload writes tensor `{t}` (written: {})",
            tree.written.join(", ")
        ))),
        None => Ok(()),
    }
}

/// Copies the simulator's output of tensor `t` to `path` (an `--output`).
fn copy_output(work: &Work, t: &str, path: &Path) -> Result<(), CliError> {
    std::fs::copy(work.out.join(format!("{t}.npy")), path)
        .map_err(|e| CliError::plain(format!("cannot write `{}`: {e}", path.display())))?;
    Ok(())
}

/// A module loaded for an Ascend run, under its bindings.
struct Job {
    /// The module (a module of plans: as its task batches).
    loaded: Loaded,
    bindings: pto_wsp::ir::Bindings,
    /// For a module of plans, the summary of the task batches they expanded to.
    expanded: Option<String>,
    /// The main job's dimensions, when this is the main job.
    dims: Option<llm::Dims>,
}

impl Job {
    /// Loads `text` and binds it under `opts`.
    fn load(name: &str, text: &str, opts: &RunOptions, main_job: bool) -> Result<Job, CliError> {
        let loaded: Loaded = crate::load_source(name, text)?;
        let bindings = crate::bindings_for(&loaded, &opts.binds)?;
        // A module of plans runs as task batches: its plans expanded at the bindings (cpu_sim
        // runs the same tasks as a workload; `pto-wsp run` without a target runs the plans
        // themselves).
        let (loaded, expanded) = match pto_wsp::driver::plans_as_tasks(&loaded, &bindings)? {
            Some((l, t)) => {
                let summary = pto_wsp::driver::plan_tasks_summary(&l.source, &t);
                (l, Some(summary))
            }
            None => (loaded, None),
        };
        let dims = if main_job {
            Some(llm::Dims::from_bindings(&bindings)?)
        } else {
            None
        };
        Ok(Job {
            loaded,
            bindings,
            expanded,
            dims,
        })
    }
}

/// [`simulate`], keeping the work directory for the user to look at when it fails.
fn simulate_keeping(
    tc: &Toolchain,
    work: Work,
    loaded: &Loaded,
) -> Result<(Simulated, Work), CliError> {
    match simulate(tc, &work) {
        Ok(r) => Ok((r, work)),
        Err(e) => {
            let kept = work.dir.keep();
            Err(CliError::plain(format!(
                "{e}{}\n(work directory kept: {})",
                failed_task_places(loaded, &e),
                kept.display()
            )))
        }
    }
}

/// Our CPU simulation of `plan` under `cpu_opts`, writing its outputs into the work directory.
fn run_cpu(
    loaded: &Loaded,
    plan: pto_wsp::LoweredPlan,
    cpu_opts: &RunOptions,
    work: &Work,
) -> Result<RunOutcome, CliError> {
    std::fs::create_dir_all(&work.cpu)
        .map_err(|e| CliError::plain(format!("cannot create `{}`: {e}", work.cpu.display())))?;
    crate::cmd::run::run_lowered(
        loaded,
        plan,
        false,
        cpu_opts,
        &mut |_| {},
        std::time::Instant::now(),
    )
}

/// Puts the main job's reference comparison `c` before the verdict line, which stays last.
fn with_reference(report: &mut String, c: &llm::Comparison, beyond: usize, passed: bool) {
    report.truncate(report.trim_end().rfind('\n').map_or(0, |i| i + 1));
    report.push_str(&reference_line(c));
    if beyond > 0 {
        report.push_str(&format!(
            "  note: {beyond} written tensor(s) differ from cpu_sim beyond the tolerance above \
             (both sides are f32 sums of up to ffn terms in different orders, and a computed \
             f32 rounded into the f16 cache may land one f16 step apart); the main job is \
             judged by its f64 reference\n"
        ));
    }
    report.push_str(if passed { "PASS\n" } else { "FAIL\n" });
}

/// The main job's output `X[layers]` on the simulator against its `f64` reference, computed
/// from the inputs both sides started from.
fn against_reference(
    store: &TensorStore,
    dims: &llm::Dims,
    sim_outputs: &[(String, Vec<f64>)],
) -> Result<llm::Comparison, CliError> {
    let x = sim_outputs
        .iter()
        .find(|(t, _)| t == "X")
        .map(|(_, v)| v)
        .ok_or_else(|| CliError::plain("the main job's tree does not write `X`"))?;
    let n = dims.nreq * dims.hidden;
    let got: Vec<f32> = x[dims.layers * n..(dims.layers + 1) * n]
        .iter()
        .map(|&v| v as f32)
        .collect();
    let x0 = llm::input(store, dims)?;
    let want = llm::reference(store, dims, &x0, &std::sync::atomic::AtomicU64::new(0))?;
    Ok(llm::compare(&got, &want))
}

/// The report's line of the reference check.
fn reference_line(c: &llm::Comparison) -> String {
    format!(
        "  reference: X[layers] ({} values) on a2a3sim against the f64 reference: max |error| \
         {:.3e} = {:.2e} x RMS (RMS {:.3e}); tolerance {:.0e} x RMS: {}\n",
        c.elements,
        c.max_abs,
        c.max_rel_rms,
        c.rms,
        llm::TOLERANCE,
        if c.passed { "PASS" } else { "FAIL" }
    )
}

/// Refuses a target other than the simulator and the flags that mean nothing here.
fn refused(target: &str, opts: &RunOptions) -> Result<(), CliError> {
    if target != "ascend_a2a3sim" {
        return Err(CliError::plain(format!(
            "`pto-wsp run --target {target}` runs on the simulator only (`ascend_a2a3sim`); for a \
             device, emit with `pto-wsp emit ascend --target ascend_a2a3 FILE -o DIR` and run \
             `python DIR/runner.py IN OUT --platform a2a3` where CANN is installed"
        )));
    }
    for (flag, given) in [
        ("--expect", !opts.expect.is_empty()),
        ("--trace", opts.trace.is_some()),
        ("--device-gen", opts.device_gen),
        ("--empty-kernels", opts.empty_kernels),
    ] {
        if given {
            return Err(CliError::plain(format!(
                "`{flag}` is not supported with `--target {target}` (the run compares every \
                 written tensor with cpu_sim itself)"
            )));
        }
    }
    Ok(())
}

/// `--output NAME=PATH`: the simulator's result of a tensor the workload writes.
fn wanted_outputs(opts: &RunOptions) -> Result<Vec<(String, PathBuf)>, CliError> {
    let mut wanted = Vec::new();
    for spec in &opts.outputs {
        let (t, path) = spec
            .split_once('=')
            .ok_or_else(|| CliError::plain(format!("`--output {spec}` is not `NAME=PATH.npy`")))?;
        wanted.push((t.trim().to_string(), PathBuf::from(path.trim())));
    }
    Ok(wanted)
}

/// The run's work directory: the emitted tree, the inputs, the simulator's outputs and
/// dependency record, our CPU run's outputs.
struct Work {
    dir: tempfile::TempDir,
    tree: PathBuf,
    input: PathBuf,
    out: PathBuf,
    deps: PathBuf,
    cpu: PathBuf,
    log: PathBuf,
}

impl Work {
    fn new() -> Result<Work, CliError> {
        let dir = tempfile::Builder::new()
            .prefix("pto-wsp-ascend-")
            .tempdir()
            .map_err(|e| CliError::plain(format!("cannot create a work directory: {e}")))?;
        let at = |p: &str| dir.path().join(p);
        Ok(Work {
            tree: at("tree"),
            input: at("in"),
            out: at("out"),
            deps: at("deps"),
            cpu: at("cpu"),
            log: at("runner.log"),
            dir,
        })
    }
}

/// Every tensor, generated from the seed (as the file's `//@ fill` lines say) unless given,
/// written as `.npy` into `dir` for both sides.
struct Inputs {
    /// The `--input` specs of the CPU run.
    specs: Vec<String>,
    /// Every tensor's values.
    values: Vec<(String, Vec<f64>)>,
    /// The tensors themselves, kept for the main job's reference.
    store: Option<TensorStore>,
    /// How generated values were shaped, for the report (empty: plain seeded values).
    shaped: String,
}

/// See [`Inputs`].
fn write_inputs(
    loaded: &Loaded,
    bindings: &pto_wsp::ir::Bindings,
    opts: &RunOptions,
    keep: bool,
    dir: &Path,
) -> Result<Inputs, CliError> {
    let name = &loaded.source.name;
    let mut store = TensorStore::new(&loaded.module, bindings)
        .map_err(|e| CliError::plain(format!("{name}: {e}")))?;
    store.fill_random(opts.seed);
    let fills = pto_wsp::driver::fills::fill_lines(loaded)?;
    pto_wsp::driver::fills::apply(&mut store, &fills, &[])
        .map_err(|e| CliError::plain(format!("{name}: {e}")))?;
    let shaped = if fills.is_empty() {
        String::new()
    } else {
        let names: Vec<&str> = fills.iter().map(|f| f.tensor.as_str()).collect();
        format!(" ({} as the file's `//@ fill` lines say)", names.join(", "))
    };
    for spec in &opts.inputs {
        let (tensor, path) = spec
            .split_once('=')
            .ok_or_else(|| CliError::plain(format!("`--input {spec}` is not `NAME=PATH.npy`")))?;
        let bytes = std::fs::read(path).map_err(|e| {
            CliError::plain(format!("in `--input {spec}`: cannot read `{path}`: {e}"))
        })?;
        let array = pto_wsp::kernels::npy::NpyArray::parse(&bytes)
            .map_err(|e| CliError::plain(format!("in `--input {spec}`: {e}")))?;
        store
            .load_npy(tensor, &array)
            .map_err(|e| CliError::plain(format!("in `--input {spec}`: {e}")))?;
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| CliError::plain(format!("cannot create `{}`: {e}", dir.display())))?;
    let mut inputs = Vec::new();
    let mut input_values = Vec::new();
    for (t, info) in store.infos().iter().enumerate() {
        input_values.push((
            info.name.clone(),
            crate::expect::values(info.dtype, store.bytes(t as u32)),
        ));
        let bytes = store
            .to_npy(&info.name)
            .map_err(|e| CliError::plain(format!("{name}: {e}")))?;
        let path = dir.join(format!("{}.npy", info.name));
        std::fs::write(&path, bytes)
            .map_err(|e| CliError::plain(format!("cannot write `{}`: {e}", path.display())))?;
        inputs.push(format!("{}={}", info.name, path.display()));
    }
    Ok(Inputs {
        specs: inputs,
        values: input_values,
        store: keep.then_some(store),
        shaped,
    })
}

/// What the simulator's run recorded: kernel and barrier tasks, edges (and how many the
/// orchestration declared), each task's kind.
type Simulated = ((u64, u64), (Vec<(u32, u32)>, usize), String);

/// Runs the emitted tree on the simulator (under the deadline) and reads its record.
fn simulate(tc: &Toolchain, work: &Work) -> Result<Simulated, String> {
    let timeout = std::env::var("PTO_WSP_ASCEND_TIMEOUT_S")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(RUN_TIMEOUT, Duration::from_secs);
    let (o, d) = (
        work.out.display().to_string(),
        work.deps.display().to_string(),
    );
    let cmd = tc.runner_command(
        &work.tree,
        &[&work.input.display().to_string(), &o, "--deps-dir", &d],
    );
    run_logged(cmd, &work.log, timeout).map_err(|e| {
        if e.contains("SCHEDULER_TIMEOUT") {
            let ms =
                std::env::var("SIMPLER_SCHEDULER_TIMEOUT_MS").unwrap_or_else(|_| "5000".into());
            format!(
                "{e}\nnote: the runtime's scheduler watchdog ({ms} ms without a task completing) \
                 also stops a run whose kernels are merely slow in the simulation (large \
                 products, a loaded machine): run again with SIMPLER_SCHEDULER_TIMEOUT_MS=60000 \
                 to tell the two apart"
            )
        } else {
            e
        }
    })?;
    Ok((
        read_tasks(&work.out.join("tasks.txt"))?,
        read_edges(&work.deps.join("edges.txt"))?,
        std::fs::read_to_string(work.deps.join("kinds.txt"))
            .map_err(|e| format!("cannot read the runtime's task kinds: {e}"))?,
    ))
}

/// The CPU run's options: the same inputs, every written tensor written for [`read_outputs`]
/// (the comparison is [`compare`]'s).
fn cpu_options(
    opts: &RunOptions,
    tree: &AscendTree,
    work: &Work,
    inputs: Vec<String>,
) -> RunOptions {
    RunOptions {
        inputs,
        expect: Vec::new(),
        outputs: tree
            .written
            .iter()
            .map(|t| format!("{t}={}", work.cpu.join(format!("{t}.npy")).display()))
            .collect(),
        progress: false,
        ..opts.clone()
    }
}

/// Every written tensor, a2a3sim's values against cpu_sim's: its largest difference against a
/// tolerance times cpu_sim's RMS (derived from the arithmetic, [`super::tolerance`], with the
/// floors [`F32_TOLERANCE`] and [`F16_TOLERANCE`]; `--rtol`, when given, replaces the
/// multiple), integers exactly.
fn compare(
    loaded: &Loaded,
    bindings: &pto_wsp::ir::Bindings,
    opts: &RunOptions,
    inputs: &[(String, Vec<f64>)],
    cpu_outputs: &[(String, Vec<f64>)],
    sim_outputs: &[(String, Vec<f64>)],
) -> Vec<Compared> {
    let user_tol = (opts.rtol != crate::expect::DEFAULT_RTOL).then_some(opts.rtol);
    let derived =
        super::tolerance::tolerances(&loaded.module, &aliases_of(loaded), bindings, floor);
    cpu_outputs
        .iter()
        .zip(sim_outputs)
        .map(|((t, want), (_, got))| {
            let dtype = loaded
                .module
                .tensors
                .iter()
                .find(|d| d.name.name == *t)
                .map_or(pto_wsp::ir::DType::F32, |d| d.dtype);
            let tol = match (dtype, user_tol) {
                (d, _) if !d.is_float() => (0.0, None),
                (_, Some(u)) => (u, None),
                (d, None) => derived
                    .get(t)
                    .map_or((floor(d), None), |tol| (tol.value, tol.why())),
            };
            let input = inputs
                .iter()
                .find(|(n, _)| n == t)
                .map(|(_, v)| v.as_slice());
            Compared::with_input(t, dtype, want, got, input, tol)
        })
        .collect()
}

/// The tolerance floor of a float type: [`F32_TOLERANCE`] for `f32`, [`F16_TOLERANCE`] for
/// the 16-bit types.
pub fn floor(d: pto_wsp::ir::DType) -> f64 {
    if d == pto_wsp::ir::DType::F32 {
        F32_TOLERANCE
    } else {
        F16_TOLERANCE
    }
}

/// The file's kernel aliases (`//@ alias NAME=BUILTIN`; checked when the module was loaded).
fn aliases_of(loaded: &Loaded) -> std::collections::BTreeMap<String, String> {
    pto_wsp::driver::binds::directive_lines(&loaded.source.text, pto_wsp::driver::aliases::PREFIX)
        .iter()
        .filter_map(|l| l.spec.split_once('='))
        .map(|(n, b)| (n.trim().to_string(), b.trim().to_string()))
        .collect()
}

/// What `run --target ascend_a2a3sim` prints; `shaped` says how generated inputs were shaped
/// (the file's `//@ fill` lines, the main job's preparation).
#[allow(clippy::too_many_arguments)]
fn report(
    name: &str,
    opts: &RunOptions,
    shaped: &str,
    tree: &AscendTree,
    cpu: &RunOutcome,
    sim: &Simulated,
    sim_wall: Duration,
    compared: &[Compared],
) -> String {
    let (sim_tasks, (sim_edges, sim_explicit_edges), _) = sim;
    let passed = compared.iter().all(|c| c.passed);
    let given: Vec<&str> = opts
        .inputs
        .iter()
        .map(|s| s.split_once('=').map_or(s.as_str(), |(t, _)| t.trim()))
        .collect();
    let mut report = format!(
        "{name}: target ascend_a2a3sim (simpler, tensormap_and_ringbuffer) against cpu_sim\n"
    );
    report.push_str(&if given.is_empty() {
        format!(
            "  inputs: every tensor generated from seed {}{shaped}, the same for both sides\n",
            opts.seed
        )
    } else {
        format!(
            "  inputs: {} from files ({}), the others generated from seed {}{shaped}; the same for both sides\n",
            given.join(", "),
            opts.inputs.join(", "),
            opts.seed
        )
    });
    report.push_str(&format!(
        "  tasks: cpu_sim {} kernel + {} barrier; a2a3sim {} kernel + {} barrier (runtime record{})\n",
        cpu.stats.tasks - cpu.stats.barriers,
        cpu.stats.barriers,
        sim_tasks.0,
        sim_tasks.1,
        if tree.part_tasks != tree.kernel_tasks {
            format!(
                "; {} tasks of kernels using both cores run as their cube and vector parts",
                tree.kernel_tasks
            )
        } else {
            String::new()
        }
    ));
    report.push_str(&format!(
        "  edges: ours {}; runtime recorded {} ({} declared explicitly by the orchestration)\n",
        tree.edges.len(),
        sim_edges.len(),
        sim_explicit_edges
    ));
    for n in &tree.notes {
        report.push_str(&format!("  note: {n}\n"));
    }
    report.push_str(&format!(
        "  a2a3sim wall time: {:.1} s (runner: kernels and orchestration built, then run)\n",
        sim_wall.as_secs_f64()
    ));
    let names: Vec<&str> = compared.iter().map(|c| c.name.as_str()).collect();
    report.push_str(&format!(
        "  compared {} written tensor(s) ({}), a2a3sim against cpu_sim: max |difference| \
         against a tolerance times cpu_sim's RMS over the values the run wrote (derived per \
         tensor: K x f32 eps per reduction of K terms plus the tolerances of the written tensors \
         it is computed from, at least {F32_TOLERANCE:.0e} for f32 and {F16_TOLERANCE:.0e} for \
         f16 / bf16; integers exact):\n",
        compared.len(),
        names.join(", ")
    ));
    for c in compared {
        report.push_str("    ");
        report.push_str(&c.line());
        report.push('\n');
    }
    report.push_str(if passed { "PASS\n" } else { "FAIL\n" });
    report
}

/// `DIR/NAME.npy` for every name, as `f64` values.
fn read_outputs(dir: &Path, names: &[String]) -> Result<Vec<(String, Vec<f64>)>, String> {
    names
        .iter()
        .map(|n| {
            let path = dir.join(format!("{n}.npy"));
            let bytes = std::fs::read(&path)
                .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
            let a = pto_wsp::kernels::npy::NpyArray::parse(&bytes)
                .map_err(|e| format!("`{}`: {e}", path.display()))?;
            let dtype = a.dtype().ok_or_else(|| {
                format!("`{}`: unexpected element type {}", path.display(), a.descr)
            })?;
            Ok((n.clone(), crate::expect::values(dtype, &a.data)))
        })
        .collect()
}

fn read_tasks(path: &Path) -> Result<(u64, u64), String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
    let get = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| format!("`{}` has no `{key}` line", path.display()))
    };
    Ok((get("kernel_tasks")?, get("barrier_tasks")?))
}

fn read_edges(path: &Path) -> Result<(Vec<(u32, u32)>, usize), String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
    let mut edges = Vec::new();
    let mut explicit = 0;
    for l in text.lines() {
        let mut it = l.split_whitespace();
        match (
            it.next().and_then(|x| x.parse::<u32>().ok()),
            it.next().and_then(|x| x.parse::<u32>().ok()),
        ) {
            (Some(p), Some(s)) => edges.push((p, s)),
            _ => return Err(format!("`{}`: bad edge line `{l}`", path.display())),
        }
        explicit += usize::from(it.next() == Some("explicit"));
    }
    Ok((edges, explicit))
}
