//! `pto-wsp`: PTO Workload-Schedule Programming in Rust.
//!
//! The facade crate users depend on: the back-end interface ([`lower`], [`compile`],
//! [`Program`], the [`Backend`] trait and its registry) and re-exports of the IR ([`ir`]), the
//! runtime core ([`graph`]), tensors and kernels ([`kernels`]), the CPU simulation ([`cpu`]) and
//! workload bytecode with its per-executor interpreter ([`bytecode`]).
//!
//! A module built with the builder ([`ir::builder`]), compiled for the CPU simulation with the
//! built-in kernels ([`kernels::KernelRegistry::with_builtins`], the default), then run with
//! inputs written into its tensors and an output read back (the crate's
//! `examples/add_softmax.rs` is a longer program of the same kind):
//!
//! ```
//! use pto_wsp::ir::builder::{ModuleBuilder, e, region, span};
//! use pto_wsp::ir::{AxisKind, Bindings, DType, ScalarType};
//! use pto_wsp::{CompileOptions, compile, lower};
//!
//! // C = A + B, one `add` task (the built-in of that name) per tile of 4 rows.
//! let mut m = ModuleBuilder::new();
//! m.symbol("rows", ScalarType::I64);
//! for t in ["A", "B", "C"] {
//!     m.tensor(t, DType::F32, [e("rows"), 8.into()]);
//! }
//! m.axis("T", AxisKind::DenseDyn(e("rows") / 4));
//! m.kernel("add")
//!     .input("a", DType::F32, [Some(4), Some(8)])
//!     .input("b", DType::F32, [Some(4), Some(8)])
//!     .output("c", DType::F32, [Some(4), Some(8)]);
//! m.workload("main", |w| {
//!     w.parallel_for("t", "T", |w| {
//!         let tile = |name: &str| region(name, [span(e("t") * 4, 4), span(0, 8)]).into();
//!         w.task("add", [tile("A"), tile("B"), tile("C")]);
//!     });
//! });
//! let module = m.finish();
//!
//! let mut program = compile(lower(&module)?, CompileOptions::default())?;
//! let bindings = Bindings::new().symbol("rows", 16i64);
//! let a: Vec<f32> = (0..128).map(|i| i as f32).collect();
//! let b: Vec<f32> = (0..128).map(|i| 0.5 * i as f32).collect();
//! {
//!     let mut tensors = program.tensors(&bindings)?;
//!     let store = tensors.as_mut().expect("allocated");
//!     store.write("A", &a)?;
//!     store.write("B", &b)?;
//! }
//! let stats = program.execute(&bindings)?;
//! assert_eq!(stats.tasks, 4);
//! let c: Vec<f32> = program.tensors(&bindings)?.as_ref().expect("allocated").read("C")?;
//! assert!(c.iter().enumerate().all(|(i, &v)| v == 1.5 * i as f32));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]

pub mod backend;
pub mod driver;
pub mod machine;
pub mod node;
pub mod plan;
pub mod program;

pub use backend::{
    Artefact, Backend, Capability, Output, backends, compile_target, get_backend, register_backend,
};
pub use node::WorkloadNode;
pub use program::{
    CALLER_DEPTH, CompileError, CompileOptions, LoweredPlan, Program, ProgramStats, RunError,
    TensorRole, Unwritten, compile, lower, plan_roles, roles,
};
/// The code-emitting back ends (PTO-ISA C++ kernels, the Ascend runtime), registered as
/// `ptoisa` and `ascend`.
pub use pto_wsp_backends as emitters;
pub use pto_wsp_bytecode as bytecode;
pub use pto_wsp_cpu as cpu;
/// The worker pool programs run on; one can be shared by many ([`CompileOptions::pool`]).
pub use pto_wsp_cpu::WorkerPool;
pub use pto_wsp_graph as graph;
pub use pto_wsp_ir as ir;
pub use pto_wsp_kernels as kernels;
/// Plan-Descriptor-Execute (the PDE specification): iteration spaces, tiers, fixed-size work
/// descriptors, the split-KV planner and parallel dispatch (`docs/PDE.md`).
pub use pto_wsp_pde as pde;
/// The task-graph ISA: assembler, disassembler, the `PTOG` binary and its execution on the CPU
/// simulation (`docs/ISA.md`).
pub use pto_wsp_ptog as ptog;
