//! Snapshot goldens of emitted code: the PTO-ISA C++ (kernels, host driver, Makefile) of every
//! kernel example and of the kernel library's test module, the Ascend tree (AICore kernels,
//! orchestration, runner) of every Ascend example, and the task-graph ISA assembly of every
//! example the `ptog` target lowers, each compared byte for byte with `test_data/golden/`.
//!
//! Why: the emitted code is only built and run where the outside toolchains are (PTO-ISA,
//! simpler), which CI does not have; the goldens make every change to it visible in review and
//! fail the tests until it is accepted deliberately: `PTO_WSP_BLESS=1 cargo nextest run -p
//! pto-wsp-cli --test emitted_golden` rewrites them (and removes files no longer emitted). A
//! mismatch shows the unified diff.

mod common;

use pto_wsp::emitters::{Input, ptog};
use pto_wsp_cli::cmd::emit;

/// Loads `path` (relative to the repository root) with its default bindings.
fn load(path: &str) -> (pto_wsp_cli::Loaded, pto_wsp::ir::Bindings) {
    let text = std::fs::read_to_string(common::root().join(path)).unwrap();
    let loaded = pto_wsp_cli::load_source(path, &text).unwrap_or_else(|e| panic!("{e}"));
    let bindings = pto_wsp_cli::bindings_for(&loaded, &[]).unwrap_or_else(|e| panic!("{e}"));
    (loaded, bindings)
}

/// The file stem of `path`.
fn stem(path: &str) -> &str {
    path.rsplit('/').next().unwrap().trim_end_matches(".wsp")
}

#[test]
fn pto_isa_cpp_of_every_kernel_example_matches_its_golden() {
    for path in [
        "examples/kernels/cycles_golden.wsp",
        "examples/kernels/decode_attention.wsp",
        "examples/kernels/every_instruction.wsp",
        "examples/kernels/rmsnorm_gemm.wsp",
        "examples/kernels/softmax.wsp",
        "test_data/library/every_kernel.wsp",
    ] {
        let (loaded, bindings) = load(path);
        let (loaded, plan) = emit::with_library(&loaded).unwrap_or_else(|e| panic!("{e}"));
        let emitted = emit::kernels(&loaded, &plan, &bindings).unwrap_or_else(|e| panic!("{e}"));
        assert!(!emitted.kernels.is_empty(), "{path}: no kernel emitted");
        common::golden_tree(&format!("pto_isa/{}", stem(path)), &emitted.files);
    }
}

#[test]
fn ascend_tree_of_every_ascend_example_matches_its_golden() {
    for path in [
        "examples/ascend/control_flow.wsp",
        "examples/ascend/decode_attention.wsp",
        "examples/ascend/gemm.wsp",
        "examples/ascend/rmsnorm.wsp",
        "examples/ascend/softmax_3pass.wsp",
        "examples/ascend/vector_example.wsp",
    ] {
        let (loaded, bindings) = load(path);
        let (loaded, plan) = emit::with_library(&loaded).unwrap_or_else(|e| panic!("{e}"));
        let tree = emit::ascend(&loaded, &plan, &bindings, "ascend_a2a3sim")
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(!tree.kernels.is_empty(), "{path}: no kernel emitted");
        common::golden_tree(&format!("ascend/{}", stem(path)), &tree.files);
    }
}

/// Every `.wsp` file directly under `dir` (relative to the repository root), sorted.
fn wsp_files(dir: &str) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(common::root().join(dir))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".wsp"))
        .map(|n| format!("{dir}/{n}"))
        .collect();
    out.sort();
    out
}

/// Assembly up to this size is kept whole in its golden; above it, the golden holds the first
/// [`HEAD_LINES`] lines, the line count and a hash of the whole (the full task lists of the
/// larger examples run to megabytes).
const WHOLE: usize = 200 * 1024;
const HEAD_LINES: usize = 400;

/// What the golden of `text` holds (see [`WHOLE`]).
fn shown(text: &str) -> String {
    if text.len() <= WHOLE {
        return text.to_string();
    }
    // FNV-1a, 64 bits: any change to the text changes the golden.
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    let head: Vec<&str> = text.lines().take(HEAD_LINES).collect();
    format!(
        "{}\n; ... the first {HEAD_LINES} of {} lines ({} bytes, FNV-1a 64 of the whole: \
         {hash:016x})\n",
        head.join("\n"),
        text.lines().count(),
        text.len()
    )
}

/// The task-graph ISA assembly of every workload example (`examples/`, `examples/ptog/`,
/// `examples/datadep/`) under its default bindings, as `compile --target ptog` lowers it; an
/// example the target refuses (CSP pipelines, workloads that read values their tasks compute)
/// has its rendered refusal as the golden instead, so the set of lowered examples is checked
/// too.
#[test]
fn ptog_assembly_of_every_example_matches_its_golden() {
    let mut lowered = 0;
    for dir in ["examples", "examples/ptog", "examples/datadep"] {
        for path in wsp_files(dir) {
            let (loaded, bindings) = load(&path);
            let plan = pto_wsp::driver::lower(&loaded).unwrap_or_else(|e| panic!("{e}"));
            let input = Input {
                resolved: plan.resolved(),
                source: Some(&loaded.source),
                bindings: &bindings,
            };
            let name = format!(
                "ptog/{}",
                path.trim_start_matches("examples/").replace('/', ".")
            );
            let name = name.trim_end_matches(".wsp");
            match ptog::lower(&input) {
                Ok(l) => {
                    let text = pto_wsp::ptog::disassemble(&l.program);
                    // The assembly is the program: it assembles back to it.
                    let back = pto_wsp::ptog::assemble(&text).unwrap_or_else(|e| panic!("{e}"));
                    assert_eq!(back.program, l.program, "{path}");
                    common::golden(&format!("{name}.ptoasm"), &shown(&text));
                    lowered += 1;
                }
                Err(e) => {
                    let rendered = loaded.source.render(&e);
                    assert!(rendered.contains(&format!("--> {path}:")), "{rendered}");
                    common::golden(&format!("{name}.refused.txt"), &rendered);
                }
            }
        }
    }
    assert!(
        lowered >= 5,
        "only {lowered} examples lower to the task-graph ISA"
    );
}
