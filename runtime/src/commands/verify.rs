//! `berth verify PLAN --spec SPEC_DIR`: re-checks a saved plan against the spec, with the
//! independent verifier, at the instant the plan records.
//!
//! Exit 0 when the plan verifies and was made from these very sources; 1 when it does not
//! verify, when the spec changed since it was planned (source digest), when the plan file is
//! not a plan (malformed JSON: with line and column) or the spec has errors; 2 when a file
//! cannot be read.

use super::input::{input_problem, read_plan};
use super::spec;
use crate::report::{Exit, OutputFormat, Ui};
use berth_compiler::driver::{self, ReverifyFailure};
use serde_json::json;
use std::io;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// The saved plan (`berth plan SPEC_DIR -o PLAN`).
    #[arg(value_name = "PLAN")]
    pub plan: PathBuf,
    /// The spec the plan was made from.
    #[arg(long, value_name = "SPEC_DIR")]
    pub spec: PathBuf,
}

/// Runs `berth verify`.
pub fn run(args: &VerifyArgs, ui: &mut Ui<'_>) -> io::Result<Exit> {
    let plan = match read_plan(&args.plan) {
        Ok(plan) => plan,
        Err(problem) => return input_problem(&problem, ui),
    };
    if driver::plan_instant(&plan).is_none() {
        ui.problem(
            &format_args!(
                "the plan's instant `{}` is not an RFC 3339 instant",
                plan.at
            ),
            Some("`at` records when the plan was made; plan again rather than editing it"),
        )?;
        return Ok(Exit::ErrorsFound);
    }
    let spec = match spec::load(&args.spec, ui)? {
        Ok(spec) => spec,
        Err(exit) => return Ok(exit),
    };
    let checked = match driver::reverify(&spec.sources, &plan) {
        Ok(checked) => checked,
        Err(ReverifyFailure::Spec(diagnostics)) => {
            ui.diagnostics(&diagnostics, &spec.shown, serde_json::Map::new())?;
            ui.summary(&diagnostics, spec.shown.len())?;
            return Ok(Exit::ErrorsFound);
        }
    };
    let digest = &checked.source_digest;
    let digest_matches = checked.digest_matches(&plan);
    // The instant was checked above.
    let outcome = checked.verdict.unwrap_or_else(|| Err(Vec::new()));
    let mut extra = serde_json::Map::new();
    extra.insert("plan_id".into(), plan.plan_id.clone().into());
    extra.insert("source_digest_matches".into(), digest_matches.into());
    if ui.output == OutputFormat::Human && !digest_matches {
        ui.problem(
            &format_args!(
                "the spec changed since the plan was made: the plan records sources `{}`, `{}` now hashes to `{digest}`",
                plan.source_digest,
                args.spec.display()
            ),
            Some("plan again (`berth plan SPEC_DIR -o FILE`) so the plan matches the spec it will be applied with"),
        )?;
    }
    if plan.compiler_version != driver::COMPILER_VERSION {
        ui.status(&format_args!(
            "note: the plan was made by berth {}; this is berth {}",
            plan.compiler_version,
            driver::COMPILER_VERSION
        ))?;
    }
    match outcome {
        Err(violations) => {
            spec::print_violations(&violations, &spec.shown, extra, ui)?;
            let count = violations.len();
            ui.status(&format_args!(
                "plan `{}` does not verify: {count} violation{}",
                args.plan.display(),
                if count == 1 { "" } else { "s" }
            ))?;
            Ok(Exit::ErrorsFound)
        }
        Ok(summary) => {
            if ui.output == OutputFormat::Json {
                let mut doc = json!({
                    "verified": digest_matches,
                    "checks": summary.checks,
                    "diagnostics": [],
                });
                if let Some(map) = doc.as_object_mut() {
                    map.extend(extra);
                }
                writeln!(ui.out, "{doc}")?;
            } else if digest_matches {
                ui.status(&format_args!(
                    "plan `{}` verified against `{}`: {} checks passed at {}",
                    args.plan.display(),
                    args.spec.display(),
                    summary.checks.len(),
                    plan.at
                ))?;
            } else {
                ui.status(&format_args!(
                    "plan `{}` passes every check against the changed spec, but was made from other sources",
                    args.plan.display()
                ))?;
            }
            Ok(if digest_matches {
                Exit::Clean
            } else {
                Exit::ErrorsFound
            })
        }
    }
}
