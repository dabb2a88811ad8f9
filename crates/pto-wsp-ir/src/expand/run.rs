//! Running a resolved program: the generator of the reference expander.
//!
//! Why an explicit stack rather than recursion: CSP processes must be suspended when they wait on
//! an empty channel and resumed later, so each process's position is data (a stack of frames).
//! A workload entry is just one process with no channels, so workloads and pipelines share this
//! one interpreter — one implementation of every statement, so they cannot disagree.
//!
//! Promise: tasks are emitted in program order (for pipelines: the Kahn-network order of
//! `SEMANTICS.md`), each with every expression evaluated and checked; structural order edges are
//! emitted as soon as both of their ranges are complete, and announced right before the first
//! task of their later range (the contract is on [`ExpandSink`]). Nothing here panics on a
//! program that [`super::compile`] accepted.
//!
//! How announcements work: when a `for_each` / `sequential` child closes non-empty, the next
//! child's edge (from the closed one) is *armed* — its `before` range goes on the runner's
//! `armed` list — and the next task emitted, whatever process emits it, announces it first (every
//! task the runner emits after that boundary has an index in the next child's range, since ranges
//! are `start..now` of the global count). A child that stays empty keeps the entry armed for the
//! child after it; a tracked frame that ends disarms its entry. Every armed entry was armed at
//! the current count, so the list holds at most one entry per process.

use super::compile::{CArg, CExpr, CTask, Program};
use super::{
    ChannelPort, DataRead, ExpandError, ExpandSink, ExpandedRegion, ExpandedTask, OrderEdge,
    OrderTrack, ReadRefused, splitmix64,
};
use crate::eval::EvalError;
use crate::loc::Loc;
use crate::resolve::{Axis, AxisExtent, DispatchPlan, Loop, Stmt, StmtKind, Task};
use crate::resolve::{ChannelId, ExprId, Reg, TensorId};
use crate::types::{Access, ExecPool, ScalarType};
use crate::value::Value;
use std::borrow::Cow;
use std::collections::VecDeque;
use std::ops::{ControlFlow, Range};

/// An integer from an evaluation result, or an error saying what was being evaluated.
#[inline]
pub(super) fn int(what: &str, r: Result<Value, EvalError>) -> Result<i64, ExpandError> {
    match r {
        Ok(Value::I64(v)) => Ok(v),
        other => int_slow(what, other),
    }
}

#[cold]
fn int_slow(what: &str, r: Result<Value, EvalError>) -> Result<i64, ExpandError> {
    match r {
        Ok(Value::I64(v)) => Ok(v),
        Ok(Value::U64(v)) => i64::try_from(v).map_err(|_| ExpandError::Eval {
            context: what.to_string(),
            source: EvalError::Overflow {
                op: "as i64",
                lhs: Value::U64(v),
                rhs: None,
            },
        }),
        Ok(v @ Value::Bool(_)) => Err(ExpandError::WrongType {
            context: what.to_string(),
            expected: "an integer".into(),
            found: v.ty(),
        }),
        Err(source) => Err(ExpandError::Eval {
            context: what.to_string(),
            source,
        }),
    }
}

#[inline]
fn eval(e: &CExpr, env: &[Value]) -> Result<Value, ExpandError> {
    e.code.eval(env).map_err(|source| ExpandError::Eval {
        context: e.what.clone(),
        source,
    })
}

#[inline]
fn eval_int(e: &CExpr, env: &[Value]) -> Result<i64, ExpandError> {
    int(&e.what, e.code.eval(env))
}

fn eval_bool(e: &CExpr, env: &[Value]) -> Result<bool, ExpandError> {
    match eval(e, env)? {
        Value::Bool(b) => Ok(b),
        v @ (Value::I64(_) | Value::U64(_)) => Err(ExpandError::WrongType {
            context: e.what.clone(),
            expected: "bool".into(),
            found: v.ty(),
        }),
    }
}

/// Adds task context to an error raised while evaluating a task's expressions.
fn at_task(err: ExpandError, index: u32, kernel: &str) -> ExpandError {
    match err {
        ExpandError::Eval { context, source } => ExpandError::Eval {
            context: format!("{context}, in task #{index} (`{kernel}`)"),
            source,
        },
        ExpandError::WrongType {
            context,
            expected,
            found,
        } => ExpandError::WrongType {
            context: format!("{context}, in task #{index} (`{kernel}`)"),
            expected,
            found,
        },
        other => other,
    }
}

enum Frame<'p> {
    Block {
        body: &'p [Stmt],
        pos: usize,
        track: Option<OrderTrack>,
    },
    Dense {
        var: u32,
        body: &'p [Stmt],
        next: i64,
        end: i64,
        track: Option<OrderTrack>,
    },
    Ragged {
        vars: [u32; 2],
        body: &'p [Stmt],
        /// The bound tensor's rows, or the lengths computed from them by the axis's expression.
        lengths: std::borrow::Cow<'p, [i64]>,
        row: i64,
        rows: i64,
        pos: i64,
        track: Option<OrderTrack>,
    },
    Sparse {
        vars: [u32; 2],
        body: &'p [Stmt],
        indptr: Cow<'p, [i64]>,
        indices: Cow<'p, [i64]>,
        row: usize,
        rows: usize,
        j: usize,
    },
    Consume {
        channel: u32,
        var: u32,
        body: &'p [Stmt],
        /// The producer task that must precede this iteration's first task, until it is emitted.
        pending: Option<u32>,
    },
    While {
        cond: ExprId,
        body: &'p [Stmt],
        /// Iterations started so far.
        iters: i64,
        /// The bound.
        max: i64,
        track: Option<OrderTrack>,
    },
}

impl Frame<'_> {
    fn track(&mut self) -> Option<&mut OrderTrack> {
        match self {
            Frame::Block { track, .. }
            | Frame::Dense { track, .. }
            | Frame::Ragged { track, .. }
            | Frame::While { track, .. } => track.as_mut(),
            Frame::Sparse { .. } | Frame::Consume { .. } => None,
        }
    }
}

struct Proc<'p> {
    stack: Vec<Frame<'p>>,
    /// Index of the last task this process emitted.
    last_task: Option<u32>,
    /// How many `Consume` frames on the stack have a pending edge.
    pending: usize,
    done: bool,
}

struct Token {
    value: Value,
    /// The producer's last task before the send.
    after: Option<u32>,
}

struct ChannelState {
    tokens: VecDeque<Token>,
    closed: bool,
}

/// Why a process stopped running.
enum Stop {
    /// It waits on an empty open channel.
    Blocked,
    /// It ended.
    Done,
    /// The task limit was reached, or the sink stopped the expansion.
    Limit,
}

pub(super) struct Runner<'p, 's, S: ExpandSink> {
    prog: &'p Program<'p>,
    env: Vec<Value>,
    count: u32,
    limit: Option<usize>,
    buf: ExpandedTask,
    sink: &'s mut S,
    channels: Vec<ChannelState>,
    /// `before` ranges of order edges whose later range starts with the next task emitted (see
    /// the module docs).
    armed: Vec<Range<u32>>,
    /// `before` ranges of the single-task CSP edges into the task being emitted (scratch).
    csp_edges: Vec<Range<u32>>,
    /// Where channel operations go when one process runs alone ([`Runner::run_alone`]);
    /// `None`: the runner's own unbounded channels (the Kahn network).
    port: Option<&'s mut dyn ChannelPort>,
    pub truncated: bool,
    pub stopped: bool,
    /// `while` loops that ended at their bound with the condition still true.
    pub loops_at_max: u64,
    /// Computed reads served by the sink.
    pub computed_reads: u64,
}

impl<'p, 's, S: ExpandSink> Runner<'p, 's, S> {
    pub(super) fn new(prog: &'p Program<'p>, limit: Option<usize>, sink: &'s mut S) -> Self {
        Runner {
            prog,
            env: prog.env.clone(),
            count: 0,
            limit,
            buf: ExpandedTask {
                kernel: 0,
                declared: 0,
                params: Vec::new(),
                regions: Vec::new(),
                pool: ExecPool::Any,
                target: None,
                stream: 0,
                priority: 0,
                cost: None,
                loc: Loc::NONE,
            },
            sink,
            channels: prog
                .res
                .channels
                .iter()
                .map(|_| ChannelState {
                    tokens: VecDeque::new(),
                    closed: false,
                })
                .collect(),
            armed: Vec::new(),
            csp_edges: Vec::new(),
            port: None,
            truncated: false,
            stopped: false,
            loops_at_max: 0,
            computed_reads: 0,
        }
    }

    /// The contents of a box of computed tensor `tensor`, from the sink. `Ok(None)`: the sink
    /// stopped the run.
    #[inline(never)]
    fn computed(
        &mut self,
        tensor: TensorId,
        start: &[i64],
        size: &[i64],
        loc: Loc,
    ) -> Result<Option<Vec<i64>>, ExpandError> {
        let mut out = Vec::new();
        let read = DataRead {
            tensor: tensor.0,
            start,
            size,
            loc,
        };
        self.computed_reads += 1;
        match self.sink.read(&read, &mut out) {
            Ok(()) => {
                let want: i64 = size.iter().product();
                if out.len() as i64 != want {
                    return Err(ExpandError::ComputedRead {
                        tensor: self.prog.module.tensors[tensor.index()].name.name.clone(),
                        reason: format!("the consumer gave {} element(s), not {want}", out.len()),
                        loc,
                    });
                }
                Ok(Some(out))
            }
            Err(ReadRefused::Stopped) => {
                self.stopped = true;
                Ok(None)
            }
            Err(ReadRefused::Unsupported(reason)) => Err(ExpandError::ComputedRead {
                tensor: self.prog.module.tensors[tensor.index()].name.name.clone(),
                reason,
                loc,
            }),
        }
    }

    /// Element `index` of computed tensor `tensor` (`Ok(None)`: the sink stopped the run).
    #[inline(never)]
    fn computed_element(
        &mut self,
        tensor: TensorId,
        index: &[ExprId],
        loc: Loc,
    ) -> Result<Option<i64>, ExpandError> {
        let start: Vec<i64> = index
            .iter()
            .map(|e| eval_int(self.prog.x(*e), &self.env))
            .collect::<Result<_, _>>()?;
        let size = vec![1; start.len()];
        Ok(self.computed(tensor, &start, &size, loc)?.map(|v| v[0]))
    }

    /// The whole contents of a tensor the entry reads: bound, or computed (then `Ok(None)`
    /// when the sink stopped the run).
    fn whole(&mut self, tensor: TensorId, loc: Loc) -> Result<Option<Cow<'p, [i64]>>, ExpandError> {
        let prog = self.prog;
        if !prog.computed[tensor.index()] {
            return Ok(Some(Cow::Borrowed(
                prog.arrays[tensor.index()].unwrap_or(&[]),
            )));
        }
        let shape = &prog.shapes[tensor.index()];
        let start = vec![0; shape.len()];
        if shape.contains(&0) {
            return Ok(Some(Cow::Owned(Vec::new())));
        }
        Ok(self
            .computed(tensor, &start, &shape.clone(), loc)?
            .map(Cow::Owned))
    }

    /// Starts a loop over a ragged axis (out of line: per loop, not per task).
    #[inline(never)]
    fn start_ragged(
        &mut self,
        s: &'p Stmt,
        lp: &'p Loop,
        axis: &'p Axis,
        track: Option<OrderTrack>,
        proc: &mut Proc<'p>,
    ) -> Result<bool, ExpandError> {
        let prog = self.prog;
        let var = |k: usize| lp.vars.get(k).copied().unwrap_or(0);
        let AxisExtent::Ragged {
            rows,
            lengths,
            per_row,
        } = &axis.kind
        else {
            return Ok(true);
        };
        let rows = eval_int(prog.x(*rows), &self.env)?;
        let name = &prog.module.tensors[lengths.index()].name.name;
        if rows < 0 {
            return Err(ExpandError::NegativeLength {
                what: format!("the row count of axis `{}`", axis.name),
                value: rows,
            });
        }
        let Some(data) = self.whole(*lengths, s.loc)? else {
            return Ok(false);
        };
        if (data.len() as u64) < rows as u64 {
            return Err(ExpandError::ArrayTooShort {
                tensor: name.clone(),
                needed: rows as u64,
                len: data.len(),
            });
        }
        let data: Cow<'p, [i64]> = match data {
            Cow::Borrowed(d) => Cow::Borrowed(&d[..rows as usize]),
            Cow::Owned(mut d) => {
                d.truncate(rows as usize);
                Cow::Owned(d)
            }
        };
        let data: Cow<'p, [i64]> = match per_row {
            None => data,
            Some(pr) => {
                let length = prog.x(pr.length);
                let mut out = Vec::with_capacity(data.len());
                for &v in data.iter() {
                    self.env[pr.element as usize] = Value::I64(v);
                    out.push(eval_int(length, &self.env)?);
                }
                out.into()
            }
        };
        if let Some(r) = data.iter().position(|&l| l < 0) {
            let from = if per_row.is_some() {
                " computed from"
            } else {
                ""
            };
            return Err(ExpandError::NegativeLength {
                what: format!("row length{from} `{name}[{r}]` of axis `{}`", axis.name),
                value: data[r],
            });
        }
        proc.stack.push(Frame::Ragged {
            vars: [var(0), var(1)],
            body: &lp.body,
            lengths: data,
            row: 0,
            rows,
            pos: 0,
            track,
        });
        Ok(true)
    }

    /// Starts a `select` over a sparse axis (out of line: per loop, not per task).
    #[inline(never)]
    fn start_sparse(
        &mut self,
        s: &'p Stmt,
        lp: &'p Loop,
        axis: &'p Axis,
        proc: &mut Proc<'p>,
    ) -> Result<bool, ExpandError> {
        let prog = self.prog;
        let var = |k: usize| lp.vars.get(k).copied().unwrap_or(0);
        let AxisExtent::Sparse {
            rows,
            indptr,
            indices,
        } = &axis.kind
        else {
            return Ok(true);
        };
        let rows = eval_int(prog.x(*rows), &self.env)?;
        if rows < 0 {
            return Err(ExpandError::NegativeLength {
                what: format!("the row count of axis `{}`", axis.name),
                value: rows,
            });
        }
        let tensors = &prog.module.tensors;
        let ip_name = &tensors[indptr.index()].name.name;
        let ix_name = &tensors[indices.index()].name;
        let Some(indptr) = self.whole(*indptr, s.loc)? else {
            return Ok(false);
        };
        let Some(indices) = self.whole(*indices, s.loc)? else {
            return Ok(false);
        };
        let needed = rows as u64 + 1;
        if (indptr.len() as u64) < needed {
            return Err(ExpandError::ArrayTooShort {
                tensor: ip_name.clone(),
                needed,
                len: indptr.len(),
            });
        }
        let indptr: Cow<'p, [i64]> = match indptr {
            Cow::Borrowed(d) => Cow::Borrowed(&d[..needed as usize]),
            Cow::Owned(mut d) => {
                d.truncate(needed as usize);
                Cow::Owned(d)
            }
        };
        for (r, &v) in indptr.iter().enumerate() {
            let bad = if v < 0 || v as u64 > indices.len() as u64 {
                Some(format!(
                    "entry {r} is {v}, outside 0..={} (the length of `{}`)",
                    indices.len(),
                    ix_name
                ))
            } else if r > 0 && v < indptr[r - 1] {
                Some(format!(
                    "entry {r} ({v}) is less than entry {} ({})",
                    r - 1,
                    indptr[r - 1]
                ))
            } else {
                None
            };
            if let Some(message) = bad {
                return Err(ExpandError::BadIndptr {
                    tensor: ip_name.clone(),
                    message,
                });
            }
        }
        let j = indptr[0] as usize;
        proc.stack.push(Frame::Sparse {
            vars: [var(0), var(1)],
            body: &lp.body,
            indptr,
            indices,
            row: 0,
            rows: rows as usize,
            j,
        });
        Ok(true)
    }

    /// Starts a `while` loop (kept out of the statement loop: most programs have none).
    #[inline(never)]
    fn start_while(
        &mut self,
        cond: ExprId,
        max: ExprId,
        body: &'p [Stmt],
        proc: &mut Proc<'p>,
    ) -> Result<(), ExpandError> {
        let max = eval_int(self.prog.x(max), &self.env)?;
        if max < 0 {
            return Err(ExpandError::NegativeLength {
                what: "the `max` bound of a `while` loop".into(),
                value: max,
            });
        }
        proc.stack.push(Frame::While {
            cond,
            body,
            iters: 0,
            max,
            track: Some(OrderTrack::new(self.count)),
        });
        Ok(())
    }

    /// The `while` frame on top of `proc`'s stack: starts the next iteration, or ends the loop
    /// (counting it when it ends at its bound with the condition still true).
    #[inline(never)]
    fn step_while(&mut self, proc: &mut Proc<'p>, now: u32) -> Result<(), ExpandError> {
        let Some(Frame::While {
            cond,
            body,
            iters,
            max,
            track,
        }) = proc.stack.last_mut()
        else {
            return Ok(());
        };
        if let Some(t) = track {
            t.boundary(now, |e| self.sink.order(e), &mut self.armed);
        }
        let holds = eval_bool(self.prog.x(*cond), &self.env)?;
        if holds && *iters < *max {
            *iters += 1;
            let body: &'p [Stmt] = body;
            proc.stack.push(Frame::Block {
                body,
                pos: 0,
                track: None,
            });
        } else {
            if holds {
                self.loops_at_max += 1;
            }
            if let Some(t) = track {
                t.end(&mut self.armed);
            }
            proc.stack.pop();
        }
        Ok(())
    }

    /// `break if COND`.
    #[inline(never)]
    fn break_if(&mut self, cond: ExprId, proc: &mut Proc<'p>) -> Result<(), ExpandError> {
        if eval_bool(self.prog.x(cond), &self.env)? {
            self.break_loop(proc);
        }
        Ok(())
    }

    /// `break if` held: leaves the innermost `while`, closing the order tracking of every frame
    /// it leaves as if each had ended here.
    fn break_loop(&mut self, proc: &mut Proc<'p>) {
        let now = self.count;
        while let Some(mut f) = proc.stack.pop() {
            if let Some(t) = f.track() {
                t.boundary(now, |e| self.sink.order(e), &mut self.armed);
                t.end(&mut self.armed);
            }
            if matches!(f, Frame::While { .. }) {
                return;
            }
        }
    }

    /// Runs every process to the end (or the limit); returns the number of tasks emitted.
    pub(super) fn run(&mut self) -> Result<u32, ExpandError> {
        let prog = self.prog;
        let mut procs: Vec<Proc<'p>> = prog
            .res
            .processes
            .iter()
            .map(|p| Proc {
                stack: vec![Frame::Block {
                    body: &p.body,
                    pos: 0,
                    track: None,
                }],
                last_task: None,
                pending: 0,
                done: false,
            })
            .collect();
        loop {
            // The first process (in declaration order) that can make progress.
            let runnable = procs.iter().position(|p| !p.done && self.can_progress(p));
            let Some(i) = runnable else {
                if procs.iter().all(|p| p.done) {
                    return Ok(self.count);
                }
                let waiting = procs
                    .iter()
                    .zip(&prog.res.processes)
                    .filter(|(p, _)| !p.done)
                    .map(|(p, cp)| {
                        let ch = match p.stack.last() {
                            Some(Frame::Consume { channel, .. }) => {
                                prog.res.channels[*channel as usize].name.clone()
                            }
                            _ => String::from("?"),
                        };
                        (cp.name.clone(), ch)
                    })
                    .collect();
                return Err(ExpandError::Deadlock { waiting });
            };
            match self.run_proc(&mut procs[i])? {
                Stop::Blocked => {}
                Stop::Done => {
                    procs[i].done = true;
                    for &ch in &prog.res.processes[i].produces {
                        self.channels[ch.index()].closed = true;
                    }
                }
                Stop::Limit => {
                    if self.stopped {
                        // The sink asked for nothing more.
                        return Ok(self.count);
                    }
                    // Close every open order range at the truncation point, innermost first.
                    for p in &mut procs {
                        for f in p.stack.iter_mut().rev() {
                            if let Some(t) = f.track() {
                                t.boundary(self.count, |e| self.sink.order(e), &mut self.armed);
                            }
                        }
                    }
                    return Ok(self.count);
                }
            }
        }
    }

    /// Runs process `i` alone, its channel operations through `port` (which may block), to its
    /// end or until the port or the sink stops it; returns the number of tasks emitted.
    pub(super) fn run_alone(
        &mut self,
        i: usize,
        port: &'s mut dyn ChannelPort,
    ) -> Result<u32, ExpandError> {
        let prog = self.prog;
        let Some(p) = prog.res.processes.get(i) else {
            return Err(ExpandError::Malformed {
                message: format!(
                    "process index {i} is out of range ({} process(es))",
                    prog.res.processes.len()
                ),
            });
        };
        self.port = Some(port);
        let mut proc = Proc {
            stack: vec![Frame::Block {
                body: &p.body,
                pos: 0,
                track: None,
            }],
            last_task: None,
            pending: 0,
            done: false,
        };
        match self.run_proc(&mut proc)? {
            Stop::Done => Ok(self.count),
            Stop::Limit => {
                if !self.stopped {
                    for f in proc.stack.iter_mut().rev() {
                        if let Some(t) = f.track() {
                            t.boundary(self.count, |e| self.sink.order(e), &mut self.armed);
                        }
                    }
                }
                Ok(self.count)
            }
            // With a port, a `consume` waits in the port instead of blocking the runner.
            Stop::Blocked => Err(ExpandError::Malformed {
                message: format!("process `{}` blocked without a channel port", p.name),
            }),
        }
    }

    fn can_progress(&self, p: &Proc<'_>) -> bool {
        match p.stack.last() {
            Some(Frame::Consume { channel, .. }) => {
                let c = &self.channels[*channel as usize];
                c.closed || !c.tokens.is_empty()
            }
            _ => true,
        }
    }

    /// [`Runner::run_proc`] on a sparse frame: the next entry, or the frame ends.
    #[inline(always)]
    fn step_sparse(&mut self, proc: &mut Proc<'p>) {
        let Some(Frame::Sparse {
            vars,
            body,
            indptr,
            indices,
            row,
            rows,
            j,
        }) = proc.stack.last_mut()
        else {
            return;
        };
        // indptr was checked: OUTER + 1 non-decreasing entries within the indices.
        while *row < *rows && *j >= indptr[*row + 1] as usize {
            *row += 1;
        }
        if *row < *rows {
            self.env[vars[0] as usize] = Value::I64(*row as i64);
            self.env[vars[1] as usize] = Value::I64(indices[*j]);
            *j += 1;
            let body: &'p [Stmt] = body;
            proc.stack.push(Frame::Block {
                body,
                pos: 0,
                track: None,
            });
        } else {
            proc.stack.pop();
        }
    }

    /// [`Runner::run_proc`] on a `consume`: the next token (from the port when one is
    /// attached), the end when the channel is closed and empty, or `Some(Stop::Blocked)`.
    #[inline(always)]
    fn step_consume(&mut self, proc: &mut Proc<'p>) -> Result<Option<Stop>, ExpandError> {
        let Some(Frame::Consume {
            channel,
            var,
            body,
            pending,
        }) = proc.stack.last_mut()
        else {
            return Ok(None);
        };
        if pending.take().is_some() {
            // The previous iteration generated no task: its edge lapses.
            proc.pending -= 1;
        }
        if let Some(port) = self.port.as_deref_mut() {
            match port.recv(*channel) {
                ControlFlow::Break(()) => {
                    self.stopped = true;
                    return Ok(Some(Stop::Limit));
                }
                ControlFlow::Continue(Some(value)) => {
                    self.env[*var as usize] = value;
                    let body: &'p [Stmt] = body;
                    proc.stack.push(Frame::Block {
                        body,
                        pos: 0,
                        track: None,
                    });
                }
                ControlFlow::Continue(None) => {
                    proc.stack.pop();
                }
            }
            return Ok(None);
        }
        let ch = &mut self.channels[*channel as usize];
        if let Some(tok) = ch.tokens.pop_front() {
            self.env[*var as usize] = tok.value;
            if let Some(t) = tok.after {
                *pending = Some(t);
                proc.pending += 1;
            }
            let body: &'p [Stmt] = body;
            proc.stack.push(Frame::Block {
                body,
                pos: 0,
                track: None,
            });
        } else if ch.closed {
            proc.stack.pop();
        } else {
            return Ok(Some(Stop::Blocked));
        }
        Ok(None)
    }

    /// Runs one process until it blocks, ends or hits the limit.
    fn run_proc(&mut self, proc: &mut Proc<'p>) -> Result<Stop, ExpandError> {
        loop {
            let now = self.count;
            let Some(top) = proc.stack.last_mut() else {
                return Ok(Stop::Done);
            };
            match top {
                Frame::Block { body, pos, track } => {
                    if let Some(t) = track {
                        t.boundary(now, |e| self.sink.order(e), &mut self.armed);
                    }
                    let body: &'p [Stmt] = body;
                    match body.get(*pos) {
                        Some(s) => {
                            *pos += 1;
                            if !self.exec(s, proc).map_err(|e| e.at(s.loc))? {
                                return Ok(Stop::Limit);
                            }
                        }
                        None => {
                            if let Some(t) = track {
                                t.end(&mut self.armed);
                            }
                            proc.stack.pop();
                        }
                    }
                }
                Frame::Dense {
                    var,
                    body,
                    next,
                    end,
                    track,
                } => {
                    if let Some(t) = track {
                        t.boundary(now, |e| self.sink.order(e), &mut self.armed);
                    }
                    if *next < *end {
                        self.env[*var as usize] = Value::I64(*next);
                        *next += 1;
                        let body: &'p [Stmt] = body;
                        proc.stack.push(Frame::Block {
                            body,
                            pos: 0,
                            track: None,
                        });
                    } else {
                        if let Some(t) = track {
                            t.end(&mut self.armed);
                        }
                        proc.stack.pop();
                    }
                }
                Frame::Ragged {
                    vars,
                    body,
                    lengths,
                    row,
                    rows,
                    pos,
                    track,
                } => {
                    if let Some(t) = track {
                        t.boundary(now, |e| self.sink.order(e), &mut self.armed);
                    }
                    // Skip finished (and empty) rows.
                    while *row < *rows && *pos >= lengths[*row as usize] {
                        *row += 1;
                        *pos = 0;
                    }
                    if *row < *rows {
                        self.env[vars[0] as usize] = Value::I64(*row);
                        self.env[vars[1] as usize] = Value::I64(*pos);
                        *pos += 1;
                        let body: &'p [Stmt] = body;
                        proc.stack.push(Frame::Block {
                            body,
                            pos: 0,
                            track: None,
                        });
                    } else {
                        if let Some(t) = track {
                            t.end(&mut self.armed);
                        }
                        proc.stack.pop();
                    }
                }
                Frame::Sparse { .. } => self.step_sparse(proc),
                Frame::While { .. } => self.step_while(proc, now)?,
                Frame::Consume { .. } => {
                    if let Some(stop) = self.step_consume(proc)? {
                        return Ok(stop);
                    }
                }
            }
        }
    }

    /// `load SLOT = TENSOR[..]`: one element of bound contents, or of a computed tensor read
    /// through the sink. `Ok(false)`: the sink stopped the expansion at the read.
    #[inline(always)]
    fn exec_load(
        &mut self,
        s: &'p Stmt,
        slot: Reg,
        tensor: TensorId,
        index: &[ExprId],
    ) -> Result<bool, ExpandError> {
        let prog = self.prog;
        let decl = &prog.module.slots[(slot - prog.res.n_symbols()) as usize];
        let (name, ty) = (&decl.name, &decl.ty);
        let tname = &prog.module.tensors[tensor.index()].name.name;
        let shape = &prog.shapes[tensor.index()];
        let mut flat: u64 = 0;
        for (d, (e, &extent)) in index.iter().zip(shape).enumerate() {
            let i = eval_int(prog.x(*e), &self.env)?;
            if i < 0 || i >= extent {
                return Err(ExpandError::LoadOutOfBounds {
                    tensor: tname.clone(),
                    dim: d,
                    index: i,
                    extent,
                    loc: s.loc,
                });
            }
            // In bounds of every dimension, so the product fits the element count.
            flat = flat.saturating_mul(extent as u64).saturating_add(i as u64);
        }
        let elem = if prog.computed[tensor.index()] {
            match self.computed_element(tensor, index, s.loc)? {
                Some(v) => v,
                None => return Ok(false),
            }
        } else {
            let data = prog.arrays[tensor.index()].unwrap_or(&[]);
            let Some(&elem) = data.get(flat as usize) else {
                return Err(ExpandError::ArrayTooShort {
                    tensor: tname.clone(),
                    needed: flat.saturating_add(1),
                    len: data.len(),
                });
            };
            elem
        };
        let v = match ty {
            ScalarType::I64 => Value::I64(elem),
            ScalarType::U64 if elem >= 0 => Value::U64(elem as u64),
            ScalarType::U64 | ScalarType::Bool => {
                return Err(ExpandError::WrongType {
                    context: format!("`load {name} = {tname}[..]` (element {elem})"),
                    expected: format!("{ty} (the type of slot `{name}`)"),
                    found: ScalarType::I64,
                });
            }
        };
        self.env[slot as usize] = v;
        Ok(true)
    }

    /// Executes one statement (pushing a frame for compound ones). `Ok(false)`: limit reached.
    // Inlined into the statement loop: a call per statement costs ~5% of the expander's time.
    #[inline(always)]
    fn exec(&mut self, s: &'p Stmt, proc: &mut Proc<'p>) -> Result<bool, ExpandError> {
        let prog = self.prog;
        let now = self.count;
        match &s.kind {
            StmtKind::Loop(lp) => return self.start_loop(s, lp, now, proc),
            StmtKind::If {
                cond,
                then_body,
                else_body,
            } => {
                let body = if eval_bool(prog.x(*cond), &self.env)? {
                    then_body
                } else {
                    else_body
                };
                if !body.is_empty() {
                    proc.stack.push(Frame::Block {
                        body,
                        pos: 0,
                        track: None,
                    });
                }
            }
            StmtKind::While { cond, max, body } => self.start_while(*cond, *max, body, proc)?,
            StmtKind::Break { cond } => self.break_if(*cond, proc)?,
            StmtKind::Block { ordered, body } => proc.stack.push(Frame::Block {
                body,
                pos: 0,
                track: ordered.then(|| OrderTrack::new(now)),
            }),
            StmtKind::Task(t) => return self.task(t, s.loc, proc),
            StmtKind::Set { slot, value } => self.set_slot(*slot, *value)?,
            StmtKind::Load {
                slot,
                tensor,
                index,
            } => return self.exec_load(s, *slot, *tensor, index),
            StmtKind::Call {
                workload,
                args,
                body,
            } => self.call(workload, args, body, proc)?,
            StmtKind::Send { channel, value } => return self.send(*channel, *value, proc),
            StmtKind::Consume { channel, var, body } => proc.stack.push(Frame::Consume {
                channel: channel.0,
                var: *var,
                body,
                pending: None,
            }),
        }
        Ok(true)
    }

    /// Starts loop `lp` (statement `s`, at task count `now`).
    #[inline]
    fn start_loop(
        &mut self,
        s: &'p Stmt,
        lp: &'p Loop,
        now: u32,
        proc: &mut Proc<'p>,
    ) -> Result<bool, ExpandError> {
        let prog = self.prog;
        let track = lp.ordered.then(|| OrderTrack::new(now));
        let axis = &prog.res.axes[lp.axis.index()];
        let var = |k: usize| lp.vars.get(k).copied().unwrap_or(0);
        match &axis.kind {
            AxisExtent::Dense(extent) => {
                let end = eval_int(prog.x(*extent), &self.env)?;
                if end < 0 {
                    return Err(ExpandError::NegativeLength {
                        what: format!("the extent of axis `{}`", axis.name),
                        value: end,
                    });
                }
                proc.stack.push(Frame::Dense {
                    var: var(0),
                    body: &lp.body,
                    next: 0,
                    end,
                    track,
                });
            }
            AxisExtent::Ragged { lengths, .. } => {
                let computed = prog.computed[lengths.index()];
                return self
                    .start_ragged(s, lp, axis, track, proc)
                    .map_err(|e| at_read(computed, s.loc, e));
            }
            AxisExtent::Sparse {
                indptr, indices, ..
            } => {
                let computed = prog.computed[indptr.index()] || prog.computed[indices.index()];
                return self
                    .start_sparse(s, lp, axis, proc)
                    .map_err(|e| at_read(computed, s.loc, e));
            }
        }
        Ok(true)
    }

    /// `set SLOT = VALUE;`.
    #[inline]
    fn set_slot(&mut self, slot: Reg, value: ExprId) -> Result<(), ExpandError> {
        let prog = self.prog;
        let value = prog.x(value);
        let decl = &prog.module.slots[(slot - prog.res.n_symbols()) as usize];
        let (name, ty) = (&decl.name, &decl.ty);
        let v = eval(value, &self.env)?;
        if v.ty() != *ty {
            return Err(ExpandError::WrongType {
                context: value.what.clone(),
                expected: format!("{ty} (the type of slot `{name}`)"),
                found: v.ty(),
            });
        }
        self.env[slot as usize] = v;
        Ok(())
    }

    /// `call WORKLOAD(ARGS)`: the arguments into the callee's parameters, then its body.
    #[inline]
    fn call(
        &mut self,
        workload: &str,
        args: &[(Reg, ExprId)],
        body: &'p [Stmt],
        proc: &mut Proc<'p>,
    ) -> Result<(), ExpandError> {
        let prog = self.prog;
        for (var, e) in args {
            let e = prog.x(*e);
            let ty = &prog.res.regs[*var as usize];
            let v = eval(e, &self.env)?;
            if v.ty() != *ty {
                return Err(ExpandError::WrongType {
                    context: format!("{} (calling `{workload}`)", e.what),
                    expected: ty.to_string(),
                    found: v.ty(),
                });
            }
            // Callee parameters live above every caller variable: no clobbering.
            self.env[*var as usize] = v;
        }
        proc.stack.push(Frame::Block {
            body,
            pos: 0,
            track: None,
        });
        Ok(())
    }

    /// `send CHANNEL VALUE;`. `Ok(false)`: the port stopped the expansion.
    #[inline]
    fn send(
        &mut self,
        channel: ChannelId,
        value: ExprId,
        proc: &mut Proc<'p>,
    ) -> Result<bool, ExpandError> {
        let prog = self.prog;
        let value = prog.x(value);
        let v = eval(value, &self.env)?;
        if v.ty() == ScalarType::Bool {
            return Err(ExpandError::WrongType {
                context: value.what.clone(),
                expected: "an integer".into(),
                found: v.ty(),
            });
        }
        if let Some(port) = self.port.as_deref_mut() {
            if port.send(channel.0, v).is_break() {
                self.stopped = true;
                return Ok(false);
            }
            return Ok(true);
        }
        self.channels[channel.index()].tokens.push_back(Token {
            value: v,
            after: proc.last_task,
        });
        Ok(true)
    }

    /// Emits one task, with the announcements before it and its CSP edges. `Ok(false)`: the
    /// limit was reached first, or the sink stopped the expansion.
    fn task(&mut self, t: &Task, loc: Loc, proc: &mut Proc<'p>) -> Result<bool, ExpandError> {
        let prog = self.prog;
        if self.limit.is_some_and(|l| self.count as usize >= l) {
            self.truncated = true;
            return Ok(false);
        }
        let index = self.count;
        let kname = &prog.module.kernels[t.kernel.index()].name.name;
        self.fill(t, index).map_err(|e| at_task(e, index, kname))?;
        self.buf.loc = loc;
        self.count = index.checked_add(1).ok_or(ExpandError::TooManyTasks)?;
        // `for_each` / `sequential` edges whose later range starts here, outermost first.
        if !self.armed.is_empty() {
            for before in self.armed.drain(..) {
                self.sink.order_begin(before, index);
            }
        }
        if prog.res.csp {
            // The process's previous task, then the producers of the tokens its enclosing
            // `consume` iterations took; announced innermost-last, closed in this order.
            self.csp_edges.clear();
            if let Some(last) = proc.last_task {
                self.csp_edges.push(last..last + 1);
            }
            proc.last_task = Some(index);
            if proc.pending > 0 {
                for f in &mut proc.stack {
                    if let Frame::Consume { pending, .. } = f
                        && let Some(p) = pending.take()
                    {
                        self.csp_edges.push(p..p + 1);
                        proc.pending -= 1;
                    }
                }
            }
            for before in self.csp_edges.iter().rev() {
                self.sink.order_begin(before.clone(), index);
            }
        }
        if self.sink.task(index, &self.buf).is_break() {
            self.stopped = true;
            return Ok(false);
        }
        if !self.csp_edges.is_empty() {
            for before in self.csp_edges.drain(..) {
                self.sink.order(OrderEdge {
                    before,
                    after: index..index + 1,
                });
            }
        }
        Ok(true)
    }

    /// Evaluates the task's arguments and schedule decisions into `self.buf`.
    fn fill(&mut self, t: &Task, index: u32) -> Result<(), ExpandError> {
        let prog = self.prog;
        let env = &mut self.env;
        let buf = &mut self.buf;
        let decl = &prog.module.kernels[t.kernel.index()];
        let Some(ct) = prog.tasks.get(t.id as usize) else {
            return Err(ExpandError::Malformed {
                message: format!("task statement {} was not compiled", t.id),
            });
        };
        buf.declared = t.kernel.0;
        buf.params.clear();
        let mut nreg = 0;
        let pname = |i: u32| {
            decl.params
                .get(i as usize)
                .map_or_else(String::new, |p| p.name.name.clone())
        };
        for arg in &ct.args {
            match arg {
                CArg::Scalar {
                    value,
                    ty,
                    tier_slot,
                    param,
                } => {
                    let v = eval(value, env)?;
                    if v.ty() != *ty {
                        return Err(ExpandError::WrongType {
                            context: format!("argument `{}`", pname(*param)),
                            expected: ty.to_string(),
                            found: v.ty(),
                        });
                    }
                    buf.params.push(v);
                    env[*tier_slot as usize] = v;
                }
                CArg::Region {
                    param,
                    tensor,
                    access,
                    dims,
                } => {
                    if nreg == buf.regions.len() {
                        buf.regions.push(ExpandedRegion {
                            tensor: 0,
                            access: Access::In,
                            start: Vec::new(),
                            size: Vec::new(),
                        });
                    }
                    let r = &mut buf.regions[nreg];
                    nreg += 1;
                    let shape = &prog.shapes[*tensor as usize];
                    fill_region(
                        r,
                        (*tensor, *access),
                        dims,
                        shape,
                        env,
                        |dim, start, size, extent| ExpandError::RegionOutOfBounds {
                            task: index,
                            kernel: decl.name.name.clone(),
                            param: pname(*param),
                            tensor: prog.module.tensors[*tensor as usize].name.name.clone(),
                            dim,
                            start,
                            size,
                            extent,
                        },
                    )?;
                }
            }
        }
        buf.regions.truncate(nreg);
        self.choose(t, ct, index)
    }

    /// The task's kernel (its tier), pool, target executor, stream, priority and cost.
    #[inline]
    fn choose(&mut self, t: &Task, ct: &CTask, index: u32) -> Result<(), ExpandError> {
        let prog = self.prog;
        let env = &mut self.env;
        let buf = &mut self.buf;
        buf.kernel = match &prog.res.tiers[t.kernel.index()] {
            Some(tiers) => {
                let mut k = tiers.default.0;
                for (cond, variant) in &tiers.cases {
                    if eval_bool(prog.x(*cond), env)? {
                        k = variant.0;
                        break;
                    }
                }
                k
            }
            None => t.kernel.0,
        };
        let sched = &prog.res.schedule;
        buf.pool = match (&sched.pools, &ct.pool_by) {
            (Some((levels, otherwise)), Some(metric)) => {
                *pick_level(metric, levels, otherwise, env)?
            }
            _ => prog.module.kernels[buf.kernel as usize].pool,
        };
        buf.target = match &sched.dispatch {
            Some(d) => target(d, &ct.dispatch_keys, index, prog.executors, env)?,
            None => None,
        };
        buf.stream = match &ct.stream_by {
            Some(e) => modulo(eval(e, env)?, prog.streams, &e.what)?,
            None => (u64::from(index) % prog.streams) as u32,
        };
        buf.priority = match &ct.priority_by {
            Some(e) => eval_int(e, env)?,
            None => 0,
        };
        buf.cost = match &ct.cost_by {
            Some(e) => Some(eval_int(e, env)?.max(0) as u64),
            None => None,
        };
        Ok(())
    }
}

/// Region `r` of a task: `tensor` accessed `access`, each dimension's start and size evaluated
/// and checked within `shape` (`oob(dim, start, size, extent)` is the error of one that is not).
#[inline]
fn fill_region(
    r: &mut ExpandedRegion,
    (tensor, access): (u32, Access),
    dims: &[(CExpr, Option<CExpr>)],
    shape: &[i64],
    env: &[Value],
    oob: impl Fn(usize, i64, i64, i64) -> ExpandError,
) -> Result<(), ExpandError> {
    r.tensor = tensor;
    r.access = access;
    r.start.clear();
    r.size.clear();
    for (d, ((start, size), &extent)) in dims.iter().zip(shape).enumerate() {
        let s = eval_int(start, env)?;
        let z = match size {
            Some(e) => eval_int(e, env)?,
            None => 1,
        };
        if s < 0 || z < 1 || s.checked_add(z).is_none_or(|e| e > extent) {
            return Err(oob(d, s, z, extent));
        }
        r.start.push(s);
        r.size.push(z);
    }
    Ok(())
}

/// The choice of the first level whose bound is above the metric, else the default.
fn pick_level<'a, T>(
    metric: &CExpr,
    levels: &'a [(i64, T)],
    otherwise: &'a T,
    env: &[Value],
) -> Result<&'a T, ExpandError> {
    let m = eval(metric, env)?;
    let m: i128 = match m {
        Value::I64(v) => v.into(),
        Value::U64(v) => v.into(),
        Value::Bool(_) => {
            return Err(ExpandError::WrongType {
                context: metric.what.clone(),
                expected: "an integer".into(),
                found: m.ty(),
            });
        }
    };
    Ok(levels
        .iter()
        .find(|(b, _)| m < i128::from(*b))
        .map_or(otherwise, |(_, c)| c))
}

/// `v mod n`, Euclidean (never negative).
#[inline]
fn modulo(v: Value, n: u64, what: &str) -> Result<u32, ExpandError> {
    let r = match v {
        // n <= 2^32 (checked when the program was resolved), so it fits an i64.
        Value::I64(x) => x.rem_euclid(n as i64) as u64,
        Value::U64(x) => x % n,
        Value::Bool(_) => {
            return Err(ExpandError::WrongType {
                context: what.to_string(),
                expected: "an integer".into(),
                found: v.ty(),
            });
        }
    };
    Ok(r as u32)
}

/// The executor the dispatch plan chooses; key slots index `keys`.
#[inline]
fn target(
    d: &DispatchPlan,
    keys: &[CExpr],
    index: u32,
    executors: u64,
    env: &[Value],
) -> Result<Option<u32>, ExpandError> {
    let key = |slot: u32| match keys.get(slot as usize) {
        Some(e) => Ok(e),
        None => Err(ExpandError::Malformed {
            message: format!("a task has no dispatch key {slot}"),
        }),
    };
    Ok(match d {
        DispatchPlan::RoundRobin(n) => Some((u64::from(index) % n) as u32),
        DispatchPlan::Affinity(slot) => {
            let e = key(*slot)?;
            Some(modulo(eval(e, env)?, executors, &e.what)?)
        }
        DispatchPlan::Hash(slot) => {
            let e = key(*slot)?;
            let bits = match eval(e, env)? {
                Value::I64(x) => x as u64,
                Value::U64(x) => x,
                v @ Value::Bool(_) => {
                    return Err(ExpandError::WrongType {
                        context: e.what.clone(),
                        expected: "an integer".into(),
                        found: v.ty(),
                    });
                }
            };
            Some((splitmix64(bits) % executors) as u32)
        }
        DispatchPlan::Threshold(slot, levels, otherwise) => {
            let chosen = pick_level(key(*slot)?, levels, otherwise, env)?;
            target(chosen, keys, index, executors, env)?
        }
        DispatchPlan::StaticPartition(starts) => {
            let k = starts.iter().rposition(|&s| s <= u64::from(index));
            // starts[0] == 0 was checked, so some start always qualifies.
            Some(k.unwrap_or(0) as u32)
        }
        DispatchPlan::WorkSteal => None,
    })
}

/// `e`, raised where a loop at `loc` starts, placed at the loop when its axis reads computed
/// arrays (an error of the read: a row length, an indptr) and `e` has no place of its own.
#[cold]
fn at_read(computed: bool, loc: Loc, e: ExpandError) -> ExpandError {
    use crate::source::Diagnostic;
    if computed && !e.loc().is_known() {
        ExpandError::AtRead {
            error: Box::new(e),
            loc,
        }
    } else {
        e
    }
}
