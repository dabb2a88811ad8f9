//! A task's accesses as fixed-size boxes: [`Region`] (an N-d box of one tensor, at most
//! [`MAX_RANK`] dimensions) and [`TaskIo`] (a region and how the task uses it).
//!
//! Why: the runtime infers dependencies over these boxes, kernels read and write tensors through
//! them, and the debug checkers print them; they are plain data of the IR's vocabulary (a
//! tensor index, an [`Access`]), so every crate that needs them reads them here, without
//! depending on the runtime.
//!
//! Promises: everything is `Copy`, `#[repr(C)]`, with no pointers (a task graph can be copied to
//! a device as bytes); [`Region::new`] accepts exactly the boxes inside `0 .. 2^32` with sizes
//! of at least 1 and names the first dimension that is not.

use crate::types::Access;
use std::fmt;

/// Device-stable one-byte code of an [`Access`]: bit 0 reads, bit 1 writes (in 1, out 2, inout 3).
#[inline]
pub fn access_code(access: Access) -> u8 {
    match access {
        Access::In => 1,
        Access::Out => 2,
        Access::InOut => 3,
    }
}

/// The access an [`access_code`] stands for; codes without the write bit read as [`Access::In`].
#[inline]
pub fn access_from_code(code: u8) -> Access {
    const BY_CODE: [Access; 4] = [Access::In, Access::In, Access::Out, Access::InOut];
    BY_CODE[(code & 3) as usize]
}

/// Highest rank of a region the runtime tracks. Regions are fixed-size plain data so that a key
/// hashes and compares in a handful of word operations with no pointer chasing; four dimensions
/// cover every workload we know (LLaMA tiles are 2-d, batched attention 3-d or 4-d). A higher
/// rank is refused where a task is built (the runtime's `BuildError::RankTooHigh`, naming the
/// task and tensor).
pub const MAX_RANK: usize = 4;

/// Why a region cannot be represented.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RegionError {
    /// More than [`MAX_RANK`] dimensions (or start and size of different lengths).
    #[error("region of tensor {tensor} has rank {rank}; at most {MAX_RANK} dimensions are tracked")]
    RankTooHigh {
        /// The tensor index.
        tensor: u32,
        /// The rank asked for.
        rank: usize,
    },
    /// `start` and `size` have different lengths.
    #[error("region of tensor {tensor}: {starts} start(s) but {sizes} size(s)")]
    RankMismatch {
        /// The tensor index.
        tensor: u32,
        /// Number of starts.
        starts: usize,
        /// Number of sizes.
        sizes: usize,
    },
    /// A start below 0, a size below 1, or an end (`start + size`) beyond `u32::MAX`.
    #[error(
        "region of tensor {tensor}: dimension {dim} (start {start}, size {size}) is not within 0 .. 2^32 with size >= 1"
    )]
    OutOfRange {
        /// The tensor index.
        tensor: u32,
        /// The dimension.
        dim: usize,
        /// Start in that dimension.
        start: i64,
        /// Size in that dimension.
        size: i64,
    },
}

/// An N-d box of one tensor: the unit of dependency tracking (and of a task's I/O list).
///
/// Fixed-size plain data: `rank` used dimensions, the rest are start 0, size 1 (so they never
/// change equality or intersection). Coordinates are `u32` with `start + size <= u32::MAX` in
/// every dimension (checked by [`Region::new`]). Two regions are the same key when every field is
/// equal; they conflict when they name the same tensor and their boxes intersect.
#[derive(Clone, Copy, Debug, Eq, Default)]
#[repr(C)]
pub struct Region {
    /// Index of the tensor (the expander's `Module::tensors` index).
    pub tensor: u32,
    /// Number of used dimensions (at most [`MAX_RANK`]).
    pub rank: u32,
    /// First index per dimension.
    pub start: [u32; MAX_RANK],
    /// Extent per dimension (at least 1 in used dimensions).
    pub size: [u32; MAX_RANK],
}

const _: () = assert!(std::mem::size_of::<Region>() == 40);

/// Slots per window of [`Region::slot_hash`] (one 64-byte line of 8-byte slots), and its log
/// (the runtime's exact map lays its slot table out by it).
pub const SLOT_WINDOW_BITS: u32 = 3;
/// See [`SLOT_WINDOW_BITS`].
pub const SLOT_WINDOW: u64 = 1 << SLOT_WINDOW_BITS;

/// Multiplier of the FxHash family (rustc's hasher): odd, with well-spread bits.
pub const FX_K: u64 = 0xf135_7aea_2e62_a9c5;

impl Region {
    /// The box `start .. start + size` of `tensor`, checked (see [`RegionError`]). Inline: it
    /// runs for every region of every generated task, in other crates' loops.
    #[inline]
    pub fn new(tensor: u32, start: &[i64], size: &[i64]) -> Result<Region, RegionError> {
        if start.len() != size.len() {
            return Err(RegionError::RankMismatch {
                tensor,
                starts: start.len(),
                sizes: size.len(),
            });
        }
        if start.len() > MAX_RANK {
            return Err(RegionError::RankTooHigh {
                tensor,
                rank: start.len(),
            });
        }
        let mut r = Region {
            tensor,
            rank: start.len() as u32,
            start: [0; MAX_RANK],
            size: [1; MAX_RANK],
        };
        // One branch for the whole box: `0 <= s`, `1 <= z` and `s + z <= u32::MAX` hold in
        // every dimension iff no bit above the low 32 is set in any `s`, `z - 1` or `s + z`
        // (`s` and `z - 1` below 2^32 keep `s + z` from overflowing).
        let mut high = 0u64;
        for (dim, (&s, &z)) in start.iter().zip(size).enumerate() {
            high |= s as u64 | (z as u64).wrapping_sub(1) | (s as u64).wrapping_add(z as u64);
            r.start[dim] = s as u32;
            r.size[dim] = z as u32;
        }
        if high > u32::MAX as u64 {
            return Err(Region::out_of_range(tensor, start, size));
        }
        Ok(r)
    }

    /// The error for the first dimension of a box outside `0 ..= u32::MAX` (cold path of
    /// [`Region::new`]).
    #[cold]
    fn out_of_range(tensor: u32, start: &[i64], size: &[i64]) -> RegionError {
        let ok = |s: i64, z: i64| {
            s >= 0 && z >= 1 && s.checked_add(z).is_some_and(|e| e <= u32::MAX as i64)
        };
        let (dim, (&s, &z)) = start
            .iter()
            .zip(size)
            .enumerate()
            .find(|&(_, (&s, &z))| !ok(s, z))
            .expect("some dimension is out of range");
        RegionError::OutOfRange {
            tensor,
            dim,
            start: s,
            size: z,
        }
    }

    /// A 2-d box `rows` × `cols` at (`row`, `col`); panics in debug builds if an end overflows.
    #[inline]
    pub fn new_2d(tensor: u32, row: u32, rows: u32, col: u32, cols: u32) -> Region {
        debug_assert!(rows >= 1 && cols >= 1);
        debug_assert!(row.checked_add(rows).is_some() && col.checked_add(cols).is_some());
        Region {
            tensor,
            rank: 2,
            start: [row, col, 0, 0],
            size: [rows, cols, 1, 1],
        }
    }

    /// Whether the two boxes share at least one element (same tensor, every dimension overlaps).
    #[inline]
    pub fn intersects(&self, other: &Region) -> bool {
        if self.tensor != other.tensor {
            return false;
        }
        let mut ok = true;
        for d in 0..MAX_RANK {
            let (a, b) = (self.start[d] as u64, other.start[d] as u64);
            ok &= a < b + other.size[d] as u64 && b < a + self.size[d] as u64;
        }
        ok
    }

    /// Whether `self` contains every element of `other` (same tensor).
    #[inline]
    pub fn covers(&self, other: &Region) -> bool {
        if self.tensor != other.tensor {
            return false;
        }
        let mut ok = true;
        for d in 0..MAX_RANK {
            let (a, b) = (self.start[d] as u64, other.start[d] as u64);
            ok &= a <= b && b + other.size[d] as u64 <= a + self.size[d] as u64;
        }
        ok
    }

    /// End (exclusive) in dimension `d`.
    #[inline]
    pub fn end(&self, d: usize) -> u64 {
        self.start[d] as u64 + self.size[d] as u64
    }

    /// The key as five words: (tensor, rank), the starts in pairs, the sizes in pairs (each
    /// pair is two adjacent `u32` fields, so a word is one load).
    #[inline]
    fn words(&self) -> [u64; 5] {
        let w = |lo: u32, hi: u32| (lo as u64) | ((hi as u64) << 32);
        [
            w(self.tensor, self.rank),
            w(self.start[0], self.start[1]),
            w(self.start[2], self.start[3]),
            w(self.size[0], self.size[1]),
            w(self.size[2], self.size[3]),
        ]
    }

    /// A 64-bit hash of the key: the five words are mixed by two independent multiplications
    /// (so they overlap in the pipeline instead of forming one FxHash chain), then the high half
    /// is folded into the low bits that tables index with.
    #[inline]
    pub fn key_hash(&self) -> u64 {
        let [a, s01, s23, z01, z23] = self.words();
        let x = (a ^ z01.rotate_left(19) ^ s23.rotate_left(41)).wrapping_mul(FX_K);
        let y = (s01 ^ z23.rotate_left(32)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let h = x ^ y.rotate_left(29);
        h ^ (h >> 32)
    }

    /// A 64-bit hash of the key whose bits above the lowest 3 are a hash of everything but the
    /// low 3 bits of the region's tile column (`start[1]` in units of the largest power of two
    /// dividing `size[1]`: the column tile index for power-of-two tiles), and whose low 3 bits
    /// are those column bits XOR-ed with 3 bits of the hash. So the tiles `8k .. 8k + 8` of one
    /// row of one tensor (same sizes) get the 8 values of one aligned window `8w .. 8w + 8`
    /// ([`SLOT_WINDOW`]), each its own: an open-addressing table of 8-byte slots indexed by it
    /// puts those keys in one aligned 64-byte cache line, and a stream that walks a row of tiles
    /// misses once per 8 keys instead of once per key. Equal keys have equal hashes.
    #[inline]
    pub fn slot_hash(&self) -> u64 {
        let [a, _, s23, z01, z23] = self.words();
        // The top bit makes the count at most 31 (a zero size, an unused dimension, has a zero
        // start) and lets the count compile to one instruction.
        let col = self.start[1] >> (self.size[1] | 1 << 31).trailing_zeros();
        let s01 = (self.start[0] as u64) | (((col >> SLOT_WINDOW_BITS) as u64) << 32);
        let x = (a ^ z01.rotate_left(19) ^ s23.rotate_left(41)).wrapping_mul(FX_K);
        let y = (s01 ^ z23.rotate_left(32)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let h = x ^ y.rotate_left(29);
        let h = h ^ (h >> 32);
        // The position in the window is the column's low 3 bits XOR-ed with the hash's (a
        // permutation of the eight places per window), so keys that share a column (every
        // whole-row or 1-d region has column 0) spread over the eight positions.
        h ^ (col as u64 & (SLOT_WINDOW - 1))
    }
}

impl PartialEq for Region {
    /// Every field equal (compared as five words, without early exits).
    #[inline]
    fn eq(&self, other: &Region) -> bool {
        let (a, b) = (self.words(), other.words());
        ((a[0] ^ b[0]) | (a[1] ^ b[1]) | (a[2] ^ b[2]) | (a[3] ^ b[3]) | (a[4] ^ b[4])) == 0
    }
}

impl std::hash::Hash for Region {
    #[inline]
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.key_hash());
    }
}

/// One entry of a task's I/O list: a region and how the task uses it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(C)]
pub struct TaskIo {
    /// The region.
    pub region: Region,
    /// [`access_code`] of the access.
    pub access: u8,
    /// Zero.
    pub reserved: [u8; 3],
}

const _: () = assert!(std::mem::size_of::<TaskIo>() == 44);

impl TaskIo {
    /// `region` accessed as `access`.
    #[inline]
    pub fn new(region: Region, access: Access) -> TaskIo {
        TaskIo {
            region,
            access: access_code(access),
            reserved: [0; 3],
        }
    }

    /// How the task uses the region.
    #[inline]
    pub fn access(&self) -> Access {
        access_from_code(self.access)
    }
}

/// A region's box as `[start..end, ...]`.
pub struct BoxText<'a>(pub &'a Region);

impl fmt::Display for BoxText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for d in 0..(self.0.rank as usize).min(MAX_RANK) {
            if d > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{}..{}", self.0.start[d], self.0.end(d))?;
        }
        f.write_str("]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Neighbouring column tiles of one row share a window of [`SLOT_WINDOW`] slots, one place
    /// each; other rows, tensors and tile shapes land elsewhere; equal keys hash equally.
    #[test]
    fn slot_hash_keeps_a_window_of_column_tiles_of_a_row_together() {
        let tile = |tensor, row, col| Region::new_2d(tensor, row * 32, 32, col * 128, 128);
        let (w, bits) = (SLOT_WINDOW as u32, SLOT_WINDOW_BITS);
        for row in 0..8u32 {
            for k in 0..8u32 {
                let h: Vec<u64> = (0..w)
                    .map(|c| tile(3, row, w * k + c).slot_hash())
                    .collect();
                let mut places: Vec<u64> = h.iter().map(|h| h & (SLOT_WINDOW - 1)).collect();
                places.sort_unstable();
                assert_eq!(
                    places,
                    (0..SLOT_WINDOW).collect::<Vec<_>>(),
                    "each tile its own place in the window"
                );
                assert!(
                    h.iter().all(|x| x >> bits == h[0] >> bits),
                    "one window: {h:x?}"
                );
                assert_eq!(tile(3, row, w * k).slot_hash(), h[0]);
            }
        }
        // Windows of different rows, tensors, window indices and tile shapes differ (a weak
        // mixing check: 8 * 8 * 2 windows, no two alike in their window bits).
        let mut windows = std::collections::HashSet::new();
        for tensor in 0..2 {
            for row in 0..8 {
                for k in 0..8 {
                    assert!(windows.insert(tile(tensor, row, w * k).slot_hash() >> bits));
                }
            }
        }
        let wide = Region::new_2d(3, 0, 32, 0, 256).slot_hash() >> bits;
        assert_ne!(wide, tile(3, 0, 0).slot_hash() >> bits);
    }
    use proptest::prelude::*;

    /// Values at and around every boundary `Region::new` checks.
    fn coord() -> impl Strategy<Value = i64> {
        let m = u32::MAX as i64;
        prop_oneof![
            -3i64..40,
            (m - 40)..(m + 3),
            Just(i64::MIN),
            Just(i64::MAX),
            any::<i64>()
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::soak::cases(256)))]

        /// `Region::new` accepts exactly the boxes a per-dimension check accepts and names the
        /// first dimension that fails.
        #[test]
        fn new_checks_every_dimension_like_a_naive_check(
            dims in proptest::collection::vec((coord(), coord()), 0..=MAX_RANK),
        ) {
            let (start, size): (Vec<i64>, Vec<i64>) = dims.iter().copied().unzip();
            let bad = dims.iter().position(|&(s, z)| {
                !(s >= 0 && z >= 1 && (s as i128 + z as i128) <= u32::MAX as i128)
            });
            match (Region::new(7, &start, &size), bad) {
                (Ok(r), None) => {
                    prop_assert_eq!(r.rank as usize, dims.len());
                    for (d, &(s, z)) in dims.iter().enumerate() {
                        prop_assert_eq!((r.start[d] as i64, r.size[d] as i64), (s, z));
                    }
                }
                (Err(RegionError::OutOfRange { tensor, dim, start: s, size: z }), Some(d)) => {
                    prop_assert_eq!((tensor, dim, s, z), (7, d, dims[d].0, dims[d].1));
                }
                (got, want) => prop_assert!(false, "got {:?}, first bad dimension {:?}", got, want),
            }
        }
    }
}
