//! Malformed binaries and assembly, each with its exact message and place.

use pto_wsp_ptog::binary::HEADER;
use pto_wsp_ptog::isa::Insn;
use pto_wsp_ptog::operand::*;
use pto_wsp_ptog::{Names, Program, assemble, decode, encode};

/// A small valid program: one tensor, one graph of two kernels, a launch and a sync.
fn base() -> Program {
    let text = "\
MC_ALLOC(T, 32, 64, GM, f32[8])
TG_BEGIN(G)
    TG_KERNEL(A, fill, 1, AIV, 0)
    TG_KERNEL(B, fill, 1, AIV, 0)
    TG_DEPEND(A, B)
    MC_BIND(A, 0, T, 0, 0, out)
TG_END(G)
TG_LAUNCH(G, S)
TG_SYNC(G)
";
    assemble(text).unwrap().program
}

fn le32(b: &[u8], at: usize) -> usize {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]) as usize
}

fn set32(b: &mut [u8], at: usize, v: usize) {
    b[at..at + 4].copy_from_slice(&(v as u32).to_le_bytes());
}

/// Where the code section starts, and where each instruction is as the decoder reports it:
/// its opcode in the code section, or its row for a table instruction.
fn code_offsets(p: &Program) -> (usize, Vec<usize>) {
    let bytes = encode(p);
    let rows = [(8, 21), (12, 13), (16, 35), (20, 63)];
    let mut table_start = [0usize; 4];
    let mut at = HEADER;
    for (k, &(field, row)) in rows.iter().enumerate() {
        table_start[k] = at;
        at += le32(&bytes, field) * row;
    }
    let start = at;
    let mut next_row = [0usize; 4];
    let mut out = Vec::new();
    for insn in &p.insns {
        let table = match insn.op().table() {
            pto_wsp_ptog::Table::Kernels => Some(0),
            pto_wsp_ptog::Table::Dependencies => Some(1),
            pto_wsp_ptog::Table::Allocations => Some(2),
            pto_wsp_ptog::Table::Bindings => Some(3),
            pto_wsp_ptog::Table::Code => None,
        };
        match table {
            Some(k) => {
                out.push(table_start[k] + next_row[k] * rows[k].1);
                next_row[k] += 1;
            }
            None => out.push(at),
        }
        let one = encode(&Program {
            insns: vec![insn.clone()],
            names: Names::new(),
        });
        at += le32(&one, 28);
    }
    (start, out)
}

fn decode_err(bytes: &[u8]) -> String {
    match decode(bytes) {
        Ok(_) => panic!("decoded"),
        Err(e) => e.to_string(),
    }
}

/// A program (not checked) encoded, and the offset of instruction `i`'s opcode.
fn encoded(insns: Vec<Insn>) -> (Vec<u8>, Vec<usize>) {
    let p = Program {
        insns,
        names: Names::new(),
    };
    let (_, offs) = code_offsets(&p);
    (encode(&p), offs)
}

fn kernel(k: u32) -> Insn {
    Insn::TgKernel {
        kernel: KernelId(k),
        entry: Symbol("nop".into()),
        block_dim: 1,
        core_type: CoreType::Aiv,
        workspace: 0,
    }
}

fn dep(s: u32, d: u32) -> Insn {
    Insn::TgDepend {
        src: KernelId(s),
        dst: KernelId(d),
        dep_type: DependencyType::After,
        tensor: None,
    }
}

#[test]
fn malformed_binaries_are_errors_at_their_byte_offset() {
    let good = encode(&base());
    assert!(decode(&good).is_ok());
    let total = good.len();
    let mut cases: Vec<(&str, Vec<u8>, String)> = Vec::new();

    let mut b = good.clone();
    b[3] = b'X';
    cases.push((
        "bad magic",
        b,
        "byte 0: not a task-graph binary: the magic is `50 54 4f 58` (hex), not `PTOG`".into(),
    ));
    cases.push((
        "empty",
        Vec::new(),
        "byte 0: the header is truncated: 0 of 48 bytes".into(),
    ));
    // Found by the fuzzer: three bytes that are not a prefix of the magic.
    cases.push((
        "short, not the magic",
        b"PPT".to_vec(),
        "byte 0: not a task-graph binary: the magic is `50 50 54` (hex), not `PTOG`".into(),
    ));
    cases.push((
        "truncated header",
        good[..20].to_vec(),
        "byte 20: the header is truncated: 20 of 48 bytes".into(),
    ));
    let mut b = good.clone();
    set32(&mut b, 4, 2);
    cases.push((
        "version",
        b,
        "byte 4: version 2 is not supported (this reader reads version 1)".into(),
    ));
    cases.push((
        "cut short",
        good[..total - 5].to_vec(),
        format!(
            "byte 40: the header gives a total length of {total} bytes, but the input has {}",
            total - 5
        ),
    ));
    // The file cut inside the kernel table, the header's length adjusted: the table does not
    // fit. Two kernel rows of 21 bytes from byte 48; 30 bytes left.
    let mut b = good[..HEADER + 30].to_vec();
    set32(&mut b, 40, HEADER + 30);
    cases.push((
        "truncated table",
        b,
        "byte 69: the kernel table is truncated: 2 kernel rows (header byte 8) of 21 byte(s) \
         from byte 48 need 42 byte(s), but the input ends at byte 78"
            .into(),
    ));
    let mut b = good.clone();
    b.push(0);
    set32(&mut b, 40, total + 1);
    cases.push((
        "trailing byte",
        b,
        format!(
            "byte {total}: 1 byte(s) follow the string table: the sections end at byte {total}, \
             the input at byte {}",
            total + 1
        ),
    ));
    let mut b = good.clone();
    set32(&mut b, 44, 1);
    cases.push((
        "reserved",
        b,
        "byte 44: the reserved header field must be 0".into(),
    ));
    // Kernel row 0: kernel id (48), entry offset (52), blockDim (56), core type (60).
    let mut b = good.clone();
    b[60] = 7;
    cases.push((
        "core type",
        b,
        "byte 60: TG_KERNEL operand `core_type`: 7 is not a core type".into(),
    ));
    let mut b = good.clone();
    set32(&mut b, 52, 1 << 20);
    let strings = le32(&good, 32);
    cases.push((
        "string offset",
        b,
        format!(
            "byte 52: TG_KERNEL operand `entry`: string offset 1048576 is past the end of the \
             string table ({strings} bytes)"
        ),
    ));
    let (code, offs) = code_offsets(&base());
    let mut b = good.clone();
    b[code] = 0x99;
    cases.push(("opcode", b, format!("byte {code}: 0x99 is not an opcode")));
    // TG_DEPEND's row (after two kernel rows): src at 90, dst at 94.
    let mut b = good.clone();
    set32(&mut b, 94, 9);
    cases.push((
        "index out of range",
        b,
        "byte 94: kernel 9 is not defined in graph G".into(),
    ));
    // The allocation row's tensor id (after two kernel rows and one dependency row).
    let mut b = good.clone();
    set32(&mut b, HEADER + 42 + 13, 0xFFFF_FFFF);
    cases.push((
        "reserved id",
        b,
        format!(
            "byte {}: MC_ALLOC operand `tensor`: tensor id 4294967295 is reserved (it means none)",
            HEADER + 55
        ),
    ));
    let mut b = good.clone();
    set32(&mut b, 24, 10);
    cases.push((
        "instruction count",
        b,
        format!(
            "byte {}: the code section holds 9 instruction(s), the header gives 10",
            code + le32(&good, 28)
        ),
    ));
    let _ = offs;
    for (what, bytes, want) in cases {
        assert_eq!(decode_err(&bytes), want, "{what}");
    }
}

#[test]
fn malformed_programs_are_errors_at_the_offending_instruction() {
    let g = |id| Insn::TgBegin { graph: GraphId(id) };
    let e = |id| Insn::TgEnd { graph: GraphId(id) };
    let alloc = Insn::McAlloc {
        tensor: TensorId(0),
        size: 16,
        alignment: 64,
        location: MemLocation::Gm,
        shape: None,
    };
    // (what, instructions, the instruction at fault, bytes into it of the operand at fault, message)
    let cases: Vec<(&str, Vec<Insn>, usize, usize, String)> =
        vec![
        (
            "nested TG_BEGIN",
            vec![g(0), g(1), e(1), e(0)],
            1,
            0,
            "TG_BEGIN(1) inside the definition of graph 0: graphs do not nest".into(),
        ),
        (
            "TG_END id mismatch",
            vec![g(0), e(1)],
            1,
            1,
            "TG_END(1) closes TG_BEGIN(0): the graph ids differ".into(),
        ),
        (
            "TG_BEGIN never closed",
            vec![g(0), kernel(0)],
            0,
            0,
            "TG_BEGIN(0) is never closed by TG_END".into(),
        ),
        (
            "dependency cycle",
            vec![g(0), kernel(0), kernel(1), kernel(2), dep(0, 1), dep(1, 2), dep(2, 0), e(0)],
            6,
            0,
            "dependency cycle: 0 -> 1 -> 2 -> 0".into(),
        ),
        (
            "MC_FREE of a tensor in use",
            vec![
                alloc.clone(),
                g(0),
                kernel(0),
                Insn::McBind {
                    kernel: KernelId(0),
                    arg: 0,
                    tensor: Some(TensorId(0)),
                    offset: 0,
                    size: 0,
                    access: Access::In,
                    split: Split::Whole,
                    region: None,
                },
                e(0),
                Insn::TgLaunch {
                    graph: GraphId(0),
                    stream: StreamId(0),
                },
                Insn::McFree {
                    tensor: TensorId(0),
                },
            ],
            6,
            1,
            "MC_FREE of tensor 0 while graph 0, which uses it, may still run (TG_SYNC it first)"
                .into(),
        ),
        (
            "unmatched CF_IF",
            vec![Insn::CfIf {
                cond: ScalarRef::Imm(1),
            }],
            0,
            0,
            "CF_IF is never closed by CF_ENDIF".into(),
        ),
        (
            "unmatched CF_ENDIF",
            vec![Insn::CfEndIf {}],
            0,
            0,
            "CF_ENDIF without a CF_IF".into(),
        ),
        (
            "CF_ENDLOOP closing a CF_IF",
            vec![
                Insn::CfIf {
                    cond: ScalarRef::Imm(1),
                },
                Insn::CfEndLoop {},
            ],
            1,
            0,
            "CF_ENDLOOP closes a CF_IF block (it needs CF_ENDIF)".into(),
        ),
        (
            "CF_IF open at TG_END",
            vec![
                g(0),
                Insn::CfIf {
                    cond: ScalarRef::Imm(1),
                },
                kernel(0),
                e(0),
            ],
            1,
            0,
            "CF_IF is not closed by CF_ENDIF before TG_END(0)".into(),
        ),
        (
            "graph launched before its definition",
            vec![
                Insn::TgLaunch {
                    graph: GraphId(3),
                    stream: StreamId(0),
                },
                g(3),
                e(3),
            ],
            0,
            1,
            "graph 3 is not defined before this instruction".into(),
        ),
    ];
    for (what, insns, at, delta, want) in cases {
        let (bytes, offs) = encoded(insns);
        assert_eq!(
            decode_err(&bytes),
            format!("byte {}: {want}", offs[at] + delta),
            "{what}"
        );
    }
}

#[test]
fn malformed_assembly_is_an_error_at_its_line_and_column() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "unknown instruction",
            "TG_FOO(1)",
            "1:1: unknown instruction `TG_FOO`",
        ),
        (
            "lower case",
            "  tg_sync(G)",
            "1:3: unknown instruction `tg_sync` (mnemonics are upper case: `TG_SYNC`)",
        ),
        (
            "no parenthesis",
            "TG_SYNC G",
            "1:9: expected `(` after TG_SYNC, found `G`",
        ),
        (
            "unclosed",
            "TG_SYNC(G",
            "1:10: expected `)` at the end of the TG_SYNC line",
        ),
        (
            "missing operand",
            "TG_BEGIN(G)\nTG_KERNEL(K, f, 1)\nTG_END(G)",
            "2:18: TG_KERNEL needs 5 operand(s) (kernel, entry, block_dim, core_type, workspace), found 3",
        ),
        (
            "extra operand",
            "TG_BEGIN(G)\nTG_END(G, H)",
            "2:11: TG_END takes at most 1 operand(s) (graph), found 2",
        ),
        (
            "enum",
            "TG_BEGIN(G)\nTG_KERNEL(K, f, 1, GPU, 0)\nTG_END(G)",
            "2:20: expected a core type (AIC, AIV, AIC_AIV, AICPU), found `GPU`",
        ),
        (
            "number",
            "MC_ALLOC(T, 12x)",
            "1:13: expected a number, found `12x`",
        ),
        (
            "empty operand",
            "MC_ALLOC(T, , 4)",
            "1:13: an operand is missing between commas",
        ),
        (
            "shape",
            "MC_ALLOC(T, 16, 64, GM, f33[4])",
            "1:25: expected an element type (f16, bf16, f32, i32, u32, i64, u64, u8), found `f33`",
        ),
        (
            "shape size",
            "MC_ALLOC(T, 16, 64, GM, f32[8])",
            "1:25: size 16 does not match f32[8] (32 bytes)",
        ),
        (
            "alignment",
            "MC_ALLOC(T, 16, 48)",
            "1:17: alignment 48 is not a power of two of at most 4096",
        ),
        (
            // Found by the fuzzer: the shape's size passes 2^64.
            "huge shape",
            "MC_ALLOC(T, 16, 64, GM, u64[4294967295, 4294967295, 4294967295])",
            "1:25: size 16 does not match u64[4294967295, 4294967295, 4294967295] (more than 2^64 bytes)",
        ),
        (
            "nested TG_BEGIN",
            "TG_BEGIN(G)\n    TG_BEGIN(H)",
            "2:5: TG_BEGIN(H) inside the definition of graph G: graphs do not nest",
        ),
        (
            "TG_END mismatch",
            "TG_BEGIN(G)\nTG_END(H)",
            "2:8: TG_END(H) closes TG_BEGIN(G): the graph ids differ",
        ),
        (
            "cycle",
            "TG_BEGIN(G)\nTG_KERNEL(A, f, 1, AIV, 0)\nTG_KERNEL(B, f, 1, AIV, 0)\nTG_DEPEND(A, B)\nTG_DEPEND(B, A)\nTG_END(G)",
            "5:1: dependency cycle: A -> B -> A",
        ),
        (
            "MC_FREE in use",
            "MC_ALLOC(T, 8)\nTG_BEGIN(G)\nTG_KERNEL(A, f, 1, AIV, 0)\nMC_BIND(A, 0, T)\nTG_END(G)\nTG_LAUNCH(G, S)\nMC_FREE(T)",
            "7:9: MC_FREE of tensor T while graph G, which uses it, may still run (TG_SYNC it first)",
        ),
        (
            "MC_FREE twice",
            "MC_ALLOC(T, 8)\nMC_FREE(T)\nMC_FREE(T)",
            "3:9: MC_FREE of tensor T, which is not allocated here",
        ),
        (
            "allocated again in a loop",
            "CF_LOOP(2, i)\nMC_ALLOC(T, 8)\nCF_ENDLOOP",
            "2:10: MC_ALLOC of tensor T, which may already be allocated here (allocated on another path, or by an earlier pass of a loop, without MC_FREE)",
        ),
        (
            "unmatched CF_IF",
            "CF_IF(1)\nMC_FENCE(GM)",
            "1:1: CF_IF is never closed by CF_ENDIF",
        ),
        (
            "unmatched CF_ENDIF",
            "MC_FENCE(GM)\nCF_ENDIF",
            "2:1: CF_ENDIF without a CF_IF",
        ),
        (
            "CF_BREAK outside a loop",
            "CF_BREAK(1)",
            "1:1: CF_BREAK outside a CF_LOOP or CF_WHILE",
        ),
        (
            "undefined kernel",
            "TG_BEGIN(G)\nTG_KERNEL(A, f, 1, AIV, 0)\nTG_DEPEND(A, 5)\nTG_END(G)",
            "3:14: kernel 5 is not defined in graph G",
        ),
        (
            "unallocated tensor",
            "TG_BEGIN(G)\nTG_KERNEL(A, f, 1, AIV, 0)\nMC_BIND(A, 0, X)\nTG_END(G)",
            "3:15: tensor X is not allocated by any MC_ALLOC",
        ),
        (
            "DATA without a tensor",
            "TG_BEGIN(G)\nTG_KERNEL(A, f, 1, AIV, 0)\nTG_KERNEL(B, f, 1, AIV, 0)\nTG_DEPEND(A, B, DATA)\nTG_END(G)",
            "4:1: a DATA dependency names its tensor",
        ),
        (
            "several instances writing a whole argument",
            "MC_ALLOC(T, 8)\nTG_BEGIN(G)\nTG_KERNEL(A, f, 4, AIV, 0)\nMC_BIND(A, 0, T, 0, 0, out)\nTG_END(G)",
            "4:1: kernel A runs 4 instances, and each would write all of argument 0 (tensor T): bind it ROWS to give each instance its rows",
        ),
        (
            "branches joined",
            "TG_BEGIN(G)\nCF_IF(1)\nTG_KERNEL(A, f, 1, AIV, 0)\nCF_ELSE\nTG_KERNEL(B, f, 1, AIV, 0)\nCF_ENDIF\nTG_DEPEND(A, B)\nTG_END(G)",
            "7:1: kernels A and B are in the two branches of one CF_IF: they never both run",
        ),
        (
            "event never signalled",
            "TG_BEGIN(G)\nTG_KERNEL(A, f, 1, AIV, 0)\nSY_WAIT(E, A)\nTG_END(G)",
            "3:9: event E is waited for but no SY_SIGNAL signals it",
        ),
        (
            "a name fixed twice",
            "TG_BEGIN(G=1)\nTG_END(G=2)",
            "2:8: `G` is graph 1 at 1:10 and graph 2 here",
        ),
        (
            "quoted symbol",
            "TG_BEGIN(G)\nTG_KERNEL(A, \"a\\q\", 1, AIV, 0)\nTG_END(G)",
            "2:14: unknown escape `\\q` in a string",
        ),
    ];
    // Found by the fuzzer: counts near 2^32 are counts, not an overflow.
    assert!(
        assemble(
            "TG_BEGIN(G)\nTG_KERNEL(A, f, 1, AIC_AIV, 0)\nCA_REQUEST(A, 4294967295, 1)\nTG_END(G)"
        )
        .is_ok()
    );
    for (what, text, want) in cases {
        match assemble(text) {
            Ok(_) => panic!("{what}: assembled"),
            Err(e) => assert_eq!(e.to_string(), *want, "{what}"),
        }
    }
}
