//! Running a finished graph.

use crate::exec::{Exec, ExecError};
use crate::pool::WorkerPool;
use crate::stats::RunStats;
use pto_wsp_graph::ready::ReadyKind;
use pto_wsp_graph::storage::TaskGraphStorage;

/// How workers are split into pools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolSplit {
    /// Every worker runs every task.
    Single,
    /// `vector` workers run vector (and `Any`) tasks, the rest cube (and `Any`) tasks.
    ByExecUnit {
        /// Number of vector workers.
        vector: usize,
    },
}

/// How a graph runs.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Ready policy.
    pub ready: ReadyKind,
    /// Pools.
    pub pools: PoolSplit,
}

impl Default for RunConfig {
    fn default() -> RunConfig {
        RunConfig {
            ready: ReadyKind::WorkSteal,
            pools: PoolSplit::Single,
        }
    }
}

/// A finished graph prepared for running (any number of times).
#[derive(Debug)]
pub struct StaticGraph {
    storage: TaskGraphStorage,
}

impl StaticGraph {
    /// Prepares `storage`.
    pub fn new(storage: TaskGraphStorage) -> StaticGraph {
        StaticGraph { storage }
    }

    /// The graph.
    pub fn storage(&self) -> &TaskGraphStorage {
        &self.storage
    }
}

impl WorkerPool {
    /// Runs every task of `graph` once, in an order its edges allow.
    pub fn run<E: Exec>(
        &self,
        graph: &StaticGraph,
        config: &RunConfig,
        exec: &E,
    ) -> Result<RunStats, ExecError> {
        let _ = (graph, config, exec);
        todo!()
    }
}
