//! The parser of the `.wsp` text format (`docs/FORMAT.md`): text in, [`Module`] out.
//!
//! Why hand-written: the grammar is small, and a recursive-descent parser with a
//! precedence-climbing expression parser gives specific messages ("expected `;` after tensor
//! declaration, found `}`") pointing at the exact token.
//! Promises: [`parse`] never panics, whatever the input; it stops at the first error; every
//! parsed [`Ident`], statement, workload, pipeline, process, schedule and schedule item carries
//! the byte range it was written at; nesting deeper than [`MAX_DEPTH`] levels (blocks,
//! parentheses, operators, dispatch thresholds) is an error rather than a stack overflow, while a
//! chain of infix operators (`1 + 1 + …`) is of any length, since every walk reads it in a loop
//! (`Expr::left_spine`); and the
//! printer's output (`Display` for [`Module`]) parses back to an equal module.

mod kernel_body;
mod lexer;
mod plan;
mod spatial;

use crate::csp::{Channel, Pipeline, Process};
use crate::expr::{BinOp, Expr, FloatLit, UnOp};
use crate::loc::{Ident, Loc};
use crate::module::{
    AxisDecl, AxisKind, KernelDecl, KernelParam, Module, ParamKind, SlotDecl, SymbolDecl,
    TensorDecl, Tiers, Workload,
};
use crate::schedule::{
    DepsMode, Dispatch, GateScope, Levels, PoolsPolicy, ReadyPolicy, Schedule, ScheduleItem,
    ScheduleItemKind, StartPolicy, TaskGraphItem, Timing, TracePolicy, WindowMode,
};
use crate::types::{Access, DType, ExecPool, ParamType, ScalarType};
use crate::workload::{Arg, LoopOrder, Region, RegionDim, Stmt, StmtKind, TaskStmt};
use lexer::{Kind, Token};

/// How deeply blocks, parentheses, unary operators, right operands and dispatch thresholds may
/// nest before the parser gives up with an error (instead of overflowing the stack). A chain of
/// left-associative operators counts one level, whatever its length.
pub const MAX_DEPTH: usize = 256;

/// The reserved words of the format: never identifiers.
#[rustfmt::skip]
pub const RESERVED_WORDS: &[&str] = &[
    "symbol", "slot", "tensor", "axis", "kernel", "workload", "pipeline", "channel", "process",
    "schedule", "for", "in", "out", "inout", "tiers", "else", "if", "parallel_for", "for_each",
    "select", "combine", "sequential", "task", "set", "load", "call", "send", "consume", "as",
    "consumes", "produces", "true", "false", "min", "max", "dense", "dense_dyn", "ragged", "sparse",
    "while", "break",
];

/// Whether `word` is a reserved word (and so cannot be an identifier).
pub fn is_reserved(word: &str) -> bool {
    RESERVED_WORDS.contains(&word)
}

/// A syntax error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ParseError {
    /// What is wrong.
    pub message: String,
    /// Where.
    pub loc: Loc,
}

impl ParseError {
    fn new(message: impl Into<String>, loc: Loc) -> ParseError {
        ParseError {
            message: message.into(),
            loc,
        }
    }
}

impl crate::source::Diagnostic for ParseError {
    fn loc(&self) -> Loc {
        self.loc
    }

    /// What was expected, for "expected X, found Y" errors when X is short; "opened here" for
    /// unclosed delimiters.
    fn label(&self) -> Option<String> {
        let m = &self.message;
        if let Some(rest) = m.strip_prefix("expected ") {
            let what = rest.split(", found ").next().unwrap_or(rest);
            (what.len() <= 32).then(|| format!("expected {what}"))
        } else if m.starts_with("unterminated") || m.starts_with("unclosed") {
            Some("opened here".into())
        } else {
            None
        }
    }
}

/// Parses a module from its text.
pub fn parse(text: &str) -> Result<Module, ParseError> {
    Parser::new(text)?.module()
}

/// Parses one expression (the whole text), as written inside a module.
pub fn parse_expr(text: &str) -> Result<Expr, ParseError> {
    let mut p = Parser::new(text)?;
    let e = p.expr()?;
    if p.peek().kind != Kind::Eof {
        return Err(p.err_expected("end of input after the expression"));
    }
    Ok(e)
}

type PResult<T> = Result<T, ParseError>;

struct Parser<'a> {
    toks: Vec<Token<'a>>,
    pos: usize,
    /// End of the last token consumed (for the locations of multi-token nodes).
    prev_end: usize,
    /// Current nesting depth, bounded by [`MAX_DEPTH`].
    depth: usize,
    /// Opening delimiters not closed yet, innermost last.
    open: Vec<(&'static str, Loc)>,
    /// Inside a kernel body: `rows(x)` and `cols(x)` are names (the region extents,
    /// `crate::kernel_body`).
    extents: bool,
}

/// The names of the schedule items, for messages.
const SCHEDULE_ITEMS: &str = "executors, dispatch, streams, stream_by, timing, task_graph, \
                              task_window, pipeline_depth, batch_deps, dispatch_threshold";

fn one_of<T: Copy>(all: &[T], kw: fn(T) -> &'static str) -> String {
    all.iter().map(|&v| kw(v)).collect::<Vec<_>>().join(", ")
}

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> PResult<Parser<'a>> {
        Ok(Parser {
            toks: lexer::lex(text)?,
            pos: 0,
            prev_end: 0,
            depth: 0,
            open: Vec::new(),
            extents: false,
        })
    }

    // ----- token helpers -------------------------------------------------------------------

    fn peek(&self) -> Token<'a> {
        self.peek_at(0)
    }

    fn peek_at(&self, n: usize) -> Token<'a> {
        let last = self.toks.len() - 1; // the Eof token is always there
        self.toks[(self.pos + n).min(last)]
    }

    fn bump(&mut self) -> Token<'a> {
        let t = self.peek();
        if t.kind != Kind::Eof {
            self.pos += 1;
            self.prev_end = t.end;
        }
        t
    }

    fn eat_punct(&mut self, p: &str) -> bool {
        let hit = self.peek().is_punct(p);
        if hit {
            self.bump();
        }
        hit
    }

    fn eat_word(&mut self, w: &str) -> bool {
        let hit = self.peek().is_word(w);
        if hit {
            self.bump();
        }
        hit
    }

    fn loc_from(&self, start: usize) -> Loc {
        Loc::new(start, self.prev_end.max(start))
    }

    /// "expected {what}, found {token}" at the current token; at the end of the input with a
    /// delimiter still open, says which one instead.
    fn err_expected(&self, what: &str) -> ParseError {
        let t = self.peek();
        if t.kind == Kind::Eof
            && let Some(&(delim, loc)) = self.open.last()
        {
            let message = if delim == "{" {
                "unterminated block: `{` opened here is never closed".to_string()
            } else {
                format!("unclosed delimiter: `{delim}` opened here is never closed")
            };
            return ParseError::new(message, loc);
        }
        // At the end of the input, point just past the last token rather than at the end.
        let loc = if t.kind == Kind::Eof {
            Loc::new(self.prev_end, self.prev_end)
        } else {
            t.loc()
        };
        ParseError::new(format!("expected {what}, found {}", t.describe()), loc)
    }

    /// Consumes the punctuation `p`; `ctx` completes "expected `p` ...".
    fn expect(&mut self, p: &str, ctx: &str) -> PResult<Token<'a>> {
        if self.peek().is_punct(p) {
            Ok(self.bump())
        } else if ctx.is_empty() {
            Err(self.err_expected(&format!("`{p}`")))
        } else {
            Err(self.err_expected(&format!("`{p}` {ctx}")))
        }
    }

    /// Consumes the keyword `w`.
    fn expect_word(&mut self, w: &str, ctx: &str) -> PResult<Token<'a>> {
        if self.peek().is_word(w) {
            Ok(self.bump())
        } else {
            Err(self.err_expected(&format!("`{w}` {ctx}")))
        }
    }

    /// Consumes an opening delimiter and remembers it until [`Parser::close`].
    fn open(&mut self, p: &'static str, ctx: &str) -> PResult<()> {
        let t = self.expect(p, ctx)?;
        self.open.push((p, t.loc()));
        Ok(())
    }

    fn close(&mut self, p: &'static str, ctx: &str) -> PResult<()> {
        self.expect(p, ctx)?;
        self.open.pop();
        Ok(())
    }

    /// Goes one nesting level deeper, failing past [`MAX_DEPTH`].
    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.too_deep(self.peek().loc()));
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    fn too_deep(&self, loc: Loc) -> ParseError {
        ParseError::new(
            format!("nesting too deep (the limit is {MAX_DEPTH} levels)"),
            loc,
        )
    }

    /// An identifier (not a reserved word); `what` says what it names.
    fn ident(&mut self, what: &str) -> PResult<Ident> {
        let t = self.peek();
        if t.kind == Kind::Word && !is_reserved(t.text) {
            self.bump();
            Ok(Ident::at(t.text, t.loc()))
        } else {
            Err(self.err_expected(what))
        }
    }

    /// A kernel's name where only a kernel name can stand (after `kernel`, `task` and `=>` in
    /// tiers): any word, reserved or not, so built-ins named like keywords (`max`, `min`,
    /// `combine`) can be declared and called.
    fn kernel_name(&mut self) -> PResult<Ident> {
        let t = self.peek();
        if t.kind == Kind::Word {
            self.bump();
            Ok(Ident::at(t.text, t.loc()))
        } else {
            Err(self.err_expected("kernel name"))
        }
    }

    /// A comma-separated list up to (not including) the closing `close`; the caller consumed
    /// the opening delimiter and consumes the closing one.
    fn list<T>(
        &mut self,
        close: &str,
        ctx: &str,
        mut item: impl FnMut(&mut Self) -> PResult<T>,
    ) -> PResult<Vec<T>> {
        let mut items = Vec::new();
        if self.peek().is_punct(close) {
            return Ok(items);
        }
        loop {
            items.push(item(self)?);
            if self.peek().is_punct(close) {
                break;
            }
            if !self.eat_punct(",") {
                return Err(self.err_expected(&format!("`,` or `{close}` {ctx}")));
            }
        }
        Ok(items)
    }

    /// A word naming one value of a keyword enum.
    fn keyword<T: Copy>(&mut self, what: &str, all: &[T], kw: fn(T) -> &'static str) -> PResult<T> {
        let t = self.peek();
        if t.kind != Kind::Word {
            return Err(self.err_expected(what));
        }
        match all.iter().find(|&&v| kw(v) == t.text) {
            Some(&v) => {
                self.bump();
                Ok(v)
            }
            None => Err(ParseError::new(
                format!(
                    "unknown {what} `{}` (expected one of {})",
                    lexer::shorten(t.text),
                    one_of(all, kw)
                ),
                t.loc(),
            )),
        }
    }

    fn unknown(&self, what: &str, options: &str) -> ParseError {
        let t = self.peek();
        if t.kind == Kind::Word {
            ParseError::new(
                format!(
                    "unknown {what} `{}` (expected one of {options})",
                    lexer::shorten(t.text)
                ),
                t.loc(),
            )
        } else {
            self.err_expected(what)
        }
    }

    // ----- literals ------------------------------------------------------------------------

    /// The value of an integer literal token as `u64` (a `u` suffix is allowed).
    fn literal_u64(&self, t: Token<'_>, ty: &str) -> PResult<u64> {
        t.text
            .trim_end_matches('u')
            .parse::<u64>()
            .map_err(|_| self.overflow(t.text, ty, t.loc()))
    }

    fn overflow(&self, text: &str, ty: &str, loc: Loc) -> ParseError {
        ParseError::new(
            format!(
                "integer literal `{}` does not fit in {ty}",
                lexer::shorten(text)
            ),
            loc,
        )
    }

    /// A signed `i64` literal token (no suffix), negated when `neg_at` gives the `-` before it.
    fn literal_i64(&self, t: Token<'_>, neg_at: Option<usize>) -> PResult<i64> {
        let shown = if neg_at.is_some() {
            format!("-{}", t.text)
        } else {
            t.text.to_string()
        };
        let loc = Loc::new(neg_at.unwrap_or(t.start), t.end);
        let v = t
            .text
            .parse::<u64>()
            .map_err(|_| self.overflow(&shown, "i64", loc))?;
        let v = if neg_at.is_some() {
            0i64.checked_sub_unsigned(v)
        } else {
            i64::try_from(v).ok()
        };
        v.ok_or_else(|| self.overflow(&shown, "i64", loc))
    }

    /// A float literal (negated when `neg_at` is the offset of its `-`); out of the `f64` range
    /// is an error.
    fn literal_float(&self, t: Token<'_>, neg_at: Option<usize>) -> PResult<FloatLit> {
        let loc = Loc::new(neg_at.unwrap_or(t.start), t.end);
        let v = t.text.parse::<f64>().unwrap_or(f64::INFINITY);
        let v = if neg_at.is_some() { -v } else { v };
        let mut lit = FloatLit::new(v).ok_or_else(|| {
            ParseError::new(
                format!(
                    "float literal `{}{}` is out of the range of f64",
                    if neg_at.is_some() { "-" } else { "" },
                    lexer::shorten(t.text)
                ),
                loc,
            )
        })?;
        lit.loc = loc;
        Ok(lit)
    }

    /// `N`: a non-negative integer literal.
    fn count(&mut self, what: &str) -> PResult<u64> {
        let t = self.peek();
        if t.kind != Kind::Int {
            return Err(self.err_expected(&format!("{what} (a non-negative integer literal)")));
        }
        self.bump();
        self.literal_u64(t, "u64")
    }

    /// `INT`: an integer literal, possibly negative.
    fn signed_int(&mut self, what: &str) -> PResult<i64> {
        let neg = self.peek().is_punct("-").then(|| self.peek().start);
        let t = self.peek_at(neg.is_some() as usize);
        if t.kind != Kind::Int || t.text.ends_with('u') {
            if neg.is_some() {
                self.bump();
            }
            return Err(self.err_expected(&format!("{what} (an integer literal)")));
        }
        if neg.is_some() {
            self.bump();
        }
        self.bump();
        self.literal_i64(t, neg)
    }

    // ----- expressions ---------------------------------------------------------------------

    fn expr(&mut self) -> PResult<Expr> {
        Ok(self.ternary()?.0)
    }

    /// `ternary := or ('?' expr ':' expr)?`; every expression function also returns the height
    /// of the tree it built, which is bounded like the nesting depth.
    fn ternary(&mut self) -> PResult<(Expr, usize)> {
        self.enter()?;
        let start = self.peek().loc();
        let (cond, ch) = self.binary(1)?;
        let result = if self.eat_punct("?") {
            let (then, th) = self.ternary()?;
            self.expect(":", "between the branches of a conditional expression")?;
            let (other, oh) = self.ternary()?;
            let h = self.height(1 + ch.max(th).max(oh), start)?;
            (Expr::ternary(cond, then, other), h)
        } else {
            (cond, ch)
        };
        self.leave();
        Ok(result)
    }

    fn height(&self, h: usize, loc: Loc) -> PResult<usize> {
        if h > MAX_DEPTH {
            Err(self.too_deep(loc))
        } else {
            Ok(h)
        }
    }

    fn peek_binop(&self) -> Option<BinOp> {
        let t = self.peek();
        if t.kind != Kind::Punct {
            return None;
        }
        BinOp::ALL
            .iter()
            .copied()
            .find(|op| op.precedence().is_some() && op.symbol() == t.text)
    }

    /// Precedence climbing over the infix operators binding at least as tight as `min_prec`.
    fn binary(&mut self, min_prec: u8) -> PResult<(Expr, usize)> {
        let (mut lhs, mut h) = self.unary()?;
        while let Some(op) = self.peek_binop() {
            let prec = op.precedence().unwrap_or(0);
            if prec < min_prec {
                break;
            }
            let op_loc = self.bump().loc();
            let (rhs, rh) = self.binary(prec + 1)?;
            // A chain of operators is read along its left operands in a loop by every walk, so
            // only the right operand adds a level: a flat sum of any length has height 2.
            h = self.height(h.max(1 + rh), op_loc)?;
            lhs = lhs.bin(op, rhs);
            if op.is_comparison() && self.peek_binop().is_some_and(BinOp::is_comparison) {
                return Err(ParseError::new(
                    "comparison operators cannot be chained; add parentheses",
                    self.peek().loc(),
                ));
            }
        }
        Ok((lhs, h))
    }

    /// `unary := ('-'|'!') unary | atom`, folding `-` before an `i64` literal into the literal.
    fn unary(&mut self) -> PResult<(Expr, usize)> {
        let t = self.peek();
        let op = if t.is_punct("-") {
            UnOp::Neg
        } else if t.is_punct("!") {
            UnOp::Not
        } else {
            return self.atom();
        };
        self.bump();
        let next = self.peek();
        if op == UnOp::Neg && next.kind == Kind::Int && !next.text.ends_with('u') {
            self.bump();
            return Ok((Expr::Int(self.literal_i64(next, Some(t.start))?), 1));
        }
        if op == UnOp::Neg && next.kind == Kind::Float {
            self.bump();
            return Ok((Expr::Float(self.literal_float(next, Some(t.start))?), 1));
        }
        self.enter()?;
        let (e, h) = self.unary()?;
        self.leave();
        let h = self.height(h + 1, t.loc())?;
        Ok((Expr::Unary(op, Box::new(e)), h))
    }

    /// `atom`. Kept small, like every function on the recursion path of nested expressions,
    /// so that deep nesting uses little stack even in unoptimised builds.
    fn atom(&mut self) -> PResult<(Expr, usize)> {
        let t = self.peek();
        if t.is_punct("(") {
            self.open("(", "")?;
            let inner = self.ternary()?;
            self.close(")", "to close the parenthesised expression")?;
            Ok(inner)
        } else if t.is_word("min") || t.is_word("max") {
            self.min_max(t)
        } else if self.extents
            && (t.is_word("rows") || t.is_word("cols"))
            && self.peek_at(1).is_punct("(")
        {
            Ok((self.extent(t)?, 1))
        } else {
            Ok((self.leaf(t)?, 1))
        }
    }

    /// `min(a, b)` / `max(a, b)`.
    fn min_max(&mut self, t: Token<'a>) -> PResult<(Expr, usize)> {
        let (op, ctx) = if t.text == "min" {
            (
                BinOp::Min,
                [
                    "after `min`",
                    "between the operands of `min`",
                    "after the operands of `min`",
                ],
            )
        } else {
            (
                BinOp::Max,
                [
                    "after `max`",
                    "between the operands of `max`",
                    "after the operands of `max`",
                ],
            )
        };
        self.bump();
        self.open("(", ctx[0])?;
        let (a, ah) = self.ternary()?;
        self.expect(",", ctx[1])?;
        let (b, bh) = self.ternary()?;
        self.close(")", ctx[2])?;
        let h = self.height(1 + ah.max(bh), t.loc())?;
        Ok((a.bin(op, b), h))
    }

    /// `rows(x)` / `cols(x)` in a kernel body: the name of a region extent
    /// (`crate::kernel_body::extent_name`).
    fn extent(&mut self, t: Token<'a>) -> PResult<Expr> {
        self.bump();
        self.open("(", "")?;
        let of = self.ident("tile parameter name")?;
        self.close(")", &format!("after the parameter of `{}`", t.text))?;
        let name = crate::kernel_body::extent_name(t.text == "rows", &of.name);
        Ok(Expr::Name(Ident::at(name, t.loc().join(of.loc))))
    }

    /// A literal or a name.
    fn leaf(&mut self, t: Token<'a>) -> PResult<Expr> {
        let e = match t.kind {
            Kind::Int if t.text.ends_with('u') => Expr::UInt(self.literal_u64(t, "u64")?),
            Kind::Int => Expr::Int(self.literal_i64(t, None)?),
            Kind::Float => Expr::Float(self.literal_float(t, None)?),
            Kind::Word if t.text == "true" || t.text == "false" => Expr::Bool(t.text == "true"),
            Kind::Word if !is_reserved(t.text) => Expr::Name(Ident::at(t.text, t.loc())),
            _ => return Err(self.err_expected("an expression")),
        };
        self.bump();
        Ok(e)
    }

    // ----- declarations --------------------------------------------------------------------

    fn module(&mut self) -> PResult<Module> {
        let mut m = Module::default();
        loop {
            let t = self.peek();
            match t.text {
                _ if t.kind == Kind::Eof => return Ok(m),
                _ if t.kind != Kind::Word => {}
                "symbol" | "slot" => {
                    self.bump();
                    let what = t.text;
                    let name = self.ident(&format!("{what} name"))?;
                    self.expect(":", &format!("after {what} name"))?;
                    let ty = self.scalar_type()?;
                    self.expect(";", &format!("after {what} declaration"))?;
                    if what == "symbol" {
                        m.symbols.push(SymbolDecl { name, ty });
                    } else {
                        m.slots.push(SlotDecl { name, ty });
                    }
                    continue;
                }
                "tensor" => {
                    let d = self.tensor()?;
                    m.tensors.push(d);
                    continue;
                }
                "axis" => {
                    let d = self.axis()?;
                    m.axes.push(d);
                    continue;
                }
                "kernel" => {
                    let d = self.kernel()?;
                    m.kernels.push(d);
                    continue;
                }
                "workload" => {
                    let d = self.workload()?;
                    m.workloads.push(d);
                    continue;
                }
                "pipeline" => {
                    let d = self.pipeline()?;
                    m.pipelines.push(d);
                    continue;
                }
                "space" => {
                    let d = self.space_decl()?;
                    m.spaces.push(d);
                    continue;
                }
                "tiers" => {
                    let d = self.tier_table()?;
                    m.tier_tables.push(d);
                    continue;
                }
                "plan" => {
                    let d = self.plan_decl()?;
                    m.plans.push(d);
                    continue;
                }
                "spatial_map" => {
                    let d = self.spatial_map()?;
                    m.spatial_maps.push(d);
                    continue;
                }
                "schedule" => {
                    if m.schedule.is_some() {
                        return Err(ParseError::new(
                            "a module has at most one schedule",
                            t.loc(),
                        ));
                    }
                    m.schedule = Some(self.schedule()?);
                    continue;
                }
                _ => {}
            }
            return Err(self.err_expected(
                "a declaration (symbol, slot, tensor, axis, kernel, workload, pipeline, schedule, space, \
                 tiers, plan or spatial_map)",
            ));
        }
    }

    fn scalar_type(&mut self) -> PResult<ScalarType> {
        self.keyword("type", ScalarType::ALL, ScalarType::keyword)
    }

    fn dtype(&mut self) -> PResult<DType> {
        self.keyword("element type", DType::ALL, DType::keyword)
    }

    fn tensor(&mut self) -> PResult<TensorDecl> {
        self.bump();
        let name = self.ident("tensor name")?;
        self.expect(":", "after tensor name")?;
        let dtype = self.dtype()?;
        self.open("[", "before the tensor's dimensions")?;
        let shape = self.list("]", "in tensor dimensions", Self::expr)?;
        self.close("]", "")?;
        self.expect(";", "after tensor declaration")?;
        Ok(TensorDecl { name, dtype, shape })
    }

    fn axis(&mut self) -> PResult<AxisDecl> {
        self.bump();
        let name = self.ident("axis name")?;
        self.expect("=", "after axis name")?;
        let t = self.peek();
        if !matches!(t.text, "dense" | "dense_dyn" | "ragged" | "sparse") || t.kind != Kind::Word {
            return Err(self.err_expected("an axis kind (dense, dense_dyn, ragged or sparse)"));
        }
        self.bump();
        let ctx = format!("after `{}`", t.text);
        self.open("(", &ctx)?;
        let outer = self.expr()?;
        let kind = match t.text {
            "dense" => AxisKind::Dense(outer),
            "dense_dyn" => AxisKind::DenseDyn(outer),
            "ragged" => {
                self.expect(",", "after the number of rows")?;
                let lengths = self.ident("tensor of row lengths")?;
                let per_row = if self.eat_punct(",") {
                    Some(self.expr()?)
                } else {
                    None
                };
                AxisKind::Ragged {
                    outer,
                    lengths,
                    per_row,
                }
            }
            _ => {
                self.expect(",", "after the number of rows")?;
                let indptr = self.ident("indptr tensor")?;
                self.expect(",", "after the indptr tensor")?;
                let indices = self.ident("indices tensor")?;
                AxisKind::Sparse {
                    outer,
                    indptr,
                    indices,
                }
            }
        };
        self.close(")", &format!("to close `{}(`", t.text))?;
        self.expect(";", "after axis declaration")?;
        Ok(AxisDecl { name, kind })
    }

    fn kernel(&mut self) -> PResult<KernelDecl> {
        self.bump();
        let name = self.kernel_name()?;
        self.open("(", "after kernel name")?;
        let params = self.list(")", "in kernel parameters", Self::kernel_param)?;
        self.close(")", "")?;
        let pool = if self.eat_punct("@") {
            self.keyword("pool", ExecPool::ALL, ExecPool::keyword)?
        } else {
            ExecPool::Any
        };
        let tiers = if self.eat_word("tiers") {
            Some(self.tiers()?)
        } else {
            None
        };
        let body = if self.peek().is_punct("{") {
            Some(self.kernel_block()?)
        } else {
            self.expect(";", "after kernel declaration (or `{` to open its body)")?;
            None
        };
        Ok(KernelDecl {
            name,
            params,
            pool,
            tiers,
            body,
        })
    }

    fn kernel_param(&mut self) -> PResult<KernelParam> {
        let t = self.peek();
        let access = (t.kind == Kind::Word)
            .then(|| Access::parse_keyword(t.text))
            .flatten();
        if let Some(access) = access {
            self.bump();
            let name = self.ident("tile parameter name")?;
            self.expect(":", "after parameter name")?;
            let dtype = self.dtype()?;
            self.open("[", "before the tile's dimensions")?;
            let shape = self.list("]", "in tile dimensions", |p| {
                if p.eat_punct("?") {
                    Ok(None)
                } else {
                    p.count("a tile dimension or `?`").map(Some)
                }
            })?;
            self.close("]", "")?;
            let kind = ParamKind::Tile {
                access,
                dtype,
                shape,
            };
            Ok(KernelParam { name, kind })
        } else {
            let name = self.ident("kernel parameter (`in`, `out`, `inout` or a name)")?;
            self.expect(":", "after parameter name")?;
            let kind =
                ParamKind::Scalar(self.keyword("type", ParamType::ALL, ParamType::keyword)?);
            Ok(KernelParam { name, kind })
        }
    }

    fn tiers(&mut self) -> PResult<Tiers> {
        self.open("{", "after `tiers`")?;
        let mut cases = Vec::new();
        loop {
            if self.eat_word("else") {
                self.expect("=>", "after `else` in tiers")?;
                let default = self.kernel_name()?;
                self.eat_punct(",");
                self.close("}", "after the `else` case of tiers")?;
                return Ok(Tiers { cases, default });
            }
            if self.peek().is_punct("}") {
                return Err(ParseError::new(
                    "missing `else => KERNEL` case at the end of tiers",
                    self.peek().loc(),
                ));
            }
            let cond = self.expr()?;
            self.expect("=>", "after tier condition")?;
            let kernel = self.kernel_name()?;
            cases.push((cond, kernel));
            if !self.peek().is_punct("}") {
                self.expect(",", "after tier case")?;
            }
        }
    }

    // ----- workloads and statements --------------------------------------------------------

    fn workload(&mut self) -> PResult<Workload> {
        let start = self.bump().start;
        let name = self.ident("workload name")?;
        self.open("(", "after workload name")?;
        let params = self.list(")", "in workload parameters", |p| {
            let name = p.ident("parameter name")?;
            p.expect(":", "after parameter name")?;
            Ok((name, p.scalar_type()?))
        })?;
        self.close(")", "")?;
        let body = self.block("to open the workload body")?;
        Ok(Workload {
            name,
            params,
            body,
            loc: self.loc_from(start),
        })
    }

    /// `{ STMT* }`.
    fn block(&mut self, ctx: &str) -> PResult<Vec<Stmt>> {
        self.open("{", ctx)?;
        self.enter()?;
        let mut body = Vec::new();
        while !self.peek().is_punct("}") {
            body.push(self.stmt()?);
        }
        self.close("}", "")?;
        self.leave();
        Ok(body)
    }

    /// One statement. The statement kinds are parsed by separate small functions, picked
    /// through a table, so that the recursion through nested blocks uses little stack.
    fn stmt(&mut self) -> PResult<Stmt> {
        let t = self.peek();
        type Rule<'a> = fn(&mut Parser<'a>, &str) -> PResult<StmtKind>;
        let rule: Rule<'a> = match t.text {
            _ if t.kind != Kind::Word => Self::no_stmt,
            "parallel_for" | "for_each" | "select" => Self::loop_stmt,
            "if" => Self::if_stmt,
            "while" => Self::while_stmt,
            "break" => Self::break_stmt,
            "combine" | "sequential" => Self::group_stmt,
            "task" => Self::task_stmt,
            "set" => Self::set_stmt,
            "load" => Self::load_stmt,
            "call" => Self::call_stmt,
            "send" => Self::send_stmt,
            "consume" => Self::consume_stmt,
            _ => Self::no_stmt,
        };
        let kind = rule(self, t.text)?;
        Ok(Stmt {
            kind,
            loc: self.loc_from(t.start),
        })
    }

    fn no_stmt(&mut self, _: &str) -> PResult<StmtKind> {
        Err(self.err_expected(
            "a statement (parallel_for, for_each, select, if, while, break, combine, sequential, \
             task, set, load, call, send or consume)",
        ))
    }

    fn loop_stmt(&mut self, kw: &str) -> PResult<StmtKind> {
        self.bump();
        let mut vars = vec![self.ident(&format!("loop variable after `{kw}`"))?];
        while self.eat_punct(",") {
            vars.push(self.ident("loop variable")?);
        }
        self.expect_word("in", "after loop variables")?;
        let axis = self.ident("axis name")?;
        let order = match kw {
            "select" => None,
            "for_each" => Some(LoopOrder::Sequential),
            _ => Some(LoopOrder::Parallel),
        };
        let body = self.block(if order.is_some() {
            "to open the loop body"
        } else {
            "to open the select body"
        })?;
        Ok(match order {
            Some(order) => StmtKind::Loop {
                order,
                vars,
                axis,
                body,
            },
            None => StmtKind::Select { vars, axis, body },
        })
    }

    fn if_stmt(&mut self, _: &str) -> PResult<StmtKind> {
        self.bump();
        let cond = self.expr()?;
        let then_body = self.block("after the `if` condition")?;
        let else_body = if self.eat_word("else") {
            self.block("after `else`")?
        } else {
            Vec::new()
        };
        Ok(StmtKind::Cond {
            cond,
            then_body,
            else_body,
        })
    }

    /// `while COND max N { BODY }`: the bound is mandatory.
    fn while_stmt(&mut self, _: &str) -> PResult<StmtKind> {
        self.bump();
        let cond = self.expr()?;
        if !self.peek().is_word("max") {
            return Err(self.err_expected(
                "`max N` after the `while` condition (a `while` loop needs an iteration bound)",
            ));
        }
        self.bump();
        let max = self.expr()?;
        let body = self.block("to open the `while` body")?;
        Ok(StmtKind::While { cond, max, body })
    }

    /// `break if COND;`.
    fn break_stmt(&mut self, _: &str) -> PResult<StmtKind> {
        self.bump();
        self.expect_word("if", "after `break`")?;
        let cond = self.expr()?;
        self.expect(";", "after break statement")?;
        Ok(StmtKind::Break { cond })
    }

    fn group_stmt(&mut self, kw: &str) -> PResult<StmtKind> {
        self.bump();
        if kw == "combine" {
            Ok(StmtKind::Combine(self.block("after `combine`")?))
        } else {
            Ok(StmtKind::Sequential(self.block("after `sequential`")?))
        }
    }

    fn task_stmt(&mut self, _: &str) -> PResult<StmtKind> {
        self.bump();
        let kernel = self.kernel_name()?;
        self.open("(", "after kernel name")?;
        let args = self.list(")", "in task arguments", Self::arg)?;
        self.close(")", "")?;
        self.expect(";", "after task statement")?;
        Ok(StmtKind::Task(TaskStmt { kernel, args }))
    }

    fn set_stmt(&mut self, _: &str) -> PResult<StmtKind> {
        self.bump();
        let slot = self.ident("slot name")?;
        self.expect("=", "after slot name")?;
        let value = self.expr()?;
        self.expect(";", "after set statement")?;
        Ok(StmtKind::SlotSet { slot, value })
    }

    fn load_stmt(&mut self, _: &str) -> PResult<StmtKind> {
        self.bump();
        let slot = self.ident("slot name")?;
        self.expect("=", "after slot name")?;
        let tensor = self.ident("tensor name")?;
        self.open("[", "after tensor name")?;
        let index = self.list("]", "in element index", Self::expr)?;
        self.close("]", "")?;
        self.expect(";", "after load statement")?;
        Ok(StmtKind::SlotLoad {
            slot,
            tensor,
            index,
        })
    }

    fn call_stmt(&mut self, _: &str) -> PResult<StmtKind> {
        self.bump();
        let workload = self.ident("workload name")?;
        self.open("(", "after workload name")?;
        let args = self.list(")", "in call arguments", Self::expr)?;
        self.close(")", "")?;
        self.expect(";", "after call statement")?;
        Ok(StmtKind::Call { workload, args })
    }

    fn send_stmt(&mut self, _: &str) -> PResult<StmtKind> {
        self.bump();
        let channel = self.ident("channel name")?;
        self.open("(", "after channel name")?;
        let value = self.expr()?;
        self.close(")", "after the value sent")?;
        self.expect(";", "after send statement")?;
        Ok(StmtKind::Send { channel, value })
    }

    fn consume_stmt(&mut self, _: &str) -> PResult<StmtKind> {
        self.bump();
        let channel = self.ident("channel name")?;
        self.expect_word("as", "after channel name")?;
        let var = self.ident("variable name")?;
        let body = self.block("to open the consume body")?;
        Ok(StmtKind::Consume { channel, var, body })
    }

    /// A task argument: a region if it is a name followed by `[`, else an expression.
    fn arg(&mut self) -> PResult<Arg> {
        let t = self.peek();
        if t.kind == Kind::Word && !is_reserved(t.text) && self.peek_at(1).is_punct("[") {
            self.bump();
            let tensor = Ident::at(t.text, t.loc());
            self.open("[", "")?;
            let dims = self.list("]", "in region", |p| {
                let start = p.expr()?;
                let size = if p.eat_punct("+:") {
                    Some(p.expr()?)
                } else {
                    None
                };
                Ok(RegionDim { start, size })
            })?;
            self.close("]", "")?;
            Ok(Arg::Region(Region { tensor, dims }))
        } else {
            Ok(Arg::Scalar(self.expr()?))
        }
    }

    // ----- pipelines -----------------------------------------------------------------------

    fn pipeline(&mut self) -> PResult<Pipeline> {
        let start = self.bump().start;
        let name = self.ident("pipeline name")?;
        self.open("{", "to open the pipeline body")?;
        let (mut channels, mut processes) = (Vec::new(), Vec::new());
        while !self.peek().is_punct("}") {
            let t = self.peek();
            if self.eat_word("channel") {
                let name = self.ident("channel name")?;
                self.expect("[", "before channel depth")?;
                let depth = self.count("channel depth")?;
                self.expect("]", "after channel depth")?;
                self.expect(";", "after channel declaration")?;
                channels.push(Channel { name, depth });
            } else if self.eat_word("process") {
                processes.push(self.process(t.start)?);
            } else {
                return Err(self.err_expected("`channel`, `process` or `}` in pipeline"));
            }
        }
        self.close("}", "")?;
        Ok(Pipeline {
            name,
            channels,
            processes,
            loc: self.loc_from(start),
        })
    }

    fn process(&mut self, start: usize) -> PResult<Process> {
        let name = self.ident("process name")?;
        self.open("(", "after process name")?;
        let channel_list = |p: &mut Self| {
            let mut list = vec![p.ident("channel name")?];
            while p.eat_punct(",") {
                list.push(p.ident("channel name")?);
            }
            Ok::<_, ParseError>(list)
        };
        let (mut consumes, mut produces) = (Vec::new(), Vec::new());
        if self.eat_word("consumes") {
            consumes = channel_list(self)?;
            if self.eat_punct(";") {
                self.expect_word("produces", "after `;` in process header")?;
                produces = channel_list(self)?;
            }
        } else if self.eat_word("produces") {
            produces = channel_list(self)?;
        }
        self.close(")", "to end the process header")?;
        let body = self.block("to open the process body")?;
        Ok(Process {
            name,
            consumes,
            produces,
            body,
            loc: self.loc_from(start),
        })
    }

    // ----- schedule ------------------------------------------------------------------------

    fn schedule(&mut self) -> PResult<Schedule> {
        let start = self.bump().start;
        self.expect_word("for", "after `schedule`")?;
        let target = self.ident("the workload or pipeline the schedule is for")?;
        self.open("{", "to open the schedule body")?;
        let mut items = Vec::new();
        while !self.peek().is_punct("}") {
            items.push(self.schedule_item()?);
        }
        self.close("}", "")?;
        Ok(Schedule {
            target,
            items,
            loc: self.loc_from(start),
        })
    }

    fn schedule_item(&mut self) -> PResult<ScheduleItem> {
        let t = self.peek();
        if t.kind != Kind::Word {
            return Err(self.err_expected("a schedule item or `}`"));
        }
        let semi = |p: &mut Self, kind: ScheduleItemKind| {
            p.expect(";", &format!("after `{}` item", t.text))?;
            Ok::<_, ParseError>(kind)
        };
        let kind = match t.text {
            "executors" => {
                self.bump();
                let n = self.count("number of executors")?;
                semi(self, ScheduleItemKind::Executors(n))?
            }
            "dispatch" => {
                self.bump();
                let d = self.dispatch()?;
                semi(self, ScheduleItemKind::Dispatch(d))?
            }
            "streams" => {
                self.bump();
                let n = self.count("number of streams")?;
                semi(self, ScheduleItemKind::Streams(n))?
            }
            "stream_by" => {
                self.bump();
                let e = self.expr()?;
                semi(self, ScheduleItemKind::StreamBy(e))?
            }
            "timing" => {
                self.bump();
                let timing = self.timing()?;
                semi(self, ScheduleItemKind::Timing(timing))?
            }
            "task_graph" => {
                self.bump();
                self.open("{", "after `task_graph`")?;
                let mut items = Vec::new();
                while !self.peek().is_punct("}") {
                    items.push(self.task_graph_item()?);
                }
                self.close("}", "")?;
                ScheduleItemKind::TaskGraph(items)
            }
            "task_window" => {
                self.bump();
                let n = self.count("task window size")?;
                let mode = self.keyword("window mode", WindowMode::ALL, WindowMode::keyword)?;
                semi(self, ScheduleItemKind::TaskWindow(n, mode))?
            }
            "pipeline_depth" => {
                self.bump();
                let n = self.count("pipeline depth")?;
                let scope = self.keyword("gate scope", GateScope::ALL, GateScope::keyword)?;
                semi(self, ScheduleItemKind::PipelineDepth(n, scope))?
            }
            "batch_deps" => {
                self.bump();
                let n = self.count("batch size")?;
                semi(self, ScheduleItemKind::BatchDeps(n))?
            }
            "dispatch_threshold" => {
                self.bump();
                let levels = self.levels("dispatch_threshold", |p| {
                    p.keyword("pool", ExecPool::ALL, ExecPool::keyword)
                })?;
                semi(self, ScheduleItemKind::DispatchThreshold(levels))?
            }
            _ => return Err(self.unknown("schedule item", SCHEDULE_ITEMS)),
        };
        Ok(ScheduleItem {
            kind,
            loc: self.loc_from(t.start),
        })
    }

    /// `(N)` after a policy word.
    fn paren_count(&mut self, kw: &str, what: &str) -> PResult<u64> {
        self.open("(", &format!("after `{kw}`"))?;
        let n = self.count(what)?;
        self.close(")", &format!("after {what}"))?;
        Ok(n)
    }

    /// `(EXPR)` after a policy word.
    fn paren_expr(&mut self, kw: &str) -> PResult<Expr> {
        self.open("(", &format!("after `{kw}`"))?;
        let e = self.expr()?;
        self.close(")", &format!("to close `{kw}(`"))?;
        Ok(e)
    }

    fn dispatch(&mut self) -> PResult<Dispatch> {
        let t = self.peek();
        let d = match t.text {
            _ if t.kind != Kind::Word => return Err(self.err_expected("a dispatch policy")),
            "round_robin" => {
                self.bump();
                Dispatch::RoundRobin(self.paren_count(t.text, "number of executors")?)
            }
            "affinity" => {
                self.bump();
                Dispatch::Affinity(self.paren_expr(t.text)?)
            }
            "hash" => {
                self.bump();
                Dispatch::Hash(self.paren_expr(t.text)?)
            }
            "work_steal" => {
                self.bump();
                Dispatch::WorkSteal
            }
            "static_partition" => {
                self.bump();
                self.open("(", "after `static_partition`")?;
                let starts =
                    self.list(")", "in static_partition", |p| p.count("partition start"))?;
                self.close(")", "")?;
                Dispatch::StaticPartition(starts)
            }
            "threshold" => {
                self.enter()?;
                self.bump();
                let levels = self.levels("threshold", Self::dispatch)?;
                self.leave();
                Dispatch::Threshold(levels)
            }
            _ => {
                return Err(self.unknown(
                    "dispatch policy",
                    "round_robin, affinity, hash, work_steal, static_partition, threshold",
                ));
            }
        };
        Ok(d)
    }

    /// `(EXPR) { below INT: X, ..., else: X }` after `kw`.
    fn levels<T>(
        &mut self,
        kw: &str,
        mut item: impl FnMut(&mut Self) -> PResult<T>,
    ) -> PResult<Levels<T>> {
        let metric = self.paren_expr(kw)?;
        self.open("{", &format!("to open the levels of `{kw}`"))?;
        let mut levels = Vec::new();
        loop {
            if self.eat_word("else") {
                self.expect(":", "after `else`")?;
                let otherwise = Box::new(item(self)?);
                self.eat_punct(",");
                self.close("}", "after the `else` level")?;
                return Ok(Levels {
                    metric,
                    levels,
                    otherwise,
                });
            }
            if self.peek().is_punct("}") {
                return Err(ParseError::new(
                    format!("missing `else: ...` level at the end of `{kw}` levels"),
                    self.peek().loc(),
                ));
            }
            if !self.eat_word("below") {
                return Err(self.err_expected("`below` or `else`"));
            }
            let bound = self.signed_int("level bound")?;
            self.expect(":", "after level bound")?;
            levels.push((bound, item(self)?));
            if !self.peek().is_punct("}") {
                self.expect(",", "after level")?;
            }
        }
    }

    fn timing(&mut self) -> PResult<Timing> {
        let t = self.peek();
        let make: fn(u64) -> Timing = match t.text {
            "immediate" => {
                self.bump();
                return Ok(Timing::Immediate);
            }
            "batched" => Timing::Batched,
            "interleaved" => Timing::Interleaved,
            "rate_limit" => Timing::RateLimit,
            _ => {
                return Err(self.unknown(
                    "timing policy",
                    "immediate, batched, interleaved, rate_limit",
                ));
            }
        };
        self.bump();
        Ok(make(self.paren_count(t.text, "count")?))
    }

    fn task_graph_item(&mut self) -> PResult<TaskGraphItem> {
        let t = self.peek();
        if t.kind != Kind::Word {
            return Err(self.err_expected("a task_graph item or `}`"));
        }
        let item = match t.text {
            "deps" => {
                self.bump();
                TaskGraphItem::Deps(self.keyword("deps mode", DepsMode::ALL, DepsMode::keyword)?)
            }
            "ready" => {
                self.bump();
                let r = self.peek();
                TaskGraphItem::Ready(match r.text {
                    "fifo" => {
                        self.bump();
                        ReadyPolicy::Fifo
                    }
                    "work_steal" => {
                        self.bump();
                        ReadyPolicy::WorkSteal
                    }
                    "priority" => {
                        self.bump();
                        ReadyPolicy::Priority(self.paren_expr("priority")?)
                    }
                    _ => return Err(self.unknown("ready policy", "fifo, work_steal, priority")),
                })
            }
            "start" => {
                self.bump();
                let s = self.peek();
                TaskGraphItem::Start(match s.text {
                    "after_orchestration" => {
                        self.bump();
                        StartPolicy::AfterOrchestration
                    }
                    "immediate" => {
                        self.bump();
                        StartPolicy::Immediate
                    }
                    "threshold" => {
                        self.bump();
                        StartPolicy::Threshold(self.paren_count("threshold", "number of tasks")?)
                    }
                    _ => {
                        return Err(self
                            .unknown("start policy", "after_orchestration, immediate, threshold"));
                    }
                })
            }
            "trace" => {
                self.bump();
                let s = self.peek();
                TaskGraphItem::Trace(match s.text {
                    "none" => {
                        self.bump();
                        TracePolicy::None
                    }
                    "wall" => {
                        self.bump();
                        TracePolicy::Wall
                    }
                    "cycles" => {
                        self.bump();
                        let cost = if self.peek().is_punct("(") {
                            Some(self.paren_expr("cycles")?)
                        } else {
                            None
                        };
                        let machine = if self.peek().text == "device" {
                            self.bump();
                            self.expect("(", "device(MACHINE)")?;
                            let name = self.ident("machine name")?;
                            self.expect(")", "device(MACHINE)")?;
                            Some(name)
                        } else {
                            None
                        };
                        TracePolicy::Cycles(cost, machine)
                    }
                    _ => return Err(self.unknown("trace policy", "none, wall, cycles")),
                })
            }
            "pools" => {
                self.bump();
                TaskGraphItem::Pools(self.keyword(
                    "pools policy",
                    PoolsPolicy::ALL,
                    PoolsPolicy::keyword,
                )?)
            }
            _ => {
                return Err(self.unknown("task_graph item", "deps, ready, start, trace, pools"));
            }
        };
        self.expect(";", &format!("after `{}` item", t.text))?;
        Ok(item)
    }
}
