//! Per workload: can any target run it, and are its candidate list and its fallbacks usable.

use super::warning::{FleetWarning, Refusal};
use crate::ir::{Identity, ItemSpans};
use crate::placement::screen::Screened;
use crate::placement::verdict::Verdict;
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
    spans
        .and_then(|s| keys.iter().find_map(|k| s.fields.get(k).copied()))
        .or(spans.map(|s| s.name))
        .unwrap_or_default()
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
    // or policy keeps it off the targets that could.
    let beyond = s.verdicts_beyond_candidates(w);
    let eligible = |v: &Verdict| {
        v.reason()
            .is_none_or(|r| r.stage() != RejectionStage::Eligibility)
    };
    if !beyond.iter().any(eligible) {
        // The target that gets furthest through the checks, the first of equals.
        let closest = beyond
            .iter()
            .enumerate()
            .max_by(|(ta, a), (tb, b)| a.reason().cmp(&b.reason()).then(tb.cmp(ta)));
        let Some((t, v)) = closest else {
            return Vec::new();
        };
        return vec![FleetWarning::Unplaceable {
            workload: wl.name.clone(),
            span: field(spans, &[]),
            targets: ir.targets.len(),
            closest: refusal(s, w, t, *v),
        }];
    }
    let usable: Vec<String> = beyond
        .iter()
        .enumerate()
        .filter(|(_, v)| v.is_ok())
        .filter_map(|(t, _)| ir.targets.get(t).map(|x| x.name.clone()))
        .collect();
    if let Some(candidates) = &wl.placement.candidates
        && !usable.is_empty()
    {
        // Only targets outside the list may run it.
        let refusals = candidates
            .iter()
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
            usable,
        }];
    }
    if dead.contains(&&wl.identity) {
        return Vec::new();
    }
    let refusals = beyond
        .iter()
        .enumerate()
        .filter(|(_, v)| eligible(v))
        .map(|(t, v)| refusal(s, w, t, *v))
        .collect();
    vec![FleetWarning::ForbiddenEverywhere {
        workload: wl.name.clone(),
        span: field(spans, &[]),
        refusals,
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
