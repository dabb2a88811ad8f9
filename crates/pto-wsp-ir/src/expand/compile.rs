//! The resolved entry point made runnable: compiled expressions and the bound environment.
//!
//! Why: resolution (names, calls, types, schedule keys, static checks) is shared with every
//! other consumer ([`crate::resolve`](mod@crate::resolve)); what is the expander's own is evaluating fast — each
//! expression compiled once into a flat [`Compiled`] form over one environment of values
//! (`[symbols][slots][variables][tier arguments]`) — and the up-front binding checks: every
//! symbol the entry can read and every integer tensor it reads must be bound, with the declared
//! type, and every tensor shape it needs must evaluate to non-negative extents.
//!
//! Promise: never panics on a program [`crate::resolve::resolve`] made, whatever the bindings;
//! every failure is an [`ExpandError`]. The resolved program is read, never resolved again.

use super::ExpandError;
use crate::eval::Compiled;
use crate::module::{Module, ParamKind};
use crate::resolve::{
    ExprId, Resolved, StmtKind, TaskArg, array_value, check_count, slot_value, symbol_value,
};
use crate::types::{Access, ScalarType};
use crate::value::{Bindings, Value};

/// An expression with the description used when its evaluation fails.
#[derive(Clone, Debug)]
pub(super) struct CExpr {
    pub code: Compiled,
    pub what: String,
}

/// A task statement's expressions, inline (the per-task path reads nothing else).
#[derive(Debug, Default)]
pub(super) struct CTask {
    /// Per parameter, in order.
    pub args: Vec<CArg>,
    /// The dispatch policy's keys, by slot.
    pub dispatch_keys: Vec<CExpr>,
    pub stream_by: Option<CExpr>,
    pub pool_by: Option<CExpr>,
    pub priority_by: Option<CExpr>,
    pub cost_by: Option<CExpr>,
}

/// A task argument.
#[derive(Debug)]
pub(super) enum CArg {
    Scalar {
        value: CExpr,
        /// Its static type.
        ty: ScalarType,
        /// Where tier conditions read it.
        tier_slot: u32,
        /// The parameter's index.
        param: u32,
    },
    Region {
        /// The parameter's index.
        param: u32,
        tensor: u32,
        access: Access,
        /// (start, size) per dimension; no size means 1.
        dims: Vec<(CExpr, Option<CExpr>)>,
    },
}

/// The resolved entry point and everything the run needs.
#[derive(Debug)]
pub(super) struct Program<'m> {
    pub module: &'m Module,
    /// The resolved entry point.
    pub res: &'m Resolved,
    /// Every expression of `res`, compiled, by [`ExprId`].
    pub exprs: Vec<CExpr>,
    /// Every task statement's expressions, by [`crate::resolve::Task::id`].
    pub tasks: Vec<CTask>,
    /// The initial environment: symbol values, initial slot values, zeros.
    pub env: Vec<Value>,
    /// Evaluated shape of every tensor a region or `load` uses (empty for others).
    pub shapes: Vec<Vec<i64>>,
    /// Bound contents of every integer tensor the entry reads (`None` for others, and for
    /// computed ones).
    pub arrays: Vec<Option<&'m [i64]>>,
    /// Per tensor: whether its reads are computed reads, served by the sink
    /// ([`super::ExpandSink::read`]) instead of the bindings.
    pub computed: Vec<bool>,
    /// Executors targets range over.
    pub executors: u64,
    /// Streams.
    pub streams: u64,
}

impl Program<'_> {
    /// Compiled expression `id`.
    #[inline]
    pub(super) fn x(&self, id: ExprId) -> &CExpr {
        &self.exprs[id.index()]
    }
}

/// Binds the resolved entry point `res` to `bindings` (`executors_override`: the executor count
/// dispatch targets range over, instead of the schedule's).
pub(super) fn compile<'m>(
    res: &'m Resolved,
    bindings: &'m Bindings,
    executors_override: Option<u64>,
) -> Result<Program<'m>, ExpandError> {
    let module = &res.module;
    if let Some(n) = executors_override {
        check_count("executors", n)?;
    }
    let tier_base = res.regs.len() as u32;
    let tier_scratch = module
        .kernels
        .iter()
        .map(|k| {
            k.params
                .iter()
                .filter(|p| matches!(p.kind, ParamKind::Scalar(_)))
                .count()
        })
        .max()
        .unwrap_or(0);
    let exprs: Vec<CExpr> = res
        .exprs
        .iter()
        .map(|e| CExpr {
            code: Compiled::from_typed(&e.expr, tier_base),
            what: e.what.clone(),
        })
        .collect();
    let tasks = compile_tasks(res, &exprs, tier_base);
    // Bindings: every symbol the program reads, every array it reads.
    let env = bind_env(module, res, bindings, tier_base as usize + tier_scratch)?;
    let (arrays, computed) = bind_arrays(module, res, bindings)?;
    let shapes = shapes(module, res, &exprs, &env)?;
    let executors = executors_override.unwrap_or(res.schedule.executors);
    let streams = res.schedule.streams;
    Ok(Program {
        module,
        res,
        exprs,
        tasks,
        env,
        shapes,
        arrays,
        computed,
        executors,
        streams,
    })
}

/// Every task statement's arguments and schedule keys as compiled expressions, by task id.
fn compile_tasks(res: &Resolved, exprs: &[CExpr], tier_base: u32) -> Vec<CTask> {
    let mut tasks: Vec<Option<CTask>> = (0..res.n_tasks).map(|_| None).collect();
    let sched = &res.schedule;
    res.each_stmt(&mut |s| {
        if let StmtKind::Task(t) = &s.kind {
            let x = |id: &ExprId| exprs[id.index()].clone();
            let key = |slot: Option<usize>| slot.and_then(|i| t.keys.get(i)).map(x);
            let mut tier_slot = tier_base;
            let task = CTask {
                args: t
                    .args
                    .iter()
                    .zip(0..)
                    .map(|(a, param)| match a {
                        TaskArg::Scalar(e) => {
                            tier_slot += 1;
                            CArg::Scalar {
                                value: x(e),
                                ty: res.exprs[e.index()].expr.ty(),
                                tier_slot: tier_slot - 1,
                                param,
                            }
                        }
                        TaskArg::Region {
                            tensor,
                            access,
                            dims,
                        } => CArg::Region {
                            param,
                            tensor: tensor.0,
                            access: *access,
                            dims: dims
                                .iter()
                                .map(|(s, z)| (x(s), z.as_ref().map(x)))
                                .collect(),
                        },
                    })
                    .collect(),
                dispatch_keys: t.keys.iter().take(sched.n_dispatch_keys).map(x).collect(),
                stream_by: key(sched.stream_slot()),
                pool_by: key(sched.pool_slot()),
                priority_by: key(sched.priority_slot()),
                cost_by: key(sched.cost_slot()),
            };
            if let Some(slot) = tasks.get_mut(t.id as usize) {
                *slot = Some(task);
            }
        }
    });
    tasks.into_iter().map(Option::unwrap_or_default).collect()
}

/// The register file's initial values (`len` registers): symbols and slots from `bindings`,
/// every other register zero of its type.
fn bind_env(
    module: &Module,
    res: &Resolved,
    bindings: &Bindings,
    len: usize,
) -> Result<Vec<Value>, ExpandError> {
    let mut env = vec![Value::I64(0); len];
    for (i, ty) in res.regs.iter().enumerate() {
        env[i] = Value::zero(*ty);
    }
    for (i, sym) in module.symbols.iter().enumerate() {
        env[i] = symbol_value(
            || sym.name.name.clone(),
            sym.ty,
            res.symbols_used[i],
            bindings.symbols.get(&sym.name.name).copied(),
        )?;
    }
    for (i, slot) in module.slots.iter().enumerate() {
        env[module.symbols.len() + i] = slot_value(
            || slot.name.name.clone(),
            slot.ty,
            bindings.slots.get(&slot.name.name).copied(),
        )?;
    }
    Ok(env)
}

/// Each tensor's bound contents, if the program reads them.
type Arrays<'m> = Vec<Option<&'m [i64]>>;

/// The bound contents of every array the program reads, and which tensors are computed (read
/// and written by the program, so read through the sink).
fn bind_arrays<'m>(
    module: &Module,
    res: &Resolved,
    bindings: &'m Bindings,
) -> Result<(Arrays<'m>, Vec<bool>), ExpandError> {
    let mut arrays = vec![None; module.tensors.len()];
    let mut computed = vec![false; module.tensors.len()];
    for (i, t) in module.tensors.iter().enumerate() {
        if res.arrays[i] && res.written[i] {
            computed[i] = true;
        } else if res.arrays[i] {
            let data = array_value(
                || t.name.name.clone(),
                res.array_reads[i],
                bindings.arrays.get(&t.name.name),
            )?;
            arrays[i] = Some(data.as_slice());
        }
    }
    Ok((arrays, computed))
}

/// Every tensor's shape, evaluated over the bound symbols.
fn shapes(
    module: &Module,
    res: &Resolved,
    exprs: &[CExpr],
    env: &[Value],
) -> Result<Vec<Vec<i64>>, ExpandError> {
    let mut shapes = vec![Vec::new(); module.tensors.len()];
    for (i, t) in module.tensors.iter().enumerate() {
        if let Some(dims) = &res.shapes[i] {
            let mut shape = Vec::with_capacity(dims.len());
            for (d, id) in dims.iter().enumerate() {
                let e = &exprs[id.index()];
                let v = super::run::int(&e.what, e.code.eval(env))?;
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
    Ok(shapes)
}
