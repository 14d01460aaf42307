//! The overflow search: the repair's last resort on saturated estates, where every replica
//! could be placed but only by a packing the repair's moves do not reach.
//!
//! The other repair moves (one- and two-step repair, [`super::chain`]) only pass through states
//! that respect every constraint. This one relaxes them — GPU units per pool, CPU and memory per
//! target, spread and isolation — keeps every replica placed, the missing ones included, and
//! moves replicas until nothing is violated. It is the *breakout* method (weighted
//! min-conflicts) used for tight packing and scheduling problems:
//!
//! - Each step takes a violation at random (an overflowing resource, or a workload over its
//!   spread or sharing a pool with a workload it is isolated from), a sample of the replicas
//!   involved, and every other option of each, and makes the move that lowers the **weighted
//!   violation** most.
//! - When no move lowers it (a local minimum), every violation still there weighs one more, so
//!   the next moves push replicas away from what the search keeps failing on.
//! - Each step first looks for a single move; when none lowers the violation it looks for a
//!   **pair**: a replica to another option, then a replica on what that move overflows to
//!   another of its options (two moves that only pay off together).
//! - A replica may not go straight back to the option it just left (a short tabu).
//! - When the violation has not come down for a while, the weights are forgotten and a **kick**
//!   of a few random moves starts the search from a nearby state.
//! - Caps are never relaxed: missing replicas join only as far as their caps have room, and a
//!   move never changes how many replicas a workload has.
//!
//! If nothing is violated in the end, every replica taken in is placed. If the budget runs out
//! first, replicas are taken off each violation, lowest class first, until none is left. The
//! result replaces the assignment only when it places more replicas per class,
//! lexicographically from production down, so the search never costs a replica of a higher
//! class. When it does not, it gets a **second chance**: the estate as the search left it,
//! with the repair (ejection chains) and trades run again for every workload short — the
//! search often places what was missing at the price of a replica or two it took off, which a
//! chain from that state puts back. The same test decides; if it fails, the assignment is
//! restored as it was. Randomness comes from a fixed-seed [`SplitMix64`] and the work is
//! bounded by a budget of options examined, so the result is deterministic.

// INVARIANT: every index is a dense id of the IR being placed (workload < `ir.workloads.len()`,
// target < `ir.targets.len()`, a pool < its target's pools) or a position in a table the solver
// sized from those counts when it built it (`EstateIndex`, `EligibilityMatrix`, `Assignment`'s
// options and slots, the ledgers); nothing from user text indexes here. Indexing is the hot
// path; the property tests and planted estates run it over generated estates.
#![allow(clippy::indexing_slicing)]

use super::chain::improves;
use super::class_slot;
use super::{Assigner, NO_POOL, Opt};
use crate::placement::eligibility::gpu_units;
use crate::placement::tally::{add_count, count};
use crate::splitmix::SplitMix64;

/// Options one overflow search may examine: this many per option of the estate, but at most
/// this many per workload plus a base (the search's steps cost more with more options each).
const BUDGET_PER_OPTION: usize = 2_000;
const BUDGET_PER_WORKLOAD: usize = 50;
const BUDGET_BASE: usize = 3_000_000;
/// Steps without coming closer to a placement (less unweighted violation) before the search
/// gives up.
const PATIENCE: usize = 20_000;
/// Steps without coming closer to a placement before a kick, and the random moves it makes.
const STAGNATION: usize = 300;
const KICK_MOVES: usize = 20;
/// Replicas of a violation a step considers moving.
const SAMPLE: usize = 12;
/// Replicas whose moves a pair move starts from, and replicas it then tries to move on.
const PAIR_FIRST: usize = 6;
const PAIR_SECOND: usize = 16;
/// Steps a replica may not return to the option it left.
const TABU_TENURE: usize = 10;
/// What one replica over a spread limit, or one pair of isolated workloads sharing a pool,
/// weighs against overflow (as much as a GPU unit).
const SOFT: i64 = 1_000;
/// At most this many violations left (overflowing resources, workloads over spread or
/// sharing a pool) and the search counts as near a full placement (estates placeable in full
/// end with a handful; over-subscribed ones with hundreds).
const NEAR_VIOLATIONS: usize = 16;
/// Not a position: the replica or resource is on no list of this kind, or the replica was
/// taken off.
const NOWHERE: u32 = u32::MAX;

/// What one overflow search did to the assignment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SearchOutcome {
    /// Nothing: the assignment is as it was.
    Unchanged,
    /// Placed more, but ended far from placing everything: on an estate without room for
    /// every replica missing (the search aimed at what the free capacity could hold), or
    /// with more than [`NEAR_VIOLATIONS`] violations left.
    PlacedMore,
    /// Placed more, having aimed at every replica missing that caps allow and ended within
    /// [`NEAR_VIOLATIONS`] of a full placement: another search from here may finish it.
    PlacedMoreNearlyAll,
}

/// Which missing replicas the search takes in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Aim {
    /// Every one caps allow.
    Every,
    /// As many as the estate's summed free capacity could hold: not all.
    WhatFits,
}

/// A replica of the search.
#[derive(Clone, Copy, Debug)]
struct Replica {
    workload: u32,
    /// Option index, or [`NOWHERE`] once taken off.
    option: u32,
    /// The option it last left, and the step until which it may not go back.
    left: u32,
    until: usize,
}

/// Kinds of resource, in the order of their ids: pools, then target CPU, then target memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Pool,
    Cpu,
    Memory,
}

/// Takes `id` out of `list` by swapping the last item into its place; `pos` holds each id's
/// position in its list.
fn unlist(list: &mut Vec<u32>, pos: &mut [u32], id: u32) {
    let at = pos[id as usize] as usize;
    list.swap_remove(at);
    if let Some(&moved) = list.get(at) {
        pos[moved as usize] = at as u32;
    }
    pos[id as usize] = NOWHERE;
}

/// A set of small ids with O(1) insert, remove and random pick.
#[derive(Clone, Debug, Default)]
struct IdSet {
    items: Vec<u32>,
    pos: Vec<u32>,
}

impl IdSet {
    fn new(universe: usize) -> Self {
        IdSet {
            items: Vec::new(),
            pos: vec![NOWHERE; universe],
        }
    }

    fn set(&mut self, id: usize, member: bool) {
        let at = self.pos[id];
        if member && at == NOWHERE {
            self.pos[id] = self.items.len() as u32;
            self.items.push(id as u32);
        } else if !member && at != NOWHERE {
            unlist(&mut self.items, &mut self.pos, id as u32);
        }
    }
}

/// Replicas grouped by a resource (each replica in at most one group): O(1) insert and
/// remove.
#[derive(Clone, Debug, Default)]
struct Groups {
    items: Vec<Vec<u32>>,
    /// Per replica, its position in its group.
    pos: Vec<u32>,
}

impl Groups {
    fn new(groups: usize) -> Self {
        Groups {
            items: vec![Vec::new(); groups],
            pos: Vec::new(),
        }
    }

    fn set(&mut self, group: usize, r: u32, member: bool) {
        let list = &mut self.items[group];
        if member {
            self.pos[r as usize] = list.len() as u32;
            list.push(r);
        } else {
            unlist(list, &mut self.pos, r);
        }
    }
}

/// The relaxed state: every replica on an option, constraints possibly broken.
struct Relaxed {
    replicas: Vec<Replica>,
    /// Per flat pool, per target and per workload, the replicas on or of it.
    on_pool: Groups,
    on_target: Groups,
    of_workload: Vec<Vec<u32>>,
    /// Per resource id: capacity, use, weight.
    capacity: Vec<i64>,
    used: Vec<i64>,
    weight: Vec<i64>,
    overflowing: IdSet,
    /// Unweighted overflow summed over all resources, and soft violations over all workloads:
    /// how far the state is from a placement.
    total_overflow: i64,
    total_soft: i64,
    pools: usize,
    targets: usize,
    /// Per workload, `(target, replicas)` and `(region, replicas)` for spread, `(flat pool,
    /// replicas)` for isolation.
    per_target: Vec<Vec<(u32, u32)>>,
    per_region: Vec<Vec<(u32, u32)>>,
    per_pool: Vec<Vec<(u32, u32)>>,
    /// Per workload: replicas over its spread plus pools shared with an isolated partner, and
    /// the weight of one of those.
    soft: Vec<i64>,
    soft_weight: Vec<i64>,
    violating: IdSet,
}

/// A capacity or demand from the spec as a signed number; an absurd one is clamped far enough
/// below `i64::MAX` that sums of a few stay exact.
fn signed(x: u64) -> i64 {
    i64::try_from(x).unwrap_or(i64::MAX / 4)
}

/// Replicas over a limit of `n` when `c` are there.
fn over(c: u32, n: u32) -> i64 {
    i64::from(c.saturating_sub(n))
}

impl Relaxed {
    fn kind(&self, res: usize) -> Kind {
        if res < self.pools {
            Kind::Pool
        } else if res < self.pools + self.targets {
            Kind::Cpu
        } else {
            Kind::Memory
        }
    }

    /// The replicas on resource `res`.
    fn on(&self, res: usize) -> &[u32] {
        if res < self.pools {
            &self.on_pool.items[res]
        } else {
            &self.on_target.items[(res - self.pools) % self.targets]
        }
    }

    /// The replicas involved in a violation drawn at random — on an overflowing resource, or
    /// of a workload over its spread or sharing a pool with a partner; `None` when nothing is
    /// violated.
    fn random_violation(&self, rng: &mut SplitMix64) -> Option<&[u32]> {
        let (hard, soft) = (self.overflowing.items.len(), self.violating.items.len());
        if hard + soft == 0 {
            return None;
        }
        let pick = (rng.next() % (hard + soft) as u64) as usize;
        Some(if pick < hard {
            self.on(self.overflowing.items[pick] as usize)
        } else {
            &self.of_workload[self.violating.items[pick - hard] as usize]
        })
    }

    /// The overflow of resource `res` at use `used`, in comparable units: a GPU unit counts
    /// 1,000, a CPU millicore 1, a MiB of memory 1 (so a core and a GiB weigh about a GPU).
    fn overflow(&self, res: usize, used: i64) -> i64 {
        // Saturating throughout: capacities and demands come from the spec.
        let over = used.saturating_sub(self.capacity[res]).max(0);
        match self.kind(res) {
            Kind::Pool => over.saturating_mul(1_000),
            Kind::Cpu => over,
            Kind::Memory => over.saturating_add((1 << 20) - 1) >> 20,
        }
    }

    /// Weighted change of the overflow of `res` if its use changes by `by`.
    fn delta(&self, res: usize, by: i64) -> i64 {
        let u = self.used[res];
        self.weight[res]
            .saturating_mul(self.overflow(res, u.saturating_add(by)) - self.overflow(res, u))
    }

    fn change(&mut self, res: usize, by: i64) {
        let before = self.overflow(res, self.used[res]);
        self.used[res] = self.used[res].saturating_add(by);
        let after = self.overflow(res, self.used[res]);
        self.total_overflow = self.total_overflow.saturating_add(after - before);
        let over = self.used[res] > self.capacity[res];
        self.overflowing.set(res, over);
    }
}

/// What one replica of a workload takes: GPU units, CPU millicores, memory bytes.
#[derive(Clone, Copy)]
struct Demand {
    units: i64,
    cpu: i64,
    memory: i64,
}

impl Assigner<'_> {
    fn demand(&self, w: usize) -> Demand {
        let wl = &self.ir.workloads[w];
        Demand {
            units: i64::from(gpu_units(wl)),
            cpu: signed(wl.resources.cpu_millis),
            memory: signed(wl.resources.memory),
        }
    }

    /// Runs the overflow search over the whole assignment and the replicas still missing.
    pub(super) fn relax(&mut self, order: &[u32]) -> SearchOutcome {
        if !self.short_workload(order) {
            return SearchOutcome::Unchanged;
        }
        let mut s = self.relaxed();
        let before = self.class_tally(&s);
        let aim = self.take_in_missing(&mut s, order);
        let mut rng = SplitMix64(0x0B5E_55ED);
        let options: usize = self.out.options.iter().map(|o| o.len()).sum();
        let mut budget = (BUDGET_PER_OPTION * options)
            .min(BUDGET_PER_WORKLOAD * self.ir.workloads.len() + BUDGET_BASE);
        let mut step = 0usize;
        let (mut best_violation, mut best_step) = (i64::MAX, 0usize);
        let mut kicked = 0usize;
        loop {
            let (hard, soft) = (s.overflowing.items.len(), s.violating.items.len());
            if hard + soft == 0 || budget == 0 || step - best_step > PATIENCE {
                break;
            }
            let violation = s
                .total_overflow
                .saturating_add(s.total_soft.saturating_mul(SOFT));
            if violation < best_violation {
                best_violation = violation;
                best_step = step;
            }
            if step - best_step.max(kicked) > STAGNATION {
                kicked = step;
                self.kick(&mut s, step, &mut rng);
                continue;
            }
            step += 1;
            let sample = s
                .random_violation(&mut rng)
                .map_or_else(Vec::new, |list| sample(list, &mut rng));
            let single = self.best_move(&s, &sample, step, &mut budget);
            if let Some((d, r, to)) = single
                && d < 0
            {
                self.move_replica(&mut s, r, to, step);
                continue;
            }
            if let Some((r, to, q, qto)) =
                self.best_pair(&mut s, &sample, step, &mut budget, &mut rng)
            {
                self.move_replica(&mut s, r, to, step);
                self.move_replica(&mut s, q, qto, step);
                continue;
            }
            // A local minimum: what is still violated weighs more.
            for k in 0..s.overflowing.items.len() {
                let res = s.overflowing.items[k] as usize;
                s.weight[res] += 1;
            }
            for k in 0..s.violating.items.len() {
                let w = s.violating.items[k] as usize;
                s.soft_weight[w] += 1;
            }
        }
        let near = s.overflowing.items.len() + s.violating.items.len() <= NEAR_VIOLATIONS;
        let placed_more = match (aim, near) {
            (Aim::Every, true) => SearchOutcome::PlacedMoreNearlyAll,
            _ => SearchOutcome::PlacedMore,
        };
        self.shed_soft(&mut s);
        self.shed_overflow(&mut s);
        let after = self.class_tally(&s);
        let gain: [i64; 4] = std::array::from_fn(|i| after[i] - before[i]);
        if improves(&gain) {
            self.adopt(&s);
            return placed_more;
        }
        // Not better as it stands: the search may still have placed what was missing at the
        // price of a few replicas it took off, which the repair (chains) and trades can put
        // back from where the search left the estate. Kept only if that places more.
        let saved = self.out.slots.clone();
        self.adopt(&s);
        self.repair_and_trade(order);
        let now = self.assignment_tally();
        let gain: [i64; 4] = std::array::from_fn(|i| now[i] - before[i]);
        if improves(&gain) {
            return placed_more;
        }
        self.adopt_slots(saved);
        SearchOutcome::Unchanged
    }

    /// Replicas placed per class in the assignment (highest priority first).
    pub(super) fn assignment_tally(&self) -> [i64; 4] {
        self.out.placed_per_class(self.ir).map(i64::from)
    }

    /// The current assignment as a relaxed state.
    fn relaxed(&self) -> Relaxed {
        let pools = self.index.pools.len();
        let targets = self.ir.targets.len();
        let mut capacity: Vec<i64> = self
            .index
            .pools
            .iter()
            .map(|p| i64::from(p.units))
            .collect();
        capacity.extend(self.ir.targets.iter().map(|t| signed(t.cpu_millis)));
        capacity.extend(self.ir.targets.iter().map(|t| signed(t.memory)));
        let n = self.ir.workloads.len();
        let resources = capacity.len();
        let mut s = Relaxed {
            replicas: Vec::new(),
            on_pool: Groups::new(pools),
            on_target: Groups::new(targets),
            of_workload: vec![Vec::new(); n],
            capacity,
            used: vec![0; resources],
            weight: vec![1; resources],
            overflowing: IdSet::new(resources),
            total_overflow: 0,
            total_soft: 0,
            pools,
            targets,
            per_target: vec![Vec::new(); n],
            per_region: vec![Vec::new(); n],
            per_pool: vec![Vec::new(); n],
            soft: vec![0; n],
            soft_weight: vec![1; n],
            violating: IdSet::new(n),
        };
        for w in 0..n {
            for &(oi, k) in &self.out.slots[w] {
                for _ in 0..k {
                    self.enter(&mut s, w, oi);
                }
            }
        }
        s
    }

    /// Adds one replica of `w` on option `oi` to the relaxed state.
    fn enter(&self, s: &mut Relaxed, w: usize, oi: u32) {
        let r = s.replicas.len() as u32;
        s.replicas.push(Replica {
            workload: w as u32,
            option: oi,
            left: NOWHERE,
            until: 0,
        });
        s.on_pool.pos.push(NOWHERE);
        s.on_target.pos.push(NOWHERE);
        s.of_workload[w].push(r);
        self.occupy(s, r, 1);
    }

    /// Adds (`by` = 1) or removes (-1) replica `r` on its option: lists, use, spread and
    /// isolation counts.
    fn occupy(&self, s: &mut Relaxed, r: u32, by: i32) {
        let rep = s.replicas[r as usize];
        let w = rep.workload as usize;
        let o = self.out.options[w][rep.option as usize];
        let d = self.demand(w);
        let sign = i64::from(by);
        let t = o.target as usize;
        s.on_target.set(t, r, by > 0);
        let (cpu, mem) = (s.pools + t, s.pools + s.targets + t);
        s.change(cpu, sign * d.cpu);
        s.change(mem, sign * d.memory);
        add_count(&mut s.per_target[w], o.target, by);
        add_count(&mut s.per_region[w], self.index.region[t], by);
        if o.flat_pool != NO_POOL {
            let p = o.flat_pool as usize;
            s.on_pool.set(p, r, by > 0);
            s.change(p, sign * d.units);
            add_count(&mut s.per_pool[w], o.flat_pool, by);
            for &p in self.out.partners(w) {
                self.refresh_soft(s, p as usize);
            }
        }
        self.refresh_soft(s, w);
    }

    /// Recounts what `w` breaks of spread and isolation.
    fn refresh_soft(&self, s: &mut Relaxed, w: usize) {
        let placement = &self.ir.workloads[w].placement;
        let mut v = 0;
        if let Some(n) = placement.per_target {
            v += s.per_target[w].iter().map(|e| over(e.1, n)).sum::<i64>();
        }
        if let Some(n) = placement.per_region {
            v += s.per_region[w].iter().map(|e| over(e.1, n)).sum::<i64>();
        }
        for &(pool, _) in &s.per_pool[w] {
            v += self
                .out
                .partners(w)
                .iter()
                .filter(|&&p| count(&s.per_pool[p as usize], pool) > 0)
                .count() as i64;
        }
        s.total_soft += v - s.soft[w];
        s.soft[w] = v;
        s.violating.set(w, v > 0);
    }

    /// Weighted change of the violation if one replica of `w` leaves `from` (if any) for `to`.
    fn move_delta(&self, s: &Relaxed, w: usize, from: Option<&Opt>, to: &Opt) -> i64 {
        let d = self.demand(w);
        let mut delta: i64 = 0;
        let (cpu, mem) = (s.pools, s.pools + s.targets);
        if from.is_none_or(|f| f.target != to.target) {
            let t = to.target as usize;
            delta = delta
                .saturating_add(s.delta(cpu + t, d.cpu))
                .saturating_add(s.delta(mem + t, d.memory));
            if let Some(f) = from {
                let t = f.target as usize;
                delta = delta
                    .saturating_add(s.delta(cpu + t, -d.cpu))
                    .saturating_add(s.delta(mem + t, -d.memory));
            }
        }
        if from.is_none_or(|f| f.flat_pool != to.flat_pool) {
            if to.flat_pool != NO_POOL {
                delta = delta.saturating_add(s.delta(to.flat_pool as usize, d.units));
            }
            if let Some(f) = from.filter(|f| f.flat_pool != NO_POOL) {
                delta = delta.saturating_add(s.delta(f.flat_pool as usize, -d.units));
            }
        }
        delta.saturating_add(self.soft_delta(s, w, from, to))
    }

    /// The spread and isolation part of [`Self::move_delta`].
    fn soft_delta(&self, s: &Relaxed, w: usize, from: Option<&Opt>, to: &Opt) -> i64 {
        let placement = &self.ir.workloads[w].placement;
        let mut excess = 0;
        if let Some(n) = placement.per_target
            && from.is_none_or(|f| f.target != to.target)
        {
            let c = count(&s.per_target[w], to.target);
            excess += over(c + 1, n) - over(c, n);
            if let Some(f) = from {
                let c = count(&s.per_target[w], f.target);
                excess += over(c.saturating_sub(1), n) - over(c, n);
            }
        }
        let region = |o: &Opt| self.index.region[o.target as usize];
        if let Some(n) = placement.per_region
            && from.is_none_or(|f| region(f) != region(to))
        {
            let c = count(&s.per_region[w], region(to));
            excess += over(c + 1, n) - over(c, n);
            if let Some(f) = from {
                let c = count(&s.per_region[w], region(f));
                excess += over(c.saturating_sub(1), n) - over(c, n);
            }
        }
        let mut delta = excess * SOFT * s.soft_weight[w];
        if from.is_none_or(|f| f.flat_pool != to.flat_pool) {
            let pair = |p: u32| SOFT * (s.soft_weight[w] + s.soft_weight[p as usize]);
            let sharing = |pool: u32| {
                self.out
                    .partners(w)
                    .iter()
                    .filter(move |&&p| count(&s.per_pool[p as usize], pool) > 0)
            };
            if to.flat_pool != NO_POOL && count(&s.per_pool[w], to.flat_pool) == 0 {
                delta += sharing(to.flat_pool).map(|&p| pair(p)).sum::<i64>();
            }
            if let Some(f) = from.filter(|f| f.flat_pool != NO_POOL)
                && count(&s.per_pool[w], f.flat_pool) == 1
            {
                delta -= sharing(f.flat_pool).map(|&p| pair(p)).sum::<i64>();
            }
        }
        delta
    }

    /// Missing replicas join the relaxed state, each on the option where it weighs least, in
    /// placement order, as far as caps have room and as long as the free capacity (GPU units,
    /// CPU, memory) summed over the estate could hold them: on an over-subscribed estate the
    /// search then aims at what could fit, not at everything.
    fn take_in_missing(&self, s: &mut Relaxed, order: &[u32]) -> Aim {
        let mut aim = Aim::Every;
        let mut cap_used = self.out.ledger.cap_used.clone();
        let free = |s: &Relaxed, res: usize| (s.capacity[res] - s.used[res]).max(0);
        let (pools, targets) = (s.pools, s.targets);
        let mut room = [
            (0..pools).map(|r| free(s, r)).sum::<i64>(),
            (pools..pools + targets).map(|r| free(s, r)).sum::<i64>(),
            (pools + targets..pools + 2 * targets)
                .map(|r| free(s, r))
                .sum::<i64>(),
        ];
        for &w in order {
            let w = w as usize;
            let units = u64::from(gpu_units(&self.ir.workloads[w]));
            let d = self.demand(w);
            let missing = self.ir.workloads[w].replicas - self.out.placed(w);
            for _ in 0..missing {
                let caps = &self.policy.workload_caps[w];
                if units > 0
                    && caps
                        .iter()
                        .any(|&c| cap_used[c as usize] + units > self.policy.caps[c as usize].max)
                {
                    break;
                }
                let want = [d.units, d.cpu, d.memory];
                if want.iter().zip(&room).any(|(x, r)| x > r) {
                    aim = Aim::WhatFits;
                    break;
                }
                let best = self.out.options[w]
                    .iter()
                    .enumerate()
                    .min_by_key(|(i, o)| (self.move_delta(s, w, None, o), *i));
                let Some((oi, _)) = best else {
                    break;
                };
                for &c in caps {
                    cap_used[c as usize] += units;
                }
                for (r, x) in room.iter_mut().zip(want) {
                    *r -= x;
                }
                self.enter(s, w, oi as u32);
            }
        }
        aim
    }

    /// The move of one of `sample` that lowers the weighted violation most: `(change,
    /// replica, option)`.
    fn best_move(
        &self,
        s: &Relaxed,
        sample: &[u32],
        step: usize,
        budget: &mut usize,
    ) -> Option<(i64, u32, u32)> {
        let mut best: Option<(i64, u32, u32)> = None;
        for &r in sample {
            let rep = s.replicas[r as usize];
            let w = rep.workload as usize;
            let opts = &self.out.options[w];
            *budget = budget.saturating_sub(opts.len());
            let from = opts[rep.option as usize];
            for (j, to) in opts.iter().enumerate() {
                let j = j as u32;
                if j == rep.option || (j == rep.left && step < rep.until) {
                    continue;
                }
                let d = self.move_delta(s, w, Some(&from), to);
                if best.is_none_or(|b| d < b.0) {
                    best = Some((d, r, j));
                }
            }
        }
        best
    }

    /// The pair of moves — one of `sample` to another option, then a replica on a resource
    /// that move overflows to another of its options — that lowers the weighted violation,
    /// most; `None` when no pair lowers it.
    fn best_pair(
        &self,
        s: &mut Relaxed,
        sample: &[u32],
        step: usize,
        budget: &mut usize,
        rng: &mut SplitMix64,
    ) -> Option<(u32, u32, u32, u32)> {
        let mut best: Option<(i64, u32, u32, u32, u32)> = None;
        for &r in sample.iter().take(PAIR_FIRST) {
            let rep = s.replicas[r as usize];
            let w = rep.workload as usize;
            let from = self.out.options[w][rep.option as usize];
            // Every first move, the cheapest on its own first.
            let mut firsts: Vec<(i64, u32)> = (0..self.out.options[w].len() as u32)
                .filter(|&j| j != rep.option && !(j == rep.left && step < rep.until))
                .map(|j| {
                    let to = &self.out.options[w][j as usize];
                    (self.move_delta(s, w, Some(&from), to), j)
                })
                .collect();
            *budget = budget.saturating_sub(firsts.len());
            firsts.sort_unstable();
            let d = self.demand(w);
            for (first, j) in firsts {
                let to = self.out.options[w][j as usize];
                // Where the first move overflows: the pool, else the target.
                let res = if to.flat_pool != NO_POOL
                    && s.used[to.flat_pool as usize] + d.units > s.capacity[to.flat_pool as usize]
                {
                    to.flat_pool as usize
                } else {
                    s.pools + to.target as usize
                };
                self.move_replica(s, r, j, step);
                let others: Vec<u32> = sample_n(s.on(res), rng, PAIR_SECOND)
                    .into_iter()
                    .filter(|&q| q != r)
                    .collect();
                if let Some((second, q, qto)) = self.best_move(s, &others, step, budget)
                    && first.saturating_add(second) < 0
                    && best.is_none_or(|b| first.saturating_add(second) < b.0)
                {
                    best = Some((first.saturating_add(second), r, j, q, qto));
                }
                // Undo, tabu included.
                self.occupy(s, r, -1);
                s.replicas[r as usize] = rep;
                self.occupy(s, r, 1);
            }
        }
        best.map(|b| (b.1, b.2, b.3, b.4))
    }

    /// Leaves a local optimum the weights do not get out of: every weight back to one, and a
    /// few replicas involved in violations moved at random.
    fn kick(&self, s: &mut Relaxed, step: usize, rng: &mut SplitMix64) {
        for x in s.weight.iter_mut().chain(s.soft_weight.iter_mut()) {
            *x = 1;
        }
        for _ in 0..KICK_MOVES {
            let Some(list) = s.random_violation(rng) else {
                return;
            };
            let Some(&r) = sample_n(list, rng, 1).first() else {
                continue;
            };
            let w = s.replicas[r as usize].workload as usize;
            let n = self.out.options[w].len() as u64;
            let to = (rng.next() % n) as u32;
            if to != s.replicas[r as usize].option {
                self.move_replica(s, r, to, step);
            }
        }
    }

    fn move_replica(&self, s: &mut Relaxed, r: u32, to: u32, step: usize) {
        self.occupy(s, r, -1);
        let rep = &mut s.replicas[r as usize];
        rep.left = rep.option;
        rep.until = step + TABU_TENURE;
        rep.option = to;
        self.occupy(s, r, 1);
    }

    /// Takes replica `r` off.
    fn take_off(&self, s: &mut Relaxed, r: u32) {
        self.occupy(s, r, -1);
        s.replicas[r as usize].option = NOWHERE;
    }

    /// Takes replicas off until no workload is over its spread or shares a pool with a
    /// workload it is isolated from (of a pair, the lower class leaves).
    fn shed_soft(&self, s: &mut Relaxed) {
        while let Some(&w) = s.violating.items.first() {
            let w = w as usize;
            let Some(victim) = self.soft_victim(s, w) else {
                break;
            };
            self.take_off(s, victim);
        }
    }

    /// A replica whose removal lowers what `w` breaks.
    fn soft_victim(&self, s: &Relaxed, w: usize) -> Option<u32> {
        let placement = &self.ir.workloads[w].placement;
        let on = |v: usize, f: &dyn Fn(&Opt) -> bool| {
            s.of_workload[v].iter().copied().find(|&r| {
                let rep = s.replicas[r as usize];
                rep.option != NOWHERE && f(&self.out.options[v][rep.option as usize])
            })
        };
        if let Some(n) = placement.per_target
            && let Some(&(t, _)) = s.per_target[w].iter().find(|e| e.1 > n)
        {
            return on(w, &|o| o.target == t);
        }
        if let Some(n) = placement.per_region
            && let Some(&(region, _)) = s.per_region[w].iter().find(|e| e.1 > n)
        {
            return on(w, &|o| self.index.region[o.target as usize] == region);
        }
        for &(pool, _) in &s.per_pool[w] {
            for &p in self.out.partners(w) {
                let p = p as usize;
                if count(&s.per_pool[p], pool) == 0 {
                    continue;
                }
                let lower = if self.ir.workloads[p].class < self.ir.workloads[w].class {
                    p
                } else {
                    w
                };
                return on(lower, &|o| o.flat_pool == pool);
            }
        }
        None
    }

    /// Takes replicas off every overflowing resource, lowest class first (then the one that
    /// frees most), until nothing overflows.
    fn shed_overflow(&self, s: &mut Relaxed) {
        while let Some(&res) = s.overflowing.items.first() {
            let res = res as usize;
            let Some(&victim) = s.on(res).iter().min_by_key(|&&r| {
                let w = s.replicas[r as usize].workload as usize;
                let d = self.demand(w);
                let frees = match s.kind(res) {
                    Kind::Pool => d.units,
                    Kind::Cpu => d.cpu,
                    Kind::Memory => d.memory,
                };
                (self.ir.workloads[w].class, std::cmp::Reverse(frees), r)
            }) else {
                break;
            };
            self.take_off(s, victim);
        }
    }

    /// Replicas placed per class in the relaxed state (highest priority first).
    fn class_tally(&self, s: &Relaxed) -> [i64; 4] {
        let mut tally = [0i64; 4];
        for rep in s.replicas.iter().filter(|r| r.option != NOWHERE) {
            tally[class_slot(self.ir.workloads[rep.workload as usize].class)] += 1;
        }
        tally
    }

    /// Replaces the assignment by the relaxed state (which no longer breaks anything).
    fn adopt(&mut self, s: &Relaxed) {
        let n = self.ir.workloads.len();
        let mut slots: Vec<Vec<(u32, u32)>> = vec![Vec::new(); n];
        for rep in s.replicas.iter().filter(|r| r.option != NOWHERE) {
            add_count(&mut slots[rep.workload as usize], rep.option, 1);
        }
        for list in &mut slots {
            list.sort_unstable();
        }
        self.adopt_slots(slots);
    }

    /// Replaces the assignment by `slots` (per workload, `(option, replicas)` sorted).
    pub(super) fn adopt_slots(&mut self, slots: Vec<Vec<(u32, u32)>>) {
        let n = self.ir.workloads.len();
        let changed: Vec<usize> = (0..n).filter(|&w| slots[w] != self.out.slots[w]).collect();
        // Everything leaves before anything arrives: the ledger never goes below zero.
        for &w in &changed {
            for (oi, k) in self.out.slots[w].clone() {
                for _ in 0..k {
                    self.remove(w, oi as usize);
                }
            }
        }
        for &w in &changed {
            for &(oi, k) in &slots[w] {
                for _ in 0..k {
                    self.place(w, oi as usize);
                }
            }
        }
    }
}

/// Up to [`SAMPLE`] items of `list`, from a random start.
fn sample(list: &[u32], rng: &mut SplitMix64) -> Vec<u32> {
    sample_n(list, rng, SAMPLE)
}

/// Up to `n` items of `list`, from a random start.
fn sample_n(list: &[u32], rng: &mut SplitMix64, n: usize) -> Vec<u32> {
    if list.is_empty() {
        return Vec::new();
    }
    let start = (rng.next() % list.len() as u64) as usize;
    (0..list.len().min(n))
        .map(|k| list[(start + k) % list.len()])
        .collect()
}
