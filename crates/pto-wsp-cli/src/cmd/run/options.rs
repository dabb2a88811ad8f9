//! What `pto-wsp run` is asked to do ([`RunOptions`]) and what a run gives back
//! ([`RunOutcome`]), shared by the CPU run, the plan run, the Ascend run and the benches.

use crate::llm;
use pto_wsp::cpu::RunStats;
use std::path::PathBuf;
use std::sync::Arc;

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
    /// `--model-only`: build the graph and model it, running no kernel (and generating no
    /// inputs).
    pub model_only: bool,
    /// `--machine NAME|FILE`: model the run on this machine (overrides the schedule's
    /// `trace cycles device(NAME)`).
    pub machine: Option<String>,
    /// `--timeline OUT.svg`: draw the run (the device model's, else the wall clock's).
    pub timeline: Option<PathBuf>,
    /// Keep the run's warnings and notes in [`RunOutcome::warnings`] instead of printing them
    /// (a search's candidates, reported once by the search).
    pub collect_warnings: bool,
    /// Skip the check that every output tensor was fully written (a search whose candidates
    /// differ only in schedule checked their common tasks once).
    pub skip_coverage: bool,
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
            model_only: false,
            machine: None,
            timeline: None,
            collect_warnings: false,
            skip_coverage: false,
        }
    }
}

/// Wall-clock milliseconds of a run's phases.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Times {
    /// Parse, validate, compile, allocate the tensors and fill the small ones (large generated
    /// inputs are made during the run, where first read).
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
    /// The warnings (`warning: ...`: the output-coverage check's) and notes (`note: ...`) of
    /// the run, without the file's name, when [`RunOptions::collect_warnings`] kept them from
    /// stderr; else empty.
    pub warnings: Vec<String>,
}
