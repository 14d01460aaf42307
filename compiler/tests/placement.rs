//! The placement engine on scenarios built as IR with the test kit (`testing::ir`): each test
//! asserts the decision *and* the reason given for it, and every plan must pass the
//! independent verifier. The product's use cases that are specs live as data, in
//! `data/placement/*.berth` with their `// expect:` facts (`placement_fixtures.rs`); what is
//! here is what a spec file would state less directly (contrasts, generated estates, the
//! engine's own interfaces).

use berth_compiler::ir::{
    Classification, Connectivity, EnvClass, Ir, Maturity, Selector, WorkloadClass, WorkloadKind,
};
use berth_compiler::placement;
use berth_compiler::plan::{Plan, Rejection, RejectionStage, WorkloadPlan, WorkloadStatus};
use berth_compiler::source::SourceMap;
use berth_compiler::testing::ir::{IrBuilder, gib, ms};
use berth_compiler::verify;
use jiff::Timestamp;

/// Wednesday 10:00 in Paris (UTC+2): inside a weekday peak window.
const PEAK: &str = "2025-06-04T08:00:00Z";

fn at(s: &str) -> Timestamp {
    s.parse().expect("instant")
}

/// Plans `ir` at `when` and checks the plan with the verifier.
fn plan_at(ir: &Ir, when: &str) -> Plan {
    let instant = at(when);
    let plan = placement::plan(ir, &SourceMap::new(), instant, "sha256:test", "test");
    if let Err(violations) = verify::verify(ir, &plan, instant) {
        let list: Vec<String> = violations.iter().map(ToString::to_string).collect();
        panic!(
            "the verifier rejects the plan:\n{}\n{}",
            list.join("\n"),
            serde_json::to_string_pretty(&plan).unwrap_or_default()
        );
    }
    plan
}

fn plan(ir: &Ir) -> Plan {
    plan_at(ir, PEAK)
}

fn workload<'a>(plan: &'a Plan, name: &str) -> &'a WorkloadPlan {
    plan.workloads
        .iter()
        .find(|w| w.workload == name)
        .unwrap_or_else(|| panic!("no workload `{name}` in the plan"))
}

/// `(target, pool, replicas)` of each placement.
fn placed(plan: &Plan, name: &str) -> Vec<(String, Option<String>, u32)> {
    workload(plan, name)
        .placements
        .iter()
        .map(|p| (p.target.clone(), p.pool.clone(), p.replicas))
        .collect()
}

fn rejection<'a>(plan: &'a Plan, name: &str, target: &str) -> &'a Rejection {
    workload(plan, name)
        .rejected
        .iter()
        .find(|r| r.target == target)
        .unwrap_or_else(|| panic!("`{target}` is not among the rejections of `{name}`"))
}

fn on(target: &str, pool: &str, replicas: u32) -> (String, Option<String>, u32) {
    (target.into(), Some(pool.into()), replicas)
}

/// A factory and a cloud, both able to run a one-GPU vision service.
fn factory_and_cloud() -> IrBuilder {
    IrBuilder::new()
        .target("lyon", |t| {
            t.class(EnvClass::Factory)
                .region("eu-west")
                .connectivity(Connectivity::Intermittent)
                .pool("l4", "L4", 8)
                .local_data("line_images", ms(2))
                .service("object_store", Maturity::Ga)
                .gpu_hour("0.90")
        })
        .target("cloud_eu", |t| {
            t.class(EnvClass::Cloud)
                .region("eu-west")
                .pool("h100", "H100", 16)
                .remote_data("line_images", ms(85))
                .service("object_store", Maturity::Ga)
                .gpu_hour("0.50")
        })
}

/// The contrast to `data/placement/confidential_data_stays_on_premises.berth`, which has the
/// deny rule: without it, the cheaper cloud wins.
#[test]
fn without_a_deny_rule_confidential_data_goes_to_the_cheaper_cloud() {
    let spec = factory_and_cloud().workload("vision", |w| {
        w.gpu(1)
            .connectivity(Connectivity::Intermittent)
            .data("line_images", None, Classification::Confidential)
            .service("object_store", Maturity::Ga)
    });
    let open = plan(&spec.build());
    assert_eq!(placed(&open, "vision"), vec![on("cloud_eu", "h100", 1)]);
}

/// The factory's other side (`data/placement/factory_beats_cloud_on_data_latency.berth` has
/// the workload that tolerates the link): a workload that does not tolerate an intermittent
/// link cannot use the factory.
#[test]
fn a_workload_needing_a_connected_link_cannot_use_the_factory() {
    let ir = factory_and_cloud()
        .workload("vision", |w| {
            w.gpu(1).connectivity(Connectivity::Connected).data(
                "line_images",
                Some(ms(20)),
                Classification::Internal,
            )
        })
        .build();
    let p = plan(&ir);
    assert_eq!(workload(&p, "vision").status, WorkloadStatus::Unplaced);
    let r = rejection(&p, "vision", "lyon");
    assert_eq!(r.reason, "connectivity");
    assert_eq!(
        r.message,
        "connectivity is `intermittent`; the workload tolerates `connected` at worst"
    );
}

/// `data/placement/int8_on_the_edge_fp16_in_the_datacentre.berth` has a variant per
/// accelerator; here a Jetson alone, for a model with no variant that runs on it.
#[test]
fn a_model_without_a_variant_that_fits_the_jetson_is_rejected() {
    let ir = IrBuilder::new()
        .model("big", |m| m.variant("fp16", gib(12), &[]))
        .workload("vision", |w| w.gpu(1).model("big"))
        .target("turin", |t| t.pool("orin", "JetsonOrinNano", 2))
        .build();
    let p = plan(&ir);
    let r = rejection(&p, "vision", "turin");
    assert_eq!(r.reason, "no_variant");
    assert_eq!(
        r.message,
        "no variant of model `big` fits pool `orin` (8GiB (JetsonOrinNano)): `fp16` needs 12GiB"
    );
}

/// `data/placement/pool_isolation.berth` has two pools and training takes the other; with a
/// single pool, training has nowhere to go, and the plan says why.
#[test]
fn isolation_with_a_single_pool_leaves_training_unplaced() {
    let ir = IrBuilder::new()
        .workload("inference", |w| w.gpu(2).replicas(2))
        .workload("training", |w| {
            w.class(WorkloadClass::Experiment)
                .gpu(4)
                .isolate_from(&["inference"])
        })
        .target("dc", |t| t.pool("h100", "H100", 16))
        .build();
    let p = plan(&ir);
    let training = workload(&p, "training");
    assert_eq!(training.status, WorkloadStatus::Unplaced);
    let why = training.unplaced.as_ref().expect("infeasibility");
    assert_eq!(
        why.message,
        "every pool that fits holds `inference`, which `training` is isolated from"
    );
    let r = rejection(&p, "training", "dc");
    assert_eq!(
        (r.stage, r.reason.as_str()),
        (RejectionStage::Assignment, "isolation")
    );
}

#[test]
fn gpu_memory_rejection_names_the_pool_and_its_offer() {
    let ir = IrBuilder::new()
        .workload("llm", |w| w.gpu(1).gpu_memory(gib(20)))
        .target("turin", |t| t.pool("t4", "T4", 4))
        .build();
    let p = plan(&ir);
    let r = rejection(&p, "llm", "turin");
    assert_eq!(r.reason, "gpu_memory");
    assert_eq!(
        r.message,
        "needs 20GiB per GPU; pool `t4` offers 16GiB (T4)"
    );
    let why = workload(&p, "llm")
        .unplaced
        .as_ref()
        .expect("infeasibility");
    assert_eq!(
        why.hint.as_deref(),
        Some("no pool offers 20GiB per GPU: the largest, `t4` of `turin`, offers 16GiB")
    );
}

#[test]
fn mig_slices_come_only_from_a_pool_partitioned_into_that_profile() {
    let ir = IrBuilder::new()
        .workload("notebook", |w| {
            w.kind(WorkloadKind::Notebook).gpu(1).mig("1g.10gb")
        })
        .workload("whole", |w| w.gpu(1))
        .target("dc", |t| t.mig_pool("a100", "A100", 1, "1g.10gb"))
        .build();
    let p = plan(&ir);
    assert_eq!(placed(&p, "notebook"), vec![on("dc", "a100", 1)]);
    assert_eq!(
        p.pools[0].capacity, 7,
        "one A100 gives seven 1g.10gb slices"
    );
    let r = rejection(&p, "whole", "dc");
    assert_eq!(r.reason, "mig");
    assert_eq!(
        r.message,
        "needs whole GPUs; pool `a100` is partitioned into MIG `1g.10gb` instances, which serve \
         only workloads asking for `mig = \"1g.10gb\"`"
    );
}

/// Above `FULL_LISTING_TARGETS` targets a plan lists a few rejections per reason and counts
/// the rest in `others`: such a plan still passes the verifier, which checks the counts.
#[test]
fn plans_of_large_estates_list_rejections_briefly_and_verify() {
    let n = placement::FULL_LISTING_TARGETS + 20;
    let mut spec = IrBuilder::new().workload("vision", |w| {
        w.gpu(1).replicas(2).environments(&[EnvClass::Factory])
    });
    for i in 0..n {
        // Every third target is a factory with a GPU; the others fail for one of two reasons.
        spec = spec.target(&format!("t{i:03}"), move |t| match i % 3 {
            0 => t.class(EnvClass::Factory).pool("l4", "L4", 1),
            1 => t.class(EnvClass::Cloud).pool("l4", "L4", 1),
            _ => t.class(EnvClass::Factory),
        });
    }
    let ir = spec.build();
    let p = plan(&ir);
    let w = workload(&p, "vision");
    assert_eq!(w.status, WorkloadStatus::Placed);
    let listed = w.rejected.len();
    let counted: u32 = w.rejected.iter().map(|r| r.others).sum();
    assert!(listed < n, "{listed} rejections listed for {n} targets");
    assert!(counted > 0);
    assert_eq!(listed + counted as usize + w.placements.len(), n);
    for reason in ["environment", "accelerator", "not_needed"] {
        let of_reason: Vec<&Rejection> = w.rejected.iter().filter(|r| r.reason == reason).collect();
        assert_eq!(
            of_reason.len(),
            placement::REJECTIONS_LISTED_PER_REASON,
            "{reason}"
        );
    }
}

#[test]
fn fallback_targets_get_replicas_only_when_needed() {
    let spec = |replicas| {
        IrBuilder::new()
            .workload("vision", move |w| {
                w.gpu(1)
                    .replicas(replicas)
                    .per_target(1)
                    .fallback(&["backup"])
            })
            .target("lyon", |t| t.pool("l4", "L4", 2).gpu_hour("0.90"))
            .target("backup", |t| t.pool("l4", "L4", 2).gpu_hour("0.10"))
            .build()
    };
    let p = plan(&spec(1));
    assert_eq!(placed(&p, "vision"), vec![on("lyon", "l4", 1)]);
    assert_eq!(workload(&p, "vision").fallback, vec!["backup".to_string()]);
    let r = rejection(&p, "vision", "backup");
    assert_eq!(
        (r.stage, r.reason.as_str()),
        (RejectionStage::Assignment, "not_needed")
    );

    let p = plan(&spec(2));
    assert_eq!(
        placed(&p, "vision"),
        vec![on("lyon", "l4", 1), on("backup", "l4", 1)]
    );
}

#[test]
fn an_ineligible_fallback_is_recorded() {
    let ir = IrBuilder::new()
        .workload("vision", |w| w.gpu(1).fallback(&["tiny"]))
        .target("lyon", |t| t.pool("l4", "L4", 2))
        .target("tiny", |t| t.cpu_mem(8, gib(16)))
        .build();
    let p = plan(&ir);
    assert!(workload(&p, "vision").fallback.is_empty());
    let r = rejection(&p, "vision", "tiny");
    assert_eq!(
        r.message,
        "has no GPU pool; needs 1 GPU per replica; it is listed as a fallback, so the runtime cannot fail over to it"
    );
}

#[test]
fn quotas_and_entitlements_cap_gpus_across_targets() {
    let ir = IrBuilder::new()
        .workload("a", |w| w.identity("research").gpu(4))
        .workload("b", |w| w.identity("research").gpu(4))
        .workload("c", |w| w.identity("vision").gpu(1))
        .workload("d", |w| w.identity("nobody").gpu(1))
        .target("dc", |t| t.pool("h100", "H100", 16))
        .target("edge", |t| {
            t.class(EnvClass::Edge).pool("orin", "JetsonOrinNano", 4)
        })
        .entitle("research", Some(16), None, None)
        .entitle(
            "vision",
            None,
            Some(&["JetsonOrinNano"]),
            Some(&[EnvClass::Edge]),
        )
        .quota("research", 6)
        .build();
    let p = plan(&ir);
    assert_eq!(placed(&p, "a"), vec![on("dc", "h100", 1)]);
    let b = workload(&p, "b");
    assert_eq!(b.status, WorkloadStatus::Unplaced);
    let why = b.unplaced.as_ref().expect("infeasibility");
    assert_eq!(
        why.hint.as_deref(),
        Some("raise `quota team(\"research\")` from 6 to 8 GPUs")
    );
    assert_eq!(placed(&p, "c"), vec![on("edge", "orin", 1)]);
    let r = rejection(&p, "c", "dc");
    assert_eq!(
        (r.stage, r.reason.as_str()),
        (RejectionStage::Policy, "not_entitled")
    );
    assert_eq!(
        r.message,
        "`service_account(\"vision\")` is not entitled to class `datacenter` (entitled: `edge`)"
    );
    let d = workload(&p, "d");
    assert_eq!(d.status, WorkloadStatus::Unplaced);
    assert_eq!(
        rejection(&p, "d", "dc").message,
        "`service_account(\"nobody\")` has no entitlement, so it gets no GPUs"
    );
}

#[test]
fn spread_per_target_and_per_region() {
    let ir = IrBuilder::new()
        .workload("api", |w| w.gpu(1).replicas(3).per_target(1).per_region(2))
        .target("a", |t| t.region("eu").pool("l4", "L4", 4).gpu_hour("1.00"))
        .target("b", |t| t.region("eu").pool("l4", "L4", 4).gpu_hour("1.10"))
        .target("c", |t| t.region("eu").pool("l4", "L4", 4).gpu_hour("1.20"))
        .target("d", |t| t.region("us").pool("l4", "L4", 4).gpu_hour("3.00"))
        .build();
    let p = plan(&ir);
    assert_eq!(
        placed(&p, "api"),
        vec![on("a", "l4", 1), on("b", "l4", 1), on("d", "l4", 1)]
    );
    // `c` is cheaper than `d`, which is used: not "not needed" but the rule that kept it off.
    let r = rejection(&p, "api", "c");
    assert_eq!(r.reason, "spread");
    assert_eq!(
        r.message,
        "region `eu` already holds 2 replicas (`per_region(2)`)"
    );
}

#[test]
fn lowest_data_latency_preference_overrides_cost() {
    let spec = |prefer: &[berth_compiler::ir::Preference]| {
        let prefer = prefer.to_vec();
        IrBuilder::new()
            .workload("vision", move |w| {
                w.gpu(1)
                    .data("imgs", None, Classification::Internal)
                    .prefer(&prefer)
            })
            .target("near", |t| {
                t.pool("l4", "L4", 2)
                    .local_data("imgs", ms(1))
                    .gpu_hour("3.00")
            })
            .target("far", |t| {
                t.pool("l4", "L4", 2)
                    .remote_data("imgs", ms(50))
                    .gpu_hour("1.00")
            })
            .build()
    };
    use berth_compiler::ir::Preference::{LowestCost, LowestDataLatency};
    assert_eq!(
        placed(&plan(&spec(&[])), "vision"),
        vec![on("far", "l4", 1)]
    );
    let p = plan(&spec(&[LowestDataLatency, LowestCost]));
    assert_eq!(placed(&p, "vision"), vec![on("near", "l4", 1)]);
    let score = &workload(&p, "vision").placements[0].score;
    assert_eq!(score[0].objective, "data_latency");
    assert_eq!(score[0].value, ms(1) as i64);
}

/// Two experiments and a service under a weekday peak window limiting experiments to 4 GPUs.
fn peak_estate() -> Ir {
    IrBuilder::new()
        .workload("sweep_a", |w| {
            w.class(WorkloadClass::Experiment)
                .gpu(2)
                .replicas(2)
                .team("research")
        })
        .workload("sweep_b", |w| {
            w.class(WorkloadClass::Experiment)
                .gpu(2)
                .replicas(2)
                .team("research")
        })
        .workload("serve", |w| w.gpu(2).replicas(2))
        .target("dc", |t| t.pool("h100", "H100", 16).gpu_hour("2.00"))
        .window(
            "peak",
            berth_compiler::testing::ir::WEEKDAYS,
            "08:00",
            "18:00",
            "Europe/Paris",
        )
        .limit(Selector::Class(WorkloadClass::Experiment), "peak", 4)
        .build()
}

#[test]
fn plans_are_deterministic_and_identified_by_their_content() {
    let ir = peak_estate();
    let a = serde_json::to_vec(&plan(&ir)).expect("json");
    let b = serde_json::to_vec(&plan(&ir)).expect("json");
    assert_eq!(a, b);
    let p = plan(&ir);
    assert!(p.plan_id.starts_with("sha256:") && p.plan_id.len() == 7 + 64);
    assert_eq!(p.plan_id, berth_compiler::plan::plan_id(&p));
    assert_eq!(p.at, "2025-06-04T08:00:00Z");
}

#[test]
fn reclaim_rules_are_carried_into_the_plan() {
    let ir = IrBuilder::new()
        .workload("nb", |w| w.kind(WorkloadKind::Notebook))
        .workload("api", |w| w)
        .target("dc", |t| t)
        .reclaim(
            Selector::Kind(WorkloadKind::Notebook),
            30 * 60 * 1_000_000_000,
        )
        .build();
    let p = plan(&ir);
    assert_eq!(p.reclaims.len(), 1);
    assert_eq!(p.reclaims[0].selector, "kind notebook");
    assert_eq!(p.reclaims[0].workloads, vec!["nb".to_string()]);
    assert_eq!(p.reclaims[0].idle_after_ns, 1_800_000_000_000);
}

#[test]
fn explain_gives_the_listed_reason_for_any_pair() {
    let ir = factory_and_cloud()
        .workload("vision", |w| {
            w.gpu(1).connectivity(Connectivity::Intermittent).data(
                "line_images",
                Some(ms(20)),
                Classification::Internal,
            )
        })
        .build();
    let sources = SourceMap::new();
    let solved = placement::solve(&ir, &sources, at(PEAK));
    let plan = solved.plan(at(PEAK), "sha256:test", "test");
    let vision = ir.workload_by_name("vision").expect("workload");
    let lyon = ir.target_by_name("lyon").expect("target");
    let cloud = ir.target_by_name("cloud_eu").expect("target");
    assert_eq!(solved.explain(vision, lyon), None, "lyon holds the replica");
    assert_eq!(
        solved.explain(vision, cloud).as_ref(),
        Some(rejection(&plan, "vision", "cloud_eu"))
    );
}

#[test]
fn fallbacks_are_taken_in_their_listed_order() {
    let spec = |replicas| {
        IrBuilder::new()
            .workload("vision", move |w| {
                w.gpu(1)
                    .replicas(replicas)
                    .per_target(1)
                    .fallback(&["dc_backup", "cloud_spot"])
            })
            .target("lyon", |t| t.pool("l4", "L4", 2).gpu_hour("0.90"))
            .target("dc_backup", |t| t.pool("l4", "L4", 2).gpu_hour("3.00"))
            .target("cloud_spot", |t| t.pool("l4", "L4", 2).gpu_hour("0.20"))
            .build()
    };
    // One replica: both fallbacks are kept for failover, each with its place in the order.
    let p = plan(&spec(1));
    assert_eq!(placed(&p, "vision"), vec![on("lyon", "l4", 1)]);
    for (target, position) in [("dc_backup", 1), ("cloud_spot", 2)] {
        let r = rejection(&p, "vision", target);
        assert_eq!(r.reason, "not_needed");
        assert_eq!(
            r.message,
            format!(
                "kept for failover: fallback {position} of 2, and every replica is placed on a target ranked before it"
            )
        );
    }
    // Two: the overflow goes to the first fallback, though the second is cheaper.
    let p = plan(&spec(2));
    assert_eq!(
        placed(&p, "vision"),
        vec![on("lyon", "l4", 1), on("dc_backup", "l4", 1)]
    );
    assert_eq!(rejection(&p, "vision", "cloud_spot").reason, "not_needed");
    // Three: the second fallback takes what the first cannot (`per_target(1)`).
    let p = plan(&spec(3));
    assert_eq!(
        placed(&p, "vision"),
        vec![
            on("lyon", "l4", 1),
            on("dc_backup", "l4", 1),
            on("cloud_spot", "l4", 1)
        ]
    );
}

#[test]
fn a_cheaper_target_kept_off_by_isolation_names_the_pool_and_partner() {
    let ir = IrBuilder::new()
        .workload("inference", |w| w.gpu(2).replicas(2))
        .workload("training", |w| {
            w.class(WorkloadClass::Experiment)
                .gpu(4)
                .isolate_from(&["inference"])
        })
        .target("dc", |t| t.pool("h100", "H100", 16).gpu_hour("1.00"))
        .target("cloud", |t| t.pool("h100", "H100", 16).gpu_hour("4.00"))
        .build();
    let p = plan(&ir);
    assert_eq!(placed(&p, "inference"), vec![on("dc", "h100", 2)]);
    assert_eq!(placed(&p, "training"), vec![on("cloud", "h100", 1)]);
    let r = rejection(&p, "training", "dc");
    assert_eq!(
        (r.stage, r.reason.as_str()),
        (RejectionStage::Assignment, "isolation")
    );
    assert_eq!(
        r.message,
        "pool `h100` holds `inference`, which `training` is isolated from"
    );
}

#[test]
fn a_cheaper_target_kept_off_by_capacity_says_so() {
    let ir = IrBuilder::new()
        .workload("big", |w| w.gpu(4).replicas(2))
        .workload("small", |w| w.class(WorkloadClass::Experiment).gpu(2))
        .target("cheap", |t| t.pool("l4", "L4", 8).gpu_hour("1.00"))
        .target("dear", |t| t.pool("l4", "L4", 8).gpu_hour("2.00"))
        .build();
    let p = plan(&ir);
    assert_eq!(placed(&p, "big"), vec![on("cheap", "l4", 2)]);
    assert_eq!(placed(&p, "small"), vec![on("dear", "l4", 1)]);
    let r = rejection(&p, "small", "cheap");
    assert_eq!(
        (r.stage, r.reason.as_str()),
        (RejectionStage::Assignment, "capacity")
    );
    // The dearer target of the big workload ranks after the one it uses: not needed.
    assert_eq!(rejection(&p, "big", "dear").reason, "not_needed");
}
