//! The PTO-ISA back end: kernels written in tile instructions as PTO-ISA C++ (`pto-wsp emit
//! kernels`, target `pto_isa`).
//!
//! Why: a kernel body (`pto_wsp_ir::kernel_body`) must run on the device too, where the tile
//! library is PTO-ISA (`#include <pto/pto-inst.hpp>`). This module writes each kernel with a
//! body as one C++ header calling PTO-ISA's API, plus a host driver that loads the module's
//! tensors from `.npy` files, runs every task of the workload whose kernel has a body (in
//! program order, which respects every dependency) on copies of its regions, and writes the
//! tensors those tasks write; with a Makefile. Built with `-D__CPU_SIM` it runs under PTO-ISA's
//! CPU simulation, which is how the tests compare it with our own CPU executor.
//!
//! Promise: every instruction is written as the one instruction table says
//! (`pto_wsp_ir::tile_isa::CppForm`); an instruction PTO-ISA lacks, an element type or an
//! expression the emitter cannot write is an [`EmitError`] at the statement's
//! `file:line:column`, naming the kernel and the instruction, and nothing is emitted. The
//! emitted kernels report the same shape errors as the CPU executor (a region part out of its
//! region, a valid size out of its tile) with the same messages, as status codes whose messages
//! the driver prints (the kernel text is legal AI Core code: `ptoisa/kernel.rs`).
//!
//! Tile mapping: PTO-ISA tiles need 32-byte aligned rows (vector tiles) and whole fractals
//! (left / right / accumulator tiles), so each tile is declared with its shape rounded up to
//! those units (`pto_wsp_ir::device::padded_shape`) and its valid rows × cols set to ours
//! (always `DYNAMIC`, so that tiles of one declared shape share one C++ type): the padding is
//! never read.

pub(crate) mod kernel;

use crate::{EmitError, Files, Input};
pub(crate) use kernel::{Mode, c_str, elem, emit_kernel};
use pto_wsp_ir::{ExpandOptions, KernelDecl, Loc, ParamType, Value};
use pto_wsp_kernels::TensorStore;
use std::fmt::Write as _;

/// The most tasks a driver is written for (each task is a few lines of straight-line C++).
pub const MAX_EMITTED_TASKS: usize = 1 << 16;

/// The back end's name in the registry, and its one target.
pub const NAME: &str = "ptoisa";
/// The target: PTO-ISA C++ kernels with a host driver (built by its Makefile for PTO-ISA's CPU
/// simulation).
pub const TARGET: &str = "pto_isa";

/// The kernel-side support header every emitted kernel includes.
pub(crate) const RT_HPP: &str = include_str!("ptoisa/pto_wsp_rt.hpp");
/// The host-side support header the driver includes (tensors, `.npy`, regions).
pub(crate) const HOST_HPP: &str = include_str!("ptoisa/pto_wsp_host.hpp");

/// A kernel-body construct the emitter cannot write as PTO-ISA C++, at `loc`.
pub(crate) fn kernel_error(kernel: &str, message: impl std::fmt::Display, loc: Loc) -> EmitError {
    EmitError::at(
        loc,
        format!("kernel `{kernel}`: cannot emit PTO-ISA C++: {message}"),
    )
}

/// The emitted files, in memory.
#[derive(Debug, Clone)]
pub struct Emitted {
    /// `(file name, contents)`, every file of the output directory.
    pub files: Files,
    /// The kernels emitted (those with a body), in module order.
    pub kernels: Vec<String>,
    /// The tensors the driver writes after the run (those the emitted kernels' tasks write).
    pub written: Vec<String>,
    /// Tasks of kernels without a body, which the driver does not run.
    pub skipped_tasks: usize,
    /// Tensors that a skipped task writes before an emitted task reads them: the driver reads
    /// them from the input directory instead (their contents there must be what the skipped
    /// tasks would have written).
    pub read_after_skipped: Vec<String>,
}

/// Emits every kernel of the module that has a body, and a driver running the entry workload's
/// tasks under the input's bindings.
pub fn emit_kernels(input: &Input<'_>) -> Result<Emitted, EmitError> {
    let module = &input.resolved.module;
    let mut files = vec![("pto_wsp_rt.hpp".to_string(), RT_HPP.to_string())];
    let mut kernels = Vec::new();
    // Status code c is messages[c - 1].
    let mut messages: Vec<String> = Vec::new();
    for k in module.kernels.iter().filter(|k| k.body.is_some()) {
        let text = emit_kernel(k, input, Mode::Host, messages.len() as i64 + 1)?;
        files.push((format!("{}.hpp", k.name.name), text.text));
        messages.extend(text.messages);
        kernels.push(k.name.name.clone());
    }
    if kernels.is_empty() {
        return Err(EmitError::plain("no kernel has a body: nothing to emit"));
    }
    let store = tensor_store(input)?;
    let expansion = pto_wsp_ir::expand(
        input.resolved,
        input.bindings,
        &ExpandOptions {
            limit: Some(MAX_EMITTED_TASKS + 1),
            executors: None,
        },
    )
    .map_err(|e| expand_error(input, &e))?;
    if expansion.tasks.len() > MAX_EMITTED_TASKS || expansion.truncated {
        return Err(EmitError::plain(format!(
            "the workload has more than {MAX_EMITTED_TASKS} tasks; the emitted driver lists its \
             tasks one by one and is limited to that many"
        )));
    }
    let driver = emit_driver(input, &store, &expansion.tasks, &kernels, &messages)?;
    files.push(("driver.cpp".to_string(), driver.text));
    files.push(("pto_wsp_host.hpp".to_string(), HOST_HPP.to_string()));
    files.push(("Makefile".to_string(), MAKEFILE.to_string()));
    Ok(Emitted {
        files,
        kernels,
        written: driver.written,
        skipped_tasks: driver.skipped,
        read_after_skipped: driver.read_after_skipped,
    })
}

/// The module's tensors under the input's bindings (their evaluated shapes).
pub(crate) fn tensor_store(input: &Input<'_>) -> Result<TensorStore, EmitError> {
    TensorStore::new(&input.resolved.module, input.bindings)
        .map_err(|e| EmitError::plain(format!("tensor shapes: {e}")))
}

/// An expansion error, at its location when it has one.
pub(crate) fn expand_error(input: &Input<'_>, e: &pto_wsp_ir::ExpandError) -> EmitError {
    let loc = pto_wsp_ir::Diagnostic::loc(e);
    if loc.is_known() {
        EmitError::at(loc, e.to_string())
    } else {
        EmitError::plain(format!("expansion of {} failed: {e}", input.name()))
    }
}

/// The Makefile of an emitted directory.
pub(crate) const MAKEFILE: &str = "\
# Generated by `pto-wsp emit kernels`. Builds the host driver against PTO-ISA's CPU simulation.
PTO_ISA_ROOT ?= $(HOME)/.cache/pto-wsp/pto-isa
CXX ?= g++
CXXFLAGS ?= -O1
HEADERS := $(wildcard *.hpp)

driver: driver.cpp $(HEADERS)
\t$(CXX) -std=c++2b -D__CPU_SIM $(CXXFLAGS) -I$(PTO_ISA_ROOT)/include -I. driver.cpp -o driver -lpthread

# make run IN=dir-with-inputs OUT=dir-for-outputs
run: driver
\t./driver $(IN) $(OUT)

clean:
\trm -f driver

.PHONY: run clean
";

struct Driver {
    text: String,
    written: Vec<String>,
    skipped: usize,
    read_after_skipped: Vec<String>,
}

/// The host driver: tensors, then every task of a kernel with a body, in program order.
fn emit_driver(
    input: &Input<'_>,
    store: &TensorStore,
    tasks: &[pto_wsp_ir::ExpandedTask],
    kernels: &[String],
    messages: &[String],
) -> Result<Driver, EmitError> {
    let module = &input.resolved.module;
    let mut out = driver_head(input, kernels, messages);
    tensor_table(store, &mut out)?;
    out.push_str("    };\n    std::string current = \"reading inputs\";\n    try {\n");
    out.push_str(
        "        for (auto &t : T) {\n            t.bytes.assign(static_cast<size_t>(t.elements()) * t.info.esize, 0);\n            pto_wsp_host::read_npy(in + \"/\" + t.info.name + \".npy\", t);\n        }\n",
    );
    let mut touched = Touched::default();
    for (ti, task) in tasks.iter().enumerate() {
        let k = &module.kernels[task.kernel as usize];
        if k.body.is_none() {
            touched.skip(task, k);
        } else {
            task_block(&mut out, store, (ti, task), k, &mut touched)?;
        }
    }
    driver_tail(&mut out, store, &touched);
    let names =
        |ts: &[u32]| -> Vec<String> { ts.iter().map(|&t| store.info(t).name.clone()).collect() };
    Ok(Driver {
        text: out,
        written: names(&touched.written),
        skipped: touched.skipped,
        read_after_skipped: names(&touched.read_after_skipped),
    })
}

/// What the driver's tasks touch, gathered as they are written.
#[derive(Default)]
struct Touched {
    /// Tensors the emitted tasks write, in first-write order.
    written: Vec<u32>,
    /// Tasks skipped: their kernels have no body.
    skipped: usize,
    /// The kernels of the skipped tasks, in first-skip order.
    skipped_names: Vec<String>,
    /// Tensors written by skipped tasks so far.
    skipped_writes: Vec<u32>,
    /// Those of them an emitted task then reads.
    read_after_skipped: Vec<u32>,
}

impl Touched {
    /// Records a skipped task of kernel `k` (one without a body).
    fn skip(&mut self, task: &pto_wsp_ir::ExpandedTask, k: &KernelDecl) {
        self.skipped += 1;
        for r in task.regions.iter().filter(|r| r.access.writes()) {
            if !self.skipped_writes.contains(&r.tensor) {
                self.skipped_writes.push(r.tensor);
            }
        }
        if !self.skipped_names.contains(&k.name.name) {
            self.skipped_names.push(k.name.name.clone());
        }
    }
}

/// The driver's head: a comment, the includes, the status messages and the start of `main`.
fn driver_head(input: &Input<'_>, kernels: &[String], messages: &[String]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "// Generated by `pto-wsp emit kernels` from {}. Do not edit.\n\
         // Usage: driver IN_DIR OUT_DIR. Reads IN_DIR/NAME.npy for every tensor that has one (the\n\
         // others start zeroed), runs the tasks of the kernels below in program order, writes\n\
         // OUT_DIR/NAME.npy for every tensor they write.",
        input.name()
    );
    for k in kernels {
        let _ = writeln!(out, "#include \"{k}.hpp\"");
    }
    out.push_str("#include \"pto_wsp_host.hpp\"\n\n#include <cstdio>\n#include <exception>\n\n");
    out.push_str("// The message of each status code (code c is entry c - 1; {i} is value i).\nstatic const char *const kMessages[] = {\n");
    for m in messages {
        let _ = writeln!(out, "    {},", c_str(m));
    }
    if messages.is_empty() {
        out.push_str("    \"\",\n");
    }
    out.push_str("};\n\n");
    out.push_str("int main(int argc, char **argv)\n{\n");
    out.push_str(
        "    if (argc != 3) {\n        std::fprintf(stderr, \"usage: %s IN_DIR OUT_DIR\\n\", argv[0]);\n        return 2;\n    }\n",
    );
    out.push_str("    const std::string in = argv[1], out = argv[2];\n");
    out
}

/// The entries of the driver's tensor table `T` (at most 4 dimensions each).
fn tensor_table(store: &TensorStore, out: &mut String) -> Result<(), EmitError> {
    out.push_str("    std::vector<pto_wsp_host::Tensor> T = {\n");
    for info in store.infos() {
        let descr = pto_wsp_kernels::npy::descr(info.dtype);
        if info.shape.len() > 4 {
            return Err(EmitError::plain(format!(
                "tensor `{}` has {} dimensions; the driver handles at most 4",
                info.name,
                info.shape.len()
            )));
        }
        let mut shape: Vec<String> = info.shape.iter().map(|d| d.to_string()).collect();
        shape.resize(4, "0".into());
        let _ = writeln!(
            out,
            "        {{{{{}, {}, {}, {}, {{{}}}}}, {{}}}},",
            c_str(&info.name),
            c_str(descr),
            info.dtype.size_bytes(),
            info.shape.len(),
            shape.join(", ")
        );
    }
    Ok(())
}

/// The block running task `ti` of kernel `k`: its regions, the call, a failed status
/// reported, the written regions stored back.
fn task_block(
    out: &mut String,
    store: &TensorStore,
    (ti, task): (usize, &pto_wsp_ir::ExpandedTask),
    k: &KernelDecl,
    touched: &mut Touched,
) -> Result<(), EmitError> {
    let _ = writeln!(
        out,
        "        {{ // task {ti}: {}\n            current = \"task {ti} ({})\";",
        k.name.name, k.name.name
    );
    let region_args = task_regions(out, store, (ti, task), k, touched)?;
    let scalar_types = k.scalar_types();
    let scalar_args = task
        .params
        .iter()
        .zip(&scalar_types)
        .map(|(v, t)| match (t, v) {
            (ParamType::F32 | ParamType::F64, Value::U64(bits)) => {
                format!("pto_wsp_rt::f32_param(UINT64_C({bits:#x}))")
            }
            (_, Value::Bool(b)) => b.to_string(),
            (_, Value::I64(i)) => format!("int64_t{{{i}}}"),
            (_, Value::U64(u)) => format!("static_cast<int64_t>(UINT64_C({u}))"),
        });
    // The kernel's parameters in declaration order.
    let (mut regions, mut scalars) = (region_args.into_iter(), scalar_args);
    let args: Vec<String> = k
        .params
        .iter()
        .filter_map(|p| match p.kind {
            pto_wsp_ir::ParamKind::Tile { .. } => regions.next(),
            pto_wsp_ir::ParamKind::Scalar(_) => scalars.next(),
        })
        .collect();
    let _ = writeln!(
        out,
        "            pto_wsp_rt::Status st{{}};\n            pto_wsp_kernels::{}(&st, {});\n            \
         if (st.code != 0) {{\n                std::fprintf(stderr, \"error: %s: %s\\n\", current.c_str(), \
         pto_wsp_host::status_message(kMessages, sizeof(kMessages) / sizeof(kMessages[0]), st.code, st.v).c_str());\n                \
         return 1;\n            }}",
        k.name.name,
        args.join(", ")
    );
    for (ri, r) in task.regions.iter().enumerate() {
        if r.access.writes() {
            let _ = writeln!(out, "            r{ri}.store();");
        }
    }
    out.push_str("        }\n");
    Ok(())
}

/// Declares task `ti`'s regions and returns them as kernel arguments; records what it reads
/// after a skipped task wrote it and what it writes.
fn task_regions(
    out: &mut String,
    store: &TensorStore,
    (ti, task): (usize, &pto_wsp_ir::ExpandedTask),
    k: &KernelDecl,
    touched: &mut Touched,
) -> Result<Vec<String>, EmitError> {
    let mut region_args = Vec::new();
    for (ri, r) in task.regions.iter().enumerate() {
        let info = store.info(r.tensor);
        let e = elem(info.dtype).ok_or_else(|| {
            EmitError::plain(format!(
                "task {ti} ({}): region {ri} is of tensor `{}` ({}); the driver handles f32, f16 and integers",
                k.name.name, info.name, info.dtype
            ))
        })?;
        let list = |v: &[i64]| {
            v.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(
            out,
            "            pto_wsp_host::Region<{e}> r{ri}(T[{}], {{{}}}, {{{}}});",
            r.tensor,
            list(&r.start),
            list(&r.size)
        );
        region_args.push(format!(
            "pto_wsp_rt::block(r{ri}.data.data(), r{ri}.rows, r{ri}.cols)"
        ));
        if r.access.reads()
            && touched.skipped_writes.contains(&r.tensor)
            && !touched.read_after_skipped.contains(&r.tensor)
        {
            touched.read_after_skipped.push(r.tensor);
        }
        if r.access.writes() && !touched.written.contains(&r.tensor) {
            touched.written.push(r.tensor);
        }
    }
    Ok(region_args)
}

/// The driver's tail: the written tensors saved, the skipped tasks named, errors caught.
fn driver_tail(out: &mut String, store: &TensorStore, touched: &Touched) {
    for &t in &touched.written {
        let _ = writeln!(
            out,
            "        pto_wsp_host::write_npy(out + \"/{}.npy\", T[{t}]);",
            store.info(t).name
        );
    }
    if touched.skipped > 0 {
        let _ = writeln!(
            out,
            "        std::printf(\"skipped {} task(s) of kernels without a body: {}\\n\");",
            touched.skipped,
            touched.skipped_names.join(", ")
        );
    }
    out.push_str(
        "    } catch (const std::exception &e) {\n        std::fprintf(stderr, \"error: %s: %s\\n\", current.c_str(), e.what());\n        return 1;\n    }\n    return 0;\n}\n",
    );
}
