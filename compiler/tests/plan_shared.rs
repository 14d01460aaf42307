//! Format `v3`: a workload whose rejections are an earlier workload's but for the entries'
//! `requirement` is written `rejected_as` that workload, with its own `requirements` by
//! reason; read back, it has its full list again. And the reader's refusals of a
//! `rejected_as` or `requirements` that do not rebuild a list.

use berth_compiler::ir::Money;
use berth_compiler::plan::{
    PLAN_FORMAT, Plan, PlanReadError, Rejection, RejectionStage, SourceRef, Verification,
    WorkloadPlan, WorkloadStatus, from_json, plan_id,
};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

fn span(start: u32) -> Option<SourceRef> {
    Some(SourceRef {
        file: "w.berth".into(),
        line: start / 10,
        column: 3,
        start,
        end: start + 5,
    })
}

fn rejection(target: &str, reason: &str, requirement: Option<SourceRef>) -> Rejection {
    Rejection {
        target: target.into(),
        stage: RejectionStage::Eligibility,
        reason: reason.into(),
        message: format!("{reason} of `{target}`"),
        requirement,
        offer: Some(SourceRef {
            file: "t.berth".into(),
            line: 1,
            column: 1,
            start: target.len() as u32,
            end: 40,
        }),
        others: u32::from(reason == "cpu"),
    }
}

/// Rejected by `t1`, `t2` for `gpu_memory`, `t3` for `cpu` and `t4` for `connectivity` (no
/// requirement span), the requirements at `gpu` and `cpu`.
fn rejections(gpu: Option<SourceRef>, cpu: Option<SourceRef>) -> Vec<Rejection> {
    vec![
        rejection("t1", "gpu_memory", gpu.clone()),
        rejection("t2", "gpu_memory", gpu),
        rejection("t3", "cpu", cpu),
        rejection("t4", "connectivity", None),
    ]
}

fn workload(name: &str, rejected: Vec<Rejection>) -> WorkloadPlan {
    WorkloadPlan {
        workload: name.into(),
        release: "1.0.0".into(),
        status: WorkloadStatus::Unplaced,
        replicas: 1,
        placements: Vec::new(),
        rejected,
        cost_per_day: Money(0),
        approval: None,
        fallback: Vec::new(),
        unplaced: None,
    }
}

fn plan(workloads: Vec<WorkloadPlan>) -> Plan {
    let mut plan = Plan {
        format: PLAN_FORMAT.into(),
        compiler_version: "0.1.0".into(),
        source_digest: "sha256:s".into(),
        at: "2025-06-04T08:00:00Z".into(),
        plan_id: String::new(),
        feasible: false,
        workloads,
        pools: Vec::new(),
        targets: Vec::new(),
        windows: Vec::new(),
        reclaims: Vec::new(),
        verification: Verification::default(),
    };
    plan.plan_id = plan_id(&plan);
    plan
}

/// `a` and its sharers `b` and `f`; `c` (two requirements for one reason), `d` (another
/// message) and `e` (no rejections) written in full.
fn sharing_plan() -> Plan {
    let mut other_message = rejections(span(10), span(20));
    other_message[2].message = "another message".into();
    let mut c = rejections(span(300), span(310));
    c[1].requirement = span(320);
    plan(vec![
        workload("a", rejections(span(10), span(20))),
        workload("b", rejections(span(110), span(120))),
        workload("c", c),
        workload("d", other_message),
        workload("e", Vec::new()),
        workload("f", rejections(None, span(20))),
    ])
}

fn text(plan: &Plan) -> String {
    serde_json::to_string_pretty(plan).expect("json")
}

fn doc(plan: &Plan) -> Value {
    serde_json::from_str(&text(plan)).expect("json")
}

#[test]
fn equal_lists_are_shared_and_read_back_in_full() {
    let plan = sharing_plan();
    let doc = doc(&plan);
    let w = &doc["workloads"];
    for full in [0, 2, 3, 4] {
        assert!(w[full].get("rejected_as").is_none(), "{}", w[full]);
        assert!(w[full].get("requirements").is_none(), "{}", w[full]);
        assert!(w[full]["rejected"].is_array(), "{}", w[full]);
    }
    assert_eq!(w[4]["rejected"], json!([]));
    assert!(w[1].get("rejected").is_none(), "{}", w[1]);
    assert_eq!(w[1]["rejected_as"], "a");
    assert_eq!(
        w[1]["requirements"],
        json!({
            "connectivity": null,
            "cpu": serde_json::to_value(span(120)).expect("present"),
            "gpu_memory": serde_json::to_value(span(110)).expect("present"),
        })
    );
    assert_eq!(w[5]["rejected_as"], "a");
    assert_eq!(w[5]["requirements"]["gpu_memory"], Value::Null);
    // The keys in the order the types declare them, the sharing where `rejected` was.
    let written = text(&plan);
    let b = &written[written.find("\"workload\": \"b\"").expect("present")
        ..written.find("\"workload\": \"c\"").expect("present")];
    let at = |key: &str| {
        b.find(&format!("\n      \"{key}\": "))
            .unwrap_or_else(|| panic!("{key}"))
    };
    let keys = [
        "release",
        "status",
        "replicas",
        "placements",
        "rejected_as",
        "requirements",
        "cost_per_day",
        "approval",
        "fallback",
        "unplaced",
    ];
    assert!(keys.windows(2).all(|k| at(k[0]) < at(k[1])), "{b}");
    assert_eq!(from_json(&text(&plan)), Ok(plan.clone()));
    // The id is the hash of the compact document, as it shares.
    let mut blank = plan.clone();
    blank.plan_id = String::new();
    let compact = serde_json::to_vec(&blank).expect("json");
    assert!(String::from_utf8_lossy(&compact).contains("\"rejected_as\":\"a\""));
    let hex: String = Sha256::digest(&compact)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(plan.plan_id, format!("sha256:{hex}"));
}

#[test]
fn a_plan_without_sharing_is_written_as_before() {
    let plan = plan(vec![
        workload("a", rejections(span(10), span(20))),
        workload("b", vec![rejection("t9", "cpu", span(5))]),
    ]);
    let text = text(&plan);
    assert!(!text.contains("rejected_as") && !text.contains("requirements"));
    assert_eq!(from_json(&text), Ok(plan));
}

/// The sharing plan's document with `edit` applied, read.
fn read_edited(edit: impl FnOnce(&mut Value)) -> PlanReadError {
    let mut doc = doc(&sharing_plan());
    edit(&mut doc);
    let text = serde_json::to_string_pretty(&doc).expect("json");
    from_json(&text).expect_err("refused")
}

fn refused(e: &PlanReadError, path: &str, says: &str) {
    match e {
        PlanReadError::Shape {
            path: at,
            line,
            message,
            ..
        } => {
            assert_eq!(at, path, "{e}");
            assert!(message.contains(says), "{e}");
            assert!(*line > 1, "{e:?}");
        }
        other => panic!("not a shape error: {other:?}"),
    }
}

#[test]
fn rejected_as_an_unknown_or_later_workload_is_refused() {
    let e = read_edited(|d| d["workloads"][1]["rejected_as"] = "nobody".into());
    refused(
        &e,
        "workloads[1]",
        "`rejected_as` names `nobody`, which is not an earlier workload of the plan",
    );
    assert_eq!(
        e.to_string(),
        "not a berth plan: `workloads[1]`: `rejected_as` names `nobody`, which is not an \
         earlier workload of the plan"
    );
    let e = read_edited(|d| d["workloads"][1]["rejected_as"] = "c".into());
    refused(
        &e,
        "workloads[1]",
        "names `c`, which is not an earlier workload",
    );
    let e = read_edited(|d| d["workloads"][1]["rejected_as"] = "b".into());
    refused(
        &e,
        "workloads[1]",
        "names `b`, which is not an earlier workload",
    );
}

#[test]
fn a_chain_is_refused() {
    let e = read_edited(|d| d["workloads"][5]["rejected_as"] = "b".into());
    refused(
        &e,
        "workloads[5]",
        "`rejected_as` names `b`, which shares another workload's rejections itself",
    );
}

#[test]
fn requirements_must_cover_the_reasons_exactly() {
    let e = read_edited(|d| {
        d["workloads"][1]["requirements"]
            .as_object_mut()
            .expect("present")
            .remove("cpu");
    });
    refused(
        &e,
        "workloads[1]",
        "`requirements` has no entry for `cpu`, a reason of `a`'s rejections",
    );
    let e = read_edited(|d| d["workloads"][1]["requirements"]["quota"] = Value::Null);
    refused(
        &e,
        "workloads[1]",
        "`requirements` has an entry for `quota`, which is no reason of `a`'s rejections",
    );
    let e = read_edited(|d| {
        d["workloads"][1]
            .as_object_mut()
            .expect("present")
            .remove("requirements");
    });
    refused(&e, "workloads[1]", "`rejected_as` without `requirements`");
}

#[test]
fn a_workload_has_its_list_or_shares_one() {
    let e = read_edited(|d| d["workloads"][1]["rejected"] = json!([]));
    refused(
        &e,
        "workloads[1]",
        "`rejected` and `rejected_as` are both written",
    );
    let e = read_edited(|d| {
        d["workloads"][0]
            .as_object_mut()
            .expect("present")
            .remove("rejected");
    });
    refused(&e, "workloads[0]", "missing field `rejected`");
    let e = read_edited(|d| d["workloads"][0]["requirements"] = json!({}));
    refused(&e, "workloads[0]", "`requirements` without `rejected_as`");
    // Written, they are never null.
    let e = read_edited(|d| d["workloads"][1]["rejected_as"] = Value::Null);
    assert!(matches!(e, PlanReadError::Shape { .. }), "{e:?}");
}

#[test]
fn a_plan_of_the_previous_format_is_refused_even_when_it_reads() {
    let mut plan = plan(vec![workload("a", Vec::new())]);
    plan.format = "berth.plan/v2".into();
    let e = from_json(&text(&plan)).expect_err("refused");
    assert_eq!(
        e,
        PlanReadError::OtherFormat {
            found: "berth.plan/v2".into()
        }
    );
    assert_eq!(
        e.to_string(),
        "a plan of format `berth.plan/v2`; this berth reads `berth.plan/v3`"
    );
}
