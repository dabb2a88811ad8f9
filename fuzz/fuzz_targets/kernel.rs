//! Fuzz target for the kernel language: arbitrary text (seeded with the kernel examples and the
//! kernel library's test module) is parsed and checked as `pto-wsp check` does (the module's
//! rules, the kernel library's diagnostics, the a2a3 device rules of every kernel), and whatever
//! passes is emitted as PTO-ISA C++ under its default bindings. Nothing may panic; every
//! refusal must render.

#![no_main]

use libfuzzer_sys::fuzz_target;
use pto_wsp_cli::cmd::emit;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let loaded = match pto_wsp_cli::load_source("kernel.wsp", text) {
        Ok(l) => l,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    for d in pto_wsp::driver::library::check(&loaded) {
        let _ = d.to_string();
    }
    let _ = pto_wsp_cli::device_check(&loaded, None).map_err(|e| e.to_string());
    let Ok(bindings) = pto_wsp_cli::bindings_for(&loaded, &[]) else {
        return;
    };
    let Ok((with_bodies, plan)) = emit::with_library(&loaded) else {
        return;
    };
    if let Ok(emitted) = emit::kernels(&with_bodies, &plan, &bindings) {
        // One file per name: nothing emitted overwrites another file of the tree.
        let mut names: Vec<&str> = emitted.files.iter().map(|(n, _)| n.as_str()).collect();
        names.sort_unstable();
        let all = names.len();
        names.dedup();
        assert_eq!(names.len(), all, "a file name emitted twice");
    }
});
