//! Constants: evaluated once, on first use, with cycle detection; unknown names in them
//! linted and reported unless a use explained them better.
// INVARIANT: const ids are positions in `names.consts`, and `consts` is sized from it when
// the checker is built; `const_stack[start..]` starts where `position` found the constant.
#![allow(clippy::indexing_slicing)]

use super::*;
use crate::sema::error::SemaError;
use crate::sema::resolve::{Def, ScopeRef, Typo, suggest};
use crate::sema::schema::{self};
use crate::sema::types::{EnumTy, Val};
use crate::syntax::ast::{BinaryOp, Expr, ExprKind};

impl<'a> Checker<'a> {
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

    pub(super) fn report_cycle(&mut self, c: u32) {
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
    pub(super) fn lint_expr(&mut self, e: &'a Expr, sc: ScopeRef) {
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
                    let mut suggestion = typo.best(candidates.into_iter());
                    let in_module = self.names.module_defining(&id.name, |_| true);
                    let mut suggestion_module = None;
                    if suggestion.is_none() && in_module.is_none() {
                        // Nothing in scope is close: a name of the standard library may be.
                        suggestion = typo.best(self.names.module_suggestible(&typo).into_iter());
                        suggestion_module = suggestion
                            .as_deref()
                            .and_then(|s| self.names.module_defining(s, |_| true))
                            .map(String::from);
                    }
                    self.lint.push(SemaError::UnknownName {
                        name: id.name.clone(),
                        span: id.span,
                        expected: "a name".into(),
                        suggestion,
                        in_module: in_module.map(String::from),
                        suggestion_module,
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
    pub(super) fn lint_comparison(&mut self, lhs: &'a Expr, rhs: &'a Expr, sc: ScopeRef) {
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
}
