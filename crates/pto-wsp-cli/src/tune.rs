//! `pto-wsp tune FILE`: searches the schedule space a module leaves open on the device timeline
//! model, within a time budget, and can write the best schedule back as `.wsp` text.
//!
//! Why: which schedule is best depends on the machine (cores by kind, generation and handshake
//! costs), and users choose before they have a device. The model is deterministic, so one
//! evaluation per candidate suffices.
//!
//! Promises:
//! - **Space**: executors, dispatch (the module's; a key for `affinity` and `hash` from the
//!   workload's own variables: [`key_candidates`]; `work_steal`; `round_robin(E)`), ready policy,
//!   task window (size and mode as one dimension), pipeline depth, dependency batching, start
//!   policy, pools (`single`, `by_exec_unit`), each bound of the schedule's `dispatch_threshold`
//!   and `dispatch threshold(..)` levels and each bound of a kernel's `tiers` condition (any
//!   comparison of a parameter expression with literals and symbols, either way round, under
//!   `&&`, `||`, `!`: [`tiers`]; one dimension per bound, candidate values the real cuts of the
//!   values the metric or the compared expression takes over the module's tasks: [`cuts`]),
//!   and the values of symbols named by `--tune NAME=V1,V2,...` (e.g. a split-KV chunk size).
//!   Never `deps` (it decides correctness, not speed) nor `trace`. Each dimension's first value is the module's
//!   own; on a tie the earlier value is kept (the module's, then the keys its loops offer, then
//!   the policies that ignore the workload's structure).
//! - **Method**: exhaustive when the whole space fits the budget at the first evaluation's cost;
//!   else coordinate descent from the module's own schedule (each dimension in turn set to its
//!   best value given the others, sweeps repeated until one changes nothing), then seeded random
//!   restarts while budget remains. Descent because the objective is deterministic (nothing to
//!   gain from re-sampling or racing), the space is a handful of small dimensions whose main
//!   effects dominate, and each step is explainable; starting from the module's schedule means
//!   the answer is never worse than it on the model. A cache of evaluated points (keyed by the
//!   choice in every dimension) makes revisits free: descent re-evaluates its current point in
//!   every sweep and restarts often meet earlier points.
//! - Each candidate is evaluated as the text a user would write: the module with its schedule
//!   replaced, built (kernels not run) and modelled; `--write` writes that text, re-parsed and
//!   checked to print the same schedule before anything is written.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use pto_wsp::ir::{
    BinOp, Dispatch, ExpandOptions, Expr, GateScope, Ident, Module, PoolsPolicy, ReadyPolicy,
    Schedule, ScheduleItem, ScheduleItemKind, StartPolicy, StmtKind, TaskGraphItem, WindowMode,
};

use crate::cmd::run::{RunOptions, cpu::run};

mod tiers;
use crate::{CliError, fmt_ps};
use tiers::TierEdit;

/// One dimension: its name and its values as schedule edits.
struct Dim {
    name: String,
    values: Vec<Value>,
}

/// Where a level bound sits in the schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Site {
    /// `dispatch_threshold(..) { below N: POOL, ... }`.
    Pools,
    /// `dispatch threshold(..) { below N: POLICY, ... }`.
    Dispatch,
}

/// One value of a dimension.
#[derive(Clone, Debug, PartialEq)]
enum Value {
    Executors(u64),
    Dispatch(Dispatch),
    Ready(ReadyPolicy),
    Window(Option<(u64, WindowMode)>),
    Depth(Option<(u64, GateScope)>),
    Batch(u64),
    Start(StartPolicy),
    Pools(PoolsPolicy),
    Symbol(String, String),
    /// Level `usize`'s bound of a schedule threshold.
    Bound(Site, usize, i64),
    /// A tier comparison as written (the module's) or moved.
    Tier(TierEdit),
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Executors(n) => write!(f, "executors {n}"),
            Value::Dispatch(d) => f.write_str(&item_text(&ScheduleItemKind::Dispatch(d.clone()))),
            Value::Ready(r) => f.write_str(&tg_text(&TaskGraphItem::Ready(r.clone()))),
            Value::Window(None) => f.write_str("no task_window"),
            Value::Window(Some((n, m))) => {
                write!(f, "{}", item_text(&ScheduleItemKind::TaskWindow(*n, *m)))
            }
            Value::Depth(None) => f.write_str("no pipeline_depth"),
            Value::Depth(Some((n, s))) => {
                write!(f, "{}", item_text(&ScheduleItemKind::PipelineDepth(*n, *s)))
            }
            Value::Batch(n) => write!(f, "batch_deps {n}"),
            Value::Start(s) => f.write_str(&tg_text(&TaskGraphItem::Start(*s))),
            Value::Pools(p) => f.write_str(&tg_text(&TaskGraphItem::Pools(*p))),
            Value::Symbol(n, v) => write!(f, "{n}={v}"),
            Value::Bound(Site::Pools, l, v) => write!(f, "dispatch_threshold level {l}: below {v}"),
            Value::Bound(Site::Dispatch, l, v) => {
                write!(f, "dispatch threshold level {l}: below {v}")
            }
            Value::Tier(e) => write!(f, "tier {}", e.leaf),
        }
    }
}

/// The printed form of one schedule item (without its trailing `;`), e.g. `task_window 8192
/// stall`; for a `task_graph` item, its one inner item.
fn item_text(kind: &ScheduleItemKind) -> String {
    let s = Schedule {
        target: pto_wsp::ir::Ident::new("x"),
        items: vec![ScheduleItem::new(kind.clone())],
        loc: Default::default(),
    };
    let text = s.to_string();
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let line = match kind {
        ScheduleItemKind::TaskGraph(_) => lines.get(2),
        _ => lines.get(1),
    };
    line.copied()
        .unwrap_or("")
        .trim_end_matches(';')
        .to_string()
}

fn tg_text(item: &TaskGraphItem) -> String {
    item_text(&ScheduleItemKind::TaskGraph(vec![item.clone()]))
}

/// The module's own choice in each fixed dimension (the defaults where the schedule says
/// nothing).
struct Own {
    executors: u64,
    dispatch: Option<Dispatch>,
    window: Option<(u64, WindowMode)>,
    depth: Option<(u64, GateScope)>,
    batch: u64,
    ready: ReadyPolicy,
    start: StartPolicy,
    pools: PoolsPolicy,
}

fn own_choices(schedule: &Schedule) -> Own {
    let mut o = Own {
        executors: 1,
        dispatch: None,
        window: None,
        depth: None,
        batch: 1,
        ready: ReadyPolicy::Fifo,
        start: StartPolicy::Immediate,
        pools: PoolsPolicy::Single,
    };
    for it in &schedule.items {
        match &it.kind {
            ScheduleItemKind::Executors(n) => o.executors = *n,
            ScheduleItemKind::Dispatch(d) => o.dispatch = Some(d.clone()),
            ScheduleItemKind::TaskWindow(n, m) => o.window = Some((*n, *m)),
            ScheduleItemKind::PipelineDepth(n, s) => o.depth = Some((*n, *s)),
            ScheduleItemKind::BatchDeps(n) => o.batch = *n,
            ScheduleItemKind::TaskGraph(items) => {
                for t in items {
                    match t {
                        TaskGraphItem::Ready(r) => o.ready = r.clone(),
                        TaskGraphItem::Start(s) => o.start = *s,
                        TaskGraphItem::Pools(p) => o.pools = *p,
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    o
}

/// A dimension: the module's value `first`, then each of `rest` not yet listed.
fn dim<T: PartialEq>(name: &str, first: T, rest: Vec<T>, value: impl Fn(T) -> Value) -> Dim {
    let mut v = vec![first];
    for r in rest {
        if !v.contains(&r) {
            v.push(r);
        }
    }
    Dim {
        name: name.into(),
        values: v.into_iter().map(value).collect(),
    }
}

/// The dimensions of `schedule` on a machine with `cores` cores, module's value first.
fn dims(
    schedule: &Schedule,
    cores: u64,
    keys: Vec<Dispatch>,
    symbols: &[(String, Vec<String>)],
) -> Vec<Dim> {
    let o = own_choices(schedule);
    let e = o.executors;
    let executors = [cores / 3, cores * 2 / 3, cores]
        .into_iter()
        .filter(|&n| n > 0);
    let dispatch = keys
        .into_iter()
        .chain([Dispatch::WorkSteal, Dispatch::RoundRobin(e)]);
    let windows = [None, Some(512), Some(2048), Some(8192), Some(32768)]
        .into_iter()
        .map(|w| w.map(|n| (n, WindowMode::Stall)));
    let starts = vec![
        StartPolicy::Immediate,
        StartPolicy::Threshold(cores),
        StartPolicy::AfterOrchestration,
    ];
    let mut out = vec![
        dim("executors", e, executors.collect(), Value::Executors),
        dim(
            "dispatch",
            o.dispatch.unwrap_or(Dispatch::WorkSteal),
            dispatch.collect(),
            Value::Dispatch,
        ),
        dim(
            "ready",
            o.ready,
            vec![ReadyPolicy::Fifo, ReadyPolicy::WorkSteal],
            Value::Ready,
        ),
        dim("task_window", o.window, windows.collect(), Value::Window),
        dim(
            "pipeline_depth",
            o.depth,
            vec![None, Some((cores, GateScope::Global))],
            Value::Depth,
        ),
        dim("batch_deps", o.batch, vec![1, 4, 16], Value::Batch),
        dim("start", o.start, starts, Value::Start),
        dim(
            "pools",
            o.pools,
            vec![PoolsPolicy::Single, PoolsPolicy::ByExecUnit],
            Value::Pools,
        ),
    ];
    for (name, values) in symbols {
        out.push(Dim {
            name: format!("symbol {name}"),
            values: values
                .iter()
                .map(|v| Value::Symbol(name.clone(), v.clone()))
                .collect(),
        });
    }
    out
}

/// `schedule` with the values of `point` applied, the `--bind` values of tuned symbols and the
/// tier edits.
fn apply(
    schedule: &Schedule,
    dims: &[Dim],
    point: &[usize],
) -> (Schedule, Vec<String>, Vec<TierEdit>) {
    let mut items: Vec<ScheduleItem> = schedule
        .items
        .iter()
        .filter(|i| {
            !matches!(
                i.kind,
                ScheduleItemKind::Executors(_)
                    | ScheduleItemKind::Dispatch(_)
                    | ScheduleItemKind::TaskWindow(..)
                    | ScheduleItemKind::PipelineDepth(..)
                    | ScheduleItemKind::BatchDeps(_)
            )
        })
        .cloned()
        .collect();
    let mut graph: Vec<TaskGraphItem> = Vec::new();
    if let Some(pos) = items
        .iter()
        .position(|i| matches!(i.kind, ScheduleItemKind::TaskGraph(_)))
        && let ScheduleItemKind::TaskGraph(g) = items.remove(pos).kind
    {
        graph = g;
    }
    let mut binds = Vec::new();
    let mut head = Vec::new();
    let mut tail = Vec::new();
    for (d, &i) in dims.iter().zip(point) {
        match &d.values[i] {
            Value::Executors(n) => head.push(ScheduleItemKind::Executors(*n)),
            Value::Dispatch(x) => head.push(ScheduleItemKind::Dispatch(x.clone())),
            Value::Ready(r) => set_tg(&mut graph, TaskGraphItem::Ready(r.clone())),
            Value::Start(s) => set_tg(&mut graph, TaskGraphItem::Start(*s)),
            Value::Pools(p) => set_tg(&mut graph, TaskGraphItem::Pools(*p)),
            Value::Window(Some((n, m))) => tail.push(ScheduleItemKind::TaskWindow(*n, *m)),
            Value::Depth(Some((n, s))) => tail.push(ScheduleItemKind::PipelineDepth(*n, *s)),
            Value::Batch(n) if *n > 1 => tail.push(ScheduleItemKind::BatchDeps(*n)),
            Value::Symbol(n, v) => binds.push(format!("{n}={v}")),
            _ => {}
        }
    }
    let mut out: Vec<ScheduleItem> = head.into_iter().map(ScheduleItem::new).collect();
    out.append(&mut items);
    out.push(ScheduleItem::new(ScheduleItemKind::TaskGraph(graph)));
    out.extend(tail.into_iter().map(ScheduleItem::new));
    let mut tiers = Vec::new();
    for (d, &i) in dims.iter().zip(point) {
        match &d.values[i] {
            Value::Bound(site, level, v) => set_bound(&mut out, *site, *level, *v),
            // The module's own condition: no edit (its declaration stays as written).
            Value::Tier(e) if i != 0 => tiers.push(e.clone()),
            _ => {}
        }
    }
    (
        Schedule {
            target: schedule.target.clone(),
            items: out,
            loc: schedule.loc,
        },
        binds,
        tiers,
    )
}

/// Sets level `level`'s bound of the threshold at `site` (nothing when the schedule has none
/// there, e.g. a dispatch dimension chose another policy).
fn set_bound(items: &mut [ScheduleItem], site: Site, level: usize, v: i64) {
    for it in items {
        let bound = match (&mut it.kind, site) {
            (ScheduleItemKind::DispatchThreshold(l), Site::Pools) => {
                l.levels.get_mut(level).map(|b| &mut b.0)
            }
            (ScheduleItemKind::Dispatch(Dispatch::Threshold(l)), Site::Dispatch) => {
                l.levels.get_mut(level).map(|b| &mut b.0)
            }
            _ => None,
        };
        if let Some(b) = bound {
            *b = v;
        }
    }
}

/// Variables (at most this many) whose keys [`key_candidates`] offers.
const MAX_KEY_VARS: usize = 4;
/// Candidate values of one threshold dimension (besides the module's own).
const MAX_CUTS: usize = 16;

/// Loop variables and workload parameters, in the order written: the entry's first, then the
/// other workloads'.
fn variables(module: &Module) -> Vec<String> {
    fn walk(body: &[pto_wsp::ir::Stmt], out: &mut Vec<String>) {
        for s in body {
            match &s.kind {
                StmtKind::Loop { vars, body, .. } | StmtKind::Select { vars, body, .. } => {
                    out.extend(vars.iter().map(|v| v.name.clone()));
                    walk(body, out);
                }
                StmtKind::Cond {
                    then_body,
                    else_body,
                    ..
                } => {
                    walk(then_body, out);
                    walk(else_body, out);
                }
                StmtKind::While { body, .. }
                | StmtKind::Combine(body)
                | StmtKind::Sequential(body) => walk(body, out),
                _ => {}
            }
        }
    }
    let entry = module.entry_name();
    let mut workloads: Vec<&pto_wsp::ir::Workload> = module.workloads.iter().collect();
    workloads.sort_by_key(|w| Some(w.name.name.as_str()) != entry);
    let mut out = Vec::new();
    for w in workloads {
        out.extend(w.params.iter().map(|p| p.0.name.clone()));
        walk(&w.body, &mut out);
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|v| seen.insert(v.clone()));
    out
}

/// The dispatch keys the module's tasks allow: each loop variable and workload parameter (in
/// the order written, the entry's first) that the validator accepts as `dispatch affinity(v)`
/// (an integer bound at every task the entry generates), at most [`MAX_KEY_VARS`] of them, as
/// `affinity(v)` and `hash(v)`, then each pair of them as `hash(a * 65536 + b)` (an injective
/// combination while `b` < 65536, so tasks of distinct pairs are spread independently).
pub fn key_candidates(name: &str, text: &str, module: &Module) -> Vec<Dispatch> {
    let Some(schedule) = &module.schedule else {
        return Vec::new();
    };
    let var = |v: &str| Expr::Name(Ident::new(v));
    let accepted = |d: Dispatch| {
        let mut s = schedule.clone();
        s.items
            .retain(|i| !matches!(i.kind, ScheduleItemKind::Dispatch(_)));
        s.items
            .insert(0, ScheduleItem::new(ScheduleItemKind::Dispatch(d)));
        crate::load_source(name, &splice(text, schedule, &s, "")).is_ok()
    };
    let vars: Vec<String> = variables(module)
        .into_iter()
        .filter(|v| accepted(Dispatch::Affinity(var(v))))
        .take(MAX_KEY_VARS)
        .collect();
    let mut out = Vec::new();
    for v in &vars {
        out.push(Dispatch::Affinity(var(v)));
        out.push(Dispatch::Hash(var(v)));
    }
    for (i, a) in vars.iter().enumerate() {
        for b in &vars[i + 1..] {
            let ab = Expr::Binary(
                BinOp::Add,
                Box::new(Expr::Binary(
                    BinOp::Mul,
                    Box::new(var(a)),
                    Box::new(Expr::Int(65536)),
                )),
                Box::new(var(b)),
            );
            out.push(Dispatch::Hash(ab));
        }
    }
    out
}

/// The literals that cut `values` (what a metric or parameter takes over the module's tasks) in
/// each distinct place, for a condition `x OP literal` (`below N` is `x < N`): every cut when
/// the values are fewer than [`MAX_CUTS`], else [`MAX_CUTS`] cuts evenly spaced over the sorted
/// distinct values; nothing cut off and everything cut off included. Each literal is a real
/// threshold: two of them put different sets of tasks on each side.
pub fn cuts(values: &[i64], op: BinOp) -> Vec<i64> {
    let mut v = values.to_vec();
    v.sort_unstable();
    v.dedup();
    let m = v.len();
    if m == 0 {
        return Vec::new();
    }
    let mut js: Vec<usize> = if m < MAX_CUTS {
        (0..=m).collect()
    } else {
        (0..MAX_CUTS).map(|k| k * m / (MAX_CUTS - 1)).collect()
    };
    js.dedup();
    js.into_iter()
        .map(|j| match op {
            // The low side is `x <= K` (`<=`) or its complement (`>`).
            BinOp::Le | BinOp::Gt => match j {
                0 => v[0].saturating_sub(1),
                _ => v[j - 1],
            },
            // The low side is `x < K` (`<`, `below`) or its complement (`>=`).
            _ if j == m => v[m - 1].saturating_add(1),
            _ => v[j],
        })
        .collect()
}

/// The module's tasks under `binds`, expanded (kernels not run).
fn each_task(
    name: &str,
    text: &str,
    binds: &[String],
    mut f: impl FnMut(&pto_wsp::ir::ExpandedTask),
) -> Result<(), CliError> {
    let loaded = crate::load_source(name, text)?;
    let bindings = crate::bindings_for(&loaded, binds)?;
    let plan = pto_wsp::driver::lower(&loaded)?;
    pto_wsp::ir::expand_each(
        plan.resolved(),
        &bindings,
        &ExpandOptions::default(),
        |_, t| f(t),
    )
    .map_err(|e| CliError::plain(format!("{name}: {e}")))?;
    Ok(())
}

/// The values `metric` (a schedule expression) takes over the module's tasks: the module
/// expanded with `ready priority(metric)`, whose key the expander evaluates at every task.
fn metric_values(
    name: &str,
    text: &str,
    schedule: &Schedule,
    metric: &Expr,
    binds: &[String],
) -> Result<Vec<i64>, CliError> {
    let mut s = schedule.clone();
    let mut found = false;
    for it in &mut s.items {
        if let ScheduleItemKind::TaskGraph(g) = &mut it.kind {
            set_tg(
                g,
                TaskGraphItem::Ready(ReadyPolicy::Priority(metric.clone())),
            );
            found = true;
        }
    }
    if !found {
        s.items
            .push(ScheduleItem::new(ScheduleItemKind::TaskGraph(vec![
                TaskGraphItem::Ready(ReadyPolicy::Priority(metric.clone())),
            ])));
    }
    let mut out = Vec::new();
    each_task(name, &splice(text, schedule, &s, ""), binds, |t| {
        out.push(t.priority)
    })?;
    Ok(out)
}

/// The threshold dimensions: each bound of the schedule's `dispatch_threshold` and top-level
/// `dispatch threshold(..)` levels, then each movable comparison of a kernel's tier condition
/// ([`tier_dims`]); values the module's own, then [`cuts`] of the metric's or the compared
/// expression's values over the tasks.
fn threshold_dims(
    name: &str,
    text: &str,
    module: &Module,
    schedule: &Schedule,
    binds: &[String],
) -> Result<Vec<Dim>, CliError> {
    let mut out = Vec::new();
    for it in &schedule.items {
        let (site, levels, what): (Site, Vec<i64>, &str) = match &it.kind {
            ScheduleItemKind::DispatchThreshold(l) => (
                Site::Pools,
                l.levels.iter().map(|b| b.0).collect(),
                "dispatch_threshold",
            ),
            ScheduleItemKind::Dispatch(Dispatch::Threshold(l)) => (
                Site::Dispatch,
                l.levels.iter().map(|b| b.0).collect(),
                "dispatch threshold",
            ),
            _ => continue,
        };
        let metric = match &it.kind {
            ScheduleItemKind::DispatchThreshold(l) => &l.metric,
            ScheduleItemKind::Dispatch(Dispatch::Threshold(l)) => &l.metric,
            _ => continue,
        };
        let values = metric_values(name, text, schedule, metric, binds)?;
        for (l, own) in levels.iter().enumerate() {
            let mut vs = vec![*own];
            vs.extend(cuts(&values, BinOp::Lt).into_iter().filter(|v| v != own));
            out.push(Dim {
                name: format!("{what}({metric}) bound {l}"),
                values: vs.into_iter().map(|v| Value::Bound(site, l, v)).collect(),
            });
        }
    }
    out.extend(tier_dims(name, text, module, binds)?);
    Ok(out)
}

/// One dimension per movable comparison of a kernel's tier condition ([`tiers`]).
fn tier_dims(
    name: &str,
    text: &str,
    module: &Module,
    binds: &[String],
) -> Result<Vec<Dim>, CliError> {
    let leaves = tiers::leaves(module);
    if leaves.is_empty()
        || leaves
            .iter()
            .any(|l| kernel_span(text, &module.kernels[l.kernel]).is_none())
    {
        return Ok(Vec::new());
    }
    let loaded = crate::load_source(name, text)?;
    let symbols = crate::bindings_for(&loaded, binds)?.symbols;
    let mut seen: Vec<tiers::Seen> = leaves.iter().map(|_| Default::default()).collect();
    each_task(name, text, binds, |t| {
        let k = t.declared as usize;
        tiers::observe(&leaves, module, k, &t.params, &symbols, &mut seen);
    })?;
    Ok(leaves
        .iter()
        .zip(&seen)
        .map(|(l, s)| {
            let decl = &module.kernels[l.kernel];
            let cond = &decl.tiers.as_ref().expect("a tiered kernel").cases[l.case].0;
            let within = if *cond == l.written {
                String::new()
            } else {
                format!(" in `{cond}`")
            };
            Dim {
                name: format!("tier `{}`{within} of kernel {}", l.written, decl.name),
                values: tiers::edits(l, s, &symbols)
                    .into_iter()
                    .map(Value::Tier)
                    .collect(),
            }
        })
        .collect())
}

/// The byte range of kernel `decl`'s declaration in `text` (from `kernel` to its `;`), for a
/// kernel without a body.
fn kernel_span(text: &str, decl: &pto_wsp::ir::KernelDecl) -> Option<(usize, usize)> {
    if decl.body.is_some() || !decl.name.loc.is_known() {
        return None;
    }
    let at = decl.name.loc.start as usize;
    let start = text.get(..at)?.rfind("kernel")?;
    let mut depth = 0i32;
    for (i, ch) in text.get(at..)?.char_indices() {
        match ch {
            '(' | '{' | '[' => depth += 1,
            ')' | '}' | ']' => depth -= 1,
            ';' if depth == 0 => return Some((start, at + i + 1)),
            '/' if text[at + i..].starts_with("//") => return None,
            _ => {}
        }
    }
    None
}

/// `text` with its schedule replaced by `new` (a comment line above it) and the tier edits
/// made (each edited kernel's declaration printed anew); checked to read back with those
/// tiers.
fn candidate(
    name: &str,
    text: &str,
    module: &Module,
    old: &Schedule,
    new: &Schedule,
    tiers: &[TierEdit],
    comment: &str,
) -> Result<String, String> {
    let mut edits = vec![(
        old.loc.start as usize,
        old.loc.end as usize,
        format!("{comment}{new}"),
    )];
    let mut decls: HashMap<usize, pto_wsp::ir::KernelDecl> = HashMap::new();
    for e in tiers {
        let d = decls
            .entry(e.kernel)
            .or_insert_with(|| module.kernels[e.kernel].clone());
        if let Some(leaf) = d
            .tiers
            .as_mut()
            .and_then(|t| t.cases.get_mut(e.case))
            .and_then(|c| tiers::at_mut(&mut c.0, &e.path))
        {
            *leaf = e.leaf.clone();
        }
    }
    for (k, d) in &decls {
        let (a, b) = kernel_span(text, &module.kernels[*k])
            .ok_or_else(|| format!("kernel `{}`: its declaration was not found", d.name))?;
        edits.push((a, b, d.to_string()));
    }
    edits.sort_by_key(|e| std::cmp::Reverse(e.0));
    let mut out = text.to_string();
    for (a, b, s) in edits {
        out.replace_range(a..b, &s);
    }
    if !decls.is_empty() {
        let back = crate::load_source(name, &out).map_err(|e| e.to_string())?;
        for (k, d) in &decls {
            if back.module.kernels.get(*k).map(|x| &x.tiers) != Some(&d.tiers) {
                return Err(format!(
                    "kernel `{}`: the tier edit did not read back",
                    d.name
                ));
            }
        }
    }
    Ok(out)
}

fn set_tg(graph: &mut Vec<TaskGraphItem>, item: TaskGraphItem) {
    match graph.iter_mut().find(|g| g.keyword() == item.keyword()) {
        Some(g) => *g = item,
        None => graph.push(item),
    }
}

/// `text` with its schedule (at `schedule.loc`) replaced by `new`, a comment line above it.
fn splice(text: &str, old: &Schedule, new: &Schedule, comment: &str) -> String {
    let (a, b) = (old.loc.start as usize, old.loc.end as usize);
    format!("{}{comment}{new}{}", &text[..a], &text[b..])
}

/// What `pto-wsp tune` was asked.
#[derive(Clone, Debug)]
pub struct TuneOptions {
    /// The machine (shipped name or file).
    pub machine: String,
    /// Search time budget.
    pub budget: Duration,
    /// `--bind` values.
    pub binds: Vec<String>,
    /// `--tune NAME=V1,V2`: symbol values to try.
    pub symbols: Vec<(String, Vec<String>)>,
    /// Schedules listed.
    pub top: usize,
    /// Draw a progress bar (on a terminal).
    pub progress: bool,
    /// Random-restart seed.
    pub seed: u64,
}

/// One evaluated candidate.
#[derive(Clone, Debug)]
pub struct Tuned {
    /// Modelled makespan (device generation), picoseconds.
    pub makespan_ps: u64,
    /// The changes from the module's schedule.
    pub changes: Vec<String>,
    /// The schedule text.
    pub schedule: String,
    /// The whole module text with this schedule.
    pub text: String,
    /// `--bind` values of tuned symbols.
    pub binds: Vec<String>,
    /// The kernel declarations a tier edit changed, as `.wsp` text.
    pub kernels: Vec<String>,
    /// The tier edits (kernel, case, condition).
    tiers: Vec<TierEdit>,
    /// Its place in the space (each dimension's value index).
    point: Vec<usize>,
}

/// What a search found.
pub struct TuneResult {
    /// The module's own schedule.
    pub own: Tuned,
    /// The best schedules, best first.
    pub best: Vec<Tuned>,
    /// Points of the space visited.
    pub evaluated: usize,
    /// Distinct module texts modelled (points whose edits are moot share one).
    pub modelled: usize,
    /// Each dimension's name and number of values, and the whole space's size.
    pub space: (Vec<(String, usize)>, u128),
    /// Candidates the model refused (with the first reason).
    pub refused: (usize, Option<String>),
    /// Modelled candidates that warned, and each distinct warning or note with the number of
    /// candidates that gave it (the candidates' runs print nothing).
    pub warnings: (usize, Vec<(String, usize)>),
    /// The method used.
    pub method: &'static str,
    /// Wall time of the search.
    pub elapsed: Duration,
}

/// The state of one search: the module, its dimensions, and every point evaluated.
struct Search<'a> {
    name: &'a str,
    text: &'a str,
    module: &'a Module,
    schedule: Schedule,
    dims: Vec<Dim>,
    o: &'a TuneOptions,
    /// Every point visited, by its value indices.
    cache: HashMap<Vec<usize>, Result<Tuned, String>>,
    /// Every distinct module text (with its binds) modelled: points whose edits are moot share
    /// one.
    by_text: HashMap<String, Result<u64, String>>,
    /// Each warning or note of a modelled candidate, and how many candidates gave it.
    warned: BTreeMap<String, usize>,
    /// Modelled candidates with at least one warning.
    warning_candidates: usize,
    /// The output-coverage warnings of the module's tasks under each set of binds, checked on
    /// the first candidate with those binds: tasks and their regions do not depend on the
    /// schedule or on which tier variant runs, so later candidates skip the check and inherit
    /// its result.
    coverage: HashMap<Vec<String>, Vec<String>>,
    t0: Instant,
    bar: Option<indicatif::ProgressBar>,
}

impl Search<'_> {
    /// The candidate at `point` (its makespan, or why the model refused it), evaluated once.
    fn eval(&mut self, point: &[usize]) -> Result<Tuned, String> {
        if let Some(r) = self.cache.get(point) {
            return r.clone();
        }
        let r = self.evaluate(point);
        self.cache.insert(point.to_vec(), r.clone());
        r
    }

    fn evaluate(&mut self, point: &[usize]) -> Result<Tuned, String> {
        let (s, binds, tiers) = apply(&self.schedule, &self.dims, point);
        let changes: Vec<String> = self
            .dims
            .iter()
            .zip(point)
            .filter(|(_, i)| **i != 0)
            .map(|(d, &i)| format!("{} → {}", d.values[0], d.values[i]))
            .collect();
        let (name, text) = (self.name, self.text);
        let cand = candidate(name, text, self.module, &self.schedule, &s, &tiers, "")?;
        let makespan_ps = self.model(&cand, &binds)?;
        let mut ks: Vec<usize> = tiers.iter().map(|x| x.kernel).collect();
        ks.sort_unstable();
        ks.dedup();
        let kernels = if ks.is_empty() {
            Vec::new()
        } else {
            let back = crate::load_source(name, &cand).map_err(|e| e.to_string())?;
            ks.iter()
                .map(|&k| back.module.kernels[k].to_string())
                .collect()
        };
        Ok(Tuned {
            makespan_ps,
            changes,
            schedule: s.to_string(),
            text: cand,
            binds,
            kernels,
            tiers,
            point: point.to_vec(),
        })
    }

    /// The modelled makespan of module text `cand` under the search's and `binds`'
    /// bindings, each distinct text modelled once; its warnings counted, not printed.
    fn model(&mut self, cand: &str, binds: &[String]) -> Result<u64, String> {
        let mut all_binds = self.o.binds.clone();
        all_binds.extend(binds.iter().cloned());
        let key = format!("{cand}\n{}", all_binds.join("\n"));
        if let Some(m) = self.by_text.get(&key) {
            return m.clone();
        }
        let known = self.coverage.get(&all_binds).cloned();
        let opts = RunOptions {
            binds: all_binds.clone(),
            threads: 1,
            model_only: true,
            machine: Some(self.o.machine.clone()),
            collect_warnings: true,
            skip_coverage: known.is_some(),
            ..RunOptions::default()
        };
        let m = run(self.name, cand, false, &opts, &mut |_| {})
            .map_err(|e| e.to_string())
            .and_then(|mut out| {
                match known {
                    Some(cov) => out.warnings.extend(cov),
                    None => {
                        let cov = out.warnings.iter().filter(|w| w.starts_with("warning: "));
                        self.coverage.insert(all_binds, cov.cloned().collect());
                    }
                }
                if !out.warnings.is_empty() {
                    self.warning_candidates += 1;
                }
                for w in out.warnings {
                    *self.warned.entry(w).or_default() += 1;
                }
                out.stats
                    .device
                    .first()
                    .map(|d| d.makespan_ps)
                    .ok_or_else(|| "the run was not modelled".to_string())
            });
        self.by_text.insert(key, m.clone());
        m
    }

    fn out_of_time(&self) -> bool {
        self.t0.elapsed() >= self.o.budget
    }

    /// Updates the progress bar (when drawn): time, points visited, the best so far.
    fn show(&self, what: &str) {
        if let Some(b) = &self.bar {
            let best = self
                .cache
                .values()
                .filter_map(|r| r.as_ref().ok())
                .map(|t| t.makespan_ps)
                .min();
            b.set_position(self.t0.elapsed().as_millis() as u64);
            b.set_message(format!(
                "{} evaluated, best {} ({what})",
                self.cache.len(),
                best.map_or("-".into(), fmt_ps)
            ));
        }
    }

    /// Every point of the space, the first dimension varying fastest.
    fn exhaustive(&mut self) {
        let mut point = vec![0usize; self.dims.len()];
        loop {
            let _ = self.eval(&point);
            self.show("exhaustive");
            let mut k = 0;
            loop {
                if k == self.dims.len() {
                    return;
                }
                point[k] += 1;
                if point[k] < self.dims[k].values.len() {
                    break;
                }
                point[k] = 0;
                k += 1;
            }
        }
    }

    /// Coordinate descent from the module's point, then from seeded random points, until the
    /// budget is spent.
    fn descend(&mut self) {
        let mut rng = self.o.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut start = vec![0usize; self.dims.len()];
        for restart in 0.. {
            let mut cur = start;
            loop {
                let before = cur.clone();
                if !self.sweep(&mut cur, restart) {
                    return;
                }
                if cur == before {
                    break;
                }
            }
            start = self
                .dims
                .iter()
                .map(|d| {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    (rng % d.values.len() as u64) as usize
                })
                .collect();
        }
    }

    /// One sweep of coordinate descent: each dimension in turn set to its best value given the
    /// others (the current value kept on a tie). False when the budget ran out.
    fn sweep(&mut self, cur: &mut [usize], restart: usize) -> bool {
        for k in 0..self.dims.len() {
            let mut best = (u64::MAX, cur[k]);
            for v in 0..self.dims[k].values.len() {
                if self.out_of_time() {
                    return false;
                }
                let mut p = cur.to_vec();
                p[k] = v;
                if let Ok(t) = self.eval(&p)
                    && t.makespan_ps < best.0
                {
                    best = (t.makespan_ps, v);
                }
                self.show(&format!("restart {restart}"));
            }
            cur[k] = best.1;
        }
        true
    }

    /// The result: the best `top` candidates (ties: fewer changes, then the earlier values,
    /// the module's own first in every dimension), the refusals and the warnings.
    fn finish(self, own: Tuned, method: &'static str, space: u128) -> TuneResult {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
        let refused: Vec<&String> = self
            .cache
            .values()
            .filter_map(|r| r.as_ref().err())
            .collect();
        let mut best: Vec<Tuned> = self
            .cache
            .values()
            .filter_map(|r| r.as_ref().ok())
            .cloned()
            .collect();
        best.sort_by(|a, b| {
            a.makespan_ps
                .cmp(&b.makespan_ps)
                .then(a.changes.len().cmp(&b.changes.len()))
                .then(a.point.cmp(&b.point))
        });
        best.truncate(self.o.top.max(1));
        TuneResult {
            own,
            best,
            evaluated: self.cache.len(),
            modelled: self.by_text.len(),
            space: (
                self.dims
                    .iter()
                    .map(|d| (d.name.clone(), d.values.len()))
                    .collect(),
                space,
            ),
            refused: (refused.len(), refused.first().map(|s| (*s).clone())),
            warnings: (self.warning_candidates, self.warned.into_iter().collect()),
            method,
            elapsed: self.t0.elapsed(),
        }
    }
}

/// Searches `text`'s schedule space on the device model (see the module docs).
pub fn tune(name: &str, text: &str, o: &TuneOptions) -> Result<TuneResult, CliError> {
    let loaded = crate::load_source(name, text)?;
    let module: &Module = &loaded.module;
    let schedule = module.schedule.clone().ok_or_else(|| {
        CliError::plain(format!(
            "{name}: no schedule to tune (write `schedule for ENTRY {{ }}` first)"
        ))
    })?;
    let machine = pto_wsp::machine::resolve(&o.machine, |p| std::fs::read_to_string(p))
        .map_err(|e| CliError::plain(e.to_string()))?;
    let cores = u64::from(machine.aic() + machine.aiv());
    let keys = key_candidates(name, text, module);
    let mut dims = dims(&schedule, cores, keys, &o.symbols);
    dims.extend(threshold_dims(name, text, module, &schedule, &o.binds)?);
    let mut search = Search {
        name,
        text,
        module,
        schedule,
        dims,
        o,
        cache: HashMap::new(),
        by_text: HashMap::new(),
        warned: BTreeMap::new(),
        warning_candidates: 0,
        coverage: HashMap::new(),
        t0: Instant::now(),
        bar: progress_bar(o),
    };
    let own = search
        .eval(&vec![0usize; search.dims.len()])
        .map_err(|e| CliError::plain(format!("{name}: the module's own schedule: {e}")))?;
    let per_eval = search.t0.elapsed().max(Duration::from_micros(1));
    let space: u128 = search.dims.iter().map(|d| d.values.len() as u128).product();
    let method = if space * per_eval.as_micros() <= o.budget.as_micros() {
        search.exhaustive();
        "exhaustive (the space fits the budget)"
    } else {
        search.descend();
        "coordinate descent from the module's schedule, then seeded random restarts"
    };
    Ok(search.finish(own, method, space))
}

fn progress_bar(o: &TuneOptions) -> Option<indicatif::ProgressBar> {
    if !o.progress {
        return None;
    }
    // indicatif draws nothing when stderr is not a terminal.
    let b = indicatif::ProgressBar::new(o.budget.as_millis() as u64);
    b.set_style(
        indicatif::ProgressStyle::with_template("tuning [{bar:30}] {elapsed}/{duration} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    Some(b)
}

/// The report of a search: what was searched and how, the module's makespan, then the best
/// schedules, each with its changes and its `.wsp` text (the schedule, and any kernel whose tier
/// bound changed) between ```` ```wsp ```` fences, and the best against the module's.
pub fn report(name: &str, o: &TuneOptions, r: &TuneResult) -> String {
    let mut out = format!(
        "{name}: tuned on {} (device generation) by {}: {} point(s) visited, {} distinct \
         schedule(s) modelled in {:.1} s",
        o.machine,
        r.method,
        r.evaluated,
        r.modelled,
        r.elapsed.as_secs_f64()
    );
    if r.refused.0 > 0 {
        out.push_str(&format!(
            ", {} refused (first: {})",
            r.refused.0,
            r.refused.1.clone().unwrap_or_default()
        ));
    }
    if r.warnings.0 > 0 {
        out.push_str(&format!(
            "\n  {} of {} modelled candidate(s) warned:",
            r.warnings.0, r.modelled
        ));
        for (w, n) in &r.warnings.1 {
            out.push_str(&format!("\n    {n} × {w}"));
        }
    }
    let dims: Vec<String> = r.space.0.iter().map(|(n, k)| format!("{n} {k}")).collect();
    out.push_str(&format!(
        "\n  space: {} candidate(s) = {} (each dimension's first value is the module's own)",
        r.space.1,
        dims.join(" × ")
    ));
    out.push_str(&format!(
        "\n  the module's schedule: {}\n",
        fmt_ps(r.own.makespan_ps)
    ));
    for (i, t) in r.best.iter().enumerate() {
        let ratio = t.makespan_ps as f64 / r.own.makespan_ps.max(1) as f64;
        out.push_str(&format!(
            "  #{}: {} ({:.3}× the module's){}\n",
            i + 1,
            fmt_ps(t.makespan_ps),
            ratio,
            if t.changes.is_empty() {
                ": the module's own schedule".to_string()
            } else {
                format!(": {}", t.changes.join("; "))
            }
        ));
        out.push_str("    ```wsp\n");
        for k in &t.kernels {
            for line in k.lines() {
                out.push_str(&format!("    {line}\n"));
            }
        }
        for line in t.schedule.lines() {
            out.push_str(&format!("    {line}\n"));
        }
        if !t.binds.is_empty() {
            out.push_str(&format!("    // bind: {}\n", t.binds.join(", ")));
        }
        out.push_str("    ```\n");
    }
    if let Some(b) = r.best.first() {
        out.push_str(&format!(
            "  best: {} → {} ({:+.1} %)\n",
            fmt_ps(r.own.makespan_ps),
            fmt_ps(b.makespan_ps),
            (b.makespan_ps as f64 / r.own.makespan_ps.max(1) as f64 - 1.0) * 100.0
        ));
    }
    out
}

/// The best schedule (and its tier bounds) written into the module's text, a comment above
/// the schedule; checked by re-parsing.
pub fn written(
    name: &str,
    text: &str,
    o: &TuneOptions,
    r: &TuneResult,
) -> Result<String, CliError> {
    let best = &r.best[0];
    let loaded = crate::load_source(name, text)?;
    let old = loaded
        .module
        .schedule
        .clone()
        .ok_or_else(|| CliError::plain("no schedule"))?;
    let parsed_best = crate::load_source(name, &best.text)?;
    let new = parsed_best
        .module
        .schedule
        .clone()
        .ok_or_else(|| CliError::plain("no schedule"))?;
    let mut comment = format!(
        "// tuned by pto-wsp tune on {}: modelled {}, the previous schedule {}\n",
        o.machine,
        fmt_ps(best.makespan_ps),
        fmt_ps(r.own.makespan_ps)
    );
    if !best.binds.is_empty() {
        comment.push_str(&format!(
            "// tuned symbol values (bind them): {}\n",
            best.binds.join(", ")
        ));
    }
    let out = candidate(
        name,
        text,
        &loaded.module,
        &old,
        &new,
        &best.tiers,
        &comment,
    )
    .map_err(|e| CliError::plain(format!("{name}: {e}; nothing written")))?;
    let back = crate::load_source(name, &out)?;
    let same = back.module.schedule.as_ref().map(ToString::to_string) == Some(new.to_string());
    if !same {
        return Err(CliError::plain(format!(
            "{name}: the written schedule does not read back as the tuned one; nothing written"
        )));
    }
    Ok(out)
}
