//! The parser of kernel bodies (`crate::kernel_body`): tile declarations, `let`, `for`, `if`
//! and tile instructions. Kept apart from the workload grammar; only `kernel` calls in here.

use super::lexer::{Kind, Token};
use super::{PResult, ParseError, Parser, lexer};
use crate::kernel_body::{InstArg, KStmt, KStmtKind, TileDecl, TileKind};
use crate::tile_isa::TileOp;
use crate::types::DType;

impl Parser<'_> {
    /// `{ KSTMT* }` (the opening `{` not yet consumed).
    pub(super) fn kernel_block(&mut self) -> PResult<Vec<KStmt>> {
        self.open("{", "to open the kernel body")?;
        self.enter()?;
        let mut body = Vec::new();
        while !self.peek().is_punct("}") {
            if self.peek().kind == Kind::Eof {
                return Err(self.err_expected("a kernel statement or `}`"));
            }
            body.push(self.kernel_stmt()?);
        }
        self.leave();
        self.close("}", "")?;
        Ok(body)
    }

    fn kernel_stmt(&mut self) -> PResult<KStmt> {
        let t = self.peek();
        let start = t.start;
        let kind = match t.text {
            _ if t.kind != Kind::Word => {
                return Err(
                    self.err_expected("a kernel statement (tile, let, for, if or an instruction)")
                );
            }
            "tile" => {
                self.bump();
                KStmtKind::Tile(self.tile_decl()?)
            }
            "let" => {
                self.bump();
                let name = self.ident("local name")?;
                self.expect(":", "after local name")?;
                self.expect_word("i64", "(kernel locals are i64)")?;
                self.expect("=", "after the local's type")?;
                let value = self.expr()?;
                self.expect(";", "after the local's value")?;
                KStmtKind::Let { name, value }
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
    /// `tile NAME: KIND DTYPE[ROWS, COLS] valid(R, C);`, after `tile`.
    fn tile_decl(&mut self) -> PResult<TileDecl> {
        let name = self.ident("tile name")?;
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
        let args = self.list(")", "in instruction operands", |p| {
            let t = p.peek();
            let next = p.peek_at(1);
            if t.kind == Kind::Word
                && !super::is_reserved(t.text)
                && (next.is_punct(",") || next.is_punct(")"))
            {
                p.bump();
                Ok(InstArg::Name(crate::loc::Ident::at(t.text, t.loc())))
            } else {
                Ok(InstArg::Expr(p.expr()?))
            }
        })?;
        self.close(")", "")?;
        self.expect(";", "after the instruction")?;
        Ok(KStmtKind::Inst { op, args })
    }
}
