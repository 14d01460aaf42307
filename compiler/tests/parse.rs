//! Parser tests. Data-driven: every `tests/data/parse/ok/*.berth` must parse without
//! diagnostics (snapshot: the tree); every `tests/data/parse/err/*.berth` must produce
//! diagnostics (snapshot: the diagnostics in plain text, then the recovered tree).

use berth_compiler::diagnostics::Diagnostic;
use berth_compiler::source::{FileId, SourceFile, Span};
use berth_compiler::syntax::ast_dump::dump;
use berth_compiler::syntax::parse_file;
use std::fmt::Write;

/// `line:col-line:col` of a span.
fn pos(file: &SourceFile, span: Span) -> String {
    let a = file.line_col(span.start);
    let b = file.line_col(span.end);
    format!("{}:{}-{}:{}", a.line, a.column, b.line, b.column)
}

/// Diagnostics as plain text: code, message, primary span and label, other labels, notes, help.
fn render(file: &SourceFile, diags: &[Diagnostic]) -> String {
    let mut out = String::new();
    for d in diags {
        let _ = writeln!(
            out,
            "{} {}: {}",
            d.code,
            pos(file, d.primary.span),
            d.message
        );
        if !d.primary.message.is_empty() {
            let _ = writeln!(out, "  | {}", d.primary.message);
        }
        for l in &d.labels {
            let _ = writeln!(out, "  = {} {}", pos(file, l.span), l.message);
        }
        for n in &d.notes {
            let _ = writeln!(out, "  note: {n}");
        }
        if let Some(h) = &d.help {
            let _ = writeln!(out, "  help: {h}");
        }
    }
    out
}

fn check_ok(text: &str) -> String {
    let parsed = parse_file(FileId(0), text);
    let file = SourceFile::new(FileId(0), "test.berth", text);
    assert!(
        parsed.diagnostics.is_empty(),
        "unexpected diagnostics:\n{}",
        render(&file, &parsed.diagnostics)
    );
    dump(&parsed.ast)
}

fn check_err(text: &str) -> String {
    let parsed = parse_file(FileId(0), text);
    let file = SourceFile::new(FileId(0), "test.berth", text);
    assert!(
        !parsed.diagnostics.is_empty(),
        "expected diagnostics, got none"
    );
    format!(
        "{}\n{}",
        render(&file, &parsed.diagnostics),
        dump(&parsed.ast)
    )
}

#[test]
fn ok_cases() {
    insta::glob!("data/parse/ok/*.berth", |path| {
        let text = std::fs::read_to_string(path).expect("test data is readable");
        insta::assert_snapshot!(check_ok(&text));
    });
}

#[test]
fn err_cases() {
    insta::glob!("data/parse/err/*.berth", |path| {
        let text = std::fs::read_to_string(path).expect("test data is readable");
        insta::assert_snapshot!(check_err(&text));
    });
}

/// The embedded standard library is real-world input: it must parse without a diagnostic.
#[test]
fn stdlib_parses_cleanly() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../stdlib");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("stdlib folder exists") {
        let path = entry.expect("readable entry").path();
        if path.extension().is_some_and(|e| e == "berth") {
            let text = std::fs::read_to_string(&path).expect("stdlib file is UTF-8");
            check_ok(&text);
            seen += 1;
        }
    }
    assert!(seen > 0, "no stdlib files found in {}", dir.display());
}
