//! Flat operator chains of 100,000 terms through the facade, each on a thread with the default
//! 2 MiB stack: a kernel body's integer local (validated, resolved, run on the CPU, emitted as
//! PTO-ISA and Ascend C++), a workload condition (run, emitted into the Ascend orchestration)
//! and a plan generator's descriptor field (run as descriptor launches). Every value is checked
//! against a plain loop in the test.

use pto_wsp::ir::{Bindings, SourceFile, parse};
use pto_wsp::kernels::{KernelRegistry, TensorStore};
use pto_wsp::plan::{PlanOptions, run_plans};
use pto_wsp::{Artefact, CompileOptions, Output, compile, compile_target, lower};

/// Terms of every chain here.
const LONG: usize = 100_000;

/// Runs `f` on a thread with a 2 MiB stack (what a spawned thread gets by default).
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

/// A chain `c0 ± c1 ± …` of `n` small literals whose running sum stays in `0..=20` (a fixed
/// sequence), with its value by a plain loop.
fn walk(n: usize, seed: u64) -> (String, i64) {
    let mut s = seed;
    let mut text = String::with_capacity(n * 4);
    let mut sum = 0i64;
    for k in 0..n {
        s = s
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let c = (s >> 33) as i64 % 5 + 1;
        if k == 0 {
            text.push_str(&c.to_string());
            sum = c;
        } else if sum - c >= 0 && (sum + c > 20 || (s >> 40).is_multiple_of(2)) {
            text.push_str(&format!(" - {c}"));
            sum -= c;
        } else {
            text.push_str(&format!(" + {c}"));
            sum += c;
        }
    }
    (text, sum)
}

/// `i`-dependent chain: `walk`'s chain plus `i * 3 - i * 3 + … - i * 4`, i.e. the walk's value
/// minus `i`, written with `LONG` more terms.
fn over_i(seed: u64) -> (String, i64) {
    let (text, sum) = walk(LONG, seed);
    let mut t = text;
    for _ in 0..LONG / 2 {
        t.push_str(" + i * 3 - i * 3");
    }
    t.push_str(" - i");
    (t, sum)
}

fn module_text(kernel_chain: &str, cond_chain: &str) -> String {
    format!(
        "tensor X: f32[8, 64];\ntensor Y: f32[8, 64];\naxis I = dense(4);\n\
         kernel add_n(in x: f32[2, 64], out y: f32[2, 64]) @vector {{\n\
         \x20   tile t: vec f32[2, 64];\n\
         \x20   let n: i64 = {kernel_chain};\n\
         \x20   TLOAD(t, x);\n\
         \x20   for j in range(n) {{\n        TADDS(t, t, 1.0);\n    }}\n\
         \x20   TSTORE(y, t);\n}}\n\
         workload main() {{\n    parallel_for i in I {{\n        if {cond_chain} > 0 {{\n\
         \x20           task add_n(X[i * 2 +: 2, 0 +: 64], Y[i * 2 +: 2, 0 +: 64]);\n\
         \x20       }}\n    }}\n}}\n"
    )
}

#[test]
fn a_kernel_body_and_a_workload_condition_of_100000_terms_run_and_emit() {
    let (kchain, n) = walk(LONG, 3);
    let (cchain, c) = over_i(5);
    let text = module_text(&kchain, &cchain);
    let (x, y, trees) = on_small_stack(move || {
        let module = parse(&text).unwrap_or_else(|e| panic!("{e}"));
        let back = parse(&module.to_string()).unwrap();
        assert!(
            back == module,
            "the printed module parses back to another module"
        );
        let mut kernels = KernelRegistry::with_builtins();
        pto_wsp::kernels::lang::register_bodies(&module, &mut kernels);
        let plan = lower(&module).unwrap_or_else(|e| panic!("{e}"));
        let mut program = compile(
            plan,
            CompileOptions {
                kernels,
                ..CompileOptions::default()
            },
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let b = Bindings::new();
        let x: Vec<f32> = (0..512).map(|k| (k % 7) as f32 * 0.25 - 0.5).collect();
        {
            let mut tensors = program.tensors(&b).unwrap();
            let store = tensors.as_mut().unwrap();
            store.write("X", &x).unwrap();
            store.write("Y", &vec![0f32; 512]).unwrap();
        }
        program.execute(&b).unwrap_or_else(|e| panic!("{e}"));
        let y: Vec<f32> = program
            .tensors(&b)
            .unwrap()
            .as_ref()
            .unwrap()
            .read("Y")
            .unwrap();
        let plan = lower(&module)
            .unwrap()
            .with_source(SourceFile::new("long.wsp", text.clone()));
        let mut trees = Vec::new();
        for target in ["pto_isa", "ascend_a2a3sim"] {
            let options = CompileOptions {
                target: target.into(),
                ..CompileOptions::default()
            };
            match compile_target(&plan, &options).unwrap_or_else(|e| panic!("{target}: {e}")) {
                Output::Artefact(Artefact::Tree(files)) => trees.push(files),
                _ => panic!("{target}: an emitter gives a tree"),
            }
        }
        (x, y, trees)
    });
    // Row pair i ran iff c - i > 0, adding 1.0 n times in f32.
    for i in 0..4usize {
        for k in i * 128..(i + 1) * 128 {
            let want = if c - i as i64 > 0 {
                let mut v = x[k];
                for _ in 0..n {
                    v += 1.0;
                }
                v
            } else {
                0.0
            };
            assert_eq!(y[k], want, "element {k} (row pair {i}, n = {n}, c = {c})");
        }
    }
    let file = |files: &[(std::path::PathBuf, Vec<u8>)], name: &str| {
        let (_, bytes) = files
            .iter()
            .find(|(p, _)| p.ends_with(name))
            .unwrap_or_else(|| panic!("no {name}"));
        String::from_utf8(bytes.clone()).unwrap()
    };
    // The kernel's chain is written flat (one pair of parentheses), the orchestration's as a
    // statement list: neither nests a C++ compiler's parser deeper than a few levels.
    for files in &trees {
        let k = file(files, "add_n.hpp");
        assert!(
            k.contains(" - int64_t{") && k.len() > LONG * 10,
            "{}",
            &k[..500]
        );
        let deepest = k.lines().map(paren_depth).max().unwrap();
        assert!(deepest < 16, "add_n.hpp nests {deepest} parentheses");
    }
    let orch = file(&trees[1], "orchestration.cpp");
    assert!(orch.contains("[&]() -> int64_t {"), "{}", &orch[..500]);
    let deepest = orch.lines().map(paren_depth).max().unwrap();
    assert!(
        deepest < 16,
        "orchestration.cpp nests {deepest} parentheses"
    );
}

/// The deepest nesting of parentheses in `line`.
fn paren_depth(line: &str) -> usize {
    let (mut d, mut max) = (0usize, 0usize);
    for ch in line.chars() {
        match ch {
            '(' => {
                d += 1;
                max = max.max(d);
            }
            ')' => d = d.saturating_sub(1),
            _ => {}
        }
    }
    max
}

#[test]
fn a_plan_generator_field_of_100000_terms_places_its_descriptor() {
    let (chain, v) = walk(LONG, 9);
    let text = format!(
        "tensor Y: f32[64];\n\
         kernel fill(out y: f32[1], value: f64) @vector;\n\
         space S {{\n    axis r from 0 to 4;\n}}\n\
         tiers T {{\n    tier all default;\n}}\n\
         plan p over S with T {{\n    fields at;\n\
         \x20   kernel all => fill(Y[at +: 1], 2.5);\n\
         \x20   generate {{\n        for i in r {{\n\
         \x20           emit(tier = 0, r = i, at = {chain} + i * 10);\n        }}\n    }}\n}}\n"
    );
    let y = on_small_stack(move || {
        let module = parse(&text).unwrap_or_else(|e| panic!("{e}"));
        pto_wsp::ir::validate(&module).unwrap_or_else(|e| panic!("{e:?}"));
        let back = parse(&module.to_string()).unwrap();
        assert!(back == module);
        let b = Bindings::new();
        let mut store = TensorStore::new(&module, &b).unwrap();
        run_plans(
            &module,
            &b,
            &mut store,
            &KernelRegistry::with_builtins(),
            PlanOptions::default(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        store.read::<f32>("Y").unwrap()
    });
    let mut want = vec![0f32; 64];
    for i in 0..4 {
        want[(v + i * 10) as usize] = 2.5;
    }
    assert_eq!(y, want, "v = {v}");
}
