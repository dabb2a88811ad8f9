//! `deps explicit` is sound or refused for runs: no task-written tensor is touched twice.
//!
//! Why: under `deps explicit` the builder infers no dependencies; only the structural orders
//! (`for_each`, `sequential`, process order, channels) order tasks. Two tasks that touch one
//! tensor, at least one writing, race unless that structure orders them, and whether their
//! regions intersect depends in general on run-time values.
//!
//! Promise (all static; checked by [`super::validate_for_run`], which every back end that runs
//! a module calls, when the schedule says `deps explicit`; expansion alone does not check it):
//! for every tensor some task writes (`out` or `inout`), the module has exactly one task
//! argument on it, and that argument's statement runs at most once (in the entry workload or a
//! process body, not inside a loop, `select`, `while` or `consume`, and not in a workload that
//! may be called). Then no two task instances touch a written tensor, so no pair can conflict.
//! Anything else is reported as [`ValidationError::ExplicitUnordered`] naming both accesses (or
//! the one repeated) and suggesting `deps exact`, `deps overlap` or `deps hybrid`. The rule is
//! sufficient, not necessary: it does not look at the structural orders, so it refuses
//! schedules whose conflicting pairs `for_each` or `sequential` do order.

use super::errors::ValidationError;
use super::exact::{Access, all_accesses};
use crate::module::Module;

/// Reports the first conflicting pair of accesses per written tensor (see the module docs).
pub(super) fn check_explicit(m: &Module, errors: &mut Vec<ValidationError>) {
    let all = all_accesses(m);
    let mut tensors: Vec<&str> = all.iter().map(|a| a.region.tensor.as_str()).collect();
    tensors.sort_unstable();
    tensors.dedup();
    for t in tensors {
        let list: Vec<&Access<'_>> = all
            .iter()
            .filter(|a| a.region.tensor.as_str() == t)
            .collect();
        if !list.iter().any(|a| a.writes) {
            continue;
        }
        // Two different accesses first; else one writing access that may run twice.
        let pair = list
            .iter()
            .enumerate()
            .find_map(|(i, a)| {
                list[..i]
                    .iter()
                    .find(|b| a.writes || b.writes)
                    .map(|b| (*b, *a))
            })
            .or_else(|| {
                list.iter()
                    .find(|a| a.repeats && a.writes)
                    .map(|a| (*a, *a))
            });
        if let Some((first, second)) = pair {
            let what = |a: &Access<'_>| format!("`{}` ({})", a.region, a.what);
            let (first_s, second_s) = if std::ptr::eq(first, second) {
                (
                    "another instance of itself".to_string(),
                    format!("{}, whose statement may run more than once,", what(second)),
                )
            } else {
                (what(first), what(second))
            };
            errors.push(ValidationError::ExplicitUnordered {
                tensor: t.to_string(),
                first: first_s,
                second: second_s,
                loc: second.loc,
                path: second.path.clone(),
            });
        }
    }
}
