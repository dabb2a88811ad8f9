//! A `CF_WHILE` convergence loop: Jacobi iteration for `A x = b`, one step per pass, while the
//! step reports an update above the tolerance — from the control code
//! (`examples/ptog/converge.ptoasm`: one launch per pass) or inside one graph
//! (`examples/ptog/converge_in_graph.ptoasm`: the device loops on its own).

use crate::exec::{Launch, Library};
use pto_wsp_kernels::{KernelError, TaskContext};

/// The control-code loop: `examples/ptog/converge.ptoasm`.
pub const PROGRAM: &str = include_str!("../../../../examples/ptog/converge.ptoasm");
/// The in-graph loop: `examples/ptog/converge_in_graph.ptoasm`.
pub const IN_GRAPH: &str = include_str!("../../../../examples/ptog/converge_in_graph.ptoasm");

/// Unknowns.
pub const N: usize = 64;
/// The tolerance on the largest update.
pub const TOLERANCE: f64 = 1e-5;

/// Adds `jacobi_step` and `count`.
pub fn add_kernels(lib: &mut Library) {
    lib.add_fn("jacobi_step", jacobi_step);
    lib.add_fn("count", count);
}

/// One Jacobi step. Regions: 0 `A` (n × n), 1 `b` (n), 2 `x` (n, inout), 3 the flag (`i64`,
/// out): 1 when the largest update `|x' - x|` is above the tolerance (scalar argument 0, an
/// `f64`), else 0. Arithmetic in `f64`, `x` stored as `f32`.
pub fn jacobi_step(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    const NAME: &str = "jacobi_step";
    let l = Launch::of(ctx)?;
    let tol = ctx.param_f64(l.first_scalar)?;
    let a = ctx.read::<f32>(0)?;
    let b = ctx.read::<f32>(1)?.to_vec();
    let mut x = ctx.write::<f32>(2)?;
    let mut flag = ctx.write::<i64>(3)?;
    let n = b.len();
    if a.rows() != n || a.cols() != n || x.elements() != n || flag.elements() != 1 {
        return Err(KernelError::shape(
            NAME,
            format!(
                "A {}x{}, b {n}, x {}, flag {} do not fit",
                a.rows(),
                a.cols(),
                x.elements(),
                flag.elements()
            ),
        ));
    }
    let old = x.to_vec();
    let mut delta = 0.0f64;
    let mut new = vec![0.0f32; n];
    for i in 0..n {
        let row = a.row(i);
        let off: f64 = (0..n)
            .filter(|&j| j != i)
            .map(|j| row[j] as f64 * old[j] as f64)
            .sum();
        let v = (b[i] as f64 - off) / row[i] as f64;
        delta = delta.max((v - old[i] as f64).abs());
        new[i] = v as f32;
    }
    let cols = x.cols();
    for r in 0..x.rows() {
        x.row_mut(r).copy_from_slice(&new[r * cols..][..cols]);
    }
    flag.fill((delta > tol) as i64);
    Ok(())
}

/// Region 0 (`i64`, inout): every element += 1.
pub fn count(ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    let mut w = ctx.write::<i64>(0)?;
    for r in 0..w.rows() {
        for v in w.row_mut(r) {
            *v += 1;
        }
    }
    Ok(())
}
