//! Tile budgets: what every tile of a placed design uses, checked against the device table.
//!
//! Why: a design that does not fit its device must be refused before anything is written,
//! naming the tile and the resource (local memory, DMA channels, locks, buffer descriptors),
//! what uses it and the limit: mlir-aie's own tools would fail later, and less clearly.
//!
//! Promise: the counting rules (written once here, read by the check and the report) follow
//! mlir-aie's ObjectFIFO lowering: a shared-memory fifo is one pool on its owner tile and uses
//! no DMA; a DMA fifo has a pool at each compute or memory tile end, one output (MM2S) channel
//! at the producer and one input (S2MM) channel per consumer; a link in a memory tile shares
//! its buffers (a one-to-one link keeps its input's pool, a join its output's); every pool takes
//! two locks and, at a DMA end, one buffer descriptor per buffer; a shim end takes one buffer
//! descriptor per host transfer; a compute tile running a core keeps the core's stack.

use super::design::*;
use crate::EmitError;
use pto_wsp_ir::spatial::device::TileKind;
use std::collections::{BTreeMap, HashSet};

/// Fills `design.budgets` and `design.tiles`, then checks every tile, in tile order; the first
/// tile over a limit is the error.
pub fn check(design: &mut AieDesign) -> Result<(), EmitError> {
    let dev = design.device;
    let mut b: BTreeMap<TileId, TileBudget> = BTreeMap::new();
    fn entry<'b>(
        b: &'b mut BTreeMap<TileId, TileBudget>,
        dev: &pto_wsp_ir::spatial::device::Device,
        t: TileId,
    ) -> &'b mut TileBudget {
        b.entry(t).or_insert_with(|| TileBudget {
            tile: t,
            kind: dev.tile_kind(t.0, t.1).unwrap_or(TileKind::Compute),
            pools: Vec::new(),
            stack: 0,
            s2mm: Vec::new(),
            mm2s: Vec::new(),
            locks: 0,
            bds: 0,
        })
    }
    // Pools a link shares: (fifo, producer end?) not counted again.
    let mut shared_ends: HashSet<(usize, bool)> = HashSet::new();
    for l in &design.links {
        if l.ins.len() == 1 && l.outs.len() == 1 {
            shared_ends.insert((l.outs[0], true));
        } else {
            for &i in &l.ins {
                shared_ends.insert((i, false));
            }
        }
    }
    for (fi, f) in design.fifos.iter().enumerate() {
        let bytes = f.obj.bytes();
        match f.kind {
            FifoKind::Shared { owner } => {
                let e = entry(&mut b, dev, owner);
                e.pools.push((f.name.clone(), f.depth, bytes));
                e.locks += 2;
                for t in std::iter::once(f.producer).chain(f.consumers.iter().copied()) {
                    entry(&mut b, dev, t);
                }
            }
            FifoKind::Dma => {
                let ends = std::iter::once((f.producer, true))
                    .chain(f.consumers.iter().map(|&c| (c, false)));
                for (t, producer) in ends {
                    let shim = t.1 == dev.shim_row;
                    let e = entry(&mut b, dev, t);
                    if producer {
                        e.mm2s.push(f.name.clone());
                    } else {
                        e.s2mm.push(f.name.clone());
                    }
                    if shim {
                        e.bds += 1;
                        continue;
                    }
                    e.bds += f.depth;
                    if !shared_ends.contains(&(fi, producer)) {
                        e.pools.push((f.name.clone(), f.depth, bytes));
                        e.locks += 2;
                    }
                }
            }
        }
    }
    for c in &design.cores {
        entry(&mut b, dev, c.tile).stack = dev.stack;
    }
    let labels: BTreeMap<TileId, &str> = design
        .cores
        .iter()
        .map(|c| (c.tile, c.label.as_str()))
        .collect();
    for t in b.values() {
        limits(design, t, labels.get(&t.tile).copied())?;
    }
    design.tiles = b.keys().copied().collect();
    design.budgets = b.into_values().collect();
    Ok(())
}

fn limits(design: &AieDesign, t: &TileBudget, label: Option<&str>) -> Result<(), EmitError> {
    let dev = design.device;
    let r = dev.resources(t.kind);
    let who = match label {
        Some(l) => format!("{} ({l})", tile_name(dev, t.tile)),
        None => tile_name(dev, t.tile),
    };
    let what = format!("{} {} tile", dev.name, t.kind.word());
    if t.kind != TileKind::Shim && t.memory() > r.memory {
        let mut parts: Vec<String> = t
            .pools
            .iter()
            .map(|(n, d, b)| format!("fifo `{n}` {d} x {b} B"))
            .collect();
        if t.stack > 0 {
            parts.push(format!("stack {} B", t.stack));
        }
        return Err(EmitError::plain(format!(
            "{who}: local memory exceeded: {} = {} B > {} B ({what})",
            parts.join(", "),
            t.memory(),
            r.memory
        )));
    }
    for (used, limit, dir) in [
        (&t.s2mm, r.s2mm, "input (S2MM)"),
        (&t.mm2s, r.mm2s, "output (MM2S)"),
    ] {
        if used.len() as u32 > limit {
            let names: Vec<String> = used.iter().map(|n| format!("`{n}`")).collect();
            let last = used.last().expect("over a limit");
            let route = design
                .fifos
                .iter()
                .find(|f| &f.name == last)
                .map(|f| {
                    let to: Vec<String> = f
                        .consumers
                        .iter()
                        .map(|c| format!("({}, {})", c.0, c.1))
                        .collect();
                    format!(
                        ": fifo `{}` from ({}, {}) to {} cannot be routed",
                        f.name,
                        f.producer.0,
                        f.producer.1,
                        to.join(", ")
                    )
                })
                .unwrap_or_default();
            return Err(EmitError::plain(format!(
                "{who}: {} {dir} DMA channels needed ({}), {limit} available ({what}){route}",
                used.len(),
                names.join(", ")
            )));
        }
    }
    if t.locks > u64::from(r.locks) {
        return Err(EmitError::plain(format!(
            "{who}: {} locks needed (two per pool of {} pools), {} available ({what})",
            t.locks,
            t.pools.len(),
            r.locks
        )));
    }
    if t.bds > u64::from(r.bds) {
        return Err(EmitError::plain(format!(
            "{who}: {} buffer descriptors needed (one per buffer at each DMA end), {} available ({what})",
            t.bds, r.bds
        )));
    }
    Ok(())
}
