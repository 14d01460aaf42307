//! Every rule kind of a `policy` checked and lowered into `ir.policy`, in source order.

// INVARIANT: `p` runs over `0..ck.names.policies.len()`.
#![allow(clippy::indexing_slicing)]

use super::cond::Cond;
use super::window::{check_zone, window_days};
use crate::ir::*;
use crate::sema::body::{Fields, Owner};
use crate::sema::checker::Checker;
use crate::sema::error::SemaError;
use crate::sema::lower::{list_of, member_of, str_of, u32_of};
use crate::sema::resolve::{Def, ScopeRef, suggest};
use crate::sema::schema::{self, BlockSchema};
use crate::sema::types::{EnumTy, Ty, Val};
use crate::source::Span;
use crate::syntax::ast::{BinaryOp, Body, CompareOp, Expr, ExprKind, Ident, RuleKind};
use std::collections::BTreeMap;

/// How an approver written as a public key begins (the text of a `.pub` file of
/// `berth keys generate`).
const PUBLIC_KEY_PREFIX: &str = "berth-ed25519-public:";

/// Checks the body of a policy rule (`quota team("x") { … }`): field paths start afresh,
/// and missing fields are reported against the rule's kind.
fn rule_body<'a>(
    ck: &mut Checker<'a>,
    body: &'a Body,
    schema: &'static BlockSchema,
    sc: ScopeRef,
    anchor: Span,
) -> Fields<'a> {
    ck.path.clear();
    ck.check_body(body, schema, sc, Owner::Block(schema.name), anchor)
}

/// Lowers every `policy` item, rules in source order, into `ir.policy`.
pub fn lower_policies<'a>(ck: &mut Checker<'a>, ir: &mut Ir, spans: &mut SpanTable) {
    // Windows first: a `limit` may name a window written after it.
    let mut windows: BTreeMap<String, (u32, Span)> = BTreeMap::new();
    for p in 0..ck.names.policies.len() {
        let def = &ck.names.policies[p];
        let (pname, policy) = (def.name.name.clone(), def.policy);
        for rule in &policy.rules {
            let RuleKind::Window {
                name,
                days,
                start,
                end,
                zone,
            } = &rule.kind
            else {
                continue;
            };
            let days = window_days(ck, days);
            let zone_name = check_zone(ck, &zone.value, zone.span);
            if start.value.minutes >= 24 * 60 {
                ck.error(SemaError::InvalidClockRange {
                    span: start.span,
                    reason: "a window cannot start at 24:00",
                });
            } else if start.value == end.value {
                ck.error(SemaError::InvalidClockRange {
                    span: start.span.to(end.span),
                    reason: "the range is empty: it starts where it ends",
                });
            }
            if let Some((_, first)) = windows.get(&name.name) {
                ck.error(SemaError::DuplicateDefinition {
                    name: name.name.clone(),
                    first: *first,
                    second: name.span,
                });
                continue;
            }
            windows.insert(
                name.name.clone(),
                (ir.policy.windows.len() as u32, name.span),
            );
            ir.policy.windows.push(Window {
                policy: pname.clone(),
                name: name.name.clone(),
                days,
                start: start.value.minutes,
                end: end.value.minutes % (24 * 60),
                zone: zone_name.unwrap_or_else(|| zone.value.clone()),
            });
            spans.windows.push(rule.span);
        }
    }

    let mut entitled: Vec<(Identity, Span)> = Vec::new();
    let mut quotas: Vec<(String, Span)> = Vec::new();
    for p in 0..ck.names.policies.len() {
        let def = &ck.names.policies[p];
        let (pname, policy, sc) = (def.name.name.clone(), def.policy, def.scope);
        for rule in &policy.rules {
            match &rule.kind {
                RuleKind::Deny { reason, condition } => {
                    let mut cond = Cond {
                        ck,
                        sc,
                        params: Vec::new(),
                    };
                    let Some(x) = cond.boolean(condition) else {
                        continue;
                    };
                    ir.policy.denies.push(DenyRule {
                        policy: pname.clone(),
                        reason: reason.value.clone(),
                        condition: x,
                    });
                    spans.denies.push(rule.span);
                }
                RuleKind::Entitle { subject, body } => {
                    let identity = match ck.check(subject, &Ty::Identity, sc) {
                        Some(Val::Identity(kind, name)) => Some(Identity { kind, name }),
                        _ => None,
                    };
                    let f = rule_body(ck, body, &schema::ENTITLE, sc, subject.span);
                    let Some(identity) = identity else { continue };
                    if let Some((_, first)) = entitled.iter().find(|(i, _)| *i == identity) {
                        ck.error(SemaError::DuplicateRule {
                            what: "entitlement",
                            subject: format!("`{identity}`"),
                            first: *first,
                            second: subject.span,
                        });
                        continue;
                    }
                    entitled.push((identity.clone(), subject.span));
                    let accelerators = f.has("accelerators").then(|| {
                        list_of(f.get("accelerators"))
                            .iter()
                            .filter_map(|(v, _)| match v {
                                Val::Item(Def::Const(c), _) => {
                                    ck.canonical_const(*c).map(AcceleratorId)
                                }
                                _ => None,
                            })
                            .collect()
                    });
                    let environments = f.has("environments").then(|| {
                        list_of(f.get("environments"))
                            .iter()
                            .filter_map(|(v, _)| member_of(Some(v)).and_then(EnvClass::from_name))
                            .collect()
                    });
                    let until = f.get("until").and_then(|v| {
                        let text = str_of(Some(v))?;
                        match text.parse::<jiff::Timestamp>() {
                            Ok(at) => Some(at.to_string()),
                            Err(_) => {
                                ck.error(SemaError::InvalidInstant {
                                    text,
                                    span: f.span("until"),
                                });
                                None
                            }
                        }
                    });
                    ir.policy.entitlements.push(Entitlement {
                        policy: pname.clone(),
                        identity,
                        max_gpu: u32_of(f.get("gpu")),
                        accelerators,
                        environments,
                        until,
                    });
                    spans.entitlements.push(rule.span);
                }
                RuleKind::Quota { subject, body } => {
                    let team = match ck.check(subject, &Ty::Team, sc) {
                        Some(Val::Team(t)) => Some(t),
                        _ => None,
                    };
                    let f = rule_body(ck, body, &schema::QUOTA, sc, subject.span);
                    let Some(team) = team else { continue };
                    if let Some((_, first)) = quotas.iter().find(|(t, _)| *t == team) {
                        ck.error(SemaError::DuplicateRule {
                            what: "quota",
                            subject: format!("team `{team}`"),
                            first: *first,
                            second: subject.span,
                        });
                        continue;
                    }
                    quotas.push((team.clone(), subject.span));
                    ir.policy.quotas.push(Quota {
                        policy: pname.clone(),
                        team,
                        max_gpu: u32_of(f.get("gpu")).unwrap_or(0),
                    });
                    spans.quotas.push(rule.span);
                }
                RuleKind::Window { .. } | RuleKind::Error => {}
                RuleKind::Limit {
                    selector,
                    value,
                    window,
                    body,
                } => {
                    let sel = lower_selector(ck, selector, value, sc);
                    let win = match windows.get(&window.name) {
                        Some((id, _)) => Some(WindowId(*id)),
                        None => {
                            let names: Vec<&str> = windows.keys().map(String::as_str).collect();
                            ck.error(SemaError::UnknownName {
                                name: window.name.clone(),
                                span: window.span,
                                expected: "a window".into(),
                                suggestion: suggest(&window.name, names.into_iter()),
                                in_module: None,
                                suggestion_module: None,
                            });
                            None
                        }
                    };
                    let f = rule_body(ck, body, &schema::LIMIT, sc, selector.span);
                    let (Some(selector), Some(window)) = (sel, win) else {
                        continue;
                    };
                    ir.policy.limits.push(Limit {
                        policy: pname.clone(),
                        selector,
                        window,
                        max_gpu: u32_of(f.get("gpu")).unwrap_or(0),
                    });
                    spans.limits.push(rule.span);
                }
                RuleKind::Approval { condition, body } => {
                    let above = threshold(
                        ck,
                        condition,
                        "cost_per_day",
                        &Ty::Money,
                        "approval",
                        "approval when cost_per_day > 500",
                        sc,
                    );
                    let f = rule_body(ck, body, &schema::APPROVAL, sc, condition.span);
                    // A key written in the policy is checked here; a name is looked up in the
                    // trust file by the runtime.
                    for (v, span) in list_of(f.get("approvers")) {
                        if let Some(text) = str_of(Some(v))
                            && let Some(hex) = text.strip_prefix(PUBLIC_KEY_PREFIX)
                            && !(hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
                        {
                            ck.error(SemaError::InvalidPublicKey { span: *span });
                        }
                    }
                    let approvers: Vec<String> = list_of(f.get("approvers"))
                        .iter()
                        .filter_map(|(v, _)| str_of(Some(v)))
                        .collect();
                    let trust = str_of(f.get("trust"));
                    let Some(above) = above else { continue };
                    ir.policy.approvals.push(Approval {
                        policy: pname.clone(),
                        cost_per_day_above: Money(i64::try_from(above).unwrap_or(i64::MAX)),
                        approvers,
                        trust,
                    });
                    spans.approvals.push(rule.span);
                }
                RuleKind::Reclaim {
                    selector,
                    value,
                    condition,
                } => {
                    let sel = lower_selector(ck, selector, value, sc);
                    let idle = threshold(
                        ck,
                        condition,
                        "gpu_idle",
                        &Ty::Duration,
                        "reclaim",
                        "reclaim kind notebook when gpu_idle > 30m",
                        sc,
                    );
                    let (Some(selector), Some(idle)) = (sel, idle) else {
                        continue;
                    };
                    ir.policy.reclaims.push(Reclaim {
                        policy: pname.clone(),
                        selector,
                        idle_after: u64::try_from(idle).unwrap_or(0),
                    });
                    spans.reclaims.push(rule.span);
                }
            }
        }
    }
}

/// `NAME > value`: the only condition form of `approval` and `reclaim`.
fn threshold<'a>(
    ck: &mut Checker<'a>,
    condition: &'a Expr,
    name: &str,
    ty: &Ty,
    rule: &'static str,
    form: &'static str,
    sc: ScopeRef,
) -> Option<i128> {
    let ok_shape = match &condition.kind {
        ExprKind::Binary {
            op: BinaryOp::Compare(CompareOp::Gt),
            lhs,
            rhs,
        } => match &lhs.kind {
            ExprKind::Name(id) if id.name == name => Some(rhs),
            _ => None,
        },
        _ => None,
    };
    let Some(rhs) = ok_shape else {
        if !matches!(condition.kind, ExprKind::Error) {
            ck.error(SemaError::InvalidRuleCondition {
                rule,
                span: condition.span,
                form,
            });
        }
        return None;
    };
    match ck.check(rhs, ty, sc)? {
        Val::Qty(_, x) => Some(x),
        _ => None,
    }
}

fn lower_selector<'a>(
    ck: &mut Checker<'a>,
    selector: &Ident,
    value: &'a Expr,
    sc: ScopeRef,
) -> Option<Selector> {
    match selector.name.as_str() {
        "class" => match ck.check(value, &Ty::Enum(EnumTy::Class), sc)? {
            Val::Enum(_, i) => {
                WorkloadClass::from_name(EnumTy::Class.member(i)).map(Selector::Class)
            }
            _ => None,
        },
        "kind" => match ck.check(value, &Ty::Enum(EnumTy::Kind), sc)? {
            Val::Enum(_, i) => WorkloadKind::from_name(EnumTy::Kind.member(i)).map(Selector::Kind),
            _ => None,
        },
        "team" => match &value.kind {
            // `limit team("research") …` and `limit team "research" …` both read well.
            ExprKind::Call { .. } => match ck.check(value, &Ty::Team, sc)? {
                Val::Team(t) => Some(Selector::Team(t)),
                _ => None,
            },
            _ => match ck.check(value, &Ty::Str, sc)? {
                Val::Str(t) => Some(Selector::Team(t)),
                _ => None,
            },
        },
        other => {
            ck.error(SemaError::UnknownSelector {
                name: other.to_string(),
                span: selector.span,
                suggestion: suggest(other, ["class", "kind", "team"].into_iter()),
            });
            None
        }
    }
}
