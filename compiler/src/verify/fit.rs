//! Technical fit of one workload on one target (and pool), recomputed from the IR alone.
//!
//! This is the verifier's own reading of "Meaning of placement and policy" in the language
//! reference; it deliberately shares nothing with the placement engine's eligibility code.
//! Checks run in a fixed order and the first failing requirement is reported.

use crate::ir::{
    Accelerator, Connectivity, DataLocality, EnvClass, Ir, Maturity, Pool, Target, TargetId,
    Workload,
};
use crate::plan::{DataBinding, ServiceBinding};

/// GPUs (or MIG slices) one replica of `w` takes from one pool; 0 for a CPU-only workload.
///
/// A workload that names a MIG profile takes at least one slice even when it leaves `gpu`
/// at zero.
pub(super) fn gpu_units(w: &Workload) -> u32 {
    match w.resources.mig {
        Some(_) => w.resources.gpu.max(1),
        None => w.resources.gpu,
    }
}

pub(super) fn accelerator<'a>(ir: &'a Ir, pool: &Pool) -> Option<&'a Accelerator> {
    ir.accelerators.get(pool.accelerator.index())
}

/// Memory of one schedulable device of the pool: the MIG instance's for a partitioned pool,
/// the whole device's otherwise (0 when the IR names an unknown accelerator or profile).
pub(super) fn device_memory(ir: &Ir, pool: &Pool) -> u64 {
    let Some(acc) = accelerator(ir, pool) else {
        return 0;
    };
    match &pool.mig {
        None => acc.memory,
        Some(profile) => acc
            .mig_profiles
            .iter()
            .find(|p| &p.name == profile)
            .map_or(0, |p| p.memory),
    }
}

/// Devices, or MIG slices for a partitioned pool, as far as a live reading allows
/// (`ir::Pool::capped`).
pub(super) fn pool_capacity(ir: &Ir, pool: &Pool) -> u64 {
    let count = u64::from(pool.count);
    let declared = match &pool.mig {
        None => count,
        Some(profile) => accelerator(ir, pool)
            .and_then(|a| a.mig_profiles.iter().find(|p| &p.name == profile))
            .map_or(0, |p| count.saturating_mul(u64::from(p.instances))),
    };
    pool.capped(declared)
}

/// The first requirement a (workload, target, pool) combination fails.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unfit {
    /// The target's class is not among the workload's approved environments.
    Environment { class: EnvClass },
    /// The target's link is worse than the workload tolerates.
    Connectivity {
        tolerated: Connectivity,
        offered: Connectivity,
    },
    /// One replica's CPU (millicores) exceeds the whole target.
    Cpu { required: u64, offered: u64 },
    /// One replica's memory (bytes) exceeds the whole target.
    Memory { required: u64, offered: u64 },
    /// The workload needs GPUs but the placement names no pool.
    NeedsPool { gpus: u32 },
    /// The workload needs no GPU but the placement names a pool.
    NeedsNoPool { pool: String },
    /// The pool's accelerator is not one the workload accepts.
    Accelerator { pool: String, accelerator: String },
    /// The workload asks for MIG slices of one profile and the pool offers another (or
    /// whole devices), or the other way round.
    MigProfile {
        pool: String,
        required: Option<String>,
        offered: Option<String>,
    },
    /// Per-GPU memory (bytes) the workload states exceeds one device of the pool.
    GpuMemory {
        pool: String,
        required: u64,
        offered: u64,
    },
    /// One replica needs more GPUs than the whole pool has.
    PoolTooSmall {
        pool: String,
        required: u32,
        capacity: u64,
    },
    /// No variant of the workload's model fits the pool.
    NoVariant { model: String, pool: Option<String> },
    /// Variants fit the pool, but none can be staged on the target: it is disconnected, not
    /// run by an edge agent, does not cache the model, and has no mirror for them.
    ModelUnreachable {
        model: String,
        pool: Option<String>,
        reach: UnstageableOn,
    },
    /// The target offers no endpoint for a data set the workload needs.
    DataMissing { data: String },
    /// The data set is farther (nanoseconds) than the workload's `max_latency`.
    DataLatency {
        data: String,
        max_latency: u64,
        latency: u64,
    },
    /// A required service is absent or below the required maturity.
    Service {
        service: String,
        min: Maturity,
        offered: Maturity,
    },
}

/// What a fitting placement must record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Fit {
    /// Index of the model variant the placement uses (first that fits), when there is a model.
    pub variant: Option<usize>,
    /// Expected data bindings, in the workload's order.
    pub data: Vec<DataBinding>,
    /// Expected service bindings, in the workload's order.
    pub services: Vec<ServiceBinding>,
}

/// Whether `w` can run on `target` using `pool` (an index into its pools; `None` for a
/// placement without a GPU pool).
pub(super) fn fit(ir: &Ir, w: &Workload, t: &Target, pool: Option<usize>) -> Result<Fit, Unfit> {
    if !w.environments.is_empty() && !w.environments.contains(&t.class) {
        return Err(Unfit::Environment { class: t.class });
    }
    if t.connectivity < w.connectivity {
        return Err(Unfit::Connectivity {
            tolerated: w.connectivity,
            offered: t.connectivity,
        });
    }
    if w.resources.cpu_millis > t.cpu_millis {
        return Err(Unfit::Cpu {
            required: w.resources.cpu_millis,
            offered: t.cpu_millis,
        });
    }
    if w.resources.memory > t.memory {
        return Err(Unfit::Memory {
            required: w.resources.memory,
            offered: t.memory,
        });
    }
    let units = gpu_units(w);
    let pool = match (units, pool.and_then(|p| t.pools.get(p))) {
        (0, None) => None,
        (0, Some(p)) => {
            return Err(Unfit::NeedsNoPool {
                pool: p.name.clone(),
            });
        }
        (gpus, None) => return Err(Unfit::NeedsPool { gpus }),
        (_, Some(p)) => {
            pool_fit(ir, w, p, units)?;
            Some(p)
        }
    };
    let variant = match w.model {
        None => None,
        Some(m) => {
            let model = || {
                ir.models
                    .get(m.index())
                    .map_or_else(String::new, |m| m.name.clone())
            };
            match first_variant(ir, m, pool, t) {
                VariantChoice::Uses(v) => Some(v),
                VariantChoice::NoneFits => {
                    return Err(Unfit::NoVariant {
                        model: model(),
                        pool: pool.map(|p| p.name.clone()),
                    });
                }
                VariantChoice::NoneStageable => {
                    return Err(Unfit::ModelUnreachable {
                        model: model(),
                        pool: pool.map(|p| p.name.clone()),
                        reach: if matches!(t.runtime, crate::ir::Runtime::Edge { .. }) {
                            UnstageableOn::EdgeAgent
                        } else if t.mirrors.is_empty() {
                            UnstageableOn::DisconnectedWithoutMirror
                        } else {
                            UnstageableOn::DisconnectedWithMirror
                        },
                    });
                }
            }
        }
    };
    Ok(Fit {
        variant,
        data: data_bindings(w, t)?,
        services: service_bindings(ir, w, t)?,
    })
}

fn pool_fit(ir: &Ir, w: &Workload, p: &Pool, units: u32) -> Result<(), Unfit> {
    if !w.accelerators.is_empty() && !w.accelerators.contains(&p.accelerator) {
        return Err(Unfit::Accelerator {
            pool: p.name.clone(),
            accelerator: accelerator(ir, p).map_or_else(String::new, |a| a.name.clone()),
        });
    }
    if w.resources.mig != p.mig {
        return Err(Unfit::MigProfile {
            pool: p.name.clone(),
            required: w.resources.mig.clone(),
            offered: p.mig.clone(),
        });
    }
    let offered = device_memory(ir, p);
    if let Some(required) = w.resources.gpu_memory.filter(|&m| m > offered) {
        return Err(Unfit::GpuMemory {
            pool: p.name.clone(),
            required,
            offered,
        });
    }
    let capacity = pool_capacity(ir, p);
    if u64::from(units) > capacity {
        return Err(Unfit::PoolTooSmall {
            pool: p.name.clone(),
            required: units,
            capacity,
        });
    }
    Ok(())
}

/// Which variant a placement uses.
enum VariantChoice {
    Uses(usize),
    NoneFits,
    /// Variants fit, none can be staged on the target.
    NoneStageable,
}

/// The first variant, in written order, that fits `pool` and can be staged on `t`: its
/// accelerator list (if any) names the pool's accelerator and its `gpu_memory` fits one
/// device of the pool (a MIG instance for a partitioned pool). Without a pool (a CPU-only
/// placement) the first variant that names no accelerator, which must be stageable.
fn first_variant(
    ir: &Ir,
    id: crate::ir::ModelId,
    pool: Option<&Pool>,
    t: &Target,
) -> VariantChoice {
    let Some(model) = ir.models.get(id.index()) else {
        return VariantChoice::NoneFits;
    };
    let fits = |v: &crate::ir::Variant| match pool {
        None => v.accelerators.is_empty(),
        Some(p) => {
            (v.accelerators.is_empty() || v.accelerators.contains(&p.accelerator))
                && v.gpu_memory <= device_memory(ir, p)
        }
    };
    let mut fitting = model.variants.iter().enumerate().filter(|(_, v)| fits(v));
    if pool.is_none() {
        // A CPU-only placement has one candidate: the first variant without accelerators.
        return match fitting.next() {
            None => VariantChoice::NoneFits,
            Some((i, v)) if stageable(t, id, &v.artifact) => VariantChoice::Uses(i),
            Some(_) => VariantChoice::NoneStageable,
        };
    }
    let mut any = false;
    for (i, v) in fitting {
        if stageable(t, id, &v.artifact) {
            return VariantChoice::Uses(i);
        }
        any = true;
    }
    if any {
        VariantChoice::NoneStageable
    } else {
        VariantChoice::NoneFits
    }
}

/// What kind of target could not stage a model, for the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnstageableOn {
    /// An edge agent fetches only what berth fetches.
    EdgeAgent,
    DisconnectedWithoutMirror,
    /// Its mirrors serve `oci://` artifacts only.
    DisconnectedWithMirror,
}

/// Whether an artifact of `model` at `artifact` can be staged on `t`, the verifier's reading
/// of "Model staging" in `docs/placement.md`: what a target caches is there; an edge agent
/// fetches (or is carried) only what berth fetches; any other target that is not
/// disconnected fetches from the source, and a disconnected one stages `oci://` artifacts
/// from its registry mirrors.
pub(super) fn stageable(t: &Target, model: crate::ir::ModelId, artifact: &str) -> bool {
    if t.cached_models.contains(&model) {
        return true;
    }
    if matches!(t.runtime, crate::ir::Runtime::Edge { .. }) {
        return crate::plan::berth_fetches(artifact);
    }
    t.connectivity != Connectivity::Disconnected
        || (!t.mirrors.is_empty() && artifact.starts_with("oci://"))
}

fn data_bindings(w: &Workload, t: &Target) -> Result<Vec<DataBinding>, Unfit> {
    w.data
        .iter()
        .map(|d| {
            let offer =
                t.data
                    .iter()
                    .find(|o| o.name == d.name)
                    .ok_or_else(|| Unfit::DataMissing {
                        data: d.name.clone(),
                    })?;
            if let Some(max) = d.max_latency.filter(|&max| offer.latency > max) {
                return Err(Unfit::DataLatency {
                    data: d.name.clone(),
                    max_latency: max,
                    latency: offer.latency,
                });
            }
            Ok(DataBinding {
                name: d.name.clone(),
                dataset: d.dataset.clone(),
                locality: match offer.locality {
                    DataLocality::Local => "local",
                    DataLocality::Remote => "remote",
                }
                .to_owned(),
                endpoint: offer.endpoint.clone(),
                latency_ns: offer.latency,
            })
        })
        .collect()
}

fn service_bindings(ir: &Ir, w: &Workload, t: &Target) -> Result<Vec<ServiceBinding>, Unfit> {
    w.services
        .iter()
        .map(|req| {
            let name = ir
                .services
                .get(req.service.index())
                .map_or_else(String::new, |s| s.name.clone());
            let offered = t
                .services
                .iter()
                .find(|o| o.service == req.service)
                .map_or(Maturity::Absent, |o| o.maturity);
            if offered < req.min {
                return Err(Unfit::Service {
                    service: name,
                    min: req.min,
                    offered,
                });
            }
            Ok(ServiceBinding {
                service: name,
                maturity: offered.as_str().to_owned(),
            })
        })
        .collect()
}

/// Whether some way of running `w` on target `t` fits (any pool, or none for a CPU-only
/// workload). When no pool fits, the error is that of the pool that came closest (failed at
/// the latest requirement; the first such pool in written order), which names the most
/// telling reason.
pub(super) fn target_fit(ir: &Ir, w: &Workload, t: TargetId) -> Result<(), Unfit> {
    let Some(target) = ir.targets.get(t.index()) else {
        return Err(Unfit::NeedsPool { gpus: gpu_units(w) });
    };
    if gpu_units(w) == 0 || target.pools.is_empty() {
        return fit(ir, w, target, None).map(|_| ());
    }
    let mut closest: Option<Unfit> = None;
    for p in 0..target.pools.len() {
        match fit(ir, w, target, Some(p)) {
            Ok(_) => return Ok(()),
            Err(e) => {
                if closest.as_ref().is_none_or(|c| e.rank() > c.rank()) {
                    closest = Some(e);
                }
            }
        }
    }
    Err(closest.unwrap_or(Unfit::NeedsPool { gpus: gpu_units(w) }))
}

impl Unfit {
    /// Position of the failing requirement in the order [`fit`] checks them.
    fn rank(&self) -> u8 {
        match self {
            Unfit::Environment { .. } => 0,
            Unfit::Connectivity { .. } => 1,
            Unfit::Cpu { .. } => 2,
            Unfit::Memory { .. } => 3,
            Unfit::NeedsPool { .. } | Unfit::NeedsNoPool { .. } => 4,
            Unfit::Accelerator { .. } => 5,
            Unfit::MigProfile { .. } => 6,
            Unfit::GpuMemory { .. } => 7,
            Unfit::PoolTooSmall { .. } => 8,
            Unfit::NoVariant { .. } => 9,
            Unfit::ModelUnreachable { .. } => 10,
            Unfit::DataMissing { .. } | Unfit::DataLatency { .. } => 11,
            Unfit::Service { .. } => 12,
        }
    }
}
