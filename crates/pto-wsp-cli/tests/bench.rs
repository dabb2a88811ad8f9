//! Smoke test of `pto-wsp bench`: the library runs every section on tiny shapes and names every
//! shape it measured. No timing is asserted (the figures depend on the machine).

use pto_wsp::cpu::shapes::Shape;
use pto_wsp_cli::bench::{BenchOptions, bench_report};
use pto_wsp_cli::bench_kernels::KernelBench;
use std::time::Duration;

#[test]
fn bench_runs_every_section_and_names_every_shape() {
    let shapes: Vec<Shape> = [
        "chain:50",
        "tree:5",
        "independent:40",
        "wavefront:6",
        "random:5:7",
    ]
    .iter()
    .map(|s| s.parse().unwrap())
    .collect();
    let mut opts = BenchOptions::new(shapes.clone(), true, vec![1, 2], 1);
    opts.scaling = vec![Shape::Independent(20), Shape::Wavefront(4)];
    opts.spin = Duration::from_micros(2);
    opts.idle = Duration::from_millis(20);
    opts.llama = vec![64];
    opts.kernels = Some(KernelBench {
        sizes: vec![64],
        attn: vec![("f16", 1)],
        target: Duration::from_millis(1),
        rounds: 1,
    });
    opts.main_job = Some(
        [
            "nreq=2",
            "kv_heads=1",
            "ffn=128",
            "max_chunks=2",
            "kv_lens=[3, 400]",
        ]
        .map(String::from)
        .to_vec(),
    );
    opts.devgen = vec![64];
    let text = bench_report(&opts).unwrap();
    for shape in shapes.iter().chain(&opts.scaling) {
        assert!(
            text.contains(&shape.to_string()),
            "{shape} missing:\n{text}"
        );
    }
    for section in [
        "machine:",
        "run-only",
        "build+run (stream)",
        "build+run (finish)",
        "thread scaling",
        "idle CPU",
        "gate-blocked",
        "LLaMA-7B prefill layer",
        "GEMM through TaskContext views",
        "decode attention chunk",
        "kernels written in tile instructions",
        "attn chunk 1x64, 64 keys",
        "vs the standard library's f32::exp",
        "softmax 32x1024",
        "main job",
        "PASS",
        "Device generation: LLaMA-7B",
        "finished/devgen",
    ] {
        assert!(text.contains(section), "{section} missing:\n{text}");
    }
}

#[test]
fn bench_defaults_to_the_standard_shapes_and_rejects_bad_options() {
    let opts = BenchOptions::new(vec![], true, vec![1], 1);
    assert_eq!(opts.shapes.len(), 5);
    let mut bad = opts.clone();
    bad.threads = vec![0];
    assert!(bench_report(&bad).is_err());
    let mut bad = opts;
    bad.repeat = 0;
    assert!(bench_report(&bad).is_err());
}

#[test]
fn bench_processes_runs_separate_processes_and_merges_them() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pto-wsp"))
        .args([
            "bench",
            "independent:50",
            "--threads",
            "1",
            "--repeat",
            "1",
            "--processes",
            "3",
            "--llama",
            "0",
            "--no-kernels",
            "--no-main-job",
            "--devgen",
            "0",
        ])
        .env_remove(pto_wsp_cli::bench_median::CHILD_ENV)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}\n{err}");
    assert!(
        text.starts_with("# median[min-max] over 3 processes of: pto-wsp bench independent:50"),
        "{text}"
    );
    // Each child announced itself on stderr, and the shape's block is printed once.
    for i in 1..=3 {
        assert!(err.contains(&format!("bench: process {i}/3")), "{err}");
    }
    assert_eq!(
        text.matches("independent:50: 50 tasks").count(),
        1,
        "{text}"
    );
}
