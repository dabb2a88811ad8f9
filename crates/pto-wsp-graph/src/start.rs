//! When execution starts relative to graph building (`StartPolicy`, the concurrency-mechanisms
//! specification's policy API).
//!
//! Why a separate piece: the builder (orchestration) reports each task that is ready the moment
//! it is sealed; whether that task may be handed to workers yet depends on the start policy.
//! [`StartGate`] sits between the two on the orchestration thread:
//!
//! - `immediate`: every ready task is released at once;
//! - `threshold(n)`: ready tasks are held until `n` tasks have been submitted (or orchestration
//!   ends), then released in the order they became ready, and from then on at once;
//! - `after_orchestration`: held until orchestration ends.
//!
//! Promise: every task passed to [`StartGate::ready`] is released exactly once, in the order it
//! became ready, and none before the policy allows or [`StartGate::force_open`] is called (which
//! the orchestrator does before it would stall on a full task window). No worker runs a task before
//! the gate opens, so before that moment the only source of ready tasks is the orchestration thread
//! itself: the gate needs no atomics.

use crate::types::TaskId;
use pto_wsp_ir::StartPolicy;

/// Holds ready tasks until the start policy lets execution begin.
#[derive(Debug)]
pub struct StartGate {
    /// Submissions needed to open; `None` = only at the end of orchestration.
    open_at: Option<u64>,
    submitted: u64,
    open: bool,
    held: Vec<TaskId>,
}

impl StartGate {
    /// A gate for `policy`. `threshold(0)` and `immediate` start open.
    pub fn new(policy: StartPolicy) -> StartGate {
        let open_at = match policy {
            StartPolicy::Immediate => Some(0),
            StartPolicy::Threshold(n) => Some(n),
            StartPolicy::AfterOrchestration => None,
        };
        StartGate {
            open_at,
            submitted: 0,
            open: open_at == Some(0),
            held: Vec::new(),
        }
    }

    /// Whether execution has started.
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// Tasks held back so far (not yet released).
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// A task was submitted. If this submission reaches the threshold, the gate opens and every
    /// held task is passed to `release`, oldest first.
    pub fn submitted(&mut self, release: impl FnMut(TaskId)) {
        self.submitted += 1;
        if self.open_at.is_some_and(|n| self.submitted >= n) {
            self.force_open(release);
        }
    }

    /// `task` became ready: released now if the gate is open, else held.
    pub fn ready(&mut self, task: TaskId, mut release: impl FnMut(TaskId)) {
        if self.open {
            release(task);
        } else {
            self.held.push(task);
        }
    }

    /// Orchestration has ended: the gate opens (whatever the policy) and releases what it held.
    pub fn orchestration_done(&mut self, release: impl FnMut(TaskId)) {
        self.force_open(release);
    }

    /// Opens the gate now, whatever the policy, releasing what it held. The orchestrator must
    /// call this before it blocks on anything that waits for task completions — a full task
    /// window in stall mode — because no held task can complete while the gate is shut: a
    /// `threshold(n)` or `after_orchestration` start with a window smaller than the graph would
    /// otherwise wait forever. (The start is then earlier than the policy asked; the window wins.)
    pub fn force_open(&mut self, release: impl FnMut(TaskId)) {
        if !self.open {
            self.open = true;
            self.held.drain(..).for_each(release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drives a gate: each step submits one task that is ready at once iff `ready[i]`; returns
    /// for each released task the number of submissions made when it was released.
    fn drive(policy: StartPolicy, ready: &[bool]) -> Vec<(TaskId, usize)> {
        let mut gate = StartGate::new(policy);
        let mut out = Vec::new();
        for (i, &r) in ready.iter().enumerate() {
            let t = TaskId(i as u32);
            if r {
                gate.ready(t, |x| out.push((x, i)));
            }
            gate.submitted(|x| out.push((x, i + 1)));
        }
        let n = ready.len();
        gate.orchestration_done(|x| out.push((x, n + 1)));
        out
    }

    #[test]
    fn immediate_releases_at_once() {
        let out = drive(StartPolicy::Immediate, &[true, false, true]);
        assert_eq!(out, vec![(TaskId(0), 0), (TaskId(2), 2)]);
    }

    #[test]
    fn threshold_holds_until_the_nth_submission_then_passes_through() {
        let out = drive(StartPolicy::Threshold(3), &[true, true, false, true, true]);
        // Tasks 0 and 1 are held and released at the third submission, in ready order; 3 and 4
        // pass straight through.
        assert_eq!(
            out,
            vec![
                (TaskId(0), 3),
                (TaskId(1), 3),
                (TaskId(3), 3),
                (TaskId(4), 4)
            ]
        );
    }

    #[test]
    fn threshold_never_reached_opens_at_the_end() {
        let out = drive(StartPolicy::Threshold(10), &[true, true]);
        assert_eq!(out, vec![(TaskId(0), 3), (TaskId(1), 3)]);
    }

    #[test]
    fn after_orchestration_holds_everything_until_the_end() {
        let out = drive(StartPolicy::AfterOrchestration, &[true, false, true, true]);
        assert_eq!(out, vec![(TaskId(0), 5), (TaskId(2), 5), (TaskId(3), 5)]);
    }

    #[test]
    fn threshold_zero_is_immediate() {
        let gate = StartGate::new(StartPolicy::Threshold(0));
        assert!(gate.is_open());
        assert_eq!(gate.held(), 0);
    }
}
