//! Split-KV decode attention: one KV chunk to a partial state, and the merge of partial states
//! (the PDE specification's decode-attention example, the FlashInfer / flash-decoding scheme).
//!
//! Why: at decode time each request has one query token per head and a KV cache of thousands of
//! tokens; splitting the cache into chunks processed in parallel, each leaving a partial
//! output with its softmax statistics, and merging those exactly afterwards, is how decode
//! attention keeps every core busy on ragged batches.
//!
//! Promises: for queries `q_g` (the `G` rows of region 0, e.g. the query heads sharing one KV
//! head) and the chunk's valid keys and values `k_j`, `v_j`, with `s_gj = scale · q_g·k_j`:
//! `m_g = max_j s_gj`, `l_g = Σ_j e^(s_gj − m_g)`, `o_g = Σ_j e^(s_gj − m_g) v_j / l_g` — the
//! attention output over the chunk alone, normalised. An empty chunk gives `o = 0`, `m = -inf`,
//! `l = 0`. The merge of partials `(o_c, m_c, l_c)` is `M = max m_c`, `w_c = l_c e^(m_c − M)`,
//! `o = Σ w_c o_c / Σ w_c`, and optionally `(M, Σ w_c)` so that merges compose; with no
//! non-empty partial it gives zeros. Merging the partials of any split of a sequence equals
//! attention over the whole sequence, up to rounding. Scores and sums are `f32`; `exp` is
//! [`crate::fast`]'s.

use super::{Dims, opt_f64, opt_i64, vector_len};
use crate::context::ReadView;
use crate::context::TaskContext;
use crate::fast;
use crate::registry::KernelError;
use crate::tile::{Float, FloatRead, Scratch};

/// Key / value rows handed to the SIMD loops at a time.
const BLOCK: usize = 64;

/// Applies `f` to blocks of up to [`BLOCK`] rows `j0 ..` of `view` (the first `n` rows), in its
/// storage type: `f(j0, rows)`.
fn for_blocks<T: Float>(view: &ReadView<'_, T>, n: usize, mut f: impl FnMut(usize, &[&[T]])) {
    let mut rows: [&[T]; BLOCK] = [&[]; BLOCK];
    for j0 in (0..n).step_by(BLOCK) {
        let jb = BLOCK.min(n - j0);
        for (jj, row) in rows.iter_mut().enumerate().take(jb) {
            *row = view.row(j0 + jj);
        }
        f(j0, &rows[..jb]);
    }
}

/// Scores of the scaled queries `qs` (`G×d`) against the first `n` key rows, into `scores`
/// (`G×n`).
fn qk_pass<T: Float>(k: &ReadView<'_, T>, n: usize, qs: &[f32], d: usize, scores: &mut [f32]) {
    for_blocks(k, n, |j0, rows| fast::qk(qs, d, rows, &mut scores[j0..], n));
}

/// `acc (G×d) += p (G×n) · V[..n]`.
fn pv_pass<T: Float>(v: &ReadView<'_, T>, n: usize, p: &[f32], acc: &mut [f32], d: usize) {
    for_blocks(v, n, |j0, rows| fast::pv(&p[j0..], n, rows, acc, d));
}

/// `attn_decode_chunk`: attention of the `G` query rows of region 0 (`G×D`) over one chunk of
/// keys (region 1, `S×D`) and values (region 2, `S×D`), written as a partial state: region 3
/// (`G×D`) the normalised output, regions 4 and 5 (`G` elements each) the running max and
/// running sum. Params (optional): 0 and 1 `chunk_start`, `chunk_end` (`i64`, both or neither:
/// only the first `chunk_end − chunk_start` key rows are valid; default all `S`), 2 `scale`
/// (`f64` bits, default `1/√D`).
pub fn attn_decode_chunk(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    const K: &str = "attn_decode_chunk";
    let q = ctx.read_float(0)?;
    let k = ctx.read_float(1)?;
    let v = ctx.read_float(2)?;
    let mut o = ctx.write_float(3)?;
    let mut m_out = ctx.write_float(4)?;
    let mut l_out = ctx.write_float(5)?;
    let (g, d, s) = (q.rows(), q.cols(), k.rows());
    chunk_shapes(
        (g, d, s),
        [(k.rows(), k.cols()), (v.rows(), v.cols())],
        [
            (o.rows(), o.cols()),
            (m_out.rows(), m_out.cols()),
            (l_out.rows(), l_out.cols()),
        ],
    )?;
    let n = valid_rows(ctx, K, s)?;
    let scale = opt_f64(ctx, 2, 1.0 / (d as f64).sqrt());
    if !scale.is_finite() {
        return Err(KernelError::param_value(
            K,
            2,
            format!("the scale must be finite, not {scale}"),
        ));
    }
    let scale = scale as f32;

    let (mut qs, mut scores, mut acc) = (Scratch::take(), Scratch::take(), Scratch::take());
    let mut stats = Scratch::take();
    let stats = stats.slice(2 * g);
    if n == 0 {
        o.fill(0.0);
        stats[..g].fill(f32::NEG_INFINITY);
        stats[g..].fill(0.0);
        m_out.store_all(&stats[..g]);
        l_out.store_all(&stats[g..]);
        return Ok(());
    }
    let qs = qs.slice(g * d);
    for (r, row) in qs.chunks_exact_mut(d).enumerate() {
        q.load_row(r, row);
        for x in row.iter_mut() {
            *x *= scale;
        }
    }
    // Scores: G × n, row stride n.
    let sc = scores.slice(g * n);
    match &k {
        FloatRead::F32(view) => qk_pass(view, n, qs, d, sc),
        FloatRead::F16(view) => qk_pass(view, n, qs, d, sc),
        FloatRead::Bf16(view) => qk_pass(view, n, qs, d, sc),
    }
    // Softmax statistics; scores become unnormalised probabilities.
    for gi in 0..g {
        let row = &mut sc[gi * n..(gi + 1) * n];
        let m = fast::max(row);
        stats[gi] = m;
        stats[g + gi] = if m == f32::NEG_INFINITY {
            row.fill(0.0);
            0.0
        } else {
            fast::exp_sum(row, m)
        };
    }
    // Weighted values.
    let acc = acc.slice(g * d);
    acc.fill(0.0);
    match &v {
        FloatRead::F32(view) => pv_pass(view, n, sc, acc, d),
        FloatRead::F16(view) => pv_pass(view, n, sc, acc, d),
        FloatRead::Bf16(view) => pv_pass(view, n, sc, acc, d),
    }
    for (gi, row) in acc.chunks_exact_mut(d).enumerate() {
        let l = stats[g + gi];
        let inv = if l > 0.0 { 1.0 / l } else { 0.0 };
        for x in row.iter_mut() {
            *x *= inv;
        }
        o.store_row(gi, row);
    }
    m_out.store_all(&stats[..g]);
    l_out.store_all(&stats[g..]);
    Ok(())
}

/// The shapes of a decode chunk, as `(rows, cols)`: keys and values (`kv`) `S x D`; of `out`,
/// the output like the queries (`G x D`), the running max and the running sum `G` each.
fn chunk_shapes(
    (g, d, s): (usize, usize, usize),
    kv: [(usize, usize); 2],
    out: [(usize, usize); 3],
) -> Result<(), KernelError> {
    const K: &str = "attn_decode_chunk";
    let dq = Dims::new(0, g, d);
    for (i, (rows, cols)) in [(1, kv[0]), (2, kv[1])] {
        let dims = Dims::new(i, rows, cols);
        if cols != d || rows != s {
            return Err(KernelError::shape(
                K,
                format!(
                    "{dims}, but keys and values must both be {s} x {d}: region 1's rows (the chunk) by region 0's columns (the head dimension)"
                ),
            ));
        }
    }
    let dout = Dims::new(3, out[0].0, out[0].1);
    if out[0] != (g, d) {
        return Err(KernelError::shape(
            K,
            format!("{dout}, but the output must be shaped like the queries: {dq}"),
        ));
    }
    vector_len(
        K,
        Dims::new(4, out[1].0, out[1].1),
        g,
        "the running max, one per query row",
    )?;
    vector_len(
        K,
        Dims::new(5, out[2].0, out[2].1),
        g,
        "the running sum, one per query row",
    )?;
    Ok(())
}

/// `attn_causal`: causal (prefill) attention of the `Tq` query rows of region 0 (`Tq×D`) over
/// keys (region 1, `S×D`) and values (region 2, `S×D`), normalised output in region 3
/// (`Tq×D`). The queries are the *last* `Tq` positions of the valid keys: with `n` valid keys,
/// query row `i` sits at position `n − Tq + i` and attends keys `0 ..= n − Tq + i`. Params
/// (optional): 0 `kv_len` (`i64`, default `S`): the number of valid key rows `n`, with
/// `Tq ≤ n ≤ S`; 1 `scale` (`f64` bits, default `1/√D`).
pub fn attn_causal(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    const K: &str = "attn_causal";
    let q = ctx.read_float(0)?;
    let k = ctx.read_float(1)?;
    let v = ctx.read_float(2)?;
    let mut o = ctx.write_float(3)?;
    let (tq, d, s) = (q.rows(), q.cols(), k.rows());
    let dq = Dims::new(0, tq, d);
    for (i, view) in [(1, &k), (2, &v)] {
        let dims = Dims::new(i, view.rows(), view.cols());
        if view.cols() != d || view.rows() != s {
            return Err(KernelError::shape(
                K,
                format!(
                    "{dims}, but keys and values must both be {s} x {d}: region 1's rows (the keys) by region 0's columns (the head dimension)"
                ),
            ));
        }
    }
    if (o.rows(), o.cols()) != (tq, d) {
        return Err(KernelError::shape(
            K,
            format!(
                "{}, but the output must be shaped like the queries: {dq}",
                Dims::new(3, o.rows(), o.cols())
            ),
        ));
    }
    let n = opt_i64(ctx, 0).unwrap_or(s as i64);
    if n < tq as i64 || n as u64 > s as u64 {
        return Err(KernelError::param_value(
            K,
            0,
            format!(
                "kv_len {n} must be at least the {tq} query row(s) and at most the {s} key row(s)"
            ),
        ));
    }
    let n = n as usize;
    let scale = opt_f64(ctx, 1, 1.0 / (d as f64).sqrt());
    if !scale.is_finite() {
        return Err(KernelError::param_value(
            K,
            1,
            format!("the scale must be finite, not {scale}"),
        ));
    }
    let scale = scale as f32;
    if tq == 0 || d == 0 {
        o.fill(0.0);
        return Ok(());
    }
    let (mut qs, mut scores, mut acc) = (Scratch::take(), Scratch::take(), Scratch::take());
    let mut sums = Scratch::take();
    let qs = qs.slice(tq * d);
    for (r, row) in qs.chunks_exact_mut(d).enumerate() {
        q.load_row(r, row);
        for x in row.iter_mut() {
            *x *= scale;
        }
    }
    // Scores of every query against every valid key (Tq × n, row stride n); the masked tail of
    // each row becomes 0 after the softmax below.
    let sc = scores.slice(tq * n);
    match &k {
        FloatRead::F32(view) => qk_pass(view, n, qs, d, sc),
        FloatRead::F16(view) => qk_pass(view, n, qs, d, sc),
        FloatRead::Bf16(view) => qk_pass(view, n, qs, d, sc),
    }
    let sums = sums.slice(tq);
    for (i, row) in sc.chunks_exact_mut(n).enumerate() {
        // n >= tq, so the position n - tq + i is a valid key index.
        let visible = n - tq + i + 1;
        let (live, masked) = row.split_at_mut(visible);
        masked.fill(0.0);
        let m = fast::max(live);
        sums[i] = if m == f32::NEG_INFINITY {
            live.fill(0.0);
            0.0
        } else {
            fast::exp_sum(live, m)
        };
    }
    let acc = acc.slice(tq * d);
    acc.fill(0.0);
    match &v {
        FloatRead::F32(view) => pv_pass(view, n, sc, acc, d),
        FloatRead::F16(view) => pv_pass(view, n, sc, acc, d),
        FloatRead::Bf16(view) => pv_pass(view, n, sc, acc, d),
    }
    for (i, row) in acc.chunks_exact_mut(d).enumerate() {
        let l = sums[i];
        let inv = if l > 0.0 { 1.0 / l } else { 0.0 };
        for x in row.iter_mut() {
            *x *= inv;
        }
        o.store_row(i, row);
    }
    Ok(())
}

/// The number of valid key rows from params 0 and 1 (`chunk_start`, `chunk_end`), or all `s`.
fn valid_rows(ctx: &TaskContext<'_>, kernel: &str, s: usize) -> Result<usize, KernelError> {
    match ctx.params().len() {
        0 => return Ok(s),
        1 => {
            return Err(KernelError::param_value(
                kernel,
                1,
                "chunk_end is missing: give chunk_start and chunk_end, or neither",
            ));
        }
        _ => {}
    }
    let (start, end) = (ctx.param_i64(0)?, ctx.param_i64(1)?);
    let len = end.checked_sub(start).filter(|&n| n >= 0).ok_or_else(|| {
        KernelError::param_value(
            kernel,
            1,
            format!("chunk_end {end} is before chunk_start {start}"),
        )
    })?;
    if len as u64 > s as u64 {
        return Err(KernelError::param_value(
            kernel,
            1,
            format!(
                "the chunk {start}..{end} has {len} rows, but the key and value regions have {s}"
            ),
        ));
    }
    Ok(len as usize)
}

/// `attn_merge`: merges `C` partial states per head. Region 0 holds the partial outputs
/// (`H·C × D`, head-major: row `h·C + c` is head `h`'s chunk `c`), regions 1 and 2 their running
/// maxes and sums (`H·C` elements each), region 3 (written, `H×D`) the merged, normalised
/// output; optional regions 4 and 5 (written, `H` elements each) receive the merged running max
/// and sum.
pub fn attn_merge(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    const K: &str = "attn_merge";
    if ctx.num_regions() > 6 {
        return Err(KernelError::shape(
            K,
            format!(
                "the task has {} regions; the kernel takes 4 to 6",
                ctx.num_regions()
            ),
        ));
    }
    let o = ctx.read_float(0)?;
    let m = ctx.read_float(1)?;
    let l = ctx.read_float(2)?;
    let mut out = ctx.write_float(3)?;
    let (h, d) = (out.rows(), out.cols());
    let (dpart, dout) = (Dims::new(0, o.rows(), o.cols()), Dims::new(3, h, d));
    if o.cols() != d || o.rows().checked_rem(h) != Some(0) {
        return Err(KernelError::shape(
            K,
            format!(
                "{dpart} but {dout}: the partials must have the output's columns and a whole number of rows per output row (head)"
            ),
        ));
    }
    let hc = o.rows();
    let c = hc / h; // h >= 1: checked_rem above
    vector_len(
        K,
        Dims::new(1, m.rows(), m.cols()),
        hc,
        "one running max per partial row",
    )?;
    vector_len(
        K,
        Dims::new(2, l.rows(), l.cols()),
        hc,
        "one running sum per partial row",
    )?;
    let mut stats_out = Vec::new();
    for i in 4..ctx.num_regions().min(6) {
        let w = ctx.write_float(i)?;
        let what = if i == 4 {
            "the merged running max, one per head"
        } else {
            "the merged running sum, one per head"
        };
        vector_len(K, Dims::new(i, w.rows(), w.cols()), h, what)?;
        stats_out.push(w);
    }
    let (mut ms, mut ls, mut row, mut buf) = (
        Scratch::take(),
        Scratch::take(),
        Scratch::take(),
        Scratch::take(),
    );
    m.load_all(&mut ms);
    l.load_all(&mut ls);
    let mut merged = Scratch::take();
    let merged = merged.slice(2 * h);
    let row = row.slice(d);
    for hi in 0..h {
        let (mh, lh) = (&ms[hi * c..(hi + 1) * c], &ls[hi * c..(hi + 1) * c]);
        let big = mh.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
        row.fill(0.0);
        let mut total = 0.0f32;
        if big > f32::NEG_INFINITY {
            for ci in 0..c {
                let w = lh[ci] * (mh[ci] - big).exp();
                if w == 0.0 {
                    continue;
                }
                total += w;
                let part = o.row(hi * c + ci, &mut buf);
                for (x, &p) in row.iter_mut().zip(part) {
                    *x += w * p;
                }
            }
        }
        let inv = if total > 0.0 { 1.0 / total } else { 0.0 };
        for x in row.iter_mut() {
            *x *= inv;
        }
        out.store_row(hi, row);
        merged[hi] = big;
        merged[h + hi] = total;
    }
    for (k, w) in stats_out.iter_mut().enumerate() {
        w.store_all(&merged[k * h..(k + 1) * h]);
    }
    Ok(())
}
