//! Generates the LLaMA-7B layer's tasks (`seq` from the first argument, default 16384) a number
//! of times (second argument, default 20) with a counting sink: `interp` (one interpreter, every
//! task), `exec` (executor 0 of 24) or `expand` (the reference expander) by the third argument.
//! For profiling (`perf stat` / `perf record`); the benchmark is `benches/generate.rs`.

use pto_wsp_bytecode::{EncodeOptions, ExecutorConfig, Interpreter, Program, Task, encode};
use pto_wsp_ir::{Bindings, ExpandOptions, expand_each, parse};
use std::hint::black_box;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let seq: i64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(16384);
    let reps: u32 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20);
    let mode = args.get(3).map_or("interp", String::as_str);
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/llama7b_layer.wsp"
    );
    let text = std::fs::read_to_string(path).expect("example");
    let module =
        pto_wsp_ir::resolve(&parse(&text).expect("parses"), &Default::default()).expect("resolves");
    let bytes = encode(&module, &EncodeOptions::default()).expect("encodes");
    let prog = Program::decode(&bytes).expect("decodes");
    let bindings = Bindings::new().symbol("seq", seq);
    let bound = prog.bind(&bindings).expect("binds");
    let mut n = 0u64;
    let start = std::time::Instant::now();
    for _ in 0..reps {
        match mode {
            "expand" => {
                expand_each(&module, &bindings, &ExpandOptions::default(), |_, t| {
                    n += u64::from(t.kernel) + 1;
                })
                .expect("expands");
            }
            other => {
                let config = if other == "exec" {
                    ExecutorConfig::executor(0)
                } else {
                    ExecutorConfig::all()
                };
                let mut i = Interpreter::new(&prog, &bound, config).expect("new");
                let s = i
                    .run(&mut |t: &Task<'_>| {
                        n += u64::from(t.kernel) + 1;
                        black_box(t);
                    })
                    .expect("runs");
                black_box(s);
            }
        }
    }
    eprintln!("{mode}: {n} in {:?}", start.elapsed());
}
