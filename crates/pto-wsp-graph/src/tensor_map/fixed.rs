//! The bounded exact-key map (the back-end architecture specification's `FixedTensorMap`): what an
//! AICPU-style executor can run with no allocator.
//!
//! A table (open addressing that probes the same place of the next 8-slot window, at most half
//! full) of 8-byte slots — a 32-bit hash tag and an entry index — over a fixed pool of entries
//! (key, last writer, reader list: one 64-byte cache line each). All memory is reserved at
//! construction, except reader-list chunks, which come from a pool with a free list.
//!
//! **Emptied without a write:** a slot stores its entry index plus the table's *base*, and one
//! storing less than the base is empty. [`TensorMap::clear`] (every warm rebuild) raises the base
//! past every value stored since the table was last emptied, so the slots of the previous build
//! read as empty without the table being written (8 MiB per build at 200,000 tasks, or a whole
//! table for the few keys of a short build under a window). A dense table small enough to stay
//! cached is zeroed instead (which leaves it in the cache for the next build), and so is any
//! table when the base nears `u32::MAX` (the base then starts again at 1).
//!
//! **Slot layout:** slots are indexed by [`Region::slot_hash`], which places the column tiles
//! `8k .. 8k + 8` of one row of a tensor in eight neighbouring slots (one cache line), so a
//! task stream walking a row of tiles misses the table once per eight new keys rather than once
//! per key. Once the table outgrows the L1 cache ([`PREFETCH_MIN_SLOTS`]) the builder computes
//! the hash once, when a region is added to a task ([`TensorMap::prefetch`], which also
//! prefetches the home slot), and passes it to [`TensorMap::access_hinted`]; a smaller table
//! is hashed in [`TensorMap::access`] and keeps no hint. A region that comes with its hash
//! ([`TensorMap::prefetch_hashed`]) has the hash passed back at every table size.
//!
//! **Retiring without a sweep (bounded map):** an entry's newest task is its newest reader or
//! else its writer (readers since the last write are newer than the writer), and the map logs
//! `(task, entry)` for every access in submission order. The log starts at the first
//! retire (which sweeps the entries once to build it, so a build that never retires never logs)
//! and is bounded: past [`LOG_MAX`] records it stops, and the next retire sweeps again.
//! [`TensorMap::retire_before`] pops the log records of completed tasks and frees exactly the
//! entries whose newest task has completed — the keys an eager sweep would free — touching only
//! those. Completed tasks still named inside live entries (a stale writer, old readers of a weight
//! tile) are reported by later accesses like live ones (the builder and the runtimes wire no
//! edge to a completed task), and reader chunks of completed tasks are returned to the pool when
//! their list next grows, leaving a count.
//!
//! **Growable:** [`FixedExactMap::growable`] makes the same table without a bound: when the live
//! keys reach the capacity it doubles (entries keep their indices; the slot table is rebuilt
//! from the live keys), so it serves as the unbounded exact map of the host runtime at the speed
//! of the bounded one. A growable map frees no key when tasks retire: a key whose tasks have all
//! completed stays as a *tombstone* (its last writer's id and a count of completed readers, see
//! [`super::readers`]), so later accesses count the edges a build without retiring finds and the
//! inferred-edge count does not depend on timing. Its memory follows the number of distinct keys
//! (and the readers still listed), not the number of tasks.
//!
//! **Bounded and retiring:** freeing the keys of completed tasks is what keeps a bounded map from
//! filling, so it cannot keep a tombstone for every key. It keeps them while it is at most half
//! full (a retire then frees nothing, as for the growable map); a retire that finds more than
//! half of the capacity in live keys frees the keys whose tasks have all completed. A later
//! access of a freed key finds no earlier task, so the number of edges found (never the order of
//! live tasks) depends on when the tasks completed once, and only once, the live keys exceed
//! half the capacity at a retire.
//!
//! **When full (bounded):** the map holds at most `capacity` distinct keys. It does not grow and
//! does not evict (evicting a key would lose edges). Instead [`TensorMap::has_room`] tells the
//! builder, before a task touches the map, whether the task's regions are sure to fit; if not,
//! `submit` fails with [`crate::builder::BuildError::TensorMapFull`] and nothing of the task is
//! recorded. Under a task window, [`TensorMap::retire_before`] frees the keys of completed tasks,
//! so a capacity of a few times the window's distinct keys never fills.

use super::readers::{ExactEntry, ReaderPool};
use super::{MapFull, MapStats, TensorMap};
use crate::types::{Access, EdgeKind, Region, SLOT_WINDOW, SLOT_WINDOW_BITS, TaskId};

const NIL: u32 = u32::MAX;

/// Slots per window ([`Region::slot_hash`]).
const W: usize = SLOT_WINDOW as usize;

/// Slot-table size (256 KiB of slots: past the 32 KiB L1 data cache, with the entries at 8×
/// that, past the L2) from which [`TensorMap::prefetch`] prefetches; a smaller table is hashed
/// in the access itself, which costs fewer instructions than keeping a hint per region.
const PREFETCH_MIN_SLOTS: usize = 1 << 15;

/// Largest slot table (4 MiB) that [`TensorMap::clear`] zeroes when it is dense (at least one
/// key per 8 slots); any other table is emptied by raising its base. Measured on the build
/// bench: at 50,000 tasks (a 2 MiB table, dense) zeroing is faster than raising the base (the
/// zeroed table is in the cache for the next build's random slot reads: about 60 against 68 ns
/// per task), at 200,000 tasks (8 MiB) it is not (the build's streams evict it before use).
const ZERO_MAX_SLOTS: usize = 1 << 19;

/// Most access-log records kept (512 KiB); past this the next retire sweeps instead.
const LOG_MAX: usize = 1 << 16;

/// A table slot: a tag and an entry index stored *above the table's base*
/// ([`FixedExactMap::base`]): `stored = index + base`, so a slot whose stored value is below
/// the base is empty. Emptying the table is then raising the base past every value stored
/// ([`TensorMap::clear`]), not writing the table: a slot filled before the clear reads as
/// empty after it. All zero bits is empty at every base (the base is at least 1).
#[derive(Clone, Copy, Debug)]
struct Slot {
    tag: u32,
    /// The entry index plus the table's base, or anything below the base for an empty slot.
    stored: u32,
}

const EMPTY: Slot = Slot { tag: 0, stored: 0 };

impl Slot {
    /// A slot holding entry `e` under `tag`, at `base`.
    #[inline]
    fn new(tag: u32, e: u32, base: u32) -> Slot {
        Slot {
            tag,
            stored: e + base,
        }
    }

    /// The entry index at `base`, or `None` for an empty slot.
    #[inline]
    fn live(self, base: u32) -> Option<u32> {
        self.stored.checked_sub(base)
    }
}

/// A key and its entry in one 64-byte cache line: a hit touches the slot's line and this one.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Keyed {
    key: Region,
    entry: ExactEntry,
}

const _: () = assert!(std::mem::size_of::<Keyed>() == 64);

/// Exact-key TensorMap with a fixed capacity (see the module docs for what happens when full).
#[derive(Debug)]
pub struct FixedExactMap {
    slots: Vec<Slot>,
    mask: usize,
    /// What a slot stores above its entry index (at least 1): every slot storing less is empty,
    /// so [`TensorMap::clear`] empties the table by raising it past every value stored.
    base: u32,
    entries: Vec<Keyed>,
    free: Vec<u32>,
    capacity: usize,
    pool: ReaderPool,
    /// Tasks older than this have completed.
    oldest: u32,
    /// `(task << 32) | entry` per access since `log_head`, in task order (unless `log_off`).
    log: Vec<u64>,
    log_head: usize,
    /// Most records `log` keeps ([`LOG_MAX`]).
    log_max: usize,
    /// No log (before the first retire, or after an overflow): the next retire sweeps every
    /// entry and starts the log from the survivors.
    log_off: bool,
    /// Doubles instead of refusing when full ([`FixedExactMap::growable`]).
    grows: bool,
    /// The live-key count at which an access must grow the map first: `capacity` for a growable
    /// map, never (`usize::MAX`) for a bounded one (so an access tests one number, not two).
    grow_at: usize,
    stats: MapStats,
}

/// The slot after `i` in probe order: the same position of the next window of `W` slots (so the
/// keys of one window, which sit at different positions, never probe into each other's
/// slots), and from the last window on to the next position of the first (`n` slots, a power
/// of two `>= W`: every slot is visited once per cycle).
#[inline]
fn next_slot(i: usize, n: usize) -> usize {
    let j = i + W;
    if j < n { j } else { (j + 1) & (W - 1) }
}

/// Where slot `i` comes in the probe cycle of [`next_slot`] (position 0 is slot 0).
#[inline]
fn probe_rank(i: usize, n: usize) -> usize {
    (i & (W - 1)) * (n >> SLOT_WINDOW_BITS) + (i >> SLOT_WINDOW_BITS)
}

impl FixedExactMap {
    /// A map for at most `capacity` distinct keys (at least 1). Reserves `capacity` entries and a
    /// table of the next power of two at or above `2 * capacity` slots.
    pub fn new(capacity: usize) -> FixedExactMap {
        let capacity = capacity.max(1);
        let n = (2 * capacity).next_power_of_two().max(W);
        FixedExactMap {
            slots: vec![EMPTY; n],
            mask: n - 1,
            base: 1,
            entries: Vec::with_capacity(capacity),
            free: Vec::new(),
            capacity,
            pool: ReaderPool::new(),
            oldest: 0,
            log: Vec::new(),
            log_head: 0,
            log_off: true,
            log_max: LOG_MAX,
            grows: false,
            grow_at: usize::MAX,
            stats: MapStats::default(),
        }
    }

    /// A map without a bound, starting with room for `initial` keys and doubling whenever the
    /// live keys reach its capacity (see the module docs). [`TensorMap::has_room`] always agrees.
    pub fn growable(initial: usize) -> FixedExactMap {
        let map = FixedExactMap::new(initial);
        FixedExactMap {
            grows: true,
            grow_at: map.capacity,
            ..map
        }
    }

    /// Doubles the capacity and rebuilds the slot table from the live keys.
    #[cold]
    fn grow(&mut self) {
        self.capacity *= 2;
        self.grow_at = self.capacity;
        self.entries
            .reserve(self.capacity.saturating_sub(self.entries.len()));
        let n = (2 * self.capacity).next_power_of_two().max(W);
        self.slots.clear();
        self.slots.resize(n, EMPTY);
        self.mask = n - 1;
        // Every slot is written anew: the lowest base serves.
        self.base = 1;
        let base = self.base;
        let mut free = vec![false; self.entries.len()];
        for &e in &self.free {
            free[e as usize] = true;
        }
        for (e, keyed) in self.entries.iter().enumerate() {
            if free[e] {
                continue;
            }
            let h = keyed.key.slot_hash();
            let mut i = h as usize & self.mask;
            while self.slots[i].live(base).is_some() {
                i = next_slot(i, n);
            }
            self.slots[i] = Slot::new(h as u32, e as u32, base);
        }
    }

    /// Like [`FixedExactMap::new`], logging at most `records` accesses between retires (the
    /// default is 65,536): past that, the next [`TensorMap::retire_before`] sweeps every entry
    /// instead of reading the log. Only the cost of retiring changes, never the edges.
    pub fn with_log_limit(capacity: usize, records: usize) -> FixedExactMap {
        FixedExactMap {
            log_max: records,
            ..FixedExactMap::new(capacity)
        }
    }

    /// The most distinct keys the map holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    #[inline]
    fn alloc(&mut self, key: Region) -> u32 {
        // `high_water` is brought up to date where `live` falls (and in `stats`).
        self.stats.live += 1;
        let keyed = Keyed {
            key,
            entry: ExactEntry::default(),
        };
        if let Some(i) = self.free.pop() {
            self.entries[i as usize] = keyed;
            i
        } else {
            assert!(
                self.entries.len() < self.capacity,
                "FixedExactMap is full: ask has_room before access"
            );
            self.entries.push(keyed);
            (self.entries.len() - 1) as u32
        }
    }

    /// Frees a live entry: its chunks, its table slot, its index.
    fn free_entry(&mut self, e: u32) {
        self.stats.high_water = self.stats.high_water.max(self.stats.live);
        self.entries[e as usize].entry.release(&mut self.pool);
        self.free.push(e);
        self.stats.live -= 1;
        self.remove_slot(e);
    }

    /// Retires by sweeping every entry (after the log overflowed), then rebuilds the log from the
    /// survivors' newest tasks.
    #[cold]
    fn sweep(&mut self) {
        self.log.clear();
        self.log_head = 0;
        for e in 0..self.entries.len() as u32 {
            let last = self.entries[e as usize].entry.last(&self.pool);
            if last == NIL {
                continue; // free
            }
            if last < self.oldest {
                self.free_entry(e);
            } else {
                self.log.push(((last as u64) << 32) | e as u64);
            }
        }
        self.log.sort_unstable();
        self.log_off = self.log.len() > self.log_max;
        if self.log_off {
            self.log.clear();
        }
    }

    /// Removes `entry`'s slot with backward-shift deletion (no tombstones): later members of
    /// the probe cluster (in [`next_slot`] order) move back when their home slot allows it.
    fn remove_slot(&mut self, entry: u32) {
        let (mask, n, base) = (self.mask, self.slots.len(), self.base);
        let mut i = self.entries[entry as usize].key.slot_hash() as usize & mask;
        // Compared as stored: the entry's slot stores `entry + base`, an empty one less than
        // `base`.
        while self.slots[i].stored != entry + base {
            i = next_slot(i, n);
        }
        let mut j = i;
        loop {
            j = next_slot(j, n);
            let s = self.slots[j];
            if s.stored < base {
                break;
            }
            // The slot's tag holds the low 32 bits of its hash, so its home is `tag & mask`;
            // compare places in the probe cycle, not slot indices.
            let (ri, rj) = (probe_rank(i, n), probe_rank(j, n));
            let home = probe_rank(s.tag as usize & mask, n);
            let stays = if ri <= rj {
                ri < home && home <= rj
            } else {
                ri < home || home <= rj
            };
            if !stays {
                self.slots[i] = s;
                i = j;
            }
        }
        self.slots[i] = EMPTY;
    }
}

impl TensorMap for FixedExactMap {
    #[inline]
    fn access<F: FnMut(TaskId, EdgeKind)>(
        &mut self,
        task: TaskId,
        region: &Region,
        access: Access,
        pred: &mut F,
    ) {
        self.access_hinted(task, region, None, access, pred);
    }

    /// `hint` is `Some` of the region's [`Region::slot_hash`] (what [`TensorMap::prefetch`]
    /// returns), or `None`: the access hashes the region.
    #[inline]
    fn access_hinted<F: FnMut(TaskId, EdgeKind)>(
        &mut self,
        task: TaskId,
        region: &Region,
        hint: Option<u64>,
        access: Access,
        pred: &mut F,
    ) {
        debug_assert!(hint.is_none_or(|h| h == region.slot_hash()));
        if self.stats.live as usize >= self.grow_at {
            self.grow();
        }
        let h = hint.unwrap_or_else(|| region.slot_hash());
        let tag = h as u32;
        let (n, home, base) = (self.slots.len(), h as usize & self.mask, self.base);
        let mut i = home;
        let e = loop {
            let s = self.slots[i];
            let Some(e) = s.live(base) else {
                let e = self.alloc(*region);
                self.slots[i] = Slot::new(tag, e, base);
                self.stats.misses += 1;
                break e;
            };
            if s.tag == tag && self.entries[e as usize].key == *region {
                self.stats.hits += 1;
                break e;
            }
            i = next_slot(i, n);
            // Counted in place: a step past the home slot is rare, and a register is not.
            self.stats.probes += 1;
        };
        self.entries[e as usize]
            .entry
            .apply(task, access, &mut self.pool, self.oldest, pred);
        if !self.log_off {
            if self.log.len() - self.log_head < self.log_max {
                self.log.push(((task.0 as u64) << 32) | e as u64);
            } else {
                self.log_off = true;
            }
        }
    }

    /// Prefetches the key's home slot once the slot table outgrows the L1 cache, and returns
    /// the key's [`Region::slot_hash`] for [`TensorMap::access_hinted`] (hashed once per access).
    #[inline]
    fn prefetch(&self, region: &Region) -> Option<u64> {
        if self.slots.len() < PREFETCH_MIN_SLOTS {
            return None;
        }
        let h = region.slot_hash();
        crate::prefetch::prefetch_index(&self.slots, h as usize & self.mask);
        Some(h)
    }

    /// The hint is the hash itself, whatever the table's size (it cost nothing here); the home
    /// slot is prefetched as by [`TensorMap::prefetch`] (from [`PREFETCH_MIN_SLOTS`] on).
    #[inline]
    fn prefetch_hashed(&self, region: &Region, slot_hash: u64) -> Option<u64> {
        debug_assert_eq!(slot_hash, region.slot_hash());
        if self.slots.len() >= PREFETCH_MIN_SLOTS {
            crate::prefetch::prefetch_index(&self.slots, slot_hash as usize & self.mask);
        }
        Some(slot_hash)
    }

    fn has_room(&self, regions: usize) -> Result<(), MapFull> {
        // The bound first: a bounded map (the one that needs the answer) tests one number.
        if self.stats.live as usize + regions <= self.capacity || self.grows {
            Ok(())
        } else {
            Err(MapFull {
                capacity: self.capacity,
            })
        }
    }

    fn retire_before(&mut self, oldest_live: TaskId) {
        let oldest = oldest_live.0.max(self.oldest);
        self.oldest = oldest;
        if self.grows || self.stats.live as usize * 2 <= self.capacity {
            // Unbounded, or at most half full: every key stays, a completed one as a tombstone
            // (see the module docs); reader lists are pruned as they grow. (The log, if on,
            // keeps growing until it overflows; the next retire that frees then sweeps.)
            return;
        }
        if self.log_off {
            self.sweep();
            return;
        }
        // Pop the records of completed tasks; free each entry whose newest task is among them.
        let mut at = self.log_head;
        while at < self.log.len() {
            let r = self.log[at];
            if (r >> 32) as u32 >= oldest {
                break;
            }
            at += 1;
            let e = r as u32;
            if self.entries[e as usize].entry.last(&self.pool) < oldest {
                self.free_entry(e);
            }
        }
        self.log_head = at;
        if at > self.log.len() / 2 {
            self.log.drain(..at);
            self.log_head = 0;
        }
    }

    fn clear(&mut self) {
        // Every slot stores less than `base + entries.len()` (an index of an entry made since
        // the table was last emptied, plus the base): from that base on, every slot is empty,
        // without a write to the table. A dense table that the cache holds is zeroed instead
        // ([`ZERO_MAX_SLOTS`]), and so is any table when the base would leave no room below
        // `u32::MAX` for the indices of a full map.
        let next = self.base as u64 + self.entries.len() as u64;
        let zero = self.entries.len() * 8 >= self.slots.len() && self.slots.len() <= ZERO_MAX_SLOTS;
        if !zero && next + self.capacity as u64 <= u32::MAX as u64 {
            self.base = next as u32;
        } else {
            self.slots.fill(EMPTY);
            self.base = 1;
        }
        self.entries.clear();
        self.free.clear();
        self.pool.clear();
        self.oldest = 0;
        self.log.clear();
        self.log_head = 0;
        self.log_off = true;
        self.stats = MapStats::default();
    }

    fn stats(&self) -> MapStats {
        MapStats {
            high_water: self.stats.high_water.max(self.stats.live),
            ..self.stats
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `next_slot` visits every slot once per cycle, in the order `probe_rank` numbers them.
    #[test]
    fn the_probe_cycle_visits_every_slot_once() {
        for n in [8usize, 16, 64, 1024] {
            let (mut i, mut seen) = (0usize, vec![false; n]);
            for rank in 0..n {
                assert_eq!(probe_rank(i, n), rank, "slot {i} of {n}");
                assert!(
                    !std::mem::replace(&mut seen[i], true),
                    "slot {i} of {n} twice"
                );
                i = next_slot(i, n);
            }
            assert_eq!(i, 0, "the cycle closes");
        }
    }

    /// Edges `task .. task + 48` of one build over `map`: reads and writes of a few keys of a
    /// few windows, so keys probe past their home slots (a small table).
    fn edges_of_a_build(map: &mut FixedExactMap, round: u32) -> Vec<(u32, u32, EdgeKind)> {
        let mut edges = Vec::new();
        for t in 0..48u32 {
            let k = (t * 7 + round) % 40;
            let region = Region::new_2d(k % 3, k / 12, 1, (k % 12) * 4, 4);
            let access = [Access::Out, Access::In, Access::InOut][((t + round) % 3) as usize];
            map.access(TaskId(t), &region, access, &mut |p, kind| {
                edges.push((p.0, t, kind))
            });
        }
        edges
    }

    /// A map cleared again and again finds in each build the edges a new map finds (no slot of
    /// an earlier build is seen), also across the clear that meets the base's limit, which zeroes
    /// the table and starts the base again at 1. (A sparse table: 40 keys in 512 slots, so the
    /// clears raise the base; a dense one is zeroed, checked last.)
    #[test]
    fn clears_up_to_the_base_limit_forget_every_earlier_build() {
        let cap = 200usize;
        let mut worn = FixedExactMap::new(cap);
        assert_eq!(worn.slots.len(), 512);
        // Three clears of about 40 keys each before the limit (`base + keys + capacity`).
        worn.base = u32::MAX - 320;
        let mut reset = false;
        for round in 0..8 {
            let before = worn.base;
            let mut fresh = FixedExactMap::new(cap);
            let want = edges_of_a_build(&mut fresh, round);
            assert!(!want.is_empty());
            assert_eq!(edges_of_a_build(&mut worn, round), want, "round {round}");
            assert_eq!(worn.stats(), fresh.stats());
            worn.clear();
            if worn.base < before {
                assert_eq!(worn.base, 1, "the base starts again");
                assert!(worn.slots.iter().all(|s| s.stored == 0), "a zeroed table");
                reset = true;
            } else {
                assert_eq!(worn.base as usize, before as usize + worn_keys(round));
            }
        }
        assert!(reset, "the limit was met");
        // A dense table (40 keys in 128 slots) is zeroed, the base kept.
        let mut dense = FixedExactMap::new(64);
        edges_of_a_build(&mut dense, 0);
        dense.clear();
        assert_eq!(dense.base, 1);
        assert!(dense.slots.iter().all(|s| s.stored == 0), "a zeroed table");
        let want = edges_of_a_build(&mut FixedExactMap::new(64), 1);
        assert_eq!(edges_of_a_build(&mut dense, 1), want);
    }

    /// Distinct keys of [`edges_of_a_build`]'s round `round`.
    fn worn_keys(round: u32) -> usize {
        let keys: std::collections::HashSet<u32> =
            (0..48u32).map(|t| (t * 7 + round) % 40).collect();
        keys.len()
    }

    /// A table large enough to prefetch gives the same edges with and without the hint
    /// (the hint's `unsafe` call runs under Miri here).
    #[test]
    fn prefetching_changes_no_edge() {
        let keys = PREFETCH_MIN_SLOTS / 2;
        let (mut hinted, mut plain) = (FixedExactMap::new(keys), FixedExactMap::new(keys));
        assert!(hinted.slots.len() >= PREFETCH_MIN_SLOTS);
        let mut edges = [Vec::new(), Vec::new()];
        for t in 0..64u32 {
            let region = Region::new_2d(t % 3, t % 5, 1, 0, 4);
            let access = if t % 2 == 0 { Access::Out } else { Access::In };
            let hint = hinted.prefetch(&region).expect("a large table prefetches");
            assert_eq!(hint, region.slot_hash());
            hinted.access_hinted(TaskId(t), &region, Some(hint), access, &mut |p, kind| {
                edges[0].push((p.0, t, kind))
            });
            plain.access(TaskId(t), &region, access, &mut |p, kind| {
                edges[1].push((p.0, t, kind))
            });
        }
        assert!(!edges[0].is_empty());
        assert_eq!(edges[0], edges[1]);
        // A table below the threshold prefetches nothing and returns no hint.
        let small = FixedExactMap::new(PREFETCH_MIN_SLOTS / 8);
        assert!(small.slots.len() < PREFETCH_MIN_SLOTS);
        assert_eq!(small.prefetch(&Region::new_2d(0, 0, 1, 0, 4)), None);
    }
}
