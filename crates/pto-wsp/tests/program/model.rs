//! The cycle model follows the schedule: each directive changes the modelled figures as
//! `docs/SEMANTICS.md` says, checked against hand computations on eight independent tasks
//! `k(i)` of cost `10 + i` on four modelled executors (round robin: executor `i mod 4`).

use super::*;
use pto_wsp::cpu::CycleStats;

const TEXT: &str = "
tensor X: f32[64];
axis I = dense(8);
kernel k(inout x: f32[1], i: i64);
workload main() {
    parallel_for i in I {
        task k(X[i], i);
    }
}
schedule for main {
    SCHED
    task_graph {
        deps overlap;
        trace cycles(10 + i);
        READY
    }
}
";

fn model(sched: &str, ready: &str, issue_cycles: u64) -> Result<CycleStats, RunError> {
    let sched = if sched.contains("executors") {
        sched.to_string()
    } else {
        format!("executors 4; {sched}")
    };
    let module = parse(&TEXT.replace("SCHED", &sched).replace("READY", ready)).unwrap();
    let mut r = KernelRegistry::new();
    r.register("k", |_| Ok(()));
    let mut p = compile(
        lower(&module).unwrap(),
        CompileOptions {
            threads: 2,
            kernels: r,
            issue_cycles,
            ..CompileOptions::default()
        },
    )
    .unwrap();
    Ok(p.execute(&Bindings::new())?.cycles.unwrap())
}

fn cycles(sched: &str, ready: &str, issue_cycles: u64) -> CycleStats {
    model(sched, ready, issue_cycles).unwrap()
}

const WORK: u64 = 8 * 10 + 28;

#[test]
fn placement_gates_and_windows() {
    // Round robin: executor e runs tasks e and e + 4; the last ends at 13 + 17.
    let base = cycles("", "", 0);
    assert_eq!((base.total_cycles, base.work_cycles), (30, WORK));
    // One task at a time: the sum of the costs.
    assert_eq!(cycles("pipeline_depth 1 global;", "", 0).total_cycles, WORK);
    // One per stream (stream = index mod 2): the even chain 10+12+14+16 beside the odd one.
    assert_eq!(
        cycles("streams 2; pipeline_depth 1 per_stream;", "", 0).total_cycles,
        56
    );
    // Two in flight: task j + 2 is submitted when task j finishes: chains (0 2 4 6), (1 3 5 7).
    assert_eq!(cycles("task_window 2 stall;", "", 0).total_cycles, 56);
    let b = cycles("task_window 2 benchmark;", "", 0);
    assert_eq!((b.total_cycles, b.window_overflows), (30, 6));
    let e = model("task_window 2 abort;", "", 0)
        .unwrap_err()
        .to_string();
    // The host run or, when its workers kept up, the model fails naming the window.
    assert!(e.contains("window") && e.contains("abort"), "{e}");
}

#[test]
fn dispatch_targets_hold_unless_work_is_stolen() {
    let pinned = cycles("dispatch affinity(0);", "", 0);
    assert_eq!((pinned.total_cycles, pinned.migrations), (WORK, 0));
    assert_eq!(pinned.busy, vec![WORK, 0, 0, 0]);
    // Work stealing: executor 0 takes its newest (7, then 6); the others steal the oldest:
    // 0, 1, 2 at 0; 3, 4, 5 at 10, 11, 12 (ending 23, 25, 27); 6 runs 17..33.
    let stolen = cycles("dispatch affinity(0);", "ready work_steal;", 0);
    assert_eq!((stolen.total_cycles, stolen.migrations), (33, 6));
}

#[test]
fn priority_orders_ready_tasks() {
    let order = |ready: &str| {
        let c = cycles("dispatch affinity(0);", ready, 0);
        let mut ids: Vec<usize> = (0..8).collect();
        ids.sort_by_key(|&t| c.starts[t]);
        ids
    };
    assert_eq!(order(""), (0..8).collect::<Vec<_>>());
    assert_eq!(
        order("ready priority(i);"),
        (0..8).rev().collect::<Vec<_>>()
    );
}

#[test]
fn start_policies_and_timing_with_orchestration_cost() {
    // Orchestration submits task i at 5 (i + 1).
    let c = cycles("", "", 5);
    assert_eq!((c.starts[0], c.starts[7], c.total_cycles), (5, 40, 57));
    assert_eq!(c.orchestration_cycles, 40);
    let c = cycles("", "start after_orchestration;", 5);
    assert_eq!((c.starts[0], c.total_cycles), (40, 70));
    let c = cycles("", "start threshold(4);", 5);
    assert_eq!((c.starts[0], c.starts[3], c.starts[4]), (20, 20, 30));
    // Groups of four: released at 20 and 40.
    let c = cycles("timing batched(4);", "", 5);
    assert_eq!(
        (c.starts[0], c.starts[3], c.starts[4], c.total_cycles),
        (20, 20, 40, 57)
    );
    // Two releases per 1000 cycles.
    let c = cycles("timing rate_limit(2);", "", 0);
    assert_eq!(c.starts, vec![0, 0, 1000, 1000, 2000, 2000, 3000, 3000]);
    assert_eq!(c.total_cycles, 3017);
}

#[test]
fn interleaved_timing_alternates_streams() {
    let order = |timing: &str| {
        let c = cycles(
            &format!("executors 1; streams 2; stream_by i / 4; {timing}"),
            "",
            0,
        );
        let mut ids: Vec<usize> = (0..8).collect();
        ids.sort_by_key(|&t| c.starts[t]);
        ids
    };
    assert_eq!(order(""), (0..8).collect::<Vec<_>>());
    assert_eq!(
        order("timing interleaved(2);"),
        vec![0, 1, 4, 5, 2, 3, 6, 7]
    );
}

/// `examples/csp_pipeline.wsp` with 4 tiles under `trace cycles`: a clock per process, channels
/// of depth 2. With stage costs load 10, compute 30, store 5 the computer paces the pipeline:
/// it takes tile k at 10 + 30k, so the storer ends at 10 + 4 · 30 + 5. With load 5, compute 5,
/// store 30 the storer does: it takes tile k at 10 + 30k (tile 0 when it is computed, at 10),
/// so it ends at 10 + 4 · 30.
#[test]
fn a_csp_pipeline_is_modelled_with_a_clock_per_process() {
    let path = format!(
        "{}/../../examples/csp_pipeline.wsp",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(path)
        .unwrap()
        .replace("deps exact;", "deps exact;\n        trace cycles;");
    let module = parse(&text).unwrap();
    let b = Bindings::new().symbol("ntiles", 4i64).symbol("nbuf", 4i64);
    for ((load, compute, store), total) in
        [((10, 30, 5), 10 + 4 * 30 + 5), ((5, 5, 30), 10 + 4 * 30)]
    {
        let mut r = KernelRegistry::new();
        for (name, cost) in [
            ("load_tile", load),
            ("compute_tile", compute),
            ("store_tile", store),
        ] {
            r.register(name, |_| Ok(()));
            r.set_cost(name, move |_| cost);
        }
        let mut p = compile(
            lower(&module).unwrap(),
            CompileOptions {
                kernels: r,
                ..CompileOptions::default()
            },
        )
        .unwrap();
        let c = p
            .execute(&b)
            .unwrap()
            .cycles
            .expect("the pipeline is modelled");
        assert_eq!(c.total_cycles, total, "costs {load} {compute} {store}");
        assert_eq!(c.busy, vec![4 * load, 4 * compute, 4 * store]);
        assert_eq!(c.work_cycles, 4 * (load + compute + store));
    }
}
