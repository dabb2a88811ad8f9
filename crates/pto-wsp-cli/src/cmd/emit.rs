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
use pto_wsp::emitters::ascend::AscendTree;
use pto_wsp::emitters::ptoisa::Emitted;
use pto_wsp::emitters::{EmitError, Input, ascend, ptoisa};
use pto_wsp::ir::Bindings;
use std::fmt::Write as _;
use std::path::Path;

/// Lowers `loaded` and runs `emit` on its resolved program, rendering every error against the
/// source.
fn with_input<T>(
    loaded: &Loaded,
    bindings: &Bindings,
    emit: impl FnOnce(&Input<'_>) -> Result<T, EmitError>,
) -> Result<T, CliError> {
    let plan =
        pto_wsp::lower(&loaded.module).map_err(|e| pto_wsp::driver::compile_error(loaded, &e))?;
    let resolved = plan
        .resolve()
        .map_err(|e| CliError::diagnostic(&loaded.source, &e))?;
    let input = Input {
        resolved: &resolved,
        source: Some(&loaded.source),
        bindings,
    };
    emit(&input).map_err(|e| CliError::diagnostic(&loaded.source, &e))
}

/// Every kernel of `loaded` with a body as PTO-ISA C++, and the host driver of its tasks under
/// `bindings`.
pub fn kernels(loaded: &Loaded, bindings: &Bindings) -> Result<Emitted, CliError> {
    with_input(loaded, bindings, ptoisa::emit_kernels)
}

/// The Ascend tree of `loaded` under `bindings` for `target` (`ascend_a2a3sim`,
/// `ascend_a2a3`).
pub fn ascend(loaded: &Loaded, bindings: &Bindings, target: &str) -> Result<AscendTree, CliError> {
    with_input(loaded, bindings, |input| ascend::emit(input, target))
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
pub fn ascend_summary(tree: &AscendTree, dir: &Path) -> String {
    let mut s = format!(
        "emitted an Ascend workload ({} kernel task(s), {} barrier task(s), {} edge(s) under the bindings) to {}\n\
         run: python {}/runner.py IN_DIR OUT_DIR (writes {})\n",
        tree.kernel_tasks,
        tree.barrier_tasks,
        tree.edges.len(),
        dir.display(),
        dir.display(),
        tree.written.join(", ")
    );
    for n in &tree.notes {
        let _ = writeln!(s, "note: {n}");
    }
    s
}
