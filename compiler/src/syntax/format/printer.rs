//! The layout of items, entries and rules, and the placement of comments around them.
//!
//! The printer walks the tree in source order. Before each node it prints the comments that
//! start before the node (taken from [`Trivia`], so each comment is printed once); after a
//! node in a block or list it prints, on the same line, the comments that followed the node on
//! its source line. Expressions are laid out in `expr.rs`.

// INVARIANT: `i` runs over the indices of `comments`.
#![allow(clippy::indexing_slicing)]

use super::doc::{Doc, INDENT, Lines, concat, hardline, line, nil, softline, text, when_broken};
use super::trivia::Trivia;
use crate::source::Span;
use crate::syntax::ast::{
    Body, Entry, EntryKind, Ident, Item, ItemKind, PolicyItem, Rule, RuleKind, SourceFileAst,
    UseItem, UseTree,
};
use crate::syntax::lexer::{Comment, CommentKind};
use std::ops::Range;

pub(super) struct Printer<'a> {
    pub(super) trivia: Trivia<'a>,
}

/// How a delimited sequence (block, record, list, map, arguments, import group) is laid out.
pub(super) struct SeqStyle {
    open: &'static str,
    close: &'static str,
    /// Always one element per line, even when empty of comments and short.
    always_broken: bool,
    /// A space inside the delimiters when the sequence fits on one line (`{ a: 1 }`).
    padded: bool,
    /// Commas when the sequence is broken over lines.
    broken_commas: Commas,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Commas {
    /// Blocks and records: entries need no separator on their own lines.
    None,
    /// Lists, maps, arguments, import groups: after every element, so that adding one is a
    /// one-line diff.
    Trailing,
}

pub(super) const BLOCK: SeqStyle = SeqStyle {
    open: "{",
    close: "}",
    always_broken: true,
    padded: true,
    broken_commas: Commas::None,
};
pub(super) const RECORD: SeqStyle = SeqStyle {
    always_broken: false,
    ..BLOCK
};
pub(super) const LIST: SeqStyle = SeqStyle {
    open: "[",
    close: "]",
    always_broken: false,
    padded: false,
    broken_commas: Commas::Trailing,
};
pub(super) const MAP: SeqStyle = SeqStyle {
    open: "{",
    close: "}",
    padded: true,
    ..LIST
};
pub(super) const ARGS: SeqStyle = SeqStyle {
    open: "(",
    close: ")",
    ..LIST
};
const IMPORTS: SeqStyle = SeqStyle {
    open: "{",
    close: "}",
    ..ARGS
};

/// One top-level item and the comments that go with it, wherever the item is printed.
struct Placed<'a> {
    item: &'a Item,
    /// Indices of its comments: those above it and those trailing it on its last line.
    comments: Range<usize>,
    /// Where its first comment or, without one, its first token starts.
    start: u32,
    /// Where it or its last trailing comment ends.
    end: u32,
}

impl<'a> Printer<'a> {
    pub(super) fn new(text: &'a str, comments: &'a [Comment]) -> Self {
        Printer {
            trivia: Trivia::new(text, comments),
        }
    }

    /// The whole file: header comments, `use` items, the other items, trailing comments.
    pub(super) fn file(&mut self, ast: &'a SourceFileAst) -> Doc<'a> {
        let comments = self.trivia.all();
        let Some(first) = ast.items.first() else {
            let mut lines = Lines::new();
            self.leading(&mut lines, u32::MAX, &mut 0);
            return lines.into_doc();
        };
        let header = self.header_len(self.trivia.real_start(first.span));
        let placed = self.place(&ast.items, header);
        let footer_start = placed.last().map_or(header, |p| p.comments.end);
        let last_end = placed.last().map_or(0, |p| p.end);

        let mut sections: Vec<Doc<'a>> = Vec::new();
        if header > 0 {
            let mut lines = Lines::new();
            self.trivia.set_range(0..header);
            self.leading(&mut lines, u32::MAX, &mut 0);
            sections.push(lines.into_doc());
        }
        let (uses, others): (Vec<&Placed<'a>>, Vec<&Placed<'a>>) = placed
            .iter()
            .partition(|p| matches!(p.item.kind, ItemKind::Use(_)));
        if !uses.is_empty() {
            let mut lines = Lines::new();
            for p in uses {
                lines.push(self.placed_item(p), false);
            }
            sections.push(lines.into_doc());
        }
        if !others.is_empty() {
            let mut lines = Lines::new();
            let mut prev: Option<&Placed<'a>> = None;
            for p in others {
                let blank = match prev {
                    Some(prev) if both_const(prev.item, p.item) => {
                        self.trivia.blank_line_between(prev.end, p.start)
                    }
                    _ => true,
                };
                lines.push(self.placed_item(p), blank);
                prev = Some(p);
            }
            sections.push(lines.into_doc());
        }
        let mut out = Lines::new();
        for section in sections {
            out.push(section, true);
        }
        self.trivia.set_range(footer_start..comments.len());
        let mut prev_end = last_end;
        let mut footer = Lines::new();
        let blank = self
            .trivia
            .peek_before(u32::MAX)
            .is_some_and(|c| self.trivia.blank_line_between(last_end, c.span.start));
        self.leading(&mut footer, u32::MAX, &mut prev_end);
        if !footer.is_empty() {
            out.push(footer.into_doc(), blank);
        }
        out.into_doc()
    }

    /// How many comments before the first item form the file header: those up to the last
    /// one followed by a blank line. They stay at the top when `use` items move up.
    fn header_len(&self, first_item: u32) -> usize {
        let comments = self.trivia.all();
        let before = comments.partition_point(|c| c.span.start < first_item);
        (0..before)
            .rev()
            .find(|&i| {
                let next = comments.get(i + 1).map_or(first_item, |c| c.span.start);
                self.trivia
                    .blank_line_between(comments[i].span.end, next.min(first_item))
            })
            .map_or(0, |i| i + 1)
    }

    /// Gives every comment after the header to one item: the comments above an item and
    /// those on the same line after it are its own.
    fn place(&self, items: &'a [Item], header: usize) -> Vec<Placed<'a>> {
        let comments = self.trivia.all();
        let mut placed = Vec::with_capacity(items.len());
        let mut lo = header;
        for item in items {
            let mut hi = comments
                .partition_point(|c| c.span.start < item.span.end)
                .max(lo);
            let mut end = item.span.end;
            while let Some(c) = comments.get(hi) {
                if !self.trivia.same_line(end, c.span.start) {
                    break;
                }
                end = c.span.end;
                hi += 1;
                if c.kind != CommentKind::Block {
                    break;
                }
            }
            let real_start = self.trivia.real_start(item.span);
            let start = comments
                .get(lo)
                .filter(|c| lo < hi && c.span.start < real_start)
                .map_or(real_start, |c| c.span.start);
            placed.push(Placed {
                item,
                comments: lo..hi,
                start,
                end,
            });
            lo = hi;
        }
        placed
    }

    /// An item with its comments above and after it.
    fn placed_item(&mut self, p: &Placed<'a>) -> Doc<'a> {
        self.trivia.set_range(p.comments.clone());
        let mut lines = Lines::new();
        let start = self.trivia.real_start(p.item.span);
        // Where the gap before the first line starts: its blank line is ignored anyway, and
        // measuring from the start of the file would make each item cost the file's length.
        let mut prev_end = p.start;
        self.leading(&mut lines, start, &mut prev_end);
        let blank = self.trivia.blank_line_between(prev_end, start);
        let doc = self.item(p.item);
        let (doc, end) = self.trailing(doc, p.item.span.end, u32::MAX);
        lines.push(doc, blank);
        prev_end = end;
        // Comments the item did not place (possible only with odd spans) go below it.
        self.leading(&mut lines, u32::MAX, &mut prev_end);
        lines.into_doc()
    }

    fn item(&mut self, item: &'a Item) -> Doc<'a> {
        match &item.kind {
            ItemKind::Use(u) => self.use_item(u, item.span),
            ItemKind::Const(c) => text("const ")
                .append(self.opt_name(c.name.as_ref()))
                .append(text(" = "))
                .append(self.expr(&c.value)),
            ItemKind::Decl(d) => text(d.kind.keyword())
                .append(" ")
                .append(self.opt_name(d.name.as_ref()))
                .append(if d.name.is_some() { " " } else { "" })
                .append(self.item_body(&d.body)),
            ItemKind::Policy(p) => self.policy(p),
            ItemKind::Error => self.verbatim(item.span),
        }
    }

    fn use_item(&mut self, u: &'a UseItem, span: Span) -> Doc<'a> {
        let mut path = Vec::with_capacity(u.path.len());
        for segment in &u.path {
            path.push(self.name(segment));
        }
        let path = concat(itertools_join(path, "."));
        let tree = match &u.tree {
            UseTree::Single => nil(),
            UseTree::Glob(star) => self
                .use_dot(u, span)
                .append(self.before_open(star.start))
                .append("*"),
            UseTree::Group(names) => {
                let dot = self.use_dot(u, span);
                let brace =
                    self.next_token(self.trivia.real_start(self.after_path(u, span)) + 1, span);
                dot.append(self.before_open(brace)).append(self.seq(
                    names,
                    span.end.saturating_sub(1),
                    &IMPORTS,
                    |n| n.span,
                    Self::name,
                ))
            }
        };
        text("use ").append(path).append(tree)
    }

    /// The `.` before a use item's `*` or `{…}`, with the comments before it.
    fn use_dot(&mut self, u: &'a UseItem, span: Span) -> Doc<'a> {
        let dot = self.trivia.real_start(self.after_path(u, span));
        self.spaced_comments(dot).append(".")
    }

    /// From the end of a use item's path to the end of the item.
    fn after_path(&self, u: &UseItem, span: Span) -> Span {
        let start = u.path.last().map_or(span.start, |p| p.span.end);
        Span {
            file: span.file,
            start,
            end: span.end.max(start),
        }
    }

    /// Where the first token at or after `pos` (and inside `within`) starts.
    fn next_token(&self, pos: u32, within: Span) -> u32 {
        self.trivia.real_start(Span {
            file: within.file,
            start: pos.min(within.end),
            end: within.end,
        })
    }

    fn policy(&mut self, p: &'a PolicyItem) -> Doc<'a> {
        text("policy ")
            .append(self.opt_name(p.name.as_ref()))
            .append(if p.name.is_some() { " " } else { "" })
            .append(self.before_open(p.body_span.start))
            .append(self.seq(
                &p.rules,
                p.body_span.end.saturating_sub(1),
                &BLOCK,
                |r| r.span,
                Self::rule,
            ))
    }

    /// `{ entries }` of a declaration: one entry per line.
    fn item_body(&mut self, body: &'a Body) -> Doc<'a> {
        self.body_with(body, &BLOCK)
    }

    /// `{ entries }` of a nested block or a rule: one entry per line, except that a single
    /// entry stays on the line when it fits and holds no comment (`quota team("a") { gpu <= 8 }`,
    /// `telemetry { buffer = 24h }`): three lines for one entry read worse than one.
    pub(super) fn body(&mut self, body: &'a Body) -> Doc<'a> {
        let style = if body.entries.len() == 1 {
            &RECORD
        } else {
            &BLOCK
        };
        self.body_with(body, style)
    }

    fn body_with(&mut self, body: &'a Body, style: &SeqStyle) -> Doc<'a> {
        // Comments before the `{` stay before it: a doc comment moved inside would document
        // the first entry.
        self.before_open(body.span.start).append(self.seq(
            &body.entries,
            body.span.end.saturating_sub(1),
            style,
            |e| e.span,
            Self::entry,
        ))
    }

    /// The comments before an opening delimiter at `open`.
    pub(super) fn before_open(&mut self, open: u32) -> Doc<'a> {
        self.inline_comments(open)
    }

    pub(super) fn entry(&mut self, entry: &'a Entry) -> Doc<'a> {
        match &entry.kind {
            EntryKind::Field { key, label, value } => self
                .name(key)
                .append(self.label(label.as_ref()))
                .append(" = ")
                .append(self.expr(value)),
            EntryKind::Block { key, label, body } => self
                .name(key)
                .append(self.label(label.as_ref()))
                .append(" ")
                .append(self.body(body)),
            EntryKind::Bound { key, op, value } => self
                .name(key)
                .append(" ")
                .append(op.as_str())
                .append(" ")
                .append(self.expr(value)),
            EntryKind::Error => self.verbatim(entry.span),
        }
    }

    fn label(&mut self, label: Option<&'a Ident>) -> Doc<'a> {
        match label {
            Some(l) => text(" ").append(self.name(l)),
            None => nil(),
        }
    }

    fn rule(&mut self, rule: &'a Rule) -> Doc<'a> {
        match &rule.kind {
            RuleKind::Deny { reason, condition } => {
                let reason = self.str_lit(reason);
                let condition = self.expr(condition);
                text("deny ")
                    .append(reason)
                    .append(line().append("when ").append(condition).nest(INDENT))
                    .group()
            }
            RuleKind::Entitle { subject, body } => text("entitle ")
                .append(self.expr_before_body(subject))
                .append(" ")
                .append(self.body(body)),
            RuleKind::Quota { subject, body } => text("quota ")
                .append(self.expr_before_body(subject))
                .append(" ")
                .append(self.body(body)),
            RuleKind::Window {
                name,
                days,
                start,
                end,
                zone,
            } => text("window ")
                .append(self.name(name))
                .append(" = ")
                .append(self.expr_before_body(days))
                .append(" ")
                .append(self.inline_comments(start.span.start))
                .append(text(start.value.to_string()))
                .append("..")
                .append(self.inline_comments(end.span.start))
                .append(text(end.value.to_string()))
                .append(" in ")
                .append(self.str_lit(zone)),
            RuleKind::Limit {
                selector,
                value,
                window,
                body,
            } => text("limit ")
                .append(self.name(selector))
                .append(" ")
                .append(self.expr_before_body(value))
                .append(" during ")
                .append(self.name(window))
                .append(" ")
                .append(self.body(body)),
            RuleKind::Approval { condition, body } => text("approval when ")
                .append(self.expr_before_body(condition))
                .append(" ")
                .append(self.body(body)),
            RuleKind::Reclaim {
                selector,
                value,
                condition,
            } => text("reclaim ")
                .append(self.name(selector))
                .append(" ")
                .append(self.expr_before_body(value))
                .append(" when ")
                .append(self.expr(condition)),
            RuleKind::Error => self.verbatim(rule.span),
        }
    }

    /// A delimited sequence. Short and free of comments: on one line if it fits (blocks
    /// excepted). Otherwise one element per line, each with the comments above it and the
    /// comments that trailed it on its source line; blank lines between elements are kept
    /// (at most one).
    pub(super) fn seq<T>(
        &mut self,
        elements: &'a [T],
        close: u32,
        style: &SeqStyle,
        span: fn(&T) -> Span,
        print: fn(&mut Self, &'a T) -> Doc<'a>,
    ) -> Doc<'a> {
        let has_comments = self.trivia.has_before(close);
        if elements.is_empty() && !has_comments {
            return text(style.open).append(style.close);
        }
        if !style.always_broken && !has_comments {
            // Records need no comma once broken over lines; the others keep theirs.
            let comma = match style.broken_commas {
                Commas::None => nil().flat_alt(text(",")),
                Commas::Trailing => text(","),
            };
            let mut docs = Vec::with_capacity(elements.len() * 2);
            for (i, element) in elements.iter().enumerate() {
                if i > 0 {
                    docs.push(comma.clone().append(line()));
                }
                docs.push(print(self, element));
            }
            let trailing = match style.broken_commas {
                Commas::Trailing => when_broken(","),
                Commas::None => nil(),
            };
            let edge = if style.padded { line() } else { softline() };
            return text(style.open)
                .append(
                    edge.clone()
                        .append(concat(docs))
                        .append(trailing)
                        .nest(INDENT),
                )
                .append(edge)
                .append(style.close)
                .group();
        }
        let first_start = elements
            .first()
            .map_or(close, |e| self.trivia.real_start(span(e)));
        let (open, mut prev_end) = self.after_open(style.open, first_start);
        let mut lines = Lines::new();
        for element in elements {
            let element_span = span(element);
            let start = self.trivia.real_start(element_span);
            self.leading(&mut lines, start, &mut prev_end);
            let blank = self.trivia.blank_line_between(prev_end, start);
            let mut doc = print(self, element);
            if style.broken_commas == Commas::Trailing {
                doc = doc.append(",");
            }
            let (doc, end) = self.trailing(doc, element_span.end, close);
            lines.push(doc, blank);
            prev_end = end;
        }
        self.leading(&mut lines, close, &mut prev_end);
        if lines.is_empty() {
            // Only comments that trail the opening delimiter.
            return open.append(hardline()).append(style.close);
        }
        open.append(hardline().append(lines.into_doc()).nest(INDENT))
            .append(hardline())
            .append(style.close)
    }

    /// The opening delimiter of a broken sequence, with the comments that follow it on its
    /// source line (`model m { // why`). Returns the doc and where the last comment ends.
    fn after_open(&mut self, open: &'static str, first_element: u32) -> (Doc<'a>, u32) {
        let mut doc = vec![text(open)];
        let mut end = None;
        while let Some(c) = self.trivia.peek_before(first_element) {
            let trails = match end {
                None => self.trivia.follows(c.span.start, open),
                Some(end) => self.trivia.same_line(end, c.span.start),
            };
            if !trails {
                break;
            }
            self.trivia.take_before(first_element);
            doc.extend([text(" "), text(self.trivia.comment_text(c))]);
            end = Some(c.span.end);
            if c.kind != CommentKind::Block {
                break;
            }
        }
        // Without trailing comments the gap starts at the first element: nothing above it is
        // printed, and measuring from further back would cost the text before the sequence.
        (concat(doc), end.unwrap_or(first_element))
    }

    /// Comments before `before`, each on its own line; a blank line above one is kept.
    pub(super) fn leading(&mut self, lines: &mut Lines<'a>, before: u32, prev_end: &mut u32) {
        while let Some(c) = self.trivia.take_before(before) {
            let blank = self.trivia.blank_line_between(*prev_end, c.span.start);
            lines.push(text(self.trivia.comment_text(c)), blank);
            *prev_end = c.span.end;
        }
    }

    /// Appends to `doc` the comments on the same source line after `end` (before `close`).
    /// Returns the doc and where the last of them ends.
    fn trailing(&mut self, doc: Doc<'a>, end: u32, close: u32) -> (Doc<'a>, u32) {
        let mut doc = vec![doc];
        let mut end = end;
        while let Some(c) = self.trivia.peek_before(close) {
            // A comment inside the node that its printer did not place also trails it.
            if c.span.start >= end && !self.trivia.same_line(end, c.span.start) {
                break;
            }
            self.trivia.take_before(close);
            doc.extend([text(" "), text(self.trivia.comment_text(c))]);
            end = end.max(c.span.end);
            if c.kind != CommentKind::Block {
                // A line comment runs to the end of the line: nothing may follow it there.
                break;
            }
        }
        (concat(doc), end)
    }

    /// Comments before `before` in the middle of a line: block comments stay inline, a line
    /// comment ends the line.
    pub(super) fn inline_comments(&mut self, before: u32) -> Doc<'a> {
        let mut doc = Vec::new();
        while let Some(c) = self.trivia.take_before(before) {
            let body = self.trivia.comment_text(c);
            let after = if c.kind == CommentKind::Block && !body.contains('\n') {
                text(" ")
            } else {
                hardline()
            };
            doc.extend([text(body), after]);
        }
        concat(doc)
    }

    /// Comments before `before` right after a token: a space first, then as
    /// [`Self::inline_comments`].
    pub(super) fn spaced_comments(&mut self, before: u32) -> Doc<'a> {
        if self.trivia.has_before(before) {
            text(" ").append(self.inline_comments(before))
        } else {
            nil()
        }
    }

    /// A name, with any comments before it.
    pub(super) fn name(&mut self, ident: &'a Ident) -> Doc<'a> {
        self.inline_comments(ident.span.start)
            .append(text(ident.name.as_str()))
    }

    fn opt_name(&mut self, ident: Option<&'a Ident>) -> Doc<'a> {
        match ident {
            Some(i) => self.name(i),
            None => nil(),
        }
    }

    /// A node the parser could not make sense of, printed exactly as written. (Only reachable
    /// through [`super::format_parsed`] on a file with errors.)
    pub(super) fn verbatim(&mut self, span: Span) -> Doc<'a> {
        let before = self.inline_comments(span.start);
        self.trivia.skip_before(span.end);
        before.append(text(self.trivia.slice(span)))
    }
}

fn both_const(a: &Item, b: &Item) -> bool {
    matches!(a.kind, ItemKind::Const(_)) && matches!(b.kind, ItemKind::Const(_))
}

/// `docs` with `sep` between each two.
fn itertools_join<'a>(docs: Vec<Doc<'a>>, sep: &'static str) -> Vec<Doc<'a>> {
    let mut out = Vec::with_capacity(docs.len() * 2);
    for (i, d) in docs.into_iter().enumerate() {
        if i > 0 {
            out.push(text(sep));
        }
        out.push(d);
    }
    out
}
