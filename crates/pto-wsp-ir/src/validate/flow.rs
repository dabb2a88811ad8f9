//! Checks of kernel bodies that follow their values: a region bound at a task too small for
//! what the body loads from or stores to it, and a tile read where an `if` may have left it
//! unwritten.
//!
//! Why: both used to fail only at run time. A kernel whose tile parameter is `x: f32[?, 64]`
//! accepts a region of any rows at `check`, but its body may `TLOAD` a 16-row tile from it, or
//! store a tile whose valid rows are `rows(y)` into `x`; and a tile written in one branch of an
//! `if` and read after it holds whatever the buffer held when the other branch ran. What the
//! body does at a task follows from values known at `check` — literal extents and scalar
//! arguments, the loop counts and conditions that depend only on them — so the body is
//! *interpreted* on those values: loops with a known count run their iterations, `if`s with a
//! known condition take their branch, and what depends on anything else (a scalar the task
//! computes, a value read from a tile) is unknown and followed down both branches.
//!
//! The analyses read the resolved body ([`crate::resolve::body::Body`]: tiles, regions and
//! values as slots), never names.
//!
//! Promises:
//! - [`check_calls`]: for each task statement whose region extents are constants, every
//!   `TLOAD` / `TSTORE` the body runs at values all known must fit its region — offset plus
//!   the tile's valid rows / columns within the region's rows / columns — else a
//!   [`ValidationError::RegionTooSmall`] at the region argument, naming the instruction.
//! - [`check_unwritten`]: a read of a tile that an `if` whose condition is not known at
//!   `check` writes in only one branch, with no write on every path since, is a
//!   [`ValidationError::KernelBody`] at the read. Loops are taken to run at least once (a tile
//!   written in a loop is not reported after it), so only a one-sided `if` is reported; a tile
//!   never written at all is the surface checks' report.
//! - Nothing is reported on a path a known condition excludes (`if k == 0 { TMATMUL(c, ..) }
//!   else { TMATMUL_ACC(c, ..) }` inside `for k in range(4)` is fine), each place once, and the
//!   interpretation is bounded ([`STEP_BUDGET`]): past it a loop's iterations are followed as
//!   one iteration with an unknown variable.

use super::ValidationError;
use crate::expr::Expr;
use crate::loc::Loc;
use crate::module::{KernelDecl, Module, ParamKind};
use crate::resolve::body::{Arg, Body, BodyKind, BodyStmt, IntExpr, TileRef, resolve_body};
use crate::tile_isa::{Operand, TileOp};
use crate::value::Value;
use crate::workload::{Arg as TaskArg, Stmt, StmtKind, TaskStmt};
use std::collections::{BTreeMap, HashSet};

/// Statements one interpretation of a body may visit before loops stop running their
/// iterations one by one.
pub(super) const STEP_BUDGET: usize = 100_000;

/// Checks every task statement of `m`'s workloads and processes against its kernel's body
/// (see the module docs).
pub(super) fn check_calls(m: &Module, skip: &HashSet<String>, errors: &mut Vec<ValidationError>) {
    let mut bodies: BTreeMap<&str, Option<Body>> = BTreeMap::new();
    let mut tasks: Vec<(&TaskStmt, String)> = Vec::new();
    for w in &m.workloads {
        tasks_in(&w.body, &format!("workload {}", w.name), &mut tasks);
    }
    for p in &m.pipelines {
        for pr in &p.processes {
            tasks_in(
                &pr.body,
                &format!("pipeline {} > process {}", p.name, pr.name),
                &mut tasks,
            );
        }
    }
    for (t, path) in tasks {
        let Some(k) = m.kernels.iter().find(|k| k.name == t.kernel) else {
            continue;
        };
        let matches = k.params.len() == t.args.len()
            && k.params.iter().zip(&t.args).all(|(p, a)| {
                matches!(
                    (&p.kind, a),
                    (ParamKind::Tile { .. }, TaskArg::Region(_))
                        | (ParamKind::Scalar(_), TaskArg::Scalar(_))
                )
            });
        if k.body.is_none() || skip.contains(&k.name.name) || !matches {
            continue;
        }
        let body = bodies
            .entry(k.name.name.as_str())
            .or_insert_with(|| resolve_body(k).ok());
        if let Some(b) = body {
            check_call(m, k, b, t, &path, errors);
        }
    }
}

/// Every task statement under `body`, with its path.
fn tasks_in<'m>(body: &'m [Stmt], path: &str, out: &mut Vec<(&'m TaskStmt, String)>) {
    for s in body {
        match &s.kind {
            StmtKind::Loop { body, .. }
            | StmtKind::Select { body, .. }
            | StmtKind::While { body, .. }
            | StmtKind::Consume { body, .. }
            | StmtKind::Combine(body)
            | StmtKind::Sequential(body) => tasks_in(body, path, out),
            StmtKind::Cond {
                then_body,
                else_body,
                ..
            } => {
                tasks_in(then_body, path, out);
                tasks_in(else_body, path, out);
            }
            StmtKind::Task(t) => out.push((t, format!("{path} > task {}", t.kernel))),
            _ => {}
        }
    }
}

/// One task's regions against its kernel's loads and stores.
fn check_call(
    m: &Module,
    k: &KernelDecl,
    body: &Body,
    t: &TaskStmt,
    path: &str,
    errors: &mut Vec<ValidationError>,
) {
    let mut env = vec![None; body.values.len()];
    // Region arguments in parameter order: (rows, cols, the argument's place and text).
    let mut regions: Vec<Option<(u64, u64, Loc, String)>> = Vec::new();
    let mut scalar = 0usize;
    for (p, a) in k.params.iter().zip(&t.args) {
        match (&p.kind, a) {
            (ParamKind::Tile { .. }, TaskArg::Region(r)) => {
                let extents = region_extents(m, r);
                let i = regions.len();
                regions.push(
                    extents.map(|(rows, cols)| (rows, cols, r.tensor.loc, r.tensor.name.clone())),
                );
                if let (Some((rows, cols)), Some(rp)) = (extents, body.regions.get(i)) {
                    env[rp.extents.0 as usize] = Some(Value::I64(rows as i64));
                    env[rp.extents.1 as usize] = Some(Value::I64(cols as i64));
                }
            }
            (ParamKind::Scalar(_), TaskArg::Scalar(e)) => {
                if let Some(v) = constant(e)
                    && let Some(slot) = env.get_mut(scalar)
                {
                    *slot = Some(v);
                }
                scalar += 1;
            }
            _ => {}
        }
    }
    let mut fits = Fits {
        body,
        regions: &regions,
        kernel: &k.name.name,
        path,
        reported: HashSet::new(),
        errors,
    };
    let mut st = State::new(body, env);
    let mut steps = 0usize;
    walk(body, &body.stmts, &mut st, &mut steps, &mut fits);
}

/// A region argument's rows × cols (rows: every dimension but the last), when its extents
/// are constants.
fn region_extents(m: &Module, r: &crate::workload::Region) -> Option<(u64, u64)> {
    let sizes: Vec<u64> = if r.dims.is_empty() {
        let decl = m.tensors.iter().find(|d| d.name.name == r.tensor.name)?;
        decl.shape
            .iter()
            .map(|e| constant(e).and_then(as_u64))
            .collect::<Option<_>>()?
    } else {
        r.dims
            .iter()
            .map(|d| {
                d.size
                    .as_ref()
                    .map_or(Some(1), |e| constant(e).and_then(as_u64))
            })
            .collect::<Option<_>>()?
    };
    let (&cols, outer) = sizes.split_last()?;
    Some((outer.iter().product(), cols))
}

fn constant(e: &Expr) -> Option<Value> {
    crate::eval::eval(e, &|_: &str| None).ok()
}

fn as_u64(v: Value) -> Option<u64> {
    match v {
        Value::I64(x) => u64::try_from(x).ok(),
        Value::U64(x) => Some(x),
        Value::Bool(_) => None,
    }
}

fn as_i64(v: Value) -> Option<i64> {
    match v {
        Value::I64(x) => Some(x),
        Value::U64(x) => i64::try_from(x).ok(),
        Value::Bool(_) => None,
    }
}

/// What is known on one path through a body.
#[derive(Clone)]
struct State {
    /// Each value slot's value, when known.
    env: Vec<Option<Value>>,
    /// Each tile's valid rows and columns, when known.
    valid: Vec<Option<(i64, i64)>>,
    /// Tiles written on every path to here.
    must: Vec<bool>,
    /// Tiles written on some path to here.
    may: Vec<bool>,
    /// For a tile written on some paths only: the condition of the `if` that wrote it in one
    /// branch.
    one_sided: Vec<Option<String>>,
    /// The path ended (a `check` known to fail).
    stopped: bool,
}

impl State {
    fn new(body: &Body, env: Vec<Option<Value>>) -> State {
        let n = body.tiles.len();
        State {
            env,
            valid: vec![None; n],
            must: vec![false; n],
            may: vec![false; n],
            one_sided: vec![None; n],
            stopped: false,
        }
    }

    /// `e`'s value, when every slot it reads is known.
    fn eval(&self, e: &IntExpr) -> Option<Value> {
        let mut env: Vec<Value> = Vec::with_capacity(self.env.len());
        for s in e.slots() {
            self.env.get(*s as usize).copied().flatten()?;
        }
        env.extend(self.env.iter().map(|v| v.unwrap_or(Value::I64(0))));
        e.compiled.eval(&env).ok()
    }

    /// The state after an `if` whose branches gave `a` and `b` (`self`: before it).
    fn join(a: State, b: State, cond: &IntExpr) -> State {
        if a.stopped {
            return b;
        }
        if b.stopped {
            return a;
        }
        let mut out = a.clone();
        for (i, v) in out.env.iter_mut().enumerate() {
            if *v != b.env[i] {
                *v = None;
            }
        }
        for i in 0..out.must.len() {
            if out.valid[i] != b.valid[i] {
                out.valid[i] = None;
            }
            let (wa, wb) = (a.must[i], b.must[i]);
            out.must[i] = wa && wb;
            out.may[i] = a.may[i] || b.may[i];
            out.one_sided[i] = if wa != wb {
                Some(cond.text.to_string())
            } else if out.must[i] {
                None
            } else {
                a.one_sided[i].clone().or_else(|| b.one_sided[i].clone())
            };
        }
        out
    }
}

/// What a walk reports to.
trait Report {
    /// A load or store of `tile` (valid part known) at `offsets` from region `region`.
    fn global(
        &mut self,
        op: TileOp,
        st: &State,
        tile: &TileRef,
        region: u32,
        offsets: [Option<i64>; 2],
        loc: Loc,
    );
    /// A read of `tile`.
    fn read(&mut self, op: &str, st: &State, tile: &TileRef, loc: Loc);
}

/// Interprets `stmts` on `st` (see the module docs).
fn walk(body: &Body, stmts: &[BodyStmt], st: &mut State, steps: &mut usize, r: &mut dyn Report) {
    for s in stmts {
        if st.stopped {
            return;
        }
        *steps += 1;
        stmt(body, s, st, steps, r);
    }
}

fn stmt(body: &Body, s: &BodyStmt, st: &mut State, steps: &mut usize, r: &mut dyn Report) {
    match &s.kind {
        BodyKind::Tile { tile, valid } => {
            let i = *tile as usize;
            let d = &body.tiles[i].decl;
            st.valid[i] = match valid {
                None => Some((d.rows as i64, d.cols as i64)),
                Some((vr, vc)) => st
                    .eval(vr)
                    .and_then(as_i64)
                    .zip(st.eval(vc).and_then(as_i64)),
            };
            st.must[i] = false;
            st.may[i] = false;
            st.one_sided[i] = None;
        }
        BodyKind::Let { slot, value } => st.env[*slot as usize] = st.eval(value),
        BodyKind::LetFloat { .. } => {}
        BodyKind::GetVal { slot, tile, .. } => {
            r.read("GETVAL", st, tile, s.loc);
            st.env[*slot as usize] = None;
        }
        BodyKind::Check { cond, .. } => {
            if st.eval(cond) == Some(Value::Bool(false)) {
                st.stopped = true;
            }
        }
        BodyKind::If {
            cond,
            then_body,
            else_body,
        } => match st.eval(cond) {
            Some(Value::Bool(true)) => walk(body, then_body, st, steps, r),
            Some(Value::Bool(false)) => walk(body, else_body, st, steps, r),
            _ => {
                let mut a = st.clone();
                walk(body, then_body, &mut a, steps, r);
                let mut b = st.clone();
                walk(body, else_body, &mut b, steps, r);
                *st = State::join(a, b, cond);
            }
        },
        BodyKind::For {
            slot,
            count,
            body: inner,
        } => {
            let n = st.eval(count).and_then(as_i64);
            let mut i = 0i64;
            // Iterations one by one while the count is known and the budget lasts; then one
            // iteration standing for the rest, its variable unknown.
            loop {
                if n.is_some_and(|n| i >= n) || st.stopped {
                    return;
                }
                if i > 0 && (n.is_none() || *steps > STEP_BUDGET) {
                    break;
                }
                st.env[*slot as usize] = Some(Value::I64(i));
                walk(body, inner, st, steps, r);
                i += 1;
            }
            st.env[*slot as usize] = None;
            walk(body, inner, st, steps, r);
        }
        BodyKind::Inst { op, args } => inst(*op, args, st, s.loc, r),
    }
}

/// One instruction: its reads, its loads and stores, then its write.
fn inst(op: TileOp, args: &[Arg], st: &mut State, loc: Loc, r: &mut dyn Report) {
    let kinds = op.operands();
    let reads_dst = matches!(op, TileOp::MatmulAcc | TileOp::Scatter);
    let mut dst: Option<&TileRef> = None;
    let mut tiles: Vec<&TileRef> = Vec::new();
    let mut region: Option<u32> = None;
    let mut ints: Vec<Option<i64>> = Vec::new();
    for (kind, a) in kinds.iter().zip(args) {
        match (kind, a) {
            (Operand::Dst, Arg::Tile(t)) => {
                dst = Some(t);
                if reads_dst {
                    r.read(op.mnemonic(), st, t, loc);
                }
                tiles.push(t);
            }
            (Operand::Src, Arg::Tile(t)) => {
                r.read(op.mnemonic(), st, t, loc);
                tiles.push(t);
            }
            (Operand::Global, Arg::Region(g)) => region = Some(*g),
            (Operand::Int | Operand::OptInt, Arg::Int(e)) => ints.push(st.eval(e).and_then(as_i64)),
            _ => {}
        }
    }
    if let (Some(g), Some(t)) = (region, tiles.first())
        && matches!(op, TileOp::Load | TileOp::Store)
    {
        let off = |i: usize| ints.get(i).copied().unwrap_or(Some(0));
        r.global(op, st, t, g, [off(0), off(1)], loc);
    }
    if let Some(d) = dst {
        let i = d.tile as usize;
        // An element of an array written at an unknown index: the array counts as written.
        st.must[i] = true;
        st.may[i] = true;
        st.one_sided[i] = None;
    }
}

/// Reports loads and stores outside their region at one task.
struct Fits<'a> {
    body: &'a Body,
    regions: &'a [Option<(u64, u64, Loc, String)>],
    kernel: &'a str,
    path: &'a str,
    reported: HashSet<(u32, Loc)>,
    errors: &'a mut Vec<ValidationError>,
}

impl Report for Fits<'_> {
    fn global(
        &mut self,
        op: TileOp,
        st: &State,
        tile: &TileRef,
        region: u32,
        offsets: [Option<i64>; 2],
        loc: Loc,
    ) {
        let Some(Some((rows, cols, at, tensor))) = self.regions.get(region as usize) else {
            return;
        };
        let (Some((vr, vc)), [Some(r0), Some(c0)]) = (st.valid[tile.tile as usize], offsets) else {
            return;
        };
        let (rows, cols) = (*rows as i64, *cols as i64);
        if r0 + vr <= rows && c0 + vc <= cols || !self.reported.insert((region, loc)) {
            return;
        }
        let p = &self.body.regions[region as usize];
        let shape: Vec<String> = p
            .shape
            .iter()
            .map(|d| d.map_or_else(|| "?".to_string(), |n| n.to_string()))
            .collect();
        let decl = &self.body.tiles[tile.tile as usize].decl;
        let (verb, dir) = if op == TileOp::Load {
            ("loads", "from")
        } else {
            ("stores", "into")
        };
        self.errors.push(ValidationError::RegionTooSmall {
            kernel: self.kernel.to_string(),
            message: format!(
                "region `{tensor}[..]` bound to `{}` ({} {}: {}[{}]) is {rows} x {cols} (rows x \
                 cols), but the body's {} {verb} tile `{}` (valid {vr} x {vc}) at ({r0}, {c0}) \
                 {dir} it: it needs at least {} x {}",
                p.name,
                p.access,
                p.name,
                p.dtype,
                shape.join(", "),
                op.mnemonic(),
                decl.name.name,
                r0 + vr,
                c0 + vc
            ),
            loc: *at,
            path: self.path.to_string(),
        });
    }

    fn read(&mut self, _: &str, _: &State, _: &TileRef, _: Loc) {}
}

/// Checks `k`'s body for reads of tiles a one-sided `if` may have left unwritten (see the
/// module docs); values the task passes are unknown here.
pub(super) fn check_unwritten(k: &KernelDecl, errors: &mut Vec<ValidationError>) {
    if k.body.is_none() {
        return;
    }
    let Ok(body) = resolve_body(k) else {
        return;
    };
    let mut env = vec![None; body.values.len()];
    // A parameter's declared extents are known; a `?` is not.
    for rp in &body.regions {
        if let Some((cols, outer)) = rp.shape.split_last() {
            let rows: Option<u64> = outer.iter().copied().product();
            env[rp.extents.0 as usize] = rows.map(|n| Value::I64(n as i64));
            env[rp.extents.1 as usize] = cols.map(|n| Value::I64(n as i64));
        }
    }
    let mut reads = Reads {
        body: &body,
        kernel: &k.name.name,
        reported: HashSet::new(),
        errors,
    };
    let mut st = State::new(&body, env);
    let mut steps = 0usize;
    walk(&body, &body.stmts, &mut st, &mut steps, &mut reads);
}

/// Reports reads of tiles a one-sided `if` may have left unwritten.
struct Reads<'a> {
    body: &'a Body,
    kernel: &'a str,
    reported: HashSet<(u32, Loc)>,
    errors: &'a mut Vec<ValidationError>,
}

impl Report for Reads<'_> {
    fn global(&mut self, _: TileOp, _: &State, _: &TileRef, _: u32, _: [Option<i64>; 2], _: Loc) {}

    fn read(&mut self, op: &str, st: &State, tile: &TileRef, loc: Loc) {
        let i = tile.tile as usize;
        let Some(cond) = &st.one_sided[i] else {
            return;
        };
        if st.must[i] || !st.may[i] || !self.reported.insert((tile.tile, loc)) {
            return;
        }
        self.errors.push(ValidationError::KernelBody {
            kernel: self.kernel.to_string(),
            message: format!(
                "{op} reads tile `{}`, which may be unwritten here: the `if {cond}` before it \
                 writes it in only one branch (write it in both, or before the `if`)",
                self.body.tiles[i].decl.name.name
            ),
            loc,
            path: format!("kernel {}", self.kernel),
        });
    }
}
