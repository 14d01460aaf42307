//! `berth plan-diff BEFORE AFTER`: what changes from one saved plan to another — replicas
//! moved, lost and gained per workload, pools newly full, cost per day, approvals newly
//! needed. The same report follows `berth plan SPEC --what-if FILE`.
//!
//! Exit 0 when both files are plans (whatever they say); 1 when one is not a plan or was
//! edited after it was made (its id does not match its content); 2 when one cannot be read.

use super::input::{input_problem, read_plan};
use crate::report::{Exit, OutputFormat, Ui};
use berth_compiler::ir::Money;
use berth_compiler::plan::diff::{PlanDiff, PlanSide, Replicas, WorkloadDiff};
use berth_compiler::plan::{Plan, WorkloadStatus, plan_id};
use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

#[derive(Debug, clap::Args)]
pub struct PlanDiffArgs {
    /// The plan before the change (`berth plan SPEC_DIR -o FILE`).
    #[arg(value_name = "BEFORE")]
    pub before: PathBuf,
    /// The plan after it.
    #[arg(value_name = "AFTER")]
    pub after: PathBuf,
    /// Exit 0 when the two plans place everything alike, 2 when they differ, 1 on any error
    /// (as terraform's `-detailed-exitcode`).
    #[arg(long)]
    pub detailed_exitcode: bool,
}

/// Runs `berth plan-diff`.
pub fn run(args: &PlanDiffArgs, ui: &mut Ui<'_>) -> io::Result<Exit> {
    let (exit, changes) = compare(args, ui)?;
    Ok(if args.detailed_exitcode {
        exit.detailed(changes)
    } else {
        exit
    })
}

/// The report, and whether the plans differ.
fn compare(args: &PlanDiffArgs, ui: &mut Ui<'_>) -> io::Result<(Exit, bool)> {
    let mut plans = Vec::new();
    for path in [&args.before, &args.after] {
        match read_intact(path, ui)? {
            Ok(plan) => plans.push(plan),
            Err(exit) => return Ok((exit, false)),
        }
    }
    let [before, after] = &plans[..] else {
        return Ok((Exit::Trouble, false));
    };
    let diff = berth_compiler::plan::diff::diff(before, after);
    print(&diff, ui)?;
    Ok((Exit::Clean, !diff.is_empty()))
}

/// A saved plan whose id matches its content.
pub(super) fn read_intact(path: &Path, ui: &mut Ui<'_>) -> io::Result<Result<Plan, Exit>> {
    let plan = match read_plan(path) {
        Ok(plan) => plan,
        Err(problem) => return input_problem(&problem, ui).map(Err),
    };
    if plan_id(&plan) != plan.plan_id {
        ui.problem(
            &format_args!(
                "`{}` was edited after it was made: its plan id does not match its content",
                path.display()
            ),
            Some("compare plans as `berth plan` wrote them; plan again rather than editing one"),
        )?;
        return Ok(Err(Exit::ErrorsFound));
    }
    Ok(Ok(plan))
}

/// The report on stdout: JSON, or text for people.
pub fn print(diff: &PlanDiff, ui: &mut Ui<'_>) -> io::Result<()> {
    match ui.output {
        OutputFormat::Json => {
            // Serialising plain structs cannot fail.
            let mut json = serde_json::to_string_pretty(diff).unwrap_or_default();
            json.push('\n');
            ui.out.write_all(json.as_bytes())
        }
        OutputFormat::Markdown => ui
            .out
            .write_all(super::markdown::plan_diff(diff).as_bytes()),
        // `cli` refuses SARIF for `plan-diff`.
        OutputFormat::Human | OutputFormat::Sarif => ui.out.write_all(render(diff).as_bytes()),
    }
}

/// The report for people: both plans in a line each, a table of the workloads that changed,
/// then cost, pools and approvals. Deterministic, plain text.
pub fn render(diff: &PlanDiff) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "before: {}", side(&diff.before));
    let _ = writeln!(out, "after:  {}", side(&diff.after));
    if diff.is_empty() {
        out.push_str("no change: every workload is placed alike, at the same cost\n");
        return out;
    }
    if !diff.workloads.is_empty() {
        let mut rows = vec![[
            "WORKLOAD".to_string(),
            "BEFORE".to_string(),
            "AFTER".to_string(),
            "CHANGE".to_string(),
        ]];
        rows.extend(diff.workloads.iter().map(|w| {
            [
                w.workload.clone(),
                state(w.status_before, w.replicas_before),
                state(w.status_after, w.replicas_after),
                change(w),
            ]
        }));
        out.push('\n');
        super::table::table(&mut out, &rows);
        for w in &diff.workloads {
            if let Some(why) = &w.short_after {
                let missing = w.replicas_after.declared
                    - w.replicas_after.placed.min(w.replicas_after.declared);
                let _ = writeln!(
                    out,
                    "  `{}` is {} short after: {why}",
                    w.workload,
                    berth_compiler::driver::units::count(u64::from(missing), "replica")
                );
            }
        }
    }
    out.push('\n');
    let _ = writeln!(
        out,
        "cost per day: {} → {} ({})",
        diff.before.cost_per_day,
        diff.after.cost_per_day,
        signed(Money(
            diff.after.cost_per_day.0 - diff.before.cost_per_day.0
        ))
    );
    for (title, pools) in [
        ("newly saturated", &diff.newly_saturated),
        ("no longer saturated", &diff.no_longer_saturated),
    ] {
        if !pools.is_empty() {
            let list: Vec<String> = pools
                .iter()
                .map(|p| {
                    format!(
                        "`{}/{}` ({} of {} {})",
                        p.target, p.pool, p.allocated, p.capacity, p.accelerator
                    )
                })
                .collect();
            let _ = writeln!(out, "{title}: {}", list.join(", "));
        }
    }
    if !diff.approvals_newly_needed.is_empty() {
        let list: Vec<String> = diff
            .approvals_newly_needed
            .iter()
            .map(|a| {
                format!(
                    "`{}` ({} a day, above {} under policy `{}`)",
                    a.workload, a.cost_per_day, a.threshold, a.policy
                )
            })
            .collect();
        let _ = writeln!(out, "approvals newly needed: {}", list.join(", "));
    }
    if !diff.approvals_no_longer_needed.is_empty() {
        let list: Vec<String> = diff
            .approvals_no_longer_needed
            .iter()
            .map(|w| format!("`{w}`"))
            .collect();
        let _ = writeln!(out, "approvals no longer needed: {}", list.join(", "));
    }
    out
}

fn side(s: &PlanSide) -> String {
    let id = s.plan_id.get(..19).unwrap_or(&s.plan_id);
    format!(
        "plan {id}… at {}: {} of {} replicas placed{}, {} a day",
        s.at,
        s.replicas_placed,
        s.replicas_declared,
        if s.feasible { "" } else { " (infeasible)" },
        s.cost_per_day
    )
}

fn state(status: Option<WorkloadStatus>, r: Replicas) -> String {
    match status {
        None => "absent".into(),
        Some(_) => format!("{} of {}", r.placed, r.declared),
    }
}

fn change(w: &WorkloadDiff) -> String {
    let mut parts: Vec<String> = Vec::new();
    match (w.status_before, w.status_after) {
        (None, Some(_)) => parts.push("new workload".into()),
        (Some(_), None) => parts.push("workload removed".into()),
        _ => {}
    }
    if w.replicas_before.declared != w.replicas_after.declared
        && w.status_before.is_some()
        && w.status_after.is_some()
    {
        parts.push(format!(
            "declares {} (was {})",
            w.replicas_after.declared, w.replicas_before.declared
        ));
    }
    for m in &w.moved {
        parts.push(format!("{} moved {} → {}", m.replicas, m.from, m.to));
    }
    for l in &w.lost {
        parts.push(format!("{} lost from {}", l.replicas, l.site));
    }
    for g in &w.gained {
        parts.push(format!("{} gained on {}", g.replicas, g.site));
    }
    if w.cost_per_day_before != w.cost_per_day_after {
        parts.push(format!(
            "{} a day",
            signed(Money(w.cost_per_day_after.0 - w.cost_per_day_before.0))
        ));
    }
    parts.join("; ")
}

fn signed(m: Money) -> String {
    if m.0 >= 0 {
        format!("+{m}")
    } else {
        m.to_string()
    }
}
