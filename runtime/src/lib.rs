//! The berth runtime: everything that touches the outside world (files, clusters, agents,
//! NVML) and the `berth` command line. Depends on the compiler, never the reverse.

pub mod cli;
