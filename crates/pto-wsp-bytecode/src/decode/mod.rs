//! The validating decoder: bytes to a [`Program`], or an error saying what is wrong and where.
//!
//! Why: bytecode travels (host to device, file to process); an interpreter fed malformed bytes
//! must not read out of bounds, loop forever or panic. Everything is checked here, once, before
//! anything runs: magic, version, lengths, every table index, every jump and its partner, loop
//! nesting depth, every expression's types and stack depth.
//!
//! Promise: [`Program::decode`] never panics, never allocates more than a small multiple of the
//! input size, and returns a [`DecodeError`] naming the byte offset of the first problem found.
//! A program it accepts can be interpreted without any further check of the bytecode itself
//! (run-time failures then come only from bindings and arithmetic).

mod code;
mod error;
mod expr;
mod plan;
mod tables;
#[cfg(test)]
mod tests;

pub use error::DecodeError;

use crate::image::{Image, Offsets};
use crate::op::Op;
use crate::program::{ExprInfo, NameTable, Program, Sched};
use expr::Exprs;
use pto_wsp_ir::ScalarType;
use tables::Registers;

impl Program {
    /// Decodes and validates `bytes` (see the module docs).
    pub fn decode(bytes: &[u8]) -> Result<Program, DecodeError> {
        let (img, off) = Image::read(bytes)?;
        Decoder {
            img: &img,
            off: &off,
        }
        .run(bytes.len())
    }
}

struct Decoder<'a> {
    img: &'a Image,
    off: &'a Offsets,
}

/// What a use site needs of an expression.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Want {
    Int,
    Bool,
    Exactly(ScalarType),
}

/// The checked tables, before the instruction stream is walked.
struct Tables {
    regs: Registers,
    exprs: Vec<ExprInfo>,
    axes: Vec<crate::program::AxisDesc>,
    loops: Vec<crate::program::LoopDesc>,
    tensors: Vec<crate::program::TensorDesc>,
    kernels: Vec<crate::program::KernelDesc>,
    regions: Vec<crate::program::RegionDesc>,
    dims: Vec<(u16, u16)>,
    sched: Sched,
}

impl Decoder<'_> {
    /// Checks the tables section by section, then the instruction stream, then plans the tasks.
    fn run(&self, size: usize) -> Result<Program, DecodeError> {
        let regs = self.registers()?;
        let (exprs, uses_args) = self.exprs(&regs.types)?;
        let dx = Exprs {
            exprs: &exprs,
            uses_args: &uses_args,
            reg_types: &regs.types,
        };
        let ns = regs.symbols.len();
        let tensors = self.tensors(&dx, ns)?;
        let axes = self.axes(&dx, &tensors)?;
        let n_keysets = self.keysets(&dx)?;
        let loops = self.loops(&dx, &axes, ns + regs.slots.len(), n_keysets)?;
        let kernels = self.kernels(&dx, ns)?;
        let (dims, dimsets) = self.dimsets(&dx)?;
        let regions = self.regions(&tensors, &dimsets)?;
        let sched = self.sched()?;
        self.hoisting(&loops, &sched.dispatch)?;
        self.channels()?;
        let mut prog = self.program(
            size,
            Tables {
                regs,
                exprs,
                axes,
                loops,
                tensors,
                kernels,
                regions,
                dims,
                sched,
            },
        );
        self.structure(&mut prog, &uses_args)?;
        self.read_locs()?;
        self.stmt_locs()?;
        plan::plan(&mut prog);
        // The interpreter finds a task's plan through its instruction: `b` (the keyset, kept in
        // the task's descriptor) becomes the task's index.
        for pc in 0..prog.insns.len() {
            if prog.insns[pc].op == Op::Task {
                prog.insns[pc].b = prog.aux[pc];
            }
        }
        Ok(prog)
    }

    /// The program of checked tables, its task descriptors still empty.
    fn program(&self, size: usize, t: Tables) -> Program {
        let img = self.img;
        let mut prog = Program {
            size,
            insns: img.insns.clone(),
            aux: vec![0; img.insns.len()],
            ops: img.ops.clone(),
            exprs: t.exprs,
            consts: img.consts.clone(),
            reg_types: t.regs.types,
            symbols: t.regs.symbols,
            slots: t.regs.slots,
            axes: t.axes,
            loops: t.loops,
            tensors: t.tensors,
            kernels: t.kernels,
            regions: t.regions,
            dims: t.dims,
            tasks: Vec::new(),
            lins: Vec::new(),
            dim_plans: Vec::new(),
            region_outs: Vec::new(),
            shape_off: Vec::new(),
            csp: !img.channels.is_empty() || img.n_procs > 1,
            task_scalars: Vec::new(),
            task_regions: Vec::new(),
            loads: Vec::new(),
            keyset_len: usize::from(img.keyset_len),
            keysets: img.keysets.clone(),
            sched: t.sched,
            channels: img.channels.clone(),
            n_procs: usize::from(img.n_procs),
            names: NameTable {
                symbols: img.names.symbols.clone(),
                slots: img.names.slots.clone(),
                tensors: img.names.tensors.clone(),
                kernels: img.names.kernels.clone(),
                axes: img.names.axes.clone(),
                procs: img.names.procs.clone(),
                channels: img.names.channels.clone(),
            },
            max_depth: 0,
            max_scalars: 0,
            max_coords: 0,
            total_coords: 0,
            max_regions: 0,
            read_locs: img.read_locs.clone(),
            stmt_locs: img.stmt_locs.clone(),
        };
        let mut off = 0u32;
        for t in &prog.tensors {
            prog.shape_off.push(off);
            off += t.shape.as_ref().map_or(0, Vec::len) as u32;
        }
        prog
    }
}
