//! `berth bundle export PLAN|SPEC --target NAME DIR`: an edge target's signed bundle and every
//! model artifact it needs written as an OCI image layout ([`crate::backends::edge::export`])
//! for a site the network does not reach, which runs it with `berth agent --import DIR`.
//!
//! The plan is taken and refused as `berth apply` takes it ([`super::input`]), and the bundle
//! is signed and published to the bundle store exactly as `apply` publishes it
//! ([`crate::backends::edge::apply::publish`]): the store is the one counter of a target's
//! generations, so a carried bundle and a pulled one never share a number.

use super::input::{PlanInputArgs, input_or_exit};
use crate::agent::cache::FetchError;
use crate::agent::oci::Registries;
use crate::backends::edge::bundle::store::Location;
use crate::backends::edge::bundle::{Bundle, TargetKind};
use crate::backends::edge::export::{self, ExportError};
use crate::backends::edge::{self, apply::signing_key};
use crate::report::{Exit, OutputFormat, Ui};
use crate::tasks::async_runtime;
use std::io;
use std::path::PathBuf;

#[derive(Debug, clap::Subcommand)]
pub enum BundleCommand {
    /// Write an edge target's signed bundle and every model artifact it needs as an OCI image
    /// layout (removable media for an air-gapped site: `berth agent --import DIR`).
    Export(ExportArgs),
}

#[derive(Debug, Clone, clap::Args)]
pub struct ExportArgs {
    #[command(flatten)]
    pub plan: PlanInputArgs,
    /// The directory the OCI image layout is written to (`index.json` last).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// The edge target whose bundle is exported.
    #[arg(long, value_name = "NAME")]
    pub target: String,
    /// The bundle store that counts the target's generations (as `berth apply --bundles`):
    /// the exported bundle is published there too, at the next generation.
    #[arg(long, value_name = "STORE")]
    pub bundles: String,
    /// The secret key the bundle is signed with (`berth keys generate`).
    #[arg(long, value_name = "KEY")]
    pub key: PathBuf,
    /// PEM roots to trust for OCI registries, besides the built-in ones.
    #[arg(long, value_name = "FILE")]
    pub registry_ca: Option<PathBuf>,
    /// Registry credentials in Docker's `config.json` form (`auths.<registry>.auth`).
    #[arg(long, value_name = "FILE")]
    pub registry_auth: Option<PathBuf>,
}

/// `berth bundle …`.
pub fn run(command: &BundleCommand, ui: &mut Ui<'_>) -> io::Result<Exit> {
    match command {
        BundleCommand::Export(args) => run_export(args, ui),
    }
}

fn run_export(args: &ExportArgs, ui: &mut Ui<'_>) -> io::Result<Exit> {
    let input = match input_or_exit(&args.plan, true, ui)? {
        Ok(input) => input,
        Err(exit) => return Ok(exit),
    };
    let (ir, plan) = (&input.ir, &input.plan);
    let exportable: Vec<&str> = ir
        .targets
        .iter()
        .filter(|t| TargetKind::of(&t.runtime) == TargetKind::Edge)
        .filter(|t| {
            plan.workloads
                .iter()
                .any(|w| w.placements.iter().any(|p| p.target == t.name))
        })
        .map(|t| t.name.as_str())
        .collect();
    let listed = if exportable.is_empty() {
        "the plan places nothing on an edge target".to_string()
    } else {
        format!(
            "exportable targets: {}",
            exportable
                .iter()
                .map(|t| format!("`{t}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let target = args.target.as_str();
    let kind = ir
        .targets
        .iter()
        .find(|t| t.name == target)
        .map(|t| TargetKind::of(&t.runtime));
    let refusal = match kind {
        None => Some(format!("the spec has no target `{target}`")),
        Some(TargetKind::Edge) if !exportable.contains(&target) => {
            Some(format!("the plan places nothing on target `{target}`"))
        }
        Some(TargetKind::Edge) => None,
        Some(other) => Some(format!(
            "target `{target}` is not an edge target (its runtime is {}): only edge agents run \
             carried bundles",
            match other {
                TargetKind::Local => "local",
                TargetKind::Kubernetes => "kubernetes",
                _ => "arc",
            }
        )),
    };
    if let Some(message) = refusal {
        ui.problem(&message, Some(listed.as_str()))?;
        return Ok(Exit::ErrorsFound);
    }
    // Refused before anything is published: an artifact an agent would never run.
    if let Err(e) = export::artifacts(&Bundle::from_plan(ir, plan, target, 0)) {
        ui.problem(
            &e,
            Some("give the model variant its `digest`: the agent checks every byte against it"),
        )?;
        return Ok(Exit::ErrorsFound);
    }
    let key = match signing_key(&args.key, ui)? {
        Ok(key) => key,
        Err(exit) => return Ok(exit),
    };
    let registries =
        Registries::from_files(args.registry_ca.as_deref(), args.registry_auth.as_deref());
    let (registries, client) = match super::fetch::clients(registries, ui)? {
        Ok(clients) => clients,
        Err(exit) => return Ok(exit),
    };
    let Some(runtime) = async_runtime(ui)? else {
        return Ok(Exit::Trouble);
    };
    let store = Location::parse(&args.bundles);
    let published = runtime.block_on(edge::apply::publish(
        ir, plan, target, &store, &key, &client,
    ));
    let (generation, address, signed) = match published {
        Ok(published) => published,
        Err(e) => {
            ui.problem(
                &e,
                Some("the store counts the target's generations; check that it can be written"),
            )?;
            return Ok(Exit::Trouble);
        }
    };
    ui.status(&format_args!(
        "target `{target}`: bundle generation {generation} published to {address}"
    ))?;
    let bundle = Bundle::from_plan(ir, plan, target, generation);
    let exported = runtime.block_on(export::export(
        &args.dir, &signed, &bundle, client, registries,
    ));
    // Published to the store whatever became of the export: the audit trail says both.
    let warning = crate::audit::record(crate::audit::Entry {
        actor: crate::audit::local_actor(),
        action: crate::audit::Action::Applied,
        plan_id: plan.plan_id.clone(),
        target: Some(target.to_string()),
        outcome: match &exported {
            Ok(_) => "ok".to_string(),
            Err(e) => format!("failed: the export to `{}`: {e}", args.dir.display()),
        },
        detail: serde_json::json!({
            "runtime": "edge",
            "generation": generation,
            "published": address,
            "exported_to": args.dir.display().to_string(),
        }),
    });
    if let Some(warning) = warning {
        ui.status(&warning)?;
    }
    let exported = match exported {
        Ok(exported) => exported,
        Err(e) => {
            let (hint, exit) = match &e {
                ExportError::NoDigest { .. }
                | ExportError::Fetch(
                    FetchError::Mismatch { .. }
                    | FetchError::Refused { .. }
                    | FetchError::BadDigest(_)
                    | FetchError::Unsupported(_),
                ) => (
                    "the artifact is not the one the plan pinned: the export is not complete \
                     (no `index.json` was written)",
                    Exit::ErrorsFound,
                ),
                ExportError::Io { .. } => (
                    "check the free space and permissions of DIR; the export is not complete \
                     (no new `index.json` was written)",
                    Exit::Trouble,
                ),
                _ => (
                    "check the artifact's address and the registry's credentials; what was \
                     downloaded is kept in DIR and a rerun resumes",
                    Exit::Trouble,
                ),
            };
            ui.problem(&e, Some(hint))?;
            return Ok(exit);
        }
    };
    for a in &exported.artifacts {
        let how = if a.fetched {
            "fetched"
        } else {
            "already on the media"
        };
        ui.status(&format_args!(
            "  `{}` ({}, {} bytes): {how}",
            a.uri, a.digest, a.bytes
        ))?;
    }
    ui.status(&format_args!(
        "wrote `{}`: generation {generation} of `{target}` and {} artifact(s), {} bytes \
         (run it there with `berth agent --import {}`)",
        args.dir.display(),
        exported.artifacts.len(),
        exported.bytes,
        args.dir.display()
    ))?;
    if ui.output == OutputFormat::Json {
        let artifacts: Vec<serde_json::Value> = exported
            .artifacts
            .iter()
            .map(|a| {
                serde_json::json!({
                    "artifact": a.uri, "digest": a.digest, "bytes": a.bytes, "fetched": a.fetched,
                })
            })
            .collect();
        let doc = serde_json::json!({
            "target": target,
            "generation": generation,
            "published": address,
            "dir": args.dir.display().to_string(),
            "artifacts": artifacts,
            "bytes": exported.bytes,
        });
        writeln!(ui.out, "{doc}")?;
    }
    Ok(Exit::Clean)
}
