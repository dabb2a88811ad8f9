//! Mixture of experts: one expert's gated SwiGLU feed-forward network on a tile of tokens.
//!
//! Why: an MoE layer routes each tile of tokens to a few of its experts (top-k); a workload
//! generates one task per (tile, activated expert) through a sparse `select`, and each task runs
//! the whole expert — three matrix products and the SwiGLU between them — keeping the `T × F`
//! intermediates in per-thread scratch instead of in tensors.
//!
//! Promise: `moe_expert` writes `y[t] = gate[t] · ((silu(x·W1) ⊙ (x·W3)) · W2)[t]` for the
//! token rows `t` of `x`, computed in `f32` (products through [`super::matmul`]'s `gemm` path,
//! `silu(g) = g / (1 + e^−g)` as the `silu` built-in) and rounded once to the output's type.
//! Shapes are checked before anything is written.

use super::matmul::scratch_times;
use super::{Dims, vector_len};
use crate::context::TaskContext;
use crate::registry::KernelError;
use crate::tile::Scratch;

/// `moe_expert`: region 0 `x` (`T×H` tokens), region 1 `gate` (`T` elements, the router's weight
/// of this expert for each token), regions 2 and 3 `W1`, `W3` (`H×F`, gate and up projections),
/// region 4 `W2` (`F×H`, down projection), region 5 (written, `T×H`) the gated expert output.
pub fn moe_expert(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    const K: &str = "moe_expert";
    let x = ctx.read_float(0)?;
    let gate = ctx.read_float(1)?;
    let w1 = ctx.read_float(2)?;
    let w3 = ctx.read_float(3)?;
    let w2 = ctx.read_float(4)?;
    let mut out = ctx.write_float(5)?;
    let (t, h) = (x.rows(), x.cols());
    let f = w1.cols();
    let dx = Dims::new(0, t, h);
    vector_len(
        K,
        Dims::new(1, gate.rows(), gate.cols()),
        t,
        "one gate weight per token row of region 0",
    )?;
    for (i, w) in [(2, &w1), (3, &w3)] {
        if (w.rows(), w.cols()) != (h, f) {
            return Err(KernelError::shape(
                K,
                format!(
                    "{} but {dx}: the gate and up projections (regions 2 and 3) must both be {h} x {f} (the tokens' width by region 2's columns)",
                    Dims::new(i, w.rows(), w.cols())
                ),
            ));
        }
    }
    if (w2.rows(), w2.cols()) != (f, h) {
        return Err(KernelError::shape(
            K,
            format!(
                "{}, but the down projection must be {f} x {h} (region 2's columns by the tokens' width)",
                Dims::new(4, w2.rows(), w2.cols())
            ),
        ));
    }
    if (out.rows(), out.cols()) != (t, h) {
        return Err(KernelError::shape(
            K,
            format!(
                "{}, but the output must be shaped like the tokens: {dx}",
                Dims::new(5, out.rows(), out.cols())
            ),
        ));
    }
    let (mut xs, mut g, mut u, mut y, mut gs) = (
        Scratch::take(),
        Scratch::take(),
        Scratch::take(),
        Scratch::take(),
        Scratch::take(),
    );
    x.load_all(&mut xs);
    gate.load_all(&mut gs);
    let g = g.slice(t * f);
    let u = u.slice(t * f);
    let y = y.slice(t * h);
    scratch_times(&xs, t, &w1, g);
    scratch_times(&xs, t, &w3, u);
    for (a, &b) in g.iter_mut().zip(u.iter()) {
        *a = *a / (1.0 + (-*a).exp()) * b;
    }
    scratch_times(g, t, &w2, y);
    if h > 0 {
        for (row, &w) in y.chunks_exact_mut(h).zip(gs.iter()) {
            for v in row {
                *v *= w;
            }
        }
    }
    out.store_all(y);
    Ok(())
}
