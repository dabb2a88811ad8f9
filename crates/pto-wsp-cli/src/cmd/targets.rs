//! `pto-wsp targets` and `pto-wsp compile`: the back-end registry from the command line.
//!
//! Why: a user should see which targets exist and compile a file for any of them with one
//! command, whatever back end serves it (`pto_wsp::Backend`), without the tool knowing the
//! back end.
//!
//! Promise: an unknown target is an error listing the known ones; a construct the back end
//! cannot handle is rendered at its `file:line:column`; an artefact is written whole or not at
//! all (to a temporary name first, then renamed).

use crate::{CliError, Loaded};
use pto_wsp::{Artefact, CompileError, CompileOptions, Output, backends, compile_target, lower};
use std::path::Path;

/// One line per registered back end: its name, targets and capabilities.
pub fn targets_report() -> String {
    let mut out = String::new();
    for b in backends() {
        let caps: Vec<&str> = b.capabilities().iter().map(|c| c.name()).collect();
        out.push_str(&format!(
            "{:<10} targets: {:<14} capabilities: {}\n",
            b.name(),
            b.targets().join(", "),
            caps.join(", ")
        ));
    }
    out
}

/// Compiles `loaded` for `target`; writes an emitted artefact to `out` (a file for bytes, a
/// directory for a tree). Returns the summary line to print.
pub fn compile_loaded(
    loaded: &Loaded,
    target: &str,
    out: Option<&Path>,
) -> Result<String, CliError> {
    let name = &loaded.source.name;
    if pto_wsp::emitters::ascend::TARGETS.contains(&target) {
        // The Ascend tree needs the bindings: the file's `//@ bind` lines apply.
        let bindings = crate::bindings_for(loaded, &[])?;
        let (loaded, plan) = crate::cmd::emit::with_library(loaded)?;
        let tree = crate::cmd::emit::ascend(&loaded, &plan, &bindings, target)?;
        let out = out.ok_or_else(|| {
            CliError::plain(format!(
                "target `{target}` emits an artefact: give the output path with `-o`"
            ))
        })?;
        let files = tree
            .files
            .iter()
            .map(|(n, t)| (std::path::PathBuf::from(n), t.clone().into_bytes()))
            .collect();
        let size = write_artefact(&Artefact::Tree(files), out)?;
        let mut text = format!(
            "{name}: wrote {size} bytes for target `{target}` to {}\n",
            out.display()
        );
        for n in &tree.notes {
            text.push_str(&format!("note: {n}\n"));
        }
        return Ok(text);
    }
    // An emitting target writes the kernels that name built-ins from the kernel library.
    let with_bodies;
    let loaded = if target == pto_wsp::emitters::ptoisa::TARGET {
        with_bodies = pto_wsp::driver::library::with_bodies(loaded)?;
        &with_bodies
    } else {
        loaded
    };
    let plan = lower(&loaded.module)
        .map_err(|e| render(loaded, e))?
        .with_source(loaded.source.clone());
    // Kernels come from the built-in registry, mapped by the file's `//@ alias` lines (as for
    // `pto-wsp run`); an emitting target bakes in the file's `//@ bind` lines.
    let mut kernels = pto_wsp::kernels::KernelRegistry::with_builtins();
    crate::aliases::apply_aliases(loaded, &mut kernels)?;
    let options = CompileOptions {
        target: target.to_string(),
        kernels,
        bindings: crate::bindings_for(loaded, &[])?,
        ..CompileOptions::default()
    };
    match compile_target(&plan, &options).map_err(|e| render(loaded, e))? {
        Output::Program(p) => Ok(format!(
            "{name}: ok for target `{target}` (a runnable program, {} worker thread(s); run it \
             with `pto-wsp run`)\n",
            p.threads()
        )),
        Output::Artefact(a) => {
            let out = out.ok_or_else(|| {
                CliError::plain(format!(
                    "target `{target}` emits an artefact: give the output path with `-o`"
                ))
            })?;
            let size = write_artefact(&a, out)?;
            Ok(format!(
                "{name}: wrote {size} bytes for target `{target}` to {}\n",
                out.display()
            ))
        }
    }
}

/// What `pto-wsp check --target TARGET` adds to its line: whether the back end serving `target`
/// supports the module (its first refusal rendered at its location otherwise) and, for the
/// Ascend targets, the a2a3 device rules on every kernel a task may run.
pub fn check_for_target(loaded: &Loaded, target: &str) -> Result<String, CliError> {
    let Some(backend) = backends()
        .into_iter()
        .find(|b| b.targets().iter().any(|t| t == target))
    else {
        let known: Vec<String> = backends().iter().flat_map(|b| b.targets()).collect();
        return Err(CliError::plain(format!(
            "unknown target `{target}` (known: {})",
            known.join(", ")
        )));
    };
    // A module of plans reaches the task-graph back ends as task batches (its plans expanded at
    // the file's bindings).
    let expanded;
    let loaded = match pto_wsp::driver::plans_as_tasks(loaded, &crate::bindings_for(loaded, &[])?)?
    {
        Some((l, _)) => {
            expanded = l;
            &expanded
        }
        None => loaded,
    };
    // Kernels naming built-ins carry the kernel library's bodies to the emitting back ends.
    let with_bodies;
    let loaded = if pto_wsp::emitters::ascend::TARGETS.contains(&target)
        || target == pto_wsp::emitters::ptoisa::TARGET
    {
        with_bodies = pto_wsp::driver::library::with_bodies(loaded)?;
        &with_bodies
    } else {
        loaded
    };
    let plan = pto_wsp::driver::lower(loaded)?;
    let res = plan.resolved();
    backend
        .supports(res)
        .map_err(|u| CliError::diagnostic(&loaded.source, &u))?;
    if pto_wsp::emitters::ascend::TARGETS.contains(&target) {
        let used: Vec<bool> = (0..loaded.module.kernels.len())
            .map(|k| res.kernels_used[k] && res.tiers[k].is_none())
            .collect();
        let checked = crate::device_check(loaded, Some(&used))?;
        return Ok(format!("supported by `{target}`; {}", checked.summary()));
    }
    Ok(format!("supported by `{target}`"))
}

/// `pto-wsp run --device-rules DEVICE`: the device's rules on every kernel a task of `text`
/// may run; the line to print, or every violation at its line.
pub fn device_rules(name: &str, text: &str, device: &str) -> Result<String, CliError> {
    if device != pto_wsp::ir::device::DEVICE {
        return Err(CliError::plain(format!(
            "unknown device `{device}` for --device-rules (known: {})",
            pto_wsp::ir::device::DEVICE
        )));
    }
    let loaded = crate::load_source(name, text)?;
    let plan = pto_wsp::driver::lower(&loaded)?;
    let res = plan.resolved();
    let used: Vec<bool> = (0..loaded.module.kernels.len())
        .map(|k| res.kernels_used[k] && res.tiers[k].is_none())
        .collect();
    // Kernels naming built-ins are judged with the kernel library's bodies.
    let with_bodies = pto_wsp::driver::library::with_bodies(&loaded)?;
    let checked = crate::device_check(&with_bodies, Some(&used))?;
    Ok(format!("device rules: {}", checked.summary()))
}

fn render(loaded: &Loaded, e: CompileError) -> CliError {
    pto_wsp::driver::compile_error(loaded, &e)
}

/// Writes `a` under a temporary name beside `out`, then renames it; returns the bytes written.
/// Every error names `out` (the path the user gave), and on every error path the temporary
/// file or directory is removed (it is a `tempfile` guard until the rename).
fn write_artefact(a: &Artefact, out: &Path) -> Result<usize, CliError> {
    let fail = |e: &dyn std::fmt::Display| {
        CliError::plain(format!("cannot write `{}`: {e}", out.display()))
    };
    let dir = match out.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut temp = tempfile::Builder::new();
    temp.prefix(".pto-wsp-out");
    match a {
        Artefact::Bytes(bytes) => {
            let mut tmp = temp.tempfile_in(dir).map_err(|e| fail(&e))?;
            std::io::Write::write_all(&mut tmp, bytes).map_err(|e| fail(&e))?;
            tmp.persist(out).map_err(|e| fail(&e.error))?;
            Ok(bytes.len())
        }
        Artefact::Tree(files) => {
            let tmp = temp.tempdir_in(dir).map_err(|e| fail(&e))?;
            let mut total = 0;
            for (rel, bytes) in files {
                if rel.is_absolute() || rel.components().any(|c| c.as_os_str() == "..") {
                    return Err(CliError::plain(format!(
                        "the back end produced a path outside the output directory: `{}`",
                        rel.display()
                    )));
                }
                let path = tmp.path().join(rel);
                let written = path
                    .parent()
                    .map_or(Ok(()), std::fs::create_dir_all)
                    .and_then(|()| std::fs::write(&path, bytes));
                written.map_err(|e| fail(&format!("{}: {e}", rel.display())))?;
                total += bytes.len();
            }
            std::fs::rename(tmp.path(), out).map_err(|e| fail(&e))?;
            // Renamed: nothing is left for the guard to remove.
            let _ = tmp.keep();
            Ok(total)
        }
    }
}

/// Runs `pto-wsp targets`.
pub fn targets_main() -> anyhow::Result<std::process::ExitCode> {
    super::print(&targets_report())?;
    Ok(std::process::ExitCode::SUCCESS)
}

/// The arguments of `pto-wsp compile`.
#[derive(clap::Args, Debug)]
pub struct CompileArgs {
    /// The `.wsp` file.
    pub file: std::path::PathBuf,
    /// The target (see `pto-wsp targets`).
    #[arg(long, default_value = "cpu_sim")]
    pub target: String,
    /// Where an emitting target writes its artefact.
    #[arg(short = 'o', long = "out", value_name = "OUT")]
    pub out: Option<std::path::PathBuf>,
}

/// Runs `pto-wsp compile`.
pub fn compile_main(args: CompileArgs) -> anyhow::Result<std::process::ExitCode> {
    let name = args.file.display().to_string();
    let loaded = crate::load_source(&name, &super::read(&args.file)?)?;
    super::print(&compile_loaded(&loaded, &args.target, args.out.as_deref())?)?;
    Ok(std::process::ExitCode::SUCCESS)
}
