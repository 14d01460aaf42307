//! Properties of the placement engine over generated estates (`testkit::estate`: 1–30
//! workloads, 1–10 targets, pools, MIG, data, services, deny rules, entitlements, quotas,
//! windows and limits, spread, isolation, fallbacks) planned at a random instant of a week:
//!
//! - every plan passes the independent verifier;
//! - no pool, CPU or memory is over-committed, and quotas, entitlement caps and window limits
//!   hold (checked here too, directly on the plan);
//! - planning twice gives byte-identical JSON;
//! - the plan read back from its JSON (format `v3`: workloads sharing rejection lists are
//!   written `rejected_as` an earlier one) is the plan.

use berth_compiler::ir::{Ir, Workload};
use berth_compiler::placement;
use berth_compiler::plan::{Plan, WorkloadStatus};
use berth_compiler::source::SourceMap;
use berth_compiler::testing::ir::{EstateShape, estate};
use berth_compiler::verify;
use jiff::Timestamp;
use proptest::prelude::*;
use std::collections::BTreeMap;

/// Monday 2025-06-02 00:00 UTC, plus up to a week.
fn instant(minutes: u32) -> Timestamp {
    Timestamp::from_second(1_748_822_400 + i64::from(minutes) * 60).expect("instant")
}

fn plan(ir: &Ir, at: Timestamp) -> Plan {
    placement::plan(ir, &SourceMap::new(), at, "sha256:props", "props")
}

fn units(w: &Workload) -> u64 {
    match w.resources.mig {
        Some(_) => u64::from(w.resources.gpu.max(1)),
        None => u64::from(w.resources.gpu),
    }
}

/// GPUs the plan gives to workloads for which `pick` holds.
fn gpus_where(ir: &Ir, plan: &Plan, pick: impl Fn(&Workload) -> bool) -> u64 {
    plan.workloads
        .iter()
        .zip(&ir.workloads)
        .filter(|(_, w)| pick(w))
        .map(|(wp, w)| {
            wp.placements
                .iter()
                .map(|p| u64::from(p.replicas) * units(w))
                .sum::<u64>()
        })
        .sum()
}

fn check_capacity(ir: &Ir, plan: &Plan) -> Result<(), TestCaseError> {
    for ledger in &plan.pools {
        prop_assert!(
            ledger.allocated <= ledger.capacity,
            "pool {}/{} over-committed",
            ledger.target,
            ledger.pool
        );
        let sum: u64 = ledger.by_workload.iter().map(|e| e.amount).sum();
        prop_assert_eq!(sum, u64::from(ledger.allocated));
    }
    let mut by_pool: BTreeMap<(&str, &str), u64> = BTreeMap::new();
    let mut by_target: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for (wp, w) in plan.workloads.iter().zip(&ir.workloads) {
        let placed: u32 = wp.placements.iter().map(|p| p.replicas).sum();
        prop_assert!(placed <= w.replicas);
        prop_assert_eq!(wp.status == WorkloadStatus::Placed, placed == w.replicas);
        for p in &wp.placements {
            if let Some(pool) = &p.pool {
                *by_pool.entry((&p.target, pool)).or_default() += u64::from(p.replicas) * units(w);
            }
            let t = by_target.entry(&p.target).or_default();
            t.0 += u64::from(p.replicas) * w.resources.cpu_millis;
            t.1 += u64::from(p.replicas) * w.resources.memory;
        }
    }
    for ledger in &plan.pools {
        let used = by_pool
            .get(&(ledger.target.as_str(), ledger.pool.as_str()))
            .copied()
            .unwrap_or(0);
        prop_assert_eq!(used, u64::from(ledger.allocated));
    }
    for t in &ir.targets {
        let (cpu, memory) = by_target.get(t.name.as_str()).copied().unwrap_or_default();
        prop_assert!(cpu <= t.cpu_millis, "target {} CPU over-committed", t.name);
        prop_assert!(
            memory <= t.memory,
            "target {} memory over-committed",
            t.name
        );
    }
    Ok(())
}

fn check_caps(ir: &Ir, plan: &Plan) -> Result<(), TestCaseError> {
    for q in &ir.policy.quotas {
        let used = gpus_where(ir, plan, |w| w.team == q.team);
        prop_assert!(used <= u64::from(q.max_gpu), "quota of {} exceeded", q.team);
    }
    for e in &ir.policy.entitlements {
        if let Some(max) = e.max_gpu {
            let used = gpus_where(ir, plan, |w| w.identity == e.identity);
            prop_assert!(
                used <= u64::from(max),
                "entitlement of {} exceeded",
                e.identity
            );
        }
    }
    for l in &ir.policy.limits {
        let window = &ir.policy.windows[l.window.index()];
        let on = plan
            .windows
            .iter()
            .find(|s| s.window == window.name)
            .is_some_and(|s| s.in_effect);
        if on {
            let used = gpus_where(ir, plan, |w| l.selector.matches(w));
            prop_assert!(
                used <= u64::from(l.max_gpu),
                "limit during {} exceeded",
                window.name
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn generated_estates_plan_soundly(
        seed in any::<u64>(),
        workloads in 1usize..=30,
        targets in 1usize..=10,
        minute in 0u32..7 * 24 * 60,
    ) {
        let ir = estate(seed, EstateShape { workloads, targets });
        let at = instant(minute);
        let p = plan(&ir, at);
        if let Err(violations) = verify::verify(&ir, &p, at) {
            let list: Vec<String> = violations.iter().map(ToString::to_string).collect();
            prop_assert!(false, "verifier: {}", list.join("; "));
        }
        check_capacity(&ir, &p)?;
        check_caps(&ir, &p)?;
        let again = plan(&ir, at);
        let text = serde_json::to_string(&p).expect("json");
        prop_assert_eq!(&text, &serde_json::to_string(&again).expect("json"));
        prop_assert_eq!(berth_compiler::plan::from_json(&text), Ok(p));
    }
}

/// A larger estate (its rejections summarised per reason): capacity, caps and determinism.
#[test]
fn a_larger_estate_stays_within_capacity() {
    let ir = estate(
        42,
        EstateShape {
            workloads: 600,
            targets: 150,
        },
    );
    let at = instant(3 * 24 * 60 + 9 * 60);
    let p = plan(&ir, at);
    let run = || -> Result<(), TestCaseError> {
        check_capacity(&ir, &p)?;
        check_caps(&ir, &p)?;
        Ok(())
    };
    if let Err(e) = run() {
        panic!("{e}");
    }
    let listed: usize = p.workloads.iter().map(|w| w.rejected.len()).sum();
    let others: u64 = p
        .workloads
        .iter()
        .flat_map(|w| &w.rejected)
        .map(|r| u64::from(r.others))
        .sum();
    let used: usize = p
        .workloads
        .iter()
        .map(|w| {
            let mut t: Vec<&str> = w.placements.iter().map(|p| p.target.as_str()).collect();
            t.dedup();
            t.len()
        })
        .sum();
    // Every target is accounted for: used, listed, or counted in a summary.
    assert_eq!(listed as u64 + others + used as u64, 600 * 150);
    let text = serde_json::to_string(&p).expect("json");
    assert_eq!(text, serde_json::to_string(&plan(&ir, at)).expect("json"));
    // Most of its workloads share their rejections with an earlier one; read back, each has
    // its full list again.
    let doc: serde_json::Value = serde_json::from_str(&text).expect("json");
    let shared = doc["workloads"]
        .as_array()
        .expect("workloads")
        .iter()
        .filter(|w| w.get("rejected_as").is_some())
        .count();
    assert!(shared > 0, "no workload shares its rejections");
    assert_eq!(berth_compiler::plan::from_json(&text), Ok(p));
}
