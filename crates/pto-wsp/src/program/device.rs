//! The device timeline model of a finished run: the run's graph and schedule on a machine
//! description ([`crate::machine`]), by the cycle model's engine with device timing
//! ([`pto_wsp_cpu::sim::simulate_device`]).
//!
//! Why here: the graph (tasks, regions, edges) and the schedule are the program's; the machine
//! turns each task into a core kind and a duration, and the control path into generation,
//! scheduler and handshake costs. Promises (approximations are listed in `docs/BACKENDS.md`):
//! - a task's **kind**: the cube core (AIC) when its kernel does matrix work or the schedule puts
//!   it in the cube pool, else a vector core (AIV); barrier tasks run on no core;
//! - its **duration**: built-ins from their work model (`matmul_flops` at the cube rate of the
//!   element type, vector operations at the vector width, transcendentals at the `TEXP` factor,
//!   bytes at the per-core global-memory rate; the largest of these, the units overlapping);
//!   kernels with a tile body from their instructions, one after another (loads and stores by
//!   bytes at the memory rates, `TMATMUL` by M·K·N at the cube rate, vector instructions by
//!   256-byte repeats times their factor, each with the scalar unit's issue cycles; 4-byte
//!   elements); `trace cycles(EXPR)` costs are AI Core cycles; other registered kernels their
//!   cost function's value in cycles;
//! - **device generation**: each task costs the orchestrator `gen_base + gen_per_region ×
//!   regions` AICPU instructions; **host generation**: the host builds and uploads the graph,
//!   launches it, and the orchestrator thread joins the schedulers;
//! - cores are numbered AIV first, then AIC; cluster `c`'s cores belong to scheduler `c mod S`;
//!   a dispatch target `x` goes to core `(x mod executors) mod cores(kind)` of its kind.

use pto_wsp_cpu::sim::{
    DeviceRun, DeviceTimes, SimError, SimMachine, SimSchedule, SimTask, simulate_device,
};
use pto_wsp_cpu::{TaskTable, with_task_contexts};
use pto_wsp_ir::kernel_body::{Walk, inst_cycles};
use pto_wsp_ir::resolve::body::{Body, resolve_body};
use pto_wsp_ir::{Dispatch, ExecPool, Module};
use pto_wsp_kernels::{KernelId, KernelRegistry, TaskContext, TensorStore};

use crate::machine::Machine;

/// What a task is on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DeviceTask {
    /// Runs on the cube core.
    pub(crate) cube: bool,
    /// Runs on no core (a barrier task).
    pub(crate) barrier: bool,
    /// Duration on its core in AI Core cycles.
    pub(crate) cycles: u64,
    /// Regions (for the generation cost).
    pub(crate) regions: u64,
    /// Its kernel (`u32::MAX` for a barrier).
    pub(crate) kernel: u32,
    /// Pool, target, stream and priority as the schedule gave them.
    pub(crate) pool: ExecPool,
    pub(crate) target: Option<u32>,
    pub(crate) stream: u32,
    pub(crate) priority: i64,
}

/// Everything [`device_tasks`] reads besides the graph.
pub(crate) struct Kernels<'a> {
    pub(crate) module: &'a Module,
    pub(crate) registry: &'a KernelRegistry,
    pub(crate) ids: &'a [Option<KernelId>],
    pub(crate) names: &'a [String],
}

/// Cycles of a built-in's work on `machine`, and whether it needs the cube.
fn builtin_cycles(m: &Machine, w: &pto_wsp_kernels::cost::Work, elem: u64) -> (bool, u64) {
    let cube = w.matmul_flops.div_ceil(2 * m.cube_macs(elem).max(1));
    let bpc = m.vector.bytes_per_cycle.max(1);
    let vector = (w.vector_ops * elem).div_ceil(bpc)
        + (w.transcendentals * elem * m.op_factor("TEXP")).div_ceil(bpc);
    let memory = w.bytes.div_ceil(m.memory.gm_read_per_cycle.max(1));
    (w.matmul_flops > 0, cube.max(vector).max(memory))
}

/// Cycles of one run of a tile body on `machine`, and whether it uses the cube.
fn body_cycles(m: &Machine, body: &Body, scalars: &[u64]) -> (bool, u64) {
    let Ok(mut w) = Walk::new(body, scalars) else {
        return (false, 0);
    };
    let (mut cube, mut total) = (false, 0u64);
    let _ = w.run(&mut |w, op, args| {
        let units = inst_cycles(w, op, args);
        let bytes = units * 4;
        let name = op.mnemonic();
        let cycles = match name {
            "TLOAD" => bytes.div_ceil(m.memory.gm_read_per_cycle.max(1)),
            "TSTORE" => bytes.div_ceil(m.memory.gm_write_per_cycle.max(1)),
            "TMOV" | "TEXTRACT" => bytes.div_ceil(m.memory.l1_to_l0_per_cycle.max(1)),
            _ if name.starts_with("TMATMUL") => {
                cube = true;
                units.div_ceil(m.cube_macs(4).max(1))
            }
            _ => bytes.div_ceil(m.vector.bytes_per_cycle.max(1)) * m.op_factor(name),
        };
        total += cycles + m.vector.issue_cycles;
        Ok(())
    });
    (cube, total)
}

fn task_cycles(
    m: &Machine,
    k: &Kernels<'_>,
    bodies: &[Option<Option<Body>>],
    kernel: u32,
    pool: ExecPool,
    ctx: &TaskContext<'_>,
) -> (bool, u64) {
    let elem = ctx.info(0).map_or(4, |t| t.dtype.size_bytes() as u64);
    if let Some(body) = bodies.get(kernel as usize).and_then(Option::as_ref) {
        return match body {
            Some(body) => body_cycles(m, body, ctx.params()),
            None => (false, 0),
        };
    }
    let Some(id) = k.ids.get(kernel as usize).copied().flatten() else {
        return (pool == ExecPool::Cube, 0);
    };
    match pto_wsp_kernels::builtins::work(k.registry.origin(id), ctx) {
        Some(w) => builtin_cycles(m, &w, elem),
        None => (pool == ExecPool::Cube, k.registry.cost(id, ctx)),
    }
}

/// The device view of tasks `0..n` of a finished run.
pub(crate) fn device_tasks(
    m: &Machine,
    table: &TaskTable,
    n: usize,
    store: &mut TensorStore,
    kernels: &Kernels<'_>,
    given: &[Option<u64>],
    priorities: bool,
) -> Vec<DeviceTask> {
    let mut out = Vec::with_capacity(n);
    // Each kernel with a body, resolved once (a body that does not resolve costs nothing).
    let bodies: Vec<Option<Option<Body>>> = kernels
        .names
        .iter()
        .map(|name| {
            let decl = kernels.module.kernel(name).filter(|d| d.body.is_some())?;
            Some(resolve_body(decl).ok())
        })
        .collect();
    with_task_contexts(table, n, store, |i, node, ctx| {
        let pool = node.pool();
        let mut t = DeviceTask {
            cube: pool == ExecPool::Cube,
            barrier: ctx.is_none(),
            cycles: 0,
            regions: 0,
            kernel: if ctx.is_none() { u32::MAX } else { node.kernel },
            pool,
            target: node.affinity(),
            stream: node.stream,
            priority: if priorities {
                table.priority(pto_wsp_graph::TaskId(i as u32))
            } else {
                0
            },
        };
        if let Some(ctx) = ctx {
            t.regions = ctx.num_regions() as u64;
            let (cube, cycles) = match given.get(i).copied().flatten() {
                Some(c) => (false, c),
                None => task_cycles(m, kernels, &bodies, node.kernel, pool, ctx),
            };
            t.cube |= cube;
            t.cycles = cycles;
        }
        out.push(t);
    });
    out
}

/// How the device model follows a schedule: the engine's schedule plus the executors and
/// dispatch policy of the module.
pub(crate) struct Follow {
    pub(crate) schedule: SimSchedule,
    pub(crate) executors: u32,
    pub(crate) dispatch: Dispatch,
}

/// The engine's view of `tasks` on `m`: cost in picoseconds, core kind, and a dispatch target
/// mapped onto a core of the task's kind.
fn sim_tasks(m: &Machine, tasks: &[DeviceTask], follow: &Follow) -> Vec<SimTask> {
    let (aiv, aic) = (m.aiv(), m.aic());
    tasks
        .iter()
        .map(|t| {
            let (base, cores) = if t.cube { (aiv, aic) } else { (0, aiv) };
            SimTask {
                cost: m.cycles_ps(t.cycles),
                pool: if t.cube {
                    ExecPool::Cube
                } else {
                    ExecPool::Vector
                },
                target: t
                    .target
                    .map(|x| base + (x % follow.executors.max(1)) % cores.max(1)),
                stream: t.stream,
                priority: t.priority,
            }
        })
        .collect()
}

/// The control path's costs on `m` with `schedulers` scheduler threads: per-task generation
/// (none under host generation; several orchestrators share it), core ownership by cluster,
/// handshake and scheduler costs in picoseconds.
fn device_times(
    m: &Machine,
    tasks: &[DeviceTask],
    host: bool,
    schedulers: u32,
    record: bool,
) -> DeviceTimes {
    let (aiv, aic) = (m.aiv(), m.aic());
    let cluster = |e: u32| {
        if e < aiv {
            e / m.cores.aiv_per_cluster.max(1)
        } else {
            (e - aiv) / m.cores.aic_per_cluster.max(1)
        }
    };
    let orchestrators = u64::from(m.aicpu.orchestrators.max(1));
    DeviceTimes {
        generate: if host {
            vec![0; tasks.len()]
        } else {
            // Several orchestrators generate their shares side by side.
            tasks
                .iter()
                .map(|t| m.gen_ps(t.regions) / orchestrators)
                .collect()
        },
        owner: (0..aiv + aic).map(|e| cluster(e) % schedulers).collect(),
        schedulers,
        sched_dispatch: m.aicpu.sched_dispatch_ns * 1000,
        land: (m.handshake.dispatch_ns + m.handshake.core_setup_ns) * 1000,
        completion: m.handshake.completion_ns * 1000,
        sched_complete: m.aicpu.sched_complete_ns * 1000,
        sched_per_edge: m.aicpu.sched_per_edge_ns * 1000,
        no_core: tasks.iter().map(|t| t.barrier).collect(),
        record,
    }
}

/// The host's prefix under host generation: building `n` tasks, uploading them, launching.
fn host_prefix_ps(m: &Machine, n: u64) -> u64 {
    let upload = n as f64 * m.host.upload_bytes_per_task as f64 / m.host.link_gb_per_s;
    n * m.host.gen_ns_per_task * 1000 + (upload * 1000.0) as u64 + m.host.launch_ns * 1000
}

/// Models `tasks` with `edges` on `m` under device generation (`host = false`) or host
/// generation.
pub(crate) fn model(
    m: &Machine,
    tasks: &[DeviceTask],
    edges: &[(u32, u32)],
    follow: &Follow,
    host: bool,
    record: bool,
    kernel_names: &[String],
) -> Result<DeviceRun, SimError> {
    let (aiv, aic) = (m.aiv(), m.aic());
    let machine = SimMachine {
        executors: aiv + aic,
        vector: Some(aiv),
        placement: !matches!(follow.dispatch, Dispatch::WorkSteal),
    };
    let schedulers = if host {
        m.aicpu.schedulers + m.aicpu.orchestrators
    } else {
        m.aicpu.schedulers
    };
    let times = device_times(m, tasks, host, schedulers, record);
    let mut schedule = follow.schedule;
    let mut notes = Vec::new();
    if host {
        // The whole graph is on the device before it starts: no window, nothing to hold back.
        schedule.window = None;
        schedule.issue_cycles = 0;
    }
    if m.aicpu.orchestrators > 1 && !host {
        notes.push(format!(
            "{} orchestrators modelled as one at 1/{} of the generation cost each task",
            m.aicpu.orchestrators, m.aicpu.orchestrators
        ));
    }
    let sim = sim_tasks(m, tasks, follow);
    let (stats, report) = simulate_device(&sim, edges, &machine, &schedule, &times)?;
    let prefix_ps = if host {
        host_prefix_ps(m, tasks.len() as u64)
    } else {
        0
    };
    let busy = |lo: u32, hi: u32| stats.busy[lo as usize..hi as usize].iter().sum::<u64>();
    let kinds = vec![
        ("AIC".to_string(), aiv, aic, busy(aiv, aiv + aic)),
        ("AIV".to_string(), 0, aiv, busy(0, aiv)),
    ];
    Ok(DeviceRun {
        machine: m.meta.name.clone(),
        host_generation: host,
        prefix_ps,
        makespan_ps: prefix_ps + stats.total_cycles,
        kinds,
        orchestrators: if host { 0 } else { m.aicpu.orchestrators },
        schedulers,
        stats,
        report,
        task_kernel: tasks.iter().map(|t| t.kernel).collect(),
        kernel_names: kernel_names.to_vec(),
        task_index: Vec::new(),
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit() -> Machine {
        crate::machine::shipped("unit").unwrap()
    }

    fn task(cycles: u64) -> DeviceTask {
        DeviceTask {
            cube: false,
            barrier: false,
            cycles,
            regions: 2,
            kernel: 0,
            pool: ExecPool::Vector,
            target: None,
            stream: 0,
            priority: 0,
        }
    }

    fn follow() -> Follow {
        Follow {
            schedule: SimSchedule::default(),
            executors: 6,
            dispatch: Dispatch::WorkSteal,
        }
    }

    /// The unit machine: 1 GHz, g = 100 ns, s_d = s_c = 10, d + u = 150, f = 200 (ns).
    #[test]
    fn a_chain_on_the_unit_machine_matches_the_hand_computation() {
        let m = unit();
        let n = 6u64;
        let tasks = vec![task(1000); n as usize];
        let edges: Vec<(u32, u32)> = (1..n as u32).map(|i| (i - 1, i)).collect();
        let r = model(&m, &tasks, &edges, &follow(), false, false, &[]).unwrap();
        let hand_ns = 100 + n * (10 + 150 + 1000 + 200 + 10);
        assert_eq!(r.makespan_ps, hand_ns * 1000);
    }

    #[test]
    fn independent_tasks_fill_the_vector_cores_or_wait_for_generation() {
        let m = unit();
        // 4 AIV; a long task: execution-bound, ⌈N/4⌉ rounds (scheduler costs serialise the
        // 4 dispatches of a round: 10 ns each, the last task's round ends 30 ns later).
        let n = 12u64;
        let r = model(
            &m,
            &vec![task(100_000); n as usize],
            &[],
            &follow(),
            false,
            false,
            &[],
        )
        .unwrap();
        let round = 10 + 150 + 100_000 + 200 + 10;
        let lo = 100 + n.div_ceil(4) * round;
        let ps = r.makespan_ps / 1000;
        assert!(ps >= lo && ps <= lo + 4 * 100 + 4 * 20, "{ps} vs {lo}");
        assert!((r.kinds[1].3 as f64 / (4.0 * r.stats.total_cycles as f64)) > 0.98);
        // A short task: generation-bound, N·g + one task's latency.
        let r = model(
            &m,
            &vec![task(10); n as usize],
            &[],
            &follow(),
            false,
            false,
            &[],
        )
        .unwrap();
        assert_eq!(r.makespan_ps / 1000, n * 100 + 10 + 150 + 10 + 200 + 10);
        // Host generation: N·h + upload + launch, then the tasks at once on 4 cores.
        let r = model(
            &m,
            &vec![task(10); n as usize],
            &[],
            &follow(),
            true,
            false,
            &[],
        )
        .unwrap();
        assert_eq!(r.prefix_ps / 1000, n * 50 + n * 1000 + 1000);
    }

    /// A compute-bound workload on each shipped Ascend machine: N independent vector tasks of c
    /// AI Core cycles take ⌈N / AIV⌉ rounds of c / f (the control path adds well under 1 % at
    /// c / f = 2 ms), so the makespans scale between machines as the hand computation says: the
    /// 910B4 (40 AIV at 1.5 GHz) takes 18 rounds of 2.4 ms where the 910B2 (48 AIV at 1.8 GHz)
    /// takes 15 of 2 ms, 1.44 times as long; the a5-class 950 (72 AIV at 1.65 GHz) 10 of
    /// 2.18 ms.
    #[test]
    fn a_compute_bound_makespan_scales_with_cores_and_clock() {
        let (n, c) = (720usize, 3_600_000u64);
        // (machine, vector cores, MHz): written out, not read from the files.
        let hand = [
            ("ascend910b", 48u64, 1800.0),
            ("ascend910b4", 40, 1500.0),
            ("ascend950", 72, 1650.0),
        ];
        let mut ms = Vec::new();
        for (name, aiv, mhz) in hand {
            let m = crate::machine::shipped(name).unwrap();
            assert_eq!(u64::from(m.aiv()), aiv, "{name}");
            let r = model(&m, &vec![task(c); n], &[], &follow(), false, false, &[]).unwrap();
            let rounds = (n as u64).div_ceil(aiv) as f64;
            let predicted = rounds * c as f64 / mhz * 1e6; // ps
            let got = r.makespan_ps as f64;
            assert!(
                got >= predicted && got < predicted * 1.01,
                "{name}: modelled {got} ps, hand {predicted} ps"
            );
            ms.push(got);
        }
        let ratio = ms[1] / ms[0];
        assert!((ratio - 1.44).abs() < 0.01, "910B4 / 910B2 = {ratio}");
        let ratio = ms[2] / ms[0];
        let hand_ratio = (10.0 / 1650.0) / (15.0 / 1800.0);
        assert!((ratio - hand_ratio).abs() < 0.01, "950 / 910B2 = {ratio}");
    }

    /// The crossover task size on the 910B description: below `c* = C·g − (s_d + d + u + f +
    /// s_c)` one orchestrator thread cannot keep C cores busy (a core is held from dispatch to
    /// its completion being processed). The knee found by sweeping the task size must sit at
    /// the formula's value (within the sweep's step).
    #[test]
    fn the_orchestrator_bound_ends_at_the_crossover_task_size() {
        let m = crate::machine::shipped("ascend910b").unwrap();
        let n = 4000usize;
        let g_ps = m.gen_ps(2);
        let hold_ps = (m.aicpu.sched_dispatch_ns
            + m.handshake.dispatch_ns
            + m.handshake.core_setup_ns
            + m.handshake.completion_ns
            + m.aicpu.sched_complete_ns)
            * 1000;
        for (cube, cores) in [(false, m.aiv()), (true, m.aic())] {
            let predicted = u64::from(cores) * g_ps - hold_ps;
            // Sweep c in 250 ns steps: generation-bound while the makespan stays within one
            // task of N·g.
            let step = 250_000u64;
            let mut knee = None;
            for k in 1..400u64 {
                let c_ps = k * step;
                let cycles = (c_ps as f64 * m.clock.aicore_mhz / 1e6).round() as u64;
                let t = DeviceTask {
                    cube,
                    pool: if cube {
                        ExecPool::Cube
                    } else {
                        ExecPool::Vector
                    },
                    ..task(cycles)
                };
                let r = model(&m, &vec![t; n], &[], &follow(), false, false, &[]).unwrap();
                let bound = n as u64 * g_ps + hold_ps + m.cycles_ps(cycles);
                if r.makespan_ps > bound + g_ps * 50 {
                    knee = Some(c_ps);
                    break;
                }
            }
            let knee = knee.expect("execution-bound for large tasks");
            assert!(
                knee.abs_diff(predicted) <= 2 * step,
                "cube {cube}: knee {knee} ps, formula {predicted} ps"
            );
        }
    }
}
