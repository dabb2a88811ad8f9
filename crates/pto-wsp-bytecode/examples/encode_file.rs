//! Encodes a `.wsp` file's entry point and writes the bytecode: `encode_file IN.wsp OUT.ptow`
//! (used to seed the fuzz corpus).

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(input), Some(output)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: encode_file IN.wsp OUT.ptow");
        std::process::exit(2);
    };
    let text = std::fs::read_to_string(input).expect("readable input");
    let module = pto_wsp_ir::parse(&text).expect("the input parses");
    let module = pto_wsp_ir::resolve(&module, &Default::default()).expect("the input resolves");
    let bytes = pto_wsp_bytecode::encode(&module, &pto_wsp_bytecode::EncodeOptions::default())
        .expect("the module encodes");
    std::fs::write(output, bytes).expect("writable output");
}
