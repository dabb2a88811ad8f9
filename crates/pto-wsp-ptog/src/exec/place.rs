//! Placement: which workers of a simulated device may run each kernel's instances.
//!
//! Why: core allocation is part of the ISA (`CA_REQUEST`, `CA_AFFINITY`, `CA_PARTITION`); on
//! the CPU simulation a device's cores are worker threads of a kind (cube, vector, AICPU), and
//! each kernel node gets the set of workers its instances may run on, decided once per graph
//! when a device loads a program. Workers only take instances whose set holds them.
//!
//! Rules, in order:
//! 1. A kernel's core type gives its kinds of worker: `AIC` cube, `AIV` vector, `AIC_AIV` both
//!    (one instance runs its cube and vector stages on one worker), `AICPU` the AICPU threads.
//! 2. The graph's `CA_PARTITION` keeps cube workers `aic_start..+aic_count` and vector workers
//!    `aiv_start..+aiv_count` (AICPU threads are not partitioned); a range past the device is
//!    an error.
//! 3. `CA_REQUEST(k, aic, aiv, aicpu)`: per kind, the graph's requests are scaled down
//!    proportionally (at least one core each) when together they exceed the workers left,
//!    and each requesting kernel gets the next workers of that kind in turn, so requests of
//!    one graph get disjoint workers while there are enough ("half the cores" each).
//! 4. `CA_AFFINITY`: `COLOCATE` gives every kernel of the set the workers all of them may use;
//!    `SEPARATE` deals the workers of the set out so that no two of its kernels share one;
//!    `L2_SHARE` confines the set to one L2 group (the device's workers are split into
//!    [`DeviceConfig::l2_groups`] groups, each with its share of every kind).
//!
//! A kernel left with no worker is an error naming it and the rule that emptied its set.

use super::DeviceConfig;
use crate::check::{GraphPlan, KernelPlan};
use crate::operand::{AffinityType, CoreType};

/// A set of workers (bit `w` = worker `w`).
pub type Mask = u128;

/// The most workers a simulated device may have.
pub const MAX_WORKERS: u32 = 128;

/// The kind of worker `w` is.
pub fn kind_of(cfg: &DeviceConfig, w: u32) -> CoreType {
    if w < cfg.aic {
        CoreType::Aic
    } else if w < cfg.aic + cfg.aiv {
        CoreType::Aiv
    } else {
        CoreType::Aicpu
    }
}

/// The workers of one kind.
fn kind_mask(cfg: &DeviceConfig, kind: usize) -> Mask {
    let (start, n) = match kind {
        0 => (0, cfg.aic),
        1 => (cfg.aic, cfg.aiv),
        _ => (cfg.aic + cfg.aiv, cfg.aicpu),
    };
    range(start, n)
}

fn range(start: u32, n: u32) -> Mask {
    (start..start + n).fold(0, |m, w| m | 1u128 << w)
}

/// Kinds (0 cube, 1 vector, 2 AICPU) a core type runs on.
fn kinds(core: CoreType) -> &'static [usize] {
    match core {
        CoreType::Aic => &[0],
        CoreType::Aiv => &[1],
        CoreType::AicAiv => &[0, 1],
        CoreType::Aicpu => &[2],
    }
}

fn workers(m: Mask) -> impl Iterator<Item = u32> {
    (0..MAX_WORKERS).filter(move |&w| m & (1u128 << w) != 0)
}

/// The worker set of every kernel of `g` (see the module docs); an error names the kernel.
pub fn place(cfg: &DeviceConfig, g: &GraphPlan) -> Result<Vec<Mask>, String> {
    let mut allowed = [kind_mask(cfg, 0), kind_mask(cfg, 1), kind_mask(cfg, 2)];
    if let Some(p) = &g.partition {
        let fits = |(s, n): (u32, u32), have: u32, what: &str| {
            if s as u64 + n as u64 > have as u64 {
                Err(format!(
                    "graph {}: partition {} needs {what} cores {s}..{}, the device has {have}",
                    g.name,
                    p.id,
                    s as u64 + n as u64
                ))
            } else {
                Ok(())
            }
        };
        fits(p.aic, cfg.aic, "cube")?;
        fits(p.aiv, cfg.aiv, "vector")?;
        allowed[0] = range(p.aic.0, p.aic.1);
        allowed[1] = range(cfg.aic + p.aiv.0, p.aiv.1);
    }
    let mut masks: Vec<Mask> = g
        .kernels
        .iter()
        .map(|k| kinds(k.core).iter().fold(0, |m, &t| m | allowed[t]))
        .collect();
    requests(g, &allowed, &mut masks);
    for (set, ty) in &g.affinities {
        affinity(cfg, g, set, *ty, &mut masks)?;
    }
    for (k, m) in g.kernels.iter().zip(&masks) {
        if *m == 0 {
            return Err(format!(
                "graph {}: kernel {} ({}) has no worker it may run on (the device has {} cube, \
                 {} vector and {} AICPU workers)",
                g.name, k.name, k.core, cfg.aic, cfg.aiv, cfg.aicpu
            ));
        }
    }
    Ok(masks)
}

/// `CA_REQUEST`s of `g`, per kind.
fn requests(g: &GraphPlan, allowed: &[Mask; 3], masks: &mut [Mask]) {
    let req = |k: &KernelPlan, t: usize| k.request.map(|r| r[t]);
    let requesting: Vec<usize> = (0..g.kernels.len())
        .filter(|&k| g.kernels[k].request.is_some())
        .collect();
    if requesting.is_empty() {
        return;
    }
    // Per kernel, the workers it keeps of each kind it runs on.
    let mut keep: Vec<Mask> = vec![0; g.kernels.len()];
    for (t, &kind) in allowed.iter().enumerate() {
        let pool: Vec<u32> = workers(kind).collect();
        let users: Vec<usize> = requesting
            .iter()
            .copied()
            .filter(|&k| kinds(g.kernels[k].core).contains(&t))
            .filter(|&k| req(&g.kernels[k], t).unwrap_or(0) > 0)
            .collect();
        let total: u64 = users
            .iter()
            .map(|&k| req(&g.kernels[k], t).unwrap_or(0) as u64)
            .sum();
        if pool.is_empty() || total == 0 {
            continue;
        }
        let mut cursor = 0usize;
        for &k in &users {
            let r = req(&g.kernels[k], t).unwrap_or(0) as u64;
            let n = if total > pool.len() as u64 {
                (r * pool.len() as u64 / total).max(1)
            } else {
                r
            } as usize;
            for j in 0..n.min(pool.len()) {
                keep[k] |= 1u128 << pool[(cursor + j) % pool.len()];
            }
            cursor = (cursor + n) % pool.len();
        }
    }
    for &k in &requesting {
        masks[k] &= keep[k];
    }
}

fn affinity(
    cfg: &DeviceConfig,
    g: &GraphPlan,
    set: &[usize],
    ty: AffinityType,
    masks: &mut [Mask],
) -> Result<(), String> {
    let names = || {
        set.iter()
            .map(|&k| g.kernels[k].name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match ty {
        AffinityType::Colocate => {
            let common = set.iter().fold(Mask::MAX, |m, &k| m & masks[k]);
            if common == 0 {
                return Err(format!(
                    "graph {}: COLOCATE {{{}}}: no worker may run all of them",
                    g.name,
                    names()
                ));
            }
            for &k in set {
                masks[k] = common;
            }
        }
        AffinityType::Separate => {
            let union = set.iter().fold(0, |m, &k| m | masks[k]);
            let mut dealt: Vec<Mask> = vec![0; set.len()];
            for w in workers(union) {
                let bit = 1u128 << w;
                let taker = (0..set.len())
                    .filter(|&i| masks[set[i]] & bit != 0)
                    .min_by_key(|&i| (dealt[i].count_ones(), i));
                if let Some(i) = taker {
                    dealt[i] |= bit;
                }
            }
            for (i, &k) in set.iter().enumerate() {
                if dealt[i] == 0 {
                    return Err(format!(
                        "graph {}: SEPARATE {{{}}}: too few workers to keep kernel {} apart",
                        g.name,
                        names(),
                        g.kernels[k].name
                    ));
                }
                masks[k] = dealt[i];
            }
        }
        AffinityType::L2Share => {
            let groups = cfg.l2_groups.max(1);
            let group = |i: u32| -> Mask {
                (0..3).fold(0, |m, t| {
                    let (start, n) = match t {
                        0 => (0, cfg.aic),
                        1 => (cfg.aic, cfg.aiv),
                        _ => (cfg.aic + cfg.aiv, cfg.aicpu),
                    };
                    let lo = start + n * i / groups;
                    let hi = start + n * (i + 1) / groups;
                    m | range(lo, hi - lo)
                })
            };
            let first = workers(masks[set[0]]).next().unwrap_or(0);
            let order: Vec<u32> = (0..groups)
                .filter(|&i| group(i) & (1u128 << first) != 0)
                .chain((0..groups).filter(|&i| group(i) & (1u128 << first) == 0))
                .collect();
            let chosen = order
                .into_iter()
                .map(group)
                .find(|gm| set.iter().all(|&k| masks[k] & gm != 0))
                .ok_or_else(|| {
                    format!(
                        "graph {}: L2_SHARE {{{}}}: no L2 group has workers for all of them",
                        g.name,
                        names()
                    )
                })?;
            for &k in set {
                masks[k] &= chosen;
            }
        }
    }
    Ok(())
}
