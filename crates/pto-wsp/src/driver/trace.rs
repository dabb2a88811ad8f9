//! How a task is written as text, and the Chrome trace of a run: the one writer of both, for
//! `pto-wsp expand`'s task list, `pto-wsp run --trace` and Python's `Program.write_trace`.
//!
//! Why: a task shown in a trace should read exactly as the task list shows it (kernel, executor,
//! scalar arguments by name, regions as `Q[0, 5 +: 4, 0 +: 128]`), whichever front end wrote it.
//!
//! Promise: the text depends only on the module and the expanded task; a name the module does not
//! have is shown as `#index`, never a panic.

use crate::LoweredPlan;
use pto_wsp_cpu::RunStats;
use pto_wsp_ir::{Bindings, ExpandOptions, ExpandedRegion, ExpandedTask, Module, ParamKind};

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

/// The run's Chrome trace: each task's event named by its kernel, with its expander index,
/// executor and arguments (scalars and regions, as `pto-wsp expand` lists them) in `args`, on
/// its worker's track. (Pipeline processes' tasks are named by their index only.)
pub fn trace_json(plan: &LoweredPlan, bindings: &Bindings, stats: &RunStats) -> String {
    let mut labels = std::collections::HashMap::new();
    let module = plan.module();
    if !plan.resolved().csp {
        let traced: std::collections::HashSet<u32> = stats.spans.iter().map(|s| s.task).collect();
        // The tasks are expanded again (only the traced ones are kept): the run itself keeps
        // no per-task text.
        let _ = pto_wsp_ir::expand_each(
            plan.resolved(),
            bindings,
            &ExpandOptions::default(),
            |i, t| {
                if traced.contains(&i) {
                    labels.insert(i, task_label(module, t));
                }
            },
        );
    }
    stats.chrome_trace(|t| match labels.get(&t) {
        Some((kernel, exec, args)) => (
            kernel.clone(),
            vec![("executor", exec.clone()), ("args", args.clone())],
        ),
        None if t == u32::MAX => ("barrier".to_string(), Vec::new()),
        None => (format!("task {t}"), Vec::new()),
    })
}
