//! Plan-Descriptor-Execute declarations in the text format and the builder: the example parses,
//! prints and parses back equal; the builder gives the parser's IR; every mistake the validator
//! or parser finds is reported with its exact message at its `line:column`.

use pto_wsp_ir::builder::{ModuleBuilder, at, e, region, span};
use pto_wsp_ir::plan::{AffinityKind, OrderKind, SpaceEnd, TileKind};
use pto_wsp_ir::{DType, Module, ScalarType, SourceFile, parse, validate};

fn example() -> String {
    let path = format!(
        "{}/../../examples/pde/decode_attention.wsp",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn the_decode_attention_plans_parse_validate_print_and_parse_back_equal() {
    let m = parse(&example()).unwrap();
    validate(&m).unwrap();
    assert_eq!(m.spaces.len(), 2);
    assert_eq!(m.tier_tables.len(), 2);
    assert_eq!(m.plans.len(), 2);
    let printed = m.to_string();
    let again = parse(&printed).unwrap_or_else(|e| panic!("{e}\n{printed}"));
    assert_eq!(again, m);
    assert_eq!(again.to_string(), printed, "printing is canonical");
    assert!(printed.contains("    tile(c, 512);\n"), "{printed}");
    assert!(
        printed.contains("            for j, lo, hi in c {\n"),
        "{printed}"
    );
}

const SMALL: &str = "symbol n: i64;
tensor lens: i32[n];
tensor X: f32[n, 64];
tensor W: f32[256];
kernel copy(in x: f32[?, ?], out y: f32[?]);
space S {
    axis r from 0 to n;
    axis c from 0 to dynamic;
    tile(c, 16, pad_last);
    constraint n <= 64;
}
tiers T {
    tier small <= 16 workspace 16;
    tier big default workspace 64;
}
plan p over S with T {
    fields len;
    workspace W;
    bind end(c) = 64;
    kernel small => copy(X[r, start +: 16], W[workspace +: 16]);
    kernel big => copy(X[r, start +: 16], W[workspace +: 16]);
    generate {
        for i in r {
            load len = lens[i];
            let t = select_tier(T, len);
            for j, lo, hi in c {
                if lo >= len {
                    continue;
                } else {
                    let ws = alloc(t, i, j);
                    emit(tier = t, r = i, c = j, start = lo, end = min(hi, len), workspace = ws, len = len);
                }
            }
        }
    }
}
";

fn small_built(prefetch: bool) -> Module {
    small_built_with(prefetch, |_| {})
}

fn small_built_with(
    prefetch: bool,
    schedule: impl FnOnce(&mut pto_wsp_ir::builder::plan::PlanBuilder),
) -> Module {
    let mut m = ModuleBuilder::new();
    m.symbol("n", ScalarType::I64);
    m.tensor("lens", DType::I32, [e("n")]);
    m.tensor("X", DType::F32, [e("n"), 64.into()]);
    m.tensor("W", DType::F32, [256.into()]);
    m.kernel("copy")
        .input("x", DType::F32, [None, None])
        .output("y", DType::F32, [None]);
    m.space("S", |s| {
        s.axis("r", 0, SpaceEnd::Symbol("n".into()))
            .axis("c", 0, SpaceEnd::Dynamic)
            .tile("c", TileKind::PadLast(16))
            .constraint(e("n").le(64));
    });
    m.tier_table("T", [("small", Some(16), 16), ("big", None, 64)]);
    let call = || {
        [
            region("X", [at(e("r")), span(e("start"), 16)]).into(),
            region("W", [span(e("workspace"), 16)]).into(),
        ]
    };
    m.plan("p", "S", "T", |p| {
        p.fields(["len"]).workspace("W").bind_end("c", 64);
        p.kernel("small", "copy", call())
            .kernel("big", "copy", call());
        if prefetch {
            p.prefetch(
                "r",
                1,
                "copy",
                [
                    region("X", [at(e("r")), span(0, 16)]).into(),
                    region("W", [span(0, 16)]).into(),
                ],
            );
        }
        schedule(p);
        p.generate(|g| {
            g.for_each(["i"], "r", |g| {
                g.load("len", "lens", [e("i")]);
                g.select_tier("t", "T", e("len"));
                g.for_each(["j", "lo", "hi"], "c", |g| {
                    g.if_else(
                        e("lo").ge(e("len")),
                        |g| {
                            g.continue_();
                        },
                        |g| {
                            g.alloc("ws", e("t"), [e("i"), e("j")]);
                            g.emit([
                                ("tier", e("t")),
                                ("r", e("i")),
                                ("c", e("j")),
                                ("start", e("lo")),
                                ("end", pto_wsp_ir::Expr::min(e("hi"), e("len"))),
                                ("workspace", e("ws")),
                                ("len", e("len")),
                            ]);
                        },
                    );
                });
            });
        });
    });
    m.finish()
}

#[test]
fn the_builder_gives_the_parsers_ir_and_it_validates() {
    let parsed = parse(SMALL).unwrap();
    validate(&parsed).unwrap();
    let text_again = parse(&parsed.to_string()).unwrap();
    assert_eq!(text_again, parsed);
    assert_eq!(small_built(false), parsed);
    // With `prefetch`.
    let text = SMALL.replace(
        "    generate {",
        "    prefetch(r, 1) => copy(X[r, 0 +: 16], W[0 +: 16]);\n    generate {",
    );
    let parsed = parse(&text).unwrap();
    validate(&parsed).unwrap();
    assert_eq!(parse(&parsed.to_string()).unwrap(), parsed);
    assert!(parsed.to_string().contains("    prefetch(r, 1) => copy("));
    assert_eq!(small_built(true), parsed);
    let bad = text.replace("prefetch(r, 1)", "prefetch(q, 0)");
    let errs: Vec<String> = validate(&parse(&bad).unwrap())
        .unwrap_err()
        .iter()
        .map(|e| e.to_string())
        .collect();
    assert_eq!(
        errs,
        [
            "plan `p`: the prefetch depth must be 1 to 2^32 - 1",
            "plan `p`: `prefetch` names `q`, not an axis of space `S`"
        ]
    );
}

/// The first validation error of `text`: its message and `line:column`.
fn first_error(text: &str) -> (String, (usize, usize)) {
    let m = parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let errs = validate(&m).expect_err(text);
    let src = SourceFile::new("t.wsp", text);
    let at = src.line_col(errs[0].loc().start as usize);
    (errs[0].to_string(), at)
}

#[test]
fn mistakes_are_reported_naming_space_field_or_tier_at_their_line_and_column() {
    let cases: &[(&str, &str, &str, (usize, usize))] = &[
        (
            "    kernel big => copy(X[r, start +: 16], W[workspace +: 16]);\n",
            "",
            "plan `p`: tier `big` of `T` has no kernel (`kernel big => ...;`)",
            (16, 6),
        ),
        (
            "emit(tier = t,",
            "emit(tier = t, speed = 1,",
            "plan `p`: the descriptor has no field `speed` (fields: tier, start, end, workspace, r, c, len)",
            (31, 36),
        ),
        (
            "    generate {\n",
            "    generate {\n        continue;\n",
            "plan `p`: `continue` outside a `for`",
            (23, 9),
        ),
        (
            "    bind end(c) = 64;\n",
            "",
            "plan `p`: the dynamic end of axis `c` is not bound (`bind end(c) = ...;`)",
            (16, 6),
        ),
        (
            "fields len;",
            "fields len, n;",
            "plan `p`: field `n` has the name of a top-level declaration",
            (17, 17),
        ),
        (
            "tier big default workspace 64;",
            "tier big <= 8 workspace 64;",
            "tiers `T`: the last tier `big` must be `default`",
            (14, 10),
        ),
        (
            "load len = lens[i];",
            "load len = X[i, 0];",
            "plan `p`: `load` reads `X`, which is not an integer tensor",
            (24, 24),
        ),
        (
            "tile(c, 16, pad_last);",
            "tile(d, 16, pad_last);",
            "space `S`: `tile` names axis `d`, which is not declared",
            (9, 10),
        ),
        (
            "copy(X[r, start +: 16], W[workspace +: 16]);\n    generate",
            "copy(X[r, start +: 16], W[speed +: 16]);\n    generate",
            "plan `p`: unknown name `speed` (in scope: symbols, tier, start, end, workspace, r, c, len)",
            (21, 45),
        ),
    ];
    for (from, to, message, at) in cases {
        assert!(SMALL.contains(from), "{from}");
        let text = SMALL.replacen(from, to, 1);
        assert_eq!(
            first_error(&text),
            (message.to_string(), *at),
            "replacing {from:?} by {to:?}"
        );
    }
}

#[test]
fn a_plan_without_a_generate_block_is_a_syntax_error() {
    let text =
        "space S { axis r from 0 to 4; }\ntiers T { tier a default; }\nplan p over S with T { }\n";
    let err = parse(text).unwrap_err();
    assert_eq!(err.message, "a plan needs a `generate { ... }` block");
    assert_eq!(
        SourceFile::new("t", text).line_col(err.loc.start as usize),
        (3, 1)
    );
}

const SCHEDULE: &str =
    "    order(r, interleaved(4));\n    order(c, parallel);\n    affinity(r, core_group(2));\n";

#[test]
fn order_and_affinity_parse_print_back_and_match_the_builder() {
    let text = SMALL.replace("    generate {", &format!("{SCHEDULE}    generate {{"));
    let parsed = parse(&text).unwrap();
    validate(&parsed).unwrap();
    let printed = parsed.to_string();
    assert!(printed.contains(SCHEDULE), "{printed}");
    assert_eq!(parse(&printed).unwrap(), parsed);
    let built = small_built_with(false, |p| {
        p.order("r", OrderKind::Interleaved(4))
            .order("c", OrderKind::Parallel)
            .affinity("r", AffinityKind::CoreGroup(2));
    });
    assert_eq!(built, parsed);
    assert_eq!(built.to_string(), printed);
    for (item, kind) in [
        ("order(c, sequential);", "sequential"),
        ("affinity(c, core_local);", "core_local"),
        ("affinity(c, spread);", "spread"),
    ] {
        let text = SMALL.replace("    generate {", &format!("    {item}\n    generate {{"));
        let m = parse(&text).unwrap();
        validate(&m).unwrap();
        assert!(m.to_string().contains(&format!("    {item}\n")), "{kind}");
    }
}

#[test]
fn order_and_affinity_mistakes_are_reported_at_their_line_and_column() {
    // Inserted before `generate`, which is line 22 of SMALL.
    let cases: &[(&str, &str, (usize, usize))] = &[
        (
            "order(q, parallel);",
            "plan `p`: `order` names `q`, not an axis of space `S`",
            (22, 11),
        ),
        (
            "order(r, interleaved(0));",
            "plan `p`: the interleaving group size must be 1 to 2^32 - 1",
            (22, 5),
        ),
        (
            "order(r, parallel);\n    order(r, sequential);",
            "plan `p`: the order of axis `r` is given twice",
            (23, 11),
        ),
        (
            "order(r, interleaved(2));\n    order(c, interleaved(2));",
            "plan `p`: axis `c`: only one axis can be interleaved",
            (23, 5),
        ),
        (
            "affinity(z, core_local);",
            "plan `p`: `affinity` names `z`, not an axis of space `S`",
            (22, 14),
        ),
        (
            "affinity(r, core_group(0));",
            "plan `p`: the core group size must be 1 to 2^32 - 1",
            (22, 5),
        ),
    ];
    for (item, message, at) in cases {
        let text = SMALL.replace("    generate {", &format!("    {item}\n    generate {{"));
        assert_eq!(first_error(&text), (message.to_string(), *at), "{item}");
    }
    // Syntax: an unknown order or affinity, a second affinity.
    for (item, at) in [
        ("order(r, backwards);", (22, 14)),
        ("affinity(r, nearby);", (22, 17)),
        ("affinity(r, spread);\n    affinity(c, spread);", (23, 5)),
    ] {
        let text = SMALL.replace("    generate {", &format!("    {item}\n    generate {{"));
        let err = parse(&text).unwrap_err();
        assert_eq!(
            SourceFile::new("t", &text).line_col(err.loc.start as usize),
            at,
            "{item}: {}",
            err.message
        );
    }
}

#[test]
fn emit_takes_select_tier_in_place_prints_it_back_and_checks_its_table() {
    let text = example()
        .replace("            let t = select_tier(ByLength, kv);\n", "")
        .replace("emit(tier = t,", "emit(tier = select_tier(ByLength, kv),");
    let m = parse(&text).unwrap_or_else(|e| panic!("{e}"));
    validate(&m).unwrap();
    let printed = m.to_string();
    assert!(
        printed.contains("emit(tier = select_tier(ByLength, kv), r = i, c = j"),
        "{printed}"
    );
    assert_eq!(parse(&printed).unwrap(), m);
    let wrong = text.replace(
        "emit(tier = select_tier(ByLength, kv),",
        "emit(tier = select_tier(Merge, kv),",
    );
    let m = parse(&wrong).unwrap();
    let errs = validate(&m).unwrap_err();
    assert!(
        errs[0]
            .to_string()
            .contains("`select_tier` names `Merge`; the plan's tier table is `ByLength`"),
        "{}",
        errs[0]
    );
}
