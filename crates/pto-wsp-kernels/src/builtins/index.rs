//! Row movement by an index tensor: what data-dependent workloads (MoE
//! token dispatch and combine, `docs/SEMANTICS.md` "Computed reads") need so that one task moves
//! a whole tile of rows, not one task per row.
//!
//! Promises: `gather_rows` and `scatter_add_rows` check every index against the rows it
//! addresses before writing anything (an index out of range is a [`KernelError::Message`]
//! naming the kernel, the position and the value); `bucket_by_index` lists rows in increasing
//! order, so its output is a pure function of its input. Float regions may be `f32`, `f16` or
//! `bf16` (computed in `f32`, rounded once on store); index regions are `i32` or `i64`.

use crate::context::TaskContext;
use crate::registry::KernelError;
use crate::tile::Scratch;
use pto_wsp_ir::{Access, DType};

/// The elements of integer region `i` (`i32` or `i64`) in row-major order.
fn indices(ctx: &TaskContext<'_>, kernel: &str, i: usize) -> Result<Vec<i64>, KernelError> {
    match ctx.info(i)?.dtype {
        DType::I32 => Ok(ctx
            .read::<i32>(i)?
            .to_vec()
            .into_iter()
            .map(i64::from)
            .collect()),
        DType::I64 => Ok(ctx.read::<i64>(i)?.to_vec()),
        other => Err(KernelError::shape(
            kernel,
            format!("region {i} (the indices) must be i32 or i64, not {other}"),
        )),
    }
}

/// Checks that every index is in `0..bound`.
fn in_range(kernel: &str, idx: &[i64], bound: usize, what: &str) -> Result<(), KernelError> {
    match idx.iter().position(|&v| v < 0 || v as u64 >= bound as u64) {
        Some(p) => Err(KernelError::Message(format!(
            "`{kernel}`: index {p} is {}, outside 0..{bound} ({what})",
            idx[p]
        ))),
        None => Ok(()),
    }
}

/// `gather_rows`: region 2 (written, `n × d`) row `r` = row `idx[r]` of region 0 (read,
/// `m × d`), where `idx` is region 1 (read, `n` integers in any shape).
pub fn gather_rows(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    const K: &str = "gather_rows";
    let src = ctx.read_float(0)?;
    let idx = indices(ctx, K, 1)?;
    let mut dst = ctx.write_float(2)?;
    if dst.rows() != idx.len() || dst.cols() != src.cols() {
        return Err(KernelError::shape(
            K,
            format!(
                "region 0 is {} × {}, region 1 holds {} indices, region 2 is {} × {}: region 2 \
                 needs one row per index and region 0's columns",
                src.rows(),
                src.cols(),
                idx.len(),
                dst.rows(),
                dst.cols()
            ),
        ));
    }
    in_range(K, &idx, src.rows(), "the rows of region 0")?;
    let mut bs = Scratch::take();
    for (r, &i) in idx.iter().enumerate() {
        dst.store_row(r, src.row(i as usize, &mut bs));
    }
    Ok(())
}

/// `scatter_add_rows`: row `idx[r]` of region 2 (`inout`, `m × d`) += row `r` of region 0
/// (read, `n × d`), where `idx` is region 1 (read, `n` integers in any shape). Rows that
/// repeat an index add up, in order.
pub fn scatter_add_rows(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    const K: &str = "scatter_add_rows";
    let src = ctx.read_float(0)?;
    let idx = indices(ctx, K, 1)?;
    if ctx.io(2)?.access() != Access::InOut {
        return Err(KernelError::Message(format!(
            "`{K}`: region 2 is updated, so it must be `inout`"
        )));
    }
    let mut dst = ctx.write_float(2)?;
    if src.rows() != idx.len() || dst.cols() != src.cols() {
        return Err(KernelError::shape(
            K,
            format!(
                "region 0 is {} × {}, region 1 holds {} indices, region 2 is {} × {}: one index \
                 per row of region 0, and the same columns",
                src.rows(),
                src.cols(),
                idx.len(),
                dst.rows(),
                dst.cols()
            ),
        ));
    }
    in_range(K, &idx, dst.rows(), "the rows of region 2")?;
    let (mut bs, mut bd) = (Scratch::take(), Scratch::take());
    for (r, &i) in idx.iter().enumerate() {
        let x = src.row(r, &mut bs);
        dst.update_row(i as usize, &mut bd, true, |o| {
            for (o, &x) in o.iter_mut().zip(x) {
                *o += x;
            }
        });
    }
    Ok(())
}

/// `bucket_by_index`: region 0 (read, `t × k` integers) assigns row `r` to the buckets
/// `idx[r][0..k]`; region 1 (written, `b` integers) receives each bucket's count and region 2
/// (written, `b × t` integers) each bucket's rows in increasing order (a row listed once per
/// occurrence), the rest of each row left at -1. Bucket numbers must be in `0..b`.
pub fn bucket_by_index(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    const K: &str = "bucket_by_index";
    let io0 = ctx.io(0)?;
    let rank = io0.region.rank as usize;
    let t = if rank >= 2 {
        io0.region.size[..rank - 1]
            .iter()
            .map(|&s| s as usize)
            .product()
    } else {
        1
    };
    let idx = indices(ctx, K, 0)?;
    let k = idx.len().checked_div(t).unwrap_or(0);
    let counts_len = ctx.io(1)?.region.size[..ctx.io(1)?.region.rank as usize]
        .iter()
        .map(|&s| s as usize)
        .product::<usize>();
    let io2 = ctx.io(2)?;
    let r2 = io2.region.rank as usize;
    let cols2 = if r2 == 0 {
        1
    } else {
        io2.region.size[r2 - 1] as usize
    };
    let buckets = counts_len;
    let lists_len: usize = io2.region.size[..r2].iter().map(|&s| s as usize).product();
    if lists_len != buckets * cols2 {
        return Err(KernelError::shape(
            K,
            format!(
                "{t} rows of {k} bucket numbers, {buckets} buckets: region 2 must have one row \
                 per bucket, it has {lists_len} elements in rows of {cols2}"
            ),
        ));
    }
    in_range(K, &idx, buckets, "the buckets (region 1's length)")?;
    let mut counts = vec![0i64; buckets];
    let mut lists = vec![-1i64; buckets * cols2];
    for (p, &b) in idx.iter().enumerate() {
        let b = b as usize;
        let c = counts[b] as usize;
        if c < cols2 {
            lists[b * cols2 + c] = (p / k.max(1)) as i64;
        }
        counts[b] += 1;
    }
    if let Some(b) = counts.iter().position(|&c| c as usize > cols2) {
        return Err(KernelError::Message(format!(
            "`{K}`: bucket {b} receives {} rows, more than region 2's {cols2} columns",
            counts[b]
        )));
    }
    store_ints(ctx, K, 1, &counts)?;
    store_ints(ctx, K, 2, &lists)
}

/// Writes `v` (row-major) into integer region `i` (`i32` or `i64`).
fn store_ints(ctx: &TaskContext<'_>, kernel: &str, i: usize, v: &[i64]) -> Result<(), KernelError> {
    match ctx.info(i)?.dtype {
        DType::I32 => {
            let mut w = ctx.write::<i32>(i)?;
            let cols = w.cols();
            for r in 0..w.rows() {
                for (o, &x) in w.row_mut(r).iter_mut().zip(&v[r * cols..]) {
                    *o = i32::try_from(x).map_err(|_| {
                        KernelError::Message(format!(
                            "`{kernel}`: {x} does not fit region {i}'s i32"
                        ))
                    })?;
                }
            }
            Ok(())
        }
        DType::I64 => {
            let mut w = ctx.write::<i64>(i)?;
            let cols = w.cols();
            for r in 0..w.rows() {
                w.row_mut(r).copy_from_slice(&v[r * cols..(r + 1) * cols]);
            }
            Ok(())
        }
        other => Err(KernelError::shape(
            kernel,
            format!("region {i} must be i32 or i64, not {other}"),
        )),
    }
}
