//! `pto-wsp`: PTO Workload-Schedule Programming in Rust.
//!
//! The facade crate users depend on. Today it re-exports the IR ([`ir`]): modules, the text
//! format, the validator and the reference expander. Back ends (`compile`, `Program`) arrive with
//! the runtime issues.

#![forbid(unsafe_code)]

pub use pto_wsp_cpu as cpu;
pub use pto_wsp_graph as graph;
pub use pto_wsp_ir as ir;
pub use pto_wsp_kernels as kernels;
