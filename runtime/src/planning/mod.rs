//! `berth plan`, `berth explain` and `berth verify`: the command-line side of placement.
//!
//! The compiler decides (`driver::plan`: compile, place, verify); this module reads the spec
//! and a saved plan from disk, reads the clock (the compiler never does), writes plans
//! atomically and prints: a table per workload for people, the plan JSON for machines, source
//! excerpts for `explain`, violations for `verify`.
//!
//! A spec is planned with its files named relative to the spec directory (`workloads.berth`,
//! not `examples/three-plants/workloads.berth`), so the source digest and every source
//! reference in a plan are the same wherever `berth` is run from and however the directory
//! is spelled; diagnostics still show the paths as given.

pub mod explain;
pub mod plan;
pub mod spec;
mod table;
pub mod verify;

pub use explain::ExplainArgs;
pub use plan::PlanArgs;
pub use verify::VerifyArgs;
