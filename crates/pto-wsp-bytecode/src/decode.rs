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

use crate::format::{
    AxisCode, LOOP_RANGE_SKIP, LOOP_ROW_SKIP, MAX_DEPTH, MAX_STACK, NO_KEYSET, NONE16,
    TENSOR_ARRAY, TENSOR_SHAPED, from_dtype_code, from_pool_code, from_scalar_code, from_tile_code,
};
use crate::image::{DNodeRec, Image, Offsets};
use crate::op::{Class, Insn, Op, Operand, expr_ops, stmt_ops};
use crate::program::{
    AxisDesc, DNode, DimPlan, ExprInfo, Fast, KernelDesc, Lin, LoadDesc, LoopDesc, NameTable,
    ParamDesc, Program, RegionDesc, Sched, TaskDesc, TensorDesc,
};
use pto_wsp_ir::ScalarType;

/// Why bytes are not a valid bytecode. Every variant names a byte offset (or the header).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The bytes end in the middle of something.
    #[error("truncated at byte {offset}: {what} needs {need} byte(s), {have} left")]
    Truncated {
        /// Where the missing part starts.
        offset: usize,
        /// What was being read.
        what: String,
        /// Bytes needed.
        need: usize,
        /// Bytes left.
        have: usize,
    },
    /// The first four bytes are not `PTOW`.
    #[error("not a pto-wsp bytecode: the magic at byte 0 is {found:02x?}, expected \"PTOW\"")]
    BadMagic {
        /// The bytes found.
        found: [u8; 4],
    },
    /// A format version this decoder does not read.
    #[error(
        "unsupported bytecode version {found} at byte 4 (this decoder reads version {})",
        crate::format::VERSION
    )]
    BadVersion {
        /// The version found.
        found: u32,
    },
    /// The length in the header, or the end of the last section, is not the input's length.
    #[error("length mismatch: the bytecode should be {header} bytes long, it is {actual}")]
    Length {
        /// The expected length.
        header: u64,
        /// The input's length.
        actual: usize,
    },
    /// A byte that is not an opcode.
    #[error("byte {offset}: unknown opcode 0x{byte:02x}")]
    BadOpcode {
        /// Where.
        offset: usize,
        /// The byte.
        byte: u8,
    },
    /// An expression opcode in the instruction stream, or the other way round.
    #[error("byte {offset}: `{op}` cannot stand in {stream}")]
    WrongStream {
        /// Where.
        offset: usize,
        /// The opcode's mnemonic.
        op: &'static str,
        /// `the instruction stream` or `expression code`.
        stream: &'static str,
    },
    /// An operand out of range or of the wrong kind.
    #[error("byte {offset}: `{op}` {field}: {message}")]
    BadOperand {
        /// Where the instruction is.
        offset: usize,
        /// The opcode's mnemonic.
        op: &'static str,
        /// Which field (`a`, `b`, `flags`, a reference).
        field: &'static str,
        /// What is wrong.
        message: String,
    },
    /// Structured control flow that does not nest or whose jumps miss their partners.
    #[error("byte {offset}: {message}")]
    Structure {
        /// Where.
        offset: usize,
        /// What is wrong.
        message: String,
    },
    /// Loops, blocks and conditionals nest deeper than the limit.
    #[error("byte {offset}: nesting deeper than {max} levels")]
    TooDeep {
        /// The instruction that goes too deep.
        offset: usize,
        /// The limit.
        max: usize,
    },
    /// An expression that needs a deeper stack than the limit.
    #[error("byte {offset}: expression {expr} needs a stack deeper than {max}")]
    StackTooDeep {
        /// The op that goes too deep.
        offset: usize,
        /// The expression.
        expr: usize,
        /// The limit.
        max: usize,
    },
    /// An ill-formed expression (type, underflow, jump, result).
    #[error("byte {offset}: expression {expr}: {message}")]
    BadExpr {
        /// Where.
        offset: usize,
        /// The expression.
        expr: usize,
        /// What is wrong.
        message: String,
    },
    /// A bad table entry.
    #[error("byte {offset}: {table} entry {index}: {message}")]
    BadEntry {
        /// Where the entry is.
        offset: usize,
        /// The table.
        table: &'static str,
        /// Its index.
        index: usize,
        /// What is wrong.
        message: String,
    },
}

fn entry(
    offset: usize,
    table: &'static str,
    index: usize,
    message: impl Into<String>,
) -> DecodeError {
    DecodeError::BadEntry {
        offset,
        table,
        index,
        message: message.into(),
    }
}

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

impl Decoder<'_> {
    fn run(&self, size: usize) -> Result<Program, DecodeError> {
        let img = self.img;
        let off = self.off;
        // Registers, symbols, slots.
        let mut reg_types = Vec::with_capacity(img.reg_types.len());
        for (i, &c) in img.reg_types.iter().enumerate() {
            reg_types.push(from_scalar_code(c).ok_or_else(|| {
                entry(off.regs + i, "registers", i, format!("bad type code {c}"))
            })?);
        }
        let ns = img.symbols.len();
        let nsl = img.slots.len();
        if ns + nsl > reg_types.len() {
            return Err(entry(
                off.regs,
                "registers",
                0,
                format!(
                    "{} registers cannot hold {ns} symbols and {nsl} slots",
                    reg_types.len()
                ),
            ));
        }
        let mut symbols = Vec::with_capacity(ns);
        for (i, &c) in img.symbols.iter().enumerate() {
            let t = from_scalar_code(c & 0x7F).ok_or_else(|| {
                entry(off.symbols + i, "symbols", i, format!("bad type code {c}"))
            })?;
            if t != reg_types[i] {
                return Err(entry(
                    off.symbols + i,
                    "symbols",
                    i,
                    "type differs from its register",
                ));
            }
            symbols.push((t, c & 0x80 != 0));
        }
        let mut slots = Vec::with_capacity(nsl);
        for (i, &c) in img.slots.iter().enumerate() {
            let t = from_scalar_code(c)
                .ok_or_else(|| entry(off.slots + i, "slots", i, format!("bad type code {c}")))?;
            if t != reg_types[ns + i] {
                return Err(entry(
                    off.slots + i,
                    "slots",
                    i,
                    "type differs from its register",
                ));
            }
            slots.push(t);
        }
        // Expressions.
        let mut exprs = Vec::with_capacity(img.exprs.len());
        let mut uses_args = Vec::with_capacity(img.exprs.len());
        for (i, &(start, len)) in img.exprs.iter().enumerate() {
            let (info, args) = self.expr(i, start, len, &reg_types)?;
            exprs.push(info);
            uses_args.push(args);
        }
        let dx = Exprs {
            exprs: &exprs,
            uses_args: &uses_args,
            reg_types: &reg_types,
        };
        // Tensors.
        let mut tensors = Vec::with_capacity(img.tensors.len());
        for (i, t) in img.tensors.iter().enumerate() {
            let at = off.tensors[i];
            let dtype = from_dtype_code(t.dtype).ok_or_else(|| {
                entry(
                    at,
                    "tensors",
                    i,
                    format!("bad element type code {}", t.dtype),
                )
            })?;
            if t.flags & !(TENSOR_SHAPED | TENSOR_ARRAY) != 0 {
                return Err(entry(
                    at,
                    "tensors",
                    i,
                    format!("bad flags 0x{:02x}", t.flags),
                ));
            }
            let shape = if t.flags & TENSOR_SHAPED != 0 {
                for &d in &t.dims {
                    dx.check(d, Want::Int, false, at, "tensors", i)?;
                    if !dx.regs_below(&img.ops, d, ns as u16) {
                        return Err(entry(
                            at,
                            "tensors",
                            i,
                            "a dimension reads more than symbols",
                        ));
                    }
                }
                Some(t.dims.clone())
            } else {
                if !t.dims.is_empty() {
                    return Err(entry(
                        at,
                        "tensors",
                        i,
                        "dimensions of a tensor without a shape",
                    ));
                }
                None
            };
            tensors.push(TensorDesc {
                dtype,
                shape,
                array: t.flags & TENSOR_ARRAY != 0,
            });
        }
        // An axis array is bound, or computed (`docs/SEMANTICS.md`, "Computed reads"): an
        // integer tensor with a shape and no bound contents, read whole through the sink.
        let array = |t: u16, at: usize, table: &'static str, i: usize| -> Result<(), DecodeError> {
            match tensors.get(usize::from(t)) {
                Some(d) if d.array => Ok(()),
                Some(d) if d.shape.is_some() && d.dtype.is_integer() => Ok(()),
                Some(_) => Err(entry(
                    at,
                    table,
                    i,
                    format!(
                        "tensor {t} has no bound contents and is not an integer tensor with a \
                         shape (a computed array)"
                    ),
                )),
                None => Err(entry(at, table, i, format!("tensor {t} does not exist"))),
            }
        };
        // Axes.
        let mut axes = Vec::with_capacity(img.axes.len());
        for (i, a) in img.axes.iter().enumerate() {
            let at = off.axes + i * 8;
            dx.check(a.extent, Want::Int, false, at, "axes", i)?;
            axes.push(match AxisCode::from_code(a.kind) {
                Some(AxisCode::Dense) if a.arr0 == NONE16 && a.arr1 == NONE16 => {
                    AxisDesc::Dense { extent: a.extent }
                }
                Some(AxisCode::Ragged) if a.arr1 == NONE16 => {
                    array(a.arr0, at, "axes", i)?;
                    AxisDesc::Ragged {
                        rows: a.extent,
                        lengths: a.arr0,
                    }
                }
                Some(AxisCode::Sparse) => {
                    array(a.arr0, at, "axes", i)?;
                    array(a.arr1, at, "axes", i)?;
                    AxisDesc::Sparse {
                        rows: a.extent,
                        indptr: a.arr0,
                        indices: a.arr1,
                    }
                }
                Some(_) => return Err(entry(at, "axes", i, "array fields do not fit the kind")),
                None => {
                    return Err(entry(
                        at,
                        "axes",
                        i,
                        format!("unknown axis kind {}", a.kind),
                    ));
                }
            });
        }
        // Keysets.
        let klen = usize::from(img.keyset_len);
        for (j, &k) in img.keysets.iter().enumerate() {
            if k != NONE16 {
                dx.check(
                    k,
                    Want::Int,
                    false,
                    off.keysets + 2 * j,
                    "keysets",
                    j / klen.max(1),
                )?;
            }
        }
        let n_keysets = img.keysets.len().checked_div(klen).unwrap_or(0);
        // Loops.
        let mut loops = Vec::with_capacity(img.loops.len());
        for (i, l) in img.loops.iter().enumerate() {
            let at = off.loops + i * 12;
            let Some(axis) = axes.get(usize::from(l.axis)) else {
                return Err(entry(
                    at,
                    "loops",
                    i,
                    format!("axis {} does not exist", l.axis),
                ));
            };
            let var = |r: u16| {
                reg_types.get(usize::from(r)) == Some(&ScalarType::I64)
                    && usize::from(r) >= ns + nsl
            };
            let two = !matches!(axis, AxisDesc::Dense { .. });
            if !var(l.var0) || (two && !var(l.var1)) || (!two && l.var1 != NONE16) {
                return Err(entry(
                    at,
                    "loops",
                    i,
                    "loop variables must be i64 variable registers, one per axis dimension",
                ));
            }
            let hoist = if l.keyset == NONE16 {
                None
            } else if usize::from(l.keyset) < n_keysets {
                Some(l.keyset)
            } else {
                return Err(entry(
                    at,
                    "loops",
                    i,
                    format!("keyset {} does not exist", l.keyset),
                ));
            };
            let count = if l.count == NONE16 {
                None
            } else {
                dx.check(
                    l.count,
                    Want::Exactly(ScalarType::I64),
                    false,
                    at,
                    "loops",
                    i,
                )?;
                Some(l.count)
            };
            if l.flags & !(LOOP_ROW_SKIP | LOOP_RANGE_SKIP) != 0 {
                return Err(entry(
                    at,
                    "loops",
                    i,
                    format!("bad flags 0x{:04x}", l.flags),
                ));
            }
            let row_skip = l.flags & LOOP_ROW_SKIP != 0;
            let range_skip = l.flags & LOOP_RANGE_SKIP != 0;
            if (row_skip || range_skip) && count.is_none() {
                return Err(entry(at, "loops", i, "skipping needs a task count"));
            }
            if row_skip && (!two || hoist.is_none()) {
                return Err(entry(
                    at,
                    "loops",
                    i,
                    "row skipping needs a ragged or sparse hoisting loop",
                ));
            }
            loops.push(LoopDesc {
                axis: l.axis,
                var0: l.var0,
                var1: l.var1,
                hoist,
                count,
                row_skip,
                range_skip,
            });
        }
        // Kernels.
        let mut kernels = Vec::with_capacity(img.kernels.len());
        for (i, k) in img.kernels.iter().enumerate() {
            let at = off.kernels[i];
            let pool = from_pool_code(k.pool)
                .ok_or_else(|| entry(at, "kernels", i, format!("bad pool code {}", k.pool)))?;
            let mut params = Vec::with_capacity(k.params.len());
            let mut scalar_types = Vec::new();
            for &c in &k.params {
                params.push(if let Some(a) = from_tile_code(c) {
                    ParamDesc::Tile(a)
                } else if let Some(t) = from_scalar_code(c) {
                    scalar_types.push(t);
                    ParamDesc::Scalar(t)
                } else {
                    return Err(entry(at, "kernels", i, format!("bad parameter code {c}")));
                });
            }
            if let Some((cases, default)) = &k.tiers {
                for &(c, v) in cases {
                    dx.check(c, Want::Bool, true, at, "kernels", i)?;
                    if !dx.regs_below(&img.ops, c, ns as u16) {
                        return Err(entry(
                            at,
                            "kernels",
                            i,
                            "a tier condition reads more than symbols",
                        ));
                    }
                    if let Err(m) = dx.args_fit(&img.ops, c, &scalar_types) {
                        return Err(entry(at, "kernels", i, m));
                    }
                    if usize::from(v) >= img.kernels.len() {
                        return Err(entry(
                            at,
                            "kernels",
                            i,
                            format!("tier variant {v} does not exist"),
                        ));
                    }
                }
                if usize::from(*default) >= img.kernels.len() {
                    return Err(entry(
                        at,
                        "kernels",
                        i,
                        format!("default tier {default} does not exist"),
                    ));
                }
            }
            kernels.push(KernelDesc {
                pool,
                params,
                scalar_types,
                tiers: k.tiers.clone(),
            });
        }
        // Dimension lists, then regions (a tensor and a dimension list of its rank).
        let mut dims = Vec::new();
        let mut dimsets = Vec::with_capacity(img.dimsets.len());
        for (i, d) in img.dimsets.iter().enumerate() {
            let at = off.dimsets[i];
            let start = dims.len() as u32;
            for &(s, z) in d {
                dx.check(s, Want::Int, false, at, "dimension lists", i)?;
                if z != NONE16 {
                    dx.check(z, Want::Int, false, at, "dimension lists", i)?;
                }
                dims.push((s, z));
            }
            dimsets.push(start..dims.len() as u32);
        }
        let mut regions = Vec::with_capacity(img.regions.len());
        for (i, r) in img.regions.iter().enumerate() {
            let at = off.regions + 4 * i;
            let rank = match tensors.get(usize::from(r.tensor)) {
                Some(TensorDesc { shape: Some(s), .. }) => s.len(),
                Some(_) => {
                    return Err(entry(
                        at,
                        "regions",
                        i,
                        format!("tensor {} has no shape", r.tensor),
                    ));
                }
                None => {
                    return Err(entry(
                        at,
                        "regions",
                        i,
                        format!("tensor {} does not exist", r.tensor),
                    ));
                }
            };
            let Some(range) = dimsets.get(usize::from(r.dims)) else {
                return Err(entry(
                    at,
                    "regions",
                    i,
                    format!("dimension list {} does not exist", r.dims),
                ));
            };
            if range.len() != rank {
                return Err(entry(
                    at,
                    "regions",
                    i,
                    format!("{} dimension(s), the tensor has {rank}", range.len()),
                ));
            }
            regions.push(RegionDesc {
                tensor: r.tensor,
                dims: range.clone(),
            });
        }
        // Schedule.
        let s = &img.sched;
        let limit = u64::from(u32::MAX) + 1;
        if s.executors == 0 || s.executors > limit || s.streams == 0 || s.streams > limit {
            return Err(entry(
                off.sched,
                "schedule",
                0,
                "executors and streams must be between 1 and 2^32",
            ));
        }
        let mut nodes = Vec::new();
        self.dnode(&s.dispatch, klen, &mut nodes)?;
        let slot_ok = |k: u8| usize::from(k) < klen;
        if s.stream_by.is_some_and(|k| !slot_ok(k)) {
            return Err(entry(
                off.sched,
                "schedule",
                0,
                "the stream key slot does not exist",
            ));
        }
        if s.priority.is_some_and(|k| !slot_ok(k)) || s.cost.is_some_and(|k| !slot_ok(k)) {
            return Err(entry(
                off.sched,
                "schedule",
                0,
                "the priority or cycle cost key slot does not exist",
            ));
        }
        let pools = match &s.pools {
            None => None,
            Some(p) => {
                if !slot_ok(p.metric) {
                    return Err(entry(
                        off.sched,
                        "schedule",
                        0,
                        "the pool metric slot does not exist",
                    ));
                }
                let mut levels = Vec::new();
                for &(b, c) in &p.levels {
                    levels.push((
                        b,
                        from_pool_code(c)
                            .ok_or_else(|| entry(off.sched, "schedule", 0, "bad pool code"))?,
                    ));
                }
                let otherwise = from_pool_code(p.otherwise)
                    .ok_or_else(|| entry(off.sched, "schedule", 0, "bad pool code"))?;
                Some((p.metric, levels, otherwise))
            }
        };
        // Hoisting loops decide targets once per iteration: the policy must not read the task
        // index, and their keysets must hold every key the policy reads.
        let mut used_slots = Vec::new();
        let mut index_free = true;
        for n in &nodes {
            match n {
                DNode::Affinity(k) | DNode::Hash(k) => used_slots.push(*k),
                DNode::Threshold { metric, .. } => used_slots.push(*metric),
                DNode::RoundRobin(_) | DNode::StaticPartition(_) | DNode::WorkSteal => {
                    index_free = false;
                }
            }
        }
        for (i, l) in loops.iter().enumerate() {
            if let Some(k) = l.hoist {
                let ks = &img.keysets[usize::from(k) * klen..][..klen];
                if !index_free || used_slots.iter().any(|&s| ks[usize::from(s)] == NONE16) {
                    return Err(entry(
                        off.loops + i * 12,
                        "loops",
                        i,
                        "a hoisting loop needs an index-free dispatch policy and every key it reads",
                    ));
                }
            }
        }
        let n_procs = usize::from(img.n_procs);
        for (i, &(p, c)) in img.channels.iter().enumerate() {
            if (p != 0xFF && usize::from(p) >= n_procs) || (c != 0xFF && usize::from(c) >= n_procs)
            {
                return Err(entry(
                    off.channels + 2 * i,
                    "channels",
                    i,
                    "process does not exist",
                ));
            }
        }
        let mut prog = Program {
            size,
            insns: img.insns.clone(),
            aux: vec![0; img.insns.len()],
            ops: img.ops.clone(),
            exprs,
            consts: img.consts.clone(),
            reg_types,
            symbols,
            slots,
            axes,
            loops,
            tensors,
            kernels,
            regions,
            dims,
            tasks: Vec::new(),
            lins: Vec::new(),
            dim_plans: Vec::new(),
            region_outs: Vec::new(),
            shape_off: Vec::new(),
            csp: !img.channels.is_empty() || img.n_procs > 1,
            task_scalars: Vec::new(),
            task_regions: Vec::new(),
            loads: Vec::new(),
            keyset_len: klen,
            keysets: img.keysets.clone(),
            sched: Sched {
                executors: s.executors,
                streams: s.streams,
                dispatch: nodes,
                stream_by: s.stream_by,
                pools,
                priority: s.priority,
                cost: s.cost,
            },
            channels: img.channels.clone(),
            n_procs,
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
        };
        let mut off = 0u32;
        for t in &prog.tensors {
            prog.shape_off.push(off);
            off += t.shape.as_ref().map_or(0, Vec::len) as u32;
        }
        self.structure(&mut prog, &uses_args)?;
        // The read-location side table (after the instructions are checked): increasing pcs of `read`s and loops, sane locations.
        for (i, &(pc, loc)) in img.read_locs.iter().enumerate() {
            let at = self.off.read_locs + 4 + 12 * i;
            let op = img.insns.get(pc as usize).map(|x| x.op);
            let message = if !matches!(op, Some(Op::Read | Op::Loop)) {
                Some(format!("instruction {pc} is not a `read` or a `loop`"))
            } else if i > 0 && img.read_locs[i - 1].0 >= pc {
                Some("instructions are not in increasing order".to_string())
            } else if loc.start > loc.end {
                Some(format!(
                    "location {}..{} ends before it starts",
                    loc.start, loc.end
                ))
            } else {
                None
            };
            if let Some(m) = message {
                return Err(entry(at, "read locations", i, m));
            }
        }
        plan(&mut prog);
        // The interpreter finds a task's plan through its instruction: `b` (the keyset, kept in
        // the task's descriptor) becomes the task's index.
        for pc in 0..prog.insns.len() {
            if prog.insns[pc].op == Op::Task {
                prog.insns[pc].b = prog.aux[pc];
            }
        }
        Ok(prog)
    }

    fn dnode(&self, d: &DNodeRec, klen: usize, out: &mut Vec<DNode>) -> Result<u32, DecodeError> {
        let at = self.off.sched;
        let slot = |k: u8| -> Result<u8, DecodeError> {
            if usize::from(k) < klen {
                Ok(k)
            } else {
                Err(entry(
                    at,
                    "schedule",
                    0,
                    format!("dispatch key slot {k} does not exist"),
                ))
            }
        };
        let id = out.len() as u32;
        out.push(DNode::WorkSteal);
        let node = match d {
            DNodeRec::RoundRobin(0) => return Err(entry(at, "schedule", 0, "round_robin(0)")),
            DNodeRec::RoundRobin(n) => DNode::RoundRobin(*n),
            DNodeRec::Affinity(k) => DNode::Affinity(slot(*k)?),
            DNodeRec::Hash(k) => DNode::Hash(slot(*k)?),
            DNodeRec::Threshold {
                metric,
                levels,
                otherwise,
            } => {
                let metric = slot(*metric)?;
                let mut ls = Vec::new();
                for (b, n) in levels {
                    ls.push((*b, self.dnode(n, klen, out)?));
                }
                let otherwise = self.dnode(otherwise, klen, out)?;
                DNode::Threshold {
                    metric,
                    levels: ls,
                    otherwise,
                }
            }
            DNodeRec::StaticPartition(starts) => {
                if starts.first() != Some(&0) || starts.windows(2).any(|w| w[1] <= w[0]) {
                    return Err(entry(
                        at,
                        "schedule",
                        0,
                        "static_partition starts must begin at 0 and increase",
                    ));
                }
                DNode::StaticPartition(starts.clone())
            }
            DNodeRec::WorkSteal => DNode::WorkSteal,
        };
        out[id as usize] = node;
        Ok(id)
    }

    /// Checks expression `i` and finds its type and fast form.
    fn expr(
        &self,
        i: usize,
        start: u16,
        len: u16,
        regs: &[ScalarType],
    ) -> Result<(ExprInfo, bool), DecodeError> {
        let ops = &self.img.ops;
        let (start, len) = (usize::from(start), usize::from(len));
        let at0 = self.off.exprs + 4 * i;
        if len == 0 || start + len > ops.len() {
            return Err(DecodeError::BadExpr {
                offset: at0,
                expr: i,
                message: format!(
                    "ops {start}..{} are not inside the {} ops",
                    start + len,
                    ops.len()
                ),
            });
        }
        let code = &ops[start..start + len];
        let bad = |k: usize, message: String| DecodeError::BadExpr {
            offset: self.off.op(start + k),
            expr: i,
            message,
        };
        use ScalarType::{Bool, I64, U64};
        // Stack of types; `None` after an unconditional jump until a jump target is reached.
        let mut stack: Option<Vec<ScalarType>> = Some(Vec::new());
        // Stack expected at each op that is a jump target (and at the end, index `len`).
        let mut targets: Vec<Option<Vec<ScalarType>>> = vec![None; len + 1];
        let mut uses_args = false;
        for (k, insn) in code.iter().enumerate() {
            if insn.op.class() != Class::Expr {
                return Err(DecodeError::WrongStream {
                    offset: self.off.op(start + k),
                    op: insn.op.mnemonic(),
                    stream: "expression code",
                });
            }
            if let Some(t) = targets[k].take() {
                match &stack {
                    Some(s) if *s != t => {
                        return Err(bad(k, "stacks disagree where two paths meet".into()));
                    }
                    Some(_) => {}
                    None => stack = Some(t),
                }
            }
            let Some(st) = stack.as_mut() else {
                return Err(bad(k, "unreachable op".into()));
            };
            let zero_a = insn.op.operand_a() == Operand::Zero && insn.a != 0;
            let zero_b = insn.op.operand_b() == Operand::Zero && insn.b != 0;
            let flags_used = matches!(insn.op, Op::Ldc | Op::Arg);
            if zero_a || zero_b || (!flags_used && insn.flags != 0) {
                return Err(bad(
                    k,
                    format!("`{}` has a non-zero unused field", insn.op.mnemonic()),
                ));
            }
            let pop = |st: &mut Vec<ScalarType>, k: usize| {
                st.pop().ok_or_else(|| bad(k, "stack underflow".into()))
            };
            let jump = |st: &Vec<ScalarType>,
                        k: usize,
                        targets: &mut Vec<Option<Vec<ScalarType>>>|
             -> Result<(), DecodeError> {
                let t = k + 1 + usize::from(insn.a);
                if t > len {
                    return Err(bad(k, format!("jump past the end ({t} > {len})")));
                }
                match &targets[t] {
                    Some(prev) if prev != st => {
                        Err(bad(k, "stacks disagree where two paths meet".into()))
                    }
                    _ => {
                        targets[t] = Some(st.clone());
                        Ok(())
                    }
                }
            };
            match insn.op {
                Op::Ldr => {
                    let t = *regs
                        .get(usize::from(insn.a))
                        .ok_or_else(|| bad(k, format!("register {} does not exist", insn.a)))?;
                    st.push(t);
                }
                Op::Ldi => st.push(I64),
                Op::Ldu => st.push(U64),
                Op::Ldb => {
                    if insn.b > 1 {
                        return Err(bad(k, "a bool must be 0 or 1".into()));
                    }
                    st.push(Bool);
                }
                Op::Ldc => {
                    if usize::from(insn.a) >= self.img.consts.len() {
                        return Err(bad(k, format!("constant {} does not exist", insn.a)));
                    }
                    match from_scalar_code(insn.flags) {
                        Some(t @ (I64 | U64)) => st.push(t),
                        _ => return Err(bad(k, "a constant must be i64 or u64".into())),
                    }
                }
                Op::Arg => {
                    uses_args = true;
                    st.push(
                        from_scalar_code(insn.flags)
                            .ok_or_else(|| bad(k, "bad type code".into()))?,
                    );
                }
                Op::NegI | Op::NegU | Op::Not | Op::AddImm | Op::SubImm | Op::MulImm => {
                    let want = match insn.op {
                        Op::NegU => U64,
                        Op::Not => Bool,
                        _ => I64,
                    };
                    if pop(st, k)? != want {
                        return Err(bad(k, format!("`{}` needs a {want}", insn.op.mnemonic())));
                    }
                    st.push(want);
                }
                Op::AddI
                | Op::SubI
                | Op::MulI
                | Op::DivI
                | Op::RemI
                | Op::MinI
                | Op::MaxI
                | Op::AddU
                | Op::SubU
                | Op::MulU
                | Op::DivU
                | Op::RemU
                | Op::MinU
                | Op::MaxU
                | Op::LtI
                | Op::LeI
                | Op::GtI
                | Op::GeI => {
                    let want = match insn.op {
                        Op::AddU
                        | Op::SubU
                        | Op::MulU
                        | Op::DivU
                        | Op::RemU
                        | Op::MinU
                        | Op::MaxU => U64,
                        _ => I64,
                    };
                    let (b, a) = (pop(st, k)?, pop(st, k)?);
                    if a != want || b != want {
                        return Err(bad(
                            k,
                            format!(
                                "`{}` needs two {want}s, found {a} and {b}",
                                insn.op.mnemonic()
                            ),
                        ));
                    }
                    st.push(
                        if matches!(insn.op, Op::LtI | Op::LeI | Op::GtI | Op::GeI) {
                            Bool
                        } else {
                            want
                        },
                    );
                }
                Op::LtU | Op::LeU | Op::GtU | Op::GeU | Op::Eq | Op::Ne => {
                    let (b, a) = (pop(st, k)?, pop(st, k)?);
                    let ok = a == b && (matches!(insn.op, Op::Eq | Op::Ne) || a != I64);
                    if !ok {
                        return Err(bad(
                            k,
                            format!("`{}` cannot compare {a} and {b}", insn.op.mnemonic()),
                        ));
                    }
                    st.push(Bool);
                }
                Op::AndSc | Op::OrSc => {
                    if st.last() != Some(&Bool) {
                        return Err(bad(k, format!("`{}` needs a bool", insn.op.mnemonic())));
                    }
                    jump(st, k, &mut targets)?;
                    st.pop();
                }
                Op::Jz => {
                    if pop(st, k)? != Bool {
                        return Err(bad(k, "`jz` needs a bool".into()));
                    }
                    jump(st, k, &mut targets)?;
                }
                Op::Jmp => {
                    jump(st, k, &mut targets)?;
                    stack = None;
                }
                stmt_ops!() => {
                    return Err(DecodeError::WrongStream {
                        offset: self.off.op(start + k),
                        op: insn.op.mnemonic(),
                        stream: "expression code",
                    });
                }
            }
            if let Some(st) = &stack
                && st.len() > MAX_STACK
            {
                return Err(DecodeError::StackTooDeep {
                    offset: self.off.op(start + k),
                    expr: i,
                    max: MAX_STACK,
                });
            }
        }
        let end = match (stack, targets[len].take()) {
            (Some(s), Some(t)) if s != t => {
                return Err(bad(len - 1, "stacks disagree at the end".into()));
            }
            (Some(s), _) => s,
            (None, Some(t)) => t,
            (None, None) => return Err(bad(len - 1, "no path reaches the end".into())),
        };
        let [ty] = end[..] else {
            return Err(bad(len - 1, format!("leaves {} values, not 1", end.len())));
        };
        Ok((
            ExprInfo {
                start: start as u32,
                len: len as u32,
                ty,
                fast: fast(code, regs, &self.img.consts),
            },
            uses_args,
        ))
    }

    fn structure(&self, p: &mut Program, uses_args: &[bool]) -> Result<(), DecodeError> {
        #[derive(Clone, Copy, PartialEq, Eq)]
        enum Open {
            Proc,
            Loop { hoist: bool },
            Consume,
            If,
            Else { if_pc: usize },
            Seq,
            While,
        }
        let insns = &self.img.insns;
        let n = insns.len();
        let mut stack: Vec<(Open, usize)> = Vec::new();
        let mut hoisting = 0usize;
        let mut next_proc = 0usize;
        let mut pc = 0;
        let dx = Exprs {
            exprs: &p.exprs,
            uses_args,
            reg_types: &p.reg_types,
        };
        let ns = p.symbols.len();
        while pc < n {
            let insn = insns[pc];
            let at = self.off.insn(pc);
            let mn = insn.op.mnemonic();
            let bad = |field: &'static str, message: String| DecodeError::BadOperand {
                offset: at,
                op: mn,
                field,
                message,
            };
            let structure = |message: String| DecodeError::Structure {
                offset: at,
                message,
            };
            if insn.op.class() != Class::Stmt {
                return Err(DecodeError::WrongStream {
                    offset: at,
                    op: mn,
                    stream: "the instruction stream",
                });
            }
            // Generic operand ranges, by the table.
            for (field, kind, v) in [
                ("a", insn.op.operand_a(), insn.a as u32),
                ("b", insn.op.operand_b(), insn.b),
            ] {
                let limit = match kind {
                    Operand::Zero => {
                        if v != 0 {
                            return Err(bad(field, format!("unused field is {v}, must be 0")));
                        }
                        continue;
                    }
                    Operand::Reg => p.reg_types.len(),
                    Operand::Expr => p.exprs.len(),
                    Operand::Kernel => p.kernels.len(),
                    Operand::Loop => p.loops.len(),
                    Operand::Tensor => p.tensors.len(),
                    Operand::Proc => p.n_procs,
                    Operand::Channel => p.channels.len(),
                    Operand::Pc => n,
                    Operand::Keyset => {
                        if v == NO_KEYSET && p.keyset_len == 0 {
                            continue;
                        }
                        p.keysets.len().checked_div(p.keyset_len).unwrap_or(0)
                    }
                    Operand::Refs
                    | Operand::Imm
                    | Operand::UImm
                    | Operand::Const
                    | Operand::Arg
                    | Operand::Offset => continue,
                };
                if v as usize >= limit {
                    return Err(bad(
                        field,
                        format!("{kind:?} {v} does not exist (there are {limit})").to_lowercase(),
                    ));
                }
            }
            let flag_limit = match insn.op {
                Op::Loop | Op::Task => 1,
                Op::Args => 3,
                Op::Consume => 255,
                _ => 0,
            };
            if insn.flags > flag_limit {
                return Err(bad(
                    "flags",
                    format!("0x{:02x} is not a valid flag set", insn.flags),
                ));
            }
            if stack.is_empty() && !matches!(insn.op, Op::Proc | Op::Halt) {
                return Err(structure(format!("`{mn}` outside a process body")));
            }
            if stack.len() >= MAX_DEPTH {
                return Err(DecodeError::TooDeep {
                    offset: at,
                    max: MAX_DEPTH,
                });
            }
            let top = stack.last().copied();
            let partner = |want: &[Open]| -> Result<usize, DecodeError> {
                match top {
                    Some((o, opc)) if want.contains(&o) && insn.b as usize == opc => Ok(opc),
                    _ => Err(structure(format!(
                        "`{mn}` does not close the construct it names (instruction {})",
                        insn.b
                    ))),
                }
            };
            let mut next = pc + 1;
            match insn.op {
                Op::Halt => {
                    if !stack.is_empty() || pc + 1 != n || next_proc != p.n_procs {
                        return Err(structure(
                            "`halt` must be the last instruction, after every process".into(),
                        ));
                    }
                }
                Op::Nop => {}
                Op::Proc => {
                    if !stack.is_empty() || usize::from(insn.a) != next_proc {
                        return Err(structure(format!("process {} out of order", insn.a)));
                    }
                    next_proc += 1;
                    stack.push((Open::Proc, pc));
                }
                Op::EndProc => {
                    let o = partner(&[Open::Proc])?;
                    if insns[o].b as usize != pc {
                        return Err(structure("`proc` does not point at this `endproc`".into()));
                    }
                    stack.pop();
                }
                Op::Loop => {
                    let hoist = p.loops[usize::from(insn.a)].hoist.is_some();
                    if insn.b as usize <= pc {
                        return Err(structure("`loop` must jump forward".into()));
                    }
                    if hoist {
                        hoisting += 1;
                    }
                    stack.push((Open::Loop { hoist }, pc));
                }
                Op::Consume => {
                    if usize::from(insn.flags) >= p.channels.len() {
                        return Err(bad(
                            "flags",
                            format!("channel {} does not exist", insn.flags),
                        ));
                    }
                    let r = usize::from(insn.a);
                    if p.reg_types[r] != ScalarType::I64 || r < ns + p.slots.len() {
                        return Err(bad(
                            "a",
                            "a consume variable must be an i64 variable register".into(),
                        ));
                    }
                    if insn.b as usize <= pc {
                        return Err(structure("`consume` must jump forward".into()));
                    }
                    stack.push((Open::Consume, pc));
                }
                Op::Next => {
                    let o = match top {
                        Some((Open::Loop { .. } | Open::Consume, o)) if insn.b as usize == o => o,
                        _ => {
                            return Err(structure(
                                "`next` does not close the loop it names".into(),
                            ));
                        }
                    };
                    if insns[o].b as usize != pc {
                        return Err(structure("the loop does not point at this `next`".into()));
                    }
                    if let Some((Open::Loop { hoist: true }, _)) = top {
                        hoisting -= 1;
                    }
                    stack.pop();
                }
                Op::If => {
                    dx.check(insn.a, Want::Bool, false, at, "instructions", pc)?;
                    if insn.b as usize <= pc {
                        return Err(structure("`if` must jump forward".into()));
                    }
                    stack.push((Open::If, pc));
                }
                Op::Else => {
                    let Some((Open::If, o)) = top else {
                        return Err(structure("`else` outside an `if`".into()));
                    };
                    if insns[o].b as usize != pc {
                        return Err(structure("the `if` does not point at this `else`".into()));
                    }
                    if insn.b as usize <= pc {
                        return Err(structure("`else` must jump forward".into()));
                    }
                    stack.pop();
                    stack.push((Open::Else { if_pc: o }, pc));
                }
                Op::EndIf => {
                    let (o, opener) = match top {
                        Some((Open::If, o)) => (o, o),
                        Some((Open::Else { if_pc }, e)) => (e, if_pc),
                        _ => return Err(structure("`endif` outside an `if`".into())),
                    };
                    if insns[o].b as usize != pc || insn.b as usize != opener {
                        return Err(structure(
                            "`endif` and its `if` / `else` do not point at each other".into(),
                        ));
                    }
                    stack.pop();
                }
                Op::Seq => {
                    if insn.b as usize <= pc {
                        return Err(structure("`seq` must jump forward".into()));
                    }
                    stack.push((Open::Seq, pc));
                }
                Op::While => {
                    dx.check(
                        insn.a,
                        Want::Exactly(ScalarType::I64),
                        false,
                        at,
                        "instructions",
                        pc,
                    )?;
                    if insn.b as usize <= pc {
                        return Err(structure("`while` must jump forward".into()));
                    }
                    stack.push((Open::While, pc));
                }
                Op::EndWhile => {
                    dx.check(insn.a, Want::Bool, false, at, "instructions", pc)?;
                    let o = partner(&[Open::While])?;
                    if insns[o].b as usize != pc {
                        return Err(structure("`while` does not point at this `wend`".into()));
                    }
                    stack.pop();
                }
                Op::Break => {
                    dx.check(insn.a, Want::Bool, false, at, "instructions", pc)?;
                    // The innermost enclosing `while`, with no `consume` in between (a break
                    // never leaves a consume).
                    let target = stack
                        .iter()
                        .rev()
                        .take_while(|(o, _)| !matches!(o, Open::Consume | Open::Proc))
                        .find(|(o, _)| *o == Open::While)
                        .map(|&(_, w)| w);
                    if target != Some(insn.b as usize) {
                        return Err(structure(format!(
                            "`break` does not name its innermost enclosing `while` (instruction {})",
                            insn.b
                        )));
                    }
                }
                Op::Step => {
                    partner(&[Open::Seq])?;
                }
                Op::SeqEnd => {
                    let o = partner(&[Open::Seq])?;
                    if insns[o].b as usize != pc {
                        return Err(structure("`seq` does not point at this `seqend`".into()));
                    }
                    stack.pop();
                }
                Op::Task => {
                    let k = usize::from(insn.a);
                    let hoisted = insn.flags & 1 != 0;
                    if hoisted && hoisting == 0 {
                        return Err(bad(
                            "flags",
                            "a hoisted task outside a hoisting loop".into(),
                        ));
                    }
                    let keyset = if p.keyset_len == 0 {
                        None
                    } else {
                        let ks = &p.keysets[insn.b as usize * p.keyset_len..][..p.keyset_len];
                        if ks.contains(&NONE16) {
                            return Err(bad("b", "a task keyset lacks a key".into()));
                        }
                        Some(insn.b)
                    };
                    let params = p.kernels[k].params.clone();
                    let refs = self.refs(pc + 1, params.len(), &mut next)?;
                    let s0 = p.task_scalars.len() as u32;
                    let r0 = p.task_regions.len() as u32;
                    let mut coords = 0;
                    for (j, (param, r)) in params.iter().zip(&refs).enumerate() {
                        let rat = self.off.insn(pc + 1 + j / 3);
                        match param {
                            ParamDesc::Scalar(t) => {
                                dx.check(*r, Want::Exactly(*t), false, rat, "task arguments", j)?;
                                p.task_scalars.push(*r);
                            }
                            ParamDesc::Tile(_) => {
                                let Some(reg) = p.regions.get(usize::from(*r)) else {
                                    return Err(entry(
                                        rat,
                                        "task arguments",
                                        j,
                                        format!("region {r} does not exist"),
                                    ));
                                };
                                coords += reg.dims.len();
                                p.task_regions.push(*r);
                            }
                        }
                    }
                    p.max_scalars = p.max_scalars.max(p.task_scalars.len() - s0 as usize);
                    p.max_regions = p.max_regions.max(p.task_regions.len() - r0 as usize);
                    p.max_coords = p.max_coords.max(coords);
                    p.aux[pc] = p.tasks.len() as u32;
                    p.tasks.push(TaskDesc {
                        kernel: insn.a,
                        keyset,
                        hoisted,
                        scalars: s0..p.task_scalars.len() as u32,
                        regions: r0..p.task_regions.len() as u32,
                        next_pc: next as u32,
                        linear: false,
                        scalar_lins: 0..0,
                        dim_plans: 0..0,
                        region_outs: 0..0,
                        fixed_pool: None,
                        simple: false,
                        coord_base: 0,
                        n_coords: 0,
                    });
                }
                Op::Args => {
                    return Err(structure(
                        "`args` without a `task` or `load` before it".into(),
                    ));
                }
                Op::Set => {
                    let r = usize::from(insn.a);
                    if r < ns {
                        return Err(bad("a", "a symbol cannot be set".into()));
                    }
                    let want = p.reg_types[r];
                    dx.check(
                        insn.b as u16,
                        Want::Exactly(want),
                        false,
                        at,
                        "instructions",
                        pc,
                    )?;
                }
                Op::Load | Op::Read => {
                    let r = usize::from(insn.a);
                    if r < ns || p.reg_types[r] == ScalarType::Bool {
                        return Err(bad(
                            "a",
                            format!("`{mn}` needs an integer register that is not a symbol"),
                        ));
                    }
                    let t = &p.tensors[insn.b as usize];
                    // `load`: bound contents; `read`: a computed tensor (contents not bound,
                    // produced by the run) of an integer element type.
                    let computed = insn.op == Op::Read;
                    let rank = match (&t.shape, t.array) {
                        (Some(s), true) if !computed => s.len(),
                        (Some(s), false) if computed && t.dtype.is_integer() => s.len(),
                        _ if computed => {
                            return Err(bad(
                                "b",
                                "`read` needs an integer tensor with a shape and no bound contents"
                                    .into(),
                            ));
                        }
                        _ => {
                            return Err(bad(
                                "b",
                                "`load` needs a tensor with a shape and bound contents".into(),
                            ));
                        }
                    };
                    let refs = self.refs(pc + 1, rank, &mut next)?;
                    for (j, r) in refs.iter().enumerate() {
                        dx.check(
                            *r,
                            Want::Int,
                            false,
                            self.off.insn(pc + 1 + j / 3),
                            "load indices",
                            j,
                        )?;
                    }
                    p.aux[pc] = p.loads.len() as u32;
                    p.loads.push(LoadDesc {
                        reg: insn.a,
                        tensor: insn.b as u16,
                        index: refs,
                        next_pc: next as u32,
                    });
                }
                Op::Send => {
                    dx.check(
                        insn.b as u16,
                        Want::Exactly(ScalarType::I64),
                        false,
                        at,
                        "instructions",
                        pc,
                    )?;
                }
                expr_ops!() => {
                    // Rejected above (class check); kept exhaustive.
                    return Err(DecodeError::WrongStream {
                        offset: at,
                        op: mn,
                        stream: "the instruction stream",
                    });
                }
            }
            p.max_depth = p.max_depth.max(stack.len());
            pc = next;
        }
        if n == 0 || insns[n - 1].op != Op::Halt {
            return Err(DecodeError::Structure {
                offset: self.off.insn(n),
                message: "the instruction stream must end with `halt`".into(),
            });
        }
        Ok(())
    }

    /// Reads the `args` instructions after a `task` / `load`: exactly `count` references.
    fn refs(&self, pc: usize, count: usize, next: &mut usize) -> Result<Vec<u16>, DecodeError> {
        let insns = &self.img.insns;
        let need = count.div_ceil(3);
        let mut out = Vec::with_capacity(count);
        for j in 0..need {
            let at = self.off.insn(pc + j);
            let Some(i) = insns.get(pc + j) else {
                return Err(DecodeError::Structure {
                    offset: at,
                    message: format!("{count} argument reference(s) expected, the stream ends"),
                });
            };
            let want = (count - 3 * j).min(3);
            if i.op != Op::Args || usize::from(i.flags) != want {
                return Err(DecodeError::Structure {
                    offset: at,
                    message: format!("an `args` instruction with {want} reference(s) expected"),
                });
            }
            let refs = i.refs();
            for (k, r) in refs.iter().enumerate() {
                if k >= want && *r != 0 {
                    return Err(DecodeError::BadOperand {
                        offset: at,
                        op: "args",
                        field: "b",
                        message: "unused reference is not 0".into(),
                    });
                }
            }
            out.extend_from_slice(&refs[..want]);
        }
        *next = pc + need;
        Ok(out)
    }
}

/// Use-site checks of expressions.
struct Exprs<'a> {
    exprs: &'a [ExprInfo],
    uses_args: &'a [bool],
    reg_types: &'a [ScalarType],
}

impl Exprs<'_> {
    fn check(
        &self,
        e: u16,
        want: Want,
        args_ok: bool,
        at: usize,
        table: &'static str,
        index: usize,
    ) -> Result<(), DecodeError> {
        let Some(info) = self.exprs.get(usize::from(e)) else {
            return Err(entry(
                at,
                table,
                index,
                format!("expression {e} does not exist"),
            ));
        };
        let ok = match want {
            Want::Int => info.ty != ScalarType::Bool,
            Want::Bool => info.ty == ScalarType::Bool,
            Want::Exactly(t) => info.ty == t,
        };
        if !ok {
            return Err(entry(
                at,
                table,
                index,
                format!("expression {e} has the wrong type ({})", info.ty),
            ));
        }
        if !args_ok && self.uses_args[usize::from(e)] {
            return Err(entry(
                at,
                table,
                index,
                format!("expression {e} reads task arguments here"),
            ));
        }
        Ok(())
    }

    /// Whether every register expression `e` reads is below `limit`.
    fn regs_below(&self, ops: &[Insn], e: u16, limit: u16) -> bool {
        let _ = self.reg_types;
        let info = &self.exprs[usize::from(e)];
        ops[info.start as usize..(info.start + info.len) as usize]
            .iter()
            .all(|i| i.op != Op::Ldr || i.a < limit)
    }

    /// Whether every `arg` op of `e` names a scalar parameter of that type.
    fn args_fit(&self, ops: &[Insn], e: u16, types: &[ScalarType]) -> Result<(), String> {
        let info = &self.exprs[usize::from(e)];
        for i in &ops[info.start as usize..(info.start + info.len) as usize] {
            if i.op == Op::Arg {
                match types.get(usize::from(i.a)) {
                    Some(t) if from_scalar_code(i.flags) == Some(*t) => {}
                    Some(_) => return Err(format!("tier argument {} has the wrong type", i.a)),
                    None => return Err(format!("tier argument {} does not exist", i.a)),
                }
            }
        }
        Ok(())
    }
}

/// Fills the fast-path plans of every task: linear forms of its scalar arguments and region
/// bounds, the regions as the sink sees them, and the pool when it is fixed.
fn plan(p: &mut Program) {
    let zero = p.reg_types.len() as u32;
    let lin = |p: &Program, e: u16| -> Option<Lin> {
        match p.exprs[usize::from(e)].fast {
            Fast::Const(c) => Some(Lin {
                reg: zero,
                pre: 0,
                mul: 0,
                post: c as i64,
            }),
            Fast::Reg(r) => Some(Lin {
                reg: u32::from(r),
                pre: 0,
                mul: 1,
                post: 0,
            }),
            Fast::Affine {
                reg,
                pre,
                mul,
                post,
            } => Some(Lin {
                reg: u32::from(reg),
                pre,
                mul,
                post,
            }),
            Fast::None => None,
        }
    };
    for i in 0..p.tasks.len() {
        let td = p.tasks[i].clone();
        let kd = &p.kernels[usize::from(td.kernel)];
        let fixed_pool = (kd.tiers.is_none() && p.sched.pools.is_none()).then_some(kd.pool);
        let r0 = p.region_outs.len() as u32;
        let mut coords = 0u32;
        let accesses: Vec<pto_wsp_ir::Access> = kd
            .params
            .iter()
            .filter_map(|p| match p {
                ParamDesc::Tile(a) => Some(*a),
                ParamDesc::Scalar(_) => None,
            })
            .collect();
        for (&r, &access) in p.task_regions[td.regions.start as usize..td.regions.end as usize]
            .iter()
            .zip(&accesses)
        {
            let rd = &p.regions[usize::from(r)];
            let rank = rd.dims.len() as u32;
            p.region_outs.push(crate::sink::RegionOut {
                tensor: u32::from(rd.tensor),
                access: crate::sink::access_code(access),
                off: coords,
                rank,
            });
            coords += rank;
        }
        let l0 = p.lins.len() as u32;
        let d0 = p.dim_plans.len() as u32;
        let mut linear = true;
        for &e in &p.task_scalars[td.scalars.start as usize..td.scalars.end as usize] {
            match lin(p, e) {
                Some(l) => p.lins.push(l),
                None => linear = false,
            }
        }
        let mut coords_done = 0u32;
        for &r in &p.task_regions[td.regions.start as usize..td.regions.end as usize] {
            let rd = p.regions[usize::from(r)].clone();
            for (d, &(s, z)) in p.dims[rd.dims.start as usize..rd.dims.end as usize]
                .to_vec()
                .iter()
                .enumerate()
            {
                let start = lin(p, s);
                let size = if z == NONE16 {
                    Some(Lin {
                        reg: zero,
                        pre: 0,
                        mul: 0,
                        post: 1,
                    })
                } else {
                    lin(p, z)
                };
                match (start, size) {
                    (Some(start), Some(size)) => p.dim_plans.push(DimPlan {
                        start,
                        size,
                        extent: p.shape_off[usize::from(rd.tensor)] + d as u32,
                        coord: coords_done + d as u32,
                    }),
                    _ => linear = false,
                }
            }
            coords_done += rd.dims.len() as u32;
        }
        if !linear {
            p.lins.truncate(l0 as usize);
            p.dim_plans.truncate(d0 as usize);
        }
        let t = &mut p.tasks[i];
        t.linear = linear;
        t.scalar_lins = l0..p.lins.len() as u32;
        t.dim_plans = d0..p.dim_plans.len() as u32;
        t.region_outs = r0..p.region_outs.len() as u32;
        t.fixed_pool = fixed_pool;
        t.simple = fixed_pool.is_some()
            && p.sched.stream_by.is_none()
            && p.sched.priority.is_none()
            && p.sched.cost.is_none();
        t.coord_base = p.total_coords as u32;
        t.n_coords = coords;
        // Starts, then sizes.
        p.total_coords += 2 * coords as usize;
    }
}

/// The fast form of a checked expression.
fn fast(code: &[Insn], regs: &[ScalarType], consts: &[u64]) -> Fast {
    match code {
        [i] => match i.op {
            Op::Ldi => Fast::Const(i.imm() as u64),
            Op::Ldu => Fast::Const(u64::from(i.b)),
            Op::Ldb => Fast::Const(u64::from(i.b)),
            Op::Ldc => consts
                .get(usize::from(i.a))
                .map_or(Fast::None, |&c| Fast::Const(c)),
            Op::Ldr => Fast::Reg(i.a),
            _ => Fast::None,
        },
        [r, rest @ ..]
            if r.op == Op::Ldr && regs.get(usize::from(r.a)) == Some(&ScalarType::I64) =>
        {
            let (mut pre, mut mul, mut post) = (0i64, 1i64, 0i64);
            let mut stage = 0; // 0: before mul, 1: after mul
            for i in rest {
                let k = i.imm();
                match (i.op, stage) {
                    (Op::AddImm, 0) if pre == 0 => pre = k,
                    (Op::SubImm, 0) if pre == 0 => pre = -k,
                    (Op::MulImm, 0) => {
                        mul = k;
                        stage = 1;
                    }
                    (Op::AddImm, 1) if post == 0 => post = k,
                    (Op::SubImm, 1) if post == 0 => post = -k,
                    _ => return Fast::None,
                }
            }
            if rest.is_empty() {
                return Fast::Reg(r.a);
            }
            Fast::Affine {
                reg: r.a,
                pre,
                mul,
                post,
            }
        }
        _ => Fast::None,
    }
}

#[cfg(test)]
mod tests {
    //! One test per error kind, each asserting the message, on mutations of a valid bytecode.

    use super::*;
    use crate::EncodeOptions;
    use crate::format::HEADER_LEN;
    use crate::testing::encode;

    const SRC: &str = "
symbol n: i64;
tensor A: f32[n, 8];
axis I = dense_dyn(n);
kernel k(in a: f32[1, 8], x: i64);
workload main() {
    parallel_for i in I {
        task k(A[i, 0 +: 8], i * 2 + 1);
    }
}
";

    fn valid() -> Vec<u8> {
        let m = pto_wsp_ir::parse(SRC).expect("parses");
        encode(&m, &EncodeOptions::default()).expect("encodes")
    }

    fn image() -> Image {
        Image::read(&valid()).expect("reads").0
    }

    fn err(bytes: &[u8]) -> String {
        match Program::decode(bytes) {
            Ok(_) => panic!("decoded"),
            Err(e) => e.to_string(),
        }
    }

    fn err_of(img: &Image) -> String {
        err(&img.write())
    }

    fn has(msg: &str, want: &str) {
        assert!(msg.contains(want), "{msg:?} does not contain {want:?}");
    }

    #[test]
    fn the_valid_one_decodes() {
        let p = Program::decode(&valid()).expect("decodes");
        assert_eq!(p.task_statements(), 1);
    }

    #[test]
    fn truncated() {
        let b = valid();
        has(
            &err(&b[..30]),
            "truncated at byte 30: the expression count needs 2 byte(s), 0 left",
        );
        has(
            &err(&b[..3]),
            "truncated at byte 0: the magic needs 4 byte(s), 3 left",
        );
        has(&err(&[]), "truncated at byte 0");
    }

    #[test]
    fn bad_magic_and_version() {
        let mut b = valid();
        b[0] = b'X';
        has(
            &err(&b),
            "not a pto-wsp bytecode: the magic at byte 0 is [58, 54, 4f, 57]",
        );
        let mut b = valid();
        b[4] = 9;
        has(
            &err(&b),
            "unsupported bytecode version 9 at byte 4 (this decoder reads version 2)",
        );
    }

    #[test]
    fn length_mismatch() {
        let mut b = valid();
        let n = b.len();
        b.push(0);
        has(
            &err(&b),
            &format!(
                "length mismatch: the bytecode should be {n} bytes long, it is {}",
                n + 1
            ),
        );
    }

    #[test]
    fn unknown_opcode() {
        let mut b = valid();
        b[HEADER_LEN] = 0x7F;
        has(&err(&b), &format!("byte {HEADER_LEN}: unknown opcode 0x7f"));
    }

    #[test]
    fn wrong_stream() {
        let mut img = image();
        img.insns[0] = Insn::new(Op::Ldr, 0, 0);
        has(
            &err_of(&img),
            &format!("byte {HEADER_LEN}: `ldr` cannot stand in the instruction stream"),
        );
        let mut img = image();
        img.ops[0] = Insn::new(Op::Halt, 0, 0);
        has(&err_of(&img), "`halt` cannot stand in expression code");
    }

    #[test]
    fn bad_operand() {
        let mut img = image();
        let t = img
            .insns
            .iter()
            .position(|i| i.op == Op::Task)
            .expect("a task");
        img.insns[t].a = 999;
        let at = HEADER_LEN + 8 * t;
        has(
            &err_of(&img),
            &format!("byte {at}: `task` a: kernel 999 does not exist (there are 1)"),
        );
        let mut img = image();
        img.insns[t].flags = 7;
        has(&err_of(&img), "`task` flags: 0x07 is not a valid flag set");
        let mut img = image();
        let h = img.insns.len() - 1;
        img.insns[h].b = 5;
        has(&err_of(&img), "`halt` b: unused field is 5, must be 0");
    }

    #[test]
    fn structure() {
        let mut img = image();
        let n = img
            .insns
            .iter()
            .position(|i| i.op == Op::Next)
            .expect("a next");
        img.insns[n].b = 0;
        has(&err_of(&img), "`next` does not close the loop it names");
        let mut img = image();
        let h = img.insns.len() - 1;
        img.insns.swap(h, h - 1);
        img.insns[h - 1].b = 0;
        has(&err_of(&img), "`halt` must be the last instruction");
        let mut img = image();
        let t = img
            .insns
            .iter()
            .position(|i| i.op == Op::Task)
            .expect("a task");
        img.insns.remove(t + 1);
        has(
            &err_of(&img),
            "an `args` instruction with 2 reference(s) expected",
        );
    }

    /// A `while` with a `break` and a computed `read` (tensor `A` is written by a task).
    const WHILE_SRC: &str = "
slot s: i64;
tensor A: i64[8];
tensor H: i64[8];
tensor F: f32[8];
kernel copy(in x: i64[1], out y: i64[1]);
workload main() {
    while s < 5 max 9 {
        task copy(H[s], A[s]);
        load s = A[s];
        break if s == 3;
    }
}
";

    fn while_image() -> Image {
        let m = pto_wsp_ir::parse(WHILE_SRC).expect("parses");
        Image::read(&encode(&m, &EncodeOptions::default()).expect("encodes"))
            .expect("reads")
            .0
    }

    fn find(img: &Image, op: Op) -> usize {
        img.insns
            .iter()
            .position(|i| i.op == op)
            .unwrap_or_else(|| panic!("no `{}`", op.mnemonic()))
    }

    #[test]
    fn while_break_and_read_decode_and_disassemble() {
        let img = while_image();
        for op in [Op::While, Op::EndWhile, Op::Break, Op::Read] {
            find(&img, op);
        }
        let p = Program::decode(&img.write()).expect("decodes");
        assert_eq!(p.computed_tensors(), vec![true, false, false]);
        let text = p.disassemble();
        for want in ["while max", "wend", "break if", "read s = A["] {
            assert!(text.contains(want), "{want:?} not in\n{text}");
        }
    }

    /// The side table of read locations: the `read` and the loop over a computed ragged axis
    /// carry their statements' places; bytes without computed reads carry no table (unchanged
    /// layout); a table entry naming another instruction, or out of order, is refused.
    #[test]
    fn read_locations_are_a_validated_side_table() {
        let p = Program::decode(&while_image().write()).expect("decodes");
        let read = p
            .insns
            .iter()
            .position(|i| i.op == Op::Read)
            .expect("a read");
        let loc = p.read_loc(read);
        assert_eq!(
            &WHILE_SRC[loc.start as usize..loc.end as usize],
            "load s = A[s];"
        );
        // Not a read: no location.
        assert!(!p.read_loc(0).is_known());
        // A ragged axis over computed lengths: the loop's place is the statement's.
        let src = "tensor H: i64[4];\ntensor A: i64[4];\ntensor D: f32[4, 4];\n\
                   axis R = ragged(4, A);\nkernel copy(in x: i64[?], out y: i64[?]);\n\
                   kernel k(inout x: f32[1, 4]);\nworkload main() {\n\
                   task copy(H[0 +: 4], A[0 +: 4]);\n\
                   parallel_for r, c in R { task k(D[r, 0 +: 4]); }\n}\n";
        let m = pto_wsp_ir::parse(src).expect("parses");
        let img = Image::read(&encode(&m, &EncodeOptions::default()).expect("encodes"))
            .expect("reads")
            .0;
        let p = Program::decode(&img.write()).expect("decodes");
        assert_eq!(p.computed_tensors(), vec![false, true, false]);
        let lp = find(&img, Op::Loop);
        let loc = p.read_loc(lp);
        assert!(src[loc.start as usize..loc.end as usize].starts_with("parallel_for r, c in R"));
        // No computed read: no table, no flag.
        let m = pto_wsp_ir::parse(
            "tensor D: f32[4, 4];\naxis I = dense(4);\nkernel k(inout x: f32[1, 4]);\n\
             workload main() { parallel_for r in I { task k(D[r, 0 +: 4]); } }",
        )
        .expect("parses");
        let bytes = encode(&m, &EncodeOptions::default()).expect("encodes");
        assert!(Image::read(&bytes).expect("reads").0.read_locs.is_empty());
        assert_eq!(bytes[45] & crate::format::FLAG_READ_LOCS, 0);
        // Malformed tables.
        let mut img = while_image();
        img.read_locs[0].0 = 0;
        has(&err_of(&img), "instruction 0 is not a `read` or a `loop`");
        let mut img = while_image();
        let again = img.read_locs[0];
        img.read_locs.push(again);
        has(&err_of(&img), "instructions are not in increasing order");
        let mut img = while_image();
        img.read_locs[0].1 = pto_wsp_ir::Loc { start: 9, end: 3 };
        has(&err_of(&img), "ends before it starts");
    }

    #[test]
    fn malformed_while_break_and_read() {
        // A `wend` that names another instruction.
        let mut img = while_image();
        let w = find(&img, Op::EndWhile);
        img.insns[w].b = 0;
        has(
            &err_of(&img),
            "`wend` does not close the construct it names",
        );
        // A `while` that does not point at its `wend`.
        let mut img = while_image();
        let o = find(&img, Op::While);
        img.insns[o].b = find(&img, Op::Break) as u32;
        has(&err_of(&img), "`while` does not point at this `wend`");
        // A `while` jumping backwards.
        let mut img = while_image();
        let o = find(&img, Op::While);
        img.insns[o].b = 0;
        has(&err_of(&img), "`while` must jump forward");
        // A `break` naming something other than its innermost `while`.
        let mut img = while_image();
        let b = find(&img, Op::Break);
        img.insns[b].b = 0;
        has(
            &err_of(&img),
            "`break` does not name its innermost enclosing `while`",
        );
        // A `break` outside any `while`: moved after the `wend`.
        let mut img = while_image();
        let (b, w) = (find(&img, Op::Break), find(&img, Op::EndWhile));
        let brk = img.insns.remove(b);
        img.insns.insert(w, brk);
        let o = find(&img, Op::While);
        img.insns[o].b = (w - 1) as u32;
        has(
            &err_of(&img),
            "`break` does not name its innermost enclosing `while`",
        );
        // A `max` bound or a condition of the wrong type.
        let mut img = while_image();
        let o = find(&img, Op::While);
        let cond = img.insns[find(&img, Op::EndWhile)].a;
        img.insns[o].a = cond;
        has(&err_of(&img), "has the wrong type (bool)");
        let mut img = while_image();
        let w = find(&img, Op::EndWhile);
        img.insns[w].a = img.insns[find(&img, Op::While)].a;
        has(&err_of(&img), "has the wrong type (i64)");
        // A `read` of a tensor with bound contents, and of a float tensor.
        let mut img = while_image();
        let r = find(&img, Op::Read);
        img.insns[r].op = Op::Load;
        has(
            &err_of(&img),
            "`load` needs a tensor with a shape and bound contents",
        );
        let mut img = while_image();
        let r = find(&img, Op::Read);
        img.insns[r].b = 2;
        has(
            &err_of(&img),
            "`read` needs an integer tensor with a shape and no bound contents",
        );
        // Flags on the new opcodes are refused.
        let mut img = while_image();
        let o = find(&img, Op::While);
        img.insns[o].flags = 1;
        has(&err_of(&img), "`while` flags: 0x01 is not a valid flag set");
    }

    #[test]
    fn too_deep() {
        let mut img = image();
        let l = img
            .insns
            .iter()
            .position(|i| i.op == Op::Loop)
            .expect("a loop");
        let lp = img.insns[l];
        let mut insns = vec![img.insns[0]];
        for _ in 0..70 {
            insns.push(lp);
        }
        insns.push(Insn::new(Op::Halt, 0, 0));
        for (i, x) in insns.iter_mut().enumerate().skip(1).take(70) {
            x.b = (i + 1) as u32;
        }
        img.insns = insns;
        has(&err_of(&img), "nesting deeper than 64 levels");
    }

    #[test]
    fn expression_stack_and_types() {
        let mut img = image();
        let start = img.ops.len() as u16;
        for _ in 0..40 {
            img.ops.push(Insn::new(Op::Ldi, 0, 1));
        }
        for _ in 0..39 {
            img.ops.push(Insn::new(Op::AddI, 0, 0));
        }
        img.exprs.push((start, 79));
        let e = img.exprs.len() - 1;
        has(
            &err_of(&img),
            &format!("expression {e} needs a stack deeper than 32"),
        );
        let mut img = image();
        let start = img.ops.len() as u16;
        img.ops.push(Insn::new(Op::Ldb, 0, 1));
        img.ops.push(Insn::new(Op::Ldi, 0, 1));
        img.ops.push(Insn::new(Op::AddI, 0, 0));
        img.exprs.push((start, 3));
        has(&err_of(&img), "`add.i` needs two i64s, found bool and i64");
        let mut img = image();
        let start = img.ops.len() as u16;
        img.ops.push(Insn::new(Op::Ldi, 0, 1));
        img.ops.push(Insn::new(Op::Jmp, 9, 0));
        img.exprs.push((start, 2));
        has(&err_of(&img), "jump past the end");
        let mut img = image();
        let start = img.ops.len() as u16;
        img.ops.push(Insn::new(Op::AddI, 0, 0));
        img.exprs.push((start, 1));
        has(&err_of(&img), "stack underflow");
    }

    /// Found by the fuzz target: a hoisting loop whose keyset lacks the dispatch key.
    #[test]
    fn hoisting_loop_without_its_key() {
        let src = "
symbol n: i64;
tensor A: f32[n, 8];
axis I = dense_dyn(n);
kernel k(in a: f32[1, 8]);
workload main() {
    parallel_for i in I {
        task k(A[i, 0 +: 8]);
    }
}
schedule for main {
    executors 4;
    dispatch affinity(i);
}
";
        let m = pto_wsp_ir::parse(src).expect("parses");
        let bytes = encode(&m, &EncodeOptions::default()).expect("encodes");
        let mut img = Image::read(&bytes).expect("reads").0;
        assert!(img.loops[0].keyset != NONE16, "the loop hoists");
        let k = usize::from(img.loops[0].keyset);
        img.keysets[k] = NONE16;
        has(
            &err_of(&img),
            "loops entry 0: a hoisting loop needs an index-free dispatch policy",
        );
        let mut img = Image::read(&bytes).expect("reads").0;
        img.sched.dispatch = DNodeRec::RoundRobin(3);
        has(
            &err_of(&img),
            "a hoisting loop needs an index-free dispatch policy",
        );
    }

    #[test]
    fn bad_entries() {
        let mut img = image();
        img.tensors[0].dtype = 99;
        has(&err_of(&img), "tensors entry 0: bad element type code 99");
        let mut img = image();
        img.axes[0].extent = 500;
        has(&err_of(&img), "axes entry 0: expression 500 does not exist");
        let mut img = image();
        img.loops[0].var0 = 0;
        has(
            &err_of(&img),
            "loops entry 0: loop variables must be i64 variable registers",
        );
        let mut img = image();
        img.sched.executors = 0;
        has(
            &err_of(&img),
            "executors and streams must be between 1 and 2^32",
        );
        let mut img = image();
        img.sched.dispatch = DNodeRec::StaticPartition(vec![0, 5, 5]);
        has(
            &err_of(&img),
            "static_partition starts must begin at 0 and increase",
        );
        let mut img = image();
        img.kernels[0].params = vec![0x33];
        has(&err_of(&img), "kernels entry 0: bad parameter code 51");
    }
}
