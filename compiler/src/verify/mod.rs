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

mod checks;
mod fit;
mod violation;

#[cfg(any(test, feature = "testing"))]
pub use fit::Unfit;
pub use violation::{
    Entitlement, FallbackProblem, NameKind, PlanList, ReasonProblem, RejectionProblem, Resource,
    SpreadScope, Violation,
};

use crate::ir::{Ir, TargetId, Workload, WorkloadId};
use crate::plan::{Placement, Plan, ReclaimRule, Verification, WorkloadPlan, WorkloadStatus};
use crate::source::Span;
use fit::gpu_units;
use jiff::Timestamp;
use std::collections::{BTreeSet, HashMap};

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
        names: Names::of(ir),
        workloads: Vec::new(),
        placed: Vec::new(),
        placed_of: Vec::new(),
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

/// The spec's workloads and targets by name (the first of a name, as the plan's names
/// resolve), looked up once per name the plan holds rather than by a scan each time.
struct Names<'a> {
    workloads: HashMap<&'a str, WorkloadId>,
    targets: HashMap<&'a str, TargetId>,
}

impl<'a> Names<'a> {
    fn of(ir: &'a Ir) -> Self {
        let mut workloads = HashMap::with_capacity(ir.workloads.len());
        for (i, w) in ir.workloads.iter().enumerate() {
            workloads
                .entry(w.name.as_str())
                .or_insert(WorkloadId(i as u32));
        }
        let mut targets = HashMap::with_capacity(ir.targets.len());
        for (i, t) in ir.targets.iter().enumerate() {
            targets.entry(t.name.as_str()).or_insert(TargetId(i as u32));
        }
        Names { workloads, targets }
    }
}

struct Verifier<'a> {
    ir: &'a Ir,
    plan: &'a Plan,
    at: Timestamp,
    names: Names<'a>,
    /// Plan workloads that resolved, first occurrence of each name only.
    workloads: Vec<Resolved<'a>>,
    /// Placements of those workloads that resolved.
    placed: Vec<Placed<'a>>,
    /// Per spec workload, the indices of its entries in `placed` (filled with it).
    placed_of: Vec<Vec<u32>>,
    /// Each spec window's state at `at`; `None` when its zone is unknown.
    windows: Vec<Option<bool>>,
    violations: Vec<Violation>,
}

// INVARIANT: `Resolved` and `Placed` hold ids the verifier resolved by name against this IR
// (`resolve_placement`), never ids read from the plan.
#[allow(clippy::indexing_slicing)]
impl<'a> Verifier<'a> {
    // ------------------------------------------------------------ helpers

    /// The spec's workload named `name` (the first, if several are).
    fn workload_id(&self, name: &str) -> Option<WorkloadId> {
        self.names.workloads.get(name).copied()
    }

    /// The spec's target named `name` (the first, if several are).
    fn target_id(&self, name: &str) -> Option<TargetId> {
        self.names.targets.get(name).copied()
    }

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
        self.placed_of
            .get(w.index())
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .map(|&i| &self.placed[i as usize])
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
