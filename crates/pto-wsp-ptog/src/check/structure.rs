//! The structural pass: where each instruction may stand, what it defines and refers to, and
//! the plan it builds.
//!
//! Rules (each broken one is a [`CheckError`] at the instruction, and operand when one is at
//! fault): graphs are defined at top level, outside control flow, and do not nest; `TG_END`
//! names the graph its `TG_BEGIN` opened; kernel-level instructions (`TG_KERNEL`, `TG_DEPEND`,
//! `MC_BIND`, `CA_*`, `SY_SIGNAL` / `SY_WAIT` / `SY_BARRIER`) stand in a graph definition, and
//! inside a graph's control-flow block only `TG_KERNEL` and control flow do; launches,
//! `MC_FREE`, `MC_COPY` and notifications stand in the control code; every `CF_*` block is
//! closed in the context it was opened in; every id referred to is defined (tensors by an
//! `MC_ALLOC` anywhere, graphs by an earlier definition, kernels in their graph).

use super::graph::{self, GraphBuild, ItemBuild, OpenBlock};
use super::{CheckError, Checked, Ctl, Scalar, TensorPlan};
use crate::isa::{Insn, Op};
use crate::operand::{IterVal, Ns, ScalarRef};
use crate::program::Program;
use pto_wsp_ir::DType;
use std::collections::{HashMap, HashSet};

/// The largest alignment an allocation may ask for (a page).
pub const MAX_ALIGN: u32 = 4096;

/// The most instances a kernel may have.
pub const MAX_BLOCK_DIM: u32 = 65535;

/// An open control-flow block of the control code.
struct TopOpen {
    op: Op,
    insn: usize,
    /// Its control step.
    pc: usize,
    /// The `CF_ELSE` step, once seen.
    else_pc: Option<usize>,
    /// `CF_BREAK` steps to patch with the loop's end.
    breaks: Vec<usize>,
    /// The iterator of a `CF_LOOP`.
    iter: Option<u32>,
}

fn err<T>(insn: usize, operand: Option<usize>, m: impl Into<String>) -> Result<T, CheckError> {
    Err(CheckError::at(insn, operand, m))
}

/// The opener a closing instruction matches.
fn opener(op: Op) -> Option<Op> {
    match op {
        Op::CfEndIf | Op::CfElse => Some(Op::CfIf),
        Op::CfEndLoop => Some(Op::CfLoop),
        Op::CfEndWhile => Some(Op::CfWhile),
        _ => None,
    }
}

/// The closer of an opening instruction.
fn closer(op: Op) -> &'static str {
    match op {
        Op::CfIf => "CF_ENDIF",
        Op::CfLoop => "CF_ENDLOOP",
        Op::CfWhile => "CF_ENDWHILE",
        _ => "TG_END",
    }
}

/// Reads every `MC_ALLOC` (they may be referred to before they stand).
fn tensors(p: &Program) -> Result<(Vec<TensorPlan>, HashMap<u32, usize>), CheckError> {
    let mut plans = Vec::new();
    let mut index = HashMap::new();
    for (i, insn) in p.insns.iter().enumerate() {
        let Insn::McAlloc {
            tensor,
            size,
            alignment,
            location,
            shape,
        } = insn
        else {
            continue;
        };
        if index.insert(tensor.0, plans.len()).is_some() {
            return err(
                i,
                Some(0),
                format!(
                    "tensor {} is allocated by two MC_ALLOC instructions (each tensor has one)",
                    p.tensor_name(tensor.0)
                ),
            );
        }
        if !alignment.is_power_of_two() || *alignment > MAX_ALIGN {
            return err(
                i,
                Some(2),
                format!("alignment {alignment} is not a power of two of at most {MAX_ALIGN}"),
            );
        }
        if *size == 0 {
            return err(i, Some(1), "an allocation of 0 bytes");
        }
        let (dtype, dims) = match shape {
            Some(s) => {
                if s.bytes() != Some(*size) {
                    return err(
                        i,
                        Some(4),
                        format!(
                            "size {size} does not match {}[{}] ({} bytes)",
                            s.dtype,
                            s.dims
                                .iter()
                                .map(u32::to_string)
                                .collect::<Vec<_>>()
                                .join(", "),
                            s.bytes()
                                .map_or("more than 2^64".to_string(), |b| b.to_string())
                        ),
                    );
                }
                (s.dtype, s.dims.iter().map(|&d| d as u64).collect())
            }
            None => (DType::U8, vec![*size]),
        };
        plans.push(TensorPlan {
            id: tensor.0,
            name: p.tensor_name(tensor.0),
            dtype,
            shape: dims,
            size: *size,
            align: *alignment,
            location: *location,
            insn: i,
        });
    }
    Ok((plans, index))
}

/// The walk over the instructions (see the module docs).
struct Walk<'p> {
    p: &'p Program,
    c: Checked,
    top: Vec<TopOpen>,
    cur: Option<GraphBuild>,
    /// Graph ids defined so far.
    defined: HashSet<u32>,
    /// Graphs any `TG_LAUNCH` / `TG_INVOKE` launches.
    launched: HashSet<usize>,
    /// `TG_SYNC`s: graph index, instruction.
    syncs: Vec<(usize, usize)>,
    partitions: HashMap<u32, usize>,
    barriers: HashMap<u32, usize>,
    signalled: HashSet<u32>,
    waited: Vec<(u32, usize)>,
}

impl Walk<'_> {
    fn tensor(&self, insn: usize, operand: usize, id: u32) -> Result<usize, CheckError> {
        match self.c.tensor_index.get(&id) {
            Some(&t) => Ok(t),
            None => err(
                insn,
                Some(operand),
                format!(
                    "tensor {} is not allocated by any MC_ALLOC",
                    self.p.tensor_name(id)
                ),
            ),
        }
    }

    /// A scalar operand resolved; counts must be integers.
    pub(super) fn scalar(
        &self,
        insn: usize,
        operand: usize,
        s: &ScalarRef,
        count: bool,
    ) -> Result<Scalar, CheckError> {
        match *s {
            ScalarRef::Imm(v) => Ok(Scalar::Imm(v)),
            ScalarRef::Elem { tensor, index } => {
                let t = self.tensor(insn, operand, tensor.0)?;
                let plan = &self.c.tensors[t];
                if index as u64 >= plan.elements() {
                    return err(
                        insn,
                        Some(operand),
                        format!(
                            "element {index} is out of range: tensor {} has {} element(s)",
                            plan.name,
                            plan.elements()
                        ),
                    );
                }
                if count && !plan.dtype.is_integer() {
                    return err(
                        insn,
                        Some(operand),
                        format!(
                            "a loop count is an integer, but tensor {} holds {} elements",
                            plan.name, plan.dtype
                        ),
                    );
                }
                Ok(Scalar::Elem {
                    tensor: t,
                    index: index as u64,
                })
            }
        }
    }

    fn emit(&mut self, ctl: Ctl, insn: usize) -> usize {
        self.c.control.push(ctl);
        self.c.control_insns.push(insn);
        self.c.control.len() - 1
    }

    fn graph_ref(&self, i: usize, id: u32) -> Result<usize, CheckError> {
        if !self.defined.contains(&id) {
            return err(
                i,
                Some(0),
                format!(
                    "graph {} is not defined before this instruction",
                    self.p.graph_name(id)
                ),
            );
        }
        Ok(self.c.graph_index[&id])
    }

    /// Where an instruction of the control code may not stand: in a graph definition.
    fn control_only(&self, i: usize, op: Op) -> Result<(), CheckError> {
        if let Some(g) = &self.cur {
            return err(
                i,
                None,
                format!(
                    "{} inside the definition of graph {}: it belongs to the control code",
                    op.mnemonic(),
                    self.p.graph_name(g.id)
                ),
            );
        }
        Ok(())
    }

    /// A kernel-level instruction: inside a graph definition, outside its control flow.
    fn graph_level(&mut self, i: usize, op: Op) -> Result<&mut GraphBuild, CheckError> {
        let Some(g) = self.cur.as_mut() else {
            return err(
                i,
                None,
                format!("{} outside a graph definition", op.mnemonic()),
            );
        };
        if let Some(open) = g.stack.last() {
            return err(
                i,
                None,
                format!(
                    "{} inside a {} block of graph {}: only TG_KERNEL and control flow stand there",
                    op.mnemonic(),
                    open.op.mnemonic(),
                    g.name
                ),
            );
        }
        Ok(g)
    }

    fn step(&mut self, i: usize, insn: &Insn) -> Result<(), CheckError> {
        let op = insn.op();
        match insn {
            Insn::TgBegin { graph } => self.begin_graph(i, graph.0)?,
            Insn::TgEnd { graph } => self.end_graph(i, graph.0)?,
            Insn::TgKernel {
                kernel, block_dim, ..
            } => self.define_kernel(i, kernel.0, *block_dim)?,
            Insn::TgDepend { .. }
            | Insn::McBind { .. }
            | Insn::CaRequest { .. }
            | Insn::CaAffinity { .. }
            | Insn::SySignal { .. }
            | Insn::SyWait { .. } => self.kernel_ref(i, insn)?,
            Insn::CaPartition {
                partition,
                aic_start,
                aic_count,
                aiv_start,
                aiv_count,
            } => self.partition(
                i,
                partition.0,
                (*aic_start, *aic_count),
                (*aiv_start, *aiv_count),
            )?,
            Insn::SyBarrier { barrier, .. } => self.define_barrier(i, barrier.0)?,
            Insn::McAlloc { tensor, .. } => self.alloc(i, tensor.0)?,
            Insn::McFree { tensor } => {
                self.control_only(i, op)?;
                let t = self.tensor(i, 0, tensor.0)?;
                self.emit(Ctl::Free { tensor: t }, i);
            }
            Insn::McCopy {
                src,
                dst,
                size,
                src_offset,
                dst_offset,
            } => self.copy(i, (src.0, *src_offset), (dst.0, *dst_offset), *size)?,
            Insn::McFence { scope } => {
                if let Some(g) = &self.cur
                    && !g.stack.is_empty()
                {
                    self.graph_level(i, op)?;
                }
                self.emit(Ctl::Fence(*scope), i);
            }
            Insn::CfIf { .. }
            | Insn::CfLoop { .. }
            | Insn::CfWhile { .. }
            | Insn::CfBreak { .. }
            | Insn::CfElse {}
            | Insn::CfEndIf {}
            | Insn::CfEndLoop {}
            | Insn::CfEndWhile {} => {
                if self.cur.is_some() {
                    self.graph_cf(i, insn)?;
                } else {
                    self.top_cf(i, insn)?;
                }
            }
            Insn::TgLaunch { graph, stream } => {
                self.launch(i, op, graph.0, stream.0, IterVal::Imm(0))?;
            }
            Insn::TgInvoke { graph, iteration } => {
                self.launch(i, op, graph.0, 0, *iteration)?;
            }
            Insn::TgSync { graph } => {
                self.control_only(i, op)?;
                let g = self.graph_ref(i, graph.0)?;
                self.syncs.push((g, i));
                self.emit(Ctl::Sync { graph: g }, i);
            }
            Insn::SyNotify { device, notify } => {
                let ctl = Ctl::Notify {
                    device: device.0,
                    id: notify.0,
                };
                self.control_only(i, op)?;
                self.emit(ctl, i);
            }
            Insn::SyWaitNotify { device, notify } => {
                let ctl = Ctl::WaitNotify {
                    device: device.0,
                    id: notify.0,
                };
                self.control_only(i, op)?;
                self.emit(ctl, i);
            }
        }
        Ok(())
    }

    /// `TG_BEGIN(graph)`: a new graph definition, at top level.
    fn begin_graph(&mut self, i: usize, graph: u32) -> Result<(), CheckError> {
        if let Some(g) = &self.cur {
            return err(
                i,
                None,
                format!(
                    "TG_BEGIN({}) inside the definition of graph {}: graphs do not nest",
                    self.p.graph_name(graph),
                    g.name
                ),
            );
        }
        if let Some(open) = self.top.last() {
            return err(
                i,
                None,
                format!(
                    "TG_BEGIN inside a {} block: graphs are defined at top level",
                    open.op.mnemonic()
                ),
            );
        }
        if self.defined.contains(&graph) {
            return err(
                i,
                Some(0),
                format!("graph {} is defined twice", self.p.graph_name(graph)),
            );
        }
        self.cur = Some(GraphBuild::new(graph, self.p.graph_name(graph), i));
        Ok(())
    }

    /// `TG_END(graph)`: the definition open closes (its blocks closed) and becomes a plan.
    fn end_graph(&mut self, i: usize, graph: u32) -> Result<(), CheckError> {
        let Some(g) = self.cur.take() else {
            return err(
                i,
                Some(0),
                format!("TG_END({}) without a TG_BEGIN", self.p.graph_name(graph)),
            );
        };
        if g.id != graph {
            return err(
                i,
                Some(0),
                format!(
                    "TG_END({}) closes TG_BEGIN({}): the graph ids differ",
                    self.p.graph_name(graph),
                    g.name
                ),
            );
        }
        if let Some(open) = g.stack.last() {
            return err(
                open.insn,
                None,
                format!(
                    "{} is not closed by {} before TG_END({})",
                    open.op.mnemonic(),
                    closer(open.op),
                    g.name
                ),
            );
        }
        let plan = graph::finish(g, self.p, &self.c.tensors, &self.c.tensor_index)?;
        self.defined.insert(graph);
        self.c.graph_index.insert(graph, self.c.graphs.len());
        self.c.graphs.push(plan);
        Ok(())
    }

    /// `TG_KERNEL`: kernel `kernel` of the open graph, with `block_dim` instances.
    fn define_kernel(&mut self, i: usize, kernel: u32, block_dim: u32) -> Result<(), CheckError> {
        let Some(g) = self.cur.as_mut() else {
            return err(i, None, "TG_KERNEL outside a graph definition");
        };
        if !(1..=MAX_BLOCK_DIM).contains(&block_dim) {
            return err(
                i,
                Some(2),
                format!("blockDim is 1 to {MAX_BLOCK_DIM}, not {block_dim}"),
            );
        }
        if g.kernel_index.contains_key(&kernel) {
            return err(
                i,
                Some(0),
                format!(
                    "kernel {} is defined twice in graph {}",
                    self.p.kernel_name(g.id, kernel),
                    g.name
                ),
            );
        }
        g.add_kernel(self.p, i);
        Ok(())
    }

    /// `CA_PARTITION`: the open graph's one partition, `(start, count)` cores of each type.
    fn partition(
        &mut self,
        i: usize,
        partition: u32,
        (aic_start, aic_count): (u32, u32),
        (aiv_start, aiv_count): (u32, u32),
    ) -> Result<(), CheckError> {
        if self.partitions.insert(partition, i).is_some() {
            return err(
                i,
                Some(0),
                format!(
                    "partition {} is defined twice",
                    self.p.name_of(Ns::Partition, partition)
                ),
            );
        }
        if aic_start.checked_add(aic_count).is_none() || aiv_start.checked_add(aiv_count).is_none()
        {
            return err(i, None, "a core range passes 2^32");
        }
        if aic_count == 0 && aiv_count == 0 {
            return err(i, Some(2), "a partition with no core");
        }
        let name = self.p.name_of(Ns::Partition, partition);
        let g = self.graph_level(i, Op::CaPartition)?;
        if g.partition.is_some() {
            return err(
                i,
                None,
                format!("graph {} has a second CA_PARTITION ({name})", g.name),
            );
        }
        g.partition = Some(super::PartitionPlan {
            id: partition,
            aic: (aic_start, aic_count),
            aiv: (aiv_start, aiv_count),
            insn: i,
        });
        Ok(())
    }

    /// An instruction about the open graph's kernels (dependencies, bindings, placement,
    /// events), read when the graph ends; events signalled and waited for are noted.
    fn kernel_ref(&mut self, i: usize, insn: &Insn) -> Result<(), CheckError> {
        self.graph_level(i, insn.op())?.refs.push(i);
        match insn {
            Insn::SySignal { event, .. } => {
                self.signalled.insert(event.0);
            }
            Insn::SyWait { event, .. } => self.waited.push((event.0, i)),
            _ => {}
        }
        Ok(())
    }

    /// `SY_BARRIER` defining `barrier`, in a graph definition.
    fn define_barrier(&mut self, i: usize, barrier: u32) -> Result<(), CheckError> {
        if self.barriers.insert(barrier, i).is_some() {
            return err(
                i,
                Some(1),
                format!(
                    "barrier {} is defined twice",
                    self.p.name_of(Ns::Barrier, barrier)
                ),
            );
        }
        self.graph_level(i, Op::SyBarrier)?.refs.push(i);
        Ok(())
    }

    /// `MC_ALLOC`: anywhere but inside a graph's control flow.
    fn alloc(&mut self, i: usize, tensor: u32) -> Result<(), CheckError> {
        if let Some(g) = &self.cur
            && let Some(open) = g.stack.last()
        {
            return err(
                i,
                None,
                format!(
                    "MC_ALLOC inside a {} block of graph {}: only TG_KERNEL and control \
                     flow stand there",
                    open.op.mnemonic(),
                    g.name
                ),
            );
        }
        let t = self.c.tensor_index[&tensor];
        self.emit(Ctl::Alloc { tensor: t }, i);
        Ok(())
    }

    /// `MC_COPY` of `size` bytes from `(tensor, offset)` `src` to `dst`, in the control code.
    fn copy(
        &mut self,
        i: usize,
        (src, src_offset): (u32, u64),
        (dst, dst_offset): (u32, u64),
        size: u64,
    ) -> Result<(), CheckError> {
        self.control_only(i, Op::McCopy)?;
        let s = self.tensor(i, 0, src)?;
        let d = self.tensor(i, 1, dst)?;
        copy_range(&self.c.tensors[s], src_offset, size, i, 3)?;
        copy_range(&self.c.tensors[d], dst_offset, size, i, 4)?;
        if size == 0 {
            return err(i, Some(2), "a copy of 0 bytes");
        }
        self.emit(
            Ctl::Copy {
                src: s,
                dst: d,
                size,
                src_offset,
                dst_offset,
            },
            i,
        );
        Ok(())
    }

    /// `TG_LAUNCH` / `TG_INVOKE` of a defined graph, in the control code; an iteration given
    /// by an iterator names one of an enclosing `CF_LOOP`.
    fn launch(
        &mut self,
        i: usize,
        op: Op,
        graph: u32,
        stream: u32,
        iteration: IterVal,
    ) -> Result<(), CheckError> {
        self.control_only(i, op)?;
        let g = self.graph_ref(i, graph)?;
        if let IterVal::Iter(it) = iteration
            && !self.top.iter().any(|o| o.iter == Some(it.0))
        {
            return err(
                i,
                Some(1),
                format!(
                    "iterator {} is not the iterator of an enclosing CF_LOOP",
                    self.p.name_of(Ns::Iterator, it.0)
                ),
            );
        }
        self.launched.insert(g);
        self.emit(
            Ctl::Launch {
                graph: g,
                stream,
                iteration,
            },
            i,
        );
        Ok(())
    }

    /// A control-flow instruction of the control code.
    fn top_cf(&mut self, i: usize, insn: &Insn) -> Result<(), CheckError> {
        let op = insn.op();
        match insn {
            Insn::CfIf { cond } => {
                let cond = self.scalar(i, 0, cond, false)?;
                let pc = self.emit(Ctl::If { cond, skip: 0 }, i);
                self.open_top(op, i, pc, None);
            }
            Insn::CfLoop { count, iterator } => {
                let count = self.scalar(i, 0, count, true)?;
                if self.top.iter().any(|o| o.iter == Some(iterator.0)) {
                    return err(
                        i,
                        Some(1),
                        format!(
                            "iterator {} is already the iterator of an enclosing CF_LOOP",
                            self.p.name_of(Ns::Iterator, iterator.0)
                        ),
                    );
                }
                let pc = self.emit(
                    Ctl::Loop {
                        count,
                        iter: iterator.0,
                        end: 0,
                    },
                    i,
                );
                self.open_top(op, i, pc, Some(iterator.0));
            }
            Insn::CfWhile { cond } => {
                let cond = self.scalar(i, 0, cond, false)?;
                let pc = self.emit(Ctl::While { cond, end: 0 }, i);
                self.open_top(op, i, pc, None);
            }
            Insn::CfBreak { cond } => {
                let cond = self.scalar(i, 0, cond, false)?;
                let Some(lp) = self
                    .top
                    .iter()
                    .rposition(|o| matches!(o.op, Op::CfLoop | Op::CfWhile))
                else {
                    return err(i, None, "CF_BREAK outside a CF_LOOP or CF_WHILE");
                };
                let counted = self.top[lp].op == Op::CfLoop;
                let pc = self.emit(
                    Ctl::Break {
                        cond,
                        end: 0,
                        counted,
                    },
                    i,
                );
                self.top[lp].breaks.push(pc);
            }
            Insn::CfElse {} => {
                let open = self.match_open(i, op)?;
                if open.else_pc.is_some() {
                    return err(i, None, "a second CF_ELSE for one CF_IF");
                }
                let pc = self.emit(Ctl::Else { end: 0 }, i);
                if let Some(o) = self.top.last_mut() {
                    o.else_pc = Some(pc);
                }
            }
            Insn::CfEndIf {} | Insn::CfEndLoop {} | Insn::CfEndWhile {} => self.close_top(i, op)?,
            _ => {}
        }
        Ok(())
    }

    /// Opens a block of the control code: `op` at `i`, its control step `pc`, its iterator.
    fn open_top(&mut self, op: Op, insn: usize, pc: usize, iter: Option<u32>) {
        self.top.push(TopOpen {
            op,
            insn,
            pc,
            else_pc: None,
            breaks: Vec::new(),
            iter,
        });
    }

    /// Closes the open block of the control code with `op` (at `i`): its end step written, the
    /// steps that jump to it (head, `CF_ELSE`, `CF_BREAK`s) patched.
    fn close_top(&mut self, i: usize, op: Op) -> Result<(), CheckError> {
        self.match_open(i, op)?;
        let open = self.top.pop().expect("matched above");
        let pc = self.c.control.len();
        let end = match op {
            Op::CfEndIf => self.emit(Ctl::EndIf, i),
            Op::CfEndLoop => self.emit(Ctl::EndLoop { head: open.pc }, i),
            _ => self.emit(Ctl::EndWhile { head: open.pc }, i),
        };
        debug_assert_eq!(pc, end);
        match &mut self.c.control[open.pc] {
            Ctl::If { skip, .. } => *skip = open.else_pc.map_or(end, |e| e + 1),
            Ctl::Loop { end: e, .. } | Ctl::While { end: e, .. } => *e = end,
            _ => {}
        }
        if let Some(e) = open.else_pc
            && let Ctl::Else { end: x } = &mut self.c.control[e]
        {
            *x = end;
        }
        for b in open.breaks {
            if let Ctl::Break { end: x, .. } = &mut self.c.control[b] {
                *x = end;
            }
        }
        Ok(())
    }

    /// The open block a closing instruction of the control code matches.
    fn match_open(&self, i: usize, op: Op) -> Result<&TopOpen, CheckError> {
        let want = opener(op).expect("a closing instruction");
        match self.top.last() {
            Some(o) if o.op == want => Ok(o),
            Some(o) => err(
                i,
                None,
                format!(
                    "{} closes a {} block (it needs {})",
                    op.mnemonic(),
                    o.op.mnemonic(),
                    closer(o.op)
                ),
            ),
            None => err(
                i,
                None,
                format!("{} without a {}", op.mnemonic(), want.mnemonic()),
            ),
        }
    }

    /// A control-flow instruction inside a graph definition.
    fn graph_cf(&mut self, i: usize, insn: &Insn) -> Result<(), CheckError> {
        let op = insn.op();
        let block = match insn {
            Insn::CfIf { cond } => Some(OpenBlock::new(op, i, self.scalar(i, 0, cond, false)?)),
            Insn::CfWhile { cond } => Some(OpenBlock::new(op, i, self.scalar(i, 0, cond, false)?)),
            Insn::CfLoop { count, iterator } => {
                let count = self.scalar(i, 0, count, true)?;
                let g = self.cur.as_ref().expect("in a graph");
                if g.stack.iter().any(|o| o.iter == Some(iterator.0)) {
                    return err(
                        i,
                        Some(1),
                        format!(
                            "iterator {} is already the iterator of an enclosing CF_LOOP",
                            self.p.name_of(Ns::Iterator, iterator.0)
                        ),
                    );
                }
                let mut b = OpenBlock::new(op, i, count);
                b.iter = Some(iterator.0);
                Some(b)
            }
            _ => None,
        };
        let g = self.cur.as_mut().expect("in a graph");
        if let Some(b) = block {
            g.stack.push(b);
            return Ok(());
        }
        match insn {
            Insn::CfBreak { cond } => {
                if !g
                    .stack
                    .iter()
                    .any(|o| matches!(o.op, Op::CfLoop | Op::CfWhile))
                {
                    return err(
                        i,
                        None,
                        format!("CF_BREAK outside a CF_LOOP or CF_WHILE of graph {}", g.name),
                    );
                }
                let cond = self.scalar(i, 0, cond, false)?;
                self.cur
                    .as_mut()
                    .expect("in a graph")
                    .push_item(ItemBuild::Break { cond, insn: i });
            }
            _ => {
                let want = opener(op).expect("a closing instruction");
                match g.stack.last() {
                    Some(o) if o.op == want => {}
                    Some(o) => {
                        return err(
                            i,
                            None,
                            format!(
                                "{} closes a {} block (it needs {})",
                                op.mnemonic(),
                                o.op.mnemonic(),
                                closer(o.op)
                            ),
                        );
                    }
                    None => {
                        return err(
                            i,
                            None,
                            format!(
                                "{} without a {} in graph {}",
                                op.mnemonic(),
                                want.mnemonic(),
                                g.name
                            ),
                        );
                    }
                }
                if op == Op::CfElse {
                    let o = g.stack.last_mut().expect("matched");
                    if o.els.is_some() {
                        return err(i, None, "a second CF_ELSE for one CF_IF");
                    }
                    o.els = Some(Vec::new());
                } else {
                    g.close_block();
                }
            }
        }
        Ok(())
    }
}

/// A byte range of a copy must lie in the tensor and be whole rows.
fn copy_range(
    t: &TensorPlan,
    offset: u64,
    size: u64,
    insn: usize,
    operand: usize,
) -> Result<(), CheckError> {
    let end = offset.checked_add(size);
    if end.is_none_or(|e| e > t.size) {
        return err(
            insn,
            Some(operand),
            format!(
                "bytes {offset}..{} are past the end of tensor {} ({} bytes)",
                offset.saturating_add(size),
                t.name,
                t.size
            ),
        );
    }
    let row = t.row_bytes();
    if !offset.is_multiple_of(row) || !size.is_multiple_of(row) {
        return err(
            insn,
            Some(operand),
            format!(
                "bytes {offset}..{} are not whole rows of tensor {} (rows of {row} bytes)",
                offset + size,
                t.name
            ),
        );
    }
    Ok(())
}

/// Checks the structure of `p` and builds its plan (see the module docs).
pub fn build(p: &Program) -> Result<Checked, CheckError> {
    let (tensors, tensor_index) = tensors(p)?;
    let mut w = Walk {
        p,
        c: Checked {
            program: Program::new(),
            tensors,
            graphs: Vec::new(),
            control: Vec::new(),
            control_insns: Vec::new(),
            tensor_index,
            graph_index: HashMap::new(),
        },
        top: Vec::new(),
        cur: None,
        defined: HashSet::new(),
        launched: HashSet::new(),
        syncs: Vec::new(),
        partitions: HashMap::new(),
        barriers: HashMap::new(),
        signalled: HashSet::new(),
        waited: Vec::new(),
    };
    for (i, insn) in p.insns.iter().enumerate() {
        w.step(i, insn)?;
    }
    if let Some(g) = &w.cur {
        return err(
            g.insn,
            None,
            format!("TG_BEGIN({}) is never closed by TG_END", g.name),
        );
    }
    if let Some(o) = w.top.last() {
        return err(
            o.insn,
            None,
            format!("{} is never closed by {}", o.op.mnemonic(), closer(o.op)),
        );
    }
    for &(g, i) in &w.syncs {
        if !w.launched.contains(&g) {
            return err(
                i,
                Some(0),
                format!(
                    "TG_SYNC of graph {}, which no TG_LAUNCH or TG_INVOKE launches",
                    w.c.graphs[g].name
                ),
            );
        }
    }
    for &(e, i) in &w.waited {
        if !w.signalled.contains(&e) {
            return err(
                i,
                Some(0),
                format!(
                    "event {} is waited for but no SY_SIGNAL signals it",
                    p.name_of(Ns::Event, e)
                ),
            );
        }
    }
    Ok(w.c)
}
