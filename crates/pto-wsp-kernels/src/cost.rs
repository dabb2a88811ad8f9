//! The cost model of the built-in kernels: an estimate of a task's cycles from its tile shapes.
//!
//! Why: a cycle-cost trace policy replays a run on a simulated clock, so each task needs a
//! duration that depends on what it computes and moves, not on how busy the host happened to
//! be. Measuring would make traces irreproducible; a model keeps them exact.
//!
//! Promises: a coarse roofline of one vector core, the same for every kernel. A kernel
//! describes its [`Work`] from its regions' shapes and element types only (never their
//! contents); the cost is
//!
//! ```text
//! LAUNCH_CYCLES + max(compute, memory)
//! compute = ⌈vector_ops / VECTOR_OPS_PER_CYCLE⌉ + ⌈transcendentals / TRANSCENDENTALS_PER_CYCLE⌉
//!         + ⌈matmul_flops / MATMUL_FLOPS_PER_CYCLE⌉
//! memory  = ⌈bytes / BYTES_PER_CYCLE⌉
//! ```
//!
//! with `bytes` the bytes of every region (an `inout` region counts twice: read and written).
//! The constants describe a core with two 8-lane `f32` pipes (16 simple operations a cycle, or
//! 32 flops of fused multiply-add), a quarter of that rate for `exp`-like functions, and one
//! 32-byte load or store stream. They are round figures meant to rank tasks and expose the
//! shape of a schedule, not to predict a device to the cycle. Cost functions never fail: a
//! region that is missing or out of range counts as empty.

use crate::context::TaskContext;
use crate::registry::region_elements;
use pto_wsp_ir::Access;

/// Fixed cycles of every task: fetching its descriptor, setting up its views.
pub const LAUNCH_CYCLES: u64 = 32;
/// Simple `f32` operations (add, multiply, compare, convert) per cycle.
pub const VECTOR_OPS_PER_CYCLE: u64 = 16;
/// `exp`, `rsqrt`, `sin`-like evaluations per cycle.
pub const TRANSCENDENTALS_PER_CYCLE: u64 = 4;
/// Matrix-multiply flops (a multiply-add counts 2) per cycle.
pub const MATMUL_FLOPS_PER_CYCLE: u64 = 32;
/// Bytes loaded or stored per cycle.
pub const BYTES_PER_CYCLE: u64 = 32;

/// What one task computes and moves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Work {
    /// Simple vector operations.
    pub vector_ops: u64,
    /// Transcendental evaluations.
    pub transcendentals: u64,
    /// Matrix-multiply flops (`2·m·n·k` per product).
    pub matmul_flops: u64,
    /// Bytes read and written.
    pub bytes: u64,
}

impl Work {
    /// The modelled cycles (see the [module docs](self)).
    pub fn cycles(&self) -> u64 {
        let compute = self.vector_ops.div_ceil(VECTOR_OPS_PER_CYCLE)
            + self.transcendentals.div_ceil(TRANSCENDENTALS_PER_CYCLE)
            + self.matmul_flops.div_ceil(MATMUL_FLOPS_PER_CYCLE);
        let memory = self.bytes.div_ceil(BYTES_PER_CYCLE);
        LAUNCH_CYCLES.saturating_add(compute.max(memory))
    }
}

/// Bytes moved by the task's regions: each region's elements times its element size, twice for
/// an `inout` region.
pub fn region_bytes(ctx: &TaskContext<'_>) -> u64 {
    (0..ctx.num_regions())
        .map(|i| {
            let io = &ctx.regions()[i];
            let size = ctx
                .info(i)
                .map(|t| t.dtype.size_bytes() as u64)
                .unwrap_or(0);
            let times = if io.access() == Access::InOut { 2 } else { 1 };
            region_elements(io)
                .saturating_mul(size)
                .saturating_mul(times)
        })
        .fold(0u64, u64::saturating_add)
}

/// Rows × cols of region `i` as a view would see it (`(0, 0)` if the task has no region `i`).
pub fn dims(ctx: &TaskContext<'_>, i: usize) -> (u64, u64) {
    let Ok(io) = ctx.io(i) else {
        return (0, 0);
    };
    let rank = (io.region.rank as usize).min(pto_wsp_ir::task_io::MAX_RANK);
    if rank == 0 {
        return (1, 1);
    }
    let size = |d: usize| io.region.size[d] as u64;
    let rows = (0..rank - 1).map(size).fold(1u64, u64::saturating_mul);
    (rows, size(rank - 1))
}

/// Elements of region `i` (0 if the task has no region `i`).
pub fn elements(ctx: &TaskContext<'_>, i: usize) -> u64 {
    ctx.io(i).map(region_elements).unwrap_or(0)
}
