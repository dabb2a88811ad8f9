//! The unbounded exact-key map (the back-end architecture specification's `DynamicTensorMap`): a
//! hash map from region key to last writer and readers, with the FxHash-style [`super::FxHasher`].
//! Never full.
//!
//! Retiring keeps every key: an entry whose tasks have all completed stays as a tombstone (its
//! last writer's id and a count of completed readers, see [`super::readers`]), so later accesses
//! still find, and count, the edges a build without retiring finds. Memory grows with the number
//! of distinct keys and the readers still listed, not with the number of tasks.

use super::readers::{ExactEntry, ReaderPool};
use super::{FxHashMap, MapStats, TensorMap};
use crate::types::{Access, EdgeKind, Region, TaskId};

/// Exact-key TensorMap without a bound.
#[derive(Debug)]
pub struct DynamicExactMap {
    map: FxHashMap<Region, ExactEntry>,
    pool: ReaderPool,
    /// Tasks older than this have completed: reader chunks holding only such tasks are pruned.
    oldest: u32,
    stats: MapStats,
}

impl Default for DynamicExactMap {
    fn default() -> Self {
        DynamicExactMap::new()
    }
}

impl DynamicExactMap {
    /// An empty map.
    pub fn new() -> DynamicExactMap {
        DynamicExactMap::with_capacity(0)
    }

    /// An empty map with room for `keys` keys before it rehashes.
    pub fn with_capacity(keys: usize) -> DynamicExactMap {
        DynamicExactMap {
            map: FxHashMap::with_capacity_and_hasher(keys, Default::default()),
            pool: ReaderPool::new(),
            oldest: 0,
            stats: MapStats::default(),
        }
    }
}

impl TensorMap for DynamicExactMap {
    #[inline]
    fn access<F: FnMut(TaskId, EdgeKind)>(
        &mut self,
        task: TaskId,
        region: &Region,
        access: Access,
        pred: &mut F,
    ) {
        let len = self.map.len();
        let entry = self.map.entry(*region).or_default();
        if entry.is_empty() {
            self.stats.misses += 1;
        } else {
            self.stats.hits += 1;
        }
        entry.apply(task, access, &mut self.pool, self.oldest, pred);
        if self.map.len() != len {
            self.stats.live += 1;
            self.stats.high_water = self.stats.high_water.max(self.stats.live);
        }
    }

    fn retire_before(&mut self, oldest_live: TaskId) {
        // Entries stay (tombstones); reader lists are pruned as they grow.
        self.oldest = self.oldest.max(oldest_live.0);
    }

    fn clear(&mut self) {
        self.map.clear();
        self.pool.clear();
        self.oldest = 0;
        self.stats = MapStats::default();
    }

    fn stats(&self) -> MapStats {
        self.stats
    }
}
