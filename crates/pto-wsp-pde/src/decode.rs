//! The flagship: variable-length GQA decode attention as Plan-Descriptor-Execute (the PDE
//! specification's complete decode-attention example). The plan ([`crate::plan_kv_chunk`], or a
//! fixed chunk for comparison) fixes the `kv_chunk` axis's `auto` tile; a first launch emits one
//! descriptor per (request, chunk, KV head), each tiered by the request's length, and its kernel
//! writes a single-chunk request's output directly and a split request's partial output with its
//! log-sum-exp into the planned workspace; a second launch (FlashInfer's second kernel) merges each
//! split request's partials. The chunk kernel runs on the vectorised loops of `pto-wsp-kernels`
//! (`fast::qk`, `fast::pv`, `fast::max`, `fast::exp_sum`), the same ones the `attn_decode_chunk`
//! built-in uses.
//!
//! The plan and the chunk launch by hand (what [`decode_attention`] does, with a kernel that only
//! counts the keys it is given):
//!
//! ```
//! use pto_wsp_pde::decode::{decode_space, decode_tiers, emit_chunks, planned_workspace};
//! use pto_wsp_pde::*;
//! use std::sync::atomic::{AtomicU64, Ordering};
//!
//! let mut kv_lens = vec![512u32; 31];
//! kv_lens.insert(15, 32768);
//! // 1. Plan from host metadata: 8 KV heads on 24 executors.
//! let plan = plan_kv_chunk(&kv_lens, 8, 24, PlanOptions::default())?;
//! assert!(plan.split);
//! // 2. Bind the space: the dynamic end of `kv_chunk` and its `auto` tile.
//! let space = decode_space(32, 8).bind(&[("kv_chunk", 32768)], &[("kv_chunk", plan.chunk)])?;
//! let tiers = decode_tiers(4, 128)?;
//! // 3. Launch: kernels bound to tiers by name, the generator on this thread.
//! let keys = AtomicU64::new(0);
//! let kernel = |d: &Descriptor| {
//!     keys.fetch_add(u64::from(d.end - d.start), Ordering::Relaxed);
//!     Ok(())
//! };
//! let mut launch = Launch::new(&space, &tiers)
//!     .workspace(planned_workspace(&kv_lens, plan.chunk, 8, 4, 128))
//!     .dispatch_threads(2);
//! for t in tiers.tiers() {
//!     launch = launch.kernel(&t.name, &kernel);
//! }
//! let mut bases = vec![NO_WORKSPACE; kv_lens.len()];
//! let stats = launch.run(|e| emit_chunks(e, &kv_lens, &mut bases))?;
//! assert_eq!(stats.descriptors, plan.blocks);
//! // Every key of every request, once per KV head.
//! assert_eq!(keys.load(Ordering::Relaxed), (32768 + 31 * 512) * 8);
//! # Ok::<(), PdeError>(())
//! ```

use crate::buffer::Buffer;
use crate::descriptor::{Descriptor, Field, Layout, NO_WORKSPACE};
use crate::dispatch::{Launch, LaunchStats};
use crate::error::{PdeError, Result};
use crate::generate::{Emitter, Sink};
use crate::space::{End, Space, Tile};
use crate::tier::{Tier, Tiers, select_tier};
use pto_wsp_kernels::fast;

/// One decode step's inputs. Layouts (row-major, `f32`): `q` is `[batch][kv_heads × group][dim]`;
/// `k[b]` and `v[b]` are `[kv_heads][kv_lens[b]][dim]`.
#[derive(Clone, Debug, PartialEq)]
pub struct DecodeBatch {
    /// KV length of each request.
    pub kv_lens: Vec<u32>,
    /// Number of KV heads.
    pub kv_heads: u32,
    /// Query heads per KV head (GQA group).
    pub group: u32,
    /// Head dimension.
    pub dim: u32,
    /// Queries.
    pub q: Vec<f32>,
    /// Keys per request.
    pub k: Vec<Vec<f32>>,
    /// Values per request.
    pub v: Vec<Vec<f32>>,
}

impl DecodeBatch {
    /// A batch with deterministic pseudo-random contents from `seed` (values in about ±1).
    pub fn synthetic(kv_lens: &[u32], kv_heads: u32, group: u32, dim: u32, seed: u64) -> Self {
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        };
        let hq = kv_heads as usize * group as usize;
        let q = (0..kv_lens.len() * hq * dim as usize)
            .map(|_| next())
            .collect();
        let mut fill = |len: u32| -> Vec<f32> {
            (0..kv_heads as usize * len as usize * dim as usize)
                .map(|_| next())
                .collect()
        };
        let k = kv_lens.iter().map(|&l| fill(l)).collect();
        let v = kv_lens.iter().map(|&l| fill(l)).collect();
        DecodeBatch {
            kv_lens: kv_lens.to_vec(),
            kv_heads,
            group,
            dim,
            q,
            k,
            v,
        }
    }

    fn check(&self) -> Result<()> {
        let bad = |problem: String| {
            Err(PdeError::Space {
                space: SPACE.into(),
                problem,
            })
        };
        if self.kv_lens.is_empty() || self.kv_heads == 0 || self.group == 0 || self.dim == 0 {
            return bad("batch, kv_heads, group and dim must each be at least 1".into());
        }
        let (hq, d) = (
            self.kv_heads as usize * self.group as usize,
            self.dim as usize,
        );
        if self.q.len() != self.kv_lens.len() * hq * d {
            return bad(format!(
                "q has {} elements, expected {}",
                self.q.len(),
                self.kv_lens.len() * hq * d
            ));
        }
        for (b, &len) in self.kv_lens.iter().enumerate() {
            let want = self.kv_heads as usize * len as usize * d;
            for (name, t) in [("k", &self.k), ("v", &self.v)] {
                match t.get(b) {
                    Some(x) if x.len() == want => {}
                    _ => return bad(format!("{name}[{b}] must hold {want} elements")),
                }
            }
        }
        Ok(())
    }
}

/// The name of the decode space.
pub const SPACE: &str = "decode_attention";

/// The decode space: `batch` (constant end), `kv_chunk` (dynamic end, `auto` tile), `head`.
pub fn decode_space(batch: u32, kv_heads: u32) -> Space {
    Space::new(SPACE)
        .axis("batch", 0, End::Const(batch))
        .axis("kv_chunk", 0, End::Dynamic)
        .axis("head", 0, End::Const(kv_heads))
        .tile("kv_chunk", Tile::Auto)
}

/// The chunk kernel's tiers (the PDE specification's 2K / 8K / 64K tiers and a default), each with
/// a workspace slot of one partial: `group × dim` outputs and `group` log-sum-exps.
pub fn decode_tiers(group: u32, dim: u32) -> Result<Tiers> {
    let slot = dim
        .checked_add(1)
        .and_then(|d| d.checked_mul(group))
        .ok_or_else(|| PdeError::Tiers {
            tiers: "decode_kernel".into(),
            problem: format!("a partial of group {group} x (dim {dim} + 1) exceeds 2^32 elements"),
        })?;
    Tiers::new(
        "decode_kernel",
        vec![
            Tier::upto("decode_2k", 2048, slot),
            Tier::upto("decode_8k", 8192, slot),
            Tier::upto("decode_64k", 65536, slot),
            Tier::default_tier("decode_128k", slot),
        ],
    )
}

/// What a decode run produced.
#[derive(Debug)]
pub struct DecodeRun {
    /// Output `[batch][kv_heads × group][dim]`.
    pub out: Vec<f32>,
    /// The chunk launch.
    pub chunks: LaunchStats,
    /// The merge launch (`None` when no request was split).
    pub merges: Option<LaunchStats>,
}

/// The chunk kernel's fields, resolved by name once.
struct ChunkFields {
    batch: Field,
    head: Field,
    start: Field,
    end: Field,
    workspace: Field,
    num_chunks: Field,
}

/// Runs decode attention over `batch` with KV chunks of `chunk` tokens on `threads` dispatch
/// threads.
pub fn decode_attention(batch: &DecodeBatch, chunk: u32, threads: usize) -> Result<DecodeRun> {
    batch.check()?;
    if chunk == 0 {
        return Err(PdeError::Plan("the chunk size must be at least 1".into()));
    }
    let (b_n, h_n) = (batch.kv_lens.len() as u32, batch.kv_heads);
    let max_len = batch.kv_lens.iter().copied().max().unwrap_or(0);
    let space = decode_space(b_n, h_n).bind(&[("kv_chunk", max_len)], &[("kv_chunk", chunk)])?;
    let tiers = decode_tiers(batch.group, batch.dim)?;
    let layout = Layout::new(SPACE, &["batch", "kv_chunk", "head"], &["num_chunks"])?;
    // The plan reads host metadata only: the workspace is the split requests' partials.
    let workspace = planned_workspace(&batch.kv_lens, chunk, h_n, batch.group, batch.dim);
    if workspace >= u64::from(NO_WORKSPACE) {
        return Err(PdeError::WorkspaceOverflow {
            space: SPACE.into(),
            tier: tiers.tiers()[0].name.clone(),
            indices: Vec::new(),
            needed: workspace,
            used: 0,
            capacity: u64::from(NO_WORKSPACE) - 1,
        });
    }
    let out = Buffer::zeros("out", batch.q.len());
    let ws = Buffer::zeros("workspace", workspace as usize);
    let f = ChunkFields {
        batch: layout.field("batch")?,
        head: layout.field("head")?,
        start: layout.field("start")?,
        end: layout.field("end")?,
        workspace: layout.field("workspace")?,
        num_chunks: layout.field("num_chunks")?,
    };
    let chunk_kernel = |desc: &Descriptor| chunk_kernel(batch, &f, desc, &out, &ws);
    let mut launch = Launch::new(&space, &tiers)
        .workspace(workspace)
        .dispatch_threads(threads);
    for t in tiers.tiers() {
        launch = launch.kernel(&t.name, &chunk_kernel);
    }
    // Workspace base of each split request (first chunk, head 0), for the merge.
    let mut bases = vec![NO_WORKSPACE; b_n as usize];
    let chunks = launch.run(|e| emit_chunks(e, &batch.kv_lens, &mut bases))?;
    let merges = if bases.iter().any(|&b| b != NO_WORKSPACE) {
        Some(merge_launch(batch, chunk, &bases, &ws, &out, threads)?)
    } else {
        None
    };
    Ok(DecodeRun {
        out: out.to_vec(),
        chunks,
        merges,
    })
}

/// The merge kernel's fields, resolved by name once.
struct MergeFields {
    batch: Field,
    head: Field,
    workspace: Field,
    num_chunks: Field,
    stride: Field,
}

/// The merge launch: for every split request and KV head, its chunks' partial outputs in the
/// workspace (at `bases`), weighted by their log-sum-exps, into `out`.
fn merge_launch(
    batch: &DecodeBatch,
    chunk: u32,
    bases: &[u32],
    ws: &Buffer,
    out: &Buffer,
    threads: usize,
) -> Result<LaunchStats> {
    let (b_n, h_n) = (batch.kv_lens.len() as u32, batch.kv_heads);
    let slot = u64::from(batch.group) * (u64::from(batch.dim) + 1);
    let nchunks = |len: u32| len.div_ceil(chunk).max(1);
    let mspace = Space::new("decode_merge")
        .axis("batch", 0, End::Const(b_n))
        .axis("head", 0, End::Const(h_n))
        .bind(&[], &[])?;
    let mtiers = Tiers::new("merge_kernel", vec![Tier::default_tier("merge", 0)])?;
    let mlayout = Layout::new(
        "decode_merge",
        &["batch", "head"],
        &["num_chunks", "stride"],
    )?;
    let f = MergeFields {
        batch: mlayout.field("batch")?,
        head: mlayout.field("head")?,
        workspace: mlayout.field("workspace")?,
        num_chunks: mlayout.field("num_chunks")?,
        stride: mlayout.field("stride")?,
    };
    let merge = |desc: &Descriptor| merge_kernel(batch, &f, desc, ws, out);
    Launch::new(&mspace, &mtiers)
        .kernel("merge", &merge)
        .dispatch_threads(threads)
        .run(|e| {
            for b in 0..b_n {
                let base = bases[b as usize];
                if base == NO_WORKSPACE {
                    continue;
                }
                let n = nchunks(batch.kv_lens[b as usize]);
                for h in 0..h_n {
                    e.emit(Descriptor {
                        tier: 0,
                        indices: [b, h, 0],
                        start: 0,
                        end: n,
                        // Within the allocated workspace, which is below 2^32.
                        workspace: base + h * slot as u32,
                        user: [n, h_n * slot as u32],
                    })?;
                }
            }
            Ok(())
        })
}

/// One merge: the partial outputs of one request and KV head combined by their log-sum-exps.
fn merge_kernel(
    batch: &DecodeBatch,
    f: &MergeFields,
    desc: &Descriptor,
    ws: &Buffer,
    out: &Buffer,
) -> std::result::Result<(), String> {
    let (h_n, g, d) = (batch.kv_heads, batch.group as usize, batch.dim as usize);
    let (b, h) = (f.batch.get(desc) as usize, f.head.get(desc) as usize);
    let (base, n, stride) = (
        f.workspace.get(desc) as usize,
        f.num_chunks.get(desc) as usize,
        f.stride.get(desc) as usize,
    );
    let mut o = vec![0f32; g * d];
    let mut lse = vec![0f32; g];
    let mut acc = vec![0f32; g * d];
    let mut lse_all = vec![0f32; n * g];
    for c in 0..n {
        ws.read(base + c * stride + g * d, &mut lse_all[c * g..(c + 1) * g])
            .map_err(|e| e.to_string())?;
    }
    for (gi, slot) in lse.iter_mut().enumerate() {
        *slot = lse_all
            .iter()
            .skip(gi)
            .step_by(g)
            .fold(f32::NEG_INFINITY, |a, &x| a.max(x));
    }
    let mut wsum = vec![0f32; g];
    for c in 0..n {
        ws.read(base + c * stride, &mut o)
            .map_err(|e| e.to_string())?;
        for gi in 0..g {
            let m = lse[gi];
            let w = if m == f32::NEG_INFINITY {
                0.0
            } else {
                fast::exp(lse_all[c * g + gi] - m)
            };
            wsum[gi] += w;
            for (a, x) in acc[gi * d..(gi + 1) * d]
                .iter_mut()
                .zip(&o[gi * d..(gi + 1) * d])
            {
                *a += w * x;
            }
        }
    }
    for gi in 0..g {
        let inv = if wsum[gi] > 0.0 { 1.0 / wsum[gi] } else { 0.0 };
        acc[gi * d..(gi + 1) * d].iter_mut().for_each(|a| *a *= inv);
    }
    out.write((b * (h_n as usize) + h) * g * d, &acc)
        .map_err(|e| e.to_string())
}

/// The chunk launch's generator (the PDE specification's `PTO_DESCRIPTOR_GEN`): for every request,
/// chunk of the `kv_chunk` axis and KV head, skipping (`continue`) the chunks past the request's
/// length, one descriptor tiered by the request's length, with a workspace slot when the request
/// is split. `bases[b]` receives the workspace offset of request `b`'s first partial (chunk 0,
/// head 0), or stays [`NO_WORKSPACE`]. The space must be [`decode_space`] bound for `kv_lens`.
pub fn emit_chunks<S: Sink>(
    e: &mut Emitter<'_, S>,
    kv_lens: &[u32],
    bases: &mut [u32],
) -> Result<()> {
    let space = e.space();
    let (b_n, chunks_axis, h_n) = (space.count(0), space.count(1), space.count(2));
    let chunk = space.axes().get(1).map_or(1, |a| a.size);
    let tiers = e.tiers();
    if kv_lens.len() != b_n as usize || bases.len() != b_n as usize {
        return Err(PdeError::Space {
            space: space.name().to_string(),
            problem: format!(
                "{} lengths and {} bases given for a batch of {b_n}",
                kv_lens.len(),
                bases.len()
            ),
        });
    }
    for b in 0..b_n {
        let len = kv_lens[b as usize];
        let n = len.div_ceil(chunk).max(1);
        let tier = select_tier(tiers, len);
        for c in 0..chunks_axis.max(1) {
            if c >= n {
                continue;
            }
            let (start, end) = match space.tile_bounds(1, c) {
                Some((s, e)) => (s.min(len), e.min(len)),
                None => (0, 0),
            };
            for h in 0..h_n {
                let workspace = if n > 1 {
                    let at = e.alloc_workspace(tier, &[b, c, h])?;
                    if c == 0 && h == 0 {
                        bases[b as usize] = at;
                    }
                    at
                } else {
                    NO_WORKSPACE
                };
                e.emit(Descriptor {
                    tier,
                    indices: [b, c, h],
                    start,
                    end,
                    workspace,
                    user: [n, 0],
                })?;
            }
        }
    }
    Ok(())
}

/// Workspace elements a decode batch needs with chunks of `chunk` tokens: one partial slot
/// (`group × (dim + 1)` elements) per chunk and KV head of every split request. Host metadata
/// only.
pub fn planned_workspace(kv_lens: &[u32], chunk: u32, kv_heads: u32, group: u32, dim: u32) -> u64 {
    let slot = u64::from(group) * (u64::from(dim) + 1);
    kv_lens
        .iter()
        .map(|&l| l.div_ceil(chunk.max(1)).max(1))
        .filter(|&n| n > 1)
        .map(|n| u64::from(n) * u64::from(kv_heads) * slot)
        .sum()
}

/// One (request, chunk, KV head): softmax attention of the group's queries over the chunk's keys.
fn chunk_kernel(
    batch: &DecodeBatch,
    f: &ChunkFields,
    desc: &Descriptor,
    out: &Buffer,
    ws: &Buffer,
) -> std::result::Result<(), String> {
    let (b, h) = (f.batch.get(desc) as usize, f.head.get(desc) as usize);
    let (start, end) = (f.start.get(desc) as usize, f.end.get(desc) as usize);
    let (g, d, hk) = (
        batch.group as usize,
        batch.dim as usize,
        batch.kv_heads as usize,
    );
    let len = *batch.kv_lens.get(b).ok_or("batch index past the batch")? as usize;
    if end > len || h >= hk {
        return Err(format!(
            "chunk {start}..{end} of head {h} is outside request {b} ({len} keys)"
        ));
    }
    let n = end - start;
    let scale = 1.0 / (d as f32).sqrt();
    let q0 = (b * hk + h) * g * d;
    let q: Vec<f32> = batch.q[q0..q0 + g * d].iter().map(|x| x * scale).collect();
    let kv0 = (h * len + start) * d;
    let krows: Vec<&[f32]> = batch.k[b][kv0..kv0 + n * d].chunks_exact(d).collect();
    let vrows: Vec<&[f32]> = batch.v[b][kv0..kv0 + n * d].chunks_exact(d).collect();
    let mut s = vec![0f32; g * n];
    let mut o = vec![0f32; g * d];
    let mut lse = vec![f32::NEG_INFINITY; g];
    if n > 0 {
        fast::qk(&q, d, &krows, &mut s, n);
        let mut l = vec![0f32; g];
        for gi in 0..g {
            let row = &mut s[gi * n..(gi + 1) * n];
            let m = fast::max(row);
            l[gi] = fast::exp_sum(row, m);
            lse[gi] = m + l[gi].ln();
        }
        fast::pv(&s, n, &vrows, &mut o, d);
        for gi in 0..g {
            let inv = 1.0 / l[gi];
            o[gi * d..(gi + 1) * d].iter_mut().for_each(|x| *x *= inv);
        }
    }
    if f.num_chunks.get(desc) == 1 {
        out.write(q0, &o).map_err(|e| e.to_string())
    } else {
        let at = f.workspace.get(desc) as usize;
        ws.write(at, &o).map_err(|e| e.to_string())?;
        ws.write(at + g * d, &lse).map_err(|e| e.to_string())
    }
}
