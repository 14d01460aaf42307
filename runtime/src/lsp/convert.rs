//! Conversions between the compiler's byte spans and the protocol's UTF-16 positions, file
//! paths and URIs, and compiler diagnostics and protocol diagnostics.

use berth_compiler::diagnostics::{Diagnostic, Severity};
use berth_compiler::ide::stdlib;
use berth_compiler::source::{FileId, SourceFile, Span};
use lsp_types as lsp;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// The scheme of the embedded standard library's read-only virtual documents:
/// `berth-std:///gpu.berth`.
pub const STD_SCHEME: &str = "berth-std";

/// The protocol position (0-based line, UTF-16 column) of byte `offset` in `file`.
pub fn position(file: &SourceFile, offset: u32) -> lsp::Position {
    let lc = file.line_col(offset);
    lsp::Position::new(lc.line - 1, lc.utf16_column)
}

pub fn range(file: &SourceFile, span: Span) -> lsp::Range {
    lsp::Range::new(position(file, span.start), position(file, span.end))
}

/// The byte offset of a protocol position (clamped to the text).
pub fn offset(file: &SourceFile, pos: lsp::Position) -> u32 {
    file.offset_of_utf16(pos.line, pos.character)
}

/// The byte offset of a protocol position in `text` (clamped to it, as [`offset`]), found
/// without indexing every line of the text: an edit of a 3 MB document only reads up to the
/// line it edits.
pub fn offset_in(text: &str, pos: lsp::Position) -> usize {
    let start = match pos.line.checked_sub(1) {
        None => 0,
        Some(previous) => match text.match_indices('\n').nth(previous as usize) {
            Some((i, _)) => i + 1,
            None => return text.len(),
        },
    };
    let rest = text.get(start..).unwrap_or_default();
    let line = rest
        .find('\n')
        .map_or(rest, |i| rest.get(..=i).unwrap_or(rest));
    let line = SourceFile::new(FileId(0), "", line);
    start + line.offset_of_utf16(0, pos.character) as usize
}

/// The local path of a `file:` URI.
pub fn uri_to_path(uri: &lsp::Uri) -> Option<PathBuf> {
    let rest = uri.as_str().strip_prefix("file://")?;
    // `file://host/path` is not a local file; `file:///path` is.
    let path = rest.strip_prefix("localhost").unwrap_or(rest);
    if !path.starts_with('/') {
        return None;
    }
    let bytes = percent_decode(path.as_bytes())?;
    Some(PathBuf::from(String::from_utf8(bytes).ok()?))
}

fn percent_decode(bytes: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(out)
}

/// The `file:` URI of a local path, with every byte outside the unreserved set escaped.
pub fn path_to_uri(path: &Path) -> lsp::Uri {
    let mut s = String::from("file://");
    for &b in path.to_string_lossy().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    uri(&s)
}

/// A URI we built ourselves; the fallback is never used for the ones built here.
fn uri(text: &str) -> lsp::Uri {
    lsp::Uri::from_str(text)
        .or_else(|_| lsp::Uri::from_str("file:///"))
        .unwrap_or_else(|_| unreachable!("`file:///` is a valid URI"))
}

/// The virtual document of a standard-library file id.
pub fn std_uri(file: FileId) -> Option<lsp::Uri> {
    let std = stdlib::file(file)?;
    let base = std.name.strip_prefix("<std>/").unwrap_or(std.name);
    Some(uri(&format!("{STD_SCHEME}:///{base}")))
}

/// The standard-library file behind a `berth-std:` URI.
pub fn std_file(uri: &lsp::Uri) -> Option<SourceFile> {
    let base = uri
        .as_str()
        .strip_prefix(STD_SCHEME)?
        .strip_prefix(":///")?;
    let i = stdlib::FILES
        .iter()
        .position(|f| f.name.strip_prefix("<std>/") == Some(base))?;
    let f = &stdlib::FILES[i];
    Some(SourceFile::new(stdlib::file_id(i), f.name, f.text))
}

/// A compiler diagnostic in protocol form. `locate` gives the URI and text of a file id
/// (labels may point into other files of the spec).
pub fn diagnostic(
    d: &Diagnostic,
    file: &SourceFile,
    locate: &dyn Fn(FileId) -> Option<(lsp::Uri, SourceFile)>,
) -> lsp::Diagnostic {
    let mut message = d.message.clone();
    if !d.primary.message.is_empty() {
        message.push_str(&format!(": {}", d.primary.message));
    }
    for note in &d.notes {
        message.push_str(&format!("\nnote: {note}"));
    }
    if let Some(help) = &d.help {
        message.push_str(&format!("\nhelp: {help}"));
    }
    let related: Vec<lsp::DiagnosticRelatedInformation> = d
        .labels
        .iter()
        .filter_map(|l| {
            let (uri, f) = locate(l.span.file)?;
            Some(lsp::DiagnosticRelatedInformation {
                location: lsp::Location::new(uri, range(&f, l.span)),
                message: if l.message.is_empty() {
                    "here".into()
                } else {
                    l.message.clone()
                },
            })
        })
        .collect();
    lsp::Diagnostic {
        range: range(file, d.primary.span),
        severity: Some(match d.severity {
            Severity::Error => lsp::DiagnosticSeverity::ERROR,
            Severity::Warning => lsp::DiagnosticSeverity::WARNING,
        }),
        code: Some(lsp::NumberOrString::String(d.code.as_str().into())),
        source: Some("berth".into()),
        message,
        related_information: (!related.is_empty()).then_some(related),
        ..lsp::Diagnostic::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_in_agrees_with_offset_on_every_position() {
        for text in ["", "a", "\n", "é𝄞x\n\nyz\r\n𝄞", "ab\ncd\n"] {
            let file = SourceFile::new(FileId(0), "", text);
            for line in 0..5 {
                for character in 0..6 {
                    let pos = lsp::Position::new(line, character);
                    assert_eq!(
                        offset_in(text, pos),
                        offset(&file, pos) as usize,
                        "{text:?} {pos:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn paths_round_trip_through_uris() {
        for p in ["/tmp/a b/ç.berth", "/x/y%z.berth", "/plain/a.berth"] {
            let uri = path_to_uri(Path::new(p));
            assert_eq!(
                uri_to_path(&uri).as_deref(),
                Some(Path::new(p)),
                "{}",
                uri.as_str()
            );
        }
        assert_eq!(uri_to_path(&uri("https://example.invalid/a")), None);
    }

    #[test]
    fn std_uris_name_embedded_files() {
        let uri = std_uri(stdlib::file_id(0)).expect("uri");
        assert_eq!(uri.as_str(), "berth-std:///gpu.berth");
        let file = std_file(&uri).expect("file");
        assert_eq!(file.id, stdlib::file_id(0));
    }

    #[test]
    fn positions_count_utf16_units() {
        let f = SourceFile::new(FileId(0), "a", "const é = \"𝄞\" x\n");
        let x = f.text.find(" x").expect("x") as u32 + 1;
        let pos = position(&f, x);
        assert_eq!((pos.line, pos.character), (0, 15));
        assert_eq!(offset(&f, pos), x);
    }
}
