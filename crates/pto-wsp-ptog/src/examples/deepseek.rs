//! The task-graph ISA specification's example, DeepSeek V3.2 indexer attention, and the
//! kernels it runs: one kernel node of each kind.
//!
//! - `mla_prolog`: a whole pto-wsp workload (`examples/ptog/deepseek_mla_prolog.wsp`:
//!   projections, RMSNorm and RoPE of the MLA queries, keys and values) as one kernel node;
//!   RoPE takes cos / sin tables, the node's own tensors, filled here once;
//! - `indexer_prolog`: a kernel in the kernel language
//!   (`examples/ptog/deepseek_indexer_prolog.wsp`), 4 instances of 64 token rows;
//! - `lightning_indexer` and `sparse_fa`: library kernels written here, run as 4 instances
//!   each over their query rows.
//!
//! The program is `examples/ptog/deepseek_indexer_attention.ptoasm` ([`PROGRAM`]); the
//! crate's tests check its numbers against an `f64` reference and that the two prologs run at
//! the same time.
//!
//! Conventions: the lightning indexer scores key `s` for query `t` (for `s <= t`) as
//! `Σ_h w[t,h] · relu(q_h[t] · k[s])` and writes the indices of the top `k` keys, best first,
//! equal scores by smaller index, then `-1` where a query has fewer than `k` earlier keys;
//! sparse attention attends each query over its selected keys (`-1` skipped) with scale
//! `1/√d`, per head.

use crate::exec::{Launch, Library, LibraryError};
use pto_wsp_kernels::builtins::rows::rope_table_entry;
use pto_wsp_kernels::{KernelError, KernelRegistry, TaskContext, TensorStore};

/// The program: `examples/ptog/deepseek_indexer_attention.ptoasm`.
pub const PROGRAM: &str =
    include_str!("../../../../examples/ptog/deepseek_indexer_attention.ptoasm");
/// The MLA prolog workload: `examples/ptog/deepseek_mla_prolog.wsp`.
pub const MLA_PROLOG: &str = include_str!("../../../../examples/ptog/deepseek_mla_prolog.wsp");
/// The indexer prolog kernel: `examples/ptog/deepseek_indexer_prolog.wsp`.
pub const INDEXER_PROLOG: &str =
    include_str!("../../../../examples/ptog/deepseek_indexer_prolog.wsp");

/// Tokens.
pub const TOKENS: usize = 256;
/// Hidden size.
pub const HIDDEN: usize = 256;
/// MLA heads.
pub const HEADS: usize = 4;
/// MLA head size.
pub const HEAD_DIM: usize = 64;
/// MLA latent size.
pub const LATENT: usize = 64;
/// Indexer heads.
pub const INDEX_HEADS: usize = 4;
/// Indexer head size.
pub const INDEX_DIM: usize = 32;
/// Keys selected per query.
pub const TOP_K: usize = 32;

/// Adds the example's four kernels (see the module docs) to `lib`; `make` makes the MLA
/// prolog's workload node.
pub fn add_kernels(lib: &mut Library, make: super::WorkloadMaker<'_>) -> Result<(), LibraryError> {
    let parse = |name: &str, text: &str| {
        pto_wsp_ir::parse(text).map_err(|e| LibraryError::Workload {
            symbol: name.into(),
            message: e.to_string(),
        })
    };
    let mla = parse("mla_prolog", MLA_PROLOG)?;
    let mut kernels = KernelRegistry::with_builtins();
    kernels.alias("proj", "matmul");
    let mut node = make(&mla, kernels).map_err(|message| LibraryError::Workload {
        symbol: "mla_prolog".into(),
        message,
    })?;
    node.tensors(&mut fill_rope_tables)
        .map_err(|e| LibraryError::Workload {
            symbol: "mla_prolog".into(),
            message: e.to_string(),
        })?;
    lib.add_workload("mla_prolog", node);
    lib.add_kernel_language(&parse("indexer_prolog", INDEXER_PROLOG)?);
    lib.add_fn("lightning_indexer", lightning_indexer);
    lib.add_fn("sparse_fa", sparse_fa);
    Ok(())
}

/// RoPE's base in the MLA prolog (its `//@ fill RopeCos=rope_cos(10000)` line).
pub const ROPE_THETA: f64 = 10_000.0;

/// Fills the MLA prolog's own cos / sin tables (`RopeCos`, `RopeSin`: position × pair), as
/// its `//@ fill` lines do for `pto-wsp run`; the node's arguments never cover them.
fn fill_rope_tables(store: &mut TensorStore) -> Result<(), KernelError> {
    for (name, sin) in [("RopeCos", false), ("RopeSin", true)] {
        let t = store.index_of(name).ok_or_else(|| {
            KernelError::Message(format!("the MLA prolog has no tensor `{name}`"))
        })?;
        let half = store.info(t).shape.last().copied().unwrap_or(1).max(1) as usize;
        let n = store.info(t).elements() as usize;
        let data: Vec<f32> = (0..n)
            .map(|k| {
                let (c, s) = rope_table_entry(ROPE_THETA, k / half, k % half, half);
                (if sin { s } else { c }) as f32
            })
            .collect();
        store
            .write(name, &data)
            .map_err(|e| KernelError::Message(e.to_string()))?;
    }
    Ok(())
}

fn shape_err(kernel: &str, m: String) -> KernelError {
    KernelError::shape(kernel, m)
}

/// Regions: 0 the indexer's queries (this instance's rows, `heads · d` columns), 1 its keys
/// (every token, `d` columns), 2 its per-head weights (this instance's rows), 3 the selected
/// indices (`i32`, this instance's rows, `k` columns). Queries are the keys' tokens: instance
/// `b` of `n` holds queries `⌊b·T/n⌋ ..`.
pub fn lightning_indexer(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    const NAME: &str = "lightning_indexer";
    let l = Launch::of(ctx)?;
    let q = ctx.read::<f32>(0)?;
    let k = ctx.read::<f32>(1)?;
    let w = ctx.read::<f32>(2)?;
    let mut out = ctx.write::<i32>(3)?;
    let (rows, d, heads, top) = (q.rows(), k.cols(), w.cols(), out.cols());
    if q.cols() != heads * d || w.rows() != rows || out.rows() != rows {
        return Err(shape_err(
            NAME,
            format!(
                "queries {}x{}, keys {}x{d}, weights {}x{heads}, indices {}x{top} do not fit",
                rows,
                q.cols(),
                k.rows(),
                w.rows(),
                out.rows()
            ),
        ));
    }
    let t0 = l.block as usize * k.rows() / l.block_dim.max(1) as usize;
    let mut scores: Vec<(f32, i32)> = Vec::with_capacity(k.rows());
    for r in 0..rows {
        let t = t0 + r;
        let (qr, wr) = (q.row(r), w.row(r));
        scores.clear();
        for s in 0..=t.min(k.rows() - 1) {
            let kr = k.row(s);
            let mut sc = 0.0f32;
            for h in 0..heads {
                let dot: f32 = qr[h * d..(h + 1) * d]
                    .iter()
                    .zip(kr)
                    .map(|(a, b)| a * b)
                    .sum();
                sc += wr[h] * dot.max(0.0);
            }
            scores.push((sc, s as i32));
        }
        scores.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let row = out.row_mut(r);
        for (j, slot) in row.iter_mut().enumerate() {
            *slot = scores.get(j).map_or(-1, |x| x.1);
        }
    }
    Ok(())
}

/// Regions: 0 queries (this instance's rows, `heads · d` columns), 1 keys and 2 values (every
/// token), 3 selected indices (`i32`, this instance's rows), 4 output (this instance's rows).
/// Scalar argument: the number of heads.
pub fn sparse_fa(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    const NAME: &str = "sparse_fa";
    let l = Launch::of(ctx)?;
    let heads = ctx.param_u64(l.first_scalar)? as usize;
    let q = ctx.read::<f32>(0)?;
    let k = ctx.read::<f32>(1)?;
    let v = ctx.read::<f32>(2)?;
    let idx = ctx.read::<i32>(3)?;
    let mut out = ctx.write::<f32>(4)?;
    let (rows, width) = (q.rows(), q.cols());
    if heads == 0 || width % heads != 0 || k.cols() != width || v.cols() != width {
        return Err(shape_err(
            NAME,
            format!("{heads} heads do not divide queries of {width} columns into keys of the same"),
        ));
    }
    if idx.rows() != rows || out.rows() != rows || out.cols() != width {
        return Err(shape_err(
            NAME,
            "indices or output rows do not match the queries".into(),
        ));
    }
    let d = width / heads;
    let scale = 1.0 / (d as f32).sqrt();
    let mut p = Vec::new();
    for r in 0..rows {
        let sel: Vec<usize> = idx
            .row(r)
            .iter()
            .filter(|&&s| s >= 0)
            .map(|&s| s as usize)
            .collect();
        if let Some(&bad) = sel.iter().find(|&&s| s >= k.rows()) {
            return Err(KernelError::param_value(
                NAME,
                0,
                format!("row {r} selects key {bad}, but there are {}", k.rows()),
            ));
        }
        let o = out.row_mut(r);
        o.fill(0.0);
        for h in 0..heads {
            let qh = &q.row(r)[h * d..(h + 1) * d];
            p.clear();
            for &s in &sel {
                let kh = &k.row(s)[h * d..(h + 1) * d];
                p.push(scale * qh.iter().zip(kh).map(|(a, b)| a * b).sum::<f32>());
            }
            let m = p.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0.0f32;
            for x in p.iter_mut() {
                *x = (*x - m).exp();
                sum += *x;
            }
            for (&s, &pw) in sel.iter().zip(&p) {
                let vh = &v.row(s)[h * d..(h + 1) * d];
                for (acc, &x) in o[h * d..(h + 1) * d].iter_mut().zip(vh) {
                    *acc += pw / sum * x;
                }
            }
        }
    }
    Ok(())
}
