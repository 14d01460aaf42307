//! Fuzzes `berth check` and `berth plan` through the compiler's driver: any UTF-8 input as
//! a one-file spec is compiled (parse, names, types, checks, lowering) without panicking;
//! every diagnostic's spans lie inside the input on character boundaries; the diagnostics
//! render for a terminal and as JSON; and a spec that checks clean is planned (placement
//! and the verifier) at a fixed instant, also without panicking.
//!
//! ```text
//! cargo +nightly fuzz run check fuzz/corpus/check fuzz/seeds/check examples/quickstart
//! ```

#![no_main]

use berth_compiler::diagnostics::render::{render_terminal_limited, to_json_document};
use berth_compiler::driver;
use berth_compiler::source::SourceMap;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut sources = SourceMap::new();
    let file = sources.add("fuzz.berth", text);
    let compiled = driver::compile(&sources);
    for d in &compiled.diagnostics {
        for span in std::iter::once(d.primary.span).chain(d.labels.iter().map(|l| l.span)) {
            assert_eq!(span.file, file, "{d:?}");
            assert!(span.start <= span.end && span.end as usize <= text.len(), "{d:?}");
            assert!(text.is_char_boundary(span.start as usize), "{d:?}");
            assert!(text.is_char_boundary(span.end as usize), "{d:?}");
        }
    }
    let _ = render_terminal_limited(&compiled.diagnostics, &sources, false, 20);
    let _ = to_json_document(&compiled.diagnostics, &sources, 20);
    if compiled.ir.is_some() {
        let at = jiff::Timestamp::from_second(1_780_000_000).expect("a valid instant");
        if let Err(driver::PlanFailure::Unverified { violations, .. }) = driver::plan(&sources, at)
        {
            panic!("the verifier rejected the engine's plan: {violations:?}");
        }
    }
});
