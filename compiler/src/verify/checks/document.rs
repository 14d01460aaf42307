//! The plan as a document: its format, instant, id, and the names it uses resolved to the spec.

// INVARIANT: target ids come from `Verifier::target_id` on this IR.
#![allow(clippy::indexing_slicing)]

use crate::ir::WorkloadId;
use crate::plan::{PLAN_FORMAT, Placement, Verification, WorkloadPlan};
use crate::source::Span;
use crate::verify::*;
use jiff::Timestamp;
use std::collections::BTreeSet;

impl<'a> Verifier<'a> {
    pub(in crate::verify) fn check_format(&mut self) {
        if self.plan.format != PLAN_FORMAT {
            self.push(Violation::UnsupportedFormat {
                found: self.plan.format.clone(),
            });
        }
    }

    pub(in crate::verify) fn check_instant(&mut self) {
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

    pub(in crate::verify) fn check_plan_id(&mut self) {
        let computed = crate::plan::plan_id(self.plan);
        if computed != self.plan.plan_id {
            self.push(Violation::PlanIdMismatch {
                recorded: self.plan.plan_id.clone(),
                computed,
            });
        }
        // The id leaves `verification` out (the verifier fills it after the engine seals
        // the plan), so no byte of it may be free either: it is blank in a candidate, and
        // exactly the verifier's summary in a written plan.
        let recorded = &self.plan.verification;
        let sealed = recorded.verified
            && recorded.violations.is_empty()
            && recorded.checks == crate::verify::check_names();
        if !sealed && *recorded != Verification::default() {
            self.push(Violation::VerificationEdited);
        }
    }

    /// Resolves every name in the plan; later checks see only what resolved.
    pub(in crate::verify) fn check_names(&mut self) {
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
            let Some(w) = self.workload_id(&wp.workload) else {
                continue;
            };
            if !seen.insert(w) {
                continue;
            }
            self.check_workload_fields(w, wp);
            for placement in &wp.placements {
                if let Some(p) = self.resolve_placement(w, placement) {
                    if self.placed_of.len() <= w.index() {
                        self.placed_of
                            .resize(ir.workloads.len().max(w.index() + 1), Vec::new());
                    }
                    self.placed_of[w.index()].push(self.placed.len() as u32);
                    self.placed.push(p);
                }
            }
            let targets = wp
                .fallback
                .iter()
                .chain(wp.rejected.iter().map(|r| &r.target));
            for t in targets {
                if self.target_id(t).is_none() {
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

    pub(in crate::verify) fn check_workload_fields(&mut self, w: WorkloadId, wp: &WorkloadPlan) {
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

    pub(in crate::verify) fn resolve_placement(
        &mut self,
        w: WorkloadId,
        placement: &'a Placement,
    ) -> Option<Placed<'a>> {
        let Some(t) = self.target_id(&placement.target) else {
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
}
