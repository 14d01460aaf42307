//! Property tests of the parser: on any input, arbitrary text or arbitrary sequences of real
//! tokens, `parse_file` returns (no panic, no stack overflow) and every span it produces, in
//! the tree and in the diagnostics, lies inside the input on character boundaries.

use berth_compiler::source::{FileId, Span};
use berth_compiler::syntax::ast::{
    Body, Entry, EntryKind, Expr, ExprKind, ItemKind, MapKey, Rule, RuleKind, SourceFileAst,
    UseTree,
};
use berth_compiler::syntax::parse_file;
use proptest::prelude::*;

/// Every span in the tree.
fn spans(ast: &SourceFileAst) -> Vec<Span> {
    let mut out = vec![ast.span];
    for item in &ast.items {
        out.push(item.span);
        match &item.kind {
            ItemKind::Use(u) => {
                out.extend(u.path.iter().map(|i| i.span));
                match &u.tree {
                    UseTree::Single => {}
                    UseTree::Group(g) => out.extend(g.iter().map(|i| i.span)),
                    UseTree::Glob(s) => out.push(*s),
                }
            }
            ItemKind::Const(c) => {
                out.extend(c.name.iter().map(|i| i.span));
                expr(&c.value, &mut out);
            }
            ItemKind::Decl(d) => {
                out.push(d.keyword_span);
                out.extend(d.name.iter().map(|i| i.span));
                body(&d.body, &mut out);
            }
            ItemKind::Policy(p) => {
                out.push(p.keyword_span);
                out.push(p.body_span);
                out.extend(p.name.iter().map(|i| i.span));
                for r in &p.rules {
                    rule(r, &mut out);
                }
            }
            ItemKind::Error => {}
        }
    }
    out
}

fn body(b: &Body, out: &mut Vec<Span>) {
    out.push(b.span);
    for e in &b.entries {
        entry(e, out);
    }
}

fn entry(e: &Entry, out: &mut Vec<Span>) {
    out.push(e.span);
    match &e.kind {
        EntryKind::Field { key, label, value } => {
            out.push(key.span);
            out.extend(label.iter().map(|l| l.span));
            expr(value, out);
        }
        EntryKind::Block {
            key,
            label,
            body: b,
        } => {
            out.push(key.span);
            out.extend(label.iter().map(|l| l.span));
            body(b, out);
        }
        EntryKind::Bound { key, value, .. } => {
            out.push(key.span);
            expr(value, out);
        }
        EntryKind::Error => {}
    }
}

fn rule(r: &Rule, out: &mut Vec<Span>) {
    out.push(r.span);
    match &r.kind {
        RuleKind::Deny { reason, condition } => {
            out.push(reason.span);
            expr(condition, out);
        }
        RuleKind::Entitle { subject, body: b } | RuleKind::Quota { subject, body: b } => {
            expr(subject, out);
            body(b, out);
        }
        RuleKind::Window {
            name,
            days,
            start,
            end,
            zone,
        } => {
            out.extend([name.span, start.span, end.span, zone.span]);
            expr(days, out);
        }
        RuleKind::Limit {
            selector,
            value,
            window,
            body: b,
        } => {
            out.extend([selector.span, window.span]);
            expr(value, out);
            body(b, out);
        }
        RuleKind::Approval { condition, body: b } => {
            expr(condition, out);
            body(b, out);
        }
        RuleKind::Reclaim {
            selector,
            value,
            condition,
        } => {
            out.push(selector.span);
            expr(value, out);
            expr(condition, out);
        }
        RuleKind::Error => {}
    }
}

fn expr(e: &Expr, out: &mut Vec<Span>) {
    out.push(e.span);
    match &e.kind {
        ExprKind::Name(i) => out.push(i.span),
        ExprKind::Member { base, field } => {
            out.push(field.span);
            expr(base, out);
        }
        ExprKind::Call { callee, args } => {
            expr(callee, out);
            args.iter().for_each(|a| expr(a, out));
        }
        ExprKind::List(items) => items.iter().for_each(|a| expr(a, out)),
        ExprKind::Map(entries) => {
            for m in entries {
                out.push(m.span);
                out.push(match &m.key {
                    MapKey::Name(i) => i.span,
                    MapKey::Str(s) => s.span,
                });
                expr(&m.value, out);
            }
        }
        ExprKind::Record { ctor, body: b } => {
            out.push(ctor.span);
            body(b, out);
        }
        ExprKind::Unary { operand, .. } => expr(operand, out),
        ExprKind::Binary { lhs, rhs, .. } => {
            expr(lhs, out);
            expr(rhs, out);
        }
        ExprKind::Lambda { params, body: b } => {
            out.extend(params.iter().map(|p| p.span));
            expr(b, out);
        }
        ExprKind::Int(_)
        | ExprKind::Decimal(_)
        | ExprKind::Str(_)
        | ExprKind::Bool(_)
        | ExprKind::Quantity(_)
        | ExprKind::Clock(_)
        | ExprKind::Error => {}
    }
}

/// Parses `text` and checks every span.
fn check_spans(text: &str) {
    let parsed = parse_file(FileId(3), text);
    let mut all = spans(&parsed.ast);
    for d in &parsed.diagnostics {
        all.push(d.primary.span);
        all.extend(d.labels.iter().map(|l| l.span));
    }
    all.extend(parsed.comments.iter().map(|c| c.span));
    for s in all {
        assert_eq!(s.file, FileId(3), "span {s:?} has the wrong file");
        assert!(s.start <= s.end, "span {s:?} is reversed");
        assert!(s.end as usize <= text.len(), "span {s:?} is past the end");
        assert!(
            text.is_char_boundary(s.start as usize) && text.is_char_boundary(s.end as usize),
            "span {s:?} splits a character"
        );
    }
}

/// Token texts of the language, valid and not, to build token soups from.
const VOCABULARY: &[&str] = &[
    "use",
    "const",
    "model",
    "workload",
    "target",
    "placement",
    "policy",
    "deny",
    "entitle",
    "quota",
    "window",
    "limit",
    "approval",
    "reclaim",
    "when",
    "during",
    "in",
    "and",
    "or",
    "not",
    "true",
    "false",
    "x",
    "gpu",
    "std",
    "d",
    "{",
    "}",
    "[",
    "]",
    "(",
    ")",
    ",",
    ":",
    ";",
    ".",
    "..",
    "=",
    "==",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "->",
    "+",
    "-",
    "*",
    "/",
    "1",
    "0.90",
    "16GiB",
    "20ms",
    "08:00",
    "\"s\"",
    "\"é\"",
    "///doc\n",
    "// c\n",
    "/*",
    "*/",
    "$",
    "é",
    "\n",
    "\"open",
    "1__0",
    "16gib",
    "25:00",
];

fn token_soup() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(VOCABULARY), 0..120).prop_map(|toks| toks.join(" "))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
        check_spans(&text);
    }

    #[test]
    fn arbitrary_tokens_never_panic(text in token_soup()) {
        check_spans(&text);
    }

    /// A valid spec with one token replaced: still no panic, and spans stay sane.
    #[test]
    fn mutated_spec_never_panics(at in 0usize..2000, replacement in prop::sample::select(VOCABULARY)) {
        let spec = berth_compiler::testing::specs::spec(60);
        let mut cut = at.min(spec.len());
        while !spec.is_char_boundary(cut) {
            cut -= 1;
        }
        let end = spec[cut..].find(' ').map_or(spec.len(), |i| cut + i);
        let text = format!("{}{}{}", &spec[..cut], replacement, &spec[end..]);
        check_spans(&text);
    }
}

#[test]
fn deep_nesting_is_a_diagnostic_not_a_crash() {
    for open in ["[", "(", "{", "x = {", "a = k {"] {
        let text = format!("const a = {}", open.repeat(100_000));
        let parsed = parse_file(FileId(0), &text);
        assert!(
            parsed
                .diagnostics
                .iter()
                .any(|d| d.code.as_str() == "E0190"),
            "{open}: {:?}",
            parsed.diagnostics.first()
        );
        check_spans(&text);
    }
    for op in ["not ", "-", "a.", "1 + ", "a -> "] {
        let text = format!("const a = {}1", op.repeat(100_000));
        let parsed = parse_file(FileId(0), &text);
        assert!(
            parsed
                .diagnostics
                .iter()
                .any(|d| d.code.as_str() == "E0190"),
            "{op}: {:?}",
            parsed.diagnostics.first()
        );
        check_spans(&text);
    }
}

#[test]
fn oversized_file_is_one_diagnostic_and_an_empty_tree() {
    let text = "// padding\n".repeat(berth_compiler::syntax::limits::MAX_FILE_BYTES / 11 + 1);
    let parsed = parse_file(FileId(0), &text);
    let codes: Vec<&str> = parsed.diagnostics.iter().map(|d| d.code.as_str()).collect();
    assert_eq!(codes, ["E0191"]);
    assert!(parsed.ast.items.is_empty());
}

#[test]
fn too_many_tokens_is_one_diagnostic() {
    let text = format!(
        "const many = [{}]",
        "1,".repeat(berth_compiler::syntax::limits::MAX_TOKENS / 2 + 1)
    );
    let parsed = parse_file(FileId(0), &text);
    let codes: Vec<&str> = parsed.diagnostics.iter().map(|d| d.code.as_str()).collect();
    assert_eq!(codes, ["E0192"]);
    assert!(parsed.ast.items.is_empty());
}
