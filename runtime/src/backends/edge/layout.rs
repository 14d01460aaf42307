//! Carried bundles: an OCI image layout (image-spec v1.1, `image-layout.md`) holding one
//! edge target's signed bundle and every model artifact it needs, written by `berth bundle
//! export` ([`super::export`]) onto removable media and read by `berth agent --import`
//! ([`crate::agent::import`]) at a site with no network (docs/agent.md, "Carried bundles").
//!
//! In the directory: `oci-layout` (`{"imageLayoutVersion":"1.0.0"}`), `blobs/sha256/HEX`
//! (content-addressed) and `index.json`, which lists
//! - the signed bundle as an image manifest of artifact type [`BUNDLE_ARTIFACT_TYPE`] whose
//!   one layer is the signed envelope, byte for byte as a store would serve it;
//! - each model artifact as its own manifest, annotated with the reference the plan names
//!   (`org.opencontainers.image.ref.name`, and [`ARTIFACT`] with the exact URI): an `oci://`
//!   artifact's manifest, config and layers as the registry serves them (so its digest is the
//!   one the bundle pins), any other artifact as a manifest of artifact type
//!   [`MODEL_ARTIFACT_TYPE`] whose one layer is the file.
//!
//! INVARIANT: `index.json` is written last (a temporary file renamed over it) and a blob
//! appears only by a rename of bytes whose digest was checked: a directory without
//! `index.json` is an export not finished, never half of one; one with it holds every blob it
//! names, unless the media was altered, which the reader's digest checks catch.

use crate::agent::cache::copy_hashed;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

pub const LAYOUT_FILE: &str = "oci-layout";
pub const LAYOUT_VERSION: &str = "1.0.0";
pub const INDEX_FILE: &str = "index.json";
pub const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// The empty config of artifacts (image-spec v1.1, "Guidance for an empty descriptor").
pub const EMPTY_MEDIA_TYPE: &str = "application/vnd.oci.empty.v1+json";
pub const EMPTY_DIGEST: &str =
    "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a";
/// The artifact type of the signed bundle's manifest.
pub const BUNDLE_ARTIFACT_TYPE: &str = "application/vnd.berth.bundle.v1+json";
/// The media type of its layer: the signed envelope (`berth.signed-bundle/v1`).
pub const SIGNED_BUNDLE_MEDIA_TYPE: &str = "application/vnd.berth.signed-bundle.v1+json";
/// The artifact type of a model that is one file (`http(s)://`, `file://`, a path).
pub const MODEL_ARTIFACT_TYPE: &str = "application/vnd.berth.model.v1";
pub const MODEL_LAYER_MEDIA_TYPE: &str = "application/octet-stream";
pub const REF_NAME: &str = "org.opencontainers.image.ref.name";
pub const TITLE: &str = "org.opencontainers.image.title";
/// The artifact's URI exactly as the bundle names it: what the agent matches on.
pub const ARTIFACT: &str = "dev.berth.artifact";
pub const TARGET: &str = "dev.berth.target";
pub const GENERATION: &str = "dev.berth.generation";

/// The largest `index.json`, manifest or bundle read whole: as large as a bundle may be.
const MAX_DOCUMENT_BYTES: u64 = crate::agent::source::MAX_BUNDLE_BYTES;

/// An OCI content descriptor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    pub media_type: String,
    pub digest: String,
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl Descriptor {
    pub fn new(media_type: &str, digest: String, size: u64) -> Descriptor {
        Descriptor {
            media_type: media_type.to_string(),
            digest,
            size,
            artifact_type: None,
            annotations: BTreeMap::new(),
        }
    }

    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations.get(key).map(String::as_str)
    }
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Index {
    schema_version: u32,
    #[serde(default)]
    media_type: Option<String>,
    manifests: Vec<Descriptor>,
}

/// Why a directory is not a carried bundle that can be used.
#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    /// No `index.json` (yet): nothing exported there, or an export not finished.
    #[error("`{0}` holds no finished export (no `index.json`)")]
    Unfinished(String),
    #[error("cannot read `{path}`: {message}")]
    Io { path: String, message: String },
    #[error("`{path}` is not an OCI image layout: {message}")]
    Malformed { path: String, message: String },
    #[error("blob `{digest}` is not in the layout")]
    Missing { digest: String },
    #[error("blob `{digest}` does not hash to its digest (it hashes to `{actual}`, {size} bytes)")]
    Mismatch {
        digest: String,
        actual: String,
        size: u64,
    },
}

fn io_error(path: &Path) -> impl Fn(std::io::Error) -> LayoutError + '_ {
    move |e| LayoutError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// `sha256:` and the hex of `bytes`' SHA-256.
pub fn digest_of(bytes: &[u8]) -> String {
    format!(
        "sha256:{}",
        berth_compiler::plan::hex(&Sha256::digest(bytes))
    )
}

/// The hex of a well-formed `sha256:` digest (64 lowercase hex digits).
pub fn hex_of(digest: &str) -> Option<&str> {
    digest.strip_prefix("sha256:").filter(|h| {
        h.len() == 64
            && h.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    })
}

/// An image manifest with the empty config, `layers`, and `annotations`.
pub fn image_manifest(
    artifact_type: &str,
    layers: &[Descriptor],
    annotations: BTreeMap<String, String>,
) -> Vec<u8> {
    let doc = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "artifactType": artifact_type,
        "config": Descriptor::new(EMPTY_MEDIA_TYPE, EMPTY_DIGEST.to_string(), 2),
        "layers": layers,
        "annotations": annotations,
    });
    serde_json::to_vec(&doc).unwrap_or_default()
}

/// Writes a layout: blobs first, `index.json` last.
pub struct Writer {
    dir: PathBuf,
    manifests: Vec<Descriptor>,
}

impl Writer {
    /// Makes `dir` a layout (its `oci-layout` file and `blobs/sha256/`). An `index.json`
    /// already there (an earlier export) stays until [`Writer::finish`] replaces it: the
    /// media holds the earlier export, whole, until the new one is.
    pub fn create(dir: &Path) -> std::io::Result<Writer> {
        std::fs::create_dir_all(dir.join("blobs").join("sha256"))?;
        let layout = format!("{{\"imageLayoutVersion\":\"{LAYOUT_VERSION}\"}}");
        write_atomically(&dir.join(LAYOUT_FILE), layout.as_bytes())?;
        Ok(Writer {
            dir: dir.to_path_buf(),
            manifests: Vec::new(),
        })
    }

    pub fn blob_path(&self, digest: &str) -> Option<PathBuf> {
        hex_of(digest).map(|hex| self.dir.join("blobs").join("sha256").join(hex))
    }

    /// Whether the blob of `digest` is there and hashes to it (a blob of an earlier export).
    pub fn has(&self, digest: &str) -> bool {
        self.blob_path(digest)
            .and_then(|path| copy_hashed(&path, None).ok())
            .is_some_and(|(actual, _)| actual == digest)
    }

    /// Stores `bytes` as a blob; its descriptor of `media_type`.
    pub fn put_bytes(&self, media_type: &str, bytes: &[u8]) -> std::io::Result<Descriptor> {
        let digest = digest_of(bytes);
        let path = self.blob_path(&digest).ok_or_else(bad_digest)?;
        if !path.exists() {
            write_atomically(&path, bytes)?;
        }
        Ok(Descriptor::new(media_type, digest, bytes.len() as u64))
    }

    /// Moves `file`, whose digest the caller verified to be `digest`, into the blobs (a
    /// rename when on the same file system, else a copy checked again).
    pub fn put_file(&self, file: &Path, digest: &str) -> std::io::Result<()> {
        let path = self.blob_path(digest).ok_or_else(bad_digest)?;
        if std::fs::rename(file, &path).is_ok() {
            return Ok(());
        }
        let tmp = path.with_extension("tmp");
        let (actual, _) = copy_hashed(file, Some(&tmp))?;
        if actual != digest {
            let _ = std::fs::remove_file(&tmp);
            return Err(std::io::Error::other(format!(
                "`{}` changed while it was copied",
                file.display()
            )));
        }
        std::fs::rename(&tmp, &path)
    }

    /// Lists `manifest` in `index.json`.
    pub fn add(&mut self, manifest: Descriptor) {
        self.manifests.push(manifest);
    }

    /// Writes `index.json` (the export is complete from here on), then removes the blobs it
    /// does not name (an earlier export's). Returns the bytes of the blobs kept.
    pub fn finish(self, referenced: &[String]) -> std::io::Result<u64> {
        let index = Index {
            schema_version: 2,
            media_type: Some(INDEX_MEDIA_TYPE.to_string()),
            manifests: self.manifests,
        };
        let bytes = serde_json::to_vec_pretty(&index).unwrap_or_default();
        write_atomically(&self.dir.join(INDEX_FILE), &bytes)?;
        let blobs = self.dir.join("blobs").join("sha256");
        let mut kept = 0;
        for entry in std::fs::read_dir(&blobs)?.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let digest = format!("sha256:{name}");
            if referenced.contains(&digest) {
                kept += entry.metadata().map_or(0, |m| m.len());
            } else if hex_of(&digest).is_some() || name.ends_with(".tmp") {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        Ok(kept)
    }
}

fn bad_digest() -> std::io::Error {
    std::io::Error::other("not a `sha256:` digest")
}

/// A temporary file beside `path`, synced, renamed over it, the directory synced.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// A layout read back: its `index.json`, and blobs read or located with their digests
/// checked.
#[derive(Debug)]
pub struct Layout {
    dir: PathBuf,
    manifests: Vec<Descriptor>,
    /// What the media holds, cheaply: `index.json`'s bytes and each blob's name, size and
    /// modification time, hashed. Any export written, or blob changed, changes it.
    pub fingerprint: String,
}

impl Layout {
    /// Reads the layout in `dir`: `oci-layout` must say version 1.0.0, `index.json` must be
    /// there ([`LayoutError::Unfinished`] when not) and parse.
    pub fn open(dir: &Path) -> Result<Layout, LayoutError> {
        let malformed = |message: String| LayoutError::Malformed {
            path: dir.display().to_string(),
            message,
        };
        let index_path = dir.join(INDEX_FILE);
        if !index_path.exists() {
            return Err(LayoutError::Unfinished(dir.display().to_string()));
        }
        let layout_path = dir.join(LAYOUT_FILE);
        let layout = read_bounded(&layout_path)?;
        let version: serde_json::Value = serde_json::from_slice(&layout)
            .map_err(|e| malformed(format!("`{LAYOUT_FILE}` is not JSON: {e}")))?;
        if version["imageLayoutVersion"] != LAYOUT_VERSION {
            return Err(malformed(format!(
                "`{LAYOUT_FILE}` does not say `imageLayoutVersion` `{LAYOUT_VERSION}`"
            )));
        }
        let bytes = read_bounded(&index_path)?;
        let index: Index = serde_json::from_slice(&bytes)
            .map_err(|e| malformed(format!("`{INDEX_FILE}` is not an image index: {e}")))?;
        if index.schema_version != 2 {
            return Err(malformed(format!(
                "`{INDEX_FILE}` has schema version {}, not 2",
                index.schema_version
            )));
        }
        let mut listing: Vec<String> = std::fs::read_dir(dir.join("blobs").join("sha256"))
            .map(|entries| {
                entries
                    .flatten()
                    .map(|e| {
                        let meta = e.metadata().ok();
                        let modified = meta
                            .as_ref()
                            .and_then(|m| m.modified().ok())
                            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                            .map_or(0, |d| d.as_nanos());
                        format!(
                            "{} {} {modified}",
                            e.file_name().to_string_lossy(),
                            meta.map_or(0, |m| m.len())
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        listing.sort();
        let mut fingerprint = bytes.clone();
        fingerprint.extend(listing.join("\n").into_bytes());
        Ok(Layout {
            dir: dir.to_path_buf(),
            manifests: index.manifests,
            fingerprint: digest_of(&fingerprint),
        })
    }

    /// The directory of the blobs, each named by its digest's hex.
    pub fn blobs_dir(&self) -> PathBuf {
        self.dir.join("blobs").join("sha256")
    }

    /// The path of `digest`'s blob, whether or not it is there.
    pub fn blob_path(&self, digest: &str) -> Result<PathBuf, LayoutError> {
        let hex = hex_of(digest).ok_or_else(|| LayoutError::Malformed {
            path: self.dir.display().to_string(),
            message: format!("digest `{digest}` is not `sha256:` and 64 lowercase hex digits"),
        })?;
        Ok(self.dir.join("blobs").join("sha256").join(hex))
    }

    /// The blob `descriptor` names, read whole (a manifest or the bundle: small), checked
    /// against its digest and size.
    pub fn read(&self, descriptor: &Descriptor) -> Result<Vec<u8>, LayoutError> {
        let path = self.blob_path(&descriptor.digest)?;
        if !path.exists() {
            return Err(LayoutError::Missing {
                digest: descriptor.digest.clone(),
            });
        }
        let bytes = read_bounded(&path)?;
        let actual = digest_of(&bytes);
        if actual != descriptor.digest || bytes.len() as u64 != descriptor.size {
            return Err(LayoutError::Mismatch {
                digest: descriptor.digest.clone(),
                actual,
                size: bytes.len() as u64,
            });
        }
        Ok(bytes)
    }

    /// The signed bundle's bytes: the one manifest of artifact type
    /// [`BUNDLE_ARTIFACT_TYPE`], its one layer, every digest checked.
    pub fn bundle(&self) -> Result<Vec<u8>, LayoutError> {
        let malformed = |message: String| LayoutError::Malformed {
            path: self.dir.display().to_string(),
            message,
        };
        let mut bundles = self
            .manifests
            .iter()
            .filter(|m| m.artifact_type.as_deref() == Some(BUNDLE_ARTIFACT_TYPE));
        let (Some(manifest), None) = (bundles.next(), bundles.next()) else {
            return Err(malformed(format!(
                "`{INDEX_FILE}` must list exactly one manifest of artifact type \
                 `{BUNDLE_ARTIFACT_TYPE}`"
            )));
        };
        let layers = self.layers(manifest)?;
        let [layer] = layers.as_slice() else {
            return Err(malformed(
                "the bundle's manifest must have one layer".into(),
            ));
        };
        if layer.size > crate::agent::source::MAX_BUNDLE_BYTES {
            return Err(malformed(format!(
                "the bundle is larger than {} bytes",
                crate::agent::source::MAX_BUNDLE_BYTES
            )));
        }
        self.read(layer)
    }

    /// The manifest listed for the artifact `uri`, if any.
    pub fn artifact(&self, uri: &str) -> Option<&Descriptor> {
        self.manifests
            .iter()
            .find(|m| m.annotation(ARTIFACT) == Some(uri))
    }

    /// The layers of the manifest `descriptor` names (its bytes checked against its digest).
    pub fn layers(&self, descriptor: &Descriptor) -> Result<Vec<Descriptor>, LayoutError> {
        let bytes = self.read(descriptor)?;
        let doc: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| LayoutError::Malformed {
                path: self.dir.display().to_string(),
                message: format!("manifest `{}` is not JSON: {e}", descriptor.digest),
            })?;
        serde_json::from_value(doc["layers"].clone()).map_err(|e| LayoutError::Malformed {
            path: self.dir.display().to_string(),
            message: format!("manifest `{}` lists no layers: {e}", descriptor.digest),
        })
    }
}

/// A small file read whole, refused past [`MAX_DOCUMENT_BYTES`].
fn read_bounded(path: &Path) -> Result<Vec<u8>, LayoutError> {
    let file = std::fs::File::open(path).map_err(io_error(path))?;
    let mut bytes = Vec::new();
    file.take(MAX_DOCUMENT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io_error(path))?;
    if bytes.len() as u64 > MAX_DOCUMENT_BYTES {
        return Err(LayoutError::Malformed {
            path: path.display().to_string(),
            message: format!("larger than {MAX_DOCUMENT_BYTES} bytes"),
        });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_empty_descriptor_is_the_digest_of_an_empty_object() {
        assert_eq!(digest_of(b"{}"), EMPTY_DIGEST);
    }

    #[test]
    fn a_layout_is_unfinished_until_its_index_is_written_and_blobs_are_checked() {
        let dir = tempfile::tempdir().expect("dir");
        let mut writer = Writer::create(dir.path()).expect("create");
        let signed = writer
            .put_bytes(SIGNED_BUNDLE_MEDIA_TYPE, b"{\"signed\":1}")
            .expect("blob");
        let empty = writer.put_bytes(EMPTY_MEDIA_TYPE, b"{}").expect("empty");
        assert_eq!(empty.digest, EMPTY_DIGEST);
        let manifest = image_manifest(
            BUNDLE_ARTIFACT_TYPE,
            std::slice::from_ref(&signed),
            BTreeMap::new(),
        );
        let mut descriptor = writer
            .put_bytes(MANIFEST_MEDIA_TYPE, &manifest)
            .expect("manifest");
        descriptor.artifact_type = Some(BUNDLE_ARTIFACT_TYPE.into());
        assert!(matches!(
            Layout::open(dir.path()),
            Err(LayoutError::Unfinished(_))
        ));
        writer.add(descriptor.clone());
        let referenced = vec![signed.digest.clone(), empty.digest, descriptor.digest];
        writer.finish(&referenced).expect("finish");
        let layout = Layout::open(dir.path()).expect("open");
        assert_eq!(layout.bundle().expect("bundle"), b"{\"signed\":1}");
        // One byte changed on the media: refused by its digest.
        let blob = layout.blob_path(&signed.digest).expect("path");
        std::fs::write(&blob, b"{\"signed\":2}").expect("tamper");
        assert!(matches!(layout.bundle(), Err(LayoutError::Mismatch { .. })));
    }
}
