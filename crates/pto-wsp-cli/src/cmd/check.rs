//! `pto-wsp check`: parse and validate a module, print a one-line summary.

use super::{print, read};
use std::path::PathBuf;
use std::process::ExitCode;

/// The arguments of `pto-wsp check`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The `.wsp` file.
    pub file: PathBuf,
}

/// Runs `pto-wsp check`.
pub fn main(args: Args) -> anyhow::Result<ExitCode> {
    let name = args.file.display().to_string();
    let loaded = crate::load_source(&name, &read(&args.file)?)?;
    print(&format!(
        "{}\n",
        crate::check_summary(&name, &loaded.module)
    ))?;
    Ok(ExitCode::SUCCESS)
}
