//! Assembles a task-graph program: `cargo run -p pto-wsp-ptog --example assemble -- IN OUT`
//! writes the binary of the text in `IN` to `OUT` (used to seed the fuzzer's corpus).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, input, output] = args.as_slice() else {
        return Err("usage: assemble IN.ptoasm OUT.ptog".into());
    };
    let text = std::fs::read_to_string(input)?;
    let checked = pto_wsp_ptog::assemble(&text).map_err(|e| format!("{input}:{e}"))?;
    std::fs::write(output, pto_wsp_ptog::encode(&checked.program))?;
    Ok(())
}
