//! The persistent worker threads, and how one run is handed to all of them.
//!
//! Why: starting threads costs tens of microseconds each; a program that runs many graphs (or
//! the same graph many times) should pay that once. A [`WorkerPool`] owns `threads` OS threads
//! that sleep on a condition variable between runs (no CPU while idle) and run one *job* at a
//! time: a closure called once on every worker with the worker's index.
//!
//! Between two jobs a worker first lingers as an idle worker does inside a run: it watches the
//! job counter (an atomic, no lock) for [`Idle::backoff`]'s bounded rounds of spinning and
//! yielding (a few tens of microseconds), and only then parks on the condition variable. A job
//! posted within that while (the next run of a program that runs graph after graph) reaches a
//! worker that is still awake, without a wake-up system call; a pool nobody gives work parks
//! after those rounds and uses no CPU. Likewise the caller of [`WorkerPool::scope`] watches the
//! count of running jobs for the same rounds before it waits on its condition variable, and
//! both condition variables are signalled only when someone waits on them.
//!
//! # What it promises
//!
//! - [`WorkerPool::scope`] calls `job(w)` once on every worker `w` while `caller()` runs on the
//!   calling thread, and returns only after every `job(w)` has returned — even if `caller` or a
//!   job panics. That is what lets a job borrow from the caller's stack (the one `unsafe` here).
//! - A panic inside a job is caught on the worker, the worker stays alive, and the panic is
//!   reported by `scope` as [`JobPanicked`]; the pool can run again.
//! - Runs are serialised: a second `scope` on the same pool waits for the first.
//! - Dropping the pool stops and joins its threads.
//! - A pool has `1..=`[`MAX_THREADS`] workers; asking for more, or a thread the OS refuses to
//!   start, is a [`PoolError`] (the threads already started are stopped and joined), never a
//!   panic.

use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::idle::Idle;
use crate::sync::thread::{Builder, JoinHandle};
use crate::sync::{Arc, AtomicU64, AtomicUsize, Condvar, Mutex, Ordering, lock, wait};

/// A job as the workers see it: a borrowed closure whose lifetime [`WorkerPool::scope`] erased.
#[derive(Clone, Copy)]
struct JobRef(*const (dyn Fn(usize) + Sync));

// SAFETY: a `JobRef` points to a `dyn Fn(usize) + Sync` closure, which may be called from any
// thread through a shared reference; `scope` keeps the closure alive until every worker is done
// with the pointer (see `scope`).
unsafe impl Send for JobRef {}

struct State {
    /// Incremented for every job; a worker runs a job once per epoch.
    epoch: u64,
    job: Option<JobRef>,
    /// A job panicked during the current epoch (message of the first panic).
    panic: Option<String>,
    shutdown: bool,
    /// Workers waiting on `start` (signalled only if some are).
    parked: usize,
    /// Times a worker began waiting on `start`, since the pool started.
    parks: u64,
    /// The caller of `scope` waits on `done` (signalled only if it does).
    caller_waits: bool,
}

struct Shared {
    state: Mutex<State>,
    /// `State::epoch`, published (release) under the lock when a job is posted and readable
    /// without it: what a lingering worker watches.
    posted: AtomicU64,
    /// Workers that have not finished the current job: set under the lock when a job is
    /// posted, decremented (release) by each worker after its call; the caller watches it.
    running: AtomicUsize,
    /// Workers wait here for a new epoch.
    start: Condvar,
    /// The scope waits here for `running == 0`.
    done: Condvar,
    /// Serialises runs.
    run: Mutex<()>,
    /// Whether workers and the caller linger before parking (see the module docs). Always on,
    /// but in the loom models of other protocols: each lingering look is a point where loom
    /// must try every interleaving, which multiplies the models built on a pool many times over;
    /// the pool's own model lingers.
    linger: bool,
}

/// A job panicked; the message of the first panic.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a worker panicked: {0}")]
pub struct JobPanicked(pub String);

/// The most worker threads a pool may have. Far above any core count the CPU simulation is
/// useful on; the bound keeps a typo (`--threads 100000`) from exhausting the OS's threads.
pub const MAX_THREADS: usize = 1024;

/// Why a pool could not be started.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    /// More threads than [`MAX_THREADS`] were asked for.
    #[error("threads {requested} is more than the limit of {max} (0 means one per core)")]
    TooMany {
        /// The count asked for.
        requested: usize,
        /// [`MAX_THREADS`].
        max: usize,
    },
    /// The OS refused to start a thread.
    #[error("cannot start worker thread {index} of {threads}: {source}")]
    Spawn {
        /// Index of the thread that failed.
        index: usize,
        /// Threads asked for.
        threads: usize,
        /// The OS error.
        source: std::io::Error,
    },
}

/// A pool of persistent worker threads (see the module docs).
pub struct WorkerPool {
    shared: Arc<Shared>,
    handles: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for WorkerPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerPool")
            .field("threads", &self.handles.len())
            .finish()
    }
}

/// The number of threads `0` stands for: every core the OS lets us use.
pub fn all_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Text of a panic payload.
pub(crate) fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

impl WorkerPool {
    /// A pool of `threads` workers; `0` means one per core (at most [`MAX_THREADS`]).
    pub fn new(threads: usize) -> Result<WorkerPool, PoolError> {
        WorkerPool::start(threads, !cfg!(loom))
    }

    /// A pool whose workers linger between jobs, for the pool's own loom model (outside loom
    /// every pool does).
    #[cfg(loom)]
    pub(crate) fn lingering(threads: usize) -> Result<WorkerPool, PoolError> {
        WorkerPool::start(threads, true)
    }

    /// [`WorkerPool::new`], lingering between jobs or not.
    fn start(threads: usize, linger: bool) -> Result<WorkerPool, PoolError> {
        if threads > MAX_THREADS {
            return Err(PoolError::TooMany {
                requested: threads,
                max: MAX_THREADS,
            });
        }
        let threads = if threads == 0 {
            all_cores().min(MAX_THREADS)
        } else {
            threads
        };
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                epoch: 0,
                job: None,
                panic: None,
                shutdown: false,
                parked: 0,
                parks: 0,
                caller_waits: false,
            }),
            posted: AtomicU64::new(0),
            running: AtomicUsize::new(0),
            start: Condvar::new(),
            done: Condvar::new(),
            run: Mutex::new(()),
            linger,
        });
        let mut pool = WorkerPool {
            shared,
            handles: Vec::with_capacity(threads),
        };
        for w in 0..threads {
            let shared = Arc::clone(&pool.shared);
            match Builder::new()
                .name(format!("pto-wsp-worker-{w}"))
                .stack_size(crate::WALK_STACK_BYTES)
                .spawn(move || worker_main(&shared, w))
            {
                Ok(h) => pool.handles.push(h),
                // Dropping `pool` stops and joins the threads already started.
                Err(source) => {
                    return Err(PoolError::Spawn {
                        index: w,
                        threads,
                        source,
                    });
                }
            }
        }
        Ok(pool)
    }

    /// Number of workers.
    pub fn threads(&self) -> usize {
        self.handles.len()
    }

    /// Calls `job(w)` on every worker `w` while `caller()` runs on this thread; returns
    /// `caller`'s result once every job has returned. A panicking job is reported as
    /// [`JobPanicked`] (after all jobs are done); a panicking `caller` is resumed after all jobs
    /// are done.
    pub fn scope<F, C, R>(&self, job: &F, caller: C) -> Result<R, JobPanicked>
    where
        F: Fn(usize) + Sync,
        C: FnOnce() -> R,
    {
        let _run = lock(&self.shared.run);
        let erased: &(dyn Fn(usize) + Sync) = job;
        // SAFETY: only the lifetime is changed. The pointer is published to the workers below
        // and `Wait::drop` (which runs on every path out of this function, panics included)
        // blocks until `running == 0`, i.e. until every worker has returned from the call and
        // dropped its copy; `job` outlives this function call, hence every use.
        let ptr: *const (dyn Fn(usize) + Sync) = unsafe {
            std::mem::transmute::<&(dyn Fn(usize) + Sync), &'static (dyn Fn(usize) + Sync)>(erased)
        };
        {
            let mut st = lock(&self.shared.state);
            st.epoch += 1;
            st.job = Some(JobRef(ptr));
            st.panic = None;
            self.shared
                .running
                .store(self.handles.len(), Ordering::Relaxed);
            // Release: a worker that sees the new epoch without the lock sees `running` too (it
            // takes the lock to read the job).
            self.shared.posted.store(st.epoch, Ordering::Release);
            if st.parked > 0 {
                self.shared.start.notify_all();
            }
        }
        struct Wait<'a>(&'a Shared);
        impl Drop for Wait<'_> {
            fn drop(&mut self) {
                let shared = self.0;
                let mut round = 0;
                while shared.linger
                    && shared.running.load(Ordering::Acquire) > 0
                    && Idle::backoff(round)
                {
                    round += 1;
                }
                let mut st = lock(&shared.state);
                while shared.running.load(Ordering::Acquire) > 0 {
                    st.caller_waits = true;
                    st = wait(&shared.done, st);
                }
                st.caller_waits = false;
                st.job = None;
            }
        }
        let wait = Wait(&self.shared);
        let r = caller();
        drop(wait);
        match lock(&self.shared.state).panic.take() {
            Some(msg) => Err(JobPanicked(msg)),
            None => Ok(r),
        }
    }

    /// How many times a worker has parked (begun waiting for a job on the condition variable)
    /// since the pool started: a pool given no work parks each worker once and then stays
    /// parked, whatever the time.
    pub fn parks(&self) -> u64 {
        lock(&self.shared.state).parks
    }

    /// How many workers are parked now.
    pub fn parked(&self) -> usize {
        lock(&self.shared.state).parked
    }

    /// Calls `job(w)` on every worker and waits for all of them.
    pub fn broadcast<F: Fn(usize) + Sync>(&self, job: &F) -> Result<(), JobPanicked> {
        self.scope(job, || ())
    }
}

/// Waits for an epoch other than `seen`: lingers (see the module docs), then parks. Returns the
/// new epoch and its job, or `None` at shutdown.
fn next_job(shared: &Shared, seen: u64) -> Option<(u64, Option<JobRef>)> {
    let mut round = 0;
    while shared.linger && shared.posted.load(Ordering::Acquire) == seen && Idle::backoff(round) {
        round += 1;
    }
    let mut st = lock(&shared.state);
    let mut counted = false;
    loop {
        if st.shutdown {
            return None;
        }
        if st.epoch != seen {
            return Some((st.epoch, st.job));
        }
        // One park per wait for a job, however often the condition variable wakes.
        if !counted {
            st.parks += 1;
            counted = true;
        }
        st.parked += 1;
        st = wait(&shared.start, st);
        st.parked -= 1;
    }
}

fn worker_main(shared: &Shared, w: usize) {
    let mut seen = 0u64;
    while let Some((epoch, job)) = next_job(shared, seen) {
        seen = epoch;
        let result = match job {
            // SAFETY: `scope` published this pointer and does not return (so the closure stays
            // alive) until this worker decrements `running` below, after the call.
            Some(JobRef(ptr)) => catch_unwind(AssertUnwindSafe(|| unsafe { (*ptr)(w) })),
            None => Ok(()),
        };
        if let Err(p) = result {
            let mut st = lock(&shared.state);
            if st.panic.is_none() {
                st.panic = Some(panic_message(&*p));
            }
        }
        // Release: the job's effects (and a panic's message, stored above under the lock)
        // happen before the caller's acquire load that sees zero.
        if shared.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            // The last one: wake the caller if it waits. Under the lock, so a caller that read
            // a non-zero count before this decrement is already waiting (it held the lock from
            // that read until its wait), and one that reads after it sees zero.
            let st = lock(&shared.state);
            if st.caller_waits {
                shared.done.notify_all();
            }
        }
    }
}

impl Drop for WorkerPool {
    fn drop(&mut self) {
        lock(&self.shared.state).shutdown = true;
        // Every worker, lingering or not: a lingering one sees the shutdown when it parks.
        self.shared.start.notify_all();
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sync::{AtomicBool, AtomicUsize, Ordering};

    #[test]
    fn every_worker_runs_each_job_once() {
        let pool = WorkerPool::new(3).unwrap();
        let hits: Vec<AtomicUsize> = (0..3).map(|_| AtomicUsize::new(0)).collect();
        for _ in 0..50 {
            pool.broadcast(&|w| {
                hits[w].fetch_add(1, Ordering::Relaxed);
            })
            .unwrap();
        }
        for h in &hits {
            assert_eq!(h.load(Ordering::Relaxed), 50);
        }
    }

    #[test]
    fn a_panicking_job_is_reported_and_the_pool_survives() {
        let pool = WorkerPool::new(2).unwrap();
        let r = pool.broadcast(&|w| {
            if w == 1 {
                panic!("boom on {w}");
            }
        });
        assert_eq!(r, Err(JobPanicked("boom on 1".to_string())));
        let n = AtomicUsize::new(0);
        pool.broadcast(&|_| {
            n.fetch_add(1, Ordering::Relaxed);
        })
        .unwrap();
        assert_eq!(n.load(Ordering::Relaxed), 2);
    }

    /// Yields until every worker of `pool` is parked (a test's time limit bounds the wait).
    fn until_all_parked(pool: &WorkerPool) {
        while pool.parked() < pool.threads() {
            std::thread::yield_now();
        }
    }

    /// A pool given no work lingers a bounded while and then parks each worker exactly once
    /// per job: after a job every worker parks again (it does not spin on), and it parks once,
    /// not once per round.
    #[test]
    fn an_idle_pool_parks_each_worker_once_per_job() {
        let pool = WorkerPool::new(2).unwrap();
        until_all_parked(&pool);
        assert_eq!(pool.parks(), 2);
        let n = AtomicUsize::new(0);
        for job in 1..=3u64 {
            pool.broadcast(&|_| {
                n.fetch_add(1, Ordering::Relaxed);
            })
            .unwrap();
            until_all_parked(&pool);
            assert_eq!(pool.parks(), 2 + 2 * job);
        }
        assert_eq!(n.load(Ordering::Relaxed), 6);
    }

    /// Jobs posted back to back, or after gaps of varying length, reach every worker exactly
    /// once whether it was still lingering or already parked when the job came, and each job's
    /// effects are visible to the caller when `scope` returns.
    #[test]
    fn jobs_reach_lingering_and_parked_workers_alike() {
        let pool = WorkerPool::new(3).unwrap();
        let hits: Vec<AtomicUsize> = (0..3).map(|_| AtomicUsize::new(0)).collect();
        let mut gap = 1u64;
        for job in 1..=300usize {
            // A gap of 0 to ~2^12 yields: some jobs find the workers spinning, some yielding,
            // some parked.
            gap = gap
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            for _ in 0..(gap >> 52) {
                std::thread::yield_now();
            }
            pool.broadcast(&|w| {
                hits[w].fetch_add(1, Ordering::Relaxed);
            })
            .unwrap();
            for h in &hits {
                assert_eq!(h.load(Ordering::Relaxed), job);
            }
        }
    }

    #[test]
    fn too_many_threads_is_an_error_naming_the_limit() {
        let e = WorkerPool::new(5000).unwrap_err();
        assert_eq!(
            e.to_string(),
            "threads 5000 is more than the limit of 1024 (0 means one per core)"
        );
        assert!(WorkerPool::new(usize::MAX).is_err());
        assert_eq!(
            WorkerPool::new(MAX_THREADS + 1).unwrap_err().to_string(),
            format!(
                "threads {} is more than the limit of {MAX_THREADS} (0 means one per core)",
                MAX_THREADS + 1
            )
        );
    }

    #[test]
    fn caller_runs_while_jobs_run() {
        let pool = WorkerPool::new(2).unwrap();
        let flag = AtomicBool::new(false);
        // Workers wait for the caller's signal: proves the caller runs concurrently.
        let r = pool
            .scope(
                &|_| {
                    while !flag.load(Ordering::Acquire) {
                        std::thread::yield_now();
                    }
                },
                || {
                    flag.store(true, Ordering::Release);
                    7
                },
            )
            .unwrap();
        assert_eq!(r, 7);
    }
}
