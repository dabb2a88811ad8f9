//! `pto-wsp-cpu`: the CPU simulation back end (seed 004 §1–2, §6; seed 003 §6–8).
//!
//! Runs task graphs on a pool of persistent worker threads: the graph of `pto-wsp-graph` (built
//! up front, or streamed in by an orchestration thread while workers run), the ready policies of
//! its [`pto_wsp_graph::ready`] module, issue gates, the task window and dependency batching.
//! Idle workers spin briefly and then park; a parked worker is woken only when work appears.
//!
//! - [`pool`]: the persistent worker threads and how a run is handed to all of them.
//! - [`exec`]: what runs a task ([`Exec`]) and how a run fails ([`ExecError`]).
//! - [`run`]: running a finished graph ([`StaticGraph`]) under a [`RunConfig`].
//! - [`stats`]: what a run reports ([`RunStats`]).
//! - [`shapes`]: Taskflow's benchmark DAGs (chain, binary tree, independent, wavefront, random
//!   levels) as task-graph generators.
//! - [`baseline`]: the same shapes run without the runtime (a sequential loop, rayon), the
//!   same-process baselines of `pto-wsp bench`.

#![allow(unsafe_code)]

pub mod baseline;
pub mod exec;
pub mod pool;
pub mod run;
pub mod shapes;
pub mod stats;

pub use exec::{Exec, ExecError, NoopExec, TaskFailure};
pub use pool::WorkerPool;
pub use run::{PoolSplit, RunConfig, StaticGraph};
pub use stats::RunStats;
