//! CPU execution of kernels written in tile instructions (`pto_wsp_ir::kernel_body`).
//!
//! Why: a module's own kernels must run in `pto-wsp run` next to the built-ins. [`register_bodies`]
//! registers every kernel of a module that has a body as an ordinary registry kernel whose cost
//! is the per-instruction cycle model (`pto_wsp_ir::kernel_body::body_cycles`).
//!
//! Promise: each instruction is one loop over the valid part of its tiles, in `f32` (tiles of
//! `f16` / `bf16` are rounded to their type after every write, as the device stores them);
//! tiles live in a per-thread scratch reused from task to task (it grows, it is not freed);
//! matrix products accumulate in `f32` in `i, k, j` order. A task's tile parameters are its
//! regions in order, seen as rows × cols; a load or store outside a region is a
//! [`KernelError::Shape`], never a panic.

use crate::context::TaskContext;
use crate::registry::{KernelError, KernelRegistry};
use crate::tile::FloatWrite;
use half::{bf16, f16};
use pto_wsp_ir::kernel_body::{InstArg, KStmtKind, Walk, body_cycles};
use pto_wsp_ir::{DType, Expr, KernelDecl, Module, ParamKind, TileOp};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

/// A worker's scratch: one buffer per tile slot and row buffers for operands, all reused.
struct Pool {
    tiles: Vec<Vec<f32>>,
    a: Vec<f32>,
    b: Vec<f32>,
    io: Vec<f32>,
}

thread_local! {
    static POOL: RefCell<Pool> = const {
        RefCell::new(Pool { tiles: Vec::new(), a: Vec::new(), b: Vec::new(), io: Vec::new() })
    };
}

/// Registers every kernel of `module` that has a body (replacing any kernel of that name).
/// Returns the names registered.
pub fn register_bodies(module: &Module, registry: &mut KernelRegistry) -> Vec<String> {
    let mut names = Vec::new();
    for k in module.kernels.iter().filter(|k| k.body.is_some()) {
        let prepared = Arc::new(Prepared::new(k.clone()));
        let run = prepared.clone();
        registry.register(&k.name.name, move |ctx| run_prepared(&run, ctx));
        registry.set_cost(&k.name.name, move |ctx| {
            body_cycles(&prepared.decl, ctx.params()).unwrap_or(0)
        });
        names.push(k.name.name.clone());
    }
    names
}

/// A tile in scratch: slot, declared shape, element type.
#[derive(Clone, Copy)]
struct Tile {
    slot: usize,
    cols: usize,
    dtype: DType,
}

fn round(dtype: DType, v: &mut [f32]) {
    match dtype {
        DType::F16 => v.iter_mut().for_each(|x| *x = f16::from_f32(*x).to_f32()),
        DType::Bf16 => v.iter_mut().for_each(|x| *x = bf16::from_f32(*x).to_f32()),
        _ => {}
    }
}

/// What a kernel's body needs that does not change from task to task, computed once.
struct Prepared {
    decl: KernelDecl,
    /// Tile declarations get scratch slots.
    tiles: HashMap<String, Tile>,
    /// Elements of each slot.
    sizes: Vec<usize>,
    /// Region index of each tile parameter and whether the kernel may write it.
    region: HashMap<String, (usize, bool)>,
}

impl Prepared {
    fn new(decl: KernelDecl) -> Prepared {
        let mut tiles = HashMap::new();
        let mut sizes = Vec::new();
        collect_tiles(decl.body.as_deref().unwrap_or(&[]), &mut tiles, &mut sizes);
        let region = decl
            .params
            .iter()
            .filter_map(|p| match p.kind {
                ParamKind::Tile { access, .. } => Some((p.name.name.clone(), access.writes())),
                ParamKind::Scalar(_) => None,
            })
            .enumerate()
            .map(|(i, (n, w))| (n, (i, w)))
            .collect();
        Prepared {
            decl,
            tiles,
            sizes,
            region,
        }
    }
}

/// Runs `k`'s body on `ctx` (preparing it first; registered kernels are prepared once).
pub fn run_body(k: &KernelDecl, ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    run_prepared(&Prepared::new(k.clone()), ctx)
}

fn run_prepared(p: &Prepared, ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    let k = &p.decl;
    let name = k.name.name.as_str();
    let body = k.body.as_deref().unwrap_or(&[]);
    let err = |m: String| KernelError::shape(name, m);
    let (tiles, sizes, region) = (&p.tiles, &p.sizes, &p.region);
    let float_param: HashMap<&str, f32> = {
        let mut m = HashMap::new();
        let mut si = 0;
        for p in &k.params {
            if let ParamKind::Scalar(t) = p.kind {
                if t.is_float() {
                    m.insert(p.name.name.as_str(), ctx.param_f64(si)? as f32);
                }
                si += 1;
            }
        }
        m
    };
    POOL.with(|cell| {
        let mut pool = cell.borrow_mut();
        while pool.tiles.len() < sizes.len() {
            pool.tiles.push(Vec::new());
        }
        for (i, &n) in sizes.iter().enumerate() {
            if pool.tiles[i].len() < n {
                pool.tiles[i].resize(n, 0.0);
            }
        }
        let mut walk = Walk::new(k, ctx.params()).map_err(|e| err(e.message))?;
        // A region gets one write view per task (the context hands out only one): opened at
        // its first load or store, kept to the end.
        let mut writes: Vec<Option<FloatWrite<'_>>> = (0..region.len()).map(|_| None).collect();
        let mut fail = None;
        let r = walk.run(body, &mut |w, op, args| {
            let env = Env {
                kernel: name,
                tiles,
                region,
                floats: &float_param,
            };
            exec(w, op, args, &env, &mut pool, &mut writes, ctx).map_err(|e| {
                let msg = e.to_string();
                fail = Some(e);
                pto_wsp_ir::kernel_body::BodyError {
                    kernel: name.to_string(),
                    message: msg,
                }
            })
        });
        match (r, fail) {
            (_, Some(e)) => Err(e),
            (Err(e), None) => Err(err(e.message)),
            (Ok(()), None) => Ok(()),
        }
    })
}

fn collect_tiles(
    body: &[pto_wsp_ir::KStmt],
    tiles: &mut HashMap<String, Tile>,
    sizes: &mut Vec<usize>,
) {
    for s in body {
        match &s.kind {
            KStmtKind::Tile(t) => {
                let slot = match tiles.get(t.name.name.as_str()) {
                    Some(x) => x.slot,
                    None => {
                        sizes.push((t.rows * t.cols) as usize);
                        sizes.len() - 1
                    }
                };
                tiles.insert(
                    t.name.name.clone(),
                    Tile {
                        slot,
                        cols: t.cols as usize,
                        dtype: t.dtype,
                    },
                );
            }
            KStmtKind::For { body, .. } => collect_tiles(body, tiles, sizes),
            KStmtKind::If {
                then_body,
                else_body,
                ..
            } => {
                collect_tiles(then_body, tiles, sizes);
                collect_tiles(else_body, tiles, sizes);
            }
            _ => {}
        }
    }
}

fn arg_name(a: &InstArg) -> &str {
    match a {
        InstArg::Name(id) => &id.name,
        InstArg::Expr(_) => "",
    }
}

/// What an instruction's names mean in this kernel.
struct Env<'a> {
    kernel: &'a str,
    tiles: &'a HashMap<String, Tile>,
    region: &'a HashMap<String, (usize, bool)>,
    floats: &'a HashMap<&'a str, f32>,
}

fn exec<'c>(
    w: &Walk<'_>,
    op: TileOp,
    args: &[InstArg],
    env: &Env<'_>,
    pool: &mut Pool,
    writes: &mut [Option<FloatWrite<'c>>],
    ctx: &'c TaskContext<'_>,
) -> Result<(), KernelError> {
    let (tiles, region, floats) = (env.tiles, env.region, env.floats);
    let Pool {
        tiles: pool,
        a: abuf,
        b: bbuf,
        io: row,
    } = pool;
    let kname = env.kernel;
    let tile = |i: usize| -> Tile { tiles[arg_name(&args[i])] };
    let valid = |i: usize| -> (usize, usize) {
        let (r, c) = w.valid(arg_name(&args[i]));
        (r as usize, c as usize)
    };
    let scalar = |i: usize| -> f32 {
        match &args[i] {
            InstArg::Expr(Expr::Float(v)) => v.value() as f32,
            InstArg::Name(id) => floats.get(id.name.as_str()).copied().unwrap_or(0.0),
            InstArg::Expr(_) => 0.0,
        }
    };
    let offset = |i: usize| -> Result<usize, KernelError> {
        match args.get(i) {
            None => Ok(0),
            Some(a) => {
                let e = match a {
                    InstArg::Name(id) => Expr::Name(id.clone()),
                    InstArg::Expr(e) => e.clone(),
                };
                let v = w
                    .int(&e)
                    .map_err(|e| KernelError::shape(kname, e.message))?;
                usize::try_from(v)
                    .map_err(|_| KernelError::shape(kname, format!("negative offset {v}")))
            }
        }
    };
    match op {
        TileOp::Load | TileOp::Store => {
            let (t, ti, gi) = if op == TileOp::Load {
                (tile(0), 0, 1)
            } else {
                (tile(1), 1, 0)
            };
            let (vr, vc) = valid(ti);
            let (r0, c0) = (offset(2)?, offset(3)?);
            let (ri, writes_region) = region[arg_name(&args[gi])];
            let buf = &mut pool[t.slot];
            let check = |rows: usize, cols: usize| {
                if r0 + vr > rows || c0 + vc > cols {
                    Err(KernelError::shape(
                        kname,
                        format!(
                            "{}: {vr} x {vc} at ({r0}, {c0}) is outside region {ri} ({rows} x {cols})",
                            op.mnemonic()
                        ),
                    ))
                } else {
                    Ok(())
                }
            };
            if op == TileOp::Load {
                if writes_region {
                    if writes[ri].is_none() {
                        writes[ri] = Some(ctx.write_float(ri)?);
                    }
                    let g = writes[ri].as_ref().expect("opened above");
                    check(g.rows(), g.cols())?;
                    row.resize(g.cols(), 0.0);
                    for r in 0..vr {
                        g.load_row(r0 + r, row);
                        buf[r * t.cols..r * t.cols + vc].copy_from_slice(&row[c0..c0 + vc]);
                    }
                } else {
                    let g = ctx.read_float(ri)?;
                    check(g.rows(), g.cols())?;
                    row.resize(g.cols(), 0.0);
                    for r in 0..vr {
                        g.load_row(r0 + r, row);
                        buf[r * t.cols..r * t.cols + vc].copy_from_slice(&row[c0..c0 + vc]);
                    }
                }
                for r in 0..vr {
                    round(t.dtype, &mut buf[r * t.cols..r * t.cols + vc]);
                }
            } else {
                if writes[ri].is_none() {
                    writes[ri] = Some(ctx.write_float(ri)?);
                }
                let g = writes[ri].as_mut().expect("opened above");
                check(g.rows(), g.cols())?;
                for r in 0..vr {
                    let src = &buf[r * t.cols..r * t.cols + vc];
                    g.update_row(r0 + r, row, true, |dst| {
                        dst[c0..c0 + vc].copy_from_slice(src)
                    });
                }
            }
            return Ok(());
        }
        TileOp::Matmul | TileOp::MatmulAcc => {
            let (c, a, b) = (tile(0), tile(1), tile(2));
            let (m, kk) = valid(1);
            let (_, n) = valid(2);
            abuf.clear();
            abuf.extend_from_slice(&pool[a.slot]);
            bbuf.clear();
            bbuf.extend_from_slice(&pool[b.slot]);
            let (av, bv) = (&*abuf, &*bbuf);
            let cv = &mut pool[c.slot];
            for i in 0..m {
                let crow = &mut cv[i * c.cols..i * c.cols + n];
                if op == TileOp::Matmul {
                    crow.fill(0.0);
                }
                for p in 0..kk {
                    let x = av[i * a.cols + p];
                    let brow = &bv[p * b.cols..p * b.cols + n];
                    for (o, y) in crow.iter_mut().zip(brow) {
                        *o += x * y;
                    }
                }
            }
            return Ok(());
        }
        _ => {}
    }
    // Vector instructions: dst is operand 0; source rows are copied to the row buffers first,
    // so a destination may be one of its sources.
    let d = tile(0);
    let (vr, vc) = valid(0);
    let copy_row = |buf: &mut Vec<f32>, pool: &[Vec<f32>], i: usize, r: usize| {
        let t = tile(i);
        buf.clear();
        buf.extend_from_slice(&pool[t.slot][r * t.cols..(r + 1) * t.cols]);
    };
    if op == TileOp::Trans {
        let s = tile(1);
        abuf.clear();
        abuf.extend_from_slice(&pool[s.slot]);
        for r in 0..vr {
            let dst = &mut pool[d.slot][r * d.cols..r * d.cols + vc];
            for (c, o) in dst.iter_mut().enumerate() {
                *o = abuf[c * s.cols + r];
            }
            round(d.dtype, dst);
        }
        return Ok(());
    }
    if op == TileOp::Sel {
        // Three sources: mask and a in the row buffers, b read in place.
        let b = tile(3);
        for r in 0..vr {
            copy_row(abuf, pool, 1, r);
            copy_row(bbuf, pool, 2, r);
            for c in 0..vc {
                let v = if abuf[c] != 0.0 {
                    bbuf[c]
                } else {
                    pool[b.slot][r * b.cols + c]
                };
                pool[d.slot][r * d.cols + c] = v;
            }
            round(d.dtype, &mut pool[d.slot][r * d.cols..r * d.cols + vc]);
        }
        return Ok(());
    }
    if matches!(op, TileOp::ColSum | TileOp::ColMax) {
        let (sr, _) = valid(1);
        let t = tile(1);
        let init = if op == TileOp::ColSum {
            0.0
        } else {
            f32::NEG_INFINITY
        };
        abuf.clear();
        abuf.resize(vc, init);
        for i in 0..sr {
            let src = &pool[t.slot][i * t.cols..i * t.cols + vc];
            for (acc, &x) in abuf.iter_mut().zip(src) {
                *acc = if op == TileOp::ColSum {
                    *acc + x
                } else {
                    acc.max(x)
                };
            }
        }
        for r in 0..vr {
            let dst = &mut pool[d.slot][r * d.cols..r * d.cols + vc];
            dst.copy_from_slice(abuf);
            round(d.dtype, dst);
        }
        return Ok(());
    }
    if op == TileOp::ColExpandMul {
        copy_row(bbuf, pool, 2, 0);
    }
    for r in 0..vr {
        let ops = op.operands().len();
        if ops >= 2 && op != TileOp::Expands {
            copy_row(abuf, pool, 1, r);
        }
        if ops >= 3
            && matches!(op.operands()[2], pto_wsp_ir::Operand::Src)
            && op != TileOp::ColExpandMul
        {
            copy_row(bbuf, pool, 2, r);
        }
        let dst = &mut pool[d.slot][r * d.cols..r * d.cols + vc];
        let (a, b) = (&abuf[..], &bbuf[..]);
        match op {
            TileOp::Expands => dst.fill(scalar(1)),
            TileOp::Mov | TileOp::Cvt => dst.copy_from_slice(&a[..vc]),
            TileOp::Add | TileOp::Sub | TileOp::Mul | TileOp::Div | TileOp::Max | TileOp::Min => {
                for ((o, &x), &y) in dst.iter_mut().zip(a).zip(b) {
                    *o = binary(op, x, y);
                }
            }
            TileOp::Adds | TileOp::Subs | TileOp::Muls | TileOp::Divs | TileOp::Maxs => {
                let s = scalar(2);
                for (o, &x) in dst.iter_mut().zip(a) {
                    *o = binary(op, x, s);
                }
            }
            TileOp::Exp
            | TileOp::Log
            | TileOp::Sqrt
            | TileOp::Rsqrt
            | TileOp::Abs
            | TileOp::Neg
            | TileOp::Recip => {
                for (o, &x) in dst.iter_mut().zip(a) {
                    *o = unary(op, x);
                }
            }
            TileOp::RowSum | TileOp::RowMax | TileOp::RowMin => {
                let (_, sc) = valid(1);
                let v = match op {
                    TileOp::RowSum => a[..sc].iter().sum(),
                    TileOp::RowMax => a[..sc].iter().copied().fold(f32::NEG_INFINITY, f32::max),
                    _ => a[..sc].iter().copied().fold(f32::INFINITY, f32::min),
                };
                dst.fill(v);
            }
            TileOp::RowExpand => dst.fill(a[0]),
            TileOp::Cmp => {
                let mode = arg_name(&args[3]);
                for ((o, &x), &y) in dst.iter_mut().zip(a).zip(b) {
                    *o = if pto_wsp_ir::tile_isa::compare(mode, x, y) {
                        1.0
                    } else {
                        0.0
                    };
                }
            }
            TileOp::Sort => {
                dst.copy_from_slice(&a[..vc]);
                // Descending, NaNs last: total order on (is-not-NaN, value).
                dst.sort_unstable_by(|x, y| {
                    y.is_nan()
                        .cmp(&x.is_nan())
                        .reverse()
                        .then(y.partial_cmp(x).unwrap_or(std::cmp::Ordering::Equal))
                });
            }
            TileOp::RowExpandSub | TileOp::RowExpandMul | TileOp::RowExpandDiv => {
                let bop = match op {
                    TileOp::RowExpandSub => TileOp::Sub,
                    TileOp::RowExpandMul => TileOp::Mul,
                    _ => TileOp::Div,
                };
                let v = b[0];
                for (o, &x) in dst.iter_mut().zip(a) {
                    *o = binary(bop, x, v);
                }
            }
            TileOp::ColExpandMul => {
                for ((o, &x), &y) in dst.iter_mut().zip(a).zip(b) {
                    *o = x * y;
                }
            }
            _ => unreachable!("loads, stores and products are handled above"),
        }
        round(d.dtype, dst);
    }
    Ok(())
}

fn binary(op: TileOp, a: f32, b: f32) -> f32 {
    match op {
        TileOp::Add | TileOp::Adds => a + b,
        TileOp::Sub | TileOp::Subs => a - b,
        TileOp::Mul | TileOp::Muls => a * b,
        TileOp::Div | TileOp::Divs => a / b,
        TileOp::Max | TileOp::Maxs => a.max(b),
        _ => a.min(b),
    }
}

fn unary(op: TileOp, a: f32) -> f32 {
    match op {
        TileOp::Exp => a.exp(),
        TileOp::Log => a.ln(),
        TileOp::Sqrt => a.sqrt(),
        TileOp::Rsqrt => 1.0 / a.sqrt(),
        TileOp::Abs => a.abs(),
        TileOp::Neg => -a,
        _ => 1.0 / a,
    }
}
