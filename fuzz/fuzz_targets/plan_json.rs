//! Fuzzes reading and verifying a saved plan: arbitrary bytes, read as `berth verify` reads a
//! plan file (`plan::from_json`: UTF-8, strict JSON, no field the format lacks), then verified
//! against a fixed spec (the `three-plants` example, compiled once) at the instant the plan
//! records, as `driver::reverify` does.
//!
//! Properties asserted:
//!
//! 1. Nothing panics, whatever the bytes (reading, the instant, the verifier).
//! 2. A plan that verifies has a valid id (`plan_id` of its content), and is the plan the
//!    compiler makes for that spec at that instant: byte for byte once both are serialised
//!    canonically (`serde_json::to_vec`). The id covers every field but itself and the
//!    verification summary, which the verifier pins down on its own (E0633), so the only
//!    freedom left to an input that verifies is JSON's own (whitespace, key order, `others`
//!    written as 0).
//!
//! Run from the repository root, seeded with plans of the spec and broken variants:
//!
//! ```text
//! cargo +nightly fuzz run plan_json fuzz/corpus/plan_json fuzz/seeds/plan_json
//! ```
//!
//! The seeds are plans of `examples/three-plants` at `2025-06-04T08:00:00Z` (and variants);
//! regenerate them after a change to the plan format or the compiler version with
//! `berth plan examples/three-plants --at 2025-06-04T08:00:00Z -o fuzz/seeds/plan_json/plan.json`.

#![no_main]

use berth_compiler::driver;
use berth_compiler::ir::Ir;
use berth_compiler::plan::{self, Plan};
use berth_compiler::source::SourceMap;
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

/// The spec every input is verified against, named as `berth plan` names its files.
const SPEC: [(&str, &str); 5] = [
    (
        "models.berth",
        include_str!("../../examples/three-plants/models.berth"),
    ),
    (
        "placement.berth",
        include_str!("../../examples/three-plants/placement.berth"),
    ),
    (
        "policy.berth",
        include_str!("../../examples/three-plants/policy.berth"),
    ),
    (
        "targets.berth",
        include_str!("../../examples/three-plants/targets.berth"),
    ),
    (
        "workloads.berth",
        include_str!("../../examples/three-plants/workloads.berth"),
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

fuzz_target!(|data: &[u8]| {
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
    if berth_compiler::verify::verify(&spec.ir, &plan, at).is_err() {
        return;
    }
    // It verifies: its id is its content's, and it is the compiler's own plan.
    assert_eq!(plan.plan_id, plan::plan_id(&plan), "a verified plan has a valid id");
    let made: Plan = driver::plan(&spec.sources, at)
        .expect("the spec plans at any instant")
        .plan;
    let canonical = |p: &Plan| serde_json::to_vec(p).expect("a plan serialises");
    assert!(
        canonical(&plan) == canonical(&made),
        "a plan that verifies is the plan the compiler makes at its instant"
    );
});
