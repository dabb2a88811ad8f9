//! `topk`: the indices (and optionally values) of the `k` largest elements of each row.
//!
//! Why: MoE routing picks each token's experts by their gate scores; sampling picks candidate
//! tokens. Both need a deterministic answer when scores tie.
//!
//! Promises: per row, indices in order of decreasing value; equal values come in increasing
//! index order (a stable order: the result is a pure function of the row). Values compare as
//! numbers (`-0` equals `+0`); NaN ranks below every number, `-inf` included. Selection is
//! linear in the row length plus `k log k` for the final sort.

use super::Dims;
use crate::context::TaskContext;
use crate::registry::KernelError;
use crate::store::Element;
use crate::tile::Scratch;
use pto_wsp_ir::DType;
use std::cmp::Ordering;

/// Order of two elements `(value, index)`: larger value first, then smaller index; NaN last.
#[inline]
fn order(x: &[f32], a: u32, b: u32) -> Ordering {
    let (va, vb) = (x[a as usize], x[b as usize]);
    let rank = |v: f32| (!v.is_nan()).then_some(v);
    match rank(vb).partial_cmp(&rank(va)) {
        Some(Ordering::Equal) | None => a.cmp(&b),
        Some(o) => o,
    }
}

/// `topk`: for each row of region 0 (read, `rows × n`, float), region 1 (written, `rows × k`,
/// an integer tensor: `i32`, `u32`, `i64`, `u64` or `u8`) receives the column indices of its
/// `k` largest elements, largest first, ties by smaller index; optional region 2 (written,
/// `rows × k`, float) receives their values.
pub fn topk(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    const K: &str = "topk";
    if ctx.num_regions() > 3 {
        return Err(KernelError::shape(
            K,
            format!(
                "the task has {} regions; the kernel takes 2 or 3",
                ctx.num_regions()
            ),
        ));
    }
    let x = ctx.read_float(0)?;
    let (rows, n) = (x.rows(), x.cols());
    let dx = Dims::new(0, rows, n);
    let idx_dtype = ctx.info(1)?.dtype;
    let max_index = match idx_dtype {
        DType::U8 => u8::MAX as u64,
        DType::I32 => i32::MAX as u64,
        DType::U32 => u32::MAX as u64,
        DType::I64 => i64::MAX as u64,
        DType::U64 => u64::MAX,
        DType::F32 | DType::F16 | DType::Bf16 => {
            return Err(KernelError::shape(
                K,
                format!("region 1 (the indices) must be an integer tensor, not {idx_dtype}"),
            ));
        }
    };
    let mut out = IndexOut::new(ctx, idx_dtype)?;
    let (ri, k) = out.dims();
    let di = Dims::new(1, ri, k);
    if ri != rows || k > n {
        return Err(KernelError::shape(
            K,
            format!(
                "{dx} but {di}: the indices need one row per input row and at most {n} columns"
            ),
        ));
    }
    if (n as u64).saturating_sub(1) > max_index {
        return Err(KernelError::shape(
            K,
            format!(
                "{dx}: column indices up to {} do not fit {idx_dtype}",
                n - 1
            ),
        ));
    }
    let mut values = match ctx.num_regions() {
        3 => {
            let v = ctx.write_float(2)?;
            if (v.rows(), v.cols()) != (rows, k) {
                return Err(KernelError::shape(
                    K,
                    format!(
                        "{} but {di}: the values must be shaped like the indices",
                        Dims::new(2, v.rows(), v.cols())
                    ),
                ));
            }
            Some(v)
        }
        _ => None,
    };
    let (mut bx, mut bv) = (Scratch::take(), Scratch::take());
    let mut order_buf: Vec<u32> = Vec::with_capacity(n);
    for r in 0..rows {
        let row = x.row(r, &mut bx);
        order_buf.clear();
        order_buf.extend(0..n as u32);
        if k < n && k > 0 {
            order_buf.select_nth_unstable_by(k - 1, |&a, &b| order(row, a, b));
        }
        let top = &mut order_buf[..k];
        top.sort_unstable_by(|&a, &b| order(row, a, b));
        out.store_row(r, top);
        if let Some(v) = &mut values {
            let vals = bv.slice(k);
            for (o, &i) in vals.iter_mut().zip(top.iter()) {
                *o = row[i as usize];
            }
            v.store_row(r, vals);
        }
    }
    Ok(())
}

/// The index output, whichever integer type it holds.
enum IndexOut<'v> {
    U8(crate::WriteView<'v, u8>),
    I32(crate::WriteView<'v, i32>),
    U32(crate::WriteView<'v, u32>),
    I64(crate::WriteView<'v, i64>),
    U64(crate::WriteView<'v, u64>),
}

impl<'v> IndexOut<'v> {
    fn new(ctx: &'v TaskContext<'_>, dtype: DType) -> Result<IndexOut<'v>, KernelError> {
        Ok(match dtype {
            DType::U8 => IndexOut::U8(ctx.write(1)?),
            DType::I32 => IndexOut::I32(ctx.write(1)?),
            DType::U32 => IndexOut::U32(ctx.write(1)?),
            DType::I64 => IndexOut::I64(ctx.write(1)?),
            _ => IndexOut::U64(ctx.write(1)?),
        })
    }

    fn dims(&self) -> (usize, usize) {
        match self {
            IndexOut::U8(v) => (v.rows(), v.cols()),
            IndexOut::I32(v) => (v.rows(), v.cols()),
            IndexOut::U32(v) => (v.rows(), v.cols()),
            IndexOut::I64(v) => (v.rows(), v.cols()),
            IndexOut::U64(v) => (v.rows(), v.cols()),
        }
    }

    /// Stores `idx` (checked to fit the type when the shapes were checked) into row `r`.
    fn store_row(&mut self, r: usize, idx: &[u32]) {
        fn put<T: Element>(row: &mut [T], idx: &[u32], f: impl Fn(u32) -> T) {
            for (o, &i) in row.iter_mut().zip(idx) {
                *o = f(i);
            }
        }
        match self {
            IndexOut::U8(v) => put(v.row_mut(r), idx, |i| i as u8),
            IndexOut::I32(v) => put(v.row_mut(r), idx, |i| i as i32),
            IndexOut::U32(v) => put(v.row_mut(r), idx, |i| i),
            IndexOut::I64(v) => put(v.row_mut(r), idx, i64::from),
            IndexOut::U64(v) => put(v.row_mut(r), idx, u64::from),
        }
    }
}
