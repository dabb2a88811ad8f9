//! What runs a task, and how a run fails.

use pto_wsp_graph::TaskId;

/// Runs one task on a worker. Implemented by the kernel executor (kernels from a registry) and
/// by benchmark executors (empty kernels).
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

/// Why one task failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskFailure {
    /// What went wrong.
    pub message: String,
    /// Whether the task panicked (rather than returning an error).
    pub panicked: bool,
}

/// Why a run failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ExecError {
    /// A task failed.
    #[error("task #{task} failed: {message}")]
    Task {
        /// The task.
        task: u32,
        /// What went wrong.
        message: String,
    },
}
