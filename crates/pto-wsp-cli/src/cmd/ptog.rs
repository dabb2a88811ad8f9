//! `pto-wsp asm`, `pto-wsp disasm` and `pto-wsp run FILE.ptog`: the task-graph ISA
//! (`docs/ISA.md`) from the command line.
//!
//! Why: a task-graph program is written as text, shipped as the `PTOG` binary and run on
//! simulated devices; each step is one command, and every mistake is reported where it is
//! (`file:line:column` for text, `file: byte N` for a binary).
//!
//! Promises: `asm` writes its output whole or not at all (a temporary file renamed);
//! `disasm` prints text `asm` reads back to the same binary; `run` loads every device (symbols
//! resolved, placement decided) before any runs, fills every tensor from `--seed` (then
//! `--input`s), and writes `--output`s only after a successful run, each whole.

use super::{print, read};
use crate::CliError;
use crate::files::Outputs;
use anyhow::Context as _;
use pto_wsp::ptog::{Device, DeviceConfig, Library};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Whether `bytes` are a task-graph binary (start with the magic `PTOG`).
pub fn is_binary(bytes: &[u8]) -> bool {
    bytes.starts_with(&pto_wsp::ptog::binary::MAGIC)
}

/// Assembles `text` (read from `name`) and writes the binary to `out`.
pub fn asm(name: &str, text: &str, out: &Path) -> Result<String, CliError> {
    let checked =
        pto_wsp::ptog::assemble(text).map_err(|e| CliError::plain(format!("{name}:{e}")))?;
    let bytes = pto_wsp::ptog::encode(&checked.program);
    write_whole(out, &bytes)?;
    Ok(format!(
        "{name}: {} instruction(s), {} graph(s), {} byte(s) written to {}\n",
        checked.program.insns.len(),
        checked.graphs.len(),
        bytes.len(),
        out.display()
    ))
}

/// The binary of `text` (read from `name`), for `pto-wsp run FILE.ptoasm`.
pub fn assemble_bytes(name: &str, text: &str) -> Result<Vec<u8>, CliError> {
    let checked =
        pto_wsp::ptog::assemble(text).map_err(|e| CliError::plain(format!("{name}:{e}")))?;
    Ok(pto_wsp::ptog::encode(&checked.program))
}

/// The program of `path`'s contents: assembled when it is text (`.ptoasm`), as is when it is
/// a binary.
pub fn program_bytes(path: &Path, contents: Vec<u8>) -> Result<Vec<u8>, CliError> {
    let name = path.display().to_string();
    if path.extension().is_some_and(|e| e == "ptoasm") {
        let text = String::from_utf8(contents)
            .map_err(|_| CliError::plain(format!("{name}: the text is not UTF-8")))?;
        return assemble_bytes(&name, &text);
    }
    Ok(contents)
}

/// The text of the binary `bytes` (read from `name`).
pub fn disasm(name: &str, bytes: &[u8]) -> Result<String, CliError> {
    let checked = decode(name, bytes)?;
    Ok(pto_wsp::ptog::disassemble(&checked.program))
}

fn decode(name: &str, bytes: &[u8]) -> Result<pto_wsp::ptog::Checked, CliError> {
    pto_wsp::ptog::decode(bytes).map_err(|e| CliError::plain(format!("{name}: {e}")))
}

fn write_whole(out: &Path, bytes: &[u8]) -> Result<(), CliError> {
    let io = |what: &str, e: std::io::Error| CliError::plain(format!("cannot {what}: {e}"));
    let tmp = out.with_extension("partial");
    std::fs::write(&tmp, bytes).map_err(|e| io(&format!("write `{}`", tmp.display()), e))?;
    std::fs::rename(&tmp, out).map_err(|e| io(&format!("rename to `{}`", out.display()), e))
}

/// What `pto-wsp run` needs to run task-graph binaries.
#[derive(Debug, Default)]
pub struct RunArgs {
    /// Each device's binary: its name and bytes (device `i` runs the `i`-th).
    pub devices: Vec<(String, Vec<u8>)>,
    /// A `.wsp` module whose kernels (bodies and `//@ alias` lines) the binaries run: its name
    /// and text.
    pub kernels: Option<(String, String)>,
    /// Cube, vector and AICPU cores of each device.
    pub cores: Option<[u32; 3]>,
    /// Seed of the generated inputs.
    pub seed: u64,
    /// `--input NAME=PATH.npy` (device 0's tensors).
    pub inputs: Vec<String>,
    /// `--output NAME=PATH.npy` (device 0's tensors).
    pub outputs: Vec<String>,
}

/// The kernels a binary may run: the built-ins, the examples' kernels (`examples/ptog/`), and
/// the kernels of `--kernels FILE.wsp`.
fn library(kernels: &Option<(String, String)>) -> Result<Library, CliError> {
    let maker = pto_wsp::WorkloadNode::maker(0);
    let mut lib = pto_wsp::ptog::examples::library(&maker)
        .map_err(|e| CliError::plain(format!("the examples' kernels: {e}")))?;
    if let Some((name, text)) = kernels {
        let loaded = crate::load_source(name, text)?;
        // The aliases are checked as `pto-wsp run` checks them, then added under their names.
        let mut check = pto_wsp::kernels::KernelRegistry::with_builtins();
        crate::aliases::apply_aliases(&loaded, &mut check)?;
        lib.add_kernel_language(&loaded.module);
        for line in pto_wsp::driver::binds::directive_lines(text, pto_wsp::driver::aliases::PREFIX)
        {
            if let Some((alias, kernel)) = line.spec.split_once('=') {
                lib.alias(alias.trim(), kernel.trim())
                    .map_err(|e| CliError::plain(format!("{name}: {e}")))?;
            }
        }
    }
    Ok(lib)
}

/// Runs the binaries of `args`, one per device; returns the report to print.
pub fn run(args: &RunArgs) -> Result<String, CliError> {
    let lib = library(&args.kernels)?;
    let cfg = match args.cores {
        Some([aic, aiv, aicpu]) => DeviceConfig {
            aic,
            aiv,
            aicpu,
            ..DeviceConfig::default()
        },
        None => DeviceConfig::default(),
    };
    let mut devices = Vec::with_capacity(args.devices.len());
    for (name, bytes) in &args.devices {
        let checked = decode(name, bytes)?;
        let mut dev = Device::new(checked, cfg.clone(), &lib)
            .map_err(|e| CliError::plain(format!("{name}: {e}")))?;
        dev.store_mut().fill_random(args.seed);
        devices.push(dev);
    }
    let Some(first) = devices.first_mut() else {
        return Err(CliError::plain("no task-graph binary to run"));
    };
    let name0 = &args.devices[0].0;
    let names: Vec<String> = first
        .store()
        .infos()
        .iter()
        .map(|i| i.name.clone())
        .collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let outputs = Outputs::check(&args.outputs, None, &names)?;
    let mut opened = Vec::new();
    for spec in &args.inputs {
        let (tensor, path): (String, PathBuf) = crate::files::split_spec("--input", spec)?;
        opened.push(crate::inputs::Input::open(
            spec,
            &tensor,
            path,
            first.store(),
        )?);
    }
    crate::inputs::read_all(&opened, first.store_mut())?;
    let reports = pto_wsp::ptog::run_devices(&mut devices)
        .map_err(|e| CliError::plain(format!("{name0}: {e}")))?;
    let mut text = String::new();
    for ((name, _), r) in args.devices.iter().zip(&reports) {
        let _ = writeln!(
            text,
            "{name}: {} launch(es), {} kernel run(s), {} instance(s) in {:.3} ms ({} cube, {} \
             vector, {} AICPU cores)",
            r.launches,
            r.kernel_runs,
            r.instances,
            r.elapsed.as_secs_f64() * 1e3,
            cfg.aic,
            cfg.aiv,
            cfg.aicpu
        );
    }
    let store = devices[0].store();
    outputs.commit(|t| store.to_npy(t).map_err(|e| e.to_string()), Vec::new)?;
    Ok(text)
}

/// The arguments of `pto-wsp asm`.
#[derive(clap::Args, Debug)]
pub struct AsmArgs {
    /// The assembly text.
    pub file: PathBuf,
    /// The binary to write.
    #[arg(short = 'o', long = "out", value_name = "OUT.ptog")]
    pub out: PathBuf,
}

/// The arguments of `pto-wsp disasm`.
#[derive(clap::Args, Debug)]
pub struct DisasmArgs {
    /// The binary.
    pub file: PathBuf,
}

/// Runs `pto-wsp asm`.
pub fn asm_main(args: AsmArgs) -> anyhow::Result<ExitCode> {
    let name = args.file.display().to_string();
    print(&asm(&name, &read(&args.file)?, &args.out)?)?;
    Ok(ExitCode::SUCCESS)
}

/// Runs `pto-wsp disasm`.
pub fn disasm_main(args: DisasmArgs) -> anyhow::Result<ExitCode> {
    let name = args.file.display().to_string();
    print(&disasm(&name, &read_bytes(&args.file)?)?)?;
    Ok(ExitCode::SUCCESS)
}

/// `pto-wsp run FILE` when FILE is a task-graph program (`.ptog`, or its text `.ptoasm`):
/// runs it and returns the exit code; `None` when FILE is a module (or the main job). The
/// task-graph flags given for a module are refused.
pub fn run_main(args: &super::run::Args) -> anyhow::Result<Option<ExitCode>> {
    if let Some(f) = &args.file {
        let bytes = program_bytes(f, read_bytes(f)?)?;
        if is_binary(&bytes) {
            if args.strict {
                anyhow::bail!("--strict is for .wsp modules, not task-graph binaries");
            }
            let mut run_args = RunArgs {
                devices: vec![(f.display().to_string(), bytes)],
                seed: args.seed,
                inputs: args.inputs.clone(),
                outputs: args.outputs.clone(),
                ..Default::default()
            };
            for d in &args.devices {
                let b = program_bytes(d, read_bytes(d)?)?;
                run_args.devices.push((d.display().to_string(), b));
            }
            if let Some(k) = &args.kernels {
                run_args.kernels = Some((k.display().to_string(), read(k)?));
            }
            if let Some(c) = &args.cores {
                run_args.cores = Some(parse_cores(c)?);
            }
            print(&run(&run_args)?)?;
            return Ok(Some(ExitCode::SUCCESS));
        }
    }
    if args.kernels.is_some() || !args.devices.is_empty() || args.cores.is_some() {
        anyhow::bail!("--kernels, --device and --cores are for task-graph binaries (.ptog)");
    }
    Ok(None)
}

/// Reads a file's bytes (a task-graph binary or its text).
fn read_bytes(path: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("cannot read `{}`", path.display()))
}

/// `AIC,AIV,AICPU` of `--cores`.
fn parse_cores(spec: &str) -> anyhow::Result<[u32; 3]> {
    let parts: Vec<Result<u32, _>> = spec.split(',').map(|p| p.trim().parse::<u32>()).collect();
    match parts.as_slice() {
        [Ok(a), Ok(b), Ok(c)] => Ok([*a, *b, *c]),
        _ => anyhow::bail!("`--cores {spec}` is not `AIC,AIV,AICPU` (three counts)"),
    }
}
