//! Checks of the schedule: its target, its items, and the names its expressions use.
//!
//! Why: a schedule is evaluated once per task, so every name its expressions use must have a
//! value at *every* task the entry can generate (`SEMANTICS.md`, "Names and scopes"); and its
//! numbers (windows, depths, partitions, levels) must make sense before a runtime trusts them.
//! Promise: the bound-variable analysis follows calls (a callee's own parameters and loop
//! variables count at its tasks, the caller's do not), visits each workload's body once
//! (memoised), and stops at call cycles (reported elsewhere) instead of looping.

use super::errors::ValidationError;
use super::typeck::Expected;
use super::{Decl, NameScope, Validator, pick};
use crate::expr::Expr;
use crate::loc::{Ident, Loc};
use crate::schedule::{
    Dispatch, Levels, ReadyPolicy, Schedule, ScheduleItemKind, StartPolicy, TaskGraphItem, Timing,
    TracePolicy, limits,
};
use crate::types::ScalarType;
use crate::workload::{Stmt, StmtKind};
use std::collections::{BTreeSet, HashMap, HashSet};

/// How a variable named by a schedule expression is bound across the entry's tasks.
#[derive(Clone, Debug)]
pub(crate) enum Binding {
    /// Bound at every task, with this type (at the first task).
    Everywhere(ScalarType),
    /// Missing at this task (the first one in program order).
    MissingAt {
        /// The task's kernel.
        task: String,
        /// The path to the task.
        task_path: String,
    },
}

/// What the tasks of one body say about the candidate names.
#[derive(Clone, Default)]
struct Summary {
    /// First task (kernel, path relative to the body) where a name is not bound.
    missing: HashMap<String, (String, String)>,
    /// Type of a name at the first task where it is bound.
    ty: HashMap<String, ScalarType>,
}

/// The keyword of a schedule item.
fn item_keyword(kind: &ScheduleItemKind) -> &'static str {
    match kind {
        ScheduleItemKind::Executors(_) => "executors",
        ScheduleItemKind::Dispatch(_) => "dispatch",
        ScheduleItemKind::Streams(_) => "streams",
        ScheduleItemKind::StreamBy(_) => "stream_by",
        ScheduleItemKind::Timing(_) => "timing",
        ScheduleItemKind::TaskGraph(_) => "task_graph",
        ScheduleItemKind::TaskWindow(..) => "task_window",
        ScheduleItemKind::PipelineDepth(..) => "pipeline_depth",
        ScheduleItemKind::BatchDeps(_) => "batch_deps",
        ScheduleItemKind::DispatchThreshold(_) => "dispatch_threshold",
    }
}

/// A schedule expression waiting for its names to be checked.
struct SchedExpr<'m> {
    expr: &'m Expr,
    item: &'static str,
    loc: Loc,
    path: String,
}

/// What the items of a schedule leave to be checked together.
#[derive(Default)]
struct Items<'m> {
    /// Expressions whose names are checked once the tasks are known.
    exprs: Vec<SchedExpr<'m>>,
    executors: Option<u64>,
    /// `static_partition` start counts, with where they are.
    partitions: Vec<(usize, Loc, String)>,
}

impl<'m> Validator<'m> {
    pub(super) fn check_schedule(&mut self) {
        let m = self.m;
        let Some(s) = &m.schedule else { return };
        let spath = format!("schedule for {}", s.target);
        let entry = self.schedule_entry(s, &spath);
        let mut seen: HashSet<&'static str> = HashSet::new();
        let mut items = Items::default();
        for item in &s.items {
            let kw = item_keyword(&item.kind);
            let path = format!("{spath} > {kw}");
            let loc = pick(item.loc, s.loc);
            if !seen.insert(kw) {
                self.push(ValidationError::DuplicateScheduleItem {
                    item: kw,
                    block: "the schedule",
                    loc,
                    path: path.clone(),
                });
            }
            self.schedule_item(&item.kind, loc, &path, &mut items);
        }
        if let Some(n) = items.executors {
            for (len, loc, path) in items.partitions {
                if len as u64 != n && len > 0 {
                    self.push(ValidationError::PartitionExecutors {
                        starts: len,
                        executors: n,
                        loc,
                        path,
                    });
                }
            }
        }
        self.schedule_exprs(entry, items.exprs);
    }

    /// The schedule's target: a workload (whose parameters are then checked as an entry's) or
    /// a pipeline.
    fn schedule_entry(&mut self, s: &'m Schedule, spath: &str) -> Option<Decl> {
        let m = self.m;
        let tloc = pick(s.target.loc, s.loc);
        match self.g.get(&s.target.name) {
            Some(Decl::Workload(i)) => {
                if let Some(w) = m.workloads.get(i) {
                    self.check_entry_params(w);
                }
                Some(Decl::Workload(i))
            }
            Some(d @ Decl::Pipeline(_)) => Some(d),
            Some(d) => {
                self.push(ValidationError::WrongKind {
                    name: s.target.name.clone(),
                    found: d.article(),
                    expected: "a workload or pipeline",
                    loc: tloc,
                    path: spath.to_string(),
                });
                None
            }
            None => {
                self.push(ValidationError::UnknownScheduleTarget {
                    name: s.target.name.clone(),
                    loc: tloc,
                    path: spath.to_string(),
                });
                None
            }
        }
    }

    /// A count that must not be 0.
    fn nonzero(&mut self, n: u64, what: &str, loc: Loc, path: &str) {
        if n == 0 {
            self.push(ValidationError::ZeroValue {
                what: what.to_string(),
                loc,
                path: path.to_string(),
            });
        }
    }

    /// A count in 1 ..= limit (`crate::schedule::limits`).
    fn in_range(&mut self, n: u64, what: &str, limit: u64, loc: Loc, path: &str) {
        self.nonzero(n, what, loc, path);
        if n > limit {
            self.push(ValidationError::OverLimit {
                what: what.to_string(),
                value: n,
                limit,
                loc,
                path: path.to_string(),
            });
        }
    }

    /// One schedule item.
    fn schedule_item(
        &mut self,
        kind: &'m ScheduleItemKind,
        loc: Loc,
        path: &str,
        items: &mut Items<'m>,
    ) {
        match kind {
            ScheduleItemKind::Executors(n) => {
                self.in_range(*n, "`executors`", limits::EXECUTORS, loc, path);
                items.executors = Some(*n);
            }
            ScheduleItemKind::Dispatch(d) => {
                self.check_dispatch(d, loc, path, &mut items.exprs, &mut items.partitions);
            }
            ScheduleItemKind::Streams(n) => {
                self.in_range(*n, "`streams`", limits::STREAMS, loc, path)
            }
            ScheduleItemKind::StreamBy(e) => items.exprs.push(SchedExpr {
                expr: e,
                item: "stream_by",
                loc,
                path: path.to_string(),
            }),
            ScheduleItemKind::Timing(t) => match t {
                Timing::Immediate => {}
                Timing::Batched(n) => self.nonzero(*n, "the batch size of `batched`", loc, path),
                Timing::Interleaved(n) => {
                    self.nonzero(*n, "the group count of `interleaved`", loc, path)
                }
                Timing::RateLimit(n) => self.nonzero(*n, "the rate of `rate_limit`", loc, path),
            },
            ScheduleItemKind::TaskGraph(tg) => self.task_graph_items(tg, loc, path, items),
            ScheduleItemKind::TaskWindow(n, _) => {
                self.in_range(*n, "`task_window`", limits::TASK_WINDOW, loc, path);
            }
            ScheduleItemKind::PipelineDepth(n, _) => {
                self.in_range(*n, "`pipeline_depth`", limits::PIPELINE_DEPTH, loc, path);
            }
            ScheduleItemKind::BatchDeps(n) => {
                self.in_range(*n, "`batch_deps`", limits::BATCH_DEPS, loc, path);
            }
            ScheduleItemKind::DispatchThreshold(levels) => {
                self.check_levels(levels, "dispatch_threshold", loc, path, &mut items.exprs);
            }
        }
    }

    /// The items of a `task_graph` block.
    fn task_graph_items(
        &mut self,
        tg: &'m [TaskGraphItem],
        loc: Loc,
        path: &str,
        items: &mut Items<'m>,
    ) {
        let mut sub: HashSet<&'static str> = HashSet::new();
        for it in tg {
            let skw = it.keyword();
            let ipath = format!("{path} > {skw}");
            if !sub.insert(skw) {
                self.push(ValidationError::DuplicateScheduleItem {
                    item: skw,
                    block: "`task_graph`",
                    loc,
                    path: ipath.clone(),
                });
            }
            let expr = |expr, item| SchedExpr {
                expr,
                item,
                loc,
                path: ipath.clone(),
            };
            match it {
                TaskGraphItem::Deps(_) | TaskGraphItem::Pools(_) => {}
                TaskGraphItem::Ready(r) => match r {
                    ReadyPolicy::Fifo | ReadyPolicy::WorkSteal => {}
                    ReadyPolicy::Priority(e) => items.exprs.push(expr(e, "priority")),
                },
                TaskGraphItem::Start(st) => match st {
                    StartPolicy::AfterOrchestration | StartPolicy::Immediate => {}
                    StartPolicy::Threshold(n) => {
                        if *n == 0 {
                            self.push(ValidationError::ZeroValue {
                                what: "the task count of `start threshold`".into(),
                                loc,
                                path: ipath,
                            });
                        }
                    }
                },
                TaskGraphItem::Trace(t) => match t {
                    TracePolicy::None | TracePolicy::Wall | TracePolicy::Cycles(None, _) => {}
                    TracePolicy::Cycles(Some(e), _) => items.exprs.push(expr(e, "cycles")),
                },
            }
        }
    }

    /// Checks the schedule's expressions; names that are not symbols or slots are looked up at
    /// the entry's tasks.
    fn schedule_exprs(&mut self, entry: Option<Decl>, exprs: Vec<SchedExpr<'m>>) {
        let mut candidates: BTreeSet<String> = BTreeSet::new();
        for se in &exprs {
            se.expr.for_each_name(&mut |id| {
                if !matches!(self.g.get(&id.name), Some(Decl::Symbol(_) | Decl::Slot(_))) {
                    candidates.insert(id.name.clone());
                }
            });
        }
        let mut bound: HashMap<String, Binding> = HashMap::new();
        if !candidates.is_empty()
            && let Some(entry) = entry
        {
            let summary = self.entry_summary(entry, &candidates);
            for c in &candidates {
                if let Some((task, task_path)) = summary.missing.get(c) {
                    bound.insert(
                        c.clone(),
                        Binding::MissingAt {
                            task: task.clone(),
                            task_path: task_path.clone(),
                        },
                    );
                } else if let Some(t) = summary.ty.get(c) {
                    bound.insert(c.clone(), Binding::Everywhere(*t));
                }
            }
        }
        if entry.is_none() {
            // Without an entry there are no tasks to bind variables: checking the names would
            // only repeat the target's error.
            return;
        }
        for se in exprs {
            let scope = NameScope::Schedule(&bound, se.item);
            let item = se.item;
            let ctx = move || format!("the expression of `{item}`");
            self.check_expr(
                se.expr,
                Some(Expected::Integer),
                &ctx,
                &scope,
                se.loc,
                &se.path,
            );
        }
    }

    fn check_dispatch(
        &mut self,
        d: &'m Dispatch,
        loc: Loc,
        path: &str,
        exprs: &mut Vec<SchedExpr<'m>>,
        partitions: &mut Vec<(usize, Loc, String)>,
    ) {
        match d {
            Dispatch::RoundRobin(n) => {
                if *n == 0 {
                    self.push(ValidationError::ZeroValue {
                        what: "the executor count of `round_robin`".into(),
                        loc,
                        path: path.to_string(),
                    });
                }
            }
            Dispatch::Affinity(e) => exprs.push(SchedExpr {
                expr: e,
                item: "affinity",
                loc,
                path: path.to_string(),
            }),
            Dispatch::Hash(e) => exprs.push(SchedExpr {
                expr: e,
                item: "hash",
                loc,
                path: path.to_string(),
            }),
            Dispatch::Threshold(levels) => {
                let path = format!("{path} > threshold");
                self.check_levels(levels, "threshold", loc, &path, exprs);
                for (bound, inner) in &levels.levels {
                    let p = format!("{path} > below {bound}");
                    self.check_dispatch(inner, loc, &p, exprs, partitions);
                }
                let p = format!("{path} > else");
                self.check_dispatch(&levels.otherwise, loc, &p, exprs, partitions);
            }
            Dispatch::StaticPartition(starts) => {
                let path = path.to_string();
                partitions.push((starts.len(), loc, path.clone()));
                match starts.first() {
                    None => self.push(ValidationError::EmptyStaticPartition { loc, path }),
                    Some(&first) => {
                        if first != 0 {
                            self.push(ValidationError::StaticPartitionStart {
                                first,
                                loc,
                                path: path.clone(),
                            });
                        }
                        for w in starts.windows(2) {
                            if w[1] <= w[0] {
                                self.push(ValidationError::StaticPartitionOrder {
                                    prev: w[0],
                                    next: w[1],
                                    loc,
                                    path: path.clone(),
                                });
                            }
                        }
                    }
                }
            }
            Dispatch::WorkSteal => {}
        }
    }

    /// Checks that level bounds strictly increase and queues the metric.
    fn check_levels<T>(
        &mut self,
        levels: &'m Levels<T>,
        item: &'static str,
        loc: Loc,
        path: &str,
        exprs: &mut Vec<SchedExpr<'m>>,
    ) {
        for w in levels.levels.windows(2) {
            if w[1].0 <= w[0].0 {
                self.push(ValidationError::LevelOrder {
                    item,
                    prev: w[0].0,
                    next: w[1].0,
                    loc,
                    path: path.to_string(),
                });
            }
        }
        exprs.push(SchedExpr {
            expr: &levels.metric,
            item,
            loc,
            path: path.to_string(),
        });
    }

    /// What the tasks reachable from the entry say about `candidates`, with paths from the
    /// entry's root.
    fn entry_summary(&self, entry: Decl, candidates: &BTreeSet<String>) -> Summary {
        let mut memo: HashMap<usize, Summary> = HashMap::new();
        let mut visiting: HashSet<usize> = HashSet::new();
        let mut out = Summary::default();
        match entry {
            Decl::Workload(i) => {
                let s = self.workload_summary(i, candidates, &mut memo, &mut visiting);
                let root = self
                    .m
                    .workloads
                    .get(i)
                    .map_or(String::new(), |w| format!("workload {}", w.name));
                merge(&mut out, &s, &root);
            }
            Decl::Pipeline(i) => {
                if let Some(p) = self.m.pipelines.get(i) {
                    for proc in &p.processes {
                        let mut s = Summary::default();
                        self.summarize(
                            &proc.body,
                            &mut Vec::new(),
                            &mut Vec::new(),
                            candidates,
                            &mut s,
                            &mut memo,
                            &mut visiting,
                        );
                        merge(
                            &mut out,
                            &s,
                            &format!("pipeline {} > process {}", p.name, proc.name),
                        );
                    }
                }
            }
            Decl::Symbol(_) | Decl::Slot(_) | Decl::Tensor(_) | Decl::Axis(_) | Decl::Kernel(_) => {
            }
        }
        out
    }

    fn workload_summary(
        &self,
        i: usize,
        candidates: &BTreeSet<String>,
        memo: &mut HashMap<usize, Summary>,
        visiting: &mut HashSet<usize>,
    ) -> Summary {
        if let Some(s) = memo.get(&i) {
            return s.clone();
        }
        let Some(w) = self.m.workloads.get(i) else {
            return Summary::default();
        };
        visiting.insert(i);
        let mut bound: Vec<(String, ScalarType)> = w
            .params
            .iter()
            .map(|(id, t)| (id.name.clone(), *t))
            .collect();
        let mut s = Summary::default();
        self.summarize(
            &w.body,
            &mut bound,
            &mut Vec::new(),
            candidates,
            &mut s,
            memo,
            visiting,
        );
        visiting.remove(&i);
        memo.insert(i, s.clone());
        s
    }

    #[allow(clippy::too_many_arguments)]
    fn summarize(
        &self,
        body: &[Stmt],
        bound: &mut Vec<(String, ScalarType)>,
        path: &mut Vec<String>,
        candidates: &BTreeSet<String>,
        out: &mut Summary,
        memo: &mut HashMap<usize, Summary>,
        visiting: &mut HashSet<usize>,
    ) {
        for s in body {
            match &s.kind {
                StmtKind::Task(t) => {
                    let mut here = path.clone();
                    here.push(format!("task {}", t.kernel));
                    let here = here.join(" > ");
                    for c in candidates {
                        match bound.iter().rev().find(|(n, _)| n == c) {
                            Some((_, ty)) => {
                                out.ty.entry(c.clone()).or_insert(*ty);
                            }
                            None => {
                                out.missing
                                    .entry(c.clone())
                                    .or_insert_with(|| (t.kernel.name.clone(), here.clone()));
                            }
                        }
                    }
                }
                StmtKind::Call { workload, .. } => {
                    let Some(Decl::Workload(wi)) = self.g.get(&workload.name) else {
                        continue;
                    };
                    if visiting.contains(&wi) {
                        continue;
                    }
                    let callee = self.workload_summary(wi, candidates, memo, visiting);
                    let mut here = path.clone();
                    here.push(format!("call {workload}"));
                    merge(out, &callee, &here.join(" > "));
                }
                kind => {
                    for (seg, vars, body) in scopes(kind) {
                        let before = bound.len();
                        bound.extend(vars.iter().map(|v| (v.name.clone(), ScalarType::I64)));
                        path.push(seg);
                        self.summarize(body, bound, path, candidates, out, memo, visiting);
                        path.pop();
                        bound.truncate(before);
                    }
                }
            }
        }
    }
}

/// Adds `from` (paths relative to `prefix`) to `into`, keeping `into`'s earlier findings.
fn merge(into: &mut Summary, from: &Summary, prefix: &str) {
    for (name, (task, rel)) in &from.missing {
        into.missing.entry(name.clone()).or_insert_with(|| {
            let path = if prefix.is_empty() {
                rel.clone()
            } else {
                format!("{prefix} > {rel}")
            };
            (task.clone(), path)
        });
    }
    for (name, ty) in &from.ty {
        into.ty.entry(name.clone()).or_insert(*ty);
    }
}

fn names(vars: &[&crate::loc::Ident]) -> String {
    let v: Vec<&str> = vars.iter().map(|i| i.as_str()).collect();
    v.join(", ")
}

/// The bodies a statement encloses, each with its path segment and the variables it binds
/// (none for a task, a call or a statement without a body).
fn scopes(kind: &StmtKind) -> Vec<(String, Vec<&Ident>, &[Stmt])> {
    match kind {
        StmtKind::Loop {
            order, vars, body, ..
        } => {
            let vs: Vec<&Ident> = vars.iter().collect();
            let seg = format!("{} {}", order.keyword(), names(&vs));
            vec![(seg, vs, body)]
        }
        StmtKind::Select { vars, body, .. } => {
            let vs: Vec<&Ident> = vars.iter().collect();
            let seg = format!("select {}", names(&vs));
            vec![(seg, vs, body)]
        }
        StmtKind::Cond {
            then_body,
            else_body,
            ..
        } => vec![
            ("if".into(), vec![], then_body),
            ("else".into(), vec![], else_body),
        ],
        StmtKind::While { body, .. } => vec![("while".into(), vec![], body)],
        StmtKind::Combine(b) => vec![("combine".into(), vec![], b)],
        StmtKind::Sequential(b) => vec![("sequential".into(), vec![], b)],
        StmtKind::Consume {
            channel, var, body, ..
        } => vec![(format!("consume {channel} as {var}"), vec![var], body)],
        StmtKind::Task(_)
        | StmtKind::Call { .. }
        | StmtKind::SlotSet { .. }
        | StmtKind::SlotLoad { .. }
        | StmtKind::Send { .. }
        | StmtKind::Break { .. } => vec![],
    }
}
