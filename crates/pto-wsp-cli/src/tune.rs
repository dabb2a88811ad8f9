//! `pto-wsp tune FILE`: searches the schedule space a module leaves open on the device timeline
//! model, within a time budget, and can write the best schedule back as `.wsp` text.
//!
//! Why: which schedule is best depends on the machine (cores by kind, generation and handshake
//! costs), and users choose before they have a device. The model is deterministic, so one
//! evaluation per candidate suffices.
//!
//! Promises:
//! - **Space**: executors, dispatch (the module's, `work_steal`, `round_robin(E)`), ready policy,
//!   task window (size and mode as one dimension), pipeline depth, dependency batching, start
//!   policy, pools (`single`, `by_exec_unit`), and the values of symbols named by `--tune NAME=V1,V2,...` (e.g. a split-KV chunk
//!   size). Never `deps` (it decides correctness, not speed) nor `trace`.
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

use std::collections::HashMap;
use std::time::{Duration, Instant};

use pto_wsp::ir::{
    Dispatch, GateScope, Module, PoolsPolicy, ReadyPolicy, Schedule, ScheduleItem,
    ScheduleItemKind, StartPolicy, TaskGraphItem, WindowMode,
};

use crate::cmd::run::{RunOptions, cpu::run};
use crate::{CliError, fmt_ps};

/// One dimension: its name and its values as schedule edits.
struct Dim {
    values: Vec<Value>,
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

/// The dimensions of `schedule` on a machine with `cores` cores, module's value first.
fn dims(schedule: &Schedule, cores: u64, symbols: &[(String, Vec<String>)]) -> Vec<Dim> {
    let mut executors = None;
    let mut dispatch = None;
    let (mut window, mut depth, mut batch) = (None, None, 1);
    let (mut ready, mut start) = (ReadyPolicy::Fifo, StartPolicy::Immediate);
    let mut pools = PoolsPolicy::Single;
    for it in &schedule.items {
        match &it.kind {
            ScheduleItemKind::Executors(n) => executors = Some(*n),
            ScheduleItemKind::Dispatch(d) => dispatch = Some(d.clone()),
            ScheduleItemKind::TaskWindow(n, m) => window = Some((*n, *m)),
            ScheduleItemKind::PipelineDepth(n, s) => depth = Some((*n, *s)),
            ScheduleItemKind::BatchDeps(n) => batch = *n,
            ScheduleItemKind::TaskGraph(items) => {
                for t in items {
                    match t {
                        TaskGraphItem::Ready(r) => ready = r.clone(),
                        TaskGraphItem::Start(s) => start = *s,
                        TaskGraphItem::Pools(p) => pools = *p,
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    let e = executors.unwrap_or(1);
    fn with<T: PartialEq>(first: T, rest: Vec<T>) -> Vec<T> {
        let mut v = vec![first];
        for r in rest {
            if !v.contains(&r) {
                v.push(r);
            }
        }
        v
    }
    let mut out = vec![
        Dim {
            values: with(e, vec![cores / 3, cores * 2 / 3, cores])
                .into_iter()
                .filter(|&n| n > 0)
                .map(Value::Executors)
                .collect(),
        },
        Dim {
            values: with(
                dispatch.clone().unwrap_or(Dispatch::WorkSteal),
                vec![Dispatch::WorkSteal, Dispatch::RoundRobin(e)],
            )
            .into_iter()
            .map(Value::Dispatch)
            .collect(),
        },
        Dim {
            values: with(ready, vec![ReadyPolicy::Fifo, ReadyPolicy::WorkSteal])
                .into_iter()
                .map(Value::Ready)
                .collect(),
        },
        Dim {
            values: with(
                window,
                [None, Some(512), Some(2048), Some(8192), Some(32768)]
                    .into_iter()
                    .map(|w| w.map(|n| (n, WindowMode::Stall)))
                    .collect(),
            )
            .into_iter()
            .map(Value::Window)
            .collect(),
        },
        Dim {
            values: with(depth, vec![None, Some((cores, GateScope::Global))])
                .into_iter()
                .map(Value::Depth)
                .collect(),
        },
        Dim {
            values: with(batch, vec![1, 4, 16])
                .into_iter()
                .map(Value::Batch)
                .collect(),
        },
        Dim {
            values: with(
                start,
                vec![
                    StartPolicy::Immediate,
                    StartPolicy::Threshold(cores),
                    StartPolicy::AfterOrchestration,
                ],
            )
            .into_iter()
            .map(Value::Start)
            .collect(),
        },
        Dim {
            values: with(pools, vec![PoolsPolicy::Single, PoolsPolicy::ByExecUnit])
                .into_iter()
                .map(Value::Pools)
                .collect(),
        },
    ];
    for (name, values) in symbols {
        out.push(Dim {
            values: values
                .iter()
                .map(|v| Value::Symbol(name.clone(), v.clone()))
                .collect(),
        });
    }
    out
}

/// `schedule` with the values of `point` applied.
fn apply(schedule: &Schedule, dims: &[Dim], point: &[usize]) -> (Schedule, Vec<String>) {
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
    (
        Schedule {
            target: schedule.target.clone(),
            items: out,
            loc: schedule.loc,
        },
        binds,
    )
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
}

/// What a search found.
pub struct TuneResult {
    /// The module's own schedule.
    pub own: Tuned,
    /// The best schedules, best first.
    pub best: Vec<Tuned>,
    /// Evaluations (distinct points) and refused candidates.
    pub evaluated: usize,
    /// Candidates the model refused (with the first reason).
    pub refused: (usize, Option<String>),
    /// The method used.
    pub method: &'static str,
    /// Wall time of the search.
    pub elapsed: Duration,
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
    let dims = dims(&schedule, cores, &o.symbols);
    let t0 = Instant::now();
    let bar = progress_bar(o);
    let mut cache: HashMap<Vec<usize>, Result<Tuned, String>> = HashMap::new();
    let own_point = vec![0usize; dims.len()];
    let eval = |point: &[usize], cache: &mut HashMap<Vec<usize>, Result<Tuned, String>>| {
        if let Some(r) = cache.get(point) {
            return r.clone();
        }
        let (s, binds) = apply(&schedule, &dims, point);
        let changes: Vec<String> = dims
            .iter()
            .zip(point)
            .filter(|(_, i)| **i != 0)
            .map(|(d, &i)| format!("{} → {}", d.values[0], d.values[i]))
            .collect();
        let candidate = splice(text, &schedule, &s, "");
        let mut all_binds = o.binds.clone();
        all_binds.extend(binds.iter().cloned());
        let opts = RunOptions {
            binds: all_binds,
            threads: 1,
            model_only: true,
            machine: Some(o.machine.clone()),
            ..RunOptions::default()
        };
        let r = run(name, &candidate, false, &opts, &mut |_| {})
            .map_err(|e| e.to_string())
            .and_then(|out| {
                out.stats
                    .device
                    .first()
                    .map(|d| Tuned {
                        makespan_ps: d.makespan_ps,
                        changes,
                        schedule: s.to_string(),
                        text: candidate.clone(),
                        binds,
                    })
                    .ok_or_else(|| "the run was not modelled".to_string())
            });
        cache.insert(point.to_vec(), r.clone());
        r
    };
    let own = eval(&own_point, &mut cache)
        .map_err(|e| CliError::plain(format!("{name}: the module's own schedule: {e}")))?;
    let per_eval = t0.elapsed().max(Duration::from_micros(1));
    let space: u128 = dims.iter().map(|d| d.values.len() as u128).product();
    let fits = space * per_eval.as_micros() <= o.budget.as_micros();
    let out_of_time = |t0: &Instant| t0.elapsed() >= o.budget;
    let show = |bar: &Option<indicatif::ProgressBar>,
                cache: &HashMap<Vec<usize>, Result<Tuned, String>>,
                what: &str| {
        if let Some(b) = bar {
            let best = cache
                .values()
                .filter_map(|r| r.as_ref().ok())
                .map(|t| t.makespan_ps)
                .min();
            b.set_position(t0.elapsed().as_millis() as u64);
            b.set_message(format!(
                "{} evaluated, best {} ({what})",
                cache.len(),
                best.map_or("-".into(), fmt_ps)
            ));
        }
    };
    let method;
    if fits {
        method = "exhaustive (the space fits the budget)";
        let mut point = vec![0usize; dims.len()];
        'all: loop {
            let _ = eval(&point, &mut cache);
            show(&bar, &cache, "exhaustive");
            let mut k = 0;
            loop {
                if k == dims.len() {
                    break 'all;
                }
                point[k] += 1;
                if point[k] < dims[k].values.len() {
                    break;
                }
                point[k] = 0;
                k += 1;
            }
        }
    } else {
        method = "coordinate descent from the module's schedule, then seeded random restarts";
        let mut rng = o.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut start = own_point.clone();
        let mut restart = 0;
        'search: loop {
            let mut cur = start.clone();
            loop {
                let before = cur.clone();
                for k in 0..dims.len() {
                    let mut best = (u64::MAX, cur[k]);
                    for v in 0..dims[k].values.len() {
                        if out_of_time(&t0) {
                            break 'search;
                        }
                        let mut p = cur.clone();
                        p[k] = v;
                        if let Ok(t) = eval(&p, &mut cache)
                            && t.makespan_ps < best.0
                        {
                            best = (t.makespan_ps, v);
                        }
                        show(&bar, &cache, &format!("restart {restart}"));
                    }
                    cur[k] = best.1;
                }
                if cur == before {
                    break;
                }
            }
            restart += 1;
            start = dims
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
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let refused: Vec<&String> = cache.values().filter_map(|r| r.as_ref().err()).collect();
    let mut best: Vec<Tuned> = cache
        .values()
        .filter_map(|r| r.as_ref().ok())
        .cloned()
        .collect();
    best.sort_by(|a, b| {
        a.makespan_ps
            .cmp(&b.makespan_ps)
            .then(a.changes.len().cmp(&b.changes.len()))
    });
    best.truncate(o.top.max(1));
    Ok(TuneResult {
        own,
        best,
        evaluated: cache.len(),
        refused: (refused.len(), refused.first().map(|s| (*s).clone())),
        method,
        elapsed: t0.elapsed(),
    })
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

/// The report of a search.
pub fn report(name: &str, o: &TuneOptions, r: &TuneResult) -> String {
    let mut out = format!(
        "{name}: tuned on {} (device generation) by {}: {} schedule(s) evaluated in {:.1} s",
        o.machine,
        r.method,
        r.evaluated,
        r.elapsed.as_secs_f64()
    );
    if r.refused.0 > 0 {
        out.push_str(&format!(
            ", {} refused (first: {})",
            r.refused.0,
            r.refused.1.clone().unwrap_or_default()
        ));
    }
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
    }
    out
}

/// The best schedule written into the module's text (checked by re-parsing).
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
    let out = splice(text, &old, &new, &comment);
    let back = crate::load_source(name, &out)?;
    let same = back.module.schedule.as_ref().map(ToString::to_string) == Some(new.to_string());
    if !same {
        return Err(CliError::plain(format!(
            "{name}: the written schedule does not read back as the tuned one; nothing written"
        )));
    }
    Ok(out)
}
