//! Which schedule directives each way of running a `cpu_sim` program honours: the directive ×
//! mode table of `docs/SEMANTICS.md`, written once and read when a program is compiled.
//!
//! Why: a schedule is only worth separating from the workload if changing it changes the run.
//! A directive a mode cannot honour must not be dropped silently: compiling for that mode fails
//! with an [`Unsupported`] error naming the directive, the mode and where the directive is
//! written ([`refused`]). A few directives have no object in a mode (dispatch targets of a CSP
//! pipeline, whose processes are threads): those compile, and [`notes`] says they do nothing.
//!
//! Promise: every directive the host streamed run does not honour is refused or noted here for
//! the other modes; the host streamed run honours every directive (the cycle model as well,
//! under `trace cycles`).

use pto_wsp_ir::{
    DepsMode, Loc, Module, PoolsPolicy, ReadyPolicy, Resolved, ScheduleItemKind, StartPolicy,
    TaskGraphItem, Timing, TracePolicy, Unsupported, WindowMode,
};

/// Data-dependent generation (`docs/SEMANTICS.md`, "Computed reads") in each mode: the rows of
/// the table below the directives. The first construct of `r` that `mode` cannot run, as an
/// error naming it and where it is written.
///
/// | construct | host run | device generation | CSP pipeline |
/// |---|---|---|---|
/// | computed `load` (and the conditions, `while` bounds, `dense_dyn` extents it feeds) | honoured | honoured (`read`) | honoured (ordered by the channels; checked against running tasks) |
/// | ragged / sparse axis over computed arrays | honoured | honoured (read whole when its loop starts) | as `load` |
/// | `while COND max N`, `break if` | honoured | honoured (`while` / `wend` / `break`) | honoured |
pub(crate) fn data_refused(r: &Resolved, mode: Mode) -> Result<(), Unsupported> {
    match mode {
        Mode::Host => Ok(()),
        // What the bytecode cannot express (it reads computed data one element at a time) is
        // its own check; device generation runs the bytecode.
        Mode::DeviceGen => pto_wsp_bytecode::supports(r).map_err(|u| Unsupported {
            backend: "cpu_sim".into(),
            construct: format!("{} in {}", u.construct, mode.name()),
            loc: u.loc,
        }),
        // A process runs each task to completion before its next statement, and the channels
        // order the processes: a read sees what the channel order puts before it, and the CSP
        // runner checks it against other processes' running tasks (`pto_wsp_cpu::csp`).
        Mode::Pipeline => Ok(()),
    }
}

/// How a program runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// An orchestration thread builds the graph while workers run it.
    Host,
    /// Every worker interprets the bytecode and runs its own tasks.
    DeviceGen,
    /// A CSP pipeline: one thread per process, bounded channels.
    Pipeline,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Host => "a host run",
            Mode::DeviceGen => "device generation (`--device-gen`)",
            Mode::Pipeline => "a CSP pipeline run",
        }
    }
}

/// What a mode does with one directive.
enum Verdict {
    Honoured,
    /// Compiling fails: why the mode cannot honour it.
    Refused(&'static str),
    /// Compiles; the directive has no object in the mode: why.
    Moot(&'static str),
}

/// Every directive of `module`'s schedule with where it is written, as the user wrote it.
fn directives(module: &Module) -> Vec<(String, Loc, Directive)> {
    let mut out = Vec::new();
    let Some(s) = &module.schedule else {
        return out;
    };
    for item in &s.items {
        match &item.kind {
            ScheduleItemKind::TaskGraph(items) => {
                for it in items {
                    let text = it.to_string().trim_end_matches(';').to_string();
                    out.push((text, item.loc, Directive::TaskGraph(it.clone())));
                }
            }
            k => {
                let text = k.to_string().trim_end_matches(';').to_string();
                out.push((text, item.loc, Directive::Item(k.clone())));
            }
        }
    }
    out
}

enum Directive {
    Item(ScheduleItemKind),
    TaskGraph(TaskGraphItem),
}

fn verdict(d: &Directive, mode: Mode) -> Verdict {
    use Mode::*;
    use Verdict::*;
    match (d, mode) {
        (_, Host) => Honoured,
        (Directive::Item(k), DeviceGen) => match k {
            ScheduleItemKind::Timing(Timing::Immediate) => Honoured,
            ScheduleItemKind::Timing(_) => Refused(
                "every executor releases the tasks it generates at once; no orchestrator paces them",
            ),
            ScheduleItemKind::PipelineDepth(..) => Refused("its executors have no issue gates yet"),
            ScheduleItemKind::BatchDeps(n) if *n > 1 => Refused("completions are not batched yet"),
            ScheduleItemKind::TaskWindow(_, WindowMode::Stall) => Honoured,
            ScheduleItemKind::TaskWindow(..) => Refused(
                "each executor's window always stalls (its share of the window); `abort` and \
                 `benchmark` are host modes",
            ),
            ScheduleItemKind::DispatchThreshold(_) => Refused("it has no pools yet"),
            _ => Honoured,
        },
        (Directive::TaskGraph(t), DeviceGen) => match t {
            TaskGraphItem::Start(StartPolicy::Immediate) => Honoured,
            TaskGraphItem::Start(_) => {
                Refused("tasks run as they are generated: there is no build to wait for")
            }
            TaskGraphItem::Ready(ReadyPolicy::Priority(_)) => {
                Refused("each executor runs its own ready tasks in generation order")
            }
            TaskGraphItem::Ready(ReadyPolicy::WorkSteal) => {
                Moot("each executor runs the tasks it owns: there is nothing to steal")
            }
            TaskGraphItem::Pools(PoolsPolicy::ByExecUnit) => {
                Moot("its executors are not split into vector and cube pools")
            }
            TaskGraphItem::Trace(TracePolicy::Cycles(..)) => {
                Refused("the cycle model needs the host-built graph")
            }
            _ => Honoured,
        },
        (Directive::Item(k), Pipeline) => match k {
            ScheduleItemKind::Timing(Timing::Immediate) => Honoured,
            ScheduleItemKind::Timing(_) | ScheduleItemKind::PipelineDepth(..) => {
                Refused("each process runs its own tasks in order; only its channels pace it")
            }
            ScheduleItemKind::TaskWindow(..) => {
                Refused("its channels' depths bound what is in flight")
            }
            ScheduleItemKind::BatchDeps(n) if *n > 1 => {
                Refused("its processes have no dependency batching")
            }
            ScheduleItemKind::DispatchThreshold(_) => Refused("its processes have no pools"),
            ScheduleItemKind::Dispatch(_) | ScheduleItemKind::Executors(_) => {
                Moot("each process runs its tasks on its own thread")
            }
            _ => Honoured,
        },
        (Directive::TaskGraph(t), Pipeline) => match t {
            TaskGraphItem::Start(StartPolicy::Immediate) => Honoured,
            TaskGraphItem::Start(_) => Refused("its processes start at once"),
            TaskGraphItem::Ready(ReadyPolicy::Priority(_)) => {
                Refused("each process runs its tasks in program order")
            }
            TaskGraphItem::Ready(ReadyPolicy::WorkSteal) => {
                Moot("each process runs its own tasks: there is nothing to steal")
            }
            TaskGraphItem::Pools(PoolsPolicy::ByExecUnit) => Moot("its processes have no pools"),
            TaskGraphItem::Deps(DepsMode::Explicit) => Honoured,
            TaskGraphItem::Deps(_) => Moot(
                "its processes are ordered by program order and channels; no dependency is \
                 inferred (running tasks' regions are checked for conflicts)",
            ),
            _ => Honoured,
        },
    }
}

/// The first directive of `module`'s schedule that `mode` cannot honour, as an error.
pub(crate) fn refused(module: &Module, mode: Mode) -> Result<(), Unsupported> {
    for (text, loc, d) in directives(module) {
        if let Verdict::Refused(why) = verdict(&d, mode) {
            return Err(Unsupported {
                backend: "cpu_sim".into(),
                construct: format!("`{text}` in {}: {why}", mode.name()),
                loc,
            });
        }
    }
    Ok(())
}

/// The device timeline model (`--machine`, `trace cycles device(NAME)`) is refused outside host
/// runs: it replays the host-built graph of a finished run, which device generation and
/// pipelines do not build (in device generation a schedule's `trace cycles` is refused first,
/// at its place, by [`refused`]).
pub(crate) fn machine_refused(mode: Mode) -> Result<(), Unsupported> {
    if matches!(mode, Mode::Host) {
        return Ok(());
    }
    Err(Unsupported {
        backend: "cpu_sim".into(),
        construct: format!(
            "the device timeline model (`--machine`, `trace cycles device(NAME)`) in {}: it models the graph a host run \
             builds, which this mode does not build",
            mode.name()
        ),
        loc: Loc::NONE,
    })
}

/// One line per directive of `module`'s schedule that compiles in `mode` but does nothing
/// there, saying why.
pub(crate) fn notes(module: &Module, mode: Mode) -> Vec<String> {
    directives(module)
        .into_iter()
        .filter_map(|(text, _, d)| match verdict(&d, mode) {
            Verdict::Moot(why) => Some(format!("`{text}` does nothing in {}: {why}", mode.name())),
            _ => None,
        })
        .collect()
}
