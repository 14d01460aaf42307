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
//! # SIZES like 50x10,100x20 ; SEEDS like 1-5 ; CAPACITY% like 100,50,30
//! ```

use berth_compiler::ir::testkit::{EstateShape, estate};
use berth_compiler::ir::{Ir, Preference};
use berth_compiler::placement::assign::{self, Assignment, NO_POOL};
use berth_compiler::placement::eligibility::{EligibilityMatrix, gpu_units};
use berth_compiler::placement::index::EstateIndex;
use berth_compiler::placement::policy::PolicyContext;
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
    let levels: Vec<u32> = args
        .get(3)
        .map_or("100,50,30", String::as_str)
        .split(',')
        .filter_map(|x| x.parse().ok())
        .collect();
    std::fs::create_dir_all(out).expect("create output directory");
    let at: jiff::Timestamp = "2025-06-04T10:00:00Z".parse().expect("instant");
    for &(workloads, targets) in &sizes {
        for &seed in &seeds {
            for &capacity in &levels {
                let mut ir = estate(seed, EstateShape { workloads, targets });
                scale_gpu_capacity(&mut ir, capacity);
                let doc = instance(&ir, at, seed, capacity);
                let name = format!("{out}/w{workloads}_t{targets}_s{seed}_c{capacity}.json");
                std::fs::write(&name, serde_json::to_vec(&doc).expect("json")).expect("write");
                println!("{name}");
            }
        }
    }
}

/// Tight instances: every GPU pool keeps `percent`% of its devices (at least one).
fn scale_gpu_capacity(ir: &mut Ir, percent: u32) {
    for t in &mut ir.targets {
        for p in &mut t.pools {
            p.count = (u64::from(p.count) * u64::from(percent) / 100).max(1) as u32;
        }
    }
}

fn instance(ir: &Ir, at: jiff::Timestamp, seed: u64, capacity: u32) -> Value {
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
        "capacity_percent": capacity,
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
