//! The descriptor tables: registers, symbols and slots, tensors, axes, keysets, loops, kernels,
//! dimension lists, regions, the schedule and channels, each entry checked against the tables
//! before it and against the expressions it names.

use super::error::entry;
use super::expr::Exprs;
use super::{DecodeError, Decoder, Want};
use crate::format::{
    AxisCode, LOOP_RANGE_SKIP, LOOP_ROW_SKIP, NONE16, TENSOR_ARRAY, TENSOR_SHAPED, from_dtype_code,
    from_pool_code, from_scalar_code, from_tile_code,
};
use crate::image::{DNodeRec, KernelRec, LoopRec};
use crate::op::Op;
use crate::program::{
    AxisDesc, DNode, ExprInfo, KernelDesc, LoopDesc, ParamDesc, PoolLevels, RegionDesc, Sched,
    TensorDesc,
};
use pto_wsp_ir::ScalarType;
use std::ops::Range;

/// The register file: each register's type, the symbols (type, whether it is read) and the
/// slots.
pub(super) struct Registers {
    pub(super) types: Vec<ScalarType>,
    pub(super) symbols: Vec<(ScalarType, bool)>,
    pub(super) slots: Vec<ScalarType>,
}

/// The range of every dimension list in the one array of dimensions.
pub(super) type DimSets = Vec<Range<u32>>;

/// An axis array is bound, or computed (`docs/SEMANTICS.md`, "Computed reads"): an integer
/// tensor with a shape and no bound contents, read whole through the sink.
fn array(
    tensors: &[TensorDesc],
    t: u16,
    at: usize,
    table: &'static str,
    i: usize,
) -> Result<(), DecodeError> {
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
}

impl Decoder<'_> {
    /// Registers, symbols, slots.
    pub(super) fn registers(&self) -> Result<Registers, DecodeError> {
        let (img, off) = (self.img, self.off);
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
        Ok(Registers {
            types: reg_types,
            symbols,
            slots,
        })
    }

    /// Every expression: its checked form, and whether it reads task arguments.
    pub(super) fn exprs(
        &self,
        reg_types: &[ScalarType],
    ) -> Result<(Vec<ExprInfo>, Vec<bool>), DecodeError> {
        let img = self.img;
        let mut exprs = Vec::with_capacity(img.exprs.len());
        let mut uses_args = Vec::with_capacity(img.exprs.len());
        for (i, &(start, len)) in img.exprs.iter().enumerate() {
            let (info, args) = self.expr(i, start, len, reg_types)?;
            exprs.push(info);
            uses_args.push(args);
        }
        Ok((exprs, uses_args))
    }

    /// Tensors; a shape's dimensions read only symbols.
    pub(super) fn tensors(&self, dx: &Exprs, ns: usize) -> Result<Vec<TensorDesc>, DecodeError> {
        let img = self.img;
        let mut tensors = Vec::with_capacity(img.tensors.len());
        for (i, t) in img.tensors.iter().enumerate() {
            let at = self.off.tensors[i];
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
        Ok(tensors)
    }

    /// Axes: an extent, and the arrays their kind needs.
    pub(super) fn axes(
        &self,
        dx: &Exprs,
        tensors: &[TensorDesc],
    ) -> Result<Vec<AxisDesc>, DecodeError> {
        let img = self.img;
        let mut axes = Vec::with_capacity(img.axes.len());
        for (i, a) in img.axes.iter().enumerate() {
            let at = self.off.axes + i * 8;
            dx.check(a.extent, Want::Int, false, at, "axes", i)?;
            axes.push(match AxisCode::from_code(a.kind) {
                Some(AxisCode::Dense) if a.arr0 == NONE16 && a.arr1 == NONE16 => {
                    AxisDesc::Dense { extent: a.extent }
                }
                Some(AxisCode::Ragged) if a.arr1 == NONE16 => {
                    array(tensors, a.arr0, at, "axes", i)?;
                    AxisDesc::Ragged {
                        rows: a.extent,
                        lengths: a.arr0,
                    }
                }
                Some(AxisCode::Sparse) => {
                    array(tensors, a.arr0, at, "axes", i)?;
                    array(tensors, a.arr1, at, "axes", i)?;
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
        Ok(axes)
    }

    /// Keysets: every present key is an integer expression. Returns how many keysets there are.
    pub(super) fn keysets(&self, dx: &Exprs) -> Result<usize, DecodeError> {
        let img = self.img;
        let klen = usize::from(img.keyset_len);
        for (j, &k) in img.keysets.iter().enumerate() {
            if k != NONE16 {
                dx.check(
                    k,
                    Want::Int,
                    false,
                    self.off.keysets + 2 * j,
                    "keysets",
                    j / klen.max(1),
                )?;
            }
        }
        Ok(img.keysets.len().checked_div(klen).unwrap_or(0))
    }

    /// Loops; their variables are registers from `first_var` on.
    pub(super) fn loops(
        &self,
        dx: &Exprs,
        axes: &[AxisDesc],
        first_var: usize,
        n_keysets: usize,
    ) -> Result<Vec<LoopDesc>, DecodeError> {
        let img = self.img;
        let mut loops = Vec::with_capacity(img.loops.len());
        for (i, l) in img.loops.iter().enumerate() {
            loops.push(self.loop_desc(dx, axes, first_var, n_keysets, i, l)?);
        }
        Ok(loops)
    }

    fn loop_desc(
        &self,
        dx: &Exprs,
        axes: &[AxisDesc],
        first_var: usize,
        n_keysets: usize,
        i: usize,
        l: &LoopRec,
    ) -> Result<LoopDesc, DecodeError> {
        let at = self.off.loops + i * 12;
        let Some(axis) = axes.get(usize::from(l.axis)) else {
            return Err(entry(
                at,
                "loops",
                i,
                format!("axis {} does not exist", l.axis),
            ));
        };
        let var = |r: u16| {
            dx.reg_types.get(usize::from(r)) == Some(&ScalarType::I64)
                && usize::from(r) >= first_var
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
        Ok(LoopDesc {
            axis: l.axis,
            var0: l.var0,
            var1: l.var1,
            hoist,
            count,
            row_skip,
            range_skip,
        })
    }

    /// Kernels: pool, parameters and tier variants.
    pub(super) fn kernels(&self, dx: &Exprs, ns: usize) -> Result<Vec<KernelDesc>, DecodeError> {
        let img = self.img;
        let mut kernels = Vec::with_capacity(img.kernels.len());
        for (i, k) in img.kernels.iter().enumerate() {
            let at = self.off.kernels[i];
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
            self.tiers(dx, ns, i, k, &scalar_types)?;
            kernels.push(KernelDesc {
                pool,
                params,
                scalar_types,
                tiers: k.tiers.clone(),
            });
        }
        Ok(kernels)
    }

    /// A kernel's tier cases: conditions on symbols and the kernel's scalar arguments, variants
    /// that exist.
    fn tiers(
        &self,
        dx: &Exprs,
        ns: usize,
        i: usize,
        k: &KernelRec,
        scalar_types: &[ScalarType],
    ) -> Result<(), DecodeError> {
        let img = self.img;
        let at = self.off.kernels[i];
        let Some((cases, default)) = &k.tiers else {
            return Ok(());
        };
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
            if let Err(m) = dx.args_fit(&img.ops, c, scalar_types) {
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
        Ok(())
    }

    /// Dimension lists: every dimension's `(start, size)` in one array, and each list's range
    /// of it.
    pub(super) fn dimsets(&self, dx: &Exprs) -> Result<(Vec<(u16, u16)>, DimSets), DecodeError> {
        let img = self.img;
        let mut dims = Vec::new();
        let mut dimsets = Vec::with_capacity(img.dimsets.len());
        for (i, d) in img.dimsets.iter().enumerate() {
            let at = self.off.dimsets[i];
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
        Ok((dims, dimsets))
    }

    /// Regions: a tensor with a shape and a dimension list of its rank.
    pub(super) fn regions(
        &self,
        tensors: &[TensorDesc],
        dimsets: &[Range<u32>],
    ) -> Result<Vec<RegionDesc>, DecodeError> {
        let img = self.img;
        let mut regions = Vec::with_capacity(img.regions.len());
        for (i, r) in img.regions.iter().enumerate() {
            let at = self.off.regions + 4 * i;
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
        Ok(regions)
    }

    /// The schedule: counts, the dispatch tree, and key slots that exist.
    pub(super) fn sched(&self) -> Result<Sched, DecodeError> {
        let (s, at) = (&self.img.sched, self.off.sched);
        let klen = usize::from(self.img.keyset_len);
        let limit = u64::from(u32::MAX) + 1;
        if s.executors == 0 || s.executors > limit || s.streams == 0 || s.streams > limit {
            return Err(entry(
                at,
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
                at,
                "schedule",
                0,
                "the stream key slot does not exist",
            ));
        }
        if s.priority.is_some_and(|k| !slot_ok(k)) || s.cost.is_some_and(|k| !slot_ok(k)) {
            return Err(entry(
                at,
                "schedule",
                0,
                "the priority or cycle cost key slot does not exist",
            ));
        }
        Ok(Sched {
            executors: s.executors,
            streams: s.streams,
            dispatch: nodes,
            stream_by: s.stream_by,
            pools: self.pools(klen)?,
            priority: s.priority,
            cost: s.cost,
        })
    }

    /// Pool routing: a metric slot that exists, pool codes that exist.
    fn pools(&self, klen: usize) -> Result<Option<PoolLevels>, DecodeError> {
        let at = self.off.sched;
        let Some(p) = &self.img.sched.pools else {
            return Ok(None);
        };
        if usize::from(p.metric) >= klen {
            return Err(entry(
                at,
                "schedule",
                0,
                "the pool metric slot does not exist",
            ));
        }
        let mut levels = Vec::new();
        for &(b, c) in &p.levels {
            levels.push((
                b,
                from_pool_code(c).ok_or_else(|| entry(at, "schedule", 0, "bad pool code"))?,
            ));
        }
        let otherwise =
            from_pool_code(p.otherwise).ok_or_else(|| entry(at, "schedule", 0, "bad pool code"))?;
        Ok(Some((p.metric, levels, otherwise)))
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

    /// Hoisting loops decide targets once per iteration: the policy must not read the task
    /// index, and their keysets must hold every key the policy reads.
    pub(super) fn hoisting(&self, loops: &[LoopDesc], nodes: &[DNode]) -> Result<(), DecodeError> {
        let img = self.img;
        let klen = usize::from(img.keyset_len);
        let mut used_slots = Vec::new();
        let mut index_free = true;
        for n in nodes {
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
                        self.off.loops + i * 12,
                        "loops",
                        i,
                        "a hoisting loop needs an index-free dispatch policy and every key it reads",
                    ));
                }
            }
        }
        Ok(())
    }

    /// Channels join processes that exist (`0xFF`: the host).
    pub(super) fn channels(&self) -> Result<(), DecodeError> {
        let n_procs = usize::from(self.img.n_procs);
        for (i, &(p, c)) in self.img.channels.iter().enumerate() {
            if (p != 0xFF && usize::from(p) >= n_procs) || (c != 0xFF && usize::from(c) >= n_procs)
            {
                return Err(entry(
                    self.off.channels + 2 * i,
                    "channels",
                    i,
                    "process does not exist",
                ));
            }
        }
        Ok(())
    }

    /// The read-location side table (after the instructions are checked): increasing pcs of
    /// `read`s and loops, sane locations.
    pub(super) fn read_locs(&self) -> Result<(), DecodeError> {
        let img = self.img;
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
        Ok(())
    }

    /// The statement-location table: strictly increasing pcs of instructions, sane locations.
    pub(super) fn stmt_locs(&self) -> Result<(), DecodeError> {
        let img = self.img;
        for (i, &(pc, loc)) in img.stmt_locs.iter().enumerate() {
            let at = self.off.stmt_locs + 4 + 12 * i;
            let message = if pc as usize >= img.insns.len() {
                Some(format!(
                    "instruction {pc} is past the last ({})",
                    img.insns.len().saturating_sub(1)
                ))
            } else if i > 0 && img.stmt_locs[i - 1].0 >= pc {
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
                return Err(entry(at, "statement locations", i, m));
            }
        }
        Ok(())
    }
}
