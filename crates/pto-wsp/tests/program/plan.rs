//! Plans (`.wsp` `space` / `tiers` / `plan`) run by `pto_wsp::plan` on Plan-Descriptor-Execute:
//! the decode attention example against the `f64` reference of the split-KV workload for three
//! length mixes on 1 and 2 dispatch threads; tiers, `continue` and workspace allocation against
//! a model of the generator written here; and each bad input's message and location.

use super::numeric::{
    F16_FLOOR, F16_ROUND, assert_close, decode_reference, get, inputs, load, source,
};
use pto_wsp::ir::{SourceFile, validate};
use pto_wsp::kernels::{KernelRegistry, TensorStore};
use pto_wsp::plan::{PlanError, PlanOptions, PlanStats, run_plans};

fn run(
    text: &str,
    binds: &[&str],
    threads: usize,
    prepare: impl Fn(&mut TensorStore),
    registry: Option<KernelRegistry>,
) -> (Result<Vec<PlanStats>, PlanError>, TensorStore, TensorStore) {
    let (module, b, reg) = load(text, binds);
    validate(&module).unwrap_or_else(|e| panic!("{e:?}"));
    let input = inputs(&module, &b, 7, prepare);
    let mut store = input.clone();
    let opts = PlanOptions {
        dispatch_threads: threads,
        queue_capacity: 8,
        ..PlanOptions::default()
    };
    let r = run_plans(&module, &b, &mut store, &registry.unwrap_or(reg), opts);
    (r, input, store)
}

fn fmt(v: &[usize]) -> String {
    let s: Vec<String> = v.iter().map(usize::to_string).collect();
    format!("[{}]", s.join(", "))
}

#[test]
fn decode_attention_as_plans_matches_the_reference_for_uniform_skewed_and_short_mixes() {
    let text = source("pde/decode_attention");
    for (lens, max_chunks) in [
        ([1024usize, 1024, 1024], 2usize),
        ([2500, 1, 20], 5),
        ([5, 200, 17], 1),
    ] {
        let kl = format!("kv_lens={}", fmt(&lens));
        let mc = format!("max_chunks={max_chunks}");
        let binds = ["nreq=3", mc.as_str(), kl.as_str()];
        let chunks: usize = lens.iter().map(|l| l.div_ceil(512)).sum();
        for threads in [1, 2] {
            let (r, input, out) = run(&text, &binds, threads, |_| {}, None);
            let stats = r.unwrap_or_else(|e| panic!("{lens:?}: {e}"));
            let label = format!("{lens:?} on {threads} dispatch thread(s)");
            assert_eq!(stats.len(), 2);
            assert_eq!(stats[0].launch.descriptors as usize, chunks * 8, "{label}");
            assert_eq!(stats[1].launch.descriptors as usize, 3 * 32, "{label}");
            for s in &stats {
                assert_eq!(s.launch.per_thread.len(), threads);
                assert_eq!(
                    s.launch.per_thread.iter().sum::<u64>(),
                    s.launch.descriptors
                );
            }
            let (want, mag) = decode_reference(&input, &lens, max_chunks * 512);
            assert_close(
                &label,
                &get(&out, "Od"),
                &want,
                &mag,
                0..want.len(),
                2.0 * F16_ROUND + 2e-5,
                F16_FLOOR,
            );
        }
    }
}

/// Tiers by length, a tile of 16 over 64 columns, `continue` past a row's length, and one
/// workspace slot per emitted tile (16 elements for `small`, 32 for `big`); each descriptor
/// copies its tile of `X` to the start of its slot.
const COPY: &str = "//@ alias copy_s=copy
//@ alias copy_b=copy
symbol n: i64;
tensor lens: i32[n];
tensor X: f32[n, 64];
tensor W: f32[cap];
symbol cap: i64;
kernel copy_s(in x: f32[?, ?], out y: f32[?]);
kernel copy_b(in x: f32[?, ?], out y: f32[?]);
space S {
    axis r from 0 to n;
    axis c from 0 to 64;
    tile(c, 16);
}
tiers T {
    tier small <= 16 workspace 16;
    tier big default workspace 32;
}
plan p over S with T {
    workspace W;
    kernel small => copy_s(X[r, start +: 16], W[workspace +: 16]);
    kernel big => copy_b(X[r, start +: 16], W[workspace +: 16]);
    generate {
        for i in r {
            load len = lens[i];
            let t = select_tier(T, len);
            for j, lo, hi in c {
                if lo >= len {
                    continue;
                }
                let ws = alloc(t, i, j);
                emit(tier = t, r = i, c = j, start = lo, end = min(hi, len), workspace = ws);
            }
        }
    }
}
";

const LENS: [usize; 4] = [10, 40, 0, 16];

fn copy_binds(cap: usize) -> Vec<String> {
    vec![
        "n=4".into(),
        format!("cap={cap}"),
        format!("lens={}", fmt(&LENS)),
    ]
}

fn zero_w(s: &mut TensorStore) {
    let n = s.info(s.index_of("W").unwrap()).elements() as usize;
    s.write("W", &vec![0f32; n]).unwrap();
}

#[test]
fn tiers_continue_and_workspace_slots_follow_the_generator() {
    let binds = copy_binds(256);
    let binds: Vec<&str> = binds.iter().map(String::as_str).collect();
    for threads in [1, 2] {
        let (r, input, out) = run(COPY, &binds, threads, zero_w, None);
        let stats = r.unwrap();
        // The generator, modelled: rows in order, tiles of 16 below the row's length, a slot of
        // the row's tier's size each, handed out in emission order.
        let x = input.read::<f32>("X").unwrap();
        let mut want = vec![0f32; 256];
        let (mut at, mut emitted) = (0usize, 0u64);
        for (row, &len) in LENS.iter().enumerate() {
            let slot = if len <= 16 { 16 } else { 32 };
            for lo in (0..64).step_by(16).filter(|&lo| lo < len) {
                want[at..at + 16].copy_from_slice(&x[row * 64 + lo..row * 64 + lo + 16]);
                at += slot;
                emitted += 1;
            }
        }
        assert_eq!(stats[0].launch.descriptors, emitted);
        assert_eq!(stats[0].launch.workspace_used, at as u64);
        assert_eq!(out.read::<f32>("W").unwrap(), want, "{threads} thread(s)");
    }
}

/// Runs `text` and returns its error's message and `line:column`.
fn error_of(
    text: &str,
    binds: &[String],
    registry: Option<KernelRegistry>,
) -> (String, (usize, usize)) {
    let binds: Vec<&str> = binds.iter().map(String::as_str).collect();
    let (r, _, _) = run(text, &binds, 2, zero_w, registry);
    let e = r.expect_err("should fail");
    let at = SourceFile::new("t.wsp", text).line_col(e.loc.start as usize);
    (e.message, at)
}

fn position(text: &str, needle: &str) -> (usize, usize) {
    let at = text.find(needle).unwrap_or_else(|| panic!("{needle}"));
    SourceFile::new("t.wsp", text).line_col(at)
}

#[test]
fn a_workspace_overflow_names_space_tier_and_indices_at_the_alloc() {
    // 16 + 32 + 32 fit in 100; the third slot of row 1 does not.
    let (message, at) = error_of(COPY, &copy_binds(100), None);
    assert_eq!(
        message,
        "plan `p`: space `S`: workspace overflow allocating 32 elements for tier `big` at \
         indices [1, 2]: 80 of 100 already used"
    );
    assert_eq!(at, position(COPY, "let ws = alloc"));
}

#[test]
fn a_descriptor_field_out_of_range_names_space_and_field_at_the_emit() {
    let text = COPY.replace("c = j,", "c = j + 3,");
    let (message, at) = error_of(&text, &copy_binds(256), None);
    assert_eq!(
        message,
        "plan `p`: space `S`: descriptor field `c` = 4 is out of range (must be below 4)"
    );
    assert_eq!(at, position(&text, "emit("));
    let text = COPY.replace("start = lo,", "start = lo - 1,");
    let (message, at) = error_of(&text, &copy_binds(256), None);
    assert_eq!(
        message,
        "plan `p`: space `S`: descriptor field `start` = -1 is out of range (must be 0 to 4294967295)"
    );
    assert_eq!(at, position(&text, "emit("));
}

#[test]
fn a_tier_whose_kernel_has_no_implementation_is_refused_at_its_kernel_line() {
    let text = COPY.replace("//@ alias copy_b=copy\n", "");
    let (message, at) = error_of(
        &text,
        &copy_binds(256),
        Some(KernelRegistry::with_builtins()),
    );
    assert_eq!(
        message,
        "plan `p`: tier `small`: kernel `copy_s` has no implementation (give it a body, or alias \
         it to a built-in with `//@ alias copy_s=BUILTIN`)"
    );
    assert_eq!(at, position(&text, "kernel small =>"));
}

#[test]
fn descriptors_writing_the_same_region_are_refused_on_every_run_naming_the_tensor_at_the_emit() {
    // Every descriptor copies into the same 16 elements of `W`: a broken promise of
    // independence, with kernels so short that two rarely run at once. The verdict must not
    // depend on that: every run, on 1 or 2 dispatch threads, is refused the same way.
    let text = COPY.replace("W[workspace +: 16]", "W[0 +: 16]");
    let want = "plan `p`: descriptor #2 (tier `big`, r = 1, c = 0) writes `W`[0..16] (kernel \
                `copy_b`), which overlaps `W`[0..16] that descriptor #1 (tier `small`, r = 0, \
                c = 0) writes: the descriptors of a launch are promised independent (none may \
                touch what another writes), and this plan breaks the promise whatever the timing";
    let binds = copy_binds(256);
    let binds: Vec<&str> = binds.iter().map(String::as_str).collect();
    for run_no in 0..20 {
        let threads = 1 + run_no % 2;
        let (r, _, out) = run(&text, &binds, threads, zero_w, None);
        let e = r.expect_err("a repeated write region must be refused");
        assert_eq!(e.message, want, "run {run_no}");
        let at = SourceFile::new("t.wsp", &text).line_col(e.loc.start as usize);
        assert_eq!(at, position(&text, "emit("), "run {run_no}");
        // Refused before it was queued: nothing but the first descriptor's copy (if it ran
        // before the stop) reached `W`.
        let x = out.read::<f32>("X").unwrap();
        let w = out.read::<f32>("W").unwrap();
        assert!(w[..16] == [0.0; 16] || w[..16] == x[..16], "run {run_no}");
        assert!(w[16..].iter().all(|&v| v == 0.0), "run {run_no}");
    }
}

#[test]
fn a_failing_kernel_names_plan_tier_and_kernel_at_the_tiers_kernel_line() {
    // The `small` tier's call copies 15 elements into 16: `copy` refuses the shapes.
    let text = COPY.replace("copy_s(X[r, start +: 16]", "copy_s(X[r, start +: 15]");
    let (message, at) = error_of(&text, &copy_binds(256), None);
    assert!(
        message.starts_with("plan `p`: space `S`: kernel of tier `small` failed on descriptor"),
        "{message}"
    );
    assert!(message.contains("kernel `copy_s`"), "{message}");
    assert_eq!(at, position(&text, "kernel small =>"));
}

#[test]
fn a_module_with_a_workload_and_plans_shares_tensors_and_kernels_and_both_agree() {
    // decode_ragged.wsp's workload, plus the plans of pde/decode_attention.wsp (their space,
    // tiers and plan declarations, and the one kernel the workload lacks) in the same module.
    let workload = source("decode_ragged");
    let plans = source("pde/decode_attention");
    let from = plans.find("\nspace Chunks {").unwrap();
    let long = plans
        .lines()
        .find(|l| l.starts_with("kernel decode_chunk_long("))
        .unwrap();
    let text = format!(
        "//@ alias decode_chunk_long=attn_decode_chunk\n{workload}\n{long}\n\n{}",
        &plans[from..]
    );
    let binds = [
        "nreq=3",
        "max_chunks=2",
        "kv_lens=[700, 1024, 3]",
        "kv_chunks=[2, 2, 1]",
    ];
    let (module, b, reg) = load(&text, &binds);
    validate(&module).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!((module.workloads.len(), module.plans.len()), (1, 2));
    let input = inputs(&module, &b, 3, |_| {});
    let by_workload = super::numeric::run_once(&module, &b, &reg, 2, &input).unwrap();
    let mut by_plans = input.clone();
    let stats = run_plans(&module, &b, &mut by_plans, &reg, PlanOptions::default()).unwrap();
    assert_eq!(stats[0].launch.descriptors, (2 + 2 + 1) * 8);
    let od = |s: &TensorStore| s.read::<half::f16>("Od").unwrap();
    assert_eq!(
        od(&by_plans),
        od(&by_workload),
        "the same kernels on the same regions"
    );
    let (want, mag) = decode_reference(&input, &[700, 1024, 3], 2 * 512);
    assert_close(
        "plans in a workload module",
        &get(&by_plans, "Od"),
        &want,
        &mag,
        0..want.len(),
        2.0 * F16_ROUND + 2e-5,
        F16_FLOOR,
    );
}

#[test]
fn prefetch_fetches_value_v_plus_depth_when_v_emits_its_first_descriptor() {
    // `fetch` copies row v of X into row v of Pf. Rows 0, 1 and 3 emit descriptors (row 2's
    // length is 0): the first descriptors of rows 0 and 1 fetch rows 1 and 2; row 3 would fetch
    // row 4, which does not exist; row 2 emits nothing, so row 3 is never fetched.
    let text = COPY
        .replace(
            "kernel copy_s(",
            "tensor Pf: f32[n, 16];\nkernel fetch(in x: f32[?, ?], out y: f32[?, ?]);\nkernel copy_s(",
        )
        .replace("//@ alias copy_s=copy\n", "//@ alias copy_s=copy\n//@ alias fetch=copy\n")
        .replace(
            "    generate {",
            "    prefetch(r, 1) => fetch(X[r, 0 +: 16], Pf[r, 0 +: 16]);\n    generate {",
        );
    let binds = copy_binds(256);
    let binds: Vec<&str> = binds.iter().map(String::as_str).collect();
    let zero = |s: &mut TensorStore| {
        zero_w(s);
        s.write("Pf", &[0f32; 64]).unwrap();
    };
    for threads in [1, 2] {
        let (r, input, out) = run(&text, &binds, threads, zero, None);
        let stats = r.unwrap();
        assert_eq!(stats[0].launch.prefetches, 2);
        assert_eq!(
            stats[0].launch.descriptors, 5,
            "prefetches are not descriptors"
        );
        let x = input.read::<f32>("X").unwrap();
        let mut want = vec![0f32; 64];
        for row in [1, 2] {
            want[row * 16..row * 16 + 16].copy_from_slice(&x[row * 64..row * 64 + 16]);
        }
        assert_eq!(out.read::<f32>("Pf").unwrap(), want, "{threads} thread(s)");
    }
}

/// A 6 × 2 space whose descriptors run `rec`, which records `(b, c)` and the dispatch thread
/// (the kernel is registered by the test); `SCHEDULE` is replaced by the plan's schedule items.
const SCHED: &str = "tensor X: f32[9, 4];
kernel rec(in x: f32[?, ?], b: i64, c: i64);
space Q {
    axis b from 0 to NB;
    axis c from 0 to NC;
}
tiers T {
    tier k default;
}
plan q over Q with T {
    kernel k => rec(X[b, 0 +: 1], b, c);
SCHEDULE    generate {
        for i in b {
            for j in c {
                emit(tier = 0, b = i, c = j);
            }
        }
    }
}
";

type Record = Vec<(u32, u32, std::thread::ThreadId)>;

/// A run's error message and its `line:column`.
type Failure = (String, (usize, usize));

/// Runs `template` (`SCHED` or a variant) over `nb` × `nc` with `schedule` on `threads`
/// dispatch threads; returns what `rec` recorded, in the order it ran, or the run's error and
/// its `line:column`.
fn scheduled(
    template: &str,
    nb: u32,
    nc: u32,
    schedule: &str,
    threads: usize,
) -> Result<Record, Failure> {
    use std::sync::{Arc, Mutex};
    let text = template
        .replace("NB", &nb.to_string())
        .replace("NC", &nc.to_string())
        .replace("SCHEDULE", schedule);
    let (_, _, mut reg) = load(&text, &[]);
    let seen: Arc<Mutex<Record>> = Arc::default();
    let log = Arc::clone(&seen);
    reg.register("rec", move |ctx| {
        let (b, c) = (ctx.param_i64(0)?, ctx.param_i64(1)?);
        log.lock()
            .unwrap()
            .push((b as u32, c as u32, std::thread::current().id()));
        Ok(())
    });
    let (r, _, _) = run(&text, &[], threads, |_| {}, Some(reg));
    match r {
        Ok(stats) => {
            let seen = std::mem::take(&mut *seen.lock().unwrap());
            assert_eq!(stats[0].launch.descriptors, seen.len() as u64);
            Ok(seen)
        }
        Err(e) => {
            let at = SourceFile::new("t.wsp", &text).line_col(e.loc.start as usize);
            Err((e.message, at))
        }
    }
}

#[test]
fn order_interleaved_in_a_plan_queues_descriptors_as_the_rust_walk_does() {
    let order = |schedule: &str| -> Vec<(u32, u32)> {
        // One dispatch thread pops in queue order: the run order is the generated order.
        let seen = scheduled(SCHED, 6, 2, schedule, 1).unwrap();
        seen.into_iter().map(|(b, c, _)| (b, c)).collect()
    };
    // The PDE specification's `PTO_ORDER` example: B0C0, B1C0, B2C0, B3C0, B0C1, ... for
    // interleaved(4) on the batch.
    let want = vec![
        (0, 0),
        (1, 0),
        (2, 0),
        (3, 0),
        (0, 1),
        (1, 1),
        (2, 1),
        (3, 1),
        (4, 0),
        (5, 0),
        (4, 1),
        (5, 1),
    ];
    assert_eq!(order("    order(b, interleaved(4));\n"), want);
    // The Rust API's walk over the same space agrees.
    let space = pto_wsp::pde::Space::new("Q")
        .axis("b", 0, pto_wsp::pde::End::Const(6))
        .axis("c", 0, pto_wsp::pde::End::Const(2))
        .bind(&[], &[])
        .unwrap();
    let mut walked = Vec::new();
    pto_wsp::pde::walk(&space, &[("b", pto_wsp::pde::Order::Interleaved(4))], |i| {
        walked.push((i[0], i[1]));
        Ok(())
    })
    .unwrap();
    assert_eq!(walked, want);
    let row_major: Vec<(u32, u32)> = (0..6).flat_map(|b| (0..2).map(move |c| (b, c))).collect();
    assert_eq!(order(""), row_major);
    assert_eq!(
        order("    order(b, sequential);\n    order(c, parallel);\n"),
        row_major
    );
    assert_eq!(order("    order(c, interleaved(1));\n"), row_major);
    // A generator that skips points (`continue` past chunk 0 of batch 1): the walk's order
    // without them.
    let text = SCHED.replace(
        "            for j in c {\n",
        "            for j in c {\n                if i == 1 && j == 0 {\n                    continue;\n                }\n",
    );
    assert_ne!(text, SCHED);
    let skipped: Vec<(u32, u32)> = want.iter().copied().filter(|&p| p != (1, 0)).collect();
    let seen = scheduled(&text, 6, 2, "    order(b, interleaved(4));\n", 1).unwrap();
    let seen: Vec<(u32, u32)> = seen.into_iter().map(|(b, c, _)| (b, c)).collect();
    assert_eq!(seen, skipped);
}

/// The threads each value of `b` ran on, over a 9 × 50 space.
fn placement(
    threads: usize,
    affinity: &str,
) -> Result<Vec<std::collections::HashSet<std::thread::ThreadId>>, Failure> {
    let schedule = format!("    affinity(b, {affinity});\n");
    let seen = scheduled(SCHED, 9, 50, &schedule, threads)?;
    assert_eq!(seen.len(), 450);
    let mut by_value = vec![std::collections::HashSet::new(); 9];
    for (b, _, t) in seen {
        by_value[b as usize].insert(t);
    }
    Ok(by_value)
}

#[test]
fn affinity_in_a_plan_places_each_value_as_the_rust_launch_does() {
    // core_local on 3 threads: each value on one thread; v and v + 3 share it, v and v + 1 not.
    let by_value = placement(3, "core_local").unwrap();
    for v in 0..9 {
        assert_eq!(by_value[v].len(), 1, "value {v} ran on {:?}", by_value[v]);
        if v + 3 < 9 {
            assert_eq!(by_value[v], by_value[v + 3]);
        }
        if v + 1 < 9 && (v + 1) % 3 != 0 {
            assert!(by_value[v].is_disjoint(&by_value[v + 1]));
        }
    }
    // core_group(2) on 4 threads: even values on one pair of threads, odd values on the other.
    let by_value = placement(4, "core_group(2)").unwrap();
    let pick = |odd: usize| -> std::collections::HashSet<_> {
        by_value
            .iter()
            .skip(odd)
            .step_by(2)
            .flatten()
            .copied()
            .collect()
    };
    let (even, odd) = (pick(0), pick(1));
    assert!(even.len() <= 2 && odd.len() <= 2, "{even:?} {odd:?}");
    assert!(even.is_disjoint(&odd));
    assert!(placement(2, "spread").is_ok());
    // A group larger than the dispatch threads is refused at the `affinity` item.
    let (message, at) = placement(2, "core_group(3)").unwrap_err();
    assert_eq!(
        message,
        "plan `q`: space `Q`: affinity on axis `b`: core_group(3) needs 1 to 2 threads (the \
         dispatch threads)"
    );
    assert_eq!(at, (12, 5));
}

/// A descriptor (Plan-Descriptor-Execute) against what the task-graph runtime stores for the
/// same work: the decode chunk as a task is its node, 6 regions (q, k, v, o, m, l) and 2 params.
#[test]
fn a_descriptor_is_smaller_than_a_task_node_with_its_regions() {
    use pto_wsp::graph::storage::TaskNode;
    use pto_wsp::ir::task_io::TaskIo;
    use pto_wsp::pde::Descriptor;
    assert_eq!(Descriptor::BYTES, 36);
    assert_eq!(std::mem::align_of::<Descriptor>(), 4);
    let task = std::mem::size_of::<TaskNode>() + 6 * std::mem::size_of::<TaskIo>() + 2 * 8;
    assert!(
        Descriptor::BYTES * 5 < task,
        "{} vs {task}",
        Descriptor::BYTES
    );
}

#[test]
fn plans_as_task_batches_give_the_plans_output_bit_for_bit() {
    // The decode attention plans expanded into a workload (what the Ascend back end runs), run
    // as a task graph, against the same plans run on Plan-Descriptor-Execute.
    use pto_wsp::plan::tasks::{WORKLOAD, plans_as_tasks};
    let text = source("pde/decode_attention");
    for (lens, max_chunks) in [([2500usize, 1, 20], 5usize), ([1024, 1024, 1024], 2)] {
        let kl = format!("kv_lens={}", fmt(&lens));
        let mc = format!("max_chunks={max_chunks}");
        let binds = ["nreq=3", mc.as_str(), kl.as_str()];
        let (module, b, reg) = load(&text, &binds);
        let expanded = plans_as_tasks(&module, &b).unwrap();
        validate(&expanded.module).unwrap_or_else(|e| panic!("{e:?}"));
        assert!(expanded.module.plans.is_empty());
        assert_eq!(expanded.module.workloads[0].name.as_str(), WORKLOAD);
        let chunks: usize = lens.iter().map(|l| l.div_ceil(512)).sum();
        assert_eq!(
            expanded.tasks,
            [
                ("chunks".into(), chunks * 8),
                ("merge_heads".into(), 3 * 32)
            ]
        );
        let input = inputs(&module, &b, 5, |_| {});
        let by_tasks = super::numeric::run_once(&expanded.module, &b, &reg, 2, &input).unwrap();
        let mut by_plans = input.clone();
        run_plans(&module, &b, &mut by_plans, &reg, PlanOptions::default()).unwrap();
        for t in ["Opart", "Mpart", "Lpart"] {
            let (x, y) = (by_tasks.read::<f32>(t), by_plans.read::<f32>(t));
            let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
            assert_eq!(bits(x.unwrap()), bits(y.unwrap()), "{t} for {lens:?}");
        }
        let od = |s: &TensorStore| s.read::<half::f16>("Od").unwrap();
        assert_eq!(od(&by_tasks), od(&by_plans), "Od for {lens:?}");
    }
}

#[test]
fn plans_as_task_batches_keep_the_generators_order_workspace_and_errors() {
    use pto_wsp::ir::{Arg, Expr, StmtKind};
    use pto_wsp::plan::tasks::plans_as_tasks;
    let binds = copy_binds(256);
    let binds: Vec<&str> = binds.iter().map(String::as_str).collect();
    let (module, b, _) = load(COPY, &binds);
    let expanded = plans_as_tasks(&module, &b).unwrap();
    // The generator, modelled (as `tiers_continue_and_workspace_slots_follow_the_generator`):
    // each emitted tile a task of its row's tier, reading X[row, lo +: 16] and writing its slot.
    let mut want = Vec::new();
    let mut at = 0i64;
    for (row, &len) in LENS.iter().enumerate() {
        let (kernel, slot) = if len <= 16 {
            ("copy_s", 16)
        } else {
            ("copy_b", 32)
        };
        for lo in (0..64).step_by(16).filter(|&lo| lo < len) {
            want.push(format!("{kernel}(X[{row}, {lo} +: 16], W[{at} +: 16])"));
            at += slot;
        }
    }
    let StmtKind::Sequential(batches) = &expanded.module.workloads[0].body[0].kind else {
        panic!("not a sequential")
    };
    let StmtKind::Combine(tasks) = &batches[0].kind else {
        panic!("not a batch")
    };
    let got: Vec<String> = tasks
        .iter()
        .map(|s| match &s.kind {
            StmtKind::Task(t) => {
                let args: Vec<String> = t
                    .args
                    .iter()
                    .map(|a| match a {
                        Arg::Region(r) => r.to_string(),
                        Arg::Scalar(e) => e.to_string(),
                    })
                    .collect();
                assert!(t.args.iter().all(|a| match a {
                    Arg::Region(r) => r.dims.iter().all(|d| matches!(d.start, Expr::Int(_))),
                    Arg::Scalar(_) => true,
                }));
                format!("{}({})", t.kernel, args.join(", "))
            }
            _ => panic!("not a task"),
        })
        .collect();
    assert_eq!(got, want);
    // A plan's mistakes are the plan run's, at the same place.
    let text = COPY.replace("W[workspace +: 16]", "W[0 +: 16]");
    let (module, b, _) = load(&text, &binds);
    let e = plans_as_tasks(&module, &b).unwrap_err();
    let (run_message, run_at) = error_of(&text, &copy_binds(256), None);
    assert_eq!(e.message, run_message);
    let at = SourceFile::new("t.wsp", &text).line_col(e.loc.start as usize);
    assert_eq!(
        (at, run_at),
        (position(&text, "emit("), position(&text, "emit("))
    );
    let (module, b, _) = load(COPY, &["n=4", "cap=100", "lens=[10, 40, 0, 16]"]);
    let e = plans_as_tasks(&module, &b).unwrap_err();
    assert_eq!(e.message, error_of(COPY, &copy_binds(100), None).0);
}
