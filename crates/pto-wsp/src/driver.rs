//! The front-end driver: a `.wsp` text made into a module, bindings and kernels the way every
//! front end does it, with every error rendered against the text.
//!
//! Why: the `pto-wsp` tool and the Python extension take the same inputs — a source text with
//! its `//@ bind` and `//@ alias` lines, bindings given on top — and must read them by the same
//! rules and report the same mistakes in the same words. This module is that one reading, so
//! both front ends are thin: they parse their arguments and print (or raise) what comes back.
//!
//! Promises:
//! - Every failure caused by the input (syntax, validation, bindings, aliases, expansion,
//!   compilation) is an [`Error`] whose text is already rendered for the user (rustc-style, with
//!   `file:line:column` when a location is known); nothing here panics on bad input.
//! - A loaded text is lowered once ([`lower`]: validated, resolved, its source attached), and
//!   everything after reads that plan.
//! - Bindings are the file's `//@ bind` lines, then the front end's, in order, later ones
//!   overriding earlier ones ([`bindings_for`], [`binds`]); kernel aliases are checked as
//!   [`aliases`] says, generated inputs (`//@ fill`) as [`fills`] says; a run's Chrome trace is
//!   written by [`trace`] alone.

pub mod aliases;
pub mod binds;
mod chrome;
pub mod fills;
pub mod library;
pub mod trace;

use crate::program::{CompileError, LoweredPlan};
use pto_wsp_ir::{self as ir, Bindings, Diagnostic, ExpandOptions, Expansion, Module, SourceFile};
use std::fmt;

/// A failure caused by the user's input, with its message already rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// The rendered text, ending with a newline (one or more `error: ...` blocks).
    pub rendered: String,
}

impl Error {
    /// A plain `error: MESSAGE` with no source location.
    pub fn plain(message: impl fmt::Display) -> Error {
        Error {
            rendered: format!("error: {message}\n"),
        }
    }

    /// Renders `diag` against `source`.
    pub fn diagnostic(source: &SourceFile, diag: &dyn Diagnostic) -> Error {
        Error {
            rendered: source.render(diag),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.rendered)
    }
}

impl std::error::Error for Error {}

/// A source file and the module parsed from it.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The text with its display name.
    pub source: SourceFile,
    /// The parsed module.
    pub module: Module,
}

/// Parses `text` (shown as `name` in messages) without validating it.
pub fn parse_source(name: &str, text: &str) -> Result<Loaded, Error> {
    let source = SourceFile::new(name, text);
    match ir::parse(text) {
        Ok(module) => Ok(Loaded { source, module }),
        Err(e) => Err(Error::diagnostic(&source, &e)),
    }
}

/// Parses and validates `text`, rendering every validation error.
pub fn load_source(name: &str, text: &str) -> Result<Loaded, Error> {
    let loaded = parse_source(name, text)?;
    match ir::validate(&loaded.module) {
        Ok(()) => Ok(loaded),
        Err(errors) => Err(render_all(&loaded.source, &errors)),
    }
}

/// Every check that needs no run-time value and that `run` makes, on a loaded (validated)
/// module, each error rendered at its `file:line:column`: its `//@ bind` lines, its
/// `//@ fill` lines, its `//@ alias` lines (against the built-in kernels), the rules for running
/// ([`ir::validate_for_run`]: the tile-grid rule of exact dependencies, `deps explicit`'s),
/// and the resolution of its entry point. So a module `check` accepts is refused by `run` only
/// for what depends on the run's inputs, flags or kernels.
pub fn check_for_run(loaded: &Loaded) -> Result<(), Error> {
    bindings_for(loaded, &[])?;
    fills::fill_lines(loaded)?;
    let mut registry = crate::kernels::KernelRegistry::with_builtins();
    aliases::apply_aliases(loaded, &mut registry)?;
    ir::validate_for_run(&loaded.module).map_err(|e| render_all(&loaded.source, &e))?;
    if loaded.module.entry_name().is_some() {
        crate::program::lower(&loaded.module).map_err(|e| compile_error(loaded, &e))?;
    }
    Ok(())
}

/// A module of plans (plans, and no workload or pipeline) made a module of tasks for a back end
/// that runs task graphs: its plans expanded at `bindings` into the workload
/// [`crate::plan::tasks::WORKLOAD`] ([`crate::plan::tasks::plans_as_tasks`]), the source text
/// kept. `None` for any other module.
pub fn plans_as_tasks(
    loaded: &Loaded,
    bindings: &Bindings,
) -> Result<Option<(Loaded, crate::plan::tasks::PlanTasks)>, Error> {
    let m = &loaded.module;
    if m.plans.is_empty() || !m.workloads.is_empty() || !m.pipelines.is_empty() {
        return Ok(None);
    }
    let tasks = crate::plan::tasks::plans_as_tasks(m, bindings)
        .map_err(|e| Error::diagnostic(&loaded.source, &e))?;
    let expanded = Loaded {
        source: loaded.source.clone(),
        module: tasks.module.clone(),
    };
    Ok(Some((expanded, tasks)))
}

/// What [`plans_as_tasks`] did, for a report: `plans expanded into task batches at the
/// bindings: `a` N tasks, `b` M tasks`, then each note rendered.
pub fn plan_tasks_summary(source: &SourceFile, tasks: &crate::plan::tasks::PlanTasks) -> String {
    let batches: Vec<String> = tasks
        .tasks
        .iter()
        .map(|(p, n)| format!("plan `{p}` {n} tasks"))
        .collect();
    let mut s = format!(
        "  plans expanded at the bindings into task batches, run in order: {}\n",
        batches.join(", ")
    );
    for (loc, note) in &tasks.notes {
        s.push_str(&format!("  note: {}: {note}\n", source.position(*loc)));
    }
    s
}

/// Renders several diagnostics, blank-line separated, with a closing count when there are many.
pub fn render_all<D: Diagnostic>(source: &SourceFile, errors: &[D]) -> Error {
    let mut rendered = errors
        .iter()
        .map(|e| source.render(e))
        .collect::<Vec<_>>()
        .join("\n");
    match errors.len() {
        0 => rendered.push_str("error: the module is invalid\n"),
        1 => {}
        n => rendered.push_str(&format!("\nerror: aborting due to {n} previous errors\n")),
    }
    Error { rendered }
}

/// `1 kernel`, `2 kernels`.
pub fn count(n: usize, what: &str) -> String {
    if n == 1 {
        format!("{n} {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// The line `pto-wsp check` prints for a valid module: `ok: NAME (N workloads, M kernels, ...)`.
pub fn check_summary(name: &str, module: &Module) -> String {
    let mut parts = vec![
        count(module.workloads.len(), "workload"),
        count(module.pipelines.len(), "pipeline"),
        count(module.kernels.len(), "kernel"),
        count(module.tensors.len(), "tensor"),
        count(module.axes.len(), "axis").replace("axiss", "axes"),
        count(module.symbols.len(), "symbol"),
    ];
    if !module.plans.is_empty() {
        parts.push(count(module.plans.len(), "plan"));
    }
    match module.entry_name() {
        Some(entry) => parts.push(format!("entry {entry}")),
        None if !module.plans.is_empty() => parts.push("runs its plans".to_string()),
        None => parts.push("no entry".to_string()),
    }
    if module.schedule.is_some() {
        parts.push("scheduled".to_string());
    }
    format!("ok: {name} ({})", parts.join(", "))
}

/// The canonical text of a module (the printer's output).
pub fn canonical(module: &Module) -> String {
    module.to_string()
}

/// The leading comment block of a file: the lines before the first line that is neither blank
/// nor a `//` comment, without trailing blank lines. The parser drops comments, so `fmt` keeps
/// this block (header comments and `//@ bind` lines) in front of the canonical text.
pub fn leading_comments(text: &str) -> String {
    let mut lines = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if t.is_empty() || t.starts_with("//") {
            lines.push(line.trim_end());
        } else {
            break;
        }
    }
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    while lines.first().is_some_and(|l| l.is_empty()) {
        lines.remove(0);
    }
    let mut out = lines.join("\n");
    if !out.is_empty() {
        out.push('\n');
    }
    out
}

/// The text `pto-wsp fmt` writes for a loaded file: its leading comment block, a blank line,
/// then the canonical text of its module.
pub fn formatted(loaded: &Loaded) -> String {
    let header = leading_comments(&loaded.source.text);
    let body = canonical(&loaded.module);
    if header.is_empty() {
        body
    } else {
        format!("{header}\n{body}")
    }
}

/// The bindings for an expansion: the file's `//@ bind` lines, then `given` (`NAME=VALUE`
/// each) in order, later ones overriding earlier ones.
pub fn bindings_for(loaded: &Loaded, given: &[String]) -> Result<Bindings, Error> {
    let mut bindings = Bindings::new();
    for line in binds::default_binds(&loaded.source.text) {
        binds::apply(&mut bindings, &loaded.module, &line.spec).map_err(|message| {
            Error::diagnostic(
                &loaded.source,
                &binds::BindLineError {
                    message,
                    loc: line.loc,
                },
            )
        })?;
    }
    for spec in given {
        binds::apply(&mut bindings, &loaded.module, spec)
            .map_err(|message| Error::plain(format!("in `--bind {spec}`: {message}")))?;
    }
    Ok(bindings)
}

/// Lowers `loaded` (validation for back ends, the one resolution of its entry point) with its
/// source attached, every error rendered.
pub fn lower(loaded: &Loaded) -> Result<LoweredPlan, Error> {
    crate::lower(&loaded.module)
        .map(|plan| plan.with_source(loaded.source.clone()))
        .map_err(|e| compile_error(loaded, &e))
}

/// The plan's source, or an empty one named `<module>` for a plan built without text.
fn source_of(plan: &LoweredPlan) -> std::borrow::Cow<'_, SourceFile> {
    match &plan.source {
        Some(s) => std::borrow::Cow::Borrowed(s.as_ref()),
        None => std::borrow::Cow::Owned(SourceFile::new("<module>", "")),
    }
}

/// Runs the reference expander on the plan's resolved program, rendering its error against the
/// plan's source.
pub fn expand(
    plan: &LoweredPlan,
    bindings: &Bindings,
    options: &ExpandOptions,
) -> Result<Expansion, Error> {
    ir::expand(plan.resolved(), bindings, options).map_err(|e| {
        let source = source_of(plan);
        if !e.loc().is_known() {
            Error::plain(format!("expansion of {} failed: {e}", source.name))
        } else {
            Error::diagnostic(&source, &e)
        }
    })
}

/// The message of a compile error: validation errors and anything with a place in the source
/// rendered at their `file:line:column`; an unknown kernel at its declaration, with the
/// `//@ alias` hint.
pub fn compile_error(loaded: &Loaded, e: &CompileError) -> Error {
    match e {
        CompileError::UnknownMachine { at, .. } => {
            let text = &loaded.source.text;
            let before = &text[..(*at).min(text.len())];
            let line = before.matches('\n').count() + 1;
            let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
            Error::plain(format!("{}:{line}:{col}: {e}", loaded.source.name))
        }
        CompileError::UnknownKernel { at, name, .. } => {
            let text = &loaded.source.text;
            let before = &text[..(*at).min(text.len())];
            let line = before.matches('\n').count() + 1;
            let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
            Error::plain(format!(
                "{}:{line}:{col}: {e} (or map it to one with a `//@ alias {name}=BUILTIN` line)",
                loaded.source.name,
            ))
        }
        // Refused for running (`pto_wsp_ir::validate_for_run`): rendered at their locations.
        CompileError::Invalid(errors) => render_all(&loaded.source, errors),
        CompileError::Unsupported(_) | CompileError::Resolve(_) | CompileError::Emitter(_) => {
            Error::diagnostic(&loaded.source, e)
        }
        _ => Error::plain(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leading_comment_block_is_kept_without_blank_edges() {
        let text = "\n// a\n//@ bind n=1\n\n// b\n\nsymbol n: i64; // tail\n// c\n";
        assert_eq!(leading_comments(text), "// a\n//@ bind n=1\n\n// b\n");
        assert_eq!(leading_comments("symbol n: i64;\n"), "");
    }

    #[test]
    fn summary_counts_declarations() {
        let m = Module::default();
        assert_eq!(
            check_summary("x.wsp", &m),
            "ok: x.wsp (0 workloads, 0 pipelines, 0 kernels, 0 tensors, 0 axes, 0 symbols, no entry)"
        );
    }

    #[test]
    fn parse_errors_are_rendered_not_panicked() {
        let err = parse_source("bad.wsp", "tensor A: f16[64 64];\n").expect_err("malformed");
        assert!(err.rendered.starts_with("error: "), "{err}");
        assert!(err.rendered.contains("bad.wsp"), "{err}");
    }
}
