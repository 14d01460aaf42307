//! Arc targets: where each one's rendering goes in its GitOps repository.

use super::*;

/// What one Arc-attached target's Flux configuration reconciles: objects written to `path`
/// on `branch` of `repo`.
#[derive(Clone, Debug, PartialEq)]
pub struct GitOpsTarget {
    pub target: String,
    /// The Azure resource id of the Arc-attached (or AKS) cluster.
    pub cluster: String,
    pub repo: String,
    pub branch: String,
    /// The folder of this cluster's kustomization in the repository.
    pub path: String,
    pub namespace: String,
    /// The kubeconfig context `berth status` reads the cluster's replicas through: the
    /// runtime's `context`, else the cluster's name (the last segment of its resource id).
    pub context: String,
    /// The Namespace first, then each placement's objects.
    pub manifests: Vec<Manifest>,
}

impl GitOpsTarget {
    /// The files of the folder: `NAMESPACE.yaml` and a `kustomization.yaml` naming it.
    pub fn files(&self, plan_id: &str) -> Vec<(String, String)> {
        let header =
            format!("# Rendered by berth from plan {plan_id}. Do not edit: re-render instead.\n");
        let file = format!("{}.yaml", path_part(&self.namespace));
        let mut objects = header.clone();
        for m in &self.manifests {
            objects.push_str("---\n");
            objects.push_str(&to_yaml(&m.object));
        }
        let kustomization = format!(
            "{header}apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- {file}\n"
        );
        vec![
            ("kustomization.yaml".to_string(), kustomization),
            (file, objects),
        ]
    }
}

/// The last segment of a cluster's resource id (`eu-gpu`), or the id when it has none.
pub fn cluster_name(id: &str) -> &str {
    id.trim_end_matches('/').rsplit('/').next().unwrap_or(id)
}

pub(super) fn gitops_entry<'a>(
    gitops: &'a mut Vec<GitOpsTarget>,
    target: &Target,
    (cluster, repo, branch, path, namespace, context): (&str, &str, &str, &str, &str, Option<&str>),
    plan_id: &str,
) -> &'a mut GitOpsTarget {
    let index = match gitops.iter().position(|g| g.target == target.name) {
        Some(i) => i,
        None => {
            gitops.push(GitOpsTarget {
                target: target.name.clone(),
                cluster: cluster.to_string(),
                repo: repo.to_string(),
                branch: branch.to_string(),
                path: path.to_string(),
                namespace: namespace.to_string(),
                context: context
                    .map(str::to_string)
                    .unwrap_or_else(|| cluster_name(cluster).to_string()),
                manifests: Vec::new(),
            });
            gitops.len() - 1
        }
    };
    let entry = &mut gitops[index];
    // INVARIANT: the Namespace is first, as in the per-cluster files. `default` always
    // exists and is not berth's to label.
    if entry.manifests.is_empty() && namespace != "default" {
        entry.manifests.push(namespace_object(namespace, plan_id));
    }
    entry
}
