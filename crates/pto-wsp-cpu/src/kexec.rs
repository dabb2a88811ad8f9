//! The executor that runs real kernels: each task's kernel from a [`KernelRegistry`], on views
//! of its regions in a [`TensorStore`].
//!
//! # What it promises
//!
//! - A kernel that returns an error or panics becomes a [`TaskFailure`] naming the kernel (the
//!   panic is caught here; the worker and the pool live on).
//! - Every region is checked against its tensor before the kernel runs; a region outside its
//!   tensor fails the task before anything is written.
//! - With debug checks on, every task's regions are recorded while it runs and a task whose
//!   regions conflict with a running task's fails loudly (naming both): dependency inference
//!   should make that impossible, and this mode is how the tests prove it.
//! - Barrier tasks (structural order, kernel [`BARRIER_KERNEL`]) run nothing.

use std::cell::RefCell;
use std::panic::{AssertUnwindSafe, catch_unwind};

use pto_wsp_graph::TaskId;
use pto_wsp_graph::feed::BARRIER_KERNEL;
use pto_wsp_graph::storage::{TaskGraphStorage, TaskNode};
use pto_wsp_graph::types::TaskIo;
use pto_wsp_kernels::{ConflictChecker, KernelId, KernelRegistry, TaskContext, TensorStore};

use crate::exec::{Exec, TaskFailure};
use crate::pool::panic_message;
use crate::table::TaskTable;

/// Where a kernel executor reads tasks.
pub trait TaskSource: Sync {
    /// Node, params and regions of `t` (copied into the buffers when the source cannot lend
    /// them).
    fn with_task<R>(
        &self,
        t: TaskId,
        bufs: &mut (Vec<u64>, Vec<TaskIo>),
        f: impl FnOnce(&TaskNode, &[u64], &[TaskIo]) -> R,
    ) -> R;
}

impl TaskSource for TaskGraphStorage {
    #[inline]
    fn with_task<R>(
        &self,
        t: TaskId,
        _bufs: &mut (Vec<u64>, Vec<TaskIo>),
        f: impl FnOnce(&TaskNode, &[u64], &[TaskIo]) -> R,
    ) -> R {
        let n = &self.tasks[t.index()];
        f(n, self.params_of(t), self.io_of(t))
    }
}

impl TaskSource for TaskTable {
    #[inline]
    fn with_task<R>(
        &self,
        t: TaskId,
        bufs: &mut (Vec<u64>, Vec<TaskIo>),
        f: impl FnOnce(&TaskNode, &[u64], &[TaskIo]) -> R,
    ) -> R {
        let n = *self
            .node(t)
            .expect("a task is published before it can become ready");
        let ok = self.params(&n, &mut bufs.0) && self.io(&n, &mut bufs.1);
        assert!(ok, "a task's params and regions are published with it");
        f(&n, &bufs.0, &bufs.1)
    }
}

thread_local! {
    static BUFS: RefCell<(Vec<u64>, Vec<TaskIo>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// Runs each task's kernel (see the module docs).
pub struct KernelExec<'a, S: TaskSource> {
    source: &'a S,
    store: &'a TensorStore,
    registry: &'a KernelRegistry,
    /// Registry id of each module kernel index (`None`: not resolvable; fails the task).
    kernels: &'a [Option<KernelId>],
    /// Module kernel names, for messages.
    names: &'a [String],
    checker: Option<ConflictChecker>,
}

impl<'a, S: TaskSource> KernelExec<'a, S> {
    /// The store the kernels run on.
    pub(crate) fn store(&self) -> &'a TensorStore {
        self.store
    }

    /// An executor reading tasks from `source`, running `registry`'s kernels (`kernels[k]` for
    /// the module's kernel `k`) on `store`, with debug checks if `debug_checks`.
    ///
    /// The store must not be read or written by anything else while a run uses this executor
    /// (the caller holds it borrowed for the run).
    pub fn new(
        source: &'a S,
        store: &'a TensorStore,
        registry: &'a KernelRegistry,
        kernels: &'a [Option<KernelId>],
        names: &'a [String],
        debug_checks: bool,
    ) -> Self {
        KernelExec {
            source,
            store,
            registry,
            kernels,
            names,
            checker: debug_checks.then(ConflictChecker::new),
        }
    }

    /// A task of kernel `kernel` failed with `message`.
    #[cold]
    fn failure(&self, kernel: u32, message: String, panicked: bool) -> TaskFailure {
        TaskFailure {
            index: None,
            kernel: self.name(kernel),
            message,
            panicked,
        }
    }

    fn name(&self, k: u32) -> String {
        self.names
            .get(k as usize)
            .cloned()
            .unwrap_or_else(|| format!("kernel#{k}"))
    }

    /// Runs task `t` on worker `w` given its module kernel index, params and regions (what
    /// [`Exec::run`] does after reading them from the source; device-generation runs, which
    /// keep each task's data on its executor, call it directly).
    pub(crate) fn run_task(
        &self,
        t: TaskId,
        w: usize,
        kernel: u32,
        params: &[u64],
        io: &[TaskIo],
    ) -> Result<(), TaskFailure> {
        self.run_checking::<true>(t, w, kernel, params, io)
    }

    /// Whether the store's tensors have exactly the shapes `shapes` (extents per tensor, in
    /// tensor order): then a region checked against `shapes` is inside its tensor here, and
    /// [`KernelExec::run_in_bounds`] may run it without checking it again.
    pub(crate) fn has_shapes(&self, shapes: &[Vec<i64>]) -> bool {
        let infos = self.store.infos();
        infos.len() == shapes.len()
            && infos.iter().zip(shapes).all(|(info, s)| {
                info.shape.len() == s.len()
                    && info
                        .shape
                        .iter()
                        .zip(s)
                        .all(|(&e, &b)| u64::try_from(b) == Ok(e))
            })
    }

    /// [`KernelExec::run_task`] for regions known to be inside their tensors (checked against
    /// shapes the store has, [`KernelExec::has_shapes`]): no region is checked again. (A region
    /// outside its tensor would still not be touched out of bounds: views check their bounds
    /// when made; it would fail inside the kernel rather than before it.)
    pub(crate) fn run_in_bounds(
        &self,
        t: TaskId,
        w: usize,
        kernel: u32,
        params: &[u64],
        io: &[TaskIo],
    ) -> Result<(), TaskFailure> {
        self.run_checking::<false>(t, w, kernel, params, io)
    }

    /// [`KernelExec::run_task`] (`CHECK`: each region checked against its tensor first) or
    /// [`KernelExec::run_in_bounds`].
    #[inline(always)]
    fn run_checking<const CHECK: bool>(
        &self,
        t: TaskId,
        w: usize,
        kernel: u32,
        params: &[u64],
        io: &[TaskIo],
    ) -> Result<(), TaskFailure> {
        if kernel == BARRIER_KERNEL {
            return Ok(());
        }
        let id = self.kernel_id(kernel)?;
        if CHECK {
            for (i, r) in io.iter().enumerate() {
                self.store
                    .check_region(r)
                    .map_err(|e| self.failure(kernel, format!("region {i}: {e}"), false))?;
            }
        }
        self.call(t, w, kernel, id, params, io)
    }

    /// The registry's id of module kernel `kernel`, or the task's failure.
    #[inline]
    fn kernel_id(&self, kernel: u32) -> Result<KernelId, TaskFailure> {
        match self.kernels.get(kernel as usize).copied() {
            Some(Some(id)) => Ok(id),
            _ => Err(self.failure(
                kernel,
                "no implementation is registered for this kernel".into(),
                false,
            )),
        }
    }

    /// Calls kernel `id` (module kernel `kernel`) for task `t` on worker `w`, its regions
    /// checked; a returned error or a panic is the task's failure.
    fn call(
        &self,
        t: TaskId,
        w: usize,
        kernel: u32,
        id: KernelId,
        params: &[u64],
        io: &[TaskIo],
    ) -> Result<(), TaskFailure> {
        let fail = |message: String, panicked: bool| self.failure(kernel, message, panicked);
        if let Some(c) = &self.checker {
            c.begin(t.0, io)
                .map_err(|e| fail(e.named(&self.store.info(e.tensor()).name), false))?;
        }
        // SAFETY: the store is held borrowed by the run and nothing else touches it (the
        // caller's contract of `KernelExec::new`); between tasks, dependency inference orders
        // every pair whose regions conflict, so while this context lives no other task writes
        // an element it reads or reads or writes an element it writes (debug checks verify
        // this at run time).
        let ctx = unsafe { TaskContext::new(self.store, t.0, w as u32, params, io) };
        let r = catch_unwind(AssertUnwindSafe(|| self.registry.call(id, &ctx)));
        drop(ctx);
        if let Some(c) = &self.checker {
            c.end(t.0);
        }
        match r {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(fail(e.to_string(), false)),
            Err(p) => Err(fail(panic_message(&*p), true)),
        }
    }
}

/// The modelled cost in cycles of tasks `0..n` of `source`, for the cycle-cost model
/// ([`crate::sim`]): `given[t]` where it is `Some` (a `cycles(EXPR)` schedule), 0 for a barrier,
/// else the cost function `registry` holds for the task's kernel (`kernels[k]` for the module's
/// kernel `k`; 0 if it has none). Takes the store exclusively, so no task runs meanwhile.
pub fn task_costs<S: TaskSource>(
    source: &S,
    n: usize,
    store: &mut TensorStore,
    registry: &KernelRegistry,
    kernels: &[Option<KernelId>],
    given: &[Option<u64>],
) -> Vec<u64> {
    let store = &*store;
    let mut bufs = (Vec::new(), Vec::new());
    (0..n)
        .map(|i| {
            if let Some(Some(c)) = given.get(i) {
                return *c;
            }
            let t = TaskId(i as u32);
            source.with_task(t, &mut bufs, |node, params, io| {
                if node.kernel == BARRIER_KERNEL {
                    return 0;
                }
                let Some(Some(id)) = kernels.get(node.kernel as usize).copied() else {
                    return 0;
                };
                if io.iter().any(|r| store.check_region(r).is_err()) {
                    return 0;
                }
                // SAFETY: the store is borrowed exclusively by this function, so no task runs
                // and nothing else reads or writes it while the context lives.
                let ctx = unsafe { TaskContext::new(store, t.0, 0, params, io) };
                registry.cost(id, &ctx)
            })
        })
        .collect()
}

/// Calls `f` with the node and a context of each task `0..n` of `source` that runs a kernel
/// (barrier tasks and tasks whose regions fall outside the store get `None`), for models that
/// read the tasks' shapes. Takes the store exclusively, so no task runs meanwhile.
pub fn with_task_contexts<S: TaskSource>(
    source: &S,
    n: usize,
    store: &mut TensorStore,
    mut f: impl FnMut(usize, &TaskNode, Option<&TaskContext<'_>>),
) {
    let store = &*store;
    let mut bufs = (Vec::new(), Vec::new());
    for i in 0..n {
        let t = TaskId(i as u32);
        source.with_task(t, &mut bufs, |node, params, io| {
            if node.kernel == BARRIER_KERNEL || io.iter().any(|r| store.check_region(r).is_err()) {
                return f(i, node, None);
            }
            // SAFETY: the store is borrowed exclusively by this function, so no task runs and
            // nothing else reads or writes it while the context lives.
            let ctx = unsafe { TaskContext::new(store, t.0, 0, params, io) };
            f(i, node, Some(&ctx));
        });
    }
}

impl<S: TaskSource> Exec for KernelExec<'_, S> {
    fn run(&self, t: TaskId, w: usize) -> Result<(), TaskFailure> {
        BUFS.with(|b| {
            let mut b = b.borrow_mut();
            self.source
                .with_task(t, &mut b, |n, p, io| self.run_task(t, w, n.kernel, p, io))
        })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use pto_wsp_ir::Bindings;

    /// `has_shapes` accepts exactly the store's shapes: every tensor, every extent, in order.
    #[test]
    fn has_shapes_is_exactly_the_stores_shapes() {
        let text = "symbol n: i64;\ntensor A: f32[n, 3];\ntensor B: f32[5];\n\
                    kernel k(in a: f32[1, 1]);\nworkload main() { task k(A[0 +: 1, 0 +: 1]); }\n";
        let m = pto_wsp_ir::parse(text).unwrap();
        let store = TensorStore::new(&m, &Bindings::new().symbol("n", 2i64)).unwrap();
        let (registry, source) = (KernelRegistry::new(), TaskGraphStorage::default());
        let exec = KernelExec::new(&source, &store, &registry, &[], &[], false);
        // The oracle: the store's own shapes, as written in the text with n = 2.
        assert!(exec.has_shapes(&[vec![2, 3], vec![5]]));
        for other in [
            vec![vec![3, 3], vec![5]],
            vec![vec![2, 3], vec![4]],
            vec![vec![2, 3, 1], vec![5]],
            vec![vec![2], vec![5]],
            vec![vec![2, 3]],
            vec![vec![2, 3], vec![5], vec![1]],
            vec![vec![-2, 3], vec![5]],
        ] {
            assert!(!exec.has_shapes(&other), "{other:?}");
        }
    }
}
