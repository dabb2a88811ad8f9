//! The one pass that resolves a module's entry point (see the parent module for the promises).
//!
//! Name rules (the language's, `docs/SEMANTICS.md`): tensor dimensions see symbols only; axis
//! extents see symbols and slots; statement expressions see the current workload's variables,
//! then symbols and slots; the schedule's per-task expressions see every variable on the call
//! chain, innermost first, then symbols and slots; tier conditions see the kernel's scalar
//! parameters, then symbols. A symbol counts as used where an expression of the entry reads it;
//! a tensor's contents are used by ragged and sparse axes and by `load`.

use super::{
    Axis, AxisExtent, AxisId, Channel, ChannelId, DispatchPlan, ExprId, ExprInfo, KernelId, Loop,
    Process, Reg, ResolveError, ResolveOptions, Resolved, Sched, Stmt, StmtKind, TExpr, Task,
    TaskArg, TensorId, Tiers,
};
use crate::expr::Expr;
use crate::loc::{Ident, Loc};
use crate::module::{AxisKind, KernelDecl, Module, ParamKind};
use crate::schedule::{Dispatch, Levels, ReadyPolicy, ScheduleConfig, TracePolicy};
use crate::types::ScalarType;
use crate::value::Value;
use crate::workload::{Arg, LoopOrder, Stmt as AstStmt, StmtKind as AstKind};
use std::collections::HashMap;

/// Resolves `module`'s entry point (see the module docs). The result owns a copy of the
/// module.
pub fn resolve(module: &Module, options: &ResolveOptions) -> Result<Resolved, ResolveError> {
    #[cfg(feature = "resolution-count")]
    super::count::resolved();
    let entry = module
        .entry_name()
        .ok_or_else(|| ResolveError::NoEntryPoint {
            reason: "there is no schedule, no workload `main`, and not exactly one workload or \
                     pipeline"
                .into(),
        })?;
    let config = module
        .schedule
        .as_ref()
        .map(|s| s.config())
        .unwrap_or_default();
    let executors = options.executors.unwrap_or(config.executors);
    super::check_count("executors", executors)?;
    super::check_count("streams", config.streams)?;
    let mut w = Walker::new(module, &config);
    let (processes, channels, csp) = if let Some(wl) = module.workload(entry) {
        (vec![entry_workload(&mut w, wl, entry)?], Vec::new(), false)
    } else if let Some(p) = module.pipeline(entry) {
        let (processes, channels) = entry_pipeline(&mut w, p, entry)?;
        (processes, channels, true)
    } else {
        return Err(ResolveError::NoEntryPoint {
            reason: format!("the schedule's target `{entry}` is not a workload or pipeline"),
        });
    };
    let schedule = Sched {
        executors,
        streams: config.streams,
        dispatch: w.dispatch.take(),
        n_dispatch_keys: w.dispatch_keys.len(),
        stream_by: config.stream_by.is_some(),
        pools: config
            .dispatch_threshold
            .as_ref()
            .map(|p| (p.levels.clone(), *p.otherwise)),
        priority: matches!(config.ready, ReadyPolicy::Priority(_)),
        cost: matches!(config.trace, TracePolicy::Cycles(Some(_), _)),
        config: config.clone(),
    };
    if config.deps == crate::schedule::DepsMode::Explicit {
        explicit_reads(&w, module)?;
    }
    Ok(Resolved {
        module: module.clone(),
        entry: entry.to_string(),
        csp,
        processes,
        channels,
        regs: w.regs,
        symbols_used: w.symbols_used,
        axes: w.axes,
        shapes: w.shapes,
        arrays: w.arrays,
        array_reads: w.array_reads,
        written: w.written,
        tiers: w.tiers,
        kernels_used: w.kernels_used,
        schedule,
        exprs: w.exprs,
        n_tasks: w.n_tasks,
    })
}

/// Under `deps explicit`, a read of the contents of a tensor the tasks write is refused:
/// nothing would order it after them.
fn explicit_reads(w: &Walker<'_>, module: &Module) -> Result<(), ResolveError> {
    match (0..module.tensors.len()).find(|&t| w.arrays[t] && w.written[t]) {
        None => Ok(()),
        Some(t) => Err(ResolveError::Malformed {
            message: format!(
                "the workload reads the contents of tensor `{}`, which its tasks write, under \
                 `deps explicit`: nothing orders the read after the tasks that compute it \
                 (use `deps exact`, `overlap` or `hybrid`)",
                module.tensors[t].name
            ),
            loc: w.array_reads[t],
        }),
    }
}

/// The one process of workload entry `wl`.
fn entry_workload<'m>(
    w: &mut Walker<'m>,
    wl: &'m crate::module::Workload,
    entry: &str,
) -> Result<Process, ResolveError> {
    w.loc = wl.loc;
    if !wl.params.is_empty() {
        return Err(ResolveError::Malformed {
            message: format!("the entry workload `{entry}` has parameters; nothing binds them"),
            loc: wl.loc,
        });
    }
    w.place = format!("workload `{entry}`");
    w.call_stack.push(entry.to_string());
    let body = w.stmts(&wl.body)?;
    Ok(Process {
        name: entry.to_string(),
        body,
        produces: Vec::new(),
        loc: wl.loc,
    })
}

/// The channels of pipeline entry `p`, with their producers and consumers, and each channel's
/// index by name.
fn pipeline_channels<'p>(
    p: &'p crate::csp::Pipeline,
    entry: &str,
) -> Result<(HashMap<&'p str, u32>, Vec<Channel>), ResolveError> {
    let mut ids: HashMap<&str, u32> = HashMap::new();
    let mut channels: Vec<Channel> = Vec::new();
    for ch in &p.channels {
        if ids
            .insert(ch.name.name.as_str(), channels.len() as u32)
            .is_some()
        {
            return Err(ResolveError::Malformed {
                message: format!(
                    "channel `{}` is declared twice in pipeline `{entry}`",
                    ch.name
                ),
                loc: ch.name.loc,
            });
        }
        channels.push(Channel {
            name: ch.name.name.clone(),
            producers: Vec::new(),
            consumers: Vec::new(),
            depth: ch.depth,
        });
    }
    for (pi, proc) in p.processes.iter().enumerate() {
        for ch in proc.produces.iter().chain(&proc.consumes) {
            if !ids.contains_key(ch.name.as_str()) {
                return Err(ResolveError::UnknownName {
                    kind: "channel",
                    name: ch.name.clone(),
                    context: format!("process `{}` of pipeline `{entry}`", proc.name),
                    loc: ch.loc,
                });
            }
        }
        for ch in &proc.produces {
            channels[ids[ch.name.as_str()] as usize]
                .producers
                .push(pi as u32);
        }
        for ch in &proc.consumes {
            channels[ids[ch.name.as_str()] as usize]
                .consumers
                .push(pi as u32);
        }
    }
    Ok((ids, channels))
}

/// The processes and channels of pipeline entry `p`.
fn entry_pipeline<'m>(
    w: &mut Walker<'m>,
    p: &'m crate::csp::Pipeline,
    entry: &str,
) -> Result<(Vec<Process>, Vec<Channel>), ResolveError> {
    let (ids, channels) = pipeline_channels(p, entry)?;
    w.channels = Some(ids.clone());
    let mut processes = Vec::new();
    for proc in &p.processes {
        w.place = format!("process `{}` of pipeline `{entry}`", proc.name);
        w.loc = proc.loc;
        w.frames = vec![Vec::new()];
        let body = w.stmts(&proc.body)?;
        processes.push(Process {
            name: proc.name.name.clone(),
            body,
            produces: proc
                .produces
                .iter()
                .map(|c| ChannelId(ids[c.name.as_str()]))
                .collect(),
            loc: proc.loc,
        });
    }
    Ok((processes, channels))
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

/// What an expression must be.
#[derive(Clone, Copy)]
enum Want {
    Any,
    Integer,
    Exactly(ScalarType),
}

struct Walker<'m> {
    module: &'m Module,
    config: &'m ScheduleConfig,
    globals: HashMap<&'m str, Reg>,
    tensors: HashMap<&'m str, u32>,
    kernels: HashMap<&'m str, u32>,
    axis_ids: HashMap<&'m str, AxisId>,
    axes: Vec<Axis>,
    regs: Vec<ScalarType>,
    symbols_used: Vec<bool>,
    shapes: Vec<Option<Vec<ExprId>>>,
    arrays: Vec<bool>,
    array_reads: Vec<Loc>,
    written: Vec<bool>,
    /// Enclosing `while` loops in the current body (reset across calls and `consume`).
    whiles: usize,
    tiers: Vec<Option<Tiers>>,
    kernels_used: Vec<bool>,
    exprs: Vec<ExprInfo>,
    /// Variables in scope, one frame per workload on the call chain (innermost last).
    frames: Vec<Vec<(&'m str, Reg)>>,
    call_stack: Vec<String>,
    channels: Option<HashMap<&'m str, u32>>,
    dispatch: Option<DispatchPlan>,
    /// The dispatch policy's key expressions and what each is, in slot order.
    dispatch_keys: Vec<(&'m Expr, &'static str)>,
    /// Where we are, for messages ("workload `main`").
    place: String,
    /// The statement being resolved.
    loc: Loc,
    /// Task statements so far.
    n_tasks: u32,
}

impl<'m> Walker<'m> {
    fn new(module: &'m Module, config: &'m ScheduleConfig) -> Walker<'m> {
        let mut globals = HashMap::new();
        let mut regs = Vec::new();
        for s in &module.symbols {
            globals
                .entry(s.name.name.as_str())
                .or_insert(regs.len() as Reg);
            regs.push(s.ty);
        }
        for s in &module.slots {
            globals
                .entry(s.name.name.as_str())
                .or_insert(regs.len() as Reg);
            regs.push(s.ty);
        }
        let mut tensors = HashMap::new();
        for (i, t) in module.tensors.iter().enumerate() {
            tensors.entry(t.name.name.as_str()).or_insert(i as u32);
        }
        let mut kernels = HashMap::new();
        for (i, k) in module.kernels.iter().enumerate() {
            kernels.entry(k.name.name.as_str()).or_insert(i as u32);
        }
        Walker {
            module,
            config,
            globals,
            tensors,
            kernels,
            axis_ids: HashMap::new(),
            axes: Vec::new(),
            regs,
            symbols_used: vec![false; module.symbols.len()],
            shapes: vec![None; module.tensors.len()],
            arrays: vec![false; module.tensors.len()],
            array_reads: vec![Loc::NONE; module.tensors.len()],
            written: vec![false; module.tensors.len()],
            whiles: 0,
            tiers: vec![None; module.kernels.len()],
            kernels_used: vec![false; module.kernels.len()],
            exprs: Vec::new(),
            frames: vec![Vec::new()],
            call_stack: Vec::new(),
            channels: None,
            dispatch: None,
            dispatch_keys: Vec::new(),
            place: String::new(),
            loc: Loc::NONE,
            n_tasks: 0,
        }
    }

    fn n_symbols(&self) -> Reg {
        self.module.symbols.len() as Reg
    }

    /// A fresh register of type `ty`.
    fn fresh(&mut self, ty: ScalarType) -> Reg {
        self.regs.push(ty);
        (self.regs.len() - 1) as Reg
    }

    fn type_error(&self, context: &str, message: String) -> ResolveError {
        ResolveError::Type {
            context: context.to_string(),
            message,
            loc: self.loc,
        }
    }

    fn malformed(&self, message: String) -> ResolveError {
        ResolveError::Malformed {
            message,
            loc: self.loc,
        }
    }

    fn unknown(&self, kind: &'static str, name: &str, context: &str) -> ResolveError {
        ResolveError::UnknownName {
            kind,
            name: name.to_string(),
            context: context.to_string(),
            loc: self.loc,
        }
    }

    /// Resolves `e` under `scope` into a typed tree, checking it is what `want` says.
    fn tree(
        &mut self,
        e: &Expr,
        what: &str,
        scope: Scope,
        want: Want,
    ) -> Result<TExpr, ResolveError> {
        let frames: &[Vec<(&str, Reg)>] = match scope {
            Scope::Symbols | Scope::Globals => &[],
            Scope::Workload => &self.frames[self.frames.len().saturating_sub(1)..],
            Scope::Schedule => &self.frames,
        };
        let n_symbols = self.n_symbols();
        let globals = &self.globals;
        let regs = &self.regs;
        let used = &mut self.symbols_used;
        let mut lookup = |name: &str| -> Option<TExpr> {
            for frame in frames.iter().rev() {
                if let Some((_, r)) = frame.iter().rev().find(|(n, _)| *n == name) {
                    return Some(TExpr::Reg(*r, regs[*r as usize]));
                }
            }
            let r = *globals.get(name)?;
            if r < n_symbols {
                used[r as usize] = true;
            } else if scope == Scope::Symbols {
                return None;
            }
            Some(TExpr::Reg(r, regs[r as usize]))
        };
        let t = build(e, &mut lookup).map_err(|err| match err {
            BuildError::Unbound(name) => self.unknown("name", &name, what),
            BuildError::Type(message) => self.type_error(what, message),
        })?;
        self.check(t, what, want)
    }

    fn check(&self, t: TExpr, what: &str, want: Want) -> Result<TExpr, ResolveError> {
        match want {
            Want::Any => Ok(t),
            Want::Integer if t.ty() == ScalarType::Bool => {
                Err(self.type_error(what, "expected an integer, found a bool".into()))
            }
            Want::Integer => Ok(t),
            Want::Exactly(ty) if t.ty() != ty => {
                Err(self.type_error(what, format!("expected {ty}, found a {}", t.ty())))
            }
            Want::Exactly(_) => Ok(t),
        }
    }

    fn add(&mut self, expr: TExpr, what: String) -> ExprId {
        self.exprs.push(ExprInfo { expr, what });
        ExprId((self.exprs.len() - 1) as u32)
    }

    /// Resolves and stores `e`.
    fn expr(
        &mut self,
        e: &Expr,
        what: String,
        scope: Scope,
        want: Want,
    ) -> Result<ExprId, ResolveError> {
        let t = self.tree(e, &what, scope, want)?;
        Ok(self.add(t, what))
    }

    fn tensor(&self, t: &Ident, context: &str) -> Result<TensorId, ResolveError> {
        self.tensors
            .get(t.name.as_str())
            .map(|&i| TensorId(i))
            .ok_or_else(|| self.unknown("tensor", &t.name, context))
    }

    /// A tensor whose bound contents are read.
    fn array(&mut self, t: &Ident, context: &str) -> Result<TensorId, ResolveError> {
        let i = self.tensor(t, context)?;
        if !self.arrays[i.index()] {
            self.arrays[i.index()] = true;
            self.array_reads[i.index()] = self.loc;
        }
        Ok(i)
    }

    /// A tensor whose shape is needed.
    fn shaped(&mut self, t: &Ident, context: &str) -> Result<TensorId, ResolveError> {
        let i = self.tensor(t, context)?;
        if self.shapes[i.index()].is_none() {
            let decl = &self.module.tensors[i.index()];
            let mut dims = Vec::new();
            for (d, e) in decl.shape.iter().enumerate() {
                let what = format!("dimension {d} of tensor `{}`", decl.name);
                dims.push(self.expr(e, what, Scope::Symbols, Want::Integer)?);
            }
            self.shapes[i.index()] = Some(dims);
        }
        Ok(i)
    }

    fn kernel(&mut self, name: &Ident, context: &str) -> Result<KernelId, ResolveError> {
        let k = *self
            .kernels
            .get(name.name.as_str())
            .ok_or_else(|| self.unknown("kernel", &name.name, context))?;
        self.kernels_used[k as usize] = true;
        Ok(KernelId(k))
    }

    fn axis(&mut self, name: &'m Ident, context: &str) -> Result<AxisId, ResolveError> {
        if let Some(&a) = self.axis_ids.get(name.name.as_str()) {
            return Ok(a);
        }
        let decl = self
            .module
            .axis(&name.name)
            .ok_or_else(|| self.unknown("axis", &name.name, context))?;
        let rows = |kind| format!("the {kind} of axis `{name}`");
        let kind = match &decl.kind {
            AxisKind::Dense(e) | AxisKind::DenseDyn(e) => {
                AxisExtent::Dense(self.expr(e, rows("extent"), Scope::Globals, Want::Integer)?)
            }
            AxisKind::Ragged {
                outer,
                lengths: tensor,
                per_row,
            } => {
                let rows = self.expr(outer, rows("row count"), Scope::Globals, Want::Integer)?;
                let lengths = self.array(tensor, &format!("axis `{name}`"))?;
                let per_row = match per_row {
                    None => None,
                    Some(e) => {
                        // The tensor's name is bound to a register holding the row's element,
                        // in a frame of its own so no workload variable is visible.
                        let element = self.fresh(ScalarType::I64);
                        self.frames.push(vec![(tensor.name.as_str(), element)]);
                        let what = format!("the row length of axis `{name}`");
                        let length = self.expr(e, what, Scope::Workload, Want::Integer);
                        self.frames.pop();
                        Some(super::RowLength {
                            element,
                            length: length?,
                        })
                    }
                };
                AxisExtent::Ragged {
                    rows,
                    lengths,
                    per_row,
                }
            }
            AxisKind::Sparse {
                outer,
                indptr,
                indices,
            } => {
                let rows = self.expr(outer, rows("row count"), Scope::Globals, Want::Integer)?;
                let w = format!("axis `{name}`");
                let indptr = self.array(indptr, &w)?;
                let indices = self.array(indices, &w)?;
                AxisExtent::Sparse {
                    rows,
                    indptr,
                    indices,
                }
            }
        };
        let id = AxisId(self.axes.len() as u32);
        self.axes.push(Axis {
            name: name.name.clone(),
            kind,
        });
        self.axis_ids.insert(name.name.as_str(), id);
        Ok(id)
    }

    fn slot(&self, slot: &Ident) -> Result<(Reg, ScalarType), ResolveError> {
        match self
            .module
            .slots
            .iter()
            .position(|s| s.name.name == slot.name)
        {
            Some(i) => Ok((self.n_symbols() + i as Reg, self.module.slots[i].ty)),
            None => Err(self.unknown("slot", &slot.name, &self.place)),
        }
    }

    fn channel(&self, ch: &Ident) -> Result<ChannelId, ResolveError> {
        self.channels
            .as_ref()
            .and_then(|m| m.get(ch.name.as_str()).copied())
            .map(ChannelId)
            .ok_or_else(|| self.unknown("channel", &ch.name, &self.place))
    }

    fn stmts(&mut self, body: &'m [AstStmt]) -> Result<Vec<Stmt>, ResolveError> {
        body.iter().map(|s| self.stmt(s)).collect()
    }

    /// Resolves `body` with `vars` bound to fresh `i64` registers.
    fn scoped(
        &mut self,
        vars: &'m [Ident],
        body: &'m [AstStmt],
    ) -> Result<(Vec<Reg>, Vec<Stmt>), ResolveError> {
        let saved = self.frames.last().map_or(0, Vec::len);
        let mut regs = Vec::with_capacity(vars.len());
        for v in vars {
            let r = self.fresh(ScalarType::I64);
            regs.push(r);
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

    fn stmt(&mut self, s: &'m AstStmt) -> Result<Stmt, ResolveError> {
        self.loc = s.loc;
        let kind = self.stmt_kind(s)?;
        Ok(Stmt { kind, loc: s.loc })
    }

    fn stmt_kind(&mut self, s: &'m AstStmt) -> Result<StmtKind, ResolveError> {
        match &s.kind {
            AstKind::Loop {
                order,
                vars,
                axis,
                body,
            } => self.loop_stmt(*order, vars, axis, body),
            AstKind::Select { vars, axis, body } => self.select(vars, axis, body),
            AstKind::Cond {
                cond,
                then_body,
                else_body,
            } => {
                let what = format!("an `if` condition in {}", self.place);
                let cond =
                    self.expr(cond, what, Scope::Workload, Want::Exactly(ScalarType::Bool))?;
                Ok(StmtKind::If {
                    cond,
                    then_body: self.stmts(then_body)?,
                    else_body: self.stmts(else_body)?,
                })
            }
            AstKind::While { cond, max, body } => self.while_stmt(cond, max, body),
            AstKind::Break { cond } => {
                if self.whiles == 0 {
                    return Err(self.malformed(format!(
                        "`break if` in {} is not inside a `while` loop",
                        self.place
                    )));
                }
                let what = format!("a `break if` condition in {}", self.place);
                let cond =
                    self.expr(cond, what, Scope::Workload, Want::Exactly(ScalarType::Bool))?;
                Ok(StmtKind::Break { cond })
            }
            AstKind::Combine(body) => Ok(StmtKind::Block {
                ordered: false,
                body: self.stmts(body)?,
            }),
            AstKind::Sequential(body) => Ok(StmtKind::Block {
                ordered: true,
                body: self.stmts(body)?,
            }),
            AstKind::Task(t) => self.task(&t.kernel, &t.args),
            AstKind::SlotSet { slot, value } => self.set(slot, value),
            AstKind::SlotLoad {
                slot,
                tensor,
                index,
            } => self.load(slot, tensor, index),
            AstKind::Call { workload, args } => self.call(workload, args),
            AstKind::Send { channel, value } => {
                let ch = self.channel(channel)?;
                let what = format!("`send {channel}` in {}", self.place);
                let value = self.expr(value, what, Scope::Workload, Want::Integer)?;
                Ok(StmtKind::Send { channel: ch, value })
            }
            AstKind::Consume { channel, var, body } => {
                let ch = self.channel(channel)?;
                let saved_whiles = std::mem::replace(&mut self.whiles, 0);
                let scoped = self.scoped(std::slice::from_ref(var), body);
                self.whiles = saved_whiles;
                let (vars, body) = scoped?;
                Ok(StmtKind::Consume {
                    channel: ch,
                    var: vars[0],
                    body,
                })
            }
        }
    }

    /// `for` / `parallel_for` over `axis`, binding `vars`.
    fn loop_stmt(
        &mut self,
        order: LoopOrder,
        vars: &'m [Ident],
        axis: &'m Ident,
        body: &'m [AstStmt],
    ) -> Result<StmtKind, ResolveError> {
        let context = format!("{} over `{axis}` in {}", order.keyword(), self.place);
        let a = self.axis(axis, &context)?;
        let decl = &self.module.axis(&axis.name).map(|d| &d.kind);
        let arity = match self.axes[a.index()].kind {
            AxisExtent::Dense(_) => 1,
            AxisExtent::Ragged { .. } => 2,
            AxisExtent::Sparse { .. } => {
                return Err(self.malformed(format!(
                    "{context}: a sparse axis is iterated with `select`, not a loop"
                )));
            }
        };
        if vars.len() != arity {
            return Err(self.malformed(format!(
                "{context}: a {} axis binds {arity} loop variable(s), not {}",
                decl.map_or("", |k| k.keyword()),
                vars.len()
            )));
        }
        let (vars, body) = self.scoped(vars, body)?;
        Ok(StmtKind::Loop(Box::new(Loop {
            ordered: order == LoopOrder::Sequential,
            axis: a,
            vars,
            body,
        })))
    }

    /// `select` over sparse axis `axis`, binding `vars`.
    fn select(
        &mut self,
        vars: &'m [Ident],
        axis: &'m Ident,
        body: &'m [AstStmt],
    ) -> Result<StmtKind, ResolveError> {
        let context = format!("select over `{axis}` in {}", self.place);
        let a = self.axis(axis, &context)?;
        if !matches!(self.axes[a.index()].kind, AxisExtent::Sparse { .. }) {
            return Err(self.malformed(format!("{context}: `select` needs a sparse axis")));
        }
        if vars.len() != 2 {
            return Err(self.malformed(format!(
                "{context}: `select` binds 2 variables, not {}",
                vars.len()
            )));
        }
        let (vars, body) = self.scoped(vars, body)?;
        Ok(StmtKind::Loop(Box::new(Loop {
            ordered: false,
            axis: a,
            vars,
            body,
        })))
    }

    /// `while COND max MAX { ... }`.
    fn while_stmt(
        &mut self,
        cond: &'m Expr,
        max: &'m Expr,
        body: &'m [AstStmt],
    ) -> Result<StmtKind, ResolveError> {
        let what = format!("a `while` condition in {}", self.place);
        let cond = self.expr(cond, what, Scope::Workload, Want::Exactly(ScalarType::Bool))?;
        let what = format!("the `max` bound of a `while` in {}", self.place);
        let max = self.expr(max, what, Scope::Workload, Want::Integer)?;
        self.whiles += 1;
        let body = self.stmts(body);
        self.whiles -= 1;
        Ok(StmtKind::While {
            cond,
            max,
            body: body?,
        })
    }

    /// `set SLOT = VALUE;`.
    fn set(&mut self, slot: &'m Ident, value: &'m Expr) -> Result<StmtKind, ResolveError> {
        let (reg, ty) = self.slot(slot)?;
        let what = format!("`set {slot}` in {}", self.place);
        let t = self.tree(value, &what, Scope::Workload, Want::Any)?;
        if t.ty() != ty {
            return Err(self.type_error(
                &what,
                format!(
                    "expected {ty} (the type of slot `{slot}`), found a {}",
                    t.ty()
                ),
            ));
        }
        Ok(StmtKind::Set {
            slot: reg,
            value: self.add(t, what),
        })
    }

    /// `load SLOT = TENSOR[INDEX];`.
    fn load(
        &mut self,
        slot: &'m Ident,
        tensor: &'m Ident,
        index: &'m [Expr],
    ) -> Result<StmtKind, ResolveError> {
        let (reg, ty) = self.slot(slot)?;
        let context = format!("`load {slot} = {tensor}[..]` in {}", self.place);
        if ty == ScalarType::Bool {
            return Err(self.type_error(
                &context,
                format!("slot `{slot}` is bool; `load` needs an integer slot"),
            ));
        }
        let t = self.shaped(tensor, &context)?;
        self.array(tensor, &context)?;
        let rank = self.module.tensors[t.index()].shape.len();
        if index.len() != rank {
            return Err(self.malformed(format!(
                "{context}: tensor `{tensor}` has {rank} dimension(s), the index {}",
                index.len()
            )));
        }
        let mut idx = Vec::new();
        for (d, e) in index.iter().enumerate() {
            let what = format!("index {d} of {context}");
            idx.push(self.expr(e, what, Scope::Workload, Want::Integer)?);
        }
        Ok(StmtKind::Load {
            slot: reg,
            tensor: t,
            index: idx,
        })
    }

    /// `call WORKLOAD(ARGS);`: the callee's body, resolved in its own frame.
    fn call(&mut self, workload: &'m Ident, args: &'m [Expr]) -> Result<StmtKind, ResolveError> {
        let context = format!("`call {workload}` in {}", self.place);
        let w = self
            .module
            .workload(&workload.name)
            .ok_or_else(|| self.unknown("workload", &workload.name, &context))?;
        if self.call_stack.contains(&workload.name) {
            return Err(ResolveError::Recursion {
                chain: self
                    .call_stack
                    .iter()
                    .cloned()
                    .chain([workload.name.clone()])
                    .collect(),
                loc: self.loc,
            });
        }
        if args.len() != w.params.len() {
            return Err(self.malformed(format!(
                "{context}: `{workload}` takes {} argument(s), not {}",
                w.params.len(),
                args.len()
            )));
        }
        let mut bound = Vec::new();
        let mut frame = Vec::new();
        for (a, (p, ty)) in args.iter().zip(&w.params) {
            let what = format!("argument `{p}` of {context}");
            let v = self.expr(a, what, Scope::Workload, Want::Exactly(*ty))?;
            let reg = self.fresh(*ty);
            bound.push((reg, v));
            frame.push((p.name.as_str(), reg));
        }
        // The callee sees only its own parameters and variables (plus globals).
        let saved_place = std::mem::replace(&mut self.place, format!("workload `{workload}`"));
        self.frames.push(frame);
        self.call_stack.push(workload.name.clone());
        let saved_whiles = std::mem::replace(&mut self.whiles, 0);
        let body = self.stmts(&w.body);
        self.whiles = saved_whiles;
        self.call_stack.pop();
        self.frames.pop();
        self.place = saved_place;
        Ok(StmtKind::Call {
            workload: workload.name.clone(),
            args: bound,
            body: body?,
        })
    }

    fn task(&mut self, kernel: &'m Ident, args: &'m [Arg]) -> Result<StmtKind, ResolveError> {
        let context = format!("task `{kernel}` in {}", self.place);
        let k = self.kernel(kernel, &context)?;
        let decl: &'m KernelDecl = &self.module.kernels[k.index()];
        if args.len() != decl.params.len() {
            return Err(self.malformed(format!(
                "{context}: kernel `{kernel}` takes {} argument(s), not {}",
                decl.params.len(),
                args.len()
            )));
        }
        let mut targs = Vec::with_capacity(args.len());
        for (p, a) in decl.params.iter().zip(args) {
            match (&p.kind, a) {
                (ParamKind::Scalar(ty), Arg::Scalar(e)) => {
                    let what = format!("argument `{}` of {context}", p.name);
                    targs.push(TaskArg::Scalar(self.expr(
                        e,
                        what,
                        Scope::Workload,
                        Want::Exactly(ty.carrier()),
                    )?));
                }
                (ParamKind::Tile { access, .. }, Arg::Region(r)) => {
                    targs.push(self.region_arg(p, *access, r, &context)?);
                }
                (ParamKind::Scalar(_), Arg::Region(_))
                | (ParamKind::Tile { .. }, Arg::Scalar(_)) => {
                    return Err(self.malformed(format!(
                        "{context}: argument `{}` must be a {}",
                        p.name,
                        match p.kind {
                            ParamKind::Scalar(_) => "scalar expression",
                            ParamKind::Tile { .. } => "region",
                        }
                    )));
                }
            }
        }
        if let Some(tiers) = &decl.tiers
            && self.tiers[k.index()].is_none()
        {
            let t = self.tiers_of(decl, tiers)?;
            self.tiers[k.index()] = Some(t);
        }
        let keys = self.task_keys(&context)?;
        let id = self.n_tasks;
        self.n_tasks += 1;
        Ok(StmtKind::Task(Box::new(Task {
            id,
            kernel: k,
            args: targs,
            keys,
        })))
    }

    /// Region argument `r` of task parameter `p` (accessed `access`) in `context`.
    fn region_arg(
        &mut self,
        p: &'m crate::module::KernelParam,
        access: crate::types::Access,
        r: &'m crate::workload::Region,
        context: &str,
    ) -> Result<TaskArg, ResolveError> {
        let t = self.shaped(&r.tensor, context)?;
        let rank = self.module.tensors[t.index()].shape.len();
        if r.dims.len() != rank {
            return Err(self.malformed(format!(
                "{context}: tensor `{}` has {rank} dimension(s), the region {}",
                r.tensor,
                r.dims.len()
            )));
        }
        let mut dims = Vec::new();
        for (d, rd) in r.dims.iter().enumerate() {
            let what = format!("dimension {d} of argument `{}` of {context}", p.name);
            let start = self.expr(
                &rd.start,
                format!("the start of {what}"),
                Scope::Workload,
                Want::Integer,
            )?;
            let size = match &rd.size {
                Some(e) => Some(self.expr(
                    e,
                    format!("the size of {what}"),
                    Scope::Workload,
                    Want::Integer,
                )?),
                None => None,
            };
            dims.push((start, size));
        }
        if access.writes() {
            self.written[t.index()] = true;
        }
        Ok(TaskArg::Region {
            tensor: t,
            access,
            dims,
        })
    }

    /// The schedule's per-task expressions, resolved where the task (in `context`) stands.
    fn task_keys(&mut self, context: &str) -> Result<Vec<ExprId>, ResolveError> {
        let config = self.config;
        if self.dispatch.is_none() {
            let mut keys = Vec::new();
            let d = dispatch_slots(&config.dispatch, &mut keys)?;
            self.dispatch = Some(d);
            self.dispatch_keys = keys;
        }
        let mut keys = Vec::new();
        for (e, what) in self.dispatch_keys.clone() {
            let what = format!("{what} at {context}");
            keys.push(self.expr(e, what, Scope::Schedule, Want::Integer)?);
        }
        let mut key = |w: &mut Self, e: &Expr, what: &str| -> Result<(), ResolveError> {
            keys.push(w.expr(e, what.to_string(), Scope::Schedule, Want::Integer)?);
            Ok(())
        };
        if let Some(e) = &config.stream_by {
            key(self, e, "the `stream_by` key")?;
        }
        if let Some(l) = &config.dispatch_threshold {
            key(self, &l.metric, "the `dispatch_threshold` metric")?;
        }
        if let ReadyPolicy::Priority(e) = &config.ready {
            key(self, e, "the `priority` key")?;
        }
        if let TracePolicy::Cycles(Some(e), _) = &config.trace {
            key(self, e, "the `cycles` cost")?;
        }
        Ok(keys)
    }

    fn tiers_of(
        &mut self,
        decl: &'m KernelDecl,
        tiers: &'m crate::module::Tiers,
    ) -> Result<Tiers, ResolveError> {
        let context = format!("the tiers of kernel `{}`", decl.name);
        let params: Vec<(&str, ScalarType)> = decl
            .params
            .iter()
            .filter_map(|p| match p.kind {
                ParamKind::Scalar(t) => Some((p.name.name.as_str(), t.carrier())),
                ParamKind::Tile { .. } => None,
            })
            .collect();
        let loc = decl.name.loc;
        let mut cases = Vec::new();
        for (cond, variant) in &tiers.cases {
            let what = format!("a condition of {context}");
            let globals = &self.globals;
            let n_symbols = self.n_symbols();
            let regs = &self.regs;
            let used = &mut self.symbols_used;
            let mut lookup = |name: &str| -> Option<TExpr> {
                if let Some(i) = params.iter().rposition(|(n, _)| *n == name) {
                    return Some(TExpr::Arg(i as u32, params[i].1));
                }
                let r = *globals.get(name)?;
                if r < n_symbols {
                    used[r as usize] = true;
                    Some(TExpr::Reg(r, regs[r as usize]))
                } else {
                    None
                }
            };
            let c = build(cond, &mut lookup).map_err(|err| match err {
                BuildError::Unbound(name) => ResolveError::UnknownName {
                    kind: "name",
                    name,
                    context: what.clone(),
                    loc,
                },
                BuildError::Type(message) => ResolveError::Type {
                    context: what.clone(),
                    message,
                    loc,
                },
            })?;
            if c.ty() != ScalarType::Bool {
                return Err(ResolveError::Type {
                    context: what,
                    message: format!("expected bool, found a {}", c.ty()),
                    loc,
                });
            }
            let c = self.add(c, what);
            cases.push((c, self.kernel(variant, &context)?));
        }
        Ok(Tiers {
            cases,
            default: self.kernel(&tiers.default, &context)?,
        })
    }
}

/// The dispatch policy with its key expressions replaced by slot numbers (pre-order).
fn dispatch_slots<'c>(
    d: &'c Dispatch,
    keys: &mut Vec<(&'c Expr, &'static str)>,
) -> Result<DispatchPlan, ResolveError> {
    Ok(match d {
        Dispatch::RoundRobin(0) => {
            return Err(ResolveError::BadSchedule {
                message: "round_robin(0): the executor count must be at least 1".into(),
            });
        }
        Dispatch::RoundRobin(n) => DispatchPlan::RoundRobin(*n),
        Dispatch::Affinity(e) => {
            keys.push((e, "the `affinity` key"));
            DispatchPlan::Affinity((keys.len() - 1) as u32)
        }
        Dispatch::Hash(e) => {
            keys.push((e, "the `hash` key"));
            DispatchPlan::Hash((keys.len() - 1) as u32)
        }
        Dispatch::Threshold(Levels {
            metric,
            levels,
            otherwise,
        }) => {
            keys.push((metric, "the `threshold` metric"));
            let slot = (keys.len() - 1) as u32;
            let mut ls = Vec::new();
            for (b, d) in levels {
                ls.push((*b, dispatch_slots(d, keys)?));
            }
            DispatchPlan::Threshold(slot, ls, Box::new(dispatch_slots(otherwise, keys)?))
        }
        Dispatch::StaticPartition(starts) => {
            if starts.first() != Some(&0) {
                return Err(ResolveError::BadSchedule {
                    message: "static_partition must start at 0".into(),
                });
            }
            DispatchPlan::StaticPartition(starts.clone())
        }
        Dispatch::WorkSteal => DispatchPlan::WorkSteal,
    })
}

enum BuildError {
    Unbound(String),
    Type(String),
}

/// Types and folds `e`, names looked up by `lookup`.
fn build(e: &Expr, lookup: &mut impl FnMut(&str) -> Option<TExpr>) -> Result<TExpr, BuildError> {
    Ok(match e {
        Expr::Int(v) => TExpr::Const(Value::I64(*v)),
        Expr::UInt(v) => TExpr::Const(Value::U64(*v)),
        Expr::Float(v) => TExpr::Const(Value::U64(v.bits())),
        Expr::Bool(b) => TExpr::Const(Value::Bool(*b)),
        Expr::Name(id) => lookup(&id.name).ok_or_else(|| BuildError::Unbound(id.name.clone()))?,
        Expr::Unary(op, a) => TExpr::unary(*op, build(a, lookup)?).map_err(BuildError::Type)?,
        Expr::Binary(..) => {
            let (first, rest) = e.left_spine();
            let mut acc = build(first, lookup)?;
            for (op, b) in rest {
                let b = build(b, lookup)?;
                acc = TExpr::binary(op, acc, b).map_err(BuildError::Type)?;
            }
            acc
        }
        Expr::Ternary(c, a, b) => {
            let c = build(c, lookup)?;
            let a = build(a, lookup)?;
            let b = build(b, lookup)?;
            TExpr::ternary(c, a, b).map_err(BuildError::Type)?
        }
    })
}
