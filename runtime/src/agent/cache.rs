//! The model cache: artifacts stored by content (`STATE/cache/sha256/HEX`), fetched by
//! streaming (HTTP(S) through reqwest, `file://` or a path), hashed while they stream, resumed
//! after an interruption (HTTP `Range`, or a file offset) and retried. `oci://` artifacts
//! ([`super::oci`]) are directories (`STATE/cache/oci/HEX`, HEX the manifest's digest), one
//! file per layer, each layer streamed, hashed, resumed and retried the same way.
//!
//! INVARIANT: a file appears under `sha256/` (a directory under `oci/`) only by a rename after
//! its SHA-256 matched (after its manifest's and every layer's matched), so whatever is there
//! is verified and is never fetched again; a mismatching artifact is deleted and never handed
//! to a workload. Beyond the byte budget, the least recently used
//! artifacts that the running bundle does not need are evicted.

use super::state::{ArtifactRecord, State};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};

const CHUNK: usize = 1 << 20;
const ATTEMPTS: u32 = 3;

/// Whether berth itself can fetch the artifact at `uri` (the agent's cache, `berth fetch`):
/// `oci://`, `http(s)://`, `file://` and plain paths. Other schemes (`ngc://`, `hf://`) are
/// fetched by the model server or the NIM Operator, never by berth.
pub fn can_fetch(uri: &str) -> bool {
    // INVARIANT: the compiler's definition, so a plan never stages on an edge agent what it
    // cannot fetch (the plan's `model_unreachable`).
    berth_compiler::plan::berth_fetches(uri)
}

/// Why an artifact is not in the cache.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum FetchError {
    #[error("artifact `{0}` has no digest: the agent runs only verified artifacts")]
    NoDigest(String),
    #[error("digest `{0}` is not `sha256:` and 64 hex digits")]
    BadDigest(String),
    #[error("artifact `{0}`: only http(s)://, oci://, file:// and paths can be fetched")]
    Unsupported(String),
    /// An `oci://` reference or manifest the agent cannot use.
    #[error("artifact `{uri}`: {message}")]
    Refused { uri: String, message: String },
    #[error("artifact `{uri}` has digest `{actual}`, expected `{expected}`")]
    Mismatch {
        uri: String,
        expected: String,
        actual: String,
    },
    #[error("cannot fetch `{uri}`: {message}")]
    Fetch { uri: String, message: String },
    /// More bytes than the cache may hold: it could never be kept, so it is not read on.
    #[error("artifact `{uri}` is larger than the cache budget of {budget} bytes")]
    TooLarge { uri: String, budget: u64 },
}

pub struct Cache {
    dir: PathBuf,
    /// Bytes the cache may hold.
    pub budget: u64,
    client: reqwest::Client,
    registries: Option<super::oci::Registries>,
}

fn now_ms() -> u64 {
    super::now_ms()
}

impl Cache {
    pub fn new(dir: PathBuf, budget: u64, client: reqwest::Client) -> Cache {
        Cache {
            dir,
            budget,
            client,
            registries: None,
        }
    }

    /// Lets the cache pull `oci://` artifacts from `registries`.
    pub fn with_registries(mut self, registries: super::oci::Registries) -> Cache {
        self.registries = Some(registries);
        self
    }

    /// The registries `oci://` artifacts are pulled from, if any.
    pub fn registries(&self) -> Option<&super::oci::Registries> {
        self.registries.as_ref()
    }

    /// Whether the artifact `uri` of `digest` is in the cache (verified, as everything there).
    pub fn holds(&self, uri: &str, digest: &str) -> bool {
        let Ok(hex) = hex_of(digest) else {
            return false;
        };
        let kind = if uri.starts_with("oci://") {
            "oci"
        } else {
            "sha256"
        };
        self.dir.join(kind).join(hex).exists()
    }

    /// The cached file of `digest` (whether or not it is there).
    pub fn path_of(&self, digest: &str) -> Option<PathBuf> {
        let hex = hex_of(digest).ok()?;
        Some(self.dir.join("sha256").join(hex))
    }

    /// The cached file of the artifact at `uri` with `digest`, fetching it if needed.
    /// Returns whether it was fetched now (false: already cached).
    /// [`Cache::ensure`] from the first of `sources` that serves the artifact (the plan's
    /// `staging.pull`: the target's registry mirrors, then the artifact itself unless the
    /// target is disconnected), or from `uri` alone when `sources` is empty. Every source is
    /// held to the same digest, so a mirror can serve nothing else. A source that cannot be
    /// reached, refuses, or serves other bytes is passed over for the next, keeping nothing
    /// it served; the error is then the first digest mismatch, if a source lied, else the
    /// last source's.
    pub async fn ensure_from(
        &self,
        state: &State,
        sources: &[String],
        uri: &str,
        digest: Option<&str>,
    ) -> Result<(PathBuf, bool), FetchError> {
        if sources.is_empty() {
            return self.ensure(state, uri, digest).await;
        }
        let (mut mismatch, mut last) = (None, None);
        for source in sources {
            match self.ensure(state, source, digest).await {
                Ok(done) => return Ok(done),
                Err(e @ (FetchError::NoDigest(_) | FetchError::BadDigest(_))) => return Err(e),
                Err(e @ FetchError::Mismatch { .. }) => {
                    tracing::warn!(source = %source, "{e}; trying the next source");
                    mismatch.get_or_insert(e);
                }
                Err(e) => {
                    tracing::warn!(source = %source, "{e}; trying the next source");
                    last = Some(e);
                }
            }
        }
        Err(mismatch
            .or(last)
            .unwrap_or_else(|| FetchError::Unsupported(uri.to_string())))
    }

    pub async fn ensure(
        &self,
        state: &State,
        uri: &str,
        digest: Option<&str>,
    ) -> Result<(PathBuf, bool), FetchError> {
        let digest = digest.ok_or_else(|| FetchError::NoDigest(uri.to_string()))?;
        let hex = hex_of(digest)?;
        if uri.starts_with("oci://") {
            return self.ensure_oci(state, uri, digest, &hex).await;
        }
        let done = self.dir.join("sha256").join(&hex);
        if done.exists() {
            // A crash between rename and record leaves a verified file unrecorded: record it.
            record_if_missing(state, digest, || {
                std::fs::metadata(&done).map_or(0, |m| m.len())
            });
            return Ok((done, false));
        }
        let io = |e: std::io::Error| FetchError::Fetch {
            uri: uri.to_string(),
            message: e.to_string(),
        };
        let partial_dir = self.dir.join("partial");
        tokio::fs::create_dir_all(&partial_dir).await.map_err(io)?;
        tokio::fs::create_dir_all(self.dir.join("sha256"))
            .await
            .map_err(io)?;
        let partial = partial_dir.join(format!("{hex}.part"));
        let mut last = None;
        for attempt in 0..ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(200 << attempt)).await;
            }
            match self.download(uri, &partial).await {
                Ok((hasher, size)) => {
                    let actual =
                        format!("sha256:{}", berth_compiler::plan::hex(&hasher.finalize()));
                    if actual != digest {
                        let _ = tokio::fs::remove_file(&partial).await;
                        return Err(FetchError::Mismatch {
                            uri: uri.to_string(),
                            expected: digest.to_string(),
                            actual,
                        });
                    }
                    tokio::fs::rename(&partial, &done).await.map_err(io)?;
                    if let Ok(dir) = std::fs::File::open(self.dir.join("sha256")) {
                        let _ = dir.sync_all();
                    }
                    let record = ArtifactRecord {
                        size,
                        last_used_ms: now_ms(),
                    };
                    let _ = state.set_artifact(digest, Some(record));
                    return Ok((done, true));
                }
                Err(e @ FetchError::Unsupported(_)) => return Err(e),
                Err(e @ FetchError::TooLarge { .. }) => {
                    let _ = tokio::fs::remove_file(&partial).await;
                    return Err(e);
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| FetchError::Fetch {
            uri: uri.to_string(),
            message: "no attempt made".into(),
        }))
    }

    /// [`ensure`] for an `oci://` artifact: its directory, pulled layer by layer into
    /// `partial/HEX.oci/` and renamed into `oci/HEX` once every layer is verified.
    async fn ensure_oci(
        &self,
        state: &State,
        uri: &str,
        digest: &str,
        hex: &str,
    ) -> Result<(PathBuf, bool), FetchError> {
        // A reference that contradicts the pinned digest is refused, cached or not.
        let reference =
            super::oci::reference(uri, digest).map_err(|message| FetchError::Refused {
                uri: uri.to_string(),
                message,
            })?;
        let done = self.dir.join("oci").join(hex);
        let record = |size: u64| {
            let record = ArtifactRecord {
                size,
                last_used_ms: now_ms(),
            };
            let _ = state.set_artifact(digest, Some(record));
        };
        if done.is_dir() {
            record_if_missing(state, digest, || dir_size(&done));
            return Ok((done, false));
        }
        let registries = self
            .registries
            .as_ref()
            .ok_or_else(|| FetchError::Unsupported(uri.to_string()))?;
        let io = |e: std::io::Error| FetchError::Fetch {
            uri: uri.to_string(),
            message: e.to_string(),
        };
        let work = self.dir.join("partial").join(format!("{hex}.oci"));
        tokio::fs::create_dir_all(&work).await.map_err(io)?;
        tokio::fs::create_dir_all(self.dir.join("oci"))
            .await
            .map_err(io)?;
        let mut last = None;
        for attempt in 0..ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(200 << attempt)).await;
            }
            match self.pull_oci(registries, &reference, uri, &work).await {
                Ok(size) => {
                    tokio::fs::rename(&work, &done).await.map_err(io)?;
                    if let Ok(dir) = std::fs::File::open(self.dir.join("oci")) {
                        let _ = dir.sync_all();
                    }
                    record(size);
                    return Ok((done, true));
                }
                Err(e @ (FetchError::Mismatch { .. } | FetchError::Refused { .. })) => {
                    let _ = tokio::fs::remove_dir_all(&work).await;
                    return Err(e);
                }
                Err(e @ FetchError::TooLarge { .. }) => return Err(e),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| FetchError::Fetch {
            uri: uri.to_string(),
            message: "no attempt made".into(),
        }))
    }

    /// The manifest (checked against its digest), then every layer not yet in `work`:
    /// streamed from where an earlier attempt stopped, hashed, checked, renamed to its name.
    /// The bytes of all layers.
    async fn pull_oci(
        &self,
        registries: &super::oci::Registries,
        reference: &oci_client::Reference,
        uri: &str,
        work: &Path,
    ) -> Result<u64, FetchError> {
        use super::oci::Pull;
        use futures::StreamExt;
        let fetch = |message: String| FetchError::Fetch {
            uri: uri.to_string(),
            message,
        };
        let io = |e: std::io::Error| fetch(e.to_string());
        let layers = registries.manifest(reference).await.map_err(|p| match p {
            Pull::Failed(m) => fetch(m),
            Pull::Mismatch { expected, actual } => FetchError::Mismatch {
                uri: uri.to_string(),
                expected,
                actual,
            },
            Pull::Refused(m) => FetchError::Refused {
                uri: uri.to_string(),
                message: m,
            },
        })?;
        let total: u64 = layers.iter().map(|l| l.size).sum();
        if total > self.budget {
            return Err(FetchError::TooLarge {
                uri: uri.to_string(),
                budget: self.budget,
            });
        }
        for layer in &layers {
            let file = work.join(&layer.name);
            if file.exists() {
                continue;
            }
            let part = work.join(format!(".{}.part", &layer.digest[7..]));
            let (mut hasher, mut offset) = rehash(&part).await.map_err(io)?;
            let out = tokio::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&part)
                .await
                .map_err(io)?;
            if offset < layer.size {
                let (ranged, mut stream) = registries
                    .blob(reference, layer, offset)
                    .await
                    .map_err(|p| match p {
                        Pull::Failed(m) | Pull::Refused(m) => fetch(m),
                        Pull::Mismatch { expected, actual } => FetchError::Mismatch {
                            uri: uri.to_string(),
                            expected,
                            actual,
                        },
                    })?;
                if !ranged && offset > 0 {
                    out.set_len(0).await.map_err(io)?;
                    hasher = Sha256::new();
                    offset = 0;
                }
                // As for HTTP: hashing and writing on a blocking thread, fed batches of about
                // 1 MiB through a bounded channel, so they overlap with receiving.
                let (batches, received) = tokio::sync::mpsc::channel(8);
                let file = out.into_std().await;
                let sink = tokio::task::spawn_blocking(move || {
                    hash_and_write(received, file, hasher, offset)
                });
                let mut failed = None;
                let mut batch = Vec::new();
                let mut batch_bytes = 0;
                let mut arrived = offset;
                while let Some(chunk) = stream.next().await {
                    let chunk = match chunk {
                        Ok(chunk) => chunk,
                        Err(e) => {
                            failed = Some(io(e));
                            break;
                        }
                    };
                    arrived += chunk.len() as u64;
                    if arrived > layer.size {
                        break;
                    }
                    batch_bytes += chunk.len();
                    batch.push(chunk);
                    if batch_bytes >= CHUNK {
                        batch_bytes = 0;
                        if batches.send(std::mem::take(&mut batch)).await.is_err() {
                            break;
                        }
                    }
                }
                if !batch.is_empty() {
                    let _ = batches.send(batch).await;
                }
                drop(batches);
                let written = sink.await.map_err(|e| fetch(e.to_string()))?;
                (hasher, offset) = written.map_err(io)?;
                // What arrived before a failure is in the part, synced: the next attempt
                // resumes after it.
                if let Some(e) = failed {
                    return Err(e);
                }
                // More than the manifest says is a lie about the layer, whatever its start.
                offset = offset.max(arrived);
            } else {
                out.sync_all().await.map_err(io)?;
            }
            let actual = format!("sha256:{}", berth_compiler::plan::hex(&hasher.finalize()));
            if actual != layer.digest || offset != layer.size {
                let _ = tokio::fs::remove_file(&part).await;
                return Err(FetchError::Mismatch {
                    uri: format!("{uri} (layer `{}`)", layer.name),
                    expected: layer.digest.clone(),
                    actual,
                });
            }
            tokio::fs::rename(&part, &file).await.map_err(io)?;
        }
        Ok(total)
    }

    /// Streams `uri` into `partial`, resuming after the bytes already there (re-hashed first).
    async fn download(&self, uri: &str, partial: &Path) -> Result<(Sha256, u64), FetchError> {
        let io = |e: std::io::Error| FetchError::Fetch {
            uri: uri.to_string(),
            message: e.to_string(),
        };
        let (mut hasher, mut offset) = rehash(partial).await.map_err(io)?;
        let mut out = tokio::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(partial)
            .await
            .map_err(io)?;
        if uri.starts_with("http://") || uri.starts_with("https://") {
            let mut request = self.client.get(uri);
            if offset > 0 {
                request = request.header("range", format!("bytes={offset}-"));
            }
            let fetch = |e: reqwest::Error| FetchError::Fetch {
                uri: uri.to_string(),
                message: e.to_string(),
            };
            let mut response = request.send().await.map_err(fetch)?;
            let too_large = FetchError::TooLarge {
                uri: uri.to_string(),
                budget: self.budget,
            };
            let status = response.status();
            if offset > 0 && status == reqwest::StatusCode::OK {
                // The server ignored the range: start over.
                out.set_len(0).await.map_err(io)?;
                hasher = Sha256::new();
                offset = 0;
            } else if !status.is_success() {
                return Err(FetchError::Fetch {
                    uri: uri.to_string(),
                    message: format!("status {status}"),
                });
            }
            if response
                .content_length()
                .is_some_and(|n| offset.saturating_add(n) > self.budget)
            {
                return Err(too_large);
            }
            // Hashing and writing run on a blocking thread fed through a bounded channel, so
            // they overlap with receiving. Network chunks are small: they travel in batches
            // of about 1 MiB (no copy, one wake-up per batch), and the file gets 1 MiB
            // buffered writes.
            let (batches, received) = tokio::sync::mpsc::channel(8);
            let file = out.into_std().await;
            let sink =
                tokio::task::spawn_blocking(move || hash_and_write(received, file, hasher, offset));
            let mut failed = None;
            let mut batch = Vec::new();
            let mut batch_bytes = 0;
            let mut received = 0u64;
            loop {
                let chunk = match response.chunk().await {
                    Ok(Some(chunk)) => chunk,
                    Ok(None) => break,
                    Err(e) => {
                        failed = Some(fetch(e));
                        break;
                    }
                };
                batch_bytes += chunk.len();
                received += chunk.len() as u64;
                if offset.saturating_add(received) > self.budget {
                    failed = Some(too_large);
                    break;
                }
                batch.push(chunk);
                if batch_bytes >= CHUNK {
                    batch_bytes = 0;
                    if batches.send(std::mem::take(&mut batch)).await.is_err() {
                        break;
                    }
                }
            }
            if !batch.is_empty() {
                let _ = batches.send(batch).await;
            }
            drop(batches);
            let written = sink.await.map_err(|e| FetchError::Fetch {
                uri: uri.to_string(),
                message: e.to_string(),
            })?;
            let (hasher, offset) = written.map_err(io)?;
            // What arrived before a failure is on disk: the next attempt resumes after it.
            return match failed {
                Some(e) => Err(e),
                None => Ok((hasher, offset)),
            };
        } else if !can_fetch(uri) {
            return Err(FetchError::Unsupported(uri.to_string()));
        } else {
            let path = uri.strip_prefix("file://").unwrap_or(uri);
            let mut input = tokio::fs::File::open(path).await.map_err(io)?;
            input
                .seek(std::io::SeekFrom::Start(offset))
                .await
                .map_err(io)?;
            let mut buf = vec![0u8; CHUNK];
            loop {
                let n = input.read(&mut buf).await.map_err(io)?;
                if n == 0 {
                    break;
                }
                if offset.saturating_add(n as u64) > self.budget {
                    return Err(FetchError::TooLarge {
                        uri: uri.to_string(),
                        budget: self.budget,
                    });
                }
                hasher.update(&buf[..n]);
                out.write_all(&buf[..n]).await.map_err(io)?;
                offset += n as u64;
            }
        }
        out.sync_all().await.map_err(io)?;
        Ok((hasher, offset))
    }

    /// Puts an artifact carried in a bundle's OCI layout (`berth agent --import`) into the
    /// cache, with no network: each byte hashed as it is copied, renamed into place only when
    /// it matches, as a fetched artifact is. Returns the cached path and whether it was
    /// copied now (false: already cached).
    pub async fn import(
        &self,
        state: &State,
        uri: &str,
        digest: &str,
        carried: Carried,
    ) -> Result<(PathBuf, bool), FetchError> {
        let hex = hex_of(digest)?;
        let kind = if matches!(carried, Carried::Oci { .. }) {
            "oci"
        } else {
            "sha256"
        };
        let done = self.dir.join(kind).join(&hex);
        if done.exists() {
            record_if_missing(state, digest, || match &carried {
                Carried::Oci { .. } => dir_size(&done),
                Carried::File(_) => std::fs::metadata(&done).map_or(0, |m| m.len()),
            });
            return Ok((done, false));
        }
        let (dir, budget) = (self.dir.clone(), self.budget);
        let (uri_owned, digest_owned, target) = (uri.to_string(), digest.to_string(), done.clone());
        let size = tokio::task::spawn_blocking(move || {
            import_blocking(
                &dir,
                budget,
                &uri_owned,
                &digest_owned,
                &hex,
                carried,
                &target,
            )
        })
        .await
        .map_err(|e| FetchError::Fetch {
            uri: uri.to_string(),
            message: e.to_string(),
        })??;
        let record = ArtifactRecord {
            size,
            last_used_ms: now_ms(),
        };
        let _ = state.set_artifact(digest, Some(record));
        Ok((done, true))
    }

    /// Evicts least recently used artifacts not in `keep` until the cache fits its budget.
    /// Returns the digests evicted.
    pub fn evict(&self, state: &State, keep: &[String]) -> Vec<String> {
        let mut artifacts = state.artifacts().unwrap_or_default();
        let mut total: u64 = artifacts.iter().map(|(_, r)| r.size).sum();
        artifacts.sort_by_key(|(_, r)| r.last_used_ms);
        let mut evicted = Vec::new();
        for (digest, record) in artifacts {
            if total <= self.budget {
                break;
            }
            if keep.contains(&digest) {
                continue;
            }
            if let Some(path) = self.path_of(&digest) {
                let _ = std::fs::remove_file(path);
            }
            if let Ok(hex) = hex_of(&digest) {
                let _ = std::fs::remove_dir_all(self.dir.join("oci").join(hex));
            }
            let _ = state.set_artifact(&digest, None);
            total = total.saturating_sub(record.size);
            evicted.push(digest);
        }
        evicted
    }

    /// (bytes held, artifacts held).
    pub fn usage(&self, state: &State) -> (u64, usize) {
        let artifacts = state.artifacts().unwrap_or_default();
        (artifacts.iter().map(|(_, r)| r.size).sum(), artifacts.len())
    }
}

/// An artifact as a carried bundle holds it ([`Cache::import`]).
pub enum Carried {
    /// One file, which must hash to the artifact's digest.
    File(PathBuf),
    /// An `oci://` artifact: its manifest, which must hash to the artifact's digest, and the
    /// directory of blobs (`HEX` files) holding its layers.
    Oci { manifest: Vec<u8>, blobs: PathBuf },
}

/// [`Cache::import`]'s copying, on a blocking thread: the bytes imported.
fn import_blocking(
    dir: &Path,
    budget: u64,
    uri: &str,
    digest: &str,
    hex: &str,
    carried: Carried,
    done: &Path,
) -> Result<u64, FetchError> {
    let io = |e: std::io::Error| FetchError::Fetch {
        uri: uri.to_string(),
        message: e.to_string(),
    };
    let too_large = || FetchError::TooLarge {
        uri: uri.to_string(),
        budget,
    };
    let mismatch = |uri: String, expected: &str, actual: String| FetchError::Mismatch {
        uri,
        expected: expected.to_string(),
        actual,
    };
    let partial = dir.join("partial");
    std::fs::create_dir_all(&partial).map_err(io)?;
    let parent = done.parent().unwrap_or(dir);
    std::fs::create_dir_all(parent).map_err(io)?;
    let size = match carried {
        Carried::File(blob) => {
            if std::fs::metadata(&blob).map_err(io)?.len() > budget {
                return Err(too_large());
            }
            let part = partial.join(format!("{hex}.import"));
            let (actual, size) = copy_hashed(&blob, Some(&part)).map_err(io)?;
            if actual != digest {
                let _ = std::fs::remove_file(&part);
                return Err(mismatch(uri.to_string(), digest, actual));
            }
            std::fs::rename(&part, done).map_err(io)?;
            size
        }
        Carried::Oci { manifest, blobs } => {
            let actual = format!(
                "sha256:{}",
                berth_compiler::plan::hex(&Sha256::digest(&manifest))
            );
            if actual != digest {
                return Err(mismatch(uri.to_string(), digest, actual));
            }
            let refused = |message: String| FetchError::Refused {
                uri: uri.to_string(),
                message,
            };
            let layers = super::oci::layers(&manifest).map_err(refused)?;
            let total: u64 = layers.iter().map(|l| l.size).sum();
            if total > budget {
                return Err(too_large());
            }
            let work = partial.join(format!("{hex}.oci-import"));
            let _ = std::fs::remove_dir_all(&work);
            std::fs::create_dir_all(&work).map_err(io)?;
            for layer in &layers {
                let blob = blobs.join(&layer.digest[7..]);
                if !blob.exists() {
                    let _ = std::fs::remove_dir_all(&work);
                    return Err(refused(format!(
                        "layer `{}` ({}) is not in the carried bundle",
                        layer.name, layer.digest
                    )));
                }
                let (actual, size) =
                    copy_hashed(&blob, Some(&work.join(&layer.name))).map_err(io)?;
                if actual != layer.digest || size != layer.size {
                    let _ = std::fs::remove_dir_all(&work);
                    return Err(mismatch(
                        format!("{uri} (layer `{}`)", layer.name),
                        &layer.digest,
                        actual,
                    ));
                }
            }
            std::fs::rename(&work, done).map_err(io)?;
            total
        }
    };
    if let Ok(d) = std::fs::File::open(parent) {
        let _ = d.sync_all();
    }
    Ok(size)
}

/// Copies `from` to `to` (created or truncated), hashing as it copies, and syncs it; with
/// no `to`, only hashes: (`sha256:` digest, bytes).
pub fn copy_hashed(from: &Path, to: Option<&Path>) -> std::io::Result<(String, u64)> {
    use std::io::{Read, Write};
    let mut input = std::fs::File::open(from)?;
    let mut out = match to {
        Some(to) => Some(std::io::BufWriter::with_capacity(
            CHUNK,
            std::fs::File::create(to)?,
        )),
        None => None,
    };
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; CHUNK];
    let mut size = 0u64;
    loop {
        let n = input.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        if let Some(out) = &mut out {
            out.write_all(&buf[..n])?;
        }
        size += n as u64;
    }
    if let Some(out) = out {
        out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    }
    Ok((
        format!("sha256:{}", berth_compiler::plan::hex(&hasher.finalize())),
        size,
    ))
}

/// Hashes and appends every batch of chunks received to `file`, then syncs it: (the hash,
/// the bytes in the file).
fn hash_and_write<C: AsRef<[u8]>>(
    mut received: tokio::sync::mpsc::Receiver<Vec<C>>,
    file: std::fs::File,
    mut hasher: Sha256,
    mut size: u64,
) -> std::io::Result<(Sha256, u64)> {
    use std::io::Write;
    let mut out = std::io::BufWriter::with_capacity(CHUNK, file);
    while let Some(batch) = received.blocking_recv() {
        for chunk in &batch {
            let chunk = chunk.as_ref();
            hasher.update(chunk);
            out.write_all(chunk)?;
            size += chunk.len() as u64;
        }
    }
    let file = out.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    Ok((hasher, size))
}

/// Records a verified artifact found in the cache but not in the state (a crash between the
/// rename and the record), with the size `size` gives.
fn record_if_missing(state: &State, digest: &str, size: impl FnOnce() -> u64) {
    let recorded = state
        .artifacts()
        .unwrap_or_default()
        .iter()
        .any(|(d, _)| d == digest);
    if !recorded {
        let record = ArtifactRecord {
            size: size(),
            last_used_ms: now_ms(),
        };
        let _ = state.set_artifact(digest, Some(record));
    }
}

/// The hash and length of what an earlier attempt left in `part` (nothing: empty).
async fn rehash(part: &Path) -> std::io::Result<(Sha256, u64)> {
    let mut hasher = Sha256::new();
    let mut length = 0u64;
    if let Ok(mut existing) = tokio::fs::File::open(part).await {
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = existing.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            length += n as u64;
        }
    }
    Ok((hasher, length))
}

/// Bytes of the files directly in `dir`.
fn dir_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

fn hex_of(digest: &str) -> Result<String, FetchError> {
    match digest.strip_prefix("sha256:") {
        Some(hex) if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Ok(hex.to_ascii_lowercase())
        }
        _ => Err(FetchError::BadDigest(digest.to_string())),
    }
}
