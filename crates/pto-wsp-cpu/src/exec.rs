//! What runs a task ([`Exec`]), and how a run fails ([`ExecError`]).

use pto_wsp_graph::TaskId;
use pto_wsp_graph::order_check::{BoxText, Unordered};
use pto_wsp_ir::{DepsMode, Loc};
use std::fmt;

/// Runs one task on a worker. Implemented by the kernel executor (kernels from a registry) and
/// by benchmark executors (empty kernels). Must not panic: an implementation that calls user
/// code catches panics and reports them as a [`TaskFailure`] (the engine also catches a panic
/// that escapes, as an internal error).
pub trait Exec: Sync {
    /// Runs `task` on worker `worker`.
    fn run(&self, task: TaskId, worker: usize) -> Result<(), TaskFailure>;
}

/// An executor whose every task does nothing (benchmarks of runtime overhead).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoopExec;

impl Exec for NoopExec {
    #[inline]
    fn run(&self, _task: TaskId, _worker: usize) -> Result<(), TaskFailure> {
        Ok(())
    }
}

/// Why one task failed, as its executor reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskFailure {
    /// The task's number as the user knows it (the expander's task index), if it differs from
    /// the graph's task id.
    pub index: Option<u32>,
    /// The kernel that ran.
    pub kernel: String,
    /// What went wrong.
    pub message: String,
    /// Whether the kernel panicked (rather than returning an error).
    pub panicked: bool,
}

/// Why a run failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ExecError {
    /// A kernel returned an error or panicked.
    #[error("task #{task} (kernel `{kernel}`) {}: {message}", if *panicked { "panicked" } else { "failed" })]
    Kernel {
        /// The task (the expander's task index when the run came from a module).
        task: u32,
        /// The kernel.
        kernel: String,
        /// What went wrong.
        message: String,
        /// Whether it panicked.
        panicked: bool,
    },
    /// The task window was full in `abort` mode.
    #[error(
        "task window of {capacity} tasks is full ({in_flight} in flight) and its mode is `abort`; raise `task_window` or use `stall`"
    )]
    WindowFull {
        /// The window size.
        capacity: usize,
        /// Tasks in flight when it overflowed.
        in_flight: usize,
    },
    /// Two tasks touched conflicting regions at the same time (debug checks).
    #[error("debug checks: {0}")]
    Conflict(String),
    /// Two tasks whose regions conflict are ordered by no path of the run's graph (`--check`).
    #[error("{0}")]
    Unordered(Box<UnorderedRun>),
    /// A task's region lies outside its tensor (dynamic shapes); the task did not run.
    #[error("task #{task} (kernel `{kernel}`): {message}")]
    Region {
        /// The task.
        task: u32,
        /// The kernel.
        kernel: String,
        /// Which region and why.
        message: String,
    },
    /// Generating or building the graph failed (expansion, dependency inference).
    #[error("{0}")]
    Build(String),
    /// Generating failed at a statement of the source: a computed read (`docs/SEMANTICS.md`,
    /// "Computed reads") whose location the generator knows.
    #[error("{message}")]
    BuildAt {
        /// What went wrong.
        message: String,
        /// The statement.
        loc: Loc,
    },
    /// The run was set up wrongly (bad configuration, missing data).
    #[error("{0}")]
    Setup(String),
    /// A bug in the runtime (a panic outside user code); the pool survives.
    #[error("internal error: {0}")]
    Internal(String),
}

impl pto_wsp_ir::Diagnostic for ExecError {
    /// Where a generator error happened ([`ExecError::BuildAt`]); [`Loc::NONE`] otherwise.
    fn loc(&self) -> Loc {
        match self {
            ExecError::BuildAt { loc, .. } => *loc,
            _ => Loc::NONE,
        }
    }
}

impl ExecError {
    /// A generator's error `e`: [`ExecError::BuildAt`] when it knows its location, else
    /// [`ExecError::Build`].
    pub fn build(e: &dyn pto_wsp_ir::Diagnostic) -> ExecError {
        let loc = e.loc();
        if loc.is_known() {
            ExecError::BuildAt {
                message: e.to_string(),
                loc,
            }
        } else {
            ExecError::Build(e.to_string())
        }
    }

    /// The error of task `id` failing with `f`.
    pub fn from_failure(id: u32, f: TaskFailure) -> ExecError {
        ExecError::Kernel {
            task: f.index.unwrap_or(id),
            kernel: f.kernel,
            message: f.message,
            panicked: f.panicked,
        }
    }
}

/// An unordered conflicting pair found by the order checker, with the names a user knows: the
/// kernels, the tensor and each task's index (the expander's, once a module run renamed them;
/// graph ids and `kernel #k` / `tensor #t` until then).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnorderedRun {
    /// The pair (graph ids).
    pub pair: Unordered,
    /// The `deps` mode that built the graph.
    pub deps: DepsMode,
    /// Kernel names of the earlier and the later task.
    pub kernels: [String; 2],
    /// The tensor's name.
    pub tensor: String,
    /// Indices of the earlier and the later task.
    pub indices: [u32; 2],
}

impl UnorderedRun {
    /// `pair` under `deps`, named by numbers.
    pub fn new(pair: Unordered, deps: DepsMode) -> UnorderedRun {
        UnorderedRun {
            kernels: [
                format!("kernel #{}", pair.earlier.kernel),
                format!("kernel #{}", pair.later.kernel),
            ],
            tensor: format!("tensor #{}", pair.tensor()),
            indices: [pair.earlier.task.0, pair.later.task.0],
            pair,
            deps,
        }
    }
}

impl fmt::Display for UnorderedRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (e, l) = (&self.pair.earlier, &self.pair.later);
        write!(
            f,
            "--check: task #{} (`{}`, {} {}{}) and task #{} (`{}`, {} {}{}) conflict on tensor `{}` (their boxes intersect and at least one writes), but no path of the run's graph orders them under `deps {}`: the result depends on timing; use `deps overlap` or `deps hybrid`, or order them",
            self.indices[0],
            self.kernels[0],
            e.io.access(),
            self.tensor,
            BoxText(&e.io.region),
            self.indices[1],
            self.kernels[1],
            l.io.access(),
            self.tensor,
            BoxText(&l.io.region),
            self.tensor,
            self.deps,
        )
    }
}
