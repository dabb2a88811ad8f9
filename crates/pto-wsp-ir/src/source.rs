//! Source text and diagnostics rendering.
//!
//! Why: every error a user sees should say where it is, as `file:line:column`, with the offending
//! line and a caret under the place, the way rustc does. Errors of every stage implement
//! [`Diagnostic`]; [`SourceFile::render`] turns one into that text.
//! Promise: rendering never panics, whatever the location (out of range, mid-character, unknown).

use crate::loc::Loc;
use std::fmt::Write as _;

/// A named piece of source text.
#[derive(Clone, Debug)]
pub struct SourceFile {
    /// The name shown in messages (usually the path as the user gave it).
    pub name: String,
    /// The text.
    pub text: String,
    line_starts: Vec<usize>,
}

/// What every error of the front end can say about itself.
pub trait Diagnostic: std::fmt::Display {
    /// Where in the source the error is ([`Loc::NONE`] if not known).
    fn loc(&self) -> Loc;
    /// A short label put under the caret, if any.
    fn label(&self) -> Option<String> {
        None
    }
    /// Extra notes (for example the path to the node, for modules built without text).
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
    /// Other places the error concerns, each with what is there, rendered after the notes as
    /// `note: WHAT: file:line:column` (an unknown location is left out).
    fn related(&self) -> Vec<(Loc, String)> {
        Vec::new()
    }
}

impl SourceFile {
    /// Wraps `text` named `name`.
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> SourceFile {
        let text = text.into();
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        SourceFile {
            name: name.into(),
            text,
            line_starts,
        }
    }

    /// 1-based line and column (in characters) of byte offset `offset`, clamped to the text.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let line = self.line_starts.partition_point(|&s| s <= offset) - 1;
        let start = self.line_starts[line];
        let col = self
            .text
            .get(start..offset)
            .map_or(offset - start, |s| s.chars().count());
        (line + 1, col + 1)
    }

    /// The text of 1-based line `line`, without its newline.
    pub fn line_text(&self, line: usize) -> &str {
        let Some(&start) = self.line_starts.get(line.wrapping_sub(1)) else {
            return "";
        };
        let end = self
            .line_starts
            .get(line)
            .map_or(self.text.len(), |&e| e - 1);
        self.text
            .get(start..end.max(start))
            .unwrap_or("")
            .trim_end_matches('\r')
    }

    /// `name:line:column` of a location (just `name` when the location is unknown).
    pub fn position(&self, loc: Loc) -> String {
        if !loc.is_known() {
            return self.name.clone();
        }
        let (l, c) = self.line_col(loc.start as usize);
        format!("{}:{}:{}", self.name, l, c)
    }

    /// Renders `diag` as a rustc-style message: `error: ...`, ` --> file:line:col`, the source
    /// line with carets under the location, then the notes.
    pub fn render(&self, diag: &dyn Diagnostic) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "error: {diag}");
        let loc = diag.loc();
        if loc.is_known() {
            let (line, col) = self.line_col(loc.start as usize);
            let text = self.line_text(line);
            let (end_line, end_col) = self.line_col((loc.end as usize).max(loc.start as usize));
            let width = if end_line == line {
                end_col.saturating_sub(col).max(1)
            } else {
                1
            };
            let gutter = line.to_string().len();
            let pad = " ".repeat(gutter);
            let _ = writeln!(out, "{pad}--> {}:{line}:{col}", self.name);
            let _ = writeln!(out, "{pad} |");
            let _ = writeln!(out, "{line} | {text}");
            let lead: String = text
                .chars()
                .take(col - 1)
                .map(|c| if c == '\t' { '\t' } else { ' ' })
                .collect();
            let label = diag.label().map(|l| format!(" {l}")).unwrap_or_default();
            let _ = writeln!(out, "{pad} | {lead}{}{label}", "^".repeat(width));
            for note in diag.notes() {
                let _ = writeln!(out, "{pad} = note: {note}");
            }
            self.render_related(&mut out, &pad, diag);
        } else {
            let _ = writeln!(out, " --> {}", self.name);
            for note in diag.notes() {
                let _ = writeln!(out, "  = note: {note}");
            }
            self.render_related(&mut out, " ", diag);
        }
        out
    }

    /// The `note: WHAT: file:line:column` lines of [`Diagnostic::related`].
    fn render_related(&self, out: &mut String, pad: &str, diag: &dyn Diagnostic) {
        for (loc, what) in diag.related() {
            if loc.is_known() {
                let _ = writeln!(out, "{pad} = note: {what}: {}", self.position(loc));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct E(Loc);
    impl std::fmt::Display for E {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("bad thing")
        }
    }
    impl Diagnostic for E {
        fn loc(&self) -> Loc {
            self.0
        }
        fn label(&self) -> Option<String> {
            Some("here".into())
        }
    }

    #[test]
    fn renders_line_and_caret() {
        let src = SourceFile::new("a.wsp", "first\n  second line\n");
        let out = src.render(&E(Loc::new(8, 14)));
        assert_eq!(
            out,
            "error: bad thing\n --> a.wsp:2:3\n  |\n2 |   second line\n  |   ^^^^^^ here\n"
        );
    }

    #[test]
    fn out_of_range_locations_do_not_panic() {
        let src = SourceFile::new("a.wsp", "é\nx");
        for (s, e) in [(0, 0), (1, 1), (2, 9), (100, 200), (3, 1)] {
            let _ = src.render(&E(Loc::new(s, e)));
        }
        assert_eq!(src.render(&E(Loc::NONE)), "error: bad thing\n --> a.wsp\n");
    }
}
