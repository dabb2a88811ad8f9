//! Per-task checks of `pto-wsp bench`: every task ran exactly once, barrier tasks apart.
//!
//! Why: a run's completion count can be right while one task ran twice and another never (the
//! counts are sums). Each section therefore makes one untimed run per configuration in which
//! every task bumps its own counter, and checks every counter; the timed runs keep empty
//! kernels (a shared counter array would add cache-line traffic to the figure) and are checked
//! by their totals ([`crate::bench_llama::ran_exactly`]).
//!
//! Promise: [`PerTask::check`] passes only if exactly `barriers` task ids ran nothing (barrier
//! tasks run no kernel) and every other id of the run ran exactly once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use pto_wsp::cpu::{Exec, TaskFailure};
use pto_wsp::graph::TaskId;
use pto_wsp::ir::Module;
use pto_wsp::kernels::KernelRegistry;

use crate::CliError;

/// One counter per task id of a run (ids past the end are counted apart).
#[derive(Clone, Debug)]
pub(crate) struct PerTask {
    counts: Arc<Vec<AtomicU32>>,
    beyond: Arc<AtomicU32>,
}

impl PerTask {
    /// Counters for a run of `ids` task ids (user tasks and barriers).
    pub(crate) fn new(ids: usize) -> PerTask {
        PerTask {
            counts: Arc::new((0..ids).map(|_| AtomicU32::new(0)).collect()),
            beyond: Arc::new(AtomicU32::new(0)),
        }
    }

    /// Task `id` ran.
    pub(crate) fn hit(&self, id: u32) {
        match self.counts.get(id as usize) {
            Some(c) => c.fetch_add(1, Ordering::Relaxed),
            None => self.beyond.fetch_add(1, Ordering::Relaxed),
        };
    }

    /// Every kernel of `m` as a kernel that only counts its task.
    pub(crate) fn kernels(&self, m: &Module) -> KernelRegistry {
        let mut r = KernelRegistry::new();
        for k in &m.kernels {
            let me = self.clone();
            r.register(&k.name.name, move |ctx| {
                me.hit(ctx.task());
                Ok(())
            });
        }
        r
    }

    /// Checks that exactly `barriers` ids ran nothing and every other id ran exactly once.
    pub(crate) fn check(&self, what: &str, barriers: u64) -> Result<(), CliError> {
        let beyond = self.beyond.load(Ordering::Relaxed);
        let mut idle = 0u64;
        let mut first_bad = None;
        for (i, c) in self.counts.iter().enumerate() {
            match c.load(Ordering::Relaxed) {
                0 => idle += 1,
                1 => {}
                n => {
                    first_bad.get_or_insert((i, n));
                }
            }
        }
        if let Some((i, n)) = first_bad {
            return Err(CliError::plain(format!(
                "bench: the {what} run ran task {i} {n} times"
            )));
        }
        if idle != barriers || beyond != 0 {
            return Err(CliError::plain(format!(
                "bench: the {what} run left {idle} of {} task ids unrun ({barriers} barrier \
                 tasks expected) and ran {beyond} task(s) with an unknown id",
                self.counts.len()
            )));
        }
        Ok(())
    }
}

impl Exec for PerTask {
    fn run(&self, task: TaskId, _worker: usize) -> Result<(), TaskFailure> {
        self.hit(task.0);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::PerTask;

    #[test]
    fn only_each_task_once_with_the_barriers_unrun_passes() {
        let ok = PerTask::new(4);
        for id in [0, 1, 3] {
            ok.hit(id);
        }
        assert!(ok.check("x", 1).is_ok());
        assert!(ok.check("x", 0).is_err(), "a task never ran");
        // One task twice and another never: the total is right, the check is not.
        let twice = PerTask::new(3);
        for id in [0, 0, 2] {
            twice.hit(id);
        }
        let e = twice.check("x", 0).unwrap_err().to_string();
        assert!(e.contains("ran task 0 2 times"), "{e}");
        let beyond = PerTask::new(2);
        for id in [0, 1, 2] {
            beyond.hit(id);
        }
        assert!(beyond.check("x", 0).is_err());
    }
}
