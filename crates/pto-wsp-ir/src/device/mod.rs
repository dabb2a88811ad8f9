//! The a2a3 device (the 910B-class Ascend AI Core) described once, as tables.
//!
//! Why: a kernel that runs on our CPU simulation may still be illegal on the device: global
//! memory loads only into the vector buffer (UB) or L1, the matrix unit reads L0A / L0B and
//! writes L0C, every buffer has a capacity, each unit takes some element types, and each
//! instruction runs on one of several concurrent hardware pipes. The validator (`check`,
//! `compile`, `emit ascend`, `run --device-rules a2a3`), the Ascend emitters (tile placement,
//! the cube / vector split, pipe synchronisation), the CPU executor and the cycle model all need
//! these facts; they read them here, so a rule is written once.
//!
//! Promise: every rule carries its [`Source`]: the PTO-ISA header and assertion (or document,
//! or simpler header) it was read from, at PTO-ISA commit [`PTO_ISA_COMMIT`] and simpler commit
//! [`SIMPLER_COMMIT`]. The tables are:
//! - [`BUFFERS`]: where each tile kind lives, its capacity and alignment;
//! - [`MOVES`]: which instruction moves data between which places, on which core and pipe (or
//!   that it crosses from the cube to the vector core, which only global memory joins);
//! - [`TYPES`]: the element types each unit takes;
//! - [`LIMITS`]: the shape limits of single instructions;
//! - [`CLUSTER`]: the core counts and grouping.
//!
//! [`check`] applies them to kernel bodies, [`split`] turns a kernel using both cores into
//! per-core parts joined through global memory, [`alloc`] places tiles in their buffers and
//! [`sync`] orders the pipes. `check`, `alloc` and `sync` read bodies in slot form
//! ([`crate::resolve::body`]); `split` writes new kernels, so it works on the written form.

pub mod alloc;
pub mod check;
mod pair;
pub mod split;
pub mod sync;

use crate::kernel_body::TileKind;
use crate::tile_isa::TileOp;
use crate::types::DType;

/// The device these tables describe.
pub const DEVICE: &str = "a2a3";

/// The PTO-ISA commit the rules were read from (and the emitted kernels are judged against).
pub const PTO_ISA_COMMIT: &str = "defdb75f";

/// The simpler commit the runtime facts were read from.
pub const SIMPLER_COMMIT: &str = "6ebaf7715";

/// Where a rule comes from: a file of PTO-ISA (or simpler) and the check or statement in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Source {
    /// The project the file belongs to (`PTO-ISA` or `simpler`).
    pub project: &'static str,
    /// The file, relative to its checkout (`include/pto/npu/a2a3/TLoad.hpp`).
    pub file: &'static str,
    /// The assertion message or statement that states the rule.
    pub check: &'static str,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.project, self.file, self.check)
    }
}

const fn src(file: &'static str, check: &'static str) -> Source {
    Source {
        project: "PTO-ISA",
        file,
        check,
    }
}

const fn simpler(file: &'static str, check: &'static str) -> Source {
    Source {
        project: "simpler",
        file,
        check,
    }
}

/// The two kinds of AI Core: the cube core (matrix unit, L1, L0A/B/C) and the vector core (UB).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Core {
    /// The cube core (AIC).
    Aic,
    /// The vector core (AIV).
    Aiv,
}

impl Core {
    /// How messages name it.
    pub fn name(self) -> &'static str {
        match self {
            Core::Aic => "the cube core (AIC)",
            Core::Aiv => "the vector core (AIV)",
        }
    }

    /// The runtime's name (`aic` / `aiv`, simpler's `core_type`).
    pub fn runtime(self) -> &'static str {
        match self {
            Core::Aic => "aic",
            Core::Aiv => "aiv",
        }
    }

    /// The other core.
    pub fn other(self) -> Core {
        match self {
            Core::Aic => Core::Aiv,
            Core::Aiv => Core::Aic,
        }
    }
}

/// An on-chip buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Buffer {
    /// The vector core's unified buffer.
    Ub,
    /// The cube core's L1 buffer.
    L1,
    /// The matrix unit's left-operand buffer.
    L0a,
    /// The matrix unit's right-operand buffer.
    L0b,
    /// The matrix unit's accumulator buffer.
    L0c,
}

/// One on-chip buffer: the tile kind that lives there, its core, capacity and alignment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferSpec {
    /// The buffer.
    pub buffer: Buffer,
    /// Its usual name (`UB`, `L1`, `L0A`, `L0B`, `L0C`).
    pub name: &'static str,
    /// The tile kind placed in it (PTO-ISA's `TileType`).
    pub kind: TileKind,
    /// The core it belongs to.
    pub core: Core,
    /// Capacity in bytes.
    pub capacity: u64,
    /// Alignment of a tile's start, in bytes.
    pub align: u64,
    /// Where capacity and alignment are stated.
    pub source: Source,
}

const LIMITS_HPP: &str = "include/pto/common/buffer_limits.hpp";

/// The buffers of an a2a3 AI Core, one per tile kind.
pub const BUFFERS: [BufferSpec; 5] = [
    BufferSpec {
        buffer: Buffer::Ub,
        name: "UB",
        kind: TileKind::Vec,
        core: Core::Aiv,
        capacity: 192 * 1024,
        align: 32,
        source: src(
            LIMITS_HPP,
            "PTO_UBUF_SIZE_BYTES (192u * 1024u), PTO_UBUF_ALIGN_BYTES 32u",
        ),
    },
    BufferSpec {
        buffer: Buffer::L1,
        name: "L1",
        kind: TileKind::Mat,
        core: Core::Aic,
        capacity: 512 * 1024,
        align: 32,
        source: src(
            LIMITS_HPP,
            "PTO_CBUF_SIZE_BYTES (512u * 1024u), PTO_CBUF_ALIGN_BYTES 32u",
        ),
    },
    BufferSpec {
        buffer: Buffer::L0a,
        name: "L0A",
        kind: TileKind::Left,
        core: Core::Aic,
        capacity: 64 * 1024,
        align: 32,
        source: src(
            LIMITS_HPP,
            "PTO_L0A_SIZE_BYTES (64u * 1024u), PTO_L0A_ALIGN_BYTES 32u",
        ),
    },
    BufferSpec {
        buffer: Buffer::L0b,
        name: "L0B",
        kind: TileKind::Right,
        core: Core::Aic,
        capacity: 64 * 1024,
        align: 32,
        source: src(
            LIMITS_HPP,
            "PTO_L0B_SIZE_BYTES (64u * 1024u), PTO_L0B_ALIGN_BYTES 32u",
        ),
    },
    BufferSpec {
        buffer: Buffer::L0c,
        name: "L0C",
        kind: TileKind::Acc,
        core: Core::Aic,
        capacity: 128 * 1024,
        align: 32,
        source: src(
            LIMITS_HPP,
            "PTO_L0C_SIZE_BYTES (128u * 1024u), PTO_L0C_ALIGN_BYTES 32u",
        ),
    },
];

/// The buffer tiles of `kind` live in.
pub fn buffer(kind: TileKind) -> &'static BufferSpec {
    BUFFERS
        .iter()
        .find(|b| b.kind == kind)
        .expect("every tile kind has a buffer")
}

/// How the device places a tile: statically assigned addresses checked against the buffer.
pub const TASSIGN_SOURCE: Source = src(
    "include/pto/common/tassign_check.hpp",
    "[SA-0352] TASSIGN: Tile storage size exceeds memory space capacity; [SA-0353] addr + \
     tile_size exceeds memory space capacity; [SA-0354] addr is not properly aligned",
);

/// A hardware pipe of an AI Core (PTO-ISA's `pipe_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Pipe {
    /// The scalar unit (issues everything; control flow and addresses).
    S,
    /// The vector unit.
    V,
    /// The matrix unit (`mad`).
    M,
    /// L1 to L0A / L0B.
    Mte1,
    /// Global memory to UB / L1.
    Mte2,
    /// UB / L1 to global memory.
    Mte3,
    /// The fix pipe: L0C to global memory or L1.
    Fix,
}

impl Pipe {
    /// Every pipe.
    pub const ALL: [Pipe; 7] = [
        Pipe::S,
        Pipe::V,
        Pipe::M,
        Pipe::Mte1,
        Pipe::Mte2,
        Pipe::Mte3,
        Pipe::Fix,
    ];

    /// The C++ name (`PIPE_V`).
    pub fn cpp(self) -> &'static str {
        match self {
            Pipe::S => "PIPE_S",
            Pipe::V => "PIPE_V",
            Pipe::M => "PIPE_M",
            Pipe::Mte1 => "PIPE_MTE1",
            Pipe::Mte2 => "PIPE_MTE2",
            Pipe::Mte3 => "PIPE_MTE3",
            Pipe::Fix => "PIPE_FIX",
        }
    }

    /// The pipe spelled `cpp` (`PIPE_V`).
    pub fn parse(cpp: &str) -> Option<Pipe> {
        Pipe::ALL.into_iter().find(|p| p.cpp() == cpp)
    }

    /// Whether two instructions of this pipe that depend on each other need a barrier between
    /// them (the vector unit pipelines its instructions; the others run in order).
    pub fn needs_barrier_within(self) -> bool {
        self == Pipe::V
    }
}

/// The source of the pipe assignment of each operation.
pub const PIPES_SOURCE: Source = src(
    "include/pto/npu/a2a3/TSync.hpp",
    "opPipeList (TLOAD on MTE2, TSTORE_VEC on MTE3, vector ops on V, TMOV_M2L / TMOV_M2R / \
     TEXTRACT_M2LR on MTE1, TMATMUL on M, TMOV_A2M / TSTORE_ACC on FIX, TSTORE_MAT on MTE3)",
);

/// The source of the rule that dependent vector instructions need `pipe_barrier(PIPE_V)`.
pub const VECTOR_BARRIER_SOURCE: Source = src(
    "include/pto/npu/a2a3/TSync.hpp",
    "TSYNC_IMPL<Op>: \"Single Op TSYNC only supports Vector PTO Instruction.\" \
     (pipe_barrier(PIPE_V))",
);

/// The source of the rule that the programmer orders the pipes.
pub const ORDERING_SOURCE: Source = src(
    "docs/machine/abstract-machine.md",
    "PTO-Manual: \"The programmer is responsible for expressing ordering/synchronization \
     (e.g., events, TSYNC)\"",
);

/// Where an operand of a data movement is: global memory or a tile of some kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Place {
    /// Global memory (a task's region).
    Gm,
    /// A tile of this kind.
    Tile(TileKind),
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Place::Gm => f.write_str("global memory"),
            Place::Tile(k) => write!(f, "a `{k}` tile ({})", buffer(*k).name),
        }
    }
}

/// The classes of instructions the movement table distinguishes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    /// `TLOAD`.
    Load,
    /// `TSTORE`.
    Store,
    /// `TMOV` (between tile kinds).
    Mov,
    /// `TMATMUL`, `TMATMUL_ACC`.
    Matmul,
    /// Single elements of a `vec` tile read or written by the scalar unit (`SETVAL`, the sort
    /// record fields; a body's `GETVAL`): PTO-ISA's `Tile::GetValue` / `SetValue`.
    Scalar,
    /// Every other instruction: vector arithmetic on `vec` tiles.
    Vector,
}

impl Class {
    /// The class of `op`.
    pub fn of(op: TileOp) -> Class {
        match op {
            TileOp::Load => Class::Load,
            TileOp::Store | TileOp::StoreAdd => Class::Store,
            TileOp::SetVal | TileOp::SortIdx | TileOp::SortVal => Class::Scalar,
            TileOp::Mov => Class::Mov,
            TileOp::Matmul | TileOp::MatmulAcc => Class::Matmul,
            _ => Class::Vector,
        }
    }
}

/// Where a movement runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Run {
    /// On one core and pipe; `op` is PTO-ISA's `pto::Op` name of the operation.
    On {
        /// The core.
        core: Core,
        /// The pipe.
        pipe: Pipe,
        /// PTO-ISA's operation name (`TMOV_M2L`).
        op: &'static str,
    },
    /// From one core's buffer to the other's: on a2a3 only global memory joins them, so the
    /// kernel is split there into a part per core, the first storing the tile and the second
    /// loading it (see [`split`]).
    Cross {
        /// The core holding the source tile.
        from: Core,
        /// The core holding the destination tile.
        to: Core,
    },
}

/// One row of the movement table: an instruction class between two places.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Move {
    /// The instruction class.
    pub class: Class,
    /// The destination.
    pub dst: Place,
    /// The (first) source.
    pub src: Place,
    /// Where it runs.
    pub run: Run,
    /// Where the rule is stated.
    pub source: Source,
}

const TLOAD_HPP: &str = "include/pto/npu/a2a3/TLoad.hpp";
const TSTORE_HPP: &str = "include/pto/npu/a2a3/TStore.hpp";
const TMOV_HPP: &str = "include/pto/npu/a2a3/TMov.hpp";
const TMATMUL_HPP: &str = "include/pto/npu/a2a3/TMatmul.hpp";
const LOAD_KINDS: &str = "static_assert \"Fix: Dst TileType must be Vec or Mat!\"";
const STORE_KINDS: &str = "static_assert \"Source TileType only suport Vec/Acc/Mat!\"";
const MOV_KINDS: &str = "static_assert \"TMov: Invalid TileType.\" (Mat to Left / Right / Bias / \
                         Scaling, Vec to Vec, Acc to Mat)";
const CROSS: &str = "TPush.hpp: cube and vector cores exchange tiles through a GM FIFO \
                     (TSTORE then TLOAD) on a2a3";

use Place::{Gm, Tile};
use TileKind::{Acc, Left, Mat, Right, Vec as V};

const fn on(core: Core, pipe: Pipe, op: &'static str) -> Run {
    Run::On { core, pipe, op }
}

/// Every legal data movement of a2a3, with its core and pipe. A (class, dst, src) triple not
/// listed is illegal on the device.
pub const MOVES: &[Move] = &[
    Move {
        class: Class::Load,
        dst: Tile(V),
        src: Gm,
        run: on(Core::Aiv, Pipe::Mte2, "TLOAD"),
        source: src(TLOAD_HPP, LOAD_KINDS),
    },
    Move {
        class: Class::Load,
        dst: Tile(Mat),
        src: Gm,
        run: on(Core::Aic, Pipe::Mte2, "TLOAD"),
        source: src(TLOAD_HPP, LOAD_KINDS),
    },
    Move {
        class: Class::Store,
        dst: Gm,
        src: Tile(V),
        run: on(Core::Aiv, Pipe::Mte3, "TSTORE_VEC"),
        source: src(TSTORE_HPP, STORE_KINDS),
    },
    Move {
        class: Class::Store,
        dst: Gm,
        src: Tile(Acc),
        run: on(Core::Aic, Pipe::Fix, "TSTORE_ACC"),
        source: src(TSTORE_HPP, STORE_KINDS),
    },
    Move {
        class: Class::Store,
        dst: Gm,
        src: Tile(Mat),
        run: on(Core::Aic, Pipe::Mte3, "TSTORE_MAT"),
        source: src(TSTORE_HPP, STORE_KINDS),
    },
    Move {
        class: Class::Mov,
        dst: Tile(Left),
        src: Tile(Mat),
        run: on(Core::Aic, Pipe::Mte1, "TMOV_M2L"),
        source: src(TMOV_HPP, MOV_KINDS),
    },
    Move {
        class: Class::Mov,
        dst: Tile(Right),
        src: Tile(Mat),
        run: on(Core::Aic, Pipe::Mte1, "TMOV_M2R"),
        source: src(TMOV_HPP, MOV_KINDS),
    },
    Move {
        class: Class::Mov,
        dst: Tile(Mat),
        src: Tile(Acc),
        run: on(Core::Aic, Pipe::Fix, "TMOV_A2M"),
        source: src(TMOV_HPP, MOV_KINDS),
    },
    Move {
        class: Class::Mov,
        dst: Tile(V),
        src: Tile(V),
        run: on(Core::Aiv, Pipe::V, "TMOV_V2V"),
        source: src(TMOV_HPP, MOV_KINDS),
    },
    Move {
        class: Class::Mov,
        dst: Tile(V),
        src: Tile(Acc),
        run: Run::Cross {
            from: Core::Aic,
            to: Core::Aiv,
        },
        source: src("include/pto/npu/a2a3/TPush.hpp", CROSS),
    },
    Move {
        class: Class::Mov,
        dst: Tile(V),
        src: Tile(Mat),
        run: Run::Cross {
            from: Core::Aic,
            to: Core::Aiv,
        },
        source: src("include/pto/npu/a2a3/TPush.hpp", CROSS),
    },
    Move {
        class: Class::Mov,
        dst: Tile(Left),
        src: Tile(V),
        run: Run::Cross {
            from: Core::Aiv,
            to: Core::Aic,
        },
        source: src("include/pto/npu/a2a3/TPush.hpp", CROSS),
    },
    Move {
        class: Class::Mov,
        dst: Tile(Right),
        src: Tile(V),
        run: Run::Cross {
            from: Core::Aiv,
            to: Core::Aic,
        },
        source: src("include/pto/npu/a2a3/TPush.hpp", CROSS),
    },
    Move {
        class: Class::Mov,
        dst: Tile(Mat),
        src: Tile(V),
        run: Run::Cross {
            from: Core::Aiv,
            to: Core::Aic,
        },
        source: src("include/pto/npu/a2a3/TPush.hpp", CROSS),
    },
    Move {
        class: Class::Matmul,
        dst: Tile(Acc),
        src: Tile(Left),
        run: on(Core::Aic, Pipe::M, "TMATMUL"),
        source: src(
            TMATMUL_HPP,
            "static_assert \"TileLeft TileType must be set to TileType::Left.\" / Right / \
             \"TileRes TileType must be set to TileType::Acc.\"",
        ),
    },
    Move {
        class: Class::Scalar,
        dst: Tile(V),
        src: Tile(V),
        run: on(Core::Aiv, Pipe::S, "SCALAR"),
        source: src(
            "include/pto/common/pto_tile.hpp",
            "Tile::GetValue / Tile::SetValue (single elements through the scalar unit)",
        ),
    },
    Move {
        class: Class::Vector,
        dst: Tile(V),
        src: Tile(V),
        run: on(Core::Aiv, Pipe::V, "VECTOR"),
        source: src(
            "include/pto/npu/a2a3/TUnaryOp.hpp",
            "static_assert \"TileType of src and dst tiles must be TileType::Vec\" (and the \
             same check in every vector instruction's header)",
        ),
    },
];

/// The movement row of `class` from `src` to `dst`, if the device has one.
pub fn find_move(class: Class, dst: Place, src: Place) -> Option<&'static Move> {
    MOVES
        .iter()
        .find(|m| m.class == class && m.dst == dst && m.src == src)
}

/// What the rows of the element-type table apply to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Unit {
    /// The vector unit's arithmetic (every [`Class::Vector`] instruction but `TCVT`, `TTRANS`
    /// and copies).
    VectorArith,
    /// The matrix unit: (left, right, acc) element types.
    Cube,
    /// Data movement (`TLOAD`, `TSTORE`, `TMOV`, `TCVT`, `TTRANS`, `TEXPANDS`).
    Movement,
}

/// One row of the element-type table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TypeRule {
    /// What it applies to.
    pub unit: Unit,
    /// The accepted element types (for [`Unit::Cube`]: of the left and right operands; the
    /// accumulator is f32).
    pub dtypes: &'static [DType],
    /// How messages name the unit.
    pub what: &'static str,
    /// Where the rule is stated.
    pub source: Source,
}

/// The element types each unit of a2a3 takes (the floating-point ones tiles can have).
pub const TYPES: [TypeRule; 3] = [
    TypeRule {
        unit: Unit::VectorArith,
        dtypes: &[DType::F32, DType::F16],
        what: "the vector unit computes in f32 and f16 (bf16 tiles are converted with TCVT \
               first)",
        source: src(
            "include/pto/npu/a2a3/TAdd.hpp",
            "static_assert \"Fix: TADD has invalid data type.\" (int32 / int16 / half / \
             float; likewise TUnaryOp.hpp \"TUNARY: Invalid data type\", TRowReduceOps.hpp)",
        ),
    },
    TypeRule {
        unit: Unit::Cube,
        dtypes: &[DType::F16, DType::Bf16, DType::F32],
        what: "the cube multiplies f16 × f16, bf16 × bf16 or f32 × f32 into an f32 \
               accumulator (both operands of one type)",
        source: src(
            TMATMUL_HPP,
            "CheckStaticMad: static_assert \"The data type is not supported.\"",
        ),
    },
    TypeRule {
        unit: Unit::Movement,
        dtypes: &[DType::F32, DType::F16, DType::Bf16],
        what: "loads, stores and moves keep the element type (acc tiles convert when stored)",
        source: src(
            TLOAD_HPP,
            "static_assert \"Fix: Source dtype must be same with dst dtype!\"",
        ),
    },
];

/// The element-type row of `unit`.
pub fn type_rule(unit: Unit) -> &'static TypeRule {
    TYPES
        .iter()
        .find(|t| t.unit == unit)
        .expect("every unit has a row")
}

/// Which operations the vector arithmetic rule applies to (not conversions, transposes, copies
/// and fills, which are data movement).
pub fn is_vector_arith(op: TileOp) -> bool {
    Class::of(op) == Class::Vector
        && !matches!(
            op,
            TileOp::Cvt
                | TileOp::Trans
                | TileOp::Expands
                | TileOp::Ci
                | TileOp::Tri
                | TileOp::Gather
                | TileOp::Scatter
                | TileOp::FillPad
                | TileOp::ColExpand
        )
}

/// A shape limit of one instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit {
    /// What is limited (for messages).
    pub what: &'static str,
    /// The largest allowed value.
    pub max: u64,
    /// Where it is stated.
    pub source: Source,
}

/// The shape limits of a2a3 instructions.
pub const LIMITS: [Limit; 3] = [
    Limit {
        what: "rows of a tile loaded into UB",
        max: 4095,
        source: src(
            TLOAD_HPP,
            "static_assert \"Fix: TLOAD Rows>=4095 not supported in A2/A3\"",
        ),
    },
    Limit {
        what: "columns of an acc tile stored to global memory",
        max: 4095,
        source: src(
            TSTORE_HPP,
            "static_assert \"The range of Cols is [1, 4095].\"",
        ),
    },
    Limit {
        what: "M, K and N of a matrix multiply",
        max: 4095,
        source: src(
            TMATMUL_HPP,
            "CheckDynamicMad: \"ERROR: The range of valid aMatrixRow is [1, 4095].\"",
        ),
    },
];

/// The core counts and grouping of an a2a3 device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cluster {
    /// Clusters (one cube core and its vector cores each).
    pub clusters: u32,
    /// Cube cores per cluster.
    pub aic_per_cluster: u32,
    /// Vector cores per cluster.
    pub aiv_per_cluster: u32,
    /// Where it is stated.
    pub source: Source,
}

/// a2a3: 24 clusters of one AIC and two AIV.
pub const CLUSTER: Cluster = Cluster {
    clusters: 24,
    aic_per_cluster: 1,
    aiv_per_cluster: 2,
    source: simpler(
        "src/a2a3/platform/include/common/platform_config.h",
        "MAX_AIC_PER_THREAD = MAX_BLOCKDIM * AIC_CORES_PER_BLOCKDIM = 24 * 1 = 24; \
         MAX_AIV_PER_THREAD = 24 * 2 = 48",
    ),
};

/// Elements in one 32-byte block of `dtype` (the C0 size of the fractal layouts).
pub fn c0(dtype: DType) -> u64 {
    32 / dtype.size_bytes() as u64
}

fn round_up(n: u64, unit: u64) -> u64 {
    n.div_ceil(unit) * unit
}

/// The shape a tile is declared with on the device: vector tiles have 32-byte rows; cube tiles
/// (mat, left, right, acc) whole fractals: rows a multiple of 16 (even a one-row tile: the
/// L1-to-L0 moves need 16-row units, PTO-ISA `TExtract.hpp` "srcRow must be aligned to 16") and
/// columns a multiple of 16 elements (which is also a whole number of 32-byte blocks for
/// f32, f16 and bf16), so that a `mat` tile and the `left` / `right` tile it moves into have
/// the same declared shape. The valid part is the declared shape; the padding is never read.
pub fn padded_shape(kind: TileKind, dtype: DType, rows: u64, cols: u64) -> (u64, u64) {
    match kind {
        TileKind::Vec => (rows, round_up(cols, c0(dtype))),
        _ => (round_up(rows, 16), round_up(cols, 16.max(c0(dtype)))),
    }
}

/// The bytes a tile occupies in its buffer (its padded shape).
pub fn footprint(kind: TileKind, dtype: DType, rows: u64, cols: u64) -> u64 {
    let (r, c) = padded_shape(kind, dtype, rows, cols);
    r * c * dtype.size_bytes() as u64
}

/// The source of the padding rule.
pub const PADDING_SOURCE: Source = src(
    "include/pto/common/pto_tile.hpp",
    "static_assert \"BFractal_ is RowMajor and SFractal_ is NoneBox: Rows must be 32 bytes \
     align ... SFractal_ in not NoneBox: Rows/Cols must be integer multiple of \
     InnerRows/InnerCols.\"",
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tile_kind_has_one_buffer_and_every_buffer_fits_its_core() {
        for k in TileKind::ALL {
            let b = buffer(*k);
            assert_eq!(b.kind, *k);
            assert_eq!(b.core == Core::Aiv, *k == TileKind::Vec);
        }
    }

    #[test]
    fn loads_reach_vec_and_mat_only() {
        for k in TileKind::ALL {
            let legal = find_move(Class::Load, Place::Tile(*k), Place::Gm).is_some();
            assert_eq!(legal, matches!(k, TileKind::Vec | TileKind::Mat), "{k}");
        }
    }

    #[test]
    fn padded_shapes_are_aligned() {
        for k in TileKind::ALL {
            for d in [DType::F32, DType::F16] {
                let (r, c) = padded_shape(*k, d, 3, 5);
                assert_eq!(c * d.size_bytes() as u64 % 32, 0, "{k} {d}");
                if *k != TileKind::Vec {
                    assert!(r.is_multiple_of(16), "{k} {d}");
                }
            }
        }
    }
}
