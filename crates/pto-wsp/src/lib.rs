//! `pto-wsp`: PTO Workload-Schedule Programming in Rust.
//!
//! The facade crate users depend on: the back-end interface ([`lower`], [`compile`],
//! [`Program`], the [`Backend`] trait and its registry) and re-exports of the IR ([`ir`]), the
//! runtime core ([`graph`]), tensors and kernels ([`kernels`]), the CPU simulation ([`cpu`]) and
//! workload bytecode with its per-executor interpreter ([`bytecode`]).

#![forbid(unsafe_code)]

pub mod backend;
pub mod program;

pub use backend::{
    Artefact, Backend, Capability, Output, backends, compile_target, get_backend, register_backend,
};
pub use program::{
    CompileError, CompileOptions, LoweredPlan, Program, ProgramStats, RunError, compile, lower,
};
pub use pto_wsp_bytecode as bytecode;
pub use pto_wsp_cpu as cpu;
pub use pto_wsp_graph as graph;
pub use pto_wsp_ir as ir;
pub use pto_wsp_kernels as kernels;
