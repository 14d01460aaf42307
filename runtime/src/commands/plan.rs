//! `berth plan SPEC_DIR [--at RFC3339] [--live] [-o FILE | --what-if FILE]`: compile, place
//! (with `--live`, against the clusters' live allocation: [`crate::backends::k8s::live`]),
//! verify, and print or save the plan (with `--what-if`, what changes from it to the plan of the spec
//! as the what-if file changes it: [`what_if`]). Exit 0 when every replica is placed; 1 when the plan is infeasible (it is still
//! printed and written: infeasibility is an answer), when the spec has errors (nothing is
//! written), when the verifier rejects the engine's plan (never written), or when `-o` names
//! a file berth will not write over (`files::output`); 2 for usage and I/O problems.

use super::{plan_layout, spec, table, what_if};
use crate::files::output;
use crate::report::{Exit, OutputFormat, Ui};
use berth_compiler::diagnostics::render::render_terminal_limited;
use berth_compiler::plan::Plan;
use std::io;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// The spec: a directory whose `.berth` files form one spec (or a single file).
    #[arg(value_name = "SPEC_DIR")]
    pub spec: PathBuf,
    /// The plan instant, RFC 3339 (`2025-06-04T10:00:00+02:00`): policy windows are
    /// evaluated at it. Default: now.
    #[arg(long, value_name = "RFC3339")]
    pub at: Option<String>,
    /// Also save the plan as JSON in FILE (written atomically; a regular file only, never one
    /// of the spec's sources), for `berth verify` and apply.
    #[arg(short = 'o', long = "out", value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Plan the spec as changed by FILE too (a what-if file: targets offline, pools, quotas,
    /// replicas, …), and print what changes from the plan to that one instead of the plan.
    #[arg(long, value_name = "FILE", conflicts_with = "out")]
    pub what_if: Option<PathBuf>,
    /// A plan saved before (the one applied, say): `--output markdown` then also says what
    /// moves from it, what is newly placed or lost, and the cost before and after.
    #[arg(long, value_name = "FILE", conflicts_with = "what_if")]
    pub previous: Option<PathBuf>,
    #[command(flatten)]
    pub exact: spec::ExactArgs,
    /// Place against the clusters as they are: each Kubernetes pool holds no more than its
    /// nodes can allocate less the GPUs held by pods berth does not manage for this spec
    /// (never more than the spec declares); a cluster that cannot be read is named on
    /// stderr and its targets keep their declared capacity.
    #[arg(long)]
    pub live: bool,
}

/// Runs `berth plan`.
pub fn run(args: &PlanArgs, ui: &mut Ui<'_>) -> io::Result<Exit> {
    let assigner = match args.exact.assigner(ui)? {
        Ok(assigner) => assigner,
        Err(exit) => return Ok(exit),
    };
    let question = spec::Question {
        why_not: None,
        assigner,
    };
    let spec::SpecPlanned {
        spec,
        planned,
        exact,
        live,
        ..
    } = match spec::load_and_plan(
        &args.spec,
        args.at.as_deref(),
        question,
        None,
        args.live,
        ui,
    )? {
        Ok(done) => done,
        Err(exit) => return Ok(exit),
    };
    // How the replicas were assigned goes to stderr in both modes, as warnings do: a pipeline
    // asking for `--exact` must see when it fell back to the heuristic.
    if let Some(outcome) = &exact {
        writeln!(ui.err, "{outcome}")?;
    }
    // Warnings go to stderr in both modes: stdout holds the plan alone.
    if !planned.warnings.is_empty() {
        let text =
            render_terminal_limited(&planned.warnings, &spec.shown, ui.color, ui.error_limit);
        ui.err.write_all(text.as_bytes())?;
    }
    if let Some(what_if) = &args.what_if {
        return what_if::run(spec, &planned.plan, what_if, &live, assigner, ui);
    }
    let plan = &planned.plan;
    // The JSON text is held only when it is saved; printed alone, it streams.
    let json = args.out.as_ref().map(|_| plan_json(plan));
    if let (Some(out), Some(json)) = (&args.out, &json)
        && let Err(e) = output::replace(out, json.as_bytes(), &spec.paths)
    {
        ui.problem(&e, Some(e.hint()))?;
        ui.status(&"the plan was not saved")?;
        return Ok(e.exit());
    }
    if let Some(out) = &args.out {
        let mut detail = serde_json::json!({
            "file": out.display().to_string(),
            "at": plan.at,
            "feasible": plan.feasible,
            "source_digest": plan.source_digest,
        });
        // With `--live`, the figures the plan was made against (the plan keeps only the
        // capacity it assumed): `{"target/pool": {"allocatable": 8, "held": 4}}`.
        if args.live {
            let pools: serde_json::Map<String, serde_json::Value> = live
                .iter()
                .filter_map(|((target, pool), capacity)| {
                    let read = capacity.read?;
                    let figures = serde_json::json!({
                        "allocatable": read.allocatable,
                        "held": read.held,
                    });
                    Some((format!("{target}/{pool}"), figures))
                })
                .collect();
            detail["live"] = pools.into();
        }
        let entry = crate::audit::Entry {
            actor: crate::audit::local_actor(),
            action: crate::audit::Action::PlanSaved,
            plan_id: plan.plan_id.clone(),
            target: None,
            outcome: "ok".into(),
            detail,
        };
        crate::audit::record_or_warn(entry, ui)?;
    }
    match ui.output {
        OutputFormat::Json => match &json {
            Some(json) => ui.out.write_all(json.as_bytes())?,
            None => write_plan_json(plan, ui.out)?,
        },
        OutputFormat::Markdown => {
            let mut text = super::markdown::plan(plan);
            if let Some(previous) = &args.previous {
                let before = match super::plan_diff::read_intact(previous, ui)? {
                    Ok(before) => before,
                    Err(exit) => return Ok(exit),
                };
                let diff = berth_compiler::plan::diff::diff(&before, plan);
                text.push('\n');
                text.push_str(&super::markdown::plan_diff(&diff));
            }
            ui.out.write_all(text.as_bytes())?;
            ui.status(&table::summary(plan))?;
        }
        // `cli` refuses SARIF for `plan`; people's tables otherwise.
        OutputFormat::Human | OutputFormat::Sarif => {
            ui.out.write_all(table::render(plan).as_bytes())?;
            let mut line = table::summary(plan);
            if let Some(out) = &args.out {
                line.push_str(&format!("; written to `{}`", out.display()));
            }
            ui.status(&line)?;
        }
    }
    Ok(if plan.feasible {
        Exit::Clean
    } else {
        Exit::ErrorsFound
    })
}

/// [`plan_json`] written to `out` as it is serialised (the same bytes), without holding the
/// text: a dense fleet's plan is tens of megabytes.
fn write_plan_json(plan: &Plan, out: &mut dyn io::Write) -> io::Result<()> {
    plan_layout::to_writer(io::BufWriter::with_capacity(1 << 16, out), plan)
}

/// The plan as saved: two-space indentation, objects and lists of plain values on one line
/// when short ([`plan_layout`]), and a final newline (`docs/plan-format.md`).
pub fn plan_json(plan: &Plan) -> String {
    let mut json = Vec::new();
    // Serialising the plan's plain structs into memory cannot fail.
    let _ = plan_layout::to_writer(&mut json, plan);
    String::from_utf8(json).unwrap_or_default()
}
