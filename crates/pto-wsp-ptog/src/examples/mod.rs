//! The examples of `examples/ptog/` and the kernels they run, so that tests, benchmarks and
//! `pto-wsp run` run the same programs with the same kernels.
//!
//! - [`deepseek`]: the specification's example, DeepSeek V3.2 indexer attention.
//! - [`converge`]: a `CF_WHILE` convergence loop (Jacobi iteration until the update is small).
//! - [`exchange`]: two devices taking turns through `SY_NOTIFY` / `SY_WAIT_NOTIFY`.
//! - [`shapes`]: the task-graph runtime's benchmark DAGs as programs of empty kernels.

pub mod converge;
pub mod deepseek;
pub mod exchange;
pub mod shapes;

use crate::exec::{Library, LibraryError, Workload};
use pto_wsp_ir::Module;
use pto_wsp_kernels::KernelRegistry;

/// Makes a workload node from a module and the kernels its tasks run. This crate runs task
/// graphs, not workloads: the facade's `pto_wsp::WorkloadNode::compile` is one.
pub type WorkloadMaker<'a> =
    &'a dyn Fn(&Module, KernelRegistry) -> Result<Box<dyn Workload>, String>;

/// The built-in kernels and every example's kernels; the examples' workload nodes are made by
/// `make`.
pub fn library(make: WorkloadMaker<'_>) -> Result<Library, LibraryError> {
    let mut lib = Library::with_builtins();
    deepseek::add_kernels(&mut lib, make)?;
    converge::add_kernels(&mut lib);
    exchange::add_kernels(&mut lib);
    lib.add_fn("nop", |_| Ok(()));
    Ok(lib)
}
