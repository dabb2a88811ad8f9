//! A workload as one kernel node of a task graph (the task-graph ISA's multi-kernel
//! composition, `pto_wsp_ptog::Library::add_workload`).
//!
//! Why: a task-graph kernel node may be a whole pto-wsp workload — the MLA prolog of the
//! DeepSeek example is projections, norms and RoPE in tiles, inferred and scheduled by the
//! runtime — while the ISA crate runs graphs and knows nothing of compiling workloads. This is
//! the bridge: a compiled [`Program`] with its bindings, run once per launch of its node.
//!
//! Promise: the node's tensors are the program's, allocated for its bindings; each
//! [`Workload::execute`](pto_wsp_ptog::exec::Workload::execute) is one [`Program::execute`].

use crate::program::{CompileError, CompileOptions, Program, compile, lower};
use pto_wsp_ir::{Bindings, Module};
use pto_wsp_kernels::{KernelError, KernelRegistry, TensorStore};

/// A compiled workload and its bindings, run as one kernel node (see the module docs).
pub struct WorkloadNode {
    program: Program,
    bindings: Bindings,
}

impl WorkloadNode {
    /// Compiles `module`'s entry point for the CPU simulation with `kernels` on `threads`
    /// worker threads (0: one per core), to run under `bindings`.
    pub fn compile(
        module: &Module,
        bindings: Bindings,
        kernels: KernelRegistry,
        threads: usize,
    ) -> Result<WorkloadNode, CompileError> {
        let program = compile(
            lower(module)?,
            CompileOptions {
                kernels,
                threads,
                ..CompileOptions::default()
            },
        )?;
        Ok(WorkloadNode { program, bindings })
    }

    /// A maker of workload nodes on `threads` threads with no bindings, as the ISA crate's
    /// examples take one (`pto_wsp_ptog::examples::library`).
    pub fn maker(
        threads: usize,
    ) -> impl Fn(&Module, KernelRegistry) -> Result<Box<dyn pto_wsp_ptog::exec::Workload>, String>
    {
        move |m, k| {
            WorkloadNode::compile(m, Bindings::new(), k, threads)
                .map(|n| Box::new(n) as Box<dyn pto_wsp_ptog::exec::Workload>)
                .map_err(|e| e.to_string())
        }
    }
}

impl pto_wsp_ptog::exec::Workload for WorkloadNode {
    fn tensors(
        &mut self,
        f: &mut dyn FnMut(&mut TensorStore) -> Result<(), KernelError>,
    ) -> Result<(), KernelError> {
        let mut guard = self
            .program
            .tensors(&self.bindings)
            .map_err(|e| KernelError::Message(e.to_string()))?;
        match guard.as_mut() {
            Some(store) => f(store),
            None => Err(KernelError::Message("the workload has no tensors".into())),
        }
    }

    fn execute(&mut self) -> Result<(), String> {
        self.program
            .execute(&self.bindings)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}
