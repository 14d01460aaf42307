//! Pulling the bundle: a conditional GET (`If-None-Match` with the last ETag) from an HTTP(S)
//! bundle store, or a read of a file (`file://PATH` or a path, e.g. a transfer disk), whose
//! content hash stands in for the ETag.

use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;

/// The largest bundle the agent reads (docs/agent.md): a bundle lists one target's workloads,
/// kilobytes in practice; anything past this is refused before it is all read.
pub const MAX_BUNDLE_BYTES: u64 = 16 << 20;

pub enum Pulled {
    NotModified,
    Changed {
        bytes: Vec<u8>,
        etag: Option<String>,
    },
    /// The source offers more than [`MAX_BUNDLE_BYTES`]: refused, not read to the end.
    TooLarge,
}

/// Fetches `source` unless it still has `etag`. The error is for status ("connection
/// refused", "status 404").
pub async fn pull(
    client: &reqwest::Client,
    source: &str,
    etag: Option<&str>,
) -> Result<Pulled, String> {
    if source.starts_with("http://") || source.starts_with("https://") {
        let mut request = client
            .get(source)
            .timeout(std::time::Duration::from_secs(30));
        if let Some(etag) = etag {
            request = request.header("if-none-match", etag);
        }
        let response = request.send().await.map_err(|e| describe(&e))?;
        if response.status() == reqwest::StatusCode::NOT_MODIFIED {
            return Ok(Pulled::NotModified);
        }
        if !response.status().is_success() {
            return Err(format!("status {}", response.status()));
        }
        if response
            .content_length()
            .is_some_and(|n| n > MAX_BUNDLE_BYTES)
        {
            return Ok(Pulled::TooLarge);
        }
        let etag = response
            .headers()
            .get("etag")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let mut response = response;
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| describe(&e))? {
            if (bytes.len() + chunk.len()) as u64 > MAX_BUNDLE_BYTES {
                return Ok(Pulled::TooLarge);
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(Pulled::Changed { bytes, etag })
    } else {
        let path = source.strip_prefix("file://").unwrap_or(source);
        let cannot = |e: std::io::Error| format!("cannot read `{path}`: {e}");
        let file = tokio::fs::File::open(path).await.map_err(cannot)?;
        let mut bytes = Vec::new();
        file.take(MAX_BUNDLE_BYTES + 1)
            .read_to_end(&mut bytes)
            .await
            .map_err(cannot)?;
        if bytes.len() as u64 > MAX_BUNDLE_BYTES {
            return Ok(Pulled::TooLarge);
        }
        let tag = format!(
            "\"sha256:{}\"",
            berth_compiler::plan::hex(&Sha256::digest(&bytes))
        );
        if etag == Some(tag.as_str()) {
            return Ok(Pulled::NotModified);
        }
        Ok(Pulled::Changed {
            bytes,
            etag: Some(tag),
        })
    }
}

/// reqwest's error with its causes (the top level alone says only "error sending request").
fn describe(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}
