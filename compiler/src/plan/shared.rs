//! Shared rejection lists (format `v3`): how `workloads` is written and read.
//!
//! In memory every [`WorkloadPlan`] carries its full `rejected` list. In the document, a
//! workload whose list is, entry by entry, that of an earlier workload in every field but
//! `requirement`, and whose entries of each reason all carry the same `requirement`, is
//! written without `rejected`, with `rejected_as` (the first workload with that list, by
//! name) and `requirements` (its requirement span for each reason). Workloads with the same
//! requirements are rejected by the same targets with the same messages and offers, so a
//! dense plan's size grows with its distinct rejection lists, not with its workloads.
//!
//! Writing borrows the plan (it is also what [`super::plan_id`] hashes, streamed); reading
//! rebuilds the full lists and refuses a `rejected_as` that names no earlier workload with
//! its own list, and `requirements` that do not cover the reasons of that list exactly.

use super::{
    ApprovalRequired, Infeasibility, Placement, Rejection, RejectionStage, SourceRef, WorkloadPlan,
    WorkloadStatus,
};
use crate::ir::Money;
use serde::de::{self, DeserializeSeed, SeqAccess, Visitor};
use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::hash::{Hash, Hasher};

/// `serialize_with` of `Plan::workloads` (and of the blanked view the plan id hashes).
pub(super) fn serialize_workloads<S: Serializer>(
    workloads: &[WorkloadPlan],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let mut seq = serializer.serialize_seq(Some(workloads.len()))?;
    // Each distinct requirement-less list, to the first workload (by name) written with it.
    let mut first: HashMap<Unrequired<'_>, &str> = HashMap::new();
    let mut names: HashSet<&str> = HashSet::new();
    for w in workloads {
        let shared = if w.rejected.is_empty() {
            None
        } else {
            let key = Unrequired(&w.rejected);
            match first.get(&key) {
                Some(name) => requirements_by_reason(&w.rejected).map(|r| (*name, r)),
                None => {
                    // A name written twice (never in a plan berth makes) would be ambiguous
                    // to refer to: only a workload's first occurrence is referred to.
                    if !names.contains(w.workload.as_str()) {
                        first.insert(key, &w.workload);
                    }
                    None
                }
            }
        };
        names.insert(&w.workload);
        seq.serialize_element(&WorkloadOut::new(w, shared))?;
    }
    seq.end()
}

/// `deserialize_with` of `Plan::workloads`: the full lists, rebuilt.
pub(super) fn deserialize_workloads<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<WorkloadPlan>, D::Error> {
    deserializer.deserialize_seq(WorkloadsVisitor)
}

/// Each workload's requirement span by reason, when all entries of a reason carry the same
/// one (else the list cannot be shared).
fn requirements_by_reason(rejected: &[Rejection]) -> Option<BTreeMap<&str, Option<&SourceRef>>> {
    let mut by_reason = BTreeMap::new();
    for r in rejected {
        let span = r.requirement.as_ref();
        if *by_reason.entry(r.reason.as_str()).or_insert(span) != span {
            return None;
        }
    }
    Some(by_reason)
}

/// A rejection list seen without its entries' `requirement`: what workloads share.
struct Unrequired<'a>(&'a [Rejection]);

impl Unrequired<'_> {
    /// `Rejection`'s fields but `requirement`. Destructured, so that a field added to
    /// `Rejection` breaks the build here until it is decided whether sharing covers it.
    fn fields(r: &Rejection) -> (&str, RejectionStage, &str, &str, Option<&SourceRef>, u32) {
        let Rejection {
            target,
            stage,
            reason,
            message,
            requirement: _,
            offer,
            others,
        } = r;
        (target, *stage, reason, message, offer.as_ref(), *others)
    }
}

impl PartialEq for Unrequired<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.0.len() == other.0.len()
            && self
                .0
                .iter()
                .zip(other.0)
                .all(|(a, b)| Self::fields(a) == Self::fields(b))
    }
}

impl Eq for Unrequired<'_> {}

impl Hash for Unrequired<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.len().hash(state);
        for r in self.0 {
            Self::fields(r).hash(state);
        }
    }
}

/// A workload as the document writes it, borrowed.
#[derive(Serialize)]
struct WorkloadOut<'a> {
    workload: &'a str,
    release: &'a str,
    status: WorkloadStatus,
    replicas: u32,
    placements: &'a [Placement],
    #[serde(skip_serializing_if = "Option::is_none")]
    rejected: Option<&'a [Rejection]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rejected_as: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    requirements: Option<BTreeMap<&'a str, Option<&'a SourceRef>>>,
    cost_per_day: Money,
    approval: &'a Option<ApprovalRequired>,
    fallback: &'a [String],
    unplaced: &'a Option<Infeasibility>,
}

/// The rejections of `rejected_as`, this workload's requirement by reason.
type Sharing<'a> = (&'a str, BTreeMap<&'a str, Option<&'a SourceRef>>);

impl<'a> WorkloadOut<'a> {
    fn new(w: &'a WorkloadPlan, shared: Option<Sharing<'a>>) -> Self {
        // Destructured: a field added to `WorkloadPlan` breaks the build here.
        let WorkloadPlan {
            workload,
            release,
            status,
            replicas,
            placements,
            rejected,
            cost_per_day,
            approval,
            fallback,
            unplaced,
        } = w;
        let (rejected, rejected_as, requirements) = match shared {
            Some((name, requirements)) => (None, Some(name), Some(requirements)),
            None => (Some(rejected.as_slice()), None, None),
        };
        WorkloadOut {
            workload,
            release,
            status: *status,
            replicas: *replicas,
            placements,
            rejected,
            rejected_as,
            requirements,
            cost_per_day: *cost_per_day,
            approval,
            fallback,
            unplaced,
        }
    }
}

/// A workload as the document holds it: `rejected`, or `rejected_as` with `requirements`.
#[derive(Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(transform = one_list))]
#[serde(deny_unknown_fields)]
pub struct WorkloadDocument {
    pub workload: String,
    pub release: String,
    pub status: WorkloadStatus,
    pub replicas: u32,
    pub placements: Vec<Placement>,
    /// Every target not used, with the first reason it was not (or could not be) used.
    /// Left out exactly when `rejected_as` is written.
    #[serde(default, deserialize_with = "present")]
    #[cfg_attr(
        feature = "schema",
        schemars(with = "Vec<Rejection>", transform = no_default)
    )]
    pub rejected: Option<Vec<Rejection>>,
    /// An earlier workload, with its own `rejected` list, whose rejections this workload
    /// shares: the same entries, each with this workload's `requirements` for its reason.
    #[serde(default, deserialize_with = "present")]
    #[cfg_attr(feature = "schema", schemars(with = "String", transform = no_default))]
    pub rejected_as: Option<String>,
    /// With `rejected_as`: where this workload writes the requirement of each reason of the
    /// shared rejections (`null` where the rejection has none), by reason.
    #[serde(default, deserialize_with = "present")]
    #[cfg_attr(
        feature = "schema",
        schemars(
            with = "BTreeMap<String, Option<SourceRef>>",
            transform = no_default
        )
    )]
    pub requirements: Option<BTreeMap<String, Option<SourceRef>>>,
    /// Σ over placements of `gpus × gpu_hour × 24`, in millionths of the currency unit
    /// (an integer: 21.60 is `21600000`).
    pub cost_per_day: Money,
    /// Set when a policy's approval threshold is exceeded: the placement is not applied
    /// until approved.
    pub approval: Option<ApprovalRequired>,
    /// Targets the runtime may fail over to.
    pub fallback: Vec<String>,
    /// Why replicas are missing, when status is not `placed`.
    pub unplaced: Option<Infeasibility>,
}

/// An optional field of the document is left out, never `null`: no default to show.
#[cfg(feature = "schema")]
fn no_default(schema: &mut schemars::Schema) {
    schema.remove("default");
}

/// A workload has its own `rejected` list or shares one (`rejected_as` and `requirements`).
#[cfg(feature = "schema")]
fn one_list(schema: &mut schemars::Schema) {
    schema.insert(
        "oneOf".into(),
        serde_json::json!([
            { "required": ["rejected"] },
            { "required": ["rejected_as", "requirements"] }
        ]),
    );
}

/// An optional field that, when written, is not `null`.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

struct WorkloadsVisitor;

impl<'de> Visitor<'de> for WorkloadsVisitor {
    type Value = Vec<WorkloadPlan>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of workloads")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut done = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
        // Each name's first workload: its index when it has its own list.
        let mut by_name: HashMap<String, Option<usize>> = HashMap::new();
        while let Some((w, own)) = seq.next_element_seed(Resolve {
            done: &done,
            by_name: &by_name,
        })? {
            let w: WorkloadPlan = w;
            by_name
                .entry(w.workload.clone())
                .or_insert(own.then_some(done.len()));
            done.push(w);
        }
        Ok(done)
    }
}

/// One workload, its rejections rebuilt from the workloads read before it; with whether it
/// had its own list.
struct Resolve<'b> {
    done: &'b [WorkloadPlan],
    by_name: &'b HashMap<String, Option<usize>>,
}

impl<'de> DeserializeSeed<'de> for Resolve<'_> {
    type Value = (WorkloadPlan, bool);

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        let doc = WorkloadDocument::deserialize(deserializer)?;
        self.resolve(doc).map_err(de::Error::custom)
    }
}

impl Resolve<'_> {
    fn resolve(&self, doc: WorkloadDocument) -> Result<(WorkloadPlan, bool), String> {
        let WorkloadDocument {
            workload,
            release,
            status,
            replicas,
            placements,
            rejected,
            rejected_as,
            requirements,
            cost_per_day,
            approval,
            fallback,
            unplaced,
        } = doc;
        let own = rejected.is_some();
        let rejected = match (rejected, rejected_as, requirements) {
            (Some(list), None, None) => list,
            (Some(_), Some(_), _) => {
                return Err(
                    "`rejected` and `rejected_as` are both written; a workload has one or the other"
                        .into(),
                );
            }
            (Some(_), None, Some(_)) => {
                return Err("`requirements` without `rejected_as`".into());
            }
            (None, None, None) => {
                return Err(
                    "missing field `rejected` (or `rejected_as` and `requirements`)".into(),
                );
            }
            (None, None, Some(_)) => return Err("`requirements` without `rejected_as`".into()),
            (None, Some(_), None) => return Err("`rejected_as` without `requirements`".into()),
            (None, Some(name), Some(requirements)) => self.shared(&name, requirements)?,
        };
        let w = WorkloadPlan {
            workload,
            release,
            status,
            replicas,
            placements,
            rejected,
            cost_per_day,
            approval,
            fallback,
            unplaced,
        };
        Ok((w, own))
    }

    /// The rejections of the earlier workload `name`, with `requirements` for their reasons.
    fn shared(
        &self,
        name: &str,
        mut requirements: BTreeMap<String, Option<SourceRef>>,
    ) -> Result<Vec<Rejection>, String> {
        let Some(&first) = self.by_name.get(name) else {
            return Err(format!(
                "`rejected_as` names `{name}`, which is not an earlier workload of the plan"
            ));
        };
        let Some(earlier) = first.and_then(|i| self.done.get(i)) else {
            return Err(format!(
                "`rejected_as` names `{name}`, which shares another workload's rejections itself; \
                 it must name a workload with its own `rejected` list"
            ));
        };
        let list = &earlier.rejected;
        let mut rebuilt = Vec::with_capacity(list.len());
        let mut used: HashSet<&str> = HashSet::new();
        for r in list {
            let Some(requirement) = requirements.get(&r.reason) else {
                return Err(format!(
                    "`requirements` has no entry for `{}`, a reason of `{name}`'s rejections",
                    r.reason
                ));
            };
            used.insert(&r.reason);
            rebuilt.push(Rejection {
                requirement: requirement.clone(),
                ..r.clone()
            });
        }
        requirements.retain(|reason, _| !used.contains(reason.as_str()));
        if let Some(extra) = requirements.keys().next() {
            return Err(format!(
                "`requirements` has an entry for `{extra}`, which is no reason of `{name}`'s rejections"
            ));
        }
        Ok(rebuilt)
    }
}
