//! Model staging: for a placement whose variant names an artifact with a digest, a volume
//! (PersistentVolumeClaim) that a Job fills with `berth fetch`, and in every pod of the
//! workload an init container (`berth fetch --check`) that holds the model server back until
//! the volume holds the artifact of that digest, mounted read-only at [`MOUNT`].
//!
//! Nothing is staged when the target's catalogue lists the model under `cached_models` (the
//! site serves it), when the NIM Operator caches it (`nim.rs`: an `ngc://` or `hf://` artifact
//! on a target offering `nim_operator`), when the variant has no digest (nothing to verify
//! against), or when `berth fetch` cannot fetch its scheme (an `ngc://` or `hf://` artifact
//! where no NIM Operator runs: the model server pulls it itself at start, as a NIM container
//! does with its NGC key, from the `BERTH_MODEL_ARTIFACT` it is given).
//!
//! The volume is sized for two versions of the model's largest variant, so that the next
//! version is staged beside the one running pods read (each in its own `HEX/` directory, see
//! [`crate::staging`]): a new variant or release changes the Job (its name carries the digest),
//! never the claim. The access mode follows the spec's replica count, not the plan's, so a
//! re-plan does not change it: `ReadWriteOnce` for one replica, `ReadWriteMany` for more.

use super::*;
use berth_compiler::plan::StagingSource;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimSpec, PersistentVolumeClaimVolumeSource,
    SecretVolumeSource, Volume, VolumeMount, VolumeResourceRequirements,
};

/// Where pods see the staging volume.
pub const MOUNT: &str = "/var/lib/berth/models";
/// Where the staging Job sees the registry Secret.
const SECRET_MOUNT: &str = "/var/run/berth/registry";
/// Seconds the init container waits for the staging Job before failing (the kubelet then
/// restarts it with back-off, so the pod keeps waiting).
const WAIT_SECONDS: &str = "600";
/// Label on the staging objects and pods (their `berth.dev/workload` label would make
/// selectors and status count them as the workload's).
pub const COMPONENT: (&str, &str) = ("berth.dev/component", "model-staging");
/// Label naming the object the staging objects serve.
pub const STAGED_FOR: &str = "berth.dev/staged-for";
/// Headroom when sizes are unknown: a model's variant is assumed no larger than the GPU
/// memory it needs, and never smaller than this.
const MIN_ESTIMATE: u64 = 10 << 30;

/// What one placement stages.
pub(super) struct Stage<'a> {
    pub(super) artifact: &'a str,
    pub(super) digest: &'a str,
    /// Where the Job pulls it from, in order (the plan's `staging.pull`).
    pub(super) sources: &'a [String],
    /// `HEX` of the digest: the artifact's directory on the volume.
    pub(super) dir: String,
    pub(super) image: String,
    pub(super) storage_class: Option<&'a str>,
    pub(super) registry_secret: Option<&'a str>,
}

/// The image with the `berth` binary when the runtime block names none.
pub fn default_fetch_image() -> String {
    format!("berth:{}", env!("CARGO_PKG_VERSION"))
}

impl Stage<'_> {
    /// The sources the Job is told with `--from`, or `None` when it pulls the artifact itself
    /// (the default).
    fn pull_args(&self) -> Option<&[String]> {
        (!self.sources.is_empty() && self.sources != [self.artifact]).then_some(self.sources)
    }
}

impl Site<'_> {
    /// The staging of this placement, if any.
    pub(super) fn stage(&self) -> Option<Stage<'_>> {
        let variant = self.placement.variant.as_ref()?;
        let digest = variant.digest.as_deref()?;
        let dir = crate::staging::dir_name(digest)?;
        if !crate::agent::cache::can_fetch(&variant.artifact) {
            return None;
        }
        // The NIM Operator caches it (`nim.rs`), or the site serves it.
        if self.model_cached_at_site() || self.nim_cache().is_some() {
            return None;
        }
        let staging = match &self.target.runtime {
            Runtime::Kubernetes { staging, .. } | Runtime::Arc { staging, .. } => staging,
            Runtime::Edge { .. } | Runtime::Local => return None,
        };
        Some(Stage {
            artifact: &variant.artifact,
            digest,
            sources: &variant.staging.pull,
            dir,
            image: staging
                .fetch_image
                .clone()
                .unwrap_or_else(default_fetch_image),
            storage_class: staging.storage_class.as_deref(),
            registry_secret: staging.registry_secret.as_deref(),
        })
    }

    /// Whether the target's catalogue lists the placement's model under `cached_models`.
    pub(super) fn model_cached_at_site(&self) -> bool {
        // The plan says so (`staging.from = cached`: the target lists the model).
        self.placement
            .variant
            .as_ref()
            .is_some_and(|variant| variant.staging.from == StagingSource::Cached)
    }

    /// The access mode of a model volume: it follows the spec's replicas, not the plan's, so a
    /// re-plan never changes it.
    pub(super) fn access_mode(&self) -> &'static str {
        if self.workload.replicas > 1 {
            "ReadWriteMany"
        } else {
            "ReadWriteOnce"
        }
    }

    pub(super) fn claim_name(&self) -> String {
        dns_label(&format!("{}-model", self.name))
    }

    /// `NAME-stage-HEX12`, the digest's first 12 hex digits; when the Job pulls from other
    /// sources than the artifact itself (a target's mirrors), `-` and 8 hex digits of a hash
    /// of those sources too: a Job's pod template cannot be changed, so other sources make
    /// another Job, as another digest does.
    fn stage_job_name(&self, stage: &Stage<'_>) -> String {
        match stage.pull_args() {
            None => dns_label(&format!("{}-stage-{}", self.name, &stage.dir[..12])),
            Some(sources) => {
                let hash = <sha2::Sha256 as sha2::Digest>::digest(sources.join("\n").as_bytes());
                dns_label(&format!(
                    "{}-stage-{}-{}",
                    self.name,
                    &stage.dir[..12],
                    berth_compiler::plan::hex(&hash[..4])
                ))
            }
        }
    }

    /// Labels of the staging objects: managed, of this target and plan (prune and status find
    /// them), never the workload's.
    pub(super) fn staging_labels(&self, with_target: bool) -> BTreeMap<String, String> {
        let mut out = BTreeMap::from([
            (MANAGED_BY.0.to_string(), MANAGED_BY.1.to_string()),
            (COMPONENT.0.to_string(), COMPONENT.1.to_string()),
            (STAGED_FOR.to_string(), self.name.clone()),
        ]);
        if with_target {
            out.insert(labels::TARGET.to_string(), self.target.name.clone());
            out.insert(labels::PLAN.to_string(), plan_label(&self.plan.plan_id));
        }
        out
    }

    fn staging_metadata(&self, name: String, stage: &Stage<'_>) -> ObjectMeta {
        let mut annotations = BTreeMap::from([
            (labels::PLAN_ID.to_string(), self.plan.plan_id.clone()),
            (labels::ARTIFACT.to_string(), stage.artifact.to_string()),
            (
                labels::ARTIFACT_DIGEST.to_string(),
                stage.digest.to_string(),
            ),
        ]);
        if let Some(v) = &self.placement.variant {
            annotations.insert(
                labels::MODEL.to_string(),
                format!("{}@{}/{}", v.model, v.version, v.variant),
            );
        }
        ObjectMeta {
            name: Some(name),
            namespace: Some(self.namespace.clone()),
            labels: Some(self.staging_labels(true)),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        }
    }

    /// Bytes the claim asks for: two versions of the largest variant of the model.
    pub(super) fn claim_bytes(&self) -> u64 {
        let per_variant = |v: &berth_compiler::ir::Variant| {
            v.size.unwrap_or_else(|| {
                (v.gpu_memory * u64::from(self.placement.gpus_per_replica.max(1))).max(MIN_ESTIMATE)
            })
        };
        let largest = self
            .workload
            .model
            .map(|m| self.ir.model(m))
            .and_then(|m| m.variants.iter().map(per_variant).max())
            .unwrap_or(MIN_ESTIMATE);
        let gib = 1u64 << 30;
        (largest.saturating_mul(2)).div_ceil(gib).max(1) * gib
    }

    /// The claim and the Job that fills it.
    pub(super) fn staging_manifests(&self, stage: &Stage<'_>) -> Vec<Manifest> {
        let claim_name = self.claim_name();
        let access = self.access_mode();
        let mut claim_meta = self.staging_metadata(claim_name.clone(), stage);
        // The claim outlives versions: only the Job names the artifact.
        if let Some(a) = claim_meta.annotations.as_mut() {
            a.retain(|k, _| k == labels::PLAN_ID);
        }
        let claim = PersistentVolumeClaim {
            metadata: claim_meta,
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(vec![access.to_string()]),
                storage_class_name: stage.storage_class.map(str::to_string),
                resources: Some(VolumeResourceRequirements {
                    requests: Some(BTreeMap::from([(
                        "storage".to_string(),
                        Quantity(memory_quantity(self.claim_bytes())),
                    )])),
                    ..VolumeResourceRequirements::default()
                }),
                ..PersistentVolumeClaimSpec::default()
            }),
            ..PersistentVolumeClaim::default()
        };
        let mut args = vec![
            "fetch".to_string(),
            stage.artifact.to_string(),
            "--digest".to_string(),
            stage.digest.to_string(),
            "--into".to_string(),
            MOUNT.to_string(),
        ];
        for source in stage.pull_args().unwrap_or_default() {
            args.extend(["--from".to_string(), source.clone()]);
        }
        let mut mounts = vec![VolumeMount {
            name: "model".to_string(),
            mount_path: MOUNT.to_string(),
            ..VolumeMount::default()
        }];
        let mut volumes = vec![self.model_volume(false)];
        if let Some(secret) = stage.registry_secret {
            args.extend([
                "--registry-secret-dir".to_string(),
                SECRET_MOUNT.to_string(),
            ]);
            mounts.push(VolumeMount {
                name: "registry".to_string(),
                mount_path: SECRET_MOUNT.to_string(),
                read_only: Some(true),
                ..VolumeMount::default()
            });
            volumes.push(Volume {
                name: "registry".to_string(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some(secret.to_string()),
                    ..SecretVolumeSource::default()
                }),
                ..Volume::default()
            });
        }
        let job_name = self.stage_job_name(stage);
        let job = Job {
            metadata: self.staging_metadata(job_name.clone(), stage),
            spec: Some(JobSpec {
                backoff_limit: Some(6),
                template: PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some(self.staging_labels(false)),
                        ..ObjectMeta::default()
                    }),
                    spec: Some(PodSpec {
                        restart_policy: Some("OnFailure".to_string()),
                        containers: vec![Container {
                            name: "stage".to_string(),
                            image: Some(stage.image.clone()),
                            args: Some(args),
                            volume_mounts: Some(mounts),
                            ..Container::default()
                        }],
                        volumes: Some(volumes),
                        ..PodSpec::default()
                    }),
                },
                ..JobSpec::default()
            }),
            ..Job::default()
        };
        vec![
            Manifest::of(
                Kind::PersistentVolumeClaim,
                Some(self.namespace.as_str()),
                &claim_name,
                &claim,
            ),
            Manifest::of(Kind::Job, Some(self.namespace.as_str()), &job_name, &job),
        ]
    }

    fn model_volume(&self, read_only: bool) -> Volume {
        Volume {
            name: "model".to_string(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: self.claim_name(),
                read_only: read_only.then_some(true),
            }),
            ..Volume::default()
        }
    }

    /// What the workload's pods get: the init container that waits for the artifact, the
    /// read-only mount, the volume and `BERTH_MODEL_PATH`.
    pub(super) fn staged_pod(&self, stage: &Stage<'_>, spec: &mut PodSpec) {
        let mount = VolumeMount {
            name: "model".to_string(),
            mount_path: MOUNT.to_string(),
            read_only: Some(true),
            ..VolumeMount::default()
        };
        spec.init_containers = Some(vec![Container {
            name: "model-staged".to_string(),
            image: Some(stage.image.clone()),
            args: Some(
                [
                    "fetch",
                    "--check",
                    "--digest",
                    stage.digest,
                    "--into",
                    MOUNT,
                    "--wait",
                    WAIT_SECONDS,
                ]
                .map(str::to_string)
                .to_vec(),
            ),
            volume_mounts: Some(vec![mount.clone()]),
            ..Container::default()
        }]);
        let path = format!("{MOUNT}/{}", stage.dir);
        mount_model(spec, &mount, &[("BERTH_MODEL_PATH", &path)]);
        spec.volumes
            .get_or_insert_with(Vec::new)
            .push(self.model_volume(true));
    }
}

/// Mounts a model volume in every container of `spec`, with the variables naming its path.
pub(super) fn mount_model(spec: &mut PodSpec, mount: &VolumeMount, env: &[(&str, &str)]) {
    for container in &mut spec.containers {
        container
            .volume_mounts
            .get_or_insert_with(Vec::new)
            .push(mount.clone());
        let vars = container.env.get_or_insert_with(Vec::new);
        for (name, value) in env {
            vars.push(EnvVar {
                name: (*name).to_string(),
                value: Some((*value).to_string()),
                ..EnvVar::default()
            });
        }
    }
}
