//! The `pto-wsp` command-line tool: check, format and expand `.wsp` modules.
//!
//! Why: a user (or CI) needs one command to see whether a module is valid, what its canonical
//! form is, and which tasks it generates under given bindings.
//! Promise: exit code 0 on success, 1 on any error caused by the input (rendered with
//! `file:line:column` when it has a location, never a panic or backtrace), 2 on a usage error.
//! Each command lives in its own module of the `pto_wsp_cli` library (`cmd/`: its arguments and
//! what it does), so tests can call it directly; this file parses the command line and
//! dispatches.

#![forbid(unsafe_code)]

use clap::{Parser, Subcommand};
use pto_wsp_cli::{CliError, cmd};
use std::process::ExitCode;

/// The process's allocator. Building a task graph allocates tens of bytes per task in a few
/// large arrays and frees them when the run ends; the system allocator returns such blocks to
/// the kernel and faults them in again, page by page, on the next build (a third of a 1M-task
/// build's time). mimalloc keeps freed memory for reuse (and measured faster on a first build
/// in a fresh process too). Tensor buffers do not go through it (see `pto_wsp::kernels::TensorStore`).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Check, format and expand pto-wsp workload modules (`.wsp` files).
#[derive(Parser, Debug)]
#[command(name = "pto-wsp", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Parse and validate a module; print a one-line summary. With `--target ascend_a2a3` (or
    /// `ascend_a2a3sim`) also check what the Ascend back end supports and every kernel with a body
    /// against the a2a3 device rules (memory hierarchy, capacities, element types, the cube /
    /// vector split).
    Check(cmd::check::Args),
    /// Print the canonical form of a module (keeping its leading comment block).
    Fmt(cmd::fmt::Args),
    /// Validate and expand a module; print its tasks and counts.
    Expand(cmd::expand::Args),
    /// Encode a module as workload bytecode; report its size against the expanded task list
    /// and run every executor's interpreter, checking each against the reference expander.
    Bytecode(cmd::bytecode::Args),
    /// Run a module on the CPU simulation; print run statistics. With no file, run the main job:
    /// one LLM decode step (examples/llm_decode.wsp), checked against an f64 reference. Kernels
    /// come from the built-in registry, mapped by the file's `//@ alias` lines. A task-graph
    /// binary (`.ptog`) or its text (`.ptoasm`) runs on simulated devices (docs/ISA.md).
    Run(Box<cmd::run::Args>),
    /// Assemble a task-graph program (docs/ISA.md) into its `PTOG` binary.
    Asm(cmd::ptog::AsmArgs),
    /// Print a task-graph binary as assembly text (which `asm` reads back to the same binary).
    Disasm(cmd::ptog::DisasmArgs),
    /// List every registered back end: its targets and capabilities.
    Targets,
    /// Search the schedule space the module leaves open on the device timeline model of a
    /// machine, within a time budget: prints the best schedules with their modelled makespans
    /// next to the module's own, and can write the best one back as .wsp text.
    Tune(cmd::tune::Args),
    /// Validate and resolve a module, check that a target supports it, and compile it: an
    /// emitting target writes its artefact to OUT, a running one (`cpu_sim`) reports.
    Compile(cmd::targets::CompileArgs),
    /// Emit code for a target. `emit kernels FILE -o DIR`: every kernel written in tile
    /// instructions as a PTO-ISA C++ header, a host driver running the workload's tasks of those
    /// kernels on `.npy` inputs, and a Makefile (`make -C DIR`, `PTO_ISA_ROOT` defaults to
    /// `$HOME/.cache/pto-wsp/pto-isa`). `emit ascend FILE -o DIR`: the workload for the Ascend
    /// runtime simpler (see docs/BACKENDS.md).
    Emit(cmd::emit::Args),
    /// Measure the CPU runtime's per-task overhead on Taskflow's benchmark shapes.
    Bench(cmd::bench::Args),
}

fn main() -> ExitCode {
    // A panic is a bug in pto-wsp, never the user's fault: say so in one line, no backtrace.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("error: internal error in pto-wsp (please report it): {info}");
    }));
    // A write past the file-size limit (`ulimit -f`) raises SIGXFSZ, which would kill the
    // process before it removes its temporary files. With a handler installed, the write fails
    // with "File too large" instead and every error path cleans up and names the user's path.
    let _ = signal_hook::flag::register(
        signal_hook::consts::SIGXFSZ,
        std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
    );
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check(args) => cmd::check::main(args),
        Command::Fmt(args) => cmd::fmt::main(args),
        Command::Expand(args) => cmd::expand::main(args),
        Command::Bytecode(args) => cmd::bytecode::main(args),
        Command::Run(args) => cmd::run::main(*args),
        Command::Asm(args) => cmd::ptog::asm_main(args),
        Command::Disasm(args) => cmd::ptog::disasm_main(args),
        Command::Targets => cmd::targets::targets_main(),
        Command::Tune(args) => cmd::tune::main(args),
        Command::Compile(args) => cmd::targets::compile_main(args),
        Command::Emit(args) => cmd::emit::main(args),
        Command::Bench(args) => cmd::bench::main(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            match err.downcast_ref::<CliError>() {
                Some(e) => eprint!("{e}"),
                None => eprintln!("error: {err:#}"),
            }
            ExitCode::from(1)
        }
    }
}
