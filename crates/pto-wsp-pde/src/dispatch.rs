//! Parallel dispatch (the PDE specification's run-time flow): the generator runs on the calling
//! (control) thread and pushes descriptors into a bounded lock-free queue
//! (`crossbeam_queue::ArrayQueue`); N dispatch threads pop them and run the kernel bound to each
//! descriptor's tier, passing the descriptor. Under an `affinity` other than `spread` there is one
//! queue per group of dispatch threads and the generator routes each descriptor by its value of the
//! affinity axis. Kernels are bound to tiers by name before anything runs, so a tier with no kernel
//! is refused up front. A failing or panicking kernel, or a failing generator, stops the launch:
//! the generator stops pushing, the dispatchers stop popping, and the first error is returned. A
//! generator that finds the queue full spins, yields, then parks until a dispatcher frees a slot,
//! leaving its core to the dispatchers. Nothing waits without a way out: every wait loop also
//! watches the stop flag and the end of generation, which a guard sets even when the generator
//! unwinds.

use crate::descriptor::{Descriptor, PREFETCH_TIER};
use crate::error::{PdeError, Result};
use crate::generate::{Emitter, Sink};
use crate::schedule::Affinity;
use crate::space::BoundSpace;
use crate::tier::Tiers;
use crossbeam_queue::ArrayQueue;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};

/// A tier's kernel: runs one descriptor, or says why it cannot.
pub type Kernel<'k> = dyn Fn(&Descriptor) -> std::result::Result<(), String> + Sync + 'k;

/// A check every descriptor passes on the generator's thread, in queue order, before it is
/// queued (prefetch descriptors included); an error stops the launch ([`Launch::admit`]).
pub type Admit<'k> = dyn Fn(&Descriptor) -> std::result::Result<(), String> + Sync + 'k;

/// One launch: a bound space, its tiers with a kernel each, the planned workspace, and the
/// dispatch configuration.
pub struct Launch<'a> {
    space: &'a BoundSpace,
    tiers: &'a Tiers,
    kernels: Vec<Option<&'a Kernel<'a>>>,
    problems: Vec<PdeError>,
    workspace: u64,
    dispatch_threads: usize,
    queue_capacity: usize,
    affinity: Option<(usize, Affinity)>,
    prefetch: Option<(usize, u32, &'a Kernel<'a>)>,
    admit: Option<&'a Admit<'a>>,
}

/// What a launch did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LaunchStats {
    /// Descriptors generated (and run).
    pub descriptors: u64,
    /// Descriptors run by each dispatch thread.
    pub per_thread: Vec<u64>,
    /// Workspace elements the generator allocated.
    pub workspace_used: u64,
    /// Prefetch descriptors run (`prefetch`; not counted in `descriptors` or `per_thread`).
    pub prefetches: u64,
}

struct Shared {
    /// One queue per group of dispatch threads (one in all under `spread`).
    queues: Vec<ArrayQueue<Descriptor>>,
    stop: AtomicBool,
    done: AtomicBool,
    error: Mutex<Option<PdeError>>,
    /// The generator is parked (or about to park) on a full queue.
    gen_waiting: AtomicBool,
    /// The generator's thread, to unpark.
    generator: std::thread::Thread,
}

impl Shared {
    fn fail(&self, e: PdeError) {
        let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
        slot.get_or_insert(e);
        self.stop.store(true, Ordering::Release);
        self.generator.unpark();
    }

    /// Called by a dispatcher after it freed a queue slot: wakes the generator if it waits.
    #[inline]
    fn slot_freed(&self) {
        fence(Ordering::SeqCst);
        if self.gen_waiting.load(Ordering::Relaxed)
            && self.gen_waiting.swap(false, Ordering::AcqRel)
        {
            self.generator.unpark();
        }
    }
}

/// The launch's queue as the generator's sink: waits (spinning, then yielding) while the queue
/// is full, and gives up when the launch stops.
struct QueueSink<'s> {
    shared: &'s Shared,
    space: &'s str,
    admit: Option<&'s Admit<'s>>,
    /// The affinity axis, if descriptors are routed by it.
    route: Option<usize>,
}

impl Sink for QueueSink<'_> {
    #[inline]
    fn push(&mut self, mut d: Descriptor) -> Result<()> {
        if let Some(check) = self.admit {
            check(&d).map_err(|problem| PdeError::Refused {
                space: self.space.to_string(),
                problem,
            })?;
        }
        let mut spins = 0u32;
        let queues = &self.shared.queues;
        let q = match self.route {
            Some(axis) => &queues[d.indices[axis] as usize % queues.len()],
            None => &queues[0],
        };
        loop {
            match q.push(d) {
                Ok(()) => return Ok(()),
                Err(back) => {
                    d = back;
                    if self.shared.stop.load(Ordering::Acquire) {
                        return Err(PdeError::Launch {
                            space: self.space.to_string(),
                            problem: "stopped: a kernel failed".into(),
                        });
                    }
                    if spins < SPINS {
                        backoff(&mut spins);
                    } else {
                        // Park until a dispatcher frees a slot, so a waiting generator leaves
                        // its core to the dispatchers. The flag is raised before the retry and
                        // read by dispatchers after their pop (both behind SeqCst fences), so
                        // either the retry sees the freed slot or the dispatcher sees the flag;
                        // the timeout only bounds the wait should the launch stop meanwhile.
                        self.shared.gen_waiting.store(true, Ordering::Relaxed);
                        fence(Ordering::SeqCst);
                        match q.push(d) {
                            Ok(()) => {
                                self.shared.gen_waiting.store(false, Ordering::Relaxed);
                                return Ok(());
                            }
                            Err(back) => {
                                d = back;
                                std::thread::park_timeout(std::time::Duration::from_millis(1));
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Spins (then yields) before a waiting generator parks.
const SPINS: u32 = 128;

#[inline]
fn backoff(spins: &mut u32) {
    *spins = spins.saturating_add(1);
    if *spins <= 64 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

/// Sets `done` when dropped: generation has ended, normally or by unwinding.
struct DoneGuard<'s>(&'s Shared);

impl Drop for DoneGuard<'_> {
    fn drop(&mut self) {
        self.0.done.store(true, Ordering::Release);
    }
}

impl<'a> Launch<'a> {
    /// A launch of `space` with `tiers`: one dispatch thread, a queue of 1,024 descriptors, no
    /// workspace.
    pub fn new(space: &'a BoundSpace, tiers: &'a Tiers) -> Launch<'a> {
        Launch {
            space,
            tiers,
            kernels: vec![None; tiers.len()],
            problems: Vec::new(),
            workspace: 0,
            dispatch_threads: 1,
            queue_capacity: 1024,
            affinity: None,
            prefetch: None,
            admit: None,
        }
    }

    /// Every descriptor, prefetches included, is passed to `check` on the generator's thread in
    /// the order it is queued, before any dispatch thread can see it; a refusal stops the launch
    /// with [`PdeError::Refused`] (through the `emit` that queued it). Being sequential, the
    /// check sees the same descriptors in the same order on every run, whatever the timing of
    /// the kernels (the facade checks the plan's promise of independent descriptors here).
    pub fn admit(mut self, check: &'a Admit<'a>) -> Launch<'a> {
        self.admit = Some(check);
        self
    }

    /// `prefetch(axis, depth)`: while the descriptors of value `v` of axis `axis` run, the data
    /// of `v + depth` is fetched — a prefetch descriptor placed in the queue just before `v`'s
    /// first descriptor ([`Emitter::prefetch`] says exactly when), run by `hook` on a dispatch
    /// thread (on the CPU: reading that value's inputs into the cache). Under an `affinity` on
    /// the same axis it goes to the queue of `v + depth`'s group.
    pub fn prefetch(mut self, axis: &str, depth: u32, hook: &'a Kernel<'a>) -> Launch<'a> {
        match self.space.space().axis_index(axis) {
            Ok(k) => self.prefetch = Some((k, depth, hook)),
            Err(e) => self.problems.push(e),
        }
        self
    }

    /// `affinity(axis, ...)`: where the descriptors of one value of axis `axis` run (see
    /// [`Affinity`]).
    pub fn affinity(mut self, axis: &str, affinity: Affinity) -> Launch<'a> {
        match self.space.space().axis_index(axis) {
            Ok(k) => self.affinity = Some((k, affinity)),
            Err(e) => self.problems.push(e),
        }
        self
    }

    /// Size of a group of dispatch threads sharing one queue, and the number of groups.
    fn groups(&self) -> Result<(usize, usize)> {
        let n = self.dispatch_threads;
        let size = match self.affinity {
            None | Some((_, Affinity::Spread)) => n,
            Some((_, Affinity::CoreLocal)) => 1,
            Some((k, Affinity::CoreGroup(s))) => {
                if s == 0 || s as usize > n {
                    return Err(PdeError::Affinity {
                        space: self.space.name().to_string(),
                        axis: self.space.space().axes()[k].name.clone(),
                        size: s,
                        threads: n,
                    });
                }
                s as usize
            }
        };
        Ok((size, (n / size).max(1)))
    }

    /// Binds `kernel` to the tier called `tier`.
    pub fn kernel(mut self, tier: &str, kernel: &'a Kernel<'a>) -> Launch<'a> {
        match self.tiers.tiers().iter().position(|t| t.name == tier) {
            Some(i) => self.kernels[i] = Some(kernel),
            None => self.problems.push(PdeError::Tiers {
                tiers: self.tiers.name().to_string(),
                problem: format!("a kernel is bound to tier `{tier}`, which is not in the table"),
            }),
        }
        self
    }

    /// Plans `elements` of workspace (what [`Emitter::alloc_workspace`] may hand out).
    pub fn workspace(mut self, elements: u64) -> Launch<'a> {
        self.workspace = elements;
        self
    }

    /// Uses `n` dispatch threads.
    pub fn dispatch_threads(mut self, n: usize) -> Launch<'a> {
        self.dispatch_threads = n;
        self
    }

    /// Bounds the descriptor queue to `n` entries.
    pub fn queue_capacity(mut self, n: usize) -> Launch<'a> {
        self.queue_capacity = n;
        self
    }

    fn check(&self) -> Result<Vec<&'a Kernel<'a>>> {
        if let Some(p) = self.problems.first() {
            return Err(p.clone());
        }
        let launch = |problem: &str| PdeError::Launch {
            space: self.space.name().to_string(),
            problem: problem.to_string(),
        };
        if self.dispatch_threads == 0 || self.dispatch_threads > 1024 {
            return Err(launch("the number of dispatch threads must be 1 to 1024"));
        }
        if self.queue_capacity == 0 {
            return Err(launch(
                "the descriptor queue needs room for at least 1 descriptor",
            ));
        }
        self.kernels
            .iter()
            .enumerate()
            .map(|(i, k)| {
                k.ok_or_else(|| PdeError::NoKernel {
                    space: self.space.name().to_string(),
                    tiers: self.tiers.name().to_string(),
                    tier: self.tiers.tiers()[i].name.clone(),
                    index: i as u32,
                })
            })
            .collect()
    }

    /// Runs generator `body` on this thread while the dispatch threads run the descriptors it
    /// emits; returns when every descriptor has run, or with the first error.
    pub fn run(
        &self,
        body: impl FnOnce(&mut Emitter<'_, QueueSinkHandle<'_>>) -> Result<()>,
    ) -> Result<LaunchStats> {
        let kernels = self.check()?;
        let (size, groups) = self.groups()?;
        let route = match self.affinity {
            Some((k, Affinity::CoreLocal | Affinity::CoreGroup(_))) => Some(k),
            _ => None,
        };
        let shared = Shared {
            queues: (0..groups)
                .map(|_| ArrayQueue::new(self.queue_capacity))
                .collect(),
            stop: AtomicBool::new(false),
            done: AtomicBool::new(false),
            error: Mutex::new(None),
            gen_waiting: AtomicBool::new(false),
            generator: std::thread::current(),
        };
        let counts: Vec<AtomicU64> = (0..self.dispatch_threads)
            .map(|_| AtomicU64::new(0))
            .collect();
        let prefetched = AtomicU64::new(0);
        let space_name = self.space.name();
        let (gen_result, used, emitted) = std::thread::scope(|s| {
            for (t, count) in counts.iter().enumerate() {
                let (shared, kernels) = (&shared, &kernels);
                // Threads past the last full group join the last group.
                let queue = &shared.queues[(t / size).min(groups - 1)];
                let prefetch = (self.prefetch.map(|p| p.2), &prefetched);
                s.spawn(move || {
                    dispatcher(
                        shared, queue, kernels, prefetch, self.tiers, space_name, count,
                    )
                });
            }
            let _done = DoneGuard(&shared);
            let sink = QueueSinkHandle(QueueSink {
                shared: &shared,
                space: space_name,
                admit: self.admit,
                route,
            });
            let mut e = Emitter::new(self.space, self.tiers, self.workspace, sink);
            if let Some((k, depth, _)) = self.prefetch
                && let Err(err) = e.prefetch(k, depth)
            {
                shared.stop.store(true, Ordering::Release);
                return (Err(err), 0, 0);
            }
            let r = catch_unwind(AssertUnwindSafe(|| body(&mut e))).unwrap_or_else(|_| {
                Err(PdeError::Launch {
                    space: space_name.to_string(),
                    problem: "the generator panicked".into(),
                })
            });
            if r.is_err() {
                shared.stop.store(true, Ordering::Release);
            }
            (r, e.workspace_used(), e.emitted())
        });
        let kernel_error = shared
            .error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(e) = kernel_error {
            return Err(e);
        }
        gen_result?;
        Ok(LaunchStats {
            descriptors: emitted,
            per_thread: counts.iter().map(|c| c.load(Ordering::Relaxed)).collect(),
            workspace_used: used,
            prefetches: prefetched.load(Ordering::Relaxed),
        })
    }
}

/// The sink a launch's generator emits into (its bounded queue).
pub struct QueueSinkHandle<'s>(QueueSink<'s>);

impl Sink for QueueSinkHandle<'_> {
    #[inline]
    fn push(&mut self, d: Descriptor) -> Result<()> {
        self.0.push(d)
    }
}

fn dispatcher(
    shared: &Shared,
    queue: &ArrayQueue<Descriptor>,
    kernels: &[&Kernel<'_>],
    (prefetch, prefetched): (Option<&Kernel<'_>>, &AtomicU64),
    tiers: &Tiers,
    space: &str,
    count: &AtomicU64,
) {
    let mut n = 0u64;
    let mut spins = 0u32;
    while !shared.stop.load(Ordering::Acquire) {
        match queue.pop() {
            Some(d) => {
                spins = 0;
                shared.slot_freed();
                // The emitter checked the tier against the table the kernels were bound to; the
                // only other tier is a prefetch, pushed only when the launch has a hook.
                let (k, is_prefetch) = match (d.tier, prefetch) {
                    (PREFETCH_TIER, Some(hook)) => (hook, true),
                    _ => (kernels[d.tier as usize], false),
                };
                let r = catch_unwind(AssertUnwindSafe(|| k(&d)))
                    .unwrap_or_else(|_| Err("the kernel panicked".to_string()));
                if let Err(message) = r {
                    shared.fail(PdeError::Kernel {
                        space: space.to_string(),
                        tier: tiers
                            .get(d.tier)
                            .map_or_else(|| "prefetch".to_string(), |t| t.name.clone()),
                        descriptor: format!("{d:?}"),
                        message,
                    });
                    break;
                }
                if is_prefetch {
                    prefetched.fetch_add(1, Ordering::Relaxed);
                } else {
                    n += 1;
                }
            }
            None => {
                // `done` is set after the last push, so an empty queue seen after it is final.
                if shared.done.load(Ordering::Acquire) && queue.is_empty() {
                    break;
                }
                backoff(&mut spins);
            }
        }
    }
    count.store(n, Ordering::Relaxed);
}
