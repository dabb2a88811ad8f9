//! `pto-wsp fmt`: the canonical form of a module, printed, checked (`--check`) or written back
//! (`--write`, refused when it would drop a comment).

use super::{print, read};
use crate::CliError;
use anyhow::Context as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// The arguments of `pto-wsp fmt`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The `.wsp` file.
    pub file: PathBuf,
    /// Print nothing; exit 1 if the file is not already canonical.
    #[arg(long, conflicts_with = "write")]
    pub check: bool,
    /// Rewrite the file in canonical form.
    #[arg(long)]
    pub write: bool,
}

/// Runs `pto-wsp fmt`.
pub fn main(args: Args) -> anyhow::Result<ExitCode> {
    let name = args.file.display().to_string();
    let text = read(&args.file)?;
    let formatted = crate::format_source(&name, &text)?;
    if args.check {
        if let Some(line) = crate::first_difference(&text, &formatted) {
            return Err(CliError::plain(format!(
                "{name} is not in canonical form (first difference at line {line}; \
                 run `pto-wsp fmt --write {name}`)"
            ))
            .into());
        }
    } else if args.write {
        if let Some(line) = crate::first_dropped_comment(&text) {
            return Err(CliError::plain(format!(
                "{name}:{line}: `fmt --write` would drop this comment (only the leading \
                 comment block is kept); move it into the header or use `fmt` without \
                 `--write`"
            ))
            .into());
        }
        if formatted != text {
            std::fs::write(&args.file, &formatted)
                .with_context(|| format!("cannot write `{name}`"))?;
        }
    } else {
        print(&formatted)?;
    }
    Ok(ExitCode::SUCCESS)
}
