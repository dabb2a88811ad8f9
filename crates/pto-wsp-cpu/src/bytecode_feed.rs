//! The host run's generator without the reference expander: the bytecode interpreter, run as
//! one generator of every task, feeding a [`GraphBuilder`] through the same [`Feeder`] as the
//! expander.
//!
//! Why: the reference expander materialises every task (owned vectors of params and regions)
//! and re-evaluates its expressions per task; the interpreter hands out a borrowed view of
//! reused buffers, hoists what does not change and evaluates region coordinates only when the
//! registers they read change. The expander stays the oracle every back end is checked against,
//! off the hot path.
//!
//! Promises:
//! - The builder receives exactly what [`pto_wsp_graph::feed::feed`] gives it from the expander:
//!   the same user tasks (kernel, pool, stream, target, params, regions) in the same order, the
//!   same barriers and the same explicit dependencies, so the same edges (the interpreter's
//!   [`TaskSink`] contract, with [`ExecutorConfig::all`], is the expander's).
//! - Modules the bytecode cannot express ([`pto_wsp_bytecode::supports`]: per-row ragged
//!   lengths, multi-producer channels) are not this module's: a runtime keeps the expander for
//!   them.
//! - Computed reads (`read`, ragged / sparse axes over computed arrays) are served exactly as
//!   for the expander: through the feeder to [`FeedHooks::read`], which waits on the tasks
//!   already submitted that write the read box (`docs/SEMANTICS.md`, "Computed reads").
//! - The first failure (builder, hook, interpreter) stops generation; see [`BytecodeFeedError`].

use std::ops::{ControlFlow, Range};

use pto_wsp_bytecode::{Bound, ExecutorConfig, InterpError, Interpreter, Program, Task, TaskSink};
use pto_wsp_graph::builder::{BuildError, EdgeSink, GraphBuilder, ParamsOut};
use pto_wsp_graph::feed::{FeedError, FeedHooks, FeedSummary, FeedTask, Feeder, RegionFn};
use pto_wsp_graph::tensor_map::TensorMap;
use pto_wsp_graph::types::{ExecDomain, ExecPool, TaskIo};
use pto_wsp_ir::{DataRead, ExpandSink, ExpandSummary, OrderEdge, ReadRefused};

/// Why a bytecode feed failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BytecodeFeedError<E> {
    /// The feed failed (builder or hook); what stopped the interpreter.
    #[error(transparent)]
    Feed(FeedError<E>),
    /// The interpreter failed (an error of the program or the bindings).
    #[error(transparent)]
    Interp(InterpError),
}

/// A [`Task`] as the feed reads it.
struct View<'t, 'a>(&'t Task<'a>);

impl FeedTask for View<'_, '_> {
    fn kernel(&self) -> u32 {
        self.0.kernel
    }
    fn pool(&self) -> ExecPool {
        self.0.pool
    }
    fn stream(&self) -> u32 {
        self.0.stream
    }
    fn target(&self) -> Option<u32> {
        self.0.target
    }
    fn priority(&self) -> i64 {
        self.0.priority
    }
    fn cost(&self) -> Option<u64> {
        self.0.cost
    }
    fn for_each_param(&self, f: &mut dyn FnMut(u64)) {
        for p in self.0.params {
            f(p.to_bits());
        }
    }
    #[inline]
    fn params_into(&self, out: &mut ParamsOut<'_>) {
        for p in self.0.params {
            out.push(p.to_bits());
        }
    }
    fn try_for_each_region(&self, f: &mut RegionFn<'_>) -> Result<(), BuildError> {
        for r in self.0.regions() {
            f(r.access, r.tensor, r.start, r.size)?;
        }
        Ok(())
    }
    fn io(&self) -> Option<&[TaskIo]> {
        self.0.io()
    }
}

/// The interpreter's sink: every call forwarded to the feeder.
struct Sink<'f, 'b, M: TensorMap, S: EdgeSink, H: FeedHooks>(&'f mut Feeder<'b, M, S, H>);

impl<M: TensorMap, S: EdgeSink, H: FeedHooks> TaskSink for Sink<'_, '_, M, S, H> {
    fn wants_boxes(&self) -> bool {
        true
    }
    fn task(&mut self, task: &Task<'_>) -> ControlFlow<()> {
        self.0.push_task(task.index, &View(task))
    }
    fn order_begin(&mut self, before: Range<u32>, after_start: u32) {
        self.0.open_edge(before, after_start);
    }
    fn order(&mut self, edge: OrderEdge) {
        self.0.close_edge(&edge);
    }
    fn read(&mut self, read: &DataRead<'_>, out: &mut Vec<i64>) -> Result<(), ReadRefused> {
        ExpandSink::read(self.0, read, out)
    }
}

/// Interprets `program` under `bound` (every task, as one generator) straight into `builder`,
/// calling `hooks` around each submission; tasks run in `domain`. The summary's `expand` holds
/// the interpreter's task count, executors and streams.
pub fn feed_bytecode<M: TensorMap, S: EdgeSink, H: FeedHooks>(
    program: &Program,
    bound: &Bound,
    builder: &mut GraphBuilder<M, S>,
    hooks: &mut H,
    domain: ExecDomain,
) -> Result<FeedSummary, BytecodeFeedError<H::Error>> {
    let mut interp = Interpreter::new(program, bound, ExecutorConfig::all())
        .map_err(BytecodeFeedError::Interp)?;
    let mut feeder = Feeder::new(builder, hooks, domain);
    let run = interp.run(&mut Sink(&mut feeder));
    let summary = match run {
        // The feeder's own error is what stopped the interpreter: it comes first.
        Err(e) if feeder.error().is_none() => return Err(BytecodeFeedError::Interp(e)),
        Err(_) => ExpandSummary {
            tasks: 0,
            executors: program.executors(),
            streams: program.streams(),
            truncated: false,
            stopped: true,
            loops_at_max: 0,
            computed_reads: 0,
        },
        Ok(s) => ExpandSummary {
            tasks: s.tasks,
            executors: program.executors(),
            streams: program.streams(),
            truncated: false,
            stopped: s.stopped,
            loops_at_max: s.loops_at_max,
            computed_reads: s.computed_reads,
        },
    };
    feeder.finish(Ok(summary)).map_err(BytecodeFeedError::Feed)
}
