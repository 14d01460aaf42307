//! Formatting never changes what a spec means: for any generated spec
//! (`testing::specs::spec_files_seeded`: models, workloads, targets, placements, policies,
//! comments; one to three files), planning the formatted files gives the same plan as
//! planning the files as written.
//!
//! "The same plan" is the plan's JSON with what depends on the text's layout taken out:
//! - `source_digest` (a hash of the text) and `plan_id` (a hash of the plan, digest
//!   included) are emptied;
//! - every source reference (`{file, line, column, start, end}`: where a rejection's
//!   requirement and offer are written) is replaced by its file and the text it points at
//!   without whitespace and separators (`,` and `;`, which the formatter adds or drops
//!   between the entries of a record: `local { a = 1, b = 2 }` on one line). So a reference
//!   must still point at the same tokens in the same file, only its position may move; a
//!   reference present on one side and absent on the other is a difference.
//!
//! Everything else (placements, replicas, rejections and their stages and reasons,
//! ledgers, windows, approvals, reclaim rules, the verifier's verdict) must be equal.

use berth_compiler::driver::{self, format_file};
use berth_compiler::source::SourceMap;
use berth_compiler::testing::specs::spec_files_seeded;
use jiff::Timestamp;
use proptest::prelude::*;
use serde_json::Value;
use std::collections::BTreeMap;

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

/// The plan of `files` as JSON, layout taken out (see the module's doc).
fn meaning(files: &[String]) -> Result<Value, TestCaseError> {
    let map = sources(files);
    let planned = match driver::plan(&map, at()) {
        Ok(planned) => planned,
        Err(e) => return Err(TestCaseError::fail(format!("no plan: {e:?}"))),
    };
    let mut json =
        serde_json::to_value(&planned.plan).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let texts: BTreeMap<String, &str> = map
        .files()
        .iter()
        .map(|f| (f.name.clone(), f.text.as_str()))
        .collect();
    json["source_digest"] = Value::Null;
    json["plan_id"] = Value::Null;
    without_positions(&mut json, &texts);
    Ok(json)
}

fn without_positions(value: &mut Value, texts: &BTreeMap<String, &str>) {
    match value {
        Value::Object(map) => {
            let is_ref = ["file", "line", "column", "start", "end"]
                .iter()
                .all(|k| map.contains_key(*k))
                && map.len() == 5;
            if is_ref {
                let file = map["file"].as_str().unwrap_or_default().to_string();
                let (start, end) = (map["start"].as_u64(), map["end"].as_u64());
                let text = texts.get(&file).copied().unwrap_or_default();
                let words: String = start
                    .zip(end)
                    .and_then(|(s, e)| text.get(s as usize..e as usize))
                    .unwrap_or("<out of range>")
                    .chars()
                    .filter(|c| !c.is_whitespace() && *c != ',' && *c != ';')
                    .collect();
                *value = serde_json::json!({ "file": file, "text": words });
                return;
            }
            for v in map.values_mut() {
                without_positions(v, texts);
            }
        }
        Value::Array(items) => {
            for v in items {
                without_positions(v, texts);
            }
        }
        _ => {}
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
