//! Execution on the CPU simulation: simulated devices, each a pool of worker threads of three
//! kinds (cube, vector, AICPU cores) and a control thread that runs the program's control
//! code; several devices in one process exchange notifications.
//!
//! - [`library`]: what an entry symbol runs (built-in, kernel-language, Rust and workload
//!   kernels).
//! - [`place`]: which workers each kernel may run on (core types, `CA_*`).
//! - `run` (private): ready counts, the ready queue, graph instances, events, streams, the
//!   control code.
//! - [`fabric`]: notifications between devices.
//!
//! A [`Device`] is made once per program ([`Device::new`]: symbols resolved, placement decided,
//! tensors allocated, workers started — every mistake reported before anything runs); its
//! tensors are written before a run and read after ([`Device::store_mut`]); [`Device::run`]
//! runs the program, [`run_devices`] several programs on several devices at once.
//!
//! Memory: every allocation of the program exists, zeroed, from the device's creation to its
//! end (so inputs can be written before the run); `MC_ALLOC` checks the buffer's alignment and
//! makes the tensor usable, `MC_FREE` makes it unusable again. Freed memory is not reused.

pub(crate) mod bytes;
pub mod fabric;
pub mod library;
pub mod place;
mod run;

pub use library::{Entry, Launch, Library, LibraryError, Workload};
pub use place::{MAX_WORKERS, Mask};

use crate::check::{ArgPlan, Checked};
use crate::operand::CoreType;
use fabric::Fabric;
use pto_wsp_cpu::WorkerPool;
use pto_wsp_kernels::{KernelId, KernelRegistry, TensorSpec, TensorStore};
use std::time::{Duration, Instant};

/// A simulated device: its cores and run-time limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceConfig {
    /// Cube (AIC) cores: workers `0 .. aic`.
    pub aic: u32,
    /// Vector (AIV) cores: the next `aiv` workers.
    pub aiv: u32,
    /// AICPU threads: the last `aicpu` workers.
    pub aicpu: u32,
    /// L2 groups the workers are split into (`CA_AFFINITY(.., L2_SHARE)`).
    pub l2_groups: u32,
    /// Record a span per kernel instance ([`RunReport::trace`]).
    pub trace: bool,
    /// The most passes a loop may make before the run stops with an error.
    pub max_passes: u64,
}

impl Default for DeviceConfig {
    /// Two cube cores, four vector cores, one AICPU thread, two L2 groups, no trace, a
    /// million passes per loop.
    fn default() -> DeviceConfig {
        DeviceConfig {
            aic: 2,
            aiv: 4,
            aicpu: 1,
            l2_groups: 2,
            trace: false,
            max_passes: 1_000_000,
        }
    }
}

/// Why a program could not be loaded onto a device.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LoadError(pub String);

/// Why a run failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    /// A kernel instance failed.
    #[error("kernel {kernel} of graph {graph}, instance {block}: {message}")]
    Kernel {
        /// The graph.
        graph: String,
        /// The kernel.
        kernel: String,
        /// The instance.
        block: u32,
        /// What the kernel (or the runner refusing it) said.
        message: String,
    },
    /// A memory operation failed.
    #[error("{0}")]
    Memory(String),
    /// Control flow could not go on (a negative count, a loop at its pass limit).
    #[error("{0}")]
    Control(String),
    /// Nothing can run any more.
    #[error("deadlock: {0}")]
    Deadlock(String),
    /// A notification names a device the run does not have.
    #[error("{0}")]
    Notify(String),
    /// A worker thread panicked, or the runtime broke a promise.
    #[error("internal error: {0}")]
    Internal(String),
}

/// One kernel instance as it ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceRecord {
    /// Graph index (in [`Checked::graphs`]).
    pub graph: usize,
    /// Kernel index in the graph.
    pub kernel: usize,
    /// The launch (numbered from 0 in the run).
    pub launch: u64,
    /// Instance index.
    pub block: u32,
    /// The worker that ran it.
    pub worker: u32,
    /// That worker's kind.
    pub core: CoreType,
    /// Logical time it started (one clock per device: every start and end takes a tick).
    pub start: u64,
    /// Logical time it ended.
    pub end: u64,
}

/// What a run did.
#[derive(Clone, Debug, Default)]
pub struct RunReport {
    /// Kernel instances as they ran (with [`DeviceConfig::trace`]), in order of completion.
    pub trace: Vec<TraceRecord>,
    /// Graph launches.
    pub launches: u64,
    /// Kernel runs (all instances of a kernel item once).
    pub kernel_runs: u64,
    /// Kernel instances.
    pub instances: u64,
    /// Wall-clock time of the run.
    pub elapsed: Duration,
}

/// What a run reads of its device, decided at load.
pub(crate) struct Prepared {
    cfg: DeviceConfig,
    workers: u32,
    /// Per graph, per kernel: its library entry.
    entries: Vec<Vec<Entry>>,
    /// Per graph, per kernel: the workers it may run on.
    masks: Vec<Vec<Mask>>,
    copy_kernel: KernelId,
    read_kernel: KernelId,
    /// Address of each tensor's buffer (alignment is checked at `MC_ALLOC`).
    addresses: Vec<usize>,
}

/// A simulated device loaded with a program (see the module docs).
pub struct Device {
    checked: Checked,
    registry: KernelRegistry,
    prepared: Prepared,
    store: TensorStore,
    pool: WorkerPool,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device")
            .field("config", &self.prepared.cfg)
            .field("graphs", &self.checked.graphs.len())
            .finish_non_exhaustive()
    }
}

fn internal_kernels(registry: &mut KernelRegistry) -> (KernelId, KernelId) {
    let copy = registry.register("__ptog_copy", |ctx| {
        let b = bytes::gather(ctx, 0)?;
        bytes::scatter(ctx, 1, &b)
    });
    let read = registry.register("__ptog_read", |ctx| {
        let b = bytes::gather(ctx, 0)?;
        run::READ.with(|r| *r.borrow_mut() = b);
        Ok(())
    });
    (copy, read)
}

impl Device {
    /// Loads `checked` onto a device `cfg` with kernels from `library`: every entry symbol
    /// resolved, every kernel placed, every tensor allocated, the workers started.
    pub fn new(
        checked: Checked,
        cfg: DeviceConfig,
        library: &Library,
    ) -> Result<Device, LoadError> {
        let workers = cfg.aic as u64 + cfg.aiv as u64 + cfg.aicpu as u64;
        if workers == 0 || workers > MAX_WORKERS as u64 {
            return Err(LoadError(format!(
                "a device has 1 to {MAX_WORKERS} workers, not {workers} ({} cube, {} vector, {} \
                 AICPU)",
                cfg.aic, cfg.aiv, cfg.aicpu
            )));
        }
        let mut entries = Vec::with_capacity(checked.graphs.len());
        let mut masks = Vec::with_capacity(checked.graphs.len());
        for g in &checked.graphs {
            let mut es = Vec::with_capacity(g.kernels.len());
            for k in &g.kernels {
                let e = library.entry(&k.entry).ok_or_else(|| {
                    let known: Vec<&str> = library.symbols().take(12).collect();
                    LoadError(format!(
                        "graph {}: kernel {} runs `{}`, which is not in the kernel library \
                         (it has {}{})",
                        g.name,
                        k.name,
                        k.entry,
                        known.join(", "),
                        if library.symbols().count() > 12 {
                            ", ..."
                        } else {
                            ""
                        }
                    ))
                })?;
                if k.block_dim > e.max_block_dim {
                    return Err(LoadError(format!(
                        "graph {}: kernel {} has blockDim {}, but `{}` runs at most {} \
                         instance(s)",
                        g.name, k.name, k.block_dim, k.entry, e.max_block_dim
                    )));
                }
                for a in &k.args {
                    if let ArgPlan::Tensor {
                        tensor,
                        start,
                        size,
                        ..
                    } = a
                        && start.iter().zip(size).any(|(s, n)| s + n > u32::MAX as u64)
                    {
                        return Err(LoadError(format!(
                            "graph {}: kernel {} binds tensor {}, whose extent passes 2^32 \
                             elements in one dimension",
                            g.name, k.name, checked.tensors[*tensor].name
                        )));
                    }
                }
                es.push(e);
            }
            entries.push(es);
            masks.push(place::place(&cfg, g).map_err(LoadError)?);
        }
        let specs: Vec<TensorSpec> = checked
            .tensors
            .iter()
            .map(|t| TensorSpec {
                name: t.name.clone(),
                dtype: t.dtype,
                shape: t.shape.clone(),
                align: t.align as usize,
            })
            .collect();
        let store = TensorStore::from_specs(&specs).map_err(|e| LoadError(e.to_string()))?;
        let addresses = (0..store.len())
            .map(|t| store.bytes(t as u32).as_ptr() as usize)
            .collect();
        let mut registry = library.registry().clone();
        let (copy_kernel, read_kernel) = internal_kernels(&mut registry);
        let pool = WorkerPool::new(workers as usize).map_err(|e| LoadError(e.to_string()))?;
        Ok(Device {
            checked,
            registry,
            prepared: Prepared {
                cfg,
                workers: workers as u32,
                entries,
                masks,
                copy_kernel,
                read_kernel,
                addresses,
            },
            store,
            pool,
        })
    }

    /// The program.
    pub fn checked(&self) -> &Checked {
        &self.checked
    }

    /// The device's configuration.
    pub fn config(&self) -> &DeviceConfig {
        &self.prepared.cfg
    }

    /// The workers each kernel of graph `graph` (an index) may run on.
    pub fn placement(&self, graph: usize) -> &[Mask] {
        &self.prepared.masks[graph]
    }

    /// The device's tensors (the program's allocations, by their names).
    pub fn store(&self) -> &TensorStore {
        &self.store
    }

    /// The device's tensors, writable (inputs go here before a run).
    pub fn store_mut(&mut self) -> &mut TensorStore {
        &mut self.store
    }

    /// Runs the program once on this device.
    pub fn run(&mut self) -> Result<RunReport, RunError> {
        let mut reports = run_devices(std::slice::from_mut(self))?;
        Ok(reports.pop().unwrap_or_default())
    }

    /// Runs the program as device `index` of a run with notifications through `fabric`.
    fn run_as(&mut self, index: u32, fabric: &Fabric) -> Result<RunReport, RunError> {
        let t0 = Instant::now();
        let Device {
            checked,
            registry,
            prepared,
            store,
            pool,
        } = self;
        let result = pto_wsp_kernels::with_checked_runner(store, registry, |runner| {
            let shared = run::Shared::new(checked, prepared, runner);
            let job = |w: usize| shared.worker(w);
            let control = || {
                let r = shared.control(index, fabric);
                shared.shutdown();
                r
            };
            let r = pool
                .scope(&job, control)
                .map_err(|e| RunError::Internal(e.to_string()))
                .and_then(|r| r);
            r.map(|()| RunReport {
                trace: shared.take_trace(),
                launches: shared
                    .counters
                    .launches
                    .load(pto_wsp_graph::sync::Ordering::Relaxed),
                kernel_runs: shared
                    .counters
                    .kernel_runs
                    .load(pto_wsp_graph::sync::Ordering::Relaxed),
                instances: shared
                    .counters
                    .instances
                    .load(pto_wsp_graph::sync::Ordering::Relaxed),
                elapsed: Duration::ZERO,
            })
        });
        fabric.finish(index, result.is_ok());
        result.map(|mut r| {
            r.elapsed = t0.elapsed();
            r
        })
    }
}

/// Runs device `i`'s program on `devices[i]`, all at once, with notifications between them
/// (`SY_NOTIFY(d, n)` on device `i` is waited for by `SY_WAIT_NOTIFY(i, n)` on device `d`).
/// The first error (in device order) is returned.
pub fn run_devices(devices: &mut [Device]) -> Result<Vec<RunReport>, RunError> {
    let fabric = Fabric::new(devices.len());
    if devices.len() == 1 {
        return devices[0].run_as(0, &fabric).map(|r| vec![r]);
    }
    let results: Vec<Result<RunReport, RunError>> = std::thread::scope(|sc| {
        let handles: Vec<_> = devices
            .iter_mut()
            .enumerate()
            .map(|(i, d)| {
                let fabric = &fabric;
                std::thread::Builder::new()
                    .name(format!("ptog-device-{i}"))
                    .spawn_scoped(sc, move || d.run_as(i as u32, fabric))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h {
                Ok(h) => h
                    .join()
                    .unwrap_or_else(|_| Err(RunError::Internal("a device thread panicked".into()))),
                Err(e) => Err(RunError::Internal(format!(
                    "cannot start a device thread: {e}"
                ))),
            })
            .collect()
    });
    results.into_iter().collect()
}
