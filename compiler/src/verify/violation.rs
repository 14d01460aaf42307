//! What the verifier finds wrong with a plan: typed violations, each turning itself into a
//! [`Diagnostic`] (codes E06xx) with a human message.

use super::fit::{Unfit, UnstageableOn};
use crate::diagnostics::{Code, Diagnostic};
use crate::ir::Money;
use crate::source::Span;
use std::fmt;

/// A list of the plan that must hold one entry per spec item, in spec order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlanList {
    Workloads,
    PoolLedgers,
    TargetLedgers,
    Windows,
    Reclaims,
}

impl PlanList {
    fn noun(self) -> &'static str {
        match self {
            PlanList::Workloads => "workload",
            PlanList::PoolLedgers => "pool ledger",
            PlanList::TargetLedgers => "target ledger",
            PlanList::Windows => "window",
            PlanList::Reclaims => "reclaim rule",
        }
    }
}

/// A kind of name the plan refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameKind {
    Workload,
    Target,
    Pool,
    Window,
}

/// A per-target resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resource {
    /// Millicores.
    Cpu,
    /// Bytes.
    Memory,
}

/// Where a spread limit was exceeded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpreadScope {
    Target(String),
    /// A region; a target without one counts as a region of its own, named after it.
    Region(String),
}

/// How a placement breaks an identity's entitlements.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entitlement {
    /// Entitlements exist, and this identity has none: it may hold no GPU.
    None,
    /// The pool's accelerator is not among the entitled ones.
    Accelerator { policy: String, accelerator: String },
    /// The target's class is not among the entitled environments.
    Environment { policy: String, class: String },
    /// Its only entitlements expired before the plan instant.
    Expired { policy: String, until: String },
}

/// What is wrong with a listed fallback target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FallbackProblem {
    /// The spec's `fallback` does not name it.
    NotInSpec,
    /// It is not technically eligible.
    Ineligible(Unfit),
    /// A deny rule holds for it.
    Denied { policy: String, reason: String },
}

/// What is wrong with a workload's `rejected` list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RejectionProblem {
    /// A target that holds replicas is also listed as rejected.
    UsedTarget,
    /// A target neither used nor rejected.
    Unaccounted,
    /// A target rejected twice.
    Duplicate,
    /// Rejected at the eligibility stage, but it is technically eligible.
    ActuallyEligible,
}

/// What is untrue about a reason a plan gives for leaving a target unused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReasonProblem {
    /// The reason is not one its stage gives.
    NotOfStage,
    /// `not_candidate` for a target the workload's candidates name.
    IsCandidate,
    /// `denied` where no deny rule holds.
    NotDenied,
    /// `not_entitled` where a fitting pool is entitled.
    Entitled,
    /// A cap reason (`quota`, `entitlement_limit`, `window_limit`) where one more replica
    /// would exceed no such cap.
    CapNotReached,
    /// `not_needed` for a workload left short.
    NotNeededShort { placed: u64, replicas: u64 },
    /// `not_needed` for a target ranked before a target the workload uses.
    RanksBefore { used: String },
    /// An assignment reason for a target the workload may not use at all.
    NotOpen,
    /// An assignment reason for a target that could take one more replica.
    HasRoom,
    /// The target is full for the workload, but not by the rule named.
    RuleDoesNotHold,
}

/// One way a plan fails verification.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    UnsupportedFormat {
        found: String,
    },
    InstantMismatch {
        recorded: String,
        expected: String,
    },
    PlanIdMismatch {
        recorded: String,
        computed: String,
    },
    /// `verification` is neither blank (a candidate) nor the verifier's summary.
    VerificationEdited,
    UnknownName {
        kind: NameKind,
        name: String,
        /// Where it appears: `workload \`w\``, `target \`t\``.
        context: Option<String>,
    },
    MissingEntry {
        list: PlanList,
        name: String,
        span: Span,
    },
    DuplicateEntry {
        list: PlanList,
        name: String,
    },
    EntryOrder {
        list: PlanList,
    },
    FieldMismatch {
        workload: String,
        target: Option<String>,
        field: &'static str,
        recorded: String,
        expected: String,
        span: Span,
    },
    NotCandidate {
        workload: String,
        target: String,
        span: Span,
    },
    Ineligible {
        workload: String,
        target: String,
        unfit: Unfit,
        span: Span,
    },
    WrongVariant {
        workload: String,
        target: String,
        pool: Option<String>,
        recorded: Option<String>,
        expected: Option<String>,
        span: Span,
    },
    EmptyPlacement {
        workload: String,
        target: String,
        span: Span,
    },
    TooManyReplicas {
        workload: String,
        placed: u64,
        replicas: u32,
        span: Span,
    },
    StatusMismatch {
        /// `None` for the plan-wide `feasible` flag.
        workload: Option<String>,
        field: &'static str,
        recorded: String,
        expected: String,
        span: Span,
    },
    PoolOverCommitted {
        target: String,
        pool: String,
        allocated: u64,
        capacity: u64,
        span: Span,
    },
    TargetOverCommitted {
        target: String,
        resource: Resource,
        allocated: u64,
        capacity: u64,
        span: Span,
    },
    LedgerMismatch {
        target: String,
        pool: Option<String>,
        field: &'static str,
        recorded: String,
        recomputed: String,
    },
    OverQuota {
        policy: String,
        team: String,
        used: u64,
        max: u32,
        span: Span,
    },
    OverEntitlement {
        policy: String,
        identity: String,
        used: u64,
        max: u32,
        span: Span,
    },
    NotEntitled {
        workload: String,
        identity: String,
        target: String,
        breach: Entitlement,
        span: Span,
    },
    Denied {
        workload: String,
        target: String,
        policy: String,
        reason: String,
        span: Span,
    },
    UnknownTimeZone {
        window: String,
        zone: String,
        span: Span,
    },
    WindowStateMismatch {
        window: String,
        recorded: bool,
        expected: bool,
        at: String,
        span: Span,
    },
    WindowLimitExceeded {
        policy: String,
        window: String,
        /// `class experiment`, `kind notebook`, `team research`.
        selector: String,
        used: u64,
        max: u32,
        span: Span,
    },
    SpreadExceeded {
        workload: String,
        scope: SpreadScope,
        placed: u64,
        max: u32,
        span: Span,
    },
    IsolationBroken {
        workload: String,
        other: String,
        target: String,
        pool: String,
        span: Span,
    },
    CostMismatch {
        workload: String,
        /// `None` for the workload's total.
        target: Option<String>,
        recorded: Money,
        expected: Money,
        span: Span,
    },
    ApprovalMissing {
        workload: String,
        cost_per_day: Money,
        policy: String,
        threshold: Money,
        span: Span,
    },
    ApprovalUnwarranted {
        workload: String,
        cost_per_day: Money,
        policy: String,
        span: Span,
    },
    BadFallback {
        workload: String,
        target: String,
        problem: FallbackProblem,
        span: Span,
    },
    ReclaimMismatch {
        policy: String,
        recorded: String,
        expected: String,
        span: Span,
    },
    RejectionMismatch {
        workload: String,
        target: String,
        problem: RejectionProblem,
        span: Span,
    },
    /// A listed reason that is not true of the plan's placements.
    UntrueReason {
        workload: String,
        target: String,
        reason: String,
        problem: ReasonProblem,
        span: Span,
    },
    /// A replica on fallback `position` (1-based) while `earlier`, ranked before it, could
    /// take it.
    FallbackOrder {
        workload: String,
        used: String,
        position: usize,
        earlier: String,
        span: Span,
    },
    /// The rejections' `others` counts do not add up to the unused targets not listed.
    RejectionCount {
        workload: String,
        others: u64,
        unlisted: u64,
        span: Span,
    },
}

impl Violation {
    pub fn code(&self) -> Code {
        use Violation as V;
        match self {
            V::UnsupportedFormat { .. } => Code::PlanFormat,
            V::InstantMismatch { .. } => Code::PlanInstant,
            V::PlanIdMismatch { .. } => Code::PlanIdMismatch,
            V::VerificationEdited => Code::VerificationEdited,
            V::UnknownName { .. } => Code::PlanUnknownName,
            V::MissingEntry { .. } => Code::PlanMissingEntry,
            V::DuplicateEntry { .. } => Code::PlanDuplicateEntry,
            V::EntryOrder { .. } => Code::PlanEntryOrder,
            V::FieldMismatch { .. } => Code::PlanFieldMismatch,
            V::NotCandidate { .. } => Code::PlacementNotCandidate,
            V::Ineligible { .. } => Code::PlacementIneligible,
            V::WrongVariant { .. } => Code::PlacementWrongVariant,
            V::EmptyPlacement { .. } => Code::PlacementEmpty,
            V::TooManyReplicas { .. } => Code::TooManyReplicas,
            V::StatusMismatch { .. } => Code::StatusMismatch,
            V::PoolOverCommitted { .. } => Code::PoolOverCommitted,
            V::TargetOverCommitted { .. } => Code::TargetOverCommitted,
            V::LedgerMismatch { .. } => Code::LedgerMismatch,
            V::OverQuota { .. } => Code::OverQuota,
            V::OverEntitlement { .. } => Code::OverEntitlement,
            V::NotEntitled { .. } => Code::NotEntitled,
            V::Denied { .. } => Code::PlacementDenied,
            V::UnknownTimeZone { .. } => Code::PlanUnknownTimeZone,
            V::WindowStateMismatch { .. } => Code::WindowStateMismatch,
            V::WindowLimitExceeded { .. } => Code::WindowLimitExceeded,
            V::SpreadExceeded { .. } => Code::SpreadExceeded,
            V::IsolationBroken { .. } => Code::IsolationBroken,
            V::CostMismatch { .. } => Code::CostMismatch,
            V::ApprovalMissing { .. } => Code::ApprovalMissing,
            V::ApprovalUnwarranted { .. } => Code::ApprovalUnwarranted,
            V::BadFallback { .. } => Code::BadFallback,
            V::ReclaimMismatch { .. } => Code::ReclaimMismatch,
            V::RejectionMismatch { .. } | V::RejectionCount { .. } => Code::RejectionMismatch,
            V::UntrueReason { .. } => Code::UntrueReason,
            V::FallbackOrder { .. } => Code::FallbackOrder,
        }
    }

    /// The source location that best explains the violation (the workload, rule or window
    /// involved); the default span when the plan alone is at fault or the IR carries no
    /// spans.
    pub fn span(&self) -> Span {
        use Violation as V;
        match self {
            V::UnsupportedFormat { .. }
            | V::InstantMismatch { .. }
            | V::PlanIdMismatch { .. }
            | V::VerificationEdited
            | V::UnknownName { .. }
            | V::DuplicateEntry { .. }
            | V::EntryOrder { .. }
            | V::LedgerMismatch { .. } => Span::default(),
            V::MissingEntry { span, .. }
            | V::FieldMismatch { span, .. }
            | V::NotCandidate { span, .. }
            | V::Ineligible { span, .. }
            | V::WrongVariant { span, .. }
            | V::EmptyPlacement { span, .. }
            | V::TooManyReplicas { span, .. }
            | V::StatusMismatch { span, .. }
            | V::PoolOverCommitted { span, .. }
            | V::TargetOverCommitted { span, .. }
            | V::OverQuota { span, .. }
            | V::OverEntitlement { span, .. }
            | V::NotEntitled { span, .. }
            | V::Denied { span, .. }
            | V::UnknownTimeZone { span, .. }
            | V::WindowStateMismatch { span, .. }
            | V::WindowLimitExceeded { span, .. }
            | V::SpreadExceeded { span, .. }
            | V::IsolationBroken { span, .. }
            | V::CostMismatch { span, .. }
            | V::ApprovalMissing { span, .. }
            | V::ApprovalUnwarranted { span, .. }
            | V::BadFallback { span, .. }
            | V::ReclaimMismatch { span, .. }
            | V::RejectionMismatch { span, .. }
            | V::RejectionCount { span, .. }
            | V::UntrueReason { span, .. }
            | V::FallbackOrder { span, .. } => *span,
        }
    }

    /// The one-line message (lowercase, no final period, names in backticks).
    pub fn message(&self) -> String {
        use Violation as V;
        match self {
            V::UnsupportedFormat { found } => {
                format!(
                    "plan format `{found}` is not `{}`",
                    crate::plan::PLAN_FORMAT
                )
            }
            V::InstantMismatch { recorded, expected } => {
                format!("the plan was made at `{recorded}`, not at `{expected}`")
            }
            V::PlanIdMismatch { recorded, .. } => {
                format!("plan id `{recorded}` does not match the plan's content")
            }
            V::VerificationEdited => {
                "the plan's `verification` is not the verifier's summary".to_owned()
            }
            V::UnknownName {
                kind,
                name,
                context,
            } => {
                let kind = match kind {
                    NameKind::Workload => "workload",
                    NameKind::Target => "target",
                    NameKind::Pool => "pool",
                    NameKind::Window => "window",
                };
                match context {
                    Some(c) => format!("unknown {kind} `{name}` in the plan ({c})"),
                    None => format!("unknown {kind} `{name}` in the plan"),
                }
            }
            V::MissingEntry { list, name, .. } => {
                format!("the plan has no {} for `{name}`", list.noun())
            }
            V::DuplicateEntry { list, name } => {
                format!("the plan lists {} `{name}` more than once", list.noun())
            }
            V::EntryOrder { list } => {
                format!("the plan's {} entries are not in spec order", list.noun())
            }
            V::FieldMismatch {
                workload,
                target,
                field,
                recorded,
                expected,
                ..
            } => {
                let on = target
                    .as_ref()
                    .map_or_else(String::new, |t| format!(" on `{t}`"));
                format!(
                    "`{field}` of workload `{workload}`{on} is `{recorded}` in the plan, \
                     `{expected}` by the spec"
                )
            }
            V::NotCandidate {
                workload, target, ..
            } => format!(
                "workload `{workload}` is placed on `{target}`, which is not one of its candidate targets"
            ),
            V::Ineligible {
                workload,
                target,
                unfit,
                ..
            } => format!("workload `{workload}` cannot run on `{target}`: {unfit}"),
            V::WrongVariant {
                workload,
                target,
                recorded,
                expected,
                ..
            } => format!(
                "workload `{workload}` on `{target}` uses variant {}; the first variant that fits is {}",
                opt_name(recorded),
                opt_name(expected)
            ),
            V::EmptyPlacement {
                workload, target, ..
            } => format!("workload `{workload}` has a placement on `{target}` with no replicas"),
            V::TooManyReplicas {
                workload,
                placed,
                replicas,
                ..
            } => format!(
                "workload `{workload}` has {placed} replicas placed but declares {replicas}"
            ),
            V::StatusMismatch {
                workload,
                field,
                recorded,
                expected,
                ..
            } => match workload {
                Some(w) => format!(
                    "`{field}` of workload `{w}` is `{recorded}` in the plan; its placements make it `{expected}`"
                ),
                None => format!(
                    "the plan says `{field}` is `{recorded}`; its workloads make it `{expected}`"
                ),
            },
            V::PoolOverCommitted {
                target,
                pool,
                allocated,
                capacity,
                ..
            } => format!(
                "pool `{pool}` of `{target}` is over-committed: {allocated} GPUs allocated, {capacity} available"
            ),
            V::TargetOverCommitted {
                target,
                resource,
                allocated,
                capacity,
                ..
            } => {
                let (what, a, c) = match resource {
                    Resource::Cpu => ("CPU", millicores(*allocated), millicores(*capacity)),
                    Resource::Memory => ("memory", bytes(*allocated), bytes(*capacity)),
                };
                format!("`{target}` is over-committed on {what}: {a} allocated, {c} available")
            }
            V::LedgerMismatch {
                target,
                pool,
                field,
                recorded,
                recomputed,
            } => {
                let whose = match pool {
                    Some(p) => format!("pool `{p}` of `{target}`"),
                    None => format!("target `{target}`"),
                };
                format!(
                    "the ledger of {whose} records `{field}` = {recorded}; the placements give {recomputed}"
                )
            }
            V::OverQuota {
                team, used, max, ..
            } => format!("team `{team}` holds {used} GPUs, over its quota of {max}"),
            V::OverEntitlement {
                identity,
                used,
                max,
                ..
            } => format!("identity `{identity}` holds {used} GPUs, over its entitlement of {max}"),
            V::NotEntitled {
                workload,
                identity,
                target,
                breach,
                ..
            } => match breach {
                Entitlement::None => format!(
                    "workload `{workload}` holds GPUs on `{target}` but identity `{identity}` has no entitlement"
                ),
                Entitlement::Accelerator { accelerator, .. } => format!(
                    "identity `{identity}` is not entitled to `{accelerator}` (workload `{workload}` on `{target}`)"
                ),
                Entitlement::Environment { class, .. } => format!(
                    "identity `{identity}` is not entitled to `{class}` targets (workload `{workload}` on `{target}`)"
                ),
                Entitlement::Expired { until, .. } => format!(
                    "workload `{workload}` holds GPUs on `{target}` but the entitlement of identity `{identity}` expired at `{until}`"
                ),
            },
            V::Denied {
                workload,
                target,
                policy,
                ..
            } => format!(
                "workload `{workload}` is placed on `{target}`, which policy `{policy}` denies"
            ),
            V::UnknownTimeZone { window, zone, .. } => {
                format!("window `{window}` uses unknown time zone `{zone}`")
            }
            V::WindowStateMismatch {
                window,
                recorded,
                at,
                ..
            } => {
                let state = |b: bool| if b { "in effect" } else { "not in effect" };
                format!(
                    "the plan records window `{window}` as {} at `{at}`; it is {}",
                    state(*recorded),
                    state(!*recorded)
                )
            }
            V::WindowLimitExceeded {
                window,
                selector,
                used,
                max,
                ..
            } => {
                let selector = match selector.split_once(' ') {
                    Some((by, value)) => format!("{by} `{value}`"),
                    None => format!("`{selector}`"),
                };
                format!(
                    "workloads of {selector} hold {used} GPUs while window `{window}` is in effect; the limit is {max}"
                )
            }
            V::SpreadExceeded {
                workload,
                scope,
                placed,
                max,
                ..
            } => {
                let place = match scope {
                    SpreadScope::Target(t) => format!("target `{t}`"),
                    SpreadScope::Region(r) => format!("region `{r}`"),
                };
                format!(
                    "workload `{workload}` has {placed} replicas in {place}; its spread allows {max}"
                )
            }
            V::IsolationBroken {
                workload,
                other,
                target,
                pool,
                ..
            } => format!(
                "workloads `{workload}` and `{other}` share pool `{pool}` of `{target}`, but must be isolated"
            ),
            V::CostMismatch {
                workload,
                target,
                recorded,
                expected,
                ..
            } => {
                let on = target
                    .as_ref()
                    .map_or_else(String::new, |t| format!(" on `{t}`"));
                format!(
                    "`cost_per_day` of workload `{workload}`{on} is {recorded} in the plan; it costs {expected}"
                )
            }
            V::ApprovalMissing {
                workload,
                cost_per_day,
                threshold,
                ..
            } => format!(
                "workload `{workload}` costs {cost_per_day} per day, above the approval threshold {threshold}, but is not marked as awaiting approval"
            ),
            V::ApprovalUnwarranted {
                workload, policy, ..
            } => format!(
                "workload `{workload}` is marked as awaiting approval under `{policy}`, which does not require it"
            ),
            V::BadFallback {
                workload,
                target,
                problem,
                ..
            } => match problem {
                FallbackProblem::NotInSpec => format!(
                    "fallback `{target}` of workload `{workload}` is not in its placement's `fallback`"
                ),
                FallbackProblem::Ineligible(u) => {
                    format!("fallback `{target}` of workload `{workload}` is not eligible: {u}")
                }
                FallbackProblem::Denied { policy, .. } => format!(
                    "fallback `{target}` of workload `{workload}` is denied by policy `{policy}`"
                ),
            },
            V::ReclaimMismatch { policy, .. } => {
                format!("reclaim rule of policy `{policy}` differs from the spec")
            }
            V::RejectionMismatch {
                workload,
                target,
                problem,
                ..
            } => match problem {
                RejectionProblem::UsedTarget => format!(
                    "workload `{workload}` lists `{target}` as rejected but has replicas there"
                ),
                RejectionProblem::Unaccounted => {
                    format!("workload `{workload}` neither uses nor rejects target `{target}`")
                }
                RejectionProblem::Duplicate => {
                    format!("workload `{workload}` rejects target `{target}` more than once")
                }
                RejectionProblem::ActuallyEligible => format!(
                    "workload `{workload}` rejects `{target}` as ineligible, but it is eligible"
                ),
            },
            V::UntrueReason {
                workload,
                target,
                reason,
                problem,
                ..
            } => {
                let why = match problem {
                    ReasonProblem::NotOfStage => {
                        "berth gives no such reason at that stage".to_owned()
                    }
                    ReasonProblem::IsCandidate => "the target is one of its candidates".to_owned(),
                    ReasonProblem::NotDenied => "no deny rule holds there".to_owned(),
                    ReasonProblem::Entitled => "a fitting pool there is entitled".to_owned(),
                    ReasonProblem::CapNotReached => {
                        "one more replica would exceed no such limit".to_owned()
                    }
                    ReasonProblem::NotNeededShort { placed, replicas } => {
                        format!("only {placed} of its {replicas} replicas are placed")
                    }
                    ReasonProblem::RanksBefore { used } => {
                        format!("the target ranks before `{used}`, which holds replicas")
                    }
                    ReasonProblem::NotOpen => {
                        "the workload may not use the target at all".to_owned()
                    }
                    ReasonProblem::HasRoom => "the target could take one more replica".to_owned(),
                    ReasonProblem::RuleDoesNotHold => {
                        "that rule keeps no replica off any of its pools".to_owned()
                    }
                };
                format!(
                    "workload `{workload}` rejects `{target}` as `{reason}`, which is not true: {why}"
                )
            }
            V::FallbackOrder {
                workload,
                used,
                position,
                earlier,
                ..
            } => format!(
                "workload `{workload}` uses fallback {position} `{used}` while `{earlier}`, ranked before it, could take the replica"
            ),
            V::RejectionCount {
                workload,
                others,
                unlisted,
                ..
            } => format!(
                "workload `{workload}` counts {others} further rejected targets, but {unlisted} unused targets are not listed"
            ),
        }
    }

    /// The diagnostic: code, message, the span of the spec element involved, and notes or
    /// help where there is more to say.
    pub fn diagnostic(&self) -> Diagnostic {
        use Violation as V;
        let d = Diagnostic::error(self.code(), self.message(), self.span());
        match self {
            V::UnsupportedFormat { .. } => {
                d.help("plan again with this version of berth to get a plan it can check")
            }
            V::InstantMismatch { .. } => {
                d.help("verify a plan at the instant it records (`--at`)")
            }
            V::PlanIdMismatch { computed, .. } => d
                .note(format!("its content hashes to `{computed}`"))
                .help("the plan was changed after it was written; plan again instead of editing it"),
            V::VerificationEdited => d
                .note("a written plan records `verified: true`, every check in order and no violations")
                .help("the plan was changed after it was written; plan again instead of editing it"),
            V::Denied { reason, .. } => d.note(format!("reason: {reason}")),
            V::ReclaimMismatch {
                recorded, expected, ..
            } => d
                .note(format!("the plan has: {recorded}"))
                .note(format!("the spec says: {expected}")),
            V::BadFallback {
                problem: FallbackProblem::Denied { reason, .. },
                ..
            } => d.note(format!("reason: {reason}")),
            V::PoolOverCommitted { .. } | V::TargetOverCommitted { .. } => {
                d.help("plan again rather than moving replicas by hand: `berth plan` never over-commits")
            }
            V::LedgerMismatch { .. } => {
                d.help("capacity ledgers are recomputed from the placements; a hand-edited plan must keep them consistent")
            }
            V::WindowStateMismatch { .. } | V::WindowLimitExceeded { .. } => {
                d.note("windows are evaluated at the plan instant in the window's time zone")
            }
            _ => d,
        }
    }
}

impl fmt::Display for Violation {
    /// `E0614: pool `l4` of `lyon` is over-committed: …`, as listed in the plan's
    /// `verification.violations`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code(), self.message())
    }
}

impl fmt::Display for Unfit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unfit::Environment { class } => {
                write!(f, "its environments do not include `{class}`")
            }
            Unfit::Connectivity { tolerated, offered } => write!(
                f,
                "it tolerates `{tolerated}` connectivity at worst; the target is `{offered}`"
            ),
            Unfit::Cpu { required, offered } => write!(
                f,
                "a replica needs {} CPU; the target has {}",
                millicores(*required),
                millicores(*offered)
            ),
            Unfit::Memory { required, offered } => write!(
                f,
                "a replica needs {} of memory; the target has {}",
                bytes(*required),
                bytes(*offered)
            ),
            Unfit::NeedsPool { gpus } => {
                write!(
                    f,
                    "a replica needs {gpus} GPUs but the placement names no pool"
                )
            }
            Unfit::NeedsNoPool { pool } => {
                write!(f, "it needs no GPU but the placement uses pool `{pool}`")
            }
            Unfit::Accelerator { pool, accelerator } => write!(
                f,
                "it does not accept `{accelerator}`, the accelerator of pool `{pool}`"
            ),
            Unfit::MigProfile {
                pool,
                required,
                offered,
            } => write!(
                f,
                "it needs {}; pool `{pool}` offers {}",
                mig(required),
                mig(offered)
            ),
            Unfit::GpuMemory {
                pool,
                required,
                offered,
            } => write!(
                f,
                "needs {} per GPU; pool `{pool}` offers {}",
                bytes(*required),
                bytes(*offered)
            ),
            Unfit::PoolTooSmall {
                pool,
                required,
                capacity,
            } => write!(
                f,
                "a replica needs {required} GPUs from one pool; pool `{pool}` has {capacity}"
            ),
            Unfit::NoVariant { model, pool } => match pool {
                Some(p) => write!(f, "no variant of model `{model}` fits pool `{p}`"),
                None => write!(
                    f,
                    "no variant of model `{model}` runs without an accelerator"
                ),
            },
            Unfit::ModelUnreachable { model, pool, reach } => {
                match pool {
                    Some(p) => write!(
                        f,
                        "no variant of model `{model}` that fits pool `{p}` can be staged"
                    )?,
                    None => write!(f, "model `{model}` cannot be staged")?,
                }
                match reach {
                    UnstageableOn::EdgeAgent => write!(
                        f,
                        " by this target's edge agent: it does not cache `{model}` and fetches only `oci://`, `http(s)://` and `file://` artifacts"
                    ),
                    UnstageableOn::DisconnectedWithoutMirror => write!(
                        f,
                        " on this disconnected target: it does not cache `{model}` and names no registry mirror"
                    ),
                    UnstageableOn::DisconnectedWithMirror => write!(
                        f,
                        " on this disconnected target: it does not cache `{model}` and its mirrors serve `oci://` artifacts only"
                    ),
                }
            }
            Unfit::DataMissing { data } => write!(f, "the target offers no data `{data}`"),
            Unfit::DataLatency {
                data,
                max_latency,
                latency,
            } => write!(
                f,
                "data `{data}` is {} away; at most {} allowed",
                duration(*latency),
                duration(*max_latency)
            ),
            Unfit::Service {
                service,
                min,
                offered,
            } => write!(
                f,
                "needs `{service} >= {min}`; the target offers `{service}` at `{offered}`"
            ),
        }
    }
}

fn opt_name(n: &Option<String>) -> String {
    n.as_ref()
        .map_or_else(|| "none".to_owned(), |n| format!("`{n}`"))
}

fn mig(p: &Option<String>) -> String {
    p.as_ref()
        .map_or_else(|| "whole GPUs".to_owned(), |p| format!("MIG slices `{p}`"))
}

/// `16GiB`, `512MiB`, `1000B`: the largest binary unit that divides exactly.
pub(super) fn bytes(n: u64) -> String {
    const UNITS: [(&str, u64); 4] = [
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ];
    for (unit, size) in UNITS {
        if n >= size && n.is_multiple_of(size) {
            return format!("{}{unit}", n / size);
        }
    }
    format!("{n}B")
}

/// `4` cores or `500m`.
fn millicores(n: u64) -> String {
    if n.is_multiple_of(1000) {
        format!("{} cores", n / 1000)
    } else {
        format!("{n}m")
    }
}

/// `20ms`, `250us`, `1s`: the largest unit that divides exactly.
pub(super) fn duration(ns: u64) -> String {
    const UNITS: [(&str, u64); 5] = [
        ("h", 3_600_000_000_000),
        ("m", 60_000_000_000),
        ("s", 1_000_000_000),
        ("ms", 1_000_000),
        ("us", 1_000),
    ];
    for (unit, size) in UNITS {
        if ns >= size && ns.is_multiple_of(size) {
            return format!("{}{unit}", ns / size);
        }
    }
    format!("{ns}ns")
}
