//! The task-graph runtime's benchmark shapes (Taskflow's DAGs, `pto_wsp_cpu::shapes`) as
//! task-graph programs of empty kernels, so that a graph's launch-to-completion overhead per
//! kernel node can be set next to the runtime's per-task overhead on the same DAG.

use crate::isa::Insn;
use crate::operand::{CoreType, DependencyType, GraphId, KernelId, ScalarRef, StreamId, Symbol};
use crate::program::Program;
use pto_wsp_cpu::shapes::Shape;

/// One graph with a kernel node per task of `shape` (entry `nop`, one instance, vector cores)
/// and an `AFTER` edge per edge; the control code launches it `launches` times, waiting for
/// each (`CF_LOOP` around `TG_LAUNCH` and `TG_SYNC`).
pub fn program(shape: &Shape, launches: u64) -> Program {
    let mut insns = vec![Insn::TgBegin { graph: GraphId(0) }];
    let preds = shape.preds();
    for k in 0..preds.len() {
        insns.push(Insn::TgKernel {
            kernel: KernelId(k as u32),
            entry: Symbol("nop".into()),
            block_dim: 1,
            core_type: CoreType::Aiv,
            workspace: 0,
        });
    }
    for (k, ps) in preds.iter().enumerate() {
        for &p in ps {
            insns.push(Insn::TgDepend {
                src: KernelId(p),
                dst: KernelId(k as u32),
                dep_type: DependencyType::After,
                tensor: None,
            });
        }
    }
    insns.push(Insn::TgEnd { graph: GraphId(0) });
    insns.extend([
        Insn::CfLoop {
            count: ScalarRef::Imm(launches),
            iterator: crate::operand::IterId(0),
        },
        Insn::TgLaunch {
            graph: GraphId(0),
            stream: StreamId(0),
        },
        Insn::TgSync { graph: GraphId(0) },
        Insn::CfEndLoop {},
    ]);
    Program {
        insns,
        names: crate::program::Names::new(),
    }
}
