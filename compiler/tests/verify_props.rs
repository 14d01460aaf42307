//! Properties of the verifier over the hand-built estate (`verify_kit`):
//!
//! - mutation coverage: changing any single value of the valid base plan that the plan
//!   *decides or copies* (every leaf except a few informative ones) is caught, even with the
//!   plan id recomputed (or refused by the reader: a `rejected_as` that names no earlier
//!   workload, after either name changed);
//! - windows: for windows in UTC, the verifier's evaluation agrees at any instant with an
//!   independent oracle computed from Unix seconds.

mod verify_kit;

use berth_compiler::ir::{Weekday, Window};
use berth_compiler::plan::Plan;
use berth_compiler::verify::{self, Violation};
use jiff::Timestamp;
use proptest::prelude::*;
use serde_json::Value;

const BASE: &str = include_str!("data/verify/base.plan.json");

fn base_plan() -> Plan {
    serde_json::from_str(BASE).expect("base plan")
}

/// Leaves the verifier deliberately does not check: provenance, explanations for people,
/// preference scores and the verdict itself (see docs/plan-format.md).
fn informative(path: &str) -> bool {
    const PREFIXES: &[&str] = &["/compiler_version", "/source_digest", "/verification"];
    const PARTS: &[&str] = &[
        "/score/",
        "/message",
        "/hint",
        "/held_by_window",
        "/reason",
        "/stage",
        "/requirement",
        "/offer",
    ];
    PREFIXES.iter().any(|p| path.starts_with(p)) || PARTS.iter().any(|p| path.contains(p))
}

/// Every leaf of `v` with its JSON pointer.
fn leaves(v: &Value, path: String, out: &mut Vec<(String, Value)>) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                leaves(child, format!("{path}/{k}"), out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                leaves(child, format!("{path}/{i}"), out);
            }
        }
        leaf => out.push((path, leaf.clone())),
    }
}

/// A different value of the same kind; `None` for `null` (nothing to change it to).
fn mutate(leaf: &Value) -> Option<Value> {
    Some(match leaf {
        Value::Null => return None,
        Value::Bool(b) => Value::Bool(!b),
        Value::Number(n) => Value::from(n.as_u64().expect("plan numbers are unsigned") + 1),
        Value::String(s) => match s.as_str() {
            // Enumerations: another member, so that the plan still reads.
            "placed" => "partial".into(),
            "partial" => "unplaced".into(),
            "unplaced" => "placed".into(),
            "local" => "remote".into(),
            "ga" => "preview".into(),
            "source" => "mirror".into(),
            "mirror" => "source".into(),
            "carried" => "cached".into(),
            "cached" => "carried".into(),
            _ => format!("{s}x").into(),
        },
        _ => return None,
    })
}

#[test]
fn every_decided_value_is_checked() {
    let ir = verify_kit::estate();
    let base: Value = serde_json::from_str(BASE).expect("json");
    let at: Timestamp = base_plan().at.parse().expect("instant");
    let mut all = Vec::new();
    leaves(&base, String::new(), &mut all);
    let mut checked = 0;
    let mut missed = Vec::new();
    for (path, leaf) in &all {
        if informative(path) {
            continue;
        }
        let Some(changed) = mutate(leaf) else {
            continue;
        };
        let mut doc = base.clone();
        *doc.pointer_mut(path).expect("leaf exists") = changed;
        let read = serde_json::from_value::<Plan>(doc);
        // A shared list's `rejected_as`, or the name of the workload it names, changed: it
        // names no earlier workload, and the reader refuses the plan before the verifier sees it.
        if read
            .as_ref()
            .is_err_and(|e| e.to_string().contains("`rejected_as` names"))
        {
            checked += 1;
            continue;
        }
        let mut plan = read.expect("mutated plan still reads");
        if path != "/plan_id" {
            plan.plan_id = berth_compiler::plan::plan_id(&plan);
        }
        checked += 1;
        if verify::verify(&ir, &plan, at).is_ok() {
            missed.push(path.clone());
        }
    }
    assert!(missed.is_empty(), "mutations not caught: {missed:#?}");
    assert!(checked >= 200, "only {checked} leaves mutated");
}

/// The oracle: Monday-first weekday and minute of the day of a Unix time, in UTC.
fn utc_day_minute(secs: i64) -> (usize, u16) {
    let days = secs.div_euclid(86_400);
    // 1970-01-01 was a Thursday (index 3, Monday first).
    let weekday = (days + 3).rem_euclid(7) as usize;
    let minute = (secs.rem_euclid(86_400) / 60) as u16;
    (weekday, minute)
}

fn oracle(window: &Window, secs: i64) -> bool {
    let (day, minute) = utc_day_minute(secs);
    let listed = |d: usize| window.days.contains(&Weekday::ALL[d]);
    if window.start < window.end {
        listed(day) && (window.start..window.end).contains(&minute)
    } else {
        (listed(day) && minute >= window.start) || (listed((day + 6) % 7) && minute < window.end)
    }
}

fn window_state_violations(window: Window, secs: i64, recorded: bool) -> Vec<Violation> {
    let mut ir = verify_kit::estate();
    ir.policy.windows[1] = window;
    let mut plan = base_plan();
    let at = Timestamp::from_second(secs).expect("in range");
    plan.at = at.to_string();
    plan.windows[1].in_effect = recorded;
    // Keep `peak` (Europe/Paris) out of the way: record whatever the verifier computes.
    for peak in [false, true] {
        plan.windows[0].in_effect = peak;
        plan.plan_id = berth_compiler::plan::plan_id(&plan);
        let violations = match verify::verify(&ir, &plan, at) {
            Ok(_) => Vec::new(),
            Err(v) => v,
        };
        let peak_wrong = violations.iter().any(
            |v| matches!(v, Violation::WindowStateMismatch { window, .. } if window == "peak"),
        );
        if !peak_wrong {
            return violations
                .into_iter()
                .filter(|v| matches!(v, Violation::WindowStateMismatch { .. }))
                .collect();
        }
    }
    unreachable!("peak is either in effect or not")
}

fn arb_window() -> impl Strategy<Value = Window> {
    (
        proptest::sample::subsequence(Weekday::ALL.to_vec(), 0..=7),
        0u16..1440,
        0u16..=1440,
    )
        .prop_map(|(days, start, end)| Window {
            policy: "p".into(),
            name: "night".into(),
            days,
            start,
            end,
            zone: "UTC".into(),
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn utc_windows_agree_with_the_oracle(
        window in arb_window(),
        // 2000-01-01 .. 2100-01-01
        secs in 946_684_800i64..4_102_444_800,
    ) {
        let expected = oracle(&window, secs);
        prop_assert!(window_state_violations(window.clone(), secs, expected).is_empty());
        prop_assert_eq!(window_state_violations(window, secs, !expected).len(), 1);
    }
}
