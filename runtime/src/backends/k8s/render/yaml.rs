//! The rendering as YAML: one file per cluster and namespace (and per GitOps path), in a
//! fixed order, byte for byte the same for the same plan.

use super::*;

/// The YAML files of a rendering: `(relative path, contents)`, one file per cluster and
/// namespace (`CONTEXT/NAMESPACE.yaml`, the Namespace object first), sorted by path.
pub fn yaml_files(rendered: &Rendered) -> Vec<(String, String)> {
    let mut files: BTreeMap<String, Vec<&Manifest>> = BTreeMap::new();
    for cluster in &rendered.clusters {
        for m in &cluster.manifests {
            let ns = m.namespace.as_deref().unwrap_or(&m.name);
            files
                .entry(format!(
                    "{}/{}.yaml",
                    path_part(&cluster.context),
                    path_part(ns)
                ))
                .or_default()
                .push(m);
        }
    }
    files
        .into_iter()
        .map(|(path, manifests)| {
            let mut text = format!(
                "# Rendered by berth from plan {}. Do not edit: re-render instead.\n",
                rendered.plan_id
            );
            for m in manifests {
                text.push_str("---\n");
                text.push_str(&to_yaml(&m.object));
            }
            (path, text)
        })
        .collect()
}

/// One object as YAML (keys in sorted order).
pub fn to_yaml(object: &Value) -> String {
    // INVARIANT: a JSON value always serialises to YAML.
    let mut text = serde_saphyr::to_string(object).unwrap_or_default();
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

/// A context or namespace name as a path component: no separators, no leading dot.
pub(super) fn path_part(name: &str) -> String {
    let mapped: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if mapped.starts_with('.') || mapped.is_empty() {
        format!("_{mapped}")
    } else {
        mapped
    }
}
