//! Checks on the token stream before the recursive parser runs: input limits, nesting depth,
//! and which delimiters match which.
//!
//! The recursive parser (and every later tree walk) recurses once per nesting level, so the
//! nesting of brackets and of operator chains is bounded here, on the flat token vector,
//! where no recursion is needed. A region that nests too deeply is reported once and replaced
//! by a single [`Token::Invalid`], which the parser accepts silently as a hole.
//!
//! Delimiter matching is computed once here too: error recovery uses it to skip whole groups
//! and to tell "this `{` is never closed" apart from "something odd inside a closed `{ }`".

// INVARIANT: `stack` holds positions of `tokens` (`partner` is sized from them), and
// `level_ops` has an entry per nesting level up to `current`.
#![allow(clippy::indexing_slicing)]

use super::limits::{MAX_EXPR_DEPTH, MAX_NESTING};
use super::parse_error::{NestingKind, ParseError};
use super::token::Token;
use crate::source::Span;

/// No matching delimiter.
pub(crate) const UNMATCHED: u32 = u32::MAX;

/// Delimiter structure of a token vector.
#[derive(Clone, Debug, Default)]
pub(crate) struct Delimiters {
    /// For an opener, the index of its closer; for a closer, the index of its opener;
    /// [`UNMATCHED`] otherwise.
    partner: Vec<u32>,
}

impl Delimiters {
    /// Matches `{ [ (` with `} ] )`. A closer that does not match the innermost opener closes
    /// the nearest enclosing opener of its kind (the openers in between stay unmatched); a
    /// closer with no opener of its kind stays unmatched.
    pub(crate) fn compute(tokens: &[(Token<'_>, Span)]) -> Self {
        let mut partner = vec![UNMATCHED; tokens.len()];
        let mut stack: Vec<(u32, Delim)> = Vec::new();
        for (i, (tok, _)) in tokens.iter().enumerate() {
            if let Some(d) = opener(tok) {
                stack.push((i as u32, d));
            } else if let Some(d) = closer(tok)
                && let Some(pos) = stack.iter().rposition(|&(_, o)| o == d)
            {
                let (open, _) = stack[pos];
                stack.truncate(pos);
                partner[open as usize] = i as u32;
                partner[i] = open;
            }
        }
        Delimiters { partner }
    }

    /// The partner of the delimiter at `index`, if it has one.
    pub(crate) fn partner(&self, index: usize) -> Option<usize> {
        match self.partner.get(index) {
            Some(&p) if p != UNMATCHED => Some(p as usize),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Delim {
    Brace,
    Bracket,
    Paren,
}

pub(crate) fn opener(tok: &Token<'_>) -> Option<Delim> {
    match tok {
        Token::LBrace => Some(Delim::Brace),
        Token::LBracket => Some(Delim::Bracket),
        Token::LParen => Some(Delim::Paren),
        _ => None,
    }
}

pub(crate) fn closer(tok: &Token<'_>) -> Option<Delim> {
    match tok {
        Token::RBrace => Some(Delim::Brace),
        Token::RBracket => Some(Delim::Bracket),
        Token::RParen => Some(Delim::Paren),
        _ => None,
    }
}

/// Whether a token ends an operand (so that an operand starting right after it begins a new
/// expression, e.g. the next entry of a block).
fn ends_operand(tok: &Token<'_>) -> bool {
    matches!(
        tok,
        Token::Ident(_)
            | Token::Int(_)
            | Token::Decimal(_)
            | Token::Quantity(_)
            | Token::Clock(_)
            | Token::Str(_)
            | Token::True
            | Token::False
            | Token::RParen
            | Token::RBracket
            | Token::RBrace
            | Token::Invalid
    )
}

fn starts_operand(tok: &Token<'_>) -> bool {
    matches!(
        tok,
        Token::Ident(_)
            | Token::Int(_)
            | Token::Decimal(_)
            | Token::Quantity(_)
            | Token::Clock(_)
            | Token::Str(_)
            | Token::True
            | Token::False
            | Token::LBracket
            | Token::Invalid
    )
}

/// Operators that add a level to the expression tree.
fn is_operator(tok: &Token<'_>) -> bool {
    matches!(
        tok,
        Token::Dot
            | Token::Plus
            | Token::Minus
            | Token::Star
            | Token::Slash
            | Token::And
            | Token::Or
            | Token::Not
            | Token::EqEq
            | Token::NotEq
            | Token::Lt
            | Token::Le
            | Token::Gt
            | Token::Ge
            | Token::In
            | Token::Arrow
    )
}

/// A too-deep region to cut: tokens `start..end`.
struct Cut {
    start: usize,
    end: usize,
    kind: NestingKind,
}

/// At most this many E0190 diagnostics per file; further regions are still cut.
const MAX_REPORTED_CUTS: usize = 16;

/// Bounds the nesting of `tokens`: every region nested deeper than the limits is reported
/// and replaced by one [`Token::Invalid`]. Returns the errors (one per region). Linear: one
/// pass to find the regions, one to cut them.
pub(crate) fn limit_nesting(tokens: &mut Vec<(Token<'_>, Span)>) -> Vec<ParseError> {
    let cuts = find_cuts(tokens);
    if cuts.is_empty() {
        return Vec::new();
    }
    let errors = cuts
        .iter()
        .take(MAX_REPORTED_CUTS)
        .map(|c| ParseError::NestingTooDeep {
            span: tokens[c.start].1,
            kind: c.kind,
        })
        .collect();
    let old = std::mem::take(tokens);
    let mut cuts = cuts.into_iter().peekable();
    let mut covered: Option<(Span, usize)> = None;
    for (i, (tok, span)) in old.into_iter().enumerate() {
        if let Some((cover, end)) = covered {
            if i < end {
                covered = Some((cover.to(span), end));
                continue;
            }
            tokens.push((Token::Invalid, cover));
            covered = None;
        }
        if cuts.peek().is_some_and(|c| c.start == i) {
            let end = cuts.next().map_or(i + 1, |c| c.end);
            covered = Some((span, end));
            continue;
        }
        tokens.push((tok, span));
    }
    if let Some((cover, _)) = covered {
        tokens.push((Token::Invalid, cover));
    }
    errors
}

/// The regions where nesting exceeds a limit, in order, not overlapping.
fn find_cuts(tokens: &[(Token<'_>, Span)]) -> Vec<Cut> {
    let mut cuts = Vec::new();
    // Operators counted per bracket level; `ops_total` is their sum over open levels.
    let mut level_ops: Vec<usize> = vec![0];
    let mut ops_total = 0usize;
    let mut prev: Option<&Token<'_>> = None;
    let mut i = 0;
    while let Some((tok, _)) = tokens.get(i) {
        let after_operand = prev.is_some_and(ends_operand);
        let current = level_ops.len() - 1;
        if after_operand && starts_operand(tok) {
            // A new expression starts (next entry or rule): the chain is over.
            ops_total -= level_ops[current];
            level_ops[current] = 0;
        }
        if opener(tok).is_some() {
            // A call's `(` is an operator applied to what precedes it.
            if *tok == Token::LParen && after_operand {
                level_ops[current] += 1;
                ops_total += 1;
            }
            if level_ops.len() > MAX_NESTING {
                // The whole group goes (it is balanced, or runs to the end): depth and
                // operator counts are as before it.
                let end = region_end(tokens, i, NestingKind::Delimiters);
                cuts.push(Cut {
                    start: i,
                    end,
                    kind: NestingKind::Delimiters,
                });
                prev = Some(&Token::Invalid);
                i = end;
                continue;
            }
            level_ops.push(0);
        } else if closer(tok).is_some() {
            if level_ops.len() > 1 {
                let inner = level_ops.pop().unwrap_or(0);
                ops_total -= inner;
            }
        } else if matches!(
            tok,
            Token::Assign | Token::Comma | Token::Semi | Token::When | Token::During
        ) {
            ops_total -= level_ops[current];
            level_ops[current] = 0;
        } else if is_operator(tok) {
            if ops_total + 1 + level_ops.len() > MAX_EXPR_DEPTH {
                // The rest of the expression goes; it ends where a new one starts.
                let end = region_end(tokens, i, NestingKind::Operators);
                cuts.push(Cut {
                    start: i,
                    end,
                    kind: NestingKind::Operators,
                });
                prev = Some(&Token::Invalid);
                i = end;
                continue;
            }
            level_ops[current] += 1;
            ops_total += 1;
        }
        prev = Some(tok);
        i += 1;
    }
    cuts
}

/// The end (exclusive) of the region to cut, starting at `start`.
fn region_end(tokens: &[(Token<'_>, Span)], start: usize, kind: NestingKind) -> usize {
    let mut depth = 0usize;
    let mut prev: Option<&Token<'_>> = None;
    for (i, (tok, _)) in tokens.iter().enumerate().skip(start) {
        let new_operand = depth == 0 && prev.is_some_and(ends_operand) && starts_operand(tok);
        prev = Some(tok);
        if kind == NestingKind::Operators && new_operand {
            return i;
        }
        if opener(tok).is_some() {
            depth += 1;
        } else if closer(tok).is_some() {
            if depth == 0 {
                return i;
            }
            depth -= 1;
            if depth == 0 && kind == NestingKind::Delimiters {
                return i + 1;
            }
        } else if depth == 0
            && kind == NestingKind::Operators
            && matches!(tok, Token::Comma | Token::Semi | Token::Assign)
        {
            return i;
        }
    }
    tokens.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::FileId;
    use crate::syntax::lex;

    #[test]
    fn deep_brackets_become_one_hole() {
        let src = "x = ".to_string() + &"[".repeat(100_000);
        let mut toks = lex(FileId(0), &src).tokens;
        let errs = limit_nesting(&mut toks);
        assert_eq!(errs.len(), 1);
        assert_eq!(toks.len(), 2 + MAX_NESTING + 1);
        assert_eq!(toks.last().map(|t| &t.0), Some(&Token::Invalid));
    }

    #[test]
    fn many_deep_regions_are_all_cut_in_linear_time() {
        let one = format!("const a = {}1{}\n", "[".repeat(70), "]".repeat(70));
        let src = one.repeat(5_000);
        let mut toks = lex(FileId(0), &src).tokens;
        let errs = limit_nesting(&mut toks);
        assert_eq!(errs.len(), MAX_REPORTED_CUTS);
        let invalid = toks.iter().filter(|(t, _)| *t == Token::Invalid).count();
        assert_eq!(invalid, 5_000);
        // What remains nests no deeper than the limit.
        assert!(find_cuts(&toks).is_empty());
    }

    #[test]
    fn matching_skips_mismatched_openers() {
        let toks = lex(FileId(0), "{ ( [ ] }").tokens;
        let d = Delimiters::compute(&toks);
        assert_eq!(d.partner(0), Some(4));
        assert_eq!(d.partner(1), None);
        assert_eq!(d.partner(2), Some(3));
    }

    #[test]
    fn long_operator_chains_are_cut() {
        let src = "x = 1".to_string() + &" + 1".repeat(10_000) + "\ny = 2";
        let mut toks = lex(FileId(0), &src).tokens;
        let errs = limit_nesting(&mut toks);
        assert_eq!(errs.len(), 1);
        assert!(toks.len() < 2 * MAX_EXPR_DEPTH + 10);
    }
}
