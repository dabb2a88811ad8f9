//! The opcode table: the one place an opcode's byte, mnemonic, class and operands are written.
//!
//! Why: the encoder, the decoder, the disassembler and the interpreter must agree on every
//! opcode. They all read this table: [`Op`] comes from one macro invocation, the decoder checks
//! each operand by its [`Operand`] kind, the disassembler prints it by the same kind, and the
//! interpreter and expression evaluator `match` on [`Op`] exhaustively.
//!
//! Promises: [`Op::from_byte`] is the exact inverse of `op as u8`; every opcode has one class
//! ([`Class::Stmt`] opcodes live in the instruction stream, [`Class::Expr`] ones in expression
//! code) and one operand kind per field; an instruction is 8 bytes: opcode, flags, `a: u16`,
//! `b: u32`, little-endian (the on-device generation specification's bytecode format).

/// Which stream an opcode belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// The instruction stream (workload structure, tasks, slots, CSP).
    Stmt,
    /// Expression code (a stack machine over 64-bit registers).
    Expr,
}

/// What an operand field holds; the decoder checks it, the disassembler prints it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operand {
    /// Unused: must be zero.
    Zero,
    /// A register index.
    Reg,
    /// An expression index.
    Expr,
    /// A kernel index.
    Kernel,
    /// A loop descriptor index.
    Loop,
    /// A tensor index.
    Tensor,
    /// A keyset index (`0xFFFF_FFFF` when the schedule has no per-task keys).
    Keyset,
    /// A process index.
    Proc,
    /// A channel index.
    Channel,
    /// An instruction index (a structured jump: checked against its partner instruction).
    Pc,
    /// Up to three 16-bit references (`a`, `b & 0xFFFF`, `b >> 16`); the flags say how many.
    Refs,
    /// A signed 32-bit immediate.
    Imm,
    /// An unsigned 32-bit immediate.
    UImm,
    /// A constant-pool index.
    Const,
    /// The index of a scalar argument of the task whose tiers are being chosen.
    Arg,
    /// A forward offset within the expression (target = this op + 1 + offset).
    Offset,
}

macro_rules! opcodes {
    ($( $(#[$doc:meta])* $name:ident = $byte:literal, $mnem:literal, $class:ident, $a:ident, $b:ident; )*) => {
        /// Every opcode of the bytecode (see the module docs).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum Op {
            $( $(#[$doc])* $name = $byte, )*
        }

        impl Op {
            /// Every opcode, in table order.
            pub const ALL: &'static [Op] = &[$(Op::$name),*];

            /// The opcode with this byte, if any.
            pub fn from_byte(b: u8) -> Option<Op> {
                match b {
                    $( $byte => Some(Op::$name), )*
                    _ => None,
                }
            }

            /// The mnemonic the disassembler prints.
            pub fn mnemonic(self) -> &'static str {
                match self { $( Op::$name => $mnem, )* }
            }

            /// Which stream the opcode belongs to.
            pub fn class(self) -> Class {
                match self { $( Op::$name => Class::$class, )* }
            }

            /// What operand `a` (16 bits) holds.
            pub fn operand_a(self) -> Operand {
                match self { $( Op::$name => Operand::$a, )* }
            }

            /// What operand `b` (32 bits) holds.
            pub fn operand_b(self) -> Operand {
                match self { $( Op::$name => Operand::$b, )* }
            }
        }
    };
}

opcodes! {
    /// End of the program.
    Halt = 0x00, "halt", Stmt, Zero, Zero;
    /// Does nothing.
    Nop = 0x01, "nop", Stmt, Zero, Zero;
    /// Start a loop over a dense, ragged or sparse axis: `a` loop descriptor, `b` its `next`.
    /// Flag bit 0: ordered (`for_each`).
    Loop = 0x10, "loop", Stmt, Loop, Pc;
    /// End of a loop or `consume` body: next iteration, or leave. `b` is the opener.
    Next = 0x11, "next", Stmt, Zero, Pc;
    /// `while COND max N`: `a` the `max` bound (an `i64` expression, evaluated once), `b` its
    /// `wend`, where the condition is tested before every iteration (the loop jumps there first).
    While = 0x12, "while", Stmt, Expr, Pc;
    /// `if`: `a` the condition, `b` its `else` or `endif`.
    If = 0x13, "if", Stmt, Expr, Pc;
    /// Start of the `else` branch (the `then` branch jumps past it): `b` the `endif`.
    Else = 0x14, "else", Stmt, Zero, Pc;
    /// End of an `if`: `b` is the `if`.
    EndIf = 0x15, "endif", Stmt, Zero, Pc;
    /// Start of a `sequential` block: `b` its `seqend`.
    Seq = 0x16, "seq", Stmt, Zero, Pc;
    /// Boundary between two children of a `sequential` block: `b` the `seq`.
    Step = 0x17, "step", Stmt, Zero, Pc;
    /// End of a `sequential` block: `b` the `seq`.
    SeqEnd = 0x18, "seqend", Stmt, Zero, Pc;
    /// End of a `while` body and its test: `a` the condition (`bool`), `b` the `while`. Another
    /// iteration when the condition holds and fewer than `max` have run, else leave (counting
    /// the loop when it stops at `max` with the condition still true).
    EndWhile = 0x19, "wend", Stmt, Expr, Pc;
    /// `break if COND`: `a` the condition, `b` the innermost enclosing `while`, which it leaves
    /// (closing every construct in between) when the condition holds.
    Break = 0x1A, "break", Stmt, Expr, Pc;
    /// A task of kernel `a` with per-task schedule keys `b`; its arguments follow in `args`
    /// instructions. Flag bit 0: its dispatch target was decided at the enclosing hoisting loop.
    Task = 0x20, "task", Stmt, Kernel, Keyset;
    /// Up to three argument references of the preceding `task` or `load` (flags: how many).
    Args = 0x21, "args", Stmt, Refs, Refs;
    /// `set`: register `a` takes expression `b`.
    Set = 0x30, "set", Stmt, Reg, Expr;
    /// `load`: register `a` takes an element of tensor `b`; the indices follow in `args`.
    Load = 0x31, "load", Stmt, Reg, Tensor;
    /// `load` of a *computed* tensor (one tasks of the run write, `docs/SEMANTICS.md`, "Computed
    /// reads"): register `a` takes an element of tensor `b`, which the interpreter asks its sink
    /// for (the sink waits on the element's producers); the indices follow in `args`.
    Read = 0x32, "read", Stmt, Reg, Tensor;
    /// `send`: a token of value `b` on channel `a`.
    Send = 0x40, "send", Stmt, Channel, Expr;
    /// `consume`: per token of channel (flags) into register `a`; `b` its `next`.
    Consume = 0x41, "consume", Stmt, Reg, Pc;
    /// Start of process `a`'s body; `b` its `endproc`.
    Proc = 0x42, "proc", Stmt, Proc, Pc;
    /// End of a process body: `b` is the `proc`.
    EndProc = 0x43, "endproc", Stmt, Zero, Pc;

    /// Push register `a`.
    Ldr = 0x80, "ldr", Expr, Reg, Zero;
    /// Push the `i64` immediate `b`.
    Ldi = 0x81, "ldi", Expr, Zero, Imm;
    /// Push the `u64` immediate `b`.
    Ldu = 0x82, "ldu", Expr, Zero, UImm;
    /// Push the `bool` `b` (0 or 1).
    Ldb = 0x83, "ldb", Expr, Zero, UImm;
    /// Push constant `a` of the pool (flags: its type code).
    Ldc = 0x84, "ldc", Expr, Const, Zero;
    /// Push scalar argument `a` of the task being tiered (flags: its type code).
    Arg = 0x85, "arg", Expr, Arg, Zero;
    /// `-x` on `i64`.
    NegI = 0x88, "neg.i", Expr, Zero, Zero;
    /// `-x` on `u64`.
    NegU = 0x89, "neg.u", Expr, Zero, Zero;
    /// `!x`.
    Not = 0x8A, "not", Expr, Zero, Zero;
    /// `+` on `i64`.
    AddI = 0x90, "add.i", Expr, Zero, Zero;
    /// `+` on `u64`.
    AddU = 0x91, "add.u", Expr, Zero, Zero;
    /// `-` on `i64`.
    SubI = 0x92, "sub.i", Expr, Zero, Zero;
    /// `-` on `u64`.
    SubU = 0x93, "sub.u", Expr, Zero, Zero;
    /// `*` on `i64`.
    MulI = 0x94, "mul.i", Expr, Zero, Zero;
    /// `*` on `u64`.
    MulU = 0x95, "mul.u", Expr, Zero, Zero;
    /// `/` on `i64`.
    DivI = 0x96, "div.i", Expr, Zero, Zero;
    /// `/` on `u64`.
    DivU = 0x97, "div.u", Expr, Zero, Zero;
    /// `%` on `i64`.
    RemI = 0x98, "rem.i", Expr, Zero, Zero;
    /// `%` on `u64`.
    RemU = 0x99, "rem.u", Expr, Zero, Zero;
    /// `min` on `i64`.
    MinI = 0x9A, "min.i", Expr, Zero, Zero;
    /// `min` on `u64`.
    MinU = 0x9B, "min.u", Expr, Zero, Zero;
    /// `max` on `i64`.
    MaxI = 0x9C, "max.i", Expr, Zero, Zero;
    /// `max` on `u64`.
    MaxU = 0x9D, "max.u", Expr, Zero, Zero;
    /// `x + b` on `i64` (immediate).
    AddImm = 0xA0, "addi", Expr, Zero, Imm;
    /// `x - b` on `i64` (immediate).
    SubImm = 0xA1, "subi", Expr, Zero, Imm;
    /// `x * b` on `i64` (immediate).
    MulImm = 0xA2, "muli", Expr, Zero, Imm;
    /// `==` (operands of one type).
    Eq = 0xB0, "eq", Expr, Zero, Zero;
    /// `!=` (operands of one type).
    Ne = 0xB1, "ne", Expr, Zero, Zero;
    /// `<` on `i64`.
    LtI = 0xB2, "lt.i", Expr, Zero, Zero;
    /// `<=` on `i64`.
    LeI = 0xB3, "le.i", Expr, Zero, Zero;
    /// `>` on `i64`.
    GtI = 0xB4, "gt.i", Expr, Zero, Zero;
    /// `>=` on `i64`.
    GeI = 0xB5, "ge.i", Expr, Zero, Zero;
    /// `<` on `u64` or `bool`.
    LtU = 0xB6, "lt.u", Expr, Zero, Zero;
    /// `<=` on `u64` or `bool`.
    LeU = 0xB7, "le.u", Expr, Zero, Zero;
    /// `>` on `u64` or `bool`.
    GtU = 0xB8, "gt.u", Expr, Zero, Zero;
    /// `>=` on `u64` or `bool`.
    GeU = 0xB9, "ge.u", Expr, Zero, Zero;
    /// `&&`: if the top is false, jump by `a` keeping it; else pop it and go on.
    AndSc = 0xC0, "and.sc", Expr, Offset, Zero;
    /// `||`: if the top is true, jump by `a` keeping it; else pop it and go on.
    OrSc = 0xC1, "or.sc", Expr, Offset, Zero;
    /// Pop a bool; jump by `a` if it is false.
    Jz = 0xC2, "jz", Expr, Offset, Zero;
    /// Jump by `a`.
    Jmp = 0xC3, "jmp", Expr, Offset, Zero;
}

/// A pattern matching every [`Class::Expr`] opcode, for matches over the instruction stream that
/// reject expression ops while staying exhaustive (a new opcode must be added here or to
/// [`stmt_ops`], and the table test checks both against [`Op::class`]).
macro_rules! expr_ops {
    () => {
        $crate::op::Op::Ldr
            | $crate::op::Op::Ldi
            | $crate::op::Op::Ldu
            | $crate::op::Op::Ldb
            | $crate::op::Op::Ldc
            | $crate::op::Op::Arg
            | $crate::op::Op::NegI
            | $crate::op::Op::NegU
            | $crate::op::Op::Not
            | $crate::op::Op::AddI
            | $crate::op::Op::AddU
            | $crate::op::Op::SubI
            | $crate::op::Op::SubU
            | $crate::op::Op::MulI
            | $crate::op::Op::MulU
            | $crate::op::Op::DivI
            | $crate::op::Op::DivU
            | $crate::op::Op::RemI
            | $crate::op::Op::RemU
            | $crate::op::Op::MinI
            | $crate::op::Op::MinU
            | $crate::op::Op::MaxI
            | $crate::op::Op::MaxU
            | $crate::op::Op::AddImm
            | $crate::op::Op::SubImm
            | $crate::op::Op::MulImm
            | $crate::op::Op::Eq
            | $crate::op::Op::Ne
            | $crate::op::Op::LtI
            | $crate::op::Op::LeI
            | $crate::op::Op::GtI
            | $crate::op::Op::GeI
            | $crate::op::Op::LtU
            | $crate::op::Op::LeU
            | $crate::op::Op::GtU
            | $crate::op::Op::GeU
            | $crate::op::Op::AndSc
            | $crate::op::Op::OrSc
            | $crate::op::Op::Jz
            | $crate::op::Op::Jmp
    };
}

/// A pattern matching every [`Class::Stmt`] opcode, for matches over expression code that reject
/// statement ops while staying exhaustive (see [`expr_ops`]).
macro_rules! stmt_ops {
    () => {
        $crate::op::Op::Halt
            | $crate::op::Op::Nop
            | $crate::op::Op::Loop
            | $crate::op::Op::Next
            | $crate::op::Op::While
            | $crate::op::Op::If
            | $crate::op::Op::Else
            | $crate::op::Op::EndIf
            | $crate::op::Op::Seq
            | $crate::op::Op::Step
            | $crate::op::Op::SeqEnd
            | $crate::op::Op::EndWhile
            | $crate::op::Op::Break
            | $crate::op::Op::Task
            | $crate::op::Op::Args
            | $crate::op::Op::Set
            | $crate::op::Op::Load
            | $crate::op::Op::Read
            | $crate::op::Op::Send
            | $crate::op::Op::Consume
            | $crate::op::Op::Proc
            | $crate::op::Op::EndProc
    };
}
pub(crate) use {expr_ops, stmt_ops};

/// One 8-byte instruction or expression op, decoded into its fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Insn {
    /// The opcode.
    pub op: Op,
    /// Opcode-specific flags.
    pub flags: u8,
    /// First operand.
    pub a: u16,
    /// Second operand.
    pub b: u32,
}

impl Insn {
    /// Size in bytes of an encoded instruction.
    pub const SIZE: usize = 8;

    /// An instruction with no flags.
    pub fn new(op: Op, a: u16, b: u32) -> Insn {
        Insn { op, flags: 0, a, b }
    }

    /// The 8 little-endian bytes.
    pub fn to_bytes(self) -> [u8; 8] {
        let a = self.a.to_le_bytes();
        let b = self.b.to_le_bytes();
        [
            self.op as u8,
            self.flags,
            a[0],
            a[1],
            b[0],
            b[1],
            b[2],
            b[3],
        ]
    }

    /// The three 16-bit references of an `args` instruction (only the first `flags` count).
    pub fn refs(self) -> [u16; 3] {
        [self.a, (self.b & 0xFFFF) as u16, (self.b >> 16) as u16]
    }

    /// The signed immediate in `b`.
    pub fn imm(self) -> i64 {
        i64::from(self.b as i32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip_and_classes_are_split() {
        for &op in Op::ALL {
            assert_eq!(Op::from_byte(op as u8), Some(op));
            assert_eq!(op.class() == Class::Expr, (op as u8) >= 0x80, "{op:?}");
            assert_eq!(
                matches!(op, expr_ops!()),
                op.class() == Class::Expr,
                "{op:?}"
            );
            assert_eq!(
                matches!(op, stmt_ops!()),
                op.class() == Class::Stmt,
                "{op:?}"
            );
        }
        let names: std::collections::HashSet<_> = Op::ALL.iter().map(|o| o.mnemonic()).collect();
        assert_eq!(names.len(), Op::ALL.len());
        let i = Insn {
            op: Op::Task,
            flags: 1,
            a: 0x1234,
            b: 0xDEAD_BEEF,
        };
        assert_eq!(i.to_bytes(), [0x20, 1, 0x34, 0x12, 0xEF, 0xBE, 0xAD, 0xDE]);
    }
}
