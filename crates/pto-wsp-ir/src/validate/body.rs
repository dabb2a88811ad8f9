//! Checks of workload and process bodies: statements, tasks, regions, calls and channel use.
//!
//! Why: the body is where most mistakes are made (a task that does not match its kernel, a loop
//! over the wrong kind of axis, a region past its tensor), and each one must be reported with the
//! path of loops and statements that leads to it.
//! Promise: every statement is visited; a mistake in one place does not stop the checks of its
//! siblings or children, and a name that failed to resolve is not reported again as a type error.

use super::errors::ValidationError;
use super::scope::{Local, check_shadowing};
use super::typeck::{self, Expected};
use super::{CallEdge, NameScope, Validator, Want, param_text, pick};
use crate::csp::{Pipeline, Process};
use crate::expr::Expr;
use crate::loc::{Ident, Loc};
use crate::module::{AxisKind, KernelDecl, KernelParam, ParamKind, Workload};
use crate::types::{ParamType, ScalarType};
use crate::workload::{Arg, Region, Stmt, StmtKind};
use std::collections::HashSet;

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

    fn check_stmt(&mut self, s: &'m Stmt, cx: &mut BodyCx<'m>) {
        let loc = s.loc;
        match &s.kind {
            StmtKind::Loop {
                order,
                vars,
                axis,
                body,
            } => {
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
            StmtKind::Select { vars, axis, body } => {
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
            StmtKind::While { cond, max, body } => {
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
            StmtKind::Task(t) => {
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
                    // With the wrong number of arguments, pairing them with parameters by
                    // position would only add noise: check each on its own.
                    let param = kernel
                        .filter(|_| arity_ok)
                        .and_then(|k| k.params.get(i).map(|p| (k, p)));
                    self.check_arg(arg, i + 1, param, loc, cx);
                    cx.path.pop();
                }
                cx.path.pop();
            }
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
            } => {
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
            StmtKind::Call { workload, args } => {
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
                            let ctx =
                                || format!("argument {} of `call {workload}` (`{p}: {ty}`)", i + 1);
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

    fn check_region(
        &mut self,
        r: &'m Region,
        tile: Option<TileUse<'m>>,
        loc: Loc,
        cx: &BodyCx<'m>,
    ) {
        let path = cx.path();
        let tname = &r.tensor.name;
        let rloc = pick(r.tensor.loc, loc);
        // Dimension expressions are checked whatever the tensor.
        let mut consts = Vec::with_capacity(r.dims.len());
        for (d, dim) in r.dims.iter().enumerate() {
            let ctx = || format!("the start of dimension {d} of the region of `{tname}`");
            self.body_expr(&dim.start, Some(Expected::Integer), &ctx, rloc, cx);
            let start = typeck::const_value(&dim.start);
            let size = match &dim.size {
                Some(e) => {
                    let ctx = || format!("the size of dimension {d} of the region of `{tname}`");
                    self.body_expr(e, Some(Expected::Integer), &ctx, rloc, cx);
                    typeck::const_value(e)
                }
                None => Some(1),
            };
            if let Some(s) = start
                && s < 0
            {
                self.push(ValidationError::NegativeRegionStart {
                    tensor: tname.clone(),
                    dim: d,
                    start: s,
                    loc: rloc,
                    path: path.clone(),
                });
            }
            if let Some(s) = size
                && s < 1
            {
                self.push(ValidationError::BadRegionSize {
                    tensor: tname.clone(),
                    dim: d,
                    size: s,
                    loc: rloc,
                    path: path.clone(),
                });
            }
            consts.push((start, size));
        }
        let td = self
            .lookup(&r.tensor, Want::Tensor, &path)
            .and_then(|i| self.m.tensors.get(i));
        if let Some(td) = td {
            if td.shape.len() != r.dims.len() {
                self.push(ValidationError::RegionRank {
                    tensor: tname.clone(),
                    dims: r.dims.len(),
                    rank: td.shape.len(),
                    loc: rloc,
                    path: path.clone(),
                });
            }
            for (d, (&(start, size), extent)) in consts.iter().zip(&td.shape).enumerate() {
                if let (Some(start), Some(size), Some(extent)) =
                    (start, size, typeck::const_value(extent))
                    && start >= 0
                    && size >= 1
                    && i128::from(start) + i128::from(size) > i128::from(extent)
                {
                    self.push(ValidationError::RegionOutOfBounds {
                        tensor: tname.clone(),
                        dim: d,
                        start,
                        size,
                        extent,
                        loc: rloc,
                        path: path.clone(),
                    });
                }
            }
        }
        let Some(tile) = tile else { return };
        let ParamKind::Tile { dtype, shape, .. } = &tile.param.kind else {
            return;
        };
        let kname = &tile.kernel.name.name;
        let pname = &tile.param.name.name;
        if let Some(td) = td
            && td.dtype != *dtype
        {
            self.push(ValidationError::DTypeMismatch {
                kernel: kname.clone(),
                index: tile.index,
                param: pname.clone(),
                expected: *dtype,
                tensor: tname.clone(),
                found: td.dtype,
                loc: rloc,
                path: path.clone(),
            });
        }
        let n = r.dims.len();
        let sizes: Vec<Option<i64>> = (0..n)
            .map(|d| consts.get(d).and_then(|&(_, size)| size))
            .collect();
        let fit = TileFit::new(&sizes, shape);
        if fit.fits() {
            return;
        }
        let fits = format!("{dtype}{}", natural_shape(&sizes));
        let Some(report) = fit.report() else {
            self.push(ValidationError::TileRank {
                kernel: kname.clone(),
                param: pname.clone(),
                tile: shape.len(),
                tensor: tname.clone(),
                dims: n,
                fits,
                loc: rloc,
                path,
            });
            return;
        };
        for (d, size, expected) in report {
            self.push(ValidationError::TileShapeMismatch {
                tensor: tname.clone(),
                dim: d,
                size,
                kernel: kname.clone(),
                param: pname.clone(),
                expected,
                fits: fits.clone(),
                loc: rloc,
                path: path.clone(),
            });
        }
    }
}

/// How a region's sizes (`None`: not a constant) match a tile parameter's shape (`None`: `?`).
///
/// The rule (docs/FORMAT.md, "Tiles and regions"): the tile's dimensions are matched against the
/// region's from the right, either as written, or with the unit dimensions of both left out
/// (the last dimension is always kept: it is the row a kernel reads). So
/// `K[r, c * 512 +: 512, g, 0 +: 128]` (sizes `[1, 512, 1, 128]`) fits `f32[512, 128]` as well
/// as `f32[512, 1, 128]`. A kernel sees every region as rows (the product of the outer sizes)
/// by the last dimension, so both readings give it the same view.
struct TileFit {
    /// The mismatches when matched as written: (region dimension, its size, the tile's size).
    aligned: Option<Vec<(usize, i64, u64)>>,
    /// The mismatches with unit dimensions left out, in the same form.
    squeezed: Option<Vec<(usize, i64, u64)>>,
}

impl TileFit {
    fn new(sizes: &[Option<i64>], tile: &[Option<u64>]) -> TileFit {
        let all: Vec<usize> = (0..sizes.len()).collect();
        let aligned = mismatches(sizes, &all, tile);
        let kept = squeeze(&all, |&d| sizes[d] == Some(1));
        let tile = squeeze(tile, |s| *s == Some(1));
        let squeezed = mismatches(sizes, &kept, &tile);
        TileFit { aligned, squeezed }
    }

    fn fits(&self) -> bool {
        [&self.aligned, &self.squeezed]
            .iter()
            .any(|m| m.as_ref().is_some_and(Vec::is_empty))
    }

    /// The mismatches to report: with unit dimensions left out when that lines the ranks up,
    /// else as written; `None` if the tile has more dimensions than the region either way.
    fn report(self) -> Option<Vec<(usize, i64, u64)>> {
        self.squeezed.or(self.aligned)
    }
}

/// The dimensions `dims` of a region with `sizes` whose constant size differs from `tile`'s,
/// matched from the right; `None` if the tile has more dimensions.
fn mismatches(
    sizes: &[Option<i64>],
    dims: &[usize],
    tile: &[Option<u64>],
) -> Option<Vec<(usize, i64, u64)>> {
    let skip = dims.len().checked_sub(tile.len())?;
    Some(
        dims[skip..]
            .iter()
            .zip(tile)
            .filter_map(|(&d, want)| match (want, sizes[d]) {
                (Some(want), Some(size))
                    if size >= 1 && u64::try_from(size).ok() != Some(*want) =>
                {
                    Some((d, size, *want))
                }
                _ => None,
            })
            .collect(),
    )
}

/// `dims` without the unit ones, except the last.
fn squeeze<T: Copy>(dims: &[T], unit: impl Fn(&T) -> bool) -> Vec<T> {
    let last = dims.len().saturating_sub(1);
    dims.iter()
        .enumerate()
        .filter(|&(i, d)| i == last || !unit(d))
        .map(|(_, d)| *d)
        .collect()
}

/// The tile shape a region of these sizes fits with its unit dimensions left out (`[512, 128]`;
/// `?` where a size is not a constant).
fn natural_shape(sizes: &[Option<i64>]) -> String {
    let dims: Vec<String> = squeeze(sizes, |s| *s == Some(1))
        .iter()
        .map(|s| s.map_or("?".to_string(), |s| s.to_string()))
        .collect();
    format!("[{}]", dims.join(", "))
}

fn join_names(vars: &[Ident]) -> String {
    let names: Vec<&str> = vars.iter().map(Ident::as_str).collect();
    names.join(", ")
}
