//! Placement, driven by data: every `data/placement/*.berth` file is one spec (a use case of
//! the product) and every `examples/*/` directory another. Each is compiled, planned at its
//! instant (a first line `// at: RFC3339`; by default Wednesday 2025-06-04 10:00 in Paris,
//! inside a weekday peak window), checked by the independent verifier, and its plan
//! snapshotted as JSON. Adding a case is adding a file. Every example must also place every
//! replica at a quiet instant, outside every window.

use berth_compiler::diagnostics::Diagnostic;
use berth_compiler::placement;
use berth_compiler::plan::Plan;
use berth_compiler::sema::analyze;
use berth_compiler::source::SourceMap;
use berth_compiler::syntax::parse_file;
use berth_compiler::verify;
use jiff::Timestamp;
use std::path::{Path, PathBuf};

const DEFAULT_AT: &str = "2025-06-04T08:00:00Z";

/// Tuesday 2025-06-03, 20:00 in Paris and Berlin: no window of any example is in effect, so
/// every example must place every replica.
const QUIET_AT: &str = "2025-06-03T18:00:00Z";

/// Compiles `files` (name, text) as one spec, plans it at `at` and verifies the plan.
fn check(files: &[(String, String)], at: Timestamp) -> Plan {
    let mut map = SourceMap::new();
    for (name, text) in files {
        map.add(name.clone(), text.clone());
    }
    let parsed: Vec<_> = map
        .files()
        .iter()
        .map(|f| parse_file(f.id, &f.text))
        .collect();
    let parse: Vec<Diagnostic> = parsed.iter().flat_map(|p| p.diagnostics.clone()).collect();
    assert!(parse.is_empty(), "does not parse: {parse:#?}");
    let (ir, diags) = analyze(&map, &parsed);
    let errors: Vec<&Diagnostic> = diags.iter().filter(|d| d.is_error()).collect();
    assert!(errors.is_empty(), "does not check: {errors:#?}");
    let ir = ir.expect("an IR for a spec without errors");
    let plan = placement::plan(&ir, &map, at, "sha256:fixture", "fixture");
    if let Err(violations) = verify::verify(&ir, &plan, at) {
        let list: Vec<String> = violations.iter().map(ToString::to_string).collect();
        panic!("the verifier rejects the plan:\n{}", list.join("\n"));
    }
    plan
}

fn instant(text: &str) -> Timestamp {
    let at = text
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("// at: "))
        .unwrap_or(DEFAULT_AT);
    at.trim().parse().expect("an RFC 3339 instant")
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn json(plan: &Plan) -> String {
    serde_json::to_string_pretty(plan).expect("json")
}

#[test]
fn use_cases_plan_and_verify() {
    insta::glob!("data/placement/*.berth", |path| {
        let text = std::fs::read_to_string(path).expect("fixture");
        let plan = check(&[(file_name(path), text.clone())], instant(&text));
        insta::assert_snapshot!(json(&plan));
    });
}

#[test]
fn examples_plan_and_verify() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("examples")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert!(!dirs.is_empty());
    for dir in dirs {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .expect("example")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "berth"))
            .collect();
        files.sort();
        let sources: Vec<(String, String)> = files
            .iter()
            .map(|f| (file_name(f), std::fs::read_to_string(f).expect("source")))
            .collect();
        let name = file_name(&dir);
        let quiet = check(&sources, QUIET_AT.parse().expect("instant"));
        assert!(quiet.feasible, "{name} is not feasible at {QUIET_AT}");
        // At the default instant (a weekday at 10:00 in Paris) the `peak` windows are in
        // effect: as its README says, peak-hours then holds back `distill_trial`, and only it.
        let plan = check(&sources, DEFAULT_AT.parse().expect("instant"));
        let unplaced: Vec<&str> = plan
            .workloads
            .iter()
            .filter(|w| w.unplaced.is_some())
            .map(|w| w.workload.as_str())
            .collect();
        let expected: &[&str] = if name == "peak-hours" {
            &["distill_trial"]
        } else {
            &[]
        };
        assert_eq!(unplaced, expected, "{name} at {DEFAULT_AT}");
        insta::assert_snapshot!(format!("example_{name}"), json(&plan));
    }
}
