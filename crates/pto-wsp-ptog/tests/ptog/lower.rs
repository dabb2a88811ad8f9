//! Lowering a module to the task-graph ISA (`pto-wsp compile --target ptog`): the binary of
//! each example, run on a simulated device, computes what the CPU simulation computes from the
//! same inputs.

use pto_wsp::driver::{aliases::apply_aliases, bindings_for, load_source};
use pto_wsp::{Artefact, CompileOptions, Output, compile_target, lower};
use pto_wsp_kernels::KernelRegistry;
use pto_wsp_ptog::{Device, DeviceConfig, Library, decode};

/// The kernels a module's tasks run: built-ins, its `//@ alias` lines, its kernel bodies.
fn registry(loaded: &pto_wsp::driver::Loaded) -> KernelRegistry {
    let mut reg = KernelRegistry::with_builtins();
    apply_aliases(loaded, &mut reg).unwrap_or_else(|e| panic!("{e}"));
    pto_wsp_kernels::lang::register_bodies(&loaded.module, &mut reg);
    reg
}

fn check_example(path: &str) {
    let full = format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&full).unwrap();
    let loaded = load_source(path, &text).unwrap_or_else(|e| panic!("{e}"));
    let bindings = bindings_for(&loaded, &[]).unwrap_or_else(|e| panic!("{e}"));
    let plan = lower(&loaded.module).unwrap();
    let resolved = plan.resolved().clone();
    // The binary.
    let options = CompileOptions {
        target: "ptog".into(),
        bindings: bindings.clone(),
        ..CompileOptions::default()
    };
    let bytes = match compile_target(&plan, &options).unwrap_or_else(|e| panic!("{path}: {e}")) {
        Output::Artefact(Artefact::Bytes(b)) => b,
        other => panic!("{path}: {other:?}"),
    };
    let checked = decode(&bytes).unwrap_or_else(|e| panic!("{path}: {e}"));
    let lib = Library::from_registry(registry(&loaded));
    let cfg = DeviceConfig {
        aic: 1,
        aiv: 2,
        aicpu: 1,
        ..DeviceConfig::default()
    };
    let mut dev = Device::new(checked, cfg, &lib).unwrap_or_else(|e| panic!("{path}: {e}"));
    // The reference: the CPU simulation, from the same inputs.
    let mut reference = pto_wsp::compile(
        plan,
        CompileOptions {
            kernels: registry(&loaded),
            threads: 2,
            ..CompileOptions::default()
        },
    )
    .unwrap();
    {
        let mut g = reference.tensors(&bindings).unwrap();
        let store = g.as_mut().unwrap();
        store.fill_random(7);
        for t in 0..store.len() as u32 {
            dev.store_mut().bytes_mut(t).copy_from_slice(store.bytes(t));
        }
    }
    let report = dev.run().unwrap_or_else(|e| panic!("{path}: {e}"));
    let stats = reference.execute(&bindings).unwrap();
    // A node per task the expander generates, and a join node per structural order.
    let exp = pto_wsp::ir::expand(&resolved, &bindings, &Default::default()).unwrap();
    let nodes = &dev.checked().graphs[0].kernels;
    assert_eq!(nodes.len(), exp.tasks.len() + exp.order.len(), "{path}");
    assert_eq!(report.kernel_runs as usize, nodes.len(), "{path}");
    assert!(stats.tasks >= exp.tasks.len() as u64, "{path}");
    let g = reference.tensors(&bindings).unwrap();
    let store = g.as_ref().unwrap();
    for t in 0..store.len() as u32 {
        assert!(
            store.bytes(t) == dev.store().bytes(t),
            "{path}: tensor {} differs",
            store.info(t).name
        );
    }
}

#[test]
fn lowered_examples_compute_what_the_cpu_simulation_computes() {
    for path in [
        "examples/gemm.wsp",
        "examples/rmsnorm.wsp",
        "examples/softmax_3pass.wsp",
        "examples/mha.wsp",
        "examples/llama_block.wsp",
        "examples/ascend/gemm.wsp",
        "examples/ascend/control_flow.wsp",
        "examples/ascend/vector_example.wsp",
    ] {
        check_example(path);
    }
}

#[test]
fn a_pipeline_is_refused_with_a_reason() {
    let path = "examples/csp_pipeline.wsp";
    let text =
        std::fs::read_to_string(format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let loaded = load_source(path, &text).unwrap();
    let options = CompileOptions {
        target: "ptog".into(),
        bindings: bindings_for(&loaded, &[]).unwrap(),
        ..CompileOptions::default()
    };
    let e = compile_target(&lower(&loaded.module).unwrap(), &options).unwrap_err();
    assert!(e.to_string().contains("is a CSP pipeline"), "{e}");
}
