//! The `--report` of `pto-wsp emit aie`: placement, routing and budget tables of a design, and
//! its throughput model.
//!
//! Why: a user placing work on a spatial array needs to see where each process or grid cell
//! landed, how every fifo is routed and how close each tile is to its limits, without reading
//! MLIR.
//!
//! Promise: every number printed is read from the [`AieDesign`] (and [`super::model`]); the
//! tables list every core, fifo, link, host transfer and used tile, in the design's order.

use super::design::*;
use super::mlir::memref;
use super::model::Throughput;
use std::fmt::Write as _;

/// The report of `d` with its throughput model `t`.
pub fn report(d: &AieDesign, t: &Throughput) -> String {
    let mut s = String::new();
    let dev = d.device;
    let _ = writeln!(
        s,
        "placement of `{}` on {} ({}), grid {} x {}",
        d.entry, dev.name, dev.family, d.grid.0, d.grid.1
    );
    for c in &d.cores {
        let mut ks: Vec<&str> = Vec::new();
        kernels_of(&c.program, d, &mut ks);
        let _ = writeln!(
            s,
            "  core ({}, {})  {:<22} kernels {}",
            c.tile.0,
            c.tile.1,
            c.label,
            ks.join(", ")
        );
    }
    let _ = writeln!(s, "fifos");
    for f in &d.fifos {
        let to: Vec<String> = f.consumers.iter().map(|&c| short(d, c)).collect();
        let kind = match f.kind {
            FifoKind::Shared { owner } => format!("shared (pool on ({}, {}))", owner.0, owner.1),
            FifoKind::Dma => "dma".to_string(),
        };
        let _ = writeln!(
            s,
            "  {:<12} {} -> {}  depth {}  {}  {} B  {} objects  {kind}  {}",
            f.name,
            short(d, f.producer),
            to.join(", "),
            f.depth,
            memref(&f.obj),
            f.obj.bytes(),
            f.objects,
            f.carries
        );
    }
    if !d.links.is_empty() {
        let _ = writeln!(s, "links");
        for l in &d.links {
            let n = |v: &[usize]| {
                v.iter()
                    .map(|&i| d.fifos[i].name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let what = if l.ins.len() > 1 {
                "join"
            } else {
                "one-to-one"
            };
            let _ = writeln!(
                s,
                "  memory tile ({}, {})  [{}] -> [{}]  {what}{}",
                l.tile.0,
                l.tile.1,
                n(&l.ins),
                n(&l.outs),
                if l.src_offsets.is_empty() {
                    String::new()
                } else {
                    format!(" at element offsets {:?}", l.src_offsets)
                }
            );
        }
    }
    let _ = writeln!(s, "host transfers");
    for tr in &d.transfers {
        let h = &d.host[tr.host];
        let _ = writeln!(
            s,
            "  {} {} {}  offset {} sizes {:?} strides {:?}",
            if tr.output { "to host  " } else { "from host" },
            h.name,
            d.fifos[tr.fifo].name,
            tr.offset,
            tr.sizes,
            tr.strides
        );
    }
    let _ = writeln!(
        s,
        "budgets                 memory                 S2MM  MM2S  locks  BDs"
    );
    for b in &d.budgets {
        let r = dev.resources(b.kind);
        let mem = if r.memory == 0 {
            "-".to_string()
        } else {
            format!("{}/{} B", b.memory(), r.memory)
        };
        let _ = writeln!(
            s,
            "  ({}, {}) {:<8}        {:<22} {}/{}   {}/{}   {}/{}  {}/{}",
            b.tile.0,
            b.tile.1,
            b.kind.word(),
            mem,
            b.s2mm.len(),
            r.s2mm,
            b.mm2s.len(),
            r.mm2s,
            b.locks,
            r.locks,
            b.bds,
            r.bds
        );
    }
    let _ = write!(s, "{t}");
    for n in &d.notes {
        let _ = writeln!(s, "note: {n}");
    }
    s
}

fn short(d: &AieDesign, t: TileId) -> String {
    match d.device.tile_kind(t.0, t.1) {
        Some(pto_wsp_ir::spatial::device::TileKind::Shim) => format!("shim ({}, {})", t.0, t.1),
        Some(pto_wsp_ir::spatial::device::TileKind::Mem) => format!("mem ({}, {})", t.0, t.1),
        _ => format!("({}, {})", t.0, t.1),
    }
}

fn kernels_of<'d>(steps: &[Step], d: &'d AieDesign, out: &mut Vec<&'d str>) {
    for st in steps {
        match st {
            Step::Loop { body, .. } => kernels_of(body, d, out),
            Step::Call { kernel, .. } => {
                let n = d.kernels[*kernel].name.as_str();
                if !out.contains(&n) {
                    out.push(n);
                }
            }
            _ => {}
        }
    }
}
