//! The emitting back ends of `pto-wsp-backends` in the registry: `ptoisa` (target `pto_isa`),
//! `ptog` (target `ptog`, the task-graph ISA binary), `aie` (target `aie`, an AMD AIE design
//! in mlir-aie's dialects) and, with the `ascend` feature (on by
//! default), `ascend` (`ascend_a2a3sim`, `ascend_a2a3`).
//!
//! Why: the emitters live below the facade (they know nothing of [`Backend`]); this module is
//! the thin adapter that makes each one a registered target, so `get_backend("ascend")` finds
//! it from Rust, from Python and from the command line alike.
//!
//! Promise: each adapter hands the emitter the plan's resolved program, its source (for
//! positions) and [`CompileOptions::bindings`], and returns its files as an
//! [`Artefact::Tree`]; an emitter's refusal is a [`CompileError::Emitter`] at its location.

use super::{Artefact, Backend, Capability, Output};
use crate::program::{CompileError, CompileOptions, LoweredPlan};
use pto_wsp_backends::{Files, Input};
use pto_wsp_ir::{Resolved, Unsupported};
use std::path::PathBuf;

/// The emitting back ends this build registers, in registration order.
pub(super) fn all() -> Vec<std::sync::Arc<dyn Backend>> {
    vec![
        std::sync::Arc::new(PtoIsa),
        std::sync::Arc::new(Ptog),
        std::sync::Arc::new(Aie),
        #[cfg(feature = "ascend")]
        std::sync::Arc::new(Ascend),
    ]
}

/// Files as an artefact tree.
fn tree(files: Files) -> Output {
    Output::Artefact(Artefact::Tree(
        files
            .into_iter()
            .map(|(name, text)| (PathBuf::from(name), text.into_bytes()))
            .collect(),
    ))
}

/// Runs `emit` on the plan's resolved program, source and the options' bindings.
fn with_input<T>(
    plan: &LoweredPlan,
    options: &CompileOptions,
    emit: impl FnOnce(&Input<'_>) -> Result<T, pto_wsp_backends::EmitError>,
) -> Result<T, CompileError> {
    let input = Input {
        resolved: plan.resolved(),
        source: plan.source.as_deref(),
        bindings: &options.bindings,
    };
    Ok(emit(&input)?)
}

/// `ptoisa`: kernels written in tile instructions as PTO-ISA C++ headers, with a host driver
/// running the workload's tasks of those kernels and a Makefile
/// ([`pto_wsp_backends::ptoisa`]).
struct PtoIsa;

impl Backend for PtoIsa {
    fn name(&self) -> &str {
        pto_wsp_backends::ptoisa::NAME
    }

    fn targets(&self) -> Vec<String> {
        vec![pto_wsp_backends::ptoisa::TARGET.into()]
    }

    fn capabilities(&self) -> Vec<Capability> {
        vec![Capability::Emit]
    }

    fn supports(&self, _module: &Resolved) -> Result<(), Unsupported> {
        // Tasks of kernels without a body are skipped by the driver (and said so); what a body
        // cannot be written as is refused, at its place, by `compile`.
        Ok(())
    }

    fn compile(
        &self,
        plan: &LoweredPlan,
        options: &CompileOptions,
    ) -> Result<Output, CompileError> {
        let emitted = with_input(plan, options, pto_wsp_backends::ptoisa::emit_kernels)?;
        Ok(tree(emitted.files))
    }
}

/// `ptog`: the entry point as a task-graph ISA program, written as the `PTOG` binary
/// ([`pto_wsp_backends::ptog`], `docs/ISA.md`).
struct Ptog;

impl Backend for Ptog {
    fn name(&self) -> &str {
        pto_wsp_backends::ptog::NAME
    }

    fn targets(&self) -> Vec<String> {
        vec![pto_wsp_backends::ptog::TARGET.into()]
    }

    fn capabilities(&self) -> Vec<Capability> {
        vec![Capability::Emit]
    }

    fn supports(&self, _module: &Resolved) -> Result<(), Unsupported> {
        // Pipelines and workloads reading what their tasks compute are refused by `compile`,
        // which expands the entry point under the bindings.
        Ok(())
    }

    fn compile(
        &self,
        plan: &LoweredPlan,
        options: &CompileOptions,
    ) -> Result<Output, CompileError> {
        let bytes = with_input(plan, options, pto_wsp_backends::ptog::emit)?;
        Ok(Output::Artefact(Artefact::Bytes(bytes)))
    }
}

/// `aie`: the entry point placed on an AMD AIE array by its spatial map, as MLIR in both forms,
/// the kernels' C++ and the report ([`pto_wsp_backends::aie`], `docs/AIE.md`).
struct Aie;

impl Backend for Aie {
    fn name(&self) -> &str {
        pto_wsp_backends::aie::NAME
    }

    fn targets(&self) -> Vec<String> {
        vec![pto_wsp_backends::aie::TARGET.into()]
    }

    fn capabilities(&self) -> Vec<Capability> {
        vec![Capability::Emit]
    }

    fn supports(&self, _module: &Resolved) -> Result<(), Unsupported> {
        // The mapper refuses, at their place, what does not fit the device or has no spatial
        // map.
        Ok(())
    }

    fn compile(
        &self,
        plan: &LoweredPlan,
        options: &CompileOptions,
    ) -> Result<Output, CompileError> {
        let e = with_input(plan, options, |i| {
            pto_wsp_backends::aie::emit(i, "design.kernels.o")
        })?;
        Ok(tree(vec![
            ("design.mlir".into(), e.custom),
            ("design.generic.mlir".into(), e.generic),
            ("design.kernels.cc".into(), e.kernels_cpp),
            ("report.txt".into(), e.report),
        ]))
    }
}

/// `ascend`: the workload for the Ascend task runtime simpler ([`pto_wsp_backends::ascend`],
/// `docs/BACKENDS.md`).
#[cfg(feature = "ascend")]
struct Ascend;

#[cfg(feature = "ascend")]
impl Backend for Ascend {
    fn name(&self) -> &str {
        pto_wsp_backends::ascend::NAME
    }

    fn targets(&self) -> Vec<String> {
        pto_wsp_backends::ascend::TARGETS
            .iter()
            .map(|t| t.to_string())
            .collect()
    }

    fn capabilities(&self) -> Vec<Capability> {
        vec![Capability::Emit]
    }

    fn supports(&self, module: &Resolved) -> Result<(), Unsupported> {
        pto_wsp_backends::ascend::unsupported(module)
    }

    fn compile(
        &self,
        plan: &LoweredPlan,
        options: &CompileOptions,
    ) -> Result<Output, CompileError> {
        // A backend name (not one of its targets) means the simulator.
        let target = match options.target.as_str() {
            pto_wsp_backends::ascend::NAME => pto_wsp_backends::ascend::TARGETS[0],
            t => t,
        };
        let emitted = with_input(plan, options, |input| {
            pto_wsp_backends::ascend::emit(input, target)
        })?;
        Ok(tree(emitted.files))
    }
}
