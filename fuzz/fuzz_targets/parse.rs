//! Fuzz target for the text format: parsing never panics, errors render, and whatever parses
//! prints to text that parses back to an equal module and prints the same again.

#![no_main]

use libfuzzer_sys::fuzz_target;
use pto_wsp_ir::{SourceFile, parse};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match parse(text) {
        Ok(module) => {
            let printed = module.to_string();
            let back = parse(&printed).unwrap_or_else(|e| {
                panic!(
                    "printed module does not parse: {}\n{printed}",
                    SourceFile::new("printed.wsp", printed.as_str()).render(&e)
                )
            });
            assert_eq!(back, module, "printed:\n{printed}");
            assert_eq!(back.to_string(), printed, "printing is not idempotent");
        }
        Err(e) => {
            let _ = SourceFile::new("input.wsp", text).render(&e);
        }
    }
});
