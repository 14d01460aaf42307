//! The exact assignment mode (`placement::exact`, `berth plan --exact`), on the generated
//! estates the MIP comparison uses: it never places fewer replicas of a class than the
//! heuristic (lexicographically, production first), its plans pass the verifier, and on an
//! estate where the heuristic leaves a replica out that a MIP places (`prodexp_w10_t4_s6_o130`
//! of `bench/shapes`, docs/performance.md), it places that replica. The default assignment
//! with this feature (`placement::solve_raised`) places it too, and elsewhere keeps the
//! heuristic's plan byte for byte.
#![cfg(feature = "exact")]

use berth_compiler::ir::Ir;
use berth_compiler::placement::{
    self,
    exact::{ExactOutcome, RaiseOutcome},
};
use berth_compiler::plan::Plan;
use berth_compiler::sema::analyze;
use berth_compiler::source::SourceMap;
use berth_compiler::syntax::parse_file;
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
    }
}

/// `prodexp_w10_t4_s6_o130` of `bench/shapes` (over-subscribed, seeds 4-20 at 10 x 4): the
/// heuristic leaves three experiment replicas out, a MIP two. (`prodexp_w10_t4_s3_o130`, the
/// estate this test took before, is now placed as the MIP places it: the fixture
/// `data/placement/short_class_repacked_for_one_more_replica.berth`. Should the heuristic
/// place this one's too, pick another estate where `bench/shapes` reports a miss.)
#[test]
fn exact_places_a_replica_the_heuristic_leaves_out() {
    let (ir, map) = short_estate();
    let at = instant();
    let heuristic = placement::solve(&ir, &map, at).plan(at, "sha256:x", "test");
    let (solved, outcome) = placement::solve_exact(&ir, &map, at, 60.0);
    let exact = solved.plan(at, "sha256:x", "test");
    assert_eq!(outcome, ExactOutcome::Optimal);
    if let Err(violations) = verify::verify(&ir, &exact, at) {
        panic!("the exact plan does not verify: {violations:#?}");
    }
    assert_eq!(
        placed_by_class(&ir, &heuristic)[3] + 1,
        placed_by_class(&ir, &exact)[3]
    );
    assert_eq!(
        placed_by_class(&ir, &heuristic)[..3],
        placed_by_class(&ir, &exact)[..3]
    );
}

/// The default assignment places the replica the heuristic leaves out on the same estate, as
/// many of each class as the exact mode, in a plan that verifies, the same on every run.
#[test]
fn the_default_assignment_raises_the_heuristics_replicas_to_the_optimum() {
    let (ir, map) = short_estate();
    let at = instant();
    let heuristic = placement::solve(&ir, &map, at).plan(at, "sha256:x", "test");
    let (solved, outcome) = placement::solve_raised(&ir, &map, at);
    let raised = solved.plan(at, "sha256:x", "test");
    let (h, r) = (
        placed_by_class(&ir, &heuristic),
        placed_by_class(&ir, &raised),
    );
    assert_eq!(outcome, RaiseOutcome::Raised { from: h, to: r });
    let (exact, _) = placement::solve_exact(&ir, &map, at, 60.0);
    let exact = exact.plan(at, "sha256:x", "test");
    assert_eq!(r, placed_by_class(&ir, &exact));
    assert_eq!(r[3], h[3] + 1);
    if let Err(violations) = verify::verify(&ir, &raised, at) {
        panic!("the raised plan does not verify: {violations:#?}");
    }
    let again = placement::solve_raised(&ir, &map, at)
        .0
        .plan(at, "sha256:x", "test");
    assert_eq!(
        serde_json::to_string(&raised).expect("json"),
        serde_json::to_string(&again).expect("json"),
        "the same plan on every run"
    );
}

/// `--exact` whose time runs out gives the plan made without it — the heuristic's with its
/// replicas raised — not the heuristic's alone.
#[test]
fn an_exact_mode_out_of_time_gives_the_default_plan() {
    let (ir, map) = short_estate();
    let at = instant();
    let (solved, outcome) = placement::solve_exact(&ir, &map, at, 1e-9);
    assert!(
        matches!(outcome, ExactOutcome::NotSolved { .. }),
        "{outcome:?}"
    );
    let fallback = solved.plan(at, "sha256:x", "test");
    let raised = placement::solve_raised(&ir, &map, at)
        .0
        .plan(at, "sha256:x", "test");
    assert_eq!(
        serde_json::to_string(&fallback).expect("json"),
        serde_json::to_string(&raised).expect("json")
    );
}

/// Where HiGHS finds no assignment placing more (it proves there is none, or nothing is
/// short), the default assignment's plan is the heuristic's, byte for byte.
#[test]
fn the_default_assignment_keeps_the_heuristics_plan_where_nothing_more_fits() {
    let mut seen = Vec::new();
    for (seed, workloads) in [(1, 50), (2, 50), (3, 80), (4, 5), (5, 5)] {
        let ir = estate(
            seed,
            EstateShape {
                workloads,
                targets: 10,
            },
        );
        let sources = SourceMap::new();
        let at = instant();
        let heuristic = placement::solve(&ir, &sources, at).plan(at, "sha256:x", "test");
        let (solved, outcome) = placement::solve_raised(&ir, &sources, at);
        if matches!(outcome, RaiseOutcome::Raised { .. }) {
            continue;
        }
        let raised = solved.plan(at, "sha256:x", "test");
        assert_eq!(
            serde_json::to_string(&raised).expect("json"),
            serde_json::to_string(&heuristic).expect("json"),
            "seed {seed}: {outcome:?}"
        );
        seen.push(outcome);
    }
    assert!(
        seen.contains(&RaiseOutcome::NothingShort),
        "a fully placed estate among them: {seen:?}"
    );
    assert!(
        seen.contains(&RaiseOutcome::Proved),
        "an estate HiGHS proves the heuristic's counts optimal on: {seen:?}"
    );
}

/// `prodexp_w10_t4_s6_o130` (above), compiled.
fn short_estate() -> (Ir, SourceMap) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/exact/prodexp_w10_t4_s6_o130");
    let mut map = SourceMap::new();
    for name in ["placement.berth", "targets.berth", "workloads.berth"] {
        let text = std::fs::read_to_string(dir.join(name)).expect("fixture");
        map.add(name.to_string(), text);
    }
    let parsed: Vec<_> = map
        .files()
        .iter()
        .map(|f| parse_file(f.id, &f.text))
        .collect();
    let (ir, diagnostics) = analyze(&map, &parsed);
    assert!(
        diagnostics.iter().all(|d| !d.is_error()),
        "{diagnostics:#?}"
    );
    (ir.expect("an IR"), map)
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
