//! `docs/plan.schema.json` is generated from the plan types (feature `schema`, which this
//! crate's tests enable) and must be up to date; the example in `docs/plan-format.md` must be
//! a plan. Regenerate the schema with `UPDATE_SCHEMA=1 cargo test -p berth-compiler --test
//! plan_schema`.

use berth_compiler::plan::{PLAN_FORMAT, Plan};
use std::path::PathBuf;

fn docs(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../docs")
        .join(file)
}

fn generated_schema() -> String {
    let mut schema = schemars::schema_for!(Plan);
    schema.insert(
        "$id".into(),
        format!("https://berth.invalid/schemas/{PLAN_FORMAT}.json").into(),
    );
    let mut text = serde_json::to_string_pretty(&schema).expect("a schema serialises");
    text.push('\n');
    text
}

#[test]
fn plan_schema_is_up_to_date() {
    let path = docs("plan.schema.json");
    let generated = generated_schema();
    if std::env::var_os("UPDATE_SCHEMA").is_some() {
        std::fs::write(&path, &generated).expect("docs/plan.schema.json is writable");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "docs/plan.schema.json is out of date with the plan types; regenerate it with \
         `UPDATE_SCHEMA=1 cargo test -p berth-compiler --test plan_schema`"
    );
}

/// The example plan in `docs/plan-format.md` (its first ```json block) is a plan of the
/// current format, with a correct plan id.
#[test]
fn documented_example_is_a_plan() {
    let doc = std::fs::read_to_string(docs("plan-format.md")).expect("docs/plan-format.md");
    let start = doc.find("```json\n").expect("a ```json block") + "```json\n".len();
    let len = doc[start..].find("```").expect("closed block");
    let plan: Plan = serde_json::from_str(&doc[start..start + len]).expect("the example is a plan");
    assert_eq!(plan.format, PLAN_FORMAT);
    assert!(plan.verification.verified);
    assert_eq!(plan.plan_id, berth_compiler::plan::plan_id(&plan));
}
