//! What a plan's rejection list reads about an eligibility row, whatever the workload
//! (issue 22: classes, not pairs): computed once per distinct row and shared by every
//! workload of it, instead of walking every target of every workload.

// INVARIANT: every index is a dense id of the IR being placed (target < `ir.targets.len()`)
// or a row id of the matrix the summaries were built from; nothing from user text indexes here.
#![allow(clippy::indexing_slicing)]

use super::eligibility::EligibilityMatrix;
use super::verdict::{Cell, Reason};
use rayon::prelude::*;

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

#[cfg(test)]
mod tests {
    use super::super::infeasible::UnusedContext;
    use super::super::{REJECTIONS_LISTED_PER_REASON as LIMIT, solve};
    use crate::source::SourceMap;
    use crate::testing::dense;

    /// A workload's rejections from its row's summary are exactly those of the walk over
    /// every target (counts and listed targets with their verdicts), on a dense estate over
    /// the full-listing limit with pools sized for 80% use (so blocked targets too).
    #[test]
    fn summarised_rejections_are_the_walked_ones() {
        for (workloads, targets) in [(300, 150), (120, 400)] {
            let mut shape = dense::DenseShape::new(workloads, targets);
            shape.requirement_sets = 7;
            let ir = dense::dense_ir(shape);
            let sources = SourceMap::new();
            let at: jiff::Timestamp = dense::AT.parse().unwrap_or_default();
            let s = solve(&ir, &sources, at);
            let summaries = super::summaries(&s.matrix, LIMIT);
            assert!(summaries.len() < workloads, "rows are shared");
            let first_options = super::super::first_options(&s.assignment.options);
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
                let fast =
                    s.summarised(w, &used, &first_options[w], not_needed_from, summary, LIMIT);
                let walked = s.walked(w, &used, &first_options[w], &context, LIMIT);
                assert_eq!(fast, walked, "workload {w}");
                summarised += 1;
            }
            assert!(summarised > 0);
        }
    }
}
