//! How a placement's model artifact reaches its target (`docs/placement.md`, "Model
//! staging"): already cached there, pulled from the target's registry mirrors and then the
//! artifact's own source, or carried to an edge agent on removable media. The plan records it
//! per placement and totals it per target; the engine fills it and the verifier compares the
//! recorded values with these functions: they are the format's definition.

use crate::ir::{Connectivity, ModelId, Runtime, Target, Variant};
use serde::{Deserialize, Serialize};

/// Where a placement's artifact comes from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum StagingSource {
    /// The target lists the model in `cached_models`: nothing moves.
    Cached,
    /// Pulled from the target's registry mirrors first (`pull` lists them, then the source
    /// unless the target is disconnected).
    Mirror,
    /// Pulled from the artifact's own registry or URL.
    #[default]
    Source,
    /// The target is a disconnected edge site without a mirror for it: the artifact goes with
    /// its bundle on removable media (`berth bundle export`).
    Carried,
}

/// How one placement's artifact is staged.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ArtifactStaging {
    pub from: StagingSource,
    /// Where the target pulls the artifact from, in the order tried: the artifact on each of
    /// the target's mirrors (`oci://` artifacts only), then the artifact itself unless the
    /// target is disconnected. Empty for `cached` and `carried`.
    pub pull: Vec<String>,
    /// Bytes that move to the target: the variant's `size`, `0` when cached, `null` when
    /// the spec does not give the size.
    pub bytes: Option<u64>,
}

/// Whether berth itself fetches the artifact at `uri` — the edge agent, `berth fetch` and
/// `berth bundle export`: `oci://`, `http://`, `https://`, `file://` and plain paths. Other
/// schemes (`ngc://`, `hf://`) are pulled by a model server or the NIM Operator, never by
/// berth, so an edge agent cannot stage them.
pub fn berth_fetches(uri: &str) -> bool {
    ["oci://", "http://", "https://", "file://"]
        .iter()
        .any(|scheme| uri.starts_with(scheme))
        || !uri.contains("://")
}

/// How `variant` of `model` reaches `target`, or `None` when it cannot: the target does not
/// cache the model and either is run by an edge agent, which fetches only what
/// [`berth_fetches`], and the artifact is not that, or is disconnected, not run by an edge
/// agent (which could be carried a bundle), and has no mirror for the artifact.
pub fn artifact_staging(
    target: &Target,
    model: ModelId,
    variant: &Variant,
) -> Option<ArtifactStaging> {
    if target.cached_models.contains(&model) {
        return Some(ArtifactStaging {
            from: StagingSource::Cached,
            pull: Vec::new(),
            bytes: Some(0),
        });
    }
    if matches!(target.runtime, Runtime::Edge { .. }) && !berth_fetches(&variant.artifact) {
        return None;
    }
    let mut pull: Vec<String> = target
        .mirrors
        .iter()
        .filter_map(|m| mirror_reference(m, &variant.artifact))
        .collect();
    let mirrored = !pull.is_empty();
    let from = if target.connectivity == Connectivity::Disconnected {
        if mirrored {
            StagingSource::Mirror
        } else if matches!(target.runtime, Runtime::Edge { .. }) {
            StagingSource::Carried
        } else {
            return None;
        }
    } else {
        pull.push(variant.artifact.clone());
        if mirrored {
            StagingSource::Mirror
        } else {
            StagingSource::Source
        }
    };
    Some(ArtifactStaging {
        from,
        pull,
        bytes: variant.size,
    })
}

/// The `oci://` artifact `artifact` as served by the registry mirror `mirror`
/// (`oci://HOST[:PORT][/PATH]`): the artifact's repository (and tag or digest) under the
/// mirror's path, as a pull-through cache or a copy made with `skopeo sync`/`oras copy`
/// lays it out. `None` for an artifact that is not `oci://`.
///
/// `oci://models.example.com/vision/detector:3@sha256:…` on `oci://registry.plant:5000/m`
/// is `oci://registry.plant:5000/m/vision/detector:3@sha256:…`. An artifact whose first
/// component is not a registry host (no `.` or `:`, not `localhost`) is a Docker Hub
/// repository and keeps every component.
pub fn mirror_reference(mirror: &str, artifact: &str) -> Option<String> {
    let rest = artifact.strip_prefix("oci://")?;
    let repository = match rest.split_once('/') {
        Some((first, tail)) if first.contains(['.', ':']) || first == "localhost" => tail,
        _ => rest,
    };
    if repository.is_empty() {
        return None;
    }
    Some(format!("{}/{repository}", mirror.trim_end_matches('/')))
}

/// Bytes to stage on a target from its placements' staging: the sum of the known sizes of
/// the distinct artifacts (by reference and digest) not cached there, and how many of them
/// have no size in the spec.
pub fn staging_totals<'a>(
    variants: impl IntoIterator<Item = &'a crate::plan::VariantBinding>,
) -> (u64, u32) {
    let mut seen = std::collections::BTreeSet::new();
    let (mut bytes, mut unsized_) = (0u64, 0u32);
    for v in variants {
        if v.staging.from == StagingSource::Cached
            || !seen.insert((v.artifact.as_str(), v.digest.as_deref()))
        {
            continue;
        }
        match v.staging.bytes {
            Some(n) => bytes = bytes.saturating_add(n),
            None => unsized_ = unsized_.saturating_add(1),
        }
    }
    (bytes, unsized_)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirror_references_keep_the_repository_under_the_mirror_path() {
        let m = |mirror, artifact| mirror_reference(mirror, artifact);
        assert_eq!(
            m(
                "oci://registry.plant:5000/m",
                "oci://models.example.com/vision/det:3"
            ),
            Some("oci://registry.plant:5000/m/vision/det:3".into())
        );
        assert_eq!(
            m(
                "oci://registry.plant:5000",
                "oci://localhost:5000/det@sha256:ab"
            ),
            Some("oci://registry.plant:5000/det@sha256:ab".into())
        );
        assert_eq!(
            m("oci://mirror.local", "oci://library/det:1"),
            Some("oci://mirror.local/library/det:1".into())
        );
        assert_eq!(
            m("oci://mirror.local", "https://example.com/det.onnx"),
            None
        );
        assert_eq!(m("oci://mirror.local", "oci://example.com/"), None);
    }
}
