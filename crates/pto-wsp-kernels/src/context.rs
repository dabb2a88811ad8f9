//! What a kernel sees while its task runs: parameters and typed views of the task's regions.
//!
//! Why: a kernel is written once against rows × cols tiles, whatever the rank of the region and
//! wherever it lies in its tensor; and several tasks run at once on different threads, writing
//! disjoint parts of the same tensor buffers, which safe borrows cannot express.
//!
//! Promises:
//! - A view is the N-d region of a row-major tensor seen as `rows × cols`: `cols` is the size of
//!   the region's last dimension, `rows` the product of the other dimensions' sizes (a rank-0
//!   region is `1 × 1`). Row `r` is contiguous in memory; rows are numbered in row-major order of
//!   the outer dimensions.
//! - Views are checked when made: the region lies inside its tensor, the Rust element type views
//!   the tensor's ([`Element::DTYPES`]), a [`WriteView`] is made only of an `out` or `inout`
//!   region, at most once per region index, and never overlaps any other view this context has
//!   handed out (boxes of the same tensor); a read view never overlaps a write view handed out
//!   earlier. Views stay registered for the context's lifetime, so within a task no two views
//!   alias unless both only read.
//! - Across tasks, soundness is the caller's contract on [`TaskContext::new`]; the runtime meets
//!   it through dependency inference, which orders every pair of tasks whose regions conflict.

use crate::registry::KernelError;
use crate::store::{Element, StoreError, TensorInfo, TensorStore};
use pto_wsp_ir::task_io::{MAX_RANK, Region, TaskIo};
use pto_wsp_ir::{Access, DType};
use std::cell::{Cell, RefCell};
use std::marker::PhantomData;

/// Why a view of a region was refused (the `problem` of [`KernelError::View`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ViewProblem {
    /// The Rust element type cannot view the tensor's elements.
    #[error("the tensor holds {dtype} elements, not {element}")]
    DType {
        /// The tensor's element type.
        dtype: DType,
        /// The Rust type asked for ([`Element::NAME`]).
        element: &'static str,
    },
    /// A write view of an `in` region.
    #[error("the region is `{access}`; only `out` and `inout` regions can be written")]
    NotWritable {
        /// The region's access.
        access: Access,
    },
    /// A second write view of the same region index.
    #[error("a write view of this region was already handed out")]
    SecondWrite,
    /// The view would overlap a view handed out earlier, and one of the two writes.
    #[error("it overlaps the view of region {other} handed out earlier, and one of them writes")]
    Overlap {
        /// Index of the region of the earlier view.
        other: usize,
    },
    /// The region does not lie inside its tensor.
    #[error("{0}")]
    Region(StoreError),
}

/// Everything a kernel is given for one task.
///
/// Made by the engine for each task it runs (see [`TaskContext::new`] for the contract), handed
/// to [`crate::KernelRegistry::call`]. Not `Sync`: one task's kernel uses it on one thread.
pub struct TaskContext<'a> {
    store: &'a TensorStore,
    task: u32,
    executor: u32,
    params: &'a [u64],
    io: &'a [TaskIo],
    /// Region indices below 64 with a read view handed out, as a bit set.
    reads: Cell<u64>,
    /// Region indices below 64 with a write view handed out, as a bit set.
    writes: Cell<u64>,
    /// Views of region indices 64 and above: (index, writes).
    more: RefCell<Vec<(usize, bool)>>,
}

impl<'a> TaskContext<'a> {
    /// The context of task `task` running on executor `executor`, with scalar parameters
    /// `params` (raw 64-bit values) and I/O list `io` (regions of tensors of `store`).
    ///
    /// Regions need not have been checked: views check bounds when made.
    ///
    /// # Safety
    ///
    /// For as long as the returned context (and so any view made from it) is alive:
    /// - nothing else reads or writes an element of a region of `io` whose access writes
    ///   (`out`, `inout`), and
    /// - nothing else writes an element of any region of `io`,
    ///
    /// where "anything else" is another `TaskContext`'s views, or a `&self` method of the store
    /// that reads the buffers ([`TensorStore::read`], [`TensorStore::bytes`], `clone`), on any
    /// thread, this one included. An engine meets this by holding the store exclusively while
    /// tasks run (so only contexts touch it) and by never running two tasks with conflicting
    /// regions at the same time — which the dependency inference of `pto-wsp-graph` guarantees,
    /// since it orders every pair of tasks whose boxes intersect with at least one writing
    /// (write after read included), and which [`crate::ConflictChecker`] verifies in debug
    /// mode. Within this context, aliasing is excluded by the checks of [`TaskContext::read`]
    /// and [`TaskContext::write`].
    pub unsafe fn new(
        store: &'a TensorStore,
        task: u32,
        executor: u32,
        params: &'a [u64],
        io: &'a [TaskIo],
    ) -> TaskContext<'a> {
        TaskContext {
            store,
            task,
            executor,
            params,
            io,
            reads: Cell::new(0),
            writes: Cell::new(0),
            more: RefCell::new(Vec::new()),
        }
    }

    /// The task's index.
    pub fn task(&self) -> u32 {
        self.task
    }

    /// The executor running the task.
    pub fn executor(&self) -> u32 {
        self.executor
    }

    /// The scalar parameters as raw 64-bit values.
    pub fn params(&self) -> &[u64] {
        self.params
    }

    /// Parameter `i`, raw.
    pub fn param_u64(&self, i: usize) -> Result<u64, KernelError> {
        self.params.get(i).copied().ok_or(KernelError::Param {
            index: i,
            count: self.params.len(),
        })
    }

    /// Parameter `i` as a signed integer (its bits reinterpreted, as `Value::to_bits` wrote it).
    pub fn param_i64(&self, i: usize) -> Result<i64, KernelError> {
        self.param_u64(i).map(|v| v as i64)
    }

    /// Parameter `i` as an `f64` (`f64::from_bits` of the raw value).
    pub fn param_f64(&self, i: usize) -> Result<f64, KernelError> {
        self.param_u64(i).map(f64::from_bits)
    }

    /// Parameter `i` as an `f32`: [`TaskContext::param_f64`] rounded to `f32`.
    pub fn param_f32(&self, i: usize) -> Result<f32, KernelError> {
        self.param_f64(i).map(|v| v as f32)
    }

    /// Number of regions in the task's I/O list.
    pub fn num_regions(&self) -> usize {
        self.io.len()
    }

    /// The whole I/O list.
    pub fn regions(&self) -> &[TaskIo] {
        self.io
    }

    /// Entry `i` of the I/O list.
    pub fn io(&self, i: usize) -> Result<&TaskIo, KernelError> {
        self.io.get(i).ok_or(KernelError::Region {
            index: i,
            count: self.io.len(),
        })
    }

    /// Region `i` seen as rows × cols (the product of its outer sizes, its last size), without
    /// opening a view.
    pub fn dims(&self, i: usize) -> Result<(usize, usize), KernelError> {
        let r = &self.io(i)?.region;
        let rank = r.rank as usize;
        let Some((&cols, outer)) = r.size[..rank].split_last() else {
            return Ok((1, 1));
        };
        Ok((outer.iter().map(|&s| s as usize).product(), cols as usize))
    }

    /// Name, element type and shape of the tensor of region `i`.
    pub fn info(&self, i: usize) -> Result<&TensorInfo, KernelError> {
        let t = self.io(i)?.region.tensor;
        if t as usize >= self.store.len() {
            return Err(self.view_error(
                i,
                ViewProblem::Region(StoreError::NoSuchTensor {
                    tensor: t,
                    count: self.store.len(),
                }),
            ));
        }
        Ok(self.store.info(t))
    }

    /// A read view of region `i` (any access). Fails if the region is out of bounds, `T` cannot
    /// view the tensor, or a write view overlapping it was handed out earlier.
    pub fn read<T: Element>(&self, i: usize) -> Result<ReadView<'_, T>, KernelError> {
        let (base, geo) = self.claim::<T>(i, false)?;
        Ok(ReadView {
            ptr: base.cast_const(),
            geo,
            _borrow: PhantomData,
        })
    }

    /// A write view of region `i`, which must be `out` or `inout`. Fails if the region is out of
    /// bounds, `T` cannot view the tensor, a write view of `i` was already handed out, or the
    /// region overlaps any view handed out earlier.
    pub fn write<T: Element>(&self, i: usize) -> Result<WriteView<'_, T>, KernelError> {
        let (base, geo) = self.claim::<T>(i, true)?;
        Ok(WriteView {
            ptr: base,
            geo,
            _borrow: PhantomData,
        })
    }

    /// A [`KernelError::View`] for region `i` (which must exist) and `problem`.
    pub(crate) fn view_error(&self, i: usize, problem: ViewProblem) -> KernelError {
        let t = self.io[i].region.tensor;
        let tensor = match self.store.infos().get(t as usize) {
            Some(info) => info.name.clone(),
            None => format!("#{t}"),
        };
        KernelError::View {
            index: i,
            tensor,
            problem,
        }
    }

    /// Checks and registers a view of region `i`; returns the tensor's base pointer and the
    /// view's geometry.
    fn claim<T: Element>(&self, i: usize, write: bool) -> Result<(*mut T, Geometry), KernelError> {
        let io = self.io(i)?;
        self.store
            .check_region(io)
            .map_err(|e| self.view_error(i, ViewProblem::Region(e)))?;
        let info = self.store.info(io.region.tensor);
        if !T::accepts(info.dtype) {
            return Err(self.view_error(
                i,
                ViewProblem::DType {
                    dtype: info.dtype,
                    element: T::NAME,
                },
            ));
        }
        if write && !io.access().writes() {
            return Err(self.view_error(
                i,
                ViewProblem::NotWritable {
                    access: io.access(),
                },
            ));
        }
        if write && self.handed(i).1 {
            return Err(self.view_error(i, ViewProblem::SecondWrite));
        }
        if let Some(other) = self.overlapping(&io.region, write) {
            return Err(self.view_error(i, ViewProblem::Overlap { other }));
        }
        self.record(i, write);
        let geo = Geometry::new(&info.shape, &io.region);
        if let Some((lo, hi)) = geo.span() {
            let size = info.dtype.size_bytes();
            // SAFETY: the view about to be handed out is covered by `TaskContext::new`'s
            // contract; seeded contents promised for its bytes are made before it reads them.
            unsafe {
                self.store.make_span(
                    io.region.tensor,
                    lo * size,
                    hi * size,
                    self.executor as usize,
                )
            };
        }
        Ok((self.store.base_ptr(io.region.tensor).cast::<T>(), geo))
    }

    /// Whether region `i` has a (read, write) view handed out.
    fn handed(&self, i: usize) -> (bool, bool) {
        if i < 64 {
            let bit = 1u64 << i;
            (self.reads.get() & bit != 0, self.writes.get() & bit != 0)
        } else {
            let more = self.more.borrow();
            (
                more.iter().any(|&(j, w)| j == i && !w),
                more.iter().any(|&(j, w)| j == i && w),
            )
        }
    }

    /// The first region with a view handed out that conflicts with a new view of `region`
    /// (writing if `write`): boxes intersect and one of the two writes.
    fn overlapping(&self, region: &Region, write: bool) -> Option<usize> {
        let conflicts = |j: usize| self.io[j].region.intersects(region);
        let mut mask = self.writes.get();
        if write {
            mask |= self.reads.get();
        }
        while mask != 0 {
            let j = mask.trailing_zeros() as usize;
            if conflicts(j) {
                return Some(j);
            }
            mask &= mask - 1;
        }
        self.more
            .borrow()
            .iter()
            .find(|&&(j, w)| (write || w) && conflicts(j))
            .map(|&(j, _)| j)
    }

    fn record(&self, i: usize, write: bool) {
        if i < 64 {
            let cell = if write { &self.writes } else { &self.reads };
            cell.set(cell.get() | 1u64 << i);
        } else {
            self.more.borrow_mut().push((i, write));
        }
    }
}

/// Where a view's rows lie in its tensor's buffer, in elements.
#[derive(Clone, Copy, Debug)]
struct Geometry {
    /// Offset of the region's first element.
    base: usize,
    rows: usize,
    cols: usize,
    /// Number of outer dimensions (rank − 1, or 0).
    outer: usize,
    /// Size of each outer dimension in the region.
    outer_size: [usize; MAX_RANK - 1],
    /// Stride of each outer dimension in the tensor.
    outer_stride: [usize; MAX_RANK - 1],
}

impl Geometry {
    /// The geometry of `region` in a tensor of `shape`; the region must lie inside the tensor
    /// (checked by `check_region`), so every offset fits `usize` (the buffer was allocated).
    fn new(shape: &[u64], region: &Region) -> Geometry {
        let rank = region.rank as usize;
        let mut g = Geometry {
            base: 0,
            rows: 1,
            cols: 1,
            outer: rank.saturating_sub(1),
            outer_size: [1; MAX_RANK - 1],
            outer_stride: [0; MAX_RANK - 1],
        };
        if rank == 0 {
            return g;
        }
        let mut stride = 1usize;
        for d in (0..rank).rev() {
            g.base += region.start[d] as usize * stride;
            if d == rank - 1 {
                g.cols = region.size[d] as usize;
            } else {
                g.outer_size[d] = region.size[d] as usize;
                g.outer_stride[d] = stride;
                g.rows *= region.size[d] as usize;
            }
            stride *= shape[d] as usize;
        }
        g
    }

    /// The elements from the region's first to past its last (`None` for an empty region).
    fn span(&self) -> Option<(usize, usize)> {
        (self.rows > 0 && self.cols > 0)
            .then(|| (self.base, self.row_offset(self.rows - 1) + self.cols))
    }

    /// Offset of the first element of row `r`. Panics if `r` is not a row.
    #[inline]
    fn row_offset(&self, r: usize) -> usize {
        assert!(
            r < self.rows,
            "row {r} is out of range for a view of {} row(s)",
            self.rows
        );
        match self.outer {
            0 => self.base,
            1 => self.base + r * self.outer_stride[0],
            n => {
                let mut rem = r;
                let mut off = self.base;
                for k in (0..n).rev() {
                    let s = self.outer_size[k];
                    off += (rem % s) * self.outer_stride[k];
                    rem /= s;
                }
                off
            }
        }
    }

    /// The distance in elements between the starts of consecutive rows, if it is the same for
    /// every pair of consecutive rows: true when at most one outer dimension of the region has a
    /// size above 1, or when the outer dimensions with a size above 1 are nested without gaps
    /// (each one's stride is the next inner one's stride times its size). A view of at most one
    /// row has stride `cols`.
    fn row_stride(&self) -> Option<usize> {
        if self.rows <= 1 {
            return Some(self.cols);
        }
        let mut stride = None;
        let mut covered = 1usize;
        for k in (0..self.outer).rev() {
            let size = self.outer_size[k];
            if size == 1 {
                continue;
            }
            match stride {
                None => stride = Some(self.outer_stride[k]),
                Some(st) if self.outer_stride[k] == st * covered => {}
                Some(_) => return None,
            }
            covered *= size;
        }
        stride
    }

    #[inline]
    fn check_col(&self, c: usize) {
        assert!(
            c < self.cols,
            "column {c} is out of range for a view of {} column(s)",
            self.cols
        );
    }
}

/// A read-only view of one region, as `rows × cols` (see the [module docs](self)).
pub struct ReadView<'v, T> {
    /// The tensor's first element.
    ptr: *const T,
    geo: Geometry,
    _borrow: PhantomData<&'v [T]>,
}

impl<'v, T: Element> ReadView<'v, T> {
    /// Number of rows: the product of the sizes of every dimension but the last.
    pub fn rows(&self) -> usize {
        self.geo.rows
    }

    /// Number of columns: the size of the last dimension.
    pub fn cols(&self) -> usize {
        self.geo.cols
    }

    /// Number of elements (`rows × cols`).
    pub fn elements(&self) -> usize {
        self.geo.rows * self.geo.cols
    }

    /// Row `r`. Panics if `r >= rows()`.
    #[inline]
    pub fn row(&self, r: usize) -> &'v [T] {
        let off = self.geo.row_offset(r);
        // SAFETY: the region lies inside its tensor (checked when the view was made), so
        // `off .. off + cols` is inside the buffer, which is aligned for `T` and holds
        // initialised plain-old-data. Nothing writes these elements while `'v` lasts: within
        // the task no overlapping write view can be handed out (views stay registered for the
        // context's lifetime, which `'v` borrows), and across tasks `TaskContext::new`'s
        // contract excludes it.
        unsafe { std::slice::from_raw_parts(self.ptr.add(off), self.geo.cols) }
    }

    /// Element `(r, c)`. Panics if out of range.
    #[inline]
    pub fn get(&self, r: usize, c: usize) -> T {
        self.geo.check_col(c);
        self.row(r)[c]
    }

    /// The distance in elements between the starts of consecutive rows, if it is the same for
    /// every pair of consecutive rows (see [`ReadView::as_ptr`]); `None` if the rows are spread
    /// unevenly (a region cut in two or more outer dimensions of its tensor).
    ///
    /// Every region of rank 1 or 2 has one, and so has every region in which at most one outer
    /// dimension has a size above 1. A view of at most one row reports `cols`.
    pub fn row_stride(&self) -> Option<usize> {
        self.geo.row_stride()
    }

    /// A raw pointer to element `(0, 0)`, for code that wants the view as a strided matrix (a
    /// GEMM library, SIMD loops).
    ///
    /// When [`ReadView::row_stride`] is `Some(s)`, element `(r, c)` is at `as_ptr().add(r * s +
    /// c)` for `r < rows()` and `c < cols()`, and those elements may be read through the pointer
    /// for as long as the view lives. Nothing else may be touched through it: the elements
    /// between the end of one row and the start of the next belong to the rest of the tensor,
    /// which other tasks may be writing at the same time. (Getting the pointer is safe; reading
    /// through it is `unsafe` and these are the rules.)
    pub fn as_ptr(&self) -> *const T {
        self.ptr.wrapping_add(self.geo.base)
    }

    /// The rows in order.
    pub fn iter_rows(&self) -> impl Iterator<Item = &'v [T]> + '_ {
        (0..self.geo.rows).map(|r| self.row(r))
    }

    /// Every element, row after row.
    pub fn to_vec(&self) -> Vec<T> {
        let mut v = Vec::with_capacity(self.elements());
        for row in self.iter_rows() {
            v.extend_from_slice(row);
        }
        v
    }
}

/// A writable view of one `out` or `inout` region, as `rows × cols` (see the
/// [module docs](self)). It also reads: an `out` region starts with whatever the tensor held.
pub struct WriteView<'v, T> {
    /// The tensor's first element.
    ptr: *mut T,
    geo: Geometry,
    _borrow: PhantomData<&'v mut [T]>,
}

impl<T: Element> WriteView<'_, T> {
    /// Number of rows: the product of the sizes of every dimension but the last.
    pub fn rows(&self) -> usize {
        self.geo.rows
    }

    /// Number of columns: the size of the last dimension.
    pub fn cols(&self) -> usize {
        self.geo.cols
    }

    /// Number of elements (`rows × cols`).
    pub fn elements(&self) -> usize {
        self.geo.rows * self.geo.cols
    }

    /// Row `r`. Panics if `r >= rows()`.
    #[inline]
    pub fn row(&self, r: usize) -> &[T] {
        let off = self.geo.row_offset(r);
        // SAFETY: in bounds, aligned and initialised as in `ReadView::row`. This view is the
        // only view of these elements in the task (no other view overlaps a write view), other
        // tasks do not touch them (`TaskContext::new`'s contract), and the returned borrow of
        // `self` excludes `row_mut` / `set` / `fill` while it lives.
        unsafe { std::slice::from_raw_parts(self.ptr.add(off), self.geo.cols) }
    }

    /// Row `r`, writable. Panics if `r >= rows()`.
    #[inline]
    pub fn row_mut(&mut self, r: usize) -> &mut [T] {
        let off = self.geo.row_offset(r);
        // SAFETY: in bounds, aligned and initialised as in `ReadView::row`; exclusive because no
        // other view in the task overlaps this one, no other task touches the region
        // (`TaskContext::new`'s contract), and `&mut self` excludes every other borrow of this
        // view.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(off), self.geo.cols) }
    }

    /// Element `(r, c)`. Panics if out of range.
    #[inline]
    pub fn get(&self, r: usize, c: usize) -> T {
        self.geo.check_col(c);
        self.row(r)[c]
    }

    /// Sets element `(r, c)`. Panics if out of range.
    #[inline]
    pub fn set(&mut self, r: usize, c: usize, v: T) {
        self.geo.check_col(c);
        self.row_mut(r)[c] = v;
    }

    /// The distance in elements between the starts of consecutive rows, if uniform (see
    /// [`ReadView::row_stride`]).
    pub fn row_stride(&self) -> Option<usize> {
        self.geo.row_stride()
    }

    /// A raw pointer to element `(0, 0)`, for reading (see [`WriteView::as_mut_ptr`]).
    pub fn as_ptr(&self) -> *const T {
        self.ptr.cast_const().wrapping_add(self.geo.base)
    }

    /// A raw pointer to element `(0, 0)`, for code that wants the view as a strided matrix.
    ///
    /// When [`WriteView::row_stride`] is `Some(s)`, element `(r, c)` is at `as_mut_ptr().add(r *
    /// s + c)` for `r < rows()` and `c < cols()`, and those elements may be read and written
    /// through the pointer until the view is next used or dropped (the `&mut self` borrow is the
    /// reason this one takes `&mut`). Nothing else may be touched through it: the elements
    /// between rows belong to the rest of the tensor, which other tasks may be using at the same
    /// time.
    pub fn as_mut_ptr(&mut self) -> *mut T {
        self.ptr.wrapping_add(self.geo.base)
    }

    /// Sets every element to `v`.
    pub fn fill(&mut self, v: T) {
        for r in 0..self.geo.rows {
            self.row_mut(r).fill(v);
        }
    }

    /// The rows in order.
    pub fn iter_rows(&self) -> impl Iterator<Item = &[T]> + '_ {
        (0..self.geo.rows).map(|r| self.row(r))
    }

    /// Every element, row after row.
    pub fn to_vec(&self) -> Vec<T> {
        let mut v = Vec::with_capacity(self.elements());
        for row in self.iter_rows() {
            v.extend_from_slice(row);
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_of_a_3d_region() {
        // Tensor 4 x 5 x 6, region [1..3, 2..5, 1..5].
        let r = Region::new(0, &[1, 2, 1], &[2, 3, 4]).unwrap();
        let g = Geometry::new(&[4, 5, 6], &r);
        assert_eq!((g.rows, g.cols), (6, 4));
        for row in 0..6 {
            let (i, j) = (1 + row / 3, 2 + row % 3);
            assert_eq!(g.row_offset(row), (i * 5 + j) * 6 + 1);
        }
    }

    #[test]
    fn row_stride_is_found_when_rows_are_evenly_spread() {
        let stride = |shape: &[u64], start: &[i64], size: &[i64]| {
            Geometry::new(shape, &Region::new(0, start, size).unwrap()).row_stride()
        };
        assert_eq!(stride(&[6, 7], &[1, 2], &[4, 3]), Some(7));
        assert_eq!(stride(&[4, 5, 6], &[1, 2, 1], &[1, 3, 4]), Some(6));
        assert_eq!(stride(&[4, 5, 6], &[1, 0, 1], &[2, 1, 4]), Some(30));
        // Full inner dimension: rows nest without gaps.
        assert_eq!(stride(&[4, 5, 6], &[1, 0, 0], &[2, 5, 3]), Some(6));
        // Cut in two outer dimensions: uneven.
        assert_eq!(stride(&[4, 5, 6], &[1, 1, 0], &[2, 3, 6]), None);
        assert_eq!(stride(&[4, 5, 6], &[0, 0, 0], &[1, 1, 6]), Some(6));
        assert_eq!(stride(&[], &[], &[]), Some(1));
    }

    #[test]
    fn geometry_of_a_scalar_region() {
        let r = Region::new(0, &[], &[]).unwrap();
        let g = Geometry::new(&[], &r);
        assert_eq!((g.rows, g.cols, g.row_offset(0)), (1, 1, 0));
    }
}
