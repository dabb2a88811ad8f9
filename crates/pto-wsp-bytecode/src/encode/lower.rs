//! Lowering the resolved entry point ([`pto_wsp_ir::resolve`](mod@pto_wsp_ir::resolve)) into the encoder's tree.
//!
//! Why: names, calls, types, schedule keys and every static check are resolved once, in the IR,
//! for every consumer; what is the bytecode's own is its tree shape (a `call` becomes the writes
//! of its parameter registers and a block, `select` a loop over a sparse axis), its field widths
//! (16-bit registers and table indices, 8-bit channels and key slots) and what it cannot express
//! (a channel with several producers, a token that is not `i64`).
//!
//! Promise: never panics; it reads the resolved program as it is (resolving nothing again);
//! anything the bytecode cannot hold is `TooLarge` or `Unsupported`.

use super::{EncodeError, too_large};
use crate::format::{MAX_RANK, NONE16};
use pto_wsp_ir::resolve::{
    AxisExtent, DispatchPlan, ExprId, Loop, Resolved, Stmt, StmtKind, TExpr, Task, TaskArg,
};
use pto_wsp_ir::{Access, ExecPool, Loc, ScalarType, Unsupported};

/// A loop of the tree.
#[derive(Debug)]
pub(crate) struct LLoop {
    pub ordered: bool,
    pub axis: u16,
    pub vars: [u16; 2],
    pub body: Vec<LStmt>,
    /// Filled by the analysis: the dispatch keys decided once per iteration.
    pub hoist: Option<Vec<TExpr>>,
    /// Filled by the analysis: the task count of one iteration, when it can be skipped.
    pub count: Option<TExpr>,
    pub row_skip: bool,
    pub range_skip: bool,
    /// Where the loop statement is, when its axis reads computed arrays (else `None`).
    pub computed: Option<Loc>,
    /// Where the loop statement is.
    pub loc: Loc,
}

/// A task statement of the tree.
#[derive(Debug)]
pub(crate) struct LTask {
    pub kernel: u16,
    /// Scalar arguments in parameter order.
    pub scalars: Vec<TExpr>,
    pub regions: Vec<LRegion>,
    /// Schedule keys: dispatch key slots, then `stream_by`, then the pool metric.
    pub keys: Vec<TExpr>,
    pub hoisted: bool,
    /// Where the task statement is.
    pub loc: Loc,
}

/// A region argument.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct LRegion {
    pub tensor: u16,
    pub access: Access,
    pub dims: Vec<(TExpr, Option<TExpr>)>,
}

/// A statement of the tree.
#[derive(Debug)]
pub(crate) enum LStmt {
    Loop(Box<LLoop>),
    If {
        cond: TExpr,
        then: Vec<LStmt>,
        otherwise: Vec<LStmt>,
        loc: Loc,
    },
    /// `sequential`: order edges between consecutive non-empty children.
    Seq(Vec<LStmt>),
    /// `combine` or an inlined call: just its statements.
    Block(Vec<LStmt>),
    Task(Box<LTask>),
    Set {
        reg: u16,
        value: TExpr,
        loc: Loc,
    },
    /// `load`; `computed`: of a tensor tasks of the run write (a `read` instruction).
    Load {
        reg: u16,
        tensor: u16,
        index: Vec<TExpr>,
        computed: bool,
        /// The statement's location.
        loc: Loc,
    },
    /// `while COND max MAX { body }`.
    While {
        cond: TExpr,
        max: TExpr,
        body: Vec<LStmt>,
        loc: Loc,
    },
    /// `break if COND`.
    Break {
        cond: TExpr,
        loc: Loc,
    },
    Send {
        channel: u8,
        value: TExpr,
        loc: Loc,
    },
    Consume {
        channel: u8,
        var: u16,
        body: Vec<LStmt>,
        loc: Loc,
    },
}

/// An axis of the table.
#[derive(Clone, Debug)]
pub(crate) enum LAxis {
    Dense(TExpr),
    Ragged(TExpr, u16),
    Sparse(TExpr, u16, u16),
}

/// A kernel's tiers: `(condition, variant)` cases and the default variant.
pub(crate) type LTiers = (Vec<(TExpr, u16)>, u16);

/// A dispatch policy with key slots instead of expressions.
#[derive(Clone, Debug)]
pub(crate) enum LDispatch {
    RoundRobin(u64),
    Affinity(u8),
    Hash(u8),
    Threshold(u8, Vec<(i64, LDispatch)>, Box<LDispatch>),
    StaticPartition(Vec<u64>),
    WorkSteal,
}

/// Everything the lowering produced.
#[derive(Debug)]
pub(crate) struct Lowered {
    pub processes: Vec<(String, Vec<LStmt>)>,
    pub channels: Vec<(String, u8, u8)>,
    pub csp: bool,
    pub reg_types: Vec<ScalarType>,
    pub symbols_used: Vec<bool>,
    /// Slots are registers `symbols .. symbols + n_slots`.
    pub n_slots: u16,
    pub axes: Vec<(String, LAxis)>,
    /// Per module tensor: shape expressions when a region or `load` uses it; whether its
    /// contents are bound.
    pub shapes: Vec<Option<Vec<TExpr>>>,
    pub arrays: Vec<bool>,
    /// Per module kernel: tiers (condition over the kernel's scalar args, variant), default.
    pub tiers: Vec<Option<LTiers>>,
    pub kernel_used: Vec<bool>,
    pub dispatch: Option<LDispatch>,
    pub n_dispatch_keys: usize,
    pub stream_by: bool,
    pub pools: Option<(Vec<(i64, ExecPool)>, ExecPool)>,
    /// `ready priority(EXPR)` and `trace cycles(EXPR)`: keys after the pool metric.
    pub priority: bool,
    pub cost: bool,
    pub executors: u64,
    pub streams: u64,
}

/// Lowers the resolved program `r` (see the module docs).
pub(crate) fn lower(r: &Resolved) -> Result<Lowered, EncodeError> {
    supports(r).map_err(|u| EncodeError::Unsupported {
        message: u.construct,
    })?;
    Lower { r }.lowered()
}

/// Whether the bytecode can express `r`: the first construct it cannot, named, with its
/// location. Today: a channel with more than one producer, a token that is not `i64` and a
/// ragged axis whose lengths are an expression.
/// (Table sizes beyond the format's field widths are reported by [`crate::encode()`].)
pub fn supports(r: &Resolved) -> Result<(), Unsupported> {
    let unsupported = |construct: String, loc| Unsupported {
        backend: "bytecode".into(),
        construct,
        loc,
    };
    for ch in &r.channels {
        if let Some(&second) = ch.producers.get(1) {
            return Err(unsupported(
                format!("channel `{}` with more than one producer", ch.name),
                r.processes
                    .get(second as usize)
                    .map_or(Loc::NONE, |p| p.loc),
            ));
        }
    }
    // Computed reads (`docs/SEMANTICS.md`, "Computed reads") are `read` instructions, and a
    // ragged or sparse axis over computed arrays reads them whole when its loop starts.
    let mut first = None;
    r.each_stmt(&mut |s| {
        if first.is_none()
            && let StmtKind::Loop(lp) = &s.kind
            && let Some(axis) = r.axes.get(lp.axis.index())
            && let AxisExtent::Ragged {
                per_row: Some(_), ..
            } = axis.kind
        {
            first = Some(unsupported(
                format!(
                    "ragged axis `{}` whose row lengths are an expression \
                     (`ragged(ROWS, LENGTHS, EXPR)`); the bytecode reads lengths from the tensor",
                    axis.name
                ),
                // The declaration, where the expression is written.
                r.module.axis(&axis.name).map_or(s.loc, |d| d.name.loc),
            ));
        }
        if first.is_none()
            && let StmtKind::Send { channel, value } = &s.kind
            && r.expr(*value).ty() != ScalarType::I64
        {
            first = Some(unsupported(
                format!(
                    "{}: the bytecode sends i64 tokens only, this value is a {} (channel `{}`)",
                    r.what(*value),
                    r.expr(*value).ty(),
                    r.channels
                        .get(channel.index())
                        .map_or("?", |c| c.name.as_str())
                ),
                s.loc,
            ));
        }
    });
    first.map_or(Ok(()), Err)
}

struct Lower<'a> {
    r: &'a Resolved,
}

impl Lower<'_> {
    fn x(&self, id: ExprId) -> TExpr {
        self.r.expr(id).clone()
    }

    fn lowered(&self) -> Result<Lowered, EncodeError> {
        let r = self.r;
        let module = &r.module;
        self.check_sizes()?;
        let channels = self.channels()?;
        for dims in r.shapes.iter().flatten() {
            if dims.len() > MAX_RANK {
                return Err(too_large("tensor rank", dims.len(), MAX_RANK));
            }
        }
        for (k, used) in r.kernels_used.iter().enumerate() {
            let n = module.kernels[k].params.len();
            if *used && n > 255 {
                return Err(too_large("kernel parameters", n, 255));
            }
        }
        let tiers = self.tiers()?;
        let sched = &r.schedule;
        if sched.n_dispatch_keys > 200 {
            return Err(too_large("dispatch keys", sched.n_dispatch_keys, 200));
        }
        let dispatch = match &sched.dispatch {
            Some(d) => Some(dispatch(d)?),
            None => None,
        };
        let mut processes = Vec::new();
        for p in &r.processes {
            processes.push((p.name.clone(), self.stmts(&p.body)?));
        }
        Ok(Lowered {
            processes,
            channels,
            csp: r.csp,
            reg_types: r.regs.clone(),
            symbols_used: r.symbols_used.clone(),
            n_slots: module.slots.len() as u16,
            axes: self.axes(),
            shapes: r
                .shapes
                .iter()
                .map(|s| s.as_ref().map(|d| d.iter().map(|&e| self.x(e)).collect()))
                .collect(),
            // A computed tensor's contents come from the run, not the bindings.
            arrays: r
                .arrays
                .iter()
                .enumerate()
                .map(|(t, &a)| a && !r.computed(pto_wsp_ir::resolve::TensorId(t as u32)))
                .collect(),
            tiers,
            kernel_used: r.kernels_used.clone(),
            dispatch,
            n_dispatch_keys: sched.n_dispatch_keys,
            stream_by: sched.stream_by,
            pools: sched.pools.clone(),
            priority: sched.priority,
            cost: sched.cost,
            executors: sched.executors,
            streams: sched.streams,
        })
    }

    /// The counts that must fit the bytecode's field widths: symbols and slots, registers, axes.
    fn check_sizes(&self) -> Result<(), EncodeError> {
        let r = self.r;
        let module = &r.module;
        if module.symbols.len() + module.slots.len() > usize::from(u16::MAX) {
            return Err(too_large(
                "symbols and slots",
                module.symbols.len() + module.slots.len(),
                usize::from(u16::MAX),
            ));
        }
        if r.regs.len() >= usize::from(NONE16) {
            return Err(too_large(
                "registers (symbols, slots, loop variables, parameters)",
                r.regs.len(),
                usize::from(NONE16) - 1,
            ));
        }
        if r.axes.len() >= usize::from(NONE16) {
            return Err(too_large("axes", r.axes.len(), usize::from(NONE16) - 1));
        }
        Ok(())
    }

    /// A pipeline's channels: `(name, producer, consumer)` processes (`0xFF`: the host).
    fn channels(&self) -> Result<Vec<(String, u8, u8)>, EncodeError> {
        let r = self.r;
        let mut channels = Vec::new();
        if r.csp {
            if r.channels.len() > 255 || r.processes.len() > 255 {
                return Err(too_large(
                    "channels or processes of a pipeline",
                    r.channels.len().max(r.processes.len()),
                    255,
                ));
            }
            for ch in &r.channels {
                let producer = ch.producers.first().map_or(0xFF, |&p| p as u8);
                let consumer = ch.consumers.last().map_or(0xFF, |&p| p as u8);
                channels.push((ch.name.clone(), producer, consumer));
            }
        }
        Ok(channels)
    }

    /// Each kernel's tier cases (condition, variant) and default variant.
    fn tiers(&self) -> Result<Vec<Option<LTiers>>, EncodeError> {
        let r = self.r;
        let mut tiers = Vec::with_capacity(r.tiers.len());
        for t in &r.tiers {
            tiers.push(match t {
                Some(t) => {
                    if t.cases.len() > 254 {
                        return Err(too_large("tier cases", t.cases.len(), 254));
                    }
                    let cases = t
                        .cases
                        .iter()
                        .map(|(c, k)| (self.x(*c), k.0 as u16))
                        .collect();
                    Some((cases, t.default.0 as u16))
                }
                None => None,
            });
        }
        Ok(tiers)
    }

    /// Every axis: its name and extent (with its arrays' tensors).
    fn axes(&self) -> Vec<(String, LAxis)> {
        self.r
            .axes
            .iter()
            .map(|a| {
                let kind = match &a.kind {
                    AxisExtent::Dense(e) => LAxis::Dense(self.x(*e)),
                    AxisExtent::Ragged { rows, lengths, .. } => {
                        LAxis::Ragged(self.x(*rows), lengths.0 as u16)
                    }
                    AxisExtent::Sparse {
                        rows,
                        indptr,
                        indices,
                    } => LAxis::Sparse(self.x(*rows), indptr.0 as u16, indices.0 as u16),
                };
                (a.name.clone(), kind)
            })
            .collect()
    }

    fn stmts(&self, body: &[Stmt]) -> Result<Vec<LStmt>, EncodeError> {
        body.iter().map(|s| self.stmt(s)).collect()
    }

    /// A loop: its axis, variables and body (hoisting and skipping are decided later), and
    /// its place when its axis reads a computed array.
    fn loop_stmt(&self, s: &Stmt, l: &Loop) -> Result<LStmt, EncodeError> {
        // Registers are below NONE16 (checked in `lowered`), so they fit 16 bits.
        Ok(LStmt::Loop(Box::new(LLoop {
            ordered: l.ordered,
            axis: l.axis.0 as u16,
            vars: [
                l.vars.first().map_or(NONE16, |&v| v as u16),
                l.vars.get(1).map_or(NONE16, |&v| v as u16),
            ],
            body: self.stmts(&l.body)?,
            hoist: None,
            count: None,
            row_skip: false,
            range_skip: false,
            computed: self
                .r
                .axes
                .get(l.axis.index())
                .is_some_and(|a| match &a.kind {
                    AxisExtent::Dense(_) => false,
                    AxisExtent::Ragged { lengths, .. } => self.r.computed(*lengths),
                    AxisExtent::Sparse {
                        indptr, indices, ..
                    } => self.r.computed(*indptr) || self.r.computed(*indices),
                })
                .then_some(s.loc),
            loc: s.loc,
        })))
    }

    /// A task: its scalar arguments, regions and keys.
    fn task_stmt(&self, t: &Task, loc: Loc) -> LStmt {
        let mut scalars = Vec::new();
        let mut regions = Vec::new();
        for a in &t.args {
            match a {
                TaskArg::Scalar(e) => scalars.push(self.x(*e)),
                TaskArg::Region {
                    tensor,
                    access,
                    dims,
                } => regions.push(LRegion {
                    tensor: tensor.0 as u16,
                    access: *access,
                    dims: dims
                        .iter()
                        .map(|(s, z)| (self.x(*s), z.map(|z| self.x(z))))
                        .collect(),
                }),
            }
        }
        LStmt::Task(Box::new(LTask {
            kernel: t.kernel.0 as u16,
            scalars,
            regions,
            keys: t.keys.iter().map(|&k| self.x(k)).collect(),
            hoisted: false,
            loc,
        }))
    }

    fn stmt(&self, s: &Stmt) -> Result<LStmt, EncodeError> {
        // Registers are below NONE16 (checked in `lowered`), so they fit 16 bits.
        let reg = |r: u32| r as u16;
        Ok(match &s.kind {
            StmtKind::While { cond, max, body } => LStmt::While {
                cond: self.x(*cond),
                max: self.x(*max),
                body: self.stmts(body)?,
                loc: s.loc,
            },
            StmtKind::Break { cond } => LStmt::Break {
                cond: self.x(*cond),
                loc: s.loc,
            },
            StmtKind::Loop(l) => self.loop_stmt(s, l)?,
            StmtKind::If {
                cond,
                then_body,
                else_body,
            } => LStmt::If {
                cond: self.x(*cond),
                then: self.stmts(then_body)?,
                otherwise: self.stmts(else_body)?,
                loc: s.loc,
            },
            StmtKind::Block {
                ordered: true,
                body,
            } => LStmt::Seq(self.stmts(body)?),
            StmtKind::Block {
                ordered: false,
                body,
            } => LStmt::Block(self.stmts(body)?),
            StmtKind::Task(t) => self.task_stmt(t, s.loc),
            StmtKind::Set { slot, value } => LStmt::Set {
                reg: reg(*slot),
                value: self.x(*value),
                loc: s.loc,
            },
            StmtKind::Load {
                slot,
                tensor,
                index,
            } => LStmt::Load {
                reg: reg(*slot),
                tensor: tensor.0 as u16,
                index: index.iter().map(|&e| self.x(e)).collect(),
                computed: self.r.computed(*tensor),
                loc: s.loc,
            },
            StmtKind::Call { args, body, .. } => {
                // The parameters' registers are written in order, then the callee runs.
                let mut out: Vec<LStmt> = args
                    .iter()
                    .map(|&(r, e)| LStmt::Set {
                        reg: reg(r),
                        value: self.x(e),
                        loc: s.loc,
                    })
                    .collect();
                out.push(LStmt::Block(self.stmts(body)?));
                LStmt::Block(out)
            }
            // `supports` checked that every token is an `i64`.
            StmtKind::Send { channel, value } => LStmt::Send {
                channel: channel.0 as u8,
                value: self.x(*value),
                loc: s.loc,
            },
            StmtKind::Consume { channel, var, body } => LStmt::Consume {
                channel: channel.0 as u8,
                var: reg(*var),
                body: self.stmts(body)?,
                loc: s.loc,
            },
        })
    }
}

/// The dispatch plan with the bytecode's field widths.
fn dispatch(d: &DispatchPlan) -> Result<LDispatch, EncodeError> {
    Ok(match d {
        DispatchPlan::RoundRobin(n) => LDispatch::RoundRobin(*n),
        DispatchPlan::Affinity(s) => LDispatch::Affinity((*s).min(255) as u8),
        DispatchPlan::Hash(s) => LDispatch::Hash((*s).min(255) as u8),
        DispatchPlan::Threshold(s, levels, otherwise) => {
            if levels.len() > 255 {
                return Err(too_large("threshold levels", levels.len(), 255));
            }
            let mut ls = Vec::new();
            for (b, d) in levels {
                ls.push((*b, dispatch(d)?));
            }
            LDispatch::Threshold((*s).min(255) as u8, ls, Box::new(dispatch(otherwise)?))
        }
        DispatchPlan::StaticPartition(starts) => {
            if starts.len() > usize::from(u16::MAX) {
                return Err(too_large(
                    "static partitions",
                    starts.len(),
                    usize::from(u16::MAX),
                ));
            }
            LDispatch::StaticPartition(starts.clone())
        }
        DispatchPlan::WorkSteal => LDispatch::WorkSteal,
    })
}
