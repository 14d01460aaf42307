//! Per-target indexes built once before eligibility, so that checking one (workload, target)
//! pair touches a few small arrays and allocates nothing: service maturities as a dense
//! table indexed by service id, data offers by interned name, pools flattened with the
//! distinct (accelerator, MIG profile) "kinds" they are made of, regions interned.

// INVARIANT: every index is a dense id of the IR being placed (workload < `ir.workloads.len()`,
// target < `ir.targets.len()`, a pool < its target's pools) or a position in a table the solver
// sized from those counts when it built it (`EstateIndex`, `EligibilityMatrix`, `Assignment`'s
// options and slots, the ledgers); nothing from user text indexes here. Indexing is the hot
// path; the property tests and planted estates run it over generated estates.
#![allow(clippy::indexing_slicing)]

use crate::ir::{AcceleratorId, Connectivity, EnvClass, Ir, Maturity, ServiceId};
use std::collections::{BTreeMap, BTreeSet};

/// How a pool's devices are handed out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Partition {
    /// Whole devices.
    Whole,
    /// MIG instances of profile `n` of the accelerator's `mig_profiles`.
    Mig(u16),
    /// A MIG profile the accelerator does not have: offers nothing.
    UnknownMig,
}

/// A distinct (accelerator, partition, reach) triple: every pool of that kind fits a
/// workload in the same way, so fits are computed once per kind and workload, not per pool
/// and pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct PoolKind {
    pub accelerator: AcceleratorId,
    pub partition: Partition,
    /// Memory of one unit (device or MIG instance), bytes.
    pub unit_memory: u64,
    /// How model artifacts reach the pool's target: [`ONLINE`], or an index into
    /// [`EstateIndex::reaches`].
    pub reach: u32,
}

/// The reach of every target that can fetch an artifact from its own source, or be carried
/// a bundle (an edge agent's `berth bundle export`): any variant can be staged there.
pub const ONLINE: u32 = 0;

/// What can be staged on a target that cannot stage every artifact from its source: the
/// models it caches, and then, for an edge agent, what berth fetches (pulled, or carried a
/// bundle when disconnected); for a disconnected target run by anything else, `oci://`
/// artifacts when it names a registry mirror.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Reach {
    /// Sorted, without duplicates.
    pub cached: Vec<crate::ir::ModelId>,
    /// Where an artifact the target does not cache can come from.
    pub uncached: Uncached,
}

/// Where a target of limited reach gets an artifact it does not cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Uncached {
    /// Disconnected, not run by an edge agent, no mirror: nowhere.
    #[default]
    Nowhere,
    /// Disconnected, not run by an edge agent: `oci://` artifacts from its mirrors.
    Mirrors,
    /// Run by an edge agent: what berth fetches (pulled, or carried on removable media).
    Agent,
}

impl Reach {
    /// Whether an artifact of `model` at URI `artifact` can be staged on such a target.
    pub fn stages(&self, model: crate::ir::ModelId, artifact: &str) -> bool {
        self.cached.binary_search(&model).is_ok()
            || match self.uncached {
                Uncached::Nowhere => false,
                Uncached::Mirrors => artifact.starts_with("oci://"),
                Uncached::Agent => crate::plan::berth_fetches(artifact),
            }
    }
}

/// One pool of one target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolSlot {
    pub kind: u32,
    /// Devices, or MIG instances for a partitioned pool.
    pub units: u32,
}

/// One data offer of one target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OfferSlot {
    /// Interned data name.
    pub name: u32,
    /// Index in the target's `data`.
    pub offer: u32,
    pub latency: u64,
}

/// Interned name meaning "offered by no target".
pub const UNKNOWN_NAME: u32 = u32::MAX;

#[derive(Clone, Debug, Default)]
pub struct EstateIndex {
    pub kinds: Vec<PoolKind>,
    /// Reaches of the targets that stage from cache and mirrors only; entry [`ONLINE`] is a
    /// placeholder (every artifact can be staged there).
    pub reaches: Vec<Reach>,
    /// The reach of each target.
    pub target_reach: Vec<u32>,
    /// Every pool of every target, target by target.
    pub pools: Vec<PoolSlot>,
    /// Pools of target `t` are `pools[pool_start[t]..pool_start[t + 1]]`.
    pub pool_start: Vec<u32>,
    n_services: usize,
    /// `maturity[t * n_services + s]`.
    maturity: Vec<Maturity>,
    /// Data offers of target `t` are `offers[offer_start[t]..offer_start[t + 1]]`, by name.
    offers: Vec<OfferSlot>,
    offer_start: Vec<u32>,
    /// Interned data names of workload `w`'s requirements, in requirement order.
    workload_data: Vec<u32>,
    workload_data_start: Vec<u32>,
    /// Region of each target, interned; a target without a region is a region of its own.
    pub region: Vec<u32>,
    /// Hot target fields, densely packed for the pair loop.
    pub class: Vec<EnvClass>,
    pub connectivity: Vec<Connectivity>,
    pub cpu_millis: Vec<u64>,
    pub memory: Vec<u64>,
}

impl EstateIndex {
    pub fn build(ir: &Ir) -> Self {
        let mut index = EstateIndex {
            n_services: ir.services.len(),
            ..EstateIndex::default()
        };
        index.build_reaches(ir);
        index.build_pools(ir);
        index.build_services(ir);
        index.build_data(ir);
        index.build_regions(ir);
        for t in &ir.targets {
            index.class.push(t.class);
            index.connectivity.push(t.connectivity);
            index.cpu_millis.push(t.cpu_millis);
            index.memory.push(t.memory);
        }
        index
    }

    fn build_reaches(&mut self, ir: &Ir) {
        let mut reach_ids: BTreeMap<Reach, u32> = BTreeMap::new();
        self.reaches = vec![Reach::default()];
        for t in &ir.targets {
            let id = match limited_reach(t) {
                None => ONLINE,
                Some(reach) => {
                    let next = self.reaches.len() as u32;
                    *reach_ids.entry(reach.clone()).or_insert_with(|| {
                        self.reaches.push(reach);
                        next
                    })
                }
            };
            self.target_reach.push(id);
        }
    }

    /// Whether variant `v` of `model` can be staged on a target of reach `reach`.
    pub fn stages(&self, reach: u32, model: crate::ir::ModelId, artifact: &str) -> bool {
        reach == ONLINE
            || self
                .reaches
                .get(reach as usize)
                .is_some_and(|r| r.stages(model, artifact))
    }

    fn build_pools(&mut self, ir: &Ir) {
        let mut kind_ids: BTreeMap<PoolKind, u32> = BTreeMap::new();
        self.pool_start.push(0);
        for (t, target) in ir.targets.iter().enumerate() {
            let reach = self.target_reach.get(t).copied().unwrap_or(ONLINE);
            for p in &target.pools {
                let (mut kind, declared) = pool_kind(ir, p);
                // A live reading lowers the capacity, never raises it (`--live`).
                let units = u32::try_from(p.capped(u64::from(declared))).unwrap_or(declared);
                kind.reach = reach;
                let next = kind_ids.len() as u32;
                let id = *kind_ids.entry(kind).or_insert_with(|| {
                    self.kinds.push(kind);
                    next
                });
                self.pools.push(PoolSlot { kind: id, units });
            }
            self.pool_start.push(self.pools.len() as u32);
        }
    }

    fn build_services(&mut self, ir: &Ir) {
        self.maturity = vec![Maturity::Absent; ir.targets.len() * self.n_services];
        for (t, target) in ir.targets.iter().enumerate() {
            for offer in &target.services {
                if let Some(m) = self
                    .maturity
                    .get_mut(t * self.n_services + offer.service.index())
                {
                    *m = (*m).max(offer.maturity);
                }
            }
        }
    }

    fn build_data(&mut self, ir: &Ir) {
        let names: BTreeSet<&str> = ir
            .targets
            .iter()
            .flat_map(|t| t.data.iter().map(|d| d.name.as_str()))
            .collect();
        let names: Vec<&str> = names.into_iter().collect();
        let intern = |n: &str| names.binary_search(&n).map_or(UNKNOWN_NAME, |i| i as u32);
        self.offer_start.push(0);
        for t in &ir.targets {
            let start = self.offers.len();
            for (i, d) in t.data.iter().enumerate() {
                self.offers.push(OfferSlot {
                    name: intern(&d.name),
                    offer: i as u32,
                    latency: d.latency,
                });
            }
            self.offers[start..].sort_by_key(|o| (o.name, o.offer));
            self.offer_start.push(self.offers.len() as u32);
        }
        self.workload_data_start.push(0);
        for w in &ir.workloads {
            self.workload_data
                .extend(w.data.iter().map(|d| intern(&d.name)));
            self.workload_data_start
                .push(self.workload_data.len() as u32);
        }
    }

    fn build_regions(&mut self, ir: &Ir) {
        let mut ids: BTreeMap<&str, u32> = BTreeMap::new();
        for t in &ir.targets {
            if let Some(r) = &t.region {
                let next = ids.len() as u32;
                ids.entry(r.as_str()).or_insert(next);
            }
        }
        let mut next = ids.len() as u32;
        for t in &ir.targets {
            let id = match &t.region {
                Some(r) => ids.get(r.as_str()).copied().unwrap_or(0),
                None => {
                    next += 1;
                    next - 1
                }
            };
            self.region.push(id);
        }
    }

    #[cfg(any(test, feature = "testing"))]
    pub fn n_targets(&self) -> usize {
        self.class.len()
    }

    /// The pools of target `t`, with their flat index.
    pub fn target_pools(&self, t: usize) -> &[PoolSlot] {
        &self.pools[self.pool_range(t)]
    }

    /// Flat indexes of target `t`'s pools.
    pub fn pool_range(&self, t: usize) -> std::ops::Range<usize> {
        let start = self.pool_start.get(t).copied().unwrap_or(0) as usize;
        let end = self.pool_start.get(t + 1).copied().unwrap_or(0) as usize;
        start..end.max(start)
    }

    /// Flat index of pool `p` of target `t`.
    pub fn flat_pool(&self, t: usize, p: u32) -> usize {
        self.pool_range(t).start + p as usize
    }

    pub fn maturity(&self, t: usize, s: ServiceId) -> Maturity {
        self.maturity
            .get(t * self.n_services + s.index())
            .copied()
            .unwrap_or(Maturity::Absent)
    }

    /// Target `t`'s offer of the interned data name, if any.
    pub fn offer(&self, t: usize, name: u32) -> Option<OfferSlot> {
        let start = self.offer_start.get(t).copied().unwrap_or(0) as usize;
        let end = self.offer_start.get(t + 1).copied().unwrap_or(0) as usize;
        let offers = self.offers.get(start..end)?;
        // Sorted by (name, offer): the first with this name, as a linear search would find.
        let i = offers.partition_point(|o| o.name < name);
        offers.get(i).filter(|o| o.name == name).copied()
    }

    /// Interned names of workload `w`'s data requirements.
    pub fn workload_data(&self, w: usize) -> &[u32] {
        let start = self.workload_data_start.get(w).copied().unwrap_or(0) as usize;
        let end = self.workload_data_start.get(w + 1).copied().unwrap_or(0) as usize;
        self.workload_data.get(start..end).unwrap_or(&[])
    }

    /// Worst-case latency from target `t` to workload `w`'s data sets (0 without data);
    /// `None` when one is not offered.
    pub fn worst_data_latency(&self, w: usize, t: usize) -> Option<u64> {
        self.workload_data(w).iter().try_fold(0, |worst, &name| {
            Some(worst.max(self.offer(t, name)?.latency))
        })
    }
}

/// The reach of a target that cannot stage every artifact — one run by an edge agent
/// (cache, or what berth fetches) or a disconnected one (cache and mirrors) — `None` for one
/// that stages any artifact from its source (see `docs/placement.md`, "Model staging").
pub fn limited_reach(t: &crate::ir::Target) -> Option<Reach> {
    let uncached = if matches!(t.runtime, crate::ir::Runtime::Edge { .. }) {
        Uncached::Agent
    } else if t.connectivity != crate::ir::Connectivity::Disconnected {
        return None;
    } else if t.mirrors.is_empty() {
        Uncached::Nowhere
    } else {
        Uncached::Mirrors
    };
    let mut cached = t.cached_models.clone();
    cached.sort_unstable();
    cached.dedup();
    Some(Reach { cached, uncached })
}

fn pool_kind(ir: &Ir, p: &crate::ir::Pool) -> (PoolKind, u32) {
    let accel = ir.accelerators.get(p.accelerator.index());
    let device_memory = accel.map_or(0, |a| a.memory);
    match &p.mig {
        None => (
            PoolKind {
                accelerator: p.accelerator,
                partition: Partition::Whole,
                unit_memory: device_memory,
                reach: ONLINE,
            },
            p.count,
        ),
        Some(profile) => {
            let found = accel.and_then(|a| {
                a.mig_profiles
                    .iter()
                    .position(|m| &m.name == profile)
                    .map(|i| (i, &a.mig_profiles[i]))
            });
            match found {
                Some((i, m)) => (
                    PoolKind {
                        accelerator: p.accelerator,
                        partition: Partition::Mig(i as u16),
                        unit_memory: m.memory,
                        reach: ONLINE,
                    },
                    p.count.saturating_mul(m.instances),
                ),
                None => (
                    PoolKind {
                        accelerator: p.accelerator,
                        partition: Partition::UnknownMig,
                        unit_memory: 0,
                        reach: ONLINE,
                    },
                    0,
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::ir::{IrBuilder, gib, ms};

    #[test]
    fn pools_kinds_offers_and_regions() {
        let b = IrBuilder::new();
        let ir = b
            .target("a", |t| {
                t.region("eu")
                    .pool("l4", "L4", 8)
                    .mig_pool("h", "H100", 2, "1g.10gb")
                    .local_data("imgs", ms(2))
                    .service("object_store", Maturity::Preview)
            })
            .target("b", |t| t.pool("l4", "L4", 4).remote_data("imgs", ms(80)))
            .target("c", |t| t.region("eu"))
            .workload("w", |w| {
                w.data("imgs", None, crate::ir::Classification::Public)
            })
            .build();
        let ix = EstateIndex::build(&ir);
        assert_eq!(ix.kinds.len(), 2);
        assert_eq!(ix.target_pools(0).len(), 2);
        assert_eq!(ix.target_pools(0)[1].units, 14);
        assert_eq!(ix.kinds[1].unit_memory, gib(10));
        assert_eq!(ix.target_pools(1)[0].kind, ix.target_pools(0)[0].kind);
        assert!(ix.target_pools(2).is_empty());
        assert_eq!(ix.worst_data_latency(0, 0), Some(ms(2)));
        assert_eq!(ix.worst_data_latency(0, 1), Some(ms(80)));
        assert_eq!(ix.worst_data_latency(0, 2), None);
        let object_store = ServiceId(0);
        assert_eq!(ix.maturity(0, object_store), Maturity::Preview);
        assert_eq!(ix.maturity(1, object_store), Maturity::Absent);
        assert_eq!(ix.region[0], ix.region[2]);
        assert_ne!(ix.region[0], ix.region[1]);
    }
}
