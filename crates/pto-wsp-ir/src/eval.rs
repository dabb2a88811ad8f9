//! Scalar expression evaluation.
//!
//! Why: every number the expander and the back ends compute — loop extents, region starts and
//! sizes, task parameters, conditions, dispatch and stream keys — is an [`Expr`] evaluated under
//! some bindings, and they must all agree on what an expression means, including when it fails.
//!
//! Promises:
//! - Values are typed (`bool`, `i64`, `u64`) with no implicit conversion; applying an operator to
//!   operands of the wrong types is an [`EvalError::TypeMismatch`], never a guess.
//! - Arithmetic is checked: overflow (including `i64::MIN / -1` and `i64::MIN % -1`, which Rust's
//!   `checked_*` operations reject) and division or remainder by zero are errors naming the
//!   operator. `/` truncates toward zero; `%` has the sign of the dividend.
//! - `&&`, `||` and `?:` evaluate lazily: the right operand of `&&` (`||`) is evaluated only when
//!   the left is `true` (`false`), and only the chosen arm of a ternary is evaluated, so
//!   `x != 0 && 10 / x > 1` never divides by zero.
//! - Nothing here panics on any input.
//!
//! Two forms: [`eval`] walks an [`Expr`] and looks names up through an [`Env`] (simple, for
//! occasional use); [`Compiled`] is an expression *resolved* once — names replaced by indices into
//! a flat slice of values and constant subexpressions folded — for evaluating many times, as the
//! expander does per task.

use crate::expr::{BinOp, Expr, UnOp};
use crate::types::ScalarType;
use crate::value::Value;
use std::collections::{BTreeMap, HashMap};
use std::fmt;

/// Why an expression could not be evaluated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    /// A name that the environment does not bind.
    #[error("`{name}` is not bound")]
    Unbound {
        /// The name.
        name: String,
    },
    /// An operator applied to operands of types it does not accept.
    #[error("{}", type_mismatch_message(op, left, right))]
    TypeMismatch {
        /// The operator's spelling (`+`, `min`, `!`, `?:`).
        op: &'static str,
        /// Type of the (left) operand.
        left: ScalarType,
        /// Type of the right operand, for binary operators.
        right: Option<ScalarType>,
    },
    /// The result does not fit its type.
    #[error("overflow in `{op}` ({})", operands(lhs, rhs))]
    Overflow {
        /// The operator's spelling.
        op: &'static str,
        /// The (left) operand.
        lhs: Value,
        /// The right operand, for binary operators.
        rhs: Option<Value>,
    },
    /// `/` or `%` with a zero divisor.
    #[error("division by zero in `{op}` ({lhs} {op} 0)")]
    DivisionByZero {
        /// `/` or `%`.
        op: &'static str,
        /// The dividend.
        lhs: Value,
    },
}

fn type_mismatch_message(op: &str, left: &ScalarType, right: &Option<ScalarType>) -> String {
    match (op, right) {
        ("?:", _) => format!("the condition of `?:` must be bool, not {left}"),
        (_, Some(r)) => format!("operator `{op}` cannot be applied to {left} and {r}"),
        (_, None) => format!("operator `{op}` cannot be applied to {left}"),
    }
}

fn operands(lhs: &Value, rhs: &Option<Value>) -> String {
    match rhs {
        Some(r) => format!("operands {lhs} and {r}"),
        None => format!("operand {lhs}"),
    }
}

/// Something that gives names their values, for [`eval`].
pub trait Env {
    /// The value bound to `name`, if any.
    fn lookup(&self, name: &str) -> Option<Value>;
}

impl<F: Fn(&str) -> Option<Value>> Env for F {
    fn lookup(&self, name: &str) -> Option<Value> {
        self(name)
    }
}

impl Env for BTreeMap<String, Value> {
    fn lookup(&self, name: &str) -> Option<Value> {
        self.get(name).copied()
    }
}

impl Env for HashMap<String, Value> {
    fn lookup(&self, name: &str) -> Option<Value> {
        self.get(name).copied()
    }
}

/// Evaluates `expr`, looking names up in `env`.
pub fn eval(expr: &Expr, env: &impl Env) -> Result<Value, EvalError> {
    match expr {
        Expr::Int(v) => Ok(Value::I64(*v)),
        Expr::UInt(v) => Ok(Value::U64(*v)),
        Expr::Float(v) => Ok(Value::U64(v.bits())),
        Expr::Bool(b) => Ok(Value::Bool(*b)),
        Expr::Name(id) => env.lookup(&id.name).ok_or_else(|| EvalError::Unbound {
            name: id.name.clone(),
        }),
        Expr::Unary(op, a) => unary(*op, eval(a, env)?),
        Expr::Binary(..) => {
            let (first, rest) = expr.left_spine();
            let mut acc = eval(first, env)?;
            for (op, b) in rest {
                acc = match short_circuit(op, acc)? {
                    Some(v) => v,
                    None => binary(op, acc, eval(b, env)?)?,
                };
            }
            Ok(acc)
        }
        Expr::Ternary(c, a, b) => {
            if condition(eval(c, env)?)? {
                eval(a, env)
            } else {
                eval(b, env)
            }
        }
    }
}

fn condition(v: Value) -> Result<bool, EvalError> {
    match v {
        Value::Bool(b) => Ok(b),
        Value::I64(_) | Value::U64(_) => Err(EvalError::TypeMismatch {
            op: "?:",
            left: v.ty(),
            right: None,
        }),
    }
}

/// For `&&` / `||`: the result if the left operand decides it (checking that it is a bool).
fn short_circuit(op: BinOp, a: Value) -> Result<Option<Value>, EvalError> {
    let decisive = match op {
        BinOp::And => false,
        BinOp::Or => true,
        BinOp::Add
        | BinOp::Sub
        | BinOp::Mul
        | BinOp::Div
        | BinOp::Rem
        | BinOp::Min
        | BinOp::Max
        | BinOp::Eq
        | BinOp::Ne
        | BinOp::Lt
        | BinOp::Le
        | BinOp::Gt
        | BinOp::Ge => return Ok(None),
    };
    match a {
        Value::Bool(b) if b == decisive => Ok(Some(Value::Bool(b))),
        Value::Bool(_) => Ok(None),
        Value::I64(_) | Value::U64(_) => Err(EvalError::TypeMismatch {
            op: op.symbol(),
            left: a.ty(),
            right: None,
        }),
    }
}

/// Applies a unary operator.
pub fn unary(op: UnOp, a: Value) -> Result<Value, EvalError> {
    let overflow = || EvalError::Overflow {
        op: "-",
        lhs: a,
        rhs: None,
    };
    match (op, a) {
        (UnOp::Neg, Value::I64(v)) => v.checked_neg().map(Value::I64).ok_or_else(overflow),
        (UnOp::Neg, Value::U64(v)) => v.checked_neg().map(Value::U64).ok_or_else(overflow),
        (UnOp::Not, Value::Bool(b)) => Ok(Value::Bool(!b)),
        (UnOp::Neg, Value::Bool(_)) | (UnOp::Not, Value::I64(_) | Value::U64(_)) => {
            Err(EvalError::TypeMismatch {
                op: match op {
                    UnOp::Neg => "-",
                    UnOp::Not => "!",
                },
                left: a.ty(),
                right: None,
            })
        }
    }
}

/// Applies a binary operator to two evaluated operands (`&&` and `||` included, without short
/// circuit: both operands are already values).
pub fn binary(op: BinOp, a: Value, b: Value) -> Result<Value, EvalError> {
    let mismatch = || EvalError::TypeMismatch {
        op: op.symbol(),
        left: a.ty(),
        right: Some(b.ty()),
    };
    let overflow = || EvalError::Overflow {
        op: op.symbol(),
        lhs: a,
        rhs: Some(b),
    };
    let by_zero = || EvalError::DivisionByZero {
        op: op.symbol(),
        lhs: a,
    };
    match op {
        BinOp::Add
        | BinOp::Sub
        | BinOp::Mul
        | BinOp::Div
        | BinOp::Rem
        | BinOp::Min
        | BinOp::Max => match (a, b) {
            (Value::I64(x), Value::I64(y)) => {
                if y == 0 && matches!(op, BinOp::Div | BinOp::Rem) {
                    return Err(by_zero());
                }
                arith_i64(op, x, y).map(Value::I64).ok_or_else(overflow)
            }
            (Value::U64(x), Value::U64(y)) => {
                if y == 0 && matches!(op, BinOp::Div | BinOp::Rem) {
                    return Err(by_zero());
                }
                arith_u64(op, x, y).map(Value::U64).ok_or_else(overflow)
            }
            _ => Err(mismatch()),
        },
        BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
            if a.ty() != b.ty() {
                return Err(mismatch());
            }
            // Values of one type order like their payloads (`false < true`).
            let ord = a.cmp(&b);
            let r = match op {
                BinOp::Eq => ord.is_eq(),
                BinOp::Ne => ord.is_ne(),
                BinOp::Lt => ord.is_lt(),
                BinOp::Le => ord.is_le(),
                BinOp::Gt => ord.is_gt(),
                BinOp::Ge => ord.is_ge(),
                // Not reached: the enclosing arm only holds comparisons.
                BinOp::Add
                | BinOp::Sub
                | BinOp::Mul
                | BinOp::Div
                | BinOp::Rem
                | BinOp::Min
                | BinOp::Max
                | BinOp::And
                | BinOp::Or => return Err(mismatch()),
            };
            Ok(Value::Bool(r))
        }
        BinOp::And | BinOp::Or => match (a, b) {
            (Value::Bool(x), Value::Bool(y)) => {
                Ok(Value::Bool(if op == BinOp::And { x && y } else { x || y }))
            }
            _ => Err(mismatch()),
        },
    }
}

/// Checked integer arithmetic of one type; `None` on overflow, division by zero, or an operator
/// that is not arithmetic.
macro_rules! checked_arith {
    ($name:ident, $t:ty) => {
        fn $name(op: BinOp, x: $t, y: $t) -> Option<$t> {
            match op {
                BinOp::Add => x.checked_add(y),
                BinOp::Sub => x.checked_sub(y),
                BinOp::Mul => x.checked_mul(y),
                BinOp::Div => x.checked_div(y),
                BinOp::Rem => x.checked_rem(y),
                BinOp::Min => Some(x.min(y)),
                BinOp::Max => Some(x.max(y)),
                BinOp::Eq
                | BinOp::Ne
                | BinOp::Lt
                | BinOp::Le
                | BinOp::Gt
                | BinOp::Ge
                | BinOp::And
                | BinOp::Or => None,
            }
        }
    };
}
checked_arith!(arith_i64, i64);
checked_arith!(arith_u64, u64);

/// One node of a [`Compiled`] expression; children are indices of earlier nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Node {
    Const(Value),
    Var(u32),
    Unary(UnOp, u32),
    Binary(BinOp, u32, u32),
    Ternary(u32, u32, u32),
}

/// An expression resolved against a flat environment: names are indices into a `&[Value]`, and
/// constant subexpressions that evaluate without error are folded. Evaluating it gives exactly
/// what [`eval`] gives on the original expression with the same bindings.
#[derive(Clone, PartialEq, Eq)]
pub struct Compiled {
    /// Nodes in post-order; the root is the last one.
    nodes: Box<[Node]>,
    /// A shortcut for the most common shapes, tried before walking `nodes`.
    fast: Fast,
}

/// Shapes of expression evaluated without walking the tree. Each gives the same value as the
/// tree when it applies, and declines (falls back to the tree, which reports the exact error)
/// when an operand has another type or the arithmetic overflows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fast {
    None,
    Const(Value),
    Var(u32),
    /// `var * mul + add` over `i64` (`h * 128`, `t * 32 + 16`, `i + 1`).
    Affine {
        var: u32,
        mul: i64,
        add: i64,
    },
}

impl Fast {
    fn of(nodes: &[Node]) -> Fast {
        let node = |i: u32| nodes.get(i as usize).copied();
        let int = |i: u32| match node(i) {
            Some(Node::Const(Value::I64(v))) => Some(v),
            _ => None,
        };
        // `var * mul` (either operand order) or a bare variable.
        let scaled = |i: u32| match node(i)? {
            Node::Var(v) => Some((v, 1)),
            Node::Binary(BinOp::Mul, a, b) => match (node(a)?, node(b)?) {
                (Node::Var(v), Node::Const(Value::I64(m)))
                | (Node::Const(Value::I64(m)), Node::Var(v)) => Some((v, m)),
                _ => None,
            },
            _ => None,
        };
        match nodes.last() {
            Some(Node::Const(v)) => Fast::Const(*v),
            Some(Node::Var(v)) => Fast::Var(*v),
            Some(Node::Binary(BinOp::Mul, ..)) => match scaled(nodes.len() as u32 - 1) {
                Some((var, mul)) => Fast::Affine { var, mul, add: 0 },
                None => Fast::None,
            },
            Some(Node::Binary(op @ (BinOp::Add | BinOp::Sub), a, b)) => {
                let k = match (op, int(*b)) {
                    (BinOp::Add, Some(k)) => Some(k),
                    (BinOp::Sub, Some(k)) => k.checked_neg(),
                    _ => None,
                };
                match (scaled(*a), k) {
                    (Some((var, mul)), Some(add)) => Fast::Affine { var, mul, add },
                    _ => Fast::None,
                }
            }
            _ => Fast::None,
        }
    }
}

impl fmt::Debug for Compiled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.nodes.iter()).finish()
    }
}

impl Compiled {
    /// Resolves `expr`: `slot_of(name)` gives the index in the environment slice that holds
    /// `name`'s value, or `None` when the name is not in scope (an [`EvalError::Unbound`]).
    pub fn resolve(
        expr: &Expr,
        slot_of: &mut impl FnMut(&str) -> Option<u32>,
    ) -> Result<Compiled, EvalError> {
        let mut nodes = Vec::new();
        push_node(expr, slot_of, &mut nodes)?;
        Ok(Compiled {
            fast: Fast::of(&nodes),
            nodes: nodes.into_boxed_slice(),
        })
    }

    /// Compiles a resolved, typed expression ([`crate::resolve::TExpr`], already folded):
    /// register `r` is environment index `r`, tier argument `i` is index `arg_base + i`.
    pub fn from_typed(expr: &crate::resolve::TExpr, arg_base: u32) -> Compiled {
        fn push(e: &crate::resolve::TExpr, arg_base: u32, nodes: &mut Vec<Node>) -> u32 {
            use crate::resolve::TExpr;
            let node = match e {
                TExpr::Const(v) => Node::Const(*v),
                TExpr::Reg(r, _) => Node::Var(*r),
                TExpr::Arg(i, _) => Node::Var(arg_base.saturating_add(*i)),
                TExpr::Unary(op, a) => Node::Unary(*op, push(a, arg_base, nodes)),
                TExpr::Binary(..) => {
                    let (first, rest) = e.left_spine();
                    let mut acc = push(first, arg_base, nodes);
                    for (op, b) in rest {
                        let b = push(b, arg_base, nodes);
                        nodes.push(Node::Binary(op, acc, b));
                        acc = (nodes.len() - 1) as u32;
                    }
                    return acc;
                }
                TExpr::Ternary(c, a, b) => {
                    let c = push(c, arg_base, nodes);
                    let a = push(a, arg_base, nodes);
                    Node::Ternary(c, a, push(b, arg_base, nodes))
                }
            };
            nodes.push(node);
            (nodes.len() - 1) as u32
        }
        let mut nodes = Vec::new();
        push(expr, arg_base, &mut nodes);
        Compiled {
            fast: Fast::of(&nodes),
            nodes: nodes.into_boxed_slice(),
        }
    }

    /// A constant.
    pub fn constant(v: Value) -> Compiled {
        Compiled {
            nodes: Box::new([Node::Const(v)]),
            fast: Fast::Const(v),
        }
    }

    /// The value, if the expression is a constant (after folding).
    pub fn as_constant(&self) -> Option<Value> {
        match self.nodes.last() {
            Some(Node::Const(v)) if self.nodes.len() == 1 => Some(*v),
            _ => None,
        }
    }

    /// Evaluates under `env`. Every index the resolver handed out must be in range of `env`
    /// (the caller's contract); an index out of range is reported as unbound, not a panic.
    #[inline]
    pub fn eval(&self, env: &[Value]) -> Result<Value, EvalError> {
        match self.fast {
            Fast::Const(v) => return Ok(v),
            Fast::Var(i) => {
                if let Some(v) = env.get(i as usize) {
                    return Ok(*v);
                }
            }
            Fast::Affine { var, mul, add } => {
                if let Some(Value::I64(x)) = env.get(var as usize)
                    && let Some(v) = x.checked_mul(mul).and_then(|v| v.checked_add(add))
                {
                    return Ok(Value::I64(v));
                }
            }
            Fast::None => {}
        }
        self.eval_node(self.nodes.len().wrapping_sub(1), env)
    }

    fn eval_node(&self, i: usize, env: &[Value]) -> Result<Value, EvalError> {
        let Some(node) = self.nodes.get(i) else {
            return Err(EvalError::Unbound {
                name: format!("<node {i}>"),
            });
        };
        match *node {
            Node::Const(v) => Ok(v),
            Node::Var(s) => env
                .get(s as usize)
                .copied()
                .ok_or_else(|| EvalError::Unbound {
                    name: format!("<slot {s}>"),
                }),
            Node::Unary(op, a) => unary(op, self.eval_node(a as usize, env)?),
            Node::Binary(..) => self.eval_chain(i, env),
            Node::Ternary(c, a, b) => {
                if condition(self.eval_node(c as usize, env)?)? {
                    self.eval_node(a as usize, env)
                } else {
                    self.eval_node(b as usize, env)
                }
            }
        }
    }
}

impl Compiled {
    /// Evaluates the chain of binary operations whose outermost is node `i` along its left
    /// operands in a loop (a flat sum of any length), recursing only into right operands.
    fn eval_chain(&self, i: usize, env: &[Value]) -> Result<Value, EvalError> {
        // One operator (the common case): no chain to collect.
        if let Some(&Node::Binary(op, a, b)) = self.nodes.get(i)
            && !matches!(self.nodes.get(a as usize), Some(Node::Binary(..)))
        {
            let a = self.eval_node(a as usize, env)?;
            return self.apply(op, a, b as usize, env);
        }
        // The chain's nodes, outermost first: on the stack for short chains.
        let mut short = [0u32; 16];
        let mut long: Vec<u32> = Vec::new();
        let (mut n, mut j) = (0usize, i);
        while let Some(&Node::Binary(_, a, _)) = self.nodes.get(j) {
            match short.get_mut(n) {
                Some(slot) => *slot = j as u32,
                None => {
                    if long.is_empty() {
                        long.extend_from_slice(&short);
                    }
                    long.push(j as u32);
                }
            }
            n += 1;
            j = a as usize;
        }
        let chain = if n <= short.len() { &short[..n] } else { &long };
        let mut acc = self.eval_node(j, env)?;
        for &k in chain.iter().rev() {
            if let Some(&Node::Binary(op, _, b)) = self.nodes.get(k as usize) {
                acc = self.apply(op, acc, b as usize, env)?;
            }
        }
        Ok(acc)
    }

    /// `a op (node b)`, evaluating node `b` only when `&&` / `||` need it.
    #[inline]
    fn apply(&self, op: BinOp, a: Value, b: usize, env: &[Value]) -> Result<Value, EvalError> {
        // Fast path for the common integer case.
        if let (BinOp::Add | BinOp::Sub | BinOp::Mul, Value::I64(x)) = (op, a)
            && let Value::I64(y) = self.eval_node(b, env)?
        {
            return arith_i64(op, x, y)
                .map(Value::I64)
                .ok_or_else(|| EvalError::Overflow {
                    op: op.symbol(),
                    lhs: a,
                    rhs: Some(Value::I64(y)),
                });
        }
        match short_circuit(op, a)? {
            Some(v) => Ok(v),
            None => binary(op, a, self.eval_node(b, env)?),
        }
    }
}

fn push_node(
    expr: &Expr,
    slot_of: &mut impl FnMut(&str) -> Option<u32>,
    nodes: &mut Vec<Node>,
) -> Result<u32, EvalError> {
    let node = match expr {
        Expr::Int(v) => Node::Const(Value::I64(*v)),
        Expr::UInt(v) => Node::Const(Value::U64(*v)),
        Expr::Float(v) => Node::Const(Value::U64(v.bits())),
        Expr::Bool(b) => Node::Const(Value::Bool(*b)),
        Expr::Name(id) => Node::Var(slot_of(&id.name).ok_or_else(|| EvalError::Unbound {
            name: id.name.clone(),
        })?),
        Expr::Unary(op, a) => {
            let a = push_node(a, slot_of, nodes)?;
            match nodes[a as usize] {
                Node::Const(v) if unary(*op, v).is_ok() => {
                    nodes.truncate(a as usize);
                    Node::Const(unary(*op, v)?)
                }
                _ => Node::Unary(*op, a),
            }
        }
        Expr::Binary(..) => {
            let (first, rest) = expr.left_spine();
            let start = nodes.len();
            let mut acc = push_node(first, slot_of, nodes)?;
            for (op, b) in rest {
                let b = push_node(b, slot_of, nodes)?;
                let node = match (nodes[acc as usize], nodes[b as usize]) {
                    (Node::Const(x), Node::Const(y)) if fold_binary(op, x, y).is_some() => {
                        nodes.truncate(start);
                        Node::Const(fold_binary(op, x, y).unwrap_or(x))
                    }
                    _ => Node::Binary(op, acc, b),
                };
                nodes.push(node);
                acc = (nodes.len() - 1) as u32;
            }
            return Ok(acc);
        }
        Expr::Ternary(c, a, b) => {
            let start = nodes.len();
            let c = push_node(c, slot_of, nodes)?;
            let a = push_node(a, slot_of, nodes)?;
            let b = push_node(b, slot_of, nodes)?;
            match (nodes[c as usize], nodes[a as usize], nodes[b as usize]) {
                (Node::Const(Value::Bool(k)), Node::Const(x), Node::Const(y)) => {
                    nodes.truncate(start);
                    Node::Const(if k { x } else { y })
                }
                _ => Node::Ternary(c, a, b),
            }
        }
    };
    nodes.push(node);
    Ok((nodes.len() - 1) as u32)
}

/// The value of `x op y` for constants, when evaluating it (with short circuit) succeeds.
fn fold_binary(op: BinOp, x: Value, y: Value) -> Option<Value> {
    match short_circuit(op, x) {
        Ok(Some(v)) => Some(v),
        Ok(None) => binary(op, x, y).ok(),
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> BTreeMap<String, Value> {
        let mut m = BTreeMap::new();
        m.insert("x".to_string(), Value::I64(7));
        m.insert("u".to_string(), Value::U64(3));
        m.insert("z".to_string(), Value::I64(0));
        m.insert("t".to_string(), Value::Bool(true));
        m
    }

    fn both(e: &Expr) -> Result<Value, EvalError> {
        let env = env();
        let names: Vec<&String> = env.keys().collect();
        let values: Vec<Value> = env.values().copied().collect();
        let c = Compiled::resolve(e, &mut |n| {
            names.iter().position(|k| k.as_str() == n).map(|i| i as u32)
        });
        let direct = eval(e, &env);
        match c {
            Ok(c) => assert_eq!(c.eval(&values), direct, "{e:?}"),
            Err(err) => assert_eq!(Err(err), direct.clone(), "{e:?}"),
        }
        direct
    }

    fn n(s: &str) -> Expr {
        Expr::name(s)
    }

    #[test]
    fn arithmetic() {
        assert_eq!(both(&(n("x") * 3 + 1)), Ok(Value::I64(22)));
        assert_eq!(both(&(Expr::from(-7) / 2)), Ok(Value::I64(-3)));
        assert_eq!(both(&(Expr::from(-7) % 2)), Ok(Value::I64(-1)));
        assert_eq!(both(&(Expr::from(7) % -2)), Ok(Value::I64(1)));
        assert_eq!(both(&(n("u") * 5u64)), Ok(Value::U64(15)));
        assert_eq!(both(&Expr::min(n("x"), 3)), Ok(Value::I64(3)));
        assert_eq!(both(&Expr::max(n("x"), 3)), Ok(Value::I64(7)));
        assert_eq!(both(&-n("x")), Ok(Value::I64(-7)));
        assert_eq!(both(&!n("t")), Ok(Value::Bool(false)));
        assert_eq!(both(&Expr::ternary(n("x").gt(3), 1, 2)), Ok(Value::I64(1)));
        assert_eq!(both(&n("t").eq_(true)), Ok(Value::Bool(true)));
    }

    #[test]
    fn errors() {
        assert!(matches!(
            both(&(n("x") / n("z"))),
            Err(EvalError::DivisionByZero { op: "/", .. })
        ));
        assert!(matches!(
            both(&(n("x") % 0)),
            Err(EvalError::DivisionByZero { op: "%", .. })
        ));
        assert!(matches!(
            both(&(Expr::from(i64::MAX) + 1)),
            Err(EvalError::Overflow { op: "+", .. })
        ));
        assert!(matches!(
            both(&(Expr::from(i64::MIN) / -1)),
            Err(EvalError::Overflow { op: "/", .. })
        ));
        assert!(matches!(
            both(&(Expr::from(0u64) - 1u64)),
            Err(EvalError::Overflow { op: "-", .. })
        ));
        assert!(matches!(
            both(&(n("x") + n("u"))),
            Err(EvalError::TypeMismatch { op: "+", .. })
        ));
        assert!(matches!(
            both(&(n("x") + n("nope"))),
            Err(EvalError::Unbound { name }) if name == "nope"
        ));
        assert!(matches!(
            both(&Expr::ternary(n("x"), 1, 2)),
            Err(EvalError::TypeMismatch { op: "?:", .. })
        ));
    }

    #[test]
    fn lazy() {
        // x != 0 && 10 / z > 1 with z = 0: the right side is never evaluated.
        let e = n("z")
            .bin(BinOp::Ne, 0)
            .bin(BinOp::And, (Expr::from(10) / n("z")).gt(1));
        assert_eq!(both(&e), Ok(Value::Bool(false)));
        let e = n("t").bin(BinOp::Or, Expr::from(1) / 0);
        assert_eq!(both(&e), Ok(Value::Bool(true)));
        let e = Expr::ternary(true, 1, Expr::from(1) / 0);
        assert_eq!(both(&e), Ok(Value::I64(1)));
        // A failing constant is not folded into an error at resolve time.
        let c = Compiled::resolve(&Expr::ternary(n("t"), 1, Expr::from(1) / 0), &mut |_| {
            Some(0)
        })
        .map(|c| c.eval(&[Value::Bool(true)]));
        assert_eq!(c, Ok(Ok(Value::I64(1))));
    }

    #[test]
    fn folding() {
        let c = Compiled::resolve(&(Expr::from(3) * 4 + 1), &mut |_| None).ok();
        assert_eq!(c.and_then(|c| c.as_constant()), Some(Value::I64(13)));
    }
}
