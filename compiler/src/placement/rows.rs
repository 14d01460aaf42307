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
    /// Per class, `(target, first option index, verdict)` of every target whose first option
    /// ranks before the class's deepest `not_needed_from` and is blocked, in target order.
    blocked: Vec<Vec<(u32, u32, Verdict)>>,
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
            .map(|&(w, not_needed_from)| {
                let context = UnusedContext::Full { not_needed_from };
                first_options[w]
                    .iter()
                    .filter(|&&(_, i)| (i as usize) < not_needed_from)
                    .filter_map(|&(t, i)| {
                        let v = s.unused_verdict_in(&context, w, Some(i as usize));
                        v.reason()
                            .is_some_and(|r| r != Reason::NotNeeded)
                            .then_some((t, i, v))
                    })
                    .collect()
            })
            .collect();
        SharedBlocked { class_of, blocked }
    }

    /// The blocked targets of `w`'s class, when it has one: `w`'s own are those whose first
    /// option index is below its `not_needed_from` and that it does not use.
    pub(crate) fn of(&self, w: usize) -> Option<&[(u32, u32, Verdict)]> {
        let class = self.class_of.get(w).copied().flatten()?;
        self.blocked.get(class as usize).map(Vec::as_slice)
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
                    blocked_seen += class.len();
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
