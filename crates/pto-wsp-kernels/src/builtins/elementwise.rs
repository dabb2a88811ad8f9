//! Elementwise kernels: fill, copy, scale, accumulate, the binary arithmetic operations with
//! their row- and column-broadcast forms, and the activations.
//!
//! Why: the glue of every layer (residual adds, bias adds, gating, activations) and the
//! engine's own test kernels.
//!
//! Promises: one `f32` operation per element on values loaded exactly from each region's float
//! type, rounded once into the output's type — so on `f32` regions results are bit-exact
//! against a naive `f32` loop (the activations use the formulas of `docs/KERNELS.md`). Checks:
//! matching rows × cols for elementwise operands, the broadcast vector's length, `inout` for
//! the kernels that update a region.

use super::{Dims, need_inout, same_shape, vector_len};
use crate::context::TaskContext;
use crate::registry::KernelError;
use crate::store::Element;
use crate::tile::{FloatRead, FloatWrite, Scratch};
use pto_wsp_ir::DType;

fn dims_r(i: usize, v: &FloatRead<'_>) -> Dims {
    Dims::new(i, v.rows(), v.cols())
}

fn dims_w(i: usize, v: &FloatWrite<'_>) -> Dims {
    Dims::new(i, v.rows(), v.cols())
}

/// `empty`: does nothing.
pub fn empty(_ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    Ok(())
}

/// `fill`: every element of region 0 (written) becomes param 0, an `f64` rounded to the
/// region's type.
pub fn fill(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    let v = ctx.param_f32(0)?;
    ctx.write_float(0)?.fill(v);
    Ok(())
}

/// `copy`: region 1 (written) = region 0 (read), of the same rows × cols. Between float types
/// it converts; between tensors of the same element type (integers included) it copies bits.
pub fn copy(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    let (s, d) = (ctx.info(0)?.dtype, ctx.info(1)?.dtype);
    if s == d {
        return match s {
            DType::F32 => copy_same::<f32>(ctx),
            DType::F16 | DType::Bf16 => copy_same::<u16>(ctx),
            DType::I32 => copy_same::<i32>(ctx),
            DType::U32 => copy_same::<u32>(ctx),
            DType::I64 => copy_same::<i64>(ctx),
            DType::U64 => copy_same::<u64>(ctx),
            DType::U8 => copy_same::<u8>(ctx),
        };
    }
    let src = ctx.read_float(0)?;
    let mut dst = ctx.write_float(1)?;
    same_shape("copy", dims_r(0, &src), dims_w(1, &dst))?;
    let mut buf = Scratch::take();
    for r in 0..src.rows() {
        dst.store_row(r, src.row(r, &mut buf));
    }
    Ok(())
}

fn copy_same<T: Element>(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    let src = ctx.read::<T>(0)?;
    let mut dst = ctx.write::<T>(1)?;
    same_shape(
        "copy",
        Dims::new(0, src.rows(), src.cols()),
        Dims::new(1, dst.rows(), dst.cols()),
    )?;
    for r in 0..src.rows() {
        dst.row_mut(r).copy_from_slice(src.row(r));
    }
    Ok(())
}

/// `scale`: region 1 (written) = region 0 (read) × param 0 (an `f64` rounded to `f32` first).
pub fn scale(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    let s = ctx.param_f32(0)?;
    unary_with(ctx, "scale", |x| x * s)
}

/// `add_scalar`: region 1 (written) = region 0 (read) + param 0 (an `f64` rounded to `f32`
/// first).
pub fn add_scalar(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    let c = ctx.param_f32(0)?;
    unary_with(ctx, "add_scalar", |x| x + c)
}

/// `accumulate`: region 1 (`inout`) += region 0 (read), of the same rows × cols.
pub fn accumulate(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    let src = ctx.read_float(0)?;
    need_inout(ctx, "accumulate", 1)?;
    let mut acc = ctx.write_float(1)?;
    same_shape("accumulate", dims_r(0, &src), dims_w(1, &acc))?;
    let (mut bs, mut ba) = (Scratch::take(), Scratch::take());
    for r in 0..src.rows() {
        let x = src.row(r, &mut bs);
        acc.update_row(r, &mut ba, true, |o| {
            for (o, &x) in o.iter_mut().zip(x) {
                *o += x;
            }
        });
    }
    Ok(())
}

/// `counter`: adds 1 to every element of region 0 (`inout`).
pub fn counter(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    need_inout(ctx, "counter", 0)?;
    let mut acc = ctx.write_float(0)?;
    let mut buf = Scratch::take();
    for r in 0..acc.rows() {
        acc.update_row(r, &mut buf, true, |o| {
            for o in o {
                *o += 1.0;
            }
        });
    }
    Ok(())
}

/// Region 2 = op(region 0, region 1), elementwise, all of the same rows × cols.
fn binary(
    ctx: &TaskContext<'_>,
    kernel: &str,
    op: impl Fn(f32, f32) -> f32,
) -> Result<(), KernelError> {
    let a = ctx.read_float(0)?;
    let b = ctx.read_float(1)?;
    let mut out = ctx.write_float(2)?;
    same_shape(kernel, dims_r(0, &a), dims_w(2, &out))?;
    same_shape(kernel, dims_r(1, &b), dims_w(2, &out))?;
    let (mut ba, mut bb, mut bo) = (Scratch::take(), Scratch::take(), Scratch::take());
    for r in 0..a.rows() {
        let (x, y) = (a.row(r, &mut ba), b.row(r, &mut bb));
        out.update_row(r, &mut bo, false, |o| {
            for ((o, &x), &y) in o.iter_mut().zip(x).zip(y) {
                *o = op(x, y);
            }
        });
    }
    Ok(())
}

/// Which way a vector operand is broadcast.
#[derive(Clone, Copy)]
enum Along {
    /// The vector has `cols` elements and is added to every row: `out[r][c] = a[r][c] ∘ b[c]`.
    Row,
    /// The vector has `rows` elements, one per row: `out[r][c] = a[r][c] ∘ b[r]`.
    Col,
}

/// Region 2 = op(region 0, region 1 broadcast `along`).
fn broadcast(
    ctx: &TaskContext<'_>,
    kernel: &str,
    along: Along,
    op: impl Fn(f32, f32) -> f32,
) -> Result<(), KernelError> {
    let a = ctx.read_float(0)?;
    let b = ctx.read_float(1)?;
    let mut out = ctx.write_float(2)?;
    same_shape(kernel, dims_r(0, &a), dims_w(2, &out))?;
    let (n, what) = match along {
        Along::Row => (a.cols(), "one per column of region 0"),
        Along::Col => (a.rows(), "one per row of region 0"),
    };
    vector_len(kernel, dims_r(1, &b), n, what)?;
    let (mut ba, mut bv, mut bo) = (Scratch::take(), Scratch::take(), Scratch::take());
    b.load_all(&mut bv);
    for r in 0..a.rows() {
        let x = a.row(r, &mut ba);
        let bv = &bv[..];
        out.update_row(r, &mut bo, false, |o| match along {
            Along::Row => {
                for ((o, &x), &y) in o.iter_mut().zip(x).zip(bv) {
                    *o = op(x, y);
                }
            }
            Along::Col => {
                let y = bv[r];
                for (o, &x) in o.iter_mut().zip(x) {
                    *o = op(x, y);
                }
            }
        });
    }
    Ok(())
}

/// Region 1 = op(region 0), elementwise, of the same rows × cols.
fn unary_with(
    ctx: &TaskContext<'_>,
    kernel: &str,
    op: impl Fn(f32) -> f32,
) -> Result<(), KernelError> {
    let src = ctx.read_float(0)?;
    let mut dst = ctx.write_float(1)?;
    same_shape(kernel, dims_r(0, &src), dims_w(1, &dst))?;
    let (mut bs, mut bd) = (Scratch::take(), Scratch::take());
    for r in 0..src.rows() {
        let x = src.row(r, &mut bs);
        dst.update_row(r, &mut bd, false, |o| {
            for (o, &x) in o.iter_mut().zip(x) {
                *o = op(x);
            }
        });
    }
    Ok(())
}

/// Defines elementwise binary kernels and their broadcast forms.
macro_rules! binary_kernels {
    ($($name:ident, $row:ident, $col:ident, $text:literal, |$x:ident, $y:ident| $e:expr;)*) => {$(
        #[doc = concat!("`", stringify!($name), "`: region 2 (written) = ", $text,
            " of regions 0 and 1 (read), elementwise, all of the same rows × cols.")]
        pub fn $name(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
            binary(ctx, stringify!($name), |$x, $y| $e)
        }

        #[doc = concat!("`", stringify!($row), "`: region 2 (written) = ", $text,
            " of region 0 and the vector of region 1 (one value per column of region 0), ",
            "broadcast along the rows.")]
        pub fn $row(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
            broadcast(ctx, stringify!($row), Along::Row, |$x, $y| $e)
        }

        #[doc = concat!("`", stringify!($col), "`: region 2 (written) = ", $text,
            " of region 0 and the vector of region 1 (one value per row of region 0), ",
            "broadcast along the columns.")]
        pub fn $col(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
            broadcast(ctx, stringify!($col), Along::Col, |$x, $y| $e)
        }
    )*};
}

binary_kernels! {
    add, add_row, add_col, "the sum", |x, y| x + y;
    sub, sub_row, sub_col, "the difference (0 minus 1)", |x, y| x - y;
    mul, mul_row, mul_col, "the product", |x, y| x * y;
    div, div_row, div_col, "the quotient (0 over 1)", |x, y| x / y;
    max, max_row, max_col, "the larger (`f32::max`: a NaN loses)", |x, y| x.max(y);
    min, min_row, min_col, "the smaller (`f32::min`: a NaN loses)", |x, y| x.min(y);
}

/// Defines unary kernels.
macro_rules! unary_kernels {
    ($($name:ident, $text:literal, |$x:ident| $e:expr;)*) => {$(
        #[doc = concat!("`", stringify!($name), "`: region 1 (written) = ", $text,
            " of region 0 (read), elementwise, of the same rows × cols.")]
        pub fn $name(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
            unary_with(ctx, stringify!($name), |$x| $e)
        }
    )*};
}

/// `√(2/π)`, the GELU tanh approximation's scale.
const GELU_K: f32 = 0.797_884_6;

unary_kernels! {
    exp, "`e^x`", |x| x.exp();
    rsqrt, "`1 / √x`", |x| 1.0 / x.sqrt();
    relu, "`max(x, 0)` (NaN stays NaN)", |x| if x < 0.0 { 0.0 } else { x };
    silu, "`x · σ(x) = x / (1 + e^-x)`", |x| x / (1.0 + (-x).exp());
    gelu, "the tanh approximation `x/2 · (1 + tanh(√(2/π)(x + 0.044715 x³)))`, computed as \
        `x · σ(2u)` with `u` the tanh argument", |x| {
        let u = GELU_K * (x + 0.044_715 * x * x * x);
        x / (1.0 + (-2.0 * u).exp())
    };
}

/// `swiglu`: region 2 (written) = `silu(region 0) · region 1` (gate and up projections, read),
/// elementwise, all of the same rows × cols.
pub fn swiglu(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    binary(ctx, "swiglu", |g, u| g / (1.0 + (-g).exp()) * u)
}
