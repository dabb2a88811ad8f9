//! The bounded exact-key map (seed 004 §6.2.3 `FixedTensorMap`): what an AICPU-style executor
//! can run with no allocator.
//!
//! An open-addressing table (linear probing, at most half full) of 8-byte slots — a 32-bit hash
//! tag and an entry index — over a fixed pool of entries (key, last writer, reader list: one
//! 64-byte cache line each). All
//! memory is reserved at construction, except reader-list chunks, which come from a pool with a
//! free list.
//!
//! **When full:** the map holds at most `capacity` distinct keys. It does not grow and does not
//! evict (evicting a key would lose edges). Instead [`TensorMap::has_room`] tells the builder, before
//! a task touches the map, whether the task's regions are sure to fit; if not, `submit` fails with
//! [`crate::builder::BuildError::TensorMapFull`] and nothing of the task is recorded. Under a task
//! window, [`TensorMap::retire_before`] frees the keys of completed tasks, so a capacity of a few
//! times the window's distinct keys never fills.

use super::readers::{ExactEntry, ReaderPool};
use super::{MapFull, MapStats, TensorMap};
use crate::types::{Access, EdgeKind, Region, TaskId};

const NIL: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Slot {
    tag: u32,
    entry: u32,
}

const EMPTY: Slot = Slot { tag: 0, entry: NIL };

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
    entries: Vec<Keyed>,
    free: Vec<u32>,
    capacity: usize,
    pool: ReaderPool,
    buf: Vec<u32>,
    stats: MapStats,
}

impl FixedExactMap {
    /// A map for at most `capacity` distinct keys (at least 1). Reserves `capacity` entries and a
    /// table of the next power of two at or above `2 * capacity` slots.
    pub fn new(capacity: usize) -> FixedExactMap {
        let capacity = capacity.max(1);
        let n = (2 * capacity).next_power_of_two();
        FixedExactMap {
            slots: vec![EMPTY; n],
            mask: n - 1,
            entries: Vec::with_capacity(capacity),
            free: Vec::new(),
            capacity,
            pool: ReaderPool::new(),
            buf: Vec::new(),
            stats: MapStats::default(),
        }
    }

    /// The most distinct keys the map holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    #[inline]
    fn alloc(&mut self, key: Region) -> u32 {
        self.stats.live += 1;
        self.stats.high_water = self.stats.high_water.max(self.stats.live);
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

    /// Removes `entry`'s slot with backward-shift deletion (no tombstones): later members of
    /// the probe cluster move back when their home slot allows it.
    fn remove_slot(&mut self, entry: u32) {
        let mask = self.mask;
        let mut i = self.entries[entry as usize].key.key_hash() as usize & mask;
        while self.slots[i].entry != entry {
            i = (i + 1) & mask;
        }
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let s = self.slots[j];
            if s.entry == NIL {
                break;
            }
            // The slot's tag holds the low 32 bits of its hash, so its home is `tag & mask`.
            let home = s.tag as usize & mask;
            let stays = if i <= j {
                i < home && home <= j
            } else {
                i < home || home <= j
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
        let h = region.key_hash();
        let tag = h as u32;
        let mut i = h as usize & self.mask;
        loop {
            let s = self.slots[i];
            if s.entry == NIL {
                let e = self.alloc(*region);
                self.slots[i] = Slot { tag, entry: e };
                self.stats.misses += 1;
                self.entries[e as usize]
                    .entry
                    .apply(task, access, &mut self.pool, pred);
                return;
            }
            if s.tag == tag && self.entries[s.entry as usize].key == *region {
                let entry = &mut self.entries[s.entry as usize].entry;
                if entry.is_empty() {
                    self.stats.misses += 1;
                } else {
                    self.stats.hits += 1;
                }
                entry.apply(task, access, &mut self.pool, pred);
                return;
            }
            self.stats.probes += 1;
            i = (i + 1) & self.mask;
        }
    }

    fn has_room(&self, regions: usize) -> Result<(), MapFull> {
        if self.stats.live as usize + regions <= self.capacity {
            Ok(())
        } else {
            Err(MapFull {
                capacity: self.capacity,
            })
        }
    }

    fn retire_before(&mut self, oldest_live: TaskId) {
        // Sweep the entry pool in order (sequential memory), delete emptied keys from the table.
        for e in 0..self.entries.len() {
            let entry = &mut self.entries[e].entry;
            if entry.is_empty() {
                continue; // free
            }
            entry.retire_before(oldest_live, &mut self.pool, &mut self.buf);
            if entry.is_empty() {
                entry.release(&mut self.pool);
                self.free.push(e as u32);
                self.stats.live -= 1;
                self.remove_slot(e as u32);
            }
        }
    }

    fn clear(&mut self) {
        if self.entries.len() * 8 < self.slots.len() {
            // Few keys: empty their slots only (each key's slot is on its probe run).
            for e in 0..self.entries.len() {
                if !self.entries[e].entry.is_empty() {
                    self.remove_slot(e as u32);
                }
            }
        } else {
            self.slots.fill(EMPTY);
        }
        self.entries.clear();
        self.free.clear();
        self.pool.clear();
        self.stats = MapStats::default();
    }

    fn stats(&self) -> MapStats {
        self.stats
    }
}
