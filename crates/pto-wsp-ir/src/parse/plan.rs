//! The parser of Plan-Descriptor-Execute declarations (`crate::plan`): `space`, `tiers` and
//! `plan` with its `generate` block. Kept apart from the workload grammar; the module parser calls
//! in here for those three top-level words (none of them reserved elsewhere).

use super::lexer::Kind;
use super::{PResult, Parser};
use crate::loc::Ident;
use crate::plan::{
    AffinityKind, BindWhat, FieldValue, GenKind, GenStmt, OrderKind, PlanAffinity, PlanBind,
    PlanDecl, PlanOrder, PlanPrefetch, SpaceAxis, SpaceDecl, SpaceEnd, TierDecl, TierKernel,
    TierTableDecl, TileDecl, TileKind,
};
use crate::workload::{Arg, TaskStmt};

impl Parser<'_> {
    /// `space NAME { (axis NAME from N to END; | tile(AXIS, ...); | constraint EXPR;)* }`.
    pub(super) fn space_decl(&mut self) -> PResult<SpaceDecl> {
        self.bump();
        let name = self.ident("space name")?;
        self.open("{", "to open the space")?;
        let mut d = SpaceDecl {
            name,
            axes: Vec::new(),
            tiles: Vec::new(),
            constraints: Vec::new(),
        };
        while !self.peek().is_punct("}") {
            let t = self.peek();
            if self.eat_word("axis") {
                let name = self.ident("axis name")?;
                self.expect_word("from", "after the axis name")?;
                let start = self.count("the axis start")?;
                self.expect_word("to", "after the axis start")?;
                let e = self.peek();
                let end = if e.kind == Kind::Int {
                    SpaceEnd::Const(self.count("the axis end")?)
                } else if self.eat_word("dynamic") {
                    SpaceEnd::Dynamic
                } else {
                    SpaceEnd::Symbol(
                        self.ident("the axis end (an integer, a symbol or `dynamic`)")?,
                    )
                };
                self.expect(";", "after the axis")?;
                d.axes.push(SpaceAxis { name, start, end });
            } else if self.eat_word("tile") {
                self.open("(", "after `tile`")?;
                let axis = self.ident("axis name")?;
                self.expect(",", "after the tiled axis")?;
                let kind = if self.eat_word("auto") {
                    TileKind::Auto
                } else {
                    let n = self.count("the tile size")?;
                    if self.eat_punct(",") {
                        self.expect_word("pad_last", "after the tile size")?;
                        TileKind::PadLast(n)
                    } else {
                        TileKind::Size(n)
                    }
                };
                self.close(")", "to close `tile(`")?;
                self.expect(";", "after `tile(...)`")?;
                d.tiles.push(TileDecl { axis, kind });
            } else if self.eat_word("constraint") {
                let e = self.expr()?;
                self.expect(";", "after the constraint")?;
                d.constraints.push((e, self.loc_from(t.start)));
            } else {
                return Err(self.err_expected("`axis`, `tile`, `constraint` or `}` in the space"));
            }
        }
        self.close("}", "")?;
        Ok(d)
    }

    /// `tiers NAME { (tier NAME (<= N | default) [workspace N];)* }`.
    pub(super) fn tier_table(&mut self) -> PResult<TierTableDecl> {
        self.bump();
        let name = self.ident("tier table name")?;
        self.open("{", "to open the tier table")?;
        let mut tiers = Vec::new();
        while !self.peek().is_punct("}") {
            self.expect_word("tier", "(or `}`) in the tier table")?;
            let name = self.ident("tier name")?;
            let max = if self.eat_punct("<=") {
                Some(self.count("the tier's bound")?)
            } else if self.eat_word("default") {
                None
            } else {
                return Err(self.err_expected("`<= N` or `default` after the tier name"));
            };
            let workspace = if self.eat_word("workspace") {
                self.count("the tier's workspace size")?
            } else {
                0
            };
            self.expect(";", "after the tier")?;
            tiers.push(TierDecl {
                name,
                max,
                workspace,
            });
        }
        self.close("}", "")?;
        Ok(TierTableDecl { name, tiers })
    }

    /// `plan NAME over SPACE with TIERS { fields ...; workspace T; bind ...; kernel ...;
    /// generate { ... } }`.
    pub(super) fn plan_decl(&mut self) -> PResult<PlanDecl> {
        let start = self.bump().start;
        let name = self.ident("plan name")?;
        self.expect_word("over", "after the plan name")?;
        let space = self.ident("space name")?;
        self.expect_word("with", "after the space")?;
        let tiers = self.ident("tier table name")?;
        self.open("{", "to open the plan")?;
        let mut p = PlanDecl {
            name,
            space,
            tiers,
            fields: Vec::new(),
            workspace: None,
            binds: Vec::new(),
            kernels: Vec::new(),
            prefetch: None,
            orders: Vec::new(),
            affinity: None,
            body: Vec::new(),
            loc: crate::loc::Loc::NONE,
        };
        let mut generate = false;
        while !self.peek().is_punct("}") {
            let t = self.peek();
            if self.eat_word("fields") {
                p.fields = self.list(";", "in the field list", |p| p.ident("field name"))?;
                self.expect(";", "after the fields")?;
            } else if self.eat_word("workspace") {
                p.workspace = Some(self.ident("workspace tensor")?);
                self.expect(";", "after the workspace tensor")?;
            } else if self.eat_word("bind") {
                p.binds.push(self.plan_bind()?);
            } else if self.eat_word("kernel") {
                p.kernels.push(self.tier_kernel(t.start)?);
            } else if self.peek().is_word("prefetch") && p.prefetch.is_none() {
                p.prefetch = Some(self.plan_prefetch(t.start)?);
            } else if self.eat_word("order") {
                p.orders.push(self.plan_order(t.start)?);
            } else if self.peek().is_word("affinity") && p.affinity.is_none() {
                p.affinity = Some(self.plan_affinity(t.start)?);
            } else if self.peek().is_word("generate") && !generate {
                self.bump();
                p.body = self.gen_block("after `generate`")?;
                generate = true;
            } else {
                return Err(self.err_expected(if generate {
                    "`}` to close the plan (its `generate` block comes last)"
                } else {
                    "`fields`, `workspace`, `bind`, `kernel`, `prefetch` (once), `order`, `affinity` (once) or \
                     `generate` in the plan"
                }));
            }
            if generate && !self.peek().is_punct("}") {
                return Err(
                    self.err_expected("`}` to close the plan (its `generate` block comes last)")
                );
            }
        }
        self.close("}", "")?;
        if !generate {
            return Err(super::ParseError::new(
                "a plan needs a `generate { ... }` block",
                self.loc_from(start),
            ));
        }
        p.loc = self.loc_from(start);
        Ok(p)
    }

    /// `bind end(AXIS) = EXPR;` / `bind tile(AXIS) = EXPR;`, after `bind`.
    fn plan_bind(&mut self) -> PResult<PlanBind> {
        let what = if self.eat_word("end") {
            BindWhat::End
        } else if self.eat_word("tile") {
            BindWhat::Tile
        } else {
            return Err(self.err_expected("`end(AXIS)` or `tile(AXIS)` after `bind`"));
        };
        self.open("(", "after the bound item")?;
        let axis = self.ident("axis name")?;
        self.close(")", "")?;
        self.expect("=", "after the bound axis")?;
        let value = self.expr()?;
        self.expect(";", "after the binding")?;
        Ok(PlanBind { what, axis, value })
    }

    /// `kernel TIER => KERNEL(ARGS);`, after `kernel` (the item starts at `start`).
    fn tier_kernel(&mut self, start: usize) -> PResult<TierKernel> {
        let tier = self.ident("tier name")?;
        self.expect("=>", "after the tier name")?;
        let kernel = self.kernel_name()?;
        self.open("(", "after kernel name")?;
        let args: Vec<Arg> = self.list(")", "in kernel arguments", Self::arg)?;
        self.close(")", "")?;
        self.expect(";", "after the tier's kernel")?;
        Ok(TierKernel {
            tier,
            call: TaskStmt { kernel, args },
            loc: self.loc_from(start),
        })
    }

    /// `prefetch(AXIS, DEPTH) => KERNEL(ARGS);` (the item starts at `start`).
    fn plan_prefetch(&mut self, start: usize) -> PResult<PlanPrefetch> {
        self.bump();
        self.open("(", "after `prefetch`")?;
        let axis = self.ident("axis name")?;
        self.expect(",", "after the prefetched axis")?;
        let depth = self.count("the prefetch depth")?;
        self.close(")", "to close `prefetch(`")?;
        self.expect("=>", "after `prefetch(...)`")?;
        let kernel = self.kernel_name()?;
        self.open("(", "after kernel name")?;
        let args: Vec<Arg> = self.list(")", "in kernel arguments", Self::arg)?;
        self.close(")", "")?;
        self.expect(";", "after the prefetch")?;
        Ok(PlanPrefetch {
            axis,
            depth,
            call: TaskStmt { kernel, args },
            loc: self.loc_from(start),
        })
    }

    /// `order(AXIS, sequential | parallel | interleaved(N));`, after `order`.
    fn plan_order(&mut self, start: usize) -> PResult<PlanOrder> {
        self.open("(", "after `order`")?;
        let axis = self.ident("axis name")?;
        self.expect(",", "after the ordered axis")?;
        let order = if self.eat_word("sequential") {
            OrderKind::Sequential
        } else if self.eat_word("parallel") {
            OrderKind::Parallel
        } else if self.eat_word("interleaved") {
            self.open("(", "after `interleaved`")?;
            let n = self.count("the interleaving group size")?;
            self.close(")", "to close `interleaved(`")?;
            OrderKind::Interleaved(n)
        } else {
            return Err(
                self.err_expected("`sequential`, `parallel` or `interleaved(N)` in `order(...)`")
            );
        };
        self.close(")", "to close `order(`")?;
        self.expect(";", "after the order")?;
        Ok(PlanOrder {
            axis,
            order,
            loc: self.loc_from(start),
        })
    }

    /// `affinity(AXIS, spread | core_group(N) | core_local);` (the item starts at `start`).
    fn plan_affinity(&mut self, start: usize) -> PResult<PlanAffinity> {
        self.bump();
        self.open("(", "after `affinity`")?;
        let axis = self.ident("axis name")?;
        self.expect(",", "after the axis")?;
        let affinity = if self.eat_word("spread") {
            AffinityKind::Spread
        } else if self.eat_word("core_local") {
            AffinityKind::CoreLocal
        } else if self.eat_word("core_group") {
            self.open("(", "after `core_group`")?;
            let n = self.count("the core group size")?;
            self.close(")", "to close `core_group(`")?;
            AffinityKind::CoreGroup(n)
        } else {
            return Err(
                self.err_expected("`spread`, `core_group(N)` or `core_local` in `affinity(...)`")
            );
        };
        self.close(")", "to close `affinity(`")?;
        self.expect(";", "after the affinity")?;
        Ok(PlanAffinity {
            axis,
            affinity,
            loc: self.loc_from(start),
        })
    }

    fn gen_block(&mut self, ctx: &str) -> PResult<Vec<GenStmt>> {
        self.open("{", ctx)?;
        self.enter()?;
        let mut body = Vec::new();
        while !self.peek().is_punct("}") {
            body.push(self.gen_stmt()?);
        }
        self.close("}", "")?;
        self.leave();
        Ok(body)
    }

    fn gen_stmt(&mut self) -> PResult<GenStmt> {
        let t = self.peek();
        let kind = if t.kind != Kind::Word {
            return Err(self.gen_expected());
        } else if self.eat_word("for") {
            let mut vars = vec![self.ident("loop variable after `for`")?];
            while self.eat_punct(",") {
                vars.push(self.ident("loop variable")?);
            }
            self.expect_word("in", "after loop variables")?;
            let axis = self.ident("space axis name")?;
            let body = self.gen_block("to open the loop body")?;
            GenKind::For { vars, axis, body }
        } else if self.eat_word("if") {
            let cond = self.expr()?;
            let then_body = self.gen_block("after the `if` condition")?;
            let else_body = if self.eat_word("else") {
                self.gen_block("after `else`")?
            } else {
                Vec::new()
            };
            GenKind::If {
                cond,
                then_body,
                else_body,
            }
        } else if self.eat_word("continue") {
            self.expect(";", "after `continue`")?;
            GenKind::Continue
        } else if self.eat_word("let") {
            self.gen_let()?
        } else if self.eat_word("load") {
            let name = self.ident("variable name")?;
            self.expect("=", "after the variable name")?;
            let tensor = self.ident("tensor name")?;
            self.open("[", "after tensor name")?;
            let index = self.list("]", "in element index", Self::expr)?;
            self.close("]", "")?;
            self.expect(";", "after load statement")?;
            GenKind::Load {
                name,
                tensor,
                index,
            }
        } else if self.eat_word("emit") {
            self.gen_emit()?
        } else {
            return Err(self.gen_expected());
        };
        Ok(GenStmt {
            kind,
            loc: self.loc_from(t.start),
        })
    }

    /// After `let`: `NAME = select_tier(...)`, `NAME = alloc(...)` or `NAME = EXPR`, and `;`.
    fn gen_let(&mut self) -> PResult<GenKind> {
        let name = self.ident("variable name")?;
        self.expect("=", "after the variable name")?;
        let kind = if self.peek().is_word("select_tier") && self.peek_at(1).is_punct("(") {
            self.bump();
            self.open("(", "")?;
            let tiers = self.ident("tier table name")?;
            self.expect(",", "after the tier table")?;
            let value = self.expr()?;
            self.close(")", "to close `select_tier(`")?;
            GenKind::SelectTier { name, tiers, value }
        } else if self.peek().is_word("alloc") && self.peek_at(1).is_punct("(") {
            self.bump();
            self.open("(", "")?;
            let tier = self.expr()?;
            let mut indices = Vec::new();
            while self.eat_punct(",") {
                indices.push(self.expr()?);
            }
            self.close(")", "to close `alloc(`")?;
            GenKind::Alloc {
                name,
                tier,
                indices,
            }
        } else {
            GenKind::Let {
                name,
                value: self.expr()?,
            }
        };
        self.expect(";", "after `let`")?;
        Ok(kind)
    }

    /// After `emit`: `(FIELD = VALUE, ...);`.
    fn gen_emit(&mut self) -> PResult<GenKind> {
        self.open("(", "after `emit`")?;
        let fields = self.list(")", "in the emitted fields", |p| {
            let t = p.peek();
            if t.kind != Kind::Word {
                return Err(p.err_expected("a descriptor field name"));
            }
            p.bump();
            let f = Ident::at(t.text, t.loc());
            p.expect("=", "after the field name")?;
            if p.peek().is_word("select_tier") && p.peek_at(1).is_punct("(") {
                p.bump();
                p.open("(", "")?;
                let tiers = p.ident("tier table name")?;
                p.expect(",", "after the tier table")?;
                let value = p.expr()?;
                p.close(")", "to close `select_tier(`")?;
                return Ok((f, FieldValue::SelectTier { tiers, value }));
            }
            Ok((f, FieldValue::Expr(p.expr()?)))
        })?;
        self.close(")", "")?;
        self.expect(";", "after `emit(...)`")?;
        Ok(GenKind::Emit { fields })
    }

    fn gen_expected(&self) -> super::ParseError {
        self.err_expected("a generator statement (for, if, continue, let, load or emit)")
    }
}
