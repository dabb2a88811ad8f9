//! TensorMaps: from the regions a task reads and writes to the earlier tasks it must follow
//! (the concurrency-mechanisms and back-end architecture specifications' TensorMap).
//!
//! Why: dependencies are inferred, and inference is the safety proof — an edge is the only thing
//! that keeps two tasks from touching the same bytes at once. This module owns that inference for
//! one access at a time; the builder ([`crate::builder`]) deduplicates, counts and stores edges.
//!
//! Promises, for every implementation (`access` called in submission order):
//! - **read** of region `r` by task `t`: reports every task that wrote a conflicting region and
//!   has not been superseded (read after write, [`EdgeKind::Raw`]).
//! - **write**: reports the last conflicting writers ([`EdgeKind::Waw`]) and every task that read
//!   a conflicting region since ([`EdgeKind::War`]). **inout** is a read followed by a write.
//! - "Conflicting" is "same key" for the exact maps ([`FixedExactMap`], [`DynamicExactMap`]) and
//!   "boxes intersect" for [`OverlapMap`]. A record is dropped only when a later write covers it
//!   (so the covering task, which follows it, stands in for it), or (the bounded
//!   [`FixedExactMap`] only) when [`TensorMap::retire_before`] says its task has completed: no
//!   edge between two live tasks is ever lost.
//! - The unbounded maps ([`DynamicExactMap`], a growable [`FixedExactMap`], [`OverlapMap`]) keep
//!   the records of completed tasks as tombstones when retiring: a lookup still reports those
//!   tasks (by id, or as [`TaskId::FORGOTTEN`] for readers pruned to a count), so the edges they
//!   find are those of a build that never retires, whatever the timing.
//! - The overlap map may report, instead of some writers a read conflicts with, an earlier
//!   *reader* that already follows each of them ([`marks`]: a read of a box containing a box
//!   read before). Every conflicting writer then still happens before the reader, through that
//!   task; the reader also waits for it (extra order, never less), and a covering read costs
//!   O(1) edges however many writes it covers.
//! - A map never reports `t` itself; it may report the same predecessor more than once (the
//!   builder deduplicates).

mod dynamic;
mod fixed;
mod geometry;
pub mod marks;
mod overlap;
mod readers;

pub use dynamic::DynamicExactMap;
pub use fixed::FixedExactMap;
pub use overlap::{LARGE_CELLS, OverlapMap};

use crate::types::{Access, EdgeKind, FX_K, Region, TaskId};
use std::hash::{BuildHasherDefault, Hasher};

/// Counters every map keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MapStats {
    /// Lookups that found at least one earlier access to a conflicting region.
    pub hits: u64,
    /// Lookups that found none.
    pub misses: u64,
    /// Wasted work: extra probe steps past the home slot (fixed map), or candidate records
    /// examined that did not intersect (overlap map). The dynamic map cannot see its probes and
    /// reports 0.
    pub probes: u64,
    /// Entries (exact maps: distinct keys; overlap map: access records) alive now.
    pub live: u64,
    /// Highest `live` ever.
    pub high_water: u64,
}

/// Why a map refused an access.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the fixed TensorMap is full ({capacity} entries)")]
pub struct MapFull {
    /// The map's capacity in entries.
    pub capacity: usize,
}

/// The interface every TensorMap implements.
pub trait TensorMap {
    /// Records that `task` accesses `region` as `access`, calling `pred(p, kind)` for every
    /// earlier task `p` it must follow (see the module promises).
    fn access<F: FnMut(TaskId, EdgeKind)>(
        &mut self,
        task: TaskId,
        region: &Region,
        access: Access,
        pred: &mut F,
    );

    /// A hint that `region` will be accessed soon: a map may start loading what the access
    /// will read (see [`crate::prefetch`]). Returns `Some(word)` when it did, the word being
    /// what it computed on the way (its hash of the key), to be passed back to
    /// [`TensorMap::access_hinted`] for the same region so the access need not compute it
    /// again; `None` when it did nothing (the default, and a map whose table is small enough
    /// to stay cached): the builder then keeps no hint and passes `None`. The builder passes a
    /// task's hints back only if every region of the task got one.
    /// Changes nothing observable.
    #[inline]
    fn prefetch(&self, region: &Region) -> Option<u64> {
        let _ = region;
        None
    }

    /// [`TensorMap::prefetch`] given `slot_hash`, the region's [`Region::slot_hash`] computed by
    /// the caller: a map that hashes keys by it returns the hint without hashing again (and may
    /// return one where [`TensorMap::prefetch`] would not, the hash being free). The default
    /// is [`TensorMap::prefetch`].
    #[inline]
    fn prefetch_hashed(&self, region: &Region, slot_hash: u64) -> Option<u64> {
        let _ = slot_hash;
        self.prefetch(region)
    }

    /// [`TensorMap::access`] given `hint`: `Some` of what [`TensorMap::prefetch`] returned for
    /// this very region (and no other: a map may trust it), or `None`. The default ignores it.
    #[inline]
    fn access_hinted<F: FnMut(TaskId, EdgeKind)>(
        &mut self,
        task: TaskId,
        region: &Region,
        hint: Option<u64>,
        access: Access,
        pred: &mut F,
    ) {
        let _ = hint;
        self.access(task, region, access, pred);
    }

    /// Whether `regions` more accesses are sure to fit (always true for unbounded maps). The
    /// builder asks before a task's first access so that a full map never leaves a task half
    /// recorded.
    fn has_room(&self, regions: usize) -> Result<(), MapFull> {
        let _ = regions;
        Ok(())
    }

    /// Tasks older than `oldest_live` have completed (no new task needs to wait for them): a
    /// map may reclaim what it keeps for them. The unbounded maps keep tombstones and go on
    /// reporting them (see the module promises); the bounded exact map forgets them. Accesses
    /// by live tasks are kept as they are.
    fn retire_before(&mut self, oldest_live: TaskId);

    /// Forgets every access and zeroes the counters, keeping the map's allocations (a runtime that
    /// builds the same workload again reuses its tables instead of faulting in fresh pages).
    /// Behaves like a new map of the same configuration afterwards.
    fn clear(&mut self);

    /// The counters.
    fn stats(&self) -> MapStats;
}

/// A TensorMap chosen at run time (by [`pto_wsp_ir::DepsMode`] and options).
#[derive(Debug)]
pub enum AnyTensorMap {
    /// Exact keys, bounded table.
    Fixed(FixedExactMap),
    /// Exact keys, unbounded hash map.
    Dynamic(DynamicExactMap),
    /// Intersecting boxes.
    Overlap(OverlapMap),
    /// No inference (explicit edges only).
    None,
}

impl AnyTensorMap {
    /// The map `deps` uses: `exact` keys (bounded or not) for exact mode, the overlap map for
    /// overlap and hybrid, none for explicit.
    pub fn for_mode(deps: pto_wsp_ir::DepsMode, exact: crate::builder::ExactMap) -> AnyTensorMap {
        use crate::builder::ExactMap;
        use pto_wsp_ir::DepsMode;
        match deps {
            DepsMode::Exact => match exact {
                ExactMap::Fixed(n) => AnyTensorMap::Fixed(FixedExactMap::new(n)),
                ExactMap::Dynamic => AnyTensorMap::Dynamic(DynamicExactMap::new()),
                ExactMap::Growable => AnyTensorMap::Fixed(FixedExactMap::growable(4096)),
            },
            DepsMode::Overlap | DepsMode::Hybrid => AnyTensorMap::Overlap(OverlapMap::new()),
            DepsMode::Explicit => AnyTensorMap::None,
        }
    }
}

impl TensorMap for AnyTensorMap {
    #[inline]
    fn access<F: FnMut(TaskId, EdgeKind)>(
        &mut self,
        task: TaskId,
        region: &Region,
        access: Access,
        pred: &mut F,
    ) {
        match self {
            AnyTensorMap::Fixed(m) => m.access(task, region, access, pred),
            AnyTensorMap::Dynamic(m) => m.access(task, region, access, pred),
            AnyTensorMap::Overlap(m) => m.access(task, region, access, pred),
            AnyTensorMap::None => {}
        }
    }

    #[inline]
    fn prefetch(&self, region: &Region) -> Option<u64> {
        if let AnyTensorMap::Fixed(m) = self {
            m.prefetch(region)
        } else {
            None
        }
    }

    #[inline]
    fn prefetch_hashed(&self, region: &Region, slot_hash: u64) -> Option<u64> {
        if let AnyTensorMap::Fixed(m) = self {
            m.prefetch_hashed(region, slot_hash)
        } else {
            None
        }
    }

    #[inline]
    fn access_hinted<F: FnMut(TaskId, EdgeKind)>(
        &mut self,
        task: TaskId,
        region: &Region,
        hint: Option<u64>,
        access: Access,
        pred: &mut F,
    ) {
        match self {
            AnyTensorMap::Fixed(m) => m.access_hinted(task, region, hint, access, pred),
            AnyTensorMap::Dynamic(m) => m.access(task, region, access, pred),
            AnyTensorMap::Overlap(m) => m.access(task, region, access, pred),
            AnyTensorMap::None => {}
        }
    }

    fn has_room(&self, regions: usize) -> Result<(), MapFull> {
        match self {
            AnyTensorMap::Fixed(m) => m.has_room(regions),
            AnyTensorMap::Dynamic(_) | AnyTensorMap::Overlap(_) | AnyTensorMap::None => Ok(()),
        }
    }

    fn retire_before(&mut self, oldest_live: TaskId) {
        match self {
            AnyTensorMap::Fixed(m) => m.retire_before(oldest_live),
            AnyTensorMap::Dynamic(m) => m.retire_before(oldest_live),
            AnyTensorMap::Overlap(m) => m.retire_before(oldest_live),
            AnyTensorMap::None => {}
        }
    }

    fn clear(&mut self) {
        match self {
            AnyTensorMap::Fixed(m) => m.clear(),
            AnyTensorMap::Dynamic(m) => m.clear(),
            AnyTensorMap::Overlap(m) => m.clear(),
            AnyTensorMap::None => {}
        }
    }

    fn stats(&self) -> MapStats {
        match self {
            AnyTensorMap::Fixed(m) => m.stats(),
            AnyTensorMap::Dynamic(m) => m.stats(),
            AnyTensorMap::Overlap(m) => m.stats(),
            AnyTensorMap::None => MapStats::default(),
        }
    }
}

/// An FxHash-style hasher (rustc's): one rotate, xor and multiply per word. Keys that implement
/// `Hash` by writing one pre-mixed `u64` (like [`Region`]) pass through almost unchanged.
#[derive(Clone, Copy, Debug, Default)]
pub struct FxHasher {
    hash: u64,
}

impl FxHasher {
    #[inline]
    fn add(&mut self, w: u64) {
        self.hash = (self.hash.rotate_left(5) ^ w).wrapping_mul(FX_K);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w));
        }
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(i as u64);
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        if self.hash == 0 {
            // A single pre-mixed word: keep it (its high bits are already mixed for hashbrown's
            // control bytes, its low bits for the bucket index).
            self.hash = i;
        } else {
            self.add(i);
        }
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

/// `HashMap` with [`FxHasher`].
pub type FxHashMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<FxHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::ExactMap;
    use pto_wsp_ir::DepsMode;
    use std::collections::HashSet;
    use std::hash::BuildHasher;

    /// Task 0 writes a region, task 1 reads it, task 2 writes it again: the edges every
    /// inferring map must report (read after write; write after write and after read), written
    /// out here from the module promises.
    const EXPECTED: [(u32, u32, EdgeKind); 3] = [
        (0, 1, EdgeKind::Raw),
        (0, 2, EdgeKind::Waw),
        (1, 2, EdgeKind::War),
    ];

    fn edges_of(map: &mut AnyTensorMap, hinted: bool) -> Vec<(u32, u32, EdgeKind)> {
        let region = Region::new_2d(0, 0, 4, 0, 8);
        let mut edges = Vec::new();
        for (t, access) in [Access::Out, Access::In, Access::Out]
            .into_iter()
            .enumerate()
        {
            let t = t as u32;
            let mut pred = |p: TaskId, kind| edges.push((p.0, t, kind));
            if hinted {
                let hint = map.prefetch(&region);
                map.access_hinted(TaskId(t), &region, hint, access, &mut pred);
            } else {
                map.access(TaskId(t), &region, access, &mut pred);
            }
        }
        edges.sort_by_key(|&(p, t, _)| (t, p));
        edges.dedup();
        edges
    }

    /// Every variant of the run-time choice reaches its map through both entry points
    /// (`access` and `access_hinted`), and the explicit mode infers nothing.
    #[test]
    fn any_map_dispatches_every_access_to_its_map() {
        let inferring = [
            (DepsMode::Exact, ExactMap::Fixed(64)),
            (DepsMode::Exact, ExactMap::Dynamic),
            (DepsMode::Exact, ExactMap::Growable),
            (DepsMode::Overlap, ExactMap::Growable),
            (DepsMode::Hybrid, ExactMap::Growable),
        ];
        for (deps, exact) in inferring {
            for hinted in [false, true] {
                let mut map = AnyTensorMap::for_mode(deps, exact);
                assert_eq!(edges_of(&mut map, hinted), EXPECTED, "{deps:?} {exact:?}");
                assert_eq!(map.stats().hits, 2, "{deps:?} {exact:?}");
            }
        }
        for hinted in [false, true] {
            let mut map = AnyTensorMap::for_mode(DepsMode::Explicit, ExactMap::Growable);
            assert!(edges_of(&mut map, hinted).is_empty());
        }
    }

    /// The fixed map's prefetch hint (its key hash, the fast path) survives the run-time choice;
    /// the other variants prefetch nothing.
    #[test]
    fn any_map_passes_on_the_fixed_maps_prefetch_hint() {
        let big = 1 << 16;
        let region = Region::new_2d(1, 2, 3, 4, 5);
        let direct = FixedExactMap::new(big).prefetch(&region);
        assert_eq!(direct, Some(region.slot_hash()));
        let any = AnyTensorMap::for_mode(DepsMode::Exact, ExactMap::Fixed(big));
        assert_eq!(any.prefetch(&region), direct);
        for deps in [DepsMode::Overlap, DepsMode::Explicit] {
            let any = AnyTensorMap::for_mode(deps, ExactMap::Fixed(big));
            assert_eq!(any.prefetch(&region), None, "{deps:?}");
        }
    }

    /// Hashes of `keys` (each hashed through `write`), asserting no two collide.
    fn assert_distinct<K: std::fmt::Debug>(
        keys: impl IntoIterator<Item = K>,
        write: impl Fn(&mut FxHasher, &K),
    ) {
        let mut seen = HashSet::new();
        for k in keys {
            let mut h = FxHasher::default();
            write(&mut h, &k);
            assert!(seen.insert(h.finish()), "{k:?} collides");
        }
    }

    /// Every word width the maps' keys use is mixed in: distinct keys of one, two and three
    /// words, of `u32`, `u64`, `usize` and byte strings (with and without a partial last word),
    /// get distinct hashes. (One word is a bijection, `x * K`; a second is rotated in by xor.)
    #[test]
    fn fx_hasher_mixes_every_word_width() {
        let small = || (0..48u64).flat_map(|a| (0..48u64).map(move |b| (a, b)));
        assert_distinct(small(), |h, &(a, b)| {
            h.write_u32(a as u32);
            h.write_u32(b as u32);
        });
        assert_distinct(small(), |h, &(a, b)| {
            h.write_usize(a as usize);
            h.write_usize(b as usize);
        });
        // A first `u64` is kept as it is, so keep its bits clear of the second's (plain Fx
        // collides `(1 << 5) ^ 32` with `(2 << 5) ^ 0`-style pairs by design).
        assert_distinct(small(), |h, &(a, b)| {
            h.write_u64((a + 1) << 8);
            h.write_u64(b);
        });
        assert_distinct(small(), |h, &(a, b)| {
            h.write_u32(7);
            h.write_u64(a);
            h.write_u64(b);
        });
        // Byte strings: whole words, a partial last word, and prefixes of one another.
        assert_distinct(small(), |h, &(a, b)| {
            let mut bytes = a.to_le_bytes().to_vec();
            bytes.extend_from_slice(&b.to_le_bytes());
            h.write(&bytes);
        });
        assert_distinct(small(), |h, &(a, b)| h.write(&[a as u8, b as u8, 1]));
        assert_distinct(1..=12usize, |h, &n| h.write(&vec![0xa5u8; n]));
        // A single pre-mixed `u64` (a region's key) passes through as it is.
        let mut h = FxHasher::default();
        h.write_u64(0x1234_5678_9abc_def0);
        assert_eq!(h.finish(), 0x1234_5678_9abc_def0);
    }

    #[test]
    fn fx_hasher_spreads_region_keys() {
        let b = BuildHasherDefault::<FxHasher>::default();
        let mut seen = std::collections::HashSet::new();
        for t in 0..4u32 {
            for r in 0..64 {
                for c in 0..64 {
                    let reg = Region::new_2d(t, r * 32, 32, c * 128, 128);
                    seen.insert(b.hash_one(reg) & 0xffff);
                }
            }
        }
        // 16,384 keys into 65,536 buckets: a decent hash leaves few collisions.
        assert!(seen.len() > 12_000, "{}", seen.len());
    }
}
