//! A staging directory: where a model artifact is put before the workload that needs it
//! starts (on Kubernetes, a volume filled by a `berth fetch` Job and checked by an init
//! container in every pod of the workload).
//!
//! Layout under the directory `ROOT`:
//! - `ROOT/HEX/`: the verified artifact of digest `sha256:HEX` (an `oci://` artifact's files
//!   by layer title; any other artifact as one file named after its URI's last segment), with
//!   `ROOT/HEX/.berth-digest` holding the digest;
//! - `ROOT/.berth/`: the fetch's working state (partial downloads, kept so a retried fetch
//!   resumes).
//!
//! INVARIANT: `ROOT/HEX` appears only by a rename of a complete directory whose every byte was
//! verified against the digest, marker included, so a marker that names the digest means the
//! artifact is whole. Several versions may sit side by side: pods of the previous rollout keep
//! reading theirs while the next one is staged.

use crate::agent::cache::{Cache, FetchError};
use crate::agent::oci::Registries;
use crate::agent::state::State;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The marker file in a staged artifact's directory: the digest and a newline.
pub const MARKER: &str = ".berth-digest";

/// The directory name of `digest`'s artifact (the digest's hex), or `None` for a malformed
/// digest.
pub fn dir_name(digest: &str) -> Option<String> {
    let hex = digest.strip_prefix("sha256:")?;
    (hex.len() == 64
        && hex
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()))
    .then(|| hex.to_string())
}

/// Why a staging directory does not hold the artifact.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    #[error("digest `{0}` is not `sha256:` and 64 lowercase hex digits")]
    BadDigest(String),
    #[error(transparent)]
    Fetch(#[from] FetchError),
    #[error("cannot write the staging directory `{path}`: {message}")]
    Io { path: String, message: String },
    #[error("`{path}` holds no artifact of digest `{digest}`{found}")]
    NotStaged {
        path: String,
        digest: String,
        /// ` (its marker says …)` when a marker names another digest.
        found: String,
    },
}

/// A staged artifact.
#[derive(Debug)]
pub struct Staged {
    pub path: PathBuf,
    /// Whether it was fetched now (false: already staged).
    pub fetched: bool,
    pub bytes: u64,
}

/// Whether `root` holds `digest`'s artifact, by its marker.
pub fn check(root: &Path, digest: &str) -> Result<PathBuf, StageError> {
    let hex = dir_name(digest).ok_or_else(|| StageError::BadDigest(digest.to_string()))?;
    let dir = root.join(&hex);
    match std::fs::read_to_string(dir.join(MARKER)) {
        Ok(text) if text.trim_end() == digest => Ok(dir),
        Ok(text) => Err(StageError::NotStaged {
            path: dir.display().to_string(),
            digest: digest.to_string(),
            found: format!(" (its marker says `{}`)", text.trim_end()),
        }),
        Err(_) => Err(StageError::NotStaged {
            path: dir.display().to_string(),
            digest: digest.to_string(),
            found: String::new(),
        }),
    }
}

/// [`check`] until it succeeds or `wait` has passed, looking every `every`.
pub async fn wait_for(
    root: &Path,
    digest: &str,
    wait: Duration,
    every: Duration,
) -> Result<PathBuf, StageError> {
    let start = Instant::now();
    loop {
        match check(root, digest) {
            Ok(dir) => return Ok(dir),
            Err(e @ StageError::BadDigest(_)) => return Err(e),
            Err(e) if start.elapsed() >= wait => return Err(e),
            Err(_) => tokio::time::sleep(every.min(wait.saturating_sub(start.elapsed()))).await,
        }
    }
}

/// Fetches `uri` (`oci://`, `http(s)://`, `file://` or a path) into `root`, verified against
/// `digest`, unless it is staged already.
pub async fn stage(
    root: &Path,
    uri: &str,
    sources: &[String],
    digest: &str,
    client: reqwest::Client,
    registries: Registries,
) -> Result<Staged, StageError> {
    let hex = dir_name(digest).ok_or_else(|| StageError::BadDigest(digest.to_string()))?;
    if let Ok(path) = check(root, digest) {
        let bytes = dir_bytes(&path);
        return Ok(Staged {
            path,
            fetched: false,
            bytes,
        });
    }
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |e: std::io::Error| StageError::Io {
            path,
            message: e.to_string(),
        }
    };
    let work = root.join(".berth");
    std::fs::create_dir_all(&work).map_err(io(&work))?;
    let state = State::open(&work.join("state"), 1).map_err(|e| StageError::Io {
        path: work.display().to_string(),
        message: e.to_string(),
    })?;
    let cache = Cache::new(work.join("cache"), u64::MAX, client).with_registries(registries);
    let (cached, _) = cache
        .ensure_from(&state, sources, uri, Some(digest))
        .await?;
    // The complete directory is assembled beside its final name, then renamed.
    let assembling = work.join(format!("{hex}.staging"));
    if assembling.exists() {
        std::fs::remove_dir_all(&assembling).map_err(io(&assembling))?;
    }
    if cached.is_dir() {
        std::fs::rename(&cached, &assembling).map_err(io(&cached))?;
    } else {
        std::fs::create_dir_all(&assembling).map_err(io(&assembling))?;
        std::fs::rename(&cached, assembling.join(file_name(uri))).map_err(io(&cached))?;
    }
    let marker = assembling.join(MARKER);
    std::fs::write(&marker, format!("{digest}\n")).map_err(io(&marker))?;
    if let Ok(f) = std::fs::File::open(&marker) {
        let _ = f.sync_all();
    }
    let path = root.join(&hex);
    if path.exists() {
        // A directory without a valid marker (never made by this function): replaced.
        std::fs::remove_dir_all(&path).map_err(io(&path))?;
    }
    std::fs::rename(&assembling, &path).map_err(io(&path))?;
    if let Ok(dir) = std::fs::File::open(root) {
        let _ = dir.sync_all();
    }
    let _ = state.set_artifact(digest, None);
    let bytes = dir_bytes(&path);
    Ok(Staged {
        path,
        fetched: true,
        bytes,
    })
}

/// The file name of a single-file artifact: its URI's last path segment, or `model`.
pub fn file_name(uri: &str) -> String {
    let path = uri.split(['?', '#']).next().unwrap_or(uri);
    let last = path.rsplit('/').next().unwrap_or("");
    let safe = !last.is_empty()
        && last != "."
        && last != ".."
        && last != MARKER
        && !last.contains('\\')
        && !last.contains('\0');
    if safe {
        last.to_string()
    } else {
        "model".to_string()
    }
}

/// Bytes of the artifact's files (the marker aside).
fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_name() != MARKER)
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn only_well_formed_digests_name_a_directory() {
        assert_eq!(dir_name(DIGEST).as_deref(), Some(&DIGEST[7..]));
        assert_eq!(dir_name("sha256:ABC"), None);
        assert_eq!(dir_name(&DIGEST.to_uppercase()), None);
        assert_eq!(dir_name("md5:00"), None);
    }

    #[test]
    fn a_marker_must_name_the_digest() {
        let root = tempfile::tempdir().expect("tempdir");
        assert!(matches!(
            check(root.path(), DIGEST),
            Err(StageError::NotStaged { ref found, .. }) if found.is_empty()
        ));
        let dir = root.path().join(&DIGEST[7..]);
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join(MARKER), "sha256:00\n").expect("marker");
        let e = check(root.path(), DIGEST).expect_err("wrong marker");
        assert!(e.to_string().contains("its marker says `sha256:00`"), "{e}");
        std::fs::write(dir.join(MARKER), format!("{DIGEST}\n")).expect("marker");
        assert_eq!(check(root.path(), DIGEST).expect("staged"), dir);
    }

    #[test]
    fn file_names_stay_inside_the_directory() {
        assert_eq!(file_name("https://h/models/m.onnx?x=1"), "m.onnx");
        assert_eq!(file_name("https://h/models/"), "model");
        assert_eq!(file_name("file:///a/.."), "model");
        assert_eq!(file_name("/a/.berth-digest"), "model");
    }

    #[tokio::test]
    async fn a_file_is_staged_once_and_a_wrong_digest_leaves_nothing() {
        let root = tempfile::tempdir().expect("tempdir");
        let src = root.path().join("weights.bin");
        std::fs::write(&src, b"weights").expect("write");
        let digest = format!(
            "sha256:{}",
            berth_compiler::plan::hex(&<sha2::Sha256 as sha2::Digest>::digest(b"weights"))
        );
        let into = root.path().join("models");
        let registries = || Registries::new(None, None).expect("registries");
        let uri = src.display().to_string();
        let client = reqwest::Client::new();
        let wrong = format!("sha256:{}", "0".repeat(64));
        let e = stage(&into, &uri, &[], &wrong, client.clone(), registries())
            .await
            .expect_err("mismatch");
        assert!(
            matches!(e, StageError::Fetch(FetchError::Mismatch { .. })),
            "{e}"
        );
        assert!(check(&into, &wrong).is_err());
        let first = stage(&into, &uri, &[], &digest, client.clone(), registries())
            .await
            .expect("staged");
        assert!(first.fetched);
        assert_eq!(first.bytes, 7);
        assert_eq!(
            std::fs::read(first.path.join("weights.bin")).expect("file"),
            b"weights"
        );
        let again = stage(&into, &uri, &[], &digest, client, registries())
            .await
            .expect("staged");
        assert!(!again.fetched);
        assert_eq!(again.path, first.path);
    }
}
