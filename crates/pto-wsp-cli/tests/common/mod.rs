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
