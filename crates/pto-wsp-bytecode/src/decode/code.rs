//! The instruction stream: every instruction's operands checked against the tables, structured
//! control flow checked to nest with each jump naming its partner, and the task and load
//! descriptors gathered from `task` / `load` / `read` and their `args`.

use super::error::entry;
use super::expr::Exprs;
use super::{DecodeError, Decoder, Want};
use crate::format::{MAX_DEPTH, NO_KEYSET, NONE16};
use crate::op::{Class, Insn, Op, Operand, expr_ops};
use crate::program::{LoadDesc, ParamDesc, Program, TaskDesc};
use pto_wsp_ir::ScalarType;

/// A construct still open at some point of the stream.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Open {
    Proc,
    Loop { hoist: bool },
    Consume,
    If,
    Else { if_pc: usize },
    Seq,
    While,
}

/// The instruction being checked, for its error messages.
struct At {
    pc: usize,
    insn: Insn,
    /// Its byte offset.
    at: usize,
    mn: &'static str,
}

impl At {
    fn bad(&self, field: &'static str, message: String) -> DecodeError {
        DecodeError::BadOperand {
            offset: self.at,
            op: self.mn,
            field,
            message,
        }
    }

    fn structure(&self, message: String) -> DecodeError {
        DecodeError::Structure {
            offset: self.at,
            message,
        }
    }

    fn wrong_stream(&self) -> DecodeError {
        DecodeError::WrongStream {
            offset: self.at,
            op: self.mn,
            stream: "the instruction stream",
        }
    }

    /// Where `b` jumps (the partner instruction), which must lie ahead.
    fn forward(&self) -> Result<(), DecodeError> {
        if self.insn.b as usize <= self.pc {
            return Err(self.structure(format!("`{}` must jump forward", self.mn)));
        }
        Ok(())
    }
}

/// The walk over the stream: the program being filled, the nesting stack and what it has seen.
struct Walk<'a, 'd> {
    dec: &'a Decoder<'d>,
    p: &'a mut Program,
    uses_args: &'a [bool],
    stack: Vec<(Open, usize)>,
    /// Open hoisting loops.
    hoisting: usize,
    next_proc: usize,
}

impl Decoder<'_> {
    /// Checks the instruction stream and fills the task and load descriptors of `p`.
    pub(super) fn structure(&self, p: &mut Program, uses_args: &[bool]) -> Result<(), DecodeError> {
        let insns = &self.img.insns;
        let n = insns.len();
        let mut w = Walk {
            dec: self,
            p,
            uses_args,
            stack: Vec::new(),
            hoisting: 0,
            next_proc: 0,
        };
        let mut pc = 0;
        while pc < n {
            let insn = insns[pc];
            let x = At {
                pc,
                insn,
                at: self.off.insn(pc),
                mn: insn.op.mnemonic(),
            };
            if insn.op.class() != Class::Stmt {
                return Err(x.wrong_stream());
            }
            w.operands(&x)?;
            if w.stack.is_empty() && !matches!(insn.op, Op::Proc | Op::Halt) {
                return Err(x.structure(format!("`{}` outside a process body", x.mn)));
            }
            if w.stack.len() >= MAX_DEPTH {
                return Err(DecodeError::TooDeep {
                    offset: x.at,
                    max: MAX_DEPTH,
                });
            }
            let next = w.insn(&x)?;
            w.p.max_depth = w.p.max_depth.max(w.stack.len());
            pc = next;
        }
        if n == 0 || insns[n - 1].op != Op::Halt {
            return Err(DecodeError::Structure {
                offset: self.off.insn(n),
                message: "the instruction stream must end with `halt`".into(),
            });
        }
        Ok(())
    }

    /// Reads the `args` instructions after a `task` / `load`: exactly `count` references.
    fn refs(&self, pc: usize, count: usize, next: &mut usize) -> Result<Vec<u16>, DecodeError> {
        let insns = &self.img.insns;
        let need = count.div_ceil(3);
        let mut out = Vec::with_capacity(count);
        for j in 0..need {
            let at = self.off.insn(pc + j);
            let Some(i) = insns.get(pc + j) else {
                return Err(DecodeError::Structure {
                    offset: at,
                    message: format!("{count} argument reference(s) expected, the stream ends"),
                });
            };
            let want = (count - 3 * j).min(3);
            if i.op != Op::Args || usize::from(i.flags) != want {
                return Err(DecodeError::Structure {
                    offset: at,
                    message: format!("an `args` instruction with {want} reference(s) expected"),
                });
            }
            let refs = i.refs();
            for (k, r) in refs.iter().enumerate() {
                if k >= want && *r != 0 {
                    return Err(DecodeError::BadOperand {
                        offset: at,
                        op: "args",
                        field: "b",
                        message: "unused reference is not 0".into(),
                    });
                }
            }
            out.extend_from_slice(&refs[..want]);
        }
        *next = pc + need;
        Ok(out)
    }
}

impl Walk<'_, '_> {
    fn dx(&self) -> Exprs<'_> {
        Exprs {
            exprs: &self.p.exprs,
            uses_args: self.uses_args,
            reg_types: &self.p.reg_types,
        }
    }

    /// Checks an expression operand of the instruction.
    fn check(&self, x: &At, e: u16, want: Want) -> Result<(), DecodeError> {
        self.dx().check(e, want, false, x.at, "instructions", x.pc)
    }

    /// The generic operand ranges (by the opcode table) and the flags.
    fn operands(&self, x: &At) -> Result<(), DecodeError> {
        let (p, insn) = (&*self.p, x.insn);
        for (field, kind, v) in [
            ("a", insn.op.operand_a(), insn.a as u32),
            ("b", insn.op.operand_b(), insn.b),
        ] {
            let limit = match kind {
                Operand::Zero => {
                    if v != 0 {
                        return Err(x.bad(field, format!("unused field is {v}, must be 0")));
                    }
                    continue;
                }
                Operand::Reg => p.reg_types.len(),
                Operand::Expr => p.exprs.len(),
                Operand::Kernel => p.kernels.len(),
                Operand::Loop => p.loops.len(),
                Operand::Tensor => p.tensors.len(),
                Operand::Proc => p.n_procs,
                Operand::Channel => p.channels.len(),
                Operand::Pc => self.dec.img.insns.len(),
                Operand::Keyset => {
                    if v == NO_KEYSET && p.keyset_len == 0 {
                        continue;
                    }
                    p.keysets.len().checked_div(p.keyset_len).unwrap_or(0)
                }
                Operand::Refs
                | Operand::Imm
                | Operand::UImm
                | Operand::Const
                | Operand::Arg
                | Operand::Offset => continue,
            };
            if v as usize >= limit {
                return Err(x.bad(
                    field,
                    format!("{kind:?} {v} does not exist (there are {limit})").to_lowercase(),
                ));
            }
        }
        let flag_limit = match insn.op {
            Op::Loop | Op::Task => 1,
            Op::Args => 3,
            Op::Consume => 255,
            _ => 0,
        };
        if insn.flags > flag_limit {
            return Err(x.bad(
                "flags",
                format!("0x{:02x} is not a valid flag set", insn.flags),
            ));
        }
        Ok(())
    }

    /// The open construct on top of the stack.
    fn top(&self) -> Option<(Open, usize)> {
        self.stack.last().copied()
    }

    /// The construct the instruction closes or continues: on top, of a kind in `want`, and the
    /// one its `b` names.
    fn partner(&self, x: &At, want: &[Open]) -> Result<usize, DecodeError> {
        match self.top() {
            Some((o, opc)) if want.contains(&o) && x.insn.b as usize == opc => Ok(opc),
            _ => Err(x.structure(format!(
                "`{}` does not close the construct it names (instruction {})",
                x.mn, x.insn.b
            ))),
        }
    }

    /// Whether the opener at `o` points at this instruction.
    fn points_here(&self, o: usize, x: &At) -> bool {
        self.dec.img.insns[o].b as usize == x.pc
    }

    /// Checks one instruction; returns the pc of the next.
    fn insn(&mut self, x: &At) -> Result<usize, DecodeError> {
        let next = x.pc + 1;
        match x.insn.op {
            Op::Halt => self.halt(x)?,
            Op::Nop => {}
            Op::Proc => self.proc(x)?,
            Op::EndProc => self.close(x, Open::Proc, "`proc` does not point at this `endproc`")?,
            Op::Loop => self.open_loop(x)?,
            Op::Consume => self.consume(x)?,
            Op::Next => self.next(x)?,
            Op::If => {
                self.check(x, x.insn.a, Want::Bool)?;
                x.forward()?;
                self.stack.push((Open::If, x.pc));
            }
            Op::Else => self.else_(x)?,
            Op::EndIf => self.endif(x)?,
            Op::Seq => {
                x.forward()?;
                self.stack.push((Open::Seq, x.pc));
            }
            Op::Step => {
                self.partner(x, &[Open::Seq])?;
            }
            Op::SeqEnd => self.close(x, Open::Seq, "`seq` does not point at this `seqend`")?,
            Op::While => {
                self.check(x, x.insn.a, Want::Exactly(ScalarType::I64))?;
                x.forward()?;
                self.stack.push((Open::While, x.pc));
            }
            Op::EndWhile => {
                self.check(x, x.insn.a, Want::Bool)?;
                self.close(x, Open::While, "`while` does not point at this `wend`")?;
            }
            Op::Break => self.break_(x)?,
            Op::Task => return self.task(x),
            Op::Args => {
                return Err(x.structure("`args` without a `task` or `load` before it".into()));
            }
            Op::Set => self.set(x)?,
            Op::Load | Op::Read => return self.load(x),
            Op::Send => self.check(x, x.insn.b as u16, Want::Exactly(ScalarType::I64))?,
            // Rejected by the class check; kept exhaustive.
            expr_ops!() => return Err(x.wrong_stream()),
        }
        Ok(next)
    }

    /// Closes the construct of kind `kind` on top, whose opener must point here.
    fn close(&mut self, x: &At, kind: Open, not_here: &str) -> Result<(), DecodeError> {
        let o = self.partner(x, &[kind])?;
        if !self.points_here(o, x) {
            return Err(x.structure(not_here.into()));
        }
        self.stack.pop();
        Ok(())
    }

    fn halt(&self, x: &At) -> Result<(), DecodeError> {
        let n = self.dec.img.insns.len();
        if !self.stack.is_empty() || x.pc + 1 != n || self.next_proc != self.p.n_procs {
            return Err(
                x.structure("`halt` must be the last instruction, after every process".into())
            );
        }
        Ok(())
    }

    fn proc(&mut self, x: &At) -> Result<(), DecodeError> {
        if !self.stack.is_empty() || usize::from(x.insn.a) != self.next_proc {
            return Err(x.structure(format!("process {} out of order", x.insn.a)));
        }
        self.next_proc += 1;
        self.stack.push((Open::Proc, x.pc));
        Ok(())
    }

    fn open_loop(&mut self, x: &At) -> Result<(), DecodeError> {
        let hoist = self.p.loops[usize::from(x.insn.a)].hoist.is_some();
        x.forward()?;
        if hoist {
            self.hoisting += 1;
        }
        self.stack.push((Open::Loop { hoist }, x.pc));
        Ok(())
    }

    fn consume(&mut self, x: &At) -> Result<(), DecodeError> {
        let (p, insn) = (&*self.p, x.insn);
        if usize::from(insn.flags) >= p.channels.len() {
            return Err(x.bad("flags", format!("channel {} does not exist", insn.flags)));
        }
        let r = usize::from(insn.a);
        if p.reg_types[r] != ScalarType::I64 || r < p.symbols.len() + p.slots.len() {
            return Err(x.bad(
                "a",
                "a consume variable must be an i64 variable register".into(),
            ));
        }
        x.forward()?;
        self.stack.push((Open::Consume, x.pc));
        Ok(())
    }

    /// `next` closes a loop or a consume.
    fn next(&mut self, x: &At) -> Result<(), DecodeError> {
        let top = self.top();
        let o = match top {
            Some((Open::Loop { .. } | Open::Consume, o)) if x.insn.b as usize == o => o,
            _ => {
                return Err(x.structure("`next` does not close the loop it names".into()));
            }
        };
        if !self.points_here(o, x) {
            return Err(x.structure("the loop does not point at this `next`".into()));
        }
        if let Some((Open::Loop { hoist: true }, _)) = top {
            self.hoisting -= 1;
        }
        self.stack.pop();
        Ok(())
    }

    fn else_(&mut self, x: &At) -> Result<(), DecodeError> {
        let Some((Open::If, o)) = self.top() else {
            return Err(x.structure("`else` outside an `if`".into()));
        };
        if !self.points_here(o, x) {
            return Err(x.structure("the `if` does not point at this `else`".into()));
        }
        x.forward()?;
        self.stack.pop();
        self.stack.push((Open::Else { if_pc: o }, x.pc));
        Ok(())
    }

    fn endif(&mut self, x: &At) -> Result<(), DecodeError> {
        let (o, opener) = match self.top() {
            Some((Open::If, o)) => (o, o),
            Some((Open::Else { if_pc }, e)) => (e, if_pc),
            _ => return Err(x.structure("`endif` outside an `if`".into())),
        };
        if !self.points_here(o, x) || x.insn.b as usize != opener {
            return Err(
                x.structure("`endif` and its `if` / `else` do not point at each other".into())
            );
        }
        self.stack.pop();
        Ok(())
    }

    fn break_(&self, x: &At) -> Result<(), DecodeError> {
        self.check(x, x.insn.a, Want::Bool)?;
        // The innermost enclosing `while`, with no `consume` in between (a break never leaves a
        // consume).
        let target = self
            .stack
            .iter()
            .rev()
            .take_while(|(o, _)| !matches!(o, Open::Consume | Open::Proc))
            .find(|(o, _)| *o == Open::While)
            .map(|&(_, w)| w);
        if target != Some(x.insn.b as usize) {
            return Err(x.structure(format!(
                "`break` does not name its innermost enclosing `while` (instruction {})",
                x.insn.b
            )));
        }
        Ok(())
    }

    fn set(&self, x: &At) -> Result<(), DecodeError> {
        let r = usize::from(x.insn.a);
        if r < self.p.symbols.len() {
            return Err(x.bad("a", "a symbol cannot be set".into()));
        }
        let want = self.p.reg_types[r];
        self.check(x, x.insn.b as u16, Want::Exactly(want))
    }

    /// A `task` and its `args`: the task's descriptor. Returns the pc after the `args`.
    fn task(&mut self, x: &At) -> Result<usize, DecodeError> {
        let (pc, insn) = (x.pc, x.insn);
        let k = usize::from(insn.a);
        let hoisted = insn.flags & 1 != 0;
        if hoisted && self.hoisting == 0 {
            return Err(x.bad("flags", "a hoisted task outside a hoisting loop".into()));
        }
        let p = &*self.p;
        let keyset = if p.keyset_len == 0 {
            None
        } else {
            let ks = &p.keysets[insn.b as usize * p.keyset_len..][..p.keyset_len];
            if ks.contains(&NONE16) {
                return Err(x.bad("b", "a task keyset lacks a key".into()));
            }
            Some(insn.b)
        };
        let params = p.kernels[k].params.clone();
        let mut next = pc + 1;
        let refs = self.dec.refs(pc + 1, params.len(), &mut next)?;
        let s0 = self.p.task_scalars.len() as u32;
        let r0 = self.p.task_regions.len() as u32;
        let coords = self.task_args(pc, &params, &refs)?;
        let p = &mut *self.p;
        p.max_scalars = p.max_scalars.max(p.task_scalars.len() - s0 as usize);
        p.max_regions = p.max_regions.max(p.task_regions.len() - r0 as usize);
        p.max_coords = p.max_coords.max(coords);
        p.aux[pc] = p.tasks.len() as u32;
        p.tasks.push(TaskDesc {
            kernel: insn.a,
            keyset,
            hoisted,
            scalars: s0..p.task_scalars.len() as u32,
            regions: r0..p.task_regions.len() as u32,
            next_pc: next as u32,
            linear: false,
            scalar_lins: 0..0,
            dim_plans: 0..0,
            region_outs: 0..0,
            fixed_pool: None,
            simple: false,
            coord_base: 0,
            n_coords: 0,
        });
        Ok(next)
    }

    /// Checks a task's argument references against its kernel's parameters and appends them;
    /// returns the number of coordinates its regions need.
    fn task_args(
        &mut self,
        pc: usize,
        params: &[ParamDesc],
        refs: &[u16],
    ) -> Result<usize, DecodeError> {
        let mut coords = 0;
        for (j, (param, r)) in params.iter().zip(refs).enumerate() {
            let rat = self.dec.off.insn(pc + 1 + j / 3);
            match param {
                ParamDesc::Scalar(t) => {
                    self.dx()
                        .check(*r, Want::Exactly(*t), false, rat, "task arguments", j)?;
                    self.p.task_scalars.push(*r);
                }
                ParamDesc::Tile(_) => {
                    let Some(reg) = self.p.regions.get(usize::from(*r)) else {
                        return Err(entry(
                            rat,
                            "task arguments",
                            j,
                            format!("region {r} does not exist"),
                        ));
                    };
                    coords += reg.dims.len();
                    self.p.task_regions.push(*r);
                }
            }
        }
        Ok(coords)
    }

    /// A `load` (of bound contents) or a `read` (of a computed tensor) and its `args`: the
    /// load's descriptor. Returns the pc after the `args`.
    fn load(&mut self, x: &At) -> Result<usize, DecodeError> {
        let (pc, insn) = (x.pc, x.insn);
        let p = &*self.p;
        let r = usize::from(insn.a);
        if r < p.symbols.len() || p.reg_types[r] == ScalarType::Bool {
            return Err(x.bad(
                "a",
                format!("`{}` needs an integer register that is not a symbol", x.mn),
            ));
        }
        let t = &p.tensors[insn.b as usize];
        // `load`: bound contents; `read`: a computed tensor (contents not bound, produced by the
        // run) of an integer element type.
        let computed = insn.op == Op::Read;
        let rank = match (&t.shape, t.array) {
            (Some(s), true) if !computed => s.len(),
            (Some(s), false) if computed && t.dtype.is_integer() => s.len(),
            _ if computed => {
                return Err(x.bad(
                    "b",
                    "`read` needs an integer tensor with a shape and no bound contents".into(),
                ));
            }
            _ => {
                return Err(x.bad(
                    "b",
                    "`load` needs a tensor with a shape and bound contents".into(),
                ));
            }
        };
        let mut next = pc + 1;
        let refs = self.dec.refs(pc + 1, rank, &mut next)?;
        for (j, r) in refs.iter().enumerate() {
            let at = self.dec.off.insn(pc + 1 + j / 3);
            self.dx()
                .check(*r, Want::Int, false, at, "load indices", j)?;
        }
        let p = &mut *self.p;
        p.aux[pc] = p.loads.len() as u32;
        p.loads.push(LoadDesc {
            reg: insn.a,
            tensor: insn.b as u16,
            index: refs,
            next_pc: next as u32,
        });
        Ok(next)
    }
}
