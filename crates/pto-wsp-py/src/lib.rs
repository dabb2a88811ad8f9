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
//! - [`Program::execute`] binds each numpy array to its tensor without copying (the store runs on
//!   the array's own memory, see `TensorStore::attach_external`), checked first with the errors
//!   of `--input` (element type, shape); the GIL is released while the program runs; after the
//!   run (or a failure) the store no longer refers to the arrays.
//! - [`Program::execute_async`] starts the same run on the program's orchestration thread and
//!   returns at once (the arrays are held until [`Program::synchronize`], which waits with the
//!   GIL released and raises the run's error); [`Module::expand`] lists the tasks as
//!   `pto-wsp expand` does; a program compiled with `trace=True` writes the CLI's Chrome trace
//!   of its last run (`pto_wsp::driver::trace::trace_json`, the one writer of it).
//! - A module of plans (Plan-Descriptor-Execute: plans and no workload or pipeline, the rule of
//!   `pto-wsp run`) compiles to a [`PlanProgram`], whose `execute` binds the arrays the same way
//!   and runs the plans with `pto_wsp::plan::run_plans` and the kernels `pto-wsp run` uses.
//! - Errors raise `pto_wsp.ValidationError` (parse and validation), `CompileError` or `RunError`,
//!   all subclasses of `pto_wsp.PtoWspError`, with the rendered `file:line:column` text of the CLI.

// Reading a numpy array's data pointer and flags, and handing that memory to the tensor store,
// are the two `unsafe` operations here (each with its SAFETY note).
#![allow(unsafe_code)]

use std::collections::HashMap;
use std::ptr::NonNull;

use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods, npyffi};
use pto_wsp::driver::aliases::apply_aliases;
use pto_wsp::driver::{Loaded, bindings_for};
use pto_wsp::ir::{Bindings, DType, ExpandOptions, ParamKind};
use pto_wsp::kernels::npy::NpyHeader;
use pto_wsp::kernels::{KernelRegistry, TensorStore};
use pto_wsp::plan::{PlanOptions, PlanStats, run_plans};
use pto_wsp::{Artefact, CompileOptions, Output, compile, compile_target, lower};
use pyo3::exceptions::{PyException, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};

pyo3::create_exception!(
    _pto_wsp,
    PtoWspError,
    PyException,
    "Base class of every pto-wsp error."
);
pyo3::create_exception!(
    _pto_wsp,
    ValidationError,
    PtoWspError,
    "The module text does not parse or is not valid."
);
pyo3::create_exception!(
    _pto_wsp,
    CompileError,
    PtoWspError,
    "The module cannot be compiled for the target (or its bindings are wrong)."
);
pyo3::create_exception!(
    _pto_wsp,
    RunError,
    PtoWspError,
    "A run failed, or the arrays given to it do not fit its tensors."
);

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
    #[pyo3(signature = (target = "cpu_sim", threads = 0, device_gen = false, debug_checks = false, bind = None, trace = false))]
    #[allow(clippy::too_many_arguments)] // Python keyword arguments, one per option
    fn compile<'py>(
        &self,
        py: Python<'py>,
        target: &str,
        threads: usize,
        device_gen: bool,
        debug_checks: bool,
        bind: Option<&Bound<'py, PyDict>>,
        trace: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
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
            let program = PlanProgram::new(self.loaded.clone(), bindings, threads)?;
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
            ..CompileOptions::default()
        };
        let loaded = self.loaded.clone();
        let program = py
            .detach(|| lower(&loaded.module).and_then(|plan| compile(plan, options)))
            .map_err(|e| {
                CompileError::new_err(pto_wsp::driver::compile_error(&loaded, &e).rendered)
            })?;
        let program = Program {
            program,
            name: loaded.source.name.clone(),
            loaded,
            bindings,
            running: None,
            last_bindings: None,
        };
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
            .detach(|| pto_wsp::driver::expand_loaded(loaded, &bindings, &options))
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
    Err(PyTypeError::new_err(format!(
        "a bind value must be an int, float, bool, string or list of ints, not {}",
        v.get_type().name()?
    )))
}

/// A compiled program: runs on the CPU simulation with numpy arrays as its tensors.
#[pyclass(module = "pto_wsp._pto_wsp")]
pub struct Program {
    program: pto_wsp::Program,
    /// The module it was compiled from (the trace names tasks from it).
    loaded: Loaded,
    bindings: Bindings,
    name: String,
    /// A run started by `execute_async`: its bindings, the arrays it runs on (kept alive until
    /// `synchronize`) and where each was attached.
    running: Option<Running>,
    /// The bindings of the last completed run (for its trace).
    last_bindings: Option<Bindings>,
}

/// A run in progress.
struct Running {
    bindings: Bindings,
    _arrays: Vec<Py<PyUntypedArray>>,
    attached: Vec<Attached>,
}

/// One array bound to a tensor for a run.
struct Attached {
    tensor: u32,
    /// The array's data address (only compared, never dereferenced here).
    addr: usize,
    len: usize,
}

#[pymethods]
impl Program {
    /// Runs the program with the given numpy arrays as its tensors, read and written in place
    /// (no copy). Each array must be C-contiguous, writeable, aligned, in this machine's byte
    /// order, and of the tensor's element type and shape (`f16` as `numpy.float16`, `bf16` as
    /// `ml_dtypes.bfloat16` or `numpy.uint16` bits). Tensors not given start zeroed. Returns the run's statistics.
    #[pyo3(signature = (**arrays))]
    fn execute<'py>(
        &mut self,
        py: Python<'py>,
        arrays: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.execute_async(py, arrays)?;
        self.synchronize(py)
    }

    /// Starts the run `execute` does and returns at once; the arrays must not be touched until
    /// [`Program::synchronize`] (which waits for the run). Waits first for a run in progress.
    #[pyo3(signature = (**arrays))]
    fn execute_async<'py>(
        &mut self,
        py: Python<'py>,
        arrays: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<()> {
        if self.running.is_some() {
            // The earlier run's error (if any) was the caller's to collect with `synchronize`.
            let _ = self.synchronize(py);
        }
        let given = given_arrays(arrays)?;
        let mut bindings = self.bindings.clone();
        bind_integer_arrays(&self.program.plan().module, &given, &mut bindings);
        let mut attached = Vec::with_capacity(given.len());
        let started = self
            .attach(&given, &bindings, &mut attached)
            .and_then(|()| {
                self.program
                    .execute_async(&bindings)
                    .map_err(|e| RunError::new_err(format!("{}: {e}", self.name)))
            });
        if let Err(e) = started {
            self.detach(&bindings, &attached)?;
            return Err(e);
        }
        self.running = Some(Running {
            bindings,
            _arrays: given.into_iter().map(|(_, a)| a.unbind()).collect(),
            attached,
        });
        Ok(())
    }

    /// Waits (with the GIL released) for the run `execute_async` started, gives the arrays
    /// back, and returns its statistics or raises its error.
    fn synchronize<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let running = self.running.take().ok_or_else(|| {
            RunError::new_err(format!(
                "{}: no run in progress (call execute_async first)",
                self.name
            ))
        })?;
        let program = &mut self.program;
        let r = py
            .detach(|| program.synchronize())
            .map(|_| ())
            .map_err(|e| RunError::new_err(format!("{}: {e}", self.name)));
        let detached = self.detach(&running.bindings, &running.attached);
        r?;
        detached?;
        self.last_bindings = Some(running.bindings);
        self.stats(py)
    }

    /// Whether no run is in progress (or the one in progress has finished).
    fn is_complete(&self) -> bool {
        self.program.is_complete()
    }

    /// Writes the Chrome trace (chrome://tracing, Perfetto) of the last run to `path`, as
    /// `pto-wsp run --trace` does: one event per task, named by its kernel, on its worker's
    /// track. Needs `compile(..., trace=True)`.
    fn write_trace(&self, path: std::path::PathBuf) -> PyResult<()> {
        let stats = self.program.stats();
        let (Some(stats), Some(bindings)) = (stats, &self.last_bindings) else {
            return Err(RunError::new_err(format!(
                "{}: no completed run to trace (execute first)",
                self.name
            )));
        };
        if stats.spans.is_empty() && stats.tasks > 0 {
            return Err(RunError::new_err(format!(
                "{}: the run recorded no task times: compile with `trace=True`",
                self.name
            )));
        }
        let module = &self.loaded.module;
        let pipeline = module
            .entry_name()
            .and_then(|e| module.pipeline(e))
            .is_some();
        let json = pto_wsp::driver::trace::trace_json(&self.loaded, bindings, stats, pipeline);
        std::fs::write(&path, json).map_err(|e| {
            RunError::new_err(format!(
                "cannot write the trace to `{}`: {e}",
                path.display()
            ))
        })
    }

    /// Statistics of the last completed run (`None` before the first).
    #[getter]
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        if let Some(s) = self.program.program_stats() {
            d.set_item("num_tasks", s.num_tasks)?;
            d.set_item("num_streams", s.num_streams)?;
            d.set_item("num_executors", s.num_executors)?;
            d.set_item("compile_time_ms", s.compile_time_ms)?;
            d.set_item("execute_time_ms", s.execute_time_ms)?;
            d.set_item("barriers", s.run.barriers)?;
            d.set_item("edges", s.run.edges)?;
            d.set_item("per_worker", s.run.per_worker.clone())?;
            d.set_item("run_ns", s.run.run_ns)?;
            d.set_item("build_ns", s.run.build_ns)?;
        }
        Ok(d)
    }

    /// Number of worker threads.
    #[getter]
    fn threads(&self) -> usize {
        self.program.threads()
    }
}

impl Drop for Program {
    /// A run still in progress is waited for before its arrays are let go.
    fn drop(&mut self) {
        if let Some(r) = self.running.take() {
            let _ = self.program.synchronize();
            let _ = self.detach(&r.bindings, &r.attached);
        }
    }
}

impl Program {
    /// Checks every array against its tensor (the `--input` checks) and makes it the tensor's
    /// memory, recording each in `attached` as it goes (so a failure part-way can be undone).
    fn attach(
        &mut self,
        given: &[(String, Bound<'_, PyUntypedArray>)],
        bindings: &Bindings,
        attached: &mut Vec<Attached>,
    ) -> PyResult<()> {
        let mut guard = self
            .program
            .tensors(bindings)
            .map_err(|e| RunError::new_err(format!("{}: {e}", self.name)))?;
        let store = guard.as_mut().expect("tensors() allocates");
        attach_arrays(store, given, attached)
    }

    /// Gives every attached tensor its own memory back.
    fn detach(&mut self, bindings: &Bindings, attached: &[Attached]) -> PyResult<()> {
        if attached.is_empty() {
            return Ok(());
        }
        let mut guard = self
            .program
            .tensors(bindings)
            .map_err(|e| RunError::new_err(format!("{}: {e}", self.name)))?;
        let store = guard.as_mut().expect("tensors() allocates");
        detach_arrays(store, attached)
    }
}

/// The arrays given to a run, by tensor name (each checked to be a numpy array).
fn given_arrays<'py>(
    arrays: Option<&Bound<'py, PyDict>>,
) -> PyResult<Vec<(String, Bound<'py, PyUntypedArray>)>> {
    let mut given = Vec::new();
    if let Some(arrays) = arrays {
        for (k, v) in arrays.iter() {
            let name: String = k.extract()?;
            let array = v.cast_into::<PyUntypedArray>().map_err(|e| {
                RunError::new_err(format!(
                    "in `execute({name}=...)`: not a numpy array ({})",
                    e.into_inner()
                        .get_type()
                        .name()
                        .map_or_else(|_| "unknown type".to_string(), |n| n.to_string())
                ))
            })?;
            given.push((name, array));
        }
    }
    Ok(given)
}

/// As with `--input`, binds the values of each given integer array too (control flow and plan
/// generators may read them): a copy of the (small) integer arrays only.
fn bind_integer_arrays(
    module: &pto_wsp::ir::Module,
    given: &[(String, Bound<'_, PyUntypedArray>)],
    bindings: &mut Bindings,
) {
    for (name, array) in given {
        let integer = module
            .tensors
            .iter()
            .any(|t| t.name.name == *name && t.dtype.is_integer());
        if integer && array.dtype().is_native_byteorder().unwrap_or(true) {
            let values: PyResult<Vec<i64>> = array
                .call_method1("astype", ("int64",))
                .and_then(|a| a.call_method0("ravel"))
                .and_then(|a| a.call_method0("tolist"))
                .and_then(|l| l.extract());
            if let Ok(values) = values {
                bindings.arrays.insert(name.clone(), values);
            }
        }
    }
}

/// Checks every array against its tensor of `store` (the `--input` checks) and makes it the
/// tensor's memory, recording each in `attached` as it goes (so a failure part-way can be
/// undone with [`detach_arrays`]).
fn attach_arrays(
    store: &mut TensorStore,
    given: &[(String, Bound<'_, PyUntypedArray>)],
    attached: &mut Vec<Attached>,
) -> PyResult<()> {
    for (name, array) in given {
        let err = |m: String| RunError::new_err(format!("in `execute({name}=...)`: {m}"));
        let dtype = array.dtype();
        let size = dtype.itemsize();
        // `ml_dtypes.bfloat16` (numpy has no bf16) is a bf16 tensor's 16-bit patterns,
        // exactly what `<u2` bits are; it binds only to a `bf16` tensor.
        let bfloat16 = size == 2 && dtype.getattr("name")?.extract::<String>()? == "bfloat16";
        let (descr, kind) = if bfloat16 {
            if let Some(t) = store.index_of(name)
                && store.info(t).dtype != DType::Bf16
            {
                return Err(err(format!(
                    "the array holds ml_dtypes.bfloat16, but tensor `{name}` is {}",
                    store.info(t).dtype
                )));
            }
            ("<u2".to_string(), 'u')
        } else {
            (
                dtype.getattr("str")?.extract::<String>()?,
                char::from(dtype.kind()),
            )
        };
        let shape: Vec<u64> = array.shape().iter().map(|&d| d as u64).collect();
        let header = NpyHeader {
            descr: descr.clone(),
            kind,
            size,
            shape,
            swapped: false,
            data_offset: 0,
            data_len: array.len() * size,
        };
        let tensor = store
            .check_npy_header(name, &header)
            .map_err(|e| err(e.to_string()))?;
        if size > 1 && !dtype.is_native_byteorder().unwrap_or(true) {
            return Err(err(format!(
                "the array's byte order (`{descr}`) is not this machine's; pass \
                 `array.astype(array.dtype.newbyteorder('='))`"
            )));
        }
        let raw = array.as_array_ptr();
        // SAFETY: `raw` is the live array object `array` holds a reference to.
        let (flags, data) = unsafe { ((*raw).fields.flags, (*raw).fields.data) };
        if flags & npyffi::NPY_ARRAY_C_CONTIGUOUS == 0 {
            return Err(err(
                "the array is not C-contiguous; pass `numpy.ascontiguousarray(array)`".into(),
            ));
        }
        if flags & npyffi::NPY_ARRAY_WRITEABLE == 0 {
            return Err(err("the array is read-only".into()));
        }
        let len = header.data_len;
        let ptr = NonNull::new(data.cast::<u8>()).unwrap_or(NonNull::dangling());
        let overlaps = attached.iter().any(|a| {
            let (s, e) = (a.addr, a.addr + a.len);
            let (s2, e2) = (ptr.as_ptr() as usize, ptr.as_ptr() as usize + len);
            len > 0 && a.len > 0 && s < e2 && s2 < e
        });
        if overlaps {
            return Err(err(
                "the array shares memory with another array of this run".into(),
            ));
        }
        // SAFETY: `ptr` is the data of a C-contiguous, writeable array of `len` bytes that
        // `given` keeps alive until `detach` below returns it (execute holds `given` across
        // the run, and detaches whether or not the run succeeds). Its element type and
        // shape were checked against the tensor just above.
        unsafe { store.attach_external(tensor, ptr, len) }.map_err(|e| err(e.to_string()))?;
        attached.push(Attached {
            tensor,
            addr: ptr.as_ptr() as usize,
            len,
        });
    }
    Ok(())
}

/// Gives every tensor in `attached` its own memory back.
fn detach_arrays(store: &mut TensorStore, attached: &[Attached]) -> PyResult<()> {
    for a in attached {
        store
            .detach_external(a.tensor)
            .map_err(|e| RunError::new_err(e.to_string()))?;
    }
    Ok(())
}

/// A compiled module of plans (Plan-Descriptor-Execute, `docs/PDE.md`): runs its plans in
/// declaration order on the CPU simulation with numpy arrays as its tensors.
#[pyclass(module = "pto_wsp._pto_wsp")]
pub struct PlanProgram {
    loaded: Loaded,
    bindings: Bindings,
    /// The built-ins, the module's kernels with bodies and its `//@ alias` lines.
    kernels: KernelRegistry,
    dispatch_threads: usize,
    /// The statistics of the last completed run.
    last: Vec<PlanStats>,
}

impl PlanProgram {
    fn new(loaded: Loaded, bindings: Bindings, threads: usize) -> PyResult<PlanProgram> {
        let mut kernels = KernelRegistry::with_builtins();
        pto_wsp::kernels::lang::register_bodies(&loaded.module, &mut kernels);
        apply_aliases(&loaded, &mut kernels).map_err(|e| CompileError::new_err(e.rendered))?;
        let dispatch_threads = if threads == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            threads
        };
        Ok(PlanProgram {
            loaded,
            bindings,
            kernels,
            dispatch_threads,
            last: Vec::new(),
        })
    }
}

#[pymethods]
impl PlanProgram {
    /// Runs every plan, in declaration order, with the given numpy arrays as its tensors, read
    /// and written in place (no copy; the checks of [`Program::execute`]). Integer arrays are
    /// also bound, so a generator's `load` reads them. Tensors not given start zeroed. The GIL
    /// is released while the plans run. Returns the run's statistics ([`PlanProgram::stats`]);
    /// a plan that cannot run raises `RunError` at its `file:line:column`.
    #[pyo3(signature = (**arrays))]
    fn execute<'py>(
        &mut self,
        py: Python<'py>,
        arrays: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let name = &self.loaded.source.name;
        let given = given_arrays(arrays)?;
        let mut bindings = self.bindings.clone();
        let module = &self.loaded.module;
        bind_integer_arrays(module, &given, &mut bindings);
        let mut store = TensorStore::new(module, &bindings)
            .map_err(|e| RunError::new_err(format!("{name}: {e}")))?;
        let mut attached = Vec::with_capacity(given.len());
        let r = attach_arrays(&mut store, &given, &mut attached).and_then(|()| {
            let opts = PlanOptions {
                dispatch_threads: self.dispatch_threads,
                ..PlanOptions::default()
            };
            let (kernels, bindings) = (&self.kernels, &bindings);
            let store = &mut store;
            py.detach(move || run_plans(module, bindings, store, kernels, opts))
                .map_err(|e| {
                    RunError::new_err(
                        pto_wsp::driver::Error::diagnostic(&self.loaded.source, &e).rendered,
                    )
                })
        });
        // The store lets go of the arrays whether or not the plans ran.
        let detached = detach_arrays(&mut store, &attached);
        self.last = r?;
        detached?;
        self.stats(py)
    }

    /// Statistics of the last completed run (empty before the first): `descriptor_bytes` (the
    /// size of one work descriptor) and `plans`, one dict per plan in run order with `plan`,
    /// `descriptors`, `per_thread` (descriptors run by each dispatch thread), `workspace_used`
    /// (elements) and `prefetches`.
    #[getter]
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        if self.last.is_empty() {
            return Ok(d);
        }
        d.set_item("descriptor_bytes", pto_wsp::pde::Descriptor::BYTES)?;
        let plans = PyList::empty(py);
        for s in &self.last {
            let p = PyDict::new(py);
            p.set_item("plan", &s.plan)?;
            p.set_item("descriptors", s.launch.descriptors)?;
            p.set_item("per_thread", s.launch.per_thread.clone())?;
            p.set_item("workspace_used", s.launch.workspace_used)?;
            p.set_item("prefetches", s.launch.prefetches)?;
            plans.append(p)?;
        }
        d.set_item("plans", plans)?;
        Ok(d)
    }

    /// Number of dispatch threads.
    #[getter]
    fn threads(&self) -> usize {
        self.dispatch_threads
    }

    fn __repr__(&self) -> String {
        format!(
            "<pto_wsp.PlanProgram {} ({} plan(s), {} dispatch thread(s))>",
            self.loaded.source.name,
            self.loaded.module.plans.len(),
            self.dispatch_threads
        )
    }
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
    let py = m.py();
    m.add_class::<Module>()?;
    m.add_class::<Program>()?;
    m.add_class::<PlanProgram>()?;
    m.add_function(wrap_pyfunction!(backends, m)?)?;
    m.add_function(wrap_pyfunction!(get_backend, m)?)?;
    m.add("PtoWspError", py.get_type::<PtoWspError>())?;
    m.add("ValidationError", py.get_type::<ValidationError>())?;
    m.add("CompileError", py.get_type::<CompileError>())?;
    m.add("RunError", py.get_type::<RunError>())?;
    m.add("__version__", info()["version"])?;
    Ok(())
}
