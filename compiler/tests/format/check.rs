//! The properties every formatted file must have, as one `check` function.

use berth_compiler::source::FileId;
use berth_compiler::syntax::ast::{ItemKind, SourceFileAst};
use berth_compiler::syntax::ast_dump::dump_without_spans;
use berth_compiler::syntax::format::format_file;
use berth_compiler::syntax::{lex, parse_file};
use std::path::{Path, PathBuf};

/// Formats `source` and checks every property; returns the formatted text or what failed.
pub fn check(source: &str) -> Result<String, String> {
    let formatted = format_file(source).map_err(|d| format!("refused: {d:#?}"))?;
    let again = format_file(&formatted).map_err(|d| {
        format!("formatted text does not parse: {d:#?}\n--- formatted ---\n{formatted}")
    })?;
    if again != formatted {
        return Err(format!(
            "not idempotent\n--- once ---\n{formatted}\n--- twice ---\n{again}"
        ));
    }
    let before = shape(&parse_file(FileId(0), source).ast);
    let after = shape(&parse_file(FileId(0), &formatted).ast);
    if before != after {
        return Err(format!(
            "the tree changed\n--- before ---\n{before}\n--- after ---\n{after}\n--- formatted ---\n{formatted}"
        ));
    }
    let (want, got) = (comments(source), comments(&formatted));
    let order_kept = if uses_lead(source) {
        want == got
    } else {
        sorted(want.clone()) == sorted(got.clone())
    };
    if !order_kept {
        return Err(format!(
            "comments changed\n--- input ---\n{want:#?}\n--- output ---\n{got:#?}"
        ));
    }
    if let Some(dedented) = dedent(source) {
        let redone = format_file(&dedented).map_err(|d| format!("dedented: {d:#?}"))?;
        if redone != formatted {
            return Err(format!(
                "layout depends on input indentation\n--- formatted ---\n{formatted}\n--- from dedented input ---\n{redone}"
            ));
        }
    }
    Ok(formatted)
}

/// The tree's dump without spans, doc lines without trailing whitespace (the formatter trims
/// it), `use` items first (the formatter moves them there).
fn shape(ast: &SourceFileAst) -> String {
    let mut ast = ast.clone();
    ast.items
        .sort_by_key(|item| !matches!(item.kind, ItemKind::Use(_)));
    dump_without_spans(&ast)
}

/// Texts of the comments, trailing whitespace of each line removed (the formatter trims it).
fn comments(source: &str) -> Vec<String> {
    lex(FileId(0), source)
        .comments
        .iter()
        .map(|c| {
            source[c.span.range()]
                .lines()
                .map(str::trim_end)
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// Whether no `use` item follows another item (so the formatter moves nothing).
fn uses_lead(source: &str) -> bool {
    let items = parse_file(FileId(0), source).ast.items;
    let first_other = items
        .iter()
        .position(|i| !matches!(i.kind, ItemKind::Use(_)))
        .unwrap_or(items.len());
    items[first_other..]
        .iter()
        .all(|i| !matches!(i.kind, ItemKind::Use(_)))
}

/// The source with every line's indentation removed, unless a block comment spans lines
/// (its inner lines are printed as written, so their indentation matters).
fn dedent(source: &str) -> Option<String> {
    let lexed = lex(FileId(0), source);
    if lexed
        .comments
        .iter()
        .any(|c| source[c.span.range()].contains('\n'))
    {
        return None;
    }
    Some(
        source
            .lines()
            .map(str::trim_start)
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

pub fn collect_berth_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        if path.is_dir() {
            collect_berth_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "berth") {
            out.push(path);
        }
    }
}
