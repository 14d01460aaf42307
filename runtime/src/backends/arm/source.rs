//! Source credentials for a private GitOps repository, in the Flux configuration: the cluster's
//! Flux needs them to fetch what berth commits. From the environment (the names are berth's,
//! the values or files the user's), never from the spec:
//!
//! - HTTPS: `BERTH_FLUX_HTTPS_USER` and the key (a token or password) in
//!   `BERTH_FLUX_HTTPS_KEY`, or in the file `BERTH_FLUX_HTTPS_KEY_FILE`;
//! - SSH: the private key in the file `BERTH_FLUX_SSH_KEY_FILE` and the server's keys in the
//!   known-hosts file `BERTH_FLUX_KNOWN_HOSTS_FILE` (required: Flux does not trust on first use).
//!
//! As the specification of fluxConfigurations (2025-04-01) and the Azure CLI put them: the user
//! in `gitRepository.httpsUser`, the known hosts base64-encoded in
//! `gitRepository.sshKnownHosts` (both readable), the key base64-encoded in
//! `configurationProtectedSettings` (`httpsKey`, `sshPrivateKey`), which ARM never returns.
//!
//! **When they are sent.** A GET does not say what protected settings the configuration holds,
//! so berth keeps, on the machine that sent them, a fingerprint of what it last sent per
//! cluster (SHA-256 over the cluster, the repository, the user and the key, in
//! `$XDG_STATE_HOME/berth/flux-sources.json`, never the key itself). They are sent with every
//! write of the configuration, and a write is made when the fingerprint differs or is unknown
//! (a rotated key, another machine): at most one write more per machine and key, never a key
//! left stale. A secret never appears in a message, a diff or JSON: only the field names.

use base64::Engine;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The credentials, or none (a public repository, or one the cluster reaches otherwise).
pub enum SourceAuth {
    None,
    Https {
        user: String,
        key: String,
    },
    Ssh {
        private_key: Vec<u8>,
        known_hosts: Vec<u8>,
    },
}

impl std::fmt::Debug for SourceAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.kind())
    }
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

impl SourceAuth {
    /// The credentials the environment names, or why they cannot be used.
    pub fn from_env(env: super::credential::Env<'_>) -> Result<SourceAuth, String> {
        let var = |name: &str| env(name).filter(|v| !v.is_empty());
        let read = |name: &str| -> Result<Option<Vec<u8>>, String> {
            match var(name) {
                None => Ok(None),
                Some(path) => std::fs::read(&path)
                    .map(Some)
                    .map_err(|e| format!("cannot read `{name}` `{path}`: {e}")),
            }
        };
        let user = var("BERTH_FLUX_HTTPS_USER");
        let key = match (
            var("BERTH_FLUX_HTTPS_KEY"),
            read("BERTH_FLUX_HTTPS_KEY_FILE")?,
        ) {
            (Some(_), Some(_)) => {
                return Err(
                    "`BERTH_FLUX_HTTPS_KEY` and `BERTH_FLUX_HTTPS_KEY_FILE` are both set; set one"
                        .to_string(),
                );
            }
            (Some(key), None) => Some(key),
            (None, Some(bytes)) => Some(
                String::from_utf8(bytes)
                    .map_err(|_| "`BERTH_FLUX_HTTPS_KEY_FILE` is not UTF-8 text".to_string())?
                    .trim_end_matches(['\n', '\r'])
                    .to_string(),
            ),
            (None, None) => None,
        };
        let ssh_key = read("BERTH_FLUX_SSH_KEY_FILE")?;
        let known_hosts = read("BERTH_FLUX_KNOWN_HOSTS_FILE")?;
        match (user, key, ssh_key, known_hosts) {
            (None, None, None, None) => Ok(SourceAuth::None),
            (Some(user), Some(key), None, None) => Ok(SourceAuth::Https { user, key }),
            (None, None, Some(private_key), Some(known_hosts)) => Ok(SourceAuth::Ssh {
                private_key,
                known_hosts,
            }),
            (Some(_), None, None, None) => Err(
                "`BERTH_FLUX_HTTPS_USER` is set without a key (`BERTH_FLUX_HTTPS_KEY` or \
                 `BERTH_FLUX_HTTPS_KEY_FILE`)"
                    .to_string(),
            ),
            (None, Some(_), None, None) => {
                Err("an HTTPS key is set without `BERTH_FLUX_HTTPS_USER`".to_string())
            }
            (None, None, Some(_), None) => Err(
                "`BERTH_FLUX_SSH_KEY_FILE` needs `BERTH_FLUX_KNOWN_HOSTS_FILE` (Flux checks the \
                 server's key)"
                    .to_string(),
            ),
            (None, None, None, Some(_)) => Err(
                "`BERTH_FLUX_KNOWN_HOSTS_FILE` is set without `BERTH_FLUX_SSH_KEY_FILE`"
                    .to_string(),
            ),
            _ => Err(
                "both HTTPS (`BERTH_FLUX_HTTPS_*`) and SSH (`BERTH_FLUX_SSH_KEY_FILE`) source \
                 credentials are set; set one kind"
                    .to_string(),
            ),
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            SourceAuth::None => "none",
            SourceAuth::Https { .. } => "https",
            SourceAuth::Ssh { .. } => "ssh",
        }
    }

    /// Whether these credentials fit the repository URL: SSH ones an `ssh://` or `user@host:`
    /// URL, HTTPS ones any other.
    pub fn check_url(&self, url: &str) -> Result<(), String> {
        let ssh = url.starts_with("ssh://")
            || (!url.contains("://") && url.split_once(':').is_some_and(|(h, _)| h.contains('@')));
        match self {
            SourceAuth::Ssh { .. } if !ssh => Err(format!(
                "SSH source credentials are set but the repository `{url}` is not an SSH URL"
            )),
            SourceAuth::Https { .. } if ssh => Err(format!(
                "HTTPS source credentials are set but the repository `{url}` is an SSH URL"
            )),
            _ => Ok(()),
        }
    }

    /// Sets the readable fields (`httpsUser`, `sshKnownHosts`) in a configuration body.
    pub fn set_public(&self, body: &mut Value) {
        let git = &mut body["properties"]["gitRepository"];
        match self {
            SourceAuth::None => {}
            SourceAuth::Https { user, .. } => git["httpsUser"] = json!(user),
            SourceAuth::Ssh { known_hosts, .. } => git["sshKnownHosts"] = json!(b64(known_hosts)),
        }
    }

    /// Adds the write-only `configurationProtectedSettings` to the body of a write.
    pub fn set_protected(&self, body: &mut Value) {
        let settings = match self {
            SourceAuth::None => return,
            SourceAuth::Https { key, .. } => json!({ "httpsKey": b64(key.as_bytes()) }),
            SourceAuth::Ssh { private_key, .. } => json!({ "sshPrivateKey": b64(private_key) }),
        };
        body["properties"]["configurationProtectedSettings"] = settings;
    }

    /// The fingerprint of what would be sent to `cluster` for `url` (none without credentials).
    pub fn fingerprint(&self, cluster: &str, url: &str) -> Option<String> {
        use sha2::Digest;
        let mut h = sha2::Sha256::new();
        h.update(b"berth flux source credentials v1\0");
        h.update(cluster.to_ascii_lowercase().as_bytes());
        h.update(b"\0");
        h.update(url.as_bytes());
        h.update(b"\0");
        match self {
            SourceAuth::None => return None,
            SourceAuth::Https { user, key } => {
                h.update(b"https\0");
                h.update(user.as_bytes());
                h.update(b"\0");
                h.update(key.as_bytes());
            }
            SourceAuth::Ssh {
                private_key,
                known_hosts,
            } => {
                h.update(b"ssh\0");
                h.update(private_key);
                h.update(b"\0");
                h.update(known_hosts);
            }
        }
        Some(format!(
            "sha256:{}",
            berth_compiler::plan::hex(&h.finalize())
        ))
    }
}

/// What this machine last sent, per cluster: `{ "<cluster id, lowercase>": "sha256:…" }`.
#[derive(Default)]
pub struct Sent {
    path: Option<PathBuf>,
    by_cluster: BTreeMap<String, String>,
}

impl Sent {
    /// `$XDG_STATE_HOME/berth/flux-sources.json` (else under `$HOME/.local/state`); none when
    /// neither is set (then credentials are sent at every apply that has them).
    pub fn load() -> Sent {
        let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
        let path = var("XDG_STATE_HOME")
            .map(PathBuf::from)
            .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".local/state")))
            .map(|state| state.join("berth/flux-sources.json"));
        let by_cluster = path
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or_default();
        Sent { path, by_cluster }
    }

    pub fn get(&self, cluster: &str) -> Option<&str> {
        self.by_cluster
            .get(&cluster.to_ascii_lowercase())
            .map(String::as_str)
    }

    /// Records what was sent to `cluster` (kept on disk at once; a failure to write only means
    /// the next apply sends again).
    pub fn set(&mut self, cluster: &str, fingerprint: Option<String>) {
        let key = cluster.to_ascii_lowercase();
        match fingerprint {
            Some(f) => self.by_cluster.insert(key, f),
            None => self.by_cluster.remove(&key),
        };
        let Some(path) = &self.path else { return };
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        if let Ok(text) = serde_json::to_string_pretty(&self.by_cluster) {
            let _ = std::fs::write(path, text);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn auth(vars: &[(&str, &str)]) -> Result<SourceAuth, String> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        SourceAuth::from_env(&|name: &str| map.get(name).cloned())
    }

    #[test]
    fn https_credentials_go_in_the_spec_places_and_never_in_debug() {
        let a = auth(&[
            ("BERTH_FLUX_HTTPS_USER", "bot"),
            ("BERTH_FLUX_HTTPS_KEY", "tok3n"),
        ])
        .expect("https");
        assert_eq!(format!("{a:?}"), "https");
        let mut body = json!({"properties": {"gitRepository": {"url": "https://g/x.git"}}});
        a.set_public(&mut body);
        assert_eq!(body["properties"]["gitRepository"]["httpsUser"], "bot");
        assert!(!body.to_string().contains("tok3n"));
        a.set_protected(&mut body);
        assert_eq!(
            body["properties"]["configurationProtectedSettings"]["httpsKey"],
            b64(b"tok3n")
        );
        assert!(a.check_url("git@github.com:o/r.git").is_err());
        assert!(a.check_url("https://github.com/o/r.git").is_ok());
        let f = a.fingerprint("/S/C", "https://g/x.git").expect("some");
        assert!(!f.contains("tok3n"));
        assert_ne!(Some(f), a.fingerprint("/S/D", "https://g/x.git"));
    }

    #[test]
    fn half_set_credentials_are_refused_with_what_is_missing() {
        assert!(matches!(auth(&[]), Ok(SourceAuth::None)));
        let err = auth(&[("BERTH_FLUX_HTTPS_USER", "bot")]).unwrap_err();
        assert!(err.contains("without a key"), "{err}");
        let err = auth(&[("BERTH_FLUX_SSH_KEY_FILE", "/nonexistent/key")]).unwrap_err();
        assert!(
            err.contains("cannot read `BERTH_FLUX_SSH_KEY_FILE`"),
            "{err}"
        );
    }
}
