//! End-to-end tests of `berth plan`, `berth explain` and `berth verify`: the real binary on
//! copies of the examples in temporary directories, checking exit codes (0 placed and
//! verified, 1 infeasible / errors / refused, 2 usage or I/O), where output goes, and that
//! plans are byte-identical for the same sources and instant.

mod isolated;
use berth_runtime::backends::edge::bundle::keys;
use berth_runtime::commands::approval;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

/// Wednesday 2025-06-04, 10:00 in Paris and Berlin: the `peak` windows are in effect.
const PEAK: &str = "2025-06-04T08:00:00Z";

fn berth(dir: &Path, args: &[&str]) -> Output {
    isolated::berth()
        .args(args)
        .current_dir(dir)
        .env_remove("NO_COLOR")
        .output()
        .expect("the berth binary runs")
}

fn code(output: &Output) -> i32 {
    output.status.code().expect("berth exits normally")
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).expect("stdout is UTF-8")
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).expect("stderr is UTF-8")
}

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(name)
}

/// A temporary directory holding a copy of example `name` in `DIR/spec`, each file passed
/// through `edit` (file name, text).
fn copy_example(name: &str, edit: impl Fn(&str, String) -> String) -> tempfile::TempDir {
    copy_spec(&example(name), edit)
}

/// A temporary directory holding a copy of the spec folder `from` in `DIR/spec`, as
/// [`copy_example`] makes.
fn copy_spec(from: &Path, edit: impl Fn(&str, String) -> String) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let spec = dir.path().join("spec");
    fs::create_dir(&spec).expect("spec dir");
    for entry in fs::read_dir(from).expect("spec folder") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "trust") {
            fs::copy(&path, spec.join(path.file_name().expect("name"))).expect("copy");
        } else if path.extension().is_some_and(|e| e == "berth") {
            let file = path
                .file_name()
                .expect("name")
                .to_string_lossy()
                .into_owned();
            let text = fs::read_to_string(&path).expect("source");
            fs::write(spec.join(&file), edit(&file, text)).expect("write");
        }
    }
    dir
}

fn unchanged(_: &str, text: String) -> String {
    text
}

fn plan_json(dir: &Path) -> serde_json::Value {
    let text = fs::read_to_string(dir.join("plan.json")).expect("plan written");
    serde_json::from_str(&text).expect("plan JSON")
}

#[test]
fn plan_prints_a_table_per_workload_and_exits_zero() {
    let dir = copy_example("three-plants", unchanged);
    let out = berth(dir.path(), &["plan", "spec", "--at", PEAK]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let table = stdout(&out);
    assert!(
        table.contains("vision_inspect  placed  2/2 replicas"),
        "{table}"
    );
    assert!(table.contains("lyon    l4    1         fp16"), "{table}");
    assert!(table.contains("turin   orin  1         int8"), "{table}");
    assert!(
        table.contains("rejected: 1 target (data_latency 1)"),
        "{table}"
    );
    assert!(table.contains("fallback: lyon"), "{table}");
    let summary = stderr(&out);
    assert!(summary.contains("2 workloads: 2 placed"), "{summary}");
    assert!(summary.contains("verified (22 checks)"), "{summary}");
}

#[test]
fn plan_json_is_byte_identical_wherever_and_however_the_spec_is_named() {
    let one = copy_example("three-plants", unchanged);
    let two = copy_example("three-plants", unchanged);
    let a = berth(
        one.path(),
        &["plan", "spec", "--at", PEAK, "--output", "json"],
    );
    let spec_two = two.path().join("spec");
    let spelled = format!("{}/./", spec_two.display());
    let b = berth(
        one.path(),
        &[
            "--output",
            "json",
            "plan",
            &spelled,
            "--at",
            "2025-06-04T10:00:00+02:00",
        ],
    );
    assert_eq!(code(&a), 0, "{}", stderr(&a));
    assert_eq!(code(&b), 0, "{}", stderr(&b));
    assert_eq!(stdout(&a), stdout(&b));
    let plan: serde_json::Value = serde_json::from_str(&stdout(&a)).expect("JSON");
    assert_eq!(plan["at"], PEAK);
    assert_eq!(plan["feasible"], true);
    // Source references name files relative to the spec directory.
    let rejection = &plan["workloads"][0]["rejected"][0];
    assert_eq!(rejection["requirement"]["file"], "workloads.berth");
    assert_eq!(rejection["offer"]["file"], "targets.berth");
    // `-o` writes the same bytes.
    let c = berth(
        one.path(),
        &["plan", "spec", "--at", PEAK, "-o", "plan.json"],
    );
    assert_eq!(code(&c), 0, "{}", stderr(&c));
    assert_eq!(
        fs::read_to_string(one.path().join("plan.json")).expect("written"),
        stdout(&a)
    );
    assert!(
        stderr(&c).contains("written to `plan.json`"),
        "{}",
        stderr(&c)
    );
}

#[test]
fn infeasible_plan_exits_one_and_is_still_written() {
    // Three replicas, at most one per target, two targets.
    let dir = copy_example("edge-fleet", |_, t| {
        t.replace("replicas = 2", "replicas = 3")
    });
    let out = berth(
        dir.path(),
        &["plan", "spec", "--at", PEAK, "-o", "plan.json"],
    );
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let table = stdout(&out);
    assert!(
        table.contains("leak_watch  PARTIAL  2/3 replicas"),
        "{table}"
    );
    assert!(table.contains("not placed: 1 replica:"), "{table}");
    assert!(stderr(&out).contains("not feasible"), "{}", stderr(&out));
    let plan = plan_json(dir.path());
    assert_eq!(plan["feasible"], false);
    assert_eq!(plan["workloads"][0]["unplaced"]["missing_replicas"], 1);
    // An infeasible plan is still a verified plan.
    let check = berth(dir.path(), &["verify", "plan.json", "--spec", "spec"]);
    assert_eq!(code(&check), 0, "{}", stderr(&check));
}

#[test]
fn capacity_shortfall_names_the_pool_and_how_much_is_missing() {
    let dir = copy_example("peak-hours", unchanged);
    let out = berth(dir.path(), &["plan", "spec", "--at", PEAK]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let table = stdout(&out);
    assert!(
        table.contains("distill_trial  UNPLACED  0/1 replicas"),
        "{table}"
    );
    assert!(table.contains("8 more GPUs needed"), "{table}");
    assert!(table.contains("held back by window `peak`"), "{table}");
    // Outside the window everything is placed.
    let evening = berth(
        dir.path(),
        &["plan", "spec", "--at", "2025-06-03T18:00:00Z"],
    );
    assert_eq!(code(&evening), 0, "{}", stderr(&evening));
}

#[test]
fn spec_errors_exit_one_and_write_nothing() {
    let dir = copy_example("three-plants", |file, t| {
        if file == "workloads.berth" {
            t.replacen("memory = 16GiB", "memory = 16Gb", 1)
        } else {
            t
        }
    });
    let out = berth(
        dir.path(),
        &["plan", "spec", "--at", PEAK, "-o", "plan.json"],
    );
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains("E0006"), "{}", stderr(&out));
    assert!(stderr(&out).contains("no plan: the spec has errors"));
    assert!(stdout(&out).is_empty());
    assert!(!dir.path().join("plan.json").exists());
    let json = berth(dir.path(), &["plan", "spec", "--output", "json"]);
    assert_eq!(code(&json), 1);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&json)).expect("JSON");
    assert_eq!(doc["diagnostics"][0]["code"], "E0006");
}

#[test]
fn a_bad_instant_exits_two_with_a_hint() {
    let dir = copy_example("three-plants", unchanged);
    for at in ["2025-13-01T00:00:00Z", "tomorrow", "2025-06-04T10:00:00"] {
        let out = berth(dir.path(), &["plan", "spec", "--at", at]);
        assert_eq!(code(&out), 2, "{at}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains(&format!("`--at {at}` is not an RFC 3339 instant")),
            "{err}"
        );
        assert!(
            err.contains("help: write a date, a time and a UTC offset"),
            "{err}"
        );
        assert!(stdout(&out).is_empty());
    }
}

#[test]
fn a_missing_spec_exits_two() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = berth(dir.path(), &["plan", "nowhere"]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("`nowhere` does not exist"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn verify_accepts_the_plan_it_was_given() {
    let dir = copy_example("training-and-inference", unchanged);
    let out = berth(dir.path(), &["plan", "spec", "-o", "plan.json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let check = berth(dir.path(), &["verify", "plan.json", "--spec", "spec"]);
    assert_eq!(code(&check), 0, "{}", stderr(&check));
    assert!(
        stderr(&check).contains("22 checks passed"),
        "{}",
        stderr(&check)
    );
    let json = berth(
        dir.path(),
        &["verify", "plan.json", "--spec", "spec", "--output", "json"],
    );
    assert_eq!(code(&json), 0);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&json)).expect("JSON");
    assert_eq!(doc["verified"], true);
    assert_eq!(doc["source_digest_matches"], true);
}

#[test]
fn verify_rejects_a_hand_edited_over_committed_pool() {
    let dir = copy_example("three-plants", unchanged);
    let out = berth(
        dir.path(),
        &["plan", "spec", "--at", PEAK, "-o", "plan.json"],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let mut plan = plan_json(dir.path());
    // Ten more replicas of `vision_inspect` on `lyon`'s eight-GPU pool `l4`; the ledgers and
    // the plan id are left as they were.
    let placement = &mut plan["workloads"][0]["placements"][0];
    assert_eq!(placement["pool"], "l4");
    placement["replicas"] = 11.into();
    let text = serde_json::to_string_pretty(&plan).expect("JSON");
    fs::write(dir.path().join("edited.json"), text).expect("write");
    let check = berth(dir.path(), &["verify", "edited.json", "--spec", "spec"]);
    assert_eq!(code(&check), 1);
    let err = stderr(&check);
    assert!(
        err.contains("pool `l4` of `lyon` is over-committed: 11 GPUs allocated, 8 available"),
        "{err}"
    );
    assert!(err.contains("E0603"), "the edit changed the plan id: {err}");
    assert!(err.contains("does not verify"), "{err}");
    let json = berth(
        dir.path(),
        &[
            "verify",
            "edited.json",
            "--spec",
            "spec",
            "--output",
            "json",
        ],
    );
    assert_eq!(code(&json), 1);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&json)).expect("JSON");
    assert_eq!(doc["verified"], false);
    let codes: Vec<&str> = doc["diagnostics"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|d| d["code"].as_str())
        .collect();
    assert!(codes.contains(&"E0615"), "{codes:?}");
}

/// A saved plan of `training-and-inference`, at `DIR/plan.json`, and the JSON to edit.
fn saved_plan() -> (tempfile::TempDir, serde_json::Value) {
    let dir = copy_example("training-and-inference", unchanged);
    let out = berth(dir.path(), &["plan", "spec", "-o", "plan.json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let plan = plan_json(dir.path());
    (dir, plan)
}

/// `plan` with `value` set at the JSON pointer `at` (an object's new field or an existing
/// value), written to `DIR/edited.json`; `berth verify` on it.
fn verify_edited(
    dir: &Path,
    plan: &serde_json::Value,
    at: &str,
    value: serde_json::Value,
) -> Output {
    let mut plan = plan.clone();
    let (parent, key) = at.rsplit_once('/').expect("a pointer");
    let object = plan
        .pointer_mut(parent)
        .and_then(|v| v.as_object_mut())
        .unwrap_or_else(|| panic!("`{parent}` is an object of the plan"));
    object.insert(key.to_owned(), value);
    let text = serde_json::to_string_pretty(&plan).expect("JSON");
    fs::write(dir.join("edited.json"), text).expect("write");
    berth(dir, &["verify", "edited.json", "--spec", "spec"])
}

#[test]
fn verify_refuses_fields_the_plan_format_does_not_have() {
    let (dir, plan) = saved_plan();
    // (where the field is added, what the error says)
    let cases = [
        ("/note", "unknown field `note` at the top level"),
        (
            "/workloads/0/rejected/0/note",
            "unknown field `note` in `workloads[0].rejected[0]`",
        ),
        (
            "/workloads/2/placements/0/variant/signed_by",
            "unknown field `signed_by` in `workloads[2].placements[0].variant`",
        ),
        (
            "/verification/reviewer",
            "unknown field `reviewer` in `verification`",
        ),
    ];
    for (at, expected) in cases {
        let out = verify_edited(dir.path(), &plan, at, "looks fine".into());
        let err = stderr(&out);
        assert_eq!(code(&out), 1, "{at}: {err}");
        assert!(
            err.contains("`edited.json`:"),
            "{at}: the line and column: {err}"
        );
        assert!(err.contains(expected), "{at}: {err}");
        assert!(
            err.contains("help: a plan holds only the fields of its format"),
            "{at}: {err}"
        );
    }
    // The line is the field's own.
    let out = verify_edited(dir.path(), &plan, "/note", "x".into());
    let text = fs::read_to_string(dir.path().join("edited.json")).expect("edited");
    let line = 1 + text
        .lines()
        .position(|l| l.trim_start().starts_with("\"note\""))
        .expect("the field is written");
    let at = format!("`edited.json`:{line}:");
    assert!(stderr(&out).contains(&at), "{at}: {}", stderr(&out));
    // `apply` (and every command that takes a saved plan) reads it the same way, before
    // any cluster is asked anything.
    let out = berth(dir.path(), &["apply", "edited.json", "--spec", "spec"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("unknown field `note` at the top level"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn verify_catches_an_edited_reason_message_or_score_under_the_old_id() {
    let (dir, plan) = saved_plan();
    let cases: [(&str, serde_json::Value); 5] = [
        ("/workloads/0/rejected/0/reason", "capacity".into()),
        (
            "/workloads/0/rejected/0/message",
            "rejected for a better reason".into(),
        ),
        ("/workloads/0/placements/0/score/0/value", 1.into()),
        ("/workloads/2/rejected/0/others", 0.into()),
        ("/workloads/0/placements/0/cost_per_day", 1.into()),
    ];
    for (at, value) in cases {
        let out = verify_edited(dir.path(), &plan, at, value);
        let err = stderr(&out);
        if at.ends_with("others") {
            // `others: 0` is the omitted default written out: the same plan, the same id.
            assert_eq!(code(&out), 0, "{at}: {err}");
            continue;
        }
        assert_eq!(code(&out), 1, "{at}: {err}");
        assert!(err.contains("E0603"), "{at}: {err}");
        assert!(
            err.contains("does not match the plan's content"),
            "{at}: {err}"
        );
    }
}

#[test]
fn verify_refuses_an_edited_verification_summary() {
    let (dir, plan) = saved_plan();
    let cases: [(&str, serde_json::Value); 3] = [
        (
            "/verification/violations",
            serde_json::json!(["looks fine"]),
        ),
        ("/verification/verified", false.into()),
        ("/verification/checks", serde_json::json!(["format"])),
    ];
    for (at, value) in cases {
        let out = verify_edited(dir.path(), &plan, at, value);
        let err = stderr(&out);
        assert_eq!(code(&out), 1, "{at}: {err}");
        assert!(err.contains("E0633"), "{at}: {err}");
        assert!(
            !err.contains("E0603"),
            "{at}: the id leaves `verification` out: {err}"
        );
    }
}

/// `berth apply plan.json --spec spec` with no cluster reachable (a kubeconfig that does not
/// exist): what matters is whether the refusals before any cluster let it through.
fn apply_saved(dir: &Path) -> Output {
    isolated::berth()
        .args(["apply", "plan.json", "--spec", "spec"])
        .current_dir(dir)
        .env("KUBECONFIG", dir.join("no-such-kubeconfig"))
        .output()
        .expect("the berth binary runs")
}

/// The training example's demo approver key (its public half is in the example's trust file).
fn approver_key() -> PathBuf {
    example("training-and-inference").join("keys/ml-platform-leads.key")
}

/// Writes `approvals` as the plan's approval file in `dir`.
fn write_approvals(dir: &Path, approvals: Vec<approval::SignedApproval>) {
    let file = approval::ApprovalFile {
        format: approval::APPROVALS_FORMAT.into(),
        approvals,
    };
    fs::write(
        dir.join("plan.approval.json"),
        serde_json::to_string(&file).expect("json"),
    )
    .expect("write");
}

#[test]
fn approvals_are_signatures_by_a_key_the_policy_names() {
    // `ranker_training` exceeds policy `platform`'s approval threshold, whose only approver
    // is `ml-platform-leads`, a name its trust file maps to a key.
    let (dir, plan) = saved_plan();
    let waiting = &plan["workloads"][1];
    assert_eq!(waiting["workload"], "ranker_training");
    assert_eq!(
        waiting["approval"]["approvers"],
        serde_json::json!(["ml-platform-leads"])
    );
    assert_eq!(waiting["approval"]["trust"], "approvers.trust");
    let lead = keys::read_signing(&approver_key()).expect("demo key");
    let mallory = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
    let mallory_path = dir.path().join("mallory");
    keys::write_pair(&mallory_path, &mallory).expect("keys");
    let claim = |plan_id: &str, by: &ed25519_dalek::SigningKey, expires: Option<&str>| {
        approval::ApprovalClaim {
            plan_id: plan_id.into(),
            workloads: vec!["ranker_training".into()],
            approver: keys::public_text(&by.verifying_key()),
            approved_at: "2026-12-04T08:00:00Z".into(),
            expires_at: expires.map(Into::into),
        }
    };
    let plan_id = plan["plan_id"].as_str().expect("id");

    // `berth approve` with a key the policy does not name refuses and writes nothing.
    let out = berth(
        dir.path(),
        &[
            "approve",
            "plan.json",
            "--key",
            "mallory.key",
            "--spec",
            "spec",
        ],
    );
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "may not approve `ranker_training`: policy `platform` names `ml-platform-leads`"
        ),
        "{}",
        stderr(&out)
    );
    assert!(!dir.path().join("plan.approval.json").exists());
    // Names need the trust file, read from the spec.
    let lead_key = approver_key();
    let as_lead = |extra: &[&str]| {
        let mut args = vec!["approve", "plan.json", "--key"];
        args.push(lead_key.to_str().expect("utf-8"));
        args.extend_from_slice(extra);
        berth(dir.path(), &args)
    };
    let out = as_lead(&[]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("add `--spec DIR`"),
        "{}",
        stderr(&out)
    );

    // Approvals `apply` refuses, each with its reason, before any cluster: a foreign key,
    // a forged one (signed by mallory, claiming the lead's key), an altered one, an expired
    // one, one for another plan.
    let mut forged = claim(plan_id, &mallory, None).sign(&mallory);
    forged.claim.approver = keys::public_text(&lead.verifying_key());
    let mut altered = claim(plan_id, &lead, None).sign(&lead);
    altered.claim.expires_at = Some("2999-01-01T00:00:00Z".into());
    let cases = [
        (
            claim(plan_id, &mallory, None).sign(&mallory),
            "may not approve `ranker_training`: policy `platform` names `ml-platform-leads`",
        ),
        (forged, "does not verify under that key (altered or forged)"),
        (
            altered,
            "does not verify under that key (altered or forged)",
        ),
        (
            claim(plan_id, &lead, Some("2026-01-01T00:00:00Z")).sign(&lead),
            "expired at `2026-01-01T00:00:00Z`",
        ),
        (
            claim("sha256:another", &lead, None).sign(&lead),
            "is for plan `sha256:another`, not this one",
        ),
    ];
    for (approval, reason) in cases {
        write_approvals(dir.path(), vec![approval]);
        let out = apply_saved(dir.path());
        let err = stderr(&out);
        assert_eq!(code(&out), 1, "{reason}: {err}");
        assert!(
            err.contains("placements await approval: `ranker_training` (policy `platform`)"),
            "{err}"
        );
        assert!(err.contains(reason), "{reason}: {err}");
    }

    // An unsigned approval of an earlier berth, and a file that is not one, are reported,
    // not taken for "not approved".
    let v1 = serde_json::json!({
        "format": "berth.approval/v1",
        "plan_id": plan_id,
        "approved_by": "ml-platform-leads",
        "approved_at": "2025-06-04T08:00:00Z",
        "workloads": ["ranker_training"],
    });
    for text in [v1.to_string(), "{\"format\": ".to_string()] {
        fs::write(dir.path().join("plan.approval.json"), text).expect("write");
        let out = apply_saved(dir.path());
        assert_eq!(code(&out), 1, "{}", stderr(&out));
        assert!(
            stderr(&out).contains("cannot read the approval `plan.approval.json`"),
            "{}",
            stderr(&out)
        );
    }

    // The named approver's signed approval passes the refusals; this apply then stops at the
    // missing kubeconfig, not at the approval.
    fs::remove_file(dir.path().join("plan.approval.json")).expect("remove");
    let out = as_lead(&["--spec", "spec", "--expires", "24h"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("approved `ranker_training` of plan"),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("as `ml-platform-leads` (ed25519:"));
    let out = apply_saved(dir.path());
    let err = stderr(&out);
    assert!(!err.contains("approv"), "{err}");
    let text = fs::read_to_string(dir.path().join("plan.approval.json")).expect("approvals");
    let file: approval::ApprovalFile = serde_json::from_str(&text).expect("approval file");
    assert_eq!(file.approvals.len(), 1);
    assert!(file.approvals[0].claim.expires_at.is_some());
}

#[test]
fn verify_reports_a_spec_changed_since_planning() {
    let dir = copy_example("three-plants", unchanged);
    let out = berth(
        dir.path(),
        &["plan", "spec", "--at", PEAK, "-o", "plan.json"],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let policy = dir.path().join("spec/policy.berth");
    let text = fs::read_to_string(&policy).expect("policy");
    fs::write(&policy, format!("// reviewed\n{text}")).expect("edit");
    let check = berth(dir.path(), &["verify", "plan.json", "--spec", "spec"]);
    assert_eq!(code(&check), 1);
    let err = stderr(&check);
    assert!(
        err.contains("the spec changed since the plan was made"),
        "{err}"
    );
    assert!(err.contains("help: plan again"), "{err}");
}

#[test]
fn verify_locates_malformed_plan_json() {
    let dir = copy_example("edge-fleet", unchanged);
    fs::write(
        dir.path().join("broken.json"),
        "{\n  \"format\": \"berth.plan/v3\",\n  \"at\": }\n",
    )
    .expect("write");
    let out = berth(dir.path(), &["verify", "broken.json", "--spec", "spec"]);
    assert_eq!(code(&out), 1);
    let err = stderr(&out);
    assert!(err.contains("`broken.json`:3:9: not a berth plan"), "{err}");
    assert!(err.contains("help: the file is not valid JSON"), "{err}");

    fs::write(
        dir.path().join("shape.json"),
        "{\"format\": \"berth.plan/v3\"}",
    )
    .expect("write");
    let out = berth(dir.path(), &["verify", "shape.json", "--spec", "spec"]);
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains("not shaped like a plan"),
        "{}",
        stderr(&out)
    );

    fs::write(
        dir.path().join("old.json"),
        "{\"format\": \"berth.plan/v0\"}",
    )
    .expect("write");
    let out = berth(dir.path(), &["verify", "old.json", "--spec", "spec"]);
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains("format `berth.plan/v0`"),
        "{}",
        stderr(&out)
    );

    let out = berth(dir.path(), &["verify", "absent.json", "--spec", "spec"]);
    assert_eq!(
        code(&out),
        2,
        "an unreadable file is an environment problem"
    );
}

/// Line (1-based) of the last line of `text` that contains `what`.
fn last_line_of(text: &str, what: &str) -> usize {
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.contains(what))
        .last()
        .map(|(i, _)| i + 1)
        .unwrap_or_else(|| panic!("`{what}` in {text}"))
}

/// Two workloads written alike (`vision_twin` a copy of `vision_inspect`, after it): the saved
/// plan writes the second `rejected_as` the first, with its own requirement span; the plan
/// validates against the published schema, verifies, and reads back with the twin's
/// rejection pointing into the twin. A `rejected_as` edited to name no earlier workload is
/// refused with its location; a plan of the previous format is refused as such.
#[test]
fn identical_workloads_share_their_rejections_in_the_saved_plan() {
    let twin = |file: &str, text: String| {
        if file != "workloads.berth" {
            return text;
        }
        let start = text
            .find("workload vision_inspect {")
            .expect("vision_inspect");
        let end = start + text[start..].find("\n}\n").expect("its end") + 3;
        let copy = text[start..end].replace("vision_inspect", "vision_twin");
        format!("{text}\n{copy}")
    };
    let dir = copy_example("three-plants", twin);
    let written = fs::read_to_string(dir.path().join("spec/workloads.berth")).expect("spec");
    // The twin is written last: its `max_latency` is the last one.
    let twin_line = last_line_of(&written, "max_latency");

    let out = berth(
        dir.path(),
        &["plan", "spec", "--at", PEAK, "-o", "plan.json"],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let doc = plan_json(dir.path());
    let workloads = doc["workloads"].as_array().expect("workloads");
    let (first, second) = (&workloads[0], &workloads[2]);
    assert_eq!(second["workload"], "vision_twin");
    assert!(first["rejected"].is_array() && first.get("rejected_as").is_none());
    assert!(second.get("rejected").is_none(), "{second}");
    assert_eq!(second["rejected_as"], "vision_inspect");
    let span = &second["requirements"]["data_latency"];
    assert_eq!(span["file"], "workloads.berth");
    assert_eq!(span["line"], twin_line);

    // The document is what docs/plan.schema.json describes; a workload with both a list and
    // a shared one is not.
    let schema: serde_json::Value = serde_json::from_str(
        &fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/plan.schema.json"))
            .expect("schema"),
    )
    .expect("schema JSON");
    let validator = jsonschema::validator_for(&schema).expect("a valid schema");
    let problems: Vec<String> = validator.iter_errors(&doc).map(|e| e.to_string()).collect();
    assert!(problems.is_empty(), "{problems:#?}");
    let mut both = doc.clone();
    both["workloads"][2]["rejected"] = first["rejected"].clone();
    assert!(!validator.is_valid(&both));

    let check = berth(dir.path(), &["verify", "plan.json", "--spec", "spec"]);
    assert_eq!(code(&check), 0, "{}", stderr(&check));

    // Read back, the twin has the full list, its requirement in its own block.
    let text = fs::read_to_string(dir.path().join("plan.json")).expect("plan");
    let plan = berth_compiler::plan::from_json(&text).expect("a plan");
    let (a, b) = (&plan.workloads[0].rejected, &plan.workloads[2].rejected);
    assert_eq!(a.len(), b.len());
    assert_eq!(a[0].target, "cloud_eu");
    assert_eq!(b[0].target, "cloud_eu");
    assert_eq!(a[0].message, b[0].message);
    assert_eq!(a[0].offer, b[0].offer);
    let requirement = b[0].requirement.as_ref().expect("a requirement");
    assert_eq!(requirement.line as usize, twin_line);
    assert_ne!(a[0].requirement, b[0].requirement);

    let explained = berth(
        dir.path(),
        &["explain", "spec", "vision_twin", "--at", PEAK],
    );
    assert_eq!(code(&explained), 0, "{}", stderr(&explained));
    let shown = stdout(&explained);
    assert!(
        shown.contains(&format!("spec/workloads.berth:{twin_line}:5")),
        "{shown}"
    );
    assert!(shown.contains("required here"), "{shown}");

    fs::write(
        dir.path().join("renamed.json"),
        text.replace(
            "\"rejected_as\": \"vision_inspect\"",
            "\"rejected_as\": \"vision\"",
        ),
    )
    .expect("write");
    let out = berth(dir.path(), &["verify", "renamed.json", "--spec", "spec"]);
    assert_eq!(code(&out), 1);
    let err = stderr(&out);
    assert!(
        err.contains(
            "not a berth plan: `workloads[2]`: `rejected_as` names `vision`, which is not an \
             earlier workload of the plan"
        ),
        "{err}"
    );
    assert!(err.contains("`renamed.json`:"), "{err}");

    fs::write(
        dir.path().join("v2.json"),
        text.replace("berth.plan/v3", "berth.plan/v2"),
    )
    .expect("write");
    let out = berth(dir.path(), &["verify", "v2.json", "--spec", "spec"]);
    assert_eq!(code(&out), 1);
    let err = stderr(&out);
    assert!(
        err.contains("a plan of format `berth.plan/v2`; this berth reads `berth.plan/v3`"),
        "{err}"
    );
    assert!(
        err.contains("plan again with this version of berth"),
        "{err}"
    );
}

#[test]
fn explain_shows_both_sides_of_a_rejection() {
    let dir = copy_example("three-plants", unchanged);
    let out = berth(
        dir.path(),
        &["explain", "spec", "vision_inspect", "--at", PEAK],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("workload `vision_inspect`: placed, 2 of 2 replicas"),
        "{text}"
    );
    assert!(
        text.contains("Placed: `lyon`: 1 replica, pool `l4`"),
        "{text}"
    );
    assert!(
        text.contains("Rejected: `cloud_eu`: data set `line_images` is 85ms away"),
        "{text}"
    );
    assert!(text.contains("spec/workloads.berth:28:5"), "{text}");
    assert!(text.contains("required here"), "{text}");
    assert!(text.contains("spec/targets.berth:59:3"), "{text}");
    assert!(text.contains("offered here"), "{text}");
    assert!(!text.contains('\x1b'), "no colour when piped");

    let one = berth(
        dir.path(),
        &[
            "explain",
            "spec",
            "vision_inspect",
            "cloud_eu",
            "--at",
            PEAK,
            "--output",
            "json",
        ],
    );
    assert_eq!(code(&one), 0, "{}", stderr(&one));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&one)).expect("JSON");
    assert_eq!(doc["rejection"]["reason"], "data_latency");
    assert_eq!(doc["placements"], serde_json::json!([]));
}

#[test]
fn explain_suggests_names_it_does_not_know() {
    let dir = copy_example("three-plants", unchanged);
    let out = berth(dir.path(), &["explain", "spec", "vision_inspekt"]);
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains("did you mean `vision_inspect`?"),
        "{}",
        stderr(&out)
    );
    let out = berth(dir.path(), &["explain", "spec", "vision_inspect", "lion"]);
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains("did you mean `lyon`?"),
        "{}",
        stderr(&out)
    );
}

/// The human output of `berth plan` for every example at the peak instant: what people read,
/// kept as snapshots (exit code, stdout, stderr).
#[test]
fn example_plans_for_people() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut names: Vec<String> = fs::read_dir(&root)
        .expect("examples")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    for name in names {
        let dir = copy_example(&name, unchanged);
        let out = berth(dir.path(), &["plan", "spec", "--at", PEAK]);
        let shown = format!(
            "exit {}\n--- stdout\n{}--- stderr\n{}",
            code(&out),
            stdout(&out),
            stderr(&out)
        );
        insta::assert_snapshot!(format!("plan_{name}"), shown);
    }
}

#[test]
fn explanation_of_a_held_back_experiment() {
    let dir = copy_example("peak-hours", unchanged);
    let out = berth(
        dir.path(),
        &["explain", "spec", "distill_trial", "--at", PEAK],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    insta::assert_snapshot!(stdout(&out));
}

#[test]
fn a_plan_file_over_the_size_limit_is_refused_before_it_is_read() {
    let dir = copy_example("training-and-inference", unchanged);
    // Sparse: 513 MiB that take no disk; refused from its size, not parsed.
    let big = fs::File::create(dir.path().join("big.json")).expect("create");
    big.set_len(513 << 20).expect("grow");
    let check = berth(dir.path(), &["verify", "big.json", "--spec", "spec"]);
    assert_eq!(code(&check), 1, "{}", stderr(&check));
    assert!(
        stderr(&check).contains("`big.json` is larger than the 512 MiB limit"),
        "{}",
        stderr(&check)
    );
    for command in ["apply", "approve"] {
        let args: &[&str] = match command {
            "apply" => &["apply", "big.json", "--spec", "spec", "--dry-run"],
            _ => &["approve", "big.json", "--key", "ops.key"],
        };
        let out = berth(dir.path(), args);
        assert_ne!(code(&out), 0, "{command}");
        assert!(
            stderr(&out).contains("is larger than the 512 MiB limit"),
            "{command}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn every_command_reading_a_saved_plan_reads_it_alike() {
    let dir = copy_example("training-and-inference", unchanged);
    fs::write(
        dir.path().join("latin1.json"),
        b"{\"plan_id\": \"caf\xe9\"}",
    )
    .expect("write");
    let commands: [&[&str]; 3] = [
        &["verify", "PLAN", "--spec", "spec"],
        &["apply", "PLAN", "--spec", "spec", "--dry-run"],
        &["render", "PLAN", "--spec", "spec", "--out", "rendered"],
    ];
    // Not UTF-8: a file that is not a plan (1); missing: the environment (2). Both name the
    // path once.
    for (plan, exit, says) in [
        ("latin1.json", 1, "is not valid UTF-8"),
        (
            "missing.json",
            2,
            "cannot read the plan: `missing.json` does not exist",
        ),
    ] {
        for command in commands {
            let args: Vec<&str> = command
                .iter()
                .map(|a| if *a == "PLAN" { plan } else { a })
                .collect();
            let out = berth(dir.path(), &args);
            let err = stderr(&out);
            assert_eq!(code(&out), exit, "{args:?}: {err}");
            assert!(err.contains(says), "{args:?}: {err}");
            assert!(err.contains(&format!("`{plan}`")), "{args:?}: {err}");
        }
    }
}

#[test]
fn explain_says_which_fallback_took_a_replica_and_why_the_earlier_ones_could_not() {
    let dir = tempfile::tempdir().expect("temp dir");
    let spec = dir.path().join("spec");
    fs::create_dir(&spec).expect("spec dir");
    let target = |name: &str, hour: &str| {
        format!(
            "target {name} {{\n  class = datacenter\n  runtime = kubernetes {{ context = \"{name}\", namespace = \"ai\" }}\n  connectivity = connected\n  cpu = 64\n  memory = 256GiB\n  pool l4 {{\n    accelerator = L4\n    count = 2\n  }}\n  cost = {{ gpu_hour: {hour} }}\n}}\n"
        )
    };
    let text = format!(
        "use std.gpu.{{L4}}\n\nworkload vision {{\n  release = \"1.0.0\"\n  image = \"registry.example.com/vision:1.0.0\"\n  kind = service\n  class = production\n  identity = service_account(\"vision\")\n  replicas = 3\n  accelerators = [L4]\n  resources {{\n    cpu = 1\n    memory = 4GiB\n    gpu = 1\n  }}\n}}\n\nplacement vision {{\n  spread = per_target(1)\n  fallback = [dc_backup, cloud_spot]\n}}\n\n{}{}{}",
        target("lyon", "0.90"),
        target("dc_backup", "3.00"),
        target("cloud_spot", "0.20"),
    );
    fs::write(spec.join("spec.berth"), text).expect("write");
    let out = berth(
        dir.path(),
        &["explain", "spec", "vision", "cloud_spot", "--at", PEAK],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let shown = stdout(&out);
    assert!(
        shown.contains(
            "fallback 2 of 2, used because the targets ranked before it could not take the replicas: the targets not listed as fallbacks could not take them all; `dc_backup`: holds 1 replica and can take no more"
        ),
        "{shown}"
    );
}

/// `berth plan-diff`: the peak-hours example at 10:00 (the `peak` window holds
/// `distill_trial` back) against 22:00 (it runs, and now awaits approval).
#[test]
fn plan_diff_reports_what_the_evening_changes() {
    let dir = copy_example("peak-hours", unchanged);
    for (at, file) in [(PEAK, "day.json"), ("2025-06-04T20:00:00Z", "night.json")] {
        let out = berth(dir.path(), &["plan", "spec", "--at", at, "-o", file]);
        assert!(code(&out) <= 1, "{}", stderr(&out));
    }
    let out = berth(dir.path(), &["plan-diff", "day.json", "night.json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("distill_trial  0 of 1  1 of 1  1 gained on munich_hpc/h100; +460.80 a day"),
        "{text}"
    );
    assert!(
        text.contains("cost per day: 338.40 → 799.20 (+460.80)"),
        "{text}"
    );
    assert!(
        text.contains("approvals newly needed: `distill_trial` (460.80 a day, above 250.00 under policy `fair_use`)"),
        "{text}"
    );
    insta::assert_snapshot!(text);

    let out = berth(
        dir.path(),
        &["--output", "json", "plan-diff", "night.json", "day.json"],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    let w = &doc["workloads"][0];
    assert_eq!(w["workload"], "distill_trial");
    assert_eq!(w["status_before"], "placed");
    assert_eq!(w["status_after"], "unplaced");
    assert_eq!(w["lost"][0]["site"]["target"], "munich_hpc");
    assert_eq!(w["lost"][0]["replicas"], 1);
    assert_eq!(doc["approvals_no_longer_needed"][0], "distill_trial");
    assert_eq!(doc["before"]["replicas_placed"], 14);
    assert_eq!(doc["after"]["replicas_placed"], 13);

    let out = berth(dir.path(), &["plan-diff", "day.json", "day.json"]);
    assert_eq!(code(&out), 0);
    assert!(
        stdout(&out).ends_with("no change: every workload is placed alike, at the same cost\n")
    );
}

/// `--detailed-exitcode`, as terraform's: 0 alike, 2 different, 1 for any error (a missing
/// plan, a usage error), so a pipeline can branch without parsing the report.
#[test]
fn plan_diff_detailed_exit_codes_tell_no_change_from_changes_from_errors() {
    let dir = copy_example("peak-hours", unchanged);
    for (at, file) in [(PEAK, "day.json"), ("2025-06-04T20:00:00Z", "night.json")] {
        let out = berth(dir.path(), &["plan", "spec", "--at", at, "-o", file]);
        assert!(code(&out) <= 1, "{}", stderr(&out));
    }
    let run = |args: &[&str]| {
        let mut all = vec!["plan-diff", "--detailed-exitcode"];
        all.extend_from_slice(args);
        code(&berth(dir.path(), &all))
    };
    assert_eq!(run(&["day.json", "day.json"]), 0);
    assert_eq!(run(&["day.json", "night.json"]), 2);
    assert_eq!(run(&["day.json", "missing.json"]), 1);
    assert_eq!(run(&["day.json"]), 1, "a usage error");
    assert_eq!(
        code(&berth(
            dir.path(),
            &["plan-diff", "day.json", "missing.json"]
        )),
        2,
        "without the flag, an unreadable file stays 2"
    );
}

#[test]
fn plan_diff_refuses_an_edited_plan_and_names_a_missing_one() {
    let dir = copy_example("quickstart", unchanged);
    let out = berth(
        dir.path(),
        &["plan", "spec", "--at", PEAK, "-o", "plan.json"],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = fs::read_to_string(dir.path().join("plan.json")).expect("plan");
    let edited = text.replacen("\"replicas\": 1", "\"replicas\": 3", 1);
    assert_ne!(edited, text, "the edit applies");
    fs::write(dir.path().join("edited.json"), edited).expect("write");
    let out = berth(dir.path(), &["plan-diff", "plan.json", "edited.json"]);
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains("`edited.json` was edited after it was made"),
        "{}",
        stderr(&out)
    );
    let out = berth(dir.path(), &["plan-diff", "plan.json", "missing.json"]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("`missing.json`"), "{}", stderr(&out));
}

/// `berth plan EXAMPLE --what-if FILE` for every scenario of `tests/data/what-if/EXAMPLE/`,
/// at the peak instant: the report people read, kept as snapshots (exit code, stdout,
/// stderr); in JSON, the plan before is the example's own plan.
#[test]
fn what_if_scenarios_on_the_examples() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/what-if");
    let mut scenarios: Vec<(String, PathBuf)> = Vec::new();
    for example in fs::read_dir(&root).expect("what-if scenarios") {
        let example = example.expect("entry").path();
        let name = example
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        for file in fs::read_dir(&example).expect("scenarios") {
            scenarios.push((name.clone(), file.expect("entry").path()));
        }
    }
    scenarios.sort();
    assert!(scenarios.len() >= 5, "{scenarios:?}");
    for (name, scenario) in scenarios {
        let dir = copy_example(&name, unchanged);
        let file = scenario
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        fs::copy(&scenario, dir.path().join(&file)).expect("copy");
        let out = berth(
            dir.path(),
            &["plan", "spec", "--at", PEAK, "--what-if", &file],
        );
        let shown = format!(
            "exit {}\n--- stdout\n{}--- stderr\n{}",
            code(&out),
            stdout(&out),
            stderr(&out)
        );
        let stem = file.trim_end_matches(".berth");
        insta::assert_snapshot!(format!("what_if_{name}_{stem}"), shown);
        if code(&out) != 0 {
            continue;
        }
        let json = berth(
            dir.path(),
            &[
                "--output",
                "json",
                "plan",
                "spec",
                "--at",
                PEAK,
                "--what-if",
                &file,
            ],
        );
        let doc: serde_json::Value = serde_json::from_str(&stdout(&json)).expect("JSON");
        let own = berth(
            dir.path(),
            &["plan", "spec", "--at", PEAK, "-o", "plan.json"],
        );
        assert!(code(&own) <= 1, "{}", stderr(&own));
        assert_eq!(
            doc["before"]["plan_id"],
            plan_json(dir.path())["plan_id"],
            "{file}"
        );
        assert_eq!(doc["after"]["at"], PEAK, "{file}");
    }
}

/// `berth explain --what-if FILE` explains the plan of the spec as the what-if file changes
/// it. With Lyon's images 85 ms away, `vision_inspect` is not on Lyon and the excerpt of the
/// offer points into the what-if file; with Lyon offline, the answer says the file took it
/// offline; without a what-if file, the same question finds it placed there. A what-if file
/// that cannot be read is exit 2.
#[test]
fn explain_answers_for_the_spec_a_what_if_file_makes() {
    let dir = copy_example("three-plants", unchanged);
    fs::write(
        dir.path().join("far.what-if.berth"),
        "target lyon {\n  data line_images = remote { latency = 85ms }\n}\n",
    )
    .expect("write");
    fs::write(
        dir.path().join("off.what-if.berth"),
        "target lyon { offline = true }\n",
    )
    .expect("write");
    let ask = |extra: &[&str]| {
        let mut args = vec!["explain", "spec", "vision_inspect", "lyon", "--at", PEAK];
        args.extend_from_slice(extra);
        berth(dir.path(), &args)
    };
    let out = ask(&[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).contains("Placed"), "{}", stdout(&out));

    let out = ask(&["--what-if", "far.what-if.berth"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("with the changes of `far.what-if.berth`"),
        "{text}"
    );
    assert!(
        text.contains("Rejected: `lyon`: data set `line_images` is 85ms away (remote)"),
        "{text}"
    );
    assert!(
        text.contains("far.what-if.berth:2:3"),
        "the offer is in the what-if file: {text}"
    );

    let out = ask(&["--what-if", "off.what-if.berth"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out)
            .contains("Not placed: `lyon`: the what-if file `off.what-if.berth` takes it offline"),
        "{}",
        stdout(&out)
    );

    let out = berth(
        dir.path(),
        &[
            "--output",
            "json",
            "explain",
            "spec",
            "vision_inspect",
            "lyon",
            "--at",
            PEAK,
            "--what-if",
            "far.what-if.berth",
        ],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert_eq!(doc["what_if"], "far.what-if.berth");
    assert_eq!(doc["placements"], serde_json::json!([]));
    assert_eq!(doc["rejection"]["reason"], "data_latency", "{doc}");

    let out = ask(&["--what-if", "missing.what-if.berth"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("missing.what-if.berth"),
        "{}",
        stderr(&out)
    );
}

/// A what-if file inside the spec directory (`NAME.what-if.berth`) is not part of the spec:
/// `plan` leaves it out (same plan id), `plan --what-if` takes it, and `check` checks it
/// against the spec of its directory.
#[test]
fn what_if_files_in_the_spec_directory() {
    let plain = copy_example("three-plants", unchanged);
    let out = berth(
        plain.path(),
        &["plan", "spec", "--at", PEAK, "-o", "plan.json"],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let id = plan_json(plain.path())["plan_id"].clone();

    let dir = copy_example("three-plants", unchanged);
    let spec = dir.path().join("spec");
    fs::write(
        spec.join("lyon.what-if.berth"),
        "target lyon { offline = true }\n",
    )
    .expect("write");
    let out = berth(
        dir.path(),
        &["plan", "spec", "--at", PEAK, "-o", "plan.json"],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        plan_json(dir.path())["plan_id"],
        id,
        "the what-if file is not in the spec"
    );

    let out = berth(
        dir.path(),
        &[
            "plan",
            "spec",
            "--at",
            PEAK,
            "--what-if",
            "spec/lyon.what-if.berth",
        ],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains("vision_inspect  2 of 2  1 of 2  1 lost from lyon/l4"),
        "{}",
        stdout(&out)
    );

    let out = berth(dir.path(), &["check", "spec"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    fs::write(
        spec.join("bad.what-if.berth"),
        "target paris { offline = true }\n",
    )
    .expect("write");
    let out = berth(dir.path(), &["check", "spec"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("[E0414] Error: the base spec has no target `paris` to take offline"),
        "{err}"
    );
    assert!(err.contains("bad.what-if.berth:1:8"), "{err}");
    assert!(err.ends_with("1 error in 1 file\n"), "{err}");
}

/// `berth plan --exact`: on the examples the exact assignment finds the heuristic's plans
/// (they are small and the heuristic is optimal there), says so on stderr, and the plan is
/// verified like any other; a time limit that is not a positive number is a usage problem.
#[test]
fn exact_plans_say_how_they_were_made() {
    for name in ["three-plants", "peak-hours", "training-and-inference"] {
        let dir = copy_example(name, unchanged);
        let own = berth(
            dir.path(),
            &["plan", "spec", "--at", PEAK, "-o", "plan.json"],
        );
        let id = plan_json(dir.path())["plan_id"].clone();
        let out = berth(
            dir.path(),
            &["plan", "spec", "--at", PEAK, "--exact", "-o", "plan.json"],
        );
        assert_eq!(code(&out), code(&own), "{name}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("exact: every stage solved to optimality (HiGHS)"),
            "{name}: {}",
            stderr(&out)
        );
        assert_eq!(plan_json(dir.path())["plan_id"], id, "{name}");
    }
    // In JSON mode too: stdout is the plan alone, stderr says how it was made.
    let dir = copy_example("three-plants", unchanged);
    let out = berth(
        dir.path(),
        &["--output", "json", "plan", "spec", "--at", PEAK, "--exact"],
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON plan");
    assert!(doc["plan_id"].is_string());
    assert!(
        stderr(&out).contains("exact: every stage solved to optimality (HiGHS)"),
        "{}",
        stderr(&out)
    );
    let dir = copy_example("quickstart", unchanged);
    let out = berth(
        dir.path(),
        &["plan", "spec", "--exact", "--exact-time-limit", "-1"],
    );
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    let out = berth(dir.path(), &["plan", "spec", "--exact-time-limit", "5"]);
    assert_eq!(code(&out), 2, "`--exact-time-limit` needs `--exact`");
}

/// Replicas placed per workload, by name, in a JSON plan.
fn placed_per_workload(plan: &serde_json::Value) -> Vec<(String, u64)> {
    plan["workloads"]
        .as_array()
        .expect("workloads")
        .iter()
        .map(|w| {
            let placed = w["placements"]
                .as_array()
                .expect("placements")
                .iter()
                .map(|p| p["replicas"].as_u64().expect("replicas"))
                .sum();
            (w["workload"].as_str().expect("name").to_string(), placed)
        })
        .collect()
}

/// On an estate where the heuristic leaves out an experiment replica a MIP places
/// (`bench/shapes`' `prodexp_w10_t4_s6_o130`, the compiler's `tests/exact.rs` fixture), the
/// plain `berth plan` places every replica `berth plan --exact` places — HiGHS raises the
/// heuristic's counts — and its plan verifies and is the same on a second run.
#[test]
fn the_default_plan_places_the_replica_the_heuristic_alone_leaves_out() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../compiler/tests/data/exact/prodexp_w10_t4_s6_o130");
    let dir = copy_spec(&fixture, unchanged);
    let at = "2025-06-04T10:00:00Z";
    let plain = berth(dir.path(), &["plan", "spec", "--at", at, "-o", "plan.json"]);
    assert_eq!(code(&plain), 1, "over-subscribed: {}", stderr(&plain));
    let default = plan_json(dir.path());
    let again = berth(
        dir.path(),
        &["--output", "json", "plan", "spec", "--at", at],
    );
    let again: serde_json::Value = serde_json::from_slice(&again.stdout).expect("a JSON plan");
    assert_eq!(again, default, "the same plan on every run");
    let out = berth(dir.path(), &["verify", "plan.json", "--spec", "spec"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = berth(
        dir.path(),
        &["--output", "json", "plan", "spec", "--at", at, "--exact"],
    );
    assert!(
        stderr(&out).contains("exact: every stage solved to optimality (HiGHS)"),
        "{}",
        stderr(&out)
    );
    let exact: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON plan");
    let total = |plan: &serde_json::Value| -> u64 {
        placed_per_workload(plan).iter().map(|(_, n)| n).sum()
    };
    assert_eq!(total(&default), total(&exact));
}

/// `berth explain --exact` explains the exact plan, `berth plan --exact`'s, and says how it was
/// made; `berth plan --what-if FILE --exact` plans the changed spec exactly too, so the
/// difference it prints is the what-if file's, never the two assigners'.
#[test]
fn explain_and_what_if_plan_exactly_when_asked() {
    let dir = copy_example("training-and-inference", unchanged);
    let out = berth(
        dir.path(),
        &["--output", "json", "plan", "spec", "--at", PEAK, "--exact"],
    );
    assert!(code(&out) <= 1, "{}", stderr(&out));
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON plan");
    let workloads = plan["workloads"].as_array().expect("workloads");
    assert!(!workloads.is_empty());
    for w in workloads {
        let name = w["workload"].as_str().expect("a name");
        let out = berth(
            dir.path(),
            &[
                "--output", "json", "explain", "spec", name, "--at", PEAK, "--exact",
            ],
        );
        assert_eq!(code(&out), 0, "{name}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("exact: every stage solved to optimality (HiGHS)"),
            "{name}: {}",
            stderr(&out)
        );
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert_eq!(&doc["workload"], w, "{name}: the exact plan's workload");
    }
    let out = berth(
        dir.path(),
        &[
            "explain",
            "spec",
            "chat_assistant",
            "--exact",
            "--exact-time-limit",
            "0",
        ],
    );
    assert_eq!(code(&out), 2, "{}", stderr(&out));

    fs::write(
        dir.path().join("more.what-if.berth"),
        "workload chat_assistant { replicas = 2 }\n",
    )
    .expect("write");
    let out = berth(
        dir.path(),
        &[
            "plan",
            "spec",
            "--at",
            PEAK,
            "--exact",
            "--what-if",
            "more.what-if.berth",
        ],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("\nthe what-if plan: exact: every stage solved to optimality (HiGHS)"),
        "both sides are planned exactly: {err}"
    );
}

/// `--output markdown`: the reports a pipeline posts on a merge request. The plan: replicas
/// placed, cost, what is short and why, approvals, the per-workload table collapsed; the
/// plan-diff: moves, newly placed and lost replicas, cost before and after, approvals newly
/// needed, the changed workloads collapsed. The summary line stays on stderr.
#[test]
fn markdown_reports_for_a_merge_request() {
    let dir = copy_example("peak-hours", unchanged);
    for (at, file) in [(PEAK, "day.json"), ("2025-06-04T20:00:00Z", "night.json")] {
        let out = berth(dir.path(), &["plan", "spec", "--at", at, "-o", file]);
        assert!(code(&out) <= 1, "{}", stderr(&out));
    }
    let out = berth(
        dir.path(),
        &["--output", "markdown", "plan", "spec", "--at", PEAK],
    );
    assert_eq!(
        code(&out),
        1,
        "the day plan is infeasible: {}",
        stderr(&out)
    );
    let plan = stdout(&out);
    assert!(
        plan.contains("**13 of 14 replicas placed** (infeasible)"),
        "{plan}"
    );
    assert!(
        plan.contains("- `distill_trial`: 1 replica short: "),
        "{plan}"
    );
    assert!(plan.contains("<details><summary>"), "{plan}");
    assert!(
        plan.contains("| Workload | Status | Replicas | Where | Cost a day |"),
        "{plan}"
    );
    assert!(stderr(&out).contains("replicas on"), "{}", stderr(&out));
    insta::assert_snapshot!("markdown_plan", plan);

    let out = berth(
        dir.path(),
        &[
            "--output",
            "markdown",
            "plan-diff",
            "day.json",
            "night.json",
        ],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let diff = stdout(&out);
    assert!(
        diff.contains("**1 replica** newly placed")
            && diff.contains("Cost a day: 338.40 → 799.20 (+460.80)"),
        "{diff}"
    );
    assert!(
        diff.contains("- `distill_trial`: 460.80 a day, above 250.00 under policy `fair_use`"),
        "{diff}"
    );
    insta::assert_snapshot!("markdown_plan_diff", diff);
    let out = berth(
        dir.path(),
        &["--output", "markdown", "plan-diff", "day.json", "day.json"],
    );
    assert!(stdout(&out).contains("No change"), "{}", stdout(&out));

    // The evening's plan against the day's, in one comment: the plan, then what changed.
    let out = berth(
        dir.path(),
        &[
            "--output",
            "markdown",
            "plan",
            "spec",
            "--at",
            "2025-06-04T20:00:00Z",
            "--previous",
            "day.json",
        ],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let comment = stdout(&out);
    assert!(comment.starts_with("### berth plan `"), "{comment}");
    assert!(
        comment.contains("**14 of 14 replicas placed**"),
        "{comment}"
    );
    assert!(
        comment.contains("Cost a day: 338.40 → 799.20 (+460.80)")
            && comment.contains("**1 replica** newly placed"),
        "{comment}"
    );
    let out = berth(
        dir.path(),
        &[
            "--output",
            "markdown",
            "plan",
            "spec",
            "--previous",
            "missing.json",
        ],
    );
    assert_eq!(code(&out), 2, "{}", stderr(&out));
}
