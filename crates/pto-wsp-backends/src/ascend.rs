//! The Ascend back end (`pto-wsp emit ascend`, targets `ascend_a2a3sim` and `ascend_a2a3`): a
//! workload as a tree for the Ascend task runtime (simpler's `tensormap_and_ringbuffer`),
//! runnable on its `a2a3sim` simulator.
//!
//! Why: the production target of a workload is the Ascend NPU, where an AICPU thread runs an
//! orchestration function submitting tasks to AICore kernels and the runtime infers their
//! dependencies (TensorMap). This module writes that program from our workload, so the same
//! `.wsp` file runs on our CPU simulation and on the real runtime, and the two can be compared.
//!
//! Promises:
//! - Every construct the back end cannot express (a CSP pipeline, a task of a kernel without a
//!   body, a tile instruction PTO-ISA lacks, an element type or size over the runtime's limits)
//!   is an [`EmitError`] naming it at its `file:line:column`, returned before anything is emitted.
//! - The orchestration (`ascend/orch.rs`) is the resolved entry point as C++: it submits the
//!   reference expander's tasks under the bindings, in program order, each with views of the
//!   module tensors (`in` → `add_input`, `out` / `inout` → `add_inout`, so the runtime looks up
//!   read-after-write and write-after-write itself); what the runtime's TensorMap does not
//!   infer — write-after-read, and the structural order of `for_each` / `sequential` / `while`
//!   (one barrier dummy task per order edge, as our feed makes) — is declared with explicit
//!   dependencies at run time, so the runtime orders every pair of tasks ours orders.
//! - Kernel files reuse the PTO-ISA back end's body emission ([`crate::ptoisa`]); each is
//!   wrapped as a `kernel_entry(__gm__ int64_t *args)` reading its regions from the runtime's
//!   tensor descriptors.
//! - Every schedule directive the runtime cannot honour is listed (with its location) in the
//!   generated `README.md` and in [`AscendTree::notes`], never silently dropped.
//!
//! Symbols, slots and bound integer tensors are baked into the orchestration as constants (a
//! new binding needs a new emit); tensor shapes likewise.

mod csp;
mod orch;

use crate::ptoisa::{emit_kernel, tensor_store};
use crate::{EmitError, Files, Input};
use pto_wsp_graph::ExecDomain;
use pto_wsp_graph::builder::GraphBuilder;
use pto_wsp_graph::feed::{BARRIER_KERNEL, NoHooks, feed};
use pto_wsp_graph::storage::TaskGraphStorage;
use pto_wsp_graph::types::access_from_code;
use pto_wsp_ir::device::{Core, alloc, check, split, sync};
use pto_wsp_ir::resolve::{Resolved, Unsupported};
use pto_wsp_ir::schedule::{
    DepsMode, Dispatch, PoolsPolicy, ReadyPolicy, ScheduleItemKind, StartPolicy, TaskGraphItem,
    Timing, TracePolicy, WindowMode,
};
use pto_wsp_ir::{DType, ExpandOptions, KernelDecl, Loc, ParamKind, ParamType};
use pto_wsp_kernels::TensorStore;
use std::fmt::Write as _;

/// The back end's name in the registry.
pub const NAME: &str = "ascend";

/// The targets this back end serves: the simulator and the device.
pub const TARGETS: [&str; 2] = ["ascend_a2a3sim", "ascend_a2a3"];

/// The most tasks (kernel and barrier) the emitter expands to count tasks and edges.
pub const MAX_TASKS: usize = 1 << 20;

/// The runtime's limits (simpler `arg_direction.h`, `tensor.h`, `scheduler_context.h`).
const MAX_TASK_TENSORS: usize = 32;
const MAX_TASK_SCALARS: usize = 16;
const MAX_ORCH_TENSORS: usize = 256;
const MAX_RANK: usize = 5;
const MAX_KERNELS: usize = 1024;
/// Status slots of a workload whose task count is known only when it runs (computed reads):
/// its tasks take them in turn, round and round.
const DYNAMIC_STATUS_SLOTS: usize = 1 << 16;

pub(crate) const AICORE_HPP: &str = include_str!("ascend/pto_wsp_aicore.hpp");
pub(crate) const ORCH_HPP: &str = include_str!("ascend/pto_wsp_orch.hpp");
const RUNNER_BODY: &str = include_str!("ascend/runner.py");

/// An emitted tree, in memory, with what the caller reports and tests compare.
#[derive(Debug, Clone)]
pub struct AscendTree {
    /// `(file name, contents)`.
    pub files: Files,
    /// Schedule directives the runtime cannot honour (and other notes), each with its place.
    pub notes: Vec<String>,
    /// Kernel tasks of the workload (ours: one per `task`).
    pub kernel_tasks: usize,
    /// Kernel tasks the orchestration submits: one per part of a split kernel.
    pub part_tasks: usize,
    /// Barrier (dummy) tasks it submits.
    pub barrier_tasks: usize,
    /// Our builder's edges `(pred, succ)` over the submitted tasks (kernel and barrier
    /// interleaved, in submission order).
    pub edges: Vec<(u32, u32)>,
    /// Whether each submitted task is a barrier.
    pub barriers: Vec<bool>,
    /// The tensors the workload writes (the runner's outputs).
    pub written: Vec<String>,
    /// The AICore kernels, in function-id order.
    pub kernels: Vec<DeviceKernel>,
}

/// The runtime-side facts of one module tensor.
struct TensorFacts {
    name: String,
    shape: Vec<u64>,
    numpy: &'static str,
    simpler: &'static str,
    written: bool,
}

fn dtype_names(d: DType) -> Option<(&'static str, &'static str)> {
    Some(match d {
        DType::F32 => ("float32", "FLOAT32"),
        DType::F16 => ("float16", "FLOAT16"),
        DType::I32 => ("int32", "INT32"),
        DType::U32 => ("uint32", "UINT32"),
        DType::I64 => ("int64", "INT64"),
        DType::U64 => ("uint64", "UINT64"),
        DType::U8 => ("uint8", "UINT8"),
        DType::Bf16 => return None,
    })
}

/// The first construct of `res` the Ascend back end cannot express, with its location: a CSP
/// pipeline, a computed read, a task of a kernel without a body, a bf16 tensor, a tensor rank
/// or an argument count over the runtime's limits. The one list of refusals, read by [`emit`]
/// and by the back end's `supports` in the facade's registry.
pub fn unsupported(res: &Resolved) -> Result<(), Unsupported> {
    let module = &res.module;
    let no = |construct: String, loc: Loc| Unsupported {
        backend: "ascend".into(),
        construct,
        loc,
    };
    if res.csp
        && let Some((t, loc)) = res.computed_reads().first()
    {
        return Err(no(
            format!(
                "a computed read of tensor `{}` inside pipeline `{}`: a pipeline is lowered by \
                 running its processes at emit time (channels become dependencies between the \
                 tasks), and a value its tasks write exists only when they run",
                module.tensors[t.index()].name,
                res.entry
            ),
            *loc,
        ));
    }
    if module.tensors.len() > MAX_ORCH_TENSORS {
        return Err(no(
            format!(
                "a module of {} tensors: the runtime passes at most {MAX_ORCH_TENSORS} to an \
                 orchestration",
                module.tensors.len()
            ),
            Loc::NONE,
        ));
    }
    for t in &module.tensors {
        if t.dtype == DType::Bf16 {
            return Err(no(
                format!(
                    "the bf16 tensor `{}`: PTO-ISA's CPU simulation makes bf16 an f16 with this \
                     g++ (no <stdfloat>), so its numbers would be wrong",
                    t.name
                ),
                t.name.loc,
            ));
        }
        if t.shape.is_empty() || t.shape.len() > MAX_RANK {
            return Err(no(
                format!(
                    "tensor `{}` of rank {}: runtime tensors have rank 1 to {MAX_RANK}",
                    t.name,
                    t.shape.len()
                ),
                t.name.loc,
            ));
        }
    }
    if let Some(body) = res.processes.first().map(|p| &p.body)
        && let Some(loc) = too_deep(body, 0)
    {
        return Err(no(
            format!(
                "a loop nested more than {MAX_LOOP_DEPTH} deep: each loop iteration is a runtime \
                 scope, and the runtime allows 64 nested scopes"
            ),
            loc,
        ));
    }
    // A kernel with tiers never runs itself: its variants do.
    for (ki, k) in module.kernels.iter().enumerate() {
        if !res.kernels_used[ki] || res.tiers[ki].is_some() {
            continue;
        }
        if k.body.is_none() {
            return Err(no(
                format!(
                    "a task of kernel `{}`, which has no body (a built-in or external kernel): \
                     AICore kernels are written in tile instructions",
                    k.name.name
                ),
                k.name.loc,
            ));
        }
        let tiles = k
            .params
            .iter()
            .filter(|p| matches!(p.kind, ParamKind::Tile { .. }))
            .count();
        let scalars = k.params.len() - tiles;
        if tiles > MAX_TASK_TENSORS || scalars > MAX_TASK_SCALARS {
            return Err(no(
                format!(
                    "kernel `{}` with {tiles} regions and {scalars} scalars: a runtime task takes \
                     at most {MAX_TASK_TENSORS} and {MAX_TASK_SCALARS}",
                    k.name.name
                ),
                k.name.loc,
            ));
        }
    }
    Ok(())
}

/// Loops (and `while`s) nested deeper than this are refused (see [`too_deep`]).
const MAX_LOOP_DEPTH: usize = 60;

/// The first loop nested deeper than [`MAX_LOOP_DEPTH`] (explicit stack: bodies can be deep).
fn too_deep(body: &[pto_wsp_ir::resolve::Stmt], depth: usize) -> Option<Loc> {
    use pto_wsp_ir::resolve::StmtKind;
    let mut stack: Vec<(&[pto_wsp_ir::resolve::Stmt], usize)> = vec![(body, depth)];
    while let Some((stmts, d)) = stack.pop() {
        for s in stmts {
            match &s.kind {
                StmtKind::Loop(lp) => {
                    if d + 1 > MAX_LOOP_DEPTH {
                        return Some(s.loc);
                    }
                    stack.push((&lp.body, d + 1));
                }
                StmtKind::While { body, .. } => {
                    if d + 1 > MAX_LOOP_DEPTH {
                        return Some(s.loc);
                    }
                    stack.push((body, d + 1));
                }
                StmtKind::If {
                    then_body,
                    else_body,
                    ..
                } => {
                    stack.push((then_body, d));
                    stack.push((else_body, d));
                }
                StmtKind::Block { body, .. }
                | StmtKind::Call { body, .. }
                | StmtKind::Consume { body, .. } => stack.push((body, d)),
                _ => {}
            }
        }
    }
    None
}

/// A located refusal.
fn refuse(loc: Loc, message: String) -> EmitError {
    EmitError::at(
        loc,
        format!("the Ascend back end cannot express this: {message}"),
    )
}

/// Emits the Ascend tree of the input's program under its bindings for `target` (one of
/// [`TARGETS`]).
pub fn emit(input: &Input<'_>, target: &str) -> Result<AscendTree, EmitError> {
    if !TARGETS.contains(&target) {
        return Err(EmitError::plain(format!(
            "unknown Ascend target `{target}` (known: {})",
            TARGETS.join(", ")
        )));
    }
    let device = target == "ascend_a2a3";
    let res = input.resolved;
    unsupported(res)?;
    let store = tensor_store(input)?;
    let tasks = Expanded::of(input)?;
    let kernels = emit_kernels(input)?;
    let facts = tensor_facts(&store, &tasks, res);
    let edges = tasks.edges();
    let mut notes = kernels.notes;
    notes.extend(schedule_notes(input));
    notes.extend(tasks.notes(input));
    let barriers = tasks.barriers();
    let barrier_tasks = barriers.iter().filter(|b| **b).count();
    let kernel_tasks = barriers.len() - barrier_tasks;
    let max_parts = max_parts(&kernels.plans);
    let part_tasks = tasks.part_tasks(&kernels.plans, max_parts);
    // A workload with computed reads has no task count before it runs: its tasks share a ring
    // of slots (a failure stays in its slot; the report names its message).
    let status_slots = if tasks.computed {
        DYNAMIC_STATUS_SLOTS
    } else {
        (kernel_tasks * max_parts).max(1)
    };
    let written: Vec<String> = facts
        .iter()
        .filter(|t| t.written)
        .map(|t| t.name.clone())
        .collect();
    let platform = if device { "a2a3" } else { "a2a3sim" };
    let orch_input = orch::OrchInput {
        input,
        shapes: store.infos().iter().map(|i| i.shape.clone()).collect(),
        kernels: kernels.plans,
    };
    let orchestration = match &tasks.csp {
        Some(tasks) => orch::csp_orchestration(&orch_input, tasks),
        None => orch::orchestration(&orch_input),
    };
    let window = res
        .schedule
        .config
        .task_window
        .map(|(n, _)| (n + 1).next_power_of_two().max(4));
    let runner = runner(
        input,
        &RunnerFacts {
            tensors: &facts,
            parts: &kernels.parts,
            messages: &kernels.messages,
            kernel_tasks: part_tasks,
            barrier_tasks,
            window,
            platform,
            status_slots,
        },
    );
    let readme = readme(input, &notes, part_tasks, barrier_tasks, &written, platform);
    Ok(AscendTree {
        files: tree_files(&kernels.parts, orchestration, runner, readme),
        notes,
        kernel_tasks,
        part_tasks,
        barrier_tasks,
        edges,
        barriers,
        written,
        kernels: kernels.parts.iter().map(EmittedPart::summary).collect(),
    })
}

/// The workload's tasks as the emitter expands them once, to check it and count its tasks and
/// edges: our graph (the expander fed into an overlap builder: what the runtime's TensorMap
/// does, plus write-after-read, and barriers for the structural order edges), or a pipeline's
/// tasks in submission order. A workload with computed reads has neither (its tasks depend on
/// what earlier tasks write): the runtime's record counts its tasks.
struct Expanded {
    /// Whether the workload reads tensor elements to compute task arguments.
    computed: bool,
    /// Our graph, for a workload without computed reads or a pipeline.
    graph: Option<TaskGraphStorage>,
    /// A CSP pipeline's tasks.
    csp: Option<Vec<csp::CspTask>>,
}

impl Expanded {
    /// Expands the input's workload under its bindings (at most [`MAX_TASKS`] tasks).
    fn of(input: &Input<'_>) -> Result<Expanded, EmitError> {
        let res = input.resolved;
        let computed = !res.computed_reads().is_empty();
        let csp = if res.csp {
            let pipeline = res
                .module
                .pipelines
                .iter()
                .find(|p| p.name.name == res.entry)
                .ok_or_else(|| EmitError::plain(format!("no pipeline `{}`", res.entry)))?;
            Some(
                csp::schedule(res, input.bindings, pipeline, MAX_TASKS)
                    .map_err(|m| refuse(pipeline.name.loc, m))?,
            )
        } else {
            None
        };
        let graph = if computed || csp.is_some() {
            None
        } else {
            Some(build_graph(input)?)
        };
        Ok(Expanded {
            computed,
            graph,
            csp,
        })
    }

    /// Our builder's edges `(pred, succ)` over the submitted tasks, sorted: the graph's, or the
    /// pipeline's explicit ones (process order, channels).
    fn edges(&self) -> Vec<(u32, u32)> {
        let mut edges: Vec<(u32, u32)> = self
            .graph
            .iter()
            .flat_map(|g| g.edges().map(|(p, s)| (p.0, s.0)))
            .collect();
        if let Some(tasks) = &self.csp {
            edges.extend(
                tasks
                    .iter()
                    .enumerate()
                    .flat_map(|(i, t)| t.deps.iter().map(move |&d| (d as u32, i as u32))),
            );
        }
        edges.sort_unstable();
        edges
    }

    /// Whether each submitted task is a barrier (a pipeline has none).
    fn barriers(&self) -> Vec<bool> {
        match &self.csp {
            Some(tasks) => vec![false; tasks.len()],
            None => self
                .graph
                .iter()
                .flat_map(|g| g.tasks.iter().map(|t| t.kernel == BARRIER_KERNEL))
                .collect(),
        }
    }

    /// The notes on how the tasks are submitted: computed reads wait, a pipeline is lowered.
    fn notes(&self, input: &Input<'_>) -> Vec<String> {
        let res = input.resolved;
        let mut notes = Vec::new();
        if self.computed {
            let reads: Vec<String> = res
                .computed_reads()
                .iter()
                .map(|(t, loc)| {
                    format!(
                        "`{}` ({})",
                        res.module.tensors[t.index()].name,
                        input.position(*loc)
                    )
                })
                .collect();
            notes.push(format!(
                "computed reads of {}: the orchestration waits for the tasks that write each \
                 element it reads (simpler's get_tensor_data) and submits nothing meanwhile; the \
                 tasks are counted when they run",
                reads.join(", ")
            ));
        }
        if let Some(tasks) = &self.csp {
            notes.push(format!(
                "pipeline `{}` lowered to {} task(s) submitted in a bounded order its channels \
                 allow (each process runs until a channel blocks it), with explicit dependencies \
                 for each process's order and each token's channel",
                res.entry,
                tasks.len()
            ));
        }
        notes
    }

    /// Kernel tasks as the runtime sees them: every part of a split kernel is a task of its own
    /// (a kernel without a plan, a tiered one, counts `max_parts`).
    fn part_tasks(&self, plans: &[Option<orch::KernelPlan>], max_parts: usize) -> usize {
        let parts_of = |k: u32| {
            plans
                .get(k as usize)
                .and_then(|p| p.as_ref())
                .map_or(max_parts, |p| p.parts.len())
        };
        match (&self.graph, &self.csp) {
            (Some(g), _) => g
                .tasks
                .iter()
                .filter(|t| t.kernel != BARRIER_KERNEL)
                .map(|t| parts_of(t.kernel))
                .sum(),
            (None, Some(tasks)) => tasks.iter().map(|t| parts_of(t.task.kernel)).sum(),
            (None, None) => 0,
        }
    }
}

/// Our graph of the input's workload: the expander fed into an overlap builder, barriers for
/// the structural order edges; refused over [`MAX_TASKS`] tasks.
fn build_graph(input: &Input<'_>) -> Result<TaskGraphStorage, EmitError> {
    let mut builder = GraphBuilder::new(DepsMode::Overlap);
    let summary = feed(
        input.resolved,
        input.bindings,
        &ExpandOptions {
            limit: Some(MAX_TASKS + 1),
            executors: None,
        },
        &mut builder,
        &mut NoHooks,
        ExecDomain::HostCpu,
    )
    .map_err(|e| EmitError::plain(format!("expansion of {} failed: {e}", input.name())))?;
    let graph = builder.finish();
    if graph.tasks.len() > MAX_TASKS || summary.expand.truncated {
        return Err(EmitError::plain(format!(
            "more than {MAX_TASKS} tasks under these bindings; the emitter expands the \
             workload once (to check it and count its tasks and edges) and keeps at most \
             that many"
        )));
    }
    Ok(graph)
}

/// The AICore kernels of a workload and what the orchestration and runner need of them.
struct Kernels {
    /// Every emitted part, in function-id order.
    parts: Vec<EmittedPart>,
    /// Per module kernel: how its tasks are submitted, when a task may run it.
    plans: Vec<Option<orch::KernelPlan>>,
    /// Notes on kernels split over the cube and the vector core.
    notes: Vec<String>,
    /// The status messages the kernels report: status code c is `messages[c - 1]`.
    messages: Vec<String>,
}

/// Emits every kernel a task may run (tier variants included), in module order: each has a
/// body (`unsupported`) and follows the device rules; each becomes one part per core it uses
/// (one for most), each part one AICore kernel with its own function id. A kernel with tiers
/// never runs itself: its variants do.
fn emit_kernels(input: &Input<'_>) -> Result<Kernels, EmitError> {
    let res = input.resolved;
    let module = &res.module;
    let used: Vec<bool> = (0..module.kernels.len())
        .map(|k| res.kernels_used[k] && res.tiers[k].is_none())
        .collect();
    for (_, k) in module.kernels.iter().enumerate().filter(|(i, _)| used[*i]) {
        if let Some(e) = check::check_kernel(k).into_iter().next() {
            return Err(e.into());
        }
    }
    let mut kernels = Kernels {
        parts: Vec::new(),
        plans: vec![None; module.kernels.len()],
        notes: Vec::new(),
        messages: Vec::new(),
    };
    let names: std::collections::HashSet<&str> = module
        .kernels
        .iter()
        .map(|k| k.name.name.as_str())
        .collect();
    for (ki, k) in module.kernels.iter().enumerate().filter(|(i, _)| used[*i]) {
        let split = split::split(k)?;
        if split.parts.len() > 1 {
            kernels.notes.push(split_note(input, k, &split));
        }
        let mut plan = orch::KernelPlan {
            parts: Vec::new(),
            scratch: split.scratch.clone(),
        };
        for part in split.parts {
            let pname = &part.kernel.name.name;
            if *pname != k.name.name && names.contains(pname.as_str()) {
                return Err(refuse(
                    k.name.loc,
                    format!(
                        "kernel `{}` is split into parts named `{pname}`…, but the module already \
                         has a kernel `{pname}`; rename it",
                        k.name.name
                    ),
                ));
            }
            plan.parts.push(orch::PartPlan {
                func: kernels.parts.len() as u32,
                core: part.core,
                params: part.params.clone(),
            });
            let first = plan.parts.len() == 1;
            let emitted = emit_part(input, part, first, &mut kernels.messages)?;
            kernels.parts.push(emitted);
        }
        kernels.plans[ki] = Some(plan);
    }
    if kernels.parts.len() > MAX_KERNELS {
        return Err(EmitError::plain(format!(
            "{} kernels; the runtime dispatches at most {MAX_KERNELS}",
            kernels.parts.len()
        )));
    }
    Ok(kernels)
}

/// The note on a kernel split over the cube and the vector core.
fn split_note(input: &Input<'_>, k: &KernelDecl, split: &split::Split) -> String {
    format!(
        "{}: kernel `{}` uses the cube and the vector core: each of its tasks runs as {} \
         dependent tasks ({}), joined through global memory the runtime allocates",
        input.position(k.name.loc),
        k.name.name,
        split.parts.len(),
        split
            .parts
            .iter()
            .map(|p| format!("`{}` on {}", p.kernel.name.name, p.core.runtime()))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// Emits one part as an AICore kernel: its header (the PTO-ISA body under the device's buffer
/// and sync plans) and its `kernel_entry` wrapper; its status messages go to `messages`.
fn emit_part(
    input: &Input<'_>,
    part: split::Part,
    first: bool,
    messages: &mut Vec<String>,
) -> Result<EmittedPart, EmitError> {
    // Loops double-buffer what they load afresh each iteration, when the buffers have room for
    // the second copies; otherwise every tile has one buffer.
    let mut doubles = sync::find_doubles(&part.kernel);
    let alloc = match alloc::plan_with(&part.kernel, &doubles.decls()) {
        Ok(a) => a,
        Err(_) => {
            doubles = sync::Doubles::default();
            alloc::plan(&part.kernel).map_err(EmitError::from)?
        }
    };
    let sync = sync::plan_with(&part.kernel, &doubles);
    let mode = crate::ptoisa::Mode::Device {
        alloc: &alloc,
        sync: &sync,
        doubles: &doubles,
    };
    let text = emit_kernel(&part.kernel, input, mode, messages.len() as i64 + 1)?;
    messages.extend(text.messages.iter().cloned());
    let wrapper = kernel_wrapper(input, &part.kernel, messages);
    Ok(EmittedPart {
        name: part.kernel.name.name.clone(),
        core: part.core,
        header: text.text,
        wrapper,
        decl: part.kernel,
        kinds: part.params,
        first,
        sync_pairs: sync.pairs,
        sync_barriers: sync.barriers,
        doubled: doubles.len(),
    })
}

/// The most parts any kernel has: a task takes as many status slots, since tier variants run
/// in place of the kernel a task names.
fn max_parts(plans: &[Option<orch::KernelPlan>]) -> usize {
    plans
        .iter()
        .flatten()
        .map(|p| p.parts.len())
        .max()
        .unwrap_or(1)
}

/// The runtime-side facts of every module tensor, with whether the workload writes it.
fn tensor_facts(store: &TensorStore, tasks: &Expanded, res: &Resolved) -> Vec<TensorFacts> {
    let mut facts: Vec<TensorFacts> = store
        .infos()
        .iter()
        .map(|info| {
            // `unsupported` refused bf16 and ranks outside 1..=5.
            let (numpy, simpler) = dtype_names(info.dtype).unwrap_or(("float32", "FLOAT32"));
            TensorFacts {
                name: info.name.clone(),
                shape: info.shape.clone(),
                numpy,
                simpler,
                written: false,
            }
        })
        .collect();
    match &tasks.graph {
        Some(graph) => {
            for io in &graph.io {
                if access_from_code(io.access).writes() {
                    facts[io.region.tensor as usize].written = true;
                }
            }
        }
        None => {
            for (f, &w) in facts.iter_mut().zip(&res.written) {
                f.written = w;
            }
        }
    }
    if let Some(tasks) = &tasks.csp {
        for r in tasks.iter().flat_map(|t| &t.task.regions) {
            if r.access.writes() {
                facts[r.tensor as usize].written = true;
            }
        }
    }
    facts
}

/// The tree's files: the shared headers, each part's header and wrapper, the orchestration,
/// the runner and the README.
fn tree_files(
    parts: &[EmittedPart],
    orchestration: String,
    runner: String,
    readme: String,
) -> Files {
    let mut files = vec![
        (
            "pto_wsp_rt.hpp".to_string(),
            crate::ptoisa::RT_HPP.to_string(),
        ),
        ("pto_wsp_aicore.hpp".to_string(), AICORE_HPP.to_string()),
    ];
    for p in parts {
        files.push((format!("{}.hpp", p.name), p.header.clone()));
        files.push((format!("kernel_{}.cpp", p.name), p.wrapper.clone()));
    }
    files.push(("orchestration.cpp".to_string(), orchestration));
    files.push(("pto_wsp_orch.hpp".to_string(), ORCH_HPP.to_string()));
    files.push(("runner.py".to_string(), runner));
    files.push(("README.md".to_string(), readme));
    files
}

/// One emitted AICore kernel (a kernel, or a part of a split one).
struct EmittedPart {
    name: String,
    core: Core,
    header: String,
    wrapper: String,
    decl: KernelDecl,
    kinds: Vec<split::PartParam>,
    first: bool,
    sync_pairs: usize,
    sync_barriers: usize,
    doubled: usize,
}

impl EmittedPart {
    /// What the tree's summary says of it.
    fn summary(&self) -> DeviceKernel {
        DeviceKernel {
            name: self.name.clone(),
            core: self.core,
            first_part: self.first,
            sync_pairs: self.sync_pairs,
            sync_barriers: self.sync_barriers,
            doubled: self.doubled,
        }
    }
}

/// What the tree's summary and tests know of each AICore kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceKernel {
    /// The kernel's name (`NAME` of `kernel_NAME.cpp`).
    pub name: String,
    /// The core it runs on.
    pub core: Core,
    /// Whether it is the first (or only) part of its kernel.
    pub first_part: bool,
    /// `set_flag` / `wait_flag` pairs the sync planner placed.
    pub sync_pairs: usize,
    /// `pipe_barrier(PIPE_V)`s it placed.
    pub sync_barriers: usize,
    /// Tiles its loops double-buffer.
    pub doubled: usize,
}

/// What the runtime does with each schedule directive it cannot honour as written.
fn schedule_notes(input: &Input<'_>) -> Vec<String> {
    let Some(schedule) = &input.resolved.module.schedule else {
        return Vec::new();
    };
    let mut notes = Vec::new();
    let mut note = |loc: Loc, what: String| {
        notes.push(format!("{}: {what}", input.position(loc)));
    };
    for item in &schedule.items {
        let loc = item.loc;
        match &item.kind {
            ScheduleItemKind::Executors(n) => note(
                loc,
                format!("`executors {n}` not honoured: the runtime gives a task to any idle core of its type"),
            ),
            ScheduleItemKind::Dispatch(d) => {
                if !matches!(d, Dispatch::WorkSteal) {
                    note(loc, "`dispatch` not honoured: the runtime has no per-core placement; any idle core of the task's type takes it".into());
                }
            }
            ScheduleItemKind::Streams(_) | ScheduleItemKind::StreamBy(_) => note(
                loc,
                "`streams` / `stream_by` not honoured: the runtime has no streams".into(),
            ),
            ScheduleItemKind::Timing(t) => {
                if !matches!(t, Timing::Immediate) {
                    note(loc, "`timing` not honoured: the runtime issues every task at submit".into());
                }
            }
            ScheduleItemKind::TaskGraph(items) => {
                for ti in items {
                    match ti {
                        TaskGraphItem::Deps(DepsMode::Explicit) => note(
                            loc,
                            "`deps explicit` honoured conservatively: the runtime infers by overlap (extra edges possible, none missing)".into(),
                        ),
                        TaskGraphItem::Deps(DepsMode::Exact) => note(
                            loc,
                            "`deps exact` honoured as overlap (a superset of exact's edges)".into(),
                        ),
                        TaskGraphItem::Deps(_) => {}
                        TaskGraphItem::Ready(ReadyPolicy::Fifo) => {}
                        TaskGraphItem::Ready(_) => note(
                            loc,
                            "`ready` policy not honoured: the runtime's ready queues are FIFO per core type, without priorities".into(),
                        ),
                        TaskGraphItem::Start(StartPolicy::Immediate) => {}
                        TaskGraphItem::Start(_) => note(
                            loc,
                            "`start` policy not honoured: tasks start as soon as they are submitted and ready".into(),
                        ),
                        TaskGraphItem::Trace(TracePolicy::None) => {}
                        TaskGraphItem::Trace(_) => note(
                            loc,
                            "`trace` not mapped: use simpler's own swimlane profiling".into(),
                        ),
                        TaskGraphItem::Pools(PoolsPolicy::ByExecUnit) => {}
                        TaskGraphItem::Pools(_) => note(
                            loc,
                            "`pools` not honoured: tasks go to the AIC or AIV cores their kernel is built for".into(),
                        ),
                    }
                }
            }
            ScheduleItemKind::TaskWindow(n, WindowMode::Stall) => note(
                loc,
                format!("`task_window {n} stall` approximated: the runtime's ring window is set to {} tasks per ring", (n + 1).next_power_of_two().max(4)),
            ),
            ScheduleItemKind::TaskWindow(n, _) => note(
                loc,
                format!("`task_window {n}` abort / benchmark not honoured: the runtime's window always stalls"),
            ),
            ScheduleItemKind::PipelineDepth(n, _) => note(
                loc,
                format!("`pipeline_depth {n}` not honoured: the runtime has no in-flight cap per scope"),
            ),
            ScheduleItemKind::BatchDeps(n) => {
                if *n > 1 {
                    note(loc, format!("`batch_deps {n}` not honoured: the runtime resolves each completion"));
                }
            }
            ScheduleItemKind::DispatchThreshold(_) => note(
                loc,
                "`dispatch_threshold` not honoured: a task goes to the core type its kernel is built for".into(),
            ),
        }
    }
    notes
}

/// The AICore entry of one kernel (or part): regions from the runtime's descriptors (views,
/// no copies), scalars from the argument words after them, the task's status slot last, then
/// the emitted body. Its own checks' messages are appended to `messages`.
fn kernel_wrapper(input: &Input<'_>, k: &KernelDecl, messages: &mut Vec<String>) -> String {
    let name = &k.name.name;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "// Generated by `pto-wsp emit ascend`: AICore entry of kernel `{name}` ({}). Do not edit.\n\
         #include <cstdint>\n\n\
         #include \"{name}.hpp\"\n#include \"pto_wsp_aicore.hpp\"\n#include \"pipe_sync.h\"\n\n\
         #ifndef __aicore__\n#define __aicore__ [aicore]\n#endif\n",
        input.position(k.name.loc)
    );
    let regions: Vec<(&str, DType)> = k
        .params
        .iter()
        .filter_map(|p| match &p.kind {
            ParamKind::Tile { dtype, .. } => Some((p.name.name.as_str(), *dtype)),
            _ => None,
        })
        .collect();
    let scalars = k.scalar_types();
    let n = regions.len();
    out.push_str("extern \"C\" __aicore__ void kernel_entry(__gm__ int64_t *args)\n{\n");
    let _ = writeln!(
        out,
        "    __gm__ pto_wsp_rt::Status *st = reinterpret_cast<__gm__ pto_wsp_rt::Status *>(static_cast<uintptr_t>(args[{}]));",
        n + scalars.len()
    );
    for (i, (pname, dtype)) in regions.iter().enumerate() {
        let e = crate::ptoisa::elem(*dtype).unwrap_or("float");
        messages.push(format!(
            "kernel `{name}`: region {i} (`{pname}`): its columns are not adjacent in memory (stride {{0}})"
        ));
        let code = messages.len();
        messages.push(format!(
            "kernel `{name}`: region {i} (`{pname}`): its rows need more than two strides (a view of rank {{0}})"
        ));
        let _ = writeln!(
            out,
            "    pto_wsp_rt::Gm<{e}> r{i}{{}};\n    if (!pto_wsp_aicore::region(st, {code}, args[{i}], r{i})) {{\n        pipe_sync();\n        return;\n    }}"
        );
    }
    // The kernel's parameters in declaration order: the runtime passes every tensor first, then
    // the scalars.
    let mut call = vec!["st".to_string()];
    let (mut ri, mut sj) = (0, 0);
    for p in &k.params {
        match p.kind {
            ParamKind::Tile { .. } => {
                call.push(format!("r{ri}"));
                ri += 1;
            }
            ParamKind::Scalar(t) => {
                let a = format!("static_cast<uint64_t>(args[{}])", n + sj);
                sj += 1;
                call.push(match t {
                    ParamType::Bool => format!("({a} != 0)"),
                    ParamType::I64 | ParamType::U64 => format!("static_cast<int64_t>({a})"),
                    ParamType::F32 | ParamType::F64 => format!("pto_wsp_rt::f32_param({a})"),
                });
            }
        }
    }
    let _ = writeln!(out, "    pto_wsp_kernels::{name}({});", call.join(", "));
    out.push_str("    pipe_sync();\n}\n");
    out
}

/// What the runner is written from.
struct RunnerFacts<'a> {
    tensors: &'a [TensorFacts],
    parts: &'a [EmittedPart],
    messages: &'a [String],
    kernel_tasks: usize,
    barrier_tasks: usize,
    window: Option<u64>,
    platform: &'static str,
    status_slots: usize,
}

/// The runner: the tree's facts as Python literals, then the shared body.
fn runner(input: &Input<'_>, f: &RunnerFacts<'_>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "#!/usr/bin/env python3\n\"\"\"Runs the workload of {} on simpler (generated by `pto-wsp emit ascend`; do not edit).\n\n\
         Usage: python runner.py IN_DIR OUT_DIR [--platform a2a3sim|a2a3] [--pto-isa-root DIR]\n\
         (the platform defaults to {}, the one it was emitted for). Needs only numpy and an\n\
         installed simpler (scripts/prepare-simpler.sh in pto-wsp), and `g++-15` on PATH for the\n\
         simulated kernels.\n\"\"\"\n",
        input.name(),
        f.platform
    );
    out.push_str("TENSORS = [\n");
    for t in f.tensors {
        let _ = writeln!(
            out,
            "    {{\"name\": {:?}, \"shape\": [{}], \"numpy\": {:?}, \"simpler\": {:?}, \"written\": {}}},",
            t.name,
            t.shape
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            t.numpy,
            t.simpler,
            if t.written { "True" } else { "False" }
        );
    }
    out.push_str("]\nKERNELS = [\n");
    for (fid, p) in f.parts.iter().enumerate() {
        let sig: Vec<&str> = p
            .decl
            .params
            .iter()
            .zip(&p.kinds)
            .filter_map(|(prm, kind)| match (&prm.kind, kind) {
                (ParamKind::Tile { .. }, split::PartParam::Scratch { output: true, .. }) => {
                    Some("\"OUT\"")
                }
                (ParamKind::Tile { access, .. }, _) => Some(if access.writes() {
                    "\"INOUT\""
                } else {
                    "\"IN\""
                }),
                _ => None,
            })
            .collect();
        let _ = writeln!(
            out,
            "    {{\"func_id\": {fid}, \"name\": {:?}, \"file\": \"kernel_{}.cpp\", \"core\": {:?}, \"first_part\": {}, \"signature\": [{}]}},",
            p.name,
            p.name,
            p.core.runtime(),
            if p.first { "True" } else { "False" },
            sig.join(", ")
        );
    }
    out.push_str("]\nMESSAGES = [\n");
    for m in f.messages {
        let _ = writeln!(out, "    {m:?},");
    }
    let _ = writeln!(
        out,
        "]\nKERNEL_TASKS = {}\nBARRIER_TASKS = {}\nRING_TASK_WINDOW = {}\nPLATFORM = {:?}\nSTATUS_SLOTS = {}",
        f.kernel_tasks,
        f.barrier_tasks,
        f.window.map_or("None".to_string(), |w| w.to_string()),
        f.platform,
        f.status_slots
    );
    out.push_str(RUNNER_BODY);
    out
}

fn readme(
    input: &Input<'_>,
    notes: &[String],
    kernel_tasks: usize,
    barrier_tasks: usize,
    written: &[String],
    platform: &str,
) -> String {
    let mut out = format!(
        "# {} for the Ascend runtime (simpler, tensormap_and_ringbuffer)\n\n\
         Generated by `pto-wsp emit ascend`; do not edit.\n\n\
         - `orchestration.cpp`: the workload's loops and conditions as C++ (with `pto_wsp_orch.hpp`); under the bindings given at emit time it submits {kernel_tasks} kernel task(s) and {barrier_tasks} barrier task(s).\n\
         - `kernel_NAME.cpp`: the AICore entry of each kernel (`NAME.hpp`: its body in PTO-ISA, legal on a2a3: tiles placed in their buffers, pipes synchronised; a kernel using the cube and the vector core runs as parts `NAME_partI`, one task each).\n\
         - `runner.py IN_DIR OUT_DIR`: builds with simpler's compiler, runs on `{platform}` (the platform it was emitted for; `--platform` picks the other), reads `IN_DIR/NAME.npy` (missing tensors start zeroed), writes `OUT_DIR/NAME.npy` for {}; a kernel's failed check is reported with its message and the run fails.\n\n\
         ## Notes: schedule directives the runtime does not honour, kernels split into parts\n\n",
        input.name(),
        written.join(", ")
    );
    if notes.is_empty() {
        out.push_str("None.\n");
    }
    for n in notes {
        let _ = writeln!(out, "- {n}");
    }
    out
}
