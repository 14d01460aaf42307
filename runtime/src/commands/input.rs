//! What `render`, `apply`, `diff` and `status` share: the plan to work with (a saved plan
//! with its spec, re-verified through `driver::reverify`, or a spec planned now) and the
//! refusals that keep a stale, unapproved or unverified plan off the targets, with the
//! approval file they read (`berth approve` writes it).

use super::approval::{APPROVALS_FORMAT, ApprovalFile, ApprovalProblem, Approvers, TrustError};
use crate::files::{self, FsReader};
use crate::report::{Exit, OutputFormat, Ui};
use berth_compiler::driver;
use berth_compiler::ir::Ir;
use berth_compiler::plan::{self, Plan};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// Where the plan comes from (shared by `render`, `apply`, `diff` and `status`).
#[derive(Debug, Clone, clap::Args)]
pub struct PlanInputArgs {
    /// A saved plan (`plan.json`, applied with `--spec`) or a spec directory planned now.
    #[arg(value_name = "PLAN|SPEC")]
    pub input: PathBuf,
    /// The spec a saved plan was made from; its digest must match the plan's.
    #[arg(long, value_name = "DIR")]
    pub spec: Option<PathBuf>,
}

/// A plan and the IR of its spec, ready to render.
pub struct PlanInput {
    pub ir: Ir,
    pub plan: Plan,
    /// The saved plan's path (where its approval file lives); `None` for a spec planned now.
    pub path: Option<PathBuf>,
    /// The spec's directory (where the policy's trust files are read).
    pub spec_dir: Option<PathBuf>,
    /// Every file read to make this input (the spec's sources, the saved plan): what no
    /// command may write over.
    pub inputs: Vec<PathBuf>,
}

/// Why there is no plan to work with (exit 2: nothing was checked; 1 for a file that is
/// not a plan).
#[derive(Debug)]
pub enum InputProblem {
    Load(Vec<files::LoadError>),
    NotOneSpec(usize),
    /// The plan file cannot be read: missing or unreadable (exit 2, the environment), or
    /// too large or not UTF-8 (exit 1: there is a file, and it is not a plan).
    ReadPlan(files::LoadError),
    /// The file is not a plan this berth reads (exit 1: bad input, not the environment).
    BadPlan {
        path: PathBuf,
        error: plan::PlanReadError,
    },
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
    /// Workloads whose placements await approval: `(workload, policy)`, and why the
    /// approvals in the plan's approval file did not answer them.
    AwaitingApproval {
        waiting: Vec<(String, String)>,
        not_accepted: Vec<ApprovalProblem>,
    },
    /// The approvers of a policy cannot be resolved to keys.
    Trust(TrustError),
    /// The plan's approval file exists but cannot be read as approvals.
    BadApproval { path: PathBuf, error: String },
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
            Refusal::AwaitingApproval {
                waiting,
                not_accepted,
            } => {
                let list: Vec<String> = waiting
                    .iter()
                    .map(|(w, p)| format!("`{w}` (policy `{p}`)"))
                    .collect();
                write!(f, "placements await approval: {}", list.join(", "))?;
                if !not_accepted.is_empty() {
                    let problems: Vec<String> =
                        not_accepted.iter().map(ToString::to_string).collect();
                    write!(f, "; not accepted: {}", problems.join("; "))?;
                }
                Ok(())
            }
            Refusal::Trust(e) => write!(f, "{e}"),
            Refusal::BadApproval { path, error } => {
                write!(f, "cannot read the approval `{}`: {error}", path.display())
            }
            Refusal::NothingPlaced => write!(f, "the plan places no replica; nothing is applied"),
        }
    }
}

impl Refusal {
    pub fn hint(&self) -> &'static str {
        match self {
            Refusal::SpecErrors(_) => "run `berth check` on the spec",
            Refusal::DigestMismatch { .. } => "plan again from the current spec",
            Refusal::Unverified(_) => "plan again; a plan that fails verification is never applied",
            Refusal::AwaitingApproval { .. } => {
                "save the plan, then `berth approve PLAN --key KEY` with the key of an approver the policy names, and apply the saved plan"
            }
            Refusal::Trust(e) => e.hint(),
            Refusal::BadApproval { .. } => {
                "an approval file is the JSON `berth approve PLAN --key KEY` writes; approve again"
            }
            Refusal::NothingPlaced => {
                "`berth explain SPEC WORKLOAD` says why each target was rejected"
            }
        }
    }
}

/// The approval file of a saved plan: `plan.json` → `plan.approval.json`; any other name has
/// `.approval.json` appended (`plans/2025.06` → `plans/2025.06.approval.json`: cutting at the
/// dot would give plans `2025.06` and `2025.07` one approval file).
pub fn approval_path(plan: &Path) -> PathBuf {
    if plan.extension().is_some_and(|e| e == "json") {
        plan.with_extension("approval.json")
    } else {
        crate::files::output::with_suffix(plan, ".approval.json")
    }
}

/// Loads the plan to work with. A saved plan must come with its spec (`--spec`); its digest
/// and verification are checked later by [`refusals`].
pub fn load_input(args: &PlanInputArgs) -> Result<Result<PlanInput, Refusal>, InputProblem> {
    // A `.json` path is a saved plan even when it is missing: "cannot read the plan" says
    // what is wrong, where a spec loader would talk of `.berth` files.
    let is_plan_file = !args.input.is_dir()
        && args
            .input
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    if !is_plan_file {
        return plan_spec(&args.input);
    }
    let plan = read_plan(&args.input)?;
    let Some(spec) = &args.spec else {
        return Err(InputProblem::NeedsSpec(args.input.clone()));
    };
    let (sources, mut inputs) = spec_sources(spec)?;
    inputs.push(args.input.clone());
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
        spec_dir: Some(spec.clone()),
        inputs,
    }))
}

/// Reads a saved plan strictly ([`plan::from_json`]: unknown fields are refused).
pub fn read_plan(path: &Path) -> Result<Plan, InputProblem> {
    let text = crate::files::read_plan_file(path).map_err(InputProblem::ReadPlan)?;
    plan::from_json(&text).map_err(|error| InputProblem::BadPlan {
        path: path.to_path_buf(),
        error,
    })
}

/// The one spec at `path`, its files named relative to it (what `berth plan` digests), and
/// their paths.
fn spec_sources(
    path: &Path,
) -> Result<(berth_compiler::source::SourceMap, Vec<PathBuf>), InputProblem> {
    let loaded = files::load(&[path.to_path_buf()], &FsReader).map_err(InputProblem::Load)?;
    let specs = loaded.specs();
    if specs.len() != 1 {
        return Err(InputProblem::NotOneSpec(specs.len()));
    }
    Ok((files::relative_sources(path, &loaded), loaded.paths))
}

fn plan_spec(path: &Path) -> Result<Result<PlanInput, Refusal>, InputProblem> {
    let (sources, inputs) = spec_sources(path)?;
    match driver::plan(&sources, super::spec::now()) {
        Ok(planned) => Ok(Ok(PlanInput {
            ir: planned.ir,
            plan: planned.plan,
            path: None,
            spec_dir: Some(path.to_path_buf()),
            inputs,
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
    let approvers = match Approvers::resolve(&input.plan, input.spec_dir.as_deref()) {
        Ok(approvers) => approvers,
        Err(e) => return Some(Refusal::Trust(e)),
    };
    let file = match input.path.as_deref().map(approval_path) {
        None => None,
        Some(path) => match read_approvals(&path) {
            Ok(file) => file,
            Err(error) => return Some(Refusal::BadApproval { path, error }),
        },
    };
    let checked = file
        .map(|f| approvers.check(&input.plan.plan_id, &f, jiff::Timestamp::now()))
        .unwrap_or_default();
    let missing: Vec<(String, String)> = waiting
        .into_iter()
        .filter(|(w, _)| !checked.approved.contains_key(w))
        .collect();
    (!missing.is_empty()).then_some(Refusal::AwaitingApproval {
        waiting: missing,
        not_accepted: checked.problems,
    })
}

/// The approval file at `path`: `None` when there is none, an error when it exists but is
/// not a file of approvals (never silently taken for "not approved").
pub(super) fn read_approvals(path: &Path) -> Result<Option<ApprovalFile>, String> {
    // Never open what is not a regular file (a FIFO would block the read forever).
    match std::fs::metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
        Ok(meta) if !meta.is_file() => return Err("not a regular file".to_string()),
        Ok(_) => {}
    }
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let file: ApprovalFile = serde_json::from_str(&text).map_err(|e| {
        if text.contains("berth.approval/v1") {
            "an unsigned approval of an earlier berth (approvals are signatures now)".to_string()
        } else {
            e.to_string()
        }
    })?;
    if file.format != APPROVALS_FORMAT {
        return Err(format!(
            "format `{}`, not `{APPROVALS_FORMAT}`",
            file.format
        ));
    }
    Ok(Some(file))
}

pub(super) fn input_problem(problem: &InputProblem, ui: &mut Ui<'_>) -> io::Result<Exit> {
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
        InputProblem::ReadPlan(error) => {
            ui.problem(
                &format_args!("cannot read the plan: {error}"),
                Some("give the file `berth plan SPEC_DIR -o FILE` wrote"),
            )?;
            if matches!(
                error,
                files::LoadError::TooLarge { .. } | files::LoadError::NotUtf8 { .. }
            ) {
                return Ok(Exit::ErrorsFound);
            }
        }
        InputProblem::BadPlan { path, error } => {
            match error.position() {
                Some((line, column)) => ui.problem(
                    &format_args!("`{}`:{line}:{column}: {error}", path.display()),
                    Some(error.hint()),
                )?,
                None => ui.problem(
                    &format_args!("`{}` is {error}", path.display()),
                    Some(error.hint()),
                )?,
            }
            return Ok(Exit::ErrorsFound);
        }
        InputProblem::NeedsSpec(path) => ui.problem(
            &format_args!("the saved plan `{}` needs its spec", path.display()),
            Some("add `--spec DIR`: its digest is checked against the plan's"),
        )?,
    }
    Ok(Exit::Trouble)
}

pub(super) fn refused(refusal: &Refusal, ui: &mut Ui<'_>) -> io::Result<Exit> {
    ui.problem(refusal, Some(refusal.hint()))?;
    if ui.output == OutputFormat::Json {
        let doc = serde_json::json!({ "refused": refusal.to_string() });
        writeln!(ui.out, "{doc}")?;
    }
    Ok(Exit::ErrorsFound)
}

/// Loads the input and applies the refusals every command shares; `approval` also refuses
/// placements awaiting approval.
pub(super) fn input_or_exit(
    args: &PlanInputArgs,
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
pub(super) fn placed_or_refused(input: &PlanInput, ui: &mut Ui<'_>) -> io::Result<Option<Exit>> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approval_files_are_named_after_the_whole_plan_name() {
        let path = |p: &str| approval_path(Path::new(p));
        assert_eq!(path("out/plan.json"), Path::new("out/plan.approval.json"));
        assert_eq!(
            path("plans/2025.06"),
            Path::new("plans/2025.06.approval.json")
        );
        assert_ne!(path("plans/2025.06"), path("plans/2025.07"));
    }
}
