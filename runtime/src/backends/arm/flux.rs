//! The Flux side of an Arc target, through Azure Resource Manager: the `microsoft.flux`
//! cluster extension and one `fluxConfigurations/berth` per cluster, whose Git source is the
//! GitOps repository berth commits to and whose kustomizations are berth's folders in it
//! (one per Arc target on that cluster). Shapes from the published REST specification of
//! `Microsoft.KubernetesConfiguration` (fluxConfigurations 2025-04-01, extensions
//! 2025-03-01); see docs/runtime-arc.md.
//!
//! A write happens only when the live resource differs from what berth wants, field by field
//! over the fields berth sets (a re-apply of the same plan makes no write).

use super::client::{ArmClient, ArmError, Deleted, Written};
use super::source::{Sent, SourceAuth};
use crate::backends::arc::redact_url;
use crate::backends::k8s::render::GitOpsTarget;
use serde_json::{Value, json};
use std::collections::BTreeMap;

pub const FLUX_API_VERSION: &str = "2025-04-01";
pub const EXTENSION_API_VERSION: &str = "2025-03-01";
/// The Flux configuration berth owns on each cluster.
pub const CONFIG_NAME: &str = "berth";
/// Where Flux's `GitRepository` and `Kustomization` objects for it live.
pub const CONFIG_NAMESPACE: &str = "flux-system";
/// The name berth gives the Flux extension when it installs one.
pub const EXTENSION_NAME: &str = "flux";
pub const EXTENSION_TYPE: &str = "microsoft.flux";
/// Seconds between Flux's fetches of the repository and between reconciliations.
pub const SYNC_INTERVAL_SECONDS: u64 = 120;
/// Seconds Flux gives one fetch or one reconciliation.
pub const TIMEOUT_SECONDS: u64 = 600;
/// A cluster's Azure resource id, taken apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterId {
    pub subscription: String,
    pub resource_group: String,
    /// `Microsoft.Kubernetes` (Arc), `Microsoft.ContainerService` (AKS), …
    pub provider: String,
    /// `connectedClusters`, `managedClusters`, …
    pub kind: String,
    pub name: String,
}

impl ClusterId {
    /// Parses `/subscriptions/S/resourceGroups/G/providers/P/K/N`.
    pub fn parse(id: &str) -> Result<ClusterId, String> {
        let parts: Vec<&str> = id.trim_matches('/').split('/').collect();
        let shape = "expected `/subscriptions/<id>/resourceGroups/<group>/providers/\
                     Microsoft.Kubernetes/connectedClusters/<name>`";
        match parts.as_slice() {
            [s, sub, g, group, p, provider, kind, name]
                if s.eq_ignore_ascii_case("subscriptions")
                    && g.eq_ignore_ascii_case("resourceGroups")
                    && p.eq_ignore_ascii_case("providers")
                    && [sub, group, provider, kind, name]
                        .iter()
                        .all(|x| !x.is_empty())
                    && kind.chars().all(|c| c.is_ascii_alphabetic()) =>
            {
                Ok(ClusterId {
                    subscription: sub.to_string(),
                    resource_group: group.to_string(),
                    provider: provider.to_string(),
                    kind: kind.to_string(),
                    name: name.to_string(),
                })
            }
            _ => Err(format!("`{id}` is not a cluster resource id: {shape}")),
        }
    }

    pub fn path(&self) -> String {
        format!(
            "/subscriptions/{}/resourceGroups/{}/providers/{}/{}/{}",
            self.subscription, self.resource_group, self.provider, self.kind, self.name
        )
    }

    fn extensions(&self) -> String {
        format!(
            "{}/providers/Microsoft.KubernetesConfiguration/extensions",
            self.path()
        )
    }

    pub fn configuration(&self) -> String {
        format!(
            "{}/providers/Microsoft.KubernetesConfiguration/fluxConfigurations/{CONFIG_NAME}",
            self.path()
        )
    }
}

/// One cluster's Flux configuration as berth wants it.
#[derive(Clone, Debug, PartialEq)]
pub struct FluxSite {
    pub cluster: ClusterId,
    /// The repository URL as Flux will fetch it (user-info removed: credentials for a private
    /// repository go in the configuration's source credentials, [`super::source`]).
    pub repo_url: String,
    pub branch: String,
    /// Kustomization name → folder in the repository.
    pub kustomizations: BTreeMap<String, String>,
    /// The berth targets on this cluster.
    pub targets: Vec<String>,
}

/// The Flux sites of a rendering: one per cluster, or why a cluster's targets cannot share
/// one configuration.
pub fn sites(gitops: &[GitOpsTarget]) -> Vec<(Vec<String>, Result<FluxSite, String>)> {
    let mut by_cluster: BTreeMap<String, Vec<&GitOpsTarget>> = BTreeMap::new();
    for target in gitops {
        by_cluster
            .entry(target.cluster.clone())
            .or_default()
            .push(target);
    }
    by_cluster
        .into_iter()
        .map(|(cluster, targets)| {
            let names: Vec<String> = targets.iter().map(|t| t.target.clone()).collect();
            (names, site(&cluster, &targets))
        })
        .collect()
}

fn site(cluster: &str, targets: &[&GitOpsTarget]) -> Result<FluxSite, String> {
    let cluster = ClusterId::parse(cluster)?;
    let first = targets[0];
    if let Some(other) = targets
        .iter()
        .find(|t| t.repo != first.repo || t.branch != first.branch)
    {
        return Err(format!(
            "`{}` and `{}` are on the same cluster but name different repositories or \
             branches; one Flux configuration has one source",
            first.target, other.target
        ));
    }
    let kustomizations = targets
        .iter()
        .map(|t| {
            (
                kustomization_name(&t.target),
                format!("./{}", t.path.trim_matches('/')),
            )
        })
        .collect();
    Ok(FluxSite {
        repo_url: without_userinfo(&first.repo),
        branch: first.branch.clone(),
        kustomizations,
        targets: targets.iter().map(|t| t.target.clone()).collect(),
        cluster,
    })
}

/// A kustomization name Flux accepts as part of an object name (`berth-<name>`): lowercase,
/// `_` as `-`.
fn kustomization_name(target: &str) -> String {
    target
        .chars()
        .map(|c| match c {
            'A'..='Z' => c.to_ascii_lowercase(),
            'a'..='z' | '0'..='9' | '-' => c,
            _ => '-',
        })
        .collect()
}

fn without_userinfo(url: &str) -> String {
    redact_url(url, url)
}

/// The `microsoft.flux` extension berth installs when the cluster has none.
pub fn desired_extension() -> Value {
    json!({
        "properties": {
            "extensionType": EXTENSION_TYPE,
            "autoUpgradeMinorVersion": true,
        }
    })
}

/// The Flux configuration of `site`.
pub fn desired_configuration(site: &FluxSite) -> Value {
    let kustomizations: serde_json::Map<String, Value> = site
        .kustomizations
        .iter()
        .map(|(name, path)| {
            (
                name.clone(),
                json!({
                    "path": path,
                    "dependsOn": [],
                    "timeoutInSeconds": TIMEOUT_SECONDS,
                    "syncIntervalInSeconds": SYNC_INTERVAL_SECONDS,
                    "prune": true,
                    "wait": true,
                }),
            )
        })
        .collect();
    json!({
        "properties": {
            "scope": "cluster",
            "namespace": CONFIG_NAMESPACE,
            "sourceKind": "GitRepository",
            "suspend": false,
            "gitRepository": {
                "url": site.repo_url,
                "repositoryRef": { "branch": site.branch },
                "syncIntervalInSeconds": SYNC_INTERVAL_SECONDS,
                "timeoutInSeconds": TIMEOUT_SECONDS,
            },
            "kustomizations": kustomizations,
        }
    })
}

/// Where the live resource differs from `desired`, over the fields `desired` sets (and, for
/// the `kustomizations` map, the entries it does not have): one line per field,
/// `properties.gitRepository.repositoryRef.branch: "main" → "release"`.
pub fn differences(desired: &Value, live: &Value) -> Vec<String> {
    let mut out = Vec::new();
    diff_into("", desired, live, &mut out);
    out
}

fn diff_into(path: &str, desired: &Value, live: &Value, out: &mut Vec<String>) {
    match desired {
        Value::Object(fields) => {
            let empty = serde_json::Map::new();
            let live_fields = live.as_object().unwrap_or(&empty);
            for (key, value) in fields {
                let child = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                diff_into(
                    &child,
                    value,
                    live_fields.get(key).unwrap_or(&Value::Null),
                    out,
                );
            }
            if path.ends_with("kustomizations") {
                for key in live_fields.keys().filter(|k| !fields.contains_key(*k)) {
                    out.push(format!("{path}.{key}: removed"));
                }
            }
        }
        _ if same_value(desired, live) => {}
        _ => out.push(format!("{path}: {} → {desired}", shown(live))),
    }
}

/// Equal, with numbers compared as numbers (`600` and `600.0`) and a missing list as empty.
fn same_value(desired: &Value, live: &Value) -> bool {
    match (desired, live) {
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (Value::Array(a), Value::Null) => a.is_empty(),
        _ => desired == live,
    }
}

fn shown(live: &Value) -> String {
    match live {
        Value::Null => "(none)".to_string(),
        other => other.to_string(),
    }
}

/// What one step did (or, in a dry run, would do).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    Unchanged,
    Created,
    Updated(Vec<String>),
    WouldCreate,
    WouldUpdate(Vec<String>),
}

impl Step {
    pub fn word(&self) -> &'static str {
        match self {
            Step::Unchanged => "unchanged",
            Step::Created => "created",
            Step::Updated(_) => "updated",
            Step::WouldCreate => "would_create",
            Step::WouldUpdate(_) => "would_update",
        }
    }

    pub fn changes(&self) -> &[String] {
        match self {
            Step::Updated(c) | Step::WouldUpdate(c) => c,
            _ => &[],
        }
    }
}

/// What `ensure` did on one cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ensured {
    pub extension: Step,
    pub configuration: Step,
}

/// The source credentials to put in the configurations, and what this machine last sent.
pub struct Sources {
    pub auth: SourceAuth,
    pub sent: std::sync::Mutex<Sent>,
}

/// Makes the cluster's Flux extension and configuration what berth wants.
pub async fn ensure(
    client: &ArmClient,
    site: &FluxSite,
    sources: &Sources,
    dry_run: bool,
) -> Result<Ensured, String> {
    sources.auth.check_url(&site.repo_url)?;
    let extension = ensure_extension(client, &site.cluster, dry_run)
        .await
        .map_err(|e| format!("Flux extension: {e}"))?;
    let configuration = ensure_configuration(client, site, sources, dry_run)
        .await
        .map_err(|e| format!("Flux configuration `{CONFIG_NAME}`: {e}"))?;
    Ok(Ensured {
        extension,
        configuration,
    })
}

async fn ensure_extension(
    client: &ArmClient,
    cluster: &ClusterId,
    dry_run: bool,
) -> Result<Step, String> {
    let installed = client
        .list(&cluster.extensions(), EXTENSION_API_VERSION)
        .await
        .map_err(|e| e.to_string())?;
    if let Some(flux) = installed.iter().find(|e| {
        e["properties"]["extensionType"]
            .as_str()
            .is_some_and(|t| t.eq_ignore_ascii_case(EXTENSION_TYPE))
    }) {
        return match flux["properties"]["provisioningState"].as_str() {
            Some("Failed") => Err(format!(
                "`{}` is installed but failed: {}",
                flux["name"].as_str().unwrap_or(EXTENSION_NAME),
                flux["properties"]["errorInfo"]["message"]
                    .as_str()
                    .unwrap_or("no message")
            )),
            _ => Ok(Step::Unchanged),
        };
    }
    if dry_run {
        return Ok(Step::WouldCreate);
    }
    let path = format!("{}/{EXTENSION_NAME}", cluster.extensions());
    let Written::Done(resource) = client
        .put(&path, EXTENSION_API_VERSION, &desired_extension())
        .await
        .map_err(|e| e.to_string())?;
    succeeded(&resource)?;
    Ok(Step::Created)
}

async fn ensure_configuration(
    client: &ArmClient,
    site: &FluxSite,
    sources: &Sources,
    dry_run: bool,
) -> Result<Step, String> {
    let path = site.cluster.configuration();
    let mut desired = desired_configuration(site);
    sources.auth.set_public(&mut desired);
    let cluster = site.cluster.path();
    let fingerprint = sources.auth.fingerprint(&cluster, &site.repo_url);
    let stale = fingerprint.is_some()
        && sources
            .sent
            .lock()
            .map_or(true, |sent| sent.get(&cluster) != fingerprint.as_deref());
    let live = client
        .get(&path, FLUX_API_VERSION)
        .await
        .map_err(|e| e.to_string())?;
    let step = match &live {
        None if dry_run => return Ok(Step::WouldCreate),
        None => Step::Created,
        Some(live) => {
            let mut changes = differences(&desired, live);
            if stale {
                // Write-only: ARM never returns them, so what is compared is what this machine
                // last sent (none, or other credentials).
                changes.push(
                    "properties.configurationProtectedSettings: sent again (write-only; not \
                     sent from here with these credentials before)"
                        .to_string(),
                );
            }
            if changes.is_empty() {
                return Ok(Step::Unchanged);
            }
            if let Some(fixed) = changes.iter().find(|c| {
                c.starts_with("properties.scope:") || c.starts_with("properties.namespace:")
            }) {
                return Err(format!(
                    "{fixed}: this field is set when the configuration is created; delete \
                     the configuration for berth to create it again"
                ));
            }
            if dry_run {
                return Ok(Step::WouldUpdate(changes));
            }
            Step::Updated(changes)
        }
    };
    let mut body = desired;
    sources.auth.set_protected(&mut body);
    let Written::Done(resource) = client
        .put(&path, FLUX_API_VERSION, &body)
        .await
        .map_err(|e: ArmError| e.to_string())?;
    succeeded(&resource)?;
    if let Ok(mut sent) = sources.sent.lock() {
        sent.set(&cluster, fingerprint);
    }
    Ok(step)
}

fn succeeded(resource: &Value) -> Result<(), String> {
    match resource["properties"]["provisioningState"].as_str() {
        None | Some("Succeeded") => Ok(()),
        Some(state) => Err(format!(
            "provisioning ended `{state}`{}",
            resource["properties"]["errorMessage"]
                .as_str()
                .filter(|m| !m.is_empty())
                .map(|m| format!(": {m}"))
                .unwrap_or_default()
        )),
    }
}

/// What removing the configuration from a cluster no Arc target names any more did (or, in a
/// dry run, would do).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Removal {
    Deleted,
    WouldDelete,
    /// There was no `berth` configuration (any more).
    Absent,
    /// The cluster's `berth` configuration watches another repository or branch now: not the
    /// one berth made from this repository, so left alone (why).
    Kept(String),
}

impl Removal {
    pub fn word(&self) -> &'static str {
        match self {
            Removal::Deleted => "deleted",
            Removal::WouldDelete => "would_delete",
            Removal::Absent => "absent",
            Removal::Kept(_) => "kept",
        }
    }
}

/// Deletes `cluster`'s `berth` configuration when it still watches `repo_url` (without
/// user-info) on `branch`: berth's own, made from the repository whose record lists the
/// cluster. Never the extension, never another configuration.
pub async fn remove(
    client: &ArmClient,
    cluster: &ClusterId,
    repo_url: &str,
    branch: &str,
    dry_run: bool,
) -> Result<Removal, String> {
    let path = cluster.configuration();
    let Some(live) = client
        .get(&path, FLUX_API_VERSION)
        .await
        .map_err(|e| e.to_string())?
    else {
        return Ok(Removal::Absent);
    };
    let source = &live["properties"]["gitRepository"];
    let url = source["url"].as_str().unwrap_or("");
    let live_branch = source["repositoryRef"]["branch"].as_str().unwrap_or("");
    if url != repo_url || live_branch != branch {
        return Ok(Removal::Kept(format!(
            "it watches `{}` ({live_branch}), not `{repo_url}` ({branch})",
            without_userinfo(url)
        )));
    }
    if dry_run {
        return Ok(Removal::WouldDelete);
    }
    match client.delete(&path, FLUX_API_VERSION).await {
        Ok(Deleted::Done) => Ok(Removal::Deleted),
        Ok(Deleted::Absent) => Ok(Removal::Absent),
        Err(e) => Err(e.to_string()),
    }
}

/// One Flux object's state, as the configuration reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectState {
    pub kind: String,
    pub name: String,
    pub namespace: String,
    pub compliance: String,
    /// The message of a condition that is not `True` (the first), if any.
    pub problem: Option<String>,
}

/// The Flux configuration's state from ARM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FluxState {
    pub compliance: String,
    pub provisioning: String,
    pub synced_commit: Option<String>,
    pub source_updated_at: Option<String>,
    pub error: Option<String>,
    pub objects: Vec<ObjectState>,
}

/// The state of `site`'s configuration, or `None` when it does not exist.
pub async fn state(client: &ArmClient, site: &FluxSite) -> Result<Option<FluxState>, ArmError> {
    let Some(live) = client
        .get(&site.cluster.configuration(), FLUX_API_VERSION)
        .await?
    else {
        return Ok(None);
    };
    Ok(Some(state_of(&live)))
}

/// Reads a fluxConfiguration resource's read-only status fields.
pub fn state_of(live: &Value) -> FluxState {
    let p = &live["properties"];
    let text = |v: &Value| v.as_str().filter(|s| !s.is_empty()).map(str::to_string);
    let objects = p["statuses"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|o| ObjectState {
                    kind: text(&o["kind"]).unwrap_or_default(),
                    name: text(&o["name"]).unwrap_or_default(),
                    namespace: text(&o["namespace"]).unwrap_or_default(),
                    compliance: text(&o["complianceState"]).unwrap_or_else(|| "Unknown".into()),
                    problem: o["statusConditions"].as_array().and_then(|conditions| {
                        conditions
                            .iter()
                            .find(|c| c["status"].as_str() != Some("True"))
                            .and_then(|c| text(&c["message"]))
                    }),
                })
                .collect()
        })
        .unwrap_or_default();
    FluxState {
        compliance: text(&p["complianceState"]).unwrap_or_else(|| "Unknown".into()),
        provisioning: text(&p["provisioningState"]).unwrap_or_else(|| "Unknown".into()),
        synced_commit: text(&p["sourceSyncedCommitId"]),
        source_updated_at: text(&p["sourceUpdatedAt"]),
        error: text(&p["errorMessage"]),
        objects,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(name: &str, cluster: &str, repo: &str, path: &str) -> GitOpsTarget {
        GitOpsTarget {
            target: name.to_string(),
            cluster: cluster.to_string(),
            repo: repo.to_string(),
            branch: "main".to_string(),
            path: path.to_string(),
            namespace: "ml".to_string(),
            context: name.to_string(),
            manifests: Vec::new(),
        }
    }

    const EU: &str =
        "/subscriptions/0/resourceGroups/ai/providers/Microsoft.Kubernetes/connectedClusters/eu";

    #[test]
    fn cluster_ids_are_read_or_refused_with_the_shape() {
        let id = ClusterId::parse(EU).expect("parses");
        assert_eq!(id.kind, "connectedClusters");
        assert_eq!(id.path(), EU);
        let err = ClusterId::parse("eu-gpu").unwrap_err();
        assert!(err.contains("is not a cluster resource id"), "{err}");
    }

    #[test]
    fn targets_on_one_cluster_share_a_configuration() {
        let gitops = [
            target(
                "eu_train",
                EU,
                "https://bot:tok@git.example.com/g.git",
                "clusters/eu/train",
            ),
            target(
                "eu_serve",
                EU,
                "https://bot:tok@git.example.com/g.git",
                "/clusters/eu/serve/",
            ),
        ];
        let sites = sites(&gitops);
        assert_eq!(sites.len(), 1);
        let site = sites[0].1.as_ref().expect("one site");
        assert_eq!(site.repo_url, "https://git.example.com/g.git");
        let body = desired_configuration(site);
        assert_eq!(
            body["properties"]["kustomizations"]["eu-serve"]["path"],
            "./clusters/eu/serve"
        );
        assert!(!body.to_string().contains("tok"), "{body}");
    }

    #[test]
    fn a_cluster_with_two_repositories_is_refused() {
        let gitops = [
            target("a", EU, "https://git.example.com/one.git", "a"),
            target("b", EU, "https://git.example.com/two.git", "b"),
        ];
        let err = sites(&gitops)[0].1.clone().unwrap_err();
        assert!(
            err.contains("one Flux configuration has one source"),
            "{err}"
        );
    }

    #[test]
    fn differences_cover_the_fields_berth_sets_and_stale_kustomizations() {
        let site = sites(&[target(
            "eu",
            EU,
            "https://git.example.com/g.git",
            "clusters/eu",
        )])[0]
            .1
            .clone()
            .expect("site");
        let desired = desired_configuration(&site);
        let mut live = desired.clone();
        live["properties"]["complianceState"] = json!("Compliant");
        live["properties"]["gitRepository"]["syncIntervalInSeconds"] = json!(120.0);
        live["properties"]["kustomizations"]["eu"]["dependsOn"] = Value::Null;
        assert_eq!(differences(&desired, &live), Vec::<String>::new());
        live["properties"]["gitRepository"]["repositoryRef"]["branch"] = json!("old");
        live["properties"]["kustomizations"]["gone"] = json!({"path": "./gone"});
        assert_eq!(
            differences(&desired, &live),
            vec![
                "properties.gitRepository.repositoryRef.branch: \"old\" → \"main\"".to_string(),
                "properties.kustomizations.gone: removed".to_string(),
            ]
        );
    }
}
