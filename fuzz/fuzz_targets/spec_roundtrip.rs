//! Structure-aware fuzzing of the whole compiler on specs that are meant to be valid: the
//! fuzzer's bytes are the choices of a spec generator (`testing::specs::spec_from_choices`:
//! how many rounds of models, workloads, targets and placements, which rounds add a policy,
//! every name and number), so every input is a spec and mutations reach the checker, the
//! planner and the verifier rather than dying in the parser.
//!
//! Asserted for every input:
//! - the generated spec checks without errors (else the generator or the checker is wrong);
//! - the planner's plan passes the independent verifier;
//! - `fmt` is idempotent on it;
//! - `fmt` then `plan` gives the same plan as `plan`: equal in every field except the source
//!   digest and plan id (they hash the text) and the line, column and offsets of source
//!   references (formatting moves text; the file each reference names must not change).
//!
//! ```text
//! cargo +nightly fuzz run spec_roundtrip fuzz/corpus/spec_roundtrip fuzz/seeds/spec_roundtrip
//! ```

#![no_main]

use berth_compiler::driver::{self, PlanFailure};
use berth_compiler::source::SourceMap;
use berth_compiler::syntax::format::format_file;
use berth_compiler::testing::specs::spec_from_choices;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let text = spec_from_choices(data);
    let original = plan_of(&text);
    let formatted = match format_file(&text) {
        Ok(formatted) => formatted,
        Err(diagnostics) => panic!("a spec that checks does not format: {diagnostics:?}"),
    };
    match format_file(&formatted) {
        Ok(again) => assert_eq!(again, formatted, "fmt is not idempotent"),
        Err(diagnostics) => panic!("formatted text does not parse: {diagnostics:?}"),
    }
    assert_eq!(plan_of(&formatted), original, "fmt changed the plan");
});

/// The plan of a one-file spec, as JSON without what depends on the text's layout.
fn plan_of(text: &str) -> Value {
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
