//! What the fleet analysis finds, as data, and how each finding becomes a warning.

use crate::diagnostics::{Code, Diagnostic};
use crate::source::Span;

/// Findings listed one by one in a warning before the rest are counted.
pub const LISTED: usize = 5;

/// One target refused, in words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub target: String,
    pub message: String,
    /// The rule or requirement that refuses it.
    pub requirement: Option<Span>,
    /// The target's side (its field, or its name).
    pub offer: Option<Span>,
}

/// A deny rule standing between an entitlement and every use of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denial {
    pub rule: Span,
    /// The first allowed pair it forbids.
    pub workload: String,
    pub target: String,
}

/// A GPU cap, named as the spec writes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CapRule {
    Quota { team: String },
    Entitlement { identity: String, restricted: bool },
    Limit { selector: String, window: String },
}

/// A finding of the fleet analysis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FleetWarning {
    /// W0701: no target of the spec can technically run the workload.
    Unplaceable {
        workload: String,
        span: Span,
        targets: usize,
        closest: Refusal,
    },
    /// W0702: every target that could run the workload is forbidden by policy.
    ForbiddenEverywhere {
        workload: String,
        span: Span,
        /// The first [`LISTED`] targets that could run it, each with its policy reason.
        refusals: Vec<Refusal>,
        /// How many targets could run it.
        targets: usize,
    },
    /// W0703: deny rules forbid every pair an entitlement allows.
    DeadEntitlement {
        identity: String,
        span: Span,
        /// Each deny rule found to be the first to hold on an allowed pair.
        rules: Vec<Denial>,
        /// Allowed (workload, target) pairs.
        pairs: usize,
    },
    /// W0704: a cap larger than every GPU of the fleet it could count.
    CapAboveFleet {
        rule: CapRule,
        span: Span,
        max: u32,
        fleet: u64,
        /// Of `fleet`, MIG instances.
        slices: u64,
    },
    /// W0705: a window with no day to open on.
    WindowNeverOpens {
        window: String,
        span: Span,
        /// Limits that name it.
        limits: Vec<Span>,
    },
    /// W0706: a fallback the workload may never use.
    FallbackNeverUsable {
        workload: String,
        span: Span,
        refusal: Refusal,
    },
    /// W0707: every candidate target refuses the workload, while others would take it.
    CandidatesUnusable {
        workload: String,
        span: Span,
        /// The first [`LISTED`] candidates, each with its reason.
        refusals: Vec<Refusal>,
        candidates: usize,
        /// The first [`LISTED`] targets outside the list that may run it.
        usable: Vec<String>,
        usable_count: usize,
    },
}

/// `names` (the first of `total`) in a sentence: "`a`, `b` and 3 more".
fn listed(names: &[String], total: usize) -> String {
    let mut out: Vec<String> = names
        .iter()
        .take(LISTED)
        .map(|n| format!("`{n}`"))
        .collect();
    if total > out.len() {
        out.push(format!("{} more", total - out.len()));
    }
    match out.len() {
        0 => String::new(),
        1 => out.remove(0),
        n => {
            let last = out.remove(n - 1);
            format!("{} and {last}", out.join(", "))
        }
    }
}

fn gpus(n: u64) -> String {
    if n == 1 {
        "1 GPU".into()
    } else {
        format!("{n} GPUs")
    }
}

/// How a refusal's label says which target it is about.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Naming {
    /// The label is elsewhere in the target: it starts with the target's name.
    Prefixed,
    /// The label underlines the target's name itself.
    ByItsSpan,
}

/// Labels for the refusals: each listed at its target's side (or the rule's), the rest
/// counted in a note.
fn with_refusals(
    mut d: Diagnostic,
    refusals: &[Refusal],
    total: usize,
    noun: &str,
    naming: Naming,
) -> Diagnostic {
    for r in refusals.iter().take(LISTED) {
        let line = match naming {
            Naming::Prefixed => format!("`{}`: {}", r.target, r.message),
            Naming::ByItsSpan => r.message.clone(),
        };
        d = match r.offer.or(r.requirement) {
            Some(span) => d.label(span, line),
            None => d.note(line),
        };
    }
    let shown = refusals.len().min(LISTED);
    if total > shown {
        d = d.note(format!("and {} more {noun}", total - shown));
    }
    d
}

impl From<&FleetWarning> for Diagnostic {
    fn from(w: &FleetWarning) -> Diagnostic {
        use FleetWarning as W;
        match w {
            W::Unplaceable {
                workload,
                span,
                targets,
                closest,
            } => {
                let mut d = Diagnostic::warning(
                    Code::Unplaceable,
                    format!("workload `{workload}` can run on no target"),
                    *span,
                )
                .primary_label("no target offers what it needs");
                if let Some(req) = closest.requirement {
                    d = d.label(req, "required here");
                }
                let closest_line =
                    format!("`{}` comes closest: {}", closest.target, closest.message);
                d = match closest.offer {
                    Some(offer) => d.label(offer, closest_line),
                    None => d.note(closest_line),
                };
                d.note(format!(
                    "{} checked, the candidate list set aside",
                    if *targets == 1 {
                        "the spec's one target was".to_string()
                    } else {
                        format!("all {targets} targets of the spec were")
                    }
                ))
                .help(format!(
                    "change what `{workload}` requires, or give a target what `{}` lacks",
                    closest.target
                ))
            }
            W::ForbiddenEverywhere {
                workload,
                span,
                refusals,
                targets,
            } => {
                let d = Diagnostic::warning(
                    Code::ForbiddenEverywhere,
                    format!("workload `{workload}` is forbidden on every target that could run it"),
                    *span,
                )
                .primary_label(if *targets == 1 {
                    "one target could run it, and policy forbids it there".to_string()
                } else {
                    format!("{targets} targets could run it, and policy forbids each")
                });
                with_refusals(d, refusals, *targets, "targets", Naming::Prefixed)
                    .help("change the rule that forbids it, or add a target the policy permits")
            }
            W::DeadEntitlement {
                identity,
                span,
                rules,
                pairs,
            } => {
                let mut d = Diagnostic::warning(
                    Code::DeadEntitlement,
                    format!(
                        "the entitlement of `{identity}` can never be used: deny rules forbid \
                         every placement it allows"
                    ),
                    *span,
                )
                .primary_label(if *pairs == 1 {
                    "allows one placement, and a deny rule forbids it".to_string()
                } else {
                    format!("allows {pairs} placements, and a deny rule forbids each")
                });
                for r in rules {
                    d = d.label(
                        r.rule,
                        format!("forbids `{}` on `{}`", r.workload, r.target),
                    );
                }
                d.help("narrow the deny rule, or change what the entitlement allows")
            }
            W::CapAboveFleet {
                rule,
                span,
                max,
                fleet,
                slices,
            } => {
                let (what, scope) = match rule {
                    CapRule::Quota { team } => {
                        (format!("the quota of team `{team}`"), "the fleet has")
                    }
                    CapRule::Entitlement {
                        identity,
                        restricted,
                    } => (
                        format!("the entitlement of `{identity}`"),
                        if *restricted {
                            "the fleet has of the accelerators and environments it allows"
                        } else {
                            "the fleet has"
                        },
                    ),
                    CapRule::Limit { selector, window } => (
                        format!("the limit on {selector} during `{window}`"),
                        "the fleet has",
                    ),
                };
                let mut d = Diagnostic::warning(
                    Code::CapAboveFleet,
                    format!(
                        "{what} allows {}, more than {scope} ({fleet})",
                        gpus(u64::from(*max))
                    ),
                    *span,
                )
                .primary_label("this bound never binds");
                if *slices > 0 {
                    d = d.note(format!(
                        "a MIG instance counts as one GPU against caps; {slices} of the {fleet} are \
                         MIG instances"
                    ));
                }
                d.help(format!(
                    "a bound of {fleet} or more never limits anything: lower it, or remove the rule"
                ))
            }
            W::WindowNeverOpens {
                window,
                span,
                limits,
            } => {
                let mut d = Diagnostic::warning(
                    Code::WindowNeverOpens,
                    format!("window `{window}` never opens"),
                    *span,
                )
                .primary_label("it lists no day");
                for l in limits {
                    d = d.label(*l, "never in effect");
                }
                d.help(
                    "give the days it opens on: `weekdays`, `weekends`, `daily` or a list such as \
                     `[sat, sun]`",
                )
            }
            W::FallbackNeverUsable {
                workload,
                span,
                refusal,
            } => {
                let mut d = Diagnostic::warning(
                    Code::FallbackNeverUsable,
                    format!(
                        "fallback `{}` can never take replicas of `{workload}`",
                        refusal.target
                    ),
                    *span,
                )
                .primary_label(refusal.message.clone());
                if let Some(offer) = refusal.offer {
                    d = d.label(offer, format!("on `{}`", refusal.target));
                }
                d.help(format!(
                    "remove `{}` from `fallback`: the runtime can never fail over to it",
                    refusal.target
                ))
            }
            W::CandidatesUnusable {
                workload,
                span,
                refusals,
                candidates,
                usable,
                usable_count,
            } => {
                let d = Diagnostic::warning(
                    Code::CandidatesUnusable,
                    format!("no target of `placement {workload}` can run `{workload}`"),
                    *span,
                )
                .primary_label(if *candidates == 1 {
                    "the one target listed cannot run it".to_string()
                } else {
                    format!("none of the {candidates} targets listed can run it")
                });
                with_refusals(d, refusals, *candidates, "candidates", Naming::ByItsSpan).help(
                    format!(
                        "{} could run it: add {} to `targets`",
                        listed(usable, *usable_count),
                        if *usable_count == 1 { "it" } else { "them" }
                    ),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_name_five_and_count_the_rest() {
        let names: Vec<String> = (1..=7).map(|i| format!("t{i}")).collect();
        assert_eq!(listed(&names[..1], 1), "`t1`");
        assert_eq!(listed(&names[..2], 2), "`t1` and `t2`");
        assert_eq!(
            listed(&names[..5], 9),
            "`t1`, `t2`, `t3`, `t4`, `t5` and 4 more"
        );
        assert_eq!(listed(&names, 7), "`t1`, `t2`, `t3`, `t4`, `t5` and 2 more");
    }
}
