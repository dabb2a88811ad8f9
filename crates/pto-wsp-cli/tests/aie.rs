//! `pto-wsp emit aie`: the custom form of every AIE example against its golden; the generic form
//! of every example run through Debian's `mlir-opt` (parsed, printed back equal, and verified);
//! `--report`; and the mapper's refusals of designs that do not fit, each naming the tile and
//! the resource (or both tensors of a layout mismatch), with nothing written.
//!
//! The custom form's op spellings were compared with mlir-aie's own designs of the same
//! generation: `programming_examples/basic/vector_scalar_mul/build/aie.mlir`,
//! `programming_examples/basic/matrix_multiplication/whole_array/build/aie_640x896x768_16x32x48_2c.mlir`
//! and `test/npu-xrt/matrix_multiplication_using_cascade/aie_plainx1.mlir` of `Xilinx/mlir-aie`
//! (`docs/AIE.md` lists each op with its source).
//!
//! MLIR: `mlir-opt-22` (or any `mlir-opt` offering
//! `--mlir-very-unsafe-disable-verifier-on-parsing`) parses each generic file without the
//! verifier and prints it back; the print must equal our file up to SSA names. Then the verifier
//! runs (with `mlir-opt-22` or `mlir-opt-19`) on a copy in which every `"func.call"` is renamed
//! to an unregistered op: MLIR cannot resolve a call inside an unregistered op's region (it
//! treats such an op as a possible symbol table of its own), so the copy keeps everything else
//! verified; that the original fails only with exactly that error is checked too. Without any
//! `mlir-opt` the test prints one `skipped:` line.

mod common;

use common::{Needs, binary, golden, root, scratch, toolchain_ran, toolchain_skipped};
use std::process::Command;

const EXAMPLES: &[&str] = &["pipeline3", "vector_scalar", "gemm_4x4"];

fn emit(name: &str, dir: &std::path::Path, generic: bool) -> String {
    let out = dir.join(format!("{name}.mlir"));
    let file = format!("examples/aie/{name}.wsp");
    let mut args = vec!["emit", "aie", &file, "-o", out.to_str().unwrap()];
    if generic {
        args.push("--generic");
    }
    let (code, stdout, stderr) = binary(&args);
    assert_eq!(code, 0, "{name}: {stderr}");
    assert!(
        stdout.starts_with("emitted an AIE design for npu1_4col"),
        "{stdout}"
    );
    std::fs::read_to_string(out).unwrap()
}

#[test]
fn custom_form_of_every_example_matches_its_golden() {
    let dir = scratch("aie-custom");
    for name in EXAMPLES {
        let text = emit(name, &dir, false);
        golden(&format!("aie/{name}.mlir"), &text);
        let cc = std::fs::read_to_string(dir.join(format!("{name}.kernels.cc"))).unwrap();
        golden(&format!("aie/{name}.kernels.cc"), &cc);
        assert!(text.contains(&format!("{{link_with = \"{name}.kernels.o\"}}")));
    }
}

#[test]
fn report_prints_placement_routing_budgets_and_the_model() {
    let dir = scratch("aie-report");
    let out = dir.join("g.mlir");
    let (code, stdout, stderr) = binary(&[
        "emit",
        "aie",
        "examples/aie/gemm_4x4.wsp",
        "-o",
        out.to_str().unwrap(),
        "--report",
    ]);
    assert_eq!(code, 0, "{stderr}");
    for want in [
        "placement of `main` on npu1_4col",
        "  core (3, 5)  grid cell (3, 3)",
        "A_bc0        mem (0, 1) -> (0, 2), (1, 2), (2, 2), (3, 2)  depth 2  memref<32x32xbf16>",
        "memory tile (0, 1)  [C_0_2, C_0_3, C_0_4, C_0_5] -> [C_out0]  join at element offsets [0, 1024, 2048, 3072]",
        "from host A A_in1  offset 4096 sizes [1, 4, 32, 32] strides [0, 32, 128, 1]",
        "  (0, 1) memory          40960/524288 B         6/6   3/6",
        "bottleneck: core (0, 2) grid cell (0, 0)",
    ] {
        assert!(stdout.contains(want), "missing `{want}` in\n{stdout}");
    }
}

/// The `mlir-opt` binaries on PATH: (name, offers the parse-only flag).
fn mlir_opts() -> Vec<(String, bool)> {
    ["mlir-opt-22", "mlir-opt-19", "mlir-opt"]
        .iter()
        .filter_map(|t| {
            let out = Command::new(t).arg("--help-hidden").output().ok()?;
            let help = String::from_utf8_lossy(&out.stdout).into_owned();
            Some((
                t.to_string(),
                help.contains("mlir-very-unsafe-disable-verifier-on-parsing"),
            ))
        })
        .collect()
}

/// `text` with SSA value names replaced by `%v0, %v1, ...`: every definition (`%x = ...`, a
/// block argument `%x: type`) takes the next number, every use the number of the latest
/// definition of its name (names may be defined again in sibling regions, as each core's
/// constants are).
fn rename_ssa(text: &str) -> String {
    let mut latest: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut next = 0;
    let mut out = String::new();
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let mut j = i + 1;
            while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
                j += 1;
            }
            let name = &text[i..j];
            let rest = &text[j..];
            let k = if rest.starts_with(" =") || rest.starts_with(':') {
                next += 1;
                latest.insert(name.to_string(), next - 1);
                next - 1
            } else {
                *latest
                    .get(name)
                    .unwrap_or_else(|| panic!("use of {name} before its definition"))
            };
            out.push_str(&format!("%v{k}"));
            i = j;
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out.lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

fn run(tool: &str, args: &[&str], file: &std::path::Path) -> (bool, String, String) {
    let out = Command::new(tool).args(args).arg(file).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn generic_form_of_every_example_parses_and_verifies_with_mlir_opt() {
    let tools = mlir_opts();
    if tools.is_empty() {
        toolchain_skipped(
            Needs::Mlir,
            "no mlir-opt on PATH (mlir-opt-22, mlir-opt-19 or mlir-opt): the generic MLIR of the AIE examples was not parsed",
        );
        return;
    }
    let dir = scratch("aie-mlir");
    let mut parsed = 0;
    for name in EXAMPLES {
        let text = emit(name, &dir, true);
        let file = dir.join(format!("{name}.mlir"));
        for (tool, parse_only) in &tools {
            if *parse_only {
                let (ok, out, err) = run(
                    tool,
                    &[
                        "--allow-unregistered-dialect",
                        "--mlir-very-unsafe-disable-verifier-on-parsing",
                        "--mlir-print-op-generic",
                    ],
                    &file,
                );
                assert!(ok, "{tool} {name}: {err}");
                assert_eq!(
                    rename_ssa(&out),
                    rename_ssa(&text),
                    "{tool} prints {name} back differently"
                );
                parsed += 1;
            }
            // Full verification, every call renamed (see the module docs).
            let probe = dir.join(format!("{name}.probe.mlir"));
            std::fs::write(
                &probe,
                text.replace("\"func.call\"", "\"aie.pto_wsp_probe_call\""),
            )
            .unwrap();
            let (ok, _, err) = run(tool, &["--allow-unregistered-dialect"], &probe);
            assert!(ok, "{tool} verifying {name}: {err}");
            let (ok, _, err) = run(tool, &["--allow-unregistered-dialect"], &file);
            assert!(!ok, "{tool} {name}: expected the unresolvable call error");
            assert!(
                err.contains("'func.call' op '")
                    && err.contains("' does not reference a valid function"),
                "{tool} {name}: {err}"
            );
            parsed += 1;
        }
    }
    assert!(parsed >= EXAMPLES.len());
    toolchain_ran(Needs::Mlir);
}

fn refuse(name: &str, text: &str, want: &[&str]) {
    let dir = scratch(&format!("aie-bad-{name}"));
    let src = dir.join(format!("{name}.wsp"));
    std::fs::write(&src, text).unwrap();
    let out = dir.join("out.mlir");
    let (code, stdout, stderr) = binary(&[
        "emit",
        "aie",
        src.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{name}: {stdout}");
    for w in want {
        assert!(stderr.contains(w), "{name}: missing `{w}` in\n{stderr}");
    }
    assert!(
        !out.exists(),
        "{name}: nothing is written for a design that does not fit"
    );
}

fn example(name: &str) -> String {
    std::fs::read_to_string(root().join(format!("examples/aie/{name}.wsp"))).unwrap()
}

#[test]
fn too_many_processes_for_the_grid_is_refused() {
    let t = example("pipeline3")
        .replace("grid 3 x 1;", "grid 2 x 1;")
        .replace("    place loader at (0, 0);\n    place computer at (1, 0);\n    place storer at (2, 0);\n", "");
    refuse(
        "procs",
        &t,
        &[
            "too many processes for the grid: pipeline `stream3` has 3 processes, grid 2 x 1 has 2 cells",
        ],
    );
}

#[test]
fn a_buffer_over_64_kib_is_refused_naming_tile_and_pools() {
    let t = example("pipeline3").replace("channel loaded[2];", "channel loaded[8];");
    refuse(
        "memory",
        &t,
        &[
            "tile (0, 2) (process loader): local memory exceeded: fifo `Src` 2 x 8192 B, fifo `loaded` 8 x 8192 B, stack 1024 B = 82944 B > 65536 B (npu1_4col compute tile)",
        ],
    );
}

#[test]
fn an_unroutable_channel_is_refused_naming_tile_and_dma_channels() {
    let t = "tensor X: f32[64, 64];
tensor A: f32[64, 64];
tensor B: f32[64, 64];
tensor C: f32[64, 64];
tensor OA: f32[64, 64];
tensor OB: f32[64, 64];
tensor OC: f32[64, 64];
axis T = dense(2);
kernel copy(in x: f32[16, 64], out y: f32[16, 64]) @vector {
    tile t: vec f32[16, 64];
    TLOAD(t, x);
    TSTORE(y, t);
}
kernel fan(in x: f32[16, 64], out a: f32[16, 64], out b: f32[16, 64], out c: f32[16, 64]) @vector {
    tile t: vec f32[16, 64];
    TLOAD(t, x);
    TSTORE(a, t);
    TSTORE(b, t);
    TSTORE(c, t);
}
pipeline fanout {
    channel ca[2];
    channel cb[2];
    channel cc[2];
    process src(produces ca, cb, cc) {
        for_each t in T {
            task fan(X[t * 16 +: 16, 0 +: 64], A[t * 16 +: 16, 0 +: 64], B[t * 16 +: 16, 0 +: 64], C[t * 16 +: 16, 0 +: 64]);
            send ca(t);
            send cb(t);
            send cc(t);
        }
    }
    process qa(consumes ca) {
        consume ca as i { task copy(A[i * 16 +: 16, 0 +: 64], OA[i * 16 +: 16, 0 +: 64]); }
    }
    process qb(consumes cb) {
        consume cb as i { task copy(B[i * 16 +: 16, 0 +: 64], OB[i * 16 +: 16, 0 +: 64]); }
    }
    process qc(consumes cc) {
        consume cc as i { task copy(C[i * 16 +: 16, 0 +: 64], OC[i * 16 +: 16, 0 +: 64]); }
    }
}
spatial_map far for fanout {
    device npu1_4col;
    grid 4 x 4;
    place src at (0, 0);
    place qa at (3, 1);
    place qb at (3, 2);
    place qc at (3, 3);
}
";
    refuse(
        "route",
        t,
        &[
            "tile (0, 2) (process src): 3 output (MM2S) DMA channels needed (`ca`, `cb`, `cc`), 2 available (npu1_4col compute tile): fifo `cc` from (0, 2) to (3, 5) cannot be routed",
        ],
    );
}

#[test]
fn a_layout_mismatch_is_refused_naming_both_tensors() {
    let t = example("gemm_4x4").replace(
        "layout C(shard row, shard col);",
        "layout C(shard col, shard row);",
    );
    refuse(
        "layout",
        &t,
        &["layout mismatch: layouts of `A` and `C` disagree for task `mm_acc`"],
    );
}
