//! The verifier against the placement engine, end to end: every example in `examples/`,
//! compiled by semantics and planned by `placement::plan`, passes the verifier. The two
//! share no code; this is where their readings of the language must agree.
//!
//! Property tests do the same over generated estates (targets, pools, MIG, models, data,
//! services, every kind of policy rule), and check that random corruptions of the plans the
//! engine produces are caught.

mod verify_kit;

use berth_compiler::ir::*;
use berth_compiler::plan::Plan;
use berth_compiler::source::SourceMap;
use berth_compiler::syntax::parse_file;
use berth_compiler::{placement, sema, verify};
use jiff::Timestamp;
use proptest::prelude::*;
use proptest::sample::{select, subsequence};
use std::path::{Path, PathBuf};
use verify_kit::{GIB, MS, money};

/// Every `.berth` file of `dir`, in path order, compiled to IR.
fn compile(dir: &Path) -> (SourceMap, Ir) {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("example folder")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "berth"))
        .collect();
    files.sort();
    let mut map = SourceMap::new();
    let mut parsed = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("readable");
        let id = map.add(f.display().to_string(), text.clone());
        parsed.push(parse_file(id, &text));
    }
    let (ir, diags) = sema::analyze(&map, &parsed);
    let ir = ir.unwrap_or_else(|| panic!("{} does not compile: {diags:#?}", dir.display()));
    (map, ir)
}

fn examples() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .expect("examples/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

pub fn plan_at(ir: &Ir, map: &SourceMap, at: &str) -> (Plan, Timestamp) {
    let at: Timestamp = at.parse().expect("instant");
    (placement::plan(ir, map, at, "sha256:test", "test"), at)
}

#[test]
fn every_example_plan_verifies() {
    let mut failures = String::new();
    for dir in examples() {
        let (map, ir) = compile(&dir);
        // A weekday at peak hours in Europe and a quiet Sunday night.
        for at in ["2025-06-09T10:00:00Z", "2025-06-08T02:00:00Z"] {
            let (plan, at) = plan_at(&ir, &map, at);
            if let Err(violations) = verify::verify(&ir, &plan, at) {
                failures.push_str(&format!("{} at {at}:\n", dir.display()));
                for v in violations {
                    failures.push_str(&format!("  {v}\n"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{failures}");
}

#[test]
fn examples_place_something() {
    for dir in examples() {
        let (map, ir) = compile(&dir);
        let (plan, _) = plan_at(&ir, &map, "2025-06-09T10:00:00Z");
        let placed: u32 = plan
            .workloads
            .iter()
            .flat_map(|w| &w.placements)
            .map(|p| p.replicas)
            .sum();
        eprintln!(
            "{}: {} workloads, {} targets, {placed} replicas placed, feasible {}",
            dir.display(),
            ir.workloads.len(),
            ir.targets.len(),
            plan.feasible
        );
        assert!(placed > 0, "{} places nothing", dir.display());
    }
}

// ---------------------------------------------------------------- generated estates

const IDENTITIES: [&str; 3] = ["alpha", "beta", "gamma"];

fn arb_pool(i: usize) -> impl Strategy<Value = Pool> {
    (
        select(vec![verify_kit::L4, verify_kit::H100, verify_kit::ORIN]),
        1u32..=8,
        any::<bool>(),
    )
        .prop_map(move |(acc, count, mig)| {
            let mig = (acc == verify_kit::H100 && mig).then_some("1g.10gb");
            verify_kit::pool(&format!("p{i}"), acc, count, mig)
        })
}

fn arb_target(i: usize) -> impl Strategy<Value = Target> {
    (
        (
            select(EnvClass::ALL.to_vec()),
            select(Connectivity::ALL.to_vec()),
            select(vec![None, Some("r1"), Some("r2")]),
            1u64..=32,
            4u64..=128,
        ),
        (
            prop::collection::vec(0usize..3, 0..=3),
            prop::option::of((any::<bool>(), 1u64..=100)),
            (
                select(Maturity::ALL.to_vec()),
                select(Maturity::ALL.to_vec()),
            ),
            prop::option::of(0u32..=500),
        ),
    )
        .prop_flat_map(
            move |((class, conn, region, cores, mem), (pools, data, (os, mc), rate))| {
                let pools: Vec<_> = (0..pools.len()).map(arb_pool).collect();
                (
                    pools,
                    Just((class, conn, region, cores, mem, data, os, mc, rate)),
                )
            },
        )
        .prop_map(
            move |(pools, (class, conn, region, cores, mem, data, os, mc, rate))| {
                let mut t = verify_kit::target(&format!("t{i}"), class, conn);
                t.region = region.map(Into::into);
                t.cpu_millis = cores * 1000;
                t.memory = mem * GIB;
                t.pools = pools;
                t.data = data
                    .map(|(local, ms)| DataOffer {
                        name: "images".into(),
                        locality: if local {
                            DataLocality::Local
                        } else {
                            DataLocality::Remote
                        },
                        endpoint: local.then(|| format!("s3://t{i}/images")),
                        latency: ms * MS,
                    })
                    .into_iter()
                    .collect();
                t.services = [(0, os), (1, mc)]
                    .into_iter()
                    .filter(|(_, m)| *m != Maturity::Absent)
                    .map(|(s, maturity)| ServiceOffer {
                        service: ServiceId(s),
                        maturity,
                    })
                    .collect();
                t.cost.gpu_hour = rate.map(|cents| Money(i64::from(cents) * 10_000));
                t
            },
        )
}

/// What a generated workload needs, before references to targets and workloads are fixed.
#[derive(Clone, Debug)]
struct WorkloadShape {
    class: WorkloadClass,
    kind: WorkloadKind,
    identity: usize,
    replicas: u32,
    cores: u64,
    mem: u64,
    gpu: u32,
    mig: bool,
    gpu_memory: Option<u64>,
    h100_only: bool,
    model: bool,
    data: Option<(Option<u64>, Classification)>,
    services: (Maturity, Maturity),
    connectivity: Connectivity,
    environments: Vec<EnvClass>,
    candidates: Option<Vec<usize>>,
    per_target: Option<u32>,
    per_region: Option<u32>,
    fallback: Vec<usize>,
    isolate_from: Option<usize>,
}

fn arb_workload(targets: usize, workloads: usize) -> impl Strategy<Value = WorkloadShape> {
    let t: Vec<usize> = (0..targets).collect();
    (
        (
            select(WorkloadClass::ALL.to_vec()),
            select(WorkloadKind::ALL.to_vec()),
            0..IDENTITIES.len(),
            1u32..=4,
            1u64..=8,
            1u64..=32,
            0u32..=2,
            any::<bool>(),
            select(vec![None, Some(8), Some(16), Some(40)]),
            any::<bool>(),
        ),
        (
            any::<bool>(),
            prop::option::of((
                prop::option::of(1u64..=100),
                select(Classification::ALL.to_vec()),
            )),
            (
                select(Maturity::ALL.to_vec()),
                select(Maturity::ALL.to_vec()),
            ),
            select(Connectivity::ALL.to_vec()),
            subsequence(EnvClass::ALL.to_vec(), 0..=3),
            prop::option::of(subsequence(t.clone(), 1..=targets)),
            prop::option::of(1u32..=2),
            prop::option::of(1u32..=3),
            subsequence(t, 0..=targets.min(2)),
            prop::option::of(0..workloads),
        ),
    )
        .prop_map(
            |(
                (class, kind, identity, replicas, cores, mem, gpu, mig, gpu_memory, h100_only),
                (
                    model,
                    data,
                    services,
                    connectivity,
                    environments,
                    candidates,
                    per_target,
                    per_region,
                    fallback,
                    isolate_from,
                ),
            )| WorkloadShape {
                class,
                kind,
                identity,
                replicas,
                cores,
                mem,
                gpu: if mig { gpu.max(1) } else { gpu },
                mig: mig && gpu > 0,
                gpu_memory: gpu_memory.filter(|_| gpu > 0),
                h100_only,
                model,
                data,
                services,
                connectivity,
                environments,
                candidates,
                per_target,
                per_region,
                fallback,
                isolate_from,
            },
        )
}

fn build_workload(i: usize, s: &WorkloadShape) -> Workload {
    let identity = IDENTITIES[s.identity];
    let mut w = verify_kit::workload(&format!("w{i}"), s.class, identity);
    w.kind = s.kind;
    w.replicas = s.replicas;
    w.resources = Resources {
        cpu_millis: s.cores * 500,
        memory: s.mem * GIB / 2,
        gpu: s.gpu,
        gpu_memory: s.gpu_memory.map(|g| g * GIB),
        mig: s.mig.then(|| "1g.10gb".into()),
    };
    if s.h100_only || s.mig {
        w.accelerators = vec![AcceleratorId(verify_kit::H100)];
    }
    w.model = (s.model && s.gpu > 0).then_some(ModelId(0));
    w.data = s
        .data
        .map(|(max, classification)| DataRequirement {
            name: "images".into(),
            dataset: "images".into(),
            access: Access::Read,
            max_latency: max.map(|ms| ms * MS),
            classification,
        })
        .into_iter()
        .collect();
    w.services = [(0, s.services.0), (1, s.services.1)]
        .into_iter()
        .filter(|(_, m)| *m != Maturity::Absent)
        .map(|(service, min)| ServiceRequirement {
            service: ServiceId(service),
            min,
        })
        .collect();
    w.connectivity = s.connectivity;
    w.environments = s.environments.clone();
    w.placement = PlacementRules {
        candidates: s
            .candidates
            .as_ref()
            .map(|c| c.iter().map(|&t| TargetId(t as u32)).collect()),
        per_target: s.per_target,
        per_region: s.per_region,
        prefer: Vec::new(),
        fallback: s.fallback.iter().map(|&t| TargetId(t as u32)).collect(),
        isolate_from: s
            .isolate_from
            .filter(|&o| o != i)
            .map(|o| WorkloadId(o as u32))
            .into_iter()
            .collect(),
    };
    w
}

#[derive(Clone, Debug)]
struct PolicyShape {
    deny_confidential_cloud: bool,
    entitlements: Vec<(usize, Option<u32>, bool, bool)>,
    quota: Option<(usize, u32)>,
    window: Option<(bool, u16, u16)>,
    limit: Option<(WorkloadClass, u32)>,
    approval: Option<u32>,
    reclaim: bool,
}

fn arb_policy() -> impl Strategy<Value = PolicyShape> {
    (
        any::<bool>(),
        prop::collection::vec(
            (
                0..IDENTITIES.len(),
                prop::option::of(0u32..=12),
                any::<bool>(),
                any::<bool>(),
            ),
            0..=3,
        ),
        prop::option::of((0..IDENTITIES.len(), 0u32..=8)),
        prop::option::of((any::<bool>(), 0u16..1440, 0u16..=1440)),
        prop::option::of((select(WorkloadClass::ALL.to_vec()), 0u32..=6)),
        prop::option::of(0u32..=300),
        any::<bool>(),
    )
        .prop_map(
            |(deny_confidential_cloud, entitlements, quota, window, limit, approval, reclaim)| {
                PolicyShape {
                    deny_confidential_cloud,
                    entitlements,
                    quota,
                    window,
                    limit,
                    approval,
                    reclaim,
                }
            },
        )
}

fn build_policy(p: &PolicyShape) -> Policy {
    let base = verify_kit::estate().policy;
    let sa = |i: usize| Identity {
        kind: IdentityKind::ServiceAccount,
        name: IDENTITIES[i].into(),
    };
    let mut policy = Policy::default();
    if p.deny_confidential_cloud {
        policy.denies.push(base.denies[0].clone());
    }
    // One entitlement per identity at most (the first generated wins).
    let mut seen = std::collections::BTreeSet::new();
    for &(who, max_gpu, h100_only, no_cloud) in &p.entitlements {
        if seen.insert(who) {
            policy.entitlements.push(Entitlement {
                policy: "p".into(),
                identity: sa(who),
                max_gpu,
                accelerators: h100_only.then(|| vec![AcceleratorId(verify_kit::H100)]),
                environments: no_cloud.then(|| {
                    EnvClass::ALL
                        .iter()
                        .copied()
                        .filter(|c| *c != EnvClass::Cloud)
                        .collect()
                }),
                until: None,
            });
        }
    }
    if let Some((team, max_gpu)) = p.quota {
        policy.quotas.push(Quota {
            policy: "p".into(),
            team: IDENTITIES[team].into(),
            max_gpu,
        });
    }
    if let Some((weekdays, start, end)) = p.window {
        policy.windows.push(Window {
            policy: "p".into(),
            name: "w".into(),
            days: if weekdays {
                Weekday::ALL[..5].to_vec()
            } else {
                Weekday::ALL.to_vec()
            },
            start,
            end,
            zone: "Europe/Paris".into(),
        });
        if let Some((class, max_gpu)) = p.limit {
            policy.limits.push(Limit {
                policy: "p".into(),
                selector: Selector::Class(class),
                window: WindowId(0),
                max_gpu,
            });
        }
    }
    if let Some(above) = p.approval {
        policy.approvals.push(Approval {
            policy: "p".into(),
            cost_per_day_above: money(f64::from(above)),
            approvers: vec!["leads".into()],
            trust: None,
        });
    }
    if p.reclaim {
        policy.reclaims.push(base.reclaims[0].clone());
    }
    policy
}

fn arb_estate() -> impl Strategy<Value = Ir> {
    (1usize..=5, 1usize..=7)
        .prop_flat_map(|(targets, workloads)| {
            (
                (0..targets).map(arb_target).collect::<Vec<_>>(),
                prop::collection::vec(arb_workload(targets, workloads), workloads),
                arb_policy(),
            )
        })
        .prop_map(|(targets, shapes, policy)| {
            let base = verify_kit::estate();
            Ir {
                workloads: shapes
                    .iter()
                    .enumerate()
                    .map(|(i, s)| build_workload(i, s))
                    .collect(),
                targets,
                policy: build_policy(&policy),
                ..base
            }
        })
}

fn arb_instant() -> impl Strategy<Value = Timestamp> {
    // 2025-01-01 .. 2026-01-01
    (1_735_689_600i64..1_767_225_600).prop_map(|s| Timestamp::from_second(s).expect("in range"))
}

/// A corruption of a produced plan that the verifier must catch.
#[derive(Clone, Debug)]
enum Corruption {
    /// One more replica on a placement (ledgers untouched).
    ExtraReplica(usize),
    /// A placement removed.
    DropPlacement(usize),
    /// A placement's target renamed to one the spec does not have.
    UnknownTarget(usize),
    /// A placement's pool (or a pool ledger) pushed past its capacity, ledger updated too.
    OverCommit(usize),
    /// A pool ledger's `allocated` edited.
    LedgerEdit(usize),
    /// The plan id edited.
    PlanId,
}

fn arb_corruption() -> impl Strategy<Value = Corruption> {
    prop_oneof![
        any::<usize>().prop_map(Corruption::ExtraReplica),
        any::<usize>().prop_map(Corruption::DropPlacement),
        any::<usize>().prop_map(Corruption::UnknownTarget),
        any::<usize>().prop_map(Corruption::OverCommit),
        any::<usize>().prop_map(Corruption::LedgerEdit),
        Just(Corruption::PlanId),
    ]
}

/// Applies `c` to `plan`, or edits the plan id when the plan has nothing `c` applies to
/// (no placement, no pool).
fn corrupt(plan: &mut Plan, c: &Corruption) {
    if !try_corrupt(plan, c) {
        plan.plan_id = format!("sha256:{}", "0".repeat(64));
    }
}

/// Applies `c` to `plan`; `false` when the plan has nothing it applies to.
fn try_corrupt(plan: &mut Plan, c: &Corruption) -> bool {
    let mut placements: Vec<(usize, usize)> = Vec::new();
    for (w, wp) in plan.workloads.iter().enumerate() {
        placements.extend((0..wp.placements.len()).map(|p| (w, p)));
    }
    let pick = |i: usize| placements.get(i % placements.len().max(1)).copied();
    match *c {
        Corruption::ExtraReplica(i) => {
            let Some((w, p)) = pick(i) else { return false };
            plan.workloads[w].placements[p].replicas += 1;
        }
        Corruption::DropPlacement(i) => {
            let Some((w, p)) = pick(i) else { return false };
            plan.workloads[w].placements.remove(p);
        }
        Corruption::UnknownTarget(i) => {
            let Some((w, p)) = pick(i) else { return false };
            plan.workloads[w].placements[p].target = "nowhere".into();
        }
        Corruption::OverCommit(i) => {
            let pooled: Vec<(usize, usize)> = placements
                .iter()
                .copied()
                .filter(|&(w, p)| {
                    let pl = &plan.workloads[w].placements[p];
                    pl.pool.is_some() && pl.gpus_per_replica > 0
                })
                .collect();
            let Some(&(w, p)) = pooled.get(i % pooled.len().max(1)) else {
                return false;
            };
            let pl = plan.workloads[w].placements[p].clone();
            let Some(ledger) = plan
                .pools
                .iter_mut()
                .find(|l| Some(&l.pool) == pl.pool.as_ref() && l.target == pl.target)
            else {
                return false;
            };
            // Enough extra replicas to exceed the pool whatever else it holds.
            let extra = ledger.capacity / pl.gpus_per_replica + 1;
            ledger.allocated += extra * pl.gpus_per_replica;
            plan.workloads[w].placements[p].replicas += extra;
        }
        Corruption::LedgerEdit(i) => {
            if plan.pools.is_empty() {
                return false;
            }
            let n = plan.pools.len();
            plan.pools[i % n].allocated += 1;
        }
        Corruption::PlanId => {
            plan.plan_id = format!("sha256:{}", "0".repeat(64));
            return true;
        }
    }
    plan.plan_id = berth_compiler::plan::plan_id(plan);
    true
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn engine_plans_pass_the_verifier(ir in arb_estate(), at in arb_instant()) {
        let map = SourceMap::new();
        let plan = placement::plan(&ir, &map, at, "sha256:test", "test");
        let violations: Vec<String> = verify::verify(&ir, &plan, at)
            .err()
            .unwrap_or_default()
            .into_iter()
            .map(|v| v.to_string())
            .collect();
        prop_assert!(
            violations.is_empty(),
            "violations: {violations:#?}\nplan: {}",
            serde_json::to_string_pretty(&plan).unwrap_or_default()
        );
    }

    #[test]
    fn corrupted_engine_plans_are_caught(
        ir in arb_estate(),
        at in arb_instant(),
        corruption in arb_corruption(),
    ) {
        let map = SourceMap::new();
        let mut plan = placement::plan(&ir, &map, at, "sha256:test", "test");
        corrupt(&mut plan, &corruption);
        prop_assert!(verify::verify(&ir, &plan, at).is_err(), "{corruption:?} not caught");
    }
}
