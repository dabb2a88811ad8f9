//! Lowering a module's entry point into the encoder's tree: names resolved to registers and
//! table indices, calls inlined, expressions typed, schedule keys resolved per task.
//!
//! Why: the bytecode has no names and no calls, and its expressions are typed; this pass does
//! all of that once, following the reference expander's resolution rules exactly (which names
//! each kind of expression may see, which symbols and tensors count as *used*), so the bytecode
//! means what the expander means.
//!
//! Promise: never panics on an unvalidated module; anything the bytecode cannot express, or the
//! expander would reject while resolving, is an [`EncodeError`].

use super::EncodeError;
use super::texpr::TExpr;
use crate::format::NONE16;
use pto_wsp_ir::{
    Access, Arg, AxisKind, Dispatch, ExecPool, Expr, Ident, KernelDecl, Levels, LoopOrder, Module,
    ParamKind, ReadyPolicy, ScalarType, ScheduleConfig, Stmt, StmtKind, Tiers, TracePolicy, Value,
};
use std::collections::HashMap;

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
    },
    /// `sequential`: order edges between consecutive non-empty children.
    Seq(Vec<LStmt>),
    /// `combine` or an inlined call: just its statements.
    Block(Vec<LStmt>),
    Task(Box<LTask>),
    Set {
        reg: u16,
        value: TExpr,
    },
    Load {
        reg: u16,
        tensor: u16,
        index: Vec<TExpr>,
    },
    Send {
        channel: u8,
        value: TExpr,
    },
    Consume {
        channel: u8,
        var: u16,
        body: Vec<LStmt>,
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

pub(crate) fn lower(module: &Module) -> Result<Lowered, EncodeError> {
    let entry = module
        .entry_name()
        .ok_or_else(|| EncodeError::NoEntryPoint {
            reason: "there is no schedule, no workload `main`, and not exactly one workload or \
                     pipeline"
                .into(),
        })?;
    let config = module
        .schedule
        .as_ref()
        .map(|s| s.config())
        .unwrap_or_default();
    if config.executors == 0 || config.executors > u64::from(u32::MAX) + 1 {
        return Err(EncodeError::BadSchedule {
            message: format!(
                "executors must be between 1 and 2^32, not {}",
                config.executors
            ),
        });
    }
    if config.streams == 0 || config.streams > u64::from(u32::MAX) + 1 {
        return Err(EncodeError::BadSchedule {
            message: format!("streams must be between 1 and 2^32, not {}", config.streams),
        });
    }
    if module.symbols.len() + module.slots.len() > usize::from(u16::MAX) {
        return Err(EncodeError::TooLarge {
            what: "symbols and slots",
            count: module.symbols.len() + module.slots.len(),
            max: usize::from(u16::MAX),
        });
    }
    let mut l = Lowerer::new(module, &config);
    let mut processes = Vec::new();
    let mut channels = Vec::new();
    let csp;
    if let Some(w) = module.workload(entry) {
        if !w.params.is_empty() {
            return Err(EncodeError::Malformed {
                message: format!("the entry workload `{entry}` has parameters; nothing binds them"),
            });
        }
        l.place = format!("workload `{entry}`");
        l.call_stack.push(entry.to_string());
        let body = l.stmts(&w.body)?;
        processes.push((entry.to_string(), body));
        csp = false;
    } else if let Some(p) = module.pipeline(entry) {
        if p.channels.len() > 255 || p.processes.len() > 255 {
            return Err(EncodeError::TooLarge {
                what: "channels or processes of a pipeline",
                count: p.channels.len().max(p.processes.len()),
                max: 255,
            });
        }
        let mut ids: HashMap<&str, u8> = HashMap::new();
        for (i, ch) in p.channels.iter().enumerate() {
            if ids.insert(ch.name.name.as_str(), i as u8).is_some() {
                return Err(EncodeError::Malformed {
                    message: format!(
                        "channel `{}` is declared twice in pipeline `{entry}`",
                        ch.name
                    ),
                });
            }
            channels.push((ch.name.name.clone(), 0xFF, 0xFF));
        }
        for (pi, proc) in p.processes.iter().enumerate() {
            for ch in proc.produces.iter().chain(&proc.consumes) {
                if !ids.contains_key(ch.name.as_str()) {
                    return Err(EncodeError::UnknownName {
                        kind: "channel",
                        name: ch.name.clone(),
                        context: format!("process `{}` of pipeline `{entry}`", proc.name),
                    });
                }
            }
            for ch in &proc.produces {
                let c = usize::from(ids[ch.name.as_str()]);
                if channels[c].1 != 0xFF {
                    return Err(EncodeError::Unsupported {
                        message: format!("channel `{ch}` has more than one producer"),
                    });
                }
                channels[c].1 = pi as u8;
            }
            for ch in &proc.consumes {
                let c = usize::from(ids[ch.name.as_str()]);
                channels[c].2 = pi as u8;
            }
        }
        l.channels = Some(ids);
        for proc in &p.processes {
            l.place = format!("process `{}` of pipeline `{entry}`", proc.name);
            l.frames = vec![Vec::new()];
            let body = l.stmts(&proc.body)?;
            processes.push((proc.name.name.clone(), body));
        }
        csp = true;
    } else {
        return Err(EncodeError::NoEntryPoint {
            reason: format!("the schedule's target `{entry}` is not a workload or pipeline"),
        });
    }
    Ok(Lowered {
        processes,
        channels,
        csp,
        reg_types: l.reg_types,
        symbols_used: l.symbols_used,
        n_slots: module.slots.len() as u16,
        axes: l.axes,
        shapes: l.shapes,
        arrays: l.arrays,
        tiers: l.tiers,
        kernel_used: l.kernel_used,
        dispatch: l.dispatch,
        n_dispatch_keys: l.dispatch_keys.len(),
        stream_by: config.stream_by.is_some(),
        priority: matches!(config.ready, ReadyPolicy::Priority(_)),
        cost: matches!(config.trace, TracePolicy::Cycles(Some(_))),
        pools: config
            .dispatch_threshold
            .as_ref()
            .map(|p| (p.levels.clone(), *p.otherwise)),
        executors: config.executors,
        streams: config.streams,
    })
}

/// How names resolve in an expression.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// Symbols only (tensor dimensions).
    Symbols,
    /// Symbols and slots (axis extents).
    Globals,
    /// The current workload's variables, then globals.
    Workload,
    /// Every variable on the call chain, innermost first, then globals (schedule keys).
    Schedule,
}

struct Lowerer<'m> {
    module: &'m Module,
    config: &'m ScheduleConfig,
    globals: HashMap<&'m str, u16>,
    tensors: HashMap<&'m str, u16>,
    kernels: HashMap<&'m str, u16>,
    axis_ids: HashMap<&'m str, u16>,
    axes: Vec<(String, LAxis)>,
    reg_types: Vec<ScalarType>,
    symbols_used: Vec<bool>,
    shapes: Vec<Option<Vec<TExpr>>>,
    arrays: Vec<bool>,
    tiers: Vec<Option<LTiers>>,
    kernel_used: Vec<bool>,
    frames: Vec<Vec<(&'m str, u16)>>,
    call_stack: Vec<String>,
    channels: Option<HashMap<&'m str, u8>>,
    dispatch: Option<LDispatch>,
    /// The dispatch policy's key expressions, in slot order.
    dispatch_keys: Vec<&'m Expr>,
    place: String,
}

impl<'m> Lowerer<'m> {
    fn new(module: &'m Module, config: &'m ScheduleConfig) -> Lowerer<'m> {
        let mut globals = HashMap::new();
        let mut reg_types = Vec::new();
        for s in &module.symbols {
            globals
                .entry(s.name.name.as_str())
                .or_insert(reg_types.len() as u16);
            reg_types.push(s.ty);
        }
        for s in &module.slots {
            globals
                .entry(s.name.name.as_str())
                .or_insert(reg_types.len() as u16);
            reg_types.push(s.ty);
        }
        let mut tensors = HashMap::new();
        for (i, t) in module.tensors.iter().enumerate() {
            tensors.entry(t.name.name.as_str()).or_insert(i as u16);
        }
        let mut kernels = HashMap::new();
        for (i, k) in module.kernels.iter().enumerate() {
            kernels.entry(k.name.name.as_str()).or_insert(i as u16);
        }
        Lowerer {
            module,
            config,
            globals,
            tensors,
            kernels,
            axis_ids: HashMap::new(),
            axes: Vec::new(),
            reg_types,
            symbols_used: vec![false; module.symbols.len()],
            shapes: vec![None; module.tensors.len()],
            arrays: vec![false; module.tensors.len()],
            tiers: vec![None; module.kernels.len()],
            kernel_used: vec![false; module.kernels.len()],
            frames: vec![Vec::new()],
            call_stack: Vec::new(),
            channels: None,
            dispatch: None,
            dispatch_keys: Vec::new(),
            place: String::new(),
        }
    }

    fn n_symbols(&self) -> u16 {
        self.module.symbols.len() as u16
    }

    /// A fresh register of type `ty`.
    fn fresh(&mut self, ty: ScalarType) -> Result<u16, EncodeError> {
        if self.reg_types.len() >= usize::from(NONE16) {
            return Err(EncodeError::TooLarge {
                what: "registers (symbols, slots, loop variables, parameters)",
                count: self.reg_types.len() + 1,
                max: usize::from(NONE16) - 1,
            });
        }
        self.reg_types.push(ty);
        Ok((self.reg_types.len() - 1) as u16)
    }

    fn resolve(&mut self, e: &Expr, what: &str, scope: Scope) -> Result<TExpr, EncodeError> {
        let frames: Vec<Vec<(&str, u16)>> = match scope {
            Scope::Symbols | Scope::Globals => Vec::new(),
            Scope::Workload => self.frames.last().cloned().into_iter().collect(),
            Scope::Schedule => self.frames.clone(),
        };
        let mut lookup = |name: &str| -> Option<TExpr> {
            for frame in frames.iter().rev() {
                if let Some((_, r)) = frame.iter().rev().find(|(n, _)| *n == name) {
                    return Some(TExpr::Reg(*r, self.reg_types[usize::from(*r)]));
                }
            }
            let r = *self.globals.get(name)?;
            if r < self.n_symbols() {
                self.symbols_used[usize::from(r)] = true;
            } else if scope == Scope::Symbols {
                return None;
            }
            Some(TExpr::Reg(r, self.reg_types[usize::from(r)]))
        };
        build(e, &mut lookup).map_err(|err| match err {
            BuildError::Unbound(name) => EncodeError::UnknownName {
                kind: "name",
                name,
                context: what.to_string(),
            },
            BuildError::Type(message) => EncodeError::Type {
                context: what.to_string(),
                message,
            },
        })
    }

    fn int_expr(&mut self, e: &Expr, what: &str, scope: Scope) -> Result<TExpr, EncodeError> {
        let t = self.resolve(e, what, scope)?;
        if t.ty() == ScalarType::Bool {
            return Err(EncodeError::Type {
                context: what.to_string(),
                message: "expected an integer, found a bool".into(),
            });
        }
        Ok(t)
    }

    fn tensor(&self, t: &Ident, context: &str) -> Result<u16, EncodeError> {
        self.tensors
            .get(t.name.as_str())
            .copied()
            .ok_or_else(|| EncodeError::UnknownName {
                kind: "tensor",
                name: t.name.clone(),
                context: context.to_string(),
            })
    }

    fn array(&mut self, t: &Ident, context: &str) -> Result<u16, EncodeError> {
        let i = self.tensor(t, context)?;
        self.arrays[usize::from(i)] = true;
        Ok(i)
    }

    fn shaped(&mut self, t: &Ident, context: &str) -> Result<u16, EncodeError> {
        let i = self.tensor(t, context)?;
        if self.shapes[usize::from(i)].is_none() {
            let decl = &self.module.tensors[usize::from(i)];
            if decl.shape.len() > crate::format::MAX_RANK {
                return Err(EncodeError::TooLarge {
                    what: "tensor rank",
                    count: decl.shape.len(),
                    max: crate::format::MAX_RANK,
                });
            }
            let mut dims = Vec::new();
            for (d, e) in decl.shape.iter().enumerate() {
                let what = format!("dimension {d} of tensor `{}`", decl.name);
                dims.push(self.int_expr(e, &what, Scope::Symbols)?);
            }
            self.shapes[usize::from(i)] = Some(dims);
        }
        Ok(i)
    }

    fn kernel(&mut self, name: &Ident, context: &str) -> Result<u16, EncodeError> {
        let k = self
            .kernels
            .get(name.name.as_str())
            .copied()
            .ok_or_else(|| EncodeError::UnknownName {
                kind: "kernel",
                name: name.name.clone(),
                context: context.to_string(),
            })?;
        self.kernel_used[usize::from(k)] = true;
        Ok(k)
    }

    fn stmts(&mut self, body: &'m [Stmt]) -> Result<Vec<LStmt>, EncodeError> {
        body.iter().map(|s| self.stmt(s)).collect()
    }

    /// Lowers `body` with `vars` bound to fresh `i64` registers.
    fn scoped(
        &mut self,
        vars: &'m [Ident],
        body: &'m [Stmt],
    ) -> Result<([u16; 2], Vec<LStmt>), EncodeError> {
        let saved = self.frames.last().map_or(0, Vec::len);
        let mut regs = [NONE16; 2];
        for (k, v) in vars.iter().enumerate().take(2) {
            let r = self.fresh(ScalarType::I64)?;
            regs[k] = r;
            if let Some(f) = self.frames.last_mut() {
                f.push((v.name.as_str(), r));
            }
        }
        let body = self.stmts(body);
        if let Some(f) = self.frames.last_mut() {
            f.truncate(saved);
        }
        Ok((regs, body?))
    }

    fn axis(&mut self, name: &'m Ident, context: &str) -> Result<u16, EncodeError> {
        if let Some(&a) = self.axis_ids.get(name.name.as_str()) {
            return Ok(a);
        }
        let decl = self
            .module
            .axis(&name.name)
            .ok_or_else(|| EncodeError::UnknownName {
                kind: "axis",
                name: name.name.clone(),
                context: context.to_string(),
            })?;
        let kind = match &decl.kind {
            AxisKind::Dense(e) | AxisKind::DenseDyn(e) => LAxis::Dense(self.int_expr(
                e,
                &format!("the extent of axis `{name}`"),
                Scope::Globals,
            )?),
            AxisKind::Ragged { outer, lengths } => {
                let outer = self.int_expr(
                    outer,
                    &format!("the row count of axis `{name}`"),
                    Scope::Globals,
                )?;
                LAxis::Ragged(outer, self.array(lengths, &format!("axis `{name}`"))?)
            }
            AxisKind::Sparse {
                outer,
                indptr,
                indices,
            } => {
                let outer = self.int_expr(
                    outer,
                    &format!("the row count of axis `{name}`"),
                    Scope::Globals,
                )?;
                let w = format!("axis `{name}`");
                let p = self.array(indptr, &w)?;
                let i = self.array(indices, &w)?;
                LAxis::Sparse(outer, p, i)
            }
        };
        if self.axes.len() >= usize::from(NONE16) {
            return Err(EncodeError::TooLarge {
                what: "axes",
                count: self.axes.len() + 1,
                max: usize::from(NONE16) - 1,
            });
        }
        let id = self.axes.len() as u16;
        self.axes.push((name.name.clone(), kind));
        self.axis_ids.insert(name.name.as_str(), id);
        Ok(id)
    }

    fn slot(&self, slot: &Ident) -> Result<(u16, ScalarType), EncodeError> {
        match self
            .module
            .slots
            .iter()
            .position(|s| s.name.name == slot.name)
        {
            Some(i) => Ok((self.n_symbols() + i as u16, self.module.slots[i].ty)),
            None => Err(EncodeError::UnknownName {
                kind: "slot",
                name: slot.name.clone(),
                context: self.place.clone(),
            }),
        }
    }

    fn channel(&self, ch: &Ident) -> Result<u8, EncodeError> {
        self.channels
            .as_ref()
            .and_then(|m| m.get(ch.name.as_str()).copied())
            .ok_or_else(|| EncodeError::UnknownName {
                kind: "channel",
                name: ch.name.clone(),
                context: self.place.clone(),
            })
    }

    fn stmt(&mut self, s: &'m Stmt) -> Result<LStmt, EncodeError> {
        match &s.kind {
            StmtKind::Loop {
                order,
                vars,
                axis,
                body,
            } => {
                let context = format!("{} over `{axis}` in {}", order.keyword(), self.place);
                let a = self.axis(axis, &context)?;
                let kind = self.axes[usize::from(a)].1.clone();
                let arity = match kind {
                    LAxis::Dense(_) => 1,
                    LAxis::Ragged(..) => 2,
                    LAxis::Sparse(..) => {
                        return Err(EncodeError::Malformed {
                            message: format!(
                                "{context}: a sparse axis is iterated with `select`, not a loop"
                            ),
                        });
                    }
                };
                if vars.len() != arity {
                    return Err(EncodeError::Malformed {
                        message: format!(
                            "{context}: the axis binds {arity} loop variable(s), not {}",
                            vars.len()
                        ),
                    });
                }
                let (vars, body) = self.scoped(vars, body)?;
                Ok(LStmt::Loop(Box::new(LLoop {
                    ordered: *order == LoopOrder::Sequential,
                    axis: a,
                    vars,
                    body,
                    hoist: None,
                    count: None,
                    row_skip: false,
                    range_skip: false,
                })))
            }
            StmtKind::Select { vars, axis, body } => {
                let context = format!("select over `{axis}` in {}", self.place);
                let a = self.axis(axis, &context)?;
                if !matches!(self.axes[usize::from(a)].1, LAxis::Sparse(..)) {
                    return Err(EncodeError::Malformed {
                        message: format!("{context}: `select` needs a sparse axis"),
                    });
                }
                if vars.len() != 2 {
                    return Err(EncodeError::Malformed {
                        message: format!(
                            "{context}: `select` binds 2 variables, not {}",
                            vars.len()
                        ),
                    });
                }
                let (vars, body) = self.scoped(vars, body)?;
                Ok(LStmt::Loop(Box::new(LLoop {
                    ordered: false,
                    axis: a,
                    vars,
                    body,
                    hoist: None,
                    count: None,
                    row_skip: false,
                    range_skip: false,
                })))
            }
            StmtKind::Cond {
                cond,
                then_body,
                else_body,
            } => {
                let what = format!("an `if` condition in {}", self.place);
                let cond = self.resolve(cond, &what, Scope::Workload)?;
                if cond.ty() != ScalarType::Bool {
                    return Err(EncodeError::Type {
                        context: what,
                        message: format!("expected bool, found a {}", cond.ty()),
                    });
                }
                Ok(LStmt::If {
                    cond,
                    then: self.stmts(then_body)?,
                    otherwise: self.stmts(else_body)?,
                })
            }
            StmtKind::Combine(body) => Ok(LStmt::Block(self.stmts(body)?)),
            StmtKind::Sequential(body) => Ok(LStmt::Seq(self.stmts(body)?)),
            StmtKind::Task(t) => self.task(&t.kernel, &t.args),
            StmtKind::SlotSet { slot, value } => {
                let (reg, ty) = self.slot(slot)?;
                let what = format!("`set {slot}` in {}", self.place);
                let value = self.resolve(value, &what, Scope::Workload)?;
                if value.ty() != ty {
                    return Err(EncodeError::Type {
                        context: what,
                        message: format!(
                            "expected {ty} (the type of slot `{slot}`), found a {}",
                            value.ty()
                        ),
                    });
                }
                Ok(LStmt::Set { reg, value })
            }
            StmtKind::SlotLoad {
                slot,
                tensor,
                index,
            } => {
                let (reg, ty) = self.slot(slot)?;
                let context = format!("`load {slot} = {tensor}[..]` in {}", self.place);
                if ty == ScalarType::Bool {
                    return Err(EncodeError::Type {
                        context,
                        message: format!("slot `{slot}` is bool; `load` needs an integer slot"),
                    });
                }
                let t = self.shaped(tensor, &context)?;
                self.array(tensor, &context)?;
                let rank = self.module.tensors[usize::from(t)].shape.len();
                if index.len() != rank {
                    return Err(EncodeError::Malformed {
                        message: format!(
                            "{context}: tensor `{tensor}` has {rank} dimension(s), the index {}",
                            index.len()
                        ),
                    });
                }
                let mut idx = Vec::new();
                for (d, e) in index.iter().enumerate() {
                    idx.push(self.int_expr(
                        e,
                        &format!("index {d} of {context}"),
                        Scope::Workload,
                    )?);
                }
                Ok(LStmt::Load {
                    reg,
                    tensor: t,
                    index: idx,
                })
            }
            StmtKind::Call { workload, args } => {
                let context = format!("`call {workload}` in {}", self.place);
                let w = self.module.workload(&workload.name).ok_or_else(|| {
                    EncodeError::UnknownName {
                        kind: "workload",
                        name: workload.name.clone(),
                        context: context.clone(),
                    }
                })?;
                if self.call_stack.contains(&workload.name) {
                    return Err(EncodeError::Recursion {
                        chain: self
                            .call_stack
                            .iter()
                            .cloned()
                            .chain([workload.name.clone()])
                            .collect(),
                    });
                }
                if args.len() != w.params.len() {
                    return Err(EncodeError::Malformed {
                        message: format!(
                            "{context}: `{workload}` takes {} argument(s), not {}",
                            w.params.len(),
                            args.len()
                        ),
                    });
                }
                let mut out = Vec::new();
                let mut bound = Vec::new();
                for (a, (p, ty)) in args.iter().zip(&w.params) {
                    let what = format!("argument `{p}` of {context}");
                    let v = self.resolve(a, &what, Scope::Workload)?;
                    if v.ty() != *ty {
                        return Err(EncodeError::Type {
                            context: what,
                            message: format!("expected {ty}, found a {}", v.ty()),
                        });
                    }
                    let reg = self.fresh(*ty)?;
                    out.push(LStmt::Set { reg, value: v });
                    bound.push((p.name.as_str(), reg));
                }
                let saved_place =
                    std::mem::replace(&mut self.place, format!("workload `{workload}`"));
                self.frames.push(bound);
                self.call_stack.push(workload.name.clone());
                let body = self.stmts(&w.body);
                self.call_stack.pop();
                self.frames.pop();
                self.place = saved_place;
                out.push(LStmt::Block(body?));
                Ok(LStmt::Block(out))
            }
            StmtKind::Send { channel, value } => {
                let ch = self.channel(channel)?;
                let what = format!("`send {channel}` in {}", self.place);
                let value = self.resolve(value, &what, Scope::Workload)?;
                if value.ty() != ScalarType::I64 {
                    return Err(EncodeError::Unsupported {
                        message: format!(
                            "{what}: the bytecode sends i64 tokens only, this value is a {}",
                            value.ty()
                        ),
                    });
                }
                Ok(LStmt::Send { channel: ch, value })
            }
            StmtKind::Consume { channel, var, body } => {
                let ch = self.channel(channel)?;
                let (vars, body) = self.scoped(std::slice::from_ref(var), body)?;
                Ok(LStmt::Consume {
                    channel: ch,
                    var: vars[0],
                    body,
                })
            }
        }
    }

    fn task(&mut self, kernel: &'m Ident, args: &'m [Arg]) -> Result<LStmt, EncodeError> {
        let context = format!("task `{kernel}` in {}", self.place);
        let k = self.kernel(kernel, &context)?;
        let decl: &'m KernelDecl = &self.module.kernels[usize::from(k)];
        if args.len() != decl.params.len() {
            return Err(EncodeError::Malformed {
                message: format!(
                    "{context}: kernel `{kernel}` takes {} argument(s), not {}",
                    decl.params.len(),
                    args.len()
                ),
            });
        }
        if decl.params.len() > 255 {
            return Err(EncodeError::TooLarge {
                what: "kernel parameters",
                count: decl.params.len(),
                max: 255,
            });
        }
        let mut scalars = Vec::new();
        let mut regions = Vec::new();
        for (p, a) in decl.params.iter().zip(args) {
            match (&p.kind, a) {
                (ParamKind::Scalar(ty), Arg::Scalar(e)) => {
                    let what = format!("argument `{}` of {context}", p.name);
                    let v = self.resolve(e, &what, Scope::Workload)?;
                    if v.ty() != ty.carrier() {
                        return Err(EncodeError::Type {
                            context: what,
                            message: format!("expected {ty}, found a {}", v.ty()),
                        });
                    }
                    scalars.push(v);
                }
                (ParamKind::Tile { access, .. }, Arg::Region(r)) => {
                    let t = self.shaped(&r.tensor, &context)?;
                    let rank = self.module.tensors[usize::from(t)].shape.len();
                    if r.dims.len() != rank {
                        return Err(EncodeError::Malformed {
                            message: format!(
                                "{context}: tensor `{}` has {rank} dimension(s), the region {}",
                                r.tensor,
                                r.dims.len()
                            ),
                        });
                    }
                    let mut dims = Vec::new();
                    for (d, rd) in r.dims.iter().enumerate() {
                        let what = format!("dimension {d} of argument `{}` of {context}", p.name);
                        let start = self.int_expr(
                            &rd.start,
                            &format!("the start of {what}"),
                            Scope::Workload,
                        )?;
                        let size = match &rd.size {
                            Some(e) => Some(self.int_expr(
                                e,
                                &format!("the size of {what}"),
                                Scope::Workload,
                            )?),
                            None => None,
                        };
                        dims.push((start, size));
                    }
                    regions.push(LRegion {
                        tensor: t,
                        access: *access,
                        dims,
                    });
                }
                (ParamKind::Scalar(_), Arg::Region(_))
                | (ParamKind::Tile { .. }, Arg::Scalar(_)) => {
                    return Err(EncodeError::Malformed {
                        message: format!(
                            "{context}: argument `{}` must be a {}",
                            p.name,
                            match p.kind {
                                ParamKind::Scalar(_) => "scalar expression",
                                ParamKind::Tile { .. } => "region",
                            }
                        ),
                    });
                }
            }
        }
        if let Some(tiers) = &decl.tiers
            && self.tiers[usize::from(k)].is_none()
        {
            let t = self.tiers_of(decl, tiers)?;
            self.tiers[usize::from(k)] = Some(t);
        }
        // The schedule's per-task expressions, resolved where the task stands.
        let config = self.config;
        if self.dispatch.is_none() {
            let mut keys = Vec::new();
            let d = dispatch_slots(&config.dispatch, &mut keys)?;
            if keys.len() > 200 {
                return Err(EncodeError::TooLarge {
                    what: "dispatch keys",
                    count: keys.len(),
                    max: 200,
                });
            }
            self.dispatch = Some(d);
            self.dispatch_keys = keys;
        }
        let mut keys = Vec::new();
        for e in self.dispatch_keys.clone() {
            let what = format!("a dispatch key at {context}");
            keys.push(self.int_expr(e, &what, Scope::Schedule)?);
        }
        if let Some(e) = &config.stream_by {
            keys.push(self.int_expr(e, "the `stream_by` key", Scope::Schedule)?);
        }
        if let Some(l) = &config.dispatch_threshold {
            keys.push(self.int_expr(
                &l.metric,
                "the `dispatch_threshold` metric",
                Scope::Schedule,
            )?);
        }
        if let ReadyPolicy::Priority(e) = &config.ready {
            keys.push(self.int_expr(e, "the `priority` key", Scope::Schedule)?);
        }
        if let TracePolicy::Cycles(Some(e)) = &config.trace {
            keys.push(self.int_expr(e, "the `cycles` cost", Scope::Schedule)?);
        }
        Ok(LStmt::Task(Box::new(LTask {
            kernel: k,
            scalars,
            regions,
            keys,
            hoisted: false,
        })))
    }

    fn tiers_of(&mut self, decl: &'m KernelDecl, tiers: &'m Tiers) -> Result<LTiers, EncodeError> {
        let context = format!("the tiers of kernel `{}`", decl.name);
        if tiers.cases.len() > 254 {
            return Err(EncodeError::TooLarge {
                what: "tier cases",
                count: tiers.cases.len(),
                max: 254,
            });
        }
        let params: Vec<(&str, ScalarType)> = decl
            .params
            .iter()
            .filter_map(|p| match p.kind {
                ParamKind::Scalar(t) => Some((p.name.name.as_str(), t.carrier())),
                ParamKind::Tile { .. } => None,
            })
            .collect();
        let mut cases = Vec::new();
        for (cond, variant) in &tiers.cases {
            let what = format!("a condition of {context}");
            let globals = &self.globals;
            let n_symbols = self.n_symbols();
            let reg_types = &self.reg_types;
            let used = &mut self.symbols_used;
            let mut lookup = |name: &str| -> Option<TExpr> {
                if let Some(i) = params.iter().rposition(|(n, _)| *n == name) {
                    return Some(TExpr::Arg(i as u16, params[i].1));
                }
                let r = *globals.get(name)?;
                if r < n_symbols {
                    used[usize::from(r)] = true;
                    Some(TExpr::Reg(r, reg_types[usize::from(r)]))
                } else {
                    None
                }
            };
            let c = build(cond, &mut lookup).map_err(|err| match err {
                BuildError::Unbound(name) => EncodeError::UnknownName {
                    kind: "name",
                    name,
                    context: what.clone(),
                },
                BuildError::Type(message) => EncodeError::Type {
                    context: what.clone(),
                    message,
                },
            })?;
            if c.ty() != ScalarType::Bool {
                return Err(EncodeError::Type {
                    context: what,
                    message: format!("expected bool, found a {}", c.ty()),
                });
            }
            cases.push((c, self.kernel(variant, &context)?));
        }
        Ok((cases, self.kernel(&tiers.default, &context)?))
    }
}

/// The dispatch policy with its key expressions replaced by slot numbers (pre-order).
fn dispatch_slots<'c>(d: &'c Dispatch, keys: &mut Vec<&'c Expr>) -> Result<LDispatch, EncodeError> {
    Ok(match d {
        Dispatch::RoundRobin(0) => {
            return Err(EncodeError::BadSchedule {
                message: "round_robin(0): the executor count must be at least 1".into(),
            });
        }
        Dispatch::RoundRobin(n) => LDispatch::RoundRobin(*n),
        Dispatch::Affinity(e) => {
            keys.push(e);
            LDispatch::Affinity((keys.len() - 1).min(255) as u8)
        }
        Dispatch::Hash(e) => {
            keys.push(e);
            LDispatch::Hash((keys.len() - 1).min(255) as u8)
        }
        Dispatch::Threshold(Levels {
            metric,
            levels,
            otherwise,
        }) => {
            if levels.len() > 255 {
                return Err(EncodeError::TooLarge {
                    what: "threshold levels",
                    count: levels.len(),
                    max: 255,
                });
            }
            keys.push(metric);
            let slot = (keys.len() - 1).min(255) as u8;
            let mut ls = Vec::new();
            for (b, d) in levels {
                ls.push((*b, dispatch_slots(d, keys)?));
            }
            LDispatch::Threshold(slot, ls, Box::new(dispatch_slots(otherwise, keys)?))
        }
        Dispatch::StaticPartition(starts) => {
            if starts.first() != Some(&0) {
                return Err(EncodeError::BadSchedule {
                    message: "static_partition must start at 0".into(),
                });
            }
            if starts.len() > usize::from(u16::MAX) {
                return Err(EncodeError::TooLarge {
                    what: "static partitions",
                    count: starts.len(),
                    max: usize::from(u16::MAX),
                });
            }
            LDispatch::StaticPartition(starts.clone())
        }
        Dispatch::WorkSteal => LDispatch::WorkSteal,
    })
}

enum BuildError {
    Unbound(String),
    Type(String),
}

fn build(e: &Expr, lookup: &mut impl FnMut(&str) -> Option<TExpr>) -> Result<TExpr, BuildError> {
    Ok(match e {
        Expr::Int(v) => TExpr::Const(Value::I64(*v)),
        Expr::UInt(v) => TExpr::Const(Value::U64(*v)),
        Expr::Float(v) => TExpr::Const(Value::U64(v.bits())),
        Expr::Bool(b) => TExpr::Const(Value::Bool(*b)),
        Expr::Name(id) => lookup(&id.name).ok_or_else(|| BuildError::Unbound(id.name.clone()))?,
        Expr::Unary(op, a) => TExpr::unary(*op, build(a, lookup)?).map_err(BuildError::Type)?,
        Expr::Binary(op, a, b) => {
            let a = build(a, lookup)?;
            let b = build(b, lookup)?;
            TExpr::binary(*op, a, b).map_err(BuildError::Type)?
        }
        Expr::Ternary(c, a, b) => {
            let c = build(c, lookup)?;
            let a = build(a, lookup)?;
            let b = build(b, lookup)?;
            TExpr::ternary(c, a, b).map_err(BuildError::Type)?
        }
    })
}
