//! The reader half of the byte layout: bytes to an [`Image`], section by section (header, code,
//! tables, schedule, names, read locations), each count checked against the bytes left before
//! anything is allocated.

use super::{
    AxisRec, DNodeRec, DimsRec, Image, KernelRec, LoopRec, Names, Offsets, PoolRec, RegionRec,
    SchedRec, TensorRec,
};
use crate::decode::DecodeError;
use crate::format::{
    FLAG_DEBUG_NAMES, FLAG_READ_LOCS, FLAG_STMT_LOCS, MAGIC, MAX_DISPATCH_DEPTH, MAX_RANK,
    TENSOR_ARRAY, VERSION, dnode,
};
use crate::op::{Insn, Op};
use pto_wsp_ir::Loc;

/// The counts and flags of the header.
struct Header {
    n_insns: usize,
    n_axes: usize,
    n_kernels: usize,
    n_tensors: usize,
    n_symbols: usize,
    n_slots: usize,
    n_regs: usize,
    n_exprs: usize,
    n_ops: usize,
    n_consts: usize,
    n_regions: usize,
    n_loops: usize,
    n_keysets: usize,
    keyset_len: u8,
    n_channels: usize,
    n_procs: u8,
    flags: u8,
    n_dimsets: usize,
}

/// The code sections: instructions, expression ops, the expression table and constants.
struct Code {
    insns: Vec<Insn>,
    ops: Vec<Insn>,
    exprs: Vec<(u16, u16)>,
    consts: Vec<u64>,
}

impl Image {
    /// Reads the tables of `bytes`, checking the header and that every section is present.
    /// Meaning (indices, jumps, types) is checked by the decoder afterwards.
    pub(crate) fn read(bytes: &[u8]) -> Result<(Image, Offsets), DecodeError> {
        let mut r = Reader { bytes, pos: 0 };
        let h = r.header()?;
        let mut off = Offsets {
            insns: r.pos,
            ..Offsets::default()
        };
        let code = r.code(&h, &mut off)?;
        off.regs = r.pos;
        let reg_types = r.take(h.n_regs, "the register types")?.to_vec();
        off.symbols = r.pos;
        let symbols = r.take(h.n_symbols, "the symbol table")?.to_vec();
        off.slots = r.pos;
        let slots = r.take(h.n_slots, "the slot table")?.to_vec();
        off.axes = r.pos;
        let axes = r.axes(h.n_axes)?;
        off.loops = r.pos;
        let loops = r.loops(h.n_loops)?;
        let tensors = r.tensors(h.n_tensors, &mut off.tensors)?;
        let kernels = r.kernels(h.n_kernels, &mut off.kernels)?;
        off.regions = r.pos;
        let regions = r.regions(h.n_regions)?;
        let dimsets = r.dimsets(h.n_dimsets, &mut off.dimsets)?;
        off.keysets = r.pos;
        let keysets = r.keysets(h.n_keysets * usize::from(h.keyset_len))?;
        off.sched = r.pos;
        let sched = r.sched()?;
        off.channels = r.pos;
        let mut channels = Vec::with_capacity(h.n_channels);
        for _ in 0..h.n_channels {
            channels.push((r.u8("a channel producer")?, r.u8("a channel consumer")?));
        }
        off.names = r.pos;
        let debug_names = h.flags & FLAG_DEBUG_NAMES != 0;
        let names = r.all_names(&h, &tensors)?;
        off.read_locs = r.pos;
        let read_locs = if h.flags & FLAG_READ_LOCS != 0 {
            r.loc_table("read location")?
        } else {
            Vec::new()
        };
        off.stmt_locs = r.pos;
        let stmt_locs = if h.flags & FLAG_STMT_LOCS != 0 {
            r.loc_table("statement location")?
        } else {
            Vec::new()
        };
        if r.pos != bytes.len() {
            return Err(DecodeError::Length {
                header: r.pos as u64,
                actual: bytes.len(),
            });
        }
        Ok((
            Image {
                insns: code.insns,
                ops: code.ops,
                exprs: code.exprs,
                consts: code.consts,
                reg_types,
                symbols,
                slots,
                axes,
                loops,
                tensors,
                kernels,
                regions,
                dimsets,
                keyset_len: h.keyset_len,
                keysets,
                sched,
                channels,
                n_procs: h.n_procs,
                debug_names,
                names,
                read_locs,
                stmt_locs,
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
    /// The header: magic, version, counts, flags and the total length (checked against the
    /// input's).
    fn header(&mut self) -> Result<Header, DecodeError> {
        let r = self;
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
        if flags & !(FLAG_DEBUG_NAMES | FLAG_READ_LOCS | FLAG_STMT_LOCS) != 0 {
            return Err(DecodeError::BadEntry {
                offset: flags_at,
                table: "header",
                index: 0,
                message: format!("unknown flags 0x{flags:02x}"),
            });
        }
        let total = r.u32("the total length")?;
        if u64::from(total) != r.bytes.len() as u64 {
            return Err(DecodeError::Length {
                header: u64::from(total),
                actual: r.bytes.len(),
            });
        }
        Ok(Header {
            n_insns,
            n_axes,
            n_kernels,
            n_tensors,
            n_symbols,
            n_slots,
            n_regs,
            n_exprs,
            n_ops,
            n_consts,
            n_regions,
            n_loops,
            n_keysets,
            keyset_len,
            n_channels,
            n_procs,
            flags,
            n_dimsets,
        })
    }

    /// Instructions, expression ops, the expression table and the constant pool.
    fn code(&mut self, h: &Header, off: &mut Offsets) -> Result<Code, DecodeError> {
        let r = self;
        // Every count is checked against the bytes left before anything is allocated.
        r.need(h.n_insns.saturating_mul(Insn::SIZE), "the instructions")?;
        let mut insns = Vec::with_capacity(h.n_insns);
        for _ in 0..h.n_insns {
            insns.push(r.insn()?);
        }
        off.ops = r.pos;
        r.need(h.n_ops * Insn::SIZE, "the expression ops")?;
        let mut ops = Vec::with_capacity(h.n_ops);
        for _ in 0..h.n_ops {
            ops.push(r.insn()?);
        }
        off.exprs = r.pos;
        r.need(h.n_exprs * 4, "the expression table")?;
        let mut exprs = Vec::with_capacity(h.n_exprs);
        for _ in 0..h.n_exprs {
            exprs.push((
                r.u16("an expression start")?,
                r.u16("an expression length")?,
            ));
        }
        r.need(h.n_consts * 8, "the constant pool")?;
        let mut consts = Vec::with_capacity(h.n_consts);
        for _ in 0..h.n_consts {
            consts.push(r.u64("a constant")?);
        }
        Ok(Code {
            insns,
            ops,
            exprs,
            consts,
        })
    }

    fn axes(&mut self, n_axes: usize) -> Result<Vec<AxisRec>, DecodeError> {
        let r = self;
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
        Ok(axes)
    }

    fn loops(&mut self, n_loops: usize) -> Result<Vec<LoopRec>, DecodeError> {
        let r = self;
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
        Ok(loops)
    }

    fn tensors(
        &mut self,
        n_tensors: usize,
        offsets: &mut Vec<usize>,
    ) -> Result<Vec<TensorRec>, DecodeError> {
        let r = self;
        r.need(n_tensors * 3, "the tensor table")?;
        let mut tensors = Vec::with_capacity(n_tensors);
        for i in 0..n_tensors {
            offsets.push(r.pos);
            let dtype = r.u8("a tensor dtype")?;
            let flags = r.u8("tensor flags")?;
            let rank = r.rank("a tensor rank", "tensors", i)?;
            let mut dims = Vec::with_capacity(rank);
            for _ in 0..rank {
                dims.push(r.u16("a tensor dimension")?);
            }
            tensors.push(TensorRec { dtype, flags, dims });
        }
        Ok(tensors)
    }

    fn kernels(
        &mut self,
        n_kernels: usize,
        offsets: &mut Vec<usize>,
    ) -> Result<Vec<KernelRec>, DecodeError> {
        let r = self;
        r.need(n_kernels * 3, "the kernel table")?;
        let mut kernels = Vec::with_capacity(n_kernels);
        for _ in 0..n_kernels {
            offsets.push(r.pos);
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
        Ok(kernels)
    }

    fn regions(&mut self, n_regions: usize) -> Result<Vec<RegionRec>, DecodeError> {
        let r = self;
        r.need(n_regions * 4, "the region table")?;
        let mut regions = Vec::with_capacity(n_regions);
        for _ in 0..n_regions {
            regions.push(RegionRec {
                tensor: r.u16("a region tensor")?,
                dims: r.u16("a region's dimension list")?,
            });
        }
        Ok(regions)
    }

    fn dimsets(
        &mut self,
        n_dimsets: usize,
        offsets: &mut Vec<usize>,
    ) -> Result<Vec<DimsRec>, DecodeError> {
        let r = self;
        r.need(n_dimsets, "the dimension lists")?;
        let mut dimsets = Vec::with_capacity(n_dimsets);
        for i in 0..n_dimsets {
            offsets.push(r.pos);
            let rank = r.rank("a dimension list's rank", "dimension lists", i)?;
            let mut dims = Vec::with_capacity(rank);
            for _ in 0..rank {
                dims.push((r.u16("a region start")?, r.u16("a region size")?));
            }
            dimsets.push(dims);
        }
        Ok(dimsets)
    }

    fn keysets(&mut self, n_keys: usize) -> Result<Vec<u16>, DecodeError> {
        self.need(n_keys * 2, "the keysets")?;
        let mut keysets = Vec::with_capacity(n_keys);
        for _ in 0..n_keys {
            keysets.push(self.u16("a keyset entry")?);
        }
        Ok(keysets)
    }

    /// The schedule section.
    fn sched(&mut self) -> Result<SchedRec, DecodeError> {
        let r = self;
        let executors = r.u64("the executor count")?;
        let streams = r.u64("the stream count")?;
        let dispatch = r.dnode(0)?;
        let stream_by = match r.u8("the stream key")? {
            0xFF => None,
            s => Some(s),
        };
        let pools = r.pools()?;
        let priority = match r.u8("the priority key")? {
            0xFF => None,
            s => Some(s),
        };
        let cost = match r.u8("the cycle cost key")? {
            0xFF => None,
            s => Some(s),
        };
        Ok(SchedRec {
            executors,
            streams,
            dispatch,
            stream_by,
            pools,
            priority,
            cost,
        })
    }

    /// Pool routing by a metric, if the flag says it is there.
    fn pools(&mut self) -> Result<Option<PoolRec>, DecodeError> {
        let r = self;
        Ok(match r.u8("the pool routing flag")? {
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
        })
    }

    /// The names section: symbols and slots always, tensors with bound contents always, the
    /// rest only with debug names (empty strings otherwise).
    fn all_names(&mut self, h: &Header, tensors: &[TensorRec]) -> Result<Names, DecodeError> {
        let r = self;
        let debug_names = h.flags & FLAG_DEBUG_NAMES != 0;
        let symbol_names = r.names(h.n_symbols)?;
        let slot_names = r.names(h.n_slots)?;
        let mut tensor_names = Vec::with_capacity(h.n_tensors);
        for t in tensors {
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
        Ok(Names {
            symbols: symbol_names,
            slots: slot_names,
            tensors: tensor_names,
            kernels: optional(r, h.n_kernels)?,
            axes: optional(r, h.n_axes)?,
            procs: optional(r, usize::from(h.n_procs))?,
            channels: optional(r, h.n_channels)?,
        })
    }

    /// A location table (read locations, statement locations): `what` names its entries.
    fn loc_table(&mut self, what: &str) -> Result<Vec<(u32, Loc)>, DecodeError> {
        let r = self;
        let mut table = Vec::new();
        let n = r.u32(&format!("the {what} count"))? as usize;
        r.need(n.saturating_mul(12), &format!("the {what}s"))?;
        for _ in 0..n {
            let pc = r.u32(&format!("a {what}'s instruction"))?;
            let start = r.u32(&format!("a {what}'s start"))?;
            let end = r.u32(&format!("a {what}'s end"))?;
            table.push((pc, Loc { start, end }));
        }
        Ok(table)
    }

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
