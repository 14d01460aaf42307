//! The syntax tree. Every node has a byte [`Span`]; missing pieces are holes (`Error`
//! variants, `None` names) so that a tree always exists, however broken the input.
//!
//! The tree is deliberately uniform: `model`, `workload`, `target` and `placement` items are a
//! keyword, a name and a [`Body`] of generic entries (fields, nested blocks, bounds). Which
//! fields a block may have is semantics' business (the schemas), not the parser's. Only
//! policy rules have dedicated syntax, because their shapes differ.

use super::token::{ClockTime, Num, Quantity};
use crate::source::{FileId, Span};

/// A name as written, with its span.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

/// One parsed file.
#[derive(Clone, Debug, PartialEq)]
pub struct SourceFileAst {
    pub file: FileId,
    pub items: Vec<Item>,
    /// `//!`-less file docs are not a thing: a leading `///` block documents the first item.
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Item {
    /// Text of the `///` comments directly above the item, one entry per line, without the
    /// `///` and one leading space.
    pub docs: Vec<String>,
    pub kind: ItemKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ItemKind {
    Use(UseItem),
    Const(ConstItem),
    /// `model`, `workload`, `target`, `placement`: keyword, name, body.
    Decl(Decl),
    Policy(PolicyItem),
    /// Tokens that formed no item; the parser reported them.
    Error,
}

/// `use std.gpu.{L4, H100}`, `use std.gpu.H100`, `use std.services.*`.
#[derive(Clone, Debug, PartialEq)]
pub struct UseItem {
    /// The module path, e.g. `std`, `gpu`.
    pub path: Vec<Ident>,
    pub tree: UseTree,
}

#[derive(Clone, Debug, PartialEq)]
pub enum UseTree {
    /// The last path segment itself is imported (`use std.gpu.H100`): `path` ends with it.
    Single,
    /// `{A, B}` after the path.
    Group(Vec<Ident>),
    /// `*` after the path.
    Glob(Span),
}

/// `const name = value`.
#[derive(Clone, Debug, PartialEq)]
pub struct ConstItem {
    pub name: Option<Ident>,
    pub value: Expr,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeclKind {
    Model,
    Workload,
    Target,
    Placement,
}

impl DeclKind {
    pub fn keyword(self) -> &'static str {
        match self {
            DeclKind::Model => "model",
            DeclKind::Workload => "workload",
            DeclKind::Target => "target",
            DeclKind::Placement => "placement",
        }
    }
}

/// `workload vision_inspect { … }`.
#[derive(Clone, Debug, PartialEq)]
pub struct Decl {
    pub kind: DeclKind,
    pub keyword_span: Span,
    /// `None` when the name is missing (reported).
    pub name: Option<Ident>,
    pub body: Body,
}

/// `{ entries }`. Entries are separated by whitespace, newlines, `;` or `,`.
#[derive(Clone, Debug, PartialEq)]
pub struct Body {
    pub entries: Vec<Entry>,
    /// From `{` to `}` inclusive.
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub docs: Vec<String>,
    pub kind: EntryKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum EntryKind {
    /// `key = value` or, with a label, `data line_images = local { … }`.
    Field {
        key: Ident,
        label: Option<Ident>,
        value: Expr,
    },
    /// `key { … }` or, with a label, `variant fp16 { … }`, `pool l4 { … }`.
    Block {
        key: Ident,
        label: Option<Ident>,
        body: Body,
    },
    /// `gpu <= 16`: a bound in an entitlement, quota or limit.
    Bound {
        key: Ident,
        op: CompareOp,
        value: Expr,
    },
    /// Tokens that formed no entry; the parser reported them.
    Error,
}

/// `policy name { rules }`.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyItem {
    pub keyword_span: Span,
    pub name: Option<Ident>,
    pub rules: Vec<Rule>,
    pub body_span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    pub docs: Vec<String>,
    pub kind: RuleKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum RuleKind {
    /// `deny "reason" when condition`.
    Deny { reason: StrLit, condition: Expr },
    /// `entitle service_account("vision") { gpu <= 16  accelerators = [...] … }`.
    Entitle { subject: Expr, body: Body },
    /// `quota team("research") { gpu <= 8 }`.
    Quota { subject: Expr, body: Body },
    /// `window peak = weekdays 08:00..18:00 in "Europe/Paris"`.
    Window {
        name: Ident,
        /// `weekdays`, `weekends`, `daily` (a name) or a list such as `[mon, tue]`.
        days: Expr,
        start: Spanned<ClockTime>,
        end: Spanned<ClockTime>,
        zone: StrLit,
    },
    /// `limit class experiment during peak { gpu <= 4 }`: `selector` is `class`, `kind` or
    /// `team`, `value` the class/kind/team, `window` the window's name.
    Limit {
        selector: Ident,
        value: Expr,
        window: Ident,
        body: Body,
    },
    /// `approval when cost_per_day > 500 { approvers = [...] }`.
    Approval { condition: Expr, body: Body },
    /// `reclaim kind notebook when gpu_idle > 30m`: `selector` is `kind` or `class`.
    Reclaim {
        selector: Ident,
        value: Expr,
        condition: Expr,
    },
    /// Tokens that formed no rule; the parser reported them.
    Error,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StrLit {
    pub value: String,
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spanned<T> {
    pub value: T,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    Int(u64),
    Decimal(Num),
    Str(String),
    Bool(bool),
    Quantity(Quantity),
    Clock(ClockTime),
    /// A bare name: `ga`, `plant_images`, `workload`, `target`.
    Name(Ident),
    /// `base.field`.
    Member {
        base: Box<Expr>,
        field: Ident,
    },
    /// `callee(args)`; method calls have a `Member` callee: `workload.data.any(d -> …)`.
    Call {
        callee: Box<Expr>,
        args: Vec<Expr>,
    },
    /// `[a, b]`.
    List(Vec<Expr>),
    /// `{ key: value, … }`.
    Map(Vec<MapEntry>),
    /// `kubernetes { context = "…" }`, `local { endpoint = "…" }`, `intermittent { … }`.
    Record {
        ctor: Ident,
        body: Body,
    },
    Unary {
        op: UnaryOp,
        operand: Box<Expr>,
    },
    Binary {
        op: BinaryOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    /// `d -> body` or `(a, b) -> body`.
    Lambda {
        params: Vec<Ident>,
        body: Box<Expr>,
    },
    /// A hole where an expression was missing or malformed (already reported).
    Error,
}

#[derive(Clone, Debug, PartialEq)]
pub struct MapEntry {
    pub key: MapKey,
    pub value: Expr,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MapKey {
    Name(Ident),
    Str(StrLit),
}

impl MapKey {
    pub fn text(&self) -> &str {
        match self {
            MapKey::Name(i) => &i.name,
            MapKey::Str(s) => &s.value,
        }
    }

    pub fn span(&self) -> Span {
        match self {
            MapKey::Name(i) => i.span,
            MapKey::Str(s) => s.span,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Not,
    Neg,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CompareOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CompareOp {
    pub fn as_str(self) -> &'static str {
        match self {
            CompareOp::Eq => "==",
            CompareOp::Ne => "!=",
            CompareOp::Lt => "<",
            CompareOp::Le => "<=",
            CompareOp::Gt => ">",
            CompareOp::Ge => ">=",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Or,
    And,
    Compare(CompareOp),
    In,
    Add,
    Sub,
    Mul,
    Div,
}

impl BinaryOp {
    pub fn as_str(self) -> &'static str {
        match self {
            BinaryOp::Or => "or",
            BinaryOp::And => "and",
            BinaryOp::Compare(c) => c.as_str(),
            BinaryOp::In => "in",
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
        }
    }
}
