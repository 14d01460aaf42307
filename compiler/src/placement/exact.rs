//! Exact assignment (`berth plan --exact`): the assignment stage as a mixed-integer program,
//! solved by HiGHS, for estates small enough to solve in the time given.
//!
//! One integer per option (replicas of a workload on a target and pool, the options the
//! heuristic ranks: every eligible, permitted placement); rows for GPU units per pool, CPU and
//! memory per target, GPUs per cap, replicas per workload, `per_target` per (workload,
//! target), `per_region` per (workload, region), and isolation (a binary per (workload, pool)
//! used; two isolated workloads never both). Solved lexicographically, each stage keeping the
//! optimum of the ones before: replicas placed class by class (production first), replicas
//! on fallbacks weighted by their position, data latency of the workloads that rank it first,
//! then cost per day. The answer is then settled as the heuristic's is (missing replicas where
//! they fit, each replica on the best-ranked option it can take), so every reason the plan
//! gives is true, and the plan goes through the same verifier.
//!
//! When the estate is larger than [`MAX_OPTIONS`], the heuristic's assignment is used; when a
//! stage is not solved to optimality within the time limit, the assignment made without
//! `--exact` ([`raise_replicas`]); [`ExactOutcome`] says which and why. Only a time limit
//! makes the outcome depend on the machine; the plan is then the one made without `--exact`.
//!
//! [`raise_replicas`], the default assignment's second half, uses the same program's replica
//! stages alone, from the heuristic's assignment, bounded by a node limit rather than a
//! clock, so its plans never depend on the machine (`docs/placement.md`, "Replicas raised by
//! HiGHS").

// INVARIANT: every index is a dense id of the IR being placed or a position in a table sized
// from it (options per workload, flat pools, caps), as in the rest of the engine.
#![allow(clippy::indexing_slicing)]

use super::assign::{
    self, AfterGiven, Assignment, NO_POOL, Opt, build_options, class_slot, isolation_partners,
    replica_cost_per_day,
};
use super::eligibility::{EligibilityMatrix, gpu_units};
use super::index::EstateIndex;
use super::policy::PolicyContext;
use crate::ir::{Ir, Preference, WorkloadClass};
use highs::{Col, HighsModelStatus, RowProblem, Sense};
use std::collections::{BTreeMap, BTreeSet};

/// Options (placement variables) beyond which the exact mode does not try.
pub const MAX_OPTIONS: usize = 20_000;

/// How the exact mode ended.
#[derive(Clone, Debug, PartialEq)]
pub enum ExactOutcome {
    /// Every stage solved to optimality.
    Optimal,
    /// The heuristic's assignment was used: the estate has more options than [`MAX_OPTIONS`].
    TooLarge { options: usize },
    /// The default assignment was used (the heuristic's, its replicas raised where HiGHS
    /// finds more within a node limit: [`raise_replicas`]): HiGHS did not prove a stage
    /// optimal in time.
    NotSolved { stage: &'static str },
    /// The heuristic's plan was used: the exact one did not pass the verifier (a bug in
    /// berth; the number of violations).
    Unverified { violations: usize },
}

impl std::fmt::Display for ExactOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExactOutcome::Optimal => f.write_str("exact: every stage solved to optimality (HiGHS)"),
            ExactOutcome::TooLarge { options } => write!(
                f,
                "exact: {options} placement options, more than {MAX_OPTIONS}; the heuristic's plan is used"
            ),
            ExactOutcome::NotSolved { stage } => write!(
                f,
                "exact: HiGHS did not prove the `{stage}` stage optimal within the time limit; the plan is the one made without `--exact`"
            ),
            ExactOutcome::Unverified { violations } => write!(
                f,
                "exact: the exact plan did not pass the verifier ({violations} violations, a bug in berth); the heuristic's plan is used"
            ),
        }
    }
}

/// The assignment, exact when it can be.
pub fn assign_exact(
    ir: &Ir,
    index: &EstateIndex,
    matrix: &EligibilityMatrix,
    policy: &PolicyContext,
    time_limit_s: f64,
) -> (Assignment, ExactOutcome) {
    let options = build_options(ir, index, matrix, policy);
    let n: usize = options.iter().map(|o| o.len()).sum();
    if n > MAX_OPTIONS {
        return (
            assign::assign(ir, index, matrix, policy),
            ExactOutcome::TooLarge { options: n },
        );
    }
    let model = Model::new(ir, index, policy, &options, Goals::Whole);
    match model.solve(Limit::Seconds(time_limit_s), None) {
        Ok((solution, None)) => {
            let counts = model.counts(&solution);
            (
                assign::assign_given(ir, index, policy, options, &counts, AfterGiven::Settle),
                ExactOutcome::Optimal,
            )
        }
        Ok((_, Some(stage))) | Err(stage) => {
            // As without `--exact`: the heuristic's, its replicas raised where HiGHS finds
            // more within its node limit (a bound that does not depend on the machine).
            let heuristic = assign::assign(ir, index, matrix, policy);
            let (assignment, _) = raise_replicas(ir, index, policy, heuristic);
            (assignment, ExactOutcome::NotSolved { stage })
        }
    }
}

/// Branch-and-bound nodes HiGHS may visit per class when [`raise_replicas`] looks for more
/// replicas than the heuristic placed.
pub const REPLICA_NODES: i32 = 1_000;

/// How [`raise_replicas`] ended.
#[derive(Clone, Debug, PartialEq)]
pub enum RaiseOutcome {
    /// Every workload has all its replicas (or no option for more): nothing to raise.
    NothingShort,
    /// More options than [`MAX_OPTIONS`]: the heuristic's counts stand unchecked.
    TooLarge { options: usize },
    /// HiGHS proved that no assignment places more replicas, class by class.
    Proved,
    /// HiGHS found no more replicas within its node limit, nor proved there are none (from
    /// the stage named on).
    Unproved { stage: &'static str },
    /// HiGHS found an assignment placing more: replicas per class (production first), the
    /// heuristic's and the one used.
    Raised { from: [u32; 4], to: [u32; 4] },
}

/// Replicas per class in `counts` (per workload, per option), production first.
fn class_totals(ir: &Ir, counts: &[Vec<u32>]) -> [u32; 4] {
    let mut totals = [0; 4];
    for (w, per_option) in counts.iter().enumerate() {
        totals[class_slot(ir.workloads[w].class)] += per_option.iter().sum::<u32>();
    }
    totals
}

/// The heuristic's assignment `heuristic`, or — where some workload is left short and HiGHS
/// finds an assignment placing more replicas, class by class (production first), within
/// [`REPLICA_NODES`] nodes per class on one thread, starting from the heuristic's — that
/// assignment's counts, improved for fallbacks, latency and cost by the heuristic's own
/// passes (which never give a replica up). A node limit, not a time limit: the plan is the
/// same on every machine.
pub fn raise_replicas(
    ir: &Ir,
    index: &EstateIndex,
    policy: &PolicyContext,
    heuristic: Assignment,
) -> (Assignment, RaiseOutcome) {
    if !(0..ir.workloads.len()).any(|w| heuristic.is_short(ir, w)) {
        return (heuristic, RaiseOutcome::NothingShort);
    }
    let n: usize = heuristic.options.iter().map(|o| o.len()).sum();
    if n > MAX_OPTIONS {
        return (heuristic, RaiseOutcome::TooLarge { options: n });
    }
    let model = Model::new(ir, index, policy, &heuristic.options, Goals::Replicas);
    let start = model.solution_of(&heuristic);
    let (counts, unproved) = match model.solve(Limit::Nodes(REPLICA_NODES), Some(start)) {
        Ok((solution, unproved)) => (model.counts(&solution), unproved),
        Err(stage) => return (heuristic, RaiseOutcome::Unproved { stage }),
    };
    let kept = match unproved {
        Some(stage) => RaiseOutcome::Unproved { stage },
        None => RaiseOutcome::Proved,
    };
    let from = heuristic.placed_per_class(ir);
    if class_totals(ir, &counts) <= from {
        return (heuristic, kept);
    }
    let options = heuristic.options.clone();
    let raised = assign::assign_given(ir, index, policy, options, &counts, AfterGiven::Improve);
    let to = raised.placed_per_class(ir);
    // The passes after placing the counts only add replicas; should they not keep HiGHS's
    // gain (they do by construction), the heuristic's plan stands.
    if to > from {
        (raised, RaiseOutcome::Raised { from, to })
    } else {
        (heuristic, kept)
    }
}

/// One term of an objective: a variable and its weight.
type Terms = Vec<(usize, f64)>;

/// The program: variables, rows, and the objectives in order.
struct Model<'a> {
    options: &'a [assign::Options],
    /// First variable of each workload's options.
    first: Vec<usize>,
    /// Upper bound of each placement variable (the workload's replicas).
    upper: Vec<f64>,
    /// Isolation binaries ("this workload uses this pool"), numbered after the placement
    /// variables.
    binaries: usize,
    /// The isolation binary of each (workload, pool) that has one.
    used: BTreeMap<(usize, u32), usize>,
    /// `lower <= Σ terms <= upper`.
    rows: Vec<(f64, f64, Terms)>,
    stages: Vec<(&'static str, Sense, Terms)>,
}

/// What a [`Model`] optimises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Goals {
    /// Replicas class by class, then fallbacks, data latency and cost: the whole outcome.
    Whole,
    /// Replicas class by class alone.
    Replicas,
}

/// What bounds HiGHS's work on one stage.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Limit {
    /// Seconds of its own clock (the answer then depends on the machine).
    Seconds(f64),
    /// Branch-and-bound nodes, on one thread: the same answer on every machine.
    Nodes(i32),
    /// No integrality: the linear relaxation, whose optimum bounds the stage's.
    Relaxation,
}

/// One stage's answer.
struct StageAnswer {
    /// The objective's value at `solution`.
    value: f64,
    solution: Vec<f64>,
    /// Whether HiGHS proved `solution` optimal (otherwise the best it found within its limit).
    proved: bool,
}

impl<'a> Model<'a> {
    fn new(
        ir: &Ir,
        index: &EstateIndex,
        policy: &PolicyContext,
        options: &'a [assign::Options],
        goals: Goals,
    ) -> Self {
        let mut first = Vec::with_capacity(options.len());
        let mut upper = Vec::new();
        for (w, opts) in options.iter().enumerate() {
            first.push(upper.len());
            upper.extend(opts.iter().map(|_| f64::from(ir.workloads[w].replicas)));
        }
        let mut m = Model {
            options,
            first,
            upper,
            binaries: 0,
            used: BTreeMap::new(),
            rows: Vec::new(),
            stages: Vec::new(),
        };
        m.capacity_rows(ir, index, policy);
        m.spread_rows(ir, index);
        m.isolation_rows(ir);
        m.replica_objectives(ir);
        if goals == Goals::Whole {
            m.guard_objectives(ir);
        }
        m
    }

    fn vars(&self, w: usize) -> impl Iterator<Item = (usize, &'a Opt)> + 'a {
        let first = self.first[w];
        let options: &'a [Opt] = &self.options[w];
        options.iter().enumerate().map(move |(i, o)| (first + i, o))
    }

    fn capacity_rows(&mut self, ir: &Ir, index: &EstateIndex, policy: &PolicyContext) {
        let mut pools: Vec<Terms> = vec![Vec::new(); index.pools.len()];
        let mut cpu: Vec<Terms> = vec![Vec::new(); ir.targets.len()];
        let mut memory: Vec<Terms> = vec![Vec::new(); ir.targets.len()];
        let mut caps: Vec<Terms> = vec![Vec::new(); policy.caps.len()];
        for w in 0..self.options.len() {
            let wl = &ir.workloads[w];
            let units = f64::from(gpu_units(wl));
            let mut replicas = Vec::new();
            for (v, o) in self.vars(w) {
                replicas.push((v, 1.0));
                if o.flat_pool != NO_POOL {
                    pools[o.flat_pool as usize].push((v, units));
                }
                cpu[o.target as usize].push((v, wl.resources.cpu_millis as f64));
                memory[o.target as usize].push((v, wl.resources.memory as f64));
                for &c in &policy.workload_caps[w] {
                    caps[c as usize].push((v, units));
                }
            }
            self.rows.push((0.0, f64::from(wl.replicas), replicas));
        }
        for (p, terms) in pools.into_iter().enumerate() {
            self.rows
                .push((0.0, f64::from(index.pools[p].units), terms));
        }
        for (t, terms) in cpu.into_iter().enumerate() {
            self.rows
                .push((0.0, ir.targets[t].cpu_millis as f64, terms));
        }
        for (t, terms) in memory.into_iter().enumerate() {
            self.rows.push((0.0, ir.targets[t].memory as f64, terms));
        }
        for (c, terms) in caps.into_iter().enumerate() {
            self.rows.push((0.0, policy.caps[c].max as f64, terms));
        }
    }

    fn spread_rows(&mut self, ir: &Ir, index: &EstateIndex) {
        for w in 0..self.options.len() {
            let rules = &ir.workloads[w].placement;
            let mut by = |n: Option<u32>, key: &dyn Fn(&Opt) -> u32| {
                let Some(n) = n else { return };
                let mut groups: Vec<(u32, Terms)> = Vec::new();
                for (v, o) in self.vars(w) {
                    let k = key(o);
                    match groups.iter_mut().find(|(g, _)| *g == k) {
                        Some((_, terms)) => terms.push((v, 1.0)),
                        None => groups.push((k, vec![(v, 1.0)])),
                    }
                }
                for (_, terms) in groups {
                    self.rows.push((0.0, f64::from(n), terms));
                }
            };
            by(rules.per_target, &|o| o.target);
            by(rules.per_region, &|o| index.region[o.target as usize]);
        }
    }

    fn isolation_rows(&mut self, ir: &Ir) {
        let partners = isolation_partners(ir);
        // The binary "w uses pool p", made once with its rows x ≤ replicas · used for every
        // option of w on p.
        let mut used = std::mem::take(&mut self.used);
        for (w, others) in partners.iter().enumerate() {
            let pools: BTreeSet<u32> = self
                .vars(w)
                .map(|(_, o)| o.flat_pool)
                .filter(|&p| p != NO_POOL)
                .collect();
            for &other in others.iter().filter(|&&o| (o as usize) > w) {
                let other = other as usize;
                for &pool in &pools {
                    if !self.vars(other).any(|(_, q)| q.flat_pool == pool) {
                        continue;
                    }
                    let bw = self.used(&mut used, w, pool);
                    let bo = self.used(&mut used, other, pool);
                    self.rows.push((0.0, 1.0, vec![(bw, 1.0), (bo, 1.0)]));
                }
            }
        }
        self.used = used;
    }

    /// The binary "`w` uses `pool`", created with its linking rows the first time.
    fn used(&mut self, used: &mut BTreeMap<(usize, u32), usize>, w: usize, pool: u32) -> usize {
        if let Some(&b) = used.get(&(w, pool)) {
            return b;
        }
        let b = self.upper.len() + self.binaries;
        self.binaries += 1;
        used.insert((w, pool), b);
        let links: Vec<(usize, f64)> = self
            .vars(w)
            .filter(|(_, o)| o.flat_pool == pool)
            .map(|(v, _)| (v, self.upper[v]))
            .collect();
        for (v, cap) in links {
            self.rows
                .push((f64::NEG_INFINITY, 0.0, vec![(v, 1.0), (b, -cap)]));
        }
        b
    }

    fn replica_objectives(&mut self, ir: &Ir) {
        for (class, name) in [
            (WorkloadClass::Production, "production replicas"),
            (WorkloadClass::Staging, "staging replicas"),
            (WorkloadClass::Development, "development replicas"),
            (WorkloadClass::Experiment, "experiment replicas"),
        ] {
            let terms: Terms = (0..self.options.len())
                .filter(|&w| ir.workloads[w].class == class)
                .flat_map(|w| self.vars(w).map(|(v, _)| (v, 1.0)).collect::<Vec<_>>())
                .collect();
            if !terms.is_empty() {
                self.stages.push((name, Sense::Maximise, terms));
            }
        }
    }

    fn guard_objectives(&mut self, ir: &Ir) {
        let fallback: Terms = (0..self.options.len())
            .flat_map(|w| {
                self.vars(w)
                    .map(|(v, o)| (v, f64::from(o.fallback)))
                    .collect::<Vec<_>>()
            })
            .filter(|(_, k)| *k > 0.0)
            .collect();
        if !fallback.is_empty() {
            self.stages.push(("fallbacks", Sense::Minimise, fallback));
        }
        // Data latency in milliseconds per replica, for the workloads that rank it first.
        let latency: Terms = (0..self.options.len())
            .filter(|&w| assign::preferences(ir, w).first() == Some(&Preference::LowestDataLatency))
            .flat_map(|w| {
                self.vars(w)
                    .map(|(v, o)| (v, o.objectives[0] as f64 / 1e6))
                    .collect::<Vec<_>>()
            })
            .filter(|(_, k)| *k != 0.0)
            .collect();
        if !latency.is_empty() {
            self.stages.push(("data latency", Sense::Minimise, latency));
        }
        let cost: Terms = (0..self.options.len())
            .flat_map(|w| {
                self.vars(w)
                    .map(|(v, o)| {
                        let day = replica_cost_per_day(ir, w, o.target as usize);
                        (v, day.0 as f64 / 1e6)
                    })
                    .collect::<Vec<_>>()
            })
            .filter(|(_, k)| *k != 0.0)
            .collect();
        if !cost.is_empty() {
            self.stages.push(("cost", Sense::Minimise, cost));
        }
    }

    /// The stages in order, each keeping the optimum (or, unproved, the best value found) of
    /// the ones before, each bounded by `limit` (seconds split evenly between the stages: the
    /// compiler reads no clock, HiGHS keeps each stage's limit itself), the first starting
    /// from `start` where given. The last stage's solution and the first stage HiGHS did not
    /// prove optimal; `Err(stage)` when a stage found no solution at all.
    fn solve(
        &self,
        limit: Limit,
        start: Option<Vec<f64>>,
    ) -> Result<(Vec<f64>, Option<&'static str>), &'static str> {
        let mut fixed: Vec<(Sense, Terms, f64)> = Vec::new();
        let stages: Vec<(&'static str, Sense, Terms)> = if self.stages.is_empty() {
            vec![("replicas", Sense::Maximise, Vec::new())]
        } else {
            self.stages.clone()
        };
        let limit = match limit {
            Limit::Seconds(s) => Limit::Seconds(s / stages.len() as f64),
            nodes => nodes,
        };
        let mut values = start;
        let mut unproved = None;
        for (name, sense, terms) in stages {
            let answer = match self.start_proved(sense, &terms, &fixed, values.as_deref()) {
                Some(answer) => answer,
                None => self
                    .solve_stage(sense, &terms, &fixed, limit, values.as_deref())
                    .ok_or(name)?,
            };
            if !answer.proved {
                // A time limit hit leaves an answer that depends on the machine: none at all.
                if let Limit::Seconds(_) = limit {
                    return Err(name);
                }
                unproved = unproved.or(Some(name));
            }
            values = Some(answer.solution);
            fixed.push((sense, terms, answer.value));
        }
        Ok((values.unwrap_or_default(), unproved))
    }

    /// The start as the stage's answer, proved optimal, where the stage maximises a count
    /// (integral weights on integer variables) and the linear relaxation's bound, rounded
    /// down, is no more than the start's value: no integer solution can do better. The
    /// relaxation costs a fraction of the branch and bound, whose root alone may take
    /// seconds on an estate of a hundred workloads.
    fn start_proved(
        &self,
        sense: Sense,
        objective: &Terms,
        fixed: &[(Sense, Terms, f64)],
        start: Option<&[f64]>,
    ) -> Option<StageAnswer> {
        let start = start?;
        let integral = objective
            .iter()
            .all(|&(v, k)| v < self.upper.len() && k.fract() == 0.0);
        if sense != Sense::Maximise || !integral {
            return None;
        }
        let value: f64 = objective.iter().map(|&(v, k)| start[v] * k).sum();
        let bound = self.solve_stage(sense, objective, fixed, Limit::Relaxation, None)?;
        ((bound.value + 1e-6).floor() <= value + 1e-6).then(|| StageAnswer {
            value,
            solution: start.to_vec(),
            proved: true,
        })
    }

    /// Replicas per option, per workload, in `solution`.
    fn counts(&self, solution: &[f64]) -> Vec<Vec<u32>> {
        self.first
            .iter()
            .enumerate()
            .map(|(w, &first)| {
                (0..self.options[w].len())
                    .map(|i| {
                        solution
                            .get(first + i)
                            .map_or(0, |x| x.round().max(0.0) as u32)
                    })
                    .collect()
            })
            .collect()
    }

    /// The columns' values for `assignment` (placement variables and isolation binaries).
    fn solution_of(&self, assignment: &Assignment) -> Vec<f64> {
        let mut values = vec![0.0; self.upper.len() + self.binaries];
        for (w, slots) in assignment.slots.iter().enumerate() {
            for &(oi, k) in slots {
                values[self.first[w] + oi as usize] = f64::from(k);
                let pool = self.options[w][oi as usize].flat_pool;
                if let Some(&b) = self.used.get(&(w, pool)) {
                    values[b] = 1.0;
                }
            }
        }
        values
    }

    fn solve_stage(
        &self,
        sense: Sense,
        objective: &Terms,
        fixed: &[(Sense, Terms, f64)],
        limit: Limit,
        start: Option<&[f64]>,
    ) -> Option<StageAnswer> {
        let mut weight = vec![0.0; self.upper.len() + self.binaries];
        for &(v, k) in objective {
            weight[v] += k;
        }
        let mut pb = RowProblem::default();
        let cols: Vec<Col> = weight
            .iter()
            .enumerate()
            .map(|(v, &k)| {
                let hi = self.upper.get(v).copied().unwrap_or(1.0);
                pb.add_integer_column(k, 0.0..=hi)
            })
            .collect();
        for (lo, hi, terms) in &self.rows {
            if terms.is_empty() {
                continue;
            }
            let factors = terms.iter().map(|&(v, k)| (cols[v], k));
            match (lo.is_finite(), hi.is_finite()) {
                (true, true) => pb.add_row(*lo..=*hi, factors),
                (false, true) => pb.add_row(..=*hi, factors),
                (true, false) => pb.add_row(*lo.., factors),
                (false, false) => pb.add_row(f64::NEG_INFINITY.., factors),
            }
        }
        // Each earlier stage keeps its optimum (integral objectives of counts are kept
        // exactly; the others within a relative 1e-9).
        for (s, terms, value) in fixed {
            let factors = terms.iter().map(|&(v, k)| (cols[v], k));
            let slack = 1e-6 + value.abs() * 1e-9;
            match s {
                Sense::Maximise => pb.add_row(value - slack.., factors),
                Sense::Minimise => pb.add_row(..=value + slack, factors),
            }
        }
        let mut model = pb.try_optimise(sense).ok()?;
        model.set_option("output_flag", false);
        model.set_option("threads", 1);
        model.set_option("random_seed", 0);
        model.set_option("mip_rel_gap", 0.0);
        match limit {
            Limit::Seconds(s) => model.set_option("time_limit", s),
            Limit::Nodes(n) => model.set_option("mip_max_nodes", n),
            Limit::Relaxation => model.set_option("solve_relaxation", true),
        }
        if let Some(start) = start {
            // A start HiGHS cannot take (a wrong length) only costs the head start.
            let _ = model.try_set_solution(Some(start), None, None, None);
        }
        let solved = model.try_solve().ok()?;
        let proved = solved.status() == HighsModelStatus::Optimal;
        if !proved && solved.primal_solution_status() != highs::HighsSolutionStatus::Feasible {
            return None;
        }
        let solution = solved.get_solution().columns().to_vec();
        let value = objective.iter().map(|&(v, k)| solution[v] * k).sum();
        Some(StageAnswer {
            value,
            solution,
            proved,
        })
    }
}
