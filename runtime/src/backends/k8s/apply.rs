//! `berth apply` on Kubernetes: every cluster of the rendering in parallel, at most
//! `concurrency` requests in flight per cluster, namespaces created when missing, each object
//! server-side applied as field manager `berth`, then (with `--prune`) the berth-managed
//! objects the plan no longer has deleted.
//!
//! Safe to re-run after any failure: applies are idempotent, so a second run converges and
//! reports every object unchanged. When a cluster's connection is lost, the objects not yet
//! sent are reported as not applied and nothing is pruned there.

use super::client::{ApiError, Cluster, RetryPolicy};
use super::diff;
use super::kubeconfig::Kubeconfigs;
use super::prune;
use super::render::{ClusterManifests, Kind, Manifest, Rendered};
use super::rollout::{self, Rollout};
use crate::report::Exit;
use crate::report::{OutputFormat, Ui};
use futures::stream::{self, StreamExt};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::{self, IsTerminal};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How to apply.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    pub dry_run: bool,
    pub prune: bool,
    pub force_conflicts: bool,
    /// Most requests in flight per cluster (at least 1).
    pub concurrency: usize,
    /// Wait this long for rollouts (Deployments and StatefulSets ready, Jobs complete).
    pub wait: Option<Duration>,
    /// The apply locks ([`super::lock`]); never taken in a dry run.
    pub lock: super::lock::LockOptions,
    /// Say on stderr when a lock is waited for, even without progress bars.
    pub announce: bool,
}

/// What happened to one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Created,
    Configured,
    /// Deleted and created again: a change to fields that cannot change in place.
    Replaced,
    Unchanged,
    Failed(String),
    /// Not sent: the cluster could not be reached, or its connection was lost.
    NotApplied,
}

impl Outcome {
    fn word(&self, dry_run: bool) -> &'static str {
        match (self, dry_run) {
            (Outcome::Created, false) => "created",
            (Outcome::Created, true) => "would create",
            (Outcome::Configured, false) => "configured",
            (Outcome::Configured, true) => "would configure",
            (Outcome::Replaced, false) => "replaced",
            (Outcome::Replaced, true) => "would replace",
            (Outcome::Unchanged, _) => "unchanged",
            (Outcome::Failed(_), _) => "failed",
            (Outcome::NotApplied, _) => "not applied",
        }
    }

    fn key(&self) -> &'static str {
        match self {
            Outcome::Created => "created",
            Outcome::Configured => "configured",
            Outcome::Replaced => "replaced",
            Outcome::Unchanged => "unchanged",
            Outcome::Failed(_) => "failed",
            Outcome::NotApplied => "not_applied",
        }
    }

    fn is_change(&self) -> bool {
        matches!(
            self,
            Outcome::Created | Outcome::Configured | Outcome::Replaced
        )
    }

    fn is_failure(&self) -> bool {
        matches!(self, Outcome::Failed(_) | Outcome::NotApplied)
    }
}

/// One object's result.
#[derive(Clone, Debug)]
pub struct ObjectReport {
    /// `Kind namespace/name`.
    pub object: String,
    pub outcome: Outcome,
    /// In a dry run, the unified diff from the live object.
    pub diff: Option<String>,
}

/// One cluster's results.
#[derive(Clone, Debug)]
pub struct ClusterReport {
    pub context: String,
    /// Why the cluster could not be used at all.
    pub error: Option<String>,
    pub objects: Vec<ObjectReport>,
    /// Objects deleted (or, in a dry run, that would be) by prune.
    pub pruned: Vec<ObjectReport>,
    /// Why prune did not run although asked.
    pub prune_skipped: Option<String>,
    /// With `--wait`: each workload object and whether it rolled out.
    pub rollouts: Vec<(String, Rollout)>,
}

impl ClusterReport {
    /// What went wrong on this cluster, in a few words; `None` when all went well.
    pub fn failure(&self) -> Option<String> {
        if let Some(e) = &self.error {
            return Some(e.clone());
        }
        let failed = self
            .objects
            .iter()
            .chain(&self.pruned)
            .filter(|o| o.outcome.is_failure())
            .count();
        if failed > 0 {
            return Some(format!("{failed} object(s) failed"));
        }
        if let Some(why) = &self.prune_skipped {
            return Some(format!("prune skipped: {why}"));
        }
        let waiting = self.rollouts.iter().filter(|(_, r)| !r.is_done()).count();
        (waiting > 0).then(|| format!("{waiting} rollout(s) not done"))
    }

    fn failed(&self) -> bool {
        self.error.is_some()
            || self.objects.iter().any(|o| o.outcome.is_failure())
            || self.pruned.iter().any(|o| o.outcome.is_failure())
            || self.prune_skipped.is_some()
            || self.rollouts.iter().any(|(_, r)| !r.is_done())
    }
}

/// What one apply did: the exit, whether anything changed (or in a dry run, would change: an
/// object created, configured or replaced, or pruned), and per context what went wrong
/// (`None`: nothing) and the kubeconfig user acting there.
pub struct Applied {
    pub exit: Exit,
    pub changes: bool,
    pub contexts: Vec<(String, Option<String>, Option<String>)>,
}

/// Applies `rendered` and prints the results; exit 1 when anything failed or was not applied
/// (or `other_failed`: another backend's part of the same apply). `other` fields join the
/// JSON document.
pub fn run(
    rendered: &Rendered,
    options: &Options,
    other: serde_json::Map<String, Value>,
    other_failed: bool,
    ui: &mut Ui<'_>,
) -> io::Result<Applied> {
    let kubeconfigs = Arc::new(Kubeconfigs::load());
    let progress = ui.output == OutputFormat::Human && io::stderr().is_terminal();
    let runtime = match crate::tasks::runtime_with(4) {
        Ok(rt) => rt,
        Err(why) => {
            ui.problem(&why, None)?;
            return Ok(Applied {
                exit: Exit::Trouble,
                changes: false,
                contexts: Vec::new(),
            });
        }
    };
    let reports = runtime.block_on(apply_all(rendered, *options, kubeconfigs.clone(), progress));
    let changes = count(&reports, Outcome::is_change) > 0
        || reports
            .iter()
            .any(|r| r.pruned.iter().any(|p| !p.outcome.is_failure()));
    let exit = print(
        &reports,
        options,
        &kubeconfigs,
        rendered,
        other,
        other_failed,
        ui,
    )?;
    let contexts = reports
        .iter()
        .map(|r| {
            (
                r.context.clone(),
                r.failure(),
                kubeconfigs.user_of(&r.context),
            )
        })
        .collect();
    Ok(Applied {
        exit,
        changes,
        contexts,
    })
}

/// Applies every cluster in parallel; reports in the rendering's (context) order.
pub async fn apply_all(
    rendered: &Rendered,
    options: Options,
    kubeconfigs: Arc<Kubeconfigs>,
    progress: bool,
) -> Vec<ClusterReport> {
    let bars = MultiProgress::with_draw_target(if progress {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    });
    let retry = RetryPolicy::from_env();
    let tasks: Vec<_> = rendered
        .clusters
        .iter()
        .map(|cluster| {
            let bar = bars.add(ProgressBar::new(cluster.manifests.len() as u64));
            bar.set_style(
                ProgressStyle::with_template("{prefix:>20} [{bar:30}] {pos}/{len} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar.set_prefix(cluster.context.clone());
            let cluster = cluster.clone();
            let kubeconfigs = kubeconfigs.clone();
            tokio::spawn(async move {
                let report = apply_cluster(&cluster, options, &kubeconfigs, retry, &bar).await;
                bar.finish_and_clear();
                report
            })
        })
        .collect();
    let mut reports = Vec::new();
    for (task, cluster) in tasks.into_iter().zip(&rendered.clusters) {
        reports.push(task.await.unwrap_or_else(|e| ClusterReport {
            context: cluster.context.clone(),
            error: Some(format!("the apply task failed: {e}")),
            objects: not_applied(&cluster.manifests),
            pruned: Vec::new(),
            prune_skipped: None,
            rollouts: Vec::new(),
        }));
    }
    reports
}

fn not_applied(manifests: &[Manifest]) -> Vec<ObjectReport> {
    manifests
        .iter()
        .map(|m| ObjectReport {
            object: m.display_name(),
            outcome: Outcome::NotApplied,
            diff: None,
        })
        .collect()
}

async fn apply_cluster(
    planned: &ClusterManifests,
    options: Options,
    kubeconfigs: &Kubeconfigs,
    retry: RetryPolicy,
    bar: &ProgressBar,
) -> ClusterReport {
    let mut report = ClusterReport {
        context: planned.context.clone(),
        error: None,
        objects: Vec::new(),
        pruned: Vec::new(),
        prune_skipped: None,
        rollouts: Vec::new(),
    };
    let cluster = match kubeconfigs.config(&planned.context).await {
        Err(problem) => Err(problem.to_string()),
        Ok(config) => Cluster::connect(&planned.context, config, retry, kubeconfigs.learned())
            .await
            .map_err(|e| kubeconfigs.redact(&e.to_string())),
    };
    let cluster = match cluster {
        Ok(cluster) => cluster,
        Err(error) => {
            report.error = Some(error);
            report.objects = not_applied(&planned.manifests);
            return report;
        }
    };
    let lost = Arc::new(AtomicBool::new(false));
    // Namespaces first (objects in a missing namespace are refused), then the rest with
    // bounded concurrency.
    let (namespaces, rest): (Vec<&Manifest>, Vec<&Manifest>) = planned
        .manifests
        .iter()
        .partition(|m| m.kind == Kind::Namespace);
    let mut missing_namespaces = Vec::new();
    for ns in namespaces {
        let result = apply_namespace(&cluster, ns, options, &lost).await;
        if result.outcome == Outcome::Created && options.dry_run {
            missing_namespaces.push(ns.name.clone());
        }
        bar.inc(1);
        report.objects.push(redacted(result, kubeconfigs));
    }
    let held = if options.dry_run {
        Vec::new()
    } else {
        match lock_namespaces(&cluster, planned, options, bar).await {
            Ok(held) => held,
            Err(error) => {
                report.error = Some(kubeconfigs.redact(&error.to_string()));
                report
                    .objects
                    .extend(not_applied(&rest.into_iter().cloned().collect::<Vec<_>>()));
                return report;
            }
        }
    };
    let known = Arc::new(list_managed(&cluster, &rest, &missing_namespaces).await);
    let results: Vec<ObjectReport> = stream::iter(rest.into_iter().cloned())
        .map(|m| {
            let cluster = cluster.clone();
            let lost = lost.clone();
            let bar = bar.clone();
            let known = known.clone();
            let absent = m
                .namespace
                .as_ref()
                .is_some_and(|ns| missing_namespaces.contains(ns));
            tokio::spawn(async move {
                let live = known.get(&(m.kind, m.namespace.clone(), m.name.clone()));
                let result = apply_object(&cluster, &m, options, &lost, absent, live).await;
                bar.inc(1);
                result
            })
        })
        .buffered(options.concurrency)
        .map(|joined| {
            joined.unwrap_or_else(|e| ObjectReport {
                object: String::from("(unknown)"),
                outcome: Outcome::Failed(format!("the apply task failed: {e}")),
                diff: None,
            })
        })
        .collect()
        .await;
    report
        .objects
        .extend(results.into_iter().map(|r| redacted(r, kubeconfigs)));
    if let Some(timeout) = options.wait
        && !options.dry_run
        && !report.objects.iter().any(|o| o.outcome.is_failure())
    {
        // On a terminal, each rollout as it settles (the summary repeats them at the end).
        let announce = |object: &str, rollout: &Rollout| bar.println(rollout_line(object, rollout));
        report.rollouts = rollout::wait(&cluster, planned, timeout, &announce).await;
    }
    if options.prune {
        if report.objects.iter().any(|o| o.outcome.is_failure()) {
            report.prune_skipped = Some("not every object was applied".to_string());
        } else {
            prune_cluster(&cluster, planned, options, kubeconfigs, &mut report).await;
        }
    }
    for lock in held {
        if lock.lost.load(Ordering::SeqCst) {
            report.error = Some(format!(
                "another run took the apply lock of namespace `{}` while this one applied: \
                 its changes and these may be mixed; apply again",
                lock.namespace
            ));
        }
        lock.release(&cluster).await;
    }
    report
}

/// Takes the apply lock of every namespace of `planned`, in name order; on failure gives back
/// those taken.
async fn lock_namespaces(
    cluster: &Cluster,
    planned: &ClusterManifests,
    options: Options,
    bar: &ProgressBar,
) -> Result<Vec<super::lock::Held>, super::lock::LockError> {
    let mut namespaces: Vec<&str> = planned
        .manifests
        .iter()
        .filter_map(|m| match m.kind {
            Kind::Namespace => Some(m.name.as_str()),
            _ => m.namespace.as_deref(),
        })
        .collect();
    namespaces.sort_unstable();
    namespaces.dedup();
    let mut held = Vec::new();
    for namespace in namespaces {
        let waiting = |holder: &str, since: &str| {
            let line = format!(
                "context `{}`: waiting for the apply lock of namespace `{namespace}` (Lease \
                 `{}`), held by `{holder}` since {since}",
                planned.context,
                super::lock::LEASE
            );
            if !bar.is_hidden() {
                bar.println(line);
            } else if options.announce {
                eprintln!("{line}");
            }
        };
        match super::lock::acquire(cluster, namespace, options.lock, &waiting).await {
            Ok(lock) => held.push(lock),
            Err(e) => {
                for lock in held {
                    lock.release(cluster).await;
                }
                return Err(e);
            }
        }
    }
    Ok(held)
}

fn redacted(mut report: ObjectReport, kubeconfigs: &Kubeconfigs) -> ObjectReport {
    if let Outcome::Failed(message) = &report.outcome {
        report.outcome = Outcome::Failed(kubeconfigs.redact(message));
    }
    report
}

/// A namespace is created when missing and otherwise left alone: it may belong to others.
async fn apply_namespace(
    cluster: &Cluster,
    ns: &Manifest,
    options: Options,
    lost: &AtomicBool,
) -> ObjectReport {
    let outcome = match cluster.get(Kind::Namespace, None, &ns.name).await {
        Ok(Some(_)) => Ok(Outcome::Unchanged),
        Ok(None) if options.dry_run => Ok(Outcome::Created),
        Ok(None) => cluster
            .apply(ns, false, false)
            .await
            .map(|_| Outcome::Created),
        Err(e) => Err(e),
    };
    let diff = match (&outcome, options.dry_run) {
        (Ok(Outcome::Created), true) => diff::unified(&ns.display_name(), None, &ns.object),
        _ => None,
    };
    ObjectReport {
        object: ns.display_name(),
        outcome: failure(outcome, lost),
        diff,
    }
}

/// The live objects berth manages of every kind and namespace `manifests` name, from one
/// LIST each (label `app.kubernetes.io/managed-by=berth`) instead of a GET per object: a
/// re-apply of a large plan costs a request per object less. A kind whose LIST fails is
/// left out (its objects are read one by one), and so is everything in a namespace that
/// does not exist yet.
async fn list_managed(
    cluster: &Cluster,
    manifests: &[&Manifest],
    missing_namespaces: &[String],
) -> BTreeMap<(Kind, Option<String>, String), Value> {
    let mut scopes: Vec<(Kind, String)> = manifests
        .iter()
        .filter_map(|m| Some((m.kind, m.namespace.clone()?)))
        .filter(|(_, ns)| !missing_namespaces.contains(ns))
        .collect();
    scopes.sort();
    scopes.dedup();
    let selector = super::managed_selector();
    let mut out = BTreeMap::new();
    for (kind, namespace) in scopes {
        let Ok(items) = cluster.list(kind, &namespace, &selector).await else {
            continue;
        };
        for mut item in items {
            // Items of a list carry no kind of their own; a GET's answer does.
            item["apiVersion"] = Value::from(kind.api_version());
            item["kind"] = Value::from(kind.kind());
            if let Some(name) = item["metadata"]["name"].as_str().map(str::to_string) {
                out.insert((kind, Some(namespace.clone()), name), item);
            }
        }
    }
    out
}

/// Applies one object; `listed` is its live state when [`list_managed`] found it (else it
/// is read with a GET: it may not exist, or not be berth's).
async fn apply_object(
    cluster: &Cluster,
    m: &Manifest,
    options: Options,
    lost: &AtomicBool,
    namespace_absent: bool,
    listed: Option<&Value>,
) -> ObjectReport {
    let name = m.display_name();
    if lost.load(Ordering::SeqCst) {
        return ObjectReport {
            object: name,
            outcome: Outcome::NotApplied,
            diff: None,
        };
    }
    // In a dry run, an object in a namespace that does not exist yet would be refused by the
    // server (404): it would simply be created.
    if namespace_absent {
        return ObjectReport {
            diff: diff::unified(&name, None, &m.object),
            object: name,
            outcome: Outcome::Created,
        };
    }
    let result = async {
        let live = match listed {
            Some(live) => Some(live.clone()),
            None => cluster.get(m.kind, m.namespace.as_deref(), &m.name).await?,
        };
        // An object that exists is applied as a dry run first: when the server's answer
        // equals the live object, nothing is sent for real, so a re-run of the same plan
        // makes no write at all (a server-side apply that changes nothing is still a write
        // request to the API server, and in its audit log).
        let preview_only = !options.dry_run && live.is_some();
        let after = match cluster
            .apply(m, options.dry_run || preview_only, options.force_conflicts)
            .await
        {
            Ok(preview)
                if preview_only && diff::unified(&name, live.as_ref(), &preview).is_some() =>
            {
                cluster.apply(m, false, options.force_conflicts).await
            }
            other => other,
        };
        let after = match after {
            Err(ApiError::Immutable { fields }) => {
                return replace(cluster, m, live.as_ref(), fields, options).await;
            }
            other => other?,
        };
        let difference = diff::unified(&name, live.as_ref(), &after);
        let outcome = match (&live, &difference) {
            (None, _) => Outcome::Created,
            (Some(_), Some(_)) => Outcome::Configured,
            (Some(_), None) => Outcome::Unchanged,
        };
        Ok::<_, ApiError>((outcome, difference))
    }
    .await;
    match result {
        Ok((outcome, difference)) => ObjectReport {
            object: name,
            outcome,
            diff: difference.filter(|_| options.dry_run),
        },
        Err(e) => ObjectReport {
            object: name,
            outcome: failure(Err(e), lost),
            diff: None,
        },
    }
}

/// An object whose immutable fields changed (a Job's pod template) cannot be patched: a Job
/// berth manages is deleted (background propagation: its pods go with it) and created again.
/// Anything else is left as it is, and the apply fails for it.
async fn replace(
    cluster: &Cluster,
    m: &Manifest,
    live: Option<&Value>,
    fields: Vec<String>,
    options: Options,
) -> Result<(Outcome, Option<String>), ApiError> {
    let immutable = ApiError::Immutable { fields };
    let (Some(live), Some(namespace)) = (live, m.namespace.as_deref()) else {
        return Err(immutable);
    };
    if m.kind != Kind::Job || !prune::is_managed(live) {
        return Err(immutable);
    }
    let difference = diff::unified(&m.display_name(), Some(live), &m.object);
    if options.dry_run {
        return Ok((Outcome::Replaced, difference));
    }
    cluster.delete(m.kind, namespace, &m.name, false).await?;
    // A background deletion removes the Job at once; a finalizer may keep it a moment.
    let mut wait = Duration::from_millis(100);
    for _ in 0..5 {
        match cluster.apply(m, false, options.force_conflicts).await {
            Ok(_) => return Ok((Outcome::Replaced, difference)),
            Err(ApiError::Immutable { .. }) => {
                tokio::time::sleep(wait).await;
                wait = wait.saturating_mul(2);
            }
            Err(e) => return Err(e),
        }
    }
    Err(immutable)
}

/// The outcome of a result; a lost connection also stops the cluster's remaining objects.
fn failure(result: Result<Outcome, ApiError>, lost: &AtomicBool) -> Outcome {
    match result {
        Ok(outcome) => outcome,
        Err(e) => {
            if e.is_connection() {
                lost.store(true, Ordering::SeqCst);
            }
            Outcome::Failed(e.to_string())
        }
    }
}

async fn prune_cluster(
    cluster: &Cluster,
    planned: &ClusterManifests,
    options: Options,
    kubeconfigs: &Kubeconfigs,
    report: &mut ClusterReport,
) {
    let stale = match prune::stale(cluster, planned).await {
        Ok(stale) => stale,
        Err(e) => {
            report.prune_skipped = Some(kubeconfigs.redact(&e.to_string()));
            return;
        }
    };
    for (kind, namespace, name) in stale {
        let object = format!("{} {namespace}/{name}", kind.kind());
        let outcome = match cluster
            .delete(kind, &namespace, &name, options.dry_run)
            .await
        {
            Ok(()) => Outcome::Configured,
            Err(e) => Outcome::Failed(kubeconfigs.redact(&e.to_string())),
        };
        report.pruned.push(ObjectReport {
            object,
            outcome,
            diff: None,
        });
    }
}

fn print(
    reports: &[ClusterReport],
    options: &Options,
    kubeconfigs: &Kubeconfigs,
    rendered: &Rendered,
    other: serde_json::Map<String, Value>,
    other_failed: bool,
    ui: &mut Ui<'_>,
) -> io::Result<Exit> {
    let failed = other_failed || reports.iter().any(ClusterReport::failed);
    let exit = if failed {
        Exit::ErrorsFound
    } else {
        Exit::Clean
    };
    if ui.output == OutputFormat::Json {
        let doc = json!({
            "plan_id": rendered.plan_id,
            "dry_run": options.dry_run,
            "clusters": reports.iter().map(cluster_json).collect::<Vec<_>>(),
            "not_handled": rendered.others.iter().map(|o| json!({
                "workload": o.workload, "target": o.target, "runtime": o.runtime,
            })).collect::<Vec<_>>(),
            "changes": count(reports, Outcome::is_change),
            "failures": count(reports, Outcome::is_failure),
        });
        let mut doc = doc;
        if let Value::Object(map) = &mut doc {
            map.extend(other);
        }
        writeln!(ui.out, "{}", kubeconfigs.redact(&doc.to_string()))?;
        return Ok(exit);
    }
    for report in reports {
        ui.status(&format_args!("context `{}`:", report.context))?;
        if let Some(error) = &report.error {
            ui.problem(&format_args!("context `{}`: {error}", report.context), None)?;
        }
        for object in &report.objects {
            if let Some(diff) = &object.diff {
                write!(ui.out, "{diff}")?;
            }
            object_line(object, options.dry_run, ui)?;
        }
        for object in &report.pruned {
            let word = match (&object.outcome, options.dry_run) {
                (Outcome::Failed(_), _) => "prune failed",
                (_, true) => "would prune",
                (_, false) => "pruned",
            };
            let detail = match &object.outcome {
                Outcome::Failed(e) => format!(": {e}"),
                _ => String::new(),
            };
            ui.status(&format_args!("  {word:<16} {}{detail}", object.object))?;
        }
        for (object, rollout) in &report.rollouts {
            ui.status(&rollout_line(object, rollout))?;
        }
        if let Some(why) = &report.prune_skipped {
            ui.status(&format_args!("  prune skipped: {why}"))?;
        }
    }
    let tally = |outcome: fn(&Outcome) -> bool| count(reports, outcome);
    ui.status(&format_args!(
        "{}{} changed, {} unchanged, {} failed, {} not applied, {} pruned",
        if options.dry_run { "dry run: " } else { "" },
        tally(Outcome::is_change),
        tally(|o| *o == Outcome::Unchanged),
        tally(|o| matches!(o, Outcome::Failed(_))),
        tally(|o| *o == Outcome::NotApplied),
        reports
            .iter()
            .map(|r| r.pruned.iter().filter(|p| !p.outcome.is_failure()).count())
            .sum::<usize>(),
    ))?;
    Ok(exit)
}

fn rollout_line(object: &str, rollout: &Rollout) -> String {
    match rollout {
        Rollout::Done { after } => format!(
            "  {:<16} {object} after {:.1}s",
            "rolled out",
            after.as_secs_f64()
        ),
        Rollout::Failed { reason, after } => format!(
            "  {:<16} {object} after {:.1}s: {reason}",
            "failed",
            after.as_secs_f64()
        ),
        Rollout::Pending(progress) => format!(
            "  {:<16} {object}: {progress} when the wait ended",
            "not rolled out"
        ),
    }
}

fn object_line(object: &ObjectReport, dry_run: bool, ui: &mut Ui<'_>) -> io::Result<()> {
    let word = object.outcome.word(dry_run);
    match &object.outcome {
        Outcome::Failed(e) => ui.status(&format_args!("  {word:<16} {}: {e}", object.object)),
        _ => ui.status(&format_args!("  {word:<16} {}", object.object)),
    }
}

fn count(reports: &[ClusterReport], test: fn(&Outcome) -> bool) -> usize {
    reports
        .iter()
        .flat_map(|r| &r.objects)
        .filter(|o| test(&o.outcome))
        .count()
}

fn object_json(o: &ObjectReport) -> Value {
    let mut doc = json!({ "object": o.object, "result": o.outcome.key() });
    if let Outcome::Failed(e) = &o.outcome {
        doc["error"] = json!(e);
    }
    if let Some(diff) = &o.diff {
        doc["diff"] = json!(diff);
    }
    doc
}

fn cluster_json(r: &ClusterReport) -> Value {
    json!({
        "context": r.context,
        "error": r.error,
        "objects": r.objects.iter().map(object_json).collect::<Vec<_>>(),
        "pruned": r.pruned.iter().map(object_json).collect::<Vec<_>>(),
        "prune_skipped": r.prune_skipped,
        "rollouts": r.rollouts.iter().map(|(object, rollout)| match rollout {
            Rollout::Done { after } => json!({
                "object": object, "result": "done", "seconds": after.as_secs_f64(),
            }),
            Rollout::Failed { reason, after } => json!({
                "object": object, "result": "failed", "reason": reason,
                "seconds": after.as_secs_f64(),
            }),
            Rollout::Pending(progress) => json!({
                "object": object, "result": "pending", "progress": progress.to_string(),
            }),
        }).collect::<Vec<_>>(),
    })
}
