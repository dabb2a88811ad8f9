//! Scalar expressions: the little language used for loop extents, region starts and sizes, task
//! parameters, conditions, kernel tiers and schedule keys.
//!
//! Expressions name things by [`Ident`]; what a name means (loop variable, workload parameter,
//! runtime symbol, slot, kernel parameter) is decided by the scope where the expression stands,
//! and checked by the validator. Expressions are typed `bool`, `i64` or `u64`
//! ([`crate::ScalarType`]); there are no implicit conversions.

use crate::loc::Ident;
use std::fmt;

/// A scalar expression.
///
/// `Clone`, `Drop`, `PartialEq`, `Hash` and `Debug` walk a chain of binary operations
/// iteratively (`crate::chain`), so a flat sum of any length is safe to copy, compare and drop.
pub enum Expr {
    /// A signed integer literal (`42`, `-3`), type `i64`.
    Int(i64),
    /// An unsigned integer literal (`42u`), type `u64`.
    UInt(u64),
    /// `true` or `false`.
    Bool(bool),
    /// A float literal (`1.0`, `1e-6`, `-0.5`): only an argument of a float kernel parameter
    /// (`f32` / `f64`), where it is passed as the bits of its `f64` value.
    Float(FloatLit),
    /// A name: loop variable, workload parameter, runtime symbol, slot or kernel parameter.
    Name(Ident),
    /// A unary operation.
    Unary(UnOp, Box<Expr>),
    /// A binary operation (`min` and `max` are binary operations written as calls).
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `cond ? then : else`.
    Ternary(Box<Expr>, Box<Expr>, Box<Expr>),
}

/// A finite `f64` literal, compared and hashed by its bits (so `Expr` stays `Eq` and `Hash`),
/// with where it was written (like every [`crate::Loc`], never part of equality).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FloatLit {
    bits: u64,
    /// Where the literal was written ([`crate::Loc::NONE`] when built).
    pub loc: crate::Loc,
}

impl FloatLit {
    /// The literal of `v`, or `None` if `v` is not finite.
    pub fn new(v: f64) -> Option<FloatLit> {
        v.is_finite().then(|| FloatLit {
            bits: v.to_bits(),
            loc: crate::Loc::NONE,
        })
    }

    /// Its value.
    pub fn value(self) -> f64 {
        f64::from_bits(self.bits)
    }

    /// The raw bits a kernel receives.
    pub fn bits(self) -> u64 {
        self.bits
    }
}

impl fmt::Display for FloatLit {
    /// The shortest text that reads back as the same value, always with a `.` or an exponent
    /// (`1.0`, `1e-6`, `-0.5`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.value())
    }
}

/// Unary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnOp {
    /// Arithmetic negation `-x` (integers).
    Neg,
    /// Logical not `!x` (booleans).
    Not,
}

/// Binary operators, from loosest to tightest binding as listed in [`BinOp::precedence`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    /// `a + b`
    Add,
    /// `a - b`
    Sub,
    /// `a * b`
    Mul,
    /// `a / b` (integer division truncating toward zero; division by zero is an evaluation error)
    Div,
    /// `a % b` (remainder with the sign of `a`)
    Rem,
    /// `min(a, b)`
    Min,
    /// `max(a, b)`
    Max,
    /// `a == b`
    Eq,
    /// `a != b`
    Ne,
    /// `a < b`
    Lt,
    /// `a <= b`
    Le,
    /// `a > b`
    Gt,
    /// `a >= b`
    Ge,
    /// `a && b`
    And,
    /// `a || b`
    Or,
}

/// The typing rule an operator follows: one place for every typer and evaluator to ask.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpClass {
    /// `+ - * / % min max`: two operands of one integer type, giving that type.
    Arith,
    /// `== != < <= > >=`: two operands of one type, giving `bool`.
    Compare,
    /// `&& ||`: two `bool` operands, giving `bool`.
    Logic,
}

impl BinOp {
    /// The operator's typing rule.
    pub fn class(self) -> OpClass {
        match self {
            BinOp::Add
            | BinOp::Sub
            | BinOp::Mul
            | BinOp::Div
            | BinOp::Rem
            | BinOp::Min
            | BinOp::Max => OpClass::Arith,
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                OpClass::Compare
            }
            BinOp::And | BinOp::Or => OpClass::Logic,
        }
    }

    /// Every operator.
    pub const ALL: &'static [BinOp] = &[
        BinOp::Add,
        BinOp::Sub,
        BinOp::Mul,
        BinOp::Div,
        BinOp::Rem,
        BinOp::Min,
        BinOp::Max,
        BinOp::Eq,
        BinOp::Ne,
        BinOp::Lt,
        BinOp::Le,
        BinOp::Gt,
        BinOp::Ge,
        BinOp::And,
        BinOp::Or,
    ];

    /// The operator's spelling (`min` / `max` are written as calls: `min(a, b)`).
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::Min => "min",
            BinOp::Max => "max",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::And => "&&",
            BinOp::Or => "||",
        }
    }

    /// Binding strength of infix operators (higher binds tighter); `None` for the call forms.
    /// `||` 1, `&&` 2, comparisons 3 (non-associative), `+ -` 4, `* / %` 5. All infix operators
    /// other than comparisons are left-associative.
    pub fn precedence(self) -> Option<u8> {
        match self {
            BinOp::Or => Some(1),
            BinOp::And => Some(2),
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => Some(3),
            BinOp::Add | BinOp::Sub => Some(4),
            BinOp::Mul | BinOp::Div | BinOp::Rem => Some(5),
            BinOp::Min | BinOp::Max => None,
        }
    }

    /// Whether the operator compares (result `bool`, operands of one type).
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge
        )
    }

    /// Whether the operator is `&&` or `||` (operands and result `bool`).
    pub fn is_logical(self) -> bool {
        matches!(self, BinOp::And | BinOp::Or)
    }
}

impl fmt::Display for BinOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.symbol())
    }
}

impl Expr {
    /// A name expression.
    pub fn name(name: impl Into<Ident>) -> Expr {
        Expr::Name(name.into())
    }

    /// `self <op> rhs`.
    pub fn bin(self, op: BinOp, rhs: impl Into<Expr>) -> Expr {
        Expr::Binary(op, Box::new(self), Box::new(rhs.into()))
    }

    /// `cond ? self : other` built as `Expr::ternary(cond, a, b)`.
    pub fn ternary(cond: impl Into<Expr>, then: impl Into<Expr>, other: impl Into<Expr>) -> Expr {
        Expr::Ternary(
            Box::new(cond.into()),
            Box::new(then.into()),
            Box::new(other.into()),
        )
    }

    /// `min(a, b)`.
    pub fn min(a: impl Into<Expr>, b: impl Into<Expr>) -> Expr {
        a.into().bin(BinOp::Min, b)
    }

    /// `max(a, b)`.
    pub fn max(a: impl Into<Expr>, b: impl Into<Expr>) -> Expr {
        a.into().bin(BinOp::Max, b)
    }

    /// `self == rhs`.
    pub fn eq_(self, rhs: impl Into<Expr>) -> Expr {
        self.bin(BinOp::Eq, rhs)
    }

    /// `self < rhs`.
    pub fn lt(self, rhs: impl Into<Expr>) -> Expr {
        self.bin(BinOp::Lt, rhs)
    }

    /// `self <= rhs`.
    pub fn le(self, rhs: impl Into<Expr>) -> Expr {
        self.bin(BinOp::Le, rhs)
    }

    /// `self > rhs`.
    pub fn gt(self, rhs: impl Into<Expr>) -> Expr {
        self.bin(BinOp::Gt, rhs)
    }

    /// `self >= rhs`.
    pub fn ge(self, rhs: impl Into<Expr>) -> Expr {
        self.bin(BinOp::Ge, rhs)
    }

    /// Calls `f` on every name in the expression, left to right.
    pub fn for_each_name<'a>(&'a self, f: &mut impl FnMut(&'a Ident)) {
        match self {
            Expr::Int(_) | Expr::UInt(_) | Expr::Bool(_) | Expr::Float(_) => {}
            Expr::Name(id) => f(id),
            Expr::Unary(_, a) => a.for_each_name(f),
            Expr::Binary(..) => {
                let (first, rest) = self.left_spine();
                first.for_each_name(f);
                for (_, b) in rest {
                    b.for_each_name(f);
                }
            }
            Expr::Ternary(c, a, b) => {
                c.for_each_name(f);
                a.for_each_name(f);
                b.for_each_name(f);
            }
        }
    }

    /// The source range of the expression's names and float literals (for error messages),
    /// [`crate::Loc::NONE`] if it has none.
    pub fn loc(&self) -> crate::Loc {
        let mut loc = crate::Loc::NONE;
        self.for_each_name(&mut |id| loc = loc.join(id.loc));
        self.for_each_float(&mut |v| loc = loc.join(v.loc));
        loc
    }

    /// Calls `f` on every float literal in the expression.
    pub fn for_each_float(&self, f: &mut impl FnMut(&FloatLit)) {
        match self {
            Expr::Float(v) => f(v),
            Expr::Int(_) | Expr::UInt(_) | Expr::Bool(_) | Expr::Name(_) => {}
            Expr::Unary(_, a) => a.for_each_float(f),
            Expr::Binary(..) => {
                let (first, rest) = self.left_spine();
                first.for_each_float(f);
                for (_, b) in rest {
                    b.for_each_float(f);
                }
            }
            Expr::Ternary(c, a, b) => {
                c.for_each_float(f);
                a.for_each_float(f);
                b.for_each_float(f);
            }
        }
    }
}

impl From<i64> for Expr {
    fn from(v: i64) -> Expr {
        Expr::Int(v)
    }
}

impl From<i32> for Expr {
    fn from(v: i32) -> Expr {
        Expr::Int(v as i64)
    }
}

impl From<u64> for Expr {
    fn from(v: u64) -> Expr {
        Expr::UInt(v)
    }
}

impl From<f64> for Expr {
    /// A float literal. Panics if `v` is not finite (a programming error in builder code).
    fn from(v: f64) -> Expr {
        Expr::Float(FloatLit::new(v).expect("float literals are finite"))
    }
}

impl From<bool> for Expr {
    fn from(v: bool) -> Expr {
        Expr::Bool(v)
    }
}

impl From<&str> for Expr {
    fn from(name: &str) -> Expr {
        Expr::name(name)
    }
}

impl From<Ident> for Expr {
    fn from(id: Ident) -> Expr {
        Expr::Name(id)
    }
}

macro_rules! arith_op {
    ($tr:ident, $method:ident, $op:expr) => {
        impl<R: Into<Expr>> std::ops::$tr<R> for Expr {
            type Output = Expr;
            fn $method(self, rhs: R) -> Expr {
                self.bin($op, rhs)
            }
        }
    };
}
arith_op!(Add, add, BinOp::Add);
arith_op!(Sub, sub, BinOp::Sub);
arith_op!(Mul, mul, BinOp::Mul);
arith_op!(Div, div, BinOp::Div);
arith_op!(Rem, rem, BinOp::Rem);

impl std::ops::Neg for Expr {
    type Output = Expr;
    fn neg(self) -> Expr {
        Expr::Unary(UnOp::Neg, Box::new(self))
    }
}

impl std::ops::Not for Expr {
    type Output = Expr;
    fn not(self) -> Expr {
        Expr::Unary(UnOp::Not, Box::new(self))
    }
}
