//! The placement engine: from the IR to a [`Plan`].
//!
//! Stages, each its own module: [`index`] (per-target lookup tables), [`eligibility`] (what
//! is technically possible, every pair, in parallel), [`policy`] (what is permitted, and the
//! caps), [`assign`] (replicas onto pools, capacity-aware; with the `exact` feature, its
//! replicas raised by HiGHS where it finds more, [`solve_raised`], or the assignment exact,
//! [`solve_exact`]), then this module assembles the
//! plan: placements with their realisation (variant, data endpoints, service bindings,
//! cost, score), rejected targets with reasons ([`reasons`]), infeasibility explained
//! ([`infeasible`]), ledgers, window states, approvals and reclaims. [`screen`] runs the
//! stages that depend on neither load nor time alone, for the fleet analysis. `classes`
//! groups workloads whose work is shared (issue 22).
//!
//! The meaning of every form and the algorithm are documented in `docs/placement.md`.
//! Deterministic: the same IR and instant give byte-identical JSON; parallel stages write
//! into preallocated slots or collect in order, and nothing iterates a hashed collection.

pub mod assign;
mod classes;
pub mod eligibility;
#[cfg(feature = "exact")]
pub mod exact;
pub mod index;
pub(crate) mod infeasible;
pub mod policy;
pub(crate) mod reasons;
mod rows;
pub mod screen;
pub(crate) mod tally;
pub mod units;
pub mod verdict;

use crate::ir::{Ir, Money, TargetId, WorkloadId};
use crate::plan::{
    ApprovalRequired, DataBinding, LedgerEntry, PLAN_FORMAT, Placement, Plan, PoolLedger,
    Rejection, RejectionStage, ScoreTerm, ServiceBinding, TargetLedger, VariantBinding,
    Verification, WindowState, WorkloadPlan, WorkloadStatus,
};
use crate::source::SourceMap;
use assign::{Assignment, NO_POOL, Opt};
use eligibility::{EligibilityMatrix, NO_VARIANT};
use index::EstateIndex;
use infeasible::UnusedContext;
use jiff::Timestamp;
use policy::PolicyContext;
use rayon::prelude::*;
use verdict::{Reason, Verdict};

/// Estates up to this many targets list every rejected target of every workload.
pub const FULL_LISTING_TARGETS: usize = 100;

/// In larger estates, rejections of one workload for the same reason listed one by one;
/// the last listed counts the others (`Rejection::others`; see `docs/placement.md`).
pub const REJECTIONS_LISTED_PER_REASON: usize = 3;

/// Everything the stages decided, for assembling and explaining the plan.
pub struct Solved<'a> {
    pub ir: &'a Ir,
    pub sources: &'a SourceMap,
    pub index: EstateIndex,
    pub matrix: EligibilityMatrix,
    pub policy: PolicyContext,
    pub assignment: Assignment,
}

/// Runs every stage, the assignment the heuristic's.
pub fn solve<'a>(ir: &'a Ir, sources: &'a SourceMap, at: Timestamp) -> Solved<'a> {
    solve_with(ir, sources, at, assign::assign)
}

/// Runs every stage, the assignment the heuristic's with its replicas raised where HiGHS
/// finds an assignment placing more ([`exact::raise_replicas`]).
#[cfg(feature = "exact")]
pub fn solve_raised<'a>(
    ir: &'a Ir,
    sources: &'a SourceMap,
    at: Timestamp,
) -> (Solved<'a>, exact::RaiseOutcome) {
    let mut outcome = exact::RaiseOutcome::NothingShort;
    let solved = solve_with(ir, sources, at, |ir, index, matrix, policy| {
        let heuristic = assign::assign(ir, index, matrix, policy);
        let (assignment, how) = exact::raise_replicas(ir, index, policy, heuristic);
        outcome = how;
        assignment
    });
    (solved, outcome)
}

/// Runs every stage, the assignment exact where it can be ([`exact`]), HiGHS given
/// `time_limit_s` seconds in all.
#[cfg(feature = "exact")]
pub fn solve_exact<'a>(
    ir: &'a Ir,
    sources: &'a SourceMap,
    at: Timestamp,
    time_limit_s: f64,
) -> (Solved<'a>, exact::ExactOutcome) {
    let mut outcome = exact::ExactOutcome::Optimal;
    let solved = solve_with(ir, sources, at, |ir, index, matrix, policy| {
        let (assignment, how) = exact::assign_exact(ir, index, matrix, policy, time_limit_s);
        outcome = how;
        assignment
    });
    (solved, outcome)
}

/// The stages before assignment, then `assign`.
fn solve_with<'a>(
    ir: &'a Ir,
    sources: &'a SourceMap,
    at: Timestamp,
    assign: impl FnOnce(&Ir, &EstateIndex, &EligibilityMatrix, &PolicyContext) -> Assignment,
) -> Solved<'a> {
    let index = EstateIndex::build(ir);
    let mut matrix = EligibilityMatrix::compute(ir, &index);
    let policy = PolicyContext::new(ir, at);
    policy.apply(ir, &index, &mut matrix);
    let assignment = assign(ir, &index, &matrix, &policy);
    Solved {
        ir,
        sources,
        index,
        matrix,
        policy,
        assignment,
    }
}

#[cfg(any(test, feature = "testing"))]
/// Plans `ir` at instant `at`. `verification` is left empty: the driver fills it once the
/// independent verifier has passed the plan.
pub fn plan(
    ir: &Ir,
    sources: &SourceMap,
    at: Timestamp,
    source_digest: &str,
    compiler_version: &str,
) -> Plan {
    let solved = solve(ir, sources, at);
    solved.plan(at, source_digest, compiler_version)
}

// INVARIANT: every index is a dense id of the IR being placed (workload < `ir.workloads.len()`,
// target < `ir.targets.len()`, a pool < its target's pools) or a position in a table the solver
// sized from those counts when it built it (`EstateIndex`, `EligibilityMatrix`, `Assignment`'s
// options and slots, the ledgers); nothing from user text indexes here. Indexing is the hot
// path; the property tests and planted estates run it over generated estates.
#[allow(clippy::indexing_slicing)]
impl Solved<'_> {
    /// Assembles the plan.
    pub fn plan(&self, at: Timestamp, source_digest: &str, compiler_version: &str) -> Plan {
        let ir = self.ir;
        let first_options = first_options(&self.assignment.options);
        let shared = if ir.targets.len() <= FULL_LISTING_TARGETS {
            rows::Shared::default()
        } else {
            rows::Shared {
                summaries: rows::summaries(&self.matrix, REJECTIONS_LISTED_PER_REASON),
                blocked: rows::SharedBlocked::compute(self, &first_options),
            }
        };
        let workloads: Vec<WorkloadPlan> = (0..ir.workloads.len())
            .into_par_iter()
            .with_min_len(16)
            .map(|w| self.workload_plan(w, &first_options[w], &shared))
            .collect();
        let mut plan = Plan {
            format: PLAN_FORMAT.into(),
            compiler_version: compiler_version.into(),
            source_digest: source_digest.into(),
            at: at.to_string(),
            plan_id: String::new(),
            feasible: workloads.iter().all(|w| w.status == WorkloadStatus::Placed),
            workloads,
            pools: self.pool_ledgers(),
            targets: Vec::new(),
            windows: ir
                .policy
                .windows
                .iter()
                .zip(&self.policy.window_in_effect)
                .map(|(w, on)| WindowState {
                    window: w.name.clone(),
                    in_effect: *on,
                })
                .collect(),
            reclaims: crate::plan::reclaim_rules(ir),
            verification: Verification::default(),
        };
        plan.targets = self.target_ledgers(&plan.workloads);
        plan.plan_id = crate::plan::plan_id(&plan);
        plan
    }

    fn workload_plan(
        &self,
        w: usize,
        first_option: &[(u32, u32)],
        shared: &rows::Shared,
    ) -> WorkloadPlan {
        let ir = self.ir;
        let workload = &ir.workloads[w];
        let a = &self.assignment;
        let mut slots: Vec<(Opt, u32)> = a.slots[w]
            .iter()
            .map(|(i, n)| (a.options[w][*i as usize], *n))
            .collect();
        slots.sort_by_key(|(o, _)| (o.target, o.pool));
        let placements: Vec<Placement> = slots
            .iter()
            .map(|(o, n)| self.placement(w, o, *n))
            .collect();
        let placed: u32 = slots.iter().map(|(_, n)| n).sum();
        let cost = Money(
            placements
                .iter()
                .map(|p| p.cost_per_day.0)
                .fold(0i64, i64::saturating_add),
        );
        let status = if placed >= workload.replicas {
            WorkloadStatus::Placed
        } else if placed == 0 {
            WorkloadStatus::Unplaced
        } else {
            WorkloadStatus::Partial
        };
        let approval = ir
            .policy
            .approvals
            .iter()
            .find(|rule| cost > rule.cost_per_day_above)
            .map(|rule| ApprovalRequired {
                policy: rule.policy.clone(),
                threshold: rule.cost_per_day_above,
                approvers: rule.approvers.clone(),
                trust: rule.trust.clone(),
            });
        let fallback = workload
            .placement
            .fallback
            .iter()
            .filter(|t| self.matrix.get(w, t.index()).is_ok())
            .map(|t| ir.targets[t.index()].name.clone())
            .collect();
        WorkloadPlan {
            workload: workload.name.clone(),
            release: workload.release.clone(),
            status,
            replicas: workload.replicas,
            placements,
            rejected: self.rejections(w, &slots, first_option, shared),
            cost_per_day: cost,
            approval,
            fallback,
            unplaced: (placed < workload.replicas)
                .then(|| self.infeasibility(w, workload.replicas - placed)),
        }
    }

    fn placement(&self, w: usize, o: &Opt, replicas: u32) -> Placement {
        let ir = self.ir;
        let workload = &ir.workloads[w];
        let t = o.target as usize;
        let target = &ir.targets[t];
        let pool = (o.pool != NO_POOL)
            .then(|| target.pools.get(o.pool as usize))
            .flatten();
        let variant = workload
            .model
            .and_then(|id| Some((id, ir.models.get(id.index())?)))
            .and_then(|(id, m)| {
                let v =
                    (o.variant != NO_VARIANT).then(|| m.variants.get(usize::from(o.variant)))??;
                // Eligibility placed only variants that can be staged here; were one not, the
                // verifier refuses the placement, whatever this records.
                let staging = crate::plan::artifact_staging(target, id, v).unwrap_or(
                    crate::plan::ArtifactStaging {
                        from: crate::plan::StagingSource::Source,
                        pull: vec![v.artifact.clone()],
                        bytes: v.size,
                    },
                );
                Some(VariantBinding {
                    model: m.name.clone(),
                    version: m.version.clone(),
                    variant: v.name.clone(),
                    artifact: v.artifact.clone(),
                    digest: v.digest.clone(),
                    staging,
                })
            });
        let data = workload
            .data
            .iter()
            .filter_map(|d| {
                let offer = target.data.iter().find(|x| x.name == d.name)?;
                Some(DataBinding {
                    name: d.name.clone(),
                    dataset: d.dataset.clone(),
                    locality: offer.locality.as_str().into(),
                    endpoint: offer.endpoint.clone(),
                    latency_ns: offer.latency,
                })
            })
            .collect();
        let services = workload
            .services
            .iter()
            .map(|s| ServiceBinding {
                service: ir
                    .services
                    .get(s.service.index())
                    .map_or(String::new(), |x| x.name.clone()),
                maturity: self.index.maturity(t, s.service).as_str().into(),
            })
            .collect();
        let per_replica = assign::replica_cost_per_day(ir, w, t);
        let score = assign::preferences(ir, w)
            .iter()
            .zip(o.objectives)
            .map(|(p, value)| ScoreTerm {
                objective: p.as_str().into(),
                value,
            })
            .collect();
        Placement {
            target: target.name.clone(),
            pool: pool.map(|p| p.name.clone()),
            replicas,
            gpus_per_replica: if pool.is_some() {
                eligibility::gpu_units(workload)
            } else {
                0
            },
            accelerator: pool.map(|p| reasons::accel(ir, p.accelerator).to_string()),
            variant,
            data,
            services,
            cost_per_day: Money(per_replica.0.saturating_mul(i64::from(replicas))),
            score,
        }
    }

    /// Why target `t` holds no replica of workload `w` — the rejection the plan lists, or
    /// would list if it were not summarised (`berth explain W T`); `None` when it holds some.
    pub fn explain(&self, w: WorkloadId, t: TargetId) -> Option<Rejection> {
        let (w, t) = (w.index(), t.index());
        if w >= self.ir.workloads.len() || t >= self.ir.targets.len() {
            return None;
        }
        let a = &self.assignment;
        let options = &a.options[w];
        if a.slots[w]
            .iter()
            .any(|(i, _)| options[*i as usize].target as usize == t)
        {
            return None;
        }
        let v = if self.matrix.get(w, t).is_ok() {
            let first = options.iter().position(|o| o.target as usize == t);
            self.unused_verdict(w, first)
        } else {
            self.verdict(w, t)
        };
        Some(self.rejection(w, t, v))
    }

    /// The eligibility or policy verdict of pair (`w`, `t`), with its detail.
    pub fn verdict(&self, w: usize, t: usize) -> Verdict {
        let cell = self.matrix.get(w, t);
        match cell.reason().map(Reason::stage) {
            None => Verdict::OK,
            Some(RejectionStage::Eligibility) => self.matrix.explain(self.ir, &self.index, w, t),
            Some(_) => {
                let (ir, index) = (self.ir, &self.index);
                self.policy.explain(ir, index, self.matrix.fits(), w, t)
            }
        }
    }

    /// Every target `w` does not use, with its reason. Beyond [`FULL_LISTING_TARGETS`]
    /// targets, per reason only the first [`REJECTIONS_LISTED_PER_REASON`] (in IR order) are
    /// listed and the last of them counts the others.
    ///
    /// `shared` (empty when every rejection is listed) lets a workload whose replicas are all
    /// placed skip the walk over its targets: see [`Self::summarised`].
    fn rejections(
        &self,
        w: usize,
        slots: &[(Opt, u32)],
        first_option: &[(u32, u32)],
        shared: &rows::Shared,
    ) -> Vec<Rejection> {
        let limit = if self.ir.targets.len() <= FULL_LISTING_TARGETS {
            usize::MAX
        } else {
            REJECTIONS_LISTED_PER_REASON
        };
        let mut used: Vec<u32> = slots.iter().map(|(o, _)| o.target).collect();
        used.sort_unstable();
        used.dedup();
        let context = self.unused_context(w);
        let summary = shared.summaries.get(self.matrix.row_id(w) as usize);
        let (counts, listed) = match (context, summary) {
            (UnusedContext::Full { not_needed_from }, Some(summary)) if limit != usize::MAX => {
                let class_blocked = shared.blocked.of(w);
                self.summarised(
                    w,
                    &used,
                    first_option,
                    not_needed_from,
                    summary,
                    limit,
                    class_blocked,
                )
            }
            _ => self.walked(w, &used, first_option, &context, limit),
        };
        let mut shown = [0u32; Reason::COUNT];
        listed
            .into_iter()
            .map(|(t, v)| {
                let r = v.reason().unwrap_or(Reason::NotNeeded) as usize;
                shown[r] += 1;
                let mut rejection = self.rejection(w, t, v);
                if shown[r] as usize == limit {
                    rejection.others = counts[r] - shown[r];
                }
                rejection
            })
            .collect()
    }

    /// The unused targets of a workload whose replicas are all placed, from its row's
    /// summary: the refused ones are the row's (the same for every workload of the row); of
    /// the permitted ones, only those its options rank better than the worst used can be
    /// anything but `not_needed`, and those are a prefix of its options. Returns the count
    /// per reason and the first `limit` per reason, in target order, as [`Self::walked`]
    /// does.
    #[allow(clippy::too_many_arguments)]
    fn summarised(
        &self,
        w: usize,
        used: &[u32],
        first_option: &[(u32, u32)],
        not_needed_from: usize,
        summary: &rows::RowSummary,
        limit: usize,
        class_blocked: Option<&rows::Blocked>,
    ) -> ([u32; Reason::COUNT], Vec<(usize, Verdict)>) {
        // The targets ranked better than the worst used that something keeps `w` off: its
        // class's (`rows::SharedBlocked`), or found here from the table `first_options` built.
        let own;
        let blocked = match class_blocked {
            Some(class) => class,
            None => {
                own = rows::Blocked::of(self, w, first_option, not_needed_from, used);
                &own
            }
        };
        // Counted by reason; listed, the first `limit` of each (no other source gives an
        // assignment-stage reason but `not_needed`, listed below).
        let mut counts = summary.counts;
        let (n_blocked, blocked_listed) = blocked.read(not_needed_from, used, limit, &mut counts);
        let used_permitted = used
            .iter()
            .filter(|&&t| self.matrix.get(w, t as usize).is_ok())
            .count();
        let not_needed = summary.permitted.len() - used_permitted - n_blocked;
        counts[Reason::NotNeeded as usize] += not_needed as u32;
        // Candidates for listing: the row's first refused per reason, the blocked ones, and
        // the first permitted targets that are neither used nor blocked.
        let mut candidates: Vec<(usize, Verdict)> = summary
            .first
            .iter()
            .map(|&(t, cell)| {
                let v = Verdict::reject(cell.reason().unwrap_or(Reason::NotNeeded), 0);
                (t as usize, v)
            })
            .collect();
        candidates.extend(blocked_listed);
        candidates.extend(
            summary
                .permitted
                .iter()
                .filter(|&&t| used.binary_search(&t).is_err() && !blocked.holds(t, not_needed_from))
                .take(limit)
                .map(|&t| (t as usize, Verdict::reject(Reason::NotNeeded, 0))),
        );
        candidates.sort_unstable_by_key(|(t, _)| *t);
        let mut taken = [0u32; Reason::COUNT];
        let listed = candidates
            .into_iter()
            .filter_map(|(t, v)| {
                let r = v.reason().unwrap_or(Reason::NotNeeded) as usize;
                taken[r] += 1;
                let permitted = self.matrix.get(w, t).is_ok();
                ((taken[r] as usize) <= limit)
                    .then(|| (t, if permitted { v } else { self.verdict(w, t) }))
            })
            .collect();
        (counts, listed)
    }

    /// The unused targets of `w` one by one: the count per reason and the first `limit` per
    /// reason, in target order.
    fn walked(
        &self,
        w: usize,
        used: &[u32],
        first_option: &[(u32, u32)],
        context: &UnusedContext,
        limit: usize,
    ) -> ([u32; Reason::COUNT], Vec<(usize, Verdict)>) {
        let mut counts = [0u32; Reason::COUNT];
        let mut listed: Vec<(usize, Verdict)> = Vec::new();
        let mut next_used = used.iter().peekable();
        // Targets ascend, and so does `first_option`: one cursor walks it.
        let mut next_first = first_option.iter().peekable();
        for (t, &v) in self.matrix.row(w).iter().enumerate() {
            if next_used.peek() == Some(&&(t as u32)) {
                next_used.next();
                continue;
            }
            let permitted = v.is_ok();
            let v = if permitted {
                while next_first.next_if(|(x, _)| (*x as usize) < t).is_some() {}
                let first = next_first
                    .peek()
                    .filter(|(x, _)| *x as usize == t)
                    .map(|(_, i)| *i as usize);
                self.unused_verdict_in(context, w, first)
            } else {
                // The detail is recomputed only for the targets listed.
                Verdict::reject(v.reason().unwrap_or(Reason::NotNeeded), 0)
            };
            let r = v.reason().unwrap_or(Reason::NotNeeded) as usize;
            counts[r] += 1;
            if counts[r] as usize <= limit {
                listed.push((t, if permitted { v } else { self.verdict(w, t) }));
            }
        }
        (counts, listed)
    }

    fn pool_ledgers(&self) -> Vec<PoolLedger> {
        let ir = self.ir;
        let ledger = &self.assignment.ledger;
        let mut out = Vec::with_capacity(self.index.pools.len());
        for (t, target) in ir.targets.iter().enumerate() {
            for (p, pool) in target.pools.iter().enumerate() {
                let flat = self.index.flat_pool(t, p as u32);
                let capacity = self.index.pools.get(flat).map_or(0, |s| s.units);
                let free = ledger.pool_free.get(flat).copied().unwrap_or(capacity);
                out.push(PoolLedger {
                    target: target.name.clone(),
                    pool: pool.name.clone(),
                    accelerator: reasons::accel(ir, pool.accelerator).into(),
                    capacity,
                    allocated: capacity - free.min(capacity),
                    by_workload: ledger
                        .holders
                        .get(flat)
                        .map(|h| {
                            h.iter()
                                .map(|(w, units)| LedgerEntry {
                                    workload: ir.workloads[*w as usize].name.clone(),
                                    amount: u64::from(*units),
                                })
                                .collect()
                        })
                        .unwrap_or_default(),
                });
            }
        }
        out
    }

    fn target_ledgers(&self, workloads: &[WorkloadPlan]) -> Vec<TargetLedger> {
        let ledger = &self.assignment.ledger;
        let mut variants: std::collections::BTreeMap<&str, Vec<&VariantBinding>> =
            std::collections::BTreeMap::new();
        for p in workloads.iter().flat_map(|w| &w.placements) {
            if let Some(v) = &p.variant {
                variants.entry(p.target.as_str()).or_default().push(v);
            }
        }
        self.ir
            .targets
            .iter()
            .enumerate()
            .map(|(t, target)| TargetLedger {
                target: target.name.clone(),
                cpu_millis_capacity: target.cpu_millis,
                cpu_millis_allocated: target.cpu_millis.saturating_sub(ledger.cpu_free[t]),
                memory_capacity: target.memory,
                memory_allocated: target.memory.saturating_sub(ledger.memory_free[t]),
                staging_bytes: 0,
                staging_unsized: 0,
            })
            .map(|mut l| {
                let (bytes, unsized_) = crate::plan::staging_totals(
                    variants
                        .get(l.target.as_str())
                        .into_iter()
                        .flatten()
                        .copied(),
                );
                (l.staging_bytes, l.staging_unsized) = (bytes, unsized_);
                l
            })
            .collect()
    }
}

/// Per workload, its options' first index on each target, as `(target, index)` sorted by
/// target — for the assignment-stage reason of a permitted target it does not use. Workloads
/// sharing an option list ([`assign::Options`]) share the table, built once.
fn first_options(options: &[assign::Options]) -> Vec<std::sync::Arc<[(u32, u32)]>> {
    assign::per_list(options, |opts| {
        let mut first = assign::options_by_target(opts);
        first.dedup_by_key(|(t, _)| *t);
        first.into()
    })
}
