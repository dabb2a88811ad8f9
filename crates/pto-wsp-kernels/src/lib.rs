//! `pto-wsp-kernels`: what a task's kernel runs on (issue 4).
//!
//! - [`store`]: [`TensorStore`], one zeroed, 64-byte-aligned buffer per tensor of a module, with
//!   shapes evaluated under the run's bindings; typed reads and writes checked against each
//!   tensor's element type ([`Element`]).
//! - [`context`]: [`TaskContext`], what one running task sees — its parameters and typed
//!   [`ReadView`] / [`WriteView`]s of its regions, each seen as rows × cols.
//! - [`registry`]: [`KernelRegistry`], kernels by name and [`KernelId`], each with a cost
//!   function; [`KernelRegistry::with_builtins`] holds the small built-in kernels of
//!   [`builtins`].
//! - [`check`]: [`ConflictChecker`], the debug-checks mode that records the regions in flight
//!   and fails loudly when two running tasks conflict.
//!
//! This is one of the few crates with `unsafe` code: tasks running at the same time on different
//! threads write disjoint parts of the same tensor buffers through views, which no safe borrow
//! can express. Within a task, [`TaskContext`] refuses views that would alias a write; across
//! tasks, the runtime's dependency inference orders every pair of tasks whose regions conflict —
//! the contract of [`TaskContext::new`], which is why it is an `unsafe fn`.

#![allow(unsafe_code)]

pub mod builtins;
pub mod check;
pub mod context;
pub mod registry;
pub mod store;

pub use check::{Conflict, ConflictChecker};
pub use context::{ReadView, TaskContext, ViewProblem, WriteView};
pub use registry::{KernelError, KernelId, KernelRegistry};
pub use store::{Element, StoreError, TensorInfo, TensorStore};
