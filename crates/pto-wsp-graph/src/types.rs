//! Plain-data vocabulary of the runtime: task ids and execution domains. Pools and access modes
//! are the IR's ([`pto_wsp_ir::ExecPool`], [`pto_wsp_ir::Access`]), re-exported here.

pub use pto_wsp_ir::{Access, ExecPool};

/// Index of a task in submission order (the builder numbers tasks 0, 1, 2, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[repr(transparent)]
pub struct TaskId(pub u32);

impl TaskId {
    /// The id as an index into per-task arrays.
    #[inline]
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Where a task runs (seed 004 §6.2.1).
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
