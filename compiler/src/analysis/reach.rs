//! Per workload: can any target run it, and are its candidate list and its fallbacks usable.

use super::warning::{FleetWarning, LISTED, Refusal};
use crate::ir::{Identity, ItemSpans};
use crate::placement::screen::Screened;
use crate::placement::verdict::{Reason, Verdict};
use crate::plan::RejectionStage;
use crate::source::Span;
use rayon::prelude::*;

pub(super) fn findings(s: &Screened<'_>, dead: &[&Identity]) -> Vec<FleetWarning> {
    (0..s.ir().workloads.len())
        .into_par_iter()
        .with_min_len(64)
        .flat_map_iter(|w| workload(s, dead, w))
        .collect()
}

/// Target `t` refusing workload `w` for verdict `v`, in words.
fn refusal(s: &Screened<'_>, w: usize, t: usize, v: Verdict) -> Refusal {
    let target = s.ir().targets.get(t).map_or("", |x| x.name.as_str());
    let described = s.described(w, t, v);
    Refusal {
        target: target.to_string(),
        message: described
            .as_ref()
            .map_or(String::new(), |d| d.message.clone()),
        requirement: described.as_ref().and_then(|d| d.requirement),
        offer: described.and_then(|d| d.offer),
    }
}

fn field(spans: Option<&ItemSpans>, keys: &[String]) -> Span {
    spans.map(|s| s.first_field(keys)).unwrap_or_default()
}

fn workload(s: &Screened<'_>, dead: &[&Identity], w: usize) -> Vec<FleetWarning> {
    let ir = s.ir();
    let Some(wl) = ir.workloads.get(w) else {
        return Vec::new();
    };
    let spans = ir.spans.workloads.get(w);
    if s.placeable(w) {
        return fallbacks(s, w);
    }
    // No target may hold it: find out whether nothing could run it, or the candidate list
    // or policy keeps it off the targets that could. Reasons are read from the screened
    // cells; only the refusals a warning names are described.
    let n = ir.targets.len();
    let beyond: Vec<Option<Reason>> = (0..n).map(|t| s.reason_beyond_candidates(w, t)).collect();
    let eligible = |r: &Option<Reason>| r.is_none_or(|r| r.stage() != RejectionStage::Eligibility);
    if !beyond.iter().any(eligible) {
        // The target that gets furthest through the checks, the first of equals.
        let closest = beyond
            .iter()
            .enumerate()
            .max_by(|(ta, a), (tb, b)| a.cmp(b).then(tb.cmp(ta)));
        let Some((t, _)) = closest else {
            return Vec::new();
        };
        return vec![FleetWarning::Unplaceable {
            workload: wl.name.clone(),
            span: field(spans, &[]),
            targets: n,
            closest: refusal(s, w, t, s.verdict_beyond_candidates(w, t)),
        }];
    }
    let usable: Vec<usize> = beyond
        .iter()
        .enumerate()
        .filter(|(_, r)| r.is_none())
        .map(|(t, _)| t)
        .collect();
    if let Some(candidates) = &wl.placement.candidates
        && !usable.is_empty()
    {
        // Only targets outside the list may run it.
        let refusals = candidates
            .iter()
            .take(LISTED)
            .map(|c| {
                let t = c.index();
                let mut r = refusal(s, w, t, s.verdict(w, t));
                r.offer = Some(field(spans, &[format!("placement.targets.{}", r.target)]));
                r
            })
            .collect();
        return vec![FleetWarning::CandidatesUnusable {
            workload: wl.name.clone(),
            span: field(spans, &["placement.targets".into(), "placement".into()]),
            refusals,
            candidates: candidates.len(),
            usable: usable
                .iter()
                .take(LISTED)
                .filter_map(|&t| ir.targets.get(t).map(|x| x.name.clone()))
                .collect(),
            usable_count: usable.len(),
        }];
    }
    if dead.contains(&&wl.identity) {
        return Vec::new();
    }
    let forbidden: Vec<usize> = beyond
        .iter()
        .enumerate()
        .filter(|(_, r)| eligible(r))
        .map(|(t, _)| t)
        .collect();
    vec![FleetWarning::ForbiddenEverywhere {
        workload: wl.name.clone(),
        span: field(spans, &[]),
        refusals: forbidden
            .iter()
            .take(LISTED)
            .map(|&t| refusal(s, w, t, s.verdict_beyond_candidates(w, t)))
            .collect(),
        targets: forbidden.len(),
    }]
}

/// The fallbacks of a workload that some target may hold which it may never use.
fn fallbacks(s: &Screened<'_>, w: usize) -> Vec<FleetWarning> {
    let ir = s.ir();
    let Some(wl) = ir.workloads.get(w) else {
        return Vec::new();
    };
    let spans = ir.spans.workloads.get(w);
    wl.placement
        .fallback
        .iter()
        .filter(|f| s.reason(w, f.index()).is_some())
        .map(|f| {
            let refusal = refusal(s, w, f.index(), s.verdict(w, f.index()));
            FleetWarning::FallbackNeverUsable {
                workload: wl.name.clone(),
                span: field(
                    spans,
                    &[
                        format!("placement.fallback.{}", refusal.target),
                        "placement.fallback".into(),
                        "placement".into(),
                    ],
                ),
                refusal,
            }
        })
        .collect()
}
