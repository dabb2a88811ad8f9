//! Running kernels without dependency inference, soundly: for callers (Plan-Descriptor-Execute
//! dispatch) whose work items are *promised* independent rather than ordered by a task graph.
//!
//! Promise: [`with_checked_runner`] borrows the store exclusively for the duration of its closure,
//! so nothing outside the runner reads or writes it meanwhile, and [`CheckedRunner::call`] — safe,
//! callable from many threads at once — records each call's regions in a [`ConflictChecker`]
//! before the kernel runs and refuses a call whose regions overlap a write of a call in flight
//! (or write what one reads). So the views every kernel gets are exactly as sound as under
//! dependency inference, whatever the caller promised; a broken promise is an error naming both
//! regions, never a data race. A region outside its tensor is refused before anything runs.

use crate::check::ConflictChecker;
use crate::context::TaskContext;
use crate::registry::{KernelId, KernelRegistry};
use crate::store::TensorStore;
use pto_wsp_ir::task_io::TaskIo;
use std::sync::atomic::{AtomicU32, Ordering};

/// Runs kernels on a store it holds exclusively, checking regions in flight (module docs).
pub struct CheckedRunner<'s> {
    store: &'s TensorStore,
    registry: &'s KernelRegistry,
    checker: ConflictChecker,
    next: AtomicU32,
}

/// Calls `f` with a runner over `store` (borrowed exclusively until `f` returns) and `registry`.
pub fn with_checked_runner<R>(
    store: &mut TensorStore,
    registry: &KernelRegistry,
    f: impl FnOnce(&CheckedRunner<'_>) -> R,
) -> R {
    let runner = CheckedRunner {
        store,
        registry,
        checker: ConflictChecker::new(),
        next: AtomicU32::new(0),
    };
    f(&runner)
}

/// Ends a call's record in the checker, also when the kernel unwinds.
struct End<'c>(&'c ConflictChecker, u32);

impl Drop for End<'_> {
    fn drop(&mut self) {
        self.0.end(self.1);
    }
}

impl CheckedRunner<'_> {
    /// Runs kernel `id` on regions `io` with scalar `params` on executor `worker`; an error
    /// message if a region is outside its tensor, overlaps a conflicting region in flight, or
    /// the kernel fails.
    pub fn call(
        &self,
        id: KernelId,
        worker: u32,
        params: &[u64],
        io: &[TaskIo],
    ) -> Result<(), String> {
        for (i, r) in io.iter().enumerate() {
            self.store
                .check_region(r)
                .map_err(|e| format!("region {}: {e}", i + 1))?;
        }
        let task = self.next.fetch_add(1, Ordering::Relaxed);
        self.checker.begin(task, io).map_err(|c| {
            let name = &self.store.info(c.tensor()).name;
            format!(
                "two work items with conflicting regions ran at once: {}",
                c.named(name)
            )
        })?;
        let _end = End(&self.checker, task);
        // SAFETY: the store is borrowed exclusively by `with_checked_runner` for the runner's
        // life, so only calls of this runner touch it; the checker has recorded this call's
        // regions and refused any conflict with a call in flight (and refuses later ones
        // against these until `_end` drops, after the context), so while this context lives no
        // other kernel writes an element it reads or touches an element it writes.
        let ctx = unsafe { TaskContext::new(self.store, task, worker, params, io) };
        self.registry.call(id, &ctx).map_err(|e| e.to_string())
    }
}
