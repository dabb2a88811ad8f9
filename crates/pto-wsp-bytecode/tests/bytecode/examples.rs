//! Every example, and dynamic shapes: the same bytes under different bindings.

use super::common::{check_module, check_program};
use super::common::{encode, expand};
use pto_wsp_bytecode::{EncodeOptions, Program};
use pto_wsp_ir::{Bindings, Module, parse};
use std::path::Path;

pub(crate) const EXAMPLES: &[&str] = &[
    "mha",
    "gemm",
    "decode_ragged",
    "moe",
    "tiered",
    "csp_pipeline",
    "llama7b_layer",
];

/// The module of an example and its `//@ bind` defaults (parsed here the way the CLI does).
pub(crate) fn example(name: &str) -> (Module, Bindings) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../examples/{name}.wsp"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let module = parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut b = Bindings::new();
    for line in text.lines() {
        if let Some(spec) = line.trim().strip_prefix("//@ bind") {
            b.bind_str(&module, spec.trim())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
    (module, b)
}

#[test]
fn every_example_matches_the_expander_on_every_executor() {
    for name in EXAMPLES {
        let (m, b) = example(name);
        let x = check_module(&m, &b, None);
        assert!(!x.tasks.is_empty(), "{name}");
    }
}

#[test]
fn examples_with_other_executor_counts() {
    for name in EXAMPLES {
        let (m, b) = example(name);
        for e in [1, 3, 7] {
            check_module(&m, &b, Some(e));
        }
    }
}

fn with(b: &Bindings, m: &Module, specs: &[&str]) -> Bindings {
    let mut b = b.clone();
    for s in specs {
        b.bind_str(m, s).unwrap_or_else(|e| panic!("{s}: {e}"));
    }
    b
}

#[test]
fn same_bytes_different_bindings() {
    let cases: &[(&str, &[&[&str]])] = &[
        ("llama7b_layer", &[&["seq=32"], &["seq=2048"], &["seq=0"]]),
        ("gemm", &[&["M=256", "N=384", "K=512"], &["K=0"]]),
        (
            "decode_ragged",
            &[
                &["nreq=3", "kv_chunks=[1, 2, 2]", "kv_lens=[100, 600, 900]"],
                &["nreq=0", "kv_chunks=[]", "kv_lens=[]"],
            ],
        ),
        (
            "moe",
            &[
                &[
                    "tokens=48",
                    "routes=4",
                    "route_indptr=[0, 1, 1, 4]",
                    "route_experts=[7, 0, 3, 5]",
                ],
                &[
                    "tokens=32",
                    "routes=0",
                    "route_indptr=[0, 0, 0]",
                    "route_experts=[]",
                ],
            ],
        ),
        (
            "tiered",
            &[&["prefill=true"], &["nreq=2", "req_len=[9000, 3]"]],
        ),
        (
            "csp_pipeline",
            &[&["ntiles=1"], &["ntiles=5"], &["ntiles=0"]],
        ),
        ("mha", &[&["batch=1", "seq=1024"]]),
    ];
    for (name, variants) in cases {
        let (m, b) = example(name);
        let bytes = encode(&m, &EncodeOptions::default()).expect("encodes");
        let prog = Program::decode(&bytes).expect("decodes");
        for specs in *variants {
            let b2 = with(&b, &m, specs);
            check_program(&prog, &m, &b2, None);
            check_program(&prog, &m, &b, None);
        }
    }
}

/// The on-device generation specification's headline figure: the LLaMA-7B layer at 16K tokens in
/// at most 4 KB.
#[test]
fn llama_layer_fits_in_the_seed_figure() {
    let (m, b) = example("llama7b_layer");
    let bytes = encode(&m, &EncodeOptions::default()).expect("encodes");
    let stripped = encode(&m, &EncodeOptions { names: false }).expect("encodes");
    assert!(bytes.len() <= 4096, "{} bytes", bytes.len());
    assert!(stripped.len() <= bytes.len());
    let b = with(&b, &m, &["seq=16384"]);
    let prog = Program::decode(&bytes).expect("decodes");
    let bound = prog.bind(&b).expect("binds");
    let mut n = 0u32;
    let mut interp =
        pto_wsp_bytecode::Interpreter::new(&prog, &bound, pto_wsp_bytecode::ExecutorConfig::all())
            .expect("interpreter");
    interp
        .run(&mut |_: &pto_wsp_bytecode::Task<'_>| n += 1)
        .expect("runs");
    assert_eq!(n, 248_832);
}

/// Bindings under which the expander fails: the all-tasks generator and at least one executor
/// fail too (the owner of the failing task or subtree), never a panic.
#[test]
fn failing_bindings_fail_somewhere() {
    let cases: &[(&str, &[&str])] = &[
        // A request with no chunks: its merge reads an empty region.
        (
            "decode_ragged",
            &["nreq=3", "kv_chunks=[1, 0, 2]", "kv_lens=[100, 0, 900]"],
        ),
        // Too few lengths / a negative length.
        (
            "decode_ragged",
            &["nreq=3", "kv_chunks=[1, 2]", "kv_lens=[100, 600, 900]"],
        ),
        ("decode_ragged", &["kv_chunks=[3, -1, 8, 5]"]),
        // A bad indptr.
        (
            "moe",
            &["route_indptr=[0, 2, 1, 7, 11, 12, 14, 17, 19, 21, 24, 26, 27, 30, 32, 34, 38]"],
        ),
        // A region out of bounds (seq not a multiple of the tile).
        ("llama7b_layer", &["seq=-64"]),
        ("gemm", &["M=-128"]),
    ];
    for (name, specs) in cases {
        let (m, b) = example(name);
        let b = with(&b, &m, specs);
        let expected = expand(&m, &b, &pto_wsp_ir::ExpandOptions::default());
        assert!(
            expected.is_err(),
            "{name} {specs:?} should fail in the expander"
        );
        let bytes = encode(&m, &EncodeOptions::default()).expect("encodes");
        let prog = Program::decode(&bytes).expect("decodes");
        let all = super::common::run_one(&prog, &b, pto_wsp_bytecode::ExecutorConfig::all());
        assert!(
            all.is_err(),
            "{name} {specs:?}: the all-tasks run succeeded"
        );
        let e = prog.executors();
        let failures = (0..e as u32)
            .filter(|&me| {
                super::common::run_one(&prog, &b, pto_wsp_bytecode::ExecutorConfig::executor(me))
                    .is_err()
            })
            .count();
        assert!(failures > 0, "{name} {specs:?}: no executor failed");
    }
}

/// The way a runtime drives the interpreters: one per executor, each on its own thread, sharing
/// the program and the bindings; the union of what they generate is the expander's task list.
#[test]
fn executors_run_on_their_own_threads() {
    fn assert_send<T: Send>() {}
    fn assert_sync<T: Sync>() {}
    assert_send::<pto_wsp_bytecode::Interpreter<'static>>();
    assert_sync::<Program>();
    assert_sync::<pto_wsp_bytecode::Bound>();
    let (m, b) = example("decode_ragged");
    let x = expand(&m, &b, &pto_wsp_ir::ExpandOptions::default()).expect("expands");
    let bytes = encode(&m, &EncodeOptions::default()).expect("encodes");
    let prog = Program::decode(&bytes).expect("decodes");
    let bound = prog.bind(&b).expect("binds");
    let e = prog.executors() as u32;
    let mut got: Vec<(u32, pto_wsp_ir::ExpandedTask)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..e)
            .map(|k| {
                let (prog, bound) = (&prog, &bound);
                s.spawn(move || {
                    let mut out = Vec::new();
                    let mut interp = pto_wsp_bytecode::Interpreter::new(
                        prog,
                        bound,
                        pto_wsp_bytecode::ExecutorConfig::executor(k),
                    )
                    .expect("interpreter");
                    interp
                        .run(&mut |t: &pto_wsp_bytecode::Task<'_>| {
                            out.push((t.index, t.to_expanded()))
                        })
                        .expect("runs");
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("no panic"))
            .collect()
    });
    got.sort_by_key(|(i, _)| *i);
    let want: Vec<(u32, pto_wsp_ir::ExpandedTask)> = x
        .tasks
        .into_iter()
        .enumerate()
        .map(|(i, t)| (i as u32, t))
        .collect();
    assert_eq!(got, want);
}

/// Region starts read from slots that `set` and `load` change between tasks, from loop
/// variables of several depths, and from workload parameters: every kind of register write the
/// interpreter must see before a task uses the register.
#[test]
fn starts_follow_every_register_write() {
    let src = "
symbol n: i64;
slot s: i64;
tensor data: i32[4];
tensor A: f32[64, 64];
axis I = dense_dyn(n);
axis J = dense(3);
kernel k(in a: f32[1, 2], out b: f32[1, 1]);
workload inner(i: i64, p: i64) {
    parallel_for q in J {
        task k(A[p * 3 + q +: 1, 0 +: 2], A[p, q]);
    }
}
workload main() {
    parallel_for i in I {
        set s = i * 2;
        task k(A[s +: 1, 0 +: 2], A[s, 1]);
        parallel_for j in J {
            task k(A[s + j +: 1, i +: 2], A[j, i]);
            set s = s + 5;
            task k(A[s +: 1, j +: 2], A[i, j]);
            load s = data[j];
            task k(A[s +: 1, 0 +: 2], A[s, s]);
            call inner(i, i + j);
        }
        task k(A[s +: 1, 0 +: 2], A[s, 0]);
    }
}
schedule for main {
    executors 3;
    dispatch affinity(i);
}
";
    let m = parse(src).expect("parses");
    pto_wsp_ir::validate(&m).expect("valid");
    for n in [0i64, 1, 4] {
        let b = Bindings::new()
            .symbol("n", n)
            .array("data", vec![7, 1, 3, 2]);
        super::common::check_module(&m, &b, None);
        super::common::check_module(&m, &b, Some(1));
    }
}

/// Every schedule key at once — dispatch, stream, pool metric, priority and cycle cost — each
/// per task as the expander evaluates it (a negative cost counts as zero), on every executor.
#[test]
fn every_schedule_key_matches_the_expander() {
    let src = "
symbol n: i64;
tensor A: f32[64, 64];
axis I = dense_dyn(n);
axis J = dense(3);
kernel k(out b: f32[1, 1]);
workload main() {
    parallel_for i in I {
        parallel_for j in J {
            task k(A[i, j]);
        }
    }
}
schedule for main {
    executors 3;
    dispatch affinity(i + j);
    streams 2;
    stream_by j;
    task_graph {
        ready priority(i * 10 - j);
        trace cycles(j - 1);
    }
    dispatch_threshold(i) { below 2: vector, else: cube };
}
";
    let m = parse(src).expect("parses");
    pto_wsp_ir::validate(&m).expect("valid");
    for n in [0i64, 1, 5] {
        let b = Bindings::new().symbol("n", n);
        let x = super::common::check_module(&m, &b, None);
        assert!(n == 0 || x.tasks.iter().any(|t| t.priority < 0 && t.cost == Some(0)));
        super::common::check_module(&m, &b, Some(2));
    }
}

/// Region starts over a `consume` variable: the token value must reach the task's bounds.
#[test]
fn starts_follow_consumed_tokens() {
    let src = "
symbol n: i64;
tensor A: f32[64, 64];
axis I = dense_dyn(n);
kernel k(in a: f32[1, 2], out b: f32[1, 1]);
pipeline p {
    channel c[2];
    process producer(produces c) {
        for_each i in I {
            task k(A[i +: 1, 0 +: 2], A[i, 0]);
            send c(i * 2 + 1);
        }
    }
    process consumer(consumes c) {
        consume c as v {
            task k(A[v * 3 +: 1, 0 +: 2], A[v, 1]);
        }
    }
}
schedule for p {
    executors 2;
    dispatch round_robin(2);
}
";
    let m = parse(src).expect("parses");
    pto_wsp_ir::validate(&m).expect("valid");
    for n in [0i64, 1, 5] {
        super::common::check_module(&m, &Bindings::new().symbol("n", n), None);
    }
}

/// A pipeline of two processes and no channel is still run as CSP (each process its own
/// generator): the tasks and order edges are the expander's.
#[test]
fn a_pipeline_of_two_processes_and_no_channel_is_csp() {
    let two_processes = "
tensor A: f32[8, 8];
axis I = dense(4);
kernel k(inout a: f32[1, 8]);
pipeline p {
    process left() {
        for_each i in I {
            task k(A[i, 0 +: 8]);
        }
    }
    process right() {
        for_each i in I {
            task k(A[i + 4, 0 +: 8]);
            task k(A[i + 4, 0 +: 8]);
        }
    }
}
";
    for src in [two_processes] {
        let m = parse(src).expect("parses");
        pto_wsp_ir::validate(&m).expect("valid");
        for executors in [None, Some(2)] {
            let x = super::common::check_module(&m, &Bindings::new(), executors);
            assert!(!x.tasks.is_empty());
        }
    }
}

/// Each tensor's regions are checked against that tensor's own extents: two tensors of
/// different symbolic shapes, tasks over the whole of the larger one (in bounds only against
/// its own extents), every task the expander's.
#[test]
fn regions_are_checked_against_their_own_tensors_extents() {
    let src = "
symbol m: i64;
symbol n: i64;
tensor A: f32[m, 4];
tensor B: f32[n, 64];
axis I = dense_dyn(n);
kernel k(in a: f32[1, 4], inout b: f32[1, 64]);
workload main() {
    parallel_for i in I {
        task k(A[0, 0 +: 4], B[i, 0 +: 64]);
    }
}
";
    let m = parse(src).expect("parses");
    pto_wsp_ir::validate(&m).expect("valid");
    let b = Bindings::new().symbol("m", 2i64).symbol("n", 16i64);
    let x = super::common::check_module(&m, &b, None);
    assert_eq!(x.tasks.len(), 16);
}

/// Every task of every example comes with its regions as boxes (checked against the regions,
/// converted by the IR's constructor, in the recording sink); a statement over a tensor with an
/// extent of 2^32 or more comes without them, and its tasks still match the expander.
#[test]
fn tasks_come_with_their_regions_as_boxes_when_every_extent_fits() {
    use super::common::run_one;
    use pto_wsp_bytecode::ExecutorConfig;
    for name in EXAMPLES {
        let (m, b) = example(name);
        let prog = Program::decode(&encode(&m, &EncodeOptions::default()).expect("encodes"))
            .expect("decodes");
        let (rec, _) = run_one(&prog, &b, ExecutorConfig::all()).expect("runs");
        assert!(!rec.tasks.is_empty(), "{name}");
        assert_eq!(rec.boxed, rec.tasks.len(), "{name}");
        // A sink that does not ask for boxes is handed none (their copy is not paid).
        let bound = prog.bind(&b).expect("binds");
        let mut interp = pto_wsp_bytecode::Interpreter::new(&prog, &bound, ExecutorConfig::all())
            .expect("starts");
        let mut unboxed = 0;
        interp
            .run(&mut |t: &pto_wsp_bytecode::Task<'_>| unboxed += usize::from(t.io().is_none()))
            .expect("runs");
        assert_eq!(unboxed, rec.tasks.len(), "{name}");
    }
    let src = "
symbol m: i64;
tensor A: f32[m, 4];
tensor B: f32[8, 4];
axis I = dense(8);
kernel k(in a: f32[1, 4], out b: f32[1, 4]);
kernel j(in b: f32[1, 4], out a: f32[1, 4]);
workload main() {
    parallel_for i in I {
        task k(A[i, 0 +: 4], B[i, 0 +: 4]);
        task j(B[i, 0 +: 4], B[7 - i, 0 +: 4]);
    }
}
";
    let m = parse(src).expect("parses");
    let b = Bindings::new().symbol("m", 1i64 << 33);
    let x = super::common::check_module(&m, &b, None);
    assert_eq!(x.tasks.len(), 16);
    let prog =
        Program::decode(&encode(&m, &EncodeOptions::default()).expect("encodes")).expect("decodes");
    let (rec, _) = run_one(&prog, &b, ExecutorConfig::all()).expect("runs");
    assert_eq!(rec.boxed, 8, "only the statement over B alone");
}
