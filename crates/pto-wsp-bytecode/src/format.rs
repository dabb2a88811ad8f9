//! Fixed facts of the binary format: magic, version, header layout, limits and the one-byte
//! codes of IR enums.
//!
//! Why: the encoder writes and the decoder reads the same layout; keeping the constants and the
//! code tables in one module means a code can only mean one thing. The full layout is described
//! in `docs/BYTECODE.md`.
//!
//! Promise: every `*_code` function has an exact inverse `from_*_code` returning `None` for bytes
//! that are not codes; little-endian everywhere.

use pto_wsp_ir::{Access, DType, ExecPool, ScalarType};

/// The four bytes every bytecode starts with.
pub const MAGIC: [u8; 4] = *b"PTOW";
/// The format version this crate writes and reads.
pub const VERSION: u32 = 2;
/// Size of the header in bytes.
pub const HEADER_LEN: usize = 52;
/// Deepest nesting of loops, `consume`s, `if`s and `sequential` blocks the decoder accepts.
pub const MAX_DEPTH: usize = 64;
/// Deepest expression stack the decoder accepts.
pub const MAX_STACK: usize = 32;
/// Deepest dispatch-policy nesting (`threshold` inside `threshold`) the decoder accepts.
pub const MAX_DISPATCH_DEPTH: usize = 16;
/// Largest region or tensor rank.
pub const MAX_RANK: usize = 16;
/// "None" in a 16-bit reference field.
pub const NONE16: u16 = 0xFFFF;
/// "No keys" in a `task`'s keyset operand.
pub const NO_KEYSET: u32 = 0xFFFF_FFFF;

/// Header flag: the names of kernels, tensors without bound contents, axes, processes and
/// channels are present (the names of symbols, slots and bound tensors always are).
pub const FLAG_DEBUG_NAMES: u8 = 1;
/// Header flag: the side table of read locations follows the names (`u32` count, then per
/// computed read `u32 pc, u32 start, u32 end`: source byte offsets, `u32::MAX` when none). Set
/// only when the entry has computed reads, so other programs' bytes do not change.
pub const FLAG_READ_LOCS: u8 = 2;
/// Header flag: the statement-location table follows (after the read locations, if any): `u32`
/// count, then `u32 pc, u32 start, u32 end` per entry, by strictly increasing pc — every
/// instruction from an entry's pc up to the next entry's belongs to the statement written at
/// that byte range. Set only with debug names (`EncodeOptions::names`) and when the module has
/// text, so built modules' and compact programs' bytes do not change.
pub const FLAG_STMT_LOCS: u8 = 4;

/// Loop-descriptor flag: the whole row of a ragged / sparse axis is skipped at once.
pub const LOOP_ROW_SKIP: u16 = 1;
/// Loop-descriptor flag: an iteration may be skipped when its task-index range holds no task of
/// the executor (static partition).
pub const LOOP_RANGE_SKIP: u16 = 2;

/// Tensor flag: its shape is evaluated (a region or `load` uses it).
pub const TENSOR_SHAPED: u8 = 1;
/// Tensor flag: its contents are bound (ragged lengths, sparse arrays, `load`).
pub const TENSOR_ARRAY: u8 = 2;

/// Axis kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AxisCode {
    /// `dense` / `dense_dyn`: extent expression.
    Dense = 0,
    /// `ragged`: row-count expression and a lengths tensor.
    Ragged = 1,
    /// `sparse`: row-count expression, indptr and indices tensors.
    Sparse = 2,
}

impl AxisCode {
    /// The kind with this code.
    pub fn from_code(b: u8) -> Option<AxisCode> {
        match b {
            0 => Some(AxisCode::Dense),
            1 => Some(AxisCode::Ragged),
            2 => Some(AxisCode::Sparse),
            _ => None,
        }
    }
}

/// Dispatch-node kinds.
pub mod dnode {
    /// `round_robin(n)`: a `u64`.
    pub const ROUND_ROBIN: u8 = 0;
    /// `affinity(key)`: a key slot `u8`.
    pub const AFFINITY: u8 = 1;
    /// `hash(key)`: a key slot `u8`.
    pub const HASH: u8 = 2;
    /// `threshold(metric) { ... }`: metric slot `u8`, level count `u8`, per level an `i64` bound
    /// and a node, then the `else` node.
    pub const THRESHOLD: u8 = 3;
    /// `static_partition(...)`: count `u16`, then that many `u64` starts.
    pub const STATIC_PARTITION: u8 = 4;
    /// `work_steal`.
    pub const WORK_STEAL: u8 = 5;
}

/// Code of a scalar type.
pub fn scalar_code(t: ScalarType) -> u8 {
    match t {
        ScalarType::Bool => 0,
        ScalarType::I64 => 1,
        ScalarType::U64 => 2,
    }
}

/// Scalar type of a code.
pub fn from_scalar_code(b: u8) -> Option<ScalarType> {
    match b {
        0 => Some(ScalarType::Bool),
        1 => Some(ScalarType::I64),
        2 => Some(ScalarType::U64),
        _ => None,
    }
}

/// Code of a pool.
pub fn pool_code(p: ExecPool) -> u8 {
    match p {
        ExecPool::Vector => 0,
        ExecPool::Cube => 1,
        ExecPool::Any => 2,
    }
}

/// Pool of a code.
pub fn from_pool_code(b: u8) -> Option<ExecPool> {
    match b {
        0 => Some(ExecPool::Vector),
        1 => Some(ExecPool::Cube),
        2 => Some(ExecPool::Any),
        _ => None,
    }
}

/// Code of a kernel parameter kind: tiles `0x10 | access`, scalars their scalar code.
pub fn tile_code(a: Access) -> u8 {
    0x10 | match a {
        Access::In => 0,
        Access::Out => 1,
        Access::InOut => 2,
    }
}

/// Access of a tile code (`None` for a scalar code or garbage).
pub fn from_tile_code(b: u8) -> Option<Access> {
    match b {
        0x10 => Some(Access::In),
        0x11 => Some(Access::Out),
        0x12 => Some(Access::InOut),
        _ => None,
    }
}

/// Code of an element type.
pub fn dtype_code(d: DType) -> u8 {
    match d {
        DType::F16 => 0,
        DType::Bf16 => 1,
        DType::F32 => 2,
        DType::I32 => 3,
        DType::U32 => 4,
        DType::I64 => 5,
        DType::U64 => 6,
        DType::U8 => 7,
    }
}

/// Element type of a code.
pub fn from_dtype_code(b: u8) -> Option<DType> {
    DType::ALL
        .get(usize::from(b))
        .copied()
        .filter(|d| dtype_code(*d) == b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_invert() {
        for &t in ScalarType::ALL {
            assert_eq!(from_scalar_code(scalar_code(t)), Some(t));
        }
        for &p in ExecPool::ALL {
            assert_eq!(from_pool_code(pool_code(p)), Some(p));
        }
        for &a in Access::ALL {
            assert_eq!(from_tile_code(tile_code(a)), Some(a));
            assert_eq!(from_scalar_code(tile_code(a)), None);
        }
        for &d in DType::ALL {
            assert_eq!(from_dtype_code(dtype_code(d)), Some(d));
        }
        assert_eq!(from_dtype_code(8), None);
    }
}
