//! The bounded exact-key map (seed 004 §6.2.3 `FixedTensorMap`): what an AICPU-style executor
//! can run with no allocator.
//!
//! An open-addressing table (linear probing, at most half full) of 8-byte slots — a 32-bit hash
//! tag and an entry index — over a fixed pool of entries (key, last writer, reader list). All
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

/// Exact-key TensorMap with a fixed capacity (see the module docs for what happens when full).
#[derive(Debug)]
pub struct FixedExactMap {
    slots: Vec<Slot>,
    mask: usize,
    keys: Vec<Region>,
    entries: Vec<ExactEntry>,
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
            keys: Vec::with_capacity(capacity),
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

    fn alloc(&mut self, key: Region) -> u32 {
        self.stats.live += 1;
        self.stats.high_water = self.stats.high_water.max(self.stats.live);
        if let Some(i) = self.free.pop() {
            self.keys[i as usize] = key;
            self.entries[i as usize] = ExactEntry::default();
            i
        } else {
            assert!(
                self.keys.len() < self.capacity,
                "FixedExactMap is full: ask has_room before access"
            );
            self.keys.push(key);
            self.entries.push(ExactEntry::default());
            (self.keys.len() - 1) as u32
        }
    }

    fn insert_slot(&mut self, hash: u64, entry: u32) {
        let mut i = hash as usize & self.mask;
        while self.slots[i].entry != NIL {
            i = (i + 1) & self.mask;
        }
        self.slots[i] = Slot {
            tag: (hash >> 32) as u32,
            entry,
        };
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
        let tag = (h >> 32) as u32;
        let mut i = h as usize & self.mask;
        loop {
            let s = self.slots[i];
            if s.entry == NIL {
                let e = self.alloc(*region);
                self.slots[i] = Slot { tag, entry: e };
                self.stats.misses += 1;
                self.entries[e as usize].apply(task, access, &mut self.pool, pred);
                return;
            }
            if s.tag == tag && self.keys[s.entry as usize] == *region {
                let entry = &mut self.entries[s.entry as usize];
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
        // Retire every entry, free the empty ones, then rebuild the table from the survivors
        // (simpler than deleting from a linear-probing table one slot at a time, and the same
        // O(table) cost as the sweep).
        for s in self.slots.iter_mut() {
            if s.entry == NIL {
                continue;
            }
            let e = &mut self.entries[s.entry as usize];
            e.retire_before(oldest_live, &mut self.pool, &mut self.buf);
            if e.is_empty() {
                e.release(&mut self.pool);
                self.free.push(s.entry);
                self.stats.live -= 1;
                *s = EMPTY;
            }
        }
        let mut live = std::mem::take(&mut self.buf);
        live.clear();
        live.extend(
            self.slots
                .iter()
                .filter(|s| s.entry != NIL)
                .map(|s| s.entry),
        );
        self.slots.fill(EMPTY);
        for &e in &live {
            let h = self.keys[e as usize].key_hash();
            self.insert_slot(h, e);
        }
        self.buf = live;
    }

    fn stats(&self) -> MapStats {
        self.stats
    }
}
