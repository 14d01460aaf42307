//! The independent verifier: re-checks a [`Plan`] against the [`Ir`] it claims to place,
//! from the two alone.
//!
//! It shares no code with the placement engine and never calls it (an ARCHITECTURE
//! invariant): technical fit (`fit`), capacity ledgers, quotas, entitlements, spread,
//! isolation, cost and approvals are all recomputed here. Only the language's and the
//! format's definitions are shared, because they are not solver decisions: what a policy
//! condition means ([`crate::ir::eval`]), whether a window is in effect
//! ([`crate::ir::Window::in_effect`]), how a selector is written, which workloads a reclaim
//! rule covers ([`crate::plan::reclaim_rules`]) and the plan's id ([`crate::plan::plan_id`]).
//!
//! Every check runs (none stops the others), so a hand-edited plan gets every problem at
//! once. `berth plan` runs [`verify`] before writing a plan; `berth verify PLAN --spec DIR`
//! runs it on a saved one.

mod fit;
mod violation;

pub use fit::Unfit;
pub use violation::{
    Entitlement, FallbackProblem, NameKind, PlanList, RejectionProblem, Resource, SpreadScope,
    Violation,
};

use crate::ir::{Ir, Money, TargetId, UnknownZone, Workload, WorkloadId, eval};
use crate::plan::{
    PLAN_FORMAT, Placement, Plan, ReclaimRule, RejectionStage, Verification, WorkloadPlan,
    WorkloadStatus,
};
use crate::source::Span;
use fit::gpu_units;
use jiff::Timestamp;
use std::collections::{BTreeMap, BTreeSet};

/// One named check over the plan.
type Check<'a> = (&'static str, fn(&mut Verifier<'a>));

/// Every check, in the order run; the names are what [`Verification::checks`] lists.
fn checks<'a>() -> [Check<'a>; 22] {
    [
        ("format", Verifier::check_format),
        ("instant", Verifier::check_instant),
        ("plan_id", Verifier::check_plan_id),
        ("names", Verifier::check_names),
        ("candidates", Verifier::check_candidates),
        ("eligibility", Verifier::check_eligibility),
        ("replicas", Verifier::check_replicas),
        ("pool_capacity", Verifier::check_pool_capacity),
        ("target_capacity", Verifier::check_target_capacity),
        ("ledgers", Verifier::check_ledgers),
        ("denies", Verifier::check_denies),
        ("entitlements", Verifier::check_entitlements),
        ("quotas", Verifier::check_quotas),
        ("windows", Verifier::check_windows),
        ("window_limits", Verifier::check_window_limits),
        ("spread", Verifier::check_spread),
        ("isolation", Verifier::check_isolation),
        ("cost", Verifier::check_cost),
        ("approvals", Verifier::check_approvals),
        ("fallback", Verifier::check_fallback),
        ("rejections", Verifier::check_rejections),
        ("reclaims", Verifier::check_reclaims),
    ]
}

/// The names of every check [`verify`] runs, in order.
pub fn check_names() -> Vec<String> {
    checks()
        .iter()
        .map(|(name, _)| (*name).to_owned())
        .collect()
}

/// Re-checks `plan` against `ir` at the plan instant `at`.
///
/// `Ok` carries the summary to write into the plan (`verified`, every check's name, no
/// violations); `Err` every violation found, in check order.
pub fn verify(ir: &Ir, plan: &Plan, at: Timestamp) -> Result<Verification, Vec<Violation>> {
    let mut v = Verifier {
        ir,
        plan,
        at,
        workloads: Vec::new(),
        placed: Vec::new(),
        windows: Vec::new(),
        violations: Vec::new(),
    };
    for (_, check) in checks() {
        check(&mut v);
    }
    if v.violations.is_empty() {
        Ok(Verification {
            verified: true,
            checks: check_names(),
            violations: Vec::new(),
        })
    } else {
        Err(v.violations)
    }
}

/// A plan workload resolved to the spec.
struct Resolved<'p> {
    w: WorkloadId,
    plan: &'p WorkloadPlan,
}

/// A placement whose target (and pool, if any) resolved.
struct Placed<'p> {
    w: WorkloadId,
    placement: &'p Placement,
    t: TargetId,
    pool: Option<usize>,
}

impl Placed<'_> {
    fn replicas(&self) -> u64 {
        u64::from(self.placement.replicas)
    }
}

struct Verifier<'a> {
    ir: &'a Ir,
    plan: &'a Plan,
    at: Timestamp,
    /// Plan workloads that resolved, first occurrence of each name only.
    workloads: Vec<Resolved<'a>>,
    /// Placements of those workloads that resolved.
    placed: Vec<Placed<'a>>,
    /// Each spec window's state at `at`; `None` when its zone is unknown.
    windows: Vec<Option<bool>>,
    violations: Vec<Violation>,
}

impl<'a> Verifier<'a> {
    // ------------------------------------------------------------ helpers

    fn push(&mut self, v: Violation) {
        self.violations.push(v);
    }

    fn workload(&self, w: WorkloadId) -> &'a Workload {
        &self.ir.workloads[w.index()]
    }

    fn wname(&self, w: WorkloadId) -> String {
        self.workload(w).name.clone()
    }

    fn tname(&self, t: TargetId) -> String {
        self.ir.targets[t.index()].name.clone()
    }

    fn wspan(&self, w: WorkloadId) -> Span {
        self.ir
            .spans
            .workloads
            .get(w.index())
            .map_or_else(Span::default, |s| s.name)
    }

    fn wfield(&self, w: WorkloadId, key: &str) -> Span {
        self.ir
            .spans
            .workloads
            .get(w.index())
            .map_or_else(Span::default, |s| s.field(key))
    }

    fn tspan(&self, t: TargetId) -> Span {
        self.ir
            .spans
            .targets
            .get(t.index())
            .map_or_else(Span::default, |s| s.name)
    }

    /// GPUs (or MIG slices) a placement holds, from the spec's per-replica need.
    fn gpus(&self, p: &Placed<'_>) -> u64 {
        p.replicas()
            .saturating_mul(u64::from(gpu_units(self.workload(p.w))))
    }

    /// GPUs held by the placements of workloads for which `pick` holds.
    fn gpus_where(&self, pick: impl Fn(&Workload) -> bool) -> u64 {
        self.placed
            .iter()
            .filter(|p| pick(self.workload(p.w)))
            .map(|p| self.gpus(p))
            .fold(0, u64::saturating_add)
    }

    fn placements_of(&self, w: WorkloadId) -> impl Iterator<Item = &Placed<'a>> {
        self.placed.iter().filter(move |p| p.w == w)
    }

    /// Compares a plan list that must hold one entry per spec item, in spec order, and
    /// reports unknown, duplicate and missing entries, or else a wrong order.
    fn check_list(
        &mut self,
        list: PlanList,
        expected: &[(String, Span)],
        found: &[String],
        unknown: impl Fn(&str) -> Violation,
    ) {
        let known: BTreeSet<&str> = expected.iter().map(|(n, _)| n.as_str()).collect();
        let mut seen = BTreeSet::new();
        let mut problems = Vec::new();
        for name in found {
            if !known.contains(name.as_str()) {
                problems.push(unknown(name));
            } else if !seen.insert(name.as_str()) {
                problems.push(Violation::DuplicateEntry {
                    list,
                    name: name.clone(),
                });
            }
        }
        for (name, span) in expected {
            if !seen.contains(name.as_str()) {
                problems.push(Violation::MissingEntry {
                    list,
                    name: name.clone(),
                    span: *span,
                });
            }
        }
        let in_order = expected.iter().map(|(n, _)| n).eq(found.iter());
        if problems.is_empty() && !in_order {
            problems.push(Violation::EntryOrder { list });
        }
        self.violations.extend(problems);
    }

    // ------------------------------------------------------------ plan as a document

    fn check_format(&mut self) {
        if self.plan.format != PLAN_FORMAT {
            self.push(Violation::UnsupportedFormat {
                found: self.plan.format.clone(),
            });
        }
    }

    fn check_instant(&mut self) {
        let matches = self
            .plan
            .at
            .parse::<Timestamp>()
            .is_ok_and(|recorded| recorded == self.at);
        if !matches {
            self.push(Violation::InstantMismatch {
                recorded: self.plan.at.clone(),
                expected: self.at.to_string(),
            });
        }
    }

    fn check_plan_id(&mut self) {
        let computed = crate::plan::plan_id(self.plan);
        if computed != self.plan.plan_id {
            self.push(Violation::PlanIdMismatch {
                recorded: self.plan.plan_id.clone(),
                computed,
            });
        }
    }

    /// Resolves every name in the plan; later checks see only what resolved.
    fn check_names(&mut self) {
        let ir = self.ir;
        let plan = self.plan;
        let expected: Vec<(String, Span)> = (0..ir.workloads.len())
            .map(|i| {
                let w = WorkloadId(i as u32);
                (self.wname(w), self.wspan(w))
            })
            .collect();
        let found: Vec<String> = plan.workloads.iter().map(|w| w.workload.clone()).collect();
        self.check_list(PlanList::Workloads, &expected, &found, |name| {
            Violation::UnknownName {
                kind: NameKind::Workload,
                name: name.to_owned(),
                context: None,
            }
        });

        let mut seen = BTreeSet::new();
        for wp in &plan.workloads {
            let Some(w) = ir.workload_by_name(&wp.workload) else {
                continue;
            };
            if !seen.insert(w) {
                continue;
            }
            self.check_workload_fields(w, wp);
            for placement in &wp.placements {
                if let Some(p) = self.resolve_placement(w, placement) {
                    self.placed.push(p);
                }
            }
            let targets = wp
                .fallback
                .iter()
                .chain(wp.rejected.iter().map(|r| &r.target));
            for t in targets {
                if ir.target_by_name(t).is_none() {
                    self.push(Violation::UnknownName {
                        kind: NameKind::Target,
                        name: t.clone(),
                        context: Some(format!("workload `{}`", wp.workload)),
                    });
                }
            }
            self.workloads.push(Resolved { w, plan: wp });
        }
    }

    fn check_workload_fields(&mut self, w: WorkloadId, wp: &WorkloadPlan) {
        let spec = self.workload(w);
        if wp.release != spec.release {
            self.push(Violation::FieldMismatch {
                workload: spec.name.clone(),
                target: None,
                field: "release",
                recorded: wp.release.clone(),
                expected: spec.release.clone(),
                span: self.wfield(w, "release"),
            });
        }
        if wp.replicas != spec.replicas {
            self.push(Violation::FieldMismatch {
                workload: spec.name.clone(),
                target: None,
                field: "replicas",
                recorded: wp.replicas.to_string(),
                expected: spec.replicas.to_string(),
                span: self.wfield(w, "replicas"),
            });
        }
    }

    fn resolve_placement(&mut self, w: WorkloadId, placement: &'a Placement) -> Option<Placed<'a>> {
        let Some(t) = self.ir.target_by_name(&placement.target) else {
            self.push(Violation::UnknownName {
                kind: NameKind::Target,
                name: placement.target.clone(),
                context: Some(format!("workload `{}`", self.wname(w))),
            });
            return None;
        };
        let pool = match &placement.pool {
            None => None,
            Some(name) => {
                let found = self.ir.targets[t.index()]
                    .pools
                    .iter()
                    .position(|p| &p.name == name);
                if found.is_none() {
                    self.push(Violation::UnknownName {
                        kind: NameKind::Pool,
                        name: name.clone(),
                        context: Some(format!("target `{}`", placement.target)),
                    });
                    return None;
                }
                found
            }
        };
        Some(Placed {
            w,
            placement,
            t,
            pool,
        })
    }

    // ------------------------------------------------------------ each placement

    fn check_candidates(&mut self) {
        let mut found = Vec::new();
        for p in &self.placed {
            let candidates = &self.workload(p.w).placement.candidates;
            if candidates.as_ref().is_some_and(|c| !c.contains(&p.t)) {
                found.push(Violation::NotCandidate {
                    workload: self.wname(p.w),
                    target: self.tname(p.t),
                    span: self.wspan(p.w),
                });
            }
        }
        self.violations.extend(found);
    }

    fn check_eligibility(&mut self) {
        let mut found = Vec::new();
        for p in &self.placed {
            let w = self.workload(p.w);
            let target = &self.ir.targets[p.t.index()];
            match fit::fit(self.ir, w, target, p.pool) {
                Err(unfit) => found.push(Violation::Ineligible {
                    workload: w.name.clone(),
                    target: target.name.clone(),
                    unfit,
                    span: self.wspan(p.w),
                }),
                Ok(f) => self.compare_fit(p, &f, &mut found),
            }
        }
        self.violations.extend(found);
    }

    /// Checks what a fitting placement records against what the spec implies.
    fn compare_fit(&self, p: &Placed<'_>, f: &fit::Fit, found: &mut Vec<Violation>) {
        let w = self.workload(p.w);
        let target = &self.ir.targets[p.t.index()];
        let pool = p.pool.and_then(|i| target.pools.get(i));
        let mismatch =
            |field: &'static str, recorded: String, expected: String| Violation::FieldMismatch {
                workload: w.name.clone(),
                target: Some(target.name.clone()),
                field,
                recorded,
                expected,
                span: self.wspan(p.w),
            };
        let units = gpu_units(w);
        if p.placement.gpus_per_replica != units {
            found.push(mismatch(
                "gpus_per_replica",
                p.placement.gpus_per_replica.to_string(),
                units.to_string(),
            ));
        }
        let accelerator = pool
            .and_then(|pool| fit::accelerator(self.ir, pool))
            .map(|a| a.name.clone());
        if p.placement.accelerator != accelerator {
            found.push(mismatch(
                "accelerator",
                or_none(&p.placement.accelerator),
                or_none(&accelerator),
            ));
        }
        self.compare_variant(p, f, found);
        for (req, binding) in w.data.iter().zip(&f.data) {
            let recorded = p.placement.data.iter().find(|d| d.name == req.name);
            if recorded != Some(binding) {
                found.push(mismatch(
                    "data",
                    recorded.map_or_else(|| "none".to_owned(), data_summary),
                    data_summary(binding),
                ));
            }
        }
        for extra in p
            .placement
            .data
            .iter()
            .filter(|d| !w.data.iter().any(|r| r.name == d.name))
        {
            found.push(mismatch("data", data_summary(extra), "none".to_owned()));
        }
        let recorded: BTreeSet<_> = p
            .placement
            .services
            .iter()
            .map(|s| (s.service.as_str(), s.maturity.as_str()))
            .collect();
        let expected: BTreeSet<_> = f
            .services
            .iter()
            .map(|s| (s.service.as_str(), s.maturity.as_str()))
            .collect();
        if recorded != expected {
            let list = |set: &BTreeSet<(&str, &str)>| {
                set.iter()
                    .map(|(s, m)| format!("{s}: {m}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            found.push(mismatch("services", list(&recorded), list(&expected)));
        }
    }

    fn compare_variant(&self, p: &Placed<'_>, f: &fit::Fit, found: &mut Vec<Violation>) {
        let w = self.workload(p.w);
        let model = w.model.and_then(|m| self.ir.models.get(m.index()));
        let expected = model
            .zip(f.variant)
            .and_then(|(m, i)| Some((m, m.variants.get(i)?)));
        let recorded = p.placement.variant.as_ref();
        let target = self.tname(p.t);
        let wrong = || Violation::WrongVariant {
            workload: w.name.clone(),
            target: target.clone(),
            pool: p.placement.pool.clone(),
            recorded: recorded.map(|v| v.variant.clone()),
            expected: expected.map(|(_, v)| v.name.clone()),
            span: self.wfield(p.w, "model"),
        };
        match (recorded, expected) {
            (None, None) => {}
            (Some(r), Some((m, v))) if r.variant == v.name => {
                let fields = [
                    ("variant.model", &r.model, &m.name),
                    ("variant.version", &r.version, &m.version),
                    ("variant.artifact", &r.artifact, &v.artifact),
                ];
                for (field, rec, exp) in fields {
                    if rec != exp {
                        found.push(Violation::FieldMismatch {
                            workload: w.name.clone(),
                            target: Some(target.clone()),
                            field,
                            recorded: rec.clone(),
                            expected: exp.clone(),
                            span: self.wfield(p.w, "model"),
                        });
                    }
                }
                if r.digest != v.digest {
                    found.push(Violation::FieldMismatch {
                        workload: w.name.clone(),
                        target: Some(target.clone()),
                        field: "variant.digest",
                        recorded: or_none(&r.digest),
                        expected: or_none(&v.digest),
                        span: self.wfield(p.w, "model"),
                    });
                }
            }
            _ => found.push(wrong()),
        }
    }

    // ------------------------------------------------------------ replicas and status

    fn check_replicas(&mut self) {
        let mut found = Vec::new();
        let mut feasible = true;
        for r in &self.workloads {
            let spec = self.workload(r.w);
            let mut placed: u64 = 0;
            for p in &r.plan.placements {
                if p.replicas == 0 {
                    found.push(Violation::EmptyPlacement {
                        workload: spec.name.clone(),
                        target: p.target.clone(),
                        span: self.wspan(r.w),
                    });
                }
                placed = placed.saturating_add(u64::from(p.replicas));
            }
            let declared = u64::from(spec.replicas);
            if placed > declared {
                found.push(Violation::TooManyReplicas {
                    workload: spec.name.clone(),
                    placed,
                    replicas: spec.replicas,
                    span: self.wfield(r.w, "replicas"),
                });
            }
            let status = if placed >= declared {
                WorkloadStatus::Placed
            } else if placed == 0 {
                WorkloadStatus::Unplaced
            } else {
                WorkloadStatus::Partial
            };
            feasible &= status == WorkloadStatus::Placed;
            let mismatch = |field, recorded: String, expected: String| Violation::StatusMismatch {
                workload: Some(spec.name.clone()),
                field,
                recorded,
                expected,
                span: self.wspan(r.w),
            };
            if r.plan.status != status {
                found.push(mismatch(
                    "status",
                    status_name(r.plan.status).to_owned(),
                    status_name(status).to_owned(),
                ));
            }
            let missing = declared.saturating_sub(placed);
            let recorded_missing = r
                .plan
                .unplaced
                .as_ref()
                .map(|u| u64::from(u.missing_replicas));
            let expected_missing = (missing > 0).then_some(missing);
            if recorded_missing != expected_missing {
                let show = |m: Option<u64>| m.map_or_else(|| "none".to_owned(), |m| m.to_string());
                found.push(mismatch(
                    "missing_replicas",
                    show(recorded_missing),
                    show(expected_missing),
                ));
            }
        }
        if self.plan.feasible != feasible {
            found.push(Violation::StatusMismatch {
                workload: None,
                field: "feasible",
                recorded: self.plan.feasible.to_string(),
                expected: feasible.to_string(),
                span: Span::default(),
            });
        }
        self.violations.extend(found);
    }

    // ------------------------------------------------------------ capacity

    /// Recomputed pool ledger: per (target, pool), GPUs per workload in workload order.
    fn pool_ledger(&self) -> BTreeMap<(TargetId, usize), BTreeMap<WorkloadId, u64>> {
        let mut ledger: BTreeMap<_, BTreeMap<_, u64>> = BTreeMap::new();
        for p in &self.placed {
            if let Some(pool) = p.pool {
                let gpus = self.gpus(p);
                if gpus > 0 {
                    let entry = ledger
                        .entry((p.t, pool))
                        .or_default()
                        .entry(p.w)
                        .or_default();
                    *entry = entry.saturating_add(gpus);
                }
            }
        }
        ledger
    }

    /// Recomputed (CPU millicores, memory bytes) per target.
    fn target_ledger(&self) -> BTreeMap<TargetId, (u64, u64)> {
        let mut ledger: BTreeMap<_, (u64, u64)> = BTreeMap::new();
        for p in &self.placed {
            let res = &self.workload(p.w).resources;
            let (cpu, memory) = ledger.entry(p.t).or_default();
            *cpu = cpu.saturating_add(p.replicas().saturating_mul(res.cpu_millis));
            *memory = memory.saturating_add(p.replicas().saturating_mul(res.memory));
        }
        ledger
    }

    fn check_pool_capacity(&mut self) {
        let mut found = Vec::new();
        for ((t, pool_index), by_workload) in self.pool_ledger() {
            let pool = &self.ir.targets[t.index()].pools[pool_index];
            let capacity = fit::pool_capacity(self.ir, pool);
            let allocated = by_workload
                .values()
                .fold(0, |a: u64, b| a.saturating_add(*b));
            if allocated > capacity {
                found.push(Violation::PoolOverCommitted {
                    target: self.tname(t),
                    pool: pool.name.clone(),
                    allocated,
                    capacity,
                    span: self.tspan(t),
                });
            }
        }
        self.violations.extend(found);
    }

    fn check_target_capacity(&mut self) {
        let mut found = Vec::new();
        for (t, (cpu, memory)) in self.target_ledger() {
            let target = &self.ir.targets[t.index()];
            let over = [
                (Resource::Cpu, cpu, target.cpu_millis),
                (Resource::Memory, memory, target.memory),
            ];
            for (resource, allocated, capacity) in over {
                if allocated > capacity {
                    found.push(Violation::TargetOverCommitted {
                        target: target.name.clone(),
                        resource,
                        allocated,
                        capacity,
                        span: self.tspan(t),
                    });
                }
            }
        }
        self.violations.extend(found);
    }

    /// The plan's own `pools` and `targets` ledgers must equal the recomputed ones.
    fn check_ledgers(&mut self) {
        let ir = self.ir;
        let pools = self.pool_ledger();
        let mut expected = Vec::new();
        let mut rows = BTreeMap::new();
        for (ti, target) in ir.targets.iter().enumerate() {
            let t = TargetId(ti as u32);
            for (pi, pool) in target.pools.iter().enumerate() {
                let key = format!("{}/{}", target.name, pool.name);
                expected.push((key.clone(), self.tspan(t)));
                let by_workload: Vec<(String, u64)> = pools
                    .get(&(t, pi))
                    .map(|m| m.iter().map(|(w, n)| (self.wname(*w), *n)).collect())
                    .unwrap_or_default();
                let allocated = by_workload
                    .iter()
                    .fold(0, |a: u64, (_, n)| a.saturating_add(*n));
                let accelerator =
                    fit::accelerator(ir, pool).map_or_else(String::new, |a| a.name.clone());
                rows.insert(
                    key,
                    (
                        t,
                        pool.name.clone(),
                        accelerator,
                        fit::pool_capacity(ir, pool),
                        allocated,
                        by_workload,
                    ),
                );
            }
        }
        let found: Vec<String> = self
            .plan
            .pools
            .iter()
            .map(|l| format!("{}/{}", l.target, l.pool))
            .collect();
        self.check_list(PlanList::PoolLedgers, &expected, &found, |name| {
            Violation::UnknownName {
                kind: NameKind::Pool,
                name: name.to_owned(),
                context: Some("pool ledger".to_owned()),
            }
        });
        let mut done = BTreeSet::new();
        for (key, ledger) in found.iter().zip(&self.plan.pools) {
            let Some((_, pool, accelerator, capacity, allocated, by_workload)) = rows.get(key)
            else {
                continue;
            };
            if !done.insert(key) {
                continue;
            }
            let recorded_by: Vec<(String, u64)> = ledger
                .by_workload
                .iter()
                .map(|e| (e.workload.clone(), e.amount))
                .collect();
            let fields = [
                (
                    "accelerator",
                    ledger.accelerator.clone(),
                    accelerator.clone(),
                ),
                (
                    "capacity",
                    ledger.capacity.to_string(),
                    capacity.to_string(),
                ),
                (
                    "allocated",
                    ledger.allocated.to_string(),
                    allocated.to_string(),
                ),
                (
                    "by_workload",
                    by_summary(&recorded_by),
                    by_summary(by_workload),
                ),
            ];
            for (field, recorded, recomputed) in fields {
                if recorded != recomputed {
                    self.push(Violation::LedgerMismatch {
                        target: ledger.target.clone(),
                        pool: Some(pool.clone()),
                        field,
                        recorded,
                        recomputed,
                    });
                }
            }
        }
        self.check_target_ledgers();
    }

    fn check_target_ledgers(&mut self) {
        let ir = self.ir;
        let used = self.target_ledger();
        let expected: Vec<(String, Span)> = ir
            .targets
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), self.tspan(TargetId(i as u32))))
            .collect();
        let found: Vec<String> = self.plan.targets.iter().map(|l| l.target.clone()).collect();
        self.check_list(PlanList::TargetLedgers, &expected, &found, |name| {
            Violation::UnknownName {
                kind: NameKind::Target,
                name: name.to_owned(),
                context: Some("target ledger".to_owned()),
            }
        });
        let mut done = BTreeSet::new();
        for ledger in &self.plan.targets {
            let Some(t) = ir.target_by_name(&ledger.target) else {
                continue;
            };
            if !done.insert(t) {
                continue;
            }
            let target = &ir.targets[t.index()];
            let (cpu, memory) = used.get(&t).copied().unwrap_or_default();
            let fields = [
                (
                    "cpu_millis_capacity",
                    ledger.cpu_millis_capacity,
                    target.cpu_millis,
                ),
                ("cpu_millis_allocated", ledger.cpu_millis_allocated, cpu),
                ("memory_capacity", ledger.memory_capacity, target.memory),
                ("memory_allocated", ledger.memory_allocated, memory),
            ];
            for (field, recorded, recomputed) in fields {
                let show = |n: u64| {
                    if field.starts_with("memory") {
                        violation::bytes(n)
                    } else {
                        n.to_string()
                    }
                };
                if recorded != recomputed {
                    self.push(Violation::LedgerMismatch {
                        target: target.name.clone(),
                        pool: None,
                        field,
                        recorded: show(recorded),
                        recomputed: show(recomputed),
                    });
                }
            }
        }
    }

    // ------------------------------------------------------------ policy

    /// The first deny rule that holds for `w` on `t`, as (index, rule).
    fn denied(&self, w: WorkloadId, t: TargetId) -> Option<usize> {
        self.ir
            .policy
            .denies
            .iter()
            .position(|d| eval::holds(self.ir, &d.condition, w, t))
    }

    fn check_denies(&mut self) {
        let mut found = Vec::new();
        for p in &self.placed {
            for (i, rule) in self.ir.policy.denies.iter().enumerate() {
                if eval::holds(self.ir, &rule.condition, p.w, p.t) {
                    found.push(Violation::Denied {
                        workload: self.wname(p.w),
                        target: self.tname(p.t),
                        policy: rule.policy.clone(),
                        reason: rule.reason.clone(),
                        span: self.ir.spans.denies.get(i).copied().unwrap_or_default(),
                    });
                }
            }
        }
        self.violations.extend(found);
    }

    fn check_entitlements(&mut self) {
        let ir = self.ir;
        let entitlements = &ir.policy.entitlements;
        if entitlements.is_empty() {
            return;
        }
        let mut found = Vec::new();
        for p in &self.placed {
            let w = self.workload(p.w);
            let target = &ir.targets[p.t.index()];
            let own: Vec<_> = entitlements
                .iter()
                .filter(|e| e.identity == w.identity)
                .collect();
            let breach = |breach| Violation::NotEntitled {
                workload: w.name.clone(),
                identity: w.identity.to_string(),
                target: target.name.clone(),
                breach,
                span: self.wfield(p.w, "identity"),
            };
            if own.is_empty() {
                if self.gpus(p) > 0 {
                    found.push(breach(Entitlement::None));
                }
                continue;
            }
            let pool = p.pool.and_then(|i| target.pools.get(i));
            for e in own {
                if let (Some(allowed), Some(pool)) = (&e.accelerators, pool)
                    && !allowed.contains(&pool.accelerator)
                {
                    found.push(breach(Entitlement::Accelerator {
                        policy: e.policy.clone(),
                        accelerator: fit::accelerator(ir, pool)
                            .map_or_else(String::new, |a| a.name.clone()),
                    }));
                }
                if let Some(allowed) = &e.environments
                    && !allowed.contains(&target.class)
                {
                    found.push(breach(Entitlement::Environment {
                        policy: e.policy.clone(),
                        class: target.class.to_string(),
                    }));
                }
            }
        }
        for (i, e) in entitlements.iter().enumerate() {
            let Some(max) = e.max_gpu else { continue };
            let used = self.gpus_where(|w| w.identity == e.identity);
            if used > u64::from(max) {
                found.push(Violation::OverEntitlement {
                    policy: e.policy.clone(),
                    identity: e.identity.to_string(),
                    used,
                    max,
                    span: ir.spans.entitlements.get(i).copied().unwrap_or_default(),
                });
            }
        }
        self.violations.extend(found);
    }

    fn check_quotas(&mut self) {
        let mut found = Vec::new();
        for (i, q) in self.ir.policy.quotas.iter().enumerate() {
            let used = self.gpus_where(|w| w.team == q.team);
            if used > u64::from(q.max_gpu) {
                found.push(Violation::OverQuota {
                    policy: q.policy.clone(),
                    team: q.team.clone(),
                    used,
                    max: q.max_gpu,
                    span: self.ir.spans.quotas.get(i).copied().unwrap_or_default(),
                });
            }
        }
        self.violations.extend(found);
    }

    fn check_windows(&mut self) {
        let ir = self.ir;
        let mut found = Vec::new();
        let mut states = Vec::new();
        let mut expected = Vec::new();
        for (i, win) in ir.policy.windows.iter().enumerate() {
            let span = ir.spans.windows.get(i).copied().unwrap_or_default();
            expected.push((win.name.clone(), span));
            match win.in_effect(self.at) {
                Ok(state) => states.push(Some(state)),
                Err(UnknownZone) => {
                    states.push(None);
                    found.push(Violation::UnknownTimeZone {
                        window: win.name.clone(),
                        zone: win.zone.clone(),
                        span,
                    });
                }
            }
        }
        let recorded: Vec<String> = self.plan.windows.iter().map(|w| w.window.clone()).collect();
        self.check_list(PlanList::Windows, &expected, &recorded, |name| {
            Violation::UnknownName {
                kind: NameKind::Window,
                name: name.to_owned(),
                context: None,
            }
        });
        let mut done = BTreeSet::new();
        for ws in &self.plan.windows {
            let Some(i) = ir.policy.windows.iter().position(|w| w.name == ws.window) else {
                continue;
            };
            if !done.insert(i) {
                continue;
            }
            if let Some(Some(state)) = states.get(i)
                && *state != ws.in_effect
            {
                found.push(Violation::WindowStateMismatch {
                    window: ws.window.clone(),
                    recorded: ws.in_effect,
                    expected: *state,
                    at: self.at.to_string(),
                    span: expected[i].1,
                });
            }
        }
        self.windows = states;
        self.violations.extend(found);
    }

    fn check_window_limits(&mut self) {
        let ir = self.ir;
        let mut found = Vec::new();
        for (i, limit) in ir.policy.limits.iter().enumerate() {
            let in_effect = self.windows.get(limit.window.index()).copied().flatten();
            if in_effect != Some(true) {
                continue;
            }
            let used = self.gpus_where(|w| limit.selector.matches(w));
            if used > u64::from(limit.max_gpu) {
                let window = ir
                    .policy
                    .windows
                    .get(limit.window.index())
                    .map_or_else(String::new, |w| w.name.clone());
                found.push(Violation::WindowLimitExceeded {
                    policy: limit.policy.clone(),
                    window,
                    selector: limit.selector.to_string(),
                    used,
                    max: limit.max_gpu,
                    span: ir.spans.limits.get(i).copied().unwrap_or_default(),
                });
            }
        }
        self.violations.extend(found);
    }

    // ------------------------------------------------------------ placement rules

    fn check_spread(&mut self) {
        let mut found = Vec::new();
        for r in &self.workloads {
            let spec = self.workload(r.w);
            let rules = &spec.placement;
            let mut per_target: BTreeMap<TargetId, u64> = BTreeMap::new();
            // A target without a region is a region of its own (keyed apart from named ones).
            let mut per_region: BTreeMap<(bool, String), u64> = BTreeMap::new();
            for p in self.placements_of(r.w) {
                let target = &self.ir.targets[p.t.index()];
                *per_target.entry(p.t).or_default() += p.replicas();
                let region = match &target.region {
                    Some(region) => (true, region.clone()),
                    None => (false, target.name.clone()),
                };
                *per_region.entry(region).or_default() += p.replicas();
            }
            let span = self.wspan(r.w);
            if let Some(max) = rules.per_target {
                for (t, placed) in per_target {
                    if placed > u64::from(max) {
                        found.push(Violation::SpreadExceeded {
                            workload: spec.name.clone(),
                            scope: SpreadScope::Target(self.tname(t)),
                            placed,
                            max,
                            span,
                        });
                    }
                }
            }
            if let Some(max) = rules.per_region {
                for ((_, region), placed) in per_region {
                    if placed > u64::from(max) {
                        found.push(Violation::SpreadExceeded {
                            workload: spec.name.clone(),
                            scope: SpreadScope::Region(region),
                            placed,
                            max,
                            span,
                        });
                    }
                }
            }
        }
        self.violations.extend(found);
    }

    fn check_isolation(&mut self) {
        let mut occupants: BTreeMap<(TargetId, usize), BTreeSet<WorkloadId>> = BTreeMap::new();
        for p in &self.placed {
            if let Some(pool) = p.pool
                && p.placement.replicas > 0
            {
                occupants.entry((p.t, pool)).or_default().insert(p.w);
            }
        }
        let mut reported = BTreeSet::new();
        let mut found = Vec::new();
        for ((t, pool), ws) in &occupants {
            for &w in ws {
                for &other in &self.workload(w).placement.isolate_from {
                    let pair = (w.min(other), w.max(other), *t, *pool);
                    if other != w && ws.contains(&other) && reported.insert(pair) {
                        found.push(Violation::IsolationBroken {
                            workload: self.wname(w),
                            other: self.wname(other),
                            target: self.tname(*t),
                            pool: self.ir.targets[t.index()].pools[*pool].name.clone(),
                            span: self.wspan(w),
                        });
                    }
                }
            }
        }
        self.violations.extend(found);
    }

    // ------------------------------------------------------------ cost and approval

    /// `replicas × GPUs per replica × gpu_hour × 24` for one placement.
    fn placement_cost(&self, p: &Placed<'_>) -> Money {
        let gpu_hour = self.ir.targets[p.t.index()]
            .cost
            .gpu_hour
            .unwrap_or_default();
        let cost = i128::from(self.gpus(p)) * i128::from(gpu_hour.0) * 24;
        Money(i64::try_from(cost).unwrap_or(i64::MAX))
    }

    /// Recomputed `cost_per_day` of a workload.
    fn workload_cost(&self, w: WorkloadId) -> Money {
        Money(
            self.placements_of(w)
                .map(|p| self.placement_cost(p).0)
                .fold(0, i64::saturating_add),
        )
    }

    fn check_cost(&mut self) {
        let mut found = Vec::new();
        for p in &self.placed {
            let expected = self.placement_cost(p);
            if p.placement.cost_per_day != expected {
                found.push(Violation::CostMismatch {
                    workload: self.wname(p.w),
                    target: Some(self.tname(p.t)),
                    recorded: p.placement.cost_per_day,
                    expected,
                    span: self.wspan(p.w),
                });
            }
        }
        for r in &self.workloads {
            let expected = self.workload_cost(r.w);
            if r.plan.cost_per_day != expected {
                found.push(Violation::CostMismatch {
                    workload: self.wname(r.w),
                    target: None,
                    recorded: r.plan.cost_per_day,
                    expected,
                    span: self.wspan(r.w),
                });
            }
        }
        self.violations.extend(found);
    }

    fn check_approvals(&mut self) {
        let ir = self.ir;
        let mut found = Vec::new();
        for r in &self.workloads {
            let cost = self.workload_cost(r.w);
            let exceeded: Vec<_> = ir
                .policy
                .approvals
                .iter()
                .enumerate()
                .filter(|(_, a)| cost > a.cost_per_day_above)
                .collect();
            let recorded = r.plan.approval.as_ref();
            let matches = |a: &crate::ir::Approval| {
                recorded.is_some_and(|rec| {
                    rec.policy == a.policy
                        && rec.threshold == a.cost_per_day_above
                        && rec.approvers == a.approvers
                })
            };
            match (recorded, exceeded.first()) {
                (None, None) => {}
                (None, Some((i, a))) => found.push(Violation::ApprovalMissing {
                    workload: self.wname(r.w),
                    cost_per_day: cost,
                    policy: a.policy.clone(),
                    threshold: a.cost_per_day_above,
                    span: ir.spans.approvals.get(*i).copied().unwrap_or_default(),
                }),
                (Some(rec), _) => {
                    if !exceeded.iter().any(|(_, a)| matches(a)) {
                        found.push(Violation::ApprovalUnwarranted {
                            workload: self.wname(r.w),
                            cost_per_day: cost,
                            policy: rec.policy.clone(),
                            span: self.wspan(r.w),
                        });
                    }
                }
            }
        }
        self.violations.extend(found);
    }

    // ------------------------------------------------------------ fallback, rejections, reclaim

    fn check_fallback(&mut self) {
        let ir = self.ir;
        let mut found = Vec::new();
        for r in &self.workloads {
            let spec = self.workload(r.w);
            for name in &r.plan.fallback {
                let Some(t) = ir.target_by_name(name) else {
                    continue;
                };
                let problem = if !spec.placement.fallback.contains(&t) {
                    Some(FallbackProblem::NotInSpec)
                } else if let Err(unfit) = fit::target_fit(ir, spec, t) {
                    Some(FallbackProblem::Ineligible(unfit))
                } else {
                    self.denied(r.w, t).and_then(|i| {
                        let rule = ir.policy.denies.get(i)?;
                        Some(FallbackProblem::Denied {
                            policy: rule.policy.clone(),
                            reason: rule.reason.clone(),
                        })
                    })
                };
                if let Some(problem) = problem {
                    found.push(Violation::BadFallback {
                        workload: spec.name.clone(),
                        target: name.clone(),
                        problem,
                        span: self.wfield(r.w, "fallback"),
                    });
                }
            }
        }
        self.violations.extend(found);
    }

    fn check_rejections(&mut self) {
        let ir = self.ir;
        let mut found = Vec::new();
        for r in &self.workloads {
            let spec = self.workload(r.w);
            let used: BTreeSet<&str> = r
                .plan
                .placements
                .iter()
                .map(|p| p.target.as_str())
                .collect();
            let mut seen = BTreeSet::new();
            let span = self.wspan(r.w);
            let problem = |target: &str, problem| Violation::RejectionMismatch {
                workload: spec.name.clone(),
                target: target.to_owned(),
                problem,
                span,
            };
            for rej in &r.plan.rejected {
                let Some(t) = ir.target_by_name(&rej.target) else {
                    continue;
                };
                if used.contains(rej.target.as_str()) {
                    found.push(problem(&rej.target, RejectionProblem::UsedTarget));
                } else if !seen.insert(t) {
                    found.push(problem(&rej.target, RejectionProblem::Duplicate));
                } else if rej.stage == RejectionStage::Eligibility
                    && rej.reason != "not_candidate"
                    && fit::target_fit(ir, spec, t).is_ok()
                {
                    found.push(problem(&rej.target, RejectionProblem::ActuallyEligible));
                }
            }
            // Targets rejected but not listed one by one are counted in `others`.
            let unlisted: Vec<&str> = ir
                .targets
                .iter()
                .enumerate()
                .filter(|(i, t)| {
                    !used.contains(t.name.as_str()) && !seen.contains(&TargetId(*i as u32))
                })
                .map(|(_, t)| t.name.as_str())
                .collect();
            let others = r
                .plan
                .rejected
                .iter()
                .fold(0u64, |n, rej| n.saturating_add(u64::from(rej.others)));
            if others == 0 {
                for name in unlisted {
                    found.push(problem(name, RejectionProblem::Unaccounted));
                }
            } else if others != unlisted.len() as u64 {
                found.push(Violation::RejectionCount {
                    workload: spec.name.clone(),
                    others,
                    unlisted: unlisted.len() as u64,
                    span,
                });
            }
        }
        self.violations.extend(found);
    }

    fn check_reclaims(&mut self) {
        let ir = self.ir;
        let expected = crate::plan::reclaim_rules(ir);
        let recorded = &self.plan.reclaims;
        let mut found = Vec::new();
        for i in 0..expected.len().max(recorded.len()) {
            let span = ir.spans.reclaims.get(i).copied().unwrap_or_default();
            match (recorded.get(i), expected.get(i)) {
                (Some(rec), Some(exp)) if rec != exp => found.push(Violation::ReclaimMismatch {
                    policy: exp.policy.clone(),
                    recorded: reclaim_summary(rec),
                    expected: reclaim_summary(exp),
                    span,
                }),
                (None, Some(exp)) => found.push(Violation::MissingEntry {
                    list: PlanList::Reclaims,
                    name: format!("{} ({})", exp.policy, exp.selector),
                    span,
                }),
                (Some(rec), None) => found.push(Violation::ReclaimMismatch {
                    policy: rec.policy.clone(),
                    recorded: reclaim_summary(rec),
                    expected: "no such rule".to_owned(),
                    span,
                }),
                _ => {}
            }
        }
        self.violations.extend(found);
    }
}

// ---------------------------------------------------------------- text of plan values

fn status_name(s: WorkloadStatus) -> &'static str {
    match s {
        WorkloadStatus::Placed => "placed",
        WorkloadStatus::Partial => "partial",
        WorkloadStatus::Unplaced => "unplaced",
    }
}

fn or_none(s: &Option<String>) -> String {
    s.clone().unwrap_or_else(|| "none".to_owned())
}

fn data_summary(d: &crate::plan::DataBinding) -> String {
    format!(
        "{} = {} {} via {} at {}",
        d.name,
        d.dataset,
        d.locality,
        d.endpoint.as_deref().unwrap_or("no endpoint"),
        violation::duration(d.latency_ns)
    )
}

fn by_summary(entries: &[(String, u64)]) -> String {
    if entries.is_empty() {
        return "nothing".to_owned();
    }
    entries
        .iter()
        .map(|(w, n)| format!("{w}: {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn reclaim_summary(r: &ReclaimRule) -> String {
    format!(
        "{} idle after {} for [{}]",
        r.selector,
        violation::duration(r.idle_after_ns),
        r.workloads.join(", ")
    )
}
