//! The properties the fuzz targets check, one function per target, so that the same check
//! runs under libFuzzer (`fuzz/fuzz_targets/`, nightly) and over the kept corpus in the
//! ordinary test suite (`compiler/tests/fuzz_corpus.rs`, stable): a crash found by fuzzing
//! becomes a file in `fuzz/corpus/<target>/` and stays a regression test.
//!
//! Each function takes the fuzzer's bytes and panics, saying what broke, when a property
//! does not hold.

use serde_json::Value;

use crate::driver::{self, PlanFailure};
use crate::source::{FileId, SourceMap};
use crate::syntax::format::format_file;
use crate::syntax::{ast_dump, parse_file};
use crate::testing::specs::spec_from_choices;

/// Lexing and parsing any UTF-8: no panic, every span inside the input on character
/// boundaries, and the AST walkable without overflowing the stack.
pub fn parse(data: &[u8]) {
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
    let _ = ast_dump::dump(&parsed.ast);
}

/// The whole compiler on specs meant to be valid: the bytes are the choices of a spec
/// generator ([`spec_from_choices`]: how many rounds of models, workloads, targets and
/// placements, which rounds add a policy, every name and number), so mutations reach the
/// checker, the planner and the verifier rather than dying in the parser.
///
/// - the generated spec checks without errors (else the generator or the checker is wrong);
/// - the planner's plan passes the independent verifier;
/// - `fmt` is idempotent on it;
/// - `fmt` then `plan` gives the same plan as `plan`: equal in every field except the source
///   digest and plan id (they hash the text) and the line, column and offsets of source
///   references (formatting moves text; the file a reference names must not change).
pub fn spec_roundtrip(data: &[u8]) {
    let text = spec_from_choices(data);
    let original = layout_free_plan(&text);
    let formatted = match format_file(&text) {
        Ok(formatted) => formatted,
        Err(diagnostics) => panic!("a spec that checks does not format: {diagnostics:?}"),
    };
    match format_file(&formatted) {
        Ok(again) => assert_eq!(again, formatted, "fmt is not idempotent"),
        Err(diagnostics) => panic!("formatted text does not parse: {diagnostics:?}"),
    }
    assert_eq!(
        layout_free_plan(&formatted),
        original,
        "fmt changed the plan"
    );
}

/// The plan of a one-file spec, as JSON without what depends on the text's layout.
fn layout_free_plan(text: &str) -> Value {
    let mut sources = SourceMap::new();
    sources.add("spec.berth", text);
    let at = "2026-06-03T10:00:00Z".parse().expect("a valid instant");
    let planned = match driver::plan(&sources, at) {
        Ok(planned) => planned,
        Err(PlanFailure::Spec(diagnostics)) => {
            let messages: Vec<_> = diagnostics.iter().map(|d| &d.message).collect();
            panic!("the generated spec has errors: {messages:?}\n{text}")
        }
        Err(PlanFailure::Unverified { violations, .. }) => {
            panic!("the verifier rejects the planner's plan: {violations:?}")
        }
    };
    let mut plan = serde_json::to_value(&planned.plan).expect("a plan serialises");
    if let Value::Object(fields) = &mut plan {
        fields.remove("source_digest");
        fields.remove("plan_id");
    }
    without_positions(&mut plan);
    plan
}

/// Zeroes the position fields of every source reference (`{file, line, column, start, end}`).
fn without_positions(value: &mut Value) {
    match value {
        Value::Object(fields) => {
            if fields.contains_key("file") && fields.contains_key("start") {
                for key in ["line", "column", "start", "end"] {
                    fields.insert(key.to_owned(), Value::from(0));
                }
            }
            fields.values_mut().for_each(without_positions);
        }
        Value::Array(items) => items.iter_mut().for_each(without_positions),
        _ => {}
    }
}
