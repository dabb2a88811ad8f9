//! The split-KV planner (the PDE specification's decode-attention example): chooses the KV chunk
//! size of a decode batch from host metadata only — the requests' KV lengths, the number of KV
//! heads and the number of blocks the machine runs — by FlashInfer's binary search: the smallest
//! chunk size whose block count (Σ over requests of ⌈len / chunk⌉ × KV heads) fits the budget. No
//! device data is read and nothing waits.
//!
//! # Against FlashInfer
//!
//! FlashInfer plans split-KV decode in `include/flashinfer/attention/scheduler.cuh`
//! (`BatchDecodeWithPagedKVCacheWorkEstimationDispatched` and
//! `PartitionPagedKVCacheBinarySearchMinNumPagePerBatch`; prefill has
//! `PrefillBinarySearchKVChunkSize`). What matches:
//!
//! - the search itself: `low` = a minimum chunk, `high` = the longest request, `mid` halving,
//!   `low = mid + 1` while Σ ⌈len / mid⌉ × (grid y = number of KV heads) exceeds the budget,
//!   else `high = mid`; the answer is `low`;
//! - no split when the search's chunk leaves every request whole (FlashInfer's
//!   `new_batch_size == batch_size` without CUDA graphs);
//! - an empty request still counts as one block (FlashInfer's `max(len, 1)` in the final count).
//!
//! Where we deliberately differ:
//!
//! - **Units.** FlashInfer searches in KV-cache *pages* (its lower bound is 128 tokens' worth of
//!   pages); we have no paged cache and search in *tokens*, with a caller-given lower bound
//!   (the PDE specification uses 256, [`PlanOptions::default`]).
//! - **The budget.** FlashInfer's `max_grid_size` is `num_SMs × blocks per SM` from the CUDA
//!   occupancy calculator: the blocks resident at once, which a GPU time-shares to hide latency,
//!   and it does not split at all when `batch × KV heads` already reaches it. A CPU worker or an
//!   NPU core runs one block at a time, so "resident at once" is the executor count, and that
//!   rule refuses to split whenever the batch has more request-heads than cores — exactly when
//!   one long request among many short ones leaves one core working alone. Measured on the
//!   cycle model (24 executors, 8 KV heads, one 32K request among 31 of 512 tokens), the
//!   FlashInfer rule with a budget of 8 blocks per executor kept the 32K request whole and took
//!   98% longer than the best fixed chunk. Our budget is therefore the blocks the batch makes
//!   unsplit (`batch × KV heads`: every request-head is at least one block whatever the chunk)
//!   **plus** `executors × blocks_per_executor` blocks for splitting
//!   ([`PlanOptions::blocks_per_executor`], stated by the caller); so the no-split-when-full rule
//!   never applies, and the search spends the extra blocks on the long requests.
//! - **No CUDA-graph mode.** FlashInfer always splits under CUDA graphs so the launch shape stays
//!   fixed; we launch descriptors, not grids, so nothing needs a fixed shape.

use crate::error::{PdeError, Result};

/// The planner's knobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlanOptions {
    /// Smallest chunk the search considers, in tokens (at least 1).
    pub min_chunk: u32,
    /// Extra blocks accepted per executor for splitting (the budget is `batch × KV heads +
    /// executors × this`).
    pub blocks_per_executor: u32,
}

impl Default for PlanOptions {
    /// `min_chunk` 256 (the PDE specification's figure), 8 blocks per executor.
    fn default() -> PlanOptions {
        PlanOptions {
            min_chunk: 256,
            blocks_per_executor: 8,
        }
    }
}

/// The plan of one decode batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvPlan {
    /// KV chunk size in tokens (the `kv_chunk` axis's `auto` tile).
    pub chunk: u32,
    /// Whether any request is split (a merge is needed).
    pub split: bool,
    /// Blocks (chunk × KV head work items) the plan makes.
    pub blocks: u64,
    /// The block budget searched against.
    pub budget: u64,
}

/// Blocks a chunk size makes: Σ ⌈max(len, 1) / chunk⌉ × heads.
pub fn blocks_for(kv_lens: &[u32], num_kv_heads: u32, chunk: u32) -> u64 {
    kv_lens
        .iter()
        .map(|&l| u64::from(l.max(1).div_ceil(chunk.max(1))))
        .sum::<u64>()
        * u64::from(num_kv_heads)
}

/// Plans the KV chunk size for requests of `kv_lens` tokens with `num_kv_heads` KV heads on
/// `executors` executors (see the module docs). Refuses an empty batch, zero heads, executors,
/// blocks per executor or minimum chunk.
pub fn plan_kv_chunk(
    kv_lens: &[u32],
    num_kv_heads: u32,
    executors: u32,
    opts: PlanOptions,
) -> Result<KvPlan> {
    let refuse = |what: &str| Err(PdeError::Plan(format!("{what} must be at least 1")));
    if kv_lens.is_empty() {
        return refuse("the batch size");
    }
    if num_kv_heads == 0 {
        return refuse("the number of KV heads");
    }
    if executors == 0 {
        return refuse("the number of executors");
    }
    if opts.blocks_per_executor == 0 {
        return refuse("blocks_per_executor");
    }
    if opts.min_chunk == 0 {
        return refuse("min_chunk");
    }
    let unsplit = kv_lens.len() as u64 * u64::from(num_kv_heads);
    let budget = unsplit + u64::from(executors) * u64::from(opts.blocks_per_executor);
    let max_len = kv_lens.iter().copied().max().unwrap_or(0).max(1);
    let whole = |chunk: u32| KvPlan {
        chunk,
        split: false,
        blocks: blocks_for(kv_lens, num_kv_heads, chunk),
        budget,
    };
    let (mut low, mut high) = (opts.min_chunk, max_len.max(opts.min_chunk));
    while low < high {
        let mid = low + (high - low) / 2;
        if blocks_for(kv_lens, num_kv_heads, mid) > budget {
            low = mid + 1;
        } else {
            high = mid;
        }
    }
    let blocks = blocks_for(kv_lens, num_kv_heads, low);
    if blocks == unsplit {
        return Ok(whole(max_len));
    }
    Ok(KvPlan {
        chunk: low,
        split: true,
        blocks,
        budget,
    })
}
