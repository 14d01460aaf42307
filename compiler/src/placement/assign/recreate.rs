//! Ruin and recreate: the last improvement on a small estate, for the plans no single move,
//! exchange or chain reaches — where the cheaper plan moves many replicas over several
//! targets at once (a replica to a cheaper pool, the one there to a third target, the one
//! there somewhere dearer but with room), or where a class left short fits more replicas by
//! a packing of several targets together.
//!
//! Each round **ruins** a few related targets — every replica on them is taken off — and
//! **recreates**: the replicas taken off, and the missing ones of workloads short that have
//! an option on a ruined target, are placed again on the room the rest of the assignment
//! leaves. Rounds alternate two recreates:
//!
//! - **greedy**: one replica at a time on its best-ranked option with room (the greedy's
//!   choice), highest class first and, within a class, largest first or shuffled, as the
//!   round draws (diversity);
//! - **exact**: a depth-first branch and bound over the replicas' options with room, fewest
//!   replicas left out per class first, then least summed fallback position, data latency
//!   where it ranks first and cost; its first dive is the greedy's, and it stops after
//!   [`RECREATE_NODES`] nodes, so it is exact on small ruins and no worse than the greedy on
//!   large ones.
//!
//! A round is kept when the assignment is no worse in `Assigner::outcome`'s order: replicas
//! placed per class (production first), then summed fallback positions, data latency where
//! it ranks first, and cost per day. Otherwise the journal undoes it. Keeping a round that is
//! only as good lets the search walk across plateaus of equal cost; a search that gains
//! nothing puts the assignment back as it found it, so the plan changes only for a gain.
//!
//! The targets ruined together: the target of a replica drawn at random, then targets where
//! a replica taken off would rather be (a better-ranked option of its workload), so the ruin
//! opens the room a coordinated move needs.
//!
//! Where a class is left short, more of its replicas fit only when the higher classes'
//! replicas are packed differently (a workload its quota holds back is not counted: no
//! packing frees a quota), so the search turns to counts: every fourth round's ruin
//! starts at a target of a short workload of the highest short class, every other round of
//! each recreate places a short class smallest first (the most replicas fit), and the branch
//! and bound may visit [`RECREATE_NODES_SHORT`] nodes. This is the *ruin and recreate* method of
//! Schrimpf et al. (2000), the large-neighbourhood search (Shaw, 1998) of vehicle routing and
//! bin packing. Randomness comes from a fixed-seed [`SplitMix64`]; the rounds are counted,
//! never timed, and the search stops after [`PATIENCE`] rounds without a gain, so the result
//! is deterministic and an estate already at its optimum pays little.

// INVARIANT: every index is a dense id of the IR being placed or a position in a table the
// solver sized from those counts (see `assign.rs`); nothing from user text indexes here.
#![allow(clippy::indexing_slicing)]

use super::Assigner;
use super::chain::Step;
use super::class_slot;
use crate::ir::Workload;
use crate::placement::eligibility::replica_size;
use crate::splitmix::SplitMix64;

/// Estates of more workloads than this are not searched (nor the three constructions run,
/// `assign`'s `CONSTRUCTIONS_MAX_WORKLOADS`, for the same reason: a large estate's first
/// plan is near its optimum and the rounds would cost seconds).
const RECREATE_MAX_WORKLOADS: usize = 2_000;
/// Rounds per workload of the estate, and at most this many in all.
const ROUNDS_PER_WORKLOAD: usize = 30;
const ROUNDS_MAX: usize = 6_000;
/// Rounds in a row that make nothing better before the search stops.
const PATIENCE: usize = 1_000;
/// Nodes one branch-and-bound recreate may visit.
const RECREATE_NODES: usize = 1_000;
/// Nodes it may visit while a class is left short: a count to raise needs the higher
/// classes' replicas packed differently, a deeper search.
const RECREATE_NODES_SHORT: usize = 10_000;
/// Targets one round ruins, at most.
const RUIN_TARGETS: u64 = 4;

/// A recreate's score, lower being better: replicas left out per class (highest first), then
/// summed fallback positions, data latency where it ranks first, and cost.
const SCORE: usize = 7;
type Score = [i64; SCORE];
/// The pick of a replica left out.
const LEFT_OUT: usize = usize::MAX;

/// Two workloads' replicas by size ([`replica_size`]): smallest first where
/// `smallest_first` (in a class left short: the most replicas fit), else largest first.
fn by_size(a: &Workload, b: &Workload, smallest_first: bool) -> std::cmp::Ordering {
    if smallest_first {
        replica_size(a).cmp(&replica_size(b))
    } else {
        replica_size(b).cmp(&replica_size(a))
    }
}

fn add(a: &Score, b: &Score) -> Score {
    std::array::from_fn(|k| a[k].saturating_add(b[k]))
}

/// One branch-and-bound recreate: per replica its candidates (options with room when it
/// began, best first, and leaving it out last), the least the replicas from each position on
/// can add, the picks on the current path, the best complete picks, and nodes left.
struct Search {
    candidates: Vec<Vec<(Score, usize)>>,
    bound: Vec<Score>,
    picks: Vec<usize>,
    best: Option<(Score, Vec<usize>)>,
    nodes: usize,
}

impl Search {
    /// Where replica `i`'s current pick is in its candidates.
    fn position(&self, i: usize) -> usize {
        self.candidates[i]
            .iter()
            .position(|&(_, oi)| oi == self.picks[i])
            .unwrap_or(0)
    }
}

/// How an assignment changed, in `Assigner::outcome`'s terms: replicas placed per class,
/// then summed fallback positions, data latency where it ranks first, and cost (the last
/// three lower being better).
#[derive(Default)]
struct Change {
    placed: [i64; 4],
    fallback: i64,
    latency: i64,
    cost: i64,
}

/// What a round did to the assignment, in `Assigner::outcome`'s order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    Better,
    Same,
    Worse,
}

impl Change {
    fn verdict(&self) -> Verdict {
        let first = self
            .placed
            .iter()
            .copied()
            .chain([-self.fallback, -self.latency, -self.cost])
            .find(|&d| d != 0);
        match first {
            None => Verdict::Same,
            Some(d) if d > 0 => Verdict::Better,
            Some(_) => Verdict::Worse,
        }
    }
}

impl Assigner<'_> {
    /// Runs the ruin-and-recreate rounds (see the module documentation); true if the
    /// assignment got strictly better.
    pub(super) fn ruin_and_recreate(&mut self, order: &[u32]) -> bool {
        if self.ir.workloads.len() > RECREATE_MAX_WORKLOADS || self.ir.targets.len() < 2 {
            return false;
        }
        let rounds = (self.ir.workloads.len() * ROUNDS_PER_WORKLOAD).min(ROUNDS_MAX);
        let mut rng = SplitMix64(0x0005_EED0_FA11);
        let (mut better, mut since_better) = (false, 0);
        let start = self.out.slots.clone();
        self.journal.clear();
        let mut highest_short = Vec::new();
        for round in 0..rounds {
            since_better += 1;
            if since_better > PATIENCE {
                break;
            }
            // Where a class is left short, the search is for room for more of its replicas:
            // every fourth round ruins around a short workload of the highest such class,
            // every other round of each recreate places a short class smallest first, and the
            // branch and bound may visit more nodes.
            let short = self.short_classes(&mut highest_short);
            let seed = (round % 4 == 3).then_some(&highest_short[..]);
            let ruined = self.pick_ruin(&mut rng, seed);
            if ruined.is_empty() {
                break;
            }
            let smallest_first = if round % 4 >= 2 { short } else { [false; 4] };
            let nodes = if !highest_short.is_empty() {
                RECREATE_NODES_SHORT
            } else {
                RECREATE_NODES
            };
            let mut again = self.ruin(&ruined, order);
            if round % 2 == 1 {
                self.sort_for_recreate(&mut again, smallest_first);
                for (w, oi) in self.recreate_exact(&again, nodes) {
                    self.j_place(w, oi);
                }
            } else {
                self.recreate_order(&mut again, smallest_first, &mut rng);
                for w in again {
                    let w = w as usize;
                    if self.out.cap_block(self.ir, self.policy, w).is_some() {
                        continue;
                    }
                    if let Some(i) = self.choose(w, &mut 0, usize::MAX) {
                        self.j_place(w, i);
                    }
                }
            }
            match self.change_since(0).verdict() {
                Verdict::Better => {
                    better = true;
                    since_better = 0;
                    self.journal.clear();
                }
                Verdict::Same => self.journal.clear(),
                Verdict::Worse => self.undo_to(0),
            }
        }
        if !better {
            // Only rounds of equal outcome were kept: the plan stays as it was, so a search
            // that gains nothing changes nothing.
            self.adopt_slots(start);
        }
        better
    }

    /// Takes every replica on the targets `ruined` off (journaled); those replicas, and the
    /// missing ones of workloads short that have an option on a ruined target (room was
    /// freed there alone), as the workloads to place again, one entry per replica.
    fn ruin(&mut self, ruined: &[u32], order: &[u32]) -> Vec<u32> {
        let mut again: Vec<u32> = Vec::new();
        for &t in ruined {
            let holders: Vec<u32> = self.out.ledger.target_holders[t as usize]
                .iter()
                .map(|&(w, _)| w)
                .collect();
            for w in holders {
                let on: Vec<(u32, u32)> = self.out.slots[w as usize]
                    .iter()
                    .copied()
                    .filter(|&(oi, _)| self.out.options[w as usize][oi as usize].target == t)
                    .collect();
                for (oi, n) in on {
                    for _ in 0..n {
                        self.j_remove(w as usize, oi as usize);
                        again.push(w);
                    }
                }
            }
        }
        for &w in order {
            let missing = self.ir.workloads[w as usize]
                .replicas
                .saturating_sub(self.out.placed(w as usize));
            if missing > 0
                && self.out.options[w as usize]
                    .iter()
                    .any(|o| ruined.contains(&o.target))
            {
                let taken = again.iter().filter(|&&v| v == w).count() as u32;
                for _ in taken..missing {
                    again.push(w);
                }
            }
        }
        again
    }

    /// The targets one round ruins: a placed replica's, drawn at random — or, with a
    /// non-empty `seed` (short workloads, each with options), a target of one of them, both
    /// drawn at random — then targets of better-ranked options of replicas on the targets
    /// chosen so far.
    fn pick_ruin(&self, rng: &mut SplitMix64, seed: Option<&[u32]>) -> Vec<u32> {
        if let Some(short) = seed.filter(|s| !s.is_empty()) {
            let w = short[(rng.next() % short.len() as u64) as usize] as usize;
            let options = &self.out.options[w];
            let first = options[(rng.next() % options.len() as u64) as usize].target;
            return self.grow_ruin(first, rng);
        }
        let placed = || {
            self.out
                .slots
                .iter()
                .enumerate()
                .flat_map(|(w, s)| s.iter().map(move |&(oi, _)| (w, oi)))
        };
        let count = placed().count();
        if count == 0 {
            return Vec::new();
        }
        let Some((w, oi)) = placed().nth((rng.next() % count as u64) as usize) else {
            return Vec::new();
        };
        self.grow_ruin(self.out.options[w][oi as usize].target, rng)
    }

    /// The targets one round ruins from `first`: then targets of better-ranked options of
    /// replicas on the targets chosen so far, 2 to [`RUIN_TARGETS`] in all.
    fn grow_ruin(&self, first: u32, rng: &mut SplitMix64) -> Vec<u32> {
        let mut ruined = vec![first];
        let want = 2 + rng.next() % (RUIN_TARGETS - 1);
        for _ in 0..want * 4 {
            if ruined.len() as u64 >= want {
                break;
            }
            let t = ruined[(rng.next() % ruined.len() as u64) as usize];
            let holders = &self.out.ledger.target_holders[t as usize];
            if holders.is_empty() {
                continue;
            }
            let v = holders[(rng.next() % holders.len() as u64) as usize].0 as usize;
            let Some(worst) = self.out.slots[v]
                .iter()
                .filter(|(i, _)| self.out.options[v][*i as usize].target == t)
                .map(|&(i, _)| i as usize)
                .max()
            else {
                continue;
            };
            let better: Vec<u32> = self.out.options[v][..worst]
                .iter()
                .map(|o| o.target)
                .filter(|x| !ruined.contains(x))
                .collect();
            let pick = if better.is_empty() {
                (rng.next() % self.ir.targets.len() as u64) as u32
            } else {
                better[(rng.next() % better.len() as u64) as usize]
            };
            if !ruined.contains(&pick) {
                ruined.push(pick);
            }
        }
        ruined
    }

    /// Per class ([`class_slot`]), whether a workload of it is short where a packing could
    /// help — fewer replicas placed than asked, options, and no cap (quota, limit) that one
    /// more replica would exceed — and, into `highest`, those of the highest such class: there
    /// the recreates place the smallest replicas first, which fits the most of them, and the
    /// seeded ruins start at one of `highest`.
    fn short_classes(&self, highest: &mut Vec<u32>) -> [bool; 4] {
        let (mut short, mut highest_slot) = ([false; 4], 4);
        highest.clear();
        for w in 0..self.ir.workloads.len() {
            if !self.is_short(w) || self.out.cap_block(self.ir, self.policy, w).is_some() {
                continue;
            }
            let slot = class_slot(self.ir.workloads[w].class);
            short[slot] = true;
            if slot < highest_slot {
                highest_slot = slot;
                highest.clear();
            }
            if slot == highest_slot {
                highest.push(w as u32);
            }
        }
        short
    }

    /// Orders the replicas to place again: highest class first; within a class left short
    /// (`short`), smallest first (GPU units, then CPU, then memory: the most replicas fit);
    /// within any other, largest first or shuffled, as the round draws.
    fn recreate_order(&self, again: &mut [u32], short: [bool; 4], rng: &mut SplitMix64) {
        let ir = self.ir;
        let keys: Vec<u64> = again.iter().map(|_| rng.next()).collect();
        let mut keyed: Vec<(u64, u32)> = keys.into_iter().zip(again.iter().copied()).collect();
        let largest = rng.next().is_multiple_of(2);
        keyed.sort_by(|&(ka, a), &(kb, b)| {
            let (wa, wb) = (&ir.workloads[a as usize], &ir.workloads[b as usize]);
            let by_class = wb.class.cmp(&wa.class);
            let by_size = if short[class_slot(wa.class)] || largest {
                by_size(wa, wb, short[class_slot(wa.class)])
            } else {
                std::cmp::Ordering::Equal
            };
            by_class.then(by_size).then(ka.cmp(&kb))
        });
        for (slot, (_, w)) in again.iter_mut().zip(keyed) {
            *slot = w;
        }
    }

    /// Orders replicas to place again for [`Self::recreate_exact`]: highest class first, then
    /// largest — smallest within a class left short (`short`) — then by workload (a
    /// workload's replicas side by side).
    fn sort_for_recreate(&self, again: &mut [u32], short: [bool; 4]) {
        let ir = self.ir;
        again.sort_by(|&a, &b| {
            let (wa, wb) = (&ir.workloads[a as usize], &ir.workloads[b as usize]);
            let by_size = by_size(wa, wb, short[class_slot(wa.class)]);
            wb.class.cmp(&wa.class).then(by_size).then(a.cmp(&b))
        });
    }

    /// The best placement of the replicas `again` (workloads, a workload's replicas side by
    /// side) on the room the assignment leaves, by depth-first branch and bound over each
    /// replica's options that have room now (room only shrinks as the search places), within
    /// `nodes` nodes: fewest replicas left out per class (highest first), then least summed
    /// fallback position, data latency where it ranks first, and cost. The first dive is the
    /// greedy's (each replica on its best option with room). Returns `(workload, option)` per
    /// replica placed; the assignment is as it was.
    fn recreate_exact(&mut self, again: &[u32], nodes: usize) -> Vec<(usize, usize)> {
        let mut search = Search {
            candidates: Vec::with_capacity(again.len()),
            bound: vec![[0; SCORE]; again.len() + 1],
            picks: vec![LEFT_OUT; again.len()],
            best: None,
            nodes,
        };
        for &w in again {
            let w = w as usize;
            let mut list: Vec<(Score, usize)> =
                if self.out.cap_block(self.ir, self.policy, w).is_some() {
                    Vec::new()
                } else {
                    self.out.options[w]
                        .iter()
                        .enumerate()
                        .filter(|(_, o)| self.out.blocker(self, w, o).is_none())
                        .map(|(i, o)| (self.score(w, o), i))
                        .collect()
                };
            list.sort_unstable();
            let mut out = [0; SCORE];
            out[class_slot(self.ir.workloads[w].class)] = 1;
            list.push((out, LEFT_OUT));
            search.candidates.push(list);
        }
        for i in (0..again.len()).rev() {
            search.bound[i] = add(&search.bound[i + 1], &search.candidates[i][0].0);
        }
        self.branch(again, &mut search, 0, [0; SCORE]);
        let picks = search.best.map(|(_, p)| p).unwrap_or_default();
        again
            .iter()
            .zip(picks)
            .filter(|&(_, oi)| oi != LEFT_OUT)
            .map(|(&w, oi)| (w as usize, oi))
            .collect()
    }

    fn branch(&mut self, again: &[u32], s: &mut Search, i: usize, acc: Score) {
        if s.nodes == 0 {
            return;
        }
        s.nodes -= 1;
        if i == again.len() {
            if s.best.as_ref().is_none_or(|(b, _)| acc < *b) {
                s.best = Some((acc, s.picks.clone()));
            }
            return;
        }
        let w = again[i] as usize;
        // A workload's replicas are interchangeable: each takes an option no earlier in its
        // list than the replica before it.
        let from = if i > 0 && again[i - 1] as usize == w {
            s.position(i - 1)
        } else {
            0
        };
        for p in from..s.candidates[i].len() {
            let (score, oi) = s.candidates[i][p];
            let total = add(&acc, &score);
            if s.best
                .as_ref()
                .is_some_and(|(b, _)| add(&total, &s.bound[i + 1]) >= *b)
            {
                break;
            }
            if oi == LEFT_OUT {
                s.picks[i] = LEFT_OUT;
                self.branch(again, s, i + 1, total);
                continue;
            }
            let o = self.out.options[w][oi];
            if self.out.cap_block(self.ir, self.policy, w).is_some()
                || self.out.blocker(self, w, &o).is_some()
            {
                continue;
            }
            self.place(w, oi);
            s.picks[i] = oi;
            self.branch(again, s, i + 1, total);
            self.remove(w, oi);
            if s.nodes == 0 {
                break;
            }
        }
    }

    /// What one replica of `w` on `o` adds to a recreate's score.
    fn score(&self, w: usize, o: &super::Opt) -> Score {
        let (fallback, latency, cost) = self.terms(w, o);
        let mut s = [0; SCORE];
        s[4] = fallback;
        s[5] = latency;
        s[6] = cost;
        s
    }

    /// What the journal from `mark` on changed.
    fn change_since(&self, mark: usize) -> Change {
        let mut c = Change::default();
        for step in &self.journal[mark..] {
            let (w, oi, sign) = match *step {
                Step::Placed(w, oi) => (w as usize, oi as usize, 1),
                Step::Removed(w, oi) => (w as usize, oi as usize, -1),
            };
            let (fallback, latency, cost) = self.terms(w, &self.out.options[w][oi]);
            c.placed[class_slot(self.ir.workloads[w].class)] += sign;
            c.fallback += sign * fallback;
            c.latency += sign * latency;
            c.cost += sign * cost;
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::prepared;
    use super::super::{Assigner, build_options};
    use super::class_slot;
    use crate::ir::{Ir, WorkloadClass};
    use crate::testing::ir::IrBuilder;

    /// Runs `f` on a fresh assigner of `ir`, its policy evaluated at a fixed instant.
    fn with_assigner(ir: &Ir, f: impl FnOnce(&mut Assigner<'_>)) {
        let (index, matrix, policy) = prepared(ir);
        let options = build_options(ir, &index, &matrix, &policy);
        f(&mut Assigner::new(ir, &index, &policy, options));
    }

    #[test]
    fn the_exact_recreate_finds_the_packing_the_greedy_misses() {
        // `cheap` has 4 GPUs but 4 CPUs. Largest first, the greedy puts `big` (2 GPUs, 4
        // CPUs) on `cheap`, whose CPUs it then takes with 2 GPUs idle, and the three replicas
        // of `small` (1 GPU, 1 CPU) on `dear`: 2 cheap GPU hours and 3 dear ones. The branch
        // and bound puts the three small ones on `cheap` and `big` on `dear`: 3 and 2.
        let g = 1 << 30;
        let ir = IrBuilder::new()
            .workload("big", |w| w.gpu(2).cpu_mem(4, g))
            .workload("small", |w| w.gpu(1).cpu_mem(1, g).replicas(3))
            .target("cheap", |t| {
                t.pool("l4", "L4", 4).gpu_hour("1.00").cpu_mem(4, 64 * g)
            })
            .target("dear", |t| {
                t.pool("l4", "L4", 8).gpu_hour("3.00").cpu_mem(64, 64 * g)
            })
            .build();
        with_assigner(&ir, |a| {
            let mut again = vec![1, 1, 1, 0];
            a.sort_for_recreate(&mut again, [false; 4]);
            assert_eq!(again, [0, 1, 1, 1], "largest first");
            let target = |a: &Assigner<'_>, (w, oi): (usize, usize)| {
                ir.targets[a.out.options[w][oi].target as usize]
                    .name
                    .clone()
            };
            let placed = |a: &Assigner<'_>, picks: Vec<(usize, usize)>| -> Vec<String> {
                picks.into_iter().map(|p| target(a, p)).collect()
            };
            // The first dive alone (a node per replica, and the leaf) is the greedy's.
            let dive = a.recreate_exact(&again, again.len() + 1);
            assert_eq!(placed(a, dive), ["cheap", "dear", "dear", "dear"]);
            let exact = a.recreate_exact(&again, 1_000);
            assert_eq!(placed(a, exact), ["dear", "cheap", "cheap", "cheap"]);
            assert_eq!(
                a.out.placed(0) + a.out.placed(1),
                0,
                "the assignment is as it was"
            );
        });
    }

    #[test]
    fn a_workload_held_back_by_its_quota_is_not_short_for_the_search() {
        // Three workloads, each short of replicas on a 4-GPU pool: `capped` (production) only
        // by its team's quota of 2 GPUs, which no packing lifts; `exp` (experiment) and `dev`
        // (development) by room. The count rounds aim at the development class, the highest
        // left short where a packing could help.
        let g = 1 << 30;
        let ir = IrBuilder::new()
            .workload("capped", |w| {
                w.gpu(1)
                    .cpu_mem(1, g)
                    .replicas(4)
                    .team("research")
                    .class(WorkloadClass::Production)
            })
            .workload("exp", |w| {
                w.gpu(1)
                    .cpu_mem(1, g)
                    .replicas(2)
                    .class(WorkloadClass::Experiment)
            })
            .workload("dev", |w| {
                w.gpu(1)
                    .cpu_mem(1, g)
                    .replicas(2)
                    .class(WorkloadClass::Development)
            })
            .target("site", |t| {
                t.pool("l4", "L4", 4).gpu_hour("1.00").cpu_mem(64, 64 * g)
            })
            .quota("research", 2)
            .build();
        with_assigner(&ir, |a| {
            for (w, n) in [(0, 2), (2, 1), (1, 1)] {
                for _ in 0..n {
                    a.place(w, 0);
                }
            }
            assert!((0..3).all(|w| a.is_short(w)), "each has fewer than it asks");
            let mut highest = Vec::new();
            let short = a.short_classes(&mut highest);
            assert_eq!(
                highest,
                [2],
                "development, not the capped production workload"
            );
            let (production, development, experiment) = (
                class_slot(WorkloadClass::Production),
                class_slot(WorkloadClass::Development),
                class_slot(WorkloadClass::Experiment),
            );
            assert!(!short[production]);
            assert!(short[development] && short[experiment]);
        });
    }
}
