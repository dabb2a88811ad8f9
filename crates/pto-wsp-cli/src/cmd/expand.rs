//! `pto-wsp expand`: a module's tasks under given bindings, listed with their counts (the
//! reference expander on the lowered program), and the expansion's rate on stderr.

use super::{print, rate, read};
use crate::report;
use pto_wsp::ir::ExpandOptions;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// The arguments of `pto-wsp expand`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The `.wsp` file.
    pub file: PathBuf,
    /// Bind a symbol, slot or integer tensor (after the file's `//@ bind` defaults).
    #[arg(long = "bind", value_name = "NAME=VALUE")]
    pub binds: Vec<String>,
    /// List at most this many tasks (counts always cover every task).
    #[arg(long, default_value_t = 40, value_name = "N")]
    pub limit: usize,
    /// Override the schedule's number of executors (1 to 65536).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=pto_wsp::ir::schedule::limits::EXECUTORS))]
    pub executors: Option<u64>,
    /// List no tasks, only the counts.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Runs `pto-wsp expand`.
pub fn main(args: Args) -> anyhow::Result<ExitCode> {
    let name = args.file.display().to_string();
    let loaded = crate::load_source(&name, &read(&args.file)?)?;
    let bindings = crate::bindings_for(&loaded, &args.binds)?;
    let options = ExpandOptions {
        limit: None,
        executors: args.executors,
    };
    let plan = pto_wsp::driver::lower(&loaded)?;
    let start = Instant::now();
    let expansion = pto_wsp::driver::expand(&plan, &bindings, &options)?;
    let elapsed = start.elapsed().as_secs_f64();
    let opts = report::ReportOptions {
        limit: if args.quiet { 0 } else { args.limit },
    };
    print(&report::expand_report(
        &loaded.module,
        &bindings,
        &expansion,
        &opts,
    ))?;
    let n = expansion.tasks.len();
    eprintln!(
        "expanded {n} tasks in {:.2} ms ({} tasks/s)",
        elapsed * 1000.0,
        rate(n as f64, elapsed, 0)
    );
    Ok(ExitCode::SUCCESS)
}
