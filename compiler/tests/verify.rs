//! The verifier, tested on a hand-built estate (`verify_kit`) and a hand-written plan
//! (`data/verify/base.plan.json`): the plan passes, and every corruption in
//! `data/verify/mutations/*.json` (an RFC 6902 patch of the plan) is caught with the right
//! violation. Adding a case is adding a file; its snapshot shows every violation found.

mod verify_kit;

use berth_compiler::diagnostics::Diagnostic;
use berth_compiler::plan::{PLAN_FORMAT, Plan};
use berth_compiler::verify::{self, Violation};
use jiff::Timestamp;
use serde::Deserialize;
use std::fmt::Write as _;

const BASE: &str = include_str!("data/verify/base.plan.json");

fn base_json() -> serde_json::Value {
    serde_json::from_str(BASE).expect("base plan is JSON")
}

fn base_plan() -> Plan {
    serde_json::from_str(BASE).expect("base plan is a plan")
}

fn instant(plan: &Plan) -> Timestamp {
    plan.at.parse().expect("base plan instant is RFC 3339")
}

/// One mutation case.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    /// What the corruption is and what must be caught.
    about: String,
    /// RFC 6902 operations applied to the base plan.
    patch: json_patch::Patch,
    /// Recompute `plan_id` after patching (default), so that only the targeted corruption
    /// shows; `false` for cases about the id itself.
    #[serde(default = "yes")]
    reseal: bool,
    /// Verify at this instant instead of the one the (patched) plan records.
    #[serde(default)]
    verify_at: Option<String>,
}

fn yes() -> bool {
    true
}

/// Renders a diagnostic as the snapshot shows it: code, message, notes, help.
fn render(d: &Diagnostic) -> String {
    let mut out = format!("{}: {}\n", d.code, d.message);
    for note in &d.notes {
        let _ = writeln!(out, "  note: {note}");
    }
    if let Some(help) = &d.help {
        let _ = writeln!(out, "  help: {help}");
    }
    out
}

fn outcome(result: Result<berth_compiler::plan::Verification, Vec<Violation>>) -> String {
    match result {
        Ok(v) => format!("verified ({} checks)\n", v.checks.len()),
        Err(violations) => violations.iter().map(|v| render(&v.diagnostic())).collect(),
    }
}

#[test]
fn base_plan_verifies() {
    let ir = verify_kit::estate();
    let plan = base_plan();
    let result = verify::verify(&ir, &plan, instant(&plan));
    assert_eq!(outcome(result.clone()), "verified (22 checks)\n");
    // The base plan is written as `berth plan` would write it: with the verifier's summary.
    assert_eq!(result.ok(), Some(plan.verification.clone()));
    assert_eq!(plan.format, PLAN_FORMAT);
}

#[test]
fn plan_id_ignores_id_and_verification_only() {
    let plan = base_plan();
    let mut other = plan.clone();
    other.plan_id = "sha256:whatever".into();
    other.verification = Default::default();
    assert_eq!(
        berth_compiler::plan::plan_id(&plan),
        berth_compiler::plan::plan_id(&other)
    );
    assert_eq!(berth_compiler::plan::plan_id(&plan), plan.plan_id);
    other.at = "2025-06-07T10:00:01Z".into();
    assert_ne!(
        berth_compiler::plan::plan_id(&plan),
        berth_compiler::plan::plan_id(&other)
    );
    let hex = plan.plan_id.strip_prefix("sha256:").expect("prefixed");
    assert!(
        hex.len() == 64
            && hex
                .chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    );
}

#[test]
fn mutations() {
    let ir = verify_kit::estate();
    insta::glob!("data/verify/mutations/*.json", |path| {
        let text = std::fs::read_to_string(path).expect("readable case");
        let case: Case =
            serde_json::from_str(&text).expect("a case: about, patch, reseal, verify_at");
        let mut doc = base_json();
        json_patch::patch(&mut doc, &case.patch).expect("patch applies to the base plan");
        let mut plan: Plan = serde_json::from_value(doc).expect("patched plan is still a plan");
        if case.reseal {
            plan.plan_id = berth_compiler::plan::plan_id(&plan);
        }
        let at = match &case.verify_at {
            Some(at) => at.parse().expect("verify_at is RFC 3339"),
            None => instant(&plan),
        };
        let result = verify::verify(&ir, &plan, at);
        insta::assert_snapshot!(format!("{}\n\n{}", case.about, outcome(result)));
    });
}

#[test]
fn every_violation_has_a_verifier_code() {
    let ir = verify_kit::estate();
    let mut plan = base_plan();
    plan.format = "berth.plan/v0".into();
    plan.pools[0].allocated = 99;
    let violations = verify::verify(&ir, &plan, instant(&plan)).expect_err("corrupted");
    for v in &violations {
        let code = v.diagnostic().code.as_str();
        assert!(code.starts_with("E06"), "{code}");
        assert!(!v.message().ends_with('.'));
        assert_eq!(v.to_string(), format!("{code}: {}", v.message()));
    }
}

/// Violations of `plan` against `ir`, as the snapshots render them.
fn violations_of(ir: &berth_compiler::ir::Ir, plan: &Plan) -> String {
    outcome(verify::verify(ir, plan, instant(plan)))
}

#[test]
fn identity_without_entitlement_holds_no_gpu() {
    // Once any entitlement exists, `chat`'s identity losing its own leaves chat and
    // embedder holding GPUs they may not have; the CPU-only notebook (no entitlement
    // either) is fine.
    let mut ir = verify_kit::estate();
    ir.policy.entitlements.retain(|e| e.identity.name != "chat");
    insta::assert_snapshot!(violations_of(&ir, &base_plan()), @r#"
    E0620: workload `chat` holds GPUs on `cloud_eu` but identity `service_account("chat")` has no entitlement
    E0620: workload `embedder` holds GPUs on `cloud_eu` but identity `service_account("chat")` has no entitlement
    "#);
}

#[test]
fn an_entitlement_expired_at_the_plan_instant_grants_nothing() {
    // `chat`'s entitlement ran until the day before the plan instant: chat and embedder
    // hold GPUs under an expired entitlement. One running a second longer than the instant
    // still grants them.
    let at = instant(&base_plan());
    let mut ir = verify_kit::estate();
    let chat = |ir: &mut berth_compiler::ir::Ir, until: Timestamp| {
        for e in &mut ir.policy.entitlements {
            if e.identity.name == "chat" {
                e.until = Some(until.to_string());
            }
        }
    };
    chat(&mut ir, at - jiff::SignedDuration::from_hours(24));
    insta::assert_snapshot!(violations_of(&ir, &base_plan()), @r#"
    E0620: workload `chat` holds GPUs on `cloud_eu` but the entitlement of identity `service_account("chat")` expired at `2025-06-06T10:00:00Z`
    E0620: workload `embedder` holds GPUs on `cloud_eu` but the entitlement of identity `service_account("chat")` expired at `2025-06-06T10:00:00Z`
    "#);
    chat(&mut ir, at + jiff::SignedDuration::from_secs(1));
    assert!(violations_of(&ir, &base_plan()).starts_with("verified"));
}

#[test]
fn without_entitlements_anyone_may_hold_gpus() {
    let mut ir = verify_kit::estate();
    ir.policy.entitlements.clear();
    // No placement breaks anything; only the reason that named the entitlement limit is no
    // longer true.
    assert_eq!(
        violations_of(&ir, &base_plan()),
        "E0634: workload `probe` rejects `cloud_eu` as `entitlement_limit`, which is not true: one more replica would exceed no such limit\n"
    );
}

/// The verifier's estate with `lyon` run by an edge agent.
fn lyon_on_an_edge_agent() -> berth_compiler::ir::Ir {
    let mut ir = verify_kit::estate();
    let lyon = ir
        .targets
        .iter_mut()
        .find(|t| t.name == "lyon")
        .expect("lyon");
    lyon.runtime = berth_compiler::ir::Runtime::Edge {
        agent: "https://lyon.example.com:7443".into(),
    };
    ir
}

#[test]
fn an_edge_agent_holds_only_models_berth_fetches() {
    // `lyon` run by an edge agent, and the fp16 variant `vision` runs there pulled from NGC:
    // the agent cannot fetch it, so the placement is not one the plan may make (the int8
    // variant on `turin`, still a cluster, is fine).
    let mut ir = lyon_on_an_edge_agent();
    let model = ir
        .models
        .iter_mut()
        .find(|m| m.name == "defect_detector")
        .expect("model");
    let fp16 = model
        .variants
        .iter_mut()
        .find(|v| v.name == "fp16")
        .expect("fp16");
    fp16.artifact = "ngc://nim/acme/defect-detector:3.2.0-fp16".into();
    // The int8 variant fits lyon too and the agent fetches it: that one must be used.
    assert_eq!(
        violations_of(&ir, &base_plan()),
        "E0611: workload `vision` on `lyon` uses variant `fp16`; the first variant that fits is `int8`\n"
    );
    // With every variant from NGC, none can be staged on lyon at all.
    let model = ir
        .models
        .iter_mut()
        .find(|m| m.name == "defect_detector")
        .expect("model");
    for v in &mut model.variants {
        v.artifact = format!("ngc://nim/acme/defect-detector:3.2.0-{}", v.name);
    }
    let found = violations_of(&ir, &base_plan());
    assert!(
        found.contains("by this target's edge agent: it does not cache `defect_detector` and fetches only `oci://`, `http(s)://` and `file://` artifacts"),
        "{found}"
    );
    // Pulled from an OCI registry instead, the same placement verifies as far as staging goes.
    let ir = lyon_on_an_edge_agent();
    assert!(
        !violations_of(&ir, &base_plan()).contains("cannot be staged"),
        "an OCI artifact is one the agent fetches"
    );
}

#[test]
fn unknown_time_zone_is_a_violation_not_a_panic() {
    let mut ir = verify_kit::estate();
    ir.policy.windows[1].zone = "Mars/Olympus_Mons".into();
    insta::assert_snapshot!(violations_of(&ir, &base_plan()), @"E0622: window `night` uses unknown time zone `Mars/Olympus_Mons`");
}

#[test]
fn a_spec_change_invalidates_the_plan() {
    // The plan is checked against the spec it is verified with: shrinking a pool below
    // what the plan allocates is caught as an over-commit and a ledger mismatch.
    let mut ir = verify_kit::estate();
    ir.targets[verify_kit::FRANKFURT as usize].pools[0].count = 3;
    insta::assert_snapshot!(violations_of(&ir, &base_plan()), @r"
    E0615: pool `h100` of `frankfurt_dc` is over-committed: 4 GPUs allocated, 3 available
      help: plan again rather than moving replicas by hand: `berth plan` never over-commits
    E0617: the ledger of pool `h100` of `frankfurt_dc` records `capacity` = 8; the placements give 3
      help: capacity ledgers are recomputed from the placements; a hand-edited plan must keep them consistent
    ");
}

#[test]
fn first_fitting_variant_follows_written_order() {
    // With int8 written first, lyon's L4 must use int8 (it fits), so the plan's fp16 is wrong.
    let mut ir = verify_kit::estate();
    ir.models[0].variants.reverse();
    insta::assert_snapshot!(violations_of(&ir, &base_plan()), @"E0611: workload `vision` on `lyon` uses variant `fp16`; the first variant that fits is `int8`");
}

#[test]
fn garbage_plans_do_not_panic() {
    // Every list emptied, every name wrong: violations, never a panic.
    let ir = verify_kit::estate();
    let mut plan = base_plan();
    for w in &mut plan.workloads {
        w.workload.push('x');
        for p in &mut w.placements {
            p.pool = Some("nope".into());
        }
    }
    plan.pools.clear();
    plan.targets.reverse();
    plan.windows.push(plan.windows[0].clone());
    let violations = verify::verify(&ir, &plan, instant(&plan)).expect_err("garbage");
    assert!(violations.len() > 10);
    let empty = berth_compiler::ir::Ir::default();
    assert!(verify::verify(&empty, &plan, instant(&plan)).is_err());
}
