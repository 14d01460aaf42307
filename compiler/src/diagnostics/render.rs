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
///
/// The cost is linear in the number of diagnostics: each file's line index is built once,
/// and a line longer than [`LONG_LINE`] bytes is shown as windows of [`WINDOW`] characters
/// around the ends of the labels on it, with `…` for what is left out.
pub fn render_terminal(diags: &[Diagnostic], sources: &SourceMap, color: bool) -> String {
    render_each(diags.iter(), sources, color)
}

/// Like [`render_terminal`], but only the first `limit` diagnostics of each file (all with
/// 0) are rendered; the others are counted, one line per file after the reports:
/// `and 4,071 more errors in `x.berth``.
pub fn render_terminal_limited(
    diags: &[Diagnostic],
    sources: &SourceMap,
    color: bool,
    limit: usize,
) -> String {
    let (shown, omitted) = limit_per_file(diags, limit);
    let mut out = render_each(shown.into_iter(), sources, color);
    for o in &omitted {
        out.push_str(&o.describe(sources));
        out.push('\n');
    }
    out
}

/// Diagnostics rendered per file by default: the rest are counted, not rendered
/// (`berth --error-limit N`, 0 for no limit).
pub const DEFAULT_ERROR_LIMIT: usize = 100;

/// The diagnostics of one file that a limit left out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Omitted {
    pub file: FileId,
    pub errors: usize,
    pub warnings: usize,
}

impl Omitted {
    /// `and 4,071 more errors in `x.berth``, `and 1 more warning in …`, `and 3 more errors
    /// and 2 more warnings in …`.
    pub fn describe(&self, sources: &SourceMap) -> String {
        let name = sources.get(self.file).map_or("?", |f| f.name.as_str());
        let errors = counted(self.errors, "more error", "more errors");
        let warnings = counted(self.warnings, "more warning", "more warnings");
        let what = match (self.errors, self.warnings) {
            (_, 0) => errors,
            (0, _) => warnings,
            _ => format!("{errors} and {warnings}"),
        };
        format!("and {what} in `{name}`")
    }
}

/// The first `limit` diagnostics of each file (every one with 0), in the order given, and
/// what was left out of each file, in file order.
pub fn limit_per_file(diags: &[Diagnostic], limit: usize) -> (Vec<&Diagnostic>, Vec<Omitted>) {
    let mut seen: BTreeMap<FileId, usize> = BTreeMap::new();
    let mut omitted: BTreeMap<FileId, Omitted> = BTreeMap::new();
    let mut shown = Vec::new();
    for d in diags {
        let file = d.primary.span.file;
        let n = seen.entry(file).or_default();
        *n += 1;
        if limit == 0 || *n <= limit {
            shown.push(d);
            continue;
        }
        let o = omitted.entry(file).or_insert(Omitted {
            file,
            errors: 0,
            warnings: 0,
        });
        if d.is_error() {
            o.errors += 1;
        } else {
            o.warnings += 1;
        }
    }
    (shown, omitted.into_values().collect())
}

/// `4,071 more errors`: the number with thousands separated, and the right noun.
fn counted(n: usize, one: &str, many: &str) -> String {
    let digits = n.to_string();
    let mut grouped = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(c);
    }
    format!("{grouped} {}", if n == 1 { one } else { many })
}

fn render_each<'d>(
    diags: impl Iterator<Item = &'d Diagnostic>,
    sources: &SourceMap,
    color: bool,
) -> String {
    let mut cache = SourceCache::new(sources);
    let mut out = Vec::new();
    for diag in diags {
        let labels = labels_of(diag);
        let report = build_report(diag, &labels, &mut cache, color);
        write_report(report, &mut cache, &mut out);
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Writes one report and a blank line after it, the columns of windowed files put right.
fn write_report(
    report: ariadne::Report<'_, ReportSpan>,
    cache: &mut SourceCache<'_>,
    out: &mut Vec<u8>,
) {
    let mut one = Vec::new();
    // Writing into a Vec cannot fail; a failure would only lose this report's text.
    let _ = report.write(&mut *cache, &mut one);
    if cache.views.is_empty() {
        out.extend_from_slice(&one);
    } else {
        let text = String::from_utf8_lossy(&one);
        out.extend_from_slice(cache.restore_locations(&text).as_bytes());
        cache.views.clear();
    }
    out.push(b'\n');
}

/// A diagnostic's labels with their colours, the primary first.
fn labels_of(diag: &Diagnostic) -> Vec<(&Label, Color)> {
    let primary_color = match diag.severity {
        Severity::Error => Color::Red,
        Severity::Warning => Color::Yellow,
    };
    std::iter::once((&diag.primary, primary_color))
        .chain(diag.labels.iter().map(|l| (l, Color::Blue)))
        .collect()
}

/// Lines longer than this many bytes are shown in windows around the labels on them.
pub const LONG_LINE: usize = 200;
/// Characters shown on each side of a label's start and end on a long line.
pub const WINDOW: usize = 40;

/// The span type ariadne sees: a file (or a windowed view of it) and a byte range in it.
type ReportSpan = (Key, Range<usize>);

/// What ariadne fetches: a whole file, or this report's `n`th windowed view of a file.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
enum Key {
    File(FileId),
    View(usize),
}

fn build_report<'a>(
    diag: &Diagnostic,
    labels: &[(&Label, Color)],
    cache: &mut SourceCache<'_>,
    color: bool,
) -> ariadne::Report<'a, ReportSpan> {
    let kind = match diag.severity {
        Severity::Error => ReportKind::Error,
        Severity::Warning => ReportKind::Warning,
    };
    let text = ReportText {
        code: Some(diag.code.as_str()),
        message: &diag.message,
        notes: &diag.notes,
        help: diag.help.as_deref(),
    };
    assemble(kind, &text, labels, cache, color)
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
    cache: &mut SourceCache<'_>,
    color: bool,
) -> ariadne::Report<'a, ReportSpan> {
    let sources = cache.map;
    let spans = cache.spans(labels.iter().map(|(l, _)| *l));
    let config = Config::new()
        .with_color(color)
        .with_char_set(CharSet::Unicode)
        // Our spans are byte offsets; ariadne counts chars unless told otherwise.
        .with_index_type(IndexType::Byte);
    let location = spans
        .first()
        .cloned()
        .unwrap_or((Key::File(FileId(0)), 0..0));
    let mut report = ariadne::Report::build(kind, location)
        .with_config(config)
        .with_message(text.message);
    if let Some(code) = text.code {
        report = report.with_code(code);
    }
    for (order, ((label, label_color), span)) in labels.iter().zip(spans).enumerate() {
        // A label in a file the map does not know would make ariadne print to stderr.
        if sources.get(label.span.file).is_none() {
            continue;
        }
        // Always with a message, even empty: ariadne draws no underline for a label without
        // one, which leaves nothing to see when colour is off.
        let mut ariadne_label = ariadne::Label::new(span)
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
            &mut cache,
            color,
        );
        let mut one = Vec::new();
        write_report(report, &mut cache, &mut one);
        if color {
            out.extend_from_slice(&one);
        } else {
            // ariadne colours a custom kind's title even when colour is off.
            out.extend_from_slice(without_ansi_escapes(&String::from_utf8_lossy(&one)).as_bytes());
        }
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

/// ariadne's view of our files: built lazily, one per file a report touches, plus the
/// windowed views of the report being written (see [`View`]).
struct SourceCache<'a> {
    map: &'a SourceMap,
    loaded: BTreeMap<FileId, ariadne::Source<Cow<'a, str>>>,
    /// The current report's views, `Key::View(i)` being `views[i]`.
    views: Vec<View>,
}

/// A file as one report shows it when a label lies on a long line: the lines of the labels'
/// ends, each long one cut to windows around those ends, every other line empty (so that
/// line numbers stay those of the file). Built per report, it costs the labels' windows
/// plus one byte per line before the last label.
struct View {
    file: FileId,
    source: ariadne::Source<Cow<'static, str>>,
    /// Per shown line (by number): where it starts in the view, and its pieces (file byte
    /// range, where the piece starts in the view), in order.
    lines: BTreeMap<usize, (usize, Vec<Piece>)>,
}

/// A piece of a file's line shown in a [`View`]: its byte range in the file and where it
/// starts in the view.
type Piece = (Range<usize>, usize);

impl View {
    /// Where a file offset (inside one of the pieces) is in the view.
    fn to_view(&self, file: &SourceFile, offset: usize) -> usize {
        let pieces = self.lines.get(&file.line_of(offset as u32));
        let piece =
            pieces.and_then(|(_, p)| p.iter().find(|(r, _)| r.start <= offset && offset <= r.end));
        piece.map_or(0, |(r, at)| at + (offset - r.start))
    }

    /// The file offset shown at a view's 0-based line and 1-based column (in characters).
    fn to_file(&self, line: usize, column: usize) -> Option<usize> {
        let (start, pieces) = self.lines.get(&line)?;
        let view_text = self.source.text().get(*start..)?;
        let view_text = view_text.split('\n').next().unwrap_or("");
        let byte = start
            + view_text
                .char_indices()
                .nth(column.saturating_sub(1))
                .map_or(view_text.len(), |(i, _)| i);
        let (range, at) = pieces
            .iter()
            .rev()
            .find(|(_, at)| *at <= byte)
            .or(pieces.first())?;
        Some((range.start + byte.saturating_sub(*at)).min(range.end))
    }
}

impl<'a> SourceCache<'a> {
    fn new(map: &'a SourceMap) -> Self {
        SourceCache {
            map,
            loaded: BTreeMap::new(),
            views: Vec::new(),
        }
    }

    /// The ariadne spans of a report's labels: in the file itself, or in a windowed view of
    /// it where a label of the report lies on a long line.
    fn spans<'l>(&mut self, labels: impl Iterator<Item = &'l Label> + Clone) -> Vec<ReportSpan> {
        let map = self.map;
        let ranges: Vec<(FileId, Range<usize>)> =
            labels.map(|l| (l.span.file, clamp_range(map, l))).collect();
        let mut out = Vec::with_capacity(ranges.len());
        for (file_id, range) in &ranges {
            let Some(file) = map.get(*file_id) else {
                out.push((Key::File(*file_id), range.clone()));
                continue;
            };
            let view = match self.views.iter().position(|v| v.file == *file_id) {
                Some(i) => Some(i),
                None => {
                    let in_file: Vec<Range<usize>> = ranges
                        .iter()
                        .filter(|(f, _)| f == file_id)
                        .map(|(_, r)| r.clone())
                        .collect();
                    windowed(file, &in_file).map(|v| {
                        self.views.push(v);
                        self.views.len() - 1
                    })
                }
            };
            match view.and_then(|i| self.views.get(i).map(|v| (i, v))) {
                Some((i, v)) => out.push((
                    Key::View(i),
                    v.to_view(file, range.start)..v.to_view(file, range.end),
                )),
                None => out.push((Key::File(*file_id), range.clone())),
            }
        }
        out
    }

    /// The report's text with every view's `NAME:LINE:COLUMN` put back to the file's name and
    /// the column of the file (ariadne counted it in the view).
    fn restore_locations(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(at) = rest.find(VIEW_MARK) {
            out.push_str(&rest[..at]);
            let after = &rest[at + VIEW_MARK.len_utf8()..];
            let parsed = parse_view_location(after);
            let Some((index, line, column, len)) = parsed else {
                out.push(VIEW_MARK);
                rest = after;
                continue;
            };
            rest = &after[len..];
            let Some((view, file)) = self
                .views
                .get(index)
                .and_then(|v| self.map.get(v.file).map(|f| (v, f)))
            else {
                continue;
            };
            let offset = view.to_file(line.saturating_sub(1), column);
            let lc = file.line_col(offset.unwrap_or(0) as u32);
            out.push_str(&format!("{}:{}:{}", file.name, line, lc.column));
        }
        out.push_str(rest);
        out
    }
}

/// Starts the name ariadne prints for a view: `\u{1}INDEX\u{1}`, then `:LINE:COLUMN`.
const VIEW_MARK: char = '\u{1}';

/// `INDEX\u{1}:LINE:COLUMN` at the start of `text`: the numbers and the length read.
fn parse_view_location(text: &str) -> Option<(usize, usize, usize, usize)> {
    let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
    let n = digits(text);
    let index = text.get(..n)?.parse().ok()?;
    let rest = text.get(n..)?.strip_prefix(VIEW_MARK)?.strip_prefix(':')?;
    let l = digits(rest);
    let line = rest.get(..l)?.parse().ok()?;
    let rest2 = rest.get(l..)?.strip_prefix(':')?;
    let c = digits(rest2);
    let column = rest2.get(..c)?.parse().ok()?;
    Some((
        index,
        line,
        column,
        n + VIEW_MARK.len_utf8() + 1 + l + 1 + c,
    ))
}

/// A windowed view of `file` for labels at `ranges`, or `None` when no label end lies on a
/// line longer than [`LONG_LINE`].
fn windowed(file: &SourceFile, ranges: &[Range<usize>]) -> Option<View> {
    let text = file.text.as_str();
    // Each shown line and the label ends on it.
    let mut ends: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for r in ranges {
        for offset in [r.start, r.end] {
            ends.entry(file.line_of(offset as u32))
                .or_default()
                .push(offset);
        }
    }
    if !ends.keys().any(|&l| file.line_range(l).len() > LONG_LINE) {
        return None;
    }
    let mut view = String::new();
    let mut lines = BTreeMap::new();
    let mut next_line = 0;
    for (line, offsets) in ends {
        view.extend(std::iter::repeat_n('\n', line - next_line));
        next_line = line;
        let line_start = view.len();
        let range = file.line_range(line);
        let mut pieces: Vec<Piece> = Vec::new();
        let windows = if range.len() > LONG_LINE {
            windows(text, range.clone(), &offsets)
        } else {
            vec![range.clone()]
        };
        let mut shown_to = range.start;
        for w in windows {
            if w.start > shown_to {
                view.push('…');
            }
            pieces.push((w.clone(), view.len()));
            view.push_str(with_newline_only_breaks(text.get(w.clone()).unwrap_or("")).as_ref());
            shown_to = w.end;
        }
        if shown_to < range.end {
            view.push('…');
        }
        lines.insert(line, (line_start, pieces));
    }
    view.push('\n');
    Some(View {
        file: file.id,
        source: ariadne::Source::from(Cow::Owned(view)),
        lines,
    })
}

/// Byte ranges of `line` within [`WINDOW`] characters of each offset, merged, in order.
fn windows(text: &str, line: Range<usize>, offsets: &[usize]) -> Vec<Range<usize>> {
    let mut out: Vec<Range<usize>> = Vec::new();
    let mut sorted = offsets.to_vec();
    sorted.sort_unstable();
    for offset in sorted {
        let before = text.get(line.start..offset).unwrap_or("");
        let start = before
            .char_indices()
            .rev()
            .nth(WINDOW.saturating_sub(1))
            .map_or(line.start, |(i, _)| line.start + i);
        let after = text.get(offset..line.end).unwrap_or("");
        let end = after
            .char_indices()
            .nth(WINDOW)
            .map_or(line.end, |(i, _)| offset + i);
        match out.last_mut() {
            Some(last) if start <= last.end => last.end = last.end.max(end),
            _ => out.push(start..end),
        }
    }
    out
}

impl<'a> ariadne::Cache<Key> for SourceCache<'a> {
    type Storage = Cow<'a, str>;

    fn fetch(&mut self, id: &Key) -> Result<&ariadne::Source<Self::Storage>, impl fmt::Debug> {
        match *id {
            Key::File(id) => {
                let Some(file) = self.map.get(id) else {
                    return Err(format!("no file with id {}", id.0));
                };
                Ok(self
                    .loaded
                    .entry(id)
                    .or_insert_with(|| ariadne::Source::from(with_newline_only_breaks(&file.text))))
            }
            Key::View(i) => match self.views.get(i) {
                Some(view) => Ok(&view.source),
                None => Err(format!("no view {i}")),
            },
        }
    }

    fn display<'b>(&self, id: &'b Key) -> Option<impl fmt::Display + 'b> {
        match *id {
            Key::File(id) => self.map.get(id).map(|f| f.name.clone()),
            Key::View(i) => Some(format!("{VIEW_MARK}{i}{VIEW_MARK}")),
        }
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

/// The document `berth check --output json` prints: the first `limit` diagnostics of each
/// file (all with 0), `omitted` (per file whose diagnostics were cut: `file`, `errors`,
/// `warnings` left out, in file order; empty when none was), and the counts of all of them.
pub fn to_json_document(diags: &[Diagnostic], sources: &SourceMap, limit: usize) -> Value {
    let summary = Summary::of(diags, sources.len());
    let (shown, omitted) = limit_per_file(diags, limit);
    let omitted: Vec<Value> = omitted
        .iter()
        .map(|o| {
            json!({
                "file": file_name(sources.get(o.file)),
                "errors": o.errors,
                "warnings": o.warnings,
            })
        })
        .collect();
    json!({
        "diagnostics": shown.into_iter().map(|d| to_json(d, sources)).collect::<Vec<_>>(),
        "omitted": omitted,
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
        let docs = to_json_document(&examples(&map), &map, 0);
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

    /// One line of `n` tokens `x = ` … with a diagnostic on every `=`, and `prefix` before it.
    fn one_long_line(prefix: &str, n: usize) -> (SourceMap, Vec<Diagnostic>) {
        let mut map = SourceMap::new();
        let text = format!("{prefix}{}\n", "x = ".repeat(n));
        let diags = text
            .match_indices('=')
            .map(|(i, _)| {
                Diagnostic::error(
                    Code::UnexpectedToken,
                    "unexpected `=`",
                    Span::new(FileId(0), i as u32, i as u32 + 1),
                )
                .primary_label("here")
            })
            .collect();
        map.add("long.berth", text);
        (map, diags)
    }

    /// A diagnostic on a line of 80 KB shows a window around its span, not the line: the
    /// output of 20,000 diagnostics on one line is linear in their number (it was the
    /// line's length for each of them: 1.6 GB here).
    #[test]
    fn long_lines_are_windowed_around_the_label() {
        let (map, diags) = one_long_line("", 20_000);
        let text = render_terminal(&diags, &map, false);
        let per_report = text.len() / diags.len();
        assert!(per_report < 2 * LONG_LINE, "{per_report} bytes per report");
        // The middle one: its true column, and `…` on both sides of the window.
        let one = render_terminal(&diags[10_000..10_001], &map, false);
        assert!(one.contains("long.berth:1:40003"), "{one}");
        let excerpt = one.lines().find(|l| l.contains("x = x")).unwrap_or("");
        assert!(
            excerpt.starts_with(" 1 │ …= x") && excerpt.ends_with("x =…"),
            "{one}"
        );
        assert!(excerpt.chars().count() < 2 * WINDOW + 20, "{one}");
        // The same diagnostic on a short line is not windowed.
        let (short, diags) = one_long_line("", 10);
        let text = render_terminal(&diags[5..6], &short, false);
        assert!(
            !text.contains('…') && text.contains("long.berth:1:23"),
            "{text}"
        );
    }

    /// Columns in the location line are counted in characters of the file, also after
    /// non-ASCII text cut out of the window; labels in other files and on other lines stay
    /// where they are.
    #[test]
    fn windowed_locations_count_characters_of_the_file() {
        let (mut map, diags) = one_long_line(&"é".repeat(1_000), 1_000);
        map.add("b.berth", "target lyon {\n  class = factory\n}\n");
        let diag = diags[500]
            .clone()
            .label(span_of(&map, 1, "factory"), "elsewhere")
            .label(Span::new(FileId(0), 1, 1), "at the start");
        let text = render_terminal(std::slice::from_ref(&diag), &map, false);
        // 1,000 two-byte characters, then 500 times `x = `, then `x `: column 3,003.
        assert!(text.contains("long.berth:1:3003"), "{text}");
        assert!(
            text.contains("b.berth:2:11") && text.contains("elsewhere"),
            "{text}"
        );
        assert!(
            text.contains("at the start") && text.contains("here"),
            "{text}"
        );
        assert!(text.len() < 2_000, "{text}");
    }

    /// Beyond the limit, diagnostics are counted per file, not rendered; in JSON too.
    #[test]
    fn diagnostics_beyond_the_limit_are_counted() {
        let (mut map, mut diags) = one_long_line("", 4_171);
        map.add("b.berth", "target lyon {\n  class = factory\n}\n");
        diags.push(
            Diagnostic::warning(
                Code::UnexpectedToken,
                "a warning",
                Span::new(FileId(0), 0, 1),
            )
            .primary_label("here"),
        );
        diags.push(Diagnostic::error(
            Code::UnexpectedToken,
            "in b",
            span_of(&map, 1, "lyon"),
        ));
        let text = render_terminal_limited(&diags, &map, false, 100);
        assert_eq!(text.matches("Error:").count(), 101, "{text}");
        assert!(
            text.ends_with("and 4,071 more errors and 1 more warning in `long.berth`\n"),
            "{}",
            &text[text.len() - 200..]
        );
        assert_eq!(
            render_terminal_limited(&diags, &map, false, 0),
            render_terminal(&diags, &map, false)
        );
        let json = to_json_document(&diags, &map, 100);
        assert_eq!(json["diagnostics"].as_array().map(Vec::len), Some(101));
        assert_eq!(json["errors"], 4_172);
        assert_eq!(json["warnings"], 1);
        assert_eq!(
            json["omitted"],
            serde_json::json!([{"file": "long.berth", "errors": 4_071, "warnings": 1}])
        );
        let all = to_json_document(&diags, &map, 0);
        assert_eq!(all["diagnostics"].as_array().map(Vec::len), Some(4_173));
        assert_eq!(all["omitted"], serde_json::json!([]));
    }
}
