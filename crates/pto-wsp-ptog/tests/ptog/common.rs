//! Shared helpers: a library of small test kernels and a runner.

use pto_wsp_kernels::{KernelError, TaskContext};
use pto_wsp_ptog::exec::Launch;
use pto_wsp_ptog::{Device, DeviceConfig, Library, RunReport};

/// `put`: every element of region 0 (i64) becomes `scalar0 + 100·block + 10000·iteration +
/// 1000000·(sum of iterators)`.
/// `add1`: region 0 (i64, inout) += 1.
/// `copy_i64`: region 1 = region 0.
/// `nop`: nothing.
pub(crate) fn library() -> Library {
    let mut lib = Library::with_builtins();
    lib.add_fn("put", |ctx: &TaskContext<'_>| {
        let l = Launch::of(ctx)?;
        let base = ctx.param_i64(l.first_scalar).unwrap_or(0);
        let v = base
            + 100 * l.block as i64
            + 10_000 * l.iteration as i64
            + 1_000_000 * l.iterators.iter().sum::<u64>() as i64;
        ctx.write::<i64>(0)?.fill(v);
        Ok(())
    });
    lib.add_fn("add1", |ctx: &TaskContext<'_>| {
        let mut w = ctx.write::<i64>(0)?;
        for r in 0..w.rows() {
            for x in w.row_mut(r) {
                *x += 1;
            }
        }
        Ok(())
    });
    lib.add_fn("copy_i64", |ctx: &TaskContext<'_>| {
        let src = ctx.read::<i64>(0)?.to_vec();
        let mut w = ctx.write::<i64>(1)?;
        let cols = w.cols();
        for r in 0..w.rows() {
            w.row_mut(r).copy_from_slice(&src[r * cols..][..cols]);
        }
        Ok(())
    });
    lib.add_fn("nop", |_ctx: &TaskContext<'_>| Ok::<(), KernelError>(()));
    lib
}

/// Assembles `text`, loads it on a device `cfg`, runs it; the device and its report.
pub(crate) fn run_text(text: &str, cfg: DeviceConfig) -> (Device, RunReport) {
    let checked = pto_wsp_ptog::assemble(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let mut dev = Device::new(checked, cfg, &library()).unwrap_or_else(|e| panic!("{e}"));
    let report = dev.run().unwrap_or_else(|e| panic!("{e}"));
    (dev, report)
}

/// A traced device with `aic` cube, `aiv` vector and one AICPU worker.
pub(crate) fn traced(aic: u32, aiv: u32) -> DeviceConfig {
    DeviceConfig {
        aic,
        aiv,
        aicpu: 1,
        trace: true,
        ..DeviceConfig::default()
    }
}
