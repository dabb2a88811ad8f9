//! Typed, resolved expressions: the expression form every consumer of [`super::Resolved`] reads.
//!
//! Why: the reference expander evaluates expressions, the bytecode encoder compiles them to
//! typed stack code, and later back ends print them as C++ or MLIR. Each needs the same facts —
//! which register or task argument a name is, the type of every node, which subexpressions are
//! constant — so they are worked out once, here.
//!
//! Promise: a [`TExpr`] is well typed by construction (the constructors check operand types and
//! name the problem otherwise), and constant folding uses the IR's own evaluator
//! ([`crate::eval`]), so folding never changes a value or hides an error: a constant that fails
//! to evaluate (`1 / 0`) is left unfolded and fails when it is evaluated, exactly as the
//! unresolved expression would.

use crate::eval::{binary, unary};
use crate::expr::{BinOp, OpClass, UnOp};
use crate::types::ScalarType;
use crate::value::Value;

/// A register of the resolved program: symbols first, then slots, then every variable
/// (loop, `consume`, call parameter) of the inlined program, each its own register.
pub type Reg = u32;

/// A typed, resolved expression.
///
/// `Clone`, `Drop`, `PartialEq`, `Hash` and `Debug` walk a chain of binary operations
/// iteratively (`crate::chain`), like [`crate::Expr`]'s.
pub enum TExpr {
    /// A constant (after folding).
    Const(Value),
    /// A register and its type.
    Reg(Reg, ScalarType),
    /// Scalar argument `i` (in parameter order among the scalar parameters) of the task whose
    /// tier is being chosen; only in tier conditions.
    Arg(u32, ScalarType),
    /// `op a`.
    Unary(UnOp, Box<TExpr>),
    /// `a op b` (`&&` and `||` short-circuit).
    Binary(BinOp, Box<TExpr>, Box<TExpr>),
    /// `c ? a : b` (only the chosen arm is evaluated).
    Ternary(Box<TExpr>, Box<TExpr>, Box<TExpr>),
}

impl TExpr {
    /// The type (the tree was checked when it was built).
    pub fn ty(&self) -> ScalarType {
        match self {
            TExpr::Const(v) => v.ty(),
            TExpr::Reg(_, t) | TExpr::Arg(_, t) => *t,
            TExpr::Unary(_, a) => a.ty(),
            // The right operand: a chain's left operands nest as deep as the chain is long.
            TExpr::Binary(op, _, b) => match op.class() {
                OpClass::Arith => b.ty(),
                OpClass::Compare | OpClass::Logic => ScalarType::Bool,
            },
            TExpr::Ternary(_, a, _) => a.ty(),
        }
    }

    /// Calls `f` on every register the expression reads.
    pub fn each_reg(&self, f: &mut impl FnMut(Reg)) {
        match self {
            TExpr::Const(_) | TExpr::Arg(..) => {}
            TExpr::Reg(r, _) => f(*r),
            TExpr::Unary(_, a) => a.each_reg(f),
            TExpr::Binary(..) => {
                let (first, rest) = self.left_spine();
                first.each_reg(f);
                for (_, b) in rest {
                    b.each_reg(f);
                }
            }
            TExpr::Ternary(c, a, b) => {
                c.each_reg(f);
                a.each_reg(f);
                b.each_reg(f);
            }
        }
    }

    /// Whether every register read satisfies `ok`.
    pub fn regs_all(&self, ok: impl Fn(Reg) -> bool) -> bool {
        let mut all = true;
        self.each_reg(&mut |r| all &= ok(r));
        all
    }

    /// An `i64` constant.
    pub fn int(v: i64) -> TExpr {
        TExpr::Const(Value::I64(v))
    }

    /// `op(a)`, typed and folded. `Err` names the type problem.
    pub fn unary(op: UnOp, a: TExpr) -> Result<TExpr, String> {
        let ok = matches!(
            (op, a.ty()),
            (UnOp::Neg, ScalarType::I64 | ScalarType::U64) | (UnOp::Not, ScalarType::Bool)
        );
        if !ok {
            return Err(format!(
                "operator `{}` cannot be applied to {}",
                match op {
                    UnOp::Neg => "-",
                    UnOp::Not => "!",
                },
                a.ty()
            ));
        }
        if let TExpr::Const(v) = a
            && let Ok(r) = unary(op, v)
        {
            return Ok(TExpr::Const(r));
        }
        Ok(TExpr::Unary(op, Box::new(a)))
    }

    /// `a op b`, typed and folded.
    pub fn binary(op: BinOp, a: TExpr, b: TExpr) -> Result<TExpr, String> {
        let (ta, tb) = (a.ty(), b.ty());
        let ok = match op.class() {
            OpClass::Arith => ta == tb && ta != ScalarType::Bool,
            OpClass::Compare => ta == tb,
            OpClass::Logic => ta == ScalarType::Bool && tb == ScalarType::Bool,
        };
        if !ok {
            return Err(format!(
                "operator `{}` cannot be applied to {ta} and {tb}",
                op.symbol()
            ));
        }
        // `&&` / `||` decided by a constant left side never evaluate the right one.
        if let (BinOp::And | BinOp::Or, TExpr::Const(Value::Bool(x))) = (op, &a) {
            let decisive = op == BinOp::Or;
            if *x == decisive {
                return Ok(TExpr::Const(Value::Bool(*x)));
            }
            return Ok(b);
        }
        if let (TExpr::Const(x), TExpr::Const(y)) = (&a, &b)
            && let Ok(r) = binary(op, *x, *y)
        {
            return Ok(TExpr::Const(r));
        }
        Ok(TExpr::Binary(op, Box::new(a), Box::new(b)))
    }

    /// `c ? a : b`, typed and folded.
    pub fn ternary(c: TExpr, a: TExpr, b: TExpr) -> Result<TExpr, String> {
        if c.ty() != ScalarType::Bool {
            return Err(format!(
                "the condition of `?:` must be bool, not {}",
                c.ty()
            ));
        }
        if a.ty() != b.ty() {
            return Err(format!(
                "the arms of `?:` have different types ({} and {})",
                a.ty(),
                b.ty()
            ));
        }
        Ok(match c {
            TExpr::Const(Value::Bool(true)) => a,
            TExpr::Const(Value::Bool(false)) => b,
            c => TExpr::Ternary(Box::new(c), Box::new(a), Box::new(b)),
        })
    }
}
