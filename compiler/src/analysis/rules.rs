//! Per policy rule: entitlements deny rules make dead, caps above the fleet, windows that
//! never open.

use super::warning::{CapRule, Denial, FleetWarning};
use crate::ir::{Entitlement, Ir};
use crate::placement::screen::Screened;
use crate::placement::verdict::Reason;

/// Allowed pairs whose deny rule is looked up, per entitlement.
const RULE_SAMPLE: usize = 64;

/// Entitlements (by index) every placement of which a deny rule forbids: the identity has
/// workloads, none may run anywhere, and some (workload, target) pair is eligible and
/// entitled but denied.
pub(super) fn dead_entitlements(s: &Screened<'_>) -> Vec<(usize, FleetWarning)> {
    let ir = s.ir();
    let mut out = Vec::new();
    for (e, ent) in ir.policy.entitlements.iter().enumerate() {
        let members: Vec<usize> = (0..ir.workloads.len())
            .filter(|&w| {
                ir.workloads
                    .get(w)
                    .is_some_and(|x| x.identity == ent.identity)
            })
            .collect();
        if members.is_empty() || members.iter().any(|&w| s.placeable(w)) {
            continue;
        }
        // Each deny rule that is the first to hold on one of the first allowed pairs (the
        // rule of a pair is found by evaluating the rules: done for a sample, so an estate of
        // thousands of pairs and rules stays cheap), with the first such pair.
        let mut rules: Vec<(u32, usize, usize)> = Vec::new();
        let mut pairs = 0;
        for &w in &members {
            for t in 0..ir.targets.len() {
                if s.reason(w, t) != Some(Reason::Denied) || !s.entitlement_verdict(w, t).is_ok() {
                    continue;
                }
                pairs += 1;
                if pairs > RULE_SAMPLE {
                    continue;
                }
                let rule = s.verdict(w, t).detail();
                if !rules.iter().any(|(r, ..)| *r == rule) {
                    rules.push((rule, w, t));
                }
            }
        }
        if pairs == 0 {
            continue;
        }
        rules.sort_unstable();
        let name = |w: usize| ir.workloads.get(w).map_or("", |x| x.name.as_str());
        let target = |t: usize| ir.targets.get(t).map_or("", |x| x.name.as_str());
        out.push((
            e,
            FleetWarning::DeadEntitlement {
                identity: ent.identity.to_string(),
                span: ir.spans.entitlements.get(e).copied().unwrap_or_default(),
                rules: rules
                    .iter()
                    .map(|&(r, w, t)| Denial {
                        rule: ir.spans.denies.get(r as usize).copied().unwrap_or_default(),
                        workload: name(w).into(),
                        target: target(t).into(),
                    })
                    .collect(),
                pairs,
            },
        ));
    }
    out
}

/// GPUs (and of them MIG instances) of the pools `counts` admits, fleet-wide.
fn fleet(s: &Screened<'_>, counts: impl Fn(usize, crate::ir::AcceleratorId) -> bool) -> (u64, u64) {
    let (mut all, mut slices) = (0u64, 0u64);
    for t in 0..s.ir().targets.len() {
        for p in s.pools(t).filter(|p| counts(t, p.accelerator)) {
            all += u64::from(p.units);
            if p.partitioned {
                slices += u64::from(p.units);
            }
        }
    }
    (all, slices)
}

/// Whether entitlement `e` lets its identity hold GPUs of accelerator `a` on target `t`.
fn entitled(ir: &Ir, e: &Entitlement, t: usize, a: crate::ir::AcceleratorId) -> bool {
    let class_ok = e.environments.as_ref().is_none_or(|envs| {
        ir.targets
            .get(t)
            .is_some_and(|target| envs.contains(&target.class))
    });
    class_ok && e.accelerators.as_ref().is_none_or(|list| list.contains(&a))
}

/// Quotas, entitlement caps and limits above every GPU of the fleet they could count.
pub(super) fn caps_above_fleet(s: &Screened<'_>) -> Vec<FleetWarning> {
    let ir = s.ir();
    let policy = &ir.policy;
    let whole = fleet(s, |_, _| true);
    let mut out = Vec::new();
    let mut check = |rule: CapRule,
                     span: Option<&crate::source::Span>,
                     max: u32,
                     (fleet, slices): (u64, u64)| {
        if u64::from(max) > fleet {
            out.push(FleetWarning::CapAboveFleet {
                rule,
                span: span.copied().unwrap_or_default(),
                max,
                fleet,
                slices,
            });
        }
    };
    for (i, q) in policy.quotas.iter().enumerate() {
        let rule = CapRule::Quota {
            team: q.team.clone(),
        };
        check(rule, ir.spans.quotas.get(i), q.max_gpu, whole);
    }
    for (i, e) in policy.entitlements.iter().enumerate() {
        let Some(max) = e.max_gpu else { continue };
        let restricted = e.accelerators.is_some() || e.environments.is_some();
        let rule = CapRule::Entitlement {
            identity: e.identity.to_string(),
            restricted,
        };
        check(
            rule,
            ir.spans.entitlements.get(i),
            max,
            fleet(s, |t, a| entitled(ir, e, t, a)),
        );
    }
    for (i, l) in policy.limits.iter().enumerate() {
        let window = policy
            .windows
            .get(l.window.index())
            .map_or("", |w| w.name.as_str());
        let rule = CapRule::Limit {
            selector: format!("`{}`", l.selector),
            window: window.into(),
        };
        check(rule, ir.spans.limits.get(i), l.max_gpu, whole);
    }
    out
}

/// Windows with no day to open on (`days = []`), with the limits that name them.
pub(super) fn windows_never_open(ir: &Ir) -> Vec<FleetWarning> {
    let policy = &ir.policy;
    policy
        .windows
        .iter()
        .enumerate()
        .filter(|(_, w)| w.days.is_empty())
        .map(|(i, w)| FleetWarning::WindowNeverOpens {
            window: w.name.clone(),
            span: ir.spans.windows.get(i).copied().unwrap_or_default(),
            limits: policy
                .limits
                .iter()
                .enumerate()
                .filter(|(_, l)| l.window.index() == i)
                .filter_map(|(j, _)| ir.spans.limits.get(j).copied())
                .collect(),
        })
        .collect()
}
