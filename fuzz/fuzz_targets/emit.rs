//! Fuzz target for the emitters on arbitrary modules: the first byte chooses between a module
//! the generator builds from the remaining bytes (`common/modules.rs`: loops, ifs, calls, tasks
//! of library kernels on overlapping slices, a schedule) and the remaining bytes read as module
//! text (seeded with the examples, so kernels with tile bodies are mutated too). Whatever loads
//! is resolved once, encoded as bytecode, decoded (the decoded program disassembles and encodes
//! to the same bytes), then given to every emitter under its default bindings: the PTO-ISA C++
//! of its kernels, the Ascend tree and the task-graph ISA program (which must pass the
//! program's own decoder after encoding). Nothing may panic; refusals must render.

#![no_main]

#[path = "common/modules.rs"]
mod modules;

use libfuzzer_sys::fuzz_target;
use modules::{Choices, module_text};
use pto_wsp::bytecode::{EncodeOptions, Program, encode};
use pto_wsp::emitters::{Input, ptog};
use pto_wsp_cli::cmd::emit;

/// Library kernels for the generator's names.
const ALIASES: &str = "//@ alias inc=counter\n//@ alias acc=accumulate\n//@ alias cp=copy\n";

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let text = if mode % 2 == 0 {
        format!("{ALIASES}{}", module_text(&mut Choices(rest)))
    } else {
        match std::str::from_utf8(rest) {
            Ok(t) if t.len() <= 16_384 => t.to_string(),
            _ => return,
        }
    };
    let Ok(loaded) = pto_wsp_cli::load_source("fuzz.wsp", &text) else {
        return;
    };
    let Ok(bindings) = pto_wsp_cli::bindings_for(&loaded, &[]) else {
        return;
    };
    let Ok(plan) = pto_wsp::driver::lower(&loaded) else {
        return;
    };

    // Bytecode: encode → decode → disassemble; the decoder accepts what the encoder writes.
    if let Ok(bytes) = encode(plan.resolved(), &EncodeOptions::default()) {
        let prog = Program::decode(&bytes).expect("encoded bytecode decodes");
        let _ = prog.disassemble();
    }

    // Bounded work: the emitters below expand the entry's tasks.
    let options = pto_wsp::ir::ExpandOptions {
        limit: Some(4_000),
        executors: None,
    };
    match pto_wsp::driver::expand(&plan, &bindings, &options) {
        Ok(x) if !x.truncated => {}
        _ => return,
    }

    // The task-graph ISA program: encoded, it passes the program's own validating decoder.
    let input = Input {
        resolved: plan.resolved(),
        source: Some(&loaded.source),
        bindings: &bindings,
    };
    match ptog::lower(&input) {
        Ok(lowered) => {
            let bytes = pto_wsp::ptog::encode(&lowered.program);
            pto_wsp::ptog::decode(&bytes).expect("an emitted task-graph program decodes");
        }
        Err(e) => {
            let _ = loaded.source.render(&e);
        }
    }

    // PTO-ISA C++ and the Ascend tree, kernels naming built-ins given their library bodies.
    let Ok((with_bodies, plan)) = emit::with_library(&loaded) else {
        return;
    };
    let _ = emit::kernels(&with_bodies, &plan, &bindings);
    let _ = emit::ascend(&with_bodies, &plan, &bindings, "ascend_a2a3sim");
});
