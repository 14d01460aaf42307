//! `berth render`, `berth apply`, `berth diff`, `berth approve` and `berth status`: the plan
//! to apply (a saved plan with its spec, or a spec planned now), the refusals that keep a
//! stale, unapproved or unverified plan off the clusters, and dispatch per target runtime.
//!
//! Kubernetes targets go to [`crate::k8s`], Arc targets to [`crate::arc`], edge and `local`
//! targets to [`crate::edge_apply`] (after the clusters: local targets run in the foreground).

use crate::cli::Exit;
use crate::files::{self, FsReader};
use crate::k8s;
use crate::report::{OutputFormat, Ui};
use berth_compiler::driver;
use berth_compiler::ir::Ir;
use berth_compiler::plan::Plan;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// Where the plan comes from (shared by every command here).
#[derive(Debug, Clone, clap::Args)]
pub struct PlanArgs {
    /// A saved plan (`plan.json`, applied with `--spec`) or a spec directory planned now.
    #[arg(value_name = "PLAN|SPEC")]
    pub input: PathBuf,
    /// The spec a saved plan was made from; its digest must match the plan's.
    #[arg(long, value_name = "DIR")]
    pub spec: Option<PathBuf>,
}

#[derive(Debug, Clone, clap::Args)]
pub struct RenderArgs {
    #[command(flatten)]
    pub plan: PlanArgs,
    /// Directory the YAML files are written to (`CONTEXT/NAMESPACE.yaml`).
    #[arg(short = 'o', long = "out", value_name = "DIR")]
    pub out: PathBuf,
}

#[derive(Debug, Clone, clap::Args)]
pub struct ApplyArgs {
    #[command(flatten)]
    pub plan: PlanArgs,
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
    #[command(flatten)]
    pub edge: crate::edge_apply::EdgeArgs,
}

#[derive(Debug, Clone, clap::Args)]
pub struct DiffArgs {
    #[command(flatten)]
    pub plan: PlanArgs,
}

#[derive(Debug, Clone, clap::Args)]
pub struct ApproveArgs {
    /// The saved plan to approve.
    #[arg(value_name = "PLAN")]
    pub plan: PathBuf,
    /// Who approves (must be one of the approvers the policy names, when it names any).
    #[arg(long, value_name = "NAME")]
    pub by: String,
}

#[derive(Debug, Clone, clap::Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub plan: PlanArgs,
    #[command(flatten)]
    pub edge: crate::edge_status::EdgeStatusArgs,
}

/// A plan and the IR of its spec, ready to render.
pub struct PlanInput {
    pub ir: Ir,
    pub plan: Plan,
    /// The saved plan's path (where its approval file lives); `None` for a spec planned now.
    pub path: Option<PathBuf>,
}

/// Why there is no plan to work with (exit 2: nothing was checked).
#[derive(Debug)]
pub enum InputProblem {
    Load(Vec<files::LoadError>),
    NotOneSpec(usize),
    ReadPlan { path: PathBuf, error: String },
    NeedsSpec(PathBuf),
}

/// Why a plan is not applied (exit 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The spec has errors.
    SpecErrors(usize),
    /// The spec changed since the plan was made.
    DigestMismatch { recorded: String, computed: String },
    /// The verifier rejects the plan.
    Unverified(Vec<String>),
    /// Workloads whose placements await approval: `(workload, policy)`.
    AwaitingApproval(Vec<(String, String)>),
    /// Not one replica of the plan is placed: applying it would change nothing and say so
    /// as if all were well.
    NothingPlaced,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::SpecErrors(n) => write!(f, "the spec has {n} error(s); nothing is applied"),
            Refusal::DigestMismatch { recorded, computed } => write!(
                f,
                "the spec changed since the plan was made (plan `{recorded}`, spec `{computed}`)"
            ),
            Refusal::Unverified(v) => {
                write!(f, "the plan fails verification: {}", v.join("; "))
            }
            Refusal::AwaitingApproval(w) => {
                let list: Vec<String> = w
                    .iter()
                    .map(|(w, p)| format!("`{w}` (policy `{p}`)"))
                    .collect();
                write!(f, "placements await approval: {}", list.join(", "))
            }
            Refusal::NothingPlaced => write!(f, "the plan places no replica; nothing is applied"),
        }
    }
}

impl Refusal {
    fn hint(&self) -> &'static str {
        match self {
            Refusal::SpecErrors(_) => "run `berth check` on the spec",
            Refusal::DigestMismatch { .. } => "plan again from the current spec",
            Refusal::Unverified(_) => "plan again; a plan that fails verification is never applied",
            Refusal::AwaitingApproval(_) => {
                "save the plan, then `berth approve PLAN --by NAME` and apply the saved plan"
            }
            Refusal::NothingPlaced => {
                "`berth explain SPEC WORKLOAD` says why each target was rejected"
            }
        }
    }
}

/// What an approval file holds: who approved which plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRecord {
    /// Always `berth.approval/v1`.
    pub format: String,
    /// The approved plan's id: the approval is void for any other plan.
    pub plan_id: String,
    pub approved_by: String,
    /// RFC 3339, UTC.
    pub approved_at: String,
    /// The workloads that awaited approval.
    pub workloads: Vec<String>,
}

const APPROVAL_FORMAT: &str = "berth.approval/v1";

/// The approval file of a saved plan: `plan.json` → `plan.approval.json`.
pub fn approval_path(plan: &Path) -> PathBuf {
    plan.with_extension("approval.json")
}

/// Loads the plan to work with. A saved plan must come with its spec (`--spec`); its digest
/// and verification are checked later by [`refusals`].
pub fn load_input(args: &PlanArgs) -> Result<Result<PlanInput, Refusal>, InputProblem> {
    let is_plan_file = args.input.is_file()
        && args
            .input
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    if !is_plan_file {
        return plan_spec(&args.input);
    }
    let text = std::fs::read_to_string(&args.input).map_err(|e| InputProblem::ReadPlan {
        path: args.input.clone(),
        error: e.to_string(),
    })?;
    let plan: Plan = serde_json::from_str(&text).map_err(|e| InputProblem::ReadPlan {
        path: args.input.clone(),
        error: e.to_string(),
    })?;
    let Some(spec) = &args.spec else {
        return Err(InputProblem::NeedsSpec(args.input.clone()));
    };
    let sources = spec_sources(spec)?;
    let checked = match driver::reverify(&sources, &plan) {
        Ok(checked) => checked,
        Err(driver::ReverifyFailure::Spec(diagnostics)) => {
            let errors = diagnostics.iter().filter(|d| d.is_error()).count();
            return Ok(Err(Refusal::SpecErrors(errors)));
        }
    };
    if !checked.digest_matches(&plan) {
        return Ok(Err(Refusal::DigestMismatch {
            recorded: plan.source_digest.clone(),
            computed: checked.source_digest,
        }));
    }
    let verdict = match checked.verdict {
        Some(verdict) => verdict.map_err(|v| v.iter().map(|v| v.to_string()).collect()),
        None => Err(vec![format!(
            "the plan instant `{}` is not a time",
            plan.at
        )]),
    };
    if let Err(violations) = verdict {
        return Ok(Err(Refusal::Unverified(violations)));
    }
    let ir = checked.ir;
    Ok(Ok(PlanInput {
        ir,
        plan,
        path: Some(args.input.clone()),
    }))
}

/// The one spec at `path`, its files named relative to it (what `berth plan` digests).
fn spec_sources(path: &Path) -> Result<berth_compiler::source::SourceMap, InputProblem> {
    let loaded = files::load(&[path.to_path_buf()], &FsReader).map_err(InputProblem::Load)?;
    let specs = loaded.specs();
    if specs.len() != 1 {
        return Err(InputProblem::NotOneSpec(specs.len()));
    }
    Ok(crate::planning::spec::relative_sources(path, &loaded))
}

fn plan_spec(path: &Path) -> Result<Result<PlanInput, Refusal>, InputProblem> {
    let sources = spec_sources(path)?;
    match driver::plan(&sources, crate::planning::spec::now()) {
        Ok(planned) => Ok(Ok(PlanInput {
            ir: planned.ir,
            plan: planned.plan,
            path: None,
        })),
        Err(driver::PlanFailure::Spec(diags)) => Ok(Err(Refusal::SpecErrors(
            diags.iter().filter(|d| d.is_error()).count(),
        ))),
        Err(driver::PlanFailure::Unverified { violations, .. }) => Ok(Err(Refusal::Unverified(
            violations.iter().map(|v| v.to_string()).collect(),
        ))),
    }
}

/// Placements awaiting an approval this plan does not have.
pub fn unapproved(input: &PlanInput) -> Option<Refusal> {
    let waiting: Vec<(String, String)> = input
        .plan
        .workloads
        .iter()
        .filter_map(|w| {
            w.approval
                .as_ref()
                .map(|a| (w.workload.clone(), a.policy.clone()))
        })
        .collect();
    if waiting.is_empty() {
        return None;
    }
    let approved = input
        .path
        .as_deref()
        .and_then(|p| std::fs::read_to_string(approval_path(p)).ok())
        .and_then(|text| serde_json::from_str::<ApprovalRecord>(&text).ok())
        .filter(|r| r.format == APPROVAL_FORMAT && r.plan_id == input.plan.plan_id);
    let missing: Vec<(String, String)> = waiting
        .into_iter()
        .filter(|(w, _)| !approved.as_ref().is_some_and(|r| r.workloads.contains(w)))
        .collect();
    (!missing.is_empty()).then_some(Refusal::AwaitingApproval(missing))
}

fn input_problem(problem: &InputProblem, ui: &mut Ui<'_>) -> io::Result<Exit> {
    match problem {
        InputProblem::Load(errors) => {
            for error in errors {
                ui.problem(error, Some(error.hint()))?;
            }
        }
        InputProblem::NotOneSpec(n) => ui.problem(
            &format_args!("this command takes one spec, but the path holds {n}"),
            Some("name one spec directory (its files form one spec)"),
        )?,
        InputProblem::ReadPlan { path, error } => ui.problem(
            &format_args!("cannot read the plan `{}`: {error}", path.display()),
            Some("a plan is the JSON `berth plan -o FILE` writes"),
        )?,
        InputProblem::NeedsSpec(path) => ui.problem(
            &format_args!("the saved plan `{}` needs its spec", path.display()),
            Some("add `--spec DIR`: its digest is checked against the plan's"),
        )?,
    }
    Ok(Exit::Trouble)
}

fn refused(refusal: &Refusal, ui: &mut Ui<'_>) -> io::Result<Exit> {
    ui.problem(refusal, Some(refusal.hint()))?;
    if ui.output == OutputFormat::Json {
        let doc = serde_json::json!({ "refused": refusal.to_string() });
        writeln!(ui.out, "{doc}")?;
    }
    Ok(Exit::ErrorsFound)
}

/// Loads the input and applies the refusals every command shares; `approval` also refuses
/// placements awaiting approval.
fn input_or_exit(
    args: &PlanArgs,
    approval: bool,
    ui: &mut Ui<'_>,
) -> io::Result<Result<PlanInput, Exit>> {
    let input = match load_input(args) {
        Err(problem) => return input_problem(&problem, ui).map(Err),
        Ok(Err(refusal)) => return refused(&refusal, ui).map(Err),
        Ok(Ok(input)) => input,
    };
    if approval && let Some(refusal) = unapproved(&input) {
        return refused(&refusal, ui).map(Err);
    }
    Ok(Ok(input))
}

/// Refuses a plan without a single placed replica, and names each workload left short
/// (applied anyway: a plan short at peak hours still runs what fits).
fn placed_or_refused(input: &PlanInput, ui: &mut Ui<'_>) -> io::Result<Option<Exit>> {
    let workloads = &input.plan.workloads;
    if !workloads.is_empty() && workloads.iter().all(|w| w.placements.is_empty()) {
        return refused(&Refusal::NothingPlaced, ui).map(Some);
    }
    for w in workloads {
        if let Some(short) = &w.unplaced {
            ui.status(&format_args!(
                "warning: `{}`: {} of {} replica(s) not placed: {}",
                w.workload, short.missing_replicas, w.replicas, short.message
            ))?;
        }
    }
    Ok(None)
}

/// `berth render`: YAML per cluster and namespace under `--out`.
pub fn render(args: &RenderArgs, ui: &mut Ui<'_>) -> io::Result<Exit> {
    let input = match input_or_exit(&args.plan, false, ui)? {
        Ok(input) => input,
        Err(exit) => return Ok(exit),
    };
    let rendered = k8s::render::render(&input.ir, &input.plan);
    let mut files = k8s::render::yaml_files(&rendered);
    for target in &rendered.gitops {
        for (name, text) in target.files(&rendered.plan_id) {
            files.push((format!("arc/{}/{name}", target.target), text));
        }
    }
    let mut written = Vec::new();
    for (rel, text) in &files {
        let path = args.out.join(rel);
        let result = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&path, text));
        if let Err(e) = result {
            ui.problem(
                &format_args!("cannot write `{}`: {e}", path.display()),
                Some("check that the output directory is writable"),
            )?;
            return Ok(Exit::Trouble);
        }
        written.push(path.display().to_string());
    }
    for other in &rendered.others {
        ui.status(&format_args!(
            "note: `{}` on `{}` ({}) is not handled by this backend",
            other.workload, other.target, other.runtime
        ))?;
    }
    let objects: usize = rendered.clusters.iter().map(|c| c.manifests.len()).sum();
    ui.status(&format_args!(
        "rendered {objects} object(s) into {} file(s) under `{}`",
        written.len(),
        args.out.display()
    ))?;
    if ui.output == OutputFormat::Json {
        let doc = serde_json::json!({
            "plan_id": rendered.plan_id,
            "files": written,
            "objects": objects,
            "not_handled": rendered.others.iter().map(|o| serde_json::json!({
                "workload": o.workload, "target": o.target, "runtime": o.runtime,
            })).collect::<Vec<_>>(),
        });
        writeln!(ui.out, "{doc}")?;
    }
    Ok(Exit::Clean)
}

/// `berth approve PLAN --by NAME`: writes `PLAN.approval.json`, bound to the plan's id.
pub fn approve(args: &ApproveArgs, ui: &mut Ui<'_>) -> io::Result<Exit> {
    let plan: Plan = match std::fs::read_to_string(&args.plan)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
    {
        Ok(plan) => plan,
        Err(error) => {
            return input_problem(
                &InputProblem::ReadPlan {
                    path: args.plan.clone(),
                    error,
                },
                ui,
            );
        }
    };
    let mut workloads = Vec::new();
    for w in &plan.workloads {
        let Some(approval) = &w.approval else {
            continue;
        };
        if !approval.approvers.is_empty() && !approval.approvers.contains(&args.by) {
            ui.problem(
                &format_args!(
                    "`{}` may not approve `{}`: policy `{}` names {}",
                    args.by,
                    w.workload,
                    approval.policy,
                    approval
                        .approvers
                        .iter()
                        .map(|a| format!("`{a}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                Some("approve with `--by` one of the approvers the policy names"),
            )?;
            return Ok(Exit::ErrorsFound);
        }
        workloads.push(w.workload.clone());
    }
    if workloads.is_empty() {
        ui.status(&"nothing in this plan awaits approval")?;
        return Ok(Exit::Clean);
    }
    let record = ApprovalRecord {
        format: APPROVAL_FORMAT.to_string(),
        plan_id: plan.plan_id.clone(),
        approved_by: args.by.clone(),
        approved_at: jiff::Timestamp::now().to_string(),
        workloads,
    };
    let path = approval_path(&args.plan);
    let text = serde_json::to_string_pretty(&record).unwrap_or_default() + "\n";
    if let Err(e) = std::fs::write(&path, text) {
        ui.problem(
            &format_args!("cannot write `{}`: {e}", path.display()),
            Some("check that the plan's directory is writable"),
        )?;
        return Ok(Exit::Trouble);
    }
    ui.status(&format_args!(
        "approved {} workload(s) of plan {} by `{}`: `{}`",
        record.workloads.len(),
        record.plan_id,
        record.approved_by,
        path.display()
    ))?;
    Ok(Exit::Clean)
}

/// `berth apply` (and `berth diff`, an apply in dry-run mode).
pub fn apply(args: &ApplyArgs, ui: &mut Ui<'_>) -> io::Result<Exit> {
    let input = match input_or_exit(&args.plan, !args.dry_run, ui)? {
        Ok(input) => input,
        Err(exit) => return Ok(exit),
    };
    if let Some(exit) = placed_or_refused(&input, ui)? {
        return Ok(exit);
    }
    let rendered = k8s::render::render(&input.ir, &input.plan);
    let edge = crate::edge_apply::has_targets(&input.ir, &input.plan);
    if edge && args.dry_run {
        ui.status(&"note: edge and local targets are not applied in a dry run")?;
    }
    let clusters = !rendered.clusters.is_empty() || !rendered.gitops.is_empty();
    let mut exit = Exit::Clean;
    if clusters || !edge {
        exit = apply_clusters(args, &rendered, ui)?;
    }
    if edge && !args.dry_run && exit == Exit::Clean {
        exit = crate::edge_apply::run(&input.ir, &input.plan, &args.edge, ui)?;
    }
    Ok(exit)
}

/// The Kubernetes and Arc part of `berth apply`.
fn apply_clusters(
    args: &ApplyArgs,
    rendered: &k8s::render::Rendered,
    ui: &mut Ui<'_>,
) -> io::Result<Exit> {
    let options = k8s::apply::Options {
        dry_run: args.dry_run,
        prune: args.prune,
        force_conflicts: args.force_conflicts,
        concurrency: args.concurrency.max(1),
        wait: args
            .wait
            .then(|| std::time::Duration::from_secs(args.timeout)),
    };
    let repos = crate::arc::apply(rendered, args.dry_run);
    let mut other = serde_json::Map::new();
    let mut other_failed = false;
    if !repos.is_empty() {
        other_failed = repos
            .iter()
            .any(|r| matches!(r.outcome, crate::arc::Outcome::Failed(_)));
        other.insert("gitops".to_string(), gitops_json(&repos));
        for r in &repos {
            let line = match &r.outcome {
                crate::arc::Outcome::Committed(hash) => format!("committed {hash}"),
                crate::arc::Outcome::Unchanged => "unchanged".to_string(),
                crate::arc::Outcome::WouldCommit(stat) => {
                    format!("would commit:\n{}", stat.trim_end())
                }
                crate::arc::Outcome::Failed(e) => format!("failed: {e}"),
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
    k8s::apply::run(rendered, &options, other, other_failed, ui)
}

fn gitops_json(repos: &[crate::arc::RepoReport]) -> serde_json::Value {
    let items: Vec<serde_json::Value> = repos
        .iter()
        .map(|r| {
            let (result, detail) = match &r.outcome {
                crate::arc::Outcome::Committed(hash) => ("committed", hash.clone()),
                crate::arc::Outcome::Unchanged => ("unchanged", String::new()),
                crate::arc::Outcome::WouldCommit(stat) => ("would_commit", stat.clone()),
                crate::arc::Outcome::Failed(e) => ("failed", e.clone()),
            };
            serde_json::json!({
                "repo": r.repo, "branch": r.branch, "targets": r.targets,
                "result": result, "detail": detail,
            })
        })
        .collect();
    serde_json::Value::Array(items)
}

/// `berth diff`: what `apply` would change, from the servers' dry run.
pub fn diff(args: &DiffArgs, ui: &mut Ui<'_>) -> io::Result<Exit> {
    let apply_args = ApplyArgs {
        plan: args.plan.clone(),
        dry_run: true,
        prune: false,
        force_conflicts: false,
        concurrency: 8,
        wait: false,
        timeout: 300,
        edge: crate::edge_apply::EdgeArgs::default(),
    };
    apply(&apply_args, ui)
}

/// `berth status`: live replicas and GPU allocation of the plan's clusters.
pub fn status(args: &StatusArgs, ui: &mut Ui<'_>) -> io::Result<Exit> {
    let input = match input_or_exit(&args.plan, false, ui)? {
        Ok(input) => input,
        Err(exit) => return Ok(exit),
    };
    let edge = match crate::edge_status::Report::collect(&input.ir, &input.plan, &args.edge) {
        Ok(edge) => edge,
        Err(e) => {
            ui.problem(&e, None)?;
            return Ok(Exit::Trouble);
        }
    };
    k8s::status::run(&input.ir, &input.plan, &edge, ui)
}
