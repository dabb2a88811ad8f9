//! The `pto_wsp._pto_wsp` Python extension module (built by maturin from `python/`).
//!
//! Why: the people pto-wsp is for write models in Python; this crate gives them the text format,
//! compilation and runs with numpy arrays read and written in place, through the same code the
//! `pto-wsp` command line uses (the facade's front-end driver, `pto_wsp::driver`: parsing,
//! `//@ bind` and `--bind` rules, aliases, error rendering, the Chrome trace), so Python and the
//! CLI cannot disagree.
//!
//! Promises:
//! - [`Module::from_text`] / [`Module::to_text`] round-trip with `pto-wsp fmt` (the leading
//!   comment block, then the canonical print).
//! - A program ([`program::Program`]) runs with the caller's arrays — numpy arrays or any
//!   DLPack producer on the CPU — as its tensors, without a copy ([`arrays`]), checked first
//!   with the errors of `--input` (as `TypeError` / `ValueError` subclasses); the GIL is released
//!   while it runs and Ctrl-C cancels it; calls of one program never overlap. After the run
//!   (or a failure) the store no longer refers to the arrays. [`Module::expand`] lists the tasks
//!   as `pto-wsp expand` does; a program compiled with `trace=True` writes the CLI's Chrome
//!   trace of its last run (`pto_wsp::driver::trace::trace_json`, the one writer of it).
//! - A module of plans (Plan-Descriptor-Execute: plans and no workload or pipeline, the rule of
//!   `pto-wsp run`) compiles to a [`program::PlanProgram`], which binds the arrays the same way
//!   and runs the plans with `pto_wsp::plan::run_plans` and the kernels `pto-wsp run` uses.
//! - Errors raise the classes of `pto_wsp.errors` (`ValidationError` for parse and validation,
//!   `CompileError`, `RunError`, `ArgumentTypeError`, `ArgumentValueError`), all subclasses of
//!   `pto_wsp.Error`, with the rendered `file:line:column` text of the CLI.

mod arrays;
mod program;

use std::collections::HashMap;

use pto_wsp::driver::aliases::apply_aliases;
use pto_wsp::driver::{Loaded, bindings_for};
use pto_wsp::ir::{ExpandOptions, ParamKind};
use pto_wsp::kernels::KernelRegistry;
use pto_wsp::{Artefact, CompileOptions, Output, compile, compile_target, lower};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};

use program::{PlanProgram, Program};

// The exception classes are Python's (`python/pto_wsp/errors.py`), so that they live in the
// public module with `file` / `line` / `column` attributes; this crate raises them.
pyo3::import_exception!(pto_wsp.errors, ValidationError);
pyo3::import_exception!(pto_wsp.errors, CompileError);
pyo3::import_exception!(pto_wsp.errors, RunError);
pyo3::import_exception!(pto_wsp.errors, ArgumentTypeError);
pyo3::import_exception!(pto_wsp.errors, ArgumentValueError);

/// A pto-wsp module: the IR of a `.wsp` text.
#[pyclass(module = "pto_wsp._pto_wsp", frozen)]
pub struct Module {
    loaded: Loaded,
}

#[pymethods]
impl Module {
    /// Parses and validates `text` (named `path` in error messages, `<text>` when not given).
    #[staticmethod]
    #[pyo3(signature = (text, path = None))]
    fn from_text(text: &str, path: Option<&str>) -> PyResult<Module> {
        let name = path.unwrap_or("<text>");
        let loaded = pto_wsp::driver::load_source(name, text)
            .map_err(|e| ValidationError::new_err(e.rendered))?;
        Ok(Module { loaded })
    }

    /// Reads and parses the `.wsp` file at `path`.
    #[staticmethod]
    fn from_file(path: std::path::PathBuf) -> PyResult<Module> {
        let text = std::fs::read_to_string(&path).map_err(|e| {
            ValidationError::new_err(format!("cannot read `{}`: {e}", path.display()))
        })?;
        Module::from_text(&text, Some(&path.display().to_string()))
    }

    /// The canonical text: the source's leading comment block (header, `//@ bind` lines), then
    /// the printer's output — what `pto-wsp fmt` prints.
    fn to_text(&self) -> String {
        pto_wsp::driver::formatted(&self.loaded)
    }

    /// The name of the entry workload or pipeline, if the module has one.
    #[getter]
    fn entry(&self) -> Option<String> {
        self.loaded.module.entry_name().map(str::to_string)
    }

    /// The names of the declared tensors, in declaration order.
    #[getter]
    fn tensors(&self) -> Vec<String> {
        self.loaded
            .module
            .tensors
            .iter()
            .map(|t| t.name.name.clone())
            .collect()
    }

    /// Compiles the module for `target` into a runnable [`Program`]. `bind` maps symbol (or
    /// integer tensor) names to values, as `pto-wsp run --bind NAME=VALUE` does, on top of the
    /// text's `//@ bind` lines.
    /// `trace=True` records each task's start and end, for [`Program::write_trace`].
    ///
    /// A module of plans (`space` / `tiers` / `plan`, and no workload or pipeline) compiles to a
    /// [`PlanProgram`] instead, which runs its plans as `pto-wsp run` does; `threads` is then its
    /// number of dispatch threads (0: one per core), and `device_gen`, `debug_checks` and
    /// `trace`, which belong to the task-graph runtime, are refused.
    ///
    /// `coverage=False` skips the check that every output tensor was fully written.
    #[pyo3(signature = (target = "cpu_sim", threads = 0, device_gen = false, debug_checks = false, bind = None, trace = false, coverage = true))]
    #[allow(clippy::too_many_arguments)] // Python keyword arguments, one per option
    fn compile<'py>(
        &self,
        py: Python<'py>,
        target: &str,
        threads: i64,
        device_gen: bool,
        debug_checks: bool,
        bind: Option<&Bound<'py, PyDict>>,
        trace: bool,
        coverage: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let threads = usize::try_from(threads)
            .ok()
            .filter(|&t| t <= pto_wsp::cpu::MAX_THREADS)
            .ok_or_else(|| {
                ArgumentValueError::new_err(format!(
                    "threads={threads}: the number of worker threads is 0 (one per core) to {}",
                    pto_wsp::cpu::MAX_THREADS
                ))
            })?;
        let specs = bind_specs(bind)?;
        let bindings =
            bindings_for(&self.loaded, &specs).map_err(|e| CompileError::new_err(e.rendered))?;
        if self.is_plans() {
            let refused = [
                (device_gen, "device_gen"),
                (debug_checks, "debug_checks"),
                (trace, "trace"),
                (target != "cpu_sim", "target"),
            ];
            if let Some((_, option)) = refused.iter().find(|(on, _)| *on) {
                return Err(CompileError::new_err(format!(
                    "{}: `{option}` applies to workloads; a module of plans runs its plans on \
                     the CPU simulation (regions in flight are always checked)",
                    self.loaded.source.name
                )));
            }
            let mut kernels = KernelRegistry::with_builtins();
            pto_wsp::kernels::lang::register_bodies(&self.loaded.module, &mut kernels);
            apply_aliases(&self.loaded, &mut kernels)
                .map_err(|e| CompileError::new_err(e.rendered))?;
            let program = PlanProgram::new(self.loaded.clone(), bindings, kernels, threads);
            return Ok(Bound::new(py, program)?.into_any());
        }
        // The kernels as `pto-wsp run` has them: the built-ins, the module's kernels written in
        // tile instructions, and the text's `//@ alias NAME=BUILTIN` lines.
        let mut kernels = KernelRegistry::with_builtins();
        pto_wsp::kernels::lang::register_bodies(&self.loaded.module, &mut kernels);
        apply_aliases(&self.loaded, &mut kernels).map_err(|e| CompileError::new_err(e.rendered))?;
        let options = CompileOptions {
            target: target.to_string(),
            threads,
            device_gen,
            debug_checks,
            kernels,
            profiling: trace,
            // A run modelled on a machine (`trace cycles device(NAME)`) traces the model's
            // control threads too.
            record_timeline: trace,
            coverage,
            ..CompileOptions::default()
        };
        let loaded = self.loaded.clone();
        let program = py
            .detach(|| {
                lower(&loaded.module)
                    .and_then(|plan| compile(plan.with_source(loaded.source.clone()), options))
            })
            .map_err(|e| CompileError::new_err(compile_error(&loaded, &e)))?;
        let roles = pto_wsp::roles(program.plan().resolved());
        let program = Program::new(program, loaded, bindings, roles);
        Ok(Bound::new(py, program)?.into_any())
    }

    /// Compiles the module for an emitting `target` (see [`backends`]: `pto_isa`,
    /// `ascend_a2a3sim`, `ascend_a2a3`, `bytecode`) through the back-end registry, baking in the
    /// values of `bind` on top of the text's `//@ bind` lines; returns the artefact: `bytes`
    /// for one file, or a dict of relative path to `bytes` for a tree of files. Refusals raise
    /// `CompileError` at their `file:line:column`.
    #[pyo3(signature = (target, bind = None))]
    fn emit<'py>(
        &self,
        py: Python<'py>,
        target: &str,
        bind: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let specs = bind_specs(bind)?;
        let bindings =
            bindings_for(&self.loaded, &specs).map_err(|e| CompileError::new_err(e.rendered))?;
        let options = CompileOptions {
            target: target.to_string(),
            bindings,
            ..CompileOptions::default()
        };
        let loaded = &self.loaded;
        let out = py
            .detach(|| {
                lower(&loaded.module).and_then(|plan| {
                    compile_target(&plan.with_source(loaded.source.clone()), &options)
                })
            })
            .map_err(|e| CompileError::new_err(render_compile_error(loaded, &e)))?;
        match out {
            Output::Artefact(Artefact::Bytes(b)) => Ok(PyBytes::new(py, &b).into_any()),
            Output::Artefact(Artefact::Tree(files)) => {
                let d = PyDict::new(py);
                for (path, bytes) in files {
                    d.set_item(path.display().to_string(), PyBytes::new(py, &bytes))?;
                }
                Ok(d.into_any())
            }
            Output::Program(_) => Err(CompileError::new_err(format!(
                "target `{target}` compiles to a runnable program: use `compile`"
            ))),
        }
    }

    /// The names of the plans (`plan NAME over ...`), in the order they run.
    #[getter]
    fn plans(&self) -> Vec<String> {
        self.loaded
            .module
            .plans
            .iter()
            .map(|p| p.name.name.clone())
            .collect()
    }

    /// The tasks the module generates under `bind` (as `compile` takes it), in program order,
    /// as `pto-wsp expand` lists them: one dict per task with `kernel` (the one that runs),
    /// `declared` (the one the task statement named), `pool`, `executor` (`None` under
    /// `work_steal`), `stream`, `priority`, `cost`, `params` (scalar name to value) and
    /// `regions` (dicts of `tensor`, `access`, `start`, `size`). `limit` stops early.
    #[pyo3(signature = (bind = None, limit = None))]
    fn expand<'py>(
        &self,
        py: Python<'py>,
        bind: Option<&Bound<'py, PyDict>>,
        limit: Option<usize>,
    ) -> PyResult<Bound<'py, PyList>> {
        let specs = bind_specs(bind)?;
        let bindings =
            bindings_for(&self.loaded, &specs).map_err(|e| CompileError::new_err(e.rendered))?;
        let options = ExpandOptions {
            limit,
            ..ExpandOptions::default()
        };
        let loaded = &self.loaded;
        let expansion = py
            .detach(|| {
                let plan = pto_wsp::driver::lower(loaded)?;
                pto_wsp::driver::expand(&plan, &bindings, &options)
            })
            .map_err(|e| RunError::new_err(e.rendered))?;
        let module = &self.loaded.module;
        let kernel_name = |i: u32| {
            module
                .kernels
                .get(i as usize)
                .map_or_else(|| format!("#{i}"), |k| k.name.name.clone())
        };
        let list = PyList::empty(py);
        for t in &expansion.tasks {
            let d = PyDict::new(py);
            d.set_item("kernel", kernel_name(t.kernel))?;
            d.set_item("declared", kernel_name(t.declared))?;
            d.set_item("pool", t.pool.to_string())?;
            d.set_item("executor", t.target)?;
            d.set_item("stream", t.stream)?;
            d.set_item("priority", t.priority)?;
            d.set_item("cost", t.cost)?;
            let params = PyDict::new(py);
            // (name, is float) of each scalar parameter; a float one's value is its f64 bits.
            let scalars: Vec<(String, bool)> = module
                .kernels
                .get(t.declared as usize)
                .map(|k| {
                    k.params
                        .iter()
                        .filter_map(|p| match p.kind {
                            ParamKind::Scalar(ty) => Some((p.name.to_string(), ty.is_float())),
                            _ => None,
                        })
                        .collect()
                })
                .unwrap_or_default();
            for (i, v) in t.params.iter().enumerate() {
                let (name, float) = scalars
                    .get(i)
                    .cloned()
                    .unwrap_or_else(|| (format!("#{i}"), false));
                match *v {
                    pto_wsp::ir::Value::Bool(b) => params.set_item(name, b)?,
                    pto_wsp::ir::Value::I64(x) if float => {
                        params.set_item(name, f64::from_bits(x as u64))?
                    }
                    pto_wsp::ir::Value::U64(x) if float => {
                        params.set_item(name, f64::from_bits(x))?
                    }
                    pto_wsp::ir::Value::I64(x) => params.set_item(name, x)?,
                    pto_wsp::ir::Value::U64(x) => params.set_item(name, x)?,
                }
            }
            d.set_item("params", params)?;
            let regions = PyList::empty(py);
            for r in &t.regions {
                let rd = PyDict::new(py);
                let tensor = module
                    .tensors
                    .get(r.tensor as usize)
                    .map_or_else(|| format!("#{}", r.tensor), |x| x.name.name.clone());
                rd.set_item("tensor", tensor)?;
                rd.set_item("access", r.access.to_string())?;
                rd.set_item("start", r.start.clone())?;
                rd.set_item("size", r.size.clone())?;
                regions.append(rd)?;
            }
            d.set_item("regions", regions)?;
            list.append(d)?;
        }
        Ok(list)
    }

    fn __repr__(&self) -> String {
        format!(
            "<pto_wsp.Module {} ({})>",
            self.loaded.source.name,
            pto_wsp::driver::check_summary(&self.loaded.source.name, &self.loaded.module)
        )
    }
}

impl Module {
    /// Whether the module is run as plans: it has plans and no workload or pipeline (the rule
    /// of `pto-wsp run`).
    fn is_plans(&self) -> bool {
        let m = &self.loaded.module;
        !m.plans.is_empty() && m.workloads.is_empty() && m.pipelines.is_empty()
    }
}

/// A compile error rendered at its place; a kernel with no implementation at its declaration,
/// with what to write to give it one.
fn compile_error(loaded: &Loaded, e: &pto_wsp::CompileError) -> String {
    if let pto_wsp::CompileError::UnknownKernel { name, at, known } = e {
        let loc = pto_wsp::ir::Loc::new(*at, *at + name.len());
        return loaded.source.render(&NoImplementation {
            name: name.clone(),
            known: known.clone(),
            loc,
        });
    }
    pto_wsp::driver::compile_error(loaded, e).rendered
}

/// A kernel declared without a body, alias or built-in of its name.
struct NoImplementation {
    name: String,
    known: String,
    loc: pto_wsp::ir::Loc,
}

impl std::fmt::Display for NoImplementation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "kernel `{}` has no implementation: give it a body in tile instructions, or map it \
             to a built-in taking the same parameters with a `//@ alias {}=BUILTIN` line",
            self.name, self.name
        )
    }
}

impl pto_wsp::ir::Diagnostic for NoImplementation {
    fn loc(&self) -> pto_wsp::ir::Loc {
        self.loc
    }
    fn notes(&self) -> Vec<String> {
        vec![format!("built-ins: {}", self.known)]
    }
}

/// The `--bind NAME=VALUE` specs of a `bind` dict.
fn bind_specs(bind: Option<&Bound<'_, PyDict>>) -> PyResult<Vec<String>> {
    let mut specs = Vec::new();
    if let Some(bind) = bind {
        for (k, v) in bind.iter() {
            let k: String = k.extract()?;
            specs.push(format!("{k}={}", bind_text(&v)?));
        }
    }
    Ok(specs)
}

/// The text of one `bind` value as `--bind` takes it: a Python int, float, bool, string, or a
/// list of ints (an integer tensor's contents).
fn bind_text(v: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(s) = v.cast::<PyString>() {
        return Ok(s.to_string());
    }
    if let Ok(b) = v.extract::<bool>() {
        return Ok(b.to_string());
    }
    if let Ok(i) = v.extract::<i64>() {
        return Ok(i.to_string());
    }
    if let Ok(f) = v.extract::<f64>() {
        return Ok(f.to_string());
    }
    if let Ok(list) = v.extract::<Vec<i64>>() {
        let items: Vec<String> = list.iter().map(i64::to_string).collect();
        return Ok(items.join(","));
    }
    Err(ArgumentTypeError::new_err(format!(
        "a bind value must be an int, float, bool, string or list of ints, not {}",
        v.get_type().name()?
    )))
}

/// The tile instruction table (`pto_wsp::ir::tile_isa`), for the Python tile-kernel builder:
/// one dict per instruction, in table order, with `mnemonic`, `operands` (the operand kinds in
/// order: `dst`, `src`, `global`, `float`, `cmp_mode`, `tri_mode`, `pad_mode`, `int`,
/// `opt_int`), `shape` (the shape rule's
/// name) and `doc` (the table's documentation of it).
#[pyfunction]
fn tile_instructions(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    use pto_wsp::ir::tile_isa::{Operand, TileOp};
    let list = PyList::empty(py);
    for &op in TileOp::ALL {
        let d = PyDict::new(py);
        d.set_item("mnemonic", op.mnemonic())?;
        let operands: Vec<&str> = op
            .operands()
            .iter()
            .map(|o| match o {
                Operand::Dst => "dst",
                Operand::Src => "src",
                Operand::Global => "global",
                Operand::Float => "float",
                Operand::CmpMode => "cmp_mode",
                Operand::TriMode => "tri_mode",
                Operand::PadMode => "pad_mode",
                Operand::Int => "int",
                Operand::OptInt => "opt_int",
            })
            .collect();
        d.set_item("operands", operands)?;
        d.set_item("shape", format!("{:?}", op.shape_rule()))?;
        d.set_item("doc", op.doc().trim())?;
        list.append(d)?;
    }
    Ok(list)
}

/// A compile error rendered against the module's source (`file:line:column` when it has a
/// place there).
fn render_compile_error(loaded: &Loaded, e: &pto_wsp::CompileError) -> String {
    if pto_wsp::ir::Diagnostic::loc(e).is_known() {
        loaded.source.render(e)
    } else {
        pto_wsp::driver::compile_error(loaded, e).rendered
    }
}

/// A registered back end as a dict: `name`, `targets`, `capabilities`.
fn backend_dict<'py>(py: Python<'py>, b: &dyn pto_wsp::Backend) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", b.name())?;
    d.set_item("targets", b.targets())?;
    let caps: Vec<&str> = b.capabilities().iter().map(|c| c.name()).collect();
    d.set_item("capabilities", caps)?;
    Ok(d)
}

/// Every registered back end (the facade's registry, as `pto-wsp targets` lists it), in
/// registration order.
#[pyfunction]
fn backends(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    pto_wsp::backends()
        .iter()
        .map(|b| backend_dict(py, b.as_ref()))
        .collect()
}

/// The back end registered under `name` (its name or one of its targets), or `None`.
#[pyfunction]
fn get_backend<'py>(py: Python<'py>, name: &str) -> PyResult<Option<Bound<'py, PyDict>>> {
    pto_wsp::get_backend(name)
        .map(|b| backend_dict(py, b.as_ref()))
        .transpose()
}

/// Version and features of the extension.
fn info() -> HashMap<&'static str, &'static str> {
    HashMap::from([("version", env!("CARGO_PKG_VERSION"))])
}

/// The extension module.
#[pymodule]
fn _pto_wsp(m: &Bound<'_, pyo3::types::PyModule>) -> PyResult<()> {
    m.add_class::<Module>()?;
    m.add_class::<Program>()?;
    m.add_class::<PlanProgram>()?;
    m.add_function(pyo3::wrap_pyfunction!(tile_instructions, m)?)?;
    m.add_function(wrap_pyfunction!(backends, m)?)?;
    m.add_function(wrap_pyfunction!(get_backend, m)?)?;
    m.add("__version__", info()["version"])?;
    // NumPy's C API is loaded here, at import, not by the first call that looks at an array:
    // a Ctrl-C landing while that call imported it would surface as a panic, not as
    // `KeyboardInterrupt`.
    let _ = m
        .py()
        .None()
        .into_bound(m.py())
        .cast::<numpy::PyUntypedArray>()
        .is_ok();
    Ok(())
}
