//! The parser: tokens to syntax tree, with error recovery. Never fails.
//!
//! Pipeline of [`parse_file`]: input limits → lexing → nesting limits and delimiter matching
//! ([`super::prepass`]) → the chumsky grammar below over the token slice → conversion of
//! chumsky's errors into [`ParseError`]s → doc comments attached to items, entries and rules
//! ([`super::docs`]).
//!
//! Recovery works at four levels, each producing a hole in the tree and exactly one error:
//! - item: tokens that form no item are skipped up to the next item keyword (`ItemKind::Error`);
//! - entry and rule: a broken entry is skipped up to the next thing that looks like an entry
//!   (`key =`, `key {`, `key label =`, …), a `}` or an item keyword (`EntryKind::Error`);
//! - block end: a body that meets an item keyword or the end of the file before its `}` is
//!   closed there (the error names the block and points at its `{`);
//! - delimited expressions: a broken `[…]`, `(…)` or `{…}` becomes `ExprKind::Error`.
//!
//! Skipping always jumps over whole balanced groups, using the delimiter matching from the
//! prepass, so one mistake never turns into a cascade.

// INVARIANT: `tokens[MAX_TOKENS]` is read only when there are more than `MAX_TOKENS` tokens.
#![allow(clippy::indexing_slicing)]

use super::ast::{
    BinaryOp, Body, CompareOp, ConstItem, Decl, DeclKind, Entry, EntryKind, Expr, ExprKind, Ident,
    Item, ItemKind, MapEntry, MapKey, PolicyItem, Rule, RuleKind, SourceFileAst, Spanned, StrLit,
    UnaryOp, UseItem, UseTree,
};
use super::lexer::{Comment, LexErrorKind};
use super::limits::{MAX_FILE_BYTES, MAX_TOKENS};
use super::parse_error::{Custom, PErr, ParseError, label};
use super::prepass::{self, Delimiters};
use super::token::Token;
use crate::diagnostics::{self, Diagnostic};
use crate::source::{FileId, Span};
use chumsky::DefaultExpected;
use chumsky::error::{EmptyErr, Rich};
use chumsky::input::{Input as _, InputRef, MappedInput};
use chumsky::label::LabelError;
use chumsky::pratt::{infix, left, postfix, prefix};
use chumsky::prelude::*;
use chumsky::recovery::{nested_delimiters, via_parser};
use chumsky::util::MaybeRef;

/// The result of parsing one file: always a tree, plus the comments (trivia, for the
/// formatter and doc attachment) and every lexical and syntax diagnostic.
#[derive(Clone, Debug)]
pub struct Parsed {
    pub ast: SourceFileAst,
    pub comments: Vec<Comment>,
    pub diagnostics: Vec<Diagnostic>,
}

/// Lexes and parses one file.
pub fn parse_file(file: FileId, text: &str) -> Parsed {
    let file_span = Span::new(file, 0, text.len().min(u32::MAX as usize) as u32);
    let empty = |diagnostics| Parsed {
        ast: SourceFileAst {
            file,
            items: Vec::new(),
            span: file_span,
        },
        comments: Vec::new(),
        diagnostics,
    };
    if text.len() > MAX_FILE_BYTES {
        let err = ParseError::FileTooLarge {
            span: Span::new(file, 0, 0),
            size: text.len(),
        };
        return empty(vec![err.diagnostic()]);
    }

    let lexed = super::lex(file, text);
    let mut diagnostics: Vec<Diagnostic> = lexed.errors.iter().map(|e| e.diagnostic()).collect();
    let mut tokens = lexed.tokens;
    if tokens.len() > MAX_TOKENS {
        let err = ParseError::TooManyTokens {
            span: tokens[MAX_TOKENS].1,
            count: tokens.len(),
        };
        diagnostics.push(err.diagnostic());
        return Parsed {
            comments: lexed.comments,
            ..empty(diagnostics)
        };
    }

    let mut errors = prepass::limit_nesting(&mut tokens);
    let delimiters = Delimiters::compute(&tokens);
    let eoi = file_span.end_point();
    let (items, raw_errors) = {
        let grammar = Grammar {
            text,
            tokens: &tokens,
            delimiters: &delimiters,
        };
        // Fast pass with zero-sized errors; only input with mistakes pays for `Rich` errors.
        let fast = file_parser::<EmptyErr>(grammar)
            .parse(tokens.as_slice().split_token_span(eoi))
            .into_output_errors();
        match fast {
            (Some(items), errs) if errs.is_empty() => (items, Vec::new()),
            _ => {
                let (items, raw_errors) = file_parser::<PErr<'_, '_>>(grammar)
                    .parse(tokens.as_slice().split_token_span(eoi))
                    .into_output_errors();
                (items.unwrap_or_default(), raw_errors)
            }
        }
    };
    let converter = super::parse_error::Converter::new(text, &tokens, &delimiters);
    errors.extend(converter.convert_all(raw_errors));
    // An unterminated block comment swallows the rest of the file, closing braces included:
    // what the parser then misses is a consequence, already reported by the lexer.
    if let Some(cut) = lexed
        .errors
        .iter()
        .find(|e| e.kind == LexErrorKind::UnterminatedComment)
    {
        errors.retain(|e| e.span().start < cut.span.start);
    }
    diagnostics.extend(errors.iter().map(ParseError::diagnostic));
    diagnostics::sort_and_dedup(&mut diagnostics);

    let mut ast = SourceFileAst {
        file,
        items,
        span: file_span,
    };
    super::docs::attach(&mut ast, text, &lexed.comments);
    Parsed {
        ast,
        comments: lexed.comments,
        diagnostics,
    }
}

impl chumsky::span::Span for Span {
    type Context = FileId;
    type Offset = u32;

    fn new(file: FileId, range: std::ops::Range<u32>) -> Self {
        // chumsky builds the span of an empty match from the next token's start to the
        // previous token's end; such a span becomes empty, right after the previous token.
        if range.start > range.end {
            return Span {
                file,
                start: range.end,
                end: range.end,
            };
        }
        Span {
            file,
            start: range.start,
            end: range.end,
        }
    }

    fn context(&self) -> FileId {
        self.file
    }

    fn start(&self) -> u32 {
        self.start
    }

    fn end(&self) -> u32 {
        self.end
    }
}

/// The parser's input: the token slice, split into tokens and spans.
type Tokens<'tok, 'src> = MappedInput<'tok, Token<'src>, Span, &'tok [(Token<'src>, Span)]>;
type Extra<Er> = extra::Err<Er>;

/// What the grammar needs of its error type: chumsky's `Rich` (for diagnostics), or the
/// zero-sized `EmptyErr` for the fast first pass over what is usually valid input (error
/// values cost nothing then, and the grammar behaves the same).
pub(crate) trait GrammarError<'tok, 'src: 'tok>:
    chumsky::error::Error<'tok, Tokens<'tok, 'src>>
    + LabelError<'tok, Tokens<'tok, 'src>, &'static str>
    + LabelError<'tok, Tokens<'tok, 'src>, DefaultExpected<'tok, Token<'src>>>
    + 'tok
{
    /// An error the grammar reports itself.
    fn custom(span: Span, custom: Custom) -> Self;

    /// The error of a lookahead or skipper that did not apply (never shown on its own).
    fn something(found: Option<MaybeRef<'tok, Token<'src>>>, span: Span) -> Self {
        <Self as LabelError<'tok, Tokens<'tok, 'src>, &'static str>>::expected_found(
            [label::SOMETHING],
            found,
            span,
        )
    }
}

impl<'tok, 'src: 'tok> GrammarError<'tok, 'src> for PErr<'tok, 'src> {
    fn custom(span: Span, custom: Custom) -> Self {
        Rich::custom(span, custom)
    }
}

impl<'tok, 'src: 'tok> GrammarError<'tok, 'src> for EmptyErr {
    fn custom(span: Span, _: Custom) -> Self {
        <Self as LabelError<'tok, Tokens<'tok, 'src>, &'static str>>::expected_found([], None, span)
    }
}

/// What the grammar's hand-written pieces (skipping, lookahead) need to see.
#[derive(Clone, Copy)]
struct Grammar<'tok, 'src> {
    text: &'tok str,
    tokens: &'tok [(Token<'src>, Span)],
    delimiters: &'tok Delimiters,
}

/// The contextual words that start items (they are ordinary names elsewhere).
const ITEM_WORDS: &[&str] = &["model", "workload", "target", "placement", "policy"];
/// The contextual words that start policy rules.
pub(crate) const RULE_WORDS: &[&str] = &[
    "deny", "entitle", "quota", "window", "limit", "approval", "reclaim",
];

/// Whether `w` is one of the contextual words that start items.
pub(crate) fn is_item_word(w: &str) -> bool {
    ITEM_WORDS.contains(&w)
}

fn is_compare(tok: &Token<'_>) -> bool {
    matches!(
        tok,
        Token::EqEq | Token::NotEq | Token::Lt | Token::Le | Token::Gt | Token::Ge
    )
}

impl<'tok, 'src: 'tok> Grammar<'tok, 'src> {
    fn tok(&self, i: usize) -> Option<&'tok Token<'src>> {
        self.tokens.get(i).map(|(t, _)| t)
    }

    /// An item starts at `i` at the top level: `use`, `const`, or an item word followed by a
    /// name or `{`.
    fn item_starts_at(&self, i: usize) -> bool {
        match self.tok(i) {
            Some(Token::Use | Token::Const) => true,
            Some(Token::Ident(w)) if ITEM_WORDS.contains(w) => {
                matches!(self.tok(i + 1), Some(Token::Ident(_) | Token::LBrace))
            }
            _ => false,
        }
    }

    /// Inside a block, an item starts only where an item word, a name and `{` follow each
    /// other (`target lyon {`): `model = x` and `target.class` are entries and names.
    fn nested_item_starts_at(&self, i: usize) -> bool {
        match self.tok(i) {
            Some(Token::Use | Token::Const) => true,
            Some(Token::Ident(w)) if ITEM_WORDS.contains(w) => {
                matches!(self.tok(i + 1), Some(Token::Ident(_)))
                    && matches!(self.tok(i + 2), Some(Token::LBrace))
            }
            _ => false,
        }
    }

    /// An entry starts at `i`: `key =`, `key {`, `key label =`, `key label {`, `key <= …`.
    fn entry_starts_at(&self, i: usize) -> bool {
        if !matches!(self.tok(i), Some(Token::Ident(_))) || self.nested_item_starts_at(i) {
            return false;
        }
        match self.tok(i + 1) {
            Some(Token::Assign | Token::LBrace) => true,
            Some(t) if is_compare(t) => true,
            Some(Token::Ident(_)) => {
                matches!(self.tok(i + 2), Some(Token::Assign | Token::LBrace))
            }
            _ => false,
        }
    }

    /// Whether token `i` is the first on its line.
    fn first_on_line(&self, i: usize) -> bool {
        let Some(prev) = i.checked_sub(1).and_then(|p| self.tokens.get(p)) else {
            return true;
        };
        let Some((_, span)) = self.tokens.get(i) else {
            return true;
        };
        self.text
            .get(prev.1.end as usize..span.start as usize)
            .is_some_and(|gap| gap.contains('\n'))
    }

    /// Where entry recovery resumes: an entry that starts a line, or a plain `key =`.
    fn resume_entry_at(&self, i: usize) -> bool {
        self.entry_starts_at(i)
            && (self.first_on_line(i) || matches!(self.tok(i + 1), Some(Token::Assign)))
    }

    /// A name at `i` is an operand, unless it is the key of the next entry (`key =`) or a
    /// policy rule word that starts a line and is followed by a name or string (`quota team(…)`,
    /// `deny "…"`): a name followed by a name is never an expression.
    fn name_operand_at(&self, i: usize) -> bool {
        match self.tok(i + 1) {
            // `key =` and lambdas; records are tried before names.
            Some(Token::Assign | Token::Arrow) => false,
            Some(Token::Ident(_) | Token::Str(_)) => {
                !(self.rule_starts_at(i) && self.first_on_line(i))
            }
            _ => true,
        }
    }

    /// A literal or name that is a whole expression: nothing after it continues the
    /// expression. Parsing it directly skips trying every operator (the common case).
    fn simple_operand_at(&self, i: usize) -> bool {
        let head = match self.tok(i) {
            Some(
                Token::Int(_)
                | Token::Decimal(_)
                | Token::Str(_)
                | Token::True
                | Token::False
                | Token::Quantity(_)
                | Token::Clock(_)
                | Token::Invalid,
            ) => true,
            Some(Token::Ident(_)) => self.name_operand_at(i),
            _ => false,
        };
        head && !matches!(
            self.tok(i + 1),
            Some(
                Token::Dot
                    | Token::LParen
                    | Token::LBrace
                    | Token::Arrow
                    | Token::Or
                    | Token::And
                    | Token::EqEq
                    | Token::NotEq
                    | Token::Lt
                    | Token::Le
                    | Token::Gt
                    | Token::Ge
                    | Token::In
                    | Token::Plus
                    | Token::Minus
                    | Token::Star
                    | Token::Slash
            )
        )
    }

    /// `d -> …` or `(a, b) -> …`.
    fn lambda_starts_at(&self, i: usize) -> bool {
        match self.tok(i) {
            Some(Token::Ident(_)) => matches!(self.tok(i + 1), Some(Token::Arrow)),
            Some(Token::LParen) => self
                .delimiters
                .partner(i)
                .is_some_and(|close| matches!(self.tok(close + 1), Some(Token::Arrow))),
            _ => false,
        }
    }

    fn rule_starts_at(&self, i: usize) -> bool {
        matches!(self.tok(i), Some(Token::Ident(w)) if RULE_WORDS.contains(w))
    }

    /// After `=`: the value is missing when what follows ends the entry or starts the next.
    fn value_missing_at(&self, i: usize) -> bool {
        match self.tok(i) {
            None | Some(Token::RBrace) => true,
            // Only `key =`: after `format = onnx`, `onnx gpu_memory = 12GiB` is not a
            // labelled entry but a value and the next entry.
            Some(Token::Ident(_)) => {
                matches!(self.tok(i + 1), Some(Token::Assign)) || self.nested_item_starts_at(i)
            }
            Some(Token::Use | Token::Const) => true,
            _ => false,
        }
    }

    /// Skips at least one token, whole groups at a time, up to (not including) a token where
    /// `stop_at` holds, a `}` that closes an enclosing block, or the end. Fails without
    /// consuming where nothing can be skipped: at the end, at a `}` that closes an enclosing
    /// block, and (inside blocks) at an item that starts there.
    fn skipper<Er: GrammarError<'tok, 'src>>(
        self,
        level: Level,
        stop_at: impl Fn(&Self, usize) -> bool + Clone + 'tok,
    ) -> impl Parser<'tok, Tokens<'tok, 'src>, Span, Extra<Er>> + Clone + 'tok {
        custom(
            move |inp: &mut InputRef<'tok, '_, Tokens<'tok, 'src>, Extra<Er>>| {
                let before = inp.cursor();
                let start: usize = inp.cursor().inner().0;
                let mut i = start;
                while let Some(tok) = self.tok(i) {
                    let closes_block =
                        matches!(tok, Token::RBrace) && self.delimiters.partner(i).is_some();
                    let stop = if i == start {
                        level == Level::Block && (closes_block || self.nested_item_starts_at(i))
                    } else {
                        stop_at(&self, i) || (level == Level::Block && matches!(tok, Token::RBrace))
                    };
                    if stop {
                        break;
                    }
                    let next = match (prepass::opener(tok), self.delimiters.partner(i)) {
                        (Some(_), Some(close)) => close + 1,
                        _ => i + 1,
                    };
                    while i < next {
                        inp.skip();
                        i += 1;
                    }
                }
                if i == start {
                    let found = inp.peek_maybe();
                    let span = inp.span_since(&before);
                    return Err(Er::something(found, span));
                }
                Ok(inp.span_since(&before))
            },
        )
    }

    /// The expression a lone literal or name at `i` stands for.
    fn simple_expr<Er: GrammarError<'tok, 'src>>(&self, i: usize) -> Option<Expr> {
        let (tok, span) = self.tokens.get(i)?;
        let kind = match tok {
            Token::Int(n) => ExprKind::Int(*n),
            Token::Decimal(d) => ExprKind::Decimal(*d),
            Token::Str(s) => ExprKind::Str(s.clone()),
            Token::True => ExprKind::Bool(true),
            Token::False => ExprKind::Bool(false),
            Token::Quantity(q) => ExprKind::Quantity(*q),
            Token::Clock(c) => ExprKind::Clock(*c),
            Token::Invalid => ExprKind::Error,
            Token::Ident(name) => ExprKind::Name(Ident {
                name: (*name).to_string(),
                span: *span,
            }),
            _ => return None,
        };
        Some(Expr { kind, span: *span })
    }

    /// A lone literal or name (see [`Self::simple_operand_at`]), without going through the
    /// operator machinery. Gives the same tree as the general expression parser.
    fn simple_operand<Er: GrammarError<'tok, 'src>>(
        self,
    ) -> impl Parser<'tok, Tokens<'tok, 'src>, Expr, Extra<Er>> + Clone + 'tok {
        custom(
            move |inp: &mut InputRef<'tok, '_, Tokens<'tok, 'src>, Extra<Er>>| {
                let i: usize = inp.cursor().inner().0;
                match self
                    .simple_operand_at(i)
                    .then(|| self.simple_expr::<Er>(i))
                    .flatten()
                {
                    Some(expr) => {
                        inp.skip();
                        Ok(expr)
                    }
                    None => Err(Er::something(None, self.eoi_or_span(i))),
                }
            },
        )
    }

    /// `key = value` where the value is a lone literal or name: by far the most common entry,
    /// recognised in one step. Gives the same tree as the general entry parser.
    fn simple_field<Er: GrammarError<'tok, 'src>>(
        self,
    ) -> impl Parser<'tok, Tokens<'tok, 'src>, Entry, Extra<Er>> + Clone + 'tok {
        custom(
            move |inp: &mut InputRef<'tok, '_, Tokens<'tok, 'src>, Extra<Er>>| {
                let i: usize = inp.cursor().inner().0;
                let applies = matches!(self.tok(i + 1), Some(Token::Assign))
                    && !self.nested_item_starts_at(i)
                    && !self.value_missing_at(i + 2)
                    && self.simple_operand_at(i + 2);
                let parts = match (self.tokens.get(i), applies) {
                    (Some((Token::Ident(key), key_span)), true) => self
                        .simple_expr::<Er>(i + 2)
                        .map(|value| (key, *key_span, value)),
                    _ => None,
                };
                let Some((key, key_span, value)) = parts else {
                    return Err(Er::something(None, self.eoi_or_span(i)));
                };
                inp.skip();
                inp.skip();
                inp.skip();
                Ok(Entry {
                    docs: Vec::new(),
                    span: key_span.to(value.span),
                    kind: EntryKind::Field {
                        key: Ident {
                            name: (*key).to_string(),
                            span: key_span,
                        },
                        label: None,
                        value,
                    },
                })
            },
        )
    }

    /// The span of token `i`, or an empty span at the end of the last token.
    fn eoi_or_span(&self, i: usize) -> Span {
        match (self.tokens.get(i), self.tokens.last()) {
            (Some((_, s)), _) => *s,
            (None, Some((_, s))) => s.end_point(),
            (None, None) => Span::default(),
        }
    }

    /// Succeeds, consuming nothing, where `pred` holds at the next token.
    fn peek_if<Er: GrammarError<'tok, 'src>>(
        self,
        pred: impl Fn(&Self, usize) -> bool + Clone + 'tok,
    ) -> impl Parser<'tok, Tokens<'tok, 'src>, (), Extra<Er>> + Clone + 'tok {
        custom(
            move |inp: &mut InputRef<'tok, '_, Tokens<'tok, 'src>, Extra<Er>>| {
                let i: usize = inp.cursor().inner().0;
                if pred(&self, i) {
                    Ok(())
                } else {
                    let before = inp.cursor();
                    let found = inp.peek_maybe();
                    inp.skip();
                    let span = inp.span_since(&before);
                    Err(Er::something(found, span))
                }
            },
        )
    }
}

/// Where a skipper runs: between items, or inside a block (entries, rules).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Level {
    Top,
    Block,
}

/// A parser over our tokens, boxed where types would otherwise explode.
type Boxed<'tok, 'src, O, Er> = chumsky::Boxed<'tok, 'tok, Tokens<'tok, 'src>, O, Extra<Er>>;

fn ident<'tok, 'src: 'tok, Er: GrammarError<'tok, 'src>>()
-> impl Parser<'tok, Tokens<'tok, 'src>, Ident, Extra<Er>> + Clone {
    select_ref! { Token::Ident(s) = e => Ident { name: (*s).to_string(), span: e.span() } }
}

/// A contextual keyword (`workload`, `deny`, …): an identifier with that text.
fn word<'tok, 'src: 'tok, Er: GrammarError<'tok, 'src>>(
    w: &'static str,
) -> impl Parser<'tok, Tokens<'tok, 'src>, Span, Extra<Er>> + Clone {
    select_ref! { Token::Ident(s) = e if *s == w => e.span() }.labelled(w)
}

fn str_lit<'tok, 'src: 'tok, Er: GrammarError<'tok, 'src>>()
-> impl Parser<'tok, Tokens<'tok, 'src>, StrLit, Extra<Er>> + Clone {
    select_ref! { Token::Str(s) = e => StrLit { value: s.clone(), span: e.span() } }
        .labelled(label::STRING)
}

fn hole(span: Span) -> Expr {
    Expr {
        kind: ExprKind::Error,
        span,
    }
}

fn binary(op: BinaryOp, lhs: Expr, rhs: Expr, span: Span) -> Expr {
    Expr {
        kind: ExprKind::Binary {
            op,
            lhs: Box::new(lhs),
            rhs: Box::new(rhs),
        },
        span,
    }
}

/// A comparison written without parentheses (`a < b`, not `(a < b)`): a parenthesised
/// expression's span starts at its `(`, before its left operand.
fn is_bare_comparison(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Binary {
            op: BinaryOp::Compare(_) | BinaryOp::In,
            lhs,
            ..
        } => lhs.span.start == e.span.start,
        _ => false,
    }
}

/// The operators around `atom`, lowest precedence first: `or`, `and`, `not`, comparisons and
/// `in` (not associative), `+ -`, `* /`, unary `-`, then member access and calls.
fn with_operators<'tok, 'src: 'tok, Er: GrammarError<'tok, 'src>>(
    atom: Boxed<'tok, 'src, Expr, Er>,
    args: Boxed<'tok, 'src, Vec<Expr>, Er>,
) -> impl Parser<'tok, Tokens<'tok, 'src>, Expr, Extra<Er>> + Clone {
    let compare = select_ref! {
        Token::EqEq => BinaryOp::Compare(CompareOp::Eq),
        Token::NotEq => BinaryOp::Compare(CompareOp::Ne),
        Token::Lt => BinaryOp::Compare(CompareOp::Lt),
        Token::Le => BinaryOp::Compare(CompareOp::Le),
        Token::Gt => BinaryOp::Compare(CompareOp::Gt),
        Token::Ge => BinaryOp::Compare(CompareOp::Ge),
        Token::In => BinaryOp::In,
    }
    .labelled(label::OPERATOR);
    let sum = select_ref! { Token::Plus => BinaryOp::Add, Token::Minus => BinaryOp::Sub }
        .labelled(label::OPERATOR);
    let product = select_ref! { Token::Star => BinaryOp::Mul, Token::Slash => BinaryOp::Div }
        .labelled(label::OPERATOR);
    let member = just(Token::Dot).ignore_then(ident().labelled(label::FIELD_NAME));
    let fold =
        |l: Expr,
         op: BinaryOp,
         r: Expr,
         e: &mut chumsky::input::MapExtra<'tok, '_, Tokens<'tok, 'src>, Extra<Er>>| {
            binary(op, l, r, e.span())
        };
    atom.pratt(
        (
            infix(left(1), just(Token::Or).to(BinaryOp::Or), fold),
            infix(left(2), just(Token::And).to(BinaryOp::And), fold),
            prefix(3, just(Token::Not), |_, operand: Expr, e| Expr {
                kind: ExprKind::Unary {
                    op: UnaryOp::Not,
                    operand: Box::new(operand),
                },
                span: e.span(),
            }),
            infix(
                left(4),
                compare,
                |l: Expr,
                 op: BinaryOp,
                 r: Expr,
                 e: &mut chumsky::input::MapExtra<
                    'tok,
                    '_,
                    Tokens<'tok, 'src>,
                    Extra<Er>,
                >| {
                    let span = e.span();
                    if is_bare_comparison(&l) {
                        e.emit(Er::custom(span, Custom::ChainedComparison));
                    }
                    binary(op, l, r, span)
                },
            ),
            infix(left(5), sum, fold),
            infix(left(6), product, fold),
            prefix(7, just(Token::Minus), |_, operand: Expr, e| Expr {
                kind: ExprKind::Unary {
                    op: UnaryOp::Neg,
                    operand: Box::new(operand),
                },
                span: e.span(),
            }),
            postfix(8, member, |base: Expr, field: Ident, e| Expr {
                kind: ExprKind::Member {
                    base: Box::new(base),
                    field,
                },
                span: e.span(),
            }),
            postfix(8, args, |callee: Expr, args: Vec<Expr>, e| Expr {
                kind: ExprKind::Call {
                    callee: Box::new(callee),
                    args,
                },
                span: e.span(),
            }),
        ),
    )
}

/// A handle on the (recursive) expression parser.
type ExprParser<'tok, 'src, Er> =
    Recursive<chumsky::recursive::Direct<'tok, 'tok, Tokens<'tok, 'src>, Expr, Extra<Er>>>;

/// The atoms of expressions, given the expression parser for what they contain: every atom
/// but records (which need blocks), the argument list of calls, and the fast path for a lone
/// literal or name.
struct Atoms<'tok, 'src, Er: GrammarError<'tok, 'src>> {
    common: Boxed<'tok, 'src, Expr, Er>,
    args: Boxed<'tok, 'src, Vec<Expr>, Er>,
    simple: Boxed<'tok, 'src, Expr, Er>,
}

fn atoms<'tok, 'src: 'tok, Er: GrammarError<'tok, 'src>>(
    g: Grammar<'tok, 'src>,
    expr: ExprParser<'tok, 'src, Er>,
) -> Atoms<'tok, 'src, Er> {
    let simple = g.simple_operand().boxed();
    // Elements, arguments and map values: most are lone literals or names.
    let element = simple.clone().or(expr.clone()).boxed();
    let literal = select_ref! {
        Token::Int(n) => ExprKind::Int(*n),
        Token::Decimal(d) => ExprKind::Decimal(*d),
        Token::Str(s) => ExprKind::Str(s.clone()),
        Token::True => ExprKind::Bool(true),
        Token::False => ExprKind::Bool(false),
        Token::Quantity(q) => ExprKind::Quantity(*q),
        Token::Clock(c) => ExprKind::Clock(*c),
        // The lexer reported it; it stands for a value.
        Token::Invalid => ExprKind::Error,
    }
    .map_with(|kind, e| Expr {
        kind,
        span: e.span(),
    });

    // A name directly followed by `=` is the key of the next entry, never an operand.
    let name = g
        .peek_if(|g, i| g.name_operand_at(i))
        .ignore_then(ident())
        .map(|id| Expr {
            span: id.span,
            kind: ExprKind::Name(id),
        });

    let delimited_recovery = |open: Token<'src>, close: Token<'src>| {
        let others: [(Token<'src>, Token<'src>); 2] = match open {
            Token::LBracket => [
                (Token::LParen, Token::RParen),
                (Token::LBrace, Token::RBrace),
            ],
            Token::LParen => [
                (Token::LBracket, Token::RBracket),
                (Token::LBrace, Token::RBrace),
            ],
            _ => [
                (Token::LParen, Token::RParen),
                (Token::LBracket, Token::RBracket),
            ],
        };
        via_parser(nested_delimiters(open, close, others, hole))
    };

    let list = comma_separated(
        element.clone(),
        (Token::LBracket, Token::RBracket),
        label::LIST,
        ExprKind::List,
    )
    .recover_with(delimited_recovery(Token::LBracket, Token::RBracket))
    .boxed();

    let map_key = ident()
        .map(MapKey::Name)
        .or(str_lit().map(MapKey::Str))
        .labelled(label::MAP_KEY);
    let map_entry = map_key
        .then_ignore(just(Token::Colon))
        .then(element.clone())
        .map_with(|(key, value), e| MapEntry {
            key,
            value,
            span: e.span(),
        });
    let map = comma_separated(
        map_entry,
        (Token::LBrace, Token::RBrace),
        label::MAP,
        ExprKind::Map,
    )
    .recover_with(delimited_recovery(Token::LBrace, Token::RBrace))
    .boxed();

    let lambda = g
        .peek_if(|g, i| g.lambda_starts_at(i))
        .ignore_then(
            ident().map(|p| vec![p]).or(ident()
                .separated_by(just(Token::Comma))
                .allow_trailing()
                .collect::<Vec<_>>()
                .delimited_by(just(Token::LParen), just(Token::RParen))),
        )
        .then_ignore(just(Token::Arrow))
        .then(expr.clone())
        .map_with(|(params, body), e| Expr {
            kind: ExprKind::Lambda {
                params,
                body: Box::new(body),
            },
            span: e.span(),
        });

    let parens = expr
        .clone()
        .delimited_by(just(Token::LParen), just(Token::RParen))
        .map_with(|inner: Expr, e| Expr {
            kind: inner.kind,
            span: e.span(),
        })
        .labelled(label::PARENS)
        .as_context()
        .recover_with(delimited_recovery(Token::LParen, Token::RParen));

    let args = element
        .clone()
        .separated_by(just(Token::Comma))
        .allow_trailing()
        .collect::<Vec<_>>()
        .delimited_by(just(Token::LParen), just(Token::RParen))
        .labelled(label::ARGS)
        .as_context()
        .recover_with(via_parser(nested_delimiters(
            Token::LParen,
            Token::RParen,
            [
                (Token::LBracket, Token::RBracket),
                (Token::LBrace, Token::RBrace),
            ],
            |span| vec![hole(span)],
        )))
        .boxed();

    let common = choice((name, literal, list, map, lambda, parens))
        .labelled(label::EXPRESSION)
        .boxed();
    Atoms {
        common,
        args,
        simple,
    }
}

/// Expressions. Records (`kubernetes { … }`) contain blocks, which contain expressions.
// INVARIANT: every recursive parser is built with `recursive(|self_| …)`, whose handle on
// itself is weak: strong `Rc` cycles between parsers would leak the grammar on every parse.
fn expression<'tok, 'src: 'tok, Er: GrammarError<'tok, 'src>>(
    g: Grammar<'tok, 'src>,
) -> ExprParser<'tok, 'src, Er> {
    recursive(move |expr: ExprParser<'tok, 'src, Er>| {
        let Atoms {
            common,
            args,
            simple,
        } = atoms(g, expr.clone());
        let body = block(g, expr);
        let record = g
            .peek_if(|g, i| matches!(g.tok(i + 1), Some(Token::LBrace)))
            .ignore_then(ident())
            .then(body.clone())
            .map_with(|(ctor, body), e| Expr {
                kind: ExprKind::Record { ctor, body },
                span: e.span(),
            });

        let atom_full = record.or(common).boxed();
        simple.or(with_operators(atom_full, args))
    })
}

/// The value after `=`: an expression, or a reported hole where the next entry, a `}` or
/// the end follows directly.
fn field_value<'tok, 'src: 'tok, Er: GrammarError<'tok, 'src>>(
    g: Grammar<'tok, 'src>,
    expr: ExprParser<'tok, 'src, Er>,
) -> Boxed<'tok, 'src, Expr, Er> {
    g.peek_if(|g, i| g.value_missing_at(i))
        .validate(|(), e, emitter| {
            let at: Span = e.span();
            emitter.emit(Er::custom(at, Custom::MissingValue));
            hole(at)
        })
        .or(expr.clone())
        .boxed()
}

/// `open element, … close` (a trailing comma allowed) as the expression `kind(elements)`,
/// labelled `what` in errors.
fn comma_separated<'tok, 'src: 'tok, T: 'tok, Er: GrammarError<'tok, 'src>>(
    element: impl Parser<'tok, Tokens<'tok, 'src>, T, Extra<Er>> + Clone + 'tok,
    (open, close): (Token<'src>, Token<'src>),
    what: &'static str,
    kind: fn(Vec<T>) -> ExprKind,
) -> impl Parser<'tok, Tokens<'tok, 'src>, Expr, Extra<Er>> + Clone + 'tok {
    element
        .separated_by(just(Token::Comma))
        .allow_trailing()
        .collect::<Vec<_>>()
        .delimited_by(just(open), just(close))
        .map_with(move |elements, e| Expr {
            kind: kind(elements),
            span: e.span(),
        })
        .labelled(what)
        .as_context()
}

/// A block `{ entries }`, given the expression parser.
fn block<'tok, 'src: 'tok, Er: GrammarError<'tok, 'src>>(
    g: Grammar<'tok, 'src>,
    expr: ExprParser<'tok, 'src, Er>,
) -> impl Parser<'tok, Tokens<'tok, 'src>, Body, Extra<Er>> + Clone + 'tok {
    recursive(move |body| {
        let value = field_value(g, expr.clone());

        let compare_op = select_ref! {
            Token::EqEq => CompareOp::Eq,
            Token::NotEq => CompareOp::Ne,
            Token::Lt => CompareOp::Lt,
            Token::Le => CompareOp::Le,
            Token::Gt => CompareOp::Gt,
            Token::Ge => CompareOp::Ge,
        };

        enum Tail {
            Field(Option<Ident>, Expr),
            Block(Option<Ident>, Body),
            Bound(CompareOp, Expr),
        }
        enum LabelledTail {
            Value(Expr),
            Body(Body),
        }
        let labelled_tail = ident()
            .then(choice((
                just(Token::Assign)
                    .ignore_then(value.clone())
                    .map(LabelledTail::Value),
                body.clone().map(LabelledTail::Body),
            )))
            .map(|(label, tail)| match tail {
                LabelledTail::Value(v) => Tail::Field(Some(label), v),
                LabelledTail::Body(b) => Tail::Block(Some(label), b),
            });
        let entry_tail = choice((
            just(Token::Assign)
                .ignore_then(value.clone())
                .map(|v| Tail::Field(None, v)),
            body.clone().map(|b| Tail::Block(None, b)),
            compare_op
                .then(expr.clone())
                .map(|(op, v)| Tail::Bound(op, v)),
            labelled_tail,
        ))
        .labelled(label::ENTRY_TAIL);
        let general_entry = g
            .peek_if(|g, i| !g.nested_item_starts_at(i))
            .ignore_then(ident().labelled(label::ENTRY))
            .then(entry_tail)
            .map_with(|(key, tail), e| Entry {
                docs: Vec::new(),
                kind: match tail {
                    Tail::Field(label, value) => EntryKind::Field { key, label, value },
                    Tail::Block(label, body) => EntryKind::Block { key, label, body },
                    Tail::Bound(op, value) => EntryKind::Bound { key, op, value },
                },
                span: e.span(),
            });
        let general_entry = or_skipped(
            g,
            Level::Block,
            general_entry,
            |g, i| g.resume_entry_at(i) || g.nested_item_starts_at(i),
            |span| Entry {
                docs: Vec::new(),
                kind: EntryKind::Error,
                span,
            },
        )
        .boxed();
        let entry = g.simple_field().or(general_entry).boxed();
        braced(g, entry).map(|(entries, span)| Body { entries, span })
    })
}

/// Optional `;` or `,` separators between items, entries and rules.
fn separators<'tok, 'src: 'tok, Er: GrammarError<'tok, 'src>>()
-> impl Parser<'tok, Tokens<'tok, 'src>, (), Extra<Er>> + Clone {
    select_ref! { Token::Semi => (), Token::Comma => () }
        .repeated()
        .ignored()
}

/// `{ elements }` of a block or a policy, with optional separators, and the span of the
/// whole. A body that meets an item keyword or the end of the file is closed there.
fn braced<'tok, 'src: 'tok, T: 'tok, Er: GrammarError<'tok, 'src>>(
    g: Grammar<'tok, 'src>,
    element: impl Parser<'tok, Tokens<'tok, 'src>, T, Extra<Er>> + Clone + 'tok,
) -> impl Parser<'tok, Tokens<'tok, 'src>, (Vec<T>, Span), Extra<Er>> + Clone + 'tok {
    let close_brace = just(Token::RBrace).ignored().recover_with(via_parser(
        g.peek_if(|g, i| g.tok(i).is_none() || g.nested_item_starts_at(i)),
    ));
    just(Token::LBrace)
        .ignore_then(separators())
        .ignore_then(
            element
                .then_ignore(separators())
                .repeated()
                .collect::<Vec<_>>(),
        )
        .then_ignore(close_brace)
        .map_with(|elements, e| (elements, e.span()))
        .labelled(label::BODY)
        .as_context()
}

/// `element`, or where it fails, the tokens skipped up to where `resume_at` holds (whole
/// groups at a time, see [`Grammar::skipper`]) as the hole `hole(span)`.
fn or_skipped<'tok, 'src: 'tok, T: 'tok, Er: GrammarError<'tok, 'src>>(
    g: Grammar<'tok, 'src>,
    level: Level,
    element: impl Parser<'tok, Tokens<'tok, 'src>, T, Extra<Er>> + Clone + 'tok,
    resume_at: impl Fn(&Grammar<'tok, 'src>, usize) -> bool + Clone + 'tok,
    hole: fn(Span) -> T,
) -> impl Parser<'tok, Tokens<'tok, 'src>, T, Extra<Er>> + Clone + 'tok {
    element.recover_with(via_parser(g.skipper(level, resume_at).map(hole)))
}

/// The whole grammar. Returns the items of the file.
fn file_parser<'tok, 'src: 'tok, Er: GrammarError<'tok, 'src>>(
    g: Grammar<'tok, 'src>,
) -> impl Parser<'tok, Tokens<'tok, 'src>, Vec<Item>, Extra<Er>> + 'tok {
    let expr = expression(g);
    // A condition or subject right before a body: `approval when x > limit { … }` must not
    // read `limit { … }` as a record.
    let Atoms {
        common,
        args,
        simple,
    } = atoms(g, expr.clone());
    let expr_no_record = simple.or(with_operators(common, args)).boxed();
    let body = block(g, expr.clone());

    // ---- policy rules ----
    let when = just(Token::When);
    let deny = word("deny")
        .ignore_then(str_lit())
        .then_ignore(when.clone())
        .then(expr.clone())
        .map(|(reason, condition)| RuleKind::Deny { reason, condition });
    let entitle = word("entitle")
        .ignore_then(expr_no_record.clone())
        .then(body.clone())
        .map(|(subject, body)| RuleKind::Entitle { subject, body });
    let quota = word("quota")
        .ignore_then(expr_no_record.clone())
        .then(body.clone())
        .map(|(subject, body)| RuleKind::Quota { subject, body });
    let clock = select_ref! { Token::Clock(c) = e => Spanned { value: *c, span: e.span() } }
        .labelled(label::CLOCK);
    let window = word("window")
        .ignore_then(ident().labelled(label::NAME))
        .then_ignore(just(Token::Assign))
        .then(expr_no_record.clone())
        .then(clock)
        .then_ignore(just(Token::DotDot))
        .then(clock)
        .then_ignore(just(Token::In))
        .then(str_lit())
        .map(|((((name, days), start), end), zone)| RuleKind::Window {
            name,
            days,
            start,
            end,
            zone,
        });
    let limit = word("limit")
        .ignore_then(ident().labelled(label::SELECTOR))
        .then(expr_no_record.clone())
        .then_ignore(just(Token::During))
        .then(ident().labelled(label::NAME))
        .then(body.clone())
        .map(|(((selector, value), window), body)| RuleKind::Limit {
            selector,
            value,
            window,
            body,
        });
    let approval = word("approval")
        .ignore_then(when.clone())
        .ignore_then(expr_no_record.clone())
        .then(body.clone())
        .map(|(condition, body)| RuleKind::Approval { condition, body });
    let reclaim = word("reclaim")
        .ignore_then(ident().labelled(label::SELECTOR))
        .then(expr_no_record.clone())
        .then_ignore(when)
        .then(expr.clone())
        .map(|((selector, value), condition)| RuleKind::Reclaim {
            selector,
            value,
            condition,
        });
    let rule = choice((deny, entitle, quota, window, limit, approval, reclaim))
        .labelled(label::RULE)
        .map_with(|kind, e| Rule {
            docs: Vec::new(),
            kind,
            span: e.span(),
        });
    let rule = or_skipped(
        g,
        Level::Block,
        rule,
        |g, i| g.rule_starts_at(i) || g.nested_item_starts_at(i),
        |span| Rule {
            docs: Vec::new(),
            kind: RuleKind::Error,
            span,
        },
    )
    .boxed();
    let rules = braced(g, rule);

    // ---- items ----
    let use_group = ident()
        .separated_by(just(Token::Comma))
        .allow_trailing()
        .collect::<Vec<_>>()
        .delimited_by(just(Token::LBrace), just(Token::RBrace))
        .map(UseTree::Group);
    let use_glob = just(Token::Star).map_with(|_, e| UseTree::Glob(e.span()));
    let use_item = just(Token::Use)
        .ignore_then(ident().labelled(label::PATH))
        .then(
            just(Token::Dot)
                .ignore_then(ident())
                .repeated()
                .collect::<Vec<_>>(),
        )
        .then(
            just(Token::Dot)
                .ignore_then(use_group.or(use_glob).labelled(label::USE_TREE))
                .or_not(),
        )
        .map(|((first, rest), tree)| {
            let mut path = vec![first];
            path.extend(rest);
            ItemKind::Use(UseItem {
                path,
                tree: tree.unwrap_or(UseTree::Single),
            })
        });

    let const_item = just(Token::Const)
        .ignore_then(ident().labelled(label::NAME))
        .then_ignore(just(Token::Assign))
        .then(field_value(g, expr.clone()))
        .map(|(name, value)| {
            ItemKind::Const(ConstItem {
                name: Some(name),
                value,
            })
        });

    // `workload {`: the name is missing; report it and parse the body anyway.
    let name_or_missing = ident()
        .labelled(label::NAME)
        .map(Some)
        .or(just(Token::LBrace).rewind().validate(|_, e, emitter| {
            emitter.emit(Er::custom(e.span(), Custom::MissingName));
            None
        }));
    let decl_kind = select_ref! {
        Token::Ident("model") = e => (DeclKind::Model, e.span()),
        Token::Ident("workload") = e => (DeclKind::Workload, e.span()),
        Token::Ident("target") = e => (DeclKind::Target, e.span()),
        Token::Ident("placement") = e => (DeclKind::Placement, e.span()),
    };
    let decl = decl_kind.then(name_or_missing.clone()).then(body).map(
        |(((kind, keyword_span), name), body)| {
            ItemKind::Decl(Decl {
                kind,
                keyword_span,
                name,
                body,
            })
        },
    );
    let policy = word("policy").then(name_or_missing).then(rules).map(
        |((keyword_span, name), (rules, body_span))| {
            ItemKind::Policy(PolicyItem {
                keyword_span,
                name,
                rules,
                body_span,
            })
        },
    );

    let item = choice((use_item, const_item, decl, policy))
        .labelled(label::ITEM)
        .map_with(|kind, e| Item {
            docs: Vec::new(),
            kind,
            span: e.span(),
        });
    let item = or_skipped(
        g,
        Level::Top,
        item,
        |g, i| g.item_starts_at(i),
        |span| Item {
            docs: Vec::new(),
            kind: ItemKind::Error,
            span,
        },
    );
    // Stray `}` at the top level are skipped by the item recovery like any other token.
    let stray_close = just(Token::RBrace)
        .map_with(|_, e| Item {
            docs: Vec::new(),
            kind: ItemKind::Error,
            span: e.span(),
        })
        .validate(|item, _, emitter| {
            emitter.emit(Er::custom(item.span, Custom::StrayClose));
            item
        });
    separators()
        .ignore_then(
            item.or(stray_close)
                .then_ignore(separators())
                .repeated()
                .collect::<Vec<_>>(),
        )
        .then_ignore(end())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses valid `text` with the diagnostic (`Rich`) pass only.
    fn slow_items(text: &str) -> Vec<Item> {
        let mut tokens = super::super::lex(FileId(0), text).tokens;
        let _ = prepass::limit_nesting(&mut tokens);
        let delimiters = Delimiters::compute(&tokens);
        let grammar = Grammar {
            text,
            tokens: &tokens,
            delimiters: &delimiters,
        };
        let eoi = Span::new(FileId(0), text.len() as u32, text.len() as u32);
        let (items, errors) = file_parser::<PErr<'_, '_>>(grammar)
            .parse(tokens.as_slice().split_token_span(eoi))
            .into_output_errors();
        assert!(errors.is_empty());
        items.unwrap_or_default()
    }

    #[test]
    fn fast_and_diagnostic_passes_build_the_same_tree() {
        let texts = [
            crate::testing::specs::spec(300),
            "const p = (\"paren\")\nconst q = [(\"a\"), \"b\", \"\"]\nconst r = {\"k\": (\"v\")}"
                .to_string(),
            "policy p { deny \"r\" when a window w = daily 00:00..24:00 in \"UTC\" }".to_string(),
        ];
        for text in &texts {
            let fast = parse_file(FileId(0), text);
            assert!(fast.diagnostics.is_empty(), "{:?}", fast.diagnostics);
            let mut slow_ast = SourceFileAst {
                file: FileId(0),
                items: slow_items(text),
                span: fast.ast.span,
            };
            super::super::docs::attach(&mut slow_ast, text, &fast.comments);
            assert_eq!(fast.ast, slow_ast);
        }
    }
}
