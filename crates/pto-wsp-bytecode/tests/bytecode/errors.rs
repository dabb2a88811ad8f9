//! The messages of encoder, binding and interpreter errors: each names what is wrong.

use super::common::{encode, expand};
use super::examples::example;
use pto_wsp_bytecode::{EncodeOptions, ExecutorConfig, Interpreter, Program, Task};
use pto_wsp_ir::{Bindings, parse};

fn encode_err(src: &str) -> String {
    let m = parse(src).unwrap_or_else(|e| panic!("{e}"));
    match encode(&m, &EncodeOptions::default()) {
        Ok(_) => panic!("encoded"),
        Err(e) => e.to_string(),
    }
}

fn has(msg: &str, want: &str) {
    assert!(msg.contains(want), "{msg:?} does not contain {want:?}");
}

#[test]
fn encode_errors() {
    has(
        &encode_err("workload a() { } workload b() { }"),
        "no entry point: there is no schedule, no workload `main`",
    );
    has(
        &encode_err("kernel k(x: i64); workload main() { task k(y); }"),
        "unknown name `y` in argument `x` of task `k` in workload `main`",
    );
    has(
        &encode_err("kernel k(x: i64); workload main() { task k(true); }"),
        "type error in argument `x` of task `k` in workload `main`: expected i64, found a bool",
    );
    has(
        &encode_err(
            "pipeline p { channel c[1]; process a(produces c) { send c(1u); } process b(consumes c) { consume c as v { } } }",
        ),
        "not supported by the bytecode",
    );
    let mut deep = String::from("axis A = dense(1); kernel k(); workload main() {");
    for i in 0..70 {
        deep.push_str(&format!(" parallel_for v{i} in A {{"));
    }
    deep.push_str(" task k();");
    deep.push_str(&" }".repeat(70));
    deep.push_str(" }");
    has(&encode_err(&deep), "too many nesting levels");
    has(
        &encode_err("workload main() { call main(); }"),
        "recursive call: main -> main",
    );
}

fn prog(name: &str) -> (Program, Bindings) {
    let (m, b) = example(name);
    let bytes = encode(&m, &EncodeOptions::default()).expect("encodes");
    (Program::decode(&bytes).expect("decodes"), b)
}

#[test]
fn bind_errors() {
    let (p, _) = prog("gemm");
    has(
        &p.bind(&Bindings::new()).unwrap_err().to_string(),
        "symbol `M` is not bound",
    );
    let b = Bindings::new()
        .symbol("M", true)
        .symbol("N", 1i64)
        .symbol("K", 1i64);
    has(
        &p.bind(&b).unwrap_err().to_string(),
        "`M` is declared i64 but bound to a bool",
    );
    let b = Bindings::new()
        .symbol("M", -128i64)
        .symbol("N", 128i64)
        .symbol("K", 128i64);
    has(
        &p.bind(&b).unwrap_err().to_string(),
        "dimension 0 of tensor `A` is negative (-128)",
    );
    let (p, _) = prog("decode_ragged");
    let b = Bindings::new()
        .symbol("nreq", 1i64)
        .symbol("max_chunks", 1i64);
    has(
        &p.bind(&b).unwrap_err().to_string(),
        "the contents of tensor `kv_chunks` are not bound",
    );
}

fn run_err(name: &str, b: &Bindings, config: ExecutorConfig) -> String {
    let (p, _) = prog(name);
    let bound = p.bind(b).unwrap_or_else(|e| panic!("{e}"));
    match Interpreter::new(&p, &bound, config) {
        Err(e) => e.to_string(),
        Ok(mut i) => match i.run(&mut |_: &Task<'_>| {}) {
            Ok(_) => panic!("ran"),
            Err(e) => e.to_string(),
        },
    }
}

#[test]
fn interpreter_errors() {
    let (_, b) = prog("decode_ragged");
    let bad = b.clone().array("kv_chunks", vec![3, -1, 8, 5]);
    has(
        &run_err("decode_ragged", &bad, ExecutorConfig::all()),
        "row length `kv_chunks[1]` of axis `RC` is negative (-1)",
    );
    let short = b.clone().array("kv_chunks", vec![3, 1]);
    has(
        &run_err("decode_ragged", &short, ExecutorConfig::all()),
        "tensor `kv_chunks` is bound to 2 element(s), 4 needed",
    );
    let empty = b.clone().array("kv_chunks", vec![3, 0, 8, 5]);
    has(
        &run_err("decode_ragged", &empty, ExecutorConfig::all()),
        "(`merge`): region argument 0 of `Opart` is out of bounds in dimension 2: start 0, size 0, extent 8",
    );
    has(
        &run_err("decode_ragged", &b, ExecutorConfig::executor(8)),
        "bad executor configuration: executor 8 does not exist (8 executors)",
    );
    has(
        &run_err(
            "decode_ragged",
            &b,
            ExecutorConfig {
                executor: None,
                executors: None,
                owners: None,
                max_steps: Some(10),
            },
        ),
        "stopped after 10 loop iterations (the configured step limit)",
    );
    let (_, b) = prog("moe");
    let bad = b.clone().array(
        "route_indptr",
        vec![
            0, 2, 1, 7, 11, 12, 14, 17, 19, 21, 24, 26, 27, 30, 32, 34, 38,
        ],
    );
    has(
        &run_err("moe", &bad, ExecutorConfig::all()),
        "bad sparse indptr `route_indptr`: entry 2 (1) is less than entry 1 (2)",
    );
}

#[test]
fn deadlock_names_processes_and_channels() {
    let src = "
kernel k();
pipeline p {
    channel c[1];
    channel d[1];
    process a(consumes d; produces c) { consume d as x { task k(); } send c(1); }
    process b(consumes c; produces d) { consume c as y { task k(); } send d(1); }
}
";
    let m = parse(src).expect("parses");
    let bytes = encode(&m, &EncodeOptions::default()).expect("encodes");
    let p = Program::decode(&bytes).expect("decodes");
    let bound = p.bind(&Bindings::new()).expect("binds");
    let mut i = Interpreter::new(&p, &bound, ExecutorConfig::all()).expect("new");
    let e = i.run(&mut |_: &Task<'_>| {}).unwrap_err().to_string();
    has(
        &e,
        "deadlock: process `a` waits on channel `d`, process `b` waits on channel `c`",
    );
    let x = expand(&m, &Bindings::new(), &pto_wsp_ir::ExpandOptions::default());
    assert_eq!(
        x.unwrap_err().to_string(),
        e,
        "the same message as the expander"
    );
}

const PLACED: &str = "symbol n: i64;
symbol m: i64;
symbol d: i64;
slot s: i64;
tensor X: f32[8, 4];
tensor T: i64[4];
axis I = dense_dyn(n);
kernel k(inout x: f32[1, 4]);
workload main() {
    for_each i in I {
        task k(X[i * m, 0 +: 4]);
    }
    set s = 8 / d;
    load s = T[m];
}
";

/// `file:line:column` of the first occurrence of `stmt` in [`PLACED`], counted here.
fn placed_at(stmt: &str) -> String {
    let at = PLACED.find(stmt).expect("in the source");
    let line = PLACED[..at].matches('\n').count() + 1;
    let col = at - PLACED[..at].rfind('\n').map_or(0, |i| i + 1) + 1;
    format!("main.wsp:{line}:{col}")
}

/// Runs [`PLACED`] under `n`, `m`, `d` on every executor and renders the error.
fn placed_err(n: i64, m: i64, d: i64) -> String {
    let module = parse(PLACED).unwrap();
    let bytes = encode(&module, &EncodeOptions::default()).expect("encodes");
    let p = Program::decode(&bytes).expect("decodes");
    let b = Bindings::new()
        .symbol("n", n)
        .symbol("m", m)
        .symbol("d", d)
        .array("T", vec![1, 2, 3, 4]);
    let bound = p.bind(&b).unwrap_or_else(|e| panic!("{e}"));
    let mut i = Interpreter::new(&p, &bound, ExecutorConfig::all()).unwrap();
    let e = i.run(&mut |_: &Task<'_>| {}).expect_err("fails");
    pto_wsp_ir::SourceFile::new("main.wsp", PLACED).render(&e)
}

/// Run-time errors of the interpreter (device generation's generator) name the statement that
/// failed at its `file:line:column`, from the bytecode's statement-location table.
#[test]
fn interpreter_errors_name_their_statement() {
    let cases = [
        (
            (8, 2, 1),
            "task #4 (`k`): region argument 0 of `X` is out of bounds in dimension 0: start 8, size 1, extent 8",
            "task k(X[i * m",
        ),
        (
            (-1, 1, 1),
            "the extent of axis `I` is negative (-1)",
            "for_each i in I",
        ),
        ((2, 1, 0), "division by zero", "set s = 8 / d"),
        (
            (2, 5, 1),
            "load from `T`: index 5 is out of bounds in dimension 0 (extent 4)",
            "load s = T[m]",
        ),
    ];
    for ((n, m, d), message, stmt) in cases {
        let rendered = placed_err(n, m, d);
        let first = rendered.lines().next().unwrap();
        assert!(
            first.starts_with("error: ") && first.contains(message),
            "{rendered}"
        );
        assert!(
            rendered.contains(&format!("--> {}\n", placed_at(stmt))),
            "{stmt}: {rendered}"
        );
    }
}
