//! Per-task checks of `pto-wsp bench`: every task ran exactly once, barrier tasks apart.
//!
//! Why: a run's completion count can be right while one task ran twice and another never (the
//! counts are sums). Each section therefore makes one untimed run per configuration in which
//! every task bumps its own counter, and checks every counter; the timed runs keep empty
//! kernels (a shared counter array would add cache-line traffic to the figure) and are checked
//! by their totals ([`crate::bench_llama::ran_exactly`]).
//!
//! Where a section's runs are too slow for the counters to matter (the thread-scaling spin, the
//! idle runs of a few tasks), the measured runs themselves count, through [`Counted`].
//!
//! Promise: [`PerTask::check`] passes only if exactly `barriers` task ids ran nothing (barrier
//! tasks run no kernel) and every other id of the run ran exactly once; its error names the
//! section and the first task id that ran twice or more, or the first that never ran.
//!
//! Tests inject a fault ([`inject`], test builds only): the `nth` [`PerTask`] made from then on
//! on the calling thread records one task as having run twice, or not at all, so a test can
//! show each check of a section rejecting such a run without relying on timing.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use pto_wsp::cpu::{Exec, TaskFailure};
use pto_wsp::graph::TaskId;
use pto_wsp::ir::Module;
use pto_wsp::kernels::KernelRegistry;

use crate::CliError;

/// A fault a test injects into the next [`PerTask`] made on its thread.
#[cfg(test)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fault {
    /// The task id whose runs are miscounted.
    pub task: u32,
    /// What one run of that task records (0: as if it never ran, 2: as if it ran twice).
    pub records: u32,
    /// How many [`PerTask`]s are made (and count truly) before the faulty one.
    pub nth: u32,
}

#[cfg(test)]
thread_local! {
    static FAULT: std::cell::Cell<Option<Fault>> = const { std::cell::Cell::new(None) };
}

/// Makes the `fault.nth` [`PerTask`] made on this thread from now on miscount as `fault` says
/// (`None`: no fault).
#[cfg(test)]
pub(crate) fn inject(fault: Option<Fault>) {
    FAULT.with(|f| f.set(fault));
}

/// One counter per task id of a run (ids past the end are counted apart).
#[derive(Clone, Debug)]
pub(crate) struct PerTask {
    counts: Arc<Vec<AtomicU32>>,
    beyond: Arc<AtomicU32>,
    #[cfg(test)]
    fault: Option<Fault>,
}

impl PerTask {
    /// Counters for a run of `ids` task ids (user tasks and barriers).
    pub(crate) fn new(ids: usize) -> PerTask {
        PerTask {
            counts: Arc::new((0..ids).map(|_| AtomicU32::new(0)).collect()),
            beyond: Arc::new(AtomicU32::new(0)),
            #[cfg(test)]
            fault: FAULT.with(|f| match f.get() {
                Some(x) if x.nth == 0 => {
                    f.set(None);
                    Some(x)
                }
                Some(x) => {
                    f.set(Some(Fault {
                        nth: x.nth - 1,
                        ..x
                    }));
                    None
                }
                None => None,
            }),
        }
    }

    /// Task `id` ran.
    pub(crate) fn hit(&self, id: u32) {
        #[cfg(test)]
        let by = match self.fault {
            Some(f) if f.task == id => f.records,
            _ => 1,
        };
        #[cfg(not(test))]
        let by = 1;
        match self.counts.get(id as usize) {
            Some(c) => c.fetch_add(by, Ordering::Relaxed),
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
        let mut first_idle = None;
        let mut first_bad = None;
        for (i, c) in self.counts.iter().enumerate() {
            match c.load(Ordering::Relaxed) {
                0 => {
                    idle += 1;
                    first_idle.get_or_insert(i);
                }
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
                "bench: the {what} run left {idle} of {} task ids unrun{} ({barriers} barrier \
                 tasks expected) and ran {beyond} task(s) with an unknown id",
                self.counts.len(),
                first_idle.map_or(String::new(), |i| format!(" (the first: task {i})"))
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

/// `inner` with every run also counted in a [`PerTask`] (for runs whose tasks are slow enough
/// that one relaxed atomic add per task does not move the figure).
#[derive(Clone, Debug)]
pub(crate) struct Counted<X> {
    /// The counters.
    pub(crate) once: PerTask,
    /// The task body.
    pub(crate) inner: X,
}

impl<X: Exec> Exec for Counted<X> {
    fn run(&self, task: TaskId, worker: usize) -> Result<(), TaskFailure> {
        self.once.hit(task.0);
        self.inner.run(task, worker)
    }
}

#[cfg(test)]
mod tests {
    use super::{Fault, PerTask, inject};

    #[test]
    fn an_injected_fault_is_seen_by_the_check_and_named() {
        inject(Some(Fault {
            task: 1,
            records: 0,
            nth: 1,
        }));
        let fine = PerTask::new(3);
        let never = PerTask::new(3);
        let after = PerTask::new(3);
        for id in 0..3 {
            fine.hit(id);
            after.hit(id);
        }
        assert!(fine.check("x", 0).is_ok() && after.check("x", 0).is_ok());
        for id in 0..3 {
            never.hit(id);
        }
        let e = never.check("x", 0).unwrap_err().to_string();
        assert!(e.contains("the first: task 1"), "{e}");
        let fine = PerTask::new(3);
        for id in 0..3 {
            fine.hit(id);
        }
        assert!(fine.check("x", 0).is_ok());
    }

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
