//! `pto-wsp tune FILE`: the search of [`crate::tune`] from the command line (arguments, the
//! report on stdout, `--write`).

use super::{print, read};
use std::path::PathBuf;
use std::process::ExitCode;

/// `pto-wsp tune` arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The `.wsp` file.
    pub file: PathBuf,
    /// The machine: a shipped name (`ascend910b`: a 910B2-class die, 24 AIC + 48 AIV;
    /// `ascend910b4`: 20 AIC + 40 AIV at 1.5 GHz; `ascend950`: an a5-class part, 36 AIC + 72 AIV;
    /// `unit`: round numbers) or a machine file (TOML, docs/BACKENDS.md).
    #[arg(long, default_value = "ascend910b", value_name = "NAME|FILE")]
    pub machine: String,
    /// Search time budget in seconds.
    #[arg(long, default_value_t = 60.0, value_name = "SECONDS")]
    pub budget: f64,
    /// Bind a symbol, slot or integer tensor (after the file's `//@ bind` defaults).
    #[arg(long = "bind", value_name = "NAME=VALUE")]
    pub binds: Vec<String>,
    /// Also try these values of a symbol (e.g. a chunk size): NAME=V1,V2,...
    #[arg(long = "tune", value_name = "NAME=V1,V2,...")]
    pub symbols: Vec<String>,
    /// Schedules listed.
    #[arg(long, default_value_t = 5, value_name = "K")]
    pub top: usize,
    /// Seed of the random restarts.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub seed: u64,
    /// Write the module with the best schedule to this file.
    #[arg(long, value_name = "OUT.wsp")]
    pub write: Option<PathBuf>,
    /// Draw no progress bar.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Runs `pto-wsp tune`.
pub fn main(args: Args) -> anyhow::Result<ExitCode> {
    let name = args.file.display().to_string();
    let text = read(&args.file)?;
    if !(args.budget.is_finite() && args.budget > 0.0) {
        anyhow::bail!(
            "`--budget {}`: give a positive number of seconds",
            args.budget
        );
    }
    let symbols = args
        .symbols
        .iter()
        .map(|s| {
            let (n, vs) = s
                .split_once('=')
                .ok_or_else(|| anyhow::anyhow!("`--tune {s}`: write NAME=V1,V2,..."))?;
            Ok((n.to_string(), vs.split(',').map(str::to_string).collect()))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let o = crate::tune::TuneOptions {
        machine: args.machine,
        budget: std::time::Duration::from_secs_f64(args.budget),
        binds: args.binds,
        symbols,
        top: args.top,
        progress: !args.quiet,
        seed: args.seed,
    };
    let r = crate::tune::tune(&name, &text, &o)?;
    print(&crate::tune::report(&name, &o, &r))?;
    if let Some(out) = args.write {
        let written = crate::tune::written(&name, &text, &o, &r)?;
        std::fs::write(&out, written)?;
        eprintln!("wrote {}", out.display());
    }
    Ok(ExitCode::SUCCESS)
}
