//! End-to-end tests of `berth apply`, `diff`, `approve` and `render` against the Kubernetes
//! API test server (tests/k8s): the real binary, a real kubeconfig file (`KUBECONFIG`), two
//! clusters.
//!
//! What berth does to clusters is tested against real control planes (tests/k8s_cluster.rs,
//! tests/k8s_agreement.rs). What stays here needs what a real server will not do on demand
//! (a watch answered `410 Expired`; status written at a set moment, to time `--wait`
//! against it), or is the command line's own logic (refusals before any request, approvals,
//! the diff's snapshot, render, JSON output), for which an API server on
//! the spot costs milliseconds instead of seconds.

mod isolated;
mod k8s;

use berth_runtime::files::{self, FsReader};
use k8s::{Fault, FaultKind, TestServer, kubeconfig};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const TOKEN: &str = "s3cr3t-token-do-not-print";
const AT: &str = "2025-06-07T10:00:00Z";
const SPEC: &str = "../examples/training-and-inference";
/// The example's demo approver key (its public half is in the example's trust file).
const APPROVER: &str = "../examples/training-and-inference/keys/ml-platform-leads.key";

/// Two test clusters named like the example's contexts, a kubeconfig, and a saved plan.
struct Setup {
    prod: TestServer,
    burst: TestServer,
    dir: tempfile::TempDir,
    plan: PathBuf,
}

impl Setup {
    fn new() -> Setup {
        let prod = TestServer::start(TOKEN);
        let burst = TestServer::start(TOKEN);
        let dir = tempfile::tempdir().expect("temp dir");
        let config = kubeconfig(&[("fra-gpu-prod", &prod), ("eks-gpu-burst", &burst)], TOKEN);
        std::fs::write(dir.path().join("kubeconfig"), config).expect("write kubeconfig");
        let loaded = files::load(&[PathBuf::from(SPEC)], &FsReader).expect("load spec");
        let sources = berth_runtime::files::relative_sources(Path::new(SPEC), &loaded);
        let planned = berth_compiler::driver::plan(&sources, AT.parse().expect("at"))
            .unwrap_or_else(|_| panic!("the example plans"));
        let plan = dir.path().join("plan.json");
        std::fs::write(
            &plan,
            serde_json::to_string_pretty(&planned.plan).expect("json"),
        )
        .expect("write plan");
        // Each GPU pool's nodes, as the clusters have them: the drift guard reads them.
        let ir = berth_compiler::driver::compile(&sources)
            .ir
            .expect("the example compiles");
        for target in &ir.targets {
            let berth_compiler::ir::Runtime::Kubernetes { context, .. } = &target.runtime else {
                continue;
            };
            let server = if context == "fra-gpu-prod" {
                &prod
            } else {
                &burst
            };
            for pool in &target.pools {
                let resource = berth_runtime::backends::k8s::render::pool_resource_name(&ir, pool);
                let mut amount = serde_json::Map::new();
                amount.insert(resource, json!(pool.count.to_string()));
                server.seed(
                    "kubelet",
                    json!({
                        "apiVersion": "v1", "kind": "Node",
                        "metadata": {"name": format!("{}-{}", target.name, pool.name),
                                     "labels": pool.node_labels},
                        "status": {"capacity": amount, "allocatable": amount},
                    }),
                );
            }
        }
        let setup = Setup {
            prod,
            burst,
            dir,
            plan,
        };
        // The example's ranker training awaits approval; most tests apply the approved plan.
        let (code, _, err) = setup.berth(&[
            "approve",
            setup.plan_path(),
            "--key",
            APPROVER,
            "--spec",
            SPEC,
        ]);
        assert_eq!(code, 0, "{err}");
        setup
    }

    /// Runs `berth ARGS` with this setup's kubeconfig; returns (exit code, stdout, stderr).
    fn berth(&self, args: &[&str]) -> (i32, String, String) {
        let out = isolated::berth()
            .args(args)
            .env("KUBECONFIG", self.dir.path().join("kubeconfig"))
            .env("BERTH_K8S_RETRY_BASE_MS", "5")
            .env("NO_COLOR", "1")
            .output()
            .expect("run berth");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            !stdout.contains(TOKEN) && !stderr.contains(TOKEN),
            "credentials in the output:\n{stdout}\n{stderr}"
        );
        (out.status.code().unwrap_or(-1), stdout, stderr)
    }

    fn plan_path(&self) -> &str {
        self.plan.to_str().expect("UTF-8 path")
    }

    fn apply(&self, extra: &[&str]) -> (i32, String, String) {
        let mut args = vec!["apply", self.plan_path(), "--spec", SPEC];
        args.extend_from_slice(extra);
        self.berth(&args)
    }
}

#[test]
fn diff_shows_the_change_per_object() {
    let s = Setup::new();
    assert_eq!(s.apply(&[]).0, 0);
    let mut changed = s
        .prod
        .get("configmaps", "ml", "chat-assistant-placement")
        .expect("applied");
    changed["metadata"]
        .as_object_mut()
        .expect("meta")
        .remove("managedFields");
    changed["data"]["BERTH_RELEASE"] = json!("0.0.1-edited");
    s.prod.seed("berth", changed);
    let (code, out, err) = s.berth(&["diff", s.plan_path(), "--spec", SPEC]);
    assert_eq!(code, 0, "{err}");
    insta::assert_snapshot!(out);
    assert!(
        err.contains("would configure  ConfigMap ml/chat-assistant-placement"),
        "{err}"
    );
}

#[test]
fn a_changed_spec_or_an_unknown_context_is_refused() {
    let s = Setup::new();
    let copy = s.dir.path().join("spec");
    std::fs::create_dir(&copy).expect("mkdir");
    for entry in std::fs::read_dir(SPEC).expect("spec") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            continue;
        }
        let name = path.file_name().expect("name");
        std::fs::copy(&path, copy.join(name)).expect("copy");
    }
    // A copy elsewhere is the same spec (files are digested by their names in the spec);
    // an edit is a change.
    let (code, _, err) = s.berth(&[
        "apply",
        s.plan_path(),
        "--spec",
        copy.to_str().expect("utf-8"),
        "--dry-run",
    ]);
    assert_eq!(code, 0, "a copy of the spec is the same spec: {err}");
    let workloads = copy.join("workloads.berth");
    let mut text = std::fs::read_to_string(&workloads).expect("read");
    text.push_str("\n// edited after planning\n");
    std::fs::write(&workloads, text).expect("write");
    let (code, _, err) = s.berth(&[
        "apply",
        s.plan_path(),
        "--spec",
        copy.to_str().expect("utf-8"),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("the spec changed since the plan was made"),
        "{err}"
    );

    let (code, _, err) = s.berth(&["apply", s.plan_path()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("needs its spec"), "{err}");

    std::fs::write(
        s.dir.path().join("kubeconfig"),
        kubeconfig(&[("fra-gpu-prod", &s.prod)], TOKEN),
    )
    .expect("write");
    let (code, _, err) = s.apply(&[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("context `eks-gpu-burst` is not in the kubeconfig"),
        "{err}"
    );
    assert!(
        s.prod.get("deployments", "ml", "chat-assistant").is_some(),
        "the other applied"
    );
}

#[test]
fn approval_is_bound_to_the_plan() {
    let s = Setup::new();
    std::fs::remove_file(s.plan.with_extension("approval.json")).expect("unapprove");
    let plan: Value =
        serde_json::from_str(&std::fs::read_to_string(&s.plan).expect("plan")).expect("json");
    let waiting = plan["workloads"]
        .as_array()
        .expect("workloads")
        .iter()
        .any(|w| !w["approval"].is_null());
    // Someone else's key: not among the approvers the policy's trust file names.
    let (code, _, err) = s.berth(&[
        "keys",
        "generate",
        &s.dir.path().join("else").display().to_string(),
    ]);
    assert_eq!(code, 0, "{err}");
    let other = s.dir.path().join("else.key").display().to_string();
    let (code, _, err) = s.berth(&["approve", s.plan_path(), "--key", &other, "--spec", SPEC]);
    if !waiting {
        assert_eq!(code, 0, "{err}");
        assert!(
            err.contains("nothing in this plan awaits approval"),
            "{err}"
        );
        return;
    }
    assert_eq!(code, 1, "{err}");
    let (code, _, err) = s.apply(&[]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("await approval"), "{err}");
    let (code, _, err) = s.berth(&["approve", s.plan_path(), "--key", APPROVER, "--spec", SPEC]);
    assert_eq!(code, 0, "{err}");
    assert!(Path::new(&s.plan.with_extension("approval.json")).exists());
    let (code, _, err) = s.apply(&[]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn render_writes_yaml_per_cluster_and_namespace() {
    let s = Setup::new();
    let out = s.dir.path().join("rendered");
    let (code, _, err) = s.berth(&[
        "render",
        s.plan_path(),
        "--spec",
        SPEC,
        "-o",
        out.to_str().expect("utf-8"),
    ]);
    assert_eq!(code, 0, "{err}");
    let prod = std::fs::read_to_string(out.join("fra-gpu-prod/ml.yaml")).expect("prod file");
    assert!(
        prod.starts_with("# Rendered by berth from plan sha256:"),
        "{prod}"
    );
    assert!(prod.contains("kind: Deployment") && prod.contains("name: chat-assistant"));
    assert!(out.join("eks-gpu-burst/burst.yaml").is_file());
}

#[test]
fn wait_follows_rollouts_with_watches_and_ends_soon_after_the_last_is_ready() {
    let s = Setup::new();
    let ready_after = Duration::from_millis(1500);
    s.prod.run_controllers(ready_after);
    s.burst.run_controllers(ready_after);
    let started = Instant::now();
    let (code, out, err) = s.berth(&[
        "--output",
        "json",
        "apply",
        s.plan_path(),
        "--spec",
        SPEC,
        "--wait",
        "--timeout",
        "60",
    ]);
    let elapsed = started.elapsed();
    assert_eq!(code, 0, "{err}\n{out}");
    // The wait ended with the last status change, not at the timeout nor on a poll tick.
    assert!(
        elapsed >= ready_after && elapsed < ready_after + Duration::from_secs(8),
        "{elapsed:?}"
    );
    let doc: Value = serde_json::from_str(&out).expect("json");
    let rollouts: Vec<(String, String, f64)> = doc["clusters"]
        .as_array()
        .expect("clusters")
        .iter()
        .flat_map(|c| c["rollouts"].as_array().expect("rollouts").clone())
        .map(|r| {
            (
                r["object"].as_str().expect("object").to_string(),
                r["result"].as_str().expect("result").to_string(),
                r["seconds"].as_f64().unwrap_or(-1.0),
            )
        })
        .collect();
    let objects: Vec<&str> = rollouts.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(
        objects,
        [
            "Job burst/ranker-training",
            "Job ml/llm-finetune",
            "Job ml/ranker-training",
            // Each served model's staging Job, waited for like the workloads.
            "Job ml/chat-assistant-stage-03323b59ef43",
            "Deployment ml/chat-assistant",
            "Job ml/search-embeddings-stage-4853bcbcd6ca",
            "Deployment ml/search-embeddings",
        ]
    );
    for (object, result, seconds) in &rollouts {
        assert_eq!(result, "done", "{object}");
        assert!(*seconds > 0.0 && *seconds < 10.0, "{object}: {seconds}");
    }
    // Watched, not polled: the wait LISTs each kind and namespace once and WATCHes from
    // there; the only GETs of single workload objects are apply's reads.
    let log = s.prod.log();
    assert!(
        log.iter().any(
            |l| l.starts_with("GET /apis/apps/v1/namespaces/ml/deployments?")
                && l.contains("watch=true")
                && l.contains("resourceVersion=")
        ),
        "{log:#?}"
    );
    let reads = log
        .iter()
        .filter(|l| l.starts_with("GET /apis/apps/v1/namespaces/ml/deployments/chat-assistant"))
        .count();
    assert_eq!(reads, 1, "{log:#?}");

    // Human output: one line per workload, with the time it took.
    let (code, _, err) = s.apply(&["--wait", "--timeout", "5"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("rolled out       Deployment ml/chat-assistant after "),
        "{err}"
    );
}

#[test]
fn wait_lists_again_when_a_watch_is_expired() {
    let s = Setup::new();
    s.prod.run_controllers(Duration::from_millis(1500));
    s.burst.run_controllers(Duration::from_millis(1500));
    // The first two watches of prod's Deployments are told their version is too old.
    s.prod.inject(Fault {
        method: Some(axum::http::Method::GET),
        path: Some("/deployments?&watch=true".to_string()),
        kind: FaultKind::Expired,
        times: 2,
        after_writes: 0,
    });
    let (code, _, err) = s.apply(&["--wait", "--timeout", "30"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("rolled out       Deployment ml/chat-assistant after "),
        "{err}"
    );
    let log = s.prod.log();
    let lists = log
        .iter()
        .filter(|l| {
            l.starts_with("GET /apis/apps/v1/namespaces/ml/deployments?") && !l.contains("watch=")
        })
        .count();
    assert!(lists >= 2, "listed again after 410: {log:#?}");
}

#[test]
fn json_output_is_one_document_and_a_spec_directory_is_planned_on_the_spot() {
    let s = Setup::new();
    let (code, out, err) = s.berth(&["--output", "json", "apply", s.plan_path(), "--spec", SPEC]);
    assert_eq!(code, 0, "{err}");
    let doc: Value = serde_json::from_str(&out).expect("one JSON document");
    assert_eq!(doc["dry_run"], false);
    assert!(doc["changes"].as_u64().expect("changes") > 0, "{doc}");
    assert_eq!(doc["failures"], 0);
    let contexts: Vec<&str> = doc["clusters"]
        .as_array()
        .expect("clusters")
        .iter()
        .filter_map(|c| c["context"].as_str())
        .collect();
    assert_eq!(contexts, vec!["eks-gpu-burst", "fra-gpu-prod"]);

    let out_dir = s.dir.path().join("now");
    let (code, _, err) = s.berth(&["render", SPEC, "-o", out_dir.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{err}");
    assert!(out_dir.join("fra-gpu-prod/ml.yaml").is_file(), "{err}");
}

/// A kubeconfig for the setup's two clusters whose one user is `user` (YAML under `user:`).
fn kubeconfig_with_user(s: &Setup, user: &str) -> String {
    let mut text = String::from("apiVersion: v1\nkind: Config\nclusters:\n");
    for (context, server) in [("fra-gpu-prod", &s.prod), ("eks-gpu-burst", &s.burst)] {
        text.push_str(&format!(
            "- name: {context}\n  cluster:\n    server: {}\n",
            server.url()
        ));
    }
    text.push_str(&format!("users:\n- name: u\n  user:\n{user}contexts:\n"));
    for context in ["fra-gpu-prod", "eks-gpu-burst"] {
        text.push_str(&format!(
            "- name: {context}\n  context:\n    cluster: {context}\n    user: u\n"
        ));
    }
    text.push_str("current-context: fra-gpu-prod\n");
    text
}

#[test]
fn credentials_from_every_source_are_redacted_when_a_server_quotes_them() {
    let s = Setup::new();
    s.prod.quote_authorization();
    s.burst.quote_authorization();
    let dir = s.dir.path();
    std::fs::write(dir.join("token"), "file-token-5d2c9a").expect("token file");
    let plugin = dir.join("plugin.sh");
    std::fs::write(
        &plugin,
        "#!/bin/sh\necho '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\
         \"kind\":\"ExecCredential\",\"status\":{\"token\":\"exec-token-91ab3\"}}'\n",
    )
    .expect("plugin");
    std::fs::set_permissions(&plugin, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let cases = [
        (
            "tokenFile",
            format!("    tokenFile: {}\n", dir.join("token").display()),
            vec!["file-token-5d2c9a"],
        ),
        (
            "exec",
            format!(
                "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      \
                 command: {}\n      interactiveMode: Never\n",
                plugin.display()
            ),
            vec!["exec-token-91ab3"],
        ),
        (
            "basic",
            "    username: ops\n    password: basic-pass-77f1\n".to_string(),
            // `ops:basic-pass-77f1` in base64, as the header carries it.
            vec!["basic-pass-77f1", "b3BzOmJhc2ljLXBhc3MtNzdmMQ=="],
        ),
    ];
    for (source, user, secrets) in cases {
        std::fs::write(dir.join("kubeconfig"), kubeconfig_with_user(&s, &user))
            .expect("kubeconfig");
        let (code, out, err) = s.apply(&[]);
        assert_ne!(code, 0, "{source}");
        assert!(
            err.contains("Authorization: ") && err.contains("[redacted]"),
            "{source}: the server's quote is not shown: {err}"
        );
        for secret in secrets {
            assert!(
                !out.contains(secret) && !err.contains(secret),
                "{source}: `{secret}` in the output:\n{out}\n{err}"
            );
        }
    }
}
