//! The built task graph: layer 1 of the back-end architecture specification's two-layer task graph,
//! immutable and device-copyable.
//!
//! Why: every back end (CPU simulation, emitters, the streaming runtime's finished graph) reads
//! the same flat arrays, indexed by `u32`, with no pointers and no per-task allocation.
//!
//! Promises:
//! - [`TaskNode`] is `#[repr(C)]` plain data of at most 64 bytes (checked at compile time).
//! - Task `i` is `tasks[i]` and has id `i`; its successors are
//!   `fanout[fanout_start .. fanout_start + fanout_count]` in increasing order, without
//!   duplicates; its scalar params and I/O regions are ranges of `params` and `io`.
//! - Every edge goes from a lower id to a higher id (the graph is acyclic by construction), and
//!   `fanin` is the number of distinct predecessors.

use crate::types::{ExecDomain, ExecPool, NO_AFFINITY, SchedTags, TaskId, TaskIo, pool_from_code};
use std::ops::Range;

/// One task: plain data (the back-end architecture specification's `TaskNodePod`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(C)]
pub struct TaskNode {
    /// The task's id (its index).
    pub id: TaskId,
    /// The kernel that runs (the expander's `Module::kernels` index).
    pub kernel: u32,
    /// Stream.
    pub stream: u32,
    /// Executor the dispatch policy chose, or [`NO_AFFINITY`].
    pub affinity: u32,
    /// Number of distinct predecessors.
    pub fanin: u32,
    /// First successor in [`TaskGraphStorage::fanout`].
    pub fanout_start: u32,
    /// Number of successors.
    pub fanout_count: u32,
    /// First scalar param in [`TaskGraphStorage::params`].
    pub params_start: u32,
    /// First region in [`TaskGraphStorage::io`].
    pub io_start: u32,
    /// Number of scalar params.
    pub params_count: u16,
    /// Number of regions.
    pub io_count: u16,
    /// Schedule tags.
    pub tags: SchedTags,
    /// Where the task runs.
    pub domain: ExecDomain,
    /// [`crate::types::pool_code`] of the pool it runs in.
    pub pool: u8,
}

const _: () = assert!(std::mem::size_of::<TaskNode>() <= 64);
const _: () = assert!(std::mem::size_of::<TaskNode>() == 44);

impl TaskNode {
    /// The pool the task runs in.
    #[inline]
    pub fn pool(&self) -> ExecPool {
        pool_from_code(self.pool)
    }

    /// The executor the task is pinned to, if any.
    #[inline]
    pub fn affinity(&self) -> Option<u32> {
        (self.affinity != NO_AFFINITY).then_some(self.affinity)
    }

    /// Range of the task's successors in [`TaskGraphStorage::fanout`].
    #[inline]
    pub fn fanout_range(&self) -> Range<usize> {
        let s = self.fanout_start as usize;
        s..s + self.fanout_count as usize
    }

    /// Range of the task's params in [`TaskGraphStorage::params`].
    #[inline]
    pub fn params_range(&self) -> Range<usize> {
        let s = self.params_start as usize;
        s..s + self.params_count as usize
    }

    /// Range of the task's regions in [`TaskGraphStorage::io`].
    #[inline]
    pub fn io_range(&self) -> Range<usize> {
        let s = self.io_start as usize;
        s..s + self.io_count as usize
    }
}

/// The immutable graph: flat arrays indexed by `u32` (layer 1 of the two-layer task graph).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskGraphStorage {
    /// Tasks in id order.
    pub tasks: Vec<TaskNode>,
    /// Successor lists of every task, back to back (CSR; see [`TaskNode::fanout_range`]).
    pub fanout: Vec<TaskId>,
    /// Scalar params of every task, back to back.
    pub params: Vec<u64>,
    /// Regions of every task, back to back.
    pub io: Vec<TaskIo>,
}

impl TaskGraphStorage {
    /// Number of tasks.
    #[inline]
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Whether there is no task.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// Number of edges.
    #[inline]
    pub fn edge_count(&self) -> usize {
        self.fanout.len()
    }

    /// The successors of `task`.
    #[inline]
    pub fn successors(&self, task: TaskId) -> &[TaskId] {
        &self.fanout[self.tasks[task.index()].fanout_range()]
    }

    /// The params of `task`.
    #[inline]
    pub fn params_of(&self, task: TaskId) -> &[u64] {
        &self.params[self.tasks[task.index()].params_range()]
    }

    /// The regions of `task`.
    #[inline]
    pub fn io_of(&self, task: TaskId) -> &[TaskIo] {
        &self.io[self.tasks[task.index()].io_range()]
    }

    /// Every edge `(pred, succ)`, grouped by predecessor in id order.
    pub fn edges(&self) -> impl Iterator<Item = (TaskId, TaskId)> + '_ {
        self.tasks.iter().flat_map(move |t| {
            self.fanout[t.fanout_range()]
                .iter()
                .map(move |&s| (t.id, s))
        })
    }

    /// Bytes the graph's live contents take (lengths, not capacities).
    pub fn bytes(&self) -> StorageBytes {
        StorageBytes {
            tasks: std::mem::size_of_val(self.tasks.as_slice()),
            fanout: std::mem::size_of_val(self.fanout.as_slice()),
            params: std::mem::size_of_val(self.params.as_slice()),
            io: std::mem::size_of_val(self.io.as_slice()),
        }
    }
}

/// Byte accounting of a [`TaskGraphStorage`], per array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct StorageBytes {
    /// Task nodes (`size_of::<TaskNode>()` each).
    pub tasks: usize,
    /// Fan-out edges (4 bytes each).
    pub fanout: usize,
    /// Scalar params (8 bytes each).
    pub params: usize,
    /// I/O regions (`size_of::<TaskIo>()` each).
    pub io: usize,
}

impl StorageBytes {
    /// Sum of every array.
    pub fn total(&self) -> usize {
        self.tasks + self.fanout + self.params + self.io
    }
}
