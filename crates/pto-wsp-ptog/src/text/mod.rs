//! The text syntax: one instruction per line, `MNEMONIC(operand, ...)` (or the bare mnemonic
//! when it has no operands), `//` comments, symbolic names for ids.
//!
//! Why: a task graph is written and read by people (the specification's examples are text),
//! and a binary is only trustworthy if it can be shown. The assembler ([`asm`]) and the
//! disassembler ([`disasm`]) read the instruction table for every operand, so the syntax of an
//! instruction is its table row.
//!
//! Names: wherever an id is expected, a name may stand (`TG_BEGIN(DEEPSEEK_ATTN)`); the
//! assembler numbers names in order of first use, skipping ids written as numbers, and
//! `NAME=ID` fixes a name's id. Kernel names belong to their graph. The disassembler writes
//! `NAME=ID` only where numbering in order of use would give another id, so
//! `disassemble(assemble(t)) == t` for text in the disassembler's form, and
//! `assemble(disassemble(p)) == p` for every checked program.

pub mod asm;
pub mod disasm;

pub use asm::ParseCx;
pub use disasm::PrintCx;

use crate::operand::{BoxRegion, MAX_RANK, Shape};
use pto_wsp_ir::DType;

/// A mistake in assembly text, at a line and column (1-based, columns in characters).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{col}: {message}")]
pub struct AsmError {
    /// Line.
    pub line: usize,
    /// Column.
    pub col: usize,
    /// What is wrong.
    pub message: String,
}

/// Whether `s` is an identifier: `[A-Za-z_][A-Za-z0-9_]*`.
pub fn is_ident(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}

/// An entry symbol as text: bare when it is an identifier (dots and `$` allowed after the
/// first character), else quoted with `\"` and `\\` escaped.
pub fn quote_symbol(s: &str) -> String {
    let mut c = s.chars();
    let bare = c
        .next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || matches!(x, '_' | '.' | '$'));
    if bare {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// One operand's text, where it stands.
#[derive(Clone, Copy, Debug)]
pub struct Arg<'a> {
    /// The text, trimmed.
    pub text: &'a str,
    /// Line.
    pub line: usize,
    /// Column of its first character.
    pub col: usize,
}

impl<'a> Arg<'a> {
    /// An error at this operand.
    pub fn error(&self, message: impl Into<String>) -> AsmError {
        AsmError {
            line: self.line,
            col: self.col,
            message: message.into(),
        }
    }

    fn sub(&self, text: &'a str) -> Arg<'a> {
        let lead = text.len() - text.trim_start().len();
        let off = (text.as_ptr() as usize).saturating_sub(self.text.as_ptr() as usize);
        Arg {
            text: text.trim(),
            line: self.line,
            col: self.col + self.text[..off.min(self.text.len())].chars().count() + lead,
        }
    }

    /// Whether the text starts like a number (a digit, or `-` and a digit).
    pub fn is_number(&self) -> bool {
        let t = self.text.strip_prefix('-').unwrap_or(self.text);
        t.starts_with(|c: char| c.is_ascii_digit())
    }

    /// An unsigned number: decimal or `0x` hexadecimal, or a product of them (`64*1024`).
    pub fn number(&self) -> Result<u64, AsmError> {
        let mut acc: u64 = 1;
        for part in self.text.split('*') {
            let p = part.trim();
            let v = if let Some(h) = p.strip_prefix("0x").or_else(|| p.strip_prefix("0X")) {
                u64::from_str_radix(&h.replace('_', ""), 16)
            } else {
                p.replace('_', "").parse::<u64>()
            }
            .map_err(|_| self.error(format!("expected a number, found `{}`", self.text)))?;
            acc = acc
                .checked_mul(v)
                .ok_or_else(|| self.error(format!("`{}` does not fit 64 bits", self.text)))?;
        }
        Ok(acc)
    }

    /// 64 bits: an unsigned number, a negative integer (two's complement) or a float literal
    /// (its `f64` bits: how kernels receive float scalars).
    pub fn bits64(&self) -> Result<u64, AsmError> {
        let t = self.text;
        if t.contains(['.', 'e', 'E']) && !t.starts_with("0x") && !t.contains('*') {
            return t
                .parse::<f64>()
                .map(f64::to_bits)
                .map_err(|_| self.error(format!("expected a number, found `{t}`")));
        }
        if let Some(neg) = t.strip_prefix('-') {
            let v = neg
                .parse::<i64>()
                .map_err(|_| self.error(format!("expected a number, found `{t}`")))?;
            return Ok(v.wrapping_neg() as u64);
        }
        self.number()
    }

    /// An entry symbol: bare (letters, digits, `_`, `.`, `$`) or a quoted string.
    pub fn symbol(&self) -> Result<String, AsmError> {
        let t = self.text;
        if let Some(inner) = t.strip_prefix('"') {
            let Some(body) = inner.strip_suffix('"') else {
                return Err(self.error("unterminated string"));
            };
            let mut out = String::new();
            let mut it = body.chars();
            while let Some(c) = it.next() {
                match c {
                    '\\' => match it.next() {
                        Some('"') => out.push('"'),
                        Some('\\') => out.push('\\'),
                        Some('n') => out.push('\n'),
                        other => {
                            return Err(self.error(format!(
                                "unknown escape `\\{}` in a string",
                                other.map(String::from).unwrap_or_default()
                            )));
                        }
                    },
                    '"' => return Err(self.error("a `\"` inside a string must be escaped")),
                    '\0' => return Err(self.error("a string may not hold a NUL")),
                    c => out.push(c),
                }
            }
            if out.is_empty() {
                return Err(self.error("an entry symbol is empty"));
            }
            return Ok(out);
        }
        let mut c = t.chars();
        let ok = c
            .next()
            .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
            && c.all(|x| x.is_ascii_alphanumeric() || matches!(x, '_' | '.' | '$'));
        if !ok {
            return Err(self.error(format!(
                "expected an entry symbol (a name or a quoted string), found `{t}`"
            )));
        }
        Ok(t.to_string())
    }

    /// The items of `[a, b, ...]` after the opening bracket at `open` (or of `{...}`).
    fn list(&self, open: usize, close: char) -> Result<Vec<Arg<'a>>, AsmError> {
        let t = self.text;
        let Some(inner) = t[open + 1..].strip_suffix(close) else {
            return Err(self.error(format!("expected `{close}` at the end of `{t}`")));
        };
        if inner.trim().is_empty() {
            return Ok(Vec::new());
        }
        Ok(inner.split(',').map(|p| self.sub(p)).collect())
    }

    /// `dtype[d, ...]` or `-`.
    pub fn shape(&self) -> Result<Option<Shape>, AsmError> {
        let t = self.text;
        if t == "-" {
            return Ok(None);
        }
        let open = t.find('[').ok_or_else(|| {
            self.error(format!("expected a shape like `f32[64, 128]`, found `{t}`"))
        })?;
        let dtype = DType::parse_keyword(t[..open].trim()).ok_or_else(|| {
            let all: Vec<&str> = DType::ALL.iter().map(|d| d.keyword()).collect();
            self.error(format!(
                "expected an element type ({}), found `{}`",
                all.join(", "),
                t[..open].trim()
            ))
        })?;
        let items = self.list(open, ']')?;
        if !(1..=MAX_RANK).contains(&items.len()) {
            return Err(self.error(format!(
                "a shape has 1 to {MAX_RANK} dimensions, this one {}",
                items.len()
            )));
        }
        let mut dims = Vec::with_capacity(items.len());
        for a in &items {
            let v = a.number()?;
            let d = u32::try_from(v)
                .ok()
                .filter(|&d| d > 0)
                .ok_or_else(|| a.error(format!("a dimension is 1 to {}, not {v}", u32::MAX)))?;
            dims.push(d);
        }
        Ok(Some(Shape { dtype, dims }))
    }

    /// `[start+:size, ...]` or `-`.
    pub fn boxed(&self) -> Result<Option<BoxRegion>, AsmError> {
        let t = self.text;
        if t == "-" {
            return Ok(None);
        }
        if !t.starts_with('[') {
            return Err(self.error(format!(
                "expected a box like `[0+:32, 64+:64]`, found `{t}`"
            )));
        }
        let items = self.list(0, ']')?;
        if !(1..=MAX_RANK).contains(&items.len()) {
            return Err(self.error(format!(
                "a box has 1 to {MAX_RANK} dimensions, this one {}",
                items.len()
            )));
        }
        let mut b = BoxRegion {
            start: Vec::new(),
            size: Vec::new(),
        };
        for a in &items {
            let Some((s, n)) = a.text.split_once("+:") else {
                return Err(a.error(format!("expected `start+:size`, found `{}`", a.text)));
            };
            let fit = |x: &Arg<'_>, min: u64| {
                let v = x.number()?;
                u32::try_from(v)
                    .ok()
                    .filter(|&d| d as u64 >= min)
                    .ok_or_else(|| x.error(format!("{v} is not {min} to {}", u32::MAX)))
            };
            b.start.push(fit(&a.sub(s), 0)?);
            b.size.push(fit(&a.sub(n), 1)?);
        }
        Ok(Some(b))
    }

    /// `NAME` or `NAME[index]` (the name part as its own argument).
    pub fn indexed(&self) -> Result<(Arg<'a>, u32), AsmError> {
        let t = self.text;
        match t.find('[') {
            None => Ok((*self, 0)),
            Some(open) => {
                let items = self.list(open, ']')?;
                let [idx] = items.as_slice() else {
                    return Err(self.error(format!("expected one index in `{t}`")));
                };
                let v = idx.number()?;
                let i =
                    u32::try_from(v).map_err(|_| idx.error(format!("{v} does not fit 32 bits")))?;
                Ok((self.sub(&t[..open]), i))
            }
        }
    }

    /// The items of `{a, b, ...}`.
    pub fn braced(&self) -> Result<Vec<Arg<'a>>, AsmError> {
        if !self.text.starts_with('{') {
            return Err(self.error(format!(
                "expected a kernel set like `{{A, B}}`, found `{}`",
                self.text
            )));
        }
        self.list(0, '}')
    }
}

/// The operands of one instruction being parsed, consumed in table order.
pub struct Args<'a> {
    op: crate::isa::Op,
    items: Vec<Arg<'a>>,
    next: usize,
    line: usize,
    /// Column after the last character of the instruction (for missing operands).
    end_col: usize,
}

impl<'a> Args<'a> {
    pub(crate) fn new(
        op: crate::isa::Op,
        items: Vec<Arg<'a>>,
        line: usize,
        end_col: usize,
    ) -> Args<'a> {
        Args {
            op,
            items,
            next: 0,
            line,
            end_col,
        }
    }

    fn names(&self) -> String {
        let n: Vec<&str> = self.op.operands().iter().map(|o| o.name).collect();
        n.join(", ")
    }

    /// The next operand, parsed as `T`; its default when the text has no more operands.
    pub(crate) fn next<T: crate::operand::Operand>(
        &mut self,
        cx: &mut ParseCx<'_>,
        default: Option<T>,
    ) -> Result<T, AsmError> {
        let i = self.next;
        self.next += 1;
        match self.items.get(i) {
            Some(a) => T::parse(a, cx),
            None => default.ok_or_else(|| {
                let ops = self.op.operands();
                let required = ops.iter().filter(|o| !o.optional).count();
                AsmError {
                    line: self.line,
                    col: self.end_col,
                    message: format!(
                        "{} needs {required} operand(s) ({}), found {}",
                        self.op.mnemonic(),
                        self.names(),
                        self.items.len()
                    ),
                }
            }),
        }
    }

    /// Fails if operands are left over.
    pub(crate) fn finish(&self) -> Result<(), AsmError> {
        match self.items.get(self.next) {
            None => Ok(()),
            Some(a) => Err(a.error(format!(
                "{} takes at most {} operand(s) ({}), found {}",
                self.op.mnemonic(),
                self.op.operands().len(),
                self.names(),
                self.items.len()
            ))),
        }
    }
}
