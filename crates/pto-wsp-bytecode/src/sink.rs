//! What an interpreter hands to a runtime: one [`Task`] view per generated task, and the
//! structural order edges, through a [`TaskSink`].
//!
//! Why: a runtime on a worker thread consumes tasks as they are generated; allocating per task
//! would cost more than generating it. A [`Task`] borrows the interpreter's reused buffers, so
//! producing one allocates nothing; a sink that must keep a task copies what it needs (or calls
//! [`Task::to_expanded`]).
//!
//! Promise: everything a task carries — global index, kernel (after tiers) and declared kernel,
//! scalar params, regions with access modes, pool, dispatch target, stream — is exactly what the
//! reference expander reports for the same index.

use crate::program::TaskDesc;
use pto_wsp_ir::task_io::TaskIo;
use pto_wsp_ir::{
    Access, DataRead, ExecPool, ExpandedRegion, ExpandedTask, OrderEdge, ReadRefused, Value,
};
use std::ops::{ControlFlow, Range};

/// One region argument in a task's buffers.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RegionOut {
    pub tensor: u32,
    pub access: u8,
    pub off: u32,
    pub rank: u32,
}

/// A region argument of a [`Task`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionRef<'a> {
    /// Index of the tensor (the module's tensor index).
    pub tensor: u32,
    /// How the kernel uses it.
    pub access: Access,
    /// First index per dimension.
    pub start: &'a [i64],
    /// Size per dimension.
    pub size: &'a [i64],
}

/// A generated task; valid for the duration of [`TaskSink::task`].
#[derive(Clone, Copy, Debug)]
pub struct Task<'a> {
    /// Global index: the task's position in the whole program's generation order (the same on
    /// every executor and in the reference expander).
    pub index: u32,
    /// Kernel that runs (after choosing a tier), as a module kernel index.
    pub kernel: u32,
    /// Kernel the task statement named.
    pub declared: u32,
    /// Pool the task runs in.
    pub pool: ExecPool,
    /// Dispatch target; `None` under `work_steal`.
    pub target: Option<u32>,
    /// Stream.
    pub stream: u32,
    /// Ready-queue priority key under `ready priority(EXPR)`; 0 otherwise.
    pub priority: i64,
    /// Cycle cost under `trace cycles(EXPR)` (negative values count as 0); `None` otherwise.
    pub cost: Option<u64>,
    /// Scalar arguments in parameter order.
    pub params: &'a [Value],
    /// The task statement: where its regions are in `region_outs` and its coordinates in
    /// `coords`.
    pub(crate) desc: &'a TaskDesc,
    /// The program's regions as the sink sees them, every statement's.
    pub(crate) region_outs: &'a [RegionOut],
    /// The interpreter's coordinates: from the statement's `coord_base`, the task's region
    /// starts, then its region sizes (`n_coords` each). This and `region_outs` are whole, so
    /// that building a task slices nothing (the accessors, which few sinks call, offset into
    /// them).
    pub(crate) coords: &'a [i64],
    /// The regions as boxes (see [`Task::io`]).
    pub(crate) io: Option<&'a [TaskIo]>,
}

pub(crate) fn access_of(code: u8) -> Access {
    match code {
        0 => Access::In,
        1 => Access::Out,
        _ => Access::InOut,
    }
}

pub(crate) fn access_code(a: Access) -> u8 {
    match a {
        Access::In => 0,
        Access::Out => 1,
        Access::InOut => 2,
    }
}

impl<'a> Task<'a> {
    /// Number of region arguments.
    pub fn region_count(&self) -> usize {
        self.outs().len()
    }

    /// This task's entries of `region_outs`.
    fn outs(&self) -> &'a [RegionOut] {
        let r = &self.desc.region_outs;
        self.region_outs
            .get(r.start as usize..r.end as usize)
            .unwrap_or(&[])
    }

    /// Region argument `i` (in parameter order among tiles).
    pub fn region(&self, i: usize) -> Option<RegionRef<'a>> {
        let r = self.outs().get(i)?;
        let (base, n) = (self.desc.coord_base as usize, self.desc.n_coords as usize);
        let rank = r.rank as usize;
        let off = base + r.off as usize;
        Some(RegionRef {
            tensor: r.tensor,
            access: access_of(r.access),
            start: self.coords.get(off..off + rank)?,
            size: self.coords.get(n + off..n + off + rank)?,
        })
    }

    /// The region arguments as checked boxes in the runtime's layout: the same tensors, boxes
    /// and accesses as [`Task::regions`], in order, each one a box [`pto_wsp_ir::task_io::Region::new`]
    /// accepts — when every region of the statement fits one (rank at most
    /// [`pto_wsp_ir::task_io::MAX_RANK`], every extent of its tensor below 2^32) and the sink
    /// asked for them ([`TaskSink::wants_boxes`]); `None` otherwise. A runtime takes them as
    /// they are, with no conversion per region.
    pub fn io(&self) -> Option<&'a [TaskIo]> {
        self.io
    }

    /// The region arguments in order.
    pub fn regions(&self) -> impl ExactSizeIterator<Item = RegionRef<'a>> + 'a {
        let (regions, coords, n) = (self.outs(), self.coords, self.desc.n_coords as usize);
        let base = self.desc.coord_base as usize;
        regions.iter().map(move |r| {
            let (off, rank) = (base + r.off as usize, r.rank as usize);
            RegionRef {
                tensor: r.tensor,
                access: access_of(r.access),
                start: coords.get(off..off + rank).unwrap_or(&[]),
                size: coords.get(n + off..n + off + rank).unwrap_or(&[]),
            }
        })
    }

    /// An owned copy in the reference expander's form (allocates; for tests and tools).
    pub fn to_expanded(&self) -> ExpandedTask {
        ExpandedTask {
            kernel: self.kernel,
            declared: self.declared,
            params: self.params.to_vec(),
            regions: self
                .regions()
                .map(|r| ExpandedRegion {
                    tensor: r.tensor,
                    access: r.access,
                    start: r.start.to_vec(),
                    size: r.size.to_vec(),
                })
                .collect(),
            pool: self.pool,
            target: self.target,
            stream: self.stream,
            priority: self.priority,
            cost: self.cost,
            loc: pto_wsp_ir::Loc::NONE,
        }
    }
}

/// Receives one executor's tasks and order edges as they are generated.
///
/// # Order edges
///
/// Edges are the reference expander's (`for_each`, `sequential`, CSP), as ranges of **global**
/// task indices: "every task of `before` precedes every task of `after`", whichever executors
/// own them. An executor reports every edge except those lying entirely inside subtrees it
/// skipped (which hold none of its tasks), so it reports every edge that has one of its own
/// tasks on either side, and the union over executors is exactly the expander's edge set.
/// Announcements follow [`pto_wsp_ir::ExpandSink`]'s contract restricted to the executor:
/// `order_begin(before, s)` comes before the executor's first task at or after index `s`, the
/// matching `order` after its last task of the `after` range, so every own task passed between
/// them is in `after` and every own task of `after` is passed between them. A runtime makes each
/// own task wait for the completion of every `before` range announced and not yet closed.
pub trait TaskSink {
    /// One of the executor's tasks. [`ControlFlow::Break`] stops the interpretation.
    fn task(&mut self, task: &Task<'_>) -> ControlFlow<()>;

    /// Whether this sink reads [`Task::io`]: the interpreter fills a task's boxes only for a
    /// sink that does (the copy of every coordinate costs each task), and hands `None` to the
    /// others. The default: no.
    #[inline]
    fn wants_boxes(&self) -> bool {
        false
    }

    /// An order edge whose later range starts at global index `after_start` (see the trait
    /// docs). The default ignores it.
    fn order_begin(&mut self, before: Range<u32>, after_start: u32) {
        let _ = (before, after_start);
    }

    /// An order edge, once both ranges are complete. The default ignores it.
    fn order(&mut self, edge: OrderEdge) {
        let _ = edge;
    }

    /// A computed read (`read`: an element of a tensor tasks of the run write; or a `loop`
    /// over a ragged / sparse axis whose arrays tasks write: the whole tensor,
    /// `docs/SEMANTICS.md`, "Computed reads"): push the box's elements (row-major) onto `out`
    /// once every task generated before it that writes an overlapping box has completed. Every
    /// task the executor generated before the read has been passed to [`TaskSink::task`] (an
    /// executor interpreting only its own tasks never sees the others': serving reads needs
    /// every task, [`crate::ExecutorConfig::all`]). The default refuses: this sink runs no task.
    fn read(&mut self, read: &DataRead<'_>, out: &mut Vec<i64>) -> Result<(), ReadRefused> {
        let _ = (read, out);
        Err(ReadRefused::Unsupported(
            "this consumer of the bytecode runs no task, so it cannot read computed data".into(),
        ))
    }
}

impl<F: FnMut(&Task<'_>)> TaskSink for F {
    fn task(&mut self, task: &Task<'_>) -> ControlFlow<()> {
        self(task);
        ControlFlow::Continue(())
    }
}
