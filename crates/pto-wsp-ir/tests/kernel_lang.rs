//! The kernel language (kernel bodies in PTO tile instructions): the text round-trips, bodies
//! are validated with `file:line:column` errors, and the default cycle model charges the
//! prototype's per-instruction costs (the golden figures are the C++/Python prototype's, not
//! computed by this code).

use pto_wsp_ir::kernel_body::body_cycles;
use pto_wsp_ir::{SourceFile, parse, validate};

const GOLDEN: &str = include_str!("../../../examples/kernels/cycles_golden.wsp");

fn module(src: &str) -> pto_wsp_ir::Module {
    let m = parse(src).unwrap_or_else(|e| panic!("{}", SourceFile::new("t.wsp", src).render(&e)));
    if let Err(errs) = validate(&m) {
        let f = SourceFile::new("t.wsp", src);
        panic!("{}", errs.iter().map(|e| f.render(e)).collect::<String>());
    }
    m
}

#[test]
fn kernel_bodies_print_and_parse_back_equal() {
    let m = module(GOLDEN);
    let printed = m.to_string();
    let again = parse(&printed).unwrap();
    assert_eq!(again, m);
    assert_eq!(again.to_string(), printed);
    assert!(printed.contains("    TMATMUL(acc, ta, tb);\n"), "{printed}");
}

#[test]
fn cycle_model_matches_the_prototype_figures() {
    let m = module(GOLDEN);
    let cycles = |k: &str| body_cycles(m.kernel(k).unwrap(), &[]).unwrap();
    assert_eq!(cycles("bgemm"), 5_632);
    assert_eq!(cycles("attn"), 1_680);
    assert_eq!(cycles("softmax_max"), 544);
    assert_eq!(cycles("softmax_sum"), 2_088);
    assert_eq!(cycles("softmax_norm"), 1_544);
}

#[test]
fn loops_ifs_locals_and_runtime_valid_sizes_are_costed() {
    let src = "\
tensor X: f32[8, 64];
kernel k(inout x: f32[8, 64], n: i64, on: bool) @vector {
    let half: i64 = n / 2;
    tile t: vec f32[8, 64] valid(half, 64);
    for i in range(3) {
        TLOAD(t, x, 0, 0);
    }
    if on {
        TMULS(t, t, 0.5);
    } else {
        TEXPANDS(t, -1e-6);
    }
    TSTORE(x, t);
}
workload main() { task k(X[0 +: 8, 0 +: 64], 6, true); }
";
    let m = module(src);
    let k = m.kernel("k").unwrap();
    // half = 3 valid rows x 64: 3 loads, one scalar op, one store.
    assert_eq!(body_cycles(k, &[6, 1]).unwrap(), 5 * 3 * 64);
    assert_eq!(body_cycles(k, &[4, 0]).unwrap(), 5 * 2 * 64);
    let err = body_cycles(k, &[40, 0]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "kernel `k`: tile `t`: valid 20 x 64 is outside its 8 x 64"
    );
    assert_eq!(parse(&m.to_string()).unwrap(), m);
}

fn errors(src: &str) -> String {
    let m = parse(src).unwrap();
    let f = SourceFile::new("t.wsp", src);
    match validate(&m) {
        Ok(()) => String::new(),
        Err(errs) => errs.iter().map(|e| f.render(e)).collect(),
    }
}

#[test]
fn bad_shapes_and_operands_are_errors_at_their_statement() {
    let src = "\
tensor X: f32[8, 64];
kernel k(inout x: f32[8, 64]) @vector {
    tile a: vec f32[8, 64];
    tile r: vec f32[8, 2];
    tile h: vec f16[8, 64];
    TROWSUM(r, a);
    TADD(a, a, h);
    TMATMUL(a, a, a);
    TLOAD(h, x);
    TEXP(a, nosuch);
    TADDS(a, a, 1);
}
workload main() { task k(X[0 +: 8, 0 +: 64]); }
";
    let out = errors(src);
    for needle in [
        "error: kernel `k`: TROWSUM: `a` is 8 x 64 and `r` is 8 x 2: `r` must be 8 x 1\n --> t.wsp:6:5",
        "kernel `k`: TADD: `a` is f32 but `h` is f16: operands must have the same element type\n --> t.wsp:7:5",
        "kernel `k`: TMATMUL: `a` is 8 x 64, `a` is 8 x 64 and `a` is 8 x 64: need c M x N, a M x K, b K x N\n --> t.wsp:8:5",
        "kernel `k`: TMATMUL: `a` is a vec tile, this operand must be acc",
        "kernel `k`: TLOAD: `x` holds f32 but tile `h` is f16: use TCVT on the tile\n --> t.wsp:9:5",
        "kernel `k`: TEXP operand 2: `nosuch` is not a tile declared in the body\n  --> t.wsp:10:5",
        "kernel `k`: TADDS operand 3 must be a float literal or an f32 / f64 parameter\n  --> t.wsp:11:5",
    ] {
        assert!(out.contains(needle), "missing {needle:?} in\n{out}");
    }
}

#[test]
fn unknown_instructions_are_parse_errors() {
    let e = parse("kernel k(in x: f32[8, 8]) {\n    TFOO(x);\n}\n").unwrap_err();
    assert_eq!(
        e.message,
        "unknown tile instruction `TFOO` (see docs/KERNELS.md for the list)"
    );
    assert_eq!(e.loc.start, 32);
}

#[test]
fn builder_bodies_equal_parsed_ones() {
    use pto_wsp_ir::builder::ModuleBuilder;
    use pto_wsp_ir::{Access, DType, KStmt, TileKind, TileOp};
    let text = "\
kernel neg(in x: f32[8, 8], out y: f32[8, 8]) {
    tile t: vec f32[8, 8];
    TLOAD(t, x);
    TNEG(t, t);
    TSTORE(y, t);
}
";
    let parsed = parse(text).unwrap();
    let mut b = ModuleBuilder::new();
    b.kernel("neg")
        .input("x", DType::F32, [Some(8), Some(8)])
        .tile("y", Access::Out, DType::F32, [Some(8), Some(8)])
        .body(vec![
            KStmt::tile("t", TileKind::Vec, DType::F32, 8, 8),
            KStmt::inst(TileOp::Load, &["t", "x"]),
            KStmt::inst(TileOp::Neg, &["t", "t"]),
            KStmt::inst(TileOp::Store, &["y", "t"]),
        ]);
    assert_eq!(b.finish().kernels, parsed.kernels);
}

#[test]
fn masks_and_sort_are_checked_and_costed() {
    let src = "\
tensor X: f32[4, 32];
kernel k(inout x: f32[4, 32]) @vector {
    tile t: vec f32[4, 32];
    tile s: vec f32[4, 32] valid(4, 20);
    TLOAD(t, x);
    TSORT(s, t);
    TCMP(t, t, t, GT);
    TSEL(t, t, t, t);
    TSTORE(x, t);
}
workload main() { task k(X[0 +: 4, 0 +: 32]); }
";
    let m = module(src);
    // TLOAD 128, TSORT 5 x 4 x 20, TCMP 128, TSEL 128, TSTORE 128.
    assert_eq!(
        body_cycles(m.kernel("k").unwrap(), &[]).unwrap(),
        4 * 128 + 400
    );
    let bad = src.replace("GT);", "BIGGER);");
    let out = errors(&bad);
    assert!(
        out.contains(
            "kernel `k`: TCMP operand 4 must be a comparison mode (EQ, NE, LT, LE, GT, GE)\n --> t.wsp:7:5"
        ),
        "{out}"
    );
}

#[test]
fn the_worked_example_costs_what_the_docs_say() {
    let m = module(include_str!("../../../examples/kernels/softmax.wsp"));
    let k = m.kernel("softmax_tile").unwrap();
    assert_eq!(
        body_cycles(k, &[0.125f64.to_bits()]).unwrap(),
        6 * 512 + 2 * 8
    );
    let bad = include_str!("../../../examples/kernels/softmax.wsp")
        .replace("tile m: vec f32[8, 1];", "tile m: vec f32[8, 2];");
    assert!(
        errors(&bad).contains(
            "kernel `softmax_tile`: TROWMAX: `t` is 8 x 64 and `m` is 8 x 2: `m` must be 8 x 1"
        ),
        "{}",
        errors(&bad)
    );
}
