//! Data-dependent generation in the IR: `while COND max N { }` and `break if COND;` through
//! parse, print, validate, resolve, the builder and the reference expander; computed reads
//! refused by the plain expander with the read's location; an unbound read located.

use pto_wsp_ir::builder::{ModuleBuilder, e};
use pto_wsp_ir::*;

/// The module resolved (as a front end does once), then expanded: the reference expander reads
/// the resolved program.
fn expand(m: &Module, b: &Bindings, o: &ExpandOptions) -> Result<Expansion, ExpandError> {
    pto_wsp_ir::expand(&resolved(m)?, b, o)
}

/// `m` resolved, as a front end resolves it once.
fn resolved(m: &Module) -> Result<pto_wsp_ir::Resolved, ExpandError> {
    Ok(pto_wsp_ir::resolve(m, &Default::default())?)
}

/// [`expand`], each task to `f`.
fn expand_each(
    m: &Module,
    b: &Bindings,
    o: &ExpandOptions,
    f: impl FnMut(u32, &ExpandedTask),
) -> Result<ExpandSummary, ExpandError> {
    pto_wsp_ir::expand_each(&resolved(m)?, b, o, f)
}

fn parse_ok(text: &str) -> Module {
    parse(text).unwrap_or_else(|e| panic!("{}", SourceFile::new("t.wsp", text).render(&e)))
}

const LOOP: &str = "slot it: i64;

kernel k(n: i64);

workload main() {
    while it < 10 max 4 {
        task k(it);
        set it = it + 1;
        break if it == 3;
    }
}
";

#[test]
fn while_and_break_print_canonically_and_round_trip() {
    let m = parse_ok(LOOP);
    assert_eq!(m.to_string(), LOOP);
    assert_eq!(parse_ok(&m.to_string()), m);
    validate(&m).expect("valid");
}

#[test]
fn builder_makes_the_parsed_module() {
    let mut b = ModuleBuilder::new();
    b.slot("it", ScalarType::I64);
    b.kernel("k").scalar("n", ScalarType::I64);
    b.workload("main", |w| {
        w.while_max(e("it").lt(10), 4, |w| {
            w.task("k", [e("it").into()]);
            w.set("it", e("it") + 1);
            w.break_if(e("it").eq_(3));
        });
    });
    assert_eq!(b.finish(), parse_ok(LOOP));
}

#[test]
fn while_without_max_is_a_parse_error_at_the_body() {
    let text = "kernel k();\nworkload main() {\n    while true { task k(); }\n}\n";
    let err = parse(text).expect_err("`max` is mandatory");
    assert!(err.message.contains("`max N`"), "{}", err.message);
    let rendered = SourceFile::new("t.wsp", text).render(&err);
    assert!(rendered.contains("t.wsp:3:16"), "{rendered}");
}

#[test]
fn break_outside_while_is_a_validation_error() {
    let text = "kernel k();\nworkload main() {\n    break if true;\n    task k();\n}\n";
    let errs = validate(&parse_ok(text)).expect_err("invalid");
    assert!(
        errs.iter()
            .any(|e| matches!(e, ValidationError::BreakOutsideWhile { .. })),
        "{errs:?}"
    );
    // A `break` does not leave a called workload's caller's loop.
    let text = "kernel k();\nworkload w() { break if true; }\n\
                workload main() { while true max 2 { call w(); } }\n";
    assert!(validate(&parse_ok(text)).is_err());
    let m = parse_ok(text);
    let res = resolve(&m, &ResolveOptions::default());
    assert!(matches!(res, Err(ResolveError::Malformed { .. })));
}

fn params(x: &Expansion) -> Vec<i64> {
    x.tasks
        .iter()
        .map(|t| match t.params[0] {
            Value::I64(v) => v,
            v => panic!("{v:?}"),
        })
        .collect()
}

#[test]
fn while_runs_until_the_condition_fails_the_bound_or_a_break() {
    let m = parse_ok(LOOP);
    // `it` starts at 0: tasks 0, 1, 2, then the break.
    let x = expand(&m, &Bindings::new(), &ExpandOptions::default()).unwrap();
    assert_eq!(params(&x), vec![0, 1, 2]);
    // Starting at 5: the bound (4 iterations) ends it, the condition still true.
    let b = Bindings::new().slot("it", 5i64);
    let mut n = 0;
    let s = expand_each(&m, &b, &ExpandOptions::default(), |_, _| n += 1).unwrap();
    assert_eq!((n, s.loops_at_max), (4, 1));
    // Starting at 10: no iteration.
    let b = Bindings::new().slot("it", 10i64);
    let x = expand(&m, &b, &ExpandOptions::default()).unwrap();
    assert!(x.tasks.is_empty());
    // Iterations are ordered like `for_each`.
    let b = Bindings::new().slot("it", 4i64);
    let x = expand(&m, &b, &ExpandOptions::default()).unwrap();
    assert_eq!(params(&x), vec![4, 5, 6, 7]);
    let edges: Vec<(u32, u32)> = x
        .order
        .iter()
        .map(|o| (o.before.start, o.after.start))
        .collect();
    assert_eq!(edges, vec![(0, 1), (1, 2), (2, 3)]);
}

#[test]
fn break_closes_nested_ordered_frames() {
    let text = "slot s: i64;
kernel k(n: i64);
axis A = dense(5);
workload main() {
    while true max 3 {
        for_each i in A {
            task k(i);
            set s = s + 1;
            break if s == 7;
        }
    }
}
";
    let m = parse_ok(text);
    validate(&m).unwrap();
    let x = expand(&m, &Bindings::new(), &ExpandOptions::default()).unwrap();
    // Iteration 1: i = 0..5 (s = 5); iteration 2: i = 0, 1 (s = 7) and the break.
    assert_eq!(params(&x), vec![0, 1, 2, 3, 4, 0, 1]);
    // Every edge has both ranges inside the expansion and the `while` iterations are ordered.
    for o in &x.order {
        assert!(o.before.end <= o.after.start && o.after.end <= 7, "{o:?}");
    }
    assert!(
        x.order
            .iter()
            .any(|o| o.before == (0..5) && o.after == (5..7))
    );
}

/// A module whose `load` reads a tensor a task writes.
const COMPUTED: &str = "slot n: i64;
tensor F: i64[4];
kernel w(out f: i64[1]);
kernel k(v: i64);
workload main() {
    task w(F[0]);
    load n = F[0];
    task k(n);
}
schedule for main { task_graph { deps overlap; } }
";

#[test]
fn the_plain_expander_refuses_a_computed_read_naming_it() {
    let m = parse_ok(COMPUTED);
    validate(&m).unwrap();
    let res = resolve(&m, &ResolveOptions::default()).unwrap();
    assert_eq!(res.computed_reads().len(), 1);
    // Binding the tensor does not make the read free: tasks write it.
    let b = Bindings::new().array("F", vec![1, 2, 3, 4]);
    let err = expand(&m, &b, &ExpandOptions::default()).expect_err("computed");
    assert!(matches!(err, ExpandError::ComputedRead { ref tensor, .. } if tensor == "F"));
    let rendered = SourceFile::new("c.wsp", COMPUTED).render(&err);
    assert!(rendered.contains("c.wsp:7:5"), "{rendered}");
}

#[test]
fn a_computed_read_under_explicit_deps_is_refused() {
    let text = COMPUTED.replace("deps overlap", "deps explicit");
    let m = parse_ok(&text);
    let err = resolve(&m, &ResolveOptions::default()).expect_err("unorderable");
    let rendered = SourceFile::new("c.wsp", &text).render(&err);
    assert!(
        rendered.contains("deps explicit") && rendered.contains("c.wsp:7:5"),
        "{rendered}"
    );
}

#[test]
fn an_unbound_read_names_the_tensor_and_its_location() {
    let text = "slot n: i64;\ntensor F: i64[4];\nkernel k(n: i64);\n\
                workload main() {\n    load n = F[1];\n    task k(n);\n}\n";
    let m = parse_ok(text);
    let err = expand(&m, &Bindings::new(), &ExpandOptions::default()).expect_err("unbound");
    let rendered = SourceFile::new("u.wsp", text).render(&err);
    assert!(
        rendered.contains("tensor `F` are not bound") && rendered.contains("u.wsp:5:5"),
        "{rendered}"
    );
    // Bound, it reads the host's value.
    let b = Bindings::new().array("F", vec![0, 9, 0, 0]);
    let x = expand(&m, &b, &ExpandOptions::default()).unwrap();
    assert_eq!(params(&x), vec![9]);
    // The builder's `load` makes the same module.
    let mut mb = ModuleBuilder::new();
    mb.slot("n", ScalarType::I64);
    mb.tensor("F", DType::I64, [4.into()]);
    mb.kernel("k").scalar("n", ScalarType::I64);
    mb.workload("main", |w| {
        w.load("n", "F", [Expr::Int(1)]);
        w.task("k", [e("n").into()]);
    });
    assert_eq!(mb.finish(), m);
}

#[test]
fn while_runs_inside_a_pipeline_process() {
    let text = "slot it: i64;
kernel k(v: i64);
pipeline p {
    channel c[1];
    process a(produces c) {
        while it < 3 max 10 {
            send c(it);
            set it = it + 1;
        }
    }
    process b(consumes c) {
        consume c as v {
            task k(v);
        }
    }
}
";
    let m = parse_ok(text);
    validate(&m).unwrap();
    let x = expand(&m, &Bindings::new(), &ExpandOptions::default()).unwrap();
    assert_eq!(params(&x), vec![0, 1, 2]);
    // A `break` needs a `while` in its own process.
    let bad = text.replace("task k(v);", "task k(v); break if v == 1;");
    assert!(validate(&parse_ok(&bad)).is_err());
}
