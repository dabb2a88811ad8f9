//! Data-dependent generation (`examples/datadep/`): modules whose generator reads what their
//! own tasks computed, run by the sequential reference run, by host streamed runs and by
//! device-generation runs (every executor interprets the bytecode's `read` / `while` / `break`
//! opcodes) on 1, 2 and 4 threads, each checked against numbers computed here by plain loops
//! (never by the kernels under test).

use super::resolved;
use pto_wsp::cpu::{GenStats, RunStats, sequential};
use pto_wsp::ir::{Bindings, Module, parse};
use pto_wsp::kernels::{KernelId, KernelRegistry, TensorStore};
use pto_wsp::{CompileOptions, compile, lower};

fn example(name: &str) -> Module {
    let path = format!(
        "{}/../../examples/datadep/{name}.wsp",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    parse(&text).unwrap_or_else(|e| panic!("{e}"))
}

/// A small deterministic generator (64-bit LCG, top bits) of values in `[0, 1)`.
fn uniform(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 40) as f32 / (1u64 << 24) as f32
        })
        .collect()
}

/// What a run produced: the final tensors, the user tasks it ran, its generator figures.
struct Outcome {
    store: TensorStore,
    tasks: u64,
    generation: GenStats,
}

/// The sequential reference run of `m` from `input`.
fn reference_run(m: &Module, input: &TensorStore) -> Outcome {
    reference_run_bound(m, &Bindings::new(), input)
}

/// The sequential reference run of `m` under `b` from `input`.
fn reference_run_bound(m: &Module, b: &Bindings, input: &TensorStore) -> Outcome {
    let reg = KernelRegistry::with_builtins();
    let kernels: Vec<Option<KernelId>> =
        m.kernels.iter().map(|k| reg.lookup(&k.name.name)).collect();
    let names: Vec<String> = m.kernels.iter().map(|k| k.name.name.clone()).collect();
    let store = input.clone();
    let s = sequential(&resolved(m), b, &store, &reg, &kernels, &names)
        .unwrap_or_else(|e| panic!("sequential run: {e}"));
    Outcome {
        store,
        tasks: s.tasks,
        generation: s.generation,
    }
}

/// Compiles `m` with `options` and runs it under `b` from `input`: the run's stats and its
/// tensors afterwards; `what` names the run in a failure.
fn run_from(
    m: &Module,
    b: &Bindings,
    input: &TensorStore,
    options: CompileOptions,
    what: &str,
) -> (RunStats, TensorStore) {
    let mut p = compile(lower(m).unwrap(), options).unwrap_or_else(|e| panic!("{what}: {e}"));
    *p.tensors(b).unwrap() = Some(input.clone());
    let stats = p.execute(b).unwrap_or_else(|e| panic!("{what}: {e}"));
    let store = p.tensors(b).unwrap().as_ref().unwrap().clone();
    (stats, store)
}

/// A host streamed run of `m` from `input` on `threads` threads, debug checks on.
fn host_run(m: &Module, input: &TensorStore, threads: usize) -> Outcome {
    let (stats, store) = run_from(
        m,
        &Bindings::new(),
        input,
        CompileOptions {
            threads,
            debug_checks: true,
            ..CompileOptions::default()
        },
        &format!("host run, {threads} threads"),
    );
    Outcome {
        store,
        tasks: stats.tasks - stats.barriers,
        generation: stats.generation,
    }
}

/// A device-generation run of `m` from `input` on `threads` threads (executors), debug checks
/// on.
fn devgen_run(m: &Module, input: &TensorStore, threads: usize) -> Outcome {
    let (stats, store) = run_from(
        m,
        &Bindings::new(),
        input,
        CompileOptions {
            threads,
            debug_checks: true,
            device_gen: true,
            ..CompileOptions::default()
        },
        &format!("device generation, {threads} threads"),
    );
    let d = stats
        .device_gen
        .as_ref()
        .expect("a device-generation report");
    // Every executor made every computed read; the report's count is one executor's.
    assert!(
        d.executors
            .iter()
            .all(|e| e.computed_reads == stats.generation.computed_reads)
    );
    Outcome {
        store,
        tasks: stats.tasks - stats.barriers,
        generation: stats.generation,
    }
}

/// Every run of `m` from `input`: the sequential reference, then host and device-generation
/// runs on 1, 2, 4 threads.
fn every_run(m: &Module, input: &TensorStore) -> Vec<(String, Outcome)> {
    let mut out = vec![("sequential".to_string(), reference_run(m, input))];
    for threads in [1, 2, 4] {
        out.push((
            format!("host {threads} threads"),
            host_run(m, input, threads),
        ));
        out.push((
            format!("device generation {threads} threads"),
            devgen_run(m, input, threads),
        ));
    }
    out
}

fn assert_close(what: &str, got: &[f32], want: &[f64], rel: f64) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let tol = rel * (1.0 + w.abs());
        assert!(
            (g as f64 - w).abs() <= tol,
            "{what}: element {i} is {g}, want {w}"
        );
    }
}

// ----- MoE -----------------------------------------------------------------------------------

const TOKENS: usize = 16;
const WIDTH: usize = 8;
const EXPERTS: usize = 8;

/// The routing a plain top-2 over `X · WG` (in `f64`) gives: each token's two experts.
fn reference_routing(x: &[f32], wg: &[f32]) -> Vec<[usize; 2]> {
    (0..TOKENS)
        .map(|t| {
            let logit = |e: usize| -> f64 {
                (0..WIDTH)
                    .map(|d| x[t * WIDTH + d] as f64 * wg[d * EXPERTS + e] as f64)
                    .sum()
            };
            let mut order: Vec<usize> = (0..EXPERTS).collect();
            order.sort_by(|&a, &b| logit(b).total_cmp(&logit(a)).then(a.cmp(&b)));
            // The test data must not hinge on rounding: the second and third are apart.
            assert!(
                logit(order[1]) - logit(order[2]) > 1e-4,
                "token {t}: a near tie, choose other data"
            );
            [order[0], order[1]]
        })
        .collect()
}

/// The MoE inputs; `idle` makes expert 7's router column so low that no token picks it.
fn moe_input(m: &Module, seed: u64, idle: bool) -> (TensorStore, Vec<[usize; 2]>, Vec<f64>) {
    let mut s = TensorStore::new(m, &Bindings::new()).unwrap();
    let x = uniform(seed, TOKENS * WIDTH);
    let mut wg: Vec<f32> = uniform(seed + 1, WIDTH * EXPERTS)
        .iter()
        .map(|v| v - 0.5)
        .collect();
    if idle {
        for d in 0..WIDTH {
            wg[d * EXPERTS + 7] = -10.0;
        }
    }
    let w: Vec<f32> = uniform(seed + 2, EXPERTS * WIDTH * WIDTH)
        .iter()
        .map(|v| v - 0.5)
        .collect();
    s.write("X", &x).unwrap();
    s.write("WG", &wg).unwrap();
    s.write("W", &w).unwrap();
    // Garbage where the run must write before it reads.
    s.write("Y", &vec![7.0f32; TOKENS * WIDTH]).unwrap();
    s.write("COUNT", &[99i32; EXPERTS]).unwrap();
    let routing = reference_routing(&x, &wg);
    let mut y = vec![0.0f64; TOKENS * WIDTH];
    for (t, experts) in routing.iter().enumerate() {
        for &e in experts {
            for j in 0..WIDTH {
                let v: f64 = (0..WIDTH)
                    .map(|d| x[t * WIDTH + d] as f64 * w[(e * WIDTH + d) * WIDTH + j] as f64)
                    .sum();
                y[t * WIDTH + j] += v;
            }
        }
    }
    (s, routing, y)
}

#[test]
fn moe_generates_tasks_only_for_activated_experts_and_matches_reference() {
    let m = example("moe_routed");
    for (seed, idle) in [(11u64, false), (5, true)] {
        let (input, routing, want) = moe_input(&m, seed, idle);
        let mut per_expert = [0usize; EXPERTS];
        for r in &routing {
            for &e in r {
                per_expert[e] += 1;
            }
        }
        if idle {
            assert_eq!(per_expert[7], 0, "routing {routing:?}");
        }
        // Fill, router product, top-k, bucketing; then per (expert, tile of 4 tokens) one
        // gather, one product, one scatter-add: nothing for an expert with no token.
        let tiles: usize = per_expert.iter().map(|n| n.div_ceil(4)).sum();
        let want_tasks = 4 + 3 * tiles as u64;
        for (label, o) in every_run(&m, &input) {
            let y: Vec<f32> = o.store.read("Y").unwrap();
            assert_close(&format!("seed {seed} {label}: Y"), &y, &want, 1e-5);
            assert_eq!(o.tasks, want_tasks, "seed {seed} {label}: {per_expert:?}");
            // One computed read per expert (its token count).
            assert_eq!(o.generation.computed_reads, EXPERTS as u64, "{label}");
            let counts: Vec<i32> = o.store.read("COUNT").unwrap();
            let want_counts: Vec<i32> = per_expert.iter().map(|&n| n as i32).collect();
            assert_eq!(counts, want_counts, "seed {seed} {label}");
        }
    }
}

// ----- convergence loop ----------------------------------------------------------------------

/// The iteration as plain `f32` arithmetic: (iterations, final x), stopping when the step
/// falls under `tol` (the flag is `topk`'s: index 0 while step >= tol) or at `max`.
fn converge_reference(tol: f32, max: usize) -> (usize, f32, bool) {
    let mut x = 0.0f32;
    for k in 1..=max {
        let xn = x * 0.5 + 1.0;
        let step = xn - x;
        x = xn;
        if step < tol {
            return (k, x, false);
        }
    }
    (max, x, true)
}

#[test]
fn convergence_loop_stops_at_the_tolerance_or_at_max() {
    let text = std::fs::read_to_string(format!(
        "{}/../../examples/datadep/converge.wsp",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    for (max, label) in [(60usize, "converges"), (5, "reaches max")] {
        let m = parse(&text.replace("max 60", &format!("max {max}"))).unwrap();
        let (iters, x, at_max) = converge_reference(0.001, max);
        let input = TensorStore::new(&m, &Bindings::new()).unwrap();
        for (run, o) in every_run(&m, &input) {
            let got: Vec<f32> = o.store.read("X").unwrap();
            assert!(
                got.iter().all(|&g| g == x),
                "{label} {run}: {got:?} want {x}"
            );
            assert_eq!(o.tasks, 2 + 5 * iters as u64, "{label} {run}");
            assert_eq!(o.generation.computed_reads, iters as u64, "{label} {run}");
            assert_eq!(
                o.generation.loops_at_max,
                u64::from(at_max),
                "{label} {run}"
            );
        }
    }
}

// ----- early exit ----------------------------------------------------------------------------

#[test]
fn early_exit_decode_stops_after_the_flagged_chunk() {
    let m = example("early_exit");
    for seed in [3u64, 8] {
        let mut input = TensorStore::new(&m, &Bindings::new()).unwrap();
        let v = uniform(seed, 16 * 4);
        input.write("V", &v).unwrap();
        input.write("OUT", &vec![5.0f32; 16 * 4]).unwrap();
        // The first chunk whose 2 V[c, 0] reaches 1.5 is the last one generated.
        let stop = (0..16).find(|&c| 2.0 * v[c * 4] >= 1.5).unwrap_or(15);
        let mut want = vec![0.0f64; 16 * 4];
        for c in 0..=stop {
            for j in 0..4 {
                want[c * 4 + j] = 2.0 * v[c * 4 + j] as f64;
            }
        }
        for (run, o) in every_run(&m, &input) {
            let got: Vec<f32> = o.store.read("OUT").unwrap();
            assert_close(&format!("seed {seed} {run}"), &got, &want, 1e-7);
            assert_eq!(o.tasks, 2 + 3 * (stop as u64 + 1), "seed {seed} {run}");
        }
    }
}

// ----- refusals --------------------------------------------------------------------------------

/// A ragged axis whose row lengths and a sparse axis whose indptr and indices tasks of the run
/// write (the lengths copied from `H`, the indices from what `A` holds after a task wrote it),
/// run by every path: the tasks and the data equal the sequential reference run, and each
/// axis counts as one computed read per array.
#[test]
fn ragged_and_sparse_axes_over_computed_arrays_run_in_every_path() {
    let text = "tensor H: i64[4];\ntensor HP: i64[3];\ntensor A: i64[4];\ntensor P: i64[3];\n\
                tensor Q: i64[4];\ntensor D: f32[4, 4];\ntensor E: f32[4, 4];\ntensor F: f32[16, 4];\n\
                axis R = ragged(4, A);\naxis S = sparse(2, P, Q);\n\
                kernel copy(in x: i64[?], out y: i64[?]);\n\
                kernel add_scalar(in x: f32[?], out y: f32[?], value: f64);\n\
                workload main() {\n    task copy(H[0 +: 4], A[0 +: 4]);\n\
                \x20   task copy(HP[0 +: 3], P[0 +: 3]);\n    task copy(A[0 +: 4], Q[0 +: 4]);\n\
                \x20   parallel_for r, p in R { task add_scalar(D[r, 0 +: 4], F[r * 4 + p, 0 +: 4], 1.0); }\n\
                \x20   select r, e in S { task add_scalar(D[r, 0 +: 4], E[e, 0 +: 4], 2.0); }\n}\n";
    let m = parse(text).unwrap();
    let b = Bindings::new()
        .array("H", vec![2, 0, 3, 1])
        .array("HP", vec![0, 1, 4]);
    let mut input = TensorStore::new(&m, &b).unwrap();
    input.fill_random(3);
    // What the host bound for the computed tensors is never read: the run's writes are.
    input.write("A", &[0i64; 4]).unwrap();
    input.write("P", &[0i64, 0, 0]).unwrap();
    let reg = KernelRegistry::with_builtins();
    let kernels: Vec<Option<KernelId>> =
        m.kernels.iter().map(|k| reg.lookup(&k.name.name)).collect();
    let names: Vec<String> = m.kernels.iter().map(|k| k.name.name.clone()).collect();
    let want = input.clone();
    let seq = sequential(&resolved(&m), &b, &want, &reg, &kernels, &names).unwrap();
    // 3 copies, 2 + 0 + 3 + 1 ragged tasks, 4 sparse entries.
    assert_eq!(seq.tasks, 13);
    assert_eq!(seq.generation.computed_reads, 3);
    // Independent reference: F[4 r + p] = D[r] + 1 for the H[r] positions p of row r;
    // E[Q[j]] = D[r] + 2 for the entries j of row r (indptr HP, indices Q = H).
    let d = input.read::<f32>("D").unwrap();
    let mut f = input.read::<f32>("F").unwrap();
    for (r, &len) in [2usize, 0, 3, 1].iter().enumerate() {
        for p in 0..len {
            for c in 0..4 {
                f[(r * 4 + p) * 4 + c] = d[r * 4 + c] + 1.0;
            }
        }
    }
    let mut e = input.read::<f32>("E").unwrap();
    for (r, js) in [(0usize, 0..1usize), (1, 1..4)] {
        for j in js {
            let q = [2usize, 0, 3, 1][j];
            for c in 0..4 {
                e[q * 4 + c] = d[r * 4 + c] + 2.0;
            }
        }
    }
    assert_eq!(want.read::<f32>("F").unwrap(), f);
    assert_eq!(want.read::<f32>("E").unwrap(), e);
    for host_expander in [false, true] {
        for (device_gen, threads) in [(false, 1), (false, 3), (true, 1), (true, 2), (true, 4)] {
            if host_expander && device_gen {
                continue;
            }
            let what = format!(
                "host_expander {host_expander}, device_gen {device_gen}, {threads} threads"
            );
            let mut p = compile(
                lower(&m).unwrap(),
                CompileOptions {
                    threads,
                    debug_checks: true,
                    device_gen,
                    host_expander,
                    ..CompileOptions::default()
                },
            )
            .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(p.host_bytecode(), !host_expander && !device_gen, "{what}");
            *p.tensors(&b).unwrap() = Some(input.clone());
            let stats = p.execute(&b).unwrap_or_else(|e| panic!("{what}: {e}"));
            let got = p.tensors(&b).unwrap().as_ref().unwrap().clone();
            assert_eq!(stats.tasks - stats.barriers, 13, "{what}");
            assert_eq!(stats.generation.computed_reads, 3, "{what}");
            for t in ["E", "F"] {
                assert_eq!(
                    got.read::<f32>(t).unwrap(),
                    want.read::<f32>(t).unwrap(),
                    "{what}: {t}"
                );
            }
        }
    }
}

// ----- property: every path equals the sequential reference run -----------------------------

mod property {
    use super::*;
    use proptest::prelude::*;

    /// One statement of a random workload over `H` (host-bound), `A` (computed: tasks copy
    /// host values into it), `D` / `E` (float data) and the slot `s` (never negative).
    #[derive(Clone, Debug)]
    enum Op {
        /// `A[(s + j) % 8] = H[(s + i) % 8]`.
        Copy(u8, u8),
        /// `load s = A[(s + i) % 8]` (computed) or `H[..]` (host).
        Load(bool, u8),
        /// `if s > k { E[(s + r) % 8] = D[s % 8] + 1 }`.
        If(u8, u8),
        /// `while s < k max m { copy; load from A; set s = s + 1; }`.
        While(u8, u8),
        /// A ragged loop whose row lengths are `A[0..8]` (computed).
        Ragged,
        /// A sparse loop over 2 rows whose indptr `P` (from the host's valid `HP`) and indices
        /// `Q` (copied from `A[0..4]` just before) are computed.
        Sparse,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u8..8, 0u8..8).prop_map(|(i, j)| Op::Copy(i, j)),
            (any::<bool>(), 0u8..8).prop_map(|(c, i)| Op::Load(c, i)),
            (0u8..8, 0u8..8).prop_map(|(k, r)| Op::If(k, r)),
            (0u8..10, 0u8..4).prop_map(|(k, m)| Op::While(k, m)),
            Just(Op::Ragged),
            Just(Op::Sparse),
        ]
    }

    /// Schedule lines that change when tasks start and complete: a computed read must not wait
    /// forever on a task the start gate holds or a completion a worker batches.
    /// `(task_graph item, schedule item)`.
    const KNOBS: &[(&str, &str)] = &[
        ("", ""),
        ("start after_orchestration;", ""),
        ("start threshold(5);", ""),
        ("", "batch_deps 4;"),
        ("", "task_window 3 stall;"),
        ("ready fifo;", "pipeline_depth 2 global;"),
    ];

    fn text(ops: &[Op], deps: &str, knob: (&str, &str)) -> String {
        let (graph, top) = knob;
        // A task writes `A`, so every read of `A` is a computed read.
        let mut body = String::from("task copy(H[7], A[7]);\ntask copy(HP[0 +: 3], P[0 +: 3]);\n");
        for o in ops {
            body.push_str(&match o {
                Op::Copy(i, j) => format!("task copy(H[(s + {i}) % 8], A[(s + {j}) % 8]);\n"),
                Op::Load(true, i) => format!("load s = A[(s + {i}) % 8];\n"),
                Op::Load(false, i) => format!("load s = H[(s + {i}) % 8];\n"),
                Op::If(k, r) => format!(
                    "if s > {k} {{ task add_scalar(D[s % 8, 0 +: 4], E[(s + {r}) % 8, 0 +: 4], 1.0); }}\n"
                ),
                Op::While(k, m) => format!(
                    "while s < {k} max {m} {{ task copy(H[(s + 1) % 8], A[s % 8]); load s = A[s % 8]; set s = s + 1; }}\n"
                ),
                Op::Ragged => "parallel_for r, p in R { task add_scalar(D[r, 0 +: 4], E[(r + p) % 8, 0 +: 4], 2.0); }\n".into(),
                Op::Sparse => "task copy(A[0 +: 4], Q[0 +: 4]);\n\
                               select r, e in S { task add_scalar(D[r, 0 +: 4], E[e, 0 +: 4], 3.0); }\n".into(),
            });
        }
        format!(
            "slot s: i64;\ntensor H: i64[8];\ntensor A: i64[8];\ntensor D: f32[8, 4];\n\
             tensor E: f32[8, 4];\ntensor HP: i64[3];\ntensor P: i64[3];\ntensor Q: i64[4];\n\
             axis R = ragged(4, A);\naxis S = sparse(2, P, Q);\n\
             kernel copy(in x: i64[?], out y: i64[?]);\n\
             kernel add_scalar(in x: f32[?], out y: f32[?], value: f64);\n\
             workload main() {{\n{body}}}\n\
             schedule for main {{ executors 2; task_graph {{ deps {deps}; {graph} }} {top} }}\n"
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(pto_wsp::ir::soak::cases(1000)))]

        #[test]
        fn host_and_device_generation_runs_equal_the_sequential_reference(
            ops in prop::collection::vec(op(), 1..8),
            host in prop::collection::vec(0i64..8, 8),
            initial in prop::collection::vec(0i64..8, 8),
            overlap in any::<bool>(),
            threads in 1usize..3,
            knob in 0..KNOBS.len(),
            dthreads in 1usize..5,
            bounds in (0i64..5, 0i64..5),
            host_expander in any::<bool>(),
        ) {
            let src = text(&ops, if overlap { "overlap" } else { "hybrid" }, KNOBS[knob]);
            let m = parse(&src).unwrap();
            pto_wsp::ir::validate(&m).unwrap_or_else(|e| panic!("{e:?}\n{src}"));
            // A valid indptr for the sparse axis: 0 <= a <= b <= 4 (the indices' length).
            let hp = vec![0, bounds.0.min(bounds.1), bounds.0.max(bounds.1)];
            let b = Bindings::new().array("H", host.clone()).array("HP", hp.clone());
            let mut input = TensorStore::new(&m, &b).unwrap();
            input.fill_random(7);
            input.write("A", &initial).unwrap();
            let seq = reference_run_bound(&m, &b, &input);
            let want = &seq.store;
            let mut p = compile(
                lower(&m).unwrap(),
                CompileOptions { threads, debug_checks: true, host_expander, ..CompileOptions::default() },
            )
            .unwrap();
            // The host generator is the bytecode interpreter unless asked for the expander.
            prop_assert_eq!(p.host_bytecode(), !host_expander);
            *p.tensors(&b).unwrap() = Some(input);
            let stats = p.execute(&b).unwrap_or_else(|e| panic!("{e}\n{src}"));
            let got = p.tensors(&b).unwrap().as_ref().unwrap().clone();
            prop_assert_eq!(stats.tasks - stats.barriers, seq.tasks, "{}", src);
            prop_assert_eq!(stats.generation.computed_reads, seq.generation.computed_reads);
            prop_assert_eq!(stats.generation.loops_at_max, seq.generation.loops_at_max);
            for t in ["A", "H"] {
                prop_assert_eq!(got.read::<i64>(t).unwrap(), want.read::<i64>(t).unwrap(), "{}\n{}", t, src);
            }
            for t in ["D", "E"] {
                prop_assert_eq!(got.read::<f32>(t).unwrap(), want.read::<f32>(t).unwrap(), "{}\n{}", t, src);
            }
            device_generation_equals_the_sequential_reference(
                &ops, overlap, knob, dthreads, &host, &hp, &initial,
            )?;
        }
    }

    /// The device-generation side of the property: the same workload (ragged and sparse loops
    /// over computed arrays included) under the schedule knobs device generation honours (the
    /// others are refused), run by the bytecode on `threads` executors, equals its own
    /// sequential reference run.
    #[allow(clippy::too_many_arguments)]
    fn device_generation_equals_the_sequential_reference(
        ops: &[Op],
        overlap: bool,
        knob: usize,
        threads: usize,
        host: &[i64],
        hp: &[i64],
        initial: &[i64],
    ) -> Result<(), TestCaseError> {
        // `task_window 3 stall` is each executor's share (one task on 2 or more executors).
        let knob = if KNOBS[knob].1.starts_with("task_window") {
            KNOBS[knob]
        } else {
            KNOBS[0]
        };
        let src = text(ops, if overlap { "overlap" } else { "hybrid" }, knob);
        let m = parse(&src).unwrap();
        let b = Bindings::new()
            .array("H", host.to_vec())
            .array("HP", hp.to_vec());
        let mut input = TensorStore::new(&m, &b).unwrap();
        input.fill_random(7);
        input.write("A", initial).unwrap();
        let seq = reference_run_bound(&m, &b, &input);
        let want = &seq.store;
        let mut p = compile(
            lower(&m).unwrap(),
            CompileOptions {
                threads,
                debug_checks: true,
                device_gen: true,
                ..CompileOptions::default()
            },
        )
        .unwrap_or_else(|e| panic!("{e}\n{src}"));
        *p.tensors(&b).unwrap() = Some(input);
        let stats = p.execute(&b).unwrap_or_else(|e| panic!("{e}\n{src}"));
        let got = p.tensors(&b).unwrap().as_ref().unwrap().clone();
        prop_assert_eq!(stats.tasks - stats.barriers, seq.tasks, "{}", src);
        prop_assert_eq!(
            stats.generation.computed_reads,
            seq.generation.computed_reads
        );
        prop_assert_eq!(stats.generation.loops_at_max, seq.generation.loops_at_max);
        for t in ["A", "H"] {
            prop_assert_eq!(
                got.read::<i64>(t).unwrap(),
                want.read::<i64>(t).unwrap(),
                "{}\n{}",
                t,
                src
            );
        }
        for t in ["D", "E"] {
            prop_assert_eq!(
                got.read::<f32>(t).unwrap(),
                want.read::<f32>(t).unwrap(),
                "{}\n{}",
                t,
                src
            );
        }
        Ok(())
    }
}

/// A two-process pipeline whose consumer decides what to generate from what its producer
/// computed: the producer computes, per token, a count (the column of the largest of 4 values,
/// `topk`) into the token's slot `t % nbuf` of `K` and sends the token; the consumer `load`s the
/// count and generates that many chunks. `nbuf` 8 (a slot per token) and 3 (a ring reused every
/// 3 tokens through a channel of depth 1: `3 >= 1 + 2`, the buffer rule) give the same result,
/// equal to the sequential reference run and to a plain loop here, run with 1 and 2 threads.
#[test]
fn a_pipeline_consumer_generates_from_counts_its_producer_computed() {
    let text = "slot n: i64;\nsymbol nbuf: i64;\n\
                tensor X: f32[8, 4];\ntensor K: i32[nbuf, 1];\n\
                tensor D: f32[8, 4];\ntensor E: f32[32, 4];\n\
                axis T = dense(8);\naxis Q = dense_dyn(n);\n\
                kernel topk(in x: f32[?, ?], out idx: i32[?, ?]);\n\
                kernel add_scalar(in x: f32[?], out y: f32[?], value: f64);\n\
                pipeline p {\n    channel c[1];\n\
                process producer(produces c) {\n        for_each t in T {\n            \
                task topk(X[t, 0 +: 4], K[t % nbuf, 0 +: 1]);\n            send c(t);\n        }\n    }\n\
                process consumer(consumes c) {\n        consume c as t {\n            \
                load n = K[t % nbuf, 0];\n            \
                for_each q in Q { task add_scalar(D[t, 0 +: 4], E[t * 4 + q, 0 +: 4], 1.0); }\n        }\n    }\n}\n";
    let m = parse(text).unwrap();
    for nbuf in [8i64, 3] {
        let b = Bindings::new().symbol("nbuf", nbuf);
        let mut input = TensorStore::new(&m, &b).unwrap();
        input.fill_random(11 + nbuf as u64);
        // Independent reference: count(t) = the column of X[t]'s largest element (first on a
        // tie); E[4 t + q] = D[t] + 1 for q < the count the consumer reads, the rest untouched.
        let x = input.read::<f32>("X").unwrap();
        let d = input.read::<f32>("D").unwrap();
        let count: Vec<usize> = (0..8)
            .map(|t| {
                let row = &x[t * 4..t * 4 + 4];
                (0..4).fold(0, |best, c| if row[c] > row[best] { c } else { best })
            })
            .collect();
        let expect = |read: &dyn Fn(usize) -> usize| {
            let mut e = input.read::<f32>("E").unwrap();
            for t in 0..8 {
                for q in 0..read(t) {
                    for c in 0..4 {
                        e[(t * 4 + q) * 4 + c] = d[t * 4 + c] + 1.0;
                    }
                }
            }
            e
        };
        // What the CSP run reads: the channel orders token t's count before its read, and the
        // ring is never overwritten before it is read.
        let e = expect(&|t| count[t]);
        let chunks: usize = count.iter().sum();
        // A seed whose counts are all equal would not show that the counts steer generation.
        assert!(
            count.iter().any(|&c| c != count[0]),
            "counts of seed {nbuf}: {count:?}"
        );
        let seq = reference_run_bound(&m, &b, &input);
        assert_eq!(seq.generation.computed_reads, 8);
        if nbuf == 8 {
            // A slot per token: the sequential reference run reads the same counts.
            assert_eq!(seq.tasks as usize, 8 + chunks);
            assert_eq!(seq.store.read::<f32>("E").unwrap(), e);
        } else {
            // The reference's Kahn order runs the producer to its end before the consumer (its
            // channels are unbounded), so each slot holds the count of the last token that used
            // it when the consumer reads: the reference gives the value at that point of its
            // order, which differs from the CSP run's once a buffer is overwritten before it is
            // read (`docs/SEMANTICS.md`, "Computed reads").
            let last = |t: usize| count[(0..8).rev().find(|u| u % 3 == t % 3).unwrap()];
            assert_eq!(seq.store.read::<f32>("E").unwrap(), expect(&last));
            assert_ne!(expect(&last), e, "the seed must show the difference");
        }
        for threads in [1, 2] {
            let (stats, got) = run_from(
                &m,
                &b,
                &input,
                CompileOptions {
                    threads,
                    ..CompileOptions::default()
                },
                &format!("nbuf {nbuf}, {threads} threads"),
            );
            assert_eq!(
                stats.tasks as usize,
                8 + chunks,
                "nbuf {nbuf}, {threads} threads"
            );
            assert_eq!(stats.per_worker, vec![8, chunks as u64]);
            assert_eq!(stats.generation.computed_reads, 8);
            assert_eq!(
                got.read::<f32>("E").unwrap(),
                e,
                "nbuf {nbuf}, {threads} threads"
            );
            let k: Vec<i32> = (0..nbuf as usize)
                .map(|s| count[(0..8).rev().find(|t| t % nbuf as usize == s).unwrap()] as i32)
                .collect();
            assert_eq!(got.read::<i32>("K").unwrap(), k);
        }
    }
}

/// A pipeline consumer that stops generating on a flag its producer computed: per token the
/// producer ranks the 4 values of `X[t]` (`topk` with k = 4, largest first) into `F[t]`; the
/// consumer walks the ranking in a `while` loop, reading each entry, and `break if`s at column
/// 0, so token `t` gets one chunk per value larger than `X[t, 0]`. Checked against a plain loop
/// and the sequential reference run.
#[test]
fn a_pipeline_consumer_stops_on_a_flag_its_producer_computed() {
    let text = "slot q: i64;\nslot s: i64;\n\
                tensor X: f32[8, 4];\ntensor F: i32[8, 4];\n\
                tensor D: f32[8, 4];\ntensor E: f32[32, 4];\n\
                axis T = dense(8);\n\
                kernel topk(in x: f32[?, ?], out idx: i32[?, ?]);\n\
                kernel add_scalar(in x: f32[?], out y: f32[?], value: f64);\n\
                pipeline p {\n    channel c[2];\n\
                process producer(produces c) {\n        for_each t in T {\n            \
                task topk(X[t, 0 +: 4], F[t, 0 +: 4]);\n            send c(t);\n        }\n    }\n\
                process consumer(consumes c) {\n        consume c as t {\n            \
                set q = 0;\n            while q < 4 max 4 {\n                \
                load s = F[t, q];\n                break if s == 0;\n                \
                task add_scalar(D[t, 0 +: 4], E[t * 4 + q, 0 +: 4], 1.0);\n                \
                set q = q + 1;\n            }\n        }\n    }\n}\n";
    let m = parse(text).unwrap();
    let b = Bindings::new();
    let mut input = TensorStore::new(&m, &b).unwrap();
    input.fill_random(23);
    // Independent reference: token t gets a chunk per value of X[t] larger than X[t, 0].
    let x = input.read::<f32>("X").unwrap();
    let d = input.read::<f32>("D").unwrap();
    let mut e = input.read::<f32>("E").unwrap();
    let mut chunks = Vec::new();
    for t in 0..8 {
        let n = (1..4).filter(|&c| x[t * 4 + c] > x[t * 4]).count();
        chunks.push(n);
        for q in 0..n {
            for c in 0..4 {
                e[(t * 4 + q) * 4 + c] = d[t * 4 + c] + 1.0;
            }
        }
    }
    assert!(chunks.iter().any(|&n| n != chunks[0]), "{chunks:?}");
    let total: usize = chunks.iter().sum();
    // One read per chunk, and one more for the entry that stops the loop.
    let reads = (total + 8) as u64;
    let seq = reference_run(&m, &input);
    assert_eq!(seq.tasks as usize, 8 + total);
    assert_eq!(seq.generation.computed_reads, reads);
    assert_eq!(seq.store.read::<f32>("E").unwrap(), e);
    for threads in [1, 2] {
        let (stats, got) = run_from(
            &m,
            &b,
            &input,
            CompileOptions {
                threads,
                ..CompileOptions::default()
            },
            &format!("{threads} threads"),
        );
        assert_eq!(stats.per_worker, vec![8, total as u64], "{threads} threads");
        assert_eq!(stats.generation.computed_reads, reads);
        assert_eq!(got.read::<f32>("E").unwrap(), e, "{threads} threads");
        assert_eq!(
            got.read::<i32>("F").unwrap(),
            seq.store.read::<i32>("F").unwrap()
        );
    }
}

/// A CSP process reads what its own tasks computed (a `load` feeding a `dense_dyn` extent, a
/// ragged axis over computed lengths): the tokens it sends and the tasks it runs follow the
/// computed values, equal to the sequential reference run and to a plain-loop reference.
#[test]
fn a_pipeline_process_reads_what_its_own_tasks_computed() {
    let text = "slot n: i64;\ntensor H: i64[4];\ntensor A: i64[4];\n\
                tensor D: f32[8, 4];\ntensor E: f32[8, 4];\ntensor F: f32[16, 4];\n\
                axis I = dense_dyn(n);\naxis R = ragged(4, A);\n\
                kernel copy(in x: i64[?], out y: i64[?]);\n\
                kernel add_scalar(in x: f32[?], out y: f32[?], value: f64);\n\
                pipeline p {\n    channel c[2];\n\
                process a(produces c) {\n        task copy(H[0 +: 4], A[0 +: 4]);\n\
                \x20       load n = A[0];\n        parallel_for i in I { send c(i); }\n\
                \x20       parallel_for r, q in R { task add_scalar(D[r, 0 +: 4], F[r * 4 + q, 0 +: 4], 2.0); }\n    }\n\
                process b(consumes c) {\n        consume c as i { task add_scalar(D[i, 0 +: 4], E[i, 0 +: 4], 1.0); }\n    }\n}\n";
    let m = parse(text).unwrap();
    let h = [3usize, 1, 0, 2];
    let b = Bindings::new().array("H", h.iter().map(|&x| x as i64).collect::<Vec<i64>>());
    let mut input = TensorStore::new(&m, &b).unwrap();
    input.fill_random(5);
    input.write("A", &[0i64; 4]).unwrap();
    // Independent reference: E[i] = D[i] + 1 for i < H[0]; F[4 r + q] = D[r] + 2 for q < H[r].
    let d = input.read::<f32>("D").unwrap();
    let mut e = input.read::<f32>("E").unwrap();
    let mut f = input.read::<f32>("F").unwrap();
    for i in 0..h[0] {
        for c in 0..4 {
            e[i * 4 + c] = d[i * 4 + c] + 1.0;
        }
    }
    for (r, &len) in h.iter().enumerate() {
        for q in 0..len {
            for c in 0..4 {
                f[(r * 4 + q) * 4 + c] = d[r * 4 + c] + 2.0;
            }
        }
    }
    let seq = reference_run(&m, &input);
    assert_eq!(seq.tasks, 1 + 3 + 6);
    assert_eq!(seq.store.read::<f32>("E").unwrap(), e);
    assert_eq!(seq.store.read::<f32>("F").unwrap(), f);
    let (stats, got) = run_from(&m, &b, &input, CompileOptions::default(), "pipeline");
    assert_eq!(stats.tasks, 10);
    assert_eq!(
        stats.generation.computed_reads,
        seq.generation.computed_reads
    );
    assert_eq!(stats.generation.computed_reads, 2);
    assert_eq!(got.read::<f32>("E").unwrap(), e);
    assert_eq!(got.read::<f32>("F").unwrap(), f);
}

/// A run-time error of a computed read — an index out of range, a negative row length of a
/// ragged axis over computed lengths — names the read's `file:line:column` in every path: device
/// generation (the bytecode's side table of read locations), host runs generating with the
/// bytecode, and host runs generating with the expander.
#[test]
fn computed_read_errors_name_the_reads_line_and_column_in_every_path() {
    let cases = [
        (
            // `A[0]` is 9 once the copy ran: the second read is out of range.
            "slot s: i64;\ntensor H: i64[4];\ntensor A: i64[4];\n\
             kernel copy(in x: i64[?], out y: i64[?]);\n\
             workload main() {\n    task copy(H[0 +: 4], A[0 +: 4]);\n    load s = A[0];\n    \
             load s = A[s];\n}\n",
            "index 9 is out of bounds",
            "m.wsp:8:5",
        ),
        (
            // The row lengths a task wrote: `A[1]` is -1.
            "tensor H: i64[4];\ntensor A: i64[4];\ntensor D: f32[4, 4];\ntensor E: f32[4, 4];\n\
             axis R = ragged(4, A);\nkernel copy(in x: i64[?], out y: i64[?]);\n\
             kernel add_scalar(in x: f32[?], out y: f32[?], value: f64);\n\
             workload main() {\n    task copy(H[0 +: 4], A[0 +: 4]);\n    \
             parallel_for r, p in R { task add_scalar(D[r, 0 +: 4], E[r, 0 +: 4], 1.0); }\n}\n",
            "is negative (-1)",
            "m.wsp:10:5",
        ),
    ];
    for (text, what, place) in cases {
        let m = parse(text).unwrap();
        let b = Bindings::new().array("H", vec![9, -1, 0, 0]);
        let source = pto_wsp::ir::SourceFile::new("m.wsp", text);
        for (device_gen, host_expander) in [(true, false), (false, false), (false, true)] {
            let mut p = compile(
                lower(&m).unwrap(),
                CompileOptions {
                    threads: 2,
                    device_gen,
                    host_expander,
                    ..CompileOptions::default()
                },
            )
            .unwrap();
            let err = p.execute(&b).expect_err("the read fails");
            let rendered = source.render(&err);
            assert!(
                rendered.contains(what) && rendered.contains(place),
                "device_gen {device_gen}, host_expander {host_expander}:\n{rendered}"
            );
        }
    }
}
