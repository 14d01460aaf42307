//! Prune: delete the berth-managed objects of earlier plans that the current plan no longer
//! renders. Only objects that carry `app.kubernetes.io/managed-by: berth` and name one of
//! the plan's targets on this cluster are candidates; everything else is never touched.

use super::MANAGED_BY;
use super::client::{ApiError, Cluster};
use super::render::{ClusterManifests, Kind, labels};
use serde_json::Value;
use std::collections::BTreeSet;

/// The label selector of the objects prune may consider on a cluster.
pub fn selector(targets: &[String]) -> String {
    format!(
        "{}={},{} in ({})",
        MANAGED_BY.0,
        MANAGED_BY.1,
        labels::TARGET,
        targets.join(",")
    )
}

/// An object prune would delete: `(kind, namespace, name)`.
pub type Stale = (Kind, String, String);

/// The berth-managed objects on the cluster that `planned` does not contain, sorted.
pub async fn stale(cluster: &Cluster, planned: &ClusterManifests) -> Result<Vec<Stale>, ApiError> {
    if planned.targets.is_empty() {
        return Ok(Vec::new());
    }
    let keep: BTreeSet<(Kind, Option<&str>, &str)> = planned
        .manifests
        .iter()
        .map(|m| (m.kind, m.namespace.as_deref(), m.name.as_str()))
        .collect();
    let selector = selector(&planned.targets);
    let mut out = Vec::new();
    for namespace in planned.namespaces() {
        for kind in Kind::NAMESPACED {
            let objects = match cluster.list(kind, &namespace, &selector).await {
                // A cluster without the NIM Operator's CRD has no NIMCache to prune.
                Err(ApiError::NotFound { .. }) if kind == Kind::NimCache => Vec::new(),
                other => other?,
            };
            for object in objects {
                let Some(name) = object.pointer("/metadata/name").and_then(Value::as_str) else {
                    continue;
                };
                // INVARIANT: only objects berth manages are deleted, whatever the server's
                // selector support: the label is checked again here.
                if !is_managed(&object) || keep.contains(&(kind, Some(namespace.as_str()), name)) {
                    continue;
                }
                out.push((kind, namespace.clone(), name.to_string()));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Whether `object` carries berth's managed-by label.
pub fn is_managed(object: &Value) -> bool {
    object
        .pointer("/metadata/labels")
        .and_then(|l| l.get(MANAGED_BY.0))
        .and_then(Value::as_str)
        == Some(MANAGED_BY.1)
}
