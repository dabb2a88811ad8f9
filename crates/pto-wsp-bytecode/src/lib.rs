//! `pto-wsp-bytecode`: workload bytecode — a module's entry point as a compact program that every
//! executor interprets to generate only its own tasks (the on-device generation specification).
//!
//! The pipeline: [`encode`] a validated [`pto_wsp_ir::Module`] into bytes (magic `PTOW`, fixed
//! 8-byte instructions, descriptor tables); ship the bytes; [`Program::decode`] validates them
//! completely (every offset, index, jump, nesting depth and expression stack) into a
//! [`Program`]; [`Program::bind`] resolves run-time bindings (symbols, ragged lengths, sparse
//! arrays, slot values) into a [`Bound`]; one [`Interpreter`] per executor then generates that
//! executor's tasks into a [`TaskSink`], in program order, with the structural order edges.
//! [`Program::disassemble`] prints a listing.
//!
//! One opcode table ([`op`]) drives the encoder, the decoder, the disassembler and the
//! interpreter. The reference expander of `pto-wsp-ir` is the oracle: over all executors the
//! interpreters generate exactly its tasks (kernel, params, regions, pool, stream, dispatch
//! target) and order edges, for any bindings. The byte layout is in `docs/BYTECODE.md`.

#![forbid(unsafe_code)]

mod bind;
mod decode;
mod disasm;
mod encode;
mod eval;
pub mod format;
mod image;
mod interp;
pub mod op;
mod program;
mod sink;

pub use bind::{BindError, Bound};
pub use decode::DecodeError;
pub use encode::{EncodeError, EncodeOptions, encode, supports};
pub use interp::{ExecutorConfig, InterpError, Interpreter, RunSummary};
pub use program::Program;
pub use sink::{RegionRef, Task, TaskSink};

/// What the crate's own tests start from: a module, resolved here as a front end would.
#[cfg(test)]
mod testing {
    /// Resolves `module` and encodes it.
    pub(crate) fn encode(
        module: &pto_wsp_ir::Module,
        options: &crate::EncodeOptions,
    ) -> Result<Vec<u8>, crate::EncodeError> {
        let resolved = pto_wsp_ir::resolve(module, &Default::default()).expect("resolves");
        crate::encode(&resolved, options)
    }
}
