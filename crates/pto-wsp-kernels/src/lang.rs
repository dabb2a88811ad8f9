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
use half::{bf16, f16};
use pto_wsp_ir::kernel_body::{InstArg, KStmtKind, Walk, body_cycles};
use pto_wsp_ir::{DType, Expr, KernelDecl, Module, ParamKind, TileOp};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

thread_local! {
    static TILES: RefCell<Vec<Vec<f32>>> = const { RefCell::new(Vec::new()) };
}

/// Registers every kernel of `module` that has a body (replacing any kernel of that name).
/// Returns the names registered.
pub fn register_bodies(module: &Module, registry: &mut KernelRegistry) -> Vec<String> {
    let mut names = Vec::new();
    for k in module.kernels.iter().filter(|k| k.body.is_some()) {
        let decl = Arc::new(k.clone());
        let run = decl.clone();
        registry.register(&k.name.name, move |ctx| run_body(&run, ctx));
        let cost = decl.clone();
        registry.set_cost(&k.name.name, move |ctx| {
            body_cycles(&cost, ctx.params()).unwrap_or(0)
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

/// Runs `k`'s body on `ctx`.
pub fn run_body(k: &KernelDecl, ctx: &TaskContext<'_>) -> Result<(), KernelError> {
    let name = k.name.name.as_str();
    let body = k.body.as_deref().unwrap_or(&[]);
    let err = |m: String| KernelError::shape(name, m);
    // Tile declarations in order get scratch slots; region index of each tile parameter.
    let mut tiles: HashMap<&str, Tile> = HashMap::new();
    let mut sizes = Vec::new();
    collect_tiles(body, &mut tiles, &mut sizes);
    let region: HashMap<&str, (usize, bool)> = k
        .params
        .iter()
        .filter_map(|p| match p.kind {
            ParamKind::Tile { access, .. } => Some((p.name.name.as_str(), access.writes())),
            ParamKind::Scalar(_) => None,
        })
        .enumerate()
        .map(|(i, (n, w))| (n, (i, w)))
        .collect();
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
    TILES.with(|cell| {
        let mut pool = cell.borrow_mut();
        while pool.len() < sizes.len() {
            pool.push(Vec::new());
        }
        for (i, &n) in sizes.iter().enumerate() {
            if pool[i].len() < n {
                pool[i].resize(n, 0.0);
            }
        }
        let mut walk = Walk::new(k, ctx.params()).map_err(|e| err(e.message))?;
        let mut fail = None;
        let r = walk.run(body, &mut |w, op, args| {
            exec(w, op, args, &tiles, &region, &float_param, &mut pool, ctx).map_err(|e| {
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

fn collect_tiles<'a>(
    body: &'a [pto_wsp_ir::KStmt],
    tiles: &mut HashMap<&'a str, Tile>,
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
                    &t.name.name,
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

#[allow(clippy::too_many_arguments)]
fn exec(
    w: &Walk<'_>,
    op: TileOp,
    args: &[InstArg],
    tiles: &HashMap<&str, Tile>,
    region: &HashMap<&str, (usize, bool)>,
    floats: &HashMap<&str, f32>,
    pool: &mut [Vec<f32>],
    ctx: &TaskContext<'_>,
) -> Result<(), KernelError> {
    let kname = w_kernel(ctx);
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
                    .map_err(|e| KernelError::shape(&kname, e.message))?;
                usize::try_from(v)
                    .map_err(|_| KernelError::shape(&kname, format!("negative offset {v}")))
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
            let (ri, writes) = region[arg_name(&args[gi])];
            let buf = &mut pool[t.slot];
            let mut row = vec![0.0f32; 0];
            let check = |rows: usize, cols: usize| {
                if r0 + vr > rows || c0 + vc > cols {
                    Err(KernelError::shape(
                        &kname,
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
                if writes {
                    let g = ctx.write_float(ri)?;
                    check(g.rows(), g.cols())?;
                    row.resize(g.cols(), 0.0);
                    for r in 0..vr {
                        g.load_row(r0 + r, &mut row);
                        buf[r * t.cols..r * t.cols + vc].copy_from_slice(&row[c0..c0 + vc]);
                    }
                } else {
                    let g = ctx.read_float(ri)?;
                    check(g.rows(), g.cols())?;
                    row.resize(g.cols(), 0.0);
                    for r in 0..vr {
                        g.load_row(r0 + r, &mut row);
                        buf[r * t.cols..r * t.cols + vc].copy_from_slice(&row[c0..c0 + vc]);
                    }
                }
                for r in 0..vr {
                    round(t.dtype, &mut buf[r * t.cols..r * t.cols + vc]);
                }
            } else {
                let mut g = ctx.write_float(ri)?;
                check(g.rows(), g.cols())?;
                for r in 0..vr {
                    let src = &buf[r * t.cols..r * t.cols + vc];
                    g.update_row(r0 + r, &mut row, true, |dst| {
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
            let av = pool[a.slot].clone();
            let bv = pool[b.slot].clone();
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
    // Vector instructions: dst is operand 0.
    let d = tile(0);
    let (vr, vc) = valid(0);
    let src = |i: usize, pool: &[Vec<f32>], r: usize| -> Vec<f32> {
        let t = tile(i);
        pool[t.slot][r * t.cols..r * t.cols + t.cols].to_vec()
    };
    for r in 0..vr {
        let out: Vec<f32> = match op {
            TileOp::Expands => vec![scalar(1); vc],
            TileOp::Mov | TileOp::Cvt => src(1, pool, r)[..vc].to_vec(),
            TileOp::Add | TileOp::Sub | TileOp::Mul | TileOp::Div | TileOp::Max | TileOp::Min => {
                let (a, b) = (src(1, pool, r), src(2, pool, r));
                (0..vc).map(|j| binary(op, a[j], b[j])).collect()
            }
            TileOp::Adds | TileOp::Subs | TileOp::Muls | TileOp::Divs | TileOp::Maxs => {
                let (a, s) = (src(1, pool, r), scalar(2));
                (0..vc).map(|j| binary(op, a[j], s)).collect()
            }
            TileOp::Exp
            | TileOp::Log
            | TileOp::Sqrt
            | TileOp::Rsqrt
            | TileOp::Abs
            | TileOp::Neg
            | TileOp::Recip => {
                let a = src(1, pool, r);
                (0..vc).map(|j| unary(op, a[j])).collect()
            }
            TileOp::RowSum | TileOp::RowMax | TileOp::RowMin => {
                let a = src(1, pool, r);
                let (_, sc) = valid(1);
                let v = match op {
                    TileOp::RowSum => a[..sc].iter().sum(),
                    TileOp::RowMax => a[..sc].iter().copied().fold(f32::NEG_INFINITY, f32::max),
                    _ => a[..sc].iter().copied().fold(f32::INFINITY, f32::min),
                };
                vec![v; vc]
            }
            TileOp::ColSum | TileOp::ColMax => {
                let (sr, _) = valid(1);
                let t = tile(1);
                (0..vc)
                    .map(|j| {
                        let col = (0..sr).map(|i| pool[t.slot][i * t.cols + j]);
                        if op == TileOp::ColSum {
                            col.sum()
                        } else {
                            col.fold(f32::NEG_INFINITY, f32::max)
                        }
                    })
                    .collect()
            }
            TileOp::RowExpand => vec![src(1, pool, r)[0]; vc],
            TileOp::RowExpandSub | TileOp::RowExpandMul | TileOp::RowExpandDiv => {
                let (a, v) = (src(1, pool, r), src(2, pool, r)[0]);
                let bop = match op {
                    TileOp::RowExpandSub => TileOp::Sub,
                    TileOp::RowExpandMul => TileOp::Mul,
                    _ => TileOp::Div,
                };
                (0..vc).map(|j| binary(bop, a[j], v)).collect()
            }
            TileOp::ColExpandMul => {
                let a = src(1, pool, r);
                let v = src(2, pool, 0);
                (0..vc).map(|j| a[j] * v[j]).collect()
            }
            _ => unreachable!("handled above"),
        };
        let dst = &mut pool[d.slot][r * d.cols..r * d.cols + vc];
        dst.copy_from_slice(&out);
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

fn w_kernel(ctx: &TaskContext<'_>) -> String {
    format!("task {}", ctx.task())
}
