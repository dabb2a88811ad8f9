//! The kernel and main-job sections of `pto-wsp bench`.
//!
//! Why: a simulation is only as useful as its kernels are fast, and a user wants one figure for
//! the main job's cost. Both are measured in the same process against baselines doing the same
//! work directly, so the ratios survive a noisy shared machine.
//!
//! - Kernels ([`pto_wsp::kernels::bench`], the same cases as the criterion bench): GEMM through
//!   the registry and `TaskContext` views against the `gemm` crate called directly (GFLOP/s,
//!   target ≥ 90% at 256 × 256 tiles), and one split-KV decode attention chunk against a copy of
//!   as many bytes as its keys and values (GB/s, target ≥ 60% of the copy), best of interleaved
//!   rounds.
//! - Main job: `pto-wsp run` with no file, end to end, split into build (parse, validate,
//!   compile, allocate the tensors; large generated inputs are made during the run where first
//!   read), run (generation, dependency inference and
//!   execution, overlapped) and check (the f64 reference), with its verdict.
//!
//! Promise: each section reports the figures it measured and its targets; a failed check of the
//! main job is an error, not a figure. The main job's first run on each thread count is an
//! extra, untimed one that counts every task's kernel calls ([`crate::bench_once`]): each task
//! exactly once, barrier tasks apart, or an error; every timed run is checked by its totals.

use crate::CliError;
use crate::bench_once::PerTask;
use crate::cmd::run::{RunOptions, TaskHook, run};
use crate::llm;
use pto_wsp::kernels::bench::{
    AttnCase, GemmCase, HEAD_DIM, KV_ROWS, LangCase, SIZES, SoftmaxCase, compare_with,
    fma_peak_gflops,
};
use pto_wsp::kernels::fast::with_std_exp;
use pto_wsp::kernels::{KernelId, KernelRegistry};
use std::cell::RefCell;
use std::time::Duration;

/// GEMM target: kernel GFLOP/s against direct `gemm` at 256 × 256.
pub const TARGET_GEMM: f64 = 90.0;
/// Decode attention target: kernel GB/s against the copy's.
pub const TARGET_ATTN: f64 = 60.0;

/// What the kernel section measures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelBench {
    /// GEMM tile sizes.
    pub sizes: Vec<usize>,
    /// Decode attention cases: (key / value type, query rows).
    pub attn: Vec<(&'static str, usize)>,
    /// Length of one timing round.
    pub target: Duration,
    /// Rounds per figure (the best is reported).
    pub rounds: usize,
}

impl KernelBench {
    /// Every size and case, rounds of 40 ms, best of 11; `quick`: the 256 GEMMs and the two
    /// 4-query chunks only, best of 5.
    pub fn new(quick: bool) -> KernelBench {
        if quick {
            KernelBench {
                sizes: vec![256],
                attn: vec![("f16", 4), ("f32", 4)],
                target: Duration::from_millis(40),
                rounds: 5,
            }
        } else {
            KernelBench {
                sizes: SIZES.to_vec(),
                attn: ["f16", "f32"]
                    .into_iter()
                    .flat_map(|t| [1, 2, 4, 8].map(|g| (t, g)))
                    .collect(),
                target: Duration::from_millis(40),
                rounds: 11,
            }
        }
    }
}

/// Runs the kernel section.
pub fn kernels<E: From<CliError>>(
    opts: &KernelBench,
    out: &mut impl FnMut(&str) -> Result<(), E>,
) -> Result<(), E> {
    let reg = KernelRegistry::with_builtins();
    let (Some(matmul), Some(attn)) = (reg.lookup("matmul"), reg.lookup("attn_decode_chunk")) else {
        return Err(CliError::plain("bench: the built-in kernels are missing").into());
    };
    out(&format!(
        "\nkernels (same process, interleaved, best of {} rounds of ~{} ms; targets: GEMM >= {TARGET_GEMM:.0}% of direct gemm at 256, decode attention >= {TARGET_ATTN:.0}% of copy bandwidth)\n",
        opts.rounds,
        opts.target.as_millis()
    ))?;
    let peak = fma_peak_gflops();
    if let Some(p) = peak {
        out(&format!(
            "  f32 FMA peak of one core (10 independent 8-lane chains): {p:.1} GFLOP/s\n"
        ))?;
    }
    out(&format!(
        "  GEMM through TaskContext views vs gemm called directly:\n  {:>17} {:>5} {:>12} {:>12} {:>7} {:>8}\n",
        "inputs", "n", "kernel GF/s", "direct GF/s", "ratio", "target"
    ))?;
    gemm_rows(opts, &reg, matmul, out)?;
    out(&format!(
        "  kernels written in tile instructions vs the built-in on the same tiles (target >= 70% of the built-in's speed):\n  {:>20} {:>12} {:>12} {:>7} {:>8}\n",
        "case", "language µs", "built-in µs", "speed", "target"
    ))?;
    for case in LangCase::all() {
        let (tl, tb) = compare_with(|| case.lang(), || case.builtin(), opts.target, opts.rounds);
        let speed = 100.0 * tb.as_secs_f64() / tl.as_secs_f64();
        out(&format!(
            "  {:>20} {:>12.2} {:>12.2} {:>6.0}% {:>8}\n",
            case.label,
            tl.as_secs_f64() * 1e6,
            tb.as_secs_f64() * 1e6,
            speed,
            if speed >= 70.0 { "met" } else { "missed" }
        ))?;
    }
    exp_section(opts, &reg, out)?;
    out(&format!(
        "  decode attention chunk ({KV_ROWS} x {HEAD_DIM} keys and values) vs a copy of the same bytes:\n  {:>6} {:>3} {:>11} {:>12} {:>12} {:>7} {:>9} {:>8}\n",
        "kv", "G", "kernel µs", "kernel GB/s", "copy GB/s", "ratio", "% FMA pk", "target"
    ))?;
    attn_rows(opts, &reg, attn, peak, out)?;
    Ok(())
}

/// The GEMM rows: the `matmul` kernel through task views against `gemm` called directly,
/// for every size, with f32 and f16 inputs.
fn gemm_rows<E: From<CliError>>(
    opts: &KernelBench,
    reg: &KernelRegistry,
    matmul: KernelId,
    out: &mut impl FnMut(&str) -> Result<(), E>,
) -> Result<(), E> {
    for f16_inputs in [false, true] {
        for &n in &opts.sizes {
            let case = RefCell::new(GemmCase::new(n, f16_inputs));
            let (tk, td) = compare_with(
                || case.borrow().kernel(reg, matmul),
                || case.borrow_mut().direct(),
                opts.target,
                opts.rounds,
            );
            let case = case.borrow();
            let gf = |t: Duration| case.flops() as f64 / t.as_secs_f64() / 1e9;
            let ratio = 100.0 * td.as_secs_f64() / tk.as_secs_f64();
            let verdict = if n != 256 {
                "-"
            } else if ratio >= TARGET_GEMM {
                "met"
            } else {
                "missed"
            };
            out(&format!(
                "  {:>17} {:>5} {:>12.1} {:>12.1} {:>6.0}% {:>8}\n",
                case.label(),
                n,
                gf(tk),
                gf(td),
                ratio,
                verdict
            ))?;
        }
    }
    Ok(())
}

/// The decode-attention rows: the chunk kernel against a copy of the same bytes, with its
/// share of the FMA peak when one was measured.
fn attn_rows<E: From<CliError>>(
    opts: &KernelBench,
    reg: &KernelRegistry,
    attn: KernelId,
    peak: Option<f64>,
    out: &mut impl FnMut(&str) -> Result<(), E>,
) -> Result<(), E> {
    for &(dtype, g) in &opts.attn {
        let case = RefCell::new(AttnCase::new(g, dtype));
        let (tk, tc) = compare_with(
            || case.borrow().kernel(reg, attn),
            || case.borrow_mut().copy(),
            opts.target,
            opts.rounds,
        );
        let case = case.borrow();
        let gbs = |t: Duration| case.bytes() as f64 / t.as_secs_f64() / 1e9;
        let flops = 4.0 * (case.g * KV_ROWS * HEAD_DIM) as f64;
        let of_peak = peak.map_or(f64::NAN, |p| 100.0 * flops / tk.as_secs_f64() / 1e9 / p);
        let ratio = 100.0 * tc.as_secs_f64() / tk.as_secs_f64();
        out(&format!(
            "  {:>6} {:>3} {:>11.2} {:>12.1} {:>12.1} {:>6.0}% {:>8.0}% {:>8}\n",
            case.dtype,
            case.g,
            tk.as_secs_f64() * 1e6,
            gbs(tk),
            gbs(tc),
            ratio,
            of_peak,
            if ratio >= TARGET_ATTN {
                "met"
            } else {
                "missed"
            }
        ))?;
    }
    Ok(())
}

/// The `exp` rows: softmax and decode attention built-ins with the fast `exp` (the default)
/// against the same built-ins with the standard library's `f32::exp`
/// (`fast::with_std_exp`), interleaved on the same tiles.
fn exp_section<E: From<CliError>>(
    opts: &KernelBench,
    reg: &KernelRegistry,
    out: &mut impl FnMut(&str) -> Result<(), E>,
) -> Result<(), E> {
    let (Some(softmax), Some(attn)) = (reg.lookup("softmax"), reg.lookup("attn_decode_chunk"))
    else {
        return Err(CliError::plain("bench: the built-in kernels are missing").into());
    };
    out(&format!(
        "  built-ins with the fast exp (default, <= 2e-7 relative) vs the standard library's f32::exp, same tiles:\n  {:>24} {:>10} {:>10} {:>8}\n",
        "case", "fast µs", "std µs", "std/fast"
    ))?;
    let mut row = |label: String, (tf, ts): (Duration, Duration)| {
        out(&format!(
            "  {:>24} {:>10.2} {:>10.2} {:>7.2}x\n",
            label,
            tf.as_secs_f64() * 1e6,
            ts.as_secs_f64() * 1e6,
            ts.as_secs_f64() / tf.as_secs_f64()
        ))
    };
    for (rows, cols) in [(8, 64), (32, 1024)] {
        let case = SoftmaxCase::new(rows, cols);
        let t = compare_with(
            || case.kernel(reg, softmax),
            || with_std_exp(|| case.kernel(reg, softmax)),
            opts.target,
            opts.rounds,
        );
        row(format!("softmax {rows}x{cols}"), t)?;
    }
    for &(dtype, g) in &opts.attn {
        let case = AttnCase::new(g, dtype);
        let t = compare_with(
            || case.kernel(reg, attn),
            || with_std_exp(|| case.kernel(reg, attn)),
            opts.target,
            opts.rounds,
        );
        row(format!("attn chunk {dtype} G={g}"), t)?;
    }
    Ok(())
}

/// The main job's task and barrier-task counts under `binds`: its graph built once (untimed).
fn main_job_tasks(binds: &[String]) -> Result<(u64, u64), CliError> {
    use pto_wsp::graph::ExecDomain;
    use pto_wsp::graph::builder::GraphBuilder;
    use pto_wsp::graph::feed::{NoHooks, feed};
    let loaded = crate::load_source(llm::NAME, llm::SOURCE)?;
    let b = crate::bindings_for(&loaded, binds)?;
    let plan = pto_wsp::driver::lower(&loaded)?;
    let mut builder = GraphBuilder::new(plan.config().deps);
    let fed = feed(
        plan.resolved(),
        &b,
        &pto_wsp::ir::ExpandOptions::default(),
        &mut builder,
        &mut NoHooks,
        ExecDomain::default(),
    )
    .map_err(|e| CliError::plain(format!("bench: the main job's graph: {e}")))?;
    Ok((u64::from(fed.user_tasks), u64::from(fed.barrier_tasks)))
}

/// Runs the main-job section: the main job under `binds` (after its defaults) on each thread
/// count, best of `repeat` runs per figure (by end-to-end time).
pub fn main_job<E: From<CliError>>(
    binds: &[String],
    threads: &[usize],
    repeat: u32,
    out: &mut impl FnMut(&str) -> Result<(), E>,
) -> Result<(), E> {
    out(
        "\nmain job (`pto-wsp run`: one LLM decode step, checked against its f64 reference), end to end:\n",
    )?;
    out(&format!(
        "  {:>7} {:>7} {:>8} {:>10} {:>10} {:>10} {:>11} {:>9} {:>10}  {}\n",
        "threads",
        "tasks",
        "barriers",
        "build ms",
        "run ms",
        "check ms",
        "total ms",
        "tasks/ms",
        "max error",
        "check"
    ))?;
    let mut header = None;
    let (tasks, barriers) = main_job_tasks(binds)?;
    for &t in threads {
        let mut best: Option<crate::cmd::run::RunOutcome> = None;
        // Run 0 is untimed and counts every task's kernel calls.
        for k in 0..=repeat.max(1) {
            let once = PerTask::new((tasks + barriers) as usize);
            let hook = once.clone();
            let opts = RunOptions {
                binds: binds.to_vec(),
                threads: t,
                seed: 1,
                on_task: (k == 0).then(|| TaskHook(std::sync::Arc::new(move |id| hook.hit(id)))),
                ..RunOptions::default()
            };
            let mut first = String::new();
            let o = run(llm::NAME, llm::SOURCE, true, &opts, &mut |l| {
                first = l.trim_end().to_string()
            })?;
            crate::bench_llama::ran_exactly(
                "main job",
                (o.stats.tasks, o.stats.barriers),
                tasks,
                barriers,
            )?;
            if k == 0 {
                once.check(&format!("main job ({t} threads)"), barriers)?;
                continue;
            }
            header.get_or_insert(first);
            let total = |o: &crate::cmd::run::RunOutcome| {
                o.times.build_ms + o.times.run_ms + o.times.check_ms
            };
            if best.as_ref().is_none_or(|b| total(&o) < total(b)) {
                best = Some(o);
            }
        }
        let Some(o) = best else { continue };
        let Some(c) = &o.comparison else {
            return Err(CliError::plain("bench: the main job was not checked").into());
        };
        if !c.passed {
            return Err(CliError::plain(format!(
                "bench: the main job's output does not match its reference ({c:?})"
            ))
            .into());
        }
        let tm = &o.times;
        // Barrier tasks (joins of structural order) run no kernel: counted apart, not in tasks/ms.
        let user_tasks = o.stats.tasks.saturating_sub(o.stats.barriers);
        out(&format!(
            "  {:>7} {:>7} {:>8} {:>10.1} {:>10.1} {:>10.1} {:>11.1} {:>9.1} {:>10.1e}  {}\n",
            o.threads,
            user_tasks,
            o.stats.barriers,
            tm.build_ms,
            tm.run_ms,
            tm.check_ms,
            tm.build_ms + tm.run_ms + tm.check_ms,
            user_tasks as f64 / tm.run_ms.max(1e-9),
            c.max_rel_rms,
            "PASS"
        ))?;
    }
    if let Some(h) = header {
        out(&format!("  ({h})\n"))?;
    }
    Ok(())
}
