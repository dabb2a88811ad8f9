//! The main job: one decode step of a LLaMA-style model (`examples/llm_decode.wsp`), its inputs
//! and its reference.
//!
//! Why: `pto-wsp run` with no file should show, on a fresh machine, that the framework runs a
//! meaningful LLM workload — variable sequence lengths, split-KV decode attention with its
//! merge, the MLP — on every core and gets the right numbers. The numbers are checked here
//! against a reference written plainly in `f64` from the tensors' inputs, sharing nothing with
//! the kernels or the runtime.
//!
//! Promises:
//! - The inputs are the file's: every tensor from the seed, shaped by its `//@ fill` lines into
//!   a model of realistic scale (weights near `1/√fan_in` at the default sizes, exact in `f16`;
//!   norm weights in `[0.5, 1)`; the RoPE tables `RopeCos` / `RopeSin` of real angles), as every
//!   run of `examples/llm_decode.wsp` does; `--input` replaces any of them.
//! - [`reference`] computes the output residual stream `X[layers]` of every request in `f64`:
//!   RMSNorm (eps 1e-6), projections, RoPE (rotate-half, by the rows of the cos / sin tables at
//!   position `len`, as the model's kernels; the tables' angles `p·10000^(−2i/128)` are checked
//!   against the file in the tests), the new key and value rounded to `f16` as the cache stores
//!   them, softmax attention over the request's `len + 1` keys with scale `1/√128`, output
//!   projection, residual, RMSNorm, SwiGLU MLP, residual — layer after layer from its own
//!   results, never from the run's.
//! - [`compare`] states the check: the largest error over every output element, relative to
//!   the root mean square of the reference output, must be at most [`TOLERANCE`].

use crate::CliError;
use crate::dense::{Strided, product, widen};
use half::f16;
use pto_wsp::ir::{Bindings, DType, Value};
use pto_wsp::kernels::TensorStore;
use rayon::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};

/// The main job's source text.
pub const SOURCE: &str = include_str!("../../../examples/llm_decode.wsp");
/// The name it is shown under.
pub const NAME: &str = "examples/llm_decode.wsp";

/// Head dimension.
const D: usize = 128;
/// Query heads per KV head.
const GROUP: usize = 4;
/// RMSNorm epsilon (the built-in's default).
const EPS: f64 = 1e-6;

/// The check's bound on `max |got − want| / rms(want)` over the output. The run accumulates in
/// `f32` (dot products of up to `ffn` terms, rounding error at most `n·2⁻²⁴` of the sum of
/// magnitudes, far less in practice) and uses the kernels' fast `exp`; measured errors are
/// around 1e-6 of the output's scale. Any real mistake — a missing dependency, a wrong chunk,
/// a stale cache row — moves outputs by a good fraction of their scale.
pub const TOLERANCE: f64 = 1e-4;

/// Shapes of the job under its bindings.
#[derive(Clone, Debug)]
pub struct Dims {
    /// Requests.
    pub nreq: usize,
    /// KV heads (query heads are 4 per KV head).
    pub kv_heads: usize,
    /// Hidden width (512 per KV head).
    pub hidden: usize,
    /// FFN width.
    pub ffn: usize,
    /// Layers.
    pub layers: usize,
    /// KV cache capacity per request and KV head, in tokens.
    pub cap: usize,
    /// Cached tokens of each request.
    pub lens: Vec<usize>,
}

fn symbol(b: &Bindings, name: &str) -> Result<usize, CliError> {
    match b.symbols.get(name) {
        Some(Value::I64(v)) if *v >= 0 => Ok(*v as usize),
        Some(Value::U64(v)) => Ok(*v as usize),
        _ => Err(CliError::plain(format!(
            "the main job needs symbol `{name}` bound to a non-negative integer"
        ))),
    }
}

impl Dims {
    /// The shapes from the bindings (and the lengths in `kv_lens`), checked before anything
    /// runs: every count at least 1, `ffn` a multiple of 128 (the MLP's column tiles), and no
    /// derived size (`kv_heads * 512`, `max_chunks * 256`) past `usize`.
    pub fn from_bindings(b: &Bindings) -> Result<Dims, CliError> {
        let positive = |name: &str| -> Result<usize, CliError> {
            let v = symbol(b, name)?;
            if v == 0 {
                return Err(CliError::plain(format!(
                    "the main job needs `{name}` of at least 1"
                )));
            }
            Ok(v)
        };
        let product = |name: &str, v: usize, by: usize| {
            v.checked_mul(by).ok_or_else(|| {
                CliError::plain(format!(
                    "the main job's `{name}` = {v} is too large: {name} * {by} overflows"
                ))
            })
        };
        let kv_heads = positive("kv_heads")?;
        let hidden = product("kv_heads", kv_heads, GROUP * D)?;
        let max_chunks = positive("max_chunks")?;
        let cap = product("max_chunks", max_chunks, 256)?;
        let nreq = positive("nreq")?;
        let layers = positive("layers")?;
        let ffn = positive("ffn")?;
        if ffn % D != 0 {
            return Err(CliError::plain(format!(
                "the main job needs `ffn` to be a multiple of {D} (the MLP's column tiles), not {ffn}"
            )));
        }
        let lens = b
            .arrays
            .get("kv_lens")
            .ok_or_else(|| CliError::plain("the main job needs `kv_lens` bound"))?;
        if lens.len() < nreq {
            return Err(CliError::plain(format!(
                "`kv_lens` has {} entries for {nreq} requests",
                lens.len()
            )));
        }
        let lens = lens[..nreq]
            .iter()
            .map(|&l| {
                usize::try_from(l)
                    .ok()
                    .filter(|&l| l < cap)
                    .ok_or_else(|| {
                        CliError::plain(format!(
                            "a request length of {l} does not leave room for the new token in a cache of {cap}"
                        ))
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Dims {
            nreq,
            kv_heads,
            hidden,
            ffn,
            layers,
            cap,
            lens,
        })
    }

    /// Multiply-adds of the reference (for its progress bar): the matrix products dominate.
    pub fn reference_work(&self) -> u64 {
        let (h, f) = (self.hidden as u64, self.ffn as u64);
        let kv = (self.kv_heads * D) as u64;
        (self.layers as u64) * (2 * h * h + 2 * h * kv + 3 * h * f)
    }
}

/// An f16 tensor's elements, borrowed.
fn f16s<'s>(store: &'s TensorStore, name: &str) -> Result<&'s [f16], CliError> {
    let t = store
        .index_of(name)
        .ok_or_else(|| CliError::plain(format!("the main job has no tensor `{name}`")))?;
    if store.info(t).dtype != DType::F16 {
        return Err(CliError::plain(format!("tensor `{name}` is not f16")));
    }
    Ok(bytemuck::cast_slice(store.bytes(t)))
}

/// Elements `range` of an f16 tensor, borrowed (only what is read: the KV cache's rows of each
/// request's length, not its whole capacity).
fn f16s_in<'s>(
    store: &'s TensorStore,
    name: &str,
    range: std::ops::Range<usize>,
) -> Result<&'s [f16], CliError> {
    let t = store
        .index_of(name)
        .ok_or_else(|| CliError::plain(format!("the main job has no tensor `{name}`")))?;
    let info = store.info(t);
    if info.dtype != DType::F16 {
        return Err(CliError::plain(format!("tensor `{name}` is not f16")));
    }
    if range.end as u64 > info.elements() {
        return Err(CliError::plain(format!(
            "tensor `{name}` has no elements {}..{}",
            range.start, range.end
        )));
    }
    Ok(bytemuck::cast_slice(
        store.bytes_in(t, range.start * 2..range.end * 2),
    ))
}

/// An f32 tensor's elements, borrowed.
fn f32s<'s>(store: &'s TensorStore, name: &str) -> Result<&'s [f32], CliError> {
    let t = store
        .index_of(name)
        .ok_or_else(|| CliError::plain(format!("the main job has no tensor `{name}`")))?;
    if store.info(t).dtype != DType::F32 {
        return Err(CliError::plain(format!("tensor `{name}` is not f32")));
    }
    Ok(bytemuck::cast_slice(store.bytes(t)))
}

/// Columns of `W` one parallel work item covers.
const COLS: usize = 512;
/// Rows of `W` converted to `f64` at a time (a `KROWS × COLS` panel, 256 KiB: it stays in the
/// core's cache while the product reads it).
const KROWS: usize = 64;

/// `y[r] = x[r] · W` for every request row `r`, `W` an `f16` matrix `k × n` (row-major), in
/// `f64`; adds `k · n` to `done`.
///
/// Panels of `W` are widened to `f64` (exactly) and multiplied by `gemm`'s `f64` kernel, column
/// blocks in parallel: the same sums as the plain triple loop, in `f64`, at the speed of the
/// machine's vector units (the run's own products are `f32` code of the kernels crate).
fn matmul(x: &[Vec<f64>], w: &[f16], k: usize, n: usize, done: &AtomicU64) -> Vec<Vec<f64>> {
    let m = x.len();
    let lhs: Vec<f64> = x.iter().flat_map(|r| r[..k].iter().copied()).collect();
    let blocks: Vec<Vec<f64>> = (0..n.div_ceil(COLS))
        .into_par_iter()
        .map(|b| {
            let (c0, c1) = (b * COLS, ((b + 1) * COLS).min(n));
            let nb = c1 - c0;
            let mut acc = vec![0.0f64; m * nb];
            let mut panel = vec![0.0f64; KROWS * nb];
            for k0 in (0..k).step_by(KROWS) {
                let kb = KROWS.min(k - k0);
                for (i, dst) in panel.chunks_exact_mut(nb).take(kb).enumerate() {
                    let at = (k0 + i) * n;
                    widen(&w[at + c0..at + c1], dst);
                }
                let lhs = Strided {
                    data: &lhs[k0..],
                    row_stride: k,
                    col_stride: 1,
                };
                let rhs = Strided {
                    data: &panel,
                    row_stride: nb,
                    col_stride: 1,
                };
                product((m, nb, kb), &mut acc, nb, k0 > 0, lhs, rhs, 1.0);
            }
            done.fetch_add((k * nb) as u64, Ordering::Relaxed);
            acc
        })
        .collect();
    (0..m)
        .map(|r| {
            blocks
                .iter()
                .flat_map(|b| {
                    let nb = b.len() / m;
                    b[r * nb..(r + 1) * nb].iter().copied()
                })
                .collect()
        })
        .collect()
}

fn rmsnorm(x: &[f64], w: &[f32]) -> Vec<f64> {
    let ms = x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64;
    let inv = 1.0 / (ms + EPS).sqrt();
    x.iter().zip(w).map(|(v, &g)| v * inv * g as f64).collect()
}

/// Rotate-half RoPE of every 128-wide head of `x` by the table rows `cos`, `sin` (`D/2` each).
fn rope(x: &mut [f64], cos: &[f32], sin: &[f32]) {
    for head in x.chunks_exact_mut(D) {
        for i in 0..D / 2 {
            let (c, s) = (cos[i] as f64, sin[i] as f64);
            let (a, b) = (head[i], head[i + D / 2]);
            head[i] = a * c - b * s;
            head[i + D / 2] = b * c + a * s;
        }
    }
}

/// Attention of the `GROUP` query heads `q` (`GROUP × D`, after RoPE) of one KV head over its
/// `len` cached positions (`keys`, `vals`: `len × D` in `f16`) and the new one (`knew`, `vnew`),
/// softmax in `f64`, into `out` (`GROUP × D`).
///
/// The cache rows are widened to `f64` once for the group; scores and weighted sums are `f64`
/// products of `gemm` (the run's attention is the kernels crate's `f32` code).
fn group_attention(
    q: &[f64],
    (keys, vals): (&[f16], &[f16]),
    (knew, vnew): (&[f64], &[f64]),
    out: &mut [f64],
) {
    let len = keys.len() / D;
    let rows = len + 1;
    let widen = |cached: &[f16], new: &[f64]| {
        let mut m = vec![0.0f64; rows * D];
        widen(cached, &mut m[..len * D]);
        m[len * D..].copy_from_slice(new);
        m
    };
    let (k, v) = (widen(keys, knew), widen(vals, vnew));
    // s[j][h] = scale · k[j] · q[h]
    let mut s = vec![0.0f64; rows * GROUP];
    let scale = 1.0 / (D as f64).sqrt();
    let keys = Strided {
        data: &k,
        row_stride: D,
        col_stride: 1,
    };
    // q read as its transpose: element (c, h) at h·D + c.
    let qt = Strided {
        data: q,
        row_stride: 1,
        col_stride: D,
    };
    product((rows, GROUP, D), &mut s, GROUP, false, keys, qt, scale);
    let mut z = [0.0f64; GROUP];
    for (h, zh) in z.iter_mut().enumerate() {
        let m = (0..rows)
            .map(|j| s[j * GROUP + h])
            .fold(f64::NEG_INFINITY, f64::max);
        for j in 0..rows {
            let e = (s[j * GROUP + h] - m).exp();
            s[j * GROUP + h] = e;
            *zh += e;
        }
    }
    // out[h] = Σ_j e[j][h] · v[j]
    // s read as its transpose: element (h, j) at j·GROUP + h.
    let weights = Strided {
        data: &s,
        row_stride: 1,
        col_stride: GROUP,
    };
    let values = Strided {
        data: &v,
        row_stride: D,
        col_stride: 1,
    };
    product((GROUP, D, rows), out, D, false, weights, values, 1.0);
    for (o, zh) in out.chunks_exact_mut(D).zip(z) {
        o.iter_mut().for_each(|v| *v /= zh);
    }
}

/// The reference output `X[layers]`, request after request (`nreq × hidden`), computed from
/// the store's inputs (see the module docs); `x0` is the input residual stream `X[0]`. Adds the
/// multiply-adds done to `done` as it goes.
pub fn reference(
    store: &TensorStore,
    dims: &Dims,
    x0: &[f32],
    done: &AtomicU64,
) -> Result<Vec<f64>, CliError> {
    let h = dims.hidden;
    let w = Weights::read(store)?;
    let row = |t: &'_ [f32], p: usize| -> Result<Vec<f32>, CliError> {
        t.get(p * D / 2..(p + 1) * D / 2)
            .map(<[f32]>::to_vec)
            .ok_or_else(|| CliError::plain(format!("the RoPE tables have no row {p}")))
    };
    let tables: Vec<(Vec<f32>, Vec<f32>)> = dims
        .lens
        .iter()
        .map(|&len| Ok((row(w.rope_cos, len)?, row(w.rope_sin, len)?)))
        .collect::<Result<_, CliError>>()?;
    let mut x: Vec<Vec<f64>> = (0..dims.nreq)
        .map(|r| x0[r * h..(r + 1) * h].iter().map(|&v| v as f64).collect())
        .collect();
    for l in 0..dims.layers {
        let ao = attention(&w, dims, l, &x, &tables, done)?;
        let h1 = add_rows(&x, &ao);
        let down = ffn(&w, dims, l, &h1, done);
        x = add_rows(&h1, &down);
    }
    Ok(x.into_iter().flatten().collect())
}

/// The main job's weights and tables, as the store holds them, and the store itself for the KV
/// caches (read row range by row range: only what each request's length reaches is made).
struct Weights<'s> {
    wq: &'s [f16],
    wk: &'s [f16],
    wv: &'s [f16],
    wo: &'s [f16],
    wgate: &'s [f16],
    wup: &'s [f16],
    wdown: &'s [f16],
    store: &'s TensorStore,
    norm_attn: &'s [f32],
    norm_ffn: &'s [f32],
    rope_cos: &'s [f32],
    rope_sin: &'s [f32],
}

impl<'s> Weights<'s> {
    /// Reads them from `store`; a missing tensor is an error naming it.
    fn read(store: &'s TensorStore) -> Result<Weights<'s>, CliError> {
        Ok(Weights {
            wq: f16s(store, "Wq")?,
            wk: f16s(store, "Wk")?,
            wv: f16s(store, "Wv")?,
            wo: f16s(store, "Wo")?,
            wgate: f16s(store, "Wgate")?,
            wup: f16s(store, "Wup")?,
            wdown: f16s(store, "Wdown")?,
            store,
            norm_attn: f32s(store, "NormAttn")?,
            norm_ffn: f32s(store, "NormFfn")?,
            rope_cos: f32s(store, "RopeCos")?,
            rope_sin: f32s(store, "RopeSin")?,
        })
    }
}

/// `a + b`, row by row.
fn add_rows(a: &[Vec<f64>], b: &[Vec<f64>]) -> Vec<Vec<f64>> {
    a.iter()
        .zip(b)
        .map(|(a, b)| a.iter().zip(b).map(|(p, q)| p + q).collect())
        .collect()
}

/// Layer `l`'s attention block on the residual stream `x` (one row per request): normed, its
/// query and new key rotated by the request's RoPE row (`tables`), attention over the cache
/// and the new key and value, projected by `Wo`.
fn attention(
    w: &Weights<'_>,
    dims: &Dims,
    l: usize,
    x: &[Vec<f64>],
    tables: &[(Vec<f32>, Vec<f32>)],
    done: &AtomicU64,
) -> Result<Vec<Vec<f64>>, CliError> {
    let (h, g, cap) = (dims.hidden, dims.kv_heads, dims.cap);
    let kvw = g * D;
    let xn: Vec<Vec<f64>> = x
        .iter()
        .map(|xr| rmsnorm(xr, &w.norm_attn[l * h..(l + 1) * h]))
        .collect();
    let q = matmul(&xn, &w.wq[l * h * h..(l + 1) * h * h], h, h, done);
    let kn = matmul(&xn, &w.wk[l * h * kvw..(l + 1) * h * kvw], h, kvw, done);
    let vn = matmul(&xn, &w.wv[l * h * kvw..(l + 1) * h * kvw], h, kvw, done);
    // RoPE on the request's query and new key; the new key and value rounded to f16 as
    // the cache stores them.
    let roped: Vec<(Vec<f64>, Vec<f64>, Vec<f64>)> = (0..dims.nreq)
        .map(|r| {
            let (cos, sin) = &tables[r];
            let mut qr = q[r].clone();
            rope(&mut qr, cos, sin);
            let mut kr = kn[r].clone();
            rope(&mut kr, cos, sin);
            let knew = kr.iter().map(|&v| f16::from_f64(v).to_f64()).collect();
            let vnew = vn[r].iter().map(|&v| f16::from_f64(v).to_f64()).collect();
            (qr, knew, vnew)
        })
        .collect();
    // One work item per request and KV head: its GROUP query heads.
    let groups: Vec<Vec<f64>> = (0..dims.nreq * g)
        .into_par_iter()
        .map(|item| {
            let (r, kvh) = (item / g, item % g);
            let len = dims.lens[r];
            let (qr, knew, vnew) = &roped[r];
            let base = ((l * dims.nreq + r) * g + kvh) * cap * D;
            let rows = base..base + len * D;
            let cached = (
                f16s_in(w.store, "Kc", rows.clone())?,
                f16s_in(w.store, "Vc", rows)?,
            );
            let new = (&knew[kvh * D..(kvh + 1) * D], &vnew[kvh * D..(kvh + 1) * D]);
            let heads = kvh * GROUP * D..(kvh + 1) * GROUP * D;
            let mut out = vec![0.0; GROUP * D];
            group_attention(&qr[heads], cached, new, &mut out);
            Ok(out)
        })
        .collect::<Result<_, CliError>>()?;
    let attn: Vec<Vec<f64>> = groups.chunks(g).map(|c| c.concat()).collect();
    Ok(matmul(&attn, &w.wo[l * h * h..(l + 1) * h * h], h, h, done))
}

/// Layer `l`'s feed-forward block on `h1`: normed, SiLU-gated, projected down.
fn ffn(w: &Weights<'_>, dims: &Dims, l: usize, h1: &[Vec<f64>], done: &AtomicU64) -> Vec<Vec<f64>> {
    let (h, f) = (dims.hidden, dims.ffn);
    let xn2: Vec<Vec<f64>> = h1
        .iter()
        .map(|v| rmsnorm(v, &w.norm_ffn[l * h..(l + 1) * h]))
        .collect();
    let gate = matmul(&xn2, &w.wgate[l * h * f..(l + 1) * h * f], h, f, done);
    let up = matmul(&xn2, &w.wup[l * h * f..(l + 1) * h * f], h, f, done);
    let act: Vec<Vec<f64>> = gate
        .iter()
        .zip(&up)
        .map(|(gr, ur)| {
            gr.iter()
                .zip(ur)
                .map(|(&a, &b)| a / (1.0 + (-a).exp()) * b)
                .collect()
        })
        .collect();
    matmul(&act, &w.wdown[l * f * h..(l + 1) * f * h], f, h, done)
}

/// How the run's output compares with the reference.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// Output elements compared.
    pub elements: usize,
    /// Root mean square of the reference output.
    pub rms: f64,
    /// Largest absolute error.
    pub max_abs: f64,
    /// `max_abs / rms`.
    pub max_rel_rms: f64,
    /// Whether `max_rel_rms <= TOLERANCE` (and nothing is NaN).
    pub passed: bool,
}

/// Compares the run's `got` with the reference `want`.
pub fn compare(got: &[f32], want: &[f64]) -> Comparison {
    let n = want.len().min(got.len());
    let rms = (want.iter().map(|v| v * v).sum::<f64>() / n.max(1) as f64).sqrt();
    let mut max_abs = 0.0f64;
    let mut nan = got.len() != want.len();
    for (&g, &w) in got.iter().zip(want) {
        let e = (g as f64 - w).abs();
        if e.is_nan() {
            nan = true;
        }
        max_abs = max_abs.max(e);
    }
    let max_rel_rms = if rms > 0.0 { max_abs / rms } else { max_abs };
    Comparison {
        elements: n,
        rms,
        max_abs,
        max_rel_rms,
        passed: !nan && max_rel_rms <= TOLERANCE,
    }
}

/// The last layer's output rows `X[layers]` of the run (`nreq × hidden`).
pub fn output(store: &TensorStore, dims: &Dims) -> Result<Vec<f32>, CliError> {
    let x = f32s(store, "X")?;
    let n = dims.nreq * dims.hidden;
    Ok(x[dims.layers * n..(dims.layers + 1) * n].to_vec())
}

/// The input rows `X[0]` (`nreq × hidden`).
pub fn input(store: &TensorStore, dims: &Dims) -> Result<Vec<f32>, CliError> {
    let x = f32s(store, "X")?;
    Ok(x[..dims.nreq * dims.hidden].to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// cos / sin of position `pos`'s angles, as the model defines them (θ = 10000, d = 128).
    fn angles(pos: usize) -> (Vec<f32>, Vec<f32>) {
        (0..D / 2)
            .map(|i| {
                let a = pos as f64 * 10_000f64.powf(-2.0 * i as f64 / D as f64);
                (a.cos() as f32, a.sin() as f32)
            })
            .unzip()
    }

    #[test]
    fn rope_at_position_zero_is_identity_and_keeps_norms() {
        let mut x: Vec<f64> = (0..2 * D).map(|i| (i as f64 * 0.37).sin()).collect();
        let orig = x.clone();
        let (c, s) = angles(0);
        rope(&mut x, &c, &s);
        assert_eq!(x, orig);
        let (c, s) = angles(1234);
        rope(&mut x, &c, &s);
        for (a, b) in x.chunks(D).zip(orig.chunks(D)) {
            let na: f64 = a.iter().map(|v| v * v).sum();
            let nb: f64 = b.iter().map(|v| v * v).sum();
            assert!((na - nb).abs() < 1e-6 * nb);
        }
    }

    /// The tables the job's file generates hold the angles `p·10000^(−2i/128)` the model means,
    /// and its weights are at their stated scale: the file and this reference agree.
    #[test]
    fn the_files_inputs_are_the_models() {
        let loaded = crate::load_source(NAME, SOURCE).unwrap();
        let binds = [
            "nreq=2",
            "kv_heads=1",
            "ffn=128",
            "max_chunks=2",
            "kv_lens=[300, 5]",
        ]
        .map(String::from);
        let bindings = crate::bindings_for(&loaded, &binds).unwrap();
        let mut store = TensorStore::new(&loaded.module, &bindings).unwrap();
        store.fill_random(5);
        let wq0: Vec<f16> = store.read("Wq").unwrap();
        let fills = pto_wsp::driver::fills::fill_lines(&loaded).unwrap();
        pto_wsp::driver::fills::apply(&mut store, &fills, &[]).unwrap();
        let (rc, rs) = (
            f32s(&store, "RopeCos").unwrap(),
            f32s(&store, "RopeSin").unwrap(),
        );
        assert_eq!(rc.len(), 512 * D / 2);
        for p in [0, 1, 17, 511] {
            let (c, s) = angles(p);
            for i in 0..D / 2 {
                assert!((rc[p * D / 2 + i] - c[i]).abs() <= 1e-7, "cos p {p} i {i}");
                assert!((rs[p * D / 2 + i] - s[i]).abs() <= 1e-7, "sin p {p} i {i}");
            }
        }
        let wq = f16s(&store, "Wq").unwrap();
        assert!(
            wq.iter()
                .zip(&wq0)
                .all(|(a, b)| a.to_f64() == b.to_f64() / 64.0)
        );
        assert!(
            f32s(&store, "NormAttn")
                .unwrap()
                .iter()
                .all(|v| (0.5..1.0).contains(v))
        );
    }

    /// `n` values exact in `f16`, spread over `[-0.5, 0.5)`, from `salt`.
    fn halves(n: usize, salt: usize) -> Vec<f16> {
        (0..n)
            .map(|i| f16::from_f64(((i * 7919 + salt) % 257) as f64 / 256.0 - 0.5))
            .collect()
    }

    fn close(got: f64, want: f64) -> bool {
        (got - want).abs() <= 1e-12 * (1.0 + want.abs())
    }

    /// The blocked `gemm` products are the plain triple loop's sums (up to summation order),
    /// across the edges of the column and row blocks.
    #[test]
    fn blocked_products_equal_the_plain_triple_loop() {
        let (m, k, n) = (3, 2 * KROWS + 37, COLS + 45);
        let x: Vec<Vec<f64>> = (0..m)
            .map(|r| {
                (0..k)
                    .map(|i| ((r * 31 + i * 17) % 101) as f64 / 50.0 - 1.0)
                    .collect()
            })
            .collect();
        let w = halves(k * n, 3);
        let done = AtomicU64::new(0);
        let y = matmul(&x, &w, k, n, &done);
        assert_eq!(done.load(Ordering::Relaxed), (k * n) as u64);
        for (r, xr) in x.iter().enumerate() {
            for c in 0..n {
                let want: f64 = (0..k).map(|i| xr[i] * w[i * n + c].to_f64()).sum();
                assert!(
                    close(y[r][c], want),
                    "row {r} column {c}: {} against {want}",
                    y[r][c]
                );
            }
        }
    }

    /// A group's attention is each head's softmax attention, written out plainly.
    #[test]
    fn group_attention_is_softmax_attention() {
        let len = 300;
        let q: Vec<f64> = halves(GROUP * D, 1)
            .iter()
            .map(|v| v.to_f64() * 4.0)
            .collect();
        let (keys, vals) = (halves(len * D, 2), halves(len * D, 5));
        let knew: Vec<f64> = halves(D, 7).iter().map(|v| v.to_f64()).collect();
        let vnew: Vec<f64> = halves(D, 11).iter().map(|v| v.to_f64()).collect();
        let mut out = vec![0.0; GROUP * D];
        group_attention(&q, (&keys, &vals), (&knew, &vnew), &mut out);
        let key = |j: usize, c: usize| {
            if j < len {
                keys[j * D + c].to_f64()
            } else {
                knew[c]
            }
        };
        let val = |j: usize, c: usize| {
            if j < len {
                vals[j * D + c].to_f64()
            } else {
                vnew[c]
            }
        };
        for h in 0..GROUP {
            let qh = &q[h * D..(h + 1) * D];
            let s: Vec<f64> = (0..=len)
                .map(|j| (0..D).map(|c| qh[c] * key(j, c)).sum::<f64>() / (D as f64).sqrt())
                .collect();
            let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = s.iter().map(|v| (v - m).exp()).collect();
            let z: f64 = e.iter().sum();
            for c in 0..D {
                let want = (0..=len).map(|j| e[j] * val(j, c)).sum::<f64>() / z;
                let got = out[h * D + c];
                assert!(
                    close(got, want),
                    "head {h} element {c}: {got} against {want}"
                );
            }
        }
    }

    #[test]
    fn comparison_states_pass_and_fail() {
        let want = [1.0, -1.0, 1.0, -1.0];
        assert!(compare(&[1.0, -1.0, 1.0, -1.0], &want).passed);
        let c = compare(&[1.0, -1.0, 1.01, -1.0], &want);
        assert!(!c.passed);
        assert!((c.max_rel_rms - 0.01).abs() < 1e-6);
        assert!(!compare(&[f32::NAN, -1.0, 1.0, -1.0], &want).passed);
        assert!(!compare(&[1.0], &want).passed);
    }
}
