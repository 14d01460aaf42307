//! `berth plan SPEC_DIR [--at RFC3339] [-o FILE]`: compile, place, verify, and print or save
//! the plan. Exit 0 when every replica is placed; 1 when the plan is infeasible (it is still
//! printed and written: infeasibility is an answer), when the spec has errors (nothing is
//! written), or when the verifier rejects the engine's plan (never written); 2 for usage and
//! I/O problems.

use super::{spec, table};
use crate::report::{Exit, OutputFormat, Ui};
use berth_compiler::diagnostics::render::render_terminal_limited;
use berth_compiler::plan::Plan;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// The spec: a directory whose `.berth` files form one spec (or a single file).
    #[arg(value_name = "SPEC_DIR")]
    pub spec: PathBuf,
    /// The plan instant, RFC 3339 (`2025-06-04T10:00:00+02:00`): policy windows are
    /// evaluated at it. Default: now.
    #[arg(long, value_name = "RFC3339")]
    pub at: Option<String>,
    /// Also save the plan as JSON in FILE (written atomically), for `berth verify` and apply.
    #[arg(short = 'o', long = "out", value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// Runs `berth plan`.
pub fn run(args: &PlanArgs, ui: &mut Ui<'_>) -> io::Result<Exit> {
    let spec::SpecPlanned { spec, planned, .. } =
        match spec::load_and_plan(&args.spec, args.at.as_deref(), None, ui)? {
            Ok(done) => done,
            Err(exit) => return Ok(exit),
        };
    // Warnings go to stderr in both modes: stdout holds the plan alone.
    if !planned.warnings.is_empty() {
        let text =
            render_terminal_limited(&planned.warnings, &spec.shown, ui.color, ui.error_limit);
        ui.err.write_all(text.as_bytes())?;
    }
    let plan = &planned.plan;
    let json = plan_json(plan);
    if let Some(out) = &args.out
        && let Err(e) = write_atomically(out, json.as_bytes())
    {
        ui.problem(
            &format_args!("cannot write the plan to `{}`: {e}", out.display()),
            Some("check that the directory exists and is writable"),
        )?;
        return Ok(Exit::Trouble);
    }
    match ui.output {
        OutputFormat::Json => ui.out.write_all(json.as_bytes())?,
        OutputFormat::Human => {
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

/// The plan as saved: two-space indentation and a final newline (`docs/plan-format.md`).
pub fn plan_json(plan: &Plan) -> String {
    // Serialising the plan's plain structs cannot fail.
    let mut json = serde_json::to_string_pretty(plan).unwrap_or_default();
    json.push('\n');
    json
}

/// Writes `bytes` to `path` through a temporary file in the same directory, renamed over
/// `path`: readers see the old plan or the new one, never half of one.
fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    // Hidden, so that a leftover after a crash is never mistaken for a plan.
    let mut file = tempfile::Builder::new()
        .prefix(".berth-plan-")
        .suffix(".tmp")
        .tempfile_in(dir)?;
    file.write_all(bytes)?;
    // A temporary file is private (0600); a plan is not a secret, and an existing plan
    // keeps its permissions.
    match std::fs::metadata(path) {
        Ok(meta) => file.as_file().set_permissions(meta.permissions())?,
        Err(_) => {
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                file.as_file()
                    .set_permissions(std::fs::Permissions::from_mode(0o644))?;
            }
        }
    }
    file.as_file().sync_all()?;
    file.persist(path).map_err(|e| e.error)?;
    Ok(())
}
