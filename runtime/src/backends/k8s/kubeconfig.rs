//! The user's kubeconfig (`KUBECONFIG`, a list of files merged, or `~/.kube/config`): which
//! contexts exist, the client configuration of one, and the secrets in it so that no message
//! berth prints can ever show one.

use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::Value;
use std::fmt;
use std::path::PathBuf;

/// Why a context cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KubeconfigProblem {
    /// No kubeconfig could be read. The parser's own message is not shown: it may quote the
    /// file, credentials included.
    Unreadable,
    /// The context is not in the kubeconfig.
    MissingContext {
        context: String,
        available: Vec<String>,
    },
    /// The context's cluster or user entry is unusable.
    Invalid { context: String },
}

impl fmt::Display for KubeconfigProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KubeconfigProblem::Unreadable => {
                write!(
                    f,
                    "no kubeconfig could be read (`KUBECONFIG` or `~/.kube/config`)"
                )
            }
            KubeconfigProblem::MissingContext { context, available } => {
                write!(f, "context `{context}` is not in the kubeconfig")?;
                if !available.is_empty() {
                    let list: Vec<String> = available.iter().map(|c| format!("`{c}`")).collect();
                    write!(f, " (it has {})", list.join(", "))?;
                }
                Ok(())
            }
            KubeconfigProblem::Invalid { context } => {
                write!(f, "context `{context}` has no usable cluster or user entry")
            }
        }
    }
}

/// The loaded kubeconfig and the secret values it holds.
pub struct Kubeconfigs {
    config: Option<Kubeconfig>,
    secrets: Vec<String>,
    /// Credentials only known once a request carries them (exec plugins' tokens, a
    /// `tokenFile` rotated since it was read, basic auth's header): learned by the client.
    learned: Learned,
}

/// Credentials the Kubernetes client sent, as it sent them ([`Learned::remember`]).
#[derive(Clone, Default)]
pub struct Learned(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl Learned {
    /// Remembers the credential of an `Authorization` header value (`Bearer T`: `T`;
    /// `Basic B`: `B` and the password it encodes).
    pub fn remember(&self, authorization: &str) {
        let credential = authorization
            .split_once(' ')
            .map_or(authorization, |(_, c)| c)
            .trim();
        let mut found = vec![credential.to_string()];
        if authorization.starts_with("Basic ")
            && let Some(decoded) = base64_decode(credential)
            && let Some((_, password)) = decoded.split_once(':')
        {
            found.push(password.to_string());
        }
        if let Ok(mut learned) = self.0.lock() {
            for secret in found {
                if secret.len() >= 4 && !learned.contains(&secret) {
                    learned.push(secret);
                }
            }
        }
    }

    fn all(&self) -> Vec<String> {
        self.0.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

/// Standard base64 (with padding) to text; None when it is not that.
fn base64_decode(text: &str) -> Option<String> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let bytes = text.trim_end_matches('=').as_bytes();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let mut acc = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            acc |= value(c)? << (18 - 6 * i);
        }
        let n = chunk.len().saturating_sub(1);
        out.extend_from_slice(&acc.to_be_bytes()[1..1 + n]);
    }
    String::from_utf8(out).ok()
}

impl Kubeconfigs {
    /// Reads the user's kubeconfig. A missing or broken one is reported per context later.
    pub fn load() -> Kubeconfigs {
        Kubeconfigs {
            config: Kubeconfig::read().ok(),
            secrets: secrets_in(&paths()),
            learned: Learned::default(),
        }
    }

    /// Reads the kubeconfig files `paths` (merged in order), ignoring `KUBECONFIG`.
    pub fn from_paths(paths: &[PathBuf]) -> Kubeconfigs {
        let config = paths
            .iter()
            .map(Kubeconfig::read_from)
            .try_fold(Kubeconfig::default(), |merged, next| merged.merge(next?));
        Kubeconfigs {
            config: config.ok(),
            secrets: secrets_in(paths),
            learned: Learned::default(),
        }
    }

    /// The user entry `context` names (who acts there, for the audit trail).
    pub fn user_of(&self, context: &str) -> Option<String> {
        self.config
            .as_ref()?
            .contexts
            .iter()
            .find(|c| c.name == context)?
            .context
            .as_ref()?
            .user
            .clone()
    }

    /// Context names, in file order.
    pub fn contexts(&self) -> Vec<String> {
        self.config
            .as_ref()
            .map(|c| c.contexts.iter().map(|c| c.name.clone()).collect())
            .unwrap_or_default()
    }

    /// The client configuration of `context`.
    pub async fn config(&self, context: &str) -> Result<kube::Config, KubeconfigProblem> {
        let Some(config) = &self.config else {
            return Err(KubeconfigProblem::Unreadable);
        };
        if !config.contexts.iter().any(|c| c.name == context) {
            return Err(KubeconfigProblem::MissingContext {
                context: context.to_string(),
                available: self.contexts(),
            });
        }
        let options = KubeConfigOptions {
            context: Some(context.to_string()),
            ..KubeConfigOptions::default()
        };
        kube::Config::from_custom_kubeconfig(config.clone(), &options)
            .await
            .map_err(|_| KubeconfigProblem::Invalid {
                context: context.to_string(),
            })
    }

    /// `text` with every secret of the kubeconfig replaced by `[redacted]`: applied to every
    /// message that carries text from a server or a library.
    pub fn redact(&self, text: &str) -> String {
        let mut secrets = self.learned.all();
        secrets.extend(self.secrets.iter().cloned());
        // Longest first: a secret that contains another is redacted whole.
        secrets.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
        let mut out = text.to_string();
        for secret in &secrets {
            out = out.replace(secret.as_str(), "[redacted]");
        }
        out
    }

    /// Where the client records the credentials it sends ([`super::client::Cluster::connect`]).
    pub fn learned(&self) -> Learned {
        self.learned.clone()
    }
}

/// The kubeconfig files in use: `KUBECONFIG`'s list, else `~/.kube/config`.
fn paths() -> Vec<PathBuf> {
    match std::env::var_os("KUBECONFIG") {
        Some(value) if !value.is_empty() => std::env::split_paths(&value)
            .filter(|p| !p.as_os_str().is_empty())
            .collect(),
        _ => std::env::var_os("HOME")
            .map(|home| vec![PathBuf::from(home).join(".kube").join("config")])
            .unwrap_or_default(),
    }
}

/// Secret values of the users of these files: tokens, token files' contents, passwords,
/// client keys (at least 4 characters, so that redaction never rewrites ordinary words).
fn secrets_in(paths: &[PathBuf]) -> Vec<String> {
    let mut out = Vec::new();
    for path in paths {
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        let base = path.parent().unwrap_or(std::path::Path::new("."));
        let Ok(doc) = serde_saphyr::from_str::<Value>(&text) else {
            continue;
        };
        let users = doc.get("users").and_then(Value::as_array);
        for user in users.into_iter().flatten() {
            let Some(fields) = user.get("user").and_then(Value::as_object) else {
                continue;
            };
            for key in [
                "token",
                "password",
                "client-key-data",
                "client-certificate-data",
            ] {
                if let Some(secret) = fields.get(key).and_then(Value::as_str)
                    && secret.len() >= 4
                {
                    out.push(secret.to_string());
                }
            }
            // A token file's content (relative paths are relative to the kubeconfig).
            if let Some(file) = fields.get("tokenFile").and_then(Value::as_str)
                && let Ok(token) = std::fs::read_to_string(base.join(file))
                && token.trim().len() >= 4
            {
                out.push(token.trim().to_string());
            }
        }
    }
    // Longest first: a secret that contains another is redacted whole.
    out.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learned_credentials_are_redacted_with_basic_auth_decoded() {
        let kubeconfigs = Kubeconfigs::from_paths(&[]);
        kubeconfigs.learned().remember("Bearer exec-token-123");
        // `ops:hunter2-pass`
        kubeconfigs
            .learned()
            .remember("Basic b3BzOmh1bnRlcjItcGFzcw==");
        assert_eq!(
            kubeconfigs.redact("a exec-token-123 b b3BzOmh1bnRlcjItcGFzcw== c hunter2-pass"),
            "a [redacted] b [redacted] c [redacted]"
        );
        assert_eq!(base64_decode("YWJj").as_deref(), Some("abc"));
        assert_eq!(base64_decode("YWI=").as_deref(), Some("ab"));
        assert_eq!(base64_decode("*"), None);
    }
}
