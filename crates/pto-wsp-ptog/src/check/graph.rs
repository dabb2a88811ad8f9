//! One graph definition turned into its plan: kernels with their arguments and placement, and
//! per block the dependencies between its items, checked for cycles.
//!
//! Why: edges name kernels, but a kernel inside a `CF_IF` or `CF_LOOP` runs only when (and as
//! often as) its block does, so an edge is *lifted* to the innermost block holding both ends:
//! an edge into a control-flow block makes the whole block wait, an edge out of it waits for
//! the whole block (every pass of a loop). A `BARRIER` edge becomes a join point after every
//! item defined up to its source and before every item defined from its destination; an
//! `SY_BARRIER` a join point that waits for what any kernel of its set waits for; a
//! `CF_BREAK` (or a `CF_IF` holding one) orders every item before it before it, and it before
//! every item after it, so what it skips has not started.
//!
//! Promises: a [`GraphPlan`]'s blocks are acyclic (a cycle is a [`CheckError`] at the
//! instruction that closed it, naming the items in order); each edge is counted once; a
//! `DATA` edge's source writes its tensor and its destination binds it; a kernel with several
//! instances writes no argument whole.

use super::{
    ArgPlan, Body, CheckError, GraphPlan, Item, KernelPlan, PartitionPlan, Scalar, TensorPlan,
};
use crate::isa::{Insn, Op};
use crate::operand::{AffinityType, CoreType, DependencyType, KernelId, Split, TensorId};
use crate::program::Program;
use std::collections::{BTreeSet, HashMap, HashSet};

fn err<T>(insn: usize, operand: Option<usize>, m: impl Into<String>) -> Result<T, CheckError> {
    Err(CheckError::at(insn, operand, m))
}

/// An item of a block being built.
pub(crate) enum ItemBuild {
    /// A kernel (index in the graph).
    Kernel(usize),
    /// `CF_IF`.
    If {
        cond: Scalar,
        then: Vec<ItemBuild>,
        els: Vec<ItemBuild>,
    },
    /// `CF_LOOP`.
    Loop {
        count: Scalar,
        iter: u32,
        body: Vec<ItemBuild>,
    },
    /// `CF_WHILE`.
    While { cond: Scalar, body: Vec<ItemBuild> },
    /// `CF_BREAK`.
    Break { cond: Scalar, insn: usize },
}

/// A control-flow block open in a graph definition.
pub(crate) struct OpenBlock {
    pub(crate) op: Op,
    pub(crate) insn: usize,
    scalar: Scalar,
    pub(crate) iter: Option<u32>,
    then: Vec<ItemBuild>,
    pub(crate) els: Option<Vec<ItemBuild>>,
}

impl OpenBlock {
    pub(crate) fn new(op: Op, insn: usize, scalar: Scalar) -> OpenBlock {
        OpenBlock {
            op,
            insn,
            scalar,
            iter: None,
            then: Vec::new(),
            els: None,
        }
    }
}

/// A graph definition being read.
pub(crate) struct GraphBuild {
    pub(crate) id: u32,
    pub(crate) name: String,
    pub(crate) insn: usize,
    /// `TG_KERNEL` instructions, in order.
    kernels: Vec<usize>,
    /// Iterators around each kernel.
    iters: Vec<Vec<u32>>,
    pub(crate) kernel_index: HashMap<u32, usize>,
    pub(crate) stack: Vec<OpenBlock>,
    root: Vec<ItemBuild>,
    /// Kernel-level instructions, resolved at `TG_END` (they may name kernels defined later).
    pub(crate) refs: Vec<usize>,
    pub(crate) partition: Option<PartitionPlan>,
}

impl GraphBuild {
    pub(crate) fn new(id: u32, name: String, insn: usize) -> GraphBuild {
        GraphBuild {
            id,
            name,
            insn,
            kernels: Vec::new(),
            iters: Vec::new(),
            kernel_index: HashMap::new(),
            stack: Vec::new(),
            root: Vec::new(),
            refs: Vec::new(),
            partition: None,
        }
    }

    pub(crate) fn push_item(&mut self, item: ItemBuild) {
        match self.stack.last_mut() {
            Some(o) => match &mut o.els {
                Some(e) => e.push(item),
                None => o.then.push(item),
            },
            None => self.root.push(item),
        }
    }

    pub(crate) fn add_kernel(&mut self, p: &Program, insn: usize) {
        if let Insn::TgKernel { kernel, .. } = &p.insns[insn] {
            let k = self.kernels.len();
            self.kernel_index.insert(kernel.0, k);
            self.kernels.push(insn);
            self.iters
                .push(self.stack.iter().filter_map(|o| o.iter).collect());
            self.push_item(ItemBuild::Kernel(k));
        }
    }

    pub(crate) fn close_block(&mut self) {
        let Some(o) = self.stack.pop() else { return };
        let item = match o.op {
            Op::CfIf => ItemBuild::If {
                cond: o.scalar,
                then: o.then,
                els: o.els.unwrap_or_default(),
            },
            Op::CfLoop => ItemBuild::Loop {
                count: o.scalar,
                iter: o.iter.unwrap_or(0),
                body: o.then,
            },
            _ => ItemBuild::While {
                cond: o.scalar,
                body: o.then,
            },
        };
        self.push_item(item);
    }
}

/// A block in the arena: its items, the edges between them (with the instruction each came
/// from) and where it hangs.
#[derive(Default)]
struct Block {
    items: Vec<Node>,
    edges: Vec<(usize, usize, usize)>,
    /// The block and item holding it (`None` for the root).
    parent: Option<(usize, usize)>,
    /// Items before the first join point added (the definition order).
    defined: usize,
}

enum Node {
    Kernel(usize),
    If {
        cond: Scalar,
        then: usize,
        els: usize,
    },
    Loop {
        count: Scalar,
        iter: u32,
        body: usize,
    },
    While {
        cond: Scalar,
        body: usize,
    },
    Break {
        cond: Scalar,
        insn: usize,
    },
    /// A join point, and the instruction that made it.
    Join(usize),
}

struct Arena {
    blocks: Vec<Block>,
    /// Block and item of each kernel.
    at: Vec<(usize, usize)>,
}

impl Arena {
    fn add(&mut self, items: Vec<ItemBuild>, parent: Option<(usize, usize)>) -> usize {
        let b = self.blocks.len();
        self.blocks.push(Block {
            parent,
            ..Block::default()
        });
        for (i, it) in items.into_iter().enumerate() {
            let node = match it {
                ItemBuild::Kernel(k) => {
                    self.at[k] = (b, i);
                    Node::Kernel(k)
                }
                ItemBuild::If { cond, then, els } => {
                    let t = self.add(then, Some((b, i)));
                    let e = self.add(els, Some((b, i)));
                    Node::If {
                        cond,
                        then: t,
                        els: e,
                    }
                }
                ItemBuild::Loop { count, iter, body } => Node::Loop {
                    count,
                    iter,
                    body: self.add(body, Some((b, i))),
                },
                ItemBuild::While { cond, body } => Node::While {
                    cond,
                    body: self.add(body, Some((b, i))),
                },
                ItemBuild::Break { cond, insn } => Node::Break { cond, insn },
            };
            self.blocks[b].items.push(node);
        }
        self.blocks[b].defined = self.blocks[b].items.len();
        b
    }

    /// The chain of (block, item) from kernel `k` up to the root.
    fn chain(&self, k: usize) -> Vec<(usize, usize)> {
        let mut out = vec![self.at[k]];
        while let Some(p) = self.blocks[out.last().expect("non-empty").0].parent {
            out.push(p);
        }
        out
    }

    /// The innermost block holding every kernel of `ks`, and the item of each there.
    fn lift(&self, ks: &[usize]) -> (usize, Vec<usize>) {
        let chains: Vec<Vec<(usize, usize)>> = ks.iter().map(|&k| self.chain(k)).collect();
        let first = &chains[0];
        for &(b, _) in first {
            if chains.iter().all(|c| c.iter().any(|&(x, _)| x == b)) {
                let items = chains
                    .iter()
                    .map(|c| c.iter().find(|&&(x, _)| x == b).expect("present").1)
                    .collect();
                return (b, items);
            }
        }
        (0, vec![0; ks.len()])
    }

    /// Whether item `i` of block `b` is a `CF_BREAK` or a `CF_IF` holding one of the
    /// enclosing loop.
    fn has_break(&self, b: usize, i: usize) -> bool {
        match &self.blocks[b].items[i] {
            Node::Break { .. } => true,
            Node::If { then, els, .. } => [*then, *els]
                .iter()
                .any(|&c| (0..self.blocks[c].items.len()).any(|j| self.has_break(c, j))),
            _ => false,
        }
    }

    /// A readable name for item `i` of block `b`.
    fn label(&self, p: &Program, b: usize, i: usize, kernels: &[KernelPlan]) -> String {
        let first_kernel = |blk: usize| -> Option<String> {
            let mut stack = vec![blk];
            while let Some(x) = stack.pop() {
                for n in &self.blocks[x].items {
                    match n {
                        Node::Kernel(k) => return Some(kernels[*k].name.clone()),
                        Node::If { then, els, .. } => stack.extend([*els, *then]),
                        Node::Loop { body, .. } | Node::While { body, .. } => stack.push(*body),
                        _ => {}
                    }
                }
            }
            None
        };
        let around =
            |what: &str, blocks: &[usize]| match blocks.iter().find_map(|&x| first_kernel(x)) {
                Some(k) => format!("the {what} block around {k}"),
                None => format!("a {what} block"),
            };
        match &self.blocks[b].items[i] {
            Node::Kernel(k) => kernels[*k].name.clone(),
            Node::If { then, els, .. } => around("CF_IF", &[*then, *els]),
            Node::Loop { body, .. } => around("CF_LOOP", &[*body]),
            Node::While { body, .. } => around("CF_WHILE", &[*body]),
            Node::Break { insn, .. } => crate::text::disasm::render(p, *insn),
            Node::Join(insn) => format!("the join of {}", crate::text::disasm::render(p, *insn)),
        }
    }
}

/// The kernels named by `set`, checked: defined, at least two, distinct.
fn kernel_set(
    g: &GraphBuild,
    p: &Program,
    insn: usize,
    set: &[KernelId],
) -> Result<Vec<usize>, CheckError> {
    if set.len() < 2 {
        return err(insn, Some(0), "a kernel set names at least two kernels");
    }
    let mut out = Vec::with_capacity(set.len());
    for k in set {
        let idx = kernel(g, p, insn, 0, *k)?;
        if out.contains(&idx) {
            return err(
                insn,
                Some(0),
                format!("kernel {} is named twice", p.kernel_name(g.id, k.0)),
            );
        }
        out.push(idx);
    }
    Ok(out)
}

fn kernel(
    g: &GraphBuild,
    p: &Program,
    insn: usize,
    operand: usize,
    k: KernelId,
) -> Result<usize, CheckError> {
    g.kernel_index.get(&k.0).copied().ok_or_else(|| {
        CheckError::at(
            insn,
            Some(operand),
            format!(
                "kernel {} is not defined in graph {}",
                p.kernel_name(g.id, k.0),
                g.name
            ),
        )
    })
}

/// The tensor box a binding names, checked against the tensor.
fn bind_box(
    t: &TensorPlan,
    offset: u64,
    size: u64,
    region: Option<&crate::operand::BoxRegion>,
    insn: usize,
) -> Result<(Vec<u64>, Vec<u64>), CheckError> {
    if let Some(b) = region {
        if offset != 0 || size != 0 {
            return err(
                insn,
                Some(3),
                "a binding with a box gives no byte offset or size",
            );
        }
        if b.start.len() != t.shape.len() {
            return err(
                insn,
                Some(7),
                format!(
                    "a box of rank {} for tensor {} of rank {}",
                    b.start.len(),
                    t.name,
                    t.shape.len()
                ),
            );
        }
        for (d, ((&s, &n), &e)) in b.start.iter().zip(&b.size).zip(&t.shape).enumerate() {
            if s as u64 + n as u64 > e {
                return err(
                    insn,
                    Some(7),
                    format!(
                        "dimension {d} of the box, {s}+:{n}, is past extent {e} of tensor {}",
                        t.name
                    ),
                );
            }
        }
        return Ok((
            b.start.iter().map(|&x| x as u64).collect(),
            b.size.iter().map(|&x| x as u64).collect(),
        ));
    }
    if offset > t.size {
        return err(
            insn,
            Some(3),
            format!(
                "offset {offset} is past the end of tensor {} ({} bytes)",
                t.name, t.size
            ),
        );
    }
    let size = if size == 0 { t.size - offset } else { size };
    if offset.checked_add(size).is_none_or(|e| e > t.size) {
        return err(
            insn,
            Some(4),
            format!(
                "bytes {offset}..{} are past the end of tensor {} ({} bytes)",
                offset.saturating_add(size),
                t.name,
                t.size
            ),
        );
    }
    if size == 0 {
        return err(insn, Some(4), "the binding holds no byte");
    }
    let row = t.row_bytes();
    if !offset.is_multiple_of(row) || !size.is_multiple_of(row) {
        return err(
            insn,
            Some(3),
            format!(
                "bytes {offset}..{} are not whole rows of tensor {} (rows of {row} bytes)",
                offset + size,
                t.name
            ),
        );
    }
    let mut start: Vec<u64> = vec![0; t.shape.len()];
    let mut extent = t.shape.clone();
    start[0] = offset / row;
    extent[0] = size / row;
    Ok((start, extent))
}

/// Reads the `MC_BIND` at `insn` into its kernel's arguments.
fn bind(
    g: &GraphBuild,
    p: &Program,
    insn: usize,
    tensors: &[TensorPlan],
    tensor_index: &HashMap<u32, usize>,
    kernels: &mut [KernelPlan],
    args: &mut [Vec<Option<(ArgPlan, usize)>>],
) -> Result<(), CheckError> {
    let Insn::McBind {
        kernel: kid,
        arg,
        tensor,
        offset,
        size,
        access,
        split,
        region,
    } = &p.insns[insn]
    else {
        return Ok(());
    };
    let k = kernel(g, p, insn, 0, *kid)?;
    const MAX_ARGS: u32 = 64;
    if *arg >= MAX_ARGS {
        return err(
            insn,
            Some(1),
            format!(
                "argument index {arg} is above the limit of {}",
                MAX_ARGS - 1
            ),
        );
    }
    let plan = match tensor {
        None => {
            if *size != 0
                || *access != crate::operand::Access::InOut
                || *split != Split::Whole
                || region.is_some()
            {
                return err(
                    insn,
                    Some(4),
                    "a scalar argument (tensor `-`) has its value as the offset and nothing after",
                );
            }
            ArgPlan::Scalar(*offset)
        }
        Some(t) => {
            let ti = *tensor_index.get(&t.0).ok_or_else(|| {
                CheckError::at(
                    insn,
                    Some(2),
                    format!(
                        "tensor {} is not allocated by any MC_ALLOC",
                        p.tensor_name(t.0)
                    ),
                )
            })?;
            let (start, extent) = bind_box(&tensors[ti], *offset, *size, region.as_ref(), insn)?;
            if kernels[k].block_dim > 1 && access.writes() && *split == Split::Whole {
                return err(
                    insn,
                    Some(6),
                    format!(
                        "kernel {} runs {} instances, and each would write all of argument {arg} \
                         (tensor {}): bind it ROWS to give each instance its rows",
                        kernels[k].name, kernels[k].block_dim, tensors[ti].name
                    ),
                );
            }
            ArgPlan::Tensor {
                tensor: ti,
                start,
                size: extent,
                access: *access,
                split: *split,
            }
        }
    };
    let slots = &mut args[k];
    let a = *arg as usize;
    if slots.len() <= a {
        slots.resize(a + 1, None);
    }
    if slots[a].is_some() {
        return err(
            insn,
            Some(1),
            format!(
                "argument {arg} of kernel {} is bound twice",
                kernels[k].name
            ),
        );
    }
    slots[a] = Some((plan, insn));
    Ok(())
}

/// Checks that `CA_REQUEST` gives a kernel cores of its type.
fn request_fits(core: CoreType, r: [u32; 3]) -> bool {
    match core {
        CoreType::Aic => r[0] > 0,
        CoreType::Aiv => r[1] > 0,
        CoreType::AicAiv => r[0] > 0 || r[1] > 0,
        CoreType::Aicpu => r[2] > 0,
    }
}

/// A dependency: source and destination kernels, its type, its tensor and its instruction.
type Dep = (usize, usize, DependencyType, Option<usize>, usize);

/// What a graph's reference instructions say besides kernel arguments and placement.
#[derive(Default)]
struct Refs {
    /// `TG_DEPEND`s, in order.
    deps: Vec<Dep>,
    /// `SY_BARRIER`s: the kernels and the instruction.
    barriers: Vec<(Vec<usize>, usize)>,
    /// `CA_AFFINITY`s.
    affinities: Vec<(Vec<usize>, AffinityType)>,
}

/// The plan of the graph `g` (see the module docs).
pub(crate) fn finish(
    g: GraphBuild,
    p: &Program,
    tensors: &[TensorPlan],
    tensor_index: &HashMap<u32, usize>,
) -> Result<GraphPlan, CheckError> {
    let mut kernels = kernel_plans(&g, p);
    let refs = read_refs(&g, p, tensors, tensor_index, &mut kernels)?;
    check_data_deps(&refs.deps, &kernels, tensors)?;
    // The blocks, and every edge lifted into them.
    let mut arena = Arena {
        blocks: Vec::new(),
        at: vec![(0, 0); kernels.len()],
    };
    arena.add(g.root, None);
    break_edges(&mut arena);
    let soft = lift_deps(&mut arena, &refs.deps, p, &kernels)?;
    lift_barriers(&mut arena, &refs.barriers)?;
    for b in 0..arena.blocks.len() {
        acyclic(&arena, p, b, &kernels)?;
    }
    let root = to_body(&arena, 0);
    let mut uses = BTreeSet::new();
    for k in &kernels {
        for a in &k.args {
            if let ArgPlan::Tensor { tensor, .. } = a {
                uses.insert(*tensor);
            }
        }
    }
    for &(_, _, _, t, _) in &refs.deps {
        uses.extend(t);
    }
    scalar_uses(&root, &mut uses);
    Ok(GraphPlan {
        id: g.id,
        name: g.name,
        kernels,
        root,
        partition: g.partition,
        affinities: refs.affinities,
        soft,
        uses: uses.into_iter().collect(),
        insn: g.insn,
    })
}

/// The plan of each `TG_KERNEL` of `g`, without arguments or placement yet.
fn kernel_plans(g: &GraphBuild, p: &Program) -> Vec<KernelPlan> {
    g.kernels
        .iter()
        .zip(&g.iters)
        .filter_map(|(&i, iters)| match &p.insns[i] {
            Insn::TgKernel {
                kernel,
                entry,
                block_dim,
                core_type,
                workspace,
            } => Some(KernelPlan {
                id: kernel.0,
                name: p.kernel_name(g.id, kernel.0),
                entry: entry.0.clone(),
                block_dim: *block_dim,
                core: *core_type,
                workspace: *workspace,
                args: Vec::new(),
                request: None,
                signals: Vec::new(),
                waits: Vec::new(),
                iterators: iters.clone(),
                insn: i,
            }),
            _ => None,
        })
        .collect()
}

/// Reads the graph's reference instructions: arguments, requests and events into `kernels`,
/// the rest returned.
fn read_refs(
    g: &GraphBuild,
    p: &Program,
    tensors: &[TensorPlan],
    tensor_index: &HashMap<u32, usize>,
    kernels: &mut [KernelPlan],
) -> Result<Refs, CheckError> {
    let mut args: Vec<Vec<Option<(ArgPlan, usize)>>> = vec![Vec::new(); kernels.len()];
    let mut refs = Refs::default();
    for &i in &g.refs {
        match &p.insns[i] {
            Insn::TgDepend {
                src,
                dst,
                dep_type,
                tensor,
            } => refs.deps.push(depend(
                (g, p, i),
                (src, dst),
                dep_type,
                tensor,
                tensor_index,
                kernels,
            )?),
            Insn::McBind { .. } => bind(g, p, i, tensors, tensor_index, kernels, &mut args)?,
            Insn::CaRequest {
                kernel: kid,
                aic,
                aiv,
                aicpu,
            } => {
                let k = kernel(g, p, i, 0, *kid)?;
                request(&mut kernels[k], i, [*aic, *aiv, *aicpu])?;
            }
            Insn::CaAffinity {
                kernels: set,
                affinity,
            } => {
                let ks = kernel_set(g, p, i, &set.0)?;
                refs.affinities.push((ks, *affinity));
            }
            Insn::SySignal { event, kernel: kid } => {
                let k = kernel(g, p, i, 1, *kid)?;
                kernels[k].signals.push(event.0);
            }
            Insn::SyWait { event, kernel: kid } => {
                let k = kernel(g, p, i, 1, *kid)?;
                kernels[k].waits.push(event.0);
            }
            Insn::SyBarrier { kernels: set, .. } => {
                refs.barriers.push((kernel_set(g, p, i, &set.0)?, i));
            }
            _ => {}
        }
    }
    for (k, slots) in args.into_iter().enumerate() {
        let mut list = Vec::with_capacity(slots.len());
        for (a, s) in slots.into_iter().enumerate() {
            match s {
                Some((plan, _)) => list.push(plan),
                None => {
                    return err(
                        kernels[k].insn,
                        Some(0),
                        format!(
                            "kernel {} binds arguments past {a} but not argument {a}",
                            kernels[k].name
                        ),
                    );
                }
            }
        }
        kernels[k].args = list;
    }
    Ok(refs)
}

/// Reads the `TG_DEPEND` at `i`: `src` → `dst` of type `dep_type`, through `tensor`.
fn depend(
    (g, p, i): (&GraphBuild, &Program, usize),
    (src, dst): (&KernelId, &KernelId),
    dep_type: &DependencyType,
    tensor: &Option<TensorId>,
    tensor_index: &HashMap<u32, usize>,
    kernels: &[KernelPlan],
) -> Result<Dep, CheckError> {
    let s = kernel(g, p, i, 0, *src)?;
    let d = kernel(g, p, i, 1, *dst)?;
    if s == d {
        return err(
            i,
            Some(1),
            format!("kernel {} depends on itself", kernels[s].name),
        );
    }
    let t = match tensor {
        Some(t) => Some(*tensor_index.get(&t.0).ok_or_else(|| {
            CheckError::at(
                i,
                Some(3),
                format!(
                    "tensor {} is not allocated by any MC_ALLOC",
                    p.tensor_name(t.0)
                ),
            )
        })?),
        None if *dep_type == DependencyType::Data => {
            return err(i, Some(3), "a DATA dependency names its tensor");
        }
        None => None,
    };
    Ok((s, d, *dep_type, t, i))
}

/// Records the `CA_REQUEST` `r` (at `i`) of kernel `k`: one per kernel, giving it a core of its
/// type.
fn request(k: &mut KernelPlan, i: usize, r: [u32; 3]) -> Result<(), CheckError> {
    if k.request.is_some() {
        return err(
            i,
            Some(0),
            format!("kernel {} has a second CA_REQUEST", k.name),
        );
    }
    if !request_fits(k.core, r) {
        return err(
            i,
            Some(1),
            format!(
                "CA_REQUEST gives kernel {} ({}) no core it can run on",
                k.name, k.core
            ),
        );
    }
    k.request = Some(r);
    Ok(())
}

/// Checks that each `DATA` dependency's source writes its tensor and its destination binds it.
fn check_data_deps(
    deps: &[Dep],
    kernels: &[KernelPlan],
    tensors: &[TensorPlan],
) -> Result<(), CheckError> {
    for &(s, d, ty, t, i) in deps {
        if ty != DependencyType::Data {
            continue;
        }
        let t = t.expect("checked above");
        let binds = |k: usize, write: bool| {
            kernels[k].args.iter().any(|a| match a {
                ArgPlan::Tensor { tensor, access, .. } => {
                    *tensor == t && (!write || access.writes())
                }
                ArgPlan::Scalar(_) => false,
            })
        };
        if !binds(s, true) {
            return err(
                i,
                Some(0),
                format!(
                    "DATA dependency through tensor {}: kernel {} does not write it (no `out` or \
                     `inout` binding)",
                    tensors[t].name, kernels[s].name
                ),
            );
        }
        if !binds(d, false) {
            return err(
                i,
                Some(1),
                format!(
                    "DATA dependency through tensor {}: kernel {} does not bind it",
                    tensors[t].name, kernels[d].name
                ),
            );
        }
    }
    Ok(())
}

/// Orders every item of a block that holds a `CF_BREAK` (or is a `CF_IF` holding one) after
/// every item defined before it and before every item defined after it.
fn break_edges(arena: &mut Arena) {
    for b in 0..arena.blocks.len() {
        let n = arena.blocks[b].defined;
        for i in 0..n {
            if !arena.has_break(b, i) {
                continue;
            }
            let insn = break_insn(arena, b, i);
            for j in 0..n {
                match j.cmp(&i) {
                    std::cmp::Ordering::Less => arena.blocks[b].edges.push((j, i, insn)),
                    std::cmp::Ordering::Greater => arena.blocks[b].edges.push((i, j, insn)),
                    std::cmp::Ordering::Equal => {}
                }
            }
        }
    }
}

/// Lifts each dependency into the innermost block holding both ends (a `BARRIER` one as a join
/// point); returns the soft dependencies between kernels of one block.
fn lift_deps(
    arena: &mut Arena,
    deps: &[Dep],
    p: &Program,
    kernels: &[KernelPlan],
) -> Result<Vec<(usize, usize)>, CheckError> {
    let mut soft = Vec::new();
    for &(s, d, ty, _, i) in deps {
        let (b, items) = arena.lift(&[s, d]);
        let (a, z) = (items[0], items[1]);
        if a == z {
            return err(
                i,
                None,
                format!(
                    "kernels {} and {} are in the two branches of one CF_IF: they never both run",
                    kernels[s].name, kernels[d].name
                ),
            );
        }
        match ty {
            DependencyType::After | DependencyType::Data => arena.blocks[b].edges.push((a, z, i)),
            DependencyType::Soft => {
                if matches!(arena.blocks[b].items[a], Node::Kernel(_))
                    && matches!(arena.blocks[b].items[z], Node::Kernel(_))
                {
                    soft.push((s, d));
                }
            }
            DependencyType::Barrier => {
                if a > z {
                    return err(
                        i,
                        Some(1),
                        format!(
                            "a BARRIER dependency runs forward in definition order, but {} is \
                             defined before {}",
                            arena.label(p, b, z, kernels),
                            arena.label(p, b, a, kernels)
                        ),
                    );
                }
                let blk = &mut arena.blocks[b];
                let n = blk.defined;
                let j = blk.items.len();
                blk.items.push(Node::Join(i));
                for x in 0..=a {
                    blk.edges.push((x, j, i));
                }
                for y in z..n {
                    blk.edges.push((j, y, i));
                }
            }
        }
    }
    Ok(soft)
}

/// Each `SY_BARRIER` as a join point in the block holding its kernels: after what any of them
/// waits for, before each of them.
fn lift_barriers(arena: &mut Arena, barriers: &[(Vec<usize>, usize)]) -> Result<(), CheckError> {
    for (set, i) in barriers {
        let (b, items) = arena.lift(set);
        let distinct: BTreeSet<usize> = items.iter().copied().collect();
        if distinct.len() != items.len() {
            return err(
                *i,
                Some(0),
                "SY_BARRIER names two kernels inside one control-flow block: a barrier joins \
                 items of one block",
            );
        }
        let blk = &mut arena.blocks[b];
        let preds: BTreeSet<usize> = blk
            .edges
            .iter()
            .filter(|e| distinct.contains(&e.1))
            .map(|e| e.0)
            .collect();
        let j = blk.items.len();
        blk.items.push(Node::Join(*i));
        for pr in preds {
            blk.edges.push((pr, j, *i));
        }
        for &x in &items {
            blk.edges.push((j, x, *i));
        }
    }
    Ok(())
}

/// The `CF_BREAK` instruction of item `i` of block `b` (the first one inside a `CF_IF`).
fn break_insn(arena: &Arena, b: usize, i: usize) -> usize {
    match &arena.blocks[b].items[i] {
        Node::Break { insn, .. } => *insn,
        Node::If { then, els, .. } => [*then, *els]
            .iter()
            .flat_map(|&c| (0..arena.blocks[c].items.len()).map(move |j| (c, j)))
            .find(|&(c, j)| arena.has_break(c, j))
            .map_or(0, |(c, j)| break_insn(arena, c, j)),
        _ => 0,
    }
}

/// Fails with the cycle if block `b`'s edges have one.
fn acyclic(arena: &Arena, p: &Program, b: usize, kernels: &[KernelPlan]) -> Result<(), CheckError> {
    let blk = &arena.blocks[b];
    let n = blk.items.len();
    let edges: HashSet<(usize, usize)> = blk.edges.iter().map(|e| (e.0, e.1)).collect();
    let mut indeg = vec![0usize; n];
    let mut succs = vec![Vec::new(); n];
    for &(a, z) in &edges {
        indeg[z] += 1;
        succs[a].push(z);
    }
    let mut ready: Vec<usize> = (0..n).filter(|&i| indeg[i] == 0).collect();
    let mut done = 0;
    while let Some(x) = ready.pop() {
        done += 1;
        for &z in &succs[x] {
            indeg[z] -= 1;
            if indeg[z] == 0 {
                ready.push(z);
            }
        }
    }
    if done == n {
        return Ok(());
    }
    // Walk back along edges between unfinished items until an item repeats.
    let mut preds = vec![Vec::new(); n];
    for &(a, z) in &edges {
        if indeg[a] > 0 && indeg[z] > 0 {
            preds[z].push(a);
        }
    }
    let start = (0..n).find(|&i| indeg[i] > 0).expect("an unfinished item");
    let mut path = vec![start];
    let mut seen = HashMap::from([(start, 0usize)]);
    let cycle = loop {
        let cur = *path.last().expect("non-empty");
        let prev = *preds[cur]
            .iter()
            .min()
            .expect("an unfinished item has a predecessor");
        if let Some(&at) = seen.get(&prev) {
            let mut c: Vec<usize> = path[at..].to_vec();
            c.reverse();
            break c;
        }
        seen.insert(prev, path.len());
        path.push(prev);
    };
    // Begin at the item defined first, so that the description does not depend on the walk.
    let mut cycle = cycle;
    let first = (0..cycle.len()).min_by_key(|&k| cycle[k]).unwrap_or(0);
    cycle.rotate_left(first);
    let mut names: Vec<String> = cycle
        .iter()
        .map(|&i| arena.label(p, b, i, kernels))
        .collect();
    names.push(names[0].clone());
    let insn = (0..cycle.len())
        .filter_map(|k| {
            let (a, z) = (cycle[k], cycle[(k + 1) % cycle.len()]);
            blk.edges
                .iter()
                .filter(|e| e.0 == a && e.1 == z)
                .map(|e| e.2)
                .max()
        })
        .max()
        .unwrap_or(0);
    err(
        insn,
        None,
        format!("dependency cycle: {}", names.join(" -> ")),
    )
}

/// The final form of block `b`.
fn to_body(arena: &Arena, b: usize) -> Body {
    let blk = &arena.blocks[b];
    let n = blk.items.len();
    let edges: BTreeSet<(usize, usize)> = blk.edges.iter().map(|e| (e.0, e.1)).collect();
    let mut preds = vec![0u32; n];
    let mut succs = vec![Vec::new(); n];
    for &(a, z) in &edges {
        preds[z] += 1;
        succs[a].push(z as u32);
    }
    let items = blk
        .items
        .iter()
        .map(|node| match node {
            Node::Kernel(k) => Item::Kernel(*k),
            Node::If { cond, then, els } => Item::If {
                cond: *cond,
                then: to_body(arena, *then),
                els: to_body(arena, *els),
            },
            Node::Loop { count, iter, body } => Item::Loop {
                count: *count,
                iter: *iter,
                body: to_body(arena, *body),
            },
            Node::While { cond, body } => Item::While {
                cond: *cond,
                body: to_body(arena, *body),
            },
            Node::Break { cond, .. } => Item::Break { cond: *cond },
            Node::Join(_) => Item::Join,
        })
        .collect();
    Body {
        items,
        preds,
        succs,
    }
}

/// The tensors conditions and counts of `body` read.
fn scalar_uses(body: &Body, out: &mut BTreeSet<usize>) {
    let mut add = |s: &Scalar| {
        if let Scalar::Elem { tensor, .. } = s {
            out.insert(*tensor);
        }
    };
    let mut children = Vec::new();
    for it in &body.items {
        match it {
            Item::If { cond, then, els } => {
                add(cond);
                children.push(then);
                children.push(els);
            }
            Item::Loop { count, body, .. } => {
                add(count);
                children.push(body);
            }
            Item::While { cond, body } => {
                add(cond);
                children.push(body);
            }
            Item::Break { cond } => add(cond),
            Item::Kernel(_) | Item::Join => {}
        }
    }
    for c in children {
        scalar_uses(c, out);
    }
}
