//! Row kernels: reductions (sum, max, mean), softmax, RMSNorm and rotary position embedding.
//!
//! Why: each works on one row at a time (a token's hidden vector, a query's scores), the shape
//! of the normalisation and position steps of a transformer layer.
//!
//! Promises: sums are taken in `f32` in eight interleaved partial sums (error at most about
//! `n/8 · 2^-24` of the sum of magnitudes); `exp` is [`crate::fast::exp_sum`]'s; RoPE's angles
//! are computed in `f64`. Parameters and shapes are checked before anything is written.

use super::{Dims, need_inout, opt_f64, opt_i64, same_shape, vector_len};
use crate::context::TaskContext;
use crate::fast;
use crate::registry::KernelError;
use crate::tile::{FloatRead, FloatWrite, Scratch};

fn dims_r(i: usize, v: &FloatRead<'_>) -> Dims {
    Dims::new(i, v.rows(), v.cols())
}

fn dims_w(i: usize, v: &FloatWrite<'_>) -> Dims {
    Dims::new(i, v.rows(), v.cols())
}

/// Sum of `x` in eight interleaved partial sums.
pub(crate) fn sum(x: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let mut chunks = x.chunks_exact(8);
    for c in &mut chunks {
        for l in 0..8 {
            acc[l] += c[l];
        }
    }
    let tail: f32 = chunks.remainder().iter().sum();
    acc.iter().sum::<f32>() + tail
}

/// Region 1 (written, `rows` elements) = `f(row)` of each row of region 0 (read).
fn reduce(
    ctx: &TaskContext<'_>,
    kernel: &str,
    f: impl Fn(&[f32]) -> f32,
) -> Result<(), KernelError> {
    let x = ctx.read_float(0)?;
    let mut out = ctx.write_float(1)?;
    vector_len(kernel, dims_w(1, &out), x.rows(), "one per row of region 0")?;
    let (mut bx, mut bo) = (Scratch::take(), Scratch::take());
    let vals = bo.slice(x.rows());
    for (r, v) in vals.iter_mut().enumerate() {
        *v = f(x.row(r, &mut bx));
    }
    out.store_all(vals);
    Ok(())
}

/// `row_sum`: region 1 (written, one element per row of region 0) = the sum of each row of
/// region 0 (read).
pub fn row_sum(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    reduce(ctx, "row_sum", sum)
}

/// `row_max`: region 1 (written, one element per row of region 0) = the largest element of each
/// row of region 0 (read), NaNs ignored.
pub fn row_max(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    reduce(ctx, "row_max", fast::max)
}

/// `row_mean`: region 1 (written, one element per row of region 0) = the mean of each row of
/// region 0 (read).
pub fn row_mean(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    reduce(ctx, "row_mean", |x| sum(x) / x.len() as f32)
}

/// `softmax`: region 1 (written) = the softmax of each row of region 0 (read), same rows ×
/// cols; optional param 0 scales the inputs first (`f64` bits, default 1). A row whose entries
/// are all `-inf` becomes zeros.
pub fn softmax(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    const K: &str = "softmax";
    let scale = opt_f64(ctx, 0, 1.0) as f32;
    if !scale.is_finite() {
        return Err(KernelError::param_value(
            K,
            0,
            format!("the scale must be finite, not {scale}"),
        ));
    }
    let x = ctx.read_float(0)?;
    let mut out = ctx.write_float(1)?;
    same_shape(K, dims_r(0, &x), dims_w(1, &out))?;
    let (mut bx, mut bo) = (Scratch::take(), Scratch::take());
    for r in 0..x.rows() {
        let row = x.row(r, &mut bx);
        out.update_row(r, &mut bo, false, |o| {
            for (o, &v) in o.iter_mut().zip(row) {
                *o = v * scale;
            }
            softmax_in_place(o);
        });
    }
    Ok(())
}

/// Softmax of `x` in place; all `-inf` (or empty) gives zeros.
pub(crate) fn softmax_in_place(x: &mut [f32]) {
    let m = fast::max(x);
    if m == f32::NEG_INFINITY {
        x.fill(0.0);
        return;
    }
    let s = fast::exp_sum(x, m);
    let inv = 1.0 / s;
    for v in x {
        *v *= inv;
    }
}

/// `rmsnorm`: region 2 (written) = `x / √(mean(x²) + eps) · w` for each row `x` of region 0
/// (read), with `w` the vector of region 1 (read, one value per column); optional param 0 is
/// `eps` (`f64` bits, default `1e-6`, finite and not negative).
pub fn rmsnorm(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    const K: &str = "rmsnorm";
    let eps = opt_f64(ctx, 0, 1e-6);
    if !(eps >= 0.0 && eps.is_finite()) {
        return Err(KernelError::param_value(
            K,
            0,
            format!("eps must be finite and not negative, not {eps}"),
        ));
    }
    let x = ctx.read_float(0)?;
    let w = ctx.read_float(1)?;
    let mut y = ctx.write_float(2)?;
    same_shape(K, dims_r(0, &x), dims_w(2, &y))?;
    vector_len(K, dims_r(1, &w), x.cols(), "one per column of region 0")?;
    let (mut bx, mut bw, mut by) = (Scratch::take(), Scratch::take(), Scratch::take());
    w.load_all(&mut bw);
    let wv = &bw[..];
    let n = x.cols() as f32;
    for r in 0..x.rows() {
        let row = x.row(r, &mut bx);
        let inv = 1.0 / (fast::dot(row, row) / n + eps as f32).sqrt();
        y.update_row(r, &mut by, false, |o| {
            for ((o, &v), &g) in o.iter_mut().zip(row).zip(wv) {
                *o = v * inv * g;
            }
        });
    }
    Ok(())
}

/// `rope`: rotary position embedding, in place, of every region to rotate (each `inout`), in
/// one of two forms.
///
/// - **Tables** (what deployed kernels take, and what the device runs): the last two regions
///   are `in` — the cos and sin tables, `tokens × d/2` each (row `t`, column `i`: the cosine and
///   sine of token `t`'s angle for pair `i`); every region before them is rotated. No scalar
///   parameters; `tokens` is the tables' rows.
/// - **Angles**: every region is rotated; params 0 `pos` (`i64`), optional 1 `tokens` (`i64`,
///   default region 0's rows), optional 2 `theta` (`f64` bits, default 10000); angles are
///   `position · theta^(-2i/d)` computed in `f64` (the CPU's convenience: the device has no
///   sine or cosine).
///
/// Each rotated region is `tokens·h × d` with `d` even: row `r` is token `r / h` (tokens
/// outermost, heads inside). Pairs are rotate-half (GPT-NeoX, Hugging Face LLaMA): element
/// `i < d/2` pairs with `i + d/2`: `lo' = lo·cos − hi·sin`, `hi' = lo·sin + hi·cos` in `f32`.
pub fn rope(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    let n = ctx.num_regions();
    let tables = n >= 3
        && ctx.io(n - 1)?.access() == pto_wsp_ir::Access::In
        && ctx.io(n - 2)?.access() == pto_wsp_ir::Access::In;
    if tables {
        rope_tables(ctx)
    } else {
        rope_angles(ctx)
    }
}

/// The RoPE tables' entry of position `position`, pair `pair` of a head of `2 · half`
/// elements at base `theta` (rotate-half pairing): `(cos, sin)` of
/// `position · theta^(−pair / half)`, in `f64`. The one definition of the tables: the
/// `//@ fill NAME=rope_cos(THETA)` / `rope_sin(THETA)` generators and every program that fills
/// tables itself read it, so tables and the angles form agree.
pub fn rope_table_entry(theta: f64, position: usize, pair: usize, half: usize) -> (f64, f64) {
    let angle = position as f64 * rope_frequency(theta, pair, half);
    let (s, c) = angle.sin_cos();
    (c, s)
}

/// The rotation frequency of pair `pair` of `half` pairs: `theta^(-2 pair / (2 half))`; the
/// angle at position `p` is `p` times it.
pub fn rope_frequency(theta: f64, pair: usize, half: usize) -> f64 {
    theta.powf(-2.0 * pair as f64 / (2 * half) as f64)
}

/// [`rope`] with cos / sin tables.
fn rope_tables(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    const K: &str = "rope";
    let n = ctx.num_regions();
    if !ctx.params().is_empty() {
        return Err(KernelError::param_value(
            K,
            0,
            format!(
                "rope with cos / sin tables takes no scalar parameters (the tables give the \
                 positions), but the task passes {}",
                ctx.params().len()
            ),
        ));
    }
    let cos = ctx.read_float(n - 2)?;
    let sin = ctx.read_float(n - 1)?;
    let tokens = cos.rows();
    let mut views = Vec::with_capacity(n - 2);
    for i in 0..n - 2 {
        need_inout(ctx, K, i)?;
        views.push(ctx.write_float(i)?);
    }
    let d = views[0].cols();
    let half = d / 2;
    let (dc, ds) = (dims_r(n - 2, &cos), dims_r(n - 1, &sin));
    if tokens == 0 || cos.cols() != half || (sin.rows(), sin.cols()) != (tokens, half) {
        return Err(KernelError::shape(
            K,
            format!("{dc} and {ds}: the cos and sin tables must both be tokens x d/2 (d = {d})"),
        ));
    }
    rotate_shapes(&views, tokens, d)?;
    let (mut bc, mut bs) = (Scratch::take(), Scratch::take());
    cos.load_all(&mut bc);
    sin.load_all(&mut bs);
    rotate(&mut views, tokens, half, |t, i| {
        (bc[t * half + i], bs[t * half + i])
    });
    Ok(())
}

/// Every rotated region has region 0's even number of columns and a whole number of rows per
/// token.
fn rotate_shapes(views: &[FloatWrite<'_>], tokens: usize, d: usize) -> Result<(), KernelError> {
    const K: &str = "rope";
    for (i, v) in views.iter().enumerate() {
        let dims = dims_w(i, v);
        if v.cols() != d || v.cols() % 2 != 0 {
            return Err(KernelError::shape(
                K,
                format!(
                    "{dims}, but every region must have the same even number of columns as region 0 ({d})"
                ),
            ));
        }
        if v.rows() % tokens != 0 {
            return Err(KernelError::shape(
                K,
                format!("{dims}: its rows are not a multiple of the {tokens} token(s)"),
            ));
        }
    }
    Ok(())
}

/// Rotates every region: row `r` of a region of `h = rows / tokens` heads is token `r / h`,
/// whose pair `i` turns by `cs(token, i) = (cos, sin)`.
fn rotate(
    views: &mut [FloatWrite<'_>],
    tokens: usize,
    half: usize,
    cs: impl Fn(usize, usize) -> (f32, f32),
) {
    let mut buf = Scratch::take();
    for v in views {
        let h = (v.rows() / tokens).max(1);
        for r in 0..v.rows() {
            let t = r / h;
            v.update_row(r, &mut buf, true, |x| {
                let (lo, hi) = x.split_at_mut(half);
                for i in 0..half {
                    let (c, s) = cs(t, i);
                    let (a, b) = (lo[i], hi[i]);
                    lo[i] = a * c - b * s;
                    hi[i] = a * s + b * c;
                }
            });
        }
    }
}

/// [`rope`] with angles computed from the position.
fn rope_angles(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    const K: &str = "rope";
    let pos = ctx.param_i64(0)?;
    let theta = opt_f64(ctx, 2, 10_000.0);
    if !(theta > 0.0 && theta.is_finite()) {
        return Err(KernelError::param_value(
            K,
            2,
            format!("theta must be finite and positive, not {theta}"),
        ));
    }
    if ctx.num_regions() == 0 {
        return Err(KernelError::shape(K, "the task has no region to rotate"));
    }
    let mut views = Vec::with_capacity(ctx.num_regions());
    for i in 0..ctx.num_regions() {
        need_inout(ctx, K, i)?;
        views.push(ctx.write_float(i)?);
    }
    let (rows0, d) = (views[0].rows(), views[0].cols());
    let tokens = match opt_i64(ctx, 1) {
        // A region of no rows (a raw zero-size region) has nothing to rotate.
        None => rows0.max(1),
        Some(t) if t >= 1 => t as usize,
        Some(t) => {
            return Err(KernelError::param_value(
                K,
                1,
                format!("tokens must be at least 1, not {t}"),
            ));
        }
    };
    rotate_shapes(&views, tokens, d)?;
    // Regions of no rows have nothing to rotate; any other region bounds `tokens` by its rows.
    if views.iter().all(|v| v.rows() == 0) {
        return Ok(());
    }
    let half = d / 2;
    // cos and sin of each token's angles: the first token's directly, then stepped by the
    // rotation of one position (in f64: 32 steps lose nothing an f32 result would see).
    let mut table = Scratch::take();
    let table = table.slice(tokens * d);
    let mut step = vec![(0.0f64, 0.0f64); half];
    let mut cur = vec![(0.0f64, 0.0f64); half];
    for i in 0..half {
        let freq = theta.powf(-2.0 * i as f64 / d as f64);
        step[i] = (freq.cos(), freq.sin());
        let (s, c) = (pos as f64 * freq).sin_cos();
        cur[i] = (c, s);
    }
    for t in 0..tokens {
        let row = &mut table[t * d..(t + 1) * d];
        for i in 0..half {
            let (c, s) = cur[i];
            row[i] = c as f32;
            row[half + i] = s as f32;
            let (dc, ds) = step[i];
            cur[i] = (c * dc - s * ds, s * dc + c * ds);
        }
    }
    rotate(&mut views, tokens, half, |t, i| {
        (table[t * d + i], table[t * d + half + i])
    });
    Ok(())
}
