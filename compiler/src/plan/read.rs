//! Reading a saved plan back: JSON text to a [`Plan`], strictly. A field the format does not
//! have is refused, wherever it is (every struct of the format denies unknown fields), so
//! that no byte of a plan file escapes the plan id: what is not refused here is either part
//! of the content `plan_id` hashes, or JSON whitespace and key order, which carry nothing.
//!
//! Pure like the rest of the compiler: text in, a plan or a [`PlanReadError`] out; the
//! command line reads the file and renders the error.

use super::{PLAN_FORMAT, Plan};
use std::fmt;

/// Why a text is not a plan this berth reads. Positions are 1-based; `path` is the JSON
/// path of the offending value (`workloads[0].rejected[1]`), empty at the top level.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlanReadError {
    /// Not JSON at all (truncated, or broken by an edit).
    Syntax {
        line: usize,
        column: usize,
        message: String,
    },
    /// A plan of another format version (`format` says which).
    OtherFormat { found: String },
    /// A field the plan format does not have.
    UnknownField {
        path: String,
        field: String,
        line: usize,
        column: usize,
    },
    /// JSON, but not shaped like a plan (a missing field, a value of the wrong type).
    Shape {
        path: String,
        line: usize,
        column: usize,
        message: String,
    },
}

impl PlanReadError {
    /// Where in the text, when known: `(line, column)`.
    pub fn position(&self) -> Option<(usize, usize)> {
        match self {
            PlanReadError::Syntax { line, column, .. }
            | PlanReadError::UnknownField { line, column, .. }
            | PlanReadError::Shape { line, column, .. } => Some((*line, *column)),
            PlanReadError::OtherFormat { .. } => None,
        }
    }

    /// What to do about it.
    pub fn hint(&self) -> &'static str {
        match self {
            PlanReadError::Syntax { .. } => {
                "the file is not valid JSON (truncated, or edited by hand?); plan again with `berth plan SPEC_DIR -o FILE`"
            }
            PlanReadError::OtherFormat { .. } => "plan again with this version of berth",
            PlanReadError::UnknownField { .. } => {
                "a plan holds only the fields of its format (docs/plan-format.md), so that its id covers all of it; plan again rather than editing it"
            }
            PlanReadError::Shape { .. } => {
                "the JSON is not shaped like a plan (docs/plan-format.md); plan again rather than editing it by hand"
            }
        }
    }
}

impl fmt::Display for PlanReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlanReadError::Syntax { message, .. } => write!(f, "not a berth plan: {message}"),
            PlanReadError::OtherFormat { found } => write!(
                f,
                "a plan of format `{found}`; this berth reads `{PLAN_FORMAT}`"
            ),
            PlanReadError::UnknownField { path, field, .. } if path.is_empty() => {
                write!(
                    f,
                    "not a berth plan: unknown field `{field}` at the top level"
                )
            }
            PlanReadError::UnknownField { path, field, .. } => {
                write!(f, "not a berth plan: unknown field `{field}` in `{path}`")
            }
            PlanReadError::Shape { path, message, .. } if path.is_empty() => {
                write!(f, "not a berth plan: {message}")
            }
            PlanReadError::Shape { path, message, .. } => {
                write!(f, "not a berth plan: `{path}`: {message}")
            }
        }
    }
}

/// Reads a plan from its JSON text, refusing unknown fields anywhere in it.
pub fn from_json(text: &str) -> Result<Plan, PlanReadError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let (path, inner) = match serde_path_to_error::deserialize::<_, Plan>(&mut de) {
        // Trailing characters after the plan are not part of it either.
        Ok(plan) => match de.end() {
            // A plan of an earlier format may read as this one (a `v2` plan is a `v3` plan
            // that shares no rejections): it is refused all the same.
            Ok(()) if plan.format != PLAN_FORMAT => {
                return Err(PlanReadError::OtherFormat { found: plan.format });
            }
            Ok(()) => return Ok(plan),
            Err(e) => (String::new(), e),
        },
        Err(e) => (e.path().to_string(), e.into_inner()),
    };
    let (line, column) = (inner.line(), inner.column());
    // serde_json ends its messages with " at line L column C": the position is kept apart.
    let message = inner.to_string();
    let message = message
        .rsplit_once(" at line ")
        .map_or(message.as_str(), |(m, _)| m)
        .to_owned();
    if !matches!(inner.classify(), serde_json::error::Category::Data) {
        return Err(PlanReadError::Syntax {
            line,
            column,
            message,
        });
    }
    // A plan of another format version fails on its shape; say which version it is.
    let format = serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| v.get("format")?.as_str().map(str::to_owned));
    if let Some(found) = format.filter(|f| f != PLAN_FORMAT) {
        return Err(PlanReadError::OtherFormat { found });
    }
    if let Some(field) = unknown_field(&message) {
        // serde_path_to_error's path ends at the unknown key itself: the container is the
        // rest of it.
        let container = container_of(&path, &field);
        return Err(PlanReadError::UnknownField {
            path: container,
            field,
            line,
            column,
        });
    }
    Err(PlanReadError::Shape {
        path: if path == "." { String::new() } else { path },
        line,
        column,
        message,
    })
}

/// The field named by serde's "unknown field `x`, expected …" message.
fn unknown_field(message: &str) -> Option<String> {
    let rest = message.strip_prefix("unknown field `")?;
    let end = rest.find("`, expected").or_else(|| rest.rfind('`'))?;
    rest.get(..end).map(str::to_owned)
}

/// `workloads[0].extra` without its last segment `extra`: `workloads[0]`.
fn container_of(path: &str, field: &str) -> String {
    let path = if path == "." { "" } else { path };
    path.strip_suffix(field)
        .map(|p| p.strip_suffix('.').unwrap_or(p))
        .unwrap_or(path)
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_field_is_named_with_its_container() {
        assert_eq!(
            unknown_field("unknown field `note`, expected one of `a`, `b`"),
            Some("note".into())
        );
        assert_eq!(
            container_of("workloads[0].rejected[1].note", "note"),
            "workloads[0].rejected[1]"
        );
        assert_eq!(container_of("note", "note"), "");
        assert_eq!(container_of(".", "note"), "");
    }

    #[test]
    fn not_json_is_a_syntax_error_with_its_position() {
        let e = from_json("{\n  \"format\": ").expect_err("truncated");
        assert!(matches!(e, PlanReadError::Syntax { line: 2, .. }), "{e:?}");
        let e = from_json("[1, 2]").expect_err("not an object");
        assert!(matches!(e, PlanReadError::Shape { .. }), "{e:?}");
    }
}
