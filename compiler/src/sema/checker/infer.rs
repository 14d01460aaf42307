//! Inference: the value of an expression where nothing is expected (constants, arithmetic
//! operands), left open where only a type can decide; arithmetic on quantities and money.

// INVARIANT: a module path is never empty (the parser gives one segment at least); const
// ids index `catalogue`, sized from `names.consts`.
#![allow(clippy::indexing_slicing)]

use super::*;
use crate::ir;
use crate::sema::error::SemaError;
use crate::sema::resolve::{Def, ScopeRef, suggest};
use crate::sema::types::{ArithError, Dec, QDim, Ty, Val};
use crate::source::Span;
use crate::syntax::ast::{BinaryOp, Expr, ExprKind, Ident, UnaryOp};
use crate::syntax::token::Quantity;

impl<'a> Checker<'a> {
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
    pub(super) fn name(&mut self, id: &'a Ident, sc: ScopeRef) -> Val<'a> {
        match self.names.lookup(sc, &id.name) {
            Some((def, _)) => Val::Item(def, id),
            None => Val::Symbol(id),
        }
    }

    /// `std.gpu.H100` written out in full. `None` when `e` is not such a path; `Some(None)`
    /// when it is one but names nothing (reported).
    pub(super) fn std_path(&mut self, e: &'a Expr) -> Option<Option<Val<'a>>> {
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
    pub(super) fn value_of(&mut self, v: Val<'a>) -> Option<Val<'a>> {
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

    pub(super) fn quantity(&mut self, q: &Quantity, span: Span) -> Option<Val<'a>> {
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

    pub(super) fn negate(&mut self, v: Val<'a>, span: Span) -> Option<Val<'a>> {
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

    pub(super) fn arith(
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
                r.filter(|v| crate::sema::types::fits64(*v))
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

    pub(super) fn unit_mismatch(
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
}

pub(super) fn as_dec(v: &Val<'_>) -> Dec {
    match v {
        Val::Int(n) => Dec::int(*n),
        Val::Dec(d) => *d,
        _ => Dec::int(0),
    }
}

pub(super) fn is_numeric(v: &Val<'_>) -> bool {
    matches!(v, Val::Int(_) | Val::Dec(_) | Val::Qty(..) | Val::Rate(_))
}

/// A quantity result must be a whole number of base units.
pub(super) fn whole<'a>(dim: QDim, d: Dec) -> Result<Val<'a>, ArithError> {
    d.as_int()
        .map(|n| Val::Qty(dim, n))
        .ok_or(ArithError::Inexact)
}

/// `a size`, `a number`: what a value measures, for unit mismatches.
pub(super) fn unit_noun(v: &Val<'_>) -> String {
    match v {
        Val::Qty(d, _) => d.with_article().into(),
        Val::Int(_) | Val::Dec(_) => "a plain number".into(),
        Val::Rate(_) => "a price per GPU hour".into(),
        other => other.describe(),
    }
}
