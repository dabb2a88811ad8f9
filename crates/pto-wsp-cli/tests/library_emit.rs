//! The kernel library's definitions as PTO-ISA C++: every library kernel (at `f32`, and at `f16`
//! where it has a path of its own) emitted by `pto-wsp emit kernels` for a module whose kernels
//! are aliased to the built-ins (`test_data/library/every_kernel.wsp`), built with g++ against
//! PTO-ISA's CPU simulation (one build for all of them), run on the same `.npy` inputs as our CPU
//! run of the built-ins, and compared tensor by tensor.
//!
//! The PTO-ISA checkout is `PTO_ISA_ROOT`, defaulting to `$HOME/.cache/pto-wsp/pto-isa`. Without
//! it the test prints one line, `skipped: no PTO-ISA at <path>`, and passes.
//!
//! Bounds: integer outputs bit for bit; float outputs within `1e-5` of the output's largest
//! magnitude (`f32`; PTO-ISA's CPU simulation computes `TEXP` and `TRSQRT` in `f64`, sums in other
//! orders) plus one rounding of the output type (`2^-10` for `f16`).

mod common;

use common::{binary, root, scratch};
use pto_wsp::kernels::TensorStore;
use pto_wsp::kernels::npy::NpyArray;
use pto_wsp_cli::cmd::emit::write_files;
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

fn pto_isa_root() -> PathBuf {
    match std::env::var_os("PTO_ISA_ROOT") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
            .join(".cache/pto-wsp/pto-isa"),
    }
}

/// The elements of a `.npy` file as `f64`, and whether they are integers, and the float's
/// size in bytes.
fn npy_values(path: &Path) -> (Vec<f64>, char, usize) {
    let a = NpyArray::parse(&std::fs::read(path).unwrap()).unwrap();
    let v = match (a.kind, a.size) {
        ('f', 4) => bytemuck::cast_slice::<u8, f32>(&a.data)
            .iter()
            .map(|&x| x as f64)
            .collect(),
        ('f', 2) => a
            .data
            .chunks_exact(2)
            .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f64())
            .collect(),
        ('i', 4) => a
            .data
            .chunks_exact(4)
            .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64)
            .collect(),
        other => panic!("{}: unexpected element type {other:?}", path.display()),
    };
    (v, a.kind, a.size)
}

#[test]
fn check_types_every_kernel_against_the_library() {
    let (code, stdout, stderr) = binary(&["check", "test_data/library/every_kernel.wsp"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("47 kernels"), "{stdout}");
    // An integer operand of a product has no definition: refused at the kernel's name.
    let dir = scratch("library-check");
    let file = dir.join("t.wsp");
    std::fs::write(
        &file,
        "//@ alias proj=matmul\ntensor X: i32[4, 8];\ntensor W: f16[8, 8];\ntensor Y: f32[4, 8];\n\
         kernel proj(in x: i32[?, ?], in w: f16[?, ?], out y: f32[?, ?]) @cube;\n\
         workload main() { task proj(X[0 +: 4, 0 +: 8], W[0 +: 8, 0 +: 8], Y[0 +: 4, 0 +: 8]); }\n",
    )
    .unwrap();
    let (code, _, stderr) = binary(&["check", file.to_str().unwrap()]);
    assert_eq!(code, 1, "{stderr}");
    let stderr = stderr.replace(file.to_str().unwrap(), "t.wsp");
    assert!(
        stderr.starts_with(
            "error: kernel `proj` (built-in `matmul`): no tile-instruction definition for its 3 \
             region(s) of element types (i32, f16, f32)"
        ),
        "{stderr}"
    );
    assert!(stderr.contains(" --> t.wsp:5:8"), "{stderr}");
}

#[test]
fn every_library_kernel_emitted_as_pto_isa_cpp_matches_the_builtins() {
    let pto = pto_isa_root();
    if !pto.join("include/pto/pto-inst.hpp").is_file() {
        common::toolchain_skipped(
            common::Needs::PtoIsa,
            &format!("no PTO-ISA at {}", pto.display()),
        );
        return;
    }
    common::toolchain_ran(common::Needs::PtoIsa);
    let file = root().join("test_data/library/every_kernel.wsp");
    let dir = scratch("library-emit");
    let (inputs, ours, cpp) = (dir.join("in"), dir.join("ours"), dir.join("cpp"));
    for d in [&inputs, &ours, &cpp] {
        std::fs::create_dir_all(d).unwrap();
    }
    let text = std::fs::read_to_string(&file).unwrap();
    let shown = file.display().to_string();
    let loaded = pto_wsp_cli::load_source(&shown, &text).unwrap();
    let bindings = pto_wsp_cli::bindings_for(&loaded, &[]).unwrap();
    let mut store = TensorStore::new(&loaded.module, &bindings).unwrap();
    store.fill_random(7);
    let mut opts = RunOptions {
        threads: 1,
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
    let out = dir.join("emitted");
    write_files(&emitted.files, &out).unwrap();
    let b = Command::new("make")
        .arg("-s")
        .arg("-C")
        .arg(&out)
        .arg(format!("PTO_ISA_ROOT={}", pto.display()))
        .arg("CXXFLAGS=-O0")
        .output()
        .expect("make runs");
    assert!(
        b.status.success(),
        "build failed:\n{}",
        String::from_utf8_lossy(&b.stderr)
    );
    let r = Command::new(out.join("driver"))
        .arg(&inputs)
        .arg(&cpp)
        .output()
        .unwrap();
    assert!(
        r.status.success(),
        "driver failed:\n{}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert!(emitted.written.len() >= 40, "{:?}", emitted.written);
    for t in &emitted.written {
        let (want, kind, size) = npy_values(&ours.join(format!("{t}.npy")));
        let (got, _, _) = npy_values(&cpp.join(format!("{t}.npy")));
        assert_eq!(want.len(), got.len(), "{t}");
        let scale = want
            .iter()
            .filter(|x| x.is_finite())
            .fold(0f64, |m, &x| m.max(x.abs()));
        let scale = if scale == 0.0 { 1.0 } else { scale };
        let mut worst = 0f64;
        for (i, (&a, &g)) in want.iter().zip(&got).enumerate() {
            if kind == 'i' {
                assert_eq!(a, g, "{t}[{i}]: built-in {a}, emitted {g}");
                continue;
            }
            if !a.is_finite() || !g.is_finite() {
                assert!(
                    a.to_bits() == g.to_bits() || a.is_nan() && g.is_nan(),
                    "{t}[{i}]: built-in {a}, emitted {g}"
                );
                continue;
            }
            worst = worst.max((a - g).abs() / scale);
        }
        let bound = 1e-5 + if size == 2 { 1.0 / 1024.0 } else { 0.0 };
        println!("library C++ {t}: max error {worst:.3e} (bound {bound:.1e})");
        assert!(worst <= bound, "{t}: max error {worst:e} over {bound:e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
