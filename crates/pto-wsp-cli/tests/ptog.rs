//! `pto-wsp asm`, `disasm`, `compile --target ptog` and `run` of task-graph programs
//! (docs/ISA.md), end to end through the binary.

mod common;

use common::{binary, scratch};

#[test]
fn asm_and_disasm_round_trip_every_example() {
    let dir = scratch("ptog-asm");
    for name in [
        "deepseek_indexer_attention",
        "converge",
        "converge_in_graph",
        "tour",
        "exchange_device0",
    ] {
        let src = format!("examples/ptog/{name}.ptoasm");
        let out = dir.join(format!("{name}.ptog"));
        let (code, stdout, stderr) = binary(&["asm", &src, "-o", out.to_str().unwrap()]);
        assert_eq!(code, 0, "{stderr}");
        assert!(stdout.starts_with(&format!("{src}: ")), "{stdout}");
        let (code, text, stderr) = binary(&["disasm", out.to_str().unwrap()]);
        assert_eq!(code, 0, "{stderr}");
        // The disassembly assembles to the same bytes.
        let again = dir.join(format!("{name}.again.ptoasm"));
        std::fs::write(&again, &text).unwrap();
        let back = dir.join(format!("{name}.again.ptog"));
        let (code, _, stderr) =
            binary(&["asm", again.to_str().unwrap(), "-o", back.to_str().unwrap()]);
        assert_eq!(code, 0, "{stderr}");
        assert_eq!(
            std::fs::read(&out).unwrap(),
            std::fs::read(&back).unwrap(),
            "{name}"
        );
    }
}

#[test]
fn mistakes_are_reported_where_they_are() {
    let dir = scratch("ptog-errors");
    let bad = dir.join("bad.ptoasm");
    std::fs::write(&bad, "TG_BEGIN(G)\n    TG_BEGIN(H)\n").unwrap();
    let out = dir.join("bad.ptog");
    let (code, _, stderr) = binary(&["asm", bad.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(
        stderr.contains(&format!(
            "{}:2:5: TG_BEGIN(H) inside the definition of graph G: graphs do not nest",
            bad.display()
        )),
        "{stderr}"
    );
    assert!(!out.exists(), "nothing is written");
    let bin = dir.join("bad.bin");
    std::fs::write(&bin, b"PTOGxx").unwrap();
    let (code, _, stderr) = binary(&["disasm", bin.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(
        stderr.contains(&format!(
            "{}: byte 6: the header is truncated: 6 of 48 bytes",
            bin.display()
        )),
        "{stderr}"
    );
    // Flags of the other kind of run are refused, not ignored.
    let (code, _, stderr) = binary(&["run", "examples/ptog/tour.ptoasm", "--strict"]);
    assert_ne!(code, 0);
    assert!(
        stderr.contains("--strict is for .wsp modules, not task-graph binaries"),
        "{stderr}"
    );
    let (code, _, stderr) = binary(&["run", "examples/gemm.wsp", "--cores", "1,1,1"]);
    assert_ne!(code, 0);
    assert!(
        stderr.contains("--kernels, --device and --cores are for task-graph binaries (.ptog)"),
        "{stderr}"
    );
}

#[test]
fn a_compiled_module_runs_as_a_task_graph() {
    let dir = scratch("ptog-compile");
    let out = dir.join("llama.ptog");
    let (code, stdout, stderr) = binary(&[
        "compile",
        "examples/llama_block.wsp",
        "--target",
        "ptog",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("for target `ptog`"), "{stdout}");
    let (code, stdout, stderr) = binary(&[
        "run",
        out.to_str().unwrap(),
        "--kernels",
        "examples/llama_block.wsp",
        "--cores",
        "1,2,1",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("1 launch(es), 448 kernel run(s), 448 instance(s)"),
        "{stdout}"
    );
    // Without the module's kernels, its aliases are unknown symbols.
    let (code, _, stderr) = binary(&["run", out.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(
        stderr.contains("runs `proj`, which is not in the kernel library"),
        "{stderr}"
    );
}

#[test]
fn the_examples_run_from_the_command_line() {
    let dir = scratch("ptog-run");
    let npy = dir.join("out.npy");
    let (code, stdout, stderr) = binary(&[
        "run",
        "examples/ptog/deepseek_indexer_attention.ptoasm",
        "--output",
        &format!("OUTPUT={}", npy.display()),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("1 launch(es), 4 kernel run(s), 13 instance(s)"),
        "{stdout}"
    );
    assert!(std::fs::metadata(&npy).unwrap().len() > 256 * 256 * 4);
    let (code, stdout, stderr) = binary(&[
        "run",
        "examples/ptog/exchange_device0.ptoasm",
        "--device",
        "examples/ptog/exchange_device1.ptoasm",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stdout.matches("3 launch(es), 3 kernel run(s)").count(),
        2,
        "{stdout}"
    );
    let (code, stdout, stderr) = binary(&["run", "examples/ptog/tour.ptoasm"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("4 launch(es), 13 kernel run(s)"),
        "{stdout}"
    );
}
