//! Two devices taking turns: `examples/ptog/exchange_device0.ptoasm` and
//! `exchange_device1.ptoasm`. Each round, device 0 runs PING, notifies device 1 and waits for
//! its answer; device 1 waits, runs PONG and answers. Both stamp a clock the library's kernels
//! share into row `iteration` of their LOG, so the rounds' order can be read back.

use crate::exec::{Launch, Library};
use pto_wsp_graph::sync::{Arc, AtomicI64, Ordering};
use pto_wsp_kernels::{KernelError, TaskContext};

/// Device 0's program.
pub const DEVICE0: &str = include_str!("../../../../examples/ptog/exchange_device0.ptoasm");
/// Device 1's program.
pub const DEVICE1: &str = include_str!("../../../../examples/ptog/exchange_device1.ptoasm");

/// Adds `stamp`: region 0 (`i64`, one row per iteration) gets, in row `iteration`, the next
/// value of a clock shared by every device using this library (1, 2, 3, ...).
pub fn add_kernels(lib: &mut Library) {
    let clock = Arc::new(AtomicI64::new(0));
    lib.add_fn("stamp", move |ctx: &TaskContext<'_>| {
        let l = Launch::of(ctx)?;
        let mut w = ctx.write::<i64>(0)?;
        let row = l.iteration as usize;
        if row >= w.rows() {
            return Err(KernelError::shape(
                "stamp",
                format!("iteration {row}, but the log has {} rows", w.rows()),
            ));
        }
        let t = clock.fetch_add(1, Ordering::SeqCst) + 1;
        w.row_mut(row).fill(t);
        Ok(())
    });
}
