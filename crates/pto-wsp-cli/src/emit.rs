//! `pto-wsp emit kernels`: kernels written in tile instructions as PTO-ISA C++.
//!
//! Why: a kernel body (`pto_wsp::ir::kernel_body`) must run on the device too, where the tile
//! library is PTO-ISA (`#include <pto/pto-inst.hpp>`). This module writes each kernel with a
//! body as one C++ header calling PTO-ISA's API, plus a host driver that loads the module's
//! tensors from `.npy` files, runs every task of the workload whose kernel has a body (in
//! program order, which respects every dependency) on copies of its regions, and writes the
//! tensors those tasks write; with a Makefile. Built with `-D__CPU_SIM` it runs under PTO-ISA's
//! CPU simulation, which is how the tests compare it with our own CPU executor.
//!
//! Promise: every instruction is written as the one instruction table says
//! (`pto_wsp::ir::tile_isa::CppForm`); an instruction PTO-ISA lacks, an element type or an
//! expression the emitter cannot write is an [`EmitError`] at the statement's
//! `file:line:column`, naming the kernel and the instruction, and nothing is written. The
//! emitted kernels raise the same shape errors as the CPU executor (a region part out of its
//! region, a valid size out of its tile) with the same messages.
//!
//! Tile mapping: PTO-ISA tiles need 32-byte aligned rows (vector tiles) and whole fractals
//! (left / right / accumulator tiles), so each tile is declared with its shape rounded up to
//! those units and its valid rows × cols set to ours (always `DYNAMIC`, so that tiles of one
//! declared shape share one C++ type): the padding is never read.

pub(crate) mod kernel;

use crate::{CliError, Loaded};
pub(crate) use kernel::{Mode, c_str, elem, emit_kernel};
use pto_wsp::ir::{Bindings, Diagnostic, ExpandOptions, Loc, ParamType, Value};
use pto_wsp::kernels::TensorStore;
use std::fmt::Write as _;
use std::path::Path;

/// The most tasks a driver is written for (each task is a few lines of straight-line C++).
pub const MAX_EMITTED_TASKS: usize = 1 << 16;

/// The kernel-side support header every emitted kernel includes.
pub(crate) const RT_HPP: &str = include_str!("emit/pto_wsp_rt.hpp");
/// The host-side support header the driver includes (tensors, `.npy`, regions).
const HOST_HPP: &str = include_str!("emit/pto_wsp_host.hpp");

/// Something in a kernel body the emitter cannot write as PTO-ISA C++.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmitError {
    /// The kernel.
    pub kernel: String,
    /// What cannot be emitted and why.
    pub message: String,
    /// The statement.
    pub loc: Loc,
}

impl std::fmt::Display for EmitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "kernel `{}`: cannot emit PTO-ISA C++: {}",
            self.kernel, self.message
        )
    }
}

impl Diagnostic for EmitError {
    fn loc(&self) -> Loc {
        self.loc
    }
}

/// The emitted files, in memory.
#[derive(Debug, Clone)]
pub struct Emitted {
    /// `(file name, contents)`, every file of the output directory.
    pub files: Vec<(String, String)>,
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

/// Emits every kernel of `loaded` that has a body, and a driver running the entry workload's
/// tasks under `bindings`.
pub fn emit_kernels(loaded: &Loaded, bindings: &Bindings) -> Result<Emitted, CliError> {
    let module = &loaded.module;
    let diag = |e: EmitError| CliError::diagnostic(&loaded.source, &e);
    let mut files = vec![("pto_wsp_rt.hpp".to_string(), RT_HPP.to_string())];
    let mut kernels = Vec::new();
    // Status code c is messages[c - 1].
    let mut messages: Vec<String> = Vec::new();
    for k in module.kernels.iter().filter(|k| k.body.is_some()) {
        let text =
            emit_kernel(k, &loaded.source, Mode::Host, messages.len() as i64 + 1).map_err(diag)?;
        files.push((format!("{}.hpp", k.name.name), text.text));
        messages.extend(text.messages);
        kernels.push(k.name.name.clone());
    }
    if kernels.is_empty() {
        return Err(CliError::plain(format!(
            "{}: no kernel has a body: nothing to emit",
            loaded.source.name
        )));
    }
    let store = TensorStore::new(module, bindings)
        .map_err(|e| CliError::plain(format!("{}: tensor shapes: {e}", loaded.source.name)))?;
    let expansion = crate::expand_loaded(
        loaded,
        bindings,
        &ExpandOptions {
            limit: Some(MAX_EMITTED_TASKS + 1),
            executors: None,
        },
    )?;
    if expansion.tasks.len() > MAX_EMITTED_TASKS || expansion.truncated {
        return Err(CliError::plain(format!(
            "{}: the workload has more than {MAX_EMITTED_TASKS} tasks; the emitted driver \
             lists its tasks one by one and is limited to that many",
            loaded.source.name
        )));
    }
    let driver = emit_driver(loaded, &store, &expansion.tasks, &kernels, &messages)?;
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

/// Writes `emitted` into `dir` (created if needed). Every file is written to a temporary name
/// and renamed, so a file is either the old one or complete.
pub fn write_emitted(emitted: &Emitted, dir: &Path) -> Result<(), CliError> {
    write_files(&emitted.files, dir)
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
pub fn summary(emitted: &Emitted, dir: &Path) -> String {
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

/// The Makefile of an emitted directory.
const MAKEFILE: &str = "\
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
    loaded: &Loaded,
    store: &TensorStore,
    tasks: &[pto_wsp::ir::ExpandedTask],
    kernels: &[String],
    messages: &[String],
) -> Result<Driver, CliError> {
    let module = &loaded.module;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "// Generated by `pto-wsp emit kernels` from {}. Do not edit.\n\
         // Usage: driver IN_DIR OUT_DIR. Reads IN_DIR/NAME.npy for every tensor that has one (the\n\
         // others start zeroed), runs the tasks of the kernels below in program order, writes\n\
         // OUT_DIR/NAME.npy for every tensor they write.",
        loaded.source.name
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
    out.push_str("    std::vector<pto_wsp_host::Tensor> T = {\n");
    for info in store.infos() {
        let descr = pto_wsp::kernels::npy::descr(info.dtype);
        if info.shape.len() > 4 {
            return Err(CliError::plain(format!(
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
    out.push_str("    };\n    std::string current = \"reading inputs\";\n    try {\n");
    out.push_str(
        "        for (auto &t : T) {\n            t.bytes.assign(static_cast<size_t>(t.elements()) * t.info.esize, 0);\n            pto_wsp_host::read_npy(in + \"/\" + t.info.name + \".npy\", t);\n        }\n",
    );
    let mut written: Vec<u32> = Vec::new();
    let mut skipped = 0;
    let mut skipped_names: Vec<String> = Vec::new();
    // Tensors written by skipped tasks so far, and those of them an emitted task then reads.
    let mut skipped_writes: Vec<u32> = Vec::new();
    let mut read_after_skipped: Vec<u32> = Vec::new();
    for (ti, task) in tasks.iter().enumerate() {
        let k = &module.kernels[task.kernel as usize];
        if k.body.is_none() {
            skipped += 1;
            for r in task.regions.iter().filter(|r| r.access.writes()) {
                if !skipped_writes.contains(&r.tensor) {
                    skipped_writes.push(r.tensor);
                }
            }
            if !skipped_names.contains(&k.name.name) {
                skipped_names.push(k.name.name.clone());
            }
            continue;
        }
        let _ = writeln!(
            out,
            "        {{ // task {ti}: {}\n            current = \"task {ti} ({})\";",
            k.name.name, k.name.name
        );
        let mut region_args = Vec::new();
        for (ri, r) in task.regions.iter().enumerate() {
            let info = store.info(r.tensor);
            let e = elem(info.dtype).ok_or_else(|| {
                CliError::plain(format!(
                    "task {ti} ({}): region {ri} is of tensor `{}` ({}); the driver handles f32 and f16",
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
                && skipped_writes.contains(&r.tensor)
                && !read_after_skipped.contains(&r.tensor)
            {
                read_after_skipped.push(r.tensor);
            }
            if r.access.writes() && !written.contains(&r.tensor) {
                written.push(r.tensor);
            }
        }
        let scalar_types = k.scalar_types();
        let mut scalar_args = Vec::new();
        for (v, t) in task.params.iter().zip(&scalar_types) {
            scalar_args.push(match (t, v) {
                (ParamType::F32 | ParamType::F64, Value::U64(bits)) => {
                    format!("pto_wsp_rt::f32_param(UINT64_C({bits:#x}))")
                }
                (_, Value::Bool(b)) => b.to_string(),
                (_, Value::I64(i)) => format!("int64_t{{{i}}}"),
                (_, Value::U64(u)) => format!("static_cast<int64_t>(UINT64_C({u}))"),
            });
        }
        // The kernel's parameters in declaration order.
        let (mut regions, mut scalars) = (region_args.into_iter(), scalar_args.into_iter());
        let args: Vec<String> = k
            .params
            .iter()
            .filter_map(|p| match p.kind {
                pto_wsp::ir::ParamKind::Tile { .. } => regions.next(),
                pto_wsp::ir::ParamKind::Scalar(_) => scalars.next(),
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
    }
    let names: Vec<String> = written
        .iter()
        .map(|&t| store.info(t).name.clone())
        .collect();
    for &t in &written {
        let _ = writeln!(
            out,
            "        pto_wsp_host::write_npy(out + \"/{}.npy\", T[{t}]);",
            store.info(t).name
        );
    }
    if skipped > 0 {
        let _ = writeln!(
            out,
            "        std::printf(\"skipped {skipped} task(s) of kernels without a body: {}\\n\");",
            skipped_names.join(", ")
        );
    }
    out.push_str(
        "    } catch (const std::exception &e) {\n        std::fprintf(stderr, \"error: %s: %s\\n\", current.c_str(), e.what());\n        return 1;\n    }\n    return 0;\n}\n",
    );
    Ok(Driver {
        text: out,
        written: names,
        skipped,
        read_after_skipped: read_after_skipped
            .iter()
            .map(|&t| store.info(t).name.clone())
            .collect(),
    })
}
