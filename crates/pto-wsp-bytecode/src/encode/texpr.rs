//! Compilation of typed expressions (`pto_wsp_ir::resolve::TExpr`) to expression ops.
//!
//! Why: the bytecode's expression ops are typed (`add.i` vs `add.u`); the resolver typed and
//! folded every expression once, so this is a plain walk, and the interpreter never checks a
//! type.

use crate::format::scalar_code;
use crate::op::{Insn, Op};
use pto_wsp_ir::resolve::TExpr;
use pto_wsp_ir::{BinOp, ScalarType, UnOp, Value};

/// Compilation of the IR's typed expressions to the bytecode's expression ops.
pub(crate) trait CompileExpr {
    /// Compiles to expression ops appended to `out`; 64-bit constants go to `consts`.
    fn compile(&self, out: &mut Vec<Insn>, consts: &mut Vec<u64>);
}

impl CompileExpr for TExpr {
    fn compile(&self, out: &mut Vec<Insn>, consts: &mut Vec<u64>) {
        match self {
            TExpr::Const(v) => out.push(load_const(*v, consts)),
            // Registers and arguments fit 16 bits (checked when lowering).
            TExpr::Reg(r, _) => out.push(Insn::new(Op::Ldr, *r as u16, 0)),
            TExpr::Arg(i, t) => out.push(Insn {
                op: Op::Arg,
                flags: scalar_code(*t),
                a: *i as u16,
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
            // A chain along its left operands in a loop: a flat sum of any length compiles
            // without recursing down it.
            TExpr::Binary(..) => {
                let (first, rest) = self.left_spine();
                first.compile(out, consts);
                for (op, b) in rest {
                    link(op, b, out, consts);
                }
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

/// Appends `OP b` to the code of the left operand `x` already in `out`.
fn link(op: BinOp, b: &TExpr, out: &mut Vec<Insn>, consts: &mut Vec<u64>) {
    if let BinOp::And | BinOp::Or = op {
        let at = out.len();
        let sc = if op == BinOp::And {
            Op::AndSc
        } else {
            Op::OrSc
        };
        out.push(Insn::new(sc, 0, 0));
        b.compile(out, consts);
        out[at].a = (out.len() - at - 1) as u16;
        return;
    }
    // Both operands of an arithmetic operator or a comparison have one type.
    let signed = b.ty() == ScalarType::I64;
    // `x + k`, `x - k`, `x * k` with a small `i64` constant: one op.
    if signed
        && let TExpr::Const(Value::I64(k)) = *b
        && let Ok(k32) = i32::try_from(k)
        && let Some(o) = imm_op(op)
    {
        out.push(Insn::new(o, 0, k32 as u32));
        return;
    }
    b.compile(out, consts);
    out.push(Insn::new(binary_op(op, signed), 0, 0));
}

/// The one-op form of `x OP k` for a small `i64` constant `k`, where there is one.
fn imm_op(op: BinOp) -> Option<Op> {
    match op {
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
    }
}

/// The typed op of a binary operator whose left operand is `i64` (`signed`) or not.
fn binary_op(op: BinOp, signed: bool) -> Op {
    let unsigned_like = !signed;
    match op {
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
