//! "Never infeasible where a solution exists", on estates known to be placeable in full.
//!
//! `placement::planted` places replicas of a generated estate at random under every constraint,
//! then cuts the estate to that placement (GPU pools exactly full, CPU and memory rounded up to
//! a machine size). Each plan must place every replica and pass the independent verifier. The
//! seeds are fixed, so this is a regression test of the assignment's packing: a heuristic that
//! packs worse fails it. (The exact-solver comparison, `bench/mip`, asks the same question of
//! instances an exact MIP solved; `docs/performance.md`.)

use berth_compiler::ir::testkit::{EstateShape, estate};
use berth_compiler::placement::{self, planted::plant};
use berth_compiler::plan::WorkloadStatus;
use berth_compiler::source::SourceMap;
use berth_compiler::verify;
use jiff::Timestamp;

/// Wednesday 2025-06-04 10:00 UTC: the generated estates' peak window is in effect.
fn instant() -> Timestamp {
    "2025-06-04T10:00:00Z".parse().expect("instant")
}

fn check(workloads: usize, targets: usize, seeds: std::ops::RangeInclusive<u64>) {
    let at = instant();
    for seed in seeds {
        let mut ir = estate(seed, EstateShape { workloads, targets });
        let planted = plant(&mut ir, at, seed);
        assert!(
            planted.replicas > 0,
            "{workloads}x{targets} seed {seed}: nothing planted"
        );
        let plan = placement::plan(&ir, &SourceMap::new(), at, "sha256:planted", "planted");
        if let Err(violations) = verify::verify(&ir, &plan, at) {
            let list: Vec<String> = violations.iter().map(ToString::to_string).collect();
            panic!(
                "{workloads}x{targets} seed {seed}: verifier: {}",
                list.join("; ")
            );
        }
        for (p, w) in plan.workloads.iter().zip(&ir.workloads) {
            let placed: u32 = p.placements.iter().map(|x| x.replicas).sum();
            assert!(
                placed <= w.replicas,
                "{}: {placed} of {}",
                w.name,
                w.replicas
            );
        }
        let short: Vec<String> = plan
            .workloads
            .iter()
            .zip(&ir.workloads)
            .filter(|(_, w)| w.replicas > 0)
            .filter(|(p, _)| p.status != WorkloadStatus::Placed)
            .map(|(p, w)| {
                let placed: u32 = p.placements.iter().map(|x| x.replicas).sum();
                format!("{} ({placed} of {})", w.name, w.replicas)
            })
            .collect();
        assert!(
            short.is_empty(),
            "{workloads}x{targets} seed {seed}: {} of {} planted replicas placed; short: {}",
            plan.workloads
                .iter()
                .flat_map(|w| &w.placements)
                .map(|p| u64::from(p.replicas))
                .sum::<u64>(),
            planted.replicas,
            short.join(", ")
        );
    }
}

#[test]
fn small_planted_estates_are_placed_in_full() {
    check(50, 10, 1..=20);
}

#[test]
fn medium_planted_estates_are_placed_in_full() {
    check(200, 30, 1..=4);
}

#[test]
fn planting_is_deterministic() {
    let at = instant();
    let shape = EstateShape {
        workloads: 80,
        targets: 12,
    };
    let (mut a, mut b) = (estate(7, shape), estate(7, shape));
    assert_eq!(plant(&mut a, at, 7), plant(&mut b, at, 7));
    assert_eq!(a, b);
}
