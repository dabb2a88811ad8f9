//! Where the time of one `Program::execute` goes, thread by thread: the LLaMA layer
//! (`examples/llama7b_layer.wsp`) with empty kernels, executed `RUNS` times in one program.
//!
//! Why: the `program` column of `pto-wsp bench` is one wall figure for three threads (the
//! orchestration on the calling thread and the pool's workers) sharing the machine's cores.
//! This prints, per execute, the wall time per task, the orchestration's share of it (`build`,
//! from the call to the last submission) and the tail after it (`run`), the window's stalls
//! and high water, the tasks each worker ran, and (where `/proc/self/task/*/schedstat` is
//! readable, i.e. Linux) each thread's CPU time and time spent runnable but not running, per
//! task, with the times it was scheduled in: the figures that say whether a thread waited for
//! a core or for work.
//!
//! ```sh
//! cargo run --release -p pto-wsp --example program_threads -- SEQ MODE THREADS RUNS
//! # e.g. 1024 hybrid 2 8   (MODE: hybrid or exact)
//! ```

use pto_wsp::ir::{Bindings, DepsMode, parse};
use pto_wsp::kernels::KernelRegistry;
use pto_wsp::{CompileOptions, compile, lower};
use std::time::Instant;

const LLAMA: &str = include_str!("../../../examples/llama7b_layer.wsp");

/// Each thread of this process: (CPU ns, runnable-but-waiting ns, times scheduled in), in
/// thread-id order (the calling thread first); empty where the OS does not say.
fn sched_stats() -> Vec<[u64; 3]> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    let mut ids: Vec<u64> = dir
        .filter_map(|e| e.ok()?.file_name().into_string().ok()?.parse().ok())
        .collect();
    ids.sort_unstable();
    ids.iter()
        .filter_map(|id| {
            let s = std::fs::read_to_string(format!("/proc/self/task/{id}/schedstat")).ok()?;
            let v: Vec<u64> = s
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
            (v.len() >= 3).then(|| [v[0], v[1], v[2]])
        })
        .collect()
}

/// A number argument, or its default; a clear message for one that is not a number.
fn arg<T: std::str::FromStr>(args: &[String], i: usize, name: &str, default: T) -> T {
    match args.get(i) {
        None => default,
        Some(s) => s.parse().unwrap_or_else(|_| {
            eprintln!("program_threads: {name} must be a number, not {s:?}");
            std::process::exit(2)
        }),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let seq: i64 = arg(&args, 0, "SEQ", 1024);
    let mode = match args.get(1).map_or("hybrid", String::as_str) {
        "hybrid" => DepsMode::Hybrid,
        "exact" => DepsMode::Exact,
        other => return Err(format!("MODE must be hybrid or exact, not {other:?}").into()),
    };
    let threads: usize = arg(&args, 2, "THREADS", 2);
    let runs: usize = arg(&args, 3, "RUNS", 8);
    // Validated with its own `deps hybrid`, then set to `mode` (as `pto-wsp bench` does).
    let plan = lower(&parse(LLAMA)?)?.with_config_unchecked(|c| c.deps = mode);
    let mut kernels = KernelRegistry::new();
    for k in &plan.module().kernels {
        kernels.register(&k.name.name, |_| Ok(()));
    }
    let options = CompileOptions {
        threads,
        kernels,
        ..CompileOptions::default()
    };
    let mut program = compile(plan, options)?;
    let bindings = Bindings::new().symbol("seq", seq);
    println!(
        "ns per task: wall, build (to the last submission), run (to the last completion); \
         per thread (calling thread first): CPU / runnable-not-running ns per task, times scheduled in"
    );
    for _ in 0..runs {
        let before = sched_stats();
        let t0 = Instant::now();
        let s = program.execute(&bindings)?;
        let wall = t0.elapsed().as_nanos() as f64;
        let after = sched_stats();
        let n = s.tasks.max(1) as f64;
        let per_thread: Vec<String> = before
            .iter()
            .zip(&after)
            .map(|(a, b)| {
                format!(
                    "{:.0}/{:.0}/{}",
                    b[0].saturating_sub(a[0]) as f64 / n,
                    b[1].saturating_sub(a[1]) as f64 / n,
                    b[2].saturating_sub(a[2])
                )
            })
            .collect();
        println!(
            "wall {:.0} build {:.0} run {:.0} | window stalls {} high water {} | tasks per worker {:?} | {}",
            wall / n,
            s.build_ns as f64 / n,
            s.run_ns as f64 / n,
            s.counters.window_stalls,
            s.counters.in_flight_hwm,
            s.per_worker,
            per_thread.join("  ")
        );
    }
    Ok(())
}
