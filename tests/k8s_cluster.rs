//! `berth apply`, `diff`, `status` and `--wait` against real Kubernetes control planes
//! (tests/cluster: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and KWOK,
//! built from their Go modules), one cluster per kubeconfig context of the spec, with
//! simulated GPU nodes generated from the spec's pools.

mod cluster;
mod isolated;

use cluster::{BERTH, Cluster, Fleet, Planned};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

const AT: &str = "2025-06-07T10:00:00Z";
const TRAINING: &str = "../examples/training-and-inference";
/// The example's demo approver key (its public half is in the example's trust file).
const TRAINING_APPROVER: &str = "../examples/training-and-inference/keys/ml-platform-leads.key";

fn plan_spec(spec: &Path) -> Planned {
    cluster::plan_spec(spec, AT)
}

/// Runs `berth ARGS` with `kubeconfig`; returns (exit code, stdout, stderr). No secret of
/// `fleet` may appear in either.
fn berth(fleet: &Fleet, kubeconfig: &Path, args: &[&str]) -> (i32, String, String) {
    let out = isolated::berth()
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("BERTH_K8S_RETRY_BASE_MS", "50")
        .env("BERTH_AUDIT_LOG", fleet.dir.join("audit.redb"))
        .env("NO_COLOR", "1")
        .output()
        .expect("run berth");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    for secret in fleet.secrets() {
        assert!(
            !stdout.contains(&secret) && !stderr.contains(&secret),
            "a token in the output:\n{stdout}\n{stderr}"
        );
    }
    (out.status.code().unwrap_or(-1), stdout, stderr)
}

/// The example with two clusters and an approval, applied as the admin.
struct Setup {
    fleet: Fleet,
    planned: Planned,
}

impl Setup {
    fn training(users: &[&str]) -> Setup {
        let planned = plan_spec(Path::new(TRAINING));
        let fleet = Fleet::for_ir(&planned.ir, users);
        let setup = Setup { fleet, planned };
        let (code, _, err) = setup.berth(&[
            "approve",
            setup.plan(),
            "--key",
            TRAINING_APPROVER,
            "--spec",
            setup.spec(),
        ]);
        assert_eq!(code, 0, "{err}");
        setup
    }

    fn plan(&self) -> &str {
        self.planned.plan_arg()
    }

    fn spec(&self) -> &str {
        self.planned.spec_arg()
    }

    fn berth(&self, args: &[&str]) -> (i32, String, String) {
        berth(&self.fleet, &self.fleet.kubeconfig, args)
    }

    fn apply(&self, extra: &[&str]) -> (i32, String, String) {
        let mut args = vec!["apply", self.plan(), "--spec", self.spec()];
        args.extend_from_slice(extra);
        self.berth(&args)
    }

    fn prod(&self) -> &Cluster {
        self.fleet.cluster("fra-gpu-prod")
    }

    fn burst(&self) -> &Cluster {
        self.fleet.cluster("eks-gpu-burst")
    }
}

/// The field managers of the object itself (not of its status, which controllers write).
fn managers(object: &Value) -> Vec<String> {
    object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["subresource"].is_null())
        .filter_map(|m| m["manager"].as_str().map(str::to_string))
        .collect()
}

/// Whether a report lists an object as failed.
fn has_failures(report: &str) -> bool {
    report
        .lines()
        .any(|l| l.trim_start().starts_with("failed "))
}

const CHAT: &str = "/apis/apps/v1/namespaces/ml/deployments/chat-assistant";
const RANKER: &str = "/apis/batch/v1/namespaces/burst/jobs/ranker-training";

#[test]
fn the_control_plane_is_real_and_its_nodes_come_from_the_pools() {
    let planned = plan_spec(Path::new(TRAINING));
    let fleet = Fleet::for_ir(&planned.ir, &[]);
    let prod = fleet.cluster("fra-gpu-prod");
    let version = prod.get("/version").expect("version");
    assert_eq!(version["gitVersion"], "v1.37.2", "{version}");
    let nodes = prod.list("/api/v1/nodes");
    let gpus: u64 = nodes
        .iter()
        .filter(|n| n["metadata"]["labels"]["gpu.example.com/pool"] == "training")
        .map(|n| {
            n["status"]["allocatable"]["nvidia.com/gpu"]
                .as_str()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        })
        .sum();
    assert_eq!(gpus, 16, "the train pool's 16 H100 over its nodes");
}

#[test]
fn first_apply_creates_and_a_second_writes_nothing() {
    let s = Setup::training(&[]);
    let detailed_diff = || {
        s.berth(&["diff", s.plan(), "--spec", s.spec(), "--detailed-exitcode"])
            .0
    };
    assert_eq!(detailed_diff(), 2, "changes pending before the first apply");
    let (code, _, err) = s.apply(&[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("context `fra-gpu-prod`:") && err.contains("created"),
        "{err}"
    );
    let deployment = s.prod().get(CHAT).expect("deployment applied");
    assert_eq!(managers(&deployment), vec!["berth"]);
    assert_eq!(
        deployment["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "berth"
    );
    assert!(s.prod().get("/api/v1/namespaces/ml").is_some());
    assert!(s.burst().get(RANKER).is_some());
    let writes = (s.prod().writes_by(BERTH), s.burst().writes_by(BERTH));
    // One write per object: the namespace and 14 objects on prod (10, and a claim and a
    // staging Job for each of the two models served there), the namespace and 2 on burst.
    assert_eq!((writes.0.len(), writes.1.len()), (15, 3), "{writes:?}");

    let (code, _, err) = s.apply(&[]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("0 changed"), "{err}");
    assert!(
        !err.contains("created") && !err.contains("configured"),
        "{err}"
    );
    assert_eq!(
        (s.prod().writes_by(BERTH), s.burst().writes_by(BERTH)),
        writes,
        "the API servers' audit logs show no write the second time"
    );
    assert_eq!(detailed_diff(), 0, "nothing pending once applied");
    // The apply lock of `ml` on prod: created and given back by the first run, taken and
    // given back by the second (the only writes of a no-op apply).
    let leases = s.prod().lease_writes_by(BERTH);
    assert_eq!(leases.len(), 4, "{leases:?}");
    assert!(leases[0].starts_with("create /apis/coordination.k8s.io/v1/namespaces/ml/leases"));
    // The audit trail: the signed approval, then each apply per target, as the kubeconfig
    // user of its context, all `ok`; the chain verifies.
    let (code, out, err) = s.berth(&["audit", "--jsonl"]);
    assert_eq!(code, 0, "{err}");
    let records: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    assert_eq!(records[0]["action"], "approved", "{records:#?}");
    let applied: Vec<&Value> = records
        .iter()
        .filter(|r| r["action"] == "applied")
        .collect();
    assert_eq!(applied.len(), 4, "two targets, two applies: {applied:#?}");
    for r in &applied {
        assert_eq!(r["outcome"], "ok", "{r}");
        let actor = r["actor"].as_str().unwrap_or_default();
        let context = r["detail"]["context"].as_str().unwrap_or("?");
        assert!(
            actor.starts_with("kubeconfig:")
                && actor.ends_with(&format!("@{context}"))
                && !actor.contains("unknown"),
            "{r}"
        );
    }
    assert_eq!(s.berth(&["audit", "--verify"]).0, 0);
}

/// A Lease `berth-apply` held in `namespace` of `cluster` by `holder`, renewed `age_s`
/// seconds ago, as another run leaves it.
fn hold_lease(cluster: &Cluster, namespace: &str, holder: &str, age_s: i64) {
    let renewed = k8s_openapi::jiff::Timestamp::now()
        .checked_sub(k8s_openapi::jiff::SignedDuration::from_secs(age_s))
        .expect("instant");
    let micro = renewed.strftime("%Y-%m-%dT%H:%M:%S.%6fZ").to_string();
    let answer = cluster.request(
        "POST",
        &format!("/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"),
        Some(json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "berth-apply", "namespace": namespace},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 30,
                     "acquireTime": micro, "renewTime": micro},
        })),
    );
    assert_eq!(answer.status, 201, "{:?}", answer.body);
}

fn lease_holder(cluster: &Cluster, namespace: &str) -> Value {
    cluster
        .get(&format!(
            "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/berth-apply"
        ))
        .expect("lease")["spec"]["holderIdentity"]
        .clone()
}

/// Two real `berth apply --wait` processes started together against the same clusters: one
/// takes each namespace's Lease, the other waits (saying for whom) and applies after; both
/// succeed and every Lease is given back.
#[test]
fn two_applies_at_once_serialise_on_the_lease() {
    let s = Setup::training(&[]);
    let spawn = |holder: &str| {
        isolated::berth()
            .args([
                "apply",
                s.plan(),
                "--spec",
                s.spec(),
                "--wait",
                "--timeout",
                "120",
            ])
            .env("KUBECONFIG", &s.fleet.kubeconfig)
            .env("BERTH_K8S_RETRY_BASE_MS", "50")
            .env("NO_COLOR", "1")
            .env("BERTH_LOCK_HOLDER", holder)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run berth")
    };
    let (a, b) = (spawn("pipeline-a"), spawn("pipeline-b"));
    let (a, b) = (
        a.wait_with_output().expect("a"),
        b.wait_with_output().expect("b"),
    );
    let err = |o: &std::process::Output| String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(a.status.code(), Some(0), "{}", err(&a));
    assert_eq!(b.status.code(), Some(0), "{}", err(&b));
    let waited: Vec<String> = [(&a, "pipeline-b"), (&b, "pipeline-a")]
        .iter()
        .filter(|(o, other)| err(o).contains(&format!("(Lease `berth-apply`), held by `{other}`")))
        .map(|(o, _)| err(o))
        .collect();
    assert!(
        !waited.is_empty(),
        "neither run waited for the other:\n{}\n{}",
        err(&a),
        err(&b)
    );
    for (cluster, ns) in [(s.prod(), "ml"), (s.burst(), "burst")] {
        assert_eq!(lease_holder(cluster, ns), Value::Null, "given back in {ns}");
    }
}

/// A run holds its Lease as long as it works, beyond the Lease's duration, by renewing it:
/// with 3-second Leases, an apply waiting 8 s for a rollout that cannot happen (a quota of
/// no pods) keeps renewing, and a second run gives up rather than take the lock over.
#[test]
fn a_running_apply_renews_its_lease() {
    let s = Setup::training(&[]);
    let prod = s.prod();
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}});
    assert_eq!(
        prod.request("POST", "/api/v1/namespaces", Some(namespace))
            .status,
        201
    );
    let quota = json!({"apiVersion": "v1", "kind": "ResourceQuota",
                       "metadata": {"name": "no-pods", "namespace": "ml"},
                       "spec": {"hard": {"pods": "0"}}});
    let answer = prod.request("POST", "/api/v1/namespaces/ml/resourcequotas", Some(quota));
    assert_eq!(answer.status, 201, "{:?}", answer.body);
    let run = |holder: &str, extra: &[&str]| {
        let mut command = isolated::berth();
        command
            .args(["apply", s.plan(), "--spec", s.spec()])
            .args(extra)
            .env("KUBECONFIG", &s.fleet.kubeconfig)
            .env("BERTH_K8S_RETRY_BASE_MS", "50")
            .env("BERTH_LOCK_LEASE_SECONDS", "3")
            .env("BERTH_LOCK_HOLDER", holder)
            .env("NO_COLOR", "1")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        command
    };
    let mut long = run("the-long-run", &["--wait", "--timeout", "8"])
        .spawn()
        .expect("run berth");
    prod.wait_for(
        "the long run holds the lock",
        Duration::from_secs(20),
        || {
            prod.get("/apis/coordination.k8s.io/v1/namespaces/ml/leases/berth-apply")
                .is_some_and(|l| l["spec"]["holderIdentity"] == "the-long-run")
        },
    );
    let renewed = |l: &Value| l["spec"]["renewTime"].as_str().unwrap_or("").to_string();
    let first = renewed(
        &prod
            .get("/apis/coordination.k8s.io/v1/namespaces/ml/leases/berth-apply")
            .expect("lease"),
    );
    let second = run("the-second-run", &["--lock-timeout", "5"])
        .output()
        .expect("run berth");
    let err = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(1), "{err}");
    assert!(err.contains("held by `the-long-run`"), "{err}");
    assert!(err.contains("gave up after 5s"), "{err}");
    let lease = prod
        .get("/apis/coordination.k8s.io/v1/namespaces/ml/leases/berth-apply")
        .expect("lease");
    assert_eq!(lease["spec"]["holderIdentity"], "the-long-run");
    assert_ne!(renewed(&lease), first, "renewed while it ran");
    let out = long.wait().expect("the long run");
    assert_eq!(out.code(), Some(1), "its rollout could not finish");
    assert_eq!(
        lease_holder(prod, "ml"),
        Value::Null,
        "given back at the end"
    );
}

/// A Lease another run holds and renews: a run gives up after `--lock-timeout`, naming the
/// holder, and applies nothing there; `--force-unlock` takes it; a Lease its holder stopped
/// renewing long ago is taken over without waiting.
#[test]
fn a_held_lock_is_waited_for_given_up_on_or_forced() {
    let s = Setup::training(&[]);
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}});
    assert_eq!(
        s.prod()
            .request("POST", "/api/v1/namespaces", Some(namespace))
            .status,
        201
    );
    hold_lease(s.prod(), "ml", "pipeline-42", 0);
    let started = std::time::Instant::now();
    let (code, _, err) = s.apply(&["--lock-timeout", "2"]);
    assert_eq!(code, 1, "{err}");
    assert!(started.elapsed() >= std::time::Duration::from_secs(2));
    assert!(
        err.contains("waiting for the apply lock of namespace `ml` (Lease `berth-apply`), held by `pipeline-42`"),
        "{err}"
    );
    assert!(err.contains("gave up after 2s"), "{err}");
    assert!(err.contains("`--force-unlock` takes the lock"), "{err}");
    assert!(
        s.prod().get(CHAT).is_none(),
        "nothing applied under another's lock"
    );
    assert!(
        s.burst().get(RANKER).is_some(),
        "the other cluster was not locked"
    );
    assert_eq!(lease_holder(s.prod(), "ml"), "pipeline-42");

    let (code, _, err) = s.apply(&["--force-unlock"]);
    assert_eq!(code, 0, "{err}");
    assert!(s.prod().get(CHAT).is_some());
    assert_eq!(lease_holder(s.prod(), "ml"), Value::Null);

    // A holder that died ten minutes ago: taken over at once.
    let lease = "/apis/coordination.k8s.io/v1/namespaces/ml/leases/berth-apply";
    assert_eq!(s.prod().request("DELETE", lease, None).status, 200);
    hold_lease(s.prod(), "ml", "pipeline-dead", 600);
    let started = std::time::Instant::now();
    let (code, _, err) = s.apply(&["--lock-timeout", "20"]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("waiting for the apply lock"), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
}

#[test]
fn a_conflict_names_the_other_manager_and_force_takes_the_field() {
    let s = Setup::training(&[]);
    assert_eq!(s.apply(&[]).0, 0);
    let answer = s.prod().apply_as_manager(
        "helm",
        CHAT,
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "chat-assistant", "namespace": "ml"},
            "spec": {"replicas": 7}}),
        true,
    );
    assert_eq!(answer.status, 200, "{:?}", answer.body);
    let (code, _, err) = s.apply(&[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("conflict with field manager `helm` over `.spec.replicas`"),
        "{err}"
    );
    let (code, _, err) = s.apply(&["--force-conflicts"]);
    assert_eq!(code, 0, "{err}");
    let live = s.prod().get(CHAT).expect("live");
    assert_ne!(live["spec"]["replicas"], json!(7), "berth's value won");
}

#[test]
fn prune_deletes_only_stale_berth_objects() {
    let s = Setup::training(&[]);
    assert_eq!(s.apply(&[]).0, 0);
    let configmap = |name: &str, managed: bool| {
        let mut labels = json!({"berth.dev/target": "dc_frankfurt"});
        if managed {
            labels["app.kubernetes.io/managed-by"] = json!("berth");
        }
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ml", "labels": labels},
            "data": {"k": "v"}})
    };
    let path = |name: &str| format!("/api/v1/namespaces/ml/configmaps/{name}");
    for (name, managed) in [("old-workload-placement", true), ("someone-elses", false)] {
        let answer =
            s.prod()
                .apply_as_manager("kubectl", &path(name), configmap(name, managed), true);
        assert_eq!(answer.status, 201, "{:?}", answer.body);
    }
    let (code, _, err) = s.apply(&["--prune", "--dry-run"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("would prune"), "{err}");
    assert!(s.prod().get(&path("old-workload-placement")).is_some());
    let (code, _, err) = s.apply(&["--prune"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("pruned           ConfigMap ml/old-workload-placement"),
        "{err}"
    );
    assert!(s.prod().get(&path("old-workload-placement")).is_none());
    assert!(
        s.prod().get(&path("someone-elses")).is_some(),
        "not berth's"
    );
    assert!(s.prod().get(CHAT).is_some(), "in the plan");
}

#[test]
fn dry_run_and_diff_write_nothing_and_the_server_validates_every_object() {
    let s = Setup::training(&[]);
    // Into namespaces that do not exist yet, a dry run shows every object as created
    // (the server would refuse a dry run in a missing namespace).
    let (code, out, err) = s.apply(&["--dry-run"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("would create"), "{err}");
    assert!(!has_failures(&err), "{err}\n{out}");
    assert!(s.prod().get("/api/v1/namespaces/ml").is_none());
    // With the namespaces there, every rendered object goes through the real server's
    // admission and validation (`dryRun=All`), and none is refused.
    for (cluster, ns) in [(s.prod(), "ml"), (s.burst(), "burst")] {
        let answer = cluster.request(
            "POST",
            "/api/v1/namespaces",
            Some(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})),
        );
        assert_eq!(answer.status, 201, "{:?}", answer.body);
    }
    let (code, out, err) = s.apply(&["--dry-run"]);
    assert_eq!(code, 0, "{err}");
    assert!(!has_failures(&err), "{err}\n{out}");
    let dry_runs = s
        .prod()
        .audit()
        .into_iter()
        .filter(|e| e["user"]["username"] == BERTH && e["verb"] == "patch")
        .filter(|e| e["responseStatus"]["code"] == 200 || e["responseStatus"]["code"] == 201)
        .filter(|e| {
            e["requestURI"]
                .as_str()
                .is_some_and(|u| u.contains("dryRun=All"))
        })
        .count();
    assert_eq!(
        dry_runs, 14,
        "every object of fra-gpu-prod validated by the server"
    );
    assert!(
        s.prod().writes_by(BERTH).is_empty() && s.burst().writes_by(BERTH).is_empty(),
        "a dry run writes nothing: {:?}",
        s.prod().writes_by(BERTH)
    );

    assert_eq!(s.apply(&[]).0, 0);
    let before = s.prod().writes_by(BERTH).len();
    let answer = s.prod().apply_as_manager(
        "berth",
        "/api/v1/namespaces/ml/configmaps/chat-assistant-placement",
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "chat-assistant-placement", "namespace": "ml"},
            "data": {"BERTH_TARGET": "somewhere-else"}}),
        true,
    );
    assert_eq!(answer.status, 200, "{:?}", answer.body);
    let (code, out, err) = s.berth(&["diff", s.plan(), "--spec", s.spec()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("somewhere-else"), "{out}");
    assert!(out.contains("chat-assistant-placement"), "{out}");
    assert_eq!(
        s.prod().writes_by(BERTH).len(),
        before,
        "diff writes nothing"
    );
}

/// A copy of the training example whose ranker training runs another image: an earlier
/// release of the same spec.
fn earlier_release(dir: &Path) -> PathBuf {
    let spec = dir.join("earlier");
    std::fs::create_dir_all(&spec).expect("mkdir");
    for entry in std::fs::read_dir(TRAINING).expect("example").flatten() {
        if entry.path().is_dir() {
            continue;
        }
        let text = std::fs::read_to_string(entry.path()).expect("read");
        let text = text.replace(
            "registry.example.com/search/ranker-train:7.0.1",
            "registry.example.com/search/ranker-train:6.9.0",
        );
        std::fs::write(spec.join(entry.file_name()), text).expect("write");
    }
    spec
}

#[test]
fn a_changed_job_template_replaces_the_job() {
    let s = Setup::training(&[]);
    // The earlier release applied first: its Job's pod template runs the old image, and the
    // real API server refuses to patch a Job's template in place.
    let earlier = plan_spec(&earlier_release(&s.fleet.dir));
    let (code, _, err) = s.berth(&[
        "approve",
        earlier.plan_arg(),
        "--key",
        TRAINING_APPROVER,
        "--spec",
        earlier.spec_arg(),
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = s.berth(&["apply", earlier.plan_arg(), "--spec", earlier.spec_arg()]);
    assert_eq!(code, 0, "{err}");
    let old_uid = s.burst().get(RANKER).expect("earlier job")["metadata"]["uid"].clone();

    let (code, out, err) = s.apply(&["--dry-run"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("would replace    Job burst/ranker-training"),
        "{err}"
    );
    assert!(out.contains("ranker-train:6.9.0"), "{out}");
    let (code, _, err) = s.apply(&[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("replaced         Job burst/ranker-training"),
        "{err}"
    );
    let replaced = s.burst().get(RANKER).expect("created again");
    assert_ne!(replaced["metadata"]["uid"], old_uid, "a new object");
    assert_eq!(
        replaced["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.example.com/search/ranker-train:7.0.1"
    );
    let (code, _, err) = s.apply(&[]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("0 changed"), "{err}");
}

#[test]
fn wait_ends_when_deployments_are_available_and_jobs_complete() {
    let s = Setup::training(&[]);
    let (code, _, err) = s.apply(&["--wait", "--timeout", "240"]);
    assert_eq!(code, 0, "{err}");
    let deployment = s.prod().get(CHAT).expect("deployment");
    assert_eq!(
        deployment["status"]["availableReplicas"], deployment["spec"]["replicas"],
        "{deployment}"
    );
    let job = s.burst().get(RANKER).expect("job");
    let complete = job["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Complete" && c["status"] == "True");
    assert!(complete, "{}", job["status"]);
    // It followed the rollouts with watches, not by polling: one GET per object (the
    // apply's), and WATCH requests for the workloads.
    let requests = |verb: &str, resource: &str| {
        s.prod()
            .audit()
            .iter()
            .filter(|e| e["user"]["username"] == BERTH && e["verb"] == verb)
            .filter(|e| e["objectRef"]["resource"] == resource)
            .count()
    };
    assert!(requests("watch", "deployments") >= 1, "watched");
    assert_eq!(requests("get", "deployments"), 2, "one GET per Deployment");
}

/// Every placement whose variant has a digest gets a claim the real controller manager
/// binds, a staging Job that completes, and pods that mount the claim read-only behind an
/// init container checking the digest; `berth status` does not count the Jobs as workloads.
#[test]
fn models_are_staged_on_a_bound_volume_before_the_workload_starts() {
    let s = Setup::training(&[]);
    let (code, _, err) = s.apply(&["--wait", "--timeout", "240"]);
    assert_eq!(code, 0, "{err}");
    let deployment = s.prod().get(CHAT).expect("deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    let digest = pod["containers"][0]["env"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["name"] == "BERTH_MODEL_DIGEST")
        .and_then(|e| e["value"].as_str())
        .expect("digest")
        .to_string();
    let init = &pod["initContainers"][0];
    let args: Vec<&str> = init["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        &args[..4],
        ["fetch", "--check", "--digest", digest.as_str()]
    );
    let claim = pod["volumes"][0]["persistentVolumeClaim"]["claimName"]
        .as_str()
        .expect("claim")
        .to_string();
    assert_eq!(pod["volumes"][0]["persistentVolumeClaim"]["readOnly"], true);
    let namespace = deployment["metadata"]["namespace"].as_str().expect("ns");
    let pvc = s
        .prod()
        .get(&format!(
            "/api/v1/namespaces/{namespace}/persistentvolumeclaims/{claim}"
        ))
        .expect("claim");
    assert_eq!(pvc["status"]["phase"], "Bound", "{pvc}");
    let jobs = s.prod().list(&format!(
        "/apis/batch/v1/namespaces/{namespace}/jobs?labelSelector=berth.dev%2Fcomponent%3Dmodel-staging"
    ));
    let job = jobs
        .iter()
        .find(|j| j["metadata"]["annotations"]["berth.dev/artifact-digest"] == digest.as_str())
        .expect("the staging job of the digest");
    assert!(
        job["status"]["succeeded"].as_i64() >= Some(1),
        "{}",
        job["status"]
    );
    // `berth status` lists the staging Job under the models, staged, never as a workload.
    let (code, out, err) = s.berth(&["status", s.plan(), "--spec", s.spec(), "--output", "json"]);
    assert_eq!(code, 0, "{err}");
    let doc: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let clusters = doc["clusters"].as_array().expect("clusters");
    let workloads = clusters
        .iter()
        .flat_map(|c| c["workloads"].as_array().expect("workloads"));
    assert!(
        workloads
            .into_iter()
            .all(|w| !w["object"].as_str().expect("object").contains("-stage-")),
        "a staging Job listed as a workload: {out}"
    );
    let job_name = job["metadata"]["name"].as_str().expect("job name");
    let model = clusters
        .iter()
        .flat_map(|c| c["models"].as_array().expect("models"))
        .find(|m| m["object"] == format!("Job {namespace}/{job_name}").as_str())
        .unwrap_or_else(|| panic!("the staging Job under the models: {out}"));
    assert_eq!(model["state"], "staged", "{model}");
    assert_eq!(
        model["staged_for"], deployment["metadata"]["name"],
        "{model}"
    );
    assert_eq!(
        model["model"], job["metadata"]["annotations"]["berth.dev/model"],
        "{model}"
    );
    let (code, out, err) = s.berth(&["status", s.plan(), "--spec", s.spec()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.lines().any(|l| l.trim_start().starts_with("model ")
            && l.contains(": staged ")
            && l.ends_with(&format!("Job {namespace}/{job_name}"))),
        "{out}"
    );
}

#[test]
fn status_reads_gpu_allocation_from_the_schedulers_bindings() {
    let s = Setup::training(&[]);
    let (code, _, err) = s.apply(&["--wait", "--timeout", "240"]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = s.berth(&["--output", "json", "status", s.plan(), "--spec", s.spec()]);
    let doc: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
    let plan: Value =
        serde_json::from_str(&std::fs::read_to_string(&s.planned.plan_path).expect("plan"))
            .expect("plan json");
    // Every pool's allocation, as the scheduler bound the pods: the GPUs of the services'
    // replicas (the Jobs have completed, KWOK playing their kubelets, and hold none).
    let held = |target: &str, pool: &str| -> u32 {
        s.planned
            .ir
            .workloads
            .iter()
            .filter(|w| w.kind != berth_compiler::ir::WorkloadKind::Batch)
            .flat_map(|w| {
                let name = w.name.clone();
                plan["workloads"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(move |p| p["workload"] == name.as_str())
                    .flat_map(|p| p["placements"].as_array().cloned().unwrap_or_default())
            })
            .filter(|p| p["target"] == target && p["pool"] == pool)
            .map(|p| {
                (p["replicas"].as_u64().unwrap_or(0) * p["gpus_per_replica"].as_u64().unwrap_or(0))
                    as u32
            })
            .sum()
    };
    for cluster in doc["clusters"].as_array().expect("clusters") {
        for pool in cluster["pools"].as_array().into_iter().flatten() {
            let expected = held(
                pool["target"].as_str().unwrap_or(""),
                pool["pool"].as_str().unwrap_or(""),
            );
            assert_eq!(
                pool["allocated"],
                json!(expected),
                "pool {} of {}: {pool}\n{err}",
                pool["pool"],
                pool["target"]
            );
            assert_eq!(pool["allocatable"], pool["planned_capacity"], "{pool}");
        }
        assert!(
            cluster["pending_gpu_pods"]
                .as_array()
                .is_none_or(|p| p.is_empty()),
            "{cluster}"
        );
    }
    assert_eq!(code, 0, "nothing flagged: {err}\n{out}\n{plan}");
}

/// A service account in `berth-system` bound to `role` cluster-wide; returns a kubeconfig
/// path for it on every cluster of the fleet (tokens from the TokenRequest API).
fn service_account_kubeconfig(fleet: &Fleet, role: Value) -> PathBuf {
    let mut entries = Vec::new();
    for cluster in &fleet.clusters {
        let name = role["metadata"]["name"]
            .as_str()
            .expect("role name")
            .to_string();
        let objects = [
            (
                "/api/v1/namespaces/berth-system",
                json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "berth-system"}}),
            ),
            (
                "/api/v1/namespaces/berth-system/serviceaccounts/berth",
                json!({"apiVersion": "v1",
                "kind": "ServiceAccount", "metadata": {"name": "berth", "namespace": "berth-system"}}),
            ),
            (
                &*format!("/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}"),
                role.clone(),
            ),
            (
                &*format!("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{name}"),
                json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                "subjects": [{"kind": "ServiceAccount", "name": "berth", "namespace": "berth-system"}]}),
            ),
        ];
        for (path, object) in objects {
            let answer = cluster.apply_as_manager("platform-admin", path, object, true);
            assert!(answer.status < 300, "{path}: {:?}", answer.body);
        }
        let answer = cluster.request(
            "POST",
            "/api/v1/namespaces/berth-system/serviceaccounts/berth/token",
            Some(
                json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {"expirationSeconds": 3600}}),
            ),
        );
        assert_eq!(answer.status, 201, "{:?}", answer.body);
        let token = answer.body["status"]["token"]
            .as_str()
            .expect("token")
            .to_string();
        entries.push((
            cluster.context.clone(),
            cluster.server(),
            cluster.pki.ca_cert.clone(),
            token,
        ));
    }
    let refs: Vec<(&str, &str, &Path, &str)> = entries
        .iter()
        .map(|(c, s, ca, t)| (c.as_str(), s.as_str(), ca.as_path(), t.as_str()))
        .collect();
    let path = fleet.dir.join(format!(
        "sa-{}.kubeconfig",
        role["metadata"]["name"].as_str().unwrap_or("role")
    ));
    std::fs::write(&path, cluster::kubeconfig(&refs)).expect("write kubeconfig");
    path
}

/// The ClusterRole of docs/rbac/berth-clusterrole.yaml.
fn documented_role() -> Value {
    let text = std::fs::read_to_string("../docs/rbac/berth-clusterrole.yaml").expect("role file");
    serde_saphyr::from_str(&text).expect("role YAML")
}

#[test]
fn least_privilege_the_documented_role_is_enough() {
    let s = Setup::training(&[]);
    let kubeconfig = service_account_kubeconfig(&s.fleet, documented_role());
    let run = |args: &[&str]| berth(&s.fleet, &kubeconfig, args);
    let base = ["--spec", s.spec()];
    let with = |verb: &'static str, extra: &[&'static str]| {
        let mut args = vec![verb, s.plan()];
        args.extend_from_slice(&base);
        args.extend_from_slice(extra);
        run(&args)
    };
    let (code, _, err) = with("apply", &["--prune", "--wait", "--timeout", "240"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = with("diff", &[]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = with("apply", &["--prune"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("0 changed"), "{err}");
    let (code, out, err) = with("status", &[]);
    assert_eq!(code, 0, "{err}\n{out}");
    // The writes were the service account's own.
    let writes = s
        .prod()
        .writes_by("system:serviceaccount:berth-system:berth");
    assert!(
        writes
            .iter()
            .any(|w| w.contains("/deployments/chat-assistant")),
        "{writes:?}"
    );
}

#[test]
fn least_privilege_a_missing_verb_is_named() {
    let s = Setup::training(&[]);
    let mut role = documented_role();
    role["metadata"]["name"] = json!("berth-without-job-patch");
    for rule in role["rules"].as_array_mut().expect("rules") {
        if rule["resources"] == json!(["jobs"]) {
            rule["verbs"] = json!(["get", "list", "watch", "delete"]);
        }
    }
    let kubeconfig = service_account_kubeconfig(&s.fleet, role);
    let (code, _, err) = berth(
        &s.fleet,
        &kubeconfig,
        &["apply", s.plan(), "--spec", s.spec()],
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("forbidden: may not `patch` `jobs.batch` in namespace `burst`"),
        "{err}"
    );
    // The other cluster, and the rest of this one, are applied regardless.
    assert!(s.prod().get(CHAT).is_some());
}

/// The fleet's kubeconfig with `context` sent through `proxy`.
fn through_proxy(s: &Setup, context: &str, proxy: &cluster::fault_proxy::FaultProxy) -> PathBuf {
    let servers: Vec<(String, String, PathBuf, String)> = s
        .fleet
        .clusters
        .iter()
        .map(|c| {
            let server = if c.context == context {
                proxy.server()
            } else {
                c.server()
            };
            (
                c.context.clone(),
                server,
                c.pki.ca_cert.clone(),
                c.berth_token.clone(),
            )
        })
        .collect();
    let refs: Vec<(&str, &str, &Path, &str)> = servers
        .iter()
        .map(|(c, s, ca, t)| (c.as_str(), s.as_str(), ca.as_path(), t.as_str()))
        .collect();
    let path = s
        .fleet
        .dir
        .join(format!("proxied-{}.kubeconfig", proxy.port));
    std::fs::write(&path, cluster::kubeconfig(&refs)).expect("write kubeconfig");
    path
}

#[test]
fn faults_before_the_real_server_are_retried_and_a_rerun_converges() {
    use cluster::fault_proxy::{Fault, FaultKind, FaultProxy};
    let s = Setup::training(&[]);
    let proxy = FaultProxy::start(s.prod());
    let kubeconfig = through_proxy(&s, "fra-gpu-prod", &proxy);
    let apply = |extra: &[&str]| {
        let mut args = vec!["apply", s.plan(), "--spec", s.spec()];
        args.extend_from_slice(extra);
        berth(&s.fleet, &kubeconfig, &args)
    };
    let fault = |method, path: &str, kind, times, after_writes| Fault {
        method,
        path: Some(path.to_string()),
        kind,
        times,
        after_writes,
    };
    // Throttling (honouring Retry-After) and server errors, twice each: retried.
    proxy.inject(fault(
        Some("PATCH"),
        "/configmaps/",
        FaultKind::Throttle {
            retry_after_seconds: 1,
        },
        2,
        0,
    ));
    proxy.inject(fault(
        Some("PATCH"),
        "/deployments/",
        FaultKind::Status(500),
        2,
        0,
    ));
    proxy.inject(fault(
        Some("PATCH"),
        "/services/",
        FaultKind::Status(503),
        2,
        0,
    ));
    let started = std::time::Instant::now();
    let (code, _, err) = apply(&[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "waited as asked"
    );
    let patches = proxy
        .log()
        .iter()
        .filter(|l| l.starts_with("PATCH"))
        .count();
    assert!(
        patches >= 3 + 6,
        "retried: {patches} patches\n{:?}",
        proxy.log()
    );
    assert!(s.prod().get(CHAT).is_some());

    // A server that never recovers: the attempts run out, exit 1, the object named. (An
    // existing object is first applied as a dry run, to write only what changes.)
    proxy.inject(fault(
        Some("PATCH"),
        "/services/",
        FaultKind::Status(500),
        u32::MAX,
        0,
    ));
    let (code, _, err) = apply(&[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(
            "failed           Service ml/chat-assistant: server answered 500 on all 5 attempts"
        ),
        "{err}"
    );
    proxy.clear_faults();

    // A connection lost after three writes: what was not sent is listed, a rerun converges.
    let answer = s.prod().request(
        "DELETE",
        "/api/v1/namespaces/ml/configmaps/chat-assistant-placement",
        None,
    );
    assert_eq!(answer.status, 200, "{:?}", answer.body);
    let answer = s.prod().request("DELETE", CHAT, None);
    assert_eq!(answer.status, 200, "{:?}", answer.body);
    let writes = proxy.log().len();
    proxy.inject(Fault {
        method: None,
        path: None,
        kind: FaultKind::Drop,
        times: u32::MAX,
        after_writes: 0,
    });
    let (code, _, err) = apply(&["--concurrency", "1"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("not applied"), "{err}");
    assert!(proxy.log().len() > writes, "requests reached the proxy");
    proxy.clear_faults();
    let (code, _, err) = apply(&[]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("created"), "{err}");
    let (code, _, err) = apply(&[]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("0 changed"), "{err}");

    // A slow server: every answer 300 ms late, still applied.
    proxy.inject(Fault {
        method: None,
        path: None,
        kind: FaultKind::Delay(Duration::from_millis(300)),
        times: u32::MAX,
        after_writes: 0,
    });
    let (code, _, err) = apply(&["--prune"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("0 changed"), "{err}");
}

/// The benchmark of docs/performance.md: 1,000 objects across 4 real clusters, applied,
/// then applied again (no-op).
/// `cargo test -p berth-runtime --test k8s_cluster bench_ -- --ignored --nocapture`
/// (`BERTH_BENCH_CONCURRENCY`, default 16).
#[test]
#[ignore = "benchmark: run explicitly"]
fn bench_apply_1000_objects_across_4_real_clusters() {
    use berth_runtime::backends::k8s::apply::{Options, apply_all};
    use berth_runtime::backends::k8s::kubeconfig::Kubeconfigs;
    use berth_runtime::backends::k8s::render::{ClusterManifests, Kind, Manifest, Rendered};
    let specs: Vec<(String, Vec<cluster::nodes::NodeSpec>)> = (0..4)
        .map(|i| (format!("cluster-{i}"), Vec::new()))
        .collect();
    let fleet = Fleet::start(&specs, &[]);
    let concurrency: usize = std::env::var("BERTH_BENCH_CONCURRENCY")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16);
    let managed = json!({"app.kubernetes.io/managed-by": "berth", "berth.dev/target": "t"});
    let clusters = specs
        .iter()
        .map(|(context, _)| {
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
        lock: berth_runtime::backends::k8s::lock::LockOptions {
            timeout: std::time::Duration::from_secs(60),
            force: false,
        },
        announce: false,
    };
    let kubeconfigs = std::sync::Arc::new(Kubeconfigs::from_paths(std::slice::from_ref(
        &fleet.kubeconfig,
    )));
    for round in ["first apply", "no-op apply"] {
        let start = std::time::Instant::now();
        let reports =
            cluster::runtime().block_on(apply_all(&rendered, options, kubeconfigs.clone(), false));
        let elapsed = start.elapsed();
        let objects: usize = reports.iter().map(|r| r.objects.len()).sum();
        assert_eq!(objects, 1000);
        assert!(reports.iter().all(|r| r.error.is_none()));
        eprintln!(
            "{round}: {objects} objects on 4 real clusters, concurrency {concurrency}: {elapsed:?}"
        );
    }
}

/// Plan-to-Ready through the command line for the flagship example's Kubernetes placements:
/// `berth plan` then `berth apply --wait`, timed.
/// `cargo test -p berth-runtime --test k8s_cluster bench_ -- --ignored --nocapture`
#[test]
#[ignore = "benchmark: run explicitly"]
fn bench_plan_to_ready_three_plants() {
    let spec = Path::new("../examples/three-plants");
    let planned = plan_spec(spec);
    let fleet = Fleet::for_ir(&planned.ir, &[]);
    let dir = tempfile::tempdir().expect("temp dir");
    let plan = dir.path().join("plan.json");
    let plan = plan.to_str().expect("utf-8");
    let spec = spec.to_str().expect("utf-8");
    let start = std::time::Instant::now();
    let (code, _, err) = berth(&fleet, &fleet.kubeconfig, &["plan", spec, "-o", plan]);
    assert_eq!(code, 0, "{err}");
    let planned_at = start.elapsed();
    let (code, _, err) = berth(
        &fleet,
        &fleet.kubeconfig,
        &[
            "approve",
            plan,
            "--key",
            "../examples/three-plants/keys/platform-leads.key",
            "--spec",
            spec,
        ],
    );
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = berth(
        &fleet,
        &fleet.kubeconfig,
        &["apply", plan, "--spec", spec, "--wait", "--timeout", "300"],
    );
    assert!(code == 0 || err.contains("rolled out"), "{err}");
    eprintln!(
        "three-plants: planned in {planned_at:?}, Kubernetes placements ready {:?} after `berth plan` started\n{err}",
        start.elapsed()
    );
}

#[test]
fn wait_reports_what_did_not_roll_out_when_the_timeout_ends() {
    // Clusters whose nodes are gone: the real scheduler binds nothing, nothing becomes
    // ready.
    let planned = plan_spec(Path::new(TRAINING));
    let specs: Vec<(String, Vec<cluster::nodes::NodeSpec>)> = cluster::nodes::contexts(&planned.ir)
        .into_iter()
        .map(|c| (c, Vec::new()))
        .collect();
    let s = Setup {
        fleet: Fleet::start(&specs, &[]),
        planned,
    };
    let (code, _, err) = s.berth(&[
        "approve",
        s.plan(),
        "--key",
        TRAINING_APPROVER,
        "--spec",
        s.spec(),
    ]);
    assert_eq!(code, 0, "{err}");
    // Without nodes the drift guard refuses the plan (no pool can hold anything); this test
    // is about the wait, so it applies all the same.
    let (code, _, err) = s.apply(&[]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("the nodes allocate 0: 0 free"), "{err}");
    let started = std::time::Instant::now();
    let (code, _, err) = s.apply(&["--wait", "--timeout", "3", "--allow-drift"]);
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
        started.elapsed() < Duration::from_secs(20),
        "the timeout ends the wait"
    );
    // And `status` says why: the scheduler found no node, the pods wait for GPUs.
    s.prod().wait_for(
        "status listing the waiting pods",
        Duration::from_secs(60),
        || {
            let (code, out, _) =
                s.berth(&["--output", "json", "status", s.plan(), "--spec", s.spec()]);
            let doc: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
            code == 1
                && doc["clusters"].as_array().into_iter().flatten().any(|c| {
                    c["context"] == "fra-gpu-prod"
                        && c["pending_gpu_pods"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .any(|p| p["workload"] == "chat_assistant")
                })
        },
    );
}

#[test]
fn a_changed_job_template_is_not_replaced_when_the_job_is_not_berths() {
    let s = Setup::training(&[]);
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}});
    assert_eq!(
        s.prod()
            .request("POST", "/api/v1/namespaces", Some(ns))
            .status,
        201
    );
    let job = "/apis/batch/v1/namespaces/ml/jobs/llm-finetune";
    let theirs = json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "llm-finetune", "namespace": "ml"},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "theirs", "image": "theirs:1"}]}}}});
    let answer = s.prod().apply_as_manager("kubectl", job, theirs, true);
    assert_eq!(answer.status, 201, "{:?}", answer.body);
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
    let live = s.prod().get(job).expect("still there");
    assert_eq!(
        live["spec"]["template"]["spec"]["containers"][0]["image"],
        "theirs:1"
    );
    assert!(
        !s.prod()
            .writes_by(BERTH)
            .iter()
            .any(|w| w.starts_with("delete")),
        "nothing deleted"
    );
}

#[test]
fn rejected_credentials_are_reported_and_never_printed() {
    let s = Setup::training(&[]);
    // The prod cluster's user has a token the server does not accept; two files merged, as
    // kubectl merges them.
    const WRONG: &str = "wr0ng-t0ken-also-secret";
    let prod = s.prod();
    let burst = s.burst();
    let wrong = s.fleet.dir.join("wrong.kubeconfig");
    std::fs::write(
        &wrong,
        cluster::kubeconfig(&[(&prod.context, &prod.server(), &prod.pki.ca_cert, WRONG)]),
    )
    .expect("write");
    let right = s.fleet.dir.join("right.kubeconfig");
    std::fs::write(
        &right,
        cluster::kubeconfig(&[(
            &burst.context,
            &burst.server(),
            &burst.pki.ca_cert,
            &burst.berth_token,
        )]),
    )
    .expect("write");
    let merged = std::env::join_paths([&wrong, &right]).expect("paths");
    for output in ["human", "json"] {
        let (code, out, err) = berth(
            &s.fleet,
            Path::new(&merged),
            &["--output", output, "apply", s.plan(), "--spec", s.spec()],
        );
        let all = format!("{out}{err}");
        assert_eq!(code, 1, "{all}");
        assert!(
            all.contains("the server did not accept the credentials"),
            "{all}"
        );
        assert!(!all.contains(WRONG), "credentials in the output:\n{all}");
    }
    assert!(
        s.burst().get(RANKER).is_some(),
        "the other cluster is applied"
    );
}

/// Serves `body` as a DCGM exporter's `/metrics` on loopback (dcgm-exporter needs GPUs and
/// DCGM, so the test serves the exporter's documented output: `DCGM_FI_DEV_GPU_UTIL` per GPU
/// with the `namespace`, `pod` and `container` labels it attaches on Kubernetes).
fn serve_dcgm(body: String) -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut stream = stream;
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

/// A DCGM exporter's metrics for `pods` (as the API server lists them): one GPU per pod of
/// a workload `utilization` gives a value, at that value, with the labels dcgm-exporter
/// attaches on Kubernetes; no series for the others.
fn dcgm_metrics(pods: &[Value], utilization: impl Fn(&str) -> Option<u32>) -> String {
    let mut body = String::from(
        "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n",
    );
    let mut gpu = 0;
    for pod in pods {
        let name = pod["metadata"]["name"].as_str().unwrap_or_default();
        let namespace = pod["metadata"]["namespace"].as_str().unwrap_or_default();
        let workload = pod["metadata"]["labels"]["berth.dev/workload"]
            .as_str()
            .unwrap_or_default();
        let Some(value) = utilization(workload) else {
            continue;
        };
        body.push_str(&format!(
            "DCGM_FI_DEV_GPU_UTIL{{gpu=\"{gpu}\",UUID=\"GPU-{gpu}\",device=\"nvidia{gpu}\",modelName=\"NVIDIA L40S\",Hostname=\"node\",container=\"c\",namespace=\"{namespace}\",pod=\"{name}\"}} {value}\n"
        ));
        gpu += 1;
    }
    body
}

/// `berth top` on the real control plane: per pool the GPUs the scheduler bound, per workload
/// and identity what it holds, utilisation from the DCGM exporter's per-pod series (an idle
/// allocation flagged), and an exporter that does not answer shown as unreachable while the
/// rest is still shown.
#[test]
fn top_shows_who_holds_the_gpus_and_flags_the_idle() {
    let s = Setup::training(&[]);
    let (code, _, err) = s.apply(&["--wait", "--timeout", "240"]);
    assert_eq!(code, 0, "{err}");
    let pods = s.prod().list("/api/v1/namespaces/ml/pods");
    let port = serve_dcgm(dcgm_metrics(&pods, |workload| match workload {
        "chat_assistant" => Some(91),
        "search_embeddings" => Some(2),
        _ => None,
    }));
    let dcgm = format!("fra-gpu-prod=http://127.0.0.1:{port}/metrics");
    let (code, out, err) = s.berth(&[
        "--output",
        "json",
        "top",
        s.plan(),
        "--spec",
        s.spec(),
        "--dcgm",
        &dcgm,
    ]);
    assert_eq!(code, 0, "{err}");
    let doc: Value = serde_json::from_str(&out).expect("json");
    let allocation = |workload: &str| {
        doc["allocations"]
            .as_array()
            .expect("allocations")
            .iter()
            .find(|a| a["workload"] == workload)
            .unwrap_or_else(|| panic!("no {workload}: {doc:#}"))
            .clone()
    };
    let chat = allocation("chat_assistant");
    let chat_pods = pods
        .iter()
        .filter(|p| p["metadata"]["labels"]["berth.dev/workload"] == "chat_assistant")
        .count();
    assert_eq!(chat["gpus"], chat_pods as i64, "{doc:#}");
    assert_eq!(chat["utilization"], 91.0);
    assert_eq!(chat["idle"], false);
    assert_eq!(chat["identity"], "service_account(\"support-chat\")");
    let search = allocation("search_embeddings");
    assert_eq!(search["idle"], true, "{doc:#}");
    let serve = doc["pools"]
        .as_array()
        .expect("pools")
        .iter()
        .find(|p| p["target"] == "dc_frankfurt" && p["pool"] == "serve")
        .expect("serve pool")
        .clone();
    assert_eq!(serve["total"], 8);
    assert_eq!(
        serve["allocated"].as_i64(),
        Some(chat["gpus"].as_i64().unwrap_or(0) + search["gpus"].as_i64().unwrap_or(0))
    );
    let identity = doc["identities"]
        .as_array()
        .expect("identities")
        .iter()
        .find(|i| i["identity"] == "service_account(\"support-chat\")")
        .expect("identity row")
        .clone();
    assert_eq!(identity["gpus"], chat["gpus"]);

    // For people, once: the same, with the idle allocation marked.
    let (code, out, err) = s.berth(&[
        "top",
        s.plan(),
        "--spec",
        s.spec(),
        "--dcgm",
        &dcgm,
        "--once",
    ]);
    assert_eq!(code, 0, "{err}");
    let line = out
        .lines()
        .find(|l| l.contains("search_embeddings"))
        .expect("a row");
    assert!(line.trim_end().ends_with("idle"), "{out}");

    // An exporter that does not answer: said so, exit 1, the clusters' figures still there;
    // the credentials in its URL shown nowhere.
    let (code, out, err) = s.berth(&[
        "--output",
        "json",
        "top",
        s.plan(),
        "--spec",
        s.spec(),
        "--dcgm",
        "fra-gpu-prod=http://scraper:dcgm-s3cret@127.0.0.1:9/metrics",
    ]);
    assert_eq!(code, 1);
    assert!(
        !out.contains("dcgm-s3cret") && !err.contains("dcgm-s3cret"),
        "{out}{err}"
    );
    let doc: Value = serde_json::from_str(&out).expect("json");
    assert!(
        doc["sources"]
            .as_array()
            .expect("sources")
            .iter()
            .any(|src| src["kind"] == "dcgm" && src["state"] != "reachable"),
        "{doc:#}"
    );
    assert!(doc["allocations"].as_array().is_some_and(|a| !a.is_empty()));
}

/// The drift guard on the real control plane: another team's pod, bound by the real scheduler
/// to the serving pool, holds 4 of its 8 GPUs; the saved plan places 6 there, so `apply`
/// refuses before writing anything, naming the pool, what the plan assumed and what is live;
/// `--allow-drift` applies all the same.
#[test]
fn the_drift_guard_refuses_a_plan_the_cluster_can_no_longer_hold() {
    let s = Setup::training(&[]);
    let prod = s.prod();
    intruder(prod, &json!({}));
    let (code, _, err) = s.apply(&[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(
            "pool `dc_frankfurt/serve` cannot hold the plan's placements: the plan places 6 GPUs \
             and assumed 8 allocatable; live, the nodes allocate 8 and pods it does not place \
             hold 4 (`other/intruder`): 4 free"
        ),
        "{err}"
    );
    assert!(err.contains("--allow-drift"), "{err}");
    assert!(prod.get(CHAT).is_none(), "nothing applied");
    assert!(prod.writes_by(BERTH).is_empty(), "no write at all");
    let (code, _, err) = s.apply(&["--allow-drift"]);
    assert_eq!(code, 0, "{err}");
    assert!(prod.get(CHAT).is_some());
}

/// `berth --output OUTPUT reclaim PLAN --spec SPEC --dcgm DCGM EXTRA…`.
fn reclaim_args<'a>(
    planned: &'a Planned,
    dcgm: &'a str,
    output: &'a str,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut args = vec![
        "--output",
        output,
        "reclaim",
        planned.plan_arg(),
        "--spec",
        planned.spec_arg(),
        "--dcgm",
        dcgm,
    ];
    args.extend_from_slice(extra);
    args
}

/// Another team's pod `other/intruder` (labelled `labels`), bound by the real scheduler to
/// the serving pool of `prod`, holding 4 of its 8 GPUs.
fn intruder(prod: &Cluster, labels: &Value) {
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}});
    assert_eq!(
        prod.request("POST", "/api/v1/namespaces", Some(namespace))
            .status,
        201
    );
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "intruder", "namespace": "other", "labels": labels},
        "spec": {
            "nodeSelector": {"gpu.example.com/pool": "inference"},
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "c", "image": "registry.example.com/other:1",
                            "resources": {"limits": {"nvidia.com/gpu": "4"}}}],
        },
    });
    let answer = prod.request("POST", "/api/v1/namespaces/other/pods", Some(pod));
    assert_eq!(answer.status, 201, "{:?}", answer.body);
    prod.wait_for("the intruder bound", Duration::from_secs(60), || {
        prod.get("/api/v1/namespaces/other/pods/intruder")
            .is_some_and(|p| p["spec"]["nodeName"].is_string())
    });
}

/// A pool's ledger in a plan: (capacity assumed, GPUs allocated).
fn pool_ledger(plan: &Value, target: &str, pool: &str) -> (u64, u64) {
    let ledger = plan["pools"]
        .as_array()
        .expect("pools")
        .iter()
        .find(|l| l["target"] == target && l["pool"] == pool)
        .unwrap_or_else(|| panic!("no ledger for {target}/{pool}"));
    (
        ledger["capacity"].as_u64().expect("capacity"),
        ledger["allocated"].as_u64().expect("allocated"),
    )
}

/// `berth plan --live` on the real control plane: another team's pod holds 4 of the serving
/// pool's 8 GPUs. Without `--live` the plan ignores it (6 GPUs placed there, 8 assumed); with
/// it the pool holds 4 for berth, the plan places no more there, its ledger records the 4
/// it assumed, stderr and the plan's reasons name the live figures; the same live figures
/// give the same bytes; and the drift guard accepts the `--live` plan.
#[test]
fn plan_live_places_against_what_other_pods_hold() {
    let s = Setup::training(&[]);
    let prod = s.prod();
    intruder(prod, &json!({"team": "other"}));
    let dir = tempfile::tempdir().expect("temp dir");
    let plan_file = |name: &str| dir.path().join(name).to_str().expect("UTF-8").to_string();
    let (declared, live, again) = (
        plan_file("d.json"),
        plan_file("l.json"),
        plan_file("a.json"),
    );

    let (code, _, err) = s.berth(&["plan", s.spec(), "--at", AT, "-o", &declared]);
    assert_eq!(code, 0, "{err}");
    let plan: Value =
        serde_json::from_str(&std::fs::read_to_string(&declared).expect("plan")).expect("json");
    assert_eq!(
        pool_ledger(&plan, "dc_frankfurt", "serve"),
        (8, 6),
        "{plan:#}"
    );

    let (code, _, err) = s.berth(&["plan", s.spec(), "--at", AT, "--live", "-o", &live]);
    assert!(
        err.contains(
            "live: pool `dc_frankfurt/serve`: 8 allocatable, 4 held by pods berth does not \
             manage; capacity 4 for this plan, 4 placed"
        ),
        "{err}"
    );
    let plan: Value =
        serde_json::from_str(&std::fs::read_to_string(&live).expect("plan")).expect("json");
    assert_eq!(
        pool_ledger(&plan, "dc_frankfurt", "serve"),
        (4, 4),
        "{plan:#}"
    );
    assert_eq!(pool_ledger(&plan, "burst_cloud", "h100").0, 16, "{plan:#}");
    // The assistant keeps 2 replicas on the serving pool and moves 2 to the training pool,
    // which the fine-tune is isolated from: it is left out, and the plan says why.
    let workload = |name: &str| {
        plan["workloads"]
            .as_array()
            .expect("workloads")
            .iter()
            .find(|w| w["workload"] == name)
            .cloned()
            .expect("workload")
    };
    let pools: Vec<(String, u64)> = workload("chat_assistant")["placements"]
        .as_array()
        .expect("placements")
        .iter()
        .map(|p| {
            (
                p["pool"].as_str().expect("pool").to_string(),
                p["replicas"].as_u64().expect("n"),
            )
        })
        .collect();
    assert_eq!(
        pools,
        [("train".to_string(), 2), ("serve".to_string(), 2)],
        "{plan:#}"
    );
    let finetune = workload("llm_finetune");
    assert_eq!(finetune["unplaced"]["missing_replicas"], 1, "{finetune:#}");
    assert_eq!(
        code, 1,
        "a replica is missing: the plan is infeasible, and saved: {err}"
    );
    // The audit trail keeps the figures the saved plan was made against.
    let (code, out, err) = s.berth(&["audit", "--jsonl"]);
    assert_eq!(code, 0, "{err}");
    let saved: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .filter(|r: &Value| r["action"] == "plan_saved")
        .collect();
    let last = saved.last().expect("the --live plan's record");
    assert_eq!(
        last["detail"]["live"]["dc_frankfurt/serve"],
        json!({"allocatable": 8, "held": 4}),
        "{last:#}"
    );
    assert!(saved[0]["detail"]["live"].is_null(), "{:#}", saved[0]);
    // `explain --live` explains that plan.
    let (_, out, err) = s.berth(&["explain", s.spec(), "llm_finetune", "--at", AT, "--live"]);
    assert!(
        err.contains("live: pool `dc_frankfurt/serve`: 8 allocatable"),
        "{err}"
    );
    assert!(
        out.contains("holds `chat_assistant`, which `llm_finetune` is isolated from"),
        "{out}\n{err}"
    );

    let (code, _, err) = s.berth(&["plan", s.spec(), "--at", AT, "--live", "-o", &again]);
    assert!(code == 0 || code == 1, "{err}");
    assert_eq!(
        std::fs::read(&live).expect("live"),
        std::fs::read(&again).expect("again"),
        "the same live figures give the same plan"
    );

    let (code, out, err) = s.berth(&["verify", &live, "--spec", s.spec()]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, _, err) = s.berth(&[
        "approve",
        &live,
        "--key",
        TRAINING_APPROVER,
        "--spec",
        s.spec(),
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = s.berth(&[
        "apply",
        &live,
        "--spec",
        s.spec(),
        "--wait",
        "--timeout",
        "240",
    ]);
    assert_eq!(code, 0, "the drift guard accepts the --live plan: {err}");
    assert!(!err.contains("cannot hold"), "{err}");
    // One Deployment per pool the assistant is placed on.
    let deployments = prod
        .get("/apis/apps/v1/namespaces/ml/deployments")
        .expect("deployments");
    let chat: Vec<&str> = deployments["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|d| d["metadata"]["name"].as_str())
        .filter(|n| n.starts_with("chat-assistant"))
        .collect();
    assert_eq!(chat.len(), 2, "{chat:?}");

    // berth's own pods of this spec, now bound to the serving pool, are what a new plan
    // replaces: they do not count as held, and the same figures give the same plan.
    let (_, _, err) = s.berth(&["plan", s.spec(), "--at", AT, "--live", "-o", &again]);
    assert!(
        err.contains(
            "live: pool `dc_frankfurt/serve`: 8 allocatable, 4 held by pods berth does not \
             manage; capacity 4 for this plan, 4 placed"
        ),
        "{err}"
    );
    assert_eq!(
        std::fs::read(&live).expect("live"),
        std::fs::read(&again).expect("again"),
        "berth's own pods hold nothing for the next plan"
    );

    // A context that cannot be read is named on stderr, and its targets keep the capacity
    // the spec declares: the plan is the plan without `--live`.
    let nowhere = dir.path().join("no-kubeconfig");
    let (code, _, err) = berth(
        &s.fleet,
        &nowhere,
        &["plan", s.spec(), "--at", AT, "--live", "-o", &again],
    );
    assert_eq!(code, 0, "{err}");
    for context in ["eks-gpu-burst", "fra-gpu-prod"] {
        assert!(
            err.contains(&format!(
                "warning: `--live` could not read context `{context}`"
            )),
            "{err}"
        );
    }
    assert!(
        err.contains("`dc_frankfurt` planned with the capacity the spec declares"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(&declared).expect("declared"),
        std::fs::read(&again).expect("again"),
    );

    // Credentials the prod server refuses: that context is named, never the token, and the
    // other cluster is still read.
    const WRONG: &str = "wr0ng-t0ken-also-secret";
    let burst = s.burst();
    let kubeconfig = dir.path().join("wrong.kubeconfig");
    std::fs::write(
        &kubeconfig,
        cluster::kubeconfig(&[
            (&prod.context, &prod.server(), &prod.pki.ca_cert, WRONG),
            (
                &burst.context,
                &burst.server(),
                &burst.pki.ca_cert,
                &burst.berth_token,
            ),
        ]),
    )
    .expect("write");
    let (_, out, err) = berth(
        &s.fleet,
        &kubeconfig,
        &["plan", s.spec(), "--at", AT, "--live", "-o", &again],
    );
    assert!(
        err.contains("warning: `--live` could not read context `fra-gpu-prod`"),
        "{err}"
    );
    assert!(err.contains("live: pool `burst_cloud/h100`"), "{err}");
    assert!(!format!("{out}{err}").contains(WRONG), "{err}");
    let plan: Value =
        serde_json::from_str(&std::fs::read_to_string(&again).expect("plan")).expect("json");
    assert_eq!(pool_ledger(&plan, "dc_frankfurt", "serve").0, 8, "{plan:#}");
}

const LAB: &str = "../tests/data/reclaim";
const IDLE_NOTEBOOK: &str = "/apis/apps/v1/namespaces/lab/statefulsets/idle-notebook";

/// `berth reclaim` on the real control plane, against an exporter serving each pod's GPU at
/// the utilisation of its workload (data: busy, idle, or no series at all): one run sees one
/// sample and reclaims nothing; watched for less than the rule's 4 s, nothing either; a dry
/// run past it says what it would reclaim and writes nothing; then the idle notebook's
/// StatefulSet is scaled to 0, with the samples that show it idle for the window in its
/// event, while the busy notebook, the one without metrics (said so) and the exempt service
/// are kept. An identity that may not patch StatefulSets fails the reclaim, named (exit 1). The experiment's Job has completed (KWOK completes Jobs' pods): it holds no GPU,
/// so reclaim neither deletes nor lists it.
#[test]
fn reclaim_scales_idle_notebooks_to_zero_after_their_threshold_and_keeps_the_rest() {
    let planned = plan_spec(Path::new(LAB));
    let fleet = Fleet::for_ir(&planned.ir, &[]);
    let run = |args: &[&str]| berth(&fleet, &fleet.kubeconfig, args);
    let (code, _, err) = run(&[
        "apply",
        planned.plan_arg(),
        "--spec",
        planned.spec_arg(),
        "--wait",
        "--timeout",
        "240",
    ]);
    assert_eq!(code, 0, "{err}");
    let lab = fleet.cluster("lab-gpu");
    let pods = lab.list("/api/v1/namespaces/lab/pods");
    let utilization = |workload: &str| match workload {
        "busy_notebook" => Some(87),
        "quiet_notebook" => None,
        _ => Some(0),
    };
    let port = serve_dcgm(dcgm_metrics(&pods, utilization));
    let dcgm = format!("lab-gpu=http://127.0.0.1:{port}/metrics");
    let reclaim_as = |kubeconfig: &Path, output: &str, extra: &[&str]| {
        berth(
            &fleet,
            kubeconfig,
            &reclaim_args(&planned, &dcgm, output, extra),
        )
    };
    let reclaim = |output: &str, extra: &[&str]| reclaim_as(&fleet.kubeconfig, output, extra);
    let rounds = |out: &str| -> Vec<Value> {
        out.lines()
            .map(|l| serde_json::from_str(l).expect("one JSON document per round"))
            .collect()
    };
    let kept = |round: &Value, workload: &str| -> Value {
        round["kept"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|k| k["workload"] == workload)
            .cloned()
            .unwrap_or_else(|| panic!("{workload} not kept: {round:#}"))
    };
    let reclaimed = |docs: &[Value]| -> Vec<Value> {
        docs.iter()
            .flat_map(|d| d["reclaimed"].as_array().cloned().unwrap_or_default())
            .collect()
    };
    let replicas = |path: &str| lab.get(path).expect(path)["spec"]["replicas"].clone();
    let writes = lab.writes_by(BERTH).len();

    // One run: one sample is no window. Each workload holding GPUs gets its verdict.
    let (code, out, err) = reclaim("json", &[]);
    assert_eq!(code, 0, "{err}");
    let docs = rounds(&out);
    assert_eq!(docs.len(), 1, "{out}");
    assert!(reclaimed(&docs).is_empty(), "{out}");
    let idle = kept(&docs[0], "idle_notebook");
    assert_eq!(idle["reason"], "idle_not_yet", "{idle}");
    assert_eq!(idle["one_sample"], true);
    assert_eq!(idle["idle_after_s"], 4.0);
    assert_eq!(kept(&docs[0], "busy_notebook")["reason"], "busy");
    let quiet = kept(&docs[0], "quiet_notebook");
    assert_eq!(quiet["reason"], "no_metrics", "{quiet}");
    assert_eq!(quiet["pods"], json!(["quiet-notebook-0"]));
    assert_eq!(kept(&docs[0], "idle_server")["reason"], "exempt");
    assert!(
        docs[0]["kept"]
            .as_array()
            .is_some_and(|k| k.iter().all(|k| k["workload"] != "idle_sweep")),
        "a completed Job holds no GPU: {out}"
    );
    // For people, the same verdicts, the missing metrics said so.
    let (code, out, err) = reclaim("human", &[]);
    assert_eq!(code, 0, "{err}");
    let line = out
        .lines()
        .find(|l| l.contains("`quiet_notebook`"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        line.contains("missing metrics are never idleness"),
        "{line}"
    );

    // Watched for less than the threshold: nothing reclaimed.
    let (code, out, err) = reclaim("json", &["--watch", "--interval", "0.5", "--rounds", "3"]);
    assert_eq!(code, 0, "{err}");
    let docs = rounds(&out);
    assert_eq!(docs.len(), 3);
    assert!(reclaimed(&docs).is_empty(), "{out}");
    assert_eq!(kept(&docs[2], "idle_notebook")["one_sample"], false);

    // A dry run past the threshold: what it would do, and no write.
    let past = ["--watch", "--interval", "0.5", "--rounds", "14"];
    let mut dry = vec!["--dry-run"];
    dry.extend_from_slice(&past);
    let (code, out, err) = reclaim("json", &dry);
    assert_eq!(code, 0, "{err}");
    let events = reclaimed(&rounds(&out));
    assert_eq!(events.len(), 1, "{out}");
    assert_eq!(events[0]["workload"], "idle_notebook");
    assert_eq!(events[0]["result"], "would_reclaim");
    assert_eq!(
        lab.writes_by(BERTH).len(),
        writes,
        "no write before the real run"
    );
    assert_eq!(replicas(IDLE_NOTEBOOK), 1);

    // As the documented role without `patch` on StatefulSets: the reclaim fails, named, and
    // the run exits 1; the notebook is still up.
    let mut role = documented_role();
    role["metadata"]["name"] = json!("berth-without-statefulset-patch");
    for rule in role["rules"].as_array_mut().expect("rules") {
        if rule["resources"] == json!(["deployments", "statefulsets"]) {
            rule["verbs"] = json!(["get", "list", "watch", "create", "delete"]);
        }
    }
    let limited = service_account_kubeconfig(&fleet, role);
    let (code, out, err) = reclaim_as(&limited, "json", &past);
    assert_eq!(code, 1, "{err}\n{out}");
    // Tried again each round while it stays idle: every attempt an event, each failed.
    let events = reclaimed(&rounds(&out));
    assert!(!events.is_empty(), "{out}");
    for event in &events {
        assert_eq!(event["workload"], "idle_notebook");
        assert_eq!(event["result"], "failed");
        let error = event["error"].as_str().expect("the error");
        assert!(
            error.contains("forbidden: may not `patch` `statefulsets.apps` in namespace `lab`"),
            "{error}"
        );
    }
    assert_eq!(replicas(IDLE_NOTEBOOK), 1);

    // For real.
    let (code, out, err) = reclaim("json", &past);
    assert_eq!(code, 0, "{err}");
    let docs = rounds(&out);
    let events = reclaimed(&docs);
    assert_eq!(events.len(), 1, "one reclaim, once: {out}");
    let event = &events[0];
    assert_eq!(event["workload"], "idle_notebook");
    assert_eq!(event["kind"], "StatefulSet");
    assert_eq!(event["action"], "scale_to_zero");
    assert_eq!(event["result"], "reclaimed");
    let held: Vec<&Value> = pods
        .iter()
        .filter(|p| p["metadata"]["labels"]["berth.dev/workload"] == "idle_notebook")
        .collect();
    let gpus: i64 = held
        .iter()
        .map(|p| {
            p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]
                .as_str()
                .and_then(|q| q.parse::<i64>().ok())
                .unwrap_or(0)
        })
        .sum();
    assert!(gpus > 0);
    assert_eq!(event["gpus_freed"], gpus, "{event:#}");
    // The evidence: every sample of every pod at 0%, spanning at least the rule's window,
    // and not reclaimed before that window had passed since the first round.
    let evidence = &event["evidence"];
    assert_eq!(evidence["policy"], "hygiene");
    let after = evidence["idle_after_s"].as_f64().expect("threshold");
    assert_eq!(after, 4.0);
    assert!(
        evidence["idle_for_s"].as_f64().expect("idle") >= after,
        "{event:#}"
    );
    let instant =
        |v: &Value| -> jiff::Timestamp { v.as_str().expect("instant").parse().expect("instant") };
    for pod in evidence["pods"].as_array().expect("pods") {
        let samples = pod["samples"].as_array().expect("samples");
        assert!(samples.len() >= 2, "{pod:#}");
        assert!(samples.iter().all(|s| {
            s["utilization"]
                .as_array()
                .is_some_and(|u| !u.is_empty() && u.iter().all(|u| u == 0.0))
        }));
        let first = instant(&samples[0]["at"]);
        let last = instant(&samples[samples.len() - 1]["at"]);
        assert!(last.duration_since(first).as_secs_f64() >= after, "{pod:#}");
    }
    let first_round = instant(&docs[0]["at"]);
    assert!(
        instant(&event["at"])
            .duration_since(first_round)
            .as_secs_f64()
            >= after
    );
    // The audit trail holds the reclaim, its evidence, and the failed one before it.
    let (code, log, err) = run(&["audit", "--jsonl"]);
    assert_eq!(code, 0, "{err}");
    let audited: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .filter(|r: &Value| r["action"] == "reclaimed")
        .collect();
    let ok = audited
        .iter()
        .find(|r| r["outcome"] == "ok")
        .unwrap_or_else(|| panic!("no reclaim recorded: {log}"));
    assert_eq!(ok["detail"]["object"]["workload"], "idle_notebook", "{ok}");
    assert_eq!(ok["detail"]["gpus_freed"], gpus, "{ok}");
    assert!(
        ok["actor"]
            .as_str()
            .is_some_and(|a| a.starts_with("kubeconfig:")),
        "{ok}"
    );
    assert_eq!(run(&["audit", "--verify"]).0, 0);
    // What changed: the idle notebook's replicas, by one patch; the rest kept.
    assert_eq!(replicas(IDLE_NOTEBOOK), 0);
    for path in [
        "/apis/apps/v1/namespaces/lab/statefulsets/busy-notebook",
        "/apis/apps/v1/namespaces/lab/statefulsets/quiet-notebook",
        "/apis/apps/v1/namespaces/lab/deployments/idle-server",
    ] {
        assert_eq!(replicas(path), 1, "{path}");
    }
    assert!(
        lab.get("/apis/batch/v1/namespaces/lab/jobs/idle-sweep")
            .is_some()
    );
    let new: Vec<String> = lab.writes_by(BERTH).into_iter().skip(writes).collect();
    assert_eq!(new.len(), 1, "{new:?}");
    assert!(
        new[0].starts_with(&format!("patch {IDLE_NOTEBOOK}")),
        "{new:?}"
    );
    let last = docs.last().expect("a round");
    assert_eq!(kept(last, "busy_notebook")["reason"], "busy");
    assert_eq!(kept(last, "quiet_notebook")["reason"], "no_metrics");
    assert_eq!(kept(last, "idle_server")["reason"], "exempt");

    // The environment: an exporter that does not answer, or none given, is exit 2 with a hint.
    let (code, _, err) = run(&[
        "reclaim",
        planned.plan_arg(),
        "--spec",
        planned.spec_arg(),
        "--dcgm",
        "lab-gpu=http://127.0.0.1:9/metrics",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("cannot read the DCGM exporter of cluster `lab-gpu`") && err.contains("help:"),
        "{err}"
    );
    let (code, _, err) = run(&["reclaim", planned.plan_arg(), "--spec", planned.spec_arg()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("no DCGM exporter for cluster `lab-gpu`"),
        "{err}"
    );
    let gone = fleet.dir.join("gone.kubeconfig");
    std::fs::write(
        &gone,
        cluster::kubeconfig(&[(
            "lab-gpu",
            "https://127.0.0.1:9",
            &lab.pki.ca_cert,
            &lab.berth_token,
        )]),
    )
    .expect("write");
    let mut args = vec!["reclaim", planned.plan_arg(), "--spec", planned.spec_arg()];
    args.extend_from_slice(&["--dcgm", &dcgm]);
    let (code, _, err) = berth(&fleet, &gone, &args);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("cannot reach cluster `lab-gpu`") && err.contains("help:"),
        "{err}"
    );
}

const HELD_JOB_SPEC: &str = "../tests/data/reclaim-job";

/// `berth reclaim` deletes a Job whose pods hold GPUs at 0% past the rule's time: KWOK keeps
/// this workload's pods running (`cluster::HELD_JOB_WORKLOAD`), as a stuck training run's
/// would be. A dry run deletes nothing; the real run deletes the Job once, its event counts
/// the GPUs of both pods, and the garbage collector takes the pods, which free their GPUs.
#[test]
fn reclaim_deletes_an_idle_job_whose_pods_still_hold_gpus() {
    let planned = plan_spec(Path::new(HELD_JOB_SPEC));
    let fleet = Fleet::for_ir(&planned.ir, &[]);
    let run = |args: &[&str]| berth(&fleet, &fleet.kubeconfig, args);
    let (code, _, err) = run(&["apply", planned.plan_arg(), "--spec", planned.spec_arg()]);
    assert_eq!(code, 0, "{err}");
    let lab = fleet.cluster("lab-gpu");
    let job = "/apis/batch/v1/namespaces/lab/jobs/running-sweep";
    let sweep_pods = || -> Vec<Value> {
        lab.list("/api/v1/namespaces/lab/pods")
            .into_iter()
            .filter(|p| p["metadata"]["labels"]["berth.dev/workload"] == cluster::HELD_JOB_WORKLOAD)
            .collect()
    };
    lab.wait_for(
        "both pods of the sweep running",
        Duration::from_secs(120),
        || {
            let pods = sweep_pods();
            pods.len() == 2 && pods.iter().all(|p| p["status"]["phase"] == "Running")
        },
    );
    // Still running a while later: KWOK does not complete them.
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        sweep_pods()
            .iter()
            .all(|p| p["status"]["phase"] == "Running")
    );
    let port = serve_dcgm(dcgm_metrics(&sweep_pods(), |_| Some(0)));
    let dcgm = format!("lab-gpu=http://127.0.0.1:{port}/metrics");
    let past = ["--watch", "--interval", "0.5", "--rounds", "8"];
    let reclaim = |extra: &[&str]| {
        let mut args = reclaim_args(&planned, &dcgm, "json", &past);
        args.extend_from_slice(extra);
        let (code, out, err) = run(&args);
        assert_eq!(code, 0, "{err}");
        out.lines()
            .map(|l| serde_json::from_str::<Value>(l).expect("one JSON document per round"))
            .flat_map(|d| d["reclaimed"].as_array().cloned().unwrap_or_default())
            .collect::<Vec<Value>>()
    };
    let writes = lab.writes_by(BERTH).len();
    let events = reclaim(&["--dry-run"]);
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(events[0]["result"], "would_reclaim");
    assert_eq!(events[0]["action"], "delete");
    assert_eq!(
        lab.writes_by(BERTH).len(),
        writes,
        "a dry run writes nothing"
    );
    assert!(lab.get(job).is_some());

    let events = reclaim(&[]);
    assert_eq!(events.len(), 1, "one reclaim, once: {events:#?}");
    let event = &events[0];
    assert_eq!(event["workload"], cluster::HELD_JOB_WORKLOAD);
    assert_eq!(event["kind"], "Job");
    assert_eq!(event["action"], "delete");
    assert_eq!(event["result"], "reclaimed");
    assert_eq!(event["gpus_freed"], 2, "{event:#}");
    assert_eq!(
        event["evidence"]["pods"].as_array().map(Vec::len),
        Some(2),
        "{event:#}"
    );
    assert!(lab.get(job).is_none(), "the Job is gone");
    lab.wait_for(
        "the sweep's pods collected",
        Duration::from_secs(60),
        || sweep_pods().is_empty(),
    );
}

const NIM_SPEC: &str = "../tests/data/nim";

/// Where the NIM Operator runs (`tests/data/nim`): `berth apply` creates a `NIMCache` per
/// `ngc://` or `hf://` model, which the real API server validates against the operator's
/// schema (installed as a CRD, `cluster/nim.rs`), and the Deployments mounting its volume; a
/// re-apply writes nothing; a new model puts a new cache in, and `--prune` takes the old one
/// out.
#[test]
fn nim_operator_caches_are_applied_validated_and_pruned() {
    let planned = plan_spec(Path::new(NIM_SPEC));
    let fleet = Fleet::for_ir(&planned.ir, &[]);
    let cluster = fleet.cluster("nim-cluster");
    cluster::nim::install(cluster);
    let apply = |planned: &Planned, extra: &[&str]| {
        let mut args = vec!["apply", planned.plan_arg(), "--spec", planned.spec_arg()];
        args.extend_from_slice(extra);
        berth(&fleet, &fleet.kubeconfig, &args)
    };
    let (code, _, err) = apply(&planned, &[]);
    assert_eq!(code, 0, "{err}");
    let caches = cluster.list(&cluster::nim::collection("nim"));
    assert_eq!(caches.len(), 2, "{caches:#?}");
    let source = |cache: &Value, kind: &str| cache["spec"]["source"][kind].clone();
    let ngc = caches
        .iter()
        .find(|c| source(c, "ngc").is_object())
        .expect("the NGC cache");
    assert_eq!(
        source(ngc, "ngc")["modelEndpoint"],
        "ngc://nim/meta/llama-3.1-8b-instruct:hf"
    );
    assert_eq!(source(ngc, "ngc")["authSecret"], "ngc-api");
    assert_eq!(
        source(ngc, "ngc")["modelPuller"],
        "nvcr.io/nim/nvidia/llm-nim:1.12.0",
        "the workload's image pulls by default"
    );
    assert_eq!(managers(ngc), vec!["berth"]);
    let hf = caches
        .iter()
        .find(|c| source(c, "hf").is_object())
        .expect("the Hugging Face cache");
    assert_eq!(source(hf, "hf")["namespace"], "meta-llama");
    assert_eq!(source(hf, "hf")["modelName"], "Llama-3.2-1B");
    assert_eq!(
        hf["spec"]["storage"]["pvc"]["volumeAccessMode"],
        "ReadWriteMany"
    );
    assert_eq!(hf["spec"]["storage"]["pvc"]["storageClass"], "shared-rwx");
    // The Deployment mounts the volume the operator creates under the name berth gave it.
    let cache_name = ngc["metadata"]["name"].as_str().expect("name").to_string();
    assert_eq!(ngc["spec"]["storage"]["pvc"]["name"], cache_name.as_str());
    let deployment = cluster
        .get("/apis/apps/v1/namespaces/nim/deployments/llm")
        .expect("deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    let claim = &pod["volumes"][0]["persistentVolumeClaim"];
    assert_eq!(claim["claimName"], cache_name.as_str(), "{pod}");
    assert_eq!(claim["readOnly"], true);
    let mount = &pod["containers"][0]["volumeMounts"][0];
    assert_eq!(mount["mountPath"], "/model-store");
    assert!(pod["initContainers"].is_null(), "no berth fetch: {pod}");
    // The OCI artifact with a digest keeps berth's own staging, verified by `berth fetch`.
    let rerank = cluster
        .get("/apis/apps/v1/namespaces/nim/deployments/rerank")
        .expect("deployment");
    assert_eq!(
        rerank["spec"]["template"]["spec"]["initContainers"][0]["name"],
        "model-staged"
    );
    assert!(
        cluster
            .get("/api/v1/namespaces/nim/persistentvolumeclaims/rerank-model")
            .is_some()
    );

    // The schema is live: a misspelled field is refused under strict field validation, and a
    // cache with two sources by the CRD's own rule.
    let mut wrong = ngc.clone();
    wrong["metadata"] = json!({"name": "wrong", "namespace": "nim"});
    wrong["spec"]["source"]["ngc"]["modelEndPoint"] = json!("ngc://x/y:z");
    let path = format!(
        "{}/wrong?fieldValidation=Strict",
        cluster::nim::collection("nim")
    );
    let answer = cluster.apply_as_manager("test", &path, wrong.clone(), true);
    assert!(
        answer.status >= 400 && answer.body.to_string().contains("modelEndPoint"),
        "{answer:?}"
    );
    wrong["spec"]["source"]["ngc"]
        .as_object_mut()
        .expect("ngc")
        .remove("modelEndPoint");
    wrong["spec"]["source"]["hf"] = source(hf, "hf");
    let answer = cluster.apply_as_manager("test", &path, wrong, true);
    assert!(
        answer.status >= 400 && answer.body.to_string().contains("Exactly one of ngc"),
        "{answer:?}"
    );

    // A re-apply writes nothing.
    let writes = cluster.writes_by(BERTH);
    let (code, _, err) = apply(&planned, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("0 changed"), "{err}");
    assert_eq!(cluster.writes_by(BERTH), writes, "no write the second time");

    // `--wait` follows the caches by the operator's state (the test plays the operator: one
    // cache ready, the other failed); the Deployments cannot roll out here, nothing fills
    // the operator's volumes.
    let hf_name = hf["metadata"]["name"].as_str().expect("name").to_string();
    for (name, status) in [
        (&cache_name, json!({"state": "Ready", "pvc": cache_name})),
        (
            &hf_name,
            json!({"state": "Failed", "conditions": [{"type": "NIM_CACHE_JOB_FAILED",
                "status": "True", "reason": "JobFailed", "message": "the caching job failed",
                "lastTransitionTime": "2025-06-07T10:00:00Z"}]}),
        ),
    ] {
        let path = format!("{}/{name}/status", cluster::nim::collection("nim"));
        let body = json!({"apiVersion": "apps.nvidia.com/v1alpha1", "kind": "NIMCache",
            "metadata": {"name": name, "namespace": "nim"}, "status": status});
        let answer = cluster.apply_as_manager("nim-operator", &path, body, true);
        assert_eq!(answer.status, 200, "{answer:?}");
    }
    let (code, _, err) = apply(&planned, &["--wait", "--timeout", "3"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!(
            "rolled out       NIMCache nim/{cache_name} after "
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!("failed           NIMCache nim/{hf_name} after "))
            && err.contains("the caching job failed"),
        "{err}"
    );
    // `berth status` shows each cache by the operator's state, and a failed one fails it.
    let (code, out, err) = berth(
        &fleet,
        &fleet.kubeconfig,
        &[
            "--output",
            "json",
            "status",
            planned.plan_arg(),
            "--spec",
            planned.spec_arg(),
        ],
    );
    assert_eq!(code, 1, "a failed cache is a problem: {out}\n{err}");
    let doc: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let models: Vec<&Value> = doc["clusters"]
        .as_array()
        .expect("clusters")
        .iter()
        .flat_map(|c| c["models"].as_array().expect("models"))
        .collect();
    let state = |name: &str| {
        models
            .iter()
            .find(|m| m["object"] == format!("NIMCache nim/{name}").as_str())
            .unwrap_or_else(|| panic!("cache `{name}` in {models:#?}"))
    };
    assert_eq!(state(&cache_name)["state"], "staged");
    assert_eq!(state(&hf_name)["state"], "failed");
    assert_eq!(state(&hf_name)["detail"], "the caching job failed");
    assert!(
        state(&cache_name)["model"]
            .as_str()
            .is_some_and(|m| m.starts_with("llama")),
        "{models:#?}"
    );

    // A new model: a new cache, and the old one pruned.
    let spec = tempfile::tempdir().expect("temp dir");
    let text = std::fs::read_to_string(Path::new(NIM_SPEC).join("nim.berth")).expect("spec");
    let text = text.replace("llama-3.1-8b-instruct:hf", "llama-3.1-8b-instruct:hf-2");
    std::fs::write(spec.path().join("nim.berth"), text).expect("write spec");
    let next = plan_spec(spec.path());
    let (code, _, err) = apply(&next, &["--prune"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(&format!("pruned           NIMCache nim/{cache_name}")),
        "{err}"
    );
    let names: Vec<String> = cluster
        .list(&cluster::nim::collection("nim"))
        .iter()
        .filter_map(|c| c["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(!names.contains(&cache_name), "{names:?}");
    let deployment = cluster
        .get("/apis/apps/v1/namespaces/nim/deployments/llm")
        .expect("deployment");
    let claim =
        deployment["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"]
            .as_str()
            .expect("claim")
            .to_string();
    assert!(
        names.contains(&claim),
        "the Deployment mounts the new cache"
    );
}
