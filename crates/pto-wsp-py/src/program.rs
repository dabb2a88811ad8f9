//! Compiled programs as Python sees them: runs on the caller's arrays, one at a time, that
//! Ctrl-C cancels.
//!
//! Why: Python calls a program like a function, from any thread, and expects Ctrl-C to stop a
//! long run; the runtime runs on its own threads with the GIL released.
//!
//! Promises:
//! - [`Program`] and [`PlanProgram`] are `frozen` and hold their state in a mutex: a call while
//!   another thread's call holds it raises `RuntimeError` naming the program at once (the Python
//!   `Program` serialises calls before they get here); a second `execute_async` while a run is
//!   in progress raises at once.
//! - A run waits in slices of [`SLICE`] with the GIL released, checking for signals between
//!   slices: on `KeyboardInterrupt` (or any exception a signal handler raises) the run is
//!   cancelled, every task in flight finishes, the arrays are given back, and the exception is
//!   raised; the program can run again.
//! - After every run (completed, failed or cancelled) the store no longer refers to the
//!   caller's arrays; a run's statistics carry `coverage`, the output tensors it left partly
//!   unwritten.

use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::Duration;

use pto_wsp::driver::Loaded;
use pto_wsp::ir::Bindings;
use pto_wsp::kernels::{KernelRegistry, TensorStore};
use pto_wsp::plan::{PlanOptions, PlanStats, run_plans};
use pto_wsp::{TensorRole, Unwritten};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::RunError;
use crate::arrays::{self, Attached, Given};

/// How long a run is waited for between two checks for Ctrl-C.
const SLICE: Duration = Duration::from_millis(10);

/// A compiled program: runs on the CPU simulation with the caller's arrays as its tensors.
#[pyclass(module = "pto_wsp._pto_wsp", frozen)]
pub struct Program {
    name: String,
    /// The module it was compiled from (its declarations, for the arrays it binds).
    loaded: Loaded,
    bindings: Bindings,
    roles: Vec<TensorRole>,
    state: Mutex<State>,
}

struct State {
    program: pto_wsp::Program,
    /// A run started by `execute_async`: its bindings, the arrays it runs on and where each
    /// was attached.
    running: Option<Running>,
    /// The bindings of the last completed run (for its trace).
    last_bindings: Option<Bindings>,
}

struct Running {
    bindings: Bindings,
    /// Kept alive (and, for DLPack, not released) until the run has let go of them.
    _given: Vec<Given>,
    attached: Vec<Attached>,
}

impl Program {
    pub(crate) fn new(
        program: pto_wsp::Program,
        loaded: Loaded,
        bindings: Bindings,
        roles: Vec<TensorRole>,
    ) -> Program {
        Program {
            name: loaded.source.name.clone(),
            loaded,
            bindings,
            roles,
            state: Mutex::new(State {
                program,
                running: None,
                last_bindings: None,
            }),
        }
    }

    /// The state, or `RuntimeError` at once when another thread's call holds it.
    fn state(&self) -> PyResult<MutexGuard<'_, State>> {
        lock(&self.state, &self.name)
    }

    fn written(&self) -> Vec<bool> {
        self.roles.iter().map(|r| r.written).collect()
    }
}

pub(crate) fn lock<'a, T>(m: &'a Mutex<T>, name: &str) -> PyResult<MutexGuard<'a, T>> {
    match m.try_lock() {
        Ok(g) => Ok(g),
        Err(TryLockError::Poisoned(p)) => Ok(p.into_inner()),
        Err(TryLockError::WouldBlock) => Err(PyRuntimeError::new_err(format!(
            "program `{name}` is running a call from another thread; calls of one program run \
             one at a time (pto_wsp.Program waits its turn; this low-level call does not)"
        ))),
    }
}

#[pymethods]
impl Program {
    /// Runs with the given arrays as the tensors of their names and waits: `execute_async`
    /// then `synchronize`.
    #[pyo3(signature = (**arrays))]
    fn execute<'py>(
        &self,
        py: Python<'py>,
        arrays: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let mut st = self.state()?;
        self.start(py, &mut st, arrays)?;
        self.finish(py, &mut st)
    }

    /// Starts a run with the given arrays as the tensors of their names (numpy arrays or
    /// DLPack producers, read and written in place) and returns at once. Raises
    /// `RuntimeError` when a run is in progress.
    #[pyo3(signature = (**arrays))]
    fn execute_async<'py>(
        &self,
        py: Python<'py>,
        arrays: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<()> {
        let mut st = self.state()?;
        self.start(py, &mut st, arrays)
    }

    /// Waits (GIL released, Ctrl-C cancels) for the run `execute_async` started, gives the
    /// arrays back, and returns its statistics or raises its error.
    fn synchronize<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let mut st = self.state()?;
        self.finish(py, &mut st)
    }

    /// Whether no run is in progress (or the one in progress has finished).
    fn is_complete(&self) -> bool {
        match self.state.try_lock() {
            Ok(st) => st.running.is_none() || st.program.is_complete(),
            Err(TryLockError::Poisoned(p)) => p.into_inner().program.is_complete(),
            Err(TryLockError::WouldBlock) => false,
        }
    }

    /// Whether a run started by `execute_async` has not been synchronized yet.
    fn is_running(&self) -> bool {
        match self.state.try_lock() {
            Ok(st) => st.running.is_some(),
            Err(TryLockError::Poisoned(p)) => p.into_inner().running.is_some(),
            Err(TryLockError::WouldBlock) => true,
        }
    }

    /// Writes the Chrome trace (chrome://tracing, Perfetto) of the last run to `path`, as
    /// `pto-wsp run --trace` does. Needs `compile(..., trace=True)`.
    fn write_trace(&self, path: std::path::PathBuf) -> PyResult<()> {
        let st = self.state()?;
        let stats = st.program.stats();
        let (Some(stats), Some(bindings)) = (stats, &st.last_bindings) else {
            return Err(RunError::new_err(format!(
                "{}: no completed run to trace (run the program first)",
                self.name
            )));
        };
        if stats.spans.is_empty() && stats.tasks > 0 {
            return Err(RunError::new_err(format!(
                "{}: the run recorded no task times: compile with `trace=True`",
                self.name
            )));
        }
        let json = pto_wsp::driver::trace::trace_json(st.program.plan(), bindings, stats);
        std::fs::write(&path, json).map_err(|e| {
            RunError::new_err(format!(
                "cannot write the trace to `{}`: {e}",
                path.display()
            ))
        })
    }

    /// Statistics of the last completed run (empty before the first).
    #[getter]
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let st = self.state()?;
        stats_dict(py, &st.program)
    }

    /// Number of worker threads.
    #[getter]
    fn threads(&self) -> PyResult<usize> {
        Ok(self.state()?.program.threads())
    }

    /// The program's name (the module's path).
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// One dict per tensor, in declaration order: `name`, `dtype` (its text spelling), `shape`
    /// (under the compile-time bindings), `read`, `written` and `output` (see
    /// `pto_wsp::TensorRole`).
    fn tensor_info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        tensor_list(
            py,
            &shapes(&self.loaded, &self.bindings, &self.name)?,
            &self.roles,
        )
    }

    /// The contents of tensor `name` in the program's own memory after the last run (a tensor
    /// no array was given for), as `.npy` bytes.
    fn read_tensor<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyBytes>> {
        let mut st = self.state()?;
        let bindings = st.last_bindings.clone().unwrap_or(self.bindings.clone());
        let guard = st
            .program
            .tensors(&bindings)
            .map_err(|e| RunError::new_err(format!("{}: {e}", self.name)))?;
        let store = guard.as_ref().expect("tensors() allocates");
        store.index_of(name).ok_or_else(|| {
            crate::ArgumentValueError::new_err(format!(
                "{}: no tensor is named `{name}` (tensors: {})",
                self.name,
                (0..store.len() as u32)
                    .map(|t| store.info(t).name.clone())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        let bytes = store
            .to_npy(name)
            .map_err(|e| RunError::new_err(e.to_string()))?;
        Ok(PyBytes::new(py, &bytes))
    }
}

impl Program {
    fn start(
        &self,
        py: Python<'_>,
        st: &mut State,
        arrays: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<()> {
        if st.running.is_some() {
            return Err(PyRuntimeError::new_err(format!(
                "program `{}` is busy: a run started by execute_async is in progress; call \
                 synchronize() before starting another",
                self.name
            )));
        }
        let given = arrays::given(arrays)?;
        let mut bindings = self.bindings.clone();
        arrays::bind_integers(&self.loaded.module, &given, &mut bindings);
        let mut attached = Vec::with_capacity(given.len());
        let written = self.written();
        let name = &self.name;
        let started = {
            let mut guard = st
                .program
                .tensors(&bindings)
                .map_err(|e| RunError::new_err(format!("{name}: {e}")))?;
            let store = guard.as_mut().expect("tensors() allocates");
            arrays::attach(store, &given, &written, &mut attached)
        }
        .and_then(|()| {
            st.program
                .execute_async(&bindings)
                .map_err(|e| RunError::new_err(format!("{name}: {e}")))
        });
        if let Err(e) = started {
            detach(&mut st.program, &bindings, &attached, name)?;
            return Err(e);
        }
        let _ = py;
        st.running = Some(Running {
            bindings,
            _given: given,
            attached,
        });
        Ok(())
    }

    fn finish<'py>(&self, py: Python<'py>, st: &mut State) -> PyResult<Bound<'py, PyDict>> {
        let running = st.running.take().ok_or_else(|| {
            PyRuntimeError::new_err(format!(
                "program `{}`: no run in progress (call execute_async first)",
                self.name
            ))
        })?;
        let interrupted = wait(py, &st.program);
        let r = st.program.synchronize();
        let detached = detach(
            &mut st.program,
            &running.bindings,
            &running.attached,
            &self.name,
        );
        drop(running._given);
        if let Some(e) = interrupted {
            return Err(e);
        }
        r.map_err(|e| RunError::new_err(format!("{}: {e}", self.name)))?;
        detached?;
        st.last_bindings = Some(running.bindings);
        stats_dict(py, &st.program)
    }
}

/// Waits for the program's run, checking for signals every [`SLICE`]; on a signal's exception
/// the run is cancelled and waited for, and the exception returned.
fn wait(py: Python<'_>, program: &pto_wsp::Program) -> Option<PyErr> {
    loop {
        if py.detach(|| program.wait(SLICE)) {
            return None;
        }
        if let Err(e) = py.check_signals() {
            program.cancel();
            py.detach(|| while !program.wait(SLICE) {});
            return Some(e);
        }
    }
}

fn detach(
    program: &mut pto_wsp::Program,
    bindings: &Bindings,
    attached: &[Attached],
    name: &str,
) -> PyResult<()> {
    if attached.is_empty() {
        return Ok(());
    }
    let mut guard = program
        .tensors(bindings)
        .map_err(|e| RunError::new_err(format!("{name}: {e}")))?;
    let store = guard.as_mut().expect("tensors() allocates");
    arrays::detach(store, attached)
}

impl Drop for Program {
    /// A run still in progress is waited for before its arrays are let go.
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        if let Some(r) = st.running.take() {
            let _ = st.program.synchronize();
            let _ = detach(&mut st.program, &r.bindings, &r.attached, &self.name);
        }
    }
}

fn stats_dict<'py>(py: Python<'py>, program: &pto_wsp::Program) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    if let Some(s) = program.program_stats() {
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
        d.set_item("coverage", coverage_list(py, program.coverage())?)?;
    }
    Ok(d)
}

/// The output tensors a run left partly unwritten, one dict each: `tensor`, `shape`,
/// `elements`, `bounds` (`(start, stop)` per dimension), `exact`, `message`.
fn coverage_list<'py>(py: Python<'py>, unwritten: &[Unwritten]) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for u in unwritten {
        let d = PyDict::new(py);
        d.set_item("tensor", &u.tensor)?;
        d.set_item("shape", u.shape.clone())?;
        d.set_item("elements", u.elements)?;
        d.set_item("bounds", u.bounds.clone())?;
        d.set_item("exact", u.exact)?;
        d.set_item("message", u.to_string())?;
        list.append(d)?;
    }
    Ok(list)
}

/// The tensors' shapes under `bindings` (whose bound integer contents, which a call may
/// replace, are not checked here).
fn shapes(loaded: &Loaded, bindings: &Bindings, name: &str) -> PyResult<TensorStore> {
    let mut b = bindings.clone();
    b.arrays.clear();
    TensorStore::new(&loaded.module, &b).map_err(|e| RunError::new_err(format!("{name}: {e}")))
}

fn tensor_list<'py>(
    py: Python<'py>,
    store: &TensorStore,
    roles: &[TensorRole],
) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for t in 0..store.len() as u32 {
        let info = store.info(t);
        let role = roles.get(t as usize).copied().unwrap_or_default();
        let d = PyDict::new(py);
        d.set_item("name", &info.name)?;
        d.set_item("dtype", info.dtype.to_string())?;
        d.set_item("shape", info.shape.clone())?;
        d.set_item("read", role.read)?;
        d.set_item("written", role.written)?;
        d.set_item("output", role.output())?;
        d.set_item("checked", role.checked())?;
        list.append(d)?;
    }
    Ok(list)
}

/// A compiled module of plans (Plan-Descriptor-Execute, `docs/PDE.md`): runs its plans in
/// declaration order on the CPU simulation with the caller's arrays as its tensors.
#[pyclass(module = "pto_wsp._pto_wsp", frozen)]
pub struct PlanProgram {
    name: String,
    loaded: Loaded,
    bindings: Bindings,
    /// The built-ins, the module's kernels with bodies and its `//@ alias` lines.
    kernels: KernelRegistry,
    dispatch_threads: usize,
    roles: Vec<TensorRole>,
    /// The statistics of the last completed run.
    last: Mutex<Vec<PlanStats>>,
}

impl PlanProgram {
    pub(crate) fn new(
        loaded: Loaded,
        bindings: Bindings,
        kernels: KernelRegistry,
        threads: usize,
    ) -> PlanProgram {
        let dispatch_threads = if threads == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            threads
        };
        let roles = pto_wsp::plan_roles(&loaded.module);
        PlanProgram {
            name: loaded.source.name.clone(),
            loaded,
            bindings,
            kernels,
            dispatch_threads,
            roles,
            last: Mutex::new(Vec::new()),
        }
    }
}

#[pymethods]
impl PlanProgram {
    /// Runs every plan, in declaration order, with the given arrays as its tensors, read and
    /// written in place (the checks of [`Program::execute`]). Integer arrays are also bound, so
    /// a generator's `load` reads them. Tensors not given start zeroed. The GIL is released
    /// while the plans run; Ctrl-C cancels them. Returns the run's statistics; a plan that
    /// cannot run raises `RunError` at its `file:line:column`.
    #[pyo3(signature = (**arrays))]
    fn execute<'py>(
        &self,
        py: Python<'py>,
        arrays: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let mut last = lock(&self.last, &self.name)?;
        let name = &self.name;
        let given = arrays::given(arrays)?;
        let mut bindings = self.bindings.clone();
        let module = &self.loaded.module;
        arrays::bind_integers(module, &given, &mut bindings);
        let mut store = TensorStore::new(module, &bindings)
            .map_err(|e| RunError::new_err(format!("{name}: {e}")))?;
        let mut attached = Vec::with_capacity(given.len());
        let written: Vec<bool> = self.roles.iter().map(|r| r.written).collect();
        let mut interrupted = None;
        let r = arrays::attach(&mut store, &given, &written, &mut attached).and_then(|()| {
            let opts = PlanOptions {
                dispatch_threads: self.dispatch_threads,
                ..PlanOptions::default()
            };
            let (kernels, bindings) = (&self.kernels, &bindings);
            kernels.clear_cancel();
            let store = &mut store;
            let ran = std::thread::scope(|s| {
                let (tx, rx) = std::sync::mpsc::channel::<()>();
                let h = s.spawn(move || {
                    let r = run_plans(module, bindings, store, kernels, opts);
                    let _ = tx.send(());
                    r
                });
                // A mutex makes the receiver shareable with the GIL-free closures below.
                let rx = Mutex::new(rx);
                let ended = |timeout: Duration| {
                    let rx = rx.lock().unwrap_or_else(|p| p.into_inner());
                    !matches!(
                        rx.recv_timeout(timeout),
                        Err(std::sync::mpsc::RecvTimeoutError::Timeout)
                    )
                };
                while !py.detach(|| ended(SLICE)) {
                    if let Err(e) = py.check_signals() {
                        kernels.cancel();
                        interrupted = Some(e);
                        py.detach(|| while !ended(SLICE) {});
                        break;
                    }
                }
                h.join()
                    .unwrap_or_else(|_| panic!("the plan run's thread panicked"))
            });
            ran.map_err(|e| {
                RunError::new_err(
                    pto_wsp::driver::Error::diagnostic(&self.loaded.source, &e).rendered,
                )
            })
        });
        // The store lets go of the arrays whether or not the plans ran.
        let detached = arrays::detach(&mut store, &attached);
        drop(given);
        if let Some(e) = interrupted {
            return Err(e);
        }
        *last = r?;
        detached?;
        plan_stats(py, &last)
    }

    /// Statistics of the last completed run (empty before the first): `descriptor_bytes` (the
    /// size of one work descriptor) and `plans`, one dict per plan in run order with `plan`,
    /// `descriptors`, `per_thread` (descriptors run by each dispatch thread), `workspace_used`
    /// (elements) and `prefetches`.
    #[getter]
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let last = lock(&self.last, &self.name)?;
        plan_stats(py, &last)
    }

    /// Number of dispatch threads.
    #[getter]
    fn threads(&self) -> usize {
        self.dispatch_threads
    }

    /// The program's name (the module's path).
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// One dict per tensor, as [`Program::tensor_info`] gives it (roles from the plans'
    /// kernel calls and the generators' `load`s).
    fn tensor_info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        tensor_list(
            py,
            &shapes(&self.loaded, &self.bindings, &self.name)?,
            &self.roles,
        )
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

fn plan_stats<'py>(py: Python<'py>, last: &[PlanStats]) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    if last.is_empty() {
        return Ok(d);
    }
    d.set_item("descriptor_bytes", pto_wsp::pde::Descriptor::BYTES)?;
    let plans = PyList::empty(py);
    for s in last {
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
