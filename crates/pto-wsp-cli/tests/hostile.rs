//! Hostile input: each case a user could write that once crashed the tool, exhausted
//! memory or raced silently, run through the binary, with the exact message it must now give.

mod common;

use common::{binary, scratch};
use std::path::Path;

/// Asserts a clean failure (exit 1, no panic) whose stderr contains `message`.
fn fails_with(args: &[&str], message: &str) {
    let (code, _, err) = binary(args);
    assert_eq!(code, 1, "{args:?}: exit {code}, stderr:\n{err}");
    assert!(!err.contains("panicked"), "{args:?} panicked:\n{err}");
    assert!(
        err.contains(message),
        "{args:?}: stderr does not contain\n  {message}\nbut is:\n{err}"
    );
}

#[test]
fn thread_counts_past_the_limit_are_refused_before_anything_starts() {
    for n in ["5000", "100000", "4294967296", "18446744073709551615"] {
        fails_with(
            &["run", "examples/gemm.wsp", "--threads", n, "-q"],
            &format!(
                "`--threads {n}` is more than the limit of 1024 worker threads (0 means one per core)"
            ),
        );
    }
}

/// A small GEMM run's arguments (one 128 x 128 tile).
const GEMM: [&str; 8] = [
    "run",
    "examples/gemm.wsp",
    "--bind",
    "M=128",
    "--bind",
    "N=128",
    "--bind",
    "K=128",
];

fn gemm(extra: &[&str]) -> Vec<String> {
    GEMM.iter()
        .chain(extra)
        .chain(&["-q"])
        .map(|s| s.to_string())
        .collect()
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[test]
fn output_paths_are_checked_before_the_run_and_nothing_is_half_written() {
    let dir = scratch("outputs");
    let good = dir.join("c.npy");
    let good_spec = format!("C={}", good.display());
    // A second output into a directory that does not exist: refused before the run, and the
    // first output is not written either.
    let bad_spec = format!("A={}", dir.join("missing/a.npy").display());
    let args = gemm(&["--output", &good_spec, "--output", &bad_spec]);
    fails_with(
        &strs(&args),
        &format!(
            "in `--output {bad_spec}`: the directory `{}` cannot be used: No such file or directory (os error 2)",
            dir.join("missing").display()
        ),
    );
    assert!(
        !good.exists(),
        "the first output was written although the run was refused"
    );
    // The same path twice (spelled differently) is an error, not a silent overwrite.
    let again = format!("A={}/./c.npy", dir.display());
    let args = gemm(&["--output", &good_spec, "--output", &again]);
    fails_with(
        &strs(&args),
        &format!(
            "`--output {again}` and `--output {good_spec}` write the same file `{}/./c.npy`",
            dir.display()
        ),
    );
    // An output naming no tensor is refused up front too.
    let args = gemm(&["--output", &format!("Z={}", good.display())]);
    fails_with(
        &strs(&args),
        &format!("in `--output Z={}`: no tensor is named `Z`", good.display()),
    );
    assert!(!good.exists());
    // A good run writes the file whole and leaves no temporary file behind.
    let args = gemm(&["--output", &good_spec]);
    let (code, _, err) = binary(&strs(&args));
    assert_eq!(code, 0, "{err}");
    let bytes = std::fs::read(&good).unwrap();
    let array = pto_wsp::kernels::npy::NpyArray::parse(&bytes).unwrap();
    assert_eq!(array.shape, [128, 128]);
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["c.npy"]);
}

#[test]
fn an_input_longer_than_its_tensor_is_refused_without_reading_it_all() {
    // /dev/zero never ends: it once was read until memory ran out. Inputs are read header
    // first (crate::inputs), so it is refused after its first bytes.
    let args = gemm(&["--input", "A=/dev/zero"]);
    fails_with(
        &strs(&args),
        "in `--input A=/dev/zero`: not a .npy file numpy wrote: it does not start with the magic string \\x93NUMPY",
    );
}

#[test]
fn an_npy_header_with_a_key_twice_is_refused() {
    let dir = scratch("npy-twice");
    let header = "{'descr': '<f2', 'fortran_order': False, 'shape': (128, 128), 'shape': (1,), }";
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(&vec![0u8; 128 * 128 * 2]);
    let path = dir.join("a.npy");
    std::fs::write(&path, bytes).unwrap();
    let spec = format!("A={}", path.display());
    let args = gemm(&["--input", &spec]);
    fails_with(
        &strs(&args),
        &format!(
            "in `--input {spec}`: not a .npy file numpy wrote: the header has `shape` 2 times (numpy would read only the last one)"
        ),
    );
}

#[test]
fn a_kernel_aliased_twice_is_refused_at_the_second_line() {
    let dir = scratch("alias-twice");
    let file = dir.join("twice.wsp");
    std::fs::write(
        &file,
        "//@ alias k=copy\n//@ alias k=fill\ntensor A: f32[4];\nkernel k(out a: f32[4]);\nworkload main() {\n    task k(A[0 +: 4]);\n}\n",
    )
    .unwrap();
    // `check` applies every static rule `run` does: both refuse it, at the same line.
    for cmd in [&["run", "-q"][..], &["check"]] {
        let args: Vec<String> = cmd
            .iter()
            .map(|s| s.to_string())
            .chain([file.display().to_string()])
            .collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, _, err) = binary(&args);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(
            err.contains(
                "bad kernel alias: second alias of `k` (to `fill`); line 1:11 already maps it to `copy`"
            ),
            "{args:?}: {err}"
        );
        assert!(err.contains("twice.wsp:2:11"), "{args:?}: {err}");
    }
}

#[test]
fn the_main_job_refuses_bad_bindings_before_it_runs() {
    fails_with(
        &["run", "--bind", "ffn=100", "-q"],
        "the main job needs `ffn` to be a multiple of 128 (the MLP's column tiles), not 100",
    );
    fails_with(
        &["run", "--bind", "max_chunks=9223372036854775807", "-q"],
        "the main job's `max_chunks` = 9223372036854775807 is too large: max_chunks * 256 overflows",
    );
    fails_with(
        &["run", "--bind", "layers=0", "-q"],
        "the main job needs `layers` of at least 1",
    );
}

/// `main -> w0 -> ... -> w{n-1}`, the last running one task: `main` is `n` levels deep.
fn call_chain(n: usize) -> String {
    let mut s = String::from(
        "tensor A: f32[4];\nkernel k(out a: f32[4]);\nworkload main() {\n    call w0();\n}\n",
    );
    for i in 0..n {
        let body = if i + 1 < n {
            format!("call w{}();", i + 1)
        } else {
            "task k(A[0 +: 4]);".to_string()
        };
        s.push_str(&format!("workload w{i}() {{ {body} }}\n"));
    }
    s
}

/// `depth` nested `if true { ... }` around `inner`.
fn ifs(depth: usize, inner: &str) -> String {
    format!(
        "{}{inner}{}",
        "if true { ".repeat(depth),
        " }".repeat(depth)
    )
}

/// `main` calls `a`; `a`, `b` and `c` are each `depth` ifs deep, `a` calling `b` calling `c`.
fn three_deep(depth: usize) -> String {
    format!(
        "tensor A: f32[4];\nkernel k(out a: f32[4]);\nworkload main() {{ call a(); }}\nworkload a() {{ {} }}\nworkload b() {{ {} }}\nworkload c() {{ {} }}\n",
        ifs(depth, "call b();"),
        ifs(depth, "call c();"),
        ifs(depth, "task k(A[0 +: 4]);")
    )
}

/// A pipeline whose producer is `depth` ifs deep.
fn deep_pipeline(depth: usize) -> String {
    format!(
        "tensor A: f32[4];\nkernel k(out a: f32[4]);\npipeline main {{\n    channel c[1];\n    process p(produces c) {{ {} }}\n    process q(consumes c) {{ consume c as v {{ task k(A[0 +: 4]); }} }}\n}}\n",
        ifs(depth, "task k(A[0 +: 4]); send c(1);")
    )
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

const COMMANDS: [&[&str]; 5] = [
    &["check"],
    &["expand"],
    &["bytecode"],
    &["run", "-q", "--empty-kernels"],
    &["run", "-q", "--empty-kernels", "--device-gen"],
];

#[test]
fn depth_adds_up_across_calls_and_is_refused_naming_the_chain() {
    let dir = scratch("depth");
    let cases = [
        (
            write(&dir, "chain.wsp", &call_chain(1000)),
            "workload `main` reaches 1000 levels of nesting and calls, more than the limit of 256, through the call chain main -> w0 -> w1 -> w2 -> w3 -> w4 -> ... (992 more) -> w997 -> w998 -> w999",
            "chain.wsp:3:10",
        ),
        (
            write(&dir, "three.wsp", &three_deep(250)),
            "workload `main` reaches 753 levels of nesting and calls, more than the limit of 256, through the call chain main -> a -> b -> c",
            "three.wsp:3:10",
        ),
    ];
    for (file, message, at) in &cases {
        for cmd in COMMANDS {
            let args: Vec<&str> = cmd.iter().copied().chain([file.as_str()]).collect();
            fails_with(&args, message);
            fails_with(&args, at);
        }
    }
    // A pipeline beside a deep call chain: refused before any process starts.
    let mut text = call_chain(1000);
    text = text.replace("workload main() {\n    call w0();\n}\n", "");
    text.push_str(
        "pipeline pipe {\n    channel c[1];\n    process p(produces c) { send c(1); }\n    process q(consumes c) { consume c as v { task k(A[0 +: 4]); } }\n}\n",
    );
    let file = write(&dir, "pipe.wsp", &text);
    for cmd in COMMANDS {
        let args: Vec<&str> = cmd.iter().copied().chain([file.as_str()]).collect();
        fails_with(
            &args,
            "workload `w0` reaches 999 levels of nesting and calls, more than the limit of 256, through the call chain w0 -> w1 -> w2 -> w3 -> w4 -> w5 -> ... (991 more) -> w997 -> w998 -> w999",
        );
    }
}

#[test]
fn programs_at_the_depth_limit_run_everywhere() {
    // Exactly the limit (256 levels), in this unoptimised build: every walk has the stack.
    let dir = scratch("depth-limit");
    let chain = write(&dir, "chain.wsp", &call_chain(256));
    let three = write(&dir, "three.wsp", &three_deep(84)); // 1 + 3 * 84 + 2 = 255
    for (file, cmds) in [(&chain, &COMMANDS[..]), (&three, &COMMANDS[..2])] {
        for cmd in cmds {
            let args: Vec<&str> = cmd.iter().copied().chain([file.as_str()]).collect();
            let (code, _, err) = binary(&args);
            assert_eq!(code, 0, "{args:?}: {err}");
        }
    }
    // Three workloads 84 ifs deep: 3 * 84 = 252 nested ifs is past the bytecode's 63 levels,
    // which is an error, not a crash; the host run works.
    let (code, out, err) = binary(&["run", "-q", "--empty-kernels", &three]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("ran 1 tasks"), "{out}");
    let pipe = write(&dir, "pipe.wsp", &deep_pipeline(252));
    let (code, out, err) = binary(&["run", "-q", "--empty-kernels", &pipe]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("ran 2 tasks in pipeline `main`"), "{out}");
}

/// A one-task module with `schedule` lines `items` (and a channel-free workload).
fn with_schedule(items: &str) -> String {
    format!(
        "tensor A: f32[4];\nkernel k(inout a: f32[4]);\nworkload main() {{\n    task k(A[0 +: 4]);\n}}\nschedule for main {{\n{items}\n}}\n"
    )
}

#[test]
fn sizes_the_user_controls_are_checked_against_stated_limits_before_allocating() {
    let dir = scratch("limits");
    for (items, message) in [
        (
            "    executors 4294967296;\n    task_graph { trace cycles; }",
            "`executors` is 4294967296, more than the limit of 65536",
        ),
        (
            "    batch_deps 2147483647;\n    task_graph { trace cycles; }",
            "`batch_deps` is 2147483647, more than the limit of 65536",
        ),
        (
            "    task_window 1000000000000 stall;",
            "`task_window` is 1000000000000, more than the limit of 16777216",
        ),
        (
            "    pipeline_depth 100000000 global;",
            "`pipeline_depth` is 100000000, more than the limit of 16777216",
        ),
        (
            "    streams 1000000;",
            "`streams` is 1000000, more than the limit of 65536",
        ),
    ] {
        let file = write(&dir, "s.wsp", &with_schedule(items));
        for cmd in COMMANDS {
            let args: Vec<&str> = cmd.iter().copied().chain([file.as_str()]).collect();
            fails_with(&args, message);
        }
    }
    // Pipeline tokens: a channel's depth.
    let file = write(
        &dir,
        "chan.wsp",
        "tensor A: f32[4];\nkernel k(out a: f32[4]);\npipeline main {\n    channel c[1000000000];\n    process p(produces c) { send c(1); }\n    process q(consumes c) { consume c as v { task k(A[0 +: 4]); } }\n}\n",
    );
    fails_with(
        &["run", "-q", "--empty-kernels", &file],
        "the depth of channel `c` is 1000000000, more than the limit of 1048576",
    );
    // Tensor sizes: 16 GiB in all.
    fails_with(
        &["run", "-q", "examples/gemm.wsp", "--bind", "M=8388608"],
        "tensor `A` (34359738368 bytes) brings the tensors to 34359738368 bytes, more than the limit of 17179869184 bytes",
    );
    // The command line's executor override.
    let (code, _, err) = binary(&["bytecode", "examples/gemm.wsp", "--executors", "4294967296"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("4294967296 is not in 1..=65536"), "{err}");
}

#[test]
fn the_reference_expander_refuses_past_its_task_limit() {
    let dir = scratch("many");
    let file = write(
        &dir,
        "many.wsp",
        "symbol n: i64;\ntensor A: f32[4];\naxis I = dense_dyn(n);\nkernel k(inout a: f32[4]);\nworkload main() {\n    parallel_for i in I {\n        task k(A[0 +: 4]);\n    }\n}\n",
    );
    fails_with(
        &["expand", "-q", &file, "--bind", "n=1000000000"],
        "the expansion generates more than 1048576 tasks, the most the reference expander keeps in memory (`run` streams them instead)",
    );
}

/// A race module once accepted (`A[0 +: 2]` and `A[0 +: 1]` updated by `inout` tasks in a
/// `parallel_for`) with `SCHED` as its schedule.
const RACE: &str = "//@ alias inc=counter\ntensor A: f32[1, 4];\naxis I = dense(3000);\nkernel inc(inout a: f32[1, ?]);\nworkload main() {\n    parallel_for i in I {\n        task inc(A[0, 0 +: 2]);\n        task inc(A[0, 0 +: 1]);\n    }\n}\nSCHED";

#[test]
fn partial_overlaps_under_the_default_deps_are_refused_when_run_naming_both_accesses() {
    // No `deps` item means exact dependencies: the same race as under `deps exact`. Expansion
    // only (expand, bytecode) accepts the module; `check` (every static rule of `run`) and
    // anything that runs it refuse it.
    let dir = scratch("default-exact");
    for (name, sched) in [
        ("none.wsp", ""),
        ("nodeps.wsp", "schedule for main {\n    executors 2;\n}\n"),
        (
            "cycles.wsp",
            "schedule for main {\n    task_graph { trace cycles; }\n}\n",
        ),
    ] {
        let file = write(&dir, name, &RACE.replace("SCHED", sched));
        for cmd in [&["expand"][..], &["bytecode"]] {
            let args: Vec<&str> = cmd.iter().copied().chain([file.as_str()]).collect();
            let (code, _, err) = binary(&args);
            assert_eq!(code, 0, "{args:?}: {err}");
        }
        for cmd in [
            &["check"][..],
            &["run", "-q", "--empty-kernels"],
            &["run", "-q", "--empty-kernels", "--device-gen"],
            &["run", "-q"],
        ] {
            let args: Vec<&str> = cmd.iter().copied().chain([file.as_str()]).collect();
            fails_with(
                &args,
                "the schedule names no `deps` mode, so dependencies are exact (the default), and `A[0, 0 +: 1]` (task inc, argument 0 in workload main) and `A[0, 0 +: 2]` (task inc, argument 0 in workload main) on tensor `A` can partially overlap (dimension 1 has extent `2` there and `1` here): exact dependencies order only identical regions, so the run could race; write `deps overlap;` or `deps hybrid;` in the schedule's `task_graph` (sound for overlapping regions), or access `A` in tiles of one shape at multiples of it",
            );
            fails_with(&args, &format!("{name}:8:18"));
        }
    }
}

#[test]
fn unordered_conflicts_under_deps_explicit_are_refused_when_run_naming_both_accesses() {
    // `deps explicit` infers no edges: this race once ran and lost updates. Expansion only
    // accepts the module; `check` (every static rule of `run`) and anything that runs it refuse
    // it, naming both accesses.
    let dir = scratch("explicit");
    let sched = "schedule for main {\n    task_graph { deps explicit; }\n}\n";
    let file = write(&dir, "race.wsp", &RACE.replace("SCHED", sched));
    for cmd in [&["expand"][..], &["bytecode"]] {
        let args: Vec<&str> = cmd.iter().copied().chain([file.as_str()]).collect();
        let (code, _, err) = binary(&args);
        assert_eq!(code, 0, "{args:?}: {err}");
    }
    let runs = [
        &["check"][..],
        &["run", "-q", "--empty-kernels"],
        &["run", "-q", "--empty-kernels", "--device-gen"],
        &["run", "-q"],
    ];
    for cmd in runs {
        let args: Vec<&str> = cmd.iter().copied().chain([file.as_str()]).collect();
        fails_with(
            &args,
            "under `deps explicit`, `A[0, 0 +: 1]` (task inc, argument 0 in workload main) and `A[0, 0 +: 2]` (task inc, argument 0 in workload main) on tensor `A` can conflict (at least one writes), and explicit dependencies infer no edges: a run is allowed only when each tensor a task writes is accessed by a single task that runs once; use `deps exact`, `deps overlap` or `deps hybrid`",
        );
        fails_with(&args, "race.wsp:8:18");
    }
    // One of the two statements alone still repeats in the `parallel_for`: refused, naming it.
    let one = write(
        &dir,
        "one.wsp",
        &RACE
            .replace("SCHED", sched)
            .replace("        task inc(A[0, 0 +: 1]);\n", ""),
    );
    fails_with(
        &["run", "-q", "--empty-kernels", &one],
        "under `deps explicit`, `A[0, 0 +: 2]` (task inc, argument 0 in workload main), whose statement may run more than once, and another instance of itself on tensor `A` can conflict",
    );
    fails_with(&["run", "-q", "--empty-kernels", &one], "one.wsp:7:18");
    // A written tensor touched by one task that runs once is accepted, and the run does what
    // the module says: one update of elements 0 and 1, on top of the seed's values.
    let once = "//@ alias inc=counter\ntensor A: f32[1, 4];\nkernel inc(inout a: f32[1, ?]);\nworkload main() {\n    TASKS}\nschedule for main {\n    task_graph { deps explicit; }\n}\n";
    let npy = |name: &str, tasks: &str| {
        let file = write(&dir, &format!("{name}.wsp"), &once.replace("TASKS", tasks));
        let out = dir.join(format!("{name}.npy"));
        let (code, _, err) = binary(&[
            "run",
            "-q",
            "--check",
            &file,
            "--output",
            &format!("A={}", out.display()),
        ]);
        assert_eq!(code, 0, "{err}");
        pto_wsp::kernels::npy::NpyArray::parse(&std::fs::read(&out).unwrap()).unwrap()
    };
    let before = npy("before", "");
    let after = npy("after", "task inc(A[0, 0 +: 2]);\n");
    let f = |a: &pto_wsp::kernels::npy::NpyArray, i: usize| {
        f32::from_le_bytes(a.data[i * 4..i * 4 + 4].try_into().unwrap())
    };
    assert_eq!(f(&after, 0), f(&before, 0) + 1.0);
    assert_eq!(f(&after, 1), f(&before, 1) + 1.0);
    assert_eq!(f(&after, 2), f(&before, 2));
}

#[test]
fn partial_overlaps_under_deps_exact_are_refused_naming_both_accesses() {
    // A race once accepted: `A[0 +: 2]` and `A[0 +: 1]` updated by `inout` tasks got no edge and
    // lost updates (5,990 instead of 6,000), exit 0.
    let dir = scratch("exact");
    let text = "//@ alias inc=counter\ntensor A: f32[1, 4];\naxis I = dense(3000);\nkernel inc(inout a: f32[1, ?]);\nworkload main() {\n    parallel_for i in I {\n        task inc(A[0, 0 +: 2]);\n        task inc(A[0, 0 +: 1]);\n    }\n}\nschedule for main {\n    task_graph { deps exact; }\n}\n";
    let file = write(&dir, "race.wsp", text);
    for cmd in COMMANDS {
        let args: Vec<&str> = cmd.iter().copied().chain([file.as_str()]).collect();
        fails_with(
            &args,
            "under `deps exact`, `A[0, 0 +: 1]` (task inc, argument 0 in workload main) and `A[0, 0 +: 2]` (task inc, argument 0 in workload main) on tensor `A` can partially overlap (dimension 1 has extent `2` there and `1` here), and exact dependencies order only identical regions: use `deps overlap` or `deps hybrid`, or access `A` in tiles of one shape at multiples of it",
        );
        fails_with(&args, "race.wsp:8:18");
    }
    // The suggested fix runs and gets every update: 6,000 on element 0, 3,000 on element 1, on
    // top of the seed's values (read back from the same module with no tasks).
    let fixed = write(
        &dir,
        "fixed.wsp",
        &text.replace("deps exact", "deps hybrid"),
    );
    let out = dir.join("a.npy");
    let (code, _, err) = binary(&[
        "run",
        "-q",
        "--check",
        &fixed,
        "--output",
        &format!("A={}", out.display()),
    ]);
    assert_eq!(code, 0, "{err}");
    let before = {
        let (code, _, err) = binary(&[
            "run",
            "-q",
            &write(
                &dir,
                "none.wsp",
                &text.replace(
                    "task inc(A[0, 0 +: 2]);\n        task inc(A[0, 0 +: 1]);\n",
                    "",
                ),
            ),
            "--output",
            &format!("A={}", dir.join("before.npy").display()),
        ]);
        assert_eq!(code, 0, "{err}");
        pto_wsp::kernels::npy::NpyArray::parse(&std::fs::read(dir.join("before.npy")).unwrap())
            .unwrap()
    };
    let after = pto_wsp::kernels::npy::NpyArray::parse(&std::fs::read(&out).unwrap()).unwrap();
    let f = |a: &pto_wsp::kernels::npy::NpyArray, i: usize| {
        f32::from_le_bytes(a.data[i * 4..i * 4 + 4].try_into().unwrap())
    };
    assert_eq!(f(&after, 0), f(&before, 0) + 6000.0);
    assert_eq!(f(&after, 1), f(&before, 1) + 3000.0);
    assert_eq!(f(&after, 2), f(&before, 2));
}

#[test]
fn compile_to_a_bad_path_names_the_path_given_and_leaves_nothing_behind() {
    let dir = scratch("compile-out");
    let listing = |d: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    // `-o DIR` where DIR is a directory, for a target that writes one file and for one that
    // writes a tree: refused, naming DIR; no `DIR.partial` nor temporary file left.
    let target_dir = dir.join("out");
    std::fs::create_dir_all(target_dir.join("keep")).unwrap();
    for (target, example) in [
        ("bytecode", "examples/gemm.wsp"),
        ("pto_isa", "examples/kernels/softmax.wsp"),
    ] {
        let o = target_dir.display().to_string();
        let args = ["compile", example, "--target", target, "-o", &o];
        let (code, _, err) = binary(&args);
        assert_eq!(code, 1, "{target}: {err}");
        assert!(
            err.contains(&format!("cannot write `{o}`")),
            "{target}: {err}"
        );
        assert!(
            !err.contains("partial") && !err.contains(".pto-wsp-out"),
            "{err}"
        );
        assert_eq!(listing(&dir), ["out"], "{target}");
        assert_eq!(listing(&target_dir), ["keep"], "{target}");
    }
    // `-o missing/x.bc`: the message names the path given, not a temporary one.
    let missing = dir.join("missing").join("x.bc").display().to_string();
    let args = [
        "compile",
        "examples/gemm.wsp",
        "--target",
        "bytecode",
        "-o",
        &missing,
    ];
    let (code, _, err) = binary(&args);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains(&format!("cannot write `{missing}`")), "{err}");
    assert!(!err.contains("partial"), "{err}");
    assert_eq!(listing(&dir), ["out"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_output_past_the_file_size_limit_is_an_error_that_leaves_no_temporary_file() {
    // Under `ulimit -f` a write past the limit raised SIGXFSZ and killed the run, leaving its
    // `.pto-wsp-out*` temporary file. Now the write fails, the error names the path given, and
    // the temporary file is removed.
    let dir = scratch("fsize");
    let out = dir.join("c.npy").display().to_string();
    let script = format!(
        "ulimit -f 64 && exec '{}' run examples/gemm.wsp -q --empty-kernels --bind M=256 \
         --bind N=256 --bind K=256 --output C={out}",
        env!("CARGO_BIN_EXE_pto-wsp")
    );
    let o = std::process::Command::new("sh")
        .current_dir(common::root())
        .args(["-c", &script])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("cannot write `{out}`")) && err.contains("File too large"),
        "{err}"
    );
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn run_time_errors_name_the_statement_at_file_line_column() {
    let dir = scratch("runtime-loc");
    // An expression that fails only at run time (`n - 4` is 0): the task statement's place.
    let div = "symbol n: i64;\ntensor A: f32[n, 4];\naxis I = dense(4);\nkernel k(out a: f32[1, 4]);\nworkload main() {\n    parallel_for i in I {\n        task k(A[i / (n - 4), 0 +: 4]);\n    }\n}\n";
    let file = write(&dir, "div.wsp", div);
    for cmd in [&["run", "-q", "--empty-kernels"][..], &["expand", "-q"]] {
        let args: Vec<&str> = cmd
            .iter()
            .copied()
            .chain([file.as_str(), "--bind", "n=4"])
            .collect();
        fails_with(&args, "division by zero");
        fails_with(&args, "div.wsp:7:9");
    }
    // A negative loop extent, at its loop.
    let neg = "symbol n: i64;\ntensor A: f32[4, 4];\naxis I = dense_dyn(n);\nkernel k(out a: f32[1, 4]);\nworkload main() {\n    parallel_for i in I {\n        task k(A[0, 0 +: 4]);\n    }\n}\n";
    let file = write(&dir, "neg.wsp", neg);
    let args = ["expand", "-q", file.as_str(), "--bind", "n=-5"];
    fails_with(&args, "is negative (-5)");
    fails_with(&args, "neg.wsp:6:5");
    // Text that is not UTF-8: the byte, its offset, line and column.
    let bad = dir.join("utf.wsp");
    std::fs::write(&bad, b"tensor A: f32[4];\n// \xff\xfe\n").unwrap();
    let b = bad.display().to_string();
    fails_with(
        &["check", &b],
        &format!("{b}:2:4: not UTF-8 text: byte 21 (0xff) begins no UTF-8 character"),
    );
    let _ = std::fs::remove_dir_all(&dir);
}
