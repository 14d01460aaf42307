//! Placement, driven by data: every `data/placement/*.berth` file is one spec (a use case of
//! the product) and every `examples/*/` directory another. Each is compiled, planned at its
//! instant (a first line `// at: RFC3339`; by default Wednesday 2025-06-04 10:00 in Paris,
//! inside a weekday peak window), checked by the independent verifier, and its plan
//! snapshotted as JSON. Adding a case is adding a file. Every example must also place every
//! replica at a quiet instant, outside every window.
//!
//! A fixture also states what it is about, in `// expect: FACT` lines at its end (at the end,
//! so that they move no span the snapshot records). Each fact must be one of the plan's, as
//! [`facts`] writes them: `placed W on T/P xN [variant V]`, `status W S`, `rejected W on T
//! (STAGE REASON): MESSAGE`, `unplaced W: N missing: MESSAGE`, `hint W: HINT`, `held W by
//! window N`, `approval W: policy P above AMOUNT, approvers A, B`, `no approval W`, `cost W:
//! AMOUNT per day`, `window N in effect` or `window N closed`, `feasible` or `infeasible`,
//! `staged W on T: FROM [from URI, …] (N bytes | size unknown)`, `staging T: N bytes, M
//! unsized`.
//! A failure lists the plan's facts, to copy from.

use berth_compiler::diagnostics::Diagnostic;
use berth_compiler::placement;
use berth_compiler::plan::Plan;
use berth_compiler::sema::analyze;
use berth_compiler::source::SourceMap;
use berth_compiler::syntax::parse_file;
use berth_compiler::verify;
use jiff::Timestamp;
use std::collections::BTreeSet;
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

/// Every fact of `plan` an expectation may state (see the module docs).
fn facts(plan: &Plan) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    out.insert(
        if plan.feasible {
            "feasible"
        } else {
            "infeasible"
        }
        .to_owned(),
    );
    for t in &plan.targets {
        if t.staging_bytes > 0 || t.staging_unsized > 0 {
            out.insert(format!(
                "staging {}: {} bytes, {} unsized",
                t.target, t.staging_bytes, t.staging_unsized
            ));
        }
    }
    for w in &plan.windows {
        let state = if w.in_effect { "in effect" } else { "closed" };
        out.insert(format!("window {} {state}", w.window));
    }
    for w in &plan.workloads {
        let name = &w.workload;
        let status = serde_json::to_value(w.status).expect("status");
        out.insert(format!("status {name} {}", status.as_str().unwrap_or("?")));
        out.insert(format!("cost {name}: {} per day", w.cost_per_day));
        for p in &w.placements {
            let pool = p.pool.as_deref().unwrap_or("-");
            let mut fact = format!("placed {name} on {}/{pool} x{}", p.target, p.replicas);
            if let Some(v) = &p.variant {
                fact.push_str(&format!(" variant {}", v.variant));
                let from = serde_json::to_value(v.staging.from).expect("staging source");
                let mut staged = format!(
                    "staged {name} on {}: {}",
                    p.target,
                    from.as_str().unwrap_or("?")
                );
                if !v.staging.pull.is_empty() {
                    staged.push_str(&format!(" from {}", v.staging.pull.join(", ")));
                }
                match v.staging.bytes {
                    Some(n) => staged.push_str(&format!(" ({n} bytes)")),
                    None => staged.push_str(" (size unknown)"),
                }
                out.insert(staged);
            }
            out.insert(fact);
        }
        for r in &w.rejected {
            let stage = serde_json::to_value(r.stage).expect("stage");
            out.insert(format!(
                "rejected {name} on {} ({} {}): {}",
                r.target,
                stage.as_str().unwrap_or("?"),
                r.reason,
                r.message
            ));
        }
        if let Some(u) = &w.unplaced {
            out.insert(format!(
                "unplaced {name}: {} missing: {}",
                u.missing_replicas, u.message
            ));
            if let Some(hint) = &u.hint {
                out.insert(format!("hint {name}: {hint}"));
            }
            if let Some(window) = &u.held_by_window {
                out.insert(format!("held {name} by window {window}"));
            }
        }
        match &w.approval {
            Some(a) => out.insert(format!(
                "approval {name}: policy {} above {}, approvers {}",
                a.policy,
                a.threshold,
                a.approvers.join(", ")
            )),
            None => out.insert(format!("no approval {name}")),
        };
    }
    out
}

/// The fixture's `// expect: FACT` lines.
fn expectations(text: &str) -> Vec<&str> {
    text.lines()
        .filter_map(|l| l.strip_prefix("// expect: "))
        .map(str::trim)
        .collect()
}

fn json(plan: &Plan) -> String {
    serde_json::to_string_pretty(plan).expect("json")
}

#[test]
fn use_cases_plan_and_verify() {
    insta::glob!("data/placement/*.berth", |path| {
        let text = std::fs::read_to_string(path).expect("fixture");
        let plan = check(&[(file_name(path), text.clone())], instant(&text));
        let expected = expectations(&text);
        assert!(
            !expected.is_empty(),
            "{}: no `// expect:` line says what the case is about",
            path.display()
        );
        let facts = facts(&plan);
        let missing: Vec<&&str> = expected.iter().filter(|e| !facts.contains(**e)).collect();
        assert!(
            missing.is_empty(),
            "{}: expected {missing:#?}\nthe plan's facts: {facts:#?}",
            path.display()
        );
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
