//! The instruction table: the one place an instruction's opcode, mnemonic, table and operands
//! are written.
//!
//! Why: the assembler, the disassembler, the binary encoder, the validating decoder, the checks
//! and the runtime must agree on every instruction. They all read this table: [`Insn`] and
//! [`Op`] come from one macro invocation ([`isa!`]); each operand is a typed field whose kind
//! ([`crate::operand::Operand`]) says how it is encoded, decoded, printed and parsed, and
//! whether it has a default (trailing operands equal to their default are omitted in text).
//!
//! Promises: [`Op::from_byte`] is the exact inverse of `op as u8` and [`Op::from_mnemonic`] of
//! [`Op::mnemonic`]; every instruction of the task-graph ISA specification's five instruction
//! sections (task graphs, memory, control flow, core allocation, synchronisation) has one row,
//! with the specification's operands in its order, plus three operands of `MC_BIND` and one of
//! `MC_ALLOC` that execution needs (`docs/ISA.md`, "Extensions"). An instruction whose [`Table`]
//! is not [`Table::Code`] is stored as one row of that table (the specification's kernel,
//! dependency, allocation and binding tables), the rest in the code section.

use crate::operand::{
    Access, AffinityType, BarrierId, BoxRegion, CoreType, DependencyType, DeviceId, EventId,
    FenceScope, GraphId, IterId, IterVal, KernelId, KernelSet, Kind, MemLocation, NotifyId,
    Operand, PartitionId, ScalarRef, Shape, Split, StreamId, Symbol, TensorId,
};

/// Where an instruction is stored in the binary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Table {
    /// The code section: opcode byte, then the operands.
    Code,
    /// One row of the kernel table (`TG_KERNEL`); the code section holds the opcode alone.
    Kernels,
    /// One row of the dependency table (`TG_DEPEND`).
    Dependencies,
    /// One row of the allocation table (`MC_ALLOC`).
    Allocations,
    /// One row of the binding table (`MC_BIND`).
    Bindings,
}

impl Table {
    /// Every table with rows, in file order.
    pub const ROWS: [Table; 4] = [
        Table::Kernels,
        Table::Dependencies,
        Table::Allocations,
        Table::Bindings,
    ];

    /// The table's name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Table::Code => "code section",
            Table::Kernels => "kernel table",
            Table::Dependencies => "dependency table",
            Table::Allocations => "allocation table",
            Table::Bindings => "binding table",
        }
    }

    /// The instruction whose rows the table holds.
    pub fn op(self) -> Option<Op> {
        match self {
            Table::Code => None,
            Table::Kernels => Some(Op::TgKernel),
            Table::Dependencies => Some(Op::TgDepend),
            Table::Allocations => Some(Op::McAlloc),
            Table::Bindings => Some(Op::McBind),
        }
    }
}

/// One operand of an instruction, as the table declares it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OperandInfo {
    /// The operand's name (the specification's parameter name).
    pub name: &'static str,
    /// What it holds.
    pub kind: Kind,
    /// Whether it has a default (and may be omitted when trailing).
    pub optional: bool,
}

/// `Some(default)` when the table gives one.
macro_rules! default_of {
    ($ty:ty;) => {
        None::<$ty>
    };
    ($ty:ty; $def:expr) => {
        Some::<$ty>($def)
    };
}

/// Whether the table gives a default.
macro_rules! has_default {
    () => {
        false
    };
    ($def:expr) => {
        true
    };
}

macro_rules! isa {
    ($(
        $(#[$doc:meta])*
        $name:ident = $byte:literal, $mnem:literal, $table:ident {
            $( $(#[$fdoc:meta])* $field:ident : $ty:ty $(= $def:expr)? ),* $(,)?
        };
    )*) => {
        /// Every instruction's opcode (see the module docs).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum Op {
            $( $(#[$doc])* $name = $byte, )*
        }

        /// One instruction with its operands (see the module docs).
        #[derive(Clone, Debug, PartialEq, Eq, Hash)]
        pub enum Insn {
            $( $(#[$doc])* $name { $( $(#[$fdoc])* $field: $ty, )* }, )*
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

            /// The mnemonic of the text syntax.
            pub fn mnemonic(self) -> &'static str {
                match self { $( Op::$name => $mnem, )* }
            }

            /// The opcode spelled `m`, if any.
            pub fn from_mnemonic(m: &str) -> Option<Op> {
                match m {
                    $( $mnem => Some(Op::$name), )*
                    _ => None,
                }
            }

            /// Where the instruction is stored.
            pub fn table(self) -> Table {
                match self { $( Op::$name => Table::$table, )* }
            }

            /// The operands, in order.
            pub fn operands(self) -> &'static [OperandInfo] {
                match self {
                    $( Op::$name => &[$(OperandInfo {
                        name: stringify!($field),
                        kind: <$ty as Operand>::KIND,
                        optional: has_default!($($def)?),
                    },)*], )*
                }
            }

            /// Size in bytes of one table row (the operands' fixed widths); 0 for code ops.
            pub fn row_size(self) -> usize {
                match self {
                    $( Op::$name => if matches!(Table::$table, Table::Code) {
                        0
                    } else {
                        0 $( + <$ty as Operand>::WIDTH )*
                    }, )*
                }
            }
        }

        impl Insn {
            /// The instruction's opcode.
            pub fn op(&self) -> Op {
                match self { $( Insn::$name { .. } => Op::$name, )* }
            }

            /// Appends the operands' encodings, in order.
            pub(crate) fn encode_operands(&self, w: &mut crate::operand::Writer<'_>) {
                match self {
                    $( Insn::$name { $($field,)* } => { $( Operand::encode($field, w); )* } )*
                }
            }

            /// Reads the operands of an `op` instruction, recording each operand's offset.
            pub(crate) fn decode_operands(
                op: Op,
                r: &mut crate::operand::Reader<'_>,
                offsets: &mut Vec<u32>,
            ) -> Result<Insn, crate::binary::DecodeError> {
                match op {
                    $( Op::$name => Ok(Insn::$name { $( $field: {
                        offsets.push(r.pos() as u32);
                        <$ty as Operand>::decode(r).map_err(|e| {
                            e.context(concat!($mnem, " operand `", stringify!($field), "`"))
                        })?
                    }, )* }), )*
                }
            }

            /// Each operand's text and whether it equals its default.
            pub(crate) fn print_operands(
                &self,
                p: &crate::text::PrintCx<'_>,
            ) -> Vec<(String, bool)> {
                match self {
                    $( Insn::$name { $($field,)* } => vec![$(
                        (
                            Operand::print($field, p),
                            default_of!($ty; $($def)?).is_some_and(|d| &d == $field),
                        ),
                    )*], )*
                }
            }

            /// Parses the operands of an `op` instruction from its arguments.
            pub(crate) fn parse_operands(
                op: Op,
                args: &mut crate::text::Args<'_>,
                cx: &mut crate::text::ParseCx<'_>,
            ) -> Result<Insn, crate::text::AsmError> {
                match op {
                    $( Op::$name => {
                        let insn = Insn::$name { $(
                            $field: args.next::<$ty>(cx, default_of!($ty; $($def)?))?,
                        )* };
                        args.finish()?;
                        Ok(insn)
                    } )*
                }
            }

            /// Calls `f` on every operand that names something (graphs, kernels, tensors, ...),
            /// in order, with the operand's index.
            pub(crate) fn visit_ids(&self, f: &mut dyn FnMut(usize, crate::operand::Ns, u32)) {
                match self {
                    $( Insn::$name { $($field,)* } => {
                        let mut _i = 0usize;
                        $(
                            Operand::visit_ids($field, &mut |ns, id| f(_i, ns, id));
                            _i += 1;
                        )*
                    } )*
                }
            }
        }
    };
}

isa! {
    /// Begins the definition of task graph `graph`: every `TG_KERNEL`, `TG_DEPEND`, `MC_BIND`,
    /// `CA_*` and kernel-level `SY_*` until `TG_END` belongs to it. Graphs do not nest and are
    /// defined at top level.
    TgBegin = 0x01, "TG_BEGIN", Code {
        /// The graph being defined.
        graph: GraphId,
    };
    /// Ends the definition of `graph` (must match its `TG_BEGIN`); the graph is then ready to
    /// launch.
    TgEnd = 0x02, "TG_END", Code {
        /// The graph whose definition ends.
        graph: GraphId,
    };
    /// A kernel node of the current graph: `block_dim` instances (1 to 65535) of the kernel at
    /// `entry` on cores of `core_type`, each invocation needing `workspace` bytes.
    TgKernel = 0x03, "TG_KERNEL", Kernels {
        /// Unique within the graph.
        kernel: KernelId,
        /// The kernel's entry symbol (resolved in the kernel library at load time).
        entry: Symbol,
        /// Number of instances (logical cores), 1 to 65535.
        block_dim: u32,
        /// Cores the instances run on.
        core_type: CoreType,
        /// Per-invocation workspace, bytes.
        workspace: u64,
    };
    /// A dependency edge `src -> dst` of the current graph, of `dep_type`, through `tensor`
    /// (required for `DATA`; `-` for none).
    TgDepend = 0x04, "TG_DEPEND", Dependencies {
        /// Producer kernel.
        src: KernelId,
        /// Consumer kernel.
        dst: KernelId,
        /// What the edge means.
        dep_type: DependencyType = DependencyType::After,
        /// The tensor that creates the dependency.
        tensor: Option<TensorId> = None,
    };
    /// Submits `graph` on `stream`; does not wait. Graphs on one stream run one after the
    /// other, graphs on different streams at the same time.
    TgLaunch = 0x05, "TG_LAUNCH", Code {
        /// Graph to run.
        graph: GraphId,
        /// Stream to run it on.
        stream: StreamId,
    };
    /// Waits until the last launch of `graph` has completed.
    TgSync = 0x06, "TG_SYNC", Code {
        /// Graph to wait for.
        graph: GraphId,
    };
    /// Launches `graph` on the default stream (0) with `iteration` bound into its kernels'
    /// arguments (an immediate or a loop iterator).
    TgInvoke = 0x07, "TG_INVOKE", Code {
        /// Graph to run.
        graph: GraphId,
        /// Iteration index (for dynamic bindings).
        iteration: IterVal,
    };

    /// Allocates `size` bytes of workspace for `tensor`, aligned to `alignment` (a power of
    /// two up to 4096) in `location`; `shape` gives its element type and dimensions (default:
    /// `size` bytes, `u8[size]`).
    McAlloc = 0x10, "MC_ALLOC", Allocations {
        /// Unique allocation id.
        tensor: TensorId,
        /// Size in bytes.
        size: u64,
        /// Alignment in bytes.
        alignment: u32 = 512,
        /// Memory location hint.
        location: MemLocation = MemLocation::Gm,
        /// Element type and dimensions (an extension; `-` or omitted for plain bytes).
        shape: Option<Shape> = None,
    };
    /// Releases `tensor`'s allocation; no graph that may still run may use it.
    McFree = 0x11, "MC_FREE", Code {
        /// Allocation to release.
        tensor: TensorId,
    };
    /// Binds argument `arg` of `kernel`: `size` bytes of `tensor` from `offset` (0 = to the
    /// end), or with `tensor` `-` the 64-bit scalar `offset`. `access`, `split` and `region`
    /// are extensions execution needs (`docs/ISA.md`).
    McBind = 0x12, "MC_BIND", Bindings {
        /// Target kernel.
        kernel: KernelId,
        /// Argument index.
        arg: u32,
        /// Source tensor (`-`: a scalar argument, whose value is `offset`).
        tensor: Option<TensorId>,
        /// Byte offset into the tensor (or the scalar's value).
        offset: u64 = 0,
        /// Bytes to bind (0 = from `offset` to the end).
        size: u64 = 0,
        /// How the kernel uses the argument.
        access: Access = Access::InOut,
        /// How the kernel's instances share the argument.
        split: Split = Split::Whole,
        /// A box of the tensor instead of a byte range.
        region: Option<BoxRegion> = None,
    };
    /// Copies `size` bytes from `src` at `src_offset` to `dst` at `dst_offset`.
    McCopy = 0x13, "MC_COPY", Code {
        /// Source tensor.
        src: TensorId,
        /// Destination tensor.
        dst: TensorId,
        /// Bytes to copy.
        size: u64,
        /// Byte offset into the source.
        src_offset: u64 = 0,
        /// Byte offset into the destination.
        dst_offset: u64 = 0,
    };
    /// A memory fence of `scope`.
    McFence = 0x14, "MC_FENCE", Code {
        /// What the fence makes visible.
        scope: FenceScope,
    };

    /// Runs what follows (up to `CF_ELSE` or `CF_ENDIF`) when `cond` is non-zero.
    CfIf = 0x20, "CF_IF", Code {
        /// Condition (non-zero: true).
        cond: ScalarRef,
    };
    /// Starts the branch taken when the `CF_IF`'s condition is zero.
    CfElse = 0x21, "CF_ELSE", Code {};
    /// Ends a `CF_IF`.
    CfEndIf = 0x22, "CF_ENDIF", Code {};
    /// Runs the body (up to `CF_ENDLOOP`) `count` times, `iterator` counting from 0.
    CfLoop = 0x23, "CF_LOOP", Code {
        /// Number of passes.
        count: ScalarRef,
        /// Loop variable.
        iterator: IterId,
    };
    /// Ends a `CF_LOOP`.
    CfEndLoop = 0x24, "CF_ENDLOOP", Code {};
    /// Leaves the innermost `CF_LOOP` / `CF_WHILE` when `cond` is non-zero.
    CfBreak = 0x25, "CF_BREAK", Code {
        /// Condition (non-zero: leave).
        cond: ScalarRef,
    };
    /// Runs the body (up to `CF_ENDWHILE`) while `cond` is non-zero, tested before each pass.
    CfWhile = 0x26, "CF_WHILE", Code {
        /// Condition (non-zero: another pass).
        cond: ScalarRef,
    };
    /// Ends a `CF_WHILE`.
    CfEndWhile = 0x27, "CF_ENDWHILE", Code {};

    /// Requests cores for `kernel`: at most `aic` cube, `aiv` vector and `aicpu` AICPU cores
    /// run its instances (scaled down when the graph's requests exceed the device).
    CaRequest = 0x30, "CA_REQUEST", Code {
        /// Target kernel.
        kernel: KernelId,
        /// Cube cores.
        aic: u32,
        /// Vector cores.
        aiv: u32,
        /// AICPU threads.
        aicpu: u32 = 0,
    };
    /// Places the kernels of `kernels` on the same cores, on different cores, or in one L2
    /// group.
    CaAffinity = 0x31, "CA_AFFINITY", Code {
        /// The kernels.
        kernels: KernelSet,
        /// How they are placed.
        affinity: AffinityType,
    };
    /// Confines the current graph's kernels to cube cores `aic_start..+aic_count` and vector
    /// cores `aiv_start..+aiv_count`.
    CaPartition = 0x32, "CA_PARTITION", Code {
        /// Unique partition id.
        partition: PartitionId,
        /// First cube core.
        aic_start: u32,
        /// Cube cores.
        aic_count: u32,
        /// First vector core.
        aiv_start: u32,
        /// Vector cores.
        aiv_count: u32,
    };

    /// Signals `event` each time `kernel` completes.
    SySignal = 0x40, "SY_SIGNAL", Code {
        /// The event.
        event: EventId,
        /// The kernel whose completion signals it.
        kernel: KernelId,
    };
    /// `kernel` starts only after `event` is signalled (its n-th run after the n-th signal).
    SyWait = 0x41, "SY_WAIT", Code {
        /// The event.
        event: EventId,
        /// The kernel that waits for it.
        kernel: KernelId,
    };
    /// The kernels of `kernels` wait for each other: none starts before all are ready.
    SyBarrier = 0x42, "SY_BARRIER", Code {
        /// The kernels.
        kernels: KernelSet,
        /// The barrier's id.
        barrier: BarrierId,
    };
    /// Sends notification `notify` to device `device`.
    SyNotify = 0x43, "SY_NOTIFY", Code {
        /// The device notified.
        device: DeviceId,
        /// The notification.
        notify: NotifyId,
    };
    /// Waits for notification `notify` from device `device`.
    SyWaitNotify = 0x44, "SY_WAIT_NOTIFY", Code {
        /// The device the notification comes from.
        device: DeviceId,
        /// The notification.
        notify: NotifyId,
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn bytes_and_mnemonics_round_trip_and_tables_have_fixed_rows() {
        let mut bytes = HashSet::new();
        for &op in Op::ALL {
            assert_eq!(Op::from_byte(op as u8), Some(op));
            assert_eq!(Op::from_mnemonic(op.mnemonic()), Some(op));
            assert!(bytes.insert(op as u8));
            if op.table() != Table::Code {
                assert_eq!(op.table().op(), Some(op));
                for o in op.operands() {
                    assert!(o.kind.fixed_width(), "{op:?}.{}", o.name);
                }
                assert!(op.row_size() > 0);
            }
            // Optional operands are trailing.
            let ops = op.operands();
            if let Some(first) = ops.iter().position(|o| o.optional) {
                assert!(ops[first..].iter().all(|o| o.optional), "{op:?}");
            }
        }
        assert_eq!(Op::ALL.len(), 28);
        assert_eq!(Op::TgKernel.row_size(), 21);
        assert_eq!(Op::TgDepend.row_size(), 13);
        assert_eq!(Op::McAlloc.row_size(), 35);
        assert_eq!(Op::McBind.row_size(), 63);
    }
}
