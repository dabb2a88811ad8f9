//! Decoder robustness: truncations, bit flips, byte changes and random bytes never panic; what
//! decodes can be bound and interpreted without panicking either. (The message of each error
//! kind is tested beside the decoder, in `src/decode/tests.rs`.)

use super::common::encode;
use super::examples::{EXAMPLES, example};
use proptest::prelude::*;
use pto_wsp_bytecode::{EncodeOptions, ExecutorConfig, Interpreter, Program, Task, TaskSink};
use pto_wsp_ir::{Bindings, DataRead, ReadRefused};
use std::ops::ControlFlow;

/// Stops after a few thousand tasks; answers computed reads with small values that vary, so
/// `while` loops and `break`s take both ways.
struct Budget(u32);

impl TaskSink for Budget {
    fn task(&mut self, t: &Task<'_>) -> ControlFlow<()> {
        let _ = t.to_expanded();
        self.0 += 1;
        if self.0 >= 5_000 {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    }

    fn read(&mut self, read: &DataRead<'_>, out: &mut Vec<i64>) -> Result<(), ReadRefused> {
        let n: i64 = read.size.iter().product();
        out.extend((0..n).map(|i| (i + i64::from(self.0)) % 4));
        Ok(())
    }
}

/// The data-dependent examples (computed reads, `while`, `break if`): no `//@ bind` lines.
const DATADEP: &[&str] = &["moe_routed", "converge", "early_exit"];

/// Decodes, and if that works binds and runs two executors with a step limit. Never panics
/// (a panic fails the calling test).
fn exercise(bytes: &[u8], bindings: &Bindings) {
    let Ok(prog) = Program::decode(bytes) else {
        return;
    };
    let _ = prog.disassemble();
    let Ok(bound) = prog.bind(bindings) else {
        return;
    };
    for executor in [None, Some(0)] {
        let config = ExecutorConfig {
            executor,
            executors: None,
            owners: None,
            max_steps: Some(50_000),
        };
        if let Ok(mut interp) = Interpreter::new(&prog, &bound, config) {
            let _ = interp.run(&mut Budget(0));
        }
    }
}

fn encoded() -> Vec<(Vec<u8>, Bindings)> {
    let mut out: Vec<(Vec<u8>, Bindings)> = EXAMPLES
        .iter()
        .map(|name| {
            let (m, b) = example(name);
            (encode(&m, &EncodeOptions::default()).expect("encodes"), b)
        })
        .collect();
    for name in DATADEP {
        let (m, b) = example(&format!("datadep/{name}"));
        out.push((encode(&m, &EncodeOptions::default()).expect("encodes"), b));
    }
    out
}

#[test]
fn every_truncation_is_an_error() {
    for (bytes, _) in encoded() {
        for n in 0..bytes.len() {
            assert!(
                Program::decode(&bytes[..n]).is_err(),
                "a prefix of {n} bytes decoded"
            );
        }
        assert!(Program::decode(&bytes).is_ok());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(pto_wsp_ir::soak::cases(600)))]

    #[test]
    fn flipped_bits_never_panic(
        which in 0..EXAMPLES.len() + DATADEP.len(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 0u8..8), 1..4),
    ) {
        let all = encoded();
        let (bytes, b) = &all[which];
        let mut bytes = bytes.clone();
        for (i, bit) in flips {
            let at = i.index(bytes.len());
            bytes[at] ^= 1 << bit;
        }
        exercise(&bytes, b);
    }

    #[test]
    fn changed_bytes_never_panic(
        which in 0..EXAMPLES.len() + DATADEP.len(),
        changes in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let all = encoded();
        let (bytes, b) = &all[which];
        let mut bytes = bytes.clone();
        for (i, v) in changes {
            let at = i.index(bytes.len());
            bytes[at] = v;
        }
        exercise(&bytes, b);
    }

    #[test]
    fn random_bytes_never_panic(tail in prop::collection::vec(any::<u8>(), 0..400), len_ok in any::<bool>()) {
        // A plausible header (magic, version) so decoding gets past the first checks.
        let mut bytes = b"PTOW".to_vec();
        bytes.extend_from_slice(&1u32.to_le_bytes());
        bytes.extend_from_slice(&tail);
        if len_ok && bytes.len() >= 52 {
            let n = bytes.len() as u32;
            bytes[48..52].copy_from_slice(&n.to_le_bytes());
        }
        exercise(&bytes, &Bindings::new());
    }
}

/// `docs/BYTECODE.md` lists every opcode of the table (by byte or byte range) with its mnemonic
/// stem.
#[test]
fn the_format_document_lists_every_opcode() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/BYTECODE.md");
    let doc = std::fs::read_to_string(&path).expect("docs/BYTECODE.md");
    let mut covered = std::collections::BTreeSet::new();
    let words: Vec<&str> = doc.split(|c: char| c.is_whitespace() || c == '|').collect();
    for w in &words {
        let parse = |s: &str| u8::from_str_radix(s.trim_start_matches("0x"), 16).ok();
        if let Some((a, b)) = w.split_once('–') {
            if let (Some(a), Some(b)) = (parse(a), parse(b)) {
                covered.extend(a..=b);
            }
        } else if w.starts_with("0x") && w.len() == 4 {
            covered.extend(parse(w));
        }
    }
    for &op in pto_wsp_bytecode::op::Op::ALL {
        assert!(
            covered.contains(&(op as u8)),
            "0x{:02X} ({}) is not in the document",
            op as u8,
            op.mnemonic()
        );
        let stem = op.mnemonic().split('.').next().unwrap_or_default();
        assert!(
            doc.contains(stem),
            "{} is not in the document",
            op.mnemonic()
        );
    }
}
