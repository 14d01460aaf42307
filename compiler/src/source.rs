//! Source files, file ids and byte spans.
//!
//! The compiler never reads files: the runtime hands it `SourceFile`s (name + text) and every
//! later stage refers to text through a [`Span`] (file id + byte range). Line/column
//! conversion lives here so that every renderer (terminal, JSON, language server) agrees.

// INVARIANT: `line` comes from a search over `line_starts` itself, and the first entry is 0.
#![allow(clippy::indexing_slicing)]

use serde::Serialize;

/// Index of a file in a [`SourceMap`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize)]
pub struct FileId(pub u32);

/// A byte range in one file. `start <= end`, both on UTF-8 character boundaries.
// INVARIANT: every span produced by the lexer or parser lies inside its file's text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize)]
pub struct Span {
    pub file: FileId,
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(file: FileId, start: u32, end: u32) -> Self {
        debug_assert!(start <= end);
        Span { file, start, end }
    }

    /// The smallest span covering both (same file assumed).
    pub fn to(self, other: Span) -> Span {
        Span {
            file: self.file,
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }

    pub fn len(self) -> u32 {
        self.end - self.start
    }

    pub fn is_empty(self) -> bool {
        self.start == self.end
    }

    pub fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }

    /// An empty span at the end of this one (where something missing would go).
    pub fn end_point(self) -> Span {
        Span::new(self.file, self.end, self.end)
    }
}

/// One source file: a display name (path as the user gave it) and its text.
#[derive(Clone, Debug)]
pub struct SourceFile {
    pub id: FileId,
    pub name: String,
    pub text: String,
    /// Byte offset of the start of every line (first is 0).
    line_starts: Vec<u32>,
    /// For a file that is not all ASCII: the characters and UTF-16 units before every
    /// [`CHECKPOINT`]-th byte (snapped back to a character boundary), so that a column is
    /// counted from the nearest checkpoint, not from the start of its line: a diagnostic on a
    /// line of a megabyte costs as little as one on a short line. Empty for ASCII text, where
    /// a column is a difference of offsets.
    checkpoints: Vec<Checkpoint>,
}

/// Bytes between two [`Checkpoint`]s.
const CHECKPOINT: usize = 256;

/// How much text lies before a byte offset of the file.
#[derive(Clone, Copy, Debug, Default)]
struct Checkpoint {
    byte: u32,
    chars: u32,
    utf16: u32,
}

/// A line/column position. `line` and `column` are 1-based; `column` counts Unicode scalar
/// values, `utf16_column` is 0-based in UTF-16 code units (what the LSP wants).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct LineCol {
    pub line: u32,
    pub column: u32,
    pub utf16_column: u32,
}

impl SourceFile {
    pub fn new(id: FileId, name: impl Into<String>, text: impl Into<String>) -> Self {
        let text = text.into();
        let mut line_starts = vec![0];
        line_starts.extend(
            text.bytes()
                .enumerate()
                .filter(|&(_, b)| b == b'\n')
                .map(|(i, _)| (i + 1) as u32),
        );
        let checkpoints = if text.is_ascii() {
            Vec::new()
        } else {
            checkpoints(&text)
        };
        SourceFile {
            id,
            name: name.into(),
            text,
            line_starts,
            checkpoints,
        }
    }

    /// Characters and UTF-16 units before `offset` (a character boundary), from the file's
    /// start: O([`CHECKPOINT`]) whatever the offset.
    fn counted(&self, offset: usize) -> Checkpoint {
        if self.checkpoints.is_empty() {
            let n = offset as u32;
            return Checkpoint {
                byte: n,
                chars: n,
                utf16: n,
            };
        }
        let at = self
            .checkpoints
            .get(offset / CHECKPOINT)
            .or(self.checkpoints.last())
            .filter(|c| c.byte as usize <= offset)
            .copied()
            .unwrap_or_default();
        let between = &self.text[at.byte as usize..offset];
        Checkpoint {
            byte: offset as u32,
            chars: at.chars + between.chars().count() as u32,
            utf16: at.utf16 + between.encode_utf16().count() as u32,
        }
    }

    /// Line and column of a byte offset (clamped to the text, snapped back to a char boundary).
    pub fn line_col(&self, offset: u32) -> LineCol {
        let mut offset = (offset as usize).min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = match self.line_starts.binary_search(&(offset as u32)) {
            Ok(i) => i,
            Err(i) => i - 1,
        };
        let start = self.counted(self.line_starts[line] as usize);
        let here = self.counted(offset);
        LineCol {
            line: line as u32 + 1,
            column: here.chars - start.chars + 1,
            utf16_column: here.utf16 - start.utf16,
        }
    }

    /// The 0-based line of a byte offset (clamped to the text).
    pub fn line_of(&self, offset: u32) -> usize {
        match self
            .line_starts
            .binary_search(&offset.min(self.text.len() as u32))
        {
            Ok(i) => i,
            Err(i) => i - 1,
        }
    }

    /// The byte range of a 0-based line, without its `\n` (empty past the last line).
    pub fn line_range(&self, line: usize) -> std::ops::Range<usize> {
        let Some(&start) = self.line_starts.get(line) else {
            return self.text.len()..self.text.len();
        };
        let end = self
            .line_starts
            .get(line + 1)
            .map_or(self.text.len(), |&e| e as usize - 1);
        start as usize..end
    }

    /// Byte offset of a 0-based line and UTF-16 column (LSP positions), clamped.
    pub fn offset_of_utf16(&self, line: u32, utf16_column: u32) -> u32 {
        let Some(&start) = self.line_starts.get(line as usize) else {
            return self.text.len() as u32;
        };
        let end = self
            .line_starts
            .get(line as usize + 1)
            .map_or(self.text.len(), |&e| e as usize);
        let mut units = 0u32;
        for (i, c) in self.text[start as usize..end].char_indices() {
            if units >= utf16_column || c == '\n' {
                return start + i as u32;
            }
            units += c.len_utf16() as u32;
        }
        end as u32
    }

    pub fn line_count(&self) -> usize {
        self.line_starts.len()
    }

    pub fn slice(&self, span: Span) -> &str {
        self.text.get(span.range()).unwrap_or("")
    }
}

/// The checkpoints of a text that is not all ASCII: entry `i` is at the character boundary
/// at or before byte `i * CHECKPOINT`.
fn checkpoints(text: &str) -> Vec<Checkpoint> {
    let mut out = Vec::with_capacity(text.len() / CHECKPOINT + 1);
    let mut counted = Checkpoint::default();
    let mut previous = counted;
    for (i, c) in text.char_indices() {
        if out.len() * CHECKPOINT <= i {
            // Byte `out.len() * CHECKPOINT` is this character's start or inside the previous
            // one (a character is under 5 bytes, so no checkpoint is skipped).
            out.push(if out.len() * CHECKPOINT == i {
                counted
            } else {
                previous
            });
        }
        previous = counted;
        counted.byte = (i + c.len_utf8()) as u32;
        counted.chars += 1;
        counted.utf16 += c.len_utf16() as u32;
    }
    out
}

/// All files of one compilation, in a fixed order (the order the runtime gave them: sorted by
/// path), so that file ids and therefore outputs are deterministic.
#[derive(Clone, Debug, Default)]
pub struct SourceMap {
    files: Vec<SourceFile>,
}

impl SourceMap {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn add(&mut self, name: impl Into<String>, text: impl Into<String>) -> FileId {
        let id = FileId(self.files.len() as u32);
        self.files.push(SourceFile::new(id, name, text));
        id
    }

    pub fn get(&self, id: FileId) -> Option<&SourceFile> {
        self.files.get(id.0 as usize)
    }

    pub fn files(&self) -> &[SourceFile] {
        &self.files
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_chars_and_utf16() {
        let f = SourceFile::new(FileId(0), "a", "ab\nçé𝄞x\n");
        assert_eq!(f.line_col(0).line, 1);
        let x = f.text.find('x').unwrap_or(0) as u32;
        let lc = f.line_col(x);
        assert_eq!((lc.line, lc.column, lc.utf16_column), (2, 4, 4));
        assert_eq!(f.offset_of_utf16(1, 4), x);
    }

    /// Columns counted from the checkpoints agree with counting from the line's start, at
    /// every offset of a text mixing one- to four-byte characters over long lines.
    #[test]
    fn checkpointed_columns_match_counting_from_the_line_start() {
        let unit = "aé€𝄞b\n";
        let mut text = String::new();
        for i in 0..300 {
            text.push_str(&"xé𝄞".repeat(i % 97));
            text.push_str(unit);
        }
        let f = SourceFile::new(FileId(0), "a", text.clone());
        for offset in (0..=text.len()).filter(|&o| text.is_char_boundary(o)) {
            let start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
            let prefix = &text[start..offset];
            let lc = f.line_col(offset as u32);
            assert_eq!(lc.column, prefix.chars().count() as u32 + 1, "{offset}");
            assert_eq!(lc.utf16_column, prefix.encode_utf16().count() as u32);
        }
    }
}
