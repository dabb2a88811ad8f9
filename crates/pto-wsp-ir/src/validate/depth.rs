//! The total depth of a program: statement nesting plus calls, added up across calls.
//!
//! Why: the expander, the bytecode encoder and interpreter and the CSP processes walk a body by
//! recursion, one level per nested block and per call. The parser bounds nesting *within* one
//! body, but a call chain `main -> w0 -> ... -> w999`, or three workloads each 250 blocks deep
//! calling each other, is small text whose depth adds up past any thread's stack.
//! Promise: every workload and every pipeline process whose total depth — the deepest path of
//! nested blocks (`for`, `if`, `select`, `combine`, `sequential`, `consume`) and calls, each
//! call counting one level plus the callee's own total depth — exceeds [`MAX_TOTAL_DEPTH`] is
//! reported as [`ValidationError::TooDeep`] naming the call chain of its deepest path; only the
//! outermost such body is reported (its callees' excess is the same chain). The walk itself
//! uses explicit stacks, so the check cannot overflow on the input it refuses. Call cycles are
//! reported elsewhere (`RecursiveCall`) and skipped here.

use super::errors::ValidationError;
use super::pick;
use crate::loc::Loc;
use crate::module::Module;
use crate::workload::{Stmt, StmtKind};
use std::collections::HashMap;

/// The most levels of nesting plus calls any workload or process may reach, counted across
/// calls. Back ends recurse once per level; 256 levels fit the stack of every thread that
/// walks a program (checked by tests at exactly this depth).
pub const MAX_TOTAL_DEPTH: usize = 256;

/// What one body contributes on its own: its deepest nesting and its calls.
struct Local {
    /// Deepest block nesting without calls.
    own: usize,
    /// `(depth of the call statement, callee index)`: the call statement is at that depth.
    calls: Vec<(usize, usize)>,
}

/// The children of a statement that are bodies.
fn bodies(s: &Stmt) -> Vec<&[Stmt]> {
    match &s.kind {
        StmtKind::Loop { body, .. }
        | StmtKind::Select { body, .. }
        | StmtKind::Consume { body, .. }
        | StmtKind::While { body, .. }
        | StmtKind::Combine(body)
        | StmtKind::Sequential(body) => vec![body.as_slice()],
        StmtKind::Cond {
            then_body,
            else_body,
            ..
        } => vec![then_body.as_slice(), else_body.as_slice()],
        StmtKind::Task(_)
        | StmtKind::Break { .. }
        | StmtKind::SlotSet { .. }
        | StmtKind::SlotLoad { .. }
        | StmtKind::Call { .. }
        | StmtKind::Send { .. } => Vec::new(),
    }
}

/// Walks `body` with an explicit stack.
fn local(body: &[Stmt], index: &HashMap<&str, usize>) -> Local {
    let mut out = Local {
        own: 0,
        calls: Vec::new(),
    };
    // (statement, the depth of the body it stands in)
    let mut stack: Vec<(&Stmt, usize)> = body.iter().map(|s| (s, 0)).collect();
    while let Some((s, d)) = stack.pop() {
        if let StmtKind::Call { workload, .. } = &s.kind
            && let Some(&callee) = index.get(workload.as_str())
        {
            out.calls.push((d, callee));
        }
        for b in bodies(s) {
            out.own = out.own.max(d + 1);
            stack.extend(b.iter().map(|c| (c, d + 1)));
        }
    }
    out
}

/// The total depth of every workload and, for each, the callee its deepest path goes through
/// (a callee still on the walk's stack closes a cycle and is left out).
fn totals(locals: &[Local]) -> Vec<(Option<usize>, Option<usize>)> {
    let n = locals.len();
    // 0 = unvisited, 1 = on the stack, 2 = done.
    let mut color = vec![0u8; n];
    let mut total: Vec<(Option<usize>, Option<usize>)> = vec![(None, None); n];
    for root in 0..n {
        if color[root] != 0 {
            continue;
        }
        let mut stack = vec![(root, 0usize)];
        color[root] = 1;
        while let Some(&mut (w, ref mut next)) = stack.last_mut() {
            if let Some(&(_, callee)) = locals[w].calls.get(*next) {
                *next += 1;
                if color[callee] == 0 {
                    color[callee] = 1;
                    stack.push((callee, 0));
                }
                continue;
            }
            stack.pop();
            color[w] = 2;
            let mut best = (Some(locals[w].own), None);
            for &(d, callee) in &locals[w].calls {
                if let (Some(t), Some(b)) = (total[callee].0, best.0)
                    && d + 1 + t > b
                {
                    best = (Some(d + 1 + t), Some(callee));
                }
            }
            total[w] = best;
        }
    }
    total
}

/// `main -> w0 -> ... -> w999`, shortened in the middle past 12 names.
fn chain_text(names: &[&str]) -> String {
    if names.len() <= 12 {
        return names.join(" -> ");
    }
    format!(
        "{} -> ... ({} more) -> {}",
        names[..6].join(" -> "),
        names.len() - 9,
        names[names.len() - 3..].join(" -> ")
    )
}

/// Each workload's index by name, its [`local`] depths, and its deepest total depth with the
/// callee it goes through ([`totals`]).
type Totals<'m> = (
    HashMap<&'m str, usize>,
    Vec<Local>,
    Vec<(Option<usize>, Option<usize>)>,
);

/// [`Totals`] of the workloads of `m`.
fn workload_totals(m: &Module) -> Totals<'_> {
    let index: HashMap<&str, usize> = m
        .workloads
        .iter()
        .enumerate()
        .map(|(i, w)| (w.name.as_str(), i))
        .collect();
    let locals: Vec<Local> = m.workloads.iter().map(|w| local(&w.body, &index)).collect();
    let total = totals(&locals);
    (index, locals, total)
}

/// The deepest total depth (nesting plus calls, across calls) of any workload or pipeline
/// process of `m`, as [`MAX_TOTAL_DEPTH`] counts it; call cycles are left out. A run uses the
/// stack of a walk this deep: a caller can tell whether its own thread has the stack for it.
pub fn total_depth(m: &Module) -> usize {
    let (index, _, total) = workload_totals(m);
    let workloads = total.iter().filter_map(|t| t.0).max().unwrap_or(0);
    let processes = m.pipelines.iter().flat_map(|p| &p.processes).map(|proc| {
        let l = local(&proc.body, &index);
        l.calls
            .iter()
            .filter_map(|&(d, callee)| total[callee].0.map(|t| d + 1 + t))
            .fold(l.own, usize::max)
    });
    processes.fold(workloads, usize::max)
}

/// Reports every outermost workload or process deeper than [`MAX_TOTAL_DEPTH`].
pub(super) fn check_total_depth<'m>(m: &'m Module, errors: &mut Vec<ValidationError>) {
    let (index, locals, total) = workload_totals(m);
    // The chain of workloads a deepest path goes through, from `w`.
    let chain_from = |mut w: usize, names: &mut Vec<&'m str>| {
        names.push(m.workloads[w].name.as_str());
        while let Some(next) = total[w].1 {
            // `.1` points to a workload finished earlier in the walk: never back.
            names.push(m.workloads[next].name.as_str());
            w = next;
        }
    };
    let too_deep = |t: Option<usize>| t.is_some_and(|t| t > MAX_TOTAL_DEPTH);
    let mut called_by_deep = vec![false; m.workloads.len()];
    for (w, l) in locals.iter().enumerate() {
        if too_deep(total[w].0) {
            for &(_, c) in &l.calls {
                called_by_deep[c] = true;
            }
        }
    }
    let mut report = |what: String, depth: usize, names: Vec<&str>, loc: Loc, path: String| {
        errors.push(ValidationError::TooDeep {
            what,
            depth,
            limit: MAX_TOTAL_DEPTH,
            chain: chain_text(&names),
            loc,
            path,
        });
    };
    for (w, wl) in m.workloads.iter().enumerate() {
        if let (Some(t), false) = (total[w].0, called_by_deep[w])
            && t > MAX_TOTAL_DEPTH
        {
            let mut names = Vec::new();
            chain_from(w, &mut names);
            report(
                format!("workload `{}`", wl.name),
                t,
                names,
                pick(wl.name.loc, wl.loc),
                format!("workload {}", wl.name),
            );
        }
    }
    for p in &m.pipelines {
        for proc in &p.processes {
            let l = local(&proc.body, &index);
            let mut best = (l.own, None);
            for &(d, callee) in &l.calls {
                if let Some(t) = total[callee].0
                    && d + 1 + t > best.0
                {
                    best = (d + 1 + t, Some(callee));
                }
            }
            if best.0 > MAX_TOTAL_DEPTH {
                let mut names = vec![proc.name.as_str()];
                if let Some(c) = best.1 {
                    chain_from(c, &mut names);
                }
                report(
                    format!("process `{}` of pipeline `{}`", proc.name, p.name),
                    best.0,
                    names,
                    pick(proc.name.loc, proc.loc),
                    format!("pipeline {} > process {}", p.name, proc.name),
                );
            }
        }
    }
}
