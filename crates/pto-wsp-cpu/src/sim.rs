//! The cycle-cost model (`trace cycles`, seed 003 §7.3): given each task's cost in cycles and the
//! graph's edges, a deterministic simulated schedule of the run on the *modelled* executors (the
//! schedule's `executors N`, not the host's threads), and its makespan (`total_cycles`).
//!
//! Why a model beside the wall clock: the CPU simulation runs on a handful of host threads, while
//! the target has dozens of cores; a user comparing schedules wants to know what the schedule
//! would do there, independent of how loaded the host is. The model is a non-preemptive list
//! schedule:
//!
//! - a task is *ready* at the latest finish of its predecessors (0 for a source);
//! - ready tasks are taken in order of ready time, then task id (submission order);
//! - a task runs on an executor that may run it: its dispatch target if placement is on and that
//!   executor serves its pool, else any executor of its pool (vector / cube under a pool split,
//!   every executor otherwise), choosing the one that can start it earliest (lowest index on a
//!   tie); it starts at `max(ready, executor free)` and occupies the executor for its cost.
//!
//! Promises: the result depends only on the inputs (never on the host); `total_cycles` is at
//! least the critical path (longest cost-weighted path) and at least the total work divided by
//! the executors; with one executor it is exactly the total work.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use pto_wsp_ir::ExecPool;

/// One task as the model sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimTask {
    /// Cost in cycles.
    pub cost: u64,
    /// The pool it runs in.
    pub pool: ExecPool,
    /// The executor its dispatch policy chose, if any.
    pub target: Option<u32>,
}

/// The modelled machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimMachine {
    /// Number of executors (at least 1).
    pub executors: u32,
    /// Under a pool split: executors `0..vector` run vector tasks, the rest cube tasks (`Any`
    /// tasks run anywhere). `None`: every executor runs everything.
    pub vector: Option<u32>,
    /// Honour dispatch targets (`target mod executors`).
    pub placement: bool,
}

/// What the model reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CycleStats {
    /// Simulated makespan: the last finish time.
    pub total_cycles: u64,
    /// Sum of every task's cost.
    pub work_cycles: u64,
    /// Longest cost-weighted path through the graph (a lower bound of the makespan).
    pub critical_path: u64,
    /// Busy cycles per modelled executor.
    pub busy: Vec<u64>,
}

impl CycleStats {
    /// Busy cycles over `executors × total_cycles` (1.0 = every executor always busy).
    pub fn utilization(&self) -> f64 {
        let cap = self.total_cycles as f64 * self.busy.len() as f64;
        if cap == 0.0 {
            0.0
        } else {
            self.work_cycles as f64 / cap
        }
    }
}

/// Why the model could not run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    /// An edge names a task that does not exist.
    #[error("edge {pred} -> {succ} names a task beyond the {tasks} tasks")]
    BadEdge {
        /// Predecessor.
        pred: u32,
        /// Successor.
        succ: u32,
        /// Number of tasks.
        tasks: usize,
    },
    /// The edges contain a cycle (some tasks never become ready).
    #[error("the graph has a cycle: {stuck} task(s) never become ready")]
    Cycle {
        /// Tasks left unscheduled.
        stuck: usize,
    },
}

/// Simulates `tasks` with `edges` (predecessor, successor) on `machine` (see the module docs).
pub fn simulate(
    tasks: &[SimTask],
    edges: &[(u32, u32)],
    machine: &SimMachine,
) -> Result<CycleStats, SimError> {
    let n = tasks.len();
    let execs = machine.executors.max(1) as usize;
    // CSR successors.
    let mut first = vec![0u32; n + 1];
    for &(p, s) in edges {
        if p as usize >= n || s as usize >= n {
            return Err(SimError::BadEdge {
                pred: p,
                succ: s,
                tasks: n,
            });
        }
        first[p as usize + 1] += 1;
    }
    for i in 0..n {
        first[i + 1] += first[i];
    }
    let mut fill = first.clone();
    let mut succ = vec![0u32; edges.len()];
    let mut fanin = vec![0u32; n];
    for &(p, s) in edges {
        succ[fill[p as usize] as usize] = s;
        fill[p as usize] += 1;
        fanin[s as usize] += 1;
    }

    let vector = machine
        .vector
        .map(|v| (v as usize).clamp(1, execs.saturating_sub(1).max(1)));
    let serves = |e: usize, pool: ExecPool| match (vector, pool) {
        (None, _) | (_, ExecPool::Any) => true,
        (Some(v), ExecPool::Vector) => e < v,
        (Some(v), ExecPool::Cube) => e >= v || execs == 1,
    };

    let mut ready_at = vec![0u64; n];
    let mut path = vec![0u64; n];
    let mut free = vec![0u64; execs];
    let mut busy = vec![0u64; execs];
    let mut heap: BinaryHeap<Reverse<(u64, u32)>> = (0..n as u32)
        .filter(|&t| fanin[t as usize] == 0)
        .map(|t| Reverse((0, t)))
        .collect();
    let (mut makespan, mut work, mut critical, mut done) = (0u64, 0u64, 0u64, 0usize);
    while let Some(Reverse((ready, t))) = heap.pop() {
        let task = &tasks[t as usize];
        let placed = task
            .target
            .filter(|_| machine.placement)
            .map(|x| x as usize % execs)
            .filter(|&e| serves(e, task.pool));
        let e = match placed {
            Some(e) => e,
            None => (0..execs)
                .filter(|&e| serves(e, task.pool))
                .min_by_key(|&e| (free[e].max(ready), e))
                .unwrap_or(0),
        };
        let start = free[e].max(ready);
        let end = start.saturating_add(task.cost);
        free[e] = end;
        busy[e] += task.cost;
        work += task.cost;
        makespan = makespan.max(end);
        let through = path[t as usize].saturating_add(task.cost);
        critical = critical.max(through);
        done += 1;
        for &s in &succ[first[t as usize] as usize..first[t as usize + 1] as usize] {
            let s = s as usize;
            ready_at[s] = ready_at[s].max(end);
            path[s] = path[s].max(through);
            fanin[s] -= 1;
            if fanin[s] == 0 {
                heap.push(Reverse((ready_at[s], s as u32)));
            }
        }
    }
    if done < n {
        return Err(SimError::Cycle { stuck: n - done });
    }
    Ok(CycleStats {
        total_cycles: makespan,
        work_cycles: work,
        critical_path: critical,
        busy,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn any(cost: u64) -> SimTask {
        SimTask {
            cost,
            pool: ExecPool::Any,
            target: None,
        }
    }

    fn machine(executors: u32) -> SimMachine {
        SimMachine {
            executors,
            vector: None,
            placement: false,
        }
    }

    #[test]
    fn a_chain_takes_its_total_cost_and_independent_tasks_spread() {
        let chain: Vec<_> = (1..=4).map(any).collect();
        let s = simulate(&chain, &[(0, 1), (1, 2), (2, 3)], &machine(3)).unwrap();
        assert_eq!(
            (s.total_cycles, s.critical_path, s.work_cycles),
            (10, 10, 10)
        );
        let ind = vec![any(5); 6];
        let s = simulate(&ind, &[], &machine(3)).unwrap();
        assert_eq!((s.total_cycles, s.critical_path), (10, 5));
        assert_eq!(s.busy, vec![10, 10, 10]);
        assert!((s.utilization() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn placement_and_pools_restrict_executors() {
        // Two tasks placed on executor 1: they serialise although executor 0 is free.
        let placed = vec![
            SimTask {
                target: Some(1),
                ..any(4)
            };
            2
        ];
        let mut m = machine(2);
        assert_eq!(simulate(&placed, &[], &m).unwrap().total_cycles, 4);
        m.placement = true;
        let s = simulate(&placed, &[], &m).unwrap();
        assert_eq!((s.total_cycles, s.busy.clone()), (8, vec![0, 8]));
        // Cube tasks on a 3-executor machine with one vector executor: two cube executors.
        let cube = vec![
            SimTask {
                pool: ExecPool::Cube,
                ..any(3)
            };
            4
        ];
        let m = SimMachine {
            executors: 3,
            vector: Some(1),
            placement: false,
        };
        let s = simulate(&cube, &[], &m).unwrap();
        assert_eq!((s.total_cycles, s.busy.clone()), (6, vec![0, 6, 6]));
    }

    #[test]
    fn bad_edges_and_cycles_are_errors() {
        let t = vec![any(1); 2];
        assert_eq!(
            simulate(&t, &[(0, 2)], &machine(1))
                .unwrap_err()
                .to_string(),
            "edge 0 -> 2 names a task beyond the 2 tasks"
        );
        assert_eq!(
            simulate(&t, &[(0, 1), (1, 0)], &machine(1)).unwrap_err(),
            SimError::Cycle { stuck: 2 }
        );
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    /// Longest cost-weighted path, computed independently (tasks in id order; every edge goes
    /// forward).
    fn longest_path(tasks: &[SimTask], edges: &[(u32, u32)]) -> u64 {
        let mut best = vec![0u64; tasks.len()];
        for s in 0..tasks.len() {
            let before = edges
                .iter()
                .filter(|e| e.1 as usize == s)
                .map(|e| best[e.0 as usize])
                .max()
                .unwrap_or(0);
            best[s] = before + tasks[s].cost;
        }
        best.into_iter().max().unwrap_or(0)
    }

    proptest! {
        #[test]
        fn bounds_hold_on_random_dags(
            costs in proptest::collection::vec(0u64..50, 1..40),
            picks in proptest::collection::vec((0usize..1000, 0usize..1000), 0..80),
            execs in 1u32..5,
        ) {
            let tasks: Vec<SimTask> = costs.iter().map(|&c| SimTask { cost: c, pool: ExecPool::Any, target: None }).collect();
            let n = tasks.len();
            let mut edges: Vec<(u32, u32)> = picks
                .iter()
                .filter(|_| n > 1)
                .map(|&(a, b)| {
                    let (a, b) = (a % n, b % n);
                    (a.min(b) as u32, a.max(b) as u32)
                })
                .filter(|e| e.0 != e.1)
                .collect();
            edges.sort();
            edges.dedup();
            let m = SimMachine { executors: execs, vector: None, placement: false };
            let s = simulate(&tasks, &edges, &m).unwrap();
            let work: u64 = costs.iter().sum();
            prop_assert_eq!(s.work_cycles, work);
            prop_assert_eq!(s.critical_path, longest_path(&tasks, &edges));
            prop_assert!(s.total_cycles >= s.critical_path);
            prop_assert!(s.total_cycles >= work.div_ceil(execs as u64));
            prop_assert!(s.total_cycles <= work);
            prop_assert_eq!(s.busy.iter().sum::<u64>(), work);
            let one = simulate(&tasks, &edges, &SimMachine { executors: 1, ..m }).unwrap();
            prop_assert_eq!(one.total_cycles, work);
        }
    }
}
