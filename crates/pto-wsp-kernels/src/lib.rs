//! `pto-wsp-kernels`: what a task's kernel runs on and the tile kernels it runs.
//!
//! - [`store`]: [`TensorStore`], one zeroed, 64-byte-aligned buffer per tensor of a module, with
//!   shapes evaluated under the run's bindings; typed reads and writes checked against each
//!   tensor's element type ([`Element`]).
//! - [`context`]: [`TaskContext`], what one running task sees — its parameters and typed
//!   [`ReadView`] / [`WriteView`]s of its regions, each seen as rows × cols.
//! - [`tile`]: float views of any storage type ([`FloatRead`] / [`FloatWrite`], `f32`, `f16`,
//!   `bf16`) computed on in `f32`, and per-thread [`Scratch`] buffers.
//! - [`registry`]: [`KernelRegistry`], kernels by name and [`KernelId`], each with a cost
//!   function; [`KernelRegistry::with_builtins`] holds the built-in tile kernels of
//!   [`builtins`] (matmul, elementwise, row operations, RMSNorm, RoPE, split-KV decode
//!   attention and merge, causal attention, an MoE expert, top-k; conventions in
//!   `docs/KERNELS.md`).
//! - [`cost`]: the roofline cost model of the built-ins ([`cost::Work`]).
//! - [`fast`]: the hand-vectorised hot loops (AVX2 + FMA when the CPU has them).
//! - [`npy`]: tensors to and from numpy's `.npy` format, element type and shape checked against
//!   the declared tensor ([`TensorStore::load_npy`], [`TensorStore::to_npy`]).
//! - [`check`]: [`ConflictChecker`], the debug-checks mode that records the regions in flight
//!   and fails loudly when two running tasks conflict.
//!
//! This is one of the few crates with `unsafe` code: tasks running at the same time on different
//! threads write disjoint parts of the same tensor buffers through views, which no safe borrow
//! can express. Within a task, [`TaskContext`] refuses views that would alias a write; across
//! tasks, the runtime's dependency inference orders every pair of tasks whose regions conflict —
//! the contract of [`TaskContext::new`], which is why it is an `unsafe fn`.

#![allow(unsafe_code)]

pub mod bench;
pub mod builtins;
pub mod check;
pub mod checked;
pub mod context;
pub mod cost;
pub mod fast;
pub mod lang;
mod lazy;
pub mod ledger;
pub mod library;
pub mod npy;
pub mod registry;
mod seed;
pub mod store;
pub mod tile;

pub use check::{Conflict, ConflictChecker};
pub use checked::{CheckedRunner, with_checked_runner};
pub use context::{ReadView, TaskContext, ViewProblem, WriteView};
pub use ledger::{RegionIndex, RegionLedger};
pub use registry::{KernelError, KernelId, KernelRegistry};
pub use store::{Element, SeedRange, StoreError, TensorInfo, TensorSpec, TensorStore};
pub use tile::{Float, FloatRead, FloatWrite, Scratch};
