//! Generated inputs. Trees: for any tree the parser could produce, the printed text parses
//! back to the same tree (spans aside) and is already formatted; this checks parentheses
//! against the parser's precedence, string escapes, number forms, every rule and entry shape.
//! Text: printed trees with comments, blank lines and line breaks sprinkled between their
//! tokens must pass every property of [`check`]. Token soup: never a panic.

use super::check::check;
use berth_compiler::source::{FileId, Span};
use berth_compiler::syntax::ast::{
    BinaryOp, Body, CompareOp, ConstItem, Decl, DeclKind, Entry, EntryKind, Expr, ExprKind, Ident,
    Item, ItemKind, MapEntry, MapKey, PolicyItem, Rule, RuleKind, SourceFileAst, Spanned, StrLit,
    UnaryOp, UseItem, UseTree,
};
use berth_compiler::syntax::format::{format_file, format_parsed};
use berth_compiler::syntax::parser::Parsed;
use berth_compiler::syntax::token::{ClockTime, Num, Quantity, Unit};
use berth_compiler::syntax::{lex, parse_file};
use proptest::prelude::*;

/// Names that are neither keywords nor the contextual words that start items and rules.
const NAMES: &[&str] = &[
    "a", "b", "gpu", "cloud", "d", "x_1", "L4", "data", "kind", "ga",
];

fn span() -> Span {
    Span::default()
}

fn ident() -> impl Strategy<Value = Ident> {
    prop::sample::select(NAMES).prop_map(|n| Ident {
        name: n.to_string(),
        span: span(),
    })
}

fn expr(kind: ExprKind) -> Expr {
    Expr { kind, span: span() }
}

fn num() -> impl Strategy<Value = Num> {
    (any::<u64>(), 0u8..4).prop_map(|(mantissa, scale)| Num { mantissa, scale })
}

fn leaf() -> impl Strategy<Value = Expr> {
    prop_oneof![
        any::<u64>().prop_map(ExprKind::Int),
        num()
            .prop_filter("decimals have a point", |n| n.scale > 0)
            .prop_map(ExprKind::Decimal),
        any::<String>().prop_map(ExprKind::Str),
        any::<bool>().prop_map(ExprKind::Bool),
        (num(), prop::sample::select(Unit::ALL))
            .prop_map(|(value, unit)| ExprKind::Quantity(Quantity { value, unit })),
        (0u16..=1440).prop_map(|minutes| ExprKind::Clock(ClockTime { minutes })),
        ident().prop_map(ExprKind::Name),
    ]
    .prop_map(expr)
}

fn binary_op() -> impl Strategy<Value = BinaryOp> {
    prop::sample::select(vec![
        BinaryOp::Or,
        BinaryOp::And,
        BinaryOp::Compare(CompareOp::Eq),
        BinaryOp::Compare(CompareOp::Ne),
        BinaryOp::Compare(CompareOp::Lt),
        BinaryOp::Compare(CompareOp::Ge),
        BinaryOp::In,
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
    ])
}

fn compare_op() -> impl Strategy<Value = CompareOp> {
    prop::sample::select(vec![
        CompareOp::Eq,
        CompareOp::Ne,
        CompareOp::Lt,
        CompareOp::Le,
        CompareOp::Gt,
        CompareOp::Ge,
    ])
}

fn any_expr() -> BoxedStrategy<Expr> {
    leaf()
        .prop_recursive(4, 40, 4, |inner| {
            prop_oneof![
                (inner.clone(), ident()).prop_map(|(base, field)| ExprKind::Member {
                    base: Box::new(base),
                    field,
                }),
                (inner.clone(), prop::collection::vec(inner.clone(), 0..3)).prop_map(
                    |(callee, args)| ExprKind::Call {
                        callee: Box::new(callee),
                        args,
                    }
                ),
                prop::collection::vec(inner.clone(), 0..4).prop_map(ExprKind::List),
                prop::collection::vec((map_key(), inner.clone()), 0..3).prop_map(|entries| {
                    ExprKind::Map(
                        entries
                            .into_iter()
                            .map(|(key, value)| MapEntry {
                                key,
                                value,
                                span: span(),
                            })
                            .collect(),
                    )
                }),
                (ident(), prop::collection::vec(field(inner.clone()), 0..3)).prop_map(
                    |(ctor, entries)| ExprKind::Record {
                        ctor,
                        body: body(entries),
                    }
                ),
                (
                    prop::sample::select(vec![UnaryOp::Not, UnaryOp::Neg]),
                    inner.clone()
                )
                    .prop_map(|(op, operand)| ExprKind::Unary {
                        op,
                        operand: Box::new(operand),
                    }),
                (binary_op(), inner.clone(), inner.clone()).prop_map(|(op, lhs, rhs)| {
                    ExprKind::Binary {
                        op,
                        lhs: Box::new(lhs),
                        rhs: Box::new(rhs),
                    }
                }),
                (prop::collection::vec(ident(), 1..3), inner).prop_map(|(params, body)| {
                    ExprKind::Lambda {
                        params,
                        body: Box::new(body),
                    }
                }),
            ]
            .prop_map(expr)
        })
        .boxed()
}

fn map_key() -> impl Strategy<Value = MapKey> {
    prop_oneof![
        ident().prop_map(MapKey::Name),
        any::<String>().prop_map(|value| MapKey::Str(StrLit {
            value,
            span: span()
        })),
    ]
}

fn body(entries: Vec<Entry>) -> Body {
    Body {
        entries,
        span: span(),
    }
}

fn entry(kind: EntryKind) -> Entry {
    Entry {
        docs: Vec::new(),
        kind,
        span: span(),
    }
}

/// A field or a bound (what records and flat bodies hold).
fn field(value: BoxedStrategy<Expr>) -> impl Strategy<Value = Entry> {
    prop_oneof![
        (ident(), prop::option::of(ident()), value.clone())
            .prop_map(|(key, label, value)| EntryKind::Field { key, label, value }),
        (ident(), compare_op(), value).prop_map(|(key, op, value)| EntryKind::Bound {
            key,
            op,
            value
        }),
    ]
    .prop_map(entry)
}

fn any_body() -> impl Strategy<Value = Body> {
    let flat = prop::collection::vec(field(any_expr()), 0..4);
    flat.prop_recursive(2, 12, 3, |inner| {
        prop::collection::vec(
            prop_oneof![
                field(any_expr()),
                (ident(), prop::option::of(ident()), inner).prop_map(|(key, label, entries)| {
                    entry(EntryKind::Block {
                        key,
                        label,
                        body: body(entries),
                    })
                }),
            ],
            0..4,
        )
    })
    .prop_map(body)
}

fn str_lit() -> impl Strategy<Value = StrLit> {
    any::<String>().prop_map(|value| StrLit {
        value,
        span: span(),
    })
}

fn clock() -> impl Strategy<Value = Spanned<ClockTime>> {
    (0u16..=1440).prop_map(|minutes| Spanned {
        value: ClockTime { minutes },
        span: span(),
    })
}

fn selector() -> impl Strategy<Value = Ident> {
    prop::sample::select(vec!["class", "kind", "team"]).prop_map(|n| Ident {
        name: n.to_string(),
        span: span(),
    })
}

fn rule() -> impl Strategy<Value = Rule> {
    prop_oneof![
        (str_lit(), any_expr())
            .prop_map(|(reason, condition)| RuleKind::Deny { reason, condition }),
        (any_expr(), any_body()).prop_map(|(subject, body)| RuleKind::Entitle { subject, body }),
        (any_expr(), any_body()).prop_map(|(subject, body)| RuleKind::Quota { subject, body }),
        (ident(), any_expr(), clock(), clock(), str_lit()).prop_map(
            |(name, days, start, end, zone)| RuleKind::Window {
                name,
                days,
                start,
                end,
                zone,
            }
        ),
        (selector(), any_expr(), ident(), any_body()).prop_map(
            |(selector, value, window, body)| RuleKind::Limit {
                selector,
                value,
                window,
                body,
            }
        ),
        (any_expr(), any_body())
            .prop_map(|(condition, body)| RuleKind::Approval { condition, body }),
        (selector(), any_expr(), any_expr()).prop_map(|(selector, value, condition)| {
            RuleKind::Reclaim {
                selector,
                value,
                condition,
            }
        }),
    ]
    .prop_map(|kind| Rule {
        docs: Vec::new(),
        kind,
        span: span(),
    })
}

fn item() -> impl Strategy<Value = Item> {
    let decl_kind = prop::sample::select(vec![
        DeclKind::Model,
        DeclKind::Workload,
        DeclKind::Target,
        DeclKind::Placement,
    ]);
    let use_tree = prop_oneof![
        Just(UseTree::Single),
        prop::collection::vec(ident(), 1..4).prop_map(UseTree::Group),
        Just(UseTree::Glob(span())),
    ];
    prop_oneof![
        (prop::collection::vec(ident(), 1..4), use_tree)
            .prop_map(|(path, tree)| { ItemKind::Use(UseItem { path, tree }) }),
        (ident(), any_expr()).prop_map(|(name, value)| ItemKind::Const(ConstItem {
            name: Some(name),
            value,
        })),
        (decl_kind, ident(), any_body()).prop_map(|(kind, name, body)| ItemKind::Decl(Decl {
            kind,
            keyword_span: span(),
            name: Some(name),
            body,
        })),
        (ident(), prop::collection::vec(rule(), 0..4)).prop_map(|(name, rules)| {
            ItemKind::Policy(PolicyItem {
                keyword_span: span(),
                name: Some(name),
                rules,
                body_span: span(),
            })
        }),
    ]
    .prop_map(|kind| Item {
        docs: Vec::new(),
        kind,
        span: span(),
    })
}

/// The tree's debug dump with every span replaced by `_`.
fn shape(ast: &SourceFileAst) -> String {
    let dump = format!("{ast:?}");
    let mut out = String::with_capacity(dump.len());
    let mut rest = dump.as_str();
    while let Some(at) = rest.find("Span { file: ") {
        out.push_str(&rest[..at]);
        out.push('_');
        let end = rest[at..].find('}').map_or(rest.len(), |e| at + e + 1);
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// Generated files: `use` items first, as the formatter prints them.
fn file() -> impl Strategy<Value = SourceFileAst> {
    prop::collection::vec(item(), 0..4).prop_map(|mut items| {
        items.sort_by_key(|i| !matches!(i.kind, ItemKind::Use(_)));
        SourceFileAst {
            file: FileId(0),
            items,
            span: span(),
        }
    })
}

fn print(ast: SourceFileAst) -> String {
    let parsed = Parsed {
        ast,
        comments: Vec::new(),
        diagnostics: Vec::new(),
    };
    format_parsed("", &parsed)
}

/// What may be put before a token: mostly nothing, sometimes layout or a comment of any kind.
const GAPS: &[&str] = &[
    "",
    "",
    "",
    "",
    "",
    "",
    "",
    "",
    " ",
    "\n",
    "\n\n\n",
    "\t",
    " /* block */ ",
    "/* a /* nested */ block */",
    " // line\n",
    "\n// own line\n",
    "\n\n// after a blank\n\n",
    "\n/// doc\n",
    "/* multi\n   line */ ",
];

/// `text` with `gaps[i]` inserted before its `i`-th token.
fn sprinkle(text: &str, gaps: &[&str]) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    let mut copied = 0;
    for ((_, span), gap) in lex(FileId(0), text).tokens.iter().zip(gaps) {
        out.push_str(&text[copied..span.start as usize]);
        out.push_str(gap);
        copied = span.start as usize;
    }
    out.push_str(&text[copied..]);
    out
}

/// Tokens and comments in any order: the formatter must not panic on any tree.
const SOUP: &[&str] = &[
    "model", "m", "{", "}", "a", "=", "1", "16GiB", "\"s\"", "[", "]", "(", ")", ",", ";", ".",
    ":", "->", "and", "not", "<=", "==", "+", "policy", "deny", "when", "window", "08:00", "..",
    "in", "use", "*", "const", "// c\n", "/* c */", "/// d\n", "\n", " ",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn printed_trees_parse_back_unchanged(ast in file()) {
        let want = shape(&ast);
        let printed = print(ast);
        let reparsed = parse_file(FileId(0), &printed);
        prop_assert!(
            reparsed.diagnostics.is_empty(),
            "printed text has errors: {:#?}\n{printed}",
            reparsed.diagnostics
        );
        prop_assert_eq!(shape(&reparsed.ast), want, "printed:\n{}", printed);
        prop_assert_eq!(format_file(&printed).ok(), Some(printed.clone()));
    }

    #[test]
    fn comments_between_any_tokens_are_kept(
        ast in file(),
        gaps in prop::collection::vec(prop::sample::select(GAPS), 400),
    ) {
        let text = sprinkle(&print(ast), &gaps);
        // A line break can end an expression early where the grammar looks at lines; such
        // text may not parse, and is refused rather than formatted.
        if format_file(&text).is_ok()
            && let Err(failure) = check(&text)
        {
            prop_assert!(false, "{}\n--- input ---\n{}", failure, text);
        }
    }

    #[test]
    fn any_token_soup_formats_without_panicking(
        words in prop::collection::vec(prop::sample::select(SOUP), 0..60),
    ) {
        let text = words.join(" ");
        let parsed = parse_file(FileId(0), &text);
        let _ = format_parsed(&text, &parsed);
        if format_file(&text).is_ok()
            && let Err(failure) = check(&text)
        {
            prop_assert!(false, "{}\n--- input ---\n{}", failure, text);
        }
    }
}
