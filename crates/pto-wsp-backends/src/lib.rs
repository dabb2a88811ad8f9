//! `pto-wsp-backends`: the back ends that emit code for another toolchain, from the resolved
//! program.
//!
//! Why: a target that runs elsewhere (PTO-ISA's C++ tile library, the Ascend task runtime; the
//! task-graph ISA; AMD AIE to come) turns the one resolved program
//! ([`pto_wsp_ir::resolve`](mod@pto_wsp_ir::resolve)) into files. Those emitters share what
//! they need — the resolved program, where it came from, the bindings baked in, one error type
//! — and live here, below the facade (`pto-wsp`), which registers each one as a
//! `pto_wsp::Backend`. This crate knows nothing of the registry, files on disk or the command
//! line: an emitter returns its files in memory.
//!
//! Promises:
//! - Every emitter reads [`Input::resolved`]; none resolves names, inlines calls or folds the
//!   schedule again.
//! - Every failure is an [`EmitError`], a [`Diagnostic`] at the construct's source location
//!   when the module came from text ([`Input::source`]), returned before anything is emitted.
//! - Source positions written into emitted code (comments, run-time error messages) are the
//!   locations the resolved program carries, rendered against [`Input::source`]; without a
//!   source they name the module only.
//!
//! Modules: [`ptoisa`] (kernels written in tile instructions as PTO-ISA C++, with a host
//! driver), [`ascend`] (a workload for the Ascend runtime simpler, built on [`ptoisa`]'s
//! kernel bodies; behind the default-on `ascend` feature) and [`ptog`] (the entry point as a
//! task-graph ISA program, the `PTOG` binary of `pto-wsp-ptog`).

#![forbid(unsafe_code)]

pub mod aie;
#[cfg(feature = "ascend")]
pub mod ascend;
pub mod ptog;
pub mod ptoisa;

use pto_wsp_ir::{Bindings, Diagnostic, Loc, Resolved, SourceFile, Unsupported};

/// The support files the emitters write verbatim, the same bytes into every tree that has them,
/// as (file name, text): the run-time helper headers of kernels, host driver, AI Core wrappers
/// and orchestration, and the PTO-ISA driver's Makefile. Every other emitted file depends on the
/// module. The goldens of emitted code store each of these once.
pub fn support_files() -> Vec<(&'static str, &'static str)> {
    let mut files = vec![
        ("pto_wsp_rt.hpp", ptoisa::RT_HPP),
        ("pto_wsp_host.hpp", ptoisa::HOST_HPP),
        ("Makefile", ptoisa::MAKEFILE),
    ];
    #[cfg(feature = "ascend")]
    files.extend([
        ("pto_wsp_aicore.hpp", ascend::AICORE_HPP),
        ("pto_wsp_orch.hpp", ascend::ORCH_HPP),
    ]);
    files
}

/// What an emitter reads: the resolved program, the text it came from (for positions) and the
/// bindings whose values the emitted code bakes in.
#[derive(Clone, Copy, Debug)]
pub struct Input<'a> {
    /// The module's entry point, resolved (its declarations through [`Resolved::module`]).
    pub resolved: &'a Resolved,
    /// The text the module was parsed from, when it was (positions then read `file:line:column`).
    pub source: Option<&'a SourceFile>,
    /// Symbol values, slot values and contents of integer tensors.
    pub bindings: &'a Bindings,
}

impl Input<'_> {
    /// The name shown for the module: its source's, or `<module>` for a module built in code.
    pub fn name(&self) -> &str {
        self.source.map_or("<module>", |s| s.name.as_str())
    }

    /// `file:line:column` of `loc` (the module's name alone without a source or a location).
    pub fn position(&self, loc: Loc) -> String {
        match self.source {
            Some(s) => s.position(loc),
            None => self.name().to_string(),
        }
    }
}

/// Why an emitter produced nothing: what it cannot emit or compute, and where.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct EmitError {
    /// The whole message (what, and why).
    pub message: String,
    /// Where the construct is ([`Loc::NONE`] when the error has no place in the source).
    pub loc: Loc,
}

impl EmitError {
    /// An error at `loc`.
    pub fn at(loc: Loc, message: impl Into<String>) -> EmitError {
        EmitError {
            message: message.into(),
            loc,
        }
    }

    /// An error with no place in the source.
    pub fn plain(message: impl Into<String>) -> EmitError {
        EmitError::at(Loc::NONE, message)
    }
}

impl Diagnostic for EmitError {
    fn loc(&self) -> Loc {
        self.loc
    }
}

impl From<pto_wsp_ir::device::check::DeviceError> for EmitError {
    fn from(e: pto_wsp_ir::device::check::DeviceError) -> EmitError {
        EmitError::at(e.loc, format!("{e} (rule: {})", e.source))
    }
}

impl From<Unsupported> for EmitError {
    fn from(u: Unsupported) -> EmitError {
        EmitError::at(u.loc, u.to_string())
    }
}

/// Emitted files in memory: `(file name, contents)`.
pub type Files = Vec<(String, String)>;
