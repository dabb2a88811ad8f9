//! The checks of Plan-Descriptor-Execute declarations (`crate::plan`): every name a space, tier
//! table or plan uses resolves, sizes fit the fixed descriptor, every tier has exactly one
//! kernel whose call matches the kernel's parameters, and the generator only names what is in
//! scope. Each mistake is one [`ValidationError::Plan`] naming the declaration and the item,
//! at the offending name's location. What needs run-time values (a field out of range, a
//! workspace overflow, a constraint that fails) is checked when the plan runs
//! (`pto_wsp::plan`), with the same locations.

use super::ValidationError;
use crate::expr::Expr;
use crate::loc::{Ident, Loc};
use crate::module::{Module, ParamKind};
use crate::plan::{
    AffinityKind, BindWhat, FIXED_FIELDS, FieldValue, GenKind, GenStmt, MAX_PLAN_FIELDS,
    MAX_SPACE_AXES, OrderKind, PlanDecl, PlanPrefetch, SpaceDecl, SpaceEnd, TierTableDecl,
    TileKind,
};
use crate::types::ScalarType;
use crate::workload::Arg;
use std::collections::HashSet;

struct Checker<'m> {
    m: &'m Module,
    /// Every top-level name outside plans (symbols, slots, tensors, axes, kernels, workloads,
    /// pipelines) and the spaces, tier tables and plans.
    globals: HashSet<&'m str>,
    errors: &'m mut Vec<ValidationError>,
}

/// Checks the module's spaces, tier tables and plans, appending to `errors`.
pub(super) fn check(m: &Module, errors: &mut Vec<ValidationError>) {
    if m.spaces.is_empty() && m.tier_tables.is_empty() && m.plans.is_empty() {
        return;
    }
    let mut c = Checker {
        m,
        globals: HashSet::new(),
        errors,
    };
    let others = m
        .symbols
        .iter()
        .map(|d| &d.name)
        .chain(m.slots.iter().map(|d| &d.name))
        .chain(m.tensors.iter().map(|d| &d.name))
        .chain(m.axes.iter().map(|d| &d.name))
        .chain(m.kernels.iter().map(|d| &d.name))
        .chain(m.workloads.iter().map(|d| &d.name))
        .chain(m.pipelines.iter().map(|d| &d.name));
    for n in others {
        c.globals.insert(n.as_str());
    }
    let own = m
        .spaces
        .iter()
        .map(|d| ("space", &d.name))
        .chain(m.tier_tables.iter().map(|d| ("tier table", &d.name)))
        .chain(m.plans.iter().map(|d| ("plan", &d.name)));
    for (kind, n) in own {
        if !c.globals.insert(n.as_str()) {
            c.err(n.loc, format!("{kind} `{n}`: the name is already declared"));
        }
    }
    for s in &m.spaces {
        c.space(s);
    }
    for t in &m.tier_tables {
        c.tier_table(t);
    }
    for p in &m.plans {
        c.plan(p);
    }
}

impl Checker<'_> {
    fn err(&mut self, loc: Loc, message: String) {
        // Every message starts with its owner (`plan `p`: ...`), which is also the path.
        let path = message
            .split_once(": ")
            .map_or("module", |(owner, _)| owner)
            .to_string();
        self.errors
            .push(ValidationError::Plan { message, loc, path });
    }

    /// A name that must be new: not a top-level name.
    fn fresh(&mut self, owner: &str, what: &str, id: &Ident) {
        if self.globals.contains(id.as_str()) {
            self.err(
                id.loc,
                format!("{owner}: {what} `{id}` has the name of a top-level declaration"),
            );
        }
    }

    /// Every name in `e` is in `scope` or an integer symbol.
    fn names(&mut self, owner: &str, e: &Expr, scope: &[&str]) {
        let mut bad = Vec::new();
        e.for_each_name(&mut |id| {
            let ok = scope.contains(&id.as_str()) || self.m.symbol(id.as_str()).is_some();
            if !ok {
                bad.push(id.clone());
            }
        });
        for id in bad {
            self.err(
                id.loc,
                format!(
                    "{owner}: unknown name `{id}` (in scope: symbols{}{})",
                    if scope.is_empty() { "" } else { ", " },
                    scope.join(", ")
                ),
            );
        }
    }

    fn space(&mut self, s: &SpaceDecl) {
        let owner = format!("space `{}`", s.name);
        if s.axes.is_empty() || s.axes.len() > MAX_SPACE_AXES {
            self.err(
                s.name.loc,
                format!(
                    "{owner} has {} axes (a descriptor holds 1 to {MAX_SPACE_AXES} indices)",
                    s.axes.len()
                ),
            );
        }
        for (i, a) in s.axes.iter().enumerate() {
            self.fresh(&owner, "axis", &a.name);
            if FIXED_FIELDS.contains(&a.name.as_str()) {
                self.err(
                    a.name.loc,
                    format!(
                        "{owner}: axis `{}` has the name of a fixed descriptor field",
                        a.name
                    ),
                );
            }
            if s.axes[..i].iter().any(|b| b.name == a.name) {
                self.err(
                    a.name.loc,
                    format!("{owner}: axis `{}` is declared twice", a.name),
                );
            }
            match &a.end {
                SpaceEnd::Const(e) if *e < a.start => self.err(
                    a.name.loc,
                    format!("{owner}: axis `{}` ends at {e}, before its start {}", a.name, a.start),
                ),
                SpaceEnd::Symbol(sym) => match self.m.symbol(sym.as_str()) {
                    Some(d) if d.ty != ScalarType::Bool => {}
                    _ => self.err(
                        sym.loc,
                        format!(
                            "{owner}: the end of axis `{}` names `{sym}`, which is not an integer symbol",
                            a.name
                        ),
                    ),
                },
                _ => {}
            }
            if a.start > u64::from(u32::MAX) {
                self.err(
                    a.name.loc,
                    format!("{owner}: axis `{}` starts past 2^32 - 1", a.name),
                );
            }
        }
        for (i, t) in s.tiles.iter().enumerate() {
            if !s.axes.iter().any(|a| a.name == t.axis) {
                self.err(
                    t.axis.loc,
                    format!(
                        "{owner}: `tile` names axis `{}`, which is not declared",
                        t.axis
                    ),
                );
            }
            if s.tiles[..i].iter().any(|o| o.axis == t.axis) {
                self.err(
                    t.axis.loc,
                    format!("{owner}: axis `{}` is tiled twice", t.axis),
                );
            }
            if let TileKind::Size(n) | TileKind::PadLast(n) = t.kind
                && (n == 0 || n > u64::from(u32::MAX))
            {
                self.err(
                    t.axis.loc,
                    format!(
                        "{owner}: the tile size of axis `{}` must be 1 to 2^32 - 1",
                        t.axis
                    ),
                );
            }
        }
        for (c, _) in &s.constraints {
            self.names(&owner, c, &[]);
        }
    }

    fn tier_table(&mut self, t: &TierTableDecl) {
        let owner = format!("tiers `{}`", t.name);
        let Some(last) = t.tiers.last() else {
            self.err(t.name.loc, format!("{owner}: the table has no tier"));
            return;
        };
        if last.max.is_some() {
            self.err(
                last.name.loc,
                format!("{owner}: the last tier `{}` must be `default`", last.name),
            );
        }
        let mut prev: Option<u64> = None;
        for (i, d) in t.tiers.iter().enumerate() {
            if t.tiers[..i].iter().any(|o| o.name == d.name) {
                self.err(
                    d.name.loc,
                    format!("{owner}: tier `{}` is declared twice", d.name),
                );
            }
            match d.max {
                None if i + 1 < t.tiers.len() => self.err(
                    d.name.loc,
                    format!(
                        "{owner}: tier `{}` is `default` but not the last tier",
                        d.name
                    ),
                ),
                Some(m) => {
                    if prev.is_some_and(|p| m <= p) {
                        self.err(
                            d.name.loc,
                            format!(
                                "{owner}: tier `{}` bound {m} does not exceed the previous tier's",
                                d.name
                            ),
                        );
                    }
                    if m > u64::from(u32::MAX) {
                        self.err(
                            d.name.loc,
                            format!("{owner}: tier `{}` bound is past 2^32 - 1", d.name),
                        );
                    }
                    prev = Some(m);
                }
                None => {}
            }
            if d.workspace > u64::from(u32::MAX) {
                self.err(
                    d.name.loc,
                    format!(
                        "{owner}: tier `{}` workspace is past 2^32 - 1 elements",
                        d.name
                    ),
                );
            }
        }
    }

    fn plan(&mut self, p: &PlanDecl) {
        let owner = format!("plan `{}`", p.name);
        let space = self.m.space(p.space.as_str());
        if space.is_none() {
            self.err(p.space.loc, format!("{owner}: unknown space `{}`", p.space));
        }
        let tiers = self.m.tier_table(p.tiers.as_str());
        if tiers.is_none() {
            self.err(
                p.tiers.loc,
                format!("{owner}: unknown tier table `{}`", p.tiers),
            );
        }
        // Descriptor fields.
        if p.fields.len() > MAX_PLAN_FIELDS {
            self.err(
                p.fields[MAX_PLAN_FIELDS].loc,
                format!(
                    "{owner}: a descriptor holds at most {MAX_PLAN_FIELDS} user fields, {} given",
                    p.fields.len()
                ),
            );
        }
        let axes: Vec<&str> = space
            .map(|s| s.axes.iter().map(|a| a.name.as_str()).collect())
            .unwrap_or_default();
        let mut fields: Vec<&str> = FIXED_FIELDS.to_vec();
        fields.extend(&axes);
        for f in &p.fields {
            self.fresh(&owner, "field", f);
            if fields.contains(&f.as_str()) {
                self.err(
                    f.loc,
                    format!("{owner}: descriptor field `{f}` is named twice"),
                );
            } else {
                fields.push(f.as_str());
            }
        }
        if let Some(w) = &p.workspace
            && self.m.tensor(w.as_str()).is_none()
        {
            self.err(w.loc, format!("{owner}: unknown workspace tensor `{w}`"));
        }
        // Bindings of dynamic ends and auto tiles: exactly one each.
        if let Some(s) = space {
            self.plan_binds(&owner, p, s);
        }
        // One kernel per tier, matching the kernel's parameters.
        if let Some(t) = tiers {
            self.plan_tiers(&owner, p, t);
        }
        for k in &p.kernels {
            self.tier_call(&owner, &format!("tier `{}`", k.tier), &k.call, &fields);
        }
        if let Some(pf) = &p.prefetch {
            self.plan_prefetch(&owner, pf, space, &fields);
        }
        self.schedule(&owner, p, space);
        // The generator.
        let mut scope = Vec::new();
        self.gen_body(&owner, p, space, &p.body, &mut scope, 0);
    }

    /// A plan's `bind`s: each names an axis of the space with a dynamic end or an `auto` tile
    /// to bind, once; every such end and tile is bound.
    fn plan_binds(&mut self, owner: &str, p: &PlanDecl, s: &SpaceDecl) {
        for (i, b) in p.binds.iter().enumerate() {
            self.names(owner, &b.value, &[]);
            let Some(a) = s.axes.iter().find(|a| a.name == b.axis) else {
                self.err(
                    b.axis.loc,
                    format!(
                        "{owner}: `bind` names axis `{}`, not an axis of space `{}`",
                        b.axis, s.name
                    ),
                );
                continue;
            };
            let open = match b.what {
                BindWhat::End => a.end == SpaceEnd::Dynamic,
                BindWhat::Tile => s
                    .tiles
                    .iter()
                    .any(|t| t.axis == b.axis && t.kind == TileKind::Auto),
            };
            if !open {
                self.err(
                    b.axis.loc,
                    format!(
                        "{owner}: axis `{}` has no {} to bind",
                        b.axis,
                        match b.what {
                            BindWhat::End => "dynamic end",
                            BindWhat::Tile => "`auto` tile",
                        }
                    ),
                );
            }
            if p.binds[..i]
                .iter()
                .any(|o| o.what == b.what && o.axis == b.axis)
            {
                self.err(
                    b.axis.loc,
                    format!(
                        "{owner}: the {} of axis `{}` is bound twice",
                        b.what.keyword(),
                        b.axis
                    ),
                );
            }
        }
        for a in &s.axes {
            if a.end == SpaceEnd::Dynamic
                && !p
                    .binds
                    .iter()
                    .any(|b| b.what == BindWhat::End && b.axis == a.name)
            {
                self.err(
                    p.name.loc,
                    format!("{owner}: the dynamic end of axis `{}` is not bound (`bind end({}) = ...;`)", a.name, a.name),
                );
            }
        }
        for t in &s.tiles {
            if t.kind == TileKind::Auto
                && !p
                    .binds
                    .iter()
                    .any(|b| b.what == BindWhat::Tile && b.axis == t.axis)
            {
                self.err(
                    p.name.loc,
                    format!("{owner}: the `auto` tile of axis `{}` is not bound (`bind tile({}) = ...;`)", t.axis, t.axis),
                );
            }
        }
    }

    /// A plan's `kernel`s: one per tier of its table, each naming a tier of it.
    fn plan_tiers(&mut self, owner: &str, p: &PlanDecl, t: &TierTableDecl) {
        for (i, k) in p.kernels.iter().enumerate() {
            if !t.tiers.iter().any(|d| d.name == k.tier) {
                self.err(
                    k.tier.loc,
                    format!(
                        "{owner}: `kernel` names tier `{}`, which is not in `{}`",
                        k.tier, t.name
                    ),
                );
            }
            if p.kernels[..i].iter().any(|o| o.tier == k.tier) {
                self.err(
                    k.tier.loc,
                    format!("{owner}: tier `{}` has two kernels", k.tier),
                );
            }
        }
        for d in &t.tiers {
            if !p.kernels.iter().any(|k| k.tier == d.name) {
                self.err(
                    p.name.loc,
                    format!(
                        "{owner}: tier `{}` of `{}` has no kernel (`kernel {} => ...;`)",
                        d.name, t.name, d.name
                    ),
                );
            }
        }
    }

    /// A plan's `prefetch`: an axis of the space, a depth in range, a call like a tier's.
    fn plan_prefetch(
        &mut self,
        owner: &str,
        pf: &PlanPrefetch,
        space: Option<&SpaceDecl>,
        fields: &[&str],
    ) {
        if let Some(s) = space
            && !s.axes.iter().any(|a| a.name == pf.axis)
        {
            self.err(
                pf.axis.loc,
                format!(
                    "{owner}: `prefetch` names `{}`, not an axis of space `{}`",
                    pf.axis, s.name
                ),
            );
        }
        if pf.depth == 0 || pf.depth > u64::from(u32::MAX) {
            self.err(
                pf.loc,
                format!("{owner}: the prefetch depth must be 1 to 2^32 - 1"),
            );
        }
        self.tier_call(owner, "the prefetch", &pf.call, fields);
    }

    /// Checks `order` and `affinity`: each names an axis of the space, an axis is ordered once,
    /// at most one axis is interleaved, and group sizes are 1 to 2^32 - 1.
    fn schedule(&mut self, owner: &str, p: &PlanDecl, space: Option<&SpaceDecl>) {
        let axis_of = |v: &mut Self, what: &str, axis: &Ident| {
            if let Some(s) = space
                && !s.axes.iter().any(|a| a.name == *axis)
            {
                v.err(
                    axis.loc,
                    format!(
                        "{owner}: `{what}` names `{axis}`, not an axis of space `{}`",
                        s.name
                    ),
                );
            }
        };
        let size = |n: u64| n == 0 || n > u64::from(u32::MAX);
        for (i, o) in p.orders.iter().enumerate() {
            axis_of(self, "order", &o.axis);
            if p.orders[..i].iter().any(|q| q.axis == o.axis) {
                self.err(
                    o.axis.loc,
                    format!("{owner}: the order of axis `{}` is given twice", o.axis),
                );
            }
            if let OrderKind::Interleaved(n) = o.order {
                if size(n) {
                    self.err(
                        o.loc,
                        format!("{owner}: the interleaving group size must be 1 to 2^32 - 1"),
                    );
                }
                if p.orders[..i]
                    .iter()
                    .any(|q| matches!(q.order, OrderKind::Interleaved(_)))
                {
                    self.err(
                        o.loc,
                        format!(
                            "{owner}: axis `{}`: only one axis can be interleaved",
                            o.axis
                        ),
                    );
                }
            }
        }
        if let Some(a) = &p.affinity {
            axis_of(self, "affinity", &a.axis);
            if let AffinityKind::CoreGroup(n) = a.affinity
                && size(n)
            {
                self.err(
                    a.loc,
                    format!("{owner}: the core group size must be 1 to 2^32 - 1"),
                );
            }
        }
    }

    /// Checks the call of `who` (a tier or the prefetch) against its kernel's parameters.
    fn tier_call(
        &mut self,
        owner: &str,
        who: &str,
        call: &crate::workload::TaskStmt,
        fields: &[&str],
    ) {
        let Some(kd) = self.m.kernel(call.kernel.as_str()) else {
            self.err(
                call.kernel.loc,
                format!("{owner}: {who} names unknown kernel `{}`", call.kernel),
            );
            return;
        };
        if kd.params.len() != call.args.len() {
            self.err(
                call.kernel.loc,
                format!(
                    "{owner}: kernel `{}` takes {} arguments, the call of {who} gives {}",
                    kd.name,
                    kd.params.len(),
                    call.args.len()
                ),
            );
            return;
        }
        for (i, (param, arg)) in kd.params.iter().zip(&call.args).enumerate() {
            match (&param.kind, arg) {
                (ParamKind::Tile { dtype, .. }, Arg::Region(r)) => {
                    match self.m.tensor(r.tensor.as_str()) {
                        None => self.err(
                            r.tensor.loc,
                            format!("{owner}: unknown tensor `{}`", r.tensor),
                        ),
                        Some(t) => {
                            if t.shape.len() != r.dims.len() {
                                self.err(
                                    r.tensor.loc,
                                    format!(
                                        "{owner}: tensor `{}` has {} dimensions, the region gives {}",
                                        r.tensor,
                                        t.shape.len(),
                                        r.dims.len()
                                    ),
                                );
                            }
                            if t.dtype != *dtype {
                                self.err(
                                    r.tensor.loc,
                                    format!(
                                        "{owner}: argument {} of kernel `{}` is {}, tensor `{}` is {}",
                                        i + 1,
                                        kd.name,
                                        dtype.keyword(),
                                        r.tensor,
                                        t.dtype.keyword()
                                    ),
                                );
                            }
                        }
                    }
                    for d in &r.dims {
                        self.names(owner, &d.start, fields);
                        if let Some(s) = &d.size {
                            self.names(owner, s, fields);
                        }
                    }
                }
                (ParamKind::Scalar(_), Arg::Scalar(e)) => self.names(owner, e, fields),
                (ParamKind::Tile { .. }, Arg::Scalar(_))
                | (ParamKind::Scalar(_), Arg::Region(_)) => {
                    self.err(
                        call.kernel.loc,
                        format!(
                            "{owner}: argument {} of kernel `{}` (`{}`) must be a {}",
                            i + 1,
                            kd.name,
                            param.name,
                            if matches!(param.kind, ParamKind::Tile { .. }) {
                                "region"
                            } else {
                                "scalar"
                            }
                        ),
                    );
                }
            }
        }
    }

    fn bind_var<'a>(&mut self, owner: &str, id: &'a Ident, scope: &mut Vec<&'a str>) {
        self.fresh(owner, "variable", id);
        if scope.contains(&id.as_str()) {
            self.err(id.loc, format!("{owner}: variable `{id}` is already bound"));
        }
        scope.push(id.as_str());
    }

    fn gen_body<'a>(
        &mut self,
        owner: &str,
        p: &PlanDecl,
        space: Option<&SpaceDecl>,
        body: &'a [GenStmt],
        scope: &mut Vec<&'a str>,
        loops: usize,
    ) {
        let mark = scope.len();
        for s in body {
            match &s.kind {
                GenKind::For { vars, axis, body } => {
                    if let Some(sp) = space
                        && !sp.axes.iter().any(|a| a.name == *axis)
                    {
                        self.err(
                            axis.loc,
                            format!(
                                "{owner}: `for` names `{axis}`, not an axis of space `{}`",
                                sp.name
                            ),
                        );
                    }
                    if vars.len() != 1 && vars.len() != 3 {
                        self.err(s.loc, format!("{owner}: `for` binds 1 variable (the tile index) or 3 (index, tile start, tile end), not {}", vars.len()));
                    }
                    let inner = scope.len();
                    for v in vars {
                        self.bind_var(owner, v, scope);
                    }
                    self.gen_body(owner, p, space, body, scope, loops + 1);
                    scope.truncate(inner);
                }
                GenKind::If {
                    cond,
                    then_body,
                    else_body,
                } => {
                    self.names(owner, cond, scope);
                    self.gen_body(owner, p, space, then_body, scope, loops);
                    self.gen_body(owner, p, space, else_body, scope, loops);
                }
                GenKind::Continue => {
                    if loops == 0 {
                        self.err(s.loc, format!("{owner}: `continue` outside a `for`"));
                    }
                }
                GenKind::Let { name, value } => {
                    self.names(owner, value, scope);
                    self.bind_var(owner, name, scope);
                }
                GenKind::SelectTier { name, tiers, value } => {
                    if *tiers != p.tiers {
                        self.err(tiers.loc, format!("{owner}: `select_tier` names `{tiers}`; the plan's tier table is `{}`", p.tiers));
                    }
                    self.names(owner, value, scope);
                    self.bind_var(owner, name, scope);
                }
                GenKind::Alloc {
                    name,
                    tier,
                    indices,
                } => {
                    self.names(owner, tier, scope);
                    for i in indices {
                        self.names(owner, i, scope);
                    }
                    self.bind_var(owner, name, scope);
                }
                GenKind::Load {
                    name,
                    tensor,
                    index,
                } => {
                    self.gen_load_tensor(owner, tensor, index.len());
                    for i in index {
                        self.names(owner, i, scope);
                    }
                    self.bind_var(owner, name, scope);
                }
                GenKind::Emit { fields } => {
                    self.gen_emit(owner, p, space, fields, s.loc, scope);
                }
            }
        }
        scope.truncate(mark);
    }

    /// The tensor of a generator's `load`: an integer tensor, one index per dimension.
    fn gen_load_tensor(&mut self, owner: &str, tensor: &Ident, indices: usize) {
        match self.m.tensor(tensor.as_str()) {
            Some(t) if t.dtype.is_integer() => {
                if t.shape.len() != indices {
                    self.err(
                        tensor.loc,
                        format!(
                            "{owner}: tensor `{tensor}` has {} dimensions, `load` gives {} indices",
                            t.shape.len(),
                            indices
                        ),
                    );
                }
            }
            Some(_) => self.err(
                tensor.loc,
                format!("{owner}: `load` reads `{tensor}`, which is not an integer tensor"),
            ),
            None => self.err(tensor.loc, format!("{owner}: unknown tensor `{tensor}`")),
        }
    }

    /// A generator's `emit`: fields of the descriptor, each once, `tier` among them.
    fn gen_emit(
        &mut self,
        owner: &str,
        p: &PlanDecl,
        space: Option<&SpaceDecl>,
        fields: &[(Ident, FieldValue)],
        loc: Loc,
        scope: &[&str],
    ) {
        let known = self.emit_fields(p, space);
        for (i, (f, e)) in fields.iter().enumerate() {
            if !known.contains(&f.as_str()) {
                self.err(
                    f.loc,
                    format!(
                        "{owner}: the descriptor has no field `{f}` (fields: {})",
                        known.join(", ")
                    ),
                );
            }
            if fields[..i].iter().any(|(o, _)| o == f) {
                self.err(f.loc, format!("{owner}: field `{f}` is given twice"));
            }
            match e {
                FieldValue::Expr(e) => self.names(owner, e, scope),
                FieldValue::SelectTier { tiers, value } => {
                    if *tiers != p.tiers {
                        self.err(
                            tiers.loc,
                            format!(
                                "{owner}: `select_tier` names `{tiers}`; the plan's tier table is `{}`",
                                p.tiers
                            ),
                        );
                    }
                    self.names(owner, value, scope);
                }
            }
        }
        if !fields.iter().any(|(f, _)| f.as_str() == "tier") {
            self.err(loc, format!("{owner}: `emit` must give `tier`"));
        }
    }

    fn emit_fields<'p>(&self, p: &'p PlanDecl, space: Option<&'p SpaceDecl>) -> Vec<&'p str> {
        let mut v: Vec<&str> = FIXED_FIELDS.to_vec();
        if let Some(s) = space {
            v.extend(s.axes.iter().map(|a| a.name.as_str()));
        }
        v.extend(p.fields.iter().map(|f| f.as_str()));
        v
    }
}
