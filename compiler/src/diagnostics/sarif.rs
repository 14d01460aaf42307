//! Diagnostics as one SARIF 2.1.0 log (`berth check --output sarif`), the format code-scanning
//! tools (GitHub code scanning, GitLab, Azure DevOps) read to annotate the exact lines: one
//! run of the tool `berth`, a rule per diagnostic code used (its title as the short
//! description), a result per diagnostic with its primary span as the location, the other
//! labels as related locations, and notes and help folded into the message.
//!
//! Columns are UTF-16 code units (`columnKind`), 1-based, as SARIF counts them by default.
//! File names are written as berth shows them (relative to where it ran, in a pipeline the
//! repository root); absolute names become `file://` URIs.

use super::{Diagnostic, Label, Severity};
use crate::source::{SourceFile, SourceMap};
use serde_json::{Value, json};

/// The schema URI every SARIF 2.1.0 log names.
pub const SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";

/// The SARIF log of `diags` (all of them: a scanning tool wants every finding).
pub fn to_sarif(diags: &[Diagnostic], sources: &SourceMap, version: &str) -> Value {
    let mut codes: Vec<_> = diags.iter().map(|d| d.code).collect();
    codes.sort_by_key(|c| c.as_str());
    codes.dedup();
    let rules: Vec<Value> = codes
        .iter()
        .map(|c| {
            json!({
                "id": c.as_str(),
                "shortDescription": { "text": c.title() },
            })
        })
        .collect();
    let results: Vec<Value> = diags
        .iter()
        .map(|d| {
            let rule_index = codes.iter().position(|c| *c == d.code).unwrap_or(0);
            let mut text = d.message.clone();
            if !d.primary.message.is_empty() {
                text.push_str(": ");
                text.push_str(&d.primary.message);
            }
            for note in &d.notes {
                text.push_str("\nnote: ");
                text.push_str(note);
            }
            if let Some(help) = &d.help {
                text.push_str("\nhelp: ");
                text.push_str(help);
            }
            let mut result = json!({
                "ruleId": d.code.as_str(),
                "ruleIndex": rule_index,
                "level": match d.severity {
                    Severity::Error => "error",
                    Severity::Warning => "warning",
                },
                "message": { "text": text },
                "locations": location(&d.primary, sources, None).into_iter().collect::<Vec<_>>(),
            });
            let related: Vec<Value> = d
                .labels
                .iter()
                .enumerate()
                .filter_map(|(i, l)| location(l, sources, Some(i)))
                .collect();
            if let (false, Value::Object(map)) = (related.is_empty(), &mut result) {
                map.insert("relatedLocations".into(), Value::Array(related));
            }
            result
        })
        .collect();
    json!({
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": {
                "name": "berth",
                "version": version,
                "rules": rules,
            }},
            "columnKind": "utf16CodeUnits",
            "results": results,
        }],
    })
}

fn uri(file: &SourceFile) -> String {
    let name = file.name.replace('\\', "/");
    if name.starts_with('/') {
        format!("file://{name}")
    } else {
        name
    }
}

/// A label's physical location; `id` and its message for related locations.
fn location(label: &Label, sources: &SourceMap, id: Option<usize>) -> Option<Value> {
    let file = sources.get(label.span.file)?;
    let start = file.line_col(label.span.start);
    let end = file.line_col(label.span.end);
    let mut out = json!({
        "physicalLocation": {
            "artifactLocation": { "uri": uri(file) },
            "region": {
                "startLine": start.line,
                "startColumn": start.utf16_column + 1,
                "endLine": end.line,
                "endColumn": end.utf16_column + 1,
            },
        },
    });
    if let (Some(id), Value::Object(map)) = (id, &mut out) {
        map.insert("id".into(), json!(id));
        if !label.message.is_empty() {
            map.insert("message".into(), json!({ "text": label.message }));
        }
    }
    Some(out)
}
