//! The bytecode as plain tables (an *image*), and its byte layout.
//!
//! Why: the encoder fills an [`Image`] and writes it; the decoder reads bytes back into an
//! [`Image`] (checking only that every section is there, with its byte offsets recorded) and then
//! validates its meaning (`crate::decode`). Keeping the layout in one reader and one writer side
//! by side makes it hard for them to disagree.
//!
//! Promise: [`Image::read`] never panics and never reads out of bounds: a short or malformed
//! section is a [`DecodeError`] naming what was being read and its byte offset; `read(write(i))`
//! gives `i` back.

#[cfg(doc)]
use crate::decode::DecodeError;
use crate::op::Insn;
use pto_wsp_ir::Loc;

mod read;
mod write;

/// An axis record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct AxisRec {
    pub kind: u8,
    pub extent: u16,
    pub arr0: u16,
    pub arr1: u16,
}

/// A loop record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LoopRec {
    pub axis: u16,
    pub var0: u16,
    pub var1: u16,
    pub keyset: u16,
    pub count: u16,
    pub flags: u16,
}

/// A tensor record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TensorRec {
    pub dtype: u8,
    pub flags: u8,
    pub dims: Vec<u16>,
}

/// A kernel record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KernelRec {
    pub pool: u8,
    pub params: Vec<u8>,
    /// `(condition, variant)` cases and the default variant.
    pub tiers: Option<(Vec<(u16, u16)>, u16)>,
}

/// A region record: a tensor and a dimension list (the access mode is the kernel
/// parameter's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct RegionRec {
    pub tensor: u16,
    pub dims: u16,
}

/// A dimension list: `(start, size)` expressions; size [`crate::format::NONE16`] means 1.
pub(crate) type DimsRec = Vec<(u16, u16)>;

/// A dispatch-policy node as stored (pre-order tree).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum DNodeRec {
    RoundRobin(u64),
    Affinity(u8),
    Hash(u8),
    Threshold {
        metric: u8,
        levels: Vec<(i64, DNodeRec)>,
        otherwise: Box<DNodeRec>,
    },
    StaticPartition(Vec<u64>),
    WorkSteal,
}

/// Pool routing by a metric.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PoolRec {
    pub metric: u8,
    pub levels: Vec<(i64, u8)>,
    pub otherwise: u8,
}

/// The schedule section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SchedRec {
    pub executors: u64,
    pub streams: u64,
    pub dispatch: DNodeRec,
    /// Key slot of `stream_by`, if any.
    pub stream_by: Option<u8>,
    pub pools: Option<PoolRec>,
    /// Key slot of the `ready priority(..)` key, if any.
    pub priority: Option<u8>,
    /// Key slot of the `trace cycles(..)` cost, if any.
    pub cost: Option<u8>,
}

/// Names of declarations (empty: not recorded).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Names {
    pub symbols: Vec<String>,
    pub slots: Vec<String>,
    pub tensors: Vec<String>,
    pub kernels: Vec<String>,
    pub axes: Vec<String>,
    pub procs: Vec<String>,
    pub channels: Vec<String>,
}

/// Every table of a bytecode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Image {
    pub insns: Vec<Insn>,
    pub ops: Vec<Insn>,
    pub exprs: Vec<(u16, u16)>,
    pub consts: Vec<u64>,
    pub reg_types: Vec<u8>,
    /// Scalar-type code, `| 0x80` when the entry reads the symbol.
    pub symbols: Vec<u8>,
    pub slots: Vec<u8>,
    pub axes: Vec<AxisRec>,
    pub loops: Vec<LoopRec>,
    pub tensors: Vec<TensorRec>,
    pub kernels: Vec<KernelRec>,
    pub regions: Vec<RegionRec>,
    pub dimsets: Vec<DimsRec>,
    pub keyset_len: u8,
    pub keysets: Vec<u16>,
    pub sched: SchedRec,
    /// `(producer, consumer)` process of each channel.
    pub channels: Vec<(u8, u8)>,
    pub n_procs: u8,
    /// Whether the names of kernels, axes, processes, channels and unbound tensors are stored.
    pub debug_names: bool,
    pub names: Names,
    /// `(pc, loc)` of each computed read, by increasing pc (the read-location side table).
    pub read_locs: Vec<(u32, Loc)>,
    /// `(pc, loc)`: the statement of every instruction from `pc` to the next entry's (the
    /// statement-location table), by increasing pc.
    pub stmt_locs: Vec<(u32, Loc)>,
}

/// Where each part of an image was found, for error messages.
#[derive(Clone, Debug, Default)]
pub(crate) struct Offsets {
    pub insns: usize,
    pub ops: usize,
    pub exprs: usize,
    pub axes: usize,
    pub loops: usize,
    pub tensors: Vec<usize>,
    pub kernels: Vec<usize>,
    pub regions: usize,
    pub dimsets: Vec<usize>,
    pub keysets: usize,
    pub sched: usize,
    pub channels: usize,
    pub names: usize,
    pub read_locs: usize,
    pub stmt_locs: usize,
    pub symbols: usize,
    pub slots: usize,
    pub regs: usize,
}

impl Offsets {
    /// Byte offset of instruction `pc`.
    pub(crate) fn insn(&self, pc: usize) -> usize {
        self.insns + pc * Insn::SIZE
    }

    /// Byte offset of expression op `i`.
    pub(crate) fn op(&self, i: usize) -> usize {
        self.ops + i * Insn::SIZE
    }
}
