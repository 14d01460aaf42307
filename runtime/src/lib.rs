//! The berth runtime: everything that touches the outside world (files, clusters, agents,
//! NVML) and the `berth` command line. Depends on the compiler, never the reverse.
//!
//! - [`agent`]: the edge agent (and the embedded one of `local` targets).
//! - [`apply`]: `berth apply`, dispatching each target to its runtime's backend.
//! - [`bundle`]: signed bundles, keys and bundle stores.
//! - [`cli`]: argument parsing, dispatch and exit codes of the `berth` binary.
//! - [`files`]: finding and reading `.berth` sources (the compiler never does I/O).
//! - [`fmt`]: `berth fmt`, with atomic in-place rewrites.
//! - [`planning`]: `berth plan`, `berth explain` and `berth verify`.
//! - [`lsp`]: `berth lsp`, the language server over stdio.
//! - [`report`]: human and JSON output, colour decisions.

pub mod agent;
pub mod apply;
pub mod bundle;
pub mod cli;
pub mod files;
pub mod fmt;
pub mod planning;
pub mod lsp;
pub mod report;
