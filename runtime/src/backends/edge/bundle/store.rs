//! Bundle stores: where the control plane publishes signed bundles and agents pull them.
//! A directory (`/srv/bundles`, `file:///srv/bundles`) or an HTTP(S) prefix that accepts PUT
//! (any web server or object store). A target's bundle is `TARGET.bundle.json` under it.

use super::{Bundle, SignedBundle};
use std::path::PathBuf;
use std::time::Duration;

/// A place bundles are published to and pulled from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    Dir(PathBuf),
    Http(String),
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot write `{path}`: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("HTTP {method} `{url}` failed: {message}")]
    Http {
        method: &'static str,
        url: String,
        message: String,
    },
}

impl Location {
    /// `http://…` or `https://…` is HTTP; `file://PATH` and plain paths are directories.
    pub fn parse(text: &str) -> Location {
        if text.starts_with("http://") || text.starts_with("https://") {
            Location::Http(text.trim_end_matches('/').to_string())
        } else {
            Location::Dir(PathBuf::from(text.strip_prefix("file://").unwrap_or(text)))
        }
    }

    /// Where `target`'s bundle lives, as a URL or path text an agent's `--source` takes.
    pub fn bundle_address(&self, target: &str) -> String {
        match self {
            Location::Dir(dir) => dir.join(file_name(target)).display().to_string(),
            Location::Http(base) => format!("{base}/{}", file_name(target)),
        }
    }

    /// The generation currently published for `target`, 0 when none is (an unreadable or
    /// unparsable one counts as none: the next publish replaces it). The signature is not
    /// checked: the publisher only needs a number above it.
    pub async fn published_generation(&self, client: &reqwest::Client, target: &str) -> u64 {
        match self {
            Location::Dir(dir) => generation_of(std::fs::read(dir.join(file_name(target))).ok()),
            Location::Http(_) => self
                .http_current(client, target)
                .await
                .map_or(0, |(generation, _)| generation),
        }
    }

    /// Publishes the next generation of `target`'s bundle, `sign(generation)`, as a
    /// compare-and-swap: it replaces exactly the bundle whose generation it read, so of two
    /// publishers racing one gets N + 1 and the other N + 2, and an earlier run can never
    /// write over a later generation.
    ///
    /// A directory is locked (an advisory lock on `.TARGET.bundle.lock`, released when the
    /// process ends however it ends) around read, write and rename; the rename is atomic, so
    /// a reader sees the old or the new bundle, never half of one. HTTP reads the bundle and
    /// its `ETag`, then PUTs with `If-Match` (`If-None-Match: *` when there is none) and reads
    /// again on `412 Precondition Failed`. Returns the generation and the address.
    pub async fn publish_next(
        &self,
        client: &reqwest::Client,
        target: &str,
        sign: &dyn Fn(u64) -> SignedBundle,
    ) -> Result<(u64, String), StoreError> {
        let address = self.bundle_address(target);
        match self {
            Location::Dir(dir) => {
                let err = |source| StoreError::Write {
                    path: PathBuf::from(&address),
                    source,
                };
                std::fs::create_dir_all(dir).map_err(err)?;
                let lock = std::fs::File::options()
                    .create(true)
                    .truncate(false)
                    .write(true)
                    .open(dir.join(format!(".{}.lock", file_name(target))))
                    .map_err(err)?;
                // INVARIANT: held until `lock` is dropped at the end of this arm.
                lock.lock().map_err(err)?;
                let generation = generation_of(std::fs::read(&address).ok()) + 1;
                let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(err)?;
                std::io::Write::write_all(&mut tmp, &sign(generation).to_bytes()).map_err(err)?;
                tmp.as_file().sync_all().map_err(err)?;
                tmp.persist(&address).map_err(|e| err(e.error))?;
                if let Ok(d) = std::fs::File::open(dir) {
                    let _ = d.sync_all();
                }
                drop(lock);
                Ok((generation, address))
            }
            Location::Http(_) => {
                let http = |message: String| StoreError::Http {
                    method: "PUT",
                    url: address.clone(),
                    message,
                };
                for attempt in 0..CAS_ATTEMPTS {
                    if attempt > 0 {
                        let backoff = Duration::from_millis(50 << attempt.min(4));
                        tokio::time::sleep(backoff).await;
                    }
                    let current = self.http_current(client, target).await;
                    // A weak ETag never matches (RFC 9110 compares strongly for If-Match):
                    // Apache gives one for a file changed within the last second. Read again.
                    if let Some((_, Some(etag))) = &current
                        && etag.starts_with("W/")
                    {
                        continue;
                    }
                    let generation = current.as_ref().map_or(0, |(g, _)| *g) + 1;
                    let mut put = client
                        .put(&address)
                        .header("content-type", "application/json")
                        .body(sign(generation).to_bytes());
                    put = match current {
                        None => put.header("if-none-match", "*"),
                        Some((_, Some(etag))) => put.header("if-match", etag),
                        // A store that gives no ETag cannot compare: the PUT is unconditional
                        // (docs/agent.md says which stores protect the generations).
                        Some((_, None)) => put,
                    };
                    let response = put.send().await.map_err(|e| http(e.to_string()))?;
                    match response.status() {
                        s if s.is_success() => return Ok((generation, address)),
                        reqwest::StatusCode::PRECONDITION_FAILED => continue,
                        s => return Err(http(format!("status {s}"))),
                    }
                }
                Err(http(format!(
                    "the bundle kept changing (or kept a weak ETag) over {CAS_ATTEMPTS} \
                     attempts: run it again"
                )))
            }
        }
    }

    /// The published bundle's generation and `ETag`, `None` when there is none (404, or an
    /// unreadable or unparsable bundle: generation 0 then, with its ETag).
    async fn http_current(
        &self,
        client: &reqwest::Client,
        target: &str,
    ) -> Option<(u64, Option<String>)> {
        let response = client.get(self.bundle_address(target)).send().await.ok()?;
        if !response.status().is_success() {
            return None;
        }
        let etag = response
            .headers()
            .get(reqwest::header::ETAG)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let bytes = response.bytes().await.ok().map(|b| b.to_vec());
        Some((generation_of(bytes), etag))
    }
}

/// How often an HTTP publish reads again after losing a race (or reading a weak ETag),
/// backing off from 100 ms to 800 ms: about 12 s in all.
const CAS_ATTEMPTS: usize = 18;

/// The generation of a signed bundle's bytes, 0 for none or an unreadable one.
fn generation_of(bytes: Option<Vec<u8>>) -> u64 {
    bytes
        .and_then(|b| serde_json::from_slice::<SignedBundle>(&b).ok())
        .and_then(|s| serde_json::from_str::<Bundle>(&s.payload).ok())
        .map_or(0, |b| b.generation)
}

fn file_name(target: &str) -> String {
    format!("{target}.bundle.json")
}
