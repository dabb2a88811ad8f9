//! The unbounded exact-key map (seed 004 §6.2.3 `DynamicTensorMap`): a hash map from region key
//! to last writer and readers, with the FxHash-style [`super::FxHasher`]. Never full; memory grows
//! with the number of distinct live keys.

use super::readers::{ExactEntry, ReaderPool};
use super::{FxHashMap, MapStats, TensorMap};
use crate::types::{Access, EdgeKind, Region, TaskId};

/// Exact-key TensorMap without a bound.
#[derive(Debug)]
pub struct DynamicExactMap {
    map: FxHashMap<Region, ExactEntry>,
    pool: ReaderPool,
    buf: Vec<u32>,
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
            buf: Vec::new(),
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
        entry.apply(task, access, &mut self.pool, pred);
        if self.map.len() != len {
            self.stats.live += 1;
            self.stats.high_water = self.stats.high_water.max(self.stats.live);
        }
    }

    fn retire_before(&mut self, oldest_live: TaskId) {
        let (pool, buf) = (&mut self.pool, &mut self.buf);
        self.map.retain(|_, e| {
            e.retire_before(oldest_live, pool, buf);
            if e.is_empty() {
                e.release(pool);
                false
            } else {
                true
            }
        });
        self.stats.live = self.map.len() as u64;
    }

    fn stats(&self) -> MapStats {
        self.stats
    }
}
