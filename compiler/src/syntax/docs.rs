//! Doc comments: the `///` lines directly above an item, entry or rule become its `docs`.
//!
//! Done after parsing, over spans, so that comments never influence the grammar and can
//! never cause a parse error.

// INVARIANT: `i` is above 0 where `comments[i - 1]` is read.
#![allow(clippy::indexing_slicing)]

use super::ast::{Body, Entry, EntryKind, Expr, ExprKind, ItemKind, Rule, RuleKind, SourceFileAst};
use super::lexer::{Comment, CommentKind};
use crate::source::Span;

/// Fills the `docs` of every item, entry and rule of `ast`.
pub(crate) fn attach(ast: &mut SourceFileAst, text: &str, comments: &[Comment]) {
    let doc_starts: Vec<u32> = comments
        .iter()
        .filter(|c| c.kind == CommentKind::Doc)
        .map(|c| c.span.start)
        .collect();
    if doc_starts.is_empty() {
        return;
    }
    let docs = Docs {
        text,
        comments,
        doc_starts,
    };
    for item in &mut ast.items {
        item.docs = docs.before(item.span.start);
        match &mut item.kind {
            ItemKind::Const(c) => docs.expr(&mut c.value),
            ItemKind::Decl(d) => docs.body(&mut d.body),
            ItemKind::Policy(p) => {
                for rule in &mut p.rules {
                    docs.rule(rule);
                }
            }
            ItemKind::Use(_) | ItemKind::Error => {}
        }
    }
}

struct Docs<'a> {
    text: &'a str,
    comments: &'a [Comment],
    /// Start offsets of the doc comments, in order.
    doc_starts: Vec<u32>,
}

impl Docs<'_> {
    /// The doc lines directly above `offset`: a run of `///` comments with only whitespace
    /// between them and `offset`.
    fn before(&self, offset: u32) -> Vec<String> {
        let mut i = self.comments.partition_point(|c| c.span.end <= offset);
        let mut next_start = offset as usize;
        let mut lines = Vec::new();
        while i > 0 {
            let c = &self.comments[i - 1];
            let gap = self
                .text
                .get(c.span.end as usize..next_start)
                .unwrap_or("x");
            if c.kind != CommentKind::Doc || !gap.chars().all(char::is_whitespace) {
                break;
            }
            let body = self.text.get(c.span.range()).unwrap_or("");
            let body = body.strip_prefix("///").unwrap_or(body);
            let body = body.strip_prefix(' ').unwrap_or(body);
            lines.push(body.trim_end_matches('\r').to_string());
            next_start = c.span.start as usize;
            i -= 1;
        }
        lines.reverse();
        lines
    }

    /// Whether any doc comment lies inside `span`: subtrees without one are skipped.
    fn any_inside(&self, span: Span) -> bool {
        let i = self.doc_starts.partition_point(|&s| s < span.start);
        self.doc_starts.get(i).is_some_and(|&s| s < span.end)
    }

    fn body(&self, body: &mut Body) {
        if !self.any_inside(body.span) {
            return;
        }
        for entry in &mut body.entries {
            self.entry(entry);
        }
    }

    fn entry(&self, entry: &mut Entry) {
        entry.docs = self.before(entry.span.start);
        match &mut entry.kind {
            EntryKind::Field { value, .. } | EntryKind::Bound { value, .. } => self.expr(value),
            EntryKind::Block { body, .. } => self.body(body),
            EntryKind::Error => {}
        }
    }

    fn rule(&self, rule: &mut Rule) {
        rule.docs = self.before(rule.span.start);
        match &mut rule.kind {
            RuleKind::Entitle { body, .. }
            | RuleKind::Quota { body, .. }
            | RuleKind::Limit { body, .. }
            | RuleKind::Approval { body, .. } => self.body(body),
            RuleKind::Deny { .. }
            | RuleKind::Window { .. }
            | RuleKind::Reclaim { .. }
            | RuleKind::Error => {}
        }
    }

    /// Records inside values have entries too (`runtime = kubernetes { /// … }`).
    // INVARIANT: expression depth is bounded by the prepass (limits::MAX_EXPR_DEPTH).
    fn expr(&self, expr: &mut Expr) {
        if !self.any_inside(expr.span) {
            return;
        }
        match &mut expr.kind {
            ExprKind::Record { body, .. } => self.body(body),
            ExprKind::List(items) => items.iter_mut().for_each(|e| self.expr(e)),
            ExprKind::Map(entries) => entries.iter_mut().for_each(|e| self.expr(&mut e.value)),
            ExprKind::Call { callee, args } => {
                self.expr(callee);
                args.iter_mut().for_each(|e| self.expr(e));
            }
            ExprKind::Member { base, .. } => self.expr(base),
            ExprKind::Unary { operand, .. } => self.expr(operand),
            ExprKind::Binary { lhs, rhs, .. } => {
                self.expr(lhs);
                self.expr(rhs);
            }
            ExprKind::Lambda { body, .. } => self.expr(body),
            ExprKind::Int(_)
            | ExprKind::Decimal(_)
            | ExprKind::Str(_)
            | ExprKind::Bool(_)
            | ExprKind::Quantity(_)
            | ExprKind::Clock(_)
            | ExprKind::Name(_)
            | ExprKind::Error => {}
        }
    }
}
