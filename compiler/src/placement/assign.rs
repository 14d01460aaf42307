//! Assignment: replicas onto (target, pool) slots, respecting capacity, caps, spread and
//! isolation, ranked by the workload's preferences.
//!
//! A fast heuristic in five phases, all deterministic (ties broken by IR index; no hashed
//! iteration anywhere):
//!
//! 1. **Greedy.** Workloads in priority order — class (production, staging, development,
//!    experiment), then most constrained first (fewest permitted targets), then name. Each
//!    replica goes to the best-ranked feasible option; among options ranked equal, the best
//!    fit (least capacity left over).
//! 2. **Repair.** For a workload left short, clear what blocks its options (a full pool, CPU or
//!    memory on a target, an isolated partner) by moving the holders' replicas to another of
//!    their feasible options; a holder of a lower class that cannot move is unplaced, and one
//!    of the same or a higher class may move to a full option of its own from which replicas
//!    of classes lower than the short workload's are unplaced.
//!    Moves that do not free enough are undone. Deeper: ejection chains and trades
//!    ([`chain`]), then, for what is still missing, the overflow search ([`relax`]): every
//!    replica placed with capacity, spread and isolation relaxed, moved until nothing is
//!    broken (weighted min-conflicts with pair moves and kicks), kept only if it places more
//!    replicas per class — as it ends, or after chains and trades from where it ended.
//! 3. **Improve.** Move replicas to strictly better-ranked options that became feasible, and
//!    *relocate*: move a replica to a cheaper full option by moving others away when that
//!    costs less than it saves, never worsening anyone's fallback or first-ranked latency.
//!    Then repair again (improvement frees capacity) and improve again.
//! 4. **Exchange** ([`exchange`]). At each target with GPUs to spare, cheapest first: give up
//!    one replica there (or none), fill the room with replicas of dearer targets, place the
//!    one given up at its cheapest option elsewhere; the best exchange that lowers the total
//!    cost is kept — the multi-resource packing moves of one workload at a time miss.
//! 5. **Repack** ([`repack`]). Where a class is left short, it and the classes below it are
//!    placed again smallest replicas first (two measures of size), kept only if that places
//!    more replicas per class; then improvement and exchanges again.
//!
//! Then settle: every rejection reason the plan gives is made true. An estate of up to
//! 2,000 workloads runs all of it from three orders ([`Construction`]) in parallel and keeps
//! the best outcome ([`Outcome`]: replicas per class, guards, cost).
//!
//! Quality against an exact MIP: `docs/performance.md` ("Quality against an exact solver").
//!
//! An *option* is one (target, pool) pair a workload may use: eligible, permitted, the pool
//! fits one replica and its accelerator is entitled. Its rank is (fallback position: 0 for a
//! target not listed as a fallback, then 1, 2, … in the list's order; objectives in
//! preference order); options are sorted by rank, then target, then pool.

// INVARIANT: every index is a dense id of the IR being placed (workload < `ir.workloads.len()`,
// target < `ir.targets.len()`, a pool < its target's pools) or a position in a table the solver
// sized from those counts when it built it (`EstateIndex`, `EligibilityMatrix`, `Assignment`'s
// options and slots, the ledgers); nothing from user text indexes here. Indexing is the hot
// path; the property tests and planted estates run it over generated estates.
#![allow(clippy::indexing_slicing)]

use super::eligibility::{
    EligibilityMatrix, NO_VARIANT, PoolFit, cpu_variant, gpu_units, replica_size,
};
use super::index::EstateIndex;
use super::policy::PolicyContext;
use crate::ir::{Ir, Money, Preference, WorkloadClass};
use rayon::prelude::*;
use std::cmp::Reverse;
use std::collections::BTreeSet;
use std::sync::Arc;

mod chain;
mod exchange;
mod recreate;
mod relax;
mod repack;

use relax::SearchOutcome;

/// Pool index meaning "no GPU pool" (a workload without GPUs).
pub const NO_POOL: u32 = u32::MAX;

/// One way to run one replica of a workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Opt {
    pub target: u32,
    /// Index in the target's pools, or [`NO_POOL`].
    pub pool: u32,
    /// Flat pool index ([`EstateIndex::pools`]), or [`NO_POOL`].
    pub flat_pool: u32,
    /// Variant of the workload's model, or [`NO_VARIANT`].
    pub variant: u16,
    /// 0 on a target that is not a fallback; `i + 1` on the `i`-th target of the placement's
    /// `fallback` list (an order of preference: each is used only when the targets ranked
    /// before it cannot take the replicas).
    pub fallback: u16,
    /// Objective values in the workload's preference order (lower is better).
    pub objectives: [i64; 2],
}

impl Opt {
    /// What preference ranks: fallbacks last, in their listed order, then the objectives.
    pub fn rank(&self) -> (u16, i64, i64) {
        (self.fallback, self.objectives[0], self.objectives[1])
    }
}

/// The objectives a workload ranks by, in order (`[lowest(cost)]` when it says none).
pub fn preferences(ir: &Ir, w: usize) -> Vec<Preference> {
    let mut prefs: Vec<Preference> = Vec::new();
    for p in &ir.workloads[w].placement.prefer {
        if !prefs.contains(p) {
            prefs.push(*p);
        }
    }
    if prefs.is_empty() {
        prefs.push(Preference::LowestCost);
    }
    prefs.truncate(2);
    prefs
}

/// Where target `t` stands in `w`'s `fallback` list: 0 when it is not listed, `i + 1` for
/// the `i`-th entry (the first listing counts).
pub fn fallback_position(w: &crate::ir::Workload, t: usize) -> u16 {
    w.placement
        .fallback
        .iter()
        .position(|f| f.index() == t)
        .map_or(0, |i| u16::try_from(i + 1).unwrap_or(u16::MAX))
}

/// Price of one replica for a day on target `t`: `gpu × gpu_hour × 24`.
pub fn replica_cost_per_day(ir: &Ir, w: usize, t: usize) -> Money {
    let gpu = i64::from(gpu_units(&ir.workloads[w]));
    let hour = ir.targets[t].cost.gpu_hour.unwrap_or_default().0;
    Money(hour.saturating_mul(gpu).saturating_mul(24))
}

/// One workload's options, sorted by rank; workloads whose options are identical share one
/// list ([`build_options`]).
pub type Options = Arc<[Opt]>;

/// Every option of every workload, sorted by rank, built in parallel.
///
/// Workloads that cannot differ in their options — the same permitted targets (their
/// eligibility and policy row), the same fit per pool kind, GPUs per replica, preferences,
/// fallback list, accelerators their entitlements allow, and what the objectives read (data
/// sets for latency, the model for a CPU variant) — share one list, built once for the first
/// of them (issue 22: a dense fleet has many such workloads and every list is long). The key
/// holds everything `workload_options` reads about the workload, so sharing cannot change a
/// list; equal keys are compared in full, never by hash alone.
pub fn build_options(
    ir: &Ir,
    index: &EstateIndex,
    matrix: &EligibilityMatrix,
    policy: &PolicyContext,
) -> Vec<Options> {
    let n = ir.workloads.len();
    let keys: Vec<OptionKey<'_>> = (0..n)
        .into_par_iter()
        .with_min_len(64)
        .map(|w| OptionKey::of(ir, index, matrix, policy, w))
        .collect();
    // The first workload of each key builds; the others point at it.
    let builder = super::classes::first_of_class(&keys);
    let built: Vec<Option<Options>> = (0..n)
        .into_par_iter()
        .with_min_len(4)
        .map(|w| {
            (builder[w] == w).then(|| Options::from(workload_options(ir, index, matrix, policy, w)))
        })
        .collect();
    builder
        .iter()
        .map(|&b| {
            built[b]
                .clone()
                .unwrap_or_else(|| Options::from(Vec::new()))
        })
        .collect()
}

/// An option list's `(target, option index)` pairs sorted by target, then index: a target's
/// options, and its first, found by binary search.
pub fn options_by_target(opts: &[Opt]) -> Vec<(u32, u32)> {
    let mut by_target: Vec<(u32, u32)> = opts
        .iter()
        .enumerate()
        .map(|(i, o)| (o.target, i as u32))
        .collect();
    by_target.sort_unstable();
    by_target
}

/// `f` of each workload's option list, computed once per distinct list (in parallel) and
/// handed to every workload that shares it.
pub fn per_list<T: Clone + Send + Sync>(
    options: &[Options],
    f: impl Fn(&[Opt]) -> T + Sync,
) -> Vec<T> {
    let lists: Vec<*const Opt> = options.iter().map(|o| o.as_ptr()).collect();
    let first = super::classes::first_of_class(&lists);
    let values: Vec<Option<T>> = (0..options.len())
        .into_par_iter()
        .map(|w| (first[w] == w).then(|| f(&options[w])))
        .collect();
    // INVARIANT: `first[w] <= w` and `values[first[w]]` is `Some`.
    first.iter().filter_map(|&i| values[i].clone()).collect()
}

/// Everything [`workload_options`] reads about workload `w`.
#[derive(PartialEq, Eq, Hash)]
struct OptionKey<'a> {
    /// The row by id: equal ids exactly when the rows are equal (`EligibilityMatrix`).
    row: u32,
    fits: &'a [PoolFit],
    gpu: u32,
    prefs: Vec<Preference>,
    fallback: &'a [crate::ir::TargetId],
    /// Accelerators (by pool kind) the workload's entitlements refuse.
    refused_kinds: Vec<u32>,
    /// Data set names, when an objective reads latency.
    data: &'a [u32],
    /// The model, when the workload takes no GPU (its CPU variant).
    model: Option<crate::ir::ModelId>,
}

impl<'a> OptionKey<'a> {
    fn of(
        ir: &'a Ir,
        index: &'a EstateIndex,
        matrix: &'a EligibilityMatrix,
        policy: &PolicyContext,
        w: usize,
    ) -> Self {
        let workload = &ir.workloads[w];
        let prefs = preferences(ir, w);
        let gpu = gpu_units(workload);
        let refused_kinds = index
            .kinds
            .iter()
            .enumerate()
            .filter(|(_, k)| !policy.accelerator_allowed(ir, w, k.accelerator))
            .map(|(i, _)| i as u32)
            .collect();
        OptionKey {
            row: matrix.row_id(w),
            fits: matrix.fits().row(w),
            gpu,
            data: if prefs.contains(&Preference::LowestDataLatency) {
                index.workload_data(w)
            } else {
                &[]
            },
            prefs,
            fallback: &workload.placement.fallback,
            refused_kinds,
            model: if gpu == 0 { workload.model } else { None },
        }
    }
}

fn workload_options(
    ir: &Ir,
    index: &EstateIndex,
    matrix: &EligibilityMatrix,
    policy: &PolicyContext,
    w: usize,
) -> Vec<Opt> {
    let workload = &ir.workloads[w];
    let prefs = preferences(ir, w);
    let gpu = gpu_units(workload);
    let mut opts = Vec::new();
    for (t, v) in matrix.row(w).iter().enumerate() {
        if !v.is_ok() {
            continue;
        }
        let mut objectives = [0i64; 2];
        for (slot, p) in objectives.iter_mut().zip(&prefs) {
            *slot = match p {
                Preference::LowestCost => replica_cost_per_day(ir, w, t).0,
                Preference::LowestDataLatency => index
                    .worst_data_latency(w, t)
                    .map_or(i64::MAX, |l| i64::try_from(l).unwrap_or(i64::MAX)),
            };
        }
        let fallback = fallback_position(workload, t);
        let base = Opt {
            target: t as u32,
            pool: NO_POOL,
            flat_pool: NO_POOL,
            variant: NO_VARIANT,
            fallback,
            objectives,
        };
        if gpu == 0 {
            opts.push(Opt {
                variant: cpu_variant(ir, workload).unwrap_or(NO_VARIANT),
                ..base
            });
            continue;
        }
        for (p, slot) in index.target_pools(t).iter().enumerate() {
            let PoolFit::Fits { variant } = matrix.fit(w, slot.kind) else {
                continue;
            };
            let Some(kind) = index.kinds.get(slot.kind as usize) else {
                continue;
            };
            if slot.units < gpu || !policy.accelerator_allowed(ir, w, kind.accelerator) {
                continue;
            }
            opts.push(Opt {
                pool: p as u32,
                flat_pool: index.flat_pool(t, p as u32) as u32,
                variant,
                ..base
            });
        }
    }
    opts.sort_by_key(|o| (o.rank(), o.target, o.pool));
    opts
}

/// What keeps a replica off an option right now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Block {
    /// `spread = per_target(n)`: the target already holds n replicas.
    SpreadTarget,
    /// `per_region(n)`: the region already holds n replicas.
    SpreadRegion,
    /// The pool holds a replica of this workload it must be isolated from.
    Isolation(u32),
    /// The pool has too few free GPUs (or MIG slices).
    Capacity,
    /// The target has too little free CPU.
    Cpu,
    /// The target has too little free memory.
    Memory,
}

/// Free and allocated capacity: GPUs per pool, CPU and memory per target, GPUs per cap.
#[derive(Clone, Debug, Default)]
pub struct CapacityLedger {
    /// Free units per flat pool.
    pub pool_free: Vec<u32>,
    /// Per flat pool, `(workload, units)` sorted by workload.
    pub holders: Vec<Vec<(u32, u32)>>,
    /// Per target, `(workload, replicas)` sorted by workload (what a CPU or memory repair
    /// may move away).
    pub target_holders: Vec<Vec<(u32, u32)>>,
    pub cpu_free: Vec<u64>,
    pub memory_free: Vec<u64>,
    /// GPUs held per cap (`PolicyContext::caps`).
    pub cap_used: Vec<u64>,
}

impl CapacityLedger {
    fn new(ir: &Ir, index: &EstateIndex, policy: &PolicyContext) -> Self {
        CapacityLedger {
            pool_free: index.pools.iter().map(|p| p.units).collect(),
            holders: vec![Vec::new(); index.pools.len()],
            target_holders: vec![Vec::new(); ir.targets.len()],
            cpu_free: ir.targets.iter().map(|t| t.cpu_millis).collect(),
            memory_free: ir.targets.iter().map(|t| t.memory).collect(),
            cap_used: vec![0; policy.caps.len()],
        }
    }

    fn holds(&self, flat_pool: u32, w: u32) -> bool {
        self.holders
            .get(flat_pool as usize)
            .is_some_and(|h| h.binary_search_by_key(&w, |(x, _)| *x).is_ok())
    }
}

/// The outcome of assignment.
#[derive(Clone, Debug, Default)]
pub struct Assignment {
    /// Per workload, its options sorted by rank.
    pub options: Vec<Options>,
    /// Per workload, `(option index, replicas)` sorted by option index.
    pub slots: Vec<Vec<(u32, u32)>>,
    pub ledger: CapacityLedger,
    /// Workloads in the order they were placed.
    pub order: Vec<u32>,
    /// Per workload, isolation partners (both directions), sorted.
    partners: Vec<Vec<u32>>,
}

/// Moves the repair and relocation may make, for `n` workloads (the exchange pass tops the
/// budget up to this again).
fn move_budget(n: usize) -> usize {
    16 * n + 1024
}

/// Options examined for best fit after the first feasible one of a rank.
const BEST_FIT_WINDOW: usize = 64;
/// Capacity-blocked options a repair tries per missing replica.
const REPAIR_OPTIONS: usize = 16;
/// Options the relocation improvement may examine: this many per workload, plus a base.
const SCAN_BUDGET_PER_WORKLOAD: usize = 200;
const SCAN_BUDGET_BASE: usize = 1_000_000;
/// Improvement passes over all workloads.
const IMPROVE_PASSES: usize = 3;
/// Overflow searches ([`relax`]) one repair pass runs in a row while each places more.
const RELAX_ROUNDS: usize = 3;
/// Blocked options a repair tries to clear by unplacing lower classes, per moved replica.
const DISPLACE_OPTIONS: usize = 4;
/// Cheaper blocked options a relocation improvement tries per replica.
const RELOCATION_OPTIONS: usize = 8;

/// What moving other workloads out of the way may cost them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Room {
    /// Repair: any feasible option (placing a missing replica outweighs any preference);
    /// a replica of a lower class that has none is unplaced.
    Repair,
    /// Improvement: no moved replica gets a worse guard ([`Assigner::guard`]), and the
    /// moved replicas together cost less extra per day than `saving`.
    Improve { saving: i64 },
}

/// The resource a blocked option lacks.
#[derive(Clone, Copy, Debug)]
enum Scarce {
    /// GPU units (or isolation) in a flat pool.
    Pool(u32),
    /// CPU or memory on a target.
    Target(u32),
}

impl Scarce {
    /// Whether a replica on `o` uses this resource.
    fn holds(self, o: &Opt) -> bool {
        match self {
            Scarce::Pool(p) => o.flat_pool == p,
            Scarce::Target(t) => o.target == t,
        }
    }
}

/// Per workload, the workloads it must not share a pool with (`isolate_from`, both
/// directions), sorted.
pub fn isolation_partners(ir: &Ir) -> Vec<Vec<u32>> {
    let n = ir.workloads.len();
    let mut partners = vec![Vec::new(); n];
    for (w, workload) in ir.workloads.iter().enumerate() {
        for other in &workload.placement.isolate_from {
            let o = other.index();
            if o < n && o != w {
                partners[w].push(o as u32);
                partners[o].push(w as u32);
            }
        }
    }
    for p in &mut partners {
        p.sort_unstable();
        p.dedup();
    }
    partners
}

/// Index of a class in a per-class tally, highest priority first.
pub(crate) fn class_slot(c: WorkloadClass) -> usize {
    match c {
        WorkloadClass::Production => 0,
        WorkloadClass::Staging => 1,
        WorkloadClass::Development => 2,
        WorkloadClass::Experiment => 3,
    }
}

/// Assigns every workload's replicas.
pub fn assign(
    ir: &Ir,
    index: &EstateIndex,
    matrix: &EligibilityMatrix,
    policy: &PolicyContext,
) -> Assignment {
    let options = build_options(ir, index, matrix, policy);
    let mut a = Assigner::new(ir, index, policy, options);
    if ir.workloads.len() > CONSTRUCTIONS_MAX_WORKLOADS {
        a.run();
        return a.out;
    }
    // The orders reach different packings where CPU or memory binds, and on a small estate
    // each costs little; they run in parallel, and the better outcome is kept (on a tie, the
    // earlier order), so the result does not depend on the threads.
    let runs: Vec<Assigner<'_>> = Construction::ALL
        .par_iter()
        .map(|&construction| {
            let mut run = a.clone();
            run.sort_for(construction);
            run.run();
            run
        })
        .collect();
    let mut best: Option<Assigner<'_>> = None;
    for run in runs {
        if best.as_ref().is_none_or(|b| run.outcome() > b.outcome()) {
            best = Some(run);
        }
    }
    if let Some(best) = best {
        a = best;
    }
    let order = a.out.order.clone();
    // Every run ended settled; only a search that changed the assignment needs it again.
    if a.ruin_and_recreate(&order) {
        a.settle(&order);
    }
    a.out
}

/// Estates of up to this many workloads are assigned from every [`Construction`]
/// ([`assign`]); larger ones from the first alone.
const CONSTRUCTIONS_MAX_WORKLOADS: usize = 2_000;

/// The orders the greedy places workloads in, each a whole assignment of its own on an
/// estate of up to [`CONSTRUCTIONS_MAX_WORKLOADS`] workloads. Every one is by class first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Construction {
    /// Most constrained first (fewest permitted targets), then name and index: what finds
    /// a full placement where one exists.
    Constrained,
    /// GPU units, CPU and memory per replica, largest first (first-fit decreasing).
    LargestFirst,
    /// GPUs per share of CPU and memory, highest first: the replicas a cheap target whose
    /// CPU or memory binds should hold.
    GpuDenseFirst,
}

impl Construction {
    const ALL: [Construction; 3] = [
        Construction::Constrained,
        Construction::LargestFirst,
        Construction::GpuDenseFirst,
    ];
}

/// What [`assign_given`] does after placing the counts it is given.
#[cfg(feature = "exact")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AfterGiven {
    /// Settles the assignment, as every search ends.
    Settle,
    /// Improves it for fallbacks, data latency and cost by the heuristic's own passes, which
    /// never give a replica up, then settles it.
    Improve,
}

/// The assignment that places `counts[w][i]` replicas of each workload `w` on its option `i`
/// of `options` (an exact solver's answer, within every constraint), then — as `after` says,
/// and always ending so — settled as every search ends: missing replicas placed where they
/// fit, each replica on the best-ranked option it can take, so every reason the plan gives is
/// true.
#[cfg(feature = "exact")]
pub fn assign_given(
    ir: &Ir,
    index: &EstateIndex,
    policy: &PolicyContext,
    options: Vec<Options>,
    counts: &[Vec<u32>],
    after: AfterGiven,
) -> Assignment {
    let mut a = Assigner::new(ir, index, policy, options);
    for (w, per_option) in counts.iter().enumerate() {
        for (oi, &n) in per_option.iter().enumerate() {
            for _ in 0..n {
                a.place(w, oi);
            }
        }
    }
    let order = a.out.order.clone();
    a.settle(&order);
    if after == AfterGiven::Improve {
        a.improve_all(&order);
        if a.exchange_all() {
            a.improve_all(&order);
        }
        a.ruin_and_recreate(&order);
        a.settle(&order);
    }
    a.out
}

impl<'a> Assigner<'a> {
    fn new(
        ir: &'a Ir,
        index: &'a EstateIndex,
        policy: &'a PolicyContext,
        options: Vec<Options>,
    ) -> Self {
        let n = ir.workloads.len();
        let partners = isolation_partners(ir);
        // Permitted targets per workload: the targets its options are on.
        let permitted: Vec<usize> = per_list(&options, |opts| {
            let mut targets: Vec<u32> = opts.iter().map(|o| o.target).collect();
            targets.sort_unstable();
            targets.dedup();
            targets.len()
        });
        let mut order: Vec<u32> = (0..n as u32).collect();
        order.sort_by(|&a, &b| {
            let (wa, wb) = (&ir.workloads[a as usize], &ir.workloads[b as usize]);
            wb.class
                .cmp(&wa.class)
                .then(permitted[a as usize].cmp(&permitted[b as usize]))
                .then(wa.name.cmp(&wb.name))
                .then(a.cmp(&b))
        });
        Assigner {
            ir,
            index,
            policy,
            out: Assignment {
                options,
                slots: vec![Vec::new(); n],
                ledger: CapacityLedger::new(ir, index, policy),
                order,
                partners,
            },
            move_budget: move_budget(n),
            chain_budget: chain::CHAIN_BUDGET_PER_WORKLOAD * n + chain::CHAIN_BUDGET_BASE,
            journal: Vec::new(),
            freed: 0,
            full_known: std::collections::HashMap::new(),
            scan_budget: SCAN_BUDGET_PER_WORKLOAD * n + SCAN_BUDGET_BASE,
            costs: ir
                .workloads
                .iter()
                .map(|w| i64::from(gpu_units(w)).saturating_mul(24))
                .collect(),
            gpu_hour: ir
                .targets
                .iter()
                .map(|t| t.cost.gpu_hour.unwrap_or_default().0)
                .collect(),
            latency_first: (0..n)
                .map(|w| preferences(ir, w).first() == Some(&Preference::LowestDataLatency))
                .collect(),
        }
    }
}

/// An assignment's outcome, greater is better ([`Assigner::outcome`]); compared field by
/// field in this order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Outcome {
    /// Replicas placed per class, highest priority first.
    placed: [i64; 4],
    /// Fallback positions, summed over the replicas placed.
    fallback: Reverse<i64>,
    /// Data latency of the replicas of workloads that rank it first, summed.
    latency: Reverse<i64>,
    /// Cost per day.
    cost: Reverse<i64>,
}

#[derive(Clone)]
struct Assigner<'a> {
    ir: &'a Ir,
    index: &'a EstateIndex,
    policy: &'a PolicyContext,
    out: Assignment,
    /// Moves the repair phase may still make (keeps the worst case bounded).
    move_budget: usize,
    /// Options the relocation improvement may still examine (keeps it bounded on large
    /// estates; deterministic, unlike a time limit).
    scan_budget: usize,
    /// Per workload, GPU units × 24: its price per day is this × the target's GPU hour.
    costs: Vec<i64>,
    /// Per target, the price of a GPU hour.
    gpu_hour: Vec<i64>,
    /// Per workload, whether it ranks data latency before cost.
    latency_first: Vec<bool>,
    /// Options the ejection chains and trades may still examine ([`chain`]).
    chain_budget: usize,
    /// What the current chain or trade changed, to undo it.
    journal: Vec<chain::Step>,
    /// How many times capacity has been freed (every [`Assigner::remove`]); between two
    /// frees capacity only shrinks, so an option with no room stays so.
    freed: u64,
    /// Per (option list, demand) ([`Assigner::demand_key`]): `(freed, n)`, the first `n`
    /// options having had no room for one replica ([`Assigner::skip_full`]) when `freed` was
    /// that count. Only trusted while no capacity has been freed since, so the improvement
    /// passes do not each walk every workload past the same full pools (issue 22).
    full_known: std::collections::HashMap<(usize, u64, u64), (u64, usize)>,
}

impl Assigner<'_> {
    fn run(&mut self) {
        let order = self.out.order.clone();
        // The first pass only places, so capacity only shrinks: an option a workload's demand
        // does not fit stays so for every later workload of the same option list and demand.
        // `full_prefix` remembers how far each such list is full, so a dense fleet's
        // workloads do not each walk past the same full pools (issue 22).
        let mut full_prefix = std::collections::HashMap::new();
        for &w in &order {
            let w = w as usize;
            let key = self.demand_key(w);
            let start = full_prefix.get(&key).copied().unwrap_or(0);
            let start = self.skip_full(w, start);
            self.greedy_from(w, start);
            full_prefix.insert(key, self.skip_full(w, start));
        }
        self.repair_all(&order);
        if self.short_workload(&order) && self.ir.workloads.len() <= repack::REPACK_MAX_WORKLOADS {
            // Over-subscribed: two ways on from here, and the better is kept — repacking the
            // classes left short first, and the passes as they run where every replica is
            // placed (then a repack at the end). Each place more on some estates; the
            // other's later repairs sometimes reach what the first's do not.
            let mut plain = self.clone();
            plain.finish(&order, false);
            self.finish(&order, true);
            if plain.outcome() > self.outcome() {
                *self = plain;
            }
        } else {
            self.finish(&order, false);
        }
        self.settle(&order);
    }

    /// The passes after the first repair: improvement, repair again, exchanges, and a repack
    /// where classes are still short — first as well, with `repack_first`.
    fn finish(&mut self, order: &[u32], repack_first: bool) {
        if repack_first {
            self.repack(order);
        }
        self.improve_all(order);
        // Improvements free capacity that replicas still missing may now use.
        if self.repair_all(order) {
            self.improve_all(order);
        }
        // Exchanges reach the multi-resource packing single moves do not; what they free
        // may let replicas improve further.
        if self.exchange_all() {
            self.improve_all(order);
        }
        // Once more from where the cost passes left the estate (they moved replicas of every
        // class); the replicas it places anew then get their cheaper options again.
        if self.repack(order) {
            self.improve_all(order);
            if self.exchange_all() {
                self.improve_all(order);
            }
        }
    }

    /// Whether some workload of `order` is short of replicas and has options.
    fn short_workload(&self, order: &[u32]) -> bool {
        order.iter().any(|&w| self.is_short(w as usize))
    }

    /// Whether workload `w` has fewer replicas placed than it asks for, and options where
    /// more could go.
    fn is_short(&self, w: usize) -> bool {
        self.out.is_short(self.ir, w)
    }

    /// How good the assignment is, greater is better: replicas placed per class (highest
    /// priority first), then, summed over the replicas placed and lower being better, their
    /// guards — fallback positions, then data latency where it ranks first — and their cost
    /// per day.
    fn outcome(&self) -> Outcome {
        let (mut fallback, mut latency, mut cost) = (0i64, 0i64, 0i64);
        for (w, slots) in self.out.slots.iter().enumerate() {
            for &(oi, k) in slots {
                let (f, l, c) = self.terms(w, &self.out.options[w][oi as usize]);
                let k = i64::from(k);
                fallback = fallback.saturating_add(f.saturating_mul(k));
                latency = latency.saturating_add(l.saturating_mul(k));
                cost = cost.saturating_add(c.saturating_mul(k));
            }
        }
        Outcome {
            placed: self.assignment_tally(),
            fallback: Reverse(fallback),
            latency: Reverse(latency),
            cost: Reverse(cost),
        }
    }

    /// Orders the workloads for `construction`; among equals, the order they are in (the
    /// first construction's, [`Assigner::new`]).
    fn sort_for(&mut self, construction: Construction) {
        let ir = self.ir;
        let by_class = |a: u32, b: u32| {
            ir.workloads[b as usize]
                .class
                .cmp(&ir.workloads[a as usize].class)
        };
        match construction {
            Construction::Constrained => {}
            Construction::LargestFirst => {
                let size = |w: u32| replica_size(&ir.workloads[w as usize]);
                self.out
                    .order
                    .sort_by(|&a, &b| by_class(a, b).then(size(b).cmp(&size(a))));
            }
            Construction::GpuDenseFirst => {
                // The estate's totals, at least 1 (an estate without any is all ties).
                let total = |values: &mut dyn Iterator<Item = f64>| values.sum::<f64>().max(1.0);
                let cpu = total(&mut ir.targets.iter().map(|t| t.cpu_millis as f64));
                let memory = total(&mut ir.targets.iter().map(|t| t.memory as f64));
                let units = total(&mut self.index.pools.iter().map(|p| f64::from(p.units)));
                let density = |w: u32| {
                    let wl = &ir.workloads[w as usize];
                    let gpus = f64::from(gpu_units(wl)) / units;
                    let rest =
                        wl.resources.cpu_millis as f64 / cpu + wl.resources.memory as f64 / memory;
                    gpus / rest.max(f64::MIN_POSITIVE)
                };
                self.out
                    .order
                    .sort_by(|&a, &b| by_class(a, b).then(density(b).total_cmp(&density(a))));
            }
        }
    }

    /// Ends the search where every rejection the plan gives is true: no workload left short
    /// has an option it could take, and no replica sits on an option ranked worse than one
    /// that could take it. Greedy placement and rank improvement until neither moves a
    /// replica; it ends because each step places one more replica or strictly improves one
    /// replica's rank without worsening any other.
    // INVARIANT: after `settle`, for every workload `w` and option `o` of `w`,
    // `blocker_with(w, o)` is `Some` when `w` is short (caps aside) or when `o` ranks better
    // than `w`'s worst-ranked replica. `Solved::unused_verdict` relies on it and the verifier
    // checks it (`check_rejections`).
    fn settle(&mut self, order: &[u32]) {
        loop {
            let mut moved = false;
            for &w in order {
                let w = w as usize;
                let before = self.out.placed(w);
                if before < self.ir.workloads[w].replicas {
                    self.greedy(w);
                    moved |= self.out.placed(w) > before;
                }
                moved |= self.improve(w);
            }
            if !moved {
                break;
            }
        }
    }

    /// Repairs every workload left short, in placement order, then the overflow searches; true
    /// if any got a replica.
    fn repair_all(&mut self, order: &[u32]) -> bool {
        let mut placed = self.repair_and_trade(order);
        // Each overflow search starts where the last one (and its second chance) left the
        // estate, so a few in a row reach packings one does not. Only while one ends near a
        // full placement: on an over-subscribed estate more rounds cost much and place little.
        for _ in 0..RELAX_ROUNDS {
            match self.relax(order) {
                SearchOutcome::Unchanged => break,
                SearchOutcome::PlacedMore => return true,
                SearchOutcome::PlacedMoreNearlyAll => placed = true,
            }
        }
        placed
    }

    /// Repairs (ejection chains included) every workload left short, in placement order, then
    /// trades; true if any got a replica.
    fn repair_and_trade(&mut self, order: &[u32]) -> bool {
        let mut placed = false;
        for &w in order {
            let w = w as usize;
            let before = self.out.placed(w);
            if before < self.ir.workloads[w].replicas {
                self.repair(w);
                placed |= self.out.placed(w) > before;
            }
        }
        placed | self.trade_all(order)
    }

    fn improve_all(&mut self, order: &[u32]) {
        for _ in 0..IMPROVE_PASSES {
            let mut moved = false;
            for &w in order {
                moved |= self.improve(w as usize);
            }
            for &w in order {
                moved |= self.improve_by_relocation(w as usize);
            }
            if !moved {
                break;
            }
        }
    }

    fn greedy(&mut self, w: usize) {
        self.greedy_from(w, 0);
    }

    /// [`Self::greedy`], every option of `w` before `cursor` known to be infeasible.
    fn greedy_from(&mut self, w: usize, mut cursor: usize) {
        let missing = self.ir.workloads[w].replicas - self.out.placed(w);
        for _ in 0..missing {
            if self.out.cap_block(self.ir, self.policy, w).is_some() {
                return;
            }
            let Some(choice) = self.choose(w, &mut cursor, usize::MAX) else {
                return;
            };
            self.place(w, choice);
        }
    }

    /// What makes two workloads' options full alike: the same list (hence the same GPUs per
    /// replica; the list's address, as a number, names it) and the same CPU and memory per
    /// replica.
    fn demand_key(&self, w: usize) -> (usize, u64, u64) {
        let r = &self.ir.workloads[w].resources;
        (
            self.out.options[w].as_ptr() as usize,
            r.cpu_millis,
            r.memory,
        )
    }

    /// The first option of `w` at or after `from` whose pool and target have room for one
    /// replica's GPUs, CPU and memory (what only shrinks while replicas are only placed).
    fn skip_full(&self, w: usize, from: usize) -> usize {
        self.skip_full_before(w, from, usize::MAX)
    }

    /// [`Self::skip_full`] looking no further than `end` (returned when every option before
    /// it from `from` on is full).
    fn skip_full_before(&self, w: usize, from: usize, end: usize) -> usize {
        let workload = &self.ir.workloads[w];
        let (gpu, r) = (gpu_units(workload), &workload.resources);
        let l = &self.out.ledger;
        let opts = &self.out.options[w];
        let end = end.min(opts.len());
        (from..end)
            .find(|&i| {
                let o = &opts[i];
                let t = o.target as usize;
                (o.flat_pool == NO_POOL || l.pool_free[o.flat_pool as usize] >= gpu)
                    && l.cpu_free[t] >= r.cpu_millis
                    && l.memory_free[t] >= r.memory
            })
            .unwrap_or(end)
    }

    /// The best feasible option of `w` at or after `*cursor` and before `limit`; moves the
    /// cursor to the first feasible one (everything before it stays infeasible while
    /// capacity only shrinks).
    fn choose(&self, w: usize, cursor: &mut usize, limit: usize) -> Option<usize> {
        let opts = &self.out.options[w];
        let end = opts.len().min(limit);
        let first = (*cursor..end).find(|&i| self.out.blocker(self, w, &opts[i]).is_none())?;
        *cursor = first;
        let rank = opts[first].rank();
        let mut best = (self.leftover(w, &opts[first]), first);
        for i in (first + 1..end)
            .take_while(|&i| opts[i].rank() == rank)
            .take(BEST_FIT_WINDOW)
        {
            if self.out.blocker(self, w, &opts[i]).is_none() {
                best = best.min((self.leftover(w, &opts[i]), i));
            }
        }
        Some(best.1)
    }

    /// Capacity left after placing one replica: GPUs in the pool, else CPU on the target.
    fn leftover(&self, w: usize, o: &Opt) -> u64 {
        let workload = &self.ir.workloads[w];
        let l = &self.out.ledger;
        if o.flat_pool == NO_POOL {
            l.cpu_free[o.target as usize].saturating_sub(workload.resources.cpu_millis)
        } else {
            u64::from(l.pool_free[o.flat_pool as usize].saturating_sub(gpu_units(workload)))
        }
    }

    fn place(&mut self, w: usize, oi: usize) {
        let o = self.out.options[w][oi];
        let r = &self.ir.workloads[w].resources;
        let units = gpu_units(&self.ir.workloads[w]);
        let l = &mut self.out.ledger;
        let t = o.target as usize;
        l.cpu_free[t] = l.cpu_free[t].saturating_sub(r.cpu_millis);
        l.memory_free[t] = l.memory_free[t].saturating_sub(r.memory);
        let th = &mut l.target_holders[t];
        match th.binary_search_by_key(&(w as u32), |(x, _)| *x) {
            Ok(i) => th[i].1 += 1,
            Err(i) => th.insert(i, (w as u32, 1)),
        }
        if o.flat_pool != NO_POOL {
            let p = o.flat_pool as usize;
            l.pool_free[p] = l.pool_free[p].saturating_sub(units);
            let h = &mut l.holders[p];
            match h.binary_search_by_key(&(w as u32), |(x, _)| *x) {
                Ok(i) => h[i].1 += units,
                Err(i) => h.insert(i, (w as u32, units)),
            }
        }
        for &c in &self.policy.workload_caps[w] {
            l.cap_used[c as usize] += u64::from(units);
        }
        let slots = &mut self.out.slots[w];
        match slots.binary_search_by_key(&(oi as u32), |(i, _)| *i) {
            Ok(i) => slots[i].1 += 1,
            Err(i) => slots.insert(i, (oi as u32, 1)),
        }
    }

    fn remove(&mut self, w: usize, oi: usize) {
        let o = self.out.options[w][oi];
        let r = &self.ir.workloads[w].resources;
        let units = gpu_units(&self.ir.workloads[w]);
        let l = &mut self.out.ledger;
        let t = o.target as usize;
        self.freed += 1;
        l.cpu_free[t] += r.cpu_millis;
        l.memory_free[t] += r.memory;
        let th = &mut l.target_holders[t];
        if let Ok(i) = th.binary_search_by_key(&(w as u32), |(x, _)| *x) {
            th[i].1 -= 1.min(th[i].1);
            if th[i].1 == 0 {
                th.remove(i);
            }
        }
        if o.flat_pool != NO_POOL {
            let p = o.flat_pool as usize;
            l.pool_free[p] += units;
            let h = &mut l.holders[p];
            if let Ok(i) = h.binary_search_by_key(&(w as u32), |(x, _)| *x) {
                h[i].1 -= units.min(h[i].1);
                if h[i].1 == 0 && units > 0 {
                    h.remove(i);
                }
            }
        }
        for &c in &self.policy.workload_caps[w] {
            let used = &mut l.cap_used[c as usize];
            *used = used.saturating_sub(u64::from(units));
        }
        let slots = &mut self.out.slots[w];
        if let Ok(i) = slots.binary_search_by_key(&(oi as u32), |(i, _)| *i) {
            slots[i].1 -= 1;
            if slots[i].1 == 0 {
                slots.remove(i);
            }
        }
    }

    fn repair(&mut self, w: usize) {
        let replicas = self.ir.workloads[w].replicas;
        while self.out.placed(w) < replicas && self.move_budget > 0 {
            if self.out.cap_block(self.ir, self.policy, w).is_some() {
                return;
            }
            if let Some(i) = self.choose(w, &mut 0, usize::MAX) {
                self.place(w, i);
                continue;
            }
            let blocked: Vec<usize> = (0..self.out.options[w].len())
                .filter(|&i| {
                    let o = self.out.options[w][i];
                    !matches!(
                        self.out.blocker(self, w, &o),
                        None | Some(Block::SpreadTarget | Block::SpreadRegion)
                    )
                })
                .take(REPAIR_OPTIONS)
                .collect();
            let freed = blocked
                .into_iter()
                .find(|&i| self.make_room(w, i, Room::Repair));
            match freed {
                Some(i) => self.place(w, i),
                None if self.chain(w) => {}
                None => return,
            }
        }
    }

    /// Places one more replica of `w` through an ejection chain ([`chain`]).
    fn chain(&mut self, w: usize) -> bool {
        let class = self.ir.workloads[w].class;
        let placed = self.insert(w, chain::CHAIN_DEPTH, class, &mut BTreeSet::new());
        self.journal.clear();
        placed
    }

    /// Trades ([`chain`]) for every workload still short, in placement order; true if any
    /// replica was placed.
    fn trade_all(&mut self, order: &[u32]) -> bool {
        let short_on = self.short_on(order);
        let mut placed = false;
        for &w in order {
            let w = w as usize;
            while self.out.placed(w) < self.ir.workloads[w].replicas && self.trade(w, &short_on) {
                self.journal.clear();
                placed = true;
            }
            self.journal.clear();
        }
        placed
    }

    /// Moves replicas of other workloads off the pool or target that blocks option `oi` of
    /// `w` until a replica of `w` fits there; undoes the moves and returns false when that is
    /// not possible within `room`'s terms. Only capacity, CPU, memory and isolation blocks
    /// can be cleared this way.
    fn make_room(&mut self, w: usize, oi: usize, room: Room) -> bool {
        let mark = self.journal.len();
        let cleared = self.clear_room(w, oi, room, &mut 0);
        // On success the moves stay; nothing will undo them, so the journal forgets them.
        self.journal.truncate(mark);
        cleared
    }

    /// [`make_room`]'s work, journaled: on success the moves stay in the journal (the
    /// caller may undo them) and `extra` has grown by what they cost per day; on failure
    /// this call's moves are undone and `extra` is as it was. `Room::Improve`'s `saving`
    /// bounds `extra` as a whole, so a caller moving several replicas can pass what all of
    /// them would save.
    fn clear_room(&mut self, w: usize, oi: usize, room: Room, extra: &mut i64) -> bool {
        let goal = self.out.options[w][oi];
        let l = &self.out.ledger;
        let (scarce, holders): (Scarce, Vec<u32>) = match self.out.blocker(self, w, &goal) {
            None => return true,
            Some(Block::Capacity) => (
                Scarce::Pool(goal.flat_pool),
                l.holders[goal.flat_pool as usize]
                    .iter()
                    .map(|(v, _)| *v)
                    .collect(),
            ),
            Some(Block::Isolation(p)) => (Scarce::Pool(goal.flat_pool), vec![p]),
            Some(Block::Cpu | Block::Memory) => (
                Scarce::Target(goal.target),
                l.target_holders[goal.target as usize]
                    .iter()
                    .map(|(v, _)| *v)
                    .collect(),
            ),
            Some(Block::SpreadTarget | Block::SpreadRegion) => return false,
        };
        let mark = self.journal.len();
        let extra_before = *extra;
        'holders: for v in holders.into_iter().filter(|&v| v as usize != w) {
            let v = v as usize;
            loop {
                match self.out.blocker(self, w, &goal) {
                    None => break 'holders,
                    Some(Block::SpreadTarget | Block::SpreadRegion) => break 'holders,
                    Some(_) => {}
                }
                if self.move_budget == 0 {
                    break 'holders;
                }
                let Some(from) = self.out.slots[v]
                    .iter()
                    .map(|(i, _)| *i as usize)
                    .find(|&i| scarce.holds(&self.out.options[v][i]))
                else {
                    continue 'holders;
                };
                let to = match self.relocation(v, from, scarce, room) {
                    Some((to, delta)) => {
                        if let Room::Improve { saving } = room
                            && extra.saturating_add(delta) >= saving
                        {
                            continue 'holders;
                        }
                        *extra = extra.saturating_add(delta);
                        Some(to)
                    }
                    // A replica that cannot move yields to a workload of a higher class.
                    None if room == Room::Repair
                        && self.ir.workloads[v].class < self.ir.workloads[w].class =>
                    {
                        None
                    }
                    // Or moves where replicas of a lower class than `w` yield to it.
                    None if room == Room::Repair => {
                        let below = self.ir.workloads[w].class;
                        match self.displace(v, from, scarce, below, w) {
                            Some(to) => Some(to),
                            None => continue 'holders,
                        }
                    }
                    None => continue 'holders,
                };
                self.j_remove(v, from);
                if let Some(to) = to {
                    self.j_place(v, to);
                }
                self.move_budget = self.move_budget.saturating_sub(1);
            }
        }
        if self.out.blocker(self, w, &goal).is_none() {
            return true;
        }
        self.undo_to(mark);
        *extra = extra_before;
        false
    }

    /// A repair's second step: an option of `v`, off `scarce`, that replicas of workloads
    /// of a class lower than `below` (other than `w`) can be unplaced from to make room for
    /// `v`'s replica now on `from`. The unplacements are journaled.
    fn displace(
        &mut self,
        v: usize,
        from: usize,
        scarce: Scarce,
        below: WorkloadClass,
        w: usize,
    ) -> Option<usize> {
        let n = self.out.options[v].len();
        self.scan_budget = self.scan_budget.saturating_sub(n);
        let mut tried = 0;
        for j in 0..n {
            let goal = self.out.options[v][j];
            if j == from || scarce.holds(&goal) {
                continue;
            }
            let (there, holders): (Scarce, Vec<u32>) = match self.out.blocker(self, v, &goal) {
                Some(Block::Capacity) => (
                    Scarce::Pool(goal.flat_pool),
                    self.out.ledger.holders[goal.flat_pool as usize]
                        .iter()
                        .map(|(u, _)| *u)
                        .collect(),
                ),
                Some(Block::Cpu | Block::Memory) => (
                    Scarce::Target(goal.target),
                    self.out.ledger.target_holders[goal.target as usize]
                        .iter()
                        .map(|(u, _)| *u)
                        .collect(),
                ),
                _ => continue,
            };
            if tried == DISPLACE_OPTIONS {
                break;
            }
            tried += 1;
            let mark = self.journal.len();
            for u in holders {
                let u = u as usize;
                if u == v || u == w || self.ir.workloads[u].class >= below {
                    continue;
                }
                while self.out.blocker(self, v, &goal).is_some() && self.move_budget > 0 {
                    let Some(at) = self.out.slots[u]
                        .iter()
                        .map(|(i, _)| *i as usize)
                        .find(|&i| there.holds(&self.out.options[u][i]))
                    else {
                        break;
                    };
                    self.j_remove(u, at);
                    self.move_budget -= 1;
                }
            }
            if self.out.blocker(self, v, &goal).is_none() {
                return Some(j);
            }
            self.undo_to(mark);
        }
        None
    }

    /// Where a replica of `v` on option `from` may go, off `scarce`, with the extra cost per
    /// day. Repair takes the best-ranked feasible option; improvement the cheapest one that
    /// keeps the replica's guard.
    fn relocation(
        &mut self,
        v: usize,
        from: usize,
        scarce: Scarce,
        room: Room,
    ) -> Option<(usize, i64)> {
        let opts = &self.out.options[v];
        self.scan_budget = self.scan_budget.saturating_sub(opts.len());
        let cost_from = self.cost(v, &opts[from]);
        let guard_from = self.guard(v, &opts[from]);
        let mut best: Option<(i64, usize)> = None;
        for (j, o) in opts.iter().enumerate() {
            if j == from || scarce.holds(o) || self.out.blocker(self, v, o).is_some() {
                continue;
            }
            let delta = self.cost(v, o).saturating_sub(cost_from);
            match room {
                Room::Repair => return Some((j, delta)),
                Room::Improve { .. } => {
                    if self.guard(v, o) <= guard_from && best.is_none_or(|(d, _)| delta < d) {
                        best = Some((delta, j));
                    }
                }
            }
        }
        best.map(|(d, j)| (j, d))
    }

    /// Price per day of one replica of `w` on option `o`.
    fn cost(&self, w: usize, o: &Opt) -> i64 {
        self.costs[w].saturating_mul(self.gpu_hour[o.target as usize])
    }

    /// What a cost-driven move must not make worse for a replica: its fallback position,
    /// then the data latency for a workload that ranks it before cost.
    fn guard(&self, w: usize, o: &Opt) -> (u16, i64) {
        let latency = if self.latency_first[w] {
            o.objectives[0]
        } else {
            0
        };
        (o.fallback, latency)
    }

    /// What one replica of `w` on `o` adds to [`Assigner::outcome`]'s sums, each lower being
    /// better: its fallback position, its data latency where latency ranks first, and its
    /// cost per day.
    fn terms(&self, w: usize, o: &Opt) -> (i64, i64, i64) {
        let (fallback, latency) = self.guard(w, o);
        (i64::from(fallback), latency, self.cost(w, o))
    }

    /// Moves replicas of `w` to better options whose pool or target is full, by moving other
    /// workloads' replicas away ([`relocate`]): to a cheaper option when the moves cost less
    /// than they save, or to one with a better guard (an earlier fallback; a lower latency
    /// where latency ranks first) whatever it costs, since no moved replica's guard gets
    /// worse. True if any moved.
    fn improve_by_relocation(&mut self, w: usize) -> bool {
        let mut moved = false;
        let mut k = self.out.slots[w].len();
        while k > 0 && self.scan_budget > 0 && self.move_budget > 0 {
            k -= 1;
            let Some(&(oi, count)) = self.out.slots[w].get(k) else {
                continue;
            };
            let oi = oi as usize;
            let here = self.out.options[w][oi];
            let (cost_here, guard_here) = (self.cost(w, &here), self.guard(w, &here));
            let n = self.out.options[w].len();
            self.scan_budget = self.scan_budget.saturating_sub(n);
            let candidates: Vec<usize> = (0..n)
                .filter(|&j| {
                    let o = &self.out.options[w][j];
                    let guard = self.guard(w, o);
                    j != oi
                        && (guard < guard_here
                            || (guard == guard_here && self.cost(w, o) < cost_here))
                })
                .take(RELOCATION_OPTIONS)
                .collect();
            if candidates
                .into_iter()
                .any(|j| self.relocate(w, oi, j, count))
            {
                moved = true;
                k = self.out.slots[w].len();
            }
        }
        moved
    }

    /// Moves up to `count` replicas of `w` from option `from` to the better option `to`,
    /// making room for each in turn ([`clear_room`]), and keeps the number of moves that
    /// gains most: for a better guard, all that fit; for a lower cost, the most saved net of
    /// what moving the others costs. Several replicas move together because one alone may
    /// not pay for the room: a replica holding much CPU moved off a cheap target can make
    /// room for several that hold little. True if any replica moved; otherwise nothing did.
    fn relocate(&mut self, w: usize, from: usize, to: usize, count: u32) -> bool {
        let (here, there) = (self.out.options[w][from], self.out.options[w][to]);
        let better_guard = self.guard(w, &there) < self.guard(w, &here);
        let saving_each = if better_guard {
            i64::MAX
        } else {
            self.cost(w, &here) - self.cost(w, &there)
        };
        let room = Room::Improve {
            saving: saving_each.saturating_mul(i64::from(count)),
        };
        let mark = self.journal.len();
        let mut extra = 0i64;
        // (journal length, net gain) of the best prefix of moves so far.
        let mut best: Option<(usize, i64)> = None;
        for m in 1..=i64::from(count) {
            if self.move_budget == 0 {
                break;
            }
            let before = self.journal.len();
            self.j_remove(w, from);
            if !self.clear_room(w, to, room, &mut extra) {
                self.undo_to(before);
                break;
            }
            self.j_place(w, to);
            // `clear_room` may have spent the budget to its last move.
            self.move_budget = self.move_budget.saturating_sub(1);
            let gain = if better_guard {
                m
            } else {
                saving_each.saturating_mul(m).saturating_sub(extra)
            };
            if gain > 0 && best.is_none_or(|(_, g)| gain > g) {
                best = Some((self.journal.len(), gain));
            }
        }
        match best {
            Some((keep, _)) => {
                self.undo_to(keep);
                self.journal.truncate(mark);
                true
            }
            None => {
                self.undo_to(mark);
                false
            }
        }
    }

    /// How many of `w`'s first options can have no room for one more replica once one of its
    /// replicas leaves option `oi` (at most `oi`): those full now (remembered per list and
    /// demand while no capacity is freed, [`Self::full_known`]), less those on `oi`'s target,
    /// where the removal frees GPUs, CPU and memory. A target's options are adjacent in the
    /// list (their rank is the target's: fallback position, cost, data latency; ties are
    /// sorted by target, then pool), so they start where the run of `oi`'s target does.
    fn full_before_removing(&mut self, w: usize, oi: usize) -> usize {
        let key = self.demand_key(w);
        let known = match self.full_known.get(&key) {
            Some(&(freed, n)) if freed == self.freed => n,
            _ => 0,
        };
        let full = self.skip_full_before(w, known.min(oi + 1), oi + 1);
        // A longer prefix known from a workload whose worst option ranks lower stays.
        self.full_known.insert(key, (self.freed, full.max(known)));
        let opts = &self.out.options[w];
        let here = opts[oi].target;
        let mut start = oi;
        while start > 0 && opts[start - 1].target == here {
            start -= 1;
        }
        full.min(start)
    }

    /// Moves replicas of `w` to strictly better-ranked feasible options; true if any moved.
    fn improve(&mut self, w: usize) -> bool {
        let mut moved = false;
        let mut k = self.out.slots[w].len();
        while k > 0 {
            k -= 1;
            let Some(&(oi, _)) = self.out.slots[w].get(k) else {
                continue;
            };
            let oi = oi as usize;
            let rank = self.out.options[w][oi].rank();
            let mut start = self.full_before_removing(w, oi);
            let freed = self.freed;
            self.remove(w, oi);
            debug_assert!(
                (0..start).all(|i| self.out.blocker(self, w, &self.out.options[w][i]).is_some()),
                "an option known full has room"
            );
            match self.choose(w, &mut start, oi + 1) {
                Some(j) if self.out.options[w][j].rank() < rank => {
                    self.place(w, j);
                    moved = true;
                    // Slots shifted; look at the worst one again.
                    k = self.out.slots[w].len();
                }
                _ => {
                    self.place(w, oi);
                    // The ledger is as it was before the removal: what was full still is.
                    self.freed = freed;
                }
            }
        }
        moved
    }
}

impl Assignment {
    /// Workloads `w` must not share a pool with (`isolate_from`, both directions), sorted.
    pub fn partners(&self, w: usize) -> &[u32] {
        self.partners.get(w).map_or(&[], Vec::as_slice)
    }

    /// Replicas of `w` placed.
    pub fn placed(&self, w: usize) -> u32 {
        self.slots[w].iter().map(|(_, n)| n).sum()
    }

    /// Replicas placed per class of `ir`'s workloads ([`class_slot`]: production first).
    pub fn placed_per_class(&self, ir: &Ir) -> [u32; 4] {
        let mut tally = [0; 4];
        for (w, wl) in ir.workloads.iter().enumerate() {
            tally[class_slot(wl.class)] += self.placed(w);
        }
        tally
    }

    /// Whether workload `w` of `ir` has fewer replicas placed than it asks for, and options
    /// where more could go.
    pub fn is_short(&self, ir: &Ir, w: usize) -> bool {
        self.placed(w) < ir.workloads[w].replicas && !self.options[w].is_empty()
    }

    /// Replicas of `w` on target `t`.
    pub fn on_target(&self, w: usize, t: u32) -> u32 {
        self.slots[w]
            .iter()
            .filter(|(i, _)| self.options[w][*i as usize].target == t)
            .map(|(_, n)| n)
            .sum()
    }

    pub fn in_region(&self, index: &EstateIndex, w: usize, region: u32) -> u32 {
        self.slots[w]
            .iter()
            .filter(|(i, _)| index.region[self.options[w][*i as usize].target as usize] == region)
            .map(|(_, n)| n)
            .sum()
    }

    /// The first cap one more replica of `w` would exceed.
    pub fn cap_block(&self, ir: &Ir, policy: &PolicyContext, w: usize) -> Option<u32> {
        let gpu = u64::from(gpu_units(&ir.workloads[w]));
        if gpu == 0 {
            return None;
        }
        policy.workload_caps[w]
            .iter()
            .copied()
            .find(|&c| self.ledger.cap_used[c as usize] + gpu > policy.caps[c as usize].max)
    }

    /// What keeps one more replica of `w` off option `o` (caps aside).
    fn blocker(&self, ctx: &Assigner<'_>, w: usize, o: &Opt) -> Option<Block> {
        self.blocker_with(ctx.ir, ctx.index, w, o)
    }

    /// Whether [`Self::blocker_with`] reads anything of `w` but its options and demand: a
    /// spread rule (its own replicas per target or region) or an isolation partner.
    pub fn blocks_by_own_placement(&self, ir: &Ir, w: usize) -> bool {
        let placement = &ir.workloads[w].placement;
        placement.per_target.is_some()
            || placement.per_region.is_some()
            || !self.partners[w].is_empty()
    }

    pub fn blocker_with(&self, ir: &Ir, index: &EstateIndex, w: usize, o: &Opt) -> Option<Block> {
        let workload = &ir.workloads[w];
        let placement = &workload.placement;
        if let Some(n) = placement.per_target
            && self.on_target(w, o.target) >= n
        {
            return Some(Block::SpreadTarget);
        }
        if let Some(n) = placement.per_region
            && self.in_region(index, w, index.region[o.target as usize]) >= n
        {
            return Some(Block::SpreadRegion);
        }
        let r = &workload.resources;
        if o.flat_pool != NO_POOL {
            if let Some(p) = self.partners[w]
                .iter()
                .find(|&&p| self.ledger.holds(o.flat_pool, p))
            {
                return Some(Block::Isolation(*p));
            }
            if self.ledger.pool_free[o.flat_pool as usize] < gpu_units(workload) {
                return Some(Block::Capacity);
            }
        }
        let t = o.target as usize;
        if self.ledger.cpu_free[t] < r.cpu_millis {
            return Some(Block::Cpu);
        }
        if self.ledger.memory_free[t] < r.memory {
            return Some(Block::Memory);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::dense;
    use crate::testing::ir::{IrBuilder, money};

    /// What the assignment starts from: `ir`'s index, and its eligibility with the policy
    /// applied at the tests' instant ([`dense::AT`]).
    pub(super) fn prepared(ir: &Ir) -> (EstateIndex, EligibilityMatrix, PolicyContext) {
        let index = EstateIndex::build(ir);
        let mut m = EligibilityMatrix::compute(ir, &index);
        let at: jiff::Timestamp = dense::AT.parse().unwrap_or_default();
        let p = PolicyContext::new(ir, at);
        p.apply(ir, &index, &mut m);
        (index, m, p)
    }

    fn run(ir: &Ir) -> (EstateIndex, Assignment) {
        let (index, m, p) = prepared(ir);
        let a = assign(ir, &index, &m, &p);
        (index, a)
    }

    fn targets_of(ir: &Ir, a: &Assignment, w: usize) -> Vec<(String, u32)> {
        a.slots[w]
            .iter()
            .map(|(i, n)| {
                let o = a.options[w][*i as usize];
                (ir.targets[o.target as usize].name.clone(), *n)
            })
            .collect()
    }

    /// Workloads that share an option list get exactly the list they would build alone,
    /// policy (entitlements refusing accelerators, deny rules) included.
    #[test]
    fn shared_options_are_each_workloads_own() {
        use crate::testing::ir::{EstateShape, estate};
        let mut shape = dense::DenseShape::new(400, 40);
        shape.requirement_sets = 7;
        let estates = [
            dense::dense_ir(shape),
            estate(
                3,
                EstateShape {
                    workloads: 300,
                    targets: 50,
                },
            ),
        ];
        for (i, ir) in estates.iter().enumerate() {
            let ir = ir.clone();
            let (index, m, p) = prepared(&ir);
            let shared = build_options(&ir, &index, &m, &p);
            let distinct: BTreeSet<*const Opt> = shared.iter().map(|o| o.as_ptr()).collect();
            if i == 0 {
                assert!(
                    distinct.len() < ir.workloads.len() / 2,
                    "the dense estate shares lists"
                );
            }
            for (w, options) in shared.iter().enumerate() {
                assert_eq!(
                    **options,
                    *workload_options(&ir, &index, &m, &p, w),
                    "workload {w}"
                );
            }
        }
    }

    #[test]
    fn cheapest_first_then_spills() {
        let ir = IrBuilder::new()
            .workload("w", |w| w.gpu(2).replicas(3))
            .target("dear", |t| t.pool("h", "H100", 8).gpu_hour("4.00"))
            .target("cheap", |t| t.pool("l4", "L4", 4).gpu_hour("1.00"))
            .build();
        let (_, a) = run(&ir);
        assert_eq!(
            targets_of(&ir, &a, 0),
            vec![("cheap".into(), 2), ("dear".into(), 1)]
        );
    }

    #[test]
    fn repair_moves_a_flexible_workload_out_of_the_way() {
        // `flex` is placed first (production) on the cheap pool it shares with `pinned`,
        // which can only use that pool; repair moves `flex` to the dear target.
        let ir = IrBuilder::new()
            .workload("flex", |w| w.gpu(4))
            .workload("pinned", |w| {
                w.gpu(4)
                    .class(crate::ir::WorkloadClass::Staging)
                    .candidates(&["cheap"])
            })
            .target("cheap", |t| t.pool("l4", "L4", 4).gpu_hour("1.00"))
            .target("dear", |t| t.pool("h", "H100", 4).gpu_hour("4.00"))
            .build();
        let (_, a) = run(&ir);
        assert_eq!(targets_of(&ir, &a, 0), vec![("dear".into(), 1)]);
        assert_eq!(targets_of(&ir, &a, 1), vec![("cheap".into(), 1)]);
    }

    #[test]
    fn spread_isolation_and_fallback() {
        let ir = IrBuilder::new()
            // Fewer permitted targets: placed first, on `a`'s only pool.
            .workload("train", |w| w.gpu(1).candidates(&["a"]))
            .workload("infer", |w| {
                w.gpu(1)
                    .replicas(3)
                    .per_target(1)
                    .isolate_from(&["train"])
                    .fallback(&["backup"])
            })
            .target("a", |t| t.pool("l4", "L4", 8).gpu_hour("1.00"))
            .target("b", |t| t.pool("l4", "L4", 8).gpu_hour("1.00"))
            .target("backup", |t| t.pool("l4", "L4", 8).gpu_hour("0.10"))
            .target("z", |t| t.pool("l4", "L4", 8).gpu_hour("2.00"))
            .build();
        let (_, a) = run(&ir);
        assert_eq!(targets_of(&ir, &a, 0), vec![("a".into(), 1)]);
        // `a` is isolated away, one per target, and the cheap fallback is used only for the
        // replica nothing else can take.
        assert_eq!(
            targets_of(&ir, &a, 1),
            vec![("b".into(), 1), ("z".into(), 1), ("backup".into(), 1)]
        );
    }

    #[test]
    fn a_lower_class_yields_in_a_chain() {
        // `prod` takes the cheap pool `stag` needs; it can only move to the dear pool, which
        // `exp` holds. Repair moves `prod` there and unplaces `exp`: staging before experiment.
        use crate::ir::WorkloadClass::{Experiment, Staging};
        let ir = IrBuilder::new()
            .workload("prod", |w| w.gpu(1).candidates(&["cheap", "dear"]))
            .workload("stag", |w| w.gpu(1).class(Staging).candidates(&["cheap"]))
            .workload("exp", |w| w.gpu(1).class(Experiment).candidates(&["dear"]))
            .target("cheap", |t| t.pool("l4", "L4", 1).gpu_hour("1.00"))
            .target("dear", |t| t.pool("l4", "L4", 1).gpu_hour("4.00"))
            .build();
        let (_, a) = run(&ir);
        assert_eq!(targets_of(&ir, &a, 0), vec![("dear".into(), 1)]);
        assert_eq!(targets_of(&ir, &a, 1), vec![("cheap".into(), 1)]);
        assert_eq!(targets_of(&ir, &a, 2), vec![]);
    }

    #[test]
    fn relocation_lowers_total_cost() {
        // Greedy puts `a` (first by name) on `cheap` and `b` on `dear` (5.00 a GPU hour);
        // moving `a` to `mid` (+0.10) frees `cheap` for `b` (−4.00).
        let ir = IrBuilder::new()
            .workload("a", |w| w.gpu(2).candidates(&["cheap", "mid"]))
            .workload("b", |w| w.gpu(2).candidates(&["cheap", "dear"]))
            .target("cheap", |t| t.pool("l4", "L4", 2).gpu_hour("1.00"))
            .target("mid", |t| t.pool("l4", "L4", 2).gpu_hour("1.10"))
            .target("dear", |t| t.pool("l4", "L4", 2).gpu_hour("5.00"))
            .build();
        let (_, a) = run(&ir);
        assert_eq!(targets_of(&ir, &a, 0), vec![("mid".into(), 1)]);
        assert_eq!(targets_of(&ir, &a, 1), vec![("cheap".into(), 1)]);
    }

    #[test]
    fn an_ejection_chain_places_what_one_and_two_step_repair_cannot() {
        // Production `x` sits on `ta` and `y` on `tb` (each the cheapest it has); staging `z`
        // can only use `ta`. Neither holder can yield to a lower class and neither has a free
        // option, so one- and two-step repair fail. The chain: `z` onto `ta`, `x` onto `tb`,
        // `y` onto `tc`.
        use crate::ir::WorkloadClass::Staging;
        let ir = IrBuilder::new()
            .workload("x", |w| w.gpu(1).candidates(&["ta", "tb"]))
            .workload("y", |w| w.gpu(1).candidates(&["tb", "tc"]))
            .workload("z", |w| w.gpu(1).class(Staging).candidates(&["ta"]))
            .target("ta", |t| t.pool("l4", "L4", 1).gpu_hour("1.00"))
            .target("tb", |t| t.pool("l4", "L4", 1).gpu_hour("2.00"))
            .target("tc", |t| t.pool("l4", "L4", 1).gpu_hour("3.00"))
            .build();
        let (_, a) = run(&ir);
        assert_eq!(targets_of(&ir, &a, 0), vec![("tb".into(), 1)]);
        assert_eq!(targets_of(&ir, &a, 1), vec![("tc".into(), 1)]);
        assert_eq!(targets_of(&ir, &a, 2), vec![("ta".into(), 1)]);
    }

    #[test]
    fn a_trade_places_two_small_replicas_instead_of_one_big_one() {
        // Same class, one 2-GPU pool: `big` (first by name) takes it whole; leaving `big` out
        // places both replicas of `small`, one replica missing instead of two.
        let ir = IrBuilder::new()
            .workload("big", |w| w.gpu(2))
            .workload("small", |w| w.gpu(1).replicas(2))
            .target("t", |t| t.pool("l4", "L4", 2).gpu_hour("1.00"))
            .build();
        let (_, a) = run(&ir);
        assert_eq!(targets_of(&ir, &a, 0), vec![]);
        assert_eq!(targets_of(&ir, &a, 1), vec![("t".into(), 2)]);
    }

    #[test]
    fn a_trade_never_costs_a_higher_class() {
        // `big` is production: two staging replicas are not worth one production replica.
        use crate::ir::WorkloadClass::Staging;
        let ir = IrBuilder::new()
            .workload("big", |w| w.gpu(2))
            .workload("small", |w| w.gpu(1).replicas(2).class(Staging))
            .target("t", |t| t.pool("l4", "L4", 2).gpu_hour("1.00"))
            .build();
        let (_, a) = run(&ir);
        assert_eq!(targets_of(&ir, &a, 0), vec![("t".into(), 1)]);
        assert_eq!(targets_of(&ir, &a, 1), vec![]);
    }

    /// Total cost per day of an assignment, in the IR's money units.
    fn cost_per_day(ir: &Ir, a: &Assignment) -> i64 {
        (0..ir.workloads.len())
            .flat_map(|w| {
                a.slots[w].iter().map(move |&(i, n)| {
                    let t = a.options[w][i as usize].target as usize;
                    replica_cost_per_day(ir, w, t).0 * i64::from(n)
                })
            })
            .sum()
    }

    #[test]
    fn an_exchange_fills_a_cheap_target_whose_cpu_binds() {
        // Greedy: production `hog` (1 GPU, 8 CPUs) and `lean_a` fill `cheap`'s 10 CPUs with
        // two of its four GPUs used; `lean_b` and `lean_c` go to `dear`. No single move pays:
        // moving `hog` to `dear` costs what one lean replica saves (relocation weighs one
        // workload's replicas at a time). The exchange gives `hog` up and takes both in: 3
        // GPUs on `cheap` instead of 2, the optimum.
        use crate::ir::WorkloadClass::Development;
        let g = 1 << 30;
        let mut b = IrBuilder::new().workload("hog", |w| w.gpu(1).cpu_mem(8, g));
        for name in ["lean_a", "lean_b", "lean_c"] {
            b = b.workload(name, |w| w.gpu(1).cpu_mem(2, g).class(Development));
        }
        let ir = b
            .target("cheap", |t| {
                t.pool("l4", "L4", 4).gpu_hour("1.00").cpu_mem(10, 64 * g)
            })
            .target("dear", |t| {
                t.pool("l4", "L4", 8).gpu_hour("3.00").cpu_mem(64, 64 * g)
            })
            .build();
        let (_, a) = run(&ir);
        assert_eq!(targets_of(&ir, &a, 0), vec![("dear".into(), 1)]);
        for w in 1..4 {
            assert_eq!(
                targets_of(&ir, &a, w),
                vec![("cheap".into(), 1)],
                "lean {w}"
            );
        }
        // 3 × 1.00 × 24 + 3.00 × 24 a day (8 × 24 · 1.00 before the exchange).
        assert_eq!(cost_per_day(&ir, &a), 6 * 24 * money("1.00").0);
    }

    #[test]
    fn a_short_class_is_repacked_smaller_replicas_first() {
        // One target: 4 GPUs, 4 CPUs. The greedy (same class, same targets: by name) places
        // `a` (3 GPUs, 1 CPU) and `b` (1 GPU, 3 CPUs), which fill it, and none of `c`'s three
        // (1 GPU, 1 CPU each). Giving up either alone leaves room for one replica of `c`
        // (the other resource binds): no trade gains. Placing the class again, fewest GPUs
        // per replica first, places all three of `c`: three replicas instead of two.
        use crate::ir::WorkloadClass::Experiment;
        let g = 1 << 30;
        let ir = IrBuilder::new()
            .workload("a", |w| w.gpu(3).cpu_mem(1, g).class(Experiment))
            .workload("b", |w| w.gpu(1).cpu_mem(3, g).class(Experiment))
            .workload("c", |w| {
                w.gpu(1).cpu_mem(1, g).replicas(3).class(Experiment)
            })
            .target("only", |t| {
                t.pool("l4", "L4", 4).gpu_hour("1.00").cpu_mem(4, 64 * g)
            })
            .build();
        let (_, a) = run(&ir);
        assert_eq!(a.placed(2), 3, "all of `c`");
        assert_eq!(
            a.placed(0) + a.placed(1),
            0,
            "neither `a` nor `b` fits beside them"
        );
    }
}
