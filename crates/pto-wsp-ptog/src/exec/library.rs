//! The kernel library: what a `TG_KERNEL`'s entry symbol runs.
//!
//! Why: a task-graph binary names its kernels by symbol; the kernels themselves come from
//! elsewhere (the specification's "kernel binaries + metadata"). Here a symbol is one of:
//! - a kernel of a [`KernelRegistry`]: a built-in tile kernel of `pto-wsp-kernels`
//!   ([`Library::with_builtins`]), or a kernel written in the kernel language
//!   ([`Library::add_kernel_language`], run by `pto_wsp_kernels::lang`);
//! - a Rust function of this library ([`Library::add_fn`]), which sees its instance
//!   ([`Launch`]);
//! - a whole pto-wsp workload ([`Library::add_workload`], any [`Workload`]; the facade's
//!   `pto_wsp::WorkloadNode` is a compiled program): one kernel node runs the module's
//!   program on its bound tensors — multi-kernel composition.
//!
//! Promises: every kernel runs through `pto_wsp_kernels::CheckedRunner` on views of its bound
//! regions (so two kernels running at once can never write what the other touches: the run
//! fails naming both); a library is `Send + Sync` and shared by every worker.

use super::bytes::{AnyWrite, gather};
use pto_wsp_ir::Module;
use pto_wsp_kernels::{KernelError, KernelId, KernelRegistry, TaskContext, TensorStore};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// How a symbol runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The kernel in the library's registry.
    pub kernel: KernelId,
    /// Whether the kernel receives its instance ([`Launch`]) before its scalar arguments.
    pub launch_params: bool,
    /// The most instances it may have (a workload node runs once per launch: 1).
    pub max_block_dim: u32,
}

/// What one instance of a kernel node is: which block of how many, the iteration bound by
/// `TG_INVOKE`, and the values of the loop iterators around the kernel. A kernel added with
/// [`Library::add_fn`] reads it with [`Launch::of`]; its scalar arguments follow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    /// This instance's index, `0 .. block_dim`.
    pub block: u32,
    /// The kernel's `blockDim`.
    pub block_dim: u32,
    /// The iteration (`TG_INVOKE`; 0 for `TG_LAUNCH`).
    pub iteration: u64,
    /// Values of the `CF_LOOP` iterators around the kernel in its graph, outermost first.
    pub iterators: Vec<u64>,
    /// Index of the first scalar argument in `ctx.params()`.
    pub first_scalar: usize,
}

impl Launch {
    /// Number of leading parameters that describe the instance, for `iterators` iterators.
    pub fn width(iterators: usize) -> usize {
        4 + iterators
    }

    /// The leading parameters for this instance (what the runtime passes).
    pub fn params(&self) -> Vec<u64> {
        let mut p = vec![
            self.block as u64,
            self.block_dim as u64,
            self.iteration,
            self.iterators.len() as u64,
        ];
        p.extend_from_slice(&self.iterators);
        p
    }

    /// The instance a running kernel of [`Library::add_fn`] is.
    pub fn of(ctx: &TaskContext<'_>) -> Result<Launch, KernelError> {
        let p = ctx.params();
        let bad =
            || KernelError::Message("the kernel was not called as a task-graph kernel".into());
        if p.len() < 4 {
            return Err(bad());
        }
        let n = p[3] as usize;
        if p.len() < 4 + n {
            return Err(bad());
        }
        Ok(Launch {
            block: p[0] as u32,
            block_dim: p[1] as u32,
            iteration: p[2],
            iterators: p[4..4 + n].to_vec(),
            first_scalar: 4 + n,
        })
    }
}

/// Why a symbol could not be added.
#[derive(Debug, thiserror::Error)]
pub enum LibraryError {
    /// The registry has no kernel of that name.
    #[error("no kernel `{0}` to add")]
    NoKernel(String),
    /// A workload could not be compiled.
    #[error("workload `{symbol}`: {message}")]
    Workload {
        /// The symbol.
        symbol: String,
        /// Why.
        message: String,
    },
}

/// Symbols and the kernels they run (see the module docs).
#[derive(Clone, Default)]
pub struct Library {
    registry: KernelRegistry,
    entries: BTreeMap<String, Entry>,
}

impl std::fmt::Debug for Library {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.entries.keys()).finish()
    }
}

impl Library {
    /// No symbol.
    pub fn new() -> Library {
        Library::default()
    }

    /// Every built-in kernel of `pto-wsp-kernels` under its own name (`matmul`, `rmsnorm`,
    /// `topk`, ... — `docs/KERNELS.md`).
    pub fn with_builtins() -> Library {
        Library::from_registry(KernelRegistry::with_builtins())
    }

    /// Every kernel of `registry` under its own name (built-ins, aliases, kernel-language
    /// kernels registered there): how a lowered module's kernels are found.
    pub fn from_registry(registry: KernelRegistry) -> Library {
        let entries = registry
            .names()
            .map(|n| {
                let id = registry.lookup(n).expect("listed");
                (
                    n.to_string(),
                    Entry {
                        kernel: id,
                        launch_params: false,
                        max_block_dim: u32::MAX,
                    },
                )
            })
            .collect();
        Library { registry, entries }
    }

    /// The entry of `symbol`.
    pub fn entry(&self, symbol: &str) -> Option<Entry> {
        self.entries.get(symbol).copied()
    }

    /// Every symbol, sorted.
    pub fn symbols(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }

    /// The registry every entry's kernel lives in.
    pub fn registry(&self) -> &KernelRegistry {
        &self.registry
    }

    /// Makes `symbol` run the registry's kernel `kernel` (an alias: `mla_proj` running
    /// `matmul`).
    pub fn alias(&mut self, symbol: &str, kernel: &str) -> Result<(), LibraryError> {
        let id = self
            .registry
            .lookup(kernel)
            .ok_or_else(|| LibraryError::NoKernel(kernel.to_string()))?;
        self.entries.insert(
            symbol.to_string(),
            Entry {
                kernel: id,
                launch_params: false,
                max_block_dim: u32::MAX,
            },
        );
        Ok(())
    }

    /// Adds `f` as `symbol`: a Rust kernel that sees its instance ([`Launch::of`]) and its
    /// regions (the bound tensor arguments, in order).
    pub fn add_fn(
        &mut self,
        symbol: &str,
        f: impl Fn(&TaskContext<'_>) -> Result<(), KernelError> + Send + Sync + 'static,
    ) {
        let id = self.registry.register(symbol, f);
        self.entries.insert(
            symbol.to_string(),
            Entry {
                kernel: id,
                launch_params: true,
                max_block_dim: u32::MAX,
            },
        );
    }

    /// Adds every kernel of `module` that has a body (the kernel language), under its name.
    /// Returns the names added.
    pub fn add_kernel_language(&mut self, module: &Module) -> Vec<String> {
        let names = pto_wsp_kernels::lang::register_bodies(module, &mut self.registry);
        for n in &names {
            let id = self.registry.lookup(n).expect("just registered");
            self.entries.insert(
                n.clone(),
                Entry {
                    kernel: id,
                    launch_params: false,
                    max_block_dim: u32::MAX,
                },
            );
        }
        names
    }

    /// Adds `workload` as `symbol`: one instance per launch runs the whole workload (see
    /// [`Workload`]). The node's tensor arguments are the workload's first tensors in order
    /// (element type and size must match); its other tensors are the node's own workspace.
    /// Arguments it writes are copied back after the run.
    pub fn add_workload(&mut self, symbol: &str, workload: Box<dyn Workload>) {
        let node = Arc::new(WorkloadNode {
            symbol: symbol.to_string(),
            workload: Mutex::new(workload),
        });
        let id = self.registry.register(symbol, move |ctx| node.run(ctx));
        self.entries.insert(
            symbol.to_string(),
            Entry {
                kernel: id,
                launch_params: false,
                max_block_dim: 1,
            },
        );
    }
}

/// A whole workload that runs as one kernel node (multi-kernel composition): a compiled
/// pto-wsp program with its bindings (`pto_wsp::WorkloadNode` implements it), or anything with
/// tensors that runs.
pub trait Workload: Send {
    /// Calls `f` with the workload's tensors (allocated as it runs them).
    fn tensors(
        &mut self,
        f: &mut dyn FnMut(&mut TensorStore) -> Result<(), KernelError>,
    ) -> Result<(), KernelError>;
    /// Runs the workload once on its tensors.
    fn execute(&mut self) -> Result<(), String>;
}

/// A workload run as one kernel node.
struct WorkloadNode {
    symbol: String,
    workload: Mutex<Box<dyn Workload>>,
}

impl WorkloadNode {
    fn run(&self, ctx: &TaskContext<'_>) -> Result<(), KernelError> {
        let fail = |m: String| KernelError::Message(format!("workload `{}`: {m}", self.symbol));
        let mut w = self.workload.lock().unwrap_or_else(|p| p.into_inner());
        // Written arguments are viewed once, read before the run and replaced after it.
        let mut written = Vec::new();
        w.tensors(&mut |store: &mut TensorStore| {
            if store.len() < ctx.num_regions() {
                return Err(fail(format!(
                    "the module has {} tensor(s), the node binds {}",
                    store.len(),
                    ctx.num_regions()
                )));
            }
            for i in 0..ctx.num_regions() {
                let (mine, theirs) = (ctx.info(i)?.clone(), store.info(i as u32).clone());
                let bytes = if ctx.io(i)?.access().writes() {
                    let view = AnyWrite::of(ctx, i)?;
                    let b = view.bytes();
                    written.push((i, view));
                    b
                } else {
                    gather(ctx, i)?
                };
                if mine.dtype != theirs.dtype || bytes.len() as u64 != theirs.size_bytes() {
                    return Err(fail(format!(
                        "argument {i} holds {} bytes of {}, the module's tensor `{}` is {} of \
                         shape {:?}",
                        bytes.len(),
                        mine.dtype,
                        theirs.name,
                        theirs.dtype,
                        theirs.shape
                    )));
                }
                store.bytes_mut(i as u32).copy_from_slice(&bytes);
            }
            Ok(())
        })?;
        w.execute().map_err(fail)?;
        w.tensors(&mut |store: &mut TensorStore| {
            for (i, view) in &mut written {
                view.store(store.bytes(*i as u32))?;
            }
            Ok(())
        })
    }
}
