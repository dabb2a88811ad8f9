//! Machine descriptions: the numbers of a device the device timeline model runs on.
//!
//! Why: a schedule's makespan on the CPU simulation says little about the device it is meant
//! for. The device timeline model (`trace cycles device(NAME)`, `--machine FILE`) needs the
//! device's core counts by kind, its clock, its control CPU's threads and costs, its handshake
//! latencies and its per-core rates; they live in a small TOML file, one per machine, so users
//! can write their own (a 910B with fewer cores is a one-line change).
//!
//! Promises:
//! - Every numeric figure carries a line in the file's `[sources]` table: a citation, or text
//!   starting with `guess:` that says why the value was chosen. A file without one is refused.
//! - A bad file is refused with `file:line:column` and the key: TOML syntax, unknown or missing
//!   keys, wrong types, impossible values (`orchestrators + schedulers > threads`, zero rates),
//!   an `op_factor` that is not a tile instruction, a figure without a source.
//! - Shipped machines ([`shipped_names`]): `ascend910b` (one 910B2-class die: 24 AIC + 48 AIV at
//!   1.8 GHz), `ascend910b4` (the 910B4: 20 AIC + 40 AIV at 1.5 GHz, half the HBM bandwidth),
//!   `ascend950` (an a5-class Ascend 950 as simpler's a5 runtime sees it: 36 AIC + 72 AIV at
//!   1.65 GHz, 1 orchestrator + 4 schedulers) and `unit` (round numbers for hand computations). On-chip buffer capacities are not here: they belong to the
//!   a2a3 device tables the kernel checks read.
//! - Times convert to integer picoseconds, the model's unit.

use std::collections::BTreeMap;
use std::path::Path;

use pto_wsp_ir::tile_isa::TileOp;
use serde::Deserialize;

/// A machine description (see the module docs; units are in the key names).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Machine {
    /// Name and architecture.
    pub meta: Meta,
    /// The AI Core clock.
    pub clock: Clock,
    /// Cores by kind.
    pub cores: Cores,
    /// The control CPU (AICPU) threads and their costs.
    pub aicpu: Aicpu,
    /// Dispatch and completion latencies between the control CPU and the cores.
    pub handshake: Handshake,
    /// Host generation: building the graph on the host and uploading it.
    pub host: Host,
    /// Memory rates.
    pub memory: Memory,
    /// Cube (matrix) multiply-accumulates per cycle per AIC, by input type.
    pub cube: Cube,
    /// Vector unit rates.
    pub vector: Vector,
    /// Where every figure comes from: dotted key → citation or `guess: ...`.
    pub sources: BTreeMap<String, String>,
}

/// `[meta]`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Meta {
    /// The machine's name.
    pub name: String,
    /// `a2a3`, `a5` or `abstract`.
    pub arch: String,
    /// One line for people.
    pub description: String,
}

/// `[clock]`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Clock {
    /// AI Core clock in MHz.
    pub aicore_mhz: f64,
}

/// `[cores]`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cores {
    /// Clusters (each some AIC and some AIV).
    pub clusters: u32,
    /// Cube cores per cluster.
    pub aic_per_cluster: u32,
    /// Vector cores per cluster.
    pub aiv_per_cluster: u32,
}

/// `[aicpu]`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Aicpu {
    /// Runtime threads.
    pub threads: u32,
    /// Threads generating tasks under device generation.
    pub orchestrators: u32,
    /// Threads resolving dependencies and dispatching.
    pub schedulers: u32,
    /// Nanoseconds per instruction of the control CPU.
    pub ns_per_instruction: f64,
    /// Generation instructions per task.
    pub gen_base_instructions: u64,
    /// Generation instructions per region of a task (dependency inference).
    pub gen_per_region_instructions: u64,
    /// Scheduler time to dispatch one task.
    pub sched_dispatch_ns: u64,
    /// Scheduler time to process one completion.
    pub sched_complete_ns: u64,
    /// Scheduler time per successor of a completion.
    pub sched_per_edge_ns: u64,
}

/// `[handshake]`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Handshake {
    /// From the scheduler's dispatch write to the core seeing it.
    pub dispatch_ns: u64,
    /// From the core seeing a dispatch to the kernel starting.
    pub core_setup_ns: u64,
    /// From a kernel's end to its scheduler thread seeing the completion.
    pub completion_ns: u64,
}

/// `[host]`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Host {
    /// Host time to generate one task.
    pub gen_ns_per_task: u64,
    /// Bytes of graph uploaded per task.
    pub upload_bytes_per_task: u64,
    /// Host link bandwidth (10⁹ B/s).
    pub link_gb_per_s: f64,
    /// Fixed cost of launching the uploaded graph.
    pub launch_ns: u64,
}

/// `[memory]` (per-core rates in bytes per AI Core cycle).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Memory {
    /// The die's HBM bandwidth (10⁹ B/s), shared by all cores.
    pub hbm_gb_per_s: f64,
    /// Global memory → core buffers.
    pub gm_read_per_cycle: u64,
    /// Core (L0C) → global memory.
    pub gm_write_per_cycle: u64,
    /// Unified buffer → global memory.
    pub ub_to_gm_per_cycle: u64,
    /// L1 → L0A / L0B.
    pub l1_to_l0_per_cycle: u64,
}

/// `[cube]`: multiply-accumulates per cycle per AIC.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cube {
    /// f16 inputs.
    pub f16: u64,
    /// bf16 inputs.
    pub bf16: u64,
    /// f32 inputs.
    pub f32: u64,
    /// i8 inputs.
    pub i8: u64,
}

/// `[vector]`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Vector {
    /// Bytes one AIV processes per cycle (one repeat).
    pub bytes_per_cycle: u64,
    /// Cycles the scalar unit spends issuing one tile instruction.
    pub issue_cycles: u64,
    /// Cycles per repeat of instructions slower than one (by mnemonic; others 1).
    #[serde(default)]
    pub op_factor: BTreeMap<String, u64>,
}

/// A machine file the loader refused: where, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}:{column}: {message}")]
pub struct MachineError {
    /// The file (or `<shipped NAME>`).
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// What is wrong, naming the key.
    pub message: String,
}

const SHIPPED: &[(&str, &str)] = &[
    ("ascend910b", include_str!("../machines/ascend910b.toml")),
    ("ascend910b4", include_str!("../machines/ascend910b4.toml")),
    ("ascend950", include_str!("../machines/ascend950.toml")),
    ("unit", include_str!("../machines/unit.toml")),
];

/// The names of the shipped machines.
pub fn shipped_names() -> Vec<&'static str> {
    SHIPPED.iter().map(|s| s.0).collect()
}

/// A shipped machine by name.
pub fn shipped(name: &str) -> Option<Machine> {
    let (_, text) = SHIPPED.iter().find(|s| s.0 == name)?;
    Some(Machine::parse(text, &format!("<shipped {name}>")).expect("shipped machines are valid"))
}

/// A shipped machine name, or else a machine file read by `read` (the caller's file access:
/// library code touches no files). A missing file is said as "no shipped machine or file of
/// this name", naming the shipped ones.
pub fn resolve(
    name_or_path: &str,
    read: impl FnOnce(&Path) -> std::io::Result<String>,
) -> Result<Machine, MachineError> {
    if let Some(m) = shipped(name_or_path) {
        return Ok(m);
    }
    let error = |message: String| MachineError {
        file: name_or_path.to_string(),
        line: 1,
        column: 1,
        message,
    };
    match read(Path::new(name_or_path)) {
        Ok(text) => Machine::parse(&text, name_or_path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(error(format!(
            "no shipped machine or file of this name (shipped: {})",
            shipped_names().join(", ")
        ))),
        Err(e) => Err(error(format!("cannot read the machine file: {e}"))),
    }
}

/// 1-based line and column of byte `at` in `text`.
fn line_col(text: &str, at: usize) -> (usize, usize) {
    let at = at.min(text.len());
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let column = before.rfind('\n').map_or(at, |n| at - n - 1) + 1;
    (line, column)
}

impl Machine {
    /// Parses and checks machine text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Machine, MachineError> {
        let err = |at: usize, message: String| {
            let (line, column) = line_col(text, at);
            MachineError {
                file: file.to_string(),
                line,
                column,
                message,
            }
        };
        let machine: Machine = toml::from_str(text).map_err(|e| {
            let at = e.span().map_or(0, |s| s.start);
            err(at, e.message().trim().to_string())
        })?;
        let spans = Spans::of(text).map_err(|e| err(0, e))?;
        let at = |key: &str| spans.get(key).unwrap_or(0);
        if let Some((key, message)) = machine.problems().into_iter().next() {
            return Err(err(at(&key), format!("`{key}`: {message}")));
        }
        for key in spans.numeric() {
            match machine.sources.get(&key) {
                Some(s) if !s.trim().is_empty() => {}
                _ => {
                    return Err(err(
                        at(&key),
                        format!(
                            "`{key}` has no source: add `\"{key}\" = \"CITATION\"` (or \
                             \"guess: WHY\") to [sources]"
                        ),
                    ));
                }
            }
        }
        for key in machine.sources.keys() {
            if !spans.numeric().any(|k| &k == key) {
                return Err(err(
                    at(&format!("sources.{key}")),
                    format!("[sources] cites `{key}`, which is not a figure of this machine"),
                ));
            }
        }
        Ok(machine)
    }

    /// Values no device has, as (dotted key, message).
    fn problems(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut positive = |key: &str, ok: bool| {
            if !ok {
                out.push((key.to_string(), "must be greater than zero".to_string()));
            }
        };
        positive(
            "clock.aicore_mhz",
            self.clock.aicore_mhz > 0.0 && self.clock.aicore_mhz.is_finite(),
        );
        positive("cores.clusters", self.cores.clusters > 0);
        positive(
            "cores.aiv_per_cluster",
            self.cores.aiv_per_cluster + self.cores.aic_per_cluster > 0,
        );
        positive("aicpu.threads", self.aicpu.threads > 0);
        positive("aicpu.schedulers", self.aicpu.schedulers > 0);
        positive(
            "aicpu.ns_per_instruction",
            self.aicpu.ns_per_instruction >= 0.0 && self.aicpu.ns_per_instruction.is_finite(),
        );
        positive(
            "host.link_gb_per_s",
            self.host.link_gb_per_s > 0.0 && self.host.link_gb_per_s.is_finite(),
        );
        positive(
            "memory.hbm_gb_per_s",
            self.memory.hbm_gb_per_s > 0.0 && self.memory.hbm_gb_per_s.is_finite(),
        );
        positive(
            "memory.gm_read_per_cycle",
            self.memory.gm_read_per_cycle > 0,
        );
        positive(
            "memory.gm_write_per_cycle",
            self.memory.gm_write_per_cycle > 0,
        );
        positive(
            "memory.ub_to_gm_per_cycle",
            self.memory.ub_to_gm_per_cycle > 0,
        );
        positive(
            "memory.l1_to_l0_per_cycle",
            self.memory.l1_to_l0_per_cycle > 0,
        );
        positive("cube.f16", self.cube.f16 > 0);
        positive("cube.bf16", self.cube.bf16 > 0);
        positive("cube.f32", self.cube.f32 > 0);
        positive("cube.i8", self.cube.i8 > 0);
        positive("vector.bytes_per_cycle", self.vector.bytes_per_cycle > 0);
        if self.aicpu.orchestrators + self.aicpu.schedulers > self.aicpu.threads {
            out.push((
                "aicpu.schedulers".to_string(),
                format!(
                    "orchestrators ({}) + schedulers ({}) exceed the {} threads",
                    self.aicpu.orchestrators, self.aicpu.schedulers, self.aicpu.threads
                ),
            ));
        }
        if !["a2a3", "a5", "abstract"].contains(&self.meta.arch.as_str()) {
            out.push((
                "meta.arch".to_string(),
                format!("`{}` is not one of a2a3, a5, abstract", self.meta.arch),
            ));
        }
        for (op, &f) in &self.vector.op_factor {
            let key = format!("vector.op_factor.{op}");
            if TileOp::parse(op).is_none() {
                out.push((key, format!("`{op}` is not a tile instruction")));
            } else if f == 0 {
                out.push((key, "must be greater than zero".to_string()));
            }
        }
        out
    }

    /// Cube cores.
    pub fn aic(&self) -> u32 {
        self.cores.clusters * self.cores.aic_per_cluster
    }

    /// Vector cores.
    pub fn aiv(&self) -> u32 {
        self.cores.clusters * self.cores.aiv_per_cluster
    }

    /// Picoseconds of `cycles` AI Core cycles (rounded up).
    pub fn cycles_ps(&self, cycles: u64) -> u64 {
        (cycles as f64 * 1e6 / self.clock.aicore_mhz).ceil() as u64
    }

    /// Device-generation cost of a task with `regions` regions, in picoseconds.
    pub fn gen_ps(&self, regions: u64) -> u64 {
        let instructions =
            self.aicpu.gen_base_instructions + self.aicpu.gen_per_region_instructions * regions;
        (instructions as f64 * self.aicpu.ns_per_instruction * 1000.0).round() as u64
    }

    /// Cycles per 256-byte-class repeat of `op` on the vector unit.
    pub fn op_factor(&self, op: &str) -> u64 {
        self.vector.op_factor.get(op).copied().unwrap_or(1)
    }

    /// Multiply-accumulates per cycle for inputs of `elem_bytes` bytes (4: f32, 2: f16, 1: i8).
    pub fn cube_macs(&self, elem_bytes: u64) -> u64 {
        match elem_bytes {
            1 => self.cube.i8,
            2 => self.cube.f16,
            _ => self.cube.f32,
        }
    }

    /// Every figure as `(dotted key, value, source)`, in file order of [`Self::sources`].
    pub fn figures(&self) -> Vec<(String, String)> {
        self.sources
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

/// The byte offsets of every key of a machine text, and which of them hold numbers.
struct Spans {
    keys: Vec<(String, usize, bool)>,
}

impl Spans {
    fn of(text: &str) -> Result<Spans, String> {
        use toml::de::{DeTable, DeValue};
        fn walk(prefix: &str, t: &DeTable<'_>, out: &mut Vec<(String, usize, bool)>) {
            for (k, v) in t.iter() {
                let key = if prefix.is_empty() {
                    k.get_ref().to_string()
                } else {
                    format!("{prefix}.{}", k.get_ref())
                };
                let numeric = matches!(v.get_ref(), DeValue::Integer(_) | DeValue::Float(_));
                out.push((key.clone(), k.span().start, numeric));
                if let DeValue::Table(inner) = v.get_ref() {
                    walk(&key, inner, out);
                }
            }
        }
        let table = DeTable::parse(text).map_err(|e| e.message().to_string())?;
        let mut keys = Vec::new();
        walk("", table.get_ref(), &mut keys);
        Ok(Spans { keys })
    }

    fn get(&self, key: &str) -> Option<usize> {
        self.keys.iter().find(|k| k.0 == key).map(|k| k.1)
    }

    /// Numeric keys outside `[sources]`.
    fn numeric(&self) -> impl Iterator<Item = String> + '_ {
        self.keys
            .iter()
            .filter(|k| k.2 && !k.0.starts_with("sources."))
            .map(|k| k.0.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_machines_load_and_cite_every_figure() {
        for name in shipped_names() {
            let m = shipped(name).unwrap();
            assert_eq!(m.meta.name, name);
            assert!(m.sources.values().all(|s| !s.trim().is_empty()));
        }
        let m = shipped("ascend910b").unwrap();
        assert_eq!((m.aic(), m.aiv()), (24, 48));
        assert_eq!(m.aicpu.orchestrators + m.aicpu.schedulers, 4);
        // 24 AIC × 16·16·16 MAC × 2 flop × 1.8 GHz = 353.9 TFLOP/s.
        let tflops = 24.0 * m.cube.f16 as f64 * 2.0 * m.clock.aicore_mhz * 1e6 / 1e12;
        assert!((tflops - 353.9).abs() < 0.1, "{tflops}");
        // 246 instructions at 0.83 ns.
        assert_eq!(m.gen_ps(0), 204_180);
        assert_eq!(m.cycles_ps(1800), 1_000_000);
        // The 910B4: 20 clusters at 1.5 GHz, half the 910B2's HBM bandwidth.
        let b4 = shipped("ascend910b4").unwrap();
        assert_eq!((b4.aic(), b4.aiv(), b4.clock.aicore_mhz), (20, 40, 1500.0));
        assert_eq!(b4.memory.hbm_gb_per_s * 2.0, m.memory.hbm_gb_per_s);
        // The a5-class 950: 36 clusters at 1.65 GHz, 1 orchestrator + 4 schedulers, 512-byte
        // vector repeats: 72 AIV x 256 f16 flop x 1.65 GHz = 30.4 TFLOP/s.
        let a5 = shipped("ascend950").unwrap();
        assert_eq!((a5.aic(), a5.aiv(), a5.meta.arch.as_str()), (36, 72, "a5"));
        assert_eq!((a5.aicpu.orchestrators, a5.aicpu.schedulers), (1, 4));
        let vtflops = 72.0 * (a5.vector.bytes_per_cycle / 2) as f64 * 1.65e9 / 1e12;
        assert!((vtflops - 30.4).abs() < 0.1, "{vtflops}");
    }

    fn bad(edit: impl Fn(&str) -> String) -> MachineError {
        let text = edit(SHIPPED.iter().find(|s| s.0 == "unit").unwrap().1);
        Machine::parse(&text, "m.toml").unwrap_err()
    }

    /// The 1-based line of the first line of `text` containing `needle`.
    fn line_of(text: &str, needle: &str) -> usize {
        text.lines().position(|l| l.contains(needle)).unwrap() + 1
    }

    #[test]
    fn bad_files_are_refused_at_the_key() {
        let unit = SHIPPED.iter().find(|s| s.0 == "unit").unwrap().1;
        let e = bad(|t| t.replace("clusters = 2", "clusterz = 2"));
        assert_eq!(e.line, line_of(unit, "clusters = 2"), "{e}");
        assert!(e.message.contains("clusterz"), "{e}");
        let e = bad(|t| t.replace("schedulers = 1\n", "schedulers = 3\n"));
        assert_eq!(e.line, line_of(unit, "schedulers = 1"), "{e}");
        assert!(e.to_string().starts_with("m.toml:"), "{e}");
        assert!(e.message.contains("exceed the 2 threads"), "{e}");
        let e = bad(|t| t.replace("TEXP = 4", "TEXPP = 4"));
        assert!(
            e.message.contains("`TEXPP` is not a tile instruction"),
            "{e}"
        );
        assert_eq!(e.line, line_of(unit, "TEXP = 4"));
        let e = bad(|t| t.replace("\"cube.i8\" = \"guess: round number for tests\"\n", ""));
        assert!(e.message.contains("`cube.i8` has no source"), "{e}");
        assert_eq!((e.line, e.column), (line_of(unit, "i8 = 8192"), 1));
        let e = bad(|t| t.replace("aicore_mhz = 1000", "aicore_mhz = \"fast\""));
        assert_eq!(e.line, line_of(unit, "aicore_mhz = 1000"), "{e}");
        let e = bad(|t| t.replace("[clock]", "[clock"));
        assert_eq!(e.line, line_of(unit, "[clock]"), "{e}");
        let e = bad(|t| format!("{t}\"cube.f64\" = \"guess: no such figure\"\n"));
        assert!(e.message.contains("not a figure"), "{e}");
        let e = resolve("no/such/machine.toml", |_| {
            Err(std::io::ErrorKind::NotFound.into())
        })
        .unwrap_err();
        assert!(e.message.contains("ascend910b"), "{e}");
    }
}
