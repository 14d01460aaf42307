//! Syntax errors: what the parser reports, as typed data, and how each becomes a
//! [`Diagnostic`].
//!
//! The chumsky grammar produces `Rich` errors (expected patterns, the token found, the
//! enclosing contexts). [`Converter`] turns them into [`ParseError`]s, deciding what the
//! mistake most likely was (an unclosed block, a missing value, a missing name, …) and pruning
//! the expected set to what helps a reader. Errors at tokens the lexer already reported
//! ([`Token::Invalid`]) are dropped here, so one mistake is reported once.

// INVARIANT: `j` and `open` are token positions above 0 found in `tokens` by the scan just
// above.
#![allow(clippy::indexing_slicing)]

use super::prepass::Delimiters;
use super::token::Token;
use crate::diagnostics::{Code, Diagnostic};
use crate::source::Span;
use chumsky::error::{Rich, RichPattern, RichReason};

/// Labels given to grammar pieces; [`Converter`] recognises them.
pub(crate) mod label {
    /// Lookaheads and skippers that did not apply: never shown.
    pub const SOMETHING: &str = "\u{0}";
    pub const NAME: &str = "name";
    pub const FIELD_NAME: &str = "field name";
    pub const EXPRESSION: &str = "expression";
    pub const OPERATOR: &str = "operator";
    pub const STRING: &str = "string";
    pub const CLOCK: &str = "clock time";
    pub const MAP_KEY: &str = "map key";
    pub const ENTRY: &str = "entry";
    pub const ENTRY_TAIL: &str = "entry tail";
    pub const RULE: &str = "policy rule";
    pub const ITEM: &str = "item";
    pub const PATH: &str = "module path";
    pub const USE_TREE: &str = "use tree";
    pub const SELECTOR: &str = "selector";
    // Contexts.
    pub const BODY: &str = "block";
    pub const LIST: &str = "list";
    pub const MAP: &str = "map";
    pub const PARENS: &str = "parentheses";
    pub const ARGS: &str = "arguments";
}

/// Errors the grammar emits itself (rather than chumsky's expected/found errors).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Custom {
    /// After `=` the next entry, a `}` or the end follows.
    MissingValue,
    /// An item keyword directly followed by `{`.
    MissingName,
    /// A `}` at the top level that closes nothing there.
    StrayClose,
    /// `a < b < c`.
    ChainedComparison,
}

/// chumsky's error type as the grammar uses it.
pub(crate) type PErr<'tok, 'src> = Rich<'tok, Token<'src>, Span, Custom>;

/// A syntax or input-limit error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// E0101: a token where something else was expected.
    UnexpectedToken {
        span: Span,
        expected: Vec<Expected>,
        found: String,
        /// The token before, when naming it helps (`expected an expression after `+``).
        after: Option<String>,
        context: Option<Context>,
    },
    /// E0102: a block, list, map or parenthesis that is never closed.
    Unclosed {
        /// Where the closing delimiter was expected (the token found there).
        span: Span,
        open: Span,
        delimiter: Delimiter,
        /// What the delimiter belongs to, as written: `workload vision_inspect`.
        owner: Option<String>,
        found: Found,
        /// An inner `{` that more likely lost its `}`, and the `}` that closes it instead:
        /// indented like an outer block's, so probably meant for the outer one.
        suspect: Option<(Span, Span)>,
    },
    /// E0103: the file ended in the middle of something.
    UnexpectedEof {
        span: Span,
        expected: Vec<Expected>,
        after: Option<String>,
        context: Option<Context>,
    },
    /// E0104: something at the top level that is not an item.
    ExpectedItem { span: Span, found: String },
    /// E0105: an item keyword without its name.
    MissingName {
        span: Span,
        keyword: String,
        found: Found,
    },
    /// E0106: `key =` with nothing after it.
    MissingValue {
        /// The `=`.
        span: Span,
        key: Option<String>,
        found: Found,
    },
    /// E0107: `a < b < c`.
    ChainedComparison { span: Span },
    /// E0190: nesting deeper than the limit.
    NestingTooDeep { span: Span, kind: NestingKind },
    /// E0191: a file larger than the limit.
    FileTooLarge { span: Span, size: usize },
    /// E0192: a file with more tokens than the limit.
    TooManyTokens { span: Span, count: usize },
}

/// What the parser found where it reported an error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// A token, described as in messages: `` `target` ``, `a string`.
    Token(String),
    EndOfFile,
}

impl Found {
    fn describe(&self) -> &str {
        match self {
            Found::Token(t) => t,
            Found::EndOfFile => "end of file",
        }
    }
}

/// One thing the parser would have accepted.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Expected {
    /// A specific token, e.g. `}`.
    Token(String),
    Name,
    FieldName,
    Expression,
    Operator,
    String,
    ClockTime,
    MapKey,
    Entry,
    /// What follows an entry's key: `=`, `{`, a label or a comparison.
    EntryTail,
    Rule,
    Item,
    ModulePath,
    UseTree,
    Selector,
    /// A contextual keyword such as `deny`.
    Keyword(String),
    EndOfFile,
}

impl Expected {
    fn describe(&self) -> String {
        match self {
            Expected::Token(t) => format!("`{t}`"),
            Expected::Name => "a name".into(),
            Expected::FieldName => "a field name".into(),
            Expected::Expression => "an expression".into(),
            Expected::Operator => "an operator".into(),
            Expected::String => "a string".into(),
            Expected::ClockTime => "a clock time such as `08:00`".into(),
            Expected::MapKey => "a map key".into(),
            Expected::Entry => "an entry".into(),
            Expected::EntryTail => "`=` or `{`".into(),
            Expected::Rule => "a policy rule".into(),
            Expected::Item => "an item".into(),
            Expected::ModulePath => "a module path".into(),
            Expected::UseTree => "a name, `{` or `*`".into(),
            Expected::Selector => "`class`, `kind` or `team`".into(),
            Expected::Keyword(k) => format!("`{k}`"),
            Expected::EndOfFile => "end of file".into(),
        }
    }

    /// Continuations of an expression that is already complete (`.`, `(`, operators): noise
    /// when something structural (a `,`, a closer, the next entry) is also expected.
    fn is_continuation(&self) -> bool {
        match self {
            Expected::Operator => true,
            Expected::Token(t) => matches!(
                t.as_str(),
                "." | "(" | "and" | "or" | "+" | "-" | "*" | "/" | "in"
            ),
            _ => false,
        }
    }
}

/// The construct an error happened in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Context {
    pub kind: ContextKind,
    /// The opening delimiter.
    pub open: Span,
    /// What it belongs to, as written (`workload vision_inspect`), when short.
    pub owner: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContextKind {
    Block,
    List,
    Map,
    Parens,
    Args,
}

impl ContextKind {
    fn delimiter(self) -> Delimiter {
        match self {
            ContextKind::Block | ContextKind::Map => Delimiter::Brace,
            ContextKind::List => Delimiter::Bracket,
            ContextKind::Parens | ContextKind::Args => Delimiter::Paren,
        }
    }

    fn noun(self) -> &'static str {
        match self {
            ContextKind::Block => "block",
            ContextKind::List => "list",
            ContextKind::Map => "map",
            ContextKind::Parens => "parenthesis",
            ContextKind::Args => "argument list",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delimiter {
    Brace,
    Bracket,
    Paren,
}

impl Delimiter {
    pub fn open(self) -> &'static str {
        match self {
            Delimiter::Brace => "{",
            Delimiter::Bracket => "[",
            Delimiter::Paren => "(",
        }
    }

    pub fn close(self) -> &'static str {
        match self {
            Delimiter::Brace => "}",
            Delimiter::Bracket => "]",
            Delimiter::Paren => ")",
        }
    }
}

/// Which limit a too-deep region broke.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NestingKind {
    /// Blocks, lists, maps, calls and parentheses.
    Delimiters,
    /// Operators chained in one expression.
    Operators,
}

fn join_alternatives(items: &[String]) -> String {
    match items {
        [] => "something else".to_string(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

impl ParseError {
    pub fn span(&self) -> Span {
        match self {
            ParseError::UnexpectedToken { span, .. }
            | ParseError::Unclosed { span, .. }
            | ParseError::UnexpectedEof { span, .. }
            | ParseError::ExpectedItem { span, .. }
            | ParseError::MissingName { span, .. }
            | ParseError::MissingValue { span, .. }
            | ParseError::ChainedComparison { span }
            | ParseError::NestingTooDeep { span, .. }
            | ParseError::FileTooLarge { span, .. }
            | ParseError::TooManyTokens { span, .. } => *span,
        }
    }

    pub fn diagnostic(&self) -> Diagnostic {
        match self {
            ParseError::UnexpectedToken {
                span,
                expected,
                found,
                after,
                context,
            } => {
                let exp = describe_expected(expected);
                let d = Diagnostic::error(
                    Code::UnexpectedToken,
                    format!("expected {exp}{}, found {found}", after_text(after)),
                    *span,
                )
                .primary_label(format!("expected {exp} here"));
                let d = with_context(d, context.as_ref());
                match help_for(expected, found) {
                    Some(h) => d.help(h),
                    None => d,
                }
            }
            ParseError::Unclosed {
                span,
                open,
                delimiter,
                owner,
                found,
                suspect,
            } => {
                let close = delimiter.close();
                let what = match owner {
                    Some(o) => format!("`{o}`"),
                    None => format!("this `{}`", delimiter.open()),
                };
                let d = Diagnostic::error(
                    Code::UnclosedDelimiter,
                    format!(
                        "expected `{close}` to close {what}, found {}",
                        found.describe()
                    ),
                    *span,
                )
                .primary_label(format!("expected `{close}` before this"))
                .label(
                    *open,
                    format!("this `{}` is never closed", delimiter.open()),
                );
                match suspect {
                    Some((inner, its_close)) => d
                        .label(*inner, "perhaps this block lost its `}` instead")
                        .label(
                            *its_close,
                            "this `}`, indented like an outer block, closes it",
                        )
                        .help("add the missing `}` at the end of the inner block"),
                    None => d.help(format!(
                        "add `{close}` where {what} should end; if an inner block lost its \
                         `{close}`, the indentation usually shows which"
                    )),
                }
            }
            ParseError::UnexpectedEof {
                span,
                expected,
                after,
                context,
            } => {
                let exp = describe_expected(expected);
                let d = Diagnostic::error(
                    Code::UnexpectedEof,
                    format!(
                        "unexpected end of file, expected {exp}{}",
                        after_text(after)
                    ),
                    *span,
                )
                .primary_label(format!("expected {exp} here"));
                with_context(d, context.as_ref())
            }
            ParseError::ExpectedItem { span, found } => {
                let d = Diagnostic::error(
                    Code::ExpectedItem,
                    format!("expected an item, found {found}"),
                    *span,
                );
                if found == "`}`" {
                    d.primary_label("this `}` closes nothing")
                        .help("remove it, or look for the block it was meant to close")
                } else {
                    d.primary_label("not the start of an item").help(
                        "a file holds `use`, `const`, `model`, `workload`, `target`, `placement` \
                         and `policy` items",
                    )
                }
            }
            ParseError::MissingName {
                span,
                keyword,
                found,
            } => Diagnostic::error(
                Code::MissingName,
                format!(
                    "expected a name after `{keyword}`, found {}",
                    found.describe()
                ),
                *span,
            )
            .primary_label("the name goes here")
            .help(format!("write `{keyword} NAME {{ … }}`")),
            ParseError::MissingValue { span, key, found } => {
                let d = Diagnostic::error(
                    Code::MissingValue,
                    format!("expected a value after `=`, found {}", found.describe()),
                    *span,
                )
                .primary_label("this `=` has no value");
                match key {
                    Some(k) => d.help(format!("write `{k} = VALUE`, or remove `{k} =`")),
                    None => d,
                }
            }
            ParseError::ChainedComparison { span } => Diagnostic::error(
                Code::ChainedComparison,
                "comparisons cannot be chained",
                *span,
            )
            .primary_label("this compares the result of a comparison")
            .help("join the comparisons with `and`: `a < b and b < c`"),
            ParseError::NestingTooDeep { span, kind } => {
                let (message, label) = match kind {
                    NestingKind::Delimiters => (
                        format!(
                            "nesting too deep: more than {} levels of blocks, lists, maps or parentheses",
                            super::limits::MAX_NESTING
                        ),
                        "this opens one level too many",
                    ),
                    NestingKind::Operators => (
                        format!(
                            "expression too deeply nested: more than {} levels",
                            super::limits::MAX_EXPR_DEPTH
                        ),
                        "the expression is too deep from here on",
                    ),
                };
                Diagnostic::error(Code::NestingTooDeep, message, *span)
                    .primary_label(label)
                    .note("the rest of this construct was skipped")
                    .help("split it up, for example with `const` items")
            }
            ParseError::FileTooLarge { span, size } => Diagnostic::error(
                Code::FileTooLarge,
                format!(
                    "file too large: {size} bytes, the limit is {} bytes",
                    super::limits::MAX_FILE_BYTES
                ),
                *span,
            )
            .help("split the specification into several files"),
            ParseError::TooManyTokens { span, count } => Diagnostic::error(
                Code::TooManyTokens,
                format!(
                    "too many tokens: {count}, the limit is {}",
                    super::limits::MAX_TOKENS
                ),
                *span,
            )
            .primary_label("the limit is reached here")
            .help("split the specification into several files"),
        }
    }
}

fn after_text(after: &Option<String>) -> String {
    after
        .as_ref()
        .map(|a| format!(" after `{a}`"))
        .unwrap_or_default()
}

fn describe_expected(expected: &[Expected]) -> String {
    let items: Vec<String> = expected.iter().map(Expected::describe).collect();
    join_alternatives(&items)
}

fn with_context(d: Diagnostic, context: Option<&Context>) -> Diagnostic {
    match context {
        Some(c) => {
            let msg = match &c.owner {
                Some(o) if c.kind == ContextKind::Block => format!("in `{o}`, opened here"),
                _ => format!("in this {}", c.kind.noun()),
            };
            d.label(c.open, msg)
        }
        None => d,
    }
}

fn help_for(expected: &[Expected], found: &str) -> Option<String> {
    if expected.contains(&Expected::EntryTail) {
        return Some(match found {
            "`:`" => "fields are written `key = value`; `key: value` is for maps".to_string(),
            _ => "entries are `key = value`, `key { … }`, `key label = value`, `key label { … }` \
                  or a bound such as `gpu <= 16`"
                .to_string(),
        });
    }
    if expected.contains(&Expected::Rule) {
        return Some(
            "policy rules start with `deny`, `entitle`, `quota`, `window`, `limit`, `approval` \
             or `reclaim`"
                .to_string(),
        );
    }
    if expected.contains(&Expected::Token(":".into())) && found == "`=`" {
        return Some(
            "map entries are written `key: value`; `key = value` is for blocks and records"
                .to_string(),
        );
    }
    None
}

/// Turns chumsky's errors into [`ParseError`]s.
pub(crate) struct Converter<'a, 'src> {
    text: &'a str,
    tokens: &'a [(Token<'src>, Span)],
    delimiters: &'a Delimiters,
}

impl<'a, 'src> Converter<'a, 'src> {
    pub(crate) fn new(
        text: &'a str,
        tokens: &'a [(Token<'src>, Span)],
        delimiters: &'a Delimiters,
    ) -> Self {
        Converter {
            text,
            tokens,
            delimiters,
        }
    }

    pub(crate) fn convert_all<'tok>(
        &self,
        errors: impl IntoIterator<Item = PErr<'tok, 'src>>,
    ) -> Vec<ParseError>
    where
        'src: 'tok,
    {
        let mut out: Vec<ParseError> = Vec::new();
        for err in errors {
            let Some(e) = self.convert(&err) else {
                continue;
            };
            // Blocks closed by the same token are reported once, at the innermost.
            if let ParseError::Unclosed { span, .. } = &e
                && out
                    .iter()
                    .any(|o| matches!(o, ParseError::Unclosed { span: s, .. } if s == span))
            {
                continue;
            }
            out.push(e);
        }
        out
    }

    /// Index of the first token starting at or after `offset`.
    fn index_at(&self, offset: u32) -> usize {
        self.tokens.partition_point(|(_, s)| s.start < offset)
    }

    fn found_at(&self, i: usize) -> Found {
        match self.tokens.get(i) {
            Some((t, _)) => Found::Token(t.describe()),
            None => Found::EndOfFile,
        }
    }

    fn eof_span(&self) -> Span {
        match self.tokens.last() {
            Some((_, s)) => Span::new(s.file, self.text.len() as u32, self.text.len() as u32),
            None => Span::default(),
        }
    }

    fn convert(&self, err: &PErr<'_, 'src>) -> Option<ParseError> {
        let span = *err.span();
        match err.reason() {
            RichReason::Custom(Custom::MissingValue) => {
                let i = self.index_at(span.end);
                let eq = i.checked_sub(1).and_then(|j| self.tokens.get(j));
                let key = i
                    .checked_sub(2)
                    .and_then(|j| self.tokens.get(j))
                    .and_then(|(t, _)| match t {
                        Token::Ident(k) => Some(k.to_string()),
                        _ => None,
                    });
                Some(ParseError::MissingValue {
                    span: eq.map_or(span, |(_, s)| *s),
                    key,
                    found: self.found_at(i),
                })
            }
            RichReason::Custom(Custom::MissingName) => {
                let i = self.index_at(span.end);
                let keyword = i
                    .checked_sub(1)
                    .and_then(|j| self.tokens.get(j))
                    .map_or_else(String::new, |(t, _)| t.to_string());
                Some(ParseError::MissingName {
                    span,
                    keyword,
                    found: self.found_at(i),
                })
            }
            RichReason::Custom(Custom::ChainedComparison) => {
                Some(ParseError::ChainedComparison { span })
            }
            RichReason::Custom(Custom::StrayClose) => Some(ParseError::ExpectedItem {
                span,
                found: "`}`".to_string(),
            }),
            RichReason::ExpectedFound { expected, found } => {
                let found_token = found.as_deref();
                if matches!(found_token, Some(Token::Invalid)) {
                    return None;
                }
                let span = if found_token.is_none() {
                    self.eof_span()
                } else {
                    span
                };
                let found = match found_token {
                    Some(t) => Found::Token(t.describe()),
                    None => Found::EndOfFile,
                };
                let expected = prune(expected.iter().filter_map(pattern).collect());
                let context = self.context(err);
                Some(self.classify(span, expected, found, context))
            }
        }
    }

    fn classify(
        &self,
        span: Span,
        expected: Vec<Expected>,
        found: Found,
        context: Option<(Context, usize)>,
    ) -> ParseError {
        if let Some((ctx, open_index)) = &context {
            let close = ctx.kind.delimiter().close();
            let expects_close = expected.contains(&Expected::Token(close.to_string()))
                || (ctx.kind == ContextKind::Block && expected.contains(&Expected::Entry));
            let unclosed = self.delimiters.partner(*open_index).is_none();
            if expects_close && unclosed {
                let suspect = match ctx.kind.delimiter() {
                    Delimiter::Brace => self.misindented_block(*open_index, span.start),
                    _ => None,
                };
                return ParseError::Unclosed {
                    span,
                    open: ctx.open,
                    delimiter: ctx.kind.delimiter(),
                    owner: ctx.owner.clone(),
                    found,
                    suspect,
                };
            }
        }
        let context = context.map(|(c, _)| c);
        if expected == [Expected::Item]
            && let Found::Token(found) = &found
        {
            return ParseError::ExpectedItem {
                span,
                found: found.clone(),
            };
        }
        if expected.contains(&Expected::Name) {
            let i = self.index_at(span.start);
            if let Some((Token::Ident(kw), _)) = i.checked_sub(1).and_then(|j| self.tokens.get(j))
                && super::parser::is_item_word(kw)
            {
                return ParseError::MissingName {
                    span,
                    keyword: kw.to_string(),
                    found,
                };
            }
        }
        let after = if matches!(
            expected.as_slice(),
            [Expected::Expression | Expected::String]
        ) {
            self.token_before(span.start)
        } else {
            None
        };
        match found {
            Found::EndOfFile => ParseError::UnexpectedEof {
                span,
                expected,
                after,
                context,
            },
            Found::Token(found) => ParseError::UnexpectedToken {
                span,
                expected,
                found,
                after,
                context,
            },
        }
    }

    /// The text of the token before `offset`, if it is punctuation or a keyword.
    fn token_before(&self, offset: u32) -> Option<String> {
        let i = self.index_at(offset).checked_sub(1)?;
        let (tok, _) = self.tokens.get(i)?;
        match tok {
            Token::Ident(w) if super::parser::RULE_WORDS.contains(w) => Some(w.to_string()),
            Token::Ident(_)
            | Token::Int(_)
            | Token::Decimal(_)
            | Token::Quantity(_)
            | Token::Clock(_)
            | Token::Str(_)
            | Token::Invalid => None,
            other => Some(other.to_string()),
        }
    }

    /// Inside the unclosed block opened at token `open` (and running up to `until`), the first
    /// inner `{` whose matching `}` starts a line indented differently from the line of the
    /// `{`: with consistent indentation, that `}` belongs to an outer block, so the inner block
    /// is the one missing its `}`. Returns the inner `{` and that `}`.
    fn misindented_block(&self, open: usize, until: u32) -> Option<(Span, Span)> {
        let end = self.index_at(until);
        (open + 1..end).find_map(|j| {
            let (tok, brace) = self.tokens.get(j)?;
            if *tok != Token::LBrace {
                return None;
            }
            let close = self.delimiters.partner(j)?;
            let (_, close_span) = self.tokens.get(close)?;
            let close_indent = self.indent_if_first(close_span.start)?;
            let open_indent = self.line_indent(brace.start);
            (close_indent != open_indent).then_some((*brace, *close_span))
        })
    }

    /// The indentation (in characters) of the line holding `offset`.
    fn line_indent(&self, offset: u32) -> usize {
        let start = self.line_start(offset);
        self.text[start..]
            .chars()
            .take_while(|c| *c == ' ' || *c == '\t')
            .count()
    }

    /// The indentation of the token at `offset` if it is the first on its line.
    fn indent_if_first(&self, offset: u32) -> Option<usize> {
        let before = self.text.get(self.line_start(offset)..offset as usize)?;
        before
            .chars()
            .all(|c| c == ' ' || c == '\t')
            .then(|| before.chars().count())
    }

    fn line_start(&self, offset: u32) -> usize {
        self.text
            .get(..offset as usize)
            .and_then(|t| t.rfind('\n'))
            .map_or(0, |i| i + 1)
    }

    /// The innermost context of a known kind, with the index of its opening token.
    fn context(&self, err: &PErr<'_, 'src>) -> Option<(Context, usize)> {
        for (pattern, span) in err.contexts() {
            let RichPattern::Label(l) = pattern else {
                continue;
            };
            let kind = match l.as_ref() {
                label::BODY => ContextKind::Block,
                label::LIST => ContextKind::List,
                label::MAP => ContextKind::Map,
                label::PARENS => ContextKind::Parens,
                label::ARGS => ContextKind::Args,
                _ => continue,
            };
            let i = self.index_at(span.start);
            let (tok, open) = self.tokens.get(i)?;
            if super::prepass::opener(tok).is_none() {
                continue;
            }
            let owner = match kind {
                ContextKind::Block | ContextKind::Map => self.owner(i),
                _ => None,
            };
            return Some((
                Context {
                    kind,
                    open: *open,
                    owner,
                },
                i,
            ));
        }
        None
    }

    /// The words before the `{` at `open` on its line (`workload vision_inspect`,
    /// `entitle service_account("vision")`), if short.
    fn owner(&self, open: usize) -> Option<String> {
        let mut j = open;
        let mut words = 0;
        while j > 0 && words < 4 {
            let (tok, span) = &self.tokens[j - 1];
            let next_start = self.tokens[j].1.start;
            if self.text[span.end as usize..next_start as usize].contains('\n') {
                break;
            }
            match tok {
                Token::RParen => match self.delimiters.partner(j - 1) {
                    Some(p) if p > 0 => j = p,
                    _ => break,
                },
                Token::Ident(_) | Token::Str(_) | Token::Int(_) => j -= 1,
                _ => break,
            }
            words += 1;
        }
        if j == open {
            return None;
        }
        let start = self.tokens[j].1.start as usize;
        let end = self.tokens[open - 1].1.end as usize;
        let text = self.text.get(start..end)?;
        (text.len() <= 60).then(|| text.to_string())
    }
}

fn pattern(p: &RichPattern<'_, Token<'_>>) -> Option<Expected> {
    Some(match p {
        RichPattern::Token(t) => Expected::Token(t.to_string()),
        RichPattern::Label(l) => match l.as_ref() {
            label::SOMETHING => return None,
            label::NAME => Expected::Name,
            label::FIELD_NAME => Expected::FieldName,
            label::EXPRESSION => Expected::Expression,
            label::OPERATOR => Expected::Operator,
            label::STRING => Expected::String,
            label::CLOCK => Expected::ClockTime,
            label::MAP_KEY => Expected::MapKey,
            label::ENTRY => Expected::Entry,
            label::ENTRY_TAIL => Expected::EntryTail,
            label::RULE => Expected::Rule,
            label::ITEM => Expected::Item,
            label::PATH => Expected::ModulePath,
            label::USE_TREE => Expected::UseTree,
            label::SELECTOR => Expected::Selector,
            // A block's label stands for its opening `{`.
            label::BODY | label::MAP => Expected::Token("{".into()),
            label::LIST => Expected::Token("[".into()),
            label::PARENS | label::ARGS => Expected::Token("(".into()),
            other => Expected::Keyword(other.to_string()),
        },
        RichPattern::EndOfInput => Expected::EndOfFile,
        RichPattern::Identifier(i) => Expected::Keyword(i.clone()),
        _ => return None,
    })
}

/// Keeps what helps: continuations of a finished expression are dropped when something
/// structural is expected too; duplicates go; the order is stable.
fn prune(mut expected: Vec<Expected>) -> Vec<Expected> {
    if expected.iter().any(|e| !e.is_continuation()) {
        expected.retain(|e| !e.is_continuation());
    }
    // "an expression" covers the prefix operators.
    if expected.contains(&Expected::Expression) {
        expected.retain(|e| !matches!(e, Expected::Token(t) if t == "not" || t == "-" || t == "(" || t == "[" || t == "{"));
    }
    // An entry or rule expected where a block could close: say so in one phrase.
    expected.sort();
    expected.dedup();
    expected
}
