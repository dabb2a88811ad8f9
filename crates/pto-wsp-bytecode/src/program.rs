//! The decoded, validated program an interpreter runs.
//!
//! Why: validation happens once per bytecode; afterwards every index in these tables is known to
//! be in range, every jump to land on its partner, every expression to be well typed with a
//! bounded stack. The interpreter relies on that and checks nothing again.
//!
//! Promise: a [`Program`] only exists through [`Program::decode`], so these invariants hold for
//! every value of the type. Its fields are private; the accessors give what a runtime needs.

use crate::op::Insn;
use pto_wsp_ir::{Access, DType, ExecPool, Loc, ScalarType};
use std::ops::Range;

/// A fast form of an expression, tried before its ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fast {
    /// A constant (raw bits).
    Const(u64),
    /// A register.
    Reg(u16),
    /// `((reg + pre) * mul) + post` on `i64`, each step checked (identity steps never fail).
    Affine {
        reg: u16,
        pre: i64,
        mul: i64,
        post: i64,
    },
    /// No shortcut: run the ops.
    None,
}

/// One expression.
#[derive(Clone, Debug)]
pub(crate) struct ExprInfo {
    pub start: u32,
    pub len: u32,
    pub ty: ScalarType,
    pub fast: Fast,
}

/// An axis.
#[derive(Clone, Debug)]
pub(crate) enum AxisDesc {
    Dense {
        extent: u16,
    },
    Ragged {
        rows: u16,
        lengths: u16,
    },
    Sparse {
        rows: u16,
        indptr: u16,
        indices: u16,
    },
}

impl AxisDesc {
    /// The tensors whose contents the axis reads (none for a dense axis).
    pub(crate) fn arrays(&self) -> impl Iterator<Item = u16> {
        let (a, b) = match *self {
            AxisDesc::Dense { .. } => (None, None),
            AxisDesc::Ragged { lengths, .. } => (Some(lengths), None),
            AxisDesc::Sparse {
                indptr, indices, ..
            } => (Some(indptr), Some(indices)),
        };
        a.into_iter().chain(b)
    }
}

/// A loop statement.
#[derive(Clone, Debug)]
pub(crate) struct LoopDesc {
    pub axis: u16,
    pub var0: u16,
    pub var1: u16,
    /// Dispatch keys decided per iteration (index into the keysets), if a hoisting point.
    pub hoist: Option<u16>,
    /// Task count of one iteration, when iterations may be skipped.
    pub count: Option<u16>,
    pub row_skip: bool,
    pub range_skip: bool,
}

/// A tensor.
#[derive(Clone, Debug)]
pub(crate) struct TensorDesc {
    pub dtype: DType,
    /// Dimension expressions (symbols only), when a region or `load` uses the tensor.
    pub shape: Option<Vec<u16>>,
    /// Its contents are bound.
    pub array: bool,
}

/// A kernel parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ParamDesc {
    Tile(Access),
    Scalar(ScalarType),
}

/// A kernel.
#[derive(Clone, Debug)]
pub(crate) struct KernelDesc {
    pub pool: ExecPool,
    pub params: Vec<ParamDesc>,
    /// Types of the scalar parameters, in order.
    pub scalar_types: Vec<ScalarType>,
    pub tiers: Option<(Vec<(u16, u16)>, u16)>,
}

/// A region argument (its access mode is the kernel parameter's).
#[derive(Clone, Debug)]
pub(crate) struct RegionDesc {
    pub tensor: u16,
    /// Into [`Program::dims`].
    pub dims: Range<u32>,
}

/// A task statement (one per `task` instruction).
#[derive(Clone, Debug)]
pub(crate) struct TaskDesc {
    pub kernel: u16,
    pub keyset: Option<u32>,
    pub hoisted: bool,
    /// Into [`Program::task_scalars`].
    pub scalars: Range<u32>,
    /// Into [`Program::task_regions`].
    pub regions: Range<u32>,
    /// The instruction after its `args`.
    pub next_pc: u32,
    /// Every scalar argument and region bound is a [`Lin`]: the fast path applies.
    pub linear: bool,
    /// Into [`Program::lins`]: the scalar arguments (when `linear`).
    pub scalar_lins: Range<u32>,
    /// Into [`Program::dim_plans`]: every region dimension in order (when `linear`).
    pub dim_plans: Range<u32>,
    /// Into [`Program::region_outs`]: the regions as the sink sees them.
    pub region_outs: Range<u32>,
    /// The pool when it does not depend on the task (no tiers, no pool routing).
    pub fixed_pool: Option<ExecPool>,
    /// Fixed pool and no `stream_by`: only the arguments depend on the task.
    pub simple: bool,
    /// Where this task statement's region coordinates live in the interpreter's buffer: its
    /// `n_coords` starts, then its `n_coords` sizes.
    pub coord_base: u32,
    /// How many coordinates (region dimensions) it has.
    pub n_coords: u32,
}

/// `((regs[reg] + pre) * mul) + post` on `i64`, each step checked: constants (`reg` the zero
/// register, `mul` 0), registers, and affine forms of one register.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Lin {
    pub reg: u32,
    pub pre: i64,
    pub mul: i64,
    pub post: i64,
}

impl Lin {
    /// The value, `None` on overflow (the general path then reports the exact error).
    #[inline(always)]
    pub(crate) fn eval(&self, regs: &[u64]) -> Option<i64> {
        (regs[self.reg as usize] as i64)
            .checked_add(self.pre)?
            .checked_mul(self.mul)?
            .checked_add(self.post)
    }
}

/// One region dimension of a linear task: start, size, and where its extent is in
/// [`crate::Bound`]'s flat shape array.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DimPlan {
    pub start: Lin,
    pub size: Lin,
    pub extent: u32,
    /// Index of the coordinate within the task's coordinates.
    pub coord: u32,
}

impl Lin {
    /// The value when the form is a constant.
    pub(crate) fn constant(&self) -> Option<i64> {
        (self.mul == 0 && self.pre == 0).then_some(self.post)
    }
}

/// A `load` statement.
#[derive(Clone, Debug)]
pub(crate) struct LoadDesc {
    pub reg: u16,
    pub tensor: u16,
    pub index: Vec<u16>,
    pub next_pc: u32,
}

/// A dispatch policy node.
#[derive(Clone, Debug)]
pub(crate) enum DNode {
    RoundRobin(u64),
    Affinity(u8),
    Hash(u8),
    Threshold {
        metric: u8,
        levels: Vec<(i64, u32)>,
        otherwise: u32,
    },
    StaticPartition(Vec<u64>),
    WorkSteal,
}

/// Pool routing: metric key slot, `(bound, pool)` levels, the default pool.
pub(crate) type PoolLevels = (u8, Vec<(i64, ExecPool)>, ExecPool);

/// The schedule.
#[derive(Clone, Debug)]
pub(crate) struct Sched {
    pub executors: u64,
    pub streams: u64,
    /// Nodes; the root is node 0.
    pub dispatch: Vec<DNode>,
    pub stream_by: Option<u8>,
    pub pools: Option<PoolLevels>,
    /// Key slot of the `ready priority(..)` key.
    pub priority: Option<u8>,
    /// Key slot of the `trace cycles(..)` cost.
    pub cost: Option<u8>,
}

/// Declaration names (empty when not stored).
#[derive(Clone, Debug, Default)]
pub(crate) struct NameTable {
    pub symbols: Vec<String>,
    pub slots: Vec<String>,
    pub tensors: Vec<String>,
    pub kernels: Vec<String>,
    pub axes: Vec<String>,
    pub procs: Vec<String>,
    pub channels: Vec<String>,
}

/// A validated bytecode, ready to bind and interpret.
#[derive(Clone, Debug)]
pub struct Program {
    pub(crate) size: usize,
    pub(crate) insns: Vec<Insn>,
    /// Per instruction: the task (`task`) or load (`load`) it starts. (In `insns`, a `task`'s
    /// `b` holds the same task index; its keyset is in the task's descriptor.)
    pub(crate) aux: Vec<u32>,
    pub(crate) ops: Vec<Insn>,
    pub(crate) exprs: Vec<ExprInfo>,
    pub(crate) consts: Vec<u64>,
    pub(crate) reg_types: Vec<ScalarType>,
    /// Per symbol: type, and whether the entry reads it.
    pub(crate) symbols: Vec<(ScalarType, bool)>,
    pub(crate) slots: Vec<ScalarType>,
    pub(crate) axes: Vec<AxisDesc>,
    pub(crate) loops: Vec<LoopDesc>,
    pub(crate) tensors: Vec<TensorDesc>,
    pub(crate) kernels: Vec<KernelDesc>,
    pub(crate) regions: Vec<RegionDesc>,
    /// `(start, size)` expressions; size [`crate::format::NONE16`] means 1.
    pub(crate) dims: Vec<(u16, u16)>,
    pub(crate) tasks: Vec<TaskDesc>,
    pub(crate) lins: Vec<Lin>,
    pub(crate) dim_plans: Vec<DimPlan>,
    pub(crate) region_outs: Vec<crate::sink::RegionOut>,
    /// Per tensor: where its dimensions start in [`crate::Bound`]'s flat shape array.
    pub(crate) shape_off: Vec<u32>,
    /// Whether the entry is a pipeline (CSP edges are kept).
    pub(crate) csp: bool,
    pub(crate) task_scalars: Vec<u16>,
    pub(crate) task_regions: Vec<u16>,
    pub(crate) loads: Vec<LoadDesc>,
    pub(crate) keyset_len: usize,
    pub(crate) keysets: Vec<u16>,
    pub(crate) sched: Sched,
    /// `(producer, consumer)` process per channel (`0xFF`: none).
    pub(crate) channels: Vec<(u8, u8)>,
    pub(crate) n_procs: usize,
    pub(crate) names: NameTable,
    /// Deepest nesting of the instruction stream.
    pub(crate) max_depth: usize,
    /// Most scalar arguments / region dimensions / regions of one task.
    pub(crate) max_scalars: usize,
    pub(crate) max_coords: usize,
    /// Coordinates (starts and sizes) of every task statement together.
    pub(crate) total_coords: usize,
    pub(crate) max_regions: usize,
    /// `(pc, loc)` of each computed read (`read`, a loop over computed arrays), by pc.
    pub(crate) read_locs: Vec<(u32, Loc)>,
    /// The statement-location table: `(pc, loc)` by increasing pc, each entry covering the
    /// instructions up to the next.
    pub(crate) stmt_locs: Vec<(u32, Loc)>,
}

impl Program {
    /// Size of the bytecode in bytes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Number of instructions.
    pub fn instructions(&self) -> usize {
        self.insns.len()
    }

    /// Number of task statements.
    pub fn task_statements(&self) -> usize {
        self.tasks.len()
    }

    /// The schedule's executor count (dispatch targets range over it unless overridden).
    pub fn executors(&self) -> u64 {
        self.sched.executors
    }

    /// The schedule's stream count.
    pub fn streams(&self) -> u64 {
        self.sched.streams
    }

    /// Whether an executor interpreting only its own tasks ([`crate::ExecutorConfig::executor`])
    /// may skip an order edge whole: some loop whose iterations may be skipped holds a
    /// `for_each` or a `sequential` block in its body. Such an executor then does not see every
    /// order edge (the sink's contract omits edges lying inside skipped subtrees), so it cannot
    /// number the barrier tasks a runtime inserts for them; otherwise every executor sees every
    /// order edge at the same global position.
    pub fn skips_order_edges(&self) -> bool {
        use crate::op::Op;
        self.insns.iter().enumerate().any(|(pc, i)| {
            i.op == Op::Loop
                && self
                    .loops
                    .get(usize::from(i.a))
                    .is_some_and(|l| l.count.is_some())
                && self
                    .insns
                    .get(pc + 1..(i.b as usize).min(self.insns.len()))
                    .unwrap_or(&[])
                    .iter()
                    .any(|j| (j.op == Op::Loop && j.flags & 1 != 0) || j.op == Op::Seq)
        })
    }

    /// Per tensor (module index): whether a `read` instruction or a ragged / sparse axis over
    /// unbound arrays reads it, i.e. the generator reads values tasks of the run compute
    /// (`docs/SEMANTICS.md`, "Computed reads").
    pub fn computed_tensors(&self) -> Vec<bool> {
        let mut out = vec![false; self.tensors.len()];
        for i in &self.insns {
            if i.op == crate::op::Op::Read
                && let Some(c) = out.get_mut(i.b as usize)
            {
                *c = true;
            }
        }
        for a in &self.axes {
            for t in a.arrays() {
                if self.computed_array(t) {
                    out[usize::from(t)] = true;
                }
            }
        }
        out
    }

    /// The source location of the computed read at instruction `pc` (a `read`, or a loop over
    /// computed arrays), from the side table; [`Loc::NONE`] when the bytecode stores none.
    pub fn read_loc(&self, pc: usize) -> Loc {
        self.read_locs
            .binary_search_by_key(&(pc as u32), |&(p, _)| p)
            .map_or(Loc::NONE, |i| self.read_locs[i].1)
    }

    /// The source location of the statement instruction `pc` belongs to, from the
    /// statement-location table; [`Loc::NONE`] when the bytecode stores none.
    pub fn stmt_loc(&self, pc: usize) -> Loc {
        let i = self.stmt_locs.partition_point(|&(p, _)| p as usize <= pc);
        i.checked_sub(1).map_or(Loc::NONE, |i| self.stmt_locs[i].1)
    }

    /// Whether axis array `t` is computed (read whole through the sink when its loop starts)
    /// rather than bound.
    #[inline]
    pub(crate) fn computed_array(&self, t: u16) -> bool {
        self.tensors.get(usize::from(t)).is_some_and(|d| !d.array)
    }

    /// Whether the entry is a CSP pipeline.
    pub fn is_pipeline(&self) -> bool {
        !self.channels.is_empty() || self.n_procs > 1
    }

    /// Name of kernel `k` (`#k` when not stored).
    pub fn kernel_name(&self, k: u32) -> String {
        named(&self.names.kernels, k, "kernel")
    }

    /// Name of tensor `t` (`#t` when not stored).
    pub fn tensor_name(&self, t: u32) -> String {
        named(&self.names.tensors, t, "tensor")
    }

    /// Name of symbol `i`.
    pub(crate) fn symbol_name(&self, i: usize) -> String {
        named(&self.names.symbols, i as u32, "symbol")
    }

    /// Name of slot `i`.
    pub(crate) fn slot_name(&self, i: usize) -> String {
        named(&self.names.slots, i as u32, "slot")
    }

    /// Name of axis `i`.
    pub(crate) fn axis_name(&self, i: u32) -> String {
        named(&self.names.axes, i, "axis")
    }

    /// Name of process `i`.
    pub(crate) fn proc_name(&self, i: u32) -> String {
        named(&self.names.procs, i, "process")
    }

    /// Name of channel `i`.
    pub(crate) fn channel_name(&self, i: u32) -> String {
        named(&self.names.channels, i, "channel")
    }
}

fn named(list: &[String], i: u32, what: &str) -> String {
    match list.get(i as usize) {
        Some(s) if !s.is_empty() => s.clone(),
        _ => format!("{what} #{i}"),
    }
}
