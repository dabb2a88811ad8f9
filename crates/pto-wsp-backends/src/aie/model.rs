//! The throughput model of a placed design: the slowest stage bounds it.
//!
//! Why: a spatial pipeline runs its stages (cores and DMA streams) at once, so once full it
//! delivers one object per interval of its slowest stage; the user needs to know which stage
//! that is and what it costs before running anything.
//!
//! How: every actor's busy cycles are counted from the design: a core's kernel calls cost the
//! kernel language's cycle walk (`pto_wsp_ir::kernel_body::body_cycles_with`, the same per
//! instruction model as `trace cycles`); a DMA fifo moves each object in `ceil(bytes / w)`
//! cycles, `w` the device's stream bytes per cycle; a shared-memory fifo moves nothing. With
//! `n` items through an actor, its per-item cost is `busy / n`. The estimate of a run is the
//! pipeline formula `Σ per-item + (n − 1) × max per-item`, written as the bottleneck's busy
//! cycles plus every other actor's per-item cost (its share of filling the pipeline).
//!
//! Promise: an estimate, not a measurement: actors are assumed to overlap fully once the
//! pipeline is full (fifos of depth ≥ 2); the bottleneck named is the actor with the most busy
//! cycles.

use super::design::*;
use pto_wsp_ir::Module;
use pto_wsp_ir::kernel_body::body_cycles_with;
use std::collections::HashMap;
use std::fmt;

/// One actor's load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Actor {
    /// `core (0, 3)` or `dma X_0_2`.
    pub name: String,
    /// Busy cycles in one run.
    pub busy: u64,
    /// Items (kernel calls, objects) it handles.
    pub items: u64,
}

impl Actor {
    /// Cycles per item (rounded up).
    pub fn per_item(&self) -> u64 {
        self.busy.div_ceil(self.items.max(1))
    }
}

/// The model's result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Throughput {
    /// Every actor, cores first, then DMA fifos.
    pub actors: Vec<Actor>,
    /// Index of the bottleneck in `actors`.
    pub bottleneck: usize,
    /// Estimated cycles of one run.
    pub total: u64,
}

/// Models `d` (kernels from `module`).
pub fn model(d: &AieDesign, module: &Module) -> Throughput {
    let mut actors = Vec::new();
    let mut cache: HashMap<(usize, Vec<u64>), u64> = HashMap::new();
    for c in &d.cores {
        let mut busy = 0;
        let mut items = 0;
        for st in super::map::flatten(&c.program) {
            if let Step::Call { kernel, args } = st {
                let k = &d.kernels[kernel];
                let scalars: Vec<u64> = args
                    .iter()
                    .filter_map(|a| match a {
                        CallArg::Scalar(v, _) => Some(v.to_bits()),
                        CallArg::Object { .. } => None,
                    })
                    .collect();
                let cost = *cache.entry((kernel, scalars.clone())).or_insert_with(|| {
                    let dims: Vec<(u64, u64)> = k
                        .params
                        .iter()
                        .filter_map(|p| match p {
                            ArgType::Object(o) => {
                                let n = o.shape.len();
                                Some(if n >= 2 {
                                    (o.shape[..n - 1].iter().product(), o.shape[n - 1])
                                } else {
                                    (1, o.shape.first().copied().unwrap_or(1))
                                })
                            }
                            ArgType::Scalar(_) => None,
                        })
                        .collect();
                    body_cycles_with(&module.kernels[k.decl], &scalars, &dims).unwrap_or(0)
                });
                busy += cost;
                items += 1;
            }
        }
        actors.push(Actor {
            name: format!("core ({}, {}) {}", c.tile.0, c.tile.1, c.label),
            busy,
            items,
        });
    }
    let w = d.device.stream_bytes_per_cycle;
    for f in &d.fifos {
        if let FifoKind::Dma = f.kind {
            actors.push(Actor {
                name: format!("dma {}", f.name),
                busy: f.objects * f.obj.bytes().div_ceil(w),
                items: f.objects,
            });
        }
    }
    let (bottleneck, _) = actors
        .iter()
        .enumerate()
        .max_by_key(|(i, a)| (a.busy, std::cmp::Reverse(*i)))
        .unwrap_or((
            0,
            &Actor {
                name: String::new(),
                busy: 0,
                items: 0,
            },
        ));
    let edges = flow_edges(d);
    let w: Vec<u64> = actors.iter().map(Actor::per_item).collect();
    let down = longest(&edges, &w, true);
    let up = longest(&edges, &w, false);
    let fill = (down[bottleneck] + up[bottleneck]).saturating_sub(2 * w[bottleneck]);
    let total = actors.get(bottleneck).map_or(0, |b| b.busy) + fill;
    Throughput {
        actors,
        bottleneck,
        total,
    }
}

/// Data-flow edges between actors (cores first, then DMA fifos, as [`model`] lists them):
/// producer core → its DMA fifo → consumer core, core → core over a shared fifo, and fifo →
/// fifo through a memory-tile link.
fn flow_edges(d: &AieDesign) -> Vec<(usize, usize)> {
    let core = |t: TileId| d.cores.iter().position(|c| c.tile == t);
    let mut dma = vec![None; d.fifos.len()];
    let mut n = d.cores.len();
    for (i, f) in d.fifos.iter().enumerate() {
        if f.kind == FifoKind::Dma {
            dma[i] = Some(n);
            n += 1;
        }
    }
    let mut e = Vec::new();
    for (i, f) in d.fifos.iter().enumerate() {
        let p = core(f.producer);
        for &c in &f.consumers {
            let q = core(c);
            match (dma[i], p, q) {
                (None, Some(p), Some(q)) => e.push((p, q)),
                (Some(x), p, q) => {
                    if let Some(p) = p {
                        e.push((p, x));
                    }
                    if let Some(q) = q {
                        e.push((x, q));
                    }
                }
                _ => {}
            }
        }
    }
    for l in &d.links {
        for &i in &l.ins {
            for &o in &l.outs {
                if let (Some(a), Some(b)) = (dma[i], dma[o]) {
                    e.push((a, b));
                }
            }
        }
    }
    e
}

/// Per node, the heaviest path (sum of `w`) ending at it (`into`) or starting at it.
fn longest(edges: &[(usize, usize)], w: &[u64], into: bool) -> Vec<u64> {
    let n = w.len();
    let mut best: Vec<Option<u64>> = vec![None; n];
    fn visit(
        v: usize,
        edges: &[(usize, usize)],
        w: &[u64],
        into: bool,
        best: &mut Vec<Option<u64>>,
        depth: usize,
    ) -> u64 {
        if let Some(b) = best[v] {
            return b;
        }
        let mut m = 0;
        if depth <= w.len() {
            for &(a, b) in edges {
                let next = if into && b == v {
                    Some(a)
                } else if !into && a == v {
                    Some(b)
                } else {
                    None
                };
                if let Some(u) = next {
                    m = m.max(visit(u, edges, w, into, best, depth + 1));
                }
            }
        }
        best[v] = Some(m + w[v]);
        m + w[v]
    }
    (0..n)
        .map(|v| visit(v, edges, w, into, &mut best, 0))
        .collect()
}

impl fmt::Display for Throughput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "throughput model (estimate: the slowest stage bounds it)"
        )?;
        for a in &self.actors {
            writeln!(
                f,
                "  {:<40} {:>10} cycles busy  {:>5} items  {:>8} per item",
                a.name,
                a.busy,
                a.items,
                a.per_item()
            )?;
        }
        if let Some(b) = self.actors.get(self.bottleneck) {
            writeln!(
                f,
                "  bottleneck: {}, {} cycles per item; estimated run {} cycles",
                b.name,
                b.per_item(),
                self.total
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_stages_give_the_pipeline_formula() {
        // Stages of a, b, c cycles per item over n items: a + b + c + (n - 1) * max.
        let (a, b, c, n) = (100u64, 300u64, 200u64, 16u64);
        let actors: Vec<Actor> = [a, b, c]
            .iter()
            .enumerate()
            .map(|(i, &x)| Actor {
                name: format!("s{i}"),
                busy: x * n,
                items: n,
            })
            .collect();
        let bottleneck = 1;
        let total = actors[bottleneck].busy
            + actors
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != bottleneck)
                .map(|(_, a)| a.per_item())
                .sum::<u64>();
        assert_eq!(total, a + b + c + (n - 1) * b.max(a).max(c));
    }
}
