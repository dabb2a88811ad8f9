//! The kernel language (kernel bodies in PTO tile instructions): the text round-trips, bodies
//! are validated with `file:line:column` errors, and the default cycle model charges the
//! prototype's per-instruction costs (the golden figures are the C++/Python prototype's, not
//! computed by this code).

use pto_wsp_ir::kernel_body::body_cycles;
use pto_wsp_ir::{SourceFile, parse, validate};

const GOLDEN: &str = include_str!("../../../examples/kernels/cycles_golden.wsp");
/// The prototype's own bgemm and attention sequences (loading global memory straight into the
/// cube's operands, as the prototype did; not legal on the a2a3 device).
const PROTOTYPE: &str = include_str!("../../../test_data/kernels/prototype_cycles.wsp");

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
    let proto = module(PROTOTYPE);
    let m = module(GOLDEN);
    let cost = |m: &pto_wsp_ir::Module, k: &str| body_cycles(m.kernel(k).unwrap(), &[]).unwrap();
    // The prototype's published figures, on the sequences it ran.
    assert_eq!(cost(&proto, "bgemm"), 5_632);
    assert_eq!(cost(&proto, "attn"), 1_680);
    assert_eq!(cost(&m, "softmax_max"), 544);
    assert_eq!(cost(&m, "softmax_sum"), 2_088);
    assert_eq!(cost(&m, "softmax_norm"), 1_544);
    // The example's device-legal forms: the same sequences plus a TMOV from L1 into L0A / L0B
    // per cube operand (one element per cycle of the operand: 16 x 16 for bgemm, 8 x 8 for the
    // attention), and the attention's output stored from its accumulator instead of moved to a
    // vector tile first (one TMOV of 8 x 8 fewer).
    assert_eq!(cost(&m, "bgemm"), 5_632 + 2 * 256);
    assert_eq!(cost(&m, "attn"), 1_680 + 3 * 64 - 64);
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
        "kernel `k`: TADDS operand 3 must be a float literal, an f32 / f64 parameter or local, `inf`, `-inf`, `f32(INTEGER)` or `rsqrt(INTEGER)`\n  --> t.wsp:11:5",
        "kernel `k`: TROWSUM reads tile `a` before any instruction writes it\n --> t.wsp:6:5",
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
    tile m: vec u8[4, 32];
    tile row: vec f32[1, 32];
    tile ix: vec u32[1, 32];
    tile rec: vec f32[1, 64] valid(1, 40);
    TLOAD(t, x);
    TLOAD(row, x);
    TCI(ix, 0);
    TSORT32(rec, row, ix);
    TCMPS(m, t, 0.5, GT);
    TSEL(t, m, t, t);
    TSTORE(x, t);
}
workload main() { task k(X[0 +: 4, 0 +: 32]); }
";
    let m = module(src);
    assert_eq!(errors(src), "");
    // TLOAD 128 + 32, TCI 32, TSORT32 5 x 32, TCMPS 128, TSEL 128, TSTORE 128.
    assert_eq!(
        body_cycles(m.kernel("k").unwrap(), &[]).unwrap(),
        4 * 128 + 2 * 32 + 5 * 32
    );
    let bad = src.replace("GT);", "BIGGER);");
    let out = errors(&bad);
    assert!(
        out.contains(
            "kernel `k`: TCMPS operand 4 must be a comparison mode (EQ, NE, LT, LE, GT, GE)\n  --> t.wsp:12:5"
        ),
        "{out}"
    );
    let bad = src
        .replace("tile m: vec u8[4, 32];", "tile m: vec f32[4, 32];")
        .replace("vec f32[1, 64] valid(1, 40)", "vec f32[1, 32]");
    let out = errors(&bad);
    for needle in [
        "kernel `k`: TCMPS: mask `m` must be u8 (PTO-ISA's packed mask), not f32\n  --> t.wsp:12:5",
        "kernel `k`: TSEL: mask `m` must be u8 (PTO-ISA's packed mask), not f32",
        "kernel `k`: TSORT32: `row` is 1 x 32 and `rec` is 1 x 32: `rec` must be 1 x 64 (2 words per record)",
    ] {
        assert!(out.contains(needle), "missing {needle:?} in\n{out}");
    }
}

#[test]
fn extents_arrays_checks_and_element_reads_parse_print_and_validate() {
    let src = "\
tensor X: f32[8, 100];
tensor I: i32[8];
tensor Y: f32[8, 100];
kernel k(in x: f32[?, ?], in idx: i32[?], out y: f32[?, ?], s: f32) @vector {
    let n: i64 = (cols(x) + 63) / 64;
    check rows(x) == rows(y) && cols(x) == cols(y) else \"rows {rows(x)} vs {rows(y)}\";
    tile acc[4]: vec f32[1, 64];
    tile it: vec i32[1, 8] valid(1, cols(idx));
    TLOAD(it, idx);
    let first: i64 = GETVAL(it, 0, 0);
    for j in range(n) {
        let vc: i64 = min(64, cols(x) - j * 64);
        tile t: vec f32[1, 64] valid(1, vc);
        TLOAD(t, x, first, j * 64);
        TMAXS(t, t, -inf);
        TMINS(t, t, inf);
        TDIVS(t, t, f32(cols(x)));
        let half: f32 = rsqrt(4);
        TMULS(acc[j % 4], t, s);
        TMULS(acc[j % 4], acc[j % 4], half);
        TMUL(t, t, acc[j % 4]);
        TSTORE(y, t, 0, j * 64);
    }
}
workload main() { task k(X[0 +: 8, 0 +: 100], I[0 +: 8], Y[0 +: 8, 0 +: 100], 2.0); }
";
    assert_eq!(errors(src), "");
    let m = module(src);
    assert_eq!(parse(&m.to_string()).unwrap(), m);
    let k = m.kernel("k").unwrap();
    // rows(x) = 8, cols(x) = 100: two chunks of 64 and 36 columns (the second stores only
    // its 36 valid columns: a 64-column tile there would store past the region, an error at
    // `check`); GETVAL counts 0.
    use pto_wsp_ir::kernel_body::body_cycles_with;
    assert_eq!(
        body_cycles_with(k, &[2f64.to_bits()], &[(8, 100), (1, 8), (8, 100)]).unwrap(),
        8 + 8 * 64 + 6 * 36 + 2 * 64
    );
    for (from, to, needle) in [
        (
            "TMULS(acc[j % 4], t, s)",
            "TMULS(acc, t, s)",
            "TMULS operand 1: `acc` is an array of 4 tiles: name one, `acc[i]`",
        ),
        (
            "TLOAD(t, x, first, j * 64)",
            "TLOAD(t, x, first, j * 64);\n        TLOAD(t, x, rows(s), 0)",
            "`s` in `rows(s)` is not a tile parameter",
        ),
        (
            "{rows(y)}",
            "{nosuch}",
            "the message of `check` names {nosuch}: unknown name `nosuch`",
        ),
        (
            "GETVAL(it, 0, 0)",
            "GETVAL(acc[0], 0, 0)",
            "GETVAL: `acc[0]` is f32: GETVAL reads integer tiles",
        ),
        (
            "TDIVS(t, t, f32(cols(x)))",
            "TDIVS(t, t, f32(s))",
            "the operand of `f32` / `rsqrt`: `s` is not an integer or bool scalar",
        ),
    ] {
        let bad = src.replace(from, to);
        let out = errors(&bad);
        assert!(out.contains(needle), "missing {needle:?} in\n{out}");
    }
}

#[test]
fn reads_before_writes_and_loads_past_the_declared_region_are_errors() {
    let src = "\
tensor X: f32[8, 64];
kernel k(inout x: f32[8, 64]) @vector {
    tile a: vec f32[16, 64];
    tile b: vec f32[8, 64];
    for i in range(2) {
        TADD(b, b, b);
        TLOAD(b, x);
    }
    if true { TLOAD(a, x); } else { TEXPANDS(b, 0.0); }
    TSTORE(x, b);
    TSTORE(x, a, 0, 8);
}
workload main() { task k(X[0 +: 8, 0 +: 64]); }
";
    let out = errors(src);
    for needle in [
        "kernel `k`: TADD reads tile `b` before any instruction writes it\n --> t.wsp:6:9",
        "kernel `k`: TLOAD: tile `a` loads 16 x 64 at (0, 0), outside `x`, declared 8 x 64 (rows x cols)\n --> t.wsp:9:15",
        "kernel `k`: TSTORE: tile `a` stores 16 x 64 at (0, 8), outside `x`, declared 8 x 64 (rows x cols)",
    ] {
        assert!(out.contains(needle), "missing {needle:?} in\n{out}");
    }
    // Written on one branch (or in an earlier loop iteration) is not an error.
    assert!(!out.contains("TSTORE reads"), "{out}");
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
