//! The fast-path plans of every task, filled once after decoding: linear forms of its scalar
//! arguments and region bounds, the regions as the sink sees them, and the pool when it is
//! fixed.

use crate::format::NONE16;
use crate::program::{DimPlan, Fast, Lin, ParamDesc, Program};

/// Fills the fast-path plans of every task.
pub(super) fn plan(p: &mut Program) {
    for i in 0..p.tasks.len() {
        plan_task(p, i);
    }
}

/// The linear form of expression `e`, if it has one.
fn lin(p: &Program, e: u16) -> Option<Lin> {
    let zero = p.reg_types.len() as u32;
    match p.exprs[usize::from(e)].fast {
        Fast::Const(c) => Some(Lin {
            reg: zero,
            pre: 0,
            mul: 0,
            post: c as i64,
        }),
        Fast::Reg(r) => Some(Lin {
            reg: u32::from(r),
            pre: 0,
            mul: 1,
            post: 0,
        }),
        Fast::Affine {
            reg,
            pre,
            mul,
            post,
        } => Some(Lin {
            reg: u32::from(reg),
            pre,
            mul,
            post,
        }),
        Fast::None => None,
    }
}

fn plan_task(p: &mut Program, i: usize) {
    let td = p.tasks[i].clone();
    let kd = &p.kernels[usize::from(td.kernel)];
    let fixed_pool = (kd.tiers.is_none() && p.sched.pools.is_none()).then_some(kd.pool);
    let r0 = p.region_outs.len() as u32;
    let coords = region_outs(p, i);
    let l0 = p.lins.len() as u32;
    let d0 = p.dim_plans.len() as u32;
    let mut linear = true;
    for &e in &p.task_scalars[td.scalars.start as usize..td.scalars.end as usize] {
        match lin(p, e) {
            Some(l) => p.lins.push(l),
            None => linear = false,
        }
    }
    linear &= dim_plans(p, i);
    if !linear {
        p.lins.truncate(l0 as usize);
        p.dim_plans.truncate(d0 as usize);
    }
    let t = &mut p.tasks[i];
    t.linear = linear;
    t.scalar_lins = l0..p.lins.len() as u32;
    t.dim_plans = d0..p.dim_plans.len() as u32;
    t.region_outs = r0..p.region_outs.len() as u32;
    t.fixed_pool = fixed_pool;
    t.simple = fixed_pool.is_some()
        && p.sched.stream_by.is_none()
        && p.sched.priority.is_none()
        && p.sched.cost.is_none();
    t.coord_base = p.total_coords as u32;
    t.n_coords = coords;
    // Starts, then sizes.
    p.total_coords += 2 * coords as usize;
}

/// Appends task `i`'s regions as the sink sees them; returns how many coordinates they take.
fn region_outs(p: &mut Program, i: usize) -> u32 {
    let td = &p.tasks[i];
    let kd = &p.kernels[usize::from(td.kernel)];
    let mut coords = 0u32;
    let accesses: Vec<pto_wsp_ir::Access> = kd
        .params
        .iter()
        .filter_map(|p| match p {
            ParamDesc::Tile(a) => Some(*a),
            ParamDesc::Scalar(_) => None,
        })
        .collect();
    for (&r, &access) in p.task_regions[td.regions.start as usize..td.regions.end as usize]
        .iter()
        .zip(&accesses)
    {
        let rd = &p.regions[usize::from(r)];
        let rank = rd.dims.len() as u32;
        p.region_outs.push(crate::sink::RegionOut {
            tensor: u32::from(rd.tensor),
            access: crate::sink::access_code(access),
            off: coords,
            rank,
        });
        coords += rank;
    }
    coords
}

/// Appends the plans of task `i`'s region bounds; false when one of them is not linear.
fn dim_plans(p: &mut Program, i: usize) -> bool {
    let zero = p.reg_types.len() as u32;
    let td = p.tasks[i].clone();
    let mut linear = true;
    let mut coords_done = 0u32;
    for &r in &p.task_regions[td.regions.start as usize..td.regions.end as usize] {
        let rd = p.regions[usize::from(r)].clone();
        for (d, &(s, z)) in p.dims[rd.dims.start as usize..rd.dims.end as usize]
            .to_vec()
            .iter()
            .enumerate()
        {
            let start = lin(p, s);
            let size = if z == NONE16 {
                Some(Lin {
                    reg: zero,
                    pre: 0,
                    mul: 0,
                    post: 1,
                })
            } else {
                lin(p, z)
            };
            match (start, size) {
                (Some(start), Some(size)) => p.dim_plans.push(DimPlan {
                    start,
                    size,
                    extent: p.shape_off[usize::from(rd.tensor)] + d as u32,
                    coord: coords_done + d as u32,
                }),
                _ => linear = false,
            }
        }
        coords_done += rd.dims.len() as u32;
    }
    linear
}
