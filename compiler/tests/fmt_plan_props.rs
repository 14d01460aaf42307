//! Formatting never changes what a spec means: for any generated spec
//! (`testing::specs::spec_files_seeded`: models, workloads, targets, placements, policies,
//! comments; one to three files), planning the formatted files gives the same plan as
//! planning the files as written.
//!
//! "The same plan" is `testing::layout::layout_free`: the plan's JSON without its digest,
//! its id and the positions of source references (which must still point at the same text).

use berth_compiler::driver::{self, format_file};
use berth_compiler::source::SourceMap;
use berth_compiler::testing::layout::layout_free;
use berth_compiler::testing::specs::spec_files_seeded;
use jiff::Timestamp;
use proptest::prelude::*;
use serde_json::Value;

/// Wednesday 2025-06-04 10:00 UTC, inside the generated policies' business-hours windows.
fn at() -> Timestamp {
    Timestamp::from_second(1_749_031_200).expect("instant")
}

fn sources(files: &[String]) -> SourceMap {
    let mut map = SourceMap::new();
    for (i, text) in files.iter().enumerate() {
        map.add(format!("spec/f{i}.berth"), text.as_str());
    }
    map
}

/// The plan of `files` as JSON, layout taken out.
fn meaning(files: &[String]) -> Result<Value, TestCaseError> {
    let map = sources(files);
    match driver::plan(&map, at()) {
        Ok(planned) => Ok(layout_free(&planned.plan, &map)),
        Err(e) => Err(TestCaseError::fail(format!("no plan: {e:?}"))),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn formatting_keeps_the_plan(seed in any::<u64>(), lines in 150usize..400, files in 1usize..4) {
        let written = spec_files_seeded(lines, files, seed);
        let formatted: Vec<String> = written
            .iter()
            .map(|text| format_file(text).map_err(|d| TestCaseError::fail(format!("{d:?}"))))
            .collect::<Result<_, _>>()?;
        prop_assert_ne!(&formatted, &written, "the generated layout is not canonical");
        let before = meaning(&written)?;
        prop_assert!(
            before["workloads"].as_array().is_some_and(|w| !w.is_empty()),
            "a plan with workloads"
        );
        prop_assert_eq!(before, meaning(&formatted)?);
    }
}
