//! Reports for a merge request comment (`--output markdown`): `berth plan` summarised, and
//! `berth plan-diff` as what moves, what is newly placed or lost, cost before and after and
//! approvals needed, each with its per-workload table collapsed (`<details>`). GitHub- and
//! GitLab-flavoured Markdown; deterministic, plain data only (no timestamps of the run).

use berth_compiler::driver::units::count;
use berth_compiler::ir::Money;
use berth_compiler::plan::diff::{PlanDiff, WorkloadDiff};
use berth_compiler::plan::{Plan, WorkloadPlan, WorkloadStatus};
use std::fmt::Write as _;

/// Text safe in a table cell: `|` escaped, lines joined.
fn cell(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('|', "\\|")
        .replace(['\n', '\r'], " ")
}

/// A plan id as `sha256:0123456789ab`, enough to tell plans apart in a comment.
fn short_id(plan_id: &str) -> String {
    plan_id.chars().take("sha256:".len() + 12).collect()
}

fn status_word(status: WorkloadStatus) -> &'static str {
    match status {
        WorkloadStatus::Placed => "placed",
        WorkloadStatus::Partial => "partially placed",
        WorkloadStatus::Unplaced => "unplaced",
    }
}

fn where_placed(w: &WorkloadPlan) -> String {
    if w.placements.is_empty() {
        return "—".to_string();
    }
    w.placements
        .iter()
        .map(|p| match &p.pool {
            Some(pool) => format!("{} × `{}/{pool}`", p.replicas, p.target),
            None => format!("{} × `{}`", p.replicas, p.target),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn total_cost(plan: &Plan) -> Money {
    Money(
        plan.workloads
            .iter()
            .map(|w| w.cost_per_day.0)
            .fold(0, i64::saturating_add),
    )
}

/// `berth plan --output markdown`.
pub fn plan(plan: &Plan) -> String {
    let mut out = String::new();
    let placed: u64 = plan
        .workloads
        .iter()
        .flat_map(|w| &w.placements)
        .map(|p| u64::from(p.replicas))
        .sum();
    let declared: u64 = plan.workloads.iter().map(|w| u64::from(w.replicas)).sum();
    let _ = writeln!(
        out,
        "### berth plan `{}` at {}\n",
        short_id(&plan.plan_id),
        plan.at
    );
    let _ = writeln!(
        out,
        "{} **{placed} of {declared} replicas placed**{} · {} a day · verified\n",
        if plan.feasible { "✅" } else { "⚠️" },
        if plan.feasible { "" } else { " (infeasible)" },
        total_cost(plan),
    );
    let short: Vec<&WorkloadPlan> = plan
        .workloads
        .iter()
        .filter(|w| w.status != WorkloadStatus::Placed)
        .collect();
    if !short.is_empty() {
        out.push_str("**Not fully placed**\n\n");
        for w in short {
            let (missing, why) = match &w.unplaced {
                Some(u) => (u.missing_replicas, u.message.as_str()),
                None => (0, ""),
            };
            let _ = write!(
                out,
                "- `{}`: {} short: {}",
                w.workload,
                count(u64::from(missing), "replica"),
                cell(why)
            );
            if let Some(hint) = w.unplaced.as_ref().and_then(|u| u.hint.as_deref()) {
                let _ = write!(out, " (hint: {})", cell(hint));
            }
            out.push('\n');
        }
        out.push('\n');
    }
    approvals(
        &mut out,
        "Approvals needed",
        plan.workloads.iter().filter_map(|w| {
            w.approval
                .as_ref()
                .map(|a| (w.workload.as_str(), w.cost_per_day, a.threshold, &a.policy))
        }),
    );
    let _ = writeln!(
        out,
        "<details><summary>{} (per workload)</summary>\n",
        count(plan.workloads.len() as u64, "workload")
    );
    out.push_str("| Workload | Status | Replicas | Where | Cost a day |\n");
    out.push_str("|---|---|---|---|---:|\n");
    for w in &plan.workloads {
        let placed: u32 = w.placements.iter().map(|p| p.replicas).sum();
        let _ = writeln!(
            out,
            "| `{}` | {} | {placed} of {} | {} | {} |",
            w.workload,
            status_word(w.status),
            w.replicas,
            where_placed(w),
            w.cost_per_day
        );
    }
    out.push_str("\n</details>\n");
    out
}

fn approvals<'a>(
    out: &mut String,
    title: &str,
    needed: impl Iterator<Item = (&'a str, Money, Money, &'a String)>,
) {
    let needed: Vec<_> = needed.collect();
    if needed.is_empty() {
        return;
    }
    let _ = writeln!(out, "**{title}** before these are applied\n");
    for (workload, cost, threshold, policy) in needed {
        let _ = writeln!(
            out,
            "- `{workload}`: {cost} a day, above {threshold} under policy `{policy}`"
        );
    }
    out.push('\n');
}

fn sites(items: &[(String, u32)]) -> String {
    items
        .iter()
        .map(|(site, n)| format!("{n} on `{site}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn change(w: &WorkloadDiff) -> String {
    let mut parts = Vec::new();
    for m in &w.moved {
        parts.push(format!("{} moved `{}` → `{}`", m.replicas, m.from, m.to));
    }
    let gained: Vec<(String, u32)> = w
        .gained
        .iter()
        .map(|g| (g.site.to_string(), g.replicas))
        .collect();
    if !gained.is_empty() {
        parts.push(format!("newly placed: {}", sites(&gained)));
    }
    let lost: Vec<(String, u32)> = w
        .lost
        .iter()
        .map(|g| (g.site.to_string(), g.replicas))
        .collect();
    if !lost.is_empty() {
        parts.push(format!("lost: {}", sites(&lost)));
    }
    if parts.is_empty() {
        parts.push("cost or status only".to_string());
    }
    parts.join("; ")
}

fn signed(m: Money) -> String {
    if m.0 >= 0 {
        format!("+{m}")
    } else {
        format!("−{}", Money(-m.0))
    }
}

/// `berth plan-diff --output markdown`.
pub fn plan_diff(diff: &PlanDiff) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "### berth plan-diff `{}` → `{}`\n",
        short_id(&diff.before.plan_id),
        short_id(&diff.after.plan_id)
    );
    if diff.is_empty() {
        out.push_str("No change: every workload is placed alike, at the same cost.\n");
        return out;
    }
    let total = |f: fn(&WorkloadDiff) -> u32| diff.workloads.iter().map(f).sum::<u32>();
    let moved = total(|w| w.moved.iter().map(|m| m.replicas).sum());
    let gained = total(|w| w.gained.iter().map(|g| g.replicas).sum());
    let lost = total(|w| w.lost.iter().map(|g| g.replicas).sum());
    let _ = writeln!(
        out,
        "**{}** moved · **{}** newly placed · **{}** lost · replicas placed {} → {} of {}\n",
        count(u64::from(moved), "replica"),
        count(u64::from(gained), "replica"),
        count(u64::from(lost), "replica"),
        diff.before.replicas_placed,
        diff.after.replicas_placed,
        diff.after.replicas_declared,
    );
    let _ = writeln!(
        out,
        "Cost a day: {} → {} ({})\n",
        diff.before.cost_per_day,
        diff.after.cost_per_day,
        signed(Money(
            diff.after.cost_per_day.0 - diff.before.cost_per_day.0
        ))
    );
    approvals(
        &mut out,
        "Approvals newly needed",
        diff.approvals_newly_needed
            .iter()
            .map(|a| (a.workload.as_str(), a.cost_per_day, a.threshold, &a.policy)),
    );
    if !diff.approvals_no_longer_needed.is_empty() {
        let _ = writeln!(
            out,
            "No longer awaiting approval: {}\n",
            diff.approvals_no_longer_needed
                .iter()
                .map(|w| format!("`{w}`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    for (title, pools) in [
        ("Pools newly full", &diff.newly_saturated),
        ("Pools no longer full", &diff.no_longer_saturated),
    ] {
        if !pools.is_empty() {
            let _ = writeln!(
                out,
                "{title}: {}\n",
                pools
                    .iter()
                    .map(|p| format!(
                        "`{}/{}` ({} of {} {})",
                        p.target, p.pool, p.allocated, p.capacity, p.accelerator
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    if !diff.workloads.is_empty() {
        let _ = writeln!(
            out,
            "<details><summary>{} changed</summary>\n",
            count(diff.workloads.len() as u64, "workload")
        );
        out.push_str("| Workload | Before | After | Change | Cost a day |\n");
        out.push_str("|---|---|---|---|---:|\n");
        for w in &diff.workloads {
            let state =
                |s: Option<WorkloadStatus>, r: &berth_compiler::plan::diff::Replicas| match s {
                    Some(_) => format!("{} of {}", r.placed, r.declared),
                    None => "—".to_string(),
                };
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} | {} → {} |",
                w.workload,
                state(w.status_before, &w.replicas_before),
                state(w.status_after, &w.replicas_after),
                cell(&change(w)),
                w.cost_per_day_before,
                w.cost_per_day_after
            );
        }
        out.push_str("\n</details>\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_cannot_break_a_table() {
        assert_eq!(cell("a | b\nc"), "a \\| b c");
        assert_eq!(cell("x\\|y"), "x\\\\\\|y");
    }

    #[test]
    fn plan_ids_are_shortened() {
        assert_eq!(
            short_id("sha256:0123456789abcdef0123456789abcdef"),
            "sha256:0123456789ab"
        );
    }
}
