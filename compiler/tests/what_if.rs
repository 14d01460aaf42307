//! What-if files (`driver::compile_what_if`): a base spec and a file of changes compiled as
//! one; each test states a change and what the IR (or the diagnostics) must then say.

use berth_compiler::diagnostics::{Code, Diagnostic};
use berth_compiler::driver;
use berth_compiler::ir::{Ir, Money};
use berth_compiler::source::{FileId, SourceMap};

const TARGETS: &str = r#"use std.gpu.{L4, H100}

target lyon {
  class = factory  runtime = local  connectivity = connected  cpu = 32  memory = 128GiB
  pool l4 { accelerator = L4  count = 8 }
  cost = { gpu_hour: 0.90 }
}

target cloud_eu {
  class = cloud  runtime = local  connectivity = connected  cpu = 64  memory = 512GiB
  pool h100 { accelerator = H100  count = 8 }
  cost = { gpu_hour: 2.00 }
}
"#;

const WORKLOADS: &str = r#"use std.gpu.{L4, H100}

workload inspect {
  release = "1"  image = "inspect:1"  class = production  identity = service_account("vision")
  replicas = 2
  resources { cpu = 4  memory = 16GiB  gpu = 1 }
  accelerators = [L4, H100]
}

placement inspect {
  targets  = [lyon, cloud_eu]
  fallback = [cloud_eu]
}

policy governance {
  quota team("vision") { gpu <= 8 }
  deny "no batch in the cloud" when workload.kind == batch and target.class == cloud
}
"#;

/// The base spec and `what_if`, compiled as the what-if file changes the spec.
fn compile(what_if: &str) -> (SourceMap, FileId, Option<Ir>, Vec<Diagnostic>) {
    let mut map = SourceMap::new();
    map.add("targets.berth", TARGETS);
    map.add("workloads.berth", WORKLOADS);
    let id = map.add("what-if.berth", what_if);
    let out = driver::compile_what_if(&map, &[FileId(0), FileId(1)], id);
    (map, id, out.ir, out.diagnostics)
}

/// The changed spec's IR; panics with the diagnostics when it has errors.
fn ir(what_if: &str) -> Ir {
    let (map, _, ir, diags) = compile(what_if);
    let errors: Vec<String> = diags
        .iter()
        .filter(|d| d.is_error())
        .map(|d| {
            let file = map
                .get(d.primary.span.file)
                .map_or("?", |f| f.name.as_str());
            format!("{} {file}: {}", d.code, d.message)
        })
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    ir.expect("an IR")
}

#[test]
fn an_empty_what_if_file_changes_nothing() {
    let mut base = SourceMap::new();
    base.add("targets.berth", TARGETS);
    base.add("workloads.berth", WORKLOADS);
    let plain = driver::compile(&base).ir.expect("the base checks");
    assert_eq!(ir("// nothing\n"), plain);
}

#[test]
fn a_field_is_replaced_and_the_rest_kept() {
    let ir = ir("workload inspect { replicas = 3 }\n");
    let w = &ir.workloads[0];
    assert_eq!(w.replicas, 3);
    assert_eq!(w.resources.gpu, 1, "the other fields stay");
    assert_eq!(w.image, "inspect:1");
}

#[test]
fn a_block_is_amended_entry_by_entry_and_a_new_one_added() {
    let ir = ir(
        "use std.gpu.L40S\n\ntarget lyon {\n  pool l4 { count = 2 }\n  pool l40s { accelerator = L40S  count = 4 }\n  cpu = 16\n}\n",
    );
    let lyon = &ir.targets[ir.target_by_name("lyon").expect("lyon").index()];
    assert_eq!(lyon.cpu_millis, 16_000);
    let pools: Vec<(&str, &str, u32)> = lyon
        .pools
        .iter()
        .map(|p| {
            (
                p.name.as_str(),
                ir.accelerators[p.accelerator.index()].name.as_str(),
                p.count,
            )
        })
        .collect();
    assert_eq!(pools, [("l4", "L4", 2), ("l40s", "L40S", 4)]);
}

#[test]
fn imports_the_spec_file_already_has_are_not_repeated() {
    // `targets.berth` imports L4 and H100; the what-if file imports them again and L40S.
    let ir = ir(
        "use std.gpu.{L4, L40S}\nuse std.gpu.H100\n\ntarget cloud_eu {\n  pool l40s { accelerator = L40S  count = 2 }\n}\n",
    );
    let cloud = &ir.targets[ir.target_by_name("cloud_eu").expect("cloud").index()];
    assert_eq!(cloud.pools.len(), 2);
}

#[test]
fn a_rule_is_replaced_by_subject_and_a_new_one_added() {
    let ir = ir(
        "policy governance {\n  quota team(\"vision\") { gpu <= 2 }\n  quota team(\"research\") { gpu <= 4 }\n  deny \"no batch in the cloud\" when false\n}\n",
    );
    let quotas: Vec<(&str, u32)> = ir
        .policy
        .quotas
        .iter()
        .map(|q| (q.team.as_str(), q.max_gpu))
        .collect();
    assert_eq!(quotas, [("vision", 2), ("research", 4)]);
    assert_eq!(
        ir.policy.denies.len(),
        1,
        "the deny rule is replaced, not added"
    );
}

#[test]
fn an_offline_target_leaves_the_spec_and_every_list() {
    let ir = ir("target cloud_eu { offline = true }\n");
    assert_eq!(ir.targets.len(), 1);
    assert!(ir.target_by_name("cloud_eu").is_none());
    let rules = &ir.workloads[0].placement;
    let lyon = ir.target_by_name("lyon").expect("lyon");
    assert_eq!(rules.candidates.as_deref(), Some(&[lyon][..]));
    assert!(rules.fallback.is_empty());
}

#[test]
fn new_items_are_added() {
    let ir = ir(
        "use std.gpu.L4\n\ntarget turin {\n  class = factory  runtime = local  connectivity = connected  cpu = 8  memory = 32GiB\n  pool l4 { accelerator = L4  count = 2 }\n  cost = { gpu_hour: 0.50 }\n}\npolicy budget {\n  approval when cost_per_day > 10 { approvers = [\"finops\"] }\n}\n",
    );
    assert!(ir.target_by_name("turin").is_some());
    assert_eq!(ir.policy.approvals.len(), 1);
    assert_eq!(ir.policy.approvals[0].cost_per_day_above, Money(10_000_000));
}

/// Mistakes in the what-if file are reported in it, with their own code for `offline`.
#[test]
fn mistakes_point_into_the_what_if_file() {
    let (map, id, ir, diags) = compile(
        "target paris { offline = true }\ntarget lyon { offline = yes }\nworkload inspect { offline = true }\ntarget cloud_eu { offline = true  cpu = 4 }\nworkload inspect { replicas = \"three\" }\n",
    );
    assert!(ir.is_none());
    let found: Vec<(Code, u32, String)> = diags
        .iter()
        .map(|d| {
            assert_eq!(d.primary.span.file, id, "{}", d.message);
            let line = map
                .get(id)
                .map_or(0, |f| f.line_col(d.primary.span.start).line);
            (d.code, line, d.message.clone())
        })
        .collect();
    assert_eq!(
        found,
        [
            (
                Code::InvalidWhatIf,
                1,
                "the base spec has no target `paris` to take offline".to_string()
            ),
            (
                Code::InvalidWhatIf,
                2,
                "`offline` can only be `true`".to_string()
            ),
            (
                Code::InvalidWhatIf,
                3,
                "`offline` takes a target out of the spec, not a workload".to_string()
            ),
            (
                Code::InvalidWhatIf,
                4,
                "target `cloud_eu` is taken offline, so it takes no other change".to_string()
            ),
            (
                Code::TypeMismatch,
                5,
                "expected a whole number, found a string".to_string()
            ),
        ]
    );
}

/// A change that breaks the spec is reported where the broken text is.
#[test]
fn a_change_breaking_the_spec_is_reported_in_the_spec() {
    // The placement's fallback must be among its targets: with `targets = [lyon]` in the
    // what-if file, the spec's own `fallback = [cloud_eu]` no longer is.
    let (map, _, ir, diags) = compile("placement inspect { targets = [lyon] }\n");
    assert!(ir.is_none());
    let d = diags
        .iter()
        .find(|d| d.code == Code::FallbackNotCandidate)
        .unwrap_or_else(|| panic!("E0408 in {diags:#?}"));
    let file = map.get(d.primary.span.file).map(|f| f.name.as_str());
    assert_eq!(file, Some("workloads.berth"));
}

mod properties {
    use berth_compiler::driver;
    use berth_compiler::source::SourceMap;
    use berth_compiler::testing::specs::spec_from_choices;
    use proptest::prelude::*;

    /// The base spec and `what_if`, compiled, planned and verified: never a panic, and a
    /// changed spec that checks clean gives a plan the verifier accepts.
    fn holds(base: &str, what_if: &str) {
        let mut map = SourceMap::new();
        let spec = map.add("spec.berth", base);
        let id = map.add("what-if.berth", what_if);
        let compiled = driver::compile_what_if(&map, &[spec], id);
        if compiled.ir.is_some() {
            let at = "2025-06-04T10:00:00Z".parse().expect("instant");
            if let Err(driver::PlanFailure::Unverified { violations, .. }) =
                driver::plan_what_if(&map, &[spec], id, at, &Default::default())
            {
                panic!("the changed spec's plan does not verify: {violations:#?}");
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        /// Two generated specs: the second's items amend the first's (their names overlap:
        /// `target_0`, `workload_1`, `governance_2`, …).
        #[test]
        fn a_generated_spec_as_a_what_if_file(
            base in proptest::collection::vec(any::<u8>(), 0..64),
            change in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            holds(&spec_from_choices(&base), &spec_from_choices(&change));
        }

        /// Any text as a what-if file, built from the language's own words.
        #[test]
        fn any_text_as_a_what_if_file(
            base in proptest::collection::vec(any::<u8>(), 0..32),
            words in proptest::collection::vec(
                prop::sample::select(vec![
                    "target", "workload", "policy", "placement", "model", "use", "std.gpu.L4",
                    "target_0", "workload_0", "offline", "=", "true", "false", "{", "}", "[", "]",
                    "pool", "gpus", "count", "2", "replicas", "targets", "fallback", "quota",
                    "team(\"team-0\")", "gpu", "<=", "deny", "\"x\"", "when", "governance_0",
                    "\n", ",",
                ]),
                0..60,
            ),
        ) {
            holds(&spec_from_choices(&base), &words.join(" "));
        }
    }
}
