//! Validator tests: one per kind of mistake, each a `.wsp` snippet whose rendered errors are
//! compared in full (message, position, caret, label, path note); plus valid modules of every
//! example shape that must validate cleanly, and built (text-less) modules.

use pto_wsp_ir::{SourceFile, parse, validate};

/// Parses and validates `src`, rendering every error as the CLI would.
fn render_errors(src: &str) -> String {
    let file = SourceFile::new("t.wsp", src);
    let module = match parse(src) {
        Ok(m) => m,
        Err(e) => panic!("snippet does not parse:\n{}", file.render(&e)),
    };
    match validate(&module) {
        Ok(()) => String::new(),
        Err(errors) => errors.iter().map(|e| file.render(e)).collect(),
    }
}

/// Asserts that `src` renders exactly `expected` (a leading newline is ignored).
#[track_caller]
fn check(src: &str, expected: &str) {
    let actual = render_errors(src);
    let expected = expected.strip_prefix('\n').unwrap_or(expected);
    assert!(
        actual == expected,
        "rendered errors differ\n--- expected\n{expected}--- actual\n<<<ACTUAL\n{actual}ACTUAL>>>"
    );
}

/// Asserts that `src` validates without errors.
#[track_caller]
fn valid(src: &str) {
    let actual = render_errors(src);
    assert!(actual.is_empty(), "expected no errors, got:\n{actual}");
}

// ---------------------------------------------------------------------------------------------
// Names and declarations

#[test]
fn duplicate_declaration() {
    check(
        "\
symbol n: i64;
tensor n: f16[4];
workload main() { }
",
        r#"
error: tensor `n` is already declared as a symbol
 --> t.wsp:2:8
  |
2 | tensor n: f16[4];
  |        ^ declared twice
  = note: in tensor n
"#,
    );
}

#[test]
fn duplicate_parameter() {
    check(
        "\
kernel k(x: i64, x: i64);
workload main() { }
",
        r#"
error: kernel `k` has two parameters named `x`
 --> t.wsp:1:18
  |
1 | kernel k(x: i64, x: i64);
  |                  ^ duplicate parameter
  = note: in kernel k > parameter x
"#,
    );
}

#[test]
fn unknown_name() {
    check(
        "\
kernel k(n: i64);
workload main() { task k(m); }
",
        r#"
error: unknown name `m`
 --> t.wsp:2:26
  |
2 | workload main() { task k(m); }
  |                          ^ not declared or bound here
  = note: in workload main > task k > argument 1
"#,
    );
}

#[test]
fn unknown_slot() {
    check(
        "workload main() { set s = 1; }\n",
        r#"
error: unknown slot `s`
 --> t.wsp:1:23
  |
1 | workload main() { set s = 1; }
  |                       ^ no such slot
  = note: in workload main > set s
"#,
    );
}

#[test]
fn unknown_tensor() {
    check(
        "\
kernel k(in a: f16[4]);
workload main() { task k(A[0 +: 4]); }
",
        r#"
error: unknown tensor `A`
 --> t.wsp:2:26
  |
2 | workload main() { task k(A[0 +: 4]); }
  |                          ^ no such tensor
  = note: in workload main > task k > argument 1
"#,
    );
}

#[test]
fn unknown_axis() {
    check(
        "workload main() { parallel_for i in B { } }\n",
        r#"
error: unknown axis `B`
 --> t.wsp:1:37
  |
1 | workload main() { parallel_for i in B { } }
  |                                     ^ no such axis
  = note: in workload main > parallel_for i
"#,
    );
}

#[test]
fn unknown_kernel() {
    check(
        "\
kernel attn(n: i64);
workload main() { task atn(1); }
",
        r#"
error: unknown kernel `atn`
 --> t.wsp:2:24
  |
2 | workload main() { task atn(1); }
  |                        ^^^ no such kernel
  = note: in workload main > task atn
"#,
    );
}

#[test]
fn unknown_workload() {
    check(
        "workload main() { call layer(); }\n",
        r#"
error: unknown workload `layer`
 --> t.wsp:1:24
  |
1 | workload main() { call layer(); }
  |                        ^^^^^ no such workload
  = note: in workload main > call layer
"#,
    );
}

#[test]
fn unknown_channel() {
    check(
        "\
pipeline p {
    channel c[2];
    process a(produces c) { send d(1); }
    process b(consumes c) { }
}
",
        r#"
error: unknown channel `d` in pipeline `p`
 --> t.wsp:3:34
  |
3 |     process a(produces c) { send d(1); }
  |                                  ^ no such channel
  = note: in pipeline p > process a > send d
"#,
    );
}

#[test]
fn unknown_schedule_target() {
    check(
        "\
workload main() { }
schedule for mian { stream_by h; }
",
        r#"
error: schedule target `mian` is not declared
 --> t.wsp:2:14
  |
2 | schedule for mian { stream_by h; }
  |              ^^^^ no such workload or pipeline
  = note: in schedule for mian
"#,
    );
}

#[test]
fn wrong_kind() {
    check(
        "\
tensor Q: f16[4];
workload main() { parallel_for i in Q { } }
",
        r#"
error: `Q` is a tensor, not an axis
 --> t.wsp:2:37
  |
2 | workload main() { parallel_for i in Q { } }
  |                                     ^ wrong kind of name
  = note: in workload main > parallel_for i
"#,
    );
}

#[test]
fn name_not_allowed_in_tensor_dimension() {
    check(
        "\
slot kv: i64;
tensor K: f16[kv, 128];
workload main() { }
",
        r#"
error: dimension 0 of tensor `K` may name only symbols, but names slot `kv`
 --> t.wsp:2:15
  |
2 | tensor K: f16[kv, 128];
  |               ^^ not allowed here
  = note: in tensor K > dimension 0
"#,
    );
}

#[test]
fn name_not_allowed_in_dense_extent() {
    check(
        "\
symbol seq: i64;
axis T = dense(seq);
workload main() { }
",
        r#"
error: the extent of dense axis `T` must be a constant, but names symbol `seq`
 --> t.wsp:2:16
  |
2 | axis T = dense(seq);
  |                ^^^ not allowed here
  = note: in axis T
"#,
    );
}

#[test]
fn name_not_allowed_in_tier_condition() {
    check(
        "\
slot s: i64;
kernel small(n: i64);
kernel big(n: i64);
kernel k(n: i64) tiers { n < s => small, else => big };
workload main() { task k(1); }
",
        r#"
error: tier case 1 of kernel `k` may name only the kernel's scalar parameters and symbols, but names slot `s`
 --> t.wsp:4:30
  |
4 | kernel k(n: i64) tiers { n < s => small, else => big };
  |                              ^ not allowed here
  = note: in kernel k > tiers > case 1
"#,
    );
}

#[test]
fn shadowing() {
    check(
        "\
symbol h: i64;
axis H = dense(4);
workload main() { parallel_for h in H { } }
",
        r#"
error: loop variable `h` shadows a symbol of the same name
 --> t.wsp:3:32
  |
3 | workload main() { parallel_for h in H { } }
  |                                ^ shadows another name
  = note: in workload main > parallel_for h
"#,
    );
}

#[test]
fn shadowing_an_enclosing_loop_variable() {
    check(
        "\
axis H = dense(4);
workload main() {
    parallel_for h in H {
        for_each h in H { }
    }
}
",
        r#"
error: loop variable `h` shadows a loop variable of the same name
 --> t.wsp:4:18
  |
4 |         for_each h in H { }
  |                  ^ shadows another name
  = note: in workload main > parallel_for h > for_each h
"#,
    );
}

// ---------------------------------------------------------------------------------------------
// Arity and axes

#[test]
fn task_arity() {
    check(
        "\
tensor Q: f16[64, 128];
tensor O: f16[64, 128];
kernel attn(in q: f16[64, 128], in k: f16[64, 128], out o: f16[64, 128], n: i64);
workload main() { task attn(Q[0 +: 64, 0 +: 128], O[0 +: 64, 0 +: 128], 3); }
",
        r#"
error: kernel `attn` takes 4 arguments, task passes 3
 --> t.wsp:4:24
  |
4 | workload main() { task attn(Q[0 +: 64, 0 +: 128], O[0 +: 64, 0 +: 128], 3); }
  |                        ^^^^ wrong number of arguments
  = note: in workload main > task attn
"#,
    );
}

#[test]
fn call_arity() {
    check(
        "\
workload layer(n: i64, m: i64) { }
workload main() { call layer(1); }
",
        r#"
error: workload `layer` takes 2 arguments, call passes 1
 --> t.wsp:2:24
  |
2 | workload main() { call layer(1); }
  |                        ^^^^^ wrong number of arguments
  = note: in workload main > call layer
"#,
    );
}

#[test]
fn loop_var_count() {
    check(
        "\
symbol n: i64;
tensor L: i32[n];
axis R = ragged(n, L);
workload main() { parallel_for r in R { } }
",
        r#"
error: `parallel_for` over ragged axis `R` binds 2 variables, found 1
 --> t.wsp:4:37
  |
4 | workload main() { parallel_for r in R { } }
  |                                     ^ wrong number of loop variables
  = note: in workload main > parallel_for r
"#,
    );
}

#[test]
fn select_var_count() {
    check(
        "\
symbol n: i64;
symbol nnz: i64;
tensor P: i32[n + 1];
tensor I: i32[nnz];
axis S = sparse(n, P, I);
workload main() { select r in S { } }
",
        r#"
error: `select` over sparse axis `S` binds 2 variables, found 1
 --> t.wsp:6:31
  |
6 | workload main() { select r in S { } }
  |                               ^ wrong number of loop variables
  = note: in workload main > select r
"#,
    );
}

#[test]
fn loop_over_sparse() {
    check(
        "\
symbol n: i64;
symbol nnz: i64;
tensor P: i32[n + 1];
tensor I: i32[nnz];
axis S = sparse(n, P, I);
workload main() { for_each r, i in S { } }
",
        r#"
error: `for_each` cannot range over sparse axis `S`; use `select`
 --> t.wsp:6:36
  |
6 | workload main() { for_each r, i in S { } }
  |                                    ^ sparse axis
  = note: in workload main > for_each r, i
"#,
    );
}

#[test]
fn select_needs_sparse() {
    check(
        "\
axis B = dense(4);
workload main() { select b, e in B { } }
",
        r#"
error: `select` needs a sparse axis, `B` is dense
 --> t.wsp:2:34
  |
2 | workload main() { select b, e in B { } }
  |                                  ^ not a sparse axis
  = note: in workload main > select b, e
"#,
    );
}

// ---------------------------------------------------------------------------------------------
// Tasks and regions

const KERNELS: &str = "\
symbol seq: i64;
tensor Q: f16[seq, 4096, 2];
tensor X: f32[seq, 4096];
tensor W: f16[seq, 4096];
kernel attn(in q: f16[32, 64], n: i64);
";

fn with_kernels(body: &str) -> String {
    format!("{KERNELS}workload main() {{\n{body}\n}}\n")
}

#[test]
fn region_rank() {
    check(
        &with_kernels("    task attn(Q[0 +: 32, 0 +: 64], 1);"),
        r#"
error: region of `Q` has 2 dimensions, tensor `Q` has 3
 --> t.wsp:7:15
  |
7 |     task attn(Q[0 +: 32, 0 +: 64], 1);
  |               ^ wrong number of dimensions
  = note: in workload main > task attn > argument 1
"#,
    );
}

#[test]
fn region_for_scalar() {
    check(
        &with_kernels("    task attn(W[0 +: 32, 0 +: 64], W[0, 0]);"),
        r#"
error: argument 2 of `attn` is scalar parameter `n: i64`, but a region is passed
 --> t.wsp:7:36
  |
7 |     task attn(W[0 +: 32, 0 +: 64], W[0, 0]);
  |                                    ^ region for a scalar parameter
  = note: in workload main > task attn > argument 2
"#,
    );
}

#[test]
fn expression_for_tile() {
    check(
        &with_kernels("    task attn(seq, 1);"),
        r#"
error: argument 1 of `attn` is tile parameter `in q: f16[32, 64]`, but an expression is passed
 --> t.wsp:7:15
  |
7 |     task attn(seq, 1);
  |               ^^^ expression for a tile parameter
  = note: in workload main > task attn > argument 1
"#,
    );
}

#[test]
fn dtype_mismatch() {
    check(
        &with_kernels("    task attn(X[0 +: 32, 0 +: 64], 1);"),
        r#"
error: argument 1 of `attn` (`q`) needs a tensor of element type f16, `X` is f32
 --> t.wsp:7:15
  |
7 |     task attn(X[0 +: 32, 0 +: 64], 1);
  |               ^ wrong element type
  = note: in workload main > task attn > argument 1
"#,
    );
}

#[test]
fn tile_rank() {
    check(
        "\
tensor V: f16[64];
kernel k(in q: f16[32, 64]);
workload main() { task k(V[0 +: 64]); }
",
        r#"
error: tile parameter `q` of `k` has 2 dimensions, region of `V` has 1 (tiles match regions from the right, unit dimensions may be left out; this region fits a tile `f16[64]`)
 --> t.wsp:3:26
  |
3 | workload main() { task k(V[0 +: 64]); }
  |                          ^ too few dimensions for the tile
  = note: in workload main > task k > argument 1
"#,
    );
}

#[test]
fn tile_shape_mismatch() {
    check(
        &with_kernels("    task attn(W[0 +: 32, 0 +: 128], 1);"),
        r#"
error: region of `W` has size 128 in dimension 1, tile parameter `q` of `attn` expects 64 (tiles match regions from the right, unit dimensions may be left out; this region fits a tile `f16[32, 128]`)
 --> t.wsp:7:15
  |
7 |     task attn(W[0 +: 32, 0 +: 128], 1);
  |               ^ size differs from the tile
  = note: in workload main > task attn > argument 1
"#,
    );
}

/// A tile fits a region with the unit dimensions of both left out (the region's natural
/// shape), as well as matched from the right as written.
#[test]
fn tile_matches_region_with_unit_dimensions_left_out() {
    let src = "\
symbol seq: i64;
tensor K: f32[4, seq, 8, 128];
kernel k(in t: f32[512, 128]);
kernel k3(in t: f32[512, 1, 128]);
kernel k4(in t: f32[1, 1, 512, 128]);
workload main() {
    task k(K[1, 512 +: 512, 3, 0 +: 128]);
    task k3(K[1, 512 +: 512, 3, 0 +: 128]);
    task k4(K[1, 512 +: 512, 3, 0 +: 128]);
    task k(K[0 +: 1, 0 +: 512, 0 +: 1, 0 +: 128]);
}
";
    valid(src);
    // Unit dimensions are dropped, other sizes still have to agree, and the error says the rule
    // and the shape that fits.
    check(
        "\
symbol seq: i64;
tensor K: f32[4, seq, 8, 128];
kernel k(in t: f32[256, 128]);
workload main() { task k(K[1, 512 +: 512, 3, 0 +: 128]); }
",
        r#"
error: region of `K` has size 512 in dimension 1, tile parameter `t` of `k` expects 256 (tiles match regions from the right, unit dimensions may be left out; this region fits a tile `f32[512, 128]`)
 --> t.wsp:4:26
  |
4 | workload main() { task k(K[1, 512 +: 512, 3, 0 +: 128]); }
  |                          ^ size differs from the tile
  = note: in workload main > task k > argument 1
"#,
    );
}

#[test]
fn region_out_of_bounds() {
    check(
        &with_kernels("    task attn(W[0 +: 32, 4064 +: 64], 1);"),
        r#"
error: region of `W` is outside its static shape in dimension 1: 4064 +: 64 exceeds 4096
 --> t.wsp:7:15
  |
7 |     task attn(W[0 +: 32, 4064 +: 64], 1);
  |               ^ out of bounds
  = note: in workload main > task attn > argument 1
"#,
    );
}

#[test]
fn negative_region_start() {
    check(
        &with_kernels("    task attn(W[-32 +: 32, 0 +: 64], 1);"),
        r#"
error: region of `W` starts at -32 in dimension 0; starts must be at least 0
 --> t.wsp:7:15
  |
7 |     task attn(W[-32 +: 32, 0 +: 64], 1);
  |               ^ negative start
  = note: in workload main > task attn > argument 1
"#,
    );
}

#[test]
fn bad_region_size() {
    check(
        "\
tensor V: f16[64];
kernel k(in q: f16[?]);
workload main() { task k(V[0 +: 0]); }
",
        r#"
error: region of `V` has size 0 in dimension 0; sizes must be at least 1
 --> t.wsp:3:26
  |
3 | workload main() { task k(V[0 +: 0]); }
  |                          ^ empty or negative size
  = note: in workload main > task k > argument 1
"#,
    );
}

// ---------------------------------------------------------------------------------------------
// Types

#[test]
fn operand_type() {
    check(
        "\
symbol n: i64;
workload main() { if n + true > 1 { } }
",
        r#"
error: operator `+` needs integer operands, found bool
 --> t.wsp:2:19
  |
2 | workload main() { if n + true > 1 { } }
  |                   ^^^^^^^^^^^^^^^^^^^ wrong operand type
  = note: in workload main > if
"#,
    );
}

#[test]
fn operand_mismatch() {
    check(
        "\
symbol n: i64;
workload main() { if n < 1u { } }
",
        r#"
error: operands of `<` have different types: i64 and u64
 --> t.wsp:2:22
  |
2 | workload main() { if n < 1u { } }
  |                      ^ mismatched types
  = note: in workload main > if
"#,
    );
}

#[test]
fn expression_type() {
    check(
        "\
symbol n: i64;
workload main() { if n { } }
",
        r#"
error: the condition of `if` must be bool, found i64
 --> t.wsp:2:22
  |
2 | workload main() { if n { } }
  |                      ^ wrong type
  = note: in workload main > if
"#,
    );
}

#[test]
fn scalar_argument_type() {
    check(
        &with_kernels("    task attn(W[0 +: 32, 0 +: 64], seq > 0);"),
        r#"
error: argument 2 of `attn` (`n: i64`) must be i64, found bool
 --> t.wsp:7:36
  |
7 |     task attn(W[0 +: 32, 0 +: 64], seq > 0);
  |                                    ^^^ wrong type
  = note: in workload main > task attn > argument 2
"#,
    );
}

#[test]
fn array_tensor() {
    check(
        "\
symbol n: i64;
tensor L: f16[n];
axis R = ragged(n, L);
workload main() { }
",
        r#"
error: the lengths tensor of axis `R` must be a 1-D integer tensor, `L` is f16 with 1 dimension
 --> t.wsp:3:20
  |
3 | axis R = ragged(n, L);
  |                    ^ not a 1-D integer tensor
  = note: in axis R > lengths
"#,
    );
}

#[test]
fn negative_extent() {
    check(
        "\
axis H = dense(-4);
workload main() { }
",
        r#"
error: the extent of dense axis `H` is negative: -4
 --> t.wsp:1:6
  |
1 | axis H = dense(-4);
  |      ^ negative
  = note: in axis H
"#,
    );
}

// ---------------------------------------------------------------------------------------------
// Tiers

#[test]
fn empty_tiers() {
    check(
        "\
kernel big(n: i64);
kernel k(n: i64) tiers { else => big };
workload main() { task k(1); }
",
        r#"
error: kernel `k` has tiers with no cases; it needs at least one `COND => VARIANT`
 --> t.wsp:2:8
  |
2 | kernel k(n: i64) tiers { else => big };
  |        ^ no tier cases
  = note: in kernel k > tiers
"#,
    );
}

#[test]
fn nested_tiers() {
    check(
        "\
kernel a(n: i64);
kernel b(n: i64) tiers { n < 4 => a, else => a };
kernel k(n: i64) tiers { n < 2 => b, else => a };
workload main() { task k(1); }
",
        r#"
error: tier variant `b` of `k` has tiers of its own
 --> t.wsp:3:35
  |
3 | kernel k(n: i64) tiers { n < 2 => b, else => a };
  |                                   ^ nested tiers
  = note: in kernel k > tiers > case 1
"#,
    );
}

#[test]
fn tier_param_count() {
    check(
        "\
kernel a(n: i64, m: i64);
kernel b(n: i64);
kernel k(n: i64) tiers { n < 2 => a, else => b };
workload main() { task k(1); }
",
        r#"
error: tier variant `a` takes 2 parameters, `k` takes 1
 --> t.wsp:3:35
  |
3 | kernel k(n: i64) tiers { n < 2 => a, else => b };
  |                                   ^ different parameter list
  = note: in kernel k > tiers > case 1
"#,
    );
}

#[test]
fn tier_param_mismatch() {
    check(
        "\
kernel a(n: u64);
kernel b(n: i64);
kernel k(n: i64) tiers { n < 2 => a, else => b };
workload main() { task k(1); }
",
        r#"
error: parameter 1 of tier variant `a` is `n: u64`, `k` declares `n: i64`
 --> t.wsp:3:35
  |
3 | kernel k(n: i64) tiers { n < 2 => a, else => b };
  |                                   ^ different parameter
  = note: in kernel k > tiers > case 1
"#,
    );
}

#[test]
fn tier_writes_in_param() {
    check(
        "\
kernel a(out q: f16[32], n: i64);
kernel b(in q: f16[32], n: i64);
kernel k(in q: f16[32], n: i64) tiers { n < 2 => a, else => b };
workload main() { }
",
        r#"
error: argument 1 of `k` is `in`; tier variant `a` declares it `out` and would write to it
 --> t.wsp:3:50
  |
3 | kernel k(in q: f16[32], n: i64) tiers { n < 2 => a, else => b };
  |                                                  ^ writes an `in` parameter
  = note: in kernel k > tiers > case 1
"#,
    );
}

// ---------------------------------------------------------------------------------------------
// Slots

#[test]
fn write_to_read_only() {
    check(
        "\
symbol n: i64;
workload main() { set n = 1; }
",
        r#"
error: `set` cannot write `n`: it is a symbol, which is read-only; only slots can be written
 --> t.wsp:2:23
  |
2 | workload main() { set n = 1; }
  |                       ^ read-only name
  = note: in workload main > set n
"#,
    );
}

#[test]
fn set_type() {
    check(
        "\
slot s: u64;
workload main() { set s = 1; }
",
        r#"
error: the value of `set s` must be u64, found i64
 --> t.wsp:2:19
  |
2 | workload main() { set s = 1; }
  |                   ^^^^^^^^^^ wrong type
  = note: in workload main > set s
"#,
    );
}

#[test]
fn load_slot_not_integer() {
    check(
        "\
slot flag: bool;
tensor L: i32[8];
workload main() { load flag = L[0]; }
",
        r#"
error: `load` target slot `flag` is bool; it must be an integer slot
 --> t.wsp:3:24
  |
3 | workload main() { load flag = L[0]; }
  |                        ^^^^ not an integer slot
  = note: in workload main > load flag
"#,
    );
}

#[test]
fn load_tensor_not_integer() {
    check(
        "\
slot s: i64;
tensor L: f32[8];
workload main() { load s = L[0]; }
",
        r#"
error: `load` reads tensor `L` of element type f32; it must be an integer tensor
 --> t.wsp:3:28
  |
3 | workload main() { load s = L[0]; }
  |                            ^ not an integer tensor
  = note: in workload main > load s
"#,
    );
}

#[test]
fn load_index_count() {
    check(
        "\
slot s: i64;
tensor L: i32[8, 8];
workload main() { load s = L[0]; }
",
        r#"
error: `load` indexes tensor `L` with 1 index, it has 2 dimensions
 --> t.wsp:3:28
  |
3 | workload main() { load s = L[0]; }
  |                            ^ wrong number of indices
  = note: in workload main > load s
"#,
    );
}

// ---------------------------------------------------------------------------------------------
// Calls and CSP

#[test]
fn recursive_call() {
    check(
        "\
workload main() { call layer(); }
workload layer() { call main(); }
",
        r#"
error: recursion through calls: main -> layer -> main
 --> t.wsp:2:25
  |
2 | workload layer() { call main(); }
  |                         ^^^^ closes a call cycle
  = note: in workload layer > call main
"#,
    );
}

#[test]
fn csp_outside_process() {
    check(
        "workload main() { send c(1); }\n",
        r#"
error: `send c` is outside a process; `send` and `consume` are allowed only in pipeline processes
 --> t.wsp:1:24
  |
1 | workload main() { send c(1); }
  |                        ^ outside a process
  = note: in workload main > send c
"#,
    );
}

#[test]
fn channel_not_listed() {
    check(
        "\
pipeline p {
    channel c[2];
    process a(produces c) { send c(1); }
    process b(consumes c) { send c(2); }
}
",
        r#"
error: `send` on channel `c`, which process `b` does not list in `produces`
 --> t.wsp:4:34
  |
4 |     process b(consumes c) { send c(2); }
  |                                  ^ channel not listed
  = note: in pipeline p > process b > send c
"#,
    );
}

#[test]
fn channel_endpoint_count() {
    check(
        "\
pipeline p {
    channel c[2];
    process a(produces c) { }
    process b(produces c) { }
}
",
        r#"
error: channel `c` has 2 producers; it needs exactly one
 --> t.wsp:2:13
  |
2 |     channel c[2];
  |             ^ needs exactly one
  = note: in pipeline p > channel c
error: channel `c` has 0 consumers; it needs exactly one
 --> t.wsp:2:13
  |
2 |     channel c[2];
  |             ^ needs exactly one
  = note: in pipeline p > channel c
"#,
    );
}

#[test]
fn zero_channel_depth() {
    check(
        "\
pipeline p {
    channel c[0];
    process a(produces c) { send c(1); }
    process b(consumes c) { consume c as v { } }
}
",
        r#"
error: the depth of channel `c` is 0; it must be at least 1
 --> t.wsp:2:13
  |
2 |     channel c[0];
  |             ^ zero
  = note: in pipeline p > channel c
"#,
    );
}

// ---------------------------------------------------------------------------------------------
// Entry and schedule

#[test]
fn no_entry() {
    check(
        "\
workload a() { }
workload b() { }
",
        r#"
error: no entry point: no schedule, no workload `main`, and 2 workloads and 0 pipelines (need exactly one)
 --> t.wsp
  = note: in module
"#,
    );
}

#[test]
fn entry_has_params() {
    check(
        "workload main(n: i64) { }\n",
        r#"
error: entry workload `main` has parameters, which nothing binds
 --> t.wsp:1:10
  |
1 | workload main(n: i64) { }
  |          ^^^^ entry with parameters
  = note: in workload main
"#,
    );
}

#[test]
fn zero_task_window() {
    check(
        "\
workload main() { }
schedule for main { task_window 0 stall; }
",
        r#"
error: `task_window` is 0; it must be at least 1
 --> t.wsp:2:21
  |
2 | schedule for main { task_window 0 stall; }
  |                     ^^^^^^^^^^^^^^^^^^^^ zero
  = note: in schedule for main > task_window
"#,
    );
}

#[test]
fn zero_schedule_values() {
    check(
        "\
workload main() { }
schedule for main {
    executors 0;
    dispatch round_robin(0);
    streams 0;
    timing batched(0);
    task_graph { start threshold(0); }
    pipeline_depth 0 global;
    batch_deps 0;
}
",
        r#"
error: `executors` is 0; it must be at least 1
 --> t.wsp:3:5
  |
3 |     executors 0;
  |     ^^^^^^^^^^^^ zero
  = note: in schedule for main > executors
error: the executor count of `round_robin` is 0; it must be at least 1
 --> t.wsp:4:5
  |
4 |     dispatch round_robin(0);
  |     ^^^^^^^^^^^^^^^^^^^^^^^^ zero
  = note: in schedule for main > dispatch
error: `streams` is 0; it must be at least 1
 --> t.wsp:5:5
  |
5 |     streams 0;
  |     ^^^^^^^^^^ zero
  = note: in schedule for main > streams
error: the batch size of `batched` is 0; it must be at least 1
 --> t.wsp:6:5
  |
6 |     timing batched(0);
  |     ^^^^^^^^^^^^^^^^^^ zero
  = note: in schedule for main > timing
error: the task count of `start threshold` is 0; it must be at least 1
 --> t.wsp:7:5
  |
7 |     task_graph { start threshold(0); }
  |     ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^ zero
  = note: in schedule for main > task_graph > start
error: `pipeline_depth` is 0; it must be at least 1
 --> t.wsp:8:5
  |
8 |     pipeline_depth 0 global;
  |     ^^^^^^^^^^^^^^^^^^^^^^^^ zero
  = note: in schedule for main > pipeline_depth
error: `batch_deps` is 0; it must be at least 1
 --> t.wsp:9:5
  |
9 |     batch_deps 0;
  |     ^^^^^^^^^^^^^ zero
  = note: in schedule for main > batch_deps
"#,
    );
}

#[test]
fn duplicate_schedule_item() {
    check(
        "\
workload main() { }
schedule for main {
    streams 2;
    task_graph { deps exact; deps overlap; }
    streams 4;
}
",
        r#"
error: `deps` appears twice in `task_graph`
 --> t.wsp:4:5
  |
4 |     task_graph { deps exact; deps overlap; }
  |     ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^ duplicate item
  = note: in schedule for main > task_graph > deps
error: `streams` appears twice in the schedule
 --> t.wsp:5:5
  |
5 |     streams 4;
  |     ^^^^^^^^^^ duplicate item
  = note: in schedule for main > streams
"#,
    );
}

#[test]
fn static_partition_start() {
    check(
        "\
workload main() { }
schedule for main { dispatch static_partition(4, 8); }
",
        r#"
error: `static_partition` must start at 0, not 4
 --> t.wsp:2:21
  |
2 | schedule for main { dispatch static_partition(4, 8); }
  |                     ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^ first start is not 0
  = note: in schedule for main > dispatch
"#,
    );
}

#[test]
fn static_partition_order() {
    check(
        "\
workload main() { }
schedule for main { dispatch static_partition(0, 8, 8); }
",
        r#"
error: `static_partition` starts must strictly increase: 8 after 8
 --> t.wsp:2:21
  |
2 | schedule for main { dispatch static_partition(0, 8, 8); }
  |                     ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^ not increasing
  = note: in schedule for main > dispatch
"#,
    );
}

#[test]
fn partition_executors() {
    check(
        "\
workload main() { }
schedule for main {
    executors 4;
    dispatch static_partition(0, 8, 16);
}
",
        r#"
error: `static_partition` has 3 starts but `executors` is 4
 --> t.wsp:4:5
  |
4 |     dispatch static_partition(0, 8, 16);
  |     ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^ length differs from `executors`
  = note: in schedule for main > dispatch
"#,
    );
}

#[test]
fn level_order() {
    check(
        "\
symbol n: i64;
workload main() { }
schedule for main {
    dispatch threshold(n) { below 8: round_robin(2), below 4: work_steal, else: work_steal };
}
",
        r#"
error: levels of `threshold` must strictly increase: `below 4` after `below 8`
 --> t.wsp:4:5
  |
4 |     dispatch threshold(n) { below 8: round_robin(2), below 4: work_steal, else: work_steal };
  |     ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^ not increasing
  = note: in schedule for main > dispatch > threshold
"#,
    );
}

#[test]
fn not_bound_at_every_task() {
    check(
        "\
axis H = dense(4);
kernel proj();
kernel attn(h: i64);
workload main() {
    parallel_for h in H { task attn(h); }
    call tail();
}
workload tail() {
    sequential { task proj(); }
}
schedule for main { stream_by h; }
",
        r#"
error: `stream_by` names `h`, which is not bound at task `proj` (workload main > call tail > sequential > task proj)
  --> t.wsp:11:31
   |
11 | schedule for main { stream_by h; }
   |                               ^ not bound at every task
   = note: in schedule for main > stream_by
"#,
    );
}

#[test]
fn schedule_name_bound_nowhere() {
    check(
        "\
kernel proj();
workload main() { task proj(); }
schedule for main { dispatch affinity(q); }
",
        r#"
error: `affinity` names `q`, which is not bound at task `proj` (workload main > task proj)
 --> t.wsp:3:39
  |
3 | schedule for main { dispatch affinity(q); }
  |                                       ^ not bound at every task
  = note: in schedule for main > dispatch
"#,
    );
}

#[test]
fn schedule_expression_type() {
    check(
        "\
symbol flag: bool;
workload main() { }
schedule for main { task_graph { ready priority(flag); } }
",
        r#"
error: the expression of `priority` must be an integer (i64 or u64), found bool
 --> t.wsp:3:49
  |
3 | schedule for main { task_graph { ready priority(flag); } }
  |                                                 ^^^^ wrong type
  = note: in schedule for main > task_graph > ready
"#,
    );
}

// ---------------------------------------------------------------------------------------------
// Many mistakes at once

#[test]
fn every_mistake_is_reported_in_source_order() {
    check(
        "\
kernel k(n: i64);
workload main() {
    task k(true);
    task kk(1);
}
tensor T: f16[-1];
",
        r#"
error: argument 1 of `k` (`n: i64`) must be i64, found bool
 --> t.wsp:3:5
  |
3 |     task k(true);
  |     ^^^^^^^^^^^^^ wrong type
  = note: in workload main > task k > argument 1
error: unknown kernel `kk`
 --> t.wsp:4:10
  |
4 |     task kk(1);
  |          ^^ no such kernel
  = note: in workload main > task kk
error: dimension 0 of tensor `T` is negative: -1
 --> t.wsp:6:8
  |
6 | tensor T: f16[-1];
  |        ^ negative
  = note: in tensor T > dimension 0
"#,
    );
}

// ---------------------------------------------------------------------------------------------
// Valid modules of every example shape

const VALID_ATTENTION: &str = "\
symbol seq: i64;
tensor Q: f16[seq, 4096];
tensor O: f16[seq, 4096];
axis T = dense_dyn(seq / 32);
axis H = dense(32);
kernel attn(in q: f16[32, 128], out o: f16[32, 128]) @vector;
workload main() {
    parallel_for t in T {
        parallel_for h in H {
            task attn(Q[t * 32 +: 32, h * 128 +: 128], O[t * 32 +: 32, h * 128 +: 128]);
        }
    }
}
schedule for main {
    dispatch affinity(h);
    task_graph {
        deps exact;
        ready work_steal;
    }
}
";

#[test]
fn valid_attention() {
    valid(VALID_ATTENTION);
}

const VALID_GEMM_WITH_FOR_EACH: &str = "\
symbol M: i64;
symbol N: i64;
tensor A: f16[M, 4096];
tensor B: f16[4096, N];
tensor C: f32[M, N];
axis MT = dense_dyn(M / 128);
axis NT = dense_dyn(N / 128);
axis KT = dense(4096 / 128);
kernel gemm(in a: f16[128, 128], in b: f16[128, 128], inout c: f32[128, 128]) @cube;
workload gemm_tiled() {
    parallel_for m in MT {
        parallel_for n in NT {
            for_each k in KT {
                task gemm(A[m * 128 +: 128, k * 128 +: 128], B[k * 128 +: 128, n * 128 +: 128], C[m * 128 +: 128, n * 128 +: 128]);
            }
        }
    }
}
";

#[test]
fn valid_gemm_with_for_each() {
    valid(VALID_GEMM_WITH_FOR_EACH);
}

const VALID_RAGGED_DECODE: &str = "\
symbol nreq: i64;
symbol max_chunks: i64;
slot len: i64;
slot nc: i64;
tensor kv_chunks: i32[nreq];
tensor kv_lens: i32[nreq];
tensor Qd: f16[nreq, 32, 128];
tensor Kc: f16[nreq, 8, max_chunks * 512, 128];
tensor Opart: f32[nreq, 32, max_chunks, 128];
tensor Od: f16[nreq, 32, 128];
axis RC = ragged(nreq, kv_chunks);
axis R = dense_dyn(nreq);
axis G = dense(8);
axis H = dense(32);
kernel decode_chunk(in q: f16[4, 128], in k: f16[512, 128], out o: f32[4, 1, 128], chunk_start: i64, chunk_end: i64) @cube;
kernel merge(in o: f32[?, 128], out out_row: f16[128]) @vector;
workload decode() {
    parallel_for r, c in RC {
        load len = kv_lens[r];
        parallel_for g in G {
            task decode_chunk(Qd[r, g * 4 +: 4, 0 +: 128], Kc[r, g, c * 512 +: 512, 0 +: 128], Opart[r, g * 4 +: 4, c, 0 +: 128], c * 512, min((c + 1) * 512, len));
        }
    }
    parallel_for r in R {
        load nc = kv_chunks[r];
        parallel_for h in H {
            task merge(Opart[r, h, 0 +: nc, 0 +: 128], Od[r, h, 0 +: 128]);
        }
    }
}
schedule for decode {
    executors 8;
    dispatch affinity(r);
    task_graph {
        deps overlap;
        ready work_steal;
    }
}
";

#[test]
fn valid_ragged_decode() {
    valid(VALID_RAGGED_DECODE);
}

const VALID_MOE_SELECT: &str = "\
symbol tokens: i64;
symbol routes: i64;
tensor route_indptr: i32[tokens / 16 + 1];
tensor route_experts: i32[routes];
tensor X: f16[tokens, 4096];
tensor W1: f16[8, 4096, 14336];
tensor Ypart: f32[8, tokens, 4096];
tensor Y: f16[tokens, 4096];
axis R = sparse(tokens / 16, route_indptr, route_experts);
axis TT = dense_dyn(tokens / 16);
kernel expert_ffn(in x: f16[16, 4096], in w1: f16[4096, 14336], out y: f32[16, 4096]) @cube;
kernel moe_combine(in parts: f32[8, 16, 4096], out y: f16[16, 4096]) @vector;
workload moe() {
    select t, e in R {
        task expert_ffn(X[t * 16 +: 16, 0 +: 4096], W1[e, 0 +: 4096, 0 +: 14336], Ypart[e, t * 16 +: 16, 0 +: 4096]);
    }
    parallel_for t in TT {
        task moe_combine(Ypart[0 +: 8, t * 16 +: 16, 0 +: 4096], Y[t * 16 +: 16, 0 +: 4096]);
    }
}
schedule for moe {
    executors 16;
    dispatch affinity(t);
}
";

#[test]
fn valid_moe_select() {
    valid(VALID_MOE_SELECT);
}

const VALID_TIERS_AND_IF: &str = "\
symbol nreq: i64;
symbol maxlen: i64;
symbol prefill: bool;
slot kvlen: i64;
tensor req_len: i32[nreq];
tensor Q: f16[nreq, 32, maxlen, 128];
tensor O: f16[nreq, 32, maxlen, 128];
axis R = dense_dyn(nreq);
axis H = dense(32);
axis QT = dense_dyn((kvlen + 127) / 128);
kernel attn_2k(in q: f16[?, 128], out o: f16[?, 128], seq: i64) @vector;
kernel attn_64k(in q: f16[?, 128], out o: f16[?, 128], seq: i64) @vector;
kernel attn(in q: f16[?, 128], out o: f16[?, 128], seq: i64) @vector tiers {
    seq <= 2048 && maxlen > 0 => attn_2k,
    else => attn_64k,
};
workload serve() {
    parallel_for r in R {
        load kvlen = req_len[r];
        if prefill {
            parallel_for q in QT {
                parallel_for h in H {
                    task attn(Q[r, h, q * 128 +: min(128, kvlen - q * 128), 0 +: 128], O[r, h, q * 128 +: min(128, kvlen - q * 128), 0 +: 128], min((q + 1) * 128, kvlen));
                }
            }
        } else {
            parallel_for h in H {
                task attn(Q[r, h, kvlen - 1, 0 +: 128], O[r, h, kvlen - 1, 0 +: 128], kvlen);
            }
        }
    }
}
schedule for serve {
    dispatch affinity(r * 32 + h);
    task_graph { ready priority(kvlen); }
}
";

#[test]
fn valid_tiers_and_if() {
    valid(VALID_TIERS_AND_IF);
}

const VALID_CSP_PIPELINE: &str = "\
symbol ntiles: i64;
tensor Src: f16[ntiles * 256, 1024];
tensor Stage: f16[512, 1024];
tensor Dst: f16[ntiles * 256, 1024];
axis T = dense_dyn(ntiles);
kernel load_tile(in src: f16[256, 1024], out dst: f16[256, 1024]) @vector;
kernel store_tile(in src: f16[256, 1024], out dst: f16[256, 1024]) @vector;
pipeline stream2 {
    channel loaded[2];
    process loader(produces loaded) {
        for_each t in T {
            task load_tile(Src[t * 256 +: 256, 0 +: 1024], Stage[t % 2 * 256 +: 256, 0 +: 1024]);
            send loaded(t);
        }
    }
    process storer(consumes loaded) {
        consume loaded as i {
            task store_tile(Stage[i % 2 * 256 +: 256, 0 +: 1024], Dst[i * 256 +: 256, 0 +: 1024]);
        }
    }
}
schedule for stream2 {
    executors 4;
    dispatch work_steal;
    pipeline_depth 2 per_pool;
}
";

#[test]
fn valid_csp_pipeline() {
    valid(VALID_CSP_PIPELINE);
}

const VALID_SCHEDULE_WITH_EVERY_ITEM: &str = "\
symbol n: i64;
slot s: i64;
tensor A: f32[n, 64];
axis B = dense_dyn(n);
kernel k(inout a: f32[1, 64], b: i64);
workload layer(b: i64, scale: u64) {
    combine {
        task k(A[b, 0 +: 64], b);
    }
}
workload main() {
    set s = 3;
    sequential {
        parallel_for b in B {
            call layer(b, 2u);
        }
        for_each b in B {
            if b % 2 == 0 && s > 1 { task k(A[b, 0 +: 64], -b); } else { task k(A[b, 0 +: 64], max(b, s)); }
        }
    }
}
schedule for main {
    executors 4;
    dispatch threshold(b) { below 4: static_partition(0, 10, 20, 30), below 8: hash(b + s), else: round_robin(2) };
    streams 2;
    stream_by b;
    timing interleaved(2);
    task_graph {
        deps hybrid;
        ready priority(n - b);
        start threshold(16);
        trace cycles(b * 10);
        pools by_exec_unit;
    }
    task_window 64 abort;
    pipeline_depth 8 per_stream;
    batch_deps 4;
    dispatch_threshold(b) { below 2: cube, below 10: vector, else: any };
}
";

#[test]
fn valid_schedule_with_every_item() {
    valid(VALID_SCHEDULE_WITH_EVERY_ITEM);
}

// ---------------------------------------------------------------------------------------------
// Modules built without text

mod built {
    use pto_wsp_ir::schedule::{Dispatch, Schedule, ScheduleItem, ScheduleItemKind};
    use pto_wsp_ir::*;

    fn main_with(body: Vec<Stmt>) -> Module {
        Module {
            axes: vec![AxisDecl {
                name: "B".into(),
                kind: AxisKind::Dense(Expr::Int(4)),
            }],
            kernels: vec![KernelDecl {
                name: "attn".into(),
                params: vec![KernelParam {
                    name: "n".into(),
                    kind: ParamKind::Scalar(ScalarType::I64.into()),
                }],
                pool: ExecPool::Any,
                tiers: None,
                body: None,
            }],
            workloads: vec![Workload {
                name: "main".into(),
                params: vec![],
                body,
                loc: Loc::NONE,
            }],
            ..Module::default()
        }
    }

    #[test]
    fn errors_carry_the_path_when_there_is_no_text() {
        let task = Stmt::new(StmtKind::Task(TaskStmt {
            kernel: "attn".into(),
            args: vec![Arg::Scalar(Expr::Bool(true))],
        }));
        let m = main_with(vec![Stmt::new(StmtKind::Loop {
            order: LoopOrder::Parallel,
            vars: vec!["b".into(), "x".into()],
            axis: "B".into(),
            body: vec![task],
        })]);
        let errors = validate(&m).unwrap_err();
        let file = SourceFile::new("built", "");
        let rendered: Vec<String> = errors.iter().map(|e| file.render(e)).collect();
        assert_eq!(
            rendered,
            [
                "error: `parallel_for` over dense axis `B` binds 1 variable, found 2\n --> built\n  = note: in workload main > parallel_for b, x\n",
                "error: argument 1 of `attn` (`n: i64`) must be i64, found bool\n --> built\n  = note: in workload main > parallel_for b, x > task attn > argument 1\n",
            ]
        );
        assert_eq!(
            errors[1].path(),
            "workload main > parallel_for b, x > task attn > argument 1"
        );
        assert!(!errors[1].loc().is_known());
    }

    #[test]
    fn empty_static_partition() {
        let mut m = main_with(vec![]);
        m.schedule = Some(Schedule {
            target: "main".into(),
            items: vec![ScheduleItem::new(ScheduleItemKind::Dispatch(
                Dispatch::StaticPartition(vec![]),
            ))],
            loc: Loc::NONE,
        });
        let errors = validate(&m).unwrap_err();
        let messages: Vec<String> = errors
            .iter()
            .map(|e| format!("{e} ({})", e.path()))
            .collect();
        assert_eq!(
            messages,
            ["`static_partition` needs at least one start (schedule for main > dispatch)"]
        );
    }

    #[test]
    fn odd_modules_do_not_panic() {
        // Empty names, empty regions, a tile of rank 0, self-referencing tiers, an empty module.
        let region = Region {
            tensor: "".into(),
            dims: vec![],
        };
        let mut m = main_with(vec![Stmt::new(StmtKind::Task(TaskStmt {
            kernel: "t".into(),
            args: vec![Arg::Region(region)],
        }))]);
        m.tensors.push(TensorDecl {
            name: "".into(),
            dtype: DType::F16,
            shape: vec![],
        });
        m.kernels.push(KernelDecl {
            name: "t".into(),
            params: vec![KernelParam {
                name: "x".into(),
                kind: ParamKind::Tile {
                    access: Access::In,
                    dtype: DType::F16,
                    shape: vec![],
                },
            }],
            pool: ExecPool::Any,
            tiers: Some(Tiers {
                cases: vec![(Expr::Int(1), "t".into())],
                default: "t".into(),
            }),
            body: None,
        });
        let errors = validate(&m).unwrap_err();
        let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            messages,
            [
                "tier case 1 of kernel `t` must be bool, found i64",
                "tier variant `t` of `t` has tiers of its own",
                "tier variant `t` of `t` has tiers of its own",
            ]
        );
        let empty = validate(&Module::default()).unwrap_err();
        assert_eq!(
            empty.iter().map(ToString::to_string).collect::<Vec<_>>(),
            [
                "no entry point: no schedule, no workload `main`, and 0 workloads and 0 pipelines (need exactly one)"
            ]
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Properties over mutated valid modules

mod mutated {
    use super::*;
    use proptest::prelude::*;

    const SOURCES: &[&str] = &[
        VALID_ATTENTION,
        VALID_GEMM_WITH_FOR_EACH,
        VALID_RAGGED_DECODE,
        VALID_MOE_SELECT,
        VALID_TIERS_AND_IF,
        VALID_CSP_PIPELINE,
        VALID_SCHEDULE_WITH_EVERY_ITEM,
    ];

    /// Identifier (other than reserved words) and integer tokens of `src` as byte ranges.
    fn tokens(src: &str) -> Vec<(usize, usize)> {
        let b = src.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < b.len() {
            let c = b[i];
            if c.is_ascii_alphanumeric() || c == b'_' {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                if !pto_wsp_ir::parse::is_reserved(&src[start..i]) {
                    out.push((start, i));
                }
            } else {
                i += 1;
            }
        }
        out
    }

    /// `src` with token `at` replaced by the text of token `from` (indices modulo the count;
    /// numbers are replaced by numbers, names by names).
    fn mutate(src: &str, edits: &[(usize, usize)]) -> String {
        let mut text = src.to_string();
        for &(at, from) in edits {
            let toks = tokens(&text);
            let (a, b) = toks[at % toks.len()];
            let digit = |(s, _): (usize, usize)| text.as_bytes()[s].is_ascii_digit();
            let same: Vec<(usize, usize)> = toks
                .iter()
                .copied()
                .filter(|&t| digit(t) == digit((a, b)))
                .collect();
            let (c, d) = same[from % same.len()];
            let word = text[c..d].to_string();
            text.replace_range(a..b, &word);
        }
        text
    }

    fn summary(errors: &[pto_wsp_ir::ValidationError]) -> Vec<String> {
        let mut v: Vec<String> = errors
            .iter()
            .map(|e| format!("{e} | {}", e.path()))
            .collect();
        v.sort();
        v
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(pto_wsp_ir::soak::cases(512)))]

        /// Whatever a module looks like, validation returns (no panic), is deterministic, keeps
        /// errors in source order with locations inside the text and non-empty paths, and does
        /// not depend on locations: the printed and re-parsed module has the same mistakes.
        #[test]
        fn validation_is_total_ordered_and_location_independent(
            which in 0..SOURCES.len(),
            edits in prop::collection::vec((any::<usize>(), any::<usize>()), 1..4),
        ) {
            let text = mutate(SOURCES[which], &edits);
            let Ok(module) = parse(&text) else { return Ok(()) };
            let first = validate(&module).err().unwrap_or_default();
            let again = validate(&module).err().unwrap_or_default();
            prop_assert_eq!(&first, &again);
            let starts: Vec<u32> = first
                .iter()
                .map(|e| e.loc())
                .filter(|l| l.is_known())
                .map(|l| l.start)
                .collect();
            prop_assert!(starts.windows(2).all(|w| w[0] <= w[1]), "not in source order");
            for e in &first {
                prop_assert!(!e.path().is_empty());
                let loc = e.loc();
                prop_assert!(!loc.is_known() || (loc.end as usize) <= text.len());
                let _ = SourceFile::new("m.wsp", text.as_str()).render(e);
            }
            let printed = module.to_string();
            let reparsed = parse(&printed).expect("printed module parses");
            let second = validate(&reparsed).err().unwrap_or_default();
            prop_assert_eq!(summary(&first), summary(&second), "printed:\n{}", printed);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Typed scalar kernel parameters and float literals

#[test]
fn float_parameters_take_float_literals() {
    valid(
        "\
tensor x: f32[4, 8];
kernel norm(inout x: f32[4, 8], eps: f64, scale: f32, n: i64, on: bool);
workload main() { task norm(x[0 +: 4, 0 +: 8], 1e-6, -0.5, 3, true); }
",
    );
}

#[test]
fn float_parameter_given_an_integer() {
    check(
        "\
tensor x: f32[4, 8];
kernel norm(inout x: f32[4, 8], eps: f64);
workload main() { task norm(x[0 +: 4, 0 +: 8], 4607182418800017408u); }
",
        r#"
error: argument 2 of `norm` (`eps: f64`) must be a float literal such as `1.0`, `1e-6` or `-0.5`
 --> t.wsp:3:19
  |
3 | workload main() { task norm(x[0 +: 4, 0 +: 8], 4607182418800017408u); }
  |                   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^ not a float literal
  = note: in workload main > task norm > argument 2
"#,
    );
}

#[test]
fn float_literal_outside_a_float_argument() {
    check(
        "\
tensor x: f32[4, 8];
kernel k(inout x: f32[4, 8], n: i64);
workload main() { task k(x[0 +: 4, 0 +: 8], 2.5); }
",
        r#"
error: float literal `2.5` here: float literals are only arguments of `f32` / `f64` kernel parameters
 --> t.wsp:3:45
  |
3 | workload main() { task k(x[0 +: 4, 0 +: 8], 2.5); }
  |                                             ^^^ float literal not allowed here
  = note: in workload main > task k > argument 2
"#,
    );
}

#[test]
fn float_literal_out_of_f32_range() {
    check(
        "\
tensor x: f32[4, 8];
kernel k(inout x: f32[4, 8], s: f32);
workload main() { task k(x[0 +: 4, 0 +: 8], 1e39); }
",
        r#"
error: argument 2 of `k` (`s: f32`): `1e39` is out of the range of f32
 --> t.wsp:3:45
  |
3 | workload main() { task k(x[0 +: 4, 0 +: 8], 1e39); }
  |                                             ^^^^ out of f32 range
  = note: in workload main > task k > argument 2
"#,
    );
}

#[test]
fn float_parameter_in_a_tier_condition() {
    check(
        "\
tensor x: f32[4, 8];
kernel small(inout x: f32[4, 8], s: f64);
kernel k(inout x: f32[4, 8], s: f64) tiers { s > 0 => small, else => small };
workload main() { task k(x[0 +: 4, 0 +: 8], 1.0); }
",
        r#"
error: tier case 1 of kernel `k` may name only the kernel's integer and bool scalar parameters and symbols, but names float parameter `s`
 --> t.wsp:3:46
  |
3 | kernel k(inout x: f32[4, 8], s: f64) tiers { s > 0 => small, else => small };
  |                                              ^ not allowed here
  = note: in kernel k > tiers > case 1
"#,
    );
}

/// In a ragged axis's row-length expression the lengths tensor stands for its row's element;
/// other names must be symbols or slots, and the expression an integer.
#[test]
fn ragged_row_length_expression() {
    valid(
        "symbol n: i64;\ntensor L: i32[n];\naxis R = ragged(n, L, (L + 511) / 512);\n\
         kernel k(a: i64);\nworkload main() { parallel_for r, p in R { task k(p); } }\n",
    );
    let src = "symbol n: i64;\ntensor L: i32[n];\naxis R = ragged(n, L, L + x);\n";
    let e = render_errors(src);
    assert!(e.contains("`x`") && e.contains("t.wsp:3:27"), "{e}");
    let src = "symbol n: i64;\ntensor L: i32[n];\naxis R = ragged(n, L, L > 3);\n";
    let e = render_errors(src);
    assert!(
        e.contains("row length of ragged axis `R`") && e.contains("t.wsp:3:"),
        "{e}"
    );
}

// ---------------------------------------------------------------------------------------------
// Checks that follow a body's values (regions at tasks, one-sided `if`s)

/// The errors of a file under `test_data/`, each as (line, column, message).
fn file_errors(path: &str) -> Vec<(usize, usize, String)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let text = std::fs::read_to_string(root.join(path)).unwrap();
    let file = SourceFile::new(path, &text);
    match validate(&parse(&text).unwrap()) {
        Ok(()) => Vec::new(),
        Err(errors) => errors
            .iter()
            .map(|e| {
                let (l, c) = file.line_col(e.loc().start as usize);
                (l, c, e.to_string())
            })
            .collect(),
    }
}

#[test]
fn a_region_smaller_than_the_body_loads_is_reported_at_the_region() {
    let errs = file_errors("test_data/errors/region_too_small.wsp");
    assert_eq!(errs.len(), 1, "{errs:?}");
    let (l, c, m) = &errs[0];
    assert_eq!((*l, *c), (15, 16), "{m}");
    assert_eq!(
        m,
        "kernel `scale`: region `X[..]` bound to `x` (in x: f32[?, 64]) is 8 x 64 (rows x cols), \
         but the body's TLOAD loads tile `t` (valid 16 x 64) at (0, 0) from it: it needs at least \
         16 x 64"
    );
}

#[test]
fn a_region_smaller_than_another_parameters_matching_one_is_reported() {
    // The tile's valid rows are rows(x) = 16 at this task; `y` has 4.
    let errs = file_errors("test_data/errors/region_smaller_than_other_param.wsp");
    assert_eq!(errs.len(), 1, "{errs:?}");
    let (l, c, m) = &errs[0];
    assert_eq!((*l, *c), (14, 41), "{m}");
    assert!(
        m.contains("region `Y[..]` bound to `y` (out y: f32[?, 64]) is 4 x 64 (rows x cols), but the body's TSTORE stores tile `t` (valid 16 x 64) at (0, 0) into it"),
        "{m}"
    );
}

#[test]
fn a_tile_written_in_one_branch_and_read_after_the_if_is_reported_at_the_read() {
    let errs = file_errors("test_data/errors/one_sided_if.wsp");
    assert_eq!(errs.len(), 1, "{errs:?}");
    let (l, c, m) = &errs[0];
    assert_eq!((*l, *c), (14, 5), "{m}");
    assert_eq!(
        m,
        "kernel `maybe_scale`: TSTORE reads tile `s`, which may be unwritten here: the `if scale` \
         before it writes it in only one branch (write it in both, or before the `if`)"
    );
}

#[test]
fn regions_that_fit_and_writes_on_every_path_stay_accepted() {
    assert_eq!(file_errors("test_data/kernels/flow_ok.wsp"), Vec::new());
    // A loop-dependent branch is followed per iteration: iteration 0 writes `acc`, the others
    // accumulate into it; with the count a parameter, the first iteration is still taken.
    valid(
        "tensor A: f32[16, 64];\ntensor C: f32[16, 16];\n\
         kernel k(in a: f32[16, ?], out c: f32[16, 16], n: i64) @vector {\n    \
         tile t: vec f32[16, 16];\n    tile acc: vec f32[16, 16];\n    \
         for i in range(n) {\n        TLOAD(t, a, 0, i * 16);\n        \
         if i == 0 {\n            TMOV(acc, t);\n        } else {\n            \
         TADD(acc, acc, t);\n        }\n    }\n    TSTORE(c, acc);\n}\n\
         workload main() {\n    task k(A[0 +: 16, 0 +: 64], C[0 +: 16, 0 +: 16], 4);\n}\n",
    );
    // The same region at a task where the loop runs past it is reported.
    let bad = "tensor A: f32[16, 64];\ntensor C: f32[16, 16];\n\
         kernel k(in a: f32[16, ?], out c: f32[16, 16], n: i64) @vector {\n    \
         tile t: vec f32[16, 16];\n    tile acc: vec f32[16, 16];\n    TEXPANDS(acc, 0.0);\n    \
         for i in range(n) {\n        TLOAD(t, a, 0, i * 16);\n        TADD(acc, acc, t);\n    }\n    \
         TSTORE(c, acc);\n}\n\
         workload main() {\n    task k(A[0 +: 16, 0 +: 64], C[0 +: 16, 0 +: 16], 5);\n}\n";
    let out = render_errors(bad);
    assert!(
        out.contains("is 16 x 64 (rows x cols), but the body's TLOAD loads tile `t` (valid 16 x 16) at (0, 64) from it: it needs at least 16 x 80"),
        "{out}"
    );
}
