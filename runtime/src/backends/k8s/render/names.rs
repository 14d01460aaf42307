//! Names of what berth renders: object names as DNS labels, the label keys berth sets and
//! valid label values, environment variable names, CPU and memory quantities.

use super::*;

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

/// The object name of a placement: the workload's name as a DNS label, with target and pool
/// appended when the workload has several placements in one namespace.
pub(super) fn object_name(workload: &Workload, placement: &Placement, shared: bool) -> String {
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
pub(super) fn env_name(raw: &str) -> String {
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
