//! Placement rules: spread and isolation.

// INVARIANT: targets and pool indices come from `Placed`, resolved by name against this IR.
#![allow(clippy::indexing_slicing)]

use crate::ir::{TargetId, WorkloadId};
use crate::verify::*;
use std::collections::{BTreeMap, BTreeSet};

impl<'a> Verifier<'a> {
    pub(in crate::verify) fn check_spread(&mut self) {
        let mut found = Vec::new();
        for r in &self.workloads {
            let spec = self.workload(r.w);
            let rules = &spec.placement;
            let mut per_target: BTreeMap<TargetId, u64> = BTreeMap::new();
            // A target without a region is a region of its own (keyed apart from named ones).
            let mut per_region: BTreeMap<_, u64> = BTreeMap::new();
            for p in self.placements_of(r.w) {
                *per_target.entry(p.t).or_default() += p.replicas();
                *per_region.entry(self.region(p.t)).or_default() += p.replicas();
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
                            scope: SpreadScope::Region(region.to_owned()),
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

    pub(in crate::verify) fn check_isolation(&mut self) {
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
}
