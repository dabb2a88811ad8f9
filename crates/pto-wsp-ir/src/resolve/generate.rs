//! A plan's `generate` block in slot form: every name of the generator resolved once, here.
//!
//! Why: the generator runs on the control thread of a plan launch and evaluates an expression
//! per statement per iteration; each name it reads (a loop variable, a `let`, a symbol), each
//! axis it loops over and each descriptor field it emits is resolved here once per run instead
//! of looked up by name on every evaluation.
//!
//! Slots: every generator variable (loop variables, `let`, `select_tier`, `alloc`, `load`) has
//! its own value slot, numbered in program order; every other name an expression reads is
//! *free* and read from the run's bound symbols ([`Generator::free`]): a bound one has a value
//! slot after the variables, an unbound one a slot past the end of the values, so evaluating
//! an expression that reaches it fails (lazily, as evaluation by name did) and
//! [`Generator::explain`] names it.
//!
//! Promise: [`resolve_generator`] never fails: what a plan names that does not exist (an axis,
//! a descriptor field, a tensor) is kept as such and reported where the statement runs, as
//! before.

use super::body::IntExpr;
use crate::eval::EvalError;
use crate::expr::Expr;
use crate::loc::Loc;
use crate::module::Module;
use crate::plan::{FieldValue, GenKind, GenStmt, PlanDecl, SpaceDecl};

/// A resolved `generate` block (see the module docs).
#[derive(Clone, Debug)]
pub struct Generator {
    /// The statements.
    pub stmts: Vec<GenStep>,
    /// The number of value slots (variables, then bound free names).
    pub values: usize,
    /// The bound free names and their value slots, filled from the symbols when the run starts.
    pub free: Vec<(String, u32)>,
    /// The unbound free names: name `i` has slot `u32::MAX - i`.
    unbound: Vec<String>,
}

/// A descriptor field an `emit` sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// `tier`.
    Tier,
    /// `start`.
    Start,
    /// `end`.
    End,
    /// `workspace`.
    Workspace,
    /// The index of space axis `k`.
    Index(usize),
    /// User field `k` of the plan.
    User(usize),
    /// A name that is no field of the descriptor (an error where the `emit` runs).
    Unknown,
}

/// The value of an emitted field.
#[derive(Clone, Debug)]
pub enum FieldVal {
    /// An expression.
    Expr(IntExpr),
    /// `select_tier(TIERS, EXPR)`.
    SelectTier(IntExpr),
}

/// A resolved generator statement.
#[derive(Clone, Debug)]
pub struct GenStep {
    /// What it does.
    pub kind: GenStepKind,
    /// Where it was written.
    pub loc: Loc,
}

/// The resolved generator statements (see [`GenKind`] for their meaning).
#[derive(Clone, Debug)]
pub enum GenStepKind {
    /// `for i[, lo, hi] in AXIS { }`.
    For {
        /// The axis's index in the space, `None` when the space has no such axis (its name).
        axis: Result<usize, String>,
        /// The value slots of the one or three variables.
        vars: Vec<u32>,
        /// The body.
        body: Vec<GenStep>,
    },
    /// `if COND { } else { }`.
    If {
        /// The condition.
        cond: IntExpr,
        /// Run when it holds.
        then_body: Vec<GenStep>,
        /// Run otherwise.
        else_body: Vec<GenStep>,
    },
    /// `continue;`.
    Continue,
    /// `let NAME = EXPR;`.
    Let {
        /// The variable's slot.
        slot: u32,
        /// Its value.
        value: IntExpr,
    },
    /// `let NAME = select_tier(TIERS, EXPR);`.
    SelectTier {
        /// The variable's slot.
        slot: u32,
        /// The value.
        value: IntExpr,
    },
    /// `let NAME = alloc(TIER, INDEX, ...);`.
    Alloc {
        /// The variable's slot.
        slot: u32,
        /// The tier.
        tier: IntExpr,
        /// The indices.
        indices: Vec<IntExpr>,
    },
    /// `load NAME = TENSOR[INDEX, ...];`.
    Load {
        /// The variable's slot.
        slot: u32,
        /// The tensor's name (its bound contents are found by it).
        tensor: String,
        /// The tensor's dimensions, `None` when the module has no such tensor.
        extents: Option<Vec<IntExpr>>,
        /// The element's index.
        index: Vec<IntExpr>,
    },
    /// `emit(FIELD = VALUE, ...);`.
    Emit {
        /// The fields in the order written, with their names for messages.
        fields: Vec<(Field, String, FieldVal)>,
    },
}

impl Generator {
    /// `err` with a slot past the values (an unbound free name) named.
    pub fn explain(&self, err: EvalError) -> EvalError {
        explain_unbound(&self.unbound, err)
    }
}

struct Resolver<'m> {
    module: &'m Module,
    space: &'m SpaceDecl,
    plan: &'m PlanDecl,
    is_bound: &'m dyn Fn(&str) -> bool,
    scope: Vec<(String, u32)>,
    vars: u32,
    /// The first slot of the free names: the number of variables.
    base: u32,
    free: Vec<String>,
    unbound: Vec<String>,
}

/// The number of variables `body` declares, nested blocks included.
fn count_vars(body: &[GenStmt]) -> u32 {
    body.iter()
        .map(|s| match &s.kind {
            GenKind::For { vars, body, .. } => vars.len() as u32 + count_vars(body),
            GenKind::If {
                then_body,
                else_body,
                ..
            } => count_vars(then_body) + count_vars(else_body),
            GenKind::Continue | GenKind::Emit { .. } => 0,
            GenKind::Let { .. }
            | GenKind::SelectTier { .. }
            | GenKind::Alloc { .. }
            | GenKind::Load { .. } => 1,
        })
        .sum()
}

/// Resolves `plan`'s `generate` block over `space`; `is_bound(name)` says whether the run binds
/// symbol `name`.
pub fn resolve_generator(
    module: &Module,
    space: &SpaceDecl,
    plan: &PlanDecl,
    is_bound: &dyn Fn(&str) -> bool,
) -> Generator {
    let base = count_vars(&plan.body);
    let mut r = Resolver {
        module,
        space,
        plan,
        is_bound,
        scope: Vec::new(),
        vars: 0,
        base,
        free: Vec::new(),
        unbound: Vec::new(),
    };
    let stmts = r.block(&plan.body);
    Generator {
        stmts,
        values: base as usize + r.free.len(),
        free: r
            .free
            .into_iter()
            .enumerate()
            .map(|(i, n)| (n, base + i as u32))
            .collect(),
        unbound: r.unbound,
    }
}

impl Resolver<'_> {
    fn block(&mut self, body: &[GenStmt]) -> Vec<GenStep> {
        let mark = self.scope.len();
        let out = body
            .iter()
            .map(|s| GenStep {
                kind: self.stmt(s),
                loc: s.loc,
            })
            .collect();
        self.scope.truncate(mark);
        out
    }

    fn slot_of(&mut self, name: &str) -> u32 {
        if let Some((_, s)) = self.scope.iter().rev().find(|(n, _)| n == name) {
            return *s;
        }
        outside_slot(
            name,
            self.is_bound,
            self.base,
            &mut self.free,
            &mut self.unbound,
        )
    }

    fn int(&mut self, e: &Expr) -> IntExpr {
        let resolved = IntExpr::resolve(e, &mut |n| Some(self.slot_of(n)));
        // Every name has a slot, so resolution cannot fail.
        resolved.unwrap_or_else(|_| unreachable!("every name of a generator has a slot"))
    }

    fn declare(&mut self, name: &str) -> u32 {
        let slot = self.vars;
        self.vars += 1;
        self.scope.push((name.to_string(), slot));
        slot
    }

    fn stmt(&mut self, s: &GenStmt) -> GenStepKind {
        match &s.kind {
            GenKind::For { vars, axis, body } => {
                let k = self.space.axes.iter().position(|a| a.name == *axis);
                let mark = self.scope.len();
                let vars = vars.iter().map(|v| self.declare(v.as_str())).collect();
                let body = self.block(body);
                self.scope.truncate(mark);
                GenStepKind::For {
                    axis: k.ok_or_else(|| axis.name.clone()),
                    vars,
                    body,
                }
            }
            GenKind::If {
                cond,
                then_body,
                else_body,
            } => GenStepKind::If {
                cond: self.int(cond),
                then_body: self.block(then_body),
                else_body: self.block(else_body),
            },
            GenKind::Continue => GenStepKind::Continue,
            GenKind::Let { name, value } => {
                let value = self.int(value);
                GenStepKind::Let {
                    slot: self.declare(name.as_str()),
                    value,
                }
            }
            GenKind::SelectTier { name, value, .. } => {
                let value = self.int(value);
                GenStepKind::SelectTier {
                    slot: self.declare(name.as_str()),
                    value,
                }
            }
            GenKind::Alloc {
                name,
                tier,
                indices,
            } => {
                let tier = self.int(tier);
                let indices = indices.iter().map(|i| self.int(i)).collect();
                GenStepKind::Alloc {
                    slot: self.declare(name.as_str()),
                    tier,
                    indices,
                }
            }
            GenKind::Load {
                name,
                tensor,
                index,
            } => {
                let extents = self
                    .module
                    .tensor(tensor.as_str())
                    .map(|d| d.shape.iter().map(|e| self.int(e)).collect());
                let index = index.iter().map(|i| self.int(i)).collect();
                GenStepKind::Load {
                    slot: self.declare(name.as_str()),
                    tensor: tensor.name.clone(),
                    extents,
                    index,
                }
            }
            GenKind::Emit { fields } => GenStepKind::Emit {
                fields: fields
                    .iter()
                    .map(|(f, v)| {
                        let val = match v {
                            FieldValue::Expr(e) => FieldVal::Expr(self.int(e)),
                            FieldValue::SelectTier { value, .. } => {
                                FieldVal::SelectTier(self.int(value))
                            }
                        };
                        (self.field(f.as_str()), f.name.clone(), val)
                    })
                    .collect(),
            },
        }
    }

    fn field(&self, n: &str) -> Field {
        match n {
            "tier" => Field::Tier,
            "start" => Field::Start,
            "end" => Field::End,
            "workspace" => Field::Workspace,
            _ => {
                if let Some(k) = self.space.axes.iter().position(|a| a.name.as_str() == n) {
                    Field::Index(k)
                } else if let Some(k) = self.plan.fields.iter().position(|u| u.as_str() == n) {
                    Field::User(k)
                } else {
                    Field::Unknown
                }
            }
        }
    }
}

/// A plan's expressions outside its `generate` block, in slot form: its space's bounds (over the
/// run's symbols) and each tier's kernel call and the prefetch's (over the descriptor's fields
/// and the symbols), resolved once per run.
///
/// Slots: the descriptor's fields first, in the order [`PlanForm::FIELD_SLOTS`] gives (`tier`,
/// `start`, `end`, `workspace`, the space's axes, the plan's user fields; the space's bounds
/// do not see them), then the bound free names ([`PlanForm::free`]); an unbound name has a
/// slot past the end, so evaluating an expression that reaches it fails and
/// [`PlanForm::explain`] names it.
#[derive(Clone, Debug)]
pub struct PlanForm {
    /// Per tier of the plan's tier table, in the table's order: the index in
    /// [`PlanDecl::kernels`] of its `kernel` item (`None` when the plan gives it none).
    pub tier_kernels: Vec<Option<usize>>,
    /// Per `kernel` item of the plan, in order: its call.
    pub calls: Vec<CallForm>,
    /// The prefetch's call.
    pub prefetch: Option<CallForm>,
    /// The space's constraints, in order.
    pub constraints: Vec<IntExpr>,
    /// Per axis of the space: the end when it is a symbol.
    pub ends: Vec<Option<IntExpr>>,
    /// The values of the plan's `bind` items, in order.
    pub binds: Vec<IntExpr>,
    /// The dimensions of the plan's `workspace` tensor, over the symbols (empty when it has
    /// none).
    pub workspace: Vec<IntExpr>,
    /// The number of value slots (fields, then bound free names).
    pub values: usize,
    /// The bound free names and their value slots, filled from the symbols when the run starts.
    pub free: Vec<(String, u32)>,
    /// The unbound free names: name `i` has slot `u32::MAX - i`.
    unbound: Vec<String>,
}

/// A kernel call of a plan: one argument per kernel parameter.
#[derive(Clone, Debug)]
pub struct CallForm {
    /// The arguments, as written.
    pub args: Vec<CallArg>,
}

/// An argument of a plan's kernel call.
#[derive(Clone, Debug)]
pub enum CallArg {
    /// A region: per dimension, its start and its size (`None`: 1).
    Region(Vec<(IntExpr, Option<IntExpr>)>),
    /// A scalar.
    Scalar(IntExpr),
}

impl PlanForm {
    /// The fields before the axes and the user fields, in slot order.
    pub const FIELD_SLOTS: [&'static str; 4] = ["tier", "start", "end", "workspace"];

    /// `err` with a slot past the values (an unbound free name) named.
    pub fn explain(&self, err: EvalError) -> EvalError {
        explain_unbound(&self.unbound, err)
    }
}

fn explain_unbound(unbound: &[String], err: EvalError) -> EvalError {
    if let EvalError::Unbound { name } = &err
        && let Some(slot) = name
            .strip_prefix("<slot ")
            .and_then(|s| s.strip_suffix('>'))
            .and_then(|s| s.parse::<u32>().ok())
        && let Some(n) = unbound.get((u32::MAX - slot) as usize)
    {
        return EvalError::Unbound { name: n.clone() };
    }
    err
}

/// Resolves the expressions of `plan` outside its `generate` block over `space` (see
/// [`PlanForm`]); `workspace` is the shape of the tensor the plan's `workspace` item names,
/// `is_bound(name)` says whether the run binds symbol `name`. Never fails: a name that means
/// nothing is found out where the expression is evaluated, as for the generator.
pub fn resolve_plan(
    space: &SpaceDecl,
    plan: &PlanDecl,
    tiers: &[&str],
    workspace: Option<&[Expr]>,
    is_bound: &dyn Fn(&str) -> bool,
) -> PlanForm {
    let fields: Vec<&str> = PlanForm::FIELD_SLOTS
        .into_iter()
        .chain(space.axes.iter().map(|a| a.name.as_str()))
        .chain(plan.fields.iter().map(|f| f.as_str()))
        .collect();
    let base = fields.len() as u32;
    let mut r = Free {
        fields: &fields,
        base,
        is_bound,
        free: Vec::new(),
        unbound: Vec::new(),
    };
    let calls = plan.kernels.iter().map(|k| r.call(&k.call)).collect();
    let prefetch = plan.prefetch.as_ref().map(|pf| r.call(&pf.call));
    // The space's bounds read the symbols only.
    r.fields = &[];
    let constraints = space.constraints.iter().map(|(c, _)| r.int(c)).collect();
    let ends = space
        .axes
        .iter()
        .map(|a| match &a.end {
            crate::plan::SpaceEnd::Symbol(s) => Some(r.int(&Expr::Name(s.clone()))),
            _ => None,
        })
        .collect();
    let binds = plan.binds.iter().map(|b| r.int(&b.value)).collect();
    let workspace = workspace.unwrap_or(&[]).iter().map(|e| r.int(e)).collect();
    PlanForm {
        tier_kernels: tiers
            .iter()
            .map(|t| plan.kernels.iter().position(|k| k.tier.as_str() == *t))
            .collect(),
        calls,
        prefetch,
        constraints,
        ends,
        binds,
        workspace,
        values: base as usize + r.free.len(),
        free: r
            .free
            .into_iter()
            .enumerate()
            .map(|(i, n)| (n, base + i as u32))
            .collect(),
        unbound: r.unbound,
    }
}

/// The slot of a name no local scope declares: a bound name's place after `base` in `free`,
/// an unbound one's counted down from `u32::MAX` in `unbound` (each added on first use).
fn outside_slot(
    name: &str,
    is_bound: &dyn Fn(&str) -> bool,
    base: u32,
    free: &mut Vec<String>,
    unbound: &mut Vec<String>,
) -> u32 {
    let index_in = |list: &mut Vec<String>| match list.iter().position(|n| n == name) {
        Some(i) => i as u32,
        None => {
            list.push(name.to_string());
            list.len() as u32 - 1
        }
    };
    if is_bound(name) {
        base + index_in(free)
    } else {
        u32::MAX - index_in(unbound)
    }
}

/// Names of a plan's expressions outside `generate`: the fields in scope, then free names.
struct Free<'a> {
    fields: &'a [&'a str],
    /// The first slot of the free names: the number of fields.
    base: u32,
    is_bound: &'a dyn Fn(&str) -> bool,
    free: Vec<String>,
    unbound: Vec<String>,
}

impl Free<'_> {
    fn slot_of(&mut self, name: &str) -> u32 {
        if let Some(i) = self.fields.iter().position(|f| *f == name) {
            return i as u32;
        }
        outside_slot(
            name,
            self.is_bound,
            self.base,
            &mut self.free,
            &mut self.unbound,
        )
    }

    fn int(&mut self, e: &Expr) -> IntExpr {
        IntExpr::resolve(e, &mut |n| Some(self.slot_of(n)))
            .unwrap_or_else(|_| unreachable!("every name of a plan has a slot"))
    }

    fn call(&mut self, call: &crate::workload::TaskStmt) -> CallForm {
        CallForm {
            args: call
                .args
                .iter()
                .map(|a| match a {
                    crate::workload::Arg::Region(r) => CallArg::Region(
                        r.dims
                            .iter()
                            .map(|d| (self.int(&d.start), d.size.as_ref().map(|s| self.int(s))))
                            .collect(),
                    ),
                    crate::workload::Arg::Scalar(e) => CallArg::Scalar(self.int(e)),
                })
                .collect(),
        }
    }
}
