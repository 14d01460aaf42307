//! A compact, readable S-expression dump of the syntax tree, for snapshot tests and
//! debugging. Every node shows its byte span as `@start..end`; doc comments are shown as
//! `///` lines above their node. Items, entries and rules go on their own lines, expressions
//! inline.

use super::ast::{
    Body, Entry, EntryKind, Expr, ExprKind, Ident, Item, ItemKind, MapKey, Rule, RuleKind,
    SourceFileAst, StrLit, UnaryOp, UseTree,
};
use crate::source::Span;
use std::fmt::Write;

/// The dump of a whole file.
pub fn dump(ast: &SourceFileAst) -> String {
    let mut d = Dumper { out: String::new() };
    let _ = writeln!(d.out, "(file{}", at(ast.span));
    for item in &ast.items {
        d.item(item, 1);
    }
    d.out.push_str(")\n");
    d.out
}

/// The dump without its spans, and doc lines without trailing spaces or tabs: what
/// formatting a file must keep (it moves every span and trims doc comments).
pub fn dump_without_spans(ast: &SourceFileAst) -> String {
    dump(ast)
        .lines()
        .map(without_spans)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The inline dump of one expression.
pub fn dump_expr(expr: &Expr) -> String {
    let mut d = Dumper { out: String::new() };
    d.expr(expr);
    d.out
}

/// One dump line without its `@start..end` spans; a doc line (`///"text"`) without trailing
/// spaces or tabs in its text.
fn without_spans(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some((before, after)) = rest.split_once('@') {
        out.push_str(before);
        rest = after.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
    }
    out.push_str(rest);
    let (indent, body) = out.split_at(out.len() - out.trim_start().len());
    match body.strip_prefix("///\"").and_then(|d| d.strip_suffix('"')) {
        Some(mut doc) => {
            while let Some(shorter) = doc.strip_suffix(' ').or_else(|| doc.strip_suffix("\\t")) {
                doc = shorter;
            }
            format!("{indent}///\"{doc}\"")
        }
        None => out,
    }
}

fn at(span: Span) -> String {
    format!("@{}..{}", span.start, span.end)
}

/// Where an entry is dumped: on its own lines at a depth, or inline inside a record.
#[derive(Clone, Copy)]
enum Layout {
    Lines(usize),
    Inline,
}

fn id(i: &Ident) -> String {
    format!("{}{}", i.name, at(i.span))
}

fn opt_id(i: &Option<Ident>) -> String {
    i.as_ref().map_or_else(|| "<missing>".to_string(), id)
}

fn str_lit(s: &StrLit) -> String {
    format!("{:?}{}", s.value, at(s.span))
}

struct Dumper {
    out: String,
}

impl Dumper {
    fn indent(&mut self, depth: usize) {
        for _ in 0..depth {
            self.out.push_str("  ");
        }
    }

    fn docs(&mut self, docs: &[String], depth: usize) {
        for line in docs {
            self.indent(depth);
            let _ = writeln!(self.out, "///{line:?}");
        }
    }

    fn item(&mut self, item: &Item, depth: usize) {
        self.docs(&item.docs, depth);
        self.indent(depth);
        let span = at(item.span);
        match &item.kind {
            ItemKind::Use(u) => {
                let path: Vec<String> = u.path.iter().map(id).collect();
                let tree = match &u.tree {
                    UseTree::Single => String::new(),
                    UseTree::Group(names) => {
                        let names: Vec<String> = names.iter().map(id).collect();
                        format!(" (group {})", names.join(" "))
                    }
                    UseTree::Glob(s) => format!(" (glob{})", at(*s)),
                };
                let _ = writeln!(self.out, "(use{span} {}{tree})", path.join(" "));
            }
            ItemKind::Const(c) => {
                let _ = write!(self.out, "(const{span} {} ", opt_id(&c.name));
                self.expr(&c.value);
                self.out.push_str(")\n");
            }
            ItemKind::Decl(d) => {
                let _ = write!(self.out, "({}{span} {}", d.kind.keyword(), opt_id(&d.name));
                self.body_lines(&d.body, depth);
            }
            ItemKind::Policy(p) => {
                let _ = writeln!(
                    self.out,
                    "(policy{span} {} {{{}",
                    opt_id(&p.name),
                    at(p.body_span)
                );
                for rule in &p.rules {
                    self.rule(rule, depth + 1);
                }
                self.indent(depth);
                self.out.push_str(")\n");
            }
            ItemKind::Error => {
                let _ = writeln!(self.out, "(error-item{span})");
            }
        }
    }

    /// ` {@a..b` then the entries on their own lines, then `)`.
    fn body_lines(&mut self, body: &Body, depth: usize) {
        if body.entries.is_empty() {
            let _ = writeln!(self.out, " {{{})", at(body.span));
            return;
        }
        let _ = writeln!(self.out, " {{{}", at(body.span));
        for entry in &body.entries {
            self.entry(entry, depth + 1);
        }
        self.indent(depth);
        self.out.push_str(")\n");
    }

    fn entry(&mut self, entry: &Entry, depth: usize) {
        self.docs(&entry.docs, depth);
        self.indent(depth);
        self.entry_as(entry, Layout::Lines(depth));
    }

    /// An entry, written the same way on its own lines and inline (inside a record) but for
    /// how it ends and how a nested body is laid out.
    fn entry_as(&mut self, entry: &Entry, layout: Layout) {
        let span = at(entry.span);
        let end = match layout {
            Layout::Lines(_) => ")\n",
            Layout::Inline => ")",
        };
        let label = |label: &Option<Ident>| {
            label
                .as_ref()
                .map(|l| format!(" {}", id(l)))
                .unwrap_or_default()
        };
        match &entry.kind {
            EntryKind::Field {
                key,
                label: l,
                value,
            } => {
                let _ = write!(self.out, "(field{span} {}{} = ", id(key), label(l));
                self.expr(value);
                self.out.push_str(end);
            }
            EntryKind::Block {
                key,
                label: l,
                body,
            } => {
                let _ = write!(self.out, "(block{span} {}{}", id(key), label(l));
                match layout {
                    Layout::Lines(depth) => self.body_lines(body, depth),
                    Layout::Inline => {
                        self.out.push(' ');
                        self.inline_body(body);
                        self.out.push(')');
                    }
                }
            }
            EntryKind::Bound { key, op, value } => {
                let _ = write!(self.out, "(bound{span} {} {} ", id(key), op.as_str());
                self.expr(value);
                self.out.push_str(end);
            }
            EntryKind::Error => {
                let _ = write!(self.out, "(error-entry{span}");
                self.out.push_str(end);
            }
        }
    }

    fn rule(&mut self, rule: &Rule, depth: usize) {
        self.docs(&rule.docs, depth);
        self.indent(depth);
        let span = at(rule.span);
        match &rule.kind {
            RuleKind::Deny { reason, condition } => {
                let _ = write!(self.out, "(deny{span} {} when ", str_lit(reason));
                self.expr(condition);
                self.out.push_str(")\n");
            }
            RuleKind::Entitle { subject, body } | RuleKind::Quota { subject, body } => {
                let word = if matches!(rule.kind, RuleKind::Entitle { .. }) {
                    "entitle"
                } else {
                    "quota"
                };
                let _ = write!(self.out, "({word}{span} ");
                self.expr(subject);
                self.body_lines(body, depth);
            }
            RuleKind::Window {
                name,
                days,
                start,
                end,
                zone,
            } => {
                let _ = write!(self.out, "(window{span} {} = ", id(name));
                self.expr(days);
                let _ = writeln!(
                    self.out,
                    " {}{}..{}{} in {})",
                    start.value,
                    at(start.span),
                    end.value,
                    at(end.span),
                    str_lit(zone)
                );
            }
            RuleKind::Limit {
                selector,
                value,
                window,
                body,
            } => {
                let _ = write!(self.out, "(limit{span} {} ", id(selector));
                self.expr(value);
                let _ = write!(self.out, " during {}", id(window));
                self.body_lines(body, depth);
            }
            RuleKind::Approval { condition, body } => {
                let _ = write!(self.out, "(approval{span} when ");
                self.expr(condition);
                self.body_lines(body, depth);
            }
            RuleKind::Reclaim {
                selector,
                value,
                condition,
            } => {
                let _ = write!(self.out, "(reclaim{span} {} ", id(selector));
                self.expr(value);
                self.out.push_str(" when ");
                self.expr(condition);
                self.out.push_str(")\n");
            }
            RuleKind::Error => {
                let _ = writeln!(self.out, "(error-rule{span})");
            }
        }
    }

    /// An entry inline, inside a record.
    fn inline_entry(&mut self, entry: &Entry) {
        self.entry_as(entry, Layout::Inline);
    }

    fn inline_body(&mut self, body: &Body) {
        let _ = write!(self.out, "{{{}", at(body.span));
        for entry in &body.entries {
            self.out.push(' ');
            self.inline_entry(entry);
        }
        self.out.push('}');
    }

    // INVARIANT: expression depth is bounded by the prepass (limits::MAX_EXPR_DEPTH).
    fn expr(&mut self, expr: &Expr) {
        let span = at(expr.span);
        match &expr.kind {
            ExprKind::Int(n) => {
                let _ = write!(self.out, "{n}{span}");
            }
            ExprKind::Decimal(n) => {
                let _ = write!(self.out, "{n}{span}");
            }
            ExprKind::Str(s) => {
                let _ = write!(self.out, "{s:?}{span}");
            }
            ExprKind::Bool(b) => {
                let _ = write!(self.out, "{b}{span}");
            }
            ExprKind::Quantity(q) => {
                let _ = write!(self.out, "{q}{span}");
            }
            ExprKind::Clock(c) => {
                let _ = write!(self.out, "{c}{span}");
            }
            ExprKind::Name(i) => {
                let _ = write!(self.out, "{}", id(i));
            }
            ExprKind::Member { base, field } => {
                let _ = write!(self.out, "(.{span} ");
                self.expr(base);
                let _ = write!(self.out, " {})", id(field));
            }
            ExprKind::Call { callee, args } => {
                let _ = write!(self.out, "(call{span} ");
                self.expr(callee);
                for a in args {
                    self.out.push(' ');
                    self.expr(a);
                }
                self.out.push(')');
            }
            ExprKind::List(items) => {
                let _ = write!(self.out, "(list{span}");
                for e in items {
                    self.out.push(' ');
                    self.expr(e);
                }
                self.out.push(')');
            }
            ExprKind::Map(entries) => {
                let _ = write!(self.out, "(map{span}");
                for e in entries {
                    let key = match &e.key {
                        MapKey::Name(i) => id(i),
                        MapKey::Str(s) => str_lit(s),
                    };
                    let _ = write!(self.out, " (:{} {key} ", at(e.span));
                    self.expr(&e.value);
                    self.out.push(')');
                }
                self.out.push(')');
            }
            ExprKind::Record { ctor, body } => {
                let _ = write!(self.out, "(record{span} {} ", id(ctor));
                self.inline_body(body);
                self.out.push(')');
            }
            ExprKind::Unary { op, operand } => {
                let op = match op {
                    UnaryOp::Not => "not",
                    UnaryOp::Neg => "neg",
                };
                let _ = write!(self.out, "({op}{span} ");
                self.expr(operand);
                self.out.push(')');
            }
            ExprKind::Binary { op, lhs, rhs } => {
                let _ = write!(self.out, "({}{span} ", op.as_str());
                self.expr(lhs);
                self.out.push(' ');
                self.expr(rhs);
                self.out.push(')');
            }
            ExprKind::Lambda { params, body } => {
                let params: Vec<String> = params.iter().map(id).collect();
                let _ = write!(self.out, "(lambda{span} ({}) ", params.join(" "));
                self.expr(body);
                self.out.push(')');
            }
            ExprKind::Error => {
                let _ = write!(self.out, "<error>{span}");
            }
        }
    }
}
