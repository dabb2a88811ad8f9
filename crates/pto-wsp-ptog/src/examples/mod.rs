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

use crate::exec::{Library, LibraryError};

/// The built-in kernels and every example's kernels; workload nodes run on `threads` worker
/// threads of their own (0: one per core).
pub fn library(threads: usize) -> Result<Library, LibraryError> {
    let mut lib = Library::with_builtins();
    deepseek::add_kernels(&mut lib, threads)?;
    converge::add_kernels(&mut lib);
    exchange::add_kernels(&mut lib);
    lib.add_fn("nop", |_| Ok(()));
    Ok(lib)
}
