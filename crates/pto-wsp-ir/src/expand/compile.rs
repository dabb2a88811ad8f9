//! The resolved entry point made runnable: compiled expressions and the bound environment.
//!
//! Why: resolution (names, calls, types, schedule keys, static checks) is shared with every
//! other consumer ([`crate::resolve`]); what is the expander's own is evaluating fast — each
//! expression compiled once into a flat [`Compiled`] form over one environment of values
//! (`[symbols][slots][variables][tier arguments]`) — and the up-front binding checks: every
//! symbol the entry can read and every integer tensor it reads must be bound, with the declared
//! type, and every tensor shape it needs must evaluate to non-negative extents.
//!
//! Promise: never panics on a module [`crate::resolve::resolve`] accepted, whatever the bindings;
//! every failure is an [`ExpandError`].

use super::ExpandError;
use crate::eval::Compiled;
use crate::module::{Module, ParamKind};
use crate::resolve::{
    ExprId, ResolveOptions, Resolved, array_value, resolve, slot_value, symbol_value,
};
use crate::value::{Bindings, Value};

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
    /// The resolved entry point (its expression descriptions moved to `exprs`).
    pub res: Resolved<'m>,
    /// Every expression of `res`, compiled, by [`ExprId`].
    pub exprs: Vec<CExpr>,
    /// The initial environment: symbol values, initial slot values, zeros.
    pub env: Vec<Value>,
    /// Where a tiered task's scalar arguments go for its tier conditions.
    pub tier_base: u32,
    /// Evaluated shape of every tensor a region or `load` uses (empty for others).
    pub shapes: Vec<Vec<i64>>,
    /// Bound contents of every integer tensor the entry reads (`None` for others).
    pub arrays: Vec<Option<&'m [i64]>>,
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

/// Resolves `module`'s entry point and binds it to `bindings`.
pub(super) fn compile<'m>(
    module: &'m Module,
    bindings: &'m Bindings,
    executors_override: Option<u64>,
) -> Result<Program<'m>, ExpandError> {
    let mut res = resolve(
        module,
        &ResolveOptions {
            executors: executors_override,
        },
    )?;
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
        .iter_mut()
        .map(|e| CExpr {
            code: Compiled::from_typed(&e.expr, tier_base),
            what: std::mem::take(&mut e.what),
        })
        .collect();

    // Bindings: every symbol the program reads, every array it reads.
    let mut env = vec![Value::I64(0); tier_base as usize + tier_scratch];
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
    let mut arrays = vec![None; module.tensors.len()];
    for (i, t) in module.tensors.iter().enumerate() {
        if res.arrays[i] {
            let data = array_value(|| t.name.name.clone(), bindings.arrays.get(&t.name.name))?;
            arrays[i] = Some(data.as_slice());
        }
    }
    let mut shapes = vec![Vec::new(); module.tensors.len()];
    for (i, t) in module.tensors.iter().enumerate() {
        if let Some(dims) = &res.shapes[i] {
            let mut shape = Vec::with_capacity(dims.len());
            for (d, id) in dims.iter().enumerate() {
                let e = &exprs[id.index()];
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
    let executors = res.schedule.executors;
    let streams = res.schedule.streams;
    Ok(Program {
        module,
        res,
        exprs,
        env,
        tier_base,
        shapes,
        arrays,
        executors,
        streams,
    })
}
