//! `pto-wsp run` on a module of plans (Plan-Descriptor-Execute, `docs/PDE.md`): the same data in
//! and out as a workload run (`--seed`, `--input`, `--output`, `--expect`, `//@ alias`,
//! `//@ bind`), the plans run in declaration order by `pto_wsp::plan`, each error rendered at
//! its `file:line:column`.
//!
//! A module is run this way when it has plans and no workload or pipeline, or with `--plans`
//! (a module that also has a workload: its plans, not its workload); `--threads` is the
//! number of dispatch threads (0: one per core). Flags that belong to the task-graph runtime
//! (`--trace`, `--device-gen`, `--check`, `--empty-kernels`, `--issue-cycles`) are refused:
//! plan runs always check the regions of descriptors in flight.

use crate::cmd::run::RunOptions;
use crate::expect::ExpectResult;
use crate::files::Outputs;
use crate::{CliError, aliases};
use pto_wsp::kernels::{KernelRegistry, TensorStore};
use pto_wsp::plan::{PlanOptions, PlanStats, run_plans};
use std::time::Instant;

/// What a plan run produced.
#[derive(Debug)]
pub struct PlanOutcome {
    /// Each plan's launch.
    pub stats: Vec<PlanStats>,
    /// The `--expect` comparisons, in flag order.
    pub expectations: Vec<ExpectResult>,
    /// What `run` prints on stdout.
    pub report: String,
}

/// Runs module `text` (shown as `name`) if it is a module of plans, or its plans whatever else
/// it has when `plans` (`--plans`); `None` if it is not (a workload or pipeline module, run by
/// [`crate::cmd::run::run`]).
pub fn run(
    name: &str,
    text: &str,
    opts: &RunOptions,
    plans: bool,
) -> Result<Option<PlanOutcome>, CliError> {
    let loaded = crate::load_source(name, text)?;
    let m = &loaded.module;
    if plans && m.plans.is_empty() {
        return Err(CliError::plain(format!(
            "{name}: `--plans`, but the module declares no plan"
        )));
    }
    if m.plans.is_empty() || (!plans && (!m.workloads.is_empty() || !m.pipelines.is_empty())) {
        return Ok(None);
    }
    let refused = [
        (opts.trace.is_some(), "--trace"),
        (opts.device_gen, "--device-gen"),
        (opts.debug_checks, "--check"),
        (opts.empty_kernels, "--empty-kernels"),
        (opts.issue_cycles != 0, "--issue-cycles"),
    ];
    if let Some((_, flag)) = refused.iter().find(|(on, _)| *on) {
        return Err(CliError::plain(format!(
            "{name}: `{flag}` applies to workload runs; a module of plans runs its plans (regions \
             in flight are always checked)"
        )));
    }
    let t0 = Instant::now();
    let mut bindings = crate::bindings_for(&loaded, &opts.binds)?;
    let tensor_names: Vec<&str> = m.tensors.iter().map(|t| t.name.as_str()).collect();
    let outputs = Outputs::check(&opts.outputs, None, &tensor_names)?;
    let goldens = opts
        .expect
        .iter()
        .map(|spec| crate::expect::Expectation::read(spec))
        .collect::<Result<Vec<_>, _>>()?;
    let inputs = crate::inputs::open_all(name, m, &mut bindings, &opts.inputs)?;
    let mut store =
        TensorStore::new(m, &bindings).map_err(|e| CliError::plain(format!("{name}: {e}")))?;
    let given: Vec<u32> = inputs
        .iter()
        .filter_map(|i| store.index_of(&i.tensor))
        .collect();
    store.fill_random_except(opts.seed, &given);
    crate::inputs::read_all(&inputs, &mut store)?;
    let mut registry = KernelRegistry::with_builtins();
    pto_wsp::kernels::lang::register_bodies(m, &mut registry);
    aliases::apply_aliases(&loaded, &mut registry)?;
    let threads = if opts.threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        opts.threads
    };
    let build_ms = t0.elapsed().as_secs_f64() * 1e3;
    let t1 = Instant::now();
    let plan_opts = PlanOptions {
        dispatch_threads: threads,
        ..PlanOptions::default()
    };
    let stats = run_plans(m, &bindings, &mut store, &registry, plan_opts)
        .map_err(|e| CliError::diagnostic(&loaded.source, &e))?;
    let run_ms = t1.elapsed().as_secs_f64() * 1e3;
    let expectations = goldens
        .iter()
        .map(|g| g.compare(&store, opts.rtol, opts.atol))
        .collect::<Result<Vec<_>, _>>()?;
    outputs.commit(
        |tensor| store.to_npy(tensor).map_err(|e| e.to_string()),
        Vec::new,
    )?;
    let mut report = format!(
        "{name}: {} plan(s) on {threads} dispatch thread(s) in {} ms (prepare {} ms)\n",
        stats.len(),
        crate::sig(run_ms, 3),
        crate::sig(build_ms, 3)
    );
    for s in &stats {
        report.push_str(&format!(
            "  plan {}: {} descriptors ({} bytes each), per dispatch thread {:?}, workspace {} elements\n",
            s.plan,
            s.launch.descriptors,
            pto_wsp::pde::Descriptor::BYTES,
            s.launch.per_thread,
            s.launch.workspace_used
        ));
    }
    for e in &expectations {
        report.push_str(&e.line);
    }
    Ok(Some(PlanOutcome {
        stats,
        expectations,
        report,
    }))
}
