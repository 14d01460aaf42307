//! Checking expressions against types, and evaluating constants.
//!
//! Two directions meet here. [`Checker::check`] works top-down from the type a field
//! expects: lists, maps, records and calls are checked element by element, and a bare name
//! is read as a member of the expected enumeration (`class = cloud` means the environment
//! class even when a target is called `cloud`). [`Checker::infer`] works bottom-up where
//! nothing is expected (constants, arithmetic operands) and leaves open what only a type can
//! decide ([`Val::Symbol`], [`Val::Deferred`]); [`Checker::coerce`] closes it.
//!
//! Constants are evaluated once, on first use, with cycle detection. A value that came
//! through a constant and does not fit is reported where the constant is used, with a label
//! at its definition.

// INVARIANT: const ids are positions in `names.consts`, and `consts` and `catalogue` are sized
// from it when the checker is built; `const_stack[start..]` starts where `position` found the
// constant; a module path is never empty; unit ids come from resolve's `units`.
#![allow(clippy::indexing_slicing)]

use super::body::Owner;
use super::error::SemaError;
use super::resolve::{Def, Names, ScopeRef, Typo, suggest};
use super::schema::{self, BlockSchema, Presence};
use super::types::{ArithError, Dec, EnumTy, MapItem, MapKeyVal, QDim, RefKind, Ty, Val};
use crate::ir;
use crate::source::Span;
use crate::syntax::ast::{BinaryOp, CompareOp, Expr, ExprKind, Ident, MapKey, UnaryOp};
use crate::syntax::token::Quantity;
use std::collections::BTreeMap;

/// How deep constants may refer to constants before we call it a cycle.
const MAX_CONST_DEPTH: usize = 64;

/// A catalogue entry defined by a `const` whose value is a catalogue record.
#[derive(Clone, Debug)]
pub enum Catalogued {
    Accelerator(ir::Accelerator),
    Service(ir::Service),
}

#[derive(Clone, Debug)]
enum ConstState<'a> {
    Todo,
    InProgress,
    Done(Option<Val<'a>>),
}

/// The state of one analysis: names, errors, constant values, catalogue, span sink.
pub struct Checker<'a> {
    pub names: Names<'a>,
    pub errors: Vec<SemaError>,
    consts: Vec<ConstState<'a>>,
    const_stack: Vec<u32>,
    /// Constants through which the value being coerced came: (use site, constant).
    via: Vec<(&'a Ident, u32)>,
    /// Per constant, its catalogue entry when it defines one.
    pub catalogue: Vec<Option<Catalogued>>,
    /// Unknown names found in constants; reported at the end unless an error already
    /// points there (a use of the constant may have explained it better).
    pub lint: Vec<SemaError>,
    /// Field spans of the item being lowered, keyed by dotted path.
    pub spans: Option<BTreeMap<String, Span>>,
    /// The dotted path of the block being checked.
    pub path: String,
}

impl<'a> Checker<'a> {
    pub fn new(names: Names<'a>, errors: Vec<SemaError>) -> Self {
        let n = names.consts.len();
        Checker {
            names,
            errors,
            consts: vec![ConstState::Todo; n],
            const_stack: Vec::new(),
            via: Vec::new(),
            catalogue: vec![None; n],
            lint: Vec::new(),
            spans: None,
            path: String::new(),
        }
    }

    pub fn error(&mut self, e: SemaError) {
        self.errors.push(e);
    }

    /// Records the span of a field path in the item being lowered.
    pub fn record_span(&mut self, key: &str, span: Span) {
        if let Some(spans) = &mut self.spans {
            // Built by hand: this runs for every entry of every item, and `format!` costs
            // several times a reserve and two copies.
            let mut path = String::with_capacity(self.path.len() + 1 + key.len());
            if !self.path.is_empty() {
                path.push_str(&self.path);
                path.push('.');
            }
            path.push_str(key);
            spans.entry(path).or_insert(span);
        }
    }

    /// Records the span of the current path itself (the entry being checked).
    pub fn record_path_span(&mut self, span: Span) {
        if let Some(spans) = &mut self.spans
            && !spans.contains_key(&self.path)
        {
            spans.insert(self.path.clone(), span);
        }
    }

    // ------------------------------------------------------------ error helpers

    /// The span to report at: the outermost use of a constant when the value came through
    /// one, else `span`.
    fn site(&self, span: Span) -> Span {
        self.via.first().map_or(span, |(id, _)| id.span)
    }

    fn via_info(&self) -> Option<(String, Span)> {
        self.via
            .first()
            .map(|(id, c)| (id.name.clone(), self.names.consts[*c as usize].name.span))
    }

    pub fn mismatch(&mut self, ty: &Ty, found: String, span: Span, help: Option<String>) {
        let e = SemaError::TypeMismatch {
            expected: ty.describe(),
            found,
            span: self.site(span),
            help,
            via: self.via_info(),
        };
        self.error(e);
    }

    fn negative(&mut self, ty: &Ty, span: Span) {
        let e = SemaError::NegativeQuantity {
            span: self.site(span),
            expected: ty.describe(),
        };
        self.error(e);
    }

    fn out_of_range(&mut self, value: String, span: Span, range: &'static str) {
        let e = SemaError::OutOfRange {
            value,
            span: self.site(span),
            range,
        };
        self.error(e);
    }

    fn arith_error(&mut self, err: ArithError, span: Span, what: impl FnOnce() -> String) {
        let e = match err {
            ArithError::Overflow => SemaError::Overflow { span },
            ArithError::DivideByZero => SemaError::DivisionByZero { span },
            ArithError::Inexact => SemaError::InexactValue {
                span,
                what: what(),
                help: None,
            },
        };
        self.error(e);
    }

    // ------------------------------------------------------------ constants

    /// The value of constant `c` (inferred, possibly open), evaluating it on first use.
    pub fn resolve_const(&mut self, c: u32) -> Option<Val<'a>> {
        match &self.consts[c as usize] {
            ConstState::Done(v) => return v.clone(),
            ConstState::InProgress => {
                self.report_cycle(c);
                return None;
            }
            ConstState::Todo => {}
        }
        let def = &self.names.consts[c as usize];
        let (name, value, scope) = (def.name, def.value, def.scope);
        if self.catalogue[c as usize].is_some() {
            let v = Some(Val::Item(Def::Const(c), name));
            self.consts[c as usize] = ConstState::Done(v.clone());
            return v;
        }
        if self.const_stack.len() >= MAX_CONST_DEPTH {
            self.report_cycle(c);
            return None;
        }
        self.consts[c as usize] = ConstState::InProgress;
        self.const_stack.push(c);
        let mut v = self.infer(value, scope);
        match &v {
            // An alias: evaluate the aliased constant too, to find cycles through it.
            Some(Val::Item(Def::Const(other), _)) if self.resolve_const(*other).is_none() => {
                v = None;
            }
            Some(Val::Deferred(e, sc)) => {
                let (e, sc) = (*e, *sc);
                self.lint_expr(e, sc);
            }
            _ => {}
        }
        self.const_stack.pop();
        // A cycle found below may already have settled this constant.
        if let ConstState::InProgress = self.consts[c as usize] {
            self.consts[c as usize] = ConstState::Done(v.clone());
        }
        match &self.consts[c as usize] {
            ConstState::Done(v) => v.clone(),
            _ => None,
        }
    }

    fn report_cycle(&mut self, c: u32) {
        let start = self.const_stack.iter().position(|x| *x == c).unwrap_or(0);
        let cycle: Vec<u32> = self.const_stack[start..].to_vec();
        let name = self.names.consts[c as usize].name;
        let through = cycle
            .iter()
            .skip(1)
            .map(|o| {
                let n = self.names.consts[*o as usize].name;
                (n.name.clone(), n.span)
            })
            .collect();
        self.error(SemaError::ConstCycle {
            name: name.name.clone(),
            span: name.span,
            through,
        });
        for member in cycle {
            self.consts[member as usize] = ConstState::Done(None);
        }
    }

    /// Follows aliases (`const G = H100`) to the constant that holds the value.
    pub fn canonical_const(&mut self, mut c: u32) -> Option<u32> {
        for _ in 0..MAX_CONST_DEPTH {
            match self.resolve_const(c)? {
                Val::Item(Def::Const(next), _) if next != c => c = next,
                _ => return Some(c),
            }
        }
        None
    }

    /// Walks a constant whose value is only checked where it is used, to find cycles and
    /// names that exist nowhere.
    fn lint_expr(&mut self, e: &'a Expr, sc: ScopeRef) {
        match &e.kind {
            ExprKind::Name(id) => match self.names.lookup(sc, &id.name) {
                Some((Def::Const(c), _)) => {
                    self.resolve_const(c);
                }
                Some(_) => {}
                None if is_known_word(&id.name) => {}
                None => {
                    let typo = Typo::new(&id.name);
                    let mut candidates = self.names.suggestible(sc, &typo);
                    for e in EnumTy::ALL {
                        candidates.extend(e.members());
                    }
                    self.lint.push(SemaError::UnknownName {
                        name: id.name.clone(),
                        span: id.span,
                        expected: "a name".into(),
                        suggestion: typo.best(candidates.into_iter()),
                        in_module: self
                            .names
                            .module_defining(&id.name, |_| true)
                            .map(String::from),
                    });
                }
            },
            ExprKind::List(items) => items.iter().for_each(|i| self.lint_expr(i, sc)),
            ExprKind::Map(entries) => entries.iter().for_each(|m| self.lint_expr(&m.value, sc)),
            ExprKind::Record { ctor, body } => {
                let known = schema::ctor_types().iter().any(|(n, _)| *n == ctor.name)
                    || schema::CATALOGUE_RECORDS
                        .iter()
                        .any(|s| s.name == ctor.name);
                if !known {
                    self.lint.push(SemaError::UnknownConstructor {
                        ctor: ctor.name.clone(),
                        span: ctor.span,
                        expected: "a record constructor".into(),
                        suggestion: suggest(
                            &ctor.name,
                            schema::ctor_types().iter().map(|(n, _)| *n),
                        ),
                    });
                }
                for entry in &body.entries {
                    if let crate::syntax::ast::EntryKind::Field { value, .. }
                    | crate::syntax::ast::EntryKind::Bound { value, .. } = &entry.kind
                    {
                        self.lint_expr(value, sc);
                    }
                }
            }
            ExprKind::Call { args, .. } => args.iter().for_each(|a| self.lint_expr(a, sc)),
            ExprKind::Unary { operand, .. } => self.lint_expr(operand, sc),
            ExprKind::Binary { op, lhs, rhs } => {
                self.lint_expr(lhs, sc);
                self.lint_expr(rhs, sc);
                if let BinaryOp::Compare(_) = op {
                    self.lint_comparison(lhs, rhs, sc);
                }
            }
            // Lambdas and member paths only mean something in policy conditions.
            _ => {}
        }
    }

    /// `16GiB < 20ms` in a constant: quantities of different dimensions never compare.
    fn lint_comparison(&mut self, lhs: &'a Expr, rhs: &'a Expr, sc: ScopeRef) {
        let a = self.infer(lhs, sc).and_then(|v| self.value_of(v));
        let b = self.infer(rhs, sc).and_then(|v| self.value_of(v));
        let (Some(a), Some(b)) = (a, b) else { return };
        let dim = |v: &Val<'_>| match v {
            Val::Qty(d, _) => Some(Some(*d)),
            Val::Int(_) | Val::Dec(_) => Some(None),
            _ => None,
        };
        if let (Some(da), Some(db)) = (dim(&a), dim(&b))
            && da != db
        {
            self.unit_mismatch("compare", &a, &b, lhs.span, rhs.span);
        }
    }

    // ------------------------------------------------------------ inference

    /// The value of `e` with no expectation; open where only a type can decide.
    pub fn infer(&mut self, e: &'a Expr, sc: ScopeRef) -> Option<Val<'a>> {
        match &e.kind {
            ExprKind::Error => None,
            ExprKind::Int(n) => Some(Val::Int(i128::from(*n))),
            ExprKind::Decimal(n) => Some(Val::Dec(Dec::from_num(*n))),
            ExprKind::Str(s) => Some(Val::Str(s.clone())),
            ExprKind::Bool(b) => Some(Val::Bool(*b)),
            ExprKind::Quantity(q) => self.quantity(q, e.span),
            ExprKind::Name(id) => Some(self.name(id, sc)),
            ExprKind::Member { .. } => match self.std_path(e) {
                Some(v) => v,
                None => Some(Val::Deferred(e, sc)),
            },
            ExprKind::Unary {
                op: UnaryOp::Neg,
                operand,
            } => {
                let v = self.infer(operand, sc)?;
                let v = self.value_of(v)?;
                self.negate(v, e.span)
            }
            ExprKind::Binary {
                op: op @ (BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div),
                lhs,
                rhs,
            } => self.arith(*op, lhs, rhs, sc, e.span),
            _ => Some(Val::Deferred(e, sc)),
        }
    }

    /// A bare name: an item, a constant (kept as a reference: what it means depends on the
    /// type expected), or an open symbol.
    fn name(&mut self, id: &'a Ident, sc: ScopeRef) -> Val<'a> {
        match self.names.lookup(sc, &id.name) {
            Some((def, _)) => Val::Item(def, id),
            None => Val::Symbol(id),
        }
    }

    /// `std.gpu.H100` written out in full. `None` when `e` is not such a path; `Some(None)`
    /// when it is one but names nothing (reported).
    fn std_path(&mut self, e: &'a Expr) -> Option<Option<Val<'a>>> {
        let mut segments: Vec<&'a Ident> = Vec::new();
        let mut cur = e;
        loop {
            match &cur.kind {
                ExprKind::Member { base, field } => {
                    segments.push(field);
                    cur = base;
                }
                ExprKind::Name(id) if id.name == "std" => {
                    segments.push(id);
                    break;
                }
                _ => return None,
            }
        }
        segments.reverse();
        let (last, module) = segments.split_last()?;
        let path: Vec<&str> = module.iter().map(|i| i.name.as_str()).collect();
        let path = path.join(".");
        if !self.names.is_module(&path) {
            let e = SemaError::UnknownModule {
                suggestion: suggest(&path, self.names.modules.iter().map(|m| m.path)),
                path,
                span: module[0].span.to(module[module.len() - 1].span),
            };
            self.error(e);
            return Some(None);
        }
        match self.names.lookup_qualified(&path, &last.name) {
            Some((def, _)) => Some(Some(Val::Item(def, last))),
            None => {
                let e = SemaError::UnknownImport {
                    module: path,
                    name: last.name.clone(),
                    span: last.span,
                    suggestion: None,
                };
                self.error(e);
                Some(None)
            }
        }
    }

    /// Replaces a reference to a constant by its value (for arithmetic).
    fn value_of(&mut self, v: Val<'a>) -> Option<Val<'a>> {
        let mut v = v;
        for _ in 0..MAX_CONST_DEPTH {
            match v {
                Val::Item(Def::Const(c), _) if self.catalogue[c as usize].is_none() => {
                    v = self.resolve_const(c)?;
                }
                other => return Some(other),
            }
        }
        None
    }

    fn quantity(&mut self, q: &Quantity, span: Span) -> Option<Val<'a>> {
        let dim = QDim::from_dimension(q.unit.dimension());
        let factor = i128::try_from(q.unit.factor()).unwrap_or(i128::MAX);
        match Dec::from_num(q.value).scale_to_int(factor) {
            Ok(v) => Some(Val::Qty(dim, v)),
            Err(err) => {
                self.arith_error(err, span, || {
                    format!("`{q}` is not a whole number of {}s", dim.base_unit())
                });
                None
            }
        }
    }

    fn negate(&mut self, v: Val<'a>, span: Span) -> Option<Val<'a>> {
        match v {
            Val::Int(n) => Some(Val::Int(-n)),
            Val::Dec(d) => Some(Val::Dec(Dec {
                mant: -d.mant,
                scale: d.scale,
            })),
            Val::Qty(dim, x) => Some(Val::Qty(dim, -x)),
            Val::Rate(x) => Some(Val::Rate(-x)),
            other => {
                let found = other.describe();
                self.mismatch(
                    &Ty::Any,
                    found,
                    span,
                    Some("only numbers and quantities can be negated".into()),
                );
                None
            }
        }
    }

    fn arith(
        &mut self,
        op: BinaryOp,
        lhs: &'a Expr,
        rhs: &'a Expr,
        sc: ScopeRef,
        span: Span,
    ) -> Option<Val<'a>> {
        let a = self.infer(lhs, sc);
        // `0.90/gpu_hour`: a price per GPU hour.
        if let (BinaryOp::Div, ExprKind::Name(id)) = (op, &rhs.kind)
            && id.name == "gpu_hour"
            && self.names.lookup(sc, "gpu_hour").is_none()
        {
            let a = self.value_of(a?)?;
            let dec = match a {
                Val::Int(n) => Dec::int(n),
                Val::Dec(d) => d,
                other => {
                    let found = other.describe();
                    self.mismatch(&Ty::Money, found, lhs.span, None);
                    return None;
                }
            };
            return match dec.scale_to_int(ir::Money::MICROS.into()) {
                Ok(m) => Some(Val::Rate(m)),
                Err(err) => {
                    self.arith_error(err, lhs.span, || {
                        format!("`{dec}` has more than 6 decimals")
                    });
                    None
                }
            };
        }
        let b = self.infer(rhs, sc);
        let a = self.value_of(a?)?;
        let b = self.value_of(b?)?;
        let verb = match op {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "subtract",
            BinaryOp::Mul => "multiply",
            _ => "divide",
        };
        let result = match (&a, &b) {
            (Val::Int(_) | Val::Dec(_), Val::Int(_) | Val::Dec(_)) => {
                let (x, y) = (as_dec(&a), as_dec(&b));
                let r = match op {
                    BinaryOp::Add => x.checked_add(y),
                    BinaryOp::Sub => x.checked_sub(y),
                    BinaryOp::Mul => x.checked_mul(y),
                    _ => x.checked_div(y),
                };
                r.map(|d| match d.as_int() {
                    Some(n) => Val::Int(n),
                    None => Val::Dec(d),
                })
            }
            (Val::Qty(d1, x), Val::Qty(d2, y)) if d1 == d2 => {
                let (x, y) = (Dec::int(*x), Dec::int(*y));
                match op {
                    BinaryOp::Add => x.checked_add(y).and_then(|r| whole(*d1, r)),
                    BinaryOp::Sub => x.checked_sub(y).and_then(|r| whole(*d1, r)),
                    // size / size: a plain ratio.
                    BinaryOp::Div => x.checked_div(y).map(|d| match d.as_int() {
                        Some(n) => Val::Int(n),
                        None => Val::Dec(d),
                    }),
                    _ => return self.unit_mismatch(verb, &a, &b, lhs.span, rhs.span),
                }
            }
            (Val::Rate(x), Val::Rate(y)) if matches!(op, BinaryOp::Add | BinaryOp::Sub) => {
                let r = if op == BinaryOp::Add {
                    x.checked_add(*y)
                } else {
                    x.checked_sub(*y)
                };
                r.filter(|v| super::types::fits64(*v))
                    .map(Val::Rate)
                    .ok_or(ArithError::Overflow)
            }
            (Val::Qty(d, x), Val::Int(_) | Val::Dec(_))
                if matches!(op, BinaryOp::Mul | BinaryOp::Div) =>
            {
                let n = as_dec(&b);
                let r = if op == BinaryOp::Mul {
                    Dec::int(*x).checked_mul(n)
                } else {
                    Dec::int(*x).checked_div(n)
                };
                r.and_then(|r| whole(*d, r))
            }
            (Val::Int(_) | Val::Dec(_), Val::Qty(d, x)) if op == BinaryOp::Mul => as_dec(&a)
                .checked_mul(Dec::int(*x))
                .and_then(|r| whole(*d, r)),
            (Val::Rate(x), Val::Int(_) | Val::Dec(_)) if op == BinaryOp::Mul => Dec::int(*x)
                .checked_mul(as_dec(&b))
                .and_then(|r| r.as_int().map(Val::Rate).ok_or(ArithError::Inexact)),
            _ if is_numeric(&a) && is_numeric(&b) => {
                return self.unit_mismatch(verb, &a, &b, lhs.span, rhs.span);
            }
            _ => {
                let (bad, bad_span) = if is_numeric(&a) {
                    (&b, rhs.span)
                } else {
                    (&a, lhs.span)
                };
                let found = bad.describe();
                self.error(SemaError::TypeMismatch {
                    expected: "a number or a quantity".into(),
                    found,
                    span: bad_span,
                    help: Some(format!(
                        "`{}` works on numbers, sizes, durations, bandwidths and money",
                        op.as_str()
                    )),
                    via: None,
                });
                return None;
            }
        };
        match result {
            Ok(v) => Some(v),
            Err(err) => {
                let dim = match (&a, &b) {
                    (Val::Qty(d, _), _) | (_, Val::Qty(d, _)) => Some(*d),
                    _ => None,
                };
                self.arith_error(err, span, || match dim {
                    Some(d) => format!("the result is not a whole number of {}s", d.base_unit()),
                    None => "the result has no exact decimal value".into(),
                });
                None
            }
        }
    }

    fn unit_mismatch(
        &mut self,
        verb: &'static str,
        a: &Val<'a>,
        b: &Val<'a>,
        lhs_span: Span,
        rhs_span: Span,
    ) -> Option<Val<'a>> {
        self.error(SemaError::UnitMismatch {
            verb,
            lhs: unit_noun(a),
            rhs: unit_noun(b),
            lhs_span,
            rhs_span,
        });
        None
    }

    // ------------------------------------------------------------ checking

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

    fn shape_mismatch(&mut self, ty: &Ty, e: &Expr) -> Option<Val<'a>> {
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

    fn unknown_ctor<'c>(&mut self, ctor: &Ident, ty: &Ty, names: impl Iterator<Item = &'c str>) {
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
            (Ty::Digest, Val::Str(s)) => {
                if let Some(reason) = digest_problem(&s) {
                    let e = SemaError::InvalidDigest {
                        digest: s,
                        span: self.site(span),
                        reason,
                    };
                    self.error(e);
                    None
                } else {
                    Some(Val::Str(s))
                }
            }
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

    fn coerce_symbol(&mut self, id: &'a Ident, ty: &Ty) -> Option<Val<'a>> {
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
                let suggestion = self.suggest_for(ty, id, &typo);
                let (expected, wanted) = match ty {
                    Ty::Ref(k) => (k.with_article().to_string(), Some(*k)),
                    other => (other.describe(), None),
                };
                let in_module = self.module_for(&id.name, wanted);
                let e = SemaError::UnknownName {
                    name: id.name.clone(),
                    span: id.span,
                    expected,
                    suggestion,
                    in_module,
                };
                self.error(e);
                None
            }
        }
    }

    /// The standard-library module defining `name` as the wanted kind of thing.
    fn module_for(&mut self, name: &str, wanted: Option<RefKind>) -> Option<String> {
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
    fn suggest_for(&mut self, ty: &Ty, id: &Ident, typo: &Typo<'_>) -> Option<String> {
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

    fn catalogue_kind(&self, c: u32) -> Option<RefKind> {
        match self.catalogue.get(c as usize)? {
            Some(Catalogued::Accelerator(_)) => Some(RefKind::Accelerator),
            Some(Catalogued::Service(_)) => Some(RefKind::Service),
            _ => None,
        }
    }

    fn coerce_item(&mut self, def: Def, id: &'a Ident, ty: &Ty) -> Option<Val<'a>> {
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

    fn coerce_const(&mut self, c: u32, id: &'a Ident, span: Span, ty: &Ty) -> Option<Val<'a>> {
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

    fn check_map(
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

    fn check_identity(
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
    fn check_call(
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

    fn check_requirement(
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
    ) -> super::body::Fields<'a> {
        self.check_body(body, schema, sc, Owner::Block(schema.name), ctor.span)
    }
}

fn as_dec(v: &Val<'_>) -> Dec {
    match v {
        Val::Int(n) => Dec::int(*n),
        Val::Dec(d) => *d,
        _ => Dec::int(0),
    }
}

fn is_numeric(v: &Val<'_>) -> bool {
    matches!(v, Val::Int(_) | Val::Dec(_) | Val::Qty(..) | Val::Rate(_))
}

/// A quantity result must be a whole number of base units.
fn whole<'a>(dim: QDim, d: Dec) -> Result<Val<'a>, ArithError> {
    d.as_int()
        .map(|n| Val::Qty(dim, n))
        .ok_or(ArithError::Inexact)
}

/// `a size`, `a number`: what a value measures, for unit mismatches.
fn unit_noun(v: &Val<'_>) -> String {
    match v {
        Val::Qty(d, _) => d.with_article().into(),
        Val::Int(_) | Val::Dec(_) => "a plain number".into(),
        Val::Rate(_) => "a price per GPU hour".into(),
        other => other.describe(),
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

fn mismatch_help(ty: &Ty, v: &Val<'_>) -> Option<String> {
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
