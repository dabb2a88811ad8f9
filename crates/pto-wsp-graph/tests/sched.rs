//! Integration tests of the scheduling core with real threads: the streaming protocol under a
//! builder racing its workers on random DAGs (every policy, with and without batching and a
//! stalling window), queue orders, exactly-once stealing, window modes, gate bounds and batcher
//! flushes. No sleeps and no timing assertions: threads synchronise through the structures
//! under test, channels and counters.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, mpsc};
use std::thread;

use pto_wsp_graph::ExecDomain;
use pto_wsp_graph::TaskId;
use pto_wsp_graph::batcher::DepBatcher;
use pto_wsp_graph::builder::{EdgeSink, GraphBuilder};
use pto_wsp_graph::counters::{Counters, pool_index};
use pto_wsp_graph::gate::IssueGate;
use pto_wsp_graph::ready::{ReadyKind, ReadyQueueSet};
use pto_wsp_graph::start::StartGate;
use pto_wsp_graph::state::{TaskStates, Wiring};
use pto_wsp_graph::tensor_map::DynamicExactMap;
use pto_wsp_graph::types::Region;
use pto_wsp_graph::window::{WindowError, WindowState};
use pto_wsp_ir::{ExecPool, GateScope, StartPolicy, WindowMode};

/// Put one in every spawned thread: a failed assertion in one thread would otherwise leave the
/// others waiting forever for work that will never come. After the panic message is printed, the
/// process aborts, so a broken protocol fails the run loudly instead of hanging it.
struct AbortOnPanic;

impl Drop for AbortOnPanic {
    fn drop(&mut self) {
        if thread::panicking() {
            std::process::abort();
        }
    }
}

/// Sizes shrink under Miri (interpreted threads are slow); the shapes stay the same.
fn scale(n: usize) -> usize {
    if cfg!(miri) { (n / 40).max(40) } else { n }
}

/// splitmix64: a tiny deterministic generator for test data.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A random DAG: each task has up to 4 predecessors among the 48 tasks before it (duplicates
/// allowed, as a builder may report the same producer twice).
fn random_dag(n: usize, seed: u64) -> Vec<Vec<u32>> {
    let mut rng = Rng(seed);
    (0..n)
        .map(|t| {
            if t == 0 {
                return vec![];
            }
            let k = rng.below(5);
            (0..k)
                .map(|_| (t as u64 - 1 - rng.below((t as u64).min(48))) as u32)
                .collect()
        })
        .collect()
}

fn pool_of(t: TaskId) -> ExecPool {
    match t.0 % 3 {
        0 => ExecPool::Vector,
        1 => ExecPool::Cube,
        _ => ExecPool::Any,
    }
}

const NOT_RUN: u64 = u64::MAX;

/// Build a random DAG on one thread while `workers` threads run it; check every task ran exactly
/// once and after all its predecessors.
fn stress(
    kind: ReadyKind,
    workers: usize,
    batch: usize,
    window: Option<usize>,
    n: usize,
    seed: u64,
) {
    let preds = random_dag(n, seed);
    let counters = Arc::new(Counters::new(workers + 1));
    let states = TaskStates::new();
    let ready = ReadyQueueSet::new(kind, workers, counters.clone());
    let window = window.map(|c| WindowState::new(c, WindowMode::Stall, counters.clone()));
    let seq = AtomicU64::new(0);
    let order: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(NOT_RUN)).collect();
    let runs: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
    let completed = AtomicUsize::new(0);

    thread::scope(|s| {
        s.spawn(|| {
            let _guard = AbortOnPanic;
            let mut sink = Wiring::new(&states, |t| {
                ready.push_with_priority(pool_of(t), t, -i64::from(t.0 % 7))
            });
            for (t, ps) in preds.iter().enumerate() {
                if let Some(w) = &window {
                    w.enter().expect("stall mode never fails");
                }
                for &p in ps {
                    sink.edge(TaskId(p), TaskId(t as u32));
                }
                sink.submitted(TaskId(t as u32));
            }
        });
        for w in 0..workers {
            let (states, ready, window, preds) = (&states, &ready, &window, &preds);
            let (seq, order, runs, completed, counters) =
                (&seq, &order, &runs, &completed, &counters);
            s.spawn(move || {
                let _guard = AbortOnPanic;
                let mut local = ready.local(w).expect("one handle per worker");
                let mut batcher = DepBatcher::new(batch, counters.clone());
                let mut newly = Vec::new();
                loop {
                    let got = match w % 3 {
                        0 => local.try_pop(ExecPool::Vector),
                        1 => local.try_pop(ExecPool::Cube),
                        _ => local.try_pop_any(),
                    };
                    let resolved = match got {
                        Some(t) => {
                            for &p in &preds[t.index()] {
                                assert_ne!(
                                    order[p as usize].load(Relaxed),
                                    NOT_RUN,
                                    "task {} started before its predecessor {p} ran",
                                    t.0
                                );
                            }
                            assert_eq!(
                                runs[t.index()].fetch_add(1, Relaxed),
                                0,
                                "task {} ran twice",
                                t.0
                            );
                            order[t.index()].store(seq.fetch_add(1, Relaxed), Relaxed);
                            batcher.add(states, t, |r| newly.push(r))
                        }
                        None => {
                            let k = batcher.flush(states, |r| newly.push(r));
                            if k == 0 && newly.is_empty() {
                                if completed.load(Relaxed) == n {
                                    break;
                                }
                                thread::yield_now();
                            }
                            k
                        }
                    };
                    for r in newly.drain(..) {
                        local.push_with_priority(pool_of(r), r, -i64::from(r.0 % 7));
                    }
                    if resolved > 0 {
                        if let Some(win) = window {
                            win.leave_n(resolved);
                        }
                        completed.fetch_add(resolved, Relaxed);
                    }
                }
                assert_eq!(batcher.pending(), 0);
            });
        }
    });

    for (t, ps) in preds.iter().enumerate() {
        assert_eq!(
            runs[t].load(Relaxed),
            1,
            "task {t} ran {} times",
            runs[t].load(Relaxed)
        );
        let mine = order[t].load(Relaxed);
        for &p in ps {
            assert!(
                order[p as usize].load(Relaxed) < mine,
                "task {t} ran before its predecessor {p}"
            );
        }
        assert!(states.is_complete(TaskId(t as u32)));
    }
    let snap = counters.snapshot();
    assert_eq!(snap.ready_pushes.iter().sum::<u64>(), n as u64);
    assert_eq!(snap.ready_pops.iter().sum::<u64>(), n as u64);
    if let Some(w) = &window {
        assert_eq!(w.in_flight(), 0);
        assert!(w.high_water() <= w.capacity());
        assert_eq!(snap.tasks_submitted, n as u64);
        assert_eq!(snap.tasks_completed, n as u64);
    }
    if batch > 1 {
        assert!(snap.batches > 0);
        assert_eq!(snap.batched_tasks, n as u64);
    }
}

#[test]
fn protocol_stress_fifo() {
    stress(ReadyKind::Fifo, 4, 1, None, 4000, 1);
}

#[test]
fn protocol_stress_work_steal() {
    stress(ReadyKind::WorkSteal, 4, 1, None, 4000, 2);
}

#[test]
fn protocol_stress_priority() {
    stress(ReadyKind::Priority, 3, 1, None, 4000, 3);
}

#[test]
fn protocol_stress_batched_with_stalling_window() {
    stress(ReadyKind::WorkSteal, 4, 8, Some(16), 4000, 4);
    stress(ReadyKind::Fifo, 3, 5, Some(8), 3000, 5);
}

#[test]
fn protocol_stress_many_seeds() {
    for seed in 10..20 {
        stress(
            ReadyKind::WorkSteal,
            3,
            1 + (seed as usize % 4),
            Some(32),
            600,
            seed,
        );
    }
}

#[test]
fn fifo_pops_in_push_order() {
    let set = ReadyQueueSet::new(ReadyKind::Fifo, 1, Arc::new(Counters::new(1)));
    for t in 0..1000 {
        set.push(ExecPool::Vector, TaskId(t));
    }
    let got: Vec<u32> = std::iter::from_fn(|| set.try_pop(ExecPool::Vector))
        .map(|t| t.0)
        .collect();
    assert_eq!(got, (0..1000).collect::<Vec<_>>());
}

#[test]
fn fifo_concurrent_consumers_see_push_order_exactly_once() {
    let n = scale(20_000) as u32;
    let set = ReadyQueueSet::new(ReadyKind::Fifo, 3, Arc::new(Counters::new(4)));
    let taken: Vec<AtomicU8> = (0..n).map(|_| AtomicU8::new(0)).collect();
    let total = AtomicUsize::new(0);
    thread::scope(|s| {
        s.spawn(|| {
            let _guard = AbortOnPanic;
            for t in 0..n {
                set.push(ExecPool::Any, TaskId(t));
            }
        });
        for _ in 0..3 {
            s.spawn(|| {
                let _guard = AbortOnPanic;
                let mut last = None;
                while total.load(Relaxed) < n as usize {
                    match set.try_pop(ExecPool::Cube) {
                        Some(t) => {
                            assert!(last < Some(t.0), "FIFO order violated");
                            last = Some(t.0);
                            assert_eq!(taken[t.index()].fetch_add(1, Relaxed), 0);
                            total.fetch_add(1, Relaxed);
                        }
                        None => thread::yield_now(),
                    }
                }
            });
        }
    });
    assert!(taken.iter().all(|c| c.load(Relaxed) == 1));
}

#[test]
fn work_steal_exactly_once_under_contention() {
    let n = scale(20_000) as u32;
    const WORKERS: usize = 4;
    // Every fourth root spawns one child (id `n + root`) pushed onto the finder's own deque, so
    // thieves have deques to steal from, not just the injector.
    let children = n.div_ceil(4);
    let total = (n + children) as usize;
    let counters = Arc::new(Counters::new(WORKERS + 1));
    let set = ReadyQueueSet::new(ReadyKind::WorkSteal, WORKERS, counters.clone());
    let taken: Vec<AtomicU8> = (0..n + n).map(|_| AtomicU8::new(0)).collect();
    let done = AtomicUsize::new(0);
    thread::scope(|s| {
        s.spawn(|| {
            let _guard = AbortOnPanic;
            for t in 0..n {
                if t % 2 == 0 {
                    set.push(ExecPool::Vector, TaskId(t));
                } else {
                    set.push_to(t as usize % WORKERS, ExecPool::Vector, TaskId(t));
                }
            }
        });
        for w in 0..WORKERS {
            let (set, taken, done) = (&set, &taken, &done);
            s.spawn(move || {
                let _guard = AbortOnPanic;
                let mut local = set.local(w).unwrap();
                while done.load(Relaxed) < total {
                    match local.try_pop(ExecPool::Vector) {
                        Some(t) => {
                            assert_eq!(taken[t.index()].fetch_add(1, Relaxed), 0, "{t:?} twice");
                            if t.0 < n && t.0 % 4 == 0 {
                                local.push(ExecPool::Vector, TaskId(n + t.0));
                            }
                            done.fetch_add(1, Relaxed);
                        }
                        None => thread::yield_now(),
                    }
                }
            });
        }
    });
    let ran = taken.iter().filter(|c| c.load(Relaxed) == 1).count();
    assert_eq!(ran, total);
    let snap = counters.snapshot();
    assert_eq!(snap.ready_pops[pool_index(ExecPool::Vector)], total as u64);
    assert_eq!(
        snap.ready_pushes[pool_index(ExecPool::Vector)],
        total as u64
    );
}

#[test]
fn affinity_push_reaches_the_chosen_worker_first() {
    let set = ReadyQueueSet::new(ReadyKind::WorkSteal, 3, Arc::new(Counters::new(1)));
    let mut w1 = set.local(1).unwrap();
    let mut w2 = set.local(2).unwrap();
    set.push_to(2, ExecPool::Cube, TaskId(5));
    set.push(ExecPool::Cube, TaskId(6));
    // Worker 2 drains its inbox before the global injector.
    assert_eq!(w2.try_pop(ExecPool::Cube), Some(TaskId(5)));
    set.push_to(2, ExecPool::Cube, TaskId(7));
    // Worker 1 takes global work first, then steals from worker 2's inbox.
    assert_eq!(w1.try_pop(ExecPool::Cube), Some(TaskId(6)));
    assert_eq!(w1.try_pop(ExecPool::Cube), Some(TaskId(7)));
    assert_eq!(w1.try_pop(ExecPool::Cube), None);
    assert_eq!(w2.try_pop(ExecPool::Cube), None);
}

#[test]
fn work_steal_local_is_lifo() {
    let set = ReadyQueueSet::new(ReadyKind::WorkSteal, 2, Arc::new(Counters::new(1)));
    let mut w0 = set.local(0).unwrap();
    let mut w1 = set.local(1).unwrap();
    for t in 0..4 {
        w0.push(ExecPool::Any, TaskId(t));
    }
    assert_eq!(w0.try_pop_any(), Some(TaskId(3)));
    // A thief takes the oldest.
    assert_eq!(w1.try_pop_any(), Some(TaskId(0)));
    assert_eq!(w0.try_pop_any(), Some(TaskId(2)));
}

/// Under work stealing a thief finds tasks held in any other worker's deque (every victim of
/// every thief of three workers; a thief takes the oldest), a task in a worker's inbox counts
/// as queued, and the handles' own traffic reaches the counters when they drop: pushes, pops,
/// one steal, the deepest deque. Tasks left in a dropped handle's deque move to the shared
/// queues and are found again. Every expected number is counted here by hand.
#[test]
fn work_steal_thieves_reach_every_victim_and_counts_add_up() {
    let v = pool_index(ExecPool::Vector);
    for victim in 0..3 {
        for thief in (0..3).filter(|&t| t != victim) {
            let counters = Arc::new(Counters::new(3));
            let set = ReadyQueueSet::new(ReadyKind::WorkSteal, 3, counters.clone());
            let mut handles: Vec<_> = (0..3).map(|w| set.local(w).unwrap()).collect();
            let workers: Vec<usize> = handles.iter().map(|h| h.worker()).collect();
            assert_eq!(workers, [0, 1, 2], "each handle knows its worker");
            assert!(!set.has_work_for(ExecPool::Any));
            for t in 0..3 {
                handles[victim].push(ExecPool::Vector, TaskId(t));
            }
            assert_eq!(set.len(), 3);
            assert!(set.has_work_for(ExecPool::Vector));
            assert!(set.has_work_for(ExecPool::Any));
            assert!(!set.has_work_for(ExecPool::Cube));
            let got = handles[thief].try_pop(ExecPool::Vector);
            assert_eq!(got, Some(TaskId(0)), "thief {thief}, victim {victim}");
            // One task waits in the thief's inbox, none in the injector.
            set.push_to(thief, ExecPool::Cube, TaskId(9));
            assert_eq!(set.len(), 3);
            assert!(set.has_work_for(ExecPool::Cube));
            drop(handles);
            let snap = counters.snapshot();
            assert_eq!(snap.ready_pushes[v], 3, "the victim's own pushes");
            assert_eq!(snap.ready_pops[v], 1, "the thief's pop");
            assert_eq!(snap.steals, 1);
            assert_eq!(snap.ready_len_hwm, 3, "the victim's deque held three");
            // The victim's two tasks went to the injector when its handle dropped.
            let mut w = set.local(victim).unwrap();
            let mut rest = vec![w.try_pop(ExecPool::Vector), w.try_pop(ExecPool::Vector)];
            rest.sort();
            assert_eq!(rest, vec![Some(TaskId(1)), Some(TaskId(2))]);
            assert_eq!(
                w.try_pop(ExecPool::Cube),
                Some(TaskId(9)),
                "stolen from the inbox"
            );
            assert!(set.is_empty());
            assert!(!set.has_work_for(ExecPool::Any));
        }
    }
}

#[test]
fn priority_pops_highest_key_then_submission_order() {
    let set = ReadyQueueSet::new(ReadyKind::Priority, 1, Arc::new(Counters::new(1)));
    let mut rng = Rng(7);
    let mut expect: Vec<(i64, u32)> = Vec::new();
    for t in 0..500u32 {
        let key = rng.below(10) as i64 - 5;
        set.push_with_priority(ExecPool::Vector, TaskId(t), key);
        expect.push((key, t));
    }
    expect.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let got: Vec<u32> = std::iter::from_fn(|| set.try_pop(ExecPool::Vector))
        .map(|t| t.0)
        .collect();
    assert_eq!(got, expect.iter().map(|e| e.1).collect::<Vec<_>>());
}

#[test]
fn priority_worker_takes_better_of_pool_and_any() {
    let set = ReadyQueueSet::new(ReadyKind::Priority, 1, Arc::new(Counters::new(1)));
    set.push_with_priority(ExecPool::Vector, TaskId(1), 3);
    set.push_with_priority(ExecPool::Any, TaskId(2), 9);
    set.push_with_priority(ExecPool::Cube, TaskId(3), 100);
    assert_eq!(set.try_pop(ExecPool::Vector), Some(TaskId(2)));
    assert_eq!(set.try_pop(ExecPool::Vector), Some(TaskId(1)));
    assert_eq!(set.try_pop(ExecPool::Vector), None);
    assert_eq!(set.try_pop(ExecPool::Cube), Some(TaskId(3)));
}

#[test]
fn window_abort_names_the_window() {
    let counters = Arc::new(Counters::new(1));
    let w = WindowState::new(8192, WindowMode::Abort, counters.clone());
    for _ in 0..8192 {
        w.enter().unwrap();
    }
    let err = w.enter().unwrap_err();
    assert_eq!(
        err,
        WindowError::Full {
            capacity: 8192,
            in_flight: 8192
        }
    );
    assert_eq!(
        err.to_string(),
        "task window of 8192 is full (8192 tasks in flight) — mode abort"
    );
    assert_eq!(counters.snapshot().window_overflows, 1);
    assert_eq!(w.in_flight(), 8192);
}

#[test]
fn window_stall_blocks_until_a_completion() {
    let counters = Arc::new(Counters::new(2));
    let w = WindowState::new(2, WindowMode::Stall, counters.clone());
    w.enter().unwrap();
    w.enter().unwrap();
    assert_eq!(w.stalled(), 0, "nobody has stalled yet");
    let (tx, rx) = mpsc::channel();
    thread::scope(|s| {
        s.spawn(|| {
            let _guard = AbortOnPanic;
            w.enter().unwrap();
            tx.send(()).unwrap();
        });
        // Wait until the submitter has registered as stalled (a counter, not a clock).
        while w.stalled() == 0 {
            thread::yield_now();
        }
        assert_eq!(counters.snapshot().window_stalls, 1);
        assert!(
            rx.try_recv().is_err(),
            "the stalled submitter returned while the window was full"
        );
        assert_eq!(w.in_flight(), 2);
        w.leave();
        rx.recv().unwrap();
    });
    assert_eq!(w.in_flight(), 2);
    assert_eq!(w.high_water(), 2);
    assert_eq!(
        w.stalled(),
        0,
        "the released submitter no longer counts as stalled"
    );
}

/// A window reports the size (0 taken as 1) and mode it was made with.
#[test]
fn window_reports_its_capacity_and_mode() {
    let counters = Arc::new(Counters::new(1));
    for (size, mode) in [
        (3, WindowMode::Abort),
        (5, WindowMode::Benchmark),
        (7, WindowMode::Stall),
    ] {
        let w = WindowState::new(size, mode, counters.clone());
        assert_eq!((w.capacity(), w.mode()), (size, mode));
    }
    let w = WindowState::new(0, WindowMode::Abort, counters);
    assert_eq!(w.capacity(), 1);
    w.enter().unwrap();
    assert!(w.enter().is_err());
}

/// Closing a window (the run failed) wakes a submitter stalled on it with `Closed`, and every
/// later entry fails the same way, even with room.
#[test]
fn window_close_releases_a_stalled_submitter() {
    let counters = Arc::new(Counters::new(2));
    let w = WindowState::new(1, WindowMode::Stall, counters);
    w.enter().unwrap();
    thread::scope(|s| {
        let stalled = s.spawn(|| {
            let _guard = AbortOnPanic;
            w.enter()
        });
        while w.stalled() == 0 {
            thread::yield_now();
        }
        w.close();
        assert_eq!(stalled.join().unwrap(), Err(WindowError::Closed));
    });
    w.leave();
    assert_eq!(w.in_flight(), 0);
    assert_eq!(w.enter(), Err(WindowError::Closed));
}

#[test]
fn window_benchmark_counts_and_continues() {
    let counters = Arc::new(Counters::new(1));
    let w = WindowState::new(4, WindowMode::Benchmark, counters.clone());
    for _ in 0..10 {
        w.enter().unwrap();
    }
    w.leave_n(10);
    let snap = counters.snapshot();
    assert_eq!(snap.window_overflows, 6);
    assert_eq!(snap.in_flight_hwm, 10);
    assert_eq!(w.high_water(), 10);
    assert_eq!(snap.tasks_submitted, 10);
    assert_eq!(snap.tasks_completed, 10);
}

/// A recording executor: many threads acquire, bump a per-scope in-flight count, record its
/// maximum, and release. The recorded maxima never exceed the depth.
fn gate_bound(scope: GateScope, depth: u32, streams: usize, blocking: bool) {
    const THREADS: usize = 6;
    let iters = scale(3000);
    let counters = Arc::new(Counters::new(THREADS));
    let gate = IssueGate::new(depth, scope, streams, counters.clone());
    let inside: Vec<AtomicU32> = (0..gate.slots()).map(|_| AtomicU32::new(0)).collect();
    let max: Vec<AtomicU32> = (0..gate.slots()).map(|_| AtomicU32::new(0)).collect();
    thread::scope(|s| {
        for i in 0..THREADS {
            let (gate, inside, max) = (&gate, &inside, &max);
            s.spawn(move || {
                let _guard = AbortOnPanic;
                let mut rng = Rng(i as u64 + 100);
                for _ in 0..iters {
                    let stream = rng.below(8) as u32;
                    let pool =
                        [ExecPool::Vector, ExecPool::Cube, ExecPool::Any][rng.below(3) as usize];
                    let permit = if blocking {
                        gate.acquire(stream, pool)
                    } else {
                        loop {
                            if let Some(p) = gate.try_acquire(stream, pool) {
                                break p;
                            }
                            thread::yield_now();
                        }
                    };
                    let slot = permit.slot();
                    assert_eq!(slot, gate.slot_of(stream, pool));
                    let now = inside[slot].fetch_add(1, Relaxed) + 1;
                    max[slot].fetch_max(now, Relaxed);
                    thread::yield_now();
                    inside[slot].fetch_sub(1, Relaxed);
                    permit.release();
                }
            });
        }
    });
    for (slot, m) in max.iter().enumerate() {
        let m = m.load(Relaxed);
        assert!(
            m <= depth,
            "{scope:?}: scope {slot} had {m} in flight, depth {depth}"
        );
        assert!(m >= 1);
        assert_eq!(gate.in_flight(slot), 0);
    }
}

#[test]
fn gate_bound_global() {
    gate_bound(GateScope::Global, 2, 1, true);
    gate_bound(GateScope::Global, 1, 1, false);
}

#[test]
fn gate_bound_per_stream() {
    gate_bound(GateScope::PerStream, 2, 3, true);
    gate_bound(GateScope::PerStream, 1, 4, false);
}

#[test]
fn gate_bound_per_pool() {
    gate_bound(GateScope::PerPool, 3, 1, true);
    gate_bound(GateScope::PerPool, 1, 1, false);
}

#[test]
fn gate_try_acquire_refuses_exactly_at_depth_and_counts_stalls() {
    let counters = Arc::new(Counters::new(1));
    let gate = IssueGate::new(2, GateScope::PerStream, 2, counters.clone());
    let a = gate.try_acquire(0, ExecPool::Vector).unwrap();
    let b = gate.try_acquire(2, ExecPool::Cube).unwrap(); // stream 2 mod 2 = scope 0
    assert!(gate.try_acquire(4, ExecPool::Vector).is_none());
    let c = gate.try_acquire(1, ExecPool::Vector).unwrap(); // the other stream is free
    assert_eq!(counters.snapshot().gate_stalls, 1);
    drop(a);
    let d = gate.try_acquire(0, ExecPool::Any).unwrap();
    assert_eq!(gate.in_flight(0), 2);
    drop((b, c, d));
    assert_eq!(gate.in_flight(0), 0);
}

/// A gate reports the depth and scope it was made with (a depth of 0 means 1), and one scope
/// instance per stream, per pool (three) or one in all.
#[test]
fn gate_reports_its_depth_scope_and_slots() {
    let counters = Arc::new(Counters::new(1));
    for (depth, scope, streams, slots) in [
        (3, GateScope::PerStream, 5, 5),
        (2, GateScope::PerPool, 5, 3),
        (7, GateScope::Global, 5, 1),
    ] {
        let gate = IssueGate::new(depth, scope, streams, counters.clone());
        assert_eq!(
            (gate.depth(), gate.scope(), gate.slots()),
            (depth, scope, slots)
        );
    }
    let gate = IssueGate::new(0, GateScope::Global, 0, counters);
    assert_eq!(gate.depth(), 1);
    let _only = gate.try_acquire(0, ExecPool::Vector).unwrap();
    assert!(gate.try_acquire(0, ExecPool::Vector).is_none());
}

#[test]
fn gate_acquire_blocks_until_release() {
    let counters = Arc::new(Counters::new(2));
    let gate = IssueGate::new(1, GateScope::Global, 1, counters.clone());
    let held = gate.acquire(0, ExecPool::Vector);
    let (tx, rx) = mpsc::channel();
    thread::scope(|s| {
        s.spawn(|| {
            let _guard = AbortOnPanic;
            let p = gate.acquire(0, ExecPool::Cube);
            tx.send(()).unwrap();
            drop(p);
        });
        while counters.snapshot().gate_stalls == 0 {
            thread::yield_now();
        }
        assert!(rx.try_recv().is_err(), "acquired past a full gate");
        drop(held);
        rx.recv().unwrap();
    });
    assert_eq!(gate.in_flight(0), 0);
}

#[test]
fn batcher_resolves_at_threshold_and_on_flush() {
    let counters = Arc::new(Counters::new(1));
    let st = TaskStates::new();
    // Tasks 0..5 are roots; task 5+i depends on task i.
    for t in 0..5 {
        assert!(st.seal(TaskId(t)));
    }
    for t in 0..5 {
        assert!(st.add_edge(TaskId(t), TaskId(5 + t)));
        assert!(!st.seal(TaskId(5 + t)));
    }
    let mut b = DepBatcher::new(3, counters.clone());
    let mut ready = Vec::new();
    assert_eq!(b.add(&st, TaskId(0), |t| ready.push(t)), 0);
    assert_eq!(b.add(&st, TaskId(1), |t| ready.push(t)), 0);
    assert!(ready.is_empty(), "resolved before the threshold");
    assert!(!st.is_complete(TaskId(0)));
    assert_eq!(b.add(&st, TaskId(2), |t| ready.push(t)), 3);
    assert_eq!(ready, vec![TaskId(5), TaskId(6), TaskId(7)]);
    assert_eq!(b.pending(), 0);
    assert_eq!(b.add(&st, TaskId(4), |t| ready.push(t)), 0);
    assert_eq!(b.flush(&st, |t| ready.push(t)), 1);
    assert_eq!(
        b.flush(&st, |t| ready.push(t)),
        0,
        "an empty flush is not a batch"
    );
    assert_eq!(ready, vec![TaskId(5), TaskId(6), TaskId(7), TaskId(9)]);
    assert_eq!(b.batches(), 2);
    let snap = counters.snapshot();
    assert_eq!((snap.batches, snap.batched_tasks), (2, 4));
    b.add(&st, TaskId(3), |t| ready.push(t));
    b.flush(&st, |t| ready.push(t));
    assert_eq!(ready.last(), Some(&TaskId(8)));
}

#[test]
fn wiring_sink_refuses_edges_to_completed_producers() {
    let st = TaskStates::new();
    let mut ready = Vec::new();
    {
        let mut sink = Wiring::new(&st, |t| ready.push(t));
        sink.submitted(TaskId(0));
        sink.edge(TaskId(0), TaskId(1));
        sink.submitted(TaskId(1));
        assert_eq!(sink.refused_edges(), 0);
    }
    assert_eq!(ready, vec![TaskId(0)]);
    let mut later = Vec::new();
    st.complete(TaskId(0), |t| later.push(t));
    assert_eq!(later, vec![TaskId(1)]);
    {
        let mut sink = Wiring::new(&st, |t| ready.push(t));
        sink.edge(TaskId(0), TaskId(2));
        sink.submitted(TaskId(2));
        assert_eq!(sink.refused_edges(), 1);
    }
    assert_eq!(ready, vec![TaskId(0), TaskId(2)]);
}

#[test]
fn successors_are_released_in_wiring_order() {
    let st = TaskStates::new();
    assert!(st.seal(TaskId(0)));
    for t in 1..20 {
        assert!(st.add_edge(TaskId(0), TaskId(t)));
        assert!(!st.seal(TaskId(t)));
    }
    let mut ready = Vec::new();
    assert_eq!(st.complete(TaskId(0), |t| ready.push(t.0)), 19);
    assert_eq!(ready, (1..20).collect::<Vec<_>>());
}

/// End to end with the real builder: a `GraphBuilder` infers edges from region accesses and
/// streams them through [`Wiring`] while workers run the tasks. Each region tracks who is inside
/// it: a writer must be alone, readers must not meet a writer. Any missing edge or protocol race
/// lets two conflicting tasks overlap sooner or later; every task must run exactly once.
#[test]
fn builder_streams_into_running_workers_without_region_conflicts() {
    let n = scale(3000);
    streams_under_start_policy(n, StartPolicy::Immediate, 64);
    streams_under_start_policy(n, StartPolicy::Threshold(n as u64 / 3), n);
    streams_under_start_policy(n, StartPolicy::AfterOrchestration, n);
    // A window smaller than the start threshold: the builder must open the gate before it
    // stalls, or it would wait forever for completions of tasks it is holding back.
    streams_under_start_policy(n, StartPolicy::Threshold(n as u64 / 3), 64);
    streams_under_start_policy(n, StartPolicy::AfterOrchestration, 64);
}

/// The end-to-end run above under one start policy: ready tasks go through a [`StartGate`] on
/// the builder thread, and no worker may see a task before the gate opened.
fn streams_under_start_policy(n: usize, policy: StartPolicy, window_size: usize) {
    use pto_wsp_ir::Access;
    use std::cell::RefCell;
    use std::sync::atomic::{AtomicBool, AtomicI32};

    const REGIONS: u32 = 6;
    const WORKERS: usize = 3;
    let mut rng = Rng(99);
    let accesses: Vec<Vec<(u32, Access)>> = (0..n)
        .map(|_| {
            let mut v: Vec<(u32, Access)> = Vec::new();
            for _ in 0..1 + rng.below(3) {
                let r = rng.below(u64::from(REGIONS)) as u32;
                if v.iter().any(|&(q, _)| q == r) {
                    continue;
                }
                let a = match rng.below(3) {
                    0 => Access::In,
                    1 => Access::Out,
                    _ => Access::InOut,
                };
                v.push((r, a));
            }
            v
        })
        .collect();
    let region = |r: u32| Region::new_2d(0, r * 4, 4, 0, 4);
    // 0 = free, > 0 = that many readers, -1 = a writer.
    let inside: Vec<AtomicI32> = (0..REGIONS).map(|_| AtomicI32::new(0)).collect();
    let runs: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
    let counters = Arc::new(Counters::new(WORKERS + 1));
    let states = TaskStates::new();
    let ready = ReadyQueueSet::new(ReadyKind::WorkSteal, WORKERS, counters.clone());
    let window = WindowState::new(window_size, WindowMode::Stall, counters.clone());
    let completed = AtomicUsize::new(0);
    let started = AtomicBool::new(false);

    thread::scope(|s| {
        s.spawn(|| {
            let _guard = AbortOnPanic;
            let gate = RefCell::new(StartGate::new(policy));
            let release = |t: TaskId| {
                started.store(true, Relaxed);
                ready.push(ExecPool::Any, t);
            };
            let sink = Wiring::new(&states, |t| gate.borrow_mut().ready(t, release));
            let mut b = GraphBuilder::with_map(DynamicExactMap::new(), sink);
            for acc in &accesses {
                if window.in_flight() >= window.capacity() {
                    gate.borrow_mut().force_open(release);
                }
                window.enter().unwrap();
                b.alloc_task(0, ExecDomain::HostCpu, ExecPool::Any, 0, None);
                for &(r, a) in acc {
                    b.add_access(region(r), a);
                }
                b.submit().unwrap();
                gate.borrow_mut().submitted(release);
            }
            gate.borrow_mut().orchestration_done(release);
        });
        for w in 0..WORKERS {
            let (states, ready, window, accesses, inside, runs, completed, started) = (
                &states, &ready, &window, &accesses, &inside, &runs, &completed, &started,
            );
            s.spawn(move || {
                let _guard = AbortOnPanic;
                let mut local = ready.local(w).unwrap();
                let mut newly = Vec::new();
                while completed.load(Relaxed) < n {
                    let Some(t) = local.try_pop_any() else {
                        thread::yield_now();
                        continue;
                    };
                    assert!(
                        started.load(Relaxed),
                        "task {} ran before the start gate opened",
                        t.0
                    );
                    assert_eq!(runs[t.index()].fetch_add(1, Relaxed), 0);
                    let acc = &accesses[t.index()];
                    for &(r, a) in acc {
                        let c = &inside[r as usize];
                        if a == Access::In {
                            let before = c.fetch_add(1, Relaxed);
                            assert!(before >= 0, "task {} reads region {r} under a writer", t.0);
                        } else {
                            assert_eq!(
                                c.compare_exchange(0, -1, Relaxed, Relaxed),
                                Ok(0),
                                "task {} writes region {r} while others are inside",
                                t.0
                            );
                        }
                    }
                    thread::yield_now();
                    for &(r, a) in acc {
                        let c = &inside[r as usize];
                        if a == Access::In {
                            c.fetch_sub(1, Relaxed);
                        } else {
                            c.store(0, Relaxed);
                        }
                    }
                    states.complete(t, |r| newly.push(r));
                    for r in newly.drain(..) {
                        local.push(ExecPool::Any, r);
                    }
                    window.leave();
                    completed.fetch_add(1, Relaxed);
                }
            });
        }
    });
    assert!(runs.iter().all(|r| r.load(Relaxed) == 1));
    assert!(window.high_water() <= window_size);
}
