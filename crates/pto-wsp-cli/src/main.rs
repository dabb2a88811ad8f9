//! The `pto-wsp` command-line tool. STUB — to be implemented.

fn main() {
    let _ = pto_wsp::ir::parse("");
}
