//! The assembler: text to a [`Program`], names numbered.
//!
//! Why: text is how programs are written; every mistake must be reported at its line and
//! column, never accepted silently or half-read.
//!
//! How: each line is split into a mnemonic and its operands once; the operands are parsed
//! twice through the instruction table. The first pass collects the ids written as numbers and
//! the names fixed with `NAME=ID`; the second numbers the other names in order of first use,
//! skipping those ids (see [`crate::text`]).

use super::{Arg, Args, AsmError, is_ident};
use crate::isa::{Insn, Op};
use crate::operand::{MAX_ID, Ns};
use crate::program::{Names, Program};
use std::collections::{BTreeSet, HashMap};

/// Where each instruction of an assembled program stands in the text.
#[derive(Clone, Debug, Default)]
pub struct TextLocations {
    /// Per instruction: line and column of its mnemonic.
    pub insn: Vec<(usize, usize)>,
    /// Per instruction: column of each operand written.
    pub operands: Vec<Vec<usize>>,
}

impl TextLocations {
    /// Line and column of operand `operand` of instruction `insn` (of the instruction when the
    /// operand was not written).
    pub fn at(&self, insn: usize, operand: Option<usize>) -> (usize, usize) {
        let (line, col) = self.insn.get(insn).copied().unwrap_or((1, 1));
        let col = operand
            .and_then(|o| self.operands.get(insn)?.get(o).copied())
            .unwrap_or(col);
        (line, col)
    }
}

/// The scope of an id: kernels per graph definition (the index of its `TG_BEGIN`), everything
/// else program-wide.
type Scope = (Ns, usize);

/// Outside any graph.
const NO_GRAPH: usize = usize::MAX;

#[derive(Default)]
struct Space {
    /// Ids written as numbers, and ids fixed by `NAME=ID`.
    reserved: BTreeSet<u32>,
    /// Names fixed by `NAME=ID`: id and where.
    pins: HashMap<String, (u32, usize, usize)>,
    /// Names numbered so far (second pass).
    assigned: HashMap<String, u32>,
    /// The next id to try for a new name.
    next: u32,
}

/// The assembler's state while it parses operands (see the module docs).
pub struct ParseCx<'a> {
    collect: bool,
    scope: usize,
    spaces: HashMap<Scope, Space>,
    /// Graph id of each graph definition (by its `TG_BEGIN` index).
    graphs: HashMap<usize, u32>,
    /// Names given, by scope.
    names: Vec<(Scope, u32, String)>,
    _text: std::marker::PhantomData<&'a str>,
}

impl ParseCx<'_> {
    fn key(&self, ns: Ns) -> Scope {
        (ns, if ns == Ns::Kernel { self.scope } else { 0 })
    }

    /// The id an operand names: a number (`3`, or `#3` where a bare number would be an
    /// immediate), a name, or `NAME=ID`.
    pub fn id(&mut self, ns: Ns, arg: &Arg<'_>) -> Result<u32, AsmError> {
        let t = arg.text;
        let numeric = |a: &Arg<'_>, text: &str| {
            let a = Arg { text, ..*a };
            let v = a.number()?;
            u32::try_from(v)
                .ok()
                .filter(|&v| v < MAX_ID)
                .ok_or_else(|| a.error(format!("a {} id is below {MAX_ID}, not {v}", ns.word())))
        };
        let key = self.key(ns);
        if t.starts_with(|c: char| c.is_ascii_digit()) || t.starts_with('#') {
            let v = numeric(arg, t.trim_start_matches('#'))?;
            if self.collect {
                self.spaces.entry(key).or_default().reserved.insert(v);
            }
            return Ok(v);
        }
        if let Some((name, num)) = t.split_once('=') {
            let name = name.trim();
            if !is_ident(name) {
                return Err(arg.error(format!("`{name}` is not a name")));
            }
            let v = numeric(arg, num.trim())?;
            if self.collect {
                let space = self.spaces.entry(key).or_default();
                if let Some(&(other, line, col)) = space.pins.get(name)
                    && other != v
                {
                    return Err(arg.error(format!(
                        "`{name}` is {} {other} at {line}:{col} and {} {v} here",
                        ns.word(),
                        ns.word()
                    )));
                }
                if let Some((n2, _)) = space.pins.iter().find(|(n, p)| p.0 == v && *n != name) {
                    return Err(arg.error(format!(
                        "{} {v} is named both `{n2}` and `{name}`",
                        ns.word()
                    )));
                }
                space.pins.insert(name.to_string(), (v, arg.line, arg.col));
                space.reserved.insert(v);
            } else {
                self.record(key, v, name);
            }
            return Ok(v);
        }
        if !is_ident(t) {
            return Err(arg.error(format!(
                "expected a {} (a number or a name), found `{t}`",
                ns.word()
            )));
        }
        if self.collect {
            return Ok(0);
        }
        let space = self.spaces.entry(key).or_default();
        let v = if let Some(&(v, _, _)) = space.pins.get(t) {
            v
        } else if let Some(&v) = space.assigned.get(t) {
            v
        } else {
            while space.reserved.contains(&space.next) {
                space.next += 1;
            }
            if space.next == MAX_ID {
                return Err(arg.error(format!("too many {} names", ns.word())));
            }
            let v = space.next;
            space.next += 1;
            space.assigned.insert(t.to_string(), v);
            v
        };
        self.record(key, v, t);
        Ok(v)
    }

    fn record(&mut self, key: Scope, id: u32, name: &str) {
        self.names.push((key, id, name.to_string()));
    }
}

/// One instruction line, split.
struct Line<'a> {
    op: Op,
    line: usize,
    col: usize,
    args: Vec<Arg<'a>>,
    end_col: usize,
}

/// Splits `text` at top-level commas (outside brackets, braces and quotes).
fn split_args<'a>(body: &'a str, line: usize, col0: usize) -> Result<Vec<Arg<'a>>, AsmError> {
    if body.trim().is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    let (mut depth, mut quoted, mut esc) = (0i32, false, false);
    let mut start = 0;
    let mut push = |from: usize, to: usize| {
        let piece = &body[from..to];
        let lead = piece.len() - piece.trim_start().len();
        let arg = Arg {
            text: piece.trim(),
            line,
            col: col0 + body[..from + lead].chars().count(),
        };
        if arg.text.is_empty() {
            return Err(arg.error("an operand is missing between commas"));
        }
        out.push(arg);
        Ok(())
    };
    for (i, c) in body.char_indices() {
        if quoted {
            match c {
                _ if esc => esc = false,
                '\\' => esc = true,
                '"' => quoted = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => quoted = true,
            '[' | '{' | '(' => depth += 1,
            ']' | '}' | ')' => depth -= 1,
            ',' if depth == 0 => {
                push(start, i)?;
                start = i + 1;
            }
            _ => {}
        }
    }
    push(start, body.len())?;
    Ok(out)
}

/// The text of `line` before a `//` comment (outside quotes).
fn strip_comment(line: &str) -> &str {
    let mut quoted = false;
    let mut esc = false;
    let b = line.as_bytes();
    for (i, &c) in b.iter().enumerate() {
        if quoted {
            match c {
                _ if esc => esc = false,
                b'\\' => esc = true,
                b'"' => quoted = false,
                _ => {}
            }
            continue;
        }
        match c {
            b'"' => quoted = true,
            b'/' if b.get(i + 1) == Some(&b'/') => return &line[..i],
            _ => {}
        }
    }
    line
}

fn split_line(raw: &str, line: usize) -> Result<Option<Line<'_>>, AsmError> {
    let text = strip_comment(raw).trim_end();
    let body = text.trim_start();
    if body.is_empty() {
        return Ok(None);
    }
    let col = text.chars().count() - body.chars().count() + 1;
    let err = |c: usize, m: String| AsmError {
        line,
        col: c,
        message: m,
    };
    let end = body
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(body.len());
    let mnem = &body[..end];
    let op = Op::from_mnemonic(mnem).ok_or_else(|| {
        let upper = mnem.to_ascii_uppercase();
        let hint = Op::from_mnemonic(&upper)
            .map(|o| format!(" (mnemonics are upper case: `{}`)", o.mnemonic()))
            .unwrap_or_default();
        err(
            col,
            if mnem.is_empty() {
                format!("expected an instruction, found `{body}`")
            } else {
                format!("unknown instruction `{mnem}`{hint}")
            },
        )
    })?;
    let rest = &body[end..];
    let rest_col = col + end;
    let trimmed = rest.trim_start();
    let open_col = rest_col + (rest.len() - trimmed.len());
    let end_col = col + body.chars().count();
    if trimmed.is_empty() {
        return Ok(Some(Line {
            op,
            line,
            col,
            args: Vec::new(),
            end_col,
        }));
    }
    let Some(inner) = trimmed.strip_prefix('(') else {
        return Err(err(
            open_col,
            format!("expected `(` after {mnem}, found `{trimmed}`"),
        ));
    };
    let Some(inner) = inner.strip_suffix(')') else {
        return Err(err(
            end_col,
            format!("expected `)` at the end of the {mnem} line"),
        ));
    };
    let args = split_args(inner, line, open_col + 1)?;
    Ok(Some(Line {
        op,
        line,
        col,
        args,
        end_col: end_col - 1,
    }))
}

fn parse_pass(lines: &[Line<'_>], cx: &mut ParseCx<'_>) -> Result<Vec<Insn>, AsmError> {
    let mut insns = Vec::with_capacity(lines.len());
    for (i, l) in lines.iter().enumerate() {
        if l.op == Op::TgBegin {
            cx.scope = i;
        }
        let mut args = Args::new(l.op, l.args.clone(), l.line, l.end_col);
        let insn = Insn::parse_operands(l.op, &mut args, cx)?;
        if let Insn::TgBegin { graph } = &insn {
            cx.graphs.insert(i, graph.0);
        }
        if l.op == Op::TgEnd {
            cx.scope = NO_GRAPH;
        }
        insns.push(insn);
    }
    Ok(insns)
}

/// Parses `text` into a program, without checking its meaning ([`crate::assemble`] does both).
pub fn parse(text: &str) -> Result<(Program, TextLocations), AsmError> {
    let mut lines = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        if let Some(l) = split_line(raw, n + 1)? {
            lines.push(l);
        }
    }
    let mut cx = ParseCx {
        collect: true,
        scope: NO_GRAPH,
        spaces: HashMap::new(),
        graphs: HashMap::new(),
        names: Vec::new(),
        _text: std::marker::PhantomData,
    };
    parse_pass(&lines, &mut cx)?;
    cx.collect = false;
    cx.scope = NO_GRAPH;
    let insns = parse_pass(&lines, &mut cx)?;
    let mut names = Names::new();
    for ((ns, scope), id, name) in cx.names {
        let graph = if ns == Ns::Kernel {
            match cx.graphs.get(&scope) {
                Some(&g) => g,
                None => continue,
            }
        } else {
            0
        };
        names.insert(ns, graph, id, name);
    }
    let locs = TextLocations {
        insn: lines.iter().map(|l| (l.line, l.col)).collect(),
        operands: lines
            .iter()
            .map(|l| l.args.iter().map(|a| a.col).collect())
            .collect(),
    };
    Ok((Program { insns, names }, locs))
}
