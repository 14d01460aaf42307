//! Rendering of diagnostics: the one place where a [`Diagnostic`] becomes text.
//!
//! Terminal output goes through ariadne (colour only when the caller says so: a terminal
//! without `NO_COLOR`); machine output is JSON with file, line, column and byte offsets.
//! Both are deterministic: the same diagnostics and sources give the same bytes.

use super::{Diagnostic, Label, Severity};
use crate::source::{FileId, SourceFile, SourceMap};
use ariadne::{CharSet, Color, Config, IndexType, ReportKind};
use serde_json::{Value, json};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::Range;

/// Renders `diags` for a terminal, in the order given, each followed by a blank line.
/// `color` turns ANSI colours on; callers decide (terminal and no `NO_COLOR`).
pub fn render_terminal(diags: &[Diagnostic], sources: &SourceMap, color: bool) -> String {
    let mut cache = SourceCache::new(sources);
    let mut out = Vec::new();
    for diag in diags {
        let report = build_report(diag, sources, color);
        // Writing into a Vec cannot fail; a failure would only lose this report's text.
        let _ = report.write(&mut cache, &mut out);
        out.push(b'\n');
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The span type ariadne sees: a file and a byte range in it.
type ReportSpan = (FileId, Range<usize>);

fn build_report<'a>(
    diag: &Diagnostic,
    sources: &SourceMap,
    color: bool,
) -> ariadne::Report<'a, ReportSpan> {
    let (kind, primary_color) = match diag.severity {
        Severity::Error => (ReportKind::Error, Color::Red),
        Severity::Warning => (ReportKind::Warning, Color::Yellow),
    };
    let labels: Vec<(&Label, Color)> = std::iter::once((&diag.primary, primary_color))
        .chain(diag.labels.iter().map(|l| (l, Color::Blue)))
        .collect();
    let text = ReportText {
        code: Some(diag.code.as_str()),
        message: &diag.message,
        notes: &diag.notes,
        help: diag.help.as_deref(),
    };
    assemble(kind, &text, &labels, sources, color)
}

/// The words of a report around its labels.
struct ReportText<'t> {
    code: Option<&'static str>,
    message: &'t str,
    notes: &'t [String],
    help: Option<&'t str>,
}

/// An ariadne report of `kind` whose first label is the primary one (it locates the report).
fn assemble<'a>(
    kind: ReportKind<'a>,
    text: &ReportText<'_>,
    labels: &[(&Label, Color)],
    sources: &SourceMap,
    color: bool,
) -> ariadne::Report<'a, ReportSpan> {
    let config = Config::new()
        .with_color(color)
        .with_char_set(CharSet::Unicode)
        // Our spans are byte offsets; ariadne counts chars unless told otherwise.
        .with_index_type(IndexType::Byte);
    let location = labels.first().map_or((FileId(0), 0..0), |(l, _)| {
        (l.span.file, clamp_range(sources, l))
    });
    let mut report = ariadne::Report::build(kind, location)
        .with_config(config)
        .with_message(text.message);
    if let Some(code) = text.code {
        report = report.with_code(code);
    }
    for (order, (label, label_color)) in labels.iter().enumerate() {
        // A label in a file the map does not know would make ariadne print to stderr.
        if sources.get(label.span.file).is_none() {
            continue;
        }
        // Always with a message, even empty: ariadne draws no underline for a label without
        // one, which leaves nothing to see when colour is off.
        let mut ariadne_label = ariadne::Label::new((label.span.file, clamp_range(sources, label)))
            .with_order(order as i32)
            .with_message(&label.message);
        // ariadne does not filter label colours by `Config::with_color`: only set them when on.
        if color {
            ariadne_label = ariadne_label.with_color(*label_color);
        }
        report = report.with_label(ariadne_label);
    }
    for note in text.notes {
        report = report.with_note(note);
    }
    if let Some(help) = text.help {
        report = report.with_help(help);
    }
    report.finish()
}

/// A source excerpt that is not a diagnostic: `berth explain` shows with it where a
/// requirement and the offer it was compared with are written. The first label locates it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Excerpt {
    /// Shown after the kind, like a diagnostic's message.
    pub message: String,
    /// The first is drawn as the primary label.
    pub labels: Vec<Label>,
    pub notes: Vec<String>,
}

/// Renders `excerpts` like diagnostics, titled `kind` (`Rejected`, `Placed`) instead of
/// `Error`, each followed by a blank line. An excerpt without labels renders its message
/// and notes only.
pub fn render_excerpts(
    kind: &str,
    excerpts: &[Excerpt],
    sources: &SourceMap,
    color: bool,
) -> String {
    let mut cache = SourceCache::new(sources);
    let mut out = Vec::new();
    for excerpt in excerpts {
        // Without a location ariadne has nothing to draw (and would look the header's file
        // up anyway): the message and notes alone.
        if !excerpt
            .labels
            .iter()
            .any(|l| sources.get(l.span.file).is_some())
        {
            let mut plain = format!("{kind}: {}\n", excerpt.message);
            for note in &excerpt.notes {
                plain.push_str(&format!("  note: {note}\n"));
            }
            out.extend_from_slice(plain.as_bytes());
            out.push(b'\n');
            continue;
        }
        let labels: Vec<(&Label, Color)> = excerpt
            .labels
            .iter()
            .filter(|l| sources.get(l.span.file).is_some())
            .enumerate()
            .map(|(i, l)| (l, if i == 0 { Color::Cyan } else { Color::Blue }))
            .collect();
        let text = ReportText {
            code: None,
            message: &excerpt.message,
            notes: &excerpt.notes,
            help: None,
        };
        let report = assemble(
            ReportKind::Custom(kind, Color::Cyan),
            &text,
            &labels,
            sources,
            color,
        );
        let mut one = Vec::new();
        // Writing into a Vec cannot fail; a failure would only lose this report's text.
        let _ = report.write(&mut cache, &mut one);
        if color {
            out.extend_from_slice(&one);
        } else {
            // ariadne colours a custom kind's title even when colour is off.
            out.extend_from_slice(without_ansi_escapes(&String::from_utf8_lossy(&one)).as_bytes());
        }
        out.push(b'\n');
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `text` without its ANSI SGR sequences (`ESC [ … m`).
fn without_ansi_escapes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("\x1b[") {
        out.push_str(&rest[..i]);
        let tail = &rest[i + 2..];
        rest = match tail.find('m') {
            Some(end) => &tail[end + 1..],
            None => "",
        };
    }
    out.push_str(rest);
    out
}

/// The label's byte range, clamped to its file and widened to character boundaries so that
/// ariadne never slices inside a character (it would panic).
fn clamp_range(sources: &SourceMap, label: &Label) -> Range<usize> {
    let Some(file) = sources.get(label.span.file) else {
        return 0..0;
    };
    let text = &file.text;
    let mut start = (label.span.start as usize).min(text.len());
    let mut end = (label.span.end as usize).clamp(start, text.len());
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    while !text.is_char_boundary(end) {
        end += 1;
    }
    // ariadne shows no line after a final newline: an empty span at the very end (a missing
    // `}` at end of file) is drawn at the end of the last line instead.
    if start == text.len() && end == start && text.ends_with('\n') {
        start -= 1;
        end -= 1;
    }
    start..end
}

/// ariadne's view of our files: built lazily, one per file a report touches.
struct SourceCache<'a> {
    map: &'a SourceMap,
    loaded: BTreeMap<FileId, ariadne::Source<Cow<'a, str>>>,
}

impl<'a> SourceCache<'a> {
    fn new(map: &'a SourceMap) -> Self {
        SourceCache {
            map,
            loaded: BTreeMap::new(),
        }
    }
}

impl<'a> ariadne::Cache<FileId> for SourceCache<'a> {
    type Storage = Cow<'a, str>;

    fn fetch(&mut self, id: &FileId) -> Result<&ariadne::Source<Self::Storage>, impl fmt::Debug> {
        let Some(file) = self.map.get(*id) else {
            return Err(format!("no file with id {}", id.0));
        };
        Ok(self
            .loaded
            .entry(*id)
            .or_insert_with(|| ariadne::Source::from(with_newline_only_breaks(&file.text))))
    }

    fn display<'b>(&self, id: &'b FileId) -> Option<impl fmt::Display + 'b> {
        self.map.get(*id).map(|f| f.name.clone())
    }
}

/// ariadne also breaks lines at lone `\r`, vertical tab, form feed, NEL and the Unicode line
/// and paragraph separators; the source map (and so JSON and the language server) breaks at
/// `\n` only. Blanking those characters (same byte length, so spans still line up) keeps the
/// line numbers of both renderings equal.
fn with_newline_only_breaks(text: &str) -> Cow<'_, str> {
    let is_extra_break = |(i, c): (usize, char)| match c {
        '\r' => text.as_bytes().get(i + 1) != Some(&b'\n'),
        '\x0B' | '\x0C' | '\u{85}' | '\u{2028}' | '\u{2029}' => true,
        _ => false,
    };
    if !text.char_indices().any(is_extra_break) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    for (i, c) in text.char_indices() {
        if is_extra_break((i, c)) {
            out.extend(std::iter::repeat_n(' ', c.len_utf8()));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// One diagnostic as JSON: `file`, `severity`, `code`, `title`, `message`, `start` and `end`
/// of the primary span (each `{line, column, utf16_column, offset}`: line and column 1-based,
/// column in characters, `utf16_column` 0-based in UTF-16 units, `offset` in bytes), `labels`
/// (primary first, each with `file`, `primary`, `line`, `column`, `start`, `end`, `message`),
/// `notes` and `help` (a string or null). Object keys come out sorted.
pub fn to_json(diag: &Diagnostic, sources: &SourceMap) -> Value {
    let file = sources.get(diag.primary.span.file);
    let labels: Vec<Value> = std::iter::once((&diag.primary, true))
        .chain(diag.labels.iter().map(|l| (l, false)))
        .map(|(label, primary)| label_json(label, primary, sources))
        .collect();
    json!({
        "file": file_name(file),
        "severity": diag.severity,
        "code": diag.code.as_str(),
        "title": diag.code.title(),
        "message": diag.message,
        "start": position_json(file, diag.primary.span.start),
        "end": position_json(file, diag.primary.span.end),
        "labels": labels,
        "notes": diag.notes,
        "help": diag.help,
    })
}

/// The document `berth check --output json` prints: every diagnostic plus counts.
pub fn to_json_document(diags: &[Diagnostic], sources: &SourceMap) -> Value {
    let summary = Summary::of(diags, sources.len());
    json!({
        "diagnostics": diags.iter().map(|d| to_json(d, sources)).collect::<Vec<_>>(),
        "files": summary.files_checked,
        "errors": summary.errors,
        "warnings": summary.warnings,
    })
}

fn label_json(label: &Label, primary: bool, sources: &SourceMap) -> Value {
    let file = sources.get(label.span.file);
    let start = file.map(|f| f.line_col(label.span.start));
    json!({
        "file": file_name(file),
        "primary": primary,
        "line": start.map(|lc| lc.line),
        "column": start.map(|lc| lc.column),
        "start": position_json(file, label.span.start),
        "end": position_json(file, label.span.end),
        "message": label.message,
    })
}

fn file_name(file: Option<&SourceFile>) -> Option<&str> {
    file.map(|f| f.name.as_str())
}

/// A position; line and columns are null if the file is not in the map (never expected).
fn position_json(file: Option<&SourceFile>, offset: u32) -> Value {
    let lc = file.map(|f| f.line_col(offset));
    json!({
        "line": lc.map(|lc| lc.line),
        "column": lc.map(|lc| lc.column),
        "utf16_column": lc.map(|lc| lc.utf16_column),
        "offset": offset,
    })
}

/// Counts for the closing line of a run ("2 errors in 1 file") and the JSON document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Summary {
    pub errors: usize,
    pub warnings: usize,
    /// Files with at least one diagnostic.
    pub files_with_diagnostics: usize,
    /// Files looked at.
    pub files_checked: usize,
}

impl Summary {
    pub fn of(diags: &[Diagnostic], files_checked: usize) -> Self {
        let errors = diags.iter().filter(|d| d.is_error()).count();
        let files: BTreeSet<FileId> = diags.iter().map(|d| d.primary.span.file).collect();
        Summary {
            errors,
            warnings: diags.len() - errors,
            files_with_diagnostics: files.len(),
            files_checked,
        }
    }
}

/// `2 errors in 1 file`, `1 error and 3 warnings in 2 files`, `no errors in 4 files`.
impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let counted = match (self.errors, self.warnings) {
            (0, 0) => {
                return write!(
                    f,
                    "no errors in {}",
                    plural(self.files_checked, "file", "files")
                );
            }
            (e, 0) => plural(e, "error", "errors"),
            (0, w) => plural(w, "warning", "warnings"),
            (e, w) => format!(
                "{} and {}",
                plural(e, "error", "errors"),
                plural(w, "warning", "warnings")
            ),
        };
        write!(
            f,
            "{counted} in {}",
            plural(self.files_with_diagnostics, "file", "files")
        )
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {many}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnostics::Code;
    use crate::source::Span;

    /// Two files; `a.berth` has non-ASCII text before the spans to exercise columns.
    fn sources() -> SourceMap {
        let mut map = SourceMap::new();
        map.add(
            "a.berth",
            "/// café\nworkload web {\n  replicas = 2 $\n  memory = 16Gb\n}\n",
        );
        map.add("b.berth", "target lyon {\n  class = factory\n}\n");
        map
    }

    fn span_of(map: &SourceMap, file: u32, needle: &str) -> Span {
        let f = map.get(FileId(file)).expect("file exists");
        let start = f.text.find(needle).expect("needle in text") as u32;
        Span::new(FileId(file), start, start + needle.len() as u32)
    }

    fn examples(map: &SourceMap) -> Vec<Diagnostic> {
        vec![
            Diagnostic::error(
                Code::UnexpectedChar,
                "unexpected character `$`",
                span_of(map, 0, "$"),
            )
            .primary_label("no token starts with this character"),
            Diagnostic::error(
                Code::UnknownUnit,
                "unknown unit `Gb`",
                span_of(map, 0, "16Gb"),
            )
            .primary_label("not a unit berth knows")
            .label(span_of(map, 0, "memory"), "in this field")
            .label(span_of(map, 1, "lyon"), "a target declared here")
            .note("sizes are counted in bytes")
            .note("bits are for bandwidth")
            .help("did you mean `GB`?"),
            Diagnostic::warning(
                Code::MissingValue,
                "a warning at the end of the file",
                Span::new(FileId(1), 34, 34),
            )
            .primary_label("expected `}` here"),
            Diagnostic::error(
                Code::UnexpectedToken,
                "an empty span",
                Span::new(FileId(1), 7, 7),
            ),
            Diagnostic::error(
                Code::UnexpectedToken,
                "no label text",
                span_of(map, 1, "class"),
            ),
        ]
    }

    #[test]
    fn terminal_rendering_without_colour() {
        let map = sources();
        let text = render_terminal(&examples(&map), &map, false);
        assert!(!text.contains('\x1b'), "no ANSI escapes when colour is off");
        insta::assert_snapshot!(text);
    }

    #[test]
    fn terminal_rendering_with_colour_has_escapes() {
        let map = sources();
        let text = render_terminal(&examples(&map)[..1], &map, true);
        assert!(text.contains("\x1b["));
    }

    #[test]
    fn json_rendering() {
        let map = sources();
        let docs = to_json_document(&examples(&map), &map);
        let text = serde_json::to_string_pretty(&docs).expect("JSON values serialise");
        insta::assert_snapshot!(text);
    }

    #[test]
    fn out_of_range_and_mid_character_spans_do_not_panic() {
        let map = sources();
        let e = map.get(FileId(0)).expect("file").text.find('é').expect("é") as u32;
        let diags = vec![
            // Starts inside `é` (two bytes).
            Diagnostic::error(
                Code::UnexpectedChar,
                "inside",
                Span::new(FileId(0), e + 1, e + 1),
            ),
            // Past the end of the file.
            Diagnostic::error(Code::UnexpectedEof, "past", Span::new(FileId(0), 999, 1000)),
            // A file the map does not have.
            Diagnostic::error(Code::UnexpectedEof, "nowhere", Span::new(FileId(7), 0, 1))
                .label(Span::new(FileId(9), 0, 1), "also nowhere"),
        ];
        let text = render_terminal(&diags, &map, false);
        assert!(text.contains("inside") && text.contains("past") && text.contains("nowhere"));
        let json = to_json(&diags[2], &map);
        assert_eq!(json["file"], Value::Null);
        assert_eq!(json["start"]["offset"], 0);
    }

    #[test]
    fn extra_line_breaks_do_not_shift_line_numbers() {
        let mut map = SourceMap::new();
        map.add("cr.berth", "a\rb\u{2028}c\r\nd $\n");
        let span = span_of(&map, 0, "$");
        let diag = Diagnostic::error(Code::UnexpectedChar, "unexpected character `$`", span);
        let text = render_terminal(std::slice::from_ref(&diag), &map, false);
        let line = map.get(FileId(0)).expect("file").line_col(span.start).line;
        assert_eq!(line, 2);
        assert!(text.contains("cr.berth:2:3"), "{text}");
        assert_eq!(to_json(&diag, &map)["start"]["line"], 2);
    }

    #[test]
    fn excerpts_render_like_diagnostics_with_their_own_title() {
        let map = sources();
        let excerpts = [
            Excerpt {
                message: "`lyon`: the reason".into(),
                labels: vec![
                    Label {
                        span: span_of(&map, 0, "16Gb"),
                        message: "required here".into(),
                    },
                    Label {
                        span: span_of(&map, 1, "lyon"),
                        message: "offered here".into(),
                    },
                ],
                notes: vec!["a note".into()],
            },
            Excerpt {
                message: "nowhere to point".into(),
                labels: Vec::new(),
                notes: vec!["still noted".into()],
            },
        ];
        let plain = render_excerpts("Rejected", &excerpts, &map, false);
        assert!(!plain.contains('\x1b'), "{plain:?}");
        for expected in [
            "Rejected: `lyon`: the reason",
            "a.berth:4:12",
            "required here",
            "b.berth:1:8",
            "offered here",
            "Note: a note",
            "Rejected: nowhere to point\n  note: still noted\n",
        ] {
            assert!(
                plain.contains(expected),
                "`{expected}` missing from:\n{plain}"
            );
        }
        assert!(render_excerpts("Rejected", &excerpts[..1], &map, true).contains("\x1b["));
    }

    #[test]
    fn summary_lines() {
        let map = sources();
        let diags = examples(&map);
        assert_eq!(
            Summary::of(&diags, 2).to_string(),
            "4 errors and 1 warning in 2 files"
        );
        assert_eq!(Summary::of(&diags[..1], 2).to_string(), "1 error in 1 file");
        assert_eq!(
            Summary::of(&diags[2..3], 2).to_string(),
            "1 warning in 1 file"
        );
        assert_eq!(Summary::of(&[], 3).to_string(), "no errors in 3 files");
        assert_eq!(Summary::of(&[], 1).to_string(), "no errors in 1 file");
    }
}
