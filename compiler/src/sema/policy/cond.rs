//! Conditions (`deny … when COND`) type-checked bottom-up into [`PolicyExpr`], with bare
//! names taking their meaning from the other operand and constants folded.

// INVARIANT: `depth` counts lambda parameters from the innermost, found in `params`; catalogue
// ids index the catalogue sized from `names.consts`; a path has a segment at least, and
// `params[0]` is read under `params.len() == 1`.
#![allow(clippy::indexing_slicing)]

use super::*;
use crate::ir::*;
use crate::sema::checker::{Catalogued, Checker};
use crate::sema::error::SemaError;
use crate::sema::resolve::{Def, ScopeRef, Typo, suggest};
use crate::sema::types::{Dec, EnumTy, QDim, RefKind, Ty, Val};
use crate::source::Span;
use crate::syntax::ast::{BinaryOp, CompareOp, Expr, ExprKind, Ident, UnaryOp};

/// A condition sub-expression, typed or still open.
pub(super) enum P<'a> {
    Typed(PolicyExpr, PTy),
    /// A bare name not in scope: its meaning comes from the other operand.
    Open(&'a Ident),
    /// A plain number literal: an integer or money, by the other operand.
    Number(Dec, Span),
    /// A list literal whose element type comes from the other operand.
    OpenList(&'a [Expr]),
}

pub(super) struct Cond<'c, 'a> {
    pub(super) ck: &'c mut Checker<'a>,
    pub(super) sc: ScopeRef,
    /// Lambda parameters, innermost last.
    pub(super) params: Vec<(&'a str, PTy)>,
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
                    found: crate::sema::checker::describe_expr(e),
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
            suggestion_module: None,
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

    pub(super) fn boolean(&mut self, e: &'a Expr) -> Option<PolicyExpr> {
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
                    found: crate::sema::checker::describe_expr(rhs),
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

pub(super) fn listing(names: &[&str]) -> String {
    let q: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    q.join(", ")
}

pub(super) fn plural_enum(e: EnumTy) -> String {
    match e {
        EnumTy::EnvClass => "environment classes".into(),
        other => format!("the {} enumeration", other.name()),
    }
}

pub(super) fn cmp_op(op: CompareOp) -> CmpOp {
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
pub(super) fn number(d: Dec, ty: &PTy) -> Option<PolicyExpr> {
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
pub(super) fn enum_value(e: EnumTy, i: u8) -> Option<Value> {
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
