//! The declarative schedule of the PDE specification, as far as it is built: `order` decides the
//! order in which [`walk`] visits a bound space's points (so the order descriptors are generated
//! and queued), and `affinity` decides which dispatch threads may run a descriptor
//! ([`crate::Launch::affinity`]). `prefetch` places prefetch descriptors in the generated order
//! ([`crate::Emitter::prefetch`], [`crate::Launch::prefetch`]).

use crate::descriptor::MAX_AXES;
use crate::error::{PdeError, Result};
use crate::space::BoundSpace;

/// `order(axis, ...)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// `sequential`: the axis's values in increasing order, as a loop at its place in the
    /// declaration order (the walk's default).
    Sequential,
    /// `parallel`: no order promised between the axis's values. The walk uses increasing order;
    /// dispatch threads run what they pop in any order.
    Parallel,
    /// `interleaved(n)`: the axis's values in groups of `n`; for each group, the axes declared
    /// after it are walked, and at each of their points the group's values in turn (the PDE
    /// specification: `B0C0, B1C0, B2C0, B3C0, B0C1, ...` for `interleaved(4)` on the batch axis).
    Interleaved(u32),
}

/// `affinity(axis, ...)`: where the descriptors of one value of the axis run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Affinity {
    /// `spread`: on any dispatch thread (one shared queue; the default).
    Spread,
    /// `core_group(size)`: the dispatch threads are cut into groups of `size`; the descriptors of
    /// value `v` run in group `v mod groups`, on any of its threads.
    CoreGroup(u32),
    /// `core_local`: the descriptors of value `v` run on dispatch thread `v mod threads`.
    CoreLocal,
}

/// Calls `f` with every point of `space` (its indices, unused axes 0) in the order `orders`
/// asks (`(axis name, order)`, at most one `Interleaved`; axes not named are `Sequential`).
/// `f` may stop the walk by returning an error. Refuses an unknown axis, an axis named twice,
/// a group size of 0 and a second interleaved axis, naming the space and axis.
pub fn walk(
    space: &BoundSpace,
    orders: &[(&str, Order)],
    mut f: impl FnMut([u32; MAX_AXES]) -> Result<()>,
) -> Result<()> {
    let err = |problem: String| PdeError::Space {
        space: space.name().to_string(),
        problem,
    };
    let mut inter: Option<(usize, u32)> = None;
    for (i, &(name, order)) in orders.iter().enumerate() {
        let k = space.space().axis_index(name).map_err(|_| {
            err(format!(
                "`order` names axis `{name}`, which is not declared"
            ))
        })?;
        if orders[..i].iter().any(|(n, _)| *n == name) {
            return Err(err(format!("`order` names axis `{name}` twice")));
        }
        if let Order::Interleaved(n) = order {
            if n == 0 {
                return Err(err(format!("axis `{name}`: interleaved(0) has no group")));
            }
            if inter.is_some() {
                return Err(err(format!(
                    "axis `{name}`: only one axis can be interleaved"
                )));
            }
            inter = Some((k, n));
        }
    }
    let counts: Vec<u32> = (0..space.axes().len()).map(|k| space.count(k)).collect();
    let (ik, group) = inter.unwrap_or((usize::MAX, 1));
    let mut idx = [0u32; MAX_AXES];
    walk_from(&counts, 0, ik, group, &mut idx, &mut f)
}

/// Walks axes `k..` (with axis `ik` interleaved in groups of `group`) under the fixed `idx[..k]`.
fn walk_from(
    counts: &[u32],
    k: usize,
    ik: usize,
    group: u32,
    idx: &mut [u32; MAX_AXES],
    f: &mut dyn FnMut([u32; MAX_AXES]) -> Result<()>,
) -> Result<()> {
    if k == counts.len() {
        return f(*idx);
    }
    if k != ik {
        for v in 0..counts[k] {
            idx[k] = v;
            walk_from(counts, k + 1, ik, group, idx, f)?;
        }
        return Ok(());
    }
    // Interleaved: for each group of values, the inner points in order (walked again per group,
    // nothing materialised), the group's values at each of them.
    let mut g0 = 0;
    while g0 < counts[k] {
        let g1 = counts[k].min(g0.saturating_add(group));
        let mut sub = *idx;
        walk_from(counts, k + 1, usize::MAX, 1, &mut sub, &mut |p| {
            for v in g0..g1 {
                let mut q = p;
                q[k] = v;
                f(q)?;
            }
            Ok(())
        })?;
        g0 = g1;
    }
    Ok(())
}
