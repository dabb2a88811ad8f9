//! CPU execution of kernels written in tile instructions (`pto_wsp_ir::kernel_body`).
//!
//! Why: a module's own kernels must run in `pto-wsp run` next to the built-ins, and about as
//! fast. [`register_bodies`] registers every kernel of a module that has a body as an ordinary
//! registry kernel whose cost is the per-instruction cycle model
//! (`pto_wsp_ir::kernel_body::body_cycles`).
//!
//! How: a body is resolved once, when it is registered (`pto_wsp_ir::resolve::body`: every
//! name of a scalar an index into a flat array of values, every integer expression
//! [`Compiled`]), then lowered into a `Program`: every tile gets a slot of a per-worker scratch,
//! and every instruction becomes a step whose operands are slot numbers. Three sequences are fused: `TROWEXPANDSUB;
//! TEXP; TROWSUM` into one `exp` pass, `TTRANS; TMATMUL` (the transposed tile used nowhere
//! else) into a product with the transposed operand, `TMUL(q, x, x); TROWSUM` (`q` used nowhere
//! else) into sums of squares; each runs as its instructions when the valid sizes of a task do
//! not allow it. A `TLOAD` of a tile that products read row by row, from a region the kernel
//! does not write, leaves the tile in the region (the product reads its rows there; any other
//! use copies it first). Running a task evaluates only what depends on its scalars and loop
//! variables, and runs each instruction as one loop over the valid part of its tiles:
//! `exp`, row maxima and small matrix products are the [`crate::fast`] loops of the built-ins,
//! larger products `gemm`, and the element-wise loops are compiled for AVX2 too (chosen per task
//! when the CPU has it). Nothing is allocated per task once a worker's scratch has grown to the
//! kernel's tiles.
//!
//! Promise: each instruction computes in `f32` (tiles of `f16` / `bf16` are rounded to their
//! type after every write, as the device stores them); tiles live in a per-thread scratch reused
//! from task to task (it grows, it is not freed). A task's tile parameters are its regions in
//! order, seen as rows × cols; a load or store outside a region is a [`KernelError::Shape`],
//! never a panic. Numerics, where they differ from one correctly rounded `f32` operation per
//! element (see `docs/KERNELS.md`, "Accuracy"): `TEXP` is [`crate::fast::exp_sum`]'s `exp`
//! (within 2e-7 relative); `TROWSUM` / `TCOLSUM` and matrix products accumulate in `f32` in the
//! order of their vector loops (eight partial sums; `fast::pv` or `gemm` with fused
//! multiply-adds), within `n · 2^-24` of the sum of magnitudes; the fused steps sum in the
//! order of `exp_sum`, `fast::qk` and `fast::dot` (a square is not rounded before it is
//! added).

use crate::builtins::matmul::{SKINNY, SKINNY_BLOCK, gemm_f32};
use crate::context::TaskContext;
use crate::fast;
use crate::registry::{KernelError, KernelRegistry};
use crate::tile::{Float, FloatRead, FloatWrite};
use half::{bf16, f16};
#[cfg(doc)]
use pto_wsp_ir::eval::Compiled;
use pto_wsp_ir::kernel_body::cycles;
use pto_wsp_ir::resolve::body::{
    Arg, Body, BodyKind, BodyStmt, FloatVal, IntExpr, MsgPart, TileRef, resolve_body,
};
use pto_wsp_ir::value::Value;
use pto_wsp_ir::{DType, KernelDecl, Module, Operand, ScalarType, TileOp};
use std::cell::RefCell;
use std::sync::Arc;

mod special;

/// Registers every kernel of `module` that has a body (replacing any kernel of that name).
/// Returns the names registered.
pub fn register_bodies(module: &Module, registry: &mut KernelRegistry) -> Vec<String> {
    let mut names = Vec::new();
    for k in module.kernels.iter().filter(|k| k.body.is_some()) {
        let prepared = Arc::new(Prepared::new(k.clone()));
        let run = prepared.clone();
        registry.register(&k.name.name, move |ctx| run.run(ctx));
        registry.set_cost(&k.name.name, move |ctx| {
            let dims: Vec<(u64, u64)> = (0..ctx.num_regions())
                .map(|i| ctx.dims(i).map_or((0, 0), |(r, c)| (r as u64, c as u64)))
                .collect();
            match &prepared.body {
                Ok(body) => cycles(body, ctx.params(), &dims).unwrap_or(0),
                Err(_) => 0,
            }
        });
        names.push(k.name.name.clone());
    }
    names
}

/// Runs `k`'s body on `ctx`, lowering it first (registered kernels are lowered once).
pub fn run_body(k: &KernelDecl, ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    Prepared::new(k.clone()).run(ctx)
}

/// A kernel, its resolved and its lowered body (or why it could not be resolved or lowered,
/// reported by every task).
struct Prepared {
    decl: KernelDecl,
    body: Result<Body, String>,
    program: Result<Program, String>,
}

impl Prepared {
    fn new(decl: KernelDecl) -> Prepared {
        let body = resolve_body(&decl).map_err(|e| e.to_string());
        let program = body.as_ref().map_err(Clone::clone).and_then(Program::lower);
        Prepared {
            decl,
            body,
            program,
        }
    }

    fn run(&self, ctx: &TaskContext<'_>) -> Result<(), KernelError> {
        match &self.program {
            Ok(p) => p.run(ctx),
            Err(m) => Err(KernelError::shape(&self.decl.name.name, m.clone())),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The lowered form

/// A tile declaration: its slot is its index in [`Program::tiles`] (an array of `n` tiles takes
/// `n` consecutive slots).
struct TileInfo {
    name: String,
    rows: usize,
    cols: usize,
    dtype: DType,
}

impl TileInfo {
    /// Whether the tile holds integers (kept in the integer scratch, [`Pool::itiles`]).
    fn int(&self) -> bool {
        self.dtype.is_integer()
    }
}

/// A float operand: a literal, a float scalar parameter or local (its float slot: scalar
/// parameters by index among the scalar parameters, then locals), or an integer expression
/// converted (`f32(EXPR)`) or inverted (`rsqrt(EXPR)`).
enum Scalar {
    Const(f32),
    Param(usize),
    OfInt(IntExpr),
    InvSqrt(IntExpr),
}

/// A `TCMP` / `TCMPS` mode.
#[derive(Clone, Copy)]
enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// Element `index` of a tile array of `len` tiles starting at the operand's slot.
struct ArrayIndex {
    index: IntExpr,
    len: usize,
}

/// One instruction with its operands resolved.
struct Inst {
    op: TileOp,
    /// Tile operands (destination and sources) in operand order: the slot, or the first slot
    /// of an array whose element [`Inst::ix`] names.
    t: [usize; 4],
    /// The element index of array operands.
    ix: [Option<ArrayIndex>; 4],
    /// The region of a `TLOAD` / `TSTORE` / `TSTOREADD`.
    region: usize,
    /// Row and column offsets of a load or store.
    at: [Option<IntExpr>; 2],
    /// The required integer operands, in order (`TCI` start, `TTRI` diagonal, `TMRGSORT`
    /// block length, `SETVAL` row, column and value).
    ints: Vec<IntExpr>,
    scalar: Scalar,
    cmp: Cmp,
    /// The `TTRI` (0 lower, 1 upper) or `TFILLPAD` (0 zero, 1 min, 2 max) word.
    mode: u8,
    /// A `TLOAD` into an `f32` tile that products read by rows, from a region the kernel does not
    /// write: it may leave the tile in the region (see [`Task::materialize`]).
    lazy: bool,
}

impl Inst {
    /// Whether an operand names an array element (such instructions are never fused).
    fn indexed(&self) -> bool {
        self.ix.iter().any(Option::is_some)
    }
}

/// A statement of the lowered body.
enum Step {
    /// A tile declaration: sets the valid rows × cols of its `count` slots from `tile` on.
    Tile {
        tile: usize,
        count: usize,
        valid: Option<(IntExpr, IntExpr)>,
    },
    /// `let`: sets a value slot.
    Let { slot: usize, value: IntExpr },
    /// `let NAME: f32`: sets a float slot.
    LetFloat { slot: usize, value: Scalar },
    /// A counted loop over a value slot.
    For {
        slot: usize,
        count: IntExpr,
        body: Vec<Step>,
    },
    /// `if`.
    If {
        cond: IntExpr,
        then_body: Vec<Step>,
        else_body: Vec<Step>,
    },
    /// `check COND else "MESSAGE"`.
    Check {
        cond: IntExpr,
        message: Vec<MsgPart>,
    },
    /// `let NAME: i64 = GETVAL(TILE, ROW, COL)`: sets a value slot.
    GetVal {
        slot: usize,
        tile: usize,
        ix: Option<ArrayIndex>,
        row: IntExpr,
        col: IntExpr,
    },
    /// One instruction.
    Inst(Box<Inst>),
    /// `TROWEXPANDSUB(x, x, m); TEXP(x, x); TROWSUM(l, x)` on `f32` tiles: one pass per row of
    /// `fast::exp_sum`. Runs as the three instructions when `l`'s valid rows differ from `x`'s.
    ExpSum {
        x: usize,
        m: usize,
        l: usize,
        parts: Vec<Step>,
    },
    /// `TTRANS(t, s); TMATMUL(c, a, t)` with `t` used nowhere else, on `f32` tiles: `c = a · sᵀ`
    /// by `fast::qk`, with no transpose. Runs as the two instructions when `a`'s valid columns
    /// exceed `t`'s valid rows or `a`'s valid part is not contiguous.
    MatmulT {
        c: usize,
        a: usize,
        s: usize,
        t: usize,
        parts: Vec<Step>,
    },
    /// `TMUL(q, x, x); TROWSUM(l, q)` with `q` used nowhere else, on `f32` tiles: each row's sum
    /// of squares by `fast::dot`. Runs as the two instructions when `l` has more valid rows than
    /// `q`.
    SumSq {
        l: usize,
        x: usize,
        q: usize,
        parts: Vec<Step>,
    },
}

/// A kernel body lowered for execution (see the module docs).
struct Program {
    kernel: String,
    tiles: Vec<TileInfo>,
    /// Scalar parameters in order: name, and carrier type or `None` for a float one.
    scalars: Vec<(String, Option<ScalarType>)>,
    /// Number of value slots: the scalar parameters, the extents of every tile parameter, then
    /// every `let`, `GETVAL` and loop variable.
    values: usize,
    /// Number of float slots: the scalar parameters, then every float local.
    floats: usize,
    /// Whether each tile parameter (region) may be written.
    regions: Vec<bool>,
    /// The value slots of `rows(x)` and `cols(x)` of each tile parameter.
    extents: Vec<(usize, usize)>,
    body: Vec<Step>,
}

/// The lowering of a resolved body: its tile declarations expanded into slots.
struct Lower<'b> {
    body: &'b Body,
    /// The first slot of each tile declaration (an array takes consecutive slots).
    first: Vec<usize>,
    tiles: Vec<TileInfo>,
}

impl Program {
    fn lower(b: &Body) -> Result<Program, String> {
        let (mut first, mut tiles) = (Vec::new(), Vec::new());
        for t in &b.tiles {
            first.push(tiles.len());
            let d = &t.decl;
            for i in 0..t.count() {
                tiles.push(TileInfo {
                    name: match d.count {
                        Some(_) => format!("{}[{i}]", d.name.name),
                        None => d.name.name.clone(),
                    },
                    rows: d.rows as usize,
                    cols: d.cols as usize,
                    dtype: d.dtype,
                });
            }
        }
        let lw = Lower {
            body: b,
            first,
            tiles,
        };
        let regions: Vec<bool> = b.regions.iter().map(|r| r.access.writes()).collect();
        let mut body = lw.block(&b.stmts)?;
        let mut uses = vec![0; lw.tiles.len()];
        count_uses(&body, &mut uses);
        fuse(&mut body, &lw.tiles, &uses);
        let mut by_rows = vec![false; lw.tiles.len()];
        read_by_rows(&body, &mut by_rows);
        mark_lazy(&mut body, &by_rows, &lw.tiles, &regions);
        Ok(Program {
            kernel: b.kernel.clone(),
            tiles: lw.tiles,
            scalars: b
                .scalars
                .iter()
                .map(|p| (p.name.clone(), (!p.ty.is_float()).then(|| p.ty.carrier())))
                .collect(),
            values: b.values.len(),
            floats: b.floats.len(),
            regions,
            extents: b
                .regions
                .iter()
                .map(|r| (r.extents.0 as usize, r.extents.1 as usize))
                .collect(),
            body,
        })
    }
}

impl Lower<'_> {
    fn block(&self, body: &[BodyStmt]) -> Result<Vec<Step>, String> {
        body.iter().map(|s| self.stmt(&s.kind)).collect()
    }

    /// The slot (or first slot and element index) a tile operand names.
    fn tile_arg(&self, a: &TileRef) -> (usize, Option<ArrayIndex>) {
        let t = a.tile as usize;
        let ix = a.index.as_ref().map(|e| ArrayIndex {
            index: e.clone(),
            len: self.body.tiles[t].count(),
        });
        (self.first[t], ix)
    }

    fn stmt(&self, s: &BodyKind) -> Result<Step, String> {
        Ok(match s {
            BodyKind::Tile { tile, valid } => Step::Tile {
                tile: self.first[*tile as usize],
                count: self.body.tiles[*tile as usize].count(),
                valid: valid.clone(),
            },
            BodyKind::Let { slot, value } => Step::Let {
                slot: *slot as usize,
                value: value.clone(),
            },
            BodyKind::GetVal {
                slot,
                tile,
                row,
                col,
            } => {
                let (tile, ix) = self.tile_arg(tile);
                Step::GetVal {
                    slot: *slot as usize,
                    tile,
                    ix,
                    row: row.clone(),
                    col: col.clone(),
                }
            }
            BodyKind::LetFloat { slot, value } => Step::LetFloat {
                slot: *slot as usize,
                value: scalar_of(value),
            },
            BodyKind::Check { cond, message } => Step::Check {
                cond: cond.clone(),
                message: message.clone(),
            },
            BodyKind::For { slot, count, body } => Step::For {
                slot: *slot as usize,
                count: count.clone(),
                body: self.block(body)?,
            },
            BodyKind::If {
                cond,
                then_body,
                else_body,
            } => Step::If {
                cond: cond.clone(),
                then_body: self.block(then_body)?,
                else_body: self.block(else_body)?,
            },
            BodyKind::Inst { op, args } => Step::Inst(Box::new(self.inst(*op, args)?)),
        })
    }

    fn inst(&self, op: TileOp, args: &[Arg]) -> Result<Inst, String> {
        let m = op.mnemonic();
        let mut inst = Inst {
            op,
            t: [usize::MAX; 4],
            ix: [None, None, None, None],
            region: 0,
            at: [None, None],
            ints: Vec::new(),
            scalar: Scalar::Const(0.0),
            cmp: Cmp::Eq,
            mode: 0,
            lazy: false,
        };
        let (mut nt, mut nat) = (0, 0);
        for (i, (kind, arg)) in op.operands().iter().zip(args).enumerate() {
            let bad = || format!("{m}: operand {} is not a {kind:?} operand", i + 1);
            match (kind, arg) {
                (Operand::Dst | Operand::Src, Arg::Tile(t)) => {
                    (inst.t[nt], inst.ix[nt]) = self.tile_arg(t);
                    nt += 1;
                }
                (Operand::Global, Arg::Region(r)) => inst.region = *r as usize,
                (Operand::Float, Arg::Float(f)) => inst.scalar = scalar_of(f),
                (Operand::CmpMode, Arg::Word(w)) => {
                    inst.cmp = match w {
                        0 => Cmp::Eq,
                        1 => Cmp::Ne,
                        2 => Cmp::Lt,
                        3 => Cmp::Le,
                        4 => Cmp::Gt,
                        _ => Cmp::Ge,
                    }
                }
                (Operand::TriMode | Operand::PadMode, Arg::Word(w)) => inst.mode = *w,
                (Operand::Int, Arg::Int(e)) => inst.ints.push(e.clone()),
                (Operand::OptInt, Arg::Int(e)) => {
                    inst.at[nat] = Some(e.clone());
                    nat += 1;
                }
                _ => return Err(bad()),
            }
        }
        self.check_shapes(&inst)?;
        Ok(inst)
    }

    /// The declared-shape relations the instruction's loops index by (the validator's shape
    /// rules; checked again here so that an unvalidated body is an error, not a panic).
    fn check_shapes(&self, i: &Inst) -> Result<(), String> {
        use pto_wsp_ir::ShapeRule as R;
        let dims = |n: usize| {
            let t = &self.tiles[i.t[n]];
            (t.rows, t.cols)
        };
        let has = |n: usize| i.t[n] != usize::MAX;
        let (d, a, b) = (dims(0), has(1).then(|| dims(1)), has(2).then(|| dims(2)));
        let int = |n: usize| self.tiles[i.t[n]].int();
        let float = |n: usize| !has(n) || !int(n);
        // Integer tiles go through the element-wise path, which checks every index: only the
        // float loops index by declared shapes.
        let ok = match i.op.shape_rule() {
            R::Load | R::Store | R::Tri | R::SetVal | R::Index => true,
            R::Same | R::Convert | R::FillPad => (1..4).all(|n| !has(n) || dims(n) == d),
            R::RowReduce => a.is_some_and(|a| a.0 == d.0),
            R::ColReduce => a.is_some_and(|a| a.1 == d.1),
            R::RowExpand => a.is_some_and(|a| a.0 == d.0),
            R::ColExpand => a.is_some_and(|a| a.1 == d.1),
            R::RowExpandBinary => a == Some(d) && b.is_some_and(|b| b.0 == d.0),
            R::ColExpandBinary => a == Some(d) && b.is_some_and(|b| b.1 == d.1),
            R::Transpose => a.is_some_and(|a| (a.1, a.0) == d),
            R::Matmul => match (a, b) {
                (Some(a), Some(b)) => {
                    a.0 == d.0 && b.1 == d.1 && a.1 == b.0 && i.t[0] != i.t[1] && i.t[0] != i.t[2]
                }
                _ => false,
            },
            R::Compare => int(0) && (1..4).all(|n| !has(n) || dims(n) == d && float(n)),
            R::Select => int(1) && (1..4).all(|n| !has(n) || dims(n) == d) && float(0),
            R::Sort32 => int(2) && float(0) && float(1),
            R::MrgSort => a == Some(d) && float(0) && float(1),
            R::SortPart => float(1),
            R::Gather | R::Scatter => int(2),
        };
        if ok {
            Ok(())
        } else {
            let names: Vec<&str> =
                i.t.iter()
                    .filter(|&&t| t != usize::MAX)
                    .map(|&t| self.tiles[t].name.as_str())
                    .collect();
            Err(format!(
                "{}: the shapes of {} do not fit its rule {:?}",
                i.op.mnemonic(),
                names.join(", "),
                i.op.shape_rule()
            ))
        }
    }
}

/// A float operand.
fn scalar_of(f: &FloatVal) -> Scalar {
    match f {
        FloatVal::Lit(v) => Scalar::Const(*v),
        FloatVal::Inf { negative } => Scalar::Const(if *negative {
            f32::NEG_INFINITY
        } else {
            f32::INFINITY
        }),
        FloatVal::Slot(i) => Scalar::Param(*i as usize),
        FloatVal::OfInt(e) => Scalar::OfInt(e.clone()),
        FloatVal::InvSqrt(e) => Scalar::InvSqrt(e.clone()),
    }
}

/// Counts, per tile, the operands that name it in the whole body (an array element operand
/// counts for every element, many times: arrays are never fused).
fn count_uses(steps: &[Step], uses: &mut [usize]) {
    for s in steps {
        match s {
            Step::Inst(i) => {
                for (n, &t) in i.t.iter().enumerate() {
                    match &i.ix[n] {
                        Some(a) => uses[t..t + a.len].iter_mut().for_each(|u| *u += 100),
                        None if t != usize::MAX => uses[t] += 1,
                        None => {}
                    }
                }
            }
            Step::For { body, .. } => count_uses(body, uses),
            Step::If {
                then_body,
                else_body,
                ..
            } => {
                count_uses(then_body, uses);
                count_uses(else_body, uses);
            }
            _ => {}
        }
    }
}

/// Marks the tiles that products read row by row: the right operand of `TMATMUL` /
/// `TMATMUL_ACC`, the transposed operand of [`Step::MatmulT`].
fn read_by_rows(steps: &[Step], out: &mut [bool]) {
    for s in steps {
        match s {
            Step::Inst(i) if matches!(i.op, TileOp::Matmul | TileOp::MatmulAcc) => match &i.ix[2] {
                Some(a) => out[i.t[2]..i.t[2] + a.len].fill(true),
                None => out[i.t[2]] = true,
            },
            Step::MatmulT { s, .. } => out[*s] = true,
            Step::For { body, .. } => read_by_rows(body, out),
            Step::If {
                then_body,
                else_body,
                ..
            } => {
                read_by_rows(then_body, out);
                read_by_rows(else_body, out);
            }
            _ => {}
        }
    }
}

/// Sets [`Inst::lazy`] on the loads of `f32` tiles read by rows from regions the kernel does not
/// write.
fn mark_lazy(steps: &mut [Step], by_rows: &[bool], tiles: &[TileInfo], writes: &[bool]) {
    for s in steps {
        match s {
            Step::Inst(i) if i.op == TileOp::Load => {
                i.lazy = !i.indexed()
                    && by_rows[i.t[0]]
                    && tiles[i.t[0]].dtype == DType::F32
                    && !writes[i.region];
            }
            Step::For { body, .. } => mark_lazy(body, by_rows, tiles, writes),
            Step::If {
                then_body,
                else_body,
                ..
            } => {
                mark_lazy(then_body, by_rows, tiles, writes);
                mark_lazy(else_body, by_rows, tiles, writes);
            }
            Step::ExpSum { parts, .. }
            | Step::MatmulT { parts, .. }
            | Step::SumSq { parts, .. } => mark_lazy(parts, by_rows, tiles, writes),
            _ => {}
        }
    }
}

/// Replaces, in every block, the instruction sequences the fused steps stand for
/// ([`Step::ExpSum`], [`Step::MatmulT`], [`Step::SumSq`]); each keeps its instructions for the
/// case it declines at run time.
fn fuse(steps: &mut Vec<Step>, tiles: &[TileInfo], uses: &[usize]) {
    let f32s = |ts: &[usize]| ts.iter().all(|&t| tiles[t].dtype == DType::F32);
    let mut i = 0;
    while i < steps.len() {
        match &mut steps[i] {
            Step::For { body, .. } => fuse(body, tiles, uses),
            Step::If {
                then_body,
                else_body,
                ..
            } => {
                fuse(then_body, tiles, uses);
                fuse(else_body, tiles, uses);
            }
            _ => {}
        }
        let inst = |k: usize| match steps.get(i + k) {
            Some(Step::Inst(x)) if !x.indexed() => Some(x),
            _ => None,
        };
        let (a, b, c) = (inst(0), inst(1), inst(2));
        let (a_op, b_op) = (a.map(|x| x.op), b.map(|x| x.op));
        let c_op = c.map(|x| x.op);
        if let (Some(a), Some(b), Some(c)) = (a, b, c)
            && (a_op, b_op, c_op)
                == (
                    Some(TileOp::RowExpandSub),
                    Some(TileOp::Exp),
                    Some(TileOp::RowSum),
                )
        {
            let (x, m, l) = (a.t[0], a.t[2], c.t[0]);
            if a.t[1] == x
                && b.t[..2] == [x, x]
                && c.t[1] == x
                && x != m
                && x != l
                && m != l
                && f32s(&[x, m, l])
            {
                let parts = steps.drain(i..i + 3).collect();
                steps.insert(i, Step::ExpSum { x, m, l, parts });
                i += 1;
                continue;
            }
        }
        if let (Some(a), Some(b)) = (a, b) {
            let fused = match (a.op, b.op) {
                (TileOp::Trans, TileOp::Matmul) => {
                    let (t, s, c, x) = (a.t[0], a.t[1], b.t[0], b.t[1]);
                    (b.t[2] == t && uses[t] == 2 && t != s && c != s && f32s(&[c, x, s])).then(
                        || Step::MatmulT {
                            c,
                            a: x,
                            s,
                            t,
                            parts: Vec::new(),
                        },
                    )
                }
                (TileOp::Mul, TileOp::RowSum) => {
                    let (q, x, l) = (a.t[0], a.t[1], b.t[0]);
                    (a.t[2] == x
                        && b.t[1] == q
                        && uses[q] == 2
                        && x != q
                        && l != x
                        && f32s(&[q, x, l]))
                    .then(|| Step::SumSq {
                        l,
                        x,
                        q,
                        parts: Vec::new(),
                    })
                }
                _ => None,
            };
            if let Some(mut step) = fused {
                let two: Vec<Step> = steps.drain(i..i + 2).collect();
                if let Step::MatmulT { parts, .. } | Step::SumSq { parts, .. } = &mut step {
                    *parts = two;
                }
                steps.insert(i, step);
            }
        }
        i += 1;
    }
}

// ---------------------------------------------------------------------------------------------
// Running a task

/// A worker's scratch, reused from task to task: tile buffers by slot, the tiles' valid rows ×
/// cols, value slots, float scalars and one buffer for instructions that need a temporary.
struct Pool {
    tiles: Vec<Vec<f32>>,
    /// Integer tiles' buffers (by slot; float tiles leave theirs empty).
    itiles: Vec<Vec<i64>>,
    valid: Vec<(usize, usize)>,
    backing: Vec<Option<(usize, At)>>,
    values: Vec<Value>,
    floats: Vec<f32>,
    tmp: Vec<f32>,
}

thread_local! {
    static POOL: RefCell<Pool> = const {
        RefCell::new(Pool {
            tiles: Vec::new(),
            itiles: Vec::new(),
            valid: Vec::new(),
            backing: Vec::new(),
            values: Vec::new(),
            floats: Vec::new(),
            tmp: Vec::new(),
        })
    };
}

/// A region's view: opened at its first load or store, kept to the end of the task (the
/// context hands out one view per region).
#[derive(Default)]
enum View<'c> {
    #[default]
    Closed,
    Read(FloatRead<'c>),
    Write(FloatWrite<'c>),
    /// A region of an integer tensor (integer tiles' loads and stores).
    Int(special::IntView<'c>),
}

impl View<'_> {
    fn dims(&self) -> (usize, usize, DType) {
        match self {
            View::Closed => (0, 0, DType::F32),
            View::Read(v) => (v.rows(), v.cols(), v.dtype()),
            View::Write(v) => (v.rows(), v.cols(), v.dtype()),
            View::Int(v) => v.dims(),
        }
    }
}

/// Views of a task with at most this many tile parameters live on the stack.
const INLINE_VIEWS: usize = 8;

impl Program {
    fn run(&self, ctx: &TaskContext<'_>) -> Result<(), KernelError> {
        POOL.with(|cell| {
            let mut pool = cell.borrow_mut();
            let pool = &mut *pool;
            if pool.tiles.len() < self.tiles.len() {
                pool.tiles.resize_with(self.tiles.len(), Vec::new);
                pool.itiles.resize_with(self.tiles.len(), Vec::new);
            }
            for ((buf, ibuf), t) in pool.tiles.iter_mut().zip(&mut pool.itiles).zip(&self.tiles) {
                if t.int() {
                    if ibuf.len() < t.rows * t.cols {
                        ibuf.resize(t.rows * t.cols, 0);
                    }
                } else if buf.len() < t.rows * t.cols {
                    buf.resize(t.rows * t.cols, 0.0);
                }
            }
            pool.valid.clear();
            pool.valid.resize(self.tiles.len(), (0, 0));
            pool.backing.clear();
            pool.backing.resize(self.tiles.len(), None);
            pool.values.clear();
            pool.values.resize(self.values, Value::I64(0));
            pool.floats.clear();
            pool.floats.resize(self.floats, 0.0);
            let params = ctx.params();
            for (i, (name, ty)) in self.scalars.iter().enumerate() {
                let Some(&raw) = params.get(i) else {
                    return Err(KernelError::shape(
                        &self.kernel,
                        format!("scalar parameter `{name}` is not given"),
                    ));
                };
                match ty {
                    None => pool.floats[i] = f64::from_bits(raw) as f32,
                    Some(ScalarType::Bool) => pool.values[i] = Value::Bool(raw != 0),
                    Some(ScalarType::I64) => pool.values[i] = Value::I64(raw as i64),
                    Some(ScalarType::U64) => pool.values[i] = Value::U64(raw),
                }
            }
            for (i, &(rs, cs)) in self.extents.iter().enumerate() {
                let (r, c) = ctx.dims(i)?;
                pool.values[rs] = Value::I64(r as i64);
                pool.values[cs] = Value::I64(c as i64);
            }
            let n = self.regions.len();
            let mut inline: [View<'_>; INLINE_VIEWS] = Default::default();
            let mut heap: Vec<View<'_>> = Vec::new();
            let views: &mut [View<'_>] = if n <= INLINE_VIEWS {
                &mut inline[..n]
            } else {
                heap.resize_with(n, View::default);
                &mut heap
            };
            let mut task = Task {
                prog: self,
                ctx,
                tiles: &mut pool.tiles,
                itiles: &mut pool.itiles,
                valid: &mut pool.valid,
                backing: &mut pool.backing,
                values: &mut pool.values,
                floats: &mut pool.floats,
                tmp: &mut pool.tmp,
                views,
                simd: fast::has_simd(),
            };
            task.steps(&self.body)
        })
    }
}

/// One task's run of a [`Program`].
struct Task<'p, 'c, 'x, 'v> {
    prog: &'p Program,
    ctx: &'c TaskContext<'x>,
    tiles: &'v mut [Vec<f32>],
    itiles: &'v mut [Vec<i64>],
    valid: &'v mut [(usize, usize)],
    /// Tiles a lazy load left in their region: the region and the part.
    backing: &'v mut [Option<(usize, At)>],
    values: &'v mut [Value],
    floats: &'v mut [f32],
    tmp: &'v mut Vec<f32>,
    views: &'v mut [View<'c>],
    simd: bool,
}

impl Task<'_, '_, '_, '_> {
    fn err(&self, message: String) -> KernelError {
        KernelError::shape(&self.prog.kernel, message)
    }

    fn eval(&self, e: &IntExpr) -> Result<Value, KernelError> {
        e.compiled
            .eval(self.values)
            .map_err(|x| self.err(format!("`{}`: {x}", e.text)))
    }

    fn int(&self, e: &IntExpr) -> Result<i64, KernelError> {
        match self.eval(e)? {
            Value::I64(v) => Ok(v),
            Value::U64(v) => Ok(v as i64),
            v => Err(self.err(format!("`{}` is {v}, not an integer", e.text))),
        }
    }

    fn cond(&self, e: &IntExpr) -> Result<bool, KernelError> {
        match self.eval(e)? {
            Value::Bool(b) => Ok(b),
            v => Err(self.err(format!("`{}` is {v}, not bool", e.text))),
        }
    }

    /// The value of a float operand.
    fn scalar(&self, s: &Scalar) -> Result<f32, KernelError> {
        Ok(match s {
            Scalar::Const(v) => *v,
            Scalar::Param(p) => self.floats[*p],
            Scalar::OfInt(e) => self.int(e)? as f32,
            Scalar::InvSqrt(e) => (1.0 / (self.int(e)? as f64).sqrt()) as f32,
        })
    }

    /// The slot of a tile operand: `tile`, or element `ix` of the array from `tile` on
    /// (bounds-checked).
    fn slot(&self, tile: usize, ix: Option<&ArrayIndex>) -> Result<usize, KernelError> {
        let Some(a) = ix else { return Ok(tile) };
        let v = self.int(&a.index)?;
        match usize::try_from(v) {
            Ok(k) if k < a.len => Ok(tile + k),
            _ => {
                let name = &self.prog.tiles[tile].name;
                let base = name.strip_suffix("[0]").unwrap_or(name);
                Err(self.err(format!(
                    "tile array `{base}`: index {v} is outside 0..{}",
                    a.len
                )))
            }
        }
    }

    /// The slots of an instruction's tile operands.
    fn slots(&self, i: &Inst) -> Result<[usize; 4], KernelError> {
        if !i.indexed() {
            return Ok(i.t);
        }
        let mut t = i.t;
        for (n, slot) in t.iter_mut().enumerate() {
            if let Some(a) = &i.ix[n] {
                *slot = self.slot(*slot, Some(a))?;
            }
        }
        Ok(t)
    }

    fn steps(&mut self, steps: &[Step]) -> Result<(), KernelError> {
        for s in steps {
            match s {
                Step::Tile { tile, count, valid } => self.tile(*tile, *count, valid.as_ref())?,
                Step::Let { slot, value } => self.values[*slot] = Value::I64(self.int(value)?),
                Step::LetFloat { slot, value } => self.floats[*slot] = self.scalar(value)?,
                Step::Check { cond, message } => {
                    if !self.cond(cond)? {
                        return Err(self.failed_check(message));
                    }
                }
                Step::GetVal {
                    slot,
                    tile,
                    ix,
                    row,
                    col,
                } => {
                    let t = self.slot(*tile, ix.as_ref())?;
                    let (r, c) = (self.int(row)?, self.int(col)?);
                    let v = self.get_value(t, r, c)?;
                    self.values[*slot] = Value::I64(v);
                }
                Step::For { slot, count, body } => {
                    for i in 0..self.int(count)?.max(0) {
                        self.values[*slot] = Value::I64(i);
                        self.steps(body)?;
                    }
                }
                Step::If {
                    cond,
                    then_body,
                    else_body,
                } => {
                    let c = self.cond(cond)?;
                    self.steps(if c { then_body } else { else_body })?;
                }
                Step::Inst(i) => {
                    let t = self.slots(i)?;
                    if special::handles(i, &t, &self.prog.tiles) {
                        self.special(i, t)?;
                    } else if matches!(i.op, TileOp::Load | TileOp::Store) {
                        self.load_store(i, t)?;
                    } else {
                        self.compute(i, t)?;
                    }
                }
                Step::ExpSum { x, m, l, parts } => {
                    self.materialize(&[*x, *m, *l]);
                    if self.valid[*l].0 == self.valid[*x].0 {
                        self.exp_sum(*x, *m, *l);
                    } else {
                        self.steps(parts)?;
                    }
                }
                Step::MatmulT { c, a, s, t, parts } => {
                    self.materialize(&[*c, *a]);
                    let (m, k) = self.valid[*a];
                    let (tr, n) = self.valid[*t];
                    if k <= tr && (m <= 1 || self.prog.tiles[*a].cols == k) {
                        self.matmul_t(*c, *a, *s, (m, k, n));
                    } else {
                        self.steps(parts)?;
                    }
                }
                Step::SumSq { l, x, q, parts } => {
                    self.materialize(&[*l, *x, *q]);
                    if self.valid[*l].0 <= self.valid[*q].0 {
                        self.sum_sq(*l, *x, self.valid[*q].1);
                    } else {
                        self.steps(parts)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// A tile declaration: tiles `tile..tile + count` (an array) get their valid part, checked
    /// against the declared shape (`None`: the whole tile).
    #[inline]
    fn tile(
        &mut self,
        tile: usize,
        count: usize,
        valid: Option<&(IntExpr, IntExpr)>,
    ) -> Result<(), KernelError> {
        let t = &self.prog.tiles[tile];
        let v = match valid {
            None => (t.rows, t.cols),
            Some((r, c)) => {
                let (r, c) = (self.int(r)?, self.int(c)?);
                if r < 0 || c < 0 || r as u64 > t.rows as u64 || c as u64 > t.cols as u64 {
                    return Err(self.err(format!(
                        "tile `{}`: valid {r} x {c} is outside its {} x {}",
                        t.name, t.rows, t.cols
                    )));
                }
                (r as usize, c as usize)
            }
        };
        self.valid[tile..tile + count].fill(v);
        Ok(())
    }

    /// The error of a failed `check`: its message with the values filled in (or the error of
    /// evaluating one).
    #[cold]
    fn failed_check(&self, message: &[MsgPart]) -> KernelError {
        let mut text = String::new();
        for part in message {
            match part {
                MsgPart::Text(t) => text.push_str(t),
                MsgPart::Value(e) => match self.int(e) {
                    Ok(v) => text.push_str(&v.to_string()),
                    Err(e) => return e,
                },
            }
        }
        self.err(text)
    }

    fn offset(&self, e: &Option<IntExpr>) -> Result<usize, KernelError> {
        match e {
            None => Ok(0),
            Some(e) => {
                let v = self.int(e)?;
                usize::try_from(v).map_err(|_| self.err(format!("negative offset {v}")))
            }
        }
    }

    fn load_store(&mut self, i: &Inst, slots: [usize; 4]) -> Result<(), KernelError> {
        let load = i.op == TileOp::Load;
        let t = slots[0];
        if load {
            self.backing[t] = None;
        } else {
            self.materialize(&[t]);
        }
        let (vr, vc) = self.valid[t];
        let (r0, c0) = (self.offset(&i.at[0])?, self.offset(&i.at[1])?);
        let ri = i.region;
        let ctx = self.ctx;
        match (&self.views[ri], load) {
            (View::Write(_), _) | (View::Read(_), true) => {}
            (View::Closed, true) if !self.prog.regions[ri] => {
                self.views[ri] = View::Read(ctx.read_float(ri)?);
            }
            _ => self.views[ri] = View::Write(ctx.write_float(ri)?),
        }
        let (rows, cols, dtype) = self.views[ri].dims();
        let outside =
            |start: usize, n: usize, end: usize| start.checked_add(n).is_none_or(|e| e > end);
        if outside(r0, vr, rows) || outside(c0, vc, cols) {
            return Err(self.err(format!(
                "{}: {vr} x {vc} at ({r0}, {c0}) is outside region {ri} ({rows} x {cols})",
                i.op.mnemonic()
            )));
        }
        let at = (r0, c0, vr, vc);
        if i.lazy && matches!(self.views[ri], View::Read(FloatRead::F32(_))) {
            self.backing[t] = Some((ri, at));
            return Ok(());
        }
        let info = &self.prog.tiles[t];
        let (buf, tc) = (&mut self.tiles[t], info.cols);
        match (&mut self.views[ri], load) {
            (View::Read(FloatRead::F32(v)), true) => copy_in_f32(|r| v.row(r), at, buf, tc),
            (View::Read(FloatRead::F16(v)), true) => copy_in(|r| v.row(r), at, buf, tc),
            (View::Read(FloatRead::Bf16(v)), true) => copy_in(|r| v.row(r), at, buf, tc),
            (View::Write(FloatWrite::F32(v)), true) => copy_in_f32(|r| v.row(r), at, buf, tc),
            (View::Write(FloatWrite::F16(v)), true) => copy_in(|r| v.row(r), at, buf, tc),
            (View::Write(FloatWrite::Bf16(v)), true) => copy_in(|r| v.row(r), at, buf, tc),
            (View::Write(FloatWrite::F32(v)), false) => {
                for r in 0..vr {
                    copy(
                        &mut v.row_mut(r0 + r)[c0..c0 + vc],
                        &buf[r * tc..r * tc + vc],
                    );
                }
            }
            (View::Write(FloatWrite::F16(v)), false) => copy_out(v, at, buf, tc),
            (View::Write(FloatWrite::Bf16(v)), false) => copy_out(v, at, buf, tc),
            _ => unreachable!("the view was opened for this access above"),
        }
        if load && info.dtype != DType::F32 && info.dtype != dtype {
            round_rows(info.dtype, buf, tc, vr, vc);
        }
        Ok(())
    }

    /// Runs a vector or matrix instruction (compiled for AVX2 when the CPU has it).
    fn compute(&mut self, i: &Inst, t: [usize; 4]) -> Result<(), KernelError> {
        let scalar = self.scalar(&i.scalar)?;
        let product = matches!(i.op, TileOp::Matmul | TileOp::MatmulAcc);
        // The right operand of a product may stay in its region when the product streams its
        // rows (`fast::pv`) and reads only rows and columns the load covered.
        let mut b_view = None;
        if product && let Some((ri, at)) = self.backing[t[2]] {
            let ((m, k), n) = (self.valid[t[1]], self.valid[t[2]].1);
            let dc = self.prog.tiles[t[0]].cols;
            if m <= SKINNY && (m == 1 || n == dc) && k <= at.2 && n <= at.3 {
                b_view = Some((ri, at));
            }
        }
        let lazy = |n: usize, t: usize| t != usize::MAX && !(n == 2 && b_view.is_some());
        if t.iter()
            .enumerate()
            .any(|(n, &t)| lazy(n, t) && self.backing[t].is_some())
        {
            for (n, &t) in t.iter().enumerate() {
                if lazy(n, t) {
                    self.materialize(&[t]);
                }
            }
        }
        let d = t[0];
        let mut dst = std::mem::take(&mut self.tiles[d]);
        let c = Compute {
            i,
            t,
            scalar,
            tiles: self.tiles,
            info: &self.prog.tiles,
            valid: self.valid,
            b_view: b_view.and_then(|(ri, at)| match &self.views[ri] {
                View::Read(FloatRead::F32(v)) => Some((v, at)),
                _ => None,
            }),
        };
        #[cfg(target_arch = "x86_64")]
        if self.simd {
            // SAFETY: `simd` is `fast::has_simd()`: the CPU has AVX2 and FMA.
            unsafe { compute_avx2(&c, &mut dst, self.tmp) };
            self.tiles[d] = dst;
            return Ok(());
        }
        compute_plain(&c, &mut dst, self.tmp);
        self.tiles[d] = dst;
        Ok(())
    }

    /// [`Step::ExpSum`]: per valid row of `x`, `x = exp(x - m[r][0])` and `l[r][..] = Σ x`.
    fn exp_sum(&mut self, x: usize, m: usize, l: usize) {
        let info = &self.prog.tiles;
        let (xc, mc, lc) = (info[x].cols, info[m].cols, info[l].cols);
        let ((vr, vc), lvc) = (self.valid[x], self.valid[l].1);
        let mut xt = std::mem::take(&mut self.tiles[x]);
        let mut lt = std::mem::take(&mut self.tiles[l]);
        let mt = &self.tiles[m];
        for r in 0..vr {
            let s = fast::exp_sum(&mut xt[r * xc..r * xc + vc], mt[r * mc]);
            lt[r * lc..r * lc + lvc].fill(s);
        }
        self.tiles[x] = xt;
        self.tiles[l] = lt;
    }

    /// Copies tiles a lazy load left in their region into their scratch buffers.
    fn materialize(&mut self, tiles: &[usize]) {
        for &t in tiles {
            if self.backing[t].is_none() {
                continue;
            }
            if let Some((ri, at)) = self.backing[t].take()
                && let View::Read(FloatRead::F32(v)) = &self.views[ri]
            {
                copy_in_f32(
                    |r| v.row(r),
                    at,
                    &mut self.tiles[t],
                    self.prog.tiles[t].cols,
                );
            }
        }
    }

    /// [`Step::MatmulT`]: `c = a · sᵀ` over `m × n`, inner dimension `k` (`a`'s valid part is
    /// contiguous: checked by the caller). `s`'s rows are read in its region if a lazy load left
    /// it there and covered them.
    fn matmul_t(&mut self, c: usize, a: usize, s: usize, (m, k, n): (usize, usize, usize)) {
        if let Some((_, (_, _, vr, vc))) = self.backing[s]
            && (n > vr || k > vc)
        {
            self.materialize(&[s]);
        }
        let info = &self.prog.tiles;
        let (dc, sc) = (info[c].cols, info[s].cols);
        let mut ct = std::mem::take(&mut self.tiles[c]);
        let (at, st) = (&self.tiles[a], &self.tiles[s]);
        let lazy = self.backing[s].and_then(|(ri, (r0, c0, _, _))| match &self.views[ri] {
            View::Read(FloatRead::F32(v)) => Some((v, r0, c0)),
            _ => None,
        });
        if k == 0 {
            (0..m).for_each(|r| ct[r * dc..r * dc + n].fill(0.0));
        } else if m > 0 {
            let mut rows: [&[f32]; SKINNY_BLOCK] = [&[]; SKINNY_BLOCK];
            for j0 in (0..n).step_by(SKINNY_BLOCK) {
                let jb = SKINNY_BLOCK.min(n - j0);
                for (jj, row) in rows.iter_mut().enumerate().take(jb) {
                    let j = j0 + jj;
                    *row = match lazy {
                        Some((v, r0, c0)) => &v.row(r0 + j)[c0..c0 + k],
                        None => &st[j * sc..j * sc + k],
                    };
                }
                fast::qk(&at[..m * k], k, &rows[..jb], &mut ct[j0..], dc);
            }
        }
        self.tiles[c] = ct;
    }

    /// [`Step::SumSq`]: `l[r][..] = Σ_c x[r][c]²` over `qc` columns, for `l`'s valid rows.
    fn sum_sq(&mut self, l: usize, x: usize, qc: usize) {
        let info = &self.prog.tiles;
        let (lc, xc) = (info[l].cols, info[x].cols);
        let (vr, vc) = self.valid[l];
        let mut lt = std::mem::take(&mut self.tiles[l]);
        let xt = &self.tiles[x];
        for r in 0..vr {
            let row = &xt[r * xc..r * xc + qc];
            lt[r * lc..r * lc + vc].fill(fast::dot(row, row));
        }
        self.tiles[l] = lt;
    }
}

/// `(row, col, rows, cols)` of a load or store: the region's part at (row, col).
type At = (usize, usize, usize, usize);

/// A region's part into a tile (`tc` columns).
#[inline(always)]
fn copy_in<'a, T: Float + 'a>(
    row: impl Fn(usize) -> &'a [T],
    (r0, c0, vr, vc): At,
    dst: &mut [f32],
    tc: usize,
) {
    for r in 0..vr {
        T::load(&row(r0 + r)[c0..c0 + vc], &mut dst[r * tc..r * tc + vc]);
    }
}

/// [`copy_in`] of an `f32` region, inlined ([`copy`]).
#[inline(always)]
fn copy_in_f32<'a>(
    row: impl Fn(usize) -> &'a [f32],
    (r0, c0, vr, vc): At,
    dst: &mut [f32],
    tc: usize,
) {
    for r in 0..vr {
        copy(&mut dst[r * tc..r * tc + vc], &row(r0 + r)[c0..c0 + vc]);
    }
}

/// `dst = src` (same length) in blocks of 8 copied inline: tile rows are short, and a call to
/// `memcpy` per row costs more than the copy.
#[inline(always)]
fn copy(dst: &mut [f32], src: &[f32]) {
    if src.len() >= 32 {
        dst.copy_from_slice(src);
        return;
    }
    let (mut d, mut s) = (dst.chunks_exact_mut(8), src.chunks_exact(8));
    for (d, s) in (&mut d).zip(&mut s) {
        let d: &mut [f32; 8] = d.try_into().expect("chunks of 8");
        *d = s.try_into().expect("chunks of 8");
    }
    d.into_remainder().copy_from_slice(s.remainder());
}

/// A tile's valid part (`tc` columns) into a region.
#[inline(always)]
fn copy_out<T: Float>(
    view: &mut crate::context::WriteView<'_, T>,
    (r0, c0, vr, vc): At,
    src: &[f32],
    tc: usize,
) {
    for r in 0..vr {
        T::store(
            &src[r * tc..r * tc + vc],
            &mut view.row_mut(r0 + r)[c0..c0 + vc],
        );
    }
}

/// Rounds the valid part of a tile to its element type.
fn round_rows(dtype: DType, buf: &mut [f32], cols: usize, vr: usize, vc: usize) {
    for r in 0..vr {
        let v = &mut buf[r * cols..r * cols + vc];
        match dtype {
            DType::F16 => v.iter_mut().for_each(|x| *x = f16::from_f32(*x).to_f32()),
            DType::Bf16 => v.iter_mut().for_each(|x| *x = bf16::from_f32(*x).to_f32()),
            _ => {}
        }
    }
}

/// What a vector or matrix instruction reads: the destination is lent separately (taken out of
/// `tiles`, whose slot is empty meanwhile), so a source that is the destination reads it there.
struct Compute<'a> {
    i: &'a Inst,
    /// The slots of the tile operands (array elements resolved).
    t: [usize; 4],
    scalar: f32,
    tiles: &'a [Vec<f32>],
    info: &'a [TileInfo],
    valid: &'a [(usize, usize)],
    /// The right operand of a product, left in its region by a lazy load.
    b_view: Option<(&'a crate::context::ReadView<'a, f32>, At)>,
}

impl Compute<'_> {
    /// Source operand `n` (1-based among the tile operands) and its columns, or `None` when it
    /// is the destination.
    #[inline(always)]
    fn src(&self, n: usize) -> Option<(&[f32], usize)> {
        let t = self.t[n];
        (t != self.t[0]).then(|| (&self.tiles[t][..], self.info[t].cols))
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn compute_avx2(c: &Compute<'_>, dst: &mut [f32], tmp: &mut Vec<f32>) {
    compute_with(c, dst, tmp)
}

/// [`compute_with`] for CPUs without AVX2 (a function of its own, so that its frame is not
/// set up on every call of the AVX2 path).
#[inline(never)]
fn compute_plain(c: &Compute<'_>, dst: &mut [f32], tmp: &mut Vec<f32>) {
    compute_with(c, dst, tmp)
}

/// `dst[r][c] = f(a[r][c])` over the valid rows × cols (`a` = `None`: the destination itself).
#[inline(always)]
fn map1(
    dst: &mut [f32],
    dc: usize,
    a: Option<(&[f32], usize)>,
    (vr, vc): (usize, usize),
    f: impl Fn(f32) -> f32,
) {
    for r in 0..vr {
        let o = &mut dst[r * dc..r * dc + vc];
        match a {
            Some((a, ac)) => o
                .iter_mut()
                .zip(&a[r * ac..r * ac + vc])
                .for_each(|(o, &x)| *o = f(x)),
            None => o.iter_mut().for_each(|o| *o = f(*o)),
        }
    }
}

/// `dst[r][c] = f(a[r][c], b[r][c])` over the valid rows × cols; a column stride of 0 repeats
/// row 0 (`None`: the destination itself).
#[inline(always)]
fn map2(
    dst: &mut [f32],
    dc: usize,
    a: Option<(&[f32], usize)>,
    b: Option<(&[f32], usize)>,
    (vr, vc): (usize, usize),
    f: impl Fn(f32, f32) -> f32,
) {
    for r in 0..vr {
        let o = &mut dst[r * dc..r * dc + vc];
        match (a, b) {
            (Some((a, ac)), Some((b, bc))) => o
                .iter_mut()
                .zip(&a[r * ac..r * ac + vc])
                .zip(&b[r * bc..r * bc + vc])
                .for_each(|((o, &x), &y)| *o = f(x, y)),
            (None, Some((b, bc))) => o
                .iter_mut()
                .zip(&b[r * bc..r * bc + vc])
                .for_each(|(o, &y)| *o = f(*o, y)),
            (Some((a, ac)), None) => o
                .iter_mut()
                .zip(&a[r * ac..r * ac + vc])
                .for_each(|(o, &x)| *o = f(x, *o)),
            (None, None) => o.iter_mut().for_each(|o| *o = f(*o, *o)),
        }
    }
}

/// One vector or matrix instruction on `dst` (the destination's buffer).
#[inline(always)]
fn compute_with(c: &Compute<'_>, dst: &mut [f32], tmp: &mut Vec<f32>) {
    let i = c.i;
    let d = c.t[0];
    let dc = c.info[d].cols;
    let (vr, vc) = c.valid[d];
    let s = c.scalar;
    let v = (vr, vc);
    match i.op {
        TileOp::Expands => (0..vr).for_each(|r| dst[r * dc..r * dc + vc].fill(s)),
        TileOp::Mov | TileOp::Cvt => map1(dst, dc, c.src(1), v, |x| x),
        TileOp::Trans => transpose(c, dst, tmp, dc, v),
        TileOp::Add => map2(dst, dc, c.src(1), c.src(2), v, |x, y| x + y),
        TileOp::Sub => map2(dst, dc, c.src(1), c.src(2), v, |x, y| x - y),
        TileOp::Mul => map2(dst, dc, c.src(1), c.src(2), v, |x, y| x * y),
        TileOp::Div => map2(dst, dc, c.src(1), c.src(2), v, |x, y| x / y),
        TileOp::Max => map2(dst, dc, c.src(1), c.src(2), v, f32::max),
        TileOp::Min => map2(dst, dc, c.src(1), c.src(2), v, f32::min),
        TileOp::Adds => map1(dst, dc, c.src(1), v, |x| x + s),
        TileOp::Subs => map1(dst, dc, c.src(1), v, |x| x - s),
        TileOp::Muls => map1(dst, dc, c.src(1), v, |x| x * s),
        TileOp::Divs => map1(dst, dc, c.src(1), v, |x| x / s),
        TileOp::Maxs => map1(dst, dc, c.src(1), v, |x| x.max(s)),
        TileOp::Mins => map1(dst, dc, c.src(1), v, |x| x.min(s)),
        TileOp::Relu => map1(dst, dc, c.src(1), v, |x| if x < 0.0 { 0.0 } else { x }),
        TileOp::Exp => exp_rows(c, dst, dc, v),
        TileOp::Log => map1(dst, dc, c.src(1), v, f32::ln),
        TileOp::Sqrt => map1(dst, dc, c.src(1), v, f32::sqrt),
        TileOp::Rsqrt => map1(dst, dc, c.src(1), v, |x| 1.0 / x.sqrt()),
        TileOp::Abs => map1(dst, dc, c.src(1), v, f32::abs),
        TileOp::Neg => map1(dst, dc, c.src(1), v, |x| -x),
        TileOp::Recip => map1(dst, dc, c.src(1), v, |x| 1.0 / x),
        TileOp::RowSum | TileOp::RowMax | TileOp::RowMin => row_reduce(c, dst, dc, v),
        TileOp::ColSum | TileOp::ColMax | TileOp::ColMin => col_reduce(c, dst, tmp, dc, v),
        TileOp::RowExpand => {
            for r in 0..vr {
                let x = c.src(1).map_or(dst[r * dc], |(a, ac)| a[r * ac]);
                dst[r * dc..r * dc + vc].fill(x);
            }
        }
        TileOp::RowExpandAdd
        | TileOp::RowExpandSub
        | TileOp::RowExpandMul
        | TileOp::RowExpandDiv
        | TileOp::RowExpandMax
        | TileOp::RowExpandMin
        | TileOp::RowExpandExpDif => row_expand(c, dst, dc, v),
        TileOp::ColExpand => {
            let (b, _) = c.src(1).unwrap_or((&dst[..], dc));
            let row: Vec<f32> = b[..vc].to_vec();
            (0..vr).for_each(|r| dst[r * dc..r * dc + vc].copy_from_slice(&row));
        }
        TileOp::ColExpandAdd
        | TileOp::ColExpandSub
        | TileOp::ColExpandMul
        | TileOp::ColExpandDiv
        | TileOp::ColExpandMax
        | TileOp::ColExpandMin
        | TileOp::ColExpandExpDif => col_expand(c, dst, dc, v),
        TileOp::Load | TileOp::Store => unreachable!("run by the load and store paths"),
        special::special_ops!() => unreachable!("run by `special`"),
        TileOp::Matmul | TileOp::MatmulAcc => product(c, dst),
    }
    let dtype = c.info[d].dtype;
    if dtype != DType::F32 {
        round_rows(dtype, dst, dc, vr, vc);
    }
}

/// `TEXP`: `dst[r][c] = exp(a[r][c])` over the valid rows × cols.
#[inline(always)]
fn exp_rows(c: &Compute<'_>, dst: &mut [f32], dc: usize, (vr, vc): (usize, usize)) {
    for r in 0..vr {
        let o = &mut dst[r * dc..r * dc + vc];
        if let Some((a, ac)) = c.src(1) {
            o.copy_from_slice(&a[r * ac..r * ac + vc]);
        }
        fast::exp_sum(o, 0.0);
    }
}

/// `TROWEXPAND{ADD,SUB,MUL,DIV,MAX,MIN,EXPDIF}`: each row of `a` with row `r`'s element of the
/// column `b` (`dst[r][c] = a[r][c] op b[r][0]`; `EXPDIF`: `exp(a − b)`).
#[inline(always)]
fn row_expand(c: &Compute<'_>, dst: &mut [f32], dc: usize, (vr, vc): (usize, usize)) {
    for r in 0..vr {
        let x = c.src(2).map_or(dst[r * dc], |(b, bc)| b[r * bc]);
        let a = c.src(1).map(|(a, ac)| (&a[r * ac..], ac));
        let row = &mut dst[r * dc..];
        match c.i.op {
            TileOp::RowExpandAdd => map1(row, dc, a, (1, vc), |y| y + x),
            TileOp::RowExpandSub => map1(row, dc, a, (1, vc), |y| y - x),
            TileOp::RowExpandMul => map1(row, dc, a, (1, vc), |y| y * x),
            TileOp::RowExpandDiv => map1(row, dc, a, (1, vc), |y| y / x),
            TileOp::RowExpandMax => map1(row, dc, a, (1, vc), |y| y.max(x)),
            TileOp::RowExpandMin => map1(row, dc, a, (1, vc), |y| y.min(x)),
            _ => {
                map1(row, dc, a, (1, vc), |y| y - x);
                fast::exp_sum(&mut row[..vc], 0.0);
            }
        }
    }
}

/// `TCOLEXPAND{ADD,SUB,MUL,DIV,MAX,MIN,EXPDIF}`: each row of `a` with the row `b`
/// (`dst[r][c] = a[r][c] op b[0][c]`; `EXPDIF`: `exp(a − b)`).
#[inline(always)]
fn col_expand(c: &Compute<'_>, dst: &mut [f32], dc: usize, v: (usize, usize)) {
    let (vr, vc) = v;
    let b = c.src(2).map(|(b, _)| (b, 0));
    let a = c.src(1);
    match c.i.op {
        TileOp::ColExpandAdd => map2(dst, dc, a, b, v, |x, y| x + y),
        TileOp::ColExpandSub => map2(dst, dc, a, b, v, |x, y| x - y),
        TileOp::ColExpandMul => map2(dst, dc, a, b, v, |x, y| x * y),
        TileOp::ColExpandDiv => map2(dst, dc, a, b, v, |x, y| x / y),
        TileOp::ColExpandMax => map2(dst, dc, a, b, v, f32::max),
        TileOp::ColExpandMin => map2(dst, dc, a, b, v, f32::min),
        _ => {
            map2(dst, dc, a, b, v, |x, y| x - y);
            (0..vr).for_each(|r| {
                fast::exp_sum(&mut dst[r * dc..r * dc + vc], 0.0);
            });
        }
    }
}

/// `TTRANS`: `dst[r][c] = src[c][r]` (the destination itself is copied to `tmp` first).
#[inline(always)]
fn transpose(
    c: &Compute<'_>,
    dst: &mut [f32],
    tmp: &mut Vec<f32>,
    dc: usize,
    (vr, vc): (usize, usize),
) {
    let (sv, sc) = match c.src(1) {
        Some(s) => s,
        None => {
            tmp.clear();
            tmp.extend_from_slice(dst);
            (&tmp[..], dc)
        }
    };
    // In blocks of 8 × 8, so that the strided reads stay in a few cache lines.
    for r0 in (0..vr).step_by(8) {
        for c0 in (0..vc).step_by(8) {
            for r in r0..(r0 + 8).min(vr) {
                for col in c0..(c0 + 8).min(vc) {
                    dst[r * dc + col] = sv[col * sc + r];
                }
            }
        }
    }
}

/// `TROWSUM` / `TROWMAX` / `TROWMIN`: each row's reduction over the source's valid columns,
/// filled across the destination's row.
#[inline(always)]
fn row_reduce(c: &Compute<'_>, dst: &mut [f32], dc: usize, (vr, vc): (usize, usize)) {
    let i = c.i;
    let sc = c.valid[c.t[1]].1;
    let reduce = |row: &[f32]| match i.op {
        TileOp::RowSum => crate::builtins::rows::sum(row),
        TileOp::RowMax => fast::max(row),
        _ => row.iter().copied().fold(f32::INFINITY, f32::min),
    };
    for r in 0..vr {
        let x = match c.src(1) {
            Some((a, ac)) => reduce(&a[r * ac..r * ac + sc]),
            None => reduce(&dst[r * dc..r * dc + sc]),
        };
        dst[r * dc..r * dc + vc].fill(x);
    }
}

/// `TCOLSUM` / `TCOLMAX` / `TCOLMIN`: each column's reduction over the source's valid rows,
/// copied to every destination row.
#[inline(always)]
fn col_reduce(
    c: &Compute<'_>,
    dst: &mut [f32],
    tmp: &mut Vec<f32>,
    dc: usize,
    (vr, vc): (usize, usize),
) {
    let i = c.i;
    let sr = c.valid[c.t[1]].0;
    tmp.clear();
    tmp.resize(
        vc,
        match i.op {
            TileOp::ColSum => 0.0,
            TileOp::ColMax => f32::NEG_INFINITY,
            _ => f32::INFINITY,
        },
    );
    let (a, ac) = c.src(1).unwrap_or((&dst[..], dc));
    for r in 0..sr {
        let row = &a[r * ac..r * ac + vc];
        match i.op {
            TileOp::ColSum => tmp.iter_mut().zip(row).for_each(|(t, &x)| *t += x),
            TileOp::ColMax => tmp.iter_mut().zip(row).for_each(|(t, &x)| *t = t.max(x)),
            _ => tmp.iter_mut().zip(row).for_each(|(t, &x)| *t = t.min(x)),
        }
    }
    (0..vr).for_each(|r| dst[r * dc..r * dc + vc].copy_from_slice(tmp));
}

/// `TMATMUL` / `TMATMUL_ACC` on `dst` (a function of its own: its row table would enlarge the
/// frame of every instruction).
#[inline(never)]
fn product(c: &Compute<'_>, dst: &mut [f32]) {
    let i = c.i;
    let dc = c.info[c.t[0]].cols;
    // The lowering made both sources distinct from the destination.
    let (Some((a, ac)), Some((b, bc))) = (c.src(1), c.src(2)) else {
        unreachable!("checked when lowered")
    };
    let (m, k) = c.valid[c.t[1]];
    let n = c.valid[c.t[2]].1;
    if i.op == TileOp::Matmul {
        (0..m).for_each(|r| dst[r * dc..r * dc + n].fill(0.0));
    }
    if m == 0 || n == 0 || k == 0 {
        return;
    }
    if m <= SKINNY && (m == 1 || n == dc) {
        // Few rows: stream `b`'s rows through `fast::pv`, as the built-in does.
        let acc = &mut dst[..(m - 1) * dc + n];
        let mut rows: [&[f32]; SKINNY_BLOCK] = [&[]; SKINNY_BLOCK];
        for j0 in (0..k).step_by(SKINNY_BLOCK) {
            let jb = SKINNY_BLOCK.min(k - j0);
            for (jj, row) in rows.iter_mut().enumerate().take(jb) {
                let p = j0 + jj;
                *row = match c.b_view {
                    Some((v, (r0, c0, _, _))) => &v.row(r0 + p)[c0..c0 + n],
                    None => &b[p * bc..p * bc + n],
                };
            }
            fast::pv(&a[j0..], ac, &rows[..jb], acc, n);
        }
    } else {
        // SAFETY: `a` holds the `m × k` valid part at stride `ac` (m, k within its
        // declared rows × cols), `b` the `k × n` part at stride `bc`, `dst` the `m × n`
        // part at stride `dc` (shapes checked when lowered, valid sizes when declared);
        // `dst` was taken out of the scratch, so it overlaps neither source.
        unsafe {
            gemm_f32(
                m,
                n,
                k,
                dst.as_mut_ptr(),
                dc,
                true,
                a.as_ptr(),
                ac,
                b.as_ptr(),
                bc,
                1,
            )
        };
    }
}
