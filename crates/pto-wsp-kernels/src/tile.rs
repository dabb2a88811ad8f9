//! Float tiles of any storage type, computed on in `f32`.
//!
//! Why: kernels compute in `f32` whatever a tensor stores (`f32`, `f16` or `bf16`), and a task's
//! regions may each have their own float type (an `f16` input, an `f32` accumulator, a `bf16`
//! output). Writing every kernel three times per operand would be absurd; converting a row at a
//! time into a small `f32` buffer is cheap next to the arithmetic.
//!
//! Promises:
//! - [`TaskContext::read_float`] and [`TaskContext::write_float`] view a region of a float
//!   tensor, whichever of the three types it holds, with the checks of
//!   [`TaskContext::read`] / [`TaskContext::write`]. Any other element type is a
//!   [`KernelError::View`] with [`ViewProblem::DType`] whose `element` reads `"f32, f16 or
//!   bf16"`.
//! - Loading converts exactly (every `f16` and `bf16` value is an `f32` value); storing rounds
//!   each `f32` once to the nearest value of the storage type (ties to even), with overflow to
//!   infinity, as [`half`] does. An `f32` row is lent as it is, with no copy.
//! - [`Scratch`] buffers come from a small per-thread pool, so a kernel running on a worker
//!   thread allocates only the first few times.

use crate::context::{ReadView, TaskContext, ViewProblem, WriteView};
use crate::registry::KernelError;
use crate::store::Element;
use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};
use pto_wsp_ir::DType;
use std::cell::RefCell;
use std::ops::{Deref, DerefMut};

/// What [`ViewProblem::DType`] names as the element type asked for by the float views.
pub const FLOAT_TYPES: &str = "f32, f16 or bf16";

/// Keeps [`Float`] to the three types this crate implements it for: SIMD loads trust
/// [`Float::DTYPE`] to say what `Self` is.
mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
}

/// A float storage type: `f32`, [`half::f16`] or [`half::bf16`], converted to and from `f32`. Sealed: no
/// other type implements it.
pub trait Float: Element + sealed::Sealed {
    /// The tensor element type this Rust type stores.
    const DTYPE: DType;
    /// Unit roundoff of the type: half the distance from 1 to the next value (`2^-24` for
    /// `f32`, `2^-11` for `f16`, `2^-8` for `bf16`). Storing an `f32` into this type changes it
    /// by at most this much, relatively (when in range).
    const UNIT_ROUNDOFF: f64;
    /// The value as `f32` (exact).
    fn to_f32(self) -> f32;
    /// The nearest value to `x` (ties to even).
    fn from_f32(x: f32) -> Self;
    /// Converts `src` into `dst` (same length) to `f32`.
    fn load(src: &[Self], dst: &mut [f32]);
    /// Converts `src` into `dst` (same length), rounding each value.
    fn store(src: &[f32], dst: &mut [Self]);
}

impl Float for f32 {
    const DTYPE: DType = DType::F32;
    const UNIT_ROUNDOFF: f64 = 1.0 / (1u64 << 24) as f64;
    #[inline]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline]
    fn from_f32(x: f32) -> f32 {
        x
    }
    #[inline]
    fn load(src: &[f32], dst: &mut [f32]) {
        dst.copy_from_slice(src);
    }
    #[inline]
    fn store(src: &[f32], dst: &mut [f32]) {
        dst.copy_from_slice(src);
    }
}

impl Float for f16 {
    const DTYPE: DType = DType::F16;
    const UNIT_ROUNDOFF: f64 = 1.0 / (1u64 << 11) as f64;
    #[inline]
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
    #[inline]
    fn from_f32(x: f32) -> f16 {
        f16::from_f32(x)
    }
    #[inline]
    fn load(src: &[f16], dst: &mut [f32]) {
        src.convert_to_f32_slice(dst);
    }
    #[inline]
    fn store(src: &[f32], dst: &mut [f16]) {
        dst.convert_from_f32_slice(src);
    }
}

impl Float for bf16 {
    const DTYPE: DType = DType::Bf16;
    const UNIT_ROUNDOFF: f64 = 1.0 / (1u64 << 8) as f64;
    #[inline]
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
    #[inline]
    fn from_f32(x: f32) -> bf16 {
        bf16::from_f32(x)
    }
    #[inline]
    fn load(src: &[bf16], dst: &mut [f32]) {
        src.convert_to_f32_slice(dst);
    }
    #[inline]
    fn store(src: &[f32], dst: &mut [bf16]) {
        dst.convert_from_f32_slice(src);
    }
}

/// Calls `$body` with `$v` bound to the inner view of a float view enum, whatever its type.
macro_rules! each_float {
    ($e:expr, $enum:ident, $v:ident => $body:expr) => {
        match $e {
            $enum::F32($v) => $body,
            $enum::F16($v) => $body,
            $enum::Bf16($v) => $body,
        }
    };
}

/// A read view of a float region of any storage type (see the [module docs](self)).
pub enum FloatRead<'v> {
    /// An `f32` tensor's region.
    F32(ReadView<'v, f32>),
    /// An `f16` tensor's region.
    F16(ReadView<'v, f16>),
    /// A `bf16` tensor's region.
    Bf16(ReadView<'v, bf16>),
}

impl<'v> FloatRead<'v> {
    /// The storage type.
    pub fn dtype(&self) -> DType {
        match self {
            FloatRead::F32(_) => DType::F32,
            FloatRead::F16(_) => DType::F16,
            FloatRead::Bf16(_) => DType::Bf16,
        }
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        each_float!(self, FloatRead, v => v.rows())
    }

    /// Number of columns.
    pub fn cols(&self) -> usize {
        each_float!(self, FloatRead, v => v.cols())
    }

    /// Number of elements.
    pub fn elements(&self) -> usize {
        each_float!(self, FloatRead, v => v.elements())
    }

    /// Row `r` as `f32`: the row itself for an `f32` region, else converted into `buf` (grown
    /// as needed). Panics if `r >= rows()`.
    #[inline]
    pub fn row<'s>(&'s self, r: usize, buf: &'s mut Vec<f32>) -> &'s [f32] {
        match self {
            FloatRead::F32(v) => v.row(r),
            FloatRead::F16(v) => convert_row(v.row(r), buf),
            FloatRead::Bf16(v) => convert_row(v.row(r), buf),
        }
    }

    /// Converts row `r` into `dst`, which must have `cols()` elements. Panics otherwise or if
    /// `r >= rows()`.
    #[inline]
    pub fn load_row(&self, r: usize, dst: &mut [f32]) {
        each_float!(self, FloatRead, v => Float::load(v.row(r), dst))
    }

    /// Every element as `f32`, row after row, into `dst` (made exactly that long).
    pub fn load_all(&self, dst: &mut Vec<f32>) {
        let (rows, cols) = (self.rows(), self.cols());
        set_len(dst, rows * cols);
        for r in 0..rows {
            self.load_row(r, &mut dst[r * cols..(r + 1) * cols]);
        }
    }

    /// The `f32` view, if the region is `f32`.
    pub fn as_f32(&self) -> Option<&ReadView<'v, f32>> {
        match self {
            FloatRead::F32(v) => Some(v),
            _ => None,
        }
    }
}

/// A write view of a float region of any storage type (see the [module docs](self)).
pub enum FloatWrite<'v> {
    /// An `f32` tensor's region.
    F32(WriteView<'v, f32>),
    /// An `f16` tensor's region.
    F16(WriteView<'v, f16>),
    /// A `bf16` tensor's region.
    Bf16(WriteView<'v, bf16>),
}

impl<'v> FloatWrite<'v> {
    /// The storage type.
    pub fn dtype(&self) -> DType {
        match self {
            FloatWrite::F32(_) => DType::F32,
            FloatWrite::F16(_) => DType::F16,
            FloatWrite::Bf16(_) => DType::Bf16,
        }
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        each_float!(self, FloatWrite, v => v.rows())
    }

    /// Number of columns.
    pub fn cols(&self) -> usize {
        each_float!(self, FloatWrite, v => v.cols())
    }

    /// Number of elements.
    pub fn elements(&self) -> usize {
        each_float!(self, FloatWrite, v => v.elements())
    }

    /// Stores `src` (`cols()` values) into row `r`, rounding to the storage type. Panics if the
    /// length differs or `r >= rows()`.
    #[inline]
    pub fn store_row(&mut self, r: usize, src: &[f32]) {
        each_float!(self, FloatWrite, v => Float::store(src, v.row_mut(r)))
    }

    /// Converts row `r`'s current contents into `dst` (`cols()` values). Panics if the length
    /// differs or `r >= rows()`.
    #[inline]
    pub fn load_row(&self, r: usize, dst: &mut [f32]) {
        each_float!(self, FloatWrite, v => Float::load(v.row(r), dst))
    }

    /// Runs `f` on row `r` as `f32`: the row itself for an `f32` region; otherwise a copy in
    /// `buf` (holding the row's current contents if `load`, else unspecified values), stored
    /// back rounded after `f` returns. Panics if `r >= rows()`.
    #[inline]
    pub fn update_row(
        &mut self,
        r: usize,
        buf: &mut Vec<f32>,
        load: bool,
        f: impl FnOnce(&mut [f32]),
    ) {
        match self {
            FloatWrite::F32(v) => f(v.row_mut(r)),
            FloatWrite::F16(v) => update_converted(v.row_mut(r), buf, load, f),
            FloatWrite::Bf16(v) => update_converted(v.row_mut(r), buf, load, f),
        }
    }

    /// Sets every element to `x` rounded to the storage type.
    pub fn fill(&mut self, x: f32) {
        match self {
            FloatWrite::F32(v) => v.fill(x),
            FloatWrite::F16(v) => v.fill(f16::from_f32(x)),
            FloatWrite::Bf16(v) => v.fill(bf16::from_f32(x)),
        }
    }

    /// Stores `src` (`elements()` values, row after row) into the whole region. Panics if the
    /// length differs.
    pub fn store_all(&mut self, src: &[f32]) {
        assert_eq!(src.len(), self.elements(), "store_all: length");
        let cols = self.cols();
        for r in 0..self.rows() {
            self.store_row(r, &src[r * cols..(r + 1) * cols]);
        }
    }

    /// Every element's current contents as `f32`, row after row, into `dst` (made exactly that
    /// long).
    pub fn load_all(&self, dst: &mut Vec<f32>) {
        let (rows, cols) = (self.rows(), self.cols());
        set_len(dst, rows * cols);
        for r in 0..rows {
            self.load_row(r, &mut dst[r * cols..(r + 1) * cols]);
        }
    }

    /// The `f32` view, if the region is `f32`.
    pub fn as_f32_mut(&mut self) -> Option<&mut WriteView<'v, f32>> {
        match self {
            FloatWrite::F32(v) => Some(v),
            _ => None,
        }
    }
}

/// Makes `v` `n` long, writing only the elements it gains (the others are overwritten by the
/// caller).
fn set_len(v: &mut Vec<f32>, n: usize) {
    if v.len() > n {
        v.truncate(n);
    } else {
        v.resize(n, 0.0);
    }
}

fn convert_row<'s, T: Float>(row: &[T], buf: &'s mut Vec<f32>) -> &'s [f32] {
    if buf.len() < row.len() {
        buf.resize(row.len(), 0.0);
    }
    let out = &mut buf[..row.len()];
    T::load(row, out);
    out
}

fn update_converted<T: Float>(
    row: &mut [T],
    buf: &mut Vec<f32>,
    load: bool,
    f: impl FnOnce(&mut [f32]),
) {
    if buf.len() < row.len() {
        buf.resize(row.len(), 0.0);
    }
    let tmp = &mut buf[..row.len()];
    if load {
        T::load(row, tmp);
    }
    f(tmp);
    T::store(tmp, row);
}

impl TaskContext<'_> {
    /// The float type of region `i`'s tensor, or the [`KernelError::View`] a float view of it
    /// would fail with.
    fn float_dtype(&self, i: usize) -> Result<DType, KernelError> {
        let dtype = self.info(i)?.dtype;
        match dtype {
            DType::F32 | DType::F16 | DType::Bf16 => Ok(dtype),
            DType::I32 | DType::U32 | DType::I64 | DType::U64 | DType::U8 => Err(self.view_error(
                i,
                ViewProblem::DType {
                    dtype,
                    element: FLOAT_TYPES,
                },
            )),
        }
    }

    /// A read view of region `i` of a float tensor of any of the three types (see the
    /// [module docs](self)). Fails as [`TaskContext::read`] does, or if the tensor does not hold
    /// floats.
    pub fn read_float(&self, i: usize) -> Result<FloatRead<'_>, KernelError> {
        Ok(match self.float_dtype(i)? {
            DType::F16 => FloatRead::F16(self.read(i)?),
            DType::Bf16 => FloatRead::Bf16(self.read(i)?),
            _ => FloatRead::F32(self.read(i)?),
        })
    }

    /// A write view of region `i` of a float tensor of any of the three types. Fails as
    /// [`TaskContext::write`] does, or if the tensor does not hold floats.
    pub fn write_float(&self, i: usize) -> Result<FloatWrite<'_>, KernelError> {
        Ok(match self.float_dtype(i)? {
            DType::F16 => FloatWrite::F16(self.write(i)?),
            DType::Bf16 => FloatWrite::Bf16(self.write(i)?),
            _ => FloatWrite::F32(self.write(i)?),
        })
    }
}

thread_local! {
    static POOL: RefCell<Vec<Vec<f32>>> = const { RefCell::new(Vec::new()) };
}

/// Most buffers a thread keeps for reuse.
const POOL_KEEP: usize = 8;

/// A growable `f32` buffer borrowed from the current thread's pool and returned to it on drop.
pub struct Scratch(Vec<f32>);

impl Scratch {
    /// A buffer from the pool (empty or holding old values), or a new one.
    pub fn take() -> Scratch {
        Scratch(
            POOL.try_with(|p| p.borrow_mut().pop())
                .ok()
                .flatten()
                .unwrap_or_default(),
        )
    }

    /// The first `n` elements, growing the buffer (with zeros) if it is shorter. Their values
    /// are whatever the buffer held: callers overwrite them.
    pub fn slice(&mut self, n: usize) -> &mut [f32] {
        if self.0.len() < n {
            self.0.resize(n, 0.0);
        }
        &mut self.0[..n]
    }
}

impl Deref for Scratch {
    type Target = Vec<f32>;
    fn deref(&self) -> &Vec<f32> {
        &self.0
    }
}

impl DerefMut for Scratch {
    fn deref_mut(&mut self) -> &mut Vec<f32> {
        &mut self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let v = std::mem::take(&mut self.0);
        let _ = POOL.try_with(|p| {
            let mut p = p.borrow_mut();
            if p.len() < POOL_KEEP {
                p.push(v);
            }
        });
    }
}
