//! Operator chains of any length: the left spine of an expression tree, and the `Clone`, `Drop`,
//! `PartialEq`, `Hash` and `Debug` of [`Expr`] and [`TExpr`] that walk it without recursion.
//!
//! Why: infix operators are left-associative, so a flat sum `a + b + … + z` of `n` terms is a
//! tree whose *left* operands nest `n − 1` deep. The parser bounds only true nesting
//! (parentheses, unary operators, ternaries, calls); a chain is as long as the input makes it.
//! Every walk over an expression therefore reads a chain along its left spine in a loop and
//! recurses only into the right operands and the other children, whose depth the parser bounds.
//!
//! Promises: [`Expr::left_spine`] / [`TExpr::left_spine`] list a chain in evaluation order; the
//! trait impls here behave exactly as the derived ones would (same equality, same `Debug` text
//! for chains of up to [`DEBUG_NESTED`] operators, a hash consistent with equality) and use stack
//! in proportion to true nesting only, whatever the length of a chain.

use crate::expr::{BinOp, Expr};
use crate::resolve::TExpr;
use std::fmt;
use std::hash::{Hash, Hasher};

/// Chains of up to this many operators print in `Debug` exactly as a derived impl would (pretty
/// `{:#?}` included); longer ones in the same text on one line.
pub(crate) const DEBUG_NESTED: usize = 16;

macro_rules! chain_impls {
    ($T:ident, leaf: $leaf:expr, leaf_eq: $leaf_eq:expr, leaf_hash: $leaf_hash:expr,
     clone_other: $clone_other:expr) => {
        impl $T {
            /// A chain of binary operations read along its left operands: the leftmost operand
            /// that is not a binary operation, then each (operator, right operand) pair from the
            /// innermost out (the order they are evaluated in). For an expression that is not
            /// a binary operation: itself, and no pairs.
            pub fn left_spine(&self) -> (&$T, Vec<(BinOp, &$T)>) {
                let mut rest = Vec::new();
                let mut e = self;
                while let $T::Binary(op, a, b) = e {
                    rest.push((*op, &**b));
                    e = a;
                }
                rest.reverse();
                (e, rest)
            }

            /// How many binary operations the left spine holds (0 for anything else).
            pub fn chain_len(&self) -> usize {
                let mut n = 0;
                let mut e = self;
                while let $T::Binary(_, a, _) = e {
                    n += 1;
                    e = a;
                }
                n
            }
        }

        impl Clone for $T {
            fn clone(&self) -> $T {
                match self {
                    $T::Binary(..) => {
                        let (first, rest) = self.left_spine();
                        let mut acc = first.clone();
                        for (op, b) in rest {
                            acc = $T::Binary(op, Box::new(acc), Box::new(b.clone()));
                        }
                        acc
                    }
                    other => $clone_other(other),
                }
            }
        }

        impl Drop for $T {
            /// Takes a chain apart from the top, one operator at a time, so dropping it recurses
            /// only into right operands.
            fn drop(&mut self) {
                let $T::Binary(_, a, _) = self else { return };
                let mut next = std::mem::replace(&mut **a, $leaf);
                while let $T::Binary(_, a, _) = &mut next {
                    let inner = std::mem::replace(&mut **a, $leaf);
                    next = inner;
                }
            }
        }

        impl PartialEq for $T {
            fn eq(&self, other: &$T) -> bool {
                let (mut x, mut y) = (self, other);
                loop {
                    match (x, y) {
                        ($T::Binary(o1, a1, b1), $T::Binary(o2, a2, b2)) => {
                            if o1 != o2 || b1 != b2 {
                                return false;
                            }
                            x = a1;
                            y = a2;
                        }
                        _ => return $leaf_eq(x, y),
                    }
                }
            }
        }

        impl Eq for $T {}

        impl Hash for $T {
            fn hash<H: Hasher>(&self, state: &mut H) {
                let mut x = self;
                while let $T::Binary(op, a, b) = x {
                    std::mem::discriminant(x).hash(state);
                    op.hash(state);
                    b.hash(state);
                    x = a;
                }
                $leaf_hash(x, state);
            }
        }

        impl fmt::Debug for $T {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                if let $T::Binary(op, a, b) = self {
                    if self.chain_len() <= DEBUG_NESTED {
                        return f.debug_tuple("Binary").field(op).field(a).field(b).finish();
                    }
                    let (first, rest) = self.left_spine();
                    for (op, _) in rest.iter().rev() {
                        write!(f, "Binary({op:?}, ")?;
                    }
                    write!(f, "{first:?}")?;
                    for (_, b) in &rest {
                        write!(f, ", {b:?})")?;
                    }
                    return Ok(());
                }
                debug_other(self, f)
            }
        }
    };
}

// `leaf` is the cheap expression `Drop` leaves in place of an operand it has taken.
chain_impls!(
    Expr,
    leaf: Expr::Bool(false),
    leaf_eq: expr_leaf_eq,
    leaf_hash: expr_leaf_hash,
    clone_other: expr_clone_other
);
chain_impls!(
    TExpr,
    leaf: TExpr::Const(crate::value::Value::Bool(false)),
    leaf_eq: texpr_leaf_eq,
    leaf_hash: texpr_leaf_hash,
    clone_other: texpr_clone_other
);

/// Equality of two expressions at least one of which is not a binary operation.
fn expr_leaf_eq(x: &Expr, y: &Expr) -> bool {
    match (x, y) {
        (Expr::Int(a), Expr::Int(b)) => a == b,
        (Expr::UInt(a), Expr::UInt(b)) => a == b,
        (Expr::Bool(a), Expr::Bool(b)) => a == b,
        (Expr::Float(a), Expr::Float(b)) => a == b,
        (Expr::Name(a), Expr::Name(b)) => a == b,
        (Expr::Unary(o1, a1), Expr::Unary(o2, a2)) => o1 == o2 && a1 == a2,
        (Expr::Ternary(c1, a1, b1), Expr::Ternary(c2, a2, b2)) => c1 == c2 && a1 == a2 && b1 == b2,
        _ => false,
    }
}

fn texpr_leaf_eq(x: &TExpr, y: &TExpr) -> bool {
    match (x, y) {
        (TExpr::Const(a), TExpr::Const(b)) => a == b,
        (TExpr::Reg(r1, t1), TExpr::Reg(r2, t2)) | (TExpr::Arg(r1, t1), TExpr::Arg(r2, t2)) => {
            r1 == r2 && t1 == t2
        }
        (TExpr::Unary(o1, a1), TExpr::Unary(o2, a2)) => o1 == o2 && a1 == a2,
        (TExpr::Ternary(c1, a1, b1), TExpr::Ternary(c2, a2, b2)) => {
            c1 == c2 && a1 == a2 && b1 == b2
        }
        _ => false,
    }
}

fn expr_leaf_hash<H: Hasher>(x: &Expr, state: &mut H) {
    std::mem::discriminant(x).hash(state);
    match x {
        Expr::Int(v) => v.hash(state),
        Expr::UInt(v) => v.hash(state),
        Expr::Bool(v) => v.hash(state),
        Expr::Float(v) => v.hash(state),
        Expr::Name(v) => v.hash(state),
        Expr::Unary(op, a) => {
            op.hash(state);
            a.hash(state);
        }
        Expr::Ternary(c, a, b) => {
            c.hash(state);
            a.hash(state);
            b.hash(state);
        }
        Expr::Binary(..) => {}
    }
}

fn texpr_leaf_hash<H: Hasher>(x: &TExpr, state: &mut H) {
    std::mem::discriminant(x).hash(state);
    match x {
        TExpr::Const(v) => v.hash(state),
        TExpr::Reg(r, t) | TExpr::Arg(r, t) => {
            r.hash(state);
            t.hash(state);
        }
        TExpr::Unary(op, a) => {
            op.hash(state);
            a.hash(state);
        }
        TExpr::Ternary(c, a, b) => {
            c.hash(state);
            a.hash(state);
            b.hash(state);
        }
        TExpr::Binary(..) => {}
    }
}

fn expr_clone_other(x: &Expr) -> Expr {
    match x {
        Expr::Int(v) => Expr::Int(*v),
        Expr::UInt(v) => Expr::UInt(*v),
        Expr::Bool(v) => Expr::Bool(*v),
        Expr::Float(v) => Expr::Float(*v),
        Expr::Name(v) => Expr::Name(v.clone()),
        Expr::Unary(op, a) => Expr::Unary(*op, a.clone()),
        Expr::Binary(op, a, b) => Expr::Binary(*op, a.clone(), b.clone()),
        Expr::Ternary(c, a, b) => Expr::Ternary(c.clone(), a.clone(), b.clone()),
    }
}

fn texpr_clone_other(x: &TExpr) -> TExpr {
    match x {
        TExpr::Const(v) => TExpr::Const(*v),
        TExpr::Reg(r, t) => TExpr::Reg(*r, *t),
        TExpr::Arg(i, t) => TExpr::Arg(*i, *t),
        TExpr::Unary(op, a) => TExpr::Unary(*op, a.clone()),
        TExpr::Binary(op, a, b) => TExpr::Binary(*op, a.clone(), b.clone()),
        TExpr::Ternary(c, a, b) => TExpr::Ternary(c.clone(), a.clone(), b.clone()),
    }
}

/// `Debug` of anything but a binary operation, as derived.
trait DebugOther {
    fn debug_other(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result;
}

fn debug_other<T: DebugOther>(x: &T, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    x.debug_other(f)
}

impl DebugOther for Expr {
    fn debug_other(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Int(v) => f.debug_tuple("Int").field(v).finish(),
            Expr::UInt(v) => f.debug_tuple("UInt").field(v).finish(),
            Expr::Bool(v) => f.debug_tuple("Bool").field(v).finish(),
            Expr::Float(v) => f.debug_tuple("Float").field(v).finish(),
            Expr::Name(v) => f.debug_tuple("Name").field(v).finish(),
            Expr::Unary(op, a) => f.debug_tuple("Unary").field(op).field(a).finish(),
            Expr::Binary(op, a, b) => f.debug_tuple("Binary").field(op).field(a).field(b).finish(),
            Expr::Ternary(c, a, b) => f.debug_tuple("Ternary").field(c).field(a).field(b).finish(),
        }
    }
}

impl DebugOther for TExpr {
    fn debug_other(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TExpr::Const(v) => f.debug_tuple("Const").field(v).finish(),
            TExpr::Reg(r, t) => f.debug_tuple("Reg").field(r).field(t).finish(),
            TExpr::Arg(i, t) => f.debug_tuple("Arg").field(i).field(t).finish(),
            TExpr::Unary(op, a) => f.debug_tuple("Unary").field(op).field(a).finish(),
            TExpr::Binary(op, a, b) => f.debug_tuple("Binary").field(op).field(a).field(b).finish(),
            TExpr::Ternary(c, a, b) => f.debug_tuple("Ternary").field(c).field(a).field(b).finish(),
        }
    }
}
