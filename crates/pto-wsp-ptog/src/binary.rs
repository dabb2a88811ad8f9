//! The `PTOG` binary: the specification's header and four tables, and what it leaves out —
//! a code section (program order, control flow, synchronisation), a name table and a string
//! table (entry symbols and names) — written and read side by side.
//!
//! Why: the specification's tables alone cannot say where a graph begins or ends, what runs
//! inside a loop, or which symbol a kernel's `entry_offset` points to; the code section keeps
//! every instruction in order (a table instruction is its opcode alone, its operands being the
//! next row of its table), so the tables stay exactly the specification's rows.
//!
//! Promises: [`encode`] writes one canonical byte string per program; [`read`] never panics,
//! checks every length, count, offset, code, padding byte and string before trusting it, and
//! reports what is wrong with its byte offset ([`DecodeError`]); `read(encode(p)) == p`. The
//! layout is documented in `docs/ISA.md`.

use crate::isa::{Insn, Op, Table};
use crate::operand::{Ns, Reader, Writer};
use crate::program::{Names, Program};
use std::collections::HashMap;

/// The four bytes every binary starts with.
pub const MAGIC: [u8; 4] = *b"PTOG";
/// The layout version this crate writes and reads.
pub const VERSION: u32 = 1;
/// Size of the header in bytes.
pub const HEADER: usize = 48;
/// Size of a name-table row: namespace `u8`, scope `u32`, id `u32`, string offset `u32`.
pub const NAME_ROW: usize = 13;
/// The largest binary [`read`] accepts (its length field is 32 bits).
pub const MAX_LEN: usize = u32::MAX as usize;

/// A malformed binary: what is wrong, at which byte.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("byte {offset}: {message}")]
pub struct DecodeError {
    /// Offset of the first byte that is wrong (or of the thing it concerns).
    pub offset: usize,
    /// What is wrong.
    pub message: String,
}

impl DecodeError {
    /// An error at `offset`.
    pub fn new(offset: usize, message: impl Into<String>) -> DecodeError {
        DecodeError {
            offset,
            message: message.into(),
        }
    }

    /// The same error, its message prefixed with `what` (the thing being read).
    pub(crate) fn context(self, what: &str) -> DecodeError {
        DecodeError {
            offset: self.offset,
            message: format!("{what}: {}", self.message),
        }
    }
}

/// The string table being written: NUL-terminated UTF-8, each string once.
#[derive(Default)]
pub(crate) struct StringTable {
    bytes: Vec<u8>,
    at: HashMap<String, u32>,
}

impl StringTable {
    /// The offset of `s`, added if new.
    pub(crate) fn intern(&mut self, s: &str) -> u32 {
        if let Some(&o) = self.at.get(s) {
            return o;
        }
        let o = self.bytes.len() as u32;
        self.bytes.extend_from_slice(s.as_bytes());
        self.bytes.push(0);
        self.at.insert(s.to_string(), o);
        o
    }
}

/// The string table being read.
pub(crate) struct Strings<'a> {
    bytes: &'a [u8],
}

impl Strings<'_> {
    /// The string at `off`: inside the table, NUL-terminated, UTF-8.
    pub(crate) fn get(&self, off: u32) -> Result<String, String> {
        let off = off as usize;
        if off >= self.bytes.len() {
            return Err(format!(
                "string offset {off} is past the end of the string table ({} bytes)",
                self.bytes.len()
            ));
        }
        let rest = &self.bytes[off..];
        let n = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| format!("the string at offset {off} has no terminating NUL"))?;
        std::str::from_utf8(&rest[..n])
            .map(str::to_string)
            .map_err(|_| format!("the string at offset {off} is not UTF-8"))
    }
}

/// Where each instruction of a read program came from: the offset of its opcode in the code
/// section (its row for a table instruction) and of each operand.
#[derive(Clone, Debug, Default)]
pub struct Locations {
    /// Per instruction: offset of the instruction (its table row for table instructions).
    pub insn: Vec<u32>,
    /// Per instruction: the start of its operands in `operands`.
    operand_start: Vec<u32>,
    operands: Vec<u32>,
}

impl Locations {
    /// Offset of operand `operand` of instruction `insn`, or of the instruction.
    pub fn at(&self, insn: usize, operand: Option<usize>) -> usize {
        let base = self.insn.get(insn).copied().unwrap_or(0) as usize;
        let Some(o) = operand else {
            return base;
        };
        let start = self.operand_start.get(insn).copied().unwrap_or(0) as usize;
        let end = self
            .operand_start
            .get(insn + 1)
            .map_or(self.operands.len(), |&e| e as usize);
        if start + o < end {
            self.operands[start + o] as usize
        } else {
            base
        }
    }
}

/// Header fields after the magic and version, in order.
const COUNTS: [&str; 8] = [
    "kernel rows",
    "dependency rows",
    "allocation rows",
    "binding rows",
    "instructions",
    "code bytes",
    "string bytes",
    "name rows",
];

/// Writes `program` (checked or not: the layout does not judge meaning).
pub fn encode(program: &Program) -> Vec<u8> {
    let mut strings = StringTable::default();
    let mut rows: [Vec<u8>; 4] = Default::default();
    let mut counts = [0u32; 4];
    let mut code = Vec::new();
    for insn in &program.insns {
        let op = insn.op();
        code.push(op as u8);
        let (out, k) = match op.table() {
            Table::Code => (&mut code, None),
            t => {
                let k = Table::ROWS.iter().position(|&x| x == t).unwrap_or(0);
                (&mut rows[k], Some(k))
            }
        };
        insn.encode_operands(&mut Writer {
            out,
            strings: &mut strings,
        });
        if let Some(k) = k {
            counts[k] += 1;
        }
    }
    let mut names = Vec::with_capacity(program.names.len() * NAME_ROW);
    for ((ns, scope, id), name) in program.names.iter() {
        names.push(ns as u8);
        names.extend_from_slice(&scope.to_le_bytes());
        names.extend_from_slice(&id.to_le_bytes());
        names.extend_from_slice(&strings.intern(name).to_le_bytes());
    }
    let total = HEADER
        + rows.iter().map(Vec::len).sum::<usize>()
        + code.len()
        + names.len()
        + strings.bytes.len();
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    let fields = [
        counts[0],
        counts[1],
        counts[2],
        counts[3],
        program.insns.len() as u32,
        code.len() as u32,
        strings.bytes.len() as u32,
        program.names.len() as u32,
        total as u32,
        0,
    ];
    for f in fields {
        out.extend_from_slice(&f.to_le_bytes());
    }
    for r in &rows {
        out.extend_from_slice(r);
    }
    out.extend_from_slice(&code);
    out.extend_from_slice(&names);
    out.extend_from_slice(&strings.bytes);
    out
}

/// One section of the input: `[start, end)`.
#[derive(Clone, Copy, Debug)]
struct Section {
    start: usize,
    end: usize,
}

/// The sections' bounds, from the header.
struct Sections {
    tables: [Section; 4],
    code: Section,
    names: Section,
    strings: Section,
    insns: usize,
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Reads and checks the header; the sections it describes must tile the input exactly.
fn header(bytes: &[u8]) -> Result<Sections, DecodeError> {
    if bytes.len() < 4 && MAGIC.starts_with(bytes) {
        return Err(DecodeError::new(
            bytes.len(),
            format!("the header is truncated: {} of {HEADER} bytes", bytes.len()),
        ));
    }
    if bytes.get(..4) != Some(&MAGIC[..]) {
        let found: Vec<String> = bytes.iter().take(4).map(|b| format!("{b:02x}")).collect();
        return Err(DecodeError::new(
            0,
            format!(
                "not a task-graph binary: the magic is `{}` (hex), not `PTOG`",
                found.join(" ")
            ),
        ));
    }
    if bytes.len() < HEADER {
        return Err(DecodeError::new(
            bytes.len(),
            format!("the header is truncated: {} of {HEADER} bytes", bytes.len()),
        ));
    }
    let version = le32(bytes, 4);
    if version != VERSION {
        return Err(DecodeError::new(
            4,
            format!("version {version} is not supported (this reader reads version {VERSION})"),
        ));
    }
    let f = |i: usize| le32(bytes, 8 + 4 * i) as usize;
    let total = f(8);
    if total != bytes.len() {
        return Err(DecodeError::new(
            40,
            format!(
                "the header gives a total length of {total} bytes, but the input has {}",
                bytes.len()
            ),
        ));
    }
    if f(9) != 0 {
        return Err(DecodeError::new(44, "the reserved header field must be 0"));
    }
    let mut at = HEADER;
    // `row` bytes per row, `count_field` the header field giving the count (for messages).
    let mut section = |what: &str, count: usize, row: usize, count_field: usize| {
        let start = at;
        let need = count.saturating_mul(row);
        let end = start.checked_add(need).filter(|&e| e <= total);
        let Some(end) = end else {
            let fit = (total - start) / row;
            return Err(DecodeError::new(
                start + fit * row,
                format!(
                    "the {what} is truncated: {count} {} (header byte {}) of {row} byte(s) from \
                     byte {start} need {need} byte(s), but the input ends at byte {total}",
                    COUNTS[count_field],
                    8 + 4 * count_field
                ),
            ));
        };
        at = end;
        Ok::<Section, DecodeError>(Section { start, end })
    };
    let mut tables = [Section { start: 0, end: 0 }; 4];
    for (k, t) in Table::ROWS.iter().enumerate() {
        let row = t.op().map_or(1, Op::row_size);
        tables[k] = section(t.name(), f(k), row, k)?;
    }
    let code = section("code section", f(5), 1, 5)?;
    let names = section("name table", f(7), NAME_ROW, 7)?;
    let strings = section("string table", f(6), 1, 6)?;
    if at != total {
        return Err(DecodeError::new(
            at,
            format!(
                "{} byte(s) follow the string table: the sections end at byte {at}, the input at \
                 byte {total}",
                total - at
            ),
        ));
    }
    if !strings.start.eq(&strings.end) && bytes[strings.end - 1] != 0 {
        return Err(DecodeError::new(
            strings.end - 1,
            "the string table does not end with a NUL",
        ));
    }
    Ok(Sections {
        tables,
        code,
        names,
        strings,
        insns: f(4),
    })
}

/// Reads `bytes` into a program and where each instruction came from. Checks the layout only;
/// [`crate::decode`] also checks the program's meaning.
pub fn read(bytes: &[u8]) -> Result<(Program, Locations), DecodeError> {
    let s = header(bytes)?;
    let strings = Strings {
        bytes: &bytes[s.strings.start..s.strings.end],
    };
    let mut rows: Vec<Reader<'_>> = s
        .tables
        .iter()
        .map(|t| Reader::new(bytes, t.start, t.end, &strings))
        .collect();
    let mut code = Reader::new(bytes, s.code.start, s.code.end, &strings);
    let mut program = Program::new();
    let mut locs = Locations::default();
    while !code.at_end() {
        let at = code.pos();
        let byte = code.u8()?;
        let op = Op::from_byte(byte)
            .ok_or_else(|| DecodeError::new(at, format!("0x{byte:02x} is not an opcode")))?;
        if program.insns.len() == s.insns {
            return Err(DecodeError::new(
                at,
                format!(
                    "the code section holds more than the {} instruction(s) the header gives",
                    s.insns
                ),
            ));
        }
        locs.operand_start.push(locs.operands.len() as u32);
        let insn = match op.table() {
            Table::Code => {
                locs.insn.push(at as u32);
                Insn::decode_operands(op, &mut code, &mut locs.operands)?
            }
            t => {
                let k = Table::ROWS.iter().position(|&x| x == t).unwrap_or(0);
                let r = &mut rows[k];
                if r.at_end() {
                    return Err(DecodeError::new(
                        at,
                        format!(
                            "{} has no row left in the {} ({} row(s))",
                            op.mnemonic(),
                            t.name(),
                            (s.tables[k].end - s.tables[k].start) / op.row_size()
                        ),
                    ));
                }
                locs.insn.push(r.pos() as u32);
                Insn::decode_operands(op, r, &mut locs.operands)?
            }
        };
        program.insns.push(insn);
    }
    if program.insns.len() != s.insns {
        return Err(DecodeError::new(
            s.code.end,
            format!(
                "the code section holds {} instruction(s), the header gives {}",
                program.insns.len(),
                s.insns
            ),
        ));
    }
    for (k, r) in rows.iter().enumerate() {
        if !r.at_end() {
            let t = Table::ROWS[k];
            let row = t.op().map_or(1, Op::row_size);
            return Err(DecodeError::new(
                r.pos(),
                format!(
                    "row {} of the {} belongs to no {} instruction",
                    (r.pos() - s.tables[k].start) / row,
                    t.name(),
                    t.op().map_or("", Op::mnemonic)
                ),
            ));
        }
    }
    program.names = read_names(bytes, s.names, &strings)?;
    unused_names(&program, s.names.start)?;
    Ok((program, locs))
}

/// Every id some instruction uses: (namespace, scope, id), kernels scoped by their graph.
pub fn used_ids(program: &Program) -> std::collections::HashSet<(Ns, u32, u32)> {
    let mut used = std::collections::HashSet::new();
    let mut graph = None;
    for insn in &program.insns {
        if let Insn::TgBegin { graph: g } = insn {
            graph = Some(g.0);
        }
        insn.visit_ids(&mut |_, ns, id| {
            if ns != Ns::Kernel {
                used.insert((ns, 0, id));
            } else if let Some(g) = graph {
                used.insert((ns, g, id));
            }
        });
        if insn.op() == Op::TgEnd {
            graph = None;
        }
    }
    used
}

/// A name must name an id some instruction uses (text names only what it uses, so a binary
/// naming more would not read back as the same program).
fn unused_names(program: &Program, start: usize) -> Result<(), DecodeError> {
    let used = used_ids(program);
    for (row, (key, name)) in program.names.iter().enumerate() {
        if !used.contains(&key) {
            let (ns, scope, id) = key;
            let whose = if ns == Ns::Kernel {
                format!(" of graph {scope}")
            } else {
                String::new()
            };
            return Err(DecodeError::new(
                start + row * NAME_ROW,
                format!(
                    "the name `{name}` is given to {} {id}{whose}, which no instruction uses",
                    ns.word()
                ),
            ));
        }
    }
    Ok(())
}

/// Reads the name table: rows in strictly increasing (namespace, scope, id) order, each name
/// an identifier, no name twice in one namespace and scope.
fn read_names(bytes: &[u8], sec: Section, strings: &Strings<'_>) -> Result<Names, DecodeError> {
    let mut names = Names::new();
    let mut prev: Option<(Ns, u32, u32)> = None;
    let mut seen: HashMap<(Ns, u32, String), u32> = HashMap::new();
    let mut at = sec.start;
    while at < sec.end {
        let code = bytes[at];
        let ns = Ns::from_code(code)
            .ok_or_else(|| DecodeError::new(at, format!("{code} is not a namespace")))?;
        let scope = le32(bytes, at + 1);
        let id = le32(bytes, at + 5);
        let off = le32(bytes, at + 9);
        if ns != Ns::Kernel && scope != 0 {
            return Err(DecodeError::new(
                at + 1,
                format!("the scope of a {} name must be 0, not {scope}", ns.word()),
            ));
        }
        if id == crate::operand::MAX_ID {
            return Err(DecodeError::new(at + 5, format!("id {id} is reserved")));
        }
        let key = (ns, scope, id);
        if prev.is_some_and(|p| p >= key) {
            return Err(DecodeError::new(
                at,
                "name rows must be in increasing order of namespace, scope and id",
            ));
        }
        prev = Some(key);
        let name = strings.get(off).map_err(|m| DecodeError::new(at + 9, m))?;
        if !crate::text::is_ident(&name) {
            return Err(DecodeError::new(
                at + 9,
                format!("the name `{name}` is not an identifier"),
            ));
        }
        if let Some(other) = seen.insert((ns, scope, name.clone()), id) {
            return Err(DecodeError::new(
                at + 9,
                format!(
                    "the name `{name}` is given to {} {other} and {} {id}",
                    ns.word(),
                    ns.word()
                ),
            ));
        }
        names.insert(ns, scope, id, name);
        at += NAME_ROW;
    }
    Ok(names)
}
