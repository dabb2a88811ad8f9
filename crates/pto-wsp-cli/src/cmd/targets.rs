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
        let plan = pto_wsp::driver::lower(loaded)?;
        let tree = crate::cmd::emit::ascend(loaded, &plan, &bindings, target)?;
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

fn render(loaded: &Loaded, e: CompileError) -> CliError {
    pto_wsp::driver::compile_error(loaded, &e)
}

/// Writes `a` under a temporary name beside `out`, then renames it; returns the bytes written.
fn write_artefact(a: &Artefact, out: &Path) -> Result<usize, CliError> {
    let io = |what: &str, e: std::io::Error| CliError::plain(format!("cannot {what}: {e}"));
    let tmp = out.with_extension("partial");
    match a {
        Artefact::Bytes(bytes) => {
            std::fs::write(&tmp, bytes)
                .map_err(|e| io(&format!("write `{}`", tmp.display()), e))?;
            std::fs::rename(&tmp, out)
                .map_err(|e| io(&format!("rename to `{}`", out.display()), e))?;
            Ok(bytes.len())
        }
        Artefact::Tree(files) => {
            let mut total = 0;
            for (rel, bytes) in files {
                if rel.is_absolute() || rel.components().any(|c| c.as_os_str() == "..") {
                    return Err(CliError::plain(format!(
                        "the back end produced a path outside the output directory: `{}`",
                        rel.display()
                    )));
                }
                let path = tmp.join(rel);
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir)
                        .map_err(|e| io(&format!("create `{}`", dir.display()), e))?;
                }
                std::fs::write(&path, bytes)
                    .map_err(|e| io(&format!("write `{}`", path.display()), e))?;
                total += bytes.len();
            }
            std::fs::create_dir_all(&tmp).map_err(|e| io("create the output directory", e))?;
            std::fs::rename(&tmp, out)
                .map_err(|e| io(&format!("rename to `{}`", out.display()), e))?;
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
