//! Task-graph build cost on the LLaMA-7B prefill layer (`examples/llama7b_layer.wsp`).
//!
//! Run with `cargo bench -p pto-wsp-graph --bench build`. The task stream is produced once by the
//! reference expander and stored as plain records (regions already converted), so the timings
//! hold no expander cost. Each region's [`Region::slot_hash`] is stored beside the records, in
//! an array of its own that only the rows with a TensorMap read (as a generator that keeps its
//! regions built passes them: [`GraphBuilder::add_access_hashed`]); the rows without one read
//! the records alone. For each task count it measures, in one process, best of several runs:
//! - `copy`: the baseline — the same tasks pushed into flat vectors (nodes, params, regions) with
//!   no inference at all;
//! - `explicit`: the builder with no TensorMap (builder bookkeeping, CSR, nothing inferred);
//! - `exact fixed`, `exact dyn`: exact-key inference with [`FixedExactMap`] (capacity for every
//!   key: no window) and [`DynamicExactMap`];
//! - `fixed+win`: the fixed map at 16K entries under the example's 8192-task window
//!   (`retire_before(id - 8192)` every 2048 tasks): bounded memory;
//! - `overlap`: box-intersection inference with [`OverlapMap`] (the mode the example needs).
//!
//! Each is timed cold (a fresh builder, so fresh tables and vectors) and warm (one builder reused
//! through `finish_into`, as a runtime rebuilding the workload every step would). Every builder
//! time includes the CSR fan-out (`finish` / `finish_into`). Prints ns/task, tasks/ms, edges per
//! task and storage bytes per task and per edge.
//!
//! Two floors of the warm `exact fixed` build tell where its time goes past the caches
//! (`PTO_BUILD_BENCH=input|no-graph N`, see `main`): reading its input alone, and building
//! over the same map into a sink that keeps no task, so that no node, param, region or CSR is
//! stored.

use pto_wsp_graph::builder::{BuildStats, CollectEdges, EdgeSink, GraphBuilder};
use pto_wsp_graph::storage::{StorageBytes, TaskGraphStorage, TaskNode};
use pto_wsp_graph::tensor_map::{DynamicExactMap, FixedExactMap, OverlapMap, TensorMap};
use pto_wsp_graph::types::{Access, ExecDomain, ExecPool, Region, TaskId, TaskIo};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// One task of the stream, as plain data (its regions' hashes are in [`Stream::hashes`]).
#[derive(Clone, Copy)]
struct Task {
    kernel: u32,
    pool: ExecPool,
    stream: u32,
    target: Option<u32>,
    nparams: usize,
    params: [u64; 2],
    nregions: usize,
    regions: [(Region, Access); 4],
}

/// A task with each region's [`Region::slot_hash`] (`hashes[k]` is that of `task.regions[k]`),
/// for the rows over the fixed exact map, which takes them.
#[derive(Clone, Copy)]
struct HashedTask {
    task: Task,
    hashes: [u64; 4],
}

/// The task stream twice: plain records for the rows that do not pass hashes, and the same
/// records with their hashes for those that do, so that no row streams through the cache bytes
/// it does not read.
struct Stream {
    tasks: Vec<Task>,
    hashed: Vec<HashedTask>,
}

fn llama_stream(min_tasks: usize) -> Stream {
    // Compiled in, so that a copied bench binary runs anywhere.
    let text = include_str!("../../../examples/llama7b_layer.wsp");
    let module = pto_wsp_ir::resolve(
        &pto_wsp_ir::parse(text).expect("example parses"),
        &Default::default(),
    )
    .expect("example resolves");
    let seq = min_tasks.div_ceil(486) as i64 * 32;
    let bindings = pto_wsp_ir::Bindings::new().symbol("seq", seq);
    let mut out = Vec::with_capacity(min_tasks + 486);
    let mut hashed = Vec::with_capacity(min_tasks + 486);
    pto_wsp_ir::expand_each(&module, &bindings, &Default::default(), |_, t| {
        let mut task = Task {
            kernel: t.kernel,
            pool: t.pool,
            stream: t.stream,
            target: t.target,
            nparams: t.params.len(),
            params: [0; 2],
            nregions: t.regions.len(),
            regions: [(Region::default(), Access::In); 4],
        };
        for (d, p) in task.params.iter_mut().zip(&t.params) {
            *d = p.to_bits();
        }
        for (d, r) in task.regions.iter_mut().zip(&t.regions) {
            *d = (
                Region::new(r.tensor, &r.start, &r.size).expect("2-d"),
                r.access,
            );
        }
        hashed.push(HashedTask {
            task,
            hashes: task.regions.map(|(r, _)| r.slot_hash()),
        });
        out.push(task);
    })
    .expect("expands");
    Stream { tasks: out, hashed }
}

/// The floor: the same tasks into flat vectors, no inference.
fn copy(tasks: &[Task]) -> usize {
    let mut nodes: Vec<TaskNode> = Vec::with_capacity(tasks.len());
    let mut params: Vec<u64> = Vec::with_capacity(tasks.len() * 2);
    let mut io: Vec<TaskIo> = Vec::with_capacity(tasks.len() * 4);
    for (i, t) in tasks.iter().enumerate() {
        nodes.push(TaskNode {
            id: TaskId(i as u32),
            kernel: t.kernel,
            stream: t.stream,
            params_start: params.len() as u32,
            io_start: io.len() as u32,
            params_count: t.nparams as u16,
            io_count: t.nregions as u16,
            ..TaskNode::default()
        });
        params.extend_from_slice(&t.params[..t.nparams]);
        for &(r, a) in &t.regions[..t.nregions] {
            io.push(TaskIo::new(r, a));
        }
    }
    black_box(&nodes);
    nodes.len() + params.len() + io.len()
}

/// Builds the graph of `tasks` with a fresh builder over `map` (cold: every vector and table is
/// new); `window` retires tasks older than `id - window` every 2048 tasks.
fn build<M: TensorMap, R: Record>(tasks: &[R], map: M, window: Option<u32>) -> TaskGraphStorage {
    build_stats(tasks, map, window).0
}

/// [`build`], also returning the builder's counters.
fn build_stats<M: TensorMap, R: Record>(
    tasks: &[R],
    map: M,
    window: Option<u32>,
) -> (TaskGraphStorage, BuildStats) {
    let mut b = GraphBuilder::with_map(map, CollectEdges::default());
    b.reserve(tasks.len(), tasks.len() * 4, tasks.len() * 2);
    feed(&mut b, tasks, window);
    let stats = b.stats();
    (b.finish(), stats)
}

/// Warm: rebuilds into `out` with a builder that already built the workload (the decode-step
/// loop: `feed` then `finish_into`, no allocation).
fn build_warm<M: TensorMap, R: Record>(
    b: &mut GraphBuilder<M>,
    out: &mut TaskGraphStorage,
    tasks: &[R],
    window: Option<u32>,
) -> usize {
    feed(b, tasks, window);
    b.finish_into(out);
    out.edge_count()
}

/// A record of the stream, and how [`feed`] hands its regions to the builder.
trait Record {
    /// The task.
    fn task(&self) -> &Task;
    /// Adds the task's regions to the open task.
    fn add_regions<M: TensorMap, S: EdgeSink>(&self, b: &mut GraphBuilder<M, S>);
}

/// Plain regions ([`GraphBuilder::add_access`]).
impl Record for Task {
    #[inline(always)]
    fn task(&self) -> &Task {
        self
    }
    #[inline(always)]
    fn add_regions<M: TensorMap, S: EdgeSink>(&self, b: &mut GraphBuilder<M, S>) {
        for &(r, a) in &self.regions[..self.nregions] {
            b.add_access(r, a);
        }
    }
}

/// Regions with their hashes ([`GraphBuilder::add_access_hashed`]).
impl Record for HashedTask {
    #[inline(always)]
    fn task(&self) -> &Task {
        &self.task
    }
    #[inline(always)]
    fn add_regions<M: TensorMap, S: EdgeSink>(&self, b: &mut GraphBuilder<M, S>) {
        let t = &self.task;
        for (&(r, a), &h) in t.regions[..t.nregions].iter().zip(&self.hashes) {
            b.add_access_hashed(r, a, h);
        }
    }
}

/// The build loop.
fn feed<M: TensorMap, S: EdgeSink, R: Record>(
    b: &mut GraphBuilder<M, S>,
    tasks: &[R],
    window: Option<u32>,
) {
    for rec in tasks {
        let t = rec.task();
        let id = b.alloc_task(t.kernel, ExecDomain::HostCpu, t.pool, t.stream, t.target);
        for &p in &t.params[..t.nparams] {
            b.add_param(p);
        }
        rec.add_regions(b);
        b.submit().expect("fits");
        if let Some(w) = window
            && id.0 % 2048 == 2047
            && id.0 >= w
        {
            b.retire_before(TaskId(id.0 + 1 - w));
        }
    }
}

/// Best warm time: one builder and one output graph reused across runs.
fn best_warm<M: TensorMap, R: Record>(
    tasks: &[R],
    map: M,
    window: Option<u32>,
) -> (Duration, TaskGraphStorage) {
    let mut b = GraphBuilder::with_map(map, CollectEdges::default());
    let mut out = TaskGraphStorage::default();
    build_warm(&mut b, &mut out, tasks, window); // the first build grows every buffer
    let (t, _) = best(|| build_warm(&mut b, &mut out, tasks, window));
    (t, out)
}

/// Best of `repeat` passes over the hashed records reading what [`feed`] reads of each (the
/// kernel, each region's first start and its hash): the build's input alone.
fn floor_input(tasks: &[HashedTask], repeat: usize) {
    let mut best = Duration::MAX;
    for _ in 0..repeat {
        let t = Instant::now();
        let mut sum = 0u64;
        for h in tasks {
            sum = sum.wrapping_add(h.task.kernel as u64);
            for (&(r, _), &hash) in h.task.regions[..h.task.nregions].iter().zip(&h.hashes) {
                sum = sum.wrapping_add(r.start[0] as u64 ^ hash);
            }
        }
        black_box(sum);
        best = best.min(t.elapsed());
    }
    eprintln!("input: best {:.1} ns/task", per_task(best, tasks.len()));
}

/// A sink that counts edges and keeps no task ([`EdgeSink::forgets_tasks`]): the builder then
/// stores no node, param or region and lays out no CSR.
#[derive(Default)]
struct CountEdges(u64);

impl EdgeSink for CountEdges {
    fn edge(&mut self, _: TaskId, _: TaskId) {
        self.0 += 1;
    }
    fn submitted(&mut self, _: TaskId) {}
    fn forgets_tasks(&self) -> bool {
        true
    }
}

/// Best of `repeat` warm builds of `tasks` over the `exact fixed` row's map into
/// [`CountEdges`] (the builder [`GraphBuilder::reset`] between builds): the build without
/// its graph's storage.
fn floor_no_graph(tasks: &[HashedTask], repeat: usize) {
    let n = tasks.len();
    let mut b = GraphBuilder::with_map(FixedExactMap::new(2 * n + 64), CountEdges::default());
    let mut best = Duration::MAX;
    for _ in 0..repeat {
        let t = Instant::now();
        feed(&mut b, tasks, None);
        black_box(b.sink().0);
        b.reset();
        best = best.min(t.elapsed());
    }
    eprintln!(
        "{} edges, no graph: best {:.1} ns/task",
        b.sink().0,
        per_task(best, n)
    );
}

/// `d` in ns per task of `n`.
fn per_task(d: Duration, n: usize) -> f64 {
    d.as_nanos() as f64 / n as f64
}

/// No inference at all: a map that finds nothing.
struct NoMap;
impl TensorMap for NoMap {
    fn access<F: FnMut(TaskId, pto_wsp_graph::types::EdgeKind)>(
        &mut self,
        _: TaskId,
        _: &Region,
        _: Access,
        _: &mut F,
    ) {
    }
    fn retire_before(&mut self, _: TaskId) {}
    fn clear(&mut self) {}
    fn stats(&self) -> pto_wsp_graph::tensor_map::MapStats {
        Default::default()
    }
}

/// Best wall time of `f` over at least 3 runs and ~0.3 s.
fn best<R>(mut f: impl FnMut() -> R) -> (Duration, R) {
    let mut best = Duration::MAX;
    let start = Instant::now();
    let mut runs = 0;
    let mut last = None;
    while runs < 3 || start.elapsed() < Duration::from_millis(300) {
        let t = Instant::now();
        let r = black_box(f());
        best = best.min(t.elapsed());
        last = Some(r);
        runs += 1;
    }
    (best, last.expect("ran"))
}

fn main() {
    // `PTO_BUILD_BENCH=exact-fixed|exact-dyn|fixed-win|overlap N` runs one builder on N tasks a
    // few times (for profilers), nothing else; `PTO_BUILD_WARM=1` reuses one builder
    // (`finish_into`), which also accepts `explicit`. Two floors of the warm `exact fixed`
    // build, for telling where its time goes: `input` reads the hashed records and builds
    // nothing, `no-graph` builds over the same map into a sink that keeps no task (no nodes,
    // params, regions or CSR are stored).
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    if let (Ok(which), Some(n)) = (std::env::var("PTO_BUILD_BENCH"), args.first()) {
        let n: usize = n.parse().expect("a task count");
        let all = llama_stream(n);
        let (plain, hashed) = (&all.tasks[..n], &all.hashed[..n]);
        let repeat = std::env::var("PTO_BUILD_REPEAT").map_or(5, |r| r.parse().expect("a count"));
        match which.as_str() {
            "input" => return floor_input(hashed, repeat),
            "no-graph" => return floor_no_graph(hashed, repeat),
            _ => {}
        }
        if std::env::var("PTO_BUILD_WARM").is_ok_and(|w| w == "1") {
            fn warm<M: TensorMap, R: Record>(
                tasks: &[R],
                map: M,
                window: Option<u32>,
                repeat: usize,
            ) {
                let mut b = GraphBuilder::with_map(map, CollectEdges::default());
                let mut out = TaskGraphStorage::default();
                let mut best = Duration::MAX;
                for _ in 0..repeat {
                    let t = Instant::now();
                    black_box(build_warm(&mut b, &mut out, tasks, window));
                    best = best.min(t.elapsed());
                }
                eprintln!(
                    "{} edges, best {:.1} ns/task",
                    out.edge_count(),
                    per_task(best, tasks.len())
                );
            }
            match which.as_str() {
                "exact-fixed" => warm(hashed, FixedExactMap::new(2 * n + 64), None, repeat),
                "exact-dyn" => warm(plain, DynamicExactMap::new(), None, repeat),
                "fixed-win" => warm(hashed, FixedExactMap::new(16 * 1024), Some(8192), repeat),
                "explicit" => warm(plain, NoMap, None, repeat),
                _ => warm(plain, OverlapMap::new(), None, repeat),
            }
            return;
        }
        for _ in 0..repeat {
            let g = match which.as_str() {
                "exact-fixed" => build_stats(hashed, FixedExactMap::new(2 * n + 64), None),
                "exact-dyn" => build_stats(plain, DynamicExactMap::new(), None),
                "fixed-win" => build_stats(hashed, FixedExactMap::new(16 * 1024), Some(8192)),
                _ => build_stats(plain, OverlapMap::new(), None),
            };
            black_box(&g);
            eprintln!("{:?}", g.1);
        }
        return;
    }
    let sizes = [1_000usize, 10_000, 50_000, 200_000];
    if std::env::var("PTO_BUILD_QUICK").is_ok_and(|q| q == "1") {
        quick(&sizes);
        return;
    }
    let all = llama_stream(*sizes.last().expect("sizes"));
    let head = |what: &str| {
        println!("{what}");
        println!(
            "{:>7} | {:>8} | {:>8} | {:>12} | {:>12} | {:>12} | {:>12} | {:>12} |",
            "tasks",
            "copy",
            "explicit",
            "exact fixed",
            "exact dyn",
            "fixed+win",
            "overlap",
            "edges/task"
        );
    };
    let mut bytes: Vec<(&str, usize, StorageBytes, usize)> = Vec::new();
    let mut warm_rows = Vec::new();
    head("cold (fresh builder and graph each run)");
    for &n in &sizes {
        let (plain, hashed) = (&all.tasks[..n], &all.hashed[..n]);
        let ns = |d: Duration| per_task(d, n);
        let cell = |d: Duration| format!("{:>5.1} ({:>4.0})", ns(d), 1e6 / ns(d));
        let (t_copy, _) = best(|| copy(plain));
        let (t_expl, _) = best(|| build(plain, NoMap, None));
        let (t_fixed, g_fixed) = best(|| build(hashed, FixedExactMap::new(2 * n + 64), None));
        let (t_dyn, g_dyn) = best(|| build(plain, DynamicExactMap::new(), None));
        let (t_win, _) = best(|| build(hashed, FixedExactMap::new(16 * 1024), Some(8192)));
        let (t_ovl, g_ovl) = best(|| build(plain, OverlapMap::new(), None));
        assert_eq!(g_fixed, g_dyn, "fixed and dynamic exact maps agree");
        let edges = format!(
            "{:>5.2} {:>5.2}",
            g_dyn.edge_count() as f64 / n as f64,
            g_ovl.edge_count() as f64 / n as f64
        );
        println!(
            "{:>7} | {:>8.1} | {:>8.1} | {} | {} | {} | {} | {edges} |",
            n,
            ns(t_copy),
            ns(t_expl),
            cell(t_fixed),
            cell(t_dyn),
            cell(t_win),
            cell(t_ovl),
        );
        let (w_expl, _) = best_warm(plain, NoMap, None);
        let (w_fixed, h_fixed) = best_warm(hashed, FixedExactMap::new(2 * n + 64), None);
        let (w_dyn, _) = best_warm(plain, DynamicExactMap::new(), None);
        let (w_win, _) = best_warm(hashed, FixedExactMap::new(16 * 1024), Some(8192));
        let (w_ovl, h_ovl) = best_warm(plain, OverlapMap::new(), None);
        assert_eq!(h_fixed, g_fixed, "a reused builder builds the same graph");
        assert_eq!(h_ovl, g_ovl, "a reused builder builds the same graph");
        warm_rows.push(format!(
            "{:>7} | {:>8.1} | {:>8.1} | {} | {} | {} | {} | {edges} |",
            n,
            ns(t_copy),
            ns(w_expl),
            cell(w_fixed),
            cell(w_dyn),
            cell(w_win),
            cell(w_ovl),
        ));
        if n == *sizes.last().expect("sizes") {
            bytes.push(("exact", n, g_dyn.bytes(), g_dyn.edge_count()));
            bytes.push(("overlap", n, g_ovl.bytes(), g_ovl.edge_count()));
        }
    }
    head("warm (one builder reused through finish_into; copy column repeated from cold)");
    for r in warm_rows {
        println!("{r}");
    }
    println!("(ns/task, tasks/ms in parentheses; edges/task: exact, overlap)");
    for (mode, n, b, e) in bytes {
        println!(
            "{mode:>7} @ {n}: {} edges; bytes/task: nodes {:.1} + params {:.1} + regions {:.1}; \
             bytes/edge {:.1}; total {:.1} MB",
            e,
            b.tasks as f64 / n as f64,
            b.params as f64 / n as f64,
            b.io as f64 / n as f64,
            b.fanout as f64 / e.max(1) as f64,
            b.total() as f64 / 1e6
        );
    }
}

/// `PTO_BUILD_QUICK=1`: explicit, exact fixed and fixed+win only, cold then warm (for A/B runs).
fn quick(sizes: &[usize]) {
    let all = llama_stream(*sizes.last().expect("sizes"));
    println!(
        "{:>7} | {:>8} | {:>11} | {:>9} | {:>8} | {:>11} | {:>9}",
        "tasks", "expl", "fixed", "fixed+win", "expl w", "fixed w", "win w"
    );
    for &n in sizes {
        let (plain, hashed) = (&all.tasks[..n], &all.hashed[..n]);
        let ns = |d: Duration| per_task(d, n);
        let (t_expl, _) = best(|| build(plain, NoMap, None));
        let (t_fixed, _) = best(|| build(hashed, FixedExactMap::new(2 * n + 64), None));
        let (t_win, _) = best(|| build(hashed, FixedExactMap::new(16 * 1024), Some(8192)));
        let (w_expl, _) = best_warm(plain, NoMap, None);
        let (w_fixed, _) = best_warm(hashed, FixedExactMap::new(2 * n + 64), None);
        let (w_win, _) = best_warm(hashed, FixedExactMap::new(16 * 1024), Some(8192));
        println!(
            "{:>7} | {:>8.1} | {:>11.1} | {:>9.1} | {:>8.1} | {:>11.1} | {:>9.1}",
            n,
            ns(t_expl),
            ns(t_fixed),
            ns(t_win),
            ns(w_expl),
            ns(w_fixed),
            ns(w_win)
        );
    }
}
