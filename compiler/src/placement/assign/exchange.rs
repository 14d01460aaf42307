//! The exchange pass: cost-improving exchanges of replicas between a cheap target with GPUs
//! to spare and the dearer targets around it, for the multi-resource packing single moves
//! do not reach.
//!
//! Where CPU or memory per target binds, the cheapest plan puts the replicas with the most
//! GPUs per CPU (and per GiB) on the cheap targets. A cheap target whose GPUs are not all
//! used, but whose CPU or memory is, gains from giving up one replica that holds much of
//! it: the room that replica leaves takes several replicas from dearer targets, and the
//! replica itself goes to the cheapest place left for it — often room one of them left.
//! Relocation ([`Assigner::improve_by_relocation`]) sees this from one moving workload at a
//! time and clears room holder by holder, in index order; the exchange sees it from the
//! target: for each replica it could give up (for none, and for pairs among the first few),
//! it fills the room with the replicas of other targets that save most, then places the ones
//! given up, and keeps the best of these whose total cost per day strictly drops.
//!
//! What an exchange never does: unplace a replica (every replica it moves is placed again,
//! so no class places fewer), move a replica to an option with a worse *guard* (its fallback
//! position, and its data latency where latency ranks first, [`Assigner::guard`]), or break
//! a constraint (every placement passes the greedy's `blocker`: GPUs, CPU, memory, spread,
//! isolation; caps count GPUs per workload, which no move changes). The settling pass runs
//! after it, so every rejection reason the plan gives stays true. Deterministic: targets by
//! price then index, candidates in a fixed order, ties to the first; its work is bounded by
//! a budget of options examined, never by time.

// INVARIANT: every index is a dense id of the IR being placed or a position in a table the
// solver sized from those counts (see `assign.rs`); nothing from user text indexes here.
#![allow(clippy::indexing_slicing)]

use super::{Assigner, Opt, Room};
use std::collections::HashMap;

/// Options the exchange pass may examine: this many per workload, plus a base.
const EXCHANGE_BUDGET_PER_WORKLOAD: usize = 100;
const EXCHANGE_BUDGET_BASE: usize = 400_000;
/// Passes over the targets while exchanges still lower the cost.
const EXCHANGE_PASSES: usize = 3;
/// Exchanges in a row on one target per pass.
const EXCHANGES_PER_TARGET: usize = 16;
/// Candidate replicas an exchange considers moving in, the best first.
const CANDIDATES: usize = 48;
/// Slots (workload, option) on a target among which pairs of replicas are given up together.
const PAIR_SLOTS: usize = 8;
/// Full options the replica given up may make room at (by moving their holders on).
const CLEARED_HOMES: usize = 4;

/// A replica that could move to the target being filled: workload, the option it is on, how
/// many of its replicas are there, and what one saves per day at best.
#[derive(Clone, Copy, Debug)]
struct Candidate {
    w: u32,
    from: u32,
    count: u32,
    saving: i64,
    /// Saving per share of the target's capacity it would use (the greedy's density).
    density: f64,
}

/// How the room is filled: most saved per replica first, or most saved per share of the
/// target's GPUs, CPU and memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Order {
    Saving,
    Density,
}

/// One exchange: the replica given up (none, or `(workload, option)` on the target) and the
/// order the room is filled in.
#[derive(Clone, Copy, Debug)]
struct Plan {
    evict: [Option<(u32, u32)>; 2],
    order: Order,
}

impl Assigner<'_> {
    /// Runs exchanges until none lowers the cost or the budget is spent; true if any moved.
    pub(super) fn exchange_all(&mut self) -> bool {
        let n = self.ir.workloads.len();
        let mut budget = EXCHANGE_BUDGET_PER_WORKLOAD * n + EXCHANGE_BUDGET_BASE;
        // Making room for a replica given up moves others; the repair may have spent the
        // move budget, so the pass (and the improvement after it) gets its own.
        self.move_budget = self.move_budget.max(super::move_budget(n));
        let mut on_target: HashMap<*const Opt, Vec<(u32, u32)>> = HashMap::new();
        let mut targets: Vec<u32> = (0..self.ir.targets.len() as u32).collect();
        targets.sort_by_key(|&t| (self.gpu_hour[t as usize], t));
        let mut any = false;
        for _ in 0..EXCHANGE_PASSES {
            let mut moved = false;
            for &t in &targets {
                for _ in 0..EXCHANGES_PER_TARGET {
                    if budget == 0 || !self.exchange_at(t, &mut budget, &mut on_target) {
                        break;
                    }
                    moved = true;
                }
            }
            any |= moved;
            if !moved || budget == 0 {
                break;
            }
        }
        any
    }

    /// Whether some pool of target `t` has GPUs free: only then can it take more GPUs.
    fn spare_gpus(&self, t: u32) -> bool {
        self.index
            .pool_range(t as usize)
            .any(|p| self.out.ledger.pool_free[p] > 0)
    }

    /// `w`'s options on target `t`, in rank order (a lookup per option list, built once).
    fn options_on(
        &self,
        w: usize,
        t: u32,
        budget: &mut usize,
        on_target: &mut HashMap<*const Opt, Vec<(u32, u32)>>,
    ) -> Vec<u32> {
        let opts = &self.out.options[w];
        let table = on_target.entry(opts.as_ptr()).or_insert_with(|| {
            *budget = budget.saturating_sub(opts.len());
            super::options_by_target(opts)
        });
        let start = table.partition_point(|&(x, _)| x < t);
        table[start..]
            .iter()
            .take_while(|&&(x, _)| x == t)
            .map(|&(_, i)| i)
            .collect()
    }

    /// One exchange at target `t`, the best of those tried; true if one was made.
    fn exchange_at(
        &mut self,
        t: u32,
        budget: &mut usize,
        on_target: &mut HashMap<*const Opt, Vec<(u32, u32)>>,
    ) -> bool {
        if !self.spare_gpus(t) {
            return false;
        }
        let price = self.gpu_hour[t as usize];
        let candidates = self.candidates(t, price, budget, on_target);
        if candidates.is_empty() {
            return false;
        }
        // The replicas it could give up: one per (workload, option) on `t`.
        let mut slots: Vec<(u32, u32, u32)> = Vec::new();
        for &(v, _) in &self.out.ledger.target_holders[t as usize] {
            for &(oi, n) in &self.out.slots[v as usize] {
                if self.out.options[v as usize][oi as usize].target == t {
                    slots.push((v, oi, n));
                }
            }
        }
        let mut evictions: Vec<[Option<(u32, u32)>; 2]> = vec![[None, None]];
        evictions.extend(slots.iter().map(|&(v, oi, _)| [Some((v, oi)), None]));
        // Two replicas given up at once, among the first slots (the same one twice where it
        // holds two).
        let few = &slots[..slots.len().min(PAIR_SLOTS)];
        for (i, &(v, oi, n)) in few.iter().enumerate() {
            if n >= 2 {
                evictions.push([Some((v, oi)), Some((v, oi))]);
            }
            for &(u, uj, _) in &few[i + 1..] {
                evictions.push([Some((v, oi)), Some((u, uj))]);
            }
        }
        let mut by_saving = candidates.clone();
        by_saving.sort_by(|a, b| {
            b.saving
                .cmp(&a.saving)
                .then((a.w, a.from).cmp(&(b.w, b.from)))
        });
        let mut by_density = candidates;
        by_density.sort_by(|a, b| {
            b.density
                .total_cmp(&a.density)
                .then((a.w, a.from).cmp(&(b.w, b.from)))
        });
        by_saving.truncate(CANDIDATES);
        by_density.truncate(CANDIDATES);
        let mut best: Option<(i64, Plan)> = None;
        for &evict in &evictions {
            for order in [Order::Saving, Order::Density] {
                if *budget == 0 {
                    break;
                }
                let plan = Plan { evict, order };
                let list = match order {
                    Order::Saving => &by_saving,
                    Order::Density => &by_density,
                };
                let mark = self.journal.len();
                let gain = self.try_exchange(t, plan, list, budget, on_target);
                self.undo_to(mark);
                if let Some(g) = gain
                    && g > 0
                    && best.is_none_or(|(b, _)| g > b)
                {
                    best = Some((g, plan));
                }
            }
        }
        let Some((_, plan)) = best else {
            return false;
        };
        let list = match plan.order {
            Order::Saving => by_saving,
            Order::Density => by_density,
        };
        let mark = self.journal.len();
        let kept = self.try_exchange(t, plan, &list, budget, on_target);
        if kept.is_some_and(|g| g > 0) {
            self.journal.truncate(mark);
            true
        } else {
            self.undo_to(mark);
            false
        }
    }

    /// Replicas on targets dearer than `t` (price `price`) with an option on `t` that is
    /// cheaper for them and keeps their guard.
    fn candidates(
        &self,
        t: u32,
        price: i64,
        budget: &mut usize,
        on_target: &mut HashMap<*const Opt, Vec<(u32, u32)>>,
    ) -> Vec<Candidate> {
        let ti = t as usize;
        let units: u64 = self
            .index
            .pool_range(ti)
            .map(|p| u64::from(self.index.pools[p].units))
            .sum::<u64>()
            .max(1);
        let (cpu, memory) = (
            self.ir.targets[ti].cpu_millis.max(1),
            self.ir.targets[ti].memory.max(1),
        );
        let mut out = Vec::new();
        for &w in &self.out.order {
            let w = w as usize;
            if self.costs[w] == 0 || self.out.slots[w].is_empty() {
                continue;
            }
            *budget = budget.saturating_sub(self.out.slots[w].len());
            let dearer = self.out.slots[w].iter().any(|&(oi, _)| {
                self.gpu_hour[self.out.options[w][oi as usize].target as usize] > price
            });
            if !dearer {
                continue;
            }
            let here = self.options_on(w, t, budget, on_target);
            let Some(&first) = here.first() else {
                continue;
            };
            let there = self.out.options[w][first as usize];
            let r = &self.ir.workloads[w].resources;
            let gpu = super::gpu_units(&self.ir.workloads[w]);
            let share = f64::from(gpu) / units as f64
                + r.cpu_millis as f64 / cpu as f64
                + r.memory as f64 / memory as f64;
            for &(oi, count) in &self.out.slots[w] {
                let o = self.out.options[w][oi as usize];
                if o.target == t || self.guard(w, &there) > self.guard(w, &o) {
                    continue;
                }
                let saving = self.cost(w, &o) - self.cost(w, &there);
                if saving > 0 {
                    out.push(Candidate {
                        w: w as u32,
                        from: oi,
                        count,
                        saving,
                        density: saving as f64 / share.max(f64::MIN_POSITIVE),
                    });
                }
            }
        }
        out
    }

    /// Makes the exchange `plan` at `t`, journaled: gives up the replica to evict, fills the
    /// room from `list`, places the given-up replica at its cheapest option elsewhere that
    /// keeps its guard. The cost per day it saves, or `None` when the replica given up has
    /// nowhere to go (the caller undoes either way as it chooses).
    fn try_exchange(
        &mut self,
        t: u32,
        plan: Plan,
        list: &[Candidate],
        budget: &mut usize,
        on_target: &mut HashMap<*const Opt, Vec<(u32, u32)>>,
    ) -> Option<i64> {
        let mut gain = 0i64;
        for &(v, oi) in plan.evict.iter().flatten() {
            self.j_remove(v as usize, oi as usize);
        }
        for c in list {
            let w = c.w as usize;
            let from = self.out.options[w][c.from as usize];
            let here = self.options_on(w, t, budget, on_target);
            for _ in 0..c.count {
                *budget = budget.saturating_sub(here.len());
                // Still there (an earlier move of the same workload may have taken it).
                let still = self.out.slots[w]
                    .binary_search_by_key(&c.from, |(i, _)| *i)
                    .is_ok();
                if !still {
                    break;
                }
                let fits = here.iter().copied().find(|&a| {
                    let o = self.out.options[w][a as usize];
                    self.guard(w, &o) <= self.guard(w, &from)
                        && self.cost(w, &o) < self.cost(w, &from)
                        && self.out.blocker(self, w, &o).is_none()
                });
                let Some(a) = fits else {
                    break;
                };
                let o = self.out.options[w][a as usize];
                gain += self.cost(w, &from) - self.cost(w, &o);
                self.j_remove(w, c.from as usize);
                self.j_place(w, a as usize);
            }
        }
        for &(v, oi) in plan.evict.iter().flatten() {
            let v = v as usize;
            let was = self.out.options[v][oi as usize];
            let (cost_was, guard_was) = (self.cost(v, &was), self.guard(v, &was));
            let opts = self.out.options[v].clone();
            *budget = budget.saturating_sub(opts.len());
            // Its options elsewhere that keep its guard, cheapest first.
            let mut homes: Vec<usize> = (0..opts.len())
                .filter(|&i| opts[i].target != t && self.guard(v, &opts[i]) <= guard_was)
                .collect();
            homes.sort_by_key(|&i| (self.cost(v, &opts[i]), i));
            let mut cleared = 0;
            let mut home = None;
            for i in homes {
                let delta = self.cost(v, &opts[i]) - cost_was;
                if self.out.blocker(self, v, &opts[i]).is_none() {
                    home = Some((i, delta));
                    break;
                }
                // A full home: move its holders on (to their cheapest options keeping their
                // guard, maybe the room the exchange left) if that costs less than the
                // exchange saves so far.
                if cleared == CLEARED_HOMES || gain.saturating_sub(delta) <= 0 {
                    continue;
                }
                cleared += 1;
                let mut extra = 0i64;
                let room = Room::Improve {
                    saving: gain.saturating_sub(delta),
                };
                if self.clear_room(v, i, room, &mut extra) {
                    home = Some((i, delta.saturating_add(extra)));
                    break;
                }
            }
            let (to, delta) = home?;
            gain -= delta;
            self.j_place(v, to);
        }
        Some(gain)
    }
}
