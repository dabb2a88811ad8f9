//! Expressions: each expression's code checked by abstract interpretation over a stack of types
//! (types, underflow, jumps and where paths meet, stack depth, one result), its fast form found,
//! and the checks a use site makes of an expression ([`Exprs`]).

use super::error::entry;
use super::{DecodeError, Decoder, Want};
use crate::format::{MAX_STACK, from_scalar_code};
use crate::op::{Class, Insn, Op, Operand, stmt_ops};
use crate::program::{ExprInfo, Fast};
use pto_wsp_ir::ScalarType;
use pto_wsp_ir::ScalarType::{Bool, I64, U64};

/// The stack of types at one point of an expression; `None` after an unconditional jump until a
/// jump target is reached.
type Stack = Option<Vec<ScalarType>>;

/// The state of checking one expression: where it is, and the stack expected at each op that is
/// a jump target (and at the end, index `len`).
struct ExprCheck<'d> {
    dec: &'d Decoder<'d>,
    /// The expression's index.
    i: usize,
    /// Its first op.
    start: usize,
    len: usize,
    regs: &'d [ScalarType],
    targets: Vec<Stack>,
    uses_args: bool,
}

impl Decoder<'_> {
    /// Checks expression `i` and finds its type and fast form.
    pub(super) fn expr(
        &self,
        i: usize,
        start: u16,
        len: u16,
        regs: &[ScalarType],
    ) -> Result<(ExprInfo, bool), DecodeError> {
        let ops = &self.img.ops;
        let (start, len) = (usize::from(start), usize::from(len));
        let at0 = self.off.exprs + 4 * i;
        if len == 0 || start + len > ops.len() {
            return Err(DecodeError::BadExpr {
                offset: at0,
                expr: i,
                message: format!(
                    "ops {start}..{} are not inside the {} ops",
                    start + len,
                    ops.len()
                ),
            });
        }
        let code = &ops[start..start + len];
        let mut cx = ExprCheck {
            dec: self,
            i,
            start,
            len,
            regs,
            targets: vec![None; len + 1],
            uses_args: false,
        };
        let mut stack: Stack = Some(Vec::new());
        for (k, insn) in code.iter().enumerate() {
            cx.op(k, insn, &mut stack)?;
            if let Some(st) = &stack
                && st.len() > MAX_STACK
            {
                return Err(DecodeError::StackTooDeep {
                    offset: self.off.op(start + k),
                    expr: i,
                    max: MAX_STACK,
                });
            }
        }
        let ty = cx.result(stack)?;
        Ok((
            ExprInfo {
                start: start as u32,
                len: len as u32,
                ty,
                fast: fast(code, regs, &self.img.consts),
            },
            cx.uses_args,
        ))
    }
}

impl ExprCheck<'_> {
    fn bad(&self, k: usize, message: String) -> DecodeError {
        DecodeError::BadExpr {
            offset: self.dec.off.op(self.start + k),
            expr: self.i,
            message,
        }
    }

    fn wrong_stream(&self, k: usize, insn: &Insn) -> DecodeError {
        DecodeError::WrongStream {
            offset: self.dec.off.op(self.start + k),
            op: insn.op.mnemonic(),
            stream: "expression code",
        }
    }

    fn pop(&self, st: &mut Vec<ScalarType>, k: usize) -> Result<ScalarType, DecodeError> {
        st.pop()
            .ok_or_else(|| self.bad(k, "stack underflow".into()))
    }

    /// Records the stack expected where op `k` jumps to.
    fn jump(&mut self, st: &[ScalarType], k: usize, insn: &Insn) -> Result<(), DecodeError> {
        let len = self.len;
        let t = k + 1 + usize::from(insn.a);
        if t > len {
            return Err(self.bad(k, format!("jump past the end ({t} > {len})")));
        }
        match &self.targets[t] {
            Some(prev) if prev != st => {
                Err(self.bad(k, "stacks disagree where two paths meet".into()))
            }
            _ => {
                self.targets[t] = Some(st.to_vec());
                Ok(())
            }
        }
    }

    /// Checks op `k` against the stack before it and leaves the stack after it.
    fn op(&mut self, k: usize, insn: &Insn, stack: &mut Stack) -> Result<(), DecodeError> {
        if insn.op.class() != Class::Expr {
            return Err(self.wrong_stream(k, insn));
        }
        if let Some(t) = self.targets[k].take() {
            match &stack {
                Some(s) if *s != t => {
                    return Err(self.bad(k, "stacks disagree where two paths meet".into()));
                }
                Some(_) => {}
                None => *stack = Some(t),
            }
        }
        let Some(st) = stack.as_mut() else {
            return Err(self.bad(k, "unreachable op".into()));
        };
        let zero_a = insn.op.operand_a() == Operand::Zero && insn.a != 0;
        let zero_b = insn.op.operand_b() == Operand::Zero && insn.b != 0;
        let flags_used = matches!(insn.op, Op::Ldc | Op::Arg);
        if zero_a || zero_b || (!flags_used && insn.flags != 0) {
            return Err(self.bad(
                k,
                format!("`{}` has a non-zero unused field", insn.op.mnemonic()),
            ));
        }
        match insn.op {
            Op::Ldr | Op::Ldi | Op::Ldu | Op::Ldb | Op::Ldc | Op::Arg => self.load(k, insn, st),
            Op::NegI | Op::NegU | Op::Not | Op::AddImm | Op::SubImm | Op::MulImm => {
                self.unary(k, insn, st)
            }
            Op::AddI
            | Op::SubI
            | Op::MulI
            | Op::DivI
            | Op::RemI
            | Op::MinI
            | Op::MaxI
            | Op::AddU
            | Op::SubU
            | Op::MulU
            | Op::DivU
            | Op::RemU
            | Op::MinU
            | Op::MaxU
            | Op::LtI
            | Op::LeI
            | Op::GtI
            | Op::GeI => self.binary(k, insn, st),
            Op::LtU | Op::LeU | Op::GtU | Op::GeU | Op::Eq | Op::Ne => {
                let (b, a) = (self.pop(st, k)?, self.pop(st, k)?);
                let ok = a == b && (matches!(insn.op, Op::Eq | Op::Ne) || a != I64);
                if !ok {
                    return Err(self.bad(
                        k,
                        format!("`{}` cannot compare {a} and {b}", insn.op.mnemonic()),
                    ));
                }
                st.push(Bool);
                Ok(())
            }
            Op::AndSc | Op::OrSc => {
                if st.last() != Some(&Bool) {
                    return Err(self.bad(k, format!("`{}` needs a bool", insn.op.mnemonic())));
                }
                self.jump(st, k, insn)?;
                st.pop();
                Ok(())
            }
            Op::Jz => {
                if self.pop(st, k)? != Bool {
                    return Err(self.bad(k, "`jz` needs a bool".into()));
                }
                self.jump(st, k, insn)
            }
            Op::Jmp => {
                self.jump(st, k, insn)?;
                *stack = None;
                Ok(())
            }
            stmt_ops!() => Err(self.wrong_stream(k, insn)),
        }
    }

    /// Ops that push one value: registers, immediates, constants, task arguments.
    fn load(&mut self, k: usize, insn: &Insn, st: &mut Vec<ScalarType>) -> Result<(), DecodeError> {
        match insn.op {
            Op::Ldr => {
                let t = *self
                    .regs
                    .get(usize::from(insn.a))
                    .ok_or_else(|| self.bad(k, format!("register {} does not exist", insn.a)))?;
                st.push(t);
            }
            Op::Ldi => st.push(I64),
            Op::Ldu => st.push(U64),
            Op::Ldb => {
                if insn.b > 1 {
                    return Err(self.bad(k, "a bool must be 0 or 1".into()));
                }
                st.push(Bool);
            }
            Op::Ldc => {
                if usize::from(insn.a) >= self.dec.img.consts.len() {
                    return Err(self.bad(k, format!("constant {} does not exist", insn.a)));
                }
                match from_scalar_code(insn.flags) {
                    Some(t @ (I64 | U64)) => st.push(t),
                    _ => return Err(self.bad(k, "a constant must be i64 or u64".into())),
                }
            }
            _ => {
                // `arg`
                self.uses_args = true;
                st.push(
                    from_scalar_code(insn.flags)
                        .ok_or_else(|| self.bad(k, "bad type code".into()))?,
                );
            }
        }
        Ok(())
    }

    /// Negations, `not` and the immediate forms: one operand of the op's own type.
    fn unary(&self, k: usize, insn: &Insn, st: &mut Vec<ScalarType>) -> Result<(), DecodeError> {
        let want = match insn.op {
            Op::NegU => U64,
            Op::Not => Bool,
            _ => I64,
        };
        if self.pop(st, k)? != want {
            return Err(self.bad(k, format!("`{}` needs a {want}", insn.op.mnemonic())));
        }
        st.push(want);
        Ok(())
    }

    /// Arithmetic and the signed comparisons: two operands of the op's type.
    fn binary(&self, k: usize, insn: &Insn, st: &mut Vec<ScalarType>) -> Result<(), DecodeError> {
        let want = match insn.op {
            Op::AddU | Op::SubU | Op::MulU | Op::DivU | Op::RemU | Op::MinU | Op::MaxU => U64,
            _ => I64,
        };
        let (b, a) = (self.pop(st, k)?, self.pop(st, k)?);
        if a != want || b != want {
            return Err(self.bad(
                k,
                format!(
                    "`{}` needs two {want}s, found {a} and {b}",
                    insn.op.mnemonic()
                ),
            ));
        }
        st.push(
            if matches!(insn.op, Op::LtI | Op::LeI | Op::GtI | Op::GeI) {
                Bool
            } else {
                want
            },
        );
        Ok(())
    }

    /// The one value every path leaves at the end.
    fn result(&mut self, stack: Stack) -> Result<ScalarType, DecodeError> {
        let len = self.len;
        let end = match (stack, self.targets[len].take()) {
            (Some(s), Some(t)) if s != t => {
                return Err(self.bad(len - 1, "stacks disagree at the end".into()));
            }
            (Some(s), _) => s,
            (None, Some(t)) => t,
            (None, None) => return Err(self.bad(len - 1, "no path reaches the end".into())),
        };
        let [ty] = end[..] else {
            return Err(self.bad(len - 1, format!("leaves {} values, not 1", end.len())));
        };
        Ok(ty)
    }
}

/// Use-site checks of expressions.
pub(super) struct Exprs<'a> {
    pub(super) exprs: &'a [ExprInfo],
    pub(super) uses_args: &'a [bool],
    pub(super) reg_types: &'a [ScalarType],
}

impl Exprs<'_> {
    pub(super) fn check(
        &self,
        e: u16,
        want: Want,
        args_ok: bool,
        at: usize,
        table: &'static str,
        index: usize,
    ) -> Result<(), DecodeError> {
        let Some(info) = self.exprs.get(usize::from(e)) else {
            return Err(entry(
                at,
                table,
                index,
                format!("expression {e} does not exist"),
            ));
        };
        let ok = match want {
            Want::Int => info.ty != ScalarType::Bool,
            Want::Bool => info.ty == ScalarType::Bool,
            Want::Exactly(t) => info.ty == t,
        };
        if !ok {
            return Err(entry(
                at,
                table,
                index,
                format!("expression {e} has the wrong type ({})", info.ty),
            ));
        }
        if !args_ok && self.uses_args[usize::from(e)] {
            return Err(entry(
                at,
                table,
                index,
                format!("expression {e} reads task arguments here"),
            ));
        }
        Ok(())
    }

    /// Whether every register expression `e` reads is below `limit`.
    pub(super) fn regs_below(&self, ops: &[Insn], e: u16, limit: u16) -> bool {
        let _ = self.reg_types;
        let info = &self.exprs[usize::from(e)];
        ops[info.start as usize..(info.start + info.len) as usize]
            .iter()
            .all(|i| i.op != Op::Ldr || i.a < limit)
    }

    /// Whether every `arg` op of `e` names a scalar parameter of that type.
    pub(super) fn args_fit(
        &self,
        ops: &[Insn],
        e: u16,
        types: &[ScalarType],
    ) -> Result<(), String> {
        let info = &self.exprs[usize::from(e)];
        for i in &ops[info.start as usize..(info.start + info.len) as usize] {
            if i.op == Op::Arg {
                match types.get(usize::from(i.a)) {
                    Some(t) if from_scalar_code(i.flags) == Some(*t) => {}
                    Some(_) => return Err(format!("tier argument {} has the wrong type", i.a)),
                    None => return Err(format!("tier argument {} does not exist", i.a)),
                }
            }
        }
        Ok(())
    }
}

/// The fast form of a checked expression.
fn fast(code: &[Insn], regs: &[ScalarType], consts: &[u64]) -> Fast {
    match code {
        [i] => match i.op {
            Op::Ldi => Fast::Const(i.imm() as u64),
            Op::Ldu => Fast::Const(u64::from(i.b)),
            Op::Ldb => Fast::Const(u64::from(i.b)),
            Op::Ldc => consts
                .get(usize::from(i.a))
                .map_or(Fast::None, |&c| Fast::Const(c)),
            Op::Ldr => Fast::Reg(i.a),
            _ => Fast::None,
        },
        [r, rest @ ..]
            if r.op == Op::Ldr && regs.get(usize::from(r.a)) == Some(&ScalarType::I64) =>
        {
            let (mut pre, mut mul, mut post) = (0i64, 1i64, 0i64);
            let mut stage = 0; // 0: before mul, 1: after mul
            for i in rest {
                let k = i.imm();
                match (i.op, stage) {
                    (Op::AddImm, 0) if pre == 0 => pre = k,
                    (Op::SubImm, 0) if pre == 0 => pre = -k,
                    (Op::MulImm, 0) => {
                        mul = k;
                        stage = 1;
                    }
                    (Op::AddImm, 1) if post == 0 => post = k,
                    (Op::SubImm, 1) if post == 0 => post = -k,
                    _ => return Fast::None,
                }
            }
            if rest.is_empty() {
                return Fast::Reg(r.a);
            }
            Fast::Affine {
                reg: r.a,
                pre,
                mul,
                post,
            }
        }
        _ => Fast::None,
    }
}
