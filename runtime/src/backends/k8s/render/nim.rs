//! Models cached by the NVIDIA NIM Operator: on a `kubernetes` or `arc` target whose service
//! catalogue offers `nim_operator`, a variant whose artifact is `ngc://…` or `hf://NS/MODEL`
//! is cached by a `NIMCache` (`apps.nvidia.com/v1alpha1`) instead of berth's own staging
//! (`staging.rs`), and berth's own Deployment, Job or StatefulSet mounts the volume the
//! operator fills, read-only at [`NIM_MOUNT`] (where NIM containers read their cache,
//! `NIM_CACHE_PATH`).
//!
//! Only those two schemes: a `NIMCache` pulls from NGC, a NeMo data store or Hugging Face, and
//! verifies no digest, so an `oci://` or `https://` artifact with a digest keeps `berth fetch`
//! even where the operator runs.
//!
//! The cache's name carries a hash of the artifact and the model puller (the operator refuses
//! a change of puller on an existing cache): a new release that changes either makes a new
//! cache and a new volume, and the old cache is pruned like any object berth no longer
//! renders. The volume is the operator's (it creates it, named by berth in `storage.pvc.name`).

use super::*;
use k8s_openapi::api::core::v1::{PersistentVolumeClaimVolumeSource, Volume, VolumeMount};
use serde_json::json;

/// The service a target offers where the NIM Operator runs.
pub const NIM_SERVICE: &str = "nim_operator";
/// Where pods see a `NIMCache`'s volume (the NIM Operator's own NIMService mounts it there).
pub const NIM_MOUNT: &str = "/model-store";
/// The Secret with `NGC_API_KEY` or `HF_TOKEN`, by the name NVIDIA's documentation gives it.
const DEFAULT_AUTH_SECRET: &str = "ngc-api-secret";
/// The image pull Secret of `nvcr.io`, by the name NVIDIA's documentation gives it.
const DEFAULT_PULL_SECRET: &str = "ngc-secret";
/// Where an `hf://` artifact is pulled from.
const HF_ENDPOINT: &str = "https://huggingface.co";

/// Where a `NIMCache` pulls a model from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NimSource<'a> {
    /// `ngc://ORG/…:TAG`, passed whole as the cache's `modelEndpoint`.
    Ngc(&'a str),
    /// `hf://NAMESPACE/MODEL`.
    HuggingFace { namespace: &'a str, model: &'a str },
}

/// The `NIMCache` source of an artifact, if a `NIMCache` can pull it.
pub fn nim_source(artifact: &str) -> Option<NimSource<'_>> {
    if let Some(rest) = artifact.strip_prefix("ngc://") {
        return (!rest.is_empty() && !rest.contains(char::is_whitespace))
            .then_some(NimSource::Ngc(artifact));
    }
    let rest = artifact.strip_prefix("hf://")?;
    let (namespace, model) = rest.split_once('/')?;
    let plain =
        |s: &str| !s.is_empty() && !s.contains(['/', ':', '@']) && !s.contains(char::is_whitespace);
    (plain(namespace) && plain(model)).then_some(NimSource::HuggingFace { namespace, model })
}

/// What one placement caches through the NIM Operator.
pub(super) struct NimCache<'a> {
    pub(super) artifact: &'a str,
    pub(super) source: NimSource<'a>,
    pub(super) auth_secret: &'a str,
    pub(super) model_puller: &'a str,
    pub(super) pull_secret: &'a str,
    pub(super) storage_class: Option<&'a str>,
}

impl Site<'_> {
    /// Whether the target's catalogue offers the NIM Operator (at any maturity but `absent`).
    fn offers_nim_operator(&self) -> bool {
        self.target.services.iter().any(|offer| {
            offer.maturity != berth_compiler::ir::Maturity::Absent
                && self
                    .ir
                    .services
                    .get(offer.service.index())
                    .is_some_and(|s| s.name == NIM_SERVICE)
        })
    }

    /// The `NIMCache` of this placement, if its model is cached by the NIM Operator.
    pub(super) fn nim_cache(&self) -> Option<NimCache<'_>> {
        let variant = self.placement.variant.as_ref()?;
        let staging = match &self.target.runtime {
            Runtime::Kubernetes { staging, .. } | Runtime::Arc { staging, .. } => staging,
            Runtime::Edge { .. } | Runtime::Local => return None,
        };
        let source = nim_source(&variant.artifact)?;
        if !self.offers_nim_operator() || self.model_cached_at_site() {
            return None;
        }
        Some(NimCache {
            artifact: &variant.artifact,
            source,
            auth_secret: staging
                .nim_auth_secret
                .as_deref()
                .unwrap_or(DEFAULT_AUTH_SECRET),
            model_puller: staging
                .nim_model_puller
                .as_deref()
                .unwrap_or(&self.workload.image),
            pull_secret: staging
                .nim_pull_secret
                .as_deref()
                .unwrap_or(DEFAULT_PULL_SECRET),
            storage_class: staging.storage_class.as_deref(),
        })
    }

    /// The cache's name, which is also its volume's: the artifact and the puller hashed in.
    pub(super) fn nim_cache_name(&self, cache: &NimCache<'_>) -> String {
        let hash = Sha256::digest(format!("{}\n{}", cache.artifact, cache.model_puller));
        let hex: String = hash.iter().take(6).map(|b| format!("{b:02x}")).collect();
        dns_label(&format!("{}-nim-{hex}", self.name))
    }

    /// The `NIMCache` object.
    pub(super) fn nim_manifest(&self, cache: &NimCache<'_>) -> Manifest {
        let name = self.nim_cache_name(cache);
        let mut annotations = BTreeMap::from([
            (labels::PLAN_ID.to_string(), self.plan.plan_id.clone()),
            (labels::ARTIFACT.to_string(), cache.artifact.to_string()),
        ]);
        if let Some(v) = &self.placement.variant {
            annotations.insert(
                labels::MODEL.to_string(),
                format!("{}@{}/{}", v.model, v.version, v.variant),
            );
        }
        let source = match cache.source {
            NimSource::Ngc(endpoint) => json!({
                "ngc": {
                    "modelPuller": cache.model_puller,
                    "pullSecret": cache.pull_secret,
                    "authSecret": cache.auth_secret,
                    "modelEndpoint": endpoint,
                }
            }),
            NimSource::HuggingFace { namespace, model } => json!({
                "hf": {
                    "endpoint": HF_ENDPOINT,
                    "namespace": namespace,
                    "modelName": model,
                    "modelPuller": cache.model_puller,
                    "pullSecret": cache.pull_secret,
                    "authSecret": cache.auth_secret,
                }
            }),
        };
        let mut pvc = json!({
            "create": true,
            "name": name,
            "size": memory_quantity(self.claim_bytes()),
            "volumeAccessMode": self.access_mode(),
        });
        if let Some(class) = cache.storage_class {
            pvc["storageClass"] = json!(class);
        }
        let object = json!({
            "apiVersion": Kind::NimCache.api_version(),
            "kind": Kind::NimCache.kind(),
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": self.staging_labels(true),
                "annotations": annotations,
            },
            "spec": {
                "source": source,
                "storage": { "pvc": pvc },
            },
        });
        Manifest {
            kind: Kind::NimCache,
            namespace: Some(self.namespace.clone()),
            name,
            object,
        }
    }

    /// What the workload's pods get: the cache's volume, mounted read-only in every container
    /// at [`NIM_MOUNT`], `NIM_CACHE_PATH` and `BERTH_MODEL_PATH` naming it.
    pub(super) fn nim_pod(&self, cache: &NimCache<'_>, spec: &mut PodSpec) {
        let mount = VolumeMount {
            name: "model".to_string(),
            mount_path: NIM_MOUNT.to_string(),
            read_only: Some(true),
            ..VolumeMount::default()
        };
        super::staging::mount_model(
            spec,
            &mount,
            &[
                ("BERTH_MODEL_PATH", NIM_MOUNT),
                ("NIM_CACHE_PATH", NIM_MOUNT),
            ],
        );
        spec.volumes.get_or_insert_with(Vec::new).push(Volume {
            name: "model".to_string(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: self.nim_cache_name(cache),
                read_only: Some(true),
            }),
            ..Volume::default()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ngc_and_hugging_face_artifacts_are_cached_by_the_operator() {
        assert_eq!(
            nim_source("ngc://nim/meta/llama-3.1-8b-instruct:hf"),
            Some(NimSource::Ngc("ngc://nim/meta/llama-3.1-8b-instruct:hf"))
        );
        assert_eq!(
            nim_source("hf://meta-llama/Llama-3.2-1B"),
            Some(NimSource::HuggingFace {
                namespace: "meta-llama",
                model: "Llama-3.2-1B"
            })
        );
        for other in [
            "oci://registry.example.com/llm@sha256:00",
            "https://example.com/model.onnx",
            "ngc://",
            "hf://just-a-model",
            "hf://a/b/c",
            "hf:///model",
            "s3://bucket/model",
        ] {
            assert_eq!(nim_source(other), None, "{other}");
        }
    }
}
