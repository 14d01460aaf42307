//! Policy: denies, entitlements, quotas, windows and window limits.

// INVARIANT: placement ids come from `Placed`, resolved by name against this IR; `expected` has
// one entry per IR window, the list `i` is a position in.
#![allow(clippy::indexing_slicing)]

use crate::ir::{TargetId, UnknownZone, WorkloadId, eval};
use crate::verify::*;
use std::collections::BTreeSet;

impl<'a> Verifier<'a> {
    /// The first deny rule that holds for `w` on `t`, as (index, rule).
    pub(in crate::verify) fn denied(&self, w: WorkloadId, t: TargetId) -> Option<usize> {
        self.ir
            .policy
            .denies
            .iter()
            .position(|d| eval::holds(self.ir, &d.condition, w, t))
    }

    pub(in crate::verify) fn check_denies(&mut self) {
        let mut found = Vec::new();
        for p in &self.placed {
            for (i, rule) in self.ir.policy.denies.iter().enumerate() {
                if eval::holds(self.ir, &rule.condition, p.w, p.t) {
                    found.push(Violation::Denied {
                        workload: self.wname(p.w),
                        target: self.tname(p.t),
                        policy: rule.policy.clone(),
                        reason: rule.reason.clone(),
                        span: self.ir.spans.denies.get(i).copied().unwrap_or_default(),
                    });
                }
            }
        }
        self.violations.extend(found);
    }

    /// What the entitlements say against `w` holding a replica on pool `pool` of `t` (`None`:
    /// a CPU-only replica; `holds_gpus`: whether the replica takes GPUs): the one rule
    /// `check_entitlements` and the reasons check judge by. Empty when it is entitled.
    pub(in crate::verify) fn entitlement_breaches(
        &self,
        w: WorkloadId,
        t: TargetId,
        pool: Option<usize>,
        holds_gpus: bool,
    ) -> Vec<Entitlement> {
        let ir = self.ir;
        let entitlements = &ir.policy.entitlements;
        if entitlements.is_empty() {
            return Vec::new();
        }
        let spec = self.workload(w);
        let target = &ir.targets[t.index()];
        // What has expired at the plan instant grants nothing.
        let (own, expired): (Vec<_>, Vec<_>) = entitlements
            .iter()
            .filter(|e| e.identity == spec.identity)
            .partition(|e| !e.expired_at(self.at));
        if own.is_empty() {
            return match (holds_gpus, expired.first()) {
                (false, _) => Vec::new(),
                (true, Some(e)) => vec![Entitlement::Expired {
                    policy: e.policy.clone(),
                    until: e.until.clone().unwrap_or_default(),
                }],
                (true, None) => vec![Entitlement::None],
            };
        }
        let pool = pool.and_then(|i| target.pools.get(i));
        let mut breaches = Vec::new();
        for e in own {
            if let (Some(allowed), Some(pool)) = (&e.accelerators, pool)
                && !allowed.contains(&pool.accelerator)
            {
                breaches.push(Entitlement::Accelerator {
                    policy: e.policy.clone(),
                    accelerator: fit::accelerator(ir, pool)
                        .map_or_else(String::new, |a| a.name.clone()),
                });
            }
            if let Some(allowed) = &e.environments
                && !allowed.contains(&target.class)
            {
                breaches.push(Entitlement::Environment {
                    policy: e.policy.clone(),
                    class: target.class.to_string(),
                });
            }
        }
        breaches
    }

    pub(in crate::verify) fn check_entitlements(&mut self) {
        let ir = self.ir;
        let entitlements = &ir.policy.entitlements;
        if entitlements.is_empty() {
            return;
        }
        let mut found = Vec::new();
        for p in &self.placed {
            let w = self.workload(p.w);
            let target = &ir.targets[p.t.index()];
            for breach in self.entitlement_breaches(p.w, p.t, p.pool, self.gpus(p) > 0) {
                found.push(Violation::NotEntitled {
                    workload: w.name.clone(),
                    identity: w.identity.to_string(),
                    target: target.name.clone(),
                    breach,
                    span: self.wfield(p.w, "identity"),
                });
            }
        }
        for (i, e) in entitlements.iter().enumerate() {
            let Some(max) = e.max_gpu else { continue };
            if e.expired_at(self.at) {
                // Grants nothing: its holders are reported as not entitled above.
                continue;
            }
            let used = self.gpus_where(|w| w.identity == e.identity);
            if used > u64::from(max) {
                found.push(Violation::OverEntitlement {
                    policy: e.policy.clone(),
                    identity: e.identity.to_string(),
                    used,
                    max,
                    span: ir.spans.entitlements.get(i).copied().unwrap_or_default(),
                });
            }
        }
        self.violations.extend(found);
    }

    pub(in crate::verify) fn check_quotas(&mut self) {
        let mut found = Vec::new();
        for (i, q) in self.ir.policy.quotas.iter().enumerate() {
            let used = self.gpus_where(|w| w.team == q.team);
            if used > u64::from(q.max_gpu) {
                found.push(Violation::OverQuota {
                    policy: q.policy.clone(),
                    team: q.team.clone(),
                    used,
                    max: q.max_gpu,
                    span: self.ir.spans.quotas.get(i).copied().unwrap_or_default(),
                });
            }
        }
        self.violations.extend(found);
    }

    pub(in crate::verify) fn check_windows(&mut self) {
        let ir = self.ir;
        let mut found = Vec::new();
        let mut states = Vec::new();
        let mut expected = Vec::new();
        for (i, win) in ir.policy.windows.iter().enumerate() {
            let span = ir.spans.windows.get(i).copied().unwrap_or_default();
            expected.push((win.name.clone(), span));
            match win.in_effect(self.at) {
                Ok(state) => states.push(Some(state)),
                Err(UnknownZone) => {
                    states.push(None);
                    found.push(Violation::UnknownTimeZone {
                        window: win.name.clone(),
                        zone: win.zone.clone(),
                        span,
                    });
                }
            }
        }
        let recorded: Vec<String> = self.plan.windows.iter().map(|w| w.window.clone()).collect();
        self.check_list(PlanList::Windows, &expected, &recorded, |name| {
            Violation::UnknownName {
                kind: NameKind::Window,
                name: name.to_owned(),
                context: None,
            }
        });
        let mut done = BTreeSet::new();
        for ws in &self.plan.windows {
            let Some(i) = ir.policy.windows.iter().position(|w| w.name == ws.window) else {
                continue;
            };
            if !done.insert(i) {
                continue;
            }
            if let Some(Some(state)) = states.get(i)
                && *state != ws.in_effect
            {
                found.push(Violation::WindowStateMismatch {
                    window: ws.window.clone(),
                    recorded: ws.in_effect,
                    expected: *state,
                    at: self.at.to_string(),
                    span: expected[i].1,
                });
            }
        }
        self.windows = states;
        self.violations.extend(found);
    }

    pub(in crate::verify) fn check_window_limits(&mut self) {
        let ir = self.ir;
        let mut found = Vec::new();
        for (i, limit) in ir.policy.limits.iter().enumerate() {
            let in_effect = self.windows.get(limit.window.index()).copied().flatten();
            if in_effect != Some(true) {
                continue;
            }
            let used = self.gpus_where(|w| limit.selector.matches(w));
            if used > u64::from(limit.max_gpu) {
                let window = ir
                    .policy
                    .windows
                    .get(limit.window.index())
                    .map_or_else(String::new, |w| w.name.clone());
                found.push(Violation::WindowLimitExceeded {
                    policy: limit.policy.clone(),
                    window,
                    selector: limit.selector.to_string(),
                    used,
                    max: limit.max_gpu,
                    span: ir.spans.limits.get(i).copied().unwrap_or_default(),
                });
            }
        }
        self.violations.extend(found);
    }
}
