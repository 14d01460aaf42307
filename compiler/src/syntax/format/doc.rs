//! Building blocks of layout documents (the `pretty` crate's Wadler-style printer): text,
//! line breaks that a group may flatten, and lists of lines.

use pretty::{DocAllocator, DocBuilder, RcAllocator};
use std::borrow::Cow;

/// Lines longer than this are broken where the layout allows.
pub(super) const WIDTH: usize = 100;
/// Spaces per nesting level.
pub(super) const INDENT: isize = 2;

static ALLOC: RcAllocator = RcAllocator;

pub(super) type Doc<'a> = DocBuilder<'a, RcAllocator, ()>;

/// Text, measured in display columns (not bytes).
pub(super) fn text<'a>(s: impl Into<Cow<'a, str>>) -> Doc<'a> {
    ALLOC.text(s)
}

pub(super) fn nil<'a>() -> Doc<'a> {
    ALLOC.nil()
}

/// A line break that is never flattened; it also forces every enclosing group to break.
pub(super) fn hardline<'a>() -> Doc<'a> {
    ALLOC.hardline()
}

/// A space when its group fits on one line, otherwise a line break.
pub(super) fn line<'a>() -> Doc<'a> {
    ALLOC.line()
}

/// Nothing when its group fits on one line, otherwise a line break.
pub(super) fn softline<'a>() -> Doc<'a> {
    ALLOC.line_()
}

/// The documents one after the other, as a balanced tree: `pretty`'s own `concat` chains
/// them one level deeper each, and dropping a chain of a hundred thousand list elements
/// (each `Rc` drop recursing into the next) overflows the stack. Balanced, the depth is the
/// logarithm of the count; the layout is the same (appending is associative).
pub(super) fn concat<'a>(docs: impl IntoIterator<Item = Doc<'a>>) -> Doc<'a> {
    let mut level: Vec<Doc<'a>> = docs.into_iter().collect();
    while level.len() > 1 {
        let mut next = Vec::with_capacity(level.len().div_ceil(2));
        let mut docs = level.into_iter();
        while let Some(a) = docs.next() {
            next.push(match docs.next() {
                Some(b) => a.append(b),
                None => a,
            });
        }
        level = next;
    }
    level.pop().unwrap_or_else(nil)
}

/// Text only when the enclosing group is broken over lines (a trailing comma).
pub(super) fn when_broken<'a>(s: &'static str) -> Doc<'a> {
    text(s).flat_alt(nil())
}

/// Renders at [`WIDTH`], without trailing whitespace on any line.
pub(super) fn render(doc: Doc<'_>) -> String {
    let raw = doc.into_doc().pretty(WIDTH).to_string();
    let mut out = String::with_capacity(raw.len());
    for line in raw.lines() {
        out.push_str(line.trim_end());
        out.push('\n');
    }
    let trimmed = out.trim_end_matches('\n').len();
    out.truncate(trimmed);
    if !out.is_empty() {
        out.push('\n');
    }
    out
}

/// Lines stacked vertically, with at most one blank line between two of them.
pub(super) struct Lines<'a> {
    parts: Vec<Doc<'a>>,
}

impl<'a> Lines<'a> {
    pub(super) fn new() -> Self {
        Lines { parts: Vec::new() }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// Adds a line; `blank_before` asks for an empty line above it (ignored for the first).
    pub(super) fn push(&mut self, line: Doc<'a>, blank_before: bool) {
        if !self.parts.is_empty() {
            self.parts.push(hardline());
            if blank_before {
                self.parts.push(hardline());
            }
        }
        self.parts.push(line);
    }

    pub(super) fn into_doc(self) -> Doc<'a> {
        concat(self.parts)
    }
}
