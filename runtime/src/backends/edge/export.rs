//! `berth bundle export`'s work: one edge target's signed bundle and every model artifact it
//! needs, written as a carried bundle ([`super::layout`]) for a site with no network.
//!
//! Artifacts come from where the agent would get them, through the agent's own cache
//! ([`crate::agent::cache`], in a working directory inside the layout): an `oci://` artifact
//! from its registry, its manifest asked for by the bundle's digest and checked, then its
//! config and layers; any other one as the agent fetches it. Every byte is hashed as it
//! arrives and only what matched is moved into the layout's blobs. A blob an earlier export
//! left on the media is kept when it still hashes to its name, so exporting again to the same
//! media fetches only what changed.

use super::bundle::{Bundle, SignedBundle};
use super::layout::{self, Descriptor, Writer};
use crate::agent::cache::{Cache, FetchError};
use crate::agent::oci::{self, Layer, Registries};
use crate::agent::state::State;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The working directory inside the layout (the cache the artifacts are fetched through);
/// removed once the export is complete, kept after a failure so a rerun resumes.
const WORK: &str = ".berth-export";

/// What an export wrote.
#[derive(Debug)]
pub struct Exported {
    pub artifacts: Vec<ExportedArtifact>,
    /// Bytes of all the layout's blobs.
    pub bytes: u64,
}

#[derive(Debug)]
pub struct ExportedArtifact {
    pub uri: String,
    pub digest: String,
    /// Bytes of its layers (its file).
    pub bytes: u64,
    /// Whether it was fetched now (false: the media held it already).
    pub fetched: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(
        "workload `{workload}`: artifact `{uri}` has no digest: an agent runs only verified \
         artifacts"
    )]
    NoDigest { workload: String, uri: String },
    #[error(transparent)]
    Fetch(#[from] FetchError),
    #[error("cannot write `{path}`: {message}")]
    Io { path: String, message: String },
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> ExportError + '_ {
    move |e| ExportError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// Every artifact `bundle`'s workloads need, once: (URI, digest). An artifact without a
/// digest is refused (an agent would never run it), before anything is written or published.
pub fn artifacts(bundle: &Bundle) -> Result<Vec<(String, String)>, ExportError> {
    let mut wanted: Vec<(String, String)> = Vec::new();
    for w in &bundle.workloads {
        let Some(variant) = &w.variant else { continue };
        let Some(digest) = &variant.digest else {
            return Err(ExportError::NoDigest {
                workload: w.name.clone(),
                uri: variant.artifact.clone(),
            });
        };
        let pair = (variant.artifact.clone(), digest.clone());
        if !wanted.contains(&pair) {
            wanted.push(pair);
        }
    }
    Ok(wanted)
}

/// Writes `signed` (the signature over `bundle`) and every artifact `bundle` names into the
/// layout at `dir`, `index.json` last.
pub async fn export(
    dir: &Path,
    signed: &SignedBundle,
    bundle: &Bundle,
    client: reqwest::Client,
    registries: Registries,
) -> Result<Exported, ExportError> {
    let wanted = artifacts(bundle)?;
    let mut writer = Writer::create(dir).map_err(io(dir))?;
    let work = dir.join(WORK);
    std::fs::create_dir_all(&work).map_err(io(&work))?;
    let state = State::open(&work.join("state"), 1).map_err(|e| ExportError::Io {
        path: work.display().to_string(),
        message: e.to_string(),
    })?;
    let cache = Cache::new(work.join("cache"), u64::MAX, client).with_registries(registries);
    let mut referenced = Vec::new();
    let empty = writer
        .put_bytes(layout::EMPTY_MEDIA_TYPE, b"{}")
        .map_err(io(dir))?;
    referenced.push(empty.digest);

    // The bundle first in the index.
    let mut title = BTreeMap::new();
    title.insert(
        layout::TITLE.to_string(),
        format!("{}.bundle.json", bundle.target),
    );
    let mut envelope = writer
        .put_bytes(layout::SIGNED_BUNDLE_MEDIA_TYPE, &signed.to_bytes())
        .map_err(io(dir))?;
    envelope.annotations = title;
    let annotations = BTreeMap::from([
        (layout::TARGET.to_string(), bundle.target.clone()),
        (
            layout::GENERATION.to_string(),
            bundle.generation.to_string(),
        ),
    ]);
    let manifest = layout::image_manifest(
        layout::BUNDLE_ARTIFACT_TYPE,
        std::slice::from_ref(&envelope),
        annotations,
    );
    let mut descriptor = writer
        .put_bytes(layout::MANIFEST_MEDIA_TYPE, &manifest)
        .map_err(io(dir))?;
    descriptor.artifact_type = Some(layout::BUNDLE_ARTIFACT_TYPE.to_string());
    descriptor.annotations.insert(
        layout::REF_NAME.to_string(),
        format!("berth-bundle/{}:{}", bundle.target, bundle.generation),
    );
    referenced.extend([envelope.digest, descriptor.digest.clone()]);
    writer.add(descriptor);

    let mut artifacts = Vec::new();
    for (uri, digest) in &wanted {
        let (descriptor, blobs, exported) = if uri.starts_with("oci://") {
            oci_artifact(&writer, &cache, &state, uri, digest).await?
        } else {
            file_artifact(&writer, &cache, &state, uri, digest).await?
        };
        referenced.extend(blobs);
        referenced.push(descriptor.digest.clone());
        writer.add(descriptor);
        artifacts.push(exported);
    }
    drop(state);
    let bytes = writer.finish(&referenced).map_err(io(dir))?;
    let _ = std::fs::remove_dir_all(&work);
    Ok(Exported { artifacts, bytes })
}

/// The index entry of an artifact: its name, the exact URI in [`layout::ARTIFACT`]. An
/// `oci://` artifact is named by the plan's reference; any other by `berth-model/DIGEST`, as a
/// URI (`file:///…`, `https://…`) is no OCI reference name and OCI tools would refuse it.
fn annotate(descriptor: &mut Descriptor, uri: &str, digest: &str) {
    let name = match uri.strip_prefix("oci://") {
        Some(reference) => reference.to_string(),
        None => format!("berth-model/{digest}"),
    };
    descriptor
        .annotations
        .insert(layout::REF_NAME.to_string(), name);
    descriptor
        .annotations
        .insert(layout::ARTIFACT.to_string(), uri.to_string());
}

/// A single-file artifact: fetched as the agent fetches it, its blob and a manifest of
/// artifact type [`layout::MODEL_ARTIFACT_TYPE`] around it.
async fn file_artifact(
    writer: &Writer,
    cache: &Cache,
    state: &State,
    uri: &str,
    digest: &str,
) -> Result<(Descriptor, Vec<String>, ExportedArtifact), ExportError> {
    let blob = writer
        .blob_path(digest)
        .ok_or_else(|| FetchError::BadDigest(digest.to_string()))?;
    let fetched = !writer.has(digest);
    if fetched {
        let (cached, _) = cache.ensure(state, uri, Some(digest)).await?;
        writer.put_file(&cached, digest).map_err(io(&blob))?;
        let _ = state.set_artifact(digest, None);
    }
    let size = std::fs::metadata(&blob).map_err(io(&blob))?.len();
    let mut layer = Descriptor::new(layout::MODEL_LAYER_MEDIA_TYPE, digest.to_string(), size);
    layer
        .annotations
        .insert(layout::TITLE.to_string(), crate::staging::file_name(uri));
    let manifest = layout::image_manifest(
        layout::MODEL_ARTIFACT_TYPE,
        std::slice::from_ref(&layer),
        BTreeMap::new(),
    );
    let mut descriptor = writer
        .put_bytes(layout::MANIFEST_MEDIA_TYPE, &manifest)
        .map_err(io(&blob))?;
    descriptor.artifact_type = Some(layout::MODEL_ARTIFACT_TYPE.to_string());
    annotate(&mut descriptor, uri, digest);
    let exported = ExportedArtifact {
        uri: uri.to_string(),
        digest: digest.to_string(),
        bytes: size,
        fetched,
    };
    Ok((descriptor, vec![digest.to_string()], exported))
}

/// An `oci://` artifact: its manifest by the bundle's digest (checked), config and layers,
/// each checked against its digest, as the registry serves them.
async fn oci_artifact(
    writer: &Writer,
    cache: &Cache,
    state: &State,
    uri: &str,
    digest: &str,
) -> Result<(Descriptor, Vec<String>, ExportedArtifact), ExportError> {
    let refused = |message: String| FetchError::Refused {
        uri: uri.to_string(),
        message,
    };
    let pulled = |p: oci::Pull| match p {
        oci::Pull::Failed(message) => FetchError::Fetch {
            uri: uri.to_string(),
            message,
        },
        oci::Pull::Mismatch { expected, actual } => FetchError::Mismatch {
            uri: uri.to_string(),
            expected,
            actual,
        },
        oci::Pull::Refused(message) => refused(message),
    };
    let registries = cache
        .registries()
        .ok_or_else(|| FetchError::Unsupported(uri.to_string()))?;
    let reference = oci::reference(uri, digest).map_err(refused)?;
    let (manifest, layers) = registries
        .manifest_bytes(&reference)
        .await
        .map_err(pulled)?;
    let doc: serde_json::Value = serde_json::from_slice(&manifest)
        .map_err(|e| refused(format!("the manifest is not JSON: {e}")))?;
    let mut blobs = Vec::new();
    // The config, so that the layout holds the whole image as OCI tools expect.
    if let (Some(config), Some(size)) = (
        doc["config"]["digest"].as_str(),
        doc["config"]["size"].as_u64(),
    ) {
        let config = config.to_string();
        if !writer.has(&config) {
            let bytes = config_blob(registries, &reference, &config, size)
                .await
                .map_err(|e| match e {
                    Some(p) => pulled(p),
                    None => refused(format!("config `{config}` is not what its digest says")),
                })?;
            writer
                .put_bytes(layout::MODEL_LAYER_MEDIA_TYPE, &bytes)
                .map_err(io(Path::new(&config)))?;
        }
        blobs.push(config);
    }
    let fetched = !layers.iter().all(|l| writer.has(&l.digest));
    if fetched {
        let (cached, _) = cache.ensure(state, uri, Some(digest)).await?;
        for layer in &layers {
            let file: PathBuf = cached.join(&layer.name);
            writer.put_file(&file, &layer.digest).map_err(io(&file))?;
        }
        let _ = std::fs::remove_dir_all(&cached);
        let _ = state.set_artifact(digest, None);
    }
    blobs.extend(layers.iter().map(|l| l.digest.clone()));
    let media_type = doc["mediaType"]
        .as_str()
        .unwrap_or(layout::MANIFEST_MEDIA_TYPE);
    let mut descriptor = writer
        .put_bytes(media_type, &manifest)
        .map_err(io(Path::new(uri)))?;
    descriptor.artifact_type = doc["artifactType"].as_str().map(str::to_string);
    annotate(&mut descriptor, uri, digest);
    let exported = ExportedArtifact {
        uri: uri.to_string(),
        digest: digest.to_string(),
        bytes: layers.iter().map(|l| l.size).sum(),
        fetched,
    };
    Ok((descriptor, blobs, exported))
}

/// The config blob `digest` of `reference`, checked; `None` when it does not hash to its
/// digest or is larger than a bundle may be.
async fn config_blob(
    registries: &Registries,
    reference: &oci_client::Reference,
    digest: &str,
    size: u64,
) -> Result<Vec<u8>, Option<oci::Pull>> {
    use futures::StreamExt;
    if size > crate::agent::source::MAX_BUNDLE_BYTES {
        return Err(None);
    }
    let layer = Layer {
        digest: digest.to_string(),
        size,
        name: "config".to_string(),
    };
    let (_, mut stream) = registries.blob(reference, &layer, 0).await.map_err(Some)?;
    let mut bytes = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| Some(oci::Pull::Failed(e.to_string())))?;
        bytes.extend_from_slice(&chunk);
        if bytes.len() as u64 > size {
            return Err(None);
        }
    }
    if layout::digest_of(&bytes) != digest {
        return Err(None);
    }
    Ok(bytes)
}
