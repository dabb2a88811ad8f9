//! The per-executor interpreter: runs a validated program and generates one executor's tasks.
//!
//! Why: each executor (an AICPU in the on-device generation specification) interprets the same
//! bytecode and produces only the tasks dispatched to it, in program order, without a task list
//! ever existing anywhere.
//!
//! Promises:
//! - **Same tasks.** Over all executors `0..E`, the tasks generated are exactly the reference
//!   expander's (same kernel, params, regions, pool, stream and dispatch target), each generated
//!   once, by the executor that owns it: `target mod E`, or `index mod E` when the target is
//!   `None` (`work_steal`). Each executor's sequence is the expander's order restricted to it.
//! - **Same order edges**, as ranges of global indices, with the announcement contract of
//!   [`TaskSink`].
//! - **Cost.** Deciding that a task is someone else's is O(1): its dispatch target comes from a
//!   value decided once per iteration of the hoisting loop, or from one evaluation of the key;
//!   nothing else of a foreign task is evaluated. Iterations whose tasks all belong to other
//!   executors are skipped whole, in O(1), when the encoder proved it safe (see
//!   `encode::analysis`). The interpreter is iterative (an explicit frame stack sized by the
//!   decoder) and allocates nothing per task. Region coordinates that are constants under the
//!   bindings are written once per interpreter; those of the form `reg * mul + k` with a constant
//!   size are recomputed when `reg` is written (every register write goes through
//!   `set_reg`), so a task only evaluates what the decoder could not reduce.
//! - **Errors.** Whenever the reference expander fails, at least one executor fails (the owner
//!   of the subtree or task where it fails); what the other executors generated is then
//!   unspecified. When the expander succeeds, every executor succeeds. Nothing panics.

use crate::bind::Bound;
use crate::eval::value;
use crate::format::NONE16;
use crate::op::{Insn, Op, expr_ops};
use crate::program::{AxisDesc, DNode, Lin, Program, TaskDesc};
use crate::sink::{Task, TaskSink};
use pto_wsp_ir::eval::EvalError;
use pto_wsp_ir::expand::splitmix64;
use pto_wsp_ir::task_io::{MAX_RANK, Region, TaskIo};
use pto_wsp_ir::{DataRead, ExecPool, Loc, OrderEdge, OrderTrack, ReadRefused, ScalarType, Value};
use std::collections::VecDeque;
use std::ops::Range;

/// Internal results: the error boxed, so the hot path moves one word.
type R<T> = Result<T, Box<InterpError>>;

/// What a task's schedule keys decide, besides its target.
struct Meta {
    kernel: u32,
    pool: ExecPool,
    stream: u32,
    priority: i64,
    cost: Option<u64>,
    /// Filled by the general path, which writes the coordinates only: the boxes must be copied.
    general: bool,
}

/// Which tasks an interpreter generates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExecutorConfig {
    /// This executor's id (`0..executors`); `None` generates every executor's tasks.
    pub executor: Option<u32>,
    /// Override the schedule's executor count (as `ExpandOptions::executors` does).
    pub executors: Option<u64>,
    /// How many generators share the tasks, when not one per executor: a task belongs to
    /// generator `target mod owners` (`index mod owners` without a target) and `executor`
    /// names a generator. `None`: one generator per executor (`owners` = the executor count).
    /// Dispatch targets are computed over the executors either way.
    pub owners: Option<u32>,
    /// Fail with [`InterpError::StepLimit`] after this many loop iterations (counted whether
    /// run or skipped) — a guard for untrusted bytecode; `None` is no limit.
    pub max_steps: Option<u64>,
}

impl ExecutorConfig {
    /// Executor `id` of the schedule's executors.
    pub fn executor(id: u32) -> ExecutorConfig {
        ExecutorConfig {
            executor: Some(id),
            executors: None,
            owners: None,
            max_steps: None,
        }
    }

    /// Every task, as one generator.
    pub fn all() -> ExecutorConfig {
        ExecutorConfig::default()
    }
}

/// Why interpretation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InterpError {
    /// The executor configuration does not fit the program.
    #[error("bad executor configuration: {message}")]
    BadConfig {
        /// What is wrong.
        message: String,
    },
    /// The bindings were made for another program.
    #[error("the bindings were resolved for a different program")]
    BindingMismatch,
    /// A negative loop extent, row count or row length.
    #[error("{what} is negative ({value})")]
    NegativeLength {
        /// What was negative.
        what: String,
        /// Its value.
        value: i64,
    },
    /// A bound array has fewer elements than needed.
    #[error("tensor `{tensor}` is bound to {len} element(s), {needed} needed")]
    ArrayTooShort {
        /// The tensor.
        tensor: String,
        /// How many elements were needed.
        needed: u64,
        /// How many are bound.
        len: usize,
    },
    /// A CSR `indptr` array that is not `OUTER + 1` non-decreasing offsets into the indices.
    #[error("bad sparse indptr `{tensor}`: {message}")]
    BadIndptr {
        /// The indptr tensor.
        tensor: String,
        /// What is wrong.
        message: String,
    },
    /// A task region outside its tensor.
    #[error(
        "task #{task} (`{kernel}`): region argument {region} of `{tensor}` is out of bounds in \
         dimension {dim}: start {start}, size {size}, extent {extent}"
    )]
    RegionOutOfBounds {
        /// Global index of the task.
        task: u32,
        /// The kernel the task statement names.
        kernel: String,
        /// Which region argument (0-based among the tiles).
        region: usize,
        /// The tensor.
        tensor: String,
        /// The offending dimension.
        dim: usize,
        /// Start in that dimension.
        start: i64,
        /// Size in that dimension.
        size: i64,
        /// The tensor's extent in that dimension.
        extent: i64,
    },
    /// A `load` index outside the tensor.
    #[error(
        "load from `{tensor}`: index {index} is out of bounds in dimension {dim} (extent {extent})"
    )]
    LoadOutOfBounds {
        /// The tensor.
        tensor: String,
        /// The dimension.
        dim: usize,
        /// The index.
        index: i64,
        /// The extent.
        extent: i64,
    },
    /// A loaded element that does not fit the slot.
    #[error("{context}: expected {expected}, found {found}")]
    WrongType {
        /// What was being done.
        context: String,
        /// The expected type.
        expected: String,
        /// What was found.
        found: String,
    },
    /// An expression failed to evaluate.
    #[error("evaluating {context}: {source}")]
    Eval {
        /// What was being evaluated, and where.
        context: String,
        /// Why it failed.
        source: EvalError,
    },
    /// Every unfinished CSP process waits on an empty open channel.
    #[error(
        "deadlock: {}",
        waiting.iter().map(|(p, c)| format!("process `{p}` waits on channel `{c}`"))
            .collect::<Vec<_>>().join(", ")
    )]
    Deadlock {
        /// `(process, channel)` for every waiting process.
        waiting: Vec<(String, String)>,
    },
    /// More than `u32::MAX` tasks.
    #[error("more than 2^32 - 1 tasks")]
    TooManyTasks,
    /// The step limit of [`ExecutorConfig::max_steps`] was reached.
    #[error("stopped after {limit} loop iterations (the configured step limit)")]
    StepLimit {
        /// The limit.
        limit: u64,
    },
    /// The sink did not serve a computed read (`read`).
    #[error("computed read of tensor `{tensor}`: {reason}")]
    ComputedRead {
        /// The tensor.
        tensor: String,
        /// Why the sink refused it.
        reason: String,
    },
    /// An error of a computed read — a `read`, or a loop reading its axis's computed arrays —
    /// at the read's source location (the bytecode's side table of read locations).
    #[error("{error}")]
    AtRead {
        /// The error.
        error: Box<InterpError>,
        /// The statement that reads.
        loc: Loc,
    },
    /// A run-time error of a statement — arithmetic, an index or region out of its tensor, a
    /// negative extent, a bad shape array — at the statement's source location (the bytecode's
    /// statement-location table).
    #[error("{error}")]
    At {
        /// The error.
        error: Box<InterpError>,
        /// The statement.
        loc: Loc,
    },
    /// An instruction the interpreter cannot run where it stands (a decoder bug).
    #[error("internal error at instruction {pc}: {message}")]
    Internal {
        /// The instruction.
        pc: usize,
        /// What went wrong.
        message: String,
    },
}

impl pto_wsp_ir::Diagnostic for InterpError {
    /// A computed read's location ([`InterpError::AtRead`]), a statement's
    /// ([`InterpError::At`]); [`Loc::NONE`] otherwise.
    fn loc(&self) -> Loc {
        match self {
            InterpError::AtRead { loc, .. } | InterpError::At { loc, .. } => *loc,
            _ => Loc::NONE,
        }
    }

    fn label(&self) -> Option<String> {
        matches!(self, InterpError::AtRead { .. }).then(|| "computed read".to_string())
    }
}

/// What an interpretation reports at the end.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunSummary {
    /// Tasks passed to the sink (this executor's).
    pub tasks: u32,
    /// The global task count reached (every executor's tasks, generated or skipped).
    pub total: u32,
    /// Tasks of other executors stepped over one by one (their ownership decided, nothing else).
    pub filtered: u64,
    /// Tasks of other executors skipped as whole iterations, without being looked at.
    pub skipped: u64,
    /// Whether the sink stopped the interpretation.
    pub stopped: bool,
    /// `while` loops that ended at their `max` bound with the condition still true.
    pub loops_at_max: u64,
    /// Computed reads (`read` instructions) the sink served.
    pub computed_reads: u64,
}

#[derive(Clone, Debug)]
enum Frame {
    Dense {
        pc: u32,
        next: i64,
        end: i64,
        /// The loop variable's register.
        var: u16,
        /// The loop descriptor, and whether its iterations hoist or skip.
        desc: u16,
        check: bool,
        track: Option<OrderTrack>,
    },
    Ragged {
        pc: u32,
        row: i64,
        rows: i64,
        pos: i64,
        track: Option<OrderTrack>,
    },
    Sparse {
        pc: u32,
        row: usize,
        rows: usize,
        j: usize,
    },
    Seq {
        track: OrderTrack,
    },
    Consume {
        channel: u8,
        var: u16,
        pending: Option<u32>,
    },
    While {
        /// The `while` instruction.
        pc: u32,
        /// Iterations started, and the bound.
        iters: i64,
        max: i64,
        track: OrderTrack,
    },
}

#[derive(Clone, Debug, Default)]
struct ProcState {
    pc: usize,
    stack: Vec<Frame>,
    last_task: Option<u32>,
    pending: usize,
    done: bool,
}

#[derive(Clone, Debug, Default)]
struct ChannelState {
    tokens: VecDeque<(u64, Option<u32>)>,
    closed: bool,
}

enum Stop {
    Blocked,
    Done,
    Stopped,
}

/// A region dimension whose start and size vary.
#[derive(Clone, Copy, Debug)]
struct VarDim {
    start: Lin,
    size: Lin,
    extent: i64,
    /// Where its start and its size go in the coordinate buffer.
    at: u32,
    at_size: u32,
    /// And in the boxes (see `box_slot`).
    box_start: u32,
    box_size: u32,
}

/// A region dimension with a constant size whose start is `reg * mul + k`: in bounds, with no
/// overflow in any step of the source expression, exactly when `reg - lo <= span` (unsigned),
/// and then the wrapping arithmetic is exact.
#[derive(Clone, Copy, Debug)]
struct StartOnly {
    reg: u32,
    lo: i64,
    span: u64,
    mul: i64,
    k: i64,
    at: u32,
    /// A second coordinate with the same start form and range (`at` again when none).
    at2: u32,
    /// The places of `at` and `at2` in the boxes (see `box_slot`).
    box1: u32,
    box2: u32,
    /// The task statement it belongs to, and whether its coordinates hold the value for the
    /// register's current value (in bounds).
    task: u32,
    ok: bool,
}

/// Where a coordinate goes in the interpreter's boxes: `io << 4 | is_size << 3 | dim`, or
/// [`NO_BOX`] for a dimension past [`MAX_RANK`].
fn box_slot(io: usize, is_size: bool, dim: usize) -> u32 {
    if dim >= MAX_RANK || io >= (u32::MAX >> 4) as usize {
        return NO_BOX;
    }
    (io as u32) << 4 | u32::from(is_size) << 3 | dim as u32
}

/// A coordinate with no place in the boxes.
const NO_BOX: u32 = u32::MAX;

/// [`put_box`] for a start's `slot` (its size bit clear): the dimension indexes the starts
/// directly (`box_slot` keeps it below [`MAX_RANK`]), with no test of the size bit.
// `put_start` reads the dimension as `slot % MAX_RANK`: right while `MAX_RANK` divides 16 (the
// io's shift) and is at most 8 (the size bit).
const _: () = assert!(16 % MAX_RANK == 0 && MAX_RANK <= 8);

#[inline(always)]
fn put_start(ios: &mut [TaskIo], slot: u32, v: i64) {
    debug_assert!(slot == NO_BOX || slot & 8 == 0, "put_start: a size's slot");
    if let Some(io) = ios.get_mut((slot >> 4) as usize) {
        io.region.start[slot as usize % MAX_RANK] = v as u32;
    }
}

/// Writes coordinate `v` at `slot` of the boxes (nothing for [`NO_BOX`]). A coordinate in its
/// tensor's bounds fits `u32` whenever the boxes are handed out (`io_ok`); otherwise they are
/// not read.
#[inline(always)]
fn put_box(ios: &mut [TaskIo], slot: u32, v: i64) {
    if let Some(io) = ios.get_mut((slot >> 4) as usize) {
        let d = (slot & 7) as usize;
        let a = if slot & 8 == 0 {
            &mut io.region.start
        } else {
            &mut io.region.size
        };
        if let Some(x) = a.get_mut(d) {
            *x = v as u32;
        }
    }
}

/// The values of `l.reg` for which every step of `((r + pre) * mul) + post` fits `i64` and the
/// result is in `0..=max_start`: one interval, since the form is monotonic (`None` if empty or
/// `mul` is 0).
fn start_interval(l: &Lin, max_start: i64) -> Option<(i64, i64)> {
    fn floor(a: i128, b: i128) -> i128 {
        let q = a / b;
        if a % b != 0 && ((a < 0) != (b < 0)) {
            q - 1
        } else {
            q
        }
    }
    fn ceil(a: i128, b: i128) -> i128 {
        -floor(-a, b)
    }
    let (pre, mul, post) = (i128::from(l.pre), i128::from(l.mul), i128::from(l.post));
    let (min, max) = (i128::from(i64::MIN), i128::from(i64::MAX));
    if mul == 0 || max_start < 0 {
        return None;
    }
    // b = a * mul must fit i64 and give b + post in 0..=max_start.
    let (blo, bhi) = (min.max(-post), max.min(i128::from(max_start) - post));
    if blo > bhi {
        return None;
    }
    let (alo, ahi) = if mul > 0 {
        (ceil(blo, mul), floor(bhi, mul))
    } else {
        (ceil(bhi, mul), floor(blo, mul))
    };
    // a = r + pre must fit i64, and r is an i64.
    let lo = min.max(alo.max(min) - pre);
    let hi = max.min(ahi.min(max) - pre);
    (lo <= hi).then_some((lo as i64, hi as i64))
}

/// One executor's interpreter over a program and its bindings.
#[derive(Debug)]
pub struct Interpreter<'p> {
    prog: &'p Program,
    bound: &'p Bound,
    me: Option<u32>,
    executors: u64,
    /// Generators sharing the tasks ([`ExecutorConfig::owners`]).
    owners: u64,
    steps: u64,
    max_steps: u64,
    proc_pcs: Vec<usize>,
    regs: Vec<u64>,
    count: u32,
    armed: Vec<Range<u32>>,
    csp_edges: Vec<Range<u32>>,
    /// Target decided by the current hoisting loop iteration (`None`: decide per task).
    hoist: Option<u32>,
    channels: Vec<ChannelState>,
    params: Vec<Value>,
    args: Vec<u64>,
    /// Per task statement: its region dimensions whose start and size both vary (into
    /// `var_dims`); constant coordinates are written once, start-only ones on register writes.
    var_ranges: Vec<Range<u32>>,
    var_dims: Vec<VarDim>,
    starts_only: Vec<StartOnly>,
    /// Per register: the start-only dimensions that read it (a range of `starts_only`, which
    /// is sorted by register), recomputed whenever the register is written — not per task.
    dep_index: Vec<(u32, u32)>,
    /// Per task statement: how many of its start-only dimensions are out of bounds now.
    bad: Vec<u32>,
    /// Per task statement: its starts then its sizes (see `TaskDesc::coord_base`).
    coords: Vec<i64>,
    /// Every task statement's regions as boxes (indexed like `Program::region_outs`): tensor,
    /// rank and access set once; every coordinate is written here as it is into `coords` (once
    /// for constants, on register writes for start-only dimensions, per task for varying
    /// ones), so an emitted task's boxes are ready — except after the general path, which
    /// writes `coords` only and is followed by a copy (`fill_boxes`).
    ios: Vec<TaskIo>,
    /// Per coordinate of `coords`: its place in `ios` (`box_slot`).
    box_at: Vec<u32>,
    /// Whether this run's sink takes boxes ([`TaskSink::wants_boxes`]): only then are the
    /// varying coordinates written into them (a run that starts taking them brings them up to
    /// date: constants are always there, start-only ones are rewritten at the start of a run).
    boxes: bool,
    /// Per task statement: whether its regions are handed out as boxes ([`Task::io`]): every
    /// one fits a [`Region`] (rank at most [`MAX_RANK`], every extent of its tensor below
    /// 2^32), so the bounds the interpreter checks make each a valid box.
    io_ok: Vec<bool>,
    summary: RunSummary,
    /// The indices of the `load` / `read` being run, and a computed read's answer.
    index: Vec<i64>,
    read_buf: Vec<i64>,
    /// Per `loop` over an axis with computed arrays: its pc and the arrays read (through the
    /// sink) when it last started. A loop instruction is open at most once at a time.
    snaps: Vec<(u32, [Vec<i64>; 2])>,
}

impl<'p> Interpreter<'p> {
    /// An interpreter for `config`'s executor.
    pub fn new(
        prog: &'p Program,
        bound: &'p Bound,
        config: ExecutorConfig,
    ) -> Result<Interpreter<'p>, InterpError> {
        let executors = config.executors.unwrap_or(prog.sched.executors);
        if executors == 0 || executors > u64::from(u32::MAX) + 1 {
            return Err(InterpError::BadConfig {
                message: format!("executors must be between 1 and 2^32, not {executors}"),
            });
        }
        let owners = config.owners.map_or(executors, u64::from);
        if owners == 0 {
            return Err(InterpError::BadConfig {
                message: "owners must be at least 1".into(),
            });
        }
        if let Some(me) = config.executor
            && u64::from(me) >= owners
        {
            return Err(InterpError::BadConfig {
                message: format!("executor {me} does not exist ({owners} executors)"),
            });
        }
        if bound.regs.len() != prog.reg_types.len()
            || bound.arrays.len() != prog.tensors.len()
            || bound.shapes.len() != prog.tensors.len()
            || prog
                .tensors
                .iter()
                .zip(&bound.shapes)
                .any(|(t, s)| t.shape.as_ref().map_or(0, Vec::len) != s.len())
            || prog
                .tensors
                .iter()
                .zip(&bound.arrays)
                .any(|(t, a)| t.array != a.is_some())
        {
            return Err(InterpError::BindingMismatch);
        }
        let proc_pcs = prog
            .insns
            .iter()
            .enumerate()
            .filter(|(_, i)| i.op == Op::Proc)
            .map(|(pc, _)| pc)
            .collect();
        let (ios, io_ok) = region_boxes(prog, bound);
        let mut interp = Interpreter {
            prog,
            bound,
            me: config.executor,
            executors,
            owners,
            steps: 0,
            max_steps: config.max_steps.unwrap_or(u64::MAX),
            proc_pcs,
            regs: Vec::new(),
            count: 0,
            armed: Vec::new(),
            csp_edges: Vec::new(),
            hoist: None,
            channels: vec![ChannelState::default(); prog.channels.len()],
            params: vec![Value::I64(0); prog.max_scalars],
            args: vec![0; prog.max_scalars],
            var_ranges: Vec::new(),
            var_dims: Vec::new(),
            starts_only: Vec::new(),
            dep_index: Vec::new(),
            bad: Vec::new(),
            coords: vec![0; prog.total_coords],
            box_at: box_slots(prog),
            boxes: false,
            ios,
            io_ok,
            summary: RunSummary::default(),
            index: Vec::new(),
            read_buf: Vec::new(),
            snaps: Vec::new(),
        };
        interp.constant_coords();
        interp.dependents();
        Ok(interp)
    }

    /// Copies the coordinates of emitted task statement `td` into its boxes (after the general
    /// path, which writes the coordinates only).
    #[inline]
    fn fill_boxes(&mut self, td: &TaskDesc) {
        let r = td.region_outs.start as usize..td.region_outs.end as usize;
        let n = td.n_coords as usize;
        let coords = &self.coords[td.coord_base as usize..td.coord_base as usize + 2 * n];
        let (starts, sizes) = coords.split_at(n);
        for (io, ro) in self.ios[r.clone()]
            .iter_mut()
            .zip(&self.prog.region_outs[r])
        {
            let (off, rank) = (ro.off as usize, ro.rank as usize);
            let (s, z) = (&starts[off..off + rank], &sizes[off..off + rank]);
            for ((a, b), (&s, &z)) in io
                .region
                .start
                .iter_mut()
                .zip(&mut io.region.size)
                .zip(s.iter().zip(z))
            {
                *a = s as u32;
                *b = z as u32;
            }
        }
    }

    /// Sorts the start-only dimensions by the register they read and notes, per register, the
    /// range of them that reads it (so a register write walks its dimensions in place, with no
    /// list of indices between).
    fn dependents(&mut self) {
        let n = self.prog.reg_types.len() + 1;
        // Stable: dimensions of one register keep their order (a register past the table, which
        // no write reaches, sorts last and is in no range).
        self.starts_only.sort_by_key(|p| p.reg);
        let mut at = 0usize;
        for r in 0..n {
            let a = at;
            while self
                .starts_only
                .get(at)
                .is_some_and(|p| p.reg as usize == r)
            {
                at += 1;
            }
            self.dep_index.push((a as u32, at as u32));
        }
        self.bad = vec![0; self.prog.tasks.len()];
    }

    /// Writes register `r` and brings the start-only dimensions that read it up to date.
    #[inline]
    fn set_reg(&mut self, r: usize, v: u64) {
        self.regs[r] = v;
        let (a, b) = self.dep_index[r];
        if a == b {
            return;
        }
        // Two copies of the loop: an executor that hands out no boxes pays nothing for them.
        if self.boxes {
            self.set_dependents::<true>(a..b, v as i64);
        } else {
            self.set_dependents::<false>(a..b, v as i64);
        }
    }

    /// The start-only dimensions `starts_only[deps]` for their register's new value `x` (and
    /// their boxes when `BOXES`).
    #[inline(always)]
    fn set_dependents<const BOXES: bool>(&mut self, deps: Range<u32>, x: i64) {
        let (coords, bad, ios) = (&mut self.coords, &mut self.bad, &mut self.ios);
        for p in &mut self.starts_only[deps.start as usize..deps.end as usize] {
            let ok = x.wrapping_sub(p.lo) as u64 <= p.span;
            if ok {
                let c = x.wrapping_mul(p.mul).wrapping_add(p.k);
                coords[p.at as usize] = c;
                coords[p.at2 as usize] = c;
                if BOXES {
                    put_start(ios, p.box1, c);
                    put_start(ios, p.box2, c);
                }
            }
            if ok != p.ok {
                p.ok = ok;
                let n = &mut bad[p.task as usize];
                *n = if ok { n.saturating_sub(1) } else { *n + 1 };
            }
        }
    }

    /// Every start-only dimension from the registers' current values (at the start of a run).
    fn refresh_all(&mut self) {
        for p in &mut self.starts_only {
            p.ok = false;
        }
        self.bad.fill(0);
        for p in &self.starts_only {
            self.bad[p.task as usize] += 1;
        }
        for r in 0..self.regs.len().min(self.dep_index.len()) {
            self.set_reg(r, self.regs[r]);
        }
    }

    /// Writes the region coordinates that are constants (and in bounds) once, and lists the
    /// others per task statement.
    fn constant_coords(&mut self) {
        let prog = self.prog;
        for (ti, td) in prog.tasks.iter().enumerate() {
            let start = self.var_dims.len() as u32;
            let start_only = self.starts_only.len() as u32;
            if td.linear {
                for p in &prog.dim_plans[td.dim_plans.start as usize..td.dim_plans.end as usize] {
                    let extent = self.bound.flat_shapes[p.extent as usize];
                    match (p.start.constant(), p.size.constant()) {
                        (Some(s), Some(z))
                            if s >= 0
                                && z >= 1
                                && s.checked_add(z).is_some_and(|e| e <= extent) =>
                        {
                            let at = (td.coord_base + p.coord) as usize;
                            let at_size = at + td.n_coords as usize;
                            self.coords[at] = s;
                            self.coords[at_size] = z;
                            put_box(&mut self.ios, self.box_at[at], s);
                            put_box(&mut self.ios, self.box_at[at_size], z);
                        }
                        (_, Some(z))
                            if z >= 1
                                && z <= extent
                                && let Some((lo, hi)) = start_interval(&p.start, extent - z) =>
                        {
                            // Only the start varies: the register's values for which it is in
                            // bounds (and no step overflows) form one interval.
                            let at = (td.coord_base + p.coord) as usize;
                            let at_size = at + td.n_coords as usize;
                            self.coords[at_size] = z;
                            put_box(&mut self.ios, self.box_at[at_size], z);
                            let so = StartOnly {
                                reg: p.start.reg,
                                lo,
                                span: hi.wrapping_sub(lo) as u64,
                                mul: p.start.mul,
                                k: p.start
                                    .pre
                                    .wrapping_mul(p.start.mul)
                                    .wrapping_add(p.start.post),
                                at: at as u32,
                                at2: at as u32,
                                box1: self.box_at[at],
                                box2: self.box_at[at],
                                task: ti as u32,
                                ok: false,
                            };
                            // The same start in the same bounds elsewhere in this task (a tile
                            // read and written at one place): computed once, stored twice.
                            let mine = &mut self.starts_only[start_only as usize..];
                            match mine.iter_mut().find(|x| {
                                x.at == x.at2
                                    && (x.reg, x.lo, x.span, x.mul, x.k)
                                        == (so.reg, so.lo, so.span, so.mul, so.k)
                            }) {
                                Some(x) => {
                                    x.at2 = so.at;
                                    x.box2 = so.box1;
                                }
                                None => self.starts_only.push(so),
                            }
                        }
                        _ => {
                            let at = td.coord_base + p.coord;
                            let at_size = td.coord_base + td.n_coords + p.coord;
                            self.var_dims.push(VarDim {
                                start: p.start,
                                size: p.size,
                                extent,
                                at,
                                at_size,
                                box_start: self.box_at[at as usize],
                                box_size: self.box_at[at_size as usize],
                            })
                        }
                    }
                }
            }
            self.var_ranges.push(start..self.var_dims.len() as u32);
        }
    }

    /// Runs the whole program, passing this executor's tasks and the order edges to `sink`.
    /// Can be called again: each run starts from the beginning.
    pub fn run(&mut self, sink: &mut impl TaskSink) -> Result<RunSummary, InterpError> {
        // The registers, then the zero register linear forms of constants read.
        self.regs.clone_from(&self.bound.regs);
        self.regs.push(0);
        self.boxes = sink.wants_boxes();
        self.refresh_all();
        self.count = 0;
        self.steps = 0;
        self.armed.clear();
        self.hoist = None;
        for c in &mut self.channels {
            c.tokens.clear();
            c.closed = false;
        }
        self.summary = RunSummary::default();
        let mut procs: Vec<ProcState> = self
            .proc_pcs
            .iter()
            .map(|&pc| ProcState {
                pc: pc + 1,
                stack: Vec::with_capacity(self.prog.max_depth),
                ..ProcState::default()
            })
            .collect();
        loop {
            let runnable = procs.iter().position(|p| !p.done && self.can_progress(p));
            let Some(i) = runnable else {
                if procs.iter().all(|p| p.done) {
                    break;
                }
                let waiting = procs
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| !p.done)
                    .map(|(i, p)| {
                        let ch = match p.stack.last() {
                            Some(Frame::Consume { channel, .. }) => {
                                self.prog.channel_name(u32::from(*channel))
                            }
                            _ => "?".to_string(),
                        };
                        (self.prog.proc_name(i as u32), ch)
                    })
                    .collect();
                return Err(InterpError::Deadlock { waiting });
            };
            let mut ps = std::mem::take(&mut procs[i]);
            let r = self.run_proc(&mut ps, sink);
            procs[i] = ps;
            match r.map_err(|e| *e)? {
                Stop::Blocked => {}
                Stop::Done => {
                    procs[i].done = true;
                    for (c, &(producer, _)) in self.prog.channels.iter().enumerate() {
                        if usize::from(producer) == i {
                            self.channels[c].closed = true;
                        }
                    }
                }
                Stop::Stopped => {
                    self.summary.stopped = true;
                    break;
                }
            }
        }
        self.summary.total = self.count;
        Ok(self.summary.clone())
    }

    fn can_progress(&self, p: &ProcState) -> bool {
        match p.stack.last() {
            Some(Frame::Consume { channel, .. }) if self.prog.insns[p.pc].op == Op::Next => {
                let c = &self.channels[usize::from(*channel)];
                c.closed || !c.tokens.is_empty()
            }
            _ => true,
        }
    }

    #[inline]
    fn eval(&self, e: u16) -> Result<u64, EvalError> {
        self.prog.eval(e, &self.regs, &[])
    }

    /// An integer expression as `i64` (a `u64` above `i64::MAX` is an overflow, as in the
    /// expander).
    #[inline]
    fn eval_int(&self, e: u16) -> Result<i64, EvalError> {
        let raw = self.eval(e)?;
        if self.prog.expr_type(e) == ScalarType::U64 && raw > i64::MAX as u64 {
            return Err(EvalError::Overflow {
                op: "as i64",
                lhs: Value::U64(raw),
                rhs: None,
            });
        }
        Ok(raw as i64)
    }

    fn axis_name(&self, pc: usize) -> String {
        let l = &self.prog.loops[usize::from(self.prog.insns[pc].a)];
        self.prog.axis_name(u32::from(l.axis))
    }

    /// Moves the global count over `n` tasks of other executors, announcing armed edges first.
    fn advance_count(&mut self, n: u64, sink: &mut impl TaskSink) -> R<()> {
        if n == 0 {
            return Ok(());
        }
        if !self.armed.is_empty() {
            for before in self.armed.drain(..) {
                sink.order_begin(before, self.count);
            }
        }
        let next = u64::from(self.count) + n;
        self.count = u32::try_from(next).map_err(|_| InterpError::TooManyTasks)?;
        self.summary.skipped += n;
        Ok(())
    }

    /// Target of a task: dispatch node `node` with keyset `keys` at global `index`.
    fn target(&self, node: u32, index: u32, keys: Option<u32>) -> Result<Option<u32>, EvalError> {
        let prog = self.prog;
        let key = |slot: u8| -> u16 {
            match keys {
                Some(k) => prog.keysets[k as usize * prog.keyset_len + usize::from(slot)],
                None => NONE16,
            }
        };
        let mut n = node;
        loop {
            let Some(d) = prog.sched.dispatch.get(n as usize) else {
                return Ok(None);
            };
            return Ok(match d {
                DNode::RoundRobin(k) => Some((u64::from(index) % k) as u32),
                DNode::Affinity(s) => {
                    let e = key(*s);
                    Some(self.modulo(e, self.executors)?)
                }
                DNode::Hash(s) => {
                    let e = key(*s);
                    let bits = self.eval(e)?;
                    Some((splitmix64(bits) % self.executors) as u32)
                }
                DNode::Threshold {
                    metric,
                    levels,
                    otherwise,
                } => {
                    let m = self.metric(key(*metric))?;
                    n = levels
                        .iter()
                        .find(|(b, _)| m < i128::from(*b))
                        .map_or(*otherwise, |(_, c)| *c);
                    continue;
                }
                DNode::StaticPartition(starts) => {
                    let k = starts.partition_point(|&s| s <= u64::from(index));
                    Some(k.saturating_sub(1) as u32)
                }
                DNode::WorkSteal => None,
            });
        }
    }

    fn metric(&self, e: u16) -> Result<i128, EvalError> {
        let raw = self.eval(e)?;
        Ok(match self.prog.expr_type(e) {
            ScalarType::U64 => i128::from(raw),
            ScalarType::I64 | ScalarType::Bool => i128::from(raw as i64),
        })
    }

    /// `e mod n`, Euclidean.
    fn modulo(&self, e: u16, n: u64) -> Result<u32, EvalError> {
        let raw = self.eval(e)?;
        Ok(match self.prog.expr_type(e) {
            ScalarType::U64 => raw % n,
            ScalarType::I64 | ScalarType::Bool => (raw as i64).rem_euclid(n as i64) as u64,
        } as u32)
    }

    #[inline]
    fn owner(&self, target: Option<u32>, index: u32) -> u32 {
        match target {
            Some(t) => (u64::from(t) % self.owners) as u32,
            None => (u64::from(index) % self.owners) as u32,
        }
    }

    /// Whether no task with an index in `[count, count + max(n, 1))` belongs to this executor
    /// under the static partition.
    fn range_foreign(&self, n: u64) -> bool {
        let (Some(me), Some(DNode::StaticPartition(starts))) =
            (self.me, self.prog.sched.dispatch.first())
        else {
            return false;
        };
        let lo = u64::from(self.count);
        let hi = lo + n.max(1) - 1;
        let part = |i: u64| starts.partition_point(|&s| s <= i).saturating_sub(1) as u64;
        let (k0, k1) = (part(lo), part(hi));
        if k1 - k0 + 1 >= self.owners {
            return false;
        }
        !(k0..=k1).any(|k| k % self.owners == u64::from(me))
    }

    /// At the start of an iteration of loop `l`: decides the hoisted target, and skips the
    /// iteration when it holds none of this executor's tasks. `Ok(true)`: skipped.
    #[inline]
    fn iteration(&mut self, l: u16, sink: &mut impl TaskSink) -> R<bool> {
        let desc = &self.prog.loops[usize::from(l)];
        if let Some(ks) = desc.hoist {
            self.hoist = self.target(0, 0, Some(u32::from(ks))).ok().flatten();
        }
        let Some(c) = desc.count else {
            return Ok(false);
        };
        let Some(me) = self.me else {
            return Ok(false);
        };
        let foreign = if desc.hoist.is_some() {
            matches!(self.hoist, Some(t) if self.owner(Some(t), 0) != me)
        } else {
            false
        };
        if !foreign && !desc.range_skip {
            return Ok(false);
        }
        let n = match self.prog.eval(c, &self.regs, &[]) {
            Ok(n) if (n as i64) >= 0 => n,
            _ => return Ok(false),
        };
        if !foreign && !self.range_foreign(n) {
            return Ok(false);
        }
        self.advance_count(n, sink)?;
        Ok(true)
    }

    /// Runs one process until it blocks, ends or the sink stops; an error is placed at the
    /// statement of the instruction that raised it ([`InterpError::At`]).
    fn run_proc(&mut self, ps: &mut ProcState, sink: &mut impl TaskSink) -> R<Stop> {
        let mut at = ps.pc;
        self.run_proc_from(&mut at, ps, sink)
            .map_err(|e| self.at_stmt(at, e))
    }

    /// [`Interpreter::run_proc`]'s loop; `at` follows the instruction being run.
    fn run_proc_from(
        &mut self,
        at: &mut usize,
        ps: &mut ProcState,
        sink: &mut impl TaskSink,
    ) -> R<Stop> {
        let prog = self.prog;
        let insns = &prog.insns[..];
        let mut pc = ps.pc;
        loop {
            *at = pc;
            let insn = insns[pc];
            match insn.op {
                Op::Proc | Op::Nop | Op::EndIf => pc += 1,
                Op::EndProc | Op::Halt => {
                    ps.pc = pc;
                    return Ok(Stop::Done);
                }
                Op::Loop => {
                    if !self
                        .loop_start(pc, ps, sink)
                        .map_err(|e| self.at_read(pc, e))?
                    {
                        ps.pc = pc;
                        return Ok(Stop::Stopped);
                    }
                    pc = self.advance(ps, sink)?;
                }
                Op::Next => {
                    // The common case inline: a plain dense loop with iterations left.
                    if let Some(Frame::Dense {
                        pc: lpc,
                        next,
                        end,
                        var,
                        check: false,
                        track: None,
                        ..
                    }) = ps.stack.last_mut()
                        && *next < *end
                        && self.steps < self.max_steps
                    {
                        self.steps += 1;
                        let (r, v) = (usize::from(*var), *next as u64);
                        *next += 1;
                        self.set_reg(r, v);
                        pc = *lpc as usize + 1;
                        continue;
                    }
                    if matches!(ps.stack.last(), Some(Frame::Consume { .. })) {
                        match self.consume_next(ps, pc)? {
                            Some(next) => pc = next,
                            None => {
                                ps.pc = pc;
                                return Ok(Stop::Blocked);
                            }
                        }
                    } else {
                        pc = self.advance(ps, sink)?;
                    }
                }
                Op::If => {
                    let c = self.eval(insn.a).map_err(|source| InterpError::Eval {
                        context: format!("an `if` condition (instruction {pc})"),
                        source,
                    })?;
                    pc = if c != 0 { pc + 1 } else { insn.b as usize + 1 };
                }
                Op::Else => pc = insn.b as usize + 1,
                Op::Seq => {
                    ps.stack.push(Frame::Seq {
                        track: OrderTrack::new(self.count),
                    });
                    pc += 1;
                }
                Op::Step => {
                    if let Some(Frame::Seq { track }) = ps.stack.last_mut() {
                        track.boundary(self.count, |e| sink.order(e), &mut self.armed);
                    }
                    pc += 1;
                }
                Op::SeqEnd => {
                    if let Some(Frame::Seq { track }) = ps.stack.last_mut() {
                        track.boundary(self.count, |e| sink.order(e), &mut self.armed);
                        track.end(&mut self.armed);
                    }
                    ps.stack.pop();
                    pc += 1;
                }
                Op::Task => {
                    let (next, go) = self.task(insn.b as usize, ps, sink)?;
                    if !go {
                        ps.pc = next;
                        return Ok(Stop::Stopped);
                    }
                    pc = next;
                }
                Op::Set => {
                    self.set(pc, insn)?;
                    pc += 1;
                }
                Op::Load => pc = self.load(pc)?,
                Op::Read => match self.read(pc, sink).map_err(|e| self.at_read(pc, e))? {
                    Some(next) => pc = next,
                    None => {
                        ps.pc = pc;
                        return Ok(Stop::Stopped);
                    }
                },
                Op::While => pc = self.while_start(pc, insn, ps)?,
                Op::EndWhile => pc = self.end_while(pc, ps, sink)?,
                Op::Break => {
                    let c = self.eval(insn.a).map_err(|source| InterpError::Eval {
                        context: format!("a `break if` condition (instruction {pc})"),
                        source,
                    })?;
                    pc = if c != 0 {
                        self.break_loop(ps, sink)?
                    } else {
                        pc + 1
                    };
                }
                Op::Send => {
                    self.send(insn, ps)?;
                    pc += 1;
                }
                Op::Consume => {
                    ps.stack.push(Frame::Consume {
                        channel: insn.flags,
                        var: insn.a,
                        pending: None,
                    });
                    pc = insn.b as usize;
                }
                Op::Args | expr_ops!() => {
                    return Err(InterpError::Internal {
                        pc,
                        message: format!("`{}` cannot run here", insn.op.mnemonic()),
                    }
                    .into());
                }
            }
        }
    }

    /// A `set`: evaluates the value into the register.
    #[inline]
    fn set(&mut self, pc: usize, insn: Insn) -> R<()> {
        let v = self
            .eval(insn.b as u16)
            .map_err(|source| InterpError::Eval {
                context: format!("a `set` (instruction {pc})"),
                source,
            })?;
        self.set_reg(usize::from(insn.a), v);
        Ok(())
    }

    /// A `while`: evaluates its `max` bound and pushes its frame. Returns the pc of its `wend`,
    /// where the condition is tested before every iteration.
    fn while_start(&mut self, pc: usize, insn: Insn, ps: &mut ProcState) -> R<usize> {
        let max = self.eval_int(insn.a).map_err(|source| InterpError::Eval {
            context: format!("the `max` bound of a `while` (instruction {pc})"),
            source,
        })?;
        if max < 0 {
            return Err(InterpError::NegativeLength {
                what: "the `max` bound of a `while` loop".into(),
                value: max,
            }
            .into());
        }
        ps.stack.push(Frame::While {
            pc: pc as u32,
            iters: 0,
            max,
            track: OrderTrack::new(self.count),
        });
        Ok(insn.b as usize)
    }

    /// A `send`: evaluates the token and queues it, with the process's last task, on its
    /// channel.
    #[inline]
    fn send(&mut self, insn: Insn, ps: &ProcState) -> R<()> {
        let v = self
            .eval(insn.b as u16)
            .map_err(|source| InterpError::Eval {
                context: format!(
                    "a `send` on channel `{}`",
                    self.prog.channel_name(u32::from(insn.a))
                ),
                source,
            })?;
        self.channels[usize::from(insn.a)]
            .tokens
            .push_back((v, ps.last_task));
        Ok(())
    }

    /// Starts a loop: evaluates its axis (reading its computed arrays through the sink) and
    /// pushes its frame (the first iteration is then decided by [`Interpreter::advance`]).
    /// `false`: the sink stopped the run at a read.
    fn loop_start(&mut self, pc: usize, ps: &mut ProcState, sink: &mut impl TaskSink) -> R<bool> {
        let prog = self.prog;
        let insn = prog.insns[pc];
        let desc = &prog.loops[usize::from(insn.a)];
        let axis = &prog.axes[usize::from(desc.axis)];
        if axis.arrays().any(|t| prog.computed_array(t)) {
            for (k, t) in axis.arrays().enumerate() {
                if prog.computed_array(t) && !self.read_array(pc, k, t, sink)? {
                    return Ok(false);
                }
            }
        }
        let ordered = insn.flags & 1 != 0;
        let now = self.count;
        let track = ordered.then(|| OrderTrack::new(now));
        let frame = match prog.axes[usize::from(desc.axis)] {
            AxisDesc::Dense { extent } => Frame::Dense {
                pc: pc as u32,
                next: 0,
                end: self.eval_rows(pc, extent, "extent")?,
                var: desc.var0,
                desc: insn.a,
                check: desc.hoist.is_some() || desc.count.is_some(),
                track,
            },
            AxisDesc::Ragged { rows, lengths } => self.ragged_frame(pc, rows, lengths, track)?,
            AxisDesc::Sparse {
                rows,
                indptr,
                indices,
            } => self.sparse_frame(pc, rows, indptr, indices)?,
        };
        ps.stack.push(frame);
        Ok(true)
    }

    /// Expression `e` of the axis of the loop at `pc` (its extent or row count), which must not
    /// be negative.
    fn eval_rows(&self, pc: usize, e: u16, what: &str) -> Result<i64, InterpError> {
        let v = self.eval_int(e).map_err(|source| InterpError::Eval {
            context: format!("the {what} of axis `{}`", self.axis_name(pc)),
            source,
        })?;
        if v < 0 {
            return Err(InterpError::NegativeLength {
                what: format!("the {what} of axis `{}`", self.axis_name(pc)),
                value: v,
            });
        }
        Ok(v)
    }

    /// The frame of a loop over a ragged axis: its row lengths checked.
    fn ragged_frame(
        &self,
        pc: usize,
        rows: u16,
        lengths: u16,
        track: Option<OrderTrack>,
    ) -> R<Frame> {
        let prog = self.prog;
        let rows = self.eval_rows(pc, rows, "row count")?;
        let data = self.axis_array(pc, 0, lengths);
        let name = || prog.tensor_name(u32::from(lengths));
        if (data.len() as u64) < rows as u64 {
            return Err(InterpError::ArrayTooShort {
                tensor: name(),
                needed: rows as u64,
                len: data.len(),
            }
            .into());
        }
        if let Some(r) = data[..rows as usize].iter().position(|&l| l < 0) {
            return Err(InterpError::NegativeLength {
                what: format!(
                    "row length `{}[{r}]` of axis `{}`",
                    name(),
                    self.axis_name(pc)
                ),
                value: data[r],
            }
            .into());
        }
        Ok(Frame::Ragged {
            pc: pc as u32,
            row: 0,
            rows,
            pos: 0,
            track,
        })
    }

    /// The frame of a `select` over a sparse axis: its `indptr` checked against its indices.
    fn sparse_frame(&self, pc: usize, rows: u16, indptr: u16, indices: u16) -> R<Frame> {
        let prog = self.prog;
        let rows = self.eval_rows(pc, rows, "row count")?;
        let ip = self.axis_array(pc, 0, indptr);
        let idx = self.axis_array(pc, 1, indices);
        let ip_name = prog.tensor_name(u32::from(indptr));
        let needed = rows as u64 + 1;
        if (ip.len() as u64) < needed {
            return Err(InterpError::ArrayTooShort {
                tensor: ip_name,
                needed,
                len: ip.len(),
            }
            .into());
        }
        let ip = &ip[..needed as usize];
        for (r, &v) in ip.iter().enumerate() {
            let bad = if v < 0 || v as u64 > idx.len() as u64 {
                Some(format!(
                    "entry {r} is {v}, outside 0..={} (the length of `{}`)",
                    idx.len(),
                    prog.tensor_name(u32::from(indices))
                ))
            } else if r > 0 && v < ip[r - 1] {
                Some(format!(
                    "entry {r} ({v}) is less than entry {} ({})",
                    r - 1,
                    ip[r - 1]
                ))
            } else {
                None
            };
            if let Some(message) = bad {
                return Err(InterpError::BadIndptr {
                    tensor: ip_name,
                    message,
                }
                .into());
            }
        }
        Ok(Frame::Sparse {
            pc: pc as u32,
            row: 0,
            rows: rows as usize,
            j: ip[0] as usize,
        })
    }

    #[inline]
    fn array(&self, t: u16) -> &'p [i64] {
        self.bound.arrays[usize::from(t)].as_deref().unwrap_or(&[])
    }

    /// Array `k` (`t`) of the axis of the loop at `lpc`: its bound contents, or what
    /// [`Interpreter::read_array`] read when the loop started.
    #[inline]
    fn axis_array(&self, lpc: usize, k: usize, t: u16) -> &[i64] {
        match self.bound.arrays[usize::from(t)].as_deref() {
            Some(a) => a,
            None => self
                .snaps
                .iter()
                .find(|(p, _)| *p as usize == lpc)
                .map_or(&[], |(_, a)| &a[k]),
        }
    }

    /// Reads computed array `k` (tensor `t`, whole) of the loop at `lpc` through the sink
    /// (`docs/SEMANTICS.md`, "Computed reads": a ragged or sparse axis reads its whole tensor
    /// when its loop starts). `false`: the sink stopped the run.
    #[cold]
    fn read_array(&mut self, lpc: usize, k: usize, t: u16, sink: &mut impl TaskSink) -> R<bool> {
        let prog = self.prog;
        let shape = &self.bound.shapes[usize::from(t)];
        let zeros = [0i64; crate::format::MAX_RANK];
        let read = DataRead {
            tensor: u32::from(t),
            start: &zeros[..shape.len()],
            size: shape,
            loc: prog.read_loc(lpc),
        };
        let at = match self.snaps.iter().position(|(p, _)| *p as usize == lpc) {
            Some(i) => i,
            None => {
                self.snaps.push((lpc as u32, Default::default()));
                self.snaps.len() - 1
            }
        };
        let out = &mut self.snaps[at].1[k];
        out.clear();
        if shape.contains(&0) {
            // Nothing to read (as the reference expander: no read is made).
            return Ok(true);
        }
        match sink.read(&read, out) {
            Ok(()) => {
                self.summary.computed_reads += 1;
                let want = shape.iter().product::<i64>();
                if out.len() as i64 != want {
                    return Err(InterpError::ComputedRead {
                        tensor: prog.tensor_name(u32::from(t)),
                        reason: format!("the sink gave {} element(s), not {want}", out.len()),
                    }
                    .into());
                }
                Ok(true)
            }
            Err(ReadRefused::Stopped) => Ok(false),
            Err(ReadRefused::Unsupported(reason)) => Err(InterpError::ComputedRead {
                tensor: prog.tensor_name(u32::from(t)),
                reason,
            }
            .into()),
        }
    }

    /// Moves the loop on top of the stack to its next iteration (skipping whole iterations
    /// where allowed), or leaves it. Returns the next pc.
    fn advance(&mut self, ps: &mut ProcState, sink: &mut impl TaskSink) -> R<usize> {
        let prog = self.prog;
        loop {
            let now = self.count;
            self.steps += 1;
            if self.steps > self.max_steps {
                return Err(InterpError::StepLimit {
                    limit: self.max_steps,
                }
                .into());
            }
            let Some(top) = ps.stack.last_mut() else {
                return Err(InterpError::Internal {
                    pc: ps.pc,
                    message: "`next` with no loop".into(),
                }
                .into());
            };
            match top {
                Frame::Dense {
                    pc,
                    next,
                    end,
                    var,
                    desc,
                    check,
                    track,
                } => {
                    if let Some(t) = track {
                        t.boundary(now, |e| sink.order(e), &mut self.armed);
                    }
                    let lpc = *pc as usize;
                    if *next < *end {
                        let (r, v) = (usize::from(*var), *next as u64);
                        *next += 1;
                        self.set_reg(r, v);
                        if *check && self.iteration(*desc, sink)? {
                            continue;
                        }
                        return Ok(lpc + 1);
                    }
                    if let Some(t) = track {
                        t.end(&mut self.armed);
                    }
                    ps.stack.pop();
                    return Ok(prog.insns[lpc].b as usize + 1);
                }
                Frame::Ragged { .. } => {
                    if let Some(pc) = self.next_ragged(ps, now, sink)? {
                        return Ok(pc);
                    }
                }
                Frame::Sparse { .. } => {
                    if let Some(pc) = self.next_sparse(ps, sink)? {
                        return Ok(pc);
                    }
                }
                Frame::Seq { .. } | Frame::Consume { .. } | Frame::While { .. } => {
                    return Err(InterpError::Internal {
                        pc: ps.pc,
                        message: "`next` does not close a loop".into(),
                    }
                    .into());
                }
            }
        }
    }

    /// [`Interpreter::advance`] on a ragged frame: the next position of the row, or the next
    /// row (a foreign row skipped whole where allowed). `Some(pc)`: where to go on; `None`: the
    /// iteration was skipped, advance again.
    #[inline]
    fn next_ragged(
        &mut self,
        ps: &mut ProcState,
        now: u32,
        sink: &mut impl TaskSink,
    ) -> R<Option<usize>> {
        let prog = self.prog;
        let Some(Frame::Ragged {
            pc,
            row,
            rows,
            pos,
            track,
        }) = ps.stack.last_mut()
        else {
            return Err(InterpError::Internal {
                pc: ps.pc,
                message: "lost a ragged frame".into(),
            }
            .into());
        };
        if let Some(t) = track {
            t.boundary(now, |e| sink.order(e), &mut self.armed);
        }
        let lpc = *pc as usize;
        let insn = prog.insns[lpc];
        let desc = &prog.loops[usize::from(insn.a)];
        let AxisDesc::Ragged { lengths, .. } = prog.axes[usize::from(desc.axis)] else {
            return Err(InterpError::Internal {
                pc: lpc,
                message: "a ragged frame over another axis".into(),
            }
            .into());
        };
        let lens = self.axis_array(lpc, 0, lengths);
        while *row < *rows && *pos >= lens[*row as usize] {
            *row += 1;
            *pos = 0;
        }
        if *row < *rows {
            let row_len = lens[*row as usize];
            let row_now = *row as u64;
            let first = *pos == 0;
            let untracked = track.is_none();
            self.set_reg(usize::from(desc.var0), row_now);
            if first && desc.row_skip && untracked {
                // The whole row at once: its tasks share the row's target.
                let len = row_len as u64;
                let r = *row;
                self.hoist = self.target(0, 0, desc.hoist.map(u32::from)).ok().flatten();
                if let (Some(me), Some(t), Some(c)) = (self.me, self.hoist, desc.count)
                    && self.owner(Some(t), 0) != me
                    && let Ok(n) = prog.eval(c, &self.regs, &[])
                    && (n as i64) >= 0
                    && let Some(total) = len.checked_mul(n)
                {
                    if let Some(Frame::Ragged { row, pos, .. }) = ps.stack.last_mut() {
                        *row = r + 1;
                        *pos = 0;
                    }
                    self.advance_count(total, sink)?;
                    return Ok(None);
                }
            }
            let Some(Frame::Ragged { pos, .. }) = ps.stack.last_mut() else {
                return Err(InterpError::Internal {
                    pc: lpc,
                    message: "lost a ragged frame".into(),
                }
                .into());
            };
            let pos_now = *pos as u64;
            *pos += 1;
            self.set_reg(usize::from(desc.var1), pos_now);
            if (desc.hoist.is_some() || desc.count.is_some()) && self.iteration(insn.a, sink)? {
                return Ok(None);
            }
            return Ok(Some(lpc + 1));
        }
        if let Some(t) = track {
            t.end(&mut self.armed);
        }
        ps.stack.pop();
        Ok(Some(insn.b as usize + 1))
    }

    /// [`Interpreter::advance`] on a sparse frame: the next entry of the row, or the next row
    /// (a foreign row skipped whole where allowed). `Some(pc)` / `None` as for
    /// [`Interpreter::next_ragged`].
    #[inline]
    fn next_sparse(&mut self, ps: &mut ProcState, sink: &mut impl TaskSink) -> R<Option<usize>> {
        let prog = self.prog;
        let Some(Frame::Sparse { pc, row, rows, j }) = ps.stack.last_mut() else {
            return Err(InterpError::Internal {
                pc: ps.pc,
                message: "lost a sparse frame".into(),
            }
            .into());
        };
        let lpc = *pc as usize;
        let insn = prog.insns[lpc];
        let desc = &prog.loops[usize::from(insn.a)];
        let AxisDesc::Sparse {
            indptr, indices, ..
        } = prog.axes[usize::from(desc.axis)]
        else {
            return Err(InterpError::Internal {
                pc: lpc,
                message: "a sparse frame over another axis".into(),
            }
            .into());
        };
        let ip = self.axis_array(lpc, 0, indptr);
        let idx = self.axis_array(lpc, 1, indices);
        // indptr was checked: rows + 1 non-decreasing entries within the indices.
        while *row < *rows && *j >= ip[*row + 1] as usize {
            *row += 1;
        }
        if *row < *rows {
            let (lo, hi) = (ip[*row], ip[*row + 1]);
            // `j` is below `hi`, which is within the indices.
            let e = idx[*j] as u64;
            let row_now = *row as u64;
            let first = *j == lo as usize;
            self.set_reg(usize::from(desc.var0), row_now);
            if first && desc.row_skip {
                let len = (hi - lo) as u64;
                let r = *row;
                self.hoist = self.target(0, 0, desc.hoist.map(u32::from)).ok().flatten();
                if let (Some(me), Some(t), Some(c)) = (self.me, self.hoist, desc.count)
                    && self.owner(Some(t), 0) != me
                    && let Ok(n) = prog.eval(c, &self.regs, &[])
                    && (n as i64) >= 0
                    && let Some(total) = len.checked_mul(n)
                {
                    if let Some(Frame::Sparse { row, j, .. }) = ps.stack.last_mut() {
                        *row = r + 1;
                        *j = hi as usize;
                    }
                    self.advance_count(total, sink)?;
                    return Ok(None);
                }
            }
            let Some(Frame::Sparse { j, .. }) = ps.stack.last_mut() else {
                return Err(InterpError::Internal {
                    pc: lpc,
                    message: "lost a sparse frame".into(),
                }
                .into());
            };
            *j += 1;
            self.set_reg(usize::from(desc.var1), e);
            if (desc.hoist.is_some() || desc.count.is_some()) && self.iteration(insn.a, sink)? {
                return Ok(None);
            }
            return Ok(Some(lpc + 1));
        }
        ps.stack.pop();
        Ok(Some(insn.b as usize + 1))
    }

    /// The `next` of a `consume`: takes the next token (`Some(body pc)`), leaves when the
    /// channel is closed and empty (`Some(after)`), or blocks (`None`).
    fn consume_next(&mut self, ps: &mut ProcState, pc: usize) -> R<Option<usize>> {
        self.steps += 1;
        if self.steps > self.max_steps {
            return Err(InterpError::StepLimit {
                limit: self.max_steps,
            }
            .into());
        }
        let Some(Frame::Consume {
            channel,
            var,
            pending,
        }) = ps.stack.last_mut()
        else {
            return Err(InterpError::Internal {
                pc,
                message: "lost a consume frame".into(),
            }
            .into());
        };
        if pending.take().is_some() {
            // The previous iteration generated no task: its edge lapses.
            ps.pending -= 1;
        }
        let opener = self.prog.insns[pc].b as usize;
        let ch = &mut self.channels[usize::from(*channel)];
        if let Some((v, after)) = ch.tokens.pop_front() {
            let var = usize::from(*var);
            if let Some(t) = after {
                *pending = Some(t);
                ps.pending += 1;
            }
            self.set_reg(var, v);
            Ok(Some(opener + 1))
        } else if ch.closed {
            ps.stack.pop();
            Ok(Some(pc + 1))
        } else {
            Ok(None)
        }
    }

    /// The `wend` of the `while` on top of the stack: another iteration (the body's first pc)
    /// or the loop's end (the next pc).
    fn end_while(&mut self, pc: usize, ps: &mut ProcState, sink: &mut impl TaskSink) -> R<usize> {
        self.steps += 1;
        if self.steps > self.max_steps {
            return Err(InterpError::StepLimit {
                limit: self.max_steps,
            }
            .into());
        }
        let cond = self.prog.insns[pc].a;
        let holds = self.eval(cond).map_err(|source| InterpError::Eval {
            context: format!("a `while` condition (instruction {pc})"),
            source,
        })? != 0;
        let Some(Frame::While {
            pc: wpc,
            iters,
            max,
            track,
        }) = ps.stack.last_mut()
        else {
            return Err(InterpError::Internal {
                pc,
                message: "`wend` does not close a `while`".into(),
            }
            .into());
        };
        track.boundary(self.count, |e| sink.order(e), &mut self.armed);
        if holds && *iters < *max {
            *iters += 1;
            return Ok(*wpc as usize + 1);
        }
        if holds {
            self.summary.loops_at_max += 1;
        }
        track.end(&mut self.armed);
        ps.stack.pop();
        Ok(pc + 1)
    }

    /// `break if` held: leaves the innermost `while`, closing the order tracking of every
    /// construct it leaves as if each had ended here (the reference expander's rule). Returns
    /// the pc after the `while`'s `wend`.
    fn break_loop(&mut self, ps: &mut ProcState, sink: &mut impl TaskSink) -> R<usize> {
        let now = self.count;
        while let Some(f) = ps.stack.pop() {
            let (track, wpc) = match f {
                Frame::Dense { track, .. } | Frame::Ragged { track, .. } => (track, None),
                Frame::Seq { track } => (Some(track), None),
                Frame::While { track, pc, .. } => (Some(track), Some(pc)),
                Frame::Sparse { .. } => (None, None),
                Frame::Consume { .. } => break,
            };
            if let Some(mut t) = track {
                t.boundary(now, |e| sink.order(e), &mut self.armed);
                t.end(&mut self.armed);
            }
            if let Some(w) = wpc {
                return Ok(self.prog.insns[w as usize].b as usize + 1);
            }
        }
        Err(InterpError::Internal {
            pc: ps.pc,
            message: "`break` outside a `while`".into(),
        }
        .into())
    }

    /// The indices of the `load` / `read` at `pc` (checked against the tensor's shape) into
    /// `self.args`; returns the row-major flat index.
    fn element_index(&mut self, pc: usize) -> R<u64> {
        let prog = self.prog;
        let ld = &prog.loads[prog.aux[pc] as usize];
        let t = usize::from(ld.tensor);
        let shape = &self.bound.shapes[t];
        let mut flat: u64 = 0;
        self.index.clear();
        for (d, (&e, &extent)) in ld.index.iter().zip(shape).enumerate() {
            let i = self.eval_int(e).map_err(|source| InterpError::Eval {
                context: format!(
                    "index {d} of a `{}` from `{}`",
                    prog.insns[pc].op.mnemonic(),
                    prog.tensor_name(t as u32)
                ),
                source,
            })?;
            if i < 0 || i >= extent {
                return Err(InterpError::LoadOutOfBounds {
                    tensor: prog.tensor_name(t as u32),
                    dim: d,
                    index: i,
                    extent,
                }
                .into());
            }
            self.index.push(i);
            flat = flat.saturating_mul(extent as u64).saturating_add(i as u64);
        }
        Ok(flat)
    }

    /// Element `elem` of the tensor of the `load` / `read` at `pc` into its register; the next pc.
    fn store_element(&mut self, pc: usize, elem: i64) -> R<usize> {
        let prog = self.prog;
        let ld = &prog.loads[prog.aux[pc] as usize];
        let v = match prog.reg_types[usize::from(ld.reg)] {
            ScalarType::I64 => elem as u64,
            ScalarType::U64 if elem >= 0 => elem as u64,
            ScalarType::U64 | ScalarType::Bool => {
                return Err(InterpError::WrongType {
                    context: format!(
                        "a `{}` from `{}` (element {elem})",
                        prog.insns[pc].op.mnemonic(),
                        prog.tensor_name(u32::from(ld.tensor))
                    ),
                    expected: prog.reg_types[usize::from(ld.reg)].to_string(),
                    found: "a negative i64".into(),
                }
                .into());
            }
        };
        self.set_reg(usize::from(ld.reg), v);
        Ok(ld.next_pc as usize)
    }

    /// `e`, raised running instruction `pc`, placed at its statement (the statement-location
    /// table) — unless it has a place already, concerns no one statement (a deadlock, a
    /// configuration, a limit), or the bytecode stores no locations.
    #[cold]
    fn at_stmt(&self, pc: usize, e: Box<InterpError>) -> Box<InterpError> {
        if matches!(
            *e,
            InterpError::AtRead { .. }
                | InterpError::At { .. }
                | InterpError::Deadlock { .. }
                | InterpError::BadConfig { .. }
                | InterpError::BindingMismatch
                | InterpError::StepLimit { .. }
                | InterpError::TooManyTasks
                | InterpError::Internal { .. }
        ) {
            return e;
        }
        let loc = self.prog.stmt_loc(pc);
        if !loc.is_known() {
            return e;
        }
        Box::new(InterpError::At { error: e, loc })
    }

    /// `e`, raised by the computed read at `pc`, at the read's location when the bytecode
    /// stores one (the error path only).
    #[cold]
    fn at_read(&self, pc: usize, e: Box<InterpError>) -> Box<InterpError> {
        let loc = self.prog.read_loc(pc);
        if !loc.is_known() {
            return e;
        }
        Box::new(InterpError::AtRead { error: e, loc })
    }

    /// A computed read: the element comes from the sink (`None`: the sink stopped the run).
    fn read(&mut self, pc: usize, sink: &mut impl TaskSink) -> R<Option<usize>> {
        self.element_index(pc)?;
        let prog = self.prog;
        let t = prog.loads[prog.aux[pc] as usize].tensor;
        let ones = [1i64; crate::format::MAX_RANK];
        let read = DataRead {
            tensor: u32::from(t),
            start: &self.index,
            size: &ones[..self.index.len()],
            loc: prog.read_loc(pc),
        };
        let mut out = std::mem::take(&mut self.read_buf);
        out.clear();
        let r = sink.read(&read, &mut out);
        let elem = out.first().copied();
        self.read_buf = out;
        match r {
            Ok(()) => {
                self.summary.computed_reads += 1;
                let Some(elem) = elem else {
                    return Err(InterpError::ComputedRead {
                        tensor: prog.tensor_name(u32::from(t)),
                        reason: "the sink gave no element".into(),
                    }
                    .into());
                };
                self.store_element(pc, elem).map(Some)
            }
            Err(ReadRefused::Stopped) => Ok(None),
            Err(ReadRefused::Unsupported(reason)) => Err(InterpError::ComputedRead {
                tensor: prog.tensor_name(u32::from(t)),
                reason,
            }
            .into()),
        }
    }

    fn load(&mut self, pc: usize) -> R<usize> {
        let prog = self.prog;
        let flat = self.element_index(pc)?;
        let ld = &prog.loads[prog.aux[pc] as usize];
        let t = usize::from(ld.tensor);
        let data = self.array(ld.tensor);
        let Some(&elem) = data.get(flat as usize) else {
            return Err(InterpError::ArrayTooShort {
                tensor: prog.tensor_name(t as u32),
                needed: flat.saturating_add(1),
                len: data.len(),
            }
            .into());
        };
        self.store_element(pc, elem)
    }

    /// A task statement: decides its owner, fills and emits it when it is ours, keeps the count
    /// and the order edges. Returns the next pc and whether to go on.
    #[inline]
    fn task(
        &mut self,
        ti: usize,
        ps: &mut ProcState,
        sink: &mut impl TaskSink,
    ) -> R<(usize, bool)> {
        let prog: &'p Program = self.prog;
        let td: &'p TaskDesc = &prog.tasks[ti];
        let index = self.count;
        let target = match (td.hoisted, self.hoist) {
            (true, Some(t)) => Some(t),
            _ => self
                .target(0, index, td.keyset)
                .map_err(|source| InterpError::Eval {
                    context: format!(
                        "the dispatch key of task #{index} (`{}`)",
                        prog.kernel_name(u32::from(td.kernel))
                    ),
                    source,
                })?,
        };
        let mine = match self.me {
            None => true,
            Some(me) => self.owner(target, index) == me,
        };
        let mut fill = None;
        if !mine {
            self.summary.filtered += 1;
        } else if let (true, Some(pool)) = (td.simple, td.fixed_pool) {
            fill = Some(self.fill_simple(td, ti, index, pool)?);
        } else {
            fill = Some(self.fill(td, ti, index)?);
        }
        // (Not `ok_or`: building the error eagerly would cost a drop per task.)
        let Some(next) = index.checked_add(1) else {
            return Err(InterpError::TooManyTasks.into());
        };
        self.count = next;
        if !self.armed.is_empty() {
            for before in self.armed.drain(..) {
                sink.order_begin(before, index);
            }
        }
        let csp = prog.csp;
        if csp {
            self.csp_edges_begin(ps, index, sink);
        }
        if let Some(m) = fill {
            self.summary.tasks += 1;
            let boxed = sink.wants_boxes() && self.io_ok[ti];
            if boxed && m.general {
                self.fill_boxes(td);
            }
            let t = Task {
                index,
                kernel: m.kernel,
                declared: u32::from(td.kernel),
                pool: m.pool,
                target,
                stream: m.stream,
                priority: m.priority,
                cost: m.cost,
                params: &self.params[..td.scalars.len()],
                desc: td,
                region_outs: &prog.region_outs,
                coords: &self.coords,
                io: boxed
                    .then(|| &self.ios[td.region_outs.start as usize..td.region_outs.end as usize]),
            };
            if sink.task(&t).is_break() {
                return Ok((td.next_pc as usize, false));
            }
        }
        if csp && !self.csp_edges.is_empty() {
            for before in self.csp_edges.drain(..) {
                sink.order(OrderEdge {
                    before,
                    after: index..index + 1,
                });
            }
        }
        Ok((td.next_pc as usize, true))
    }

    /// Fills an own task with no tiers, no pool routing and no stream key: only the arguments
    /// to evaluate.
    #[inline(always)]
    fn fill_simple(&mut self, td: &'p TaskDesc, ti: usize, index: u32, pool: ExecPool) -> R<Meta> {
        let general = !(td.linear && self.fill_linear(td, ti));
        if general {
            self.fill_general(td, index)?;
        }
        let streams = self.prog.sched.streams;
        let stream = if streams == 1 {
            0
        } else {
            (u64::from(index) % streams) as u32
        };
        Ok(Meta {
            kernel: u32::from(td.kernel),
            pool,
            stream,
            priority: 0,
            cost: None,
            general,
        })
    }

    /// A task of a process: its edges from the process's previous task and from the tokens
    /// its enclosing `consume`s took, begun in the sink (ended after the task, in
    /// `csp_edges`).
    #[inline(always)]
    fn csp_edges_begin(&mut self, ps: &mut ProcState, index: u32, sink: &mut impl TaskSink) {
        self.csp_edges.clear();
        if let Some(last) = ps.last_task {
            self.csp_edges.push(last..last + 1);
        }
        ps.last_task = Some(index);
        if ps.pending > 0 {
            for f in &mut ps.stack {
                if let Frame::Consume { pending, .. } = f
                    && let Some(p) = pending.take()
                {
                    self.csp_edges.push(p..p + 1);
                    ps.pending -= 1;
                }
            }
        }
        for before in self.csp_edges.iter().rev() {
            sink.order_begin(before.clone(), index);
        }
    }

    /// Evaluates an own task's arguments, tier, pool and stream into the buffers.
    #[inline]
    fn fill(&mut self, td: &'p TaskDesc, ti: usize, index: u32) -> R<Meta> {
        let prog = self.prog;
        let general = !(td.linear && self.fill_linear(td, ti));
        if general {
            self.fill_general(td, index)?;
        }
        let ctx = |what: &str, source: EvalError| InterpError::Eval {
            context: format!(
                "{what} of task #{index} (`{}`)",
                prog.kernel_name(u32::from(td.kernel))
            ),
            source,
        };
        let kd = &prog.kernels[usize::from(td.kernel)];
        let kernel = match &kd.tiers {
            Some((cases, default)) => {
                let n = td.scalars.len();
                let mut k = *default;
                for &(cond, variant) in cases {
                    let c = prog
                        .eval(cond, &self.regs, &self.args[..n])
                        .map_err(|s| ctx("a tier condition", s))?;
                    if c != 0 {
                        k = variant;
                        break;
                    }
                }
                k
            }
            None => td.kernel,
        };
        let keys = td.keyset;
        let key = |slot: u8| -> u16 {
            match keys {
                Some(k) => prog.keysets[k as usize * prog.keyset_len + usize::from(slot)],
                None => NONE16,
            }
        };
        let pool = match (td.fixed_pool, &prog.sched.pools) {
            (Some(p), _) => p,
            (None, Some((metric, levels, otherwise))) => {
                let m = self
                    .metric(key(*metric))
                    .map_err(|s| ctx("the `dispatch_threshold` metric", s))?;
                levels
                    .iter()
                    .find(|(b, _)| m < i128::from(*b))
                    .map_or(*otherwise, |(_, p)| *p)
            }
            (None, None) => prog.kernels[usize::from(kernel)].pool,
        };
        let stream = match prog.sched.stream_by {
            Some(slot) => self
                .modulo(key(slot), prog.sched.streams)
                .map_err(|s| ctx("the `stream_by` key", s))?,
            None if prog.sched.streams == 1 => 0,
            None => (u64::from(index) % prog.sched.streams) as u32,
        };
        let int = |slot: u8, what: &str| -> R<i64> {
            let m = self.metric(key(slot)).map_err(|s| ctx(what, s))?;
            i64::try_from(m).map_err(|_| {
                ctx(
                    what,
                    EvalError::Overflow {
                        op: "as i64",
                        lhs: Value::U64(m as u64),
                        rhs: None,
                    },
                )
                .into()
            })
        };
        let priority = match prog.sched.priority {
            Some(slot) => int(slot, "the `priority` key")?,
            None => 0,
        };
        let cost = match prog.sched.cost {
            Some(slot) => Some(int(slot, "the `cycles` cost")?.max(0) as u64),
            None => None,
        };
        Ok(Meta {
            kernel: u32::from(kernel),
            pool,
            stream,
            priority,
            cost,
            general,
        })
    }

    /// The fast path: every argument and bound is linear. `false` when something overflows or
    /// is out of bounds (the general path then reports exactly what).
    #[inline(always)]
    fn fill_linear(&mut self, td: &TaskDesc, ti: usize) -> bool {
        let prog = self.prog;
        let regs = &self.regs[..];
        if td.scalar_lins.start != td.scalar_lins.end {
            let kd = &prog.kernels[usize::from(td.kernel)];
            let lins = &prog.lins[td.scalar_lins.start as usize..td.scalar_lins.end as usize];
            for (j, (l, &ty)) in lins.iter().zip(&kd.scalar_types).enumerate() {
                let Some(v) = l.eval(regs) else {
                    return false;
                };
                self.args[j] = v as u64;
                self.params[j] = value(v as u64, ty);
            }
        }
        // Start-only dimensions are kept up to date as their registers are written.
        if self.bad[ti] != 0 {
            return false;
        }
        let general = &self.var_ranges[ti];
        if general.start == general.end {
            return true;
        }
        for p in &self.var_dims[general.start as usize..general.end as usize] {
            let (Some(s), Some(z)) = (p.start.eval(regs), p.size.eval(regs)) else {
                return false;
            };
            if s < 0 || z < 1 || s.checked_add(z).is_none_or(|e| e > p.extent) {
                return false;
            }
            self.coords[p.at as usize] = s;
            self.coords[p.at_size as usize] = z;
            if self.boxes {
                put_box(&mut self.ios, p.box_start, s);
                put_box(&mut self.ios, p.box_size, z);
            }
        }
        true
    }

    /// The general path: evaluates every argument and bound, reporting failures exactly.
    #[inline(never)]
    fn fill_general(&mut self, td: &TaskDesc, index: u32) -> R<()> {
        let prog = self.prog;
        let kd = &prog.kernels[usize::from(td.kernel)];
        let ctx = |what: String, source: EvalError| InterpError::Eval {
            context: format!(
                "{what} of task #{index} (`{}`)",
                prog.kernel_name(u32::from(td.kernel))
            ),
            source,
        };
        for (j, (&e, &ty)) in prog.task_scalars[td.scalars.start as usize..td.scalars.end as usize]
            .iter()
            .zip(&kd.scalar_types)
            .enumerate()
        {
            let v = self
                .eval(e)
                .map_err(|s| ctx(format!("scalar argument {j}"), s))?;
            self.params[j] = value(v, ty);
            self.args[j] = v;
        }
        let mut off = td.coord_base as usize;
        for (ri, &r) in prog.task_regions[td.regions.start as usize..td.regions.end as usize]
            .iter()
            .enumerate()
        {
            let rd = &prog.regions[usize::from(r)];
            let shape = &self.bound.shapes[usize::from(rd.tensor)];
            let dims = &prog.dims[rd.dims.start as usize..rd.dims.end as usize];
            for (d, (&(s, z), &extent)) in dims.iter().zip(shape).enumerate() {
                let start = self.eval_int(s).map_err(|e| {
                    ctx(
                        format!("the start of dimension {d} of region argument {ri}"),
                        e,
                    )
                })?;
                let size = if z == NONE16 {
                    1
                } else {
                    self.eval_int(z).map_err(|e| {
                        ctx(
                            format!("the size of dimension {d} of region argument {ri}"),
                            e,
                        )
                    })?
                };
                if start < 0 || size < 1 || start.checked_add(size).is_none_or(|e| e > extent) {
                    return Err(InterpError::RegionOutOfBounds {
                        task: index,
                        kernel: prog.kernel_name(u32::from(td.kernel)),
                        region: ri,
                        tensor: prog.tensor_name(u32::from(rd.tensor)),
                        dim: d,
                        start,
                        size,
                        extent,
                    }
                    .into());
                }
                self.coords[off + d] = start;
                self.coords[off + d + td.n_coords as usize] = size;
            }
            off += dims.len();
        }
        Ok(())
    }
}

/// Per coordinate of the interpreter's buffer (every task statement's starts, then its sizes):
/// its place in the boxes ([`box_slot`]).
fn box_slots(prog: &Program) -> Vec<u32> {
    let mut at = vec![NO_BOX; prog.total_coords];
    for td in &prog.tasks {
        let (base, n) = (td.coord_base as usize, td.n_coords as usize);
        let outs = td.region_outs.start as usize..td.region_outs.end as usize;
        for (io, ro) in outs.clone().zip(&prog.region_outs[outs]) {
            for d in 0..ro.rank as usize {
                let c = base + ro.off as usize + d;
                if let Some(x) = at.get_mut(c) {
                    *x = box_slot(io, false, d);
                }
                if let Some(x) = at.get_mut(c + n) {
                    *x = box_slot(io, true, d);
                }
            }
        }
    }
    at
}

/// Every task statement's regions as boxes with tensor, rank and access set (start 0, size 1
/// until coordinates are copied in), and per statement whether every one fits a [`Region`]:
/// rank at most [`MAX_RANK`] and every extent of its tensor below 2^32, so that a region within
/// its tensor's bounds (what the interpreter checks before it emits a task) is a valid box.
fn region_boxes(prog: &Program, bound: &Bound) -> (Vec<TaskIo>, Vec<bool>) {
    let fits = |ro: &crate::sink::RegionOut| {
        ro.rank as usize <= MAX_RANK
            && bound.shapes.get(ro.tensor as usize).is_some_and(|s| {
                s.len() == ro.rank as usize && s.iter().all(|&e| e <= i64::from(u32::MAX))
            })
    };
    let ios = prog
        .region_outs
        .iter()
        .map(|ro| {
            let region = Region {
                tensor: ro.tensor,
                rank: ro.rank.min(MAX_RANK as u32),
                start: [0; MAX_RANK],
                size: [1; MAX_RANK],
            };
            TaskIo::new(region, crate::sink::access_of(ro.access))
        })
        .collect();
    let ok = prog
        .tasks
        .iter()
        .map(|td| {
            prog.region_outs[td.region_outs.start as usize..td.region_outs.end as usize]
                .iter()
                .all(fits)
        })
        .collect();
    (ios, ok)
}
