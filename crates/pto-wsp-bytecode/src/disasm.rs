//! A readable listing of a validated program.
//!
//! Why: a bytecode is only trustworthy if a person can read what it says. The listing shows the
//! schedule, the tables and every instruction, indented by nesting, with expressions printed back
//! as infix text and names where the bytecode stores them.
//!
//! Promise: deterministic text; every instruction appears once, at its index, with its mnemonic
//! from the opcode table; never panics on a validated program.

use crate::format::NONE16;
use crate::op::{Insn, Op, expr_ops, stmt_ops};
use crate::program::{AxisDesc, DNode, ParamDesc, Program};
use std::fmt::Write as _;

impl Program {
    /// The listing (see the module docs).
    pub fn disassemble(&self) -> String {
        let mut out = String::new();
        self.header_listing(&mut out);
        self.decl_listing(&mut out);
        self.kernel_listing(&mut out);
        for (i, a) in self.axes.iter().enumerate() {
            let d = match a {
                AxisDesc::Dense { extent } => format!("dense({})", self.expr_text(*extent)),
                AxisDesc::Ragged { rows, lengths } => format!(
                    "ragged({}, {})",
                    self.expr_text(*rows),
                    self.tensor_name(u32::from(*lengths))
                ),
                AxisDesc::Sparse {
                    rows,
                    indptr,
                    indices,
                } => format!(
                    "sparse({}, {}, {})",
                    self.expr_text(*rows),
                    self.tensor_name(u32::from(*indptr)),
                    self.tensor_name(u32::from(*indices))
                ),
            };
            let _ = writeln!(out, "; axis a{i} {} = {d}", self.axis_name(i as u32));
        }
        let mut depth = 0usize;
        for (pc, insn) in self.insns.iter().enumerate() {
            if matches!(
                insn.op,
                Op::Next
                    | Op::EndIf
                    | Op::SeqEnd
                    | Op::EndProc
                    | Op::Else
                    | Op::Step
                    | Op::EndWhile
            ) {
                depth = depth.saturating_sub(1);
            }
            let text = self.insn_text(pc, insn);
            let _ = writeln!(out, "{pc:04}  {}{text}", "  ".repeat(depth));
            if matches!(
                insn.op,
                Op::Loop
                    | Op::If
                    | Op::Seq
                    | Op::Proc
                    | Op::Consume
                    | Op::Else
                    | Op::Step
                    | Op::While
            ) {
                depth += 1;
            }
        }
        out
    }

    /// The header and schedule lines.
    fn header_listing(&self, out: &mut String) {
        let _ = writeln!(
            *out,
            "; PTOW v{}: {} bytes, {} instructions, {} expressions ({} ops), {} regions, {} loops, {} task statements",
            crate::format::VERSION,
            self.size,
            self.insns.len(),
            self.exprs.len(),
            self.ops.len(),
            self.regions.len(),
            self.loops.len(),
            self.tasks.len()
        );
        let _ = writeln!(
            *out,
            "; schedule: executors {}, streams {}, dispatch {}{}{}{}{}",
            self.sched.executors,
            self.sched.streams,
            self.dnode(0),
            self.sched
                .stream_by
                .map_or(String::new(), |k| format!(", stream_by key{k}")),
            self.sched
                .priority
                .map_or(String::new(), |k| format!(", priority key{k}")),
            self.sched
                .cost
                .map_or(String::new(), |k| format!(", cycles key{k}")),
            self.sched
                .pools
                .as_ref()
                .map_or(String::new(), |(m, levels, otherwise)| {
                    let ls: Vec<String> = levels
                        .iter()
                        .map(|(b, p)| format!("below {b}: {p}"))
                        .collect();
                    format!(
                        ", dispatch_threshold(key{m}) {{ {}, else: {otherwise} }}",
                        ls.join(", ")
                    )
                })
        );
    }

    /// Symbols, slots and tensors.
    fn decl_listing(&self, out: &mut String) {
        for (i, (t, used)) in self.symbols.iter().enumerate() {
            let _ = writeln!(
                *out,
                "; symbol r{i} {}: {t}{}",
                self.symbol_name(i),
                if *used { "" } else { " (unused)" }
            );
        }
        for (i, t) in self.slots.iter().enumerate() {
            let _ = writeln!(
                *out,
                "; slot r{} {}: {t}",
                self.symbols.len() + i,
                self.slot_name(i)
            );
        }
        for (i, t) in self.tensors.iter().enumerate() {
            let shape = match &t.shape {
                Some(dims) => {
                    let d: Vec<String> = dims.iter().map(|&e| self.expr_text(e)).collect();
                    format!("[{}]", d.join(", "))
                }
                None => "[..]".into(),
            };
            let _ = writeln!(
                *out,
                "; tensor t{i} {}: {}{shape}{}",
                self.tensor_name(i as u32),
                t.dtype,
                if t.array { " (bound contents)" } else { "" }
            );
        }
    }

    /// Kernels: parameters, pool and tiers.
    fn kernel_listing(&self, out: &mut String) {
        for (i, k) in self.kernels.iter().enumerate() {
            let ps: Vec<String> = k
                .params
                .iter()
                .map(|p| match p {
                    ParamDesc::Tile(a) => format!("{a} tile"),
                    ParamDesc::Scalar(t) => t.to_string(),
                })
                .collect();
            let tiers = match &k.tiers {
                Some((cases, default)) => {
                    let cs: Vec<String> = cases
                        .iter()
                        .map(|&(c, v)| {
                            format!(
                                "{} => {}",
                                self.expr_text(c),
                                self.kernel_name(u32::from(v))
                            )
                        })
                        .collect();
                    format!(
                        " tiers {{ {}, else => {} }}",
                        cs.join(", "),
                        self.kernel_name(u32::from(*default))
                    )
                }
                None => String::new(),
            };
            let _ = writeln!(
                *out,
                "; kernel k{i} {}({}) @{}{tiers}",
                self.kernel_name(i as u32),
                ps.join(", "),
                k.pool
            );
        }
    }

    fn dnode(&self, n: u32) -> String {
        match self.sched.dispatch.get(n as usize) {
            Some(DNode::RoundRobin(k)) => format!("round_robin({k})"),
            Some(DNode::Affinity(s)) => format!("affinity(key{s})"),
            Some(DNode::Hash(s)) => format!("hash(key{s})"),
            Some(DNode::Threshold {
                metric,
                levels,
                otherwise,
            }) => {
                let ls: Vec<String> = levels
                    .iter()
                    .map(|(b, c)| format!("below {b}: {}", self.dnode(*c)))
                    .collect();
                format!(
                    "threshold(key{metric}) {{ {}, else: {} }}",
                    ls.join(", "),
                    self.dnode(*otherwise)
                )
            }
            Some(DNode::StaticPartition(s)) => {
                let v: Vec<String> = s.iter().map(u64::to_string).collect();
                format!("static_partition({})", v.join(", "))
            }
            Some(DNode::WorkSteal) | None => "work_steal".into(),
        }
    }

    fn keyset_text(&self, k: u32) -> String {
        let ks = &self.keysets[k as usize * self.keyset_len..][..self.keyset_len];
        let v: Vec<String> = ks
            .iter()
            .map(|&e| {
                if e == NONE16 {
                    "-".into()
                } else {
                    self.expr_text(e)
                }
            })
            .collect();
        format!("[{}]", v.join("; "))
    }

    fn insn_text(&self, pc: usize, insn: &Insn) -> String {
        let m = insn.op.mnemonic();
        match insn.op {
            Op::Proc => format!(
                "{m} {} ({}) -> {}",
                insn.a,
                self.proc_name(u32::from(insn.a)),
                insn.b
            ),
            Op::Loop => self.loop_text(m, insn),
            Op::Next | Op::EndIf | Op::Step | Op::SeqEnd | Op::EndProc | Op::Else | Op::Seq => {
                format!("{m} {}", insn.b)
            }
            Op::If => format!("{m} {} else {}", self.expr_text(insn.a), insn.b),
            Op::While => format!("{m} max {} test {}", self.expr_text(insn.a), insn.b),
            Op::EndWhile => format!("{m} {} loop {}", self.expr_text(insn.a), insn.b),
            Op::Break => format!("{m} if {} leave {}", self.expr_text(insn.a), insn.b),
            Op::Task => self.task_text(m, pc),
            Op::Args => {
                let refs = insn.refs();
                let v: Vec<String> = refs[..usize::from(insn.flags).min(3)]
                    .iter()
                    .map(u16::to_string)
                    .collect();
                format!("{m} {}", v.join(", "))
            }
            Op::Set => format!(
                "{m} {} = {}",
                self.reg_name(insn.a),
                self.expr_text(insn.b as u16)
            ),
            Op::Load | Op::Read => {
                let ld = &self.loads[self.aux[pc] as usize];
                let idx: Vec<String> = ld.index.iter().map(|&e| self.expr_text(e)).collect();
                format!(
                    "{m} {} = {}[{}]",
                    self.reg_name(insn.a),
                    self.tensor_name(insn.b),
                    idx.join(", ")
                )
            }
            Op::Send => format!(
                "{m} {}({})",
                self.channel_name(u32::from(insn.a)),
                self.expr_text(insn.b as u16)
            ),
            Op::Consume => format!(
                "{m} {} as r{} -> {}",
                self.channel_name(u32::from(insn.flags)),
                insn.a,
                insn.b
            ),
            Op::Halt | Op::Nop => m.to_string(),
            expr_ops!() => format!("{m} {} {}", insn.a, insn.b),
        }
    }

    /// A `loop`: its variables and axis, and what its hoisting and skipping do.
    fn loop_text(&self, m: &str, insn: &Insn) -> String {
        let l = &self.loops[usize::from(insn.a)];
        let vars = if l.var1 == NONE16 {
            format!("r{}", l.var0)
        } else {
            format!("r{}, r{}", l.var0, l.var1)
        };
        let mut s = format!(
            "{m}{} {vars} in {} -> {}",
            if insn.flags & 1 != 0 { ".ordered" } else { "" },
            self.axis_name(u32::from(l.axis)),
            insn.b
        );
        if let Some(k) = l.hoist {
            let _ = write!(
                s,
                "  ; target per iteration from {}",
                self.keyset_text(u32::from(k))
            );
        }
        if let Some(c) = l.count {
            let _ = write!(
                s,
                "; skip {} tasks{}{}",
                self.expr_text(c),
                if l.row_skip {
                    " per position, whole rows"
                } else {
                    ""
                },
                if l.range_skip { " by index range" } else { "" }
            );
        }
        s
    }

    /// A `task`: its kernel and arguments (from the decoded descriptor), and its keys.
    fn task_text(&self, m: &str, pc: usize) -> String {
        let td = &self.tasks[self.aux[pc] as usize];
        let kd = &self.kernels[usize::from(td.kernel)];
        let mut scalars =
            self.task_scalars[td.scalars.start as usize..td.scalars.end as usize].iter();
        let mut regions =
            self.task_regions[td.regions.start as usize..td.regions.end as usize].iter();
        let mut args = Vec::new();
        for p in &kd.params {
            match p {
                ParamDesc::Scalar(_) => {
                    if let Some(&e) = scalars.next() {
                        args.push(self.expr_text(e));
                    }
                }
                ParamDesc::Tile(a) => {
                    if let Some(&r) = regions.next() {
                        args.push(format!("{a} {}", self.region_text(r)));
                    }
                }
            }
        }
        let mut s = format!(
            "{m} {}({})",
            self.kernel_name(u32::from(td.kernel)),
            args.join(", ")
        );
        match td.keyset {
            Some(k) if td.hoisted => {
                let _ = write!(s, "  ; keys {} (target from the loop)", self.keyset_text(k));
            }
            Some(k) => {
                let _ = write!(s, "  ; keys {}", self.keyset_text(k));
            }
            None => {}
        }
        s
    }

    fn reg_name(&self, r: u16) -> String {
        let r = usize::from(r);
        if r < self.symbols.len() {
            self.symbol_name(r)
        } else if r < self.symbols.len() + self.slots.len() {
            self.slot_name(r - self.symbols.len())
        } else {
            format!("r{r}")
        }
    }

    fn region_text(&self, r: u16) -> String {
        let rd = &self.regions[usize::from(r)];
        let dims: Vec<String> = self.dims[rd.dims.start as usize..rd.dims.end as usize]
            .iter()
            .map(|&(s, z)| {
                if z == NONE16 {
                    self.expr_text(s)
                } else {
                    format!("{} +: {}", self.expr_text(s), self.expr_text(z))
                }
            })
            .collect();
        format!(
            "{}[{}]",
            self.tensor_name(u32::from(rd.tensor)),
            dims.join(", ")
        )
    }

    /// Expression `e` as infix text (postfix ops in braces if its shape is unusual).
    pub(crate) fn expr_text(&self, e: u16) -> String {
        let Some(info) = self.exprs.get(usize::from(e)) else {
            return format!("e{e}?");
        };
        let code = &self.ops[info.start as usize..(info.start + info.len) as usize];
        match self.decompile(code) {
            Some(s) => s,
            None => {
                let v: Vec<String> = code
                    .iter()
                    .map(|i| format!("{} {} {}", i.op.mnemonic(), i.a, i.b))
                    .collect();
                format!("{{{}}}", v.join("; "))
            }
        }
    }

    fn decompile(&self, code: &[Insn]) -> Option<String> {
        let mut st: Vec<Text> = Vec::new();
        let mut k = 0;
        while k < code.len() {
            let i = code[k];
            k += 1;
            let un = |st: &mut Vec<Text>, f: &dyn Fn(String) -> String| -> Option<()> {
                let a = st.pop()?.done();
                st.push(f(a).into());
                Some(())
            };
            // `(a op b)` appended to `a` in place, so a chain of any length decompiles in
            // linear time.
            let infix = |st: &mut Vec<Text>, op: &str, b: &str| -> Option<()> {
                let mut a = st.pop()?;
                a.open += 1;
                a.text.push_str(&format!(" {op} {b})"));
                st.push(a);
                Some(())
            };
            let bin = |st: &mut Vec<Text>, op: &str| -> Option<()> {
                let b = st.pop()?.done();
                if let "min" | "max" = op {
                    let a = st.pop()?.done();
                    st.push(format!("{op}({a}, {b})").into());
                    return Some(());
                }
                infix(st, op, &b)
            };
            match i.op {
                Op::Ldr => st.push(self.reg_name(i.a).into()),
                Op::Ldi => st.push(i.imm().to_string().into()),
                Op::Ldu => st.push(format!("{}u", i.b).into()),
                Op::Ldb => st.push((i.b != 0).to_string().into()),
                Op::Ldc => {
                    let c = *self.consts.get(usize::from(i.a))?;
                    st.push(
                        if i.flags == 2 {
                            format!("{c}u")
                        } else {
                            (c as i64).to_string()
                        }
                        .into(),
                    );
                }
                Op::Arg => st.push(format!("arg{}", i.a).into()),
                Op::NegI | Op::NegU => un(&mut st, &|a| format!("-{a}"))?,
                Op::Not => un(&mut st, &|a| format!("!{a}"))?,
                Op::AddI | Op::AddU => bin(&mut st, "+")?,
                Op::SubI | Op::SubU => bin(&mut st, "-")?,
                Op::MulI | Op::MulU => bin(&mut st, "*")?,
                Op::DivI | Op::DivU => bin(&mut st, "/")?,
                Op::RemI | Op::RemU => bin(&mut st, "%")?,
                Op::MinI | Op::MinU => bin(&mut st, "min")?,
                Op::MaxI | Op::MaxU => bin(&mut st, "max")?,
                Op::AddImm => infix(&mut st, "+", &i.imm().to_string())?,
                Op::SubImm => infix(&mut st, "-", &i.imm().to_string())?,
                Op::MulImm => st.last_mut()?.text.push_str(&format!(" * {}", i.imm())),
                Op::Eq => bin(&mut st, "==")?,
                Op::Ne => bin(&mut st, "!=")?,
                Op::LtI | Op::LtU => bin(&mut st, "<")?,
                Op::LeI | Op::LeU => bin(&mut st, "<=")?,
                Op::GtI | Op::GtU => bin(&mut st, ">")?,
                Op::GeI | Op::GeU => bin(&mut st, ">=")?,
                Op::AndSc | Op::OrSc => {
                    let end = k + usize::from(i.a);
                    let rhs = self.decompile(code.get(k..end)?)?;
                    let op = if i.op == Op::AndSc { "&&" } else { "||" };
                    infix(&mut st, op, &rhs)?;
                    k = end;
                }
                Op::Jz => {
                    let else_at = k + usize::from(i.a);
                    let jmp = *code.get(else_at.checked_sub(1)?)?;
                    if jmp.op != Op::Jmp {
                        return None;
                    }
                    let a = self.decompile(code.get(k..else_at - 1)?)?;
                    let end = else_at + usize::from(jmp.a);
                    let b = self.decompile(code.get(else_at..end)?)?;
                    let c = st.pop()?.done();
                    st.push(format!("({c} ? {a} : {b})").into());
                    k = end;
                }
                Op::Jmp => return None,
                stmt_ops!() => return None,
            }
        }
        if st.len() == 1 {
            st.pop().map(Text::done)
        } else {
            None
        }
    }
}

/// Decompiled text still missing its `open` leading `(`: an infix operation appends to its left
/// operand's text and counts one more, so a chain of any length decompiles in linear time.
struct Text {
    open: usize,
    text: String,
}

impl Text {
    fn done(self) -> String {
        if self.open == 0 {
            return self.text;
        }
        let mut s = "(".repeat(self.open);
        s.push_str(&self.text);
        s
    }
}

impl From<String> for Text {
    fn from(text: String) -> Text {
        Text { open: 0, text }
    }
}
