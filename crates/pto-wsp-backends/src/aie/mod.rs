//! The AMD AIE back end: a workload or CSP pipeline placed on an AIE array (XDNA / XDNA2 NPUs)
//! by its spatial map, written as MLIR in mlir-aie's dialects, and simulated on the CPU.
//!
//! Why: an AIE array is spatial: compute tiles with 64 KiB of local memory, memory tiles and
//! shim tiles, joined by streams. A program runs there as one loop per core, moving data in
//! ObjectFIFOs; the spatial map (`pto_wsp_ir::spatial`) says where things go, this back end
//! makes the design, checks it fits, and writes it.
//!
//! Modules, in data-flow order: [`layout`] (which cells hold which part of a tensor),
//! [`map`] (placement, objects, routing → [`design::AieDesign`]), [`budget`] (every tile's
//! resources against the device table, `pto_wsp_ir::spatial::device`), [`transfer`] (host
//! transfers as strided patterns), [`mlir`] (the custom and generic printers over one spelling
//! table), [`kernels`] (the called kernels as C++), [`sim`] (the design run on threads),
//! [`model`] (throughput) and [`report`] (the tables of `--report`).
//!
//! Promise: [`emit`] returns everything or nothing: every refusal is an [`EmitError`] before
//! any text is made.

pub mod budget;
pub mod design;
pub mod kernels;
pub mod layout;
pub mod map;
pub mod mlir;
pub mod model;
pub mod report;
pub mod sim;
pub mod transfer;

use crate::{EmitError, Input};
pub use design::AieDesign;

/// The back end's name in the registry.
pub const NAME: &str = "aie";
/// The emitting target.
pub const TARGET: &str = "aie";

/// What `emit aie` makes.
#[derive(Clone, Debug)]
pub struct Emitted {
    /// The placed design.
    pub design: AieDesign,
    /// The design in the custom assembly form.
    pub custom: String,
    /// The design in the generic op form.
    pub generic: String,
    /// The called kernels as C++.
    pub kernels_cpp: String,
    /// The `--report` tables.
    pub report: String,
}

/// Maps, checks and prints the entry point of `input`; cores link `object` (the kernels'
/// object file name).
pub fn emit(input: &Input<'_>, object: &str) -> Result<Emitted, EmitError> {
    let design = map::map(input)?;
    let module = &input.resolved.module;
    let kernels_cpp = kernels::cpp(&design, module)?;
    let t = model::model(&design, module);
    Ok(Emitted {
        custom: mlir::print(&design, object, false),
        generic: mlir::print(&design, object, true),
        report: report::report(&design, &t),
        kernels_cpp,
        design,
    })
}
