//! Helpers shared by the CLI's end-to-end tests: the repository root, a scratch directory per
//! test, and the built `pto-wsp` binary run from the root.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root (examples and test data are named relative to it).
pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A fresh scratch directory for one test (the process id keeps parallel runs apart).
pub(crate) fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pto-wsp-cli-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs the binary from the repository root; exit code, stdout, stderr.
pub(crate) fn binary(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pto-wsp"))
        .current_dir(root())
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The f64 reference of one decode-attention query: `softmax(scale · q kᵀ) v` over the first
/// `keys` rows of `k` and `v` (rows of `d`), computed with plain loops.
#[allow(dead_code)] // not every test crate checks attention
pub(crate) fn attention_reference(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    keys: usize,
    d: usize,
    scale: f64,
) -> Vec<f64> {
    let s: Vec<f64> = (0..keys)
        .map(|j| {
            scale
                * (0..d)
                    .map(|c| q[c] as f64 * k[j * d + c] as f64)
                    .sum::<f64>()
        })
        .collect();
    let mx = s.iter().copied().fold(f64::MIN, f64::max);
    let e: Vec<f64> = s.iter().map(|x| (x - mx).exp()).collect();
    let z: f64 = e.iter().sum();
    (0..d)
        .map(|c| (0..keys).map(|j| e[j] * v[j * d + c] as f64).sum::<f64>() / z)
        .collect()
}

/// An outside toolchain a test needs (the summary after a test run counts each separately).
#[allow(dead_code)] // not every test crate needs a toolchain
#[derive(Clone, Copy, Debug)]
pub(crate) enum Needs {
    /// The PTO-ISA checkout (`PTO_ISA_ROOT`) and g++: the emitted C++ built on PTO-ISA's CPU
    /// simulation.
    PtoIsa,
    /// simpler (`SIMPLER_ROOT`, its venv, the `g++-15` wrapper) and PTO-ISA: the Ascend tree
    /// built and run on `a2a3sim`, or checked against the device templates.
    Simpler,
}

impl Needs {
    /// The name the log and the summary use.
    fn tag(self) -> &'static str {
        match self {
            Needs::PtoIsa => "pto-isa",
            Needs::Simpler => "simpler",
        }
    }

    /// How to get it.
    fn setup(self) -> &'static str {
        match self {
            Needs::PtoIsa => "scripts/prepare-toolchains.sh (or set PTO_ISA_ROOT)",
            Needs::Simpler => {
                "scripts/prepare-simpler.sh (or set SIMPLER_ROOT, PTO_ISA_ROOT, SIMPLER_VENV, \
                 PTO_WSP_TOOLS_DIR)"
            }
        }
    }
}

/// Records that the running test needs `needs` and found it: a line `ran TOOLCHAIN TEST` in the
/// file `PTO_WSP_TOOLCHAIN_LOG` names, when set (`scripts/test.sh` sets it and prints the
/// summary, so a green run states how much of the device path it exercised).
#[allow(dead_code)] // not every test crate needs a toolchain
pub(crate) fn toolchain_ran(needs: Needs) {
    toolchain_record("ran", needs, None);
}

/// A test whose outside toolchain is missing: records `skipped TOOLCHAIN TEST: WHY` like
/// [`toolchain_ran`]; then with `PTO_WSP_REQUIRE_TOOLCHAINS=1` the test fails, naming what is
/// missing and how to get it, and otherwise it prints `skipped: WHY` and the caller returns
/// (the test passes).
#[allow(dead_code)]
pub(crate) fn toolchain_skipped(needs: Needs, why: &str) {
    toolchain_record("skipped", needs, Some(why));
    if std::env::var_os("PTO_WSP_REQUIRE_TOOLCHAINS").is_some_and(|v| v == "1") {
        panic!(
            "PTO_WSP_REQUIRE_TOOLCHAINS=1 and this test's toolchain is missing: {why}; get it \
             with {}",
            needs.setup()
        );
    }
    println!("skipped: {why}");
}

fn toolchain_record(outcome: &str, needs: Needs, why: Option<&str>) {
    use std::io::Write as _;
    let Some(path) = std::env::var_os("PTO_WSP_TOOLCHAIN_LOG").filter(|p| !p.is_empty()) else {
        return;
    };
    // libtest names each test's thread after the test.
    let test = std::thread::current()
        .name()
        .unwrap_or("unnamed test")
        .to_string();
    let tag = needs.tag();
    let line = match why {
        Some(w) => format!("{outcome} {tag} {test}: {w}\n"),
        None => format!("{outcome} {tag} {test}\n"),
    };
    // One short append per test: whole lines even with tests in parallel processes.
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = f.write_all(line.as_bytes());
    }
}
