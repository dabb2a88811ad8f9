//! Plain-data vocabulary of the runtime: task ids, execution domains, regions, I/O entries,
//! schedule tags, edge kinds. Everything stored in a task graph is `Copy` with no pointers, so the
//! graph can be copied to a device as bytes. Pools and access modes are the IR's
//! ([`pto_wsp_ir::ExecPool`], [`pto_wsp_ir::Access`]), re-exported here; stored nodes hold them as
//! the one-byte codes of [`pool_code`] and [`access_code`]. Regions and I/O entries are the IR's
//! task boxes ([`pto_wsp_ir::task_io`]), which kernels and tensors read without the runtime.

pub(crate) use pto_wsp_ir::task_io::{FX_K, SLOT_WINDOW, SLOT_WINDOW_BITS};
pub use pto_wsp_ir::task_io::{
    MAX_RANK, Region, RegionError, TaskIo, access_code, access_from_code,
};
pub use pto_wsp_ir::{Access, ExecPool};

/// Index of a task in submission order (the builder numbers tasks 0, 1, 2, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[repr(transparent)]
pub struct TaskId(pub u32);

impl TaskId {
    /// A predecessor a TensorMap no longer names: a completed task of which it kept only a count
    /// (a *tombstone*, see [`crate::tensor_map`]). Reported once per edge the inference finds to
    /// such a task; it is counted among the inferred edges, never deduplicated by id, never
    /// wired.
    pub const FORGOTTEN: TaskId = TaskId(u32::MAX);

    /// The id as an index into per-task arrays.
    #[inline]
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Where a task runs (the back-end architecture specification's core types).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum ExecDomain {
    /// A host CPU thread (the CPU simulation).
    #[default]
    HostCpu = 0,
    /// An Ascend AICore.
    AscendAiCore = 1,
    /// An AMD AIE tile.
    AmdAieTile = 2,
}

/// No fixed executor: the task may run anywhere (the `work_steal` dispatch policy).
pub const NO_AFFINITY: u32 = u32::MAX;

/// Device-stable one-byte code of an [`ExecPool`] (as the back-end architecture specification has
/// it: vector 0, cube 1, any 255).
#[inline]
pub fn pool_code(pool: ExecPool) -> u8 {
    match pool {
        ExecPool::Vector => 0,
        ExecPool::Cube => 1,
        ExecPool::Any => 255,
    }
}

/// The pool a [`pool_code`] stands for; unknown codes read as [`ExecPool::Any`].
#[inline]
pub fn pool_from_code(code: u8) -> ExecPool {
    match code {
        0 => ExecPool::Vector,
        1 => ExecPool::Cube,
        _ => ExecPool::Any,
    }
}

/// Schedule tags of a task (the back-end architecture specification's `sched_tags`): a bitfield of
/// the extended primitives that act at this task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[repr(transparent)]
pub struct SchedTags(pub u16);

impl SchedTags {
    /// No tag.
    pub const NONE: SchedTags = SchedTags(0);
    /// Every earlier task completes before this one starts, and no later task starts before it
    /// completes.
    pub const BARRIER: SchedTags = SchedTags(1);
    /// Flush the dependency batcher after this task is submitted.
    pub const FLUSH_BATCH: SchedTags = SchedTags(2);

    /// Whether every bit of `other` is set.
    #[inline]
    pub fn contains(self, other: SchedTags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for SchedTags {
    type Output = SchedTags;
    fn bitor(self, rhs: SchedTags) -> SchedTags {
        SchedTags(self.0 | rhs.0)
    }
}

/// Why an edge exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EdgeKind {
    /// Read after write: an input after the last task that wrote an overlapping region.
    Raw,
    /// Write after write: an output after the last task that wrote an overlapping region.
    Waw,
    /// Write after read: an output after every task that read an overlapping region since the
    /// last write.
    War,
    /// Named with [`crate::builder::GraphBuilder::add_explicit_dep`].
    Explicit,
}
