//! A plan without what depends on its spec's layout: what "formatting keeps the plan" compares
//! (the `spec_roundtrip` fuzz target and the `fmt_plan_props` property test).
//!
//! - `source_digest` (a hash of the text) and `plan_id` (a hash of the plan, digest included)
//!   are taken out;
//! - every source reference (`{file, line, column, start, end}`: where a rejection's
//!   requirement and offer are written) is replaced by its file and the text it points at
//!   without whitespace and separators (`,` and `;`, which the formatter adds or drops between
//!   the entries of a record: `local { a = 1, b = 2 }` on one line). So a reference must
//!   still point at the same tokens in the same file, only its position may move; a reference
//!   present on one side and absent on the other is a difference.
//!
//! Everything else (placements, replicas, rejections and their stages and reasons, ledgers,
//! windows, approvals, reclaim rules, the verifier's verdict) is kept as it is.

use crate::plan::Plan;
use crate::source::SourceMap;
use serde_json::Value;
use std::collections::BTreeMap;

/// `plan` as JSON, layout taken out (see the module's doc); `sources` are the texts it was
/// planned from.
pub fn layout_free(plan: &Plan, sources: &SourceMap) -> Value {
    let mut json = serde_json::to_value(plan).expect("a plan serialises");
    if let Value::Object(fields) = &mut json {
        fields.remove("source_digest");
        fields.remove("plan_id");
    }
    let texts: BTreeMap<&str, &str> = sources
        .files()
        .iter()
        .map(|f| (f.name.as_str(), f.text.as_str()))
        .collect();
    without_positions(&mut json, &texts);
    json
}

fn without_positions(value: &mut Value, texts: &BTreeMap<&str, &str>) {
    match value {
        Value::Object(map) => {
            let is_ref = map.len() == 5
                && ["file", "line", "column", "start", "end"]
                    .iter()
                    .all(|k| map.contains_key(*k));
            if is_ref {
                let file = map["file"].as_str().unwrap_or_default().to_owned();
                let text = texts.get(file.as_str()).copied().unwrap_or_default();
                let words: String = map["start"]
                    .as_u64()
                    .zip(map["end"].as_u64())
                    .and_then(|(s, e)| text.get(s as usize..e as usize))
                    .unwrap_or("<out of range>")
                    .chars()
                    .filter(|c| !c.is_whitespace() && *c != ',' && *c != ';')
                    .collect();
                *value = serde_json::json!({ "file": file, "text": words });
                return;
            }
            map.values_mut().for_each(|v| without_positions(v, texts));
        }
        Value::Array(items) => items.iter_mut().for_each(|v| without_positions(v, texts)),
        _ => {}
    }
}
