//! Example-based tests of the text format: canonical printing, what parses to what, source
//! locations, the exact message and position of syntax errors, and the nesting limit.

use pto_wsp_ir::parse::{MAX_DEPTH, parse_expr};
use pto_wsp_ir::*;

const FORMAT_EXAMPLE: &str = include_str!("data/format_example.wsp");
const EVERYTHING: &str = include_str!("data/everything.wsp");

fn parse_ok(text: &str) -> Module {
    parse(text).unwrap_or_else(|e| panic!("{}", SourceFile::new("t.wsp", text).render(&e)))
}

fn expr(text: &str) -> Expr {
    parse_expr(text).unwrap_or_else(|e| panic!("`{text}`: {e}"))
}

// ----- canonical form ----------------------------------------------------------------------

#[test]
fn format_md_example_is_canonical() {
    assert_eq!(parse_ok(FORMAT_EXAMPLE).to_string(), FORMAT_EXAMPLE);
}

#[test]
fn module_using_every_construct_is_canonical() {
    let m = parse_ok(EVERYTHING);
    assert_eq!(m.to_string(), EVERYTHING);
    assert_eq!(
        (
            m.symbols.len(),
            m.slots.len(),
            m.tensors.len(),
            m.axes.len()
        ),
        (3, 1, 4, 4)
    );
    assert_eq!((m.kernels.len(), m.workloads.len()), (4, 2));
    let tiers = m.kernels[2].tiers.as_ref().expect("tiered kernel");
    assert_eq!((tiers.cases.len(), tiers.default.as_str()), (2, "attn"));
    let pipe = &m.pipelines[0];
    assert_eq!((pipe.channels.len(), pipe.processes.len()), (2, 4));
    assert_eq!(pipe.processes[1].consumes, vec![Ident::new("c")]);
    assert_eq!(pipe.processes[1].produces, vec![Ident::new("e")]);
    let s = m.schedule.as_ref().expect("schedule");
    assert_eq!(s.items.len(), 10);
    let config = s.config();
    assert_eq!(
        (config.executors, config.streams, config.batch_deps),
        (4, 2, 4)
    );
    assert_eq!(config.deps, DepsMode::Overlap);
    assert_eq!(config.task_window, Some((64, WindowMode::Stall)));
    let Dispatch::Threshold(levels) = &config.dispatch else {
        panic!("dispatch is {:?}", config.dispatch)
    };
    assert_eq!(levels.levels[0], (-5, Dispatch::RoundRobin(2)));
    assert!(matches!(levels.levels[1].1, Dispatch::Threshold(_)));
    assert_eq!(
        *levels.otherwise,
        Dispatch::StaticPartition(vec![0, 10, 20])
    );
}

/// Built-ins named like reserved words (`max`, `min`, `combine`) can be declared, used in tiers
/// and called: where only a kernel name can stand, any word is one.
#[test]
fn kernels_named_like_keywords_parse_validate_and_round_trip() {
    let text = "tensor A: f32[4, 4];\ntensor B: f32[4, 4];\ntensor C: f32[4, 4];\n\n\
                kernel max(in a: f32[4, 4], in b: f32[4, 4], out c: f32[4, 4]);\n\
                kernel min(in a: f32[4, 4], in b: f32[4, 4], out c: f32[4, 4]);\n\n\
                kernel combine(in a: f32[4, 4], in b: f32[4, 4], out c: f32[4, 4]) tiers {\n    \
                1 > 2 => max,\n    else => min\n};\n\n\
                workload w() {\n    \
                task max(A[0 +: 4, 0 +: 4], B[0 +: 4, 0 +: 4], C[0 +: 4, 0 +: 4]);\n    \
                task combine(A[0 +: 4, 0 +: 4], B[0 +: 4, 0 +: 4], C[0 +: 4, 0 +: 4]);\n}\n";
    let m = parse_ok(text);
    assert_eq!(m.to_string(), text);
    let names: Vec<&str> = m.kernels.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, ["max", "min", "combine"]);
    validate(&m).unwrap_or_else(|e| panic!("{e:?}"));
    // Elsewhere the words stay reserved: `max` is not a tensor name.
    let err = parse("tensor max: f32[4];").unwrap_err();
    assert_eq!(err.message, "expected tensor name, found keyword `max`");
}

#[test]
fn loose_input_is_printed_canonically() {
    let text = "// a comment\nworkload w(){task k((a)+(b*c), -(5), - 7, 3u);}\n\
                kernel k(n: i64) @any tiers { n > 1 => k2, else => k3, };\n\
                schedule for w{dispatch threshold(x){below 1: work_steal, else: hash(x),};\
                task_graph{}}  symbol   s : bool ; // trailing\n";
    let want = "symbol s: bool;\n\n\
                kernel k(n: i64) tiers {\n    n > 1 => k2,\n    else => k3\n};\n\n\
                workload w() {\n    task k(a + b * c, -(5), -7, 3u);\n}\n\n\
                schedule for w {\n    \
                dispatch threshold(x) { below 1: work_steal, else: hash(x) };\n    \
                task_graph { }\n}\n";
    assert_eq!(parse_ok(text).to_string(), want);
}

#[test]
fn empty_and_comment_only_input_is_an_empty_module() {
    for text in ["", "   \n\t", "// nothing\n// at all"] {
        assert_eq!(parse(text), Ok(Module::default()));
    }
    assert_eq!(Module::default().to_string(), "");
}

#[test]
fn fragments_print_as_inside_a_module() {
    let m = parse_ok(EVERYTHING);
    let s = m.schedule.as_ref().expect("schedule");
    assert_eq!(
        s.items[5].to_string(),
        "task_graph {\n    deps overlap;\n    ready priority(t * 2);\n    start threshold(100);\n    \
         trace cycles(seq / 4);\n    pools by_exec_unit;\n}"
    );
    assert_eq!(
        m.workloads[1].body[0].to_string(),
        "sequential {\n    task plain(18446744073709551615u);\n    task small(Q[r +: k], -r);\n}"
    );
    assert_eq!(m.axes[3].kind.to_string(), "sparse(8, indptr, idx)");
    assert_eq!(
        m.kernels[0].to_string(),
        "kernel attn(in q: f16[32, ?], out o: f16[32, 128], n: i64) @vector;"
    );
    assert_eq!(
        m.pipelines[0].processes[1].to_string(),
        "process consumer(consumes c; produces e) {\n    consume c as v {\n        task plain(v);\n    }\n}"
    );
}

// ----- expressions -------------------------------------------------------------------------

#[test]
fn negative_literals_fold_only_directly_before_an_i64_literal() {
    assert_eq!(expr("-5"), Expr::Int(-5));
    assert_eq!(expr("- 5"), Expr::Int(-5));
    assert_eq!(expr("-(5)"), -Expr::Int(5));
    assert_eq!(expr("-5u"), -Expr::UInt(5));
    assert_eq!(expr("--5"), -Expr::Int(-5));
    assert_eq!(expr("a - 5"), Expr::name("a") - 5);
    assert_eq!(expr("a - -5"), Expr::name("a") - (-5));
    assert_eq!(expr("-9223372036854775808"), Expr::Int(i64::MIN));
    assert_eq!(expr("-5 * x"), Expr::Int(-5) * "x");
    assert_eq!(expr("18446744073709551615u"), Expr::UInt(u64::MAX));
    assert_eq!((-Expr::Int(5)).to_string(), "-(5)");
    assert_eq!((-Expr::Int(-5)).to_string(), "--5");
    assert_eq!(Expr::Int(i64::MIN).to_string(), "-9223372036854775808");
}

#[test]
fn precedence_and_associativity() {
    let (a, b, c) = (Expr::name("a"), Expr::name("b"), Expr::name("c"));
    assert_eq!(expr("a + b * c"), a.clone() + (b.clone() * c.clone()));
    assert_eq!(expr("a - b - c"), (a.clone() - b.clone()) - c.clone());
    assert_eq!(
        expr("a || b && c"),
        a.clone()
            .bin(BinOp::Or, b.clone().bin(BinOp::And, c.clone()))
    );
    assert_eq!(expr("a + 1 < b"), (a.clone() + 1).lt(b.clone()));
    assert!(parse_expr("a < b == true").is_err());
    assert_eq!(expr("-a * b"), (-a.clone()) * b.clone());
    assert_eq!(expr("!a && b"), (!a.clone()).bin(BinOp::And, b.clone()));
    assert_eq!(
        expr("a ? b : c ? 1 : 2"),
        Expr::ternary(a.clone(), b.clone(), Expr::ternary(c.clone(), 1, 2))
    );
    assert_eq!(
        expr("min(a, max(b ? 1 : 2, c))"),
        Expr::min(
            a.clone(),
            Expr::max(Expr::ternary(b.clone(), 1, 2), c.clone())
        )
    );
    assert_eq!(expr("((a))"), a);
}

#[test]
fn printer_uses_the_fewest_parentheses() {
    let cases = [
        "a - (b - c)",
        "a - b - c",
        "(a + b) * c",
        "a * (b / c)",
        "a * b / c",
        "(a < b) == c",
        "a == (b < c)",
        "a < b + c",
        "-(a + b)",
        "!(a && b)",
        "-min(a, b)",
        "--a",
        "(a ? b : c) + 1",
        "a ? b ? c : d : e ? f : g",
        "(a ? b : c) ? d : e",
        "a || b && c",
        "(a || b) && c",
        "a && b || c",
        "-(5) + -5 - 5u",
        "--5 - -(5)",
    ];
    for text in cases {
        assert_eq!(expr(text).to_string(), text);
    }
}

// ----- locations ---------------------------------------------------------------------------

fn slice(text: &str, loc: Loc) -> &str {
    &text[loc.start as usize..loc.end as usize]
}

#[test]
fn nodes_carry_their_source_ranges() {
    let text = "workload w(n: i64) {\n    for_each i in A {\n        task k(X[i +: n], n);\n    }\n}\n\
                pipeline p { channel c[1]; process q(produces c) { send c(1); } }\n\
                schedule for w { executors 2; dispatch hash(i); }\n";
    let m = parse_ok(text);
    let w = &m.workloads[0];
    assert_eq!(slice(text, w.name.loc), "w");
    assert!(
        slice(text, w.loc).starts_with("workload w(n: i64) {")
            && slice(text, w.loc).ends_with("    }\n}")
    );
    assert_eq!(slice(text, w.params[0].0.loc), "n");
    let lp = &w.body[0];
    assert!(
        slice(text, lp.loc).starts_with("for_each i in A {") && slice(text, lp.loc).ends_with('}')
    );
    let StmtKind::Loop {
        vars, axis, body, ..
    } = &lp.kind
    else {
        panic!("not a loop: {lp:?}")
    };
    assert_eq!(
        (slice(text, vars[0].loc), slice(text, axis.loc)),
        ("i", "A")
    );
    assert_eq!(slice(text, body[0].loc), "task k(X[i +: n], n);");
    let StmtKind::Task(t) = &body[0].kind else {
        panic!("not a task")
    };
    let Arg::Region(r) = &t.args[0] else {
        panic!("not a region")
    };
    assert_eq!(slice(text, r.tensor.loc), "X");
    let Expr::Name(n) = &r.dims[0].size.as_ref().expect("size") else {
        panic!("not a name")
    };
    assert_eq!(
        SourceFile::new("t", text).line_col(n.loc.start as usize),
        (3, 23)
    );
    let p = &m.pipelines[0];
    assert_eq!(
        slice(text, p.loc),
        "pipeline p { channel c[1]; process q(produces c) { send c(1); } }"
    );
    assert_eq!(
        slice(text, p.processes[0].loc),
        "process q(produces c) { send c(1); }"
    );
    assert_eq!(slice(text, p.processes[0].body[0].loc), "send c(1);");
    assert_eq!(slice(text, p.channels[0].name.loc), "c");
    let s = m.schedule.as_ref().expect("schedule");
    assert_eq!(
        slice(text, s.loc),
        "schedule for w { executors 2; dispatch hash(i); }"
    );
    assert_eq!(slice(text, s.target.loc), "w");
    assert_eq!(slice(text, s.items[1].loc), "dispatch hash(i);");
}

// ----- errors ------------------------------------------------------------------------------

/// Each malformed input with its exact message and the 1-based line and column it points at.
const ERRORS: &[(&str, &str, (usize, usize))] = &[
    (
        "tensor A: f16[4, 4]\n}",
        "expected `;` after tensor declaration, found `}`",
        (2, 1),
    ),
    (
        "tensor A: f17[4];",
        "unknown element type `f17` (expected one of f16, bf16, f32, i32, u32, i64, u64, u8)",
        (1, 11),
    ),
    (
        "symbol n: int;",
        "unknown type `int` (expected one of bool, i64, u64)",
        (1, 11),
    ),
    (
        "symbol n i64;",
        "expected `:` after symbol name, found `i64`",
        (1, 10),
    ),
    (
        "axis A = dense(99999999999999999999);",
        "integer literal `99999999999999999999` does not fit in i64",
        (1, 16),
    ),
    (
        "axis A = dense(9223372036854775808);",
        "integer literal `9223372036854775808` does not fit in i64",
        (1, 16),
    ),
    (
        "axis A = dense(-9223372036854775809);",
        "integer literal `-9223372036854775809` does not fit in i64",
        (1, 16),
    ),
    (
        "axis A = dense(18446744073709551616u);",
        "integer literal `18446744073709551616u` does not fit in u64",
        (1, 16),
    ),
    (
        "axis A = dense(12x);",
        "invalid suffix `x` on integer literal `12x` (only `u` is allowed)",
        (1, 18),
    ),
    (
        "axis A = dense(123456789012345678901234567890123456789012345);",
        "integer literal `1234567890123456789012345678901234567890...` does not fit in i64",
        (1, 16),
    ),
    (
        "symbol n: i64_but_with_a_very_long_name_that_goes_on_and_on;",
        "unknown type `i64_but_with_a_very_long_name_that_goes_...` (expected one of bool, i64, \
         u64)",
        (1, 11),
    ),
    (
        "axis A = blocked(4);",
        "expected an axis kind (dense, dense_dyn, ragged or sparse), found `blocked`",
        (1, 10),
    ),
    (
        "axis R = ragged(4);",
        "expected `,` after the number of rows, found `)`",
        (1, 18),
    ),
    (
        "workload w() {\n    task k(X[i +: ]);\n}",
        "expected an expression, found `]`",
        (2, 19),
    ),
    (
        "workload w() {\n    task k(X[i +: 4);\n}",
        "expected `,` or `]` in region, found `)`",
        (2, 20),
    ),
    (
        "workload w() {\n    task k(X[i : 4]);\n}",
        "expected `,` or `]` in region, found `:`",
        (2, 16),
    ),
    (
        "workload w() {\n    parallel_for i in A {\n        task k(X[i",
        "unclosed delimiter: `[` opened here is never closed",
        (3, 17),
    ),
    (
        "workload w() {\n    parallel_for i in A {\n        task k(X[i]);\n",
        "unterminated block: `{` opened here is never closed",
        (2, 25),
    ),
    (
        "workload w() {\n    set x = 1;\n    set y = 2\n}",
        "expected `;` after set statement, found `}`",
        (4, 1),
    ),
    (
        "kernel k(in a: f16[4]) @vector",
        "expected `;` after kernel declaration (or `{` to open its body), found end of input",
        (1, 31),
    ),
    (
        "kernel k(in a: f16[4, x]);",
        "expected a tile dimension or `?` (a non-negative integer literal), found `x`",
        (1, 23),
    ),
    (
        "kernel k(in a: f16[4]) @gpu;",
        "unknown pool `gpu` (expected one of vector, cube, any)",
        (1, 25),
    ),
    (
        "kernel k(n: i64) tiers { n < 4 => a };",
        "missing `else => KERNEL` case at the end of tiers",
        (1, 37),
    ),
    (
        "kernel k(n: i64) tiers { else => a, n < 4 => b };",
        "expected `}` after the `else` case of tiers, found `n`",
        (1, 37),
    ),
    (
        "workload w() { set x = a < b < c; }",
        "comparison operators cannot be chained; add parentheses",
        (1, 30),
    ),
    (
        "workload w() { set x = 1 +; }",
        "expected an expression, found `;`",
        (1, 27),
    ),
    (
        "workload w() { set x = c ? 1; }",
        "expected `:` between the branches of a conditional expression, found `;`",
        (1, 29),
    ),
    (
        "workload w() { if x { } else if y { } }",
        "expected `{` after `else`, found keyword `if`",
        (1, 30),
    ),
    (
        "workload w() { foo(); }",
        "expected a statement (parallel_for, for_each, select, if, while, break, combine, \
         sequential, task, set, load, call, send or consume), found `foo`",
        (1, 16),
    ),
    (
        "workload w() { parallel_for i A { } }",
        "expected `in` after loop variables, found `A`",
        (1, 31),
    ),
    (
        "workload in() { }",
        "expected workload name, found keyword `in`",
        (1, 10),
    ),
    (
        "pipeline p { channel c[2]; process a(produces c) { send c 1; } }",
        "expected `(` after channel name, found `1`",
        (1, 59),
    ),
    (
        "pipeline p { channel c[-1]; }",
        "expected channel depth (a non-negative integer literal), found `-`",
        (1, 24),
    ),
    (
        "pipeline p { process a(produces c; consumes d) { } }",
        "expected `)` to end the process header, found `;`",
        (1, 34),
    ),
    (
        "pipeline p { task k(); }",
        "expected `channel`, `process` or `}` in pipeline, found keyword `task`",
        (1, 14),
    ),
    (
        "schedule for w {\n    dispatch round_robin(4);\n    timing soon;\n}",
        "unknown timing policy `soon` (expected one of immediate, batched, interleaved, rate_limit)",
        (3, 12),
    ),
    (
        "schedule for w {\n    dispatch random;\n}",
        "unknown dispatch policy `random` (expected one of round_robin, affinity, hash, \
         work_steal, static_partition, threshold)",
        (2, 14),
    ),
    (
        "schedule for w {\n    frobnicate 3;\n}",
        "unknown schedule item `frobnicate` (expected one of executors, dispatch, streams, \
         stream_by, timing, task_graph, task_window, pipeline_depth, batch_deps, \
         dispatch_threshold)",
        (2, 5),
    ),
    (
        "schedule for w {\n    executors -1;\n}",
        "expected number of executors (a non-negative integer literal), found `-`",
        (2, 15),
    ),
    (
        "schedule for w {\n    task_graph {\n        deps exact\n    }\n}",
        "expected `;` after `deps` item, found `}`",
        (4, 5),
    ),
    (
        "schedule for w { task_graph { deps fuzzy; } }",
        "unknown deps mode `fuzzy` (expected one of exact, overlap, explicit, hybrid)",
        (1, 36),
    ),
    (
        "schedule for w { task_window 8 wait; }",
        "unknown window mode `wait` (expected one of stall, abort, benchmark)",
        (1, 32),
    ),
    (
        "schedule for w { dispatch threshold(x) { below 3: work_steal }; }",
        "missing `else: ...` level at the end of `threshold` levels",
        (1, 62),
    ),
    (
        "schedule for w { dispatch threshold(x) { above 3: work_steal, else: work_steal }; }",
        "expected `below` or `else`, found `above`",
        (1, 42),
    ),
    (
        "schedule for w { dispatch_threshold(x) { below 1u: cube, else: any }; }",
        "expected level bound (an integer literal), found `1u`",
        (1, 48),
    ),
    (
        "schedule for w { dispatch_threshold(x) { below 1: gpu, else: any }; }",
        "unknown pool `gpu` (expected one of vector, cube, any)",
        (1, 51),
    ),
    (
        "schedule for w { executors 2 }",
        "expected `;` after `executors` item, found `}`",
        (1, 30),
    ),
    (
        "schedule w { }",
        "expected `for` after `schedule`, found `w`",
        (1, 10),
    ),
    (
        "schedule for a { } schedule for b { }",
        "a module has at most one schedule",
        (1, 20),
    ),
    (
        "}",
        "expected a declaration (symbol, slot, tensor, axis, kernel, workload, pipeline, \
         schedule, space, tiers, plan or spatial_map), found `}`",
        (1, 1),
    ),
    (
        "symbol n: i64;\n42",
        "expected a declaration (symbol, slot, tensor, axis, kernel, workload, pipeline, \
         schedule, space, tiers, plan or spatial_map), found `42`",
        (2, 1),
    ),
    (
        "axis A = dense(1 # 2);",
        "unexpected character `#`",
        (1, 18),
    ),
    ("symbol é: i64;", "unexpected character `é`", (1, 8)),
];

#[test]
fn syntax_errors_have_exact_messages_and_positions() {
    for &(text, message, (line, col)) in ERRORS {
        let err = match parse(text) {
            Ok(m) => panic!("parsed {text:?} as\n{m}"),
            Err(e) => e,
        };
        let src = SourceFile::new("t.wsp", text);
        let at = src.line_col(err.loc.start as usize);
        assert_eq!(
            (err.message.as_str(), at),
            (message, (line, col)),
            "input: {text:?}"
        );
    }
}

#[test]
fn rendered_error_points_at_the_token() {
    let text = "tensor A: f16[4, 4]\n}";
    let err = parse(text).unwrap_err();
    assert_eq!(
        SourceFile::new("a.wsp", text).render(&err),
        "error: expected `;` after tensor declaration, found `}`\n --> a.wsp:2:1\n  |\n2 | }\n  \
         | ^ expected `;` after tensor declaration\n"
    );
    let open = parse("workload w() {").unwrap_err();
    assert_eq!(open.label().as_deref(), Some("opened here"));
}

// ----- nesting limit -----------------------------------------------------------------------

const TOO_DEEP: &str = "nesting too deep (the limit is 256 levels)";

/// `workload w() { set x = <expr>; }` — the block and the expression take two levels.
fn in_set(e: &str) -> String {
    format!("workload w() {{ set x = {e}; }}")
}

fn nested_blocks(n: usize) -> String {
    format!(
        "workload w() {{ {}task k();{} }}",
        "combine { ".repeat(n),
        " }".repeat(n)
    )
}

fn nested_thresholds(n: usize) -> String {
    format!(
        "schedule for w {{ dispatch {}work_steal{}; }}",
        "threshold(x) { else: ".repeat(n),
        " }".repeat(n)
    )
}

#[test]
fn nesting_up_to_the_limit_parses_and_round_trips() {
    let depth = MAX_DEPTH - 2;
    let texts = [
        in_set(&format!("{}1{}", "(".repeat(depth), ")".repeat(depth))),
        in_set(&format!("{}x", "!".repeat(depth))),
        in_set(&format!(
            "{}1{}",
            "c ? ".repeat(depth),
            " : 2".repeat(depth)
        )),
        // Printing must not nest deeper than the input did: `--5` stays `--5`, not `-(-5)`.
        in_set(&format!(
            "{}1 - --5{}",
            "1 - (".repeat(depth - 1),
            ")".repeat(depth - 1)
        )),
        in_set(&vec!["1"; MAX_DEPTH].join(" + ")),
        in_set(&format!(
            "{}1{}",
            "min(1, ".repeat(depth),
            ")".repeat(depth)
        )),
        in_set(&format!("{}1", "c ? 1 : ".repeat(depth))),
        nested_blocks(MAX_DEPTH - 1),
        nested_thresholds(MAX_DEPTH - 1),
    ];
    for text in &texts {
        let m = parse_ok(text);
        assert_eq!(parse(&m.to_string()), Ok(m));
    }
}

#[test]
fn nesting_beyond_the_limit_is_an_error() {
    let depth = MAX_DEPTH - 1;
    let cases = [
        in_set(&format!("{}1{}", "(".repeat(depth), ")".repeat(depth))),
        in_set(&format!("{}x", "!".repeat(depth))),
        in_set(&format!("{}x", "-".repeat(depth))),
        in_set(&format!(
            "{}1{}",
            "min(1, ".repeat(depth),
            ")".repeat(depth)
        )),
        in_set(&format!("{}1", "c ? 1 : ".repeat(depth))),
        nested_blocks(MAX_DEPTH),
        nested_thresholds(MAX_DEPTH),
    ];
    for text in &cases {
        let err = parse(text).unwrap_err();
        assert_eq!(err.message, TOO_DEEP, "input: {text}");
        assert!(err.loc.is_known());
    }
}

/// A chain of infix operators is not nesting: every walk reads it in a loop, so it parses and
/// prints back at any length (the round trip of 100,000 terms is in `tests/chains.rs`).
#[test]
fn flat_chains_of_any_length_parse_and_round_trip() {
    let n = 40 * MAX_DEPTH;
    let texts = [
        in_set(&vec!["1"; n].join(" + ")),
        in_set(&vec!["x"; n].join(" * ")),
        in_set(&vec!["x"; n].join(" - ")),
        in_set(&vec!["x * 2 - 1"; n].join(" + ")),
        in_set(&vec!["b"; n].join(" && ")),
        in_set(&vec!["b && c"; n].join(" || ")),
        in_set(&format!("{} + 1", vec!["(x + 1)"; n].join(" * "))),
        in_set(&vec!["1"; 100_000].join("+")),
    ];
    for text in &texts {
        let m = parse_ok(text);
        assert_eq!(parse(&m.to_string()), Ok(m));
    }
}

#[test]
fn pathological_input_is_an_error_not_a_crash() {
    let huge = [
        "(".repeat(200_000),
        "{".repeat(200_000),
        format!("workload w() {{ set x = {}", "-".repeat(200_000)),
        format!("workload w() {{ set x = {}", vec!["1"; 100_000].join("+")),
        "9".repeat(100_000),
    ];
    for text in &huge {
        assert!(parse(text).is_err());
    }
    let odd = [
        "\0",
        "-",
        "u",
        "@",
        "+:",
        "é",
        "\u{feff}symbol s: i64;",
        "/",
        "1u",
    ];
    for text in odd {
        assert!(parse(text).is_err(), "input: {text:?}");
    }
}
