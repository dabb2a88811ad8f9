//! Functional simulation of a placed design on the CPU: one thread per core running its
//! program, ObjectFIFOs as pools of their depth, DMA streams, memory-tile links and the runtime
//! sequence moving data in and out of host tensors.
//!
//! Why: the placement, routing and host patterns the mapper made are what differs between the
//! CPU simulation of a module and its AIE design; running the design itself, with the same
//! kernels on the objects the cores acquire, checks exactly that, without an AIE device.
//!
//! How: every pool (a shared fifo's one pool; a DMA fifo's producer pool and one pool per
//! consumer) is two bounded channels of buffers, `free` and `full`, holding `depth` buffers
//! between them: acquiring at the producer end takes a free buffer and releasing sends it full;
//! acquiring at a consumer end takes a full buffer and releasing sends it back free (the
//! semaphore pair of mlir-aie's ObjectFIFO lowering). A DMA thread per DMA fifo copies each full
//! producer buffer into a free buffer of every consumer pool (a broadcast copies to all); a
//! thread per link copies between a memory tile's pools (one-to-one, or a join filling one
//! segment per input); a thread per host transfer reads (or writes) the host tensor along its
//! strided pattern. Kernels run through the kernel language's CPU executor
//! (`pto_wsp_kernels::lang`) on a store holding the call's objects.
//!
//! Promise: every channel end belongs to exactly one thread, so when a thread stops (its
//! objects done, or an error) every thread waiting on it is woken with the end gone and stops
//! with an error naming what it waited for: a design whose counts disagree fails, it never
//! hangs. Designs the mapper makes are acyclic, so they cannot deadlock.

use super::design::*;
use pto_wsp_ir::Module;
use pto_wsp_ir::module::ParamKind;
use pto_wsp_ir::task_io::{Region, TaskIo};
use pto_wsp_kernels::checked::with_checked_runner;
use pto_wsp_kernels::registry::KernelRegistry;
use pto_wsp_kernels::store::{TensorSpec, TensorStore};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

type Buf = Vec<u8>;

/// What a simulation did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Threads run (cores, DMA streams, links, host transfers).
    pub threads: usize,
    /// Kernel calls made by cores.
    pub calls: u64,
    /// Objects moved by DMA streams and links.
    pub objects: u64,
}

/// The producer side of a pool: take free buffers, hand them on full.
struct Fill {
    free: Receiver<Buf>,
    full: SyncSender<Buf>,
}

/// The consumer side of a pool: take full buffers, hand them back free.
struct Drain {
    full: Receiver<Buf>,
    free: SyncSender<Buf>,
}

fn pool(depth: u64, bytes: u64) -> (Fill, Drain) {
    let n = depth.max(1) as usize;
    let (free_tx, free_rx) = sync_channel(n);
    let (full_tx, full_rx) = sync_channel(n);
    for _ in 0..n {
        free_tx
            .send(vec![0u8; bytes as usize])
            .expect("receiver alive");
    }
    (
        Fill {
            free: free_rx,
            full: full_tx,
        },
        Drain {
            full: full_rx,
            free: free_tx,
        },
    )
}

/// The ends of every pool, taken by the threads that use them.
struct Ends {
    /// (fifo) → the producer end: the shared pool's or the producer pool's.
    fill: HashMap<usize, Fill>,
    /// (fifo, consumer index) → a consumer end.
    drain: HashMap<(usize, usize), Drain>,
    /// DMA fifos: the producer pool's drain and each consumer pool's fill (the stream's ends).
    stream: HashMap<usize, (Drain, Vec<Fill>)>,
}

fn build(d: &AieDesign) -> Ends {
    let mut e = Ends {
        fill: HashMap::new(),
        drain: HashMap::new(),
        stream: HashMap::new(),
    };
    for (i, f) in d.fifos.iter().enumerate() {
        let bytes = f.obj.bytes();
        match f.kind {
            FifoKind::Shared { .. } => {
                let (fill, drain) = pool(f.depth, bytes);
                e.fill.insert(i, fill);
                e.drain.insert((i, 0), drain);
            }
            FifoKind::Dma => {
                let (fill, pdrain) = pool(f.depth, bytes);
                e.fill.insert(i, fill);
                let mut fills = Vec::new();
                for j in 0..f.consumers.len() {
                    let (cfill, cdrain) = pool(f.depth, bytes);
                    fills.push(cfill);
                    e.drain.insert((i, j), cdrain);
                }
                e.stream.insert(i, (pdrain, fills));
            }
        }
    }
    e
}

fn take<K: std::hash::Hash + Eq + std::fmt::Debug, V>(
    m: &mut HashMap<K, V>,
    k: K,
    what: &str,
) -> Result<V, String> {
    m.remove(&k)
        .ok_or_else(|| format!("internal: {what} {k:?} has no free end"))
}

/// The threads of one simulation, each named for its error messages.
type Handles<'scope> = Vec<(
    String,
    std::thread::ScopedJoinHandle<'scope, Result<Done, String>>,
)>;

/// Runs design `d` (kernels of `module`) once, reading its host inputs from `store` and writing
/// its host outputs there.
pub fn simulate(
    d: &AieDesign,
    module: &Module,
    store: &mut TensorStore,
) -> Result<SimStats, String> {
    let mut registry = KernelRegistry::new();
    pto_wsp_kernels::lang::register_bodies(module, &mut registry);
    let registry = Arc::new(registry);
    let mut ends = build(d);
    let mut outputs: Vec<(usize, Vec<u8>)> = Vec::new();
    let mut stats = SimStats::default();
    let input: &TensorStore = store;
    std::thread::scope(|s| -> Result<(), String> {
        let mut handles: Handles<'_> = Vec::new();
        spawn_transfers(s, d, input, &mut ends, &mut handles)?;
        spawn_streams(s, d, &mut ends, &mut handles);
        spawn_links(s, d, &mut ends, &mut handles)?;
        spawn_cores(s, d, module, &registry, &mut ends, &mut handles)?;
        stats.threads = handles.len();
        join_all(handles, &mut stats, &mut outputs)
    })?;
    for (ti, bytes) in outputs {
        let t = &d.transfers[ti];
        let h = &d.host[t.host];
        let esize = h.dtype.size_bytes();
        let dst = store.bytes_mut(h.tensor);
        for (e, i) in t.indices().enumerate() {
            let i = i as usize * esize;
            dst[i..i + esize].copy_from_slice(&bytes[e * esize..(e + 1) * esize]);
        }
    }
    Ok(stats)
}

/// One thread per host transfer: an input gathers its pattern's elements from `store` into the
/// fifo's objects; an output drains its fifo and hands the bytes back in pattern order.
fn spawn_transfers<'scope>(
    s: &'scope std::thread::Scope<'scope, '_>,
    d: &AieDesign,
    store: &TensorStore,
    ends: &mut Ends,
    handles: &mut Handles<'scope>,
) -> Result<(), String> {
    for (ti, t) in d.transfers.iter().enumerate() {
        let f = &d.fifos[t.fifo];
        let h = &d.host[t.host];
        let esize = h.dtype.size_bytes();
        let name = format!("host transfer of `{}` ({})", h.name, f.name);
        let n = f.objects;
        let who = name.clone();
        if t.output {
            let j = f
                .consumers
                .iter()
                .position(|c| c.1 == d.device.shim_row)
                .unwrap_or(0);
            let drain = take(&mut ends.drain, (t.fifo, j), "fifo")?;
            handles.push((
                name,
                s.spawn(move || {
                    let mut bytes = Vec::new();
                    for k in 0..n {
                        let b = drain
                            .full
                            .recv()
                            .map_err(|_| format!("{who}: fifo ended after {k} of {n} objects"))?;
                        bytes.extend_from_slice(&b);
                        let _ = drain.free.send(b);
                    }
                    Ok(Done::Output(ti, bytes))
                }),
            ));
        } else {
            let fill = take(&mut ends.fill, t.fifo, "fifo")?;
            let src = store.bytes(h.tensor).to_vec();
            let idx: Vec<u64> = t.indices().collect();
            let obj = f.obj.elements() as usize;
            handles.push((
                name,
                s.spawn(move || {
                    for k in 0..n as usize {
                        let mut b = fill.free.recv().map_err(|_| format!("{who}: no buffer"))?;
                        for (e, &i) in idx[k * obj..(k + 1) * obj].iter().enumerate() {
                            let i = i as usize * esize;
                            b[e * esize..(e + 1) * esize].copy_from_slice(&src[i..i + esize]);
                        }
                        fill.full
                            .send(b)
                            .map_err(|_| format!("{who}: the fifo's consumer stopped"))?;
                    }
                    Ok(Done::Moved(0))
                }),
            ));
        }
    }
    Ok(())
}

/// One thread per DMA stream: each object its producer releases is copied to every consumer.
fn spawn_streams<'scope>(
    s: &'scope std::thread::Scope<'scope, '_>,
    d: &AieDesign,
    ends: &mut Ends,
    handles: &mut Handles<'scope>,
) {
    for (i, f) in d.fifos.iter().enumerate() {
        let Some((pdrain, fills)) = ends.stream.remove(&i) else {
            continue;
        };
        let n = f.objects;
        let who = format!("DMA stream of `{}`", f.name);
        handles.push((
            who.clone(),
            s.spawn(move || {
                for k in 0..n {
                    let b = pdrain
                        .full
                        .recv()
                        .map_err(|_| format!("{who}: producer ended after {k} of {n} objects"))?;
                    for c in &fills {
                        let mut o = c
                            .free
                            .recv()
                            .map_err(|_| format!("{who}: a consumer stopped"))?;
                        o.copy_from_slice(&b);
                        c.full
                            .send(o)
                            .map_err(|_| format!("{who}: a consumer stopped"))?;
                    }
                    let _ = pdrain.free.send(b);
                }
                Ok(Done::Moved(n))
            }),
        ));
    }
}

/// One thread per link in a memory tile: an object of each input, in order, makes one object
/// of the output (a join).
fn spawn_links<'scope>(
    s: &'scope std::thread::Scope<'scope, '_>,
    d: &AieDesign,
    ends: &mut Ends,
    handles: &mut Handles<'scope>,
) -> Result<(), String> {
    for l in &d.links {
        let mut ins = Vec::new();
        for &fi in &l.ins {
            let j = d.fifos[fi]
                .consumers
                .iter()
                .position(|&c| c == l.tile)
                .unwrap_or(0);
            ins.push(take(&mut ends.drain, (fi, j), "fifo")?);
        }
        let out = take(&mut ends.fill, l.outs[0], "fifo")?;
        let n = d.fifos[l.outs[0]].objects;
        let part = d.fifos[l.ins[0]].obj.bytes() as usize;
        let who = format!("link in memory tile ({}, {})", l.tile.0, l.tile.1);
        handles.push((
            who.clone(),
            s.spawn(move || {
                for k in 0..n {
                    let mut o = out
                        .free
                        .recv()
                        .map_err(|_| format!("{who}: output stopped"))?;
                    for (p, input) in ins.iter().enumerate() {
                        let b = input.full.recv().map_err(|_| {
                            format!("{who}: input {p} ended after {k} of {n} objects")
                        })?;
                        o[p * part..(p + 1) * part].copy_from_slice(&b);
                        let _ = input.free.send(b);
                    }
                    out.full
                        .send(o)
                        .map_err(|_| format!("{who}: output stopped"))?;
                }
                Ok(Done::Moved(n * ins.len() as u64))
            }),
        ));
    }
    Ok(())
}

/// One thread per placed core, running its program with the fifo ends it uses.
fn spawn_cores<'scope, 'env>(
    s: &'scope std::thread::Scope<'scope, 'env>,
    d: &'env AieDesign,
    module: &'env Module,
    registry: &Arc<KernelRegistry>,
    ends: &mut Ends,
    handles: &mut Handles<'scope>,
) -> Result<(), String> {
    for c in &d.cores {
        let (fills, drains) = core_ends(d, c, ends)?;
        let registry = registry.clone();
        let who = format!("core ({}, {}) ({})", c.tile.0, c.tile.1, c.label);
        handles.push((
            who.clone(),
            s.spawn(move || {
                let mut core = CoreRun {
                    d,
                    module,
                    registry: &registry,
                    fills,
                    drains,
                    held: HashMap::new(),
                    calls: 0,
                    who,
                };
                core.run(&c.program)?;
                Ok(Done::Calls(core.calls))
            }),
        ));
    }
    Ok(())
}

/// The fifo ends core `c`'s program produces into and consumes from, taken out of `ends`.
#[allow(clippy::type_complexity)]
fn core_ends(
    d: &AieDesign,
    c: &Core,
    ends: &mut Ends,
) -> Result<(HashMap<usize, Fill>, HashMap<usize, Drain>), String> {
    use std::collections::hash_map::Entry;
    let mut fills = HashMap::new();
    let mut drains = HashMap::new();
    let mut uses = Vec::new();
    collect_uses(&c.program, &mut uses);
    for (fi, port) in uses {
        match port {
            Port::Produce => {
                if let Entry::Vacant(v) = fills.entry(fi) {
                    v.insert(take(&mut ends.fill, fi, "fifo")?);
                }
            }
            Port::Consume => {
                if let Entry::Vacant(v) = drains.entry(fi) {
                    let j = d.fifos[fi]
                        .consumers
                        .iter()
                        .position(|&t| t == c.tile)
                        .unwrap_or(0);
                    v.insert(take(&mut ends.drain, (fi, j), "fifo")?);
                }
            }
        }
    }
    Ok((fills, drains))
}

/// Joins every thread, adding what each did to `stats` and `outputs`; the errors of those that
/// failed, the cause first (a thread that failed on its own before those it stopped).
fn join_all(
    handles: Handles<'_>,
    stats: &mut SimStats,
    outputs: &mut Vec<(usize, Vec<u8>)>,
) -> Result<(), String> {
    let mut errors: Vec<String> = Vec::new();
    for (name, h) in handles {
        match h.join() {
            Ok(Ok(Done::Calls(n))) => stats.calls += n,
            Ok(Ok(Done::Moved(n))) => stats.objects += n,
            Ok(Ok(Done::Output(ti, bytes))) => outputs.push((ti, bytes)),
            Ok(Err(e)) => errors.push(e),
            Err(_) => errors.push(format!("{name} panicked")),
        }
    }
    errors.sort_by_key(|e| e.contains("stopped") || e.contains("ended after"));
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

/// What a thread hands back when it ends well.
enum Done {
    /// A core: its kernel calls.
    Calls(u64),
    /// A stream or link: objects moved.
    Moved(u64),
    /// A host output transfer: its index and the bytes it drained, in pattern order.
    Output(usize, Vec<u8>),
}

fn collect_uses(steps: &[Step], out: &mut Vec<(usize, Port)>) {
    for s in steps {
        match s {
            Step::Loop { body, .. } => collect_uses(body, out),
            Step::Acquire { fifo, port } | Step::Release { fifo, port } => out.push((*fifo, *port)),
            Step::Call { .. } => {}
        }
    }
}

struct CoreRun<'a> {
    d: &'a AieDesign,
    module: &'a Module,
    registry: &'a KernelRegistry,
    fills: HashMap<usize, Fill>,
    drains: HashMap<usize, Drain>,
    held: HashMap<(usize, Port), Buf>,
    calls: u64,
    who: String,
}

impl CoreRun<'_> {
    fn run(&mut self, steps: &[Step]) -> Result<(), String> {
        for s in steps {
            match s {
                Step::Loop { count, body } => {
                    for _ in 0..*count {
                        self.run(body)?;
                    }
                }
                Step::Acquire { fifo, port } => {
                    let name = &self.d.fifos[*fifo].name;
                    let b = match port {
                        Port::Produce => self.fills[fifo].free.recv(),
                        Port::Consume => self.drains[fifo].full.recv(),
                    }
                    .map_err(|_| {
                        format!(
                            "{}: waits to acquire `{name}` ({port:?}) but the other end stopped",
                            self.who
                        )
                    })?;
                    self.held.insert((*fifo, *port), b);
                }
                Step::Release { fifo, port } => {
                    let b = self
                        .held
                        .remove(&(*fifo, *port))
                        .ok_or_else(|| format!("{}: releases what it does not hold", self.who))?;
                    let name = &self.d.fifos[*fifo].name;
                    match port {
                        Port::Produce => self.fills[fifo].full.send(b).map_err(|_| {
                            format!("{}: releases `{name}` but its consumer stopped", self.who)
                        })?,
                        // A producer that has made all its objects needs no free buffer back.
                        Port::Consume => {
                            let _ = self.drains[fifo].free.send(b);
                        }
                    }
                }
                Step::Call { kernel, args } => self.call(*kernel, args)?,
            }
        }
        Ok(())
    }

    fn call(&mut self, kernel: usize, args: &[CallArg]) -> Result<(), String> {
        let k = &self.d.kernels[kernel];
        let decl = &self.module.kernels[k.decl];
        let mut specs = Vec::new();
        let mut objs = Vec::new();
        let mut params = Vec::new();
        for a in args {
            match a {
                CallArg::Object { fifo, port } => {
                    let o = &self.d.fifos[*fifo].obj;
                    specs.push(TensorSpec {
                        name: format!("arg{}", specs.len()),
                        dtype: o.dtype,
                        shape: o.shape.clone(),
                        align: 64,
                    });
                    objs.push((*fifo, *port));
                }
                CallArg::Scalar(v, _) => params.push(v.to_bits()),
            }
        }
        let mut store = TensorStore::from_specs(&specs).map_err(|e| e.to_string())?;
        let mut io = Vec::new();
        let accesses = decl.params.iter().filter_map(|p| match p.kind {
            ParamKind::Tile { access, .. } => Some(access),
            ParamKind::Scalar(_) => None,
        });
        for ((t, key), access) in objs.iter().enumerate().zip(accesses) {
            let b = self.held.get(key).ok_or_else(|| {
                format!(
                    "{}: calls `{}` on an object it does not hold",
                    self.who, k.name
                )
            })?;
            store.bytes_mut(t as u32)[..b.len()].copy_from_slice(b);
            let shape: Vec<i64> = specs[t].shape.iter().map(|&x| x as i64).collect();
            let zeros = vec![0i64; shape.len()];
            let region = Region::new(t as u32, &zeros, &shape).map_err(|e| e.to_string())?;
            io.push(TaskIo::new(region, access));
        }
        let id = self
            .registry
            .lookup(&k.name)
            .ok_or_else(|| format!("kernel `{}` has no body to run", k.name))?;
        with_checked_runner(&mut store, self.registry, |r| r.call(id, 0, &params, &io))
            .map_err(|e| format!("{}: kernel `{}`: {e}", self.who, k.name))?;
        for (t, key) in objs.iter().enumerate() {
            let b = self.held.get_mut(key).expect("held above");
            let n = b.len();
            b.copy_from_slice(&store.bytes(t as u32)[..n]);
        }
        self.calls += 1;
        Ok(())
    }
}
