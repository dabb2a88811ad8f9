//! `deps exact` is sound or refused: every written tensor is accessed on one tile grid.
//!
//! Why: under `deps exact` the builder orders two accesses only when their region *keys* are
//! equal. Two accesses to one tensor whose boxes partially overlap (`A[0 +: 2]` and
//! `A[0 +: 1]`) get no edge, and tasks race silently. Whether boxes can partially overlap
//! depends on run-time values in general; what can be decided statically is a sufficient rule.
//!
//! Promise (all static; checked by the validator when the schedule says `deps exact`, and by
//! [`super::validate_for_run`] — what every back end that runs a module calls — when the schedule
//! names no `deps` mode, which also means exact dependencies; expansion alone does not check a
//! module without a `deps` item, see `docs/SEMANTICS.md`): for every tensor that some task writes (`out` or `inout`), every task
//! argument on that tensor, in every workload and process, has
//! - in each dimension the same extent, written the same way, built only from literals and
//!   runtime symbols (which do not change during a run), and
//! - a start that is provably a multiple of that extent (`0`, a literal multiple, `e * extent`,
//!   sums and differences of such).
//!
//! Then any two boxes on the tensor are equal or disjoint, so equal keys are exactly the
//! conflicts. Anything else is reported as [`ValidationError::ExactPartialOverlap`] naming both
//! accesses and suggesting `deps overlap` or `deps hybrid` (which order any intersecting boxes).
//! Nothing is left to run time; the rule is conservative (it refuses some schedules that happen
//! to be safe, e.g. mixed tile sizes ordered by `for_each`).

use super::errors::ValidationError;
use super::pick;
use crate::expr::{BinOp, Expr};
use crate::loc::Loc;
use crate::module::{Module, ParamKind};
use crate::workload::{Arg, Region, Stmt, StmtKind};
use std::collections::HashMap;

/// One region argument of a task statement.
pub(super) struct Access<'m> {
    pub(super) region: &'m Region,
    pub(super) writes: bool,
    /// Whether its statement may run more than once (inside a loop, `select`, `while` or
    /// `consume`, or in a workload other than the entry, which may be called many times).
    pub(super) repeats: bool,
    /// `task k, argument 2 in workload main`.
    pub(super) what: String,
    pub(super) loc: Loc,
    pub(super) path: String,
}

/// Every region argument in `body`, with whether its parameter writes; `repeats` says whether
/// the body itself may run more than once.
fn accesses<'m>(
    m: &'m Module,
    owner: &str,
    body: &'m [Stmt],
    repeats: bool,
    out: &mut Vec<Access<'m>>,
) {
    let mut stack: Vec<(&Stmt, bool)> = body.iter().rev().map(|s| (s, repeats)).collect();
    while let Some((s, repeats)) = stack.pop() {
        match &s.kind {
            StmtKind::Task(t) => {
                let Some(k) = m.kernel(t.kernel.as_str()) else {
                    continue;
                };
                for (i, a) in t.args.iter().enumerate() {
                    let (Arg::Region(r), Some(p)) = (a, k.params.get(i)) else {
                        continue;
                    };
                    let ParamKind::Tile { access, .. } = &p.kind else {
                        continue;
                    };
                    out.push(Access {
                        region: r,
                        writes: access.writes(),
                        repeats,
                        what: format!("task {}, argument {i} in {owner}", t.kernel),
                        loc: pick(r.tensor.loc, s.loc),
                        path: format!("{owner} > task {} > argument {i}", t.kernel),
                    });
                }
            }
            StmtKind::Loop { body, .. }
            | StmtKind::Select { body, .. }
            | StmtKind::Consume { body, .. }
            | StmtKind::While { body, .. } => stack.extend(body.iter().rev().map(|s| (s, true))),
            StmtKind::Combine(body) | StmtKind::Sequential(body) => {
                stack.extend(body.iter().rev().map(|s| (s, repeats)))
            }
            StmtKind::Cond {
                then_body,
                else_body,
                ..
            } => {
                stack.extend(else_body.iter().rev().map(|s| (s, repeats)));
                stack.extend(then_body.iter().rev().map(|s| (s, repeats)));
            }
            StmtKind::SlotSet { .. }
            | StmtKind::SlotLoad { .. }
            | StmtKind::Break { .. }
            | StmtKind::Call { .. }
            | StmtKind::Send { .. } => {}
        }
    }
}

/// Whether `e` is built from literals and runtime symbols only (constant during a run).
fn invariant(m: &Module, e: &Expr) -> bool {
    match e {
        Expr::Int(_) | Expr::UInt(_) | Expr::Float(_) | Expr::Bool(_) => true,
        Expr::Name(id) => m.symbol(id.as_str()).is_some(),
        Expr::Unary(_, a) => invariant(m, a),
        Expr::Binary(..) => {
            let (first, rest) = e.left_spine();
            invariant(m, first) && rest.iter().all(|(_, b)| invariant(m, b))
        }
        Expr::Ternary(c, a, b) => invariant(m, c) && invariant(m, a) && invariant(m, b),
    }
}

fn literal(e: &Expr) -> Option<i128> {
    match e {
        Expr::Int(v) => Some(i128::from(*v)),
        Expr::UInt(v) => Some(i128::from(*v)),
        _ => None,
    }
}

/// Whether `start` is provably a multiple of `extent` for every value of its names.
/// A sum is a multiple when every term is, a product when any factor is; a chain of either is
/// read along its left operands in a loop.
fn multiple_of(start: &Expr, extent: &Expr) -> bool {
    let mut e = start;
    loop {
        if let Some(known) = plainly_multiple(e, extent) {
            return known;
        }
        match e {
            Expr::Binary(BinOp::Mul, a, b) => {
                if multiple_of(b, extent) {
                    return true;
                }
                e = a;
            }
            Expr::Binary(BinOp::Add | BinOp::Sub, a, b) => {
                if !multiple_of(b, extent) {
                    return false;
                }
                e = a;
            }
            _ => return false,
        }
    }
}

/// Whether `start` is a multiple of `extent` by its literals or by being the extent itself;
/// `None` when that does not decide it.
fn plainly_multiple(start: &Expr, extent: &Expr) -> Option<bool> {
    if literal(extent) == Some(1) || literal(start) == Some(0) || start == extent {
        return Some(true);
    }
    if let (Some(s), Some(x)) = (literal(start), literal(extent)) {
        return Some(x != 0 && s % x == 0);
    }
    None
}

/// The extent of a region dimension (`None` written as a bare index is 1).
fn extent(d: &crate::workload::RegionDim) -> Expr {
    d.size.clone().unwrap_or(Expr::Int(1))
}

/// Why access `a` is off the grid of `first` (the tensor's first access), if it is.
fn off_grid(m: &Module, first: &Access<'_>, a: &Access<'_>) -> Option<String> {
    for (d, (fd, ad)) in first.region.dims.iter().zip(&a.region.dims).enumerate() {
        let (fx, ax) = (extent(fd), extent(ad));
        if fx != ax {
            return Some(format!(
                "dimension {d} has extent `{}` there and `{}` here",
                fx, ax
            ));
        }
        if !invariant(m, &ax) {
            return Some(format!(
                "the extent `{}` of dimension {d} can change during the run",
                ax
            ));
        }
        if !multiple_of(&ad.start, &ax) {
            return Some(format!(
                "the start `{}` of dimension {d} is not provably a multiple of its extent `{}`",
                ad.start, ax
            ));
        }
    }
    None
}

/// The `deps` mode the schedule names (the last one written), if it names one.
pub(super) fn named_deps(m: &Module) -> Option<crate::schedule::DepsMode> {
    use crate::schedule::{ScheduleItemKind, TaskGraphItem};
    m.schedule
        .iter()
        .flat_map(|s| &s.items)
        .filter_map(|item| match &item.kind {
            ScheduleItemKind::TaskGraph(items) => Some(items),
            _ => None,
        })
        .flatten()
        .filter_map(|i| match i {
            TaskGraphItem::Deps(mode) => Some(*mode),
            _ => None,
        })
        .next_back()
}

/// Whether the schedule says `deps exact` in so many words.
pub(super) fn asks_for_exact(m: &Module) -> bool {
    named_deps(m) == Some(crate::schedule::DepsMode::Exact)
}

/// Every task region argument of the module (every workload and process, reachable or not),
/// in module order.
pub(super) fn all_accesses(m: &Module) -> Vec<Access<'_>> {
    let entry = m.entry_name();
    let mut all = Vec::new();
    for w in &m.workloads {
        let repeats = entry != Some(w.name.name.as_str());
        accesses(
            m,
            &format!("workload {}", w.name),
            &w.body,
            repeats,
            &mut all,
        );
    }
    for p in &m.pipelines {
        for proc in &p.processes {
            let owner = format!("process {}", proc.name);
            accesses(m, &owner, &proc.body, false, &mut all);
        }
    }
    all
}

/// Reports accesses that could partially overlap under exact dependencies (see the module
/// docs): written `deps exact` (`default` false) or the default (`default` true).
pub(super) fn check_exact_grid(m: &Module, default: bool, errors: &mut Vec<ValidationError>) {
    let all = all_accesses(m);
    let mut by_tensor: HashMap<&str, Vec<&Access<'_>>> = HashMap::new();
    for a in &all {
        by_tensor
            .entry(a.region.tensor.as_str())
            .or_default()
            .push(a);
    }
    let mut tensors: Vec<&&str> = by_tensor.keys().collect();
    tensors.sort();
    for t in tensors {
        let list = &by_tensor[*t];
        if !list.iter().any(|a| a.writes) {
            continue;
        }
        let first = list[0];
        // The first access itself must be on its own grid (aligned, invariant extents).
        for a in list {
            if let Some(why) = off_grid(m, first, a) {
                let (tensor, path) = (t.to_string(), a.path.clone());
                let first = format!("`{}` ({})", first.region, first.what);
                let second = format!("`{}` ({})", a.region, a.what);
                errors.push(if default {
                    ValidationError::DefaultExactPartialOverlap {
                        tensor,
                        first,
                        second,
                        why,
                        loc: a.loc,
                        path,
                    }
                } else {
                    ValidationError::ExactPartialOverlap {
                        tensor,
                        first,
                        second,
                        why,
                        loc: a.loc,
                        path,
                    }
                });
                break; // one report per tensor
            }
        }
    }
}
