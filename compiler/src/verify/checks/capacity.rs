//! Capacity: the verifier's own ledgers per pool and per target, against capacity and against the plan's ledgers.

// INVARIANT: targets and pool indices come from `Placed`, resolved by name against this IR;
// nothing from the plan indexes unchecked.
#![allow(clippy::indexing_slicing)]

use crate::ir::{TargetId, WorkloadId};
use crate::source::Span;
use crate::verify::*;
use std::collections::{BTreeMap, BTreeSet};

impl<'a> Verifier<'a> {
    /// Recomputed pool ledger: per (target, pool), GPUs per workload in workload order.
    pub(in crate::verify) fn pool_ledger(
        &self,
    ) -> BTreeMap<(TargetId, usize), BTreeMap<WorkloadId, u64>> {
        let mut ledger: BTreeMap<_, BTreeMap<_, u64>> = BTreeMap::new();
        for p in &self.placed {
            if let Some(pool) = p.pool {
                let gpus = self.gpus(p);
                if gpus > 0 {
                    let entry = ledger
                        .entry((p.t, pool))
                        .or_default()
                        .entry(p.w)
                        .or_default();
                    *entry = entry.saturating_add(gpus);
                }
            }
        }
        ledger
    }

    /// Recomputed (CPU millicores, memory bytes) per target.
    pub(in crate::verify) fn target_ledger(&self) -> BTreeMap<TargetId, (u64, u64)> {
        let mut ledger: BTreeMap<_, (u64, u64)> = BTreeMap::new();
        for p in &self.placed {
            let res = &self.workload(p.w).resources;
            let (cpu, memory) = ledger.entry(p.t).or_default();
            *cpu = cpu.saturating_add(p.replicas().saturating_mul(res.cpu_millis));
            *memory = memory.saturating_add(p.replicas().saturating_mul(res.memory));
        }
        ledger
    }

    pub(in crate::verify) fn check_pool_capacity(&mut self) {
        let mut found = Vec::new();
        for ((t, pool_index), by_workload) in self.pool_ledger() {
            let pool = &self.ir.targets[t.index()].pools[pool_index];
            let capacity = fit::pool_capacity(self.ir, pool);
            let allocated = by_workload
                .values()
                .fold(0, |a: u64, b| a.saturating_add(*b));
            if allocated > capacity {
                found.push(Violation::PoolOverCommitted {
                    target: self.tname(t),
                    pool: pool.name.clone(),
                    allocated,
                    capacity,
                    span: self.tspan(t),
                });
            }
        }
        self.violations.extend(found);
    }

    pub(in crate::verify) fn check_target_capacity(&mut self) {
        let mut found = Vec::new();
        for (t, (cpu, memory)) in self.target_ledger() {
            let target = &self.ir.targets[t.index()];
            let over = [
                (Resource::Cpu, cpu, target.cpu_millis),
                (Resource::Memory, memory, target.memory),
            ];
            for (resource, allocated, capacity) in over {
                if allocated > capacity {
                    found.push(Violation::TargetOverCommitted {
                        target: target.name.clone(),
                        resource,
                        allocated,
                        capacity,
                        span: self.tspan(t),
                    });
                }
            }
        }
        self.violations.extend(found);
    }

    /// The plan's own `pools` and `targets` ledgers must equal the recomputed ones.
    pub(in crate::verify) fn check_ledgers(&mut self) {
        let ir = self.ir;
        let pools = self.pool_ledger();
        let mut expected = Vec::new();
        let mut rows = BTreeMap::new();
        for (ti, target) in ir.targets.iter().enumerate() {
            let t = TargetId(ti as u32);
            for (pi, pool) in target.pools.iter().enumerate() {
                let key = format!("{}/{}", target.name, pool.name);
                expected.push((key.clone(), self.tspan(t)));
                let by_workload: Vec<(String, u64)> = pools
                    .get(&(t, pi))
                    .map(|m| m.iter().map(|(w, n)| (self.wname(*w), *n)).collect())
                    .unwrap_or_default();
                let allocated = by_workload
                    .iter()
                    .fold(0, |a: u64, (_, n)| a.saturating_add(*n));
                let accelerator =
                    fit::accelerator(ir, pool).map_or_else(String::new, |a| a.name.clone());
                rows.insert(
                    key,
                    (
                        t,
                        pool.name.clone(),
                        accelerator,
                        fit::pool_capacity(ir, pool),
                        allocated,
                        by_workload,
                    ),
                );
            }
        }
        let found: Vec<String> = self
            .plan
            .pools
            .iter()
            .map(|l| format!("{}/{}", l.target, l.pool))
            .collect();
        self.check_list(PlanList::PoolLedgers, &expected, &found, |name| {
            Violation::UnknownName {
                kind: NameKind::Pool,
                name: name.to_owned(),
                context: Some("pool ledger".to_owned()),
            }
        });
        let mut done = BTreeSet::new();
        for (key, ledger) in found.iter().zip(&self.plan.pools) {
            let Some((_, pool, accelerator, capacity, allocated, by_workload)) = rows.get(key)
            else {
                continue;
            };
            if !done.insert(key) {
                continue;
            }
            let recorded_by: Vec<(String, u64)> = ledger
                .by_workload
                .iter()
                .map(|e| (e.workload.clone(), e.amount))
                .collect();
            let fields = [
                (
                    "accelerator",
                    ledger.accelerator.clone(),
                    accelerator.clone(),
                ),
                (
                    "capacity",
                    ledger.capacity.to_string(),
                    capacity.to_string(),
                ),
                (
                    "allocated",
                    ledger.allocated.to_string(),
                    allocated.to_string(),
                ),
                (
                    "by_workload",
                    by_summary(&recorded_by),
                    by_summary(by_workload),
                ),
            ];
            for (field, recorded, recomputed) in fields {
                if recorded != recomputed {
                    self.push(Violation::LedgerMismatch {
                        target: ledger.target.clone(),
                        pool: Some(pool.clone()),
                        field,
                        recorded,
                        recomputed,
                    });
                }
            }
        }
        self.check_target_ledgers();
    }

    pub(in crate::verify) fn check_target_ledgers(&mut self) {
        let ir = self.ir;
        let used = self.target_ledger();
        let expected: Vec<(String, Span)> = ir
            .targets
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), self.tspan(TargetId(i as u32))))
            .collect();
        let found: Vec<String> = self.plan.targets.iter().map(|l| l.target.clone()).collect();
        self.check_list(PlanList::TargetLedgers, &expected, &found, |name| {
            Violation::UnknownName {
                kind: NameKind::Target,
                name: name.to_owned(),
                context: Some("target ledger".to_owned()),
            }
        });
        let mut variants: BTreeMap<TargetId, Vec<&crate::plan::VariantBinding>> = BTreeMap::new();
        for p in &self.placed {
            if let Some(v) = &p.placement.variant {
                variants.entry(p.t).or_default().push(v);
            }
        }
        let mut done = BTreeSet::new();
        for ledger in &self.plan.targets {
            let Some(t) = self.target_id(&ledger.target) else {
                continue;
            };
            if !done.insert(t) {
                continue;
            }
            let target = &ir.targets[t.index()];
            let (cpu, memory) = used.get(&t).copied().unwrap_or_default();
            let (staging_bytes, staging_unsized) =
                crate::plan::staging_totals(variants.get(&t).into_iter().flatten().copied());
            let fields = [
                (
                    "cpu_millis_capacity",
                    ledger.cpu_millis_capacity,
                    target.cpu_millis,
                ),
                ("cpu_millis_allocated", ledger.cpu_millis_allocated, cpu),
                ("memory_capacity", ledger.memory_capacity, target.memory),
                ("memory_allocated", ledger.memory_allocated, memory),
                ("staging_bytes", ledger.staging_bytes, staging_bytes),
                (
                    "staging_unsized",
                    u64::from(ledger.staging_unsized),
                    u64::from(staging_unsized),
                ),
            ];
            for (field, recorded, recomputed) in fields {
                let show = |n: u64| {
                    if field.starts_with("memory") || field == "staging_bytes" {
                        violation::bytes(n)
                    } else {
                        n.to_string()
                    }
                };
                if recorded != recomputed {
                    self.push(Violation::LedgerMismatch {
                        target: target.name.clone(),
                        pool: None,
                        field,
                        recorded: show(recorded),
                        recomputed: show(recomputed),
                    });
                }
            }
        }
    }
}
