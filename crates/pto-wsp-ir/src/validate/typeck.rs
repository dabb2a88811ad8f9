//! Types and constant values of scalar expressions.
//!
//! Why: every expression in a module (extents, region bounds, task scalars, conditions, schedule
//! keys) is typed by the same rules (`FORMAT.md`, "Expressions"), while what a *name* means depends
//! on where the expression stands. So [`type_of`] takes the name resolution as a closure and applies
//! only the operator rules.
//! Promise: [`type_of`] reports each operator misuse once and never cascades: an operand whose
//! type is unknown (because of an earlier error) is accepted silently. [`const_value`] folds
//! name-free integer expressions and gives up (returns `None`) on overflow or division by zero.

use super::errors::ValidationError;
use crate::expr::{BinOp, Expr, OpClass, UnOp};
use crate::loc::{Ident, Loc};
use crate::types::ScalarType;
use crate::value::Value;

/// What an expression is required to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Expected {
    /// `bool`.
    Bool,
    /// `i64` or `u64`.
    Integer,
    /// Exactly this type.
    Exact(ScalarType),
}

impl Expected {
    fn accepts(self, ty: ScalarType) -> bool {
        match self {
            Expected::Bool => ty == ScalarType::Bool,
            Expected::Integer => is_integer(ty),
            Expected::Exact(t) => t == ty,
        }
    }

    fn describe(self) -> String {
        match self {
            Expected::Bool => "bool".into(),
            Expected::Integer => "an integer (i64 or u64)".into(),
            Expected::Exact(t) => t.keyword().into(),
        }
    }
}

/// Whether `ty` is an integer type.
pub(crate) fn is_integer(ty: ScalarType) -> bool {
    match ty {
        ScalarType::I64 | ScalarType::U64 => true,
        ScalarType::Bool => false,
    }
}

/// Where an expression stands: for messages.
pub(crate) struct Site<'a> {
    /// The location used when the expression holds no name (literals carry no location).
    pub(crate) fallback: Loc,
    /// The path to the expression.
    pub(crate) path: &'a str,
}

impl Site<'_> {
    fn loc_of(&self, e: &Expr) -> Loc {
        let loc = e.loc();
        if loc.is_known() { loc } else { self.fallback }
    }
}

/// The type of `expr`, resolving names with `resolve` (which reports its own errors and returns
/// `None` for a name it could not type). Operator misuses are pushed to `errors`.
pub(crate) fn type_of(
    expr: &Expr,
    resolve: &mut dyn FnMut(&Ident) -> Option<ScalarType>,
    site: &Site<'_>,
    errors: &mut Vec<ValidationError>,
) -> Option<ScalarType> {
    match expr {
        Expr::Int(_) => Some(ScalarType::I64),
        Expr::UInt(_) => Some(ScalarType::U64),
        Expr::Bool(_) => Some(ScalarType::Bool),
        Expr::Float(v) => {
            errors.push(ValidationError::FloatMisplaced {
                text: v.to_string(),
                loc: if v.loc.is_known() {
                    v.loc
                } else {
                    site.fallback
                },
                path: site.path.to_string(),
            });
            None
        }
        Expr::Name(id) => resolve(id),
        Expr::Unary(op, a) => {
            let ta = type_of(a, resolve, site, errors)?;
            let (sym, want_int) = match op {
                UnOp::Neg => ("-", true),
                UnOp::Not => ("!", false),
            };
            if is_integer(ta) != want_int {
                errors.push(ValidationError::OperandType {
                    op: sym,
                    expected: if want_int { "integer" } else { "bool" },
                    found: ta,
                    loc: site.loc_of(a),
                    path: site.path.to_string(),
                });
                return None;
            }
            Some(ta)
        }
        Expr::Binary(..) => {
            // A chain along its left operands in a loop, innermost first.
            let mut chain = Vec::new();
            let mut left = expr;
            while let Expr::Binary(_, a, _) = left {
                chain.push(left);
                left = a;
            }
            let mut ta = type_of(left, resolve, site, errors);
            for node in chain.into_iter().rev() {
                if let Expr::Binary(op, a, b) = node {
                    let tb = type_of(b, resolve, site, errors);
                    ta = binary_type(*op, (a, ta), (b, tb), site, errors);
                }
            }
            ta
        }
        Expr::Ternary(c, a, b) => {
            if let Some(tc) = type_of(c, resolve, site, errors)
                && tc != ScalarType::Bool
            {
                errors.push(ValidationError::ExprType {
                    context: "the condition of `?:`".into(),
                    expected: Expected::Bool.describe(),
                    found: tc,
                    loc: site.loc_of(c),
                    path: site.path.to_string(),
                });
            }
            let ta = type_of(a, resolve, site, errors);
            let tb = type_of(b, resolve, site, errors);
            match (ta, tb) {
                (Some(x), Some(y)) if x != y => {
                    errors.push(ValidationError::OperandMismatch {
                        op: "?:",
                        left: x,
                        right: y,
                        loc: site.loc_of(expr),
                        path: site.path.to_string(),
                    });
                    None
                }
                (Some(x), _) | (None, Some(x)) => Some(x),
                (None, None) => None,
            }
        }
    }
}

fn binary_type(
    op: BinOp,
    (a, ta): (&Expr, Option<ScalarType>),
    (b, tb): (&Expr, Option<ScalarType>),
    site: &Site<'_>,
    errors: &mut Vec<ValidationError>,
) -> Option<ScalarType> {
    let rule = op.class();
    let mut operand_ok = |e: &Expr, t: Option<ScalarType>| -> bool {
        let Some(t) = t else { return true };
        let (ok, expected) = match rule {
            OpClass::Arith => (is_integer(t), "integer"),
            OpClass::Logic => (t == ScalarType::Bool, "bool"),
            OpClass::Compare => (true, ""),
        };
        if !ok {
            errors.push(ValidationError::OperandType {
                op: op.symbol(),
                expected,
                found: t,
                loc: site.loc_of(e),
                path: site.path.to_string(),
            });
        }
        ok
    };
    let ok_a = operand_ok(a, ta);
    let ok_b = operand_ok(b, tb);
    if !(ok_a && ok_b) {
        return match rule {
            OpClass::Arith => None,
            OpClass::Compare | OpClass::Logic => Some(ScalarType::Bool),
        };
    }
    if let (Some(x), Some(y)) = (ta, tb)
        && x != y
    {
        let joined = a.loc().join(b.loc());
        errors.push(ValidationError::OperandMismatch {
            op: op.symbol(),
            left: x,
            right: y,
            loc: if joined.is_known() {
                joined
            } else {
                site.fallback
            },
            path: site.path.to_string(),
        });
        return match rule {
            OpClass::Arith => None,
            OpClass::Compare | OpClass::Logic => Some(ScalarType::Bool),
        };
    }
    match rule {
        OpClass::Arith => ta.or(tb),
        OpClass::Compare | OpClass::Logic => Some(ScalarType::Bool),
    }
}

/// Checks that `expr` has a type `expected` accepts; `context` says where it stands
/// (`the condition of `if``). Returns the type found.
pub(crate) fn expect_type(
    expr: &Expr,
    expected: Expected,
    context: &dyn Fn() -> String,
    resolve: &mut dyn FnMut(&Ident) -> Option<ScalarType>,
    site: &Site<'_>,
    errors: &mut Vec<ValidationError>,
) -> Option<ScalarType> {
    let ty = type_of(expr, resolve, site, errors)?;
    if !expected.accepts(ty) {
        errors.push(ValidationError::ExprType {
            context: context(),
            expected: expected.describe(),
            found: ty,
            loc: site.loc_of(expr),
            path: site.path.to_string(),
        });
    }
    Some(ty)
}

/// The value of a name-free integer expression, if it can be computed (no overflow, no division
/// by zero, no booleans). Evaluation is the evaluator's, so the validator folds exactly as the
/// expander computes.
pub(crate) fn const_value(expr: &Expr) -> Option<i64> {
    match crate::eval::eval(expr, &|_: &str| None).ok()? {
        Value::I64(v) => Some(v),
        Value::U64(v) => i64::try_from(v).ok(),
        Value::Bool(_) => None,
    }
}
