//! One device's run: the ready queue its workers take kernel instances from, the graph
//! instances whose ready counts release them, events, streams, and the control code.
//!
//! How (the specification's execution model): a launched graph is a *scope* over its top
//! block; each item of a scope has a ready count (its predecessors in the block) and starts
//! when it reaches zero. A kernel item becomes a *run* whose `blockDim` instances go to the
//! ready queue, each taken by a worker its placement allows; when the last instance finishes,
//! the run completes, signals its events and releases its successors. A control-flow item
//! evaluates its condition or count when it starts (reading a tensor element through the
//! checked runner, so a kernel may have computed it) and opens a scope over the chosen block;
//! a loop opens one scope per pass, the next when the last ends, so passes run one after the
//! other; a `CF_BREAK` marks its loop, and items after it see the mark and are skipped. A
//! scope that completes releases its construct in the enclosing scope, the top scope the
//! launch, and the launch the next graph queued on its stream.
//!
//! The control code runs on the calling thread ([`Shared::control`]): launches, waits, memory
//! operations, control flow over scalars, notifications between devices.
//!
//! Promises: every wait is bounded or detected: when no worker is busy, nothing is ready and
//! something waited for has not happened, the wait ends with a deadlock error naming what is
//! stuck (kernels waiting for events, launches queued behind them); loops stop at
//! [`super::DeviceConfig::max_passes`] passes with an error. The first error stops the run:
//! nothing more is started, the workers finish what they hold and leave.

use super::bytes::{ScalarValue, scalar};
use super::fabric::Fabric;
use super::place::{Mask, kind_of};
use super::{Prepared, RunError, TraceRecord};
use crate::check::{ArgPlan, Body, Checked, Ctl, Item, Scalar};
use crate::operand::{IterVal, Split};
use pto_wsp_graph::sync::{
    AtomicBool, AtomicU32, AtomicU64, Condvar, Mutex, MutexGuard, Ordering, fence, lock, wait,
};
use pto_wsp_graph::types::{MAX_RANK, Region, TaskIo};
use pto_wsp_kernels::CheckedRunner;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// A launch: graph, stream, bound iteration, and its number in the run.
#[derive(Clone, Copy, Debug)]
struct LaunchReq {
    graph: usize,
    stream: u32,
    iteration: u64,
    seq: u64,
}

/// A loop construct's pass state, shared by the scopes of its passes.
struct LoopCtl {
    broken: AtomicBool,
    count: u64,
}

enum ScopeKind {
    Root,
    Branch,
    Pass { ctl: Arc<LoopCtl>, pass: u64 },
}

/// An instance of a block (see the module docs).
struct Scope<'a> {
    launch: LaunchReq,
    body: &'a Body,
    counts: Vec<AtomicU32>,
    left: AtomicU32,
    parent: Option<(Arc<Scope<'a>>, u32)>,
    kind: ScopeKind,
    /// The innermost loop around the block.
    lp: Option<Arc<LoopCtl>>,
    /// Values of the graph's loop iterators around the block, outermost first.
    iters: Vec<u64>,
    /// Per kernel of the graph (when it has `SOFT` edges): whether its run in this scope has
    /// completed. Read and written under the queue's lock.
    soft_done: Vec<AtomicBool>,
}

/// Where a scope hangs: the construct item it is a block of, what kind of block, the
/// innermost loop around it, the iterators' values.
struct Frame<'a> {
    parent: Option<(Arc<Scope<'a>>, u32)>,
    kind: ScopeKind,
    lp: Option<Arc<LoopCtl>>,
    iters: Vec<u64>,
}

/// One run of a kernel item: its instances.
struct KRun<'a> {
    scope: Arc<Scope<'a>>,
    item: u32,
    kernel: usize,
    blocks: u32,
    left: AtomicU32,
    mask: Mask,
}

struct Ready<'a> {
    run: Arc<KRun<'a>>,
    next: u32,
}

#[derive(Default)]
struct StreamQ {
    busy: bool,
    pending: VecDeque<LaunchReq>,
}

/// What the workers and the control code share under one lock.
struct Queue<'a> {
    ready: VecDeque<Ready<'a>>,
    sleeping: Mask,
    /// Workers holding an instance (from taking it until its completion is processed).
    busy: usize,
    shutdown: bool,
    /// Per graph: launches not completed.
    outstanding: Vec<u64>,
    streams: HashMap<u32, StreamQ>,
}

/// A kernel run waiting for events.
struct Waiter<'a> {
    scope: Arc<Scope<'a>>,
    item: u32,
    kernel: usize,
    /// Its run number: it needs this many signals of each event.
    n: u64,
}

#[derive(Default)]
struct Events<'a> {
    counts: HashMap<u32, u64>,
    waiting: Vec<Waiter<'a>>,
}

/// Work to do after something completes, done without recursion.
enum Todo<'a> {
    Start(Arc<Scope<'a>>, u32),
    Done(Arc<Scope<'a>>, u32),
}

/// The counters of a run.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) launches: AtomicU64,
    pub(crate) kernel_runs: AtomicU64,
    pub(crate) instances: AtomicU64,
}

thread_local! {
    /// The worker this thread is while it completes an instance, and whether it has kept one
    /// newly ready instance for itself (so that it wakes no sleeper for it: it takes it next).
    static KEEPER: std::cell::Cell<Option<(u32, bool)>> = const { std::cell::Cell::new(None) };
    /// The bytes the condition-reading kernel last read on this thread.
    pub(crate) static READ: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Everything a run's threads share (see the module docs).
pub(crate) struct Shared<'a> {
    c: &'a Checked,
    dev: &'a Prepared,
    runner: &'a CheckedRunner<'a>,
    q: Mutex<Queue<'a>>,
    cvs: Vec<Condvar>,
    control_cv: Condvar,
    events: Mutex<Events<'a>>,
    failure: Mutex<Option<RunError>>,
    abort: AtomicBool,
    clock: AtomicU64,
    trace: Mutex<Vec<TraceRecord>>,
    /// Per graph and kernel: runs started (numbers event waits).
    runs: Vec<Vec<AtomicU64>>,
    pub(crate) counters: Counters,
    launches: AtomicU64,
}

impl<'a> Shared<'a> {
    pub(crate) fn new(c: &'a Checked, dev: &'a Prepared, runner: &'a CheckedRunner<'a>) -> Self {
        Shared {
            c,
            dev,
            runner,
            q: Mutex::new(Queue {
                ready: VecDeque::new(),
                sleeping: 0,
                busy: 0,
                shutdown: false,
                outstanding: vec![0; c.graphs.len()],
                streams: HashMap::new(),
            }),
            cvs: (0..dev.workers).map(|_| Condvar::new()).collect(),
            control_cv: Condvar::new(),
            events: Mutex::new(Events::default()),
            failure: Mutex::new(None),
            abort: AtomicBool::new(false),
            clock: AtomicU64::new(0),
            trace: Mutex::new(Vec::new()),
            runs: c
                .graphs
                .iter()
                .map(|g| g.kernels.iter().map(|_| AtomicU64::new(0)).collect())
                .collect(),
            counters: Counters::default(),
            launches: AtomicU64::new(0),
        }
    }

    /// The trace recorded (empty unless tracing).
    pub(crate) fn take_trace(&self) -> Vec<TraceRecord> {
        std::mem::take(&mut *lock(&self.trace))
    }

    /// Records the first error and stops everything.
    fn fail(&self, e: RunError) {
        {
            let mut f = lock(&self.failure);
            if f.is_none() {
                *f = Some(e);
            }
        }
        self.abort.store(true, Ordering::Release);
        let mut q = lock(&self.q);
        q.ready.clear();
        drop(q);
        self.control_cv.notify_all();
    }

    fn failed(&self) -> RunError {
        lock(&self.failure)
            .clone()
            .unwrap_or_else(|| RunError::Internal("the run stopped without an error".into()))
    }

    // ---- scalars ----

    /// The value of a condition or count, read by worker `who`.
    fn eval(&self, s: &Scalar, who: u32) -> Result<ScalarValue, RunError> {
        let (tensor, index) = match *s {
            Scalar::Imm(v) => {
                return Ok(ScalarValue {
                    nonzero: v != 0,
                    int: Some(v as i128),
                });
            }
            Scalar::Elem { tensor, index } => (tensor, index),
        };
        let t = &self.c.tensors[tensor];
        let mut region = Region {
            tensor: tensor as u32,
            rank: t.shape.len() as u32,
            start: [0; MAX_RANK],
            size: [1; MAX_RANK],
        };
        let mut rest = index;
        for d in (0..t.shape.len()).rev() {
            region.start[d] = (rest % t.shape[d]) as u32;
            rest /= t.shape[d];
        }
        let io = [TaskIo::new(region, pto_wsp_ir::Access::In)];
        self.runner
            .call(self.dev.read_kernel, who, &[], &io)
            .map_err(|m| {
                RunError::Memory(format!("reading element {index} of tensor {}: {m}", t.name))
            })?;
        let bytes = READ.with(|r| std::mem::take(&mut *r.borrow_mut()));
        Ok(scalar(t.dtype, &bytes))
    }

    /// A loop's count; `what` names the loop (on the error path only).
    fn count(&self, s: &Scalar, who: u32, what: &dyn Fn() -> String) -> Result<u64, RunError> {
        let v = self.eval(s, who)?;
        match v.int {
            Some(n) if n >= 0 => Ok(n.min(u64::MAX as i128) as u64),
            Some(n) => Err(RunError::Control(format!(
                "{}: the count is {n}, below 0",
                what()
            ))),
            None => Err(RunError::Internal(format!("{}: a float count", what()))),
        }
    }

    // ---- graph instances ----

    /// Opens a scope over `body` (see [`Frame`]) and starts its items that wait for nothing.
    fn open(
        &self,
        launch: LaunchReq,
        body: &'a Body,
        frame: Frame<'a>,
        todo: &mut Vec<Todo<'a>>,
    ) -> Result<(), RunError> {
        let Frame {
            parent,
            kind,
            lp,
            iters,
        } = frame;
        let g = &self.c.graphs[launch.graph];
        let soft = if g.soft.is_empty() {
            0
        } else {
            g.kernels.len()
        };
        let scope = Arc::new(Scope {
            launch,
            body,
            counts: body.preds.iter().map(|&p| AtomicU32::new(p)).collect(),
            left: AtomicU32::new(body.items.len() as u32),
            parent,
            kind,
            lp,
            iters,
            soft_done: (0..soft).map(|_| AtomicBool::new(false)).collect(),
        });
        if body.items.is_empty() {
            return self.scope_done(scope, todo);
        }
        // Reversed, so that the work list starts them in definition order.
        for (i, &p) in body.preds.iter().enumerate().rev() {
            if p == 0 {
                todo.push(Todo::Start(Arc::clone(&scope), i as u32));
            }
        }
        Ok(())
    }

    /// Runs `todo` and everything it leads to.
    fn settle(&self, mut todo: Vec<Todo<'a>>, who: u32) -> Result<(), RunError> {
        while let Some(t) = todo.pop() {
            if self.abort.load(Ordering::Acquire) {
                return Ok(());
            }
            match t {
                Todo::Start(s, i) => self.start(s, i, who, &mut todo)?,
                Todo::Done(s, i) => self.done(s, i, &mut todo)?,
            }
        }
        Ok(())
    }

    fn start(
        &self,
        s: Arc<Scope<'a>>,
        i: u32,
        who: u32,
        todo: &mut Vec<Todo<'a>>,
    ) -> Result<(), RunError> {
        if s.lp
            .as_ref()
            .is_some_and(|l| l.broken.load(Ordering::Acquire))
        {
            todo.push(Todo::Done(s, i));
            return Ok(());
        }
        let g = s.launch.graph;
        match &s.body.items[i as usize] {
            Item::Kernel(k) => self.ready_kernel(s, i, *k)?,
            Item::Join => todo.push(Todo::Done(s, i)),
            Item::Break { cond } => {
                if self.eval(cond, who)?.nonzero
                    && let Some(l) = &s.lp
                {
                    l.broken.store(true, Ordering::Release);
                }
                todo.push(Todo::Done(s, i));
            }
            Item::If { cond, then, els } => {
                let body = if self.eval(cond, who)?.nonzero {
                    then
                } else {
                    els
                };
                let (lp, iters) = (s.lp.clone(), s.iters.clone());
                let launch = s.launch;
                self.open(
                    launch,
                    body,
                    Frame {
                        parent: Some((s, i)),
                        kind: ScopeKind::Branch,
                        lp,
                        iters,
                    },
                    todo,
                )?;
            }
            Item::Loop { count, body, .. } => {
                let what = || format!("a CF_LOOP of graph {}", self.c.graphs[g].name);
                let n = self.count(count, who, &what)?;
                if n == 0 {
                    todo.push(Todo::Done(s, i));
                    return Ok(());
                }
                self.pass_limit(n.saturating_sub(1), &what)?;
                let ctl = Arc::new(LoopCtl {
                    broken: AtomicBool::new(false),
                    count: n,
                });
                let mut iters = s.iters.clone();
                iters.push(0);
                let launch = s.launch;
                let kind = ScopeKind::Pass {
                    ctl: Arc::clone(&ctl),
                    pass: 0,
                };
                let frame = Frame {
                    parent: Some((s, i)),
                    kind,
                    lp: Some(ctl),
                    iters,
                };
                self.open(launch, body, frame, todo)?;
            }
            Item::While { cond, body } => {
                if !self.eval(cond, who)?.nonzero {
                    todo.push(Todo::Done(s, i));
                    return Ok(());
                }
                let ctl = Arc::new(LoopCtl {
                    broken: AtomicBool::new(false),
                    count: u64::MAX,
                });
                let iters = s.iters.clone();
                let launch = s.launch;
                let kind = ScopeKind::Pass {
                    ctl: Arc::clone(&ctl),
                    pass: 0,
                };
                let frame = Frame {
                    parent: Some((s, i)),
                    kind,
                    lp: Some(ctl),
                    iters,
                };
                self.open(launch, body, frame, todo)?;
            }
        }
        Ok(())
    }

    /// Fails when a loop reaches the pass limit; `what` names it (on the error path only).
    fn pass_limit(&self, pass: u64, what: &dyn Fn() -> String) -> Result<(), RunError> {
        if pass >= self.dev.cfg.max_passes {
            return Err(RunError::Control(format!(
                "{} reached {} passes and was stopped (DeviceConfig::max_passes)",
                what(),
                self.dev.cfg.max_passes
            )));
        }
        Ok(())
    }

    fn done(&self, s: Arc<Scope<'a>>, i: u32, todo: &mut Vec<Todo<'a>>) -> Result<(), RunError> {
        for &z in s.body.succs[i as usize].iter().rev() {
            if s.counts[z as usize].fetch_sub(1, Ordering::AcqRel) == 1 {
                todo.push(Todo::Start(Arc::clone(&s), z));
            }
        }
        if s.left.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.scope_done(s, todo)?;
        }
        Ok(())
    }

    fn scope_done(&self, s: Arc<Scope<'a>>, todo: &mut Vec<Todo<'a>>) -> Result<(), RunError> {
        let Some((p, item)) = s.parent.clone() else {
            return self.launch_done(s.launch);
        };
        let (ctl, pass) = match &s.kind {
            ScopeKind::Pass { ctl, pass } => (Arc::clone(ctl), *pass),
            _ => {
                todo.push(Todo::Done(p, item));
                return Ok(());
            }
        };
        if ctl.broken.load(Ordering::Acquire) {
            todo.push(Todo::Done(p, item));
            return Ok(());
        }
        let g = &self.c.graphs[s.launch.graph];
        let pb: &'a Body = p.body;
        let (more, body) = match &pb.items[item as usize] {
            Item::Loop { body, .. } => (pass + 1 < ctl.count, body),
            Item::While { cond, body } => {
                let what = || format!("a CF_WHILE of graph {}", g.name);
                self.pass_limit(pass + 1, &what)?;
                (self.eval(cond, u32::MAX)?.nonzero, body)
            }
            _ => (false, pb),
        };
        if !more {
            todo.push(Todo::Done(p, item));
            return Ok(());
        }
        let mut iters = s.iters.clone();
        if ctl.count != u64::MAX
            && let Some(last) = iters.last_mut()
        {
            *last = pass + 1;
        }
        let kind = ScopeKind::Pass {
            ctl: Arc::clone(&ctl),
            pass: pass + 1,
        };
        self.open(
            s.launch,
            body,
            Frame {
                parent: Some((p, item)),
                kind,
                lp: Some(ctl),
                iters,
            },
            todo,
        )
    }

    /// A kernel item is ready: it runs once its events have been signalled often enough.
    fn ready_kernel(&self, s: Arc<Scope<'a>>, i: u32, k: usize) -> Result<(), RunError> {
        let g = s.launch.graph;
        let kp = &self.c.graphs[g].kernels[k];
        if !kp.waits.is_empty() {
            let n = self.runs[g][k].fetch_add(1, Ordering::Relaxed) + 1;
            let mut ev = lock(&self.events);
            if !kp
                .waits
                .iter()
                .all(|e| ev.counts.get(e).copied().unwrap_or(0) >= n)
            {
                ev.waiting.push(Waiter {
                    scope: s,
                    item: i,
                    kernel: k,
                    n,
                });
                return Ok(());
            }
        }
        self.enqueue(s, i, k);
        Ok(())
    }

    fn enqueue(&self, scope: Arc<Scope<'a>>, item: u32, kernel: usize) {
        let g = scope.launch.graph;
        let kp = &self.c.graphs[g].kernels[kernel];
        let mask = self.dev.masks[g][kernel];
        let run = Arc::new(KRun {
            scope,
            item,
            kernel,
            blocks: kp.block_dim,
            left: AtomicU32::new(kp.block_dim),
            mask,
        });
        let soft = &self.c.graphs[g].soft;
        let mut q = lock(&self.q);
        // A `SOFT` hint: a kernel whose soft predecessor has completed goes first.
        let hinted = soft.iter().any(|&(a, d)| {
            d == kernel
                && run
                    .scope
                    .soft_done
                    .get(a)
                    .is_some_and(|f| f.load(Ordering::Relaxed))
        });
        if hinted {
            q.ready.push_front(Ready { run, next: 0 });
        } else {
            q.ready.push_back(Ready { run, next: 0 });
        }
        let mut wake = q.sleeping & mask;
        let mut n = kp.block_dim;
        // A worker completing an instance takes the first instance it may run next itself.
        KEEPER.with(|k| {
            if let Some((w, false)) = k.get()
                && mask & (1u128 << w) != 0
            {
                k.set(Some((w, true)));
                n -= 1;
            }
        });
        while wake != 0 && n > 0 {
            let w = wake.trailing_zeros();
            wake &= wake - 1;
            q.sleeping &= !(1u128 << w);
            self.cvs[w as usize].notify_one();
            n -= 1;
        }
    }

    /// The last instance of `run` has finished.
    fn kernel_done(&self, run: &KRun<'a>, who: u32) -> Result<(), RunError> {
        let g = run.scope.launch.graph;
        let gp = &self.c.graphs[g];
        let kp = &gp.kernels[run.kernel];
        self.counters.kernel_runs.fetch_add(1, Ordering::Relaxed);
        if !kp.signals.is_empty() {
            let mut released = Vec::new();
            {
                let mut ev = lock(&self.events);
                for e in &kp.signals {
                    *ev.counts.entry(*e).or_default() += 1;
                }
                let waiting = std::mem::take(&mut ev.waiting);
                let counts = &ev.counts;
                let (go, stay): (Vec<Waiter<'a>>, Vec<Waiter<'a>>) =
                    waiting.into_iter().partition(|w| {
                        self.c.graphs[w.scope.launch.graph].kernels[w.kernel]
                            .waits
                            .iter()
                            .all(|e| counts.get(e).copied().unwrap_or(0) >= w.n)
                    });
                ev.waiting = stay;
                released.extend(go);
            }
            for w in released {
                self.enqueue(w.scope, w.item, w.kernel);
            }
        }
        if gp.soft.iter().any(|&(a, _)| a == run.kernel) {
            let mut q = lock(&self.q);
            run.scope.soft_done[run.kernel].store(true, Ordering::Relaxed);
            for &(_, d) in gp.soft.iter().filter(|&&(a, _)| a == run.kernel) {
                if let Some(pos) = q.ready.iter().position(|r| {
                    r.run.kernel == d && r.next == 0 && Arc::ptr_eq(&r.run.scope, &run.scope)
                }) && let Some(r) = q.ready.remove(pos)
                {
                    q.ready.push_front(r);
                }
            }
        }
        self.settle(vec![Todo::Done(Arc::clone(&run.scope), run.item)], who)
    }

    // ---- launches ----

    fn launch(&self, graph: usize, stream: u32, iteration: u64) -> Result<(), RunError> {
        let req = LaunchReq {
            graph,
            stream,
            iteration,
            seq: self.launches.fetch_add(1, Ordering::Relaxed),
        };
        self.counters.launches.fetch_add(1, Ordering::Relaxed);
        {
            let mut q = lock(&self.q);
            q.outstanding[graph] += 1;
            let sq = q.streams.entry(stream).or_default();
            if sq.busy {
                sq.pending.push_back(req);
                return Ok(());
            }
            sq.busy = true;
        }
        self.begin(req, u32::MAX)
    }

    fn begin(&self, req: LaunchReq, who: u32) -> Result<(), RunError> {
        let body = &self.c.graphs[req.graph].root;
        let mut todo = Vec::new();
        self.open(
            req,
            body,
            Frame {
                parent: None,
                kind: ScopeKind::Root,
                lp: None,
                iters: Vec::new(),
            },
            &mut todo,
        )?;
        self.settle(todo, who)
    }

    fn launch_done(&self, l: LaunchReq) -> Result<(), RunError> {
        let next = {
            let mut q = lock(&self.q);
            q.outstanding[l.graph] -= 1;
            let sq = q.streams.entry(l.stream).or_default();
            let next = sq.pending.pop_front();
            if next.is_none() {
                sq.busy = false;
            }
            next
        };
        self.control_cv.notify_all();
        match next {
            Some(n) => self.begin(n, u32::MAX),
            None => Ok(()),
        }
    }

    // ---- workers ----

    /// The worker loop of worker `w`: take an instance its placement allows, run it, complete
    /// it; sleep when there is none; leave at shutdown.
    pub(crate) fn worker(&self, w: usize) {
        let bit = 1u128 << w;
        let mut finished = false;
        loop {
            let (run, block) = {
                let mut q = lock(&self.q);
                if finished {
                    // The instance taken last is done: one lock for that and the next pop.
                    q.busy -= 1;
                    if q.busy == 0 && q.ready.is_empty() {
                        self.control_cv.notify_all();
                    }
                }
                finished = true;
                loop {
                    if q.shutdown {
                        return;
                    }
                    if let Some(pos) = q.ready.iter().position(|r| r.run.mask & bit != 0) {
                        let r = &mut q.ready[pos];
                        let block = r.next;
                        r.next += 1;
                        let run = Arc::clone(&r.run);
                        if r.next == run.blocks {
                            q.ready.remove(pos);
                        }
                        q.busy += 1;
                        break (run, block);
                    }
                    q.sleeping |= bit;
                    q = wait(&self.cvs[w], q);
                    q.sleeping &= !bit;
                }
            };
            if !self.abort.load(Ordering::Acquire) {
                let r = self.instance(&run, block, w as u32).and_then(|()| {
                    if run.left.fetch_sub(1, Ordering::AcqRel) == 1 {
                        KEEPER.with(|k| k.set(Some((w as u32, false))));
                        let r = self.kernel_done(&run, w as u32);
                        KEEPER.with(|k| k.set(None));
                        r
                    } else {
                        Ok(())
                    }
                });
                if let Err(e) = r {
                    self.fail(e);
                }
            }
        }
    }

    /// Runs instance `block` of `run` on worker `w`.
    fn instance(&self, run: &KRun<'a>, block: u32, w: u32) -> Result<(), RunError> {
        let s = &run.scope;
        let g = s.launch.graph;
        let kp = &self.c.graphs[g].kernels[run.kernel];
        let entry = self.dev.entries[g][run.kernel];
        let mut params = Vec::new();
        if entry.launch_params {
            // `Launch::params`, written in place.
            params.reserve(4 + s.iters.len() + kp.args.len());
            params.extend([
                block as u64,
                kp.block_dim as u64,
                s.launch.iteration,
                s.iters.len() as u64,
            ]);
            params.extend_from_slice(&s.iters);
        }
        let mut io = Vec::with_capacity(kp.args.len());
        let mut empty = false;
        for a in &kp.args {
            match a {
                ArgPlan::Scalar(v) => params.push(*v),
                ArgPlan::Tensor {
                    tensor,
                    start,
                    size,
                    access,
                    split,
                } => {
                    let mut r = Region {
                        tensor: *tensor as u32,
                        rank: start.len() as u32,
                        start: [0; MAX_RANK],
                        size: [1; MAX_RANK],
                    };
                    for d in 0..start.len() {
                        r.start[d] = start[d] as u32;
                        r.size[d] = size[d] as u32;
                    }
                    if *split == Split::Rows {
                        let rows = size[0];
                        let n = kp.block_dim as u64;
                        let lo = block as u64 * rows / n;
                        let hi = (block as u64 + 1) * rows / n;
                        empty |= hi == lo;
                        r.start[0] += lo as u32;
                        r.size[0] = (hi - lo).max(1) as u32;
                    }
                    io.push(TaskIo::new(r, access.ir()));
                }
            }
        }
        let t0 = self.clock.fetch_add(1, Ordering::Relaxed);
        if !empty {
            self.runner
                .call(entry.kernel, w, &params, &io)
                .map_err(|message| RunError::Kernel {
                    graph: self.c.graphs[g].name.clone(),
                    kernel: kp.name.clone(),
                    block,
                    message,
                })?;
        }
        self.counters.instances.fetch_add(1, Ordering::Relaxed);
        if self.dev.cfg.trace {
            let t1 = self.clock.fetch_add(1, Ordering::Relaxed);
            lock(&self.trace).push(TraceRecord {
                graph: g,
                kernel: run.kernel,
                launch: s.launch.seq,
                block,
                worker: w,
                core: kind_of(&self.dev.cfg, w),
                start: t0,
                end: t1,
            });
        }
        Ok(())
    }

    /// Stops the workers (after the control code has returned).
    pub(crate) fn shutdown(&self) {
        let mut q = lock(&self.q);
        q.shutdown = true;
        drop(q);
        for cv in &self.cvs {
            cv.notify_all();
        }
    }

    // ---- control ----

    /// Waits until `done(queue)`; an error if the run failed or nothing can make progress.
    fn wait_for(
        &self,
        done: impl Fn(&Queue<'a>) -> bool,
        what: &dyn Fn() -> String,
    ) -> Result<(), RunError> {
        let mut q: MutexGuard<'_, Queue<'a>> = lock(&self.q);
        loop {
            if self.abort.load(Ordering::Acquire) {
                drop(q);
                return Err(self.failed());
            }
            if done(&q) {
                return Ok(());
            }
            if q.busy == 0 && q.ready.is_empty() {
                drop(q);
                return Err(self.deadlock(what()));
            }
            q = wait(&self.control_cv, q);
        }
    }

    fn deadlock(&self, what: String) -> RunError {
        let ev = lock(&self.events);
        let mut stuck: Vec<String> = ev
            .waiting
            .iter()
            .map(|w| {
                let g = &self.c.graphs[w.scope.launch.graph];
                let k = &g.kernels[w.kernel];
                let need: Vec<String> = k
                    .waits
                    .iter()
                    .map(|e| {
                        format!(
                            "event {} ({} of {} signal(s))",
                            self.c.program.name_of(crate::operand::Ns::Event, *e),
                            ev.counts.get(e).copied().unwrap_or(0),
                            w.n
                        )
                    })
                    .collect();
                format!(
                    "kernel {} of graph {} waits for {}",
                    k.name,
                    g.name,
                    need.join(", ")
                )
            })
            .collect();
        let q = lock(&self.q);
        for (s, sq) in &q.streams {
            for l in &sq.pending {
                stuck.push(format!(
                    "graph {} is queued on stream {}",
                    self.c.graphs[l.graph].name,
                    self.c.program.name_of(crate::operand::Ns::Stream, *s)
                ));
            }
        }
        RunError::Deadlock(format!(
            "{what}: nothing can run any more{}{}",
            if stuck.is_empty() { "" } else { ": " },
            stuck.join("; ")
        ))
    }

    /// The control code's instruction `pc` as written (for messages, on the error path only).
    fn here(&self, pc: usize) -> String {
        crate::text::disasm::render(&self.c.program, self.c.control_insns[pc])
    }

    /// Runs the control code of device `device` (see the module docs).
    pub(crate) fn control(&self, device: u32, fabric: &Fabric) -> Result<(), RunError> {
        let mut st = ControlState {
            live: vec![false; self.c.tensors.len()],
            loops: Vec::new(),
            whiles: Vec::new(),
        };
        let mut pc = 0usize;
        while pc < self.c.control.len() {
            if self.abort.load(Ordering::Acquire) {
                return Err(self.failed());
            }
            pc = self.control_step(pc, &mut st, device, fabric)?;
        }
        self.wait_for(|q| q.outstanding.iter().all(|&n| n == 0), &|| {
            "the end of the program waits for every launched graph".to_string()
        })
    }

    /// Runs control instruction `pc`; the next one to run.
    fn control_step(
        &self,
        pc: usize,
        st: &mut ControlState,
        device: u32,
        fabric: &Fabric,
    ) -> Result<usize, RunError> {
        let c = self.c;
        match &c.control[pc] {
            Ctl::Launch {
                graph,
                stream,
                iteration,
            } => {
                if let Some(&t) = c.graphs[*graph].uses.iter().find(|&&t| !st.live[t]) {
                    return Err(RunError::Memory(format!(
                        "{}: graph {} uses tensor {}, which is not allocated",
                        self.here(pc),
                        c.graphs[*graph].name,
                        c.tensors[t].name
                    )));
                }
                let it = match iteration {
                    IterVal::Imm(v) => *v as u64,
                    IterVal::Iter(id) => st
                        .loops
                        .iter()
                        .rev()
                        .find(|l| l.0 == id.0)
                        .map_or(0, |l| l.1),
                };
                self.launch(*graph, *stream, it)?;
            }
            Ctl::Sync { graph } => {
                let g = *graph;
                self.wait_for(|q| q.outstanding[g] == 0, &|| self.here(pc))?;
            }
            Ctl::Alloc { tensor } => self.alloc(pc, *tensor, &mut st.live)?,
            Ctl::Free { tensor } => {
                self.allocated(pc, *tensor, &st.live)?;
                st.live[*tensor] = false;
            }
            Ctl::Copy {
                src,
                dst,
                size,
                src_offset,
                dst_offset,
            } => {
                self.allocated(pc, *src, &st.live)?;
                self.allocated(pc, *dst, &st.live)?;
                self.copy(pc, (*src, *src_offset), (*dst, *dst_offset), *size)?;
            }
            Ctl::Fence(_) => fence(Ordering::SeqCst),
            Ctl::Notify { device: to, id } => fabric.notify(device, *to, *id)?,
            Ctl::WaitNotify { device: from, id } => fabric.wait(device, *from, *id)?,
            _ => return self.control_flow(pc, st),
        }
        Ok(pc + 1)
    }

    /// `MC_ALLOC` of `tensor`: not allocated already, and its buffer aligned as asked.
    fn alloc(&self, pc: usize, tensor: usize, live: &mut [bool]) -> Result<(), RunError> {
        let t = &self.c.tensors[tensor];
        if live[tensor] {
            return Err(RunError::Memory(format!(
                "{}: tensor {} is already allocated",
                self.here(pc),
                t.name
            )));
        }
        if !self.dev.addresses[tensor].is_multiple_of(t.align as usize) {
            return Err(RunError::Memory(format!(
                "{}: tensor {} is not aligned to {} bytes",
                self.here(pc),
                t.name,
                t.align
            )));
        }
        live[tensor] = true;
        Ok(())
    }

    /// Fails unless `tensor` is allocated.
    fn allocated(&self, pc: usize, tensor: usize, live: &[bool]) -> Result<(), RunError> {
        if live[tensor] {
            return Ok(());
        }
        Err(RunError::Memory(format!(
            "{}: tensor {} is not allocated",
            self.here(pc),
            self.c.tensors[tensor].name
        )))
    }

    /// `MC_COPY` of `size` bytes (whole rows) from `(tensor, offset)` to `(tensor, offset)`,
    /// through the checked runner.
    fn copy(
        &self,
        pc: usize,
        src: (usize, u64),
        dst: (usize, u64),
        size: u64,
    ) -> Result<(), RunError> {
        let rows = |(t, off): (usize, u64)| {
            let p = &self.c.tensors[t];
            let rb = p.row_bytes();
            let mut r = Region {
                tensor: t as u32,
                rank: p.shape.len() as u32,
                start: [0; MAX_RANK],
                size: [1; MAX_RANK],
            };
            for (d, &e) in p.shape.iter().enumerate() {
                r.size[d] = e as u32;
            }
            r.start[0] = (off / rb) as u32;
            r.size[0] = (size / rb) as u32;
            r
        };
        let io = [
            TaskIo::new(rows(src), pto_wsp_ir::Access::In),
            TaskIo::new(rows(dst), pto_wsp_ir::Access::Out),
        ];
        self.runner
            .call(self.dev.copy_kernel, u32::MAX, &[], &io)
            .map_err(|m| RunError::Memory(format!("{}: {m}", self.here(pc))))
    }

    /// Runs control-flow instruction `pc` (`CF_*`); the next instruction to run.
    fn control_flow(&self, pc: usize, st: &mut ControlState) -> Result<usize, RunError> {
        let holds =
            |cond: &Scalar| -> Result<bool, RunError> { Ok(self.eval(cond, u32::MAX)?.nonzero) };
        Ok(match &self.c.control[pc] {
            Ctl::If { cond, skip } => {
                if holds(cond)? {
                    pc + 1
                } else {
                    *skip
                }
            }
            Ctl::Else { end } => *end,
            Ctl::Loop { count, iter, end } => {
                let n = self.count(count, u32::MAX, &|| self.here(pc))?;
                if n == 0 {
                    end + 1
                } else {
                    st.loops.push((*iter, 0, n));
                    pc + 1
                }
            }
            Ctl::EndLoop { head } => {
                let top = st.loops.last_mut().expect("a CF_LOOP is open");
                top.1 += 1;
                if top.1 < top.2 {
                    self.pass_limit(top.1, &|| self.here(*head))?;
                    head + 1
                } else {
                    st.loops.pop();
                    pc + 1
                }
            }
            // Reached from above only: a CF_ENDWHILE jumps past it.
            Ctl::While { cond, end } => {
                if holds(cond)? {
                    st.whiles.push(0);
                    pc + 1
                } else {
                    end + 1
                }
            }
            Ctl::EndWhile { head } => {
                let passes = st.whiles.pop().unwrap_or(0) + 1;
                self.pass_limit(passes, &|| self.here(*head))?;
                let Ctl::While { cond, .. } = &self.c.control[*head] else {
                    return Err(RunError::Internal(format!(
                        "{}: its head is not a CF_WHILE",
                        self.here(pc)
                    )));
                };
                if holds(cond)? {
                    st.whiles.push(passes);
                    head + 1
                } else {
                    pc + 1
                }
            }
            Ctl::Break { cond, end, counted } => {
                if !holds(cond)? {
                    pc + 1
                } else {
                    if *counted {
                        st.loops.pop();
                    } else {
                        st.whiles.pop();
                    }
                    end + 1
                }
            }
            // CF_ENDIF; every other instruction is `control_step`'s.
            _ => pc + 1,
        })
    }
}

/// What the control code keeps while it runs.
struct ControlState {
    /// Per tensor: allocated (between its `MC_ALLOC` and `MC_FREE`).
    live: Vec<bool>,
    /// Per open `CF_LOOP`: iterator, pass, count.
    loops: Vec<(u32, u64, u64)>,
    /// Per open `CF_WHILE`: passes made.
    whiles: Vec<u64>,
}
