//! Who holds a cluster's GPUs now, for `berth top`: per pool of the plan's targets, the
//! allocatable GPUs (or MIG slices) of its nodes and the requests of the pods running there;
//! per pod holding some, its workload (berth's label) and how many. Pods berth did not place
//! are listed too, by namespace and name: they hold the pool's GPUs all the same.
//!
//! Utilisation comes from a DCGM exporter's Prometheus endpoint when one is given
//! ([`scrape_dcgm`]): `DCGM_FI_DEV_GPU_UTIL` with the `namespace`/`pod` labels dcgm-exporter
//! attaches to a GPU in use by a pod (`pod_namespace`/`pod_name` in its older releases).

use super::client::{ApiError, Cluster};
use super::kubeconfig::Kubeconfigs;
use super::render::ClusterManifests;
use super::render::{self, labels};
use super::status::{connect, is_running, pod_request, pool_nodes};
use berth_compiler::ir::{Ir, Runtime};
use k8s_openapi::api::core::v1::{Node, Pod};
use serde::Serialize;
use std::collections::BTreeMap;

/// A pool's GPUs on the cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PoolUse {
    pub target: String,
    pub pool: String,
    /// `nvidia.com/gpu`, or a MIG resource (slices are counted as slices).
    pub resource: String,
    pub allocatable: i64,
    pub allocated: i64,
}

/// A running pod holding GPUs of a pool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Holder {
    pub target: String,
    pub pool: String,
    pub namespace: String,
    pub pod: String,
    /// berth's workload label; `None` for a pod berth did not place.
    pub workload: Option<String>,
    /// berth's target label of a pod labelled `app.kubernetes.io/managed-by: berth`; `None`
    /// for any other pod (what `berth plan --live` counts as held by others).
    #[serde(skip)]
    pub berth_target: Option<String>,
    pub gpus: i64,
}

/// The pools of `targets` (kubernetes targets of this cluster) and the pods holding them.
pub async fn gpu_use(
    cluster: &Cluster,
    ir: &Ir,
    targets: &[String],
) -> Result<(Vec<PoolUse>, Vec<Holder>), ApiError> {
    let nodes: Vec<Node> = cluster
        .list_typed(cluster.typed_all(), "nodes", None)
        .await?;
    let pods: Vec<Pod> = cluster
        .list_typed(cluster.typed_all(), "pods", None)
        .await?;
    let mut pools = Vec::new();
    let mut holders = Vec::new();
    for target in ir.targets.iter().filter(|t| targets.contains(&t.name)) {
        if !matches!(target.runtime, Runtime::Kubernetes { .. }) {
            continue;
        }
        for pool in &target.pools {
            let resource = render::pool_resource_name(ir, pool);
            let pool_nodes = pool_nodes(&nodes, pool);
            let on_pool: Vec<&str> = pool_nodes
                .iter()
                .filter_map(|n| n.metadata.name.as_deref())
                .collect();
            let allocatable: i64 = pool_nodes
                .iter()
                .filter_map(|n| n.status.as_ref()?.allocatable.as_ref()?.get(&resource))
                .map(|q| q.0.parse::<i64>().unwrap_or(0))
                .sum();
            let mut allocated = 0;
            for pod in pods.iter().filter(|p| is_running(p)) {
                let on_node = pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.node_name.as_deref())
                    .is_some_and(|n| on_pool.contains(&n));
                let gpus = pod_request(pod, &resource);
                if !on_node || gpus == 0 {
                    continue;
                }
                allocated += gpus;
                let pod_labels = pod.metadata.labels.as_ref();
                let managed = pod_labels
                    .and_then(|l| l.get(super::MANAGED_BY.0))
                    .is_some_and(|v| v == super::MANAGED_BY.1);
                holders.push(Holder {
                    target: target.name.clone(),
                    pool: pool.name.clone(),
                    namespace: pod.metadata.namespace.clone().unwrap_or_default(),
                    pod: pod.metadata.name.clone().unwrap_or_default(),
                    workload: pod
                        .metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(labels::WORKLOAD))
                        .cloned(),
                    berth_target: pod_labels
                        .filter(|_| managed)
                        .and_then(|l| l.get(labels::TARGET))
                        .cloned(),
                    gpus,
                });
            }
            pools.push(PoolUse {
                target: target.name.clone(),
                pool: pool.name.clone(),
                resource,
                allocatable,
                allocated,
            });
        }
    }
    Ok((pools, holders))
}

/// [`gpu_use`] of one rendered cluster, connecting to it first; errors as text, redacted.
pub async fn read_cluster(
    kubeconfigs: &Kubeconfigs,
    cluster: &ClusterManifests,
    ir: &Ir,
) -> Result<(Vec<PoolUse>, Vec<Holder>), String> {
    let client = connect(kubeconfigs, &cluster.context)
        .await
        .map_err(|e| kubeconfigs.redact(&e))?;
    gpu_use(&client, ir, &cluster.targets)
        .await
        .map_err(|e| kubeconfigs.redact(&e.to_string()))
}

/// GPU utilisation (%) per pod, `(namespace, pod)` → one value per GPU it holds, from a DCGM
/// exporter's metrics at `url`.
pub async fn scrape_dcgm(
    client: &reqwest::Client,
    url: &str,
) -> Result<BTreeMap<(String, String), Vec<f64>>, String> {
    let response = client
        .get(url)
        .send()
        .await
        .map_err(|e| format!("cannot read `{url}`: {e}"))?;
    if !response.status().is_success() {
        return Err(format!("`{url}` answered {}", response.status()));
    }
    let text = response
        .text()
        .await
        .map_err(|e| format!("cannot read `{url}`: {e}"))?;
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string())))
        .map_err(|e| format!("`{url}` is not Prometheus text: {e}"))?;
    let mut out: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    for sample in scrape
        .samples
        .iter()
        .filter(|s| s.metric == "DCGM_FI_DEV_GPU_UTIL")
    {
        let label = |names: [&str; 2]| {
            names
                .iter()
                .find_map(|n| sample.labels.get(n).filter(|v| !v.is_empty()))
                .map(str::to_string)
        };
        let (Some(namespace), Some(pod)) = (
            label(["namespace", "pod_namespace"]),
            label(["pod", "pod_name"]),
        ) else {
            continue;
        };
        let value = match sample.value {
            prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Untyped(v) => v,
            _ => continue,
        };
        out.entry((namespace, pod)).or_default().push(value);
    }
    Ok(out)
}
