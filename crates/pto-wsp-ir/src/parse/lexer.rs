//! The lexer of the `.wsp` text format: text in, tokens with byte ranges out.
//!
//! Why a separate pass: the parser then only ever looks at whole tokens (words, integer literals,
//! punctuation), which keeps it small and makes one-token lookahead trivial.
//! Promise: [`lex`] never panics; every byte of the input is either whitespace, a comment, or part
//! of exactly one token, and anything else is reported with its location. The token list always
//! ends with one [`Kind::Eof`] token.

use super::ParseError;
use crate::loc::Loc;

/// What kind of token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// An identifier or a (reserved or contextual) keyword: `[A-Za-z_][A-Za-z0-9_]*`.
    Word,
    /// A decimal integer literal, `i64` unless the text ends in `u`.
    Int,
    /// A decimal float literal: digits with a fraction (`1.0`, `0.5`), an exponent (`1e-6`),
    /// or both (`2.5E+3`).
    Float,
    /// Punctuation or an operator.
    Punct,
    /// A string literal: `"` up to the next `"` on the same line, no escapes (the text keeps
    /// the quotes). Only kernel bodies' `check` statements take one.
    Str,
    /// The end of the input.
    Eof,
}

/// One token: its kind, its text and where it is.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Token<'a> {
    /// What kind of token.
    pub(crate) kind: Kind,
    /// Its text (empty for [`Kind::Eof`]).
    pub(crate) text: &'a str,
    /// Byte offset of its first character.
    pub(crate) start: usize,
    /// Byte offset one past its last character.
    pub(crate) end: usize,
}

impl Token<'_> {
    /// The token's source range.
    pub(crate) fn loc(&self) -> Loc {
        Loc::new(self.start, self.end)
    }

    /// Whether this is the punctuation `p`.
    pub(crate) fn is_punct(&self, p: &str) -> bool {
        self.kind == Kind::Punct && self.text == p
    }

    /// Whether this is the word `w` (reserved or not).
    pub(crate) fn is_word(&self, w: &str) -> bool {
        self.kind == Kind::Word && self.text == w
    }

    /// How the token is shown in an error message ("`x`", "keyword `in`", "end of input").
    pub(crate) fn describe(&self) -> String {
        match self.kind {
            Kind::Eof => "end of input".to_string(),
            Kind::Word if super::is_reserved(self.text) => format!("keyword `{}`", self.text),
            _ => format!("`{}`", shorten(self.text)),
        }
    }
}

/// `text` cut to at most 40 characters (with `...`), so that a huge token does not make a huge
/// message. Tokens are ASCII, so cutting at a byte index is safe.
pub(crate) fn shorten(text: &str) -> String {
    match text.get(..40) {
        Some(head) if text.len() > 40 => format!("{head}..."),
        _ => text.to_string(),
    }
}

/// Punctuation, two-character tokens first so that the longest match wins.
const PUNCT: &[&str] = &[
    "+:", "=>", "->", "==", "!=", "<=", ">=", "&&", "||", "(", ")", "[", "]", "{", "}", ",", ";",
    ":", "=", "?", "@", ".", "+", "-", "*", "/", "%", "<", ">", "!",
];

fn is_word_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The number literal at `start` of `text` (which starts with a digit): its kind and end.
#[inline]
fn number(text: &str, start: usize) -> Result<(Kind, usize), ParseError> {
    let bytes = text.as_bytes();
    let digits = |mut i: usize| {
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        i
    };
    let mut i = digits(start);
    let mut float = false;
    if bytes.get(i) == Some(&b'.') && bytes.get(i + 1).is_some_and(u8::is_ascii_digit) {
        i = digits(i + 1);
        float = true;
    }
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(bytes.get(i + 1), Some(b'+' | b'-')));
        if bytes.get(i + 1 + sign).is_some_and(u8::is_ascii_digit) {
            i = digits(i + 1 + sign);
            float = true;
        }
    }
    let digits_end = i;
    while i < bytes.len() && is_word_char(bytes[i]) {
        i += 1;
    }
    let suffix = &text[digits_end..i];
    if float {
        if !suffix.is_empty() {
            return Err(ParseError::new(
                format!(
                    "invalid suffix `{}` on float literal `{}`",
                    shorten(suffix),
                    shorten(&text[start..i])
                ),
                Loc::new(digits_end, i),
            ));
        }
        Ok((Kind::Float, i))
    } else if !suffix.is_empty() && suffix != "u" {
        Err(ParseError::new(
            format!(
                "invalid suffix `{}` on integer literal `{}` (only `u` is allowed)",
                shorten(suffix),
                shorten(&text[start..i])
            ),
            Loc::new(digits_end, i),
        ))
    } else {
        Ok((Kind::Int, i))
    }
}

/// The end of the string literal at `i` of `text` (at its opening `"`).
#[inline]
fn string(text: &str, i: usize) -> Result<usize, ParseError> {
    let rest = &text[i + 1..];
    let Some(n) = rest.find(['"', '\n']) else {
        return Err(ParseError::new(
            "unterminated string literal",
            Loc::new(i, text.len()),
        ));
    };
    if rest.as_bytes()[n] == b'\n' {
        return Err(ParseError::new(
            "unterminated string literal (strings end on their line)",
            Loc::new(i, i + 1 + n),
        ));
    }
    Ok(i + n + 2)
}

/// Splits `text` into tokens.
pub(crate) fn lex(text: &str) -> Result<Vec<Token<'_>>, ParseError> {
    let bytes = text.as_bytes();
    let mut toks = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let start = i;
        let kind = if b.is_ascii_whitespace() {
            i += 1;
            continue;
        } else if text[i..].starts_with("//") {
            i = text[i..].find('\n').map_or(bytes.len(), |n| i + n + 1);
            continue;
        } else if b.is_ascii_alphabetic() || b == b'_' {
            while i < bytes.len() && is_word_char(bytes[i]) {
                i += 1;
            }
            Kind::Word
        } else if b.is_ascii_digit() {
            let (kind, end) = number(text, start)?;
            i = end;
            kind
        } else if b == b'"' {
            i = string(text, start)?;
            Kind::Str
        } else if let Some(p) = PUNCT.iter().find(|p| text[i..].starts_with(**p)) {
            i += p.len();
            Kind::Punct
        } else {
            // Not ASCII-punctuation we know: report the whole character.
            let c = text[i..].chars().next().unwrap_or('\u{fffd}');
            return Err(ParseError::new(
                format!("unexpected character `{}`", c.escape_debug()),
                Loc::new(i, i + c.len_utf8()),
            ));
        };
        toks.push(Token {
            kind,
            text: &text[start..i],
            start,
            end: i,
        });
    }
    toks.push(Token {
        kind: Kind::Eof,
        text: "",
        start: text.len(),
        end: text.len(),
    });
    Ok(toks)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<(Kind, &str)> {
        lex(text)
            .unwrap()
            .into_iter()
            .map(|t| (t.kind, t.text))
            .collect()
    }

    #[test]
    fn longest_punctuation_wins_and_comments_vanish() {
        assert_eq!(
            kinds("a+:b // c\n<=7u"),
            vec![
                (Kind::Word, "a"),
                (Kind::Punct, "+:"),
                (Kind::Word, "b"),
                (Kind::Punct, "<="),
                (Kind::Int, "7u"),
                (Kind::Eof, ""),
            ]
        );
    }

    #[test]
    fn float_literals_are_one_token() {
        assert_eq!(
            kinds("1.0 1e-6 2.5E+3 7 3.x"),
            vec![
                (Kind::Float, "1.0"),
                (Kind::Float, "1e-6"),
                (Kind::Float, "2.5E+3"),
                (Kind::Int, "7"),
                (Kind::Int, "3"),
                (Kind::Punct, "."),
                (Kind::Word, "x"),
                (Kind::Eof, ""),
            ]
        );
        let e = lex("1.5f").unwrap_err();
        assert_eq!(e.message, "invalid suffix `f` on float literal `1.5f`");
        let e = lex("1e").unwrap_err();
        assert_eq!(
            e.message,
            "invalid suffix `e` on integer literal `1e` (only `u` is allowed)"
        );
    }

    #[test]
    fn a_comment_holds_any_character_but_outside_one_a_nul_is_refused() {
        // docs/FORMAT.md: a comment's text is every character to the end of the line.
        let toks = lex("a // x\0y\u{7}é\nb").unwrap();
        let words: Vec<&str> = toks.iter().map(|t| t.text).collect();
        assert_eq!(&words[..2], ["a", "b"]);
        let e = lex("a \0 b").unwrap_err();
        assert_eq!(e.message, "unexpected character `\\0`");
        assert_eq!((e.loc.start, e.loc.end), (2, 3));
    }

    #[test]
    fn bad_characters_and_suffixes_are_errors() {
        let e = lex("x é").unwrap_err();
        assert_eq!(e.message, "unexpected character `é`");
        assert_eq!((e.loc.start, e.loc.end), (2, 4));
        let e = lex("12ab").unwrap_err();
        assert_eq!(
            e.message,
            "invalid suffix `ab` on integer literal `12ab` (only `u` is allowed)"
        );
    }
}
