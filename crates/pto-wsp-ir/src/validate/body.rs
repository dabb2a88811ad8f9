//! Checks of workload and process bodies: statements, tasks, regions, calls and channel use.
//!
//! Why: the body is where most mistakes are made (a task that does not match its kernel, a loop
//! over the wrong kind of axis, a region past its tensor), and each one must be reported with the
//! path of loops and statements that leads to it.
//! Promise: every statement is visited; a mistake in one place does not stop the checks of its
//! siblings or children, and a name that failed to resolve is not reported again as a type error.

use super::errors::ValidationError;
use super::scope::{Local, check_shadowing};
use super::typeck::Expected;
use super::{NameScope, Validator, param_text, pick};
use crate::csp::{Pipeline, Process};
use crate::expr::Expr;
use crate::loc::{Ident, Loc};
use crate::module::{KernelDecl, KernelParam, ParamKind, Workload};
use crate::types::{ParamType, ScalarType};
use crate::workload::{Arg, Stmt};
use std::collections::HashSet;

mod region;
mod stmt;

/// Where a body is being checked.
struct BodyCx<'m> {
    locals: Vec<Local>,
    path: Vec<String>,
    /// The enclosing pipeline and process, if any.
    process: Option<(&'m Pipeline, &'m Process)>,
    /// The enclosing workload (index), if any: the caller of `call` statements.
    caller: Option<usize>,
    /// How many `while` loops enclose the statement (in this body, not across calls).
    whiles: usize,
}

impl BodyCx<'_> {
    fn path(&self) -> String {
        self.path.join(" > ")
    }
}

/// A tile parameter a region is passed to.
struct TileUse<'a> {
    kernel: &'a KernelDecl,
    index: usize,
    param: &'a KernelParam,
}

impl<'m> Validator<'m> {
    pub(super) fn check_workload(&mut self, index: usize, w: &'m Workload) {
        let mut cx = BodyCx {
            locals: Vec::new(),
            path: vec![format!("workload {}", w.name)],
            process: None,
            caller: Some(index),
            whiles: 0,
        };
        let mut seen: HashSet<&str> = HashSet::new();
        for (id, ty) in &w.params {
            let path = format!("{} > parameter {}", cx.path(), id);
            let loc = pick(id.loc, w.loc);
            if !seen.insert(&id.name) {
                self.push(ValidationError::DuplicateParameter {
                    owner: format!("workload `{}`", w.name),
                    name: id.name.clone(),
                    loc,
                    path,
                });
            } else {
                check_shadowing(
                    &self.g,
                    &[],
                    "parameter",
                    &id.name,
                    loc,
                    &path,
                    &mut self.errors,
                );
            }
            cx.locals.push(Local {
                name: id.name.clone(),
                ty: *ty,
                what: "a parameter",
            });
        }
        self.check_body(&w.body, &mut cx);
    }

    pub(super) fn check_process(&mut self, p: &'m Pipeline, proc: &'m Process) {
        let mut cx = BodyCx {
            locals: Vec::new(),
            path: vec![
                format!("pipeline {}", p.name),
                format!("process {}", proc.name),
            ],
            process: Some((p, proc)),
            caller: None,
            whiles: 0,
        };
        self.check_body(&proc.body, &mut cx);
    }

    fn check_body(&mut self, body: &'m [Stmt], cx: &mut BodyCx<'m>) {
        for s in body {
            self.check_stmt(s, cx);
        }
    }

    /// Binds `vars` (reporting shadowing), runs `f`, then unbinds them.
    fn with_vars(
        &mut self,
        vars: &[&Ident],
        what: &'static str,
        local_what: &'static str,
        fallback: Loc,
        cx: &mut BodyCx<'m>,
        f: impl FnOnce(&mut Self, &mut BodyCx<'m>),
    ) {
        let before = cx.locals.len();
        let path = cx.path();
        for v in vars {
            check_shadowing(
                &self.g,
                &cx.locals,
                what,
                &v.name,
                pick(v.loc, fallback),
                &path,
                &mut self.errors,
            );
            cx.locals.push(Local {
                name: v.name.clone(),
                ty: ScalarType::I64,
                what: local_what,
            });
        }
        f(self, cx);
        cx.locals.truncate(before);
    }

    fn body_expr(
        &mut self,
        e: &Expr,
        expected: Option<Expected>,
        context: &dyn Fn() -> String,
        fallback: Loc,
        cx: &BodyCx<'m>,
    ) -> Option<ScalarType> {
        let path = cx.path();
        self.check_expr(
            e,
            expected,
            context,
            &NameScope::Body(&cx.locals),
            fallback,
            &path,
        )
    }

    /// Resolves the slot a `set` / `load` writes, returning its type.
    fn write_target(
        &mut self,
        slot: &Ident,
        stmt: &'static str,
        loc: Loc,
        cx: &BodyCx<'m>,
    ) -> Option<ScalarType> {
        let (name, loc, path) = (slot.name.clone(), pick(slot.loc, loc), cx.path());
        if let Some(l) = cx.locals.iter().rev().find(|l| l.name == slot.name) {
            self.push(ValidationError::WriteToReadOnly {
                stmt,
                name,
                what: l.what,
                loc,
                path,
            });
            return None;
        }
        let err = match self.g.get(&slot.name) {
            Some(super::Decl::Slot(t)) => return Some(t),
            Some(super::Decl::Symbol(_)) => ValidationError::WriteToReadOnly {
                stmt,
                name,
                what: "a symbol",
                loc,
                path,
            },
            Some(d) => ValidationError::WrongKind {
                name,
                found: d.article(),
                expected: "a slot",
                loc,
                path,
            },
            None => ValidationError::UnknownSlot { name, loc, path },
        };
        self.push(err);
        None
    }

    /// Checks one task argument, against its parameter when the kernel and position are known.
    fn check_arg(
        &mut self,
        arg: &'m Arg,
        index: usize,
        param: Option<(&'m KernelDecl, &'m KernelParam)>,
        loc: Loc,
        cx: &BodyCx<'m>,
    ) {
        match (arg, param) {
            (Arg::Region(r), Some((k, p))) => match &p.kind {
                ParamKind::Tile { .. } => self.check_region(
                    r,
                    Some(TileUse {
                        kernel: k,
                        index,
                        param: p,
                    }),
                    loc,
                    cx,
                ),
                ParamKind::Scalar(_) => {
                    self.push(ValidationError::RegionForScalar {
                        kernel: k.name.name.clone(),
                        index,
                        param: param_text(p),
                        loc: pick(r.tensor.loc, loc),
                        path: cx.path(),
                    });
                    self.check_region(r, None, loc, cx);
                }
            },
            (Arg::Region(r), None) => self.check_region(r, None, loc, cx),
            (Arg::Scalar(e), Some((k, p))) => match &p.kind {
                ParamKind::Scalar(ty) if ty.is_float() => {
                    let (kernel, param) = (k.name.name.clone(), param_text(p));
                    match e {
                        Expr::Float(v) => {
                            if *ty == ParamType::F32 && !(v.value() as f32).is_finite() {
                                self.push(ValidationError::FloatRange {
                                    kernel,
                                    index,
                                    param,
                                    text: v.to_string(),
                                    loc: pick(v.loc, loc),
                                    path: cx.path(),
                                });
                            }
                        }
                        _ => self.push(ValidationError::FloatArg {
                            kernel,
                            index,
                            param,
                            loc: pick(e.loc(), loc),
                            path: cx.path(),
                        }),
                    }
                }
                ParamKind::Scalar(ty) => {
                    let ctx = || format!("argument {index} of `{}` (`{}`)", k.name, param_text(p));
                    self.body_expr(e, Some(Expected::Exact(ty.carrier())), &ctx, loc, cx);
                }
                ParamKind::Tile { .. } => self.push(ValidationError::ExprForTile {
                    kernel: k.name.name.clone(),
                    index,
                    param: param_text(p),
                    loc: pick(e.loc(), loc),
                    path: cx.path(),
                }),
            },
            (Arg::Scalar(e), None) => {
                self.body_expr(e, None, &String::new, loc, cx);
            }
        }
    }
}
