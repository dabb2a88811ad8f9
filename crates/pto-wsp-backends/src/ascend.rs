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

mod orch;

use crate::ptoisa::{emit_kernel, tensor_store};
use crate::{EmitError, Files, Input};
use pto_wsp_graph::ExecDomain;
use pto_wsp_graph::builder::GraphBuilder;
use pto_wsp_graph::feed::{BARRIER_KERNEL, NoHooks, feed};
use pto_wsp_graph::types::access_from_code;
use pto_wsp_ir::kernel_body::{KStmt, KStmtKind, TileKind};
use pto_wsp_ir::resolve::{Resolved, Unsupported};
use pto_wsp_ir::schedule::{
    DepsMode, Dispatch, PoolsPolicy, ReadyPolicy, ScheduleItemKind, StartPolicy, TaskGraphItem,
    Timing, TracePolicy, WindowMode,
};
use pto_wsp_ir::{Access, DType, ExecPool, ExpandOptions, KernelDecl, Loc, ParamKind, ParamType};
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

const AICORE_HPP: &str = include_str!("ascend/pto_wsp_aicore.hpp");
const ORCH_HPP: &str = include_str!("ascend/pto_wsp_orch.hpp");
const RUNNER_BODY: &str = include_str!("ascend/runner.py");

/// An emitted tree, in memory, with what the caller reports and tests compare.
#[derive(Debug, Clone)]
pub struct AscendTree {
    /// `(file name, contents)`.
    pub files: Files,
    /// Schedule directives the runtime cannot honour (and other notes), each with its place.
    pub notes: Vec<String>,
    /// Kernel tasks the orchestration submits.
    pub kernel_tasks: usize,
    /// Barrier (dummy) tasks it submits.
    pub barrier_tasks: usize,
    /// Our builder's edges `(pred, succ)` over the submitted tasks (kernel and barrier
    /// interleaved, in submission order).
    pub edges: Vec<(u32, u32)>,
    /// Whether each submitted task is a barrier.
    pub barriers: Vec<bool>,
    /// The tensors the workload writes (the runner's outputs).
    pub written: Vec<String>,
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

/// Whether a kernel body declares cube tiles, and vector tiles.
fn tile_kinds(body: &[KStmt], cube: &mut bool, vector: &mut bool) {
    for s in body {
        match &s.kind {
            KStmtKind::Tile(t) => match t.kind {
                TileKind::Vec => *vector = true,
                _ => *cube = true,
            },
            KStmtKind::For { body, .. } => tile_kinds(body, cube, vector),
            KStmtKind::If {
                then_body,
                else_body,
                ..
            } => {
                tile_kinds(then_body, cube, vector);
                tile_kinds(else_body, cube, vector);
            }
            _ => {}
        }
    }
}

/// The core a kernel's tasks are submitted to (`aic` or `aiv`), and whether it mixes cube and
/// vector tiles (one AICore cannot run both on a device).
fn core_of(k: &KernelDecl) -> (&'static str, bool) {
    let (mut cube, mut vector) = (false, false);
    tile_kinds(k.body.as_deref().unwrap_or(&[]), &mut cube, &mut vector);
    let core = match k.pool {
        ExecPool::Cube => "aic",
        ExecPool::Vector => "aiv",
        ExecPool::Any => {
            if cube {
                "aic"
            } else {
                "aiv"
            }
        }
    };
    (core, cube && vector)
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
    if res.csp {
        let loc = module
            .pipelines
            .iter()
            .find(|p| p.name.name == res.entry)
            .map_or(Loc::NONE, |p| p.name.loc);
        return Err(no(
            format!(
                "pipeline `{}` (CSP: channels, send / consume): the runtime has no channels or \
                 per-process orchestration threads",
                res.entry
            ),
            loc,
        ));
    }
    if let Some((t, loc)) = res.computed_reads().first() {
        return Err(no(
            format!(
                "a computed read of tensor `{}` (its contents are written by the workload's own \
                 tasks); the orchestration reads bound integer tensors only",
                module.tensors[t.index()].name
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
    let module = &res.module;
    let bindings = input.bindings;
    let name = input.name();
    let config = &res.schedule.config;
    unsupported(res)?;
    let store = tensor_store(input)?;

    // Our graph: the expander fed into an overlap builder (what the runtime's TensorMap does,
    // plus write-after-read), barriers for the structural order edges.
    let mut builder = GraphBuilder::new(DepsMode::Overlap);
    let summary = feed(
        res,
        bindings,
        &ExpandOptions {
            limit: Some(MAX_TASKS + 1),
            executors: None,
        },
        &mut builder,
        &mut NoHooks,
        ExecDomain::HostCpu,
    )
    .map_err(|e| EmitError::plain(format!("expansion of {name} failed: {e}")))?;
    let graph = builder.finish();
    if graph.tasks.len() > MAX_TASKS || summary.expand.truncated {
        return Err(EmitError::plain(format!(
            "more than {MAX_TASKS} tasks under these bindings; the emitter expands the workload \
             once (to check it and count its tasks and edges) and keeps at most that many"
        )));
    }

    // Kernels: every kernel a task may run (tier variants included), in module order, must
    // have a body.
    // A kernel with tiers never runs itself: its variants do.
    let used: Vec<bool> = (0..module.kernels.len())
        .map(|k| res.kernels_used[k] && res.tiers[k].is_none())
        .collect();
    let mut func_id = vec![u32::MAX; module.kernels.len()];
    let mut kernels = Vec::new();
    let mut notes = Vec::new();
    for (ki, k) in module.kernels.iter().enumerate().filter(|(i, _)| used[*i]) {
        let (core, mixed) = core_of(k);
        if mixed {
            let what = format!(
                "kernel `{}` ({}) uses cube (left / right / acc / mat) and vector tiles: one \
                 AICore runs one of them",
                k.name.name,
                input.position(k.name.loc)
            );
            if device {
                return Err(refuse(
                    k.name.loc,
                    format!("{what}; split it into a cube and a vector kernel"),
                ));
            }
            notes.push(format!(
                "{what}; a2a3sim runs it on one simulated {core} core, a device could not"
            ));
        }
        let header = emit_kernel(k, input)?;
        func_id[ki] = kernels.len() as u32;
        kernels.push((ki, core, header));
    }
    if kernels.len() > MAX_KERNELS {
        return Err(EmitError::plain(format!(
            "{} kernels; the runtime dispatches at most {MAX_KERNELS}",
            kernels.len()
        )));
    }

    // Tensors.
    let mut facts = Vec::new();
    for info in store.infos() {
        // `unsupported` refused bf16 and ranks outside 1..=5.
        let (numpy, simpler) = dtype_names(info.dtype).unwrap_or(("float32", "FLOAT32"));
        facts.push(TensorFacts {
            name: info.name.clone(),
            shape: info.shape.clone(),
            numpy,
            simpler,
            written: false,
        });
    }
    for io in &graph.io {
        if access_from_code(io.access).writes() {
            facts[io.region.tensor as usize].written = true;
        }
    }

    // Our builder's edges, for the summary and the tests.
    let mut edges: Vec<(u32, u32)> = graph.edges().map(|(p, s)| (p.0, s.0)).collect();
    edges.sort_unstable();

    notes.extend(schedule_notes(input));
    let barriers: Vec<bool> = graph
        .tasks
        .iter()
        .map(|t| t.kernel == BARRIER_KERNEL)
        .collect();
    let barrier_tasks = barriers.iter().filter(|b| **b).count();
    let kernel_tasks = graph.tasks.len() - barrier_tasks;

    // Files.
    let mut files = vec![
        (
            "pto_wsp_rt.hpp".to_string(),
            crate::ptoisa::RT_HPP.to_string(),
        ),
        ("pto_wsp_aicore.hpp".to_string(), AICORE_HPP.to_string()),
    ];
    for (ki, _, header) in &kernels {
        let k = &module.kernels[*ki];
        files.push((format!("{}.hpp", k.name.name), header.clone()));
        files.push((
            format!("kernel_{}.cpp", k.name.name),
            kernel_wrapper(input, k),
        ));
    }
    let mut kernel_of = vec![None; module.kernels.len()];
    for (f, (ki, core, _)) in kernels.iter().enumerate() {
        kernel_of[*ki] = Some((f as u32, *core == "aic"));
    }
    let orch = orch::orchestration(&orch::OrchInput {
        input,
        shapes: store.infos().iter().map(|i| i.shape.clone()).collect(),
        kernels: kernel_of,
    });
    files.push(("orchestration.cpp".to_string(), orch));
    files.push(("pto_wsp_orch.hpp".to_string(), ORCH_HPP.to_string()));
    let window = config
        .task_window
        .map(|(n, _)| (n + 1).next_power_of_two().max(4));
    files.push((
        "runner.py".to_string(),
        runner(input, &facts, &kernels, kernel_tasks, barrier_tasks, window),
    ));
    let written: Vec<String> = facts
        .iter()
        .filter(|t| t.written)
        .map(|t| t.name.clone())
        .collect();
    files.push((
        "README.md".to_string(),
        readme(input, &notes, kernel_tasks, barrier_tasks, &written),
    ));
    Ok(AscendTree {
        files,
        notes,
        kernel_tasks,
        barrier_tasks,
        edges,
        barriers,
        written,
    })
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

/// The AICore entry of one kernel: regions from the runtime's descriptors, scalars from the
/// argument words after them, then the emitted body.
fn kernel_wrapper(input: &Input<'_>, k: &KernelDecl) -> String {
    let name = &k.name.name;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "// Generated by `pto-wsp emit ascend`: AICore entry of kernel `{name}` ({}). Do not edit.\n\
         #include <cstdint>\n#include <exception>\n\n\
         #include \"{name}.hpp\"\n#include \"pto_wsp_aicore.hpp\"\n#include \"pipe_sync.h\"\n\n\
         #ifndef __aicore__\n#define __aicore__ [aicore]\n#endif\n",
        input.position(k.name.loc)
    );
    let regions: Vec<(&str, DType, Access)> = k
        .params
        .iter()
        .filter_map(|p| match &p.kind {
            ParamKind::Tile { dtype, access, .. } => Some((p.name.name.as_str(), *dtype, *access)),
            _ => None,
        })
        .collect();
    let n = regions.len();
    out.push_str("extern \"C\" __aicore__ void kernel_entry(__gm__ int64_t *args)\n{\n    try {\n");
    let mut call = Vec::new();
    for (i, (pname, dtype, _)) in regions.iter().enumerate() {
        let e = if *dtype == DType::F16 {
            "half"
        } else {
            "float"
        };
        let _ = writeln!(
            out,
            "        pto_wsp_aicore::Region<{e}> r{i}(args[{i}]); // {pname}"
        );
        call.push(format!("r{i}.data(), r{i}.rows, r{i}.cols"));
    }
    for (j, t) in k.scalar_types().iter().enumerate() {
        let a = format!("static_cast<uint64_t>(args[{}])", n + j);
        call.push(match t {
            ParamType::Bool => format!("({a} != 0)"),
            ParamType::I64 | ParamType::U64 => format!("static_cast<int64_t>({a})"),
            ParamType::F32 | ParamType::F64 => format!("pto_wsp_rt::f32_param({a})"),
        });
    }
    let _ = writeln!(out, "        pto_wsp_kernels::{name}({});", call.join(", "));
    for (i, (_, _, access)) in regions.iter().enumerate() {
        if access.writes() {
            let _ = writeln!(out, "        r{i}.finish();");
        }
    }
    let _ = writeln!(
        out,
        "    }} catch (const std::exception &e) {{\n        pto_wsp_aicore::fail({}, e.what());\n    }}\n    pipe_sync();\n}}",
        c_str(name)
    );
    out
}

fn c_str(s: &str) -> String {
    format!("{s:?}")
}

/// The runner: the tree's facts as Python literals, then the shared body.
fn runner(
    input: &Input<'_>,
    facts: &[TensorFacts],
    kernels: &[(usize, &'static str, String)],
    kernel_tasks: usize,
    barrier_tasks: usize,
    window: Option<u64>,
) -> String {
    let module = &input.resolved.module;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "#!/usr/bin/env python3\n\"\"\"Runs the workload of {} on simpler (generated by `pto-wsp emit ascend`; do not edit).\n\n\
         Usage: python runner.py IN_DIR OUT_DIR [--platform a2a3sim|a2a3] [--pto-isa-root DIR]\n\
         Needs only numpy and an installed simpler (scripts/prepare-simpler.sh in pto-wsp), and\n\
         `g++-15` on PATH for the simulated kernels.\n\"\"\"\n",
        input.name()
    );
    out.push_str("TENSORS = [\n");
    for t in facts {
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
    for (f, (ki, core, _)) in kernels.iter().enumerate() {
        let k = &module.kernels[*ki];
        let sig: Vec<String> = k
            .params
            .iter()
            .filter_map(|p| match &p.kind {
                ParamKind::Tile { access, .. } => Some(
                    if access.writes() {
                        "\"INOUT\""
                    } else {
                        "\"IN\""
                    }
                    .to_string(),
                ),
                _ => None,
            })
            .collect();
        let _ = writeln!(
            out,
            "    {{\"func_id\": {f}, \"name\": {:?}, \"file\": \"kernel_{}.cpp\", \"core\": {core:?}, \"signature\": [{}]}},",
            k.name.name,
            k.name.name,
            sig.join(", ")
        );
    }
    let _ = writeln!(
        out,
        "]\nKERNEL_TASKS = {kernel_tasks}\nBARRIER_TASKS = {barrier_tasks}\nRING_TASK_WINDOW = {}",
        window.map_or("None".to_string(), |w| w.to_string())
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
) -> String {
    let mut out = format!(
        "# {} for the Ascend runtime (simpler, tensormap_and_ringbuffer)\n\n\
         Generated by `pto-wsp emit ascend`; do not edit.\n\n\
         - `orchestration.cpp`: the workload's loops and conditions as C++ (with `pto_wsp_orch.hpp`); under the bindings given at emit time it submits {kernel_tasks} kernel task(s) and {barrier_tasks} barrier task(s).\n\
         - `kernel_NAME.cpp`: the AICore entry of each kernel (`NAME.hpp`: its body in PTO-ISA).\n\
         - `runner.py IN_DIR OUT_DIR`: builds with simpler's compiler, runs on `a2a3sim` (or `--platform a2a3`), reads `IN_DIR/NAME.npy` (missing tensors start zeroed), writes `OUT_DIR/NAME.npy` for {}.\n\n\
         ## Schedule directives the runtime does not honour\n\n",
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
