//! Fuzz target for plans (Plan-Descriptor-Execute in the text format): the fuzzer's bytes choose
//! a small module of one or two plans over a space of rows and tiled columns of tiny tensors
//! (tile sizes, `pad_last`, a `dynamic` end bound by the plan, tiers with and without
//! workspace, `order` / `affinity`, generators with nested `for`, `if` / `else`, `continue`,
//! `load`, `select_tier`, `alloc` and `emit` whose fields may fall out of range), and the
//! bindings (row count, workspace size, the row lengths). The module is printed, parsed,
//! checked, and run on one and on two dispatch threads. Nothing may panic; every error must
//! render at its place; each run's per-thread counts must add up to its descriptors.

#![no_main]

#[path = "common/modules.rs"]
#[allow(dead_code)] // only its `Choices`
mod modules;

use libfuzzer_sys::fuzz_target;
use modules::Choices;
use pto_wsp::ir::{Bindings, SourceFile, parse, validate};
use pto_wsp::kernels::{KernelRegistry, TensorStore};
use pto_wsp::plan::{PlanOptions, run_plans};

/// A small integer expression over the generator's variables in scope.
fn expr(c: &mut Choices<'_>, vars: &[&str]) -> String {
    let v = vars[c.pick(vars.len() as u8) as usize];
    match c.pick(5) {
        0 => c.pick(20).to_string(),
        1 => v.to_string(),
        2 => format!("{v} + {}", c.pick(3)),
        3 => format!("{v} - {}", c.pick(2)),
        _ => format!("min({v}, {})", c.pick(64)),
    }
}

/// The statements inside the column loop (variables `i`, `len`, `t`, `j`, `lo`, `hi`).
fn inner(c: &mut Choices<'_>, depth: u32, w: u32, out: &mut String) {
    let vars = ["i", "len", "j", "lo", "hi"];
    for _ in 0..1 + c.pick(3) {
        match c.pick(if depth == 0 { 3 } else { 5 }) {
            0 => {
                let tier = if c.pick(3) == 0 { expr(c, &["t", "j"]) } else { "t".into() };
                let ws = if c.pick(4) == 0 { expr(c, &vars) } else { "ws".into() };
                let r = if c.pick(8) == 0 { "i + 1" } else { "i" };
                out.push_str(&format!(
                    "emit(tier = {tier}, r = {r}, c = j, start = {}, end = min(hi, len), workspace = {ws});\n",
                    if c.pick(8) == 0 { format!("lo + {}", c.pick(w as u8 + 1)) } else { "lo".into() }
                ));
            }
            1 => out.push_str(&format!("if {} >= {} {{\ncontinue;\n}}\n", expr(c, &vars), expr(c, &vars))),
            2 => out.push_str(&format!("let x{depth} = {};\n", expr(c, &vars))),
            _ => {
                out.push_str(&format!("if {} < {} {{\n", expr(c, &vars), expr(c, &vars)));
                inner(c, depth - 1, w, out);
                out.push_str("} else {\n");
                inner(c, depth - 1, w, out);
                out.push_str("}\n");
            }
        }
    }
}

fn plan(c: &mut Choices<'_>, name: &str, w: u32, dynamic: bool, out: &mut String) {
    out.push_str(&format!("plan {name} over S with T {{\n    workspace W;\n"));
    if dynamic {
        out.push_str(&format!("    bind end(c) = {};\n", 16 * (1 + c.pick(4))));
    }
    out.push_str(&format!(
        "    kernel small => k_a(X[r, start +: {w}], W[workspace +: {w}]);\n    \
         kernel big => k_b(X[r, start +: {w}], W[workspace +: {w}]);\n"
    ));
    match c.pick(4) {
        0 => out.push_str(&format!("    order(c, interleaved({}));\n", 1 + c.pick(3))),
        1 => out.push_str("    order(r, parallel);\n"),
        _ => {}
    }
    match c.pick(4) {
        0 => out.push_str("    affinity(r, spread);\n"),
        1 => out.push_str(&format!("    affinity(c, core_group({}));\n", 1 + c.pick(2))),
        _ => {}
    }
    out.push_str("    generate {\n        for i in r {\n            load len = lens[i];\n");
    out.push_str(if c.pick(3) == 0 {
        "            let t = 0;\n"
    } else {
        "            let t = select_tier(T, len);\n"
    });
    out.push_str("            for j, lo, hi in c {\n");
    if c.pick(2) == 0 {
        out.push_str("                if lo >= len {\n                    continue;\n                }\n");
    }
    out.push_str("                let ws = alloc(t, i, j);\n");
    let mut body = String::new();
    inner(c, 2, w, &mut body);
    out.push_str(&body);
    out.push_str("            }\n        }\n    }\n}\n");
}

fn module_text(c: &mut Choices<'_>) -> (String, Vec<String>) {
    let w = [4u32, 8, 16][c.pick(3) as usize];
    let dynamic = c.pick(4) == 0;
    let end = if dynamic { "dynamic" } else { "64" };
    let pad = if c.pick(4) == 0 { ", pad_last" } else { "" };
    let (ws_small, ws_big) = (c.pick(3) as u32 * w, c.pick(3) as u32 * w);
    let ws = |n: u32| if n == 0 { String::new() } else { format!(" workspace {n}") };
    let mut s = format!(
        "//@ alias k_a=copy\n//@ alias k_b=copy\nsymbol n: i64;\nsymbol cap: i64;\n\
         tensor lens: i32[n];\ntensor X: f32[n, 64];\ntensor W: f32[cap];\n\
         kernel k_a(in x: f32[?, ?], out y: f32[?]);\nkernel k_b(in x: f32[?, ?], out y: f32[?]);\n\
         space S {{\n    axis r from 0 to n;\n    axis c from 0 to {end};\n    tile(c, {w}{pad});\n}}\n\
         tiers T {{\n    tier small <= {}{};\n    tier big default{};\n}}\n",
        1 + c.pick(40),
        ws(ws_small),
        ws(ws_big)
    );
    plan(c, "p", w, dynamic, &mut s);
    if c.pick(3) == 0 {
        plan(c, "q", w, dynamic, &mut s);
    }
    let n = 1 + c.pick(4);
    let lens: Vec<String> = (0..n).map(|_| c.pick(80).to_string()).collect();
    let binds = vec![
        format!("n={n}"),
        format!("cap={}", [0u32, 16, 64, 256][c.pick(4) as usize]),
        format!("lens=[{}]", lens.join(", ")),
    ];
    (s, binds)
}

fuzz_target!(|data: &[u8]| {
    let (text, binds) = module_text(&mut Choices(data));
    let module = match parse(&text) {
        Ok(m) => m,
        Err(e) => panic!("a generated module does not parse: {e}\n{text}"),
    };
    // The printed form parses to the same module.
    assert_eq!(parse(&module.to_string()).ok().as_ref(), Some(&module), "{text}");
    let source = SourceFile::new("plan.wsp", text.as_str());
    if let Err(errors) = validate(&module) {
        for e in &errors {
            let _ = source.render(e);
        }
        return;
    }
    let mut bindings = Bindings::new();
    for b in &binds {
        if bindings.bind_str(&module, b).is_err() {
            return;
        }
    }
    let mut registry = KernelRegistry::with_builtins();
    registry.alias("k_a", "copy").expect("a built-in");
    registry.alias("k_b", "copy").expect("a built-in");
    let Ok(mut input) = TensorStore::new(&module, &bindings) else {
        return;
    };
    input.fill_random(7);
    for threads in [1, 2] {
        let mut store = input.clone();
        let opts = PlanOptions {
            dispatch_threads: threads,
            queue_capacity: 4,
            ..PlanOptions::default()
        };
        match run_plans(&module, &bindings, &mut store, &registry, opts) {
            Ok(stats) => {
                for s in &stats {
                    assert_eq!(s.launch.per_thread.iter().sum::<u64>(), s.launch.descriptors);
                }
            }
            Err(e) => {
                let _ = source.render(&e);
            }
        }
    }
});
