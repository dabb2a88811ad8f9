//! `pto-wsp emit ascend`: a workload as a tree for the Ascend task runtime (simpler's
//! `tensormap_and_ringbuffer`), runnable on its `a2a3sim` simulator.
//!
//! Why: the production target of a workload is the Ascend NPU, where an AICPU thread runs an
//! orchestration function submitting tasks to AICore kernels and the runtime infers their
//! dependencies (TensorMap). This module writes that program from our workload, so the same
//! `.wsp` file runs on our CPU simulation and on the real runtime, and the two can be compared.
//!
//! Promises:
//! - Every construct the back end cannot express (a CSP pipeline, a task of a kernel without a
//!   body, a tile instruction PTO-ISA lacks, an element type or size over the runtime's limits)
//!   is a [`CliError`] naming it at its `file:line:column`, returned before anything is written.
//! - The orchestration submits exactly the reference expander's tasks under the bindings, in
//!   program order, each with views of the module tensors (`in` → `add_input`, `out` / `inout`
//!   → `add_inout`, so the runtime looks up read-after-write and write-after-write itself), plus
//!   one dummy task per barrier of our feed (`for_each`, `sequential`). Every edge of our
//!   builder (overlap inference, barriers) that the runtime's TensorMap would not infer — a
//!   write-after-read, an edge to or from a barrier — is declared with an explicit dependency,
//!   so the runtime's graph orders every pair ours orders.
//! - Kernel files reuse `emit kernels`' body emission ([`crate::emit::emit_kernel`]); each is
//!   wrapped as a `kernel_entry(__gm__ int64_t *args)` reading its regions from the runtime's
//!   tensor descriptors.
//! - Every schedule directive the runtime cannot honour is listed (with its location) in the
//!   generated `README.md` and in [`AscendTree::notes`], never silently dropped.
//!
//! Limit: the orchestration replays the expanded task list under the bindings given at emit
//! time (a table and one loop), so re-binding a symbol needs a re-emit; the workload's loops are
//! not regenerated as C++ loops.

use crate::emit::{EmitError, emit_kernel};
use crate::{CliError, Loaded};
use pto_wsp::graph::ExecDomain;
use pto_wsp::graph::builder::GraphBuilder;
use pto_wsp::graph::feed::{BARRIER_KERNEL, NoHooks, feed};
use pto_wsp::graph::types::access_from_code;
use pto_wsp::ir::kernel_body::{KStmt, KStmtKind, TileKind};
use pto_wsp::ir::schedule::{
    DepsMode, Dispatch, PoolsPolicy, ReadyPolicy, ScheduleItemKind, StartPolicy, TaskGraphItem,
    Timing, TracePolicy, WindowMode,
};
use pto_wsp::ir::{
    Access, Bindings, DType, ExecPool, ExpandOptions, KernelDecl, Loc, ParamKind, ParamType,
};
use pto_wsp::kernels::TensorStore;
use std::fmt::Write as _;

/// The targets this back end serves: the simulator and the device.
pub const TARGETS: [&str; 2] = ["ascend_a2a3sim", "ascend_a2a3"];

/// The most tasks (kernel and barrier) an emitted orchestration lists.
pub const MAX_TASKS: usize = 1 << 16;

/// The runtime's limits (simpler `arg_direction.h`, `tensor.h`, `scheduler_context.h`).
const MAX_TASK_TENSORS: usize = 32;
const MAX_TASK_SCALARS: usize = 16;
const MAX_ORCH_TENSORS: usize = 256;
const MAX_RANK: usize = 5;
const MAX_KERNELS: usize = 1024;
/// Tasks per orchestration scope (a scope holding a whole ring window would deadlock).
const SCOPE_TASKS: usize = 1024;

const AICORE_HPP: &str = include_str!("ascend/pto_wsp_aicore.hpp");
const RUNNER_BODY: &str = include_str!("ascend/runner.py");

/// An emitted tree, in memory, with what the caller reports and tests compare.
#[derive(Debug, Clone)]
pub struct AscendTree {
    /// `(file name, contents)`.
    pub files: Vec<(String, String)>,
    /// Schedule directives the runtime cannot honour (and other notes), each with its place.
    pub notes: Vec<String>,
    /// Kernel tasks the orchestration submits.
    pub kernel_tasks: usize,
    /// Barrier (dummy) tasks it submits.
    pub barrier_tasks: usize,
    /// Our builder's edges `(pred, succ)` over the submitted tasks (kernel and barrier
    /// interleaved, in submission order).
    pub edges: Vec<(u32, u32)>,
    /// Of those, the ones declared explicitly (the rest the runtime's TensorMap infers).
    pub explicit_edges: usize,
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

/// A located refusal.
fn refuse(loaded: &Loaded, loc: Loc, message: String) -> CliError {
    CliError::plain(format!(
        "{}: the Ascend back end cannot express this: {message}",
        loaded.source.position(loc)
    ))
}

/// Emits the Ascend tree of `loaded` under `bindings` for `target` (one of [`TARGETS`]).
pub fn emit_ascend(
    loaded: &Loaded,
    bindings: &Bindings,
    target: &str,
) -> Result<AscendTree, CliError> {
    if !TARGETS.contains(&target) {
        return Err(CliError::plain(format!(
            "unknown Ascend target `{target}` (known: {})",
            TARGETS.join(", ")
        )));
    }
    let device = target == "ascend_a2a3";
    let module = &loaded.module;
    let name = &loaded.source.name;
    let entry = module.entry_name().unwrap_or("main");
    if let Some(p) = module.pipelines.iter().find(|p| p.name.name == entry) {
        return Err(refuse(
            loaded,
            p.name.loc,
            format!(
                "pipeline `{entry}` (CSP: channels, send / consume): the runtime has no channels \
                 or per-process threads"
            ),
        ));
    }
    let plan = pto_wsp::lower(module).map_err(|e| crate::exec::compile_error(loaded, &e))?;
    let config = plan.config;
    let store = TensorStore::new(module, bindings)
        .map_err(|e| CliError::plain(format!("{name}: tensor shapes: {e}")))?;
    if store.len() > MAX_ORCH_TENSORS {
        return Err(CliError::plain(format!(
            "{name}: {} tensors; the runtime passes at most {MAX_ORCH_TENSORS} to an orchestration",
            store.len()
        )));
    }

    // Our graph: the expander fed into an overlap builder (what the runtime's TensorMap does,
    // plus write-after-read), barriers for the structural order edges.
    let mut builder = GraphBuilder::new(DepsMode::Overlap);
    let summary = feed(
        module,
        bindings,
        &ExpandOptions {
            limit: Some(MAX_TASKS + 1),
            executors: None,
        },
        &mut builder,
        &mut NoHooks,
        ExecDomain::HostCpu,
    )
    .map_err(|e| CliError::plain(format!("expansion of {name} failed: {e}")))?;
    let graph = builder.finish();
    if graph.tasks.len() > MAX_TASKS || summary.expand.truncated {
        return Err(CliError::plain(format!(
            "{name}: more than {MAX_TASKS} tasks under these bindings; the emitted orchestration \
             lists its tasks and is limited to that many"
        )));
    }

    // Kernels: every kernel a task runs, in module order, must have a body.
    let mut used = vec![false; module.kernels.len()];
    for t in &graph.tasks {
        if t.kernel != BARRIER_KERNEL {
            used[t.kernel as usize] = true;
        }
    }
    let mut func_id = vec![u32::MAX; module.kernels.len()];
    let mut kernels = Vec::new();
    let mut notes = Vec::new();
    for (ki, k) in module.kernels.iter().enumerate().filter(|(i, _)| used[*i]) {
        if k.body.is_none() {
            return Err(refuse(
                loaded,
                k.name.loc,
                format!(
                    "kernel `{}` has no body (a built-in or external kernel); AICore kernels are \
                     written in tile instructions",
                    k.name.name
                ),
            ));
        }
        let (core, mixed) = core_of(k);
        if mixed {
            let what = format!(
                "kernel `{}` ({}) uses cube (left / right / acc / mat) and vector tiles: one \
                 AICore runs one of them",
                k.name.name,
                loaded.source.position(k.name.loc)
            );
            if device {
                return Err(refuse(
                    loaded,
                    k.name.loc,
                    format!("{what}; split it into a cube and a vector kernel"),
                ));
            }
            notes.push(format!(
                "{what}; a2a3sim runs it on one simulated {core} core, a device could not"
            ));
        }
        let tiles = k
            .params
            .iter()
            .filter(|p| matches!(p.kind, ParamKind::Tile { .. }))
            .count();
        let scalars = k.params.len() - tiles;
        if tiles > MAX_TASK_TENSORS || scalars > MAX_TASK_SCALARS {
            return Err(refuse(
                loaded,
                k.name.loc,
                format!(
                    "kernel `{}` takes {tiles} regions and {scalars} scalars; a runtime task takes \
                     at most {MAX_TASK_TENSORS} and {MAX_TASK_SCALARS}",
                    k.name.name
                ),
            ));
        }
        let header = emit_kernel(k, &loaded.source)
            .map_err(|e: EmitError| CliError::diagnostic(&loaded.source, &e))?;
        func_id[ki] = kernels.len() as u32;
        kernels.push((ki, core, header));
    }
    if kernels.len() > MAX_KERNELS {
        return Err(CliError::plain(format!(
            "{name}: {} kernels; the runtime dispatches at most {MAX_KERNELS}",
            kernels.len()
        )));
    }

    // Tensors.
    let mut facts = Vec::new();
    for (ti, info) in store.infos().iter().enumerate() {
        let decl = &module.tensors[ti];
        let (numpy, simpler) = dtype_names(info.dtype).ok_or_else(|| {
            refuse(
                loaded,
                decl.name.loc,
                format!(
                    "tensor `{}` is bf16: PTO-ISA's CPU simulation makes bf16 an f16 with this \
                     g++ (no <stdfloat>), so its numbers would be wrong",
                    info.name
                ),
            )
        })?;
        if info.shape.len() > MAX_RANK || info.shape.is_empty() {
            return Err(refuse(
                loaded,
                decl.name.loc,
                format!(
                    "tensor `{}` has rank {}; runtime tensors have rank 1 to {MAX_RANK}",
                    info.name,
                    info.shape.len()
                ),
            ));
        }
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

    // Edges: those the runtime infers (the successor reads or writes a box the predecessor
    // writes; both are kernel tasks), the rest declared.
    let mut preds = vec![Vec::new(); graph.tasks.len()];
    for (p, s) in graph.edges() {
        preds[s.0 as usize].push(p.0);
    }
    let writes_overlap = |p: u32, s: u32| {
        let (tp, ts) = (&graph.tasks[p as usize], &graph.tasks[s as usize]);
        if tp.kernel == BARRIER_KERNEL || ts.kernel == BARRIER_KERNEL {
            return false;
        }
        graph.io[tp.io_range()]
            .iter()
            .filter(|a| access_from_code(a.access).writes())
            .any(|a| {
                graph.io[ts.io_range()]
                    .iter()
                    .any(|b| boxes_meet(&a.region, &b.region))
            })
    };
    let mut edges = Vec::new();
    let mut explicit: Vec<Vec<u32>> = vec![Vec::new(); graph.tasks.len()];
    for (s, ps) in preds.iter().enumerate() {
        for &p in ps {
            edges.push((p, s as u32));
            if !writes_overlap(p, s as u32) {
                explicit[s].push(p);
            }
        }
    }
    edges.sort_unstable();
    let explicit_edges = explicit.iter().map(Vec::len).sum();

    notes.extend(schedule_notes(loaded));
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
            crate::emit::RT_HPP.to_string(),
        ),
        ("pto_wsp_aicore.hpp".to_string(), AICORE_HPP.to_string()),
    ];
    for (ki, _, header) in &kernels {
        let k = &module.kernels[*ki];
        files.push((format!("{}.hpp", k.name.name), header.clone()));
        files.push((
            format!("kernel_{}.cpp", k.name.name),
            kernel_wrapper(loaded, k),
        ));
    }
    let orch = orchestration(loaded, &graph, &facts, &func_id, &kernels, &explicit)?;
    files.push(("orchestration.cpp".to_string(), orch));
    let window = config
        .task_window
        .map(|(n, _)| (n + 1).next_power_of_two().max(4));
    files.push((
        "runner.py".to_string(),
        runner(
            loaded,
            &facts,
            &kernels,
            kernel_tasks,
            barrier_tasks,
            window,
        ),
    ));
    let written: Vec<String> = facts
        .iter()
        .filter(|t| t.written)
        .map(|t| t.name.clone())
        .collect();
    files.push((
        "README.md".to_string(),
        readme(loaded, &notes, kernel_tasks, barrier_tasks, &written),
    ));
    Ok(AscendTree {
        files,
        notes,
        kernel_tasks,
        barrier_tasks,
        edges,
        explicit_edges,
        barriers,
        written,
    })
}

/// Whether two regions of the same tensor intersect.
fn boxes_meet(a: &pto_wsp::graph::types::Region, b: &pto_wsp::graph::types::Region) -> bool {
    a.tensor == b.tensor
        && (0..a.rank.min(b.rank) as usize).all(|d| {
            let (a0, a1) = (a.start[d], a.start[d] + a.size[d]);
            let (b0, b1) = (b.start[d], b.start[d] + b.size[d]);
            a0 < b1 && b0 < a1
        })
}

/// What the runtime does with each schedule directive it cannot honour as written.
fn schedule_notes(loaded: &Loaded) -> Vec<String> {
    let Some(schedule) = &loaded.module.schedule else {
        return Vec::new();
    };
    let mut notes = Vec::new();
    let mut note = |loc: Loc, what: String| {
        notes.push(format!("{}: {what}", loaded.source.position(loc)));
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
fn kernel_wrapper(loaded: &Loaded, k: &KernelDecl) -> String {
    let name = &k.name.name;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "// Generated by `pto-wsp emit ascend`: AICore entry of kernel `{name}` ({}). Do not edit.\n\
         #include <cstdint>\n#include <exception>\n\n\
         #include \"{name}.hpp\"\n#include \"pto_wsp_aicore.hpp\"\n#include \"pipe_sync.h\"\n\n\
         #ifndef __aicore__\n#define __aicore__ [aicore]\n#endif\n",
        loaded.source.position(k.name.loc)
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

/// The orchestration: the task table and the loop that submits it.
fn orchestration(
    loaded: &Loaded,
    graph: &pto_wsp::graph::storage::TaskGraphStorage,
    facts: &[TensorFacts],
    func_id: &[u32],
    kernels: &[(usize, &'static str, String)],
    explicit: &[Vec<u32>],
) -> Result<String, CliError> {
    let n = graph.tasks.len();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "// Generated by `pto-wsp emit ascend` from {}. Do not edit.\n\
         // The orchestration of simpler's tensormap_and_ringbuffer runtime: the workload's {n} task(s)\n\
         // (kernel and barrier tasks, in program order, under the bindings given at emit time) as a\n\
         // table, submitted by one loop. Regions are views of the module tensors (in: add_input;\n\
         // out / inout: add_inout); dependencies the runtime does not infer (write-after-read,\n\
         // barriers) are declared explicitly.",
        loaded.source.name
    );
    out.push_str("#include <cstdint>\n#include <vector>\n\n#include \"pto_orchestration_api.h\"\n\nnamespace {\n\n");
    let _ = writeln!(
        out,
        "constexpr uint32_t kTensors = {};\nconstexpr uint32_t kTasks = {n};\nconstexpr uint32_t kScopeTasks = {SCOPE_TASKS};\n",
        facts.len()
    );
    let _ = writeln!(
        out,
        "// Tensors: {}",
        facts
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    // Per task: function id (-1: barrier), core (1: AIC), ranges into the flat tables.
    let mut func = Vec::with_capacity(n);
    let mut cube = Vec::with_capacity(n);
    let (mut arg_begin, mut scalar_begin, mut dep_begin) = (vec![0u32], vec![0u32], vec![0u32]);
    let mut args = String::new();
    let mut scalars = Vec::new();
    let mut deps = Vec::new();
    let mut nargs = 0u32;
    for (i, t) in graph.tasks.iter().enumerate() {
        if t.kernel == BARRIER_KERNEL {
            func.push("-1".to_string());
            cube.push("0");
        } else {
            let f = func_id[t.kernel as usize];
            func.push(f.to_string());
            let core = kernels[f as usize].1;
            cube.push(if core == "aic" { "1" } else { "0" });
            for io in &graph.io[t.io_range()] {
                let r = &io.region;
                let mut off = [0u32; MAX_RANK];
                let mut sh = [1u32; MAX_RANK];
                off[..r.rank as usize].copy_from_slice(&r.start[..r.rank as usize]);
                sh[..r.rank as usize].copy_from_slice(&r.size[..r.rank as usize]);
                let dir = u8::from(access_from_code(io.access).writes());
                let _ = writeln!(
                    args,
                    "    {{{}, {dir}, {{{}}}, {{{}}}}},",
                    r.tensor,
                    off.iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(", "),
                    sh.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
                );
                nargs += 1;
            }
            scalars.extend(graph.params_of(t.id).iter().copied());
        }
        deps.extend(explicit[i].iter().copied());
        arg_begin.push(nargs);
        scalar_begin.push(scalars.len() as u32);
        dep_begin.push(deps.len() as u32);
    }
    out.push_str(
        "struct RegionArg {\n    uint32_t tensor;\n    uint32_t writes; // 0: add_input, 1: add_inout\n    uint32_t off[5];\n    uint32_t shape[5];\n};\n\n",
    );
    let list = |v: &[String]| -> String {
        let mut s = String::new();
        for (i, x) in v.iter().enumerate() {
            s.push_str(x);
            s.push(',');
            s.push(if i % 16 == 15 { '\n' } else { ' ' });
        }
        s
    };
    let strs = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>();
    let _ = writeln!(out, "const int32_t kFunc[kTasks] = {{\n{}}};", list(&func));
    let _ = writeln!(
        out,
        "const uint8_t kCube[kTasks] = {{\n{}}};",
        list(&cube.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    );
    let _ = writeln!(
        out,
        "const uint32_t kArgBegin[kTasks + 1] = {{\n{}}};",
        list(&strs(&arg_begin))
    );
    let _ = writeln!(
        out,
        "const RegionArg kArgs[{}] = {{\n{args}}};",
        nargs.max(1)
    );
    let _ = writeln!(
        out,
        "const uint32_t kScalarBegin[kTasks + 1] = {{\n{}}};",
        list(&strs(&scalar_begin))
    );
    let _ = writeln!(
        out,
        "const uint64_t kScalars[{}] = {{\n{}}};",
        scalars.len().max(1),
        list(
            &scalars
                .iter()
                .map(|s| format!("UINT64_C({s:#x})"))
                .collect::<Vec<_>>()
        )
    );
    let _ = writeln!(
        out,
        "const uint32_t kDepBegin[kTasks + 1] = {{\n{}}};",
        list(&strs(&dep_begin))
    );
    let _ = writeln!(
        out,
        "const uint32_t kDeps[{}] = {{\n{}}};",
        deps.len().max(1),
        list(&strs(&deps))
    );
    out.push_str(ORCH_BODY);
    Ok(out)
}

/// The loop every emitted orchestration shares.
const ORCH_BODY: &str = r#"
} // namespace

extern "C" {

__attribute__((visibility("default"))) PTO2OrchestrationConfig aicpu_orchestration_config(const ChipTaskArgs &orch_args)
{
    (void)orch_args;
    PTO2OrchestrationConfig c{};
    c.expected_arg_count = kTensors;
    return c;
}

__attribute__((visibility("default"))) void aicpu_orchestration_entry(const ChipTaskArgs &orch_args)
{
    std::vector<const ChipTensor *> ext(kTensors);
    for (uint32_t t = 0; t < kTensors; ++t) {
        ext[t] = &orch_args.tensor(t).ref();
    }
    std::vector<PTO2TaskId> ids(kTasks);
    std::vector<PTO2TaskId> deps;
    ChipTensor views[32];
    for (uint32_t first = 0; first < kTasks; first += kScopeTasks) {
        PTO2_SCOPE() {
            const uint32_t last = first + kScopeTasks < kTasks ? first + kScopeTasks : kTasks;
            for (uint32_t i = first; i < last; ++i) {
                CoreTaskArgs args;
                for (uint32_t a = kArgBegin[i]; a < kArgBegin[i + 1]; ++a) {
                    const RegionArg &g = kArgs[a];
                    views[a - kArgBegin[i]] = ext[g.tensor]->view(g.shape, g.off);
                }
                for (uint32_t a = kArgBegin[i]; a < kArgBegin[i + 1]; ++a) {
                    ChipTensor &v = views[a - kArgBegin[i]];
                    if (kArgs[a].writes) {
                        args.add_inout(v);
                    } else {
                        args.add_input(v);
                    }
                }
                for (uint32_t s = kScalarBegin[i]; s < kScalarBegin[i + 1]; ++s) {
                    args.add_scalar(kScalars[s]);
                }
                deps.clear();
                for (uint32_t d = kDepBegin[i]; d < kDepBegin[i + 1]; ++d) {
                    deps.push_back(ids[kDeps[d]]);
                }
                if (!deps.empty()) {
                    args.set_dependencies(deps.data(), static_cast<uint32_t>(deps.size()));
                }
                if (kFunc[i] < 0) {
                    ids[i] = rt_submit_dummy_task(args).task_id();
                } else if (kCube[i]) {
                    ids[i] = rt_submit_aic_task(kFunc[i], args).task_id();
                } else {
                    ids[i] = rt_submit_aiv_task(kFunc[i], args).task_id();
                }
            }
        }
    }
}

} // extern "C"
"#;

/// The runner: the tree's facts as Python literals, then the shared body.
fn runner(
    loaded: &Loaded,
    facts: &[TensorFacts],
    kernels: &[(usize, &'static str, String)],
    kernel_tasks: usize,
    barrier_tasks: usize,
    window: Option<u64>,
) -> String {
    let module = &loaded.module;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "#!/usr/bin/env python3\n\"\"\"Runs the workload of {} on simpler (generated by `pto-wsp emit ascend`; do not edit).\n\n\
         Usage: python runner.py IN_DIR OUT_DIR [--platform a2a3sim|a2a3] [--pto-isa-root DIR]\n\
         Needs only numpy and an installed simpler (scripts/prepare-simpler.sh in pto-wsp), and\n\
         `g++-15` on PATH for the simulated kernels.\n\"\"\"\n",
        loaded.source.name
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
    loaded: &Loaded,
    notes: &[String],
    kernel_tasks: usize,
    barrier_tasks: usize,
    written: &[String],
) -> String {
    let mut out = format!(
        "# {} for the Ascend runtime (simpler, tensormap_and_ringbuffer)\n\n\
         Generated by `pto-wsp emit ascend`; do not edit.\n\n\
         - `orchestration.cpp`: {kernel_tasks} kernel task(s) and {barrier_tasks} barrier task(s), in program order, under the bindings given at emit time.\n\
         - `kernel_NAME.cpp`: the AICore entry of each kernel (`NAME.hpp`: its body in PTO-ISA).\n\
         - `runner.py IN_DIR OUT_DIR`: builds with simpler's compiler, runs on `a2a3sim` (or `--platform a2a3`), reads `IN_DIR/NAME.npy` (missing tensors start zeroed), writes `OUT_DIR/NAME.npy` for {}.\n\n\
         ## Schedule directives the runtime does not honour\n\n",
        loaded.source.name,
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

/// What `pto-wsp emit ascend` prints after writing `tree` to `dir`.
pub fn summary(tree: &AscendTree, dir: &std::path::Path) -> String {
    let mut s = format!(
        "emitted an Ascend workload ({} kernel task(s), {} barrier task(s), {} edge(s) of which {} declared explicitly) to {}\n\
         run: python {}/runner.py IN_DIR OUT_DIR (writes {})\n",
        tree.kernel_tasks,
        tree.barrier_tasks,
        tree.edges.len(),
        tree.explicit_edges,
        dir.display(),
        dir.display(),
        tree.written.join(", ")
    );
    for n in &tree.notes {
        let _ = writeln!(s, "note: {n}");
    }
    s
}
