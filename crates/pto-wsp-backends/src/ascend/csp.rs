//! A CSP pipeline lowered to the runtime's dependencies: its processes run at emit time, one at
//! a time, in a bounded Kahn order, and their tasks become one submission list with explicit
//! edges.
//!
//! Why: simpler has no channels and one orchestration thread. What a pipeline means on the CPU
//! (`docs/SEMANTICS.md`, "CSP pipelines") survives when its tasks are submitted in an order the
//! bounded channels allow: every process runs until it blocks (a `send` on a channel holding
//! `depth` tokens, a `consume` of an empty open channel), then the first process in declaration
//! order that can go on runs. In that order a buffer reused every `n` tokens is overwritten
//! only after the task reading its previous token was submitted, so the runtime's TensorMap
//! (read-after-write, write-after-write) and the orchestration's write-after-read tracking order
//! the ring as the CPU run does. Each task also depends on its process's previous task (a
//! process is sequential) and the first task after a `consume` on the producer's last task
//! before the token's `send` (the channel's order). The channel depth survives as how far a
//! producer runs ahead in the submission list.
//!
//! Promises: the tasks are exactly the pipeline's tasks (each process's, in its order); a
//! deadlock of the bounded channels is an error naming every blocked process, its channel and
//! the channel's state, as the CPU run reports it; a process that reads a tensor its pipeline's
//! tasks write (a computed read) is refused (its value exists only when the tasks run).

use pto_wsp_ir::{
    Bindings, ChannelPort, ExpandOptions, ExpandSink, ExpandedTask, OrderEdge, Resolved, Value,
    expand_process,
};
use std::collections::VecDeque;
use std::ops::ControlFlow;
use std::sync::{Condvar, Mutex};

/// One task of the submission list.
#[derive(Clone, Debug)]
pub(crate) struct CspTask {
    /// The task as the expander generated it.
    pub task: ExpandedTask,
    /// The process that generated it.
    pub process: usize,
    /// Earlier tasks (indices into the list) it depends on explicitly.
    pub deps: Vec<usize>,
}

/// What a blocked process waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wait {
    Send(usize),
    Recv(usize),
}

struct Chan {
    depth: usize,
    /// Tokens with the producer's last task before the send.
    queue: VecDeque<(Value, Option<usize>)>,
    closed: bool,
    producer: Option<usize>,
}

struct State {
    /// The process allowed to run.
    running: Option<usize>,
    finished: Vec<bool>,
    waiting: Vec<Option<Wait>>,
    chans: Vec<Chan>,
    tasks: Vec<CspTask>,
    last: Vec<Option<usize>>,
    pending: Vec<Option<usize>>,
    error: Option<String>,
}

struct Shared<'a> {
    state: Mutex<State>,
    cv: Condvar,
    names: Vec<String>,
    chan_names: Vec<String>,
    res: &'a Resolved,
    limit: usize,
}

impl State {
    fn can_go(&self, p: usize) -> bool {
        if self.finished[p] {
            return false;
        }
        match self.waiting[p] {
            None => true,
            Some(Wait::Send(c)) => self.chans[c].queue.len() < self.chans[c].depth,
            Some(Wait::Recv(c)) => !self.chans[c].queue.is_empty() || self.chans[c].closed,
        }
    }
}

impl Shared<'_> {
    /// Hands the baton to the first process that can go on; records a deadlock when none can
    /// and some have not finished.
    fn pass(&self, st: &mut State) {
        let n = st.finished.len();
        st.running = (0..n).find(|&p| st.can_go(p));
        if st.running.is_none() && st.finished.iter().any(|f| !f) && st.error.is_none() {
            let mut blocked = Vec::new();
            for p in (0..n).filter(|&p| !st.finished[p]) {
                if let Some(w) = st.waiting[p] {
                    let (op, c) = match w {
                        Wait::Send(c) => ("sends on", c),
                        Wait::Recv(c) => ("receives from", c),
                    };
                    let ch = &st.chans[c];
                    blocked.push(format!(
                        "process `{}` {op} channel `{}` ({} of {} token(s){})",
                        self.names[p],
                        self.chan_names[c],
                        ch.queue.len(),
                        ch.depth,
                        if ch.closed { ", closed" } else { "" }
                    ));
                }
            }
            st.error = Some(format!(
                "the pipeline deadlocks with its bounded channels: {}",
                blocked.join("; ")
            ));
        }
        self.cv.notify_all();
    }

    /// Waits until process `p` holds the baton; `Break` when the run failed.
    fn wait_turn<'g>(
        &self,
        mut st: std::sync::MutexGuard<'g, State>,
        p: usize,
    ) -> ControlFlow<(), std::sync::MutexGuard<'g, State>> {
        loop {
            if st.error.is_some() {
                return ControlFlow::Break(());
            }
            if st.running == Some(p) {
                return ControlFlow::Continue(st);
            }
            st = self.cv.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }
}

struct Port<'s, 'a> {
    shared: &'s Shared<'a>,
    p: usize,
}

impl ChannelPort for Port<'_, '_> {
    fn send(&mut self, channel: u32, value: Value) -> ControlFlow<()> {
        let c = channel as usize;
        let mut st = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if st.chans[c].queue.len() < st.chans[c].depth {
                let last = st.last[self.p];
                st.chans[c].queue.push_back((value, last));
                st.waiting[self.p] = None;
                return ControlFlow::Continue(());
            }
            st.waiting[self.p] = Some(Wait::Send(c));
            self.shared.pass(&mut st);
            st = self.shared.wait_turn(st, self.p)?;
        }
    }

    fn recv(&mut self, channel: u32) -> ControlFlow<(), Option<Value>> {
        let c = channel as usize;
        let mut st = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some((v, producer)) = st.chans[c].queue.pop_front() {
                st.pending[self.p] = producer;
                st.waiting[self.p] = None;
                return ControlFlow::Continue(Some(v));
            }
            if st.chans[c].closed {
                st.waiting[self.p] = None;
                return ControlFlow::Continue(None);
            }
            st.waiting[self.p] = Some(Wait::Recv(c));
            self.shared.pass(&mut st);
            st = self.shared.wait_turn(st, self.p)?;
        }
    }
}

struct Sink<'s, 'a> {
    shared: &'s Shared<'a>,
    p: usize,
}

impl ExpandSink for Sink<'_, '_> {
    fn task(&mut self, _index: u32, task: &ExpandedTask) -> ControlFlow<()> {
        let mut st = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.tasks.len() >= self.shared.limit {
            st.error = Some(format!(
                "the pipeline has more than {} tasks; the orchestration lists a pipeline's tasks \
                 one by one and is limited to that many",
                self.shared.limit
            ));
            self.shared.cv.notify_all();
            return ControlFlow::Break(());
        }
        let mut deps: Vec<usize> = st.last[self.p].into_iter().collect();
        if let Some(d) = st.pending[self.p].take()
            && !deps.contains(&d)
        {
            deps.push(d);
        }
        let i = st.tasks.len();
        st.tasks.push(CspTask {
            task: task.clone(),
            process: self.p,
            deps,
        });
        st.last[self.p] = Some(i);
        ControlFlow::Continue(())
    }

    fn order(&mut self, _edge: OrderEdge) {
        // A process is sequential: its tasks are chained already.
    }
}

/// Runs `pipeline`'s processes in the bounded Kahn order (see the module docs) and returns the
/// submission list, at most `limit` tasks.
pub(crate) fn schedule(
    res: &Resolved,
    bindings: &Bindings,
    pipeline: &pto_wsp_ir::Pipeline,
    limit: usize,
) -> Result<Vec<CspTask>, String> {
    let n = pipeline.processes.len();
    let chan_index = |name: &str| pipeline.channels.iter().position(|c| c.name.name == name);
    let mut chans: Vec<Chan> = pipeline
        .channels
        .iter()
        .map(|c| Chan {
            depth: c.depth.max(1) as usize,
            queue: VecDeque::new(),
            closed: false,
            producer: None,
        })
        .collect();
    for (p, proc_) in pipeline.processes.iter().enumerate() {
        for c in &proc_.produces {
            if let Some(i) = chan_index(&c.name) {
                chans[i].producer = Some(p);
            }
        }
    }
    let shared = Shared {
        state: Mutex::new(State {
            running: if n > 0 { Some(0) } else { None },
            finished: vec![false; n],
            waiting: vec![None; n],
            chans,
            tasks: Vec::new(),
            last: vec![None; n],
            pending: vec![None; n],
            error: None,
        }),
        cv: Condvar::new(),
        names: pipeline
            .processes
            .iter()
            .map(|p| p.name.name.clone())
            .collect(),
        chan_names: pipeline
            .channels
            .iter()
            .map(|c| c.name.name.clone())
            .collect(),
        res,
        limit,
    };
    let results: Vec<Result<(), String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|p| {
                let shared = &shared;
                s.spawn(move || run_process(shared, bindings, p))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a process panicked".into()))
            })
            .collect()
    });
    let st = shared.state.into_inner().unwrap_or_else(|e| e.into_inner());
    if let Some(e) = st.error {
        return Err(e);
    }
    for r in results {
        r?;
    }
    Ok(st.tasks)
}

/// One process's thread: waits for its turn, runs its program, ends (closing its channels and
/// passing the baton).
fn run_process(shared: &Shared<'_>, bindings: &Bindings, p: usize) -> Result<(), String> {
    let st = shared.state.lock().unwrap_or_else(|e| e.into_inner());
    let st = match shared.wait_turn(st, p) {
        ControlFlow::Continue(st) => st,
        ControlFlow::Break(()) => return Ok(()),
    };
    drop(st);
    let mut port = Port { shared, p };
    let mut sink = Sink { shared, p };
    let r = expand_process(
        shared.res,
        bindings,
        &ExpandOptions {
            limit: None,
            executors: None,
        },
        p,
        &mut port,
        &mut sink,
    );
    let mut st = shared.state.lock().unwrap_or_else(|e| e.into_inner());
    st.finished[p] = true;
    st.waiting[p] = None;
    for c in st.chans.iter_mut().filter(|c| c.producer == Some(p)) {
        c.closed = true;
    }
    let out = match r {
        Ok(_) => Ok(()),
        Err(e) => {
            let m = format!("process `{}`: {e}", shared.names[p]);
            if st.error.is_none() {
                st.error = Some(m.clone());
            }
            Err(m)
        }
    };
    shared.pass(&mut st);
    out
}
