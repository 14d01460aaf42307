//! The drift guard of `berth apply`: a saved plan assumed each pool's capacity when it was
//! made (its pool ledger); before anything is applied, each Kubernetes pool the plan places
//! GPUs on is read live — the GPUs its nodes can allocate, and those held by pods the plan
//! does not place there (another team's, or a workload this plan moved away) — and a pool
//! whose free GPUs cannot hold the plan's placements stops the apply, naming assumed against
//! live. A plan made yesterday is not applied to a cluster that has since lost half its GPUs.

use super::kubeconfig::Kubeconfigs;
use super::render::Rendered;
use berth_compiler::ir::Ir;
use berth_compiler::plan::Plan;
use serde::Serialize;

/// A pool that cannot hold what the plan places on it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PoolDrift {
    pub target: String,
    pub pool: String,
    /// GPUs (or MIG slices) the plan places on the pool.
    pub planned: u32,
    /// The capacity the plan assumed.
    pub assumed: u32,
    /// Live: what the pool's nodes can allocate.
    pub allocatable: i64,
    /// Live: GPUs held by pods the plan does not place on this pool.
    pub held_by_others: i64,
    /// Those pods, `namespace/name`.
    pub others: Vec<String>,
}

impl PoolDrift {
    pub fn free(&self) -> i64 {
        (self.allocatable - self.held_by_others).max(0)
    }
}

impl std::fmt::Display for PoolDrift {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "pool `{}/{}` cannot hold the plan's placements: the plan places {} GPUs and \
             assumed {} allocatable; live, the nodes allocate {}",
            self.target, self.pool, self.planned, self.assumed, self.allocatable
        )?;
        if self.held_by_others > 0 {
            let more = if self.others.len() > 3 { ", …" } else { "" };
            write!(
                f,
                " and pods it does not place hold {} ({}{more})",
                self.held_by_others,
                self.others
                    .iter()
                    .take(3)
                    .map(|o| format!("`{o}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )?;
        }
        write!(f, ": {} free", self.free())
    }
}

/// What the guard found: the pools that cannot hold the plan's placements, and the clusters
/// it could not read (`(context, why)`: the apply then reports them as it reaches them).
#[derive(Debug, Default)]
pub struct Checked {
    pub drifted: Vec<PoolDrift>,
    pub unread: Vec<(String, String)>,
}

/// Reads the live pools of `rendered`'s clusters against the plan's ledger.
pub fn check(rendered: &Rendered, ir: &Ir, plan: &Plan, kubeconfigs: &Kubeconfigs) -> Checked {
    let mut out = Checked::default();
    let runtime = match crate::tasks::runtime_with(2) {
        Ok(rt) => rt,
        Err(why) => {
            out.unread.push(("(all)".into(), why));
            return out;
        }
    };
    for cluster in &rendered.clusters {
        let (pools, holders) =
            match runtime.block_on(super::top::read_cluster(kubeconfigs, cluster, ir)) {
                Ok(found) => found,
                Err(e) => {
                    out.unread.push((cluster.context.clone(), e));
                    continue;
                }
            };
        for ledger in plan
            .pools
            .iter()
            .filter(|l| l.allocated > 0 && cluster.targets.contains(&l.target))
        {
            let Some(live) = pools
                .iter()
                .find(|p| p.target == ledger.target && p.pool == ledger.pool)
            else {
                continue;
            };
            let placed_here = |w: &str| {
                ledger
                    .by_workload
                    .iter()
                    .any(|e| e.workload == w && e.amount > 0)
            };
            let others: Vec<_> = holders
                .iter()
                .filter(|h| h.target == ledger.target && h.pool == ledger.pool)
                .filter(|h| !h.workload.as_deref().is_some_and(placed_here))
                .collect();
            let drift = PoolDrift {
                target: ledger.target.clone(),
                pool: ledger.pool.clone(),
                planned: ledger.allocated,
                assumed: ledger.capacity,
                allocatable: live.allocatable,
                held_by_others: others.iter().map(|h| h.gpus).sum(),
                others: others
                    .iter()
                    .map(|h| format!("{}/{}", h.namespace, h.pod))
                    .collect(),
            };
            if i64::from(drift.planned) > drift.free() {
                out.drifted.push(drift);
            }
        }
    }
    out
}
