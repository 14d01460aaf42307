//! The language server's queries, driven by data: every `data/ide/<query>/*.berth` file is
//! one case of that query (hover, definition, references, completion), its answer
//! snapshotted. A case is a spec of one or more files, with the cursor written `$0`:
//!
//! ```text
//! //- targets.berth
//! target hpc { … }
//! //- workloads.berth
//! placement scoring { targets = [h$0pc] }
//! ```
//!
//! A line `//- NAME` starts file `NAME` (a case without one is one file, `main.berth`).
//! Workload hovers place the spec at a fixed instant, so their placement text is stable.

use berth_compiler::ide::{Analysis, Completion};
use berth_compiler::sema::stdlib;
use berth_compiler::source::{FileId, SourceFile, SourceMap, Span};
use std::fmt::Write as _;
use std::path::Path;

const CURSOR: &str = "$0";
const FILE_HEADER: &str = "//- ";
const PLAN_AT: &str = "2026-12-02T10:00:00Z";

/// A case: the spec with the marker removed, and the cursor's file and byte offset.
struct Case {
    analysis: Analysis,
    file: FileId,
    offset: u32,
}

fn load(path: &Path) -> Case {
    let text = std::fs::read_to_string(path).expect("read the case");
    let mut files: Vec<(String, String)> = Vec::new();
    for line in text.split_inclusive('\n') {
        match line.strip_prefix(FILE_HEADER) {
            Some(name) => files.push((name.trim().to_string(), String::new())),
            None if files.is_empty() => files.push(("main.berth".into(), line.to_string())),
            None => files.last_mut().expect("a file").1.push_str(line),
        }
    }
    let marked: Vec<usize> = (0..files.len())
        .filter(|&i| files[i].1.contains(CURSOR))
        .collect();
    assert!(
        marked.len() == 1 && files[marked[0]].1.matches(CURSOR).count() == 1,
        "{}: write the cursor `{CURSOR}` exactly once",
        path.display()
    );
    let mut map = SourceMap::new();
    let mut cursor = None;
    for (i, (name, text)) in files.into_iter().enumerate() {
        let found = text.find(CURSOR);
        let id = map.add(format!("spec/{name}"), text.replacen(CURSOR, "", 1));
        if i == marked[0] {
            cursor = found.map(|offset| (id, offset as u32));
        }
    }
    let (file, offset) = cursor.expect("the cursor");
    Case {
        analysis: Analysis::new(map),
        file,
        offset,
    }
}

/// `file:line:col` of a span's start and its text; standard-library files by module.
fn place(analysis: &Analysis, span: Span) -> String {
    let (name, file) = match stdlib::file(span.file) {
        Some(std) => (
            format!("<{}>", std.module),
            SourceFile::new(span.file, std.name, std.text),
        ),
        None => match analysis.sources.get(span.file) {
            Some(f) => (f.name.clone(), f.clone()),
            None => return format!("{span:?} (no such file)"),
        },
    };
    let lc = file.line_col(span.start);
    format!("{name}:{}:{} `{}`", lc.line, lc.column, file.slice(span))
}

/// The answer of `query` at the case's cursor, as the snapshot shows it.
fn answer(query: &str, case: &Case) -> String {
    let Case {
        analysis,
        file,
        offset,
    } = case;
    let mut out = String::new();
    match query {
        "hover" => {
            let at = PLAN_AT.parse().expect("instant");
            match analysis.hover(*file, *offset, Some(at)) {
                Some(h) => {
                    let _ = write!(out, "on {}\n\n{}\n", place(analysis, h.span), h.markdown);
                }
                None => out.push_str("no hover\n"),
            }
        }
        "definition" => match analysis.definition(*file, *offset) {
            Some(span) => {
                let _ = writeln!(out, "{}", place(analysis, span));
            }
            None => out.push_str("no definition\n"),
        },
        "references" => {
            for span in analysis.references(*file, *offset) {
                let _ = writeln!(out, "{}", place(analysis, span));
            }
        }
        "completion" => {
            let text = &analysis.sources.get(*file).expect("the file").text;
            let line_start = text[..*offset as usize].rfind('\n').map_or(0, |i| i + 1);
            let prefix = &text[line_start..*offset as usize];
            for Completion {
                label,
                kind,
                detail,
                doc,
            } in analysis.completions(*file, *offset, prefix)
            {
                let doc = doc.lines().next().unwrap_or("");
                let _ = writeln!(out, "{label} ({kind:?}) {detail} | {doc}");
            }
        }
        other => panic!("no query `{other}`"),
    }
    if out.is_empty() {
        out.push_str("nothing\n");
    }
    out
}

/// Runs a case of `query` and snapshots its answer, after the spec's diagnostics (so a
/// reviewer sees whether the case queries the spec it means to: a clean one, or one half
/// typed on purpose).
fn check(query: &str, path: &Path) {
    let case = load(path);
    let mut out = String::new();
    for d in case.analysis.diagnostics() {
        let _ = writeln!(
            out,
            "diagnostic {} at {}: {}",
            d.code,
            place(&case.analysis, d.primary.span),
            d.message
        );
    }
    if out.is_empty() {
        out.push_str("no diagnostics\n");
    }
    out.push_str("---\n");
    out.push_str(&answer(query, &case));
    insta::assert_snapshot!(query, out);
}

#[test]
fn hover() {
    insta::glob!("data/ide/hover/*.berth", |path| check("hover", path));
}

#[test]
fn definition() {
    insta::glob!("data/ide/definition/*.berth", |path| check(
        "definition",
        path
    ));
}

#[test]
fn references() {
    insta::glob!("data/ide/references/*.berth", |path| check(
        "references",
        path
    ));
}

#[test]
fn completion() {
    insta::glob!("data/ide/completion/*.berth", |path| check(
        "completion",
        path
    ));
}
