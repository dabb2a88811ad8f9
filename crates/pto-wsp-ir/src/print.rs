//! The printer of the `.wsp` text format: `Display` for [`Module`] and for its pieces.
//!
//! Why: `pto-wsp fmt`, golden tests and error messages all need one canonical spelling of the IR.
//! Promises: printing a module gives the canonical form of `docs/FORMAT.md` (fixed order of kinds,
//! four-space indentation, the fewest parentheses), and the text parses back to an equal module,
//! nested no deeper than any other spelling of it, provided every name is an identifier that is
//! not a reserved word and every loop or `select` binds a variable. Fragments (`Expr`, `Stmt`,
//! `Dispatch`, ...) print the way they appear inside a module, at indentation zero, without a
//! trailing newline. Printing never fails and never reorders items within a kind.

use crate::csp::{Channel, Pipeline, Process};
use crate::expr::{BinOp, Expr, UnOp};
use crate::module::{
    AxisDecl, AxisKind, KernelDecl, KernelParam, Module, ParamKind, SlotDecl, SymbolDecl,
    TensorDecl, Tiers, Workload,
};
use crate::plan::{
    FieldValue, GenKind, GenStmt, PlanDecl, SpaceDecl, SpaceEnd, TierTableDecl, TileKind,
};
use crate::schedule::{
    Dispatch, Levels, ReadyPolicy, Schedule, ScheduleItem, ScheduleItemKind, StartPolicy,
    TaskGraphItem, Timing, TracePolicy,
};
use crate::types::ExecPool;
use crate::workload::{Arg, Region, RegionDim, Stmt, StmtKind, TaskStmt};
use std::fmt::{self, Display, Formatter};

/// `n` levels of four-space indentation.
struct Indent(usize);

impl Display for Indent {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        for _ in 0..self.0 {
            f.write_str("    ")?;
        }
        Ok(())
    }
}

/// Items joined by `, `.
struct Commas<'a, T>(&'a [T]);

impl<T: Display> Display for Commas<'_, T> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        for (i, x) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{x}")?;
        }
        Ok(())
    }
}

// ----- expressions -------------------------------------------------------------------------

/// Writes `e`, in parentheses when `paren`.
fn wrap(f: &mut Formatter<'_>, e: &Expr, paren: bool) -> fmt::Result {
    if paren {
        write!(f, "({e})")
    } else {
        write!(f, "{e}")
    }
}

/// Whether `child`, an operand of the infix `parent`, needs parentheses (on the right side when
/// `right`): when it binds looser, or equally on the right or between comparisons, or is a
/// ternary.
fn infix_operand_needs_parens(child: &Expr, parent: BinOp, right: bool) -> bool {
    let parent_prec = parent.precedence().unwrap_or(u8::MAX);
    match child {
        Expr::Ternary(..) => true,
        Expr::Binary(op, ..) => op.precedence().is_some_and(|p| {
            p < parent_prec || (p == parent_prec && (right || parent.is_comparison()))
        }),
        _ => false,
    }
}

/// Writes the infix operation `e` and the chain of infix operations along its left operands
/// that need no parentheses (`a + b * c - d`) in a loop, so a flat sum of any length prints
/// without recursing down it.
fn infix_chain(f: &mut Formatter<'_>, e: &Expr) -> fmt::Result {
    let mut links = Vec::new();
    let mut left = e;
    while let Expr::Binary(op, a, b) = left {
        links.push((*op, &**b));
        left = a;
        let infix = matches!(&**a, Expr::Binary(o, ..) if o.precedence().is_some());
        if !infix || infix_operand_needs_parens(a, *op, false) {
            break;
        }
    }
    if let Some(&(innermost, _)) = links.last() {
        wrap(f, left, infix_operand_needs_parens(left, innermost, false))?;
    }
    for (op, b) in links.iter().rev() {
        write!(f, " {op} ")?;
        wrap(f, b, infix_operand_needs_parens(b, *op, true))?;
    }
    Ok(())
}

impl Display for Expr {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Int(v) => write!(f, "{v}"),
            Expr::UInt(v) => write!(f, "{v}u"),
            Expr::Bool(b) => write!(f, "{b}"),
            Expr::Float(v) => write!(f, "{v}"),
            Expr::Name(id) => f.write_str(&id.name),
            Expr::Unary(op, a) => {
                f.write_str(match op {
                    UnOp::Neg => "-",
                    UnOp::Not => "!",
                })?;
                // `-5` would read back as the literal -5, so `Neg(5)` is written `-(5)`; `Neg(-5)`
                // is written `--5`, which nests no deeper than any other way of writing it.
                let paren = match &**a {
                    Expr::Int(v) => *op == UnOp::Neg && *v >= 0,
                    Expr::Float(v) => *op == UnOp::Neg && !v.value().is_sign_negative(),
                    Expr::Ternary(..) => true,
                    Expr::Binary(o, ..) => o.precedence().is_some(),
                    _ => false,
                };
                wrap(f, a, paren)
            }
            Expr::Binary(op, a, b) if op.precedence().is_none() => write!(f, "{op}({a}, {b})"),
            Expr::Binary(..) => infix_chain(f, self),
            // Only a ternary condition needs parentheses: both branches are full expressions
            // (and parentheses the input did not have would nest the text deeper).
            Expr::Ternary(c, t, e) => {
                wrap(f, c, matches!(**c, Expr::Ternary(..)))?;
                write!(f, " ? {t} : {e}")
            }
        }
    }
}

// ----- declarations ------------------------------------------------------------------------

impl Display for SymbolDecl {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "symbol {}: {};", self.name, self.ty)
    }
}

impl Display for SlotDecl {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "slot {}: {};", self.name, self.ty)
    }
}

impl Display for TensorDecl {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let (name, dtype, shape) = (&self.name, self.dtype, Commas(&self.shape));
        write!(f, "tensor {name}: {dtype}[{shape}];")
    }
}

impl Display for AxisKind {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            AxisKind::Dense(e) => write!(f, "dense({e})"),
            AxisKind::DenseDyn(e) => write!(f, "dense_dyn({e})"),
            AxisKind::Ragged {
                outer,
                lengths,
                per_row: None,
            } => write!(f, "ragged({outer}, {lengths})"),
            AxisKind::Ragged {
                outer,
                lengths,
                per_row: Some(e),
            } => write!(f, "ragged({outer}, {lengths}, {e})"),
            AxisKind::Sparse {
                outer,
                indptr,
                indices,
            } => write!(f, "sparse({outer}, {indptr}, {indices})"),
        }
    }
}

impl Display for AxisDecl {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "axis {} = {};", self.name, self.kind)
    }
}

impl Display for KernelParam {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ParamKind::Tile {
                access,
                dtype,
                shape,
            } => {
                write!(f, "{access} {}: {dtype}[", self.name)?;
                for (i, d) in shape.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    match d {
                        Some(n) => write!(f, "{n}")?,
                        None => f.write_str("?")?,
                    }
                }
                f.write_str("]")
            }
            ParamKind::Scalar(ty) => write!(f, "{}: {ty}", self.name),
        }
    }
}

/// `tiers { ... }`, the cases one per line.
impl Display for Tiers {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str("tiers {\n")?;
        for (cond, kernel) in &self.cases {
            writeln!(f, "    {cond} => {kernel},")?;
        }
        write!(f, "    else => {}\n}}", self.default)
    }
}

impl Display for KernelDecl {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "kernel {}({})", self.name, Commas(&self.params))?;
        if self.pool != ExecPool::Any {
            write!(f, " @{}", self.pool)?;
        }
        if let Some(tiers) = &self.tiers {
            write!(f, " {tiers}")?;
        }
        match &self.body {
            None => f.write_str(";"),
            Some(body) => {
                f.write_str(" {\n")?;
                crate::kernel_body::print_body(f, body, 1)?;
                f.write_str("}")
            }
        }
    }
}

impl Display for Workload {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "workload {}(", self.name)?;
        for (i, (name, ty)) in self.params.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{name}: {ty}")?;
        }
        f.write_str(") ")?;
        block(f, &self.body, 0)
    }
}

// ----- statements --------------------------------------------------------------------------

/// `{ }` or `{`, the statements one per line at `indent + 1`, `}` at `indent`.
fn block(f: &mut Formatter<'_>, body: &[Stmt], indent: usize) -> fmt::Result {
    if body.is_empty() {
        return f.write_str("{ }");
    }
    f.write_str("{\n")?;
    for s in body {
        write!(f, "{}", Indent(indent + 1))?;
        stmt(f, s, indent + 1)?;
        f.write_str("\n")?;
    }
    write!(f, "{}}}", Indent(indent))
}

/// One statement whose first line starts at the cursor and whose nested lines are indented
/// relative to `indent`; no trailing newline.
fn stmt(f: &mut Formatter<'_>, s: &Stmt, indent: usize) -> fmt::Result {
    match &s.kind {
        StmtKind::Loop {
            order,
            vars,
            axis,
            body,
        } => {
            write!(f, "{} {} in {axis} ", order.keyword(), Commas(vars))?;
            block(f, body, indent)
        }
        StmtKind::Select { vars, axis, body } => {
            write!(f, "select {} in {axis} ", Commas(vars))?;
            block(f, body, indent)
        }
        StmtKind::Cond {
            cond,
            then_body,
            else_body,
        } => {
            write!(f, "if {cond} ")?;
            block(f, then_body, indent)?;
            if !else_body.is_empty() {
                f.write_str(" else ")?;
                block(f, else_body, indent)?;
            }
            Ok(())
        }
        StmtKind::While { cond, max, body } => {
            write!(f, "while {cond} max {max} ")?;
            block(f, body, indent)
        }
        StmtKind::Break { cond } => write!(f, "break if {cond};"),
        StmtKind::Combine(body) => {
            f.write_str("combine ")?;
            block(f, body, indent)
        }
        StmtKind::Sequential(body) => {
            f.write_str("sequential ")?;
            block(f, body, indent)
        }
        StmtKind::Task(t) => write!(f, "{t};"),
        StmtKind::SlotSet { slot, value } => write!(f, "set {slot} = {value};"),
        StmtKind::SlotLoad {
            slot,
            tensor,
            index,
        } => write!(f, "load {slot} = {tensor}[{}];", Commas(index)),
        StmtKind::Call { workload, args } => write!(f, "call {workload}({});", Commas(args)),
        StmtKind::Send { channel, value } => write!(f, "send {channel}({value});"),
        StmtKind::Consume { channel, var, body } => {
            write!(f, "consume {channel} as {var} ")?;
            block(f, body, indent)
        }
    }
}

impl Display for Stmt {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        stmt(f, self, 0)
    }
}

/// `task KERNEL(ARGS)` without the `;`.
impl Display for TaskStmt {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "task {}({})", self.kernel, Commas(&self.args))
    }
}

impl Display for Arg {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Arg::Region(r) => write!(f, "{r}"),
            Arg::Scalar(e) => write!(f, "{e}"),
        }
    }
}

impl Display for Region {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "{}[{}]", self.tensor, Commas(&self.dims))
    }
}

impl Display for RegionDim {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match &self.size {
            Some(size) => write!(f, "{} +: {size}", self.start),
            None => write!(f, "{}", self.start),
        }
    }
}

// ----- pipelines ---------------------------------------------------------------------------

impl Display for Channel {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "channel {}[{}];", self.name, self.depth)
    }
}

fn process(f: &mut Formatter<'_>, p: &Process, indent: usize) -> fmt::Result {
    write!(f, "process {}(", p.name)?;
    if !p.consumes.is_empty() {
        write!(f, "consumes {}", Commas(&p.consumes))?;
        if !p.produces.is_empty() {
            f.write_str("; ")?;
        }
    }
    if !p.produces.is_empty() {
        write!(f, "produces {}", Commas(&p.produces))?;
    }
    f.write_str(") ")?;
    block(f, &p.body, indent)
}

impl Display for Process {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        process(f, self, 0)
    }
}

/// Channels first, then processes.
impl Display for Pipeline {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "pipeline {} ", self.name)?;
        if self.channels.is_empty() && self.processes.is_empty() {
            return f.write_str("{ }");
        }
        f.write_str("{\n")?;
        for c in &self.channels {
            writeln!(f, "    {c}")?;
        }
        for p in &self.processes {
            f.write_str("    ")?;
            process(f, p, 1)?;
            f.write_str("\n")?;
        }
        f.write_str("}")
    }
}

// ----- schedule ----------------------------------------------------------------------------

/// `(METRIC) { below B: X, ..., else: Y }`.
fn levels<T: Display>(f: &mut Formatter<'_>, l: &Levels<T>) -> fmt::Result {
    write!(f, "({}) {{ ", l.metric)?;
    for (bound, choice) in &l.levels {
        write!(f, "below {bound}: {choice}, ")?;
    }
    write!(f, "else: {} }}", l.otherwise)
}

impl Display for Dispatch {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Dispatch::RoundRobin(n) => write!(f, "round_robin({n})"),
            Dispatch::Affinity(e) => write!(f, "affinity({e})"),
            Dispatch::Hash(e) => write!(f, "hash({e})"),
            Dispatch::Threshold(l) => {
                f.write_str("threshold")?;
                levels(f, l)
            }
            Dispatch::StaticPartition(starts) => {
                write!(f, "static_partition({})", Commas(starts))
            }
            Dispatch::WorkSteal => f.write_str("work_steal"),
        }
    }
}

impl Display for Timing {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Timing::Immediate => f.write_str("immediate"),
            Timing::Batched(n) => write!(f, "batched({n})"),
            Timing::Interleaved(n) => write!(f, "interleaved({n})"),
            Timing::RateLimit(n) => write!(f, "rate_limit({n})"),
        }
    }
}

impl Display for ReadyPolicy {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            ReadyPolicy::Fifo => f.write_str("fifo"),
            ReadyPolicy::WorkSteal => f.write_str("work_steal"),
            ReadyPolicy::Priority(e) => write!(f, "priority({e})"),
        }
    }
}

impl Display for StartPolicy {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            StartPolicy::AfterOrchestration => f.write_str("after_orchestration"),
            StartPolicy::Immediate => f.write_str("immediate"),
            StartPolicy::Threshold(n) => write!(f, "threshold({n})"),
        }
    }
}

impl Display for TracePolicy {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            TracePolicy::None => f.write_str("none"),
            TracePolicy::Wall => f.write_str("wall"),
            TracePolicy::Cycles(cost, machine) => {
                f.write_str("cycles")?;
                if let Some(e) = cost {
                    write!(f, "({e})")?;
                }
                if let Some(m) = machine {
                    write!(f, " device({})", m.name)?;
                }
                Ok(())
            }
        }
    }
}

/// `deps exact;` and the like, with the `;`.
impl Display for TaskGraphItem {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let kw = self.keyword();
        match self {
            TaskGraphItem::Deps(d) => write!(f, "{kw} {d};"),
            TaskGraphItem::Ready(r) => write!(f, "{kw} {r};"),
            TaskGraphItem::Start(s) => write!(f, "{kw} {s};"),
            TaskGraphItem::Trace(t) => write!(f, "{kw} {t};"),
            TaskGraphItem::Pools(p) => write!(f, "{kw} {p};"),
        }
    }
}

fn schedule_item(f: &mut Formatter<'_>, item: &ScheduleItemKind, indent: usize) -> fmt::Result {
    match item {
        ScheduleItemKind::Executors(n) => write!(f, "executors {n};"),
        ScheduleItemKind::Dispatch(d) => write!(f, "dispatch {d};"),
        ScheduleItemKind::Streams(n) => write!(f, "streams {n};"),
        ScheduleItemKind::StreamBy(e) => write!(f, "stream_by {e};"),
        ScheduleItemKind::Timing(t) => write!(f, "timing {t};"),
        ScheduleItemKind::TaskGraph(items) if items.is_empty() => f.write_str("task_graph { }"),
        ScheduleItemKind::TaskGraph(items) => {
            f.write_str("task_graph {\n")?;
            for it in items {
                writeln!(f, "{}{it}", Indent(indent + 1))?;
            }
            write!(f, "{}}}", Indent(indent))
        }
        ScheduleItemKind::TaskWindow(n, m) => write!(f, "task_window {n} {m};"),
        ScheduleItemKind::PipelineDepth(n, s) => write!(f, "pipeline_depth {n} {s};"),
        ScheduleItemKind::BatchDeps(n) => write!(f, "batch_deps {n};"),
        ScheduleItemKind::DispatchThreshold(l) => {
            f.write_str("dispatch_threshold")?;
            levels(f, l)?;
            f.write_str(";")
        }
    }
}

impl Display for ScheduleItemKind {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        schedule_item(f, self, 0)
    }
}

impl Display for ScheduleItem {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        schedule_item(f, &self.kind, 0)
    }
}

impl Display for Schedule {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "schedule for {} ", self.target)?;
        if self.items.is_empty() {
            return f.write_str("{ }");
        }
        f.write_str("{\n")?;
        for item in &self.items {
            f.write_str("    ")?;
            schedule_item(f, &item.kind, 1)?;
            f.write_str("\n")?;
        }
        f.write_str("}")
    }
}

// ----- module ------------------------------------------------------------------------------

/// Writes top-level items, one blank line before each item that starts a new group.
struct Items<'a, 'b> {
    f: &'a mut Formatter<'b>,
    started: bool,
}

impl Items<'_, '_> {
    fn item(&mut self, item: &dyn Display, new_group: bool) -> fmt::Result {
        if new_group && self.started {
            self.f.write_str("\n")?;
        }
        self.started = true;
        writeln!(self.f, "{item}")
    }

    /// One-line declarations of one kind, kept together.
    fn group<T: Display>(&mut self, items: &[T]) -> fmt::Result {
        items
            .iter()
            .enumerate()
            .try_for_each(|(i, d)| self.item(d, i == 0))
    }
}

/// The canonical form: kinds in a fixed order, each item ending with a newline.
impl Display for Module {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let mut w = Items { f, started: false };
        w.group(&self.symbols)?;
        w.group(&self.slots)?;
        w.group(&self.tensors)?;
        w.group(&self.axes)?;
        for (i, k) in self.kernels.iter().enumerate() {
            let after_tiers = i > 0 && self.kernels[i - 1].tiers.is_some();
            w.item(k, i == 0 || k.tiers.is_some() || after_tiers)?;
        }
        for wl in &self.workloads {
            w.item(wl, true)?;
        }
        for p in &self.pipelines {
            w.item(p, true)?;
        }
        if let Some(s) = &self.schedule {
            w.item(s, true)?;
        }
        for d in &self.spaces {
            w.item(d, true)?;
        }
        for d in &self.tier_tables {
            w.item(d, true)?;
        }
        for d in &self.plans {
            w.item(d, true)?;
        }
        for d in &self.spatial_maps {
            w.item(d, true)?;
        }
        Ok(())
    }
}

// ----- spatial maps ------------------------------------------------------------------------

impl Display for crate::spatial::SpatialMap {
    /// Items in a fixed order: device, grid, tiles, places, layouts.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        writeln!(f, "spatial_map {} for {} {{", self.name, self.entry)?;
        if let Some(d) = &self.device {
            writeln!(f, "    device {d};")?;
        }
        if let Some(g) = &self.grid {
            writeln!(f, "    grid {} x {};", g.rows, g.cols)?;
        }
        for t in &self.tiles {
            writeln!(f, "    tile {} -> {};", t.var, t.axis)?;
        }
        for p in &self.places {
            writeln!(f, "    place {} at ({}, {});", p.process, p.row, p.col)?;
        }
        for l in &self.layouts {
            writeln!(f, "    layout {l};")?;
        }
        f.write_str("}")
    }
}

// ----- plans -------------------------------------------------------------------------------

impl Display for SpaceDecl {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        writeln!(f, "space {} {{", self.name)?;
        for a in &self.axes {
            write!(f, "    axis {} from {} to ", a.name, a.start)?;
            match &a.end {
                SpaceEnd::Const(n) => write!(f, "{n}")?,
                SpaceEnd::Symbol(s) => write!(f, "{s}")?,
                SpaceEnd::Dynamic => f.write_str("dynamic")?,
            }
            f.write_str(";\n")?;
        }
        for t in &self.tiles {
            match t.kind {
                TileKind::Size(n) => writeln!(f, "    tile({}, {n});", t.axis)?,
                TileKind::PadLast(n) => writeln!(f, "    tile({}, {n}, pad_last);", t.axis)?,
                TileKind::Auto => writeln!(f, "    tile({}, auto);", t.axis)?,
            }
        }
        for (c, _) in &self.constraints {
            writeln!(f, "    constraint {c};")?;
        }
        f.write_str("}")
    }
}

impl Display for TierTableDecl {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        writeln!(f, "tiers {} {{", self.name)?;
        for t in &self.tiers {
            write!(f, "    tier {} ", t.name)?;
            match t.max {
                Some(m) => write!(f, "<= {m}")?,
                None => f.write_str("default")?,
            }
            if t.workspace != 0 {
                write!(f, " workspace {}", t.workspace)?;
            }
            f.write_str(";\n")?;
        }
        f.write_str("}")
    }
}

impl Display for PlanDecl {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "plan {} over {} with {} {{",
            self.name, self.space, self.tiers
        )?;
        if !self.fields.is_empty() {
            writeln!(f, "    fields {};", Commas(&self.fields))?;
        }
        if let Some(w) = &self.workspace {
            writeln!(f, "    workspace {w};")?;
        }
        for b in &self.binds {
            writeln!(
                f,
                "    bind {}({}) = {};",
                b.what.keyword(),
                b.axis,
                b.value
            )?;
        }
        for k in &self.kernels {
            writeln!(
                f,
                "    kernel {} => {}({});",
                k.tier,
                k.call.kernel,
                Commas(&k.call.args)
            )?;
        }
        if let Some(pf) = &self.prefetch {
            writeln!(
                f,
                "    prefetch({}, {}) => {}({});",
                pf.axis,
                pf.depth,
                pf.call.kernel,
                Commas(&pf.call.args)
            )?;
        }
        for o in &self.orders {
            writeln!(f, "    order({}, {});", o.axis, o.order)?;
        }
        if let Some(a) = &self.affinity {
            writeln!(f, "    affinity({}, {});", a.axis, a.affinity)?;
        }
        f.write_str("    generate ")?;
        gen_block(f, &self.body, 1)?;
        f.write_str("\n}")
    }
}

fn gen_block(f: &mut Formatter<'_>, body: &[GenStmt], indent: usize) -> fmt::Result {
    if body.is_empty() {
        return f.write_str("{ }");
    }
    f.write_str("{\n")?;
    for s in body {
        write!(f, "{}", Indent(indent + 1))?;
        gen_stmt(f, s, indent + 1)?;
        f.write_str("\n")?;
    }
    write!(f, "{}}}", Indent(indent))
}

fn gen_stmt(f: &mut Formatter<'_>, s: &GenStmt, indent: usize) -> fmt::Result {
    match &s.kind {
        GenKind::For { vars, axis, body } => {
            write!(f, "for {} in {axis} ", Commas(vars))?;
            gen_block(f, body, indent)
        }
        GenKind::If {
            cond,
            then_body,
            else_body,
        } => {
            write!(f, "if {cond} ")?;
            gen_block(f, then_body, indent)?;
            if !else_body.is_empty() {
                f.write_str(" else ")?;
                gen_block(f, else_body, indent)?;
            }
            Ok(())
        }
        GenKind::Continue => f.write_str("continue;"),
        GenKind::Let { name, value } => write!(f, "let {name} = {value};"),
        GenKind::SelectTier { name, tiers, value } => {
            write!(f, "let {name} = select_tier({tiers}, {value});")
        }
        GenKind::Alloc {
            name,
            tier,
            indices,
        } => {
            write!(f, "let {name} = alloc({tier}")?;
            for i in indices {
                write!(f, ", {i}")?;
            }
            f.write_str(");")
        }
        GenKind::Load {
            name,
            tensor,
            index,
        } => write!(f, "load {name} = {tensor}[{}];", Commas(index)),
        GenKind::Emit { fields } => {
            f.write_str("emit(")?;
            for (i, (n, e)) in fields.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                match e {
                    FieldValue::Expr(e) => write!(f, "{n} = {e}")?,
                    FieldValue::SelectTier { tiers, value } => {
                        write!(f, "{n} = select_tier({tiers}, {value})")?
                    }
                }
            }
            f.write_str(");")
        }
    }
}

impl Display for GenStmt {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        gen_stmt(f, self, 0)
    }
}
