//! The properties the fuzz targets check, one function per target, so that the same check
//! runs under libFuzzer (`fuzz/fuzz_targets/`, nightly) and over the kept corpus in the
//! ordinary test suite (`tests/fuzz_corpus.rs`, stable): a crash found by fuzzing
//! becomes a file in `fuzz/corpus/<target>/` and stays a regression test.
//!
//! Each function takes the fuzzer's bytes and panics, saying what broke, when a property
//! does not hold.

use serde_json::Value;

use crate::diagnostics::Diagnostic;
use crate::diagnostics::render::{render_terminal_limited, to_json_document};
use crate::driver::{self, PlanFailure};
use crate::ir::Ir;
use crate::plan::{self, Plan};
use crate::source::{FileId, SourceMap};
use crate::syntax::ast::ItemKind;
use crate::syntax::ast_dump::{self, dump_without_spans};
use crate::syntax::format::{format_file, format_parsed};
use crate::syntax::parse_file;
use crate::testing::specs::spec_from_choices;
use std::sync::OnceLock;

/// Lexing and parsing any UTF-8: no panic, every span inside the input on character
/// boundaries, and the AST walkable without overflowing the stack.
pub fn parse(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let parsed = parse_file(FileId(0), text);
    spans_inside(&parsed.diagnostics, text, FileId(0));
    let _ = ast_dump::dump(&parsed.ast);
}

/// The formatter (`berth fmt`, and the language server's formatting) on any UTF-8: no panic
/// (a file with errors goes through `format_parsed`, which prints the unparsable parts as
/// written); a file without errors formats the same either way, idempotently
/// (`fmt(fmt(x)) == fmt(x)`), and its formatted text parses to the same tree but for spans
/// (and the `use` items the formatter moves to the top, in source order).
pub fn format(data: &[u8]) {
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
    before
        .items
        .sort_by_key(|item| !matches!(item.kind, ItemKind::Use(_)));
    let after = parse_file(FileId(0), &once).ast;
    assert_eq!(
        dump_without_spans(&before),
        dump_without_spans(&after),
        "formatting keeps the tree"
    );
}

/// `berth check` and `berth plan` through the driver on any UTF-8 as a one-file spec: no
/// panic in any stage; every diagnostic's spans inside the input on character boundaries;
/// the diagnostics render for a terminal and as JSON; a spec that checks clean is planned
/// (placement and the verifier) at a fixed instant, and the verifier accepts the plan.
pub fn check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut sources = SourceMap::new();
    let file = sources.add("fuzz.berth", text);
    let compiled = driver::compile(&sources);
    spans_inside(&compiled.diagnostics, text, file);
    let _ = render_terminal_limited(&compiled.diagnostics, &sources, false, 20);
    let _ = to_json_document(&compiled.diagnostics, &sources, 20);
    if compiled.ir.is_some() {
        let at = jiff::Timestamp::from_second(1_780_000_000).expect("a valid instant");
        if let Err(PlanFailure::Unverified { violations, .. }) = driver::plan(&sources, at) {
            panic!("the verifier rejected the engine's plan: {violations:?}");
        }
    }
}

/// Every span of every diagnostic lies in `file`, inside `text`, on character boundaries.
fn spans_inside(diagnostics: &[Diagnostic], text: &str, file: FileId) {
    for d in diagnostics {
        for span in std::iter::once(d.primary.span).chain(d.labels.iter().map(|l| l.span)) {
            assert_eq!(span.file, file, "{d:?}");
            assert!(
                span.start <= span.end && span.end as usize <= text.len(),
                "{d:?}"
            );
            assert!(text.is_char_boundary(span.start as usize), "{d:?}");
            assert!(text.is_char_boundary(span.end as usize), "{d:?}");
        }
    }
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
///   digest and plan id (they hash the text) and the positions of source references, which
///   must still point at the same tokens in the same file ([`crate::testing::layout`]).
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
    crate::testing::layout::layout_free(&planned.plan, &sources)
}

/// Fuzzes reading and verifying a saved plan: arbitrary bytes, read as `berth verify` reads a
/// plan file (`plan::from_json`: UTF-8, strict JSON, no field the format lacks), then verified
/// against a fixed spec (the `three-plants` example, compiled once) at the instant the plan
/// records, as `driver::reverify` does.
///
/// Properties asserted:
///
/// 1. Nothing panics, whatever the bytes (reading, the instant, the verifier).
/// 2. A plan that verifies has a valid id (`plan_id` of its content), and is the plan the
///    compiler makes for that spec at that instant: byte for byte once both are serialised
///    canonically (`serde_json::to_vec`). The id covers every field but itself and the
///    verification summary, which the verifier pins down on its own (E0633), so the only
///    freedom left to an input that verifies is JSON's own (whitespace, key order, `others`
///    written as 0).
///
/// The corpus's plans are of `examples/three-plants` at `2025-06-04T08:00:00Z`; regenerate
/// them after a change to the plan format or the compiler version with `berth plan
/// examples/three-plants --at 2025-06-04T08:00:00Z -o fuzz/corpus/plan_json/plan.json`. The
/// others are edits of it; `rejected_as.json` writes the second workload as sharing the
/// first's rejections (format `v3`), which reads and then fails verification.
pub fn plan_json(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(plan) = plan::from_json(text) else {
        return;
    };
    let Some(at) = driver::plan_instant(&plan) else {
        return;
    };
    let spec = spec();
    if crate::verify::verify(&spec.ir, &plan, at).is_err() {
        return;
    }
    // It verifies: its id is its content's, and it is the compiler's own plan.
    assert_eq!(
        plan.plan_id,
        plan::plan_id(&plan),
        "a verified plan has a valid id"
    );
    let made: Plan = driver::plan(&spec.sources, at)
        .expect("the spec plans at any instant")
        .plan;
    let canonical = |p: &Plan| serde_json::to_vec(p).expect("a plan serialises");
    assert!(
        canonical(&plan) == canonical(&made),
        "a plan that verifies is the plan the compiler makes at its instant"
    );
}

/// The spec every input is verified against, named as `berth plan` names its files.
const SPEC: [(&str, &str); 5] = [
    (
        "models.berth",
        include_str!("../../../examples/three-plants/models.berth"),
    ),
    (
        "placement.berth",
        include_str!("../../../examples/three-plants/placement.berth"),
    ),
    (
        "policy.berth",
        include_str!("../../../examples/three-plants/policy.berth"),
    ),
    (
        "targets.berth",
        include_str!("../../../examples/three-plants/targets.berth"),
    ),
    (
        "workloads.berth",
        include_str!("../../../examples/three-plants/workloads.berth"),
    ),
];

struct Spec {
    sources: SourceMap,
    ir: Ir,
}

fn spec() -> &'static Spec {
    static SPEC_IR: OnceLock<Spec> = OnceLock::new();
    SPEC_IR.get_or_init(|| {
        let mut sources = SourceMap::new();
        for (name, text) in SPEC {
            sources.add(name, text);
        }
        let ir = driver::compile(&sources)
            .ir
            .expect("the three-plants example compiles");
        Spec { sources, ir }
    })
}
