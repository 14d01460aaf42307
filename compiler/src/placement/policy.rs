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

use super::eligibility::{EligibilityMatrix, PoolFit};
use super::index::EstateIndex;
use super::verdict::{Reason, Verdict};
use crate::ir::{
    AcceleratorId, DenyRule, Ir, PolicyExpr, TargetField, TargetId, Value, Weekday, Window,
    WorkloadField, WorkloadId, eval,
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
}

impl NotEntitled {
    pub fn from_detail(d: u32) -> Self {
        match d {
            0 => NotEntitled::NoEntitlement,
            1 => NotEntitled::Environment,
            _ => NotEntitled::Accelerator,
        }
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
    /// Per workload, the entitlement that governs its identity (the first naming it).
    pub entitlement_of: Vec<Option<u32>>,
    pub any_entitlement: bool,
    pub caps: Vec<Cap>,
    /// Per workload, the caps it counts against (indexes into `caps`).
    pub workload_caps: Vec<Vec<u32>>,
}

impl PolicyContext {
    pub fn new(ir: &Ir, at: Timestamp) -> Self {
        let policy = &ir.policy;
        let window_in_effect = policy
            .windows
            .iter()
            .map(|w| window_in_effect(w, at))
            .collect();
        let entitlement_of: Vec<Option<u32>> = ir
            .workloads
            .iter()
            .map(|w| {
                policy
                    .entitlements
                    .iter()
                    .position(|e| e.identity == w.identity)
                    .map(|i| i as u32)
            })
            .collect();
        let mut ctx = PolicyContext {
            window_in_effect,
            entitlement_of,
            any_entitlement: !policy.entitlements.is_empty(),
            caps: Vec::new(),
            workload_caps: vec![Vec::new(); ir.workloads.len()],
        };
        for (i, q) in policy.quotas.iter().enumerate() {
            ctx.add_cap(CapSource::Quota(i as u32), q.max_gpu, |w| {
                ir.workloads[w].team == q.team
            });
        }
        for (i, e) in policy.entitlements.iter().enumerate() {
            if let Some(max) = e.max_gpu {
                let ent = &ctx.entitlement_of;
                let members: Vec<bool> = ent.iter().map(|x| *x == Some(i as u32)).collect();
                ctx.add_cap(CapSource::Entitlement(i as u32), max, |w| members[w]);
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

    /// May workload `w` use accelerator `a` (its entitlement's list)?
    pub fn accelerator_allowed(&self, ir: &Ir, w: usize, a: AcceleratorId) -> bool {
        match self.entitlement(ir, w) {
            Some(e) => e.accelerators.as_ref().is_none_or(|list| list.contains(&a)),
            None => true,
        }
    }

    fn entitlement<'a>(&self, ir: &'a Ir, w: usize) -> Option<&'a crate::ir::Entitlement> {
        let e = (*self.entitlement_of.get(w)?)?;
        ir.policy.entitlements.get(e as usize)
    }

    /// Applies deny rules and entitlements to every eligible pair, in parallel.
    pub fn apply(&self, ir: &Ir, index: &EstateIndex, matrix: &mut EligibilityMatrix) {
        let eligible = matrix.ok_count();
        let denies: Vec<DenyMemo> = ir
            .policy
            .denies
            .iter()
            .map(|rule| DenyMemo::new(ir, rule, eligible))
            .collect();
        let matrix_ref: &EligibilityMatrix = matrix;
        // Decide first (reading fits), then write: the matrix cannot be borrowed both ways.
        let decisions: Vec<Vec<(usize, Verdict)>> = (0..ir.workloads.len())
            .into_par_iter()
            .map(|w| {
                let mut out = Vec::new();
                for (t, v) in matrix_ref.row(w).iter().enumerate() {
                    if !v.is_ok() {
                        continue;
                    }
                    let verdict = self.decide(ir, index, matrix_ref, &denies, w, t);
                    if !verdict.is_ok() {
                        out.push((t, verdict));
                    }
                }
                out
            })
            .collect();
        matrix
            .rows_mut()
            .zip(decisions.into_par_iter())
            .for_each(|((_, row), decided)| {
                for (t, v) in decided {
                    row[t] = v;
                }
            });
    }

    fn decide(
        &self,
        ir: &Ir,
        index: &EstateIndex,
        matrix: &EligibilityMatrix,
        denies: &[DenyMemo],
        w: usize,
        t: usize,
    ) -> Verdict {
        for (i, memo) in denies.iter().enumerate() {
            if memo.holds(ir, &ir.policy.denies[i], w, t) {
                return Verdict::reject(Reason::Denied, i as u32);
            }
        }
        let workload = &ir.workloads[w];
        match self.entitlement(ir, w) {
            None if self.any_entitlement && workload.resources.gpu > 0 => {
                Verdict::reject(Reason::NotEntitled, NotEntitled::NoEntitlement as u32)
            }
            None => Verdict::OK,
            Some(e) => {
                if e.environments
                    .as_ref()
                    .is_some_and(|envs| !envs.contains(&index.class[t]))
                {
                    return Verdict::reject(Reason::NotEntitled, NotEntitled::Environment as u32);
                }
                if workload.resources.gpu > 0 && e.accelerators.is_some() {
                    let any_pool = index.target_pools(t).iter().any(|slot| {
                        matches!(matrix.fit(w, slot.kind), PoolFit::Fits { .. })
                            && slot.units >= workload.resources.gpu
                            && index
                                .kinds
                                .get(slot.kind as usize)
                                .is_some_and(|k| self.accelerator_allowed(ir, w, k.accelerator))
                    });
                    if !any_pool {
                        return Verdict::reject(
                            Reason::NotEntitled,
                            NotEntitled::Accelerator as u32,
                        );
                    }
                }
                Verdict::OK
            }
        }
    }
}

/// Is `w` in effect at `at`? The instant is read in the window's zone; a range whose end is
/// not after its start crosses midnight and belongs to the day it starts on.
pub fn window_in_effect(w: &Window, at: Timestamp) -> bool {
    let Ok(local) = at.in_tz(&w.zone) else {
        // Semantics validated the zone; an unknown one never opens.
        return false;
    };
    let day = weekday(local.weekday());
    let minute = i32::from(local.hour()) * 60 + i32::from(local.minute());
    let (start, end) = (i32::from(w.start), i32::from(w.end));
    if start < end {
        w.days.contains(&day) && start <= minute && minute < end
    } else {
        (w.days.contains(&day) && minute >= start)
            || (w.days.contains(&previous(day)) && minute < end)
    }
}

fn weekday(d: jiff::civil::Weekday) -> Weekday {
    use jiff::civil::Weekday as J;
    match d {
        J::Monday => Weekday::Mon,
        J::Tuesday => Weekday::Tue,
        J::Wednesday => Weekday::Wed,
        J::Thursday => Weekday::Thu,
        J::Friday => Weekday::Fri,
        J::Saturday => Weekday::Sat,
        J::Sunday => Weekday::Sun,
    }
}

fn previous(d: Weekday) -> Weekday {
    let all = Weekday::ALL;
    let i = all.iter().position(|x| *x == d).unwrap_or(0);
    all[(i + all.len() - 1) % all.len()]
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

    fn holds(&self, ir: &Ir, rule: &DenyRule, w: usize, t: usize) -> bool {
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
    use crate::ir::testkit::IrBuilder;

    fn window(days: &[Weekday], start: &str, end: &str, zone: &str) -> Window {
        let ir = IrBuilder::new().window("w", days, start, end, zone).build();
        ir.policy.windows[0].clone()
    }

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn windows_in_their_zone() {
        use Weekday::*;
        let peak = window(&[Mon, Tue, Wed, Thu, Fri], "08:00", "18:00", "Europe/Paris");
        // Wednesday 2025-06-04: Paris is UTC+2.
        assert!(window_in_effect(&peak, at("2025-06-04T06:00:00Z")));
        assert!(!window_in_effect(&peak, at("2025-06-04T05:59:00Z")));
        assert!(!window_in_effect(&peak, at("2025-06-04T16:00:00Z")));
        assert!(window_in_effect(&peak, at("2025-06-04T15:59:00Z")));
        // Saturday.
        assert!(!window_in_effect(&peak, at("2025-06-07T10:00:00Z")));
        // Winter: UTC+1.
        assert!(window_in_effect(&peak, at("2025-01-08T07:00:00Z")));
        assert!(!window_in_effect(&peak, at("2025-01-08T06:30:00Z")));
    }

    #[test]
    fn windows_crossing_midnight_belong_to_their_start_day() {
        use Weekday::*;
        let night = window(&[Fri], "22:00", "06:00", "UTC");
        assert!(window_in_effect(&night, at("2025-06-06T23:00:00Z"))); // Fri
        assert!(window_in_effect(&night, at("2025-06-07T05:59:00Z"))); // Sat morning
        assert!(!window_in_effect(&night, at("2025-06-07T06:00:00Z")));
        assert!(!window_in_effect(&night, at("2025-06-06T05:00:00Z"))); // Fri morning
        let sunday_night = window(&[Sun], "23:00", "01:00", "UTC");
        assert!(window_in_effect(&sunday_night, at("2025-06-09T00:30:00Z"))); // Mon
        let bad_zone = window(&[Sun], "00:00", "24:00", "Mars/Olympus");
        assert!(!window_in_effect(&bad_zone, at("2025-06-08T12:00:00Z")));
        let all_day = window(Weekday::ALL, "00:00", "24:00", "UTC");
        assert!(window_in_effect(&all_day, at("2025-06-08T23:59:00Z")));
    }
}
