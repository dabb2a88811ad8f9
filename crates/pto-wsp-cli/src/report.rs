//! The text `pto-wsp expand` prints: the task list and the counts.
//!
//! Why: golden tests compare this text exactly, so it lives in a library function that depends
//! only on the module, the bindings and the expansion (no timing, no paths beyond the name given).
//! Promise: the output is deterministic; at most [`ReportOptions::limit`] tasks are listed, while
//! every count covers all tasks of the expansion.

use pto_wsp::driver::trace::{kernel_name, task_cells};
use pto_wsp::ir::{Bindings, ExecPool, Expansion, Module};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// What the report includes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportOptions {
    /// How many tasks to list (0: counts only).
    pub limit: usize,
}

impl Default for ReportOptions {
    fn default() -> ReportOptions {
        ReportOptions { limit: 40 }
    }
}

/// How many array elements of a binding are shown before `...`.
const ARRAY_SHOWN: usize = 16;

/// The bindings as one line: `seq=1024, lens=[3, 1, 4]` (empty when nothing is bound).
pub fn bindings_line(bindings: &Bindings) -> String {
    let mut parts: Vec<String> = Vec::new();
    for (name, v) in &bindings.symbols {
        parts.push(format!("{name}={v}"));
    }
    for (name, v) in &bindings.slots {
        parts.push(format!("{name}={v}"));
    }
    for (name, data) in &bindings.arrays {
        let shown: Vec<String> = data.iter().take(ARRAY_SHOWN).map(i64::to_string).collect();
        let more = if data.len() > ARRAY_SHOWN {
            format!(", ... ({} elements)", data.len())
        } else {
            String::new()
        };
        parts.push(format!("{name}=[{}{more}]", shown.join(", ")));
    }
    parts.join(", ")
}

/// Appends rows as columns two spaces apart, indented; column `right` (if any) is right-aligned,
/// the others left-aligned.
fn push_table<const N: usize>(out: &mut String, rows: &[[String; N]], right: Option<usize>) {
    let mut widths = [0usize; N];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in rows {
        let mut line = String::from(" ");
        for (i, cell) in row.iter().enumerate() {
            line.push(' ');
            let pad = " ".repeat(widths[i] - cell.chars().count());
            if right == Some(i) {
                line.push_str(&pad);
                line.push_str(cell);
            } else {
                line.push_str(cell);
                if i + 1 < N {
                    line.push_str(&pad);
                }
            }
            if i + 1 < N {
                line.push(' ');
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
}

/// Appends `label: total` then one `name  count` row per entry.
fn push_counts(out: &mut String, title: &str, rows: Vec<(String, usize)>) {
    let _ = writeln!(out, "{title}");
    let table: Vec<[String; 2]> = rows
        .into_iter()
        .map(|(name, n)| [name, n.to_string()])
        .collect();
    push_table(out, &table, Some(1));
}

/// Counts of an expansion, as numbers (what the report prints).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Tasks per kernel that runs, indexed like [`Module::kernels`].
    pub per_kernel: Vec<usize>,
    /// Tasks per pool, in [`ExecPool::ALL`] order.
    pub per_pool: Vec<usize>,
    /// Tasks per executor that has any.
    pub per_executor: BTreeMap<u32, usize>,
    /// Tasks with no fixed executor (`work_steal` dispatch).
    pub unassigned: usize,
    /// Tasks per stream that has any.
    pub per_stream: BTreeMap<u32, usize>,
}

impl Counts {
    /// Counts every task of `expansion`.
    pub fn of(module: &Module, expansion: &Expansion) -> Counts {
        let mut c = Counts {
            per_kernel: vec![0; module.kernels.len()],
            per_pool: vec![0; ExecPool::ALL.len()],
            ..Counts::default()
        };
        for task in &expansion.tasks {
            if let Some(n) = c.per_kernel.get_mut(task.kernel as usize) {
                *n += 1;
            }
            if let Some(i) = ExecPool::ALL.iter().position(|p| *p == task.pool) {
                c.per_pool[i] += 1;
            }
            match task.target {
                Some(t) => *c.per_executor.entry(t).or_default() += 1,
                None => c.unassigned += 1,
            }
            *c.per_stream.entry(task.stream).or_default() += 1;
        }
        c
    }
}

/// The full report of an expansion of `module` under `bindings`.
pub fn expand_report(
    module: &Module,
    bindings: &Bindings,
    expansion: &Expansion,
    options: &ReportOptions,
) -> String {
    let mut out = String::new();
    let total = expansion.tasks.len();
    let _ = writeln!(out, "entry: {}", module.entry_name().unwrap_or("?"));
    let bound = bindings_line(bindings);
    let _ = writeln!(
        out,
        "bindings: {}",
        if bound.is_empty() { "(none)" } else { &bound }
    );
    let shown = total.min(options.limit);
    if shown > 0 && shown < total {
        let _ = writeln!(out, "tasks: {total} (first {shown} listed)");
    } else {
        let _ = writeln!(out, "tasks: {total}");
    }
    if expansion.truncated {
        let _ = writeln!(out, "note: the expansion was truncated by its task limit");
    }
    let rows: Vec<[String; 6]> = expansion.tasks[..shown]
        .iter()
        .enumerate()
        .map(|(i, t)| task_cells(module, i, t))
        .collect();
    push_table(&mut out, &rows, Some(0));
    if shown > 0 && shown < total {
        let _ = writeln!(out, "  ... {} more", total - shown);
    }

    let counts = Counts::of(module, expansion);
    let kernel_rows = counts
        .per_kernel
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(i, n)| (kernel_name(module, i as u32), *n))
        .collect();
    push_counts(&mut out, "per kernel:", kernel_rows);
    let pool_rows = ExecPool::ALL
        .iter()
        .zip(&counts.per_pool)
        .filter(|(_, n)| **n > 0)
        .map(|(p, n)| (format!("@{p}"), *n))
        .collect();
    push_counts(&mut out, "per pool:", pool_rows);
    let mut exec_rows: Vec<(String, usize)> = counts
        .per_executor
        .iter()
        .map(|(e, n)| (e.to_string(), *n))
        .collect();
    if counts.unassigned > 0 {
        exec_rows.push(("- (work_steal)".to_string(), counts.unassigned));
    }
    push_counts(
        &mut out,
        &format!(
            "per executor ({}, {} with tasks):",
            crate::count(expansion.executors as usize, "executor"),
            counts.per_executor.len()
        ),
        exec_rows,
    );
    let stream_rows = counts
        .per_stream
        .iter()
        .map(|(s, n)| (s.to_string(), *n))
        .collect();
    push_counts(
        &mut out,
        &format!(
            "per stream ({}):",
            crate::count(expansion.streams as usize, "stream")
        ),
        stream_rows,
    );
    let _ = writeln!(out, "order edges: {}", expansion.order.len());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pto_wsp::ir::{
        Access, DType, ExpandedRegion, ExpandedTask, Ident, KernelDecl, KernelParam, OrderEdge,
        ParamKind, ScalarType, TensorDecl, Value,
    };

    fn module() -> Module {
        let tile = |name: &str, access| KernelParam {
            name: Ident::new(name),
            kind: ParamKind::Tile {
                access,
                dtype: DType::F16,
                shape: vec![None],
            },
        };
        let mut m = Module::default();
        m.tensors.push(TensorDecl {
            name: Ident::new("A"),
            dtype: DType::F16,
            shape: vec![],
        });
        m.kernels.push(KernelDecl {
            name: Ident::new("k"),
            params: vec![
                tile("x", Access::In),
                KernelParam {
                    name: Ident::new("n"),
                    kind: ParamKind::Scalar(ScalarType::I64.into()),
                },
            ],
            pool: ExecPool::Vector,
            tiers: None,
            body: None,
        });
        m.kernels.push(KernelDecl {
            name: Ident::new("k_big"),
            params: vec![tile("x", Access::In)],
            pool: ExecPool::Cube,
            tiers: None,
            body: None,
        });
        m
    }

    fn task(kernel: u32, target: Option<u32>, start: i64) -> ExpandedTask {
        ExpandedTask {
            kernel,
            declared: 0,
            params: vec![Value::I64(start)],
            regions: vec![ExpandedRegion {
                tensor: 0,
                access: Access::In,
                start: vec![0, start],
                size: vec![1, 16],
            }],
            pool: if kernel == 0 {
                ExecPool::Vector
            } else {
                ExecPool::Cube
            },
            target,
            stream: 0,
            priority: 0,
            cost: None,
            loc: pto_wsp_ir::Loc::NONE,
        }
    }

    #[test]
    fn report_lists_tasks_and_counts_everything() {
        let m = module();
        let expansion = Expansion {
            tasks: vec![task(0, Some(1), 0), task(1, None, 16), task(0, Some(1), 32)],
            order: vec![OrderEdge {
                before: 0..1,
                after: 1..3,
            }],
            executors: 2,
            streams: 1,
            truncated: false,
        };
        let bindings = Bindings::new()
            .symbol("seq", 8i64)
            .array("lens", vec![1, 2]);
        let text = expand_report(&m, &bindings, &expansion, &ReportOptions { limit: 2 });
        let expected = "\
entry: ?
bindings: seq=8, lens=[1, 2]
tasks: 3 (first 2 listed)
  #0  k          @vector  exec 1  stream 0  n=0, in A[0, 0 +: 16]
  #1  k_big (k)  @cube    exec -  stream 0  n=16, in A[0, 16 +: 16]
  ... 1 more
per kernel:
  k      2
  k_big  1
per pool:
  @vector  2
  @cube    1
per executor (2 executors, 1 with tasks):
  1               2
  - (work_steal)  1
per stream (1 stream):
  0  3
order edges: 1
";
        assert_eq!(text, expected);
    }

    #[test]
    fn long_arrays_are_abbreviated() {
        let b = Bindings::new().array("a", (0..20).collect::<Vec<i64>>());
        let line = bindings_line(&b);
        assert!(line.ends_with(", 15, ... (20 elements)]"), "{line}");
        assert_eq!(bindings_line(&Bindings::new()), "");
    }
}
