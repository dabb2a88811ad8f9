//! `pto-wsp-cpu`: the CPU simulation back end (the back-end architecture and concurrency-mechanisms
//! specifications).
//!
//! Runs task graphs on a pool of persistent worker threads: the graph of `pto-wsp-graph` (built
//! up front, or streamed in by an orchestration thread while workers run), the ready policies of
//! its [`pto_wsp_graph::ready`] module, issue gates, the task window and dependency batching.
//! Idle workers spin briefly and then park; a parked worker is woken only when work appears.
//!
//! - [`pool`]: the persistent worker threads and how a run is handed to all of them.
//! - [`exec`]: what runs a task ([`Exec`]) and how a run fails ([`ExecError`]).
//! - [`run`]: running a finished graph ([`StaticGraph`]) under a [`RunConfig`].
//! - [`devgen`]: device-generation runs: every worker is an executor that interprets the
//!   workload bytecode and runs its own tasks as they are generated (the on-device generation
//!   specification).
//! - [`stream`]: building the graph on the calling thread while the workers run it.
//! - [`table`]: the task table workers read during a streamed run.
//! - [`kexec`]: the executor that runs registered kernels on tensor views ([`KernelExec`]).
//! - [`stats`]: what a run reports ([`RunStats`]).
//! - [`sim`]: the cycle-cost model of `trace cycles`: a simulated schedule on the modelled
//!   executors and its makespan ([`CycleStats`]).
//! - [`datadep`]: data-dependent generation: the sequential reference run ([`sequential`]) and
//!   the producers a host generator waits on before a computed read ([`Producers`]).
//! - [`csp`]: CSP pipelines on threads — one thread per process, bounded channels of the
//!   declared depth, deadlocks reported by name ([`run_pipeline`]).
//! - [`hb`]: happens-before between a pipeline's processes (vector clocks through the
//!   channels), so accesses no channel orders are found whatever the timing.
//! - [`shapes`]: Taskflow's benchmark DAGs (chain, binary tree, independent, wavefront, random
//!   levels) as task-graph generators.
//! - [`baseline`]: the same shapes run without the runtime (a sequential loop, rayon), the
//!   same-process baselines of `pto-wsp bench`.
//! - `engine` (private): the worker loop shared by every kind of run; `idle` (private): spin,
//!   then park; `ring` (private): batched publication of a streamed run's ready tasks; `fifo`
//!   (private): the vector-backed queue of a device-generation executor's per-task queues.
//! - `sync` (private): the crate's one door to atomics, locks and threads, loom's under
//!   `--cfg loom`, where `loom_models` model-checks the ring, the idle / park / wake protocol
//!   through the pool and the engine, and device generation's hand-over, seal and inboxes.

#![allow(unsafe_code)]

/// Stack size of every thread this crate (or a caller, for its orchestration thread) starts to
/// walk a program: pool workers (bytecode interpretation in device generation), CSP processes
/// and the host's orchestration thread. Programs are bounded to
/// [`pto_wsp_ir::MAX_TOTAL_DEPTH`] levels of nesting and calls by the validator; this is enough
/// for that depth in unoptimised builds (tests run programs at exactly that depth). Only the
/// pages a walk touches are ever committed.
pub const WALK_STACK_BYTES: usize = 64 << 20;

pub mod baseline;
pub mod bytecode_feed;
pub mod csp;
pub mod datadep;
pub mod devgen;
mod engine;
pub mod exec;
mod fifo;
pub mod hb;
mod idle;
pub mod kexec;
pub mod pool;
mod ring;
pub mod run;
pub mod shapes;
pub mod sim;
pub mod stats;
pub mod stream;
mod sync;
pub mod table;

#[cfg(all(test, loom))]
mod loom_models;

pub use bytecode_feed::{BytecodeFeedError, feed_bytecode};
pub use csp::{CspError, CspOptions, Deadlock, run_pipeline};
pub use datadep::{GenStats, Producers, SequentialError, SequentialStats, sequential};
pub use devgen::{DevGenConfig, DevGenStats, DevGenTables, DirectExec, ExecutorStats};
pub use exec::{Exec, ExecError, NoopExec, TaskFailure, UnorderedRun};
pub use kexec::{KernelExec, TaskSource, task_costs, with_task_contexts};
pub use pool::{MAX_THREADS, PoolError, WorkerPool};
pub use run::{GateConfig, PoolSplit, RunConfig, StaticGraph};
pub use sim::{
    CycleStats, DeviceReport, DeviceRun, DeviceTimes, Interval, SimError, SimMachine, SimReady,
    SimSchedule, SimTask, Waits, Work, simulate_device,
};
pub use stats::{RunStats, Span};
pub use stream::{
    AbortProbe, ExplicitStreamBuilder, KeptBuilder, StreamBuilder, StreamConfig, StreamSink,
};
pub use table::TaskTable;
