//! What a run reports.

/// Statistics of one run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Tasks run.
    pub tasks: u64,
    /// Tasks run per worker.
    pub per_worker: Vec<u64>,
    /// Nanoseconds from start to the last completion.
    pub run_ns: u64,
}
