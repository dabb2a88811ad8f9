//! The facade's side of device-generation mode ([`CompileOptions::device_gen`]): the workload
//! encoded and decoded once at compile time, bound per run, and run by
//! [`WorkerPool::run_devgen`](pto_wsp_cpu::WorkerPool::run_devgen) with the program's kernels.
//!
//! Why a separate file: the host-build path of `program.rs` stays as it is; this mode only adds
//! a branch at the top of `Inner::execute`.
//!
//! Promise: a device-generation run runs the reference expander's tasks with the same kernels on
//! the same tensors, ordered by the same inferred and structural dependencies, so it leaves the
//! tensors exactly as a host-built run does; a failing kernel gives the host run's
//! [`ExecError::Kernel`] (task named by its expander index).

use pto_wsp_bytecode::{EncodeOptions, encode};
use pto_wsp_cpu::devgen::{DEFAULT_WINDOW, DevGenConfig};
use pto_wsp_cpu::{ExecError, KernelExec, RunStats};
use pto_wsp_graph::builder::ExactMap;
use pto_wsp_graph::storage::TaskGraphStorage;
use pto_wsp_ir::{Bindings, Resolved, TracePolicy};
use pto_wsp_kernels::TensorStore;

use super::{CompileError, Inner, RunError};

/// Encodes the resolved entry point and decodes it (validated once, at compile time).
pub(super) fn compile_bytecode(res: &Resolved) -> Result<pto_wsp_bytecode::Program, CompileError> {
    let bytes = encode(res, &EncodeOptions::default())
        .map_err(|e| CompileError::Bytecode(e.to_string()))?;
    pto_wsp_bytecode::Program::decode(&bytes).map_err(|e| CompileError::Bytecode(e.to_string()))
}

impl Inner {
    /// A device-generation run of `bytecode` under `bindings` on `store`.
    pub(super) fn execute_devgen(
        &self,
        bytecode: &pto_wsp_bytecode::Program,
        bindings: &Bindings,
        store: &mut TensorStore,
    ) -> Result<RunStats, RunError> {
        let c = self.plan.config();
        let bound = bytecode
            .bind(bindings)
            .map_err(|e| ExecError::Build(e.to_string()))?;
        let threads = self.pool.threads().max(1) as u64;
        let config = DevGenConfig {
            deps: c.deps,
            exact: ExactMap::Growable,
            // The schedule's window is for the whole program: each executor gets its share.
            window: c
                .task_window
                .map_or(DEFAULT_WINDOW, |(n, _)| (n / threads).max(1) as usize),
            trace: self.options.profiling || matches!(c.trace, TracePolicy::Wall),
            record_edges: false,
            partition: self.options.device_gen_partition,
        };
        // Device generation hands each task's data to the executor directly; the source is
        // never read.
        let source = TaskGraphStorage::default();
        let exec = KernelExec::new(
            &source,
            store,
            &self.options.kernels,
            &self.kernels,
            &self.names,
            self.options.debug_checks,
        );
        // The program's tables, reset by the run: the last run's memory, no fresh pages.
        let mut tables = self.devgen_tables.lock().unwrap_or_else(|p| p.into_inner());
        let tables = tables.get_or_insert_with(|| {
            let mut t = pto_wsp_cpu::DevGenTables::new();
            t.set_read_only(&self.read_only);
            t
        });
        Ok(self
            .pool
            .run_devgen_on(tables, bytecode, &bound, &config, &exec)?)
    }
}
