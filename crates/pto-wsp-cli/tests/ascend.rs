//! The Ascend back end: every example of `examples/ascend` emitted, built and run on simpler's
//! `a2a3sim` and on our CPU simulation from the same inputs, each side compared with an
//! independent `f64` reference written here; the runtime's recorded dependency graph checked
//! against the edges our builder infers (none missing, by reachability); and refusals of what
//! the back end cannot express, before anything is written.
//!
//! The simulator tests need the checkouts and venv of `scripts/prepare-simpler.sh`; without
//! them each prints one `skipped: …` line and passes. Simulator runs never overlap (a process
//! lock here, a nextest test group in `.config/nextest.toml`): the simulator starts ~30 threads
//! and two at once on a small machine can starve each other.

mod common;

use pto_wsp::emitters::ascend::AscendTree;
use pto_wsp_cli::cmd::run::RunOptions;
use pto_wsp_cli::cmd::run::ascend::{AscendOutcome, Toolchain, run_ascend};
use std::sync::Mutex;

/// The Ascend tree of `loaded` for `target`, its kernels naming built-ins given the kernel
/// library's bodies, as `pto-wsp emit ascend` does.
fn emit_ascend(
    loaded: &pto_wsp_cli::Loaded,
    bindings: &pto_wsp::ir::Bindings,
    target: &str,
) -> Result<AscendTree, pto_wsp_cli::CliError> {
    let (loaded, plan) = pto_wsp_cli::cmd::emit::with_library(loaded)?;
    pto_wsp_cli::cmd::emit::ascend(&loaded, &plan, bindings, target)
}

static SIM: Mutex<()> = Mutex::new(());

fn example(name: &str) -> (String, String) {
    let path = format!("examples/ascend/{name}.wsp");
    let text = std::fs::read_to_string(common::root().join(&path)).unwrap();
    (path, text)
}

/// Runs one example on both back ends, or says why not (and the test passes).
fn run_example(name: &str) -> Option<AscendOutcome> {
    if let Err(why) = Toolchain::find() {
        common::toolchain_skipped(common::Needs::Simpler, &why);
        return None;
    }
    common::toolchain_ran(common::Needs::Simpler);
    let _one_at_a_time = SIM.lock().unwrap_or_else(|e| e.into_inner());
    let (path, text) = example(name);
    let opts = RunOptions {
        progress: false,
        threads: 2,
        ..RunOptions::default()
    };
    let out = run_ascend(&path, &text, "ascend_a2a3sim", &opts).unwrap_or_else(|e| panic!("{e}"));
    println!("{}", out.report);
    Some(out)
}

fn get<'a>(v: &'a [(String, Vec<f64>)], name: &str) -> &'a [f64] {
    &v.iter().find(|(n, _)| n == name).unwrap().1
}

fn max_err(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

/// Compares both sides' `tensor` with `reference` within `tol` (absolute, scaled by the
/// reference's magnitude), prints the table row, and checks the task counts agree.
fn check(out: &AscendOutcome, example: &str, tensor: &str, reference: &[f64], tol: f64) {
    let scale = reference.iter().fold(1.0f64, |m, x| m.max(x.abs()));
    let cpu = max_err(get(&out.cpu_outputs, tensor), reference);
    let sim = max_err(get(&out.sim_outputs, tensor), reference);
    println!(
        "| {example} | {tensor} | cpu_sim {cpu:.3e} | a2a3sim {sim:.3e} | tasks cpu_sim {} + {} barrier, a2a3sim {} + {} barrier |",
        out.cpu.stats.tasks - out.cpu.stats.barriers,
        out.cpu.stats.barriers,
        out.sim_tasks.0,
        out.sim_tasks.1
    );
    assert!(
        cpu <= tol * scale,
        "{example}: cpu_sim {tensor} max error {cpu}"
    );
    assert!(
        sim <= tol * scale,
        "{example}: a2a3sim {tensor} max error {sim}"
    );
    // The runtime runs a task of a kernel using both cores as its parts.
    assert_eq!(
        (
            out.cpu.stats.tasks - out.cpu.stats.barriers,
            out.cpu.stats.barriers
        ),
        (out.tree.kernel_tasks as u64, out.tree.barrier_tasks as u64),
        "{example}: task counts differ"
    );
    assert_eq!(
        (out.tree.part_tasks as u64, out.tree.barrier_tasks as u64),
        out.sim_tasks,
        "{example}: the runtime's task counts differ"
    );
    assert!(out.passed, "{example}: the two back ends disagree");
}

/// The kernel-task pairs a graph orders directly or through barriers: `(pred, succ)` by their
/// ordinal among kernel tasks (both sides submit kernel tasks in program order; barriers may
/// sit at different places).
fn kernel_pairs(edges: &[(u32, u32)], barrier: &[bool]) -> Vec<(usize, usize)> {
    let n = barrier.len();
    let mut ordinal = vec![usize::MAX; n];
    let mut k = 0;
    for (i, b) in barrier.iter().enumerate() {
        if !b {
            ordinal[i] = k;
            k += 1;
        }
    }
    let (mut preds, mut succs) = (vec![Vec::new(); n], vec![Vec::new(); n]);
    for &(p, s) in edges {
        preds[s as usize].push(p as usize);
        succs[p as usize].push(s as usize);
    }
    // The kernel tasks reached from `x` through barriers only, following `next`.
    let through = |x: usize, next: &Vec<Vec<usize>>| {
        let mut out = Vec::new();
        let mut stack = vec![x];
        let mut seen = vec![false; n];
        while let Some(y) = stack.pop() {
            if !barrier[y] {
                out.push(y);
                continue;
            }
            for &z in &next[y] {
                if !seen[z] {
                    seen[z] = true;
                    stack.push(z);
                }
            }
        }
        out
    };
    let mut pairs = Vec::new();
    for &(p, s) in edges {
        for a in through(p as usize, &preds) {
            for b in through(s as usize, &succs) {
                pairs.push((ordinal[a], ordinal[b]));
            }
        }
    }
    pairs.sort_unstable();
    pairs.dedup();
    pairs
}

/// Every ordering our builder infers between kernel tasks is implied by the runtime's recorded
/// graph: some part of the earlier task reaches some part of the later one (reachability over
/// the runtime's edges; a kernel using both cores runs as several parts, the later ones marked
/// in `sim_later_parts`).
fn no_edge_missing(out: &AscendOutcome, example: &str) {
    let ours = kernel_pairs(&out.tree.edges, &out.tree.barriers);
    let theirs = kernel_pairs(&out.sim_edges, &out.sim_barriers);
    // Runtime kernel tasks (parts) by ordinal, and the workload task each belongs to.
    let mut group = Vec::new();
    for (i, b) in out.sim_barriers.iter().enumerate() {
        if !b {
            let later = out.sim_later_parts.get(i).copied().unwrap_or(false);
            let g = if later {
                *group.last().expect("a later part follows its first")
            } else {
                group.last().map_or(0, |g| g + 1)
            };
            group.push(g);
        }
    }
    let parts = group.len();
    let tasks = group.last().map_or(0, |g| g + 1);
    assert_eq!(
        tasks,
        out.tree.barriers.iter().filter(|b| !**b).count(),
        "{example}: kernel task counts differ"
    );
    assert_eq!(parts, out.tree.part_tasks, "{example}: part counts differ");
    let mut members = vec![Vec::new(); tasks];
    for (p, g) in group.iter().enumerate() {
        members[*g].push(p);
    }
    let mut succ = vec![Vec::new(); parts];
    for &(p, s) in &theirs {
        succ[p].push(s);
    }
    let mut missing = Vec::new();
    for &(p, s) in &ours {
        let mut seen = vec![false; parts];
        let mut stack = members[p].clone();
        let mut found = false;
        while let Some(x) = stack.pop() {
            if group[x] == s {
                found = true;
                break;
            }
            for &y in &succ[x] {
                if !seen[y] {
                    seen[y] = true;
                    stack.push(y);
                }
            }
        }
        if !found {
            missing.push((p, s));
        }
    }
    println!(
        "{example}: our orderings {} ({} edges), runtime orderings {} ({} edges, {} declared explicitly), missing {}",
        ours.len(),
        out.tree.edges.len(),
        theirs.len(),
        out.sim_edges.len(),
        out.sim_explicit_edges,
        missing.len()
    );
    assert!(
        missing.is_empty(),
        "{example}: orderings missing in the runtime: {missing:?}"
    );
}

#[test]
fn ascend_sim_vector_example_matches_its_reference() {
    let Some(out) = run_example("vector_example") else {
        return;
    };
    let (a, b) = (get(&out.inputs, "a"), get(&out.inputs, "b"));
    let c: Vec<f64> = a.iter().zip(b).map(|(x, y)| x + y).collect();
    let f: Vec<f64> = c.iter().map(|c| (c + 1.0) * (c + 2.0) + c).collect();
    check(&out, "vector_example", "c", &c, 1e-6);
    check(&out, "vector_example", "f", &f, 1e-6);
    no_edge_missing(&out, "vector_example");
}

#[test]
fn ascend_sim_gemm_f16_in_f32_acc_matches_its_reference() {
    let Some(out) = run_example("gemm") else {
        return;
    };
    let (a, b) = (get(&out.inputs, "A"), get(&out.inputs, "B"));
    let c: Vec<f64> = (0..64 * 64)
        .map(|i| {
            (0..64)
                .map(|k| a[i / 64 * 64 + k] * b[k * 64 + i % 64])
                .sum()
        })
        .collect();
    check(&out, "gemm", "C", &c, 1e-5);
    no_edge_missing(&out, "gemm");
}

#[test]
fn ascend_sim_rmsnorm_with_in_place_update_matches_its_reference() {
    let Some(out) = run_example("rmsnorm") else {
        return;
    };
    let (x, w) = (get(&out.inputs, "X"), get(&out.inputs, "W"));
    let mut y = vec![0.0; 32 * 64];
    for r in 0..32 {
        let row = &x[r * 64..r * 64 + 64];
        let ms = row.iter().map(|v| v * v).sum::<f64>() / 64.0;
        let inv = 1.0 / (ms + 1e-6).sqrt();
        for c in 0..64 {
            y[r * 64 + c] = row[c] * inv * w[c];
        }
    }
    let half: Vec<f64> = x.iter().map(|v| v * 0.5).collect();
    check(&out, "rmsnorm", "Y", &y, 1e-5);
    check(&out, "rmsnorm", "X", &half, 1e-6);
    // The update writes what the norm read: write-after-read edges, declared explicitly.
    assert!(out.sim_explicit_edges > 0);
    no_edge_missing(&out, "rmsnorm");
}

#[test]
fn ascend_sim_softmax_3pass_in_place_matches_its_reference() {
    let Some(out) = run_example("softmax_3pass") else {
        return;
    };
    let x = get(&out.inputs, "X");
    let (mut y, mut m, mut l) = (vec![0.0; 32 * 256], vec![0.0; 32], vec![0.0; 32]);
    for r in 0..32 {
        let row = &x[r * 256..r * 256 + 256];
        m[r] = row.iter().copied().fold(f64::MIN, f64::max);
        l[r] = row.iter().map(|v| (v - m[r]).exp()).sum();
        for c in 0..256 {
            y[r * 256 + c] = (row[c] - m[r]).exp() / l[r];
        }
    }
    check(&out, "softmax_3pass", "X", &y, 1e-5);
    check(&out, "softmax_3pass", "M", &m, 1e-6);
    check(&out, "softmax_3pass", "L", &l, 1e-5);
    assert!(out.sim_explicit_edges > 0);
    no_edge_missing(&out, "softmax_3pass");
}

#[test]
fn ascend_sim_varlen_split_kv_decode_attention_matches_its_reference() {
    let Some(out) = run_example("decode_attention") else {
        return;
    };
    let f32s = |n: &str| -> Vec<f32> { get(&out.inputs, n).iter().map(|&v| v as f32).collect() };
    let (q, k, v) = (f32s("Q"), f32s("K"), f32s("V"));
    let mut reference = Vec::new();
    for (r, keys) in [(0usize, 200usize), (1, 96)] {
        reference.extend(common::attention_reference(
            &q[r * 64..r * 64 + 64],
            &k[r * 256 * 64..],
            &v[r * 256 * 64..],
            keys,
            64,
            0.125,
        ));
    }
    check(&out, "decode_attention", "OUT", &reference, 1e-5);
    // The merges follow every chunk through one barrier (the `sequential`).
    assert_eq!(out.sim_tasks.1, 1);
    no_edge_missing(&out, "decode_attention");
}

/// The main job (`pto-wsp run --target ascend_a2a3sim`) at small bindings (2 requests of 300 and
/// 5 tokens, one KV head, FFN 256, 2 chunks: a few dozen tasks, the simulator's run about a
/// minute): its RoPE by cos / sin tables, KV-cache append, split-KV attention and MLP on
/// a2a3sim, the output checked against the job's own `f64` reference and every written tensor
/// against cpu_sim.
#[test]
fn ascend_sim_main_job_at_small_bindings_matches_its_f64_reference() {
    if let Err(why) = Toolchain::find() {
        common::toolchain_skipped(common::Needs::Simpler, &why);
        return;
    }
    common::toolchain_ran(common::Needs::Simpler);
    let _one_at_a_time = SIM.lock().unwrap_or_else(|e| e.into_inner());
    let opts = RunOptions {
        progress: false,
        threads: 2,
        binds: [
            "nreq=2",
            "kv_heads=1",
            "ffn=256",
            "max_chunks=2",
            "kv_lens=[300, 5]",
        ]
        .map(String::from)
        .to_vec(),
        ..RunOptions::default()
    };
    let out = pto_wsp_cli::cmd::run::ascend::run_main_job_ascend("ascend_a2a3sim", &opts)
        .unwrap_or_else(|e| panic!("{e}"));
    println!("{}", out.report);
    let reference = out
        .reference
        .as_ref()
        .expect("the main job's reference check");
    assert_eq!(reference.elements, 2 * 512);
    assert!(reference.passed, "{}", out.report);
    assert!(out.passed, "{}", out.report);
    // The inputs were shaped by the file: real RoPE tables, weights at their scale.
    assert!(
        out.report
            .contains("RopeCos, RopeSin as the file's `//@ fill` lines say")
    );
    // No `no_edge_missing` here: our overlap map orders a chunk's partials `Mpart[r, g*4 +: 4, c]`
    // after the other chunk's by their bounding boxes (interleaved with stride `max_chunks`),
    // which the runtime's TensorMap rightly does not; a dependency really missing would show
    // in the output against the reference.
}

#[test]
fn ascend_sim_control_flow_matches_its_reference() {
    let Some(out) = run_example("control_flow") else {
        return;
    };
    // The program, block by block (4 x 64 row blocks), in f64.
    let block = |v: &[f64], b: usize| v[b * 256..b * 256 + 256].to_vec();
    let bump = |v: &mut Vec<f64>, j: i64| {
        for x in v.iter_mut() {
            *x = if j < 2 { *x + 1.0 } else { *x * 0.5 + 2.0 };
        }
    };
    let lens = [2i64, 0, 3, 1];
    let mut x: Vec<Vec<f64>> = (0..4).map(|b| block(get(&out.inputs, "X"), b)).collect();
    let mut y: Vec<Vec<f64>> = (0..4).map(|b| block(get(&out.inputs, "Y"), b)).collect();
    let mut z: Vec<Vec<f64>> = (0..4).map(|b| block(get(&out.inputs, "Z"), b)).collect();
    for _step in 0..3 {
        for (r, &len) in lens.iter().enumerate() {
            for p in 0..len {
                bump(&mut x[r], p);
            }
        }
    }
    let (indptr, indices) = ([0usize, 2, 3, 3, 5], [1usize, 3, 0, 2, 3]);
    for r in 0..4 {
        for &c in &indices[indptr[r]..indptr[r + 1]] {
            y[r] = x[c].clone();
        }
    }
    for b in x.iter_mut() {
        bump(b, 7);
    }
    let mut i = 0i64;
    for _ in 0..8 {
        if i >= 10 {
            break;
        }
        let n = lens[(i % 4) as usize];
        let b = (i % 4) as usize;
        if n > 1 {
            bump(&mut z[b], n);
        } else {
            z[b] = y[b].clone();
        }
        i += 3;
        if i > 6 {
            break;
        }
    }
    check(&out, "control_flow", "X", &x.concat(), 1e-6);
    check(&out, "control_flow", "Y", &y.concat(), 1e-6);
    check(&out, "control_flow", "Z", &z.concat(), 1e-6);
    // The for_each steps are ordered through barriers (two or more tasks per step).
    assert_eq!(out.sim_tasks.1, 2);
    assert!(out.sim_explicit_edges > 0);
    no_edge_missing(&out, "control_flow");
}

#[test]
fn ascend_sim_break_out_of_an_ordered_loop_inside_a_while_matches_its_reference() {
    if let Err(why) = Toolchain::find() {
        common::toolchain_skipped(common::Needs::Simpler, &why);
        return;
    }
    common::toolchain_ran(common::Needs::Simpler);
    let _one_at_a_time = SIM.lock().unwrap_or_else(|e| e.into_inner());
    // `break if` inside a `for_each` inside the `while` leaves both (the orchestration's
    // ordered-construct stack must unwind with it).
    let text = "tensor X: f32[8, 64];\nslot i: i64;\naxis J = dense(2);\n\
        kernel k(inout x: f32[4, 64]) @vector {\n  tile t: vec f32[4, 64];\n  TLOAD(t, x);\n  \
        TADDS(t, t, 1.0);\n  TSTORE(x, t);\n}\n\
        workload main() {\n  set i = 0;\n  while i < 5 max 5 {\n    for_each j in J {\n      \
        task k(X[j * 4 +: 4, 0 +: 64]);\n      break if i == 2;\n    }\n    set i = i + 1;\n  }\n  \
        task k(X[0 +: 4, 0 +: 64]);\n}\n";
    let opts = RunOptions {
        progress: false,
        threads: 2,
        ..RunOptions::default()
    };
    let out =
        run_ascend("break.wsp", text, "ascend_a2a3sim", &opts).unwrap_or_else(|e| panic!("{e}"));
    println!("{}", out.report);
    // Iterations 0 and 1 bump both blocks, iteration 2 bumps block 0 and breaks, then block 0.
    let x = get(&out.inputs, "X");
    let expected: Vec<f64> = x
        .iter()
        .enumerate()
        .map(|(i, v)| v + if i < 256 { 4.0 } else { 2.0 })
        .collect();
    check(&out, "break", "X", &expected, 1e-6);
    no_edge_missing(&out, "break");
}

/// Emits `text` (named `bad.wsp`) for the simulator target; the rendered error.
fn refusal(text: &str) -> String {
    let loaded = pto_wsp_cli::load_source("bad.wsp", text).unwrap();
    let bindings = pto_wsp_cli::bindings_for(&loaded, &[]).unwrap();
    emit_ascend(&loaded, &bindings, "ascend_a2a3sim")
        .map(|_| ())
        .unwrap_err()
        .rendered
}

#[test]
fn constructs_the_ascend_back_end_cannot_express_are_refused_with_their_location() {
    // A task of a kernel without a body (a built-in): no AICore code exists for it.
    let e = refusal(
        "tensor X: f32[8, 64];\nkernel k(inout x: f32[8, 64]) @vector;\n\
         workload main() { task k(X[0 +: 8, 0 +: 64]); }\n",
    );
    assert!(
        e.contains("bad.wsp:2:8") && e.contains("kernel `k`, which has no body"),
        "{e}"
    );
    // A CSP pipeline is lowered: its tasks in a bounded order with explicit edges.
    let text = "tensor X: f32[8, 64];\nkernel k(inout x: f32[8, 64]) @vector {\n  tile t: vec f32[8, 64];\n  TLOAD(t, x);\n  TSTORE(x, t);\n}\n\
                pipeline p {\n  channel ch[2];\n  process a(produces ch) { send ch(0); send ch(1); }\n  process b(consumes ch) { consume ch as i { task k(X[0 +: 8, 0 +: 64]); } }\n}\n";
    let loaded = pto_wsp_cli::load_source("p.wsp", text).unwrap();
    let bindings = pto_wsp_cli::bindings_for(&loaded, &[]).unwrap();
    let tree = emit_ascend(&loaded, &bindings, "ascend_a2a3sim").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(tree.kernel_tasks, 2);
    let orch = &tree
        .files
        .iter()
        .find(|(n, _)| n == "orchestration.cpp")
        .unwrap()
        .1;
    assert!(orch.contains("tk.after(ids[0]);"), "{orch}");
    // A bf16 tensor (the simulator's bf16 is f16 with this compiler).
    let e = refusal(
        "tensor X: bf16[8, 64];\nkernel k(inout x: f32[8, 64]) @vector {\n  tile t: vec f32[8, 64];\n  TLOAD(t, x);\n  TSTORE(x, t);\n}\n\
         workload main() { }\n",
    );
    assert!(e.contains("bad.wsp:1:8") && e.contains("bf16"), "{e}");
    // Loops nested past the runtime's scope depth.
    let mut body = "task k(X[0 +: 8, 0 +: 64]);".to_string();
    for i in 0..61 {
        body = format!("parallel_for a{i} in J {{ {body} }}");
    }
    let e = refusal(&format!(
        "tensor X: f32[8, 64];\naxis J = dense(1);\nkernel k(inout x: f32[8, 64]) @vector {{\n  tile t: vec f32[8, 64];\n  TLOAD(t, x);\n  TSTORE(x, t);\n}}\nworkload main() {{ {body} }}\n"
    ));
    assert!(
        e.contains("bad.wsp:8:") && e.contains("nested more than 60 deep"),
        "{e}"
    );
    // Nothing is written: the command checks before writing.
    let dir = common::scratch("ascend-refusal");
    let out = dir.join("tree");
    let bad = dir.join("bad.wsp");
    std::fs::write(
        &bad,
        "tensor X: f32[8, 64];\nkernel k(inout x: f32[8, 64]) @vector;\n\
         workload main() { task k(X[0 +: 8, 0 +: 64]); }\n",
    )
    .unwrap();
    let (code, _, stderr) = common::binary(&[
        "emit",
        "ascend",
        bad.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("has no body"), "{stderr}");
    assert!(!out.exists(), "the output directory was created");
}

#[test]
fn a_kernel_using_both_cores_runs_as_parts_on_both_targets() {
    let (path, text) = example("decode_attention");
    let loaded = pto_wsp_cli::load_source(&path, &text).unwrap();
    let bindings = pto_wsp_cli::bindings_for(&loaded, &[]).unwrap();
    let device = emit_ascend(&loaded, &bindings, "ascend_a2a3").unwrap();
    let sim = emit_ascend(&loaded, &bindings, "ascend_a2a3sim").unwrap();
    // The same kernels; the trees differ only in the platform the runner defaults to.
    for ((n1, t1), (n2, t2)) in device.files.iter().zip(&sim.files) {
        assert_eq!(n1, n2);
        if n1 != "runner.py" && n1 != "README.md" {
            assert_eq!(
                t1, t2,
                "{n1} differs between the simulator and device trees"
            );
        }
    }
    let runner = |t: &pto_wsp::emitters::ascend::AscendTree| {
        t.files
            .iter()
            .find(|(n, _)| n == "runner.py")
            .unwrap()
            .1
            .clone()
    };
    assert!(runner(&device).contains("PLATFORM = \"a2a3\""));
    assert!(runner(&sim).contains("PLATFORM = \"a2a3sim\""));
    let names: Vec<(&str, &str)> = device
        .kernels
        .iter()
        .map(|k| (k.name.as_str(), k.core.runtime()))
        .collect();
    assert_eq!(
        names,
        [
            ("chunk_part0", "aiv"),
            ("chunk_part1", "aic"),
            ("chunk_part2", "aiv"),
            ("chunk_part3", "aic"),
            ("chunk_part4", "aiv"),
            ("merge_part0", "aiv"),
            ("merge_part1", "aic"),
            ("merge_part2", "aiv"),
        ]
    );
    // 8 chunk tasks of 5 parts and 2 merge tasks of 3.
    assert_eq!((device.kernel_tasks, device.part_tasks), (10, 46));
    let readme = &device
        .files
        .iter()
        .find(|(n, _)| n == "README.md")
        .unwrap()
        .1;
    assert!(
        readme.contains("kernel `chunk` uses the cube and the vector core: each of its tasks runs as 5 dependent tasks"),
        "{readme}"
    );
}

#[test]
fn unhonoured_schedule_directives_are_listed_in_the_readme_and_the_output() {
    let dir = common::scratch("ascend-notes");
    let file = dir.join("s.wsp");
    std::fs::write(
        &file,
        "tensor X: f32[8, 64];\nkernel k(inout x: f32[8, 64]) @vector {\n  tile t: vec f32[8, 64];\n  TLOAD(t, x);\n  TSTORE(x, t);\n}\n\
         workload main() { task k(X[0 +: 8, 0 +: 64]); }\n\
         schedule for main {\n  executors 4;\n  dispatch round_robin(4);\n  streams 2;\n  task_graph { ready work_steal; }\n}\n",
    )
    .unwrap();
    let out = dir.join("tree");
    let (code, stdout, stderr) = common::binary(&[
        "emit",
        "ascend",
        file.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let readme = std::fs::read_to_string(out.join("README.md")).unwrap();
    for what in ["`executors 4`", "`dispatch`", "`streams`", "`ready`"] {
        assert!(stdout.contains(what), "{what} not in the output: {stdout}");
        assert!(readme.contains(what), "{what} not in the README: {readme}");
    }
    assert!(stdout.contains("s.wsp:9:3"), "{stdout}");
}

#[test]
fn the_ascend_back_end_is_registered_and_compile_writes_its_tree() {
    let (code, stdout, stderr) = common::binary(&["targets"]);
    assert_eq!(code, 0, "{stderr}");
    let line = stdout.lines().find(|l| l.starts_with("ascend")).unwrap();
    assert!(
        line.contains("ascend_a2a3sim") && line.contains("ascend_a2a3 "),
        "{line}"
    );
    // `compile` applies the file's `//@ bind` lines and writes the whole tree.
    let dir = common::scratch("ascend-compile");
    let out = dir.join("tree");
    let (code, _, stderr) = common::binary(&[
        "compile",
        "examples/ascend/decode_attention.wsp",
        "--target",
        "ascend_a2a3sim",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    for f in [
        "orchestration.cpp",
        "kernel_chunk_part0.cpp",
        "kernel_chunk_part4.cpp",
        "kernel_merge_part2.cpp",
        "runner.py",
        "README.md",
    ] {
        assert!(out.join(f).exists(), "{f} missing");
    }
    // Through the library registry (registered by the facade, not the tool): `supports`
    // refuses, `compile` emits a tree.
    let (_, text) = example("vector_example");
    let plan = pto_wsp::lower(&pto_wsp::ir::parse(&text).unwrap()).unwrap();
    let options = pto_wsp::CompileOptions {
        target: "ascend_a2a3sim".into(),
        ..pto_wsp::CompileOptions::default()
    };
    match pto_wsp::compile_target(&plan, &options).unwrap() {
        pto_wsp::Output::Artefact(pto_wsp::Artefact::Tree(files)) => {
            assert!(
                files
                    .iter()
                    .any(|(p, b)| p.to_str() == Some("orchestration.cpp")
                        && String::from_utf8_lossy(b).contains("aicpu_orchestration_entry"))
            );
        }
        _ => panic!("not a tree"),
    }
    let builtin = pto_wsp::lower(
        &pto_wsp::ir::parse(
            "tensor X: f32[8, 64];\nkernel k(inout x: f32[8, 64]) @vector;\n\
             workload main() { task k(X[0 +: 8, 0 +: 64]); }\n",
        )
        .unwrap(),
    )
    .unwrap();
    let e = pto_wsp::compile_target(&builtin, &options)
        .map(|_| ())
        .unwrap_err();
    assert!(e.to_string().contains("which has no body"), "{e}");
}

/// A check a kernel fails on the simulator (a valid size outside its tile, known only from the
/// task's scalar) comes back as its message through the task's status slot, and the run fails.
#[test]
fn ascend_sim_a_kernel_check_failing_on_the_simulator_is_reported_with_its_message() {
    if let Err(why) = Toolchain::find() {
        common::toolchain_skipped(common::Needs::Simpler, &why);
        return;
    }
    common::toolchain_ran(common::Needs::Simpler);
    let _one_at_a_time = SIM.lock().unwrap_or_else(|e| e.into_inner());
    // The region has the 70 rows the valid size asks for (so `check`'s region rule passes);
    // the tile has 64.
    let text = "tensor X: f32[80, 64];\n\
        kernel k(inout x: f32[?, 64], n: i64) @vector {\n    tile t: vec f32[64, 64] valid(n, 64);\n    \
        TLOAD(t, x);\n    TADDS(t, t, 1.0);\n    TSTORE(x, t);\n}\n\
        workload main() {\n    task k(X[0 +: 80, 0 +: 64], 70);\n}\n";
    let opts = RunOptions {
        progress: false,
        threads: 2,
        ..RunOptions::default()
    };
    let e = run_ascend("bad_valid.wsp", text, "ascend_a2a3sim", &opts)
        .map(|_| ())
        .unwrap_err()
        .rendered;
    assert!(
        e.contains("error: kernel `k`: tile `t`: valid 70 x 64 is outside its 64 x 64"),
        "{e}"
    );
    assert!(e.contains("1 kernel task(s) failed a check"), "{e}");
    // The failing kernel's task statements, at their place in the source.
    assert!(
        e.contains("note: the tasks of kernel `k` are made at bad_valid.wsp:9:5"),
        "{e}"
    );
}
