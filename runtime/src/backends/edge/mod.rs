//! The edge backend: what the control plane does for `edge` and `local` targets. The agent
//! that runs on the edge is its own room ([`crate::agent`]); this is the control plane's side.
//!
//! - [`bundle`]: signed bundles (one edge target's slice of a plan), keys and bundle stores.
//! - [`apply`]: `berth apply` for edge targets (bundles signed and published) and `local`
//!   targets (run by an embedded agent).
//! - [`status`]: `berth status` for edge targets (each agent's `GET /v1/status`).

pub mod apply;
pub mod bundle;
pub mod status;
