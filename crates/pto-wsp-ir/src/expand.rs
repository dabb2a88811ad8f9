//! The reference expander: the oracle.
//!
//! STUB — to be implemented. The public types below are the contract other code builds on.

use crate::module::Module;
use crate::types::{Access, ExecPool};
use crate::value::{Bindings, Value};
use std::ops::Range;

/// Options of an expansion.
#[derive(Clone, Debug, Default)]
pub struct ExpandOptions {
    /// Stop after this many tasks (the expansion is then marked truncated).
    pub limit: Option<usize>,
    /// Override the schedule's executor count.
    pub executors: Option<u64>,
}

/// The tasks a module generates, in program order, with the structural order constraints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expansion {
    /// Tasks in program (generation) order; a task's index is its position here.
    pub tasks: Vec<ExpandedTask>,
    /// Structural order constraints (`for_each`, `sequential`, CSP), each saying that every task
    /// of one index range precedes every task of another.
    pub order: Vec<OrderEdge>,
    /// Number of executors dispatch targets range over.
    pub executors: u64,
    /// Number of streams.
    pub streams: u64,
    /// Whether generation stopped at [`ExpandOptions::limit`].
    pub truncated: bool,
}

/// One generated task.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ExpandedTask {
    /// Index into [`Module::kernels`] of the kernel that runs (after choosing a tier).
    pub kernel: u32,
    /// Index into [`Module::kernels`] of the kernel the task statement named (differs from
    /// `kernel` when that kernel has tiers).
    pub declared: u32,
    /// Scalar arguments, in parameter order.
    pub params: Vec<Value>,
    /// Region arguments, in parameter order.
    pub regions: Vec<ExpandedRegion>,
    /// Pool the task runs in.
    pub pool: ExecPool,
    /// Executor the dispatch policy chose; `None` under `work_steal`.
    pub target: Option<u32>,
    /// Stream.
    pub stream: u32,
}

/// A region argument with every expression evaluated.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ExpandedRegion {
    /// Index into [`Module::tensors`].
    pub tensor: u32,
    /// How the kernel uses it.
    pub access: Access,
    /// First index per dimension.
    pub start: Vec<i64>,
    /// Size per dimension.
    pub size: Vec<i64>,
}

/// Every task in `before` precedes every task in `after`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OrderEdge {
    /// Earlier tasks (indices into [`Expansion::tasks`]).
    pub before: Range<u32>,
    /// Later tasks.
    pub after: Range<u32>,
}

/// Why an expansion failed.
#[derive(Debug, thiserror::Error)]
pub enum ExpandError {
    /// Placeholder until the expander lands.
    #[error("the expander is not implemented yet")]
    Unimplemented,
}

/// Enumerates the tasks of `module`'s entry point under `bindings`.
pub fn expand(
    module: &Module,
    bindings: &Bindings,
    options: &ExpandOptions,
) -> Result<Expansion, ExpandError> {
    let _ = (module, bindings, options);
    Err(ExpandError::Unimplemented)
}
