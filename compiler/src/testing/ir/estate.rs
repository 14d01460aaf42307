//! A deterministic generator of estates: workloads, targets, models and policy of any size
//! from a seed, for property tests and the placement benchmark. Same seed and shape, same IR.
//!
//! The mix is meant to look like the product's use cases (cloud and data-centre GPU pools,
//! factories with L4s, edge boxes with Jetsons, confidential data, team quotas, a peak
//! window) with enough tension that capacity, quotas and policy all bite.

#[cfg(test)]
use super::money;
use super::{GIB, IrBuilder, expr};
use crate::ir::*;
use crate::splitmix::SplitMix64;

/// How big an estate to generate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EstateShape {
    pub workloads: usize,
    pub targets: usize,
}

/// The estate's random choices, drawn from [`SplitMix64`]: the same on every platform.
struct Rng(SplitMix64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next()
    }
    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
    /// True with probability `percent`/100.
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[(self.next() % items.len() as u64) as usize]
    }
    /// Index into cumulative `weights`.
    fn weighted(&mut self, weights: &[u64]) -> usize {
        let total: u64 = weights.iter().sum();
        let mut x = self.next() % total.max(1);
        for (i, w) in weights.iter().enumerate() {
            if x < *w {
                return i;
            }
            x -= w;
        }
        0
    }
}

const CLASSES: [EnvClass; 6] = [
    EnvClass::Cloud,
    EnvClass::Datacenter,
    EnvClass::Factory,
    EnvClass::Branch,
    EnvClass::Edge,
    EnvClass::Airgapped,
];
const CLASS_WEIGHTS: [u64; 6] = [5, 15, 30, 20, 25, 5];
const REGIONS: [&str; 8] = [
    "eu-west",
    "eu-central",
    "eu-south",
    "eu-north",
    "us-east",
    "us-west",
    "ap-south",
    "ap-east",
];
const JURISDICTIONS: [&str; 5] = ["FR", "DE", "IT", "ES", "US"];
const SERVICES: [&str; 6] = [
    "object_store",
    "model_cache",
    "online_prediction",
    "vector_db",
    "feature_store",
    "message_bus",
];

/// Generates an estate of `shape` from `seed`.
pub fn estate(seed: u64, shape: EstateShape) -> Ir {
    let mut rng = Rng(SplitMix64(seed ^ 0x5EED_BE27));
    let n_datasets = (shape.workloads / 50).clamp(4, 200);
    let n_teams = (shape.workloads / 200).clamp(3, 50);
    let mut b = IrBuilder::new();

    for m in 0..(shape.workloads / 500).clamp(2, 20) {
        let big = rng.range(10, 40) * GIB;
        let small = rng.range(2, 6) * GIB;
        b = b.model(&format!("model{m}"), |mb| {
            let mb = mb.variant("fp16", big, &[]);
            if m % 2 == 0 {
                mb.variant(
                    "int8",
                    small,
                    &["L4", "JetsonOrinNano", "JetsonAgxOrin", "T4"],
                )
            } else {
                mb
            }
        });
    }
    let n_models = (shape.workloads / 500).clamp(2, 20);

    for t in 0..shape.targets {
        let class = CLASSES[rng.weighted(&CLASS_WEIGHTS)];
        b = b.target(&format!("t{t}"), |mut tb| {
            tb = tb.class(class);
            if !rng.chance(5) {
                tb = tb.region(rng.pick::<&str>(&REGIONS));
            }
            tb = tb.jurisdiction(rng.pick::<&str>(&JURISDICTIONS));
            let (conn, cpus, mem_gib) = match class {
                EnvClass::Cloud => (Connectivity::Connected, 512, 2048),
                EnvClass::Datacenter => (Connectivity::Connected, 256, 1024),
                EnvClass::Factory => (Connectivity::Intermittent, 64, 256),
                EnvClass::Branch => (
                    *rng.pick(&[Connectivity::Intermittent, Connectivity::Connected]),
                    32,
                    128,
                ),
                EnvClass::Edge => (
                    *rng.pick(&[Connectivity::Disconnected, Connectivity::Intermittent]),
                    16,
                    64,
                ),
                EnvClass::Airgapped => (Connectivity::Disconnected, 128, 512),
            };
            tb = tb.connectivity(conn).cpu_mem(cpus, mem_gib * GIB);
            if conn == Connectivity::Disconnected {
                // A disconnected cluster stages models from its own registry (no random draw,
                // so the rest of the estate is the one it was before mirrors existed).
                tb = tb.mirror(&format!("oci://registry.t{t}.local:5000"));
            }
            let (accels, pools, lo, hi): (&[&str], u64, u64, u64) = match class {
                EnvClass::Cloud => (&["H100", "A100", "L40S", "H200"], 3, 16, 64),
                EnvClass::Datacenter => (&["A100", "L40S", "L4", "H100"], 2, 8, 24),
                EnvClass::Factory => (&["L4", "T4", "A10"], 1, 4, 12),
                EnvClass::Branch => (&["T4", "L4"], 1, 1, 4),
                EnvClass::Edge => (&["JetsonOrinNano", "JetsonAgxOrin"], 1, 1, 2),
                EnvClass::Airgapped => (&["A100", "L40S"], 1, 4, 8),
            };
            let n_pools = rng.range(u64::from(class != EnvClass::Branch), pools);
            for p in 0..n_pools {
                let accel = accels[((p + rng.range(0, 3)) % accels.len() as u64) as usize];
                let mig =
                    (accel == "A100" && rng.chance(50)) || (accel == "H100" && rng.chance(25));
                let name = if mig {
                    format!("{}_mig", accel.to_lowercase())
                } else {
                    accel.to_lowercase()
                };
                let count = rng.range(lo, hi) as u32;
                // Pool names are unique within a target.
                if tb.pools.iter().any(|(_, p)| p.name == name) {
                    continue;
                }
                tb = if mig {
                    tb.mig_pool(&name, accel, count, "1g.10gb")
                } else {
                    tb.pool(&name, accel, count)
                };
            }
            // Data: data set `d` lives in region `d % 8`; sites hold a few of their region's
            // locally, clouds and data centres reach about half of all of them remotely.
            let region = REGIONS
                .iter()
                .position(|r| tb.target.region.as_deref() == Some(*r))
                .unwrap_or(0);
            let mut names: Vec<(usize, bool)> = match class {
                EnvClass::Cloud | EnvClass::Datacenter => (0..n_datasets)
                    .filter(|_| rng.chance(60))
                    .map(|d| (d, false))
                    .collect(),
                _ => (0..rng.range(1, 6))
                    .map(|_| {
                        let k = rng.range(0, (n_datasets as u64 - 1) / 8) as usize;
                        ((k * 8 + region) % n_datasets, true)
                    })
                    .collect(),
            };
            names.sort_unstable();
            names.dedup();
            for (d, local) in names {
                let name = format!("d{d}");
                tb = if local {
                    tb.local_data(&name, rng.range(1, 5) * 1_000_000)
                } else {
                    tb.remote_data(&name, rng.range(10, 90) * 1_000_000)
                };
            }
            for s in SERVICES {
                let m = match rng.weighted(&[10, 20, 70]) {
                    0 => continue,
                    1 => Maturity::Preview,
                    _ => Maturity::Ga,
                };
                tb = tb.service(s, m);
            }
            let base = match class {
                EnvClass::Cloud => rng.range(250, 450),
                EnvClass::Datacenter => rng.range(120, 250),
                EnvClass::Airgapped => rng.range(150, 300),
                _ => rng.range(40, 120),
            };
            if !rng.chance(10) {
                tb = tb.gpu_hour(&format!("{}.{:02}", base / 100, base % 100));
            }
            tb
        });
    }

    let target_names: Vec<String> = (0..shape.targets).map(|t| format!("t{t}")).collect();
    let mut gpu_workloads: Vec<String> = Vec::new();
    for w in 0..shape.workloads {
        let name = format!("w{w}");
        let team = format!("team{}", rng.range(0, n_teams as u64 - 1));
        let class = *rng.pick(WorkloadClass::ALL);
        let kind = *rng.pick(WorkloadKind::ALL);
        let gpu_pick = rng.weighted(&[25, 50, 12, 5, 8]);
        let mut isolate: Option<String> = None;
        if gpu_pick > 0 && !gpu_workloads.is_empty() && rng.chance(5) {
            isolate = Some(rng.pick(&gpu_workloads).clone());
        }
        b = b.workload(&name, |mut wb| {
            wb = wb
                .identity(&team)
                .class(class)
                .kind(kind)
                .replicas(rng.range(1, 4) as u32)
                .cpu_mem(rng.range(1, 8), rng.range(1, 32) * GIB);
            wb = match gpu_pick {
                0 => wb,
                1 => wb.gpu(1),
                2 => wb.gpu(2),
                3 => wb.gpu(4),
                _ => wb.gpu(1).mig("1g.10gb"),
            };
            if gpu_pick > 0 && rng.chance(20) {
                wb = wb.gpu_memory(rng.range(8, 40) * GIB);
            }
            if gpu_pick > 0 && rng.chance(15) {
                let sets: [&[&str]; 3] = [
                    &["H100", "H200", "A100"],
                    &["L4", "L40S", "T4", "A10"],
                    &["JetsonOrinNano", "JetsonAgxOrin", "L4"],
                ];
                wb = wb.accelerators(rng.pick::<&[&str]>(&sets));
            }
            if rng.chance(40) {
                wb = wb.model(&format!("model{}", rng.range(0, n_models as u64 - 1)));
            }
            for _ in 0..rng.range(0, 2) {
                let d = format!("d{}", rng.range(0, n_datasets as u64 - 1));
                if wb.workload.data.iter().any(|x| x.name == d) {
                    continue;
                }
                let latency = rng.chance(50).then(|| rng.range(5, 100) * 1_000_000);
                let classification = Classification::ALL[rng.weighted(&[30, 35, 25, 10])];
                wb = wb.data(&d, latency, classification);
            }
            for _ in 0..rng.weighted(&[50, 40, 10]) {
                let min = if rng.chance(50) {
                    Maturity::Ga
                } else {
                    Maturity::Preview
                };
                let s = rng.pick(&SERVICES);
                if !wb.services.iter().any(|(x, _)| x == s) {
                    wb = wb.service(s, min);
                }
            }
            wb = wb.connectivity(Connectivity::ALL[rng.weighted(&[50, 35, 15])]);
            if rng.chance(30) {
                let mut envs: Vec<EnvClass> =
                    CLASSES.iter().copied().filter(|_| rng.chance(50)).collect();
                if envs.is_empty() {
                    envs.push(*rng.pick(&CLASSES));
                }
                wb = wb.environments(&envs);
            }
            if rng.chance(10) && !target_names.is_empty() {
                let mut c: Vec<&str> = (0..rng.range(3, 12))
                    .map(|_| rng.pick(&target_names).as_str())
                    .collect();
                c.sort_unstable();
                c.dedup();
                wb = wb.candidates(&c);
            }
            if rng.chance(25) {
                wb = wb.per_target(rng.range(1, 2) as u32);
            }
            if rng.chance(10) {
                wb = wb.per_region(rng.range(1, 3) as u32);
            }
            wb = match rng.weighted(&[60, 20, 20]) {
                0 => wb,
                1 => wb.prefer(&[Preference::LowestDataLatency, Preference::LowestCost]),
                _ => wb.prefer(&[Preference::LowestCost, Preference::LowestDataLatency]),
            };
            if rng.chance(10) && !target_names.is_empty() {
                wb = wb.fallback(&[rng.pick(&target_names).as_str()]);
            }
            if let Some(other) = &isolate {
                wb = wb.isolate_from(&[other.as_str()]);
            }
            wb
        });
        if gpu_pick > 0 {
            gpu_workloads.push(name);
        }
    }

    b = b
        .deny(
            "confidential data never leaves the premises",
            expr::data_classified_on(Classification::Confidential, EnvClass::Cloud),
        )
        .deny(
            "restricted data stays in France",
            expr::and(
                expr::any(
                    expr::w(WorkloadField::Data),
                    expr::eq(
                        expr::member(expr::param(), "classification"),
                        expr::val(Value::Classification(Classification::Restricted)),
                    ),
                ),
                expr::ne(
                    expr::t(TargetField::Jurisdiction),
                    expr::val(Value::Str("FR".into())),
                ),
            ),
        );
    for team in 0..n_teams {
        let name = format!("team{team}");
        // One team in ten has no entitlement: its GPU workloads get no GPUs.
        if team % 10 == 9 {
            continue;
        }
        // Caps around what a team of this size asks for, so that some bind.
        let per_team = (shape.workloads / n_teams) as u64;
        let cap = rng
            .chance(30)
            .then(|| rng.range(per_team, 3 * per_team).max(4) as u32);
        let accels: Option<&[&str]> = if rng.chance(10) {
            Some(&["L4", "T4", "A10", "JetsonOrinNano", "JetsonAgxOrin"])
        } else {
            None
        };
        let envs: Option<&[EnvClass]> = if rng.chance(10) {
            Some(&[EnvClass::Factory, EnvClass::Datacenter, EnvClass::Edge])
        } else {
            None
        };
        b = b.entitle(&name, cap, accels, envs);
        if rng.chance(30) {
            b = b.quota(&name, rng.range(per_team, 3 * per_team).max(4) as u32);
        }
    }
    let peak_cap = (shape.workloads as u64 / 2).max(2) as u32;
    b.window("peak", super::WEEKDAYS, "08:00", "18:00", "Europe/Paris")
        .window(
            "night",
            &[Weekday::Sat, Weekday::Sun],
            "22:00",
            "06:00",
            "UTC",
        )
        .limit(Selector::Class(WorkloadClass::Experiment), "peak", peak_cap)
        .limit(Selector::Kind(WorkloadKind::Notebook), "night", peak_cap)
        .approval("500", &["platform-leads"])
        .reclaim(
            Selector::Kind(WorkloadKind::Notebook),
            30 * 60 * 1_000_000_000,
        )
        .build()
}

/// A tighter estate: every GPU pool keeps `percent`% of its devices (at least one).
pub fn scale_gpu_pools(ir: &mut Ir, percent: u32) {
    for t in &mut ir.targets {
        for p in &mut t.pools {
            p.count = (u64::from(p.count) * u64::from(percent) / 100).max(1) as u32;
        }
    }
}

/// A tighter estate: CPU and memory per target, team quotas, entitlement caps and window
/// limits at `percent`%.
pub fn scale_cpu_memory_and_caps(ir: &mut Ir, percent: u32) {
    let scale = |x: u64| x * u64::from(percent) / 100;
    for t in &mut ir.targets {
        t.cpu_millis = scale(t.cpu_millis);
        t.memory = scale(t.memory);
    }
    let scale32 = |x: u32| scale(u64::from(x)).min(u64::from(u32::MAX)) as u32;
    let policy = &mut ir.policy;
    for q in &mut policy.quotas {
        q.max_gpu = scale32(q.max_gpu);
    }
    for e in &mut policy.entitlements {
        e.max_gpu = e.max_gpu.map(scale32);
    }
    for l in &mut policy.limits {
        l.max_gpu = scale32(l.max_gpu);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_estate() {
        let shape = EstateShape {
            workloads: 40,
            targets: 12,
        };
        assert_eq!(estate(7, shape), estate(7, shape));
        assert_ne!(estate(7, shape), estate(8, shape));
        let ir = estate(7, shape);
        assert_eq!(ir.workloads.len(), 40);
        assert_eq!(ir.targets.len(), 12);
        assert_eq!(money("4.10"), Money(4_100_000));
    }
}
