//! `pto-wsp run` end to end: the main job against its reference (1, 2 and 4 threads, every
//! ready and dispatch policy, different request lengths), data in and out as `.npy` (numpy's
//! own files read exactly and written back byte for byte, mismatches naming the tensor), kernel
//! aliases, pipelines and their deadlocks.

use pto_wsp::ir::DType;
use pto_wsp::kernels::npy;
use pto_wsp_cli::cmd::run::{RunOptions, run};
use pto_wsp_cli::llm;
mod common;

use common::{attention_reference, binary, root, scratch};
use std::path::{Path, PathBuf};

/// Replaces the schedule line starting with `key` (e.g. `dispatch`) by `key value;`.
fn set_line(text: &str, key: &str, value: &str) -> String {
    text.lines()
        .map(|l| {
            let t = l.trim_start();
            if t.starts_with(&format!("{key} ")) && t.ends_with(';') {
                format!("{}{key} {value};", &l[..l.len() - t.len()])
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn small(lens: &str) -> Vec<String> {
    [
        "nreq=3",
        "kv_heads=1",
        "ffn=256",
        "layers=2",
        "max_chunks=3",
        lens,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

#[test]
fn main_job_matches_its_reference_everywhere_and_follows_the_lengths() {
    let mut tasks = Vec::new();
    for lens in ["kv_lens=[5, 300, 700]", "kv_lens=[767, 1, 10]"] {
        let mut counts = std::collections::BTreeSet::new();
        for dispatch in [None, Some("round_robin(3)"), Some("hash(5)")] {
            for ready in ["fifo", "work_steal", "priority(len)"] {
                let mut text = set_line(llm::SOURCE, "ready", ready);
                if let Some(d) = dispatch {
                    text = set_line(&text, "dispatch", d);
                }
                for threads in [1, 2, 4] {
                    let opts = RunOptions {
                        binds: small(lens),
                        threads,
                        seed: 7,
                        debug_checks: true,
                        ..RunOptions::default()
                    };
                    let what = format!("{lens} {dispatch:?} {ready} threads {threads}");
                    let out = run(llm::NAME, &text, true, &opts, &mut |_| {})
                        .unwrap_or_else(|e| panic!("{what}: {e}"));
                    let c = out.comparison.expect("the main job is checked");
                    assert!(c.passed, "{what}: {c:?}");
                    assert!(out.report.contains("PASS"), "{}", out.report);
                    counts.insert(out.stats.tasks);
                }
            }
        }
        assert_eq!(counts.len(), 1, "one task set per binding");
        tasks.extend(counts);
    }
    assert_ne!(tasks[0], tasks[1], "the lengths drive the task set");
}

#[test]
fn main_job_runs_from_the_binary_with_its_time_split() {
    let mut args = vec!["run", "-q", "--threads", "2"];
    let binds: Vec<String> = small("kv_lens=[100, 513, 2]")
        .into_iter()
        .flat_map(|b| ["--bind".to_string(), b])
        .collect();
    args.extend(binds.iter().map(String::as_str));
    let (code, stdout, stderr) = binary(&args);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("one decode step of 2 layer(s)"), "{stdout}");
    assert!(stdout.contains("phases: prepare "), "{stdout}");
    assert!(stdout.contains(", check "), "{stdout}");
    assert!(stdout.contains(": PASS"), "{stdout}");
}

/// A module copying three inputs (f32, f16, i32) to outputs of the same types and shapes.
const COPY: &str = "\
tensor A: f32[2, 3, 4];
tensor H: f16[3, 4];
tensor I: i32[3, 4];
tensor A2: f32[2, 3, 4];
tensor H2: f16[3, 4];
tensor I2: i32[3, 4];
tensor W: f32[3, 4];

kernel copy(in a: f32[?, ?, ?], out b: f32[?, ?, ?]);
kernel copy_h(in a: f16[?, ?], out b: f16[?, ?]);
kernel copy_i(in a: i32[?, ?], out b: i32[?, ?]);

workload main() {
    task copy(A[0 +: 2, 0 +: 3, 0 +: 4], A2[0 +: 2, 0 +: 3, 0 +: 4]);
    task copy_h(H[0 +: 3, 0 +: 4], H2[0 +: 3, 0 +: 4]);
    task copy_i(I[0 +: 3, 0 +: 4], I2[0 +: 3, 0 +: 4]);
}
";

#[test]
fn npy_inputs_written_by_numpy_come_back_out_byte_for_byte() {
    let dir = scratch("npy");
    let module = dir.join("copy.wsp");
    std::fs::write(
        &module,
        format!("//@ alias copy_h=copy\n//@ alias copy_i=copy\n{COPY}"),
    )
    .unwrap();
    let fixture = |f: &str| root().join("test_data/npy").join(f);
    let spec = |t: &str, p: &Path| format!("{t}={}", p.display());
    let out: Vec<PathBuf> = ["a2", "h2", "i2"]
        .iter()
        .map(|n| dir.join(format!("{n}.npy")))
        .collect();
    let args = [
        "run".to_string(),
        module.display().to_string(),
        "--input".into(),
        spec("A", &fixture("f32_2x3x4.npy")),
        "--input".into(),
        spec("H", &fixture("f16_3x4.npy")),
        "--input".into(),
        spec("I", &fixture("i32_3x4.npy")),
        "--output".into(),
        spec("A2", &out[0]),
        "--output".into(),
        spec("H2", &out[1]),
        "--output".into(),
        spec("I2", &out[2]),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, stdout, stderr) = binary(&args);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("; read from .npy: A, H, I ("), "{stdout}");
    for (o, f) in out
        .iter()
        .zip(["f32_2x3x4.npy", "f16_3x4.npy", "i32_3x4.npy"])
    {
        assert_eq!(
            std::fs::read(o).unwrap(),
            std::fs::read(fixture(f)).unwrap(),
            "{f}: numpy's file and ours differ"
        );
    }

    // Mismatches name the tensor and the flag.
    let m = module.display().to_string();
    let h_as_f32 = spec("H", &fixture("f32_2x3x4.npy"));
    let (code, _, stderr) = binary(&["run", &m, "--input", &h_as_f32]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains(&format!("in `--input {h_as_f32}`"))
            && stderr.contains("tensor `H` is declared f16")
            && stderr.contains("float32"),
        "{stderr}"
    );
    let fortran = spec("A", &fixture("f32_fortran_2x3.npy"));
    let (code, _, stderr) = binary(&["run", &m, "--input", &fortran]);
    assert_eq!(code, 1);
    assert!(stderr.contains("Fortran-ordered"), "{stderr}");
    let w_wrong_shape = spec("W", &fixture("f32_2x3x4.npy"));
    let (code, _, stderr) = binary(&["run", &m, "--input", &w_wrong_shape]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("tensor `W` has shape (3, 4)") && stderr.contains("(2, 3, 4)"),
        "{stderr}"
    );
    let i_as_a = spec("A2", &fixture("i32_3x4.npy"));
    let (code, _, stderr) = binary(&["run", &m, "--input", &i_as_a]);
    assert_eq!(code, 1);
    assert!(stderr.contains("tensor `A2`"), "{stderr}");
    let f32_into_i = spec("A", &fixture("i32_3x4.npy"));
    let (_, _, stderr) = binary(&["run", &m, "--input", &f32_into_i]);
    assert!(stderr.contains("tensor `A` is declared f32"), "{stderr}");
    let (code, _, stderr) = binary(&["run", &m, "--input", "A=/no/such/file.npy"]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("cannot read `/no/such/file.npy`"),
        "{stderr}"
    );
    let (code, _, stderr) = binary(&["run", &m, "--input", "A"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("is not `NAME=PATH.npy`"), "{stderr}");
    let nope = spec("Nope", &fixture("f16_3x4.npy"));
    let (_, _, stderr) = binary(&["run", &m, "--output", &nope]);
    assert!(stderr.contains("no tensor is named `Nope`"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Inputs go straight into their tensors: only the tensors no input supplies are generated
/// from the seed, a big-endian file is converted (numpy's own file of the same values comes
/// back out), and a file shorter than its header says is refused before anything runs.
#[test]
fn npy_inputs_are_read_into_their_tensors_and_not_generated() {
    let dir = scratch("npy-direct");
    let module = dir.join("copy.wsp");
    std::fs::write(
        &module,
        format!("//@ alias copy_h=copy\n//@ alias copy_i=copy\n{COPY}"),
    )
    .unwrap();
    let fixture = |f: &str| root().join("test_data/npy").join(f);
    let m = module.display().to_string();
    let big = format!("A={}", fixture("f32_big_endian_2x3x4.npy").display());
    let out = dir.join("a2.npy");
    let a2 = format!("A2={}", out.display());
    let (code, stdout, stderr) = binary(&["run", &m, "-q", "--input", &big, "--output", &a2]);
    assert_eq!(code, 0, "{stderr}");
    // 7 tensors, 1 of them from a file.
    assert!(
        stdout.contains("data: 6 tensor(s) generated from seed 1"),
        "{stdout}"
    );
    assert_eq!(
        std::fs::read(&out).unwrap(),
        std::fs::read(fixture("f32_2x3x4.npy")).unwrap()
    );
    let bytes = std::fs::read(fixture("f32_2x3x4.npy")).unwrap();
    let short = dir.join("short.npy");
    std::fs::write(&short, &bytes[..bytes.len() - 4]).unwrap();
    let cut = format!("A={}", short.display());
    let (code, _, stderr) = binary(&["run", &m, "--input", &cut]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains(&format!("in `--input {cut}`")) && stderr.contains("the data is cut off"),
        "{stderr}"
    );
    // Bytes after the data (a concatenated or damaged file) are refused, not ignored.
    let long = dir.join("long.npy");
    std::fs::write(&long, [bytes.as_slice(), &[0u8; 3]].concat()).unwrap();
    let extra = format!("A={}", long.display());
    let (code, _, stderr) = binary(&["run", &m, "--input", &extra]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(&format!("in `--input {extra}`"))
            && stderr.contains(
                "3 byte(s) after the data: a shape (2, 3, 4) of 4-byte elements needs 96"
            ),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Integer inputs are also what control flow reads: new lengths from a `.npy` file change the
/// task set of the ragged decode example.
#[test]
fn integer_npy_inputs_drive_control_flow() {
    let dir = scratch("ints");
    let write = |name: &str, v: &[i32]| {
        let path = dir.join(name);
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        std::fs::write(&path, npy::encode(DType::I32, &[v.len() as u64], &bytes)).unwrap();
        path.display().to_string()
    };
    let lens = format!("kv_lens={}", write("lens.npy", &[100, 1025, 7, 512]));
    let chunks = format!("kv_chunks={}", write("chunks.npy", &[1, 3, 1, 1]));
    let (code, stdout, stderr) = binary(&[
        "run",
        "examples/decode_ragged.wsp",
        "-q",
        "--input",
        &lens,
        "--input",
        &chunks,
    ]);
    assert_eq!(code, 0, "{stderr}");
    // (1 + 3 + 1 + 1) chunks x 8 KV heads + 4 x 32 merges.
    assert!(
        stdout.contains(&format!("ran {} tasks", 6 * 8 + 128)),
        "{stdout}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// An input wins over a `//@ bind` default: with `--bind nreq=2`, two-element length inputs
/// replace the file's four-element defaults instead of being refused because of them.
#[test]
fn integer_npy_inputs_replace_bound_defaults_of_another_length() {
    let dir = scratch("ints-resize");
    let write = |name: &str, v: &[i32]| {
        let path = dir.join(name);
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        std::fs::write(&path, npy::encode(DType::I32, &[v.len() as u64], &bytes)).unwrap();
        path.display().to_string()
    };
    let lens = format!("kv_lens={}", write("lens.npy", &[600, 30]));
    let chunks = format!("kv_chunks={}", write("chunks.npy", &[2, 1]));
    let (code, stdout, stderr) = binary(&[
        "run",
        "examples/decode_ragged.wsp",
        "-q",
        "--bind",
        "nreq=2",
        "--input",
        &lens,
        "--input",
        &chunks,
    ]);
    assert_eq!(code, 0, "{stderr}");
    // (2 + 1) chunks x 8 KV heads + 2 x 32 merges.
    assert!(
        stdout.contains(&format!("ran {} tasks", 3 * 8 + 64)),
        "{stdout}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--expect` compares an output with a numpy golden by numpy's rule and fails the run (exit 1)
/// when an element is outside the tolerance; the golden here is computed in the test, in `f64`.
#[test]
fn expect_compares_an_output_with_a_golden_and_fails_outside_the_tolerance() {
    let dir = scratch("expect");
    let module = dir.join("add.wsp");
    std::fs::write(
        &module,
        "tensor A: f32[8, 16];\ntensor B: f32[8, 16];\ntensor C: f32[8, 16];\n\
         axis R = dense(2);\n\
         kernel add(in a: f32[4, 16], in b: f32[4, 16], out c: f32[4, 16]);\n\
         workload main() { parallel_for r in R { \
         task add(A[r * 4 +: 4, 0 +: 16], B[r * 4 +: 4, 0 +: 16], C[r * 4 +: 4, 0 +: 16]); } }\n",
    )
    .unwrap();
    let a: Vec<f32> = (0..128).map(|i| i as f32 * 0.25 - 3.0).collect();
    let b: Vec<f32> = (0..128).map(|i| 1.0 / (i as f32 + 1.0)).collect();
    let write_f32 = |name: &str, v: &[f32]| {
        let path = dir.join(name);
        std::fs::write(
            &path,
            npy::encode(DType::F32, &[8, 16], bytemuck::cast_slice(v)),
        )
        .unwrap();
        path.display().to_string()
    };
    let write_f64 = |name: &str, v: &[f64]| {
        // numpy.save of a float64 array: the golden need not have the tensor's type.
        let mut bytes = npy::encode(DType::U64, &[8, 16], bytemuck::cast_slice(v));
        let at = bytes.windows(3).position(|w| w == b"<u8").unwrap();
        bytes[at..at + 3].copy_from_slice(b"<f8");
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        path.display().to_string()
    };
    let (pa, pb) = (write_f32("a.npy", &a), write_f32("b.npy", &b));
    let mut want: Vec<f64> = a
        .iter()
        .zip(&b)
        .map(|(&x, &y)| f64::from(x) + f64::from(y))
        .collect();
    let good = write_f64("good.npy", &want);
    want[37] += 1e-3;
    let bad = write_f64("bad.npy", &want);
    let m = module.display().to_string();
    let run_with = |golden: &str, extra: &[&str]| {
        let (ia, ib, ex) = (format!("A={pa}"), format!("B={pb}"), format!("C={golden}"));
        let mut args = vec![
            "run", &m, "-q", "--input", &ia, "--input", &ib, "--expect", &ex,
        ];
        args.extend_from_slice(extra);
        binary(&args)
    };
    let (code, stdout, stderr) = run_with(&good, &[]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains("expect: C (128 values) against"),
        "{stdout}"
    );
    assert!(
        stdout.contains("; 0 outside atol 1e-8 + rtol 1e-5"),
        "{stdout}"
    );
    assert!(stdout.trim_end().ends_with("PASS"), "{stdout}");

    let (code, stdout, stderr) = run_with(&bad, &[]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(stdout.contains("worst at [2, 5]"), "{stdout}");
    assert!(stdout.contains("; 1 outside atol"), "{stdout}");
    assert!(stdout.trim_end().ends_with("FAIL"), "{stdout}");
    assert!(
        stderr.contains("C do(es) not match the --expect golden"),
        "{stderr}"
    );

    // A looser tolerance passes the same golden.
    let (code, stdout, _) = run_with(&bad, &["--atol", "2e-3"]);
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("atol 2e-3"), "{stdout}");

    // A golden that cannot be read is an error naming the flag, before anything runs.
    let (code, _, stderr) = run_with(&pa.replace("a.npy", "nope.npy"), &[]);
    assert_eq!(code, 1);
    assert!(stderr.contains("in `--expect C="), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The run report names each phase once (prepare, run with its generation and execution,
/// check), says when generation ran before execution, counts barrier tasks apart from the
/// workload's tasks, prints throughput with significant figures and no counters the schedule
/// has no use for; end to end contains the run; the trace names tasks by kernel, with their
/// regions, on one named track per worker.
#[test]
fn run_report_and_trace_read_like_the_workload() {
    let dir = scratch("report");
    let trace = dir.join("trace.json");
    // Three for_each iterations of two tasks each: 6 tasks, and one barrier task before each
    // of the two later iterations.
    let text = "tensor A: f32[6, 4];\naxis I = dense(3);\n\
                kernel first(inout a: f32[4]);\nkernel second(inout a: f32[4]);\n\
                workload main() { for_each i in I { \
                task first(A[i * 2, 0 +: 4]); task second(A[i * 2 + 1, 0 +: 4]); } }\n\
                schedule for main { task_graph { start after_orchestration; } }\n";
    let opts = RunOptions {
        threads: 2,
        empty_kernels: true,
        trace: Some(trace.clone()),
        ..RunOptions::default()
    };
    let out = run("t.wsp", text, false, &opts, &mut |_| {}).unwrap();
    let r = &out.report;
    assert!(
        r.starts_with("t.wsp: ran 6 tasks (and 2 barrier task(s) joining structural orders)"),
        "{r}"
    );
    assert!(!r.contains("build"), "one name per phase: {r}");
    assert_eq!(r.matches("task generation").count(), 1, "{r}");
    assert!(
        r.contains("(before execution)") && !r.contains("overlapped"),
        "{r}"
    );
    assert!(
        !r.contains(" 0 tasks/ms") && !r.contains("high-water 0"),
        "{r}"
    );
    assert!(
        !r.contains("window") && !r.contains("gate") && !r.contains("batches"),
        "{r}"
    );
    assert!(r.contains("edges: "), "{r}");
    assert!(
        out.times.run_ms * 1e6 >= out.stats.run_ns as f64,
        "end to end {} ms is shorter than the run's {} ns",
        out.times.run_ms,
        out.stats.run_ns
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let events = json["traceEvents"].as_array().unwrap();
    let tracks: Vec<(u64, &str)> = events
        .iter()
        .filter(|e| e["name"] == "thread_name")
        .map(|e| {
            (
                e["tid"].as_u64().unwrap(),
                e["args"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(tracks, [(0, "worker 0"), (1, "worker 1")]);
    // One process: a run not modelled on a machine has only the wall clock.
    assert!(events.iter().all(|e| e["pid"] == 1), "{json}");
    let tasks: Vec<&serde_json::Value> = events.iter().filter(|e| e["ph"] == "X").collect();
    let named = |k: &str| tasks.iter().filter(|e| e["name"] == k).count();
    // The barrier tasks joining the iterations show as `barrier` (when a worker ran them).
    assert_eq!((named("first"), named("second")), (3, 3));
    assert!(named("barrier") <= 2 && tasks.len() == 6 + named("barrier"));
    assert!(
        tasks
            .iter()
            .any(|e| e["args"]["args"] == "inout A[3, 0 +: 4]"
                && e["args"]["regions"] == serde_json::json!(["inout A[3, 0 +: 4]"])),
        "{json}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_aliases_point_at_their_line() {
    let dir = scratch("alias");
    let bad = dir.join("bad.wsp");
    let body = "tensor A: f32[4];\nkernel k(out a: f32[4]);\nworkload main() {\n    task k(A[0 +: 4]);\n}\n";
    for (alias, needle) in [
        ("k=nosuch", "`nosuch`, which is not a registered kernel"),
        ("q=copy", "the module declares no kernel `q`"),
        ("k copy", "is not `NAME=BUILTIN`"),
    ] {
        std::fs::write(&bad, format!("// header\n//@ alias {alias}\n{body}")).unwrap();
        let (code, _, stderr) = binary(&["run", &bad.display().to_string()]);
        assert_eq!(code, 1);
        assert!(
            stderr.contains("bad kernel alias") && stderr.contains(needle),
            "{stderr}"
        );
        assert!(stderr.contains("bad.wsp:2:"), "{stderr}");
    }
    // A built-in's scalar parameters are declared: the module's kernel must match them.
    for ((decl, args), alias, needle) in [
        (
            ("kernel k(out a: f32[4], v: u64);", "0u"),
            "k=fill",
            "kernel `k` declares scalar parameters (u64), but built-in `fill` takes value: f64",
        ),
        (
            ("kernel k(out a: f32[4], v: f64, w: f64);", "1.0, 2.0"),
            "k=fill",
            "declares scalar parameters (f64, f64), but built-in `fill` takes value: f64",
        ),
        (
            ("kernel k(out a: f32[4], v: f64);", "1.0"),
            "k=counter",
            "declares scalar parameters (f64), but built-in `counter` takes no scalar parameters",
        ),
    ] {
        let text = body
            .replace("kernel k(out a: f32[4]);", decl)
            .replace("task k(A[0 +: 4]);", &format!("task k(A[0 +: 4], {args});"));
        std::fs::write(&bad, format!("// header\n//@ alias {alias}\n{text}")).unwrap();
        let (code, _, stderr) = binary(&["run", &bad.display().to_string()]);
        assert_eq!(code, 1);
        assert!(stderr.contains(needle), "{stderr}");
        assert!(stderr.contains("bad.wsp:2:"), "{stderr}");
    }
    // No alias and no built-in of that name: the declaration is pointed at.
    std::fs::write(&bad, body).unwrap();
    let (code, _, stderr) = binary(&["run", &bad.display().to_string()]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("bad.wsp:2:8") && stderr.contains("//@ alias k=BUILTIN"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn pipelines_run_per_process_and_deadlocks_fail_with_names() {
    let (code, stdout, stderr) =
        binary(&["run", "examples/csp_pipeline.wsp", "--bind", "ntiles=5"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("3 processes, one thread each"), "{stdout}");
    assert!(
        stdout.contains("loader 5, computer 5, storer 5"),
        "{stdout}"
    );
    let dir = scratch("deadlock");
    let f = dir.join("dead.wsp");
    std::fs::write(
        &f,
        "//@ alias k=counter
tensor X: f32[64];
axis N = dense(3);
kernel k(inout x: f32[1]);
pipeline p {
    channel data[1];
    channel go[1];
    process producer(produces data, go) {
        for_each i in N {
            task k(X[i]);
            send data(i);
        }
        send go(0);
    }
    process consumer(consumes data, go) {
        consume go as g {
            task k(X[10 + g]);
        }
        consume data as d {
            task k(X[20 + d]);
        }
    }
}
",
    )
    .unwrap();
    let (code, _, stderr) = binary(&["run", &f.display().to_string()]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("deadlock in pipeline `p`")
            && stderr.contains("process `producer` waits to send on channel `data`")
            && stderr.contains("process `consumer` waits to receive from channel `go`"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The `f32` data of a version-1 `.npy` file written by `--output`.
fn npy_f32(path: &std::path::Path) -> Vec<f32> {
    let bytes = std::fs::read(path).unwrap();
    let header = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    bytes[10 + header..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[test]
fn language_softmax_matches_the_builtin() {
    let dir = scratch("lang-softmax");
    let module = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/kernels/softmax.wsp"
    );
    let out = |n: &str| dir.join(format!("{n}.npy"));
    let spec = |n: &str| format!("{n}={}", out(n).display());
    let (code, stdout, stderr) = binary(&[
        "run",
        module,
        "--output",
        &spec("X"),
        "--output",
        &spec("Y"),
        "--output",
        &spec("Z"),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("ran 8 tasks"), "{stdout}");
    let (x, y, z) = (npy_f32(&out("X")), npy_f32(&out("Y")), npy_f32(&out("Z")));
    assert_eq!(x.len(), 32 * 64);
    // Independent f64 reference: softmax(0.125 x) per row.
    let (mut worst_lang, mut worst_builtin) = (0f64, 0f64);
    for r in 0..32 {
        let row = &x[r * 64..(r + 1) * 64];
        let m = row
            .iter()
            .map(|&v| 0.125 * v as f64)
            .fold(f64::MIN, f64::max);
        let e: Vec<f64> = row.iter().map(|&v| (0.125 * v as f64 - m).exp()).collect();
        let s: f64 = e.iter().sum();
        for c in 0..64 {
            let want = e[c] / s;
            let rel = |got: f32| ((got as f64 - want) / want).abs();
            worst_lang = worst_lang.max(rel(y[r * 64 + c]));
            worst_builtin = worst_builtin.max(rel(z[r * 64 + c]));
        }
    }
    // f32 arithmetic with the standard library's exp: a few ulp; the built-in's fast exp is
    // documented at up to ~4e-6 relative.
    assert!(worst_lang < 2e-6, "language kernel: {worst_lang:e}");
    assert!(worst_builtin < 1e-5, "built-in: {worst_builtin:e}");
    let diff = y
        .iter()
        .zip(&z)
        .map(|(a, b)| ((a - b) / b).abs())
        .fold(0f32, f32::max);
    assert!(diff < 1e-5, "language vs built-in: {diff:e}");
    eprintln!("softmax: language {worst_lang:e}, built-in {worst_builtin:e}, between {diff:e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Writes `data` as a version-1 little-endian `f32` `.npy` file of `shape`.
fn write_npy_f32(path: &std::path::Path, shape: &[usize], data: &[f32]) {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let mut header = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': ({},), }}",
        dims.join(", ")
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    for v in data {
        bytes.extend_from_slice(&v.to_le_bytes());
    }
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn language_rmsnorm_and_gemm_match_the_builtins() {
    let dir = scratch("lang-rms-gemm");
    let module = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/kernels/rmsnorm_gemm.wsp"
    );
    let path = |n: &str| dir.join(format!("{n}.npy"));
    let spec = |n: &str| format!("{n}={}", path(n).display());
    // Both accumulators start from the same values.
    let c0: Vec<f32> = (0..32 * 32)
        .map(|i| ((i * 37) % 101) as f32 / 50.0 - 1.0)
        .collect();
    write_npy_f32(&path("c0"), &[32, 32], &c0);
    let c0_spec = |n: &str| format!("{n}={}", path("c0").display());
    let mut args = vec!["run".to_string(), module.to_string(), "-q".into()];
    for n in ["C", "C2"] {
        args.extend(["--input".into(), c0_spec(n)]);
    }
    for n in ["X", "W", "Y", "Y2", "A", "B", "C", "C2"] {
        args.extend(["--output".into(), spec(n)]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, stdout, stderr) = binary(&args);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("ran 16 tasks"), "{stdout}");
    let t = |n: &str| npy_f32(&path(n));
    let (x, w, y, y2) = (t("X"), t("W"), t("Y"), t("Y2"));
    let (mut e_lang, mut e_builtin) = (0f64, 0f64);
    for r in 0..32 {
        let row = &x[r * 64..(r + 1) * 64];
        let ms: f64 = row.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / 64.0;
        let inv = 1.0 / (ms + 1e-6).sqrt();
        for c in 0..64 {
            let want = row[c] as f64 * inv * w[c] as f64;
            let scale = (row[c] as f64 * inv).abs().max(1e-30) * (w[c] as f64).abs().max(1e-30);
            e_lang = e_lang.max((y[r * 64 + c] as f64 - want).abs() / scale);
            e_builtin = e_builtin.max((y2[r * 64 + c] as f64 - want).abs() / scale);
        }
    }
    let (a, b, c, c2) = (t("A"), t("B"), t("C"), t("C2"));
    let (mut g_lang, mut g_builtin) = (0f64, 0f64);
    for i in 0..32 {
        for j in 0..32 {
            let terms: Vec<f64> = (0..64)
                .map(|k| a[i * 64 + k] as f64 * b[k * 32 + j] as f64)
                .collect();
            let want = c0[i * 32 + j] as f64 + terms.iter().sum::<f64>();
            let scale = (c0[i * 32 + j] as f64).abs() + terms.iter().map(|v| v.abs()).sum::<f64>();
            g_lang = g_lang.max((c[i * 32 + j] as f64 - want).abs() / scale);
            g_builtin = g_builtin.max((c2[i * 32 + j] as f64 - want).abs() / scale);
        }
    }
    eprintln!(
        "rmsnorm: language {e_lang:e}, built-in {e_builtin:e}; gemm: language {g_lang:e}, built-in {g_builtin:e}"
    );
    // f32 arithmetic: a row of 64 squares summed in f32 (≤ 64·2^-24 of the sum), an rsqrt and
    // two products — well under 1e-5 relative; a 64-term f32 dot product likewise relative to
    // the sum of magnitudes.
    for e in [e_lang, e_builtin, g_lang, g_builtin] {
        assert!(e < 1e-5, "{e:e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn language_decode_attention_matches_the_builtins() {
    let dir = scratch("lang-decode");
    let module = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/kernels/decode_attention.wsp"
    );
    let path = |n: &str| dir.join(format!("{n}.npy"));
    let mut args = vec!["run".to_string(), module.to_string(), "-q".into()];
    for n in [
        "Q", "K", "V", "PO", "PM", "PL", "OUT", "PO2", "PM2", "PL2", "OUT2",
    ] {
        args.extend(["--output".into(), format!("{n}={}", path(n).display())]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, _, stderr) = binary(&args);
    assert_eq!(code, 0, "{stderr}");
    let t = |n: &str| npy_f32(&path(n));
    let (q, k, v) = (t("Q"), t("K"), t("V"));
    // f64 reference: softmax(0.125 q k^T) v over the first 200 keys.
    let want = attention_reference(&q, &k, &v, 200, 64, 0.125);
    let scale = want.iter().map(|w| w.abs()).fold(0f64, f64::max);
    let err = |got: &[f32]| {
        got.iter()
            .zip(&want)
            .map(|(g, w)| (*g as f64 - w).abs() / scale)
            .fold(0f64, f64::max)
    };
    let (e_lang, e_builtin) = (err(&t("OUT")), err(&t("OUT2")));
    let partial = |a: &str, b: &str| {
        t(a).iter()
            .zip(&t(b))
            .map(|(x, y)| ((x - y) / y.abs().max(1e-3)).abs())
            .fold(0f32, f32::max)
    };
    let (dp, dm, dl) = (
        partial("PO", "PO2"),
        partial("PM", "PM2"),
        partial("PL", "PL2"),
    );
    eprintln!(
        "decode: language {e_lang:e}, built-in {e_builtin:e} (of max |out|); partial o {dp:e}, m {dm:e}, l {dl:e}"
    );
    // f32 dot products of 64 terms and sums of up to 200 exponentials; the built-in's fast exp
    // is ~4e-6 relative.
    assert!(
        e_lang < 1e-5 && e_builtin < 1e-5,
        "{e_lang:e} {e_builtin:e}"
    );
    assert!(dp < 1e-5 && dm < 1e-5 && dl < 1e-5, "{dp:e} {dm:e} {dl:e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn data_dependent_runs_report_computed_reads_and_unbound_reads_are_located() {
    // A computed read: the run serves it and reports it.
    let file = root().join("examples/datadep/converge.wsp");
    let (code, out, err) = binary(&["run", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("data-dependent generation: 11 computed read(s)")
            && out.contains("0 `while` loop(s) reached their `max`"),
        "{out}"
    );
    // The same in device-generation mode: every executor interprets the bytecode's `read`s.
    let (code, out, err) = binary(&["run", file.to_str().unwrap(), "--device-gen"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("data-dependent generation: 11 computed read(s)")
            && out.contains("0 `while` loop(s) reached their `max`")
            && out.contains("device generation:"),
        "{out}"
    );
    // A read of a tensor no task writes and nobody bound: refused at the read.
    let dir = scratch("unbound-read");
    let path = dir.join("u.wsp");
    std::fs::write(
        &path,
        "slot n: i64;\ntensor F: i64[4];\nkernel k(v: i64);\nworkload main() {\n    load n = F[1];\n    task k(n);\n}\n",
    )
    .unwrap();
    let (code, _, err) = binary(&["run", path.to_str().unwrap(), "--empty-kernels"]);
    assert_ne!(code, 0);
    assert!(
        err.contains("the contents of tensor `F` are not bound") && err.contains("u.wsp:5:5"),
        "{err}"
    );
    // A computed read out of range at run time: rendered at the read, host and device
    // generation alike.
    let path = dir.join("r.wsp");
    std::fs::write(
        &path,
        "slot s: i64;\ntensor H: i64[4];\ntensor A: i64[4];\n\
         kernel copy(in x: i64[?], out y: i64[?]);\nworkload main() {\n\
         \x20   task copy(H[0 +: 4], A[0 +: 4]);\n    load s = A[0];\n    load s = A[s];\n}\n",
    )
    .unwrap();
    for mode in [None, Some("--device-gen")] {
        let mut args = vec!["run", path.to_str().unwrap(), "--bind", "H=9,0,0,0"];
        args.extend(mode);
        let (code, _, err) = binary(&args);
        assert_ne!(code, 0);
        assert!(
            err.contains("index 9 is out of bounds") && err.contains("r.wsp:8:5"),
            "{mode:?}: {err}"
        );
    }
}

/// A host run puts each task on worker `target mod threads`, under every
/// ready policy. With stealing off (fifo, priority) the per-worker counts are `expand`'s
/// per-executor counts folded mod threads and nothing migrates; under work stealing every task
/// run off its target is counted as a migration (checked task by task against the trace).
#[test]
fn dispatch_targets_place_tasks_on_workers_under_every_ready_policy() {
    use pto_wsp::CompileOptions;
    use pto_wsp::compile;
    use pto_wsp::driver::{expand, lower};
    use pto_wsp_cli::{bindings_for, load_source};
    let text = std::fs::read_to_string(root().join("examples/softmax_3pass.wsp")).unwrap();
    let binds = ["rows=64".to_string(), "ntiles=4".to_string()];
    let dispatches = [
        "affinity(b)",
        "affinity(0)",
        "round_robin(3)",
        "hash(b * 7 + 1)",
        "static_partition(0, 5, 10, 20, 30, 40, 50, 70)",
        "threshold(b) { below 2: round_robin(5), else: affinity(3) }",
    ];
    for dispatch in dispatches {
        for ready in ["fifo", "priority(b)", "work_steal"] {
            let text = set_line(&set_line(&text, "dispatch", dispatch), "ready", ready);
            let loaded = load_source("softmax_3pass.wsp", &text).unwrap();
            let bindings = bindings_for(&loaded, &binds).unwrap();
            let plan = lower(&loaded).unwrap();
            let tasks = expand(&plan, &bindings, &Default::default()).unwrap().tasks;
            for threads in [2, 3] {
                let what = format!("{dispatch} {ready} threads {threads}");
                let target = |i: usize| tasks[i].target.expect("placed") as usize % threads;
                let mut expected = vec![0u64; threads];
                for i in 0..tasks.len() {
                    expected[target(i)] += 1;
                }
                let options = CompileOptions {
                    threads,
                    profiling: true,
                    ..CompileOptions::default()
                };
                let mut program = compile(plan.clone(), options).unwrap();
                let stats = program.execute(&bindings).unwrap();
                assert_eq!(stats.tasks, tasks.len() as u64, "{what}");
                let off = stats
                    .spans
                    .iter()
                    .filter(|s| s.worker as usize != target(s.task as usize))
                    .count() as u64;
                assert_eq!(stats.spans.len(), tasks.len(), "{what}");
                assert_eq!(stats.counters.migrations, off, "{what}");
                if ready == "work_steal" {
                    continue;
                }
                assert_eq!(off, 0, "{what}: {:?}", stats.spans);
                assert_eq!(stats.per_worker, expected, "{what}");
                if dispatch == "affinity(0)" {
                    assert!(stats.spans.iter().all(|s| s.worker == 0), "{what}");
                }
            }
        }
    }
}

#[test]
fn decode_attention_as_plans_gives_the_workloads_output_bit_for_bit() {
    let dir = scratch("pde_decode");
    let f = |n: &str| dir.join(n).display().to_string();
    let (q, k, v, o) = (f("q.npy"), f("k.npy"), f("v.npy"), f("o.npy"));
    let outs = [
        format!("Qd={q}"),
        format!("Kc={k}"),
        format!("Vc={v}"),
        format!("Od={o}"),
    ];
    let mut args = vec!["run", "examples/decode_ragged.wsp", "-q", "--threads", "2"];
    for s in &outs {
        args.extend(["--output", s.as_str()]);
    }
    let (code, _, stderr) = binary(&args);
    assert_eq!(code, 0, "{stderr}");
    let ins = [format!("Qd={q}"), format!("Kc={k}"), format!("Vc={v}")];
    let expect = format!("Od={o}");
    let mut args = vec![
        "run",
        "examples/pde/decode_attention.wsp",
        "-q",
        "--threads",
        "2",
    ];
    for s in &ins {
        args.extend(["--input", s.as_str()]);
    }
    args.extend(["--expect", &expect, "--rtol", "0", "--atol", "0"]);
    let (code, stdout, stderr) = binary(&args);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains("plan chunks: 136 descriptors (36 bytes each)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("plan merge_heads: 128 descriptors"),
        "{stdout}"
    );
    assert!(stdout.contains(": PASS"), "{stdout}");
}

#[test]
fn a_plan_error_is_rendered_at_its_file_line_and_column() {
    let dir = scratch("pde_error");
    let text = std::fs::read_to_string(root().join("examples/pde/decode_attention.wsp"))
        .unwrap()
        .replace("c = j, g = k", "c = j + 1, g = k");
    let path = dir.join("bad.wsp");
    std::fs::write(&path, &text).unwrap();
    let p = path.display().to_string();
    let (code, _, stderr) = binary(&["run", &p, "-q"]);
    assert_ne!(code, 0);
    let line = text.lines().position(|l| l.contains("c = j + 1")).unwrap() + 1;
    let col = text.lines().nth(line - 1).unwrap().find("emit").unwrap() + 1;
    assert!(
        stderr.contains(
            "error: plan `chunks`: space `Chunks`: descriptor field `c` = 8 is out of range (must be below 8)"
        ),
        "{stderr}"
    );
    assert!(stderr.contains(&format!("{p}:{line}:{col}")), "{stderr}");
}

#[test]
fn run_plans_runs_the_plans_of_a_module_that_also_has_a_workload() {
    let dir = scratch("pde_mixed");
    let read = |p: &str| std::fs::read_to_string(root().join(p)).unwrap();
    let (workload, plans) = (
        read("examples/decode_ragged.wsp"),
        read("examples/pde/decode_attention.wsp"),
    );
    let from = plans.find("\nspace Chunks {").unwrap();
    let long = plans
        .lines()
        .find(|l| l.starts_with("kernel decode_chunk_long("))
        .unwrap();
    let text = format!(
        "//@ alias decode_chunk_long=attn_decode_chunk\n{workload}\n{long}\n{}",
        &plans[from..]
    );
    let path = dir.join("mixed.wsp");
    std::fs::write(&path, text).unwrap();
    let p = path.display().to_string();
    let (code, stdout, stderr) = binary(&["run", &p, "-q"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("ran 264 tasks"),
        "the workload by default: {stdout}"
    );
    let (code, stdout, stderr) = binary(&["run", &p, "-q", "--plans"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("plan chunks: 136 descriptors"), "{stdout}");
    let (code, _, stderr) = binary(&["run", "examples/decode_ragged.wsp", "-q", "--plans"]);
    assert_ne!(code, 0);
    assert!(
        stderr.contains("`--plans`, but the module declares no plan"),
        "{stderr}"
    );
}

/// A workload whose 16-row tiles cover 64 of 70 rows of its output: `run` warns naming the six
/// unwritten rows (exit 0), `--strict` fails naming them and writes no `--output`.
#[test]
fn an_output_left_partly_unwritten_is_a_warning_or_under_strict_an_error() {
    let dir = common::scratch("coverage");
    let file = dir.join("relu.wsp");
    std::fs::write(
        &file,
        "symbol n: i64;\ntensor X: f32[n, 64];\ntensor Y: f32[n, 64];\naxis T = dense_dyn(n / 16);\n\
         kernel relu(in x: f32[16, 64], out y: f32[16, 64]) @vector;\n\
         workload main() {\n    parallel_for t in T {\n        task relu(X[t * 16 +: 16, 0 +: 64], Y[t * 16 +: 16, 0 +: 64]);\n    }\n}\n",
    )
    .unwrap();
    let file = file.to_str().unwrap();
    let out = dir.join("y.npy");
    let output = format!("Y={}", out.display());
    let (code, _, stderr) = common::binary(&["run", file, "--bind", "n=70", "-q"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("warning:")
            && stderr.contains("output tensor `Y` was not fully written: no task wrote its elements [64:70, 0:64] (384 of 4480)"),
        "{stderr}"
    );
    let (code, _, stderr) = common::binary(&[
        "run", file, "--bind", "n=70", "-q", "--strict", "--output", &output,
    ]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("[64:70, 0:64]") && stderr.contains("--strict"),
        "{stderr}"
    );
    assert!(!out.exists(), "nothing is written under --strict");
    let (code, _, stderr) = common::binary(&["run", file, "--bind", "n=64", "-q", "--strict"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
}

#[test]
fn a_module_of_plans_reaches_the_ascend_back_end_as_task_batches() {
    // The plans expanded at the file's bindings: 136 chunk descriptors, then 128 merges, each a
    // task; the tree's orchestration submits them, the batches separated by one barrier.
    let dir = scratch("pde_ascend");
    let out = dir.join("tree");
    let (code, stdout, stderr) = binary(&[
        "emit",
        "ascend",
        "examples/pde/decode_attention.wsp",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains(
            "plans expanded at the bindings into task batches, run in order: plan `chunks` 136 \
             tasks, plan `merge_heads` 128 tasks"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("264 kernel task(s), submitted as 264 AICore task(s), 1 barrier task(s)"),
        "{stdout}"
    );
    assert!(out.join("orchestration.cpp").is_file());
    let (code, stdout, stderr) = binary(&[
        "check",
        "examples/pde/decode_attention.wsp",
        "--target",
        "ascend_a2a3",
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("legal on a2a3"), "{stdout}");
    // A plan's mistake is reported at its `emit`, as a plan run reports it.
    let text = std::fs::read_to_string(root().join("examples/pde/decode_attention.wsp"))
        .unwrap()
        .replace("c = j, g = k", "c = j + 1, g = k");
    let path = dir.join("bad.wsp");
    std::fs::write(&path, &text).unwrap();
    let p = path.display().to_string();
    let (code, _, stderr) = binary(&["emit", "ascend", &p, "-o", out.to_str().unwrap()]);
    assert_ne!(code, 0);
    let line = text.lines().position(|l| l.contains("c = j + 1")).unwrap() + 1;
    let col = text.lines().nth(line - 1).unwrap().find("emit").unwrap() + 1;
    assert!(
        stderr.contains(
            "error: plan `chunks`: space `Chunks`: descriptor field `c` = 8 is out of range (must be below 8)"
        ),
        "{stderr}"
    );
    assert!(stderr.contains(&format!("{p}:{line}:{col}")), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
