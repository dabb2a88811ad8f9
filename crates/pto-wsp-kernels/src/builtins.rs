//! The built-in kernels: small, real kernels on `f32` regions for tests, examples and benchmarks.
//!
//! Why: an engine must be checked on tasks that really read and write memory, with results that
//! a naive loop reproduces exactly, before any device kernel exists.
//!
//! Promises: every kernel works elementwise over its regions seen as rows × cols (see
//! [`crate::context`]), on `f32` tensors only (any other element type is a
//! [`KernelError::View`]); regions that must match must have the same rows and cols (else
//! [`KernelError::Shape`]). Arithmetic is plain `f32`, one operation per element, so results are
//! bit-exact against a naive loop. Each kernel's cost is `1 + elements read + elements written`.
//!
//! | name | regions | effect |
//! |---|---|---|
//! | `empty` | any | nothing |
//! | `fill` | 0 out | every element = param 0 (`f64` bits, rounded to `f32`) |
//! | `copy` | 0 in, 1 out | region 1 = region 0 |
//! | `add` | 0 in, 1 in, 2 out | region 2 = region 0 + region 1 |
//! | `scale` | 0 in, 1 out | region 1 = region 0 × param 0 (`f64` bits, rounded to `f32` first) |
//! | `accumulate` | 0 in, 1 inout | region 1 += region 0 |
//! | `counter` | 0 inout | region 0 += 1 |

use crate::context::{ReadView, TaskContext, WriteView};
use crate::registry::{KernelError, KernelRegistry, region_elements};

/// Names of the built-in kernels, in registration order.
pub const NAMES: &[&str] = &[
    "empty",
    "fill",
    "copy",
    "add",
    "scale",
    "accumulate",
    "counter",
];

/// Registers every built-in kernel with its cost function.
pub(crate) fn register_all(r: &mut KernelRegistry) {
    type Kernel = fn(&TaskContext<'_>) -> Result<(), KernelError>;
    // (name, kernel, elements read and written per output element, index of the output region).
    let table: [(&str, Kernel, u64, usize); 7] = [
        ("empty", empty, 0, 0),
        ("fill", fill, 1, 0),
        ("copy", copy, 2, 1),
        ("add", add, 3, 2),
        ("scale", scale, 2, 1),
        ("accumulate", accumulate, 3, 1),
        ("counter", counter, 2, 0),
    ];
    for (name, kernel, per_element, out) in table {
        r.register(name, kernel);
        r.set_cost(name, move |ctx| {
            let n = ctx.io(out).map(region_elements).unwrap_or(0);
            1 + per_element * n
        });
    }
}

/// `empty`: does nothing.
pub fn empty(_ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    Ok(())
}

/// `fill`: every element of region 0 (written) becomes param 0, an `f64` rounded to `f32`.
pub fn fill(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    let v = ctx.param_f32(0)?;
    ctx.write::<f32>(0)?.fill(v);
    Ok(())
}

/// `copy`: region 1 (written) = region 0 (read), of the same rows × cols.
pub fn copy(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    let src = ctx.read::<f32>(0)?;
    let mut dst = ctx.write::<f32>(1)?;
    same_shape("copy", (0, &src), (1, &dst))?;
    for r in 0..src.rows() {
        dst.row_mut(r).copy_from_slice(src.row(r));
    }
    Ok(())
}

/// `add`: region 2 (written) = region 0 + region 1 (read), all of the same rows × cols.
pub fn add(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    let a = ctx.read::<f32>(0)?;
    let b = ctx.read::<f32>(1)?;
    let mut out = ctx.write::<f32>(2)?;
    same_shape("add", (0, &a), (2, &out))?;
    same_shape("add", (1, &b), (2, &out))?;
    for r in 0..a.rows() {
        let (x, y) = (a.row(r), b.row(r));
        for ((o, &x), &y) in out.row_mut(r).iter_mut().zip(x).zip(y) {
            *o = x + y;
        }
    }
    Ok(())
}

/// `scale`: region 1 (written) = region 0 (read) × param 0 (an `f64` rounded to `f32`).
pub fn scale(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    let s = ctx.param_f32(0)?;
    let src = ctx.read::<f32>(0)?;
    let mut dst = ctx.write::<f32>(1)?;
    same_shape("scale", (0, &src), (1, &dst))?;
    for r in 0..src.rows() {
        for (o, &x) in dst.row_mut(r).iter_mut().zip(src.row(r)) {
            *o = x * s;
        }
    }
    Ok(())
}

/// `accumulate`: region 1 (read and written) += region 0 (read), of the same rows × cols.
pub fn accumulate(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    let src = ctx.read::<f32>(0)?;
    let mut acc = ctx.write::<f32>(1)?;
    same_shape("accumulate", (0, &src), (1, &acc))?;
    for r in 0..src.rows() {
        for (o, &x) in acc.row_mut(r).iter_mut().zip(src.row(r)) {
            *o += x;
        }
    }
    Ok(())
}

/// `counter`: adds 1 to every element of region 0 (read and written).
pub fn counter(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    let mut acc = ctx.write::<f32>(0)?;
    for r in 0..acc.rows() {
        for o in acc.row_mut(r) {
            *o += 1.0;
        }
    }
    Ok(())
}

/// Checks that an input view and an output view have the same rows × cols.
fn same_shape(
    kernel: &str,
    (i, a): (usize, &ReadView<'_, f32>),
    (o, b): (usize, &WriteView<'_, f32>),
) -> Result<(), KernelError> {
    if (a.rows(), a.cols()) == (b.rows(), b.cols()) {
        return Ok(());
    }
    Err(KernelError::Shape {
        kernel: kernel.into(),
        message: format!(
            "region {i} is {} x {} but region {o} is {} x {} (rows x cols)",
            a.rows(),
            a.cols(),
            b.rows(),
            b.cols()
        ),
    })
}
