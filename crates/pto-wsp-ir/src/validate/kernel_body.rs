//! Checks of kernel bodies (`crate::kernel_body`): names, operand kinds, and each instruction's
//! shape and element-type rule from the one table in [`crate::tile_isa`].
//!
//! Promise: every mistake is a [`ValidationError::KernelBody`] naming the kernel and the
//! instruction or declaration, at the `file:line:column` of the statement.

use super::ValidationError;
use super::typeck::{self, Expected, Site};
use crate::expr::Expr;
use crate::kernel_body::{InstArg, KStmt, KStmtKind, TileDecl, TileKind};
use crate::loc::{Ident, Loc};
use crate::module::{KernelDecl, ParamKind};
use crate::tile_isa::{Operand, ShapeRule, TileOp};
use crate::types::{Access, DType, ScalarType};

/// What a name means inside a body.
#[derive(Clone)]
enum Local {
    Tile(TileDecl),
    Int,
}

struct Ctx<'a> {
    k: &'a KernelDecl,
    scope: Vec<(String, Local)>,
    errors: &'a mut Vec<ValidationError>,
}

/// Checks `k`'s body, if it has one, pushing every mistake to `errors`.
pub(crate) fn check(k: &KernelDecl, errors: &mut Vec<ValidationError>) {
    let Some(body) = &k.body else { return };
    if k.tiers.is_some() {
        errors.push(err(
            k,
            "a kernel with a body cannot have tiers".into(),
            k.name.loc,
        ));
    }
    let mut cx = Ctx {
        k,
        scope: Vec::new(),
        errors,
    };
    cx.block(body);
}

fn err(k: &KernelDecl, message: String, loc: Loc) -> ValidationError {
    ValidationError::KernelBody {
        kernel: k.name.name.clone(),
        message,
        loc,
        path: format!("kernel {}", k.name),
    }
}

impl Ctx<'_> {
    fn push(&mut self, message: String, loc: Loc) {
        let e = err(self.k, message, loc);
        self.errors.push(e);
    }

    fn lookup(&self, name: &str) -> Option<&Local> {
        self.scope
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, l)| l)
    }

    fn param(&self, name: &str) -> Option<&ParamKind> {
        self.k
            .params
            .iter()
            .find(|p| p.name.name == name)
            .map(|p| &p.kind)
    }

    fn declare(&mut self, id: &Ident, what: Local, loc: Loc) {
        if self.lookup(&id.name).is_some() || self.param(&id.name).is_some() {
            self.push(format!("`{}` is already declared", id.name), loc);
        }
        self.scope.push((id.name.clone(), what));
    }

    /// Checks an expression of type `want` over the integer / bool parameters and locals.
    fn expr(&mut self, e: &Expr, want: ScalarType, what: &str, loc: Loc) {
        let path = format!("kernel {}", self.k.name);
        let site = Site {
            fallback: loc,
            path: &path,
        };
        let mut unknown = Vec::new();
        let scope = &self.scope;
        let k = self.k;
        let mut resolve = |id: &Ident| -> Option<ScalarType> {
            if let Some((_, l)) = scope.iter().rev().find(|(n, _)| *n == id.name) {
                return match l {
                    Local::Int => Some(ScalarType::I64),
                    Local::Tile(_) => {
                        unknown.push(format!("tile `{}` is not a scalar", id.name));
                        None
                    }
                };
            }
            match k
                .params
                .iter()
                .find(|p| p.name.name == id.name)
                .map(|p| &p.kind)
            {
                Some(ParamKind::Scalar(t)) if !t.is_float() => Some(t.carrier()),
                Some(_) => {
                    unknown.push(format!("`{}` is not an integer or bool scalar", id.name));
                    None
                }
                None => {
                    unknown.push(format!("unknown name `{}`", id.name));
                    None
                }
            }
        };
        let expected = match want {
            ScalarType::Bool => Expected::Bool,
            t => Expected::Exact(t),
        };
        typeck::expect_type(
            e,
            expected,
            &|| what.to_string(),
            &mut resolve,
            &site,
            self.errors,
        );
        for m in unknown {
            self.push(format!("{what}: {m}"), loc);
        }
    }

    fn block(&mut self, body: &[KStmt]) {
        let mark = self.scope.len();
        for s in body {
            self.stmt(s);
        }
        self.scope.truncate(mark);
    }

    fn stmt(&mut self, s: &KStmt) {
        match &s.kind {
            KStmtKind::Tile(t) => {
                if !matches!(t.dtype, DType::F32 | DType::F16 | DType::Bf16) {
                    self.push(
                        format!(
                            "tile `{}`: element type must be f32, f16 or bf16, not {}",
                            t.name, t.dtype
                        ),
                        s.loc,
                    );
                }
                if t.rows == 0 || t.cols == 0 || t.rows * t.cols > 1 << 20 {
                    self.push(
                        format!(
                            "tile `{}`: {} x {} is not between 1 and 2^20 elements",
                            t.name, t.rows, t.cols
                        ),
                        s.loc,
                    );
                }
                if let Some((r, c)) = &t.valid {
                    let what = format!("valid rows of tile `{}`", t.name);
                    self.expr(r, ScalarType::I64, &what, s.loc);
                    let what = format!("valid columns of tile `{}`", t.name);
                    self.expr(c, ScalarType::I64, &what, s.loc);
                }
                self.declare(&t.name, Local::Tile(t.clone()), s.loc);
            }
            KStmtKind::Let { name, value } => {
                self.expr(
                    value,
                    ScalarType::I64,
                    &format!("the value of `{name}`"),
                    s.loc,
                );
                self.declare(name, Local::Int, s.loc);
            }
            KStmtKind::For { var, count, body } => {
                self.expr(count, ScalarType::I64, "the iteration count", s.loc);
                let mark = self.scope.len();
                self.declare(var, Local::Int, s.loc);
                self.block(body);
                self.scope.truncate(mark);
            }
            KStmtKind::If {
                cond,
                then_body,
                else_body,
            } => {
                self.expr(cond, ScalarType::Bool, "the condition of `if`", s.loc);
                self.block(then_body);
                self.block(else_body);
            }
            KStmtKind::Inst { op, args } => self.inst(*op, args, s.loc),
        }
    }

    fn inst(&mut self, op: TileOp, args: &[InstArg], loc: Loc) {
        let kinds = op.operands();
        let required = kinds.iter().filter(|k| **k != Operand::OptInt).count();
        let mn = op.mnemonic();
        if args.len() < required || args.len() > kinds.len() {
            let range = if required == kinds.len() {
                format!("{required}")
            } else {
                format!("{required} to {}", kinds.len())
            };
            self.push(
                format!("{mn} takes {range} operands, {} given", args.len()),
                loc,
            );
            return;
        }
        let mut tiles: Vec<TileDecl> = Vec::new();
        let mut global: Option<(Access, DType, String)> = None;
        for (i, (kind, a)) in kinds.iter().zip(args).enumerate() {
            let n = i + 1;
            match kind {
                Operand::Dst | Operand::Src => {
                    match a {
                        InstArg::Name(id) => {
                            match self.lookup(&id.name) {
                                Some(Local::Tile(t)) => tiles.push(t.clone()),
                                _ => {
                                    self.push(format!("{mn} operand {n}: `{}` is not a tile declared in the body", id.name), loc);
                                    return;
                                }
                            }
                        }
                        InstArg::Expr(_) => {
                            self.push(format!("{mn} operand {n} must be a tile"), loc);
                            return;
                        }
                    }
                }
                Operand::Global => {
                    match a {
                        InstArg::Name(id) => match self.param(&id.name) {
                            Some(ParamKind::Tile { access, dtype, .. }) => {
                                global = Some((*access, *dtype, id.name.clone()));
                            }
                            _ => {
                                self.push(format!("{mn} operand {n}: `{}` is not a tile parameter of the kernel", id.name), loc);
                                return;
                            }
                        },
                        InstArg::Expr(_) => {
                            self.push(format!("{mn} operand {n} must be a tile parameter"), loc);
                            return;
                        }
                    }
                }
                Operand::Float => match a {
                    InstArg::Expr(Expr::Float(_)) => {}
                    InstArg::Name(id) if matches!(self.param(&id.name), Some(ParamKind::Scalar(t)) if t.is_float()) =>
                        {}
                    _ => self.push(
                        format!(
                            "{mn} operand {n} must be a float literal or an f32 / f64 parameter"
                        ),
                        loc,
                    ),
                },
                Operand::CmpMode => match a {
                    InstArg::Name(id) if crate::tile_isa::CMP_MODES.contains(&id.name.as_str()) => {
                    }
                    _ => self.push(
                        format!(
                            "{mn} operand {n} must be a comparison mode ({})",
                            crate::tile_isa::CMP_MODES.join(", ")
                        ),
                        loc,
                    ),
                },
                Operand::OptInt => {
                    let e = match a {
                        InstArg::Name(id) => Expr::Name(id.clone()),
                        InstArg::Expr(e) => e.clone(),
                    };
                    self.expr(&e, ScalarType::I64, &format!("{mn} operand {n}"), loc);
                }
            }
        }
        self.shapes(op, &tiles, global, loc);
    }

    fn shapes(
        &mut self,
        op: TileOp,
        t: &[TileDecl],
        global: Option<(Access, DType, String)>,
        loc: Loc,
    ) {
        let mn = op.mnemonic();
        let why = match op.shape_rule() {
            ShapeRule::Same | ShapeRule::Convert => same_rule(op, t),
            ShapeRule::RowReduce | ShapeRule::RowExpand => vector_rule(op, t),
            ShapeRule::Transpose => transpose_rule(t),
            ShapeRule::ColReduce => col_reduce_rule(t),
            ShapeRule::RowExpandBinary | ShapeRule::ColExpandBinary => expand_binary_rule(op, t),
            ShapeRule::Matmul => matmul_rule(t),
            ShapeRule::Load | ShapeRule::Store => match global {
                Some(g) => global_rule(op, t, g),
                None => return,
            },
        };
        for why in why {
            self.push(format!("{mn}: {why}"), loc);
        }
    }
}

/// How a tile is described in a shape error.
fn shape(x: &TileDecl) -> String {
    format!("`{}` is {} x {}", x.name, x.rows, x.cols)
}

fn same(a: &TileDecl, b: &TileDecl) -> bool {
    a.rows == b.rows && a.cols == b.cols
}

/// `Same` / `Convert`: every operand the destination's shape (and, for `Same`, element type).
fn same_rule(op: TileOp, t: &[TileDecl]) -> Vec<String> {
    let mut out = Vec::new();
    for x in &t[1..] {
        if !same(&t[0], x) {
            out.push(format!(
                "{} but {}: operands must have the same shape",
                shape(&t[0]),
                shape(x)
            ));
        }
        if op.shape_rule() == ShapeRule::Same && x.dtype != t[0].dtype {
            out.push(format!(
                "`{}` is {} but `{}` is {}: operands must have the same element type",
                t[0].name, t[0].dtype, x.name, x.dtype
            ));
        }
    }
    out
}

/// `RowReduce` / `RowExpand`: the vector operand is `rows x 1` of the full one.
fn vector_rule(op: TileOp, t: &[TileDecl]) -> Vec<String> {
    let mut out = Vec::new();
    let (v, full) = if op.shape_rule() == ShapeRule::RowReduce {
        (&t[0], &t[1])
    } else {
        (&t[1], &t[0])
    };
    if v.rows != full.rows || v.cols != 1 {
        out.push(format!(
            "{} and {}: `{}` must be {} x 1",
            shape(full),
            shape(v),
            v.name,
            full.rows
        ));
    }
    out
}

/// `Transpose`: the destination is the source's shape transposed.
fn transpose_rule(t: &[TileDecl]) -> Vec<String> {
    let mut out = Vec::new();
    if t[0].rows != t[1].cols || t[0].cols != t[1].rows {
        out.push(format!(
            "{} and {}: `{}` must be {} x {}",
            shape(&t[1]),
            shape(&t[0]),
            t[0].name,
            t[1].cols,
            t[1].rows
        ));
    }
    out
}

/// `ColReduce`: the destination is `1 x cols` of the source.
fn col_reduce_rule(t: &[TileDecl]) -> Vec<String> {
    let mut out = Vec::new();
    if t[0].cols != t[1].cols || t[0].rows != 1 {
        out.push(format!(
            "{} and {}: `{}` must be 1 x {}",
            shape(&t[1]),
            shape(&t[0]),
            t[0].name,
            t[1].cols
        ));
    }
    out
}

/// `RowExpandBinary` / `ColExpandBinary`: operands 1 and 2 alike, operand 3 a column or a row.
fn expand_binary_rule(op: TileOp, t: &[TileDecl]) -> Vec<String> {
    let mut out = Vec::new();
    if !same(&t[0], &t[1]) {
        out.push(format!(
            "{} but {}: operands 1 and 2 must have the same shape",
            shape(&t[0]),
            shape(&t[1])
        ));
    }
    let (r, c) = if op.shape_rule() == ShapeRule::RowExpandBinary {
        (t[0].rows, 1)
    } else {
        (1, t[0].cols)
    };
    if t[2].rows != r || t[2].cols != c {
        out.push(format!(
            "{}: `{}` must be {r} x {c}",
            shape(&t[2]),
            t[2].name
        ));
    }
    out
}

/// `Matmul`: `c M x N`, `a M x K`, `b K x N`, of the accumulator, left and right kinds, `c` f32.
fn matmul_rule(t: &[TileDecl]) -> Vec<String> {
    let mut out = Vec::new();
    let (c, a, b) = (&t[0], &t[1], &t[2]);
    if a.cols != b.rows || c.rows != a.rows || c.cols != b.cols {
        out.push(format!(
            "{}, {} and {}: need c M x N, a M x K, b K x N",
            shape(c),
            shape(a),
            shape(b)
        ));
    }
    for (x, kind) in [
        (c, TileKind::Acc),
        (a, TileKind::Left),
        (b, TileKind::Right),
    ] {
        if x.kind != kind {
            out.push(format!(
                "`{}` is a {} tile, this operand must be {}",
                x.name, x.kind, kind
            ));
        }
    }
    if c.dtype != DType::F32 {
        out.push(format!(
            "accumulator `{}` must be f32, not {}",
            c.name, c.dtype
        ));
    }
    out
}

/// `Load` / `Store`: the global parameter's access allows it and its element type is the tile's.
fn global_rule(
    op: TileOp,
    t: &[TileDecl],
    (access, dtype, name): (Access, DType, String),
) -> Vec<String> {
    let mut out = Vec::new();
    let load = op.shape_rule() == ShapeRule::Load;
    if load && !access.reads() {
        out.push(format!(
            "`{name}` is `{access}`: only `in` / `inout` parameters can be loaded"
        ));
    }
    if !load && !access.writes() {
        out.push(format!(
            "`{name}` is `{access}`: only `out` / `inout` parameters can be stored to"
        ));
    }
    if dtype != t[0].dtype {
        out.push(format!(
            "`{name}` holds {dtype} but tile `{}` is {}: use TCVT on the tile",
            t[0].name, t[0].dtype
        ));
    }
    out
}
