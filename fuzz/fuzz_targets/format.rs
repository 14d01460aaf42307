//! Fuzzes the formatter (`berth fmt`, and the language server's formatting): any UTF-8 input
//! formats without panicking (a file with errors through `format_parsed`, which prints the
//! unparsable parts as written); a file without errors formats idempotently
//! (`fmt(fmt(x)) == fmt(x)`), and its formatted text parses to the same tree but for spans.
//!
//! ```text
//! cargo +nightly fuzz run format fuzz/corpus/format fuzz/seeds/format compiler/tests/data/format
//! ```

#![no_main]

use berth_compiler::source::FileId;
use berth_compiler::syntax::ast_dump::dump_without_spans;
use berth_compiler::syntax::format::{format_file, format_parsed};
use berth_compiler::syntax::parse_file;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let parsed = parse_file(FileId(0), text);
    let printed = format_parsed(text, &parsed);
    let Ok(once) = format_file(text) else {
        return;
    };
    assert_eq!(once, printed, "a clean file formats the same either way");
    let twice = format_file(&once).expect("formatted text parses without errors");
    assert_eq!(once, twice, "formatting is idempotent");
    let mut before = parsed.ast.clone();
    // The formatter moves `use` items to the top, in source order.
    before.items.sort_by_key(|item| !matches!(item.kind, berth_compiler::syntax::ast::ItemKind::Use(_)));
    let after = parse_file(FileId(0), &once).ast;
    assert_eq!(
        dump_without_spans(&before),
        dump_without_spans(&after),
        "formatting keeps the tree"
    );
});
