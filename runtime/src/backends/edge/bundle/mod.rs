//! Signed bundles: one edge target's slice of a plan, the unit the control plane publishes and
//! an agent accepts (docs/agent.md).
//!
//! A bundle is built from a verified plan and its IR ([`Bundle::from_plan`]), serialised to
//! canonical bytes (deterministic JSON: struct fields in declaration order, lists in plan
//! order, no maps) and signed with the control plane's ed25519 key. The signed form
//! ([`SignedBundle`]) carries the exact signed bytes as a string, so verification never
//! depends on re-serialising.
//!
//! Must never: accept a payload whose signature does not verify, or parse a payload before
//! its signature verified.

pub mod keys;
pub mod store;

use berth_compiler::ir::{Ir, Runtime, Telemetry};
use berth_compiler::plan::{DataBinding, Plan, VariantBinding};
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};

/// The format identifier of a bundle payload.
pub const BUNDLE_FORMAT: &str = "berth.bundle/v1";
/// The format identifier of the signed envelope.
pub const SIGNED_FORMAT: &str = "berth.signed-bundle/v1";

/// One target's desired state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bundle {
    /// Always [`BUNDLE_FORMAT`].
    pub format: String,
    pub target: String,
    /// Strictly increasing per target: an agent accepts only a generation above its own.
    pub generation: u64,
    pub plan_id: String,
    pub workloads: Vec<BundleWorkload>,
}

/// A workload as this target runs it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BundleWorkload {
    pub name: String,
    pub release: String,
    /// `exec:COMMAND` runs COMMAND with `/bin/sh -c` (process runtime); anything else is a
    /// container image (container runtime).
    pub image: String,
    /// `service`, `batch`, `notebook`, `agent`.
    pub kind: String,
    pub class: String,
    /// Replicas on this target.
    pub replicas: u32,
    pub gpus_per_replica: u32,
    pub pool: Option<String>,
    pub accelerator: Option<String>,
    /// The model variant chosen for this target: artifact URI and digest.
    pub variant: Option<VariantBinding>,
    pub data: Vec<DataBinding>,
    pub telemetry: TelemetryContract,
    /// Stop the workload after this long with its GPUs idle (a reclaim rule of the plan).
    pub reclaim: Option<ReclaimContract>,
}

/// How long the agent keeps this workload's telemetry while the link is down.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "mode", content = "nanos")]
pub enum TelemetryContract {
    /// Exported live; the agent still keeps a small buffer ([`LIVE_BUFFER_NS`]).
    Live,
    /// Buffered for up to this many nanoseconds of data.
    Buffer(u64),
}

/// The buffer an agent keeps for `telemetry = live` workloads: one hour.
pub const LIVE_BUFFER_NS: u64 = 3_600_000_000_000;

impl TelemetryContract {
    pub fn buffer_ns(self) -> u64 {
        match self {
            TelemetryContract::Live => LIVE_BUFFER_NS,
            TelemetryContract::Buffer(ns) => ns,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReclaimContract {
    pub policy: String,
    pub idle_after_ns: u64,
}

impl ReclaimContract {
    /// The reclaim rule `workload` is held to: of the plan's rules that apply to it, the one
    /// with the shortest idle time (edge bundles and `berth reclaim` on clusters alike).
    pub fn of(plan: &Plan, workload: &str) -> Option<ReclaimContract> {
        plan.reclaims
            .iter()
            .filter(|r| r.workloads.iter().any(|w| w == workload))
            .min_by_key(|r| r.idle_after_ns)
            .map(|r| ReclaimContract {
                policy: r.policy.clone(),
                idle_after_ns: r.idle_after_ns,
            })
    }
}

/// Which runtime kind serves a target: decides what `berth apply` does with its slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetKind {
    Edge,
    Local,
    Kubernetes,
    Arc,
}

impl TargetKind {
    pub fn of(runtime: &Runtime) -> Self {
        match runtime {
            Runtime::Edge { .. } => TargetKind::Edge,
            Runtime::Local => TargetKind::Local,
            Runtime::Kubernetes { .. } => TargetKind::Kubernetes,
            Runtime::Arc { .. } => TargetKind::Arc,
        }
    }
}

impl Bundle {
    /// The slice of `plan` placed on `target`, at `generation`. Workloads in plan order.
    pub fn from_plan(ir: &Ir, plan: &Plan, target: &str, generation: u64) -> Bundle {
        let mut workloads = Vec::new();
        for wp in &plan.workloads {
            let Some(id) = ir.workload_by_name(&wp.workload) else {
                continue;
            };
            let w = ir.workload(id);
            let placements: Vec<_> = wp
                .placements
                .iter()
                .filter(|p| p.target == target)
                .collect();
            let Some(first) = placements.first() else {
                continue;
            };
            let reclaim = ReclaimContract::of(plan, &w.name);
            workloads.push(BundleWorkload {
                name: w.name.clone(),
                release: w.release.clone(),
                image: w.image.clone(),
                kind: w.kind.as_str().to_string(),
                class: w.class.as_str().to_string(),
                replicas: placements.iter().map(|p| p.replicas).sum(),
                gpus_per_replica: first.gpus_per_replica,
                pool: first.pool.clone(),
                accelerator: first.accelerator.clone(),
                variant: first.variant.clone(),
                data: first.data.clone(),
                telemetry: match w.telemetry {
                    Telemetry::Live => TelemetryContract::Live,
                    Telemetry::Buffer(ns) => TelemetryContract::Buffer(ns),
                },
                reclaim,
            });
        }
        Bundle {
            format: BUNDLE_FORMAT.to_string(),
            target: target.to_string(),
            generation,
            plan_id: plan.plan_id.clone(),
            workloads,
        }
    }

    /// The canonical bytes that are signed: compact JSON, fields in declaration order.
    pub fn canonical_bytes(&self) -> Vec<u8> {
        // INVARIANT: the bundle types hold no maps, so serialisation is deterministic.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Signs the canonical bytes with `key`.
    pub fn sign(&self, key: &SigningKey) -> SignedBundle {
        let payload = String::from_utf8(self.canonical_bytes()).unwrap_or_default();
        let signature = key.sign(payload.as_bytes());
        SignedBundle {
            format: SIGNED_FORMAT.to_string(),
            signature: format!(
                "ed25519:{}",
                berth_compiler::plan::hex(&signature.to_bytes())
            ),
            payload,
        }
    }
}

impl Bundle {
    /// The envelope of a bundle handed over in-process (`runtime = local`): no signature,
    /// since nothing crossed a trust boundary. An agent that pulls never accepts one.
    pub fn unsigned_envelope(&self) -> SignedBundle {
        SignedBundle {
            format: SIGNED_FORMAT.to_string(),
            signature: String::new(),
            payload: String::from_utf8(self.canonical_bytes()).unwrap_or_default(),
        }
    }
}

/// The published file: the exact signed bytes and a detached ed25519 signature over them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignedBundle {
    /// Always [`SIGNED_FORMAT`].
    pub format: String,
    /// `ed25519:` + 128 hex digits.
    pub signature: String,
    /// The bundle's canonical JSON, verbatim.
    pub payload: String,
}

/// Why a published bundle was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BundleError {
    #[error("not a signed bundle: {0}")]
    Malformed(String),
    #[error("the bundle is unsigned")]
    Unsigned,
    #[error("the signature is malformed: it is not `ed25519:` and 128 hex digits")]
    MalformedSignature,
    #[error("the signature does not verify with the trusted key")]
    BadSignature,
    #[error("the payload is not a bundle: {0}")]
    BadPayload(String),
    #[error("generation {offered} is not newer than generation {held} already accepted")]
    NotNewer { offered: u64, held: u64 },
    #[error("the bundle is for target `{offered}`, this agent runs `{expected}`")]
    WrongTarget { offered: String, expected: String },
}

impl SignedBundle {
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = serde_json::to_vec_pretty(self).unwrap_or_default();
        bytes.push(b'\n');
        bytes
    }

    /// Parses a published file and verifies its signature with `trusted`; the payload is
    /// parsed only after the signature verified.
    pub fn verify(
        bytes: &[u8],
        trusted: &VerifyingKey,
    ) -> Result<(SignedBundle, Bundle), BundleError> {
        let signed: SignedBundle =
            serde_json::from_slice(bytes).map_err(|e| BundleError::Malformed(e.to_string()))?;
        if signed.format != SIGNED_FORMAT {
            return Err(BundleError::Malformed(format!(
                "format `{}`",
                signed.format
            )));
        }
        if signed.signature.trim().is_empty() {
            return Err(BundleError::Unsigned);
        }
        let raw: [u8; 64] = signed
            .signature
            .strip_prefix("ed25519:")
            .filter(|hex| hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(keys::from_hex)
            .and_then(|raw| raw.try_into().ok())
            .ok_or(BundleError::MalformedSignature)?;
        let signature = Signature::from_bytes(&raw);
        trusted
            .verify_strict(signed.payload.as_bytes(), &signature)
            .map_err(|_| BundleError::BadSignature)?;
        let bundle: Bundle = serde_json::from_str(&signed.payload)
            .map_err(|e| BundleError::BadPayload(e.to_string()))?;
        if bundle.format != BUNDLE_FORMAT {
            return Err(BundleError::BadPayload(format!(
                "format `{}`",
                bundle.format
            )));
        }
        Ok((signed, bundle))
    }
}

/// Whether `offered` may replace `held` (None: nothing accepted yet). Equal generations are
/// refused too: a generation names one payload, so a second one at the same number is a replay
/// or a forgery by a key holder, and the agent keeps the one it runs.
pub fn admissible(
    offered: &Bundle,
    held: Option<&Bundle>,
    expected_target: Option<&str>,
) -> Result<(), BundleError> {
    let expected = expected_target.or(held.map(|b| b.target.as_str()));
    if let Some(expected) = expected
        && offered.target != expected
    {
        return Err(BundleError::WrongTarget {
            offered: offered.target.clone(),
            expected: expected.to_string(),
        });
    }
    if let Some(held) = held
        && offered.generation <= held.generation
    {
        return Err(BundleError::NotNewer {
            offered: offered.generation,
            held: held.generation,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle(generation: u64) -> Bundle {
        Bundle {
            format: BUNDLE_FORMAT.into(),
            target: "site".into(),
            generation,
            plan_id: "sha256:00".into(),
            workloads: vec![],
        }
    }

    #[test]
    fn signed_bundles_verify_and_tampered_ones_do_not() {
        let key = keys::generate().expect("randomness");
        let signed = bundle(1).sign(&key);
        let (_, back) =
            SignedBundle::verify(&signed.to_bytes(), &key.verifying_key()).expect("verifies");
        assert_eq!(back, bundle(1));

        let mut forged = signed.clone();
        forged.payload = String::from_utf8(bundle(9).canonical_bytes()).expect("utf8");
        let err = SignedBundle::verify(&forged.to_bytes(), &key.verifying_key()).unwrap_err();
        assert_eq!(err, BundleError::BadSignature);

        let other = keys::generate().expect("randomness");
        let err = SignedBundle::verify(&signed.to_bytes(), &other.verifying_key()).unwrap_err();
        assert_eq!(err, BundleError::BadSignature);

        let mut unsigned = signed.clone();
        unsigned.signature = String::new();
        let err = SignedBundle::verify(&unsigned.to_bytes(), &key.verifying_key()).unwrap_err();
        assert_eq!(err, BundleError::Unsigned);

        // A signature that is there but cannot be one is malformed, not missing.
        for bad in [
            "ed25519:zz",
            "ed25519:",
            "rsa:00",
            "ed25519:+f",
            "ed25519:00",
        ] {
            let mut malformed = signed.clone();
            malformed.signature = bad.into();
            let err =
                SignedBundle::verify(&malformed.to_bytes(), &key.verifying_key()).unwrap_err();
            assert_eq!(err, BundleError::MalformedSignature, "{bad}");
        }
    }

    /// The fuzz target `bundle`'s seeds (fuzz/corpus/bundle, signed with the key `[7; 32]`)
    /// are what their names say, so that fuzzing starts from both sides of the signature check.
    #[test]
    fn the_bundle_fuzz_seeds_verify_as_named() {
        let trusted = SigningKey::from_bytes(&[7; 32]).verifying_key();
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/bundle");
        let verdict = |name: &str| {
            let bytes = std::fs::read(dir.join(name)).expect("seed");
            SignedBundle::verify(&bytes, &trusted).map(|_| ())
        };
        assert_eq!(verdict("signed.json"), Ok(()));
        assert_eq!(verdict("signed-empty.json"), Ok(()));
        assert_eq!(verdict("forged.json"), Err(BundleError::BadSignature));
        assert_eq!(verdict("unsigned.json"), Err(BundleError::Unsigned));
        assert_eq!(
            verdict("malformed-signature.json"),
            Err(BundleError::MalformedSignature)
        );
    }

    #[test]
    fn only_newer_generations_of_the_same_target_are_admissible() {
        assert!(admissible(&bundle(1), None, None).is_ok());
        assert!(admissible(&bundle(2), Some(&bundle(1)), None).is_ok());
        assert!(matches!(
            admissible(&bundle(1), Some(&bundle(1)), None),
            Err(BundleError::NotNewer { .. })
        ));
        assert!(matches!(
            admissible(&bundle(1), Some(&bundle(2)), None),
            Err(BundleError::NotNewer { .. })
        ));
        assert!(matches!(
            admissible(&bundle(3), None, Some("other")),
            Err(BundleError::WrongTarget { .. })
        ));
    }

    #[test]
    fn canonical_bytes_are_deterministic() {
        assert_eq!(bundle(4).canonical_bytes(), bundle(4).canonical_bytes());
    }
}
