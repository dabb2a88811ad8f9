//! `pto-wsp-graph`: the shared runtime core every pto-wsp back end uses (the concurrency-mechanisms
//! specification and the back-end architecture specification's shared infrastructure).
//!
//! - [`types`]: task ids, pools, domains — plain data.
//! - [`storage`]: the immutable, device-copyable task graph (`#[repr(C)]` nodes, CSR fan-out).
//! - [`tensor_map`] and [`builder`]: tasks name the regions they read and write; the builder
//!   infers read-after-write, write-after-write and write-after-read edges through a TensorMap
//!   (exact region keys, bounded or unbounded; overlapping boxes, indexed), plus explicit edges.
//! - [`explicit`]: a builder for graphs whose every edge is named (nothing inferred).
//! - [`feed`]: the reference expander straight into a builder, structural order edges as
//!   explicit dependencies (through barrier tasks), with hooks around each submission.
//! - [`arena`]: per-task storage grown in chunks and freed behind a completed-prefix watermark.
//! - [`state`]: the per-task atomic state that lets the builder wire edges while earlier tasks
//!   are completing (the streaming protocol, checked with loom).
//! - [`order_check`]: the order checker of `run --check`: every conflicting pair of tasks must
//!   be ordered by a path of the graph.
//! - [`ready`]: ready-queue sets (FIFO, work stealing, priority; vector / cube / any pools).
//! - [`start`]: the start policy (immediate, threshold, after orchestration).
//! - [`window`], [`gate`], [`batcher`]: task window, issue gates, dependency batching.
//! - [`prefetch`]: a cache prefetch hint. It, [`arena`] and the reclamation contract of
//!   [`state::TaskStates::reclaim_below`] are the crate's only `unsafe`.
//! - [`sync`]: every atomic of the runtime comes through here so loom can replace it.

#![deny(unsafe_code)]

pub mod arena;
pub mod batcher;
pub mod builder;
pub mod counters;
pub mod explicit;
pub mod feed;
pub mod gate;
pub mod order_check;
#[allow(unsafe_code)]
pub mod prefetch;
pub mod ready;
pub mod start;
pub mod state;
pub mod storage;
pub mod sync;
pub mod tensor_map;
pub mod timing;
pub mod types;
pub mod window;

pub use types::{ExecDomain, TaskId};
