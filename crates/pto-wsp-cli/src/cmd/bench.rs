//! `pto-wsp bench`: the runtime's per-task overhead on Taskflow's shapes, the LLaMA layer, the
//! kernels, the main job and device generation ([`crate::bench`]), in one process or as the
//! median over several ([`crate::bench_median`]).

use std::process::ExitCode;

/// The arguments of `pto-wsp bench`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Shapes: chain:N, tree:LEVELS, independent:N, wavefront:SIDE,
    /// random:LEVELS:WIDTH[:SEED] (default: the five standard shapes, ~1M tasks each).
    pub shapes: Vec<pto_wsp::cpu::shapes::Shape>,
    /// Use the quick standard shapes (~20K tasks each) when no shape is given.
    #[arg(long)]
    pub quick: bool,
    /// Comma-separated worker thread counts.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 2], value_name = "LIST",
          value_parser = clap::value_parser!(u16).range(1..))]
    pub threads: Vec<u16>,
    /// Runs per figure (the best is reported).
    #[arg(long, default_value_t = 5, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: u32,
    /// Sequence lengths of the LLaMA-layer section, comma-separated; 0 skips it (default:
    /// 1024,4096,16384; 1024 with --quick).
    #[arg(long, value_delimiter = ',', value_name = "LIST",
          value_parser = clap::value_parser!(i64).range(0..=1 << 20))]
    pub llama: Vec<i64>,
    /// Skip the kernel section (GEMM and decode attention against direct baselines).
    #[arg(long)]
    pub no_kernels: bool,
    /// Skip the main-job section (an LLM decode step end to end: build, run, check).
    #[arg(long)]
    pub no_main_job: bool,
    /// Sequence lengths of the device-generation section (host build then run, host
    /// streamed and device generation on the LLaMA layer), comma-separated; 0 skips it
    /// (default: 16384; 1024 with --quick).
    #[arg(long, value_delimiter = ',', value_name = "LIST",
          value_parser = clap::value_parser!(i64).range(0..=1 << 20))]
    pub devgen: Vec<i64>,
    /// Run only the device-generation section.
    #[arg(long)]
    pub devgen_only: bool,
    /// How the device-generation section's executors generate: `partitioned` (each
    /// interprets only its own tasks) or `walk` (each interprets every task). Default: the
    /// engine's default.
    #[arg(long, value_name = "HOW", value_parser = ["partitioned", "walk"])]
    pub devgen_generation: Option<String>,
    /// Run the whole bench in N separate processes (this program re-run N times, one after
    /// the other) and print each figure as median[min-max] over them; numbers equal in
    /// every process are printed as they are. 1: one process, printed as it runs.
    #[arg(long, default_value_t = 1, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub processes: u32,
}

/// Runs `pto-wsp bench`.
pub fn main(args: Args) -> anyhow::Result<ExitCode> {
    if args.processes > 1 && std::env::var_os(crate::bench_median::CHILD_ENV).is_none() {
        let argv: Vec<String> = std::env::args().skip(1).collect();
        super::print(&crate::bench_median::over_processes(&argv, args.processes)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let threads = args.threads.into_iter().map(usize::from).collect();
    let mut opts = crate::bench::BenchOptions::new(args.shapes, args.quick, threads, args.repeat);
    if !args.llama.is_empty() {
        opts.llama = args.llama.into_iter().filter(|&s| s > 0).collect();
    }
    if args.no_kernels {
        opts.kernels = None;
    }
    if args.no_main_job {
        opts.main_job = None;
    }
    if !args.devgen.is_empty() {
        opts.devgen = args.devgen.into_iter().filter(|&s| s > 0).collect();
    }
    opts.devgen_only = args.devgen_only;
    if let Some(how) = args.devgen_generation {
        opts.devgen_partition = how == "partitioned";
    }
    crate::bench::bench(&opts, super::print)?;
    Ok(ExitCode::SUCCESS)
}
