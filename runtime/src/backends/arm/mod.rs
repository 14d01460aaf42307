//! Azure Resource Manager for Arc targets: after [`super::arc`] commits a target's objects to
//! its GitOps repository, the cluster's Flux extension must watch that repository. For each
//! cluster of the plan's Arc targets, `berth apply` ensures the `microsoft.flux` extension
//! and a Flux configuration named `berth` ([`flux`]), through ARM's REST API ([`client`]),
//! authenticated by the Azure SDK's identity crate ([`credential`]), whose HTTP goes through
//! berth's own reqwest ([`transport`]). `berth status` reads each configuration's state.
//!
//! Settings come from the environment, as for the Azure tools: the credential variables
//! ([`credential`]), `BERTH_ARM_ENDPOINT` (default `https://management.azure.com`; a
//! sovereign cloud's, or the test double's) and `BERTH_ARM_CA_FILE` (PEM roots to trust
//! besides the built-in ones, for ARM and the authority alike).

pub mod client;
pub mod credential;
pub mod flux;
pub mod source;
pub mod transport;

use crate::backends::k8s::render::GitOpsTarget;
use crate::backends::k8s::workloads::WorkloadStatus;
use client::{ArmClient, CredentialFactory, RetryPolicy};
use flux::{Ensured, FluxState};
use std::sync::Arc;
use std::time::Duration;

pub const DEFAULT_ENDPOINT: &str = "https://management.azure.com";

/// What `berth apply` did for one cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteReport {
    /// The cluster's resource id, as the spec writes it.
    pub cluster: String,
    pub targets: Vec<String>,
    pub outcome: Result<Ensured, String>,
}

/// What `berth status` read for one cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteStatus {
    pub cluster: String,
    pub targets: Vec<String>,
    /// `Ok(None)`: no Flux configuration `berth` on the cluster.
    pub state: Result<Option<FluxState>, String>,
    /// The kubeconfig context the replicas were read through.
    pub context: Option<String>,
    /// Desired vs ready replicas read from the cluster itself (ARM does not carry them), or
    /// why they were not; `None`: not looked for.
    pub replicas: Option<Result<Vec<WorkloadStatus>, String>>,
}

/// The result of one pass over every cluster, with the ARM requests it made.
pub struct Pass<T> {
    pub sites: Vec<T>,
    pub calls: usize,
}

/// A client from the process environment, or why none can be made.
fn client_from_env() -> Result<ArmClient, String> {
    let env = |name: &str| std::env::var(name).ok();
    let endpoint = env("BERTH_ARM_ENDPOINT")
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string());
    let mut http = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(60));
    if let Some(path) = env("BERTH_ARM_CA_FILE").filter(|v| !v.is_empty()) {
        let pem = std::fs::read(&path)
            .map_err(|e| format!("cannot read `BERTH_ARM_CA_FILE` `{path}`: {e}"))?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem)
            .map_err(|e| format!("`BERTH_ARM_CA_FILE` `{path}` holds no PEM certificate: {e}"))?;
        for cert in certs {
            http = http.add_root_certificate(cert);
        }
    }
    let http = http
        .build()
        .map_err(|e| format!("cannot make an HTTP client: {e}"))?;
    let kind = credential::choose(&env)?;
    let factory_http = http.clone();
    let factory: CredentialFactory = Arc::new(move || {
        credential::build(kind, &|name: &str| std::env::var(name).ok(), &factory_http)
    });
    Ok(ArmClient::new(
        http,
        &endpoint,
        factory,
        RetryPolicy::default(),
    ))
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))
}

/// One cluster's result: its resource id as written, its targets, and what `each` gave (or
/// why its site or the client could not be made).
struct Visited<T> {
    cluster: String,
    targets: Vec<String>,
    result: Result<T, String>,
}

/// Runs `each` on every cluster's Flux site, in cluster order, with one client.
fn per_site<T>(
    gitops: &[GitOpsTarget],
    each: impl AsyncFn(&ArmClient, &flux::FluxSite) -> Result<T, String>,
) -> Pass<Visited<T>> {
    let sites = flux::sites(gitops);
    let visited = |targets: Vec<String>, result| Visited {
        cluster: cluster_text(&targets, gitops),
        targets,
        result,
    };
    if sites.is_empty() {
        return Pass {
            sites: Vec::new(),
            calls: 0,
        };
    }
    let (client, rt) = match client_from_env().and_then(|c| Ok((c, runtime()?))) {
        Ok(ready) => ready,
        Err(e) => {
            return Pass {
                sites: sites
                    .into_iter()
                    .map(|(targets, site)| {
                        visited(targets, Err(site.err().unwrap_or_else(|| e.clone())))
                    })
                    .collect(),
                calls: 0,
            };
        }
    };
    let sites = rt.block_on(async {
        let mut out = Vec::new();
        for (targets, site) in sites {
            let result = match site {
                Ok(site) => each(&client, &site).await,
                Err(e) => Err(e),
            };
            out.push(visited(targets, result));
        }
        out
    });
    Pass {
        sites,
        calls: client.calls(),
    }
}

/// Ensures every cluster's Flux extension and configuration (in a dry run, reads them and
/// says what would change).
pub fn apply(gitops: &[GitOpsTarget], dry_run: bool) -> Pass<SiteReport> {
    let env = |name: &str| std::env::var(name).ok();
    let sources = source::SourceAuth::from_env(&env).map(|auth| flux::Sources {
        auth,
        sent: std::sync::Mutex::new(source::Sent::load()),
    });
    let pass = per_site(gitops, async |client, site| match &sources {
        Ok(sources) => flux::ensure(client, site, sources, dry_run).await,
        Err(e) => Err(format!("source credentials: {e}")),
    });
    Pass {
        calls: pass.calls,
        sites: pass
            .sites
            .into_iter()
            .map(|v| SiteReport {
                cluster: v.cluster,
                targets: v.targets,
                outcome: v.result,
            })
            .collect(),
    }
}

/// A cluster the record of a GitOps repository lists ([`crate::backends::arc::RECORD_PATH`])
/// and no Arc target of the plan names any more.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dropped {
    /// The cluster's resource id, as the record holds it.
    pub cluster: String,
    /// The targets it had.
    pub targets: Vec<String>,
    /// The repository (as the spec writes it) and branch whose record lists it.
    pub repo: String,
    pub branch: String,
}

/// What `berth apply` did on one dropped cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemovalReport {
    pub cluster: String,
    pub targets: Vec<String>,
    pub outcome: Result<flux::Removal, String>,
}

/// Deletes the `berth` Flux configuration of every dropped cluster (in a dry run, reads it and
/// says whether it would be deleted).
pub fn remove(dropped: &[Dropped], dry_run: bool) -> Pass<RemovalReport> {
    if dropped.is_empty() {
        return Pass {
            sites: Vec::new(),
            calls: 0,
        };
    }
    let report = |d: &Dropped, outcome| RemovalReport {
        cluster: d.cluster.clone(),
        targets: d.targets.clone(),
        outcome,
    };
    let (client, rt) = match client_from_env().and_then(|c| Ok((c, runtime()?))) {
        Ok(ready) => ready,
        Err(e) => {
            return Pass {
                sites: dropped.iter().map(|d| report(d, Err(e.clone()))).collect(),
                calls: 0,
            };
        }
    };
    let sites = rt.block_on(async {
        let mut out = Vec::new();
        for d in dropped {
            let outcome = match flux::ClusterId::parse(&d.cluster) {
                Err(e) => Err(e),
                Ok(cluster) => {
                    let url = crate::backends::arc::redact_url(&d.repo, &d.repo);
                    flux::remove(&client, &cluster, &url, &d.branch, dry_run).await
                }
            };
            out.push(report(d, outcome));
        }
        out
    });
    Pass {
        sites,
        calls: client.calls(),
    }
}

/// Reads every cluster's Flux configuration state.
pub fn status(gitops: &[GitOpsTarget]) -> Pass<SiteStatus> {
    let pass = per_site(gitops, async |client, site| {
        flux::state(client, site).await.map_err(|e| e.to_string())
    });
    Pass {
        calls: pass.calls,
        sites: pass
            .sites
            .into_iter()
            .map(|v| SiteStatus {
                cluster: v.cluster,
                targets: v.targets,
                state: v.result,
                context: None,
                replicas: None,
            })
            .collect(),
    }
}

fn cluster_text(targets: &[String], gitops: &[GitOpsTarget]) -> String {
    gitops
        .iter()
        .find(|g| targets.first() == Some(&g.target))
        .map(|g| g.cluster.clone())
        .unwrap_or_default()
}

/// The Arc part of `berth status`: each cluster's Flux configuration as ARM reports it.
pub struct StatusReport(pub Vec<SiteStatus>);

impl StatusReport {
    /// Reads every Arc cluster of the rendering (none: no request).
    pub fn collect(gitops: &[GitOpsTarget]) -> StatusReport {
        StatusReport(status(gitops).sites)
    }

    /// A cluster not read, without the configuration, or not compliant.
    pub fn flagged(&self) -> bool {
        self.0.iter().any(|s| match &s.state {
            Ok(Some(state)) => state.compliance == "Non-Compliant" || state.error.is_some(),
            _ => true,
        })
    }

    pub fn json(&self) -> serde_json::Value {
        let sites: Vec<serde_json::Value> = self
            .0
            .iter()
            .map(|s| {
                let mut doc = serde_json::json!({ "cluster": s.cluster, "targets": s.targets });
                match &s.replicas {
                    None => {}
                    Some(Ok(workloads)) => {
                        doc["context"] = s.context.clone().into();
                        doc["workloads"] = serde_json::json!(workloads);
                    }
                    Some(Err(e)) => {
                        doc["context"] = s.context.clone().into();
                        doc["replicas_error"] = e.clone().into();
                    }
                }
                match &s.state {
                    Err(e) => doc["error"] = e.clone().into(),
                    Ok(None) => doc["configuration"] = serde_json::Value::Null,
                    Ok(Some(state)) => {
                        doc["configuration"] = serde_json::json!({
                            "name": flux::CONFIG_NAME,
                            "compliance_state": state.compliance,
                            "provisioning_state": state.provisioning,
                            "source_synced_commit": state.synced_commit,
                            "source_updated_at": state.source_updated_at,
                            "error": state.error,
                            "objects": state.objects.iter().map(|o| serde_json::json!({
                                "kind": o.kind, "namespace": o.namespace, "name": o.name,
                                "compliance_state": o.compliance, "problem": o.problem,
                            })).collect::<Vec<_>>(),
                        });
                    }
                }
                doc
            })
            .collect();
        serde_json::Value::Array(sites)
    }

    /// Human text on stdout, one block per cluster.
    pub fn print(&self, ui: &mut crate::report::Ui<'_>) -> std::io::Result<()> {
        for s in &self.0 {
            write!(
                ui.out,
                "arc cluster `{}` ({}): ",
                cluster_name(&s.cluster),
                quoted(&s.targets)
            )?;
            match &s.state {
                Err(e) => writeln!(ui.out, "not read: {e}")?,
                Ok(None) => writeln!(
                    ui.out,
                    "no Flux configuration `{}` (run `berth apply`)",
                    flux::CONFIG_NAME
                )?,
                Ok(Some(state)) => {
                    let source = match (&state.synced_commit, &state.source_updated_at) {
                        (Some(commit), Some(at)) => format!(", source at {commit} ({at})"),
                        (Some(commit), None) => format!(", source at {commit}"),
                        _ => String::new(),
                    };
                    writeln!(
                        ui.out,
                        "Flux configuration `{}` {}, provisioning {}{source}",
                        flux::CONFIG_NAME,
                        state.compliance,
                        state.provisioning
                    )?;
                    if let Some(error) = &state.error {
                        writeln!(ui.out, "  error: {error}")?;
                    }
                    for o in &state.objects {
                        write!(
                            ui.out,
                            "  {} {}/{}: {}",
                            o.kind, o.namespace, o.name, o.compliance
                        )?;
                        match &o.problem {
                            Some(problem) => writeln!(ui.out, ": {problem}")?,
                            None => writeln!(ui.out)?,
                        }
                    }
                }
            }
            match &s.replicas {
                None => {}
                Some(Err(e)) => writeln!(ui.out, "  replicas not read: {e}")?,
                Some(Ok(workloads)) if workloads.is_empty() => writeln!(
                    ui.out,
                    "  no workload of {} in context `{}`",
                    quoted(&s.targets),
                    s.context.as_deref().unwrap_or("")
                )?,
                Some(Ok(workloads)) => {
                    for w in workloads {
                        writeln!(
                            ui.out,
                            "  {:<12} {:<20} {}/{} ready  {}",
                            w.target, w.workload, w.ready, w.desired, w.object
                        )?;
                    }
                }
            }
        }
        Ok(())
    }
}

pub use crate::backends::k8s::render::cluster_name;

/// `` `a`, `b` ``.
pub fn quoted(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}
