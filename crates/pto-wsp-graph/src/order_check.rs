//! The order checker behind `run --check`: proves that every two tasks whose regions conflict
//! are ordered by a path of the graph that ran, whatever the `deps` mode inferred.
//!
//! Why: a missing edge does not always show as two conflicting tasks running at once; the pair
//! may run in the right order by luck (a free worker, a short queue) and give right numbers on
//! one run and wrong ones on the next. Checking the *order* catches it every time.
//!
//! How: tasks are given in submission order with their predecessors (edges always go from an
//! earlier to a later task). A sound oracle — an [`OverlapMap`], which reports for every access
//! the earlier conflicting accesses not yet superseded (last writers, readers since) — names the
//! pairs each task must follow. Each such pair must be ordered: the earlier task is a direct
//! predecessor, or reachable backwards through predecessors (a search over tasks newer than it
//! only), or it completed before the later task was submitted ([`OrderChecker::retire_before`],
//! the run's completed-prefix watermark, which the run really enforces). Pairs the oracle does
//! not name are ordered through the ones it names (a write that supersedes a record follows it,
//! so it stands in for it), so checking those is enough for every conflicting pair.
//!
//! Promises: [`OrderChecker::task`] returns the first conflicting pair that no path orders, as
//! an [`Unordered`] naming both tasks, their kernels and the two regions; it never reports an
//! ordered pair. Memory: the oracle's records plus each task's predecessors and regions, from
//! the oldest task not yet retired. Cost per task: the oracle lookup, plus a backward search
//! only for a required predecessor that is not a direct one (bounded by the tasks between them).

use crate::storage::TaskGraphStorage;
use crate::tensor_map::{OverlapMap, TensorMap};
use crate::types::{TaskId, TaskIo};
pub use pto_wsp_ir::task_io::BoxText;

/// One side of an unordered pair: a task, its kernel and the region it touched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Side {
    /// The task (graph id).
    pub task: TaskId,
    /// Its kernel index.
    pub kernel: u32,
    /// The conflicting region and access.
    pub io: TaskIo,
}

/// Two tasks whose regions conflict (same tensor, intersecting boxes, at least one writes) and
/// that no path of the graph orders.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unordered {
    /// The task submitted first.
    pub earlier: Side,
    /// The task submitted later.
    pub later: Side,
}

impl Unordered {
    /// The tensor both regions belong to.
    pub fn tensor(&self) -> u32 {
        self.later.io.region.tensor
    }
}

/// See the module docs.
#[derive(Debug)]
pub struct OrderChecker {
    oracle: OverlapMap,
    /// First task whose predecessors and regions are kept (every older one is retired).
    base: u32,
    /// Predecessors of tasks `base..`: task `base + i`'s are `preds[pred_ends[i-1]..pred_ends[i]]`
    /// (offsets relative to the start of `preds`).
    preds: Vec<u32>,
    pred_ends: Vec<usize>,
    /// Kernel and regions of tasks `base..`, likewise.
    kernels: Vec<u32>,
    ios: Vec<TaskIo>,
    io_ends: Vec<usize>,
    /// Predecessors reported for the task being submitted.
    pending: Vec<u32>,
    /// Search marks per kept task (`stamp` of the search that visited it).
    marks: Vec<u32>,
    stamp: u32,
    required: Vec<u32>,
    stack: Vec<u32>,
    /// Tasks checked so far (the next task's id).
    next: u32,
}

impl Default for OrderChecker {
    fn default() -> OrderChecker {
        OrderChecker::new()
    }
}

impl OrderChecker {
    /// A checker for a graph starting at task 0.
    pub fn new() -> OrderChecker {
        OrderChecker {
            // Every predecessor the oracle names must conflict: no coverage marks.
            oracle: OverlapMap::pairwise(),
            base: 0,
            preds: Vec::new(),
            pred_ends: Vec::new(),
            kernels: Vec::new(),
            ios: Vec::new(),
            io_ends: Vec::new(),
            pending: Vec::new(),
            marks: Vec::new(),
            stamp: 0,
            required: Vec::new(),
            stack: Vec::new(),
            next: 0,
        }
    }

    /// `pred` is a predecessor of the next task (reported before [`OrderChecker::task`]).
    #[inline]
    pub fn edge(&mut self, pred: TaskId) {
        self.pending.push(pred.0);
    }

    /// Every task below `done` completed before any task from now on is submitted: they need
    /// no edge and their records are dropped.
    pub fn retire_before(&mut self, done: TaskId) {
        let done = done.0.min(self.next);
        if done <= self.base {
            return;
        }
        self.oracle.retire_before(TaskId(done));
        let k = (done - self.base) as usize;
        let (p, i) = (self.pred_ends[k - 1], self.io_ends[k - 1]);
        self.preds.drain(..p);
        self.ios.drain(..i);
        self.pred_ends.drain(..k);
        self.io_ends.drain(..k);
        self.pred_ends.iter_mut().for_each(|e| *e -= p);
        self.io_ends.iter_mut().for_each(|e| *e -= i);
        self.kernels.drain(..k);
        self.marks.drain(..k);
        self.base = done;
    }

    fn local(&self, t: u32) -> usize {
        (t - self.base) as usize
    }

    fn ios_of(&self, t: u32) -> &[TaskIo] {
        let i = self.local(t);
        let lo = if i == 0 { 0 } else { self.io_ends[i - 1] };
        &self.ios[lo..self.io_ends[i]]
    }

    /// Checks task `task` (the next in submission order) of kernel `kernel` with regions `io`,
    /// whose predecessors were given by [`OrderChecker::edge`]: the first earlier task it
    /// conflicts with and is not ordered after, if any.
    pub fn task(&mut self, task: TaskId, kernel: u32, io: &[TaskIo]) -> Result<(), Unordered> {
        assert_eq!(task.0, self.next, "tasks are checked in submission order");
        self.next += 1;
        self.preds.append(&mut self.pending);
        self.pred_ends.push(self.preds.len());
        self.ios.extend_from_slice(io);
        self.io_ends.push(self.ios.len());
        self.kernels.push(kernel);
        self.marks.push(0);
        let mut required = std::mem::take(&mut self.required);
        required.clear();
        for r in io {
            self.oracle
                .access(task, &r.region, r.access(), &mut |p, _| required.push(p.0));
        }
        let r = self.check(task.0, &mut required);
        self.required = required;
        r
    }

    /// Whether every task of `required` reaches `t` (see the module docs).
    fn check(&mut self, t: u32, required: &mut Vec<u32>) -> Result<(), Unordered> {
        required.retain(|&p| p >= self.base);
        if required.is_empty() {
            return Ok(());
        }
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.marks.iter_mut().for_each(|m| *m = 0);
            self.stamp = 1;
        }
        let stamp = self.stamp;
        // Direct predecessors first: the common case under an inferring mode.
        let ti = self.local(t);
        let lo = if ti == 0 { 0 } else { self.pred_ends[ti - 1] };
        for k in lo..self.pred_ends[ti] {
            let p = self.preds[k];
            if p >= self.base {
                let i = self.local(p);
                self.marks[i] = stamp;
            }
        }
        required.retain(|&p| self.marks[self.local(p)] != stamp);
        if required.is_empty() {
            return Ok(());
        }
        // One backward search over tasks newer than the oldest required one.
        let floor = *required.iter().min().expect("not empty");
        self.stack.clear();
        for k in lo..self.pred_ends[ti] {
            let p = self.preds[k];
            if p > floor {
                self.stack.push(p);
            }
        }
        while let Some(x) = self.stack.pop() {
            let xi = self.local(x);
            let lo = if xi == 0 { 0 } else { self.pred_ends[xi - 1] };
            for k in lo..self.pred_ends[xi] {
                let p = self.preds[k];
                if p >= floor {
                    let i = self.local(p);
                    if self.marks[i] != stamp {
                        self.marks[i] = stamp;
                        if p > floor {
                            self.stack.push(p);
                        }
                    }
                }
            }
        }
        let Some(&e) = required
            .iter()
            .find(|&&p| self.marks[self.local(p)] != stamp)
        else {
            return Ok(());
        };
        // Name the two regions that conflict.
        let (mine, theirs) = (self.ios_of(t), self.ios_of(e));
        let pair = mine
            .iter()
            .flat_map(|a| theirs.iter().map(move |b| (*a, *b)))
            .find(|(a, b)| {
                (a.access().writes() || b.access().writes()) && a.region.intersects(&b.region)
            })
            .expect("the oracle names only conflicting tasks");
        Err(Unordered {
            earlier: Side {
                task: TaskId(e),
                kernel: self.kernels[self.local(e)],
                io: pair.1,
            },
            later: Side {
                task: TaskId(t),
                kernel: self.kernels[ti],
                io: pair.0,
            },
        })
    }
}

/// Checks a finished graph: every task in id order with the predecessors its edges give.
pub fn check_storage(g: &TaskGraphStorage) -> Result<(), Unordered> {
    let mut preds: Vec<Vec<u32>> = vec![Vec::new(); g.len()];
    for (p, s) in g.edges() {
        preds[s.index()].push(p.0);
    }
    let mut c = OrderChecker::new();
    for (i, n) in g.tasks.iter().enumerate() {
        for &p in &preds[i] {
            c.edge(TaskId(p));
        }
        c.task(TaskId(i as u32), n.kernel, g.io_of(TaskId(i as u32)))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Access, Region};

    fn io(col: u32, cols: u32, access: Access) -> TaskIo {
        TaskIo::new(Region::new_2d(0, 0, 1, col, cols), access)
    }

    #[test]
    fn a_path_through_a_third_task_orders_a_pair_and_a_missing_one_is_named() {
        let mut c = OrderChecker::new();
        c.task(TaskId(0), 7, &[io(0, 4, Access::Out)]).unwrap();
        c.edge(TaskId(0));
        c.task(TaskId(1), 8, &[io(8, 4, Access::Out)]).unwrap();
        // Task 2 reads what 0 wrote, ordered only through 1 (0 -> 1 -> 2).
        c.edge(TaskId(1));
        c.task(TaskId(2), 9, &[io(2, 1, Access::In)]).unwrap();
        // Task 3 writes over 1's region with no edge at all.
        let e = c
            .task(TaskId(3), 10, &[io(9, 2, Access::InOut)])
            .unwrap_err();
        assert_eq!(e.earlier.task, TaskId(1));
        assert_eq!(e.earlier.kernel, 8);
        assert_eq!(e.later.task, TaskId(3));
        assert_eq!(e.later.io, io(9, 2, Access::InOut));
        assert_eq!(e.earlier.io, io(8, 4, Access::Out));
    }

    #[test]
    fn retired_tasks_count_as_ordered() {
        let mut c = OrderChecker::new();
        c.task(TaskId(0), 0, &[io(0, 4, Access::Out)]).unwrap();
        c.task(TaskId(1), 0, &[io(4, 4, Access::Out)]).unwrap();
        c.retire_before(TaskId(1));
        c.task(TaskId(2), 0, &[io(0, 4, Access::In)]).unwrap();
        assert_eq!(
            c.task(TaskId(3), 0, &[io(4, 1, Access::In)])
                .unwrap_err()
                .earlier
                .task,
            TaskId(1)
        );
    }
}
