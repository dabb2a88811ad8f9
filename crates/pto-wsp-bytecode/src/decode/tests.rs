//! One test per error kind, each asserting the message, on mutations of a valid bytecode.

use super::*;
use crate::EncodeOptions;
use crate::format::HEADER_LEN;
use crate::format::NONE16;
use crate::image::DNodeRec;
use crate::op::Insn;
use crate::testing::encode;

const SRC: &str = "
symbol n: i64;
tensor A: f32[n, 8];
axis I = dense_dyn(n);
kernel k(in a: f32[1, 8], x: i64);
workload main() {
    parallel_for i in I {
        task k(A[i, 0 +: 8], i * 2 + 1);
    }
}
";

fn valid() -> Vec<u8> {
    let m = pto_wsp_ir::parse(SRC).expect("parses");
    encode(&m, &EncodeOptions::default()).expect("encodes")
}

fn image() -> Image {
    Image::read(&valid()).expect("reads").0
}

fn err(bytes: &[u8]) -> String {
    match Program::decode(bytes) {
        Ok(_) => panic!("decoded"),
        Err(e) => e.to_string(),
    }
}

fn err_of(img: &Image) -> String {
    err(&img.write())
}

fn has(msg: &str, want: &str) {
    assert!(msg.contains(want), "{msg:?} does not contain {want:?}");
}

#[test]
fn the_valid_one_decodes() {
    let p = Program::decode(&valid()).expect("decodes");
    assert_eq!(p.task_statements(), 1);
}

#[test]
fn truncated() {
    let b = valid();
    has(
        &err(&b[..30]),
        "truncated at byte 30: the expression count needs 2 byte(s), 0 left",
    );
    has(
        &err(&b[..3]),
        "truncated at byte 0: the magic needs 4 byte(s), 3 left",
    );
    has(&err(&[]), "truncated at byte 0");
}

#[test]
fn bad_magic_and_version() {
    let mut b = valid();
    b[0] = b'X';
    has(
        &err(&b),
        "not a pto-wsp bytecode: the magic at byte 0 is [58, 54, 4f, 57]",
    );
    let mut b = valid();
    b[4] = 9;
    has(
        &err(&b),
        "unsupported bytecode version 9 at byte 4 (this decoder reads version 2)",
    );
}

#[test]
fn length_mismatch() {
    let mut b = valid();
    let n = b.len();
    b.push(0);
    has(
        &err(&b),
        &format!(
            "length mismatch: the bytecode should be {n} bytes long, it is {}",
            n + 1
        ),
    );
}

#[test]
fn unknown_opcode() {
    let mut b = valid();
    b[HEADER_LEN] = 0x7F;
    has(&err(&b), &format!("byte {HEADER_LEN}: unknown opcode 0x7f"));
}

#[test]
fn wrong_stream() {
    let mut img = image();
    img.insns[0] = Insn::new(Op::Ldr, 0, 0);
    has(
        &err_of(&img),
        &format!("byte {HEADER_LEN}: `ldr` cannot stand in the instruction stream"),
    );
    let mut img = image();
    img.ops[0] = Insn::new(Op::Halt, 0, 0);
    has(&err_of(&img), "`halt` cannot stand in expression code");
}

#[test]
fn bad_operand() {
    let mut img = image();
    let t = img
        .insns
        .iter()
        .position(|i| i.op == Op::Task)
        .expect("a task");
    img.insns[t].a = 999;
    let at = HEADER_LEN + 8 * t;
    has(
        &err_of(&img),
        &format!("byte {at}: `task` a: kernel 999 does not exist (there are 1)"),
    );
    let mut img = image();
    img.insns[t].flags = 7;
    has(&err_of(&img), "`task` flags: 0x07 is not a valid flag set");
    let mut img = image();
    let h = img.insns.len() - 1;
    img.insns[h].b = 5;
    has(&err_of(&img), "`halt` b: unused field is 5, must be 0");
}

#[test]
fn structure() {
    let mut img = image();
    let n = img
        .insns
        .iter()
        .position(|i| i.op == Op::Next)
        .expect("a next");
    img.insns[n].b = 0;
    has(&err_of(&img), "`next` does not close the loop it names");
    let mut img = image();
    let h = img.insns.len() - 1;
    img.insns.swap(h, h - 1);
    img.insns[h - 1].b = 0;
    has(&err_of(&img), "`halt` must be the last instruction");
    let mut img = image();
    let t = img
        .insns
        .iter()
        .position(|i| i.op == Op::Task)
        .expect("a task");
    img.insns.remove(t + 1);
    has(
        &err_of(&img),
        "an `args` instruction with 2 reference(s) expected",
    );
}

/// A `while` with a `break` and a computed `read` (tensor `A` is written by a task).
const WHILE_SRC: &str = "
slot s: i64;
tensor A: i64[8];
tensor H: i64[8];
tensor F: f32[8];
kernel copy(in x: i64[1], out y: i64[1]);
workload main() {
    while s < 5 max 9 {
        task copy(H[s], A[s]);
        load s = A[s];
        break if s == 3;
    }
}
";

fn while_image() -> Image {
    let m = pto_wsp_ir::parse(WHILE_SRC).expect("parses");
    Image::read(&encode(&m, &EncodeOptions::default()).expect("encodes"))
        .expect("reads")
        .0
}

fn find(img: &Image, op: Op) -> usize {
    img.insns
        .iter()
        .position(|i| i.op == op)
        .unwrap_or_else(|| panic!("no `{}`", op.mnemonic()))
}

#[test]
fn while_break_and_read_decode_and_disassemble() {
    let img = while_image();
    for op in [Op::While, Op::EndWhile, Op::Break, Op::Read] {
        find(&img, op);
    }
    let p = Program::decode(&img.write()).expect("decodes");
    assert_eq!(p.computed_tensors(), vec![true, false, false]);
    let text = p.disassemble();
    for want in ["while max", "wend", "break if", "read s = A["] {
        assert!(text.contains(want), "{want:?} not in\n{text}");
    }
}

/// The side table of read locations: the `read` and the loop over a computed ragged axis
/// carry their statements' places; bytes without computed reads carry no table (unchanged
/// layout); a table entry naming another instruction, or out of order, is refused.
#[test]
fn read_locations_are_a_validated_side_table() {
    let p = Program::decode(&while_image().write()).expect("decodes");
    let read = p
        .insns
        .iter()
        .position(|i| i.op == Op::Read)
        .expect("a read");
    let loc = p.read_loc(read);
    assert_eq!(
        &WHILE_SRC[loc.start as usize..loc.end as usize],
        "load s = A[s];"
    );
    // Not a read: no location.
    assert!(!p.read_loc(0).is_known());
    // A ragged axis over computed lengths: the loop's place is the statement's.
    let src = "tensor H: i64[4];\ntensor A: i64[4];\ntensor D: f32[4, 4];\n\
                   axis R = ragged(4, A);\nkernel copy(in x: i64[?], out y: i64[?]);\n\
                   kernel k(inout x: f32[1, 4]);\nworkload main() {\n\
                   task copy(H[0 +: 4], A[0 +: 4]);\n\
                   parallel_for r, c in R { task k(D[r, 0 +: 4]); }\n}\n";
    let m = pto_wsp_ir::parse(src).expect("parses");
    let img = Image::read(&encode(&m, &EncodeOptions::default()).expect("encodes"))
        .expect("reads")
        .0;
    let p = Program::decode(&img.write()).expect("decodes");
    assert_eq!(p.computed_tensors(), vec![false, true, false]);
    let lp = find(&img, Op::Loop);
    let loc = p.read_loc(lp);
    assert!(src[loc.start as usize..loc.end as usize].starts_with("parallel_for r, c in R"));
    // No computed read: no table, no flag.
    let m = pto_wsp_ir::parse(
        "tensor D: f32[4, 4];\naxis I = dense(4);\nkernel k(inout x: f32[1, 4]);\n\
             workload main() { parallel_for r in I { task k(D[r, 0 +: 4]); } }",
    )
    .expect("parses");
    let bytes = encode(&m, &EncodeOptions::default()).expect("encodes");
    assert!(Image::read(&bytes).expect("reads").0.read_locs.is_empty());
    assert_eq!(bytes[45] & crate::format::FLAG_READ_LOCS, 0);
    // Malformed tables.
    let mut img = while_image();
    img.read_locs[0].0 = 0;
    has(&err_of(&img), "instruction 0 is not a `read` or a `loop`");
    let mut img = while_image();
    let again = img.read_locs[0];
    img.read_locs.push(again);
    has(&err_of(&img), "instructions are not in increasing order");
    let mut img = while_image();
    img.read_locs[0].1 = pto_wsp_ir::Loc { start: 9, end: 3 };
    has(&err_of(&img), "ends before it starts");
}

#[test]
fn malformed_while_break_and_read() {
    // A `wend` that names another instruction.
    let mut img = while_image();
    let w = find(&img, Op::EndWhile);
    img.insns[w].b = 0;
    has(
        &err_of(&img),
        "`wend` does not close the construct it names",
    );
    // A `while` that does not point at its `wend`.
    let mut img = while_image();
    let o = find(&img, Op::While);
    img.insns[o].b = find(&img, Op::Break) as u32;
    has(&err_of(&img), "`while` does not point at this `wend`");
    // A `while` jumping backwards.
    let mut img = while_image();
    let o = find(&img, Op::While);
    img.insns[o].b = 0;
    has(&err_of(&img), "`while` must jump forward");
    // A `break` naming something other than its innermost `while`.
    let mut img = while_image();
    let b = find(&img, Op::Break);
    img.insns[b].b = 0;
    has(
        &err_of(&img),
        "`break` does not name its innermost enclosing `while`",
    );
    // A `break` outside any `while`: moved after the `wend`.
    let mut img = while_image();
    let (b, w) = (find(&img, Op::Break), find(&img, Op::EndWhile));
    let brk = img.insns.remove(b);
    img.insns.insert(w, brk);
    let o = find(&img, Op::While);
    img.insns[o].b = (w - 1) as u32;
    has(
        &err_of(&img),
        "`break` does not name its innermost enclosing `while`",
    );
    // A `max` bound or a condition of the wrong type.
    let mut img = while_image();
    let o = find(&img, Op::While);
    let cond = img.insns[find(&img, Op::EndWhile)].a;
    img.insns[o].a = cond;
    has(&err_of(&img), "has the wrong type (bool)");
    let mut img = while_image();
    let w = find(&img, Op::EndWhile);
    img.insns[w].a = img.insns[find(&img, Op::While)].a;
    has(&err_of(&img), "has the wrong type (i64)");
    // A `read` of a tensor with bound contents, and of a float tensor.
    let mut img = while_image();
    let r = find(&img, Op::Read);
    img.insns[r].op = Op::Load;
    has(
        &err_of(&img),
        "`load` needs a tensor with a shape and bound contents",
    );
    let mut img = while_image();
    let r = find(&img, Op::Read);
    img.insns[r].b = 2;
    has(
        &err_of(&img),
        "`read` needs an integer tensor with a shape and no bound contents",
    );
    // Flags on the new opcodes are refused.
    let mut img = while_image();
    let o = find(&img, Op::While);
    img.insns[o].flags = 1;
    has(&err_of(&img), "`while` flags: 0x01 is not a valid flag set");
}

#[test]
fn too_deep() {
    let mut img = image();
    let l = img
        .insns
        .iter()
        .position(|i| i.op == Op::Loop)
        .expect("a loop");
    let lp = img.insns[l];
    let mut insns = vec![img.insns[0]];
    for _ in 0..70 {
        insns.push(lp);
    }
    insns.push(Insn::new(Op::Halt, 0, 0));
    for (i, x) in insns.iter_mut().enumerate().skip(1).take(70) {
        x.b = (i + 1) as u32;
    }
    img.insns = insns;
    has(&err_of(&img), "nesting deeper than 64 levels");
}

#[test]
fn expression_stack_and_types() {
    let mut img = image();
    let start = img.ops.len() as u16;
    for _ in 0..40 {
        img.ops.push(Insn::new(Op::Ldi, 0, 1));
    }
    for _ in 0..39 {
        img.ops.push(Insn::new(Op::AddI, 0, 0));
    }
    img.exprs.push((start, 79));
    let e = img.exprs.len() - 1;
    has(
        &err_of(&img),
        &format!("expression {e} needs a stack deeper than 32"),
    );
    let mut img = image();
    let start = img.ops.len() as u16;
    img.ops.push(Insn::new(Op::Ldb, 0, 1));
    img.ops.push(Insn::new(Op::Ldi, 0, 1));
    img.ops.push(Insn::new(Op::AddI, 0, 0));
    img.exprs.push((start, 3));
    has(&err_of(&img), "`add.i` needs two i64s, found bool and i64");
    let mut img = image();
    let start = img.ops.len() as u16;
    img.ops.push(Insn::new(Op::Ldi, 0, 1));
    img.ops.push(Insn::new(Op::Jmp, 9, 0));
    img.exprs.push((start, 2));
    has(&err_of(&img), "jump past the end");
    let mut img = image();
    let start = img.ops.len() as u16;
    img.ops.push(Insn::new(Op::AddI, 0, 0));
    img.exprs.push((start, 1));
    has(&err_of(&img), "stack underflow");
}

/// Found by the fuzz target: a hoisting loop whose keyset lacks the dispatch key.
#[test]
fn hoisting_loop_without_its_key() {
    let src = "
symbol n: i64;
tensor A: f32[n, 8];
axis I = dense_dyn(n);
kernel k(in a: f32[1, 8]);
workload main() {
    parallel_for i in I {
        task k(A[i, 0 +: 8]);
    }
}
schedule for main {
    executors 4;
    dispatch affinity(i);
}
";
    let m = pto_wsp_ir::parse(src).expect("parses");
    let bytes = encode(&m, &EncodeOptions::default()).expect("encodes");
    let mut img = Image::read(&bytes).expect("reads").0;
    assert!(img.loops[0].keyset != NONE16, "the loop hoists");
    let k = usize::from(img.loops[0].keyset);
    img.keysets[k] = NONE16;
    has(
        &err_of(&img),
        "loops entry 0: a hoisting loop needs an index-free dispatch policy",
    );
    let mut img = Image::read(&bytes).expect("reads").0;
    img.sched.dispatch = DNodeRec::RoundRobin(3);
    has(
        &err_of(&img),
        "a hoisting loop needs an index-free dispatch policy",
    );
}

#[test]
fn bad_entries() {
    let mut img = image();
    img.tensors[0].dtype = 99;
    has(&err_of(&img), "tensors entry 0: bad element type code 99");
    let mut img = image();
    img.axes[0].extent = 500;
    has(&err_of(&img), "axes entry 0: expression 500 does not exist");
    let mut img = image();
    img.loops[0].var0 = 0;
    has(
        &err_of(&img),
        "loops entry 0: loop variables must be i64 variable registers",
    );
    let mut img = image();
    img.sched.executors = 0;
    has(
        &err_of(&img),
        "executors and streams must be between 1 and 2^32",
    );
    let mut img = image();
    img.sched.dispatch = DNodeRec::StaticPartition(vec![0, 5, 5]);
    has(
        &err_of(&img),
        "static_partition starts must begin at 0 and increase",
    );
    let mut img = image();
    img.kernels[0].params = vec![0x33];
    has(&err_of(&img), "kernels entry 0: bad parameter code 51");
}

/// The statement-location table: a parsed module's bytes carry one (each task, loop and
/// `while` instruction maps to its statement), a built module's none (unchanged bytes); an
/// entry past the last instruction, out of order, or ending before it starts is refused.
#[test]
fn statement_locations_are_a_validated_side_table() {
    let img = while_image();
    assert!(!img.stmt_locs.is_empty());
    let bytes = img.write();
    assert_ne!(bytes[45] & crate::format::FLAG_STMT_LOCS, 0);
    let p = Program::decode(&bytes).expect("decodes");
    for (op, starts) in [
        (Op::While, "while "),
        (Op::EndWhile, "while "),
        (Op::Read, "load s = A[s];"),
    ] {
        let pc = find(&img, op);
        let loc = p.stmt_loc(pc);
        assert!(
            WHILE_SRC[loc.start as usize..loc.end as usize].starts_with(starts),
            "{op:?}: {:?}",
            &WHILE_SRC[loc.start as usize..loc.end as usize]
        );
    }
    // Built without text: no table, no flag.
    let text = pto_wsp_ir::parse(
        "tensor D: f32[4, 4];\nkernel k(inout x: f32[1, 4]);\nworkload main() { task k(D[0, 0 +: 4]); }",
    )
    .expect("parses");
    let mut stripped = text.clone();
    for w in &mut stripped.workloads {
        for s in &mut w.body {
            s.loc = pto_wsp_ir::Loc::NONE;
        }
        w.loc = pto_wsp_ir::Loc::NONE;
    }
    let bytes = encode(&stripped, &EncodeOptions::default()).expect("encodes");
    assert!(Image::read(&bytes).expect("reads").0.stmt_locs.is_empty());
    assert_eq!(bytes[45] & crate::format::FLAG_STMT_LOCS, 0);
    // Malformed tables.
    let mut img = while_image();
    let past = img.insns.len() as u32;
    img.stmt_locs.last_mut().unwrap().0 = past;
    has(
        &err_of(&img),
        &format!("instruction {past} is past the last"),
    );
    let mut img = while_image();
    let again = img.stmt_locs[0];
    img.stmt_locs.insert(1, again);
    has(&err_of(&img), "instructions are not in increasing order");
    let mut img = while_image();
    img.stmt_locs[0].1 = pto_wsp_ir::Loc { start: 9, end: 3 };
    has(&err_of(&img), "ends before it starts");
}
