//! The truth of every reason a plan gives for leaving a target unused, and the order of
//! fallbacks, judged against the plan's own placements.
//!
//! This is the verifier's reading of "Why a target is unused" in `docs/placement.md`,
//! written apart from the engine: a policy-stage reason names a rule that holds (a deny, a
//! missing entitlement, a cap that one more replica would exceed); an assignment-stage reason
//! says the target cannot take one more replica and names a rule that keeps it off at least
//! one of the target's usable pools; `not_needed` says every replica is placed and the
//! target ranks no better than the worst-ranked target used. A replica on fallback `j` is
//! allowed only when no target ranked before it (any target not listed as a fallback, or an
//! earlier fallback) could take it.

// INVARIANT: workload and target ids come from `Resolved` and `Placed` or from
// `Verifier::target_id`, resolved against this IR; pool indices from `0..pools.len()`.
#![allow(clippy::indexing_slicing)]

use crate::ir::{Preference, TargetId, WorkloadId};
use crate::plan::{Rejection, RejectionStage};
use crate::verify::*;
use std::collections::BTreeMap;

/// A region, or the name of a target that has none (a region of its own).
pub(in crate::verify) type RegionKey<'a> = (bool, &'a str);

/// How the plan's placements occupy the estate, recomputed from the placements alone.
struct Occupancy<'a> {
    pools: BTreeMap<(TargetId, usize), BTreeMap<WorkloadId, u64>>,
    targets: BTreeMap<TargetId, (u64, u64)>,
    on_target: BTreeMap<(WorkloadId, TargetId), u64>,
    in_region: BTreeMap<(WorkloadId, RegionKey<'a>), u64>,
    /// Replicas placed per workload.
    placed: BTreeMap<WorkloadId, u64>,
    /// Per workload, the workloads it is isolated from, in either direction.
    partners: Vec<Vec<WorkloadId>>,
    /// GPUs held under each quota, entitlement and window limit, by index in the policy.
    quota_used: Vec<u64>,
    entitlement_used: Vec<u64>,
    limit_used: Vec<u64>,
}

/// What keeps one more replica off one pool (or a CPU-only placement) of a target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Blocker {
    Spread,
    Isolation,
    Capacity,
    Cpu,
    Memory,
}

impl Blocker {
    fn from_reason(reason: &str) -> Option<Blocker> {
        Some(match reason {
            "spread" => Blocker::Spread,
            "isolation" => Blocker::Isolation,
            "capacity" => Blocker::Capacity,
            "cpu" => Blocker::Cpu,
            "memory" => Blocker::Memory,
            _ => return None,
        })
    }
}

/// Reasons each stage gives (`docs/placement.md`).
const ELIGIBILITY_REASONS: [&str; 14] = [
    "not_candidate",
    "environment",
    "connectivity",
    "accelerator",
    "mig",
    "gpu_memory",
    "no_variant",
    "model_unreachable",
    "data_unavailable",
    "data_latency",
    "service_maturity",
    "cpu",
    "memory",
    "gpu_count",
];
const CAP_REASONS: [&str; 3] = ["quota", "entitlement_limit", "window_limit"];

/// Where a target stands in a workload's preference: its fallback position (0 when it is
/// not a fallback, else 1, 2, … in the list's order), then the workload's objectives in
/// order (lower is better).
type Rank = (usize, i64, i64);

impl<'a> Verifier<'a> {
    fn occupancy(&self) -> Occupancy<'a> {
        let ir = self.ir;
        let mut on_target: BTreeMap<_, u64> = BTreeMap::new();
        let mut in_region: BTreeMap<_, u64> = BTreeMap::new();
        let mut placed: BTreeMap<_, u64> = BTreeMap::new();
        for p in &self.placed {
            *on_target.entry((p.w, p.t)).or_default() += p.replicas();
            *in_region.entry((p.w, self.region(p.t))).or_default() += p.replicas();
            *placed.entry(p.w).or_default() += p.replicas();
        }
        let mut partners = vec![Vec::new(); ir.workloads.len()];
        for (w, spec) in ir.workloads.iter().enumerate() {
            for &x in &spec.placement.isolate_from {
                if x.index() != w && x.index() < partners.len() {
                    partners[w].push(x);
                    partners[x.index()].push(WorkloadId(w as u32));
                }
            }
        }
        let policy = &ir.policy;
        Occupancy {
            pools: self.pool_ledger(),
            targets: self.target_ledger(),
            on_target,
            in_region,
            placed,
            partners,
            quota_used: (policy.quotas.iter())
                .map(|q| self.gpus_where(|x| x.team == q.team))
                .collect(),
            entitlement_used: (policy.entitlements.iter())
                .map(|e| self.gpus_where(|x| x.identity == e.identity))
                .collect(),
            limit_used: (policy.limits.iter())
                .map(|l| self.gpus_where(|x| l.selector.matches(x)))
                .collect(),
        }
    }

    /// A target's region for `per_region`: its region, or the target itself when it has none.
    pub(in crate::verify) fn region(&self, t: TargetId) -> RegionKey<'a> {
        let target = &self.ir.targets[t.index()];
        match &target.region {
            Some(region) => (true, region.as_str()),
            None => (false, target.name.as_str()),
        }
    }

    /// Whether the entitlements let `w` use `pool` of `t` (`None`: a CPU-only placement),
    /// as `check_entitlements` judges a placement.
    fn entitled(&self, w: WorkloadId, t: TargetId, pool: Option<usize>) -> bool {
        let holds_gpus = fit::gpu_units(self.workload(w)) > 0;
        self.entitlement_breaches(w, t, pool, holds_gpus).is_empty()
    }

    /// The ways `w` could run on `t` that fit technically, ignoring policy: each fitting
    /// pool, or `None` for a workload that needs no GPU.
    fn fitting(&self, w: WorkloadId, t: TargetId) -> Vec<Option<usize>> {
        let spec = self.workload(w);
        let target = &self.ir.targets[t.index()];
        if fit::gpu_units(spec) == 0 {
            return match fit::fit(self.ir, spec, target, None) {
                Ok(_) => vec![None],
                Err(_) => Vec::new(),
            };
        }
        (0..target.pools.len())
            .filter(|&p| fit::fit(self.ir, spec, target, Some(p)).is_ok())
            .map(Some)
            .collect()
    }

    /// The ways `w` may run on `t`: fitting, a candidate, not denied and entitled.
    fn usable(&self, w: WorkloadId, t: TargetId) -> Vec<Option<usize>> {
        let candidates = &self.workload(w).placement.candidates;
        if candidates.as_ref().is_some_and(|c| !c.contains(&t)) || self.denied(w, t).is_some() {
            return Vec::new();
        }
        let mut ways = self.fitting(w, t);
        ways.retain(|&pool| self.entitled(w, t, pool));
        ways
    }

    /// What keeps one more replica of `w` off `pool` of `t`, with one replica of `w` taken
    /// off `moved_from` first (for a move; `None` for one more replica).
    fn blockers(
        &self,
        occ: &Occupancy<'a>,
        w: WorkloadId,
        t: TargetId,
        pool: Option<usize>,
        moved_from: Option<TargetId>,
    ) -> Vec<Blocker> {
        let spec = self.workload(w);
        let rules = &spec.placement;
        let target = &self.ir.targets[t.index()];
        let mut found = Vec::new();
        let here = occ.on_target.get(&(w, t)).copied().unwrap_or(0);
        let region = self.region(t);
        let mut in_region = occ.in_region.get(&(w, region)).copied().unwrap_or(0);
        if moved_from.is_some_and(|u| self.region(u) == region) {
            in_region = in_region.saturating_sub(1);
        }
        if rules.per_target.is_some_and(|n| here >= u64::from(n))
            || rules.per_region.is_some_and(|n| in_region >= u64::from(n))
        {
            found.push(Blocker::Spread);
        }
        if let Some(p) = pool {
            let holders = occ.pools.get(&(t, p));
            let holds = |x: WorkloadId| holders.is_some_and(|h| h.get(&x).is_some_and(|n| *n > 0));
            if occ.partners[w.index()].iter().any(|&x| holds(x)) {
                found.push(Blocker::Isolation);
            }
            let capacity = fit::pool_capacity(self.ir, &target.pools[p]);
            let allocated =
                holders.map_or(0, |h| h.values().fold(0, |a: u64, n| a.saturating_add(*n)));
            if capacity.saturating_sub(allocated) < u64::from(fit::gpu_units(spec)) {
                found.push(Blocker::Capacity);
            }
        }
        let (cpu, memory) = occ.targets.get(&t).copied().unwrap_or_default();
        if target.cpu_millis.saturating_sub(cpu) < spec.resources.cpu_millis {
            found.push(Blocker::Cpu);
        }
        if target.memory.saturating_sub(memory) < spec.resources.memory {
            found.push(Blocker::Memory);
        }
        found
    }

    /// Whether one more replica of `w` would exceed a cap of the kind `reason` names.
    fn cap_binds(&self, occ: &Occupancy<'a>, w: WorkloadId, reason: &str) -> bool {
        let ir = self.ir;
        let spec = self.workload(w);
        let units = u64::from(fit::gpu_units(spec));
        if units == 0 {
            return false;
        }
        let over = |used: u64, max: u32| used.saturating_add(units) > u64::from(max);
        match reason {
            "quota" => (ir.policy.quotas.iter())
                .zip(&occ.quota_used)
                .any(|(q, used)| q.team == spec.team && over(*used, q.max_gpu)),
            "entitlement_limit" => (ir.policy.entitlements.iter())
                .zip(&occ.entitlement_used)
                .any(|(e, used)| {
                    e.identity == spec.identity && e.max_gpu.is_some_and(|max| over(*used, max))
                }),
            "window_limit" => (ir.policy.limits.iter())
                .zip(&occ.limit_used)
                .any(|(l, used)| {
                    self.windows.get(l.window.index()).copied().flatten() == Some(true)
                        && l.selector.matches(spec)
                        && over(*used, l.max_gpu)
                }),
            _ => false,
        }
    }

    /// `t`'s place in `w`'s `fallback` list: 0 when it is not listed, else 1, 2, ….
    fn fallback_position(&self, w: WorkloadId, t: TargetId) -> usize {
        (self.workload(w).placement.fallback.iter())
            .position(|f| *f == t)
            .map_or(0, |i| i + 1)
    }

    /// Whether one replica of `w` moved off `from` could go to `t`: some pool (or, without
    /// GPUs, the target) with nothing in the way that fits, is entitled, and `t` a candidate
    /// that no deny rule closes. The cheap occupancy tests run first: this is asked of every
    /// target ranked before a fallback in use.
    fn could_move_to(
        &self,
        occ: &Occupancy<'a>,
        w: WorkloadId,
        t: TargetId,
        from: TargetId,
    ) -> bool {
        let spec = self.workload(w);
        let target = &self.ir.targets[t.index()];
        if spec
            .placement
            .candidates
            .as_ref()
            .is_some_and(|c| !c.contains(&t))
        {
            return false;
        }
        let ways: Vec<Option<usize>> = if fit::gpu_units(spec) == 0 {
            vec![None]
        } else {
            (0..target.pools.len()).map(Some).collect()
        };
        ways.into_iter().any(|pool| {
            self.blockers(occ, w, t, pool, Some(from)).is_empty()
                && fit::fit(self.ir, spec, target, pool).is_ok()
                && self.entitled(w, t, pool)
        }) && self.denied(w, t).is_none()
    }

    /// Where `t` stands in `w`'s preference ([`Rank`]).
    fn rank(&self, w: WorkloadId, t: TargetId) -> Rank {
        let spec = self.workload(w);
        let target = &self.ir.targets[t.index()];
        let position = self.fallback_position(w, t);
        let mut prefs: Vec<Preference> = Vec::new();
        for p in &spec.placement.prefer {
            if !prefs.contains(p) {
                prefs.push(*p);
            }
        }
        if prefs.is_empty() {
            prefs.push(Preference::LowestCost);
        }
        let objective = |p: &Preference| match p {
            Preference::LowestCost => {
                let hour = target.cost.gpu_hour.unwrap_or_default().0;
                hour.saturating_mul(i64::from(fit::gpu_units(spec)))
                    .saturating_mul(24)
            }
            Preference::LowestDataLatency => spec
                .data
                .iter()
                .map(|d| {
                    target
                        .data
                        .iter()
                        .find(|o| o.name == d.name)
                        .map_or(i64::MAX, |o| i64::try_from(o.latency).unwrap_or(i64::MAX))
                })
                .max()
                .unwrap_or(0),
        };
        let first = prefs.first().map_or(0, objective);
        let second = prefs.get(1).map_or(0, objective);
        (position, first, second)
    }

    /// What is untrue about `rej`, given to `w` for target `t`; `None` when it is true.
    fn reason_problem(
        &self,
        occ: &Occupancy<'a>,
        w: WorkloadId,
        t: TargetId,
        rej: &Rejection,
        worst_used: Option<(Rank, TargetId)>,
    ) -> Option<ReasonProblem> {
        let spec = self.workload(w);
        let reason = rej.reason.as_str();
        match rej.stage {
            RejectionStage::Eligibility => {
                if !ELIGIBILITY_REASONS.contains(&reason) {
                    return Some(ReasonProblem::NotOfStage);
                }
                // Technical reasons are checked by `check_rejections` (the target does not fit).
                let candidate = spec
                    .placement
                    .candidates
                    .as_ref()
                    .is_none_or(|c| c.contains(&t));
                (reason == "not_candidate" && candidate).then_some(ReasonProblem::IsCandidate)
            }
            RejectionStage::Policy => match reason {
                "denied" => self
                    .denied(w, t)
                    .is_none()
                    .then_some(ReasonProblem::NotDenied),
                "not_entitled" => {
                    let entitled = self
                        .fitting(w, t)
                        .into_iter()
                        .any(|pool| self.entitled(w, t, pool));
                    entitled.then_some(ReasonProblem::Entitled)
                }
                r if CAP_REASONS.contains(&r) => {
                    (!self.cap_binds(occ, w, r)).then_some(ReasonProblem::CapNotReached)
                }
                _ => Some(ReasonProblem::NotOfStage),
            },
            RejectionStage::Assignment => {
                let ways = self.usable(w, t);
                if ways.is_empty() {
                    return Some(ReasonProblem::NotOpen);
                }
                if reason == "not_needed" {
                    let placed = occ.placed.get(&w).copied().unwrap_or(0);
                    let replicas = u64::from(spec.replicas);
                    if placed < replicas {
                        return Some(ReasonProblem::NotNeededShort { placed, replicas });
                    }
                    return match worst_used {
                        Some((worst, u)) if self.rank(w, t) < worst => {
                            Some(ReasonProblem::RanksBefore {
                                used: self.tname(u),
                            })
                        }
                        _ => None,
                    };
                }
                let Some(blocker) = Blocker::from_reason(reason) else {
                    return Some(ReasonProblem::NotOfStage);
                };
                let blocked: Vec<Vec<Blocker>> = ways
                    .iter()
                    .map(|&pool| self.blockers(occ, w, t, pool, None))
                    .collect();
                if blocked.iter().any(Vec::is_empty) {
                    Some(ReasonProblem::HasRoom)
                } else if !blocked.iter().any(|b| b.contains(&blocker)) {
                    Some(ReasonProblem::RuleDoesNotHold)
                } else {
                    None
                }
            }
        }
    }

    pub(in crate::verify) fn check_reasons(&mut self) {
        let ir = self.ir;
        let occ = self.occupancy();
        let mut found = Vec::new();
        for r in &self.workloads {
            let used: Vec<TargetId> = {
                let mut used: Vec<TargetId> = self
                    .placements_of(r.w)
                    .filter(|p| p.placement.replicas > 0)
                    .map(|p| p.t)
                    .collect();
                used.sort_unstable();
                used.dedup();
                used
            };
            let worst_used = used.iter().map(|&u| (self.rank(r.w, u), u)).max();
            for rej in &r.plan.rejected {
                let Some(t) = self.target_id(&rej.target) else {
                    continue;
                };
                if used.contains(&t) {
                    continue; // `check_rejections` reports it
                }
                if let Some(problem) = self.reason_problem(&occ, r.w, t, rej, worst_used) {
                    found.push(Violation::UntrueReason {
                        workload: self.wname(r.w),
                        target: rej.target.clone(),
                        reason: rej.reason.clone(),
                        problem,
                        span: self.wspan(r.w),
                    });
                }
            }
            // Fallback order: a replica on fallback `j` while a target ranked before it
            // (not a fallback, or an earlier one) could take it.
            for &u in &used {
                let j = self.fallback_position(r.w, u);
                if j == 0 {
                    continue;
                }
                let earlier = (0..ir.targets.len())
                    .map(|i| TargetId(i as u32))
                    .find(|&t| {
                        t != u
                            && self.fallback_position(r.w, t) < j
                            && self.could_move_to(&occ, r.w, t, u)
                    });
                if let Some(t) = earlier {
                    found.push(Violation::FallbackOrder {
                        workload: self.wname(r.w),
                        used: self.tname(u),
                        position: j,
                        earlier: self.tname(t),
                        span: self.wfield(r.w, "fallback"),
                    });
                }
            }
        }
        self.violations.extend(found);
    }
}
