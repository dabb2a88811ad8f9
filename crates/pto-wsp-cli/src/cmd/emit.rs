//! `pto-wsp emit kernels` and `pto-wsp emit ascend`: the emitting back ends of
//! `pto-wsp-backends` ([`pto_wsp::emitters`]) from the command line.
//!
//! Why: the emitters return files in memory and know nothing of paths; the tool lowers the
//! file once, hands the emitter its resolved program with the source text (for positions) and
//! the bindings, writes the files and says what it wrote.
//!
//! Promises: every refusal is rendered at its `file:line:column`, before anything is written;
//! each file is written to a temporary name and renamed, so a file is either the old one or
//! complete.

use crate::{CliError, Loaded};
use pto_wsp::LoweredPlan;
use pto_wsp::emitters::ascend::AscendTree;
use pto_wsp::emitters::ptoisa::Emitted;
use pto_wsp::emitters::{EmitError, Input, ascend, ptoisa};
use pto_wsp::ir::Bindings;
use std::fmt::Write as _;
use std::path::Path;

/// Runs `emit` on the resolved program of `plan`, rendering every error against the source.
/// `loaded` has its kernels that name built-ins given their bodies from the kernel library
/// ([`with_library`]) and `plan` is lowered from it.
fn with_input<T>(
    loaded: &Loaded,
    plan: &LoweredPlan,
    bindings: &Bindings,
    emit: impl FnOnce(&Input<'_>) -> Result<T, EmitError>,
) -> Result<T, CliError> {
    let input = Input {
        resolved: plan.resolved(),
        source: Some(&loaded.source),
        bindings,
    };
    emit(&input).map_err(|e| CliError::diagnostic(&loaded.source, &e))
}

/// Every kernel of `loaded` (lowered as `plan`, both as [`with_library`] gives them) with a body
/// as PTO-ISA C++, and the host driver
/// of its tasks under `bindings`.
pub fn kernels(
    loaded: &Loaded,
    plan: &LoweredPlan,
    bindings: &Bindings,
) -> Result<Emitted, CliError> {
    with_input(loaded, plan, bindings, ptoisa::emit_kernels)
}

/// The Ascend tree of `loaded` (lowered as `plan`, both as [`with_library`] gives them) under
/// `bindings` for `target` (`ascend_a2a3sim`, `ascend_a2a3`).
pub fn ascend(
    loaded: &Loaded,
    plan: &LoweredPlan,
    bindings: &Bindings,
    target: &str,
) -> Result<AscendTree, CliError> {
    // Every kernel a task may run against the a2a3 device rules first: each violation at its
    // statement, with the rule's source (the emitter itself stops at the first).
    let res = plan.resolved();
    let used: Vec<bool> = (0..res.module.kernels.len())
        .map(|k| res.kernels_used[k] && res.tiers[k].is_none())
        .collect();
    if ascend::unsupported(res).is_ok() {
        crate::device_check(loaded, Some(&used))?;
    }
    with_input(loaded, plan, bindings, |input| ascend::emit(input, target))
}

/// Writes `(file name, contents)` pairs into `dir` (created if needed), each to a temporary
/// name first and then renamed.
pub fn write_files(files: &[(String, String)], dir: &Path) -> Result<(), CliError> {
    std::fs::create_dir_all(dir)
        .map_err(|e| CliError::plain(format!("cannot create `{}`: {e}", dir.display())))?;
    for (name, text) in files {
        let path = dir.join(name);
        let tmp = dir.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| CliError::plain(format!("cannot write `{}`: {e}", path.display())))?;
    }
    Ok(())
}

/// What `pto-wsp emit kernels` prints after writing `emitted` to `dir`.
pub fn kernels_summary(emitted: &Emitted, dir: &Path) -> String {
    let mut s = format!(
        "emitted {} ({}) as PTO-ISA C++ with a host driver to {}\n",
        crate::count(emitted.kernels.len(), "kernel"),
        emitted.kernels.join(", "),
        dir.display()
    );
    let _ = writeln!(
        s,
        "build: make -C {} [PTO_ISA_ROOT=...]; run: {}/driver IN_DIR OUT_DIR (writes {})",
        dir.display(),
        dir.display(),
        emitted.written.join(", ")
    );
    if emitted.skipped_tasks > 0 {
        let _ = writeln!(
            s,
            "note: {} of kernels without a body are not run by the driver",
            crate::count(emitted.skipped_tasks, "task")
        );
    }
    if !emitted.read_after_skipped.is_empty() {
        let _ = writeln!(
            s,
            "note: emitted kernels read {} after tasks the driver does not run write them; give \
             their contents as inputs",
            emitted.read_after_skipped.join(", ")
        );
    }
    s
}

/// What `pto-wsp emit ascend` prints after writing `tree` to `dir`.
pub fn ascend_summary(tree: &AscendTree, dir: &std::path::Path) -> String {
    let aic = tree
        .kernels
        .iter()
        .filter(|k| k.core == pto_wsp::ir::device::Core::Aic)
        .count();
    let pairs: usize = tree.kernels.iter().map(|k| k.sync_pairs).sum();
    let barriers: usize = tree.kernels.iter().map(|k| k.sync_barriers).sum();
    let doubled: usize = tree.kernels.iter().map(|k| k.doubled).sum();
    let mut s = format!(
        "emitted an Ascend workload ({} kernel task(s), submitted as {} AICore task(s), {} barrier task(s), {} edge(s) under the bindings) to {}\n\
         {} AICore kernel(s) ({aic} cube, {} vector), legal on {}; pipes ordered by {pairs} set/wait pair(s) and {barriers} vector barrier(s), {doubled} tile(s) double-buffered in loops\n\
         run: python {}/runner.py IN_DIR OUT_DIR (writes {})\n",
        tree.kernel_tasks,
        tree.part_tasks,
        tree.barrier_tasks,
        tree.edges.len(),
        dir.display(),
        tree.kernels.len(),
        tree.kernels.len() - aic,
        pto_wsp::ir::device::DEVICE,
        dir.display(),
        tree.written.join(", ")
    );
    for n in &tree.notes {
        let _ = writeln!(s, "note: {n}");
    }
    s
}

/// What `pto-wsp emit` writes.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum EmitWhat {
    /// Kernels written in tile instructions, as PTO-ISA C++ with a host driver.
    Kernels,
    /// The workload for the Ascend runtime (simpler): orchestration C++, one AICore kernel file
    /// per kernel, a numpy-only runner and a README of the schedule directives it cannot honour.
    Ascend,
    /// An AMD AIE design placed by the module's spatial map: MLIR in mlir-aie's dialects
    /// (`-o OUT.mlir`), the kernels' C++ next to it (`OUT.kernels.cc`).
    Aie,
}

/// The arguments of `pto-wsp emit`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// What to emit.
    pub what: EmitWhat,
    /// The `.wsp` file.
    pub file: std::path::PathBuf,
    /// The output directory (created if needed); for `emit aie`, the MLIR file.
    #[arg(short = 'o', long = "out", value_name = "DIR")]
    pub out: std::path::PathBuf,
    /// `emit aie`: write the generic op form (parsed by any MLIR tool with
    /// `--allow-unregistered-dialect`) instead of mlir-aie's custom assembly form.
    #[arg(long)]
    pub generic: bool,
    /// `emit aie`: print the placement, routing and budget tables and the throughput model.
    #[arg(long)]
    pub report: bool,
    /// Bind a symbol, slot or integer tensor (after the file's `//@ bind` defaults).
    #[arg(long = "bind", value_name = "NAME=VALUE")]
    pub binds: Vec<String>,
    /// `emit ascend`: the Ascend target (`ascend_a2a3sim` or `ascend_a2a3`).
    #[arg(long, default_value = "ascend_a2a3sim")]
    pub target: String,
}

/// `loaded` with its kernels that name built-ins given their bodies from the kernel library
/// (`pto_wsp::driver::library`), lowered once: what the emitters take.
pub fn with_library(loaded: &Loaded) -> Result<(Loaded, LoweredPlan), CliError> {
    let loaded = pto_wsp::driver::library::with_bodies(loaded)?;
    let plan = pto_wsp::driver::lower(&loaded)?;
    Ok((loaded, plan))
}

/// Runs `pto-wsp emit`: the file lowered once, the emitter's files written, a summary printed.
pub fn main(args: Args) -> anyhow::Result<std::process::ExitCode> {
    let name = args.file.display().to_string();
    let loaded = crate::load_source(&name, &super::read(&args.file)?)?;
    let bindings = crate::bindings_for(&loaded, &args.binds)?;
    // A module of plans is emitted as task batches (its plans expanded at the bindings).
    let (loaded, expanded) = match pto_wsp::driver::plans_as_tasks(&loaded, &bindings)? {
        Some((l, t)) => {
            let summary = pto_wsp::driver::plan_tasks_summary(&l.source, &t);
            (l, summary)
        }
        None => (loaded, String::new()),
    };
    let (loaded, plan) = with_library(&loaded)?;
    let summary = match args.what {
        EmitWhat::Kernels => {
            let emitted = kernels(&loaded, &plan, &bindings)?;
            write_files(&emitted.files, &args.out)?;
            kernels_summary(&emitted, &args.out)
        }
        EmitWhat::Ascend => {
            let tree = ascend(&loaded, &plan, &bindings, &args.target)?;
            write_files(&tree.files, &args.out)?;
            ascend_summary(&tree, &args.out)
        }
        EmitWhat::Aie => aie(&loaded, &plan, &bindings, &args)?,
    };
    super::print(&format!("{expanded}{summary}"))?;
    Ok(std::process::ExitCode::SUCCESS)
}

/// `pto-wsp emit aie FILE -o OUT.mlir [--generic] [--report]`: the design in one form to
/// `OUT.mlir`, its kernels to `OUT.kernels.cc` (both written only once the design fits).
fn aie(
    loaded: &Loaded,
    plan: &LoweredPlan,
    bindings: &Bindings,
    args: &Args,
) -> Result<String, CliError> {
    let out = &args.out;
    let stem = out
        .file_stem()
        .map_or("design".to_string(), |s| s.to_string_lossy().into_owned());
    let object = pto_wsp::emitters::aie::mlir::object_name(&stem);
    let e = with_input(loaded, plan, bindings, |i| {
        pto_wsp::emitters::aie::emit(i, &object)
    })?;
    let dir = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let mlir_name = out.file_name().map_or("design.mlir".to_string(), |s| {
        s.to_string_lossy().into_owned()
    });
    let cc = format!("{stem}.kernels.cc");
    let text = if args.generic { e.generic } else { e.custom };
    write_files(&[(mlir_name, text), (cc.clone(), e.kernels_cpp)], &dir)?;
    let d = &e.design;
    let mut s = format!(
        "emitted an AIE design for {} ({} core(s), {} fifo(s), {} host transfer(s)) to {} ({} form); kernels to {}\n",
        d.device.name,
        d.cores.len(),
        d.fifos.len(),
        d.transfers.len(),
        out.display(),
        if args.generic { "generic" } else { "custom" },
        dir.join(cc).display()
    );
    if args.report {
        s.push_str(&e.report);
    }
    Ok(s)
}
