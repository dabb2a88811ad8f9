//! A module's plans as task batches, for back ends that run task graphs and not
//! Plan-Descriptor-Execute (the Ascend runtime: its orchestration submits tasks, it has no
//! descriptor queue or dispatch threads).
//!
//! Why it can be done on the host: a plan's `generate` block reads only symbols and the bound
//! contents of integer tensors (host metadata, never what a kernel writes), so at given bindings
//! its descriptors are known before anything runs — as the Ascend back end's orchestration already
//! takes symbols and bound integer tensors as constants of the emitted program.
//!
//! What it promises:
//! - Each plan's generator runs exactly as [`super::run_plans`] runs it (the same interpreter:
//!   `order(axis, interleaved(n))`, `prefetch`, workspace allocation, every field check), and
//!   the plan's promise of independent descriptors is checked by the same ledger, with the same
//!   message at the same `emit`.
//! - Each descriptor becomes a `task` of its tier's call (a prefetch descriptor: of the
//!   prefetch's call), every expression evaluated with the descriptor's fields: regions and
//!   scalars become literals, the task is located at the tier's `kernel` line.
//! - The workload [`WORKLOAD`] runs the plans in declaration order, each plan's tasks after
//!   every task of the plan before (a launch ends before the next starts):
//!   `sequential { combine { plan 1's tasks } combine { plan 2's tasks } ... }`. Within a plan
//!   the tasks are unordered but for what their regions imply — nothing, since they are checked
//!   independent. The workload's schedule (a module of plans has none) finds dependencies by
//!   overlap (`deps overlap`), so the batches are ordered whatever the shapes of their regions.
//! - The module returned is the given one with its plans replaced by that workload; what the
//!   plans ask that a task graph does not honour (`affinity`, `order`) is returned as notes.

use super::{
    Admission, CallEnv, CallShape, FieldNames, Gen, PlanError, as_u32, bind_space, generator_for,
    interleave_of, tier_kernel, tier_table,
};
use crate::ir::plan::{PlanDecl, SpaceDecl, TierTableDecl};
use crate::ir::resolve::body::IntExpr;
use crate::ir::resolve::generate::{CallArg, PlanForm, resolve_plan};
use crate::ir::schedule::{DepsMode, Schedule, ScheduleItem, ScheduleItemKind, TaskGraphItem};
use crate::ir::{
    Arg, Bindings, Expr, Ident, Loc, Module, RegionDim, Stmt, StmtKind, TaskStmt, Value, Workload,
};
use crate::pde::{self, Descriptor, PdeError};
use std::sync::Mutex;

/// The name of the workload the plans become.
pub const WORKLOAD: &str = "plans";

/// A module's plans as one workload (see the module docs).
#[derive(Clone, Debug)]
pub struct PlanTasks {
    /// The module, its plans replaced by the workload [`WORKLOAD`].
    pub module: Module,
    /// Each plan and the number of tasks its descriptors became, in order.
    pub tasks: Vec<(String, usize)>,
    /// What the plans ask that a task graph does not honour, with where it was written.
    pub notes: Vec<(Loc, String)>,
}

/// Expands every plan of `module` at `bindings` into tasks (see the module docs). `module` must
/// have passed `ir::validate`; a module that already has a workload named [`WORKLOAD`] is
/// refused.
pub fn plans_as_tasks(module: &Module, bindings: &Bindings) -> Result<PlanTasks, PlanError> {
    if let Some(w) = module
        .workloads
        .iter()
        .find(|w| w.name.as_str() == WORKLOAD)
    {
        return Err(PlanError {
            message: format!(
                "the module's plans become a workload named `{WORKLOAD}`, and one is declared"
            ),
            loc: w.loc,
        });
    }
    let mut batches = Vec::with_capacity(module.plans.len());
    let mut tasks = Vec::with_capacity(module.plans.len());
    let mut notes = Vec::new();
    for p in &module.plans {
        let batch = plan_tasks(module, p, bindings)?;
        tasks.push((p.name.to_string(), batch.len()));
        batches.push(Stmt {
            kind: StmtKind::Combine(batch),
            loc: p.loc,
        });
        if let Some(a) = &p.affinity {
            notes.push((
                a.loc,
                format!(
                    "plan `{}`: `affinity({}, ...)` is not honoured: a task runs on any idle core \
                     of its kind",
                    p.name, a.axis
                ),
            ));
        }
        for o in &p.orders {
            notes.push((
                o.loc,
                format!(
                    "plan `{}`: `order({}, ...)` gives the order tasks are submitted in; the \
                     runtime starts them as cores free up",
                    p.name, o.axis
                ),
            ));
        }
    }
    let mut m = module.clone();
    m.plans.clear();
    m.workloads.push(Workload {
        name: Ident::new(WORKLOAD),
        params: Vec::new(),
        body: vec![Stmt::new(StmtKind::Sequential(batches))],
        loc: Loc::NONE,
    });
    // Dependencies by overlap: a later plan reads what an earlier one wrote through regions of
    // other shapes (the merge reads a head's partials over all chunks), which exact matching
    // would not order; within a batch nothing overlaps a write (checked above).
    if m.schedule.is_none() {
        m.schedule = Some(Schedule {
            target: Ident::new(WORKLOAD),
            items: vec![ScheduleItem::new(ScheduleItemKind::TaskGraph(vec![
                TaskGraphItem::Deps(DepsMode::Overlap),
            ]))],
            loc: Loc::NONE,
        });
    }
    Ok(PlanTasks {
        module: m,
        tasks,
        notes,
    })
}

/// The descriptors of plan `p`, each as a task statement, in the order the launch would queue
/// them.
fn plan_tasks(module: &Module, p: &PlanDecl, bindings: &Bindings) -> Result<Vec<Stmt>, PlanError> {
    let at = PlanError::at(p.name.as_str());
    let (Some(sd), Some(td)) = (
        module.space(p.space.as_str()),
        module.tier_table(p.tiers.as_str()),
    ) else {
        return Err(at(p.loc, "its space or tier table is not declared".into()));
    };
    let symbols = &bindings.symbols;
    let tier_names: Vec<&str> = td.tiers.iter().map(|t| t.name.as_str()).collect();
    let workspace = match &p.workspace {
        None => None,
        Some(w) => Some(
            module
                .tensor(w.as_str())
                .ok_or_else(|| at(w.loc, format!("no tensor `{w}`")))?
                .shape
                .as_slice(),
        ),
    };
    let form = resolve_plan(sd, p, &tier_names, workspace, &|n| symbols.contains_key(n));
    let env = CallEnv::new(&form, sd, p, symbols);
    let space = bind_space(sd, p, &env).map_err(|(loc, m)| at(loc, m))?;
    let tiers = tier_table(td).map_err(|e| at(td.name.loc, e.to_string()))?;
    let capacity = match &p.workspace {
        None => 0,
        Some(w) => elements(w.as_str(), &env).map_err(|m| at(w.loc, m))?,
    };
    let names = FieldNames::new(sd);
    let calls = tier_calls(module, p, td, &form)?;
    let prefetch = prefetch_call(module, p, sd, &form)?;
    let tensors: Vec<String> = module.tensors.iter().map(|t| t.name.to_string()).collect();
    let admission = Admission {
        calls: calls.iter().map(|(c, _)| c).collect(),
        kernel_locs: calls
            .iter()
            .map(|(_, l)| *l)
            .chain(prefetch.as_ref().map(|(.., l)| *l))
            .collect(),
        prefetch: prefetch.as_ref().map(|(_, _, c, _)| c),
        names: &names,
        env: &env,
        tensors: &tensors,
        tiers: td.tiers.iter().map(|t| t.name.as_str()).collect(),
        state: Mutex::new(Default::default()),
    };
    let (generator, vars) = generator_for(module, sd, p, bindings);
    let mut g = Gen {
        plan: p,
        space: sd,
        bound: &space,
        bindings,
        generator: &generator,
        vars,
        error: None,
        interleave: interleave_of(p, sd)?,
        group: None,
    };
    let sink = Checked {
        admission: &admission,
        space: sd.name.to_string(),
        seen: Vec::new(),
    };
    let mut e = pde::Emitter::new(&space, &tiers, capacity, sink);
    if let Some((axis, depth, _, loc)) = &prefetch {
        e.prefetch(*axis, *depth)
            .map_err(|err| at(*loc, err.to_string()))?;
    }
    let result = g.block(&generator.stmts, &mut e);
    if let Some((loc, m)) = admission.located_error() {
        return Err(at(loc, m));
    }
    if let Some(err) = g.error.take() {
        return Err(err);
    }
    result.map_err(|err| at(p.loc, err.to_string()))?;
    let seen = e.into_sink().seen;
    seen.iter()
        .map(|d| {
            let (call, loc) = if d.tier == pde::PREFETCH_TIER {
                prefetch.as_ref().map(|(_, _, c, l)| (c, *l))
            } else {
                calls.get(d.tier as usize).map(|(c, l)| (c, *l))
            }
            .ok_or_else(|| at(p.loc, "a descriptor of a tier with no call".into()))?;
            task(call, d, &env, loc).map_err(|m| at(loc, m))
        })
        .collect()
}

/// The index of tensor `t` of `module`.
fn tensor_index(module: &Module, t: &str) -> Option<u32> {
    module
        .tensors
        .iter()
        .position(|d| d.name.as_str() == t)
        .and_then(|i| u32::try_from(i).ok())
}

/// The call of each tier of `td` in plan `p`, with the location of its `kernel` item.
fn tier_calls<'m>(
    module: &'m Module,
    p: &'m PlanDecl,
    td: &TierTableDecl,
    form: &'m PlanForm,
) -> Result<Vec<(CallShape<'m>, Loc)>, PlanError> {
    let at = PlanError::at(p.name.as_str());
    td.tiers
        .iter()
        .zip(&form.tier_kernels)
        .map(|(t, k)| {
            let (k, call) = tier_kernel(p, td, form, t, *k)?;
            CallShape::new(
                module,
                &format!("tier `{}`", k.tier),
                (&k.call, call),
                |t| tensor_index(module, t),
            )
            .map(|c| (c, k.loc))
            .map_err(|m| at(k.loc, m))
        })
        .collect()
}

/// Plan `p`'s prefetch: its axis, depth, call and location.
type Prefetch<'m> = (usize, u32, CallShape<'m>, Loc);

/// The prefetch of plan `p` over space `sd`, if it has one.
fn prefetch_call<'m>(
    module: &'m Module,
    p: &'m PlanDecl,
    sd: &SpaceDecl,
    form: &'m PlanForm,
) -> Result<Option<Prefetch<'m>>, PlanError> {
    let at = PlanError::at(p.name.as_str());
    let Some(pf) = &p.prefetch else {
        return Ok(None);
    };
    let depth = u32::try_from(pf.depth)
        .map_err(|_| at(pf.loc, "the prefetch depth is past 2^32 - 1".into()))?;
    let axis = sd
        .axes
        .iter()
        .position(|a| a.name == pf.axis)
        .ok_or_else(|| at(pf.loc, format!("no axis `{}`", pf.axis)))?;
    let Some(form) = &form.prefetch else {
        return Err(at(pf.loc, "the prefetch's call is not resolved".into()));
    };
    let call = CallShape::new(module, "the prefetch", (&pf.call, form), |t| {
        tensor_index(module, t)
    })
    .map_err(|m| at(pf.loc, m))?;
    Ok(Some((axis, depth, call, pf.loc)))
}

/// Descriptors admitted by the plan's independence check, kept in queue order.
struct Checked<'a> {
    admission: &'a Admission<'a>,
    space: String,
    seen: Vec<Descriptor>,
}

impl pde::Sink for Checked<'_> {
    fn push(&mut self, d: Descriptor) -> pde::Result<()> {
        self.admission
            .admit(&d)
            .map_err(|problem| PdeError::Refused {
                space: self.space.clone(),
                problem,
            })?;
        self.seen.push(d);
        Ok(())
    }
}

/// The elements of the plan's workspace tensor `name` at the bound symbols: the product of its
/// dimensions in slot form ([`crate::ir::resolve::generate::PlanForm::workspace`]).
fn elements(name: &str, env: &CallEnv<'_>) -> Result<u64, String> {
    env.form.workspace.iter().try_fold(1u64, |n, e| {
        let text = &e.text;
        let v = e
            .compiled
            .eval(&env.base)
            .map_err(|err| format!("`{name}`: `{text}`: {}", env.form.explain(err)))?;
        let d = as_u32(v).ok_or_else(|| format!("`{name}`: extent `{text}` = {v}"))?;
        n.checked_mul(d.into())
            .ok_or_else(|| format!("`{name}` has more than 2^64 elements"))
    })
}

/// The task of `call` for descriptor `d`: every region bound and scalar evaluated with the
/// descriptor's fields, as literals.
fn task(call: &CallShape<'_>, d: &Descriptor, env: &CallEnv<'_>, loc: Loc) -> Result<Stmt, String> {
    let vars = env.vars(d);
    let literal = |e: &IntExpr| -> Result<Expr, String> {
        if let Expr::Float(_) = e.text {
            return Ok(e.text.clone());
        }
        let v = e
            .compiled
            .eval(&vars)
            .map_err(|err| format!("`{}`: {}", e.text, env.form.explain(err)))?;
        Ok(match v {
            Value::I64(x) => Expr::Int(x),
            Value::U64(x) => Expr::UInt(x),
            Value::Bool(b) => Expr::Bool(b),
        })
    };
    let (written, resolved) = call.call;
    let args = written
        .args
        .iter()
        .zip(&resolved.args)
        .map(|(a, resolved)| {
            Ok(match (a, resolved) {
                (Arg::Region(r), CallArg::Region(dims)) => {
                    let mut r = r.clone();
                    r.dims = dims
                        .iter()
                        .map(|(start, size)| {
                            Ok(RegionDim {
                                start: literal(start)?,
                                size: size.as_ref().map(&literal).transpose()?,
                            })
                        })
                        .collect::<Result<_, String>>()?;
                    Arg::Region(r)
                }
                (_, CallArg::Scalar(e)) => Arg::Scalar(literal(e)?),
                (_, CallArg::Region(_)) => return Err("a region where a scalar is written".into()),
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(Stmt {
        kind: StmtKind::Task(TaskStmt {
            kernel: written.kernel.clone(),
            args,
        }),
        loc,
    })
}
