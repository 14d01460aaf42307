//! Exports generated placement instances for the exact-solver comparison
//! (`bench/mip/compare.py`; method and figures in `docs/performance.md`).
//!
//! For each size, seed and capacity level it generates an estate with the test kit's generator,
//! runs berth's own stages (index, eligibility, policy, assignment), and writes one JSON file
//! holding the assignment problem *as the engine sees it after eligibility and policy* — every
//! workload's options (target, pool, cost, fallback, objectives) straight from
//! `Assignment::options`, every capacity from `EstateIndex` and the IR, every cap from
//! `PolicyContext` — together with berth's own answer and how long it took. Nothing is
//! re-derived here, so the MIP and the heuristic solve the same problem.
//!
//! ```sh
//! cargo run --release -p berth-compiler --example mip_instances -- OUT_DIR [SIZES] [SEEDS] [CAPACITY%]
//! # SIZES like 50x10,100x20 ; SEEDS like 1-5 ; CAPACITY% like 100,50,30,p100,p50
//! ```
//!
//! A level written `pN` is a *placeable* instance: the same estate with N% of every capacity
//! (GPU pools, CPU and memory per target, quotas, entitlement caps and window limits), every
//! workload's replicas cut to what it could place alone (none without a permitted option, no
//! more than its spread and caps allow), so that an exact solver can usually place every
//! replica and the question "does berth place everything when that is possible?" is asked
//! literally. Given COUNTS_DIR (what `compare.py --write-counts` wrote for the same instances),
//! each workload of a placeable instance is then cut to the replicas the exact solver placed,
//! which makes the instance placeable in full by construction.
//!
//! ```sh
//! cargo run --release -p berth-compiler --example mip_instances -- OUT_DIR SIZES SEEDS p100 COUNTS_DIR
//! ```

use berth_compiler::ir::{Ir, Preference};
use berth_compiler::placement::assign::{self, Assignment, NO_POOL};
use berth_compiler::placement::eligibility::{EligibilityMatrix, gpu_units};
use berth_compiler::placement::index::EstateIndex;
use berth_compiler::placement::policy::PolicyContext;
use berth_compiler::testing::ir::{
    EstateShape, estate, scale_cpu_memory_and_caps, scale_gpu_pools,
};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Assignment runs timed per instance (the best is reported; small instances take microseconds).
const TIMED_RUNS: usize = 5;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let out = args.first().map_or("target/mip-instances", String::as_str);
    let sizes = parse_sizes(
        args.get(1)
            .map_or("50x10,100x20,200x30,500x50", String::as_str),
    );
    let seeds = parse_range(args.get(2).map_or("1-5", String::as_str));
    let levels: Vec<Level> = args
        .get(3)
        .map_or("100,50,30", String::as_str)
        .split(',')
        .filter_map(Level::parse)
        .collect();
    let counts_dir = args.get(4);
    std::fs::create_dir_all(out).expect("create output directory");
    let at: jiff::Timestamp = "2025-06-04T10:00:00Z".parse().expect("instant");
    for &(workloads, targets) in &sizes {
        for &seed in &seeds {
            for level in &levels {
                let mut ir = estate(seed, EstateShape { workloads, targets });
                scale_gpu_pools(&mut ir, level.capacity);
                if level.placeable {
                    scale_cpu_memory_and_caps(&mut ir, level.capacity);
                    trim_to_placeable(&mut ir, at);
                }
                let file = format!("w{workloads}_t{targets}_s{seed}_c{}.json", level.tag());
                if let Some(dir) = counts_dir.filter(|_| level.placeable) {
                    cut_to_counts(&mut ir, &format!("{dir}/{file}"));
                }
                let doc = instance(&ir, at, seed, level);
                let name = format!("{out}/{file}");
                std::fs::write(&name, serde_json::to_vec(&doc).expect("json")).expect("write");
                println!("{name}");
            }
        }
    }
}

/// A capacity level: `N` (percent) or `pN` (placeable, see the module docs).
struct Level {
    capacity: u32,
    placeable: bool,
}

impl Level {
    fn parse(s: &str) -> Option<Level> {
        let (placeable, n) = match s.strip_prefix('p') {
            Some(n) => (true, n),
            None => (false, s),
        };
        Some(Level {
            capacity: n.parse().ok()?,
            placeable,
        })
    }

    fn tag(&self) -> String {
        format!("{}{}", if self.placeable { "p" } else { "" }, self.capacity)
    }
}

/// Cuts every workload's replicas to what it could place alone: none without an option, at
/// most `per_target(n)` × its targets and `per_region(n)` × its regions, at most what each of
/// its caps holds. Whether all of them fit together is left to the solvers.
fn trim_to_placeable(ir: &mut Ir, at: jiff::Timestamp) {
    let index = EstateIndex::build(ir);
    let mut matrix = EligibilityMatrix::compute(ir, &index);
    let policy = PolicyContext::new(ir, at);
    policy.apply(ir, &index, &mut matrix);
    let options = assign::build_options(ir, &index, &matrix, &policy);
    for (w, opts) in options.iter().enumerate() {
        let mut targets: Vec<u32> = opts.iter().map(|o| o.target).collect();
        targets.sort_unstable();
        targets.dedup();
        let mut regions: Vec<u32> = targets.iter().map(|&t| index.region[t as usize]).collect();
        regions.sort_unstable();
        regions.dedup();
        let units = u64::from(gpu_units(&ir.workloads[w]));
        let placement = &ir.workloads[w].placement;
        let mut most = u64::from(ir.workloads[w].replicas);
        if let Some(n) = placement.per_target {
            most = most.min(u64::from(n) * targets.len() as u64);
        }
        if let Some(n) = placement.per_region {
            most = most.min(u64::from(n) * regions.len() as u64);
        }
        for &c in &policy.workload_caps[w] {
            if let Some(fit) = policy.caps[c as usize].max.checked_div(units) {
                most = most.min(fit);
            }
        }
        if opts.is_empty() {
            most = 0;
        }
        ir.workloads[w].replicas = most as u32;
    }
}

/// Sets every workload's replicas to the count the exact solver placed (a JSON list, one
/// number per workload).
fn cut_to_counts(ir: &mut Ir, path: &str) {
    let Ok(text) = std::fs::read(path) else {
        eprintln!("{path}: no counts (the MIP did not solve it); left uncut");
        return;
    };
    let counts: Vec<u32> = serde_json::from_slice(&text).expect("counts: a list of numbers");
    assert_eq!(counts.len(), ir.workloads.len(), "counts for {path}");
    for (w, n) in ir.workloads.iter_mut().zip(counts) {
        w.replicas = n;
    }
}

fn instance(ir: &Ir, at: jiff::Timestamp, seed: u64, level: &Level) -> Value {
    // The stages exactly as `placement::solve` runs them, timed.
    let t = Instant::now();
    let index = EstateIndex::build(ir);
    let mut matrix = EligibilityMatrix::compute(ir, &index);
    let policy = PolicyContext::new(ir, at);
    policy.apply(ir, &index, &mut matrix);
    let before_assign = t.elapsed();
    let mut assign_times: Vec<Duration> = Vec::new();
    let mut assignment = None;
    for _ in 0..TIMED_RUNS {
        let t = Instant::now();
        let a = assign::assign(ir, &index, &matrix, &policy);
        assign_times.push(t.elapsed());
        assignment = Some(a);
    }
    let a = assignment.expect("at least one run");
    let assign_time = assign_times.iter().min().copied().unwrap_or_default();

    json!({
        "workloads_n": ir.workloads.len(),
        "targets_n": ir.targets.len(),
        "seed": seed,
        "capacity_percent": level.capacity,
        "placeable": level.placeable,
        "berth_assign_ms": assign_time.as_secs_f64() * 1e3,
        "berth_solve_ms": (before_assign + assign_time).as_secs_f64() * 1e3,
        "pools": index.pools.iter().map(|p| p.units).collect::<Vec<_>>(),
        "targets": ir.targets.iter().enumerate().map(|(t, target)| json!({
            "cpu_millis": target.cpu_millis,
            "memory": target.memory,
            "region": index.region[t],
        })).collect::<Vec<_>>(),
        "caps": policy.caps.iter().map(|c| c.max).collect::<Vec<_>>(),
        "workloads": (0..ir.workloads.len()).map(|w| workload(ir, &policy, &a, w)).collect::<Vec<_>>(),
    })
}

fn workload(ir: &Ir, policy: &PolicyContext, a: &Assignment, w: usize) -> Value {
    let workload = &ir.workloads[w];
    let prefs: Vec<&str> = assign::preferences(ir, w)
        .iter()
        .map(|p| match p {
            Preference::LowestCost => "cost",
            Preference::LowestDataLatency => "data_latency",
        })
        .collect();
    let units = gpu_units(workload);
    json!({
        "name": workload.name,
        "class": format!("{:?}", workload.class),
        "replicas": workload.replicas,
        "gpu_units": units,
        "cpu_millis": workload.resources.cpu_millis,
        "memory": workload.resources.memory,
        // Caps count GPUs; a workload without GPUs never counts against one.
        "caps": if units > 0 { policy.workload_caps[w].clone() } else { Vec::new() },
        "per_target": workload.placement.per_target,
        "per_region": workload.placement.per_region,
        "isolate_from": a.partners(w),
        "prefer": prefs,
        "options": a.options[w].iter().map(|o| json!({
            "target": o.target,
            "pool": (o.flat_pool != NO_POOL).then_some(o.flat_pool),
            "cost_per_day": assign::replica_cost_per_day(ir, w, o.target as usize).0,
            "fallback": o.fallback,
            "objectives": o.objectives,
        })).collect::<Vec<_>>(),
        "berth": a.slots[w].iter().map(|(i, n)| [*i, *n]).collect::<Vec<_>>(),
    })
}

fn parse_sizes(s: &str) -> Vec<(usize, usize)> {
    s.split(',')
        .filter_map(|x| {
            let (w, t) = x.split_once('x')?;
            Some((w.parse().ok()?, t.parse().ok()?))
        })
        .collect()
}

fn parse_range(s: &str) -> Vec<u64> {
    match s.split_once('-') {
        Some((lo, hi)) => match (lo.parse::<u64>(), hi.parse::<u64>()) {
            (Ok(lo), Ok(hi)) => (lo..=hi).collect(),
            _ => Vec::new(),
        },
        None => s.split(',').filter_map(|x| x.parse().ok()).collect(),
    }
}
