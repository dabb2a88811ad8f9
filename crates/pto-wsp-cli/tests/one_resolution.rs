//! The one-resolution invariant from the command line's side: `pto-wsp run` (with its progress
//! count, its trace and its `--expect` goldens), `expand`, `bytecode` and `emit` each resolve the
//! file once and read that resolved program everywhere after (the facade's
//! `tests/one_resolution.rs` covers the library's paths). One test in its own binary, so no
//! other test resolves in the same process meanwhile.

use pto_wsp::ir::resolve::resolutions;
use pto_wsp_cli::cmd::run::{RunOptions, run};

/// The repository root (examples are named relative to it).
fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `f` and returns how many resolutions it made.
fn counted<T>(f: impl FnOnce() -> T) -> (u64, T) {
    let before = resolutions();
    let out = f();
    (resolutions() - before, out)
}

#[test]
fn each_command_resolves_its_file_once() {
    let path = "examples/softmax_3pass.wsp";
    let text = std::fs::read_to_string(root().join(path)).unwrap();
    let dir = std::env::temp_dir().join(format!("pto-wsp-one-resolution-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("trace.json");
    let opts = RunOptions {
        threads: 2,
        progress: true,
        trace: Some(trace.clone()),
        ..RunOptions::default()
    };
    let (n, outcome) = counted(|| run(path, &text, false, &opts, &mut |_| {}));
    let outcome = outcome.unwrap_or_else(|e| panic!("{e}"));
    assert!(outcome.stats.tasks > 0);
    assert!(
        std::fs::read_to_string(&trace)
            .unwrap()
            .contains("\"args\"")
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(n, 1, "`run` resolved the module {n} times");

    let loaded = pto_wsp_cli::load_source(path, &text).unwrap();
    let bindings = pto_wsp_cli::bindings_for(&loaded, &[]).unwrap();
    let (n, ()) = counted(|| {
        let plan = pto_wsp::driver::lower(&loaded).unwrap();
        let x = pto_wsp::driver::expand(&plan, &bindings, &Default::default()).unwrap();
        let opts = pto_wsp_cli::cmd::bytecode::BytecodeOptions {
            disasm: false,
            stats: true,
            executors: None,
        };
        pto_wsp_cli::cmd::bytecode::bytecode_report(path, &plan, &bindings, Some(&x), &opts)
            .unwrap();
    });
    assert_eq!(
        n, 1,
        "`expand` and `bytecode` resolved the module {n} times"
    );

    let ascend = "examples/ascend/vector_example.wsp";
    let text = std::fs::read_to_string(root().join(ascend)).unwrap();
    let loaded = pto_wsp_cli::load_source(ascend, &text).unwrap();
    let bindings = pto_wsp_cli::bindings_for(&loaded, &[]).unwrap();
    let (n, ()) = counted(|| {
        let plan = pto_wsp::driver::lower(&loaded).unwrap();
        pto_wsp_cli::cmd::emit::kernels(&loaded, &plan, &bindings).unwrap();
        pto_wsp_cli::cmd::emit::ascend(&loaded, &plan, &bindings, "ascend_a2a3sim").unwrap();
    });
    assert_eq!(n, 1, "`emit` resolved the module {n} times");
}
