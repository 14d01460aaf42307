//! Each placement: a candidate of its workload, technically eligible (fit, variant, data, services) as the plan records.

// INVARIANT: placement ids come from `Placed`, resolved by name against this IR.
#![allow(clippy::indexing_slicing)]

use crate::verify::fit::gpu_units;
use crate::verify::*;
use std::collections::BTreeSet;

impl<'a> Verifier<'a> {
    pub(in crate::verify) fn check_candidates(&mut self) {
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

    pub(in crate::verify) fn check_eligibility(&mut self) {
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
    pub(in crate::verify) fn compare_fit(
        &self,
        p: &Placed<'_>,
        f: &fit::Fit,
        found: &mut Vec<Violation>,
    ) {
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

    pub(in crate::verify) fn compare_variant(
        &self,
        p: &Placed<'_>,
        f: &fit::Fit,
        found: &mut Vec<Violation>,
    ) {
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
                // A variant that cannot be staged here at all is refused by the fit check.
                let staged = w.model.and_then(|id| {
                    crate::plan::artifact_staging(&self.ir.targets[p.t.index()], id, v)
                });
                if let Some(staging) = staged.filter(|s| *s != r.staging) {
                    found.push(Violation::FieldMismatch {
                        workload: w.name.clone(),
                        target: Some(target.clone()),
                        field: "variant.staging",
                        recorded: staging_summary(&r.staging),
                        expected: staging_summary(&staging),
                        span: self.wfield(p.w, "model"),
                    });
                }
            }
            _ => found.push(wrong()),
        }
    }
}

/// `mirror from oci://a, oci://b (1.2 GB)`, for a staging mismatch.
fn staging_summary(s: &crate::plan::ArtifactStaging) -> String {
    let from = match s.from {
        crate::plan::StagingSource::Cached => "cached",
        crate::plan::StagingSource::Mirror => "mirror",
        crate::plan::StagingSource::Source => "source",
        crate::plan::StagingSource::Carried => "carried",
    };
    let bytes = s
        .bytes
        .map_or_else(|| "size unknown".to_owned(), violation::bytes);
    if s.pull.is_empty() {
        format!("{from} ({bytes})")
    } else {
        format!("{from} from {} ({bytes})", s.pull.join(", "))
    }
}
