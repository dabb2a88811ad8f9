//! Text → binary → text is the identity, and decode(encode(p)) == p, over generated programs.

use crate::programs;
use proptest::prelude::*;
use pto_wsp_ptog::{assemble, check::check, decode, disassemble, encode};

/// A valid program from `seed` (the first seed from it whose program checks), and how many
/// tries it took.
fn valid(seed: u64) -> (pto_wsp_ptog::Program, u64) {
    for k in 0..64 {
        let p = programs::program(seed.wrapping_mul(64).wrapping_add(k));
        if check(p.clone()).is_ok() {
            return (p, k + 1);
        }
    }
    panic!("no valid program from seed {seed} in 64 tries");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1500))]

    #[test]
    fn text_binary_text_is_the_identity(seed in any::<u64>()) {
        let (p, _) = valid(seed);
        let text = disassemble(&p);
        let checked = assemble(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(&checked.program, &p, "{}", text);
        let bytes = encode(&checked.program);
        let back = decode(&bytes).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(&back.program, &p);
        prop_assert_eq!(disassemble(&back.program), text);
        prop_assert_eq!(encode(&back.program), bytes);
    }
}

#[test]
fn the_generator_covers_every_instruction() {
    use pto_wsp_ptog::Op;
    use std::collections::BTreeSet;
    let mut seen = BTreeSet::new();
    let mut tries = 0;
    for seed in 0..400 {
        let (p, t) = valid(seed);
        tries += t;
        seen.extend(p.insns.iter().map(|i| i.op()));
    }
    let missing: Vec<&str> = Op::ALL
        .iter()
        .filter(|o| !seen.contains(o))
        .map(|o| o.mnemonic())
        .collect();
    assert!(missing.is_empty(), "never generated: {missing:?}");
    // Most generated programs are valid: the filter does not decide what is tested.
    assert!(tries < 400 * 4, "{tries} tries for 400 programs");
}
