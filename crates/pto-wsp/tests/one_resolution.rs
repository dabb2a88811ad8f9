//! The one-resolution invariant: a module is resolved once on its way to a run or an artefact
//! (`pto_wsp::lower`), and everything after — every back end's `supports` and `compile`, host
//! runs with either generator, device generation, pipelines, data-dependent generation, the
//! expander, the bytecode encoder, the emitters, the front-end driver's expansion and Chrome
//! trace — reads that one resolved program.
//!
//! The IR counts its resolutions (feature `resolution-count`, on for this test build only); the
//! test drives every path and checks that the count went up by exactly one per `lower`. One test
//! in its own binary, so no other test resolves in the same process meanwhile.

use pto_wsp::driver::{self, Loaded};
use pto_wsp::ir::ExpandOptions;
use pto_wsp::ir::resolve::resolutions;
use pto_wsp::kernels::KernelRegistry;
use pto_wsp::{CompileError, CompileOptions, LoweredPlan, Output, compile, compile_target};

fn load(path: &str) -> Loaded {
    let file = format!("{}/../../examples/{path}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&file).unwrap();
    driver::load_source(path, &text).unwrap()
}

/// The kernels `pto-wsp run` gives `loaded`: built-ins, bodies, the text's aliases.
fn kernels(loaded: &Loaded) -> KernelRegistry {
    let mut k = KernelRegistry::with_builtins();
    pto_wsp::kernels::lang::register_bodies(&loaded.module, &mut k);
    driver::aliases::apply_aliases(loaded, &mut k).unwrap();
    k
}

/// Compiles `plan` with `options` (the text's kernels) and runs it under the text's bindings.
fn run(loaded: &Loaded, plan: &LoweredPlan, options: CompileOptions) {
    let bindings = driver::bindings_for(loaded, &[]).unwrap();
    let options = CompileOptions {
        threads: 2,
        kernels: kernels(loaded),
        ..options
    };
    let mut program = compile(plan.clone(), options).unwrap();
    program.execute(&bindings).unwrap();
}

/// Lowers `loaded` (one resolution), then runs `each` on the plan; the count must have gone up
/// by exactly one.
fn once(what: &str, loaded: &Loaded, each: impl FnOnce(&LoweredPlan)) {
    let before = resolutions();
    let plan = driver::lower(loaded).unwrap();
    each(&plan);
    assert_eq!(
        resolutions() - before,
        1,
        "{what}: the module was resolved more than once"
    );
}

#[test]
fn every_path_from_a_module_to_a_run_or_an_artefact_resolves_it_once() {
    // A workload: host runs (bytecode and expander generators, traced), device generation,
    // overrides of the schedule's counts, the expander, the trace, every emitting target.
    let softmax = load("softmax_3pass.wsp");
    let bindings = driver::bindings_for(&softmax, &[]).unwrap();
    once("a host run", &softmax, |plan| {
        run(&softmax, plan, CompileOptions::default());
        let options = CompileOptions {
            host_expander: true,
            profiling: true,
            num_streams: Some(3),
            num_aicpus: Some(5),
            ..CompileOptions::default()
        };
        let mut p = compile(
            plan.clone(),
            CompileOptions {
                kernels: kernels(&softmax),
                ..options
            },
        )
        .unwrap();
        let stats = p.execute(&bindings).unwrap();
        assert!(driver::trace::trace_json(plan, &bindings, &stats).contains("\"args\""));
        driver::expand(plan, &bindings, &ExpandOptions::default()).unwrap();
    });
    once("device generation", &softmax, |plan| {
        run(
            &softmax,
            plan,
            CompileOptions {
                device_gen: true,
                ..CompileOptions::default()
            },
        );
    });
    once("the emitting targets", &softmax, |plan| {
        // The bytecode emits; the kernel emitter and the Ascend back end refuse this module of
        // built-in kernels, after reading its resolved program.
        let emit = |target: &str| {
            let options = CompileOptions {
                target: target.into(),
                bindings: bindings.clone(),
                ..CompileOptions::default()
            };
            compile_target(plan, &options)
        };
        assert!(matches!(emit("bytecode"), Ok(Output::Artefact(_))));
        assert!(matches!(emit("pto_isa"), Err(CompileError::Emitter(_))));
        assert!(matches!(
            emit("ascend_a2a3sim"),
            Err(CompileError::Unsupported(_))
        ));
    });
    // Kernels written in tile instructions, through both emitters.
    let ascend = load("ascend/vector_example.wsp");
    once(
        "the emitters of a kernel-language module",
        &ascend,
        |plan| {
            for target in ["pto_isa", "ascend_a2a3sim"] {
                let options = CompileOptions {
                    target: target.into(),
                    ..CompileOptions::default()
                };
                assert!(matches!(
                    compile_target(plan, &options),
                    Ok(Output::Artefact(_))
                ));
            }
            run(&ascend, plan, CompileOptions::default());
        },
    );
    // A pipeline: one thread per process, each expanding its own process.
    let csp = load("csp_pipeline.wsp");
    once("a pipeline run", &csp, |plan| {
        run(&csp, plan, CompileOptions::default());
    });
    // Data-dependent generation: computed reads on the host and in device generation.
    let converge = load("datadep/converge.wsp");
    once("data-dependent runs", &converge, |plan| {
        run(&converge, plan, CompileOptions::default());
        run(
            &converge,
            plan,
            CompileOptions {
                device_gen: true,
                ..CompileOptions::default()
            },
        );
    });
}
