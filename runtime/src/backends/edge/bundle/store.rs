//! Bundle stores: where the control plane publishes signed bundles and agents pull them.
//! A directory (`/srv/bundles`, `file:///srv/bundles`) or an HTTP(S) prefix that accepts PUT
//! (any web server or object store). A target's bundle is `TARGET.bundle.json` under it.

use super::{Bundle, SignedBundle};
use std::path::PathBuf;

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
        let bytes = match self {
            Location::Dir(dir) => std::fs::read(dir.join(file_name(target))).ok(),
            Location::Http(_) => match client.get(self.bundle_address(target)).send().await {
                Ok(r) if r.status().is_success() => r.bytes().await.ok().map(|b| b.to_vec()),
                _ => None,
            },
        };
        bytes
            .and_then(|b| serde_json::from_slice::<SignedBundle>(&b).ok())
            .and_then(|s| serde_json::from_str::<Bundle>(&s.payload).ok())
            .map_or(0, |b| b.generation)
    }

    /// Publishes atomically: a directory gets a temporary file renamed over the old one (a
    /// reader sees the old or the new bundle, never half of one); HTTP gets one PUT.
    pub async fn publish(
        &self,
        client: &reqwest::Client,
        target: &str,
        signed: &SignedBundle,
    ) -> Result<String, StoreError> {
        let address = self.bundle_address(target);
        match self {
            Location::Dir(dir) => {
                let err = |source| StoreError::Write {
                    path: PathBuf::from(&address),
                    source,
                };
                std::fs::create_dir_all(dir).map_err(err)?;
                let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(err)?;
                std::io::Write::write_all(&mut tmp, &signed.to_bytes()).map_err(err)?;
                tmp.as_file().sync_all().map_err(err)?;
                tmp.persist(&address).map_err(|e| err(e.error))?;
            }
            Location::Http(_) => {
                let http = |message: String| StoreError::Http {
                    method: "PUT",
                    url: address.clone(),
                    message,
                };
                let response = client
                    .put(&address)
                    .header("content-type", "application/json")
                    .body(signed.to_bytes())
                    .send()
                    .await
                    .map_err(|e| http(e.to_string()))?;
                if !response.status().is_success() {
                    return Err(http(format!("status {}", response.status())));
                }
            }
        }
        Ok(address)
    }
}

fn file_name(target: &str) -> String {
    format!("{target}.bundle.json")
}
