//! Layout of expressions: literals as written, strings re-escaped, operators spaced,
//! parentheses exactly where precedence needs them, `and`/`or` chains broken one operand per
//! line when they do not fit.

use super::doc::{Doc, INDENT, concat, line, text};
use super::printer::{ARGS, LIST, MAP, Printer, RECORD};
use crate::source::Span;
use crate::syntax::ast::{BinaryOp, Expr, ExprKind, MapEntry, MapKey, StrLit, UnaryOp};

/// Binding strength, loosest first. The tree has no parenthesis nodes: the printer adds
/// parentheses where a child binds more loosely than its place requires.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Lambda,
    Or,
    And,
    Not,
    Compare,
    Sum,
    Product,
    Neg,
    Postfix,
    Atom,
}

fn level(e: &Expr) -> Level {
    match &e.kind {
        // A record as an operand would read as `operand { body }` in a rule header
        // (`approval when x > r { … }`), so it is parenthesized like the loosest expression.
        ExprKind::Lambda { .. } | ExprKind::Record { .. } => Level::Lambda,
        ExprKind::Binary { op, .. } => binary_level(*op),
        ExprKind::Unary {
            op: UnaryOp::Not, ..
        } => Level::Not,
        ExprKind::Unary {
            op: UnaryOp::Neg, ..
        } => Level::Neg,
        ExprKind::Member { .. } | ExprKind::Call { .. } => Level::Postfix,
        _ => Level::Atom,
    }
}

fn binary_level(op: BinaryOp) -> Level {
    match op {
        BinaryOp::Or => Level::Or,
        BinaryOp::And => Level::And,
        BinaryOp::Compare(_) | BinaryOp::In => Level::Compare,
        BinaryOp::Add | BinaryOp::Sub => Level::Sum,
        BinaryOp::Mul | BinaryOp::Div => Level::Product,
    }
}

impl<'a> Printer<'a> {
    /// An expression, with the comments before it.
    pub(super) fn expr(&mut self, e: &'a Expr) -> Doc<'a> {
        let before = self.inline_comments(self.trivia.real_start(e.span));
        let kind = self.expr_kind(e);
        if self.trivia.has_before(e.span.end) {
            // Comments left inside the span come after the last operand, so the source had
            // parentheses around them: keep those, or a doc comment would leave them and
            // document whatever follows.
            before.append(self.close_parenthesized(kind, e))
        } else {
            before.append(kind)
        }
    }

    /// `(kind …)`, with the comments before the closing parenthesis at the end of `e`.
    fn close_parenthesized(&mut self, kind: Doc<'a>, e: &'a Expr) -> Doc<'a> {
        text("(")
            .append(kind)
            .append(self.spaced_comments(e.span.end))
            .append(")")
    }

    fn expr_kind(&mut self, e: &'a Expr) -> Doc<'a> {
        let close = e.span.end.saturating_sub(1);
        match &e.kind {
            ExprKind::Int(n) => self.number(e, n.to_string()),
            ExprKind::Decimal(n) => self.number(e, n.to_string()),
            ExprKind::Quantity(q) => self.number(e, q.to_string()),
            ExprKind::Str(s) => text(quote(s)),
            ExprKind::Bool(b) => text(if *b { "true" } else { "false" }),
            ExprKind::Clock(c) => text(c.to_string()),
            ExprKind::Name(i) => self.name(i),
            ExprKind::Member { base, field } => self
                // `1.x` would lex as a malformed number.
                .operand(
                    base,
                    level(base) < Level::Postfix || matches!(base.kind, ExprKind::Int(_)),
                )
                .append(".")
                .append(self.name(field)),
            ExprKind::Call { callee, args } => {
                let callee_doc = self.operand(callee, level(callee) < Level::Postfix);
                let open = self.trivia.real_start(Span {
                    file: e.span.file,
                    start: callee.span.end,
                    end: e.span.end.max(callee.span.end),
                });
                callee_doc
                    .append(self.spaced_comments(open))
                    .append(self.seq(args, close, &ARGS, |a| a.span, Self::expr))
            }
            ExprKind::List(items) => self.seq(items, close, &LIST, |a| a.span, Self::expr),
            ExprKind::Map(entries) => self.seq(entries, close, &MAP, |m| m.span, Self::map_entry),
            ExprKind::Record { ctor, body } => self
                .name(ctor)
                .append(" ")
                .append(self.before_open(body.span.start))
                .append(self.seq(
                    &body.entries,
                    body.span.end.saturating_sub(1),
                    &RECORD,
                    |e| e.span,
                    Self::entry,
                )),
            ExprKind::Unary { op, operand } => match op {
                UnaryOp::Not => text("not ").append(self.operand(
                    operand,
                    matches!(
                        operand.kind,
                        ExprKind::Binary { .. } | ExprKind::Lambda { .. } | ExprKind::Record { .. }
                    ),
                )),
                UnaryOp::Neg => {
                    text("-").append(self.operand(operand, level(operand) < Level::Neg))
                }
            },
            ExprKind::Binary { .. } => self.binary(e),
            ExprKind::Lambda { params, body } => {
                let params = match params.as_slice() {
                    [one] => self.name(one),
                    _ => {
                        let mut docs = Vec::with_capacity(params.len() * 2);
                        for (i, p) in params.iter().enumerate() {
                            if i > 0 {
                                docs.push(text(", "));
                            }
                            docs.push(self.name(p));
                        }
                        text("(").append(concat(docs)).append(")")
                    }
                };
                params.append(" -> ").append(self.expr(body))
            }
            ExprKind::Error => self.verbatim(e.span),
        }
    }

    /// `a op b op c`: a chain of operators of one level is printed from one loop (deep chains
    /// must not recurse once per operator). Comparisons do not chain.
    fn binary(&mut self, e: &'a Expr) -> Doc<'a> {
        let own = level(e);
        let mut rest: Vec<(BinaryOp, &'a Expr)> = Vec::new();
        let mut first = e;
        while let ExprKind::Binary { op, lhs, rhs } = &first.kind {
            if binary_level(*op) != own || (own == Level::Compare && !rest.is_empty()) {
                break;
            }
            rest.push((*op, rhs));
            first = lhs;
        }
        let left_parens = level(first) < own || (own == Level::Compare && level(first) == own);
        let mut doc = self.operand(first, left_parens);
        let breakable = matches!(own, Level::And | Level::Or);
        let mut tail = Vec::with_capacity(rest.len());
        for (op, rhs) in rest.into_iter().rev() {
            let rhs_doc = self.operand(rhs, level(rhs) <= own);
            let sep = if breakable { line() } else { text(" ") };
            tail.push(sep.append(op.as_str()).append(" ").append(rhs_doc));
        }
        if breakable {
            doc = doc.append(concat(tail).nest(INDENT)).group();
        } else {
            doc = doc.append(concat(tail));
        }
        doc
    }

    /// An expression right before a rule's body or keyword (`entitle SUBJECT { … }`,
    /// `approval when CONDITION { … }`), where the parser reads no record: a record or a
    /// lambda (whose body would swallow the rule's `{ … }`) is parenthesized.
    pub(super) fn expr_before_body(&mut self, e: &'a Expr) -> Doc<'a> {
        let parens = matches!(e.kind, ExprKind::Record { .. } | ExprKind::Lambda { .. });
        self.operand(e, parens)
    }

    fn operand(&mut self, e: &'a Expr, parens: bool) -> Doc<'a> {
        if parens {
            // Comments before the operand stay outside the parentheses: a parenthesized
            // expression's span starts at its `(`, so this is where the next run finds them.
            let before = self.inline_comments(self.trivia.real_start(e.span));
            let kind = self.expr_kind(e);
            before.append(self.close_parenthesized(kind, e))
        } else {
            self.expr(e)
        }
    }

    fn map_entry(&mut self, entry: &'a MapEntry) -> Doc<'a> {
        let key = match &entry.key {
            MapKey::Name(i) => self.name(i),
            MapKey::Str(s) => self.str_lit(s),
        };
        key.append(": ").append(self.expr(&entry.value))
    }

    pub(super) fn str_lit(&mut self, s: &'a StrLit) -> Doc<'a> {
        self.inline_comments(s.span.start)
            .append(text(quote(&s.value)))
    }

    /// A number or quantity as written (`1_000` keeps its underscores), or its canonical
    /// form if the span does not hold exactly the literal.
    fn number(&self, e: &Expr, canonical: String) -> Doc<'a> {
        let written = self.trivia.slice(e.span);
        let is_literal = written.starts_with(|c: char| c.is_ascii_digit())
            && written
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
        if is_literal {
            text(written)
        } else {
            text(canonical)
        }
    }
}

/// A string literal for `value` in canonical form: `"` and `\` escaped, `\n`, `\t`, `\r` for
/// those characters, `\u{…}` for other control and invisible direction characters (which
/// could make source read differently than it parses), everything else as itself.
pub(super) fn quote(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() || is_invisible(c) => {
                out.push_str(&format!("\\u{{{:x}}}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Zero-width and bidirectional formatting characters.
fn is_invisible(c: char) -> bool {
    matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
}

#[cfg(test)]
mod tests {
    use super::quote;

    #[test]
    fn quote_escapes_canonically() {
        assert_eq!(quote("a\"b\\c\nd\te"), r#""a\"b\\c\nd\te""#);
        assert_eq!(quote("é\u{7}\u{202e}"), "\"é\\u{7}\\u{202e}\"");
    }
}
