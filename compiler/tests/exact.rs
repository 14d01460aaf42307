//! The exact assignment mode (`placement::exact`, `berth plan --exact`), on the generated
//! estates the MIP comparison uses: it never places fewer replicas of a class than the
//! heuristic (lexicographically, production first), its plans pass the verifier, and on an
//! estate where the heuristic leaves a replica out that a MIP places (`w50_t10_s4_c100` of
//! `bench/mip`, docs/performance.md), it places that replica.
#![cfg(feature = "exact")]

use berth_compiler::ir::Ir;
use berth_compiler::placement::{self, exact::ExactOutcome};
use berth_compiler::plan::Plan;
use berth_compiler::source::SourceMap;
use berth_compiler::testing::ir::{EstateShape, estate};
use berth_compiler::testing::placed_by_class;
use berth_compiler::verify;
use jiff::Timestamp;

/// Wednesday 2025-06-04 10:00 UTC: the generated estates' peak window is in effect.
fn instant() -> Timestamp {
    "2025-06-04T10:00:00Z".parse().expect("instant")
}

fn plans(ir: &Ir) -> (Plan, Plan, ExactOutcome) {
    let sources = SourceMap::new();
    let at = instant();
    let heuristic = placement::solve(ir, &sources, at).plan(at, "sha256:x", "test");
    let (solved, outcome) = placement::solve_exact(ir, &sources, at, 60.0);
    let exact = solved.plan(at, "sha256:x", "test");
    (heuristic, exact, outcome)
}

#[test]
fn exact_places_at_least_what_the_heuristic_places_and_verifies() {
    let mut better = Vec::new();
    for seed in 1..=4 {
        let ir = estate(
            seed,
            EstateShape {
                workloads: 50,
                targets: 10,
            },
        );
        let (heuristic, exact, outcome) = plans(&ir);
        assert_eq!(outcome, ExactOutcome::Optimal, "seed {seed}");
        if let Err(violations) = verify::verify(&ir, &exact, instant()) {
            panic!("seed {seed}: the exact plan does not verify: {violations:#?}");
        }
        let (h, e) = (
            placed_by_class(&ir, &heuristic),
            placed_by_class(&ir, &exact),
        );
        assert!(
            e >= h,
            "seed {seed}: exact {e:?} places less than heuristic {h:?}"
        );
        if e > h {
            better.push(seed);
        }
    }
    // `w50_t10_s4_c100`: the heuristic leaves one experiment replica out. (It left one out
    // of seed 3 as well until the repack; should it ever place these too, pick another
    // estate where a MIP places more, from `bench/mip`.)
    assert!(better.contains(&4), "exact was better on seeds {better:?}");
}

#[test]
fn an_estate_beyond_the_limit_falls_back_to_the_heuristic() {
    let ir = estate(
        1,
        EstateShape {
            workloads: 4000,
            targets: 200,
        },
    );
    let sources = SourceMap::new();
    let at = instant();
    let (solved, outcome) = placement::solve_exact(&ir, &sources, at, 60.0);
    assert!(
        matches!(outcome, ExactOutcome::TooLarge { options } if options > placement::exact::MAX_OPTIONS),
        "{outcome:?}"
    );
    let fallback = solved.plan(at, "sha256:x", "test");
    let heuristic = placement::solve(&ir, &sources, at).plan(at, "sha256:x", "test");
    assert_eq!(fallback, heuristic);
}
