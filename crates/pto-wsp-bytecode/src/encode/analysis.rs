//! Which loops decide a dispatch target once per iteration, and which iterations an executor may
//! skip without running them.
//!
//! Why: an executor must generate only its own tasks at O(1) cost per task, and should not even
//! walk the subtrees that belong to others (the on-device generation specification: "generates only
//! its own tasks"). Both need facts about the workload that are cheap to find once, here, and cost
//! nothing at run time.
//!
//! Promises (the rules, each one sufficient for the interpreter to give exactly the reference
//! expander's tasks and order edges):
//! - **Hoisting.** A loop `L` is a hoisting point when the dispatch policy does not depend on the
//!   task index (a tree of `affinity`, `hash` and `threshold`), every task in `L`'s body has the
//!   same dispatch keys, and those keys read only symbols, slots that are never written, and
//!   variables not assigned inside the body. Then every task of one iteration has the same target,
//!   computed once when the iteration starts. Loops inside a hoisting point are not considered.
//! - **Counting.** The task count of one iteration is an `i64` expression when it follows from
//!   values fixed at the iteration's start: dense loops whose `i64` extent reads such values,
//!   `if`s whose condition does (or whose branches count the same), tasks, blocks. Ragged and
//!   sparse loops inside, `u64` extents, and CSP make it unknown.
//! - **Skipping.** An iteration may be skipped only if its count is known and its body leaves no
//!   trace outside itself: every slot written in it is read only inside it, and the first
//!   statement of the body mentioning that slot is a plain `set` / `load` of it (so no iteration
//!   reads a value left by another). Hoisting points skip iterations whose target belongs to
//!   another executor; under `static_partition`, any loop skips iterations whose task-index range
//!   holds none of the executor's partitions. A ragged or sparse hoisting point whose keys and
//!   count do not read the second variable skips whole rows, unless it is ordered.

use super::lower::{LAxis, LDispatch, LLoop, LStmt, LTask, Lowered};
use crate::format::NONE16;
use pto_wsp_ir::resolve::TExpr;
use pto_wsp_ir::{BinOp, ScalarType};

/// Facts that hold for the whole program.
struct Facts<'a> {
    n_symbols: u16,
    n_slots: u16,
    /// Per slot: written anywhere.
    slot_written: Vec<bool>,
    /// Per slot: number of reads anywhere (axis extents included).
    slot_reads: Vec<usize>,
    n_dispatch_keys: usize,
    axes: &'a [(String, LAxis)],
}

impl Facts<'_> {
    fn slot(&self, r: u16) -> Option<usize> {
        (r >= self.n_symbols && r < self.n_symbols + self.n_slots)
            .then(|| usize::from(r - self.n_symbols))
    }
}

/// Marks hoisting points, counts and skip flags in every workload body of `l`.
pub(crate) fn analyze(l: &mut Lowered) {
    if l.csp {
        return;
    }
    let (hoistable, range) = match &l.dispatch {
        Some(d) => (
            index_free(d) && l.n_dispatch_keys > 0,
            matches!(d, LDispatch::StaticPartition(_)),
        ),
        None => (false, false),
    };
    if !hoistable && !range {
        return;
    }
    let mut facts = Facts {
        n_symbols: l.symbols_used.len() as u16,
        n_slots: l.n_slots,
        slot_written: vec![false; usize::from(l.n_slots)],
        slot_reads: vec![0; usize::from(l.n_slots)],
        n_dispatch_keys: l.n_dispatch_keys,
        axes: &l.axes,
    };
    let mut written = Vec::new();
    let mut reads = vec![0usize; usize::from(l.n_slots)];
    for (_, body) in &l.processes {
        scan(body, &mut |ev| match ev {
            Event::Write(r) => written.extend(facts.slot(r)),
            Event::Read(r) => {
                if let Some(s) = facts.slot(r) {
                    reads[s] += 1;
                }
            }
        });
        count_axis_reads(body, &facts, &mut reads);
    }
    for s in written {
        facts.slot_written[s] = true;
    }
    facts.slot_reads = reads;
    for (_, body) in l.processes.iter_mut() {
        walk(body, &facts, hoistable, range);
    }
}

enum Event {
    Read(u16),
    Write(u16),
}

fn index_free(d: &LDispatch) -> bool {
    match d {
        LDispatch::Affinity(_) | LDispatch::Hash(_) => true,
        LDispatch::Threshold(_, levels, otherwise) => {
            levels.iter().all(|(_, d)| index_free(d)) && index_free(otherwise)
        }
        LDispatch::RoundRobin(_) | LDispatch::StaticPartition(_) | LDispatch::WorkSteal => false,
    }
}

/// Reports every register read and written in `body` (loop and consume variables count as
/// written), including axis extents of the loops in it.
fn scan(body: &[LStmt], f: &mut impl FnMut(Event)) {
    for s in body {
        scan_stmt(s, f);
    }
}

fn reads(e: &TExpr, f: &mut impl FnMut(Event)) {
    // Registers fit 16 bits (checked when lowering).
    e.each_reg(&mut |r| f(Event::Read(r as u16)));
}

fn scan_stmt(s: &LStmt, f: &mut impl FnMut(Event)) {
    match s {
        LStmt::Loop(l) => {
            for &v in &l.vars {
                if v != NONE16 {
                    f(Event::Write(v));
                }
            }
            scan(&l.body, f);
        }
        LStmt::If {
            cond,
            then,
            otherwise,
            ..
        } => {
            reads(cond, f);
            scan(then, f);
            scan(otherwise, f);
        }
        LStmt::Seq(b) | LStmt::Block(b) => scan(b, f),
        LStmt::Task(t) => {
            for e in task_exprs(t) {
                reads(e, f);
            }
        }
        LStmt::Set { reg, value, .. } => {
            reads(value, f);
            f(Event::Write(*reg));
        }
        LStmt::Load { reg, index, .. } => {
            for e in index {
                reads(e, f);
            }
            f(Event::Write(*reg));
        }
        LStmt::Send { value, .. } => reads(value, f),
        LStmt::Consume { var, body, .. } => {
            f(Event::Write(*var));
            scan(body, f);
        }
        LStmt::While {
            cond, max, body, ..
        } => {
            reads(max, f);
            reads(cond, f);
            scan(body, f);
        }
        LStmt::Break { cond, .. } => reads(cond, f),
    }
}

fn task_exprs(t: &LTask) -> impl Iterator<Item = &TExpr> {
    t.scalars
        .iter()
        .chain(t.regions.iter().flat_map(|r| {
            r.dims
                .iter()
                .flat_map(|(s, z)| std::iter::once(s).chain(z.iter()))
        }))
        .chain(t.keys.iter())
}

/// Axis extents are read when a loop starts; they live in the axis table.
fn axis_reads(facts: &Facts<'_>, axis: u16, f: &mut impl FnMut(u16)) {
    if let Some((_, a)) = facts.axes.get(usize::from(axis)) {
        let e = match a {
            LAxis::Dense(e) | LAxis::Ragged(e, _) | LAxis::Sparse(e, ..) => e,
        };
        e.each_reg(&mut |r| f(r as u16));
    }
}

fn walk(body: &mut [LStmt], facts: &Facts<'_>, hoistable: bool, range: bool) {
    for s in body {
        match s {
            LStmt::Loop(l) => {
                let hoisted = hoistable && try_hoist(l, facts);
                if range && !hoisted {
                    try_range(l, facts);
                }
                if !hoisted {
                    walk(&mut l.body, facts, hoistable, range);
                }
            }
            LStmt::If {
                then, otherwise, ..
            } => {
                walk(then, facts, hoistable, range);
                walk(otherwise, facts, hoistable, range);
            }
            LStmt::Seq(b) | LStmt::Block(b) => walk(b, facts, hoistable, range),
            LStmt::Consume { body, .. } | LStmt::While { body, .. } => {
                walk(body, facts, hoistable, range)
            }
            LStmt::Task(_)
            | LStmt::Set { .. }
            | LStmt::Load { .. }
            | LStmt::Send { .. }
            | LStmt::Break { .. } => {}
        }
    }
}

/// Registers assigned inside `body` (loop variables, slots, parameters).
fn assigned(body: &[LStmt]) -> Vec<u16> {
    let mut out = Vec::new();
    scan(body, &mut |ev| {
        if let Event::Write(r) = ev {
            out.push(r);
        }
    });
    out.sort_unstable();
    out.dedup();
    out
}

/// Whether register `r` holds the same value during the whole of one iteration of a loop whose
/// body assigns `assigned`.
fn stable(facts: &Facts<'_>, assigned: &[u16], r: u16) -> bool {
    if r < facts.n_symbols {
        return true;
    }
    if let Some(s) = facts.slot(r) {
        return !facts.slot_written[s];
    }
    assigned.binary_search(&r).is_err()
}

fn collect_tasks<'a>(body: &'a [LStmt], out: &mut Vec<&'a LTask>) {
    for s in body {
        match s {
            LStmt::Loop(l) => collect_tasks(&l.body, out),
            LStmt::If {
                then, otherwise, ..
            } => {
                collect_tasks(then, out);
                collect_tasks(otherwise, out);
            }
            LStmt::Seq(b) | LStmt::Block(b) => collect_tasks(b, out),
            LStmt::Consume { body, .. } | LStmt::While { body, .. } => collect_tasks(body, out),
            LStmt::Task(t) => out.push(t),
            LStmt::Set { .. } | LStmt::Load { .. } | LStmt::Send { .. } | LStmt::Break { .. } => {}
        }
    }
}

fn mark_hoisted(body: &mut [LStmt]) {
    for s in body {
        match s {
            LStmt::Loop(l) => mark_hoisted(&mut l.body),
            LStmt::If {
                then, otherwise, ..
            } => {
                mark_hoisted(then);
                mark_hoisted(otherwise);
            }
            LStmt::Seq(b) | LStmt::Block(b) => mark_hoisted(b),
            LStmt::Consume { body, .. } | LStmt::While { body, .. } => mark_hoisted(body),
            LStmt::Task(t) => t.hoisted = true,
            LStmt::Set { .. } | LStmt::Load { .. } | LStmt::Send { .. } | LStmt::Break { .. } => {}
        }
    }
}

fn try_hoist(l: &mut LLoop, facts: &Facts<'_>) -> bool {
    let mut tasks = Vec::new();
    collect_tasks(&l.body, &mut tasks);
    let Some(first) = tasks.first() else {
        return false;
    };
    let n = facts.n_dispatch_keys;
    if first.keys.len() < n {
        return false;
    }
    let keys: Vec<TExpr> = first.keys[..n].to_vec();
    if tasks
        .iter()
        .any(|t| t.keys.len() < n || t.keys[..n] != keys[..])
    {
        return false;
    }
    let assigned = assigned(&l.body);
    if !keys
        .iter()
        .all(|k| k.regs_all(|r| stable(facts, &assigned, r as u16)))
    {
        return false;
    }
    mark_hoisted(&mut l.body);
    if skip_safe(&l.body, facts)
        && let Some(c) = count(&l.body, facts, &assigned)
    {
        let var1 = l.vars[1];
        let uses_var1 = var1 != NONE16
            && (keys.iter().any(|k| !k.regs_all(|r| r != u32::from(var1)))
                || !c.regs_all(|r| r != u32::from(var1)));
        l.row_skip = var1 != NONE16 && !uses_var1 && !l.ordered;
        l.count = Some(c);
    }
    l.hoist = Some(keys);
    true
}

fn try_range(l: &mut LLoop, facts: &Facts<'_>) {
    let assigned = assigned(&l.body);
    if skip_safe(&l.body, facts)
        && let Some(c) = count(&l.body, facts, &assigned)
    {
        l.count = Some(c);
        l.range_skip = true;
    }
}

/// Whether skipping one iteration of `body` changes nothing outside it (see the module docs).
fn skip_safe(body: &[LStmt], facts: &Facts<'_>) -> bool {
    let mut written = Vec::new();
    let mut reads_in = vec![0usize; facts.slot_reads.len()];
    scan(body, &mut |ev| match ev {
        Event::Write(r) => {
            if let Some(s) = facts.slot(r) {
                written.push(s);
            }
        }
        Event::Read(r) => {
            if let Some(s) = facts.slot(r) {
                reads_in[s] += 1;
            }
        }
    });
    // Axis extents of loops inside read slots too.
    count_axis_reads(body, facts, &mut reads_in);
    written.sort_unstable();
    written.dedup();
    for s in written {
        if reads_in[s] != facts.slot_reads[s] {
            return false;
        }
        let reg = facts.n_symbols + s as u16;
        // The first statement that mentions the slot must be a plain write of it.
        let mut ok = false;
        for st in body {
            let mut mentions = false;
            let mut read = false;
            scan_stmt(st, &mut |ev| match ev {
                Event::Read(r) if r == reg => {
                    mentions = true;
                    read = true;
                }
                Event::Write(r) if r == reg => mentions = true,
                Event::Read(_) | Event::Write(_) => {}
            });
            let mut ax = 0;
            if let LStmt::Loop(lp) = st {
                axis_reads(facts, lp.axis, &mut |r| {
                    if r == reg {
                        ax += 1;
                    }
                });
            }
            if !mentions && ax == 0 {
                continue;
            }
            ok = matches!(st, LStmt::Set { reg: r, .. } | LStmt::Load { reg: r, .. } if *r == reg)
                && !read;
            break;
        }
        if !ok {
            return false;
        }
    }
    true
}

fn count_axis_reads(body: &[LStmt], facts: &Facts<'_>, reads_in: &mut [usize]) {
    for s in body {
        match s {
            LStmt::Loop(l) => {
                axis_reads(facts, l.axis, &mut |r| {
                    if let Some(s) = facts.slot(r) {
                        reads_in[s] += 1;
                    }
                });
                count_axis_reads(&l.body, facts, reads_in);
            }
            LStmt::If {
                then, otherwise, ..
            } => {
                count_axis_reads(then, facts, reads_in);
                count_axis_reads(otherwise, facts, reads_in);
            }
            LStmt::Seq(b) | LStmt::Block(b) => count_axis_reads(b, facts, reads_in),
            LStmt::Consume { body, .. } | LStmt::While { body, .. } => {
                count_axis_reads(body, facts, reads_in)
            }
            LStmt::Task(_)
            | LStmt::Set { .. }
            | LStmt::Load { .. }
            | LStmt::Send { .. }
            | LStmt::Break { .. } => {}
        }
    }
}

/// The task count of one run of `body`, as an `i64` expression over stable registers.
fn count(body: &[LStmt], facts: &Facts<'_>, assigned: &[u16]) -> Option<TExpr> {
    let mut total = TExpr::int(0);
    for s in body {
        let c = match s {
            LStmt::Task(_) => TExpr::int(1),
            LStmt::Set { .. }
            | LStmt::Load {
                computed: false, ..
            } => TExpr::int(0),
            // A computed read is served by the sink in program order: never skipped; a `while`
            // or `break` makes the count depend on the run.
            LStmt::Load { computed: true, .. } | LStmt::While { .. } | LStmt::Break { .. } => {
                return None;
            }
            LStmt::Seq(b) | LStmt::Block(b) => count(b, facts, assigned)?,
            LStmt::If {
                cond,
                then,
                otherwise,
                ..
            } => {
                let a = count(then, facts, assigned)?;
                let b = count(otherwise, facts, assigned)?;
                if a == b {
                    a
                } else if cond.regs_all(|r| stable(facts, assigned, r as u16)) {
                    TExpr::ternary(cond.clone(), a, b).ok()?
                } else {
                    return None;
                }
            }
            LStmt::Loop(l) => {
                let inner = count(&l.body, facts, assigned)?;
                let (_, axis) = facts.axes.get(usize::from(l.axis))?;
                let LAxis::Dense(extent) = axis else {
                    return None;
                };
                if extent.ty() != ScalarType::I64
                    || !extent.regs_all(|r| stable(facts, assigned, r as u16))
                {
                    return None;
                }
                if inner == TExpr::int(0) {
                    TExpr::int(0)
                } else {
                    TExpr::binary(BinOp::Mul, extent.clone(), inner).ok()?
                }
            }
            LStmt::Send { .. } | LStmt::Consume { .. } => return None,
        };
        total = if total == TExpr::int(0) {
            c
        } else if c == TExpr::int(0) {
            total
        } else {
            TExpr::binary(BinOp::Add, total, c).ok()?
        };
    }
    Some(total)
}
