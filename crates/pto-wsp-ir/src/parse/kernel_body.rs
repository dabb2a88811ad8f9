//! The parser of kernel bodies (`crate::kernel_body`): tile declarations, `let`, `for`, `if`
//! and tile instructions. Kept apart from the workload grammar; only `kernel` calls in here.

use super::lexer::{Kind, Token};
use super::{PResult, ParseError, Parser, lexer};
use crate::kernel_body::{FloatArg, InstArg, KStmt, KStmtKind, TileDecl, TileKind};
use crate::tile_isa::TileOp;
use crate::types::DType;

impl Parser<'_> {
    /// `{ KSTMT* }` (the opening `{` not yet consumed).
    pub(super) fn kernel_block(&mut self) -> PResult<Vec<KStmt>> {
        self.open("{", "to open the kernel body")?;
        self.enter()?;
        let outer = std::mem::replace(&mut self.extents, true);
        let mut body = Vec::new();
        while !self.peek().is_punct("}") {
            if self.peek().kind == Kind::Eof {
                return Err(self.err_expected("a kernel statement or `}`"));
            }
            body.push(self.kernel_stmt()?);
        }
        self.extents = outer;
        self.leave();
        self.close("}", "")?;
        Ok(body)
    }

    fn kernel_stmt(&mut self) -> PResult<KStmt> {
        let t = self.peek();
        let start = t.start;
        let kind = match t.text {
            _ if t.kind != Kind::Word => {
                return Err(self.err_expected(
                    "a kernel statement (tile, let, for, if, check or an instruction)",
                ));
            }
            "tile" => {
                self.bump();
                KStmtKind::Tile(self.tile_decl()?)
            }
            "let" => {
                self.bump();
                let name = self.ident("local name")?;
                self.expect(":", "after local name")?;
                if self.peek().is_word("f32") {
                    self.bump();
                    self.expect("=", "after the local's type")?;
                    let value = self.kernel_operand()?;
                    self.expect(";", "after the local's value")?;
                    return Ok(KStmt {
                        kind: KStmtKind::LetFloat { name, value },
                        loc: self.loc_from(start),
                    });
                }
                self.expect_word("i64", "(kernel locals are i64 or f32)")?;
                self.expect("=", "after the local's type")?;
                if self.peek().is_word("GETVAL") && self.peek_at(1).is_punct("(") {
                    self.bump();
                    self.open("(", "")?;
                    let tile = self.kernel_operand()?;
                    self.expect(",", "after the tile of `GETVAL`")?;
                    let row = self.expr()?;
                    self.expect(",", "after the row of `GETVAL`")?;
                    let col = self.expr()?;
                    self.close(")", "after the column of `GETVAL`")?;
                    self.expect(";", "after the local's value")?;
                    KStmtKind::GetVal {
                        name,
                        tile,
                        row,
                        col,
                    }
                } else {
                    let value = self.expr()?;
                    self.expect(";", "after the local's value")?;
                    KStmtKind::Let { name, value }
                }
            }
            "check" => {
                self.bump();
                let cond = self.expr()?;
                self.expect_word("else", "after the condition of `check`")?;
                let m = self.peek();
                if m.kind != Kind::Str {
                    return Err(self.err_expected("the message of `check` (a string literal)"));
                }
                self.bump();
                let message = m.text[1..m.text.len() - 1].to_string();
                self.expect(";", "after the message of `check`")?;
                KStmtKind::Check { cond, message }
            }
            "for" => {
                self.bump();
                let var = self.ident("loop variable")?;
                self.expect_word("in", "after the loop variable")?;
                self.expect_word("range", "after `in`")?;
                self.open("(", "after `range`")?;
                let count = self.expr()?;
                self.close(")", "after the iteration count")?;
                let body = self.kernel_block()?;
                KStmtKind::For { var, count, body }
            }
            "if" => {
                self.bump();
                let cond = self.expr()?;
                let then_body = self.kernel_block()?;
                let else_body = if self.eat_word("else") {
                    self.kernel_block()?
                } else {
                    Vec::new()
                };
                KStmtKind::If {
                    cond,
                    then_body,
                    else_body,
                }
            }
            name => self.inst(name, t)?,
        };
        Ok(KStmt {
            kind,
            loc: self.loc_from(start),
        })
    }
    /// `tile NAME[COUNT]?: KIND DTYPE[ROWS, COLS] valid(R, C);`, after `tile`.
    fn tile_decl(&mut self) -> PResult<TileDecl> {
        let name = self.ident("tile name")?;
        let count = if self.peek().is_punct("[") {
            self.open("[", "")?;
            let n = self.count("tile array length")?;
            self.close("]", "after the tile array length")?;
            Some(n)
        } else {
            None
        };
        self.expect(":", "after tile name")?;
        let kind = self.keyword("tile kind", TileKind::ALL, TileKind::keyword)?;
        let dtype = self.keyword("element type", DType::ALL, DType::keyword)?;
        self.open("[", "before the tile's rows and columns")?;
        let rows = self.count("tile rows")?;
        self.expect(",", "between the tile's rows and columns")?;
        let cols = self.count("tile columns")?;
        self.close("]", "after the tile's columns")?;
        let valid = if self.eat_word("valid") {
            self.open("(", "after `valid`")?;
            let r = self.expr()?;
            self.expect(",", "between valid rows and columns")?;
            let c = self.expr()?;
            self.close(")", "after valid columns")?;
            Some((r, c))
        } else {
            None
        };
        self.expect(";", "after tile declaration")?;
        Ok(TileDecl {
            name,
            kind,
            dtype,
            rows,
            cols,
            valid,
            count,
        })
    }

    /// An instruction `NAME(OPERANDS);` (`t`: its name's token).
    fn inst(&mut self, name: &str, t: Token<'_>) -> PResult<KStmtKind> {
        let Some(op) = TileOp::parse(name) else {
            return Err(ParseError::new(
                format!(
                    "unknown tile instruction `{}` (see docs/KERNELS.md for the list)",
                    lexer::shorten(name)
                ),
                t.loc(),
            ));
        };
        self.bump();
        self.open("(", "after the instruction")?;
        let args = self.list(")", "in instruction operands", Self::kernel_operand)?;
        self.close(")", "")?;
        self.expect(";", "after the instruction")?;
        Ok(KStmtKind::Inst { op, args })
    }

    /// One instruction operand: `NAME`, `NAME[INDEX]`, `inf`, `-inf`, `f32(EXPR)`,
    /// `rsqrt(EXPR)` or an expression.
    fn kernel_operand(&mut self) -> PResult<InstArg> {
        let t = self.peek();
        let next = self.peek_at(1);
        if t.is_word("inf") && (next.is_punct(",") || next.is_punct(")")) {
            self.bump();
            return Ok(InstArg::Float(FloatArg::Inf { negative: false }));
        }
        if t.is_punct("-") && next.is_word("inf") {
            self.bump();
            self.bump();
            return Ok(InstArg::Float(FloatArg::Inf { negative: true }));
        }
        if (t.is_word("f32") || t.is_word("rsqrt")) && next.is_punct("(") {
            self.bump();
            self.open("(", "")?;
            let e = self.expr()?;
            self.close(")", &format!("after the operand of `{}`", t.text))?;
            return Ok(InstArg::Float(if t.text == "f32" {
                FloatArg::OfInt(e)
            } else {
                FloatArg::InvSqrt(e)
            }));
        }
        if t.kind == Kind::Word && !super::is_reserved(t.text) && !self.extent_here(t) {
            if next.is_punct(",") || next.is_punct(")") {
                self.bump();
                return Ok(InstArg::Name(crate::loc::Ident::at(t.text, t.loc())));
            }
            if next.is_punct("[") {
                self.bump();
                self.open("[", "")?;
                let index = self.expr()?;
                self.close("]", "after the tile array index")?;
                return Ok(InstArg::Index(
                    crate::loc::Ident::at(t.text, t.loc()),
                    index,
                ));
            }
        }
        Ok(InstArg::Expr(self.expr()?))
    }

    /// Whether `t` starts `rows(x)` / `cols(x)`.
    fn extent_here(&self, t: lexer::Token<'_>) -> bool {
        (t.is_word("rows") || t.is_word("cols")) && self.peek_at(1).is_punct("(")
    }
}
