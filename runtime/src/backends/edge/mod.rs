//! The edge backend: what the control plane does for `edge` and `local` targets. The agent
//! that runs on the edge is its own room ([`crate::agent`]); this is the control plane's side.
//!
//! - [`bundle`]: signed bundles (one edge target's slice of a plan), keys and bundle stores.
//! - [`apply`]: `berth apply` for edge targets (bundles signed and published) and `local`
//!   targets (run by an embedded agent).
//! - [`status`]: `berth status` for edge targets (each agent's `GET /v1/status`).
//! - [`layout`], [`export`]: carried bundles for sites with no network, an OCI image layout
//!   holding a target's signed bundle and its model artifacts (`berth bundle export`; the
//!   agent reads it with `--import`).

pub mod apply;
pub mod bundle;
pub mod export;
pub mod layout;
pub mod status;
