//! What changed from one plan to another (`berth plan-diff A B`, `berth plan --what-if`): per
//! workload, replicas moved, lost and gained; pools newly full or no longer full; cost per
//! day before and after; approvals newly needed or no longer needed.
//!
//! Pure over two plans by name: the plans may come from different specs (a what-if, a spec
//! edited since) and name workloads, targets and pools the other does not. Lists follow the
//! order of the plan after the change, then what only the plan before had.

use super::{Plan, PoolLedger, WorkloadPlan, WorkloadStatus};
use crate::ir::Money;
use serde::Serialize;
use std::collections::BTreeMap;

/// The difference between two plans.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PlanDiff {
    pub before: PlanSide,
    pub after: PlanSide,
    /// Workloads whose placements, status, declared replicas or cost changed, or that only one
    /// plan has.
    pub workloads: Vec<WorkloadDiff>,
    /// Pools with no free GPU after the change that had some before (or did not exist).
    pub newly_saturated: Vec<PoolUse>,
    /// Pools full before the change that have free GPUs after it.
    pub no_longer_saturated: Vec<PoolUse>,
    /// Workloads awaiting approval after the change that did not before.
    pub approvals_newly_needed: Vec<ApprovalChange>,
    /// Workloads awaiting approval before the change that no longer do.
    pub approvals_no_longer_needed: Vec<String>,
}

/// One side of the comparison.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PlanSide {
    pub plan_id: String,
    pub at: String,
    pub feasible: bool,
    /// Replicas placed, all workloads together.
    pub replicas_placed: u64,
    /// Replicas declared, all workloads together.
    pub replicas_declared: u64,
    /// Σ `cost_per_day` of every workload.
    pub cost_per_day: Money,
}

/// Where replicas sit: a target, and the pool when they use GPUs.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Site {
    pub target: String,
    pub pool: Option<String>,
}

impl std::fmt::Display for Site {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.pool {
            Some(pool) => write!(f, "{}/{pool}", self.target),
            None => f.write_str(&self.target),
        }
    }
}

/// Replicas taken from one site and put on another.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Move {
    pub from: Site,
    pub to: Site,
    pub replicas: u32,
}

/// Replicas that appear on (or leave) a site without a counterpart.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SiteReplicas {
    pub site: Site,
    pub replicas: u32,
}

/// What happened to one workload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WorkloadDiff {
    pub workload: String,
    /// `None` when the plan before does not have the workload.
    pub status_before: Option<WorkloadStatus>,
    /// `None` when the plan after does not have the workload.
    pub status_after: Option<WorkloadStatus>,
    pub replicas_before: Replicas,
    pub replicas_after: Replicas,
    /// Replicas that left a site for another.
    pub moved: Vec<Move>,
    /// Replicas that left a site with nowhere to go.
    pub lost: Vec<SiteReplicas>,
    /// Replicas placed on a site that come from nowhere else.
    pub gained: Vec<SiteReplicas>,
    pub cost_per_day_before: Money,
    pub cost_per_day_after: Money,
    /// Why the plan after leaves replicas out, as it says (`unplaced.message`).
    pub short_after: Option<String>,
}

/// A workload's replicas in one plan.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Replicas {
    pub placed: u32,
    pub declared: u32,
}

/// A pool's use in the plan after the change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PoolUse {
    pub target: String,
    pub pool: String,
    pub accelerator: String,
    pub allocated: u32,
    pub capacity: u32,
}

/// A workload newly awaiting approval.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ApprovalChange {
    pub workload: String,
    pub policy: String,
    pub threshold: Money,
    pub cost_per_day: Money,
}

impl PlanDiff {
    /// Whether the two plans place every workload alike, at the same cost, with the same
    /// approvals and pool saturation.
    pub fn is_empty(&self) -> bool {
        self.workloads.is_empty()
            && self.newly_saturated.is_empty()
            && self.no_longer_saturated.is_empty()
            && self.approvals_newly_needed.is_empty()
            && self.approvals_no_longer_needed.is_empty()
    }
}

fn side(plan: &Plan) -> PlanSide {
    PlanSide {
        plan_id: plan.plan_id.clone(),
        at: plan.at.clone(),
        feasible: plan.feasible,
        replicas_placed: plan.workloads.iter().map(|w| u64::from(placed(w))).sum(),
        replicas_declared: plan.workloads.iter().map(|w| u64::from(w.replicas)).sum(),
        cost_per_day: Money(plan.workloads.iter().map(|w| w.cost_per_day.0).sum()),
    }
}

fn placed(w: &WorkloadPlan) -> u32 {
    w.placements.iter().map(|p| p.replicas).sum()
}

/// Replicas per site, sorted by site.
fn sites(w: Option<&WorkloadPlan>) -> Vec<(Site, u32)> {
    let mut out: Vec<(Site, u32)> = Vec::new();
    for p in w.map_or(&[][..], |w| &w.placements) {
        let site = Site {
            target: p.target.clone(),
            pool: p.pool.clone(),
        };
        match out.iter_mut().find(|(s, _)| *s == site) {
            Some((_, n)) => *n += p.replicas,
            None => out.push((site, p.replicas)),
        }
    }
    out.sort();
    out
}

/// A plan's workloads by name.
fn workloads_of(plan: &Plan) -> BTreeMap<&str, &WorkloadPlan> {
    plan.workloads
        .iter()
        .map(|w| (w.workload.as_str(), w))
        .collect()
}

/// A plan's pool ledgers by target and pool.
fn pools_of(plan: &Plan) -> BTreeMap<(&str, &str), &PoolLedger> {
    plan.pools
        .iter()
        .map(|p| ((p.target.as_str(), p.pool.as_str()), p))
        .collect()
}

/// Compares `before` with `after`.
pub fn diff(before: &Plan, after: &Plan) -> PlanDiff {
    // By name, once: plans of large estates hold thousands of workloads and pools.
    let (b_workloads, a_workloads) = (workloads_of(before), workloads_of(after));
    let (b_pools, a_pools) = (pools_of(before), pools_of(after));
    let names = after.workloads.iter().chain(
        before
            .workloads
            .iter()
            .filter(|w| !a_workloads.contains_key(w.workload.as_str())),
    );
    let workloads = names
        .filter_map(|w| {
            let name = w.workload.as_str();
            workload_diff(
                name,
                b_workloads.get(name).copied(),
                a_workloads.get(name).copied(),
            )
        })
        .collect();
    let full = |p: &PoolLedger| p.allocated >= p.capacity;
    let pool_use = |p: &PoolLedger| PoolUse {
        target: p.target.clone(),
        pool: p.pool.clone(),
        accelerator: p.accelerator.clone(),
        allocated: p.allocated,
        capacity: p.capacity,
    };
    let newly_saturated = after
        .pools
        .iter()
        .filter(|p| full(p) && !b_pools.get(&(&p.target, &p.pool)).is_some_and(|b| full(b)))
        .map(pool_use)
        .collect();
    let no_longer_saturated = before
        .pools
        .iter()
        .filter(|p| full(p))
        .filter_map(|p| a_pools.get(&(&p.target, &p.pool)).copied())
        .filter(|q| !full(q))
        .map(pool_use)
        .collect();
    let awaiting = |plans: &BTreeMap<&str, &WorkloadPlan>, name: &str| {
        plans.get(name).is_some_and(|w| w.approval.is_some())
    };
    let approvals_newly_needed = after
        .workloads
        .iter()
        .filter(|w| !awaiting(&b_workloads, &w.workload))
        .filter_map(|w| {
            let a = w.approval.as_ref()?;
            Some(ApprovalChange {
                workload: w.workload.clone(),
                policy: a.policy.clone(),
                threshold: a.threshold,
                cost_per_day: w.cost_per_day,
            })
        })
        .collect();
    let approvals_no_longer_needed = before
        .workloads
        .iter()
        .filter(|w| w.approval.is_some() && !awaiting(&a_workloads, &w.workload))
        .map(|w| w.workload.clone())
        .collect();
    PlanDiff {
        before: side(before),
        after: side(after),
        workloads,
        newly_saturated,
        no_longer_saturated,
        approvals_newly_needed,
        approvals_no_longer_needed,
    }
}

/// What changed for one workload; `None` when nothing did.
fn workload_diff(
    name: &str,
    before: Option<&WorkloadPlan>,
    after: Option<&WorkloadPlan>,
) -> Option<WorkloadDiff> {
    let (from, to) = (sites(before), sites(after));
    // Per site, replicas that left (`from` more than `to`) and arrived.
    let mut left: Vec<(Site, u32)> = Vec::new();
    let mut arrived: Vec<(Site, u32)> = Vec::new();
    for (site, n) in &from {
        let now = to.iter().find(|(s, _)| s == site).map_or(0, |(_, m)| *m);
        if *n > now {
            left.push((site.clone(), n - now));
        }
    }
    for (site, n) in &to {
        let was = from.iter().find(|(s, _)| s == site).map_or(0, |(_, m)| *m);
        if *n > was {
            arrived.push((site.clone(), n - was));
        }
    }
    // Pair departures with arrivals, in site order: those are moves; what is left over was
    // lost or gained.
    let mut moved = Vec::new();
    let mut arrivals = arrived.iter_mut().peekable();
    for (from_site, n) in left.iter_mut() {
        while *n > 0 {
            let Some((to_site, m)) = arrivals.peek_mut() else {
                break;
            };
            let k = (*n).min(*m);
            moved.push(Move {
                from: from_site.clone(),
                to: to_site.clone(),
                replicas: k,
            });
            *n -= k;
            *m -= k;
            if *m == 0 {
                arrivals.next();
            }
        }
    }
    let rest = |v: Vec<(Site, u32)>| {
        v.into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(site, replicas)| SiteReplicas { site, replicas })
            .collect::<Vec<_>>()
    };
    let replicas = |w: Option<&WorkloadPlan>| Replicas {
        placed: w.map_or(0, placed),
        declared: w.map_or(0, |w| w.replicas),
    };
    let d = WorkloadDiff {
        workload: name.to_string(),
        status_before: before.map(|w| w.status),
        status_after: after.map(|w| w.status),
        replicas_before: replicas(before),
        replicas_after: replicas(after),
        moved,
        lost: rest(left),
        gained: rest(arrived),
        cost_per_day_before: before.map_or(Money(0), |w| w.cost_per_day),
        cost_per_day_after: after.map_or(Money(0), |w| w.cost_per_day),
        short_after: after
            .and_then(|w| w.unplaced.as_ref())
            .map(|u| u.message.clone()),
    };
    let unchanged = d.moved.is_empty()
        && d.lost.is_empty()
        && d.gained.is_empty()
        && d.status_before == d.status_after
        && d.replicas_before == d.replicas_after
        && d.cost_per_day_before == d.cost_per_day_after;
    (!unchanged).then_some(d)
}
