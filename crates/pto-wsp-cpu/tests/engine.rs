//! The CPU engine against independent references: random DAGs run under every ready policy,
//! pool split, placement, batching and thread count, finished or streamed, checked by a
//! recording executor (every task once; every edge's producer ended before its consumer
//! started); gates bound in-flight counts; failures stop the run cleanly and the pool runs again.

use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};

use proptest::prelude::*;
use pto_wsp_cpu::*;
use pto_wsp_graph::builder::GraphBuilder;
use pto_wsp_graph::ready::ReadyKind;
use pto_wsp_graph::{ExecDomain, TaskId};
use pto_wsp_ir::{DepsMode, ExecPool, GateScope, StartPolicy, Timing, WindowMode};

/// A random DAG: per task, its pool, affinity, stream and predecessors (all earlier).
#[derive(Clone, Debug)]
struct Dag {
    tasks: Vec<(ExecPool, Option<u32>, u32, Vec<u32>)>,
}

fn dag(n: usize, seed: u64) -> Dag {
    let mut x = seed | 1;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let tasks = (0..n)
        .map(|i| {
            let pool = [ExecPool::Any, ExecPool::Vector, ExecPool::Cube][(rnd() % 3) as usize];
            let aff = (rnd() % 2 == 0).then(|| (rnd() % 5) as u32);
            let k = if i == 0 { 0 } else { rnd() % 4 };
            let mut preds: Vec<u32> = (0..k).map(|_| (rnd() % i as u64) as u32).collect();
            preds.sort();
            preds.dedup();
            (pool, aff, (rnd() % 3) as u32, preds)
        })
        .collect();
    Dag { tasks }
}

fn emit<S: pto_wsp_graph::builder::EdgeSink>(
    d: &Dag,
    b: &mut GraphBuilder<pto_wsp_graph::tensor_map::AnyTensorMap, S>,
) {
    for (pool, aff, stream, preds) in &d.tasks {
        b.alloc_task(0, ExecDomain::default(), *pool, *stream, *aff);
        for &p in preds {
            b.add_explicit_dep(TaskId(p)).unwrap();
        }
        b.submit().unwrap();
    }
}

fn storage(d: &Dag) -> pto_wsp_graph::storage::TaskGraphStorage {
    let mut b = GraphBuilder::new(DepsMode::Explicit);
    emit(d, &mut b);
    b.finish()
}

/// Records a global start and end tick per task and in-flight counts per gate slot.
struct Recorder {
    clock: AtomicU64,
    start: Vec<AtomicU64>,
    end: Vec<AtomicU64>,
    runs: Vec<AtomicU32>,
    in_flight: Vec<AtomicI64>,
    max_in_flight: Vec<AtomicI64>,
    slot: Vec<usize>,
    fail_at: Option<u32>,
    panic_at: Option<u32>,
}

impl Recorder {
    fn new(n: usize, slot: Vec<usize>) -> Recorder {
        let v = |k: usize| (0..k).map(|_| AtomicU64::new(0)).collect::<Vec<_>>();
        Recorder {
            clock: AtomicU64::new(1),
            start: v(n),
            end: v(n),
            runs: (0..n).map(|_| AtomicU32::new(0)).collect(),
            in_flight: (0..4).map(|_| AtomicI64::new(0)).collect(),
            max_in_flight: (0..4).map(|_| AtomicI64::new(0)).collect(),
            slot,
            fail_at: None,
            panic_at: None,
        }
    }

    /// No task that depends on `failed` (directly or through others) ran, and `failed` ran once.
    fn check_nothing_after(&self, d: &Dag, failed: u32) {
        let mut after = vec![false; d.tasks.len()];
        after[failed as usize] = true;
        let mut descendants = 0;
        for (i, (_, _, _, preds)) in d.tasks.iter().enumerate().skip(failed as usize + 1) {
            if preds.iter().any(|&p| after[p as usize]) {
                after[i] = true;
                descendants += 1;
                assert_eq!(
                    self.runs[i].load(Ordering::SeqCst),
                    0,
                    "task {i} depends on failed task {failed} but ran"
                );
            }
        }
        assert!(
            descendants > 0,
            "the failing task has no dependants to check"
        );
        assert_eq!(self.runs[failed as usize].load(Ordering::SeqCst), 1);
    }

    fn check(&self, d: &Dag) {
        for (i, (_, _, _, preds)) in d.tasks.iter().enumerate() {
            assert_eq!(self.runs[i].load(Ordering::SeqCst), 1, "task {i} ran once");
            for &p in preds {
                assert!(
                    self.end[p as usize].load(Ordering::SeqCst)
                        < self.start[i].load(Ordering::SeqCst),
                    "edge {p} -> {i} violated"
                );
            }
        }
    }
}

impl Exec for Recorder {
    fn run(&self, t: TaskId, _w: usize) -> Result<(), TaskFailure> {
        let i = t.index();
        let s = self.slot.get(i).copied().unwrap_or(0);
        let now = self.in_flight[s].fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight[s].fetch_max(now, Ordering::SeqCst);
        self.start[i].store(self.clock.fetch_add(1, Ordering::SeqCst), Ordering::SeqCst);
        self.runs[i].fetch_add(1, Ordering::SeqCst);
        for _ in 0..(i % 7) * 20 {
            std::hint::spin_loop();
        }
        self.in_flight[s].fetch_sub(1, Ordering::SeqCst);
        self.end[i].store(self.clock.fetch_add(1, Ordering::SeqCst), Ordering::SeqCst);
        if self.fail_at == Some(t.0) {
            return Err(TaskFailure {
                index: None,
                kernel: "k".into(),
                message: "bad tile".into(),
                panicked: false,
            });
        }
        if self.panic_at == Some(t.0) {
            panic!("engine must survive an escaping panic");
        }
        Ok(())
    }
}

fn configs() -> Vec<RunConfig> {
    let mut v = Vec::new();
    for ready in [ReadyKind::Fifo, ReadyKind::WorkSteal, ReadyKind::Priority] {
        for pools in [PoolSplit::Single, PoolSplit::ByExecUnit { vector: 1 }] {
            for placement in [false, true] {
                for batch in [1, 3] {
                    v.push(RunConfig {
                        ready,
                        pools,
                        placement,
                        batch,
                        trace: batch == 3,
                        ..RunConfig::default()
                    });
                }
            }
        }
    }
    v
}

#[test]
fn finished_graphs_run_every_task_once_in_dependency_order() {
    // Five workers: more than the four of a source chunk's divisor `4 * workers` below which
    // some arithmetic slips go unseen.
    for threads in [1, 2, 4, 5] {
        let pool = WorkerPool::new(threads).unwrap();
        for (k, cfg) in configs().iter().enumerate() {
            let d = dag(300, 7 + k as u64 * 31 + threads as u64);
            let g = StaticGraph::new(storage(&d));
            for _ in 0..2 {
                let rec = Recorder::new(d.tasks.len(), vec![]);
                let stats = pool.run(&g, cfg, &rec).unwrap();
                rec.check(&d);
                assert_eq!(stats.tasks, d.tasks.len() as u64);
                assert_eq!(stats.per_worker.iter().sum::<u64>(), stats.tasks);
                if cfg.trace {
                    assert_eq!(stats.spans.len(), d.tasks.len());
                }
            }
        }
    }
}

#[test]
fn streamed_graphs_run_every_task_once_under_every_start_policy_and_window() {
    let starts = [
        StartPolicy::Immediate,
        StartPolicy::Threshold(50),
        StartPolicy::AfterOrchestration,
    ];
    let windows = [
        None,
        Some((8, WindowMode::Stall)),
        Some((1, WindowMode::Stall)),
        Some((4, WindowMode::Benchmark)),
    ];
    for threads in [1, 2, 4] {
        let pool = WorkerPool::new(threads).unwrap();
        for (k, cfg) in configs().iter().enumerate().step_by(3) {
            for start in starts {
                for window in windows {
                    let d = dag(200, 99 + k as u64 + threads as u64);
                    let rec = Recorder::new(d.tasks.len(), vec![]);
                    let table = TaskTable::new();
                    let sc = StreamConfig {
                        deps: DepsMode::Explicit,
                        start,
                        window,
                        ..StreamConfig::default()
                    };
                    let stats = pool
                        .run_streaming(&table, cfg, &sc, &rec, |b| {
                            emit(&d, b);
                            Ok(())
                        })
                        .unwrap();
                    rec.check(&d);
                    assert_eq!(stats.tasks, d.tasks.len() as u64);
                    if let Some((n, WindowMode::Stall)) = window {
                        assert!(stats.counters.in_flight_hwm <= n, "{stats:?}");
                    }
                    if let Some((_, WindowMode::Benchmark)) = window
                        && start == StartPolicy::AfterOrchestration
                    {
                        assert!(stats.counters.window_overflows > 0);
                    }
                }
            }
        }
    }
}

/// Every `timing` runs every task once after its predecessors, with and without a stalling
/// window and start gate; `batched(3)` holds exactly the tasks of the open group (released when
/// the group fills, or all at once before the orchestrator waits on the window: so exactly also
/// under a stalling window larger than the run, which never fills).
#[test]
fn streamed_runs_release_tasks_as_timing_says() {
    let timings = [
        Timing::Batched(3),
        Timing::Interleaved(2),
        Timing::RateLimit(50),
    ];
    for threads in [1, 2] {
        let pool = WorkerPool::new(threads).unwrap();
        for timing in timings {
            for window in [
                None,
                Some((1, WindowMode::Stall)),
                Some((8, WindowMode::Stall)),
                // Larger than the run: never full, so nothing but timing releases tasks.
                Some((1024, WindowMode::Stall)),
            ] {
                for start in [StartPolicy::Immediate, StartPolicy::AfterOrchestration] {
                    let d = dag(120, 7 + threads as u64);
                    let rec = Recorder::new(d.tasks.len(), vec![]);
                    let table = TaskTable::new();
                    let sc = StreamConfig {
                        deps: DepsMode::Explicit,
                        start,
                        window,
                        timing,
                        streams: 4,
                        ..StreamConfig::default()
                    };
                    let stats = pool
                        .run_streaming(&table, &RunConfig::default(), &sc, &rec, |b| {
                            for (i, (pool, aff, stream, preds)) in d.tasks.iter().enumerate() {
                                b.alloc_task(0, ExecDomain::default(), *pool, *stream, *aff);
                                for &p in preds {
                                    b.add_explicit_dep(TaskId(p)).unwrap();
                                }
                                b.submit().unwrap();
                                let held = b.sink().timing_held();
                                match (timing, window) {
                                    (Timing::Batched(n), None | Some((1024, _))) => {
                                        assert_eq!(held as u64, (i as u64 + 1) % n)
                                    }
                                    (Timing::Batched(n), Some(_)) => assert!((held as u64) < n),
                                    (Timing::RateLimit(_), _) => assert_eq!(held, 0),
                                    _ => {}
                                }
                            }
                            Ok(())
                        })
                        .unwrap();
                    rec.check(&d);
                    assert_eq!(stats.tasks, d.tasks.len() as u64);
                }
            }
        }
    }
}

/// A producer learns of a task failure through its sink (`failed`) while it is still
/// submitting, so it can stop early: here it submits one failing task and then waits for the
/// sink to say so (a regression hangs until the test runner's time limit). An `abort` window
/// (never full here) makes each task ready as it is submitted, not a batch at a time.
#[test]
fn a_streaming_producer_sees_a_task_failure_while_it_submits() {
    for threads in [1, 2] {
        let pool = WorkerPool::new(threads).unwrap();
        let mut rec = Recorder::new(1, vec![]);
        rec.fail_at = Some(0);
        let table = TaskTable::new();
        let sc = StreamConfig {
            deps: DepsMode::Explicit,
            window: Some((1024, WindowMode::Abort)),
            ..StreamConfig::default()
        };
        let mut seen = false;
        let err = pool
            .run_streaming(&table, &RunConfig::default(), &sc, &rec, |b| {
                // A probe kept by the producer says what the sink says: nothing failed before
                // the failing task is submitted, the failure once the sink reports it.
                let probe = b.sink().abort_probe();
                assert!(!probe.failed() && !b.sink().failed());
                b.alloc_task(0, ExecDomain::default(), ExecPool::Any, 0, None);
                b.submit().unwrap();
                while !b.sink().failed() {
                    std::thread::yield_now();
                }
                assert!(probe.failed());
                seen = true;
                Ok(())
            })
            .unwrap_err();
        assert!(seen);
        assert_eq!(err.to_string(), "task #0 (kernel `k`) failed: bad tile");
    }
}

/// An edge whose producer has already completed costs nothing: the sink refuses it and counts
/// it. The producer waits through the sink until tasks 0 and 1 completed, so both edges of task
/// 2 are refused (counted here: 0 before, 2 after), and the run reports two edges, none wired.
#[test]
fn edges_to_completed_tasks_are_refused_and_counted() {
    use pto_wsp_graph::builder::EdgeSink;
    for threads in [1, 2] {
        let pool = WorkerPool::new(threads).unwrap();
        let rec = Recorder::new(3, vec![]);
        let table = TaskTable::new();
        let sc = StreamConfig {
            deps: DepsMode::Explicit,
            ..StreamConfig::default()
        };
        let stats = pool
            .run_streaming(&table, &RunConfig::default(), &sc, &rec, |b| {
                let mut ids = Vec::new();
                for _ in 0..2 {
                    b.alloc_task(0, ExecDomain::default(), ExecPool::Any, 0, None);
                    ids.push(b.submit().unwrap());
                }
                assert!(b.sink_mut().wait_complete(&ids).is_some());
                assert_eq!(b.sink().refused_edges(), 0);
                b.alloc_task(0, ExecDomain::default(), ExecPool::Any, 0, None);
                for &p in &ids {
                    b.add_explicit_dep(p).unwrap();
                }
                b.submit().unwrap();
                assert_eq!(b.sink().refused_edges(), 2);
                Ok(())
            })
            .unwrap();
        rec.check(&Dag {
            tasks: vec![
                (ExecPool::Any, None, 0, vec![]),
                (ExecPool::Any, None, 0, vec![]),
                (ExecPool::Any, None, 0, vec![0, 1]),
            ],
        });
        assert_eq!(
            (stats.edges, stats.wired_edges),
            (2, 0),
            "{threads} threads"
        );
    }
}

/// Edges to completed tasks are either refused by the sink (a completed task the map still
/// names) or forgotten (readers the map pruned to a count): neither is wired. `READERS` tasks
/// read one tile, the producer waiting for each block of 1,024 to complete before the next, so
/// every retirement sees the blocks before it completed and the reader list is pruned as it
/// grows; then one task writes the tile. Its `READERS` write-after-read edges are all to
/// completed tasks: some forgotten, the rest refused, none wired, and it runs after every reader.
#[test]
fn edges_to_forgotten_and_refused_readers_are_both_left_unwired() {
    use pto_wsp_graph::builder::{EdgeSink, RETIRE_EVERY};
    use pto_wsp_graph::types::Access;
    const READERS: u32 = 3 * RETIRE_EVERY;
    for threads in [1, 2] {
        let pool = WorkerPool::new(threads).unwrap();
        let rec = Recorder::new(READERS as usize + 1, vec![]);
        let table = TaskTable::new();
        let mut refused = 0;
        let submit = |b: &mut StreamBuilder<'_>, access| {
            b.alloc_task(0, ExecDomain::default(), ExecPool::Any, 0, None);
            b.add_region(access, 0, &[0, 0], &[4, 4]).unwrap();
            b.submit().unwrap()
        };
        let stats = pool
            .run_streaming(
                &table,
                &RunConfig::default(),
                &StreamConfig::default(),
                &rec,
                |b| {
                    let mut block = Vec::new();
                    for _ in 0..READERS {
                        block.push(submit(b, Access::In));
                        if block.len() == 1024 {
                            assert!(b.sink_mut().wait_complete(&block).is_some());
                            block.clear();
                        }
                    }
                    assert!(b.sink_mut().wait_complete(&block).is_some());
                    submit(b, Access::Out);
                    refused = b.sink().refused_edges();
                    Ok(())
                },
            )
            .unwrap();
        let mut tasks = vec![(ExecPool::Any, None, 0, vec![]); READERS as usize];
        tasks.push((ExecPool::Any, None, 0, (0..READERS).collect()));
        rec.check(&Dag { tasks });
        let what = format!("{threads} threads");
        assert!(stats.edges_unnamed > 0, "{what}: no reader was forgotten");
        assert_eq!(stats.edges, u64::from(READERS), "{what}");
        assert_eq!(refused + stats.edges_unnamed, u64::from(READERS), "{what}");
        assert_eq!(stats.wired_edges, 0, "{what}");
    }
}

/// A producer that returns with a task allocated but not submitted leaves nothing behind: the
/// open task is dropped, the run ends once the submitted tasks completed (two here, each run
/// once in order), and the pool runs again.
#[test]
fn a_task_left_open_by_the_producer_is_dropped() {
    use pto_wsp_graph::types::Access;
    for threads in [1, 2] {
        let pool = WorkerPool::new(threads).unwrap();
        for run in 0..2 {
            let rec = Recorder::new(2, vec![]);
            let table = TaskTable::new();
            let sc = StreamConfig::default();
            let stats = pool
                .run_streaming(&table, &RunConfig::default(), &sc, &rec, |b| {
                    for k in 0..3 {
                        b.alloc_task(0, ExecDomain::default(), ExecPool::Any, 0, None);
                        b.add_region(Access::InOut, 0, &[0, 0], &[4, 4]).unwrap();
                        if k < 2 {
                            b.submit().unwrap();
                        }
                    }
                    Ok(())
                })
                .unwrap();
            let what = format!("{threads} threads, run {run}");
            assert_eq!(stats.tasks, 2, "{what}");
            rec.check(&Dag {
                tasks: vec![
                    (ExecPool::Any, None, 0, vec![]),
                    (ExecPool::Any, None, 0, vec![0]),
                ],
            });
        }
    }
}

#[test]
fn window_abort_fails_with_a_clear_error_and_the_pool_runs_again() {
    let pool = WorkerPool::new(2).unwrap();
    let d = dag(100, 5);
    let rec = Recorder::new(d.tasks.len(), vec![]);
    let table = TaskTable::new();
    let sc = StreamConfig {
        deps: DepsMode::Explicit,
        start: StartPolicy::AfterOrchestration,
        window: Some((4, WindowMode::Abort)),
        ..StreamConfig::default()
    };
    let err = pool
        .run_streaming(&table, &RunConfig::default(), &sc, &rec, |b| {
            for (pool, aff, stream, preds) in &d.tasks {
                if b.sink().failed() {
                    break;
                }
                b.alloc_task(0, ExecDomain::default(), *pool, *stream, *aff);
                for &p in preds {
                    b.add_explicit_dep(TaskId(p)).unwrap();
                }
                b.submit().unwrap();
            }
            Ok(())
        })
        .unwrap_err();
    assert_eq!(
        err,
        ExecError::WindowFull {
            capacity: 4,
            in_flight: 4
        }
    );
    assert!(err.to_string().contains("task window of 4 tasks is full"));
    let g = StaticGraph::new(storage(&d));
    let rec = Recorder::new(d.tasks.len(), vec![]);
    pool.run(&g, &RunConfig::default(), &rec).unwrap();
    rec.check(&d);
}

#[test]
fn gates_bound_in_flight_tasks_per_scope() {
    let d = Dag {
        tasks: (0..400)
            .map(|i| {
                (
                    [ExecPool::Vector, ExecPool::Cube][i % 2],
                    None,
                    (i % 3) as u32,
                    vec![],
                )
            })
            .collect(),
    };
    let pool = WorkerPool::new(4).unwrap();
    for (scope, depth) in [
        (GateScope::Global, 1),
        (GateScope::Global, 2),
        (GateScope::PerStream, 1),
        (GateScope::PerPool, 1),
    ] {
        let slot: Vec<usize> = d
            .tasks
            .iter()
            .map(|(p, _, s, _)| match scope {
                GateScope::Global => 0,
                GateScope::PerStream => *s as usize,
                GateScope::PerPool => (*p == ExecPool::Cube) as usize,
            })
            .collect();
        let rec = Recorder::new(d.tasks.len(), slot);
        let cfg = RunConfig {
            gate: Some(GateConfig {
                depth,
                scope,
                streams: 3,
            }),
            ..RunConfig::default()
        };
        let g = StaticGraph::new(storage(&d));
        pool.run(&g, &cfg, &rec).unwrap();
        rec.check(&d);
        for m in &rec.max_in_flight {
            assert!(
                m.load(Ordering::SeqCst) <= depth as i64,
                "{scope:?} {depth}"
            );
        }
    }
}

#[test]
fn a_failing_task_stops_the_run_with_its_error_and_the_pool_runs_again() {
    for threads in [1, 2, 4] {
        let pool = WorkerPool::new(threads).unwrap();
        let d = dag(500, 11);
        let g = StaticGraph::new(storage(&d));
        let mut rec = Recorder::new(d.tasks.len(), vec![]);
        rec.fail_at = Some(123);
        let err = pool.run(&g, &RunConfig::default(), &rec).unwrap_err();
        assert_eq!(err.to_string(), "task #123 (kernel `k`) failed: bad tile");
        // Nothing that depends on the failed task ran.
        rec.check_nothing_after(&d, 123);
        let mut rec2 = Recorder::new(d.tasks.len(), vec![]);
        rec2.panic_at = Some(7);
        let err = pool.run(&g, &RunConfig::default(), &rec2).unwrap_err();
        assert!(matches!(err, ExecError::Internal(ref m) if m.contains("engine must survive")));
        rec2.check_nothing_after(&d, 7);
        let rec3 = Recorder::new(d.tasks.len(), vec![]);
        pool.run(&g, &RunConfig::default(), &rec3).unwrap();
        rec3.check(&d);
        // Streamed runs fail the same way, even with a window the producer is stalled on.
        let mut rec4 = Recorder::new(d.tasks.len(), vec![]);
        rec4.fail_at = Some(40);
        let table = TaskTable::new();
        let sc = StreamConfig {
            deps: DepsMode::Explicit,
            window: Some((2, WindowMode::Stall)),
            ..StreamConfig::default()
        };
        let err = pool
            .run_streaming(&table, &RunConfig::default(), &sc, &rec4, |b| {
                emit(&d, b);
                Ok(())
            })
            .unwrap_err();
        assert!(err.to_string().starts_with("task #40"), "{err}");
        rec4.check_nothing_after(&d, 40);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(pto_wsp_ir::soak::cases(24)))]
    #[test]
    fn random_dags_any_policy(n in 1usize..400, seed in any::<u64>(), k in 0usize..24, threads in 1usize..4) {
        let cfg = &configs()[k];
        let d = dag(n, seed);
        let pool = WorkerPool::new(threads).unwrap();
        let rec = Recorder::new(n, vec![]);
        pool.run(&StaticGraph::new(storage(&d)), cfg, &rec).unwrap();
        rec.check(&d);
    }
}

/// Runs the tasks of a chain and checks they come in id order (each after its predecessor).
struct InOrder {
    next: AtomicU32,
}

impl Exec for InOrder {
    fn run(&self, t: TaskId, _w: usize) -> Result<(), TaskFailure> {
        let expected = self.next.fetch_add(1, Ordering::SeqCst);
        assert_eq!(t.0, expected, "a chain runs in order");
        Ok(())
    }
}

/// A streamed run of 100K tasks (one chain through one tile, inferred in exact mode) under a
/// window of 1,024 holds task state for a bounded number of tasks, freed behind the completed
/// prefix: at most the window, the tasks submitted between two looks at the prefix
/// (`RETIRE_EVERY`) and a chunk at either end, whatever the task count. Without a window,
/// starting after orchestration, it holds every task: the counter does count.
#[test]
fn a_streamed_run_under_a_window_holds_task_state_for_the_window_not_the_task_count() {
    use pto_wsp_graph::arena::CHUNK;
    use pto_wsp_graph::builder::RETIRE_EVERY;
    const N: u32 = 100_000;
    const WINDOW: u64 = 1024;
    let pool = WorkerPool::new(2).unwrap();
    let run = |window, start| {
        let table = TaskTable::new();
        let exec = InOrder {
            next: AtomicU32::new(0),
        };
        let sc = StreamConfig {
            deps: DepsMode::Exact,
            start,
            window,
            ..StreamConfig::default()
        };
        let stats = pool
            .run_streaming(&table, &RunConfig::default(), &sc, &exec, |b| {
                for _ in 0..N {
                    b.alloc_task(0, ExecDomain::default(), ExecPool::Any, 0, None);
                    b.add_region(pto_wsp_graph::types::Access::InOut, 0, &[0, 0], &[4, 4])
                        .unwrap();
                    b.add_param(7);
                    b.submit().unwrap();
                }
                Ok(())
            })
            .unwrap();
        assert_eq!(stats.tasks, u64::from(N));
        assert_eq!(exec.next.load(Ordering::SeqCst), N);
        // Order is what `InOrder` checks; the edge count is at most one per link, fewer when a
        // producer completed and was retired before its consumer looked it up (a streamed run
        // does not wire, or count, an edge to a finished task).
        assert!(
            stats.edges <= u64::from(N - 1),
            "at most one edge per chain link"
        );
        stats.held_tasks_peak
    };
    let bound = (WINDOW as usize + RETIRE_EVERY as usize + 2 * CHUNK + 2) as u64;
    assert!(bound <= 8 * WINDOW);
    let held = run(Some((WINDOW, WindowMode::Stall)), StartPolicy::Immediate);
    assert!(
        held <= bound,
        "held state for {held} tasks under a window of {WINDOW}"
    );
    let held = run(None, StartPolicy::AfterOrchestration);
    assert!(held >= u64::from(N), "held {held}");
}

/// Batched publication (the plain configuration: work stealing, no placement) holds ready
/// tasks for at most a batch of submissions, never across a wait: a producer that submits a
/// few tasks and then waits for them through the sink sees them complete, on one and two
/// workers, and a run of fewer tasks than a batch ends. Every task runs once, after its
/// predecessors (the random DAG's edges, checked by the recorder).
#[test]
fn a_producer_waiting_through_the_sink_sees_held_tasks_complete() {
    use pto_wsp_graph::builder::EdgeSink;
    for threads in [1, 2] {
        let pool = WorkerPool::new(threads).unwrap();
        for n in [1, 5, 300] {
            let d = dag(n, 31 + n as u64);
            let rec = Recorder::new(n, vec![]);
            let table = TaskTable::new();
            let sc = StreamConfig {
                deps: DepsMode::Explicit,
                ..StreamConfig::default()
            };
            let cfg = RunConfig::default();
            let stats = pool
                .run_streaming(&table, &cfg, &sc, &rec, |b| {
                    for (i, (_, _, stream, preds)) in d.tasks.iter().enumerate() {
                        b.alloc_task(0, ExecDomain::default(), ExecPool::Any, *stream, None);
                        for &p in preds {
                            b.add_explicit_dep(TaskId(p)).unwrap();
                        }
                        let t = b.submit().unwrap();
                        if i % 3 == 2 {
                            // Every third task: wait for it (and so for its predecessors).
                            assert!(b.sink_mut().wait_complete(&[t]).is_some());
                            assert_eq!(rec.runs[i].load(Ordering::SeqCst), 1, "task {i}");
                        }
                    }
                    Ok(())
                })
                .unwrap();
            rec.check(&d);
            assert_eq!(stats.tasks, n as u64);
        }
    }
}

/// Under the priority policy a lone worker runs the ready task of the highest key first, also
/// among the successors it has just released itself (it does not keep one as its next task):
/// the root's successors are released in id order with shuffled keys, so they run in the order
/// of their keys, highest first, which the test derives by sorting the keys. The same with placement on and
/// every task placed (on the one worker: to its own queue, ordered by key as well).
#[test]
fn the_priority_policy_orders_a_workers_own_successors() {
    let n = 8u32;
    for placement in [false, true] {
        let d = Dag {
            tasks: (0..n)
                .map(|i| {
                    (
                        ExecPool::Any,
                        placement.then_some(i % 3),
                        0,
                        if i == 0 { vec![] } else { vec![0] },
                    )
                })
                .collect(),
        };
        // Keys shuffled (not rising with ids), so neither release order nor its reverse is
        // the order of the keys.
        let keys: Vec<i64> = (0..i64::from(n)).map(|k| k * 3 % 8 * 10).collect();
        let g = StaticGraph::new(storage(&d)).with_priorities(keys.clone());
        let pool = WorkerPool::new(1).unwrap();
        let rec = Recorder::new(n as usize, vec![]);
        let cfg = RunConfig {
            ready: ReadyKind::Priority,
            placement,
            ..RunConfig::default()
        };
        pool.run(&g, &cfg, &rec).unwrap();
        rec.check(&d);
        let mut ran: Vec<u32> = (0..n).collect();
        ran.sort_by_key(|&t| rec.start[t as usize].load(Ordering::SeqCst));
        let mut expected: Vec<u32> = (1..n).collect();
        expected.sort_by_key(|&t| std::cmp::Reverse(keys[t as usize]));
        expected.insert(0, 0);
        assert_eq!(ran, expected, "placement {placement}");
    }
}

/// Records the worker each task ran on (`usize::MAX` before it ran).
struct OnWorker {
    worker: Vec<std::sync::atomic::AtomicUsize>,
}

impl OnWorker {
    fn new(n: usize) -> OnWorker {
        OnWorker {
            worker: (0..n)
                .map(|_| std::sync::atomic::AtomicUsize::new(usize::MAX))
                .collect(),
        }
    }

    fn of(&self, t: usize) -> usize {
        self.worker[t].load(Ordering::SeqCst)
    }
}

impl Exec for OnWorker {
    fn run(&self, t: TaskId, w: usize) -> Result<(), TaskFailure> {
        let before = self.worker[t.index()].swap(w, Ordering::SeqCst);
        assert_eq!(before, usize::MAX, "task {} ran twice", t.0);
        Ok(())
    }
}

/// The workers a task may run on, written out from the scheduling policy's rules: a pool split
/// of `vector` vector workers (the first ones) runs vector tasks on them and cube tasks on the
/// rest; a placed task (`target` set, placement on) runs on `target mod threads`, or under a
/// split on the `target mod n`-th of its pool's `n` workers.
fn allowed_workers(
    threads: usize,
    split: Option<usize>,
    pool: ExecPool,
    target: Option<u32>,
) -> Vec<usize> {
    let (lo, hi) = match (split, pool) {
        (Some(v), ExecPool::Vector) => (0, v),
        (Some(v), ExecPool::Cube) => (v, threads),
        _ => (0, threads),
    };
    match target {
        Some(a) => vec![lo + a as usize % (hi - lo)],
        None => (lo..hi).collect(),
    }
}

/// 96 tasks for the placement tests: the sources alternate vector, cube and any tasks, so every
/// chunk of sources a worker claims holds tasks it may not run (each must be routed to where it
/// may run); three of four have a dispatch target; half of the last third depend on an earlier
/// task (released tasks are routed too).
fn placed_tasks() -> Dag {
    let n = 96usize;
    Dag {
        tasks: (0..n)
            .map(|i| {
                let pool = [ExecPool::Vector, ExecPool::Cube, ExecPool::Any][i % 3];
                let target = (i % 4 != 3).then_some((i * 7 % 11) as u32);
                let preds = if i >= 64 && i % 2 == 0 {
                    vec![(i - 64) as u32]
                } else {
                    vec![]
                };
                (pool, target, 0, preds)
            })
            .collect(),
    }
}

/// Every task of `d` ran (on the worker `rec` saw) where its pool allows under `cfg`'s pool
/// split, and under FIFO and priority with placement exactly on the worker it is placed on;
/// nothing migrated unless work stealing may move a placed task.
fn check_placement(d: &Dag, threads: usize, cfg: &RunConfig, rec: &OnWorker, stats: &RunStats) {
    let split = match cfg.pools {
        PoolSplit::ByExecUnit { vector } => Some(vector),
        PoolSplit::Single => None,
    };
    assert_eq!(stats.tasks, d.tasks.len() as u64);
    let strict = cfg.placement && cfg.ready != ReadyKind::WorkSteal;
    for (t, (tp, target, _, _)) in d.tasks.iter().enumerate() {
        let w = rec.of(t);
        let pool_ok = allowed_workers(threads, split, *tp, None);
        assert!(
            pool_ok.contains(&w),
            "{cfg:?}: task {t} ({tp:?}) on worker {w}"
        );
        if strict {
            let placed = allowed_workers(threads, split, *tp, *target);
            assert!(
                placed.contains(&w),
                "{cfg:?}: task {t} ({tp:?}, target {target:?}) on worker {w}"
            );
        }
    }
    if strict || !cfg.placement {
        assert_eq!(stats.counters.migrations, 0, "{cfg:?}");
    }
}

/// Every task runs on a worker its pool allows under a pool split, and under FIFO and priority
/// with placement exactly on the worker it is placed on (under work stealing a placed task may
/// be stolen, within its pool, and counts as a migration; under FIFO and priority nothing
/// migrates), for a finished graph ([`placed_tasks`]).
#[test]
fn tasks_run_on_the_workers_their_pool_and_placement_allow() {
    let d = placed_tasks();
    let g = StaticGraph::new(storage(&d));
    for threads in [2, 3] {
        let pool = WorkerPool::new(threads).unwrap();
        for cfg in configs() {
            let rec = OnWorker::new(d.tasks.len());
            let stats = pool.run(&g, &cfg, &rec).unwrap();
            check_placement(&d, threads, &cfg, &rec, &stats);
        }
    }
}

/// The same rules for a streamed run, whose orchestrator routes the tasks it finds ready (and
/// hands them over one at a time, or all at once when the start gate opens at the end of
/// orchestration): the ready ring that takes them under plain routing must not take them
/// under a pool split or placement.
#[test]
fn streamed_tasks_run_on_the_workers_their_pool_and_placement_allow() {
    let d = placed_tasks();
    for threads in [2, 3] {
        let pool = WorkerPool::new(threads).unwrap();
        for cfg in configs() {
            for start in [StartPolicy::Immediate, StartPolicy::AfterOrchestration] {
                let rec = OnWorker::new(d.tasks.len());
                let table = TaskTable::new();
                let sc = StreamConfig {
                    deps: DepsMode::Explicit,
                    start,
                    ..StreamConfig::default()
                };
                let stats = pool
                    .run_streaming(&table, &cfg, &sc, &rec, |b| {
                        emit(&d, b);
                        Ok(())
                    })
                    .unwrap();
                check_placement(&d, threads, &cfg, &rec, &stats);
            }
        }
    }
}

/// Runs tasks `first` and up two at a time, on two different workers: each waits, spinning,
/// until two of them started (tasks below `first` run at once).
struct BothAtOnce {
    on: OnWorker,
    first: u32,
    started: AtomicU32,
}

impl Exec for BothAtOnce {
    fn run(&self, t: TaskId, w: usize) -> Result<(), TaskFailure> {
        self.on.run(t, w)?;
        if t.0 < self.first {
            return Ok(());
        }
        self.started.fetch_add(1, Ordering::SeqCst);
        while self.started.load(Ordering::SeqCst) < 2 {
            std::thread::yield_now();
        }
        Ok(())
    }
}

/// Under work stealing a placed task may run on another worker, and the run counts it: two
/// tasks placed on worker 1 that must run at the same time (each waits until both started)
/// cannot both run on worker 1, so one of them is taken by worker 0. The migration count is the
/// number of tasks that ran on a worker other than the one they were placed on, counted here.
#[test]
fn migrations_count_the_placed_tasks_another_worker_ran() {
    let d = Dag {
        tasks: vec![
            (ExecPool::Any, Some(1), 0, vec![]),
            (ExecPool::Any, Some(1), 0, vec![]),
        ],
    };
    let g = StaticGraph::new(storage(&d));
    let pool = WorkerPool::new(2).unwrap();
    for _ in 0..20 {
        let exec = BothAtOnce {
            on: OnWorker::new(2),
            first: 0,
            started: AtomicU32::new(0),
        };
        let cfg = RunConfig {
            placement: true,
            ..RunConfig::default()
        };
        let stats = pool.run(&g, &cfg, &exec).unwrap();
        let off = (0..2).filter(|&t| exec.on.of(t) != 1).count() as u64;
        assert_eq!(off, 1, "the two tasks ran on different workers");
        assert_eq!(stats.counters.migrations, off);
    }
}

/// Under work stealing with placement a worker that releases tasks keeps the one placed on
/// itself as its next task and queues one placed on another worker in that worker's inbox
/// (waking it): task 0 (not placed) releases tasks 1 and 2, one placed on each of the two
/// workers, which must run at the same time (each waits until both started). Whichever worker
/// ran task 0, each of them then runs on the worker it is placed on, so nothing migrates; the
/// worker running its own task cannot steal the other's before both started. Both orders of
/// the two targets are run, several times each (a worker that kept the first task it released
/// whatever its target would run it on the wrong worker for one of the orders).
#[test]
fn released_tasks_reach_the_workers_they_are_placed_on_under_work_stealing() {
    let pool = WorkerPool::new(2).unwrap();
    let cfg = RunConfig {
        placement: true,
        ..RunConfig::default()
    };
    for first in [0u32, 1] {
        let targets = [first, 1 - first];
        let d = Dag {
            tasks: vec![
                (ExecPool::Any, None, 0, vec![]),
                (ExecPool::Any, Some(targets[0]), 0, vec![0]),
                (ExecPool::Any, Some(targets[1]), 0, vec![0]),
            ],
        };
        let g = StaticGraph::new(storage(&d));
        for _ in 0..10 {
            let exec = BothAtOnce {
                on: OnWorker::new(3),
                first: 1,
                started: AtomicU32::new(0),
            };
            let stats = pool.run(&g, &cfg, &exec).unwrap();
            for (t, target) in [(1, targets[0]), (2, targets[1])] {
                assert_eq!(
                    exec.on.of(t),
                    target as usize,
                    "task {t} (targets {targets:?})"
                );
            }
            assert_eq!(stats.counters.migrations, 0);
        }
    }
}

/// Batched dependency resolution (`batch N`) resolves the completions of a worker `N` at a
/// time: a lone worker running independent tasks completes them one after another and resolves
/// them in batches of `N` and one of what is left, `ceil(n / N)` batches of all `n` tasks;
/// without batching (`N = 1`, here with tracing, so the run takes the general worker loop)
/// nothing is counted as batched.
#[test]
fn a_lone_worker_resolves_its_completions_a_batch_at_a_time() {
    let pool = WorkerPool::new(1).unwrap();
    for (n, batch) in [(9usize, 3u32), (10, 3), (7, 1), (5, 8)] {
        let d = Dag {
            tasks: (0..n).map(|_| (ExecPool::Any, None, 0, vec![])).collect(),
        };
        let g = StaticGraph::new(storage(&d));
        let rec = Recorder::new(n, vec![]);
        let cfg = RunConfig {
            batch,
            trace: true,
            ..RunConfig::default()
        };
        let stats = pool.run(&g, &cfg, &rec).unwrap();
        rec.check(&d);
        // Traced: one span per task, also without batching (the otherwise plain configuration).
        let mut traced: Vec<u32> = stats.spans.iter().map(|s| s.task).collect();
        traced.sort_unstable();
        assert_eq!(traced, (0..n as u32).collect::<Vec<_>>(), "batch {batch}");
        let (batches, batched) = if batch > 1 {
            (n.div_ceil(batch as usize) as u64, n as u64)
        } else {
            (0, 0)
        };
        assert_eq!(
            (stats.counters.batches, stats.counters.batched_tasks),
            (batches, batched),
            "{n} tasks, batch {batch}"
        );
    }
}

/// Task 0 waits until task 1 was submitted, task 1 until task 2 was submitted.
struct WaitsForSubmissions {
    submitted: [std::sync::atomic::AtomicBool; 3],
}

impl Exec for WaitsForSubmissions {
    fn run(&self, t: TaskId, _w: usize) -> Result<(), TaskFailure> {
        if let Some(next) = self.submitted.get(t.index() + 1) {
            while !next.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
        }
        Ok(())
    }
}

/// Under a task window a worker gives a completed task's slot back as it goes (every
/// `window / (2 * workers)` completions, here every one), not only when it runs out of work:
/// with a window of two on one worker, task 1 depends on task 0 and waits until task 2 was
/// submitted, which the window admits only once task 0's slot is free. A worker that kept the
/// slot until it was idle would wait in task 1 for the producer, which waits for the slot (a
/// regression hangs until the test runner's time limit).
#[test]
fn a_worker_gives_window_slots_back_before_it_runs_out_of_work() {
    let pool = WorkerPool::new(1).unwrap();
    let exec = WaitsForSubmissions {
        submitted: Default::default(),
    };
    let table = TaskTable::new();
    let sc = StreamConfig {
        deps: DepsMode::Explicit,
        window: Some((2, WindowMode::Stall)),
        ..StreamConfig::default()
    };
    let stats = pool
        .run_streaming(&table, &RunConfig::default(), &sc, &exec, |b| {
            for t in 0..3u32 {
                b.alloc_task(0, ExecDomain::default(), ExecPool::Any, 0, None);
                if t == 1 {
                    b.add_explicit_dep(TaskId(0)).unwrap();
                }
                b.submit().unwrap();
                exec.submitted[t as usize].store(true, Ordering::SeqCst);
            }
            Ok(())
        })
        .unwrap();
    assert_eq!(stats.tasks, 3);
    assert!(stats.counters.in_flight_hwm <= 2, "{stats:?}");
}

/// Random tasks over small boxes of three tensors (identical, nested and partly overlapping
/// boxes all occur), each with its accesses.
fn region_tasks(
    n: usize,
    seed: u64,
) -> Vec<Vec<(pto_wsp_graph::types::Region, pto_wsp_ir::Access)>> {
    use pto_wsp_graph::types::Region;
    use pto_wsp_ir::Access;
    let mut x = seed | 1;
    let mut rnd = move |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % m) as u32
    };
    (0..n)
        .map(|_| {
            (0..1 + rnd(4))
                .map(|_| {
                    let r = Region::new_2d(
                        rnd(3),
                        rnd(3) * 2,
                        (1 + rnd(2)) * 2,
                        rnd(3) * 2,
                        (1 + rnd(2)) * 2,
                    );
                    (r, [Access::In, Access::Out, Access::InOut][rnd(3) as usize])
                })
                .collect()
        })
        .collect()
}

/// The edges a new builder of `deps` / `exact` infers for `tasks`, as sorted `(pred, succ)`.
fn fresh_edges(
    tasks: &[Vec<(pto_wsp_graph::types::Region, pto_wsp_ir::Access)>],
    deps: DepsMode,
    exact: pto_wsp_graph::builder::ExactMap,
) -> Vec<(u32, u32)> {
    let mut b = GraphBuilder::with_exact_map(deps, exact);
    for t in tasks {
        b.alloc_task(0, ExecDomain::default(), ExecPool::Any, 0, None);
        for &(r, a) in t {
            b.add_access(r, a);
        }
        b.submit().unwrap();
    }
    let (preds, ends) = b.sink().preds();
    let (preds, ends) = (preds.to_vec(), ends.to_vec());
    let mut edges = Vec::new();
    let mut begin = 0usize;
    for (succ, &end) in ends.iter().enumerate() {
        edges.extend(preds[begin..end as usize].iter().map(|&p| (p, succ as u32)));
        begin = end as usize;
    }
    edges.sort_unstable();
    edges
}

/// Streamed runs on one table, one set of task states and one kept builder, one after the other
/// under changing dependency modes and exact maps and with different tasks: each infers exactly
/// the edges a new builder infers for its tasks (the kept TensorMap and buffers are emptied
/// between runs, and a run under another map configuration gets a map of its own).
#[test]
fn a_kept_builder_infers_in_every_run_what_a_new_builder_infers() {
    use pto_wsp_graph::builder::ExactMap;
    let mut runs = KeptRuns::new();
    assert!(!runs.kept.holds_parts());
    let modes = [
        (DepsMode::Hybrid, ExactMap::Growable),
        (DepsMode::Hybrid, ExactMap::Growable),
        (DepsMode::Exact, ExactMap::Growable),
        (DepsMode::Exact, ExactMap::Growable),
        (DepsMode::Exact, ExactMap::Dynamic),
        (DepsMode::Overlap, ExactMap::Growable),
        (DepsMode::Exact, ExactMap::Fixed(4096)),
        (DepsMode::Hybrid, ExactMap::Growable),
    ];
    for (k, &(deps, exact)) in modes.iter().enumerate() {
        let tasks = region_tasks(150 + 40 * k, 7 + k as u64);
        let sc = StreamConfig {
            deps,
            exact,
            record_edges: true,
            ..StreamConfig::default()
        };
        let stats = runs.run(&sc, &tasks).unwrap();
        assert_eq!(stats.tasks, tasks.len() as u64);
        let mut got = stats.edge_list.clone();
        got.sort_unstable();
        assert_eq!(
            got,
            fresh_edges(&tasks, deps, exact),
            "run {k}: {deps:?} {exact:?}"
        );
        assert!(runs.kept.holds_parts());
    }
}

/// One pool, task table, set of task states and kept builder, for streamed runs one after the
/// other (each run resets the table and the states first).
struct KeptRuns {
    pool: WorkerPool,
    table: TaskTable,
    states: pto_wsp_graph::state::TaskStates,
    kept: KeptBuilder,
}

impl KeptRuns {
    fn new() -> KeptRuns {
        KeptRuns {
            pool: WorkerPool::new(2).unwrap(),
            table: TaskTable::new(),
            states: pto_wsp_graph::state::TaskStates::new(),
            kept: KeptBuilder::new(),
        }
    }

    /// A streamed run under `sc` of `tasks`, each given as its regions.
    fn run(
        &mut self,
        sc: &StreamConfig,
        tasks: &[Vec<(pto_wsp_graph::types::Region, pto_wsp_ir::Access)>],
    ) -> Result<RunStats, ExecError> {
        self.table.reset();
        self.states.reset();
        self.pool.run_streaming_on(
            &self.table,
            &self.states,
            &mut self.kept,
            &RunConfig::default(),
            sc,
            &NoopExec,
            |b| {
                for t in tasks {
                    b.alloc_task(0, ExecDomain::default(), ExecPool::Any, 0, None);
                    for &(r, a) in t {
                        b.add_access(r, a);
                    }
                    b.submit().map_err(|e| ExecError::Build(e.to_string()))?;
                }
                Ok(())
            },
        )
    }
}

/// A kept builder's map is reused only by a run under the same map configuration: a bounded
/// exact map of 4 keys refuses a task of 5 regions (its capacity named), an unbounded or
/// growable one and a bounded one of 5 keys take it, whichever ran before on the same kept
/// builder.
#[test]
fn a_kept_builder_keeps_its_map_only_for_the_same_exact_map() {
    use pto_wsp_graph::builder::ExactMap;
    use pto_wsp_graph::types::Region;
    use pto_wsp_ir::Access;
    let mut runs = KeptRuns::new();
    let maps = [
        ExactMap::Dynamic,
        ExactMap::Fixed(4),
        ExactMap::Growable,
        ExactMap::Fixed(4),
        ExactMap::Fixed(5),
        ExactMap::Fixed(4),
        ExactMap::Dynamic,
    ];
    let task: Vec<_> = (0..5)
        .map(|tensor| (Region::new_2d(tensor, 0, 2, 0, 2), Access::Out))
        .collect();
    for exact in maps {
        let sc = StreamConfig {
            deps: DepsMode::Exact,
            exact,
            ..StreamConfig::default()
        };
        let full = exact == ExactMap::Fixed(4);
        match runs.run(&sc, std::slice::from_ref(&task)) {
            Ok(stats) => assert!(!full && stats.tasks == 1, "{exact:?}: {stats:?}"),
            Err(e) => assert!(
                full && e.to_string().contains("(4 entries)"),
                "{exact:?}: {e}"
            ),
        }
    }
}

/// Holds task 0 until the producer lets it go; records when each task starts.
struct HoldsFirst {
    go: std::sync::atomic::AtomicBool,
    rec: Recorder,
}

impl Exec for HoldsFirst {
    fn run(&self, t: TaskId, w: usize) -> Result<(), TaskFailure> {
        if t.0 == 0 {
            while !self.go.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
        }
        self.rec.run(t, w)
    }
}

/// Under the priority policy the tasks a streamed run's orchestrator makes ready are queued by
/// key, as the finished graph's are: a lone worker runs the ready task of the highest key
/// first. The worker is held in task 0 (highest key) while the producer submits 63
/// independent tasks; the orchestrator hands them over a batch of seals at a time (of
/// `BATCH` = 32 tasks, the first batch holding task 0, so at least tasks 1 to 32 were handed
/// over when task 0 is let go, and those of 33 on that were not yet come at the end). Tasks 1 to
/// 32 have shuffled keys, 33 to 63 lower keys falling in submission order, so whenever the
/// late ones arrive, the start order is determined: the keys sorted, highest first (derived
/// in the test by sorting). The same with placement on and every task placed (on the one
/// worker: to its own queue, ordered by key as well).
#[test]
fn the_priority_policy_orders_the_orchestrators_ready_tasks() {
    for placement in [false, true] {
        orchestrated_tasks_run_by_key(placement);
    }
}

fn orchestrated_tasks_run_by_key(placement: bool) {
    let n = 64u32;
    let key = |t: u32| -> i64 {
        match t {
            0 => 1_000,
            1..=32 => 100 + i64::from(t * 13 % 32),
            _ => i64::from(n - t),
        }
    };
    let pool = WorkerPool::new(1).unwrap();
    let exec = HoldsFirst {
        go: Default::default(),
        rec: Recorder::new(n as usize, vec![]),
    };
    let table = TaskTable::new();
    let sc = StreamConfig {
        deps: DepsMode::Explicit,
        ..StreamConfig::default()
    };
    let cfg = RunConfig {
        ready: ReadyKind::Priority,
        placement,
        ..RunConfig::default()
    };
    let stats = pool
        .run_streaming(&table, &cfg, &sc, &exec, |b| {
            let mut keys = table.priority_writer().unwrap();
            for t in 0..n {
                keys.push(key(t));
                let target = placement.then_some(t % 3);
                b.alloc_task(0, ExecDomain::default(), ExecPool::Any, 0, target);
                b.submit().unwrap();
            }
            exec.go.store(true, Ordering::SeqCst);
            Ok(())
        })
        .unwrap();
    assert_eq!(stats.tasks, u64::from(n));
    let mut ran: Vec<u32> = (0..n).collect();
    ran.sort_by_key(|&t| exec.rec.start[t as usize].load(Ordering::SeqCst));
    let mut expected: Vec<u32> = (0..n).collect();
    expected.sort_by_key(|&t| std::cmp::Reverse(key(t)));
    assert_eq!(ran, expected, "placement {placement}");
}
