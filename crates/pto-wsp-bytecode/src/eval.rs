//! Evaluating expressions of a validated program over raw 64-bit registers.
//!
//! Why: expressions are evaluated for every task (region starts and sizes, parameters, dispatch
//! and stream keys), so this is the interpreter's inner loop. Most expressions of real workloads
//! are constants, registers or `(r + a) * m + b`; those are evaluated from a precomputed fast form
//! with no dispatch at all. Everything else runs the typed stack code with a fixed-size stack on
//! the native stack (no allocation).
//!
//! Promise: the value, and the error when there is one, is exactly what
//! `pto_wsp_ir::eval` gives for the source expression (same checked arithmetic, same laziness of
//! `&&`, `||` and `?:`, same error operands). Never panics on a validated program whose registers
//! are the program's own.

use crate::format::MAX_STACK;
use crate::op::{Op, stmt_ops};
use crate::program::{ExprInfo, Fast, Program};
use pto_wsp_ir::eval::EvalError;
use pto_wsp_ir::{ScalarType, Value};

/// The typed value of raw bits.
#[inline]
pub(crate) fn value(raw: u64, ty: ScalarType) -> Value {
    match ty {
        ScalarType::Bool => Value::Bool(raw != 0),
        ScalarType::I64 => Value::I64(raw as i64),
        ScalarType::U64 => Value::U64(raw),
    }
}

fn overflow(op: &'static str, lhs: Value, rhs: Option<Value>) -> EvalError {
    EvalError::Overflow { op, lhs, rhs }
}

// The stack code's operations on the evaluation stack `$s` with depth `$sp` (the verifier
// guarantees the depth). Macros, so that the one dispatch `match` stays one jump table.

/// Pops a binary operation's operands; the result goes to `$s[$sp - 1]`.
macro_rules! bin {
    ($s:ident, $sp:ident) => {{
        $sp -= 1;
        ($s[$sp - 1], $s[$sp])
    }};
}

/// Pushes `$v`.
macro_rules! push {
    ($s:ident, $sp:ident, $v:expr) => {{
        $s[$sp] = $v;
        $sp += 1;
    }};
}

/// A binary operation that cannot fail: `$f` of the two operands (raw bits) is the result.
macro_rules! pure {
    ($s:ident, $sp:ident, $f:expr) => {{
        let (a, b) = bin!($s, $sp);
        $s[$sp - 1] = $f(a, b);
    }};
}

/// Checked arithmetic of type `$t`; overflow is an error naming both operands.
macro_rules! arith {
    ($s:ident, $sp:ident, $t:ty, $wrap:ident, $op:literal, $f:ident) => {{
        let (a, b) = bin!($s, $sp);
        let (x, y) = (a as $t, b as $t);
        $s[$sp - 1] = x
            .$f(y)
            .ok_or_else(|| overflow($op, $wrap(x), Some($wrap(y))))? as u64;
    }};
}

/// Checked division or remainder of type `$t`: by zero and overflow are errors.
macro_rules! div {
    ($s:ident, $sp:ident, $t:ty, $wrap:ident, $op:literal, $f:ident) => {{
        let (a, b) = bin!($s, $sp);
        let (x, y) = (a as $t, b as $t);
        if y == 0 {
            return Err(EvalError::DivisionByZero {
                op: $op,
                lhs: $wrap(x),
            });
        }
        $s[$sp - 1] = x
            .$f(y)
            .ok_or_else(|| overflow($op, $wrap(x), Some($wrap(y))))? as u64;
    }};
}

/// A comparison of type `$t`.
macro_rules! cmp {
    ($s:ident, $sp:ident, $t:ty, $f:ident) => {{
        let (a, b) = bin!($s, $sp);
        $s[$sp - 1] = u64::from((a as $t).$f(&(b as $t)));
    }};
}

impl Program {
    /// Evaluates expression `e` (raw bits of its type). `args` are the scalar arguments of the
    /// task being tiered (empty elsewhere).
    #[inline]
    pub(crate) fn eval(&self, e: u16, regs: &[u64], args: &[u64]) -> Result<u64, EvalError> {
        let info = &self.exprs[usize::from(e)];
        match info.fast {
            Fast::Const(c) => return Ok(c),
            Fast::Reg(r) => return Ok(regs[usize::from(r)]),
            Fast::Affine {
                reg,
                pre,
                mul,
                post,
            } => {
                let x = regs[usize::from(reg)] as i64;
                if let Some(v) = x
                    .checked_add(pre)
                    .and_then(|v| v.checked_mul(mul))
                    .and_then(|v| v.checked_add(post))
                {
                    return Ok(v as u64);
                }
            }
            Fast::None => {}
        }
        self.eval_ops(info, regs, args)
    }

    /// The type of expression `e`.
    #[inline]
    pub(crate) fn expr_type(&self, e: u16) -> ScalarType {
        self.exprs[usize::from(e)].ty
    }

    #[inline(never)]
    fn eval_ops(&self, info: &ExprInfo, regs: &[u64], args: &[u64]) -> Result<u64, EvalError> {
        let code = &self.ops[info.start as usize..(info.start + info.len) as usize];
        let mut stack = [0u64; MAX_STACK + 1];
        let mut sp = 0usize;
        let mut pc = 0usize;
        use Value::{I64, U64};
        while pc < code.len() {
            let i = code[pc];
            pc += 1;
            match i.op {
                Op::Ldr => push!(stack, sp, regs[usize::from(i.a)]),
                Op::Ldi => push!(stack, sp, i.imm() as u64),
                Op::Ldu | Op::Ldb => push!(stack, sp, u64::from(i.b)),
                Op::Ldc => push!(stack, sp, self.consts[usize::from(i.a)]),
                Op::Arg => push!(stack, sp, args.get(usize::from(i.a)).copied().unwrap_or(0)),
                Op::NegI => {
                    let x = stack[sp - 1] as i64;
                    stack[sp - 1] =
                        x.checked_neg().ok_or_else(|| overflow("-", I64(x), None))? as u64;
                }
                Op::NegU => {
                    let x = stack[sp - 1];
                    stack[sp - 1] = x.checked_neg().ok_or_else(|| overflow("-", U64(x), None))?;
                }
                Op::Not => stack[sp - 1] ^= 1,
                Op::AddI => arith!(stack, sp, i64, I64, "+", checked_add),
                Op::AddU => arith!(stack, sp, u64, U64, "+", checked_add),
                Op::SubI => arith!(stack, sp, i64, I64, "-", checked_sub),
                Op::SubU => arith!(stack, sp, u64, U64, "-", checked_sub),
                Op::MulI => arith!(stack, sp, i64, I64, "*", checked_mul),
                Op::MulU => arith!(stack, sp, u64, U64, "*", checked_mul),
                Op::DivI => div!(stack, sp, i64, I64, "/", checked_div),
                Op::DivU => div!(stack, sp, u64, U64, "/", checked_div),
                Op::RemI => div!(stack, sp, i64, I64, "%", checked_rem),
                Op::RemU => div!(stack, sp, u64, U64, "%", checked_rem),
                Op::MinI => pure!(stack, sp, |a, b| (a as i64).min(b as i64) as u64),
                Op::MinU => pure!(stack, sp, |a: u64, b| a.min(b)),
                Op::MaxI => pure!(stack, sp, |a, b| (a as i64).max(b as i64) as u64),
                Op::MaxU => pure!(stack, sp, |a: u64, b| a.max(b)),
                Op::AddImm | Op::SubImm | Op::MulImm => {
                    let x = stack[sp - 1] as i64;
                    let k = i.imm();
                    let (r, sym) = match i.op {
                        Op::AddImm => (x.checked_add(k), "+"),
                        Op::SubImm => (x.checked_sub(k), "-"),
                        _ => (x.checked_mul(k), "*"),
                    };
                    stack[sp - 1] = r.ok_or_else(|| overflow(sym, I64(x), Some(I64(k))))? as u64;
                }
                Op::Eq => pure!(stack, sp, |a, b| u64::from(a == b)),
                Op::Ne => pure!(stack, sp, |a, b| u64::from(a != b)),
                Op::LtI => cmp!(stack, sp, i64, lt),
                Op::LeI => cmp!(stack, sp, i64, le),
                Op::GtI => cmp!(stack, sp, i64, gt),
                Op::GeI => cmp!(stack, sp, i64, ge),
                Op::LtU => cmp!(stack, sp, u64, lt),
                Op::LeU => cmp!(stack, sp, u64, le),
                Op::GtU => cmp!(stack, sp, u64, gt),
                Op::GeU => cmp!(stack, sp, u64, ge),
                Op::AndSc => {
                    if stack[sp - 1] == 0 {
                        pc += usize::from(i.a);
                    } else {
                        sp -= 1;
                    }
                }
                Op::OrSc => {
                    if stack[sp - 1] != 0 {
                        pc += usize::from(i.a);
                    } else {
                        sp -= 1;
                    }
                }
                Op::Jz => {
                    sp -= 1;
                    if stack[sp] == 0 {
                        pc += usize::from(i.a);
                    }
                }
                Op::Jmp => pc += usize::from(i.a),
                stmt_ops!() => {
                    // The verifier keeps statement opcodes out of expression code.
                    return Err(EvalError::Unbound {
                        name: format!("<statement opcode `{}` in an expression>", i.op.mnemonic()),
                    });
                }
            }
        }
        Ok(stack[0])
    }
}
