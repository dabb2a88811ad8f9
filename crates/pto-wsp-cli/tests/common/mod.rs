//! Helpers shared by the CLI's end-to-end tests: the repository root, a scratch directory per
//! test, and the built `pto-wsp` binary run from the root.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root (examples and test data are named relative to it).
pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A test's scratch directory, removed with everything in it when the test ends (pass or
/// panic), so test runs leave nothing behind in the temporary directory.
#[allow(dead_code)]
pub(crate) struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = PathBuf;
    fn deref(&self) -> &PathBuf {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[allow(dead_code)] // not every test crate needs one
/// A fresh scratch directory for one test (the process id keeps parallel runs apart).
pub(crate) fn scratch(test: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("pto-wsp-cli-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

#[allow(dead_code)]
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
    /// Debian's MLIR tools (`mlir-opt-22`, `mlir-opt-19`): the AIE back end's generic form
    /// parsed and verified with `--allow-unregistered-dialect`.
    Mlir,
}

impl Needs {
    /// The name the log and the summary use.
    fn tag(self) -> &'static str {
        match self {
            Needs::PtoIsa => "pto-isa",
            Needs::Simpler => "simpler",
            Needs::Mlir => "mlir",
        }
    }

    /// How to get it.
    fn setup(self) -> &'static str {
        match self {
            Needs::PtoIsa => "scripts/prepare-toolchains.sh (or set PTO_ISA_ROOT)",
            Needs::Mlir => "apt-get install mlir-22-tools (or mlir-19-tools)",
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

/// Whether this run rewrites golden files instead of comparing with them (`PTO_WSP_BLESS=1`).
#[allow(dead_code)] // not every test crate has goldens
pub(crate) fn blessing() -> bool {
    std::env::var("PTO_WSP_BLESS").is_ok_and(|v| v == "1")
}

/// Compares `actual` byte for byte with the golden file `test_data/golden/REL`, or writes it
/// (creating directories) under `PTO_WSP_BLESS=1`. A mismatch fails with a unified diff of the
/// golden against `actual`. A golden never holds a path of the machine that wrote it: `actual`
/// naming the repository's directory or the home directory fails.
#[allow(dead_code)]
pub(crate) fn golden(rel: &str, actual: &str) {
    for (what, dir) in [
        ("the repository's directory", root().canonicalize().ok()),
        (
            "the home directory",
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|h| h.components().count() > 1),
        ),
    ] {
        if let Some(d) = dir {
            let d = format!("{}/", d.display());
            assert!(
                !actual.contains(&d),
                "{rel}: the output names {what} (`{d}`); a golden file must not hold a path of \
                 this machine"
            );
        }
    }
    let path = root().join("test_data/golden").join(rel);
    if blessing() {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(&path, actual).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "reading test_data/golden/{rel}: {e} (run the test with PTO_WSP_BLESS=1 to create \
             it)"
        )
    });
    if expected != actual {
        let diff = similar::TextDiff::from_lines(expected.as_str(), actual);
        let mut shown = diff
            .unified_diff()
            .context_radius(3)
            .header(&format!("test_data/golden/{rel}"), "emitted now")
            .to_string();
        const MAX: usize = 20_000;
        if shown.len() > MAX {
            let cut = (0..=MAX)
                .rev()
                .find(|&i| shown.is_char_boundary(i))
                .unwrap_or(0);
            shown.truncate(cut);
            shown.push_str("\n[... diff cut]\n");
        }
        panic!(
            "test_data/golden/{rel} differs from the output:\n{shown}\n(if the change is \
             intended, rerun the test with PTO_WSP_BLESS=1 and commit the new golden file)"
        );
    }
}

/// Where the support files of emitted trees (`pto_wsp::emitters::support_files`) are stored,
/// each once, under `test_data/golden/`.
#[allow(dead_code)]
pub(crate) const SUPPORT_DIR: &str = "support";

/// The file of each tree's golden that lists the support files the tree holds.
#[allow(dead_code)]
pub(crate) const SUPPORT_LIST: &str = "support-files.txt";

/// [`golden`] for every file of an emitted tree, under `test_data/golden/DIR/`, except the
/// support files the back ends write verbatim into every tree: those are compared with the one
/// copy under `test_data/golden/support/` (so a changed header is one diff, not one per tree),
/// and `DIR/support-files.txt` lists which of them the tree holds. The directory must hold
/// exactly the other files and the list, `support/` only support files (a file no longer
/// written fails, or is removed under `PTO_WSP_BLESS=1`).
#[allow(dead_code)]
pub(crate) fn golden_tree(dir: &str, files: &[(String, String)]) {
    let support: Vec<&str> = pto_wsp::emitters::support_files()
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    let mut listed = String::new();
    let mut own = vec![SUPPORT_LIST.to_string()];
    for (name, text) in files {
        if support.contains(&name.as_str()) {
            golden(&format!("{SUPPORT_DIR}/{name}"), text);
            listed.push_str(name);
            listed.push('\n');
        } else {
            golden(&format!("{dir}/{name}"), text);
            own.push(name.clone());
        }
    }
    golden(&format!("{dir}/{SUPPORT_LIST}"), &listed);
    only_these(dir, &own);
    let support: Vec<String> = support.iter().map(|s| s.to_string()).collect();
    only_these(SUPPORT_DIR, &support);
}

/// Fails if `test_data/golden/DIR/` holds a file (at any depth) not named in `names` (relative
/// to it); under `PTO_WSP_BLESS=1` removes such files instead. A directory not there holds
/// nothing.
#[allow(dead_code)]
fn only_these(dir: &str, names: &[String]) {
    let base = root().join("test_data/golden").join(dir);
    let mut stale = Vec::new();
    let mut stack = vec![base.clone()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let rel = p
                .strip_prefix(&base)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if !names.contains(&rel) {
                stale.push((rel, p));
            }
        }
    }
    if blessing() {
        for (_, p) in &stale {
            // Another test blessing the same shared directory may have removed it already.
            match std::fs::remove_file(p) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    panic!("removing {}: {e}", p.display())
                }
                _ => {}
            }
        }
        return;
    }
    let names: Vec<&str> = stale.iter().map(|(r, _)| r.as_str()).collect();
    assert!(
        names.is_empty(),
        "test_data/golden/{dir}/ holds files the emitter no longer writes: {names:?} (rerun \
         with PTO_WSP_BLESS=1 to remove them)"
    );
}
