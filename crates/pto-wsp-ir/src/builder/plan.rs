//! The builder of Plan-Descriptor-Execute declarations: spaces, tier tables and plans with their
//! `generate` blocks, in Rust. Same promise as the rest of [`crate::builder`]: exactly the IR
//! the parser produces for the same text, every location unknown, nothing checked.
//!
//! ```
//! use pto_wsp_ir::builder::{ModuleBuilder, e, region, span};
//! use pto_wsp_ir::plan::{SpaceEnd, TileKind};
//! use pto_wsp_ir::{DType, ScalarType};
//!
//! let mut m = ModuleBuilder::new();
//! m.symbol("n", ScalarType::I64);
//! m.tensor("X", DType::F32, [e("n"), 64.into()]);
//! m.tensor("Y", DType::F32, [e("n"), 64.into()]);
//! m.kernel("copy").input("x", DType::F32, [None, None]).output("y", DType::F32, [None, None]);
//! m.space("S", |s| {
//!     s.axis("r", 0, SpaceEnd::Symbol("n".into())).axis("c", 0, SpaceEnd::Const(64));
//!     s.tile("c", TileKind::Size(16));
//! });
//! m.tier_table("T", [("all", None, 0)]);
//! m.plan("p", "S", "T", |p| {
//!     p.kernel("all", "copy", [
//!         region("X", [span(e("r"), 1), span(e("start"), 16)]).into(),
//!         region("Y", [span(e("r"), 1), span(e("start"), 16)]).into(),
//!     ]);
//!     p.generate(|g| {
//!         g.for_each(["i"], "r", |g| {
//!             g.for_each(["j", "lo", "hi"], "c", |g| {
//!                 g.emit([("tier", 0.into()), ("r", e("i")), ("c", e("j")), ("start", e("lo"))]);
//!             });
//!         });
//!     });
//! });
//! assert!(pto_wsp_ir::validate(&m.finish()).is_ok());
//! ```

use super::ModuleBuilder;
use crate::expr::Expr;
use crate::loc::{Ident, Loc};
use crate::plan::{
    AffinityKind, BindWhat, FieldValue, GenKind, GenStmt, OrderKind, PlanAffinity, PlanBind,
    PlanDecl, PlanOrder, PlanPrefetch, SpaceAxis, SpaceDecl, SpaceEnd, TierDecl, TierKernel,
    TierTableDecl, TileDecl, TileKind,
};
use crate::workload::{Arg, TaskStmt};

impl ModuleBuilder {
    /// `space NAME { ... }`, its items added by `f`.
    pub fn space(&mut self, name: &str, f: impl FnOnce(&mut SpaceBuilder)) -> &mut Self {
        let mut s = SpaceBuilder {
            decl: SpaceDecl {
                name: Ident::new(name),
                axes: Vec::new(),
                tiles: Vec::new(),
                constraints: Vec::new(),
            },
        };
        f(&mut s);
        self.module.spaces.push(s.decl);
        self
    }

    /// `tiers NAME { tier A <= N workspace W; ... tier Z default; }`: `(name, bound, workspace)`
    /// with bound `None` for `default`.
    pub fn tier_table<'n>(
        &mut self,
        name: &str,
        tiers: impl IntoIterator<Item = (&'n str, Option<u64>, u64)>,
    ) -> &mut Self {
        self.module.tier_tables.push(TierTableDecl {
            name: Ident::new(name),
            tiers: tiers
                .into_iter()
                .map(|(n, max, workspace)| TierDecl {
                    name: Ident::new(n),
                    max,
                    workspace,
                })
                .collect(),
        });
        self
    }

    /// `plan NAME over SPACE with TIERS { ... }`, its items added by `f`.
    pub fn plan(
        &mut self,
        name: &str,
        space: &str,
        tiers: &str,
        f: impl FnOnce(&mut PlanBuilder),
    ) -> &mut Self {
        let mut p = PlanBuilder {
            decl: PlanDecl {
                name: Ident::new(name),
                space: Ident::new(space),
                tiers: Ident::new(tiers),
                fields: Vec::new(),
                workspace: None,
                binds: Vec::new(),
                kernels: Vec::new(),
                prefetch: None,
                orders: Vec::new(),
                affinity: None,
                body: Vec::new(),
                loc: Loc::NONE,
            },
        };
        f(&mut p);
        self.module.plans.push(p.decl);
        self
    }
}

/// Adds axes, tiles and constraints to a space (see [`ModuleBuilder::space`]).
#[derive(Debug)]
pub struct SpaceBuilder {
    decl: SpaceDecl,
}

impl SpaceBuilder {
    /// `axis NAME from START to END;`
    pub fn axis(&mut self, name: &str, start: u64, end: SpaceEnd) -> &mut Self {
        self.decl.axes.push(SpaceAxis {
            name: Ident::new(name),
            start,
            end,
        });
        self
    }

    /// `tile(AXIS, ...);`
    pub fn tile(&mut self, axis: &str, kind: TileKind) -> &mut Self {
        self.decl.tiles.push(TileDecl {
            axis: Ident::new(axis),
            kind,
        });
        self
    }

    /// `constraint EXPR;`
    pub fn constraint(&mut self, e: impl Into<Expr>) -> &mut Self {
        self.decl.constraints.push((e.into(), Loc::NONE));
        self
    }
}

/// Adds fields, bindings, tier kernels and the generator to a plan (see
/// [`ModuleBuilder::plan`]).
#[derive(Debug)]
pub struct PlanBuilder {
    decl: PlanDecl,
}

impl PlanBuilder {
    /// `fields A, B;`
    pub fn fields<'n>(&mut self, names: impl IntoIterator<Item = &'n str>) -> &mut Self {
        self.decl.fields = names.into_iter().map(Ident::new).collect();
        self
    }

    /// `workspace TENSOR;`
    pub fn workspace(&mut self, tensor: &str) -> &mut Self {
        self.decl.workspace = Some(Ident::new(tensor));
        self
    }

    /// `bind end(AXIS) = EXPR;`
    pub fn bind_end(&mut self, axis: &str, value: impl Into<Expr>) -> &mut Self {
        self.bind(BindWhat::End, axis, value.into())
    }

    /// `bind tile(AXIS) = EXPR;`
    pub fn bind_tile(&mut self, axis: &str, value: impl Into<Expr>) -> &mut Self {
        self.bind(BindWhat::Tile, axis, value.into())
    }

    fn bind(&mut self, what: BindWhat, axis: &str, value: Expr) -> &mut Self {
        self.decl.binds.push(PlanBind {
            what,
            axis: Ident::new(axis),
            value,
        });
        self
    }

    /// `kernel TIER => KERNEL(ARGS);`
    pub fn kernel(
        &mut self,
        tier: &str,
        kernel: &str,
        args: impl IntoIterator<Item = Arg>,
    ) -> &mut Self {
        self.decl.kernels.push(TierKernel {
            tier: Ident::new(tier),
            call: TaskStmt {
                kernel: Ident::new(kernel),
                args: args.into_iter().collect(),
            },
            loc: Loc::NONE,
        });
        self
    }

    /// `prefetch(AXIS, DEPTH) => KERNEL(ARGS);`
    pub fn prefetch(
        &mut self,
        axis: &str,
        depth: u64,
        kernel: &str,
        args: impl IntoIterator<Item = Arg>,
    ) -> &mut Self {
        self.decl.prefetch = Some(PlanPrefetch {
            axis: Ident::new(axis),
            depth,
            call: TaskStmt {
                kernel: Ident::new(kernel),
                args: args.into_iter().collect(),
            },
            loc: Loc::NONE,
        });
        self
    }

    /// `order(AXIS, ORDER);`
    pub fn order(&mut self, axis: &str, order: OrderKind) -> &mut Self {
        self.decl.orders.push(PlanOrder {
            axis: Ident::new(axis),
            order,
            loc: Loc::NONE,
        });
        self
    }

    /// `affinity(AXIS, AFFINITY);`
    pub fn affinity(&mut self, axis: &str, affinity: AffinityKind) -> &mut Self {
        self.decl.affinity = Some(PlanAffinity {
            axis: Ident::new(axis),
            affinity,
            loc: Loc::NONE,
        });
        self
    }

    /// `generate { ... }`, its statements added by `f`.
    pub fn generate(&mut self, f: impl FnOnce(&mut GenBody)) -> &mut Self {
        self.decl.body = GenBody::build(f);
        self
    }
}

/// Appends generator statements (see [`PlanBuilder::generate`]).
#[derive(Debug, Default)]
pub struct GenBody {
    stmts: Vec<GenStmt>,
}

impl GenBody {
    /// Runs `f` on an empty body and returns the statements it added.
    pub fn build(f: impl FnOnce(&mut GenBody)) -> Vec<GenStmt> {
        let mut b = GenBody::default();
        f(&mut b);
        b.stmts
    }

    fn push(&mut self, kind: GenKind) -> &mut Self {
        self.stmts.push(GenStmt::new(kind));
        self
    }

    /// `for VARS in AXIS { BODY }`: `["i"]` or `["i", "lo", "hi"]`.
    pub fn for_each<const N: usize>(
        &mut self,
        vars: [&str; N],
        axis: &str,
        body: impl FnOnce(&mut GenBody),
    ) -> &mut Self {
        self.push(GenKind::For {
            vars: vars.into_iter().map(Ident::new).collect(),
            axis: Ident::new(axis),
            body: GenBody::build(body),
        })
    }

    /// `if COND { THEN }`.
    pub fn if_then(&mut self, cond: impl Into<Expr>, then: impl FnOnce(&mut GenBody)) -> &mut Self {
        self.if_else(cond, then, |_| {})
    }

    /// `if COND { THEN } else { ELSE }`.
    pub fn if_else(
        &mut self,
        cond: impl Into<Expr>,
        then: impl FnOnce(&mut GenBody),
        other: impl FnOnce(&mut GenBody),
    ) -> &mut Self {
        self.push(GenKind::If {
            cond: cond.into(),
            then_body: GenBody::build(then),
            else_body: GenBody::build(other),
        })
    }

    /// `continue;`
    pub fn continue_(&mut self) -> &mut Self {
        self.push(GenKind::Continue)
    }

    /// `let NAME = EXPR;`
    pub fn let_(&mut self, name: &str, value: impl Into<Expr>) -> &mut Self {
        self.push(GenKind::Let {
            name: Ident::new(name),
            value: value.into(),
        })
    }

    /// `let NAME = select_tier(TIERS, EXPR);`
    pub fn select_tier(&mut self, name: &str, tiers: &str, value: impl Into<Expr>) -> &mut Self {
        self.push(GenKind::SelectTier {
            name: Ident::new(name),
            tiers: Ident::new(tiers),
            value: value.into(),
        })
    }

    /// `let NAME = alloc(TIER, INDEX, ...);`
    pub fn alloc(
        &mut self,
        name: &str,
        tier: impl Into<Expr>,
        indices: impl IntoIterator<Item = Expr>,
    ) -> &mut Self {
        self.push(GenKind::Alloc {
            name: Ident::new(name),
            tier: tier.into(),
            indices: indices.into_iter().collect(),
        })
    }

    /// `load NAME = TENSOR[INDEX, ...];`
    pub fn load(
        &mut self,
        name: &str,
        tensor: &str,
        index: impl IntoIterator<Item = Expr>,
    ) -> &mut Self {
        self.push(GenKind::Load {
            name: Ident::new(name),
            tensor: Ident::new(tensor),
            index: index.into_iter().collect(),
        })
    }

    /// `emit(FIELD = EXPR, ...);`
    pub fn emit<'n>(&mut self, fields: impl IntoIterator<Item = (&'n str, Expr)>) -> &mut Self {
        self.push(GenKind::Emit {
            fields: fields
                .into_iter()
                .map(|(n, e)| (Ident::new(n), FieldValue::Expr(e)))
                .collect(),
        })
    }
}
