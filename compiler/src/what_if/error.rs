//! What can be wrong with a what-if file's changes themselves (E0414), as data, and how each
//! becomes a diagnostic. Everything else about the changed spec is checked by semantics.

use crate::diagnostics::{Code, Diagnostic};
use crate::source::Span;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WhatIfError {
    /// `target NAME { offline = true }` for a target the base spec does not define.
    NoSuchTarget { name: String, span: Span },
    /// `offline` in an item that is not a target.
    OfflineNotTarget { kind: &'static str, span: Span },
    /// `offline = …` with a value other than `true`.
    OfflineNotTrue { span: Span },
    /// An offline target with other entries.
    OfflineWithChanges { target: String, span: Span },
}

impl From<&WhatIfError> for Diagnostic {
    fn from(e: &WhatIfError) -> Diagnostic {
        let code = Code::InvalidWhatIf;
        match e {
            WhatIfError::NoSuchTarget { name, span } => Diagnostic::error(
                code,
                format!("the base spec has no target `{name}` to take offline"),
                *span,
            )
            .help("name a target of the spec the what-if file changes"),
            WhatIfError::OfflineNotTarget { kind, span } => Diagnostic::error(
                code,
                format!("`offline` takes a target out of the spec, not a {kind}"),
                *span,
            )
            .help("only `target NAME { offline = true }` takes something out of the spec"),
            WhatIfError::OfflineNotTrue { span } => {
                Diagnostic::error(code, "`offline` can only be `true`", *span)
                    .help("leave the target out of the what-if file to keep it online")
            }
            WhatIfError::OfflineWithChanges { target, span } => Diagnostic::error(
                code,
                format!("target `{target}` is taken offline, so it takes no other change"),
                *span,
            )
            .help("remove this entry, or `offline = true`"),
        }
    }
}
