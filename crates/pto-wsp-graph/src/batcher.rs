//! Dependency batching (`batch_deps N`, the concurrency-mechanisms specification's `DepBatcher`): a
//! worker buffers the completions it produces and resolves them — [`TaskStates::complete`] for
//! each, in completion order — once `N` are buffered, at barriers, and at the end
//! ([`DepBatcher::flush`]).
//!
//! A batcher is owned by one worker (`&mut self`, no synchronisation of its own); the protocol's
//! orderings carry over unchanged, since each buffered task is completed by the same thread that
//! ran it. Batching trades latency for fewer, denser passes over fan-out lists.
//!
//! A worker must flush before it goes idle: buffered completions are invisible to everyone
//! else, so a worker that sleeps on a non-empty buffer can deadlock the run.

use crate::TaskId;
use crate::counters::Counters;
use crate::state::TaskStates;
use crate::sync::Arc;

/// A per-worker buffer of completions (see the module docs).
#[derive(Debug)]
pub struct DepBatcher {
    pending: Vec<TaskId>,
    threshold: usize,
    batches: u64,
    counters: Arc<Counters>,
}

impl DepBatcher {
    /// A batcher that resolves every `threshold` completions (at least 1; 1 means no batching).
    pub fn new(threshold: usize, counters: Arc<Counters>) -> DepBatcher {
        let threshold = threshold.max(1);
        DepBatcher {
            pending: Vec::with_capacity(threshold),
            threshold,
            batches: 0,
            counters,
        }
    }

    /// The batch size.
    pub fn threshold(&self) -> usize {
        self.threshold
    }

    /// Completions buffered and not yet resolved.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Batches resolved by this batcher (non-empty flushes).
    pub fn batches(&self) -> u64 {
        self.batches
    }

    /// Buffer the completion of `task`; when the buffer reaches the threshold, resolve it,
    /// passing successors that become ready to `on_ready`. Returns the number of completions
    /// resolved by this call (0 or the batch size), for releasing window slots in bulk.
    pub fn add(
        &mut self,
        states: &TaskStates,
        task: TaskId,
        on_ready: impl FnMut(TaskId),
    ) -> usize {
        self.pending.push(task);
        if self.pending.len() >= self.threshold {
            self.flush(states, on_ready)
        } else {
            0
        }
    }

    /// Resolve every buffered completion now, in the order they were added (a barrier, the end
    /// of the run, or before going idle). Returns the number resolved.
    pub fn flush(&mut self, states: &TaskStates, mut on_ready: impl FnMut(TaskId)) -> usize {
        let n = self.pending.len();
        if n == 0 {
            return 0;
        }
        for &t in &self.pending {
            states.complete(t, &mut on_ready);
        }
        self.pending.clear();
        self.batches += 1;
        self.counters.batch(n as u64);
        n
    }
}

impl Drop for DepBatcher {
    fn drop(&mut self) {
        debug_assert!(
            self.pending.is_empty() || std::thread::panicking(),
            "DepBatcher dropped with {} unflushed completions",
            self.pending.len()
        );
    }
}
