//! Fuzzes lexing and parsing: any bytes that are UTF-8 must parse without panicking, and
//! every span must lie inside the input on character boundaries.
//!
//! Run from the repository root, seeded with the parser's test data:
//!
//! ```text
//! cargo +nightly fuzz run parse fuzz/corpus/parse compiler/tests/data/parse/ok compiler/tests/data/parse/err
//! ```

#![no_main]

use berth_compiler::source::FileId;
use berth_compiler::syntax::parse_file;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let parsed = parse_file(FileId(0), text);
    for d in &parsed.diagnostics {
        for span in std::iter::once(d.primary.span).chain(d.labels.iter().map(|l| l.span)) {
            assert!(span.start <= span.end && span.end as usize <= text.len());
            assert!(text.is_char_boundary(span.start as usize));
            assert!(text.is_char_boundary(span.end as usize));
        }
    }
    // The dump walks every node: it must not overflow the stack either.
    let _ = berth_compiler::syntax::ast_dump::dump(&parsed.ast);
});
