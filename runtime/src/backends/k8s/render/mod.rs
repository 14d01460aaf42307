//! Rendering: every placement of a plan on a `kubernetes` target becomes typed k8s-openapi
//! objects (a ConfigMap with the placement context, a PersistentVolumeClaim and a Job that
//! stage its model artifact, a Service when the workload exposes ports or is a notebook, and
//! a Deployment, Job or StatefulSet by workload kind), grouped per cluster (kubeconfig
//! context) and namespace.
//!
//! Pure and deterministic: the same IR and plan give the same objects in the same order, and
//! the same YAML bytes. Nothing here talks to a cluster.
//!
//! Pod templates carry only what should restart pods when it changes (image, resources,
//! model variant, target and pool): the plan id changes with every re-plan, so it is on the
//! objects' metadata and in the ConfigMap, never in a pod template.

//!
//! The rooms: `names.rs` (object names, label keys and values, quantities), `pod.rs` (one
//! placement's objects and pod template: resources, affinity, packing, tolerations, the model
//! variant), `staging.rs` (the volume, Job and init container that stage a placement's model
//! artifact), `nim.rs` (the `NIMCache` that caches an `ngc://` or `hf://` artifact where the
//! NIM Operator runs, and the pods' mount of its volume), `gitops.rs` (Arc targets' kustomization entries), `yaml.rs` (YAML output, one
//! file per cluster and namespace).

mod gitops;
mod names;
mod nim;
mod pod;
mod staging;
mod yaml;

use gitops::gitops_entry;
pub use gitops::{GitOpsTarget, cluster_name};
pub use names::{cpu_quantity, dns_label, label_value, labels, memory_quantity, plan_label};
use names::{env_name, object_name};
pub use nim::{NIM_MOUNT, NIM_SERVICE, NimSource, nim_source};
use pod::Site;
pub use pod::{gpu_resource_name, pool_resource_name};
pub use staging::{COMPONENT, MOUNT, STAGED_FOR, default_fetch_image};
use yaml::path_part;
pub use yaml::{to_yaml, yaml_files};

use super::MANAGED_BY;
use berth_compiler::ir::{Ir, Pool, Runtime, Target, Workload, WorkloadKind};
use berth_compiler::plan::{Placement, Plan, VariantBinding};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, StatefulSet, StatefulSetSpec};
use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Affinity, ConfigMap, ConfigMapEnvSource, Container, ContainerPort, EnvFromSource, EnvVar,
    Namespace, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PodAffinity,
    PodAffinityTerm, PodSpec, PodTemplateSpec, ResourceRequirements, Service, ServicePort,
    ServiceSpec, Toleration, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
/// The kinds of object berth renders and manages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Namespace,
    ConfigMap,
    PersistentVolumeClaim,
    Service,
    Deployment,
    StatefulSet,
    Job,
    /// The NIM Operator's model cache (`apps.nvidia.com/v1alpha1`), a custom resource: a
    /// cluster without the operator's CRD has none, and answers 404 to its collection.
    NimCache,
}

impl Kind {
    /// The namespaced kinds prune and status look at, in apply order.
    pub const NAMESPACED: [Kind; 7] = [
        Kind::ConfigMap,
        Kind::PersistentVolumeClaim,
        Kind::NimCache,
        Kind::Service,
        Kind::Deployment,
        Kind::StatefulSet,
        Kind::Job,
    ];

    pub fn group(self) -> &'static str {
        match self {
            Kind::Namespace | Kind::ConfigMap | Kind::PersistentVolumeClaim | Kind::Service => "",
            Kind::Deployment | Kind::StatefulSet => "apps",
            Kind::Job => "batch",
            Kind::NimCache => "apps.nvidia.com",
        }
    }

    pub fn api_version(self) -> &'static str {
        match self {
            Kind::Namespace | Kind::ConfigMap | Kind::PersistentVolumeClaim | Kind::Service => "v1",
            Kind::Deployment | Kind::StatefulSet => "apps/v1",
            Kind::Job => "batch/v1",
            Kind::NimCache => "apps.nvidia.com/v1alpha1",
        }
    }

    pub fn kind(self) -> &'static str {
        match self {
            Kind::Namespace => "Namespace",
            Kind::ConfigMap => "ConfigMap",
            Kind::PersistentVolumeClaim => "PersistentVolumeClaim",
            Kind::Service => "Service",
            Kind::Deployment => "Deployment",
            Kind::StatefulSet => "StatefulSet",
            Kind::Job => "Job",
            Kind::NimCache => "NIMCache",
        }
    }

    /// The resource name in API paths.
    pub fn plural(self) -> &'static str {
        match self {
            Kind::Namespace => "namespaces",
            Kind::ConfigMap => "configmaps",
            Kind::PersistentVolumeClaim => "persistentvolumeclaims",
            Kind::Service => "services",
            Kind::Deployment => "deployments",
            Kind::StatefulSet => "statefulsets",
            Kind::Job => "jobs",
            Kind::NimCache => "nimcaches",
        }
    }

    pub fn from_kind(kind: &str) -> Option<Kind> {
        [Kind::Namespace]
            .into_iter()
            .chain(Kind::NAMESPACED)
            .find(|k| k.kind() == kind)
    }
}

/// One rendered object: its identity and its JSON form (what is applied and written).
#[derive(Clone, Debug, PartialEq)]
pub struct Manifest {
    pub kind: Kind,
    /// `None` for cluster-scoped objects (the Namespace).
    pub namespace: Option<String>,
    pub name: String,
    pub object: Value,
}

impl Manifest {
    /// `Kind namespace/name`, as messages name objects.
    pub fn display_name(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind.kind(), self.name),
            None => format!("{} {}", self.kind.kind(), self.name),
        }
    }

    fn of<T: Serialize>(kind: Kind, namespace: Option<&str>, name: &str, typed: &T) -> Manifest {
        Manifest {
            kind,
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
            // INVARIANT: k8s-openapi types serialise to JSON without error (plain data, string
            // map keys); a failure would be a bug in the bindings, so `Null` is never applied
            // silently: the test suite validates every rendered object.
            object: serde_json::to_value(typed).unwrap_or(Value::Null),
        }
    }
}

/// Everything rendered for one cluster (kubeconfig context).
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterManifests {
    pub context: String,
    /// The plan targets rendered into this cluster, in plan order.
    pub targets: Vec<String>,
    /// Namespaces first, then each placement's objects in plan order.
    pub manifests: Vec<Manifest>,
}

impl ClusterManifests {
    /// The namespaces of this cluster's objects, sorted.
    pub fn namespaces(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .manifests
            .iter()
            .filter(|m| m.kind == Kind::Namespace)
            .map(|m| m.name.clone())
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

/// A placement on a target this backend does not handle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OtherPlacement {
    pub workload: String,
    pub target: String,
    /// `arc`, `edge` or `local`.
    pub runtime: &'static str,
}

/// The Kubernetes objects of a plan.
#[derive(Clone, Debug, PartialEq)]
pub struct Rendered {
    pub plan_id: String,
    /// Sorted by context.
    pub clusters: Vec<ClusterManifests>,
    /// Placements on other runtimes, in plan order (another backend's work).
    pub others: Vec<OtherPlacement>,
    /// Plan targets on a kubernetes runtime that have no placement (prune still visits them).
    pub idle_targets: Vec<(String, String)>,
    /// Arc-attached targets: objects committed to a GitOps repository, in plan order.
    pub gitops: Vec<GitOpsTarget>,
}

/// The runtime kind of a target, as written in the language.
pub fn runtime_name(runtime: &Runtime) -> &'static str {
    match runtime {
        Runtime::Kubernetes { .. } => "kubernetes",
        Runtime::Arc { .. } => "arc",
        Runtime::Edge { .. } => "edge",
        Runtime::Local => "local",
    }
}

/// Renders every placement of `plan` on a kubernetes target. Placements naming a workload or
/// target the IR does not have are skipped (the verifier rejects such plans before this).
pub fn render(ir: &Ir, plan: &Plan) -> Rendered {
    let mut clusters: BTreeMap<String, ClusterManifests> = BTreeMap::new();
    let mut others = Vec::new();
    let mut gitops: Vec<GitOpsTarget> = Vec::new();
    for target in &ir.targets {
        match &target.runtime {
            Runtime::Kubernetes {
                context, namespace, ..
            } => {
                let cluster = cluster_entry(&mut clusters, context);
                cluster.targets.push(target.name.clone());
                let ns = namespace_object(namespace, &plan.plan_id);
                if !cluster.manifests.contains(&ns) {
                    cluster.manifests.push(ns);
                }
            }
            // Every Arc target has its folder and its kustomization, placements or not: an
            // idle one's folder holds its Namespace only (what ran there is pruned by Flux),
            // and its cluster keeps its Flux configuration.
            Runtime::Arc {
                cluster,
                repo,
                branch,
                path,
                namespace,
                context,
                ..
            } => {
                gitops_entry(
                    &mut gitops,
                    target,
                    (cluster, repo, branch, path, namespace, context.as_deref()),
                    &plan.plan_id,
                );
            }
            _ => {}
        }
    }
    for wp in &plan.workloads {
        let Some(workload) = ir.workload_by_name(&wp.workload).map(|id| ir.workload(id)) else {
            continue;
        };
        for placement in &wp.placements {
            let Some(target) = ir.target_by_name(&placement.target).map(|id| ir.target(id)) else {
                continue;
            };
            // Several placements of one workload in one namespace need distinct names.
            let sharing = |namespace: &str, same: &dyn Fn(&Placement) -> bool| {
                let shared = wp.placements.iter().filter(|p| same(p)).count() > 1;
                Site {
                    ir,
                    plan,
                    workload,
                    target,
                    placement,
                    pool: placement
                        .pool
                        .as_deref()
                        .and_then(|name| target.pools.iter().find(|p| p.name == name)),
                    namespace: namespace.to_string(),
                    name: object_name(workload, placement, shared),
                }
            };
            match &target.runtime {
                Runtime::Kubernetes {
                    context, namespace, ..
                } => {
                    let site = sharing(namespace, &|p| {
                        same_namespace(ir, &p.target, context, namespace)
                    });
                    cluster_entry(&mut clusters, context)
                        .manifests
                        .extend(site.manifests());
                }
                Runtime::Arc {
                    cluster,
                    repo,
                    branch,
                    path,
                    namespace,
                    context,
                    ..
                } => {
                    let site = sharing(namespace, &|p| p.target == placement.target);
                    gitops_entry(
                        &mut gitops,
                        target,
                        (cluster, repo, branch, path, namespace, context.as_deref()),
                        &plan.plan_id,
                    )
                    .manifests
                    .extend(site.manifests());
                }
                Runtime::Edge { .. } | Runtime::Local => others.push(OtherPlacement {
                    workload: wp.workload.clone(),
                    target: placement.target.clone(),
                    runtime: runtime_name(&target.runtime),
                }),
            }
        }
    }
    let idle_targets = ir
        .targets
        .iter()
        .filter(|t| matches!(t.runtime, Runtime::Kubernetes { .. }))
        .filter(|t| {
            !plan
                .workloads
                .iter()
                .any(|w| w.placements.iter().any(|p| p.target == t.name))
        })
        .map(|t| (t.name.clone(), runtime_name(&t.runtime).to_string()))
        .collect();
    Rendered {
        plan_id: plan.plan_id.clone(),
        clusters: clusters.into_values().collect(),
        others,
        idle_targets,
        gitops,
    }
}

fn cluster_entry<'a>(
    clusters: &'a mut BTreeMap<String, ClusterManifests>,
    context: &str,
) -> &'a mut ClusterManifests {
    clusters
        .entry(context.to_string())
        .or_insert_with(|| ClusterManifests {
            context: context.to_string(),
            targets: Vec::new(),
            manifests: Vec::new(),
        })
}

fn same_namespace(ir: &Ir, target: &str, context: &str, namespace: &str) -> bool {
    ir.target_by_name(target)
        .map(|id| &ir.target(id).runtime)
        .is_some_and(|r| {
            matches!(r, Runtime::Kubernetes { context: c, namespace: n, .. } if c == context && n == namespace)
        })
}

fn namespace_object(name: &str, plan_id: &str) -> Manifest {
    let typed = Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(BTreeMap::from([(
                MANAGED_BY.0.to_string(),
                MANAGED_BY.1.to_string(),
            )])),
            annotations: Some(BTreeMap::from([(
                labels::PLAN_ID.to_string(),
                plan_id.to_string(),
            )])),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Manifest::of(Kind::Namespace, None, name, &typed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_dns_labels() {
        assert_eq!(dns_label("vision_inspect"), "vision-inspect");
        assert_eq!(dns_label("__A__"), "a");
        let long = "w".repeat(80);
        let name = dns_label(&long);
        assert_eq!(name.len(), 63);
        assert_ne!(name, dns_label(&"w".repeat(81)));
    }

    #[test]
    fn quantities_use_the_largest_exact_unit() {
        assert_eq!(cpu_quantity(4000), "4");
        assert_eq!(cpu_quantity(500), "500m");
        assert_eq!(memory_quantity(32 << 30), "32Gi");
        assert_eq!(memory_quantity(1536 << 20), "1536Mi");
        assert_eq!(memory_quantity(1000), "1000");
    }

    #[test]
    fn label_values_are_valid() {
        assert_eq!(
            plan_label("sha256:0123456789abcdef0123"),
            "0123456789abcdef"
        );
        assert_eq!(label_value("1.8.4"), "1.8.4");
        assert_eq!(label_value("a b/"), "a_b");
        assert_eq!(label_value(&"x".repeat(70)).len(), 63);
    }
}
