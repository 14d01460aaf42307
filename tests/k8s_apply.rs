//! End-to-end tests of `berth apply`, `diff`, `approve` and `status` against the Kubernetes
//! API test server (tests/k8s): the real binary, a real kubeconfig file (`KUBECONFIG`), two
//! clusters, and injected faults.

mod k8s;

use berth_runtime::files::{self, FsReader};
use k8s::{Fault, FaultKind, TestServer, kubeconfig};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const TOKEN: &str = "s3cr3t-token-do-not-print";
const AT: &str = "2025-06-07T10:00:00Z";
const SPEC: &str = "../examples/training-and-inference";

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
        let setup = Setup {
            prod,
            burst,
            dir,
            plan,
        };
        // The example's ranker training awaits approval; most tests apply the approved plan.
        let (code, _, err) =
            setup.berth(&["approve", setup.plan_path(), "--by", "ml-platform-leads"]);
        assert_eq!(code, 0, "{err}");
        setup
    }

    /// Runs `berth ARGS` with this setup's kubeconfig; returns (exit code, stdout, stderr).
    fn berth(&self, args: &[&str]) -> (i32, String, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_berth"))
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

fn managers(object: &Value) -> Vec<String> {
    object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["manager"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn first_apply_then_a_second_that_changes_nothing() {
    let s = Setup::new();
    let (code, _, err) = s.apply(&[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("context `fra-gpu-prod`:") && err.contains("created"),
        "{err}"
    );
    let deployment = s
        .prod
        .get("deployments", "ml", "chat-assistant")
        .expect("deployment applied");
    assert_eq!(managers(&deployment), vec!["berth"]);
    assert_eq!(
        deployment["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "berth"
    );
    assert!(
        s.prod.get("namespaces", "", "ml").is_some(),
        "namespace created"
    );
    assert!(s.burst.get("jobs", "burst", "ranker-training").is_some());
    let writes = (s.prod.writes(), s.burst.writes());

    let (code, _, err) = s.apply(&[]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("0 changed"), "{err}");
    assert!(
        !err.contains("created") && !err.contains("configured"),
        "{err}"
    );
    assert_eq!(
        (s.prod.writes(), s.burst.writes()),
        writes,
        "no write the second time"
    );
}

#[test]
fn prune_deletes_only_stale_berth_objects() {
    let s = Setup::new();
    assert_eq!(s.apply(&[]).0, 0);
    let stale = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "old-workload-placement", "namespace": "ml",
            "labels": {"app.kubernetes.io/managed-by": "berth", "berth.dev/target": "dc_frankfurt"}},
        "data": {"k": "v"}});
    let foreign = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "someone-elses", "namespace": "ml",
            "labels": {"berth.dev/target": "dc_frankfurt"}},
        "data": {"k": "v"}});
    s.prod.seed("berth", stale);
    s.prod.seed("kubectl", foreign);
    let (code, _, err) = s.apply(&["--prune", "--dry-run"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("would prune"), "{err}");
    assert!(
        s.prod
            .get("configmaps", "ml", "old-workload-placement")
            .is_some()
    );
    let (code, _, err) = s.apply(&["--prune"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("pruned           ConfigMap ml/old-workload-placement"),
        "{err}"
    );
    assert!(
        s.prod
            .get("configmaps", "ml", "old-workload-placement")
            .is_none()
    );
    assert!(
        s.prod.get("configmaps", "ml", "someone-elses").is_some(),
        "not berth's"
    );
    assert!(
        s.prod.get("deployments", "ml", "chat-assistant").is_some(),
        "in the plan"
    );
}

#[test]
fn a_conflict_names_the_other_manager_and_needs_force() {
    let s = Setup::new();
    assert_eq!(s.apply(&[]).0, 0);
    let mut theirs = s
        .prod
        .get("deployments", "ml", "chat-assistant")
        .expect("applied");
    theirs["metadata"]
        .as_object_mut()
        .expect("meta")
        .remove("managedFields");
    theirs["spec"]["replicas"] = json!(7);
    s.prod.seed(
        "helm",
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "chat-assistant", "namespace": "ml"},
        "spec": {"replicas": 7}}),
    );
    let (code, _, err) = s.apply(&[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("conflict with field manager `helm` over `.spec.replicas`"),
        "{err}"
    );
    let (code, _, err) = s.apply(&["--force-conflicts"]);
    assert_eq!(code, 0, "{err}");
    let live = s
        .prod
        .get("deployments", "ml", "chat-assistant")
        .expect("live");
    assert_ne!(live["spec"]["replicas"], json!(7), "berth's value won");
}

#[test]
fn throttling_and_server_errors_are_retried() {
    let s = Setup::new();
    for (code, path) in [(429, "configmaps"), (500, "deployments"), (503, "jobs")] {
        s.prod.inject(Fault {
            method: Some(axum::http::Method::PATCH),
            path: Some(path.to_string()),
            kind: FaultKind::Status(code),
            times: 2,
            after_writes: 0,
        });
    }
    let (code, _, err) = s.apply(&[]);
    assert_eq!(code, 0, "{err}");
    let patches = s
        .prod
        .log()
        .iter()
        .filter(|l| l.starts_with("PATCH"))
        .count();
    assert!(patches > 6, "retried: {patches} patches");

    // A server that never recovers: the attempts run out, the object fails, exit 1.
    s.prod.inject(Fault {
        method: Some(axum::http::Method::PATCH),
        path: Some("/services/".to_string()),
        kind: FaultKind::Status(500),
        times: u32::MAX,
        after_writes: 0,
    });
    let (code, _, err) = s.apply(&[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(
            "failed           Service ml/chat-assistant: server answered 500 on all 5 attempts"
        ),
        "{err}"
    );
}

#[test]
fn a_lost_connection_lists_what_was_not_applied_and_a_rerun_converges() {
    let s = Setup::new();
    s.prod.inject(Fault {
        method: None,
        path: None,
        kind: FaultKind::Drop,
        times: u32::MAX,
        after_writes: 3,
    });
    let (code, _, err) = s.apply(&["--concurrency", "1"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("not applied"), "{err}");
    assert!(err.contains("connection failed"), "{err}");
    assert!(err.contains("created"), "some objects made it: {err}");
    s.prod.clear_faults();
    let (code, _, err) = s.apply(&[]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = s.apply(&[]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("0 changed"), "{err}");
}

#[test]
fn forbidden_names_verb_resource_and_namespace() {
    let s = Setup::new();
    s.burst.inject(Fault {
        method: Some(axum::http::Method::PATCH),
        path: Some("/jobs/".to_string()),
        kind: FaultKind::Status(403),
        times: u32::MAX,
        after_writes: 0,
    });
    let (code, _, err) = s.apply(&[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("forbidden: may not `patch` `jobs.batch` in namespace `burst`"),
        "{err}"
    );
    // The other cluster is applied regardless.
    assert!(s.prod.get("deployments", "ml", "chat-assistant").is_some());
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
fn status_reports_replicas_and_gpu_allocation() {
    let s = Setup::new();
    assert_eq!(s.apply(&[]).0, 0);
    let node = |name: &str, pool: &str, gpus: u32| {
        json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"gpu.example.com/pool": pool,
                "nvidia.com/gpu.product": "NVIDIA-L40S"}},
            "status": {"capacity": {"nvidia.com/gpu": gpus.to_string()},
                       "allocatable": {"nvidia.com/gpu": gpus.to_string()}}})
    };
    s.prod.seed("kubelet", node("serve-1", "inference", 4));
    let pod = |name: &str, node: Option<&str>, gpus: u32, phase: &str| {
        let mut p = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ml",
                "labels": {"berth.dev/workload": "chat_assistant"}},
            "spec": {"containers": [{"name": "c", "image": "i",
                "resources": {"limits": {"nvidia.com/gpu": gpus.to_string()}}}]},
            "status": {"phase": phase}});
        if let Some(node) = node {
            p["spec"]["nodeName"] = json!(node);
        } else {
            p["status"]["conditions"] = json!([{"type": "PodScheduled", "status": "False",
                "reason": "Unschedulable", "message": "0/1 nodes: insufficient nvidia.com/gpu"}]);
        }
        p
    };
    s.prod
        .seed("kubelet", pod("a", Some("serve-1"), 4, "Running"));
    s.prod.seed("kubelet", pod("b", None, 1, "Pending"));
    let (code, out, err) = s.berth(&["--output", "json", "status", s.plan_path(), "--spec", SPEC]);
    assert_eq!(code, 1, "flags raised: {err}\n{out}");
    let doc: Value = serde_json::from_str(&out).expect("json");
    let prod = doc["clusters"]
        .as_array()
        .expect("clusters")
        .iter()
        .find(|c| c["context"] == "fra-gpu-prod")
        .expect("prod");
    let serve = prod["pools"]
        .as_array()
        .expect("pools")
        .iter()
        .find(|p| p["pool"] == "serve")
        .expect("serve pool");
    assert_eq!(serve["allocatable"], 4);
    assert_eq!(serve["allocated"], 4);
    assert_eq!(serve["nodes"], 1);
    assert_eq!(prod["pending_gpu_pods"][0]["pod"], "b");
    assert_eq!(prod["pending_gpu_pods"][0]["workload"], "chat_assistant");
    let chat = prod["workloads"]
        .as_array()
        .expect("workloads")
        .iter()
        .find(|w| w["workload"] == "chat_assistant")
        .expect("chat");
    assert_eq!(chat["ready"], 0);
    assert!(chat["desired"].as_i64().expect("desired") >= 1);
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
    let (code, _, err) = s.berth(&["approve", s.plan_path(), "--by", "someone-else"]);
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
    let (code, _, err) = s.berth(&["approve", s.plan_path(), "--by", "ml-platform-leads"]);
    assert_eq!(code, 0, "{err}");
    assert!(Path::new(&s.plan.with_extension("approval.json")).exists());
    let (code, _, err) = s.apply(&[]);
    assert_eq!(code, 0, "{err}");
}

/// The benchmark of docs/performance.md: 1,000 objects across 4 test clusters, applied, then
/// applied again (no-op). `cargo test -p berth-runtime --test k8s_apply -- --ignored --nocapture`
/// (`BERTH_BENCH_CONCURRENCY`, `BERTH_BENCH_LATENCY_MS`)
#[test]
#[ignore = "benchmark: run explicitly"]
fn bench_apply_1000_objects_across_4_clusters() {
    use berth_runtime::backends::k8s::apply::{Options, apply_all};
    use berth_runtime::backends::k8s::kubeconfig::Kubeconfigs;
    use berth_runtime::backends::k8s::render::{ClusterManifests, Kind, Manifest, Rendered};
    let servers: Vec<TestServer> = (0..4).map(|_| TestServer::start(TOKEN)).collect();
    // A round trip to a real API server takes milliseconds: `BERTH_BENCH_LATENCY_MS` adds
    // that much to every request, which is what the concurrency bound is for.
    let latency: u64 = std::env::var("BERTH_BENCH_LATENCY_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    for server in &servers {
        server.set_latency(Duration::from_millis(latency));
    }
    let names: Vec<String> = (0..4).map(|i| format!("cluster-{i}")).collect();
    let pairs: Vec<(&str, &TestServer)> = names.iter().map(String::as_str).zip(&servers).collect();
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("kubeconfig");
    std::fs::write(&path, kubeconfig(&pairs, TOKEN)).expect("write");
    let concurrency: usize = std::env::var("BERTH_BENCH_CONCURRENCY")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16);
    let managed = json!({"app.kubernetes.io/managed-by": "berth", "berth.dev/target": "t"});
    let clusters = names
        .iter()
        .map(|context| {
            let mut manifests = vec![Manifest {
                kind: Kind::Namespace,
                namespace: None,
                name: "bench".to_string(),
                object: json!({"apiVersion": "v1", "kind": "Namespace",
                               "metadata": {"name": "bench", "labels": managed}}),
            }];
            for i in 0..249 {
                let name = format!("object-{i:03}");
                manifests.push(Manifest {
                    kind: Kind::ConfigMap,
                    namespace: Some("bench".to_string()),
                    name: name.clone(),
                    object: json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": name, "namespace": "bench", "labels": managed},
                        "data": {"BERTH_WORKLOAD": format!("w{i}"), "BERTH_TARGET": "t"}}),
                });
            }
            ClusterManifests {
                context: context.clone(),
                targets: vec!["t".to_string()],
                manifests,
            }
        })
        .collect();
    let rendered = Rendered {
        plan_id: "sha256:bench".to_string(),
        clusters,
        others: Vec::new(),
        idle_targets: Vec::new(),
        gitops: Vec::new(),
    };
    let options = Options {
        dry_run: false,
        prune: false,
        force_conflicts: false,
        concurrency,
        wait: None,
    };
    let kubeconfigs = std::sync::Arc::new(Kubeconfigs::from_paths(&[path]));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("runtime");
    for round in ["first apply", "no-op apply"] {
        let start = std::time::Instant::now();
        let reports = runtime.block_on(apply_all(&rendered, options, kubeconfigs.clone(), false));
        let elapsed = start.elapsed();
        let objects: usize = reports.iter().map(|r| r.objects.len()).sum();
        assert_eq!(objects, 1000);
        assert!(reports.iter().all(|r| r.error.is_none()));
        eprintln!(
            "{round}: {objects} objects, concurrency {concurrency}, latency {latency} ms: {elapsed:?}"
        );
    }
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

/// A minimal spec for a real cluster: one CPU-only service in namespace `berth-e2e`.
fn real_cluster_spec(context: &str) -> String {
    format!(
        r#"target e2e {{
  class        = datacenter
  runtime      = kubernetes {{ context = "{context}"  namespace = "berth-e2e" }}
  connectivity = connected
  cpu    = 2
  memory = 2GiB
}}
"#
    ) + &echo_workload(1, "ports = [8080]")
}

/// A CPU-only service workload running a `pause` container.
fn echo_workload(replicas: u32, extra: &str) -> String {
    format!(
        r#"
workload echo {{
  release  = "1.0.0"
  image    = "registry.k8s.io/pause:3.10"
  kind     = service
  class    = development
  identity = service_account("echo")
  replicas = {replicas}
  resources {{ cpu = 0.1  memory = 64MiB }}
  {extra}
  connectivity = connected
  telemetry {{ export = live }}
}}
"#
    )
}

/// Against a real cluster (kind, k3s: docs/runtime-kubernetes.md) when `BERTH_E2E_KUBECONFIG` is set
/// (context `BERTH_E2E_CONTEXT`, default `kind-kind`): apply, then re-apply unchanged. The
/// namespace `berth-e2e` is left for inspection (`kubectl delete namespace berth-e2e`).
/// Without it, only checks that the spec plans.
#[test]
fn real_cluster_when_configured() {
    let context = std::env::var("BERTH_E2E_CONTEXT").unwrap_or_else(|_| "kind-kind".into());
    let dir = tempfile::tempdir().expect("temp dir");
    let spec = dir.path().join("spec");
    std::fs::create_dir(&spec).expect("mkdir");
    std::fs::write(spec.join("e2e.berth"), real_cluster_spec(&context)).expect("write");
    let loaded = files::load(std::slice::from_ref(&spec), &FsReader).expect("load");
    let sources = berth_runtime::files::relative_sources(&spec, &loaded);
    let planned = berth_compiler::driver::plan(&sources, AT.parse().expect("at"))
        .unwrap_or_else(|e| panic!("the e2e spec plans: {e:?}"));
    assert!(planned.plan.feasible, "the e2e spec places its workload");
    let Ok(kubeconfig) = std::env::var("BERTH_E2E_KUBECONFIG") else {
        eprintln!("skipped: set BERTH_E2E_KUBECONFIG to run against a real cluster");
        return;
    };
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_berth"))
            .args(args)
            .env("KUBECONFIG", &kubeconfig)
            .output()
            .expect("run berth");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.code().unwrap_or(-1), err)
    };
    // A saved plan: a spec planned on each run would carry a new plan id each time.
    let plan = dir.path().join("plan.json");
    std::fs::write(&plan, serde_json::to_string(&planned.plan).expect("json")).expect("write");
    let args = [
        "apply",
        plan.to_str().expect("utf-8"),
        "--spec",
        spec.to_str().expect("utf-8"),
    ];
    let (code, err) = run(&args);
    assert_eq!(code, 0, "{err}");
    let (code, err) = run(&args);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("0 changed"), "{err}");
}

#[test]
fn wait_reports_what_did_not_roll_out_when_the_timeout_ends() {
    let s = Setup::new();
    // No controllers: nothing ever becomes ready.
    let started = Instant::now();
    let (code, _, err) = s.apply(&["--wait", "--timeout", "1"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("not rolled out   Deployment ml/chat-assistant: 0/"),
        "{err}"
    );
    assert!(
        err.contains(
            "not rolled out   Job burst/ranker-training: 0/1 succeeded when the wait ended"
        ),
        "{err}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the timeout ends the wait"
    );
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
            "Deployment ml/chat-assistant",
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
fn throttling_waits_as_long_as_the_server_asks() {
    let s = Setup::new();
    s.prod.inject(Fault {
        method: Some(axum::http::Method::PATCH),
        path: Some("configmaps".to_string()),
        kind: FaultKind::Throttle {
            retry_after_seconds: 1,
        },
        times: 2,
        after_writes: 0,
    });
    let started = Instant::now();
    let (code, _, err) = s.apply(&["--concurrency", "1"]);
    assert_eq!(code, 0, "{err}");
    // The backoff is 5 ms here (BERTH_K8S_RETRY_BASE_MS); the server asked for 1 s, twice.
    assert!(started.elapsed() >= Duration::from_secs(2), "{err}");
}

#[test]
fn a_changed_job_template_replaces_the_job_when_berth_manages_it() {
    let s = Setup::new();
    assert_eq!(s.apply(&[]).0, 0);
    // The live Job runs another image (an earlier plan's): its template cannot be patched.
    let mut live = s
        .burst
        .get("jobs", "burst", "ranker-training")
        .expect("applied");
    let uid = live["metadata"]["uid"].clone();
    live["metadata"]
        .as_object_mut()
        .expect("meta")
        .remove("managedFields");
    live["spec"]["template"]["spec"]["containers"][0]["image"] = json!("registry/old:0.9");
    s.burst.seed("berth", live);

    let (code, out, err) = s.apply(&["--dry-run"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("would replace    Job burst/ranker-training"),
        "{err}"
    );
    assert!(
        out.contains("-") && out.contains("registry/old:0.9"),
        "{out}"
    );
    let (code, _, err) = s.apply(&[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("replaced         Job burst/ranker-training"),
        "{err}"
    );
    let replaced = s
        .burst
        .get("jobs", "burst", "ranker-training")
        .expect("created again");
    assert_ne!(replaced["metadata"]["uid"], uid, "a new object");
    assert_ne!(
        replaced["spec"]["template"]["spec"]["containers"][0]["image"],
        json!("registry/old:0.9")
    );
    let deletes: Vec<String> = s
        .burst
        .log()
        .into_iter()
        .filter(|l| l.starts_with("DELETE"))
        .collect();
    assert_eq!(
        deletes,
        [
            "DELETE /apis/batch/v1/namespaces/burst/jobs/ranker-training? propagationPolicy=Background"
        ]
    );
    let (code, _, err) = s.apply(&[]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("0 changed"), "{err}");
}

#[test]
fn a_changed_job_template_is_not_replaced_when_the_job_is_not_berths() {
    let s = Setup::new();
    s.prod.seed(
        "admin",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}}),
    );
    s.prod.seed(
        "kubectl",
        json!({"apiVersion": "batch/v1", "kind": "Job",
               "metadata": {"name": "llm-finetune", "namespace": "ml"},
               "spec": {"template": {"spec": {"restartPolicy": "Never",
                   "containers": [{"name": "theirs", "image": "theirs:1"}]}}}}),
    );
    let (code, _, err) = s.apply(&[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("conflict with field manager `kubectl`"),
        "{err}"
    );
    let (code, _, err) = s.apply(&["--force-conflicts"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(
            "failed           Job ml/llm-finetune: rejected (422): `spec.template` cannot change"
        ),
        "{err}"
    );
    let live = s
        .prod
        .get("jobs", "ml", "llm-finetune")
        .expect("still there");
    assert_eq!(
        live["spec"]["template"]["spec"]["containers"][0]["image"],
        "theirs:1"
    );
    assert!(
        !s.prod.log().iter().any(|l| l.starts_with("DELETE")),
        "nothing deleted"
    );
}

#[test]
fn status_reports_mig_allocation() {
    const PEAK: &str = "../examples/peak-hours";
    let hpc = TestServer::start(TOKEN);
    let interactive = TestServer::start(TOKEN);
    let dir = tempfile::tempdir().expect("temp dir");
    let config = kubeconfig(
        &[("muc-hpc", &hpc), ("muc-interactive", &interactive)],
        TOKEN,
    );
    std::fs::write(dir.path().join("kubeconfig"), config).expect("write kubeconfig");
    let loaded = files::load(&[PathBuf::from(PEAK)], &FsReader).expect("load spec");
    let sources = berth_runtime::files::relative_sources(Path::new(PEAK), &loaded);
    let planned = berth_compiler::driver::plan(&sources, AT.parse().expect("at"))
        .unwrap_or_else(|_| panic!("the example plans"));
    let plan = dir.path().join("plan.json");
    std::fs::write(&plan, serde_json::to_string(&planned.plan).expect("json")).expect("write");
    interactive.seed(
        "kubelet",
        json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "a100-1", "labels": {"nvidia.com/mig.config": "all-1g.10gb"}},
            "status": {"capacity": {"nvidia.com/mig-1g.10gb": "28", "nvidia.com/gpu": "0"},
                       "allocatable": {"nvidia.com/mig-1g.10gb": "28"}}}),
    );
    for (name, slices) in [("nb-1", 1), ("nb-2", 2)] {
        interactive.seed(
            "kubelet",
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "notebooks"},
                "spec": {"nodeName": "a100-1", "containers": [{"name": "c", "image": "i",
                    "resources": {"limits": {"nvidia.com/mig-1g.10gb": slices.to_string()}}}]},
                "status": {"phase": "Running"}}),
        );
    }
    let out = Command::new(env!("CARGO_BIN_EXE_berth"))
        .args([
            "--output",
            "json",
            "status",
            plan.to_str().expect("utf-8"),
            "--spec",
            PEAK,
        ])
        .env("KUBECONFIG", dir.path().join("kubeconfig"))
        .env("BERTH_K8S_RETRY_BASE_MS", "5")
        .output()
        .expect("run berth");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stdout.contains(TOKEN) && !stderr.contains(TOKEN));
    let doc: Value = serde_json::from_str(&stdout).unwrap_or_else(|_| panic!("{stdout}{stderr}"));
    let cluster = doc["clusters"]
        .as_array()
        .expect("clusters")
        .iter()
        .find(|c| c["context"] == "muc-interactive")
        .unwrap_or_else(|| panic!("{doc}"));
    let pool = cluster["pools"]
        .as_array()
        .expect("pools")
        .iter()
        .find(|p| p["pool"] == "a100")
        .unwrap_or_else(|| panic!("{cluster}"));
    assert_eq!(pool["resource"], "nvidia.com/mig-1g.10gb", "{pool}");
    assert_eq!(pool["nodes"], 1, "{pool}");
    assert_eq!(pool["capacity"], 28, "{pool}");
    assert_eq!(pool["allocatable"], 28, "{pool}");
    assert_eq!(pool["allocated"], 3, "{pool}");
}

/// A spec with one Arc-attached target whose GitOps repository is `repo`.
fn arc_spec(repo: &str, replicas: u32) -> String {
    format!(
        r#"target eu_arc {{
  class        = cloud
  runtime      = arc {{ cluster = "/subscriptions/0/resourceGroups/ai/providers/Microsoft.Kubernetes/connectedClusters/eu"
                      repo = "{repo}"  branch = "main"  path = "clusters/eu"  namespace = "ml" }}
  connectivity = connected
  cpu    = 16
  memory = 64GiB
}}
"#
    ) + &echo_workload(replicas, "")
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn arc_targets_are_committed_to_the_gitops_repository() {
    let dir = tempfile::tempdir().expect("temp dir");
    let bare = dir.path().join("gitops.git");
    git(
        dir.path(),
        &[
            "init",
            "--quiet",
            "--bare",
            "--initial-branch=main",
            "gitops.git",
        ],
    );
    let repo = bare.to_str().expect("utf-8").to_string();
    let spec = dir.path().join("spec");
    std::fs::create_dir(&spec).expect("mkdir");
    let apply = |replicas: u32, extra: &[&str]| {
        std::fs::write(spec.join("arc.berth"), arc_spec(&repo, replicas)).expect("write");
        let loaded = files::load(std::slice::from_ref(&spec), &FsReader).expect("load");
        let sources = berth_runtime::files::relative_sources(&spec, &loaded);
        let planned = berth_compiler::driver::plan(&sources, AT.parse().expect("at"))
            .unwrap_or_else(|e| panic!("the arc spec plans: {e:?}"));
        let plan = dir.path().join("plan.json");
        std::fs::write(&plan, serde_json::to_string(&planned.plan).expect("json")).expect("w");
        let mut args = vec![
            "apply".to_string(),
            plan.to_string_lossy().into_owned(),
            "--spec".to_string(),
            spec.to_string_lossy().into_owned(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let out = Command::new(env!("CARGO_BIN_EXE_berth"))
            .args(&args)
            .env("KUBECONFIG", dir.path().join("none"))
            .output()
            .expect("run berth");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = apply(1, &["--dry-run"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("would commit"), "{err}");
    let (code, err) = apply(1, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("committed"), "{err}");
    let files = git(&bare, &["ls-tree", "-r", "--name-only", "main"]);
    assert_eq!(
        files,
        "clusters/eu/kustomization.yaml\nclusters/eu/ml.yaml\n"
    );
    let objects = git(&bare, &["show", "main:clusters/eu/ml.yaml"]);
    assert!(
        objects.contains("kind: Deployment") && objects.contains("replicas: 1"),
        "{objects}"
    );
    let (code, err) = apply(1, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("unchanged"), "re-run commits nothing: {err}");
    let (code, err) = apply(2, &[]);
    assert_eq!(code, 0, "{err}");
    let log = git(&bare, &["log", "--oneline", "main"]);
    assert_eq!(log.lines().count(), 2, "{log}");
    assert!(git(&bare, &["show", "main:clusters/eu/ml.yaml"]).contains("replicas: 2"));
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

#[test]
fn rejected_credentials_are_reported_and_never_printed() {
    let s = Setup::new();
    // The prod cluster's user has a token the server does not accept.
    const WRONG: &str = "wr0ng-t0ken-also-secret";
    let path = s.dir.path().join("kubeconfig");
    std::fs::write(&path, kubeconfig(&[("fra-gpu-prod", &s.prod)], WRONG)).expect("write");
    let burst = s.dir.path().join("burst-kubeconfig");
    std::fs::write(&burst, kubeconfig(&[("eks-gpu-burst", &s.burst)], TOKEN)).expect("write");
    for output in ["human", "json"] {
        let out = Command::new(env!("CARGO_BIN_EXE_berth"))
            .args(["--output", output, "apply", s.plan_path(), "--spec", SPEC])
            // Two files merged, as kubectl merges them.
            .env(
                "KUBECONFIG",
                std::env::join_paths([&path, &burst]).expect("paths"),
            )
            .env("BERTH_K8S_RETRY_BASE_MS", "5")
            .output()
            .expect("run berth");
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(1), "{all}");
        assert!(
            all.contains("the server did not accept the credentials"),
            "{all}"
        );
        assert!(
            !all.contains(WRONG) && !all.contains(TOKEN),
            "credentials in the output:\n{all}"
        );
    }
    assert!(
        s.burst.get("jobs", "burst", "ranker-training").is_some(),
        "the other cluster is applied"
    );
}
