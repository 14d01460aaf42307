//! Queries on whole specs and protocol-free properties: the outline, quick fixes, semantic
//! token classes, queries over the real examples, and no panic at any offset of any prefix.
//! Hover, definition, references and completion at a cursor are data: one file per case
//! under `compiler/tests/data/ide/` (see `compiler/tests/ide.rs`).

use super::*;

const TARGETS: &str = "use std.gpu.{H100}\n\n/// The main cluster.\ntarget hpc {\n  class        = datacenter\n  runtime      = kubernetes { context = \"c\"  namespace = \"ml\" }\n  region       = \"eu\"\n  connectivity = connected\n  cpu    = 64\n  memory = 512GiB\n  pool h100 {\n    accelerator = H100\n    count       = 4\n  }\n  services = {}\n  cost     = { gpu_hour: 2.40 }\n}\n";

const WORKLOADS: &str = "use std.gpu.H100\n\n/// Scores payments.\nworkload scoring {\n  release  = \"1\"\n  image    = \"r/i:1\"\n  kind     = service\n  class    = production\n  identity = service_account(\"s\")\n  team     = \"risk\"\n  replicas = 1\n  resources { cpu = 2  memory = 8GiB  gpu = 1 }\n  accelerators = [H100]\n  connectivity = connected\n  environments = [datacenter]\n}\n\nplacement scoring {\n  targets = [hpc]\n}\n";

fn spec() -> Analysis {
    let mut map = SourceMap::new();
    map.add("spec/targets.berth", TARGETS);
    map.add("spec/workloads.berth", WORKLOADS);
    Analysis::new(map)
}

/// The byte offset of the `nth` occurrence of `needle` in `text`, plus `delta`.
fn at(text: &str, needle: &str, nth: usize, delta: u32) -> u32 {
    let found = text.match_indices(needle).nth(nth).map(|(i, _)| i);
    found.expect("needle in text") as u32 + delta
}

const T: FileId = FileId(0);
const W: FileId = FileId(1);

#[test]
fn the_example_spec_is_clean() {
    let a = spec();
    assert!(a.diagnostics().is_empty(), "{:#?}", a.diagnostics());
}

#[test]
fn symbols_outline_items_and_entries() {
    let a = spec();
    let symbols = a.symbols(T);
    assert_eq!(symbols.len(), 1);
    assert_eq!(
        (symbols[0].name.as_str(), symbols[0].kind),
        ("hpc", SymbolKind::Target)
    );
    assert!(symbols[0].children.iter().any(|c| c.name == "pool h100"));
}

#[test]
fn quick_fixes_come_from_did_you_mean() {
    let mut map = SourceMap::new();
    let text = "workload w {\n  replica = 2\n}\n";
    map.add("w.berth", text);
    let a = Analysis::new(map);
    let fix = a.diagnostics().iter().find_map(quick_fix).expect("a fix");
    assert_eq!(fix.replacement, "replicas");
    assert_eq!(&text[fix.span.range()], "replica");
}

#[test]
fn semantic_tokens_classify_keywords_definitions_and_literals() {
    let a = spec();
    let ast = a.ast(T);
    let tokens = semantic_tokens(T, TARGETS, ast);
    let class_of = |needle: &str| {
        let start = at(TARGETS, needle, 0, 0);
        tokens
            .iter()
            .find(|(s, _)| s.start == start)
            .map(|(_, c)| *c)
    };
    assert_eq!(class_of("target"), Some(TokenClass::Keyword));
    assert_eq!(class_of("hpc"), Some(TokenClass::Definition));
    assert_eq!(class_of("class"), Some(TokenClass::Property));
    assert_eq!(class_of("64"), Some(TokenClass::Number));
    assert_eq!(class_of("/// The"), Some(TokenClass::Comment));
}

#[test]
fn queries_never_panic_on_any_prefix_of_a_file() {
    for cut in (0..WORKLOADS.len()).step_by(7) {
        if !WORKLOADS.is_char_boundary(cut) {
            continue;
        }
        let mut map = SourceMap::new();
        map.add("t.berth", TARGETS);
        map.add("w.berth", &WORKLOADS[..cut]);
        let a = Analysis::new(map);
        for offset in (0..cut as u32).step_by(5) {
            let _ = a.hover(W, offset, None);
            let _ = a.definition(W, offset);
            let _ = a.references(W, offset);
            let _ = a.completions(W, offset, "");
        }
        let _ = a.symbols(W);
    }
}

const PEAK: [(&str, &str); 3] = [
    (
        "peak-hours/policy.berth",
        include_str!("../../../examples/peak-hours/policy.berth"),
    ),
    (
        "peak-hours/targets.berth",
        include_str!("../../../examples/peak-hours/targets.berth"),
    ),
    (
        "peak-hours/workloads.berth",
        include_str!("../../../examples/peak-hours/workloads.berth"),
    ),
];

#[test]
fn policy_bodies_and_qualified_names_are_understood() {
    let mut map = SourceMap::new();
    for (name, text) in PEAK {
        map.add(name, text);
    }
    let extra = "const big = std.gpu.H200\n";
    let extra_id = map.add("peak-hours/extra.berth", extra);
    let a = Analysis::new(map);
    assert!(a.diagnostics().is_empty(), "{:#?}", a.diagnostics());
    let policy = PEAK[0].1;
    // A bound inside an `entitle` rule: the field of the rule's schema.
    let h = a
        .hover(FileId(0), at(policy, "gpu <= 4", 0, 1), None)
        .expect("hover");
    assert!(h.markdown.starts_with("**gpu**"), "{}", h.markdown);
    // Inside a record-valued list of the rule.
    let refs = a.references(FileId(0), at(policy, "[H100]", 0, 2));
    assert!(refs.len() >= 4, "{refs:?}");
    // `std.gpu.H200` written out: its definition is in the standard library.
    let def = a
        .definition(extra_id, at(extra, "H200", 0, 1))
        .expect("definition");
    assert_eq!(stdlib::file(def.file).map(|f| f.module), Some("std.gpu"));
    let h = a
        .hover(extra_id, at(extra, "H200", 0, 1), None)
        .expect("hover");
    assert!(h.markdown.contains("memory: 141GB"), "{}", h.markdown);
}
