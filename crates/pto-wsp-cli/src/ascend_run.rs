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
//!   writes is compared element-wise (`--expect`'s rule and report lines, the simulator's
//!   output as the golden), and the report ends with `PASS` or `FAIL`. `--output NAME=PATH`
//!   writes the simulator's result; `--expect`, `--trace`, `--device-gen` and
//!   `--empty-kernels` are refused (they have no meaning here).
//! - The simulator runs in a child process with a deadline ([`RUN_TIMEOUT`], or
//!   `PTO_WSP_ASCEND_TIMEOUT_S`) and a scheduler watchdog (`SIMPLER_SCHEDULER_TIMEOUT_MS`,
//!   5000 unless set): it never hangs the tool. Its output is kept in the work directory and
//!   its tail shown on failure.

use crate::exec::{RunOptions, RunOutcome};
use crate::{CliError, Loaded};
use pto_wsp::emitters::ascend::AscendTree;
use pto_wsp::kernels::TensorStore;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The simulator run's default deadline.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(600);

/// Tolerances of the comparison when the user gives none: the simulator computes with
/// PTO-ISA's CPU implementations (e.g. `std::exp`) and ours with vectorised ones.
pub const ASCEND_RTOL: f64 = 1e-3;
/// See [`ASCEND_RTOL`].
pub const ASCEND_ATOL: f64 = 1e-4;

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

    /// `python runner.py ARGS` with `g++-15` on `PATH` and the scheduler watchdog set.
    pub fn runner_command(&self, tree: &Path, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.python);
        cmd.arg(tree.join("runner.py")).args(args);
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut paths = vec![self.tools_dir.clone()];
        paths.extend(std::env::split_paths(&path));
        if let Ok(joined) = std::env::join_paths(paths) {
            cmd.env("PATH", joined);
        }
        if std::env::var_os("SIMPLER_SCHEDULER_TIMEOUT_MS").is_none() {
            cmd.env("SIMPLER_SCHEDULER_TIMEOUT_MS", "5000");
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
            "the simulator run failed ({status})\n{}",
            tail(log)
        ))
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
    /// Every tensor's contents before the run (both sides started from these).
    pub inputs: Vec<(String, Vec<f64>)>,
    /// Every written tensor after our CPU run.
    pub cpu_outputs: Vec<(String, Vec<f64>)>,
    /// Every written tensor after the simulator's run.
    pub sim_outputs: Vec<(String, Vec<f64>)>,
    /// Whether every compared tensor is within the tolerance.
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
    let loaded: Loaded = crate::load_source(name, text)?;
    let bindings = crate::bindings_for(&loaded, &opts.binds)?;
    // `--output NAME=PATH`: the simulator's result of a tensor the workload writes.
    let mut wanted = Vec::new();
    for spec in &opts.outputs {
        let (t, path) = spec
            .split_once('=')
            .ok_or_else(|| CliError::plain(format!("`--output {spec}` is not `NAME=PATH.npy`")))?;
        wanted.push((t.trim().to_string(), PathBuf::from(path.trim())));
    }
    // Refusals first, then the toolchain: nothing runs or is written before both are fine.
    let tree = crate::cmd::emit::ascend(&loaded, &bindings, target)?;
    if let Some((t, _)) = wanted.iter().find(|(t, _)| !tree.written.contains(t)) {
        return Err(CliError::plain(format!(
            "`--output {t}=...`: no task of the workload writes tensor `{t}` (written: {})",
            tree.written.join(", ")
        )));
    }
    let tc = Toolchain::find().map_err(CliError::plain)?;
    let work = tempfile::Builder::new()
        .prefix("pto-wsp-ascend-")
        .tempdir()
        .map_err(|e| CliError::plain(format!("cannot create a work directory: {e}")))?;
    let dir_cpu = work.path().join("cpu");
    let (dir_tree, dir_in, dir_out, dir_deps) = (
        work.path().join("tree"),
        work.path().join("in"),
        work.path().join("out"),
        work.path().join("deps"),
    );
    crate::cmd::emit::write_files(&tree.files, &dir_tree)?;

    // Inputs: every tensor, generated from the seed unless given, as .npy for both sides.
    let mut store = TensorStore::new(&loaded.module, &bindings)
        .map_err(|e| CliError::plain(format!("{name}: {e}")))?;
    store.fill_random(opts.seed);
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
    std::fs::create_dir_all(&dir_in)
        .map_err(|e| CliError::plain(format!("cannot create `{}`: {e}", dir_in.display())))?;
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
        let path = dir_in.join(format!("{}.npy", info.name));
        std::fs::write(&path, bytes)
            .map_err(|e| CliError::plain(format!("cannot write `{}`: {e}", path.display())))?;
        inputs.push(format!("{}={}", info.name, path.display()));
    }

    // The simulator.
    let log = work.path().join("runner.log");
    let timeout = std::env::var("PTO_WSP_ASCEND_TIMEOUT_S")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(RUN_TIMEOUT, Duration::from_secs);
    let (o, d) = (
        dir_out.display().to_string(),
        dir_deps.display().to_string(),
    );
    let cmd = tc.runner_command(
        &dir_tree,
        &[&dir_in.display().to_string(), &o, "--deps-dir", &d],
    );
    // On failure the work directory is kept for the user to look at.
    let ran = run_logged(cmd, &log, timeout).and_then(|()| {
        Ok((
            read_tasks(&dir_out.join("tasks.txt"))?,
            read_edges(&dir_deps.join("edges.txt"))?,
            std::fs::read_to_string(dir_deps.join("kinds.txt"))
                .map_err(|e| format!("cannot read the runtime's task kinds: {e}"))?,
        ))
    });
    let (sim_tasks, (sim_edges, sim_explicit_edges), kinds) = match ran {
        Ok(r) => r,
        Err(e) => {
            let kept = work.keep();
            return Err(CliError::plain(format!(
                "{e}\n(work directory kept: {})",
                kept.display()
            )));
        }
    };

    // Our CPU simulation from the same inputs, its outputs compared with the simulator's.
    let default_tol =
        opts.rtol == crate::expect::DEFAULT_RTOL && opts.atol == crate::expect::DEFAULT_ATOL;
    let cpu_opts = RunOptions {
        inputs,
        expect: tree
            .written
            .iter()
            .map(|t| format!("{t}={}", dir_out.join(format!("{t}.npy")).display()))
            .collect(),
        rtol: if default_tol { ASCEND_RTOL } else { opts.rtol },
        atol: if default_tol { ASCEND_ATOL } else { opts.atol },
        outputs: tree
            .written
            .iter()
            .map(|t| format!("{t}={}", dir_cpu.join(format!("{t}.npy")).display()))
            .collect(),
        progress: false,
        ..opts.clone()
    };
    std::fs::create_dir_all(&dir_cpu)
        .map_err(|e| CliError::plain(format!("cannot create `{}`: {e}", dir_cpu.display())))?;
    let cpu = crate::exec::run(name, text, false, &cpu_opts, &mut |_| {})?;
    let cpu_outputs = read_outputs(&dir_cpu, &tree.written).map_err(CliError::plain)?;
    let sim_outputs = read_outputs(&dir_out, &tree.written).map_err(CliError::plain)?;
    for (t, path) in &wanted {
        std::fs::copy(dir_out.join(format!("{t}.npy")), path)
            .map_err(|e| CliError::plain(format!("cannot write `{}`: {e}", path.display())))?;
    }
    let passed = cpu.expectations.iter().all(|e| e.passed);
    let mut report = format!(
        "{name}: target ascend_a2a3sim (simpler, tensormap_and_ringbuffer) against cpu_sim, same inputs (seed {})\n",
        opts.seed
    );
    report.push_str(&format!(
        "  tasks: cpu_sim {} kernel + {} barrier; a2a3sim {} kernel + {} barrier (runtime record)\n",
        cpu.stats.tasks - cpu.stats.barriers,
        cpu.stats.barriers,
        sim_tasks.0,
        sim_tasks.1
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
        "  compared (cpu_sim against a2a3sim, rtol {}, atol {}):\n",
        cpu_opts.rtol, cpu_opts.atol
    ));
    for e in &cpu.expectations {
        report.push_str("  ");
        report.push_str(&e.line);
    }
    report.push_str(if passed { "PASS\n" } else { "FAIL\n" });
    Ok(AscendOutcome {
        tree,
        cpu,
        sim_tasks,
        sim_edges,
        sim_explicit_edges,
        sim_barriers: kinds.trim().chars().map(|c| c == 'b').collect(),
        inputs: input_values,
        cpu_outputs,
        sim_outputs,
        passed,
        report,
    })
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
