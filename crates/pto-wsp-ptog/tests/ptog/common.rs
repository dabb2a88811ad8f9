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
    // Row `iteration + sum of iterators` of region 0 (i64) becomes scalar0 + that row.
    lib.add_fn("put_at", |ctx: &TaskContext<'_>| {
        let l = Launch::of(ctx)?;
        let base = ctx.param_i64(l.first_scalar).unwrap_or(0);
        let row = (l.iteration + l.iterators.iter().sum::<u64>()) as usize;
        let mut w = ctx.write::<i64>(0)?;
        if row >= w.rows() {
            return Err(KernelError::Message(format!("row {row} of {}", w.rows())));
        }
        w.row_mut(row).fill(base + row as i64);
        Ok(())
    });
    // Region 0 (i64 [2], inout): x[0] += 1; x[1] = (x[0] >= scalar0).
    lib.add_fn("inc_until", |ctx: &TaskContext<'_>| {
        let l = Launch::of(ctx)?;
        let limit = ctx.param_i64(l.first_scalar)?;
        let mut w = ctx.write::<i64>(0)?;
        let mut v = w.to_vec();
        v[0] += 1;
        v[1] = (v[0] >= limit) as i64;
        w.row_mut(0).copy_from_slice(&v);
        Ok(())
    });
    // Fails on purpose.
    lib.add_fn("fail", |_ctx: &TaskContext<'_>| {
        Err::<(), KernelError>(KernelError::Message("this kernel always fails".into()))
    });
    lib
}

/// Assembles `text` and loads it on a device `cfg`.
pub(crate) fn load(text: &str, cfg: DeviceConfig) -> Device {
    let checked = pto_wsp_ptog::assemble(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    Device::new(checked, cfg, &library()).unwrap_or_else(|e| panic!("{e}"))
}

/// Assembles `text`, loads it on a device `cfg`, runs it; the device and its report.
pub(crate) fn run_text(text: &str, cfg: DeviceConfig) -> (Device, RunReport) {
    let mut dev = load(text, cfg);
    let report = dev.run().unwrap_or_else(|e| panic!("{e}"));
    (dev, report)
}

/// The error of running `text` on `cfg`.
pub(crate) fn run_error(text: &str, cfg: DeviceConfig) -> String {
    let mut dev = load(text, cfg);
    match dev.run() {
        Ok(_) => panic!("the run succeeded:\n{text}"),
        Err(e) => e.to_string(),
    }
}

/// The kernel index of `name` in graph `graph` of `dev`.
pub(crate) fn kernel(dev: &Device, graph: usize, name: &str) -> usize {
    dev.checked().graphs[graph]
        .kernels
        .iter()
        .position(|k| k.name == name)
        .unwrap_or_else(|| panic!("no kernel {name}"))
}

/// The first start and the last end of kernel `k` of graph `g` in a traced run.
pub(crate) fn span(r: &RunReport, g: usize, k: usize) -> (u64, u64) {
    let it = || r.trace.iter().filter(|t| t.graph == g && t.kernel == k);
    let s = it()
        .map(|t| t.start)
        .min()
        .unwrap_or_else(|| panic!("kernel {k} of {g} never ran"));
    (s, it().map(|t| t.end).max().unwrap())
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
