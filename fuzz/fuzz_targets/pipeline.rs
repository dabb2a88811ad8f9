//! Fuzz target for the whole pipeline on generated modules: the bytes choose a small module
//! (bounded loops, ifs, calls, tasks of built-in kernels on overlapping slices of two tensors,
//! a schedule); it is printed, parsed, validated, expanded by the reference expander, encoded
//! as bytecode, decoded and interpreted on two executors (every task generated exactly once,
//! the expander's count), then run on the CPU with debug checks (`run --check`) on the host
//! path and in device generation. Nothing may panic, and where both runs succeed their tensors
//! must be equal byte for byte.

#![no_main]

use libfuzzer_sys::fuzz_target;
use pto_wsp::bytecode::{EncodeOptions, ExecutorConfig, Interpreter, Program, Task, encode};
use pto_wsp::ir::{Bindings, ExpandOptions, expand, parse, validate};
use pto_wsp::kernels::KernelRegistry;
use pto_wsp::{CompileOptions, compile, lower};

/// Reads choices from the fuzzer's bytes (zeros once they run out).
struct Choices<'a>(&'a [u8]);

impl Choices<'_> {
    fn pick(&mut self, n: u8) -> u8 {
        let (b, rest) = self.0.split_first().map_or((0, &[][..]), |(b, r)| (*b, r));
        self.0 = rest;
        b % n
    }
}

/// A region of `A` or `B` (both `f32[4, 64]`): a row and a slice of `w` columns, offsets drawn
/// from the enclosing loop variables so that tasks overlap in many ways.
fn region(c: &mut Choices<'_>, vars: &[String], w: u32) -> String {
    let t = if c.pick(2) == 0 { "A" } else { "B" };
    let v = |c: &mut Choices<'_>| -> String {
        if vars.is_empty() {
            c.pick(4).to_string()
        } else {
            vars[c.pick(vars.len() as u8) as usize].clone()
        }
    };
    let row = format!("({} + {}) % 4", v(c), c.pick(4));
    let col = format!("({} * {} + {}) % {}", v(c), c.pick(9), c.pick(16), 65 - w);
    format!("{t}[{row}, {col} +: {w}]")
}

/// Statements of one body, at most `budget` of them, nested at most `depth` deep.
fn body(c: &mut Choices<'_>, vars: &mut Vec<String>, depth: u32, callees: &[String], out: &mut String) {
    let n = 1 + c.pick(3);
    for _ in 0..n {
        match c.pick(if depth == 0 { 2 } else { 6 }) {
            0 | 1 => {
                let w = [1u32, 4, 8, 16][c.pick(4) as usize];
                match c.pick(3) {
                    0 => out.push_str(&format!("task inc({});\n", region(c, vars, w))),
                    1 => out.push_str(&format!(
                        "task acc({}, {});\n",
                        region(c, vars, w),
                        region(c, vars, w)
                    )),
                    _ => out.push_str(&format!(
                        "task cp({}, {});\n",
                        region(c, vars, w),
                        region(c, vars, w)
                    )),
                }
            }
            2 | 3 => {
                let var = format!("v{}", vars.len());
                let kind = if c.pick(2) == 0 { "parallel_for" } else { "for_each" };
                let axis = ["I", "J"][c.pick(2) as usize];
                out.push_str(&format!("{kind} {var} in {axis} {{\n"));
                vars.push(var);
                body(c, vars, depth - 1, callees, out);
                vars.pop();
                out.push_str("}\n");
            }
            4 => {
                let cond = match vars.last() {
                    Some(v) => format!("{v} % 2 == {}", c.pick(2)),
                    None => "true".to_string(),
                };
                out.push_str(&format!("if {cond} {{\n"));
                body(c, vars, depth - 1, callees, out);
                out.push_str("} else {\n");
                body(c, vars, depth - 1, callees, out);
                out.push_str("}\n");
            }
            _ => {
                if let Some(w) = callees.get(c.pick(callees.len().max(1) as u8) as usize) {
                    out.push_str(&format!("call {w}();\n"));
                }
            }
        }
    }
}

fn module_text(c: &mut Choices<'_>) -> String {
    let mut s = format!(
        "tensor A: f32[4, 64];\ntensor B: f32[4, 64];\naxis I = dense({});\naxis J = dense({});\n\
         kernel inc(inout a: f32[1, ?]);\nkernel acc(in x: f32[1, ?], inout y: f32[1, ?]);\n\
         kernel cp(in x: f32[1, ?], out y: f32[1, ?]);\n",
        1 + c.pick(3),
        1 + c.pick(4)
    );
    // Workloads w2, w1, main: each may call the ones declared before it (no cycles).
    let mut callees: Vec<String> = Vec::new();
    for name in ["w2", "w1", "main"] {
        let mut b = String::new();
        body(c, &mut Vec::new(), 3, &callees, &mut b);
        s.push_str(&format!("workload {name}() {{\n{b}}}\n"));
        callees.push(name.to_string());
    }
    let deps = ["exact", "overlap", "hybrid"][c.pick(3) as usize];
    let ready = ["fifo", "work_steal", "priority(0)"][c.pick(3) as usize];
    s.push_str(&format!(
        "schedule for main {{\n    executors {};\n    task_window {} stall;\n    task_graph {{ deps {deps}; ready {ready}; }}\n}}\n",
        1 + c.pick(4),
        1 + c.pick(64)
    ));
    s
}

fuzz_target!(|data: &[u8]| {
    let text = module_text(&mut Choices(data));
    let module = match parse(&text) {
        Ok(m) => m,
        Err(e) => panic!("a generated module does not parse: {e}\n{text}"),
    };
    if validate(&module).is_err() {
        return;
    }
    let bindings = Bindings::new();
    let options = ExpandOptions {
        limit: Some(4_000),
        executors: None,
    };
    let Ok(x) = expand(&module, &bindings, &options) else {
        return;
    };
    if x.truncated {
        return;
    }

    // Bytecode: every task generated once over two executors, as many as the expander's.
    if let Ok(bytes) = encode(&module, &EncodeOptions::default()) {
        let prog = Program::decode(&bytes).expect("encoded bytecode decodes");
        let bound = prog.bind(&bindings).expect("binds like the expander");
        let mut n = 0usize;
        for me in 0..2 {
            let config = ExecutorConfig {
                executor: Some(me),
                executors: Some(2),
                max_steps: Some(1_000_000),
            };
            let mut interp = Interpreter::new(&prog, &bound, config).expect("interpreter");
            interp
                .run(&mut |_t: &Task<'_>| {
                    n += 1;
                })
                .expect("interprets like the expander");
        }
        assert_eq!(n, x.tasks.len(), "bytecode tasks against the expander's\n{text}");
    }

    // Runs: host and device generation, with debug checks; equal tensors where both succeed.
    let mut registry = KernelRegistry::with_builtins();
    for (k, builtin) in [("inc", "counter"), ("acc", "accumulate"), ("cp", "copy")] {
        registry.alias(k, builtin).expect("a built-in");
    }
    let mut results = Vec::new();
    for device_gen in [false, true] {
        let Ok(plan) = lower(&module) else { return };
        let compiled = compile(
            plan,
            CompileOptions {
                threads: 2,
                debug_checks: true,
                kernels: registry.clone(),
                device_gen,
                ..CompileOptions::default()
            },
        );
        let Ok(mut p) = compiled else {
            results.push(None);
            continue;
        };
        if let Ok(mut g) = p.tensors(&bindings)
            && let Some(s) = g.as_mut()
        {
            s.fill_random(7);
        }
        let tensors = p.execute(&bindings).ok().and_then(|_| {
            let g = p.tensors(&bindings).ok()?;
            let s = g.as_ref()?;
            Some((0..s.len() as u32).map(|t| s.bytes(t).to_vec()).collect::<Vec<_>>())
        });
        results.push(tensors);
    }
    if let [Some(host), Some(dev)] = &results[..] {
        assert!(host == dev, "host and device generation differ\n{text}");
    }
});
