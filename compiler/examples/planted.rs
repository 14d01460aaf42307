//! How often the assignment places every replica of an estate known to be placeable in full
//! (`placement::planted`), and how long it takes.
//!
//! ```sh
//! cargo run --release -p berth-compiler --example planted -- [SIZES] [SEEDS]
//! # SIZES like 50x10,500x50 ; SEEDS like 1-20
//! ```

use berth_compiler::ir::WorkloadClass;
use berth_compiler::placement::assign;
use berth_compiler::placement::eligibility::EligibilityMatrix;
use berth_compiler::placement::index::EstateIndex;
use berth_compiler::placement::policy::PolicyContext;
use berth_compiler::testing::ir::{EstateShape, estate};
use berth_compiler::testing::planted::plant;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let sizes: Vec<(usize, usize)> = args
        .first()
        .map_or("50x10,100x20,200x30,500x50", String::as_str)
        .split(',')
        .filter_map(|x| {
            let (w, t) = x.split_once('x')?;
            Some((w.parse().ok()?, t.parse().ok()?))
        })
        .collect();
    let (lo, hi) = args
        .get(1)
        .and_then(|s| s.split_once('-'))
        .and_then(|(a, b)| Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()?)))
        .unwrap_or((1, 10));
    let at: jiff::Timestamp = "2025-06-04T10:00:00Z".parse().expect("instant");
    for &(workloads, targets) in &sizes {
        let (mut full, mut missing, mut total, mut worst_ms) = (0, 0u64, 0u64, 0f64);
        for seed in lo..=hi {
            let mut ir = estate(seed, EstateShape { workloads, targets });
            let planted = plant(&mut ir, at, seed);
            let index = EstateIndex::build(&ir);
            let mut matrix = EligibilityMatrix::compute(&ir, &index);
            let policy = PolicyContext::new(&ir, at);
            policy.apply(&ir, &index, &mut matrix);
            // The planted placement must still be made of options after the cut.
            let probe = assign::build_options(&ir, &index, &matrix, &policy);
            for (w, list) in planted.placement.iter().enumerate() {
                for &(t, p, _) in list {
                    if !probe[w].iter().any(|o| o.target == t && o.pool == p) {
                        eprintln!("  seed {seed}: planted w{w} on t{t} pool {p} is not an option");
                    }
                }
            }
            let started = Instant::now();
            let a = assign::assign(&ir, &index, &matrix, &policy);
            let ms = started.elapsed().as_secs_f64() * 1e3;
            worst_ms = worst_ms.max(ms);
            let mut short = [0u64; 4];
            for (w, wl) in ir.workloads.iter().enumerate() {
                let slot = match wl.class {
                    WorkloadClass::Production => 0,
                    WorkloadClass::Staging => 1,
                    WorkloadClass::Development => 2,
                    WorkloadClass::Experiment => 3,
                };
                short[slot] += u64::from(
                    wl.replicas
                        .checked_sub(a.placed(w))
                        .expect("never more replicas than asked"),
                );
            }
            let m: u64 = short.iter().sum();
            missing += m;
            total += planted.replicas;
            if m == 0 {
                full += 1;
            } else {
                println!(
                    "  {workloads}x{targets} seed {seed}: {m} of {} left out (per class {short:?})",
                    planted.replicas
                );
            }
        }
        println!(
            "{workloads}x{targets}: all placed in {full}/{} ; {missing} of {total} replicas left out ; slowest assignment {worst_ms:.2} ms",
            hi - lo + 1
        );
    }
}
