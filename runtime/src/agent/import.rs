//! Carried bundles (`berth agent --import DIR`): a target's signed bundle and its model
//! artifacts brought on removable media as an OCI image layout (`berth bundle export`,
//! [`crate::backends::edge::layout`]), for a site the network does not reach.
//!
//! The directory is read at start and every interval (and on `POST /v1/sync`); a new
//! `index.json` is a new export. The bundle is verified exactly as a pulled one
//! ([`Agent::judge`]: the trusted key, then the target, the generation and the floor), then
//! every artifact it needs is copied from the media into the model cache, each byte hashed
//! as it is copied ([`super::cache::Cache::import`]), and only then is the bundle accepted:
//! reconciling finds every artifact in the cache and needs no network.
//!
//! Must never: accept a carried bundle whose signature, admission or any blob's digest fails
//! (the running bundle and everything already cached stay as they are), or read an export
//! that is not finished (no `index.json` yet).

use super::cache::{Carried, FetchError};
use super::{Agent, Feed, now_ms};
use crate::backends::edge::bundle::Bundle;
use crate::backends::edge::layout::{Layout, LayoutError};
use ed25519_dalek::VerifyingKey;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The import directory as `GET /v1/status` shows it (`import`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct ImportStatus {
    pub dir: Option<String>,
    pub last_attempt_ms: Option<u64>,
    /// Why the directory holds nothing to import now (no finished export, unreadable).
    pub last_error: Option<String>,
    /// Why the carried bundle there was refused; cleared once one is accepted.
    pub last_rejection: Option<String>,
    pub last_rejection_ms: Option<u64>,
    /// The generation of the last carried bundle accepted (or found already running).
    pub imported_generation: Option<u64>,
    pub last_import_ms: Option<u64>,
    /// The fingerprint of the media last judged ([`Layout::fingerprint`]): the same export
    /// is not judged again.
    #[serde(skip)]
    judged: Option<String>,
}

impl ImportStatus {
    pub fn new(dir: Option<PathBuf>) -> ImportStatus {
        ImportStatus {
            dir: dir.as_ref().map(|d| d.display().to_string()),
            ..ImportStatus::default()
        }
    }
}

/// Why a carried bundle was not imported, and whether trying again may help (the media or
/// the cache could not be read or written) or only a new export will.
struct Refused {
    reason: String,
    transient: bool,
}

impl Agent {
    /// Imports the carried bundle in the import directory, if it holds a finished export not
    /// judged yet.
    pub async fn import_carried(&self) {
        let Feed::Pull {
            import: Some(dir),
            trust,
            ..
        } = &self.config.feed
        else {
            return;
        };
        let mut status = self.import.lock().map(|s| s.clone()).unwrap_or_default();
        let attempt = now_ms();
        status.last_attempt_ms = Some(attempt);
        let verdict = match Layout::open(dir) {
            Err(e @ (LayoutError::Unfinished(_) | LayoutError::Io { .. })) => {
                status.last_error = Some(e.to_string());
                None
            }
            Err(e) => {
                status.last_error = None;
                let reason = carried(dir, &e);
                if status.last_rejection.as_deref() != Some(reason.as_str()) {
                    Some((Err(self.refuse(reason)), None))
                } else {
                    None
                }
            }
            Ok(layout) => {
                status.last_error = None;
                if status.judged.as_deref() == Some(layout.fingerprint.as_str()) {
                    None
                } else {
                    let verdict = self.import_layout(dir, &layout, trust).await;
                    let judged = match &verdict {
                        Err(Refused {
                            transient: true, ..
                        }) => None,
                        _ => Some(layout.fingerprint.clone()),
                    };
                    let verdict = verdict.map_err(|r| self.refuse(r.reason));
                    Some((verdict, judged))
                }
            }
        };
        match verdict {
            Some((Ok(generation), judged)) => {
                status.judged = judged;
                status.imported_generation = Some(generation);
                status.last_import_ms = Some(attempt);
                status.last_rejection = None;
                status.last_rejection_ms = None;
            }
            Some((Err(reason), judged)) => {
                status.judged = judged;
                status.last_rejection = Some(reason);
                status.last_rejection_ms = Some(attempt);
            }
            None => {}
        }
        if let Ok(mut s) = self.import.lock() {
            *s = status;
        }
    }

    /// Judges the carried bundle of `layout`, copies the artifacts it needs into the cache,
    /// then accepts it (unless it is the bundle already running). Its generation.
    async fn import_layout(
        &self,
        dir: &Path,
        layout: &Layout,
        trust: &VerifyingKey,
    ) -> Result<u64, Refused> {
        let refused = |e: &dyn std::fmt::Display| Refused {
            reason: carried(dir, e),
            transient: false,
        };
        let bytes = layout.bundle().map_err(|e| refused(&e))?;
        let verdict = self.judge(&bytes, trust).map_err(|e| refused(&e))?;
        let bundle: Bundle = match &verdict {
            Some((_, offered)) => offered.clone(),
            None => self.current().ok_or_else(|| refused(&"no bundle runs"))?,
        };
        for w in &bundle.workloads {
            // A variant without a digest is blocked when reconciling, as a pulled one is.
            let Some(variant) = &w.variant else { continue };
            let Some(digest) = &variant.digest else {
                continue;
            };
            let uri = &variant.artifact;
            let Some(descriptor) = layout.artifact(uri) else {
                if self.cache.holds(uri, digest) {
                    continue;
                }
                return Err(refused(&format_args!(
                    "it holds no artifact `{uri}`, which workload `{}` needs",
                    w.name
                )));
            };
            let item = if uri.starts_with("oci://") {
                if &descriptor.digest != digest {
                    return Err(refused(&format_args!(
                        "its manifest of `{uri}` is `{}`, the bundle pins `{digest}`",
                        descriptor.digest
                    )));
                }
                Carried::Oci {
                    manifest: layout.read(descriptor).map_err(|e| refused(&e))?,
                    blobs: layout.blobs_dir(),
                }
            } else {
                let layers = layout.layers(descriptor).map_err(|e| refused(&e))?;
                match layers.as_slice() {
                    [layer] if &layer.digest == digest => {
                        Carried::File(layout.blob_path(digest).map_err(|e| refused(&e))?)
                    }
                    _ => {
                        return Err(refused(&format_args!(
                            "its manifest of `{uri}` does not hold the one file of digest \
                             `{digest}` the bundle pins"
                        )));
                    }
                }
            };
            match self.cache.import(&self.state, uri, digest, item).await {
                Ok((_, copied)) => {
                    if copied {
                        self.record(
                            "artifact_imported",
                            Some(&w.name),
                            serde_json::json!({
                                "artifact": uri,
                                "digest": digest,
                                "from": dir.display().to_string(),
                            }),
                        );
                    }
                }
                Err(e) => {
                    return Err(Refused {
                        transient: matches!(e, FetchError::Fetch { .. }),
                        reason: carried(dir, &e),
                    });
                }
            }
        }
        if let Some((signed, offered)) = verdict {
            self.install(&signed.to_bytes(), None, offered)
                .map_err(|e| Refused {
                    reason: carried(dir, &format_args!("cannot store it: {e}")),
                    transient: true,
                })?;
        }
        Ok(bundle.generation)
    }
}

/// A refusal's reason, naming the carried bundle.
fn carried(dir: &Path, e: &dyn std::fmt::Display) -> String {
    format!("carried bundle `{}`: {e}", dir.display())
}
