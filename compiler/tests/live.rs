//! Planning against live capacity (`driver::plan_live`, `berth plan --live`): the runtime
//! hands the compiler each pool's live figures; the solver places against them, the verifier
//! checks against them, the pool ledgers record them, and a saved plan is verified again
//! against the capacity it records, never above what the spec declares.

use berth_compiler::driver::{self, LivePools, Violation};
use berth_compiler::ir::LiveCapacity;
use berth_compiler::plan::{Plan, plan_id};
use berth_compiler::source::SourceMap;
use jiff::Timestamp;

const SPEC: &str = r#"use std.gpu.{L4, H100}

target lyon {
  class = factory  runtime = local  connectivity = connected  cpu = 64  memory = 256GiB
  pool l4 { accelerator = L4  count = 8 }
  cost = { gpu_hour: 0.90 }
}

target cloud_eu {
  class = cloud  runtime = local  connectivity = connected  cpu = 64  memory = 512GiB
  pool h100 { accelerator = H100  count = 8 }
  cost = { gpu_hour: 2.00 }
}

workload inspect {
  release = "1"  image = "inspect:1"  class = production  identity = service_account("vision")
  replicas = 3
  resources { cpu = 4  memory = 16GiB  gpu = 1 }
  accelerators = [L4]
}

placement inspect {
  targets = [lyon]
}

workload sort {
  release = "1"  image = "sort:1"  class = staging  identity = service_account("vision")
  replicas = 2
  resources { cpu = 4  memory = 16GiB  gpu = 1 }
  accelerators = [L4, H100]
}

placement sort {
  targets  = [lyon, cloud_eu]
  fallback = [cloud_eu]
}
"#;

fn sources() -> SourceMap {
    let mut map = SourceMap::new();
    map.add("spec.berth", SPEC);
    map
}

fn at() -> Timestamp {
    "2025-06-04T10:00:00Z".parse().expect("instant")
}

/// `lyon/l4` read live: `allocatable` GPUs, `held` by pods berth does not manage.
fn lyon(allocatable: u64, held: u64) -> LivePools {
    let mut live = LivePools::new();
    live.insert(
        ("lyon".into(), "l4".into()),
        LiveCapacity::read(allocatable, held),
    );
    live
}

fn plan(live: &LivePools) -> Plan {
    match driver::plan_live(&sources(), at(), live) {
        Ok(planned) => planned.plan,
        Err(e) => panic!("the spec plans: {e:?}"),
    }
}

/// (capacity, allocated) of a pool's ledger.
fn ledger(plan: &Plan, target: &str, pool: &str) -> (u32, u32) {
    let l = plan
        .pools
        .iter()
        .find(|l| l.target == target && l.pool == pool)
        .expect("ledger");
    (l.capacity, l.allocated)
}

/// Where `workload`'s replicas went, `(target, replicas)`.
fn placed(plan: &Plan, workload: &str) -> Vec<(String, u32)> {
    let w = plan
        .workloads
        .iter()
        .find(|w| w.workload == workload)
        .expect("workload");
    w.placements
        .iter()
        .map(|p| (p.target.clone(), p.replicas))
        .collect()
}

fn reverify(plan: &Plan) -> Result<(), Vec<Violation>> {
    let Ok(re) = driver::reverify(&sources(), plan) else {
        panic!("the spec compiles");
    };
    assert!(re.digest_matches(plan));
    re.verdict.expect("an instant").map(|_| ())
}

#[test]
fn without_live_figures_the_declared_capacity_is_planned() {
    let plan = plan(&LivePools::new());
    assert_eq!(ledger(&plan, "lyon", "l4"), (8, 5));
    assert_eq!(placed(&plan, "sort"), [("lyon".to_string(), 2)]);
}

#[test]
fn a_pool_full_of_other_pods_holds_what_is_free_and_says_so() {
    let plan = plan(&lyon(8, 5));
    // 3 GPUs free for berth: the production workload takes them, the other falls back.
    assert_eq!(ledger(&plan, "lyon", "l4"), (3, 3));
    assert_eq!(placed(&plan, "inspect"), [("lyon".to_string(), 3)]);
    assert_eq!(placed(&plan, "sort"), [("cloud_eu".to_string(), 2)]);
    let sort = plan.workloads.iter().find(|w| w.workload == "sort");
    let rejection = sort
        .and_then(|w| w.rejected.iter().find(|r| r.target == "lyon"))
        .expect("lyon rejected for sort");
    assert_eq!(rejection.reason, "capacity");
    assert_eq!(
        rejection.message,
        "pool `l4` has 0 of 3 GPUs free; needs 1 GPU per replica (live: 8 allocatable, 5 held \
         by pods berth does not manage)"
    );
    assert!(plan.feasible);
}

#[test]
fn live_figures_never_raise_the_declared_capacity() {
    let plan = plan(&lyon(16, 2));
    assert_eq!(ledger(&plan, "lyon", "l4"), (8, 5));
}

#[test]
fn a_pool_with_nothing_free_is_left_out_and_the_plan_is_infeasible() {
    let plan = plan(&lyon(8, 8));
    assert_eq!(ledger(&plan, "lyon", "l4"), (0, 0));
    assert!(!plan.feasible);
    assert_eq!(placed(&plan, "sort"), [("cloud_eu".to_string(), 2)]);
}

#[test]
fn the_same_live_figures_give_the_same_plan() {
    let one = serde_json::to_string(&plan(&lyon(8, 5))).expect("json");
    let two = serde_json::to_string(&plan(&lyon(8, 5))).expect("json");
    assert_eq!(one, two);
    assert_ne!(
        one,
        serde_json::to_string(&plan(&lyon(8, 4))).expect("json")
    );
}

#[test]
fn a_saved_live_plan_is_verified_against_the_capacity_it_records() {
    assert_eq!(reverify(&plan(&lyon(8, 5))), Ok(()));
    assert_eq!(reverify(&plan(&LivePools::new())), Ok(()));
}

#[test]
fn a_plan_recording_less_capacity_than_it_places_is_refused() {
    // The declared plan places 5 GPUs on lyon; a ledger claiming it assumed 3 is a plan the
    // verifier refuses: it places beyond the capacity it says it had.
    let mut plan = plan(&LivePools::new());
    let l4 = plan
        .pools
        .iter_mut()
        .find(|l| l.target == "lyon" && l.pool == "l4")
        .expect("ledger");
    l4.capacity = 3;
    plan.plan_id = plan_id(&plan);
    let violations = reverify(&plan).expect_err("over-committed");
    assert!(
        violations.iter().any(|v| matches!(
            v,
            Violation::PoolOverCommitted {
                allocated: 5,
                capacity: 3,
                ..
            }
        )),
        "{violations:?}"
    );
}

#[test]
fn a_plan_recording_more_capacity_than_the_spec_declares_is_refused() {
    let mut plan = plan(&LivePools::new());
    let l4 = plan
        .pools
        .iter_mut()
        .find(|l| l.target == "lyon" && l.pool == "l4")
        .expect("ledger");
    l4.capacity = 12;
    plan.plan_id = plan_id(&plan);
    assert!(reverify(&plan).is_err());
}

const MIG: &str = r#"use std.gpu.{A100_80GB}

target lab {
  class = datacenter  runtime = local  connectivity = connected  cpu = 64  memory = 256GiB
  pool a100 { accelerator = A100_80GB  count = 2  mig = "1g.10gb" }
}

workload notebook {
  release = "1"  image = "nb:1"  class = development  identity = service_account("lab")
  replicas = 6
  resources { cpu = 2  memory = 8GiB  gpu = 1  mig = "1g.10gb" }
  accelerators = [A100_80GB]
}
"#;

#[test]
fn a_partitioned_pool_is_read_in_slices() {
    let mut map = SourceMap::new();
    map.add("spec.berth", MIG);
    let mut live = LivePools::new();
    // 14 slices declared (2 × 7); the nodes allocate 14, and 10 are held by other pods.
    live.insert(("lab".into(), "a100".into()), LiveCapacity::read(14, 10));
    let plan = match driver::plan_live(&map, at(), &live) {
        Ok(planned) => planned.plan,
        Err(e) => panic!("plans: {e:?}"),
    };
    assert_eq!(ledger(&plan, "lab", "a100"), (4, 4));
    assert!(!plan.feasible);
    let notebook = &plan.workloads[0];
    assert_eq!(
        notebook.unplaced.as_ref().map(|u| u.missing_replicas),
        Some(2)
    );
    let Ok(re) = driver::reverify(&map, &plan) else {
        panic!("compiles");
    };
    assert!(matches!(re.verdict, Some(Ok(_))), "{:?}", re.verdict);
}

#[cfg(feature = "exact")]
#[test]
fn the_exact_mode_places_against_the_same_figures() {
    let map = sources();
    let exact = driver::Assigner::Exact { time_limit_s: 10.0 };
    let answered = driver::plan_asking(driver::compile(&map), &map, at(), &lyon(8, 5), exact, None)
        .expect("the spec plans");
    assert_eq!(answered.exact, Some(driver::ExactOutcome::Optimal));
    let planned = answered.planned;
    assert_eq!(ledger(&planned.plan, "lyon", "l4"), (3, 3));
    assert_eq!(placed(&planned.plan, "sort"), [("cloud_eu".to_string(), 2)]);
}
