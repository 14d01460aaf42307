//! The control plane's ed25519 keys: `berth keys generate`, and reading key files.
//!
//! A key pair is two files: `PREFIX.key` (the 32-byte secret seed, hex, mode 0600) and
//! `PREFIX.pub` (the public key, hex), the prefix taken literally (`cp.2025` makes
//! `cp.2025.key`). Both are created only if neither exists (checked before either is written,
//! so a refusal leaves nothing behind), through [`crate::files::output::create_new`]. The
//! secret is never printed.

use crate::files::output::{self, WriteError, with_suffix};
use berth_compiler::plan::hex;
use ed25519_dalek::{SigningKey, VerifyingKey};
use std::io;
use std::path::{Path, PathBuf};

const SECRET_PREFIX: &str = "berth-ed25519-secret:";
const PUBLIC_PREFIX: &str = "berth-ed25519-public:";

/// Why a key could not be made or read.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error("cannot read `{path}`: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("`{path}` is not a berth {expected} key")]
    Format {
        path: PathBuf,
        expected: &'static str,
    },
    #[error("the operating system gave no randomness: {0}")]
    Random(String),
}

pub fn from_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.is_ascii() {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect()
}

/// A fresh key from the operating system's randomness.
pub fn generate() -> Result<SigningKey, KeyError> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| KeyError::Random(e.to_string()))?;
    Ok(SigningKey::from_bytes(&seed))
}

/// Writes `PREFIX.key` (0600) and `PREFIX.pub` (0644), refusing before writing either if
/// either exists; returns both paths.
pub fn write_pair(prefix: &Path, key: &SigningKey) -> Result<(PathBuf, PathBuf), KeyError> {
    let secret = with_suffix(prefix, ".key");
    let public = with_suffix(prefix, ".pub");
    output::refuse_existing(&secret)?;
    output::refuse_existing(&public)?;
    let secret_text = format!("{SECRET_PREFIX}{}\n", hex(key.as_bytes()));
    output::create_new(&secret, secret_text.as_bytes(), 0o600)?;
    let public_text = format!("{PUBLIC_PREFIX}{}\n", hex(key.verifying_key().as_bytes()));
    if let Err(e) = output::create_new(&public, public_text.as_bytes(), 0o644) {
        // No secret without its public half.
        let _ = std::fs::remove_file(&secret);
        return Err(e.into());
    }
    Ok((secret, public))
}

fn read_hex32(path: &Path, prefix: &str, expected: &'static str) -> Result<[u8; 32], KeyError> {
    let text = std::fs::read_to_string(path).map_err(|source| KeyError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let format = || KeyError::Format {
        path: path.to_path_buf(),
        expected,
    };
    let hex = text.trim().strip_prefix(prefix).ok_or_else(format)?;
    from_hex(hex)
        .and_then(|b| <[u8; 32]>::try_from(b).ok())
        .ok_or_else(format)
}

/// A public key as `berth keys generate` writes it (`berth-ed25519-public:HEX`): the text a
/// policy's `approvers` and trust files hold.
pub fn public_text(key: &VerifyingKey) -> String {
    format!("{PUBLIC_PREFIX}{}", hex(key.as_bytes()))
}

/// How a key is named in messages and records: `ed25519:` and its first 16 hex digits.
pub fn fingerprint(key: &VerifyingKey) -> String {
    format!("ed25519:{}", &hex(key.as_bytes())[..16])
}

/// The key in `berth-ed25519-public:HEX` text; `None` for anything else.
pub fn parse_public(text: &str) -> Option<VerifyingKey> {
    let bytes = from_hex(text.trim().strip_prefix(PUBLIC_PREFIX)?)?;
    VerifyingKey::from_bytes(&<[u8; 32]>::try_from(bytes).ok()?).ok()
}

/// Whether `text` is meant as a public key (it may still be malformed).
pub fn looks_public(text: &str) -> bool {
    text.trim().starts_with(PUBLIC_PREFIX)
}

pub fn read_signing(path: &Path) -> Result<SigningKey, KeyError> {
    read_hex32(path, SECRET_PREFIX, "secret").map(|seed| SigningKey::from_bytes(&seed))
}

pub fn read_verifying(path: &Path) -> Result<VerifyingKey, KeyError> {
    let bytes = read_hex32(path, PUBLIC_PREFIX, "public")?;
    VerifyingKey::from_bytes(&bytes).map_err(|_| KeyError::Format {
        path: path.to_path_buf(),
        expected: "public",
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn pairs_round_trip_and_the_secret_is_private() {
        let dir = tempfile::tempdir().expect("temp dir");
        let key = generate().expect("randomness");
        let (secret, public) = write_pair(&dir.path().join("cp"), &key).expect("written");
        let mode = std::fs::metadata(&secret)
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            read_signing(&secret).expect("read").as_bytes(),
            key.as_bytes()
        );
        assert_eq!(read_verifying(&public).expect("read"), key.verifying_key());
        assert!(
            read_verifying(&secret).is_err(),
            "a secret is not a public key"
        );
        assert!(
            write_pair(&dir.path().join("cp"), &key).is_err(),
            "never overwrites"
        );
    }
}
