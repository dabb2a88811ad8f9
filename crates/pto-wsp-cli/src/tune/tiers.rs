//! The tier bounds `pto-wsp tune` moves: every comparison of a kernel's `tiers` condition that
//! sets a parameter against a bound, in any form the format allows.
//!
//! Why: a tier condition is any boolean expression of the kernel's scalar parameters and the
//! symbols (`seq <= 2048`, `2048 >= seq`, `seq < maxlen / 4`, `seq > 512 && seq <= 8192`); the
//! bound that picks a variant is a schedule choice like a dispatch threshold.
//!
//! Promises:
//! - A **movable comparison** ([`leaves`]) is a `<`, `<=`, `>` or `>=` reached from the
//!   condition's top through `&&`, `||` and `!`, one of whose operands names a scalar parameter
//!   of the kernel (the *side*, any expression of them) and the other names none (the *bound*:
//!   literals and symbols). `==`, `!=`, conditions under `? :` and comparisons of two
//!   parameter expressions are left as written.
//! - Its candidate bounds are the real cuts ([`super::cuts`]) of the values the side takes over
//!   the module's tasks of that kernel, each written as a literal in the bound's place (on the
//!   side it was written, with the operator as written; unsigned when the side is `u64`), after
//!   the module's own bound; a cut putting the same tasks on each side as the module's own bound
//!   is left out.
//! - An edit ([`TierEdit`]) replaces one comparison, found by its path, so several comparisons
//!   of one condition are moved independently.

use std::collections::BTreeMap;

use pto_wsp::ir::{BinOp, Expr, KernelDecl, Module, ParamKind, UnOp, Value as Scalar};

/// One tier edit: kernel `kernel`'s case `case`, the comparison at `path` replaced by `leaf`.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct TierEdit {
    pub(super) kernel: usize,
    pub(super) case: usize,
    /// Operand indices from the condition's top to the comparison.
    pub(super) path: Vec<usize>,
    pub(super) leaf: Expr,
}

/// A movable comparison of a tier condition (see the module docs).
#[derive(Clone, Debug)]
pub(super) struct Leaf {
    pub(super) kernel: usize,
    pub(super) case: usize,
    pub(super) path: Vec<usize>,
    /// The comparison as written.
    pub(super) written: Expr,
    /// The operator read as `side OP bound` (flipped when the bound is on the left).
    pub(super) op: BinOp,
    /// Whether the bound is the left operand.
    pub(super) bound_left: bool,
    /// The operand naming parameters.
    pub(super) side: Expr,
    /// The operand naming none.
    pub(super) bound: Expr,
}

/// `op` with its operands swapped: `a OP b` is `b flip(OP) a`.
fn flip(op: BinOp) -> BinOp {
    match op {
        BinOp::Lt => BinOp::Gt,
        BinOp::Le => BinOp::Ge,
        BinOp::Gt => BinOp::Lt,
        BinOp::Ge => BinOp::Le,
        other => other,
    }
}

/// Whether `e` names one of `params`.
fn names_any(e: &Expr, params: &[&str]) -> bool {
    match e {
        Expr::Name(n) => params.contains(&n.name.as_str()),
        Expr::Unary(_, a) => names_any(a, params),
        Expr::Binary(_, a, b) => names_any(a, params) || names_any(b, params),
        Expr::Ternary(a, b, c) => [a, b, c].iter().any(|x| names_any(x, params)),
        _ => false,
    }
}

/// The scalar parameters of `decl`, in order.
fn scalars(decl: &KernelDecl) -> Vec<&str> {
    decl.params
        .iter()
        .filter(|q| matches!(q.kind, ParamKind::Scalar(_)))
        .map(|q| q.name.name.as_str())
        .collect()
}

/// Every movable comparison of every tier condition of `module`'s kernels, in declaration
/// order.
pub(super) fn leaves(module: &Module) -> Vec<Leaf> {
    let mut out = Vec::new();
    for (k, d) in module.kernels.iter().enumerate() {
        let params = scalars(d);
        for (c, (cond, _)) in d.tiers.iter().flat_map(|t| t.cases.iter().enumerate()) {
            walk(cond, &mut Vec::new(), &mut |path, e| {
                if let Some(l) = leaf(k, c, path, e, &params) {
                    out.push(l);
                }
            });
        }
    }
    out
}

/// Calls `f` with each comparison reached through `&&`, `||` and `!`, and its path.
fn walk(e: &Expr, path: &mut Vec<usize>, f: &mut impl FnMut(&[usize], &Expr)) {
    match e {
        Expr::Binary(BinOp::And | BinOp::Or, a, b) => {
            for (i, x) in [a, b].into_iter().enumerate() {
                path.push(i);
                walk(x, path, f);
                path.pop();
            }
        }
        Expr::Unary(UnOp::Not, a) => {
            path.push(0);
            walk(a, path, f);
            path.pop();
        }
        _ => f(path, e),
    }
}

fn leaf(k: usize, c: usize, path: &[usize], e: &Expr, params: &[&str]) -> Option<Leaf> {
    let Expr::Binary(op @ (BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge), l, r) = e else {
        return None;
    };
    let (bound_left, side, bound) = match (names_any(l, params), names_any(r, params)) {
        (true, false) => (false, l, r),
        (false, true) => (true, r, l),
        _ => return None,
    };
    Some(Leaf {
        kernel: k,
        case: c,
        path: path.to_vec(),
        written: e.clone(),
        op: if bound_left { flip(*op) } else { *op },
        bound_left,
        side: (**side).clone(),
        bound: (**bound).clone(),
    })
}

/// The comparison at `path` in `cond` (as [`walk`] numbers operands).
pub(super) fn at_mut<'e>(cond: &'e mut Expr, path: &[usize]) -> Option<&'e mut Expr> {
    let Some((&first, rest)) = path.split_first() else {
        return Some(cond);
    };
    match cond {
        Expr::Binary(BinOp::And | BinOp::Or, a, b) => at_mut(if first == 0 { a } else { b }, rest),
        Expr::Unary(UnOp::Not, a) if first == 0 => at_mut(a, rest),
        _ => None,
    }
}

/// A scalar as an integer (`u64` saturated, `bool` as 0 / 1).
fn int(v: Scalar) -> i64 {
    match v {
        Scalar::I64(x) => x,
        Scalar::U64(x) => i64::try_from(x).unwrap_or(i64::MAX),
        Scalar::Bool(b) => i64::from(b),
    }
}

/// What one comparison's side took over the tasks, and whether it is unsigned.
#[derive(Default)]
pub(super) struct Seen {
    pub(super) values: Vec<i64>,
    pub(super) unsigned: bool,
}

/// Records, for each leaf of kernel `declared`, the value its side takes at a task with scalar
/// arguments `params` (in order) under `symbols`.
pub(super) fn observe(
    leaves: &[Leaf],
    module: &Module,
    declared: usize,
    params: &[Scalar],
    symbols: &BTreeMap<String, Scalar>,
    seen: &mut [Seen],
) {
    for (l, s) in leaves.iter().zip(seen) {
        if l.kernel != declared {
            continue;
        }
        let names = scalars(&module.kernels[declared]);
        let env = |n: &str| {
            names
                .iter()
                .position(|p| *p == n)
                .and_then(|i| params.get(i).copied())
                .or_else(|| symbols.get(n).copied())
        };
        if let Ok(v) = pto_wsp::ir::eval::eval(&l.side, &env) {
            s.unsigned |= matches!(v, Scalar::U64(_));
            s.values.push(int(v));
        }
    }
}

/// How many of `values` satisfy `x OP bound`.
fn below(values: &[i64], op: BinOp, bound: i64) -> usize {
    values
        .iter()
        .filter(|&&x| match op {
            BinOp::Lt => x < bound,
            BinOp::Le => x <= bound,
            BinOp::Gt => x > bound,
            _ => x >= bound,
        })
        .count()
}

/// The edits of one leaf: the module's own comparison first, then one per cut of `seen`'s
/// values that splits the tasks differently from the module's bound (its value under
/// `symbols`).
pub(super) fn edits(l: &Leaf, seen: &Seen, symbols: &BTreeMap<String, Scalar>) -> Vec<TierEdit> {
    let edit = |leaf: Expr| TierEdit {
        kernel: l.kernel,
        case: l.case,
        path: l.path.clone(),
        leaf,
    };
    let own = pto_wsp::ir::eval::eval(&l.bound, symbols)
        .ok()
        .map(|v| below(&seen.values, l.op, int(v)));
    let mut out = vec![edit(l.written.clone())];
    let Expr::Binary(op, _, _) = &l.written else {
        return out;
    };
    let lit = |v: i64| {
        if seen.unsigned {
            Expr::UInt(v.max(0) as u64)
        } else {
            Expr::Int(v)
        }
    };
    for v in super::cuts(&seen.values, l.op) {
        if Some(below(&seen.values, l.op, v)) == own {
            continue;
        }
        let (a, b) = if l.bound_left {
            (lit(v), l.side.clone())
        } else {
            (l.side.clone(), lit(v))
        };
        out.push(edit(Expr::Binary(*op, Box::new(a), Box::new(b))));
    }
    out
}
