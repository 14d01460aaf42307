//! The berth runtime: everything that touches the outside world (files, clusters, agents,
//! NVML) and the `berth` command line. Depends on the compiler, never the reverse.
//!
//! - [`apply`]: `render`, `apply`, `diff`, `approve`, `status`: plan input, refusals,
//!   dispatch per target runtime.
//! - [`arc`]: Azure Arc-attached targets: kustomizations committed to a GitOps repository.
//! - [`cli`]: argument parsing, dispatch and exit codes of the `berth` binary.
//! - [`files`]: finding and reading `.berth` sources (the compiler never does I/O).
//! - [`fmt`]: `berth fmt`, with atomic in-place rewrites.
//! - [`k8s`]: the Kubernetes backend (render, server-side apply, diff, prune, status).
//! - [`report`]: human and JSON output, colour decisions.

pub mod apply;
pub mod arc;
pub mod cli;
pub mod files;
pub mod fmt;
pub mod k8s;
pub mod report;
