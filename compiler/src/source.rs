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
        SourceFile {
            id,
            name: name.into(),
            text,
            line_starts,
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
        let start = self.line_starts[line] as usize;
        let prefix = &self.text[start..offset];
        LineCol {
            line: line as u32 + 1,
            column: prefix.chars().count() as u32 + 1,
            utf16_column: prefix.encode_utf16().count() as u32,
        }
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
}
