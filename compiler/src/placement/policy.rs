//! Policy: which technically possible placements are permitted, and the caps assignment
//! must respect.
//!
//! On the eligible set, in this order: `deny` rules (first that holds, in source order),
//! then entitlements (an identity's allowed environments and accelerators; once any
//! entitlement exists, an identity without one gets no GPUs). Then, for assignment: time
//! windows evaluated at the plan instant, and the GPU caps that apply to each workload —
//! team quotas, entitlement caps and `limit … during …` while the window is in effect.
//! Approvals and reclaims are decided after assignment (`mod.rs`).
//!
//! Deny conditions are evaluated with [`crate::ir::eval::holds`], the one definition of what
//! a rule says. To keep 20 million pairs cheap, pairs are grouped by the values of the fields
//! the condition reads: workloads (and targets) that agree on every `workload.<f>` (and
//! `target.<f>`) the condition mentions evaluate identically, so `holds` runs once per
//! distinct group pair, on representatives.

// INVARIANT: every index is a dense id of the IR being placed (workload < `ir.workloads.len()`,
// target < `ir.targets.len()`, a pool < its target's pools) or a position in a table the solver
// sized from those counts when it built it (`EstateIndex`, `EligibilityMatrix`, `Assignment`'s
// options and slots, the ledgers); nothing from user text indexes here. Indexing is the hot
// path; the property tests and planted estates run it over generated estates.
#![allow(clippy::indexing_slicing)]

use super::eligibility::{EligibilityMatrix, FitTable, PoolFit, gpu_units};
use super::index::EstateIndex;
use super::verdict::{Cell, Reason, Verdict};
use crate::ir::{
    AcceleratorId, DenyRule, Ir, PolicyExpr, TargetField, TargetId, Value, Window, WorkloadField,
    WorkloadId, eval,
};
use jiff::Timestamp;
use rayon::prelude::*;
use std::collections::BTreeMap;

/// Why an identity is not entitled to a target (the detail of a `NotEntitled` verdict).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum NotEntitled {
    /// Entitlements exist and none names the identity: no GPUs.
    NoEntitlement = 0,
    /// The target's environment class is not among the entitlement's.
    Environment = 1,
    /// None of the target's usable pools has an entitled accelerator.
    Accelerator = 2,
    /// The identity's entitlements have all expired (`until`) at the plan instant.
    Expired = 3,
}

impl NotEntitled {
    /// A verdict detail: the kind, and which entitlement (index in `Policy::entitlements`).
    pub fn detail(self, entitlement: u32) -> u32 {
        self as u32 | (entitlement << 2)
    }

    /// The kind and the entitlement of a verdict detail.
    pub fn from_detail(d: u32) -> (Self, u32) {
        let kind = match d & 3 {
            0 => NotEntitled::NoEntitlement,
            1 => NotEntitled::Environment,
            2 => NotEntitled::Accelerator,
            _ => NotEntitled::Expired,
        };
        (kind, d >> 2)
    }
}

/// Where a GPU cap comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum CapSource {
    /// `quota team(T) { gpu <= n }`: index in `Policy::quotas`.
    Quota(u32),
    /// `entitle I { gpu <= n }`: index in `Policy::entitlements`.
    Entitlement(u32),
    /// `limit … during W { gpu <= n }` with W in effect: index in `Policy::limits`.
    Limit(u32),
}

impl CapSource {
    pub fn reason(self) -> Reason {
        match self {
            CapSource::Quota(_) => Reason::Quota,
            CapSource::Entitlement(_) => Reason::EntitlementLimit,
            CapSource::Limit(_) => Reason::WindowLimit,
        }
    }
}

/// A group of workloads that together hold at most `max` GPUs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cap {
    pub source: CapSource,
    pub max: u64,
}

/// Policy decisions that do not depend on the assignment.
#[derive(Clone, Debug, Default)]
pub struct PolicyContext {
    /// Per `Policy::windows`, whether it is in effect at the plan instant.
    pub window_in_effect: Vec<bool>,
    /// Per workload, the entitlements naming its identity in force at the plan instant (all
    /// of them apply).
    pub entitlements_of: Vec<Vec<u32>>,
    /// Per workload, those that expired before the plan instant (`until`): they grant nothing
    /// and are named when they were all it had.
    pub expired_of: Vec<Vec<u32>>,
    pub any_entitlement: bool,
    pub caps: Vec<Cap>,
    /// Per workload, the caps it counts against (indexes into `caps`).
    pub workload_caps: Vec<Vec<u32>>,
}

impl PolicyContext {
    pub fn new(ir: &Ir, at: Timestamp) -> Self {
        let policy = &ir.policy;
        let mut ctx = PolicyContext::without_caps(ir);
        let (in_force, expired): (Vec<Vec<u32>>, Vec<Vec<u32>>) = ctx
            .entitlements_of
            .iter()
            .map(|own| {
                own.iter()
                    .partition(|&&e| !policy.entitlements[e as usize].expired_at(at))
            })
            .unzip();
        ctx.entitlements_of = in_force;
        ctx.expired_of = expired;
        ctx.window_in_effect = policy
            .windows
            .iter()
            .map(|w| window_in_effect(w, at))
            .collect();
        for (i, q) in policy.quotas.iter().enumerate() {
            ctx.add_cap(CapSource::Quota(i as u32), q.max_gpu, |w| {
                ir.workloads[w].team == q.team
            });
        }
        for (i, e) in policy.entitlements.iter().enumerate() {
            if let Some(max) = e.max_gpu
                && !e.expired_at(at)
            {
                ctx.add_cap(CapSource::Entitlement(i as u32), max, |w| {
                    ir.workloads[w].identity == e.identity
                });
            }
        }
        for (i, l) in policy.limits.iter().enumerate() {
            if ctx.window_in_effect.get(l.window.index()) == Some(&true) {
                ctx.add_cap(CapSource::Limit(i as u32), l.max_gpu, |w| {
                    l.selector.matches(&ir.workloads[w])
                });
            }
        }
        ctx
    }

    /// Deny rules and entitlements alone, which depend on neither load nor time: no window
    /// in effect, no cap (what the fleet analysis screens pairs with).
    pub fn without_caps(ir: &Ir) -> Self {
        let policy = &ir.policy;
        let entitlements_of: Vec<Vec<u32>> = ir
            .workloads
            .iter()
            .map(|w| {
                (0..policy.entitlements.len() as u32)
                    .filter(|&i| policy.entitlements[i as usize].identity == w.identity)
                    .collect()
            })
            .collect();
        PolicyContext {
            window_in_effect: vec![false; policy.windows.len()],
            expired_of: vec![Vec::new(); entitlements_of.len()],
            entitlements_of,
            any_entitlement: !policy.entitlements.is_empty(),
            caps: Vec::new(),
            workload_caps: vec![Vec::new(); ir.workloads.len()],
        }
    }

    fn add_cap(&mut self, source: CapSource, max: u32, member: impl Fn(usize) -> bool) {
        let id = self.caps.len() as u32;
        let mut any = false;
        for (w, caps) in self.workload_caps.iter_mut().enumerate() {
            if member(w) {
                caps.push(id);
                any = true;
            }
        }
        // A cap with no member cannot bind; keeping it would only clutter the ledger.
        if any {
            self.caps.push(Cap {
                source,
                max: u64::from(max),
            });
        }
    }

    /// May workload `w` use accelerator `a`? Every entitlement of its identity must allow it.
    pub fn accelerator_allowed(&self, ir: &Ir, w: usize, a: AcceleratorId) -> bool {
        self.first_refusing(ir, w, |e| {
            e.accelerators
                .as_ref()
                .is_some_and(|list| !list.contains(&a))
        })
        .is_none()
    }

    /// The first entitlement of `w`'s identity for which `refuses` holds.
    fn first_refusing(
        &self,
        ir: &Ir,
        w: usize,
        refuses: impl Fn(&crate::ir::Entitlement) -> bool,
    ) -> Option<u32> {
        self.entitlements_of
            .get(w)?
            .iter()
            .copied()
            .find(|&e| ir.policy.entitlements.get(e as usize).is_some_and(&refuses))
    }

    /// Applies deny rules and entitlements to every eligible pair, in parallel.
    pub fn apply(&self, ir: &Ir, index: &EstateIndex, matrix: &mut EligibilityMatrix) {
        let eligible = matrix.ok_count();
        // A rule whose condition repeats an earlier rule's never holds first (the earlier
        // one would have), so it gets no memo and is skipped: a spec with one deny rule per
        // team, all alike, pays for one.
        let rules = &ir.policy.denies;
        let denies: Vec<Option<DenyMemo>> = rules
            .iter()
            .enumerate()
            .map(|(i, rule)| {
                let repeated = rules[..i].iter().any(|r| r.condition == rule.condition);
                (!repeated).then(|| DenyMemo::new(ir, rule, eligible))
            })
            .collect();
        if matrix.n_targets() == 0 {
            return;
        }
        // Everything `decide` and the deny memos read about a workload besides its row: its
        // group for each deny rule, its entitlements, GPUs per replica and fit per pool kind.
        // Workloads of one row and one key are refined once (issue 22: classes, not pairs).
        let fits = matrix.fits().clone();
        let keys: Vec<PolicyKey<'_>> = (0..ir.workloads.len())
            .into_par_iter()
            .with_min_len(256)
            .map(|w| PolicyKey {
                groups: denies
                    .iter()
                    .map(|m| m.as_ref().map_or(u32::MAX, |m| m.workload_group[w]))
                    .collect(),
                entitlements: self.entitlements_of.get(w).map_or(&[], Vec::as_slice),
                expired: self.expired_of.get(w).map_or(&[], Vec::as_slice),
                gpu: gpu_units(&ir.workloads[w]),
                fits: fits.row(w),
            })
            .collect();
        matrix.refine(&keys, |w, row| {
            // The rules that can hold for this workload on some target, in source order:
            // a pair looks at these only (a spec with hundreds of rules, each about a few
            // workloads, does not cost hundreds of lookups per pair).
            let candidates: Vec<(usize, &DenyMemo)> = denies
                .iter()
                .enumerate()
                .filter_map(|(i, m)| Some((i, m.as_ref().filter(|m| m.can_hold(w))?)))
                .collect();
            for (t, cell) in row.iter_mut().enumerate() {
                if cell.is_ok() {
                    let first = || {
                        candidates
                            .iter()
                            .find(|(i, m)| m.holds(ir, &rules[*i], w, t))
                            .map(|(i, _)| *i)
                    };
                    *cell = Cell::from(self.decide(ir, index, &fits, first, w, t));
                }
            }
        });
    }

    /// The policy verdict of eligible pair (`w`, `t`), with its detail (deny rules evaluated
    /// directly: for the few rejections a plan lists).
    pub fn explain(
        &self,
        ir: &Ir,
        index: &EstateIndex,
        fits: &FitTable,
        w: usize,
        t: usize,
    ) -> Verdict {
        let first = || {
            ir.policy.denies.iter().position(|rule| {
                eval::holds(
                    ir,
                    &rule.condition,
                    WorkloadId(w as u32),
                    TargetId(t as u32),
                )
            })
        };
        self.decide(ir, index, fits, first, w, t)
    }

    /// Whether the entitlements of `w`'s identity allow eligible pair (`w`, `t`), deny rules
    /// aside (the fleet analysis asks which denials stand between an entitlement and any use).
    pub fn entitlement_verdict(
        &self,
        ir: &Ir,
        index: &EstateIndex,
        fits: &FitTable,
        w: usize,
        t: usize,
    ) -> Verdict {
        self.decide(ir, index, fits, || None, w, t)
    }

    fn decide(
        &self,
        ir: &Ir,
        index: &EstateIndex,
        fits: &FitTable,
        first_denying: impl FnOnce() -> Option<usize>,
        w: usize,
        t: usize,
    ) -> Verdict {
        if let Some(i) = first_denying() {
            return Verdict::reject(Reason::Denied, i as u32);
        }
        let units = gpu_units(&ir.workloads[w]);
        let own = self.entitlements_of.get(w).map_or(&[][..], Vec::as_slice);
        if own.is_empty() {
            if !(self.any_entitlement && units > 0) {
                return Verdict::OK;
            }
            return match self.expired_of.get(w).and_then(|e| e.first()) {
                Some(&e) => Verdict::reject(Reason::NotEntitled, NotEntitled::Expired.detail(e)),
                None => Verdict::reject(Reason::NotEntitled, NotEntitled::NoEntitlement.detail(0)),
            };
        }
        let class = index.class[t];
        if let Some(e) = self.first_refusing(ir, w, |e| {
            e.environments
                .as_ref()
                .is_some_and(|envs| !envs.contains(&class))
        }) {
            return Verdict::reject(Reason::NotEntitled, NotEntitled::Environment.detail(e));
        }
        if units > 0 {
            let usable = |slot: &super::index::PoolSlot| {
                matches!(fits.fit(w, slot.kind), PoolFit::Fits { .. }) && slot.units >= units
            };
            let entitled = index.target_pools(t).iter().any(|slot| {
                usable(slot)
                    && index
                        .kinds
                        .get(slot.kind as usize)
                        .is_some_and(|k| self.accelerator_allowed(ir, w, k.accelerator))
            });
            if !entitled {
                // Name the first entitlement refusing a usable pool's accelerator.
                let e = index
                    .target_pools(t)
                    .iter()
                    .filter(|slot| usable(slot))
                    .filter_map(|slot| index.kinds.get(slot.kind as usize))
                    .find_map(|k| {
                        self.first_refusing(ir, w, |e| {
                            e.accelerators
                                .as_ref()
                                .is_some_and(|list| !list.contains(&k.accelerator))
                        })
                    })
                    .unwrap_or(own[0]);
                return Verdict::reject(Reason::NotEntitled, NotEntitled::Accelerator.detail(e));
            }
        }
        Verdict::OK
    }
}

/// Whether window `w` is in effect at `at` ([`Window::in_effect`], the language's one
/// definition). Semantics validated the zone; an unknown one never opens.
pub fn window_in_effect(w: &Window, at: Timestamp) -> bool {
    w.in_effect(at).unwrap_or(false)
}

/// What the policy stage reads about a workload besides its eligibility row.
#[derive(PartialEq, Eq, Hash)]
struct PolicyKey<'a> {
    groups: Vec<u32>,
    entitlements: &'a [u32],
    expired: &'a [u32],
    gpu: u32,
    fits: &'a [PoolFit],
}

/// A deny rule's results, grouped by the values of the fields its condition reads.
struct DenyMemo {
    workload_group: Vec<u32>,
    target_group: Vec<u32>,
    /// A representative of each group.
    workload_rep: Vec<u32>,
    target_rep: Vec<u32>,
    /// `holds` per group pair when computing it all was cheaper than evaluating per pair.
    table: Option<Vec<bool>>,
}

impl DenyMemo {
    fn new(ir: &Ir, rule: &DenyRule, eligible_pairs: usize) -> Self {
        let mut wf = Vec::new();
        let mut tf = Vec::new();
        fields(&rule.condition, &mut wf, &mut tf);
        let (workload_group, workload_rep) = group(ir.workloads.len(), |w| {
            wf.iter()
                .map(|f| eval::workload_field(ir, &ir.workloads[w], *f))
                .collect()
        });
        let (target_group, target_rep) = group(ir.targets.len(), |t| {
            tf.iter()
                .map(|f| {
                    eval::eval(
                        ir,
                        &PolicyExpr::Target(*f),
                        WorkloadId(0),
                        TargetId(t as u32),
                    )
                })
                .collect()
        });
        let (nw, nt) = (workload_rep.len(), target_rep.len());
        let table = (nw.saturating_mul(nt) <= eligible_pairs.max(1 << 12)).then(|| {
            (0..nw * nt)
                .into_par_iter()
                .map(|i| {
                    eval::holds(
                        ir,
                        &rule.condition,
                        WorkloadId(workload_rep[i / nt]),
                        TargetId(target_rep[i % nt]),
                    )
                })
                .collect()
        });
        DenyMemo {
            workload_group,
            target_group,
            workload_rep,
            target_rep,
            table,
        }
    }

    /// Whether the rule holds for workload `w` on some target (always true when no table was
    /// built: then it is only known per pair).
    fn can_hold(&self, w: usize) -> bool {
        let Some(table) = &self.table else {
            return true;
        };
        let nt = self.target_rep.len();
        let wg = self.workload_group[w] as usize;
        table[wg * nt..(wg + 1) * nt].iter().any(|&h| h)
    }

    fn holds(&self, ir: &Ir, rule: &DenyRule, w: usize, t: usize) -> bool {
        // INVARIANT: pairs in the same groups evaluate alike (they agree on every field the
        // condition reads), so a representative pair answers for them.
        let (wg, tg) = (
            self.workload_group[w] as usize,
            self.target_group[t] as usize,
        );
        match &self.table {
            Some(table) => table[wg * self.target_rep.len() + tg],
            None => eval::holds(
                ir,
                &rule.condition,
                WorkloadId(self.workload_rep[wg]),
                TargetId(self.target_rep[tg]),
            ),
        }
    }
}

/// Groups `0..n` by `key`: each item's group, and each group's first item.
fn group(n: usize, key: impl Fn(usize) -> Vec<Value> + Sync + Send) -> (Vec<u32>, Vec<u32>) {
    let keys: Vec<Vec<Value>> = (0..n).into_par_iter().map(key).collect();
    let mut ids: BTreeMap<&[Value], u32> = BTreeMap::new();
    let mut reps = Vec::new();
    let groups = keys
        .iter()
        .enumerate()
        .map(|(i, k)| {
            *ids.entry(k.as_slice()).or_insert_with(|| {
                reps.push(i as u32);
                reps.len() as u32 - 1
            })
        })
        .collect();
    (groups, reps)
}

/// The workload and target fields `e` reads.
fn fields(e: &PolicyExpr, wf: &mut Vec<WorkloadField>, tf: &mut Vec<TargetField>) {
    match e {
        PolicyExpr::Const(_) | PolicyExpr::Param(_) => {}
        PolicyExpr::Workload(f) => {
            if !wf.contains(f) {
                wf.push(*f);
            }
        }
        PolicyExpr::Target(f) => {
            if !tf.contains(f) {
                tf.push(*f);
            }
        }
        PolicyExpr::Member(b, _) | PolicyExpr::Not(b) => fields(b, wf, tf),
        PolicyExpr::Any(a, b)
        | PolicyExpr::All(a, b)
        | PolicyExpr::And(a, b)
        | PolicyExpr::Or(a, b)
        | PolicyExpr::Compare(_, a, b)
        | PolicyExpr::In(a, b) => {
            fields(a, wf, tf);
            fields(b, wf, tf);
        }
        PolicyExpr::List(items) => {
            for i in items {
                fields(i, wf, tf);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{
        dense,
        ir::{EstateShape, estate},
    };

    /// Rows refined once per class (row and policy key) are each workload's own: every
    /// eligible pair holds the verdict of its deny rules (evaluated directly, without the
    /// memos) and entitlements, on a dense estate and the generated one with policy.
    #[test]
    fn shared_refinements_are_each_workloads_own() {
        let mut shape = dense::DenseShape::new(400, 40);
        shape.requirement_sets = 7;
        let at: Timestamp = dense::AT.parse().unwrap_or_default();
        for ir in [
            dense::dense_ir(shape),
            estate(
                3,
                EstateShape {
                    workloads: 300,
                    targets: 50,
                },
            ),
        ] {
            let index = EstateIndex::build(&ir);
            let eligible = EligibilityMatrix::compute(&ir, &index);
            let mut m = eligible.clone();
            let p = PolicyContext::new(&ir, at);
            p.apply(&ir, &index, &mut m);
            assert!(m.n_rows() <= ir.workloads.len());
            for w in 0..ir.workloads.len() {
                for t in 0..ir.targets.len() {
                    let want = if eligible.get(w, t).is_ok() {
                        Cell::from(p.explain(&ir, &index, m.fits(), w, t))
                    } else {
                        eligible.get(w, t)
                    };
                    assert_eq!(m.get(w, t), want, "pair ({w}, {t})");
                }
            }
        }
    }
}
