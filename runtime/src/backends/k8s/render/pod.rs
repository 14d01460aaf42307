//! One placement's objects: the ConfigMap of its context, its model staging (`staging.rs`),
//! its Service, and its Deployment,
//! Job or StatefulSet, whose pod template carries the resources, node affinity, packing,
//! tolerations and model variant.

use super::*;

/// One placement being rendered.
pub(super) struct Site<'a> {
    pub(super) ir: &'a Ir,
    pub(super) plan: &'a Plan,
    pub(super) workload: &'a Workload,
    pub(super) target: &'a Target,
    pub(super) placement: &'a Placement,
    pub(super) pool: Option<&'a Pool>,
    pub(super) namespace: String,
    pub(super) name: String,
}

impl Site<'_> {
    pub(super) fn manifests(&self) -> Vec<Manifest> {
        let mut out = vec![self.config_map()];
        if let Some(stage) = self.stage() {
            out.extend(self.staging_manifests(&stage));
        }
        if let Some(cache) = self.nim_cache() {
            out.push(self.nim_manifest(&cache));
        }
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
        let mut spec = PodSpec {
            containers: vec![container],
            affinity: self.affinity(),
            tolerations: self.tolerations(),
            ..PodSpec::default()
        };
        if let Some(stage) = self.stage() {
            self.staged_pod(&stage, &mut spec);
        }
        if let Some(cache) = self.nim_cache() {
            self.nim_pod(&cache, &mut spec);
        }
        PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(self.pod_labels()),
                annotations: self.pod_annotations(),
                ..ObjectMeta::default()
            }),
            spec: Some(spec),
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

pub(super) fn variant_env(v: &VariantBinding) -> Vec<EnvVar> {
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

pub(super) fn variant_annotations(v: &VariantBinding) -> BTreeMap<String, String> {
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
