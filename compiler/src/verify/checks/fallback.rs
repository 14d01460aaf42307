//! Fallbacks, rejections and reclaim rules.

// INVARIANT: target ids come from `Verifier::target_id` on this IR, so they index vectors
// sized by `ir.targets.len()`.
#![allow(clippy::indexing_slicing)]

use crate::plan::RejectionStage;
use crate::verify::*;
use std::collections::HashSet;

impl<'a> Verifier<'a> {
    pub(in crate::verify) fn check_fallback(&mut self) {
        let ir = self.ir;
        let mut found = Vec::new();
        for r in &self.workloads {
            let spec = self.workload(r.w);
            for name in &r.plan.fallback {
                let Some(t) = self.target_id(name) else {
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

    pub(in crate::verify) fn check_rejections(&mut self) {
        let ir = self.ir;
        let mut found = Vec::new();
        for r in &self.workloads {
            let spec = self.workload(r.w);
            // By target id: what the plan places on, and what it lists as rejected (sets of
            // the few targets the plan names, not a flag per target: a workload costs what its
            // plan lists, whatever the estate's size).
            let used: HashSet<usize> = r
                .plan
                .placements
                .iter()
                .filter_map(|p| self.target_id(&p.target))
                .map(|t| t.index())
                .collect();
            let mut seen: HashSet<usize> = HashSet::new();
            let span = self.wspan(r.w);
            let problem = |target: &str, problem| Violation::RejectionMismatch {
                workload: spec.name.clone(),
                target: target.to_owned(),
                problem,
                span,
            };
            for rej in &r.plan.rejected {
                let Some(t) = self.target_id(&rej.target) else {
                    continue;
                };
                if used.contains(&t.index()) {
                    found.push(problem(&rej.target, RejectionProblem::UsedTarget));
                } else if !seen.insert(t.index()) {
                    found.push(problem(&rej.target, RejectionProblem::Duplicate));
                } else if rej.stage == RejectionStage::Eligibility
                    && rej.reason != "not_candidate"
                    && fit::target_fit(ir, spec, t).is_ok()
                {
                    found.push(problem(&rej.target, RejectionProblem::ActuallyEligible));
                }
            }
            // Targets rejected but not listed one by one are counted in `others`: every
            // target is used, listed or counted, so the count of unlisted ones is the rest
            // (`used` and `seen` are disjoint: a used target is never marked seen).
            let unlisted = ir.targets.len() - used.len() - seen.len();
            let others = r
                .plan
                .rejected
                .iter()
                .fold(0u64, |n, rej| n.saturating_add(u64::from(rej.others)));
            if others == 0 {
                let names = ir
                    .targets
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| !used.contains(i) && !seen.contains(i));
                for (_, t) in names {
                    found.push(problem(&t.name, RejectionProblem::Unaccounted));
                }
            } else if others != unlisted as u64 {
                found.push(Violation::RejectionCount {
                    workload: spec.name.clone(),
                    others,
                    unlisted: unlisted as u64,
                    span,
                });
            }
        }
        self.violations.extend(found);
        self.check_reasons();
    }

    pub(in crate::verify) fn check_reclaims(&mut self) {
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
