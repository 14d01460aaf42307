//! Where a verified plan goes, one room per kind of target runtime. Each backend takes the
//! plan and its IR after the commands' refusals (stale digest, failed verification, missing
//! approval) and never re-decides placement.
//!
//! - [`k8s`]: Kubernetes clusters (render, server-side apply, diff, prune, rollout, status).
//! - [`arc`]: Azure Arc-attached clusters, the GitOps way (the Kubernetes rendering committed
//!   as kustomizations).
//! - [`arm`]: Azure Resource Manager for those clusters (the Flux extension and configuration
//!   that make each cluster's Flux watch the repository, and their state).
//! - [`edge`]: edge targets (signed bundles published for their agents, and the agents'
//!   status) and `local` targets (an agent embedded in `berth apply`).

pub mod arc;
pub mod arm;
pub mod edge;
pub mod k8s;
