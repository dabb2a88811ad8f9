//! `pto-wsp-ptog`: the task-graph ISA — the device-machine layer above the tile ISA: task
//! graphs of kernels (`TG_*`), workspace memory (`MC_*`), kernel-granularity control flow
//! (`CF_*`), core allocation (`CA_*`) and synchronisation, across devices too (`SY_*`).
//!
//! ```text
//! text ──assemble──┐                        ┌──> disassemble ──> text
//!                  ├─> Program ──check──> Checked ──> Device / run_devices (CPU simulation)
//! bytes ──decode───┘      └──encode──> bytes
//! ```
//!
//! - [`isa`]: the one instruction table ([`Op`], [`Insn`]); [`operand`]: operand kinds and
//!   the enums of the specification ([`CoreType`], [`DependencyType`], [`MemLocation`],
//!   [`FenceScope`], [`AffinityType`]).
//! - [`text`]: the assembly syntax, [`assemble`] and [`disassemble`]; [`binary`]: the `PTOG`
//!   layout, [`encode`] and [`decode`] (the validating decoder: every malformed input is a
//!   [`DecodeError`] with its byte offset); the layout is in `docs/ISA.md`.
//! - [`check`]: what a program means, checked once ([`Checked`]: the plan the runtime runs).
//!
//! ```
//! let text = "\
//! MC_ALLOC(X, 64, 64, GM, f32[4, 4])
//! TG_BEGIN(G)
//!     TG_KERNEL(K, fill, 1, AIV, 0)
//!     MC_BIND(K, 0, X, 0, 0, out)
//! TG_END(G)
//! TG_LAUNCH(G, S)
//! TG_SYNC(G)
//! ";
//! let checked = pto_wsp_ptog::assemble(text)?;
//! let bytes = pto_wsp_ptog::encode(&checked.program);
//! let back = pto_wsp_ptog::decode(&bytes)?;
//! assert_eq!(back.program, checked.program);
//! assert_eq!(pto_wsp_ptog::disassemble(&back.program), text);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]

pub mod binary;
pub mod check;
pub mod examples;
pub mod exec;
pub mod isa;
pub mod operand;
pub mod program;
pub mod text;

pub use binary::{DecodeError, encode};
pub use check::{CheckError, Checked};
pub use exec::{Device, DeviceConfig, Library, RunError, RunReport, run_devices};
pub use isa::{Insn, Op, Table};
pub use operand::{
    Access, AffinityType, CoreType, DependencyType, FenceScope, MemLocation, Ns, Split,
};
pub use program::{Names, Program};
pub use text::AsmError;
pub use text::disasm::disassemble;

/// Reads and checks a binary: every malformed input is a [`DecodeError`] with the byte offset
/// of what is wrong (the instruction, its table row, or its operand).
pub fn decode(bytes: &[u8]) -> Result<Checked, DecodeError> {
    let (program, locs) = binary::read(bytes)?;
    check::check(program).map_err(|e| DecodeError::new(locs.at(e.insn, e.operand), e.message))
}

/// Assembles and checks text: every mistake is an [`AsmError`] at its line and column.
pub fn assemble(text: &str) -> Result<Checked, AsmError> {
    let (program, locs) = text::asm::parse(text)?;
    check::check(program).map_err(|e| {
        let (line, col) = locs.at(e.insn, e.operand);
        AsmError {
            line,
            col,
            message: e.message,
        }
    })
}
