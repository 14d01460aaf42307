//! Window days (`weekdays`, `weekends`, `daily`, a list) and time zones checked against the
//! bundled tzdb.

use crate::ir::*;
use crate::sema::checker::Checker;
use crate::sema::error::SemaError;
use crate::sema::resolve::suggest;
use crate::sema::types::EnumTy;
use crate::source::Span;
use crate::syntax::ast::{Expr, ExprKind};

/// `weekdays`, `weekends`, `daily` or a list of days, Monday first, without repeats.
pub(super) fn window_days(ck: &mut Checker<'_>, days: &Expr) -> Vec<Weekday> {
    use Weekday::*;
    match &days.kind {
        ExprKind::Name(id) => match id.name.as_str() {
            "weekdays" => vec![Mon, Tue, Wed, Thu, Fri],
            "weekends" => vec![Sat, Sun],
            "daily" => Weekday::ALL.to_vec(),
            other => {
                let mut candidates = vec!["weekdays", "weekends", "daily"];
                candidates.extend(EnumTy::Weekday.members());
                ck.error(SemaError::InvalidDays {
                    span: days.span,
                    suggestion: suggest(other, candidates.into_iter()),
                });
                Vec::new()
            }
        },
        ExprKind::List(items) => {
            let mut out: Vec<Weekday> = Vec::new();
            let mut seen: Vec<(Weekday, Span)> = Vec::new();
            for item in items {
                let ExprKind::Name(id) = &item.kind else {
                    ck.error(SemaError::InvalidDays {
                        span: item.span,
                        suggestion: None,
                    });
                    continue;
                };
                match Weekday::from_name(&id.name) {
                    Some(d) => {
                        if let Some((_, first)) = seen.iter().find(|(x, _)| *x == d) {
                            ck.error(SemaError::DuplicateEntry {
                                what: "day".into(),
                                name: id.name.clone(),
                                first: *first,
                                second: item.span,
                            });
                            continue;
                        }
                        seen.push((d, item.span));
                        out.push(d);
                    }
                    None => ck.error(SemaError::InvalidDays {
                        span: item.span,
                        suggestion: suggest(&id.name, EnumTy::Weekday.members().iter().copied()),
                    }),
                }
            }
            out.sort();
            out
        }
        ExprKind::Error => Vec::new(),
        _ => {
            ck.error(SemaError::InvalidDays {
                span: days.span,
                suggestion: None,
            });
            Vec::new()
        }
    }
}

/// The canonical IANA name of `zone`, or a diagnostic.
pub(super) fn check_zone(ck: &mut Checker<'_>, zone: &str, span: Span) -> Option<String> {
    match jiff::tz::db().get(zone) {
        Ok(tz) => Some(tz.iana_name().unwrap_or(zone).to_string()),
        Err(_) => {
            let names: Vec<String> = jiff::tz::db().available().map(|n| n.to_string()).collect();
            ck.error(SemaError::UnknownTimeZone {
                zone: zone.into(),
                span,
                suggestion: suggest(zone, names.iter().map(String::as_str)),
            });
            None
        }
    }
}
