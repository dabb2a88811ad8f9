//! Release timing (`timing POLICY`, `docs/SEMANTICS.md`): when a task the orchestrator has
//! submitted is *released*, that is, may start once its predecessors are done.
//!
//! Why a piece of its own: the same rule must hold in the host's streamed runs (which seal a
//! task only when it is released) and in the cycle model (`pto_wsp_cpu::sim`), so both read this
//! one definition, with their own clock (nanoseconds on the host, cycles in the model):
//!
//! - `immediate`: a task is released when it is submitted;
//! - `batched(n)`: in groups of `n` consecutive tasks, a group when its last task is submitted;
//! - `interleaved(n)`: in rounds, each of up to `n` tasks from every stream in stream order
//!   (`B0C0 B0C1 B1C0 B1C1 …` for `n = 2`), a round once every stream has `n` tasks waiting;
//! - `rate_limit(n)`: at most `n` releases in any [`RATE_PERIOD`] of the clock; the orchestrator
//!   waits ([`ReleaseTiming::wait_until`]) before submitting a task that would exceed it.
//!
//! Groups and rounds still held are released by [`ReleaseTiming::flush`], which the
//! orchestrator calls when it ends and before it waits for any completion (a full task window, a
//! computed read): a held task cannot complete, so waiting on one would never end.
//!
//! Promise: every task passed to [`ReleaseTiming::submitted`] is released exactly once, by that
//! call or a later `submitted` / `flush`; in submission order except for `interleaved`.

use std::collections::VecDeque;

use pto_wsp_ir::Timing;

use crate::types::TaskId;

/// Clock units over which `rate_limit(n)` allows `n` releases: 1 µs in nanoseconds on the host,
/// 1,000 cycles in the cycle model (a nominal 1 GHz).
pub const RATE_PERIOD: u64 = 1_000;

/// The release rule of one run (see the module docs).
#[derive(Debug)]
pub struct ReleaseTiming {
    timing: Timing,
    batch: Vec<TaskId>,
    by_stream: Vec<VecDeque<TaskId>>,
    recent: VecDeque<u64>,
    held_peak: usize,
}

impl ReleaseTiming {
    /// The rule for `timing` over `streams` streams (`interleaved` rounds go over them; a task's
    /// stream is taken modulo `streams`). A count of 0 in the policy counts as 1.
    pub fn new(timing: &Timing, streams: u64) -> ReleaseTiming {
        let timing = match *timing {
            Timing::Batched(n) => Timing::Batched(n.max(1)),
            Timing::Interleaved(n) => Timing::Interleaved(n.max(1)),
            Timing::RateLimit(n) => Timing::RateLimit(n.max(1)),
            Timing::Immediate => Timing::Immediate,
        };
        let streams = match timing {
            Timing::Interleaved(_) => streams.clamp(1, 1 << 16) as usize,
            _ => 0,
        };
        ReleaseTiming {
            timing,
            batch: Vec::new(),
            by_stream: vec![VecDeque::new(); streams],
            recent: VecDeque::new(),
            held_peak: 0,
        }
    }

    /// Whether every task is released as it is submitted.
    pub fn is_immediate(&self) -> bool {
        matches!(self.timing, Timing::Immediate)
    }

    /// Under `rate_limit`: the clock value before which the next submission may not be
    /// released, if that is later than `now`. `None`: submit now.
    pub fn wait_until(&self, now: u64) -> Option<u64> {
        let Timing::RateLimit(n) = self.timing else {
            return None;
        };
        if (self.recent.len() as u64) < n {
            return None;
        }
        let free = self.recent[0] + RATE_PERIOD;
        (free > now).then_some(free)
    }

    /// `task` of `stream` was submitted at `now` (after [`ReleaseTiming::wait_until`] said
    /// nothing, under `rate_limit`): passes each task this releases to `release`.
    pub fn submitted(
        &mut self,
        task: TaskId,
        stream: u32,
        now: u64,
        mut release: impl FnMut(TaskId),
    ) {
        match self.timing {
            Timing::Immediate => release(task),
            Timing::Batched(n) => {
                self.batch.push(task);
                if self.batch.len() as u64 >= n {
                    self.batch.drain(..).for_each(release);
                }
            }
            Timing::Interleaved(n) => {
                let s = stream as usize % self.by_stream.len();
                self.by_stream[s].push_back(task);
                while self.by_stream.iter().all(|q| q.len() as u64 >= n) {
                    self.round(n, &mut release);
                }
            }
            Timing::RateLimit(n) => {
                if self.recent.len() as u64 >= n {
                    self.recent.pop_front();
                }
                self.recent.push_back(now);
                release(task);
            }
        }
        self.held_peak = self.held_peak.max(self.held());
    }

    /// Releases every group or round still held.
    pub fn flush(&mut self, mut release: impl FnMut(TaskId)) {
        self.batch.drain(..).for_each(&mut release);
        if let Timing::Interleaved(n) = self.timing {
            while self.by_stream.iter().any(|q| !q.is_empty()) {
                self.round(n, &mut release);
            }
        }
    }

    /// Tasks submitted and not yet released.
    pub fn held(&self) -> usize {
        self.batch.len() + self.by_stream.iter().map(VecDeque::len).sum::<usize>()
    }

    /// The most tasks held at once so far.
    pub fn held_peak(&self) -> usize {
        self.held_peak
    }

    /// One `interleaved(n)` round: up to `n` tasks of each stream, in stream order.
    fn round(&mut self, n: u64, release: &mut impl FnMut(TaskId)) {
        for q in &mut self.by_stream {
            for _ in 0..n {
                match q.pop_front() {
                    Some(t) => release(t),
                    None => break,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Submits tasks `0..streams.len()` (task `i` of stream `streams[i]`) at time `10 i`,
    /// waiting as told; returns each release as (task, time).
    fn drive(timing: Timing, nstreams: u64, streams: &[u32]) -> Vec<(u32, u64)> {
        let mut r = ReleaseTiming::new(&timing, nstreams);
        let mut out = Vec::new();
        let mut now = 0;
        for (i, &s) in streams.iter().enumerate() {
            now = now.max(10 * i as u64);
            if let Some(t) = r.wait_until(now) {
                assert!(t > now);
                now = t;
            }
            r.submitted(TaskId(i as u32), s, now, |t| out.push((t.0, now)));
        }
        r.flush(|t| out.push((t.0, now)));
        assert_eq!(r.held(), 0);
        out
    }

    #[test]
    fn immediate_releases_each_task_when_submitted() {
        let got = drive(Timing::Immediate, 1, &[0; 3]);
        assert_eq!(got, vec![(0, 0), (1, 10), (2, 20)]);
    }

    #[test]
    fn batches_release_whole_groups_and_the_tail_at_the_end() {
        let got = drive(Timing::Batched(2), 1, &[0; 5]);
        assert_eq!(got, vec![(0, 10), (1, 10), (2, 30), (3, 30), (4, 40)]);
    }

    #[test]
    fn interleaving_takes_n_from_each_stream_in_turn() {
        let got: Vec<u32> = drive(Timing::Interleaved(2), 2, &[0, 0, 0, 0, 1, 1, 1, 1])
            .into_iter()
            .map(|r| r.0)
            .collect();
        assert_eq!(got, vec![0, 1, 4, 5, 2, 3, 6, 7]);
    }

    #[test]
    fn rate_limits_pace_releases_per_period() {
        let got = drive(Timing::RateLimit(2), 1, &[0; 5]);
        assert_eq!(got, vec![(0, 0), (1, 10), (2, 1000), (3, 1010), (4, 2000)]);
    }
}
