//! The canonical formatter (`berth fmt`): one layout for every file, comments kept,
//! idempotent (`format(format(x)) == format(x)`), and the tree unchanged
//! (`parse(format(x))` equals `parse(x)` but for spans). A file with errors is never
//! rewritten: [`format_file`] returns its diagnostics instead.
//!
//! # Canonical style
//!
//! - Two spaces per indentation level; lines break at 100 columns where the layout allows.
//! - Items are separated by one blank line. `use` items come first, together and in source
//!   order (comments above one move with it); comments at the top of the file followed by a
//!   blank line stay at the top as its header. Consecutive `const` items keep the blank line
//!   between them only if the source had one.
//! - Blocks (`model`, `workload`, `target`, `placement` and `policy` bodies, nested blocks such
//!   as `resources { … }` and rule bodies) hold one entry or rule per line. Blank lines between
//!   entries are kept, at most one; none after `{` or before `}`. Empty blocks are `{}`. A
//!   nested block or rule body with a single entry and no comment stays on one line when it
//!   fits (`telemetry { buffer = 24h }`, `quota team("a") { gpu <= 8 }`).
//! - `key = value`, `key label = value`, `key <= value`: single spaces, no column alignment.
//!   Aligning the `=` of neighbouring lines makes a one-line change rewrite its neighbours, so
//!   diffs and blame get noisy.
//! - Lists, maps, records (`local { … }`) and call arguments stay on one line when they fit
//!   and hold no comment: `[a, b]`, `{ k: v }`, `kubernetes { context = "x", namespace = "y" }`,
//!   `f(a, b)`. Otherwise one element per line; list, map, argument and import-group
//!   elements then each end with a comma (adding one is a one-line diff), record entries have
//!   no separator (like block entries).
//! - Numbers and quantities are printed as written (`1_000`, `0.90`, `16GiB`); clock times as
//!   `HH:MM`. Strings are re-escaped canonically: `\"`, `\\`, `\n`, `\t`, `\r`, and `\u{…}` for
//!   other control characters and invisible direction marks; everything else is printed as
//!   itself.
//! - Binary operators have a space on each side. Parentheses appear where precedence needs
//!   them, and also around a comparison inside a comparison (they do not chain), a binary
//!   operand of `not` (`not (a == b)` reads better than the equivalent `not a == b`), a record
//!   or lambda used as an operand, and a record or lambda right before a rule's block (where
//!   the parser reads no record). A chain of `and` or `or` that does not fit breaks before
//!   each operator. Lambdas are `d -> body` or `(a, b) -> body`.
//! - `deny "reason" when condition` stays on one line if it fits, else `when …` goes on the
//!   next line, indented.
//!
//! # Comments
//!
//! Every comment is printed once, in source order (apart from those that move with a `use`
//! item), with its text unchanged except for trailing whitespace. A comment on its own line
//! stays on its own line above the next entry (or before the `}` if none follows); a comment
//! after an entry on the same line stays there. Doc comments (`///`) are printed from the
//! comments, not from the tree's `docs`, so nothing is printed twice. A list, map, record or
//! argument list that holds a comment is laid out one element per line. A comment in the
//! middle of an expression stays there: a block comment inline, a line comment followed by a
//! line break.

mod doc;
mod expr;
mod printer;
mod trivia;

use super::lexer::Comment;
use super::parser::{Parsed, parse_file};
use crate::diagnostics::{Diagnostic, Severity};
use crate::source::FileId;

/// Formats a whole file. A file with any error (lexical or syntax) is not formatted: its
/// diagnostics come back instead, because a broken file cannot be rewritten faithfully.
pub fn format_file(text: &str) -> Result<String, Vec<Diagnostic>> {
    let parsed = parse_file(FileId(0), text);
    if parsed
        .diagnostics
        .iter()
        .any(|d| d.severity == Severity::Error)
    {
        return Err(parsed.diagnostics);
    }
    Ok(format_parsed(text, &parsed))
}

/// Formats an already parsed file (`parsed` must come from `text`). On a file with errors
/// it still produces text, printing the unparsable parts as written; callers that rewrite
/// files should use [`format_file`].
pub fn format_parsed(text: &str, parsed: &Parsed) -> String {
    let mut comments: Vec<Comment> = parsed.comments.clone();
    comments.sort_by_key(|c| c.span.start);
    let mut printer = printer::Printer::new(text, &comments);
    let doc = printer.file(&parsed.ast);
    doc::render(doc)
}
