//! The registry of diagnostic codes. A code, once published, keeps its meaning forever.
//! Every code is documented with an example in `docs/diagnostics.md` (a test checks this).
//!
//! Ranges: E00xx lexical, E01xx syntax and input limits, E02xx names and imports,
//! E03xx schema and types, E04xx semantic checks, E05xx placement and plan, E06xx verifier.

use serde::{Serialize, Serializer};

macro_rules! codes {
    ($($(#[doc = $doc:literal])* $name:ident = $num:literal, $title:literal;)*) => {
        /// A stable diagnostic code such as `E0101`.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Code {
            $($(#[doc = $doc])* $name,)*
        }

        impl Code {
            /// Every code, in numeric order.
            pub const ALL: &'static [Code] = &[$(Code::$name,)*];

            /// `E0101` and so on.
            pub fn as_str(self) -> &'static str {
                match self { $(Code::$name => $num,)* }
            }

            /// A short title, as in the heading of `docs/diagnostics.md`.
            pub fn title(self) -> &'static str {
                match self { $(Code::$name => $title,)* }
            }
        }
    };
}

codes! {
    // ---- E00xx: lexical ----
    /// A character that starts no token.
    UnexpectedChar = "E0001", "unexpected character";
    /// A string literal with no closing quote before the end of the line or file.
    UnterminatedString = "E0002", "unterminated string";
    /// A `/* */` comment (they nest) not closed before the end of the file.
    UnterminatedComment = "E0003", "unterminated block comment";
    /// A backslash escape other than `\"`, `\\`, `\n`, `\t`, `\r`, `\u{…}`.
    InvalidEscape = "E0004", "invalid escape in string";
    /// A number that is not well formed (`1__0`, `1.`, `1.2.3`, leading `_`) or too large.
    MalformedNumber = "E0005", "malformed number";
    /// A number followed by letters that are not a known unit (`16Gb`, `3q`).
    UnknownUnit = "E0006", "unknown unit suffix";
    /// A clock time that is not `HH:MM` with hours 00–23 (or 24:00) and minutes 00–59.
    InvalidClockTime = "E0007", "invalid clock time";

    // ---- E01xx: syntax and input limits ----
    /// The parser found a token where it expected something else.
    UnexpectedToken = "E0101", "unexpected token";
    /// A `{`, `[` or `(` that is never closed.
    UnclosedDelimiter = "E0102", "unclosed delimiter";
    /// The file ended in the middle of an item or expression.
    UnexpectedEof = "E0103", "unexpected end of file";
    /// Something at the top level that is not an item (`use`, `const`, `model`, `workload`,
    /// `target`, `policy`, `placement`).
    ExpectedItem = "E0104", "expected an item";
    /// An item without its name (`workload { … }`).
    MissingName = "E0105", "missing name";
    /// A field without its value (`replicas =`).
    MissingValue = "E0106", "missing value";
    /// Comparisons chained without parentheses (`a < b < c`).
    ChainedComparison = "E0107", "chained comparison";
    /// Blocks, lists or expressions nested deeper than the limit.
    NestingTooDeep = "E0190", "nesting too deep";
    /// A source file larger than the limit.
    FileTooLarge = "E0191", "file too large";
    /// A file with more tokens than the limit.
    TooManyTokens = "E0192", "too many tokens";

    // ---- E02xx: names and imports ----

    // ---- E03xx: schema and types ----

    // ---- E04xx: semantic checks ----

    // ---- E05xx: placement and plan ----

    // ---- E06xx: verifier ----
}

impl Serialize for Code {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
