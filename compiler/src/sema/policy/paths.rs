//! The field paths a condition may read (`workload.…`, `target.…`, a data set's fields) and
//! their types: what semantics checks against and what the language server completes.

use crate::ir::*;
use crate::sema::types::{EnumTy, QDim};

/// The type of a value in a condition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PTy {
    Bool,
    Int,
    Str,
    Qty(QDim),
    Enum(EnumTy),
    List(Box<PTy>),
    /// A data-set record of `workload.data`.
    Data,
    /// An accelerator (its name, at run time).
    Accelerator,
}

impl PTy {
    pub fn describe(&self) -> String {
        match self {
            PTy::Bool => "a boolean".into(),
            PTy::Int => "a number".into(),
            PTy::Str => "a string".into(),
            PTy::Qty(d) => d.with_article().into(),
            PTy::Enum(e) => e.with_article(),
            PTy::List(t) => format!("a list of {}", t.plural()),
            PTy::Data => "a data set".into(),
            PTy::Accelerator => "an accelerator".into(),
        }
    }

    fn plural(&self) -> String {
        match self {
            PTy::Data => "data sets".into(),
            PTy::Accelerator => "accelerators".into(),
            PTy::Enum(EnumTy::EnvClass) => "environment classes".into(),
            PTy::Str => "strings".into(),
            other => format!(
                "{} values",
                other
                    .describe()
                    .trim_start_matches("a ")
                    .trim_start_matches("an ")
            ),
        }
    }

    /// Whether `a == b` type-checks (strings and accelerator names mix).
    pub(super) fn compatible(&self, other: &PTy) -> bool {
        self == other
            || matches!(
                (self, other),
                (PTy::Str, PTy::Accelerator) | (PTy::Accelerator, PTy::Str)
            )
    }
}

/// A path under `workload.` usable in conditions.
pub struct PathField<F: 'static> {
    pub path: &'static str,
    pub field: F,
    pub ty: fn() -> PTy,
    /// What the path is, in a sentence; written beside it, not shown anywhere yet.
    #[allow(dead_code)]
    pub doc: &'static str,
}

pub static WORKLOAD_PATHS: &[PathField<WorkloadField>] = &[
    PathField {
        path: "name",
        field: WorkloadField::Name,
        ty: || PTy::Str,
        doc: "The workload's name.",
    },
    PathField {
        path: "release",
        field: WorkloadField::Release,
        ty: || PTy::Str,
        doc: "Its release.",
    },
    PathField {
        path: "image",
        field: WorkloadField::Image,
        ty: || PTy::Str,
        doc: "Its image.",
    },
    PathField {
        path: "kind",
        field: WorkloadField::Kind,
        ty: || PTy::Enum(EnumTy::Kind),
        doc: "Its kind.",
    },
    PathField {
        path: "class",
        field: WorkloadField::Class,
        ty: || PTy::Enum(EnumTy::Class),
        doc: "Its class.",
    },
    PathField {
        path: "team",
        field: WorkloadField::Team,
        ty: || PTy::Str,
        doc: "Its team.",
    },
    PathField {
        path: "identity",
        field: WorkloadField::Identity,
        ty: || PTy::Str,
        doc: "The name of its identity.",
    },
    PathField {
        path: "replicas",
        field: WorkloadField::Replicas,
        ty: || PTy::Int,
        doc: "Its replica count.",
    },
    PathField {
        path: "gpu",
        field: WorkloadField::Gpu,
        ty: || PTy::Int,
        doc: "GPUs per replica.",
    },
    PathField {
        path: "resources.gpu",
        field: WorkloadField::Gpu,
        ty: || PTy::Int,
        doc: "GPUs per replica.",
    },
    PathField {
        path: "connectivity",
        field: WorkloadField::Connectivity,
        ty: || PTy::Enum(EnumTy::Connectivity),
        doc: "The worst link it tolerates.",
    },
    PathField {
        path: "data",
        field: WorkloadField::Data,
        ty: || PTy::List(Box::new(PTy::Data)),
        doc: "Its data sets: records with `name`, `dataset`, `access`, `classification`, `max_latency`.",
    },
    PathField {
        path: "environments",
        field: WorkloadField::Environments,
        ty: || PTy::List(Box::new(PTy::Enum(EnumTy::EnvClass))),
        doc: "Its approved environment classes.",
    },
];

pub static TARGET_PATHS: &[PathField<TargetField>] = &[
    PathField {
        path: "name",
        field: TargetField::Name,
        ty: || PTy::Str,
        doc: "The target's name.",
    },
    PathField {
        path: "class",
        field: TargetField::Class,
        ty: || PTy::Enum(EnumTy::EnvClass),
        doc: "Its environment class.",
    },
    PathField {
        path: "region",
        field: TargetField::Region,
        ty: || PTy::Str,
        doc: "Its region (never equal to anything when unset).",
    },
    PathField {
        path: "jurisdiction",
        field: TargetField::Jurisdiction,
        ty: || PTy::Str,
        doc: "Its jurisdiction (never equal to anything when unset).",
    },
    PathField {
        path: "connectivity",
        field: TargetField::Connectivity,
        ty: || PTy::Enum(EnumTy::Connectivity),
        doc: "Its WAN link.",
    },
    PathField {
        path: "cost.gpu_hour",
        field: TargetField::GpuHour,
        ty: || PTy::Qty(QDim::Money),
        doc: "Its price per GPU hour (0 when unset).",
    },
    PathField {
        path: "accelerators",
        field: TargetField::Accelerators,
        ty: || PTy::List(Box::new(PTy::Accelerator)),
        doc: "The accelerators of its pools.",
    },
];

/// Fields of a data-set record.
/// A field name and its type.
pub type DataField = (&'static str, fn() -> PTy);

pub static DATA_FIELDS: &[DataField] = &[
    ("name", || PTy::Str),
    ("dataset", || PTy::Str),
    ("access", || PTy::Enum(EnumTy::Access)),
    ("classification", || PTy::Enum(EnumTy::Classification)),
    ("max_latency", || PTy::Qty(QDim::Duration)),
];
