//! The a2a3 device rules, judged by PTO-ISA's own device templates and by an independent model
//! of the pipes.
//!
//! - Every module under `examples/` that reaches the Ascend back end (and the module naming
//!   every kernel of the kernel library) is emitted for
//!   `ascend_a2a3`, and every AICore kernel of its tree is compiled with `g++ -fsyntax-only`
//!   against PTO-ISA's `include/pto/npu/a2a3` templates (`__CCE_AICORE__` set for a2a3, the CCE
//!   built-ins declared by `tests/a2a3/cce_stub.hpp`), without exceptions and with stdio and
//!   heap functions poisoned: PTO-ISA's static assertions (tile locations, element types,
//!   layouts, `TASSIGN` capacity and alignment) judge what we emit.
//! - The device description's numbers are checked against the assertions they cite: a tile of
//!   exactly each buffer's capacity is accepted by `TASSIGN<0>`, one row more is refused; an
//!   address off the alignment is refused; each illegal movement the rules refuse is refused by
//!   the templates with the cited message.
//! - Every cross-pipe def-use of every emitted kernel is ordered: the emitted C++ is read back,
//!   and a model of the pipes (each pipe in order, the vector pipe only across barriers, flags
//!   paired per pipe pair and event) checks every pair of conflicting accesses on every path
//!   (loops run 0, 1 and 2 times; a kernel with more than 4,096 such paths on 4,096 sampled
//!   ones).
//! - The refusals users meet, with their exact messages.
//!
//! The template check needs the PTO-ISA and simpler checkouts (`PTO_ISA_ROOT`, `SIMPLER_ROOT`,
//! defaulting under `$HOME/.cache/pto-wsp`) and `g++`; without them it prints one `skipped: …`
//! line and passes.

mod common;

use pto_wsp::emitters::ascend::AscendTree;
use pto_wsp::ir::device::{self, Pipe};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The Ascend tree of `loaded` for `target`, its kernels naming built-ins given the kernel
/// library's bodies, as `pto-wsp emit ascend` does.
fn emit_ascend(
    loaded: &pto_wsp_cli::Loaded,
    bindings: &pto_wsp::ir::Bindings,
    target: &str,
) -> Result<AscendTree, pto_wsp_cli::CliError> {
    // A module of plans reaches the back end as task batches, as `pto-wsp emit ascend` sends it.
    let expanded = pto_wsp::driver::plans_as_tasks(loaded, bindings)?;
    let loaded = expanded.as_ref().map_or(loaded, |(l, _)| l);
    let (loaded, plan) = pto_wsp_cli::cmd::emit::with_library(loaded)?;
    pto_wsp_cli::cmd::emit::ascend(&loaded, &plan, bindings, target)
}

/// Every kernel of `loaded` with a body as PTO-ISA C++, as `pto-wsp emit kernels` does.
fn emit_kernels(
    loaded: &pto_wsp_cli::Loaded,
    bindings: &pto_wsp::ir::Bindings,
) -> Result<pto_wsp::emitters::ptoisa::Emitted, pto_wsp_cli::CliError> {
    let (loaded, plan) = pto_wsp_cli::cmd::emit::with_library(loaded)?;
    pto_wsp_cli::cmd::emit::kernels(&loaded, &plan, bindings)
}

fn checkout(var: &str, leaf: &str) -> PathBuf {
    match std::env::var_os(var) {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
            .join(".cache/pto-wsp")
            .join(leaf),
    }
}

/// PTO-ISA, simpler and g++, or why not.
struct Tools {
    pto_isa: PathBuf,
    simpler: PathBuf,
}

impl Tools {
    fn find() -> Result<Tools, String> {
        let t = Tools {
            pto_isa: checkout("PTO_ISA_ROOT", "pto-isa"),
            simpler: checkout("SIMPLER_ROOT", "simpler"),
        };
        if !t.pto_isa.join("include/pto/npu/a2a3/TLoad.hpp").exists() {
            return Err(format!("no PTO-ISA at {}", t.pto_isa.display()));
        }
        if !t
            .simpler
            .join("src/common/task_interface/tensor.h")
            .exists()
        {
            return Err(format!("no simpler at {}", t.simpler.display()));
        }
        if Command::new("g++").arg("--version").output().is_err() {
            return Err("no g++ on PATH".into());
        }
        Ok(t)
    }

    fn commit(&self) -> String {
        Command::new("git")
            .args([
                "-C",
                &self.pto_isa.display().to_string(),
                "rev-parse",
                "--short=8",
                "HEAD",
            ])
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "unknown".into())
    }

    /// `g++ -fsyntax-only` of `source` (written to `dir/name`) for a cube or vector core.
    fn check(
        &self,
        dir: &Path,
        name: &str,
        source: &str,
        cube: bool,
        std: &str,
    ) -> Result<(), String> {
        let tu = dir.join(name);
        std::fs::write(&tu, source).unwrap();
        let stub = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/a2a3");
        let out = Command::new("g++")
            .arg(format!("-std={std}"))
            .args(["-fsyntax-only", "-fno-exceptions", "-fno-rtti", "-w"])
            .arg("-include")
            .arg(stub.join("cce_stub.hpp"))
            .args(["-D__CCE_AICORE__=220", "-D__NPU_ARCH__=2201"])
            .arg(if cube {
                "-D__DAV_CUBE__"
            } else {
                "-D__DAV_VEC__"
            })
            .arg(format!("-I{}", stub.join("shim").display()))
            .arg(format!("-I{}", self.pto_isa.join("include").display()))
            .arg(format!(
                "-I{}",
                self.simpler.join("src/common/task_interface").display()
            ))
            .arg(format!(
                "-I{}",
                self.simpler.join("simpler_setup/incore").display()
            ))
            .arg(format!("-I{}", dir.display()))
            .arg(&tu)
            .output()
            .map_err(|e| format!("cannot run g++: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }
}

/// The translation unit judging AICore kernels of one tree and one core: PTO-ISA and the
/// runtime's descriptor first, then stdio and heap functions poisoned, then each kernel (its body
/// and entry; each entry renamed so that they can share the unit).
fn kernels_tu(kernels: &[String]) -> String {
    let mut tu = String::from(
        "#include <pto/pto-inst.hpp>\n#include \"tensor.h\"\n\
         #pragma GCC poison printf fprintf sprintf snprintf puts fopen malloc calloc realloc free abort exit\n",
    );
    for (i, k) in kernels.iter().enumerate() {
        tu.push_str(&format!(
            "#define kernel_entry kernel_entry_{i}\n#include \"kernel_{k}.cpp\"\n#undef kernel_entry\n"
        ));
    }
    tu
}

/// Every `.wsp` under `examples/`, sorted.
fn example_files() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![common::root().join("examples")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "wsp") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Every example's `ascend_a2a3` tree (under the file's `//@ bind` lines), or the first line of
/// the back end's refusal; and the tree of the module naming every kernel of the kernel library
/// (`test_data/library/every_kernel.wsp`), so every library kernel and instruction is judged.
fn device_trees() -> Vec<(String, Result<AscendTree, String>)> {
    let root = common::root();
    let mut files = example_files();
    files.push(root.join("test_data/library/every_kernel.wsp"));
    files
        .into_iter()
        .map(|p| {
            let shown = p.strip_prefix(&root).unwrap_or(&p).display().to_string();
            let text = std::fs::read_to_string(&p).unwrap();
            let tree = pto_wsp_cli::load_source(&shown, &text)
                .and_then(|l| {
                    let b = pto_wsp_cli::bindings_for(&l, &[])?;
                    emit_ascend(&l, &b, "ascend_a2a3")
                })
                .map_err(|e| e.rendered.lines().next().unwrap_or("").to_string());
            (shown, tree)
        })
        .collect()
}

#[test]
fn every_emitted_device_kernel_passes_pto_isas_a2a3_templates() {
    let tools = match Tools::find() {
        Ok(t) => t,
        Err(why) => {
            common::toolchain_skipped(common::Needs::Simpler, &why);
            return;
        }
    };
    common::toolchain_ran(common::Needs::Simpler);
    let base = common::scratch("a2a3-templates");
    let trees = device_trees();
    let mut jobs = Vec::new();
    let mut kernels = 0;
    let mut refused = Vec::new();
    for (i, (name, tree)) in trees.iter().enumerate() {
        match tree {
            Ok(t) => {
                let dir = base.join(format!("m{i}"));
                pto_wsp_cli::cmd::emit::write_files(&t.files, &dir).unwrap();
                // One unit per core type of the tree (all its kernels for that core).
                for cube in [true, false] {
                    let ks: Vec<String> = t
                        .kernels
                        .iter()
                        .filter(|k| (k.core == device::Core::Aic) == cube)
                        .map(|k| k.name.clone())
                        .collect();
                    kernels += ks.len();
                    if !ks.is_empty() {
                        jobs.push((name.clone(), dir.clone(), ks, cube));
                    }
                }
            }
            Err(why) => refused.push(format!("{name}: {why}")),
        }
    }
    let modules = trees.iter().filter(|t| t.1.is_ok()).count();
    assert!(
        modules >= 6,
        "the examples of examples/ascend reach the back end"
    );
    // Two compilers at a time; each judges its kernels for C++2b (the check) and C++17 (what the
    // device compiler builds with).
    let failures = std::sync::Mutex::new(Vec::new());
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some((module, dir, ks, cube)) = jobs.get(i) else {
                        break;
                    };
                    let core = if *cube { "aic" } else { "aiv" };
                    for std in ["c++2b", "c++17"] {
                        let tu = format!("check_{core}_{std}.cpp").replace('+', "p");
                        if let Err(e) = tools.check(dir, &tu, &kernels_tu(ks), *cube, std) {
                            failures.lock().unwrap().push(format!(
                                "{module}: {core} kernels {} (-std={std}):\n{}",
                                ks.join(", "),
                                e.lines()
                                    .filter(|l| l.contains("error"))
                                    .take(6)
                                    .collect::<Vec<_>>()
                                    .join("\n")
                            ));
                        }
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    println!(
        "a2a3 template check (PTO-ISA {}, g++ -std=c++2b and -std=c++17 -fsyntax-only -fno-exceptions): \
         {} AICore kernels of {modules} modules, {} compilations failed; {} modules refused by the Ascend back end",
        tools.commit(),
        kernels,
        failures.len(),
        refused.len()
    );
    for r in &refused {
        println!("  refused: {r}");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// A kernel emitted for the host driver (no device rules) and judged by the templates: the
/// rule's cited assertion must be what refuses it.
fn host_kernel_refused_as_cited(
    tools: &Tools,
    dir: &Path,
    src: &str,
    kernel: &str,
    cube: bool,
    cited: &str,
) {
    let loaded = pto_wsp_cli::load_source("t.wsp", src).unwrap_or_else(|e| panic!("{e}"));
    let bindings = pto_wsp_cli::bindings_for(&loaded, &[]).unwrap();
    let emitted = emit_kernels(&loaded, &bindings).unwrap_or_else(|e| panic!("{e}"));
    pto_wsp_cli::cmd::emit::write_files(&emitted.files, dir).unwrap();
    let tu = format!("#include <pto/pto-inst.hpp>\n#include \"{kernel}.hpp\"\n");
    let err = tools
        .check(dir, &format!("host_{kernel}.cpp"), &tu, cube, "c++2b")
        .expect_err("PTO-ISA's a2a3 templates accept a kernel the device rules refuse");
    assert!(
        err.contains(cited),
        "refused, but not by `{cited}`:\n{}",
        err.lines()
            .filter(|l| l.contains("error"))
            .take(5)
            .collect::<Vec<_>>()
            .join("\n")
    );
    // And the device rules refuse it too, citing the same assertion.
    let rendered = pto_wsp_cli::device_check(&loaded, None).expect_err("the rules accept it");
    assert!(rendered.rendered.contains(cited), "{rendered}");
}

#[test]
fn each_device_rule_matches_the_pto_isa_assertion_it_cites() {
    let tools = match Tools::find() {
        Ok(t) => t,
        Err(why) => {
            common::toolchain_skipped(common::Needs::Simpler, &why);
            return;
        }
    };
    common::toolchain_ran(common::Needs::Simpler);
    let dir = common::scratch("a2a3-rules");
    // Capacities and alignment: TASSIGN<addr> of a tile exactly the buffer's size passes, one
    // 16-row (or one-row) step more fails with SA-0352, a misaligned address with SA-0354.
    for b in device::BUFFERS {
        let ty = match b.kind {
            pto_wsp::ir::TileKind::Vec => {
                "pto::Tile<pto::TileType::Vec, float, {R}, 256, pto::BLayout::RowMajor>"
            }
            pto_wsp::ir::TileKind::Mat => {
                "pto::Tile<pto::TileType::Mat, float, {R}, 256, pto::BLayout::ColMajor, {R}, 256, pto::SLayout::RowMajor, 512>"
            }
            pto_wsp::ir::TileKind::Left => "pto::TileLeft<float, {R}, 256>",
            pto_wsp::ir::TileKind::Right => "pto::TileRight<float, {R}, 256>",
            pto_wsp::ir::TileKind::Acc => "pto::TileAcc<float, {R}, 256>",
        };
        let cols = 256u64;
        let rows = b.capacity / (cols * 4);
        assert_eq!(rows * cols * 4, b.capacity, "{}", b.name);
        let step = if b.kind == pto_wsp::ir::TileKind::Vec {
            1
        } else {
            16
        };
        let cube = b.core == device::Core::Aic;
        let case = |r: u64, addr: u64| {
            format!(
                "#include <pto/pto-inst.hpp>\nvoid f() {{\n    {} t;\n    pto::TASSIGN<{addr}>(t);\n}}\n",
                ty.replace("{R}", &r.to_string())
            )
        };
        tools
            .check(
                &dir,
                &format!("fits_{}.cpp", b.name),
                &case(rows, 0),
                cube,
                "c++2b",
            )
            .unwrap_or_else(|e| {
                panic!(
                    "{}: a tile of {} bytes is refused:\n{e}",
                    b.name, b.capacity
                )
            });
        let over = tools
            .check(
                &dir,
                &format!("over_{}.cpp", b.name),
                &case(rows + step, 0),
                cube,
                "c++2b",
            )
            .expect_err("a tile over the capacity is accepted");
        assert!(over.contains("SA-0352"), "{}: {over}", b.name);
        let misaligned = tools
            .check(
                &dir,
                &format!("align_{}.cpp", b.name),
                &case(step, b.align / 2),
                cube,
                "c++2b",
            )
            .expect_err("a misaligned address is accepted");
        assert!(misaligned.contains("SA-0354"), "{}: {misaligned}", b.name);
        println!(
            "{}: capacity {} bytes and alignment {} agree with PTO-ISA's TASSIGN checks",
            b.name, b.capacity, b.align
        );
    }
    // Movements and element types the rules refuse, refused by the templates as cited.
    // (A cube product of two element types never reaches the emitter: `check` refuses it.)
    let cases: [(&str, &str, bool, &str); 3] = [
        (
            "tensor A: f16[16, 16];\ntensor C: f32[16, 16];\n\
             kernel k(in a: f16[16, 16], out c: f32[16, 16]) @cube {\n    tile l: left f16[16, 16];\n    tile r: right f16[16, 16];\n    tile acc: acc f32[16, 16];\n    TLOAD(l, a);\n    TLOAD(r, a);\n    TMATMUL(acc, l, r);\n    TSTORE(c, acc);\n}\n\
             workload main() {\n    task k(A[0 +: 16, 0 +: 16], C[0 +: 16, 0 +: 16]);\n}\n",
            "k",
            true,
            "Fix: Dst TileType must be Vec or Mat!",
        ),
        (
            "tensor A: f32[16, 16];\ntensor C: f32[16, 16];\n\
             kernel k(in a: f32[16, 16], out c: f32[16, 16]) @cube {\n    tile am: mat f32[16, 16];\n    tile l: left f32[16, 16];\n    TLOAD(am, a);\n    TMOV(l, am);\n    TSTORE(c, l);\n}\n\
             workload main() {\n    task k(A[0 +: 16, 0 +: 16], C[0 +: 16, 0 +: 16]);\n}\n",
            "k",
            true,
            "Source TileType only suport Vec/Acc/Mat!",
        ),
        (
            "tensor A: f32[16, 16];\ntensor C: f32[16, 16];\n\
             kernel k(in a: f32[16, 16], out c: f32[16, 16]) @cube {\n    tile am: mat f32[16, 16];\n    tile l: left f32[16, 16];\n    tile r: right f32[16, 16];\n    tile acc: acc f32[16, 16];\n    tile l2: left f32[16, 16];\n    TLOAD(am, a);\n    TMOV(l, am);\n    TMOV(r, am);\n    TMATMUL(acc, l, r);\n    TMOV(l2, acc);\n    TMATMUL(acc, l2, r);\n    TSTORE(c, acc);\n}\n\
             workload main() {\n    task k(A[0 +: 16, 0 +: 16], C[0 +: 16, 0 +: 16]);\n}\n",
            "k",
            true,
            "TMov: Invalid TileType.",
        ),
    ];
    for (i, (src, kernel, cube, cited)) in cases.iter().enumerate() {
        let d = dir.join(format!("case{i}"));
        host_kernel_refused_as_cited(&tools, &d, src, kernel, *cube, cited);
        println!("refused by the rules and by PTO-ISA as cited: {cited}");
    }
}

// ---- every cross-pipe def-use ordered -----------------------------------------------------

/// A statement of an emitted kernel, read back from its C++.
#[derive(Debug, Clone)]
enum Cpp {
    /// An instruction: its pipe, the resources it reads and writes.
    Inst {
        text: String,
        pipe: Pipe,
        reads: Vec<String>,
        writes: Vec<String>,
    },
    Set(Pipe, Pipe, u8),
    Wait(Pipe, Pipe, u8),
    /// `pipe_barrier(P)`; `None`: `PIPE_ALL`.
    Barrier(Option<Pipe>),
    Loop(Vec<Cpp>),
    If(Vec<Cpp>, Vec<Cpp>),
}

/// The pipe of an instruction from its mnemonic and tile kinds: PTO-ISA's `opPipeList`
/// (`include/pto/npu/a2a3/TSync.hpp`), written here independently of the emitter.
fn pipe_of(mn: &str, kinds: &[&str]) -> Pipe {
    match mn {
        "TLOAD" => Pipe::Mte2,
        // Accumulating and converting stores too (`TSTORE<AtomicAdd>`, the fix pipe's
        // conversion).
        "TSTORE" | "TSTORE_ADD" | "TSTORE_CVT" => match kinds.first().copied() {
            Some("acc") => Pipe::Fix,
            _ => Pipe::Mte3,
        },
        // Single elements through the scalar unit (`Tile::GetValue` / `SetValue`).
        "TGET_VALUE" | "TSET_VALUE" | "TSORT_INDEX" | "TSORT_VALUE" => Pipe::S,
        "TMOV" => match (kinds.first().copied(), kinds.get(1).copied()) {
            (Some("left" | "right"), Some("mat")) => Pipe::Mte1,
            (Some("mat"), Some("acc")) => Pipe::Fix,
            _ => Pipe::V,
        },
        "TMATMUL" | "TMATMUL_ACC" => Pipe::M,
        _ => Pipe::V,
    }
}

fn tile_kind_of_decl(line: &str) -> Option<(String, &'static str)> {
    let kind = if line.contains("pto::TileLeft<") {
        "left"
    } else if line.contains("pto::TileRight<") {
        "right"
    } else if line.contains("pto::TileAcc<") {
        "acc"
    } else if line.contains("pto::TileType::Mat") {
        "mat"
    } else if line.contains("pto::TileType::Vec") {
        "vec"
    } else {
        return None;
    };
    // The type has no "> " inside; a tile array's elements are one resource.
    let after = line.split_once("> ")?.1;
    let name = after.split(['(', '[', ' ']).next()?.trim().to_string();
    Some((name, kind))
}

fn pipe_named(s: &str) -> Pipe {
    Pipe::parse(s.trim()).unwrap_or_else(|| panic!("unknown pipe `{s}`"))
}

/// A tile operand's resource: `t_x` for `t_x` and for any element `t_x[i]` of an array.
fn base_name(a: &str) -> String {
    a.split('[').next().unwrap_or(a).trim().to_string()
}

/// Reads the body of an emitted kernel header into statements.
fn read_kernel(text: &str) -> Vec<Cpp> {
    let mut kinds: HashMap<String, &'static str> = HashMap::new();
    let mut alias: HashMap<String, String> = HashMap::new();
    let mut stack: Vec<(Vec<Cpp>, u8)> = vec![(Vec::new(), 0)]; // (statements, 0 block / 1 loop / 2 then / 3 else)
    let mut then_part: Vec<Vec<Cpp>> = Vec::new();
    let mut region = String::new();
    let mut started = false;
    for raw in text.lines() {
        let line = raw.trim();
        if line.starts_with("using namespace pto;") {
            started = true;
            continue;
        }
        if !started || line.starts_with("//") || line.is_empty() {
            continue;
        }
        if line.contains("pto_wsp_rt::part(") {
            region = line
                .split(", ")
                .nth(2)
                .unwrap()
                .trim_start_matches("g_")
                .to_string();
            continue;
        }
        // A single element read or written by the scalar unit (its failure branch returns).
        for (f, write) in [
            ("pto_wsp_rt::get_value(", false),
            ("pto_wsp_rt::set_value(", true),
        ] {
            if let Some(at) = line.find(f) {
                let args: Vec<&str> = line[at + f.len()..].split(", ").collect();
                let t = base_name(args[2]);
                let text = line.to_string();
                let (reads, writes) = if write {
                    (Vec::new(), vec![t])
                } else {
                    (vec![t], Vec::new())
                };
                stack.last_mut().unwrap().0.push(Cpp::Inst {
                    text,
                    pipe: Pipe::S,
                    reads,
                    writes,
                });
            }
        }
        if line.contains("return;") {
            continue;
        }
        if let Some((name, kind)) = tile_kind_of_decl(line) {
            kinds.insert(name, kind);
            continue;
        }
        if let Some(rest) = line.strip_prefix("auto &") {
            // A double-buffered loop's name for this iteration's buffer.
            let (name, of) = rest.trim_end_matches(';').split_once(" = ").unwrap();
            alias.insert(name.to_string(), of.to_string());
            continue;
        }
        if let Some(rest) = line
            .strip_prefix("decltype(")
            .or_else(|| line.strip_prefix("std::remove_reference_t<decltype("))
        {
            let rest = rest.replacen(")>", ")", 1);
            let rest = rest.as_str();
            let (of, after) = rest.split_once(") ").unwrap();
            let name = after.split('(').next().unwrap().to_string();
            let k = kinds.get(&base_name(of)).copied().unwrap_or("vec");
            kinds.insert(name, k);
            continue;
        }
        if line == "}" && stack.len() == 1 {
            break; // the end of the function
        }
        let top = &mut stack.last_mut().unwrap().0;
        if let Some(args) = line
            .strip_prefix("set_flag(")
            .or_else(|| line.strip_prefix("wait_flag("))
        {
            let a: Vec<&str> = args.trim_end_matches(");").split(", ").collect();
            let e: u8 = a[2].trim_start_matches("EVENT_ID").parse().unwrap();
            top.push(if line.starts_with("set") {
                Cpp::Set(pipe_named(a[0]), pipe_named(a[1]), e)
            } else {
                Cpp::Wait(pipe_named(a[0]), pipe_named(a[1]), e)
            });
            continue;
        }
        if let Some(p) = line.strip_prefix("pipe_barrier(") {
            let p = p.trim_end_matches(");");
            top.push(Cpp::Barrier((p != "PIPE_ALL").then(|| pipe_named(p))));
            continue;
        }
        if line.starts_with("for (") {
            stack.push((Vec::new(), 1));
            continue;
        }
        if line.starts_with("if (") && line.ends_with('{') {
            stack.push((Vec::new(), 2));
            continue;
        }
        if line == "} else {" {
            let (body, _) = stack.pop().unwrap();
            then_part.push(body);
            stack.push((Vec::new(), 3));
            continue;
        }
        if line == "{" {
            stack.push((Vec::new(), 0));
            continue;
        }
        if line == "}" {
            let (body, kind) = stack.pop().unwrap();
            let parent = &mut stack.last_mut().unwrap().0;
            match kind {
                1 => parent.push(Cpp::Loop(body)),
                2 => parent.push(Cpp::If(body, Vec::new())),
                3 => parent.push(Cpp::If(then_part.pop().unwrap(), body)),
                _ => parent.extend(body),
            }
            continue;
        }
        let Some(mut open) = line.find('(') else {
            continue;
        };
        // A template instruction (`TCI<T, E, 0>(...)`, `fill_pad<PAD>(...)`): its operands
        // follow the template arguments.
        let callee = line[..open].split('<').next().unwrap_or("").to_string();
        if line[..open].contains('<') {
            match line.find(">(") {
                Some(p) => open = p + 1,
                None => continue,
            }
        }
        // Instructions PTO-ISA spells per platform go through the support header.
        let helper = callee
            .strip_prefix("pto_wsp_rt::")
            .map(|h| format!("T{}", h.to_uppercase()));
        let mn: &str = helper.as_deref().unwrap_or(&callee);
        if !mn.starts_with('T') || mn.starts_with("TASSIGN") || !line.ends_with(");") {
            continue;
        }
        let args: Vec<String> = line[open + 1..line.len() - 2]
            .split(", ")
            .map(|a| {
                let a = base_name(a.trim());
                alias.get(&a).cloned().unwrap_or(a)
            })
            .collect();
        let res = |a: &str| -> Option<String> {
            if a == "gt_" {
                Some(format!("@{region}"))
            } else if kinds.contains_key(a) {
                Some(a.to_string())
            } else {
                None
            }
        };
        let named: Vec<String> = args.iter().filter_map(|a| res(a)).collect();
        let tile_kinds: Vec<&str> = args
            .iter()
            .filter_map(|a| kinds.get(a.as_str()).copied())
            .collect();
        if named.is_empty() {
            continue;
        }
        let (reads, writes) = if mn.starts_with("TSTORE") {
            // An accumulating store reads the region too; the region is what it writes.
            (named[1..].to_vec(), named[..1].to_vec())
        } else {
            // The destination is written; a scratch operand (`tmpN_`) is written too.
            let mut w = vec![named[0].clone()];
            w.extend(named.iter().filter(|n| n.starts_with("tmp")).cloned());
            (named[1..].to_vec(), w)
        };
        top.push(Cpp::Inst {
            text: line.to_string(),
            pipe: pipe_of(mn, &tile_kinds),
            reads,
            writes,
        });
    }
    assert_eq!(stack.len(), 1, "unbalanced braces");
    stack.pop().unwrap().0
}

/// The paths through `body`: both sides of every `if`, every loop run 0, 1 and 2 times.
fn paths(body: &[Cpp]) -> Vec<Vec<Cpp>> {
    let mut out: Vec<Vec<Cpp>> = vec![Vec::new()];
    for s in body {
        let tails: Vec<Vec<Cpp>> = match s {
            Cpp::Loop(b) => {
                let once = paths(b);
                let mut t = vec![Vec::new()];
                t.extend(once.iter().cloned());
                for a in &once {
                    for b2 in &once {
                        let mut x = a.clone();
                        x.extend(b2.iter().cloned());
                        t.push(x);
                    }
                }
                t
            }
            Cpp::If(a, b) => {
                let mut t = paths(a);
                t.extend(paths(b));
                t
            }
            other => vec![vec![other.clone()]],
        };
        let mut next = Vec::new();
        for p in &out {
            for t in &tails {
                let mut x = p.clone();
                x.extend(t.iter().cloned());
                next.push(x);
            }
        }
        assert!(next.len() <= 4096, "too many paths to enumerate");
        out = next;
    }
    out
}

fn idx(p: Pipe) -> usize {
    Pipe::ALL.iter().position(|q| *q == p).unwrap()
}

/// Runs one path on the model of the pipes; returns the number of conflicting pairs on two
/// pipes (or two vector instructions) it checked, or the first unordered one.
fn check_path(path: &[Cpp]) -> Result<usize, String> {
    let n = Pipe::ALL.len();
    let mut issued = vec![0u64; n];
    // known[p][q]: how many instructions of q pipe p is ordered after.
    let mut known = vec![vec![0u64; n]; n];
    let mut flags: BTreeMap<(usize, usize, u8), Vec<Vec<u64>>> = BTreeMap::new();
    // Earlier accesses: resource -> (pipe, ordinal on it, write, text).
    let mut accesses: HashMap<String, Vec<(usize, u64, bool, String)>> = HashMap::new();
    let mut pairs = 0;
    for s in path {
        match s {
            Cpp::Set(q, p, e) => {
                let mut token = known[idx(*q)].clone();
                token[idx(*q)] = issued[idx(*q)];
                flags.entry((idx(*q), idx(*p), *e)).or_default().push(token);
            }
            Cpp::Wait(q, p, e) => {
                let Some(token) = flags
                    .get_mut(&(idx(*q), idx(*p), *e))
                    .filter(|v| !v.is_empty())
                    .map(|v| v.remove(0))
                else {
                    return Err(format!(
                        "wait_flag({q:?}, {p:?}, {e}) without a set_flag: a hang"
                    ));
                };
                for (k, t) in known[idx(*p)].iter_mut().zip(token) {
                    *k = (*k).max(t);
                }
            }
            Cpp::Barrier(None) => {
                for row in known.iter_mut() {
                    row.clone_from(&issued);
                }
            }
            Cpp::Barrier(Some(p)) => {
                known[idx(*p)][idx(*p)] = issued[idx(*p)];
            }
            Cpp::Inst {
                text,
                pipe,
                reads,
                writes,
            } => {
                let p = idx(*pipe);
                let mine: Vec<(&String, bool)> = reads
                    .iter()
                    .map(|r| (r, false))
                    .chain(writes.iter().map(|w| (w, true)))
                    .collect();
                for (r, w) in &mine {
                    for (q, ord, w2, t2) in accesses.get(*r).into_iter().flatten() {
                        if !(*w || *w2) {
                            continue;
                        }
                        let same_in_order = *q == p && *pipe != Pipe::V;
                        if same_in_order {
                            continue;
                        }
                        pairs += 1;
                        if known[p][*q] < *ord {
                            return Err(format!(
                                "`{t2}` ({:?}) and `{text}` ({pipe:?}) both touch `{r}` unordered",
                                Pipe::ALL[*q]
                            ));
                        }
                    }
                }
                issued[p] += 1;
                for (r, w) in mine {
                    accesses
                        .entry(r.clone())
                        .or_default()
                        .push((p, issued[p], w, text.clone()));
                }
            }
            Cpp::Loop(_) | Cpp::If(..) => unreachable!("paths are flat"),
        }
    }
    if let Some(((q, p, e), _)) = flags.iter().find(|(_, v)| !v.is_empty()) {
        return Err(format!(
            "set_flag({:?}, {:?}, {e}) never waited for: the flag stays set",
            Pipe::ALL[*q],
            Pipe::ALL[*p]
        ));
    }
    Ok(pairs)
}

/// How many paths [`paths`] would give (saturating).
fn count_paths(body: &[Cpp]) -> u64 {
    body.iter().fold(1u64, |n, s| {
        let k = match s {
            Cpp::Loop(b) => {
                let once = count_paths(b);
                1u64.saturating_add(once)
                    .saturating_add(once.saturating_mul(once))
            }
            Cpp::If(a, b) => count_paths(a).saturating_add(count_paths(b)),
            _ => 1,
        };
        n.saturating_mul(k)
    })
}

/// One path through `body` chosen by `rng` (a loop runs 0, 1 or 2 times, mostly 1 or 2; an
/// `if` takes either side).
fn sample_path(body: &[Cpp], rng: &mut u64, out: &mut Vec<Cpp>) {
    fn next(rng: &mut u64, n: u64) -> u64 {
        *rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (*rng >> 33) % n
    }
    for s in body {
        match s {
            Cpp::Loop(b) => {
                let times = [0, 1, 1, 2, 2, 2][next(rng, 6) as usize];
                for _ in 0..times {
                    sample_path(b, rng, out);
                }
            }
            Cpp::If(a, b) => {
                let side = if next(rng, 2) == 0 { a } else { b };
                sample_path(side, rng, out);
            }
            other => out.push(other.clone()),
        }
    }
}

/// Paths enumerated for a kernel when it has at most this many; past it, as many sampled.
const PATH_BUDGET: u64 = 4096;

/// Every path of a kernel's C++ checked (or, for a kernel with more than [`PATH_BUDGET`]
/// paths, that many sampled ones); the pairs checked, or the first failure.
fn check_kernel_text(text: &str) -> Result<usize, String> {
    let body = read_kernel(text);
    let mut pairs = 0;
    if count_paths(&body) <= PATH_BUDGET {
        for p in paths(&body) {
            pairs += check_path(&p)?;
        }
        return Ok(pairs);
    }
    let mut rng = 0x5eed_u64;
    for _ in 0..PATH_BUDGET {
        let mut p = Vec::new();
        sample_path(&body, &mut rng, &mut p);
        pairs += check_path(&p)?;
    }
    Ok(pairs)
}

#[test]
fn every_cross_pipe_def_use_of_every_emitted_kernel_is_ordered() {
    let mut kernels = 0;
    let mut pairs = 0;
    let mut removed_tested = 0;
    let mut barriers_tested = 0;
    let mut sampled = 0;
    for (module, tree) in device_trees() {
        let Ok(tree) = tree else { continue };
        for k in &tree.kernels {
            let text = &tree
                .files
                .iter()
                .find(|(n, _)| *n == format!("{}.hpp", k.name))
                .unwrap()
                .1;
            let n = check_kernel_text(text)
                .unwrap_or_else(|e| panic!("{module}: kernel `{}`: {e}", k.name));
            kernels += 1;
            pairs += n;
            if count_paths(&read_kernel(text)) > PATH_BUDGET {
                // Sampled paths may miss the one a synchronisation is for: minimality is
                // checked on the kernels whose paths are all enumerated.
                sampled += 1;
                continue;
            }
            // The check can fail: without any one of the kernel's waits (and its set), some
            // def-use is unordered.
            let lines: Vec<&str> = text.lines().collect();
            for (i, l) in lines.iter().enumerate() {
                if l.trim_start().starts_with("wait_flag(") {
                    // A wait with its set right before it, or a double buffer's credit wait.
                    let paired = lines[i - 1].trim_start().starts_with("set_flag(");
                    let cut: String = lines
                        .iter()
                        .enumerate()
                        .filter(|(j, _)| *j != i && !(paired && *j == i - 1))
                        .map(|(_, l)| format!("{l}\n"))
                        .collect();
                    assert!(
                        check_kernel_text(&cut).is_err(),
                        "{module}: kernel `{}`: removing `{}` leaves every def-use ordered (not minimal)",
                        k.name,
                        l.trim()
                    );
                    removed_tested += 1;
                }
                if l.trim() == "pipe_barrier(PIPE_V);" {
                    let cut: String = lines
                        .iter()
                        .enumerate()
                        .filter(|(j, _)| *j != i)
                        .map(|(_, l)| format!("{l}\n"))
                        .collect();
                    assert!(
                        check_kernel_text(&cut).is_err(),
                        "{module}: kernel `{}`: a vector barrier nothing needs",
                        k.name
                    );
                    barriers_tested += 1;
                }
            }
        }
    }
    println!(
        "every cross-pipe (and vector-to-vector) def-use ordered: {kernels} emitted kernels ({sampled} \
         with more than {PATH_BUDGET} paths checked on that many sampled ones), {pairs} \
         conflicting access pairs checked; in the others each of the {removed_tested} set/wait \
         pairs and {barriers_tested} vector barriers is needed (removing it leaves a def-use \
         unordered)"
    );
    assert!(kernels >= 20 && pairs > 0);
}

// ---- refusals, with their messages ----------------------------------------------------------

fn refusal(src: &str) -> String {
    let loaded = pto_wsp_cli::load_source("t.wsp", src).unwrap_or_else(|e| panic!("{e}"));
    pto_wsp_cli::cmd::targets::check_for_target(&loaded, "ascend_a2a3")
        .expect_err("accepted")
        .rendered
}

#[test]
fn a_global_memory_load_into_a_left_tile_is_refused_at_its_line() {
    let out = refusal(
        "tensor A: f16[16, 16];\ntensor C: f32[16, 16];\n\
         kernel k(in a: f16[16, 16], out c: f32[16, 16]) @cube {\n    tile l: left f16[16, 16];\n    tile r: right f16[16, 16];\n    tile acc: acc f32[16, 16];\n    TLOAD(l, a);\n    TLOAD(r, a);\n    TMATMUL(acc, l, r);\n    TSTORE(c, acc);\n}\n\
         workload main() {\n    task k(A[0 +: 16, 0 +: 16], C[0 +: 16, 0 +: 16]);\n}\n",
    );
    assert_eq!(
        out,
        "error: kernel `k`: not legal on a2a3: TLOAD into `l`, a `left` tile (L0A): on a2a3 global memory is loaded into `vec` (UB) or `mat` (L1) tiles only; load into a `mat` tile and TMOV it into `l`\n \
         --> t.wsp:7:5\n  |\n7 |     TLOAD(l, a);\n  |     ^^^^^^^^^^^^\n  = note: rule: PTO-ISA include/pto/npu/a2a3/TLoad.hpp: static_assert \"Fix: Dst TileType must be Vec or Mat!\"\n\n\
         error: kernel `k`: not legal on a2a3: TLOAD into `r`, a `right` tile (L0B): on a2a3 global memory is loaded into `vec` (UB) or `mat` (L1) tiles only; load into a `mat` tile and TMOV it into `r`\n \
         --> t.wsp:8:5\n  |\n8 |     TLOAD(r, a);\n  |     ^^^^^^^^^^^^\n  = note: rule: PTO-ISA include/pto/npu/a2a3/TLoad.hpp: static_assert \"Fix: Dst TileType must be Vec or Mat!\"\n\n\
         error: aborting due to 2 previous errors\n"
    );
}

#[test]
fn vector_tiles_over_the_unified_buffer_are_refused_naming_them_and_the_capacity() {
    let out = refusal(
        "tensor X: f32[256, 128];\ntensor Y: f32[256, 128];\n\
         kernel k(in x: f32[256, 128], out y: f32[256, 128]) @vector {\n    tile a: vec f32[256, 128];\n    tile b: vec f32[256, 128];\n    tile m: vec f32[256, 1];\n    TLOAD(a, x);\n    TROWMAX(m, a);\n    TROWEXPANDSUB(b, a, m);\n    TSTORE(y, b);\n}\n\
         workload main() {\n    task k(X[0 +: 256, 0 +: 128], Y[0 +: 256, 0 +: 128]);\n}\n",
    );
    assert_eq!(
        out,
        "error: kernel `k`: not legal on a2a3: the tiles live here need 262,144 bytes of UB (with 32-byte alignment), over its capacity of 196,608 bytes (192 KiB): `a` vec f32[256, 128] 131,072 bytes, `b` vec f32[256, 128] 131,072 bytes\n \
         --> t.wsp:5:5\n  |\n5 |     tile b: vec f32[256, 128];\n  |     ^^^^^^^^^^^^^^^^^^^^^^^^^^\n  = note: rule: PTO-ISA include/pto/common/buffer_limits.hpp: PTO_UBUF_SIZE_BYTES (192u * 1024u), PTO_UBUF_ALIGN_BYTES 32u\n"
    );
}

#[test]
fn a_cube_product_of_two_element_types_is_refused() {
    // Refused by `check` itself (every target): the cube multiplies operands of one type, and
    // mixed products are the kernel library's (converted exactly on the vector unit).
    let src = "tensor A: f16[16, 16];\ntensor B: f32[16, 16];\ntensor C: f32[16, 16];\n\
         kernel k(in a: f16[16, 16], in b: f32[16, 16], out c: f32[16, 16]) @cube {\n    tile am: mat f16[16, 16];\n    tile bm: mat f32[16, 16];\n    tile l: left f16[16, 16];\n    tile r: right f32[16, 16];\n    tile acc: acc f32[16, 16];\n    TLOAD(am, a);\n    TLOAD(bm, b);\n    TMOV(l, am);\n    TMOV(r, bm);\n    TMATMUL(acc, l, r);\n    TSTORE(c, acc);\n}\n\
         workload main() {\n    task k(A[0 +: 16, 0 +: 16], B[0 +: 16, 0 +: 16], C[0 +: 16, 0 +: 16]);\n}\n";
    let e = pto_wsp_cli::load_source("t.wsp", src).expect_err("accepted");
    assert!(
        e.rendered.starts_with(
            "error: kernel `k`: TMATMUL: `l` is f16 but `r` is f32: the cube multiplies operands \
             of one type (f16, bf16 or f32)\n  --> t.wsp:14:5\n"
        ),
        "{}",
        e.rendered
    );
}

#[test]
fn a_cube_and_vector_kernel_the_runtime_cannot_host_is_refused() {
    let out = refusal(
        "tensor X: f32[16, 16];\ntensor Y: f32[16, 16];\n\
         kernel k(in x: f32[16, 16], out y: f32[16, 16]) @cube {\n    tile xm: mat f32[16, 16];\n    tile l: left f32[16, 16];\n    tile r: right f32[16, 16];\n    tile c: acc f32[16, 16];\n    tile v: vec f32[16, 16];\n    for i in range(2) {\n        TLOAD(xm, x);\n        TMOV(l, xm);\n        TMOV(r, xm);\n        TMATMUL(c, l, r);\n        TMOV(v, c);\n        TEXP(v, v);\n    }\n    TSTORE(y, v);\n}\n\
         workload main() {\n    task k(X[0 +: 16, 0 +: 16], Y[0 +: 16, 0 +: 16]);\n}\n",
    );
    assert_eq!(
        out,
        "error: kernel `k`: not legal on a2a3: it uses the cube and the vector core, so it runs as parts, one per core, joined through global memory (dependent tasks: the runtime joins the two cores at task boundaries); this `for` loop uses both cores, and a loop runs in one part; write one loop per core\n \
         --> t.wsp:9:5\n  |\n9 |     for i in range(2) {\n  |     ^\n  = note: rule: simpler examples/a2a3/tensormap_and_ringbuffer/paged_attention/kernels/orchestration/paged_attention_orch.cpp: QK on the AIC writes `sij` (a tensor the runtime allocates, add_output(TensorCreateInfo)), softmax on the AIV reads it: dependent tasks through global memory (PTO-ISA include/pto/cpu/TPush.hpp has no cross-core wait, so TPUSH / TPOP race on a2a3sim)\n"
    );
    // An accumulator both parts would need: L0 tiles do not survive between parts.
    let out = refusal(
        "tensor X: f32[16, 16];\ntensor Y: f32[16, 16];\n\
         kernel k(in x: f32[16, 16], out y: f32[16, 16]) @cube {\n    tile xm: mat f32[16, 16];\n    tile l: left f32[16, 16];\n    tile r: right f32[16, 16];\n    tile c: acc f32[16, 16];\n    tile v: vec f32[16, 16];\n    TLOAD(xm, x);\n    TMOV(l, xm);\n    TMOV(r, xm);\n    TMATMUL(c, l, r);\n    TMOV(v, c);\n    TEXP(v, v);\n    TMOV(l, v);\n    TMATMUL_ACC(c, l, r);\n    TSTORE(y, c);\n}\n\
         workload main() {\n    task k(X[0 +: 16, 0 +: 16], Y[0 +: 16, 0 +: 16]);\n}\n",
    );
    assert!(
        out.contains("`l` (left, L0A) would be used by two parts, but L0A / L0B / L0C tiles are neither stored nor reloaded; keep its uses on one side of the vector work"),
        "{out}"
    );
}

#[test]
fn run_with_device_rules_refuses_what_the_cpu_would_run() {
    let dir = common::scratch("device-rules");
    let file = dir.join("t.wsp");
    std::fs::write(
        &file,
        "tensor A: f16[16, 16];\ntensor C: f32[16, 16];\n\
         kernel k(in a: f16[16, 16], out c: f32[16, 16]) @cube {\n    tile l: left f16[16, 16];\n    tile r: right f16[16, 16];\n    tile acc: acc f32[16, 16];\n    TLOAD(l, a);\n    TLOAD(r, a);\n    TMATMUL(acc, l, r);\n    TSTORE(c, acc);\n}\n\
         workload main() {\n    task k(A[0 +: 16, 0 +: 16], C[0 +: 16, 0 +: 16]);\n}\n",
    )
    .unwrap();
    let f = file.display().to_string();
    let (code, _, _) = common::binary(&["run", &f, "-q"]);
    assert_eq!(code, 0, "the CPU simulation runs it");
    let (code, out, err) = common::binary(&["run", &f, "-q", "--device-rules", "a2a3"]);
    assert_eq!(code, 1, "{out}");
    assert!(err.contains("TLOAD into `l`, a `left` tile (L0A)"), "{err}");
    let (code, out, _) = common::binary(&[
        "run",
        "examples/ascend/decode_attention.wsp",
        "-q",
        "--device-rules",
        "a2a3",
    ]);
    assert_eq!(code, 0);
    assert!(
        out.starts_with("device rules: legal on a2a3: 2 kernels with a body (`chunk` runs as 5 parts alternating cube and vector, `merge` runs as 3 parts alternating cube and vector)\n"),
        "{out}"
    );
    let (code, _, err) = common::binary(&["run", &f, "--device-rules", "a5"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("unknown device `a5` for --device-rules (known: a2a3)"),
        "{err}"
    );
}
