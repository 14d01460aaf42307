//! Pulling the bundle: a conditional GET (`If-None-Match` with the last ETag) from an HTTP(S)
//! bundle store, or a read of a file (`file://PATH` or a path, e.g. a transfer disk), whose
//! content hash stands in for the ETag.

use sha2::{Digest, Sha256};

pub enum Pulled {
    NotModified,
    Changed {
        bytes: Vec<u8>,
        etag: Option<String>,
    },
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
        let etag = response
            .headers()
            .get("etag")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let bytes = response.bytes().await.map_err(|e| describe(&e))?;
        Ok(Pulled::Changed {
            bytes: bytes.to_vec(),
            etag,
        })
    } else {
        let path = source.strip_prefix("file://").unwrap_or(source);
        let bytes = tokio::fs::read(path)
            .await
            .map_err(|e| format!("cannot read `{path}`: {e}"))?;
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
