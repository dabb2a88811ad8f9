//! Random workloads run by the CPU back end against independent references: the reference
//! expander (which tasks, and which pairs must be ordered) and a plain sequential evaluation of
//! the same arithmetic in program order (which numbers).
//!
//! Each generated module has three 8 × 8 `f32` tensors, three kernels and a random nest of
//! `parallel_for`, `for_each`, `sequential` and `if` over small dense axes, under a random
//! schedule (dispatch policy, executors, dependency mode, ready policy, start policy, pools, task
//! window, issue gate, batching, streams). Every task carries a unique id as its scalar
//! parameter. Run on 1, 2 and 4 threads with debug checks on, the program must
//!
//! - run exactly the expander's tasks (kernel, id, regions), each once;
//! - order every pair the schedule's dependency mode says conflicts (same region key in exact
//!   mode, intersecting boxes otherwise; at least one writes) and every structural order edge,
//!   as the expander lists them: the earlier task ended before the later one started, on one
//!   global clock the kernels tick;
//! - leave every tensor bit-for-bit equal to a sequential evaluation in program order.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::resolved;
use proptest::prelude::*;
use pto_wsp::ir::{Access, Bindings, DepsMode, ExpandOptions, ExpandedTask, Module, expand, parse};
use pto_wsp::kernels::{KernelError, KernelRegistry};
use pto_wsp::{CompileOptions, compile, lower};

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }
}

/// Builds the text of one random module.
struct Gen {
    rng: Rng,
    exact: bool,
    stmts: u32,
    tasks_left: u32,
    text: String,
}

impl Gen {
    /// A region start: a loop variable in scope (all are below 3) or a literal.
    fn start(&mut self, vars: &[(String, u64)], max: u64) -> String {
        let fits: Vec<&(String, u64)> = vars.iter().filter(|(_, n)| *n <= max + 1).collect();
        if !fits.is_empty() && self.rng.below(3) > 0 {
            fits[self.rng.below(fits.len() as u64) as usize].0.clone()
        } else {
            self.rng.below(max + 1).to_string()
        }
    }

    /// A region of tensor `t` with `rows × cols` elements (exact mode: one aligned 2 × 2 tile).
    fn region(&mut self, t: u32, rows: u64, cols: u64, vars: &[(String, u64)]) -> String {
        if self.exact {
            let r = self.start(vars, 3);
            let c = self.start(vars, 3);
            format!("T{t}[{r} * 2 +: 2, {c} * 2 +: 2]")
        } else {
            let r = self.start(vars, 8 - rows);
            let c = self.start(vars, 8 - cols);
            format!("T{t}[{r} +: {rows}, {c} +: {cols}]")
        }
    }

    fn task(&mut self, vars: &[(String, u64)], indent: &str) {
        self.stmts += 1;
        // A unique id per expanded task: the statement number and every enclosing variable.
        let mut id = format!("{}", self.stmts * 1000);
        for (k, (v, _)) in vars.iter().enumerate() {
            id.push_str(&format!(" + {v} * {}", [100, 10, 1][k.min(2)]));
        }
        let (rows, cols) = (1 + self.rng.below(4), 1 + self.rng.below(4));
        let first = self.rng.below(3) as u32;
        let ts = [first, (first + 1) % 3, (first + 2) % 3];
        let line = match self.rng.below(3) {
            0 => format!(
                "task kr({}, {}, {id});",
                self.region(ts[0], rows, cols, vars),
                self.region(ts[1], rows, cols, vars)
            ),
            1 => format!("task ki({}, {id});", self.region(ts[0], rows, cols, vars)),
            _ => format!(
                "task k2({}, {}, {}, {id});",
                self.region(ts[0], rows, cols, vars),
                self.region(ts[1], rows, cols, vars),
                self.region(ts[2], rows, cols, vars)
            ),
        };
        self.text.push_str(&format!("{indent}{line}\n"));
        self.tasks_left = self.tasks_left.saturating_sub(1);
    }

    fn body(&mut self, vars: &mut Vec<(String, u64)>, depth: usize, indent: &str) {
        let n = 1 + self.rng.below(3);
        for _ in 0..n {
            if self.tasks_left == 0 {
                return;
            }
            let inner = format!("{indent}    ");
            match self.rng.below(if depth >= 3 { 1 } else { 6 }) {
                0 | 1 => self.task(vars, indent),
                k @ (2 | 3) => {
                    let v = format!("v{}", vars.len());
                    let (axis, extent) = *self.rng.pick(&[("A2", 2u64), ("A3", 3)]);
                    let kw = if k == 2 { "parallel_for" } else { "for_each" };
                    self.text
                        .push_str(&format!("{indent}{kw} {v} in {axis} {{\n"));
                    vars.push((v, extent));
                    self.body(vars, depth + 1, &inner);
                    vars.pop();
                    self.text.push_str(&format!("{indent}}}\n"));
                }
                4 => {
                    self.text.push_str(&format!("{indent}sequential {{\n"));
                    self.body(vars, depth + 1, &inner);
                    self.text.push_str(&format!("{indent}}}\n"));
                }
                _ => {
                    let (v, e) = vars[self.rng.below(vars.len() as u64) as usize].clone();
                    let k = self.rng.below(e);
                    self.text.push_str(&format!("{indent}if {v} == {k} {{\n"));
                    self.body(vars, depth + 1, &inner);
                    self.text.push_str(&format!("{indent}}} else {{\n"));
                    self.body(vars, depth + 1, &inner);
                    self.text.push_str(&format!("{indent}}}\n"));
                }
            }
        }
    }
}

/// A random module and the dependency mode its schedule uses.
pub(crate) fn module_text(seed: u64) -> (String, DepsMode) {
    let mut rng = Rng(seed | 1);
    let mode = *rng.pick(&[DepsMode::Exact, DepsMode::Overlap, DepsMode::Hybrid]);
    let pools = ["@vector", "@cube", ""];
    let mut text = String::from(
        "tensor T0: f32[8, 8];\ntensor T1: f32[8, 8];\ntensor T2: f32[8, 8];\naxis A2 = dense(2);\naxis A3 = dense(3);\n",
    );
    text.push_str(&format!(
        "kernel kr(in a: f32[?, ?], out b: f32[?, ?], id: i64) {};\n",
        rng.pick(&pools)
    ));
    text.push_str(&format!(
        "kernel ki(inout a: f32[?, ?], id: i64) {};\n",
        rng.pick(&pools)
    ));
    text.push_str(&format!(
        "kernel k2(in a: f32[?, ?], in b: f32[?, ?], out c: f32[?, ?], id: i64) {};\n",
        rng.pick(&pools)
    ));
    let mut g = Gen {
        rng,
        exact: mode == DepsMode::Exact,
        stmts: 0,
        tasks_left: 24,
        text: String::new(),
    };
    g.text
        .push_str("workload main() {\n    parallel_for o in A2 {\n");
    let mut vars = vec![("o".to_string(), 2)];
    g.body(&mut vars, 1, "        ");
    g.text.push_str("    }\n}\n");
    text.push_str(&g.text);
    let mut rng = g.rng;
    let executors = 1 + rng.below(4);
    let dispatch = match rng.below(5) {
        0 => format!("round_robin({executors})"),
        1 => "affinity(o)".into(),
        2 => "hash(o + 7)".into(),
        3 => format!(
            "static_partition({})",
            (0..executors)
                .map(|e| (e * 5).to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        _ => "work_steal".into(),
    };
    let deps = match mode {
        DepsMode::Exact => "exact",
        DepsMode::Overlap => "overlap",
        _ => "hybrid",
    };
    let ready = *rng.pick(&["fifo", "work_steal", "priority(o)"]);
    let start = *rng.pick(&["immediate", "threshold(5)", "after_orchestration"]);
    let pools = *rng.pick(&["single", "by_exec_unit"]);
    let mut sched = format!(
        "schedule for main {{\n    executors {executors};\n    dispatch {dispatch};\n    task_graph {{\n        deps {deps};\n        ready {ready};\n        start {start};\n        pools {pools};\n    }}\n"
    );
    if rng.below(2) == 0 {
        sched.push_str(&format!("    task_window {} stall;\n", 1 + rng.below(6)));
    }
    if rng.below(3) == 0 {
        let scope = *rng.pick(&["global", "per_stream", "per_pool"]);
        sched.push_str(&format!(
            "    pipeline_depth {} {scope};\n",
            1 + rng.below(3)
        ));
    }
    if rng.below(3) == 0 {
        sched.push_str(&format!("    batch_deps {};\n", 2 + rng.below(3)));
    }
    if rng.below(2) == 0 {
        sched.push_str("    streams 2;\n    stream_by o;\n");
    }
    sched.push_str("}\n");
    text.push_str(&sched);
    (text, mode)
}

/// Reads the task id parameter (the last one) as the kernels see it.
fn id_of(ctx: &pto_wsp::kernels::TaskContext<'_>) -> Result<i64, KernelError> {
    ctx.param_i64(ctx.params().len().saturating_sub(1))
}

/// What a run recorded per task id: (kernel, region boxes, start tick, end tick, runs).
type Runs = HashMap<i64, (String, Vec<(u32, Vec<i64>, Vec<i64>)>, u64, u64, u32)>;

/// Kernels doing the module's arithmetic and recording what ran when.
fn registry(clock: &Arc<AtomicU64>, runs: &Arc<Mutex<Runs>>) -> KernelRegistry {
    let mut r = KernelRegistry::new();
    for name in ["kr", "ki", "k2"] {
        let clock = Arc::clone(clock);
        let runs = Arc::clone(runs);
        r.register(name, move |ctx| {
            let start = clock.fetch_add(1, Ordering::SeqCst);
            let id = id_of(ctx)?;
            match name {
                "kr" => {
                    let a = ctx.read::<f32>(0)?;
                    let mut b = ctx.write::<f32>(1)?;
                    for i in 0..a.rows() {
                        for j in 0..a.cols() {
                            b.set(i, j, a.get(i, j) * 0.5 + id as f32);
                        }
                    }
                }
                "ki" => {
                    let mut a = ctx.write::<f32>(0)?;
                    for i in 0..a.rows() {
                        for j in 0..a.cols() {
                            let x = a.get(i, j);
                            a.set(i, j, x * 1.25 + 1.0);
                        }
                    }
                }
                _ => {
                    let a = ctx.read::<f32>(0)?;
                    let b = ctx.read::<f32>(1)?;
                    let mut c = ctx.write::<f32>(2)?;
                    for i in 0..a.rows() {
                        for j in 0..a.cols() {
                            c.set(i, j, a.get(i, j) - b.get(i, j));
                        }
                    }
                }
            }
            let regions = crate::region_keys(ctx);
            let end = clock.fetch_add(1, Ordering::SeqCst);
            let mut g = runs.lock().unwrap();
            let e = g
                .entry(id)
                .or_insert_with(|| (name.to_string(), regions, start, end, 0));
            e.4 += 1;
            Ok(())
        });
    }
    r
}

/// The same arithmetic, sequentially in program order, on plain arrays.
fn reference(module: &Module, tasks: &[ExpandedTask], init: &[Vec<f32>]) -> Vec<Vec<f32>> {
    let mut t: Vec<Vec<f32>> = init.to_vec();
    for task in tasks {
        let name = module.kernels[task.kernel as usize].name.name.as_str();
        let id = task.params.last().unwrap().to_bits() as i64;
        let at = |r: usize, i: i64, j: i64| {
            let reg = &task.regions[r];
            (
                reg.tensor as usize,
                ((reg.start[0] + i) * 8 + reg.start[1] + j) as usize,
            )
        };
        let (rows, cols) = (task.regions[0].size[0], task.regions[0].size[1]);
        for i in 0..rows {
            for j in 0..cols {
                match name {
                    "kr" => {
                        let (ta, a) = at(0, i, j);
                        let (tb, b) = at(1, i, j);
                        t[tb][b] = t[ta][a] * 0.5 + id as f32;
                    }
                    "ki" => {
                        let (ta, a) = at(0, i, j);
                        t[ta][a] = t[ta][a] * 1.25 + 1.0;
                    }
                    _ => {
                        let (ta, a) = at(0, i, j);
                        let (tb, b) = at(1, i, j);
                        let (tc, c) = at(2, i, j);
                        t[tc][c] = t[ta][a] - t[tb][b];
                    }
                }
            }
        }
    }
    t
}

/// Whether the schedule's dependency mode orders tasks `a` and `b`.
fn conflict(a: &ExpandedTask, b: &ExpandedTask, mode: DepsMode) -> bool {
    let writes = |x: Access| matches!(x, Access::Out | Access::InOut);
    a.regions.iter().any(|ra| {
        b.regions.iter().any(|rb| {
            ra.tensor == rb.tensor
                && (writes(ra.access) || writes(rb.access))
                && match mode {
                    DepsMode::Exact => ra.start == rb.start && ra.size == rb.size,
                    _ => (0..ra.start.len()).all(|d| {
                        ra.start[d] < rb.start[d] + rb.size[d]
                            && rb.start[d] < ra.start[d] + ra.size[d]
                    }),
                }
        })
    })
}

fn check_module(seed: u64) {
    let (text, mode) = module_text(seed);
    check_text(&text, mode);
}

/// Runs `text` (kernels `kr`, `ki`, `k2` with a unique id as the last parameter, tensors
/// `T0..T2` of 8 × 8) and checks it against the expander and the sequential reference.
fn check_text(text: &str, mode: DepsMode) {
    check_text_in(text, mode, false);
}

/// [`check_text`], in device-generation mode when `device_gen` (`CompileOptions::device_gen`).
pub(crate) fn check_text_in(text: &str, mode: DepsMode, device_gen: bool) {
    let text = text.to_string();
    let module = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let b = Bindings::new();
    let x = expand(&resolved(&module), &b, &ExpandOptions::default())
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
    let ids: Vec<i64> = x
        .tasks
        .iter()
        .map(|t| t.params.last().unwrap().to_bits() as i64)
        .collect();
    let init: Vec<Vec<f32>> = (0..3)
        .map(|k| {
            (0..64)
                .map(|i| ((i * 7 + k * 13) % 17) as f32 - 8.0)
                .collect()
        })
        .collect();
    let want = reference(&module, &x.tasks, &init);
    for threads in [1, 2, 4] {
        let clock = Arc::new(AtomicU64::new(0));
        let runs = Arc::new(Mutex::new(HashMap::new()));
        let mut p = compile(
            lower(&if device_gen {
                crate::devgen::device_gen_view(&module)
            } else {
                module.clone()
            })
            .unwrap_or_else(|e| panic!("{e}\n{text}")),
            CompileOptions {
                threads,
                debug_checks: true,
                kernels: registry(&clock, &runs),
                device_gen,
                ..CompileOptions::default()
            },
        )
        .unwrap();
        {
            let mut g = p.tensors(&b).unwrap();
            let s = g.as_mut().unwrap();
            for (k, data) in init.iter().enumerate() {
                s.write::<f32>(&format!("T{k}"), data).unwrap();
            }
        }
        p.execute(&b)
            .unwrap_or_else(|e| panic!("threads {threads}: {e}\n{text}"));
        let runs = runs.lock().unwrap();
        let ctx = || format!("threads {threads}, device_gen {device_gen}, module:\n{text}");
        assert_eq!(runs.len(), x.tasks.len(), "task count; {}", ctx());
        for (i, t) in x.tasks.iter().enumerate() {
            let (name, regions, _, _, n) = runs
                .get(&ids[i])
                .unwrap_or_else(|| panic!("task {i} did not run; {}", ctx()));
            assert_eq!(*n, 1, "task {i} ran {n} times; {}", ctx());
            assert_eq!(name, &module.kernels[t.kernel as usize].name.name);
            let want: Vec<_> = t
                .regions
                .iter()
                .map(|r| (r.tensor, r.start.clone(), r.size.clone()))
                .collect();
            assert_eq!(regions, &want, "task {i} regions; {}", ctx());
        }
        let span = |i: usize| {
            let r = &runs[&ids[i]];
            (r.2, r.3)
        };
        for j in 0..x.tasks.len() {
            for i in 0..j {
                if conflict(&x.tasks[i], &x.tasks[j], mode) {
                    assert!(
                        span(i).1 < span(j).0,
                        "conflicting tasks {i} and {j} were not ordered; {}",
                        ctx()
                    );
                }
            }
        }
        for e in &x.order {
            let last_end = e.before.clone().map(|i| span(i as usize).1).max();
            let first_start = e.after.clone().map(|i| span(i as usize).0).min();
            if let (Some(a), Some(b)) = (last_end, first_start) {
                assert!(a < b, "order edge {e:?} violated; {}", ctx());
            }
        }
        let g = p.tensors(&b).unwrap();
        let s = g.as_ref().unwrap();
        for (k, w) in want.iter().enumerate() {
            let got = s.read::<f32>(&format!("T{k}")).unwrap();
            let same = got.iter().zip(w).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "T{k}: {got:?} != {w:?}; {}", ctx());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: pto_wsp::ir::soak::cases(48), ..ProptestConfig::default() })]

    #[test]
    fn random_workloads_match_the_expander_and_a_sequential_reference(seed in any::<u64>()) {
        check_module(seed);
    }
}

/// The generator covers what it claims: over a fixed set of seeds, every mode, ready policy,
/// dispatch policy and statement kind appears, and the modules are not trivial.
#[test]
fn the_generator_covers_every_policy_and_statement() {
    let mut all = String::new();
    let mut tasks = 0;
    for seed in 0..200u64 {
        let (text, _) = module_text(seed);
        let m = parse(&text).unwrap();
        tasks += expand(&resolved(&m), &Bindings::new(), &ExpandOptions::default())
            .unwrap()
            .tasks
            .len();
        all.push_str(&text);
    }
    for needle in [
        "deps exact",
        "deps overlap",
        "deps hybrid",
        "ready fifo",
        "ready work_steal",
        "ready priority",
        "round_robin(",
        "affinity(o)",
        "hash(",
        "static_partition(",
        "dispatch work_steal",
        "start threshold",
        "start after_orchestration",
        "pools by_exec_unit",
        "task_window",
        "pipeline_depth",
        "batch_deps",
        "for_each",
        "sequential {",
        "} else {",
    ] {
        assert!(all.contains(needle), "no generated module has `{needle}`");
    }
    assert!(
        tasks > 200 * 4,
        "modules are too small: {tasks} tasks over 200 seeds"
    );
}

/// A streamed run longer than the builder's retire period (`RETIRE_EVERY` submissions), under a
/// small window: the TensorMap retires completed tasks while the run goes on, and the run stays
/// exactly right (tasks, orders, numbers), in both inference modes.
#[test]
fn long_streamed_runs_retire_completed_tasks_and_stay_exact() {
    for mode in [DepsMode::Exact, DepsMode::Overlap] {
        let deps = if mode == DepsMode::Exact {
            "exact"
        } else {
            "overlap"
        };
        let text = format!(
            "tensor T0: f32[8, 8];
tensor T1: f32[8, 8];
tensor T2: f32[8, 8];
axis A2 = dense(2);
axis A4 = dense(4);
axis R = dense(48);
kernel kr(in a: f32[?, ?], out b: f32[?, ?], id: i64);
kernel ki(inout a: f32[?, ?], id: i64);
kernel k2(in a: f32[?, ?], in b: f32[?, ?], out c: f32[?, ?], id: i64);
workload main() {{
    parallel_for o in A2 {{
        for_each r in R {{
            parallel_for i in A4 {{
                parallel_for j in A4 {{
                    task ki(T0[i * 2 +: 2, j * 2 +: 2], (((o * 48 + r) * 4 + i) * 4 + j) * 4);
                    task kr(T0[i * 2 +: 2, j * 2 +: 2], T1[j * 2 +: 2, i * 2 +: 2], (((o * 48 + r) * 4 + i) * 4 + j) * 4 + 1);
                    task k2(T1[i * 2 +: 2, j * 2 +: 2], T2[i * 2 +: 2, 0 +: 2], T0[j * 2 +: 2, i * 2 +: 2], (((o * 48 + r) * 4 + i) * 4 + j) * 4 + 2);
                }}
            }}
        }}
    }}
}}
schedule for main {{
    executors 2;
    dispatch affinity(o);
    task_graph {{
        deps {deps};
        ready work_steal;
    }}
    task_window 64 stall;
}}
"
        );
        let m = parse(&text).unwrap();
        let n = expand(&resolved(&m), &Bindings::new(), &ExpandOptions::default())
            .unwrap()
            .tasks
            .len();
        assert!(
            n > pto_wsp::graph::builder::RETIRE_EVERY as usize,
            "{n} tasks"
        );
        check_text(&text, mode);
    }
}
