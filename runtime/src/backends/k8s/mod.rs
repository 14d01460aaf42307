//! The Kubernetes backend: a verified plan turned into typed Kubernetes objects
//! ([`render`]), written as YAML per cluster and namespace, server-side applied with field
//! manager `berth` ([`apply`]), compared with the live state ([`diff`]), pruned ([`prune`]),
//! waited for ([`rollout`], with WATCH streams), observed ([`status`], [`top`], and
//! [`live`] for `berth plan --live`) and its idle
//! GPUs reclaimed ([`reclaim`]); concurrent applies
//! serialise on a Lease per namespace ([`lock`]).
//!
//! Everything that talks to a cluster goes through [`client`], which resolves a plan target's
//! `context` in the user's kubeconfig ([`kubeconfig`]) and never prints credentials.

pub mod apply;
pub mod client;
pub mod diff;
pub mod drift;
pub mod kubeconfig;
pub mod live;
pub mod lock;
pub mod prune;
pub mod reclaim;
pub mod render;
pub mod rollout;
pub mod status;
pub mod top;
pub mod workloads;

/// The field manager of every server-side apply berth makes.
pub const FIELD_MANAGER: &str = "berth";

/// Label every object berth renders carries; prune only ever deletes objects with it.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "berth");

/// The label selector of every object berth manages.
pub fn managed_selector() -> String {
    format!("{}={}", MANAGED_BY.0, MANAGED_BY.1)
}
