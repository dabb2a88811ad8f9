//! `pto-wsp emit kernels`: every kernel of `examples/kernels/*.wsp` emitted as PTO-ISA C++,
//! built with g++ against PTO-ISA's CPU simulation, run on the same `.npy` inputs as our CPU
//! executor, and compared with it; and the emitter's refusals.
//!
//! The PTO-ISA checkout is `PTO_ISA_ROOT`, defaulting to `$HOME/.cache/pto-wsp/pto-isa`
//! (`scripts/prepare-toolchains.sh` fetches it). Without it the comparison prints one line,
//! `skipped: no PTO-ISA at <path>`, and passes.

mod common;

use common::{binary, root, scratch};
use pto_wsp::kernels::TensorStore;
use pto_wsp::kernels::npy::NpyArray;
use pto_wsp_cli::cmd::emit::{kernels_summary, write_files};
use pto_wsp_cli::cmd::run::{RunOptions, run};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every kernel of `loaded` with a body as PTO-ISA C++, its kernels naming built-ins given the
/// kernel library's bodies, as `pto-wsp emit kernels` does.
fn emit_kernels(
    loaded: &pto_wsp_cli::Loaded,
    bindings: &pto_wsp::ir::Bindings,
) -> Result<pto_wsp::emitters::ptoisa::Emitted, pto_wsp_cli::CliError> {
    let (loaded, plan) = pto_wsp_cli::cmd::emit::with_library(loaded)?;
    pto_wsp_cli::cmd::emit::kernels(&loaded, &plan, bindings)
}

/// Where the PTO-ISA checkout is expected.
fn pto_isa_root() -> PathBuf {
    match std::env::var_os("PTO_ISA_ROOT") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
            .join(".cache/pto-wsp/pto-isa"),
    }
}

/// The elements of a `.npy` file of `f32` or `f16`, as `f32`.
fn npy_floats(path: &Path) -> Vec<f32> {
    let a = NpyArray::parse(&std::fs::read(path).unwrap()).unwrap();
    match (a.kind, a.size) {
        ('f', 4) => bytemuck::cast_slice::<u8, f32>(&a.data).to_vec(),
        ('f', 2) => a
            .data
            .chunks_exact(2)
            .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
        other => panic!("{}: unexpected element type {other:?}", path.display()),
    }
}

/// Error figures of one tensor: the largest |cpp − ours| over the largest |ours|, the largest
/// element-wise relative error, and how many elements differ at all.
struct Diff {
    normwise: f64,
    elementwise: f64,
    differing: usize,
    len: usize,
}

fn diff(ours: &[f32], cpp: &[f32]) -> Diff {
    assert_eq!(ours.len(), cpp.len());
    let scale = ours.iter().fold(0f64, |m, &x| m.max((x as f64).abs()));
    // An all-zero output would compare equal however wrong the kernels were.
    assert!(scale > 0.0, "the output is all zeros");
    let mut d = Diff {
        normwise: 0.0,
        elementwise: 0.0,
        differing: 0,
        len: ours.len(),
    };
    for (&a, &b) in ours.iter().zip(cpp) {
        // Non-finite values (an empty chunk's maximum is -inf) must be the same on both sides.
        if !(a.is_finite() && b.is_finite()) {
            assert!(
                a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                "non-finite output {a} / {b}"
            );
            continue;
        }
        let e = (a as f64 - b as f64).abs();
        if a.to_bits() != b.to_bits() {
            d.differing += 1;
        }
        d.normwise = d.normwise.max(e / scale.max(f64::MIN_POSITIVE));
        if a != 0.0 {
            d.elementwise = d.elementwise.max(e / (a as f64).abs());
        }
    }
    d
}

/// One example prepared for the comparison: inputs written, our run done, C++ emitted.
struct Case {
    name: String,
    dir: PathBuf,
    written: Vec<String>,
}

fn prepare(file: &Path, binds: &[String], base: &Path) -> Case {
    let mut name = file.file_stem().unwrap().to_string_lossy().into_owned();
    for b in binds {
        name = format!("{name}.{}", b.replace('=', ""));
    }
    let dir = base.join(&name);
    let (inputs, ours, cpp) = (dir.join("in"), dir.join("ours"), dir.join("cpp"));
    for d in [&inputs, &ours, &cpp] {
        std::fs::create_dir_all(d).unwrap();
    }
    let text = std::fs::read_to_string(file).unwrap();
    let shown = file.display().to_string();
    let loaded = pto_wsp_cli::load_source(&shown, &text).unwrap();
    let bindings = pto_wsp_cli::bindings_for(&loaded, binds).unwrap();
    // The same inputs for both runs: every tensor, random (seed 7), as .npy files.
    let mut store = TensorStore::new(&loaded.module, &bindings).unwrap();
    store.fill_random(7);
    let mut opts = RunOptions {
        binds: binds.to_vec(),
        threads: 2,
        ..RunOptions::default()
    };
    for info in store.infos() {
        let path = inputs.join(format!("{}.npy", info.name));
        std::fs::write(&path, store.to_npy(&info.name).unwrap()).unwrap();
        opts.inputs
            .push(format!("{}={}", info.name, path.display()));
        opts.outputs.push(format!(
            "{}={}",
            info.name,
            ours.join(format!("{}.npy", info.name)).display()
        ));
    }
    run(&shown, &text, false, &opts, &mut |_| {}).unwrap();
    let emitted = emit_kernels(&loaded, &bindings).unwrap();
    write_files(&emitted.files, &dir.join("emitted")).unwrap();
    Case {
        name,
        dir,
        written: emitted.written,
    }
}

/// Emits `examples/kernels/FILE` under `binds`, builds it with g++ against PTO-ISA's CPU
/// simulation (one g++ for the module: the driver includes its kernels), runs it on the inputs
/// of our CPU run and compares every tensor the emitted kernels write. Without the checkout,
/// prints one line and passes.
fn emitted_module_matches_our_cpu_run(file: &str, binds: &[&str]) {
    let pto = pto_isa_root();
    if !pto.join("include/pto/pto-inst.hpp").is_file() {
        common::toolchain_skipped(
            common::Needs::PtoIsa,
            &format!("no PTO-ISA at {}", pto.display()),
        );
        return;
    }
    common::toolchain_ran(common::Needs::PtoIsa);
    let base = scratch(&format!("emit-{file}-{}", binds.join("-")));
    let binds: Vec<String> = binds.iter().map(|b| b.to_string()).collect();
    let c = prepare(&root().join("examples/kernels").join(file), &binds, &base);
    let b = Command::new("make")
        .arg("-s")
        .arg("-C")
        .arg(c.dir.join("emitted"))
        .arg(format!("PTO_ISA_ROOT={}", pto.display()))
        // The runs are tiny: compile time matters more than code quality.
        .arg("CXXFLAGS=-O0")
        .output()
        .expect("make runs");
    assert!(
        b.status.success(),
        "{}: build failed:\n{}",
        c.name,
        String::from_utf8_lossy(&b.stderr)
    );
    let out = Command::new(c.dir.join("emitted/driver"))
        .arg(c.dir.join("in"))
        .arg(c.dir.join("cpp"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}: driver failed:\n{}",
        c.name,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!c.written.is_empty(), "{}: writes nothing", c.name);
    for t in &c.written {
        let ours = npy_floats(&c.dir.join(format!("ours/{t}.npy")));
        let cpp = npy_floats(&c.dir.join(format!("cpp/{t}.npy")));
        let d = diff(&ours, &cpp);
        // Same instructions on the same inputs: PTO-ISA's CPU simulation computes TEXP and
        // TRSQRT in f64 rounded once (we use f32 `exp` and `1 / sqrt`, each ≤ 1 ulp) and
        // TMATMUL_ACC as c + (Σ a·b) (we add each product to c): a few ulp of the output's
        // scale at most.
        assert!(
            d.normwise <= 1e-6,
            "{} {t}: max |cpp - ours| / max |ours| = {:e}",
            c.name,
            d.normwise
        );
        eprintln!(
            "{} {t}: {} of {} elements differ, max |cpp - ours| / max |ours| = {:.1e}, max elementwise relative {:.1e}",
            c.name, d.differing, d.len, d.normwise, d.elementwise
        );
    }
    let _ = std::fs::remove_dir_all(&base);
}

/// The modules of `examples/kernels/` the tests below emit (a new example needs its test).
const EMITTED_EXAMPLES: &[&str] = &[
    "cycles_golden.wsp",
    "decode_attention.wsp",
    "every_instruction.wsp",
    "rmsnorm_gemm.wsp",
    "softmax.wsp",
];

#[test]
fn every_kernel_example_has_an_emission_test() {
    let mut files: Vec<String> = std::fs::read_dir(root().join("examples/kernels"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".wsp"))
        .collect();
    files.sort();
    assert_eq!(files, EMITTED_EXAMPLES);
}

#[test]
fn emitted_softmax_under_pto_isa_matches_our_cpu_run() {
    emitted_module_matches_our_cpu_run("softmax.wsp", &[]);
}

#[test]
fn emitted_rmsnorm_and_gemm_under_pto_isa_match_our_cpu_run() {
    emitted_module_matches_our_cpu_run("rmsnorm_gemm.wsp", &[]);
}

#[test]
fn emitted_split_kv_decode_under_pto_isa_matches_our_cpu_run() {
    emitted_module_matches_our_cpu_run("decode_attention.wsp", &[]);
}

#[test]
fn emitted_split_kv_decode_with_an_empty_chunk_under_pto_isa_matches_our_cpu_run() {
    // kv = 192: the last of four chunks has 0 valid keys.
    emitted_module_matches_our_cpu_run("decode_attention.wsp", &["kv=192"]);
}

#[test]
fn emitted_cycle_examples_and_3_pass_softmax_under_pto_isa_match_our_cpu_run() {
    emitted_module_matches_our_cpu_run("cycles_golden.wsp", &[]);
}

#[test]
fn every_emitted_instruction_under_pto_isa_matches_our_cpu_run() {
    emitted_module_matches_our_cpu_run("every_instruction.wsp", &[]);
}

/// Emits `src` (named `t.wsp`) and returns the rendered error.
fn emit_error(src: &str) -> String {
    let loaded = pto_wsp_cli::load_source("t.wsp", src).expect("valid module");
    let bindings = pto_wsp_cli::bindings_for(&loaded, &[]).unwrap();
    emit_kernels(&loaded, &bindings)
        .expect_err("emission must refuse")
        .rendered
}

#[test]
fn a_bf16_tile_is_refused_at_its_declaration() {
    let src = "tensor X: bf16[8, 64];\n\
kernel k(in x: bf16[8, 64]) @vector {\n    tile t: vec bf16[8, 64];\n    TLOAD(t, x);\n}\n\
workload main() {\n    task k(X[0 +: 8, 0 +: 64]);\n}\n";
    let rendered = emit_error(src);
    assert!(
        rendered.contains("kernel `k`: cannot emit PTO-ISA C++: tile parameter `x` is bf16"),
        "{rendered}"
    );
    assert!(rendered.contains(" --> t.wsp:2:13"), "{rendered}");
    // Through the command line: exit 1, the same error, nothing written.
    let dir = scratch("emit-refused");
    let file = dir.join("t.wsp");
    std::fs::write(&file, src).unwrap();
    let out = dir.join("out");
    let (code, stdout, stderr) = binary(&[
        "emit",
        "kernels",
        file.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(!out.exists(), "nothing may be written");
    assert_eq!(stderr.replace(file.to_str().unwrap(), "t.wsp"), rendered);
}

#[test]
fn a_kernel_named_like_a_cpp_keyword_is_refused_at_its_name() {
    let src = "tensor X: f32[8, 64];\n\
kernel delete(inout x: f32[8, 64]) @vector {\n    tile t: vec f32[8, 64];\n    TLOAD(t, x);\n    TSTORE(x, t);\n}\n\
workload main() {\n    task delete(X[0 +: 8, 0 +: 64]);\n}\n";
    let rendered = emit_error(src);
    assert!(
        rendered.starts_with(
            "error: kernel `delete`: cannot emit PTO-ISA C++: the kernel's name is a C++ keyword \
             or a PTO-ISA instruction; rename it\n --> t.wsp:2:8"
        ),
        "{rendered}"
    );
}

#[test]
fn tensors_read_after_a_task_the_driver_skips_are_named() {
    let src = "tensor X: f32[8, 64];\ntensor T: f32[8, 64];\ntensor Y: f32[8, 64];\n\
kernel prep(in x: f32[8, 64], out t: f32[8, 64]) @vector;\n\
kernel body(in t: f32[8, 64], out y: f32[8, 64]) @vector {\n    tile a: vec f32[8, 64];\n    TLOAD(a, t);\n    TSTORE(y, a);\n}\n\
workload main() {\n    task prep(X[0 +: 8, 0 +: 64], T[0 +: 8, 0 +: 64]);\n    task body(T[0 +: 8, 0 +: 64], Y[0 +: 8, 0 +: 64]);\n}\n";
    let loaded = pto_wsp_cli::load_source("t.wsp", src).unwrap();
    let bindings = pto_wsp_cli::bindings_for(&loaded, &[]).unwrap();
    let emitted = emit_kernels(&loaded, &bindings).unwrap();
    assert_eq!(emitted.kernels, ["body"]);
    assert_eq!(emitted.written, ["Y"]);
    assert_eq!(emitted.skipped_tasks, 1);
    assert_eq!(emitted.read_after_skipped, ["T"]);
    let summary = kernels_summary(&emitted, Path::new("out"));
    assert!(
        summary.contains(
            "note: emitted kernels read T after tasks the driver does not run write them; give \
             their contents as inputs"
        ),
        "{summary}"
    );
}
