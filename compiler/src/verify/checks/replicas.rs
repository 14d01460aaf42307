//! Replicas and status: each workload's placed count, status and unplaced explanation.

use crate::plan::WorkloadStatus;
use crate::source::Span;
use crate::verify::*;

impl<'a> Verifier<'a> {
    pub(in crate::verify) fn check_replicas(&mut self) {
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
}
