//! Integration tests of the bytecode: the interpreters against the reference expander (examples,
//! random workloads, dynamic shapes), decoder robustness, and the size figure.
//!
//! The oracle is `pto_wsp_ir::expand`. For every case, every executor's interpreter runs over the
//! same bytes; the union of their tasks must be the expander's task list exactly (each task once,
//! by its owner, with the expander's index), each executor's sequence the expander's order
//! restricted to it, and the order edges and their announcements consistent with the expander's.

mod chains;
mod common;
mod decoder;
mod errors;
mod examples;
mod random;
