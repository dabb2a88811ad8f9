//! The validator: checks that a module means something before anything runs it.
//!
//! Why: the expander and every back end assume a well-formed module (every name resolves, every
//! expression is typed, every task matches its kernel, the schedule is coherent). Checking all of
//! that once, up front, lets them stay simple, and lets a user see every mistake at once instead
//! of one per run. The rules are those of `docs/SEMANTICS.md`.
//! Promise: [`validate`] never panics, on any module; it returns *every* mistake found (one
//! [`ValidationError`] each, not just the first), sorted in source order when locations are
//! known (and otherwise in the order of the module: declarations, kernels, workloads, pipelines,
//! entry, schedule). A module it accepts can be expanded without name, type or shape surprises;
//! what remains are run-time conditions (bindings, evaluated bounds).
//!
//! Checks beyond the obvious, and the choices made where the spec leaves room:
//! - Shadowing: loop / `select` / `consume` variables and workload parameters may not reuse any
//!   top-level name (of any kind) or a variable in scope. A kernel's *scalar* parameters may not
//!   reuse a symbol or slot name (tier conditions see both); tile parameter names are free.
//! - "Writes to read-only names": `set` / `load` of a symbol, loop variable or parameter; and a
//!   tier variant declaring `out` / `inout` where the tiered kernel declares `in` (the region the
//!   task passes would be written although its kernel promises to only read it).
//! - Dimensions in messages are 0-based (`dimension 1` of `f16[seq, 4096]` is `4096`);
//!   arguments and parameters are 1-based (`argument 1` is the first).
//! - Constant checks (region bounds, tile sizes, negative extents) apply only to name-free
//!   expressions that fold without overflow.
//! - Schedule expressions: a name that is not a symbol or slot and is missing at some reachable
//!   task (even at all of them) is reported with the first task, in program order, where it is
//!   missing; with no task reachable, such a name is an unknown name. Its type is taken from the
//!   first task where it is bound.
//! - With the wrong number of task or call arguments, arguments are checked on their own, not
//!   paired with parameters by position.

mod body;
pub mod depth;
mod errors;
mod exact;
mod explicit;
mod flow;
mod kernel_body;
mod plan;
mod schedule;
mod scope;
mod spatial;
mod typeck;

pub use errors::ValidationError;

use crate::csp::Pipeline;
use crate::expr::Expr;
use crate::loc::{Ident, Loc};
use crate::module::{AxisKind, KernelDecl, KernelParam, Module, ParamKind};
use crate::types::{Access, ScalarType};
use scope::{Decl, Globals, Local};
use std::collections::{HashMap, HashSet};
use typeck::{Expected, Site};

/// Checks `module` against the rules of `SEMANTICS.md`, returning every mistake found.
pub fn validate(module: &Module) -> Result<(), Vec<ValidationError>> {
    let mut errors = Vec::new();
    let globals = Globals::build(module, &mut errors);
    let mut v = Validator {
        m: module,
        g: globals,
        errors,
        calls: Vec::new(),
    };
    v.run();
    let mut errors = v.errors;
    plan::check(module, &mut errors);
    spatial::check(module, &mut errors);
    if errors.is_empty() {
        return Ok(());
    }
    errors.sort_by_key(|e| {
        let loc = e.loc();
        if loc.is_known() { loc.start } else { u32::MAX }
    });
    Err(errors)
}

/// Checks one kernel's body alone (names, operands, shapes, element types, reads before
/// writes): what [`validate`] checks of it, for kernels made outside a module (the kernel
/// library's instances).
pub fn validate_kernel(k: &crate::module::KernelDecl) -> Result<(), Vec<ValidationError>> {
    let mut errors = Vec::new();
    kernel_body::check(k, &mut errors);
    if errors.is_empty() {
        flow::check_unwritten(k, &mut errors);
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// The checks a module must pass to be *run* (or compiled into a program that runs), beyond
/// [`validate`]: what expansion alone does not need. Every back end that runs a module calls it
/// (for `cpu_sim`: host runs, device-generation runs and `trace cycles` alike).
///
/// - With no `deps` item in the schedule (or no schedule), dependencies are exact, the
///   default: the tile-grid rule of `deps exact` applies, reported as
///   [`ValidationError::DefaultExactPartialOverlap`] with the hint that `deps overlap` /
///   `deps hybrid` are sound for overlapping regions.
///
/// - Under `deps explicit` (no inference): each tensor a task writes is accessed by one task
///   argument whose statement runs at most once (`validate/explicit.rs`), else
///   [`ValidationError::ExplicitUnordered`] naming both accesses.
///
/// Call it on a module [`validate`] accepted; it never panics.
pub fn validate_for_run(module: &Module) -> Result<(), Vec<ValidationError>> {
    let mut errors = Vec::new();
    match exact::named_deps(module) {
        None => exact::check_exact_grid(module, true, &mut errors),
        Some(crate::schedule::DepsMode::Explicit) => explicit::check_explicit(module, &mut errors),
        Some(_) => {}
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// A `call` statement inside a workload: an edge of the call graph.
struct CallEdge {
    caller: usize,
    callee: usize,
    loc: Loc,
    path: String,
}

/// How names in an expression resolve, by where the expression stands.
pub(crate) enum NameScope<'a> {
    /// A workload or process body: locals, symbols, slots.
    Body(&'a [Local]),
    /// A tensor dimension: symbols only.
    SymbolsOnly,
    /// A `dense` extent: constants only.
    Constant,
    /// A `dense_dyn` extent, ragged / sparse row count: symbols and slots.
    SymbolsAndSlots,
    /// A tier condition of a kernel: its scalar parameters and symbols.
    Tier(&'a KernelDecl),
    /// A schedule expression: symbols, slots and the variables bound at every task.
    Schedule(&'a HashMap<String, schedule::Binding>, &'static str),
}

/// The kinds a declaration can be looked up as (with the error for a missing one).
#[derive(Clone, Copy)]
enum Want {
    Tensor,
    Axis,
    Kernel,
    Workload,
}

pub(crate) struct Validator<'m> {
    m: &'m Module,
    g: Globals,
    errors: Vec<ValidationError>,
    calls: Vec<CallEdge>,
}

/// `in q: f16[32, ?]` / `n: i64`: a parameter as written.
fn param_text(p: &KernelParam) -> String {
    match &p.kind {
        ParamKind::Tile {
            access,
            dtype,
            shape,
        } => {
            let dims: Vec<String> = shape
                .iter()
                .map(|d| d.map_or_else(|| "?".to_string(), |n| n.to_string()))
                .collect();
            format!("{access} {}: {dtype}[{}]", p.name, dims.join(", "))
        }
        ParamKind::Scalar(ty) => format!("{}: {ty}", p.name),
    }
}

impl<'m> Validator<'m> {
    fn run(&mut self) {
        let m = self.m;
        for t in &m.tensors {
            for (d, e) in t.shape.iter().enumerate() {
                let path = format!("tensor {} > dimension {d}", t.name);
                let ctx = || format!("dimension {d} of tensor `{}`", t.name);
                self.check_expr(
                    e,
                    Some(Expected::Integer),
                    &ctx,
                    &NameScope::SymbolsOnly,
                    t.name.loc,
                    &path,
                );
                self.check_non_negative(e, &ctx, t.name.loc, &path);
            }
        }
        for a in &m.axes {
            self.check_axis(a);
        }
        // Kernels whose bodies have mistakes are not interpreted (`flow`).
        let mut broken = HashSet::new();
        for k in &m.kernels {
            self.check_kernel(k);
            let before = self.errors.len();
            kernel_body::check(k, &mut self.errors);
            if self.errors.len() == before {
                flow::check_unwritten(k, &mut self.errors);
            } else {
                broken.insert(k.name.name.clone());
            }
        }
        for (i, w) in m.workloads.iter().enumerate() {
            self.check_workload(i, w);
        }
        flow::check_calls(m, &broken, &mut self.errors);
        for p in &m.pipelines {
            self.check_pipeline(p);
        }
        self.check_call_cycles();
        depth::check_total_depth(m, &mut self.errors);
        if exact::asks_for_exact(m) {
            exact::check_exact_grid(m, false, &mut self.errors);
        }
        self.check_entry();
        self.check_schedule();
    }

    fn push(&mut self, e: ValidationError) {
        self.errors.push(e);
    }

    /// Resolves `id` as a declaration of kind `want`, reporting an unknown name or a wrong kind.
    fn lookup(&mut self, id: &Ident, want: Want, path: &str) -> Option<usize> {
        let found = self.g.get(&id.name);
        let (hit, expected) = match (want, found) {
            (Want::Tensor, Some(Decl::Tensor(i))) => (Some(i), "a tensor"),
            (Want::Axis, Some(Decl::Axis(i))) => (Some(i), "an axis"),
            (Want::Kernel, Some(Decl::Kernel(i))) => (Some(i), "a kernel"),
            (Want::Workload, Some(Decl::Workload(i))) => (Some(i), "a workload"),
            (Want::Tensor, _) => (None, "a tensor"),
            (Want::Axis, _) => (None, "an axis"),
            (Want::Kernel, _) => (None, "a kernel"),
            (Want::Workload, _) => (None, "a workload"),
        };
        if hit.is_some() {
            return hit;
        }
        let (name, loc, path) = (id.name.clone(), id.loc, path.to_string());
        let err = match found {
            Some(d) => ValidationError::WrongKind {
                name,
                found: d.article(),
                expected,
                loc,
                path,
            },
            None => match want {
                Want::Tensor => ValidationError::UnknownTensor { name, loc, path },
                Want::Axis => ValidationError::UnknownAxis { name, loc, path },
                Want::Kernel => ValidationError::UnknownKernel { name, loc, path },
                Want::Workload => ValidationError::UnknownWorkload { name, loc, path },
            },
        };
        self.push(err);
        None
    }

    /// Type-checks `e` in `scope`; when `expected` is given, also checks its type.
    pub(crate) fn check_expr(
        &mut self,
        e: &Expr,
        expected: Option<Expected>,
        context: &dyn Fn() -> String,
        scope: &NameScope<'_>,
        fallback: Loc,
        path: &str,
    ) -> Option<ScalarType> {
        let mut name_errors = Vec::new();
        let mut op_errors = Vec::new();
        let ty = {
            let g = &self.g;
            let mut resolve =
                |id: &Ident| resolve_name(g, scope, id, context, path, &mut name_errors);
            let site = Site { fallback, path };
            match expected {
                Some(x) => typeck::expect_type(e, x, context, &mut resolve, &site, &mut op_errors),
                None => typeck::type_of(e, &mut resolve, &site, &mut op_errors),
            }
        };
        self.errors.extend(name_errors);
        self.errors.extend(op_errors);
        ty
    }

    /// Reports a negative constant value of `e` (an extent or dimension).
    fn check_non_negative(&mut self, e: &Expr, what: &dyn Fn() -> String, loc: Loc, path: &str) {
        if let Some(v) = typeck::const_value(e)
            && v < 0
        {
            self.push(ValidationError::NegativeExtent {
                what: what(),
                value: v,
                loc: pick(e.loc(), loc),
                path: path.to_string(),
            });
        }
    }

    fn check_axis(&mut self, a: &'m crate::module::AxisDecl) {
        let path = format!("axis {}", a.name);
        let loc = a.name.loc;
        let kw = a.kind.keyword();
        let extent_ctx = || format!("the extent of {kw} axis `{}`", a.name);
        match &a.kind {
            AxisKind::Dense(e) | AxisKind::DenseDyn(e) => {
                // A static extent names nothing; a dynamic one may name symbols and slots.
                let scope = if matches!(a.kind, AxisKind::Dense(_)) {
                    NameScope::Constant
                } else {
                    NameScope::SymbolsAndSlots
                };
                self.check_expr(e, Some(Expected::Integer), &extent_ctx, &scope, loc, &path);
                self.check_non_negative(e, &extent_ctx, loc, &path);
            }
            AxisKind::Ragged {
                outer,
                lengths,
                per_row,
            } => {
                self.check_expr(
                    outer,
                    Some(Expected::Integer),
                    &extent_ctx,
                    &NameScope::SymbolsAndSlots,
                    loc,
                    &path,
                );
                self.check_non_negative(outer, &extent_ctx, loc, &path);
                self.check_array_tensor(a, "lengths", lengths, &path);
                if let Some(e) = per_row {
                    // `lengths` stands for the row's element: an i64 local to the expression.
                    let element = [Local {
                        name: lengths.name.clone(),
                        ty: ScalarType::I64,
                        what: "a row's element",
                    }];
                    let row_ctx = || format!("the row length of ragged axis `{}`", a.name);
                    self.check_expr(
                        e,
                        Some(Expected::Integer),
                        &row_ctx,
                        &NameScope::Body(&element),
                        loc,
                        &path,
                    );
                    self.check_non_negative(e, &row_ctx, loc, &path);
                }
            }
            AxisKind::Sparse {
                outer,
                indptr,
                indices,
            } => {
                self.check_expr(
                    outer,
                    Some(Expected::Integer),
                    &extent_ctx,
                    &NameScope::SymbolsAndSlots,
                    loc,
                    &path,
                );
                self.check_non_negative(outer, &extent_ctx, loc, &path);
                self.check_array_tensor(a, "indptr", indptr, &path);
                self.check_array_tensor(a, "indices", indices, &path);
            }
        }
    }

    fn check_array_tensor(
        &mut self,
        a: &crate::module::AxisDecl,
        role: &'static str,
        t: &Ident,
        path: &str,
    ) {
        let path = format!("{path} > {role}");
        let Some(i) = self.lookup(t, Want::Tensor, &path) else {
            return;
        };
        let Some(td) = self.m.tensors.get(i) else {
            return;
        };
        if td.shape.len() != 1 || !td.dtype.is_integer() {
            self.push(ValidationError::ArrayTensor {
                axis: a.name.name.clone(),
                role,
                tensor: t.name.clone(),
                found: format!(
                    "{} with {}",
                    td.dtype,
                    errors::count(&td.shape.len(), "dimension")
                ),
                loc: pick(t.loc, a.name.loc),
                path,
            });
        }
    }

    fn check_kernel(&mut self, k: &'m KernelDecl) {
        let kpath = format!("kernel {}", k.name);
        let mut seen: HashSet<&str> = HashSet::new();
        for p in &k.params {
            let path = format!("{kpath} > parameter {}", p.name);
            if !seen.insert(&p.name.name) {
                self.push(ValidationError::DuplicateParameter {
                    owner: format!("kernel `{}`", k.name),
                    name: p.name.name.clone(),
                    loc: pick(p.name.loc, k.name.loc),
                    path: path.clone(),
                });
            }
            match &p.kind {
                ParamKind::Tile { shape, .. } => {
                    for (d, s) in shape.iter().enumerate() {
                        if *s == Some(0) {
                            self.push(ValidationError::ZeroValue {
                                what: format!(
                                    "dimension {d} of tile parameter `{}` of kernel `{}`",
                                    p.name, k.name
                                ),
                                loc: pick(p.name.loc, k.name.loc),
                                path: path.clone(),
                            });
                        }
                    }
                }
                ParamKind::Scalar(_) => {
                    if let Some(d @ (Decl::Symbol(_) | Decl::Slot(_))) = self.g.get(&p.name.name) {
                        self.push(ValidationError::Shadowing {
                            what: "kernel parameter".into(),
                            name: p.name.name.clone(),
                            shadowed: d.article().into(),
                            loc: pick(p.name.loc, k.name.loc),
                            path: path.clone(),
                        });
                    }
                }
            }
        }
        let Some(tiers) = &k.tiers else { return };
        let tpath = format!("{kpath} > tiers");
        if tiers.cases.is_empty() {
            self.push(ValidationError::EmptyTiers {
                kernel: k.name.name.clone(),
                loc: k.name.loc,
                path: tpath.clone(),
            });
        }
        for (i, (cond, variant)) in tiers.cases.iter().enumerate() {
            let path = format!("{tpath} > case {}", i + 1);
            let ctx = || format!("tier case {} of kernel `{}`", i + 1, k.name);
            self.check_expr(
                cond,
                Some(Expected::Bool),
                &ctx,
                &NameScope::Tier(k),
                pick(variant.loc, k.name.loc),
                &path,
            );
            self.check_variant(k, variant, &path);
        }
        self.check_variant(k, &tiers.default, &format!("{tpath} > else"));
    }

    fn check_variant(&mut self, k: &KernelDecl, variant: &Ident, path: &str) {
        let Some(vi) = self.lookup(variant, Want::Kernel, path) else {
            return;
        };
        let Some(v) = self.m.kernels.get(vi) else {
            return;
        };
        let loc = pick(variant.loc, k.name.loc);
        if v.tiers.is_some() {
            self.push(ValidationError::NestedTiers {
                kernel: k.name.name.clone(),
                variant: variant.name.clone(),
                loc,
                path: path.to_string(),
            });
        }
        if v.params.len() != k.params.len() {
            self.push(ValidationError::TierParamCount {
                kernel: k.name.name.clone(),
                variant: variant.name.clone(),
                expected: k.params.len(),
                found: v.params.len(),
                loc,
                path: path.to_string(),
            });
            return;
        }
        for (i, (kp, vp)) in k.params.iter().zip(&v.params).enumerate() {
            if kp == vp {
                continue;
            }
            // A variant that writes a tile the tiered kernel only reads (all else equal).
            let writes_in = if let (
                ParamKind::Tile {
                    access: Access::In,
                    dtype: d1,
                    shape: s1,
                },
                ParamKind::Tile {
                    access: a2,
                    dtype: d2,
                    shape: s2,
                },
            ) = (&kp.kind, &vp.kind)
                && kp.name == vp.name
                && d1 == d2
                && s1 == s2
                && a2.writes()
            {
                Some(*a2)
            } else {
                None
            };
            let err = match writes_in {
                Some(access) => ValidationError::TierWritesInParam {
                    kernel: k.name.name.clone(),
                    variant: variant.name.clone(),
                    index: i + 1,
                    access: access.keyword(),
                    loc,
                    path: path.to_string(),
                },
                None => ValidationError::TierParamMismatch {
                    kernel: k.name.name.clone(),
                    variant: variant.name.clone(),
                    index: i + 1,
                    expected: param_text(kp),
                    found: param_text(vp),
                    loc,
                    path: path.to_string(),
                },
            };
            self.push(err);
        }
    }

    fn check_pipeline(&mut self, p: &'m Pipeline) {
        let ppath = format!("pipeline {}", p.name);
        let mut channels: HashSet<&str> = HashSet::new();
        for c in &p.channels {
            let path = format!("{ppath} > channel {}", c.name);
            if !channels.insert(&c.name.name) {
                self.push(ValidationError::DuplicateDeclaration {
                    kind: "channel",
                    name: c.name.name.clone(),
                    previous: "a channel",
                    loc: c.name.loc,
                    path: path.clone(),
                });
            }
            if c.depth == 0 {
                self.push(ValidationError::ZeroValue {
                    what: format!("the depth of channel `{}`", c.name),
                    loc: c.name.loc,
                    path,
                });
            } else if c.depth > crate::schedule::limits::CHANNEL_DEPTH {
                self.push(ValidationError::OverLimit {
                    what: format!("the depth of channel `{}`", c.name),
                    value: c.depth,
                    limit: crate::schedule::limits::CHANNEL_DEPTH,
                    loc: c.name.loc,
                    path,
                });
            }
        }
        let mut processes: HashSet<&str> = HashSet::new();
        let mut producers: HashMap<&str, usize> = HashMap::new();
        let mut consumers: HashMap<&str, usize> = HashMap::new();
        for proc in &p.processes {
            let path = format!("{ppath} > process {}", proc.name);
            if !processes.insert(&proc.name.name) {
                self.push(ValidationError::DuplicateDeclaration {
                    kind: "process",
                    name: proc.name.name.clone(),
                    previous: "a process",
                    loc: proc.name.loc,
                    path: path.clone(),
                });
            }
            for (list, counts) in [
                (&proc.consumes, &mut consumers),
                (&proc.produces, &mut producers),
            ] {
                for c in list {
                    if channels.contains(c.name.as_str()) {
                        *counts.entry(c.name.as_str()).or_default() += 1;
                    } else {
                        self.push(ValidationError::UnknownChannel {
                            name: c.name.clone(),
                            pipeline: p.name.name.clone(),
                            loc: pick(c.loc, proc.name.loc),
                            path: path.clone(),
                        });
                    }
                }
            }
        }
        let mut reported: HashSet<&str> = HashSet::new();
        for c in &p.channels {
            if !reported.insert(&c.name.name) {
                continue;
            }
            for (role, counts) in [("producer", &producers), ("consumer", &consumers)] {
                let n = counts.get(c.name.as_str()).copied().unwrap_or(0);
                if n != 1 {
                    self.push(ValidationError::ChannelEndpointCount {
                        channel: c.name.name.clone(),
                        role,
                        count: n,
                        loc: c.name.loc,
                        path: format!("{ppath} > channel {}", c.name),
                    });
                }
            }
        }
        for proc in &p.processes {
            self.check_process(p, proc);
        }
    }

    /// Reports every cycle of the call graph once, at the call that closes it.
    fn check_call_cycles(&mut self) {
        let n = self.m.workloads.len();
        let mut out: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (e, edge) in self.calls.iter().enumerate() {
            if let Some(o) = out.get_mut(edge.caller) {
                o.push(e);
            }
        }
        // Iterative DFS: 0 = unvisited, 1 = on the stack, 2 = done.
        let mut color = vec![0u8; n];
        let mut found = Vec::new();
        for root in 0..n {
            if color[root] != 0 {
                continue;
            }
            let mut stack: Vec<(usize, usize)> = vec![(root, 0)];
            color[root] = 1;
            while let Some(&mut (node, ref mut next)) = stack.last_mut() {
                if let Some(&e) = out[node].get(*next) {
                    *next += 1;
                    let callee = self.calls[e].callee;
                    match color.get(callee).copied() {
                        Some(0) => {
                            color[callee] = 1;
                            stack.push((callee, 0));
                        }
                        Some(1) => {
                            let start = stack.iter().position(|(w, _)| *w == callee).unwrap_or(0);
                            let mut names: Vec<&str> = stack[start..]
                                .iter()
                                .map(|(w, _)| self.m.workloads[*w].name.as_str())
                                .collect();
                            names.push(self.m.workloads[callee].name.as_str());
                            found.push((e, names.join(" -> ")));
                        }
                        _ => {}
                    }
                } else {
                    color[node] = 2;
                    stack.pop();
                }
            }
        }
        for (e, cycle) in found {
            let edge = &self.calls[e];
            self.errors.push(ValidationError::RecursiveCall {
                cycle,
                loc: edge.loc,
                path: edge.path.clone(),
            });
        }
    }

    fn check_entry(&mut self) {
        let m = self.m;
        if m.schedule.is_some() {
            return; // the schedule's target is checked with the schedule
        }
        if m.workloads.is_empty() && m.pipelines.is_empty() && !m.plans.is_empty() {
            return; // a module of plans runs its plans (`validate/plan.rs`)
        }
        match m.entry_name() {
            None => self.push(ValidationError::NoEntry {
                workloads: m.workloads.len(),
                pipelines: m.pipelines.len(),
                loc: Loc::NONE,
                path: "module".into(),
            }),
            Some(name) => {
                if let Some(w) = m.workload(name) {
                    self.check_entry_params(w);
                }
            }
        }
    }

    fn check_entry_params(&mut self, w: &crate::module::Workload) {
        if !w.params.is_empty() {
            self.push(ValidationError::EntryHasParams {
                workload: w.name.name.clone(),
                loc: pick(w.name.loc, w.loc),
                path: format!("workload {}", w.name),
            });
        }
    }
}

/// `loc` if known, else `fallback`.
pub(crate) fn pick(loc: Loc, fallback: Loc) -> Loc {
    if loc.is_known() { loc } else { fallback }
}

/// Resolves one name of an expression in `scope`, reporting what is wrong with it.
fn resolve_name(
    g: &Globals,
    scope: &NameScope<'_>,
    id: &Ident,
    context: &dyn Fn() -> String,
    path: &str,
    errors: &mut Vec<ValidationError>,
) -> Option<ScalarType> {
    let (name, loc, path) = (id.name.clone(), id.loc, path.to_string());
    let not_allowed = |rule: &'static str, what: &'static str| ValidationError::NameNotAllowed {
        context: context(),
        rule,
        what,
        name: id.name.clone(),
        loc: id.loc,
        path: path.clone(),
    };
    let decl = g.get(&id.name);
    let err = match scope {
        NameScope::Body(locals) => {
            if let Some(l) = locals.iter().rev().find(|l| l.name == id.name) {
                return Some(l.ty);
            }
            match decl {
                Some(Decl::Symbol(t) | Decl::Slot(t)) => return Some(t),
                _ => None,
            }
        }
        NameScope::SymbolsOnly => match decl {
            Some(Decl::Symbol(t)) => return Some(t),
            Some(Decl::Slot(_)) => Some(not_allowed("may name only symbols", "slot")),
            _ => None,
        },
        NameScope::Constant => match decl {
            Some(d @ (Decl::Symbol(_) | Decl::Slot(_))) => {
                Some(not_allowed("must be a constant", d.kind()))
            }
            _ => None,
        },
        NameScope::SymbolsAndSlots => match decl {
            Some(Decl::Symbol(t) | Decl::Slot(t)) => return Some(t),
            _ => None,
        },
        NameScope::Tier(k) => {
            if let Some(p) = k.params.iter().find(|p| p.name.name == id.name) {
                match p.kind {
                    ParamKind::Scalar(t) if !t.is_float() => return Some(t.carrier()),
                    ParamKind::Scalar(_) => Some(not_allowed(
                        "may name only the kernel's integer and bool scalar parameters and symbols",
                        "float parameter",
                    )),
                    ParamKind::Tile { .. } => Some(not_allowed(
                        "may name only the kernel's scalar parameters and symbols",
                        "tile parameter",
                    )),
                }
            } else {
                match decl {
                    Some(Decl::Symbol(t)) => return Some(t),
                    Some(Decl::Slot(_)) => Some(not_allowed(
                        "may name only the kernel's scalar parameters and symbols",
                        "slot",
                    )),
                    _ => None,
                }
            }
        }
        NameScope::Schedule(bound, item) => match decl {
            Some(Decl::Symbol(t) | Decl::Slot(t)) => return Some(t),
            _ => match bound.get(&id.name) {
                Some(schedule::Binding::Everywhere(t)) => return Some(*t),
                Some(schedule::Binding::MissingAt { task, task_path }) => {
                    Some(ValidationError::NotBoundAtEveryTask {
                        item,
                        name: name.clone(),
                        task: task.clone(),
                        task_path: task_path.clone(),
                        loc,
                        path: path.clone(),
                    })
                }
                None => None,
            },
        },
    };
    let err = err.unwrap_or_else(|| match decl {
        Some(d) => ValidationError::WrongKind {
            name,
            found: d.article(),
            expected: "a scalar value",
            loc,
            path,
        },
        None => ValidationError::UnknownName { name, loc, path },
    });
    errors.push(err);
    None
}
