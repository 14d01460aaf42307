//! Diagnostics in the neutral text forms the tests snapshot and `docs/diagnostics.md`
//! shows: shared by the tests of every layer that reports diagnostics.

use berth_compiler::diagnostics::Diagnostic;
use berth_compiler::source::{SourceMap, Span};
use std::fmt::Write as _;

/// One line per diagnostic and per label/note/help, with `file:line:col` positions.
pub fn render(map: &SourceMap, diags: &[Diagnostic]) -> String {
    let pos = |span: Span| match map.get(span.file) {
        Some(f) => {
            let lc = f.line_col(span.start);
            format!("{}:{}:{}", f.name, lc.line, lc.column)
        }
        None => "<std>".to_string(),
    };
    let text = |span: Span| {
        map.get(span.file)
            .map(|f| f.slice(span).to_string())
            .unwrap_or_default()
    };
    let mut out = String::new();
    for d in diags {
        let _ = writeln!(
            out,
            "{}[{}] {}: {}",
            severity(d),
            d.code,
            pos(d.primary.span),
            d.message
        );
        let _ = writeln!(
            out,
            "  primary `{}`: {}",
            text(d.primary.span),
            d.primary.message
        );
        for l in &d.labels {
            let _ = writeln!(
                out,
                "  label {} `{}`: {}",
                pos(l.span),
                text(l.span),
                l.message
            );
        }
        notes_and_help(&mut out, d);
    }
    out
}

pub fn severity(d: &Diagnostic) -> &'static str {
    if d.is_error() { "error" } else { "warning" }
}

/// The form of `docs/diagnostics.md`'s examples, for a file named `example.berth`.
pub fn documented(map: &SourceMap, diags: &[Diagnostic]) -> String {
    let mut out = String::new();
    for d in diags {
        let f = map.get(d.primary.span.file);
        let lc = |s: Span| f.map(|f| f.line_col(s.start));
        let text = |s: Span| f.map(|f| f.slice(s).to_string()).unwrap_or_default();
        let _ = writeln!(out, "{}[{}]: {}", severity(d), d.code, d.message);
        if let Some(p) = lc(d.primary.span) {
            let _ = writeln!(out, "  --> example.berth:{}:{}", p.line, p.column);
        }
        if d.primary.message.is_empty() {
            let _ = writeln!(out, "  primary `{}`", text(d.primary.span));
        } else {
            let _ = writeln!(
                out,
                "  primary `{}`: {}",
                text(d.primary.span),
                d.primary.message
            );
        }
        for l in &d.labels {
            let line = lc(l.span).map_or(0, |p| p.line);
            let _ = writeln!(
                out,
                "  label `{}` (line {line}): {}",
                text(l.span),
                l.message
            );
        }
        notes_and_help(&mut out, d);
    }
    out
}

fn notes_and_help(out: &mut String, d: &Diagnostic) {
    for n in &d.notes {
        let _ = writeln!(out, "  note: {n}");
    }
    if let Some(h) = &d.help {
        let _ = writeln!(out, "  help: {h}");
    }
}
