//! The lexer: source text to tokens, comments and lexical errors. Never fails.
//!
//! logos recognises raw token shapes in one DFA; this module then decodes literal values
//! (exact numbers, units, clock times, string escapes) and reports malformed ones. Every
//! malformed token becomes [`Token::Invalid`] in the stream (so the parser does not cascade)
//! plus one [`LexError`].

// INVARIANT: `i` runs below `rest.len()`.
#![allow(clippy::indexing_slicing)]

use super::token::{ClockTime, Num, Quantity, Token, Unit};
use crate::diagnostics::{Code, Diagnostic};
use crate::source::{FileId, Span};
use logos::Logos;

/// Raw token shapes recognised by logos. Values are decoded afterwards.
#[derive(Logos, Clone, Copy, Debug, PartialEq, Eq)]
#[logos(skip r"[ \t\r\n\f\u{feff}]+")]
enum Raw {
    #[regex(r"//[^\n]*", allow_greedy = true)]
    LineComment,
    #[token("/*", block_comment)]
    BlockComment(Closed),
    #[regex(r#""([^"\\\n]|\\[^\n])*""#)]
    Str,
    #[regex(r#""([^"\\\n]|\\[^\n])*\\?"#)]
    UnterminatedStr,
    #[regex(r"[0-9][0-9_]*(\.[0-9][0-9_]*)?([A-Za-z][A-Za-z0-9_]*)?")]
    Number,
    #[regex(r"[0-9][0-9_]*\.")]
    NumberDot,
    #[regex(r"[0-9]+:[0-9]+")]
    Clock,
    #[regex(r"[A-Za-z_][A-Za-z0-9_]*")]
    Ident,
    #[token("{")]
    LBrace,
    #[token("}")]
    RBrace,
    #[token("[")]
    LBracket,
    #[token("]")]
    RBracket,
    #[token("(")]
    LParen,
    #[token(")")]
    RParen,
    #[token(",")]
    Comma,
    #[token(":")]
    Colon,
    #[token(";")]
    Semi,
    #[token(".")]
    Dot,
    #[token("..")]
    DotDot,
    #[token("=")]
    Assign,
    #[token("==")]
    EqEq,
    #[token("!=")]
    NotEq,
    #[token("<")]
    Lt,
    #[token("<=")]
    Le,
    #[token(">")]
    Gt,
    #[token(">=")]
    Ge,
    #[token("->")]
    Arrow,
    #[token("+")]
    Plus,
    #[token("-")]
    Minus,
    #[token("*")]
    Star,
    #[token("/")]
    Slash,
}

/// Whether a block comment found its closing `*/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Closed {
    Yes,
    No,
}

/// Consumes a (nesting) block comment after its opening `/*`.
fn block_comment(lex: &mut logos::Lexer<'_, Raw>) -> Closed {
    let rest = lex.remainder().as_bytes();
    let mut depth = 1usize;
    let mut i = 0;
    while i < rest.len() {
        if rest[i] == b'/' && rest.get(i + 1) == Some(&b'*') {
            depth += 1;
            i += 2;
        } else if rest[i] == b'*' && rest.get(i + 1) == Some(&b'/') {
            depth -= 1;
            i += 2;
            if depth == 0 {
                lex.bump(i);
                return Closed::Yes;
            }
        } else {
            i += 1;
        }
    }
    lex.bump(rest.len());
    Closed::No
}

/// What kind of comment, for the formatter and doc attachment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CommentKind {
    /// `// …`
    Line,
    /// `/// …`: documents the next item or field.
    Doc,
    /// `/* … */`, possibly nested.
    Block,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Comment {
    pub kind: CommentKind,
    pub span: Span,
}

/// A lexical error: a span and what was wrong there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LexError {
    pub span: Span,
    pub kind: LexErrorKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LexErrorKind {
    UnexpectedChar {
        ch: char,
    },
    UnterminatedString,
    UnterminatedComment,
    InvalidEscape {
        escape: String,
    },
    MalformedNumber {
        text: String,
        reason: &'static str,
    },
    UnknownUnit {
        suffix: String,
        suggestion: Option<&'static str>,
    },
    InvalidClockTime {
        text: String,
    },
}

impl LexError {
    pub fn diagnostic(&self) -> Diagnostic {
        let span = self.span;
        match &self.kind {
            LexErrorKind::UnexpectedChar { ch } => Diagnostic::error(
                Code::UnexpectedChar,
                format!("unexpected character `{}`", ch.escape_debug()),
                span,
            )
            .primary_label("no token starts with this character"),
            LexErrorKind::UnterminatedString => {
                Diagnostic::error(Code::UnterminatedString, "unterminated string", span)
                    .primary_label("this string has no closing quote on its line")
                    .help("add a closing `\"`; strings cannot span lines, use `\\n` instead")
            }
            LexErrorKind::UnterminatedComment => Diagnostic::error(
                Code::UnterminatedComment,
                "unterminated block comment",
                Span::new(span.file, span.start, span.start + 2),
            )
            .primary_label("this comment is never closed")
            .help("add `*/`; block comments nest, so every `/*` inside needs its own `*/`"),
            LexErrorKind::InvalidEscape { escape } => Diagnostic::error(
                Code::InvalidEscape,
                format!("invalid escape `{escape}` in string"),
                span,
            )
            .help("valid escapes are `\\\"`, `\\\\`, `\\n`, `\\t`, `\\r` and `\\u{…}`"),
            LexErrorKind::MalformedNumber { text, reason } => Diagnostic::error(
                Code::MalformedNumber,
                format!("malformed number `{text}`"),
                span,
            )
            .primary_label(*reason),
            LexErrorKind::UnknownUnit { suffix, suggestion } => {
                let d =
                    Diagnostic::error(Code::UnknownUnit, format!("unknown unit `{suffix}`"), span)
                        .primary_label("not a unit berth knows");
                match suggestion {
                    Some(s) => d.help(format!("did you mean `{s}`?")),
                    None => d.help(
                        "sizes: B KB MB GB TB KiB MiB GiB TiB; durations: ns us ms s m h d w; \
                         bandwidth: bps Kbps Mbps Gbps Tbps",
                    ),
                }
            }
            LexErrorKind::InvalidClockTime { text } => Diagnostic::error(
                Code::InvalidClockTime,
                format!("invalid clock time `{text}`"),
                span,
            )
            .help("write times as `HH:MM`, hours 00 to 23 (24:00 ends a day), minutes 00 to 59"),
        }
    }
}

/// The result of lexing one file.
#[derive(Clone, Debug, Default)]
pub struct Lexed<'src> {
    pub tokens: Vec<(Token<'src>, Span)>,
    pub comments: Vec<Comment>,
    pub errors: Vec<LexError>,
}

/// Lexes `text` (the contents of file `file`). Never fails; see [`Lexed::errors`].
pub fn lex(file: FileId, text: &str) -> Lexed<'_> {
    let mut out = Lexed {
        tokens: Vec::with_capacity(text.len() / 4),
        ..Lexed::default()
    };
    let mut raw = Raw::lexer(text);
    while let Some(result) = raw.next() {
        let r = raw.span();
        let span = Span::new(file, r.start as u32, r.end as u32);
        let slice = raw.slice();
        let token = match result {
            Err(()) => {
                // A run of bad characters is one token and one error (no cascades).
                if out.extend_bad_run(span) {
                    continue;
                }
                let ch = slice.chars().next().unwrap_or('\u{fffd}');
                out.error(span, LexErrorKind::UnexpectedChar { ch });
                Token::Invalid
            }
            Ok(Raw::LineComment) => {
                let kind = if slice.starts_with("///") && !slice.starts_with("////") {
                    CommentKind::Doc
                } else {
                    CommentKind::Line
                };
                out.comments.push(Comment { kind, span });
                continue;
            }
            Ok(Raw::BlockComment(closed)) => {
                if closed == Closed::No {
                    out.error(span, LexErrorKind::UnterminatedComment);
                }
                out.comments.push(Comment {
                    kind: CommentKind::Block,
                    span,
                });
                continue;
            }
            Ok(Raw::Str) => match unescape(&slice[1..slice.len() - 1]) {
                Ok(s) => Token::Str(s),
                Err(escape) => {
                    out.error(span, LexErrorKind::InvalidEscape { escape });
                    Token::Invalid
                }
            },
            Ok(Raw::UnterminatedStr) => {
                out.error(span, LexErrorKind::UnterminatedString);
                Token::Invalid
            }
            Ok(Raw::Number) => match number(slice) {
                Ok(t) => t,
                Err(kind) => {
                    out.error(span, kind);
                    Token::Invalid
                }
            },
            Ok(Raw::NumberDot) => {
                out.error(
                    span,
                    LexErrorKind::MalformedNumber {
                        text: slice.to_string(),
                        reason: "a decimal point must be followed by digits",
                    },
                );
                Token::Invalid
            }
            Ok(Raw::Clock) => match clock(slice) {
                Some(c) => Token::Clock(c),
                None => {
                    out.error(
                        span,
                        LexErrorKind::InvalidClockTime {
                            text: slice.to_string(),
                        },
                    );
                    Token::Invalid
                }
            },
            Ok(Raw::Ident) => keyword(slice).unwrap_or(Token::Ident(slice)),
            Ok(Raw::LBrace) => Token::LBrace,
            Ok(Raw::RBrace) => Token::RBrace,
            Ok(Raw::LBracket) => Token::LBracket,
            Ok(Raw::RBracket) => Token::RBracket,
            Ok(Raw::LParen) => Token::LParen,
            Ok(Raw::RParen) => Token::RParen,
            Ok(Raw::Comma) => Token::Comma,
            Ok(Raw::Colon) => Token::Colon,
            Ok(Raw::Semi) => Token::Semi,
            Ok(Raw::Dot) => Token::Dot,
            Ok(Raw::DotDot) => Token::DotDot,
            Ok(Raw::Assign) => Token::Assign,
            Ok(Raw::EqEq) => Token::EqEq,
            Ok(Raw::NotEq) => Token::NotEq,
            Ok(Raw::Lt) => Token::Lt,
            Ok(Raw::Le) => Token::Le,
            Ok(Raw::Gt) => Token::Gt,
            Ok(Raw::Ge) => Token::Ge,
            Ok(Raw::Arrow) => Token::Arrow,
            Ok(Raw::Plus) => Token::Plus,
            Ok(Raw::Minus) => Token::Minus,
            Ok(Raw::Star) => Token::Star,
            Ok(Raw::Slash) => Token::Slash,
        };
        out.tokens.push((token, span));
    }
    out
}

impl Lexed<'_> {
    fn error(&mut self, span: Span, kind: LexErrorKind) {
        self.errors.push(LexError { span, kind });
    }

    /// Grows the previous bad-character token and its error over `span` if they touch.
    fn extend_bad_run(&mut self, span: Span) -> bool {
        let Some((Token::Invalid, prev)) = self.tokens.last_mut() else {
            return false;
        };
        let Some(err) = self.errors.last_mut() else {
            return false;
        };
        if prev.end != span.start
            || err.span != *prev
            || !matches!(err.kind, LexErrorKind::UnexpectedChar { .. })
        {
            return false;
        }
        prev.end = span.end;
        err.span.end = span.end;
        true
    }
}

fn keyword(s: &str) -> Option<Token<'static>> {
    Some(match s {
        "use" => Token::Use,
        "const" => Token::Const,
        "true" => Token::True,
        "false" => Token::False,
        "and" => Token::And,
        "or" => Token::Or,
        "not" => Token::Not,
        "in" => Token::In,
        "when" => Token::When,
        "during" => Token::During,
        _ => return None,
    })
}

/// Decodes the body of a string literal (without quotes). `Err` carries the bad escape.
fn unescape(body: &str) -> Result<String, String> {
    if !body.contains('\\') {
        return Ok(body.to_string());
    }
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('"') => out.push('"'),
            Some('\\') => out.push('\\'),
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('u') => {
                let rest = chars.as_str();
                let bad = || format!("\\u{}", rest.chars().take(8).collect::<String>());
                let inner = rest
                    .strip_prefix('{')
                    .and_then(|r| r.split_once('}'))
                    .map(|(hex, _)| hex)
                    .ok_or_else(bad)?;
                let ch = u32::from_str_radix(inner, 16)
                    .ok()
                    .filter(|_| !inner.is_empty() && inner.len() <= 6)
                    .and_then(char::from_u32)
                    .ok_or_else(|| format!("\\u{{{inner}}}"))?;
                out.push(ch);
                for _ in 0..inner.len() + 2 {
                    chars.next();
                }
            }
            Some(other) => return Err(format!("\\{other}")),
            None => return Err("\\".to_string()),
        }
    }
    Ok(out)
}

/// Decodes `123`, `1_000`, `0.90`, `16GiB`, `1.5Gbps`.
fn number(text: &str) -> Result<Token<'static>, LexErrorKind> {
    // A suffix starts at the first letter; underscores before it belong to the digits.
    let split = text
        .find(|c: char| c.is_ascii_alphabetic())
        .unwrap_or(text.len());
    let (digits, suffix) = text.split_at(split);
    let malformed = |reason| LexErrorKind::MalformedNumber {
        text: text.to_string(),
        reason,
    };
    if digits.contains("__")
        || digits.ends_with('_')
        || digits.contains("_.")
        || digits.contains("._")
    {
        return Err(malformed("underscores may only separate digits"));
    }
    let (int_part, frac_part) = match digits.split_once('.') {
        Some((i, f)) => (i, f),
        None => (digits, ""),
    };
    let int_digits: String = int_part.chars().filter(|&c| c != '_').collect();
    let frac_digits: String = frac_part.chars().filter(|&c| c != '_').collect();
    if frac_digits.len() > 18 {
        return Err(malformed("at most 18 digits after the decimal point"));
    }
    let mantissa = format!("{int_digits}{frac_digits}")
        .parse::<u64>()
        .map_err(|_| malformed("this number is too large"))?;
    let value = Num {
        mantissa,
        scale: frac_digits.len() as u8,
    };
    if suffix.is_empty() {
        return Ok(if digits.contains('.') {
            Token::Decimal(value)
        } else {
            Token::Int(mantissa)
        });
    }
    match Unit::from_suffix(suffix) {
        Some(unit) => Ok(Token::Quantity(Quantity { value, unit })),
        None => Err(LexErrorKind::UnknownUnit {
            suffix: suffix.to_string(),
            suggestion: suggest_unit(suffix),
        }),
    }
}

/// A unit that differs from `suffix` only in letter case (`gib` → `GiB`, `MS` → `ms`).
fn suggest_unit(suffix: &str) -> Option<&'static str> {
    Unit::ALL
        .iter()
        .map(|u| u.as_str())
        .find(|u| u.eq_ignore_ascii_case(suffix))
        .or(match suffix {
            "Gb" | "gb" => Some("GB"),
            "sec" | "secs" => Some("s"),
            "min" | "mins" => Some("m"),
            "hr" | "hrs" => Some("h"),
            "day" | "days" => Some("d"),
            _ => None,
        })
}

fn clock(text: &str) -> Option<ClockTime> {
    let (h, m) = text.split_once(':')?;
    if h.len() != 2 || m.len() != 2 {
        return None;
    }
    let (h, m): (u16, u16) = (h.parse().ok()?, m.parse().ok()?);
    if m > 59 || h > 24 || (h == 24 && m != 0) {
        return None;
    }
    Some(ClockTime {
        minutes: h * 60 + m,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<Token<'_>> {
        lex(FileId(0), src)
            .tokens
            .into_iter()
            .map(|(t, _)| t)
            .collect()
    }

    #[test]
    fn quantities_and_numbers() {
        assert_eq!(
            kinds("16GiB 0.90 1_000 20ms 08:00"),
            vec![
                Token::Quantity(Quantity {
                    value: Num::int(16),
                    unit: Unit::GiB
                }),
                Token::Decimal(Num {
                    mantissa: 90,
                    scale: 2
                }),
                Token::Int(1000),
                Token::Quantity(Quantity {
                    value: Num::int(20),
                    unit: Unit::Ms
                }),
                Token::Clock(ClockTime { minutes: 480 }),
            ]
        );
    }

    #[test]
    fn unknown_unit_is_reported_and_lexing_continues() {
        let l = lex(FileId(0), "a = 16gib b = 2");
        assert_eq!(l.errors.len(), 1);
        assert!(matches!(
            &l.errors[0].kind,
            LexErrorKind::UnknownUnit {
                suggestion: Some("GiB"),
                ..
            }
        ));
        assert_eq!(l.tokens.len(), 6);
    }

    #[test]
    fn nested_comments_and_docs() {
        let l = lex(FileId(0), "/* a /* b */ c */ x /// doc\n// plain\ny");
        assert_eq!(l.tokens.len(), 2);
        let kinds: Vec<_> = l.comments.iter().map(|c| c.kind).collect();
        assert_eq!(
            kinds,
            vec![CommentKind::Block, CommentKind::Doc, CommentKind::Line]
        );
        assert!(l.errors.is_empty());
    }

    #[test]
    fn unterminated_things() {
        let l = lex(FileId(0), "x = \"abc\ny = /* never");
        let codes: Vec<_> = l.errors.iter().map(|e| e.diagnostic().code).collect();
        assert_eq!(
            codes,
            vec![Code::UnterminatedString, Code::UnterminatedComment]
        );
    }

    #[test]
    fn escapes() {
        assert_eq!(
            kinds(r#""a\"b\n\u{e9}""#),
            vec![Token::Str("a\"b\né".into())]
        );
        let l = lex(FileId(0), r#""bad \q""#);
        assert!(
            matches!(&l.errors[0].kind, LexErrorKind::InvalidEscape { escape } if escape == "\\q")
        );
    }

    #[test]
    fn bad_characters_merge() {
        let l = lex(FileId(0), "a $$$ b");
        assert_eq!(l.errors.len(), 1);
        assert_eq!(l.tokens.len(), 3);
    }
}
