//! Differences between a live object and the object an apply leaves (or would leave): both
//! stripped of what the server manages (status, managedFields, resourceVersion, uid, …) and
//! compared as YAML, line by line.

use super::render::to_yaml;
use serde_json::Value;
use similar::TextDiff;

/// Metadata fields the server sets; never part of a diff.
const SERVER_METADATA: [&str; 7] = [
    "managedFields",
    "resourceVersion",
    "uid",
    "generation",
    "creationTimestamp",
    "selfLink",
    "deletionTimestamp",
];

/// `object` without the fields the server manages.
pub fn strip(object: &Value) -> Value {
    let mut out = object.clone();
    if let Some(map) = out.as_object_mut() {
        map.remove("status");
        if let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) {
            for key in SERVER_METADATA {
                meta.remove(key);
            }
            let empty_annotations = meta
                .get("annotations")
                .and_then(Value::as_object)
                .is_some_and(|a| a.is_empty());
            if empty_annotations {
                meta.remove("annotations");
            }
        }
    }
    out
}

/// A unified diff from `live` (`None`: the object does not exist) to `after`, or `None` when
/// they are the same once stripped. `name` heads the diff (`CONTEXT: Kind ns/name`).
pub fn unified(name: &str, live: Option<&Value>, after: &Value) -> Option<String> {
    let before = live.map(|l| to_yaml(&strip(l))).unwrap_or_default();
    let after = to_yaml(&strip(after));
    if before == after {
        return None;
    }
    let diff = TextDiff::from_lines(&before, &after);
    let old = if live.is_some() { "live" } else { "absent" };
    Some(
        diff.unified_diff()
            .context_radius(3)
            .header(&format!("{name} ({old})"), &format!("{name} (planned)"))
            .to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn server_fields_do_not_make_a_difference() {
        let live = json!({"kind": "ConfigMap", "metadata": {"name": "a", "resourceVersion": "7",
            "managedFields": [{"manager": "berth"}]}, "data": {"k": "v"}, "status": {}});
        let after = json!({"kind": "ConfigMap", "metadata": {"name": "a", "resourceVersion": "8"},
            "data": {"k": "v"}});
        assert_eq!(unified("x", Some(&live), &after), None);
        let changed = json!({"kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "w"}});
        let diff = unified("x", Some(&live), &changed).expect("a difference");
        assert!(
            diff.contains("-  k: v") && diff.contains("+  k: w"),
            "{diff}"
        );
    }
}
