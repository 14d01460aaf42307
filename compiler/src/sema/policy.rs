//! Policies: every rule kind checked and lowered, and `deny` conditions type-checked into
//! [`PolicyExpr`].
//!
//! A condition is checked bottom-up with one twist: a bare name that is not in scope (`cloud`,
//! `confidential`) takes its meaning from the other side of the comparison, so
//! `target.class == cloud` reads `cloud` as an environment class. Paths under `workload.` and
//! `target.` come from the tables [`WORKLOAD_PATHS`] and [`TARGET_PATHS`] (also what the
//! language server completes). Arithmetic is only allowed on constants, which are folded.

use super::body::{Fields, Owner};
use super::error::SemaError;
use super::eval::{Catalogued, Checker};
use super::lower::{list_of, member_of, str_of, u32_of};
use super::resolve::{Def, ScopeRef, Typo, suggest};
use super::schema::{self, BlockSchema};
use super::types::{Dec, EnumTy, QDim, RefKind, Ty, Val};
use crate::ir::*;
use crate::source::Span;
use crate::syntax::ast::{BinaryOp, Body, CompareOp, Expr, ExprKind, Ident, RuleKind, UnaryOp};
use std::collections::BTreeMap;

/// The type of a value in a condition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PTy {
    Bool,
    Int,
    Str,
    Qty(QDim),
    Enum(EnumTy),
    List(Box<PTy>),
    /// A data-set record of `workload.data`.
    Data,
    /// An accelerator (its name, at run time).
    Accelerator,
}

impl PTy {
    pub fn describe(&self) -> String {
        match self {
            PTy::Bool => "a boolean".into(),
            PTy::Int => "a number".into(),
            PTy::Str => "a string".into(),
            PTy::Qty(d) => d.with_article().into(),
            PTy::Enum(e) => e.with_article(),
            PTy::List(t) => format!("a list of {}", t.plural()),
            PTy::Data => "a data set".into(),
            PTy::Accelerator => "an accelerator".into(),
        }
    }

    fn plural(&self) -> String {
        match self {
            PTy::Data => "data sets".into(),
            PTy::Accelerator => "accelerators".into(),
            PTy::Enum(EnumTy::EnvClass) => "environment classes".into(),
            PTy::Str => "strings".into(),
            other => format!(
                "{} values",
                other
                    .describe()
                    .trim_start_matches("a ")
                    .trim_start_matches("an ")
            ),
        }
    }

    /// Whether `a == b` type-checks (strings and accelerator names mix).
    fn compatible(&self, other: &PTy) -> bool {
        self == other
            || matches!(
                (self, other),
                (PTy::Str, PTy::Accelerator) | (PTy::Accelerator, PTy::Str)
            )
    }
}

/// A path under `workload.` usable in conditions.
pub struct PathField<F: 'static> {
    pub path: &'static str,
    pub field: F,
    pub ty: fn() -> PTy,
    pub doc: &'static str,
}

pub static WORKLOAD_PATHS: &[PathField<WorkloadField>] = &[
    PathField {
        path: "name",
        field: WorkloadField::Name,
        ty: || PTy::Str,
        doc: "The workload's name.",
    },
    PathField {
        path: "release",
        field: WorkloadField::Release,
        ty: || PTy::Str,
        doc: "Its release.",
    },
    PathField {
        path: "image",
        field: WorkloadField::Image,
        ty: || PTy::Str,
        doc: "Its image.",
    },
    PathField {
        path: "kind",
        field: WorkloadField::Kind,
        ty: || PTy::Enum(EnumTy::Kind),
        doc: "Its kind.",
    },
    PathField {
        path: "class",
        field: WorkloadField::Class,
        ty: || PTy::Enum(EnumTy::Class),
        doc: "Its class.",
    },
    PathField {
        path: "team",
        field: WorkloadField::Team,
        ty: || PTy::Str,
        doc: "Its team.",
    },
    PathField {
        path: "identity",
        field: WorkloadField::Identity,
        ty: || PTy::Str,
        doc: "The name of its identity.",
    },
    PathField {
        path: "replicas",
        field: WorkloadField::Replicas,
        ty: || PTy::Int,
        doc: "Its replica count.",
    },
    PathField {
        path: "gpu",
        field: WorkloadField::Gpu,
        ty: || PTy::Int,
        doc: "GPUs per replica.",
    },
    PathField {
        path: "resources.gpu",
        field: WorkloadField::Gpu,
        ty: || PTy::Int,
        doc: "GPUs per replica.",
    },
    PathField {
        path: "connectivity",
        field: WorkloadField::Connectivity,
        ty: || PTy::Enum(EnumTy::Connectivity),
        doc: "The worst link it tolerates.",
    },
    PathField {
        path: "data",
        field: WorkloadField::Data,
        ty: || PTy::List(Box::new(PTy::Data)),
        doc: "Its data sets: records with `name`, `dataset`, `access`, `classification`, `max_latency`.",
    },
    PathField {
        path: "environments",
        field: WorkloadField::Environments,
        ty: || PTy::List(Box::new(PTy::Enum(EnumTy::EnvClass))),
        doc: "Its approved environment classes.",
    },
];

pub static TARGET_PATHS: &[PathField<TargetField>] = &[
    PathField {
        path: "name",
        field: TargetField::Name,
        ty: || PTy::Str,
        doc: "The target's name.",
    },
    PathField {
        path: "class",
        field: TargetField::Class,
        ty: || PTy::Enum(EnumTy::EnvClass),
        doc: "Its environment class.",
    },
    PathField {
        path: "region",
        field: TargetField::Region,
        ty: || PTy::Str,
        doc: "Its region (never equal to anything when unset).",
    },
    PathField {
        path: "jurisdiction",
        field: TargetField::Jurisdiction,
        ty: || PTy::Str,
        doc: "Its jurisdiction (never equal to anything when unset).",
    },
    PathField {
        path: "connectivity",
        field: TargetField::Connectivity,
        ty: || PTy::Enum(EnumTy::Connectivity),
        doc: "Its WAN link.",
    },
    PathField {
        path: "cost.gpu_hour",
        field: TargetField::GpuHour,
        ty: || PTy::Qty(QDim::Money),
        doc: "Its price per GPU hour (0 when unset).",
    },
    PathField {
        path: "accelerators",
        field: TargetField::Accelerators,
        ty: || PTy::List(Box::new(PTy::Accelerator)),
        doc: "The accelerators of its pools.",
    },
];

/// Fields of a data-set record.
/// A field name and its type.
pub type DataField = (&'static str, fn() -> PTy);

pub static DATA_FIELDS: &[DataField] = &[
    ("name", || PTy::Str),
    ("dataset", || PTy::Str),
    ("access", || PTy::Enum(EnumTy::Access)),
    ("classification", || PTy::Enum(EnumTy::Classification)),
    ("max_latency", || PTy::Qty(QDim::Duration)),
];

/// A condition sub-expression, typed or still open.
enum P<'a> {
    Typed(PolicyExpr, PTy),
    /// A bare name not in scope: its meaning comes from the other operand.
    Open(&'a Ident),
    /// A plain number literal: an integer or money, by the other operand.
    Number(Dec, Span),
    /// A list literal whose element type comes from the other operand.
    OpenList(&'a [Expr]),
}

struct Cond<'c, 'a> {
    ck: &'c mut Checker<'a>,
    sc: ScopeRef,
    /// Lambda parameters, innermost last.
    params: Vec<(&'a str, PTy)>,
}

impl<'a> Cond<'_, 'a> {
    fn err(&mut self, e: SemaError) -> Option<P<'a>> {
        self.ck.error(e);
        None
    }

    fn is_param(&self, name: &str) -> bool {
        self.params.iter().any(|(p, _)| *p == name)
    }

    /// Whether `e` mentions no `workload`, `target` or lambda parameter: then it is a
    /// constant and evaluated at compile time.
    fn is_constant(&self, e: &Expr) -> bool {
        match &e.kind {
            ExprKind::Name(id) => {
                !(self.is_param(&id.name) || id.name == "workload" || id.name == "target")
            }
            ExprKind::Member { base, .. } => self.is_constant(base),
            ExprKind::Unary { operand, .. } => self.is_constant(operand),
            ExprKind::Binary { lhs, rhs, .. } => self.is_constant(lhs) && self.is_constant(rhs),
            ExprKind::List(items) => items.iter().all(|i| self.is_constant(i)),
            ExprKind::Call { .. } | ExprKind::Lambda { .. } => false,
            _ => true,
        }
    }

    fn infer(&mut self, e: &'a Expr) -> Option<P<'a>> {
        match &e.kind {
            ExprKind::Error => None,
            ExprKind::Bool(b) => Some(P::Typed(PolicyExpr::Const(Value::Bool(*b)), PTy::Bool)),
            ExprKind::Int(n) => Some(P::Number(Dec::int(i128::from(*n)), e.span)),
            ExprKind::Decimal(n) => Some(P::Number(Dec::from_num(*n), e.span)),
            ExprKind::Str(s) => Some(P::Typed(PolicyExpr::Const(Value::Str(s.clone())), PTy::Str)),
            ExprKind::Quantity(_) => {
                let v = self.ck.infer(e, self.sc)?;
                self.constant(v, e.span)
            }
            ExprKind::Name(id) => self.name(id, e.span),
            ExprKind::Member { base, field } => self.member(e, base, field),
            ExprKind::Call { callee, args } => self.method(e, callee, args),
            ExprKind::List(items) => self.list(items),
            ExprKind::Unary {
                op: UnaryOp::Not,
                operand,
            } => {
                let x = self.boolean(operand)?;
                Some(P::Typed(PolicyExpr::Not(Box::new(x)), PTy::Bool))
            }
            ExprKind::Binary {
                op: op @ (BinaryOp::And | BinaryOp::Or),
                lhs,
                rhs,
            } => {
                let (a, b) = (self.boolean(lhs), self.boolean(rhs));
                let (a, b) = (Box::new(a?), Box::new(b?));
                Some(P::Typed(
                    if *op == BinaryOp::And {
                        PolicyExpr::And(a, b)
                    } else {
                        PolicyExpr::Or(a, b)
                    },
                    PTy::Bool,
                ))
            }
            ExprKind::Binary {
                op: BinaryOp::Compare(op),
                lhs,
                rhs,
            } => self.compare(*op, lhs, rhs, e.span),
            ExprKind::Binary {
                op: BinaryOp::In,
                lhs,
                rhs,
            } => self.membership(lhs, rhs),
            ExprKind::Unary {
                op: UnaryOp::Neg, ..
            }
            | ExprKind::Binary { .. } => {
                if !self.is_constant(e) {
                    let op = match &e.kind {
                        ExprKind::Binary { op, .. } => op.as_str(),
                        _ => "-",
                    };
                    return self.err(SemaError::NonConstantArithmetic { op, span: e.span });
                }
                let v = self.ck.infer(e, self.sc)?;
                self.constant(v, e.span)
            }
            ExprKind::Lambda { .. } => self.err(SemaError::InvalidMethod {
                span: e.span,
                message: "a lambda can only be the argument of `any` or `all`".into(),
                help: "write `list.any(x -> …)`".into(),
            }),
            ExprKind::Map(_) | ExprKind::Record { .. } | ExprKind::Clock(_) => {
                self.err(SemaError::TypeMismatch {
                    expected: "a value usable in a condition".into(),
                    found: super::eval::describe_expr(e),
                    span: e.span,
                    help: None,
                    via: None,
                })
            }
        }
    }

    /// A compile-time value as a typed constant.
    fn constant(&mut self, v: Val<'a>, span: Span) -> Option<P<'a>> {
        let (value, ty) = match v {
            Val::Int(n) => return Some(P::Number(Dec::int(n), span)),
            Val::Dec(d) => return Some(P::Number(d, span)),
            Val::Str(s) => (Value::Str(s), PTy::Str),
            Val::Bool(b) => (Value::Bool(b), PTy::Bool),
            Val::Qty(d, x) => {
                let x = u64::try_from(x).ok();
                let value = match (d, x) {
                    (QDim::Size, Some(x)) => Value::Size(x),
                    (QDim::Duration, Some(x)) => Value::Duration(x),
                    (QDim::Bandwidth, Some(x)) => Value::Bandwidth(x),
                    (QDim::Money, Some(x)) => {
                        Value::Money(Money(i64::try_from(x).unwrap_or(i64::MAX)))
                    }
                    _ => {
                        return self.err(SemaError::NegativeQuantity {
                            span,
                            expected: d.with_article().into(),
                        });
                    }
                };
                (value, PTy::Qty(d))
            }
            Val::Enum(e, i) => (enum_value(e, i)?, PTy::Enum(e)),
            Val::Symbol(id) => return Some(P::Open(id)),
            Val::Item(def, id) => return self.item(def, id, span),
            Val::Deferred(e, sc) => {
                // A constant whose value is a list (or other open form): check it in its scope.
                let saved = std::mem::replace(&mut self.sc, sc);
                let saved_params = std::mem::take(&mut self.params);
                let r = self.infer(e);
                self.sc = saved;
                self.params = saved_params;
                return r;
            }
            other => {
                return self.err(SemaError::TypeMismatch {
                    expected: "a value usable in a condition".into(),
                    found: other.describe(),
                    span,
                    help: None,
                    via: None,
                });
            }
        };
        Some(P::Typed(PolicyExpr::Const(value), ty))
    }

    fn name(&mut self, id: &'a Ident, span: Span) -> Option<P<'a>> {
        if let Some(depth) = self.params.iter().rev().position(|(p, _)| *p == id.name) {
            let ty = self.params[self.params.len() - 1 - depth].1.clone();
            return Some(P::Typed(PolicyExpr::Param(depth as u32), ty));
        }
        if id.name == "workload" || id.name == "target" {
            let paths: Vec<&str> = if id.name == "workload" {
                WORKLOAD_PATHS.iter().map(|p| p.path).collect()
            } else {
                TARGET_PATHS.iter().map(|p| p.path).collect()
            };
            return self.err(SemaError::UnknownPath {
                root: if id.name == "workload" {
                    "workload"
                } else {
                    "target"
                },
                field: String::new(),
                span,
                suggestion: None,
                fields: format!("`{}.…` with {}", id.name, listing(&paths)),
            });
        }
        let v = match self.ck.names.lookup(self.sc, &id.name) {
            Some((def, _)) => Val::Item(def, id),
            None => Val::Symbol(id),
        };
        self.constant(v, span)
    }

    /// A scratch expression for a name (the checker's inference takes expressions).
    fn expr_of(&self, id: &'a Ident) -> Expr {
        Expr {
            kind: ExprKind::Name(id.clone()),
            span: id.span,
        }
    }

    fn item(&mut self, def: Def, id: &'a Ident, span: Span) -> Option<P<'a>> {
        match def {
            Def::Const(c) => {
                let canon = self.ck.canonical_const(c)?;
                match &self.ck.catalogue[canon as usize] {
                    Some(Catalogued::Accelerator(a)) => Some(P::Typed(
                        PolicyExpr::Const(Value::Str(a.name.clone())),
                        PTy::Accelerator,
                    )),
                    Some(Catalogued::Service(_)) => self.err(SemaError::TypeMismatch {
                        expected: "a value usable in a condition".into(),
                        found: format!("the service `{}`", id.name),
                        span,
                        help: None,
                        via: None,
                    }),
                    None => {
                        let v = self.ck.resolve_const(canon)?;
                        self.constant(v, span)
                    }
                }
            }
            // Items stand for their names: `target.name == lyon`.
            Def::Target(_) | Def::Workload(_) | Def::Model(_) => Some(P::Typed(
                PolicyExpr::Const(Value::Str(id.name.clone())),
                PTy::Str,
            )),
            Def::Policy(_) => self.err(SemaError::TypeMismatch {
                expected: "a value usable in a condition".into(),
                found: format!("the policy `{}`", id.name),
                span,
                help: None,
                via: None,
            }),
        }
    }

    fn member(&mut self, e: &'a Expr, base: &'a Expr, field: &'a Ident) -> Option<P<'a>> {
        // `workload.a.b` / `target.a.b`: collect the path.
        let mut segments: Vec<&'a Ident> = vec![field];
        let mut cur = base;
        while let ExprKind::Member { base, field } = &cur.kind {
            segments.push(field);
            cur = base;
        }
        if let ExprKind::Name(root) = &cur.kind {
            if !self.is_param(&root.name) && (root.name == "workload" || root.name == "target") {
                segments.reverse();
                let path: Vec<&str> = segments.iter().map(|s| s.name.as_str()).collect();
                let path = path.join(".");
                let span = segments[0].span.to(segments[segments.len() - 1].span);
                let found = if root.name == "workload" {
                    WORKLOAD_PATHS
                        .iter()
                        .find(|p| p.path == path)
                        .map(|p| (PolicyExpr::Workload(p.field), (p.ty)()))
                } else {
                    TARGET_PATHS
                        .iter()
                        .find(|p| p.path == path)
                        .map(|p| (PolicyExpr::Target(p.field), (p.ty)()))
                };
                return match found {
                    Some((x, t)) => Some(P::Typed(x, t)),
                    None => {
                        let paths: Vec<&str> = if root.name == "workload" {
                            WORKLOAD_PATHS.iter().map(|p| p.path).collect()
                        } else {
                            TARGET_PATHS.iter().map(|p| p.path).collect()
                        };
                        self.err(SemaError::UnknownPath {
                            root: if root.name == "workload" {
                                "workload"
                            } else {
                                "target"
                            },
                            suggestion: suggest(&path, paths.iter().copied()),
                            fields: listing(&paths),
                            field: path,
                            span,
                        })
                    }
                };
            }
            if root.name == "std" && !self.is_param("std") {
                let v = self.ck.infer(e, self.sc)?;
                return self.constant(v, e.span);
            }
        }
        let b = self.typed(base)?;
        match b {
            (x, PTy::Data) => match DATA_FIELDS.iter().find(|(n, _)| *n == field.name) {
                Some((n, t)) => Some(P::Typed(PolicyExpr::Member(Box::new(x), (*n).into()), t())),
                None => {
                    let names: Vec<&str> = DATA_FIELDS.iter().map(|(n, _)| *n).collect();
                    self.err(SemaError::UnknownPath {
                        root: "a data set",
                        field: field.name.clone(),
                        span: field.span,
                        suggestion: suggest(&field.name, names.iter().copied()),
                        fields: listing(&names),
                    })
                }
            },
            (_, t) => self.err(SemaError::UnknownPath {
                root: "this value",
                field: field.name.clone(),
                span: field.span,
                suggestion: None,
                fields: format!("no fields of {}", t.describe()),
            }),
        }
    }

    /// `list.any(x -> …)` and `list.all(x -> …)`.
    fn method(&mut self, e: &'a Expr, callee: &'a Expr, args: &'a [Expr]) -> Option<P<'a>> {
        let ExprKind::Member { base, field } = &callee.kind else {
            let name = match &callee.kind {
                ExprKind::Name(i) => i.name.clone(),
                _ => "this".into(),
            };
            return self.err(SemaError::InvalidCall {
                span: e.span,
                message: format!("`{name}(…)` cannot be used in a condition"),
                help: Some(
                    "conditions use `workload.…`, `target.…`, comparisons and `list.any(x -> …)`"
                        .into(),
                ),
            });
        };
        let quantifier = match field.name.as_str() {
            "any" => true,
            "all" => false,
            other => {
                return self.err(SemaError::InvalidMethod {
                    span: field.span,
                    message: format!("unknown method `{other}`"),
                    help: match suggest(other, ["any", "all"].into_iter()) {
                        Some(s) => format!("did you mean `{s}`?"),
                        None => "lists have `any(x -> …)` and `all(x -> …)`".into(),
                    },
                });
            }
        };
        let (param, body) = match args {
            [
                Expr {
                    kind: ExprKind::Lambda { params, body },
                    ..
                },
            ] if params.len() == 1 => (&params[0], body),
            _ => {
                return self.err(SemaError::InvalidMethod {
                    span: e.span,
                    message: format!("`{}` takes one lambda with one parameter", field.name),
                    help: format!("write `{}(x -> …)`", field.name),
                });
            }
        };
        let (list, ty) = self.typed(base)?;
        let PTy::List(elem) = ty else {
            return self.err(SemaError::TypeMismatch {
                expected: "a list".into(),
                found: ty.describe(),
                span: base.span,
                help: None,
                via: None,
            });
        };
        self.params.push((&param.name, *elem));
        let body = self.boolean(body);
        self.params.pop();
        let body = Box::new(body?);
        let list = Box::new(list);
        Some(P::Typed(
            if quantifier {
                PolicyExpr::Any(list, body)
            } else {
                PolicyExpr::All(list, body)
            },
            PTy::Bool,
        ))
    }

    fn list(&mut self, items: &'a [Expr]) -> Option<P<'a>> {
        // Typed when some element has a type of its own; open otherwise.
        let mut ty = None;
        for item in items {
            if let ExprKind::Name(id) = &item.kind
                && self.ck.names.lookup(self.sc, &id.name).is_none()
                && !self.is_param(&id.name)
            {
                continue;
            }
            if matches!(item.kind, ExprKind::Int(_) | ExprKind::Decimal(_)) {
                continue;
            }
            if let Some(P::Typed(_, t)) = self.infer(item) {
                ty = Some(t);
                break;
            }
            return None;
        }
        match ty {
            Some(t) => {
                let list_ty = PTy::List(Box::new(t));
                self.check_list(items, &list_ty)
                    .map(|x| P::Typed(x, list_ty))
            }
            None => Some(P::OpenList(items)),
        }
    }

    fn check_list(&mut self, items: &'a [Expr], ty: &PTy) -> Option<PolicyExpr> {
        let PTy::List(elem) = ty else { return None };
        let mut out = Vec::new();
        let mut ok = true;
        for item in items {
            match self.expect(item, elem) {
                Some(x) => out.push(x),
                None => ok = false,
            }
        }
        ok.then_some(PolicyExpr::List(out))
    }

    /// `e`, which must have a type of its own (not an open name or literal list).
    fn typed(&mut self, e: &'a Expr) -> Option<(PolicyExpr, PTy)> {
        match self.infer(e)? {
            P::Typed(x, t) => Some((x, t)),
            P::Number(d, span) => number(d, &PTy::Int).map(|x| (x, PTy::Int)).or_else(|| {
                self.ck.error(SemaError::TypeMismatch {
                    expected: "a whole number".into(),
                    found: format!("the number `{d}`"),
                    span,
                    help: None,
                    via: None,
                });
                None
            }),
            P::Open(id) => {
                self.unknown(id);
                None
            }
            P::OpenList(_) => {
                self.ck.error(SemaError::TypeMismatch {
                    expected: "a value with a known type".into(),
                    found: "a list of names".into(),
                    span: e.span,
                    help: Some(
                        "compare it with something typed: `target.class in [cloud, edge]`".into(),
                    ),
                    via: None,
                });
                None
            }
        }
    }

    fn unknown(&mut self, id: &Ident) {
        let typo = Typo::new(&id.name);
        let mut all: Vec<&str> = self.ck.names.suggestible(self.sc, &typo);
        all.extend(["workload", "target"]);
        all.extend(self.params.iter().map(|(p, _)| *p));
        self.ck.error(SemaError::UnknownName {
            name: id.name.clone(),
            span: id.span,
            expected: "a value".into(),
            suggestion: typo.best(all.into_iter()),
            in_module: None,
        });
    }

    /// `e` checked against `ty`: open names and literals take their meaning from it.
    fn expect(&mut self, e: &'a Expr, ty: &PTy) -> Option<PolicyExpr> {
        // A name that is a member of the expected enumeration means the member, even when
        // something else in scope has that name.
        if let (ExprKind::Name(id), PTy::Enum(en)) = (&e.kind, ty)
            && !self.is_param(&id.name)
            && let Some(i) = en.index_of(&id.name)
        {
            return enum_value(*en, i).map(PolicyExpr::Const);
        }
        let got = self.infer(e)?;
        self.close(got, e.span, ty)
    }

    fn close(&mut self, got: P<'a>, span: Span, ty: &PTy) -> Option<PolicyExpr> {
        match got {
            P::Typed(x, t) if t.compatible(ty) => Some(x),
            P::Typed(_, t) => {
                self.ck.error(SemaError::TypeMismatch {
                    expected: ty.describe(),
                    found: t.describe(),
                    span,
                    help: None,
                    via: None,
                });
                None
            }
            P::Open(id) => match ty {
                PTy::Enum(en) => match en.index_of(&id.name) {
                    Some(i) => enum_value(*en, i).map(PolicyExpr::Const),
                    None => {
                        self.ck.error(SemaError::UnknownMember {
                            name: id.name.clone(),
                            enumeration: en.with_article(),
                            members: en.listing(),
                            span: id.span,
                            suggestion: suggest(&id.name, en.members().iter().copied()),
                        });
                        None
                    }
                },
                PTy::Accelerator => {
                    // Not in scope: still an error, with the import to add.
                    let e = self.expr_of(id);
                    let _ = self
                        .ck
                        .coerce(Val::Symbol(id), e.span, &Ty::Ref(RefKind::Accelerator));
                    None
                }
                _ => {
                    self.unknown(id);
                    None
                }
            },
            P::Number(d, span) => match number(d, ty) {
                Some(x) => Some(x),
                None => {
                    let e = match ty {
                        PTy::Qty(dim) if *dim != QDim::Money => SemaError::TypeMismatch {
                            expected: ty.describe(),
                            found: format!("the number `{d}`"),
                            span,
                            help: Some(format!("add a unit ({})", dim.units())),
                            via: None,
                        },
                        _ => SemaError::TypeMismatch {
                            expected: ty.describe(),
                            found: format!("the number `{d}`"),
                            span,
                            help: None,
                            via: None,
                        },
                    };
                    self.ck.error(e);
                    None
                }
            },
            P::OpenList(items) => match ty {
                PTy::List(_) => self.check_list(items, ty),
                _ => {
                    self.ck.error(SemaError::TypeMismatch {
                        expected: ty.describe(),
                        found: "a list".into(),
                        span,
                        help: None,
                        via: None,
                    });
                    None
                }
            },
        }
    }

    fn boolean(&mut self, e: &'a Expr) -> Option<PolicyExpr> {
        match self.infer(e)? {
            P::Typed(x, PTy::Bool) => Some(x),
            P::Typed(_, t) => {
                self.ck.error(SemaError::NotBoolean {
                    found: t.describe(),
                    span: e.span,
                });
                None
            }
            P::Open(id) => {
                self.unknown(id);
                None
            }
            P::Number(d, _) => {
                self.ck.error(SemaError::NotBoolean {
                    found: format!("the number `{d}`"),
                    span: e.span,
                });
                None
            }
            P::OpenList(_) => {
                self.ck.error(SemaError::NotBoolean {
                    found: "a list".into(),
                    span: e.span,
                });
                None
            }
        }
    }

    fn compare(
        &mut self,
        op: CompareOp,
        lhs: &'a Expr,
        rhs: &'a Expr,
        span: Span,
    ) -> Option<P<'a>> {
        let a = self.infer(lhs)?;
        let (a, b, ty) = match a {
            P::Typed(x, t) => {
                let b = self.expect_operand(rhs, &t, lhs)?;
                (x, b, t)
            }
            open => {
                let b = self.infer(rhs)?;
                match b {
                    P::Typed(y, t) => {
                        let x = self.close(open, lhs.span, &t)?;
                        (x, y, t)
                    }
                    P::Number(d1, s1) => match open {
                        P::Number(d0, s0) => {
                            // Two plain numbers: compare as exact decimals, folded.
                            let x = number(d0, &PTy::Qty(QDim::Money));
                            let y = number(d1, &PTy::Qty(QDim::Money));
                            let (Some(x), Some(y)) = (x, y) else {
                                return self.err(SemaError::InexactValue {
                                    span: s0.to(s1),
                                    what: "these numbers have more than 6 decimals".into(),
                                    help: None,
                                });
                            };
                            (x, y, PTy::Qty(QDim::Money))
                        }
                        other => {
                            let x = self.close(other, lhs.span, &PTy::Int)?;
                            let y = number(d1, &PTy::Int)?;
                            (x, y, PTy::Int)
                        }
                    },
                    _ => {
                        if let P::Open(id) = open {
                            self.unknown(id);
                        } else {
                            self.ck.error(SemaError::TypeMismatch {
                                expected: "a value with a known type".into(),
                                found: "a list of names".into(),
                                span: lhs.span,
                                help: None,
                                via: None,
                            });
                        }
                        return None;
                    }
                }
            }
        };
        if !matches!(op, CompareOp::Eq | CompareOp::Ne) {
            let ordered = match &ty {
                PTy::Int | PTy::Qty(_) => true,
                PTy::Enum(e) => e.ordered(),
                _ => false,
            };
            if !ordered {
                let what = match &ty {
                    PTy::Enum(e) => format!("members of {}", plural_enum(*e)),
                    PTy::Str | PTy::Accelerator => "strings".into(),
                    other => other.describe(),
                };
                return self.err(SemaError::UnorderedComparison {
                    what,
                    op: op.as_str(),
                    span,
                });
            }
        }
        if matches!(ty, PTy::List(_) | PTy::Data) {
            return self.err(SemaError::TypeMismatch {
                expected: "a value that can be compared".into(),
                found: ty.describe(),
                span: lhs.span,
                help: Some("use `in`, `any` or `all` on lists".into()),
                via: None,
            });
        }
        Some(P::Typed(
            PolicyExpr::Compare(cmp_op(op), Box::new(a), Box::new(b)),
            PTy::Bool,
        ))
    }

    /// The right operand of a comparison whose left operand has type `ty`; reports unit
    /// mismatches naming both units.
    fn expect_operand(&mut self, rhs: &'a Expr, ty: &PTy, lhs: &'a Expr) -> Option<PolicyExpr> {
        if let PTy::Enum(_) = ty {
            return self.expect(rhs, ty);
        }
        let got = self.infer(rhs)?;
        let unit_of = |t: &PTy| match t {
            PTy::Qty(d) => Some(d.with_article().to_string()),
            PTy::Int => Some("a plain number".to_string()),
            _ => None,
        };
        let clash = match (&got, ty) {
            (P::Typed(_, t), want) if !t.compatible(want) => match (unit_of(want), unit_of(t)) {
                (Some(a), Some(b)) => Some((a, b)),
                _ => None,
            },
            (P::Number(d, _), PTy::Qty(dim)) if *dim != QDim::Money => Some((
                dim.with_article().to_string(),
                format!("the plain number `{d}`"),
            )),
            _ => None,
        };
        if let Some((a, b)) = clash {
            self.ck.error(SemaError::UnitMismatch {
                verb: "compare",
                lhs: a,
                rhs: b,
                lhs_span: lhs.span,
                rhs_span: rhs.span,
            });
            return None;
        }
        self.close(got, rhs.span, ty)
    }

    fn membership(&mut self, lhs: &'a Expr, rhs: &'a Expr) -> Option<P<'a>> {
        let list = self.infer(rhs)?;
        let (elem, list) = match list {
            P::Typed(x, PTy::List(t)) => {
                let e = self.expect(lhs, &t)?;
                (e, x)
            }
            P::Typed(_, t) => {
                return self.err(SemaError::TypeMismatch {
                    expected: "a list after `in`".into(),
                    found: t.describe(),
                    span: rhs.span,
                    help: None,
                    via: None,
                });
            }
            P::OpenList(items) => {
                let (x, t) = self.typed(lhs)?;
                let l = self.check_list(items, &PTy::List(Box::new(t)))?;
                (x, l)
            }
            _ => {
                return self.err(SemaError::TypeMismatch {
                    expected: "a list after `in`".into(),
                    found: super::eval::describe_expr(rhs),
                    span: rhs.span,
                    help: None,
                    via: None,
                });
            }
        };
        Some(P::Typed(
            PolicyExpr::In(Box::new(elem), Box::new(list)),
            PTy::Bool,
        ))
    }
}

fn listing(names: &[&str]) -> String {
    let q: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    q.join(", ")
}

fn plural_enum(e: EnumTy) -> String {
    match e {
        EnumTy::EnvClass => "environment classes".into(),
        other => format!("the {} enumeration", other.name()),
    }
}

fn cmp_op(op: CompareOp) -> CmpOp {
    match op {
        CompareOp::Eq => CmpOp::Eq,
        CompareOp::Ne => CmpOp::Ne,
        CompareOp::Lt => CmpOp::Lt,
        CompareOp::Le => CmpOp::Le,
        CompareOp::Gt => CmpOp::Gt,
        CompareOp::Ge => CmpOp::Ge,
    }
}

/// A plain number as a constant of type `ty` (an integer, or money), when it is one.
fn number(d: Dec, ty: &PTy) -> Option<PolicyExpr> {
    match ty {
        PTy::Int => d
            .as_int()
            .and_then(|n| i64::try_from(n).ok())
            .map(|n| PolicyExpr::Const(Value::Int(n))),
        PTy::Qty(QDim::Money) => d
            .scale_to_int(Money::MICROS.into())
            .ok()
            .and_then(|m| i64::try_from(m).ok())
            .map(|m| PolicyExpr::Const(Value::Money(Money(m)))),
        _ => None,
    }
}

/// An enum member as a run-time value, for the enumerations conditions can see.
fn enum_value(e: EnumTy, i: u8) -> Option<Value> {
    let m = e.member(i);
    match e {
        EnumTy::EnvClass => EnvClass::from_name(m).map(Value::EnvClass),
        EnumTy::Connectivity => Connectivity::from_name(m).map(Value::Connectivity),
        EnumTy::Maturity => Maturity::from_name(m).map(Value::Maturity),
        EnumTy::Kind => WorkloadKind::from_name(m).map(Value::Kind),
        EnumTy::Class => WorkloadClass::from_name(m).map(Value::Class),
        EnumTy::Access => Access::from_name(m).map(Value::Access),
        EnumTy::Classification => Classification::from_name(m).map(Value::Classification),
        _ => Some(Value::Str(m.to_string())),
    }
}

/// Checks the body of a policy rule (`quota team("x") { … }`): field paths start afresh,
/// and missing fields are reported against the rule's kind.
fn rule_body<'a>(
    ck: &mut Checker<'a>,
    body: &'a Body,
    schema: &'static BlockSchema,
    sc: ScopeRef,
    anchor: Span,
) -> Fields<'a> {
    ck.path.clear();
    ck.check_body(body, schema, sc, Owner::Block(schema.name), anchor)
}

// ---------------------------------------------------------------- rules

/// Lowers every `policy` item, rules in source order, into `ir.policy`.
pub fn lower_policies<'a>(ck: &mut Checker<'a>, ir: &mut Ir, spans: &mut SpanTable) {
    // Windows first: a `limit` may name a window written after it.
    let mut windows: BTreeMap<String, (u32, Span)> = BTreeMap::new();
    for p in 0..ck.names.policies.len() {
        let def = &ck.names.policies[p];
        let (pname, policy) = (def.name.name.clone(), def.policy);
        for rule in &policy.rules {
            let RuleKind::Window {
                name,
                days,
                start,
                end,
                zone,
            } = &rule.kind
            else {
                continue;
            };
            let days = window_days(ck, days);
            let zone_name = check_zone(ck, &zone.value, zone.span);
            if start.value.minutes >= 24 * 60 {
                ck.error(SemaError::InvalidClockRange {
                    span: start.span,
                    reason: "a window cannot start at 24:00",
                });
            } else if start.value == end.value {
                ck.error(SemaError::InvalidClockRange {
                    span: start.span.to(end.span),
                    reason: "the range is empty: it starts where it ends",
                });
            }
            if let Some((_, first)) = windows.get(&name.name) {
                ck.error(SemaError::DuplicateDefinition {
                    name: name.name.clone(),
                    first: *first,
                    second: name.span,
                });
                continue;
            }
            windows.insert(
                name.name.clone(),
                (ir.policy.windows.len() as u32, name.span),
            );
            ir.policy.windows.push(Window {
                policy: pname.clone(),
                name: name.name.clone(),
                days,
                start: start.value.minutes,
                end: end.value.minutes % (24 * 60),
                zone: zone_name.unwrap_or_else(|| zone.value.clone()),
            });
            spans.windows.push(rule.span);
        }
    }

    let mut entitled: Vec<(Identity, Span)> = Vec::new();
    let mut quotas: Vec<(String, Span)> = Vec::new();
    for p in 0..ck.names.policies.len() {
        let def = &ck.names.policies[p];
        let (pname, policy, sc) = (def.name.name.clone(), def.policy, def.scope);
        for rule in &policy.rules {
            match &rule.kind {
                RuleKind::Deny { reason, condition } => {
                    let mut cond = Cond {
                        ck,
                        sc,
                        params: Vec::new(),
                    };
                    let Some(x) = cond.boolean(condition) else {
                        continue;
                    };
                    ir.policy.denies.push(DenyRule {
                        policy: pname.clone(),
                        reason: reason.value.clone(),
                        condition: x,
                    });
                    spans.denies.push(rule.span);
                }
                RuleKind::Entitle { subject, body } => {
                    let identity = match ck.check(subject, &Ty::Identity, sc) {
                        Some(Val::Identity(kind, name)) => Some(Identity { kind, name }),
                        _ => None,
                    };
                    let f = rule_body(ck, body, &schema::ENTITLE, sc, subject.span);
                    let Some(identity) = identity else { continue };
                    if let Some((_, first)) = entitled.iter().find(|(i, _)| *i == identity) {
                        ck.error(SemaError::DuplicateRule {
                            what: "entitlement",
                            subject: format!("`{identity}`"),
                            first: *first,
                            second: subject.span,
                        });
                        continue;
                    }
                    entitled.push((identity.clone(), subject.span));
                    let accelerators = f.has("accelerators").then(|| {
                        list_of(f.get("accelerators"))
                            .iter()
                            .filter_map(|(v, _)| match v {
                                Val::Item(Def::Const(c), _) => {
                                    ck.canonical_const(*c).map(AcceleratorId)
                                }
                                _ => None,
                            })
                            .collect()
                    });
                    let environments = f.has("environments").then(|| {
                        list_of(f.get("environments"))
                            .iter()
                            .filter_map(|(v, _)| member_of(Some(v)).and_then(EnvClass::from_name))
                            .collect()
                    });
                    ir.policy.entitlements.push(Entitlement {
                        policy: pname.clone(),
                        identity,
                        max_gpu: u32_of(f.get("gpu")),
                        accelerators,
                        environments,
                    });
                    spans.entitlements.push(rule.span);
                }
                RuleKind::Quota { subject, body } => {
                    let team = match ck.check(subject, &Ty::Team, sc) {
                        Some(Val::Team(t)) => Some(t),
                        _ => None,
                    };
                    let f = rule_body(ck, body, &schema::QUOTA, sc, subject.span);
                    let Some(team) = team else { continue };
                    if let Some((_, first)) = quotas.iter().find(|(t, _)| *t == team) {
                        ck.error(SemaError::DuplicateRule {
                            what: "quota",
                            subject: format!("team `{team}`"),
                            first: *first,
                            second: subject.span,
                        });
                        continue;
                    }
                    quotas.push((team.clone(), subject.span));
                    ir.policy.quotas.push(Quota {
                        policy: pname.clone(),
                        team,
                        max_gpu: u32_of(f.get("gpu")).unwrap_or(0),
                    });
                    spans.quotas.push(rule.span);
                }
                RuleKind::Window { .. } | RuleKind::Error => {}
                RuleKind::Limit {
                    selector,
                    value,
                    window,
                    body,
                } => {
                    let sel = lower_selector(ck, selector, value, sc);
                    let win = match windows.get(&window.name) {
                        Some((id, _)) => Some(WindowId(*id)),
                        None => {
                            let names: Vec<&str> = windows.keys().map(String::as_str).collect();
                            ck.error(SemaError::UnknownName {
                                name: window.name.clone(),
                                span: window.span,
                                expected: "a window".into(),
                                suggestion: suggest(&window.name, names.into_iter()),
                                in_module: None,
                            });
                            None
                        }
                    };
                    let f = rule_body(ck, body, &schema::LIMIT, sc, selector.span);
                    let (Some(selector), Some(window)) = (sel, win) else {
                        continue;
                    };
                    ir.policy.limits.push(Limit {
                        policy: pname.clone(),
                        selector,
                        window,
                        max_gpu: u32_of(f.get("gpu")).unwrap_or(0),
                    });
                    spans.limits.push(rule.span);
                }
                RuleKind::Approval { condition, body } => {
                    let above = threshold(
                        ck,
                        condition,
                        "cost_per_day",
                        &Ty::Money,
                        "approval",
                        "approval when cost_per_day > 500",
                        sc,
                    );
                    let f = rule_body(ck, body, &schema::APPROVAL, sc, condition.span);
                    let approvers: Vec<String> = list_of(f.get("approvers"))
                        .iter()
                        .filter_map(|(v, _)| str_of(Some(v)))
                        .collect();
                    let Some(above) = above else { continue };
                    ir.policy.approvals.push(Approval {
                        policy: pname.clone(),
                        cost_per_day_above: Money(i64::try_from(above).unwrap_or(i64::MAX)),
                        approvers,
                    });
                    spans.approvals.push(rule.span);
                }
                RuleKind::Reclaim {
                    selector,
                    value,
                    condition,
                } => {
                    let sel = lower_selector(ck, selector, value, sc);
                    let idle = threshold(
                        ck,
                        condition,
                        "gpu_idle",
                        &Ty::Duration,
                        "reclaim",
                        "reclaim kind notebook when gpu_idle > 30m",
                        sc,
                    );
                    let (Some(selector), Some(idle)) = (sel, idle) else {
                        continue;
                    };
                    ir.policy.reclaims.push(Reclaim {
                        policy: pname.clone(),
                        selector,
                        idle_after: u64::try_from(idle).unwrap_or(0),
                    });
                    spans.reclaims.push(rule.span);
                }
            }
        }
    }
}

/// `NAME > value`: the only condition form of `approval` and `reclaim`.
fn threshold<'a>(
    ck: &mut Checker<'a>,
    condition: &'a Expr,
    name: &str,
    ty: &Ty,
    rule: &'static str,
    form: &'static str,
    sc: ScopeRef,
) -> Option<i128> {
    let ok_shape = match &condition.kind {
        ExprKind::Binary {
            op: BinaryOp::Compare(CompareOp::Gt),
            lhs,
            rhs,
        } => match &lhs.kind {
            ExprKind::Name(id) if id.name == name => Some(rhs),
            _ => None,
        },
        _ => None,
    };
    let Some(rhs) = ok_shape else {
        if !matches!(condition.kind, ExprKind::Error) {
            ck.error(SemaError::InvalidRuleCondition {
                rule,
                span: condition.span,
                form,
            });
        }
        return None;
    };
    match ck.check(rhs, ty, sc)? {
        Val::Qty(_, x) => Some(x),
        _ => None,
    }
}

fn lower_selector<'a>(
    ck: &mut Checker<'a>,
    selector: &Ident,
    value: &'a Expr,
    sc: ScopeRef,
) -> Option<Selector> {
    match selector.name.as_str() {
        "class" => match ck.check(value, &Ty::Enum(EnumTy::Class), sc)? {
            Val::Enum(_, i) => {
                WorkloadClass::from_name(EnumTy::Class.member(i)).map(Selector::Class)
            }
            _ => None,
        },
        "kind" => match ck.check(value, &Ty::Enum(EnumTy::Kind), sc)? {
            Val::Enum(_, i) => WorkloadKind::from_name(EnumTy::Kind.member(i)).map(Selector::Kind),
            _ => None,
        },
        "team" => match &value.kind {
            // `limit team("research") …` and `limit team "research" …` both read well.
            ExprKind::Call { .. } => match ck.check(value, &Ty::Team, sc)? {
                Val::Team(t) => Some(Selector::Team(t)),
                _ => None,
            },
            _ => match ck.check(value, &Ty::Str, sc)? {
                Val::Str(t) => Some(Selector::Team(t)),
                _ => None,
            },
        },
        other => {
            ck.error(SemaError::UnknownSelector {
                name: other.to_string(),
                span: selector.span,
                suggestion: suggest(other, ["class", "kind", "team"].into_iter()),
            });
            None
        }
    }
}

/// `weekdays`, `weekends`, `daily` or a list of days, Monday first, without repeats.
fn window_days(ck: &mut Checker<'_>, days: &Expr) -> Vec<Weekday> {
    use Weekday::*;
    match &days.kind {
        ExprKind::Name(id) => match id.name.as_str() {
            "weekdays" => vec![Mon, Tue, Wed, Thu, Fri],
            "weekends" => vec![Sat, Sun],
            "daily" => Weekday::ALL.to_vec(),
            other => {
                let mut candidates = vec!["weekdays", "weekends", "daily"];
                candidates.extend(EnumTy::Weekday.members());
                ck.error(SemaError::InvalidDays {
                    span: days.span,
                    suggestion: suggest(other, candidates.into_iter()),
                });
                Vec::new()
            }
        },
        ExprKind::List(items) => {
            let mut out: Vec<Weekday> = Vec::new();
            let mut seen: Vec<(Weekday, Span)> = Vec::new();
            for item in items {
                let ExprKind::Name(id) = &item.kind else {
                    ck.error(SemaError::InvalidDays {
                        span: item.span,
                        suggestion: None,
                    });
                    continue;
                };
                match Weekday::from_name(&id.name) {
                    Some(d) => {
                        if let Some((_, first)) = seen.iter().find(|(x, _)| *x == d) {
                            ck.error(SemaError::DuplicateEntry {
                                what: "day".into(),
                                name: id.name.clone(),
                                first: *first,
                                second: item.span,
                            });
                            continue;
                        }
                        seen.push((d, item.span));
                        out.push(d);
                    }
                    None => ck.error(SemaError::InvalidDays {
                        span: item.span,
                        suggestion: suggest(&id.name, EnumTy::Weekday.members().iter().copied()),
                    }),
                }
            }
            out.sort();
            out
        }
        ExprKind::Error => Vec::new(),
        _ => {
            ck.error(SemaError::InvalidDays {
                span: days.span,
                suggestion: None,
            });
            Vec::new()
        }
    }
}

/// The canonical IANA name of `zone`, or a diagnostic.
fn check_zone(ck: &mut Checker<'_>, zone: &str, span: Span) -> Option<String> {
    match jiff::tz::db().get(zone) {
        Ok(tz) => Some(tz.iana_name().unwrap_or(zone).to_string()),
        Err(_) => {
            let names: Vec<String> = jiff::tz::db().available().map(|n| n.to_string()).collect();
            ck.error(SemaError::UnknownTimeZone {
                zone: zone.into(),
                span,
                suggestion: suggest(zone, names.iter().map(String::as_str)),
            });
            None
        }
    }
}
