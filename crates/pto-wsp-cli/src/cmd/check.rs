//! `pto-wsp check`: parse and validate a module, print a one-line summary; with `--target`,
//! also what that target supports (for the Ascend targets, the a2a3 device rules).

use super::{print, read};
use std::path::PathBuf;
use std::process::ExitCode;

/// The arguments of `pto-wsp check`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The `.wsp` file.
    pub file: PathBuf,
    /// Also check for this target (see `pto-wsp targets`).
    #[arg(long)]
    pub target: Option<String>,
}

/// Runs `pto-wsp check`.
pub fn main(args: Args) -> anyhow::Result<ExitCode> {
    let name = args.file.display().to_string();
    let loaded = crate::load_source(&name, &read(&args.file)?)?;
    // Every static rule of `run` first (aliases, races), so both refuse a module alike.
    pto_wsp::driver::check_for_run(&loaded)?;
    // Kernels naming built-ins are typed against the kernel library: what no back end can run
    // is an error; what only the CPU simulation runs, a warning.
    let (errors, warnings): (Vec<_>, Vec<_>) = pto_wsp::driver::library::check(&loaded)
        .into_iter()
        .partition(|d| d.fatal);
    if !errors.is_empty() {
        return Err(pto_wsp::driver::render_all(&loaded.source, &errors).into());
    }
    for w in &warnings {
        eprint!(
            "{}",
            loaded.source.render(w).replacen("error", "warning", 1)
        );
    }
    let mut line = crate::check_summary(&name, &loaded.module);
    if let Some(t) = &args.target {
        line.push_str(&format!(
            "; {}",
            super::targets::check_for_target(&loaded, t)?
        ));
    }
    print(&format!("{line}\n"))?;
    Ok(ExitCode::SUCCESS)
}
