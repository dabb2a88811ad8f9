//! Flat operator chains in the bytecode: a task argument that is a sum of 15,000 terms over the
//! loop variable encodes, decodes, disassembles and interprets (every executor against the
//! expander) on a thread with the default 2 MiB stack, with the value a plain loop in the test
//! computes; a constant sum of 100,000 terms folds to one constant; a sum of 100,000 terms over a
//! variable is more than the format's expression ops and is refused with that message.

use super::common::{check_module, encode};
use pto_wsp_bytecode::{EncodeOptions, Program};
use pto_wsp_ir::{Bindings, Value, parse};

/// Runs `f` on a thread with a 2 MiB stack (what a spawned thread gets by default).
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

/// `n` terms `(sign, coefficient, times i)` from a fixed linear congruential sequence.
fn terms(n: usize, with_i: bool) -> Vec<(bool, i64, bool)> {
    let mut s = 12345u64;
    let mut next = || {
        s = s
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        s >> 33
    };
    (0..n)
        .map(|k| {
            (
                k > 0 && next() % 2 == 1,
                (next() % 9) as i64 + 1,
                with_i && next() % 2 == 0,
            )
        })
        .collect()
}

fn text(ts: &[(bool, i64, bool)]) -> String {
    let mut s = String::new();
    for (k, &(minus, c, times_i)) in ts.iter().enumerate() {
        if k > 0 {
            s.push_str(if minus { " - " } else { " + " });
        }
        if times_i {
            s.push_str(&format!("i * {c}"));
        } else {
            s.push_str(&c.to_string());
        }
    }
    s
}

/// The sum at `i`, by a plain loop.
fn oracle(ts: &[(bool, i64, bool)], i: i64) -> i64 {
    let mut sum = 0;
    for &(minus, c, times_i) in ts {
        let v = if times_i { c * i } else { c };
        sum += if minus { -v } else { v };
    }
    sum
}

fn module(chain: &str) -> String {
    format!(
        "tensor Y: f32[4];\naxis I = dense(4);\nkernel k(out y: f32[1], v: i64) @vector;\n\
         workload main() {{\n    parallel_for i in I {{\n        task k(Y[i], {chain});\n    }}\n}}\n"
    )
}

#[test]
fn a_long_sum_encodes_decodes_disassembles_and_runs_like_a_plain_loop() {
    let ts = terms(15_000, true);
    let src = module(&text(&ts));
    let (params, listing) = on_small_stack(move || {
        let m = parse(&src).unwrap();
        let x = check_module(&m, &Bindings::default(), Some(2));
        let bytes = encode(&m, &EncodeOptions::default()).unwrap();
        let listing = Program::decode(&bytes).unwrap().disassemble();
        let params: Vec<Vec<Value>> = x.tasks.iter().map(|t| t.params.clone()).collect();
        (params, listing)
    });
    let want: Vec<Vec<Value>> = (0..4).map(|i| vec![Value::I64(oracle(&ts, i))]).collect();
    assert_eq!(params, want);
    // The disassembler prints the whole chain back.
    let muls = ts.iter().filter(|t| t.2).count();
    assert!(
        listing.matches(" * ").count() >= muls,
        "{}",
        &listing[..2000]
    );
}

#[test]
fn a_constant_sum_of_100000_terms_folds_and_a_variable_one_is_refused_by_its_limit() {
    let constant = terms(100_000, false);
    let variable = terms(100_000, true);
    let (c, v) = (module(&text(&constant)), module(&text(&variable)));
    let (x, err) = on_small_stack(move || {
        let m = parse(&c).unwrap();
        let x = check_module(&m, &Bindings::default(), None);
        let err = encode(&parse(&v).unwrap(), &EncodeOptions::default()).unwrap_err();
        (x, err)
    });
    let want = Value::I64(oracle(&constant, 0));
    assert!(x.tasks.iter().all(|t| t.params == [want]));
    assert!(err.contains("too many expression ops"), "{err}");
}
