//! How a task is written as text, and the Chrome trace of a run (the wall clock and, when the
//! run was modelled on a machine, the device timeline model): the one writer of both, for
//! `pto-wsp expand`'s task list, `pto-wsp run --trace` and Python's `Program.write_trace`.
//!
//! Why: a task shown in a trace should read exactly as the task list shows it (kernel, executor,
//! scalar arguments by name, regions as `Q[0, 5 +: 4, 0 +: 128]`), whichever front end wrote it.
//!
//! Promise: the text depends only on the module and the expanded task; a name the module does not
//! have is shown as `#index`, never a panic.

use super::chrome::{Trace, us_of_ns, us_of_ps};
use crate::LoweredPlan;
use pto_wsp_cpu::{DeviceRun, RunStats};
use pto_wsp_ir::{Bindings, ExpandOptions, ExpandedRegion, ExpandedTask, Module, ParamKind};
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};

/// The name of kernel `index` (or `#index` if the module has no such kernel).
pub fn kernel_name(module: &Module, index: u32) -> String {
    module
        .kernels
        .get(index as usize)
        .map_or_else(|| format!("#{index}"), |k| k.name.name.clone())
}

/// `Q[0, 5 +: 4, 0 +: 128]`: a region with bare indices for size-1 dimensions.
pub fn region_text(module: &Module, region: &ExpandedRegion) -> String {
    let tensor = module
        .tensors
        .get(region.tensor as usize)
        .map_or_else(|| format!("#{}", region.tensor), |t| t.name.name.clone());
    let dims: Vec<String> = region
        .start
        .iter()
        .zip(&region.size)
        .map(|(s, n)| {
            if *n == 1 {
                s.to_string()
            } else {
                format!("{s} +: {n}")
            }
        })
        .collect();
    format!("{tensor}[{}]", dims.join(", "))
}

/// The columns of one task line of `pto-wsp expand`: index, kernel, pool, executor, stream,
/// arguments.
pub fn task_cells(module: &Module, index: usize, task: &ExpandedTask) -> [String; 6] {
    let mut kernel = kernel_name(module, task.kernel);
    if task.declared != task.kernel {
        kernel = format!("{kernel} ({})", kernel_name(module, task.declared));
    }
    let exec = match task.target {
        Some(t) => format!("exec {t}"),
        None => "exec -".to_string(),
    };
    let mut args: Vec<String> = Vec::new();
    let scalar_names: Vec<&str> = module
        .kernels
        .get(task.declared as usize)
        .map(|k| {
            k.params
                .iter()
                .filter(|p| matches!(p.kind, ParamKind::Scalar(_)))
                .map(|p| p.name.as_str())
                .collect()
        })
        .unwrap_or_default();
    for (i, v) in task.params.iter().enumerate() {
        match scalar_names.get(i) {
            Some(name) => args.push(format!("{name}={v}")),
            None => args.push(v.to_string()),
        }
    }
    for r in &task.regions {
        args.push(format!("{} {}", r.access, region_text(module, r)));
    }
    [
        format!("#{index}"),
        kernel,
        format!("@{}", task.pool),
        exec,
        format!("stream {}", task.stream),
        args.join(", "),
    ]
}

/// A task's kernel (with the declared kernel when a tier chose another), executor and
/// arguments, as the task list shows them (`attn_decode_chunk`, `exec 3`,
/// `start=0, end=512, in Q[0, 0 +: 4, 0 +: 128], ...`).
pub fn task_label(module: &Module, task: &ExpandedTask) -> (String, String, String) {
    let [_, kernel, _, exec, _, args] = task_cells(module, 0, task);
    (kernel, exec, args)
}

/// What a trace event or a timeline's tooltip says about one task: its kernel, executor,
/// arguments (scalars and regions, as the task list shows them) and regions alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskText {
    /// The kernel that ran (with the declared one when a tier chose another).
    pub kernel: String,
    /// `exec 3` or `exec -`.
    pub exec: String,
    /// Scalars by name, then regions.
    pub args: String,
    /// Each region with its access: `in Q[0, 5 +: 4, 0 +: 128]`.
    pub regions: Vec<String>,
}

type Label = TaskText;

/// The texts of the tasks a run's trace or timeline shows (the wall clock's spans and every
/// modelled task), by expander index: the tasks are expanded again (only those shown are
/// kept), since the run itself keeps no per-task text. Empty for a pipeline.
pub fn task_texts(
    plan: &LoweredPlan,
    bindings: &Bindings,
    stats: &RunStats,
) -> HashMap<u32, TaskText> {
    labels(plan, bindings, stats)
}

fn labels(plan: &LoweredPlan, bindings: &Bindings, stats: &RunStats) -> HashMap<u32, Label> {
    let mut labels = HashMap::new();
    let module = plan.module();
    if plan.resolved().csp {
        return labels;
    }
    let mut shown: HashSet<u32> = stats.spans.iter().map(|s| s.task).collect();
    for d in &stats.device {
        shown.extend((0..d.task_kernel.len() as u32).map(|t| modelled_index(d, t)));
    }
    let _ = pto_wsp_ir::expand_each(
        plan.resolved(),
        bindings,
        &ExpandOptions::default(),
        |i, t| {
            if shown.contains(&i) {
                let (kernel, exec, args) = task_label(module, t);
                let regions = t
                    .regions
                    .iter()
                    .map(|r| format!("{} {}", r.access, region_text(module, r)))
                    .collect();
                labels.insert(
                    i,
                    Label {
                        kernel,
                        exec,
                        args,
                        regions,
                    },
                );
            }
        },
    );
    labels
}

/// The expander index of task `t` of a modelled run (`u32::MAX` for a barrier).
fn modelled_index(d: &DeviceRun, t: u32) -> u32 {
    d.task_index.get(t as usize).copied().unwrap_or(t)
}

/// The kernel of task `t` of a modelled run, as the task list names it.
fn modelled_kernel(d: &DeviceRun, labels: &HashMap<u32, Label>, t: u32) -> String {
    let index = modelled_index(d, t);
    match labels.get(&index) {
        Some(l) => l.kernel.clone(),
        None if index == u32::MAX => "barrier".to_string(),
        None => d
            .task_kernel
            .get(t as usize)
            .and_then(|&k| d.kernel_names.get(k as usize))
            .cloned()
            .unwrap_or_else(|| format!("task {index}")),
    }
}

/// A task event's name and `args`: `task` (its expander index), then what `labels` knows.
fn task_args(labels: &HashMap<u32, Label>, index: u32) -> (String, Map<String, Value>) {
    let mut args = Map::new();
    args.insert("task".into(), Value::from(index));
    let name = match labels.get(&index) {
        Some(l) => {
            args.insert("executor".into(), Value::from(l.exec.clone()));
            args.insert("args".into(), Value::from(l.args.clone()));
            args.insert("regions".into(), Value::from(l.regions.clone()));
            l.kernel.clone()
        }
        None if index == u32::MAX => "barrier".to_string(),
        None => format!("task {index}"),
    };
    (name, args)
}

/// The run's Chrome trace (Perfetto, `chrome://tracing`; times in microseconds from the run's
/// start).
///
/// Process 1 is the wall clock: one track per worker (`worker N`), one event per task named by
/// its kernel, with its expander index (`task`), executor, arguments (`args`: scalars and
/// regions, as `pto-wsp expand` lists them) and `regions` in its `args`. When the run was
/// modelled on a machine (`trace cycles device(NAME)`, `--machine`), each modelled run follows
/// as its own process (device generation, then host generation): a track for the orchestrator
/// (`generate` events), the host's generation, upload and launch (host generation), each
/// scheduler thread (`dispatch` and `complete` events) and each core by kind (`AIC 0`, ...,
/// `AIV 0`, ...), where every task is one event named by its kernel with the same `args` and
/// its `core`. Task events are in category `task`, barrier tasks' (wall clock only: they run
/// on no core) in `barrier`, control work in `control`. (Pipeline
/// processes' tasks are named by their index only.)
pub fn trace_json(plan: &LoweredPlan, bindings: &Bindings, stats: &RunStats) -> String {
    let labels = labels(plan, bindings, stats);
    let mut trace = Trace::new();
    wall(&mut trace, stats, &labels);
    for (k, d) in stats.device.iter().enumerate() {
        modelled(&mut trace, 2 + k as u32, d, &labels);
    }
    trace.finish()
}

/// Process 1: the wall-clock spans, one track per worker.
fn wall(trace: &mut Trace, stats: &RunStats, labels: &HashMap<u32, Label>) {
    let workers = stats.per_worker.len().max(
        stats
            .spans
            .iter()
            .map(|s| s.worker as usize + 1)
            .max()
            .unwrap_or(0),
    );
    trace.process(1, &format!("pto-wsp run: wall clock, {workers} worker(s)"));
    for w in 0..workers as u32 {
        trace.track(1, w, &format!("worker {w}"));
    }
    for s in &stats.spans {
        let (name, args) = task_args(labels, s.task);
        let cat = if s.task == u32::MAX {
            "barrier"
        } else {
            "task"
        };
        trace.complete(
            (1, s.worker),
            &name,
            cat,
            us_of_ns(s.start_ns),
            us_of_ns(s.end_ns.saturating_sub(s.start_ns)),
            &args,
        );
    }
}

/// Process `pid`: one modelled run, its control threads then its cores by kind.
fn modelled(trace: &mut Trace, pid: u32, d: &DeviceRun, labels: &HashMap<u32, Label>) {
    let generation = if d.host_generation { "host" } else { "device" };
    trace.process(
        pid,
        &format!(
            "model of {} ({generation} generation): makespan {} us",
            d.machine,
            us_of_ps(d.makespan_ps)
        ),
    );
    let schedulers = modelled_control(trace, pid, d, labels);
    modelled_cores(trace, pid, d, labels, 2 + schedulers);
}

/// One control interval of a modelled run on track `(pid, tid)`, with its task's index and
/// kernel.
fn control_event(
    trace: &mut Trace,
    at: (u32, u32),
    i: &pto_wsp_cpu::sim::Interval,
    d: &DeviceRun,
    labels: &HashMap<u32, Label>,
) {
    let mut args = Map::new();
    args.insert("task".into(), Value::from(modelled_index(d, i.task)));
    args.insert(
        "kernel".into(),
        Value::from(modelled_kernel(d, labels, i.task)),
    );
    let (a, b) = (i.start + d.prefix_ps, i.end + d.prefix_ps);
    trace.complete(
        at,
        i.work.name(),
        "control",
        us_of_ps(a),
        us_of_ps(b - a),
        &args,
    );
}

/// The control tracks of a modelled run: the orchestrator (track 0), the host's prefix
/// (track 1), then each scheduler thread (tracks 2 …); returns the number of schedulers.
fn modelled_control(
    trace: &mut Trace,
    pid: u32,
    d: &DeviceRun,
    labels: &HashMap<u32, Label>,
) -> u32 {
    let r = &d.report;
    if d.orchestrators > 0 {
        let name = if d.orchestrators > 1 {
            format!("orchestrator ({} threads as one)", d.orchestrators)
        } else {
            "orchestrator".to_string()
        };
        trace.track(pid, 0, &name);
        for i in &r.generation {
            control_event(trace, (pid, 0), i, d, labels);
        }
    }
    if d.prefix_ps > 0 {
        trace.track(pid, 1, "host");
        trace.complete(
            (pid, 1),
            "host generation, upload and launch",
            "control",
            0.0,
            us_of_ps(d.prefix_ps),
            &Map::new(),
        );
    }
    let schedulers = d.schedulers.max(r.scheduling.len() as u32);
    for s in 0..schedulers {
        trace.track(pid, 2 + s, &format!("scheduler {s}"));
    }
    for (s, intervals) in r.scheduling.iter().enumerate() {
        for i in intervals {
            control_event(trace, (pid, 2 + s as u32), i, d, labels);
        }
    }
    schedulers
}

/// The core tracks of a modelled run from track `first_core`: kind by kind (as the machine
/// lists them), each numbered within its kind, every task one event.
fn modelled_cores(
    trace: &mut Trace,
    pid: u32,
    d: &DeviceRun,
    labels: &HashMap<u32, Label>,
    first_core: u32,
) {
    let (r, shift) = (&d.report, d.prefix_ps);
    let mut tid_of = HashMap::new();
    let mut core_name = HashMap::new();
    let mut tid = first_core;
    for (kind, first, count, _) in &d.kinds {
        for j in 0..*count {
            let name = format!("{kind} {j}");
            trace.track(pid, tid, &name);
            tid_of.insert(first + j, tid);
            core_name.insert(first + j, name);
            tid += 1;
        }
    }
    for (t, &e) in r.executor.iter().enumerate() {
        if d.task_kernel.get(t).is_none_or(|&k| k == u32::MAX) {
            continue; // A barrier runs on no core.
        }
        let (Some(&tid), Some(&start), Some(&end)) =
            (tid_of.get(&e), d.stats.starts.get(t), r.ends.get(t))
        else {
            continue;
        };
        let index = modelled_index(d, t as u32);
        let (_, mut args) = task_args(labels, index);
        let name = modelled_kernel(d, labels, t as u32);
        args.insert("core".into(), Value::from(core_name[&e].clone()));
        let (a, b) = (start + shift, end + shift);
        trace.complete(
            (pid, tid),
            &name,
            "task",
            us_of_ps(a),
            us_of_ps(b - a),
            &args,
        );
    }
}
