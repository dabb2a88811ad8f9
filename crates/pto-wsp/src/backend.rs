//! The back-end interface (the back-end architecture specification) and the registry new targets
//! plug into.
//!
//! Why: every target — the CPU simulation that runs, and the emitting ones to come (Ascend
//! orchestration code, the task-graph ISA, AIE MLIR) — takes the same resolved module
//! ([`pto_wsp_ir::resolve`](mod@pto_wsp_ir::resolve)) and gives either a runnable [`Program`] or an
//! [`Artefact`] (bytes or a tree of files). A new target implements [`Backend`] and calls
//! [`register_backend`]; nothing in this crate changes (the facade's tests register one from a test
//! file).
//!
//! Promises:
//! - [`compile_target`] validates nothing twice: the plan was validated and resolved by
//!   [`crate::lower`]; it asks the back end whether it [`Backend::supports`] the resolved module
//!   (the first construct it cannot handle, named, with its location) before compiling.
//! - The registry holds `cpu_sim`, `bytecode` and the emitting back ends of `pto-wsp-backends`
//!   (`ptoisa`; `ascend` with the default-on `ascend` feature) from the start, for every user of
//!   the library (Rust, Python, the command line); a name or target that is already registered
//!   is refused, so [`get_backend`] is never ambiguous.
//! - Every back end is checked against the reference expander: `cpu_sim` runs what the expander
//!   generates, and `bytecode`'s interpreters are checked task for task against it
//!   (`pto-wsp-bytecode`'s tests, `pto-wsp bytecode FILE`).

mod emitters;

use crate::program::{CompileError, CompileOptions, LoweredPlan, Program, compile_cpu};
use pto_wsp_ir::{Resolved, Unsupported};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Instant;

/// What a back end can do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Capability {
    /// Runs kernels and produces numbers.
    Execute,
    /// Builds the graph while it runs.
    Streaming,
    /// Wall-clock traces.
    WallTrace,
    /// Executor-local generation from bytecode.
    Bytecode,
    /// Produces an artefact (bytes or files) instead of running.
    Emit,
}

impl Capability {
    /// A short name for listings.
    pub fn name(self) -> &'static str {
        match self {
            Capability::Execute => "execute",
            Capability::Streaming => "streaming",
            Capability::WallTrace => "wall-trace",
            Capability::Bytecode => "bytecode",
            Capability::Emit => "emit",
        }
    }
}

/// What an emitting back end produces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Artefact {
    /// One file's bytes.
    Bytes(Vec<u8>),
    /// A tree of files: paths relative to the output directory, and their contents.
    Tree(Vec<(PathBuf, Vec<u8>)>),
}

/// What [`Backend::compile`] gives.
#[derive(Debug)]
pub enum Output {
    /// A runnable program (a running back end).
    Program(Box<Program>),
    /// An artefact (an emitting back end).
    Artefact(Artefact),
}

/// A target: checks a resolved module, then compiles a plan (two-phase, as the back-end
/// architecture specification has it).
pub trait Backend: Send + Sync {
    /// The back end's name (unique in the registry).
    fn name(&self) -> &str;
    /// The targets it compiles for (each unique in the registry); [`get_backend`] finds a back
    /// end by its name or any of its targets.
    fn targets(&self) -> Vec<String>;
    /// What it can do.
    fn capabilities(&self) -> Vec<Capability>;
    /// `Ok` if it can handle every construct of `module`; else the first one it cannot, named,
    /// with its location.
    fn supports(&self, module: &Resolved) -> Result<(), Unsupported>;
    /// Compiles `plan` (validated, resolved, and [`Backend::supports`]-checked).
    fn compile(&self, plan: &LoweredPlan, options: &CompileOptions)
    -> Result<Output, CompileError>;
}

fn registry() -> &'static RwLock<Vec<Arc<dyn Backend>>> {
    static REGISTRY: OnceLock<RwLock<Vec<Arc<dyn Backend>>>> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let mut all: Vec<Arc<dyn Backend>> = vec![Arc::new(CpuSim), Arc::new(BytecodeEmitter)];
        all.extend(emitters::all());
        RwLock::new(all)
    })
}

/// Adds `backend` to the registry. Refused when its name or one of its targets is already
/// registered (as a name or a target).
pub fn register_backend(backend: Arc<dyn Backend>) -> Result<(), CompileError> {
    let mut reg = registry().write().unwrap_or_else(|p| p.into_inner());
    let name = backend.name().to_string();
    let mut mine = backend.targets();
    mine.push(name.clone());
    for b in reg.iter() {
        let mut theirs = b.targets();
        theirs.push(b.name().to_string());
        if let Some(clash) = mine.iter().find(|m| theirs.contains(m)) {
            return Err(CompileError::Registry {
                name,
                reason: format!("`{clash}` is already served by back end `{}`", b.name()),
            });
        }
    }
    reg.push(backend);
    Ok(())
}

/// The back end registered under `name`, as its name or one of its targets.
pub fn get_backend(name: &str) -> Option<Arc<dyn Backend>> {
    let reg = registry().read().unwrap_or_else(|p| p.into_inner());
    reg.iter()
        .find(|b| b.name() == name || b.targets().iter().any(|t| t == name))
        .cloned()
}

/// Every registered back end, in registration order.
pub fn backends() -> Vec<Arc<dyn Backend>> {
    registry().read().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Every registered target, comma-separated (for messages).
fn known_targets() -> String {
    backends()
        .iter()
        .flat_map(|b| b.targets())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Compiles `plan` for `options.target` with whichever back end serves it: the back end's
/// [`Backend::supports`] check of the plan's resolved program, then its [`Backend::compile`]. A
/// program records the time that took ([`Program::compile_time_ms`]; resolution was
/// [`crate::lower`]'s).
pub fn compile_target(
    plan: &LoweredPlan,
    options: &CompileOptions,
) -> Result<Output, CompileError> {
    let start = Instant::now();
    let backend = get_backend(&options.target).ok_or_else(|| CompileError::UnknownTarget {
        target: options.target.clone(),
        available: known_targets(),
    })?;
    backend.supports(plan.resolved())?;
    let mut out = backend.compile(plan, options)?;
    if let Output::Program(p) = &mut out {
        p.set_compile_time_ms(start.elapsed().as_secs_f64() * 1e3);
    }
    Ok(out)
}

/// `cpu_sim`: the CPU simulation of `pto-wsp-cpu` (see [`crate::program`]).
struct CpuSim;

impl Backend for CpuSim {
    fn name(&self) -> &str {
        "cpu"
    }

    fn targets(&self) -> Vec<String> {
        vec!["cpu_sim".into()]
    }

    fn capabilities(&self) -> Vec<Capability> {
        vec![
            Capability::Execute,
            Capability::Streaming,
            Capability::WallTrace,
            Capability::Bytecode,
        ]
    }

    fn supports(&self, module: &Resolved) -> Result<(), Unsupported> {
        // The CPU simulation runs everything the reference expander does; what a pipeline's
        // processes cannot run of data-dependent generation is in the mode table.
        if module.csp {
            crate::program::modes::data_refused(module, crate::program::modes::Mode::Pipeline)?;
        }
        Ok(())
    }

    fn compile(
        &self,
        plan: &LoweredPlan,
        options: &CompileOptions,
    ) -> Result<Output, CompileError> {
        compile_cpu(plan.clone(), options.clone()).map(|p| Output::Program(Box::new(p)))
    }
}

/// `bytecode`: the workload bytecode of `pto-wsp-bytecode` (`docs/BYTECODE.md`) as an artefact.
struct BytecodeEmitter;

impl Backend for BytecodeEmitter {
    fn name(&self) -> &str {
        "bytecode"
    }

    fn targets(&self) -> Vec<String> {
        vec!["bytecode".into()]
    }

    fn capabilities(&self) -> Vec<Capability> {
        vec![Capability::Emit, Capability::Bytecode]
    }

    fn supports(&self, module: &Resolved) -> Result<(), Unsupported> {
        pto_wsp_bytecode::supports(module)
    }

    fn compile(
        &self,
        plan: &LoweredPlan,
        _options: &CompileOptions,
    ) -> Result<Output, CompileError> {
        let bytes =
            pto_wsp_bytecode::encode(plan.resolved(), &pto_wsp_bytecode::EncodeOptions::default())
                .map_err(|e| CompileError::Emit {
                    backend: "bytecode".into(),
                    message: e.to_string(),
                })?;
        Ok(Output::Artefact(Artefact::Bytes(bytes)))
    }
}
