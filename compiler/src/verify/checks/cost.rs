//! Cost and approval: each placement's cost and the approvals it needs.

// INVARIANT: placement ids come from `Placed`, resolved by name against this IR.
#![allow(clippy::indexing_slicing)]

use crate::ir::{Money, WorkloadId};
use crate::verify::*;

impl<'a> Verifier<'a> {
    /// `replicas × GPUs per replica × gpu_hour × 24` for one placement.
    pub(in crate::verify) fn placement_cost(&self, p: &Placed<'_>) -> Money {
        let gpu_hour = self.ir.targets[p.t.index()]
            .cost
            .gpu_hour
            .unwrap_or_default();
        let cost = i128::from(self.gpus(p)) * i128::from(gpu_hour.0) * 24;
        Money(i64::try_from(cost).unwrap_or(i64::MAX))
    }

    /// Recomputed `cost_per_day` of a workload.
    pub(in crate::verify) fn workload_cost(&self, w: WorkloadId) -> Money {
        Money(
            self.placements_of(w)
                .map(|p| self.placement_cost(p).0)
                .fold(0, i64::saturating_add),
        )
    }

    pub(in crate::verify) fn check_cost(&mut self) {
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

    pub(in crate::verify) fn check_approvals(&mut self) {
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
                        && rec.trust == a.trust
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
}
