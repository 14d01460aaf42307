//! The placement plan: the compiler's final product, saved as JSON, reviewed, verified and
//! applied later. Documented in `docs/plan-format.md`; versioned by [`PLAN_FORMAT`].
//!
//! Everything here is by name (not IR index) so that a saved plan can be re-checked against
//! a freshly compiled spec (`berth verify`). Lists are in a deterministic order: workloads
//! and targets in IR order, placements by target then pool, rejections by target.
//!
//! The placement engine fills a [`Plan`] (`placement::plan`); the verifier (`verify`) reads
//! one back and re-checks it against the IR without calling into the placement engine.

use crate::ir::{Ir, Money};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fmt::Write as _;

pub mod diff;
mod read;
mod shared;
mod staging;
pub use read::{PlanReadError, from_json};
pub use staging::{
    ArtifactStaging, StagingSource, artifact_staging, berth_fetches, mirror_reference,
    staging_totals,
};

/// The format identifier written into every plan.
pub const PLAN_FORMAT: &str = "berth.plan/v3";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// Always [`PLAN_FORMAT`].
    pub format: String,
    pub compiler_version: String,
    /// `sha256:` over every source file (name and text, in path order).
    pub source_digest: String,
    /// The plan instant (RFC 3339, UTC) at which policy windows were evaluated.
    pub at: String,
    /// `sha256:` over this plan's JSON with `plan_id` and `verification` emptied.
    pub plan_id: String,
    /// True when every replica of every workload was placed.
    pub feasible: bool,
    /// One per workload. In the document, a workload whose rejections are an earlier one's
    /// but for their requirement spans shares them (`rejected_as`); read back in full.
    #[serde(
        serialize_with = "shared::serialize_workloads",
        deserialize_with = "shared::deserialize_workloads"
    )]
    #[cfg_attr(feature = "schema", schemars(with = "Vec<shared::WorkloadDocument>"))]
    pub workloads: Vec<WorkloadPlan>,
    /// One entry per GPU pool of every target.
    pub pools: Vec<PoolLedger>,
    /// CPU and memory per target.
    pub targets: Vec<TargetLedger>,
    pub windows: Vec<WindowState>,
    /// Rules the runtime enforces (idle-GPU reclaim), carried through.
    pub reclaims: Vec<ReclaimRule>,
    pub verification: Verification,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum WorkloadStatus {
    /// Every replica placed.
    Placed,
    /// Some replicas placed, not all.
    Partial,
    /// No replica placed.
    Unplaced,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct WorkloadPlan {
    pub workload: String,
    pub release: String,
    pub status: WorkloadStatus,
    pub replicas: u32,
    pub placements: Vec<Placement>,
    /// Every target not used, with the first reason it was not (or could not be) used.
    pub rejected: Vec<Rejection>,
    /// Σ over placements of `gpus × gpu_hour × 24`, in millionths of the currency unit
    /// (an integer: 21.60 is `21600000`).
    pub cost_per_day: Money,
    /// Set when a policy's approval threshold is exceeded: the placement is not applied
    /// until approved.
    pub approval: Option<ApprovalRequired>,
    /// Targets the runtime may fail over to.
    pub fallback: Vec<String>,
    /// Why replicas are missing, when status is not `placed`.
    pub unplaced: Option<Infeasibility>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Placement {
    pub target: String,
    /// The GPU pool, `None` for a workload that needs no GPU.
    pub pool: Option<String>,
    pub replicas: u32,
    /// GPUs (or MIG slices) per replica.
    pub gpus_per_replica: u32,
    /// The accelerator of the pool.
    pub accelerator: Option<String>,
    /// The model variant chosen for this target.
    pub variant: Option<VariantBinding>,
    pub data: Vec<DataBinding>,
    pub services: Vec<ServiceBinding>,
    pub cost_per_day: Money,
    /// The objective values that ranked this target (lower is better), in preference order.
    pub score: Vec<ScoreTerm>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct VariantBinding {
    pub model: String,
    pub version: String,
    pub variant: String,
    pub artifact: String,
    pub digest: Option<String>,
    /// How the artifact reaches the target. A plan or bundle written before berth recorded
    /// it reads as `source` with nothing to pull, which the verifier refuses for a plan.
    #[serde(default)]
    pub staging: ArtifactStaging,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct DataBinding {
    pub name: String,
    pub dataset: String,
    /// `local` or `remote`.
    pub locality: String,
    pub endpoint: Option<String>,
    /// Nanoseconds.
    pub latency_ns: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ServiceBinding {
    pub service: String,
    pub maturity: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ScoreTerm {
    /// `cost` (micro-units per day) or `data_latency` (nanoseconds).
    pub objective: String,
    pub value: i64,
}

/// Why a target was not used for a workload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Rejection {
    pub target: String,
    /// Which stage rejected it.
    pub stage: RejectionStage,
    /// A stable machine-readable reason (`gpu_memory`, `data_latency`, `service_maturity`,
    /// `connectivity`, `environment`, `accelerator`, `no_variant`, `cpu`, `memory`,
    /// `not_candidate`, `denied`, `not_entitled`, `quota`, `window_limit`, `capacity`,
    /// `spread`, `isolation`, `not_needed`; also `mig`, `gpu_count`, `data_unavailable`,
    /// `entitlement_limit`).
    pub reason: String,
    /// Human sentence, e.g. "needs 20GiB per GPU; pool `t4` offers 16GiB (T4)".
    pub message: String,
    /// Where the requirement is written (in the workload, placement or policy).
    pub requirement: Option<SourceRef>,
    /// Where the offer is written (in the target).
    pub offer: Option<SourceRef>,
    /// How many further targets were rejected at the same stage for the same reason and are
    /// not listed one by one (large estates: see `docs/placement.md`); 0 when all are listed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub others: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum RejectionStage {
    /// Technically impossible.
    Eligibility,
    /// Technically possible, not permitted.
    Policy,
    /// Permitted, but capacity, spread, isolation or preference left it unused.
    Assignment,
}

/// A location in the sources, stable across runs for the same sources.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SourceRef {
    pub file: String,
    pub line: u32,
    pub column: u32,
    pub start: u32,
    pub end: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ApprovalRequired {
    pub policy: String,
    pub threshold: Money,
    /// Public keys or names of approvers (the runtime checks approvals' signatures against
    /// them: a name through the `trust` file).
    pub approvers: Vec<String>,
    /// The policy's trust file (names to public keys), relative to the spec's directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Infeasibility {
    pub missing_replicas: u32,
    /// e.g. "no target offers `object_store >= ga`" or "pools ran out: 3 more L4 GPUs needed".
    pub message: String,
    /// The smallest change that would make it feasible, where known.
    pub hint: Option<String>,
    /// True when a policy time window (not capacity) held it back.
    pub held_by_window: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct PoolLedger {
    pub target: String,
    pub pool: String,
    pub accelerator: String,
    /// Devices, or MIG slices for a partitioned pool.
    pub capacity: u32,
    pub allocated: u32,
    /// `(workload, gpus)` in workload order.
    pub by_workload: Vec<LedgerEntry>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct LedgerEntry {
    pub workload: String,
    pub amount: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct TargetLedger {
    pub target: String,
    pub cpu_millis_capacity: u64,
    pub cpu_millis_allocated: u64,
    pub memory_capacity: u64,
    pub memory_allocated: u64,
    /// Bytes of model artifacts to stage on the target: the known sizes of the distinct
    /// artifacts its placements pull or are carried (not those it caches).
    pub staging_bytes: u64,
    /// Of those artifacts, how many have no `size` in the spec (not counted in
    /// `staging_bytes`).
    pub staging_unsized: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct WindowState {
    pub window: String,
    pub in_effect: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ReclaimRule {
    pub policy: String,
    /// `kind notebook`, `class experiment`, `team research`.
    pub selector: String,
    pub idle_after_ns: u64,
    /// Workloads it applies to.
    pub workloads: Vec<String>,
}

/// The verifier's summary, written into the plan it passed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Verification {
    pub verified: bool,
    /// Names of the checks run, in order.
    pub checks: Vec<String>,
    /// Empty for a written plan (a plan that fails is never written).
    pub violations: Vec<String>,
}

/// The plan's identity: `sha256:` and the lowercase hex SHA-256 of the plan serialised
/// compact (`serde_json`, fields in declaration order) after `plan_id` is set to the empty
/// string and `verification` to its default (not verified, no checks, no violations). The
/// engine seals a plan with it and the verifier checks it: it is the format's definition.
pub fn plan_id(plan: &Plan) -> String {
    // The plan as written with its id emptied and its verdict at its default, by reference:
    // the same JSON as a blanked clone, without copying a plan of many megabytes.
    #[derive(Serialize)]
    struct Blanked<'a> {
        format: &'a str,
        compiler_version: &'a str,
        source_digest: &'a str,
        at: &'a str,
        plan_id: &'a str,
        feasible: bool,
        #[serde(serialize_with = "shared::serialize_workloads")]
        workloads: &'a [WorkloadPlan],
        pools: &'a [PoolLedger],
        targets: &'a [TargetLedger],
        windows: &'a [WindowState],
        reclaims: &'a [ReclaimRule],
        verification: &'a Verification,
    }
    // INVARIANT: `Blanked` lists `Plan`'s fields in `Plan`'s order (the destructuring below
    // breaks the build when a field is added, `plan_id_of_a_blanked_view_is_of_the_blanked_plan`
    // checks the order).
    let Plan {
        format,
        compiler_version,
        source_digest,
        at,
        plan_id: _,
        feasible,
        workloads,
        pools,
        targets,
        windows,
        reclaims,
        verification: _,
    } = plan;
    let blank = Verification::default();
    let digest = json_sha256(&Blanked {
        format,
        compiler_version,
        source_digest,
        at,
        plan_id: "",
        feasible: *feasible,
        workloads,
        pools,
        targets,
        windows,
        reclaims,
        verification: &blank,
    });
    format!("sha256:{}", hex(&digest))
}

/// SHA-256 of the compact JSON, streamed into the hasher (a large plan is never held twice).
fn json_sha256(plan: &impl Serialize) -> Vec<u8> {
    struct HashWriter(Sha256);
    impl std::io::Write for HashWriter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.update(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut w = std::io::BufWriter::with_capacity(1 << 16, HashWriter(Sha256::new()));
    // Serialising these plain structs cannot fail; if it ever did, the id would still be
    // a deterministic function of the plan's prefix.
    let _ = serde_json::to_writer(&mut w, plan);
    // The hasher never fails, so the flush empties the buffer.
    let _ = std::io::Write::flush(&mut w);
    let (hasher, _) = w.into_parts();
    hasher.0.finalize().to_vec()
}

/// Lowercase hex of `bytes`: the text of every digest (`sha256:` + hex in plans, bundles and
/// the model cache), key and signature berth writes.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// The reclaim rules a plan records for `ir`: each policy's `reclaim` rule with the
/// workloads its selector covers, in IR order. The engine writes them, the verifier
/// compares a plan's against them.
pub fn reclaim_rules(ir: &Ir) -> Vec<ReclaimRule> {
    ir.policy
        .reclaims
        .iter()
        .map(|r| ReclaimRule {
            policy: r.policy.clone(),
            selector: r.selector.to_string(),
            idle_after_ns: r.idle_after,
            workloads: ir
                .workloads
                .iter()
                .filter(|w| r.selector.matches(w))
                .map(|w| w.name.clone())
                .collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_lowercase_two_digits_a_byte() {
        assert_eq!(hex(&[0x00, 0x0a, 0xff, 0x5c]), "000aff5c");
        assert_eq!(hex(&[]), "");
    }

    /// The id is the SHA-256 of the plan serialised with its id emptied and its verdict at
    /// the default: the by-reference view `plan_id` hashes gives the very bytes of such a
    /// blanked clone.
    #[test]
    fn plan_id_of_a_blanked_view_is_of_the_blanked_plan() {
        let mut plan = Plan {
            format: PLAN_FORMAT.into(),
            compiler_version: "v".into(),
            source_digest: "sha256:s".into(),
            at: "2025-06-04T08:00:00Z".into(),
            plan_id: "sha256:recorded".into(),
            feasible: true,
            workloads: Vec::new(),
            pools: Vec::new(),
            targets: vec![TargetLedger {
                target: "t".into(),
                cpu_millis_capacity: 1,
                cpu_millis_allocated: 2,
                memory_capacity: 3,
                memory_allocated: 4,
                staging_bytes: 5,
                staging_unsized: 6,
            }],
            windows: Vec::new(),
            reclaims: Vec::new(),
            verification: Verification {
                verified: true,
                checks: vec!["format".into()],
                violations: Vec::new(),
            },
        };
        let id = plan_id(&plan);
        plan.plan_id = String::new();
        plan.verification = Verification::default();
        let bytes = serde_json::to_vec(&plan).expect("json");
        assert_eq!(id, format!("sha256:{}", hex(&Sha256::digest(&bytes))));
    }
}
