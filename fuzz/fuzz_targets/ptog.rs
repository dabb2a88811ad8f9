//! Fuzz target for the task-graph binary's validating decoder: decoding never panics; whatever
//! decodes disassembles to text that assembles back to the same program, and encodes to bytes
//! that decode to it again.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(checked) = pto_wsp_ptog::decode(data) else {
        return;
    };
    let text = pto_wsp_ptog::disassemble(&checked.program);
    let back = pto_wsp_ptog::assemble(&text)
        .unwrap_or_else(|e| panic!("the disassembly does not assemble: {e}\n{text}"));
    assert_eq!(back.program, checked.program, "{text}");
    let bytes = pto_wsp_ptog::encode(&checked.program);
    let again = pto_wsp_ptog::decode(&bytes).expect("a re-encoded program decodes");
    assert_eq!(again.program, checked.program);
});
