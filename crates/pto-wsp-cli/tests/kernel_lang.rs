//! Kernels written in tile instructions, end to end through `pto-wsp run`: the 3-pass softmax
//! against an `f64` reference, `trace cycles` charging them per instruction (the prototype's
//! figures), and the split-KV decode chunk with no valid keys next to the built-in.

mod common;

use common::{attention_reference, binary, root, scratch};
use pto_wsp::kernels::npy::NpyArray;
use std::path::Path;

fn npy_f32(path: &Path) -> Vec<f32> {
    let a = NpyArray::parse(&std::fs::read(path).unwrap()).unwrap();
    assert_eq!((a.kind, a.size), ('f', 4), "{}", path.display());
    bytemuck::cast_slice::<u8, f32>(&a.data).to_vec()
}

/// Runs `pto-wsp run FILE ARGS... --output T=DIR/T.npy` for each of `tensors`; returns stdout.
fn run_with_outputs(file: &str, args: &[&str], dir: &Path, tensors: &[&str]) -> String {
    let mut all: Vec<String> = vec!["run".into(), file.into(), "-q".into()];
    all.extend(args.iter().map(|a| a.to_string()));
    for t in tensors {
        all.extend([
            "--output".into(),
            format!("{t}={}", dir.join(format!("{t}.npy")).display()),
        ]);
    }
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let (code, stdout, stderr) = binary(&all);
    assert_eq!(code, 0, "{stdout}{stderr}");
    stdout
}

#[test]
fn three_pass_softmax_in_tile_instructions_matches_an_f64_reference() {
    let dir = scratch("lang-softmax3");
    run_with_outputs(
        "examples/kernels/cycles_golden.wsp",
        &[],
        &dir,
        &["X", "M", "L", "Y"],
    );
    let t = |n: &str| npy_f32(&dir.join(format!("{n}.npy")));
    let (x, m, l, y) = (t("X"), t("M"), t("L"), t("Y"));
    let (mut worst_y, mut worst_l) = (0f64, 0f64);
    for r in 0..8 {
        let row = &x[r * 256..(r + 1) * 256];
        let mx = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        // The running max over four chunks is the row's max, exactly.
        assert_eq!(m[r], mx, "row {r}");
        let e: Vec<f64> = row.iter().map(|&v| (v as f64 - mx as f64).exp()).collect();
        let z: f64 = e.iter().sum();
        worst_l = worst_l.max((l[r] as f64 - z).abs() / z);
        for c in 0..256 {
            let want = e[c] / z;
            worst_y = worst_y.max((y[r * 256 + c] as f64 - want).abs() / want);
        }
    }
    // f32 exp (≤ 1 ulp) and f32 sums of 256 positive terms of at most 1: a few 1e-7 relative
    // in practice, 256 · 2⁻²⁴ ≈ 1.5e-5 at worst.
    eprintln!("3-pass softmax: y {worst_y:e}, l {worst_l:e} (relative)");
    assert!(
        worst_y < 1.5e-5 && worst_l < 1.5e-5,
        "{worst_y:e} {worst_l:e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The numbers after `key ` in the run report's cycle-model line.
fn figure(report: &str, key: &str) -> u64 {
    let line = report
        .lines()
        .find(|l| l.contains("cycle model:"))
        .unwrap_or_else(|| panic!("no cycle model line in:\n{report}"));
    let at = line
        .find(key)
        .unwrap_or_else(|| panic!("no `{key}` in {line}"))
        + key.len();
    line[at..]
        .trim_start()
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn trace_cycles_charges_language_kernels_per_instruction() {
    let dir = scratch("lang-cycles");
    let text = std::fs::read_to_string(root().join("examples/kernels/cycles_golden.wsp")).unwrap();
    // The prototype's figures (published with it, not computed here): bgemm 5,632, attention 1,680,
    // softmax passes 544 / 2,088 / 1,544; the example's device-legal bgemm adds two TMOVs from
    // L1 into L0 (2 · 256), its attention three (3 · 64) and stores its accumulator directly
    // (one TMOV of 64 fewer); the init kernel is two TEXPANDS and two TSTOREs on 8 x 1 tiles:
    // 4 · 8 = 32. Pass 1 and pass 2 chain through m and l; the four pass-3 tasks depend only on
    // the last pass 2.
    let work = (5_632 + 2 * 256) + (1_680 + 2 * 64) + 32 + 4 * (544 + 2_088 + 1_544);
    let critical = 32 + 4 * 544 + 4 * 2_088 + 1_544;
    for executors in [1u64, 2] {
        let file = dir.join(format!("cycles{executors}.wsp"));
        std::fs::write(
            &file,
            format!(
                "{text}\nschedule for main {{\n    executors {executors};\n    task_graph {{\n        trace cycles;\n    }}\n}}\n"
            ),
        )
        .unwrap();
        let (code, stdout, stderr) = binary(&["run", file.to_str().unwrap(), "-q"]);
        assert_eq!(code, 0, "{stdout}{stderr}");
        assert_eq!(figure(&stdout, "work"), work, "{stdout}");
        assert_eq!(figure(&stdout, "critical path"), critical, "{stdout}");
        let total = figure(&stdout, "total_cycles");
        if executors == 1 {
            assert_eq!(total, work, "{stdout}");
        } else {
            // A list schedule on two executors: no shorter than the critical path or half
            // the work, no longer than one executor.
            assert!(
                total >= critical.max(work.div_ceil(2)) && total < work,
                "{stdout}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn decode_chunk_with_no_valid_keys_matches_the_builtin_after_the_merge() {
    let dir = scratch("lang-empty-chunk");
    // kv = 192: chunks of 64, 64, 64 and an empty one.
    run_with_outputs(
        "examples/kernels/decode_attention.wsp",
        &["--bind", "kv=192"],
        &dir,
        &[
            "Q", "K", "V", "PO", "PM", "PL", "OUT", "PO2", "PM2", "PL2", "OUT2",
        ],
    );
    let t = |n: &str| npy_f32(&dir.join(format!("{n}.npy")));
    let (po, pm, pl) = (t("PO"), t("PM"), t("PL"));
    let (po2, pm2, pl2) = (t("PO2"), t("PM2"), t("PL2"));
    // The empty chunk: o = 0 and l = 0 from both; m = -3e38 (language) and -inf (built-in).
    assert!(
        po[3 * 64..].iter().all(|&v| v == 0.0),
        "{:?}",
        &po[3 * 64..]
    );
    assert!(po2[3 * 64..].iter().all(|&v| v == 0.0));
    assert_eq!((pl[3], pl2[3]), (0.0, 0.0));
    assert_eq!(pm[3], -3e38f32);
    assert_eq!(pm2[3], f32::NEG_INFINITY);
    // The other chunks agree, and both merges give attention over the 192 keys.
    for c in 0..3 {
        assert!((pm[c] - pm2[c]).abs() <= 1e-5 * pm2[c].abs().max(1.0));
        assert!((pl[c] - pl2[c]).abs() <= 1e-5 * pl2[c]);
    }
    let (q, k, v) = (t("Q"), t("K"), t("V"));
    let want = attention_reference(&q, &k, &v, 192, 64, 0.125);
    let scale = want.iter().fold(0f64, |m, w| m.max(w.abs()));
    for (name, got) in [("OUT", t("OUT")), ("OUT2", t("OUT2"))] {
        let err = got
            .iter()
            .zip(&want)
            .fold(0f64, |m, (g, w)| m.max((*g as f64 - w).abs() / scale));
        // As `language_decode_attention_matches_the_builtins`: f32 dots of 64 terms, sums of
        // 192 exponentials, the built-in's fast exp (~4e-6).
        assert!(err < 1e-5, "{name}: {err:e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bgemm_makespan_beside_the_prototype_serial_issue_figure() {
    // The prototype reports a bgemm makespan of 275,968 cycles = 49 × 5,632: 49 bgemm tile
    // tasks issued one after another. The same 49 tasks here (the prototype's bgemm sequence,
    // test_data/kernels/prototype_cycles.wsp): 7 independent output tiles, each accumulating 7
    // K steps in a chain.
    let dir = scratch("lang-bgemm");
    let text =
        std::fs::read_to_string(root().join("test_data/kernels/prototype_cycles.wsp")).unwrap();
    let kernels = &text[..text.find("workload main()").unwrap()];
    for (executors, want) in [(1u64, 275_968u64), (8, 7 * 5_632)] {
        let file = dir.join(format!("bgemm{executors}.wsp"));
        std::fs::write(
            &file,
            format!(
                "{kernels}tensor AB: f16[16, 112];\ntensor BB: f16[112, 112];\ntensor CB: f32[16, 112];\n\
                 axis J = dense(7);\naxis KS = dense(7);\n\n\
                 workload main() {{\n    parallel_for j in J {{\n        for_each k in KS {{\n            \
                 task bgemm(AB[0 +: 16, k * 16 +: 16], BB[k * 16 +: 16, j * 16 +: 16], CB[0 +: 16, j * 16 +: 16]);\n        \
                 }}\n    }}\n}}\n\nschedule for main {{\n    executors {executors};\n    task_graph {{\n        trace cycles;\n    }}\n}}\n"
            ),
        )
        .unwrap();
        let (code, stdout, stderr) = binary(&["run", file.to_str().unwrap(), "-q"]);
        assert_eq!(code, 0, "{stdout}{stderr}");
        assert_eq!(figure(&stdout, "work"), 275_968, "{stdout}");
        assert_eq!(figure(&stdout, "critical path"), 7 * 5_632, "{stdout}");
        // One executor issues serially, as the prototype; eight run the seven chains at once.
        assert_eq!(figure(&stdout, "total_cycles"), want, "{stdout}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
