//! The one diagnostic model used by every stage, the command line and the language server.
//!
//! Stages report failures as their own typed error enums (spans and typed fields, e.g.
//! `syntax::LexError`); each enum turns itself into a [`Diagnostic`] next to its definition.
//! A `Diagnostic` is plain data: a stable [`Code`], a severity, a message, a primary label,
//! secondary labels, notes and help. Rendering happens in one place, [`render`], for
//! terminals (ariadne) and JSON.
//!
//! Message style (Cedar's rules): lowercase, no final period, user input in backticks, no Rust
//! type names; extra sentences go in help, notes and labels.

mod codes;
pub mod render;
pub mod sarif;

pub use codes::Code;

use crate::source::Span;
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

/// A span with an explanation. The primary label's message may be empty.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Label {
    pub span: Span,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    pub code: Code,
    pub severity: Severity,
    pub message: String,
    pub primary: Label,
    pub labels: Vec<Label>,
    pub notes: Vec<String>,
    pub help: Option<String>,
}

impl Diagnostic {
    /// An error with `message` whose primary label (without text) is `span`.
    pub fn error(code: Code, message: impl Into<String>, span: Span) -> Self {
        Diagnostic {
            code,
            severity: Severity::Error,
            message: message.into(),
            primary: Label {
                span,
                message: String::new(),
            },
            labels: Vec::new(),
            notes: Vec::new(),
            help: None,
        }
    }

    pub fn warning(code: Code, message: impl Into<String>, span: Span) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(code, message, span)
        }
    }

    /// Text on the primary label.
    pub fn primary_label(mut self, message: impl Into<String>) -> Self {
        self.primary.message = message.into();
        self
    }

    pub fn label(mut self, span: Span, message: impl Into<String>) -> Self {
        self.labels.push(Label {
            span,
            message: message.into(),
        });
        self
    }

    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }

    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// Sort key giving a deterministic order: file, position, code.
    pub fn sort_key(&self) -> (u32, u32, u32, Code) {
        let s = self.primary.span;
        (s.file.0, s.start, s.end, self.code)
    }
}

/// Sorts diagnostics into their reporting order and drops exact duplicates.
pub fn sort_and_dedup(diags: &mut Vec<Diagnostic>) {
    diags.sort_by(|a, b| {
        a.sort_key()
            .cmp(&b.sort_key())
            .then(a.message.cmp(&b.message))
    });
    diags.dedup();
}
