//! The pipeline recipe of docs/pipelines.md, run as its jobs run it: the stages of
//! `docs/pipelines/berth-pipeline.sh` (check → plan at the commit's time with the merge
//! request comment → approval gate → apply the saved plan → status), against a real control
//! plane (tests/cluster) and a real edge agent pulling its signed bundle from the store the
//! apply publishes to. A second run of the same commit changes nothing and says so. The
//! agent's token, read from a file as a CI secret would be, appears in no output.

mod agent_proc;
mod cluster;
mod isolated;

use cluster::Fleet;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../docs/pipelines/berth-pipeline.sh"
);
const TOKEN: &str = "pipeline-agent-token-do-not-print";
/// The commit's time, as `git log -1 --format=%cI` gives it.
const COMMIT_TIME: &str = "2025-06-04T10:00:00+02:00";

fn spec_text(agent: &str) -> String {
    format!(
        r#"use std.gpu.{{L4}}

/// A GPU cluster in the data centre.
target cluster_a {{
  class = datacenter
  runtime = kubernetes {{ context = "pipeline-a", namespace = "inference" }}
  connectivity = connected
  cpu = 64
  memory = 256GiB
  pool serve {{
    accelerator = L4
    count = 4
    node_labels = {{ "gpu.example.com/pool": "serve" }}
  }}
  cost = {{ gpu_hour: 1.00 }}
}}

/// A site run by the berth agent.
target site_b {{
  class = edge
  runtime = edge {{ agent = "{agent}" }}
  connectivity = connected
  cpu = 2
  memory = 2GiB
}}

workload scorer {{
  release = "1.0.0"
  image = "registry.example.com/scorer:1.0.0"
  kind = service
  class = production
  identity = service_account("scorer")
  replicas = 2
  resources {{
    cpu = 1
    memory = 2GiB
    gpu = 1
  }}
  accelerators = [L4]
  environments = [datacenter]
}}

workload beacon {{
  release = "1.0.0"
  image = "exec:while true; do echo beacon; sleep 1; done"
  kind = service
  class = development
  identity = service_account("beacon")
  replicas = 1
  resources {{
    cpu = 0.1
    memory = 16MiB
  }}
  environments = [edge]
}}

policy platform {{
  approval when cost_per_day > 10 {{
    approvers = ["platform-leads"]
    trust = "approvers.trust"
  }}
}}
"#
    )
}

/// A real agent process; its URL once it listens.
struct Agent {
    child: std::process::Child,
    url: String,
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_agent(root: &Path, trust: &Path, source: &Path, token: &Path) -> Agent {
    let mut command = isolated::berth();
    command
        .args([
            "agent",
            "--listen",
            "127.0.0.1:0",
            "--interval",
            "0.5",
            "--no-gpu",
        ])
        .arg("--state")
        .arg(root.join("agent-state"))
        .arg("--trust")
        .arg(trust)
        .arg("--source")
        .arg(source)
        .arg("--token-file")
        .arg(token);
    let (child, url, _) = agent_proc::spawn(command);
    Agent { child, url }
}

struct Pipeline {
    root: PathBuf,
    spec: PathBuf,
    kubeconfig: PathBuf,
    key: PathBuf,
    token: PathBuf,
}

impl Pipeline {
    /// Runs one stage of the script with `out` as its OUT; (exit code, stdout and stderr).
    fn stage(&self, stage: &str, out: &Path, extra: &[(&str, &str)]) -> (i32, String) {
        // The berth the script runs, with the tests' state directory.
        let berth = isolated::berth();
        let mut command = Command::new("bash");
        command.envs(berth.get_envs().filter_map(|(k, v)| Some((k, v?))));
        command
            .arg(SCRIPT)
            .arg(stage)
            .current_dir(&self.root)
            .env("SPEC", &self.spec)
            .env("OUT", out)
            .env("BERTH", berth.get_program())
            .env("AT", COMMIT_TIME)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("BUNDLES", self.root.join("bundles"))
            .env("BUNDLE_KEY", &self.key)
            .env("AGENT_TOKEN_FILE", &self.token)
            .env("APPROVER_KEY", self.root.join("approver.key"))
            .env("BERTH_LOCK_HOLDER", "pipeline test job 1")
            .env("NO_COLOR", "1");
        for (k, v) in extra {
            command.env(k, v);
        }
        let output = command.output().expect("run the pipeline script");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(!text.contains(TOKEN), "the token was printed:\n{text}");
        (output.status.code().unwrap_or(-1), text)
    }
}

#[test]
fn the_documented_pipeline_runs_against_a_real_cluster_and_agent() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().to_path_buf();
    let prefix = root.join("cp");
    assert!(
        isolated::berth()
            .args(["keys", "generate"])
            .arg(&prefix)
            .status()
            .expect("keys")
            .success()
    );
    let token = root.join("agent.token");
    std::fs::write(&token, format!("{TOKEN}\n")).expect("token");
    let agent = start_agent(
        &root,
        &prefix.with_extension("pub"),
        &root.join("bundles/site_b.bundle.json"),
        &token,
    );
    let spec = root.join("spec");
    std::fs::create_dir_all(&spec).expect("spec dir");
    std::fs::write(spec.join("platform.berth"), spec_text(&agent.url)).expect("spec");
    // The approver's key, and the trust file that names it `platform-leads`.
    let approver = root.join("approver");
    assert!(
        isolated::berth()
            .args(["keys", "generate"])
            .arg(&approver)
            .status()
            .expect("keys")
            .success()
    );
    let public = std::fs::read_to_string(approver.with_extension("pub")).expect("pub");
    std::fs::write(
        spec.join("approvers.trust"),
        format!("platform-leads {}", public.trim()),
    )
    .expect("trust");
    let planned = cluster::plan_spec(&spec, COMMIT_TIME);
    let fleet = Fleet::for_ir(&planned.ir, &[]);
    let pipeline = Pipeline {
        root: root.clone(),
        spec: spec.clone(),
        kubeconfig: fleet.kubeconfig.clone(),
        key: prefix.with_extension("key"),
        token: token.clone(),
    };
    let first = root.join("run-1");

    // check: a SARIF log with nothing to report.
    let (code, text) = pipeline.stage("check", &first, &[]);
    assert_eq!(code, 0, "{text}");
    let sarif: Value =
        serde_json::from_slice(&std::fs::read(first.join("berth.sarif")).expect("sarif"))
            .expect("SARIF JSON");
    assert_eq!(sarif["version"], "2.1.0");
    assert_eq!(sarif["runs"][0]["results"], serde_json::json!([]));

    // plan: saved, and the comment for the merge request.
    let (code, text) = pipeline.stage("plan", &first, &[]);
    assert_eq!(code, 0, "{text}");
    let comment = std::fs::read_to_string(first.join("comment.md")).expect("comment");
    assert!(comment.contains("**3 of 3 replicas placed**"), "{comment}");
    assert!(
        comment.contains("- `scorer`: 48.00 a day, above 10.00 under policy `platform`"),
        "{comment}"
    );
    assert_eq!(
        std::fs::read_to_string(first.join("changes")).expect("changes"),
        "1\n"
    );

    // apply before the approval gate: refused, nothing applied.
    let (code, text) = pipeline.stage("apply", &first, &[]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("approv"), "{text}");
    let deployment = "/apis/apps/v1/namespaces/inference/deployments/scorer";
    assert!(fleet.cluster("pipeline-a").get(deployment).is_none());

    // The gate, then the apply of the saved plan: the cluster rolled out, the bundle
    // published, and the agent runs the edge workload.
    let (code, text) = pipeline.stage("approve", &first, &[]);
    assert_eq!(code, 0, "{text}");
    let (code, text) = pipeline.stage("apply", &first, &[]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("target `site_b`: bundle generation 1 published"),
        "{text}"
    );
    let live = fleet
        .cluster("pipeline-a")
        .get(deployment)
        .expect("applied");
    assert_eq!(live["status"]["availableReplicas"], 2, "{live}");

    // status: the cluster's replicas and the agent's report, once it pulled the bundle.
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        let (code, text) = pipeline.stage("status", &first, &[]);
        assert_eq!(code, 0, "{text}");
        let doc: Value =
            serde_json::from_slice(&std::fs::read(first.join("status.json")).expect("status"))
                .expect("status JSON");
        let running = &doc["edge"][0]["workloads"][0]["running"];
        if *running == 1 {
            break doc;
        }
        assert!(
            Instant::now() < deadline,
            "the agent never ran `beacon`: {doc:#}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(status["edge"][0]["state"], "reachable", "{status:#}");
    let scorer = status["clusters"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|c| c["workloads"].as_array().cloned().unwrap_or_default())
        .find(|w| w["workload"] == "scorer")
        .expect("scorer in status");
    assert_eq!(
        (scorer["desired"].clone(), scorer["ready"].clone()),
        (2.into(), 2.into())
    );

    // `berth top` over the same plan: the cluster's and the agent's sources both answer, and
    // the scorer holds its two GPUs.
    let top = isolated::berth()
        .args(["--output", "json", "top"])
        .arg(first.join("plan.json"))
        .arg("--spec")
        .arg(&spec)
        .arg("--agent-token-file")
        .arg(&token)
        .env("KUBECONFIG", &fleet.kubeconfig)
        .current_dir(&root)
        .output()
        .expect("berth top");
    let text = String::from_utf8_lossy(&top.stderr);
    assert_eq!(top.status.code(), Some(0), "{text}");
    let doc: Value = serde_json::from_slice(&top.stdout).expect("top JSON");
    for (kind, name) in [("cluster", "pipeline-a"), ("agent", "site_b")] {
        assert!(
            doc["sources"]
                .as_array()
                .expect("sources")
                .iter()
                .any(|s| s["kind"] == kind && s["name"] == name && s["state"] == "reachable"),
            "{doc:#}"
        );
    }
    let scorer = doc["allocations"]
        .as_array()
        .expect("allocations")
        .iter()
        .find(|a| a["workload"] == "scorer")
        .expect("scorer")
        .clone();
    assert_eq!(scorer["gpus"], 2);
    assert_eq!(scorer["identity"], "service_account(\"scorer\")");
    assert!(!String::from_utf8_lossy(&top.stdout).contains(TOKEN));

    // The same commit again, against the plan it applied: no change, and the comment says so.
    let second = root.join("run-2");
    let previous = first.join("plan.json");
    let (code, text) = pipeline.stage(
        "plan",
        &second,
        &[("PREVIOUS_PLAN", previous.to_str().expect("utf-8"))],
    );
    assert_eq!(code, 0, "{text}");
    assert_eq!(
        std::fs::read_to_string(second.join("changes")).expect("changes"),
        "0\n"
    );
    let comment = std::fs::read_to_string(second.join("comment.md")).expect("comment");
    assert!(comment.contains("No change"), "{comment}");
    for out in [&first, &second] {
        for entry in std::fs::read_dir(out).expect("out").flatten() {
            let bytes = std::fs::read(entry.path()).expect("file");
            assert!(
                !String::from_utf8_lossy(&bytes).contains(TOKEN),
                "the token in {}",
                entry.path().display()
            );
        }
    }
    drop(agent);
}
