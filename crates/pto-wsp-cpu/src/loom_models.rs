//! Loom models of the CPU back end's concurrency, run on the production code through
//! [`crate::sync`]: the ready ring ([`crate::ring`]), the idle / park / wake protocol
//! ([`crate::idle`]) with the worker pool's hand-off, the engine's routing and the end of a run
//! ([`crate::pool`], [`crate::engine`]), the task table's publication ([`crate::table`]), the
//! streamed sink's batches sealed newest first ([`crate::stream`]), and device generation's
//! hand-over, seal and inboxes, and its partitioned generation's access exchange and merge
//! watermark ([`crate::devgen`]).
//!
//! Run (CI step):
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test -p pto-wsp-cpu --lib --release loom_models
//! ```
//!
//! Without `--cfg loom` this module is not compiled. Under loom the ring has 4 slots and
//! batches of 2, idle workers yield once and then park, and the task arenas have 2-entry chunks,
//! so small models fill and wrap the ring, park every worker and cross chunk boundaries. A lost
//! wake-up shows as loom's deadlock report (every thread blocked, the model's joins never
//! return), a task run twice or lost as a failed count, and a missing happens-before edge as a
//! failed assertion on a *relaxed* flag written before the hand-off (loom explores stale reads).
//!
//! Each model states its preemption bound: every interleaving with at most that many
//! preemptions is explored.

use loom::thread;
use pto_wsp_graph::builder::GraphBuilder;
use pto_wsp_graph::counters::Counters;
use pto_wsp_graph::ready::ReadyKind;
use pto_wsp_graph::types::TaskIo;
use pto_wsp_graph::window::WindowState;
use pto_wsp_graph::{ExecDomain, TaskId};
use pto_wsp_ir::{DepsMode, ExecPool, WindowMode};

use crate::devgen::{DevGenConfig, DirectExec};
use crate::engine::{Engine, Meta, RunGraph};
use crate::exec::{Exec, TaskFailure};
use crate::idle::Idle;
use crate::pool::WorkerPool;
use crate::ring::{BATCH, CAPACITY, ReadyRing};
use crate::run::{PoolSplit, RunConfig, StaticGraph};
use crate::sync::{Arc, AtomicBool, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};

/// Explores `f` under loom with at most `preemptions` preemptions per execution, and prints
/// how many executions that took (`--nocapture` shows it).
fn model(preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    let executions = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = executions.clone();
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(preemptions);
    b.check(move || {
        counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        f();
    });
    eprintln!(
        "{} executions (preemption bound {preemptions})",
        executions.load(std::sync::atomic::Ordering::Relaxed)
    );
}

fn flags(n: usize) -> Arc<Vec<AtomicBool>> {
    Arc::new((0..n).map(|_| AtomicBool::new(false)).collect())
}

fn counts(n: usize) -> Arc<Vec<AtomicUsize>> {
    Arc::new((0..n).map(|_| AtomicUsize::new(0)).collect())
}

// ---------------------------------------------------------------------------------------------
// The ready ring
// ---------------------------------------------------------------------------------------------

/// A consumer of the ring: `tries` claims, counting every task it gets, checking that what the
/// producer wrote before the push is visible (relaxed flag: only the ring orders it) and that
/// its claims come in push order.
fn consume(ring: &ReadyRing, written: &[AtomicBool], taken: &[AtomicUsize], tries: usize) {
    let mut out = [0u32; BATCH];
    let mut last = None;
    for _ in 0..tries {
        let k = ring.take(&mut out);
        for &t in &out[..k] {
            assert!(
                written[t as usize].load(Relaxed),
                "task {t} taken before it was written"
            );
            assert!(last < Some(t), "task {t} claimed after a later one");
            last = Some(t);
            taken[t as usize].fetch_add(1, Relaxed);
        }
    }
}

/// One producer pushes `n` tasks into the ring (publishing by batch, urgently for the tasks
/// `urgent` picks, and at the end) while two consumers claim: every task is handed out exactly
/// once — by a consumer, by the final drain, or back to the producer when the ring refuses it
/// because it is full — and each claim sees the producer's writes before the push.
fn ring_model(n: u32, urgent: fn(u32) -> bool) {
    let ring = Arc::new(ReadyRing::new());
    let written = flags(n as usize);
    let taken = counts(n as usize);
    let consumers: Vec<_> = (0..2)
        .map(|_| {
            let (ring, written, taken) = (ring.clone(), written.clone(), taken.clone());
            thread::spawn(move || consume(&ring, &written, &taken, 2))
        })
        .collect();
    for t in 0..n {
        written[t as usize].store(true, Relaxed);
        if ring.push(TaskId(t), urgent(t)).is_none() {
            // Full: the caller hands the task over another way (the engine: a shared queue).
            taken[t as usize].fetch_add(1, Relaxed);
        }
    }
    ring.publish();
    for c in consumers {
        c.join().unwrap();
    }
    consume(&ring, &written, &taken, n as usize);
    assert!(!ring.has_published());
    for (t, c) in taken.iter().enumerate() {
        assert_eq!(
            c.load(Relaxed),
            1,
            "task {t} handed out {} times",
            c.load(Relaxed)
        );
    }
}

/// Batches: a full batch is published by one release store, the rest by `publish`.
#[test]
fn ring_publishes_batches_each_task_claimed_once() {
    assert_eq!((BATCH, CAPACITY), (2, 4));
    model(3, || ring_model(3, |_| false));
}

/// Wrap-around: six tasks through four slots with an urgent push. A consumer that read slots
/// the producer then overwrote (after another consumer claimed them) must fail its
/// compare-exchange and never return the stale ids; a push into a full ring is refused.
#[test]
fn ring_wraps_and_refuses_without_losing_or_repeating_tasks() {
    model(2, || ring_model(6, |t| t == 2));
}

// ---------------------------------------------------------------------------------------------
// The task table's append-only vector
// ---------------------------------------------------------------------------------------------

/// The writer appends runs of three elements (a task's regions) and single elements across the
/// 2-entry chunks; a reader reads every element below each length it loads. Every one is
/// there with its value, a run is seen whole or not at all, and a relaxed flag the writer set
/// before appending each element is seen set: the length's release store orders the slots'
/// writes (and the chunks' publication) before any reader that loads it.
#[test]
fn table_publishes_runs_whole_across_chunks() {
    use crate::table::AppendVec;
    model(2, || {
        let v = Arc::new(AppendVec::<u64>::default());
        let written = flags(7);
        let reader = {
            let (v, written) = (Arc::clone(&v), Arc::clone(&written));
            thread::spawn(move || {
                let (first, second) = (v.len(), v.len());
                for i in 0..second {
                    assert_eq!(v.get(i).copied(), Some(i as u64 * 10));
                    assert!(
                        written[i].load(Relaxed),
                        "element {i} read before its write"
                    );
                }
                (first, second)
            })
        };
        let mut w = v.writer().unwrap();
        let mut append = |run: &[u64]| {
            for &x in run {
                written[(x / 10) as usize].store(true, Relaxed);
            }
            match run {
                [x] => {
                    w.push(*x);
                }
                _ => w.extend_from_slice(run),
            }
        };
        append(&[0, 10, 20]);
        append(&[30]);
        append(&[]);
        append(&[40, 50, 60]);
        let (first, second) = reader.join().unwrap();
        assert!(first <= second && [0, 3, 4, 7].contains(&first) && [0, 3, 4, 7].contains(&second));
    });
}

// ---------------------------------------------------------------------------------------------
// Idle workers: park and wake
// ---------------------------------------------------------------------------------------------

/// Two parked (or parking) workers that run different work — worker 0 vector, worker 1 cube —
/// and a publisher that makes cube work visible and notifies the workers that fit: worker 1
/// must wake (or see the work in its pre-park re-check), whatever worker 0 does. A wake-up
/// spent on worker 0 would leave worker 1 asleep forever: loom reports the deadlock.
#[test]
fn idle_wakes_the_sleeper_that_can_run_the_work() {
    model(3, || {
        let idle = Arc::new(Idle::new(2));
        // Per worker: tasks waiting that only it can run (its pool's queue).
        let work = counts(2);
        let done = Arc::new(AtomicBool::new(false));
        let worker = |w: usize| {
            let (idle, work, done) = (idle.clone(), work.clone(), done.clone());
            thread::spawn(move || {
                loop {
                    if work[w].swap(0, SeqCst) > 0 {
                        return true;
                    }
                    if done.load(SeqCst) {
                        return false;
                    }
                    idle.park(w, || work[w].load(SeqCst) > 0 || done.load(SeqCst));
                }
            })
        };
        let vector = worker(0);
        let cube = worker(1);
        work[1].fetch_add(1, SeqCst);
        idle.notify(None, |w| w == 1);
        assert!(cube.join().unwrap(), "the cube worker ran its task");
        done.store(true, SeqCst);
        idle.wake_all();
        assert!(
            !vector.join().unwrap(),
            "the vector worker had nothing to run"
        );
    });
}

/// A recording executor: every task runs once, after its predecessors (relaxed flags: only the
/// runtime's hand-offs order them), on a worker that may run it.
struct Recorder {
    preds: Vec<Vec<usize>>,
    /// Workers allowed to run each task (`None`: any).
    on: Vec<Option<usize>>,
    done: Arc<Vec<AtomicBool>>,
    runs: Arc<Vec<AtomicUsize>>,
}

impl Recorder {
    fn new(preds: Vec<Vec<usize>>, on: Vec<Option<usize>>) -> Recorder {
        let n = preds.len();
        Recorder {
            preds,
            on,
            done: flags(n),
            runs: counts(n),
        }
    }

    fn record(&self, t: usize, worker: usize) {
        for &p in &self.preds[t] {
            assert!(self.done[p].load(Relaxed), "task {t} ran before task {p}");
        }
        if let Some(w) = self.on[t] {
            assert_eq!(worker, w, "task {t} ran on worker {worker}");
        }
        self.runs[t].fetch_add(1, Relaxed);
        self.done[t].store(true, Relaxed);
    }

    fn check(&self) {
        for (t, r) in self.runs.iter().enumerate() {
            assert_eq!(r.load(Relaxed), 1, "task {t} ran {} times", r.load(Relaxed));
        }
    }
}

impl Exec for Recorder {
    fn run(&self, task: TaskId, worker: usize) -> Result<(), TaskFailure> {
        self.record(task.index(), worker);
        Ok(())
    }
}

/// A finished graph of `tasks` (pool, dispatch target, predecessors).
fn static_graph(tasks: &[(ExecPool, Option<u32>, &[u32])]) -> StaticGraph {
    let mut b = GraphBuilder::new(DepsMode::Explicit);
    for (pool, target, preds) in tasks {
        b.alloc_task(0, ExecDomain::default(), *pool, 0, *target);
        for &p in *preds {
            b.add_explicit_dep(TaskId(p)).unwrap();
        }
        b.submit().unwrap();
    }
    StaticGraph::new(b.finish())
}

/// The whole path of a finished graph's run, on a two-worker pool split into a vector and a
/// cube worker under FIFO queues (every queue a loom-visible mutex queue): the pool hands the
/// run to both workers (epoch, condition variable), the vector task 0 runs on worker 0 and its
/// release routes the cube task 1 to the cube queue, which only worker 1 pops, while worker 1
/// spins, parks or re-checks: worker 1 is woken for it (or sees it), task 1 runs once after
/// task 0, the run ends on both workers, the pool's caller returns after both, and the pool
/// stops and joins its threads.
#[test]
fn pool_run_routes_a_released_task_to_its_pool_and_wakes_it() {
    model(3, || {
        let graph = static_graph(&[(ExecPool::Vector, None, &[]), (ExecPool::Cube, None, &[0])]);
        let exec = Recorder::new(vec![vec![], vec![0]], vec![Some(0), Some(1)]);
        let config = RunConfig {
            ready: ReadyKind::Fifo,
            pools: PoolSplit::ByExecUnit { vector: 1 },
            ..RunConfig::default()
        };
        let pool = WorkerPool::new(2).unwrap();
        let stats = pool.run(&graph, &config, &exec).unwrap();
        assert_eq!(stats.tasks, 2);
        exec.check();
    });
}

/// Placement: task 1 is placed on worker 1 (`target mod threads`), on worker 1's own FIFO queue
/// that worker 0 never pops, by worker 0 as it completes task 0. Worker 1 must be woken for it
/// (the wake-up names the target first) or find it in its pre-park re-check of its own queue.
#[test]
fn pool_run_wakes_the_worker_a_task_is_placed_on() {
    model(3, || {
        let graph = static_graph(&[
            (ExecPool::Any, Some(0), &[]),
            (ExecPool::Any, Some(1), &[0]),
        ]);
        let exec = Recorder::new(vec![vec![], vec![0]], vec![Some(0), Some(1)]);
        let config = RunConfig {
            ready: ReadyKind::Fifo,
            placement: true,
            ..RunConfig::default()
        };
        let pool = WorkerPool::new(2).unwrap();
        let stats = pool.run(&graph, &config, &exec).unwrap();
        assert_eq!(stats.tasks, 2);
        exec.check();
    });
}

/// The end of a run with the other worker parked: a finished graph of one task on two workers
/// under work stealing. The worker that does not claim the task finds nothing, yields once and
/// parks (its pre-park re-check sees the run unfinished); the one that runs the task then
/// publishes the last completion and sees the run finished. That first sighting must wake every
/// parked worker — no worker is left to look again — or the parked one never returns and the
/// pool's caller waits for it forever (loom reports the deadlock). In the other interleavings
/// the second worker sees the run finished itself, before or instead of parking.
#[test]
fn pool_run_ends_with_the_other_worker_parked() {
    model(3, || {
        let graph = static_graph(&[(ExecPool::Any, None, &[])]);
        let exec = Recorder::new(vec![vec![]], vec![None]);
        let pool = WorkerPool::new(2).unwrap();
        let stats = pool.run(&graph, &RunConfig::default(), &exec).unwrap();
        assert_eq!(stats.tasks, 1);
        exec.check();
    });
}

/// Two jobs back to back on a lingering pool of one worker (two workers multiply the
/// interleavings past what a CI run can explore; one already races the worker's linger, park and
/// wake against the caller's posting and waiting). A worker that finished the first job
/// lingers (watches the posted job counter without the lock; one yield under loom) and then
/// parks; the second job may come before, during or after that. Every worker must run every job exactly
/// once (a lost hand-off is loom's deadlock report: the caller waits for `running` forever),
/// the caller's wait must see every job's effects (the counts are relaxed: only the release
/// decrements of `running` order them), and the condition variables are signalled only when
/// someone waits, so a missed signal would also deadlock.
#[test]
fn pool_hands_consecutive_jobs_to_lingering_or_parked_workers() {
    model(3, || {
        let pool = WorkerPool::lingering(1).unwrap();
        let hits = counts(1);
        for job in 1..=2 {
            pool.broadcast(&|w| {
                hits[w].fetch_add(1, Relaxed);
            })
            .unwrap();
            for h in hits.iter() {
                assert_eq!(h.load(Relaxed), job);
            }
        }
    });
}

/// Independent tasks as the engine sees them: their pools, nothing to release.
struct Independent(Vec<ExecPool>);

impl RunGraph for Independent {
    fn meta(&self, t: TaskId) -> Meta {
        Meta {
            pool: self.0[t.index()],
            affinity: None,
            stream: 0,
        }
    }

    fn priority(&self, _: TaskId) -> i64 {
        0
    }

    fn release(&self, _: TaskId, _: bool, _: impl FnMut(TaskId)) {}
}

/// An orchestrator (the calling thread, as in a streamed run) publishes `pools.len()` tasks
/// one at a time through a stalling task window of one task while two workers run them: it
/// publishes what it holds before each wait (the streamed run's rule), enters the window —
/// waiting, on a condition variable, until a worker completed the task before — and pushes the
/// next task through the engine's routing; at the end it waits for the last task the same way. Every push races with the workers parking; a
/// wake-up that goes astray leaves the orchestrator and the workers all waiting (loom reports
/// the deadlock). `ring` hands the tasks over through the ready ring (work stealing, plain
/// routing); otherwise the queues are FIFO and the workers split into a vector and a cube one.
fn orchestrated(pools: &[ExecPool], ring: bool, workers: usize) {
    let graph = Independent(pools.to_vec());
    let on = pools
        .iter()
        .map(|p| match p {
            ExecPool::Vector => Some(0),
            ExecPool::Cube => Some(1),
            ExecPool::Any => None,
        })
        .collect();
    let exec = Recorder::new(vec![vec![]; pools.len()], on);
    let config = if ring {
        RunConfig::default()
    } else {
        RunConfig {
            ready: ReadyKind::Fifo,
            pools: PoolSplit::ByExecUnit { vector: 1 },
            ..RunConfig::default()
        }
    };
    let counters = Arc::new(Counters::new(workers + 1));
    let window = WindowState::new(1, WindowMode::Stall, counters.clone());
    let pool = WorkerPool::new(workers).unwrap();
    let engine = Engine::new(
        &graph,
        &exec,
        &config,
        workers,
        &[],
        None,
        Some(&window),
        counters,
    );
    let engine = if ring {
        engine.with_ready_ring()
    } else {
        engine
    };
    let n = pools.len() as u32;
    pool.scope(&|w| engine.worker(w), || {
        for t in 0..n {
            engine.publish_external();
            window.enter().unwrap();
            engine.push_external(TaskId(t));
        }
        // Wait for the last task too (as `wait_complete` does), then end orchestration:
        // ending wakes every worker, which would hide a wake-up lost before.
        engine.publish_external();
        window.enter().unwrap();
        engine.set_total(u64::from(n));
    })
    .unwrap();
    let (error, reports, _) = engine.into_outcome();
    assert!(error.is_none());
    assert_eq!(reports.iter().map(|r| r.tasks).sum::<u64>(), u64::from(n));
    exec.check();
}

/// A cube task, then a vector task, published while both workers of a pool split may be
/// parked: the cube task must wake the cube worker, not the vector one.
#[test]
fn engine_wakes_the_fitting_worker_for_the_orchestrators_tasks() {
    model(2, || {
        orchestrated(&[ExecPool::Cube, ExecPool::Vector], false, 2)
    });
}

/// A task handed over through the ready ring and published before the orchestrator waits: a
/// parked worker is woken for it, or sees it published in its pre-park re-check.
#[test]
fn engine_ring_publication_reaches_a_parking_worker() {
    model(3, || orchestrated(&[ExecPool::Any, ExecPool::Any], true, 1));
}

// ---------------------------------------------------------------------------------------------
// Device generation
// ---------------------------------------------------------------------------------------------

/// A bytecode program, decoded and bound.
fn devgen_program(text: &str) -> (pto_wsp_bytecode::Program, pto_wsp_bytecode::Bound) {
    let m = pto_wsp_ir::parse(text).unwrap();
    let r = pto_wsp_ir::resolve(&m, &Default::default()).unwrap();
    let bytes = pto_wsp_bytecode::encode(&r, &Default::default()).unwrap();
    let p = pto_wsp_bytecode::Program::decode(&bytes).unwrap();
    let bound = p.bind(&pto_wsp_ir::Bindings::new()).unwrap();
    (p, bound)
}

impl DirectExec for Recorder {
    fn run_task(
        &self,
        task: TaskId,
        executor: usize,
        _: u32,
        _: &[u64],
        _: &[TaskIo],
    ) -> Result<(), TaskFailure> {
        self.record(task.index(), executor);
        Ok(())
    }
}

/// Device generation on two executors of a program of two tasks, task 0 owned by executor 0 and
/// task 1 by executor 1, where task 1 depends on task 0 through two tensors: `X` (tensor 0,
/// inferred by executor 0, which hands the edge over to executor 1) and `Y` (tensor 1, inferred
/// by executor 1 itself). Executor 1 seals task 1 only once executor 0 published that it
/// inferred it, wires the edge found twice once, and runs task 1 after task 0, which executor 0
/// reports through executor 1's inbox (waking it if it parked). Every run ends with each task
/// run once on its owner and one edge counted. Every executor walks every task here (the path
/// of programs that cannot be generated partitioned); the next two models generate partitioned.
#[test]
fn devgen_hands_edges_over_seals_once_and_wakes_the_owner() {
    let (program, bound) = devgen_program(
        "tensor X: f32[4]; tensor Y: f32[4]; axis I = dense(2);
         kernel k(inout x: f32[4], inout y: f32[4]);
         workload main() { parallel_for i in I { task k(X[0 +: 4], Y[0 +: 4]); } }
         schedule for main { executors 2; dispatch round_robin(2); }",
    );
    let shared = std::sync::Arc::new((program, bound));
    model(2, move || {
        let (program, bound) = &*shared;
        let exec = Recorder::new(vec![vec![], vec![0]], vec![Some(0), Some(1)]);
        let config = DevGenConfig {
            window: 1,
            record_edges: true,
            partition: false,
            ..DevGenConfig::default()
        };
        let pool = WorkerPool::new(2).unwrap();
        let stats = pool.run_devgen(program, bound, &config, &exec).unwrap();
        exec.check();
        assert_eq!(stats.tasks, 2);
        assert_eq!(
            stats.edges, 1,
            "the edge found on two tensors is counted once"
        );
        assert_eq!(stats.edge_list, vec![(0, 1)]);
    });
}

/// A chain of three tasks owned by executors 0, 1, 0 where each edge is found only by the
/// executor that does not own its successor: `X` (tensor 0, inferred by executor 0) orders
/// task 0 before task 1, `Y` (tensor 1, inferred by executor 1) task 1 before task 2. So each
/// owner learns of its task's predecessor only through the hand-over and must not seal before
/// the other executor published that it inferred the task (else the task would run too early);
/// both completions cross executors through the inboxes; and with a window of one own task,
/// executor 0 must run task 0 before it generates task 2. Generated partitioned: each executor
/// interprets only its own tasks and sends the accesses of the other's tensor to it.
#[test]
fn devgen_seals_only_after_the_hand_over_both_ways() {
    let (program, bound) = devgen_program(
        "tensor X: f32[4]; tensor Y: f32[4];
         kernel a(inout x: f32[4]); kernel b(inout x: f32[4], inout y: f32[4]);
         kernel c(inout y: f32[4]);
         workload main() { task a(X[0 +: 4]); task b(X[0 +: 4], Y[0 +: 4]); task c(Y[0 +: 4]); }
         schedule for main { executors 2; dispatch round_robin(2); }",
    );
    let shared = std::sync::Arc::new((program, bound));
    model(2, move || {
        let stats = partitioned_chain_of_three(&shared.0, &shared.1);
        assert_eq!(stats.edges, 2);
    });
}

/// Partitioned generation's access exchange and the merge's watermark: three tasks on `Y`
/// (tensor 1, so executor 1 infers every access), owned by executors 0, 1, 0. Each executor
/// interprets only its own tasks: executor 0 sends the accesses of tasks 0 and 2 to executor 1
/// and publishes how far it has sent them; executor 1 merges them with its own task 1's access
/// in id order, inferring only below the smallest published position — so it must not infer
/// task 1 before task 0's access arrived, nor task 2 before task 1's. Edges 0 → 1 (found by
/// executor 1 for its own task) and 1 → 2 (handed over to executor 0) are wired once each, and
/// the tasks run in order under windows of one task. A publication made before the accesses
/// are sent, or never made, fails this model (a task run too early, or every executor waiting).
#[test]
fn devgen_partitioned_merges_sent_accesses_in_id_order_under_the_watermark() {
    let (program, bound) = devgen_program(
        "tensor X: f32[4]; tensor Y: f32[4]; axis I = dense(3);
         kernel k(inout y: f32[4]);
         workload main() { parallel_for i in I { task k(Y[0 +: 4]); } }
         schedule for main { executors 2; dispatch round_robin(2); }",
    );
    let shared = std::sync::Arc::new((program, bound));
    model(2, move || {
        let stats = partitioned_chain_of_three(&shared.0, &shared.1);
        let d = stats.device_gen.unwrap();
        assert_eq!(
            d.executors.iter().map(|e| e.walked).collect::<Vec<_>>(),
            vec![2, 1],
            "each executor generated only its own tasks"
        );
    });
}

/// One partitioned run, on two executors with windows of one own task, of a program of three
/// tasks owned by executors 0, 1, 0, each depending on the one before: checks that each ran
/// once, on its owner, after its predecessor, and that exactly the edges 0 → 1 and 1 → 2 were
/// wired.
fn partitioned_chain_of_three(
    program: &pto_wsp_bytecode::Program,
    bound: &pto_wsp_bytecode::Bound,
) -> crate::stats::RunStats {
    let exec = Recorder::new(
        vec![vec![], vec![0], vec![1]],
        vec![Some(0), Some(1), Some(0)],
    );
    let config = DevGenConfig {
        window: 1,
        record_edges: true,
        partition: true,
        ..DevGenConfig::default()
    };
    let pool = WorkerPool::new(2).unwrap();
    let stats = pool.run_devgen(program, bound, &config, &exec).unwrap();
    exec.check();
    assert_eq!(stats.tasks, 3);
    let mut edges = stats.edge_list.clone();
    edges.sort();
    assert_eq!(edges, vec![(0, 1), (1, 2)]);
    stats
}

// ---------------------------------------------------------------------------------------------
// The streamed sink's batches
// ---------------------------------------------------------------------------------------------

/// The streamed sink itself ([`crate::stream::StreamSink`], through the explicit builder) builds
/// `0; 1 <- 0; 2 <- 1; 3 <- {0, 2}` with seals held in batches of two while a worker runs what is
/// released and completes it. An edge from a task held unsealed in the batch being built (1 <- 0,
/// 3 <- 2) is wired by a plain store and, when all of a task's accepted edges are such, the task
/// is sealed by a plain store, newest first; 2 <- 1 and 3 <- 0 come from a sealed task (the
/// worker may be completing it) and take the atomic wiring and seal. Every task runs exactly
/// once, after its producers: a batch sealed oldest first, or an edge from a sealed task taken as
/// unsealed, lets a completion's release land before the plain seal that overwrites it (the
/// task never runs: loom reports the worker's endless loop).
#[test]
fn stream_sink_seals_held_batches_newest_first() {
    use crate::exec::ExecError;
    use crate::stream::{Hooks, StreamConfig, StreamSink};
    use crate::sync::Inbox;
    use crate::table::TaskTable;
    use pto_wsp_graph::explicit::{ExplicitBuilder, ExplicitTask};
    use pto_wsp_graph::state::TaskStates;

    const PREDS: [&[u32]; 4] = [&[], &[0], &[1], &[0, 2]];
    model(3, || {
        let states = Arc::new(TaskStates::new());
        let queue = Arc::new(Inbox::default());
        let done = flags(4);
        let runs = counts(4);
        let worker = {
            let (states, queue, done, runs) =
                (states.clone(), queue.clone(), done.clone(), runs.clone());
            thread::spawn(move || {
                let mut finished = 0;
                while finished < PREDS.len() {
                    let Some(t) = queue.pop() else {
                        thread::yield_now();
                        continue;
                    };
                    for &p in PREDS[t as usize] {
                        assert!(done[p as usize].load(Relaxed), "task {t} ran before {p}");
                    }
                    runs[t as usize].fetch_add(1, Relaxed);
                    done[t as usize].store(true, Relaxed);
                    states.complete(TaskId(t), |s| queue.push(s.0));
                    finished += 1;
                }
            })
        };
        let table = TaskTable::new();
        let (idle, abort) = (Idle::new(1), AtomicBool::new(false));
        let hooks = Hooks {
            release: &|t: TaskId| queue.push(t.0),
            release_all: &|ts: &[TaskId]| ts.iter().for_each(|t| queue.push(t.0)),
            publish: &|| {},
            fail: &|e: ExecError| panic!("{e}"),
            idle: &idle,
            abort: &abort,
            pause: &thread::yield_now,
        };
        let stream = StreamConfig {
            deps: DepsMode::Explicit,
            ..StreamConfig::default()
        };
        let sink = StreamSink::new(&states, table.writer().unwrap(), None, &stream, true, hooks);
        let mut b = ExplicitBuilder::with_sink(sink);
        for preds in PREDS {
            let preds: Vec<TaskId> = preds.iter().map(|&p| TaskId(p)).collect();
            b.add(&ExplicitTask::host(0), &preds).unwrap();
        }
        worker.join().unwrap();
        for r in runs.iter() {
            assert_eq!(r.load(Relaxed), 1);
        }
    });
}
