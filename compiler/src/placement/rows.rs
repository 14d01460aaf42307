//! What a plan's rejection list reads about an eligibility row, whatever the workload
//! (issue 22: classes, not pairs): computed once per distinct row and shared by every
//! workload of it, instead of walking every target of every workload.

// INVARIANT: every index is a dense id of the IR being placed (workload < `ir.workloads.len()`,
// target < `ir.targets.len()`), a row id of the matrix the summaries were built from or a class
// id this module numbered; nothing from user text indexes here.
#![allow(clippy::indexing_slicing)]

use super::Solved;
use super::eligibility::{EligibilityMatrix, gpu_units};
use super::infeasible::UnusedContext;
use super::verdict::{Cell, Reason, Verdict};
use rayon::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;

/// One row's refused targets by reason, and its permitted targets.
#[derive(Clone, Debug, Default)]
pub(crate) struct RowSummary {
    /// Per reason code, how many targets the row refuses for it.
    pub counts: [u32; Reason::COUNT],
    /// The first `limit` refused targets of each reason, as `(target, cell)` in target order.
    pub first: Vec<(u32, Cell)>,
    /// The targets the row permits, in order.
    pub permitted: Vec<u32>,
}

/// The summary of each row of `matrix`, by row id, listing `limit` targets per reason.
pub(crate) fn summaries(matrix: &EligibilityMatrix, limit: usize) -> Vec<RowSummary> {
    (0..matrix.n_rows() as u32)
        .into_par_iter()
        .map(|r| {
            let mut s = RowSummary::default();
            for (t, &cell) in matrix.row_by_id(r).iter().enumerate() {
                let Some(reason) = cell.reason() else {
                    s.permitted.push(t as u32);
                    continue;
                };
                let n = &mut s.counts[reason as usize];
                *n += 1;
                if *n as usize <= limit {
                    s.first.push((t as u32, cell));
                }
            }
            s
        })
        .collect()
}

/// What workloads share when only the first rejections of each reason are listed: the
/// summary of each eligibility row (by row id) and the blocked targets of each class.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    pub summaries: Vec<RowSummary>,
    pub blocked: SharedBlocked,
}

/// For workloads whose unused-target verdicts read nothing of their own placement (no
/// spread rule, no isolation partner: [`Assignment::blocks_by_own_placement`]), what keeps
/// them off the targets their options rank better than the worst used depends only on the
/// option list, the demand per replica and the final ledgers. Such workloads form a class;
/// the blocked targets of a class are found once, over the deepest prefix any of its
/// workloads needs, instead of once per workload (issue 22).
///
/// [`Assignment::blocks_by_own_placement`]: super::assign::Assignment::blocks_by_own_placement
#[derive(Debug, Default)]
pub(crate) struct SharedBlocked {
    /// Per workload, its class, when it has one.
    class_of: Vec<Option<u32>>,
    /// Per class, every target whose first option ranks before the class's deepest
    /// `not_needed_from` and is blocked.
    blocked: Vec<Blocked>,
}

impl SharedBlocked {
    /// The classes of the fully placed workloads of `s` (by option list, GPUs, CPU and memory
    /// per replica) and their blocked targets; `first_options` is `first_options` of the
    /// plan (per workload, `(target, first option index)` sorted by target).
    pub(crate) fn compute(s: &Solved<'_>, first_options: &[Arc<[(u32, u32)]>]) -> Self {
        let (ir, a) = (s.ir, &s.assignment);
        let mut class_of = vec![None; ir.workloads.len()];
        let mut classes: HashMap<(usize, u32, u64, u64), u32> = HashMap::new();
        // Per class, a workload of it and the deepest `not_needed_from` of its workloads.
        let mut deepest: Vec<(usize, usize)> = Vec::new();
        for (w, workload) in ir.workloads.iter().enumerate() {
            if a.blocks_by_own_placement(ir, w) {
                continue;
            }
            let UnusedContext::Full { not_needed_from } = s.unused_context(w) else {
                continue;
            };
            let r = &workload.resources;
            let key = (
                a.options[w].as_ptr() as usize,
                gpu_units(workload),
                r.cpu_millis,
                r.memory,
            );
            let next = deepest.len() as u32;
            let class = *classes.entry(key).or_insert(next);
            if class == next {
                deepest.push((w, not_needed_from));
            }
            let d = &mut deepest[class as usize].1;
            *d = (*d).max(not_needed_from);
            class_of[w] = Some(class);
        }
        let blocked = deepest
            .par_iter()
            .map(|&(w, not_needed_from)| Blocked::of(s, w, &first_options[w], not_needed_from, &[]))
            .collect();
        SharedBlocked { class_of, blocked }
    }

    /// The blocked targets of `w`'s class, when it has one.
    pub(crate) fn of(&self, w: usize) -> Option<&Blocked> {
        let class = self.class_of.get(w).copied().flatten()?;
        self.blocked.get(class as usize)
    }
}

/// Targets something keeps a workload (or a class of them) off though its options rank them
/// better than the worst it uses, with the first option index of each: what one workload reads
/// of them (those before its own `not_needed_from`, less the targets it uses) is counted by
/// reason in logarithmic time and listed without walking the rest.
#[derive(Debug, Default)]
pub(crate) struct Blocked {
    /// `(target, first option index, verdict)` in target order.
    by_target: Vec<(u32, u32, Verdict)>,
    /// Option indices in ascending order, each with its reason's position in `reasons`.
    by_rank: Vec<(u32, u8)>,
    /// The distinct reasons of the entries (a few: capacity, CPU, memory, spread, isolation).
    reasons: Vec<Reason>,
    /// `prefix[j * reasons.len() + x]`: how many of the first `j` entries of `by_rank` have
    /// reason `reasons[x]`.
    prefix: Vec<u32>,
}

impl Blocked {
    /// The blocked targets of `w` whose first option (from `first_option`, sorted by target)
    /// comes before `not_needed_from`, `used` (sorted) left out.
    pub(crate) fn of(
        s: &Solved<'_>,
        w: usize,
        first_option: &[(u32, u32)],
        not_needed_from: usize,
        used: &[u32],
    ) -> Self {
        let context = UnusedContext::Full { not_needed_from };
        let by_target: Vec<(u32, u32, Verdict)> = first_option
            .iter()
            .filter(|&&(t, i)| (i as usize) < not_needed_from && used.binary_search(&t).is_err())
            .filter_map(|&(t, i)| {
                let v = s.unused_verdict_in(&context, w, Some(i as usize));
                v.reason()
                    .filter(|&r| r != Reason::NotNeeded)
                    .map(|_| (t, i, v))
            })
            .collect();
        let mut reasons: Vec<Reason> = by_target
            .iter()
            .filter_map(|(_, _, v)| v.reason())
            .collect();
        reasons.sort_unstable();
        reasons.dedup();
        let mut by_rank: Vec<(u32, u8)> = by_target
            .iter()
            .map(|&(_, i, v)| {
                let r = v.reason().unwrap_or(Reason::NotNeeded);
                (i, reasons.partition_point(|&x| x < r) as u8)
            })
            .collect();
        by_rank.sort_unstable();
        let k = reasons.len();
        let mut prefix = vec![0u32; (by_rank.len() + 1) * k];
        for (j, &(_, x)) in by_rank.iter().enumerate() {
            let (done, next) = prefix.split_at_mut((j + 1) * k);
            next[..k].copy_from_slice(&done[j * k..]);
            next[x as usize] += 1;
        }
        Blocked {
            by_target,
            by_rank,
            reasons,
            prefix,
        }
    }

    /// Whether target `t` is blocked for a workload whose options from `not_needed_from` on
    /// rank no better than its worst used.
    pub(crate) fn holds(&self, t: u32, not_needed_from: usize) -> bool {
        self.by_target
            .binary_search_by_key(&t, |&(x, _, _)| x)
            .is_ok_and(|j| (self.by_target[j].1 as usize) < not_needed_from)
    }

    /// For a workload with `not_needed_from` that uses `used` (sorted): its blocked targets'
    /// count per reason (added to `counts`), their total, and the first `limit` of each reason
    /// in target order.
    pub(crate) fn read(
        &self,
        not_needed_from: usize,
        used: &[u32],
        limit: usize,
        counts: &mut [u32; Reason::COUNT],
    ) -> (usize, Vec<(usize, Verdict)>) {
        let k = self.reasons.len();
        let before = self
            .by_rank
            .partition_point(|&(i, _)| (i as usize) < not_needed_from);
        let mut mine = [0u32; Reason::COUNT];
        for (x, &r) in self.reasons.iter().enumerate() {
            mine[r as usize] = self.prefix[before * k + x];
        }
        // A used target is never blocked for its own workload's count.
        for &t in used {
            if let Ok(j) = self.by_target.binary_search_by_key(&t, |&(x, _, _)| x) {
                let (_, i, v) = self.by_target[j];
                if (i as usize) < not_needed_from {
                    mine[v.reason().unwrap_or(Reason::NotNeeded) as usize] -= 1;
                }
            }
        }
        let total: u32 = mine.iter().sum();
        let wanted: u32 = mine.iter().map(|&n| n.min(limit as u32)).sum();
        let mut taken = [0u32; Reason::COUNT];
        let mut listed = Vec::with_capacity(wanted as usize);
        for &(t, i, v) in &self.by_target {
            if listed.len() == wanted as usize {
                break;
            }
            if (i as usize) >= not_needed_from || used.binary_search(&t).is_ok() {
                continue;
            }
            let r = v.reason().unwrap_or(Reason::NotNeeded) as usize;
            taken[r] += 1;
            if taken[r] as usize <= limit {
                listed.push((t as usize, v));
            }
        }
        for (n, m) in counts.iter_mut().zip(mine) {
            *n += m;
        }
        (total as usize, listed)
    }
}

#[cfg(test)]
mod tests {
    use super::super::infeasible::UnusedContext;
    use super::super::{REJECTIONS_LISTED_PER_REASON as LIMIT, solve};
    use crate::source::SourceMap;
    use crate::testing::dense;

    /// A workload's rejections from its row's summary are exactly those of the walk over
    /// every target (counts and listed targets with their verdicts), on a dense estate over
    /// the full-listing limit with pools sized for 80% use, and on one where pools fill (so
    /// targets ranked better than the worst used are blocked); and through the blocked
    /// targets of each workload's class (`SharedBlocked`) where it has one.
    #[test]
    fn summarised_rejections_are_the_walked_ones() {
        let (mut through_class, mut blocked_seen) = (0, 0);
        for (workloads, targets) in [(300, 150), (120, 400), (1000, 200)] {
            let mut shape = dense::DenseShape::new(workloads, targets);
            shape.requirement_sets = 7;
            let ir = dense::dense_ir(shape);
            let sources = SourceMap::new();
            let at: jiff::Timestamp = dense::AT.parse().unwrap_or_default();
            let s = solve(&ir, &sources, at);
            let summaries = super::summaries(&s.matrix, LIMIT);
            assert!(summaries.len() < workloads, "rows are shared");
            let first_options = super::super::first_options(&s.assignment.options);
            let blocked = super::SharedBlocked::compute(&s, &first_options);
            let mut summarised = 0;
            for w in 0..ir.workloads.len() {
                let a = &s.assignment;
                let mut used: Vec<u32> = a.slots[w]
                    .iter()
                    .map(|(i, _)| a.options[w][*i as usize].target)
                    .collect();
                used.sort_unstable();
                used.dedup();
                let context = s.unused_context(w);
                let UnusedContext::Full { not_needed_from } = context else {
                    continue;
                };
                let summary = &summaries[s.matrix.row_id(w) as usize];
                let args = (w, &used, &first_options[w], not_needed_from, summary, LIMIT);
                let fast = s.summarised(args.0, args.1, args.2, args.3, args.4, args.5, None);
                let walked = s.walked(w, &used, &first_options[w], &context, LIMIT);
                assert_eq!(fast, walked, "workload {w}");
                // Through its class's blocked targets too, where it has a class.
                if let Some(class) = blocked.of(w) {
                    let shared =
                        s.summarised(args.0, args.1, args.2, args.3, args.4, args.5, Some(class));
                    assert_eq!(shared, walked, "workload {w} through its class");
                    through_class += 1;
                    blocked_seen += class.by_target.len();
                }
                summarised += 1;
            }
            assert!(summarised > 0);
        }
        assert!(
            through_class > 0,
            "workloads share their class's blocked targets"
        );
        assert!(
            blocked_seen > 0,
            "classes have blocked targets ranked better"
        );
    }
}
