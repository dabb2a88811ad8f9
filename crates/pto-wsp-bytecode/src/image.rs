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

use crate::decode::DecodeError;
use crate::format::{
    FLAG_DEBUG_NAMES, FLAG_READ_LOCS, HEADER_LEN, MAGIC, MAX_DISPATCH_DEPTH, MAX_RANK,
    TENSOR_ARRAY, VERSION, dnode,
};
use crate::op::{Insn, Op};
use pto_wsp_ir::Loc;

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

struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn name(&mut self, s: &str) {
        // Names longer than 255 bytes are cut at a character boundary.
        let mut end = s.len().min(255);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.u8(end as u8);
        self.0.extend_from_slice(&s.as_bytes()[..end]);
    }
    fn dnode(&mut self, n: &DNodeRec) {
        match n {
            DNodeRec::RoundRobin(k) => {
                self.u8(dnode::ROUND_ROBIN);
                self.u64(*k);
            }
            DNodeRec::Affinity(s) => {
                self.u8(dnode::AFFINITY);
                self.u8(*s);
            }
            DNodeRec::Hash(s) => {
                self.u8(dnode::HASH);
                self.u8(*s);
            }
            DNodeRec::Threshold {
                metric,
                levels,
                otherwise,
            } => {
                self.u8(dnode::THRESHOLD);
                self.u8(*metric);
                self.u8(levels.len() as u8);
                for (b, n) in levels {
                    self.u64(*b as u64);
                    self.dnode(n);
                }
                self.dnode(otherwise);
            }
            DNodeRec::StaticPartition(starts) => {
                self.u8(dnode::STATIC_PARTITION);
                self.u16(starts.len() as u16);
                for s in starts {
                    self.u64(*s);
                }
            }
            DNodeRec::WorkSteal => self.u8(dnode::WORK_STEAL),
        }
    }
}

impl Image {
    /// The bytes. Counts must fit their fields (the encoder checks).
    pub(crate) fn write(&self) -> Vec<u8> {
        let mut w = Writer(Vec::with_capacity(1024));
        w.0.extend_from_slice(&MAGIC);
        w.u32(VERSION);
        w.u32(self.insns.len() as u32);
        w.u32(self.axes.len() as u32);
        w.u32(self.kernels.len() as u32);
        w.u32(self.tensors.len() as u32);
        w.u16(self.symbols.len() as u16);
        w.u16(self.slots.len() as u16);
        w.u16(self.reg_types.len() as u16);
        w.u16(self.exprs.len() as u16);
        w.u16(self.ops.len() as u16);
        w.u16(self.consts.len() as u16);
        w.u16(self.regions.len() as u16);
        w.u16(self.loops.len() as u16);
        let n_keysets = if self.keyset_len == 0 {
            0
        } else {
            self.keysets.len() / usize::from(self.keyset_len)
        };
        w.u16(n_keysets as u16);
        w.u8(self.keyset_len);
        w.u8(self.channels.len() as u8);
        w.u8(self.n_procs);
        w.u8(if self.debug_names {
            FLAG_DEBUG_NAMES
        } else {
            0
        } | if self.read_locs.is_empty() {
            0
        } else {
            FLAG_READ_LOCS
        });
        w.u16(self.dimsets.len() as u16);
        let len_at = w.0.len();
        w.u32(0);
        debug_assert_eq!(w.0.len(), HEADER_LEN);
        for i in self.insns.iter().chain(&self.ops) {
            w.0.extend_from_slice(&i.to_bytes());
        }
        for &(s, l) in &self.exprs {
            w.u16(s);
            w.u16(l);
        }
        for &c in &self.consts {
            w.u64(c);
        }
        w.0.extend_from_slice(&self.reg_types);
        w.0.extend_from_slice(&self.symbols);
        w.0.extend_from_slice(&self.slots);
        for a in &self.axes {
            w.u8(a.kind);
            w.u8(0);
            w.u16(a.extent);
            w.u16(a.arr0);
            w.u16(a.arr1);
        }
        for l in &self.loops {
            for v in [l.axis, l.var0, l.var1, l.keyset, l.count, l.flags] {
                w.u16(v);
            }
        }
        for t in &self.tensors {
            w.u8(t.dtype);
            w.u8(t.flags);
            w.u8(t.dims.len() as u8);
            for &d in &t.dims {
                w.u16(d);
            }
        }
        for k in &self.kernels {
            w.u8(k.pool);
            w.u8(k.params.len() as u8);
            w.0.extend_from_slice(&k.params);
            match &k.tiers {
                None => w.u8(0xFF),
                Some((cases, default)) => {
                    w.u8(cases.len() as u8);
                    for &(c, v) in cases {
                        w.u16(c);
                        w.u16(v);
                    }
                    w.u16(*default);
                }
            }
        }
        for r in &self.regions {
            w.u16(r.tensor);
            w.u16(r.dims);
        }
        for d in &self.dimsets {
            w.u8(d.len() as u8);
            for &(s, z) in d {
                w.u16(s);
                w.u16(z);
            }
        }
        for &k in &self.keysets {
            w.u16(k);
        }
        w.u64(self.sched.executors);
        w.u64(self.sched.streams);
        w.dnode(&self.sched.dispatch);
        w.u8(self.sched.stream_by.unwrap_or(0xFF));
        match &self.sched.pools {
            None => w.u8(0),
            Some(p) => {
                w.u8(1);
                w.u8(p.metric);
                w.u8(p.levels.len() as u8);
                for &(b, pool) in &p.levels {
                    w.u64(b as u64);
                    w.u8(pool);
                }
                w.u8(p.otherwise);
            }
        }
        w.u8(self.sched.priority.unwrap_or(0xFF));
        w.u8(self.sched.cost.unwrap_or(0xFF));
        for &(p, c) in &self.channels {
            w.u8(p);
            w.u8(c);
        }
        let n = &self.names;
        for s in n.symbols.iter().chain(&n.slots) {
            w.name(s);
        }
        for (s, t) in n.tensors.iter().zip(&self.tensors) {
            if self.debug_names || t.flags & TENSOR_ARRAY != 0 {
                w.name(s);
            }
        }
        if self.debug_names {
            for s in n
                .kernels
                .iter()
                .chain(&n.axes)
                .chain(&n.procs)
                .chain(&n.channels)
            {
                w.name(s);
            }
        }
        if !self.read_locs.is_empty() {
            w.u32(self.read_locs.len() as u32);
            for &(pc, loc) in &self.read_locs {
                w.u32(pc);
                w.u32(loc.start);
                w.u32(loc.end);
            }
        }
        let total = w.0.len() as u32;
        w.0[len_at..len_at + 4].copy_from_slice(&total.to_le_bytes());
        w.0
    }

    /// Reads the tables of `bytes`, checking the header and that every section is present.
    /// Meaning (indices, jumps, types) is checked by the decoder afterwards.
    pub(crate) fn read(bytes: &[u8]) -> Result<(Image, Offsets), DecodeError> {
        let mut r = Reader { bytes, pos: 0 };
        let magic = r.take(4, "the magic")?;
        if magic != MAGIC {
            let mut found = [0; 4];
            found.copy_from_slice(magic);
            return Err(DecodeError::BadMagic { found });
        }
        let version = r.u32("the version")?;
        if version != VERSION {
            return Err(DecodeError::BadVersion { found: version });
        }
        let n_insns = r.u32("the instruction count")? as usize;
        let n_axes = r.count32("the axis count")?;
        let n_kernels = r.count32("the kernel count")?;
        let n_tensors = r.count32("the tensor count")?;
        let n_symbols = usize::from(r.u16("the symbol count")?);
        let n_slots = usize::from(r.u16("the slot count")?);
        let n_regs = usize::from(r.u16("the register count")?);
        let n_exprs = usize::from(r.u16("the expression count")?);
        let n_ops = usize::from(r.u16("the expression op count")?);
        let n_consts = usize::from(r.u16("the constant count")?);
        let n_regions = usize::from(r.u16("the region count")?);
        let n_loops = usize::from(r.u16("the loop count")?);
        let n_keysets = usize::from(r.u16("the keyset count")?);
        let keyset_len = r.u8("the keyset length")?;
        let n_channels = usize::from(r.u8("the channel count")?);
        let n_procs = r.u8("the process count")?;
        let flags_at = r.pos;
        let flags = r.u8("the flags")?;
        let n_dimsets = usize::from(r.u16("the dimension list count")?);
        if flags & !(FLAG_DEBUG_NAMES | FLAG_READ_LOCS) != 0 {
            return Err(DecodeError::BadEntry {
                offset: flags_at,
                table: "header",
                index: 0,
                message: format!("unknown flags 0x{flags:02x}"),
            });
        }
        let total = r.u32("the total length")?;
        if u64::from(total) != bytes.len() as u64 {
            return Err(DecodeError::Length {
                header: u64::from(total),
                actual: bytes.len(),
            });
        }
        let mut off = Offsets {
            insns: r.pos,
            ..Offsets::default()
        };
        // Every count is checked against the bytes left before anything is allocated.
        r.need(n_insns.saturating_mul(Insn::SIZE), "the instructions")?;
        let mut insns = Vec::with_capacity(n_insns);
        for _ in 0..n_insns {
            insns.push(r.insn()?);
        }
        off.ops = r.pos;
        r.need(n_ops * Insn::SIZE, "the expression ops")?;
        let mut ops = Vec::with_capacity(n_ops);
        for _ in 0..n_ops {
            ops.push(r.insn()?);
        }
        off.exprs = r.pos;
        r.need(n_exprs * 4, "the expression table")?;
        let mut exprs = Vec::with_capacity(n_exprs);
        for _ in 0..n_exprs {
            exprs.push((
                r.u16("an expression start")?,
                r.u16("an expression length")?,
            ));
        }
        r.need(n_consts * 8, "the constant pool")?;
        let mut consts = Vec::with_capacity(n_consts);
        for _ in 0..n_consts {
            consts.push(r.u64("a constant")?);
        }
        off.regs = r.pos;
        let reg_types = r.take(n_regs, "the register types")?.to_vec();
        off.symbols = r.pos;
        let symbols = r.take(n_symbols, "the symbol table")?.to_vec();
        off.slots = r.pos;
        let slots = r.take(n_slots, "the slot table")?.to_vec();
        off.axes = r.pos;
        r.need(n_axes * 8, "the axis table")?;
        let mut axes = Vec::with_capacity(n_axes);
        for i in 0..n_axes {
            let at = r.pos;
            let kind = r.u8("an axis kind")?;
            if r.u8("an axis record")? != 0 {
                return Err(DecodeError::BadEntry {
                    offset: at,
                    table: "axes",
                    index: i,
                    message: "the reserved byte must be zero".into(),
                });
            }
            axes.push(AxisRec {
                kind,
                extent: r.u16("an axis extent")?,
                arr0: r.u16("an axis array")?,
                arr1: r.u16("an axis array")?,
            });
        }
        off.loops = r.pos;
        r.need(n_loops * 12, "the loop table")?;
        let mut loops = Vec::with_capacity(n_loops);
        for _ in 0..n_loops {
            let mut v = [0u16; 6];
            for x in &mut v {
                *x = r.u16("a loop record")?;
            }
            loops.push(LoopRec {
                axis: v[0],
                var0: v[1],
                var1: v[2],
                keyset: v[3],
                count: v[4],
                flags: v[5],
            });
        }
        r.need(n_tensors * 3, "the tensor table")?;
        let mut tensors = Vec::with_capacity(n_tensors);
        for i in 0..n_tensors {
            off.tensors.push(r.pos);
            let dtype = r.u8("a tensor dtype")?;
            let flags = r.u8("tensor flags")?;
            let rank = r.rank("a tensor rank", "tensors", i)?;
            let mut dims = Vec::with_capacity(rank);
            for _ in 0..rank {
                dims.push(r.u16("a tensor dimension")?);
            }
            tensors.push(TensorRec { dtype, flags, dims });
        }
        r.need(n_kernels * 3, "the kernel table")?;
        let mut kernels = Vec::with_capacity(n_kernels);
        for _ in 0..n_kernels {
            off.kernels.push(r.pos);
            let pool = r.u8("a kernel pool")?;
            let np = usize::from(r.u8("a kernel parameter count")?);
            let params = r.take(np, "kernel parameters")?.to_vec();
            let nt = r.u8("a kernel tier count")?;
            let tiers = if nt == 0xFF {
                None
            } else {
                let mut cases = Vec::with_capacity(usize::from(nt));
                for _ in 0..nt {
                    cases.push((r.u16("a tier condition")?, r.u16("a tier variant")?));
                }
                Some((cases, r.u16("a default tier")?))
            };
            kernels.push(KernelRec {
                pool,
                params,
                tiers,
            });
        }
        off.regions = r.pos;
        r.need(n_regions * 4, "the region table")?;
        let mut regions = Vec::with_capacity(n_regions);
        for _ in 0..n_regions {
            regions.push(RegionRec {
                tensor: r.u16("a region tensor")?,
                dims: r.u16("a region's dimension list")?,
            });
        }
        r.need(n_dimsets, "the dimension lists")?;
        let mut dimsets = Vec::with_capacity(n_dimsets);
        for i in 0..n_dimsets {
            off.dimsets.push(r.pos);
            let rank = r.rank("a dimension list's rank", "dimension lists", i)?;
            let mut dims = Vec::with_capacity(rank);
            for _ in 0..rank {
                dims.push((r.u16("a region start")?, r.u16("a region size")?));
            }
            dimsets.push(dims);
        }
        off.keysets = r.pos;
        let n_keys = n_keysets * usize::from(keyset_len);
        r.need(n_keys * 2, "the keysets")?;
        let mut keysets = Vec::with_capacity(n_keys);
        for _ in 0..n_keys {
            keysets.push(r.u16("a keyset entry")?);
        }
        off.sched = r.pos;
        let executors = r.u64("the executor count")?;
        let streams = r.u64("the stream count")?;
        let dispatch = r.dnode(0)?;
        let stream_by = match r.u8("the stream key")? {
            0xFF => None,
            s => Some(s),
        };
        let pools = match r.u8("the pool routing flag")? {
            0 => None,
            1 => {
                let metric = r.u8("the pool metric")?;
                let n = r.u8("the pool level count")?;
                let mut levels = Vec::new();
                for _ in 0..n {
                    levels.push((r.u64("a pool bound")? as i64, r.u8("a pool")?));
                }
                Some(PoolRec {
                    metric,
                    levels,
                    otherwise: r.u8("the default pool")?,
                })
            }
            _ => {
                return Err(DecodeError::BadEntry {
                    offset: r.pos - 1,
                    table: "schedule",
                    index: 0,
                    message: "the pool routing flag must be 0 or 1".into(),
                });
            }
        };
        let priority = match r.u8("the priority key")? {
            0xFF => None,
            s => Some(s),
        };
        let cost = match r.u8("the cycle cost key")? {
            0xFF => None,
            s => Some(s),
        };
        off.channels = r.pos;
        let mut channels = Vec::with_capacity(n_channels);
        for _ in 0..n_channels {
            channels.push((r.u8("a channel producer")?, r.u8("a channel consumer")?));
        }
        off.names = r.pos;
        let debug_names = flags & FLAG_DEBUG_NAMES != 0;
        let symbol_names = r.names(n_symbols)?;
        let slot_names = r.names(n_slots)?;
        let mut tensor_names = Vec::with_capacity(n_tensors);
        for t in &tensors {
            if debug_names || t.flags & TENSOR_ARRAY != 0 {
                tensor_names.push(r.names(1)?.pop().unwrap_or_default());
            } else {
                tensor_names.push(String::new());
            }
        }
        let optional = |r: &mut Reader<'_>, n: usize| -> Result<Vec<String>, DecodeError> {
            if debug_names {
                r.names(n)
            } else {
                Ok(vec![String::new(); n])
            }
        };
        let names = Names {
            symbols: symbol_names,
            slots: slot_names,
            tensors: tensor_names,
            kernels: optional(&mut r, n_kernels)?,
            axes: optional(&mut r, n_axes)?,
            procs: optional(&mut r, usize::from(n_procs))?,
            channels: optional(&mut r, n_channels)?,
        };
        off.read_locs = r.pos;
        let mut read_locs = Vec::new();
        if flags & FLAG_READ_LOCS != 0 {
            let n = r.u32("the read location count")? as usize;
            r.need(n.saturating_mul(12), "the read locations")?;
            for _ in 0..n {
                let pc = r.u32("a read location's instruction")?;
                let start = r.u32("a read location's start")?;
                let end = r.u32("a read location's end")?;
                read_locs.push((pc, Loc { start, end }));
            }
        }
        if r.pos != bytes.len() {
            return Err(DecodeError::Length {
                header: r.pos as u64,
                actual: bytes.len(),
            });
        }
        Ok((
            Image {
                insns,
                ops,
                exprs,
                consts,
                reg_types,
                symbols,
                slots,
                axes,
                loops,
                tensors,
                kernels,
                regions,
                dimsets,
                keyset_len,
                keysets,
                sched: SchedRec {
                    executors,
                    streams,
                    dispatch,
                    stream_by,
                    pools,
                    priority,
                    cost,
                },
                channels,
                n_procs,
                debug_names,
                names,
                read_locs,
            },
            off,
        ))
    }
}

struct Reader<'b> {
    bytes: &'b [u8],
    pos: usize,
}

impl<'b> Reader<'b> {
    fn need(&self, n: usize, what: &str) -> Result<(), DecodeError> {
        let have = self.bytes.len() - self.pos;
        if n > have {
            return Err(DecodeError::Truncated {
                offset: self.pos,
                what: what.to_string(),
                need: n,
                have,
            });
        }
        Ok(())
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'b [u8], DecodeError> {
        self.need(n, what)?;
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], DecodeError> {
        let mut a = [0; N];
        a.copy_from_slice(self.take(N, what)?);
        Ok(a)
    }

    fn u8(&mut self, what: &str) -> Result<u8, DecodeError> {
        Ok(self.array::<1>(what)?[0])
    }

    fn u16(&mut self, what: &str) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }

    fn u32(&mut self, what: &str) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &str) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A 32-bit count of a table indexed by 16-bit references.
    fn count32(&mut self, what: &str) -> Result<usize, DecodeError> {
        let at = self.pos;
        let n = self.u32(what)?;
        if n > u32::from(u16::MAX) {
            return Err(DecodeError::BadEntry {
                offset: at,
                table: "header",
                index: 0,
                message: format!("{what} is {n}, more than 65535"),
            });
        }
        Ok(n as usize)
    }

    fn rank(
        &mut self,
        what: &str,
        table: &'static str,
        index: usize,
    ) -> Result<usize, DecodeError> {
        let at = self.pos;
        let rank = usize::from(self.u8(what)?);
        if rank > MAX_RANK {
            return Err(DecodeError::BadEntry {
                offset: at,
                table,
                index,
                message: format!("rank {rank} is more than {MAX_RANK}"),
            });
        }
        Ok(rank)
    }

    fn insn(&mut self) -> Result<Insn, DecodeError> {
        let at = self.pos;
        let b: [u8; 8] = self.array("an instruction")?;
        let op = Op::from_byte(b[0]).ok_or(DecodeError::BadOpcode {
            offset: at,
            byte: b[0],
        })?;
        Ok(Insn {
            op,
            flags: b[1],
            a: u16::from_le_bytes([b[2], b[3]]),
            b: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
        })
    }

    fn dnode(&mut self, depth: usize) -> Result<DNodeRec, DecodeError> {
        let at = self.pos;
        if depth > MAX_DISPATCH_DEPTH {
            return Err(DecodeError::BadEntry {
                offset: at,
                table: "schedule",
                index: 0,
                message: format!("dispatch policies nest deeper than {MAX_DISPATCH_DEPTH}"),
            });
        }
        Ok(match self.u8("a dispatch policy")? {
            dnode::ROUND_ROBIN => DNodeRec::RoundRobin(self.u64("a round-robin count")?),
            dnode::AFFINITY => DNodeRec::Affinity(self.u8("an affinity key")?),
            dnode::HASH => DNodeRec::Hash(self.u8("a hash key")?),
            dnode::THRESHOLD => {
                let metric = self.u8("a threshold metric")?;
                let n = self.u8("a threshold level count")?;
                let mut levels = Vec::new();
                for _ in 0..n {
                    let b = self.u64("a threshold bound")? as i64;
                    levels.push((b, self.dnode(depth + 1)?));
                }
                DNodeRec::Threshold {
                    metric,
                    levels,
                    otherwise: Box::new(self.dnode(depth + 1)?),
                }
            }
            dnode::STATIC_PARTITION => {
                let n = usize::from(self.u16("a partition count")?);
                self.need(n * 8, "the partition starts")?;
                let mut starts = Vec::with_capacity(n);
                for _ in 0..n {
                    starts.push(self.u64("a partition start")?);
                }
                DNodeRec::StaticPartition(starts)
            }
            dnode::WORK_STEAL => DNodeRec::WorkSteal,
            other => {
                return Err(DecodeError::BadEntry {
                    offset: at,
                    table: "schedule",
                    index: 0,
                    message: format!("unknown dispatch policy code {other}"),
                });
            }
        })
    }

    fn names(&mut self, n: usize) -> Result<Vec<String>, DecodeError> {
        let mut out = Vec::with_capacity(n.min(self.bytes.len() - self.pos));
        for i in 0..n {
            let at = self.pos;
            let len = usize::from(self.u8("a name length")?);
            let raw = self.take(len, "a name")?;
            match std::str::from_utf8(raw) {
                Ok(s) => out.push(s.to_string()),
                Err(_) => {
                    return Err(DecodeError::BadEntry {
                        offset: at,
                        table: "names",
                        index: i,
                        message: "a name is not UTF-8".into(),
                    });
                }
            }
        }
        Ok(out)
    }
}
