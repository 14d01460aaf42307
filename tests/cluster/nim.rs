//! The NVIDIA NIM Operator's `NIMCache` resource (`apps.nvidia.com/v1alpha1`) in a test
//! cluster: its CustomResourceDefinition installed into the real API server, which then
//! validates every `NIMCache` berth applies against the CRD's structural schema and its CEL
//! rules (berth applies with `fieldValidation=Strict`, so an unknown field is an error).
//!
//! The schema here is a stand-in, written for berth from the operator's published CRD
//! (`config/crd/bases/apps.nvidia.com_nimcaches.yaml` in github.com/NVIDIA/k8s-nim-operator,
//! v1alpha1, read in its 3.x form): the fields berth writes, with the published types,
//! required fields, patterns, length limits and validation rules; the fields berth never writes
//! (env, tolerations, resources, `ngc.model`, …) are left out, so that writing one fails here
//! until it is checked against the published schema and added. It is not the published file:
//! the Go module proxy this project reaches refuses that module (403 for its version list and
//! for v1.0.1), so it cannot be fetched the way Flux's CRDs are (`build-flux.sh`).

use super::Cluster;
use serde_json::{Value, json};
use std::time::Duration;

/// The CRD's name.
pub const CRD: &str = "nimcaches.apps.nvidia.com";

/// The collection of `NIMCache`s in `namespace`.
pub fn collection(namespace: &str) -> String {
    format!("/apis/apps.nvidia.com/v1alpha1/namespaces/{namespace}/nimcaches")
}

fn string() -> Value {
    json!({"type": "string"})
}

fn nonempty() -> Value {
    json!({"type": "string", "minLength": 1})
}

/// The stand-in CustomResourceDefinition (see the module's doc).
pub fn crd() -> Value {
    let one_of_model_or_dataset = json!([{
        "message": "Exactly one of modelName or datasetName must be defined",
        "rule": "(has(self.modelName) ? 1 : 0) + (has(self.datasetName) ? 1 : 0) == 1",
    }]);
    let ngc = json!({
        "type": "object",
        "required": ["authSecret", "modelPuller"],
        "properties": {
            "authSecret": string(),
            "modelEndpoint": string(),
            "modelPuller": {
                "type": "string",
                "x-kubernetes-validations": [{
                    "message": "modelPuller is an immutable field. Please create a new NIMCache resource instead when you want to change this container.",
                    "rule": "self == oldSelf",
                }],
            },
            "pullSecret": string(),
        },
    });
    let hf = json!({
        "type": "object",
        "required": ["authSecret", "endpoint", "modelPuller", "namespace", "pullSecret"],
        "properties": {
            "authSecret": nonempty(),
            "datasetName": string(),
            "endpoint": {"type": "string", "pattern": "^https?://.*$"},
            "modelName": string(),
            "modelPuller": nonempty(),
            "namespace": nonempty(),
            "pullSecret": nonempty(),
        },
        "x-kubernetes-validations": one_of_model_or_dataset,
    });
    let pvc = json!({
        "type": "object",
        "properties": {
            "annotations": {"type": "object", "additionalProperties": string()},
            "create": {"type": "boolean"},
            "name": string(),
            "size": string(),
            "storageClass": string(),
            "subPath": string(),
            "volumeAccessMode": string(),
        },
        "x-kubernetes-validations": [
            {
                "message": "size is required for pvc creation",
                "rule": "!has(self.create) || !self.create || (has(self.size) && self.size != \"\")",
            },
            {
                "message": "volumeAccessMode is required for pvc creation",
                "rule": "!has(self.create) || !self.create || (has(self.volumeAccessMode) && self.volumeAccessMode != \"\")",
            },
        ],
    });
    let spec = json!({
        "type": "object",
        "required": ["source", "storage"],
        "properties": {
            "source": {
                "type": "object",
                "properties": {
                    "ngc": ngc,
                    "hf": hf,
                    // Not written by berth: kept open so the rule below can name it.
                    "dataStore": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                },
                "x-kubernetes-validations": [{
                    "message": "Exactly one of ngc, dataStore, or hf must be defined",
                    "rule": "(has(self.ngc) ? 1 : 0) + (has(self.dataStore) ? 1 : 0) + (has(self.hf) ? 1 : 0) == 1",
                }],
            },
            "storage": {
                "type": "object",
                "properties": {"hostPath": string(), "pvc": pvc},
            },
        },
    });
    let status = json!({
        "type": "object",
        "properties": {
            "conditions": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
            "profiles": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
            "pvc": string(),
            "state": string(),
        },
    });
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD},
        "spec": {
            "group": "apps.nvidia.com",
            "names": {
                "kind": "NIMCache",
                "listKind": "NIMCacheList",
                "plural": "nimcaches",
                "singular": "nimcache",
            },
            "scope": "Namespaced",
            "versions": [{
                "name": "v1alpha1",
                "served": true,
                "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "apiVersion": string(),
                        "kind": string(),
                        "metadata": {"type": "object"},
                        "spec": spec,
                        "status": status,
                    },
                }},
            }],
        },
    })
}

/// Installs the CRD into `cluster` and waits until it is established.
pub fn install(cluster: &Cluster) {
    let answer = cluster.request(
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        Some(crd()),
    );
    assert_eq!(answer.status, 201, "{:?}", answer.body);
    cluster.wait_crds_established(&[CRD.to_string()], Duration::from_secs(60));
}
