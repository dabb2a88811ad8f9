//! CSP pipelines on threads: every process of a pipeline runs as its own sequential program on
//! its own thread, and its channels are bounded FIFOs of their declared depth.
//!
//! Why: a pipeline is a *program*, not a task graph. Its processes reuse buffers (tile `t` goes
//! to staging buffer `t % n`), and what makes that safe is the channel depth, which bounds how
//! far a producer runs ahead of its consumer. The reference expander runs a pipeline as a Kahn
//! network with unbounded channels, one process at a time — right for *which* tasks run, but a
//! task graph inferred from that order would let the loader of tile `t + n` overwrite a buffer
//! the computer of tile `t` has not read yet. Running the processes for real, with the channels
//! they declare, is the execution the format means.
//!
//! Promises:
//! - One thread per process. A process runs its statements in order and runs each of its tasks
//!   itself, to completion, before going on (a process is sequential); `send` waits while its
//!   channel holds `depth` tokens, `consume` waits while its channel is empty and open; a
//!   channel is closed when its producer ends, which ends the consumer's `consume` loop once the
//!   channel is drained. The tasks each process runs are exactly its tasks in the reference
//!   expansion.
//! - **Deadlock is reported, never a hang.** Processes block only on channels, and the monitor
//!   checks, whenever a process is about to wait or ends, whether every unfinished process waits
//!   on a channel that cannot serve it. Then the run stops at once with [`Deadlock`], naming each
//!   waiting process, its channel, whether it sends or receives, and the channel's state. This
//!   is exact (no timeout): it catches the deadlocks of bounded channels that the unbounded
//!   reference expander cannot see, such as a producer waiting on a full channel whose consumer
//!   has ended.
//! - **Unordered accesses are found whatever the timing.** Processes are ordered only through
//!   their channels. Every task's regions and every computed read are recorded, before they
//!   are touched, with the process's vector clock ([`crate::hb`]: a token carries its sender's
//!   clock; a bounded channel's send `s` is after its receive `s - depth`; a closed channel's
//!   end is after its producer's last statement). Two accesses of different processes to
//!   overlapping regions, one writing, that these edges do not order fail the run with
//!   [`CspError::Race`], naming the tensor, both regions, both processes and both statements
//!   (`file:line:column` when rendered) — on every run, not only when they happen to overlap in
//!   time. A pipeline whose accesses are all ordered never fails so.
//! - **Sound whatever the pipeline.** The regions of running tasks are also checked
//!   ([`ConflictChecker`]): a task that would touch a region another process's running task
//!   writes (or write one it reads) fails the run with [`CspError::Conflict`], naming both
//!   tasks, before it touches anything — it never races. (The happens-before check above finds
//!   every such pair first; this one is the memory-safety backstop.)
//! - A kernel failure, a panic or an expansion error in one process stops every process (they
//!   see the stop at their next channel operation or task) and is the run's error.
//! - **Computed reads** (`docs/SEMANTICS.md`, "Computed reads") are served from the store, when
//!   the generator reaches them. A process runs each of its own tasks to completion before its
//!   next statement, so its earlier writes are complete; another process's task that came
//!   before a `send` the reader has received had completed before that send, and the channel's
//!   lock orders its writes before the read. So a read sees every write the channel order puts
//!   before it — what tasks see. Like a task, a read is admitted by the [`ConflictChecker`] for
//!   the time it reads: a read whose box another process's running task writes (or a task that
//!   would write a box a read is reading) fails the run with [`CspError::ReadConflict`], naming
//!   the read (tensor, box, place) and the task — it never races. Whether the value equals the
//!   sequential reference run's is the buffer rule of tasks: it does when no buffer is
//!   overwritten before it is read (a buffer reused every `n` tokens with `n >= depth + 2`).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::fmt;
use std::ops::ControlFlow;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Instant;

use pto_wsp_graph::types::{MAX_RANK, Region, TaskIo};
use pto_wsp_ir::{
    Bindings, ChannelPort, DataRead, ExpandOptions, ExpandSink, ExpandedTask, Loc, OrderEdge,
    Pipeline, ReadRefused, Resolved, Value, expand_process,
};
use pto_wsp_kernels::{
    Conflict, ConflictChecker, KernelId, KernelRegistry, TaskContext, TensorStore,
};

use crate::hb::{HbLedger, Race as HbRace, VectorClock};
use crate::pool::panic_message;
use crate::sim::{CspStep, CspTrace, simulate_pipeline};
use crate::stats::{RunStats, Span};
use crate::sync::{AtomicU32, Condvar, Mutex, MutexGuard, Ordering, lock, wait};

/// What a process waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitOp {
    /// Room in a full channel, to send.
    Send,
    /// A token from an empty, open channel.
    Receive,
}

/// One process waiting when a pipeline deadlocked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Waiting {
    /// The process.
    pub process: String,
    /// The channel it waits on.
    pub channel: String,
    /// Whether it waits to send or to receive.
    pub op: WaitOp,
    /// Tokens in the channel.
    pub tokens: usize,
    /// The channel's depth.
    pub depth: u64,
    /// The process at the other end of the channel, and whether it has ended.
    pub peer: Option<(String, bool)>,
}

impl fmt::Display for Waiting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (verb, state) = match self.op {
            WaitOp::Send => (
                "to send on",
                format!("full, {}/{}", self.tokens, self.depth),
            ),
            WaitOp::Receive => ("to receive from", "empty".to_string()),
        };
        write!(
            f,
            "process `{}` waits {verb} channel `{}` ({state}",
            self.process, self.channel
        )?;
        match &self.peer {
            Some((p, true)) => write!(f, "; `{p}`, at its other end, has ended)"),
            Some((p, false)) => write!(f, "; `{p}` is at its other end)"),
            None => f.write_str(")"),
        }
    }
}

/// Every unfinished process of a pipeline waits on a channel that cannot serve it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deadlock {
    /// The pipeline.
    pub pipeline: String,
    /// Each waiting process, in declaration order.
    pub waiting: Vec<Waiting>,
    /// Processes that had ended.
    pub ended: Vec<String>,
}

impl fmt::Display for Deadlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "deadlock in pipeline `{}`: ", self.pipeline)?;
        for (i, w) in self.waiting.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{w}")?;
        }
        if !self.ended.is_empty() {
            write!(f, " (ended: {})", self.ended.join(", "))?;
        }
        Ok(())
    }
}

/// Why a pipeline run failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CspError {
    /// The processes deadlocked (see [`Deadlock`]).
    #[error("{0}")]
    Deadlock(Deadlock),
    /// A task's kernel returned an error or panicked, or its region lies outside its tensor.
    #[error(
        "process `{process}`, its task #{task} (kernel `{kernel}`) {}: {message}",
        if *panicked { "panicked" } else { "failed" }
    )]
    Task {
        /// The process.
        process: String,
        /// The task's index among the process's tasks.
        task: u32,
        /// The kernel.
        kernel: String,
        /// What went wrong.
        message: String,
        /// Whether the kernel panicked.
        panicked: bool,
    },
    /// Two processes' accesses (tasks or computed reads) touch overlapping regions, one
    /// writing, and no channel orders them (see [`Race`]); found whatever the timing.
    #[error("{0}")]
    Race(Box<Race>),
    /// Two processes' tasks would have touched conflicting regions at the same time.
    #[error("{0}")]
    Conflict(Box<TaskConflict>),
    /// A computed read and another process's running task touched the same box at the same
    /// time, the task writing it (see [`ReadConflict`]).
    #[error("{0}")]
    ReadConflict(Box<ReadConflict>),
    /// Generating a process's tasks failed (an expansion error).
    #[error("process `{process}`: {message}")]
    Process {
        /// The process.
        process: String,
        /// What went wrong.
        message: String,
    },
    /// The module's entry is not a pipeline, or a process thread could not start.
    #[error("{0}")]
    Setup(String),
}

/// One access of a [`Race`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RaceSide {
    /// The process.
    pub process: String,
    /// The statement: `task #3 (kernel `load_tile`)`, or `computed read`.
    pub what: String,
    /// Its access and region, e.g. `out Stage[0..256, 0..1024]`.
    pub access: String,
    /// Where the statement is written ([`Loc::NONE`] when not known).
    pub loc: Loc,
}

impl fmt::Display for RaceSide {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "process `{}`'s {}", self.process, self.what)
    }
}

/// Two accesses of different processes to overlapping regions of one tensor, at least one
/// writing, that no channel orders (see [`CspError::Race`]). `first` is the access of the
/// process declared first, so the same pair reads the same whichever was made first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Race {
    /// The tensor.
    pub tensor: String,
    /// The access of the process declared first.
    pub first: RaceSide,
    /// The other.
    pub second: RaceSide,
}

impl fmt::Display for Race {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "tensor `{}`: {} ({}) and {} ({}) overlap, one writing, and no channel orders them: \
             a process's accesses are ordered after another's only by a token sent after them, \
             or by the room taken from a full channel, so a buffer is reused while another \
             process may still use it (use more buffers, or a smaller channel depth)",
            self.tensor, self.first, self.first.access, self.second, self.second.access
        )
    }
}

/// A task that was about to start while another process's running task held a conflicting
/// region (see [`CspError::Conflict`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskConflict {
    /// The process whose task was about to start.
    pub process: String,
    /// Its task's index among the process's tasks.
    pub task: u32,
    /// Its kernel.
    pub kernel: String,
    /// Its access and region, e.g. `out Stage[0..256, 0..1024]`.
    pub access: String,
    /// The process whose task was running.
    pub other_process: String,
    /// That task's index among its process's tasks.
    pub other_task: u32,
    /// Its kernel.
    pub other_kernel: String,
    /// Its access and region.
    pub other_access: String,
}

impl fmt::Display for TaskConflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "process `{}`, its task #{} (kernel `{}`, {}) conflicts with process `{}`'s running \
             task #{} (kernel `{}`, {}), and one of them writes: only channels order the tasks \
             of different processes, so a buffer is reused while another process still uses it \
             (use more buffers, or a smaller channel depth)",
            self.process,
            self.task,
            self.kernel,
            self.access,
            self.other_process,
            self.other_task,
            self.other_kernel,
            self.other_access
        )
    }
}

/// A computed read that overlapped, in time and in its box, a task of another process that
/// writes the box (see [`CspError::ReadConflict`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadConflict {
    /// The process that reads.
    pub process: String,
    /// The box read, e.g. `K[1..2, 0..1]`.
    pub read: String,
    /// Where the read is written (the `load`, or the loop of a ragged / sparse axis).
    pub loc: Loc,
    /// The process whose task writes the box.
    pub task_process: String,
    /// That task's index among its process's tasks.
    pub task: u32,
    /// Its kernel.
    pub kernel: String,
    /// Its access and region.
    pub access: String,
}

impl fmt::Display for ReadConflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "process `{}`, its computed read of {} overlaps process `{}`'s running task #{} \
             (kernel `{}`, {}), which writes it: only channels order the processes, so a \
             buffer is overwritten while another process reads it (use more buffers, or a \
             smaller channel depth)",
            self.process, self.read, self.task_process, self.task, self.kernel, self.access
        )
    }
}

impl pto_wsp_ir::Diagnostic for CspError {
    /// Where in the source the run failed, when known (a [`CspError::ReadConflict`]: the read;
    /// a [`CspError::Race`]: the first process's statement); [`Loc::NONE`] otherwise.
    fn loc(&self) -> Loc {
        match self {
            CspError::ReadConflict(c) => c.loc,
            CspError::Race(r) => r.first.loc,
            _ => Loc::NONE,
        }
    }

    fn label(&self) -> Option<String> {
        match self {
            CspError::Race(r) => Some(r.first.to_string()),
            _ => None,
        }
    }

    /// A [`CspError::Race`]: the other process's statement.
    fn related(&self) -> Vec<(Loc, String)> {
        match self {
            CspError::Race(r) => vec![(r.second.loc, r.second.to_string())],
            _ => Vec::new(),
        }
    }
}

/// Options of [`run_pipeline`].
#[derive(Clone, Copy, Debug)]
pub struct CspOptions {
    /// Record every task's wall-clock span (the "worker" of a span is its process index).
    pub trace: bool,
    /// Record each process's steps (task costs, sends, receives) and run the cycle model
    /// ([`crate::sim::simulate_pipeline`]) into [`RunStats::cycles`].
    pub cycles: bool,
    /// Check every access against the other processes' accesses the channels do not order
    /// before it (on by default; module docs): an unordered pair then fails every run. Off,
    /// only the regions *in flight* are compared (still memory-safe, but an unordered pair is
    /// found only when both happen to run at once); for measuring what the check costs.
    pub check_order: bool,
}

impl Default for CspOptions {
    fn default() -> CspOptions {
        CspOptions {
            trace: false,
            cycles: false,
            check_order: true,
        }
    }
}

/// A channel's state.
struct Chan {
    /// Tokens, each with its sender's clock at the send.
    queue: VecDeque<(Value, VectorClock)>,
    depth: usize,
    closed: bool,
    /// Sends so far.
    sent: u64,
    /// The receiver's clock at each receive from number `acks_base` on (a send `depth` later
    /// is after it).
    acks: VecDeque<VectorClock>,
    acks_base: u64,
    /// The producer's clock when it ended (a consumer that sees the channel closed is after
    /// it).
    closed_clock: Option<VectorClock>,
    producer: Option<usize>,
    consumer: Option<usize>,
}

/// What every process thread shares: the channels, who waits on what, and the stop flag.
struct State {
    chans: Vec<Chan>,
    waiting: Vec<Option<(u32, WaitOp)>>,
    ended: Vec<bool>,
    stop: bool,
    deadlock: Option<Deadlock>,
}

struct Monitor<'p> {
    pipeline: &'p Pipeline,
    state: Mutex<State>,
    changed: Condvar,
}

impl Monitor<'_> {
    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Whether the channel `ch` can serve `op` now.
    fn ready(st: &State, ch: u32, op: WaitOp) -> bool {
        let c = &st.chans[ch as usize];
        match op {
            WaitOp::Send => c.queue.len() < c.depth,
            WaitOp::Receive => !c.queue.is_empty() || c.closed,
        }
    }

    /// If every unfinished process waits on a channel that cannot serve it, records the
    /// deadlock and stops the run. Called with the lock held, after a state change.
    fn check_deadlock(&self, st: &mut State) {
        if st.stop || st.ended.iter().all(|&e| e) {
            return;
        }
        let stuck = (0..st.ended.len())
            .all(|p| st.ended[p] || st.waiting[p].is_some_and(|(ch, op)| !Self::ready(st, ch, op)));
        if !stuck {
            return;
        }
        let procs = &self.pipeline.processes;
        let name = |p: usize| procs[p].name.name.clone();
        let waiting = (0..st.ended.len())
            .filter(|&p| !st.ended[p])
            .filter_map(|p| {
                let (ch, op) = st.waiting[p]?;
                let c = &st.chans[ch as usize];
                let peer = match op {
                    WaitOp::Send => c.consumer,
                    WaitOp::Receive => c.producer,
                };
                Some(Waiting {
                    process: name(p),
                    channel: self.pipeline.channels[ch as usize].name.name.clone(),
                    op,
                    tokens: c.queue.len(),
                    depth: self.pipeline.channels[ch as usize].depth,
                    peer: peer.map(|q| (name(q), st.ended[q])),
                })
            })
            .collect();
        let ended = (0..st.ended.len())
            .filter(|&p| st.ended[p])
            .map(name)
            .collect();
        st.deadlock = Some(Deadlock {
            pipeline: self.pipeline.name.name.clone(),
            waiting,
            ended,
        });
        st.stop = true;
        self.changed.notify_all();
    }

    /// Waits until channel `ch` can serve `op` for process `p`; `None` if the run stopped.
    fn wait_for<'s>(
        &'s self,
        mut st: MutexGuard<'s, State>,
        p: usize,
        ch: u32,
        op: WaitOp,
    ) -> Option<MutexGuard<'s, State>> {
        loop {
            if st.stop {
                return None;
            }
            if Self::ready(&st, ch, op) {
                return Some(st);
            }
            st.waiting[p] = Some((ch, op));
            self.check_deadlock(&mut st);
            if st.stop {
                st.waiting[p] = None;
                return None;
            }
            st = wait(&self.changed, st);
            st.waiting[p] = None;
        }
    }

    /// Process `p` ended with clock `clock`: its channels close.
    fn end(&self, p: usize, produces: &[u32], clock: &VectorClock) {
        let mut st = self.lock();
        st.ended[p] = true;
        st.waiting[p] = None;
        for &ch in produces {
            let c = &mut st.chans[ch as usize];
            c.closed = true;
            c.closed_clock = Some(clock.clone());
        }
        self.changed.notify_all();
        self.check_deadlock(&mut st);
    }

    /// Stops every process (a failure).
    fn stop(&self) {
        let mut st = self.lock();
        st.stop = true;
        self.changed.notify_all();
    }

    fn stopped(&self) -> bool {
        self.lock().stop
    }
}

/// Process `p`'s end of the channels.
struct Port<'m, 'p, 'l> {
    monitor: &'m Monitor<'p>,
    process: usize,
    /// The process's vector clock, advanced by its channel operations ([`crate::hb`]).
    clock: &'l RefCell<VectorClock>,
    /// The process's steps, when the cycle model is on.
    log: Option<&'l RefCell<Vec<CspStep>>>,
}

impl ChannelPort for Port<'_, '_, '_> {
    fn send(&mut self, channel: u32, value: Value) -> ControlFlow<()> {
        let m = self.monitor;
        let st = m.lock();
        let Some(mut st) = m.wait_for(st, self.process, channel, WaitOp::Send) else {
            return ControlFlow::Break(());
        };
        let c = &mut st.chans[channel as usize];
        let mut clock = self.clock.borrow_mut();
        // Send `s` completes only after receive `s - depth`: it is after that receive.
        if let Some(k) = c.sent.checked_sub(c.depth as u64) {
            while c.acks_base < k && c.acks.len() > 1 {
                c.acks.pop_front();
                c.acks_base += 1;
            }
            if c.acks_base == k
                && let Some(ack) = c.acks.front()
            {
                clock.merge(ack);
            }
        }
        c.queue.push_back((value, clock.clone()));
        c.sent += 1;
        clock.tick(self.process);
        m.changed.notify_all();
        if let Some(l) = self.log {
            l.borrow_mut().push(CspStep::Send(channel));
        }
        ControlFlow::Continue(())
    }

    fn recv(&mut self, channel: u32) -> ControlFlow<(), Option<Value>> {
        let m = self.monitor;
        let st = m.lock();
        let Some(mut st) = m.wait_for(st, self.process, channel, WaitOp::Receive) else {
            return ControlFlow::Break(());
        };
        let c = &mut st.chans[channel as usize];
        let mut clock = self.clock.borrow_mut();
        let v = match c.queue.pop_front() {
            Some((v, sent)) => {
                clock.merge(&sent);
                c.acks.push_back(clock.clone());
                clock.tick(self.process);
                m.changed.notify_all();
                Some(v)
            }
            None => {
                if let Some(end) = &c.closed_clock {
                    clock.merge(end);
                }
                None
            }
        };
        if let Some(l) = self.log {
            l.borrow_mut().push(match v {
                Some(_) => CspStep::Recv(channel),
                None => CspStep::Closed(channel),
            });
        }
        ControlFlow::Continue(v)
    }
}

/// What a global id the [`ConflictChecker`] knows stands for.
#[derive(Clone, Copy, Debug)]
enum Started {
    /// Task `index` of `process`, running module kernel `kernel`, its statement at `loc`.
    Task {
        process: usize,
        index: u32,
        kernel: u32,
        loc: Loc,
    },
    /// A computed read of `process`, written at `loc`.
    Read { process: usize, loc: Loc },
}

/// What every process's task runner shares.
struct Shared<'a> {
    store: &'a TensorStore,
    registry: &'a KernelRegistry,
    kernels: &'a [Option<KernelId>],
    names: &'a [String],
    /// The pipeline's process names, by index.
    processes: Vec<String>,
    checker: ConflictChecker,
    /// Every access with the clock it was made at (module docs).
    hb: Mutex<HbLedger<Started>>,
    /// Whether [`Shared::order`] checks ([`CspOptions::check_order`]).
    check_order: bool,
    /// What each global id the checker was given stands for.
    started: Mutex<Vec<Option<Started>>>,
    next_id: AtomicU32,
    t0: Instant,
    trace: bool,
}

impl<'a> Shared<'a> {
    /// The state the runners of `pipeline` share, with no process started.
    fn new(
        store: &'a TensorStore,
        registry: &'a KernelRegistry,
        kernels: &'a [Option<KernelId>],
        names: &'a [String],
        pipeline: &Pipeline,
        trace: bool,
    ) -> Shared<'a> {
        Shared {
            store,
            registry,
            kernels,
            names,
            processes: pipeline
                .processes
                .iter()
                .map(|p| p.name.name.clone())
                .collect(),
            checker: ConflictChecker::new(),
            hb: Mutex::new(HbLedger::new(pipeline.processes.len())),
            check_order: true,
            started: Mutex::new(Vec::new()),
            next_id: AtomicU32::new(0),
            t0: Instant::now(),
            trace,
        }
    }

    fn kernel_name(&self, k: u32) -> String {
        self.names
            .get(k as usize)
            .cloned()
            .unwrap_or_else(|| format!("kernel#{k}"))
    }

    fn process_name(&self, p: usize) -> String {
        self.processes
            .get(p)
            .cloned()
            .unwrap_or_else(|| "?".to_string())
    }

    /// `Stage[0..256, 0..1024]`.
    fn region_text(&self, r: &Region) -> String {
        let rank = (r.rank as usize).min(MAX_RANK);
        let dims: Vec<String> = (0..rank)
            .map(|d| format!("{}..{}", r.start[d], r.end(d)))
            .collect();
        let tensor = if (r.tensor as usize) < self.store.len() {
            self.store.info(r.tensor).name.clone()
        } else {
            format!("tensor#{}", r.tensor)
        };
        format!("{tensor}[{}]", dims.join(", "))
    }

    /// `out Stage[0..256, 0..1024]`.
    fn describe(&self, r: &Region, access: pto_wsp_ir::Access) -> String {
        format!("{access} {}", self.region_text(r))
    }

    /// Records the access `what` of `process` to `io`, made at `clock`, in the happens-before
    /// ledger: the error naming both accesses when another process's access overlaps it, one
    /// writing, unordered.
    fn order(
        &self,
        process: usize,
        clock: &RefCell<VectorClock>,
        io: &[TaskIo],
        what: Started,
    ) -> Result<(), CspError> {
        if !self.check_order {
            return Ok(());
        }
        let r = lock(&self.hb).record(process, &clock.borrow(), io, what);
        r.map_err(|race| self.race_error(&race))
    }

    /// Process `p` makes no more accesses.
    fn ended(&self, p: usize) {
        lock(&self.hb).end(p);
    }

    /// The error for an unordered pair, the first declared process's access first.
    fn race_error(&self, race: &HbRace<Started>) -> CspError {
        let side = |a: &crate::hb::Access<Started>| {
            let (what, loc) = match a.what {
                Started::Task {
                    index, kernel, loc, ..
                } => (
                    format!("task #{index} (kernel `{}`)", self.kernel_name(kernel)),
                    loc,
                ),
                Started::Read { loc, .. } => ("computed read".to_string(), loc),
            };
            RaceSide {
                process: self.process_name(a.process),
                what,
                access: self.describe(&a.io.region, a.io.access()),
                loc,
            }
        };
        let (mut first, mut second) = (&race.earlier, &race.later);
        if first.process > second.process {
            std::mem::swap(&mut first, &mut second);
        }
        let t = first.io.region.tensor;
        let tensor = if (t as usize) < self.store.len() {
            self.store.info(t).name.clone()
        } else {
            format!("tensor#{t}")
        };
        CspError::Race(Box::new(Race {
            tensor,
            first: side(first),
            second: side(second),
        }))
    }

    /// Gives `what` (a task, or a computed read) a global id and admits its regions `io`
    /// through the checker: the id, to pass to `checker.end` when it is done, or the error
    /// naming both sides when a region conflicts with one in flight (another process's: a
    /// process does one thing at a time).
    fn admit(&self, what: Started, io: &[TaskIo]) -> Result<u32, CspError> {
        let gid = self.next_id.fetch_add(1, Ordering::Relaxed);
        {
            let mut started = lock(&self.started);
            if started.len() <= gid as usize {
                started.resize(gid as usize + 1, None);
            }
            started[gid as usize] = Some(what);
        }
        match self.checker.begin(gid, io) {
            Ok(()) => Ok(gid),
            Err(c) => Err(self.conflict_error(what, &c)),
        }
    }

    /// The error for `what`, refused by the checker because of the conflict `c` with a running
    /// task or read: which process, task and access on either side.
    fn conflict_error(&self, what: Started, c: &Conflict) -> CspError {
        let other = lock(&self.started)
            .get(c.running as usize)
            .copied()
            .flatten();
        let task_side = |process: usize, index: u32, kernel: u32, r: &Region, a| {
            (
                self.process_name(process),
                index,
                self.kernel_name(kernel),
                self.describe(r, a),
            )
        };
        let read_conflict =
            |process: usize, loc: Loc, read: &Region, task: (String, u32, String, String)| {
                CspError::ReadConflict(Box::new(ReadConflict {
                    process: self.process_name(process),
                    read: self.region_text(read),
                    loc,
                    task_process: task.0,
                    task: task.1,
                    kernel: task.2,
                    access: task.3,
                }))
            };
        match (what, other) {
            (
                Started::Read { process, loc },
                Some(Started::Task {
                    process: tp,
                    index,
                    kernel,
                    ..
                }),
            ) => read_conflict(
                process,
                loc,
                &c.region,
                task_side(tp, index, kernel, &c.running_region, c.running_access),
            ),
            (
                Started::Task {
                    process: tp,
                    index,
                    kernel,
                    ..
                },
                Some(Started::Read { process, loc }),
            ) => read_conflict(
                process,
                loc,
                &c.running_region,
                task_side(tp, index, kernel, &c.region, c.access),
            ),
            (
                Started::Task {
                    process,
                    index,
                    kernel,
                    ..
                },
                other,
            ) => {
                let (op, oi, ok) = match other {
                    Some(Started::Task {
                        process,
                        index,
                        kernel,
                        ..
                    }) => (self.process_name(process), index, self.kernel_name(kernel)),
                    _ => ("?".to_string(), c.running, "?".to_string()),
                };
                CspError::Conflict(Box::new(TaskConflict {
                    process: self.process_name(process),
                    task: index,
                    kernel: self.kernel_name(kernel),
                    access: self.describe(&c.region, c.access),
                    other_process: op,
                    other_task: oi,
                    other_kernel: ok,
                    other_access: self.describe(&c.running_region, c.running_access),
                }))
            }
            // Two reads never conflict (the checker's rule: one side writes).
            (Started::Read { .. }, _) => CspError::Setup(format!(
                "internal error: a computed read conflicts with id {}, which is no task",
                c.running
            )),
        }
    }
}

/// Runs the tasks one process generates, as they are generated.
struct TaskRunner<'a, 'm, 'p, 'l> {
    shared: &'a Shared<'a>,
    monitor: &'m Monitor<'p>,
    process: usize,
    /// The process's vector clock ([`crate::hb`]).
    clock: &'l RefCell<VectorClock>,
    /// The process's steps, when the cycle model is on.
    log: Option<&'l RefCell<Vec<CspStep>>>,
    io: Vec<TaskIo>,
    params: Vec<u64>,
    tasks: u64,
    spans: Vec<Span>,
    error: Option<CspError>,
    /// Computed reads served.
    reads: u64,
}

impl TaskRunner<'_, '_, '_, '_> {
    fn run(&mut self, index: u32, task: &ExpandedTask) -> Result<(), CspError> {
        let sh = self.shared;
        let (pname, kname) = (sh.process_name(self.process), sh.kernel_name(task.kernel));
        let fail = |message: String, panicked: bool| CspError::Task {
            process: pname.clone(),
            task: index,
            kernel: kname.clone(),
            message,
            panicked,
        };
        self.params.clear();
        self.params.extend(task.params.iter().map(|v| v.to_bits()));
        self.io.clear();
        for (i, r) in task.regions.iter().enumerate() {
            let region = Region::new(r.tensor, &r.start, &r.size)
                .map_err(|e| fail(format!("region {i}: {e}"), false))?;
            let io = TaskIo::new(region, r.access);
            sh.store
                .check_region(&io)
                .map_err(|e| fail(format!("region {i}: {e}"), false))?;
            self.io.push(io);
        }
        let Some(Some(id)) = sh.kernels.get(task.kernel as usize).copied() else {
            return Err(fail(
                "no implementation is registered for this kernel".into(),
                false,
            ));
        };
        let what = Started::Task {
            process: self.process,
            index,
            kernel: task.kernel,
            loc: task.loc,
        };
        sh.order(self.process, self.clock, &self.io, what)?;
        let gid = sh.admit(what, &self.io)?;
        let start = sh.t0.elapsed().as_nanos() as u64;
        // SAFETY: the store is borrowed for the whole run and nothing but tasks touch it
        // (`run_pipeline`'s contract); the checker admitted this task's regions, so no running
        // task of any process writes an element it reads or reads or writes an element it
        // writes until `end` below, after the context is dropped.
        let ctx =
            unsafe { TaskContext::new(sh.store, gid, self.process as u32, &self.params, &self.io) };
        if let Some(l) = self.log {
            // The `trace cycles(EXPR)` cost, else the kernel's cost function on the data the
            // task is about to see.
            let cost = task.cost.unwrap_or_else(|| sh.registry.cost(id, &ctx));
            l.borrow_mut().push(CspStep::Task(cost));
        }
        let r = catch_unwind(AssertUnwindSafe(|| sh.registry.call(id, &ctx)));
        drop(ctx);
        sh.checker.end(gid);
        if sh.trace {
            self.spans.push(Span {
                task: gid,
                worker: self.process as u32,
                start_ns: start,
                end_ns: sh.t0.elapsed().as_nanos() as u64,
            });
        }
        self.tasks += 1;
        match r {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(fail(e.to_string(), false)),
            Err(p) => Err(fail(panic_message(&*p), true)),
        }
    }
}

impl ExpandSink for TaskRunner<'_, '_, '_, '_> {
    fn task(&mut self, index: u32, task: &ExpandedTask) -> ControlFlow<()> {
        if self.monitor.stopped() {
            return ControlFlow::Break(());
        }
        match self.run(index, task) {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => {
                self.error = Some(e);
                self.monitor.stop();
                ControlFlow::Break(())
            }
        }
    }

    fn order(&mut self, _edge: OrderEdge) {
        // A process runs its tasks one after another: every order inside it holds already.
    }

    fn read(&mut self, read: &DataRead<'_>, out: &mut Vec<i64>) -> Result<(), ReadRefused> {
        if self.monitor.stopped() {
            return Err(ReadRefused::Stopped);
        }
        let region = Region::new(read.tensor, read.start, read.size)
            .map_err(|e| ReadRefused::Unsupported(e.to_string()))?;
        let io = [TaskIo::new(region, pto_wsp_ir::Access::In)];
        let sh = self.shared;
        let what = Started::Read {
            process: self.process,
            loc: read.loc,
        };
        let gid = match sh
            .order(self.process, self.clock, &io, what)
            .and_then(|()| sh.admit(what, &io))
        {
            Ok(gid) => gid,
            Err(e) => {
                self.error = Some(e);
                self.monitor.stop();
                return Err(ReadRefused::Stopped);
            }
        };
        // SAFETY: the checker admitted the box: no running task of another process writes it,
        // none may start writing it until `end` below, and this process's own tasks all
        // returned (module docs, "Computed reads").
        let v = unsafe { crate::datadep::read_ints(sh.store, read) };
        sh.checker.end(gid);
        let v = v.map_err(ReadRefused::Unsupported)?;
        self.reads += 1;
        out.extend(v);
        Ok(())
    }
}

/// What a process thread returns.
struct ProcessOutcome {
    /// Tasks it ran.
    tasks: u64,
    /// Their spans, when traced.
    spans: Vec<Span>,
    /// Why it stopped, if it failed.
    error: Option<CspError>,
    /// Its recorded steps (the cycle model).
    steps: Vec<CspStep>,
    /// Computed reads it served.
    reads: u64,
}

impl ProcessOutcome {
    /// A process that ran nothing and failed with `error`.
    fn failed(error: CspError) -> ProcessOutcome {
        ProcessOutcome {
            tasks: 0,
            spans: Vec::new(),
            error: Some(error),
            steps: Vec::new(),
            reads: 0,
        }
    }
}

/// Runs the pipeline that is the resolved entry `res` under `bindings`: one thread per process,
/// tasks run by their process with `registry`'s kernels (`kernels[k]` for the module's kernel `k`,
/// `names[k]` its name) on `store` (see the module docs).
///
/// The store must not be read or written by anything else during the call (the caller holds it
/// borrowed). Returns the run's statistics: tasks per process in `per_worker`, wall-clock time in
/// `run_ns`, spans when traced.
pub fn run_pipeline(
    res: &Resolved,
    bindings: &Bindings,
    store: &TensorStore,
    registry: &KernelRegistry,
    kernels: &[Option<KernelId>],
    names: &[String],
    options: CspOptions,
) -> Result<RunStats, CspError> {
    let module = &res.module;
    let entry = module
        .entry_name()
        .ok_or_else(|| CspError::Setup("the module has no entry point".into()))?;
    let pipeline = module
        .pipeline(entry)
        .ok_or_else(|| CspError::Setup(format!("the entry `{entry}` is not a pipeline")))?;
    let (chans, produces) = channels(pipeline)?;
    let n = pipeline.processes.len();
    let monitor = Monitor {
        pipeline,
        state: Mutex::new(State {
            chans,
            waiting: vec![None; n],
            ended: vec![false; n],
            stop: false,
            deadlock: None,
        }),
        changed: Condvar::new(),
    };
    let mut shared = Shared::new(store, registry, kernels, names, pipeline, options.trace);
    shared.check_order = options.check_order;
    let process = Process {
        res,
        bindings,
        options,
        monitor: &monitor,
        shared: &shared,
    };
    let results = process.run_all(&produces);
    let run_ns = shared.t0.elapsed().as_nanos() as u64;
    let st = monitor.lock();
    // A failing task is the cause; processes stopped by it only report that they stopped.
    if let Some(e) = results.iter().find_map(|r| r.error.clone()) {
        return Err(e);
    }
    if let Some(d) = &st.deadlock {
        return Err(CspError::Deadlock(d.clone()));
    }
    pipeline_stats(results, &st.chans, options, run_ns)
}

/// The channels of `pipeline` with their producers and consumers, and per process the channels
/// it produces; an error names a process that produces something that is not a channel.
fn channels(pipeline: &Pipeline) -> Result<(Vec<Chan>, Vec<Vec<u32>>), CspError> {
    let channel = |name: &str| {
        pipeline
            .channels
            .iter()
            .position(|c| c.name.name == name)
            .map(|i| i as u32)
    };
    let mut chans: Vec<Chan> = pipeline
        .channels
        .iter()
        .map(|c| Chan {
            queue: VecDeque::new(),
            depth: usize::try_from(c.depth).unwrap_or(usize::MAX).max(1),
            closed: false,
            sent: 0,
            acks: VecDeque::new(),
            acks_base: 0,
            closed_clock: None,
            producer: None,
            consumer: None,
        })
        .collect();
    let mut produces = Vec::with_capacity(pipeline.processes.len());
    for (p, proc) in pipeline.processes.iter().enumerate() {
        let mut mine = Vec::new();
        for ch in &proc.produces {
            let i = channel(&ch.name).ok_or_else(|| {
                CspError::Setup(format!(
                    "process `{}` produces `{}`, which is not a channel of pipeline `{}`",
                    proc.name, ch.name, pipeline.name
                ))
            })?;
            chans[i as usize].producer = Some(p);
            mine.push(i);
        }
        for ch in &proc.consumes {
            if let Some(i) = channel(&ch.name) {
                chans[i as usize].consumer = Some(p);
            }
        }
        produces.push(mine);
    }
    Ok((chans, produces))
}

/// What every process thread of one run is given.
#[derive(Clone, Copy)]
struct Process<'r, 'p> {
    res: &'r Resolved,
    bindings: &'r Bindings,
    options: CspOptions,
    monitor: &'r Monitor<'p>,
    shared: &'r Shared<'r>,
}

impl Process<'_, '_> {
    /// Runs every process on its own thread (`produces[p]`: the channels process `p` closes
    /// when it ends) and returns their outcomes, in process order.
    fn run_all(self, produces: &[Vec<u32>]) -> Vec<ProcessOutcome> {
        let pipeline = self.monitor.pipeline;
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..pipeline.processes.len())
                .map(|p| {
                    let produces = &produces[p];
                    let spawned = std::thread::Builder::new()
                        .name(format!("pto-wsp-csp-{}", pipeline.processes[p].name))
                        .stack_size(crate::WALK_STACK_BYTES)
                        .spawn_scoped(s, move || self.run(p, produces));
                    if spawned.is_err() {
                        // Its channels would never be served: stop the others.
                        self.monitor.stop();
                    }
                    spawned
                })
                .collect();
            handles
                .into_iter()
                .map(|h| match h {
                    Ok(h) => h.join().unwrap_or_else(|_| {
                        ProcessOutcome::failed(CspError::Setup("a process thread panicked".into()))
                    }),
                    Err(e) => ProcessOutcome::failed(CspError::Setup(format!(
                        "cannot start a process thread: {e}"
                    ))),
                })
                .collect()
        })
    }

    /// Process `p`'s thread: expands the process, running its tasks as they come, then ends
    /// it (closing the channels it `produces`).
    fn run(self, p: usize, produces: &[u32]) -> ProcessOutcome {
        let (monitor, pipeline) = (self.monitor, self.monitor.pipeline);
        let log = RefCell::new(Vec::new());
        let log_ref = self.options.cycles.then_some(&log);
        let clock = RefCell::new(VectorClock::new(pipeline.processes.len(), p));
        let mut runner = TaskRunner {
            shared: self.shared,
            monitor,
            process: p,
            clock: &clock,
            log: log_ref,
            io: Vec::new(),
            params: Vec::new(),
            tasks: 0,
            spans: Vec::new(),
            error: None,
            reads: 0,
        };
        let mut port = Port {
            monitor,
            process: p,
            clock: &clock,
            log: log_ref,
        };
        let r = catch_unwind(AssertUnwindSafe(|| {
            expand_process(
                self.res,
                self.bindings,
                &ExpandOptions::default(),
                p,
                &mut port,
                &mut runner,
            )
        }));
        let process = || pipeline.processes[p].name.name.clone();
        let err = match r {
            Ok(Ok(_)) => None,
            Ok(Err(e)) => Some(CspError::Process {
                process: process(),
                message: e.to_string(),
            }),
            Err(panic) => Some(CspError::Process {
                process: process(),
                message: format!("internal error: {}", panic_message(&*panic)),
            }),
        };
        if err.is_some() {
            monitor.stop();
        }
        self.shared.ended(p);
        monitor.end(p, produces, &clock.borrow());
        let TaskRunner {
            tasks,
            spans,
            error,
            reads,
            ..
        } = runner;
        ProcessOutcome {
            tasks,
            spans,
            error: error.or(err),
            steps: log.into_inner(),
            reads,
        }
    }
}

/// The statistics of a pipeline run that succeeded: tasks per process, spans when traced, and
/// the cycle model's figures over the recorded steps when asked for.
fn pipeline_stats(
    results: Vec<ProcessOutcome>,
    chans: &[Chan],
    options: CspOptions,
    run_ns: u64,
) -> Result<RunStats, CspError> {
    let mut stats = RunStats {
        tasks: results.iter().map(|r| r.tasks).sum(),
        per_worker: results.iter().map(|r| r.tasks).collect(),
        run_ns,
        ..RunStats::default()
    };
    // A process never waits at a read: its producers completed before the tokens it received.
    stats.generation.computed_reads = results.iter().map(|r| r.reads).sum();
    let mut steps = Vec::with_capacity(results.len());
    for r in results {
        if options.trace {
            stats.spans.extend(r.spans);
        }
        steps.push(r.steps);
    }
    if options.cycles {
        let trace = CspTrace {
            channels: chans
                .iter()
                .map(|c| (c.depth as u64, c.producer.unwrap_or(usize::MAX)))
                .collect(),
            processes: steps,
        };
        stats.cycles = Some(
            simulate_pipeline(&trace).map_err(|e| CspError::Setup(format!("cycle model: {e}")))?,
        );
    }
    Ok(stats)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use pto_wsp_ir::{Access, Diagnostic, Module, SourceFile, parse};

    /// The runners' shared state for `m` with no process running: the checker is driven by
    /// hand, so the order of a read and a write is fixed without timing.
    fn shared<'a>(
        m: &Module,
        store: &'a TensorStore,
        registry: &'a KernelRegistry,
        names: &'a [String],
    ) -> Shared<'a> {
        Shared::new(store, registry, &[], names, &m.pipelines[0], false)
    }

    /// A computed read whose box another process's running task writes fails naming the read
    /// (box, `file:line:column`) and the task, whichever of the two began first; a read beside
    /// a running task that writes another box, or one that only reads it, is admitted.
    #[test]
    fn a_read_overlapping_another_process_running_write_fails_naming_both() {
        let text = "slot n: i64;\ntensor X: f32[4, 4];\ntensor K: i32[4, 1];\n\
                    kernel topk(in x: f32[?, ?], out idx: i32[?, ?]);\n\
                    pipeline p {\n    channel c[1];\n\
                    process producer(produces c) {\n        task topk(X[0 +: 4, 0 +: 4], K[0 +: 4, 0 +: 1]);\n        send c(0);\n    }\n\
                    process consumer(consumes c) {\n        consume c as t {\n            load n = K[2, 0];\n        }\n    }\n}\n";
        let m = parse(text).unwrap();
        let store = TensorStore::new(&m, &Bindings::new()).unwrap();
        let registry = KernelRegistry::with_builtins();
        let names = vec!["topk".to_string()];
        let sh = shared(&m, &store, &registry, &names);
        let k = m.tensors.iter().position(|t| t.name.name == "K").unwrap() as u32;
        let at = text.find("load n").unwrap() as u32;
        let loc = Loc {
            start: at,
            end: at + 16,
        };
        let io = |start: i64, rows: i64, access| {
            [TaskIo::new(
                Region::new(k, &[start, 0], &[rows, 1]).unwrap(),
                access,
            )]
        };
        let (write, read) = (io(0, 4, Access::Out), io(2, 1, Access::In));
        let task = Started::Task {
            process: 0,
            index: 3,
            kernel: 0,
            loc: Loc::NONE,
        };
        let reading = Started::Read { process: 1, loc };
        let want = "process `consumer`, its computed read of K[2..3, 0..1] overlaps process \
                    `producer`'s running task #3 (kernel `topk`, out K[0..4, 0..1]), which \
                    writes it";
        let source = SourceFile::new("p.wsp", text);
        // The task runs; the read comes.
        let t = sh.admit(task, &write).unwrap();
        let err = sh.admit(reading, &read).unwrap_err();
        assert!(matches!(err, CspError::ReadConflict(_)), "{err}");
        assert_eq!(err.loc(), loc);
        let rendered = source.render(&err);
        assert!(
            rendered.contains(want) && rendered.contains("p.wsp:13:13"),
            "{rendered}"
        );
        sh.checker.end(t);
        // The read runs; the task comes.
        let r = sh.admit(reading, &read).unwrap();
        let err = sh.admit(task, &write).unwrap_err();
        assert!(source.render(&err).contains(want), "{err}");
        sh.checker.end(r);
        // A write of other rows, or a read of the same rows, runs beside the read.
        let r = sh.admit(reading, &read).unwrap();
        let t = sh.admit(task, &io(0, 2, Access::Out)).unwrap();
        let t2 = sh.admit(task, &io(2, 1, Access::In)).unwrap();
        sh.checker.end(t);
        sh.checker.end(t2);
        sh.checker.end(r);
        assert_eq!(sh.checker.regions_in_flight(), 0);
    }
}
