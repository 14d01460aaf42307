//! `berth plan SPEC_DIR --what-if FILE`: the spec planned as the what-if file changes it, at
//! the same instant, and what changes from the spec's own plan to that one (the report of
//! `berth plan-diff`). Nothing is written.
//!
//! Exit 0 when both plans were made, whatever they say; 1 when the what-if file or the
//! changed spec has errors (their diagnostics point into the file where the text is); 2 when
//! the what-if file cannot be read.

use super::{plan_diff, spec};
use crate::report::{Exit, Ui};
use berth_compiler::driver::{self, PlanFailure};
use berth_compiler::plan::Plan;
use std::io;
use std::path::Path;

/// Plans `spec` changed by the what-if file at `path` and prints the difference from `base`,
/// the spec's own plan at the same instant (and, with `--live`, against the same live pools),
/// its replicas assigned by `assigner` as the base plan's were.
pub fn run(
    mut spec: spec::Spec,
    base: &Plan,
    path: &Path,
    live: &driver::LivePools,
    assigner: driver::Assigner,
    ui: &mut Ui<'_>,
) -> io::Result<Exit> {
    let (spec_files, id) = match spec::add_what_if(&mut spec, path, ui)? {
        Ok(changes) => changes,
        Err(exit) => return Ok(exit),
    };
    // The instant the base plan records (`--at`, or the clock read once).
    let Some(instant) = driver::plan_instant(base) else {
        return Ok(Exit::Trouble);
    };
    let shown = &spec.shown;
    // Planned as the base plan was (with `--exact`, exactly too): a difference between the
    // two plans is then the what-if file's, not the assigners'.
    let compiled = driver::compile_what_if(&spec.sources, &spec_files, id);
    match driver::plan_asking(compiled, &spec.sources, instant, live, assigner, None) {
        Ok(changed) => {
            if let Some(outcome) = &changed.exact {
                writeln!(ui.err, "the what-if plan: {outcome}")?;
            }
            let diff = berth_compiler::plan::diff::diff(base, &changed.planned.plan);
            plan_diff::print(&diff, ui)?;
            Ok(Exit::Clean)
        }
        Err(PlanFailure::Spec(diags)) => {
            ui.diagnostics(&diags, shown, serde_json::Map::new())?;
            ui.summary(&diags, shown.len())?;
            ui.status(&"no what-if plan: the spec as the what-if file changes it has errors")?;
            Ok(Exit::ErrorsFound)
        }
        Err(PlanFailure::Unverified { violations, .. }) => {
            ui.problem(
                &"the placement engine made a what-if plan that the verifier rejects",
                Some("this is a bug in berth: please report it with the spec, the what-if file and the `--at` used"),
            )?;
            spec::print_violations(&violations, shown, serde_json::Map::new(), ui)?;
            Ok(Exit::ErrorsFound)
        }
    }
}
