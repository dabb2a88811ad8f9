//! The encoder: a module's entry point to bytecode.
//!
//! Why: a workload is a small program; shipped as bytecode it costs O(program size), not
//! O(tasks), and every executor can interpret it to generate its own tasks (the on-device
//! generation specification). The encoder turns the IR into that form once, on the host.
//!
//! Promises:
//! - [`encode`] never panics on any module (validated or not); what the bytecode cannot express,
//!   or the resolver rejects (as it does for the reference expander), is an [`EncodeError`].
//! - The bytecode means what the module means under the reference expander, for every binding:
//!   bindings are not needed to encode (they come at interpretation time).
//! - Identical expressions, regions and keysets are stored once.
//!
//! How: `lower` takes the IR's resolved entry point (`pto_wsp_ir::resolve`) into the encoder's
//! tree, `analysis` marks where
//! dispatch targets are decided and which iterations may be skipped, and this module lays the
//! tree out as instructions and tables (see `docs/BYTECODE.md` for the layout).

mod analysis;
mod lower;

pub use lower::supports;
mod texpr;

use crate::format::{
    AxisCode, LOOP_RANGE_SKIP, LOOP_ROW_SKIP, NO_KEYSET, NONE16, TENSOR_ARRAY, TENSOR_SHAPED,
    dtype_code, pool_code, scalar_code, tile_code,
};
use crate::image::{
    AxisRec, DNodeRec, Image, KernelRec, LoopRec, Names, PoolRec, RegionRec, SchedRec, TensorRec,
};
use crate::op::{Insn, Op};
use lower::{LAxis, LDispatch, LLoop, LRegion, LStmt, LTask, Lowered};
use pto_wsp_ir::resolve::TExpr;
use pto_wsp_ir::{Loc, Module, ParamKind, Resolved};
use std::collections::HashMap;
use texpr::CompileExpr;

/// Why a module could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// A task whose arguments do not match its kernel (not produced by the resolver).
    #[error("malformed module: {message}")]
    Malformed {
        /// What is wrong.
        message: String,
    },
    /// Something the bytecode cannot express.
    #[error("not supported by the bytecode: {message}")]
    Unsupported {
        /// What, and where.
        message: String,
    },
    /// A table would overflow its index field.
    #[error("too many {what}: {count} (at most {max})")]
    TooLarge {
        /// Which table.
        what: &'static str,
        /// How many were needed.
        count: usize,
        /// The limit.
        max: usize,
    },
}

/// What the encoder writes besides the program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncodeOptions {
    /// Store the names of kernels, tensors, axes, processes and channels (for disassembly and
    /// messages), and the statement-location table (run-time errors at `file:line:column`,
    /// when the module has text). The names of symbols, slots and bound tensors are always
    /// stored: bindings refer to them.
    pub names: bool,
}

impl Default for EncodeOptions {
    fn default() -> EncodeOptions {
        EncodeOptions { names: true }
    }
}

/// Encodes the resolved entry point `res` (see the module docs).
pub fn encode(res: &Resolved, options: &EncodeOptions) -> Result<Vec<u8>, EncodeError> {
    let module = &res.module;
    let mut lowered = lower::lower(res)?;
    analysis::analyze(&mut lowered);
    let image = Emitter::new(module, &lowered).emit(module, &lowered, options)?;
    Ok(image.write())
}

struct Emitter {
    insns: Vec<Insn>,
    ops: Vec<Insn>,
    exprs: Vec<(u16, u16)>,
    expr_ids: HashMap<Vec<Insn>, u16>,
    consts: Vec<u64>,
    regions: Vec<RegionRec>,
    region_ids: HashMap<RegionRec, u16>,
    dimsets: Vec<Vec<(u16, u16)>>,
    dimset_ids: HashMap<Vec<(u16, u16)>, u16>,
    keysets: Vec<u16>,
    keyset_ids: HashMap<Vec<u16>, u16>,
    keyset_len: usize,
    n_dispatch_keys: usize,
    loops: Vec<LoopRec>,
    /// Per module kernel: parameter kinds (true: tile).
    kernel_tiles: Vec<Vec<bool>>,
    /// Open constructs (the process body included), for the decoder's nesting limit.
    depth: usize,
    /// The `while` instructions enclosing the statement being emitted (a `break` names the
    /// innermost).
    whiles: Vec<usize>,
    /// `(pc, loc)` of every computed read: `read` instructions and loops over computed arrays
    /// (the side table of read locations, `docs/BYTECODE.md`).
    read_locs: Vec<(u32, Loc)>,
    /// The statement of every instruction from each pc on (see [`Emitter::at`]).
    stmt_locs: Vec<(u32, Loc)>,
}

fn too_large(what: &'static str, count: usize, max: usize) -> EncodeError {
    EncodeError::TooLarge { what, count, max }
}

impl Emitter {
    fn new(module: &Module, l: &Lowered) -> Emitter {
        Emitter {
            insns: Vec::new(),
            ops: Vec::new(),
            exprs: Vec::new(),
            expr_ids: HashMap::new(),
            consts: Vec::new(),
            regions: Vec::new(),
            region_ids: HashMap::new(),
            dimsets: Vec::new(),
            dimset_ids: HashMap::new(),
            keysets: Vec::new(),
            keyset_ids: HashMap::new(),
            keyset_len: l.n_dispatch_keys
                + usize::from(l.stream_by)
                + usize::from(l.pools.is_some())
                + usize::from(l.priority)
                + usize::from(l.cost),
            n_dispatch_keys: l.n_dispatch_keys,
            loops: Vec::new(),
            kernel_tiles: module
                .kernels
                .iter()
                .map(|k| {
                    k.params
                        .iter()
                        .map(|p| matches!(p.kind, ParamKind::Tile { .. }))
                        .collect()
                })
                .collect(),
            depth: 0,
            whiles: Vec::new(),
            read_locs: Vec::new(),
            stmt_locs: Vec::new(),
        }
    }

    /// Enters a construct; the decoder accepts fewer than [`crate::format::MAX_DEPTH`] open.
    fn enter(&mut self) -> Result<(), EncodeError> {
        self.depth += 1;
        if self.depth >= crate::format::MAX_DEPTH {
            return Err(too_large(
                "nesting levels (loops, ifs, sequential blocks, consumes)",
                self.depth,
                crate::format::MAX_DEPTH - 1,
            ));
        }
        Ok(())
    }

    fn expr(&mut self, e: &TExpr) -> Result<u16, EncodeError> {
        let mut code = Vec::new();
        e.compile(&mut code, &mut self.consts);
        if let Some(&id) = self.expr_ids.get(&code) {
            return Ok(id);
        }
        if self.exprs.len() >= usize::from(NONE16) {
            return Err(too_large(
                "expressions",
                self.exprs.len() + 1,
                usize::from(NONE16) - 1,
            ));
        }
        let start = self.ops.len();
        if start + code.len() > usize::from(u16::MAX) {
            return Err(too_large(
                "expression ops",
                start + code.len(),
                usize::from(u16::MAX),
            ));
        }
        self.ops.extend_from_slice(&code);
        let id = self.exprs.len() as u16;
        self.exprs.push((start as u16, code.len() as u16));
        self.expr_ids.insert(code, id);
        Ok(id)
    }

    fn region(&mut self, r: &LRegion) -> Result<u16, EncodeError> {
        let mut dims = Vec::new();
        for (s, z) in &r.dims {
            let s = self.expr(s)?;
            let z = match z {
                Some(z) => self.expr(z)?,
                None => NONE16,
            };
            dims.push((s, z));
        }
        let dims_id = match self.dimset_ids.get(&dims) {
            Some(&id) => id,
            None => {
                if self.dimsets.len() >= usize::from(u16::MAX) {
                    return Err(too_large(
                        "dimension lists",
                        self.dimsets.len() + 1,
                        usize::from(u16::MAX) - 1,
                    ));
                }
                let id = self.dimsets.len() as u16;
                self.dimsets.push(dims.clone());
                self.dimset_ids.insert(dims, id);
                id
            }
        };
        let rec = RegionRec {
            tensor: r.tensor,
            dims: dims_id,
        };
        if let Some(&id) = self.region_ids.get(&rec) {
            return Ok(id);
        }
        if self.regions.len() >= usize::from(NONE16) {
            return Err(too_large(
                "regions",
                self.regions.len() + 1,
                usize::from(NONE16) - 1,
            ));
        }
        let id = self.regions.len() as u16;
        self.regions.push(rec);
        self.region_ids.insert(rec, id);
        Ok(id)
    }

    /// A keyset of full length; `keys` shorter than that leaves [`NONE16`] entries.
    fn keyset(&mut self, keys: &[TExpr]) -> Result<u32, EncodeError> {
        if self.keyset_len == 0 {
            return Ok(NO_KEYSET);
        }
        let mut ids = Vec::with_capacity(self.keyset_len);
        for k in keys.iter().take(self.keyset_len) {
            ids.push(self.expr(k)?);
        }
        ids.resize(self.keyset_len, NONE16);
        if let Some(&id) = self.keyset_ids.get(&ids) {
            return Ok(u32::from(id));
        }
        let n = self.keysets.len() / self.keyset_len;
        if n >= usize::from(u16::MAX) {
            return Err(too_large("keysets", n + 1, usize::from(u16::MAX) - 1));
        }
        self.keysets.extend_from_slice(&ids);
        self.keyset_ids.insert(ids, n as u16);
        Ok(n as u32)
    }

    fn push(&mut self, i: Insn) -> usize {
        self.insns.push(i);
        self.insns.len() - 1
    }

    fn refs(&mut self, refs: &[u16]) {
        for chunk in refs.chunks(3) {
            let r = |i: usize| u32::from(chunk.get(i).copied().unwrap_or(0));
            self.push(Insn {
                op: Op::Args,
                flags: chunk.len() as u8,
                a: chunk[0],
                b: r(1) | (r(2) << 16),
            });
        }
    }

    /// The instructions pushed from now on belong to the statement at `loc`: an entry of the
    /// statement-location table, unless the last entry says the same; an entry at the same pc
    /// as the last replaces it.
    fn at(&mut self, loc: Loc) {
        let pc = self.insns.len() as u32;
        let same = |a: Loc, b: Loc| a.start == b.start && a.end == b.end;
        if let Some(&(last_pc, last)) = self.stmt_locs.last() {
            if same(last, loc) {
                return;
            }
            if last_pc == pc {
                self.stmt_locs.pop();
                if self.stmt_locs.last().is_some_and(|&(_, l)| same(l, loc)) {
                    return;
                }
            }
        }
        self.stmt_locs.push((pc, loc));
    }

    fn stmts(&mut self, body: &[LStmt]) -> Result<(), EncodeError> {
        for s in body {
            self.stmt(s)?;
        }
        Ok(())
    }

    fn stmt(&mut self, s: &LStmt) -> Result<(), EncodeError> {
        match s {
            LStmt::Loop(l) => self.emit_loop(l)?,
            LStmt::If {
                cond,
                then,
                otherwise,
                loc,
            } => {
                self.at(*loc);
                self.emit_if(cond, then, otherwise)?;
            }
            LStmt::Seq(body) => self.emit_seq(body)?,
            LStmt::Block(body) => self.stmts(body)?,
            LStmt::Task(t) => self.emit_task(t)?,
            LStmt::Set { reg, value, loc } => {
                self.at(*loc);
                let e = self.expr(value)?;
                self.push(Insn::new(Op::Set, *reg, u32::from(e)));
            }
            LStmt::Load {
                reg,
                tensor,
                index,
                computed,
                loc,
            } => {
                self.at(*loc);
                self.emit_load(*reg, *tensor, index, (*computed).then_some(*loc))?;
            }
            LStmt::While {
                cond,
                max,
                body,
                loc,
            } => self.emit_while(cond, max, body, *loc)?,
            LStmt::Break { cond, loc } => {
                self.at(*loc);
                let c = self.expr(cond)?;
                let Some(&w) = self.whiles.last() else {
                    return Err(EncodeError::Malformed {
                        message: "`break if` outside a `while`".into(),
                    });
                };
                self.push(Insn::new(Op::Break, c, w as u32));
            }
            LStmt::Send {
                channel,
                value,
                loc,
            } => {
                self.at(*loc);
                let e = self.expr(value)?;
                self.push(Insn::new(Op::Send, u16::from(*channel), u32::from(e)));
            }
            LStmt::Consume {
                channel,
                var,
                body,
                loc,
            } => self.emit_consume(*channel, *var, body, *loc)?,
        }
        Ok(())
    }

    /// `seq` with a `step` between its statements, and `seqend` (nothing for an empty one).
    fn emit_seq(&mut self, body: &[LStmt]) -> Result<(), EncodeError> {
        if body.is_empty() {
            return Ok(());
        }
        let at = self.push(Insn::new(Op::Seq, 0, 0));
        self.enter()?;
        for (i, child) in body.iter().enumerate() {
            if i > 0 {
                self.push(Insn::new(Op::Step, 0, at as u32));
            }
            self.stmt(child)?;
        }
        let end = self.push(Insn::new(Op::SeqEnd, 0, at as u32));
        self.insns[at].b = end as u32;
        self.depth -= 1;
        Ok(())
    }

    /// `load` of a bound tensor's element into `reg`, or `read` of a computed one (`computed`:
    /// the statement's location, recorded for the read), followed by its index expressions.
    fn emit_load(
        &mut self,
        reg: u16,
        tensor: u16,
        index: &[TExpr],
        computed: Option<Loc>,
    ) -> Result<(), EncodeError> {
        let mut refs = Vec::new();
        for e in index {
            refs.push(self.expr(e)?);
        }
        let op = if computed.is_some() {
            Op::Read
        } else {
            Op::Load
        };
        let at = self.push(Insn::new(op, reg, u32::from(tensor)));
        if let Some(loc) = computed {
            self.read_locs.push((at as u32, loc));
        }
        self.refs(&refs);
        Ok(())
    }

    /// `while` (at most `max` iterations) and its `wend`, which evaluates the condition.
    fn emit_while(
        &mut self,
        cond: &TExpr,
        max: &TExpr,
        body: &[LStmt],
        loc: Loc,
    ) -> Result<(), EncodeError> {
        self.at(loc);
        let m = self.expr(max)?;
        let at = self.push(Insn::new(Op::While, m, 0));
        self.enter()?;
        self.whiles.push(at);
        self.stmts(body)?;
        self.whiles.pop();
        self.depth -= 1;
        // The `wend` evaluates the condition: the `while` statement's again.
        self.at(loc);
        let c = self.expr(cond)?;
        let end = self.push(Insn::new(Op::EndWhile, c, at as u32));
        self.insns[at].b = end as u32;
        Ok(())
    }

    /// `consume` of `channel` into `var` and its `next`.
    fn emit_consume(
        &mut self,
        channel: u8,
        var: u16,
        body: &[LStmt],
        loc: Loc,
    ) -> Result<(), EncodeError> {
        self.at(loc);
        let at = self.push(Insn {
            op: Op::Consume,
            flags: channel,
            a: var,
            b: 0,
        });
        self.enter()?;
        self.stmts(body)?;
        self.depth -= 1;
        self.at(loc);
        let next = self.push(Insn::new(Op::Next, 0, at as u32));
        self.insns[at].b = next as u32;
        Ok(())
    }

    /// `if` (with `else` when there is an `otherwise`) and `endif`.
    fn emit_if(
        &mut self,
        cond: &TExpr,
        then: &[LStmt],
        otherwise: &[LStmt],
    ) -> Result<(), EncodeError> {
        let c = self.expr(cond)?;
        let at = self.push(Insn::new(Op::If, c, 0));
        self.enter()?;
        self.stmts(then)?;
        if otherwise.is_empty() {
            let end = self.push(Insn::new(Op::EndIf, 0, at as u32));
            self.insns[at].b = end as u32;
        } else {
            let els = self.push(Insn::new(Op::Else, 0, 0));
            self.insns[at].b = els as u32;
            self.stmts(otherwise)?;
            let end = self.push(Insn::new(Op::EndIf, 0, at as u32));
            self.insns[els].b = end as u32;
        }
        self.depth -= 1;
        Ok(())
    }

    /// A loop: its descriptor, `loop`, the body, `next`.
    fn emit_loop(&mut self, l: &LLoop) -> Result<(), EncodeError> {
        let keyset = match &l.hoist {
            Some(keys) => self.keyset(keys)? as u16,
            None => NONE16,
        };
        let count = match &l.count {
            Some(c) => self.expr(c)?,
            None => NONE16,
        };
        let mut flags = 0;
        if l.row_skip {
            flags |= LOOP_ROW_SKIP;
        }
        if l.range_skip {
            flags |= LOOP_RANGE_SKIP;
        }
        if self.loops.len() >= usize::from(NONE16) {
            return Err(too_large(
                "loops",
                self.loops.len() + 1,
                usize::from(NONE16) - 1,
            ));
        }
        let id = self.loops.len() as u16;
        self.at(l.loc);
        self.loops.push(LoopRec {
            axis: l.axis,
            var0: l.vars[0],
            var1: l.vars[1],
            keyset,
            count,
            flags,
        });
        let at = self.push(Insn {
            op: Op::Loop,
            flags: u8::from(l.ordered),
            a: id,
            b: 0,
        });
        if let Some(loc) = l.computed {
            self.read_locs.push((at as u32, loc));
        }
        self.enter()?;
        self.stmts(&l.body)?;
        self.depth -= 1;
        // The `next` advances the loop (a ragged row's length, a sparse row): its statement.
        self.at(l.loc);
        let next = self.push(Insn::new(Op::Next, 0, at as u32));
        self.insns[at].b = next as u32;
        Ok(())
    }

    /// A task: `task` and the `args` of its kernel's parameters in order (regions and scalar
    /// expressions).
    fn emit_task(&mut self, t: &LTask) -> Result<(), EncodeError> {
        self.at(t.loc);
        let keyset = self.keyset(&t.keys)?;
        let tiles = self
            .kernel_tiles
            .get(usize::from(t.kernel))
            .cloned()
            .unwrap_or_default();
        let mut refs = Vec::new();
        let (mut si, mut ri) = (0, 0);
        for tile in tiles {
            if tile {
                let r = t.regions.get(ri).ok_or_else(|| EncodeError::Malformed {
                    message: "a task has fewer regions than its kernel".into(),
                })?;
                refs.push(self.region(r)?);
                ri += 1;
            } else {
                let e = t.scalars.get(si).ok_or_else(|| EncodeError::Malformed {
                    message: "a task has fewer scalars than its kernel".into(),
                })?;
                refs.push(self.expr(e)?);
                si += 1;
            }
        }
        self.push(Insn {
            op: Op::Task,
            flags: u8::from(t.hoisted),
            a: t.kernel,
            b: keyset,
        });
        self.refs(&refs);
        Ok(())
    }

    fn dnode(d: &LDispatch) -> DNodeRec {
        match d {
            LDispatch::RoundRobin(n) => DNodeRec::RoundRobin(*n),
            LDispatch::Affinity(s) => DNodeRec::Affinity(*s),
            LDispatch::Hash(s) => DNodeRec::Hash(*s),
            LDispatch::Threshold(m, levels, otherwise) => DNodeRec::Threshold {
                metric: *m,
                levels: levels
                    .iter()
                    .map(|(b, d)| (*b, Emitter::dnode(d)))
                    .collect(),
                otherwise: Box::new(Emitter::dnode(otherwise)),
            },
            LDispatch::StaticPartition(s) => DNodeRec::StaticPartition(s.clone()),
            LDispatch::WorkSteal => DNodeRec::WorkSteal,
        }
    }

    fn emit(
        mut self,
        module: &Module,
        l: &Lowered,
        options: &EncodeOptions,
    ) -> Result<Image, EncodeError> {
        // Tables that expressions refer to first, so their ids exist.
        let axes = self.axis_recs(l)?;
        let tensors = self.tensor_recs(module, l)?;
        let kernels = self.kernel_recs(module, l)?;
        for (i, (_, body)) in l.processes.iter().enumerate() {
            let at = self.push(Insn::new(Op::Proc, i as u16, 0));
            self.depth = 0;
            self.enter()?;
            self.stmts(body)?;
            let end = self.push(Insn::new(Op::EndProc, 0, at as u32));
            self.insns[at].b = end as u32;
        }
        self.push(Insn::new(Op::Halt, 0, 0));
        if self.insns.len() > u32::MAX as usize / 2 {
            return Err(too_large(
                "instructions",
                self.insns.len(),
                u32::MAX as usize / 2,
            ));
        }
        if self.consts.len() > usize::from(u16::MAX) {
            return Err(too_large(
                "constants",
                self.consts.len(),
                usize::from(u16::MAX),
            ));
        }
        if l.reg_types.len() >= usize::from(NONE16) {
            return Err(too_large(
                "registers",
                l.reg_types.len(),
                usize::from(NONE16) - 1,
            ));
        }
        let sched = self.sched_rec(l)?;
        let names = names(module, l, options);
        if module.tensors.len() > usize::from(u16::MAX)
            || module.kernels.len() > usize::from(u16::MAX)
        {
            return Err(too_large(
                "tensors or kernels",
                module.tensors.len().max(module.kernels.len()),
                usize::from(u16::MAX),
            ));
        }
        Ok(Image {
            insns: self.insns,
            ops: self.ops,
            exprs: self.exprs,
            consts: self.consts,
            reg_types: l.reg_types.iter().map(|t| scalar_code(*t)).collect(),
            symbols: module
                .symbols
                .iter()
                .zip(&l.symbols_used)
                .map(|(s, used)| scalar_code(s.ty) | if *used { 0x80 } else { 0 })
                .collect(),
            slots: module.slots.iter().map(|s| scalar_code(s.ty)).collect(),
            axes,
            loops: self.loops,
            tensors,
            kernels,
            regions: self.regions,
            dimsets: self.dimsets,
            keyset_len: self.keyset_len as u8,
            keysets: self.keysets,
            sched,
            channels: l.channels.iter().map(|(_, p, c)| (*p, *c)).collect(),
            n_procs: l.processes.len() as u8,
            debug_names: options.names,
            names,
            read_locs: self.read_locs,
            // Debug information; only a module with text has locations worth storing.
            stmt_locs: if options.names && self.stmt_locs.iter().any(|(_, l)| l.is_known()) {
                self.stmt_locs
            } else {
                Vec::new()
            },
        })
    }

    /// The axis table.
    fn axis_recs(&mut self, l: &Lowered) -> Result<Vec<AxisRec>, EncodeError> {
        let mut axes = Vec::new();
        for (_, a) in &l.axes {
            axes.push(match a {
                LAxis::Dense(e) => AxisRec {
                    kind: AxisCode::Dense as u8,
                    extent: self.expr(e)?,
                    arr0: NONE16,
                    arr1: NONE16,
                },
                LAxis::Ragged(e, t) => AxisRec {
                    kind: AxisCode::Ragged as u8,
                    extent: self.expr(e)?,
                    arr0: *t,
                    arr1: NONE16,
                },
                LAxis::Sparse(e, p, i) => AxisRec {
                    kind: AxisCode::Sparse as u8,
                    extent: self.expr(e)?,
                    arr0: *p,
                    arr1: *i,
                },
            });
        }
        Ok(axes)
    }

    /// The tensor table: element type, flags, shape expressions.
    fn tensor_recs(&mut self, module: &Module, l: &Lowered) -> Result<Vec<TensorRec>, EncodeError> {
        let mut tensors = Vec::new();
        for (i, t) in module.tensors.iter().enumerate() {
            let mut flags = 0;
            let mut dims = Vec::new();
            if let Some(Some(shape)) = l.shapes.get(i) {
                flags |= TENSOR_SHAPED;
                for d in shape {
                    dims.push(self.expr(d)?);
                }
            }
            if l.arrays.get(i).copied().unwrap_or(false) {
                flags |= TENSOR_ARRAY;
            }
            tensors.push(TensorRec {
                dtype: dtype_code(t.dtype),
                flags,
                dims,
            });
        }
        Ok(tensors)
    }

    /// The kernel table: pool, parameter codes of used kernels, tier cases.
    fn kernel_recs(&mut self, module: &Module, l: &Lowered) -> Result<Vec<KernelRec>, EncodeError> {
        let mut kernels = Vec::new();
        for (i, k) in module.kernels.iter().enumerate() {
            let used = l.kernel_used.get(i).copied().unwrap_or(false);
            let params = if used {
                k.params
                    .iter()
                    .map(|p| match &p.kind {
                        ParamKind::Tile { access, .. } => tile_code(*access),
                        ParamKind::Scalar(t) => scalar_code(t.carrier()),
                    })
                    .collect()
            } else {
                Vec::new()
            };
            let tiers = match l.tiers.get(i) {
                Some(Some((cases, default))) => {
                    let mut cs = Vec::new();
                    for (c, v) in cases {
                        cs.push((self.expr(c)?, *v));
                    }
                    Some((cs, *default))
                }
                _ => None,
            };
            kernels.push(KernelRec {
                pool: pool_code(k.pool),
                params,
                tiers,
            });
        }
        Ok(kernels)
    }

    /// The schedule section: counts, the dispatch tree and the key slots after the dispatch
    /// keys (stream key, pool metric, priority, cost, in that order).
    fn sched_rec(&self, l: &Lowered) -> Result<SchedRec, EncodeError> {
        let dispatch = l
            .dispatch
            .as_ref()
            .map_or(DNodeRec::WorkSteal, Emitter::dnode);
        let stream_by = l.stream_by.then_some(self.n_dispatch_keys as u8);
        let pools = l.pools.as_ref().map(|(levels, otherwise)| PoolRec {
            metric: (self.n_dispatch_keys + usize::from(l.stream_by)) as u8,
            levels: levels.iter().map(|(b, p)| (*b, pool_code(*p))).collect(),
            otherwise: pool_code(*otherwise),
        });
        let after_pools =
            self.n_dispatch_keys + usize::from(l.stream_by) + usize::from(l.pools.is_some());
        let priority = l.priority.then_some(after_pools as u8);
        let cost = l
            .cost
            .then_some((after_pools + usize::from(l.priority)) as u8);
        if pools.as_ref().is_some_and(|p| p.levels.len() > 255) {
            return Err(too_large("pool levels", 256, 255));
        }
        Ok(SchedRec {
            executors: l.executors,
            streams: l.streams,
            dispatch,
            stream_by,
            pools,
            priority,
            cost,
        })
    }
}

/// The names section: symbols and slots always; tensors with bound contents always; the rest
/// with debug names (empty otherwise).
fn names(module: &Module, l: &Lowered, options: &EncodeOptions) -> Names {
    let name = |keep: bool, s: &str| if keep { s.to_string() } else { String::new() };
    Names {
        symbols: module.symbols.iter().map(|s| s.name.name.clone()).collect(),
        slots: module.slots.iter().map(|s| s.name.name.clone()).collect(),
        tensors: module
            .tensors
            .iter()
            .enumerate()
            .map(|(i, t)| {
                name(
                    options.names || l.arrays.get(i).copied().unwrap_or(false),
                    &t.name.name,
                )
            })
            .collect(),
        kernels: module
            .kernels
            .iter()
            .map(|k| name(options.names, &k.name.name))
            .collect(),
        axes: l.axes.iter().map(|(n, _)| name(options.names, n)).collect(),
        procs: l
            .processes
            .iter()
            .map(|(n, _)| name(options.names, n))
            .collect(),
        channels: l
            .channels
            .iter()
            .map(|(n, ..)| name(options.names, n))
            .collect(),
    }
}
