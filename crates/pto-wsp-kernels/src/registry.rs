//! The kernel registry: kernels by name, called by id.
//!
//! Why: the IR names kernels; an engine resolves each name once to a [`KernelId`] and then calls
//! by index on the hot path. Each kernel carries a cost function for cost models and
//! scheduling experiments.
//!
//! Promises:
//! - Ids are dense (`0 .. len()`) and stable: registering a name again replaces the kernel (and
//!   resets its cost function to the default) under the same id.
//! - The registry is `Send + Sync + Clone` (kernels are shared `Arc`s), so one registry serves
//!   every worker thread.
//! - [`KernelRegistry::call`] does not catch panics; the engine decides what a panicking kernel
//!   means.
//! - [`KernelRegistry::cancel`] makes every later [`KernelRegistry::call`] of this registry (and
//!   of its clones, which share the flag) fail with [`KernelError::Cancelled`] before the kernel
//!   runs, until [`KernelRegistry::clear_cancel`]: one check on the one path every run mode takes
//!   to a kernel, so a cancelled run stops at its next task whatever runs it.

use crate::context::{TaskContext, ViewProblem};
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Index of a kernel in a [`KernelRegistry`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KernelId(pub u32);

/// Why a kernel failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KernelError {
    /// A failure the kernel describes itself.
    #[error("{0}")]
    Message(String),
    /// A scalar parameter the task does not have.
    #[error("parameter {index} requested, but the task has {count} parameter(s)")]
    Param {
        /// The index asked for.
        index: usize,
        /// Number of parameters of the task.
        count: usize,
    },
    /// A region the task does not have.
    #[error(
        "the kernel reads region {index} (tile argument {}), but the task passes {count} tile argument(s): \
         the kernel is declared with fewer tile parameters than it takes (docs/KERNELS.md lists each \
         built-in's regions)",
        index + 1
    )]
    Region {
        /// The index asked for.
        index: usize,
        /// Number of regions of the task.
        count: usize,
    },
    /// A view of a region was refused.
    #[error("view of region {index} (tensor `{tensor}`): {problem}")]
    View {
        /// The region's index in the task's I/O list.
        index: usize,
        /// The region's tensor.
        tensor: String,
        /// Why.
        problem: ViewProblem,
    },
    /// Regions whose shapes do not fit the kernel.
    #[error("kernel `{kernel}`: {message}")]
    Shape {
        /// The kernel.
        kernel: String,
        /// What does not fit.
        message: String,
    },
    /// A region the kernel reads and writes, declared `out` (write only): dependency inference
    /// would not order it after the writers of its previous contents as a read.
    #[error(
        "kernel `{kernel}`: region {index} is `{access}`, but the kernel reads and updates it; declare it `inout`"
    )]
    Access {
        /// The kernel.
        kernel: String,
        /// The region's index in the task's I/O list.
        index: usize,
        /// The region's declared access.
        access: pto_wsp_ir::Access,
    },
    /// A scalar parameter whose value the kernel cannot use.
    #[error("kernel `{kernel}`: parameter {index}: {message}")]
    ParamValue {
        /// The kernel.
        kernel: String,
        /// The parameter's index.
        index: usize,
        /// What is wrong with it.
        message: String,
    },
    /// The run was cancelled ([`KernelRegistry::cancel`]) before this kernel ran.
    #[error("the run was cancelled")]
    Cancelled,
}

impl KernelError {
    /// A [`KernelError::Shape`] of `kernel`.
    pub fn shape(kernel: &str, message: impl Into<String>) -> KernelError {
        KernelError::Shape {
            kernel: kernel.into(),
            message: message.into(),
        }
    }

    /// A [`KernelError::ParamValue`] of `kernel` about parameter `index`.
    pub fn param_value(kernel: &str, index: usize, message: impl Into<String>) -> KernelError {
        KernelError::ParamValue {
            kernel: kernel.into(),
            index,
            message: message.into(),
        }
    }
}

/// A kernel: runs one task.
pub type KernelFn = dyn Fn(&TaskContext<'_>) -> Result<(), KernelError> + Send + Sync;
/// A cost function: an estimate of one task's cost in abstract units.
pub type CostFn = dyn Fn(&TaskContext<'_>) -> u64 + Send + Sync;

#[derive(Clone)]
struct Entry {
    name: String,
    run: Arc<KernelFn>,
    cost: Option<Arc<CostFn>>,
    /// The name its function was first registered under (an alias's is its kernel's).
    origin: String,
}

/// Kernels by name and by [`KernelId`].
#[derive(Clone, Default)]
pub struct KernelRegistry {
    entries: Vec<Entry>,
    by_name: HashMap<String, u32>,
    /// Raised by [`KernelRegistry::cancel`]; shared with clones.
    cancelled: Arc<AtomicBool>,
}

impl fmt::Debug for KernelRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

/// The default cost of a task: 1 plus the number of elements of every region of its I/O list.
pub fn default_cost(ctx: &TaskContext<'_>) -> u64 {
    1 + ctx.regions().iter().map(region_elements).sum::<u64>()
}

/// Number of elements of an I/O entry's region: the product of the sizes of its used
/// dimensions.
pub fn region_elements(io: &pto_wsp_ir::task_io::TaskIo) -> u64 {
    let rank = (io.region.rank as usize).min(pto_wsp_ir::task_io::MAX_RANK);
    io.region.size[..rank].iter().map(|&s| s as u64).product()
}

impl KernelRegistry {
    /// An empty registry.
    pub fn new() -> KernelRegistry {
        KernelRegistry::default()
    }

    /// A registry holding the built-in kernels of [`crate::builtins`].
    pub fn with_builtins() -> KernelRegistry {
        let mut r = KernelRegistry::new();
        crate::builtins::register_all(&mut r);
        r
    }

    /// Registers `f` as kernel `name` and returns its id. A name registered before keeps its id;
    /// its kernel is replaced and its cost function reset to [`default_cost`].
    pub fn register(
        &mut self,
        name: &str,
        f: impl Fn(&TaskContext<'_>) -> Result<(), KernelError> + Send + Sync + 'static,
    ) -> KernelId {
        let run: Arc<KernelFn> = Arc::new(f);
        if let Some(&id) = self.by_name.get(name) {
            let e = &mut self.entries[id as usize];
            e.run = run;
            e.cost = None;
            e.origin = name.to_string();
            return KernelId(id);
        }
        let id = u32::try_from(self.entries.len()).expect("fewer than 2^32 kernels");
        self.entries.push(Entry {
            name: name.to_string(),
            run,
            cost: None,
            origin: name.to_string(),
        });
        self.by_name.insert(name.to_string(), id);
        KernelId(id)
    }

    /// Sets the cost function of kernel `name`; `false` (and nothing changes) if no kernel has
    /// that name.
    pub fn set_cost(
        &mut self,
        name: &str,
        cost: impl Fn(&TaskContext<'_>) -> u64 + Send + Sync + 'static,
    ) -> bool {
        match self.by_name.get(name) {
            Some(&id) => {
                self.entries[id as usize].cost = Some(Arc::new(cost));
                true
            }
            None => false,
        }
    }

    /// Registers kernel `existing` (its function and cost function) under the name `alias` as
    /// well, so that a module may declare it under its own name (a module's `decode_chunk` can
    /// run the built-in `attn_decode_chunk`). Returns the alias's id, or `None` (and nothing
    /// changes) if no kernel is named `existing`. An alias registered before is replaced.
    pub fn alias(&mut self, alias: &str, existing: &str) -> Option<KernelId> {
        let src = self.entries[*self.by_name.get(existing)? as usize].clone();
        let id = self.register(alias, |_| Ok(()));
        let entry = &mut self.entries[id.0 as usize];
        entry.run = src.run;
        entry.cost = src.cost;
        entry.origin = src.origin;
        Some(id)
    }

    /// The name kernel `id`'s function was registered under: its own, or for an alias the
    /// kernel it aliases (`proj_q` aliasing `matmul`: `matmul`). Panics if `id` is not from this
    /// registry.
    pub fn origin(&self, id: KernelId) -> &str {
        &self.entries[id.0 as usize].origin
    }

    /// Makes every kernel do nothing when called, keeping names, aliases and cost functions:
    /// for runs that only build the graph for a model (`pto-wsp run --model-only`).
    pub fn skip_runs(&mut self) {
        for e in &mut self.entries {
            e.run = Arc::new(|_| Ok(()));
        }
    }

    /// The id of kernel `name`.
    pub fn lookup(&self, name: &str) -> Option<KernelId> {
        self.by_name.get(name).map(|&id| KernelId(id))
    }

    /// The name of kernel `id`. Panics if `id` is not from this registry.
    pub fn name(&self, id: KernelId) -> &str {
        &self.entries[id.0 as usize].name
    }

    /// Number of kernels.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no kernel is registered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every kernel's name, in id order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|e| e.name.as_str())
    }

    /// Runs kernel `id` on `ctx`. Panics if `id` is not from this registry; a panicking kernel
    /// unwinds through here.
    #[inline]
    pub fn call(&self, id: KernelId, ctx: &TaskContext<'_>) -> Result<(), KernelError> {
        if self.cancelled.load(Ordering::Relaxed) {
            return Err(KernelError::Cancelled);
        }
        (self.entries[id.0 as usize].run)(ctx)
    }

    /// Cancels the runs using this registry (or a clone of it): every later [`Self::call`]
    /// fails with [`KernelError::Cancelled`] without running the kernel, until
    /// [`Self::clear_cancel`]. Callable from any thread while a run is in progress.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::Relaxed);
    }

    /// Lets calls run again after [`Self::cancel`] (a program clears it when a run starts).
    pub fn clear_cancel(&self) {
        self.cancelled.store(false, Ordering::Relaxed);
    }

    /// Whether [`Self::cancel`] was called since the last [`Self::clear_cancel`].
    #[inline]
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed)
    }

    /// The cost of running kernel `id` on `ctx`: its cost function, by default [`default_cost`].
    /// Panics if `id` is not from this registry.
    pub fn cost(&self, id: KernelId, ctx: &TaskContext<'_>) -> u64 {
        match &self.entries[id.0 as usize].cost {
            Some(f) => f(ctx),
            None => default_cost(ctx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn registry_is_send_sync() {
        assert_send_sync::<KernelRegistry>();
        assert_send_sync::<crate::TensorStore>();
    }

    #[test]
    fn same_name_replaces_under_the_same_id() {
        let mut r = KernelRegistry::new();
        let a = r.register("k", |_| Ok(()));
        assert!(r.set_cost("k", |_| 7));
        let b = r.register("k", |_| Err(KernelError::Message("second".into())));
        assert_eq!(a, b);
        assert_eq!(r.len(), 1);
        assert!(!r.set_cost("nope", |_| 1));
        assert_eq!(r.names().collect::<Vec<_>>(), ["k"]);
    }
}
