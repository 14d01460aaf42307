//! Placement agrees with the scheduler: every replica berth places on `(cluster, pool)` is
//! bound by the real kube-scheduler to a node of that pool and runs, with no pod left Pending
//! for lack of resources — for the examples and for generated estates (several clusters,
//! whole-GPU and MIG pools, taints). And the check has teeth: a plan over-committed by hand,
//! past the verifier, leaves pods Pending.
//!
//! Clusters are real control planes (tests/cluster) whose simulated nodes are generated from
//! the spec's pools (`tests/cluster/nodes.rs` says how).

mod arm;
mod cluster;
mod isolated;
mod test_tls;

use cluster::nodes::POOL_LABEL;
use cluster::{Cluster, Fleet, Planned};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const AT: &str = "2025-06-07T10:00:00Z";

fn plan_spec(spec: &Path) -> Planned {
    cluster::plan_spec(spec, AT)
}

fn berth(fleet: &Fleet, args: &[&str]) -> (i32, String) {
    let mut command = isolated::berth();
    command
        .args(args)
        .env("KUBECONFIG", &fleet.kubeconfig)
        .env("NO_COLOR", "1");
    // The examples' Arc targets: their Flux configuration goes to the ARM test double.
    for (k, v) in arm_double().env() {
        command.env(k, v);
    }
    let out = command.output().expect("run berth");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code().unwrap_or(-1), stderr)
}

/// One ARM test double for the process (tests/arm).
fn arm_double() -> &'static arm::ArmDouble {
    static ARM: std::sync::OnceLock<arm::ArmDouble> = std::sync::OnceLock::new();
    ARM.get_or_init(arm::ArmDouble::start)
}

/// `(workload, target, pool)` → replicas, for the plan's Kubernetes placements.
fn planned_replicas(planned: &Planned) -> BTreeMap<(String, String, String), u32> {
    let kubernetes: Vec<&str> = planned
        .ir
        .targets
        .iter()
        .filter(|t| matches!(t.runtime, berth_compiler::ir::Runtime::Kubernetes { .. }))
        .map(|t| t.name.as_str())
        .collect();
    let mut out = BTreeMap::new();
    for workload in &planned.plan.workloads {
        for p in &workload.placements {
            if kubernetes.contains(&p.target.as_str()) {
                let key = (
                    workload.workload.clone(),
                    p.target.clone(),
                    p.pool.clone().unwrap_or_default(),
                );
                *out.entry(key).or_default() += p.replicas;
            }
        }
    }
    out
}

/// Applies the plan (approving what awaits approval), waits for the rollouts, and checks
/// every berth pod: bound to a node of its pool, running (or finished), none Pending.
/// `approver_key` gives, for an approver the policy names, the secret key to approve with.
fn assert_scheduler_agrees(
    fleet: &Fleet,
    spec: &Path,
    planned: &Planned,
    approver_key: impl Fn(&str) -> PathBuf,
) {
    let plan = planned.plan_path.to_str().expect("utf-8");
    let approvers: Vec<String> = planned
        .plan
        .workloads
        .iter()
        .filter_map(|w| w.approval.as_ref())
        .filter_map(|a| a.approvers.first().cloned())
        .collect();
    let spec = spec.to_str().expect("utf-8");
    if let Some(by) = approvers.first() {
        let key = approver_key(by);
        let key = key.to_str().expect("utf-8");
        let (code, err) = berth(fleet, &["approve", plan, "--key", key, "--spec", spec]);
        assert_eq!(code, 0, "{err}");
    }
    let (code, err) = berth(
        fleet,
        &["apply", plan, "--spec", spec, "--wait", "--timeout", "300"],
    );
    assert_eq!(code, 0, "apply --wait: {err}");

    let mut bound: BTreeMap<(String, String, String), u32> = BTreeMap::new();
    let mut problems = Vec::new();
    for cluster in &fleet.clusters {
        let pools = node_pools(cluster);
        let pods =
            cluster.list("/api/v1/pods?labelSelector=app.kubernetes.io%2Fmanaged-by%3Dberth");
        for pod in pods {
            let labels = &pod["metadata"]["labels"];
            let label = |k: &str| labels[k].as_str().unwrap_or("").to_string();
            let (workload, target, pool) = (
                label("berth.dev/workload"),
                label("berth.dev/target"),
                label("berth.dev/pool"),
            );
            let name = pod["metadata"]["name"].as_str().unwrap_or("?").to_string();
            let phase = pod["status"]["phase"].as_str().unwrap_or("");
            // A staging Job's pod: it must have run (its workload's pods wait for it).
            if label("berth.dev/component") == "model-staging" {
                if phase != "Succeeded" {
                    problems.push(format!(
                        "{}: staging pod {name} is {phase}",
                        cluster.context
                    ));
                }
                continue;
            }
            let Some(node) = pod["spec"]["nodeName"].as_str() else {
                problems.push(format!(
                    "{}: pod {name} of {workload} not bound: {}",
                    cluster.context, pod["status"]["conditions"]
                ));
                continue;
            };
            if !matches!(phase, "Running" | "Succeeded") {
                problems.push(format!("{}: pod {name} is {phase}", cluster.context));
            }
            let node_pool = pools.get(node).cloned().unwrap_or_default();
            if !pool.is_empty() && node_pool != format!("{target}.{pool}") {
                problems.push(format!(
                    "{}: pod {name} of {workload}, placed on pool `{pool}` of `{target}`, bound to node {node} of `{node_pool}`",
                    cluster.context
                ));
            }
            *bound.entry((workload, target, pool)).or_default() += 1;
        }
    }
    let replicas = planned_replicas(planned);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert_eq!(
        bound, replicas,
        "pods per (workload, target, pool) vs the plan"
    );

    // `berth status` reads the same from the clusters: no pool holds more than the plan
    // gave it (MIG slices counted as slices), every pool is as large as planned, nothing
    // waits for GPUs.
    let out = isolated::berth()
        .args(["--output", "json", "status", plan, "--spec", spec])
        .env("KUBECONFIG", &fleet.kubeconfig)
        .output()
        .expect("run berth status");
    let text = String::from_utf8_lossy(&out.stdout);
    let doc: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    for cluster in doc["clusters"].as_array().expect("clusters") {
        for pool in cluster["pools"].as_array().into_iter().flatten() {
            // Pods of finished Jobs hold no GPU any more: at most the plan, never more.
            assert!(
                pool["allocated"].as_i64() <= pool["planned_allocated"].as_i64(),
                "{}: {pool}",
                cluster["context"]
            );
            assert_eq!(pool["allocatable"], pool["planned_capacity"], "{pool}");
            assert!(
                pool["flags"].as_array().is_none_or(|f| f.is_empty()),
                "{pool}"
            );
        }
        assert!(
            cluster["pending_gpu_pods"]
                .as_array()
                .is_none_or(|p| p.is_empty()),
            "{cluster}"
        );
    }
}

/// Node name → its `berth.test/pool` label.
fn node_pools(cluster: &Cluster) -> BTreeMap<String, String> {
    cluster
        .list("/api/v1/nodes")
        .iter()
        .map(|n| {
            (
                n["metadata"]["name"].as_str().unwrap_or("").to_string(),
                n["metadata"]["labels"][POOL_LABEL]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            )
        })
        .collect()
}

/// A copy of the example `name` whose Arc targets commit to a local bare repository (the
/// example's GitOps server does not exist here); everything else as written.
fn local_copy(name: &str, dir: &Path) -> std::path::PathBuf {
    let bare = dir.join("gitops.git");
    let status = Command::new("git")
        .args(["init", "--quiet", "--bare", "--initial-branch=main"])
        .arg(&bare)
        .status()
        .expect("run git");
    assert!(status.success());
    let spec = dir.join(name);
    std::fs::create_dir_all(&spec).expect("mkdir");
    for entry in std::fs::read_dir(Path::new("../examples").join(name))
        .expect("example")
        .flatten()
    {
        if entry.path().extension().is_some_and(|e| e == "trust") {
            std::fs::copy(entry.path(), spec.join(entry.file_name())).expect("copy");
        }
        if entry.path().extension().is_some_and(|e| e == "berth") {
            let text = std::fs::read_to_string(entry.path()).expect("read");
            let text = text.replace(
                "repo = \"https://git.example.com/platform/gitops.git\"",
                &format!("repo = \"{}\"", bare.display()),
            );
            std::fs::write(spec.join(entry.file_name()), text).expect("write");
        }
    }
    spec
}

fn check_example(name: &str) {
    let dir = tempfile::tempdir().expect("temp dir");
    let spec = local_copy(name, dir.path());
    let planned = plan_spec(&spec);
    let fleet = Fleet::for_ir(&planned.ir, &[]);
    assert!(!fleet.clusters.is_empty(), "{name} has Kubernetes targets");
    // The example's demo approvers' keys.
    let keys = Path::new("../examples").join(name).join("keys");
    assert_scheduler_agrees(&fleet, &spec, &planned, |by| keys.join(format!("{by}.key")));
}

#[test]
fn training_and_inference_runs_where_it_is_placed() {
    check_example("training-and-inference");
}

#[test]
fn peak_hours_runs_where_it_is_placed_mig_slices_included() {
    check_example("peak-hours");
}

#[test]
fn three_plants_runs_where_it_is_placed() {
    check_example("three-plants");
}

/// A small deterministic generator (SplitMix64).
struct Mix(u64);

impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// An estate of `clusters` Kubernetes clusters (one target each) with whole-GPU and MIG
/// pools, some tainted, and `workloads` workloads asking for 1, 2, 4 or 8 GPUs or one MIG
/// slice per replica, sized to fill about 70% of the GPUs.
fn generated_spec(seed: u64, clusters: usize, workloads: usize) -> String {
    let mut mix = Mix(seed);
    let mut out = String::from("use std.gpu.{H100, L40S, A100_80GB}\n\n");
    let kinds = [
        ("H100", None),
        ("L40S", None),
        ("A100_80GB", Some("1g.10gb")),
    ];
    let mut capacity: BTreeMap<&str, u64> = BTreeMap::new();
    for c in 0..clusters {
        let _ = write!(
            out,
            "target site_{c} {{\n  class = datacenter\n  runtime = kubernetes {{ context = \"gen-{c}\", namespace = \"gen\" }}\n  connectivity = connected\n  cpu = 512\n  memory = 4TiB\n"
        );
        let pools = 1 + mix.below(3) as usize;
        for (p, (accelerator, mig)) in kinds.iter().enumerate().take(pools) {
            let count = 8 * (1 + mix.below(3));
            let taint = if mix.below(2) == 0 {
                format!("\n    taints = [\"gpu.example.com/{accelerator}=reserved:NoSchedule\"]")
            } else {
                String::new()
            };
            let mig_line = mig.map_or(String::new(), |m| format!("\n    mig = \"{m}\""));
            let _ = write!(
                out,
                "  pool p{p} {{\n    accelerator = {accelerator}\n    count = {count}{mig_line}\n    node_labels = {{ \"gpu.example.com/pool\": \"site-{c}-p{p}\" }}{taint}\n  }}\n"
            );
            let slices = if mig.is_some() { 7 } else { 1 };
            *capacity.entry(accelerator).or_default() += count * slices;
        }
        out.push_str("  cost = { gpu_hour: 1.00 }\n}\n\n");
    }
    let mut demand: BTreeMap<&str, u64> = BTreeMap::new();
    for w in 0..workloads {
        let (accelerator, mig) = kinds[mix.below(kinds.len() as u64) as usize];
        let limit = capacity.get(accelerator).copied().unwrap_or(0) * 7 / 10;
        let gpu = if mig.is_some() {
            1
        } else {
            [1, 2, 4, 8][mix.below(4) as usize]
        };
        let replicas = 1 + mix.below(3);
        let used = demand.entry(accelerator).or_default();
        if *used + gpu * replicas > limit {
            continue;
        }
        *used += gpu * replicas;
        let (kind, class) = [
            ("service", "production"),
            ("batch", "experiment"),
            ("service", "development"),
        ][mix.below(3) as usize];
        let mig_line = mig.map_or(String::new(), |m| format!("\n    mig = \"{m}\""));
        let _ = write!(
            out,
            "workload w{w} {{\n  release = \"1.0.{w}\"\n  image = \"registry.example.com/gen/w{w}:1\"\n  kind = {kind}\n  class = {class}\n  identity = service_account(\"gen-{w}\")\n  replicas = {replicas}\n  resources {{\n    cpu = {}\n    memory = {}GiB\n    gpu = {gpu}{mig_line}\n  }}\n  accelerators = [{accelerator}]\n  connectivity = connected\n}}\n\n",
            1 + mix.below(8),
            4 * (1 + mix.below(8)),
        );
    }
    out
}

#[test]
fn generated_estates_run_where_they_are_placed() {
    for seed in [1, 2] {
        let dir = tempfile::tempdir().expect("temp dir");
        let spec = dir.path().join("spec");
        std::fs::create_dir(&spec).expect("mkdir");
        // The approver is a key written in the policy itself.
        let prefix = dir.path().join("approver");
        let secret = berth_runtime::backends::edge::bundle::keys::generate().expect("random");
        berth_runtime::backends::edge::bundle::keys::write_pair(&prefix, &secret).expect("keys");
        let public =
            berth_runtime::backends::edge::bundle::keys::public_text(&secret.verifying_key());
        let text = generated_spec(seed, 3, 30).replace(
            "approvers = [\"platform-leads\"]",
            &format!("approvers = [\"{public}\"]"),
        );
        std::fs::write(spec.join("estate.berth"), text).expect("write");
        let planned = plan_spec(&spec);
        assert!(
            planned.plan.workloads.len() >= 10,
            "seed {seed}: a real estate"
        );
        let fleet = Fleet::for_ir(&planned.ir, &[]);
        assert_eq!(fleet.clusters.len(), 3);
        assert_scheduler_agrees(&fleet, &spec, &planned, |_| prefix.with_extension("key"));
    }
}

#[test]
fn a_plan_overcommitted_by_hand_leaves_pods_pending() {
    let dir = tempfile::tempdir().expect("temp dir");
    let spec = Path::new("../examples/training-and-inference");
    let planned = plan_spec(spec);
    let fleet = Fleet::for_ir(&planned.ir, &[]);
    // The rendered Deployment of the L40S service, its replicas raised past the pool's
    // eight GPUs, applied straight to the cluster: the verifier never sees it.
    let out = dir.path().join("rendered");
    let (code, err) = berth(
        &fleet,
        &[
            "render",
            planned.plan_path.to_str().expect("utf-8"),
            "--spec",
            spec.to_str().expect("utf-8"),
            "-o",
            out.to_str().expect("utf-8"),
        ],
    );
    assert_eq!(code, 0, "{err}");
    let prod = fleet.cluster("fra-gpu-prod");
    let ns =
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}});
    assert_eq!(
        prod.apply_as_manager("test", "/api/v1/namespaces/ml", ns, true)
            .status,
        201
    );
    let chat = planned
        .plan
        .workloads
        .iter()
        .find(|w| w.workload == "chat_assistant")
        .expect("chat_assistant");
    let placement = &chat.placements[0];
    assert_eq!(placement.pool.as_deref(), Some("serve"));
    // The claim its pods mount (model staging), so that only GPUs can hold them back.
    let claim = object_from_rendered(&out, "PersistentVolumeClaim", "chat-assistant-model");
    let answer = prod.apply_as_manager(
        "test",
        "/api/v1/namespaces/ml/persistentvolumeclaims/chat-assistant-model",
        claim,
        true,
    );
    assert_eq!(answer.status, 201, "{:?}", answer.body);
    let deployment = deployment_from_rendered(&out, "chat-assistant");
    let mut overcommitted = deployment.clone();
    let replicas = 8 / placement.gpus_per_replica + 2;
    overcommitted["spec"]["replicas"] = serde_json::json!(replicas);
    let answer = prod.apply_as_manager(
        "test",
        "/apis/apps/v1/namespaces/ml/deployments/chat-assistant",
        overcommitted,
        true,
    );
    assert_eq!(answer.status, 201, "{:?}", answer.body);
    prod.wait_for(
        "pods Pending for lack of GPUs",
        Duration::from_secs(120),
        || {
            let pods: Vec<Value> = prod
                .list("/api/v1/namespaces/ml/pods")
                .into_iter()
                .filter(|p| p["metadata"]["labels"]["berth.dev/component"] != "model-staging")
                .collect();
            let unschedulable = pods
                .iter()
                .filter(|p| {
                    p["status"]["conditions"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|c| {
                            c["type"] == "PodScheduled"
                                && c["reason"] == "Unschedulable"
                                && c["message"]
                                    .as_str()
                                    .is_some_and(|m| m.contains("nvidia.com/gpu"))
                        })
                })
                .count();
            pods.len() == replicas as usize && unschedulable == 2
        },
    );
}

/// The Deployment named `name` from `berth render`'s YAML files under `dir`.
fn deployment_from_rendered(dir: &Path, name: &str) -> Value {
    object_from_rendered(dir, "Deployment", name)
}

fn object_from_rendered(dir: &Path, kind: &str, name: &str) -> Value {
    for entry in walk(dir) {
        let text = std::fs::read_to_string(&entry).expect("read rendered");
        for doc in text.split("\n---") {
            let value: Value = match serde_saphyr::from_str(doc) {
                Ok(v) => v,
                Err(_) => continue,
            };
            if value["kind"] == kind && value["metadata"]["name"] == name {
                return value;
            }
        }
    }
    panic!("no {kind} `{name}` rendered under {}", dir.display());
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else if path.extension().is_some_and(|e| e == "yaml") {
            out.push(path);
        }
    }
    out.sort();
    out
}
