//! Checking a block's entries against its schema, for every block kind at once: unknown
//! fields (with "did you mean"), fields written in the wrong form, duplicates, missing
//! required fields, and each value against its field's type.

// INVARIANT: `index` is the position of a field in the schema whose fields `slots` was sized
// from (`Fields::new`).
#![allow(clippy::indexing_slicing)]

use super::checker::Checker;
use super::error::SemaError;
use super::resolve::{ScopeRef, suggest};
use super::schema::{BlockSchema, Presence, Shape};
use super::types::{Ty, Val};
use crate::source::Span;
use crate::syntax::ast::{Body, CompareOp, EntryKind, Ident, MapEntry, MapKey};
use std::fmt;

/// The checked entries of one block, per schema field.
#[derive(Clone, Debug)]
pub struct Fields<'a> {
    pub schema: &'static BlockSchema,
    /// The span missing fields are reported at (the item's name, the record's constructor).
    pub anchor: Span,
    /// Indexed like `schema.fields`.
    pub slots: Vec<Vec<Slot<'a>>>,
}

/// One entry given for a field.
#[derive(Clone, Debug)]
pub struct Slot<'a> {
    pub label: Option<&'a Ident>,
    pub key_span: Span,
    /// The whole entry.
    pub span: Span,
    /// `None` when the value did not check (already reported).
    pub value: Option<Val<'a>>,
}

impl<'a> Fields<'a> {
    fn index(&self, name: &str) -> Option<usize> {
        self.schema.field(name).map(|(i, _)| i)
    }

    /// Every entry given for `name`.
    pub fn all(&self, name: &str) -> &[Slot<'a>] {
        match self.index(name) {
            Some(i) => &self.slots[i],
            None => &[],
        }
    }

    pub fn slot(&self, name: &str) -> Option<&Slot<'a>> {
        self.all(name).first()
    }

    /// The value of `name`, when given and well typed.
    pub fn get(&self, name: &str) -> Option<&Val<'a>> {
        self.slot(name).and_then(|s| s.value.as_ref())
    }

    /// Whether `name` was written at all (even with an ill-typed value).
    pub fn has(&self, name: &str) -> bool {
        !self.all(name).is_empty()
    }

    pub fn span(&self, name: &str) -> Span {
        self.slot(name).map_or(self.anchor, |s| s.span)
    }
}

impl<'a> Checker<'a> {
    /// Checks `body` against `schema`. `owner` names the block in messages about missing
    /// fields (`workload \`vision\``); `anchor` is where those are reported.
    pub fn check_body(
        &mut self,
        body: &'a Body,
        schema: &'static BlockSchema,
        sc: ScopeRef,
        owner: Owner<'_>,
        anchor: Span,
    ) -> Fields<'a> {
        let mut fields = Fields {
            schema,
            anchor,
            slots: vec![Vec::new(); schema.fields.len()],
        };
        for entry in &body.entries {
            let (key, label, value) = match &entry.kind {
                EntryKind::Field { key, label, value } => {
                    (key, label.as_ref(), EntryValue::Expr(value))
                }
                EntryKind::Block { key, label, body } => {
                    (key, label.as_ref(), EntryValue::Block(body))
                }
                EntryKind::Bound { key, op, value } => (key, None, EntryValue::Bound(*op, value)),
                EntryKind::Error => continue,
            };
            let Some((index, field)) = schema.field(&key.name) else {
                let e = SemaError::UnknownField {
                    field: key.name.clone(),
                    block: schema.name,
                    span: key.span,
                    suggestion: suggest(&key.name, schema.fields.iter().map(|f| f.name)),
                    fields: schema.key_listing(),
                };
                self.error(e);
                continue;
            };
            // A field written in the wrong form still counts as given (no "missing" error).
            let fits = self.shape_fits(&field.shape, key, label, &value, entry.span);
            // Duplicates: a plain field once; a labelled one once per label.
            let previous = fields.slots[index]
                .iter()
                .find(|s| s.label.map(|l| &l.name) == label.map(|l| &l.name));
            if let Some(prev) = previous {
                let e = match label {
                    Some(l) => SemaError::DuplicateEntry {
                        what: key.name.clone(),
                        name: l.name.clone(),
                        first: prev.key_span,
                        second: key.span.to(l.span),
                    },
                    None => SemaError::DuplicateField {
                        field: key.name.clone(),
                        first: prev.key_span,
                        second: key.span,
                    },
                };
                self.error(e);
                continue;
            }
            if !fits {
                fields.slots[index].push(Slot {
                    label,
                    key_span: key.span,
                    span: entry.span,
                    value: None,
                });
                continue;
            }
            // The entry's dotted path (`data.images.max_latency`), appended in place and
            // cut back after: no allocation per entry beyond the span table's key.
            let outer = self.path.len();
            self.push_path(&key.name);
            if let Some(l) = label {
                self.path.push('.');
                self.path.push_str(&l.name);
            }
            self.record_path_span(entry.span);
            let value = match (value, &field.shape) {
                (EntryValue::Expr(e), Shape::Value(ty) | Shape::Labelled(ty)) => {
                    self.check(e, ty, sc)
                }
                (EntryValue::Bound(_, e), Shape::Bound(ty)) => self.check(e, ty, sc),
                (EntryValue::Block(b), Shape::Block(s) | Shape::LabelledBlock(s)) => {
                    let owner = match label {
                        Some(l) => Owner::Named(s.name, &l.name),
                        None => Owner::Block(s.name),
                    };
                    let inner = self.check_body(b, s, sc, owner, key.span);
                    Some(Val::Fields(Box::new(inner)))
                }
                _ => None,
            };
            self.path.truncate(outer);
            fields.slots[index].push(Slot {
                label,
                key_span: label.map_or(key.span, |l| key.span.to(l.span)),
                span: entry.span,
                value,
            });
        }
        // A body the parser could not read completely may hold the "missing" field in the
        // part it skipped: do not guess.
        if !body
            .entries
            .iter()
            .any(|e| matches!(e.kind, EntryKind::Error))
        {
            self.report_missing(&fields, owner, anchor);
        }
        fields
    }

    /// Appends `key` to the dotted path of the block being checked.
    fn push_path(&mut self, key: &str) {
        if !self.path.is_empty() {
            self.path.push('.');
        }
        self.path.push_str(key);
    }

    fn report_missing(&mut self, fields: &Fields<'a>, owner: Owner<'_>, anchor: Span) {
        for (i, f) in fields.schema.fields.iter().enumerate() {
            if matches!(f.presence, Presence::Required | Presence::AtLeastOne)
                && fields.slots[i].is_empty()
            {
                self.error(SemaError::MissingField {
                    field: f.name,
                    block: owner.to_string(),
                    span: anchor,
                    example: f.shape.example(f.name),
                });
            }
        }
    }

    /// Whether the entry is written the way the field's shape says; reports when not.
    fn shape_fits(
        &mut self,
        shape: &Shape,
        key: &Ident,
        label: Option<&Ident>,
        value: &EntryValue<'_>,
        span: Span,
    ) -> bool {
        let ok = match (shape, value) {
            (Shape::Value(_), EntryValue::Expr(_)) | (Shape::Block(_), EntryValue::Block(_)) => {
                label.is_none()
            }
            (Shape::Labelled(_), EntryValue::Expr(_))
            | (Shape::LabelledBlock(_), EntryValue::Block(_)) => label.is_some(),
            (Shape::Bound(_), EntryValue::Bound(op, _)) => {
                if *op != CompareOp::Le {
                    self.error(SemaError::InvalidBound {
                        field: key.name.clone(),
                        op: op.as_str(),
                        span,
                    });
                    return false;
                }
                true
            }
            _ => false,
        };
        if !ok {
            self.error(SemaError::WrongEntryShape {
                field: key.name.clone(),
                span,
                expected: shape.example(&key.name),
            });
        }
        ok
    }

    /// `{ gpu_hour: 0.90 }`: a map whose keys are the fields of `schema`.
    pub fn check_map_record(
        &mut self,
        entries: &'a [MapEntry],
        schema: &'static BlockSchema,
        sc: ScopeRef,
        span: Span,
    ) -> Fields<'a> {
        let mut fields = Fields {
            schema,
            anchor: span,
            slots: vec![Vec::new(); schema.fields.len()],
        };
        for entry in entries {
            let name = entry.key.text();
            let Some((index, field)) = schema.field(name) else {
                let e = SemaError::UnknownField {
                    field: name.to_string(),
                    block: schema.name,
                    span: entry.key.span(),
                    suggestion: suggest(name, schema.fields.iter().map(|f| f.name)),
                    fields: schema.key_listing(),
                };
                self.error(e);
                continue;
            };
            if let Some(prev) = fields.slots[index].first() {
                let e = SemaError::DuplicateField {
                    field: name.to_string(),
                    first: prev.key_span,
                    second: entry.key.span(),
                };
                self.error(e);
                continue;
            }
            let ty: Ty = match field.shape {
                Shape::Value(ty) => ty,
                _ => Ty::Any,
            };
            self.record_span(name, entry.span);
            let value = self.check(&entry.value, &ty, sc);
            let label = match &entry.key {
                MapKey::Name(_) | MapKey::Str(_) => None,
            };
            fields.slots[index].push(Slot {
                label,
                key_span: entry.key.span(),
                span: entry.span,
                value,
            });
        }
        self.report_missing(&fields, Owner::Block(schema.name), span);
        fields
    }
}

/// The block that missing fields are reported against, written out only when one is
/// missing (formatting it for every block would cost more than checking most of them).
#[derive(Clone, Copy, Debug)]
pub enum Owner<'n> {
    /// A record or an unlabelled block: `` `resources` ``.
    Block(&'n str),
    /// A named item or a labelled block: `` workload `vision` ``, `` data `images` ``.
    Named(&'n str, &'n str),
}

impl fmt::Display for Owner<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Owner::Block(kind) => write!(f, "`{kind}`"),
            Owner::Named(kind, name) => write!(f, "{kind} `{name}`"),
        }
    }
}

/// An entry's right-hand side.
enum EntryValue<'a> {
    Expr(&'a crate::syntax::ast::Expr),
    Block(&'a Body),
    Bound(CompareOp, &'a crate::syntax::ast::Expr),
}
