//! The spatial mapper: a resolved entry point and its spatial map, placed and routed on a
//! device as an [`AieDesign`].
//!
//! Why: the AIE array runs each part of a program on its own compute tile and moves data in
//! ObjectFIFOs. This module decides which core runs which tasks, which objects each core
//! acquires and releases, how every fifo is routed (shared memory between neighbouring cores,
//! DMA otherwise, through a memory tile for a broadcast or a join), and the host transfers of
//! the runtime sequence; then it checks every tile's budget against the device table.
//!
//! How: the entry point is expanded once with the reference expander (a pipeline process by
//! process), so every task's regions are known. A workload's tasks go to the grid cell their
//! regions' layouts name ([`super::layout`]); a pipeline's processes go one per core (pinned by
//! `place`, else the next free cell in column-major order). On each core, consecutive tasks
//! touching the same region share one acquired object (the GEMM's output tile is acquired once,
//! zeroed, accumulated, released). The per-core step sequence is folded into loops where it
//! repeats.
//!
//! Promise: every refusal is an [`EmitError`] naming the tile and the resource (or the task and
//! both tensors for a layout mismatch), at the construct's location when it has one; nothing is
//! placed silently outside the device's limits.

use super::design::*;
use super::layout::{TensorLayout, TileSet};
use super::transfer;
use crate::{EmitError, Input};
use pto_wsp_ir::eval::eval;
use pto_wsp_ir::expand::{
    ChannelPort, ExpandOptions, ExpandSink, ExpandedTask, OrderEdge, expand, expand_process,
};
use pto_wsp_ir::module::ParamKind;
use pto_wsp_ir::spatial::SpatialMap;
use pto_wsp_ir::spatial::device::{self, Device, TileKind};
use pto_wsp_ir::value::Value;
use pto_wsp_ir::{Access, Loc, ParamType, Resolved};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::ControlFlow;

/// Depth of the fifos the mapper creates itself (host streams, links): double buffering,
/// mlir-aie's default.
pub const DEFAULT_DEPTH: u64 = 2;

/// Maps the entry point of `input` by its spatial map.
pub fn map(input: &Input<'_>) -> Result<AieDesign, EmitError> {
    let res = input.resolved;
    let m = &res.module;
    let smap = m.spatial_map_for(&res.entry).ok_or_else(|| {
        EmitError::plain(format!(
            "entry `{}` has no spatial map: write `spatial_map NAME for {} {{ device ...; grid R x C; ... }}`",
            res.entry, res.entry
        ))
    })?;
    let dev_name = smap.device.as_ref().map_or("", |d| d.as_str());
    let dev = device::device(dev_name)
        .ok_or_else(|| EmitError::at(smap.loc, format!("unknown device `{dev_name}`")))?;
    let g = smap
        .grid
        .ok_or_else(|| EmitError::at(smap.loc, "the spatial map has no grid"))?;
    let grid = (g.rows, g.cols);
    let shapes = shapes(input)?;
    let mut cx = Mapper {
        input,
        res,
        smap,
        dev,
        grid,
        shapes,
        kernels: Vec::new(),
        cores: Vec::new(),
        notes: Vec::new(),
    };
    if res.csp {
        cx.pipeline()?;
    } else {
        cx.workload()?;
    }
    cx.route()
}

fn shapes(input: &Input<'_>) -> Result<Vec<Vec<u64>>, EmitError> {
    let m = &input.resolved.module;
    let lookup = |name: &str| input.bindings.symbols.get(name).copied();
    m.tensors
        .iter()
        .map(|t| {
            t.shape
                .iter()
                .enumerate()
                .map(|(d, e)| match eval(e, &lookup) {
                    Ok(Value::I64(x)) if x > 0 => Ok(x as u64),
                    Ok(Value::U64(x)) if x > 0 => Ok(x),
                    Ok(v) => Err(EmitError::at(
                        t.name.loc,
                        format!(
                            "dimension {d} of tensor `{}` is {v}, not a positive extent",
                            t.name
                        ),
                    )),
                    Err(err) => Err(EmitError::at(
                        t.name.loc,
                        format!(
                            "dimension {d} of tensor `{}`: {err} (bind it with `//@ bind`)",
                            t.name
                        ),
                    )),
                })
                .collect()
        })
        .collect()
}

/// One direction of one tensor on one core: the objects it acquires, in order.
#[derive(Clone, Debug)]
struct Role {
    tensor: u32,
    output: bool,
    /// (start, size) of each object.
    blocks: Vec<(Vec<u64>, Vec<u64>)>,
}

/// A core before routing: its cell, its tasks, its steps over roles.
struct CoreWork {
    cell: (u64, u64),
    label: String,
    /// Process index (pipelines).
    process: Option<usize>,
    roles: Vec<Role>,
    /// Steps whose `fifo` is a role index until routing.
    steps: Vec<Step>,
    /// The location of the first task (for messages).
    loc: Loc,
}

struct Mapper<'a> {
    input: &'a Input<'a>,
    res: &'a Resolved,
    smap: &'a SpatialMap,
    dev: &'static Device,
    grid: (u64, u64),
    shapes: Vec<Vec<u64>>,
    kernels: Vec<KernelSig>,
    cores: Vec<CoreWork>,
    notes: Vec<String>,
}

type Key = (u32, Vec<u64>, Vec<u64>);

impl Mapper<'_> {
    fn tensor_name(&self, t: u32) -> &str {
        self.res.module.tensors[t as usize].name.as_str()
    }

    fn tile_of(&self, cell: (u64, u64)) -> TileId {
        (cell.1 as u32, self.dev.first_compute_row + cell.0 as u32)
    }

    fn region_text(&self, t: u32, start: &[u64], size: &[u64]) -> String {
        let dims: Vec<String> = start
            .iter()
            .zip(size)
            .map(|(s, n)| format!("{s}..{}", s + n))
            .collect();
        format!("{}[{}]", self.tensor_name(t), dims.join(", "))
    }

    // ----- workloads ---------------------------------------------------------------------

    fn workload(&mut self) -> Result<(), EmitError> {
        let exp = expand(self.res, self.input.bindings, &ExpandOptions::default())
            .map_err(|e| EmitError::plain(format!("expanding `{}`: {e}", self.res.entry)))?;
        let layouts = self.layouts()?;
        let mut by_cell: BTreeMap<(u64, u64), Vec<ExpandedTask>> = BTreeMap::new();
        for t in exp.tasks {
            let cell = self.cell_of(&t, &layouts)?;
            by_cell.entry(cell).or_default().push(t);
        }
        for (cell, tasks) in by_cell {
            let label = format!("grid cell ({}, {})", cell.0, cell.1);
            let core = self.core_work(cell, label, None, &tasks)?;
            self.cores.push(core);
        }
        Ok(())
    }

    fn layouts(&self) -> Result<Vec<Option<TensorLayout>>, EmitError> {
        let mut out = vec![None; self.shapes.len()];
        for l in &self.smap.layouts {
            let Some(t) = self
                .res
                .module
                .tensors
                .iter()
                .position(|t| t.name.as_str() == l.tensor.as_str())
            else {
                return Err(EmitError::at(
                    l.loc,
                    format!("unknown tensor `{}`", l.tensor),
                ));
            };
            out[t] = Some(
                TensorLayout::new(l, &self.shapes[t], self.grid)
                    .map_err(|e| EmitError::at(l.loc, e))?,
            );
        }
        Ok(out)
    }

    /// The grid cell a task runs on: where all its regions' layouts agree.
    fn cell_of(
        &self,
        t: &ExpandedTask,
        layouts: &[Option<TensorLayout>],
    ) -> Result<(u64, u64), EmitError> {
        let kname = self.res.module.kernels[t.kernel as usize].name.as_str();
        let at = self.input.position(t.loc);
        let mut set = TileSet::default();
        let mut first: Option<(String, String, TileSet)> = None;
        for r in &t.regions {
            let Some(l) = &layouts[r.tensor as usize] else {
                continue;
            };
            let (start, size) = region(r);
            let text = self.region_text(r.tensor, &start, &size);
            let here = l.region_tiles(&start, &size).map_err(|e| {
                EmitError::at(
                    t.loc,
                    format!(
                        "task `{kname}` at {at}: region {text} lies on no single grid cell: {e}"
                    ),
                )
            })?;
            match set.meet(&here) {
                Some(s) => set = s,
                None => {
                    let (ftext, flayout, fset) = first.clone().unwrap_or_default();
                    return Err(EmitError::at(
                        t.loc,
                        format!(
                            "layout mismatch: layouts of `{}` and `{}` disagree for task `{kname}` at {at}: `{flayout}` puts {ftext} on {fset}, `{}` puts {text} on {here}",
                            ftext.split('[').next().unwrap_or(""),
                            self.tensor_name(r.tensor),
                            l.text
                        ),
                    ));
                }
            }
            if first.is_none() {
                first = Some((text, l.text.clone(), here));
            }
        }
        for (axis, v, n) in [("row", set.row, self.grid.0), ("col", set.col, self.grid.1)] {
            if v.is_none() && n > 1 {
                return Err(EmitError::at(
                    t.loc,
                    format!(
                        "task `{kname}` at {at}: no layout places it on grid axis `{axis}` ({n} cells): shard a tensor it touches over `{axis}`"
                    ),
                ));
            }
        }
        Ok((set.row.unwrap_or(0), set.col.unwrap_or(0)))
    }

    // ----- pipelines ---------------------------------------------------------------------

    fn pipeline(&mut self) -> Result<(), EmitError> {
        let res = self.res;
        let n = res.processes.len() as u64;
        let cells = self.grid.0 * self.grid.1;
        let pipe_loc = res
            .module
            .pipeline(&res.entry)
            .map_or(Loc::NONE, |p| p.name.loc);
        if n > cells {
            return Err(EmitError::at(
                pipe_loc,
                format!(
                    "too many processes for the grid: pipeline `{}` has {n} processes, grid {} x {} has {cells} cells ({} has {} compute tiles)",
                    res.entry,
                    self.grid.0,
                    self.grid.1,
                    self.dev.name,
                    self.dev.compute_tiles()
                ),
            ));
        }
        let cell_of = self.place()?;
        let tasks = self.run_processes()?;
        for (p, tasks) in tasks.into_iter().enumerate() {
            let label = format!("process {}", res.processes[p].name);
            let core = self.core_work(cell_of[p], label, Some(p), &tasks)?;
            self.cores.push(core);
        }
        self.cores.sort_by_key(|c| (c.cell.1, c.cell.0));
        Ok(())
    }

    /// One cell per process: `place` first, then column-major.
    fn place(&self) -> Result<Vec<(u64, u64)>, EmitError> {
        let res = self.res;
        let mut cells = vec![None; res.processes.len()];
        let mut used = std::collections::HashSet::new();
        for (i, p) in res.processes.iter().enumerate() {
            if let Some(c) = self.smap.place(&p.name) {
                cells[i] = Some(c);
                used.insert(c);
            }
        }
        let mut free = (0..self.grid.1)
            .flat_map(|c| (0..self.grid.0).map(move |r| (r, c)))
            .filter(|c| !used.contains(c));
        Ok(cells
            .into_iter()
            .map(|c| c.or_else(|| free.next()).expect("counted above"))
            .collect())
    }

    /// Every process's tasks, producers before consumers (channels as unbounded queues).
    fn run_processes(&self) -> Result<Vec<Vec<ExpandedTask>>, EmitError> {
        let res = self.res;
        let np = res.processes.len();
        let mut deps = vec![Vec::new(); np];
        for ch in &res.channels {
            for &c in &ch.consumers {
                deps[c as usize].extend(ch.producers.iter().map(|&p| p as usize));
            }
        }
        let mut order = Vec::new();
        let mut done = vec![false; np];
        while order.len() < np {
            let next = (0..np).find(|&p| !done[p] && deps[p].iter().all(|&d| done[d] || d == p));
            let Some(p) = next else {
                return Err(EmitError::plain(format!(
                    "pipeline `{}`: its channels form a cycle; an AIE design needs producers before consumers",
                    res.entry
                )));
            };
            done[p] = true;
            order.push(p);
        }
        struct Queues(Vec<VecDeque<Value>>);
        impl ChannelPort for Queues {
            fn send(&mut self, channel: u32, value: Value) -> ControlFlow<()> {
                self.0[channel as usize].push_back(value);
                ControlFlow::Continue(())
            }
            fn recv(&mut self, channel: u32) -> ControlFlow<(), Option<Value>> {
                ControlFlow::Continue(self.0[channel as usize].pop_front())
            }
        }
        struct Collect(Vec<ExpandedTask>);
        impl ExpandSink for Collect {
            fn task(&mut self, _: u32, t: &ExpandedTask) -> ControlFlow<()> {
                self.0.push(t.clone());
                ControlFlow::Continue(())
            }
            fn order(&mut self, _: OrderEdge) {}
        }
        let mut q = Queues(vec![VecDeque::new(); res.channels.len()]);
        let mut out = vec![Vec::new(); np];
        for p in order {
            let mut sink = Collect(Vec::new());
            expand_process(
                res,
                self.input.bindings,
                &ExpandOptions::default(),
                p,
                &mut q,
                &mut sink,
            )
            .map_err(|e| {
                EmitError::plain(format!(
                    "expanding process `{}`: {e}",
                    res.processes[p].name
                ))
            })?;
            out[p] = sink.0;
        }
        Ok(out)
    }

    // ----- one core's steps --------------------------------------------------------------

    fn core_work(
        &mut self,
        cell: (u64, u64),
        label: String,
        process: Option<usize>,
        tasks: &[ExpandedTask],
    ) -> Result<CoreWork, EmitError> {
        let mut roles: Vec<Role> = Vec::new();
        let mut steps = Vec::new();
        let mut held: Vec<(Key, usize, bool)> = Vec::new();
        let keys = |t: &ExpandedTask| -> Vec<Key> {
            t.regions
                .iter()
                .map(|r| {
                    let (s, z) = region(r);
                    (r.tensor, s, z)
                })
                .collect()
        };
        for (i, t) in tasks.iter().enumerate() {
            let kernel = self.kernel_sig(t)?;
            let decl = &self.res.module.kernels[t.kernel as usize];
            let mut objects = Vec::new();
            for (r, key) in t.regions.iter().zip(keys(t)) {
                if let Some(h) = held.iter().find(|h| h.0 == key) {
                    if !h.2 && r.access != Access::In {
                        return Err(self.err_task(
                            t,
                            format!(
                                "writes {} which the core received as an input object; write it to another tensor",
                                self.region_text(key.0, &key.1, &key.2)
                            ),
                        ));
                    }
                    objects.push(CallArg::Object {
                        fifo: h.1,
                        port: port(h.2),
                    });
                    continue;
                }
                let output = match r.access {
                    Access::In => false,
                    Access::Out => true,
                    Access::InOut => {
                        return Err(self.err_task(
                            t,
                            format!(
                                "reads {} (`inout`) before any task of {label} writes it; initial contents from the host are not streamed to a core: write it on the core first (a `zero` task)",
                                self.region_text(key.0, &key.1, &key.2)
                            ),
                        ));
                    }
                };
                let role = match roles
                    .iter()
                    .position(|ro| ro.tensor == key.0 && ro.output == output)
                {
                    Some(p) => p,
                    None => {
                        roles.push(Role {
                            tensor: key.0,
                            output,
                            blocks: Vec::new(),
                        });
                        roles.len() - 1
                    }
                };
                if let Some((s0, z0)) = roles[role].blocks.first()
                    && *z0 != key.2
                {
                    let _ = s0;
                    return Err(self.err_task(
                        t,
                        format!(
                            "{} is {:?} elements but earlier objects of `{}` on {label} are {:?}: a fifo's objects have one shape",
                            self.region_text(key.0, &key.1, &key.2),
                            key.2,
                            self.tensor_name(key.0),
                            z0
                        ),
                    ));
                }
                roles[role].blocks.push((key.1.clone(), key.2.clone()));
                steps.push(Step::Acquire {
                    fifo: role,
                    port: port(output),
                });
                objects.push(CallArg::Object {
                    fifo: role,
                    port: port(output),
                });
                held.push((key, role, output));
            }
            let mut args = Vec::new();
            let (mut ri, mut si) = (0, 0);
            for p in &decl.params {
                match p.kind {
                    ParamKind::Tile { .. } => {
                        args.push(objects[ri].clone());
                        ri += 1;
                    }
                    ParamKind::Scalar(ty) => {
                        args.push(CallArg::Scalar(t.params[si], scalar_type(ty)));
                        si += 1;
                    }
                }
            }
            steps.push(Step::Call { kernel, args });
            let next: Vec<Key> = tasks.get(i + 1).map(keys).unwrap_or_default();
            held.retain(|h| {
                if next.contains(&h.0) {
                    return true;
                }
                steps.push(Step::Release {
                    fifo: h.1,
                    port: port(h.2),
                });
                false
            });
        }
        Ok(CoreWork {
            cell,
            label,
            process,
            roles,
            steps,
            loc: tasks.first().map_or(Loc::NONE, |t| t.loc),
        })
    }

    fn err_task(&self, t: &ExpandedTask, what: String) -> EmitError {
        let kname = self.res.module.kernels[t.kernel as usize].name.as_str();
        EmitError::at(
            t.loc,
            format!("task `{kname}` at {}: {what}", self.input.position(t.loc)),
        )
    }

    /// The signature of the task's kernel (registered on first use; every call must agree).
    fn kernel_sig(&mut self, t: &ExpandedTask) -> Result<usize, EmitError> {
        let decl = &self.res.module.kernels[t.kernel as usize];
        if decl.body.is_none() {
            return Err(self.err_task(
                t,
                format!(
                    "kernel `{}` has no body in tile instructions; an AIE core calls kernels written in tile instructions",
                    decl.name
                ),
            ));
        }
        let mut params = Vec::new();
        let mut ri = 0;
        for p in &decl.params {
            match p.kind {
                ParamKind::Tile { dtype, .. } => {
                    let (_, size) = region(&t.regions[ri]);
                    params.push(ArgType::Object(ObjType { shape: size, dtype }));
                    ri += 1;
                }
                ParamKind::Scalar(ty) => params.push(ArgType::Scalar(scalar_type(ty))),
            }
        }
        if let Some(k) = self
            .kernels
            .iter()
            .position(|k| k.decl == t.kernel as usize)
        {
            if self.kernels[k].params != params {
                return Err(self.err_task(
                    t,
                    format!(
                        "kernel `{}` is called with regions of another shape than before; an external AIE kernel has one signature",
                        decl.name
                    ),
                ));
            }
            return Ok(k);
        }
        self.kernels.push(KernelSig {
            name: decl.name.name.clone(),
            decl: t.kernel as usize,
            params,
        });
        Ok(self.kernels.len() - 1)
    }

    // ----- routing -----------------------------------------------------------------------

    fn route(self) -> Result<AieDesign, EmitError> {
        let mut r = Router {
            dev: self.dev,
            fifos: Vec::new(),
            links: Vec::new(),
            transfers: Vec::new(),
            host: Vec::new(),
            assign: HashMap::new(),
            shim_out: HashMap::new(),
            shim_in: HashMap::new(),
        };
        let tiles: Vec<TileId> = self.cores.iter().map(|c| self.tile_of(c.cell)).collect();
        if self.res.csp {
            self.route_pipeline(&mut r, &tiles)?;
        } else {
            self.route_workload(&mut r, &tiles)?;
        }
        let mut cores = Vec::new();
        for (ci, c) in self.cores.iter().enumerate() {
            let steps = rewrite(&c.steps, &|role, _| r.assign[&(ci, role)].0);
            cores.push(Core {
                tile: tiles[ci],
                label: c.label.clone(),
                program: compress(&steps),
            });
        }
        cores.sort_by_key(|c| c.tile);
        let mut design = AieDesign {
            device: self.dev,
            entry: self.res.entry.clone(),
            grid: self.grid,
            kernels: self.kernels,
            tiles: Vec::new(),
            fifos: r.fifos,
            links: r.links,
            cores,
            host: r.host,
            transfers: r.transfers,
            budgets: Vec::new(),
            notes: self.notes,
        };
        design.host.sort_by_key(|h| h.tensor);
        let order: Vec<u32> = design.host.iter().map(|h| h.tensor).collect();
        for t in &mut design.transfers {
            t.host = order
                .iter()
                .position(|&x| x == t.host as u32)
                .expect("host arg");
        }
        super::budget::check(&mut design)?;
        Ok(design)
    }

    fn route_workload(&self, r: &mut Router, tiles: &[TileId]) -> Result<(), EmitError> {
        let nt = self.shapes.len() as u32;
        for t in 0..nt {
            let readers: Vec<(usize, usize)> = self.roles_of(t, false);
            let writers: Vec<(usize, usize)> = self.roles_of(t, true);
            if !readers.is_empty() && !writers.is_empty() {
                let (c, _) = writers[0];
                return Err(EmitError::at(
                    self.cores[c].loc,
                    format!(
                        "tensor `{}` is written on {} and read on {}: a workload's cores exchange data with the host only (use a pipeline's channels to pass data between cores)",
                        self.tensor_name(t),
                        self.cores[c].label,
                        self.cores[readers[0].0].label
                    ),
                ));
            }
            // Inputs: cores reading the same object sequence share one broadcast.
            let mut groups: Vec<(Vec<(usize, usize)>, &Role)> = Vec::new();
            for &(c, ro) in &readers {
                let role = &self.cores[c].roles[ro];
                match groups.iter_mut().find(|g| g.1.blocks == role.blocks) {
                    Some(g) => g.0.push((c, ro)),
                    None => groups.push((vec![(c, ro)], role)),
                }
            }
            for (gi, (members, role)) in groups.iter().enumerate() {
                let consumers: Vec<TileId> = members.iter().map(|&(c, _)| tiles[c]).collect();
                let obj = self.obj(role);
                let n = role.blocks.len() as u64;
                let name = self.tensor_name(t);
                let fifo = if consumers.len() == 1 {
                    let col = r.pick_shim(consumers[0].0, false, &self.label(members[0].0))?;
                    let f = r.fifo(Fifo {
                        name: format!("{name}_{}_{}", consumers[0].0, consumers[0].1),
                        producer: (col, self.dev.shim_row),
                        consumers,
                        depth: DEFAULT_DEPTH,
                        obj,
                        kind: FifoKind::Dma,
                        objects: n,
                        carries: format!("host {name}"),
                    });
                    self.transfer(r, f, t, &role.blocks, false)?;
                    f
                } else {
                    let col = r.pick_shim(consumers[0].0, false, &self.label(members[0].0))?;
                    let mem = (col, self.dev.mem_row);
                    let fin = r.fifo(Fifo {
                        name: format!("{name}_in{gi}"),
                        producer: (col, self.dev.shim_row),
                        consumers: vec![mem],
                        depth: DEFAULT_DEPTH,
                        obj: obj.clone(),
                        kind: FifoKind::Dma,
                        objects: n,
                        carries: format!("host {name}"),
                    });
                    self.transfer(r, fin, t, &role.blocks, false)?;
                    let out = r.fifo(Fifo {
                        name: format!("{name}_bc{gi}"),
                        producer: mem,
                        consumers,
                        depth: DEFAULT_DEPTH,
                        obj,
                        kind: FifoKind::Dma,
                        objects: n,
                        carries: format!("broadcast of {name}"),
                    });
                    r.links.push(Link {
                        tile: mem,
                        ins: vec![fin],
                        outs: vec![out],
                        src_offsets: Vec::new(),
                    });
                    out
                };
                for &(c, ro) in members {
                    r.assign.insert((c, ro), (fifo, Port::Consume));
                }
            }
            // Outputs: per column, one core straight to the shim, several joined in the
            // column's memory tile.
            let mut by_col: BTreeMap<u32, Vec<(usize, usize)>> = BTreeMap::new();
            for &(c, ro) in &writers {
                by_col.entry(tiles[c].0).or_default().push((c, ro));
            }
            for (col, mut members) in by_col {
                members.sort_by_key(|&(c, _)| tiles[c].1);
                let name = self.tensor_name(t);
                if members.len() == 1 {
                    let (c, ro) = members[0];
                    let role = &self.cores[c].roles[ro];
                    let scol = r.pick_shim(col, true, &self.label(c))?;
                    let f = r.fifo(Fifo {
                        name: format!("{name}_{}_{}", tiles[c].0, tiles[c].1),
                        producer: tiles[c],
                        consumers: vec![(scol, self.dev.shim_row)],
                        depth: DEFAULT_DEPTH,
                        obj: self.obj(role),
                        kind: FifoKind::Dma,
                        objects: role.blocks.len() as u64,
                        carries: format!("host {name}"),
                    });
                    self.transfer(r, f, t, &role.blocks, true)?;
                    r.assign.insert((c, ro), (f, Port::Produce));
                    continue;
                }
                self.join(r, t, col, &members, tiles)?;
            }
        }
        Ok(())
    }

    fn join(
        &self,
        r: &mut Router,
        t: u32,
        col: u32,
        members: &[(usize, usize)],
        tiles: &[TileId],
    ) -> Result<(), EmitError> {
        let name = self.tensor_name(t);
        let mem = (col, self.dev.mem_row);
        let first = &self.cores[members[0].0].roles[members[0].1];
        let n = first.blocks.len();
        let obj = self.obj(first);
        let mut ins = Vec::new();
        let mut offsets = Vec::new();
        for (k, &(c, ro)) in members.iter().enumerate() {
            let role = &self.cores[c].roles[ro];
            if role.blocks.len() != n {
                return Err(EmitError::at(
                    self.cores[c].loc,
                    format!(
                        "{} writes {} objects of `{name}`, {} writes {n}: outputs joined in memory tile ({col}, {}) need as many objects from each core",
                        self.cores[c].label,
                        role.blocks.len(),
                        self.cores[members[0].0].label,
                        self.dev.mem_row
                    ),
                ));
            }
            let f = r.fifo(Fifo {
                name: format!("{name}_{}_{}", tiles[c].0, tiles[c].1),
                producer: tiles[c],
                consumers: vec![mem],
                depth: DEFAULT_DEPTH,
                obj: obj.clone(),
                kind: FifoKind::Dma,
                objects: n as u64,
                carries: format!("part {k} of {name}_out{col}"),
            });
            r.assign.insert((c, ro), (f, Port::Produce));
            ins.push(f);
            offsets.push(k as u64 * obj.elements());
        }
        let mut joined = obj.clone();
        joined.shape[0] *= members.len() as u64;
        let scol = r.pick_shim(
            col,
            true,
            &format!(
                "join of `{name}` in memory tile ({col}, {})",
                self.dev.mem_row
            ),
        )?;
        let out = r.fifo(Fifo {
            name: format!("{name}_out{col}"),
            producer: mem,
            consumers: vec![(scol, self.dev.shim_row)],
            depth: DEFAULT_DEPTH,
            obj: joined,
            kind: FifoKind::Dma,
            objects: n as u64,
            carries: format!("host {name} (joined)"),
        });
        r.links.push(Link {
            tile: mem,
            ins,
            outs: vec![out],
            src_offsets: offsets,
        });
        let mut blocks = Vec::new();
        for k in 0..n {
            for &(c, ro) in members {
                blocks.push(self.cores[c].roles[ro].blocks[k].clone());
            }
        }
        self.transfer(r, out, t, &blocks, true)
    }

    /// Routes every tensor of a pipeline: from the host, to the host, or over the channel that
    /// joins its writer to its readers.
    fn route_pipeline(&self, r: &mut Router, tiles: &[TileId]) -> Result<(), EmitError> {
        for t in 0..self.shapes.len() as u32 {
            let readers = self.roles_of(t, false);
            let writers = self.roles_of(t, true);
            let name = self.tensor_name(t);
            if writers.len() > 1 {
                return Err(EmitError::plain(format!(
                    "tensor `{name}` is written by {} and {}: on an AIE array one core produces each tensor",
                    self.cores[writers[0].0].label, self.cores[writers[1].0].label
                )));
            }
            match (writers.first(), readers.is_empty()) {
                (None, _) => self.route_host_inputs(r, tiles, t, &readers)?,
                (Some(&w), true) => self.route_host_output(r, tiles, t, w)?,
                (Some(&w), false) => {
                    let ch = self.channel_of(t, w, &readers)?;
                    self.route_channel(r, tiles, t, w, &readers, ch);
                }
            }
        }
        Ok(())
    }

    /// A tensor no core writes: one fifo from a shim tile to each reader.
    fn route_host_inputs(
        &self,
        r: &mut Router,
        tiles: &[TileId],
        t: u32,
        readers: &[(usize, usize)],
    ) -> Result<(), EmitError> {
        let name = self.tensor_name(t);
        for &(c, ro) in readers {
            let role = &self.cores[c].roles[ro];
            let col = r.pick_shim(tiles[c].0, false, &self.label(c))?;
            let fname = if readers.len() == 1 {
                name.to_string()
            } else {
                format!(
                    "{name}_{}",
                    self.res.processes[self.cores[c].process.unwrap_or(0)].name
                )
            };
            let f = r.fifo(Fifo {
                name: fname,
                producer: (col, self.dev.shim_row),
                consumers: vec![tiles[c]],
                depth: DEFAULT_DEPTH,
                obj: self.obj(role),
                kind: FifoKind::Dma,
                objects: role.blocks.len() as u64,
                carries: format!("host {name}"),
            });
            self.transfer(r, f, t, &role.blocks, false)?;
            r.assign.insert((c, ro), (f, Port::Consume));
        }
        Ok(())
    }

    /// A tensor no core reads: one fifo from its writer to a shim tile.
    fn route_host_output(
        &self,
        r: &mut Router,
        tiles: &[TileId],
        t: u32,
        (pc, pro): (usize, usize),
    ) -> Result<(), EmitError> {
        let name = self.tensor_name(t);
        let prole = &self.cores[pc].roles[pro];
        let col = r.pick_shim(tiles[pc].0, true, &self.label(pc))?;
        let f = r.fifo(Fifo {
            name: name.to_string(),
            producer: tiles[pc],
            consumers: vec![(col, self.dev.shim_row)],
            depth: DEFAULT_DEPTH,
            obj: self.obj(prole),
            kind: FifoKind::Dma,
            objects: prole.blocks.len() as u64,
            carries: format!("host {name}"),
        });
        self.transfer(r, f, t, &prole.blocks, true)?;
        r.assign.insert((pc, pro), (f, Port::Produce));
        Ok(())
    }

    /// The one channel carrying tensor `t` from its writer to every reader, each reader reading
    /// the objects as they are written.
    fn channel_of(
        &self,
        t: u32,
        (pc, pro): (usize, usize),
        readers: &[(usize, usize)],
    ) -> Result<usize, EmitError> {
        let res = self.res;
        let name = self.tensor_name(t);
        let prole = &self.cores[pc].roles[pro];
        let pp = self.cores[pc].process.expect("pipeline core");
        let mut chan = None;
        for &(c, ro) in readers {
            let qp = self.cores[c].process.expect("pipeline core");
            if c == pc {
                return Err(EmitError::at(
                    self.cores[c].loc,
                    format!(
                        "tensor `{name}` is written and read by {} only: core-local scratch tensors are not placed yet; pass it through a channel",
                        self.cores[c].label
                    ),
                ));
            }
            let ch = res.channels.iter().position(|ch| {
                ch.producers.contains(&(pp as u32)) && ch.consumers.contains(&(qp as u32))
            });
            let Some(ch) = ch else {
                return Err(EmitError::at(
                    self.cores[c].loc,
                    format!(
                        "tensor `{name}` is written by process `{}` and read by process `{}`, but no channel joins them: on an AIE array data moves in a channel's ObjectFIFO",
                        res.processes[pp].name, res.processes[qp].name
                    ),
                ));
            };
            let role = &self.cores[c].roles[ro];
            if role.blocks != prole.blocks {
                return Err(self.layout_mismatch(t, ch, (pc, pro), (c, ro)));
            }
            if chan.is_some_and(|x| x != ch) {
                return Err(EmitError::plain(format!(
                    "tensor `{name}` goes to its readers over two channels; one fifo carries it"
                )));
            }
            chan = Some(ch);
        }
        Ok(chan.expect("readers"))
    }

    /// The error for a reader `(c, ro)` reading tensor `t` in other objects than writer
    /// `(pc, pro)` writes them on channel `ch`: the first object that differs, as both see it.
    fn layout_mismatch(
        &self,
        t: u32,
        ch: usize,
        (pc, pro): (usize, usize),
        (c, ro): (usize, usize),
    ) -> EmitError {
        let res = self.res;
        let name = self.tensor_name(t);
        let prole = &self.cores[pc].roles[pro];
        let role = &self.cores[c].roles[ro];
        let (pp, qp) = (
            self.cores[pc].process.expect("pipeline core"),
            self.cores[c].process.expect("pipeline core"),
        );
        let k = role
            .blocks
            .iter()
            .zip(&prole.blocks)
            .position(|(a, b)| a != b)
            .unwrap_or(role.blocks.len().min(prole.blocks.len()));
        let show = |b: Option<&(Vec<u64>, Vec<u64>)>| {
            b.map_or("nothing".to_string(), |(s, z)| self.region_text(t, s, z))
        };
        EmitError::at(
            self.cores[c].loc,
            format!(
                "layout mismatch on channel `{}`: object {k} of `{name}` is {} as process `{}` writes it but {} as process `{}` reads it ({} objects written, {} read)",
                res.channels[ch].name,
                show(prole.blocks.get(k)),
                res.processes[pp].name,
                show(role.blocks.get(k)),
                res.processes[qp].name,
                prole.blocks.len(),
                role.blocks.len()
            ),
        )
    }

    /// The fifo of channel `ch` carrying tensor `t` from its writer to its readers: shared
    /// memory between neighbouring cores, else DMA; named for the tensor when the channel
    /// carries several.
    fn route_channel(
        &self,
        r: &mut Router,
        tiles: &[TileId],
        t: u32,
        (pc, pro): (usize, usize),
        readers: &[(usize, usize)],
        ch: usize,
    ) {
        let name = self.tensor_name(t);
        let prole = &self.cores[pc].roles[pro];
        let channel = &self.res.channels[ch];
        let carried_here = (0..self.shapes.len() as u32)
            .filter(|&u| {
                let w = self.roles_of(u, true);
                let r = self.roles_of(u, false);
                w.len() == 1
                    && w[0].0 == pc
                    && r.first().is_some_and(|&(c, _)| {
                        self.cores[c]
                            .process
                            .is_some_and(|q| channel.consumers.contains(&(q as u32)))
                    })
            })
            .count();
        let fname = if carried_here > 1 {
            format!("{}_{name}", channel.name)
        } else {
            channel.name.clone()
        };
        let consumers: Vec<TileId> = readers.iter().map(|&(c, _)| tiles[c]).collect();
        let kind = if consumers.len() == 1
            && (self.dev.core_reaches(tiles[pc], consumers[0])
                || self.dev.core_reaches(consumers[0], tiles[pc]))
        {
            let owner = if self.dev.core_reaches(consumers[0], tiles[pc]) {
                tiles[pc]
            } else {
                consumers[0]
            };
            FifoKind::Shared { owner }
        } else {
            FifoKind::Dma
        };
        let slots = self.shapes[t as usize][0] / prole.blocks[0].1[0].max(1);
        let f = r.fifo(Fifo {
            name: fname,
            producer: tiles[pc],
            consumers,
            depth: channel.depth,
            obj: self.obj(prole),
            kind,
            objects: prole.blocks.len() as u64,
            carries: format!(
                "channel {} ({name}; its {slots} ring slots are the fifo's buffers on the device)",
                channel.name
            ),
        });
        r.assign.insert((pc, pro), (f, Port::Produce));
        for &(c, ro) in readers {
            r.assign.insert((c, ro), (f, Port::Consume));
        }
    }

    fn roles_of(&self, t: u32, output: bool) -> Vec<(usize, usize)> {
        let mut v = Vec::new();
        for (c, core) in self.cores.iter().enumerate() {
            for (ro, role) in core.roles.iter().enumerate() {
                if role.tensor == t && role.output == output {
                    v.push((c, ro));
                }
            }
        }
        v
    }

    fn label(&self, c: usize) -> String {
        self.cores[c].label.clone()
    }

    fn obj(&self, role: &Role) -> ObjType {
        ObjType {
            shape: role.blocks[0].1.clone(),
            dtype: self.res.module.tensors[role.tensor as usize].dtype,
        }
    }

    fn transfer(
        &self,
        r: &mut Router,
        fifo: usize,
        t: u32,
        blocks: &[(Vec<u64>, Vec<u64>)],
        output: bool,
    ) -> Result<(), EmitError> {
        let decl = &self.res.module.tensors[t as usize];
        let p = transfer::fit(
            &self.shapes[t as usize],
            decl.dtype.size_bytes() as u64,
            blocks,
        )
        .map_err(|e| {
            EmitError::at(
                decl.name.loc,
                format!("tensor `{}`: fifo `{}`: {e}", decl.name, r.fifos[fifo].name),
            )
        })?;
        if !r.host.iter().any(|h| h.tensor == t) {
            r.host.push(HostArg {
                tensor: t,
                name: decl.name.name.clone(),
                dtype: decl.dtype,
                shape: self.shapes[t as usize].clone(),
            });
        }
        r.transfers.push(Transfer {
            fifo,
            host: t as usize,
            offset: p.offset,
            sizes: p.sizes,
            strides: p.strides,
            output,
        });
        Ok(())
    }
}

/// What routing accumulates.
struct Router {
    dev: &'static Device,
    fifos: Vec<Fifo>,
    links: Vec<Link>,
    transfers: Vec<Transfer>,
    host: Vec<HostArg>,
    /// (core, role) → (fifo, port).
    assign: HashMap<(usize, usize), (usize, Port)>,
    /// Shim column → fifos using its output (MM2S) / input (S2MM) channels.
    shim_out: HashMap<u32, Vec<String>>,
    shim_in: HashMap<u32, Vec<String>>,
}

impl Router {
    fn fifo(&mut self, f: Fifo) -> usize {
        if f.producer.1 == self.dev.shim_row {
            self.shim_out
                .entry(f.producer.0)
                .or_default()
                .push(f.name.clone());
        }
        for c in &f.consumers {
            if c.1 == self.dev.shim_row {
                self.shim_in.entry(c.0).or_default().push(f.name.clone());
            }
        }
        self.fifos.push(f);
        self.fifos.len() - 1
    }

    /// The shim column for a new host stream near column `near`: the least used one with a free
    /// channel in that direction (device to host when `to_host`), nearest first.
    fn pick_shim(&self, near: u32, to_host: bool, who: &str) -> Result<u32, EmitError> {
        let used = |c: u32| {
            let m = if to_host {
                &self.shim_in
            } else {
                &self.shim_out
            };
            m.get(&c).map_or(0, Vec::len) as u32
        };
        let limit = if to_host {
            self.dev.shim.s2mm
        } else {
            self.dev.shim.mm2s
        };
        (0..self.dev.columns)
            .filter(|&c| used(c) < limit)
            .min_by_key(|&c| (used(c), c.abs_diff(near)))
            .ok_or_else(|| {
                EmitError::plain(format!(
                    "{who}: no shim tile of {} has a free {} DMA channel for another host stream ({} per shim tile, all used)",
                    self.dev.name,
                    if to_host { "input (S2MM)" } else { "output (MM2S)" },
                    limit
                ))
            })
    }
}

fn region(r: &pto_wsp_ir::expand::ExpandedRegion) -> (Vec<u64>, Vec<u64>) {
    (
        r.start.iter().map(|&x| x.max(0) as u64).collect(),
        r.size.iter().map(|&x| x.max(0) as u64).collect(),
    )
}

fn port(output: bool) -> Port {
    if output { Port::Produce } else { Port::Consume }
}

/// The MLIR type of a scalar kernel parameter.
pub fn scalar_type(t: ParamType) -> &'static str {
    match t {
        ParamType::Bool => "i1",
        ParamType::I64 | ParamType::U64 => "i64",
        ParamType::F32 => "f32",
        ParamType::F64 => "f64",
    }
}

/// `steps` with every fifo index replaced by `f(index, port)`.
fn rewrite(steps: &[Step], f: &dyn Fn(usize, Port) -> usize) -> Vec<Step> {
    steps
        .iter()
        .map(|s| match s {
            Step::Loop { count, body } => Step::Loop {
                count: *count,
                body: rewrite(body, f),
            },
            Step::Acquire { fifo, port } => Step::Acquire {
                fifo: f(*fifo, *port),
                port: *port,
            },
            Step::Release { fifo, port } => Step::Release {
                fifo: f(*fifo, *port),
                port: *port,
            },
            Step::Call { kernel, args } => Step::Call {
                kernel: *kernel,
                args: args
                    .iter()
                    .map(|a| match a {
                        CallArg::Object { fifo, port } => CallArg::Object {
                            fifo: f(*fifo, *port),
                            port: *port,
                        },
                        s => s.clone(),
                    })
                    .collect(),
            },
        })
        .collect()
}

/// Folds repeated runs of steps into loops (the longest coverage first), recursively: the
/// flattened result is `steps` again.
pub fn compress(steps: &[Step]) -> Vec<Step> {
    let n = steps.len();
    let mut best: Option<(usize, usize, usize)> = None; // (start, len, reps)
    for len in 1..=n / 2 {
        for start in 0..=n - 2 * len {
            let mut reps = 1;
            while start + (reps + 1) * len <= n
                && steps[start + reps * len..start + (reps + 1) * len] == steps[start..start + len]
            {
                reps += 1;
            }
            if reps >= 2 {
                let cover = reps * len;
                if best.is_none_or(|(_, bl, br)| cover > bl * br) {
                    best = Some((start, len, reps));
                }
            }
        }
    }
    let Some((start, len, reps)) = best else {
        return steps.to_vec();
    };
    let mut out = compress(&steps[..start]);
    out.push(Step::Loop {
        count: reps as u64,
        body: compress(&steps[start..start + len]),
    });
    out.extend(compress(&steps[start + reps * len..]));
    out
}

/// `steps` with every loop unrolled.
pub fn flatten(steps: &[Step]) -> Vec<Step> {
    let mut out = Vec::new();
    for s in steps {
        match s {
            Step::Loop { count, body } => {
                let b = flatten(body);
                for _ in 0..*count {
                    out.extend(b.iter().cloned());
                }
            }
            s => out.push(s.clone()),
        }
    }
    out
}

/// The kind of a tile, for messages.
pub fn kind_word(dev: &Device, t: TileId) -> &'static str {
    dev.tile_kind(t.0, t.1).map_or("?", TileKind::word)
}
