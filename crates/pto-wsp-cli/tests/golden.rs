//! Golden tests for the examples and end-to-end tests of the `pto-wsp` binary.
//!
//! Why: the canonical print and the expand report are the project's visible output; any change
//! to either must be deliberate. Each example's canonical print and default expand report are
//! compared exactly with `test_data/golden/`; setting `PTO_WSP_BLESS=1` rewrites those files
//! instead. The binary tests check exit codes and that errors are rendered with
//! `file:line:column`.

mod common;

use pto_wsp::ir::ExpandOptions;
use pto_wsp_cli::report::{self, ReportOptions};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every example, by file stem.
const EXAMPLES: &[&str] = &[
    "mha",
    "gemm",
    "decode_ragged",
    "moe",
    "tiered",
    "csp_pipeline",
    "llama7b_layer",
    "softmax_3pass",
    "rmsnorm",
    "llama_block",
    "llm_decode",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn example_text(name: &str) -> String {
    let path = root().join("examples").join(format!("{name}.wsp"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// Compares `actual` with the golden file `name` (a unified diff on a mismatch), or rewrites it
/// under `PTO_WSP_BLESS=1`.
fn golden(name: &str, actual: &str) {
    common::golden(name, actual);
}

/// Loads an example (parse + validate), failing with the rendered errors.
fn load(name: &str) -> pto_wsp_cli::Loaded {
    let text = example_text(name);
    pto_wsp_cli::load_source(&format!("examples/{name}.wsp"), &text)
        .unwrap_or_else(|e| panic!("{name} does not load:\n{e}"))
}

/// The expand report of an example with its default bindings plus `binds`.
fn report_of(name: &str, binds: &[&str], limit: usize) -> (String, usize) {
    let loaded = load(name);
    let binds: Vec<String> = binds.iter().map(|s| s.to_string()).collect();
    let bindings =
        pto_wsp_cli::bindings_for(&loaded, &binds).unwrap_or_else(|e| panic!("{name}: {e}"));
    let plan = pto_wsp::driver::lower(&loaded).unwrap_or_else(|e| panic!("{name}: {e}"));
    let expansion = pto_wsp::driver::expand(&plan, &bindings, &ExpandOptions::default())
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let text = report::expand_report(
        &loaded.module,
        &bindings,
        &expansion,
        &ReportOptions { limit },
    );
    (text, expansion.tasks.len())
}

#[test]
fn canonical_prints_match_golden_and_reparse() {
    for name in EXAMPLES {
        let loaded = load(name);
        let printed = pto_wsp_cli::canonical(&loaded.module);
        golden(&format!("{name}.wsp"), &printed);
        let reparsed = pto_wsp::ir::parse(&printed)
            .unwrap_or_else(|e| panic!("{name}: canonical print does not parse: {e}"));
        assert_eq!(reparsed, loaded.module, "{name}: print/parse round trip");
        assert_eq!(
            pto_wsp_cli::canonical(&reparsed),
            printed,
            "{name}: printing is not idempotent"
        );
    }
}

#[test]
fn examples_are_in_canonical_form() {
    for name in EXAMPLES {
        let text = example_text(name);
        let formatted = pto_wsp_cli::format_source(name, &text).expect("example parses");
        assert_eq!(
            pto_wsp_cli::first_difference(&text, &formatted),
            None,
            "examples/{name}.wsp is not canonical (run `pto-wsp fmt --write`)"
        );
        assert_eq!(pto_wsp_cli::first_dropped_comment(&text), None, "{name}");
    }
}

#[test]
fn expand_reports_match_golden() {
    for name in EXAMPLES {
        let (text, tasks) = report_of(name, &[], 40);
        assert!(tasks > 0, "{name} generates no tasks");
        golden(&format!("{name}.expand.txt"), &text);
    }
}

#[test]
fn llama_layer_task_counts_scale_with_seq() {
    for seq in [1024usize, 4096, 8192, 16384] {
        let bind = format!("seq={seq}");
        let (text, tasks) = report_of("llama7b_layer", &[&bind], 0);
        assert_eq!(tasks, 486 * (seq / 32), "tasks at seq={seq}");
        if seq != 1024 {
            golden(&format!("llama7b_layer.seq{seq}.expand.txt"), &text);
        }
    }
}

fn binary() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pto-wsp"));
    cmd.current_dir(root());
    cmd
}

/// Runs the binary in the repository root; returns (exit code, stdout, stderr).
fn run(args: &[&str]) -> (i32, String, String) {
    let out = binary().args(args).output().expect("the binary runs");
    (
        out.status.code().expect("exited normally"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Asserts that a run failed with exit 1 and an error rendered at `file:line:`.
fn assert_user_error(args: &[&str], position: &str) -> String {
    let (code, _, stderr) = run(args);
    assert_eq!(code, 1, "exit code of {args:?}; stderr:\n{stderr}");
    assert!(stderr.starts_with("error: "), "stderr:\n{stderr}");
    assert!(
        stderr.contains(&format!("--> {position}")),
        "expected `--> {position}` in:\n{stderr}"
    );
    assert!(stderr.contains('^'), "no caret in:\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

#[test]
fn check_passes_on_every_example() {
    for name in EXAMPLES {
        let file = format!("examples/{name}.wsp");
        let (code, stdout, stderr) = run(&["check", &file]);
        assert_eq!(code, 0, "{file}: {stderr}");
        assert!(stdout.starts_with(&format!("ok: {file} (")), "{stdout}");
        let (code, _, stderr) = run(&["fmt", "--check", &file]);
        assert_eq!(code, 0, "{file}: {stderr}");
    }
}

#[test]
fn malformed_file_is_a_rendered_syntax_error() {
    for cmd in ["check", "fmt", "expand", "bytecode"] {
        assert_user_error(
            &[cmd, "test_data/errors/malformed.wsp"],
            "test_data/errors/malformed.wsp:5:18",
        );
    }
}

#[test]
fn validation_error_is_rendered_with_its_location() {
    for cmd in ["check", "expand", "bytecode"] {
        let stderr = assert_user_error(
            &[cmd, "test_data/errors/invalid.wsp"],
            "test_data/errors/invalid.wsp:10:",
        );
        assert!(stderr.contains("Missing"), "{stderr}");
    }
}

#[test]
fn bad_default_binding_points_at_its_line() {
    assert_user_error(
        &["expand", "test_data/errors/bad_bind.wsp"],
        "test_data/errors/bad_bind.wsp:3:10",
    );
}

#[test]
fn bad_cli_binding_and_missing_file_are_user_errors() {
    let (code, _, stderr) = run(&["expand", "examples/gemm.wsp", "--bind", "nosuch=3"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("nosuch"), "{stderr}");
    let (code, _, stderr) = run(&["expand", "examples/gemm.wsp", "--bind", "M=oops"]);
    assert_eq!(code, 1, "{stderr}");
    let (code, _, stderr) = run(&["check", "test_data/errors/no_such_file.wsp"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.starts_with("error: cannot read `test_data/errors/no_such_file.wsp`"),
        "{stderr}"
    );
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(run(&["expand"]).0, 2);
    assert_eq!(run(&["frobnicate", "x.wsp"]).0, 2);
    assert_eq!(
        run(&["expand", "examples/gemm.wsp", "--limit", "many"]).0,
        2
    );
    assert_eq!(
        run(&["fmt", "--check", "--write", "examples/gemm.wsp"]).0,
        2
    );
}

#[test]
fn expand_binary_prints_report_and_timing() {
    let (code, stdout, stderr) = run(&[
        "expand",
        "examples/gemm.wsp",
        "--bind",
        "K=256",
        "--limit",
        "3",
        "--executors",
        "4",
    ]);
    assert_eq!(code, 0, "{stderr}");
    // 16 x 16 output tiles x (a zeroing task + 2 K steps).
    assert!(stdout.contains("tasks: 768 (first 3 listed)"), "{stdout}");
    assert!(
        stdout.contains("per executor (4 executors, 4 with tasks):"),
        "{stdout}"
    );
    assert!(stdout.contains("order edges: 256"), "{stdout}");
    assert!(stderr.starts_with("expanded 768 tasks in "), "{stderr}");
    let (code, quiet, _) = run(&["expand", "examples/gemm.wsp", "--quiet"]);
    assert_eq!(code, 0);
    assert!(!quiet.contains("#0 "), "{quiet}");
    assert!(quiet.contains("tasks: 4352"), "{quiet}");
}

/// The `bytecode` report of an example (default bindings plus `binds`).
fn bytecode_report_of(name: &str, binds: &[&str], disasm: bool) -> String {
    let loaded = load(name);
    let binds: Vec<String> = binds.iter().map(|s| s.to_string()).collect();
    let bindings =
        pto_wsp_cli::bindings_for(&loaded, &binds).unwrap_or_else(|e| panic!("{name}: {e}"));
    let plan = pto_wsp::driver::lower(&loaded).unwrap_or_else(|e| panic!("{name}: {e}"));
    let expansion = pto_wsp::driver::expand(&plan, &bindings, &ExpandOptions::default())
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let opts = pto_wsp_cli::cmd::bytecode::BytecodeOptions {
        disasm,
        stats: true,
        executors: None,
    };
    pto_wsp_cli::cmd::bytecode::bytecode_report(
        &format!("examples/{name}.wsp"),
        &plan,
        &bindings,
        Some(&expansion),
        &opts,
    )
    .unwrap_or_else(|e| panic!("{name}: {e}"))
    .text
}

#[test]
fn bytecode_reports_match_golden() {
    for name in EXAMPLES {
        let text = bytecode_report_of(name, &[], true);
        golden(&format!("{name}.bytecode.txt"), &text);
    }
    let text = bytecode_report_of("llama7b_layer", &["seq=16384"], false);
    golden("llama7b_layer.seq16384.bytecode.txt", &text);
}

#[test]
fn bytecode_binary_reports_and_times() {
    let (code, stdout, stderr) = run(&[
        "bytecode",
        "examples/gemm.wsp",
        "--bind",
        "K=256",
        "--executors",
        "4",
    ]);
    assert_eq!(code, 0, "{stderr}");
    // 16 x 16 output tiles of 128, each zeroed once and accumulated over K / 128 = 2 steps.
    let tasks = 16 * 16 * (1 + 2);
    assert!(stdout.contains(&format!("tasks: {tasks}")), "{stdout}");
    assert!(
        stdout.contains(
            "per executor (4 executors; every task checked against the reference expander):"
        ),
        "{stdout}"
    );
    assert!(
        stderr.starts_with(&format!("interpreted {tasks} tasks on 4 executors")),
        "{stderr}"
    );
    let (code, stdout, _) = run(&["bytecode", "examples/moe.wsp", "--disasm"]);
    assert_eq!(code, 0);
    assert!(stdout.contains("0000  proc 0 (moe)"), "{stdout}");
    assert_eq!(
        run(&["bytecode", "examples/gemm.wsp", "--executors", "0"]).0,
        2
    );
    // An entry with computed reads: encoded and disassembled, its tasks not listed (the
    // expander cannot see computed values), the computed tensor named.
    let (code, stdout, stderr) = run(&["bytecode", "examples/datadep/early_exit.wsp", "--disasm"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("tasks: not listed: the entry reads computed values of `F`"),
        "{stdout}"
    );
    assert!(stdout.contains("read s = F[0, 0]"), "{stdout}");
    assert!(stdout.contains("break if (s == 0)"), "{stdout}");
}

#[test]
fn fmt_write_rewrites_a_copy_into_canonical_form() {
    let dir = std::env::temp_dir().join(format!("pto-wsp-fmt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("gemm.wsp");
    let text = example_text("gemm");
    // Squash the layout: the canonical form must come back.
    let squashed = text.replace("\n    ", "\n").replace(";\n", "; ");
    std::fs::write(&file, &squashed).expect("write copy");
    let path = file.to_str().expect("utf-8 temp path");
    let (code, _, stderr) = run(&["fmt", "--check", path]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("is not in canonical form"), "{stderr}");
    let (code, _, stderr) = run(&["fmt", "--write", path]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(std::fs::read_to_string(&file).expect("read back"), text);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn run_device_gen_prints_the_report_with_its_executors() {
    // gemm: 16 x 16 output tiles, each zeroed and accumulated over 16 K steps. A pipeline runs
    // as processes on threads in either mode, so it reports no device generation.
    for (name, tasks, devgen) in [("gemm", 16 * 16 * 17, true), ("csp_pipeline", 48, false)] {
        let file = format!("examples/{name}.wsp");
        let args = ["run", &file, "--empty-kernels", "--threads", "2"];
        let (code, host, stderr) = run(&args);
        assert_eq!(code, 0, "{stderr}");
        let (code, dev, stderr) = run(&[&args[..], &["--device-gen"]].concat());
        assert_eq!(code, 0, "{stderr}");
        let first = format!("{file}: ran {tasks} tasks");
        assert!(host.starts_with(&first), "{host}");
        assert!(dev.starts_with(&first), "{dev}");
        assert!(!host.contains("device generation"), "{host}");
        assert_eq!(
            dev.contains("device generation: 2 executor(s) each walked"),
            devgen,
            "{dev}"
        );
    }
}

#[test]
fn targets_lists_every_registered_backend() {
    let (code, stdout, stderr) = run(&["targets"]);
    assert_eq!(code, 0, "{stderr}");
    for b in pto_wsp::backends() {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(b.name()))
            .unwrap_or_else(|| panic!("no line for `{}` in:\n{stdout}", b.name()));
        for t in b.targets() {
            assert!(line.contains(&t), "{line}");
        }
    }
    assert!(
        stdout.contains("cpu_sim") && stdout.contains("bytecode"),
        "{stdout}"
    );
}

#[test]
fn compile_runs_any_target() {
    // cpu_sim validates and reports.
    let (code, stdout, stderr) = run(&["compile", "examples/gemm.wsp", "--target", "cpu_sim"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("ok for target `cpu_sim`"), "{stdout}");
    // bytecode writes bytes that decode and bind.
    let out = std::env::temp_dir().join(format!("pto-wsp-compile-{}.wspb", std::process::id()));
    let o = out.display().to_string();
    let (code, _, stderr) = run(&[
        "compile",
        "examples/gemm.wsp",
        "--target",
        "bytecode",
        "-o",
        &o,
    ]);
    assert_eq!(code, 0, "{stderr}");
    let bytes = std::fs::read(&out).unwrap();
    let _ = std::fs::remove_file(&out);
    let prog = pto_wsp::bytecode::Program::decode(&bytes).expect("decodes");
    let bindings = pto_wsp::ir::Bindings::new()
        .symbol("M", 256i64)
        .symbol("N", 256i64)
        .symbol("K", 256i64);
    prog.bind(&bindings).expect("binds");
    // Unknown target: the known ones are listed.
    let (code, _, stderr) = run(&["compile", "examples/gemm.wsp", "--target", "nope"]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("unknown target `nope` (available: cpu_sim, bytecode"),
        "{stderr}"
    );
    // A construct the target cannot handle: named, at its file:line:column.
    let stderr = assert_user_error(
        &[
            "compile",
            "test_data/errors/u64_token.wsp",
            "--target",
            "bytecode",
            "-o",
            &o,
        ],
        "test_data/errors/u64_token.wsp:6:5",
    );
    assert!(stderr.contains("does not support `send c`"), "{stderr}");
    assert!(!out.exists(), "nothing written on an error");
}

/// What only failed at run time is reported by `check` at its place: a region smaller than
/// the body loads (a `?` dimension), one smaller than another parameter's matching one, and a
/// tile an `if` writes in one branch only.
#[test]
fn regions_too_small_and_one_sided_writes_are_check_errors_at_their_place() {
    let cases = [
        (
            "region_too_small",
            "region_too_small.wsp:15:16",
            "region `X[..]` bound to `x` (in x: f32[?, 64]) is 8 x 64 (rows x cols), but the \
             body's TLOAD loads tile `t` (valid 16 x 64) at (0, 0) from it: it needs at least 16 \
             x 64",
        ),
        (
            "region_smaller_than_other_param",
            "region_smaller_than_other_param.wsp:14:41",
            "region `Y[..]` bound to `y` (out y: f32[?, 64]) is 4 x 64 (rows x cols), but the \
             body's TSTORE stores tile `t` (valid 16 x 64) at (0, 0) into it",
        ),
        (
            "one_sided_if",
            "one_sided_if.wsp:14:5",
            "TSTORE reads tile `s`, which may be unwritten here: the `if scale` before it writes \
             it in only one branch",
        ),
    ];
    for (name, place, message) in cases {
        let file = format!("test_data/errors/{name}.wsp");
        let stderr = assert_user_error(&["check", &file], &format!("test_data/errors/{place}"));
        assert!(stderr.contains(message), "{name}: {stderr}");
        assert_eq!(stderr.matches("error:").count(), 1, "{name}: {stderr}");
    }
    // The accepted forms: regions as large as the body needs, both branches written, an
    // accumulator written in a loop's first step; and they run.
    for cmd in ["check", "run"] {
        let (code, _, stderr) = run(&[cmd, "test_data/kernels/flow_ok.wsp"]);
        assert_eq!(code, 0, "{cmd}: {stderr}");
    }
}
