//! The berth runtime: everything that touches the outside world (files, clusters, agents,
//! NVML) and the `berth` command line. Depends on the compiler, never the reverse.
//!
//! - [`cli`]: argument parsing, dispatch and exit codes of the `berth` binary.
//! - [`files`]: finding and reading `.berth` sources (the compiler never does I/O).
//! - [`fmt`]: `berth fmt`, with atomic in-place rewrites.
//! - [`lsp`]: `berth lsp`, the language server over stdio.
//! - [`report`]: human and JSON output, colour decisions.

pub mod cli;
pub mod files;
pub mod fmt;
pub mod lsp;
pub mod report;
