//! The debug-checks mode: records the regions of running tasks and fails loudly on a conflict.
//!
//! Why: dependency inference is the only thing that stops two tasks touching the same bytes at
//! once (see the contract of [`crate::TaskContext::new`]). An engine in checking mode calls
//! [`ConflictChecker::begin`] before running a task and [`ConflictChecker::end`] after, so a
//! missing edge shows up as a [`Conflict`] naming both tasks instead of as silent corruption.
//!
//! Promises: two accesses conflict when their boxes are of the same tensor, intersect, and at
//! least one writes (`out` / `inout`). `begin` records a task's regions only if none conflicts
//! with a region in flight. Thread-safe; one lock around the in-flight list (a debugging tool,
//! not a hot path).

use pto_wsp_ir::Access;
use pto_wsp_ir::task_io::BoxText;
use pto_wsp_ir::task_io::{Region, TaskIo};
use std::fmt;
use std::sync::{Mutex, MutexGuard};

/// Locks the in-flight list, ignoring poisoning: each critical section leaves the list
/// consistent before anything that can panic.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Two running tasks whose regions conflict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// The task that was already running.
    pub running: u32,
    /// Its region.
    pub running_region: Region,
    /// Its access to that region.
    pub running_access: Access,
    /// The task that tried to begin.
    pub task: u32,
    /// Its region.
    pub region: Region,
    /// Its access to that region.
    pub access: Access,
}

impl Conflict {
    /// The tensor both regions belong to.
    pub fn tensor(&self) -> u32 {
        self.region.tensor
    }
}

impl Conflict {
    /// The message with the tensor called by its name `name` instead of its index.
    pub fn named(&self, name: &str) -> String {
        self.text(&format!("`{name}`"))
    }

    fn text(&self, tensor: &str) -> String {
        format!(
            "conflict on tensor {tensor}: task {} ({} {}) overlaps running task {} ({} {}), and one of them writes",
            self.task,
            self.access,
            BoxText(&self.region),
            self.running,
            self.running_access,
            BoxText(&self.running_region),
        )
    }
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text(&self.tensor().to_string()))
    }
}

impl std::error::Error for Conflict {}

/// Whether two accesses conflict: same tensor, intersecting boxes, at least one writes.
pub fn conflicts(a: &TaskIo, b: &TaskIo) -> bool {
    (a.access().writes() || b.access().writes()) && a.region.intersects(&b.region)
}

/// The regions of the tasks in flight.
#[derive(Debug, Default)]
pub struct ConflictChecker {
    in_flight: Mutex<Vec<(u32, TaskIo)>>,
}

impl ConflictChecker {
    /// No task in flight.
    pub fn new() -> ConflictChecker {
        ConflictChecker::default()
    }

    /// Records that `task` starts with I/O list `io`, unless one of its regions conflicts with a
    /// region of a task in flight: then nothing is recorded and the first conflict found is
    /// returned. Regions of the same task are never compared with each other.
    pub fn begin(&self, task: u32, io: &[TaskIo]) -> Result<(), Conflict> {
        let mut flight = lock(&self.in_flight);
        for new in io {
            if let Some((running, old)) = flight.iter().find(|(_, old)| conflicts(old, new)) {
                return Err(Conflict {
                    running: *running,
                    running_region: old.region,
                    running_access: old.access(),
                    task,
                    region: new.region,
                    access: new.access(),
                });
            }
        }
        flight.extend(io.iter().map(|&x| (task, x)));
        Ok(())
    }

    /// Records that `task` finished: its regions are no longer in flight.
    pub fn end(&self, task: u32) {
        lock(&self.in_flight).retain(|&(t, _)| t != task);
    }

    /// Number of regions in flight.
    pub fn regions_in_flight(&self) -> usize {
        lock(&self.in_flight).len()
    }
}
