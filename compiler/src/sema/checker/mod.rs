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

use super::error::SemaError;
use super::resolve::Names;
use super::types::{ArithError, Ty, Val};
use crate::ir;
use crate::source::Span;
use crate::syntax::ast::Ident;
use std::collections::BTreeMap;

mod check;
mod consts;
mod infer;

pub use check::{describe_expr, is_known_word};

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

// INVARIANT: const ids, from resolve, are positions in `names.consts`.
#[allow(clippy::indexing_slicing)]
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
}
