//! `berth plan --exact` against the heuristic on the generated estates of the MIP comparison:
//! replicas placed per class (production, staging, development, experiment), cost per day,
//! and the time of each (the whole solve: eligibility, policy, assignment).
//!
//! `cargo run --release -p berth-compiler --features testing,exact --example exact_vs_heuristic
//! [SIZES [SEEDS [SECONDS]]]` (defaults `50x10,100x20,200x30`, `1-3`, 60).

use berth_compiler::ir::Ir;
use berth_compiler::placement;
use berth_compiler::plan::Plan;
use berth_compiler::source::SourceMap;
use berth_compiler::testing::ir::{EstateShape, estate};
use berth_compiler::testing::placed_by_class;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let sizes: Vec<(usize, usize)> = args
        .first()
        .map_or("50x10,100x20,200x30", String::as_str)
        .split(',')
        .filter_map(|s| {
            let (w, t) = s.split_once('x')?;
            Some((w.parse().ok()?, t.parse().ok()?))
        })
        .collect();
    let (lo, hi) = args
        .get(1)
        .and_then(|s| s.split_once('-'))
        .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
        .unwrap_or((1u64, 3u64));
    let limit: f64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(60.0);
    let at: jiff::Timestamp = "2025-06-04T10:00:00Z".parse().expect("instant");
    let sources = SourceMap::new();
    println!("instance  heuristic placed (p/s/d/e) cost ms | exact placed cost ms outcome");
    for &(workloads, targets) in &sizes {
        for seed in lo..=hi {
            let ir = estate(seed, EstateShape { workloads, targets });
            let t = Instant::now();
            let h = placement::solve(&ir, &sources, at).plan(at, "", "");
            let h_ms = t.elapsed().as_secs_f64() * 1e3;
            let t = Instant::now();
            let (solved, outcome) = placement::solve_exact(&ir, &sources, at, limit);
            let e = solved.plan(at, "", "");
            let e_ms = t.elapsed().as_secs_f64() * 1e3;
            println!(
                "w{workloads}_t{targets}_s{seed}  {} {} {h_ms:.0} | {} {} {e_ms:.0} {outcome}",
                classes(&ir, &h),
                cost(&h),
                classes(&ir, &e),
                cost(&e),
            );
        }
    }
}

fn classes(ir: &Ir, plan: &Plan) -> String {
    let [p, s, d, e] = placed_by_class(ir, plan);
    format!("{p}/{s}/{d}/{e}")
}

fn cost(plan: &Plan) -> String {
    berth_compiler::ir::Money(plan.workloads.iter().map(|w| w.cost_per_day.0).sum()).to_string()
}
