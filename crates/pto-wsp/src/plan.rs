//! Runs a module's plans (`ir::plan`) on Plan-Descriptor-Execute (`pto_wsp_pde`).
//!
//! Why here: the IR knows nothing of threads, and `pto-wsp-pde` knows nothing of the IR (it is
//! usable from plain Rust); the lowering from one to the other lives in the facade, beside the
//! other lowerings, so both stay that way.
//!
//! What it promises:
//! - A plan becomes one [`pde::Launch`]: its space bound (symbol ends read from the bindings,
//!   `dynamic` ends and `auto` tiles from the plan's `bind` items, constraints checked), its tier
//!   table checked, and for each tier a kernel that evaluates the tier's call with the
//!   descriptor's fields (`tier`, the axis indices, `start`, `end`, `workspace`, the user
//!   fields) as names, then runs the module kernel it names (a built-in, an alias or a kernel
//!   with a body, from the registry) on those regions and scalars. The `generate` block is
//!   interpreted on the calling (control) thread; N dispatch threads run the descriptors.
//! - `order(axis, interleaved(n))`: a `for` loop over the axis runs its values in groups of `n`;
//!   the descriptors a group emits are held back, then queued by their indices on the axes
//!   declared after it (row-major), the group's values in turn at each (a value's descriptors at
//!   one point in emission order) — `pde::walk`'s order for the points the generator emits, also
//!   when it skips some. `sequential` and `parallel` keep the loop's increasing order.
//!   `affinity(axis, ...)` is `Launch::affinity`.
//! - Plans run in declaration order; a plan's launch ends before the next starts, so a later
//!   plan reads what an earlier one wrote (the merge after the chunks of decode attention).
//! - Descriptors of one launch are promised independent by the plan, not inferred. The promise
//!   is checked whatever the timing: before a descriptor is queued, its regions are evaluated
//!   on the generator's thread and recorded in a [`RegionLedger`]; one that overlaps an earlier
//!   descriptor's write (or writes what an earlier one reads) fails the run at its `emit`,
//!   naming both descriptors, the tensor and the boxes. The regions in flight are also
//!   compared while kernels run (the kernels' views are sound only so, also with
//!   [`PlanOptions::check_independence`] off).
//! - Every mistake is a [`PlanError`] with the source location of the statement, tier kernel
//!   or declaration involved and a message naming the plan, space, field or tier: a field out
//!   of range, a tier with no kernel implementation, a workspace overflow, a `load` past its
//!   tensor, a kernel that fails. Nothing panics on bad input.

use crate::ir::plan::{
    AffinityKind, BindWhat, OrderKind, PlanDecl, SpaceDecl, SpaceEnd, TierTableDecl, TileKind,
};
use crate::ir::resolve::body::IntExpr;
use crate::ir::resolve::generate::{
    CallArg, CallForm, Field, FieldVal, GenStep, GenStepKind, Generator, PlanForm,
    resolve_generator, resolve_plan,
};
use crate::ir::{Bindings, Diagnostic, Loc, Module, ParamKind, TaskStmt, Value};
use crate::kernels::ledger::RegionLedger;
use crate::kernels::{CheckedRunner, KernelId, KernelRegistry, TensorStore, with_checked_runner};
use crate::pde::{self, Descriptor, End, Launch, LaunchStats, NO_WORKSPACE, PdeError, Tile};
use pto_wsp_graph::types::{Access, Region, TaskIo};
use pto_wsp_ir::task_io::BoxText;
use std::collections::BTreeMap;
use std::sync::Mutex;

pub mod tasks;

// The IR's limits are the descriptor's.
const _: () = assert!(crate::ir::plan::MAX_SPACE_AXES == pde::MAX_AXES);
const _: () = assert!(crate::ir::plan::MAX_PLAN_FIELDS == pde::MAX_USER);

/// A plan that cannot run, with where it was written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PlanError {
    /// What went wrong, naming the plan and the space, field or tier.
    pub message: String,
    /// The statement, tier kernel or declaration involved ([`Loc::NONE`] for built modules).
    pub loc: Loc,
}

impl PlanError {
    /// Errors of plan `plan`: each message prefixed with the plan's name, at `loc`.
    fn at(plan: &str) -> impl Fn(Loc, String) -> PlanError + '_ {
        move |loc, message| PlanError {
            message: format!("plan `{plan}`: {message}"),
            loc,
        }
    }
}

impl Diagnostic for PlanError {
    fn loc(&self) -> Loc {
        self.loc
    }
    fn label(&self) -> Option<String> {
        Some("here".into())
    }
}

/// How plans are dispatched.
#[derive(Clone, Copy, Debug)]
pub struct PlanOptions {
    /// Dispatch threads per launch (at least 1).
    pub dispatch_threads: usize,
    /// Descriptors the bounded queue holds.
    pub queue_capacity: usize,
    /// Check every descriptor's regions against those of every earlier descriptor of the
    /// launch before it is queued (on by default): the plan's promise of independent
    /// descriptors is then judged the same on every run. Off, only the regions *in flight*
    /// are compared (still sound, but a broken promise is found only when both descriptors
    /// happen to run at once); for measuring what the check costs.
    pub check_independence: bool,
}

impl Default for PlanOptions {
    fn default() -> PlanOptions {
        PlanOptions {
            dispatch_threads: 2,
            queue_capacity: 1024,
            check_independence: true,
        }
    }
}

/// What one plan's launch did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanStats {
    /// The plan.
    pub plan: String,
    /// The launch's statistics (descriptors, per dispatch thread, workspace used).
    pub launch: LaunchStats,
}

/// Runs every plan of `module` in declaration order on `store`, with kernels from `registry`.
/// `module` must have passed `ir::validate`.
pub fn run_plans(
    module: &Module,
    bindings: &Bindings,
    store: &mut TensorStore,
    registry: &KernelRegistry,
    opts: PlanOptions,
) -> Result<Vec<PlanStats>, PlanError> {
    module
        .plans
        .iter()
        .map(|p| run_plan(module, p, bindings, store, registry, opts))
        .collect()
}

/// Runs plan `p` of `module` (see the module docs).
pub fn run_plan(
    module: &Module,
    p: &PlanDecl,
    bindings: &Bindings,
    store: &mut TensorStore,
    registry: &KernelRegistry,
    opts: PlanOptions,
) -> Result<PlanStats, PlanError> {
    let plan = p.name.as_str();
    let at = PlanError::at(plan);
    let (Some(sd), Some(td)) = (
        module.space(p.space.as_str()),
        module.tier_table(p.tiers.as_str()),
    ) else {
        return Err(at(p.loc, "its space or tier table is not declared".into()));
    };
    let symbols = &bindings.symbols;
    let tier_names: Vec<&str> = td.tiers.iter().map(|t| t.name.as_str()).collect();
    let form = resolve_plan(sd, p, &tier_names, None, &|n| symbols.contains_key(n));
    let env = CallEnv::new(&form, sd, p, symbols);
    let space = bind_space(sd, p, &env).map_err(|(loc, m)| at(loc, m))?;
    let tiers = tier_table(td).map_err(|e| at(td.name.loc, e.to_string()))?;
    // The store holds every tensor at its bound shape.
    let capacity = match &p.workspace {
        None => 0,
        Some(w) => {
            let i = store
                .index_of(w.as_str())
                .ok_or_else(|| at(w.loc, format!("no tensor `{w}` in the store")))?;
            store.info(i).elements()
        }
    };
    let names = FieldNames::new(sd);
    let calls = td
        .tiers
        .iter()
        .zip(&form.tier_kernels)
        .map(|(t, k)| {
            let (k, call) = tier_kernel(p, td, &form, t, *k)?;
            TierCall::new(
                module,
                &format!("tier `{}`", k.tier),
                (&k.call, call),
                store,
                registry,
            )
            .map_err(|m| at(k.loc, m))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let prefetch = match &p.prefetch {
        None => None,
        Some(pf) => {
            let depth = u32::try_from(pf.depth)
                .map_err(|_| at(pf.loc, "the prefetch depth is past 2^32 - 1".into()))?;
            let Some(form) = &form.prefetch else {
                return Err(at(pf.loc, "the prefetch's call is not resolved".into()));
            };
            let call = TierCall::new(module, "the prefetch", (&pf.call, form), store, registry)
                .map_err(|m| at(pf.loc, m))?;
            Some((pf.axis.as_str(), depth, call))
        }
    };
    let tensors: Vec<String> = store.infos().iter().map(|i| i.name.clone()).collect();
    let admission = Admission {
        calls: calls.iter().map(|c| &c.shape).collect(),
        kernel_locs: p
            .kernels
            .iter()
            .map(|k| k.loc)
            .chain(p.prefetch.as_ref().map(|pf| pf.loc))
            .collect(),
        prefetch: prefetch.as_ref().map(|(_, _, c)| &c.shape),
        names: &names,
        env: &env,
        tensors: &tensors,
        tiers: td.tiers.iter().map(|t| t.name.as_str()).collect(),
        state: Mutex::new(Admitted::default()),
    };
    let admission = opts.check_independence.then_some(&admission);
    with_checked_runner(store, registry, |runner| {
        launch_plan(
            module, p, bindings, sd, td, &space, &tiers, capacity, &env, &calls, &prefetch, runner,
            opts, admission,
        )
    })
}

/// Runs the launch of plan `p`, everything resolved, kernels through `runner`.
#[allow(clippy::too_many_arguments)]
fn launch_plan(
    module: &Module,
    p: &PlanDecl,
    bindings: &Bindings,
    sd: &SpaceDecl,
    td: &TierTableDecl,
    space: &pde::BoundSpace,
    tiers: &pde::Tiers,
    capacity: u64,
    env: &CallEnv<'_>,
    calls: &[TierCall<'_>],
    prefetch: &Option<(&str, u32, TierCall<'_>)>,
    runner: &CheckedRunner<'_>,
    opts: PlanOptions,
    admission: Option<&Admission<'_>>,
) -> Result<PlanStats, PlanError> {
    let plan = p.name.as_str();
    let at = PlanError::at(plan);
    let runners: Vec<Box<pde::Kernel<'_>>> = calls
        .iter()
        .map(|c| {
            let f = move |d: &Descriptor| c.run(d, env, runner);
            Box::new(f) as Box<pde::Kernel<'_>>
        })
        .collect();
    let mut launch = Launch::new(space, tiers)
        .workspace(capacity)
        .dispatch_threads(opts.dispatch_threads)
        .queue_capacity(opts.queue_capacity);
    for (t, r) in td.tiers.iter().zip(&runners) {
        launch = launch.kernel(t.name.as_str(), &**r);
    }
    let fetch = prefetch.as_ref().map(|(axis, depth, c)| {
        let f = move |d: &Descriptor| c.run(d, env, runner);
        (*axis, *depth, Box::new(f) as Box<pde::Kernel<'_>>)
    });
    if let Some((axis, depth, hook)) = &fetch {
        launch = launch.prefetch(axis, *depth, &**hook);
    }
    let admit = admission.map(|a| move |d: &Descriptor| a.admit(d));
    if let Some(check) = &admit {
        launch = launch.admit(check);
    }
    if let Some(a) = &p.affinity {
        // The validator keeps a group size within `u32`; a built module that did not validate
        // gets the launch's own refusal of a group of 0.
        let affinity = match a.affinity {
            AffinityKind::Spread => pde::Affinity::Spread,
            AffinityKind::CoreLocal => pde::Affinity::CoreLocal,
            AffinityKind::CoreGroup(n) => pde::Affinity::CoreGroup(u32::try_from(n).unwrap_or(0)),
        };
        launch = launch.affinity(a.axis.as_str(), affinity);
    }
    let interleave = interleave_of(p, sd)?;
    let (generator, vars) = generator_for(module, sd, p, bindings);
    let mut g = Gen {
        plan: p,
        space: sd,
        bound: space,
        bindings,
        generator: &generator,
        vars,
        error: None,
        interleave,
        group: None,
    };
    let result = launch.run(|e| g.block(&generator.stmts, e).map(|_| ()));
    if let Some(e) = admission.and_then(Admission::located_error) {
        return Err(at(e.0, e.1));
    }
    if let Some(e) = g.error.take() {
        return Err(e);
    }
    match result {
        Ok(launch) => Ok(PlanStats {
            plan: plan.to_string(),
            launch,
        }),
        Err(e) => Err(launch_error(p, td, env, e)),
    }
}

/// A failed launch of plan `p`, at the item it comes from: a kernel's failure at its tier's
/// `kernel` item (a prefetch descriptor's at the `prefetch`), a refused affinity at the
/// `affinity` item, anything else at the plan.
fn launch_error(p: &PlanDecl, td: &TierTableDecl, env: &CallEnv<'_>, e: PdeError) -> PlanError {
    let at = PlanError::at(p.name.as_str());
    match e {
        PdeError::Kernel { ref tier, .. } => {
            // A prefetch descriptor's tier is not in the table: its failure is named `prefetch`.
            let kernel = td
                .tiers
                .iter()
                .zip(&env.form.tier_kernels)
                .find(|(t, _)| t.name.as_str() == tier.as_str())
                .and_then(|(_, k)| *k);
            let loc = match kernel {
                Some(k) => p.kernels[k].loc,
                None => p.prefetch.as_ref().map_or(p.loc, |pf| pf.loc),
            };
            at(loc, e.to_string())
        }
        // The launch refuses an affinity it cannot honour (a group larger than the threads)
        // only when it runs: reported at the plan's `affinity` item.
        PdeError::Affinity { .. } => {
            at(p.affinity.as_ref().map_or(p.loc, |a| a.loc), e.to_string())
        }
        _ => at(p.loc, e.to_string()),
    }
}

/// The generator of plan `p`, resolved once for this run, and its value slots with the free
/// names read from the bound symbols.
fn generator_for(
    module: &Module,
    sd: &SpaceDecl,
    p: &PlanDecl,
    bindings: &Bindings,
) -> (Generator, Vec<Value>) {
    let generator = resolve_generator(module, sd, p, &|n| bindings.symbols.contains_key(n));
    let mut vars = vec![Value::I64(0); generator.values];
    for (name, slot) in &generator.free {
        if let Some(v) = bindings.symbols.get(name) {
            vars[*slot as usize] = *v;
        }
    }
    (generator, vars)
}

/// `order(axis, interleaved(n))` of plan `p`: the axis's index in `sd` and `n`.
fn interleave_of(p: &PlanDecl, sd: &SpaceDecl) -> Result<Option<(usize, u32)>, PlanError> {
    let interleave: Option<(&str, u64)> = p.orders.iter().find_map(|o| match o.order {
        OrderKind::Interleaved(n) => Some((o.axis.as_str(), n)),
        _ => None,
    });
    Ok(match interleave {
        None => None,
        Some((axis, n)) => {
            let k = sd.axes.iter().position(|a| a.name.as_str() == axis);
            match (k, u32::try_from(n)) {
                (Some(k), Ok(n)) if n > 0 => Some((k, n)),
                _ => {
                    let o = p
                        .orders
                        .iter()
                        .find(|o| o.axis.as_str() == axis)
                        .map_or(p.loc, |o| o.loc);
                    return Err(PlanError::at(p.name.as_str())(
                        o,
                        format!("`order({axis}, interleaved({n}))` is not a valid order"),
                    ));
                }
            }
        }
    })
}

/// The plan's promise of independent descriptors, checked on the generator's thread in queue
/// order ([`pde::Launch::admit`]): each descriptor's regions are evaluated there and recorded in
/// a [`RegionLedger`], which refuses one that overlaps an earlier descriptor's write (or writes
/// what an earlier one reads) — whatever the kernels' timing.
struct Admission<'a> {
    calls: Vec<&'a CallShape<'a>>,
    /// Each tier's kernel line, then the prefetch's (where a region's evaluation fails).
    kernel_locs: Vec<Loc>,
    prefetch: Option<&'a CallShape<'a>>,
    names: &'a FieldNames<'a>,
    env: &'a CallEnv<'a>,
    /// Tensor names by index.
    tensors: &'a [String],
    tiers: Vec<&'a str>,
    state: Mutex<Admitted>,
}

/// What an [`Admission`] has seen.
#[derive(Default)]
struct Admitted {
    ledger: RegionLedger,
    /// Every descriptor admitted, in queue order.
    seen: Vec<Descriptor>,
    /// A region that could not be evaluated, at its call's line.
    error: Option<(Loc, String)>,
}

impl Admission<'_> {
    fn admit(&self, d: &Descriptor) -> Result<(), String> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (call, line) = if d.tier == pde::PREFETCH_TIER {
            (self.prefetch, self.kernel_locs.last())
        } else {
            (
                self.calls.get(d.tier as usize).copied(),
                self.kernel_locs.get(d.tier as usize),
            )
        };
        let (Some(call), Some(&line)) = (call, line) else {
            return Err(format!(
                "{}: a tier with no call",
                self.describe(state.seen.len(), d)
            ));
        };
        let io = match call.io(d, self.env) {
            Ok((io, _)) => io,
            Err(e) => {
                let message = format!(
                    "{}: kernel `{}`: {e}",
                    self.describe(state.seen.len(), d),
                    call.kernel
                );
                state.error = Some((line, message.clone()));
                return Err(message);
            }
        };
        let index = state.seen.len() as u32;
        if let Err(c) = state.ledger.record(index, &io) {
            let earlier = state.seen[c.running as usize];
            let tensor = self
                .tensors
                .get(c.tensor() as usize)
                .map_or("?", String::as_str);
            let verb = |a: Access| if a.writes() { "writes" } else { "reads" };
            return Err(format!(
                "{} {} `{tensor}`{} (kernel `{}`), which overlaps `{tensor}`{} that {} {}: the \
                 descriptors of a launch are promised independent (none may touch what another \
                 writes), and this plan breaks the promise whatever the timing",
                self.describe(index as usize, d),
                verb(c.access),
                BoxText(&c.region),
                call.kernel,
                BoxText(&c.running_region),
                self.describe(c.running as usize, &earlier),
                verb(c.running_access),
            ));
        }
        state.seen.push(*d);
        Ok(())
    }

    /// `descriptor #N (tier `t`, b = 1, ...)`, N counted from 1 in queue order.
    fn describe(&self, index: usize, d: &Descriptor) -> String {
        let tier = if d.tier == pde::PREFETCH_TIER {
            "prefetch"
        } else {
            self.tiers.get(d.tier as usize).copied().unwrap_or("?")
        };
        let mut s = format!("descriptor #{} (tier `{tier}`", index + 1);
        for (k, a) in self.names.axes.iter().enumerate() {
            s.push_str(&format!(", {a} = {}", d.indices[k]));
        }
        s.push(')');
        s
    }

    fn located_error(&self) -> Option<(Loc, String)> {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .error
            .take()
    }
}

fn as_u32(v: Value) -> Option<u32> {
    match v {
        Value::I64(x) => u32::try_from(x).ok(),
        Value::U64(x) => u32::try_from(x).ok(),
        Value::Bool(_) => None,
    }
}

fn as_i64(v: Value) -> Option<i64> {
    match v {
        Value::I64(x) => Some(x),
        Value::U64(x) => i64::try_from(x).ok(),
        Value::Bool(_) => None,
    }
}

/// Binds the space for the plan: ends, tiles, constraints (their expressions from `env`'s
/// resolved plan).
fn bind_space(
    sd: &SpaceDecl,
    p: &PlanDecl,
    env: &CallEnv<'_>,
) -> Result<pde::BoundSpace, (Loc, String)> {
    let form = env.form;
    let space_err = |loc: Loc, m: String| (loc, format!("space `{}`: {m}", sd.name));
    let eval = |e: &IntExpr| e.compiled.eval(&env.base).map_err(|err| form.explain(err));
    let value = |e: &IntExpr, what: String| -> Result<u32, (Loc, String)> {
        let loc = e.text.loc();
        let v = eval(e).map_err(|err| space_err(loc, format!("{what}: {err}")))?;
        as_u32(v).ok_or_else(|| {
            space_err(
                loc,
                format!("{what} = {v} is not an integer from 0 to 2^32 - 1"),
            )
        })
    };
    for (c, (_, loc)) in form.constraints.iter().zip(&sd.constraints) {
        let c_text = &c.text;
        match eval(c) {
            Ok(Value::Bool(true)) => {}
            Ok(Value::Bool(false)) => {
                return Err(space_err(
                    *loc,
                    format!("constraint `{c_text}` does not hold"),
                ));
            }
            Ok(v) => {
                return Err(space_err(
                    *loc,
                    format!("constraint `{c_text}` is {v}, not a bool"),
                ));
            }
            Err(e) => return Err(space_err(*loc, format!("constraint `{c_text}`: {e}"))),
        }
    }
    let mut space = pde::Space::new(sd.name.as_str());
    for (a, symbol_end) in sd.axes.iter().zip(&form.ends) {
        let end = match (&a.end, symbol_end) {
            (SpaceEnd::Const(n), _) => End::Const(u32::try_from(*n).map_err(|_| {
                space_err(
                    a.name.loc,
                    format!("the end of axis `{}` is past 2^32 - 1", a.name),
                )
            })?),
            (SpaceEnd::Symbol(s), Some(e)) => End::Const(value(
                e,
                format!("the end of axis `{}` (symbol `{s}`)", a.name),
            )?),
            (SpaceEnd::Symbol(_), None) | (SpaceEnd::Dynamic, _) => End::Dynamic,
        };
        let start = u32::try_from(a.start).map_err(|_| {
            space_err(
                a.name.loc,
                format!("axis `{}` starts past 2^32 - 1", a.name),
            )
        })?;
        space = space.axis(a.name.as_str(), start, end);
    }
    for t in &sd.tiles {
        let n = |n: u64| u32::try_from(n).unwrap_or(0);
        let tile = match t.kind {
            TileKind::Size(s) => Tile::Size(n(s)),
            TileKind::PadLast(s) => Tile::PadLast(n(s)),
            TileKind::Auto => Tile::Auto,
        };
        space = space.tile(t.axis.as_str(), tile);
    }
    let mut ends = Vec::new();
    let mut tiles = Vec::new();
    for (b, e) in p.binds.iter().zip(&form.binds) {
        let v = value(e, format!("`bind {}({})`", b.what.keyword(), b.axis))?;
        match b.what {
            BindWhat::End => ends.push((b.axis.as_str(), v)),
            BindWhat::Tile => tiles.push((b.axis.as_str(), v)),
        }
    }
    space
        .bind(&ends, &tiles)
        .map_err(|e| (sd.name.loc, e.to_string()))
}

fn tier_table(td: &TierTableDecl) -> Result<pde::Tiers, PdeError> {
    let tiers = td
        .tiers
        .iter()
        .map(|t| {
            let w = u32::try_from(t.workspace).unwrap_or(u32::MAX);
            match t.max {
                Some(m) => {
                    pde::Tier::upto(t.name.as_str(), u32::try_from(m).unwrap_or(u32::MAX), w)
                }
                None => pde::Tier::default_tier(t.name.as_str(), w),
            }
        })
        .collect();
    pde::Tiers::new(td.name.as_str(), tiers)
}

/// The names of a plan's space axes, for messages.
struct FieldNames<'m> {
    axes: Vec<&'m str>,
}

impl<'m> FieldNames<'m> {
    fn new(sd: &'m SpaceDecl) -> FieldNames<'m> {
        FieldNames {
            axes: sd.axes.iter().map(|a| a.name.as_str()).collect(),
        }
    }
}

/// The value slots of a plan's resolved expressions ([`PlanForm`]): the free names read from
/// the bound symbols once, the descriptor's fields set per descriptor.
struct CallEnv<'a> {
    form: &'a PlanForm,
    /// Every slot, the fields 0 (what the space's bounds see).
    base: Vec<Value>,
    /// The number of space axes (the user fields follow them).
    axes: usize,
    /// The number of user fields.
    users: usize,
}

impl<'a> CallEnv<'a> {
    fn new(
        form: &'a PlanForm,
        sd: &SpaceDecl,
        p: &PlanDecl,
        symbols: &BTreeMap<String, Value>,
    ) -> CallEnv<'a> {
        let mut base = vec![Value::I64(0); form.values];
        for (name, slot) in &form.free {
            if let Some(v) = symbols.get(name) {
                base[*slot as usize] = *v;
            }
        }
        CallEnv {
            form,
            base,
            axes: sd.axes.len(),
            users: p.fields.len(),
        }
    }

    /// The slots with `d`'s fields (`workspace` of none: -1), in the order
    /// [`PlanForm::FIELD_SLOTS`] gives.
    fn vars(&self, d: &Descriptor) -> Vec<Value> {
        let mut v = self.base.clone();
        let ws = if d.workspace == NO_WORKSPACE {
            -1
        } else {
            i64::from(d.workspace)
        };
        let fixed = [d.tier.into(), d.start.into(), d.end.into(), ws];
        let n = fixed.len();
        for (slot, x) in v.iter_mut().zip(fixed) {
            *slot = Value::I64(x);
        }
        for (slot, x) in v.iter_mut().skip(n).take(self.axes).zip(&d.indices) {
            *slot = Value::I64((*x).into());
        }
        let user_slots = v.iter_mut().skip(n + self.axes).take(self.users);
        for (slot, x) in user_slots.zip(&d.user) {
            *slot = Value::I64((*x).into());
        }
        v
    }
}

/// One tier's call, resolved against the store and the registry.
struct TierCall<'m> {
    shape: CallShape<'m>,
    id: KernelId,
}

impl<'m> TierCall<'m> {
    /// The call `call` of `who` (`tier `t``, `the prefetch`), with its resolved form.
    fn new(
        module: &'m Module,
        who: &str,
        call: (&'m TaskStmt, &'m CallForm),
        store: &TensorStore,
        registry: &KernelRegistry,
    ) -> Result<TierCall<'m>, String> {
        let shape = CallShape::new(module, who, call, |t| store.index_of(t))?;
        let name = shape.kernel;
        let id = registry.lookup(name).ok_or_else(|| {
            format!(
                "{who}: kernel `{name}` has no implementation (give it a body, or alias it to \
                 a built-in with `//@ alias {name}=BUILTIN`)"
            )
        })?;
        Ok(TierCall { shape, id })
    }

    /// Runs the kernel for descriptor `d` on the calling dispatch thread.
    fn run(
        &self,
        d: &Descriptor,
        env: &CallEnv<'_>,
        runner: &CheckedRunner<'_>,
    ) -> Result<(), String> {
        let (io, params) = self.shape.io(d, env)?;
        runner
            .call(self.id, 0, &params, &io)
            .map_err(|e| format!("kernel `{}`: {e}", self.shape.kernel))
    }
}

/// A region argument of a call: tensor index, access, and per dimension its start and size.
type RegionArg<'m> = (u32, Access, &'m [(IntExpr, Option<IntExpr>)]);

/// One tier's call, its regions resolved to tensor indices: what a descriptor evaluates.
struct CallShape<'m> {
    kernel: &'m str,
    /// The call as written, and resolved.
    call: (&'m TaskStmt, &'m CallForm),
    regions: Vec<RegionArg<'m>>,
    scalars: Vec<&'m IntExpr>,
}

impl<'m> CallShape<'m> {
    /// The call `call` of `who` (`tier `t``, `the prefetch`), tensors numbered by `index_of`.
    fn new(
        module: &'m Module,
        who: &str,
        (call, form): (&'m TaskStmt, &'m CallForm),
        index_of: impl Fn(&str) -> Option<u32>,
    ) -> Result<CallShape<'m>, String> {
        let name = call.kernel.as_str();
        let decl = module
            .kernel(name)
            .ok_or_else(|| format!("{who}: unknown kernel `{name}`"))?;
        let mut regions = Vec::new();
        let mut scalars = Vec::new();
        for (param, (arg, resolved)) in decl.params.iter().zip(call.args.iter().zip(&form.args)) {
            match (&param.kind, arg, resolved) {
                (
                    ParamKind::Tile { access, .. },
                    crate::ir::Arg::Region(r),
                    CallArg::Region(dims),
                ) => {
                    let t = index_of(r.tensor.as_str())
                        .ok_or_else(|| format!("no tensor `{}` in the store", r.tensor))?;
                    regions.push((t, *access, dims.as_slice()));
                }
                (ParamKind::Scalar(_), _, CallArg::Scalar(e)) => scalars.push(e),
                _ => return Err(format!("{who}: the call does not match kernel `{name}`")),
            }
        }
        Ok(CallShape {
            kernel: name,
            call: (call, form),
            regions,
            scalars,
        })
    }

    /// The regions and scalar parameters of this call for descriptor `d`.
    fn io(&self, d: &Descriptor, env: &CallEnv<'_>) -> Result<(Vec<TaskIo>, Vec<u64>), String> {
        let vars = env.vars(d);
        let eval = |e: &IntExpr| -> Result<Value, String> {
            e.compiled
                .eval(&vars)
                .map_err(|err| format!("`{}`: {}", e.text, env.form.explain(err)))
        };
        let int = |e: &IntExpr| -> Result<i64, String> {
            let v = eval(e)?;
            as_i64(v).ok_or_else(|| format!("`{}` = {v} is not an integer", e.text))
        };
        let mut io = Vec::with_capacity(self.regions.len());
        for (i, (t, access, dims)) in self.regions.iter().enumerate() {
            let mut start = Vec::with_capacity(dims.len());
            let mut size = Vec::with_capacity(dims.len());
            for (s, n) in dims.iter() {
                start.push(int(s)?);
                size.push(match n {
                    Some(n) => int(n)?,
                    None => 1,
                });
            }
            let region = Region::new(*t, &start, &size)
                .map_err(|e| format!("kernel `{}`, region {}: {e}", self.kernel, i + 1))?;
            io.push(TaskIo::new(region, *access));
        }
        let mut params = Vec::with_capacity(self.scalars.len());
        for e in &self.scalars {
            params.push(eval(e)?.to_bits());
        }
        Ok((io, params))
    }
}

/// What a statement list asks of the enclosing loop.
enum Flow {
    Next,
    Continue,
}

/// The generator interpreter: runs a plan's resolved `generate` block on the control thread.
struct Gen<'m> {
    plan: &'m PlanDecl,
    space: &'m SpaceDecl,
    bound: &'m pde::BoundSpace,
    bindings: &'m Bindings,
    generator: &'m Generator,
    /// The value slots ([`Generator`]).
    vars: Vec<Value>,
    /// The first error of the interpreter itself (the emitter's errors travel as `PdeError`s
    /// and are given this statement's location too).
    error: Option<PlanError>,
    /// `order(axis, interleaved(n))`: the axis's index and `n`.
    interleave: Option<(usize, u32)>,
    /// Inside an interleaved `for`: the descriptors held back.
    group: Option<Group>,
}

/// The descriptors of one interleaved group, held back until the group's last value has run.
struct Group {
    /// The value running (its position in the group).
    current: usize,
    /// In emission order: the value's position in the group, the descriptor, the `emit`.
    held: Vec<(usize, Descriptor, Loc)>,
}

/// Stands in for an interpreter error inside the launch (the real one is in `Gen::error`).
fn stop() -> PdeError {
    PdeError::Plan("stopped".into())
}

impl<'m> Gen<'m> {
    fn fail(&mut self, loc: Loc, message: String) -> PdeError {
        if self.error.is_none() {
            self.error = Some(PlanError {
                message: format!("plan `{}`: {message}", self.plan.name),
                loc,
            });
        }
        stop()
    }

    fn value(&mut self, e: &IntExpr, loc: Loc) -> Result<Value, PdeError> {
        match e.compiled.eval(&self.vars) {
            Ok(v) => Ok(v),
            Err(err) => {
                let err = self.generator.explain(err);
                Err(self.fail(loc, format!("`{}`: {err}", e.text)))
            }
        }
    }

    fn set(&mut self, slot: u32, v: Value) {
        self.vars[slot as usize] = v;
    }

    fn field(&mut self, name: &str, e: &IntExpr, loc: Loc) -> Result<u32, PdeError> {
        let v = self.value(e, loc)?;
        match as_u32(v) {
            Some(x) => Ok(x),
            None => Err(self.fail(
                loc,
                format!(
                    "space `{}`: descriptor field `{name}` = {} is out of range (must be 0 to {})",
                    self.space.name,
                    match v {
                        Value::I64(x) => x.to_string(),
                        Value::U64(x) => x.to_string(),
                        Value::Bool(b) => b.to_string(),
                    },
                    u32::MAX
                ),
            )),
        }
    }

    fn block<S: pde::Sink>(
        &mut self,
        body: &'m [GenStep],
        e: &mut pde::Emitter<'_, S>,
    ) -> Result<Flow, PdeError> {
        for s in body {
            if let Flow::Continue = self.stmt(s, e)? {
                return Ok(Flow::Continue);
            }
        }
        Ok(Flow::Next)
    }

    fn stmt<S: pde::Sink>(
        &mut self,
        s: &'m GenStep,
        e: &mut pde::Emitter<'_, S>,
    ) -> Result<Flow, PdeError> {
        let loc = s.loc;
        match &s.kind {
            GenStepKind::For { vars, axis, body } => self.for_axis(axis, vars, body, loc, e),
            GenStepKind::If {
                cond,
                then_body,
                else_body,
            } => match self.value(cond, loc)? {
                Value::Bool(true) => self.block(then_body, e),
                Value::Bool(false) => self.block(else_body, e),
                v => Err(self.fail(
                    loc,
                    format!("the condition `{}` is {v}, not a bool", cond.text),
                )),
            },
            GenStepKind::Continue => Ok(Flow::Continue),
            GenStepKind::Let { slot, value } => {
                let v = self.value(value, loc)?;
                self.set(*slot, v);
                Ok(Flow::Next)
            }
            GenStepKind::SelectTier { slot, value } => {
                let v = self.field("select_tier value", value, loc)?;
                let t = pde::select_tier(e.tiers(), v);
                self.set(*slot, Value::I64(t.into()));
                Ok(Flow::Next)
            }
            GenStepKind::Alloc {
                slot,
                tier,
                indices,
            } => self.alloc(*slot, tier, indices, loc, e),
            GenStepKind::Load {
                slot,
                tensor,
                extents,
                index,
            } => {
                let v = self.load(tensor, extents.as_deref(), index, loc)?;
                self.set(*slot, Value::I64(v));
                Ok(Flow::Next)
            }
            GenStepKind::Emit { fields } => self.emit(fields, loc, e),
        }
    }

    /// `for VARS in AXIS { BODY }`: every value of the axis in order, or in groups of the
    /// plan's interleave when it is that axis.
    fn for_axis<S: pde::Sink>(
        &mut self,
        axis: &Result<usize, String>,
        vars: &'m [u32],
        body: &'m [GenStep],
        loc: Loc,
        e: &mut pde::Emitter<'_, S>,
    ) -> Result<Flow, PdeError> {
        let k = match axis {
            Ok(k) => *k,
            Err(axis) => return Err(self.fail(loc, format!("no axis `{axis}`"))),
        };
        let count = self.bound.count(k);
        if let Some((ik, n)) = self.interleave
            && ik == k
            && self.group.is_none()
        {
            return self.interleaved(k, n, vars, body, e);
        }
        for i in 0..count {
            self.iteration(k, vars, i, body, e)?;
        }
        Ok(Flow::Next)
    }

    /// The loop over axis `k` interleaved in groups of `n` values: each group's descriptors
    /// held and queued by their inner indices.
    fn interleaved<S: pde::Sink>(
        &mut self,
        k: usize,
        n: u32,
        vars: &'m [u32],
        body: &'m [GenStep],
        e: &mut pde::Emitter<'_, S>,
    ) -> Result<Flow, PdeError> {
        let count = self.bound.count(k);
        let mut g0 = 0;
        while g0 < count {
            let g1 = count.min(g0.saturating_add(n));
            self.group = Some(Group {
                current: 0,
                held: Vec::new(),
            });
            for i in g0..g1 {
                if let Some(g) = &mut self.group {
                    g.current = (i - g0) as usize;
                }
                self.iteration(k, vars, i, body, e)?;
            }
            let mut held = self.group.take().map_or_else(Vec::new, |g| g.held);
            // Stable: a value's descriptors at one point keep their emission order.
            held.sort_by(|(v, d, _), (w, c, _)| {
                d.indices[k + 1..].cmp(&c.indices[k + 1..]).then(v.cmp(w))
            });
            for (_, d, at) in held {
                self.queue(d, at, e)?;
            }
            g0 = g1;
        }
        Ok(Flow::Next)
    }

    /// `let SLOT = alloc(TIER, INDICES...);`: a workspace slot (`-1` for none).
    fn alloc<S: pde::Sink>(
        &mut self,
        slot: u32,
        tier: &IntExpr,
        indices: &[IntExpr],
        loc: Loc,
        e: &mut pde::Emitter<'_, S>,
    ) -> Result<Flow, PdeError> {
        let t = self.field("tier", tier, loc)?;
        let mut idx = Vec::with_capacity(indices.len());
        for i in indices {
            idx.push(self.field("alloc index", i, loc)?);
        }
        let at = e
            .alloc_workspace(t, &idx)
            .map_err(|err| self.fail(loc, err.to_string()))?;
        let v = if at == NO_WORKSPACE {
            -1
        } else {
            i64::from(at)
        };
        self.set(slot, Value::I64(v));
        Ok(Flow::Next)
    }

    /// `emit(FIELDS);`: a descriptor, queued (or held by the interleaving group).
    fn emit<S: pde::Sink>(
        &mut self,
        fields: &[(Field, String, FieldVal)],
        loc: Loc,
        e: &mut pde::Emitter<'_, S>,
    ) -> Result<Flow, PdeError> {
        let mut d = Descriptor {
            workspace: NO_WORKSPACE,
            ..Descriptor::default()
        };
        for (f, name, value) in fields {
            let x = match value {
                FieldVal::Expr(value) => self.field(name, value, loc)?,
                FieldVal::SelectTier(value) => {
                    let v = self.field("select_tier value", value, loc)?;
                    pde::select_tier(e.tiers(), v)
                }
            };
            match f {
                Field::Tier => d.tier = x,
                Field::Start => d.start = x,
                Field::End => d.end = x,
                Field::Workspace => d.workspace = x,
                Field::Index(k) => d.indices[*k] = x,
                Field::User(k) => d.user[*k] = x,
                Field::Unknown => {
                    return Err(self.fail(loc, format!("the descriptor has no field `{name}`")));
                }
            }
        }
        match &mut self.group {
            Some(g) => g.held.push((g.current, d, loc)),
            None => self.queue(d, loc, e)?,
        }
        Ok(Flow::Next)
    }

    /// Runs `body` for value `i` of axis `k`, its variables bound.
    fn iteration<S: pde::Sink>(
        &mut self,
        k: usize,
        vars: &'m [u32],
        i: u32,
        body: &'m [GenStep],
        e: &mut pde::Emitter<'_, S>,
    ) -> Result<(), PdeError> {
        self.set(vars[0], Value::I64(i.into()));
        if vars.len() == 3 {
            let (lo, hi) = self.bound.tile_bounds(k, i).unwrap_or((0, 0));
            self.set(vars[1], Value::I64(lo.into()));
            self.set(vars[2], Value::I64(hi.into()));
        }
        self.block(body, e)?;
        Ok(())
    }

    /// Queues descriptor `d`, made by the `emit` at `loc`.
    fn queue<S: pde::Sink>(
        &mut self,
        d: Descriptor,
        loc: Loc,
        e: &mut pde::Emitter<'_, S>,
    ) -> Result<(), PdeError> {
        e.emit(d).map_err(|err| match err {
            PdeError::Launch { .. } => err,
            other => self.fail(loc, other.to_string()),
        })
    }

    /// An element of an integer tensor's bound contents.
    fn load(
        &mut self,
        tensor: &str,
        extents: Option<&[IntExpr]>,
        index: &[IntExpr],
        loc: Loc,
    ) -> Result<i64, PdeError> {
        let Some(extents) = extents else {
            return Err(self.fail(loc, format!("unknown tensor `{tensor}`")));
        };
        let Some(data) = self.bindings.arrays.get(tensor) else {
            return Err(self.fail(
                loc,
                format!(
                    "`load` reads `{tensor}`, whose contents are not bound (plans read host \
                     metadata only: bind it, e.g. `--bind {tensor}=[...]`, or give it as an input)"
                ),
            ));
        };
        let mut flat: i64 = 0;
        for (d, (i, extent)) in index.iter().zip(extents).enumerate() {
            let i = self.value(i, loc)?;
            let n = self.value(extent, loc)?;
            let (Some(i), Some(n)) = (as_i64(i), as_i64(n)) else {
                return Err(self.fail(
                    loc,
                    format!("`load` of `{tensor}`: a non-integer index or extent"),
                ));
            };
            if i < 0 || i >= n {
                return Err(self.fail(
                    loc,
                    format!("`load` of `{tensor}`: index {i} of dimension {d} is outside 0..{n}"),
                ));
            }
            flat = flat.saturating_mul(n).saturating_add(i);
        }
        match usize::try_from(flat).ok().and_then(|f| data.get(f)) {
            Some(v) => Ok(*v),
            None => Err(self.fail(
                loc,
                format!(
                    "`load` of `{tensor}`: element {flat} is past its {} bound values",
                    data.len()
                ),
            )),
        }
    }
}

/// Tier `t`'s kernel item in plan `p` and its call in slot form (`k` its index in
/// `form.tier_kernels`); a tier without a kernel is an error at the plan.
fn tier_kernel<'m>(
    p: &'m PlanDecl,
    td: &TierTableDecl,
    form: &'m PlanForm,
    t: &crate::ir::plan::TierDecl,
    k: Option<usize>,
) -> Result<(&'m crate::ir::plan::TierKernel, &'m CallForm), PlanError> {
    k.map(|i| (&p.kernels[i], &form.calls[i])).ok_or_else(|| {
        PlanError::at(p.name.as_str())(
            p.loc,
            format!("tier `{}` of `{}` has no kernel", t.name, td.name),
        )
    })
}
