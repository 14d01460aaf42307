//! Checking: an expression against the type a field expects, top-down (lists, maps,
//! records, calls element by element, bare names as members of the expected enumeration),
//! and coercion of open values; what strings of known shapes mean (digests, taints).
// INVARIANT: const ids index `catalogue`, sized from `names.consts`; unit ids come from
// resolve's `units`; a module path is never empty.
#![allow(clippy::indexing_slicing)]

use super::infer::as_dec;
use super::*;
use crate::ir;
use crate::sema::body::Owner;
use crate::sema::error::SemaError;
use crate::sema::resolve::{Def, ScopeRef, Typo, suggest};
use crate::sema::schema::{self, BlockSchema, Presence};
use crate::sema::types::{ArithError, EnumTy, MapItem, MapKeyVal, QDim, RefKind, Ty, Val};
use crate::source::Span;
use crate::syntax::ast::{BinaryOp, CompareOp, Expr, ExprKind, Ident, MapKey, UnaryOp};

impl<'a> Checker<'a> {
    /// Checks `e` against `ty`, returning its value in the canonical form for `ty`.
    /// `None` means an error was reported (or the expression was a parse hole).
    pub fn check(&mut self, e: &'a Expr, ty: &Ty, sc: ScopeRef) -> Option<Val<'a>> {
        if let Ty::Any = ty {
            return self.infer(e, sc);
        }
        match &e.kind {
            ExprKind::Error => None,
            ExprKind::List(items) => match ty {
                Ty::List(el) => {
                    let mut out = Vec::with_capacity(items.len());
                    for item in items {
                        if let Some(v) = self.check(item, el, sc) {
                            out.push((v, item.span));
                        }
                    }
                    Some(Val::List(out))
                }
                _ => self.shape_mismatch(ty, e),
            },
            ExprKind::Map(entries) => match ty {
                Ty::Map(k, v) => Some(self.check_map(entries, k, v, sc)),
                Ty::MapRecord(schema) => Some(Val::Fields(Box::new(
                    self.check_map_record(entries, schema, sc, e.span),
                ))),
                _ => self.shape_mismatch(ty, e),
            },
            ExprKind::Record { ctor, body } => match ty {
                Ty::OneOf(ctors) => match ctors.iter().find(|c| c.name == ctor.name) {
                    Some(c) => {
                        let fields = self.check_record(body, c.body, ctor, sc);
                        Some(Val::Ctor(c, Some(Box::new(fields))))
                    }
                    None => {
                        self.unknown_ctor(ctor, ty, ctors.iter().map(|c| c.name));
                        None
                    }
                },
                Ty::Record(s) if s.name == ctor.name => {
                    Some(Val::Fields(Box::new(self.check_record(body, s, ctor, sc))))
                }
                Ty::Record(s) => {
                    self.unknown_ctor(ctor, ty, std::iter::once(s.name));
                    None
                }
                _ => self.shape_mismatch(ty, e),
            },
            ExprKind::Call { callee, args } => match ty {
                Ty::Identity => self.check_identity(callee, args, e.span, sc),
                Ty::Team => {
                    let s = self.check_call(callee, args, "team", &Ty::Str, e.span, sc)?;
                    match s {
                        Val::Str(s) => Some(Val::Team(s)),
                        _ => None,
                    }
                }
                Ty::Call(cs) => {
                    let v = self.check_call(callee, args, cs.name, &cs.arg, e.span, sc)?;
                    Some(Val::Call(cs, Box::new(v)))
                }
                _ => self.shape_mismatch(ty, e),
            },
            ExprKind::Binary {
                op: BinaryOp::Compare(op),
                lhs,
                rhs,
            } if matches!(ty, Ty::ServiceReq) => self.check_requirement(*op, lhs, rhs, e.span, sc),
            ExprKind::Member { .. } => match self.std_path(e) {
                Some(v) => self.coerce(v?, e.span, ty),
                None => self.shape_mismatch(ty, e),
            },
            ExprKind::Name(_) if matches!(ty, Ty::ServiceReq) => self.shape_mismatch(ty, e),
            ExprKind::Lambda { .. }
            | ExprKind::Clock(_)
            | ExprKind::Unary {
                op: UnaryOp::Not, ..
            }
            | ExprKind::Binary {
                op: BinaryOp::And | BinaryOp::Or | BinaryOp::Compare(_) | BinaryOp::In,
                ..
            } => self.shape_mismatch(ty, e),
            _ => {
                let v = self.infer(e, sc)?;
                self.coerce(v, e.span, ty)
            }
        }
    }

    pub(super) fn shape_mismatch(&mut self, ty: &Ty, e: &Expr) -> Option<Val<'a>> {
        let mut help = None;
        if let (Ty::ServiceReq, ExprKind::Name(id)) = (ty, &e.kind) {
            help = Some(format!("write `{} >= ga`", id.name));
        }
        if let (Ty::Enum(_) | Ty::OneOf(_), ExprKind::Record { ctor, .. }) = (ty, &e.kind)
            && let Ty::Enum(en) = ty
            && en.index_of(&ctor.name).is_some()
        {
            help = Some(format!("write just `{}`", ctor.name));
        }
        self.mismatch(ty, describe_expr(e), e.span, help);
        None
    }

    pub(super) fn unknown_ctor<'c>(
        &mut self,
        ctor: &Ident,
        ty: &Ty,
        names: impl Iterator<Item = &'c str>,
    ) {
        let e = SemaError::UnknownConstructor {
            ctor: ctor.name.clone(),
            span: self.site(ctor.span),
            expected: ty.describe(),
            suggestion: suggest(&ctor.name, names),
        };
        self.error(e);
    }

    /// Closes an inferred value against `ty`.
    pub fn coerce(&mut self, v: Val<'a>, span: Span, ty: &Ty) -> Option<Val<'a>> {
        if let Ty::Any = ty {
            return Some(v);
        }
        let v = match v {
            Val::Deferred(e, sc) => return self.check(e, ty, sc),
            Val::Item(Def::Const(c), id) => return self.coerce_const(c, id, span, ty),
            Val::Symbol(id) => return self.coerce_symbol(id, ty),
            Val::Item(def, id) => return self.coerce_item(def, id, ty),
            other => other,
        };
        match (ty, v) {
            (Ty::Count, Val::Int(n)) => {
                if n < 0 {
                    self.negative(ty, span);
                    None
                } else if n > i128::from(u32::MAX) {
                    self.out_of_range(n.to_string(), span, "at most 4294967295");
                    None
                } else {
                    Some(Val::Int(n))
                }
            }
            (Ty::Port, Val::Int(n)) => {
                if (1..=65535).contains(&n) {
                    Some(Val::Int(n))
                } else {
                    self.out_of_range(n.to_string(), span, "a port from 1 to 65535");
                    None
                }
            }
            (Ty::Cpu, v @ (Val::Int(_) | Val::Dec(_))) => {
                let d = as_dec(&v);
                if d.is_negative() {
                    self.negative(ty, span);
                    return None;
                }
                match d.scale_to_int(1000) {
                    Ok(m) => Some(Val::Int(m)),
                    Err(ArithError::Inexact) => {
                        let e = SemaError::InexactValue {
                            span: self.site(span),
                            what: format!("`{d}` cores is finer than a millicore"),
                            help: Some(
                                "CPU is counted in thousandths of a core: use at most 3 decimals"
                                    .into(),
                            ),
                        };
                        self.error(e);
                        None
                    }
                    Err(err) => {
                        self.arith_error(err, span, String::new);
                        None
                    }
                }
            }
            (Ty::Money | Ty::Rate, v @ (Val::Int(_) | Val::Dec(_))) => {
                let d = as_dec(&v);
                if d.is_negative() {
                    self.negative(ty, span);
                    return None;
                }
                match d.scale_to_int(ir::Money::MICROS.into()) {
                    Ok(m) if matches!(ty, Ty::Rate) => Some(Val::Rate(m)),
                    Ok(m) => Some(Val::Qty(QDim::Money, m)),
                    Err(ArithError::Inexact) => {
                        let e = SemaError::InexactValue {
                            span: self.site(span),
                            what: format!("`{d}` has more than 6 decimals"),
                            help: Some("money is exact to a millionth of the currency unit".into()),
                        };
                        self.error(e);
                        None
                    }
                    Err(err) => {
                        self.arith_error(err, span, String::new);
                        None
                    }
                }
            }
            (Ty::Rate, Val::Rate(m)) => {
                if m < 0 {
                    self.negative(ty, span);
                    None
                } else {
                    Some(Val::Rate(m))
                }
            }
            (Ty::Size | Ty::Duration | Ty::Bandwidth | Ty::Money, Val::Qty(d, x))
                if ty.dim() == Some(d) =>
            {
                if x < 0 {
                    self.negative(ty, span);
                    None
                } else if x > i128::from(u64::MAX) {
                    self.error(SemaError::Overflow { span });
                    None
                } else {
                    Some(Val::Qty(d, x))
                }
            }
            (Ty::Str, Val::Str(s)) => Some(Val::Str(s)),
            (Ty::Digest, Val::Str(s)) => match digest_problem(&s) {
                Some(reason) => {
                    let span = self.site(span);
                    self.error(SemaError::InvalidDigest {
                        digest: s,
                        span,
                        reason,
                    });
                    None
                }
                None => Some(Val::Str(s)),
            },
            (Ty::Mirror, Val::Str(s)) => match mirror_problem(&s) {
                Some(reason) => {
                    let span = self.site(span);
                    self.error(SemaError::InvalidMirror {
                        text: s,
                        span,
                        reason,
                    });
                    None
                }
                None => Some(Val::Str(s)),
            },
            (Ty::Taint, Val::Str(s)) => match parse_taint(&s) {
                Some(t) => Some(Val::Taint(t)),
                None => {
                    let e = SemaError::InvalidTaint {
                        text: s,
                        span: self.site(span),
                    };
                    self.error(e);
                    None
                }
            },
            (Ty::Bool, Val::Bool(b)) => Some(Val::Bool(b)),
            (Ty::Enum(e), Val::Enum(e2, i)) if *e == e2 => Some(Val::Enum(e2, i)),
            (ty, v) => {
                let help = mismatch_help(ty, &v);
                self.mismatch(ty, v.describe(), span, help);
                None
            }
        }
    }

    pub(super) fn coerce_symbol(&mut self, id: &'a Ident, ty: &Ty) -> Option<Val<'a>> {
        match ty {
            Ty::Enum(e) => match e.index_of(&id.name) {
                Some(i) => Some(Val::Enum(*e, i)),
                None => {
                    let err = SemaError::UnknownMember {
                        name: id.name.clone(),
                        enumeration: e.with_article(),
                        members: e.listing(),
                        span: id.span,
                        suggestion: suggest(&id.name, e.members().iter().copied()),
                    };
                    self.error(err);
                    None
                }
            },
            Ty::OneOf(ctors) => match ctors.iter().find(|c| c.name == id.name) {
                Some(c) if c.bare_allowed() => Some(Val::Ctor(c, None)),
                Some(c) => {
                    let required: Vec<String> = c
                        .body
                        .fields
                        .iter()
                        .filter(|f| f.presence == Presence::Required)
                        .map(|f| format!("{} = …", f.name))
                        .collect();
                    let e = SemaError::TypeMismatch {
                        expected: format!("`{} {{ … }}`", c.name),
                        found: format!("`{}` alone", c.name),
                        span: id.span,
                        help: Some(format!("write `{} {{ {} }}`", c.name, required.join("  "))),
                        via: None,
                    };
                    self.error(e);
                    None
                }
                None => {
                    self.unknown_ctor(id, ty, ctors.iter().map(|c| c.name));
                    None
                }
            },
            _ => {
                let typo = Typo::new(&id.name);
                let mut suggestion = self.suggest_for(ty, id, &typo);
                let (expected, wanted) = match ty {
                    Ty::Ref(k) => (k.with_article().to_string(), Some(*k)),
                    other => (other.describe(), None),
                };
                let in_module = self.module_for(&id.name, wanted);
                let mut suggestion_module = None;
                if suggestion.is_none() && in_module.is_none() {
                    // Nothing in scope is close: a name of the standard library may be.
                    let close = self.names.module_suggestible(&typo);
                    suggestion = typo
                        .best_where(close.into_iter(), |n| self.module_for(n, wanted).is_some());
                    suggestion_module = suggestion
                        .as_deref()
                        .and_then(|s| self.module_for(s, wanted));
                }
                let e = SemaError::UnknownName {
                    name: id.name.clone(),
                    span: id.span,
                    expected,
                    suggestion,
                    in_module,
                    suggestion_module,
                };
                self.error(e);
                None
            }
        }
    }

    /// The standard-library module defining `name` as the wanted kind of thing.
    pub(super) fn module_for(&mut self, name: &str, wanted: Option<RefKind>) -> Option<String> {
        let mut found = None;
        for m in self.names.modules.clone() {
            if let Some((Def::Const(c), _)) = self.names.lookup_qualified(m.path, name) {
                let ok = match wanted {
                    None => true,
                    Some(k) => self.catalogue_kind(c) == Some(k),
                };
                if ok {
                    found = Some(m.path.to_string());
                    break;
                }
            }
        }
        found
    }

    /// The closest name in the scope where `id` was written that could stand where `ty` is
    /// expected. Whether a name could is asked only of those close enough to be picked (the
    /// kind of a constant may need it resolved).
    pub(super) fn suggest_for(&mut self, ty: &Ty, id: &Ident, typo: &Typo<'_>) -> Option<String> {
        // The scope of the identifier: find the unit by file.
        let unit = self
            .names
            .units
            .iter()
            .position(|u| u.file == id.span.file)?;
        let sc = ScopeRef {
            ns: self.names.units[unit].ns,
            unit: unit as u32,
        };
        let close = self.names.suggestible(sc, typo);
        typo.best_where(close.into_iter(), |name| {
            let Some((def, _)) = self.names.lookup(sc, name) else {
                return false;
            };
            match ty {
                Ty::Ref(k) => self.def_kind(def) == Some(*k),
                _ => true,
            }
        })
    }

    /// What kind of thing a definition is, as a reference.
    pub fn def_kind(&mut self, def: Def) -> Option<RefKind> {
        match def {
            Def::Model(_) => Some(RefKind::Model),
            Def::Target(_) => Some(RefKind::Target),
            Def::Workload(_) => Some(RefKind::Workload),
            Def::Policy(_) => None,
            Def::Const(c) => {
                let c = self.canonical_const(c)?;
                match self.resolve_const(c) {
                    Some(Val::Item(Def::Const(_), _)) => self.catalogue_kind(c),
                    Some(Val::Item(other, _)) => self.def_kind(other),
                    _ => None,
                }
            }
        }
    }

    pub(super) fn catalogue_kind(&self, c: u32) -> Option<RefKind> {
        match self.catalogue.get(c as usize)? {
            Some(Catalogued::Accelerator(_)) => Some(RefKind::Accelerator),
            Some(Catalogued::Service(_)) => Some(RefKind::Service),
            _ => None,
        }
    }

    pub(super) fn coerce_item(&mut self, def: Def, id: &'a Ident, ty: &Ty) -> Option<Val<'a>> {
        match ty {
            Ty::Ref(k) if self.def_kind(def) == Some(*k) => return Some(Val::Item(def, id)),
            Ty::Enum(e) => {
                if let Some(i) = e.index_of(&id.name) {
                    return Some(Val::Enum(*e, i));
                }
            }
            Ty::OneOf(ctors) => {
                if let Some(c) = ctors.iter().find(|c| c.name == id.name && c.bare_allowed()) {
                    return Some(Val::Ctor(c, None));
                }
            }
            _ => {}
        }
        let (_, def_span) = self.names.def_name(def);
        let found = match def {
            Def::Const(c) => match self.catalogue_kind(c) {
                Some(k) => k.noun(),
                None => "constant",
            },
            other => other.noun(),
        };
        let e = match ty {
            Ty::Ref(k) => SemaError::WrongKindOfReference {
                name: id.name.clone(),
                span: self.site(id.span),
                expected: k.with_article().into(),
                found: found.into(),
                def: def_span,
            },
            _ => SemaError::TypeMismatch {
                expected: ty.describe(),
                found: format!("the {found} `{}`", id.name),
                span: self.site(id.span),
                help: None,
                via: None,
            },
        };
        self.error(e);
        None
    }

    pub(super) fn coerce_const(
        &mut self,
        c: u32,
        id: &'a Ident,
        span: Span,
        ty: &Ty,
    ) -> Option<Val<'a>> {
        let canon = self.canonical_const(c)?;
        if self.catalogue[canon as usize].is_some() {
            return self.coerce_item(Def::Const(canon), id, ty);
        }
        let v = self.resolve_const(canon)?;
        if self.via.len() >= MAX_CONST_DEPTH {
            return None;
        }
        self.via.push((id, c));
        let r = match v {
            Val::Item(
                def @ (Def::Model(_) | Def::Target(_) | Def::Workload(_) | Def::Policy(_)),
                _,
            ) => self.coerce_item(def, id, ty),
            other => self.coerce(other, span, ty),
        };
        self.via.pop();
        r
    }

    pub(super) fn check_map(
        &mut self,
        entries: &'a [crate::syntax::ast::MapEntry],
        kty: &Ty,
        vty: &Ty,
        sc: ScopeRef,
    ) -> Val<'a> {
        let mut out: Vec<MapItem<'a>> = Vec::with_capacity(entries.len());
        for entry in entries {
            let key = match (kty, &entry.key) {
                (Ty::Str, k) => Some(MapKeyVal::Str(k.text().to_string())),
                (Ty::Ref(_), MapKey::Name(id)) => {
                    let n = self.name(id, sc);
                    match self.coerce(n, id.span, kty) {
                        Some(Val::Item(def, _)) => Some(MapKeyVal::Item(def)),
                        _ => None,
                    }
                }
                (_, k) => {
                    self.mismatch(kty, "a string".into(), k.span(), None);
                    None
                }
            };
            let value = self.check(&entry.value, vty, sc);
            let (Some(key), Some(value)) = (key, value) else {
                continue;
            };
            if let Some(prev) = out.iter().find(|m| m.key == key) {
                let e = SemaError::DuplicateEntry {
                    what: "key".into(),
                    name: entry.key.text().to_string(),
                    first: prev.key_span,
                    second: entry.key.span(),
                };
                self.error(e);
                continue;
            }
            out.push(MapItem {
                key,
                key_text: entry.key.text().to_string(),
                key_span: entry.key.span(),
                value,
                span: entry.span,
            });
        }
        Val::Map(out)
    }

    pub(super) fn check_identity(
        &mut self,
        callee: &'a Expr,
        args: &'a [Expr],
        span: Span,
        sc: ScopeRef,
    ) -> Option<Val<'a>> {
        let ExprKind::Name(f) = &callee.kind else {
            self.mismatch(&Ty::Identity, "a call".into(), span, None);
            return None;
        };
        let Some(kind) = ir::IdentityKind::from_name(&f.name) else {
            let names = ir::IdentityKind::ALL.iter().map(|k| k.as_str());
            let e = SemaError::InvalidCall {
                span: f.span,
                message: format!("`{}` is not a kind of identity", f.name),
                help: Some(match suggest(&f.name, names) {
                    Some(s) => format!("did you mean `{s}`?"),
                    None => "identities are `service_account(\"…\")`, `agent_identity(\"…\")` and `user(\"…\")`".into(),
                }),
            };
            self.error(e);
            return None;
        };
        match self.check_call(callee, args, kind.as_str(), &Ty::Str, span, sc)? {
            Val::Str(s) => Some(Val::Identity(kind, s)),
            _ => None,
        }
    }

    /// `name(arg)` with one argument of type `arg_ty`; returns the argument's value.
    pub(super) fn check_call(
        &mut self,
        callee: &'a Expr,
        args: &'a [Expr],
        name: &'static str,
        arg_ty: &Ty,
        span: Span,
        sc: ScopeRef,
    ) -> Option<Val<'a>> {
        let callee_name = match &callee.kind {
            ExprKind::Name(f) => f.name.as_str(),
            _ => "",
        };
        if callee_name != name {
            let e = SemaError::InvalidCall {
                span: callee.span,
                message: format!("expected `{name}(…)`, found a call of `{callee_name}`"),
                help: Some(match suggest(callee_name, std::iter::once(name)) {
                    Some(s) => format!("did you mean `{s}`?"),
                    None => format!("write `{name}(…)`"),
                }),
            };
            self.error(e);
            return None;
        }
        match args {
            [arg] => self.check(arg, arg_ty, sc),
            _ => {
                let e = SemaError::InvalidCall {
                    span,
                    message: format!("`{name}` takes one argument, found {}", args.len()),
                    help: Some(format!("write `{name}(…)` with {}", arg_ty.describe())),
                };
                self.error(e);
                None
            }
        }
    }

    pub(super) fn check_requirement(
        &mut self,
        op: CompareOp,
        lhs: &'a Expr,
        rhs: &'a Expr,
        span: Span,
        sc: ScopeRef,
    ) -> Option<Val<'a>> {
        if op != CompareOp::Ge {
            let field = match &lhs.kind {
                ExprKind::Name(i) => i.name.clone(),
                _ => "service".into(),
            };
            self.error(SemaError::TypeMismatch {
                expected: Ty::ServiceReq.describe(),
                found: format!("a `{}` comparison", op.as_str()),
                span,
                help: Some(format!("a requirement is a minimum: write `{field} >= ga`")),
                via: None,
            });
            return None;
        }
        let service = self.check(lhs, &Ty::Ref(RefKind::Service), sc);
        let min = self.check(rhs, &Ty::Enum(EnumTy::Maturity), sc);
        match (service, min) {
            (Some(Val::Item(service, _)), Some(Val::Enum(_, min))) => {
                Some(Val::Req { service, min })
            }
            _ => None,
        }
    }

    /// A record's body, checked against its schema.
    pub fn check_record(
        &mut self,
        body: &'a crate::syntax::ast::Body,
        schema: &'static BlockSchema,
        ctor: &'a Ident,
        sc: ScopeRef,
    ) -> crate::sema::body::Fields<'a> {
        self.check_body(body, schema, sc, Owner::Block(schema.name), ctor.span)
    }
}

/// What an expression is, for "found …" when its shape does not fit.
pub fn describe_expr(e: &Expr) -> String {
    match &e.kind {
        ExprKind::List(_) => "a list".into(),
        ExprKind::Map(_) => "a map".into(),
        ExprKind::Record { ctor, .. } => format!("a `{} {{ … }}` record", ctor.name),
        ExprKind::Call { callee, .. } => match &callee.kind {
            ExprKind::Name(f) => format!("a call of `{}`", f.name),
            _ => "a method call".into(),
        },
        ExprKind::Lambda { .. } => "a lambda".into(),
        ExprKind::Clock(_) => "a clock time".into(),
        ExprKind::Member { .. } => "a field access".into(),
        ExprKind::Binary {
            op: BinaryOp::Compare(_) | BinaryOp::In | BinaryOp::And | BinaryOp::Or,
            ..
        }
        | ExprKind::Unary {
            op: UnaryOp::Not, ..
        } => "a condition".into(),
        ExprKind::Str(_) => "a string".into(),
        ExprKind::Name(i) => format!("`{}`", i.name),
        _ => "an expression".into(),
    }
}

pub(super) fn mismatch_help(ty: &Ty, v: &Val<'_>) -> Option<String> {
    match (ty, v) {
        (Ty::Size | Ty::Duration | Ty::Bandwidth, Val::Int(n)) => {
            let dim = ty.dim()?;
            Some(format!(
                "add a unit ({}), e.g. `{n}{}`",
                dim.units(),
                match dim {
                    QDim::Size => "GiB",
                    QDim::Duration => "ms",
                    _ => "Mbps",
                }
            ))
        }
        (Ty::Cpu, Val::Qty(QDim::Duration, _)) => {
            Some("CPU is a number of cores: write `cpu = 0.5` for half a core".into())
        }
        (Ty::Count, Val::Dec(_)) => Some("use a whole number".into()),
        (Ty::Str, Val::Int(n)) => Some(format!("write `\"{n}\"` for a string")),
        _ => None,
    }
}

/// Why a digest is malformed, if it is.
pub fn digest_problem(s: &str) -> Option<&'static str> {
    let Some(hex) = s.strip_prefix("sha256:") else {
        return Some("it does not start with `sha256:`");
    };
    if hex.len() != 64 {
        return Some("the hex part is not 64 digits long");
    }
    if !hex
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Some("the hex part has characters other than `0-9` and `a-f`");
    }
    None
}

/// Why `s` is not a registry mirror `oci://HOST[:PORT][/PATH]`, or `None` when it is one:
/// a host of letters, digits, dots and dashes, an optional port, and path segments of
/// lowercase letters, digits, `.`, `_` and `-` (the distribution spec's repository
/// components), without a tag or digest.
pub fn mirror_problem(s: &str) -> Option<&'static str> {
    let Some(rest) = s.strip_prefix("oci://") else {
        return Some("it does not start with `oci://`");
    };
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (authority, None),
    };
    if host.is_empty()
        || !host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
    {
        return Some("the host is empty or has characters other than letters, digits, `.` and `-`");
    }
    if port.is_some_and(|p| p.is_empty() || p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit())) {
        return Some("the port is not a number");
    }
    if rest.contains('@') {
        return Some("a mirror names a registry, not an artifact: it has no digest");
    }
    if !path.is_empty()
        && !path.split('/').all(|seg| {
            !seg.is_empty()
                && seg.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
                })
        })
    {
        return Some(
            "the path has an empty segment, a tag, or characters other than lowercase letters, digits, `.`, `_` and `-`",
        );
    }
    None
}

/// `key=value:Effect` or `key:Effect`.
pub fn parse_taint(s: &str) -> Option<ir::Taint> {
    let (kv, effect) = s.rsplit_once(':')?;
    if !matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
        return None;
    }
    let (key, value) = match kv.split_once('=') {
        Some((k, v)) => (k, v),
        None => (kv, ""),
    };
    if key.is_empty() || key.contains(char::is_whitespace) {
        return None;
    }
    Some(ir::Taint {
        key: key.into(),
        value: value.into(),
        effect: effect.into(),
    })
}

/// Bare words that mean something without being defined: enum members, bare constructors,
/// day sets and `gpu_hour`.
pub fn is_known_word(name: &str) -> bool {
    EnumTy::ALL.iter().any(|e| e.index_of(name).is_some())
        || schema::ctor_types().iter().any(|(n, _)| *n == name)
        || matches!(name, "gpu_hour" | "weekdays" | "weekends" | "daily")
}
