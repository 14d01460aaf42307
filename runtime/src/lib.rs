//! The berth runtime: everything that touches the outside world (files, clusters, agents,
//! NVML) and the `berth` command line. Depends on the compiler, never the reverse.
//!
//! - [`cli`]: argument parsing and dispatch of the `berth` binary.
//! - [`commands`]: one module per command (`check`, `fmt`, `plan`, `explain`, `verify`,
//!   `render`, `apply`, `diff`, `approve`, `status`, `keys`, `agent`, `fetch`).
//! - [`backends`]: where a verified plan goes: Kubernetes ([`backends::k8s`]), Azure Arc
//!   through GitOps ([`backends::arc`]), edge and local targets ([`backends::edge`]: signed
//!   bundles, keys, bundle stores, the agents' status).
//! - [`agent`]: the edge agent (and the embedded one of `local` targets).
//! - [`lsp`]: `berth lsp`, the language server over stdio.
//! - [`files`]: finding and reading `.berth` sources (the compiler never does I/O).
//! - [`report`]: human and JSON output, colour decisions, exit codes.
//! - [`staging`]: a staging directory of model artifacts (`berth fetch`, and the init
//!   containers of pods on Kubernetes that wait for it).
//! - [`tasks`]: the async runtime and shutdown signal of the commands that wait.

pub mod agent;
pub mod audit;
pub mod backends;
pub mod cli;
pub mod commands;
pub mod files;
pub mod lsp;
pub mod report;
pub mod staging;
pub mod tasks;
#[cfg(feature = "testing")]
pub mod testing;
