//! Matrix products on tiles: `matmul`, `matmul_acc` and their transposed-B forms, through the
//! `gemm` crate.
//!
//! Why: the projections and attention scores of every layer are tile products, and they
//! dominate a layer's time; a naive triple loop would make the simulation hundreds of times
//! slower than the machine allows.
//!
//! Promises: `C (M×N) = A (M×K) · B (K×N)` (or `· Bᵀ` with `B` stored `N×K`), accumulated in
//! `f32` whatever the operands' float types. A product of at most 16 rows (not transposed)
//! streams `B` once through the SIMD loop of attention's weighted sums, reading it in its
//! storage type. Otherwise, `f32` operands whose rows are evenly spaced
//! ([`crate::ReadView::row_stride`]) are used in place; other operands are converted (or
//! gathered) once into an `f32` scratch tile. An `f32` output with evenly spaced rows is written
//! (or accumulated) in place, any other is computed in scratch and stored rounded once. Shapes
//! and the accumulator's access are checked before anything is written. Single-threaded: the
//! engine runs tasks in parallel, not inside them.

use super::{Dims, need_inout};
use crate::context::TaskContext;
use crate::fast;
use crate::registry::KernelError;
use crate::tile::{FloatRead, FloatWrite, Scratch};

/// `matmul`: region 2 (written, `M×N`) = region 0 (`M×K`) · region 1 (`K×N`).
pub fn matmul(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    product(ctx, "matmul", false, false)
}

/// `matmul_acc`: region 2 (`inout`, `M×N`) += region 0 (`M×K`) · region 1 (`K×N`).
pub fn matmul_acc(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    product(ctx, "matmul_acc", true, false)
}

/// `matmul_bt`: region 2 (written, `M×N`) = region 0 (`M×K`) · region 1ᵀ (region 1 is `N×K`).
pub fn matmul_bt(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    product(ctx, "matmul_bt", false, true)
}

/// `matmul_bt_acc`: region 2 (`inout`, `M×N`) += region 0 (`M×K`) · region 1ᵀ (region 1 is
/// `N×K`).
pub fn matmul_bt_acc(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    product(ctx, "matmul_bt_acc", true, true)
}

/// An operand as an `f32` matrix: pointer to `(0, 0)` and row stride, in place when possible,
/// else gathered into `scratch`. The pointer is valid for the operand's `rows × cols` elements
/// (at that stride) while the view and `scratch` live.
fn operand(v: &FloatRead<'_>, scratch: &mut Scratch) -> (*const f32, usize) {
    if let Some(f) = v.as_f32()
        && let Some(stride) = f.row_stride()
    {
        return (f.as_ptr(), stride);
    }
    v.load_all(scratch);
    (scratch.as_ptr(), v.cols())
}

fn product(ctx: &TaskContext<'_>, kernel: &str, acc: bool, bt: bool) -> Result<(), KernelError> {
    let a = ctx.read_float(0)?;
    let b = ctx.read_float(1)?;
    if acc {
        need_inout(ctx, kernel, 2)?;
    }
    let mut c = ctx.write_float(2)?;
    let (m, k) = (a.rows(), a.cols());
    let (kb, n) = if bt {
        (b.cols(), b.rows())
    } else {
        (b.rows(), b.cols())
    };
    let (da, db, dc) = (
        Dims::new(0, m, k),
        Dims::new(1, b.rows(), b.cols()),
        Dims::new(2, c.rows(), c.cols()),
    );
    if kb != k {
        let which = if bt { "columns" } else { "rows" };
        return Err(KernelError::shape(
            kernel,
            format!(
                "{da} but {db}: region 1 must have {k} {which} (region 0's columns, the inner dimension)"
            ),
        ));
    }
    if (c.rows(), c.cols()) != (m, n) {
        return Err(KernelError::shape(
            kernel,
            format!("{dc} but the product is {m} x {n} ({da}, {db})"),
        ));
    }
    if !bt && m <= SKINNY {
        skinny(&a, &b, &mut c, acc);
        return Ok(());
    }
    let (mut sa, mut sb, mut sc) = (Scratch::take(), Scratch::take(), Scratch::take());
    let (pa, lda) = operand(&a, &mut sa);
    let (pb, ldb) = operand(&b, &mut sb);
    // B as gemm sees it, `K×N`: row stride and column stride.
    let (b_rs, b_cs) = if bt { (1, ldb) } else { (ldb, 1) };
    if let Some(cv) = c.as_f32_mut()
        && let Some(ldc) = cv.row_stride()
    {
        let pc = cv.as_mut_ptr();
        // SAFETY: `pa` / `pb` point at `m×k` / `k×n` readable f32 elements at the given strides
        // (`operand`'s promise: a live read view's rows, or `sa` / `sb`, both alive here), and
        // `pc` at `m×n` elements at stride `ldc` that this task alone may read and write
        // (`WriteView::as_mut_ptr`, the view is not used while the pointer is). The output
        // overlaps neither input: the context refuses a write view overlapping a read view,
        // and scratch buffers are distinct allocations. gemm touches only those elements.
        unsafe { gemm_f32(m, n, k, pc, ldc, acc, pa, lda, pb, b_rs, b_cs) };
        return Ok(());
    }
    if acc {
        c.load_all(&mut sc);
    } else {
        sc.clear();
        sc.resize(m * n, 0.0);
    }
    let pc = sc.as_mut_ptr();
    // SAFETY: inputs as above; `pc` points at the `m×n` elements of `sc` (contiguous, stride
    // `n`), a buffer of this call that nothing else references while gemm runs.
    unsafe { gemm_f32(m, n, k, pc, n, acc, pa, lda, pb, b_rs, b_cs) };
    c.store_all(&sc[..m * n]);
    Ok(())
}

/// Products with at most this many rows of `A` (a decode batch times a weight tile) stream `B`
/// once through [`fast::pv`], reading its rows in their storage type, instead of converting and
/// packing it for `gemm`: with few rows there is little arithmetic per element of `B`, and the
/// passes over it are the cost.
pub(crate) const SKINNY: usize = 16;

/// Key rows of `B` handed to [`fast::pv`] at a time.
pub(crate) const SKINNY_BLOCK: usize = 64;

/// `C [+]= A · B` for `A` of at most [`SKINNY`] rows (shapes checked by the caller), `f32`
/// accumulation in scratch, `C` stored rounded once.
fn skinny(a: &FloatRead<'_>, b: &FloatRead<'_>, c: &mut FloatWrite<'_>, acc: bool) {
    let (m, k, n) = (a.rows(), a.cols(), b.cols());
    let (mut sa, mut sc) = (Scratch::take(), Scratch::take());
    a.load_all(&mut sa);
    if acc {
        c.load_all(&mut sc);
    } else {
        sc.clear();
        sc.resize(m * n, 0.0);
    }
    fn stream<T: crate::tile::Float>(
        b: &crate::context::ReadView<'_, T>,
        a: &[f32],
        k: usize,
        c: &mut [f32],
        n: usize,
    ) {
        let mut rows: [&[T]; SKINNY_BLOCK] = [&[]; SKINNY_BLOCK];
        for j0 in (0..k).step_by(SKINNY_BLOCK) {
            let jb = SKINNY_BLOCK.min(k - j0);
            for (jj, row) in rows.iter_mut().enumerate().take(jb) {
                *row = b.row(j0 + jj);
            }
            fast::pv(&a[j0..], k, &rows[..jb], c, n);
        }
    }
    if m > 0 && n > 0 && k > 0 {
        match b {
            FloatRead::F32(v) => stream(v, &sa, k, &mut sc, n),
            FloatRead::F16(v) => stream(v, &sa, k, &mut sc, n),
            FloatRead::Bf16(v) => stream(v, &sa, k, &mut sc, n),
        }
    }
    c.store_all(&sc[..m * n]);
}

/// `out = a · b` for a contiguous `f32` matrix `a` (`m×k`, `k` = `b`'s rows) and a float view `b`
/// (`k×n`), into the contiguous `out` (`m×n`): the product of kernels that chain matrix products
/// through scratch tiles (`moe_expert`). Panics if the lengths disagree (callers check shapes
/// first).
pub(crate) fn scratch_times(a: &[f32], m: usize, b: &FloatRead<'_>, out: &mut [f32]) {
    let (k, n) = (b.rows(), b.cols());
    assert!(
        a.len() == m * k && out.len() == m * n,
        "scratch_times: shapes"
    );
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        out.fill(0.0);
        return;
    }
    let mut sb = Scratch::take();
    let (pb, ldb) = operand(b, &mut sb);
    // SAFETY: `a` holds `m×k` contiguous elements (stride `k`), `pb` points at `k×n` readable
    // elements at stride `ldb` (`operand`'s promise: a live read view's rows, or `sb`, alive
    // here), and `out` holds `m×n` contiguous elements that only this call references; `out` is
    // a distinct mutable slice, so it overlaps neither input.
    unsafe {
        gemm_f32(
            m,
            n,
            k,
            out.as_mut_ptr(),
            n,
            false,
            a.as_ptr(),
            k,
            pb,
            ldb,
            1,
        )
    };
}

/// `C = [C +] A · B` on `f32` matrices given by pointers and strides (in elements).
///
/// # Safety
///
/// `a` must be valid for reads of `a[i·lda + p]` (`i < m`, `p < k`), `b` of `b[p·b_rs + j·b_cs]`
/// (`p < k`, `j < n`), `c` for reads and writes of `c[i·ldc + j]` (`i < m`, `j < n`), with no
/// other access to those `c` elements during the call and no overlap between them and the
/// inputs.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemm_f32(
    m: usize,
    n: usize,
    k: usize,
    c: *mut f32,
    ldc: usize,
    acc: bool,
    a: *const f32,
    lda: usize,
    b: *const f32,
    b_rs: usize,
    b_cs: usize,
) {
    // SAFETY: the caller's contract is gemm's (dst `m×n` at (cs 1, rs ldc), lhs `m×k` at (1,
    // lda), rhs `k×n` at (b_cs, b_rs)); strides are element counts of live allocations, so
    // they fit `isize`.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c,
            1,
            ldc as isize,
            acc,
            a,
            1,
            lda as isize,
            b,
            b_cs as isize,
            b_rs as isize,
            1.0f32,
            1.0f32,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}
