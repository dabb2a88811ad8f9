//! One module per command of the `pto-wsp` tool: each holds the command's arguments (a clap
//! `Args` struct) and its `main`, which reads the files, prints the results and chooses the exit
//! code, so `main.rs` only parses the command line and dispatches.
//!
//! Promise: a command's stdout is written through [`print`] (a closed pipe is not an error);
//! every failure caused by the input is a [`crate::CliError`] already rendered for the user.

pub mod bench;
pub mod bytecode;
pub mod check;
pub mod emit;
pub mod expand;
pub mod fmt;
pub mod ptog;
pub mod run;
pub mod targets;
pub mod tune;

use anyhow::Context as _;
use std::io::Write as _;
use std::path::Path;

/// Reads a source file as UTF-8 text.
pub fn read(path: &Path) -> anyhow::Result<String> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read `{}`", path.display()))?;
    String::from_utf8(bytes).map_err(|e| {
        // Where the first byte that is not UTF-8 is: byte offset, line and column.
        let at = e.utf8_error().valid_up_to();
        let good = &e.as_bytes()[..at];
        let line = good.iter().filter(|&&b| b == b'\n').count() + 1;
        let start = good.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let col = String::from_utf8_lossy(&good[start..]).chars().count() + 1;
        anyhow::anyhow!(
            "{}:{line}:{col}: not UTF-8 text: byte {at} (0x{:02x}) begins no UTF-8 character",
            path.display(),
            e.as_bytes()[at]
        )
    })
}

/// Writes to stdout; a closed pipe (`pto-wsp expand ... | head`) is not an error.
pub fn print(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(e).context("cannot write to stdout")
        }
        _ => Ok(()),
    }
}

/// A rate for the timing lines on stderr: `per_second` formatted with `decimals`, or `inf` when
/// no time was measured.
pub(crate) fn rate(count: f64, secs: f64, decimals: usize) -> String {
    if secs > 0.0 {
        format!("{:.*}", decimals, count / secs)
    } else {
        "inf".to_string()
    }
}
