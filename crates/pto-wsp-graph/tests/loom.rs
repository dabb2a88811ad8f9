//! Loom models of the scheduling core's concurrency: the streaming completion protocol
//! (`state.rs`, with a batch of held tasks wired and sealed by plain stores), the FIFO
//! ready-queue hand-off (`ready.rs`), and the sleep/wake paths of the task window (`window.rs`)
//! and issue gate (`gate.rs`).
//!
//! Run (CI step):
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test -p pto-wsp-graph --test loom --release
//! ```
//!
//! Without `--cfg loom` this file compiles to an empty test binary. Each model is small (at most
//! three threads, a handful of operations) and explores every interleaving within a preemption
//! bound of 3; together they finish in seconds. Under loom the task arenas use 2-entry chunks,
//! so the models also cross chunk boundaries, and one model frees chunks behind the completed
//! prefix.
//!
//! "Done" flags are *relaxed* atomics written by a producer before it completes and read
//! (relaxed) when a consumer is reported ready: loom explores stale reads, so the assertions fail
//! unless the protocol itself makes the producer's work happen before the report.
#![cfg(loom)]

use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use loom::thread;
use pto_wsp_graph::TaskId;
use pto_wsp_graph::counters::Counters;
use pto_wsp_graph::gate::IssueGate;
use pto_wsp_graph::ready::FifoQueue;
use pto_wsp_graph::state::{EdgeCursor, TaskStates};
use pto_wsp_graph::window::{Reservation, WindowState};
use pto_wsp_ir::{ExecPool, GateScope, WindowMode};

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(f);
}

fn flags(n: usize) -> Arc<Vec<AtomicBool>> {
    Arc::new((0..n).map(|_| AtomicBool::new(false)).collect())
}

fn counts(n: usize) -> Arc<Vec<AtomicUsize>> {
    Arc::new((0..n).map(|_| AtomicUsize::new(0)).collect())
}

/// The worker of a model: runs whatever the queue holds until every task of `preds` (task `i`'s
/// producers are `preds[i]`) has run, each after its producers; then checks that each ran
/// exactly once.
fn work_all(st: &TaskStates, q: &FifoQueue, preds: &[&[usize]]) {
    let n = preds.len();
    let (done, runs) = (flags(n), counts(n));
    let mut finished = 0;
    while finished < n {
        match q.try_pop() {
            Some(t) => {
                let i = t.0 as usize;
                for &p in preds[i] {
                    assert!(done[p].load(Relaxed), "task {i} ran before {p}");
                }
                runs[i].fetch_add(1, Relaxed);
                done[i].store(true, Relaxed);
                st.complete(t, |s| {
                    q.push(s);
                });
                finished += 1;
            }
            None => thread::yield_now(),
        }
    }
    for r in runs.iter() {
        assert_eq!(r.load(Relaxed), 1);
    }
}

/// A producer completes while its consumer is being wired: whichever wins, the consumer becomes
/// ready exactly once, and only after the producer's work.
#[test]
fn producer_completes_while_consumer_is_wired() {
    model(|| {
        let st = Arc::new(TaskStates::new());
        let done = flags(1);
        let ready = counts(2);
        assert!(st.seal(TaskId(0)));

        let producer = {
            let (st, done, ready) = (st.clone(), done.clone(), ready.clone());
            thread::spawn(move || {
                done[0].store(true, Relaxed);
                st.complete(TaskId(0), |t| {
                    assert_eq!(t, TaskId(1));
                    ready[1].fetch_add(1, Relaxed);
                });
            })
        };

        st.add_edge(TaskId(0), TaskId(1));
        if st.seal(TaskId(1)) {
            assert!(done[0].load(Relaxed), "task 1 ready before task 0 finished");
            ready[1].fetch_add(1, Relaxed);
        }
        producer.join().unwrap();
        assert_eq!(ready[1].load(Relaxed), 1);
        assert!(st.is_complete(TaskId(0)));
    });
}

/// Two producers complete while their common consumer is wired through an edge cursor; the
/// wirer frees their state once it sees both complete (the reclamation of a streamed run under
/// a window). Seeing a task complete means its completer is done with it: its work happened
/// before, the consumer is ready exactly once, and afterwards the freed tasks read as complete
/// and an edge from one costs nothing.
#[test]
fn wirer_frees_the_state_of_tasks_it_saw_complete() {
    model(|| {
        let st = Arc::new(TaskStates::new());
        let done = flags(2);
        let ready = counts(3);
        assert!(st.seal(TaskId(0)));
        assert!(st.seal(TaskId(1)));
        let producers: Vec<_> = (0..2u32)
            .map(|p| {
                let (st, done, ready) = (st.clone(), done.clone(), ready.clone());
                thread::spawn(move || {
                    done[p as usize].store(true, Relaxed);
                    st.complete(TaskId(p), |t| {
                        assert_eq!(t, TaskId(2));
                        assert!(done[0].load(Relaxed) && done[1].load(Relaxed));
                        ready[2].fetch_add(1, Relaxed);
                    });
                })
            })
            .collect();
        let mut cursor = EdgeCursor::new();
        st.add_edge_in(&mut cursor, TaskId(0), TaskId(2));
        st.add_edge_in(&mut cursor, TaskId(1), TaskId(2));
        if st.seal(TaskId(2)) {
            assert!(done[0].load(Relaxed) && done[1].load(Relaxed));
            ready[2].fetch_add(1, Relaxed);
        }
        if st.is_complete(TaskId(0)) && st.is_complete(TaskId(1)) {
            assert!(done[0].load(Relaxed) && done[1].load(Relaxed));
            // SAFETY: this thread saw tasks 0 and 1 complete and is the only wirer.
            #[allow(unsafe_code)]
            unsafe {
                st.reclaim_below(TaskId(2));
                cursor.reclaim(&st, TaskId(2));
            }
            assert!(st.is_complete(TaskId(0)) && st.is_complete(TaskId(1)));
            assert!(!st.add_edge_in(&mut cursor, TaskId(0), TaskId(3)));
        }
        for p in producers {
            p.join().unwrap();
        }
        assert_eq!(ready[2].load(Relaxed), 1);
    });
}

/// Two producers complete concurrently while their common consumer is wired.
#[test]
fn two_producers_one_consumer() {
    model(|| {
        let st = Arc::new(TaskStates::new());
        let done = flags(2);
        let ready = counts(3);
        assert!(st.seal(TaskId(0)));
        assert!(st.seal(TaskId(1)));

        let spawn_producer = |p: u32| {
            let (st, done, ready) = (st.clone(), done.clone(), ready.clone());
            thread::spawn(move || {
                done[p as usize].store(true, Relaxed);
                st.complete(TaskId(p), |t| {
                    assert_eq!(t, TaskId(2));
                    assert!(done[0].load(Relaxed) && done[1].load(Relaxed));
                    ready[2].fetch_add(1, Relaxed);
                });
            })
        };
        let a = spawn_producer(0);
        let b = spawn_producer(1);

        st.add_edge(TaskId(0), TaskId(2));
        st.add_edge(TaskId(1), TaskId(2));
        if st.seal(TaskId(2)) {
            assert!(done[0].load(Relaxed) && done[1].load(Relaxed));
            ready[2].fetch_add(1, Relaxed);
        }
        a.join().unwrap();
        b.join().unwrap();
        assert_eq!(ready[2].load(Relaxed), 1);
    });
}

/// A builder wires the chain 0 -> 1 -> 2 while a worker runs whatever is ready (through the FIFO
/// queue): every task runs exactly once, after its predecessor.
#[test]
fn chain_built_while_running() {
    model(|| {
        let st = Arc::new(TaskStates::new());
        let q = Arc::new(FifoQueue::new());
        let builder = {
            let (st, q) = (st.clone(), q.clone());
            thread::spawn(move || {
                if st.seal(TaskId(0)) {
                    q.push(TaskId(0));
                }
                for t in 1..3 {
                    st.add_edge(TaskId(t - 1), TaskId(t));
                    if st.seal(TaskId(t)) {
                        q.push(TaskId(t));
                    }
                }
            })
        };

        work_all(&st, &q, &[&[], &[0], &[1]]);
        builder.join().unwrap();
        assert!(q.is_empty());
    });
}

/// A batch of held submissions sealed newest first (a streamed run's batches): task 0 is sealed
/// and runs while the builder wires the chain 1 -> 2 and the join 1 -> 3 <- 0. The edge 0 -> 1
/// and 0 -> 3 come from a sealed task (the atomic wiring, and the atomic seal for 1 and 3); 1 -> 2
/// and 1 -> 3 from a task held unsealed in the batch (a plain store, and the plain seal for 2,
/// whose only producer is in the batch). Every task runs exactly once, after its producers.
/// Sealing oldest first (2 after 1) lets the worker complete 1 and release 2 before 2's plain
/// seal overwrites the count: 2 never runs (loom reports the worker's endless loop).
#[test]
fn batch_sealed_newest_first_with_plain_seals() {
    model(|| {
        let st = Arc::new(TaskStates::new());
        let q = Arc::new(FifoQueue::new());
        let preds: [&[usize]; 4] = [&[], &[0], &[1], &[0, 1]];

        let builder = {
            let (st, q) = (st.clone(), q.clone());
            thread::spawn(move || {
                let mut c = EdgeCursor::new();
                if st.seal_in(&mut c, TaskId(0)) {
                    q.push(TaskId(0));
                }
                // The batch {1, 2, 3}: edges from task 0 (sealed) are wired atomically.
                let accepted1 = st.add_edge_in(&mut c, TaskId(0), TaskId(1));
                st.add_edge_unsealed_in(&mut c, TaskId(1), TaskId(2));
                let accepted3 = st.add_edge_in(&mut c, TaskId(0), TaskId(3));
                st.add_edge_unsealed_in(&mut c, TaskId(1), TaskId(3));
                // Newest first; tasks with an edge from a sealed task take the atomic seal
                // (whether or not that edge was accepted).
                let _ = (accepted1, accepted3);
                let r3 = st.seal_in(&mut c, TaskId(3));
                let r2 = st.seal_unsealed_preds_in(&mut c, TaskId(2));
                let r1 = st.seal_in(&mut c, TaskId(1));
                for (t, r) in [(1, r1), (2, r2), (3, r3)] {
                    if r {
                        q.push(TaskId(t));
                    }
                }
            })
        };

        work_all(&st, &q, &preds);
        builder.join().unwrap();
        assert!(q.is_empty());
    });
}

/// FIFO hand-off: two tasks pushed on one thread are each popped exactly once — by one of two
/// concurrent poppers or by the final drain — and each popper sees them in push order.
#[test]
fn fifo_hand_off_exactly_once() {
    model(|| {
        let q = Arc::new(FifoQueue::new());
        let popped = counts(2);

        let pusher = {
            let q = q.clone();
            thread::spawn(move || {
                q.push(TaskId(0));
                q.push(TaskId(1));
            })
        };
        let popper = || {
            let (q, popped) = (q.clone(), popped.clone());
            thread::spawn(move || {
                let mut last = None;
                for _ in 0..2 {
                    if let Some(t) = q.try_pop() {
                        assert!(last < Some(t.0), "FIFO order violated");
                        last = Some(t.0);
                        popped[t.0 as usize].fetch_add(1, Relaxed);
                    }
                }
            })
        };
        let a = popper();
        let b = popper();
        pusher.join().unwrap();
        a.join().unwrap();
        b.join().unwrap();
        while let Some(t) = q.try_pop() {
            popped[t.0 as usize].fetch_add(1, Relaxed);
        }
        assert_eq!(popped[0].load(Relaxed), 1);
        assert_eq!(popped[1].load(Relaxed), 1);
    });
}

/// A window of `capacity` slots in mode `stall`.
fn stall_window(capacity: usize) -> Arc<WindowState> {
    Arc::new(WindowState::new(
        capacity,
        WindowMode::Stall,
        Arc::new(Counters::new(1)),
    ))
}

/// A submitter thread admitting one task into `w` (stalling while it is full).
fn spawn_enter(w: &Arc<WindowState>) -> thread::JoinHandle<()> {
    let w = w.clone();
    thread::spawn(move || {
        w.enter().unwrap();
    })
}

/// A stalled submitter is always woken by the completion that frees a slot (loom reports a
/// deadlock if a wakeup can be lost).
#[test]
fn window_stall_wakes() {
    model(|| {
        let w = stall_window(1);
        w.enter().unwrap();
        let submitter = spawn_enter(&w);
        w.leave();
        submitter.join().unwrap();
        assert_eq!(w.in_flight(), 1);
    });
}

/// A submitter stalled on a window of 8 (resume margin 1: it waits for two free slots) is woken
/// by whichever of two completions, on two threads, leaves the count below the resume level;
/// neither alone may be relied on (loom reports a deadlock if a wakeup can be lost).
#[test]
fn window_stall_resumes_after_the_margin() {
    model(|| {
        let w = stall_window(8);
        for _ in 0..8 {
            w.enter().unwrap();
        }
        let submitter = spawn_enter(&w);
        let completer = {
            let w = w.clone();
            thread::spawn(move || w.leave())
        };
        w.leave();
        completer.join().unwrap();
        submitter.join().unwrap();
        assert_eq!(w.in_flight(), 7);
    });
}

/// Slots reserved and given back unused wake a submitter stalled meanwhile: one thread reserves
/// both slots of a window of 2, uses one and settles; the other enters (stalling while both are
/// held) and must be woken by the give-back.
#[test]
fn window_reserved_slots_given_back_wake() {
    model(|| {
        let w = stall_window(2);
        let submitter = spawn_enter(&w);
        let mut r = Reservation::default();
        w.reserve(&mut r, 2).unwrap();
        w.settle(&mut r);
        submitter.join().unwrap();
        assert_eq!(w.in_flight(), 2);
        assert_eq!(w.high_water(), 2);
    });
}

/// Two threads through a gate of depth 1: never both inside, and a blocked acquirer is woken.
#[test]
fn gate_depth_one_exclusive_and_wakes() {
    model(|| {
        let g = Arc::new(IssueGate::new(
            1,
            GateScope::Global,
            1,
            Arc::new(Counters::new(1)),
        ));
        let inside = Arc::new(AtomicUsize::new(0));
        let worker = || {
            let (g, inside) = (g.clone(), inside.clone());
            thread::spawn(move || {
                let p = g.acquire(0, ExecPool::Vector);
                assert_eq!(inside.fetch_add(1, Relaxed), 0, "two permits of depth 1");
                inside.fetch_sub(1, Relaxed);
                drop(p);
            })
        };
        let a = worker();
        let b = worker();
        a.join().unwrap();
        b.join().unwrap();
        assert_eq!(g.in_flight(0), 0);
    });
}
