//! The meaning of a program, checked once for every front end, and the plan the runtime runs.
//!
//! Why: the assembler, the decoder and a lowering produce the same [`Program`]; what may be
//! wrong with one (a nested `TG_BEGIN`, a `TG_END` closing another graph, a dependency cycle, an
//! `MC_FREE` of a tensor a graph may still use, an unmatched `CF_IF`, an id no instruction
//! defines) is decided here, once, and reported against the instruction and operand, which
//! each front end turns into a byte offset or a line and column. The runtime trusts a
//! [`Checked`] program and re-checks nothing structural.
//!
//! Modules: [`structure`] walks the instructions (nesting, definitions, references, bindings)
//! and builds the plan; [`graph`] turns a graph's edges into per-block dependency lists and
//! finds cycles; [`flow`] follows allocations and launched graphs through the control code.

pub mod flow;
pub mod graph;
pub mod structure;

use crate::operand::{Access, AffinityType, CoreType, FenceScope, IterVal, MemLocation, Split};
use crate::program::Program;
use pto_wsp_ir::DType;
use std::collections::HashMap;

/// What is wrong with a program: at which instruction (and operand), and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("instruction {insn}: {message}")]
pub struct CheckError {
    /// Index of the instruction.
    pub insn: usize,
    /// Index of the operand, when one is at fault.
    pub operand: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl CheckError {
    pub(crate) fn at(insn: usize, operand: Option<usize>, message: impl Into<String>) -> Self {
        CheckError {
            insn,
            operand,
            message: message.into(),
        }
    }
}

/// A program whose meaning has been checked, with the plan the runtime runs.
#[derive(Clone, Debug)]
pub struct Checked {
    /// The program.
    pub program: Program,
    /// Every allocation, in allocation-table order (the runtime's store index).
    pub tensors: Vec<TensorPlan>,
    /// Every graph, in definition order.
    pub graphs: Vec<GraphPlan>,
    /// The control code: the top-level instructions the control CPU runs in order.
    pub control: Vec<Ctl>,
    /// The program instruction of each control step.
    pub control_insns: Vec<usize>,
    /// Index in `tensors` of each tensor id.
    pub tensor_index: HashMap<u32, usize>,
    /// Index in `graphs` of each graph id.
    pub graph_index: HashMap<u32, usize>,
}

/// One allocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorPlan {
    /// Its id.
    pub id: u32,
    /// Its name (its number when unnamed).
    pub name: String,
    /// Element type (`u8` when untyped).
    pub dtype: DType,
    /// Dimensions (`[size]` when untyped).
    pub shape: Vec<u64>,
    /// Size in bytes.
    pub size: u64,
    /// Alignment in bytes.
    pub align: u32,
    /// Location hint.
    pub location: MemLocation,
    /// The `MC_ALLOC` instruction.
    pub insn: usize,
}

impl TensorPlan {
    /// Bytes per row (per index of the first dimension).
    pub fn row_bytes(&self) -> u64 {
        self.shape[1..]
            .iter()
            .fold(self.dtype.size_bytes() as u64, |a, &d| a * d)
    }

    /// Number of elements.
    pub fn elements(&self) -> u64 {
        self.shape.iter().product()
    }
}

/// A condition or count, resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scalar {
    /// A constant.
    Imm(u64),
    /// Element `index` of tensor `tensor` (an index into [`Checked::tensors`]).
    Elem {
        /// Tensor index.
        tensor: usize,
        /// Element index.
        index: u64,
    },
}

/// One argument of a kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArgPlan {
    /// A box of a tensor.
    Tensor {
        /// Tensor index.
        tensor: usize,
        /// First index per dimension.
        start: Vec<u64>,
        /// Extent per dimension.
        size: Vec<u64>,
        /// How the kernel uses it.
        access: Access,
        /// How the instances share it.
        split: Split,
    },
    /// A 64-bit scalar.
    Scalar(u64),
}

/// One kernel node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelPlan {
    /// Its id in the graph.
    pub id: u32,
    /// Its name (its number when unnamed).
    pub name: String,
    /// Entry symbol.
    pub entry: String,
    /// Instances.
    pub block_dim: u32,
    /// Cores.
    pub core: CoreType,
    /// Workspace per invocation, bytes.
    pub workspace: u64,
    /// Arguments, by index.
    pub args: Vec<ArgPlan>,
    /// `CA_REQUEST`: cube, vector, AICPU cores.
    pub request: Option<[u32; 3]>,
    /// Events it signals on completion.
    pub signals: Vec<u32>,
    /// Events it waits for.
    pub waits: Vec<u32>,
    /// Iterators of the in-graph loops around it, outermost first.
    pub iterators: Vec<u32>,
    /// The `TG_KERNEL` instruction.
    pub insn: usize,
}

/// A core partition (`CA_PARTITION`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionPlan {
    /// Its id.
    pub id: u32,
    /// First cube core and count.
    pub aic: (u32, u32),
    /// First vector core and count.
    pub aiv: (u32, u32),
    /// The instruction.
    pub insn: usize,
}

/// One graph.
#[derive(Clone, Debug)]
pub struct GraphPlan {
    /// Its id.
    pub id: u32,
    /// Its name (its number when unnamed).
    pub name: String,
    /// Kernel nodes in definition order.
    pub kernels: Vec<KernelPlan>,
    /// The graph's top-level block.
    pub root: Body,
    /// Its partition.
    pub partition: Option<PartitionPlan>,
    /// `CA_AFFINITY` sets (kernel indices).
    pub affinities: Vec<(Vec<usize>, AffinityType)>,
    /// `SOFT` edges between kernels of one block: (src, dst) kernel indices.
    pub soft: Vec<(usize, usize)>,
    /// Tensors it uses (bindings, `DATA` tensors, conditions), sorted.
    pub uses: Vec<usize>,
    /// The `TG_BEGIN` instruction.
    pub insn: usize,
}

/// A block of a graph: its items in definition order and their dependencies.
#[derive(Clone, Debug, Default)]
pub struct Body {
    /// Items.
    pub items: Vec<Item>,
    /// Per item: the number of items it waits for.
    pub preds: Vec<u32>,
    /// Per item: the items that wait for it.
    pub succs: Vec<Vec<u32>>,
}

/// An item of a block.
#[derive(Clone, Debug)]
pub enum Item {
    /// A kernel node (index into [`GraphPlan::kernels`]).
    Kernel(usize),
    /// `CF_IF`: one of two blocks, chosen when the item is ready.
    If {
        /// Condition.
        cond: Scalar,
        /// Taken when non-zero.
        then: Body,
        /// Taken when zero.
        els: Body,
    },
    /// `CF_LOOP`: the block `count` times, one pass after the other.
    Loop {
        /// Count, read when the item is ready.
        count: Scalar,
        /// Iterator id.
        iter: u32,
        /// Body.
        body: Body,
    },
    /// `CF_WHILE`: the block while the condition holds (tested before each pass).
    While {
        /// Condition.
        cond: Scalar,
        /// Body.
        body: Body,
    },
    /// `CF_BREAK`: leaves the innermost loop when the condition holds.
    Break {
        /// Condition.
        cond: Scalar,
    },
    /// A point that waits for its predecessors (`BARRIER` edges, `SY_BARRIER`).
    Join,
}

/// One instruction of the control code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ctl {
    /// `TG_LAUNCH` / `TG_INVOKE`.
    Launch {
        /// Graph index.
        graph: usize,
        /// Stream.
        stream: u32,
        /// The iteration bound into kernel arguments.
        iteration: IterVal,
    },
    /// `TG_SYNC`.
    Sync {
        /// Graph index.
        graph: usize,
    },
    /// `MC_ALLOC`.
    Alloc {
        /// Tensor index.
        tensor: usize,
    },
    /// `MC_FREE`.
    Free {
        /// Tensor index.
        tensor: usize,
    },
    /// `MC_COPY`.
    Copy {
        /// Source tensor index.
        src: usize,
        /// Destination tensor index.
        dst: usize,
        /// Bytes.
        size: u64,
        /// Source offset.
        src_offset: u64,
        /// Destination offset.
        dst_offset: u64,
    },
    /// `MC_FENCE`.
    Fence(FenceScope),
    /// `CF_IF`: when zero, continue at `skip` (past the `CF_ELSE`, or the `CF_ENDIF`).
    If {
        /// Condition.
        cond: Scalar,
        /// Where the false case continues.
        skip: usize,
    },
    /// `CF_ELSE` reached at the end of the taken branch: continue at `end` (the `CF_ENDIF`).
    Else {
        /// The `CF_ENDIF`.
        end: usize,
    },
    /// `CF_ENDIF`.
    EndIf,
    /// `CF_LOOP`: `end` is its `CF_ENDLOOP`.
    Loop {
        /// Count.
        count: Scalar,
        /// Iterator id.
        iter: u32,
        /// The `CF_ENDLOOP`.
        end: usize,
    },
    /// `CF_ENDLOOP`: `head` is its `CF_LOOP`.
    EndLoop {
        /// The `CF_LOOP`.
        head: usize,
    },
    /// `CF_WHILE`: `end` is its `CF_ENDWHILE`.
    While {
        /// Condition.
        cond: Scalar,
        /// The `CF_ENDWHILE`.
        end: usize,
    },
    /// `CF_ENDWHILE`: `head` is its `CF_WHILE`.
    EndWhile {
        /// The `CF_WHILE`.
        head: usize,
    },
    /// `CF_BREAK`: leaves the loop whose end is `end`.
    Break {
        /// Condition.
        cond: Scalar,
        /// The loop's `CF_ENDLOOP` / `CF_ENDWHILE`.
        end: usize,
        /// Whether that loop is a `CF_LOOP` (it has an iterator to drop).
        counted: bool,
    },
    /// `SY_NOTIFY`.
    Notify {
        /// Target device.
        device: u32,
        /// Notification.
        id: u32,
    },
    /// `SY_WAIT_NOTIFY`.
    WaitNotify {
        /// Source device.
        device: u32,
        /// Notification.
        id: u32,
    },
}

/// Checks `program` and builds its plan.
pub fn check(program: Program) -> Result<Checked, CheckError> {
    let mut c = structure::build(&program)?;
    flow::check(&program, &c)?;
    c.program = program;
    Ok(c)
}

impl Checked {
    /// The instruction each control step came from.
    pub fn control_insn(&self, pc: usize) -> usize {
        self.control_insns.get(pc).copied().unwrap_or(0)
    }
}
