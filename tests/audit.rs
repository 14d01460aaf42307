//! The audit trail through the `berth` binary: a plan saved, a signed approval and an apply
//! (per target) each leave a record in the hash-chained log; `berth audit --jsonl` exports
//! them, `--verify` passes on the untouched log and names the record edited in place or the
//! records cut from its end (the test edits the real redb file as an intruder would).

mod isolated;
use redb::{Database, ReadableTable, TableDefinition};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;

const RECORDS: TableDefinition<'static, u64, &[u8]> = TableDefinition::new("records");

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/training-and-inference")
}

fn berth(dir: &Path, args: &[&str]) -> Output {
    isolated::berth()
        .args(args)
        .current_dir(dir)
        .env("BERTH_AUDIT_LOG", dir.join("audit.redb"))
        .env("BERTH_ACTOR", "ci:pipeline-42")
        .env("KUBECONFIG", dir.join("no-such-kubeconfig"))
        .env("NO_COLOR", "1")
        .output()
        .expect("the berth binary runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn records(dir: &Path) -> Vec<Value> {
    let out = berth(dir, &["audit", "--jsonl"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

#[test]
fn plan_approve_and_apply_are_recorded_and_tampering_is_named() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path();
    let spec = example();
    let spec = spec.to_str().expect("utf-8");
    let key = example().join("keys/ml-platform-leads.key");
    let out = berth(root, &["plan", spec, "-o", "plan.json"]);
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "{}",
        stderr(&out)
    );
    let out = berth(
        root,
        &[
            "approve",
            "plan.json",
            "--key",
            key.to_str().expect("utf-8"),
            "--spec",
            spec,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // No kubeconfig: every Kubernetes target's apply fails, and says so in the log.
    let out = berth(
        root,
        &["apply", "plan.json", "--spec", spec, "--allow-drift"],
    );
    assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));

    let log = records(root);
    let plan: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("plan.json")).expect("plan"))
            .expect("plan JSON");
    let actions: Vec<&str> = log.iter().filter_map(|r| r["action"].as_str()).collect();
    assert_eq!(&actions[..2], ["plan_saved", "approved"], "{log:#?}");
    assert!(actions[2..].iter().all(|a| *a == "applied"), "{actions:?}");
    assert!(
        actions.len() >= 4,
        "one record per applied target: {actions:?}"
    );
    for (i, r) in log.iter().enumerate() {
        assert_eq!(r["seq"], i as u64 + 1);
        assert_eq!(r["plan_id"], plan["plan_id"]);
    }
    assert_eq!(log[0]["actor"], "ci:pipeline-42");
    assert_eq!(log[0]["detail"]["file"], "plan.json");
    assert!(
        log[1]["actor"]
            .as_str()
            .is_some_and(|a| a.starts_with("key:ml-platform-leads (ed25519:")),
        "{}",
        log[1]
    );
    assert_eq!(
        log[1]["detail"]["workloads"],
        serde_json::json!(["ranker_training"])
    );
    let applied = &log[2];
    assert!(applied["target"].is_string(), "{applied}");
    assert!(
        applied["actor"]
            .as_str()
            .is_some_and(|a| a.starts_with("kubeconfig:")),
        "{applied}"
    );
    assert!(
        applied["outcome"]
            .as_str()
            .is_some_and(|o| o.starts_with("failed: ")),
        "{applied}"
    );
    assert_eq!(log[1]["prev"], log[0]["hash"]);

    let out = berth(root, &["audit", "--verify"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("{} record(s), the chain is intact", log.len())),
        "{}",
        stderr(&out)
    );

    // An intruder edits record 2 in place (the approval's workloads).
    let db_path = root.join("audit.redb");
    let original = {
        let db = Database::create(&db_path).expect("open the log");
        let txn = db.begin_write().expect("write");
        let original = {
            let mut table = txn.open_table(RECORDS).expect("records");
            let original = table
                .get(2)
                .expect("get")
                .expect("record 2")
                .value()
                .to_vec();
            let mut edited: Value = serde_json::from_slice(&original).expect("json");
            edited["detail"]["workloads"] = serde_json::json!(["ranker_training", "chat"]);
            let bytes = serde_json::to_vec(&edited).expect("json");
            table.insert(2, bytes.as_slice()).expect("insert");
            original
        };
        txn.commit().expect("commit");
        original
    };
    let out = berth(root, &["audit", "--verify"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("record 2 was edited: its hash is not its content's"),
        "{}",
        stderr(&out)
    );

    // Put back, then cut the last record.
    let last = log.len() as u64;
    {
        let db = Database::create(&db_path).expect("open the log");
        let txn = db.begin_write().expect("write");
        {
            let mut table = txn.open_table(RECORDS).expect("records");
            table.insert(2, original.as_slice()).expect("insert");
            table.remove(last).expect("remove");
        }
        txn.commit().expect("commit");
    }
    let out = berth(root, &["audit", "--verify"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!(
            "the log ends at record {} but its head says {last}: records were cut from its end",
            last - 1
        )),
        "{}",
        stderr(&out)
    );
    // What remains still reads, in order.
    let out = berth(root, &["audit"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("plan_saved"), "{}", stderr(&out));
}

#[test]
fn a_missing_log_is_an_environment_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = berth(dir.path(), &["audit", "--log", "nowhere.redb", "--verify"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("cannot open the audit log `nowhere.redb`"),
        "{}",
        stderr(&out)
    );
}
