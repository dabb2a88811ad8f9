//! The Plan-Descriptor-Execute measurements of `docs/BENCHMARKS.md`, each with a same-process
//! baseline: descriptor size against a task node, descriptor generation per descriptor on one
//! thread, dispatch throughput on 1 and 2 dispatch threads, and load balance of the planned
//! chunk size against fixed 256 / 1024 / 4096 on the cycle model and on real CPU runs.
//!
//! Run: `cargo run --release -p pto-wsp --example pde_measure` (in the facade, which sees both
//! Plan-Descriptor-Execute and the task-graph runtime it is measured against).

use pto_wsp::cpu::sim::{SimMachine, SimSchedule, SimTask, simulate};
use pto_wsp::graph::storage::TaskNode;
use pto_wsp::ir::task_io::TaskIo;
use pto_wsp::pde::decode::{
    DecodeBatch, decode_attention, decode_space, decode_tiers, emit_chunks, planned_workspace,
};
use pto_wsp::pde::*;
use std::hint::black_box;
use std::time::Instant;

fn best_of<T>(reps: usize, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut best = f64::INFINITY;
    let mut last = None;
    for _ in 0..reps {
        let t = Instant::now();
        let r = f();
        best = best.min(t.elapsed().as_secs_f64());
        last = Some(r);
    }
    (best, last.expect("reps >= 1"))
}

fn lcg_lens(n: usize, max: u32, seed: u64) -> Vec<u32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            1 + ((s >> 33) as u32 % max)
        })
        .collect()
}

fn main() -> Result<()> {
    if std::env::args().any(|a| a == "--vs-workload") {
        return vs_workload();
    }
    // 1. Size.
    let node = std::mem::size_of::<TaskNode>();
    let io = std::mem::size_of::<TaskIo>();
    let task = node + 6 * io + 2 * 8;
    println!("descriptor: {} bytes", Descriptor::BYTES);
    println!(
        "task node: {node} bytes + 6 region entries x {io} (q, k, v, o, m, l) + 2 params x 8 = {task} bytes ({:.1}x)",
        task as f64 / Descriptor::BYTES as f64
    );

    // 2. Generation on one thread: the decode generator (space walk, `continue`, tier
    // selection, workspace allocation, checks) into a preallocated vector, against filling the
    // same vector with the same descriptors copied from a finished list (the floor: one
    // 36-byte store each).
    let (heads, group, dim) = (8u32, 4u32, 128u32);
    let lens = lcg_lens(4096, 8192, 7);
    let chunk = 256;
    let max_len = *lens.iter().max().expect("non-empty");
    let space = decode_space(lens.len() as u32, heads)
        .bind(&[("kv_chunk", max_len)], &[("kv_chunk", chunk)])?;
    let tiers = decode_tiers(group, dim)?;
    let ws = planned_workspace(&lens, chunk, heads, group, dim);
    let n_desc: usize = lens
        .iter()
        .map(|&l| l.div_ceil(chunk).max(1) as usize * heads as usize)
        .sum();
    let mut bases = vec![NO_WORKSPACE; lens.len()];
    let (t_gen, (descs, _)) = best_of(7, || {
        generate_vec(&space, &tiers, ws, n_desc, |e| {
            emit_chunks(e, &lens, &mut bases)
        })
        .expect("generation")
    });
    let (t_copy, copied) = best_of(7, || {
        let mut v: Vec<Descriptor> = Vec::with_capacity(n_desc);
        for d in black_box(&descs) {
            v.push(*d);
        }
        v
    });
    assert_eq!(copied.len(), descs.len());
    let walked = lens.len() as u64 * u64::from(space.count(1)) * u64::from(heads);
    println!(
        "generation: {} descriptors ({} space points walked), {:.2} ns/descriptor; copy baseline {:.2} ns/descriptor",
        descs.len(),
        walked,
        t_gen * 1e9 / descs.len() as f64,
        t_copy * 1e9 / descs.len() as f64
    );

    // 3. Dispatch throughput: a kernel that reads four fields; generation on this thread.
    let flat = Space::new("flat").axis("i", 0, End::Dynamic);
    let n = 2_000_000u32;
    let flat = flat.bind(&[("i", n)], &[])?;
    let one = Tiers::new("one", vec![Tier::default_tier("k", 0)])?;
    let kernel = |d: &Descriptor| {
        black_box(d.indices[0] ^ d.start ^ d.end ^ d.workspace);
        Ok(())
    };
    let (t_seq, _) = best_of(5, || {
        for i in 0..n {
            let d = Descriptor {
                indices: [i, 0, 0],
                start: i,
                end: i + 1,
                ..Descriptor::default()
            };
            kernel(black_box(&d)).expect("kernel");
        }
    });
    println!(
        "dispatch baseline (generate and call the kernel inline, one thread): {:.1} M descriptors/s",
        f64::from(n) / t_seq / 1e6
    );
    for threads in [1, 2] {
        let (t, stats) = best_of(5, || {
            Launch::new(&flat, &one)
                .kernel("k", &kernel)
                .dispatch_threads(threads)
                .queue_capacity(4096)
                .run(|e| {
                    for i in 0..n {
                        e.emit(Descriptor {
                            indices: [i, 0, 0],
                            start: i,
                            end: i + 1,
                            ..Descriptor::default()
                        })?;
                    }
                    Ok(())
                })
                .expect("launch")
        });
        println!(
            "dispatch, {threads} dispatch thread(s) + the generator thread: {:.1} M descriptors/s ({:.0} ns each), per thread {:?}",
            f64::from(n) / t / 1e6,
            t * 1e9 / f64::from(n),
            stats.per_thread
        );
    }

    // The same with a kernel of about 100 ns (64 dependent multiply-adds on the descriptor).
    let heavy = |d: &Descriptor| {
        let mut x = d.indices[0] as f32;
        for _ in 0..64 {
            x = black_box(x * 0.999 + 1.0);
        }
        black_box(x);
        Ok(())
    };
    let m = 400_000u32;
    let (t_seq, _) = best_of(5, || {
        for i in 0..m {
            let d = Descriptor {
                indices: [i, 0, 0],
                ..Descriptor::default()
            };
            heavy(black_box(&d)).expect("kernel");
        }
    });
    println!(
        "heavier kernel: inline baseline {:.0} ns per descriptor",
        t_seq * 1e9 / f64::from(m)
    );
    for threads in [1, 2] {
        let (t, stats) = best_of(5, || {
            Launch::new(&flat, &one)
                .kernel("k", &heavy)
                .dispatch_threads(threads)
                .queue_capacity(4096)
                .run(|e| {
                    for i in 0..m {
                        e.emit(Descriptor {
                            indices: [i, 0, 0],
                            ..Descriptor::default()
                        })?;
                    }
                    Ok(())
                })
                .expect("launch")
        });
        println!(
            "heavier kernel, {threads} dispatch thread(s): {:.2} M descriptors/s ({:.0} ns each), per thread {:?}",
            f64::from(m) / t / 1e6,
            t * 1e9 / f64::from(m),
            stats.per_thread
        );
    }

    // 4. Load balance.
    let mut skew = vec![512u32; 31];
    skew.insert(15, 32768);
    let mixes: [(&str, Vec<u32>); 3] = [
        ("uniform 32 x 4096", vec![4096; 32]),
        ("one 32K among 31 x 512", skew),
        ("all short 32 x 200", vec![200; 32]),
    ];
    const OVERHEAD: u64 = 128;
    println!(
        "\ncycle model: chunk cost = {OVERHEAD} + tokens, merge cost = {OVERHEAD} + 8 x chunks, barrier between the launches"
    );
    for executors in [24u32, 2] {
        println!(
            "  {executors} executors, 8 KV heads, planner budget batch x heads + executors x 8, min_chunk 256"
        );
        for (name, lens) in &mixes {
            let plan = plan_kv_chunk(lens, 8, executors, PlanOptions::default())?;
            let mut row = Vec::new();
            for c in [plan.chunk, 256, 1024, 4096] {
                row.push((c, model(lens, 8, c, executors, OVERHEAD)));
            }
            let best_fixed = row[1..].iter().map(|r| r.1).min().expect("three");
            println!(
                "    {name}: planned chunk {} -> {} cycles ({:+.1}% vs best fixed); fixed {}",
                plan.chunk,
                row[0].1,
                (row[0].1 as f64 / best_fixed as f64 - 1.0) * 100.0,
                row[1..]
                    .iter()
                    .map(|(c, m)| format!("{c}: {m}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }

    println!(
        "\nreal CPU runs: 2 KV heads, group 4, dim 128, 2 dispatch threads; the chunk sizes run \
         in turn, 15 rounds, best round each"
    );
    for (name, lens) in &mixes {
        let batch = DecodeBatch::synthetic(lens, 2, 4, 128, 1);
        let plan = plan_kv_chunk(lens, 2, 2, PlanOptions::default())?;
        let chunks = [plan.chunk, 256, 1024, 4096];
        let mut best = [f64::INFINITY; 4];
        for _ in 0..15 {
            for (b, &c) in best.iter_mut().zip(&chunks) {
                let t = Instant::now();
                black_box(decode_attention(&batch, c, 2).expect("decode"));
                *b = b.min(t.elapsed().as_secs_f64() * 1e3);
            }
        }
        let best_fixed = best[1..].iter().copied().fold(f64::INFINITY, f64::min);
        println!(
            "  {name}: planned chunk {} -> {:.2} ms ({:+.1}% vs best fixed); fixed {}",
            plan.chunk,
            best[0],
            (best[0] / best_fixed - 1.0) * 100.0,
            chunks[1..]
                .iter()
                .zip(&best[1..])
                .map(|(c, t)| format!("{c}: {t:.2} ms"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(())
}

/// The plan side of "workload vs plan": the shape of `examples/decode_ragged.wsp` run with
/// `pto-wsp run` (32 requests of 4,096 tokens, 8 KV heads, group 4, dim 128, chunks of 512, 2
/// threads), here as descriptors.
fn vs_workload() -> Result<()> {
    let lens = vec![4096u32; 32];
    let batch = DecodeBatch::synthetic(&lens, 8, 4, 128, 1);
    let mut best = f64::INFINITY;
    let mut last = None;
    for _ in 0..5 {
        let t = Instant::now();
        let run = decode_attention(&batch, 512, 2)?;
        best = best.min(t.elapsed().as_secs_f64());
        last = Some(run);
    }
    let run = last.expect("ran");
    let merges = run.merges.as_ref().map_or(0, |m| m.descriptors);
    let items = run.chunks.descriptors + merges;
    println!(
        "plan: {} chunk + {merges} merge descriptors, best of 5 {:.1} ms end to end ({:.1} us per work item), descriptors {} bytes each",
        run.chunks.descriptors,
        best * 1e3,
        best * 1e6 / items as f64,
        Descriptor::BYTES
    );
    Ok(())
}

/// Makespan on the cycle model of the chunk launch, a barrier, and the merge launch.
fn model(lens: &[u32], heads: u32, chunk: u32, executors: u32, overhead: u64) -> u64 {
    let mut tasks = Vec::new();
    let mut merges = Vec::new();
    for &len in lens {
        let n = len.div_ceil(chunk).max(1);
        for c in 0..n {
            let tokens = (len - c * chunk).min(chunk);
            for _ in 0..heads {
                tasks.push(SimTask::with_cost(overhead + u64::from(tokens)));
            }
        }
        if n > 1 {
            for _ in 0..heads {
                merges.push(SimTask::with_cost(overhead + 8 * u64::from(n)));
            }
        }
    }
    let chunks = tasks.len() as u32;
    let mut edges = Vec::new();
    if !merges.is_empty() {
        tasks.push(SimTask::with_cost(0));
        edges.extend((0..chunks).map(|t| (t, chunks)));
        for (i, m) in merges.into_iter().enumerate() {
            tasks.push(m);
            edges.push((chunks, chunks + 1 + i as u32));
        }
    }
    let machine = SimMachine {
        executors,
        vector: None,
        placement: false,
    };
    simulate(&tasks, &edges, &machine, &SimSchedule::default())
        .expect("a forward graph")
        .total_cycles
}
