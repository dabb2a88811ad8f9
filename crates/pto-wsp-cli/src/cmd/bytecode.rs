//! `pto-wsp bytecode`: encode a module, report its size against the expanded task list, run
//! every executor's interpreter and check it against the reference expander.
//!
//! Why: the bytecode's promise is "a few hundred bytes instead of a task list, and every
//! executor generates exactly its share"; this command shows both for any module and bindings.
//! Promise: the report is deterministic (no timing; the binary prints times on stderr); a
//! disagreement with the reference expander is an error, never a silent difference. An entry
//! with computed reads is encoded and disassembled but its tasks are not listed (they depend on
//! values only a run computes), and the report says so.

use crate::CliError;
use pto_wsp::LoweredPlan;
use pto_wsp::bytecode::{
    EncodeOptions, ExecutorConfig, Interpreter, Program, RunSummary, Task, TaskSink, encode,
};
use pto_wsp::ir::{Bindings, ExpandedTask, Expansion, OrderEdge, Resolved};
use std::fmt::Write as _;
use std::ops::{ControlFlow, Range};
use std::time::{Duration, Instant};

/// What to print besides the summary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BytecodeOptions {
    /// Print the disassembly.
    pub disasm: bool,
    /// Print per-executor interpretation statistics and table sizes.
    pub stats: bool,
    /// Override the schedule's executor count.
    pub executors: Option<u64>,
}

/// The report text and how long the interpreters took (all executors, one after another).
#[derive(Clone, Debug)]
pub struct BytecodeReport {
    /// What `pto-wsp bytecode` prints on stdout.
    pub text: String,
    /// Total interpretation time over every executor.
    pub elapsed: Duration,
    /// The slowest executor's time.
    pub slowest: Duration,
    /// Tasks generated over every executor.
    pub tasks: u64,
    /// Executors run.
    pub executors: u64,
}

/// Bytes an `ExpandedTask` list takes in memory (struct plus its heap vectors).
pub fn expansion_bytes(x: &Expansion) -> usize {
    use std::mem::size_of;
    x.tasks.capacity() * size_of::<ExpandedTask>()
        + x.tasks
            .iter()
            .map(|t| {
                t.params.capacity() * size_of::<pto_wsp::ir::Value>()
                    + t.regions.capacity() * size_of::<pto_wsp::ir::ExpandedRegion>()
                    + t.regions
                        .iter()
                        .map(|r| (r.start.capacity() + r.size.capacity()) * size_of::<i64>())
                        .sum::<usize>()
            })
            .sum::<usize>()
        + x.order.capacity() * size_of::<OrderEdge>()
}

/// Size of one task structure of the older runtime the on-device generation specification
/// compares with (`PendingTask` with 16 arguments and a 512-entry fan-out, "~2 KB").
pub const PENDING_TASK_BYTES: usize = 2048;

/// Checks an executor's tasks against the expansion as they come.
struct Checker<'a> {
    x: &'a Expansion,
    me: u32,
    executors: u64,
    next: usize,
    count: u64,
    mismatch: Option<String>,
}

fn same(t: &Task<'_>, e: &ExpandedTask) -> bool {
    t.kernel == e.kernel
        && t.declared == e.declared
        && t.pool == e.pool
        && t.target == e.target
        && t.stream == e.stream
        && t.params == e.params.as_slice()
        && t.region_count() == e.regions.len()
        && t.regions().zip(&e.regions).all(|(a, b)| {
            a.tensor == b.tensor && a.access == b.access && a.start == b.start && a.size == b.size
        })
}

fn owner(t: &ExpandedTask, i: usize, executors: u64) -> u32 {
    match t.target {
        Some(x) => (u64::from(x) % executors) as u32,
        None => (i as u64 % executors) as u32,
    }
}

impl Checker<'_> {
    fn fail(&mut self, m: String) -> ControlFlow<()> {
        self.mismatch = Some(m);
        ControlFlow::Break(())
    }
}

impl TaskSink for Checker<'_> {
    fn task(&mut self, task: &Task<'_>) -> ControlFlow<()> {
        // The expander's next task of this executor.
        while self.next < self.x.tasks.len()
            && owner(&self.x.tasks[self.next], self.next, self.executors) != self.me
        {
            self.next += 1;
        }
        let Some(e) = self.x.tasks.get(self.next) else {
            return self.fail(format!(
                "executor {} generated an extra task #{}",
                self.me, task.index
            ));
        };
        if task.index as usize != self.next || !same(task, e) {
            return self.fail(format!(
                "executor {} generated task #{}, the reference expander's next task of this executor is #{}",
                self.me, task.index, self.next
            ));
        }
        self.next += 1;
        self.count += 1;
        ControlFlow::Continue(())
    }
    fn order_begin(&mut self, _before: Range<u32>, _after_start: u32) {}
    fn order(&mut self, _edge: OrderEdge) {}
}

/// The tensors whose computed values the resolved entry reads (`docs/SEMANTICS.md`,
/// "Computed reads"), by name: such an entry's tasks depend on what its own tasks compute, so
/// the reference expander cannot list them.
pub fn computed_tensors(resolved: &Resolved) -> Vec<String> {
    resolved
        .computed_reads()
        .into_iter()
        .map(|(t, _)| resolved.module.tensors[t.index()].name.name.clone())
        .collect()
}

/// Encodes, runs every executor and reports (see the module docs). With no `expansion` (an
/// entry with computed reads, [`computed_tensors`]) it reports the encoding and the disassembly
/// only: the tasks are generated from values only a run computes.
pub fn bytecode_report(
    name: &str,
    plan: &LoweredPlan,
    bindings: &Bindings,
    expansion: Option<&Expansion>,
    options: &BytecodeOptions,
) -> Result<BytecodeReport, CliError> {
    let fail =
        |what: &str, e: &dyn std::fmt::Display| CliError::plain(format!("{what} {name}: {e}"));
    let resolved = plan.resolved();
    let bytes =
        encode(resolved, &EncodeOptions::default()).map_err(|e| fail("cannot encode", &e))?;
    let stripped =
        encode(resolved, &EncodeOptions { names: false }).map_err(|e| fail("cannot encode", &e))?;
    let prog = Program::decode(&bytes).map_err(|e| fail("internal error: cannot decode", &e))?;
    let bound = prog.bind(bindings).map_err(|e| fail("cannot bind", &e))?;
    let mut out = header(plan, bindings, &prog, bytes.len(), stripped.len());
    let Some(expansion) = expansion else {
        let _ = writeln!(
            out,
            "tasks: not listed: the entry reads computed values of {}, so its tasks depend on \
             what earlier tasks compute (`pto-wsp run --device-gen` runs the interpreters)",
            computed_tensors(resolved)
                .iter()
                .map(|t| format!("`{t}`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        if options.disasm {
            out.push('\n');
            out.push_str(&prog.disassemble());
        }
        return Ok(BytecodeReport {
            text: out,
            elapsed: Duration::ZERO,
            slowest: Duration::ZERO,
            tasks: 0,
            executors: 0,
        });
    };
    sizes(&mut out, expansion, bytes.len());
    let executors = options.executors.unwrap_or(prog.executors());
    if executors > 4096 {
        return Err(CliError::plain(format!(
            "{name}: {executors} executors: the report runs at most 4096 interpreters"
        )));
    }
    let run = Executors {
        name,
        prog: &prog,
        bound: &bound,
        expansion,
        executors,
        given: options.executors,
    };
    let (rows, total, elapsed, slowest) = run.all()?;
    let _ = writeln!(
        out,
        "per executor ({executors} executors; every task checked against the reference expander):"
    );
    for (me, s) in &rows {
        if options.stats {
            let _ = writeln!(
                out,
                "  {me:>4}  {:>8} tasks  {:>8} stepped over  {:>8} skipped in whole iterations",
                s.tasks, s.filtered, s.skipped
            );
        } else {
            let _ = writeln!(out, "  {me:>4}  {:>8}", s.tasks);
        }
    }
    if options.disasm {
        out.push('\n');
        out.push_str(&prog.disassemble());
    }
    Ok(BytecodeReport {
        text: out,
        elapsed,
        slowest,
        tasks: total,
        executors,
    })
}

/// The report's first lines: entry, bindings, the bytecode's size with and without names.
fn header(
    plan: &LoweredPlan,
    bindings: &Bindings,
    prog: &Program,
    bytes: usize,
    stripped: usize,
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "entry: {}", plan.module().entry_name().unwrap_or("?"));
    let bound_text = crate::report::bindings_line(bindings);
    let _ = writeln!(
        out,
        "bindings: {}",
        if bound_text.is_empty() {
            "(none)"
        } else {
            &bound_text
        }
    );
    let _ = writeln!(
        out,
        "bytecode: {bytes} bytes ({stripped} without debug names): {} instructions, {} task statements",
        prog.instructions(),
        prog.task_statements()
    );
    out
}

/// The task count and what the task list would take instead of `bytes` of bytecode.
fn sizes(out: &mut String, expansion: &Expansion, bytes: usize) {
    let n = expansion.tasks.len();
    let ex_bytes = expansion_bytes(expansion);
    let ratio = |b: usize| {
        if bytes == 0 {
            0.0
        } else {
            b as f64 / bytes as f64
        }
    };
    let _ = writeln!(out, "tasks: {n}");
    let _ = writeln!(
        out,
        "  as the reference expander's task list: {ex_bytes} bytes ({:.0}x the bytecode)",
        ratio(ex_bytes)
    );
    let _ = writeln!(
        out,
        "  as {PENDING_TASK_BYTES}-byte task structs of the older runtime: {} bytes ({:.0}x the bytecode)",
        n * PENDING_TASK_BYTES,
        ratio(n * PENDING_TASK_BYTES)
    );
}

/// Every executor's interpreter over one bound program, each checked against the expansion.
struct Executors<'a> {
    name: &'a str,
    prog: &'a Program,
    bound: &'a pto_wsp::bytecode::Bound,
    expansion: &'a Expansion,
    /// How many executors run.
    executors: u64,
    /// The executor count given on the command line, if any.
    given: Option<u64>,
}

/// Per executor its summary; the tasks checked, the total and the slowest interpretation time.
type Rows = (Vec<(u32, RunSummary)>, u64, Duration, Duration);

impl Executors<'_> {
    /// Runs every executor in turn.
    fn all(&self) -> Result<Rows, CliError> {
        let mut rows = Vec::new();
        let mut elapsed = Duration::ZERO;
        let mut slowest = Duration::ZERO;
        let mut total = 0u64;
        for me in 0..self.executors as u32 {
            let start = Instant::now();
            let (summary, count) = self.one(me)?;
            let t = start.elapsed();
            elapsed += t;
            slowest = slowest.max(t);
            total += count;
            rows.push((me, summary));
        }
        Ok((rows, total, elapsed, slowest))
    }

    /// Runs executor `me` (its summary and the tasks checked); an error names a task that
    /// differs from the expander's or a count that does.
    fn one(&self, me: u32) -> Result<(RunSummary, u64), CliError> {
        let name = self.name;
        let fail =
            |what: &str, e: &dyn std::fmt::Display| CliError::plain(format!("{what} {name}: {e}"));
        let config = ExecutorConfig {
            executor: Some(me),
            executors: self.given,
            owners: None,
            max_steps: None,
        };
        let mut interp = Interpreter::new(self.prog, self.bound, config)
            .map_err(|e| fail("cannot interpret", &e))?;
        let mut check = Checker {
            x: self.expansion,
            me,
            executors: self.executors,
            next: 0,
            count: 0,
            mismatch: None,
        };
        let summary: RunSummary = interp
            .run(&mut check)
            .map_err(|e| fail(&format!("executor {me} failed on"), &e))?;
        if let Some(m) = check.mismatch {
            return Err(CliError::plain(format!("{name}: {m}")));
        }
        let expected = self
            .expansion
            .tasks
            .iter()
            .enumerate()
            .filter(|(i, t)| owner(t, *i, self.executors) == me)
            .count() as u64;
        if check.count != expected {
            return Err(CliError::plain(format!(
                "{name}: executor {me} generated {} tasks, the reference expander gives it {expected}",
                check.count
            )));
        }
        Ok((summary, check.count))
    }
}

/// The arguments of `pto-wsp bytecode`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The `.wsp` file.
    pub file: std::path::PathBuf,
    /// Bind a symbol, slot or integer tensor (after the file's `//@ bind` defaults).
    #[arg(long = "bind", value_name = "NAME=VALUE")]
    pub binds: Vec<String>,
    /// Print a readable listing of the bytecode.
    #[arg(long)]
    pub disasm: bool,
    /// Print per-executor statistics (tasks stepped over, skipped in whole iterations).
    #[arg(long)]
    pub stats: bool,
    /// Override the schedule's number of executors (1 to 65536).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=pto_wsp::ir::schedule::limits::EXECUTORS))]
    pub executors: Option<u64>,
}

/// Runs `pto-wsp bytecode`: the report on stdout, the interpreters' time on stderr.
pub fn main(args: Args) -> anyhow::Result<std::process::ExitCode> {
    let name = args.file.display().to_string();
    let loaded = crate::load_source(&name, &super::read(&args.file)?)?;
    let bindings = crate::bindings_for(&loaded, &args.binds)?;
    let options = pto_wsp::ir::ExpandOptions {
        limit: None,
        executors: args.executors,
    };
    // An entry with computed reads generates tasks from values only a run computes: no
    // expander list to check the interpreters against.
    let plan = pto_wsp::driver::lower(&loaded)?;
    let expansion = if computed_tensors(plan.resolved()).is_empty() {
        Some(pto_wsp::driver::expand(&plan, &bindings, &options)?)
    } else {
        None
    };
    let opts = BytecodeOptions {
        disasm: args.disasm,
        stats: args.stats,
        executors: args.executors,
    };
    let report = bytecode_report(&name, &plan, &bindings, expansion.as_ref(), &opts)?;
    super::print(&report.text)?;
    if expansion.is_some() {
        let secs = report.elapsed.as_secs_f64();
        eprintln!(
            "interpreted {} tasks on {} executors (one after another) in {:.2} ms ({} M tasks/s, task checks included); slowest executor {:.2} ms",
            report.tasks,
            report.executors,
            secs * 1000.0,
            super::rate(report.tasks as f64 / 1e6, secs, 1),
            report.slowest.as_secs_f64() * 1000.0
        );
    }
    Ok(std::process::ExitCode::SUCCESS)
}
