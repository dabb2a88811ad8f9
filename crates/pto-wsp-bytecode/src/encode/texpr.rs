//! Typed expression trees of the encoder, and their compilation to expression ops.
//!
//! Why: the bytecode's expression ops are typed (`add.i` vs `add.u`), so every expression is
//! typed once, here, when it is resolved; the interpreter then never checks a type. Constant
//! subexpressions are folded with the IR's own evaluator (`pto_wsp_ir::eval`), so folding can
//! never change a value or hide an error: a constant that fails to evaluate is left unfolded
//! and fails at run time exactly as the reference expander does.

use crate::format::scalar_code;
use crate::op::{Insn, Op};
use pto_wsp_ir::eval::{binary, unary};
use pto_wsp_ir::{BinOp, ScalarType, UnOp, Value};

/// A typed, resolved expression.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum TExpr {
    Const(Value),
    Reg(u16, ScalarType),
    /// A scalar argument of the task being tiered.
    Arg(u16, ScalarType),
    Unary(UnOp, Box<TExpr>),
    Binary(BinOp, Box<TExpr>, Box<TExpr>),
    Ternary(Box<TExpr>, Box<TExpr>, Box<TExpr>),
}

impl TExpr {
    /// The type (the tree was checked when it was built).
    pub(crate) fn ty(&self) -> ScalarType {
        match self {
            TExpr::Const(v) => v.ty(),
            TExpr::Reg(_, t) | TExpr::Arg(_, t) => *t,
            TExpr::Unary(_, a) => a.ty(),
            TExpr::Binary(op, a, _) => match op {
                BinOp::Eq
                | BinOp::Ne
                | BinOp::Lt
                | BinOp::Le
                | BinOp::Gt
                | BinOp::Ge
                | BinOp::And
                | BinOp::Or => ScalarType::Bool,
                BinOp::Add
                | BinOp::Sub
                | BinOp::Mul
                | BinOp::Div
                | BinOp::Rem
                | BinOp::Min
                | BinOp::Max => a.ty(),
            },
            TExpr::Ternary(_, a, _) => a.ty(),
        }
    }

    /// Calls `f` on every register the expression reads.
    pub(crate) fn each_reg(&self, f: &mut impl FnMut(u16)) {
        match self {
            TExpr::Const(_) | TExpr::Arg(..) => {}
            TExpr::Reg(r, _) => f(*r),
            TExpr::Unary(_, a) => a.each_reg(f),
            TExpr::Binary(_, a, b) => {
                a.each_reg(f);
                b.each_reg(f);
            }
            TExpr::Ternary(c, a, b) => {
                c.each_reg(f);
                a.each_reg(f);
                b.each_reg(f);
            }
        }
    }

    /// Whether every register read satisfies `ok`.
    pub(crate) fn regs_all(&self, ok: impl Fn(u16) -> bool) -> bool {
        let mut all = true;
        self.each_reg(&mut |r| all &= ok(r));
        all
    }

    /// An `i64` constant.
    pub(crate) fn int(v: i64) -> TExpr {
        TExpr::Const(Value::I64(v))
    }

    /// `op(a)`, typed and folded. `Err` names the type problem.
    pub(crate) fn unary(op: UnOp, a: TExpr) -> Result<TExpr, String> {
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
    pub(crate) fn binary(op: BinOp, a: TExpr, b: TExpr) -> Result<TExpr, String> {
        let (ta, tb) = (a.ty(), b.ty());
        let ok = match op {
            BinOp::Add
            | BinOp::Sub
            | BinOp::Mul
            | BinOp::Div
            | BinOp::Rem
            | BinOp::Min
            | BinOp::Max => ta == tb && ta != ScalarType::Bool,
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => ta == tb,
            BinOp::And | BinOp::Or => ta == ScalarType::Bool && tb == ScalarType::Bool,
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
    pub(crate) fn ternary(c: TExpr, a: TExpr, b: TExpr) -> Result<TExpr, String> {
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

    /// Compiles to expression ops appended to `out`; 64-bit constants go to `consts`.
    pub(crate) fn compile(&self, out: &mut Vec<Insn>, consts: &mut Vec<u64>) {
        match self {
            TExpr::Const(v) => out.push(load_const(*v, consts)),
            TExpr::Reg(r, _) => out.push(Insn::new(Op::Ldr, *r, 0)),
            TExpr::Arg(i, t) => out.push(Insn {
                op: Op::Arg,
                flags: scalar_code(*t),
                a: *i,
                b: 0,
            }),
            TExpr::Unary(op, a) => {
                a.compile(out, consts);
                out.push(Insn::new(
                    match (op, a.ty()) {
                        (UnOp::Not, _) => Op::Not,
                        (UnOp::Neg, ScalarType::U64) => Op::NegU,
                        (UnOp::Neg, _) => Op::NegI,
                    },
                    0,
                    0,
                ));
            }
            TExpr::Binary(op @ (BinOp::And | BinOp::Or), a, b) => {
                a.compile(out, consts);
                let at = out.len();
                out.push(Insn::new(
                    if *op == BinOp::And {
                        Op::AndSc
                    } else {
                        Op::OrSc
                    },
                    0,
                    0,
                ));
                b.compile(out, consts);
                out[at].a = (out.len() - at - 1) as u16;
            }
            TExpr::Binary(op, a, b) => {
                a.compile(out, consts);
                let signed = a.ty() == ScalarType::I64;
                // `x + k`, `x - k`, `x * k` with a small `i64` constant: one op.
                if signed
                    && let TExpr::Const(Value::I64(k)) = **b
                    && let Ok(k32) = i32::try_from(k)
                {
                    let imm = match op {
                        BinOp::Add => Some(Op::AddImm),
                        BinOp::Sub => Some(Op::SubImm),
                        BinOp::Mul => Some(Op::MulImm),
                        BinOp::Div
                        | BinOp::Rem
                        | BinOp::Min
                        | BinOp::Max
                        | BinOp::Eq
                        | BinOp::Ne
                        | BinOp::Lt
                        | BinOp::Le
                        | BinOp::Gt
                        | BinOp::Ge
                        | BinOp::And
                        | BinOp::Or => None,
                    };
                    if let Some(o) = imm {
                        out.push(Insn::new(o, 0, k32 as u32));
                        return;
                    }
                }
                b.compile(out, consts);
                let unsigned_like = !signed;
                let o = match op {
                    BinOp::Add if signed => Op::AddI,
                    BinOp::Add => Op::AddU,
                    BinOp::Sub if signed => Op::SubI,
                    BinOp::Sub => Op::SubU,
                    BinOp::Mul if signed => Op::MulI,
                    BinOp::Mul => Op::MulU,
                    BinOp::Div if signed => Op::DivI,
                    BinOp::Div => Op::DivU,
                    BinOp::Rem if signed => Op::RemI,
                    BinOp::Rem => Op::RemU,
                    BinOp::Min if signed => Op::MinI,
                    BinOp::Min => Op::MinU,
                    BinOp::Max if signed => Op::MaxI,
                    BinOp::Max => Op::MaxU,
                    BinOp::Eq => Op::Eq,
                    BinOp::Ne => Op::Ne,
                    BinOp::Lt if unsigned_like => Op::LtU,
                    BinOp::Lt => Op::LtI,
                    BinOp::Le if unsigned_like => Op::LeU,
                    BinOp::Le => Op::LeI,
                    BinOp::Gt if unsigned_like => Op::GtU,
                    BinOp::Gt => Op::GtI,
                    BinOp::Ge if unsigned_like => Op::GeU,
                    BinOp::Ge => Op::GeI,
                    // Handled above.
                    BinOp::And => Op::AndSc,
                    BinOp::Or => Op::OrSc,
                };
                out.push(Insn::new(o, 0, 0));
            }
            TExpr::Ternary(c, a, b) => {
                c.compile(out, consts);
                let jz = out.len();
                out.push(Insn::new(Op::Jz, 0, 0));
                a.compile(out, consts);
                let jmp = out.len();
                out.push(Insn::new(Op::Jmp, 0, 0));
                out[jz].a = (out.len() - jz - 1) as u16;
                b.compile(out, consts);
                out[jmp].a = (out.len() - jmp - 1) as u16;
            }
        }
    }
}

fn load_const(v: Value, consts: &mut Vec<u64>) -> Insn {
    match v {
        Value::Bool(b) => Insn::new(Op::Ldb, 0, u32::from(b)),
        Value::I64(x) if i32::try_from(x).is_ok() => Insn::new(Op::Ldi, 0, x as i32 as u32),
        Value::U64(x) if u32::try_from(x).is_ok() => Insn::new(Op::Ldu, 0, x as u32),
        Value::I64(_) | Value::U64(_) => {
            let bits = v.to_bits();
            let i = match consts.iter().position(|&c| c == bits) {
                Some(i) => i,
                None => {
                    consts.push(bits);
                    consts.len() - 1
                }
            };
            Insn {
                op: Op::Ldc,
                flags: scalar_code(v.ty()),
                a: i as u16,
                b: 0,
            }
        }
    }
}
