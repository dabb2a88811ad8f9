//! The library half of the `pto-wsp` command-line tool.
//!
//! Why: the binary should be a thin shell around functions that tests can call directly, without
//! spawning processes and without the timing lines that make output unrepeatable. Everything the
//! tool prints on stdout is produced here; each command's module in [`cmd`] reads its files,
//! measures time and chooses its exit code, and `main.rs` only parses the command line.
//!
//! Promise: every failure caused by the input (syntax, validation, bindings, expansion) comes back
//! as a [`CliError`] whose text is already rendered for the user (rustc-style, with
//! `file:line:column` when a location is known); nothing here panics on bad input.

#![deny(unsafe_code)]

pub mod bench;
pub mod bench_devgen;
pub mod bench_kernels;
pub mod bench_llama;
pub mod bench_median;
mod bench_once;
pub mod cmd;
#[allow(unsafe_code)]
pub mod dense;
pub mod expect;
pub mod files;
pub mod inputs;
pub mod llm;
pub mod progress;
pub mod report;
pub mod timeline;
pub mod tune;

pub(crate) use pto_wsp::driver::count;
/// The front-end driver the tool shares with the Python extension: loading a text, its
/// `//@ bind` / `//@ alias` lines, rendered errors ([`pto_wsp::driver`]).
pub use pto_wsp::driver::{
    Error as CliError, Loaded, aliases, bindings_for, binds, canonical, check_summary,
    leading_comments, load_source, parse_source, render_all,
};

/// The a2a3 device rules (`pto_wsp::ir::device`) applied to every kernel with a body of
/// `loaded` (only those with `used[i]` when given): every violation rendered at its statement,
/// or how many kernels were checked and how many run as cube + vector parts.
pub fn device_check(loaded: &Loaded, used: Option<&[bool]>) -> Result<DeviceChecked, CliError> {
    let mut errors = Vec::new();
    let mut checked = DeviceChecked::default();
    for (i, k) in loaded.module.kernels.iter().enumerate() {
        if k.body.is_none() || used.is_some_and(|u| !u.get(i).copied().unwrap_or(false)) {
            continue;
        }
        let found = pto_wsp::ir::device::check::check_kernel(k);
        if found.is_empty() {
            checked.kernels += 1;
            if let Ok(split) = pto_wsp::ir::device::split::split(k)
                && split.parts.len() > 1
            {
                checked.split.push((k.name.name.clone(), split.parts.len()));
            }
        }
        errors.extend(found);
    }
    if errors.is_empty() {
        Ok(checked)
    } else {
        Err(render_all(&loaded.source, &errors))
    }
}

/// What [`device_check`] found legal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceChecked {
    /// Kernels with a body that follow every rule.
    pub kernels: usize,
    /// Kernels that use both cores, with their number of parts.
    pub split: Vec<(String, usize)>,
}

impl DeviceChecked {
    /// `legal on a2a3: 2 kernels (chunk: 5 parts, cube and vector)`.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "legal on {}: {} with a body",
            pto_wsp::ir::device::DEVICE,
            count(self.kernels, "kernel")
        );
        if !self.split.is_empty() {
            let parts: Vec<String> = self
                .split
                .iter()
                .map(|(k, n)| format!("`{k}` runs as {n} parts alternating cube and vector"))
                .collect();
            s.push_str(&format!(" ({})", parts.join(", ")));
        }
        s
    }
}

/// Whether `text` has `//` comments after its leading comment block (comments that `fmt` would
/// drop). Returns the 1-based line of the first such comment.
pub fn first_dropped_comment(text: &str) -> Option<usize> {
    let mut in_header = true;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if in_header && (t.is_empty() || t.starts_with("//")) {
            continue;
        }
        in_header = false;
        // A `//` inside code is always a comment: the format has no string literals.
        if line.contains("//") {
            return Some(i + 1);
        }
    }
    None
}

/// What `pto-wsp fmt` writes for a file: its leading comment block, a blank line, then the
/// canonical text of its module.
pub fn format_source(name: &str, text: &str) -> Result<String, CliError> {
    Ok(pto_wsp::driver::formatted(&parse_source(name, text)?))
}

/// The first line (1-based) where two texts differ, if they do.
pub fn first_difference(a: &str, b: &str) -> Option<usize> {
    if a == b {
        return None;
    }
    let mut la = a.lines();
    let mut lb = b.lines();
    let mut line = 1;
    loop {
        match (la.next(), lb.next()) {
            (Some(x), Some(y)) if x == y => line += 1,
            _ => return Some(line),
        }
    }
}

/// `x` with `digits` significant figures (at least the integer part): `0.0417`, `3.21`,
/// `45.6`, `1234`; `0` for zero.
pub fn sig(x: f64, digits: usize) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let magnitude = x.abs().log10().floor() as i64;
    let decimals = (digits as i64 - 1 - magnitude).max(0) as usize;
    format!("{x:.decimals$}")
}

/// How a run's tasks were generated, for the report's time line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Generation {
    /// On an orchestration thread while the workers run (start policy `immediate` or
    /// `threshold`).
    Overlapped,
    /// On an orchestration thread before any task runs (`start after_orchestration`).
    BeforeExecution,
    /// On every worker, interleaved with running (device generation).
    OnWorkers,
}

impl Generation {
    /// How a run of the resolved schedule `sched` generates its tasks (`device_gen`: in
    /// device-generation mode).
    pub fn of(sched: &pto_wsp::ir::resolve::Sched, device_gen: bool) -> Generation {
        if device_gen {
            Generation::OnWorkers
        } else if sched.config.start == pto_wsp::ir::StartPolicy::AfterOrchestration {
            Generation::BeforeExecution
        } else {
            Generation::Overlapped
        }
    }

    fn note(self) -> &'static str {
        match self {
            Generation::Overlapped => "overlapped with execution",
            Generation::BeforeExecution => "before execution",
            Generation::OnWorkers => "on the workers, interleaved with execution",
        }
    }
}

/// What the schedule turns on, so the report prints only the counters that mean something.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Features {
    /// A task window (`task_window`): window stalls, overflows, tasks in flight.
    pub window: bool,
    /// Issue gates (`pipeline_depth`): gate stalls.
    pub gates: bool,
    /// Dependency batching (`batch_deps` above 1): batches.
    pub batching: bool,
    /// Dispatch targets (any `dispatch` but `work_steal`): migrations.
    pub placement: bool,
}

impl Features {
    /// The features of the resolved schedule `sched`.
    pub fn of(sched: &pto_wsp::ir::resolve::Sched) -> Features {
        let config = &sched.config;
        Features {
            window: config.task_window.is_some(),
            gates: config.pipeline_depth.is_some(),
            batching: config.batch_deps > 1,
            placement: sched.placement(),
        }
    }
}

/// What the report says about the edges found: nothing when the count is that of a build that
/// never retires (every map the runtime uses keeps tombstones of completed tasks, so this holds
/// in every mode, docs/SEMANTICS.md, "Edges found and wired"), a note when some predecessors
/// were completed readers the TensorMap kept only as a count: one of them reaching a task twice
/// counts twice, the only way the count can differ between runs.
fn edges_note(stats: &pto_wsp::cpu::RunStats) -> String {
    match stats.edges_unnamed {
        0 => String::new(),
        k => format!(
            " ({k} of them to completed readers counted, not named: one reaching a task twice counts twice, so this count may differ between runs)"
        ),
    }
}

/// The report `pto-wsp run` prints: tasks (barrier tasks apart), edges (found, and wired to a
/// running producer), the run's time split (generation, execution), throughput with
/// significant figures, per-worker counts and the scheduler counters that mean something for
/// this schedule (steals when there were any; migrations when tasks have dispatch targets;
/// window, gate and batching counters only when the schedule has them).
pub fn run_report(
    name: &str,
    stats: &pto_wsp::cpu::RunStats,
    threads: usize,
    elapsed_ms: f64,
    generation: Generation,
    features: Features,
) -> String {
    let mut out = String::new();
    let user = stats.tasks - stats.barriers;
    let barriers = match stats.barriers {
        0 => String::new(),
        b => format!(" (and {b} barrier task(s) joining structural orders)"),
    };
    out.push_str(&format!(
        "{name}: ran {user} tasks{barriers} on {threads} worker thread(s)\n"
    ));
    out.push_str(&format!(
        "  edges: {} found by dependency inference{}, {} of them wired to a producer still running\n",
        stats.edges,
        edges_note(stats),
        stats.wired_edges
    ));
    out.push_str(&time_line(stats, elapsed_ms, generation));
    out.push_str(&format!("  per worker: {:?}\n", stats.per_worker));
    out.push_str(&generation_lines(stats));
    out.push_str(&scheduler_line(stats, features));
    out.push_str(&cycle_lines(stats));
    out
}

/// The report's `time:` line: end to end, generation when it was apart, the last task's end
/// and the rate.
fn time_line(stats: &pto_wsp::cpu::RunStats, elapsed_ms: f64, generation: Generation) -> String {
    let generation = if stats.build_ns > 0 {
        format!(
            "task generation {} ms ({}), ",
            sig(stats.build_ns as f64 / 1e6, 3),
            generation.note()
        )
    } else {
        String::new()
    };
    let per_task_us = if stats.tasks > 0 {
        stats.run_ns as f64 / 1e3 / stats.tasks as f64
    } else {
        0.0
    };
    format!(
        "  time: {} ms end to end: {generation}last task done at {} ms; {} tasks/ms ({} µs per task)\n",
        sig(elapsed_ms, 3),
        sig(stats.run_ns as f64 / 1e6, 3),
        sig(stats.tasks_per_ms(), 3),
        sig(per_task_us, 3),
    )
}

/// The report's lines on data-dependent generation and device generation, when they apply.
fn generation_lines(stats: &pto_wsp::cpu::RunStats) -> String {
    let mut out = String::new();
    let g = &stats.generation;
    if g.computed_reads > 0 || g.loops_at_max > 0 {
        out.push_str(&format!(
            "  data-dependent generation: {} computed read(s), {} stalled on producers for {} ms in all; {} `while` loop(s) reached their `max`\n",
            g.computed_reads,
            g.stalls,
            sig(g.stall_ns as f64 / 1e6, 3),
            g.loops_at_max,
        ));
    }
    if let Some(d) = &stats.device_gen {
        let sum =
            |f: fn(&pto_wsp::cpu::ExecutorStats) -> u64| -> u64 { d.executors.iter().map(f).sum() };
        out.push_str(&format!(
            "  device generation: {} executor(s) each walked {} tasks; own {:?}; cross-executor notifications {}, window stalls {}, parks {}\n",
            d.executors.len(),
            d.executors.first().map_or(0, |e| e.walked),
            d.executors.iter().map(|e| e.own).collect::<Vec<_>>(),
            sum(|e| e.sent),
            sum(|e| e.window_stalls),
            sum(|e| e.parks),
        ));
    }
    out
}

/// The report's `scheduler:` line: the counters that mean something for this schedule.
fn scheduler_line(stats: &pto_wsp::cpu::RunStats, features: Features) -> String {
    let c = &stats.counters;
    let mut counters = Vec::new();
    if c.steals > 0 {
        counters.push(format!("steals {}", c.steals));
    }
    if features.placement {
        counters.push(format!(
            "migrations {} (tasks run off their dispatch target; work_steal only)",
            c.migrations
        ));
    }
    if features.window {
        counters.push(format!(
            "window stalls {}, window overflows {}, in-flight high-water {}",
            c.window_stalls, c.window_overflows, c.in_flight_hwm
        ));
    }
    if features.gates {
        counters.push(format!("gate stalls {}", c.gate_stalls));
    }
    if features.batching {
        counters.push(format!("batches {}", c.batches));
    }
    if c.ready_len_hwm > 0 {
        counters.push(format!("ready-queue high-water {}", c.ready_len_hwm));
    }
    if counters.is_empty() {
        return String::new();
    }
    format!("  scheduler: {}\n", counters.join(", "))
}

/// The report's `cycle model:` lines, under `trace cycles`.
fn cycle_lines(stats: &pto_wsp::cpu::RunStats) -> String {
    let Some(y) = &stats.cycles else {
        return String::new();
    };
    let mut out = format!(
        "  cycle model: total_cycles {} on {} modelled executor(s); work {}, critical path {}, utilization {:.1}%\n",
        y.total_cycles,
        y.busy.len(),
        y.work_cycles,
        y.critical_path,
        100.0 * y.utilization()
    );
    let mut extra = Vec::new();
    if y.orchestration_cycles > 0 {
        extra.push(format!("orchestration ends at {}", y.orchestration_cycles));
    }
    if y.window_overflows > 0 {
        extra.push(format!("window overflows {}", y.window_overflows));
    }
    if y.migrations > 0 {
        extra.push(format!("migrations {}", y.migrations));
    }
    if !extra.is_empty() {
        out.push_str(&format!("  cycle model: {}\n", extra.join(", ")));
    }
    for d in &stats.device {
        out.push_str(&device_report(d));
    }
    out
}

/// A time in picoseconds as people read it (`1.23 ms`, `45.6 µs`, `780 ns`).
pub fn fmt_ps(ps: u64) -> String {
    let ns = ps as f64 / 1000.0;
    if ns >= 1e6 {
        format!("{} ms", sig(ns / 1e6, 4))
    } else if ns >= 1e3 {
        format!("{} µs", sig(ns / 1e3, 4))
    } else {
        format!("{} ns", sig(ns, 3))
    }
}

/// The lines of one device-model run in `pto-wsp run`'s report.
pub fn device_report(d: &pto_wsp::cpu::DeviceRun) -> String {
    let pct = |busy: u64, n: u64| {
        if d.makespan_ps == 0 || n == 0 {
            0.0
        } else {
            100.0 * busy as f64 / (n as f64 * d.makespan_ps as f64)
        }
    };
    let mut out = if d.host_generation {
        format!(
            "  device model: {}, host generation (host build, upload and launch {}, then {} scheduler thread(s)): makespan {}\n",
            d.machine,
            fmt_ps(d.prefix_ps),
            d.schedulers,
            fmt_ps(d.makespan_ps)
        )
    } else {
        format!(
            "  device model: {}, device generation ({} orchestrator + {} scheduler thread(s)): makespan {}\n",
            d.machine,
            d.orchestrators,
            d.schedulers,
            fmt_ps(d.makespan_ps)
        )
    };
    let kinds: Vec<String> = d
        .kinds
        .iter()
        .map(|(name, _, cores, busy)| {
            format!(
                "{name} {cores} × {:.1}% busy",
                pct(*busy, u64::from(*cores))
            )
        })
        .collect();
    let scheds: Vec<String> = d
        .report
        .scheduler_busy
        .iter()
        .map(|&b| format!("{:.1}", pct(b, 1)))
        .collect();
    let orch = if d.host_generation {
        String::new()
    } else {
        format!(
            "; orchestrator {:.1}% busy",
            pct(d.report.orchestrator_busy, 1)
        )
    };
    out.push_str(&format!(
        "    {}{orch}; schedulers {} % busy\n",
        kinds.join(", "),
        scheds.join(" / ")
    ));
    let w = d.report.waits;
    out.push_str(&format!(
        "    waits (sum over tasks): generation {}, dependencies {}, free core {}, dispatch {}\n",
        fmt_ps(w.generation),
        fmt_ps(w.dependencies),
        fmt_ps(w.free_core),
        fmt_ps(w.dispatch)
    ));
    for n in &d.notes {
        out.push_str(&format!("    note: {n}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_after_the_leading_block_are_found() {
        let text = "\n// a\n//@ bind n=1\n\n// b\n\nsymbol n: i64; // tail\n// c\n";
        assert_eq!(first_dropped_comment(text), Some(7));
        assert_eq!(first_dropped_comment("// a\nsymbol n: i64;\n"), None);
    }

    #[test]
    fn sig_keeps_significant_figures() {
        assert_eq!(sig(0.0417, 3), "0.0417");
        assert_eq!(sig(0.04, 3), "0.0400");
        assert_eq!(sig(3.214, 3), "3.21");
        assert_eq!(sig(45.66, 3), "45.7");
        assert_eq!(sig(1234.4, 3), "1234");
        assert_eq!(sig(0.0, 3), "0");
    }

    #[test]
    fn first_difference_finds_the_line() {
        assert_eq!(first_difference("a\nb\n", "a\nb\n"), None);
        assert_eq!(first_difference("a\nb\n", "a\nc\n"), Some(2));
        assert_eq!(first_difference("a\n", "a\nb\n"), Some(2));
        assert_eq!(first_difference("a", "a\n"), Some(2));
    }

    /// The report warns that the edges found may vary exactly when some were counted without
    /// a name (docs/SEMANTICS.md, "Edges found and wired"), in any generation mode.
    #[test]
    fn the_report_says_when_the_edges_found_vary() {
        let stats = |edges_unnamed| pto_wsp::cpu::RunStats {
            tasks: 100_000,
            edges: 10,
            wired_edges: 4,
            edges_unnamed,
            ..Default::default()
        };
        let line = |unnamed, generation| {
            let r = run_report(
                "w",
                &stats(unnamed),
                2,
                1.0,
                generation,
                Features::default(),
            );
            r.lines()
                .find(|l| l.contains("edges:"))
                .unwrap()
                .to_string()
        };
        for generation in [
            Generation::Overlapped,
            Generation::OnWorkers,
            Generation::BeforeExecution,
        ] {
            assert_eq!(
                line(0, generation),
                "  edges: 10 found by dependency inference, 4 of them wired to a producer still running"
            );
            assert_eq!(
                line(3, generation),
                "  edges: 10 found by dependency inference (3 of them to completed readers counted, not named: one reaching a task twice counts twice, so this count may differ between runs), 4 of them wired to a producer still running"
            );
        }
    }
}
