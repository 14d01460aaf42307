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
//! When the estate is larger than [`MAX_OPTIONS`], or a stage is not solved to optimality
//! within the time limit, the heuristic's assignment is used and [`ExactOutcome`] says why.
//! Only a time limit makes the outcome depend on the machine; the plan is the heuristic's then.

// INVARIANT: every index is a dense id of the IR being placed or a position in a table sized
// from it (options per workload, flat pools, caps), as in the rest of the engine.
#![allow(clippy::indexing_slicing)]

use super::assign::{
    self, Assignment, NO_POOL, Opt, build_options, isolation_partners, replica_cost_per_day,
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
    /// The heuristic's assignment was used: HiGHS did not prove a stage optimal in time.
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
                "exact: HiGHS did not prove the `{stage}` stage optimal within the time limit; the heuristic's plan is used"
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
    let model = Model::new(ir, index, policy, &options);
    match model.solve(time_limit_s) {
        Ok(counts) => (
            assign::assign_given(ir, index, policy, options, &counts),
            ExactOutcome::Optimal,
        ),
        Err(stage) => (
            assign::assign(ir, index, matrix, policy),
            ExactOutcome::NotSolved { stage },
        ),
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
    /// `lower <= Σ terms <= upper`.
    rows: Vec<(f64, f64, Terms)>,
    stages: Vec<(&'static str, Sense, Terms)>,
}

impl<'a> Model<'a> {
    fn new(
        ir: &Ir,
        index: &EstateIndex,
        policy: &PolicyContext,
        options: &'a [assign::Options],
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
            rows: Vec::new(),
            stages: Vec::new(),
        };
        m.capacity_rows(ir, index, policy);
        m.spread_rows(ir, index);
        m.isolation_rows(ir);
        m.objectives(ir);
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
        let mut used: BTreeMap<(usize, u32), usize> = BTreeMap::new();
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

    fn objectives(&mut self, ir: &Ir) {
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

    /// Replicas per option, per workload; `Err(stage)` when a stage is not solved to
    /// optimality within its share of `time_limit_s` (split evenly between the stages: the
    /// compiler reads no clock, HiGHS keeps each stage's limit itself).
    fn solve(&self, time_limit_s: f64) -> Result<Vec<Vec<u32>>, &'static str> {
        let mut fixed: Vec<(Sense, Terms, f64)> = Vec::new();
        let mut values: Vec<f64> = vec![0.0; self.upper.len()];
        let stages: Vec<(&'static str, Sense, Terms)> = if self.stages.is_empty() {
            vec![("replicas", Sense::Maximise, Vec::new())]
        } else {
            self.stages.clone()
        };
        let share = time_limit_s / stages.len() as f64;
        for (name, sense, terms) in stages {
            let (objective, solution) =
                self.solve_stage(sense, &terms, &fixed, share).ok_or(name)?;
            values = solution;
            fixed.push((sense, terms, objective));
        }
        Ok(self
            .first
            .iter()
            .enumerate()
            .map(|(w, &first)| {
                (0..self.options[w].len())
                    .map(|i| values[first + i].round().max(0.0) as u32)
                    .collect()
            })
            .collect())
    }

    fn solve_stage(
        &self,
        sense: Sense,
        objective: &Terms,
        fixed: &[(Sense, Terms, f64)],
        time_limit_s: f64,
    ) -> Option<(f64, Vec<f64>)> {
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
        model.set_option("time_limit", time_limit_s);
        let solved = model.try_solve().ok()?;
        if solved.status() != HighsModelStatus::Optimal {
            return None;
        }
        let solution = solved.get_solution().columns().to_vec();
        let value = objective.iter().map(|&(v, k)| solution[v] * k).sum();
        Some((value, solution))
    }
}
