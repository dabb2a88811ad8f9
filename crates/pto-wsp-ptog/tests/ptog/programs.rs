//! Random valid programs: every instruction of the table, in graphs and control code, with ids
//! named and unnamed, in any order, for the round-trip properties.

use pto_wsp_ir::DType;
use pto_wsp_ptog::isa::Insn;
use pto_wsp_ptog::operand::*;
use pto_wsp_ptog::{Names, Program};

/// SplitMix64.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }
    pub(crate) fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
}

const WORDS: &[&str] = &[
    "A", "B", "Q", "KV", "MLA", "idx", "x_1", "TOPK", "_t", "main", "s0", "loop_i", "E",
];

/// Ids of one namespace: distinct, some named.
struct Ids {
    ids: Vec<u32>,
}

impl Ids {
    fn new(rng: &mut Rng, n: usize) -> Ids {
        let mut ids = Vec::new();
        while ids.len() < n {
            let v = if rng.chance(60) {
                ids.len() as u32
            } else {
                rng.below(50) as u32
            };
            if !ids.contains(&v) {
                ids.push(v);
            }
        }
        Ids { ids }
    }
}

fn name_some(rng: &mut Rng, names: &mut Names, ns: Ns, scope: u32, ids: &[u32]) {
    let mut used = Vec::new();
    for &id in ids {
        if rng.chance(60) {
            let base = rng.pick(WORDS);
            let name = if used.contains(&base.to_string()) {
                format!("{base}{id}")
            } else {
                base.to_string()
            };
            if used.contains(&name) {
                continue;
            }
            used.push(name.clone());
            names.insert(ns, scope, id, name);
        }
    }
}

struct Tensor {
    id: u32,
    dtype: DType,
    dims: Vec<u32>,
}

impl Tensor {
    fn row_bytes(&self) -> u64 {
        self.dims[1..]
            .iter()
            .fold(self.dtype.size_bytes() as u64, |a, &d| a * d as u64)
    }
    fn size(&self) -> u64 {
        self.row_bytes() * self.dims[0] as u64
    }
}

fn scalar(rng: &mut Rng, tensors: &[Tensor], count: bool) -> ScalarRef {
    let ints: Vec<&Tensor> = tensors
        .iter()
        .filter(|t| !count || t.dtype.is_integer())
        .collect();
    if ints.is_empty() || rng.chance(40) {
        return ScalarRef::Imm(if count { rng.below(3) } else { rng.below(2) });
    }
    let t = ints[rng.below(ints.len() as u64) as usize];
    let n: u64 = t.dims.iter().map(|&d| d as u64).product();
    ScalarRef::Elem {
        tensor: TensorId(t.id),
        index: rng.below(n) as u32,
    }
}

/// One graph body: kernels, possibly inside control-flow blocks, then the kernel-level
/// instructions.
/// The next partition and barrier ids to use (each defined once per program).
struct Next {
    partition: u32,
    barrier: u32,
}

fn graph(
    rng: &mut Rng,
    gid: u32,
    tensors: &[Tensor],
    events: &[u32],
    next: &mut Next,
    names: &mut Names,
    out: &mut Vec<Insn>,
) {
    let nk = 1 + rng.below(5) as usize;
    let kids = Ids::new(rng, nk).ids;
    name_some(rng, names, Ns::Kernel, gid, &kids);
    out.push(Insn::TgBegin {
        graph: GraphId(gid),
    });
    // Kernels: some inside control flow (items of the top block are numbered in order).
    let mut block_dims = Vec::new();
    let mut depth = 0;
    let mut open: Vec<u8> = Vec::new();
    let mut top_level = Vec::new();
    let mut iter_next = 40u32;
    for (i, &k) in kids.iter().enumerate() {
        if depth < 2 && rng.chance(25) {
            match rng.below(3) {
                0 => out.push(Insn::CfIf {
                    cond: scalar(rng, tensors, false),
                }),
                1 => {
                    out.push(Insn::CfLoop {
                        count: scalar(rng, tensors, true),
                        iterator: IterId(iter_next),
                    });
                    iter_next += 1;
                }
                _ => out.push(Insn::CfWhile {
                    cond: scalar(rng, tensors, false),
                }),
            }
            open.push(match out.last() {
                Some(Insn::CfIf { .. }) => 0,
                Some(Insn::CfLoop { .. }) => 1,
                _ => 2,
            });
            depth += 1;
        }
        let bd = if rng.chance(60) {
            1
        } else {
            1 + rng.below(4) as u32
        };
        block_dims.push(bd);
        top_level.push(depth == 0);
        let entry = match rng.below(4) {
            0 => "put".to_string(),
            1 => "lib.kernel$2".to_string(),
            2 => "needs \"quotes\" \\ here".to_string(),
            _ => format!("k{i}"),
        };
        out.push(Insn::TgKernel {
            kernel: KernelId(k),
            entry: Symbol(entry),
            block_dim: bd,
            core_type: rng.pick(CoreType::ALL),
            workspace: rng.below(1 << 20),
        });
        if depth > 0 && rng.chance(30) {
            let kind = *open.last().expect("open");
            if kind == 0 && rng.chance(50) {
                out.push(Insn::CfElse {});
                open.pop();
                open.push(3);
            } else if kind != 0 && kind != 3 && rng.chance(40) {
                out.push(Insn::CfBreak {
                    cond: scalar(rng, tensors, false),
                });
            }
        }
        if depth > 0 && rng.chance(50) {
            out.push(match open.pop().expect("open") {
                0 | 3 => Insn::CfEndIf {},
                1 => Insn::CfEndLoop {},
                _ => Insn::CfEndWhile {},
            });
            depth -= 1;
        }
    }
    while let Some(kind) = open.pop() {
        out.push(match kind {
            0 | 3 => Insn::CfEndIf {},
            1 => Insn::CfEndLoop {},
            _ => Insn::CfEndWhile {},
        });
    }
    // Bindings: each kernel gets 0..3 arguments.
    let mut writes: Vec<Vec<u32>> = vec![Vec::new(); nk];
    let mut binds: Vec<Vec<u32>> = vec![Vec::new(); nk];
    for k in 0..nk {
        let nargs = rng.below(4) as u32;
        for a in 0..nargs {
            if tensors.is_empty() || rng.chance(20) {
                out.push(Insn::McBind {
                    kernel: KernelId(kids[k]),
                    arg: a,
                    tensor: None,
                    offset: rng.next() >> rng.below(64),
                    size: 0,
                    access: Access::InOut,
                    split: Split::Whole,
                    region: None,
                });
                continue;
            }
            let t = &tensors[rng.below(tensors.len() as u64) as usize];
            let access = rng.pick(Access::ALL);
            let split = if block_dims[k] > 1 && access.writes() || rng.chance(30) {
                Split::Rows
            } else {
                Split::Whole
            };
            let (offset, size, region) = match rng.below(3) {
                0 => (0, 0, None),
                1 => {
                    let rows = t.dims[0] as u64;
                    let r0 = rng.below(rows);
                    let n = 1 + rng.below(rows - r0);
                    (r0 * t.row_bytes(), n * t.row_bytes(), None)
                }
                _ => {
                    let mut b = BoxRegion {
                        start: Vec::new(),
                        size: Vec::new(),
                    };
                    for &d in &t.dims {
                        let s = rng.below(d as u64) as u32;
                        b.start.push(s);
                        b.size.push(1 + rng.below((d - s) as u64) as u32);
                    }
                    (0, 0, Some(b))
                }
            };
            if access.writes() {
                writes[k].push(t.id);
            }
            binds[k].push(t.id);
            out.push(Insn::McBind {
                kernel: KernelId(kids[k]),
                arg: a,
                tensor: Some(TensorId(t.id)),
                offset,
                size,
                access,
                split,
                region,
            });
        }
    }
    // Dependencies forward in definition order.
    for _ in 0..rng.below(5) {
        if nk < 2 {
            break;
        }
        let s = rng.below(nk as u64 - 1) as usize;
        let d = s + 1 + rng.below((nk - s - 1) as u64) as usize;
        let shared: Vec<u32> = writes[s]
            .iter()
            .copied()
            .filter(|t| binds[d].contains(t))
            .collect();
        let (ty, tensor) = if !shared.is_empty() && rng.chance(50) {
            (DependencyType::Data, Some(TensorId(shared[0])))
        } else {
            let ty = rng.pick(&[
                DependencyType::After,
                DependencyType::Soft,
                DependencyType::Barrier,
            ]);
            let tensor = (!tensors.is_empty() && rng.chance(20)).then(|| TensorId(tensors[0].id));
            (ty, tensor)
        };
        out.push(Insn::TgDepend {
            src: KernelId(kids[s]),
            dst: KernelId(kids[d]),
            dep_type: ty,
            tensor,
        });
    }
    // Core allocation and events.
    for &kid in &kids {
        if rng.chance(30) {
            out.push(Insn::CaRequest {
                kernel: KernelId(kid),
                aic: 1 + rng.below(3) as u32,
                aiv: 1 + rng.below(3) as u32,
                aicpu: 1 + rng.below(2) as u32,
            });
        }
        if !events.is_empty() && rng.chance(20) {
            out.push(Insn::SySignal {
                event: EventId(rng.pick(events)),
                kernel: KernelId(kid),
            });
        }
    }
    if nk >= 2 && rng.chance(30) {
        out.push(Insn::CaAffinity {
            kernels: KernelSet(vec![KernelId(kids[0]), KernelId(kids[nk - 1])]),
            affinity: rng.pick(AffinityType::ALL),
        });
    }
    if rng.chance(30) {
        out.push(Insn::CaPartition {
            partition: PartitionId(next.partition),
            aic_start: rng.below(2) as u32,
            aic_count: 1 + rng.below(2) as u32,
            aiv_start: rng.below(2) as u32,
            aiv_count: rng.below(3) as u32,
        });
        next.partition += 1;
    }
    // A barrier of two top-level kernels with no dependency at all.
    let free: Vec<usize> = (0..nk).filter(|&k| top_level[k]).collect();
    if free.len() >= 2 && rng.chance(20) {
        out.push(Insn::SyBarrier {
            kernels: KernelSet(vec![KernelId(kids[free[0]]), KernelId(kids[free[1]])]),
            barrier: BarrierId(next.barrier),
        });
        next.barrier += 1;
    }
    if rng.chance(20) {
        out.push(Insn::McFence {
            scope: rng.pick(FenceScope::ALL),
        });
    }
    out.push(Insn::TgEnd {
        graph: GraphId(gid),
    });
}

/// A random program (it may be invalid: callers keep the ones that check).
pub(crate) fn program(seed: u64) -> Program {
    let mut rng = Rng::new(seed);
    let mut names = Names::new();
    let mut out = Vec::new();
    let nt = rng.below(5) as usize;
    let tids = Ids::new(&mut rng, nt).ids;
    name_some(&mut rng, &mut names, Ns::Tensor, 0, &tids);
    let mut tensors = Vec::new();
    for &id in &tids {
        let dtype = rng.pick(DType::ALL);
        let rank = 1 + rng.below(3) as usize;
        let dims: Vec<u32> = (0..rank).map(|_| 1 + rng.below(6) as u32).collect();
        let t = Tensor { id, dtype, dims };
        let typed = rng.chance(70);
        let (dtype, dims) = if typed {
            (t.dtype, t.dims.clone())
        } else {
            (DType::U8, vec![t.size() as u32])
        };
        out.push(Insn::McAlloc {
            tensor: TensorId(id),
            size: t.size(),
            alignment: 1 << rng.below(13),
            location: rng.pick(MemLocation::ALL),
            shape: typed.then(|| Shape {
                dtype: t.dtype,
                dims: t.dims.clone(),
            }),
        });
        tensors.push(Tensor { id, dtype, dims });
    }
    let ng = 1 + rng.below(3) as usize;
    let gids = Ids::new(&mut rng, ng).ids;
    name_some(&mut rng, &mut names, Ns::Graph, 0, &gids);
    let events: Vec<u32> = (0..rng.below(3) as u32).collect();
    name_some(&mut rng, &mut names, Ns::Event, 0, &events);
    let mut next = Next {
        partition: rng.below(5) as u32,
        barrier: rng.below(5) as u32,
    };
    for &g in &gids {
        graph(
            &mut rng, g, &tensors, &events, &mut next, &mut names, &mut out,
        );
    }
    // Control code: launches in blocks, then syncs, memory operations, notifications.
    let streams = [0u32, 1, 7];
    name_some(&mut rng, &mut names, Ns::Stream, 0, &streams);
    name_some(&mut rng, &mut names, Ns::Iterator, 0, &[3]);
    for &g in &gids {
        match rng.below(4) {
            0 => out.push(Insn::TgLaunch {
                graph: GraphId(g),
                stream: StreamId(rng.pick(&streams)),
            }),
            1 => {
                out.push(Insn::CfLoop {
                    count: ScalarRef::Imm(rng.below(4)),
                    iterator: IterId(3),
                });
                out.push(Insn::TgInvoke {
                    graph: GraphId(g),
                    iteration: IterVal::Iter(IterId(3)),
                });
                if rng.chance(50) {
                    out.push(Insn::CfBreak {
                        cond: ScalarRef::Imm(rng.below(2)),
                    });
                }
                out.push(Insn::CfEndLoop {});
            }
            2 => out.push(Insn::TgInvoke {
                graph: GraphId(g),
                iteration: IterVal::Imm(rng.below(1000) as u32),
            }),
            _ => {}
        }
        if rng.chance(50) {
            out.push(Insn::TgSync { graph: GraphId(g) });
        }
    }
    // Everything launched is synced before the control code touches tensors.
    for &g in &gids {
        let launched = out.iter().any(|i| {
            matches!(i, Insn::TgLaunch { graph, .. } | Insn::TgInvoke { graph, .. } if graph.0 == g)
        });
        if launched {
            out.push(Insn::TgSync { graph: GraphId(g) });
        }
    }
    if rng.chance(50) && !tensors.is_empty() {
        out.push(Insn::CfWhile {
            cond: scalar(&mut rng, &tensors, false),
        });
        out.push(Insn::CfBreak {
            cond: ScalarRef::Imm(1),
        });
        out.push(Insn::CfEndWhile {});
        out.push(Insn::CfIf {
            cond: scalar(&mut rng, &tensors, false),
        });
        out.push(Insn::McFence {
            scope: FenceScope::Gm,
        });
        if rng.chance(50) {
            out.push(Insn::CfElse {});
        }
        out.push(Insn::CfEndIf {});
    }
    if tensors.len() >= 2 {
        let (a, b) = (&tensors[0], &tensors[1]);
        let row = a.row_bytes().max(b.row_bytes());
        if row % a.row_bytes() == 0
            && row % b.row_bytes() == 0
            && row <= a.size()
            && row <= b.size()
        {
            out.push(Insn::McCopy {
                src: TensorId(a.id),
                dst: TensorId(b.id),
                size: row,
                src_offset: 0,
                dst_offset: 0,
            });
        }
    }
    let devices = [0u32, 1];
    name_some(&mut rng, &mut names, Ns::Device, 0, &devices);
    name_some(&mut rng, &mut names, Ns::Notify, 0, &[5]);
    if rng.chance(40) {
        out.push(Insn::SyNotify {
            device: DeviceId(1),
            notify: NotifyId(5),
        });
        out.push(Insn::SyWaitNotify {
            device: DeviceId(0),
            notify: NotifyId(5),
        });
    }
    for t in &tensors {
        if rng.chance(50) {
            out.push(Insn::McFree {
                tensor: TensorId(t.id),
            });
        }
    }
    // Events waited for are signalled somewhere: one waiter on event 0 if some graph signals.
    let signalled = out
        .iter()
        .any(|i| matches!(i, Insn::SySignal { event, .. } if event.0 == 0));
    if signalled
        && let Some(pos) = out.iter().position(|i| matches!(i, Insn::TgEnd { .. }))
        && let Insn::TgEnd { graph } = out[pos].clone()
    {
        let k = out[..pos].iter().rev().find_map(|i| match i {
            Insn::TgKernel { kernel, .. } => Some(*kernel),
            _ => None,
        });
        if let Some(k) = k
            && graph.0 == gids[0]
        {
            out.insert(
                pos,
                Insn::SyWait {
                    event: EventId(0),
                    kernel: k,
                },
            );
        }
    }
    // Names of ids no instruction uses are dropped (a binary may not name them).
    let mut p = Program {
        insns: out,
        names: Names::new(),
    };
    let used = pto_wsp_ptog::binary::used_ids(&p);
    for (key, name) in names.iter() {
        if used.contains(&key) {
            p.names.insert(key.0, key.1, key.2, name);
        }
    }
    p
}
