//! The formatter (`berth fmt`).
//!
//! - `data/format/*.berth`: each file's formatted text is a snapshot.
//! - `data/format/refused/*.berth`: files with errors; the snapshot is the diagnostics that
//!   come back instead of text.
//! - The properties of [`check::check`] (idempotent, tree kept, comments kept, layout
//!   independent of the input's indentation) hold on every formatting test input, every
//!   `data/parse/ok` input, every example under `examples/` and the standard library.
//! - `generated.rs`: the same properties on generated trees and on generated text with
//!   comments and line breaks sprinkled between its tokens.

mod check;
mod generated;

use berth_compiler::syntax::format::format_file;
use check::{check, collect_berth_files};
use std::fmt::Write as _;
use std::path::Path;

#[test]
fn formatted_files() {
    insta::glob!("..", "data/format/*.berth", |path| {
        let source = std::fs::read_to_string(path).expect("test input is readable");
        let formatted = match check(&source) {
            Ok(formatted) => formatted,
            Err(failure) => panic!("{}: {failure}", path.display()),
        };
        insta::assert_snapshot!(formatted);
    });
}

#[test]
fn refused_files() {
    insta::glob!("..", "data/format/refused/*.berth", |path| {
        let source = std::fs::read_to_string(path).expect("test input is readable");
        let diagnostics = match format_file(&source) {
            Ok(text) => panic!(
                "{}: a file with errors was formatted:\n{text}",
                path.display()
            ),
            Err(diagnostics) => diagnostics,
        };
        assert!(!diagnostics.is_empty(), "refused without a diagnostic");
        let mut summary = String::new();
        for d in &diagnostics {
            let _ = writeln!(summary, "{} {}", d.code.as_str(), d.message);
        }
        insta::assert_snapshot!(summary);
    });
}

/// Every `.berth` file the repository has as an example, a library or a well-formed test
/// input.
#[test]
fn properties_hold_on_every_corpus_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in [
        "tests/data/format",
        "tests/data/parse/ok",
        "../examples",
        "../stdlib",
    ] {
        collect_berth_files(&root.join(dir), &mut files);
    }
    files.retain(|f| !f.components().any(|c| c.as_os_str() == "refused"));
    assert!(!files.is_empty(), "no corpus found");
    let mut failures = Vec::new();
    for file in &files {
        let source = std::fs::read_to_string(file).expect("corpus file is readable");
        if let Err(failure) = check(&source) {
            failures.push(format!("{}: {failure}", file.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn long_and_chains_break_before_each_operator() {
    let chain = vec!["workload.flag"; 100].join(" and ");
    let source = format!("policy p {{\n  deny \"x\" when {chain}\n}}\n");
    let formatted = check(&source).expect("a long chain formats");
    assert!(formatted.lines().all(|l| l.len() <= 100), "{formatted}");
    let operator_lines = formatted
        .lines()
        .filter(|l| l.trim_start().starts_with("and workload.flag"))
        .count();
    assert_eq!(operator_lines, 99, "{formatted}");
}

/// A list of 150,000 elements (which `berth check` accepts) formats without overflowing the
/// stack: the layout document is a balanced tree, not a chain as deep as the list is long.
/// The test thread's stack (2 MiB) is smaller than the main thread's.
#[test]
fn a_list_of_150_000_elements_formats() {
    let n = 150_000;
    let source = format!("const l = [{}]\n", vec!["1"; n].join(", "));
    let formatted = format_file(&source).expect("the list formats");
    assert_eq!(formatted.lines().count(), n + 2);
    assert_eq!(format_file(&formatted).as_deref(), Ok(formatted.as_str()));
}

/// Consecutive `const` items format in time linear in their number: each item used to
/// measure the blank lines above it from the start of the file (50,000 items took a minute).
#[test]
fn many_consecutive_consts_format() {
    let n = 50_000;
    let source: String = (0..n).map(|i| format!("const c{i} = {i}\n")).collect();
    let formatted = format_file(&source).expect("the consts format");
    assert_eq!(formatted, source);
    // With a blank line and a comment between each two, kept as they are.
    let spaced: String = (0..n / 10)
        .map(|i| format!("// c{i}\nconst c{i} = {i}\n\n"))
        .collect();
    let formatted = format_file(&spaced).expect("the consts format");
    assert_eq!(formatted.trim_end(), spaced.trim_end());
}
