//! The stages that depend on neither load nor time, run alone: eligibility, deny rules and
//! entitlements. The fleet analysis (`crate::analysis`) reads them to say what a spec allows
//! anywhere, ever. No assignment runs, so only eligibility and policy verdicts exist here,
//! rendered by the same code as the plan's rejections.

use super::Solved;
use super::assign::Assignment;
use super::eligibility::EligibilityMatrix;
use super::index::{EstateIndex, Partition};
use super::policy::PolicyContext;
use super::verdict::{Described, Reason, Verdict};
use crate::ir::{AcceleratorId, Ir};
use crate::plan::RejectionStage;
use crate::source::SourceMap;

/// Eligibility and policy of every (workload, target) pair, with and without the candidate
/// lists.
pub struct Screened<'a> {
    solved: Solved<'a>,
    /// The cells as if no placement listed candidates; `None` when none does (the same
    /// cells as `solved.matrix`).
    beyond: Option<EligibilityMatrix>,
}

/// One pool as caps count it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolUnits {
    pub accelerator: AcceleratorId,
    /// Devices, or MIG instances of a partitioned pool (one instance counts as one GPU
    /// against caps).
    pub units: u32,
    pub partitioned: bool,
}

impl<'a> Screened<'a> {
    pub fn new(ir: &'a Ir, sources: &'a SourceMap) -> Self {
        let index = EstateIndex::build(ir);
        let mut matrix = EligibilityMatrix::compute(ir, &index);
        let policy = PolicyContext::without_caps(ir);
        policy.apply(ir, &index, &mut matrix);
        let beyond = ir
            .workloads
            .iter()
            .any(|w| w.placement.candidates.is_some())
            .then(|| {
                let mut open = ir.clone();
                for w in &mut open.workloads {
                    w.placement.candidates = None;
                }
                let mut cells = EligibilityMatrix::compute(&open, &index);
                policy.apply(&open, &index, &mut cells);
                cells
            });
        Screened {
            beyond,
            solved: Solved {
                ir,
                sources,
                index,
                matrix,
                policy,
                assignment: Assignment::default(),
            },
        }
    }

    pub fn ir(&self) -> &'a Ir {
        self.solved.ir
    }

    /// Why target `t` can never hold workload `w` (the first failing eligibility check, else
    /// the first policy rule), or `None` when it may.
    pub fn reason(&self, w: usize, t: usize) -> Option<Reason> {
        self.solved.matrix.get(w, t).reason()
    }

    /// Whether some target may hold `w`.
    pub fn placeable(&self, w: usize) -> bool {
        self.solved.matrix.row(w).iter().any(|c| c.is_ok())
    }

    /// The verdict of pair (`w`, `t`), with its detail.
    pub fn verdict(&self, w: usize, t: usize) -> Verdict {
        self.solved.verdict(w, t)
    }

    /// Why target `t` can never hold workload `w` as if `w`'s placement listed every target
    /// (eligibility first, then policy), or `None` when it may.
    pub fn reason_beyond_candidates(&self, w: usize, t: usize) -> Option<Reason> {
        self.beyond
            .as_ref()
            .unwrap_or(&self.solved.matrix)
            .get(w, t)
            .reason()
    }

    /// [`Self::reason_beyond_candidates`] with its detail (for the few refusals a warning
    /// names: a deny rule is evaluated directly here).
    pub fn verdict_beyond_candidates(&self, w: usize, t: usize) -> Verdict {
        let s = &self.solved;
        match self.reason_beyond_candidates(w, t).map(Reason::stage) {
            None => Verdict::OK,
            Some(RejectionStage::Eligibility) => {
                s.matrix.explain_beyond_candidates(s.ir, &s.index, w, t)
            }
            Some(_) => s.policy.explain(s.ir, &s.index, s.matrix.fits(), w, t),
        }
    }

    /// Whether the entitlements of `w`'s identity allow eligible pair (`w`, `t`), deny rules
    /// aside.
    pub fn entitlement_verdict(&self, w: usize, t: usize) -> Verdict {
        let s = &self.solved;
        s.policy
            .entitlement_verdict(s.ir, &s.index, s.matrix.fits(), w, t)
    }

    /// Verdict `v` of pair (`w`, `t`) in words, with the spans of both sides. `None` for a
    /// verdict no screen gives (a cap, or an assignment-stage reason).
    pub fn described(&self, w: usize, t: usize, v: Verdict) -> Option<Described> {
        let reason = v.reason()?;
        let screened = match reason.stage() {
            RejectionStage::Eligibility => true,
            RejectionStage::Policy => matches!(reason, Reason::Denied | Reason::NotEntitled),
            RejectionStage::Assignment => false,
        };
        screened.then(|| self.solved.described(w, t, v))
    }

    /// Target `t`'s pools as caps count them.
    pub fn pools(&self, t: usize) -> impl Iterator<Item = PoolUnits> + '_ {
        let index = &self.solved.index;
        index.target_pools(t).iter().filter_map(|slot| {
            let kind = index.kinds.get(slot.kind as usize)?;
            Some(PoolUnits {
                accelerator: kind.accelerator,
                units: slot.units,
                partitioned: kind.partition != Partition::Whole,
            })
        })
    }
}
