//! Dense estates written as `.berth` specs (issue 22): a fleet of similar GPU clusters where
//! nearly every workload fits nearly every target, the common case the sparse generated estate
//! of [`super::ir::estate`] does not show.
//!
//! Targets are drawn from a fixed number of distinct *profiles* (pools by accelerator, class
//! and runtime kind, price); a target's name, region and capacities (pool counts, CPU,
//! memory) vary on their own. Workloads are drawn from a fixed number of distinct
//! *requirement sets* (class, kind, GPUs per replica, accelerators accepted, GPU memory floor,
//! CPU and memory); names and replica counts vary. About one workload in twenty asks
//! `spread = per_target(1)`. Pools are sized so that the demand is about 80% of the GPUs, so
//! capacity binds here and there without the estate being hopeless.
//!
//! Written over several files (targets and workloads each split into `files` parts), as a
//! large spec is. Deterministic: the same arguments give byte-identical text.

use crate::splitmix::SplitMix64;
use std::fmt::Write;

/// The shape of a dense estate.
#[derive(Clone, Copy, Debug)]
pub struct DenseShape {
    pub workloads: usize,
    pub targets: usize,
    /// Distinct target profiles (the "about 200" for 20,000 targets).
    pub profiles: usize,
    /// Distinct workload requirement sets.
    pub requirement_sets: usize,
    /// Files the targets and the workloads are each split over.
    pub files: usize,
    pub seed: u64,
}

impl DenseShape {
    /// The two sizes share everything but the counts: 10,000 × 2,000 (20 profiles,
    /// 10 files) and 100,000 × 20,000 (200 profiles, 100 files).
    pub fn new(workloads: usize, targets: usize) -> Self {
        DenseShape {
            workloads,
            targets,
            profiles: (targets / 100).clamp(1, 200),
            requirement_sets: (workloads / 100).clamp(1, 300),
            files: (targets / 200).clamp(1, 100),
            seed: 1,
        }
    }
}

/// The instant the dense estates are planned at by the benchmarks.
pub const AT: &str = "2025-06-04T10:00:00Z";

const ACCELERATORS: [&str; 3] = ["H100", "A100_80GB", "L40S"];
const REGIONS: usize = 12;

struct Profile {
    /// (accelerator, relative size: pool count = size × base).
    pools: Vec<(usize, u32)>,
    gpu_hour_cents: u64,
}

struct Requirements {
    class: &'static str,
    kind: &'static str,
    gpu: u32,
    accelerators: Vec<usize>,
    gpu_memory_gb: Option<u32>,
    cpu: u32,
    memory_gib: u32,
}

struct Rng(SplitMix64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        (self.0.next() % n.max(1) as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.0.next() % 100 < percent
    }
}

/// The spec's files: `(file name, text)`, names sorting in their order.
pub fn dense_spec(shape: DenseShape) -> Vec<(String, String)> {
    let mut rng = Rng(SplitMix64(shape.seed.wrapping_mul(0x2545_F491_4F6C_DD1D)));
    let profiles: Vec<Profile> = (0..shape.profiles.max(1))
        .map(|_| {
            let first = rng.below(3);
            let mut pools = vec![(first, 1 + rng.below(3) as u32)];
            if rng.chance(50) {
                let second = (first + 1 + rng.below(2)) % 3;
                pools.push((second, 1 + rng.below(3) as u32));
            }
            Profile {
                pools,
                gpu_hour_cents: 150 + rng.below(350) as u64,
            }
        })
        .collect();
    let classes = ["production", "staging", "development", "experiment"];
    let sets: Vec<Requirements> = (0..shape.requirement_sets.max(1))
        .map(|_| {
            let accelerators = if rng.chance(30) {
                let skip = rng.below(3);
                (0..3).filter(|&a| a != skip).collect()
            } else {
                vec![0, 1, 2]
            };
            Requirements {
                class: classes[rng.below(4)],
                kind: if rng.chance(60) { "service" } else { "batch" },
                gpu: [1, 1, 2, 4][rng.below(4)],
                accelerators,
                gpu_memory_gb: rng.chance(20).then_some(60),
                cpu: [2, 4, 8][rng.below(3)],
                memory_gib: [8, 16, 32][rng.below(3)],
            }
        })
        .collect();

    // Workloads first: their demand sizes the pools.
    struct Wl {
        set: usize,
        replicas: u32,
        per_target: bool,
    }
    let workloads: Vec<Wl> = (0..shape.workloads)
        .map(|_| Wl {
            set: rng.below(sets.len()),
            replicas: 1 + rng.below(4) as u32,
            per_target: rng.chance(5),
        })
        .collect();
    let demand: u64 = workloads
        .iter()
        .map(|w| u64::from(w.replicas) * u64::from(sets[w.set].gpu))
        .sum();
    // Each target's pools: profile size × base, base chosen so the fleet holds demand / 0.8.
    let target_profiles: Vec<usize> = (0..shape.targets)
        .map(|_| rng.below(profiles.len()))
        .collect();
    let size_units: u64 = target_profiles
        .iter()
        .map(|&p| {
            profiles[p]
                .pools
                .iter()
                .map(|x| u64::from(x.1))
                .sum::<u64>()
        })
        .sum();
    let base = (demand * 5 / 4).div_ceil(size_units.max(1)).max(1);

    let files = shape.files.max(1);
    let head = "use std.gpu.{H100, A100_80GB, L40S}\n";
    let mut target_files = vec![String::from(head); files];
    for (t, &p) in target_profiles.iter().enumerate() {
        let profile = &profiles[p];
        let out = &mut target_files[t * files / shape.targets.max(1)];
        let gpus: u64 = profile.pools.iter().map(|x| u64::from(x.1) * base).sum();
        let _ = writeln!(out, "\ntarget t{t} {{");
        let _ = writeln!(out, "  class = datacenter");
        let _ = writeln!(
            out,
            "  runtime = kubernetes {{ context = \"t{t}\", namespace = \"ml\" }}"
        );
        let _ = writeln!(out, "  region = \"r{}\"", rng.below(REGIONS));
        let _ = writeln!(out, "  connectivity = connected");
        let _ = writeln!(out, "  cpu = {}", 64 + gpus * 16);
        let _ = writeln!(out, "  memory = {}GiB", 256 + gpus * 64);
        for (k, (accel, size)) in profile.pools.iter().enumerate() {
            // Capacities vary within a profile: ±1 on the base.
            let count = (u64::from(*size) * base + rng.below(3) as u64).saturating_sub(1);
            let _ = writeln!(
                out,
                "  pool p{k} {{ accelerator = {}  count = {} }}",
                ACCELERATORS[*accel],
                count.max(1)
            );
        }
        let c = profile.gpu_hour_cents;
        let _ = writeln!(out, "  cost = {{ gpu_hour: {}.{:02} }}", c / 100, c % 100);
        let _ = writeln!(out, "}}");
    }
    let mut workload_files = vec![String::from(head); files];
    let mut placement = String::from("// spread rules\n");
    for (w, wl) in workloads.iter().enumerate() {
        let r = &sets[wl.set];
        let out = &mut workload_files[w * files / shape.workloads.max(1)];
        let _ = writeln!(out, "\nworkload w{w} {{");
        let _ = writeln!(out, "  release = \"1.0.0\"");
        let _ = writeln!(out, "  image = \"registry.example.com/bench/w{w}:1.0.0\"");
        let _ = writeln!(out, "  kind = {}", r.kind);
        let _ = writeln!(out, "  class = {}", r.class);
        let _ = writeln!(out, "  identity = service_account(\"w{w}\")");
        let _ = writeln!(out, "  replicas = {}", wl.replicas);
        let memory = r
            .gpu_memory_gb
            .map(|g| format!("  gpu_memory = {g}GB"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  resources {{ cpu = {}  memory = {}GiB  gpu = {}{memory} }}",
            r.cpu, r.memory_gib, r.gpu
        );
        let names: Vec<&str> = r.accelerators.iter().map(|&a| ACCELERATORS[a]).collect();
        let _ = writeln!(out, "  accelerators = [{}]", names.join(", "));
        let _ = writeln!(out, "  environments = [datacenter]");
        let _ = writeln!(out, "}}");
        if wl.per_target {
            let _ = writeln!(placement, "placement w{w} {{ spread = per_target(1) }}");
        }
    }
    let width = files.to_string().len();
    let mut out = Vec::with_capacity(2 * files + 1);
    for (i, text) in target_files.into_iter().enumerate() {
        out.push((format!("targets_{i:0width$}.berth"), text));
    }
    for (i, text) in workload_files.into_iter().enumerate() {
        out.push((format!("workloads_{i:0width$}.berth"), text));
    }
    out.push(("placement.berth".into(), placement));
    out
}

/// The dense spec of `shape` compiled to its IR (a generated spec that does not compile is a
/// bug here, and panics saying so).
pub fn dense_ir(shape: DenseShape) -> crate::ir::Ir {
    let mut sources = crate::source::SourceMap::new();
    for (name, text) in dense_spec(shape) {
        sources.add(name, text);
    }
    let compiled = crate::driver::compile(&sources);
    match compiled.ir {
        Some(ir) => ir,
        None => panic!(
            "the dense spec does not compile: {:?}",
            compiled.diagnostics.first()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_split() {
        let shape = DenseShape::new(300, 60);
        let a = dense_spec(shape);
        assert_eq!(a, dense_spec(shape));
        assert_eq!(a.len(), 2 * shape.files + 1);
        let text: String = a.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(text.matches("\ntarget ").count(), 60);
        assert_eq!(text.matches("\nworkload ").count(), 300);
        let ir = dense_ir(shape);
        assert_eq!((ir.workloads.len(), ir.targets.len()), (300, 60));
    }
}
