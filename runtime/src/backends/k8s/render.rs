//! Rendering: every placement of a plan on a `kubernetes` target becomes typed k8s-openapi
//! objects (a ConfigMap with the placement context, a Service when the workload exposes ports
//! or is a notebook, and a Deployment, Job or StatefulSet by workload kind), grouped per
//! cluster (kubeconfig context) and namespace.
//!
//! Pure and deterministic: the same IR and plan give the same objects in the same order, and
//! the same YAML bytes. Nothing here talks to a cluster.
//!
//! Pod templates carry only what should restart pods when it changes (image, resources,
//! model variant, target and pool): the plan id changes with every re-plan, so it is on the
//! objects' metadata and in the ConfigMap, never in a pod template.

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

/// Label keys berth sets (besides [`MANAGED_BY`]).
pub mod labels {
    pub const NAME: &str = "app.kubernetes.io/name";
    pub const VERSION: &str = "app.kubernetes.io/version";
    pub const WORKLOAD: &str = "berth.dev/workload";
    pub const RELEASE: &str = "berth.dev/release";
    pub const TARGET: &str = "berth.dev/target";
    pub const POOL: &str = "berth.dev/pool";
    pub const VARIANT: &str = "berth.dev/variant";
    /// The first 16 hex digits of the plan id (a label value holds at most 63 characters).
    pub const PLAN: &str = "berth.dev/plan";
    /// Annotation: the full plan id.
    pub const PLAN_ID: &str = "berth.dev/plan-id";
    /// Annotation: `model@version` and the variant's artifact and digest.
    pub const MODEL: &str = "berth.dev/model";
    pub const ARTIFACT: &str = "berth.dev/artifact";
    pub const ARTIFACT_DIGEST: &str = "berth.dev/artifact-digest";
}

/// The kinds of object berth renders and manages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Namespace,
    ConfigMap,
    Service,
    Deployment,
    StatefulSet,
    Job,
}

impl Kind {
    /// The namespaced kinds prune and status look at, in apply order.
    pub const NAMESPACED: [Kind; 5] = [
        Kind::ConfigMap,
        Kind::Service,
        Kind::Deployment,
        Kind::StatefulSet,
        Kind::Job,
    ];

    pub fn group(self) -> &'static str {
        match self {
            Kind::Namespace | Kind::ConfigMap | Kind::Service => "",
            Kind::Deployment | Kind::StatefulSet => "apps",
            Kind::Job => "batch",
        }
    }

    pub fn api_version(self) -> &'static str {
        match self.group() {
            "" => "v1",
            "apps" => "apps/v1",
            _ => "batch/v1",
        }
    }

    pub fn kind(self) -> &'static str {
        match self {
            Kind::Namespace => "Namespace",
            Kind::ConfigMap => "ConfigMap",
            Kind::Service => "Service",
            Kind::Deployment => "Deployment",
            Kind::StatefulSet => "StatefulSet",
            Kind::Job => "Job",
        }
    }

    /// The resource name in API paths.
    pub fn plural(self) -> &'static str {
        match self {
            Kind::Namespace => "namespaces",
            Kind::ConfigMap => "configmaps",
            Kind::Service => "services",
            Kind::Deployment => "deployments",
            Kind::StatefulSet => "statefulsets",
            Kind::Job => "jobs",
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

/// What one Arc-attached target's Flux configuration reconciles: objects written to `path`
/// on `branch` of `repo`.
#[derive(Clone, Debug, PartialEq)]
pub struct GitOpsTarget {
    pub target: String,
    pub repo: String,
    pub branch: String,
    /// The folder of this cluster's kustomization in the repository.
    pub path: String,
    pub namespace: String,
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

fn gitops_entry<'a>(
    gitops: &'a mut Vec<GitOpsTarget>,
    target: &Target,
    (repo, branch, path, namespace): (&str, &str, &str, &str),
    plan_id: &str,
) -> &'a mut GitOpsTarget {
    let index = match gitops.iter().position(|g| g.target == target.name) {
        Some(i) => i,
        None => {
            gitops.push(GitOpsTarget {
                target: target.name.clone(),
                repo: repo.to_string(),
                branch: branch.to_string(),
                path: path.to_string(),
                namespace: namespace.to_string(),
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
        if let Runtime::Kubernetes { context, namespace } = &target.runtime {
            let cluster = cluster_entry(&mut clusters, context);
            cluster.targets.push(target.name.clone());
            let ns = namespace_object(namespace, &plan.plan_id);
            if !cluster.manifests.contains(&ns) {
                cluster.manifests.push(ns);
            }
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
                Runtime::Kubernetes { context, namespace } => {
                    let site = sharing(namespace, &|p| {
                        same_namespace(ir, &p.target, context, namespace)
                    });
                    cluster_entry(&mut clusters, context)
                        .manifests
                        .extend(site.manifests());
                }
                Runtime::Arc {
                    repo,
                    branch,
                    path,
                    namespace,
                    ..
                } => {
                    let site = sharing(namespace, &|p| p.target == placement.target);
                    gitops_entry(
                        &mut gitops,
                        target,
                        (repo, branch, path, namespace),
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
            matches!(r, Runtime::Kubernetes { context: c, namespace: n } if c == context && n == namespace)
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

/// The object name of a placement: the workload's name as a DNS label, with target and pool
/// appended when the workload has several placements in one namespace.
fn object_name(workload: &Workload, placement: &Placement, shared: bool) -> String {
    let mut raw = workload.name.clone();
    if shared {
        raw.push('-');
        raw.push_str(&placement.target);
        if let Some(pool) = &placement.pool {
            raw.push('-');
            raw.push_str(pool);
        }
    }
    dns_label(&raw)
}

/// A DNS-1123 label (lowercase alphanumerics and `-`, at most 63 characters, alphanumeric at
/// both ends). Longer names keep 54 characters and a hash of the whole name, so two long
/// names stay distinct.
pub fn dns_label(raw: &str) -> String {
    let mut out: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    out = out.trim_matches('-').to_string();
    if out.is_empty() {
        out.push('x');
    }
    if out.len() > 63 {
        let hash = Sha256::digest(raw.as_bytes());
        let suffix = berth_compiler::plan::hex(&hash[..4]);
        out.truncate(54);
        out = format!("{}-{suffix}", out.trim_end_matches('-'));
    }
    out
}

/// One placement being rendered.
struct Site<'a> {
    ir: &'a Ir,
    plan: &'a Plan,
    workload: &'a Workload,
    target: &'a Target,
    placement: &'a Placement,
    pool: Option<&'a Pool>,
    namespace: String,
    name: String,
}

impl Site<'_> {
    fn manifests(&self) -> Vec<Manifest> {
        let mut out = vec![self.config_map()];
        if let Some(service) = self.service() {
            out.push(service);
        }
        out.push(self.workload_object());
        out
    }

    fn config_map_name(&self) -> String {
        format!("{}-placement", self.name)
    }

    /// Labels that identify the pods of this placement (and select them).
    fn selector_labels(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::from([
            (labels::WORKLOAD.to_string(), self.workload.name.clone()),
            (labels::TARGET.to_string(), self.target.name.clone()),
        ]);
        if let Some(pool) = &self.placement.pool {
            out.insert(labels::POOL.to_string(), pool.clone());
        }
        out
    }

    /// Labels of pods: selector labels, release, variant, managed-by.
    fn pod_labels(&self) -> BTreeMap<String, String> {
        let mut out = self.selector_labels();
        out.insert(MANAGED_BY.0.to_string(), MANAGED_BY.1.to_string());
        out.insert(labels::NAME.to_string(), label_value(&self.workload.name));
        out.insert(
            labels::RELEASE.to_string(),
            label_value(&self.workload.release),
        );
        out.insert(
            labels::VERSION.to_string(),
            label_value(&self.workload.release),
        );
        if let Some(v) = &self.placement.variant {
            out.insert(labels::VARIANT.to_string(), label_value(&v.variant));
        }
        out
    }

    fn pod_annotations(&self) -> Option<BTreeMap<String, String>> {
        self.placement.variant.as_ref().map(variant_annotations)
    }

    fn metadata(&self, name: String) -> ObjectMeta {
        let mut object_labels = self.pod_labels();
        object_labels.insert(labels::PLAN.to_string(), plan_label(&self.plan.plan_id));
        let mut annotations = self.pod_annotations().unwrap_or_default();
        annotations.insert(labels::PLAN_ID.to_string(), self.plan.plan_id.clone());
        ObjectMeta {
            name: Some(name),
            namespace: Some(self.namespace.to_string()),
            labels: Some(object_labels),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        }
    }

    fn config_map(&self) -> Manifest {
        let mut data = BTreeMap::from([
            ("BERTH_WORKLOAD".to_string(), self.workload.name.clone()),
            ("BERTH_RELEASE".to_string(), self.workload.release.clone()),
            ("BERTH_TARGET".to_string(), self.target.name.clone()),
            ("BERTH_PLAN_ID".to_string(), self.plan.plan_id.clone()),
            (
                "BERTH_ENVIRONMENT".to_string(),
                self.target.class.to_string(),
            ),
        ]);
        if let Some(pool) = &self.placement.pool {
            data.insert("BERTH_POOL".to_string(), pool.clone());
        }
        if let Some(acc) = &self.placement.accelerator {
            data.insert("BERTH_ACCELERATOR".to_string(), acc.clone());
        }
        if let Some(region) = &self.target.region {
            data.insert("BERTH_REGION".to_string(), region.clone());
        }
        for d in &self.placement.data {
            let key = env_name(&format!("BERTH_DATA_{}", d.name));
            data.insert(format!("{key}_DATASET"), d.dataset.clone());
            data.insert(format!("{key}_LOCALITY"), d.locality.clone());
            if let Some(endpoint) = &d.endpoint {
                data.insert(format!("{key}_ENDPOINT"), endpoint.clone());
            }
        }
        for s in &self.placement.services {
            let key = env_name(&format!("BERTH_SERVICE_{}", s.service));
            data.insert(key, s.maturity.clone());
        }
        let name = self.config_map_name();
        let typed = ConfigMap {
            metadata: self.metadata(name.clone()),
            data: Some(data),
            ..ConfigMap::default()
        };
        Manifest::of(
            Kind::ConfigMap,
            Some(self.namespace.as_str()),
            &name,
            &typed,
        )
    }

    fn service(&self) -> Option<Manifest> {
        let headless = self.workload.kind == WorkloadKind::Notebook;
        if self.workload.ports.is_empty() && !headless {
            return None;
        }
        let ports = self
            .workload
            .ports
            .iter()
            .map(|p| ServicePort {
                name: Some(format!("port-{p}")),
                port: i32::from(*p),
                target_port: Some(IntOrString::Int(i32::from(*p))),
                protocol: Some("TCP".to_string()),
                ..ServicePort::default()
            })
            .collect::<Vec<_>>();
        let typed = Service {
            metadata: self.metadata(self.name.clone()),
            spec: Some(ServiceSpec {
                selector: Some(self.selector_labels()),
                ports: (!ports.is_empty()).then_some(ports),
                cluster_ip: headless.then(|| "None".to_string()),
                ..ServiceSpec::default()
            }),
            ..Service::default()
        };
        Some(Manifest::of(
            Kind::Service,
            Some(self.namespace.as_str()),
            &self.name,
            &typed,
        ))
    }

    fn workload_object(&self) -> Manifest {
        let template = self.pod_template();
        let replicas = i32::try_from(self.placement.replicas).unwrap_or(i32::MAX);
        let selector = LabelSelector {
            match_labels: Some(self.selector_labels()),
            ..LabelSelector::default()
        };
        let metadata = self.metadata(self.name.clone());
        let ns = Some(self.namespace.as_str());
        match self.workload.kind {
            WorkloadKind::Service | WorkloadKind::Agent => Manifest::of(
                Kind::Deployment,
                ns,
                &self.name,
                &Deployment {
                    metadata,
                    spec: Some(DeploymentSpec {
                        replicas: Some(replicas),
                        selector,
                        template,
                        ..DeploymentSpec::default()
                    }),
                    ..Deployment::default()
                },
            ),
            WorkloadKind::Notebook => Manifest::of(
                Kind::StatefulSet,
                ns,
                &self.name,
                &StatefulSet {
                    metadata,
                    spec: Some(StatefulSetSpec {
                        replicas: Some(replicas),
                        selector,
                        service_name: Some(self.name.clone()),
                        template,
                        ..StatefulSetSpec::default()
                    }),
                    ..StatefulSet::default()
                },
            ),
            WorkloadKind::Batch => {
                let mut template = template;
                if let Some(spec) = &mut template.spec {
                    spec.restart_policy = Some("OnFailure".to_string());
                }
                Manifest::of(
                    Kind::Job,
                    ns,
                    &self.name,
                    &Job {
                        metadata,
                        spec: Some(JobSpec {
                            completions: Some(replicas),
                            parallelism: Some(replicas),
                            backoff_limit: Some(6),
                            template,
                            ..JobSpec::default()
                        }),
                        ..Job::default()
                    },
                )
            }
        }
    }

    fn pod_template(&self) -> PodTemplateSpec {
        let container = Container {
            name: dns_label(&self.workload.name),
            image: Some(self.workload.image.clone()),
            env: self.placement.variant.as_ref().map(variant_env),
            env_from: Some(vec![EnvFromSource {
                config_map_ref: Some(ConfigMapEnvSource {
                    name: self.config_map_name(),
                    optional: Some(false),
                }),
                ..EnvFromSource::default()
            }]),
            ports: (!self.workload.ports.is_empty()).then(|| {
                self.workload
                    .ports
                    .iter()
                    .map(|p| ContainerPort {
                        container_port: i32::from(*p),
                        name: Some(format!("port-{p}")),
                        protocol: Some("TCP".to_string()),
                        ..ContainerPort::default()
                    })
                    .collect()
            }),
            resources: Some(self.resources()),
            ..Container::default()
        };
        PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(self.pod_labels()),
                annotations: self.pod_annotations(),
                ..ObjectMeta::default()
            }),
            spec: Some(PodSpec {
                containers: vec![container],
                affinity: self.affinity(),
                tolerations: self.tolerations(),
                ..PodSpec::default()
            }),
        }
    }

    fn resources(&self) -> ResourceRequirements {
        let r = &self.workload.resources;
        let mut requests = BTreeMap::new();
        if r.cpu_millis > 0 {
            requests.insert("cpu".to_string(), Quantity(cpu_quantity(r.cpu_millis)));
        }
        if r.memory > 0 {
            requests.insert("memory".to_string(), Quantity(memory_quantity(r.memory)));
        }
        // Extended resources (GPUs) are set as limits only: the API server defaults their
        // requests to the limits, and rejects requests that differ from them.
        let limits = self
            .gpu_resource()
            .map(|(name, count)| BTreeMap::from([(name, Quantity(count.to_string()))]));
        ResourceRequirements {
            requests: (!requests.is_empty()).then_some(requests),
            limits,
            ..ResourceRequirements::default()
        }
    }

    /// The extended resource and count per replica: `nvidia.com/gpu`, or the MIG resource of
    /// the profile (`nvidia.com/mig-1g.10gb`) under the mixed strategy of the GPU operator.
    fn gpu_resource(&self) -> Option<(String, u32)> {
        if self.placement.gpus_per_replica == 0 {
            return None;
        }
        let pool = self.pool?;
        Some((
            gpu_resource_name(self.ir, pool, self.workload),
            self.placement.gpus_per_replica,
        ))
    }

    fn affinity(&self) -> Option<Affinity> {
        let pool = self.pool?;
        let pod_affinity = self.packing();
        if pool.node_labels.is_empty() {
            return pod_affinity.map(|pod_affinity| Affinity {
                pod_affinity: Some(pod_affinity),
                ..Affinity::default()
            });
        }
        let expressions = pool
            .node_labels
            .iter()
            .map(|(key, value)| NodeSelectorRequirement {
                key: key.clone(),
                operator: "In".to_string(),
                values: Some(vec![value.clone()]),
            })
            .collect();
        Some(Affinity {
            node_affinity: Some(NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                    node_selector_terms: vec![NodeSelectorTerm {
                        match_expressions: Some(expressions),
                        ..NodeSelectorTerm::default()
                    }],
                }),
                ..NodeAffinity::default()
            }),
            pod_affinity,
            ..Affinity::default()
        })
    }

    /// GPU replicas of one pool packed onto as few nodes as they fit: a strong preference
    /// (not a requirement) for nodes already running replicas placed on the same pool.
    ///
    /// berth counts a pool's GPUs as one amount; the scheduler places each pod on one node.
    /// Left to itself it spreads pods over the least-loaded nodes (its default scoring), so
    /// a pool of two 8-GPU nodes holding two 1-GPU replicas, one per node, has 14 GPUs free
    /// and no node that can take an 8-GPU replica. Packing keeps whole nodes free for the
    /// large replicas, as the pool's count promised (found by tests/k8s_agreement.rs on the
    /// peak-hours example against the real scheduler). It does not make every packing that
    /// fits the pool's count fit its nodes: docs/runtime-kubernetes.md says what is left.
    fn packing(&self) -> Option<PodAffinity> {
        let pool = self.pool?;
        self.gpu_resource()?;
        Some(PodAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                WeightedPodAffinityTerm {
                    weight: 100,
                    pod_affinity_term: PodAffinityTerm {
                        label_selector: Some(LabelSelector {
                            match_labels: Some(BTreeMap::from([
                                (labels::TARGET.to_string(), self.target.name.clone()),
                                (labels::POOL.to_string(), pool.name.clone()),
                            ])),
                            ..LabelSelector::default()
                        }),
                        topology_key: "kubernetes.io/hostname".to_string(),
                        ..PodAffinityTerm::default()
                    },
                },
            ]),
            ..PodAffinity::default()
        })
    }

    fn tolerations(&self) -> Option<Vec<Toleration>> {
        let pool = self.pool?;
        let mut out: Vec<Toleration> = pool
            .taints
            .iter()
            .map(|t| Toleration {
                key: Some(t.key.clone()),
                operator: Some("Equal".to_string()),
                value: Some(t.value.clone()),
                effect: Some(t.effect.clone()),
                ..Toleration::default()
            })
            .collect();
        if self.gpu_resource().is_some() {
            let (resource, _) = self.gpu_resource()?;
            // The taint GPU node pools commonly carry (GKE, AKS, the GPU operator's docs):
            // key = the GPU resource, any value.
            let key = if resource.starts_with("nvidia.com/") {
                "nvidia.com/gpu".to_string()
            } else {
                resource
            };
            if !out.iter().any(|t| t.key.as_deref() == Some(key.as_str())) {
                out.push(Toleration {
                    key: Some(key),
                    operator: Some("Exists".to_string()),
                    effect: Some("NoSchedule".to_string()),
                    ..Toleration::default()
                });
            }
        }
        (!out.is_empty()).then_some(out)
    }
}

/// The extended resource name a pod requests for GPUs of `pool`.
pub fn gpu_resource_name(ir: &Ir, pool: &Pool, workload: &Workload) -> String {
    let vendor = ir.accelerator(pool.accelerator).vendor.as_str();
    let mig = workload.resources.mig.as_ref().or(pool.mig.as_ref());
    match (vendor, mig) {
        ("nvidia", Some(profile)) => format!("nvidia.com/mig-{profile}"),
        ("nvidia", None) => "nvidia.com/gpu".to_string(),
        ("amd", _) => "amd.com/gpu".to_string(),
        ("intel", _) => "gpu.intel.com/i915".to_string(),
        (other, _) => format!("{other}.com/gpu"),
    }
}

/// The extended resource name of a pool's devices, as nodes advertise it.
pub fn pool_resource_name(ir: &Ir, pool: &Pool) -> String {
    let vendor = ir.accelerator(pool.accelerator).vendor.as_str();
    match (vendor, &pool.mig) {
        ("nvidia", Some(profile)) => format!("nvidia.com/mig-{profile}"),
        ("nvidia", None) => "nvidia.com/gpu".to_string(),
        ("amd", _) => "amd.com/gpu".to_string(),
        ("intel", _) => "gpu.intel.com/i915".to_string(),
        (other, _) => format!("{other}.com/gpu"),
    }
}

fn variant_env(v: &VariantBinding) -> Vec<EnvVar> {
    let mut vars = vec![
        ("BERTH_MODEL", v.model.clone()),
        ("BERTH_MODEL_VERSION", v.version.clone()),
        ("BERTH_MODEL_VARIANT", v.variant.clone()),
        ("BERTH_MODEL_ARTIFACT", v.artifact.clone()),
    ];
    if let Some(digest) = &v.digest {
        vars.push(("BERTH_MODEL_DIGEST", digest.clone()));
    }
    vars.into_iter()
        .map(|(name, value)| EnvVar {
            name: name.to_string(),
            value: Some(value),
            ..EnvVar::default()
        })
        .collect()
}

fn variant_annotations(v: &VariantBinding) -> BTreeMap<String, String> {
    let mut out = BTreeMap::from([
        (
            labels::MODEL.to_string(),
            format!("{}@{}/{}", v.model, v.version, v.variant),
        ),
        (labels::ARTIFACT.to_string(), v.artifact.clone()),
    ]);
    if let Some(digest) = &v.digest {
        out.insert(labels::ARTIFACT_DIGEST.to_string(), digest.clone());
    }
    out
}

/// The plan label: the first 16 hex digits of the plan id.
pub fn plan_label(plan_id: &str) -> String {
    let hex = plan_id.strip_prefix("sha256:").unwrap_or(plan_id);
    label_value(&hex.chars().take(16).collect::<String>())
}

/// A valid label value: at most 63 of `[A-Za-z0-9._-]`, alphanumeric at both ends.
pub fn label_value(raw: &str) -> String {
    let mapped: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(63)
        .collect();
    mapped
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_string()
}

/// An environment variable name: uppercase, `_` for anything not alphanumeric.
fn env_name(raw: &str) -> String {
    raw.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// CPU as a Kubernetes quantity: whole cores when exact (`4`), millicores otherwise (`500m`).
pub fn cpu_quantity(millis: u64) -> String {
    if millis.is_multiple_of(1000) {
        (millis / 1000).to_string()
    } else {
        format!("{millis}m")
    }
}

/// Memory as a Kubernetes quantity in the largest binary unit that divides it (`32Gi`).
pub fn memory_quantity(bytes: u64) -> String {
    for (unit, size) in [
        ("Ti", 1u64 << 40),
        ("Gi", 1 << 30),
        ("Mi", 1 << 20),
        ("Ki", 1 << 10),
    ] {
        if bytes.is_multiple_of(size) {
            return format!("{}{unit}", bytes / size);
        }
    }
    bytes.to_string()
}

/// The YAML files of a rendering: `(relative path, contents)`, one file per cluster and
/// namespace (`CONTEXT/NAMESPACE.yaml`, the Namespace object first), sorted by path.
pub fn yaml_files(rendered: &Rendered) -> Vec<(String, String)> {
    let mut files: BTreeMap<String, Vec<&Manifest>> = BTreeMap::new();
    for cluster in &rendered.clusters {
        for m in &cluster.manifests {
            let ns = m.namespace.as_deref().unwrap_or(&m.name);
            files
                .entry(format!(
                    "{}/{}.yaml",
                    path_part(&cluster.context),
                    path_part(ns)
                ))
                .or_default()
                .push(m);
        }
    }
    files
        .into_iter()
        .map(|(path, manifests)| {
            let mut text = format!(
                "# Rendered by berth from plan {}. Do not edit: re-render instead.\n",
                rendered.plan_id
            );
            for m in manifests {
                text.push_str("---\n");
                text.push_str(&to_yaml(&m.object));
            }
            (path, text)
        })
        .collect()
}

/// One object as YAML (keys in sorted order).
pub fn to_yaml(object: &Value) -> String {
    // INVARIANT: a JSON value always serialises to YAML.
    let mut text = serde_saphyr::to_string(object).unwrap_or_default();
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

/// A context or namespace name as a path component: no separators, no leading dot.
fn path_part(name: &str) -> String {
    let mapped: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if mapped.starts_with('.') || mapped.is_empty() {
        format!("_{mapped}")
    } else {
        mapped
    }
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
