//! The built-in tile kernels, registered by name in [`KernelRegistry::with_builtins`].
//!
//! Why: a workload's tasks need real numerics to be checked end to end on the CPU — matrix
//! products, the elementwise and row operations of a transformer layer, split-KV decode
//! attention and its merge — and a cost for each task to replay schedules on a simulated clock.
//!
//! Promises (the calling convention of every kernel is in `docs/KERNELS.md`):
//! - A kernel reads and writes its regions seen as rows × cols ([`crate::context`]). Float
//!   regions may each hold `f32`, `f16` or `bf16` ([`crate::tile`]); arithmetic is `f32` and
//!   every result is rounded once to its region's type.
//! - Every check comes before the first write: a region of the wrong shape is a
//!   [`KernelError::Shape`] naming the kernel and the region indices, a region the kernel
//!   updates but that is declared `out` is a [`KernelError::Access`], a parameter out of range a
//!   [`KernelError::ParamValue`]; no input makes a kernel panic.
//! - Each kernel has a cost function from [`crate::cost`], computed from the shapes alone.
//!
//! Modules: [`elementwise`] (fill, copy, arithmetic, broadcasts, activations), [`rows`] (row
//! reductions, softmax, RMSNorm, RoPE), [`matmul`], [`attention`] (decode chunk and merge,
//! causal prefill attention), [`moe`] (a gated SwiGLU expert), [`topk`], [`index`] (gather and
//! scatter-add of rows by an index tensor, bucketing rows by index).

pub mod attention;
pub mod elementwise;
pub mod index;
pub mod matmul;
pub mod moe;
pub mod rows;
pub mod topk;

use crate::context::TaskContext;
use crate::cost::Work;
use crate::registry::{KernelError, KernelRegistry};
use pto_wsp_ir::{Access, ParamType};

/// A kernel function.
type Kernel = fn(&TaskContext<'_>) -> Result<(), KernelError>;
/// A kernel's work model (see [`crate::cost`]).
type WorkFn = fn(&TaskContext<'_>) -> Work;

/// The scalar parameters a built-in takes, in order: name and type. The first `required` must
/// be passed; the rest are optional, but a task may not pass more than there are. Float
/// parameters arrive as the bits of an `f64` (the IR's float literals).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Signature {
    /// Every parameter: name and type.
    pub params: &'static [(&'static str, ParamType)],
    /// How many leading parameters are required.
    pub required: usize,
}

impl Signature {
    const fn new(params: &'static [(&'static str, ParamType)], required: usize) -> Signature {
        Signature { params, required }
    }

    /// Checks the number of scalar parameters a task of `kernel` passes: more than it takes is
    /// a [`KernelError::ParamValue`], fewer than it needs a [`KernelError::Param`].
    pub fn check(&self, kernel: &str, given: usize) -> Result<(), KernelError> {
        if given > self.params.len() {
            let took = match self.params.len() {
                0 => "no scalar parameters".to_string(),
                n => format!("at most {n} scalar parameter(s) ({})", self.describe()),
            };
            return Err(KernelError::param_value(
                kernel,
                self.params.len(),
                format!("the kernel takes {took}, but the task passes {given}"),
            ));
        }
        if given < self.required {
            return Err(KernelError::Param {
                index: given,
                count: given,
            });
        }
        Ok(())
    }

    /// `pos: i64, tokens: i64 (optional), ...`.
    pub fn describe(&self) -> String {
        let parts: Vec<String> = self
            .params
            .iter()
            .enumerate()
            .map(|(i, (n, t))| {
                if i < self.required {
                    format!("{n}: {t}")
                } else {
                    format!("{n}: {t} (optional)")
                }
            })
            .collect();
        parts.join(", ")
    }
}

/// The work model of built-in `name` on `ctx` (what a task computes and moves), if it is one:
/// what device timing models convert with a machine's rates.
pub fn work(name: &str, ctx: &TaskContext<'_>) -> Option<Work> {
    TABLE.iter().find(|e| e.0 == name).map(|e| (e.2)(ctx))
}

/// The scalar parameters of built-in `name`, if it is one.
pub fn signature(name: &str) -> Option<Signature> {
    TABLE.iter().find(|e| e.0 == name).map(|e| e.3)
}

use ParamType::{F64, I64};

/// Every built-in: name, function, work model, scalar parameters. Registration order is id
/// order.
const TABLE: &[(&str, Kernel, WorkFn, Signature)] = &[
    // The engine's test kernels, on any float type.
    (
        "empty",
        elementwise::empty,
        work::nothing,
        Signature::new(&[], 0),
    ),
    (
        "fill",
        elementwise::fill,
        work::per_output::<0, 1, 0>,
        Signature::new(&[("value", F64)], 1),
    ),
    (
        "copy",
        elementwise::copy,
        work::per_output::<1, 1, 0>,
        Signature::new(&[], 0),
    ),
    (
        "add",
        elementwise::add,
        work::per_output::<2, 1, 0>,
        Signature::new(&[], 0),
    ),
    (
        "scale",
        elementwise::scale,
        work::per_output::<1, 1, 0>,
        Signature::new(&[("factor", F64)], 1),
    ),
    (
        "accumulate",
        elementwise::accumulate,
        work::per_output::<1, 1, 0>,
        Signature::new(&[], 0),
    ),
    (
        "counter",
        elementwise::counter,
        work::per_output::<0, 1, 0>,
        Signature::new(&[], 0),
    ),
    // Elementwise arithmetic.
    (
        "sub",
        elementwise::sub,
        work::per_output::<2, 1, 0>,
        Signature::new(&[], 0),
    ),
    (
        "mul",
        elementwise::mul,
        work::per_output::<2, 1, 0>,
        Signature::new(&[], 0),
    ),
    (
        "div",
        elementwise::div,
        work::per_output::<2, 1, 0>,
        Signature::new(&[], 0),
    ),
    (
        "max",
        elementwise::max,
        work::per_output::<2, 1, 0>,
        Signature::new(&[], 0),
    ),
    (
        "min",
        elementwise::min,
        work::per_output::<2, 1, 0>,
        Signature::new(&[], 0),
    ),
    (
        "add_row",
        elementwise::add_row,
        work::per_output::<2, 1, 0>,
        Signature::new(&[], 0),
    ),
    (
        "sub_row",
        elementwise::sub_row,
        work::per_output::<2, 1, 0>,
        Signature::new(&[], 0),
    ),
    (
        "mul_row",
        elementwise::mul_row,
        work::per_output::<2, 1, 0>,
        Signature::new(&[], 0),
    ),
    (
        "div_row",
        elementwise::div_row,
        work::per_output::<2, 1, 0>,
        Signature::new(&[], 0),
    ),
    (
        "max_row",
        elementwise::max_row,
        work::per_output::<2, 1, 0>,
        Signature::new(&[], 0),
    ),
    (
        "min_row",
        elementwise::min_row,
        work::per_output::<2, 1, 0>,
        Signature::new(&[], 0),
    ),
    (
        "add_col",
        elementwise::add_col,
        work::per_output::<2, 1, 0>,
        Signature::new(&[], 0),
    ),
    (
        "sub_col",
        elementwise::sub_col,
        work::per_output::<2, 1, 0>,
        Signature::new(&[], 0),
    ),
    (
        "mul_col",
        elementwise::mul_col,
        work::per_output::<2, 1, 0>,
        Signature::new(&[], 0),
    ),
    (
        "div_col",
        elementwise::div_col,
        work::per_output::<2, 1, 0>,
        Signature::new(&[], 0),
    ),
    (
        "max_col",
        elementwise::max_col,
        work::per_output::<2, 1, 0>,
        Signature::new(&[], 0),
    ),
    (
        "min_col",
        elementwise::min_col,
        work::per_output::<2, 1, 0>,
        Signature::new(&[], 0),
    ),
    // Activations.
    (
        "exp",
        elementwise::exp,
        work::per_output::<1, 1, 1>,
        Signature::new(&[], 0),
    ),
    (
        "rsqrt",
        elementwise::rsqrt,
        work::per_output::<1, 1, 1>,
        Signature::new(&[], 0),
    ),
    (
        "relu",
        elementwise::relu,
        work::per_output::<1, 1, 0>,
        Signature::new(&[], 0),
    ),
    (
        "silu",
        elementwise::silu,
        work::per_output::<1, 3, 1>,
        Signature::new(&[], 0),
    ),
    (
        "gelu",
        elementwise::gelu,
        work::per_output::<1, 6, 1>,
        Signature::new(&[], 0),
    ),
    (
        "swiglu",
        elementwise::swiglu,
        work::per_output::<2, 4, 1>,
        Signature::new(&[], 0),
    ),
    // Rows.
    (
        "row_sum",
        rows::row_sum,
        work::per_input::<1, 0>,
        Signature::new(&[], 0),
    ),
    (
        "row_max",
        rows::row_max,
        work::per_input::<1, 0>,
        Signature::new(&[], 0),
    ),
    (
        "row_mean",
        rows::row_mean,
        work::per_input::<1, 0>,
        Signature::new(&[], 0),
    ),
    (
        "softmax",
        rows::softmax,
        work::per_input::<4, 1>,
        Signature::new(&[("scale", F64)], 0),
    ),
    (
        "rmsnorm",
        rows::rmsnorm,
        work::per_input::<4, 0>,
        Signature::new(&[("eps", F64)], 0),
    ),
    (
        "rope",
        rows::rope,
        work::rope,
        Signature::new(&[("pos", I64), ("tokens", I64), ("theta", F64)], 0),
    ),
    // Matrix products.
    (
        "matmul",
        matmul::matmul,
        work::matmul,
        Signature::new(&[], 0),
    ),
    (
        "matmul_acc",
        matmul::matmul_acc,
        work::matmul,
        Signature::new(&[], 0),
    ),
    (
        "matmul_bt",
        matmul::matmul_bt,
        work::matmul,
        Signature::new(&[], 0),
    ),
    (
        "matmul_bt_acc",
        matmul::matmul_bt_acc,
        work::matmul,
        Signature::new(&[], 0),
    ),
    // Attention.
    (
        "attn_decode_chunk",
        attention::attn_decode_chunk,
        work::attn_decode_chunk,
        Signature::new(
            &[("chunk_start", I64), ("chunk_end", I64), ("scale", F64)],
            0,
        ),
    ),
    (
        "attn_merge",
        attention::attn_merge,
        work::attn_merge,
        Signature::new(&[], 0),
    ),
    (
        "attn_causal",
        attention::attn_causal,
        work::attn_causal,
        Signature::new(&[("kv_len", I64), ("scale", F64)], 0),
    ),
    // Mixture of experts.
    (
        "moe_expert",
        moe::moe_expert,
        work::moe_expert,
        Signature::new(&[], 0),
    ),
    // Selection.
    ("topk", topk::topk, work::topk, Signature::new(&[], 0)),
    // Data-dependent row movement and constants (`index.rs`).
    (
        "add_scalar",
        elementwise::add_scalar,
        work::per_output::<1, 1, 0>,
        Signature::new(&[("value", F64)], 1),
    ),
    (
        "gather_rows",
        index::gather_rows,
        work::per_output::<2, 1, 0>,
        Signature::new(&[], 0),
    ),
    (
        "scatter_add_rows",
        index::scatter_add_rows,
        work::per_output::<2, 1, 0>,
        Signature::new(&[], 0),
    ),
    (
        "bucket_by_index",
        index::bucket_by_index,
        work::per_input::<1, 0>,
        Signature::new(&[], 0),
    ),
];

/// Names of the built-in kernels, in registration (id) order.
pub const NAMES: &[&str] = &{
    let mut names = [""; TABLE.len()];
    let mut i = 0;
    while i < TABLE.len() {
        names[i] = TABLE[i].0;
        i += 1;
    }
    names
};

/// Registers every built-in kernel with its cost function; each checks its task's number of
/// scalar parameters against its [`Signature`] first.
pub(crate) fn register_all(r: &mut KernelRegistry) {
    for &(name, kernel, work, sig) in TABLE {
        r.register(name, move |ctx| {
            sig.check(name, ctx.params().len())?;
            kernel(ctx)
        });
        r.set_cost(name, move |ctx| work(ctx).cycles());
    }
}

/// The work models of the table.
mod work {
    use super::*;
    use crate::cost::{dims, elements, region_bytes};

    pub(super) fn nothing(_: &TaskContext<'_>) -> Work {
        Work::default()
    }

    /// `OPS` simple operations and `TRANS` transcendentals per element of the last region,
    /// which is the output (`IN` is the number of input regions before it).
    pub(super) fn per_output<const IN: usize, const OPS: u64, const TRANS: u64>(
        ctx: &TaskContext<'_>,
    ) -> Work {
        let n = elements(ctx, IN);
        Work {
            vector_ops: OPS * n,
            transcendentals: TRANS * n,
            matmul_flops: 0,
            bytes: region_bytes(ctx),
        }
    }

    /// `OPS` operations and `TRANS` transcendentals per element of region 0.
    pub(super) fn per_input<const OPS: u64, const TRANS: u64>(ctx: &TaskContext<'_>) -> Work {
        let n = elements(ctx, 0);
        Work {
            vector_ops: OPS * n,
            transcendentals: TRANS * n,
            matmul_flops: 0,
            bytes: region_bytes(ctx),
        }
    }

    pub(super) fn rope(ctx: &TaskContext<'_>) -> Work {
        let n: u64 = (0..ctx.num_regions()).map(|i| elements(ctx, i)).sum();
        let (tokens, d) = dims(ctx, 0);
        Work {
            vector_ops: 3 * n,
            transcendentals: tokens * d,
            matmul_flops: 0,
            bytes: region_bytes(ctx),
        }
    }

    pub(super) fn matmul(ctx: &TaskContext<'_>) -> Work {
        let (m, k) = dims(ctx, 0);
        let (_, n) = dims(ctx, 2);
        Work {
            vector_ops: 0,
            transcendentals: 0,
            matmul_flops: 2u64.saturating_mul(m).saturating_mul(n).saturating_mul(k),
            bytes: region_bytes(ctx),
        }
    }

    pub(super) fn attn_decode_chunk(ctx: &TaskContext<'_>) -> Work {
        let (g, d) = dims(ctx, 0);
        let (s, _) = dims(ctx, 1);
        let gs = g.saturating_mul(s);
        Work {
            vector_ops: 4 * gs + 2 * g * d,
            transcendentals: gs,
            matmul_flops: 4u64.saturating_mul(gs).saturating_mul(d),
            bytes: region_bytes(ctx),
        }
    }

    pub(super) fn attn_causal(ctx: &TaskContext<'_>) -> Work {
        let (tq, d) = dims(ctx, 0);
        let (s, _) = dims(ctx, 1);
        let ts = tq.saturating_mul(s);
        Work {
            vector_ops: ts
                .saturating_mul(4)
                .saturating_add(tq.saturating_mul(2 * d)),
            transcendentals: ts,
            matmul_flops: 4u64.saturating_mul(ts).saturating_mul(d),
            bytes: region_bytes(ctx),
        }
    }

    pub(super) fn moe_expert(ctx: &TaskContext<'_>) -> Work {
        let (t, h) = dims(ctx, 0);
        let (_, f) = dims(ctx, 2);
        let tf = t.saturating_mul(f);
        Work {
            vector_ops: tf.saturating_mul(4).saturating_add(t.saturating_mul(h)),
            transcendentals: tf,
            matmul_flops: 6u64.saturating_mul(tf).saturating_mul(h),
            bytes: region_bytes(ctx),
        }
    }

    pub(super) fn attn_merge(ctx: &TaskContext<'_>) -> Work {
        let (hc, d) = dims(ctx, 0);
        Work {
            vector_ops: 2 * hc * d + 4 * hc,
            transcendentals: hc,
            matmul_flops: 0,
            bytes: region_bytes(ctx),
        }
    }

    pub(super) fn topk(ctx: &TaskContext<'_>) -> Work {
        let (rows, n) = dims(ctx, 0);
        let (_, k) = dims(ctx, 1);
        let log_k = 64 - k.leading_zeros() as u64;
        Work {
            vector_ops: rows.saturating_mul(2 * n + k * log_k),
            transcendentals: 0,
            matmul_flops: 0,
            bytes: region_bytes(ctx),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Checks shared by the kernels

/// A region's shape as a view sees it, with its index, for messages.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Dims {
    pub(crate) index: usize,
    pub(crate) rows: usize,
    pub(crate) cols: usize,
}

impl Dims {
    pub(crate) fn new(index: usize, rows: usize, cols: usize) -> Dims {
        Dims { index, rows, cols }
    }

    pub(crate) fn elements(&self) -> usize {
        self.rows * self.cols
    }
}

impl std::fmt::Display for Dims {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "region {} is {} x {} (rows x cols)",
            self.index, self.rows, self.cols
        )
    }
}

/// `a` and `b` have the same rows × cols.
pub(crate) fn same_shape(kernel: &str, a: Dims, b: Dims) -> Result<(), KernelError> {
    if (a.rows, a.cols) == (b.rows, b.cols) {
        return Ok(());
    }
    Err(KernelError::shape(kernel, format!("{a} but {b}")))
}

/// Region `v` holds exactly `n` elements, the length of `what`.
pub(crate) fn vector_len(kernel: &str, v: Dims, n: usize, what: &str) -> Result<(), KernelError> {
    if v.elements() == n {
        return Ok(());
    }
    Err(KernelError::shape(
        kernel,
        format!(
            "{v}, {} element(s), but it must hold {n}: {what}",
            v.elements()
        ),
    ))
}

/// Region `i` is declared `inout` (the kernel reads its old contents).
pub(crate) fn need_inout(ctx: &TaskContext<'_>, kernel: &str, i: usize) -> Result<(), KernelError> {
    let access = ctx.io(i)?.access();
    if access == Access::InOut {
        return Ok(());
    }
    if !access.writes() {
        // The view refuses it with its own, clearer message.
        return ctx.write_float(i).map(|_| ());
    }
    Err(KernelError::Access {
        kernel: kernel.into(),
        index: i,
        access,
    })
}

/// Optional `f64` parameter `i` (raw `f64` bits), `default` if the task has fewer parameters.
pub(crate) fn opt_f64(ctx: &TaskContext<'_>, i: usize, default: f64) -> f64 {
    ctx.param_f64(i).unwrap_or(default)
}

/// Optional `i64` parameter `i`, `None` if the task has fewer parameters.
pub(crate) fn opt_i64(ctx: &TaskContext<'_>, i: usize) -> Option<i64> {
    ctx.param_i64(i).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique() {
        let mut names = NAMES.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), NAMES.len());
        assert_eq!(crate::cost::LAUNCH_CYCLES, Work::default().cycles());
    }
}
