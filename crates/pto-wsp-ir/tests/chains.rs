//! Flat operator chains of any length: a sum of 100,000 terms in a workload expression goes
//! through parse → validate → print → parse → resolve → expand on a thread with the default
//! 2 MiB stack, and its value is the one a plain loop in the test computes; random chains are
//! checked against the same kind of loop by a property test; true nesting stays bounded.

use proptest::prelude::*;
use pto_wsp_ir::eval::{Compiled, eval};
use pto_wsp_ir::expand::ExpandOptions;
use pto_wsp_ir::parse::{MAX_DEPTH, parse_expr};
use pto_wsp_ir::{Bindings, Expr, Module, Value, parse, validate};
use std::collections::BTreeMap;

/// Terms of the long chains.
const LONG: usize = 100_000;

/// Runs `f` on a thread with a 2 MiB stack (what a spawned thread gets by default): a walk that
/// recursed down a chain would overflow it and abort the test process.
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

/// One term of a chain: `sign · (c · i^power)`, written `c`, `i` or `i * c`.
#[derive(Clone, Copy, Debug)]
struct Term {
    minus: bool,
    c: i64,
    times_i: bool,
}

impl Term {
    fn text(self) -> String {
        match self.times_i {
            false => self.c.to_string(),
            true if self.c == 1 => "i".into(),
            true => format!("i * {}", self.c),
        }
    }

    fn value(self, i: i64) -> i64 {
        let v = if self.times_i { i * self.c } else { self.c };
        if self.minus { -v } else { v }
    }
}

/// `n` terms from a fixed linear congruential sequence (the first one with a `+` sign).
fn terms(n: usize, seed: u64) -> Vec<Term> {
    let mut s = seed;
    let mut next = || {
        s = s
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        s >> 33
    };
    (0..n)
        .map(|k| Term {
            minus: k > 0 && next() % 2 == 1,
            c: (next() % 9) as i64 + 1,
            times_i: next() % 3 == 0,
        })
        .collect()
}

/// The chain as text: `t0 + t1 - t2 …`.
fn chain_text(ts: &[Term]) -> String {
    let mut s = String::with_capacity(ts.len() * 8);
    for (k, t) in ts.iter().enumerate() {
        if k > 0 {
            s.push_str(if t.minus { " - " } else { " + " });
        }
        s.push_str(&t.text());
    }
    s
}

/// The chain's value at `i`, by a plain loop.
fn oracle(ts: &[Term], i: i64) -> i64 {
    let mut sum = 0i64;
    for t in ts {
        sum += t.value(i);
    }
    sum
}

/// A module whose one task passes the chain (over the loop variable `i`) as a scalar argument.
fn module_text(chain: &str) -> String {
    format!(
        "tensor Y: f32[4];\n\
         axis I = dense(4);\n\
         kernel k(out y: f32[1], v: i64) @vector;\n\
         workload main() {{\n    parallel_for i in I {{\n        task k(Y[i], {chain});\n    }}\n}}\n"
    )
}

#[test]
fn a_sum_of_100000_terms_goes_through_every_step_and_equals_a_plain_loop() {
    let ts = terms(LONG, 7);
    let text = module_text(&chain_text(&ts));
    let params = on_small_stack(move || {
        let m = parse(&text).unwrap_or_else(|e| panic!("{e}"));
        validate(&m).unwrap_or_else(|e| panic!("{e:?}"));
        let printed = m.to_string();
        let back = parse(&printed).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            back == m,
            "the printed module parses back to another module"
        );
        let copy: Module = m.clone();
        assert!(copy == m);
        let r = pto_wsp_ir::resolve(&m, &Default::default()).unwrap_or_else(|e| panic!("{e}"));
        let x = pto_wsp_ir::expand(&r, &Bindings::default(), &ExpandOptions::default())
            .unwrap_or_else(|e| panic!("{e}"));
        x.tasks.iter().map(|t| t.params.clone()).collect::<Vec<_>>()
    });
    let want: Vec<Vec<Value>> = (0..4).map(|i| vec![Value::I64(oracle(&ts, i))]).collect();
    assert_eq!(params, want);
}

#[test]
fn a_chain_of_100000_operators_clones_compares_hashes_prints_and_drops() {
    let ts = terms(LONG, 11);
    let text = chain_text(&ts);
    on_small_stack(move || {
        let e = parse_expr(&text).unwrap_or_else(|e| panic!("{e}"));
        let copy = e.clone();
        assert!(copy == e);
        // One term changed: unequal, whatever its place.
        let mut other = ts.clone();
        other[LONG / 2].c += 1;
        let f = parse_expr(&chain_text(&other)).unwrap();
        assert!(f != e);
        let mut set = std::collections::HashSet::new();
        set.insert(e.clone());
        assert!(set.contains(&copy) && !set.contains(&f));
        assert_eq!(e.to_string(), text);
        let debug = format!("{e:?}");
        assert!(debug.starts_with("Binary(") && debug.matches("Binary(").count() >= LONG - 1);
        for i in [0i64, 3, -5] {
            let env = |n: &str| (n == "i").then_some(Value::I64(i));
            assert_eq!(eval(&e, &env), Ok(Value::I64(oracle(&ts, i))));
            let c = Compiled::resolve(&e, &mut |n| (n == "i").then_some(0)).unwrap();
            assert_eq!(c.eval(&[Value::I64(i)]), Ok(Value::I64(oracle(&ts, i))));
        }
    });
}

#[test]
fn long_products_and_logical_chains_evaluate_like_plain_loops() {
    // `x * x * …` (x = 1 or -1) and `b && b && … || …`.
    let n = LONG;
    let product = vec!["x"; n].join(" * ");
    let mut logic = vec!["b"; n].join(" && ");
    logic.push_str(" || false");
    on_small_stack(move || {
        let p = parse_expr(&product).unwrap();
        let l = parse_expr(&logic).unwrap();
        for (x, b) in [(1i64, true), (-1, false)] {
            let mut want = 1i64;
            for _ in 0..n {
                want *= x;
            }
            let mut all = true;
            for _ in 0..n {
                all = all && b;
            }
            let env: BTreeMap<String, Value> = [
                ("x".to_string(), Value::I64(x)),
                ("b".to_string(), Value::Bool(b)),
            ]
            .into();
            assert_eq!(eval(&p, &env), Ok(Value::I64(want)));
            assert_eq!(eval(&l, &env), Ok(Value::Bool(all)));
        }
    });
}

#[test]
fn true_nesting_is_still_bounded_with_a_located_message() {
    // Parentheses around a sum nest; the sum itself does not.
    let deep = format!(
        "{}1 + 2{}",
        "(".repeat(MAX_DEPTH + 1),
        ")".repeat(MAX_DEPTH + 1)
    );
    let text = module_text(&deep);
    let e = parse(&text).unwrap_err();
    assert_eq!(
        e.message,
        format!("nesting too deep (the limit is {MAX_DEPTH} levels)")
    );
    let source = pto_wsp_ir::SourceFile::new("deep.wsp", text.clone());
    let rendered = source.render(&e);
    assert!(rendered.contains("--> deep.wsp:6:"), "{rendered}");
    // A long sum inside as many parentheses as allowed parses.
    let ok = format!(
        "{}{}{}",
        "(".repeat(MAX_DEPTH - 8),
        vec!["1"; 10_000].join(" + "),
        ")".repeat(MAX_DEPTH - 8)
    );
    assert!(parse(&module_text(&ok)).is_ok());
}

/// A chain of `+ - *` over small literals and `x`, `y`: its text and its value by a plain loop
/// (products first, then the sum, as the operators' precedence says).
fn arb_chain() -> impl Strategy<Value = (String, i64, i64, i64)> {
    let operand = prop_oneof![
        (-9i64..10).prop_map(|c| c.to_string()),
        Just("x".to_string()),
        Just("y".to_string())
    ];
    (
        prop::collection::vec((0u8..3, operand), 1..3000),
        -5i64..6,
        -5i64..6,
    )
        .prop_map(|(items, x, y)| {
            let value = |s: &str| match s {
                "x" => x,
                "y" => y,
                c => c.parse::<i64>().unwrap(),
            };
            let mut text = String::new();
            let (mut sum, mut product, mut sign, mut run) = (0i64, 1i64, 1i64, 0usize);
            for (k, (op, v)) in items.iter().enumerate() {
                // At most 3 factors in a row, so no product overflows.
                let op = if *op == 2 && run >= 2 { 0 } else { *op };
                if k > 0 {
                    match op {
                        2 => {
                            text.push_str(" * ");
                            product *= value(v);
                            run += 1;
                            continue_text(&mut text, v);
                            continue;
                        }
                        o => {
                            sum += sign * product;
                            sign = if o == 0 { 1 } else { -1 };
                            text.push_str(if o == 0 { " + " } else { " - " });
                        }
                    }
                }
                product = value(v);
                run = 0;
                continue_text(&mut text, v);
            }
            sum += sign * product;
            (text, x, y, sum)
        })
}

/// Appends an operand, parenthesising a negative literal after an operator.
fn continue_text(text: &mut String, v: &str) {
    if v.starts_with('-') && !text.is_empty() {
        text.push('(');
        text.push_str(v);
        text.push(')');
    } else {
        text.push_str(v);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(pto_wsp_ir::soak::cases(64)))]

    /// The evaluator, the compiled form and the printer agree with a plain loop on random
    /// chains.
    #[test]
    fn random_chains_evaluate_like_a_plain_loop((text, x, y, want) in arb_chain()) {
        let e = parse_expr(&text).unwrap();
        let env: BTreeMap<String, Value> =
            [("x".to_string(), Value::I64(x)), ("y".to_string(), Value::I64(y))].into();
        prop_assert_eq!(eval(&e, &env), Ok(Value::I64(want)));
        let c = Compiled::resolve(&e, &mut |n| match n {
            "x" => Some(0),
            "y" => Some(1),
            _ => None,
        })
        .unwrap();
        prop_assert_eq!(c.eval(&[Value::I64(x), Value::I64(y)]), Ok(Value::I64(want)));
        let back: Expr = parse_expr(&e.to_string()).unwrap();
        prop_assert!(back == e);
    }
}
