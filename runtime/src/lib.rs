//! The berth runtime: everything that touches the outside world (files, clusters, agents,
//! NVML) and the `berth` command line. Depends on the compiler, never the reverse.
//!
//! - [`agent`]: the edge agent (and the embedded one of `local` targets).
//! - [`apply`]: `render`, `apply`, `diff`, `approve`, `status`: plan input, refusals,
//!   dispatch per target runtime.
//! - [`arc`]: Azure Arc-attached targets: kustomizations committed to a GitOps repository.
//! - [`bundle`]: signed bundles, keys and bundle stores.
//! - [`cli`]: argument parsing, dispatch and exit codes of the `berth` binary.
//! - [`edge_apply`]: `berth apply` for edge targets (signed bundles published) and `local`
//!   targets (run by an embedded agent).
//! - [`files`]: finding and reading `.berth` sources (the compiler never does I/O).
//! - [`fmt`]: `berth fmt`, with atomic in-place rewrites.
//! - [`k8s`]: the Kubernetes backend (render, server-side apply, diff, prune, status).
//! - [`lsp`]: `berth lsp`, the language server over stdio.
//! - [`planning`]: `berth plan`, `berth explain` and `berth verify`.
//! - [`report`]: human and JSON output, colour decisions.

pub mod agent;
pub mod apply;
pub mod arc;
pub mod bundle;
pub mod cli;
pub mod edge_apply;
pub mod edge_status;
pub mod files;
pub mod fmt;
pub mod k8s;
pub mod lsp;
pub mod planning;
pub mod report;
