//! Checks of one statement, by kind: loops and `select` over axes of the right kind, control
//! flow (`if`, `while`, `break`), tasks, slot writes, calls and channel use.

use super::BodyCx;
use crate::expr::Expr;
use crate::loc::{Ident, Loc};
use crate::module::AxisKind;
use crate::validate::errors::ValidationError;
use crate::validate::typeck::{self, Expected};
use crate::validate::{CallEdge, Validator, Want, pick};
use crate::workload::{LoopOrder, Stmt, StmtKind, TaskStmt};

impl<'m> Validator<'m> {
    pub(super) fn check_stmt(&mut self, s: &'m Stmt, cx: &mut BodyCx<'m>) {
        let loc = s.loc;
        match &s.kind {
            StmtKind::Loop {
                order,
                vars,
                axis,
                body,
            } => self.check_loop(*order, vars, axis, body, loc, cx),
            StmtKind::Select { vars, axis, body } => self.check_select(vars, axis, body, loc, cx),
            StmtKind::Cond {
                cond,
                then_body,
                else_body,
            } => {
                cx.path.push("if".into());
                self.body_expr(
                    cond,
                    Some(Expected::Bool),
                    &|| "the condition of `if`".into(),
                    loc,
                    cx,
                );
                self.check_body(then_body, cx);
                cx.path.pop();
                cx.path.push("else".into());
                self.check_body(else_body, cx);
                cx.path.pop();
            }
            StmtKind::While { cond, max, body } => self.check_while(cond, max, body, loc, cx),
            StmtKind::Break { cond } => {
                cx.path.push("break".into());
                if cx.whiles == 0 {
                    self.push(ValidationError::BreakOutsideWhile {
                        loc,
                        path: cx.path(),
                    });
                }
                self.body_expr(
                    cond,
                    Some(Expected::Bool),
                    &|| "the condition of `break if`".into(),
                    loc,
                    cx,
                );
                cx.path.pop();
            }
            StmtKind::Combine(body) => {
                cx.path.push("combine".into());
                self.check_body(body, cx);
                cx.path.pop();
            }
            StmtKind::Sequential(body) => {
                cx.path.push("sequential".into());
                self.check_body(body, cx);
                cx.path.pop();
            }
            StmtKind::Task(t) => self.check_task(t, loc, cx),
            StmtKind::SlotSet { slot, value } => {
                cx.path.push(format!("set {slot}"));
                let ty = self.write_target(slot, "set", loc, cx);
                match ty {
                    Some(t) => {
                        let ctx = || format!("the value of `set {slot}`");
                        self.body_expr(value, Some(Expected::Exact(t)), &ctx, loc, cx);
                    }
                    None => {
                        self.body_expr(value, None, &String::new, loc, cx);
                    }
                }
                cx.path.pop();
            }
            StmtKind::SlotLoad {
                slot,
                tensor,
                index,
            } => self.check_load(slot, tensor, index, loc, cx),
            StmtKind::Call { workload, args } => self.check_call(workload, args, loc, cx),
            StmtKind::Send { channel, value } => {
                cx.path.push(format!("send {channel}"));
                self.check_channel_use(channel, "send", loc, cx);
                let ctx = || format!("the value of `send {channel}`");
                self.body_expr(value, Some(Expected::Integer), &ctx, loc, cx);
                cx.path.pop();
            }
            StmtKind::Consume { channel, var, body } => {
                cx.path.push(format!("consume {channel} as {var}"));
                self.check_channel_use(channel, "consume", loc, cx);
                self.with_vars(
                    &[var],
                    "consume variable",
                    "a consume variable",
                    loc,
                    cx,
                    |v, cx| v.check_body(body, cx),
                );
                cx.path.pop();
            }
        }
    }

    /// `parallel_for` / `for`: a dense or ragged axis, one variable per dimension.
    fn check_loop(
        &mut self,
        order: LoopOrder,
        vars: &'m [Ident],
        axis: &'m Ident,
        body: &'m [Stmt],
        loc: Loc,
        cx: &mut BodyCx<'m>,
    ) {
        let kw = order.keyword();
        cx.path.push(format!("{kw} {}", join_names(vars)));
        let path = cx.path();
        if let Some(ai) = self.lookup(axis, Want::Axis, &path)
            && let Some(a) = self.m.axes.get(ai)
        {
            let aloc = pick(axis.loc, loc);
            match &a.kind {
                AxisKind::Sparse { .. } => self.push(ValidationError::LoopOverSparse {
                    keyword: kw,
                    axis: axis.name.clone(),
                    loc: aloc,
                    path: path.clone(),
                }),
                AxisKind::Dense(_) | AxisKind::DenseDyn(_) | AxisKind::Ragged { .. } => {
                    if vars.len() != a.kind.arity() {
                        self.push(ValidationError::LoopVarCount {
                            keyword: kw,
                            axis: axis.name.clone(),
                            kind: a.kind.keyword(),
                            expected: a.kind.arity(),
                            found: vars.len(),
                            loc: aloc,
                            path: path.clone(),
                        });
                    }
                }
            }
        }
        let vs: Vec<&Ident> = vars.iter().collect();
        self.with_vars(&vs, "loop variable", "a loop variable", loc, cx, |v, cx| {
            v.check_body(body, cx)
        });
        cx.path.pop();
    }

    /// `select`: a sparse axis, two variables.
    fn check_select(
        &mut self,
        vars: &'m [Ident],
        axis: &'m Ident,
        body: &'m [Stmt],
        loc: Loc,
        cx: &mut BodyCx<'m>,
    ) {
        cx.path.push(format!("select {}", join_names(vars)));
        let path = cx.path();
        if let Some(ai) = self.lookup(axis, Want::Axis, &path)
            && let Some(a) = self.m.axes.get(ai)
        {
            let aloc = pick(axis.loc, loc);
            match &a.kind {
                AxisKind::Sparse { .. } => {
                    if vars.len() != 2 {
                        self.push(ValidationError::LoopVarCount {
                            keyword: "select",
                            axis: axis.name.clone(),
                            kind: a.kind.keyword(),
                            expected: 2,
                            found: vars.len(),
                            loc: aloc,
                            path: path.clone(),
                        });
                    }
                }
                AxisKind::Dense(_) | AxisKind::DenseDyn(_) | AxisKind::Ragged { .. } => {
                    self.push(ValidationError::SelectNeedsSparse {
                        axis: axis.name.clone(),
                        kind: a.kind.keyword(),
                        loc: aloc,
                        path: path.clone(),
                    })
                }
            }
        }
        let vs: Vec<&Ident> = vars.iter().collect();
        self.with_vars(
            &vs,
            "select variable",
            "a select variable",
            loc,
            cx,
            |v, cx| v.check_body(body, cx),
        );
        cx.path.pop();
    }

    fn check_while(
        &mut self,
        cond: &Expr,
        max: &Expr,
        body: &'m [Stmt],
        loc: Loc,
        cx: &mut BodyCx<'m>,
    ) {
        cx.path.push("while".into());
        self.body_expr(
            cond,
            Some(Expected::Bool),
            &|| "the condition of `while`".into(),
            loc,
            cx,
        );
        self.body_expr(
            max,
            Some(Expected::Integer),
            &|| "the `max` bound of `while`".into(),
            loc,
            cx,
        );
        cx.whiles += 1;
        self.check_body(body, cx);
        cx.whiles -= 1;
        cx.path.pop();
    }

    /// A task: its kernel, its arity, each argument against its parameter.
    fn check_task(&mut self, t: &'m TaskStmt, loc: Loc, cx: &mut BodyCx<'m>) {
        cx.path.push(format!("task {}", t.kernel));
        let path = cx.path();
        let kernel = self
            .lookup(&t.kernel, Want::Kernel, &path)
            .and_then(|i| self.m.kernels.get(i));
        let arity_ok = kernel.is_none_or(|k| k.params.len() == t.args.len());
        if let Some(k) = kernel
            && !arity_ok
        {
            self.push(ValidationError::TaskArity {
                kernel: k.name.name.clone(),
                params: k.params.len(),
                args: t.args.len(),
                loc: pick(t.kernel.loc, loc),
                path: path.clone(),
            });
        }
        for (i, arg) in t.args.iter().enumerate() {
            cx.path.push(format!("argument {}", i + 1));
            // With the wrong number of arguments, pairing them with parameters by position would
            // only add noise: check each on its own.
            let param = kernel
                .filter(|_| arity_ok)
                .and_then(|k| k.params.get(i).map(|p| (k, p)));
            self.check_arg(arg, i + 1, param, loc, cx);
            cx.path.pop();
        }
        cx.path.pop();
    }

    /// `load slot = T[index]`: an integer slot, an integer tensor, one index per dimension.
    fn check_load(
        &mut self,
        slot: &Ident,
        tensor: &Ident,
        index: &[Expr],
        loc: Loc,
        cx: &mut BodyCx<'m>,
    ) {
        cx.path.push(format!("load {slot}"));
        let path = cx.path();
        if let Some(t) = self.write_target(slot, "load", loc, cx)
            && !typeck::is_integer(t)
        {
            self.push(ValidationError::LoadSlotNotInteger {
                slot: slot.name.clone(),
                ty: t,
                loc: pick(slot.loc, loc),
                path: path.clone(),
            });
        }
        if let Some(ti) = self.lookup(tensor, Want::Tensor, &path)
            && let Some(td) = self.m.tensors.get(ti)
        {
            let tloc = pick(tensor.loc, loc);
            if !td.dtype.is_integer() {
                self.push(ValidationError::LoadTensorNotInteger {
                    tensor: tensor.name.clone(),
                    dtype: td.dtype,
                    loc: tloc,
                    path: path.clone(),
                });
            }
            if td.shape.len() != index.len() {
                self.push(ValidationError::LoadIndexCount {
                    tensor: tensor.name.clone(),
                    found: index.len(),
                    rank: td.shape.len(),
                    loc: tloc,
                    path: path.clone(),
                });
            }
        }
        for (i, e) in index.iter().enumerate() {
            let ctx = || format!("index {i} of `load` from `{tensor}`");
            self.body_expr(e, Some(Expected::Integer), &ctx, loc, cx);
        }
        cx.path.pop();
    }

    /// `call`: the callee (recorded for the call graph), its arity, each argument's type.
    fn check_call(&mut self, workload: &Ident, args: &[Expr], loc: Loc, cx: &mut BodyCx<'m>) {
        cx.path.push(format!("call {workload}"));
        let path = cx.path();
        let callee = self.lookup(workload, Want::Workload, &path);
        let w = callee.and_then(|i| self.m.workloads.get(i));
        if let (Some(caller), Some(callee)) = (cx.caller, callee) {
            self.calls.push(CallEdge {
                caller,
                callee,
                loc: pick(workload.loc, loc),
                path: path.clone(),
            });
        }
        let arity_ok = w.is_none_or(|w| w.params.len() == args.len());
        if let Some(w) = w
            && !arity_ok
        {
            self.push(ValidationError::CallArity {
                workload: w.name.name.clone(),
                params: w.params.len(),
                args: args.len(),
                loc: pick(workload.loc, loc),
                path: path.clone(),
            });
        }
        for (i, e) in args.iter().enumerate() {
            cx.path.push(format!("argument {}", i + 1));
            match w.filter(|_| arity_ok).and_then(|w| w.params.get(i)) {
                Some((p, ty)) => {
                    let ctx = || format!("argument {} of `call {workload}` (`{p}: {ty}`)", i + 1);
                    self.body_expr(e, Some(Expected::Exact(*ty)), &ctx, loc, cx);
                }
                None => {
                    self.body_expr(e, None, &String::new, loc, cx);
                }
            }
            cx.path.pop();
        }
        cx.path.pop();
    }

    /// Checks a `send` / `consume` channel against the enclosing process.
    fn check_channel_use(
        &mut self,
        channel: &Ident,
        stmt: &'static str,
        loc: Loc,
        cx: &BodyCx<'m>,
    ) {
        let path = cx.path();
        let cloc = pick(channel.loc, loc);
        let Some((p, proc)) = cx.process else {
            self.push(ValidationError::CspOutsideProcess {
                stmt,
                channel: channel.name.clone(),
                loc: cloc,
                path,
            });
            return;
        };
        if !p.channels.iter().any(|c| c.name == *channel) {
            self.push(ValidationError::UnknownChannel {
                name: channel.name.clone(),
                pipeline: p.name.name.clone(),
                loc: cloc,
                path,
            });
            return;
        }
        let (list, names) = if stmt == "send" {
            ("produces", &proc.produces)
        } else {
            ("consumes", &proc.consumes)
        };
        if !names.contains(channel) {
            self.push(ValidationError::ChannelNotListed {
                stmt,
                channel: channel.name.clone(),
                process: proc.name.name.clone(),
                list,
                loc: cloc,
                path,
            });
        }
    }
}

fn join_names(vars: &[Ident]) -> String {
    let names: Vec<&str> = vars.iter().map(Ident::as_str).collect();
    names.join(", ")
}
