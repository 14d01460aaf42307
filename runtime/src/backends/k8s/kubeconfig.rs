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
}

impl Kubeconfigs {
    /// Reads the user's kubeconfig. A missing or broken one is reported per context later.
    pub fn load() -> Kubeconfigs {
        Kubeconfigs {
            config: Kubeconfig::read().ok(),
            secrets: secrets_in(&paths()),
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
        }
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
        let mut out = text.to_string();
        for secret in &self.secrets {
            out = out.replace(secret.as_str(), "[redacted]");
        }
        out
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

/// Secret values of the users of these files: tokens, passwords, client keys (at least 4
/// characters, so that redaction never rewrites ordinary words).
fn secrets_in(paths: &[PathBuf]) -> Vec<String> {
    let mut out = Vec::new();
    for path in paths {
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
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
        }
    }
    // Longest first: a secret that contains another is redacted whole.
    out.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
    out.dedup();
    out
}
