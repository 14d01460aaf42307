//! Deeper repair moves, for replicas the one- and two-step repair cannot place:
//!
//! - **Ejection chains** ([`Assigner::insert`]): place a replica of `w` on a full option by
//!   evicting one replica of a holder, which is then placed the same way elsewhere, and so on
//!   to a bounded depth — an augmenting path over (replica → option) moves, generalised to GPU
//!   units, CPU, memory, caps, spread and isolation (every placement is checked by the same
//!   `blocker` as the greedy's). A resource (pool, or target for CPU and memory) is entered at
//!   most once per search, like the visited set of a max-flow augmenting path. A chain may end
//!   by leaving out a replica of a class lower than the one it started for.
//! - **Trades** ([`Assigner::trade`]): unplace one replica of a workload of the same or a lower
//!   class to make room for several missing replicas (two 1-GPU replicas for one 2-GPU one),
//!   kept only when the unplaced replicas per class improve lexicographically (production
//!   first), after the unplaced replica had its own chance to move.
//!
//! Both undo everything they did when they fail, through a journal of placements. The work
//! they may do is bounded by a budget of options examined that scales with the estate, never
//! by time, so the result is deterministic.

// INVARIANT: every index is a dense id of the IR being placed (workload < `ir.workloads.len()`,
// target < `ir.targets.len()`, a pool < its target's pools) or a position in a table the solver
// sized from those counts when it built it (`EstateIndex`, `EligibilityMatrix`, `Assignment`'s
// options and slots, the ledgers); nothing from user text indexes here. Indexing is the hot
// path; the property tests and planted estates run it over generated estates.
#![allow(clippy::indexing_slicing)]

use super::{Assigner, Block, NO_POOL, Opt, Scarce, class_slot};
use crate::ir::WorkloadClass;
use std::collections::{BTreeMap, BTreeSet};

/// Evictions an ejection chain may make in a row.
pub(super) const CHAIN_DEPTH: usize = 4;
/// Blocked options a chain step tries per workload.
const CHAIN_OPTIONS: usize = 8;
/// Holders a chain step tries per blocked option.
const CHAIN_HOLDERS: usize = 8;
/// Replicas one chain step may evict to fit one replica.
const CHAIN_EVICTIONS: usize = 3;
/// Holders a trade tries to unplace per blocked option.
const TRADE_HOLDERS: usize = 8;
/// Options the chains and trades may examine: this many per workload, plus a base.
pub(super) const CHAIN_BUDGET_PER_WORKLOAD: usize = 400;
pub(super) const CHAIN_BUDGET_BASE: usize = 200_000;

/// One change to the assignment, to be undone in reverse order.
#[derive(Clone, Copy, Debug)]
pub(super) enum Step {
    Placed(u32, u32),
    Removed(u32, u32),
}

/// A resource a chain enters: GPU units of a flat pool, or CPU and memory of a target.
pub(super) type Key = (bool, u32);

/// Per resource, the workloads still short of replicas that have an option on it, in
/// placement order: who may fill the room a trade makes.
pub(super) type ShortOn = BTreeMap<Key, Vec<u32>>;

fn key(s: Scarce) -> Key {
    match s {
        Scarce::Pool(p) => (true, p),
        Scarce::Target(t) => (false, t),
    }
}

/// Whether a change of placed replicas per class (highest priority first) is an improvement:
/// the first class that changes gains.
pub(super) fn improves(delta: &[i64; 4]) -> bool {
    delta.iter().find(|&&d| d != 0).is_some_and(|&d| d > 0)
}

impl Assigner<'_> {
    pub(super) fn j_place(&mut self, w: usize, oi: usize) {
        self.place(w, oi);
        self.journal.push(Step::Placed(w as u32, oi as u32));
    }

    pub(super) fn j_remove(&mut self, w: usize, oi: usize) {
        self.remove(w, oi);
        self.journal.push(Step::Removed(w as u32, oi as u32));
    }

    /// Undoes the journal back to `mark`.
    pub(super) fn undo_to(&mut self, mark: usize) {
        while self.journal.len() > mark {
            match self.journal.pop() {
                Some(Step::Placed(w, oi)) => self.remove(w as usize, oi as usize),
                Some(Step::Removed(w, oi)) => self.place(w as usize, oi as usize),
                None => break,
            }
        }
    }

    /// The resource that blocks option `o` of `w`, when evicting holders could clear it.
    fn scarce_of(&self, w: usize, o: &Opt) -> Option<Scarce> {
        match self.out.blocker(self, w, o) {
            Some(Block::Capacity) if o.flat_pool != NO_POOL => Some(Scarce::Pool(o.flat_pool)),
            Some(Block::Cpu | Block::Memory) => Some(Scarce::Target(o.target)),
            _ => None,
        }
    }

    /// Workloads holding `s`, in index order.
    fn holders_of(&self, s: Scarce) -> Vec<u32> {
        let l = &self.out.ledger;
        let list = match s {
            Scarce::Pool(p) => &l.holders[p as usize],
            Scarce::Target(t) => &l.target_holders[t as usize],
        };
        list.iter().map(|(v, _)| *v).collect()
    }

    /// The option of a replica of `v` on `s`.
    fn slot_on(&self, v: usize, s: Scarce) -> Option<usize> {
        self.out.slots[v]
            .iter()
            .map(|(i, _)| *i as usize)
            .find(|&i| s.holds(&self.out.options[v][i]))
    }

    /// Places one more replica of `w` through an ejection chain of at most `depth` evictions;
    /// a replica evicted from a workload of a class lower than `root` may stay unplaced.
    /// Changes are journaled; on failure everything this call did is undone.
    pub(super) fn insert(
        &mut self,
        w: usize,
        depth: usize,
        root: WorkloadClass,
        visited: &mut BTreeSet<Key>,
    ) -> bool {
        // A trade may already have put an unplaced replica back while filling the room.
        if self.out.placed(w) >= self.ir.workloads[w].replicas
            || self.out.cap_block(self.ir, self.policy, w).is_some()
        {
            return false;
        }
        if let Some(i) = self.choose(w, &mut 0, usize::MAX) {
            self.j_place(w, i);
            return true;
        }
        let n = self.out.options[w].len();
        if depth == 0 || self.chain_budget < n {
            return false;
        }
        self.chain_budget -= n;
        let mut tried = 0;
        for j in 0..n {
            let goal = self.out.options[w][j];
            let Some(scarce) = self.scarce_of(w, &goal) else {
                continue;
            };
            if !visited.insert(key(scarce)) {
                continue;
            }
            if tried == CHAIN_OPTIONS {
                break;
            }
            tried += 1;
            let first: Vec<u32> = self.holders_of(scarce);
            for &v in first.iter().take(CHAIN_HOLDERS) {
                let v = v as usize;
                if v == w {
                    continue;
                }
                let mark = self.journal.len();
                if let Some(evicted) = self.evict_for(w, &goal, v) {
                    self.j_place(w, j);
                    let mut all = true;
                    for u in evicted {
                        let lower = self.ir.workloads[u].class < root;
                        if !(self.insert(u, depth - 1, root, visited) || lower) {
                            all = false;
                            break;
                        }
                    }
                    if all {
                        return true;
                    }
                }
                self.undo_to(mark);
            }
        }
        false
    }

    /// Evicts one replica of `v` from what blocks option `goal` of `w`, then one of each
    /// further holder of whatever still blocks it (at most [`CHAIN_EVICTIONS`] in all), until
    /// `w` fits; the workloads evicted (journaled), or `None` (the evictions stay journaled).
    fn evict_for(&mut self, w: usize, goal: &Opt, v: usize) -> Option<Vec<usize>> {
        let mut evicted: Vec<usize> = Vec::new();
        let mut next = Some(v);
        while let Some(scarce) = self.scarce_of(w, goal) {
            if evicted.len() == CHAIN_EVICTIONS {
                return None;
            }
            let u = match next.take() {
                Some(u) => u,
                None => self
                    .holders_of(scarce)
                    .into_iter()
                    .map(|u| u as usize)
                    .find(|&u| u != w && !evicted.contains(&u))?,
            };
            let from = self.slot_on(u, scarce)?;
            self.j_remove(u, from);
            evicted.push(u);
        }
        self.out.blocker(self, w, goal).is_none().then_some(evicted)
    }

    /// Places missing replicas by unplacing one replica of another workload of `w`'s class or
    /// a lower one, when the replicas placed per class improve; true if any were placed.
    pub(super) fn trade(&mut self, w: usize, short_on: &ShortOn) -> bool {
        let class = self.ir.workloads[w].class;
        let n = self.out.options[w].len();
        if self.chain_budget < n {
            return false;
        }
        self.chain_budget -= n;
        let mut seen: BTreeSet<Key> = BTreeSet::new();
        let mut tried = 0;
        for j in 0..n {
            let goal = self.out.options[w][j];
            let Some(scarce) = self.scarce_of(w, &goal) else {
                continue;
            };
            if !seen.insert(key(scarce)) {
                continue;
            }
            if tried == CHAIN_OPTIONS {
                break;
            }
            tried += 1;
            // Largest first: a bigger replica frees room for more.
            let mut victims: Vec<u32> = self
                .holders_of(scarce)
                .into_iter()
                .filter(|&v| v as usize != w && self.ir.workloads[v as usize].class <= class)
                .collect();
            victims.sort_by_key(|&v| {
                let wl = &self.ir.workloads[v as usize];
                (
                    wl.class,
                    std::cmp::Reverse(super::gpu_units(wl)),
                    std::cmp::Reverse(wl.resources.cpu_millis),
                    v,
                )
            });
            for v in victims.into_iter().take(TRADE_HOLDERS) {
                let v = v as usize;
                let Some(from) = self.slot_on(v, scarce) else {
                    continue;
                };
                let mark = self.journal.len();
                self.j_remove(v, from);
                let mut delta = [0i64; 4];
                delta[class_slot(self.ir.workloads[v].class)] -= 1;
                let fillers = short_on.get(&key(scarce)).map_or(&[][..], Vec::as_slice);
                for &u in std::iter::once(&(w as u32)).chain(fillers) {
                    let u = u as usize;
                    if self.ir.workloads[u].class < class {
                        continue;
                    }
                    while self.out.placed(u) < self.ir.workloads[u].replicas
                        && self.out.cap_block(self.ir, self.policy, u).is_none()
                    {
                        let Some(i) = self.fit_on(u, scarce) else {
                            break;
                        };
                        self.j_place(u, i);
                        delta[class_slot(self.ir.workloads[u].class)] += 1;
                    }
                }
                let mut visited = BTreeSet::from([key(scarce)]);
                if self.insert(v, CHAIN_DEPTH - 1, class, &mut visited) {
                    delta[class_slot(self.ir.workloads[v].class)] += 1;
                }
                if improves(&delta) {
                    return true;
                }
                self.undo_to(mark);
            }
        }
        false
    }

    /// The workloads of `order` still short of replicas, indexed by the resources of their
    /// options.
    pub(super) fn short_on(&self, order: &[u32]) -> ShortOn {
        let mut out = ShortOn::new();
        for &w in order {
            if self.out.placed(w as usize) >= self.ir.workloads[w as usize].replicas {
                continue;
            }
            for o in self.out.options[w as usize].iter() {
                let mut keys = vec![key(Scarce::Target(o.target))];
                if o.flat_pool != NO_POOL {
                    keys.push(key(Scarce::Pool(o.flat_pool)));
                }
                for k in keys {
                    let list = out.entry(k).or_default();
                    if list.last() != Some(&w) {
                        list.push(w);
                    }
                }
            }
        }
        out
    }

    /// A feasible option of `u` on resource `s`, the first in rank order.
    fn fit_on(&mut self, u: usize, s: Scarce) -> Option<usize> {
        let n = self.out.options[u].len();
        self.chain_budget = self.chain_budget.saturating_sub(n);
        (0..n).find(|&i| {
            let o = &self.out.options[u][i];
            s.holds(o) && self.out.blocker(self, u, o).is_none()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn improvement_is_lexicographic_by_class() {
        assert!(improves(&[0, 0, 1, -5]));
        assert!(!improves(&[0, -1, 2, 0]));
        assert!(!improves(&[0, 0, 0, 0]));
        assert!(improves(&[0, 0, 0, 1]));
    }
}
