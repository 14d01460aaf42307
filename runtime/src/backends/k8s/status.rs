//! `berth status` on Kubernetes: per target and workload, desired vs ready replicas from the
//! live objects; per GPU pool, the nodes' capacity and allocatable GPUs (or MIG slices)
//! against the requests of the pods running on them, flagged when a pool holds more than the
//! plan gave it, is smaller than planned, or a workload's pods wait for GPUs; per staged model,
//! whether its staging Job (`berth fetch`) or `NIMCache` has put it where the pods read it.

use super::client::{ApiError, Cluster, RetryPolicy};
use super::kubeconfig::Kubeconfigs;
use super::render::{self, Kind, labels};
use crate::report::Exit;
use crate::report::{OutputFormat, Ui};
use berth_compiler::ir::{Ir, Runtime};
use berth_compiler::plan::Plan;
use k8s_openapi::api::core::v1::{Node, Pod};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io;

pub use super::workloads::WorkloadStatus;

/// Live GPU allocation of one pool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PoolStatus {
    pub target: String,
    pub pool: String,
    /// `nvidia.com/gpu` or a MIG resource.
    pub resource: String,
    /// Nodes carrying the pool's node labels.
    pub nodes: usize,
    pub capacity: i64,
    pub allocatable: i64,
    /// Σ GPU requests of the pods on those nodes that are not finished.
    pub allocated: i64,
    pub planned_capacity: u32,
    pub planned_allocated: u32,
    /// `over_plan`, `below_planned_capacity`, `no_nodes`.
    pub flags: Vec<&'static str>,
}

/// A pod waiting for GPUs (unschedulable).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PendingPod {
    pub namespace: String,
    pub pod: String,
    pub workload: Option<String>,
    pub resource: String,
    pub message: String,
}

/// Where a staged model stands: the staging Job that fills a volume with `berth fetch`, or the
/// `NIMCache` the NIM Operator fills.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ModelStatus {
    pub target: String,
    /// The workload object the model is staged for.
    pub staged_for: String,
    /// `MODEL@VERSION/VARIANT`.
    pub model: String,
    /// `Job namespace/name` or `NIMCache namespace/name`.
    pub object: String,
    pub state: StagingState,
    /// How far it got, or why it failed.
    pub detail: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StagingState {
    Staged,
    Staging,
    Failed,
}

impl StagingState {
    fn as_str(self) -> &'static str {
        match self {
            StagingState::Staged => "staged",
            StagingState::Staging => "staging",
            StagingState::Failed => "failed",
        }
    }
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct ClusterStatus {
    pub context: String,
    pub error: Option<String>,
    pub workloads: Vec<WorkloadStatus>,
    pub models: Vec<ModelStatus>,
    pub pools: Vec<PoolStatus>,
    pub pending_gpu_pods: Vec<PendingPod>,
}

/// Prints the status of every kubernetes target of the plan, then the edge targets' `edge`;
/// exit 1 when a cluster or an agent could not be read or a flag is raised.
pub fn run(
    ir: &Ir,
    plan: &Plan,
    edge: &crate::backends::edge::status::Report,
    ui: &mut Ui<'_>,
) -> io::Result<Exit> {
    let rendered = render::render(ir, plan);
    let mut arc = crate::backends::arm::StatusReport::collect(&rendered.gitops);
    let kubeconfigs = Kubeconfigs::load();
    let Some(runtime) = crate::tasks::async_runtime(ui)? else {
        return Ok(Exit::Trouble);
    };
    let statuses: Vec<ClusterStatus> = runtime.block_on(async {
        let mut out = Vec::new();
        for cluster in &rendered.clusters {
            let mut status = ClusterStatus {
                context: cluster.context.clone(),
                ..ClusterStatus::default()
            };
            match connect(&kubeconfigs, &cluster.context).await {
                Err(e) => status.error = Some(kubeconfigs.redact(&e)),
                Ok(client) => {
                    if let Err(e) = collect(
                        &client,
                        ir,
                        plan,
                        &cluster.targets,
                        &cluster.namespaces(),
                        &mut status,
                    )
                    .await
                    {
                        status.error = Some(kubeconfigs.redact(&e.to_string()));
                    }
                }
            }
            out.push(status);
        }
        arc_replicas(&kubeconfigs, &rendered.gitops, &mut arc).await;
        out
    });
    let flagged = edge.flagged()
        || arc.flagged()
        || statuses.iter().any(|s| {
            s.error.is_some()
                || !s.pending_gpu_pods.is_empty()
                || s.models.iter().any(|m| m.state == StagingState::Failed)
                || s.pools.iter().any(|p| p.flags.contains(&"over_plan"))
        });
    if ui.output == OutputFormat::Json {
        let doc = serde_json::json!({
            "plan_id": plan.plan_id, "clusters": statuses, "arc": arc.json(), "edge": edge,
        });
        writeln!(ui.out, "{doc}")?;
    } else {
        print_human(&statuses, ui)?;
        arc.print(ui)?;
        edge.print(ui)?;
    }
    Ok(if flagged {
        Exit::ErrorsFound
    } else {
        Exit::Clean
    })
}

/// The nodes of `pool`: those carrying every one of its node labels (none for a pool that
/// names no label).
pub(super) fn pool_nodes<'a>(nodes: &'a [Node], pool: &berth_compiler::ir::Pool) -> Vec<&'a Node> {
    nodes
        .iter()
        .filter(|n| {
            let node_labels = n.metadata.labels.as_ref();
            !pool.node_labels.is_empty()
                && pool
                    .node_labels
                    .iter()
                    .all(|(k, v)| node_labels.and_then(|l| l.get(k)) == Some(v))
        })
        .collect()
}

/// A client for `context`, every error as text (not yet redacted).
pub(super) async fn connect(kubeconfigs: &Kubeconfigs, context: &str) -> Result<Cluster, String> {
    let config = kubeconfigs
        .config(context)
        .await
        .map_err(|e| e.to_string())?;
    Cluster::connect(
        context,
        config,
        RetryPolicy::from_env(),
        kubeconfigs.learned(),
    )
    .await
    .map_err(|e| e.to_string())
}

async fn collect(
    cluster: &Cluster,
    ir: &Ir,
    plan: &Plan,
    targets: &[String],
    namespaces: &[String],
    status: &mut ClusterStatus,
) -> Result<(), ApiError> {
    status.workloads = workloads(cluster, targets, namespaces).await?;
    status.models = models(cluster, targets, namespaces).await?;
    let nodes: Vec<Node> = cluster
        .list_typed(cluster.typed_all(), "nodes", None)
        .await?;
    let pods: Vec<Pod> = cluster
        .list_typed(cluster.typed_all(), "pods", None)
        .await?;
    for target in ir.targets.iter().filter(|t| targets.contains(&t.name)) {
        if !matches!(target.runtime, Runtime::Kubernetes { .. }) {
            continue;
        }
        for pool in &target.pools {
            let resource = render::pool_resource_name(ir, pool);
            let on_pool = pool_nodes(&nodes, pool);
            let names: Vec<&str> = on_pool
                .iter()
                .filter_map(|n| n.metadata.name.as_deref())
                .collect();
            let amount = |pick: fn(
                &Node,
            ) -> Option<
                &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
            >|
             -> i64 {
                on_pool
                    .iter()
                    .filter_map(|n| pick(n).and_then(|m| m.get(&resource)))
                    .map(|q| q.0.parse::<i64>().unwrap_or(0))
                    .sum()
            };
            let capacity = amount(|n| n.status.as_ref().and_then(|s| s.capacity.as_ref()));
            let allocatable = amount(|n| n.status.as_ref().and_then(|s| s.allocatable.as_ref()));
            let allocated: i64 = pods
                .iter()
                .filter(|p| is_running(p))
                .filter(|p| {
                    p.spec
                        .as_ref()
                        .and_then(|s| s.node_name.as_deref())
                        .is_some_and(|n| names.contains(&n))
                })
                .map(|p| pod_request(p, &resource))
                .sum();
            let ledger = plan
                .pools
                .iter()
                .find(|l| l.target == target.name && l.pool == pool.name);
            let planned_capacity = ledger.map_or(0, |l| l.capacity);
            let planned_allocated = ledger.map_or(0, |l| l.allocated);
            let mut flags = Vec::new();
            if on_pool.is_empty() {
                flags.push("no_nodes");
            }
            if allocated > i64::from(planned_allocated) {
                flags.push("over_plan");
            }
            if !on_pool.is_empty() && allocatable < i64::from(planned_capacity) {
                flags.push("below_planned_capacity");
            }
            status.pools.push(PoolStatus {
                target: target.name.clone(),
                pool: pool.name.clone(),
                resource,
                nodes: on_pool.len(),
                capacity,
                allocatable,
                allocated,
                planned_capacity,
                planned_allocated,
                flags,
            });
        }
    }
    for pod in &pods {
        if let Some(pending) = pending_for_gpus(pod) {
            status.pending_gpu_pods.push(pending);
        }
    }
    status
        .pending_gpu_pods
        .sort_by(|a, b| (&a.namespace, &a.pod).cmp(&(&b.namespace, &b.pod)));
    Ok(())
}

/// Desired vs ready replicas of berth's workload objects of `targets` in `namespaces`,
/// whoever applied them (berth, or Flux for an Arc target).
async fn workloads(
    cluster: &Cluster,
    targets: &[String],
    namespaces: &[String],
) -> Result<Vec<WorkloadStatus>, ApiError> {
    let selector = super::prune::selector(targets);
    let mut out = Vec::new();
    for namespace in namespaces {
        for kind in [Kind::Deployment, Kind::StatefulSet, Kind::Job] {
            for object in cluster.list(kind, namespace, &selector).await? {
                // Staging Jobs serve a workload; they are not one.
                if object["metadata"]["labels"][render::COMPONENT.0] == render::COMPONENT.1 {
                    continue;
                }
                out.push(workload_status(kind, namespace, &object));
            }
        }
    }
    out.sort_by(|a, b| {
        (&a.target, &a.workload, &a.object).cmp(&(&b.target, &b.workload, &b.object))
    });
    Ok(out)
}

/// The models staged for the workloads of `targets`: the staging Jobs (`berth fetch`) and the
/// `NIMCache`s, with where each stands.
async fn models(
    cluster: &Cluster,
    targets: &[String],
    namespaces: &[String],
) -> Result<Vec<ModelStatus>, ApiError> {
    let selector = super::prune::selector(targets);
    let staging = format!("{selector},{}={}", render::COMPONENT.0, render::COMPONENT.1);
    let mut out = Vec::new();
    for namespace in namespaces {
        for object in cluster.list(Kind::Job, namespace, &staging).await? {
            out.push(model_status(Kind::Job, namespace, &object));
        }
        let caches = match cluster.list(Kind::NimCache, namespace, &selector).await {
            // A cluster without the NIM Operator's CRD has no NIMCache.
            Err(ApiError::NotFound { .. }) => Vec::new(),
            other => other?,
        };
        for object in caches {
            out.push(model_status(Kind::NimCache, namespace, &object));
        }
    }
    out.sort_by(|a, b| {
        (&a.target, &a.staged_for, &a.object).cmp(&(&b.target, &b.staged_for, &b.object))
    });
    Ok(out)
}

/// The replicas of each Arc cluster's targets, read through its kubeconfig context (the
/// runtime's `context`, else the cluster's name: what `az connectedk8s proxy` writes), or why
/// they could not be.
async fn arc_replicas(
    kubeconfigs: &Kubeconfigs,
    gitops: &[render::GitOpsTarget],
    arc: &mut crate::backends::arm::StatusReport,
) {
    let known = kubeconfigs.contexts();
    for site in &mut arc.0 {
        let on_site: Vec<&render::GitOpsTarget> = gitops
            .iter()
            .filter(|g| site.targets.contains(&g.target))
            .collect();
        let Some(first) = on_site.first() else {
            continue;
        };
        let context = first.context.clone();
        site.context = Some(context.clone());
        if !known.contains(&context) {
            site.replicas = Some(Err(format!(
                "no kubeconfig context `{context}` (`az connectedk8s proxy` makes one; the \
                 runtime's `context` names another)"
            )));
            continue;
        }
        let mut namespaces: Vec<String> = on_site.iter().map(|g| g.namespace.clone()).collect();
        namespaces.sort();
        namespaces.dedup();
        let read = match connect(kubeconfigs, &context).await {
            Err(e) => Err(e),
            Ok(client) => workloads(&client, &site.targets, &namespaces)
                .await
                .map_err(|e| e.to_string()),
        };
        site.replicas =
            Some(read.map_err(|e| format!("context `{context}`: {}", kubeconfigs.redact(&e))));
    }
}

fn workload_status(kind: Kind, namespace: &str, object: &Value) -> WorkloadStatus {
    let text = |ptr: &str| {
        object
            .pointer(ptr)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let int = |ptr: &str| object.pointer(ptr).and_then(Value::as_i64).unwrap_or(0);
    let (desired, ready) = match kind {
        Kind::Job => (int("/spec/completions"), int("/status/succeeded")),
        _ => (int("/spec/replicas"), int("/status/readyReplicas")),
    };
    WorkloadStatus {
        target: text(&format!(
            "/metadata/labels/{}",
            labels::TARGET.replace('/', "~1")
        )),
        workload: text(&format!(
            "/metadata/labels/{}",
            labels::WORKLOAD.replace('/', "~1")
        )),
        object: format!("{} {namespace}/{}", kind.kind(), text("/metadata/name")),
        desired,
        ready,
    }
}

fn model_status(kind: Kind, namespace: &str, object: &Value) -> ModelStatus {
    let meta = |section: &str, key: &str| {
        object
            .pointer(&format!("/metadata/{section}/{}", key.replace('/', "~1")))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let (state, detail) = match super::rollout::state_of(kind, Some(object)) {
        super::rollout::State::Done => (StagingState::Staged, String::new()),
        super::rollout::State::Failed(why) => (StagingState::Failed, why),
        super::rollout::State::Pending(progress) => (StagingState::Staging, progress.to_string()),
    };
    ModelStatus {
        target: meta("labels", labels::TARGET),
        staged_for: meta("labels", render::STAGED_FOR),
        model: meta("annotations", labels::MODEL),
        object: format!(
            "{} {namespace}/{}",
            kind.kind(),
            object
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("")
        ),
        state,
        detail,
    }
}

pub(super) fn is_running(pod: &Pod) -> bool {
    !matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// The pod's request of `resource` (limits: extended resources are requested by limit).
pub(super) fn pod_request(pod: &Pod, resource: &str) -> i64 {
    pod.spec
        .iter()
        .flat_map(|s| &s.containers)
        .filter_map(|c| c.resources.as_ref())
        .filter_map(|r| r.limits.as_ref().or(r.requests.as_ref()))
        .filter_map(|m| m.get(resource))
        .map(|q| q.0.parse::<i64>().unwrap_or(0))
        .sum()
}

fn gpu_resource_of(pod: &Pod) -> Option<String> {
    pod.spec
        .iter()
        .flat_map(|s| &s.containers)
        .filter_map(|c| c.resources.as_ref())
        .filter_map(|r| r.limits.as_ref())
        .flat_map(|m| m.keys())
        .find(|k| k.contains("gpu") || k.starts_with("nvidia.com/mig-"))
        .cloned()
}

fn pending_for_gpus(pod: &Pod) -> Option<PendingPod> {
    let status = pod.status.as_ref()?;
    if status.phase.as_deref() != Some("Pending") {
        return None;
    }
    let resource = gpu_resource_of(pod)?;
    let unschedulable = status.conditions.iter().flatten().find(|c| {
        c.type_ == "PodScheduled"
            && c.status == "False"
            && c.reason.as_deref() == Some("Unschedulable")
    })?;
    Some(PendingPod {
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        pod: pod.metadata.name.clone().unwrap_or_default(),
        workload: pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(labels::WORKLOAD))
            .cloned(),
        resource,
        message: unschedulable.message.clone().unwrap_or_default(),
    })
}

fn print_human(statuses: &[ClusterStatus], ui: &mut Ui<'_>) -> io::Result<()> {
    for s in statuses {
        writeln!(ui.out, "context `{}`", s.context)?;
        if let Some(error) = &s.error {
            ui.problem(&format_args!("context `{}`: {error}", s.context), None)?;
            continue;
        }
        for w in &s.workloads {
            writeln!(
                ui.out,
                "  {:<12} {:<20} {}/{} ready  {}",
                w.target, w.workload, w.ready, w.desired, w.object
            )?;
        }
        for m in &s.models {
            let detail = if m.detail.is_empty() {
                String::new()
            } else {
                format!(": {}", m.detail)
            };
            writeln!(
                ui.out,
                "  model {}/{} for {}: {}{detail}  {}",
                m.target,
                m.model,
                m.staged_for,
                m.state.as_str(),
                m.object
            )?;
        }
        for p in &s.pools {
            let flags = if p.flags.is_empty() {
                String::new()
            } else {
                format!("  [{}]", p.flags.join(", "))
            };
            writeln!(
                ui.out,
                "  pool {}/{}: {} of {} {} allocated on {} node(s) (plan: {} of {}){flags}",
                p.target,
                p.pool,
                p.allocated,
                p.allocatable,
                p.resource,
                p.nodes,
                p.planned_allocated,
                p.planned_capacity
            )?;
        }
        for p in &s.pending_gpu_pods {
            writeln!(
                ui.out,
                "  pending for GPUs: {}/{} ({}) needs {}: {}",
                p.namespace,
                p.pod,
                p.workload.as_deref().unwrap_or("-"),
                p.resource,
                p.message
            )?;
        }
    }
    Ok(())
}
