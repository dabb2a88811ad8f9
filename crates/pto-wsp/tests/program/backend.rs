//! The back-end interface: a new target plugs in from outside the facade (this file), the
//! registry finds it by name, refuses clashes and lists what it knows, and `supports` names the
//! first construct a back end cannot handle with its `file:line:column`.

use std::sync::Arc;

use pto_wsp::ir::resolve::StmtKind;
use pto_wsp::ir::{Resolved, SourceFile, Unsupported, expand, parse};
use pto_wsp::{
    Artefact, Backend, Capability, CompileError, CompileOptions, LoweredPlan, Output,
    compile_target, get_backend, lower, register_backend,
};

use super::{example, recording, resolved};

fn text(name: &str) -> String {
    let path = format!("{}/../../examples/{name}.wsp", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(path).unwrap()
}

/// A toy emitting target: one line per task statement of the resolved entry (its kernel's
/// name), in program order. It cannot run pipelines.
struct Toy;

impl Backend for Toy {
    fn name(&self) -> &str {
        "toy"
    }

    fn targets(&self) -> Vec<String> {
        vec!["toy_listing".into()]
    }

    fn capabilities(&self) -> Vec<Capability> {
        vec![Capability::Emit]
    }

    fn supports(&self, module: &Resolved) -> Result<(), Unsupported> {
        match module.processes.first() {
            Some(p) if module.csp => Err(Unsupported {
                backend: "toy".into(),
                construct: format!("pipeline process `{}`", p.name),
                loc: p.loc,
            }),
            _ => Ok(()),
        }
    }

    fn compile(
        &self,
        plan: &LoweredPlan,
        _options: &CompileOptions,
    ) -> Result<Output, CompileError> {
        let r = plan.resolved();
        let mut listing = String::new();
        r.each_stmt(&mut |s| {
            if let StmtKind::Task(t) = &s.kind {
                listing.push_str(&r.module.kernels[t.kernel.index()].name.name);
                listing.push('\n');
            }
        });
        Ok(Output::Artefact(Artefact::Bytes(listing.into_bytes())))
    }
}

#[test]
fn a_backend_registered_from_a_test_file_compiles_through_the_registry() {
    register_backend(Arc::new(Toy)).unwrap();
    let toy = get_backend("toy_listing").expect("found by target");
    assert_eq!(toy.name(), "toy");
    assert!(get_backend("toy").is_some(), "found by name");

    // The listing against the task statements read straight from the text (no calls in it).
    for name in ["gemm", "llama7b_layer", "moe"] {
        let src = text(name);
        let plan = lower(&parse(&src).unwrap()).unwrap();
        let options = CompileOptions {
            target: "toy_listing".into(),
            ..CompileOptions::default()
        };
        let Output::Artefact(Artefact::Bytes(bytes)) = compile_target(&plan, &options).unwrap()
        else {
            panic!("the toy emits bytes");
        };
        let want: String = src
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .flat_map(|l| l.split("task ").skip(1))
            .map(|rest| format!("{}\n", &rest[..rest.find('(').unwrap()]))
            .collect();
        assert_eq!(String::from_utf8(bytes).unwrap(), want, "{name}");
    }

    // A pipeline: the toy's `supports` names the construct and where it is.
    let src = text("csp_pipeline");
    let plan = lower(&parse(&src).unwrap()).unwrap();
    let options = CompileOptions {
        target: "toy".into(),
        ..CompileOptions::default()
    };
    let Err(CompileError::Unsupported(u)) = compile_target(&plan, &options) else {
        panic!("a pipeline is not supported by the toy");
    };
    assert!(u.to_string().contains("process `"), "{u}");
    let line = 1 + src
        .lines()
        .position(|l| l.trim_start().starts_with("process "))
        .unwrap();
    let at = SourceFile::new("csp_pipeline.wsp", src.as_str()).position(u.loc);
    assert!(at.starts_with(&format!("csp_pipeline.wsp:{line}:")), "{at}");

    // A second registration of the same name or target is refused, naming the owner.
    let e = register_backend(Arc::new(Toy)).unwrap_err();
    assert!(
        e.to_string().contains("already served by back end `toy`"),
        "{e}"
    );
}

#[test]
fn unknown_targets_list_the_known_ones() {
    let plan = lower(&example("gemm").0).unwrap();
    let options = CompileOptions {
        target: "nope".into(),
        ..CompileOptions::default()
    };
    let e = compile_target(&plan, &options).unwrap_err().to_string();
    assert!(e.contains("unknown target `nope`"), "{e}");
    assert!(e.contains("cpu_sim") && e.contains("bytecode"), "{e}");
    // An emitting target is not a runnable program.
    let options = CompileOptions {
        target: "bytecode".into(),
        ..CompileOptions::default()
    };
    assert!(matches!(
        pto_wsp::compile(plan, options),
        Err(CompileError::NotRunnable { .. })
    ));
}

#[test]
fn unsupported_construct_is_named_with_file_line_column() {
    // A u64 token: valid (the validator accepts integer tokens) but not expressible in bytecode.
    let src = "kernel k(x: i64);\n\
               pipeline p {\n\
               \x20 channel c[1];\n\
               \x20 process a(produces c) {\n\
               \x20   send c(7u);\n\
               \x20 }\n\
               \x20 process b(consumes c) { consume c as v { task k(v); } }\n\
               }\n";
    let plan = lower(&parse(src).unwrap()).unwrap();
    let bytecode = get_backend("bytecode").unwrap();
    let u = bytecode.supports(plan.resolved()).unwrap_err();
    assert!(u.to_string().contains("`send c`"), "{u}");
    assert!(u.to_string().contains("u64"), "{u}");
    // Where it is, found independently: line 5, the column of `send`.
    let col = 1 + src.lines().nth(4).unwrap().find("send").unwrap();
    let at = SourceFile::new("pipe.wsp", src).position(u.loc);
    assert_eq!(at, format!("pipe.wsp:5:{col}"));
    // `compile_target` refuses it the same way; cpu_sim runs it.
    let options = CompileOptions {
        target: "bytecode".into(),
        ..CompileOptions::default()
    };
    assert!(matches!(
        compile_target(&plan, &options),
        Err(CompileError::Unsupported(Unsupported { loc, .. })) if loc.is_known()
    ));
    assert!(
        get_backend("cpu_sim")
            .unwrap()
            .supports(plan.resolved())
            .is_ok()
    );
}

#[test]
fn bytecode_artefact_generates_the_expanders_tasks() {
    let (module, bindings) = example("gemm");
    let plan = lower(&module).unwrap();
    let options = CompileOptions {
        target: "bytecode".into(),
        ..CompileOptions::default()
    };
    let Output::Artefact(Artefact::Bytes(bytes)) = compile_target(&plan, &options).unwrap() else {
        panic!("bytecode is bytes");
    };
    let prog = pto_wsp::bytecode::Program::decode(&bytes).unwrap();
    let bound = prog.bind(&bindings).unwrap();
    let mut n = 0u64;
    let mut i = pto_wsp::bytecode::Interpreter::new(
        &prog,
        &bound,
        pto_wsp::bytecode::ExecutorConfig::all(),
    )
    .unwrap();
    i.run(&mut |_: &pto_wsp::bytecode::Task<'_>| n += 1)
        .unwrap();
    let want = expand(&resolved(&module), &bindings, &Default::default()).unwrap();
    assert_eq!(n, want.tasks.len() as u64);
}

#[test]
fn compile_options_override_streams_and_executors() {
    let (module, bindings) = example("gemm");
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let options = CompileOptions {
        threads: 2,
        num_streams: Some(3),
        num_aicpus: Some(5),
        kernels: recording(&module, &log),
        ..CompileOptions::default()
    };
    let mut p = pto_wsp::compile(lower(&module).unwrap(), options).unwrap();
    assert_eq!(
        (p.plan().config().streams, p.plan().config().executors),
        (3, 5)
    );
    // The expander of the overridden plan assigns streams and targets in those ranges.
    let e = expand(p.plan().resolved(), &bindings, &Default::default()).unwrap();
    assert_eq!(e.tasks.iter().map(|t| t.stream).max(), Some(2));
    assert!(e.tasks.iter().all(|t| t.target.is_some_and(|x| x < 5)));
    p.execute(&bindings).unwrap();
    let s = p.program_stats().unwrap();
    assert_eq!((s.num_streams, s.num_executors), (3, 2));
    assert_eq!(s.num_tasks, s.run.tasks);
    assert_eq!(log.lock().unwrap().len(), e.tasks.len());
}

/// An executor count given at compile time means what `executors N;` written last in the
/// schedule means: without a `dispatch` item the default round robin ranges over it, in the
/// expander and in the bytecode; with one, the written policy stays. The reference is the same
/// module with the item written.
#[test]
fn an_executor_override_means_the_written_item() {
    let body = "axis I = dense(12);\n\
                kernel k(a: i64);\n\
                workload main() { parallel_for i in I { task k(i); } }\n";
    for (schedule, written) in [
        ("", "schedule for main { executors 5; }\n"),
        (
            "schedule for main { executors 2; }\n",
            "schedule for main { executors 5; }\n",
        ),
        (
            "schedule for main { dispatch round_robin(3); }\n",
            "schedule for main { dispatch round_robin(3); executors 5; }\n",
        ),
    ] {
        let module = parse(&format!("{body}{schedule}")).unwrap();
        let options = CompileOptions {
            num_aicpus: Some(5),
            kernels: recording(&module, &Arc::new(std::sync::Mutex::new(Vec::new()))),
            ..CompileOptions::default()
        };
        let p = pto_wsp::compile(lower(&module).unwrap(), options).unwrap();
        let want = lower(&parse(&format!("{body}{written}")).unwrap()).unwrap();
        let targets = |r: &Resolved| -> Vec<Option<u32>> {
            let x = expand(r, &Default::default(), &Default::default()).unwrap();
            x.tasks.iter().map(|t| t.target).collect()
        };
        assert_eq!(
            targets(p.plan().resolved()),
            targets(want.resolved()),
            "{schedule}"
        );
        assert_eq!(
            p.plan().config().dispatch,
            want.config().dispatch,
            "{schedule}"
        );
        let bytes = |r: &Resolved| pto_wsp::bytecode::encode(r, &Default::default()).unwrap();
        assert_eq!(
            bytes(p.plan().resolved()),
            bytes(want.resolved()),
            "{schedule}"
        );
    }
}

#[test]
fn ragged_lengths_by_expression_are_refused_by_bytecode_with_their_place() {
    let src = "symbol n: i64;\n\
               tensor L: i32[n];\n\
               axis R = ragged(n, L, (L + 511) / 512);\n\
               kernel k(a: i64);\n\
               workload main() { parallel_for r, p in R { task k(p); } }\n";
    let plan = lower(&parse(src).unwrap()).unwrap();
    let u = get_backend("bytecode")
        .unwrap()
        .supports(plan.resolved())
        .unwrap_err();
    assert!(u.to_string().contains("ragged axis `R`"), "{u}");
    // The axis's name in its declaration: line 3, found independently.
    let col = 1 + src.lines().nth(2).unwrap().find('R').unwrap();
    let at = SourceFile::new("r.wsp", src).position(u.loc);
    assert_eq!(at, format!("r.wsp:3:{col}"));
    assert!(
        get_backend("cpu_sim")
            .unwrap()
            .supports(plan.resolved())
            .is_ok()
    );
}

/// The emitting back ends of `pto-wsp-backends` are in every library user's registry (no
/// front end registers them), compile the resolved program with the positions of its source
/// and the bindings of the options, and refuse at the construct's location.
#[test]
fn the_emitting_back_ends_are_registered_for_every_library_user() {
    for (key, name) in [
        ("ascend", "ascend"),
        ("ascend_a2a3sim", "ascend"),
        ("ascend_a2a3", "ascend"),
        ("ptoisa", "ptoisa"),
        ("pto_isa", "ptoisa"),
    ] {
        let b = get_backend(key).unwrap_or_else(|| panic!("`{key}` is not registered"));
        assert_eq!(b.name(), name);
        assert_eq!(b.capabilities(), [Capability::Emit]);
    }
    let tree = |src: &str, target: &str, bindings: pto_wsp::ir::Bindings| {
        let plan = lower(&parse(src).unwrap())
            .unwrap()
            .with_source(SourceFile::new("t.wsp", src));
        let options = CompileOptions {
            target: target.into(),
            bindings,
            ..CompileOptions::default()
        };
        compile_target(&plan, &options).map(|out| match out {
            Output::Artefact(Artefact::Tree(files)) => files
                .into_iter()
                .map(|(p, b)| (p.display().to_string(), String::from_utf8(b).unwrap()))
                .collect::<Vec<_>>(),
            _ => panic!("an emitter gives a tree"),
        })
    };
    let file = |files: &[(String, String)], name: &str| {
        files.iter().find(|(n, _)| n == name).unwrap().1.clone()
    };
    // A symbol's value is baked in; statements name their place in the source text.
    let src = "symbol n: i64;\ntensor X: f32[8, 64];\naxis I = dense_dyn(n);\n\
               kernel k(inout x: f32[8, 64]) @vector {\n  tile t: vec f32[8, 64];\n  TLOAD(t, x);\n  TSTORE(x, t);\n}\n\
               workload main() {\n  parallel_for i in I {\n    task k(X[0 +: 8, 0 +: 64]);\n  }\n}\n";
    let files = tree(
        src,
        "ascend_a2a3sim",
        pto_wsp::ir::Bindings::new().symbol("n", 3i64),
    )
    .unwrap();
    let orch = file(&files, "orchestration.cpp");
    assert!(orch.contains("INT64_C(3)"), "{orch}");
    assert!(orch.contains("\"t.wsp:11:5\""), "{orch}");
    let readme = file(&files, "README.md");
    assert!(readme.contains("submits 3 kernel task(s)"), "{readme}");
    // The PTO-ISA target: the kernel's header names its declaration.
    let files = tree(
        src,
        "pto_isa",
        pto_wsp::ir::Bindings::new().symbol("n", 2i64),
    )
    .unwrap();
    assert!(file(&files, "k.hpp").contains("kernel `k` (t.wsp:4:8)"));
    assert_eq!(
        file(&files, "driver.cpp")
            .matches("pto_wsp_kernels::k(")
            .count(),
        2
    );
    // An element type the emitter does not write: refused at the tile, through the diagnostic.
    let bad = src.replace(
        "TSTORE(x, t);",
        "tile u: vec bf16[8, 64];\n  TCVT(u, t);\n  TCVT(t, u);\n  TSTORE(x, t);",
    );
    let e = tree(
        &bad,
        "pto_isa",
        pto_wsp::ir::Bindings::new().symbol("n", 1i64),
    )
    .unwrap_err();
    assert!(matches!(e, CompileError::Emitter(_)), "{e:?}");
    let rendered = SourceFile::new("t.wsp", bad.as_str()).render(&e);
    assert!(
        rendered.contains("tile `u` is bf16: the emitter writes f32, f16 and integer tiles only")
            && rendered.contains("--> t.wsp:7:3"),
        "{rendered}"
    );
}
