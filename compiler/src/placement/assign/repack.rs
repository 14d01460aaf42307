//! Repacking the classes left short: on an over-subscribed estate, place as many replicas of
//! each class as fit, which means the smaller replicas first.
//!
//! The greedy places workloads most constrained first, which finds a full placement where
//! one exists; where none exists, the class order decides who is left out, and *within* the
//! first class left short the count of replicas placed is what the plan answers for
//! ("`n` of `m` replicas placed"; production before staging before development before
//! experiment). Filling room with one 4-GPU replica where four 1-GPU replicas of the same
//! class were waiting places fewer, and neither the repair (which makes room for one
//! workload at a time) nor the trades (one holder at a time) undo a whole class's order.
//!
//! The repack takes off every replica of the first class left short and of every class
//! below it, places them again class by class, each class's workloads smallest first (the
//! classic order for packing the most items; two measures of size, [`Size`], each tried from
//! the same start), among equals in the greedy's order, and runs the repair and trades again.
//! The better attempt is kept only when the replicas placed per class improve
//! lexicographically (the first class that changes gains); otherwise the assignment is
//! restored exactly. The classes above the first one short keep every replica (the repair may
//! move them, as always), so no class places fewer than before. Deterministic: every order
//! ends in the greedy's order, which ends in workload indices.
//!
//! Where to repack is not obvious: right after the first repair, or after the cost passes
//! (whose later repairs start from other states). `Assigner::run` does both ways on an
//! estate left short and keeps the better outcome (`Assigner::outcome`).

// INVARIANT: every index is a dense id of the IR being placed or a position in a table the
// solver sized from those counts (see `assign.rs`); nothing from user text indexes here.
#![allow(clippy::indexing_slicing)]

use super::Assigner;
use super::chain::improves;
use super::class_slot;
use crate::placement::eligibility::gpu_units;

/// Estates of more workloads than this are not repacked (nor planned two ways, see
/// `Assigner::run`): on the over-subscribed 10,000-workload estate of the placement
/// benchmark, both cost three seconds and placed no more (docs/performance.md).
pub(super) const REPACK_MAX_WORKLOADS: usize = 2_000;

/// One repacking attempt's result: replicas placed per class, the assignment, and the
/// move and chain budgets its repair left.
struct Attempt {
    tally: [i64; 4],
    slots: Vec<Vec<(u32, u32)>>,
    budgets: (usize, usize),
}

/// The orders a class's workloads are placed in again, each tried from the same start.
#[derive(Clone, Copy, Debug)]
enum Size {
    /// GPU units per replica.
    Units,
    /// GPUs, CPU and memory per replica, each as a share of what is free of it, weighed by
    /// how over-subscribed that resource is (the demand of the replicas repacked over what
    /// is free): the binding resource counts most.
    Pressure,
}

impl Assigner<'_> {
    /// Repacks the first class left short and every class below it (see the module
    /// documentation); true if that placed more replicas per class, lexicographically.
    pub(super) fn repack(&mut self, order: &[u32]) -> bool {
        if self.ir.workloads.len() > REPACK_MAX_WORKLOADS {
            return false;
        }
        let class_of = |a: &Self, w: u32| class_slot(a.ir.workloads[w as usize].class);
        let Some(first) = order
            .iter()
            .filter(|&&w| self.is_short(w as usize))
            .map(|&w| class_of(self, w))
            .min()
        else {
            return false;
        };
        let before = self.assignment_tally();
        let saved = self.out.slots.clone();
        // In the greedy's order; the stable sorts keep it among equals.
        let again: Vec<u32> = order
            .iter()
            .copied()
            .filter(|&w| class_of(self, w) >= first)
            .collect();
        // Every attempt starts with the same budgets for its repair; the one kept leaves the
        // later phases what it left (the work stays bounded: a few times one repair's).
        let budgets = (self.move_budget, self.chain_budget);
        let mut best: Option<Attempt> = None;
        for size in [Size::Units, Size::Pressure] {
            (self.move_budget, self.chain_budget) = budgets;
            self.take_off_all(&again);
            let sizes = self.sizes(&again, size);
            let mut by_size: Vec<(u32, f64)> = again.iter().copied().zip(sizes).collect();
            by_size.sort_by(|a, b| {
                class_of(self, a.0)
                    .cmp(&class_of(self, b.0))
                    .then(a.1.total_cmp(&b.1))
            });
            for &(w, _) in &by_size {
                self.greedy(w as usize);
            }
            self.repair_and_trade(order);
            let now = self.assignment_tally();
            let better = match &best {
                None => true,
                Some(b) => improves(&std::array::from_fn(|i| now[i] - b.tally[i])),
            };
            if better {
                best = Some(Attempt {
                    tally: now,
                    slots: self.out.slots.clone(),
                    budgets: (self.move_budget, self.chain_budget),
                });
            }
        }
        match best {
            Some(b) if improves(&std::array::from_fn(|i| b.tally[i] - before[i])) => {
                self.adopt_slots(b.slots);
                (self.move_budget, self.chain_budget) = b.budgets;
                true
            }
            _ => {
                self.adopt_slots(saved);
                (self.move_budget, self.chain_budget) = budgets;
                false
            }
        }
    }

    /// Takes every replica of `ws` off the estate.
    fn take_off_all(&mut self, ws: &[u32]) {
        for &w in ws {
            let w = w as usize;
            for (oi, k) in self.out.slots[w].clone() {
                for _ in 0..k {
                    self.remove(w, oi as usize);
                }
            }
        }
    }

    /// Each workload's size per replica, by `size`, with `ws` off the estate.
    fn sizes(&self, ws: &[u32], size: Size) -> Vec<f64> {
        let demand = |w: u32| {
            let wl = &self.ir.workloads[w as usize];
            [
                f64::from(gpu_units(wl)),
                wl.resources.cpu_millis as f64,
                wl.resources.memory as f64,
            ]
        };
        match size {
            Size::Units => ws.iter().map(|&w| demand(w)[0]).collect(),
            Size::Pressure => {
                let l = &self.out.ledger;
                let free = [
                    l.pool_free.iter().map(|&u| f64::from(u)).sum::<f64>(),
                    l.cpu_free.iter().map(|&c| c as f64).sum::<f64>(),
                    l.memory_free.iter().map(|&m| m as f64).sum::<f64>(),
                ];
                let mut wanted = [0.0f64; 3];
                for &w in ws {
                    let replicas = f64::from(self.ir.workloads[w as usize].replicas);
                    for (r, d) in demand(w).iter().enumerate() {
                        wanted[r] += replicas * d;
                    }
                }
                let weight: [f64; 3] = std::array::from_fn(|r| {
                    if free[r] > 0.0 {
                        wanted[r] / free[r]
                    } else {
                        0.0
                    }
                });
                ws.iter()
                    .map(|&w| {
                        let d = demand(w);
                        (0..3)
                            .filter(|&r| free[r] > 0.0)
                            .map(|r| d[r] / free[r] * weight[r])
                            .sum()
                    })
                    .collect()
            }
        }
    }
}
