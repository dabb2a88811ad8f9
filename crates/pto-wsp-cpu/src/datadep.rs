//! Data-dependent generation on the CPU back end: generator reads of tensors that tasks of the
//! same run compute (`docs/SEMANTICS.md`, "Computed reads").
//!
//! Why a module of its own: two runs serve computed reads and must agree on what a read sees.
//! The *sequential reference run* ([`sequential`]) executes every task, in program order, the
//! moment the generator emits it, so a read sees exactly the writes of the tasks before it: that
//! is the meaning every other path is checked against. A *host streamed run* keeps generating
//! while workers run tasks; before a computed read its generator waits on the tasks already
//! submitted whose written boxes overlap the read ([`Producers`]), then reads the same store.
//!
//! Promises: a read never sees a value older than its producers' completion; reads of
//! host-bound tensors never come here (the expander serves them from the bindings, with no
//! waiting and no cost); a run whose tasks fail ends with that failure, never with a read of a
//! half-written tensor.

use std::ops::ControlFlow;
use std::time::Instant;

use pto_wsp_graph::TaskId;
use pto_wsp_graph::feed::FeedTask;
use pto_wsp_graph::types::{Region, TaskIo};
use pto_wsp_ir::{
    Access, Bindings, DType, DataRead, ExpandError, ExpandOptions, ExpandSink, ExpandedTask,
    OrderEdge, ReadRefused, Resolved, expand_with,
};
use pto_wsp_kernels::{KernelId, KernelRegistry, TaskContext, TensorStore};

use crate::exec::TaskFailure;
use crate::kexec::KernelExec;
use crate::table::TaskTable;

/// How often and how long a generator waited on computed data.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GenStats {
    /// Computed reads the generator made.
    pub computed_reads: u64,
    /// Of those, the reads that had to wait for a producer still running.
    pub stalls: u64,
    /// Nanoseconds spent waiting in those stalls.
    pub stall_ns: u64,
    /// `while` loops that ended at their `max` bound with the condition still true.
    pub loops_at_max: u64,
}

/// The elements of the box `read` describes, in row-major order, as `i64`.
///
/// # Safety
/// No task may write any element of the box while this runs (the caller waited on every
/// producer of the box, or no task runs).
pub unsafe fn read_ints(store: &TensorStore, read: &DataRead<'_>) -> Result<Vec<i64>, String> {
    let region = Region::new(read.tensor, read.start, read.size).map_err(|e| e.to_string())?;
    let io = [TaskIo::new(region, Access::In)];
    store.check_region(&io[0]).map_err(|e| e.to_string())?;
    // SAFETY: the caller's contract: nothing writes the box while the context lives.
    let ctx = unsafe { TaskContext::new(store, u32::MAX, 0, &[], &io) };
    let dtype = store.info(read.tensor).dtype;
    let err = |e: pto_wsp_kernels::KernelError| e.to_string();
    Ok(match dtype {
        DType::I64 => ctx.read::<i64>(0).map_err(err)?.to_vec(),
        DType::I32 => ctx
            .read::<i32>(0)
            .map_err(err)?
            .to_vec()
            .into_iter()
            .map(i64::from)
            .collect(),
        DType::U32 => ctx
            .read::<u32>(0)
            .map_err(err)?
            .to_vec()
            .into_iter()
            .map(i64::from)
            .collect(),
        DType::U8 => ctx
            .read::<u8>(0)
            .map_err(err)?
            .to_vec()
            .into_iter()
            .map(i64::from)
            .collect(),
        DType::U64 => {
            let v = ctx.read::<u64>(0).map_err(err)?.to_vec();
            let mut out = Vec::with_capacity(v.len());
            for x in v {
                out.push(i64::try_from(x).map_err(|_| format!("element {x} does not fit an i64"))?);
            }
            out
        }
        other => return Err(format!("its element type {other} is not an integer type")),
    })
}

/// The tasks of a run that write tensors the generator reads computed values of, with their
/// written boxes: what a computed read waits on.
#[derive(Debug)]
pub struct Producers {
    /// Per tensor: whether reads of it are computed (only those tensors' writers are kept).
    tracked: Vec<bool>,
    /// Per tensor: `(task, written box)` of tasks not yet seen complete.
    writers: Vec<Vec<(TaskId, Region)>>,
}

impl Producers {
    /// Tracking for the tensors `computed[t]` says are read as computed values. With none,
    /// [`Producers::record`] does nothing (a module without computed reads pays nothing).
    pub fn new(computed: Vec<bool>) -> Producers {
        let n = computed.len();
        Producers {
            tracked: computed,
            writers: vec![Vec::new(); n],
        }
    }

    /// Whether any tensor is tracked.
    pub fn any(&self) -> bool {
        self.tracked.iter().any(|&b| b)
    }

    /// Task `id`, whose regions are `io`, was generated (device generation: every executor
    /// records every task, its own and the others').
    pub fn record_io(&mut self, id: TaskId, io: &[TaskIo]) {
        for x in io {
            let t = x.region.tensor as usize;
            if x.access().writes() && self.tracked.get(t) == Some(&true) {
                self.writers[t].push((id, x.region));
            }
        }
    }

    /// Every task below `done` has completed: forget those writers (a read need not wait on
    /// them), so what is kept is bounded by the tasks in flight, not by the run.
    pub fn forget_before(&mut self, done: TaskId) {
        for list in &mut self.writers {
            list.retain(|(t, _)| *t >= done);
        }
    }

    /// Task `id`, generated as `task`, was submitted.
    pub fn record(&mut self, id: TaskId, task: &dyn FeedTask) {
        let _ = task.try_for_each_region(&mut |access, tensor, start, size| {
            if access.writes()
                && self.tracked.get(tensor as usize) == Some(&true)
                && let Ok(region) = Region::new(tensor, start, size)
            {
                self.writers[tensor as usize].push((id, region));
            }
            Ok(())
        });
    }

    /// Makes the generator's read `read` wait on every recorded writer of a box overlapping
    /// it, through `wait` (a sink's [`pto_wsp_graph::builder::EdgeSink::wait_complete`]);
    /// counts the read, and the stall if `wait` had to wait, in `stats`. `false`: `wait` could
    /// not (the run failed).
    pub fn wait(
        &mut self,
        read: &DataRead<'_>,
        wait: &mut dyn FnMut(&[TaskId]) -> Option<bool>,
        stats: &mut GenStats,
    ) -> bool {
        stats.computed_reads += 1;
        let Ok(want) = Region::new(read.tensor, read.start, read.size) else {
            return true;
        };
        let Some(list) = self.writers.get_mut(read.tensor as usize) else {
            return true;
        };
        let ids: Vec<TaskId> = list
            .iter()
            .filter(|(_, r)| r.intersects(&want))
            .map(|(t, _)| *t)
            .collect();
        if ids.is_empty() {
            return true;
        }
        let t0 = Instant::now();
        match wait(&ids) {
            None => false,
            Some(waited) => {
                if waited {
                    stats.stalls += 1;
                    stats.stall_ns += t0.elapsed().as_nanos() as u64;
                }
                // Every writer of an overlapping box has completed: nothing to wait on again.
                list.retain(|(_, r)| !r.intersects(&want));
                true
            }
        }
    }
}

impl Producers {
    /// Serves the generator's computed read `read` in a run on `store`: waits on its producers
    /// ([`Producers::wait`]), then reads the box. The run's tasks must all have been recorded
    /// ([`Producers::record`]) when submitted, and only tasks of this run may write `store`
    /// (as for [`KernelExec::new`]): then nothing writes the box while it is read.
    pub fn serve(
        &mut self,
        read: &DataRead<'_>,
        wait: &mut dyn FnMut(&[TaskId]) -> Option<bool>,
        store: &TensorStore,
        stats: &mut GenStats,
        out: &mut Vec<i64>,
    ) -> Result<(), ReadRefused> {
        if !self.wait(read, wait, stats) {
            return Err(ReadRefused::Stopped);
        }
        // SAFETY: every task submitted so far that writes an overlapping box has completed, no
        // task submitted later can run before the generator goes on, and nothing outside the
        // run writes the store (the contract above).
        let v = unsafe { read_ints(store, read) }.map_err(ReadRefused::Unsupported)?;
        out.extend(v);
        Ok(())
    }
}

/// What a sequential reference run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SequentialStats {
    /// Tasks run.
    pub tasks: u64,
    /// Generator figures (no stall ever: every task completed before the next statement).
    pub generation: GenStats,
}

/// Why a sequential reference run failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SequentialError {
    /// The generator failed (the module, the bindings, a refused read).
    #[error(transparent)]
    Expand(#[from] ExpandError),
    /// A task failed.
    #[error("task #{index} (`{kernel}`) failed: {message}", index = .0.index.unwrap_or(0), kernel = .0.kernel, message = .0.message)]
    Task(TaskFailure),
}

/// The sequential reference run: generates the tasks of the resolved entry point `res` under
/// `bindings` and runs each,
/// on this thread, the moment it is generated (program order), with `registry`'s kernels
/// (`kernels[k]` for the module's kernel `k`, `names` for messages) on `store`. Computed reads
/// read `store` directly: every earlier task has completed. This is what a module with computed
/// reads means; every other path is checked against it.
pub fn sequential(
    res: &Resolved,
    bindings: &Bindings,
    store: &TensorStore,
    registry: &KernelRegistry,
    kernels: &[Option<KernelId>],
    names: &[String],
) -> Result<SequentialStats, SequentialError> {
    struct Seq<'a> {
        exec: KernelExec<'a, TaskTable>,
        store: &'a TensorStore,
        params: Vec<u64>,
        io: Vec<TaskIo>,
        failure: Option<TaskFailure>,
        tasks: u64,
    }
    impl ExpandSink for Seq<'_> {
        fn task(&mut self, index: u32, task: &ExpandedTask) -> ControlFlow<()> {
            self.params.clear();
            self.params.extend(task.params.iter().map(|v| v.to_bits()));
            self.io.clear();
            for r in &task.regions {
                match Region::new(r.tensor, &r.start, &r.size) {
                    Ok(region) => self.io.push(TaskIo::new(region, r.access)),
                    Err(e) => {
                        self.failure = Some(TaskFailure {
                            index: Some(index),
                            kernel: format!("kernel#{}", task.kernel),
                            message: e.to_string(),
                            panicked: false,
                        });
                        return ControlFlow::Break(());
                    }
                }
            }
            let r = self
                .exec
                .run_task(TaskId(index), 0, task.kernel, &self.params, &self.io);
            self.tasks += 1;
            match r {
                Ok(()) => ControlFlow::Continue(()),
                Err(mut f) => {
                    f.index = Some(index);
                    self.failure = Some(f);
                    ControlFlow::Break(())
                }
            }
        }
        fn order(&mut self, _edge: OrderEdge) {}
        fn read(&mut self, read: &DataRead<'_>, out: &mut Vec<i64>) -> Result<(), ReadRefused> {
            // SAFETY: tasks run on this thread only, and each has returned.
            let v = unsafe { read_ints(self.store, read) }.map_err(ReadRefused::Unsupported)?;
            out.extend(v);
            Ok(())
        }
    }
    let table = TaskTable::new();
    let mut seq = Seq {
        exec: KernelExec::new(&table, store, registry, kernels, names, false),
        store,
        params: Vec::new(),
        io: Vec::new(),
        failure: None,
        tasks: 0,
    };
    let summary = expand_with(res, bindings, &ExpandOptions::default(), &mut seq);
    if let Some(f) = seq.failure {
        return Err(SequentialError::Task(f));
    }
    let summary = summary?;
    Ok(SequentialStats {
        tasks: seq.tasks,
        generation: GenStats {
            computed_reads: summary.computed_reads,
            stalls: 0,
            stall_ns: 0,
            loops_at_max: summary.loops_at_max,
        },
    })
}
