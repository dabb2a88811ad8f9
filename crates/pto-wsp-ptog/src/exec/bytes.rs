//! A region's bytes, whatever its element type: what memory operations (`MC_COPY`), condition
//! reads and workload nodes move.
//!
//! Why: the tensor store hands out typed views only, so that a kernel cannot read `f32` bits as
//! `u32` by mistake; the ISA's memory operations are byte copies. These helpers take the view of
//! the region's own type and move its rows as bytes, through the same checked context as every
//! kernel (so a copy is refused, like a kernel, when it would race with one).

use pto_wsp_ir::DType;
use pto_wsp_kernels::{Element, KernelError, TaskContext, WriteView};

fn gather_as<T: Element>(ctx: &TaskContext<'_>, i: usize) -> Result<Vec<u8>, KernelError> {
    let v = ctx.read::<T>(i)?;
    let mut out = Vec::with_capacity(v.elements() * std::mem::size_of::<T>());
    for r in 0..v.rows() {
        out.extend_from_slice(bytemuck::cast_slice(v.row(r)));
    }
    Ok(out)
}

fn scatter_as<T: Element>(
    ctx: &TaskContext<'_>,
    i: usize,
    bytes: &[u8],
) -> Result<(), KernelError> {
    view_store(&mut ctx.write::<T>(i)?, bytes)
}

/// The bytes of region `i`, row after row.
pub(crate) fn gather(ctx: &TaskContext<'_>, i: usize) -> Result<Vec<u8>, KernelError> {
    match ctx.info(i)?.dtype {
        DType::F32 => gather_as::<f32>(ctx, i),
        DType::F16 | DType::Bf16 => gather_as::<u16>(ctx, i),
        DType::I32 => gather_as::<i32>(ctx, i),
        DType::U32 => gather_as::<u32>(ctx, i),
        DType::I64 => gather_as::<i64>(ctx, i),
        DType::U64 => gather_as::<u64>(ctx, i),
        DType::U8 => gather_as::<u8>(ctx, i),
    }
}

/// Writes `bytes` into region `i` (which must be `out` or `inout` and hold as many bytes).
pub(crate) fn scatter(ctx: &TaskContext<'_>, i: usize, bytes: &[u8]) -> Result<(), KernelError> {
    match ctx.info(i)?.dtype {
        DType::F32 => scatter_as::<f32>(ctx, i, bytes),
        DType::F16 | DType::Bf16 => scatter_as::<u16>(ctx, i, bytes),
        DType::I32 => scatter_as::<i32>(ctx, i, bytes),
        DType::U32 => scatter_as::<u32>(ctx, i, bytes),
        DType::I64 => scatter_as::<i64>(ctx, i, bytes),
        DType::U64 => scatter_as::<u64>(ctx, i, bytes),
        DType::U8 => scatter_as::<u8>(ctx, i, bytes),
    }
}

/// A write view of one region of any element type, whose bytes can be read and replaced (a
/// region both read and written, such as a workload node's `inout` argument, is viewed once).
pub(crate) enum AnyWrite<'v> {
    F32(WriteView<'v, f32>),
    U16(WriteView<'v, u16>),
    I32(WriteView<'v, i32>),
    U32(WriteView<'v, u32>),
    I64(WriteView<'v, i64>),
    U64(WriteView<'v, u64>),
    U8(WriteView<'v, u8>),
}

macro_rules! any_write {
    ($self:expr, $v:ident => $e:expr) => {
        match $self {
            AnyWrite::F32($v) => $e,
            AnyWrite::U16($v) => $e,
            AnyWrite::I32($v) => $e,
            AnyWrite::U32($v) => $e,
            AnyWrite::I64($v) => $e,
            AnyWrite::U64($v) => $e,
            AnyWrite::U8($v) => $e,
        }
    };
}

fn view_bytes<T: Element>(v: &WriteView<'_, T>) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.elements() * std::mem::size_of::<T>());
    for r in 0..v.rows() {
        out.extend_from_slice(bytemuck::cast_slice(v.row(r)));
    }
    out
}

fn view_store<T: Element>(v: &mut WriteView<'_, T>, bytes: &[u8]) -> Result<(), KernelError> {
    let row = v.cols() * std::mem::size_of::<T>();
    if row * v.rows() != bytes.len() {
        return Err(KernelError::Message(format!(
            "the region holds {} bytes, {} were given",
            row * v.rows(),
            bytes.len()
        )));
    }
    for r in 0..v.rows() {
        bytemuck::cast_slice_mut::<T, u8>(v.row_mut(r)).copy_from_slice(&bytes[r * row..][..row]);
    }
    Ok(())
}

impl<'v> AnyWrite<'v> {
    /// The write view of region `i` (`out` or `inout`).
    pub(crate) fn of(ctx: &'v TaskContext<'_>, i: usize) -> Result<AnyWrite<'v>, KernelError> {
        Ok(match ctx.info(i)?.dtype {
            DType::F32 => AnyWrite::F32(ctx.write(i)?),
            DType::F16 | DType::Bf16 => AnyWrite::U16(ctx.write(i)?),
            DType::I32 => AnyWrite::I32(ctx.write(i)?),
            DType::U32 => AnyWrite::U32(ctx.write(i)?),
            DType::I64 => AnyWrite::I64(ctx.write(i)?),
            DType::U64 => AnyWrite::U64(ctx.write(i)?),
            DType::U8 => AnyWrite::U8(ctx.write(i)?),
        })
    }

    /// The region's bytes, row after row.
    pub(crate) fn bytes(&self) -> Vec<u8> {
        any_write!(self, v => view_bytes(v))
    }

    /// Replaces the region's bytes.
    pub(crate) fn store(&mut self, bytes: &[u8]) -> Result<(), KernelError> {
        any_write!(self, v => view_store(v, bytes))
    }
}

/// The value of one element, as a condition and as a count.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct ScalarValue {
    /// Whether it is non-zero (a float's sign bit ignored: `-0.0` is zero).
    pub(crate) nonzero: bool,
    /// Its integer value (integers only; floats give `None`).
    pub(crate) int: Option<i128>,
}

/// Decodes one element of `dtype` from its little-endian bytes.
pub(crate) fn scalar(dtype: DType, b: &[u8]) -> ScalarValue {
    let mut a = [0u8; 8];
    let n = b.len().min(8);
    a[..n].copy_from_slice(&b[..n]);
    let raw = u64::from_le_bytes(a);
    let int = match dtype {
        DType::U8 => Some(raw as u8 as i128),
        DType::I32 => Some(raw as u32 as i32 as i128),
        DType::U32 => Some(raw as u32 as i128),
        DType::I64 => Some(raw as i64 as i128),
        DType::U64 => Some(raw as i128),
        DType::F32 | DType::F16 | DType::Bf16 => None,
    };
    let nonzero = match dtype {
        DType::F32 => raw as u32 & 0x7FFF_FFFF != 0,
        DType::F16 | DType::Bf16 => raw as u16 & 0x7FFF != 0,
        _ => raw != 0,
    };
    ScalarValue { nonzero, int }
}
