//! `berth apply` for the targets the Kubernetes backend does not handle: edge targets get
//! signed bundles published to a bundle store, `local` targets run in an agent embedded in
//! this process (foreground, until Ctrl-C or `--run-for`). Called by [`crate::commands::apply`] once
//! the plan has passed its refusals.

use crate::agent::{Agent, Config, Feed, GpuChoice};
use crate::backends::edge::bundle::store::{Location, StoreError};
use crate::backends::edge::bundle::{Bundle, SignedBundle, TargetKind, keys};
use crate::report::Exit;
use crate::report::Ui;
use berth_compiler::ir::Ir;
use berth_compiler::plan::Plan;
use ed25519_dalek::SigningKey;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Clone, Default, clap::Args)]
pub struct EdgeArgs {
    /// Where edge targets' bundles are published: a directory or an http(s) URL taking PUT.
    #[arg(long, value_name = "STORE")]
    pub bundles: Option<String>,
    /// The secret key bundles are signed with (`berth keys generate`).
    #[arg(long, value_name = "KEY")]
    pub key: Option<PathBuf>,
    /// State directory of the embedded agent running `local` targets.
    #[arg(long, value_name = "DIR", default_value = ".berth/local")]
    pub state: PathBuf,
    /// Stop local workloads after this many seconds instead of waiting for Ctrl-C.
    #[arg(long, value_name = "SECONDS")]
    pub run_for: Option<f64>,
}

/// What happened to one target.
enum Outcome {
    Published { generation: u64, address: String },
    Local(Bundle),
    Skipped(String),
}

/// Whether the plan places anything on an edge or local target.
pub fn has_targets(ir: &Ir, plan: &Plan) -> bool {
    !targets(ir, plan).is_empty()
}

/// The edge and local targets `plan` places something on.
pub fn targets<'a>(ir: &'a Ir, plan: &Plan) -> Vec<&'a str> {
    ir.targets
        .iter()
        .filter(|t| {
            matches!(
                TargetKind::of(&t.runtime),
                TargetKind::Edge | TargetKind::Local
            ) && placed(plan, &t.name)
        })
        .map(|t| t.name.as_str())
        .collect()
}

fn placed(plan: &Plan, target: &str) -> bool {
    plan.workloads
        .iter()
        .any(|w| w.placements.iter().any(|p| p.target == target))
}

/// Publishes edge bundles and runs local targets of `plan`.
pub fn run(ir: &Ir, plan: &Plan, args: &EdgeArgs, ui: &mut Ui<'_>) -> io::Result<Exit> {
    let Some(runtime) = crate::tasks::async_runtime(ui)? else {
        return Ok(Exit::Trouble);
    };
    let signing = match &args.key {
        Some(path) => match signing_key(path, ui)? {
            Ok(key) => Some(key),
            Err(exit) => return Ok(exit),
        },
        None => None,
    };
    let client = reqwest::Client::new();
    let mut exit = Exit::Clean;
    let mut locals = Vec::new();
    for target in &ir.targets {
        if !placed(plan, &target.name) {
            continue;
        }
        let outcome = match TargetKind::of(&target.runtime) {
            TargetKind::Edge => match (&args.bundles, &signing) {
                (Some(store), Some(key)) => {
                    let location = Location::parse(store);
                    let published = runtime
                        .block_on(publish(ir, plan, &target.name, &location, key, &client))
                        .map(|(generation, address, _)| Outcome::Published {
                            generation,
                            address,
                        });
                    published.unwrap_or_else(|e| {
                        exit = Exit::Trouble;
                        Outcome::Skipped(e.to_string())
                    })
                }
                _ => Outcome::Skipped("edge targets need --bundles STORE and --key KEY".into()),
            },
            TargetKind::Local => Outcome::Local(Bundle::from_plan(ir, plan, &target.name, 0)),
            // Applied by the Kubernetes backend before this runs.
            TargetKind::Kubernetes | TargetKind::Arc => continue,
        };
        match outcome {
            Outcome::Published {
                generation,
                address,
            } => ui.status(&format_args!(
                "target `{}`: bundle generation {generation} published to {address}",
                target.name
            ))?,
            Outcome::Skipped(why) => ui.status(&format_args!(
                "target `{}`: not applied: {why}",
                target.name
            ))?,
            Outcome::Local(bundle) => locals.push(bundle),
        }
    }
    if locals.is_empty() {
        return Ok(exit);
    }
    let run_for = args
        .run_for
        .and_then(|s| Duration::try_from_secs_f64(s).ok());
    let ports = ir
        .workloads
        .iter()
        .map(|w| (w.name.clone(), w.ports.clone()))
        .collect();
    runtime.block_on(run_locals(locals, &ports, &args.state, run_for, ui))?;
    Ok(exit)
}

/// The signing key at `path` (`--key`), or the exit after saying why it cannot be read.
pub fn signing_key(path: &Path, ui: &mut Ui<'_>) -> io::Result<Result<SigningKey, Exit>> {
    match keys::read_signing(path) {
        Ok(key) => Ok(Ok(key)),
        Err(e) => {
            ui.problem(
                &e,
                Some("--key takes the .key file `berth keys generate` wrote"),
            )?;
            Ok(Err(Exit::Trouble))
        }
    }
}

/// Signs `target`'s slice of `plan` with `key` at the next generation `store` holds for it
/// and publishes it there (a compare-and-swap, [`Location::publish_next`]): the generation,
/// the address and the signed bundle as published.
pub async fn publish(
    ir: &Ir,
    plan: &Plan,
    target: &str,
    store: &Location,
    key: &SigningKey,
    client: &reqwest::Client,
) -> Result<(u64, String, SignedBundle), StoreError> {
    let last = std::sync::Mutex::new(None);
    let sign = |generation| {
        let signed = Bundle::from_plan(ir, plan, target, generation).sign(key);
        if let Ok(mut last) = last.lock() {
            *last = Some(signed.clone());
        }
        signed
    };
    let (generation, address) = store.publish_next(client, target, &sign).await?;
    let signed = last
        .into_inner()
        .ok()
        .flatten()
        .unwrap_or_else(|| Bundle::from_plan(ir, plan, target, generation).sign(key));
    Ok((generation, address, signed))
}

/// Runs the local targets' bundles in embedded agents until Ctrl-C (or `run_for`), saying
/// where each workload's log is and at which URL those with ports listen.
async fn run_locals(
    locals: Vec<Bundle>,
    ports: &BTreeMap<String, Vec<u16>>,
    state: &std::path::Path,
    run_for: Option<Duration>,
    ui: &mut Ui<'_>,
) -> io::Result<()> {
    let mut agents: Vec<Arc<Agent>> = Vec::new();
    for mut bundle in locals {
        let config = Config {
            state_dir: state.join(&bundle.target),
            feed: Feed::Embedded,
            target: Some(bundle.target.clone()),
            cache_budget: 50 << 30,
            max_events: 100_000,
            gpu: GpuChoice::Nvml,
            gpu_interval: Duration::from_secs(1),
            gpu_process_every: 10,
            gpu_record_interval: Duration::from_secs(60),
            registry_ca: None,
            registry_auth: None,
        };
        let agent = match Agent::open(config) {
            Ok(agent) => agent,
            Err(e) => {
                let busy = matches!(
                    e,
                    crate::agent::AgentError::State(crate::agent::state::StateError::Busy { .. })
                );
                ui.problem(
                    &e,
                    busy.then_some("is another `berth apply` running this spec?"),
                )?;
                continue;
            }
        };
        // A new generation only when the workloads changed (the plan id changes with every
        // plan instant).
        let held = agent.current();
        bundle.generation = held.as_ref().map_or(0, |h| h.generation);
        if let Some(held) = held.as_ref().filter(|h| h.workloads == bundle.workloads) {
            bundle = held.clone();
        } else {
            bundle.generation += 1;
            if let Err(e) =
                agent.install(&bundle.unsigned_envelope().to_bytes(), None, bundle.clone())
            {
                ui.problem(&format_args!("target `{}`: {e}", bundle.target), None)?;
                continue;
            }
        }
        ui.status(&format_args!(
            "target `{}`: running {} workload(s) here (generation {}, state in {})",
            bundle.target,
            bundle.workloads.len(),
            bundle.generation,
            state.join(&bundle.target).display()
        ))?;
        agents.push(agent);
    }
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let tasks: Vec<_> = agents
        .iter()
        .map(|agent| {
            let mut stopped = stopped.clone();
            tokio::spawn(agent.clone().run(async move {
                let _ = stopped.changed().await;
            }))
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    for agent in &agents {
        let logs = agent.config.state_dir.join("logs");
        let status = agent.status().await;
        for w in status["workloads"].as_array().into_iter().flatten() {
            let pids: Vec<String> = w["replicas"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|r| r["pid"].as_u64().map(|p| p.to_string()))
                .collect();
            let reason = w["reason"]
                .as_str()
                .map(|r| format!(": {r}"))
                .unwrap_or_default();
            let name = w["name"].as_str().unwrap_or_default();
            let urls: String = ports
                .get(name)
                .into_iter()
                .flatten()
                .map(|p| format!(" on http://127.0.0.1:{p}"))
                .collect();
            ui.status(&format_args!(
                "  {name} {} (pids {}){reason}{urls}",
                w["state"].as_str().unwrap_or_default(),
                pids.join(", ")
            ))?;
        }
        ui.status(&format_args!(
            "  logs: {}/WORKLOAD-REPLICA.log",
            logs.display()
        ))?;
    }
    ui.status(&"press Ctrl-C to stop")?;
    ui.err.flush()?;
    match run_for {
        Some(d) => tokio::time::sleep(d).await,
        None => crate::tasks::shutdown_signal().await,
    }
    let _ = stop.send(true);
    for task in tasks {
        let _ = task.await;
    }
    ui.status(&"stopped")?;
    Ok(())
}
