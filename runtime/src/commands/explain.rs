//! `berth explain SPEC_DIR WORKLOAD [TARGET] [--at RFC3339] [--live] [--what-if FILE]`: why a
//! workload went where it went and why not elsewhere, with the source excerpts of both sides
//! of each decision (the requirement in the workload, placement or policy; the offer in the
//! target), rendered like diagnostics.
//!
//! It plans the spec as `berth plan` does (the same instant gives the same decisions), then
//! reads the plan; a target a large estate's plan only counts (`others`) is explained by the
//! engine, from the same solve (`driver::plan_asking`). With `--exact`, the plan is the exact
//! mode's, as `berth plan --exact` makes it. With `--what-if`, the spec is
//! the one the what-if file makes of it, as `berth plan --what-if` plans it, and excerpts
//! point into the what-if file where its changes decided.

use super::spec::{self, Spec};
use crate::report::{Exit, OutputFormat, Ui};
use berth_compiler::diagnostics::Label;
use berth_compiler::diagnostics::render::{Excerpt, render_excerpts};
use berth_compiler::driver::suggest;
use berth_compiler::driver::units::{count, duration};
use berth_compiler::driver::{self, Planned};
use berth_compiler::ir::TargetId;
use berth_compiler::plan::{Placement, Rejection, SourceRef, WorkloadPlan};
use berth_compiler::source::{FileId, Span};
use serde_json::json;
use std::io;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct ExplainArgs {
    /// The spec: a directory whose `.berth` files form one spec (or a single file).
    #[arg(value_name = "SPEC_DIR")]
    pub spec: PathBuf,
    /// The workload to explain.
    pub workload: String,
    /// Only this target: why the workload runs there, or why not.
    pub target: Option<String>,
    /// The plan instant, RFC 3339, as for `berth plan`. Default: now.
    #[arg(long, value_name = "RFC3339")]
    pub at: Option<String>,
    /// Plan against the clusters' live allocation, as `berth plan --live` does.
    #[arg(long)]
    pub live: bool,
    /// Explain the plan of the spec as this what-if file changes it (`berth plan --what-if`).
    #[arg(long, value_name = "FILE")]
    pub what_if: Option<PathBuf>,
    #[command(flatten)]
    pub exact: spec::ExactArgs,
}

/// Runs `berth explain`.
pub fn run(args: &ExplainArgs, ui: &mut Ui<'_>) -> io::Result<Exit> {
    let assigner = match args.exact.assigner(ui)? {
        Ok(assigner) => assigner,
        Err(exit) => return Ok(exit),
    };
    let question = spec::Question {
        why_not: args.target.as_deref().map(|t| (args.workload.as_str(), t)),
        assigner,
    };
    let spec::SpecPlanned {
        spec,
        planned,
        why_not: engine_rejection,
        what_if: changes,
        exact,
        ..
    } = match spec::load_and_plan(
        &args.spec,
        args.at.as_deref(),
        question,
        args.what_if.as_deref(),
        args.live,
        ui,
    )? {
        Ok(done) => done,
        Err(exit) => return Ok(exit),
    };
    // As for `berth plan --exact`: how the replicas were assigned, on stderr.
    if let Some(outcome) = &exact {
        writeln!(ui.err, "{outcome}")?;
    }
    let names = planned.plan.workloads.iter().map(|w| w.workload.as_str());
    let Some(wp) = planned
        .plan
        .workloads
        .iter()
        .find(|w| w.workload == args.workload)
    else {
        return unknown(ui, "workload", &args.workload, names);
    };
    let what_if = args.what_if.as_ref().map(|p| p.display().to_string());
    let explainer = Explainer {
        spec: &spec,
        planned: &planned,
        engine_rejection,
        workload: wp,
        what_if: what_if.as_deref(),
    };
    match &args.target {
        None => explainer.whole(ui),
        Some(target) => {
            let Some(t) = planned.ir.target_by_name(target) else {
                if let (Some((base, _)), Some(file)) = (&changes, explainer.what_if) {
                    // Not in the changed spec, but in the spec itself: the what-if file took
                    // it offline, which is the answer.
                    let own = driver::compile_spec(&spec.sources, base);
                    if own.ir.is_some_and(|ir| ir.target_by_name(target).is_some()) {
                        return explainer.offline(target, file, ui);
                    }
                }
                let names = planned.ir.targets.iter().map(|t| t.name.as_str());
                return unknown(ui, "target", target, names);
            };
            explainer.one(t, ui)
        }
    }
}

fn unknown<'a>(
    ui: &mut Ui<'_>,
    kind: &str,
    name: &str,
    names: impl Iterator<Item = &'a str> + Clone,
) -> io::Result<Exit> {
    let hint = match suggest(name, names.clone()) {
        Some(s) => format!("did you mean `{s}`?"),
        None => {
            let all: Vec<String> = names.map(|n| format!("`{n}`")).collect();
            format!("the spec's {kind}s: {}", all.join(", "))
        }
    };
    ui.problem(
        &format_args!("the spec has no {kind} `{name}`"),
        Some(&hint),
    )?;
    Ok(Exit::ErrorsFound)
}

struct Explainer<'a> {
    spec: &'a Spec,
    planned: &'a Planned,
    /// Why the target asked about holds no replica, from the solve that made the plan.
    engine_rejection: Option<Rejection>,
    workload: &'a WorkloadPlan,
    /// The what-if file the spec was planned with (`--what-if`), as given.
    what_if: Option<&'a str>,
}

impl Explainer<'_> {
    /// Every placement, every listed rejection, and what is missing.
    fn whole(&self, ui: &mut Ui<'_>) -> io::Result<Exit> {
        let w = self.workload;
        if ui.output == OutputFormat::Json {
            let doc = json!({ "at": self.planned.plan.at, "what_if": self.what_if, "workload": w });
            writeln!(ui.out, "{doc}")?;
            return Ok(Exit::Clean);
        }
        writeln!(ui.out, "{}\n", self.headline())?;
        let placed: Vec<Excerpt> = w.placements.iter().map(|p| self.placed(p)).collect();
        let sources = &self.spec.shown;
        ui.out
            .write_all(render_excerpts("Placed", &placed, sources, ui.color).as_bytes())?;
        if let Some(u) = &w.unplaced {
            let mut notes = Vec::new();
            if let Some(hint) = &u.hint {
                notes.push(format!("to place it: {hint}"));
            }
            if let Some(window) = &u.held_by_window {
                notes.push(format!(
                    "held back by window `{window}` at the plan instant"
                ));
            }
            let missing = Excerpt {
                message: format!("{} missing: {}", replicas(u.missing_replicas), u.message),
                labels: Vec::new(),
                notes,
            };
            ui.out
                .write_all(render_excerpts("Unplaced", &[missing], sources, ui.color).as_bytes())?;
        }
        let rejected: Vec<Excerpt> = w.rejected.iter().map(|r| self.rejected(r)).collect();
        ui.out
            .write_all(render_excerpts("Rejected", &rejected, sources, ui.color).as_bytes())?;
        Ok(Exit::Clean)
    }

    /// Why the workload runs on target `t`, or why not.
    fn one(&self, t: TargetId, ui: &mut Ui<'_>) -> io::Result<Exit> {
        let w = self.workload;
        let name = &self.planned.ir.targets[t.index()].name;
        let placements: Vec<&Placement> =
            w.placements.iter().filter(|p| &p.target == name).collect();
        let rejection = if placements.is_empty() {
            self.rejection_of(t)
        } else {
            None
        };
        if ui.output == OutputFormat::Json {
            let doc = json!({
                "at": self.planned.plan.at,
                "what_if": self.what_if,
                "workload": w.workload,
                "target": name,
                "placements": placements,
                "rejection": rejection,
            });
            writeln!(ui.out, "{doc}")?;
            return Ok(Exit::Clean);
        }
        writeln!(ui.out, "{}\n", self.headline())?;
        let sources = &self.spec.shown;
        if !placements.is_empty() {
            let placed: Vec<Excerpt> = placements.iter().map(|p| self.placed(p)).collect();
            ui.out
                .write_all(render_excerpts("Placed", &placed, sources, ui.color).as_bytes())?;
        } else if let Some(r) = &rejection {
            ui.out.write_all(
                render_excerpts("Rejected", &[self.rejected(r)], sources, ui.color).as_bytes(),
            )?;
        }
        Ok(Exit::Clean)
    }

    /// Why the workload is not on `target`, which the what-if file `file` takes offline.
    fn offline(&self, target: &str, file: &str, ui: &mut Ui<'_>) -> io::Result<Exit> {
        if ui.output == OutputFormat::Json {
            let doc = json!({
                "at": self.planned.plan.at,
                "what_if": file,
                "workload": self.workload.workload,
                "target": target,
                "placements": [],
                "rejection": null,
                "offline": true,
            });
            writeln!(ui.out, "{doc}")?;
            return Ok(Exit::Clean);
        }
        writeln!(ui.out, "{}\n", self.headline())?;
        writeln!(
            ui.out,
            "Not placed: `{target}`: the what-if file `{file}` takes it offline, so the changed spec has no such target"
        )?;
        Ok(Exit::Clean)
    }

    /// `vision_inspect: placed, 2 of 2 replicas, 21.60 a day (plan at 2025-06-04T08:00:00Z)`.
    fn headline(&self) -> String {
        let w = self.workload;
        let placed: u32 = w.placements.iter().map(|p| p.replicas).sum();
        let status = match w.status {
            berth_compiler::plan::WorkloadStatus::Placed => "placed",
            berth_compiler::plan::WorkloadStatus::Partial => "partially placed",
            berth_compiler::plan::WorkloadStatus::Unplaced => "not placed",
        };
        let mut line = format!(
            "workload `{}`: {status}, {placed} of {} on {} target(s), {} a day (plan at {})",
            w.workload,
            replicas(w.replicas),
            w.placements.len(),
            w.cost_per_day,
            self.planned.plan.at
        );
        if let Some(a) = &w.approval {
            line.push_str(&format!(
                "; awaiting approval by {} (above {} a day, policy `{}`)",
                a.approvers.join(", "),
                a.threshold,
                a.policy
            ));
        }
        if let Some(file) = self.what_if {
            line.push_str(&format!("; with the changes of `{file}`"));
        }
        line
    }

    /// The listed rejection of `t`, or the engine's reason for a target the plan only counts.
    fn rejection_of(&self, t: TargetId) -> Option<Rejection> {
        let name = &self.planned.ir.targets[t.index()].name;
        if let Some(r) = self.workload.rejected.iter().find(|r| &r.target == name) {
            let mut r = r.clone();
            r.others = 0;
            return Some(r);
        }
        self.engine_rejection.clone()
    }

    fn placed(&self, p: &Placement) -> Excerpt {
        let ir = &self.planned.ir;
        let mut what = replicas(p.replicas);
        if let Some(pool) = &p.pool {
            let accelerator = p.accelerator.as_deref().unwrap_or("?");
            what.push_str(&format!(
                ", pool `{pool}` ({} × {accelerator} each)",
                p.gpus_per_replica
            ));
        }
        if let Some(v) = &p.variant {
            what.push_str(&format!(", variant `{}` of `{}`", v.variant, v.model));
        }
        let mut notes = Vec::new();
        if !p.score.is_empty() {
            let terms: Vec<String> = p
                .score
                .iter()
                .map(|s| format!("{} {}", s.objective, score_value(&s.objective, s.value)))
                .collect();
            notes.push(format!(
                "ranked by its preferences (lower is better): {}",
                terms.join(", ")
            ));
        }
        for d in &p.data {
            notes.push(format!(
                "data `{}`: {} ({}{}), {} away",
                d.name,
                d.dataset,
                d.locality,
                d.endpoint
                    .as_ref()
                    .map_or_else(String::new, |e| format!(", {e}")),
                duration(d.latency_ns)
            ));
        }
        if !p.services.is_empty() {
            let services: Vec<String> = p
                .services
                .iter()
                .map(|s| format!("{} ({})", s.service, s.maturity))
                .collect();
            notes.push(format!("services: {}", services.join(", ")));
        }
        notes.push(format!("costs {} a day", p.cost_per_day));
        if let Some(note) = self.fallback_note(&p.target) {
            notes.push(note);
        }
        let mut labels = Vec::new();
        if let Some(t) = ir.target_by_name(&p.target) {
            let spans = ir.spans.targets.get(t.index());
            let pool_span = p
                .pool
                .as_ref()
                .and_then(|pool| spans?.fields.get(&format!("pool.{pool}")).copied());
            if let Some(span) = pool_span.or_else(|| spans.map(|s| s.name)) {
                labels.push(label(span, "runs here"));
            }
        }
        Excerpt {
            message: format!("`{}`: {what}", p.target),
            labels,
            notes,
        }
    }

    /// For a placement on a fallback: which fallback it is, and why the targets ranked
    /// before it could not take the replicas (the earlier fallbacks one by one).
    fn fallback_note(&self, target: &str) -> Option<String> {
        let ir = &self.planned.ir;
        let w = ir.workload_by_name(&self.workload.workload)?;
        let fallback = &ir.workloads[w.index()].placement.fallback;
        let t = ir.target_by_name(target)?;
        let position = fallback.iter().position(|f| *f == t)?;
        let mut why = vec![String::from(
            "the targets not listed as fallbacks could not take them all",
        )];
        for earlier in &fallback[..position] {
            let name = &ir.targets[earlier.index()].name;
            let reason = match self.workload.rejected.iter().find(|r| &r.target == name) {
                Some(r) => r.message.clone(),
                None => {
                    let held: u32 = self
                        .workload
                        .placements
                        .iter()
                        .filter(|p| &p.target == name)
                        .map(|p| p.replicas)
                        .sum();
                    format!("holds {} and can take no more", replicas(held))
                }
            };
            why.push(format!("`{name}`: {reason}"));
        }
        Some(format!(
            "fallback {} of {}, used because the targets ranked before it could not take the replicas: {}",
            position + 1,
            fallback.len(),
            why.join("; ")
        ))
    }

    fn rejected(&self, r: &Rejection) -> Excerpt {
        let mut labels = Vec::new();
        if let Some(span) = r.requirement.as_ref().and_then(|s| self.span(s)) {
            labels.push(label(span, "required here"));
        }
        if let Some(span) = r.offer.as_ref().and_then(|s| self.span(s)) {
            labels.push(label(span, "offered here"));
        }
        let stage = match r.stage {
            berth_compiler::plan::RejectionStage::Eligibility => "technically impossible",
            berth_compiler::plan::RejectionStage::Policy => "not permitted by policy",
            berth_compiler::plan::RejectionStage::Assignment => "not used by the assignment",
        };
        let mut notes = vec![format!("{stage} (`{}`)", r.reason)];
        if r.others > 0 {
            notes.push(format!(
                "{} further target(s) rejected for the same reason are not listed; `berth explain {} TARGET` explains any of them",
                r.others, self.workload.workload
            ));
        }
        Excerpt {
            message: format!("`{}`: {}", r.target, r.message),
            labels,
            notes,
        }
    }

    /// A plan's source reference back to a span of the spec (files are named alike).
    fn span(&self, s: &SourceRef) -> Option<Span> {
        let file = self
            .spec
            .sources
            .files()
            .iter()
            .find(|f| f.name == s.file)?;
        Some(Span::new(FileId(file.id.0), s.start, s.end))
    }
}

fn label(span: Span, message: &str) -> Label {
    Label {
        span,
        message: message.into(),
    }
}

fn replicas(n: u32) -> String {
    count(u64::from(n), "replica")
}

/// A score term for people: money for `cost`, a duration for `data_latency`.
fn score_value(objective: &str, value: i64) -> String {
    match objective {
        "cost" => format!("{} a day", berth_compiler::ir::Money(value)),
        "data_latency" => duration(value.max(0) as u64),
        _ => value.to_string(),
    }
}
