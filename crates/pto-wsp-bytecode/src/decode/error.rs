//! Why a bytecode is refused: [`DecodeError`], every variant naming the byte offset of the first
//! problem (or the header), shared by the image reader and the decoder's checks.

/// Why bytes are not a valid bytecode. Every variant names a byte offset (or the header).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The bytes end in the middle of something.
    #[error("truncated at byte {offset}: {what} needs {need} byte(s), {have} left")]
    Truncated {
        /// Where the missing part starts.
        offset: usize,
        /// What was being read.
        what: String,
        /// Bytes needed.
        need: usize,
        /// Bytes left.
        have: usize,
    },
    /// The first four bytes are not `PTOW`.
    #[error("not a pto-wsp bytecode: the magic at byte 0 is {found:02x?}, expected \"PTOW\"")]
    BadMagic {
        /// The bytes found.
        found: [u8; 4],
    },
    /// A format version this decoder does not read.
    #[error(
        "unsupported bytecode version {found} at byte 4 (this decoder reads version {})",
        crate::format::VERSION
    )]
    BadVersion {
        /// The version found.
        found: u32,
    },
    /// The length in the header, or the end of the last section, is not the input's length.
    #[error("length mismatch: the bytecode should be {header} bytes long, it is {actual}")]
    Length {
        /// The expected length.
        header: u64,
        /// The input's length.
        actual: usize,
    },
    /// A byte that is not an opcode.
    #[error("byte {offset}: unknown opcode 0x{byte:02x}")]
    BadOpcode {
        /// Where.
        offset: usize,
        /// The byte.
        byte: u8,
    },
    /// An expression opcode in the instruction stream, or the other way round.
    #[error("byte {offset}: `{op}` cannot stand in {stream}")]
    WrongStream {
        /// Where.
        offset: usize,
        /// The opcode's mnemonic.
        op: &'static str,
        /// `the instruction stream` or `expression code`.
        stream: &'static str,
    },
    /// An operand out of range or of the wrong kind.
    #[error("byte {offset}: `{op}` {field}: {message}")]
    BadOperand {
        /// Where the instruction is.
        offset: usize,
        /// The opcode's mnemonic.
        op: &'static str,
        /// Which field (`a`, `b`, `flags`, a reference).
        field: &'static str,
        /// What is wrong.
        message: String,
    },
    /// Structured control flow that does not nest or whose jumps miss their partners.
    #[error("byte {offset}: {message}")]
    Structure {
        /// Where.
        offset: usize,
        /// What is wrong.
        message: String,
    },
    /// Loops, blocks and conditionals nest deeper than the limit.
    #[error("byte {offset}: nesting deeper than {max} levels")]
    TooDeep {
        /// The instruction that goes too deep.
        offset: usize,
        /// The limit.
        max: usize,
    },
    /// An expression that needs a deeper stack than the limit.
    #[error("byte {offset}: expression {expr} needs a stack deeper than {max}")]
    StackTooDeep {
        /// The op that goes too deep.
        offset: usize,
        /// The expression.
        expr: usize,
        /// The limit.
        max: usize,
    },
    /// An ill-formed expression (type, underflow, jump, result).
    #[error("byte {offset}: expression {expr}: {message}")]
    BadExpr {
        /// Where.
        offset: usize,
        /// The expression.
        expr: usize,
        /// What is wrong.
        message: String,
    },
    /// A bad table entry.
    #[error("byte {offset}: {table} entry {index}: {message}")]
    BadEntry {
        /// Where the entry is.
        offset: usize,
        /// The table.
        table: &'static str,
        /// Its index.
        index: usize,
        /// What is wrong.
        message: String,
    },
}

pub(super) fn entry(
    offset: usize,
    table: &'static str,
    index: usize,
    message: impl Into<String>,
) -> DecodeError {
    DecodeError::BadEntry {
        offset,
        table,
        index,
        message: message.into(),
    }
}
