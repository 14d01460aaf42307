//! `berth reclaim PLAN|SPEC`: idle GPUs reclaimed on the plan's Kubernetes targets, as the
//! spec's `reclaim` rules say ([`crate::backends::k8s::reclaim`]: the objects, their pods,
//! the idle series and the act).
//!
//! Utilisation is `DCGM_FI_DEV_GPU_UTIL` per pod from each cluster's DCGM exporter (`--dcgm
//! CONTEXT=URL`, as `berth top` reads it). Idleness past a threshold needs a series: the
//! exporter only has the present, so each round scrapes once and the series lives in this
//! process. `--watch` scrapes every `--interval` seconds (until interrupted, or for
//! `--rounds`) and reclaims what has been idle for its rule's time; a run without `--watch`
//! sees one sample, reclaims only rules of no idle time, and reports what is idle so far.
//! Each reclaim is an event with its evidence; `--dry-run` says what would be reclaimed and
//! writes nothing.

use super::input::PlanInputArgs;
use super::top::{DcgmArgs, input_and_exporters};
use crate::backends::k8s::client::Cluster;
use crate::backends::k8s::kubeconfig::Kubeconfigs;
use crate::backends::k8s::reclaim::{self, Evidence, Kept, Object, Tracker, Verdict};
use crate::backends::k8s::{render, top};
use crate::report::{Exit, OutputFormat, Ui};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, clap::Args)]
pub struct ReclaimArgs {
    #[command(flatten)]
    pub plan: PlanInputArgs,
    #[command(flatten)]
    pub dcgm: DcgmArgs,
    /// Say what would be reclaimed; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Keep scraping and reclaiming every `--interval` seconds: idleness past a rule's time
    /// needs a series of samples, which one run without it does not have.
    #[arg(long)]
    pub watch: bool,
    /// Seconds between rounds with `--watch`.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    pub interval: f64,
    /// With `--watch`, stop after this many rounds (default: until interrupted).
    #[arg(long, value_name = "N", requires = "watch")]
    pub rounds: Option<u64>,
}

/// One cluster to watch: its connection, exporter and objects.
struct Site {
    cluster: Cluster,
    url: String,
    objects: Vec<Object>,
}

/// A reclaim, done, failed or (with `--dry-run`) that would be done.
#[derive(Serialize)]
struct Event<'a> {
    event: &'static str,
    at: String,
    #[serde(flatten)]
    object: &'a Object,
    action: &'static str,
    /// `reclaimed`, `would_reclaim` or `failed`.
    result: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    gpus_freed: i64,
    evidence: &'a Evidence,
}

/// An object with GPUs that this round keeps, and why.
#[derive(Serialize)]
struct KeptRow<'a> {
    #[serde(flatten)]
    object: &'a Object,
    gpus: i64,
    #[serde(flatten)]
    kept: &'a Kept,
    message: String,
}

/// `berth reclaim`.
pub fn run(args: &ReclaimArgs, ui: &mut Ui<'_>) -> io::Result<Exit> {
    let Some(interval) = Duration::try_from_secs_f64(args.interval)
        .ok()
        .filter(|i| !i.is_zero())
    else {
        ui.problem(
            &format_args!(
                "`--interval {}` is not a positive number of seconds",
                args.interval
            ),
            Some("e.g. `--interval 30`"),
        )?;
        return Ok(Exit::Trouble);
    };
    let (input, dcgm) = match input_and_exporters(&args.plan, &args.dcgm, ui)? {
        Ok(found) => found,
        Err(exit) => return Ok(exit),
    };
    let rendered = render::render(&input.ir, &input.plan);
    let clusters: Vec<(String, Vec<Object>)> = rendered
        .clusters
        .iter()
        .map(|c| {
            (
                c.context.clone(),
                reclaim::objects(&input.ir, &input.plan, c),
            )
        })
        .filter(|(_, objects)| objects.iter().any(|o| o.rule.is_some()))
        .collect();
    if clusters.is_empty() {
        ui.status(&"no placement on a kubernetes target is held to a reclaim rule")?;
        if ui.output == OutputFormat::Json {
            writeln!(
                ui.out,
                "{}",
                serde_json::json!({"round": 0, "reclaimed": [], "kept": []})
            )?;
        }
        return Ok(Exit::Clean);
    }
    for (context, _) in &clusters {
        if !dcgm.contains_key(context) {
            ui.problem(
                &format_args!("no DCGM exporter for cluster `{context}`: its GPUs' utilisation is unknown"),
                Some("reclaim needs each cluster's per-pod GPU utilisation: `--dcgm CONTEXT=URL`, e.g. `--dcgm prod=http://10.0.0.5:9400/metrics`"),
            )?;
            return Ok(Exit::Trouble);
        }
    }
    let Some(runtime) = crate::tasks::async_runtime(ui)? else {
        return Ok(Exit::Trouble);
    };
    let http = match reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
    {
        Ok(http) => http,
        Err(e) => {
            ui.problem(&format_args!("cannot start an HTTP client: {e}"), None)?;
            return Ok(Exit::Trouble);
        }
    };
    let kubeconfigs = Kubeconfigs::load();
    let mut sites = Vec::new();
    for (context, objects) in clusters {
        match runtime.block_on(reclaim::connect(&kubeconfigs, &context)) {
            Ok(cluster) => sites.push(Site {
                cluster,
                url: dcgm.get(&context).cloned().unwrap_or_default(),
                objects,
            }),
            Err(e) => {
                ui.problem(
                    &format_args!("cannot reach cluster `{context}`: {e}"),
                    Some("check the kubeconfig (`KUBECONFIG`, its context for the target) and that the API server answers"),
                )?;
                return Ok(Exit::Trouble);
            }
        }
    }

    let mut tracker = Tracker::default();
    let mut done: BTreeSet<(String, String, &'static str, String)> = BTreeSet::new();
    let mut said: BTreeMap<(String, String, &'static str, String), String> = BTreeMap::new();
    let mut failed = false;
    let mut round = 0u64;
    loop {
        round += 1;
        let started = Instant::now();
        let now = jiff::Timestamp::now();
        let mut reclaimed = Vec::new();
        let mut kept = Vec::new();
        for site in &sites {
            let pods = match runtime.block_on(reclaim::pods(&site.cluster, &site.objects)) {
                Ok(pods) => pods,
                Err(e) => {
                    ui.problem(
                        &format_args!(
                            "cannot list the pods of cluster `{}`: {}",
                            site.cluster.context,
                            kubeconfigs.redact(&e.to_string())
                        ),
                        Some("reclaim reads berth's pods on the plan's targets: `list` on `pods`"),
                    )?;
                    return Ok(Exit::Trouble);
                }
            };
            let utilization = match runtime.block_on(top::scrape_dcgm(&http, &site.url)) {
                Ok(found) => found,
                Err(e) => {
                    // An exporter URL may carry credentials (`http://user:token@host/`).
                    let e = crate::backends::arc::redact_url(&e, &site.url);
                    ui.problem(
                        &format_args!("cannot read the DCGM exporter of cluster `{}`: {e}", site.cluster.context),
                        Some("check `--dcgm CONTEXT=URL`: the exporter's Prometheus endpoint, usually port 9400 `/metrics`"),
                    )?;
                    return Ok(Exit::Trouble);
                }
            };
            let verdicts = tracker.observe(now, &site.objects, &pods, &utilization, !args.watch);
            for (object, gpus, verdict) in verdicts {
                let key = (
                    object.context.clone(),
                    object.namespace.clone(),
                    object.kind,
                    object.name.clone(),
                );
                if done.contains(&key) {
                    continue;
                }
                match verdict {
                    Verdict::Reclaim(evidence) => {
                        let outcome = if args.dry_run {
                            Ok(())
                        } else {
                            runtime.block_on(reclaim::reclaim(&site.cluster, &object))
                        };
                        let error = outcome.err().map(|e| kubeconfigs.redact(&e.to_string()));
                        failed |= error.is_some();
                        if error.is_none() {
                            done.insert(key);
                        }
                        if !args.dry_run {
                            let user = kubeconfigs.user_of(&object.context);
                            let entry = crate::audit::Entry {
                                actor: format!(
                                    "kubeconfig:{}@{}",
                                    user.as_deref().unwrap_or("unknown"),
                                    object.context
                                ),
                                action: crate::audit::Action::Reclaimed,
                                plan_id: input.plan.plan_id.clone(),
                                target: Some(object.target.clone()),
                                outcome: error
                                    .as_ref()
                                    .map_or_else(|| "ok".to_string(), |e| format!("failed: {e}")),
                                detail: serde_json::json!({
                                    "object": &object,
                                    "gpus_freed": gpus,
                                    "evidence": &evidence,
                                }),
                            };
                            crate::audit::record_or_warn(entry, ui)?;
                        }
                        reclaimed.push((object, gpus, evidence, error));
                    }
                    Verdict::Keep(why) => {
                        let message = why.message();
                        let changed = said.insert(key, message.clone()).as_ref() != Some(&message);
                        kept.push((object, gpus, why, message, changed));
                    }
                }
            }
        }
        let at = now.to_string();
        match ui.output {
            OutputFormat::Json => {
                let events: Vec<Event<'_>> = reclaimed
                    .iter()
                    .map(|(object, gpus, evidence, error)| Event {
                        event: "reclaim",
                        at: at.clone(),
                        object,
                        action: object.action(),
                        result: match (error, args.dry_run) {
                            (Some(_), _) => "failed",
                            (None, true) => "would_reclaim",
                            (None, false) => "reclaimed",
                        },
                        error: error.clone(),
                        gpus_freed: *gpus,
                        evidence,
                    })
                    .collect();
                let rows: Vec<KeptRow<'_>> = kept
                    .iter()
                    .map(|(object, gpus, why, message, _)| KeptRow {
                        object,
                        gpus: *gpus,
                        kept: why,
                        message: message.clone(),
                    })
                    .collect();
                let doc = serde_json::json!({
                    "round": round,
                    "at": at,
                    "dry_run": args.dry_run,
                    "reclaimed": events,
                    "kept": rows,
                });
                writeln!(ui.out, "{doc}")?;
            }
            _ => {
                for (object, gpus, evidence, error) in &reclaimed {
                    let what = match (object.action(), args.dry_run) {
                        ("delete", true) => "would be deleted",
                        ("delete", false) => "deleted",
                        (_, true) => "would be scaled to 0",
                        (_, false) => "scaled to 0",
                    };
                    let samples: usize = evidence.pods.iter().map(|p| p.samples.len()).sum();
                    let line = format!(
                        "`{}` on `{}`: {} {what}, {} GPU{} freed; idle {} (rule: {} of policy `{}`; {samples} sample{} of 0% from {} pod{})",
                        object.workload,
                        object.target,
                        object.describe(),
                        gpus,
                        if *gpus == 1 { "" } else { "s" },
                        reclaim::secs(evidence.idle_for_s),
                        reclaim::secs(evidence.idle_after_s),
                        evidence.policy,
                        if samples == 1 { "" } else { "s" },
                        evidence.pods.len(),
                        if evidence.pods.len() == 1 { "" } else { "s" },
                    );
                    match error {
                        Some(e) => ui.problem(
                            &format_args!(
                                "cannot reclaim `{}` on `{}` ({}): {e}",
                                object.workload,
                                object.target,
                                object.describe()
                            ),
                            Some("reclaim scales StatefulSets and Deployments (`patch`) and deletes Jobs (`delete`)"),
                        )?,
                        None if args.dry_run => writeln!(ui.out, "would reclaim {line}")?,
                        None => writeln!(ui.out, "reclaimed {line}")?,
                    }
                }
                for (object, gpus, _, message, changed) in &kept {
                    if *changed {
                        writeln!(
                            ui.out,
                            "kept `{}` on `{}` ({}, {gpus} GPU{}): {message}",
                            object.workload,
                            object.target,
                            object.describe(),
                            if *gpus == 1 { "" } else { "s" },
                        )?;
                    }
                }
            }
        }
        ui.out.flush()?;
        if !args.watch || args.rounds.is_some_and(|n| round >= n) {
            break;
        }
        std::thread::sleep(interval.saturating_sub(started.elapsed()));
    }
    if args.dry_run {
        ui.status(&"dry run: nothing was changed")?;
    }
    Ok(if failed {
        Exit::ErrorsFound
    } else {
        Exit::Clean
    })
}
