//! `berth apply PLAN|SPEC` (and `berth diff`, an apply in dry-run mode): the plan, once past
//! the refusals ([`super::input`]), dispatched per target runtime: Kubernetes targets to
//! [`crate::backends::k8s`], Arc targets to [`crate::backends::arc`], edge and `local` targets
//! to [`crate::backends::edge::apply`] (after the clusters: local targets run in the
//! foreground).

use super::input::{PlanInputArgs, input_or_exit, placed_or_refused};
use crate::backends::arc::{self, Outcome, RepoReport};
use crate::backends::arm::{self, SiteReport, cluster_name, quoted};
use crate::backends::{edge, k8s};
use crate::report::{Exit, Ui};
use std::io;

#[derive(Debug, Clone, clap::Args)]
pub struct ApplyArgs {
    #[command(flatten)]
    pub plan: PlanInputArgs,
    /// Ask the servers to dry-run every apply and print a diff per object; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Delete berth-managed objects of earlier plans that this plan no longer has.
    #[arg(long)]
    pub prune: bool,
    /// Take ownership of fields another field manager owns (server-side apply `force`).
    #[arg(long)]
    pub force_conflicts: bool,
    /// Most requests in flight per cluster.
    #[arg(long, default_value_t = 8, value_name = "N")]
    pub concurrency: usize,
    /// Wait for rollouts: Deployments and StatefulSets ready, Jobs complete.
    #[arg(long)]
    pub wait: bool,
    /// How long `--wait` waits, in seconds.
    #[arg(long, default_value_t = 300, value_name = "SECONDS", requires = "wait")]
    pub timeout: u64,
    /// Seconds to wait for the apply lock (a Lease per namespace) another run holds.
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    pub lock_timeout: u64,
    /// Take the apply locks whoever holds them (for locks left by a run that died).
    #[arg(long)]
    pub force_unlock: bool,
    /// Apply even when a Kubernetes pool no longer has the free GPUs the plan places on it
    /// (the drift guard; pods beyond the free GPUs stay Pending).
    #[arg(long)]
    pub allow_drift: bool,
    /// With `--dry-run`: exit 0 when nothing would change, 2 when something would, 1 on any
    /// error (as terraform's `-detailed-exitcode`).
    #[arg(long, requires = "dry_run")]
    pub detailed_exitcode: bool,
    #[command(flatten)]
    pub edge: edge::apply::EdgeArgs,
}

/// `berth apply` (and `berth diff`, an apply in dry-run mode).
pub fn run(args: &ApplyArgs, ui: &mut Ui<'_>) -> io::Result<Exit> {
    let (exit, changes) = apply(args, ui)?;
    Ok(if args.detailed_exitcode {
        exit.detailed(changes)
    } else {
        exit
    })
}

/// The apply, and whether anything changed (or in a dry run, would change). Edge and local
/// targets are not looked at in a dry run, so a plan that has some counts as changing.
fn apply(args: &ApplyArgs, ui: &mut Ui<'_>) -> io::Result<(Exit, bool)> {
    let input = match input_or_exit(&args.plan, !args.dry_run, ui)? {
        Ok(input) => input,
        Err(exit) => return Ok((exit, false)),
    };
    if let Some(exit) = placed_or_refused(&input, ui)? {
        return Ok((exit, false));
    }
    let rendered = k8s::render::render(&input.ir, &input.plan);
    if !args.dry_run && !args.allow_drift && !rendered.clusters.is_empty() {
        let kubeconfigs = k8s::kubeconfig::Kubeconfigs::load();
        let checked = k8s::drift::check(&rendered, &input.ir, &input.plan, &kubeconfigs);
        for (context, why) in &checked.unread {
            ui.status(&format_args!(
                "note: the drift guard could not read context `{context}`: {why}"
            ))?;
        }
        let drifted = checked.drifted;
        if !drifted.is_empty() {
            for pool in &drifted {
                ui.problem(&kubeconfigs.redact(&pool.to_string()), None)?;
            }
            ui.hint(
                &"nothing was applied: plan again against the clusters as they are, or \
                  `--allow-drift` to apply anyway (pods beyond the free GPUs stay Pending)",
            )?;
            return Ok((Exit::ErrorsFound, false));
        }
    }
    let edge = edge::apply::has_targets(&input.ir, &input.plan);
    if edge && args.dry_run {
        ui.status(&"note: edge and local targets are not applied in a dry run")?;
    }
    let clusters = !rendered.clusters.is_empty() || !rendered.gitops.is_empty();
    let mut exit = Exit::Clean;
    let mut changes = edge;
    let mut audit = Audit {
        plan_id: &input.plan.plan_id,
        dry_run: args.dry_run,
        warnings: Vec::new(),
    };
    if clusters || !edge {
        let (cluster_exit, cluster_changes) = apply_clusters(args, &rendered, &mut audit, ui)?;
        exit = cluster_exit;
        changes |= cluster_changes;
    }
    if edge && !args.dry_run && exit == Exit::Clean {
        exit = edge::apply::run(&input.ir, &input.plan, &args.edge, ui)?;
        let outcome = (exit != Exit::Clean).then(|| "failed (see the apply's output)".to_string());
        for target in edge::apply::targets(&input.ir, &input.plan) {
            audit.applied(
                target,
                outcome.clone(),
                serde_json::json!({"runtime": "edge"}),
            );
        }
    }
    for warning in &audit.warnings {
        ui.status(warning)?;
    }
    Ok((exit, changes))
}

/// The apply's records in the audit trail ([`crate::audit`]): one per target applied (none in
/// a dry run).
struct Audit<'a> {
    plan_id: &'a str,
    dry_run: bool,
    /// Records that could not be written, said once the apply is done.
    warnings: Vec<String>,
}

impl Audit<'_> {
    fn applied(&mut self, target: &str, failure: Option<String>, detail: serde_json::Value) {
        self.applied_as(crate::audit::local_actor(), target, failure, detail);
    }

    /// A Flux configuration deleted from a cluster no Arc target names any more.
    fn removed(&mut self, target: &str, failure: Option<String>, detail: serde_json::Value) {
        self.record(
            crate::audit::Action::Removed,
            crate::audit::local_actor(),
            target,
            failure,
            detail,
        );
    }

    fn applied_as(
        &mut self,
        actor: String,
        target: &str,
        failure: Option<String>,
        detail: serde_json::Value,
    ) {
        self.record(
            crate::audit::Action::Applied,
            actor,
            target,
            failure,
            detail,
        );
    }

    fn record(
        &mut self,
        action: crate::audit::Action,
        actor: String,
        target: &str,
        failure: Option<String>,
        detail: serde_json::Value,
    ) {
        if self.dry_run {
            return;
        }
        let warning = crate::audit::record(crate::audit::Entry {
            actor,
            action,
            plan_id: self.plan_id.to_string(),
            target: Some(target.to_string()),
            outcome: failure.map_or_else(|| "ok".to_string(), |f| format!("failed: {f}")),
            detail,
        });
        if let Some(w) = warning
            && !self.warnings.contains(&w)
        {
            self.warnings.push(w);
        }
    }
}

/// The Kubernetes and Arc part of `berth apply`.
fn apply_clusters(
    args: &ApplyArgs,
    rendered: &k8s::render::Rendered,
    audit: &mut Audit<'_>,
    ui: &mut Ui<'_>,
) -> io::Result<(Exit, bool)> {
    let options = k8s::apply::Options {
        dry_run: args.dry_run,
        prune: args.prune,
        force_conflicts: args.force_conflicts,
        concurrency: args.concurrency.max(1),
        wait: args
            .wait
            .then(|| std::time::Duration::from_secs(args.timeout)),
        lock: k8s::lock::LockOptions {
            timeout: std::time::Duration::from_secs(args.lock_timeout),
            force: args.force_unlock,
        },
        announce: ui.output == crate::report::OutputFormat::Human,
    };
    // Clone each GitOps branch and read its record; delete berth's Flux configuration on the
    // clusters the record lists and no Arc target names any more; then commit (the record
    // keeps a cluster whose configuration could not be deleted, for the next apply).
    let groups = arc::checkout(rendered);
    let mut dropped: Vec<arm::Dropped> = Vec::new();
    for g in &groups {
        for c in g.dropped(&rendered.gitops) {
            if !dropped.iter().any(|d| arc::same_id(&d.cluster, &c.cluster)) {
                dropped.push(arm::Dropped {
                    cluster: c.cluster.clone(),
                    targets: c.targets.clone(),
                    repo: g.repo.clone(),
                    branch: g.branch.clone(),
                });
            }
        }
    }
    let removed = arm::remove(&dropped, args.dry_run);
    let pending: Vec<String> = removed
        .sites
        .iter()
        .filter(|r| r.outcome.is_err())
        .map(|r| r.cluster.clone())
        .collect();
    let repos = arc::commit(groups, &rendered.plan_id, &pending, args.dry_run);
    let mut other = serde_json::Map::new();
    let mut other_failed = removed.sites.iter().any(|r| r.outcome.is_err());
    let mut changes = repos
        .iter()
        .any(|r| matches!(r.outcome, Outcome::Committed(_) | Outcome::WouldCommit(_)))
        || removed.sites.iter().any(|r| {
            matches!(
                r.outcome,
                Ok(arm::flux::Removal::Deleted | arm::flux::Removal::WouldDelete)
            )
        });
    if !repos.is_empty() {
        other_failed |= repos
            .iter()
            .any(|r| matches!(r.outcome, Outcome::Failed(_)));
        other.insert("gitops".to_string(), gitops_json(&repos));
        for r in &repos {
            let line = match &r.outcome {
                Outcome::Committed(hash) => format!("committed {hash}"),
                Outcome::Unchanged => "unchanged".to_string(),
                Outcome::WouldCommit(stat) => {
                    format!("would commit:\n{}", stat.trim_end())
                }
                Outcome::Failed(e) => format!("failed: {e}"),
            };
            ui.status(&format_args!(
                "gitops `{}` ({}) for {}: {line}",
                r.repo,
                r.branch,
                r.targets
                    .iter()
                    .map(|t| format!("`{t}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))?;
        }
    }
    for r in &removed.sites {
        print_removal(r, ui)?;
        let failure = match &r.outcome {
            Ok(arm::flux::Removal::Deleted) => None,
            Err(e) => Some(e.clone()),
            Ok(_) => continue,
        };
        for target in &r.targets {
            audit.removed(
                target,
                failure.clone(),
                serde_json::json!({
                    "runtime": "arc", "cluster": r.cluster,
                    "configuration": arm::flux::CONFIG_NAME,
                }),
            );
        }
    }
    if !removed.sites.is_empty() {
        other.insert("arc_removed".to_string(), removed_json(&removed.sites));
    }
    let flux = arm::apply(&rendered.gitops, args.dry_run);
    let arm_calls = flux.calls + removed.calls;
    if !flux.sites.is_empty() || !removed.sites.is_empty() {
        other_failed |= flux.sites.iter().any(|s| s.outcome.is_err());
        changes |= flux.sites.iter().any(|s| {
            s.outcome.as_ref().is_ok_and(|done| {
                done.extension != arm::flux::Step::Unchanged
                    || done.configuration != arm::flux::Step::Unchanged
            })
        });
        other.insert("arc".to_string(), arc_json(&flux.sites));
        other.insert("arm_requests".to_string(), arm_calls.into());
        for site in &flux.sites {
            print_site(site, ui)?;
        }
        ui.status(&format_args!(
            "Azure Resource Manager: {arm_calls} requests"
        ))?;
    }
    // An Arc target is applied when its commit and its cluster's Flux configuration are.
    for r in &repos {
        for target in &r.targets {
            let flux_failure = flux
                .sites
                .iter()
                .filter(|s| s.targets.contains(target))
                .find_map(|s| s.outcome.as_ref().err())
                .map(|e| format!("Flux configuration: {e}"));
            let failure = match &r.outcome {
                Outcome::Failed(e) => Some(e.clone()),
                _ => flux_failure,
            };
            audit.applied(
                target,
                failure,
                serde_json::json!({"runtime": "arc", "repo": r.repo, "branch": r.branch}),
            );
        }
    }
    let applied = k8s::apply::run(rendered, &options, other, other_failed, ui)?;
    for (context, failure, user) in &applied.contexts {
        let actor = format!(
            "kubeconfig:{}@{context}",
            user.as_deref().unwrap_or("unknown")
        );
        let cluster = rendered.clusters.iter().find(|c| &c.context == context);
        for target in cluster.map(|c| c.targets.as_slice()).unwrap_or_default() {
            audit.applied_as(
                actor.clone(),
                target,
                failure.clone(),
                serde_json::json!({"runtime": "kubernetes", "context": context}),
            );
        }
    }
    Ok((applied.exit, changes || applied.changes))
}

/// `arc cluster `eu-gpu` (`cloud_eu`): Flux extension present; configuration `berth` updated`
/// and the fields that changed.
fn print_site(site: &SiteReport, ui: &mut Ui<'_>) -> io::Result<()> {
    let head = format!(
        "arc cluster `{}` ({})",
        cluster_name(&site.cluster),
        quoted(&site.targets)
    );
    match &site.outcome {
        Err(e) => ui.status(&format_args!("{head}: failed: {e}")),
        Ok(done) => {
            let extension = match done.extension {
                arm::flux::Step::Unchanged => "present".to_string(),
                ref other => other.word().replace('_', " "),
            };
            ui.status(&format_args!(
                "{head}: Flux extension {extension}; configuration `{}` {}",
                arm::flux::CONFIG_NAME,
                done.configuration.word().replace('_', " ")
            ))?;
            for change in done.configuration.changes() {
                ui.status(&format_args!("    {change}"))?;
            }
            Ok(())
        }
    }
}

/// `arc cluster `us` (`us_arc`, no longer in the plan): configuration `berth` deleted`.
fn print_removal(r: &arm::RemovalReport, ui: &mut Ui<'_>) -> io::Result<()> {
    let head = format!(
        "arc cluster `{}` ({}, no longer in the plan): configuration `{}`",
        cluster_name(&r.cluster),
        quoted(&r.targets),
        arm::flux::CONFIG_NAME
    );
    match &r.outcome {
        Err(e) => ui.status(&format_args!(
            "{head} not deleted: {e} (the next apply tries again)"
        )),
        Ok(arm::flux::Removal::Kept(why)) => ui.status(&format_args!("{head} left alone: {why}")),
        Ok(arm::flux::Removal::Absent) => ui.status(&format_args!("{head} already absent")),
        Ok(done) => ui.status(&format_args!("{head} {}", done.word().replace('_', " "))),
    }
}

fn removed_json(sites: &[arm::RemovalReport]) -> serde_json::Value {
    let items: Vec<serde_json::Value> = sites
        .iter()
        .map(|r| {
            let (result, detail) = match &r.outcome {
                Ok(arm::flux::Removal::Kept(why)) => ("kept", why.clone()),
                Ok(done) => (done.word(), String::new()),
                Err(e) => ("failed", e.clone()),
            };
            serde_json::json!({
                "cluster": r.cluster, "targets": r.targets,
                "configuration": arm::flux::CONFIG_NAME,
                "result": result, "detail": detail,
            })
        })
        .collect();
    serde_json::Value::Array(items)
}

fn arc_json(sites: &[SiteReport]) -> serde_json::Value {
    let items: Vec<serde_json::Value> = sites
        .iter()
        .map(|s| match &s.outcome {
            Ok(done) => serde_json::json!({
                "cluster": s.cluster, "targets": s.targets, "result": "ok",
                "extension": done.extension.word(),
                "configuration": done.configuration.word(),
                "changes": done.configuration.changes(),
            }),
            Err(e) => serde_json::json!({
                "cluster": s.cluster, "targets": s.targets, "result": "failed", "error": e,
            }),
        })
        .collect();
    serde_json::Value::Array(items)
}

fn gitops_json(repos: &[RepoReport]) -> serde_json::Value {
    let items: Vec<serde_json::Value> = repos
        .iter()
        .map(|r| {
            let (result, detail) = match &r.outcome {
                Outcome::Committed(hash) => ("committed", hash.clone()),
                Outcome::Unchanged => ("unchanged", String::new()),
                Outcome::WouldCommit(stat) => ("would_commit", stat.clone()),
                Outcome::Failed(e) => ("failed", e.clone()),
            };
            serde_json::json!({
                "repo": r.repo, "branch": r.branch, "targets": r.targets,
                "result": result, "detail": detail,
            })
        })
        .collect();
    serde_json::Value::Array(items)
}
