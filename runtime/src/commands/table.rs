//! A plan for people: one table per workload, then a summary line. Plain text (no colour),
//! deterministic: the same plan gives the same text.

use berth_compiler::driver::units::{bytes, count, duration};
use berth_compiler::ir::Money;
use berth_compiler::plan::{
    Placement, Plan, Rejection, ScoreTerm, StagingSource, VariantBinding, WorkloadPlan,
    WorkloadStatus,
};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Every workload's table, each followed by a blank line.
pub fn render(plan: &Plan) -> String {
    let mut out = String::new();
    for w in &plan.workloads {
        workload(&mut out, w);
        out.push('\n');
    }
    let staging: Vec<String> = plan
        .targets
        .iter()
        .filter(|t| t.staging_bytes > 0 || t.staging_unsized > 0)
        .map(|t| {
            let mut amount = Vec::new();
            if t.staging_bytes > 0 {
                amount.push(bytes(t.staging_bytes));
            }
            if t.staging_unsized > 0 {
                amount.push(format!(
                    "{} of unknown size",
                    plural(t.staging_unsized as usize, "artifact")
                ));
            }
            format!("{} {}", t.target, amount.join(" and "))
        })
        .collect();
    if !staging.is_empty() {
        let _ = writeln!(out, "models to stage: {}\n", staging.join(", "));
    }
    out
}

/// `3 workloads: 2 placed, 1 unplaced; 7 replicas on 3 targets; 215.20 a day; verified
/// (22 checks)`.
pub fn summary(plan: &Plan) -> String {
    let count = |s: WorkloadStatus| plan.workloads.iter().filter(|w| w.status == s).count();
    let mut states = vec![format!("{} placed", count(WorkloadStatus::Placed))];
    for (status, word) in [
        (WorkloadStatus::Partial, "partially placed"),
        (WorkloadStatus::Unplaced, "unplaced"),
    ] {
        if count(status) > 0 {
            states.push(format!("{} {word}", count(status)));
        }
    }
    let replicas: u64 = plan
        .workloads
        .iter()
        .flat_map(|w| &w.placements)
        .map(|p| u64::from(p.replicas))
        .sum();
    let mut targets: Vec<&str> = plan
        .workloads
        .iter()
        .flat_map(|w| &w.placements)
        .map(|p| p.target.as_str())
        .collect();
    targets.sort_unstable();
    targets.dedup();
    let cost = Money(
        plan.workloads
            .iter()
            .map(|w| w.cost_per_day.0)
            .fold(0, i64::saturating_add),
    );
    let awaiting = plan
        .workloads
        .iter()
        .filter(|w| w.approval.is_some())
        .count();
    let mut line = format!(
        "{}: {}; {} on {}; {cost} a day",
        plural(plan.workloads.len(), "workload"),
        states.join(", "),
        plural(replicas as usize, "replica"),
        plural(targets.len(), "target"),
    );
    if awaiting > 0 {
        let _ = write!(line, "; {} awaiting approval", plural(awaiting, "workload"));
    }
    if plan.verification.verified {
        let _ = write!(
            line,
            "; verified ({})",
            plural(plan.verification.checks.len(), "check")
        );
    }
    if !plan.feasible {
        line.push_str("; not feasible");
    }
    line
}

fn workload(out: &mut String, w: &WorkloadPlan) {
    let placed: u32 = w.placements.iter().map(|p| p.replicas).sum();
    let _ = writeln!(
        out,
        "{}  {}  {placed}/{} replicas  {} a day",
        w.workload,
        status(w.status),
        w.replicas,
        w.cost_per_day
    );
    if !w.placements.is_empty() {
        let rows: Vec<[String; 6]> = std::iter::once(
            [
                "target",
                "pool",
                "replicas",
                "variant",
                "model from",
                "score",
            ]
            .map(String::from),
        )
        .chain(w.placements.iter().map(placement_row))
        .collect();
        table(out, &rows);
    }
    if !w.fallback.is_empty() {
        let _ = writeln!(out, "  fallback: {}", w.fallback.join(", "));
    }
    if let Some(a) = &w.approval {
        let _ = writeln!(
            out,
            "  approval needed: {} a day is above {} (policy `{}`); approvers: {}",
            w.cost_per_day,
            a.threshold,
            a.policy,
            a.approvers.join(", ")
        );
    }
    if let Some(u) = &w.unplaced {
        let _ = writeln!(
            out,
            "  not placed: {}: {}",
            plural(u.missing_replicas as usize, "replica"),
            u.message
        );
        if let Some(hint) = &u.hint {
            let _ = writeln!(out, "    hint: {hint}");
        }
        if let Some(window) = &u.held_by_window {
            let _ = writeln!(out, "    held back by window `{window}`");
        }
    }
    if !w.rejected.is_empty() {
        let _ = writeln!(out, "  {}", rejected_line(&w.rejected));
    }
    // Short of replicas: say per target why it could not take them.
    if w.status != WorkloadStatus::Placed {
        for r in &w.rejected {
            let _ = write!(out, "    {}: {}", r.target, r.message);
            if r.others > 0 {
                let _ = write!(
                    out,
                    " (and {} more for the same reason)",
                    plural(r.others as usize, "target")
                );
            }
            out.push('\n');
        }
    }
}

fn status(s: WorkloadStatus) -> &'static str {
    match s {
        WorkloadStatus::Placed => "placed",
        WorkloadStatus::Partial => "PARTIAL",
        WorkloadStatus::Unplaced => "UNPLACED",
    }
}

fn placement_row(p: &Placement) -> [String; 6] {
    [
        p.target.clone(),
        p.pool.clone().unwrap_or_else(|| "-".into()),
        p.replicas.to_string(),
        p.variant
            .as_ref()
            .map_or_else(|| "-".into(), |v| v.variant.clone()),
        p.variant.as_ref().map_or_else(|| "-".into(), model_from),
        score(&p.score),
    ]
}

/// Where the placement's model comes from: `cached`, `mirror`, `source` or `carried`, and
/// the bytes that move (`mirror 6GiB`).
fn model_from(v: &VariantBinding) -> String {
    let from = match v.staging.from {
        StagingSource::Cached => return "cached".into(),
        StagingSource::Mirror => "mirror",
        StagingSource::Source => "source",
        StagingSource::Carried => "carried",
    };
    match v.staging.bytes {
        Some(n) => format!("{from} {}", bytes(n)),
        None => from.into(),
    }
}

/// `data_latency 2ms, cost 21.60`.
fn score(terms: &[ScoreTerm]) -> String {
    if terms.is_empty() {
        return "-".into();
    }
    terms
        .iter()
        .map(|t| match t.objective.as_str() {
            "cost" => format!("cost {}", Money(t.value)),
            "data_latency" => format!("data_latency {}", duration(t.value.max(0) as u64)),
            other => format!("{other} {}", t.value),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `rejected: 5 targets (data_latency 2, denied 1, not_needed 2)`, counting the targets a
/// large estate summarises in `others`; reasons in first-seen order.
fn rejected_line(rejected: &[Rejection]) -> String {
    let mut order: Vec<&str> = Vec::new();
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    for r in rejected {
        if !counts.contains_key(r.reason.as_str()) {
            order.push(&r.reason);
        }
        *counts.entry(&r.reason).or_default() += 1 + u64::from(r.others);
    }
    let total: u64 = counts.values().sum();
    let reasons: Vec<String> = order
        .iter()
        .map(|r| format!("{r} {}", counts.get(r).copied().unwrap_or_default()))
        .collect();
    format!(
        "rejected: {} ({})",
        plural(total as usize, "target"),
        reasons.join(", ")
    )
}

/// Columns padded to their widest cell, two spaces apart, indented by two.
/// Rows of cells in columns as wide as their widest cell, indented by one space.
pub(super) fn table<const N: usize>(out: &mut String, rows: &[[String; N]]) {
    let mut widths = [0usize; N];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in rows {
        let mut line = String::from(" ");
        for (cell, width) in row.iter().zip(widths) {
            let _ = write!(line, " {cell:<width$} ");
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

fn plural(n: usize, noun: &str) -> String {
    count(n as u64, noun)
}
