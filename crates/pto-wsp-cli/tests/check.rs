//! `run --check` as a race detector: a conflicting pair that no path of the
//! run's graph orders fails the run, named, whatever the timing; sound modes pass; modes that
//! cannot be checked are refused by name.

mod common;

use common::{binary, root, scratch};
use pto_wsp::cpu::ExecError;
use pto_wsp::ir::{DepsMode, ExpandOptions};
use pto_wsp::{CompileOptions, RunError, compile};
use pto_wsp_cli::{bindings_for, load_source};

fn softmax() -> String {
    std::fs::read_to_string(root().join("examples/softmax_3pass.wsp")).unwrap()
}

#[test]
fn softmax_3pass_under_deps_exact_and_explicit_fails_check_naming_the_unordered_pair() {
    let text = softmax();
    let loaded = load_source("softmax_3pass.wsp", &text).unwrap();
    let bindings = bindings_for(&loaded, &[]).unwrap();
    // The oracle: the expander's tasks, compared pairwise. Under `deps exact` only equal
    // regions are ordered, under `deps explicit` nothing (the workload writes no order), so the
    // first task that conflicts with an earlier one on a different region is the first race.
    let lowered = pto_wsp::driver::lower(&loaded).unwrap();
    let tasks = pto_wsp::driver::expand(&lowered, &bindings, &ExpandOptions::default())
        .unwrap()
        .tasks;
    let boxes = |t: usize| {
        tasks[t]
            .regions
            .iter()
            .map(|r| (r.tensor, r.access, r.start.clone(), r.size.clone()))
            .collect::<Vec<_>>()
    };
    let conflict = |a: usize, b: usize| {
        boxes(a).iter().any(|(ta, aa, sa, za)| {
            boxes(b).iter().any(|(tb, ab, sb, zb)| {
                ta == tb
                    && (aa.writes() || ab.writes())
                    && (sa, za) != (sb, zb)
                    && (0..sa.len()).all(|d| sa[d] < sb[d] + zb[d] && sb[d] < sa[d] + za[d])
            })
        })
    };
    let later = (0..tasks.len())
        .find(|&b| (0..b).any(|a| conflict(a, b)))
        .expect("softmax_3pass has partial overlaps");
    for deps in [DepsMode::Exact, DepsMode::Explicit] {
        // From the binary, the static rule refuses the schedule before anything runs.
        let dir = scratch(&format!("check_softmax_{deps}"));
        let file = dir.join("softmax.wsp");
        std::fs::write(
            &file,
            text.replace("deps hybrid;", &format!("deps {deps};")),
        )
        .unwrap();
        let (code, _, err) = binary(&["run", "-q", "--check", file.to_str().unwrap()]);
        assert_ne!(code, 0);
        assert!(err.contains(&format!("under `deps {deps}`")), "{err}");
        // A plan whose mode is changed after lowering skips that rule (as the benchmarks do):
        // the run itself must catch the race, every time.
        let plan = lowered.clone().with_config_unchecked(|c| c.deps = deps);
        let options = CompileOptions {
            threads: 2,
            debug_checks: true,
            check_order: true,
            ..CompileOptions::default()
        };
        let mut program = compile(plan, options).unwrap();
        let err = program.execute(&bindings).unwrap_err();
        let RunError::Exec(ExecError::Unordered(u)) = &err else {
            panic!("{deps}: {err}");
        };
        assert_eq!(u.deps, deps);
        assert_eq!(u.indices[1] as usize, later, "{u}");
        assert!(conflict(u.indices[0] as usize, later), "{u}");
        let kernel = |t: usize| {
            loaded.module.kernels[tasks[t].kernel as usize]
                .name
                .name
                .clone()
        };
        assert_eq!(
            u.kernels,
            [kernel(u.indices[0] as usize), kernel(later)],
            "{u}"
        );
        assert_eq!(u.tensor, "Mpart", "{u}");
        let message = u.to_string();
        for part in [
            format!("task #{later} (`row_max`, in Mpart[0..16, 0..16])"),
            format!("task #{} (`row_max`, out Mpart[0..16, ", u.indices[0]),
            format!("under `deps {deps}`"),
            "conflict on tensor `Mpart`".to_string(),
        ] {
            assert!(message.contains(&part), "{part} not in {message}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn softmax_3pass_under_deps_overlap_and_hybrid_passes_check() {
    let text = softmax();
    for deps in ["overlap", "hybrid"] {
        let dir = scratch(&format!("check_softmax_ok_{deps}"));
        let file = dir.join("softmax.wsp");
        std::fs::write(
            &file,
            text.replace("deps hybrid;", &format!("deps {deps};")),
        )
        .unwrap();
        let (code, out, err) = binary(&[
            "run",
            "-q",
            "--check",
            "--threads",
            "2",
            file.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{deps}: {err}");
        assert!(out.contains("ran 328 tasks"), "{out}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn check_is_refused_naming_the_mode_where_it_is_not_implemented() {
    let gemm = root().join("examples/gemm.wsp");
    let (code, _, err) = binary(&[
        "run",
        "-q",
        "--empty-kernels",
        "--check",
        "--device-gen",
        gemm.to_str().unwrap(),
    ]);
    assert_ne!(code, 0);
    assert!(
        err.contains("--check") && err.contains("not implemented for device generation"),
        "{err}"
    );
    let csp = root().join("examples/csp_pipeline.wsp");
    let (code, _, err) = binary(&[
        "run",
        "-q",
        "--empty-kernels",
        "--check",
        csp.to_str().unwrap(),
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("not implemented for CSP pipelines"), "{err}");
}
