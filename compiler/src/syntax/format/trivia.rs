//! The formatter's view of the source text around the tree: a cursor that hands out each
//! comment exactly once, in source order, and the few questions about whitespace the layout
//! needs (is there a blank line here, is this comment on the same line as that token).

// INVARIANT: `limit` never exceeds `comments.len()`, and `i` is what `binary_search` returned
// for `comments`.
#![allow(clippy::indexing_slicing)]

use crate::source::Span;
use crate::syntax::lexer::{Comment, CommentKind};
use std::ops::Range;

/// Comments of one file, in source order, with a cursor.
///
// INVARIANT: `next` only grows within one range; a comment is taken once, so every comment
// of the input appears once in the output and in source order within its range.
pub(super) struct Trivia<'a> {
    text: &'a str,
    comments: &'a [Comment],
    next: usize,
    /// Comments at or after this index belong to another top-level item.
    limit: usize,
}

impl<'a> Trivia<'a> {
    /// `comments` must be sorted by start, as the lexer produces them.
    pub(super) fn new(text: &'a str, comments: &'a [Comment]) -> Self {
        Trivia {
            text,
            comments,
            next: 0,
            limit: comments.len(),
        }
    }

    pub(super) fn all(&self) -> &'a [Comment] {
        self.comments
    }

    /// Restricts the cursor to the comments with these indices.
    pub(super) fn set_range(&mut self, range: Range<usize>) {
        self.next = range.start.min(self.comments.len());
        self.limit = range.end.min(self.comments.len()).max(self.next);
    }

    /// Source text of a span; empty if the span is not inside the text (never panics).
    pub(super) fn slice(&self, span: Span) -> &'a str {
        self.text.get(span.range()).unwrap_or("")
    }

    /// A comment's text as it will be printed: line comments lose trailing whitespace.
    pub(super) fn comment_text(&self, comment: &Comment) -> &'a str {
        let text = self.slice(comment.span);
        match comment.kind {
            CommentKind::Line | CommentKind::Doc => text.trim_end(),
            CommentKind::Block => text,
        }
    }

    /// The next comment not yet printed, if it starts before `pos`.
    pub(super) fn peek_before(&self, pos: u32) -> Option<&'a Comment> {
        self.comments[..self.limit]
            .get(self.next)
            .filter(|c| c.span.start < pos)
    }

    /// Takes the next comment if it starts before `pos`.
    pub(super) fn take_before(&mut self, pos: u32) -> Option<&'a Comment> {
        let c = self.peek_before(pos)?;
        self.next += 1;
        Some(c)
    }

    /// Whether a comment not yet printed starts before `pos`.
    pub(super) fn has_before(&self, pos: u32) -> bool {
        self.peek_before(pos).is_some()
    }

    /// Marks the comments that start before `end` as printed: they are part of a verbatim
    /// slice (an error node).
    pub(super) fn skip_before(&mut self, end: u32) {
        while self.take_before(end).is_some() {}
    }

    /// Where the first token at or after `span.start` begins: spans of items and entries may
    /// start at their doc comments, and comments are printed separately from the node.
    pub(super) fn real_start(&self, span: Span) -> u32 {
        let mut pos = span.start as usize;
        loop {
            let rest = self.text.get(pos..).unwrap_or("");
            pos += rest.len() - rest.trim_start_matches(WHITESPACE).len();
            let at = self
                .comments
                .binary_search_by_key(&(pos as u32), |c| c.span.start);
            match at {
                Ok(i) if (self.comments[i].span.end as usize) > pos => {
                    pos = self.comments[i].span.end as usize;
                }
                _ => break,
            }
        }
        (pos as u32).min(span.end.max(span.start))
    }

    /// Whether the text between `a` and `b` holds an empty line (only whitespace between two
    /// line breaks; a line holding a token, say a lone `{`, is not empty).
    pub(super) fn blank_line_between(&self, a: u32, b: u32) -> bool {
        self.gap(a, b)
            .split_inclusive('\n')
            .skip(1)
            .any(|line| line.ends_with('\n') && line.trim_matches(WHITESPACE).is_empty())
    }

    /// Whether the text between `a` and `b` is on one line and holds nothing but spaces and
    /// separators: a comment at `b` then trails the node that ends at `a`.
    pub(super) fn same_line(&self, a: u32, b: u32) -> bool {
        a <= b
            && self
                .gap(a, b)
                .chars()
                .all(|c| matches!(c, ' ' | '\t' | '\u{c}' | '\r' | ',' | ';'))
    }

    /// Whether `token` ends just before `pos`, on the same line (spaces and tabs between).
    pub(super) fn follows(&self, pos: u32, token: &str) -> bool {
        self.text
            .get(..pos as usize)
            .is_some_and(|before| before.trim_end_matches([' ', '\t']).ends_with(token))
    }

    fn gap(&self, a: u32, b: u32) -> &'a str {
        if a >= b {
            return "";
        }
        self.text.get(a as usize..b as usize).unwrap_or("")
    }
}

/// Whitespace as the lexer skips it.
const WHITESPACE: &[char] = &[' ', '\t', '\r', '\n', '\u{c}', '\u{feff}'];
