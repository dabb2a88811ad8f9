//! Resolution of a module into the form the expander runs.
//!
//! Why: looking names up in maps for every task would make the oracle slow. Before running, the
//! entry point is walked once: every name becomes an index into one flat environment of values
//! (`[symbols][slots][tier scratch][variables]`), every declaration reference becomes an index,
//! calls are inlined (each call site gets its own copy of the callee, its parameters fresh
//! variables), and the schedule's per-task expressions are resolved at each task statement.
//!
//! Promise: resolution never panics on an unvalidated module; a name that means nothing where it
//! stands, a wrong number of arguments or loop variables, a call cycle, … become [`ExpandError`]s.
//! Up-front binding checks live here too: every symbol the entry can read and every integer
//! tensor it reads must be bound, with the declared type.

use super::ExpandError;
use crate::eval::Compiled;
use crate::expr::Expr;
use crate::loc::Ident;
use crate::module::{AxisKind, KernelDecl, Module, ParamKind, Tiers};
use crate::schedule::{Dispatch, Levels, ReadyPolicy, ScheduleConfig, TracePolicy};
use crate::types::{Access, ExecPool, ScalarType};
use crate::value::{Bindings, Value};
use crate::workload::{Arg, LoopOrder, Stmt, StmtKind};
use std::collections::HashMap;

/// An expression with the description used when its evaluation fails.
#[derive(Debug)]
pub(super) struct CExpr {
    pub code: Compiled,
    pub what: String,
}

/// The resolved entry point and everything the run needs.
#[derive(Debug)]
pub(super) struct Program<'m> {
    pub module: &'m Module,
    /// The initial environment: symbol values, initial slot values, zeros.
    pub env: Vec<Value>,
    /// Evaluated shape of every tensor a region or `load` uses (empty for others).
    pub shapes: Vec<Vec<i64>>,
    /// Bound contents of every integer tensor the entry reads (`None` for others).
    pub arrays: Vec<Option<&'m [i64]>>,
    /// Compiled tiers per kernel (only for tiered kernels that tasks name).
    pub tiers: Vec<Option<CTiers>>,
    /// The processes (a workload entry is one process with no channels).
    pub processes: Vec<CProcess>,
    /// Channels of a pipeline entry.
    pub channels: Vec<String>,
    /// Whether the entry is a pipeline.
    pub csp: bool,
    /// Executors targets range over.
    pub executors: u64,
    /// Streams.
    pub streams: u64,
}

#[derive(Debug)]
pub(super) struct CProcess {
    pub name: String,
    pub body: Vec<CStmt>,
    /// Channels this process closes when it ends.
    pub produces: Vec<u32>,
}

#[derive(Debug)]
pub(super) enum CStmt {
    Loop(Box<CLoop>),
    Select(Box<CSelect>),
    If {
        cond: CExpr,
        then_body: Vec<CStmt>,
        else_body: Vec<CStmt>,
    },
    Block {
        ordered: bool,
        body: Vec<CStmt>,
    },
    Task(Box<CTask>),
    Set {
        slot: u32,
        name: String,
        ty: ScalarType,
        value: CExpr,
    },
    Load {
        slot: u32,
        name: String,
        ty: ScalarType,
        tensor: u32,
        index: Vec<CExpr>,
    },
    Call {
        workload: String,
        /// (environment index, declared type, argument)
        args: Vec<(u32, ScalarType, CExpr)>,
        body: Vec<CStmt>,
    },
    Send {
        channel: u32,
        value: CExpr,
    },
    Consume {
        channel: u32,
        var: u32,
        body: Vec<CStmt>,
    },
}

#[derive(Debug)]
pub(super) struct CLoop {
    pub ordered: bool,
    pub axis: String,
    pub kind: CAxis,
    /// Environment index of each loop variable (one for dense axes, two for ragged).
    pub vars: [u32; 2],
    pub body: Vec<CStmt>,
}

#[derive(Debug)]
pub(super) enum CAxis {
    Dense(CExpr),
    Ragged { outer: CExpr, lengths: u32 },
}

#[derive(Debug)]
pub(super) struct CSelect {
    pub axis: String,
    pub outer: CExpr,
    pub indptr: u32,
    pub indices: u32,
    pub vars: [u32; 2],
    pub body: Vec<CStmt>,
}

#[derive(Debug)]
pub(super) struct CTask {
    pub kernel: u32,
    pub args: Vec<CArg>,
    pub dispatch: CDispatch,
    pub stream_by: Option<CExpr>,
    pub pool_by: Option<CLevels<ExecPool>>,
    pub priority_by: Option<CExpr>,
    pub cost_by: Option<CExpr>,
}

#[derive(Debug)]
pub(super) enum CArg {
    Scalar {
        param: String,
        ty: ScalarType,
        value: CExpr,
        /// Where tier conditions read this parameter.
        tier_slot: u32,
    },
    Region {
        param: String,
        tensor: u32,
        access: Access,
        /// (start, size) per dimension; no size means 1.
        dims: Vec<(CExpr, Option<CExpr>)>,
    },
}

#[derive(Debug)]
pub(super) struct CTiers {
    pub cases: Vec<(CExpr, u32)>,
    pub default: u32,
}

#[derive(Debug)]
pub(super) enum CDispatch {
    RoundRobin(u64),
    Affinity(CExpr),
    Hash(CExpr),
    Threshold(Box<CLevels<CDispatch>>),
    StaticPartition(Vec<u64>),
    WorkSteal,
}

#[derive(Debug)]
pub(super) struct CLevels<T> {
    pub metric: CExpr,
    pub levels: Vec<(i64, T)>,
    pub otherwise: T,
}

/// Resolves `module`'s entry point under `bindings`.
pub(super) fn compile<'m>(
    module: &'m Module,
    bindings: &'m Bindings,
    executors_override: Option<u64>,
) -> Result<Program<'m>, ExpandError> {
    let entry = module
        .entry_name()
        .ok_or_else(|| ExpandError::NoEntryPoint {
            reason: "there is no schedule, no workload `main`, and not exactly one workload or \
                 pipeline"
                .into(),
        })?;
    let config = module
        .schedule
        .as_ref()
        .map(|s| s.config())
        .unwrap_or_default();
    let executors = executors_override.unwrap_or(config.executors);
    if executors == 0 || executors > u64::from(u32::MAX) + 1 {
        return Err(ExpandError::BadSchedule {
            message: format!("executors must be between 1 and 2^32, not {executors}"),
        });
    }
    if config.streams == 0 || config.streams > u64::from(u32::MAX) + 1 {
        return Err(ExpandError::BadSchedule {
            message: format!("streams must be between 1 and 2^32, not {}", config.streams),
        });
    }

    let mut c = Compiler::new(module, &config);
    let mut processes = Vec::new();
    let mut channels = Vec::new();
    let csp;
    if let Some(w) = module.workload(entry) {
        if !w.params.is_empty() {
            return Err(ExpandError::Malformed {
                message: format!("the entry workload `{entry}` has parameters; nothing binds them"),
            });
        }
        c.place = format!("workload `{entry}`");
        c.call_stack.push(entry.to_string());
        let body = c.stmts(&w.body)?;
        processes.push(CProcess {
            name: entry.to_string(),
            body,
            produces: Vec::new(),
        });
        csp = false;
    } else if let Some(p) = module.pipeline(entry) {
        let mut channel_ids = HashMap::new();
        for ch in &p.channels {
            if channel_ids
                .insert(ch.name.name.as_str(), channels.len() as u32)
                .is_some()
            {
                return Err(ExpandError::Malformed {
                    message: format!(
                        "channel `{}` is declared twice in pipeline `{entry}`",
                        ch.name
                    ),
                });
            }
            channels.push(ch.name.name.clone());
        }
        c.channels = Some(channel_ids.clone());
        for proc in &p.processes {
            let mut produces = Vec::new();
            for ch in proc.produces.iter().chain(&proc.consumes) {
                if !channel_ids.contains_key(ch.name.as_str()) {
                    return Err(ExpandError::UnknownName {
                        kind: "channel",
                        name: ch.name.clone(),
                        context: format!("process `{}` of pipeline `{entry}`", proc.name),
                    });
                }
            }
            for ch in &proc.produces {
                produces.push(channel_ids[ch.name.as_str()]);
            }
            c.place = format!("process `{}` of pipeline `{entry}`", proc.name);
            c.frames = vec![Vec::new()];
            c.next_var = c.max_var;
            let body = c.stmts(&proc.body)?;
            processes.push(CProcess {
                name: proc.name.name.clone(),
                body,
                produces,
            });
        }
        csp = true;
    } else {
        return Err(ExpandError::NoEntryPoint {
            reason: format!("the schedule's target `{entry}` is not a workload or pipeline"),
        });
    }

    // Bindings: every symbol the program reads, every array it reads.
    let mut env = vec![Value::I64(0); c.max_var as usize];
    for (i, sym) in module.symbols.iter().enumerate() {
        match bindings.symbols.get(&sym.name.name) {
            Some(v) if v.ty() != sym.ty => {
                return Err(ExpandError::BindingType {
                    name: sym.name.name.clone(),
                    expected: sym.ty,
                    found: v.ty(),
                });
            }
            Some(v) => env[i] = *v,
            None if c.used_symbols[i] => {
                return Err(ExpandError::MissingSymbol {
                    name: sym.name.name.clone(),
                });
            }
            None => env[i] = Value::zero(sym.ty),
        }
    }
    for (i, slot) in module.slots.iter().enumerate() {
        let v = match bindings.slots.get(&slot.name.name) {
            Some(v) if v.ty() != slot.ty => {
                return Err(ExpandError::BindingType {
                    name: slot.name.name.clone(),
                    expected: slot.ty,
                    found: v.ty(),
                });
            }
            Some(v) => *v,
            None => Value::zero(slot.ty),
        };
        env[module.symbols.len() + i] = v;
    }
    let mut arrays = vec![None; module.tensors.len()];
    for (i, t) in module.tensors.iter().enumerate() {
        if c.used_arrays[i] {
            let data =
                bindings
                    .arrays
                    .get(&t.name.name)
                    .ok_or_else(|| ExpandError::MissingArray {
                        tensor: t.name.name.clone(),
                    })?;
            arrays[i] = Some(data.as_slice());
        }
    }
    let mut shapes = vec![Vec::new(); module.tensors.len()];
    for (i, t) in module.tensors.iter().enumerate() {
        if let Some(dims) = c.shapes[i].take() {
            let mut shape = Vec::with_capacity(dims.len());
            for (d, e) in dims.iter().enumerate() {
                let v = super::run::int(&e.what, e.code.eval(&env))?;
                if v < 0 {
                    return Err(ExpandError::NegativeLength {
                        what: format!("dimension {d} of tensor `{}`", t.name),
                        value: v,
                    });
                }
                shape.push(v);
            }
            shapes[i] = shape;
        }
    }
    Ok(Program {
        module,
        env,
        shapes,
        arrays,
        tiers: c.tiers,
        processes,
        channels,
        csp,
        executors,
        streams: config.streams,
    })
}

struct Compiler<'m> {
    module: &'m Module,
    config: &'m ScheduleConfig,
    /// Symbols and slots: name → environment index.
    globals: HashMap<&'m str, u32>,
    tensors: HashMap<&'m str, u32>,
    kernels: HashMap<&'m str, u32>,
    used_symbols: Vec<bool>,
    used_arrays: Vec<bool>,
    /// Per tensor: its dimensions, resolved, once a region or `load` uses it.
    shapes: Vec<Option<Vec<CExpr>>>,
    tiers: Vec<Option<CTiers>>,
    /// Variables in scope, one frame per workload on the call chain (innermost last).
    frames: Vec<Vec<(&'m str, u32)>>,
    call_stack: Vec<String>,
    channels: Option<HashMap<&'m str, u32>>,
    tier_base: u32,
    next_var: u32,
    max_var: u32,
    /// Where we are, for messages ("workload `main`").
    place: String,
}

impl<'m> Compiler<'m> {
    fn new(module: &'m Module, config: &'m ScheduleConfig) -> Compiler<'m> {
        let mut globals = HashMap::new();
        for (i, s) in module.symbols.iter().enumerate() {
            globals.entry(s.name.name.as_str()).or_insert(i as u32);
        }
        for (i, s) in module.slots.iter().enumerate() {
            globals
                .entry(s.name.name.as_str())
                .or_insert((module.symbols.len() + i) as u32);
        }
        let index = |names: Vec<&'m str>| {
            let mut m = HashMap::new();
            for (i, n) in names.into_iter().enumerate() {
                m.entry(n).or_insert(i as u32);
            }
            m
        };
        let tier_scratch = module
            .kernels
            .iter()
            .map(|k| scalar_params(k).count())
            .max()
            .unwrap_or(0);
        let tier_base = (module.symbols.len() + module.slots.len()) as u32;
        let var_base = tier_base + tier_scratch as u32;
        Compiler {
            module,
            config,
            globals,
            tensors: index(module.tensors.iter().map(|t| t.name.as_str()).collect()),
            kernels: index(module.kernels.iter().map(|t| t.name.as_str()).collect()),
            used_symbols: vec![false; module.symbols.len()],
            used_arrays: vec![false; module.tensors.len()],
            shapes: (0..module.tensors.len()).map(|_| None).collect(),
            tiers: (0..module.kernels.len()).map(|_| None).collect(),
            frames: vec![Vec::new()],
            call_stack: Vec::new(),
            channels: None,
            tier_base,
            next_var: var_base,
            max_var: var_base,
            place: String::new(),
        }
    }

    fn n_symbols(&self) -> u32 {
        self.module.symbols.len() as u32
    }

    /// Resolves an expression; `vars` says whether loop variables are visible: `None` (globals
    /// only), `Some(false)` (the current workload's variables), `Some(true)` (every variable on
    /// the call chain, innermost first: schedule expressions).
    fn resolve(
        &mut self,
        e: &Expr,
        what: impl Into<String>,
        vars: Option<bool>,
        symbols_only: bool,
    ) -> Result<CExpr, ExpandError> {
        let what = what.into();
        let n_symbols = self.n_symbols();
        let frames: &[Vec<(&str, u32)>] = match vars {
            None => &[],
            Some(false) => &self.frames[self.frames.len().saturating_sub(1)..],
            Some(true) => &self.frames,
        };
        let globals = &self.globals;
        let used = &mut self.used_symbols;
        let code = Compiled::resolve(e, &mut |name| {
            for frame in frames.iter().rev() {
                if let Some((_, i)) = frame.iter().rev().find(|(n, _)| *n == name) {
                    return Some(*i);
                }
            }
            let i = *globals.get(name)?;
            if i < n_symbols {
                used[i as usize] = true;
            } else if symbols_only {
                return None;
            }
            Some(i)
        })
        .map_err(|err| match err {
            crate::eval::EvalError::Unbound { name } => ExpandError::UnknownName {
                kind: "name",
                name,
                context: what.clone(),
            },
            other => ExpandError::Eval {
                context: what.clone(),
                source: other,
            },
        })?;
        Ok(CExpr { code, what })
    }

    fn expr(&mut self, e: &Expr, what: impl Into<String>) -> Result<CExpr, ExpandError> {
        self.resolve(e, what, Some(false), false)
    }

    fn bind(&mut self, name: &'m Ident) -> u32 {
        let i = self.next_var;
        self.next_var += 1;
        self.max_var = self.max_var.max(self.next_var);
        if let Some(f) = self.frames.last_mut() {
            f.push((name.name.as_str(), i));
        }
        i
    }

    fn tensor(&self, t: &Ident, context: &str) -> Result<u32, ExpandError> {
        self.tensors
            .get(t.name.as_str())
            .copied()
            .ok_or_else(|| ExpandError::UnknownName {
                kind: "tensor",
                name: t.name.clone(),
                context: context.to_string(),
            })
    }

    /// A tensor whose bound contents are read.
    fn array(&mut self, t: &Ident, context: &str) -> Result<u32, ExpandError> {
        let i = self.tensor(t, context)?;
        self.used_arrays[i as usize] = true;
        Ok(i)
    }

    /// A tensor whose shape is needed.
    fn shaped(&mut self, t: &Ident, context: &str) -> Result<u32, ExpandError> {
        let i = self.tensor(t, context)?;
        if self.shapes[i as usize].is_none() {
            let decl = &self.module.tensors[i as usize];
            let mut dims = Vec::new();
            for (d, e) in decl.shape.iter().enumerate() {
                dims.push(self.resolve(
                    e,
                    format!("dimension {d} of tensor `{}`", decl.name),
                    None,
                    true,
                )?);
            }
            self.shapes[i as usize] = Some(dims);
        }
        Ok(i)
    }

    fn stmts(&mut self, body: &'m [Stmt]) -> Result<Vec<CStmt>, ExpandError> {
        body.iter().map(|s| self.stmt(s)).collect()
    }

    /// Compiles `body` with `vars` bound to fresh variables; returns their indices.
    fn scoped(
        &mut self,
        vars: &'m [Ident],
        body: &'m [Stmt],
    ) -> Result<([u32; 2], Vec<CStmt>), ExpandError> {
        let saved_next = self.next_var;
        let saved_len = self.frames.last().map_or(0, Vec::len);
        let mut idx = [0; 2];
        for (k, v) in vars.iter().enumerate().take(2) {
            idx[k] = self.bind(v);
        }
        let body = self.stmts(body);
        if let Some(f) = self.frames.last_mut() {
            f.truncate(saved_len);
        }
        self.next_var = saved_next;
        Ok((idx, body?))
    }

    fn stmt(&mut self, s: &'m Stmt) -> Result<CStmt, ExpandError> {
        match &s.kind {
            StmtKind::Loop {
                order,
                vars,
                axis,
                body,
            } => {
                let context = format!("{} over `{axis}` in {}", order.keyword(), self.place);
                let decl =
                    self.module
                        .axis(&axis.name)
                        .ok_or_else(|| ExpandError::UnknownName {
                            kind: "axis",
                            name: axis.name.clone(),
                            context: context.clone(),
                        })?;
                let kind = match &decl.kind {
                    AxisKind::Dense(e) | AxisKind::DenseDyn(e) => CAxis::Dense(self.resolve(
                        e,
                        format!("the extent of axis `{axis}`"),
                        None,
                        false,
                    )?),
                    AxisKind::Ragged { outer, lengths } => CAxis::Ragged {
                        outer: self.resolve(
                            outer,
                            format!("the row count of axis `{axis}`"),
                            None,
                            false,
                        )?,
                        lengths: self.array(lengths, &format!("axis `{axis}`"))?,
                    },
                    AxisKind::Sparse { .. } => {
                        return Err(ExpandError::Malformed {
                            message: format!(
                                "{context}: a sparse axis is iterated with `select`, not a loop"
                            ),
                        });
                    }
                };
                if vars.len() != decl.kind.arity() {
                    return Err(ExpandError::Malformed {
                        message: format!(
                            "{context}: a {} axis binds {} loop variable(s), not {}",
                            decl.kind.keyword(),
                            decl.kind.arity(),
                            vars.len()
                        ),
                    });
                }
                let (vars, body) = self.scoped(vars, body)?;
                Ok(CStmt::Loop(Box::new(CLoop {
                    ordered: *order == LoopOrder::Sequential,
                    axis: axis.name.clone(),
                    kind,
                    vars,
                    body,
                })))
            }
            StmtKind::Select { vars, axis, body } => {
                let context = format!("select over `{axis}` in {}", self.place);
                let decl =
                    self.module
                        .axis(&axis.name)
                        .ok_or_else(|| ExpandError::UnknownName {
                            kind: "axis",
                            name: axis.name.clone(),
                            context: context.clone(),
                        })?;
                let AxisKind::Sparse {
                    outer,
                    indptr,
                    indices,
                } = &decl.kind
                else {
                    return Err(ExpandError::Malformed {
                        message: format!("{context}: `select` needs a sparse axis"),
                    });
                };
                if vars.len() != 2 {
                    return Err(ExpandError::Malformed {
                        message: format!(
                            "{context}: `select` binds 2 variables, not {}",
                            vars.len()
                        ),
                    });
                }
                let outer = self.resolve(
                    outer,
                    format!("the row count of axis `{axis}`"),
                    None,
                    false,
                )?;
                let where_ = format!("axis `{axis}`");
                let indptr = self.array(indptr, &where_)?;
                let indices = self.array(indices, &where_)?;
                let (vars, body) = self.scoped(vars, body)?;
                Ok(CStmt::Select(Box::new(CSelect {
                    axis: axis.name.clone(),
                    outer,
                    indptr,
                    indices,
                    vars,
                    body,
                })))
            }
            StmtKind::Cond {
                cond,
                then_body,
                else_body,
            } => Ok(CStmt::If {
                cond: self.expr(cond, format!("an `if` condition in {}", self.place))?,
                then_body: self.stmts(then_body)?,
                else_body: self.stmts(else_body)?,
            }),
            StmtKind::Combine(body) => Ok(CStmt::Block {
                ordered: false,
                body: self.stmts(body)?,
            }),
            StmtKind::Sequential(body) => Ok(CStmt::Block {
                ordered: true,
                body: self.stmts(body)?,
            }),
            StmtKind::Task(t) => self.task(&t.kernel, &t.args),
            StmtKind::SlotSet { slot, value } => {
                let (i, ty) = self.slot(slot)?;
                Ok(CStmt::Set {
                    slot: i,
                    name: slot.name.clone(),
                    ty,
                    value: self.expr(value, format!("`set {slot}` in {}", self.place))?,
                })
            }
            StmtKind::SlotLoad {
                slot,
                tensor,
                index,
            } => {
                let (i, ty) = self.slot(slot)?;
                let context = format!("`load {slot} = {tensor}[..]` in {}", self.place);
                let t = self.shaped(tensor, &context)?;
                self.array(tensor, &context)?;
                let rank = self.module.tensors[t as usize].shape.len();
                if index.len() != rank {
                    return Err(ExpandError::Malformed {
                        message: format!(
                            "{context}: tensor `{tensor}` has {rank} dimension(s), the index {}",
                            index.len()
                        ),
                    });
                }
                let index = index
                    .iter()
                    .enumerate()
                    .map(|(d, e)| self.expr(e, format!("index {d} of {context}")))
                    .collect::<Result<_, _>>()?;
                Ok(CStmt::Load {
                    slot: i,
                    name: slot.name.clone(),
                    ty,
                    tensor: t,
                    index,
                })
            }
            StmtKind::Call { workload, args } => {
                let context = format!("`call {workload}` in {}", self.place);
                let w = self.module.workload(&workload.name).ok_or_else(|| {
                    ExpandError::UnknownName {
                        kind: "workload",
                        name: workload.name.clone(),
                        context: context.clone(),
                    }
                })?;
                if self.call_stack.contains(&workload.name) {
                    return Err(ExpandError::Recursion {
                        chain: self
                            .call_stack
                            .iter()
                            .cloned()
                            .chain([workload.name.clone()])
                            .collect(),
                    });
                }
                if args.len() != w.params.len() {
                    return Err(ExpandError::Malformed {
                        message: format!(
                            "{context}: `{workload}` takes {} argument(s), not {}",
                            w.params.len(),
                            args.len()
                        ),
                    });
                }
                let mut cargs = Vec::new();
                for (a, (p, _)) in args.iter().zip(&w.params) {
                    cargs.push(self.expr(a, format!("argument `{p}` of {context}"))?);
                }
                // The callee sees only its own parameters and variables (plus globals).
                let saved_next = self.next_var;
                let saved_place =
                    std::mem::replace(&mut self.place, format!("workload `{workload}`"));
                self.frames.push(Vec::new());
                self.call_stack.push(workload.name.clone());
                let mut bound = Vec::new();
                for ((p, ty), a) in w.params.iter().zip(cargs) {
                    bound.push((self.bind(p), *ty, a));
                }
                let body = self.stmts(&w.body);
                self.call_stack.pop();
                self.frames.pop();
                self.place = saved_place;
                self.next_var = saved_next;
                Ok(CStmt::Call {
                    workload: workload.name.clone(),
                    args: bound,
                    body: body?,
                })
            }
            StmtKind::Send { channel, value } => {
                let ch = self.channel(channel)?;
                Ok(CStmt::Send {
                    channel: ch,
                    value: self.expr(value, format!("`send {channel}` in {}", self.place))?,
                })
            }
            StmtKind::Consume { channel, var, body } => {
                let ch = self.channel(channel)?;
                let (vars, body) = self.scoped(std::slice::from_ref(var), body)?;
                Ok(CStmt::Consume {
                    channel: ch,
                    var: vars[0],
                    body,
                })
            }
        }
    }

    fn slot(&self, slot: &Ident) -> Result<(u32, ScalarType), ExpandError> {
        match self
            .module
            .slots
            .iter()
            .position(|s| s.name.name == slot.name)
        {
            Some(i) => Ok((self.n_symbols() + i as u32, self.module.slots[i].ty)),
            None => Err(ExpandError::UnknownName {
                kind: "slot",
                name: slot.name.clone(),
                context: self.place.clone(),
            }),
        }
    }

    fn channel(&self, ch: &Ident) -> Result<u32, ExpandError> {
        self.channels
            .as_ref()
            .and_then(|m| m.get(ch.name.as_str()).copied())
            .ok_or_else(|| ExpandError::UnknownName {
                kind: "channel",
                name: ch.name.clone(),
                context: self.place.clone(),
            })
    }

    fn kernel(&self, name: &Ident, context: &str) -> Result<u32, ExpandError> {
        self.kernels
            .get(name.name.as_str())
            .copied()
            .ok_or_else(|| ExpandError::UnknownName {
                kind: "kernel",
                name: name.name.clone(),
                context: context.to_string(),
            })
    }

    fn task(&mut self, kernel: &'m Ident, args: &'m [Arg]) -> Result<CStmt, ExpandError> {
        let context = format!("task `{kernel}` in {}", self.place);
        let k = self.kernel(kernel, &context)?;
        let decl: &'m KernelDecl = &self.module.kernels[k as usize];
        if args.len() != decl.params.len() {
            return Err(ExpandError::Malformed {
                message: format!(
                    "{context}: kernel `{kernel}` takes {} argument(s), not {}",
                    decl.params.len(),
                    args.len()
                ),
            });
        }
        let mut cargs = Vec::new();
        let mut scalar_no = 0;
        for (p, a) in decl.params.iter().zip(args) {
            match (&p.kind, a) {
                (ParamKind::Scalar(ty), Arg::Scalar(e)) => {
                    cargs.push(CArg::Scalar {
                        param: p.name.name.clone(),
                        ty: ty.carrier(),
                        value: self.expr(e, format!("argument `{}`", p.name))?,
                        tier_slot: self.tier_base + scalar_no,
                    });
                    scalar_no += 1;
                }
                (ParamKind::Tile { access, .. }, Arg::Region(r)) => {
                    let t = self.shaped(&r.tensor, &context)?;
                    let rank = self.module.tensors[t as usize].shape.len();
                    if r.dims.len() != rank {
                        return Err(ExpandError::Malformed {
                            message: format!(
                                "{context}: tensor `{}` has {rank} dimension(s), the region {}",
                                r.tensor,
                                r.dims.len()
                            ),
                        });
                    }
                    let mut dims = Vec::new();
                    for (d, rd) in r.dims.iter().enumerate() {
                        let what = format!("dimension {d} of argument `{}`", p.name);
                        let start = self.expr(&rd.start, format!("the start of {what}"))?;
                        let size = match &rd.size {
                            Some(e) => Some(self.expr(e, format!("the size of {what}"))?),
                            None => None,
                        };
                        dims.push((start, size));
                    }
                    cargs.push(CArg::Region {
                        param: p.name.name.clone(),
                        tensor: t,
                        access: *access,
                        dims,
                    });
                }
                (ParamKind::Scalar(_), Arg::Region(_))
                | (ParamKind::Tile { .. }, Arg::Scalar(_)) => {
                    return Err(ExpandError::Malformed {
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
            && self.tiers[k as usize].is_none()
        {
            let t = self.compile_tiers(decl, tiers)?;
            self.tiers[k as usize] = Some(t);
        }
        let config = self.config;
        let dispatch = self.dispatch(&config.dispatch, &context)?;
        let stream_by = match &config.stream_by {
            Some(e) => Some(self.resolve(e, "the `stream_by` key", Some(true), false)?),
            None => None,
        };
        let priority_by = match &config.ready {
            ReadyPolicy::Priority(e) => {
                Some(self.resolve(e, "the `priority` key", Some(true), false)?)
            }
            ReadyPolicy::Fifo | ReadyPolicy::WorkSteal => None,
        };
        let cost_by = match &config.trace {
            TracePolicy::Cycles(Some(e)) => {
                Some(self.resolve(e, "the `cycles` cost", Some(true), false)?)
            }
            TracePolicy::Cycles(None) | TracePolicy::None | TracePolicy::Wall => None,
        };
        let pool_by = match &config.dispatch_threshold {
            Some(l) => Some(CLevels {
                metric: self.resolve(
                    &l.metric,
                    "the `dispatch_threshold` metric",
                    Some(true),
                    false,
                )?,
                levels: l.levels.clone(),
                otherwise: *l.otherwise,
            }),
            None => None,
        };
        Ok(CStmt::Task(Box::new(CTask {
            kernel: k,
            args: cargs,
            dispatch,
            stream_by,
            pool_by,
            priority_by,
            cost_by,
        })))
    }

    fn compile_tiers(
        &mut self,
        decl: &'m KernelDecl,
        tiers: &'m Tiers,
    ) -> Result<CTiers, ExpandError> {
        let context = format!("the tiers of kernel `{}`", decl.name);
        let params: Vec<(&str, u32)> = scalar_params(decl)
            .enumerate()
            .map(|(i, n)| (n, self.tier_base + i as u32))
            .collect();
        let mut cases = Vec::new();
        for (cond, variant) in &tiers.cases {
            let saved = std::mem::replace(&mut self.frames, vec![params.clone()]);
            let c = self.resolve(cond, format!("a condition of {context}"), Some(false), true);
            self.frames = saved;
            cases.push((c?, self.kernel(variant, &context)?));
        }
        Ok(CTiers {
            cases,
            default: self.kernel(&tiers.default, &context)?,
        })
    }

    fn dispatch(&mut self, d: &Dispatch, context: &str) -> Result<CDispatch, ExpandError> {
        Ok(match d {
            Dispatch::RoundRobin(0) => {
                return Err(ExpandError::BadSchedule {
                    message: "round_robin(0): the executor count must be at least 1".into(),
                });
            }
            Dispatch::RoundRobin(n) => CDispatch::RoundRobin(*n),
            Dispatch::Affinity(e) => CDispatch::Affinity(self.resolve(
                e,
                format!("the `affinity` key at {context}"),
                Some(true),
                false,
            )?),
            Dispatch::Hash(e) => CDispatch::Hash(self.resolve(
                e,
                format!("the `hash` key at {context}"),
                Some(true),
                false,
            )?),
            Dispatch::Threshold(Levels {
                metric,
                levels,
                otherwise,
            }) => {
                let metric = self.resolve(
                    metric,
                    format!("the `threshold` metric at {context}"),
                    Some(true),
                    false,
                )?;
                let mut ls = Vec::new();
                for (b, d) in levels {
                    ls.push((*b, self.dispatch(d, context)?));
                }
                CDispatch::Threshold(Box::new(CLevels {
                    metric,
                    levels: ls,
                    otherwise: self.dispatch(otherwise, context)?,
                }))
            }
            Dispatch::StaticPartition(starts) => {
                if starts.first() != Some(&0) {
                    return Err(ExpandError::BadSchedule {
                        message: "static_partition must start at 0".into(),
                    });
                }
                CDispatch::StaticPartition(starts.clone())
            }
            Dispatch::WorkSteal => CDispatch::WorkSteal,
        })
    }
}

fn scalar_params(k: &KernelDecl) -> impl Iterator<Item = &str> {
    k.params.iter().filter_map(|p| match p.kind {
        ParamKind::Scalar(_) => Some(p.name.name.as_str()),
        ParamKind::Tile { .. } => None,
    })
}
