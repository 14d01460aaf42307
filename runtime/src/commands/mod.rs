//! One module per `berth` command: each reads its arguments, does the command's work through
//! the compiler's driver, a backend or the agent, prints through [`crate::report::Ui`] and
//! ends with an [`Exit`]. [`crate::cli`] parses the command line and dispatches here.
//!
//! - [`check`], [`fmt`]: sources (`berth check`, `berth fmt`).
//! - [`plan`], [`explain`], [`verify`], [`plan_diff`], [`what_if`]: placement (`berth plan`,
//!   `berth explain`, `berth verify`, `berth plan-diff`, `berth plan --what-if`); [`spec`] is what they share (one spec loaded, the plan instant,
//!   violations printed), [`table`] the plan's table for people and [`markdown`] the
//!   plan and plan-diff reports for a merge request (`--output markdown`).
//! - [`render`], [`apply`], [`diff`], [`approve`], [`status`], [`top`], [`reclaim`]: a plan
//!   put to work (`top_snapshot` is what `berth top` reads, `top_view` its refreshing
//!   terminal view; `reclaim` frees the idle GPUs of Kubernetes targets);
//!   [`input`] is what they share (the plan to work with and the refusals that keep a stale,
//!   unapproved or unverified plan off the targets).
//! - [`keys`], [`agent`], [`bundle`]: the edge (`berth keys generate`, `berth agent`,
//!   `berth bundle export`: a carried bundle for a site with no network).
//! - [`fetch`]: a model artifact staged where a workload runs (`berth fetch`).
//!
//! `berth lsp` is its own room, [`crate::lsp`].
//!
//! Must never: decide placement (every placement, reason and verdict comes from the
//! compiler), or write or apply a plan the verifier rejected.

pub mod agent;
pub mod apply;
pub mod approval;
pub mod approve;
pub mod audit;
pub mod bundle;
pub mod check;
pub mod diff;
pub mod explain;
pub mod fetch;
pub mod fmt;
pub mod input;
pub mod keys;
mod markdown;
pub mod plan;
pub mod plan_diff;
pub mod plan_layout;
pub mod reclaim;
pub mod render;
pub mod spec;
pub mod status;
mod table;
pub mod top;
pub mod top_snapshot;
pub mod top_view;
pub mod verify;
pub mod what_if;

use crate::files::LoadError;
use crate::report::{Exit, Ui};
use std::io;

/// Prints why the sources could not be loaded; nothing was checked (exit 2).
fn load_failed(errors: &[LoadError], ui: &mut Ui<'_>) -> io::Result<Exit> {
    for error in errors {
        ui.problem(error, Some(error.hint()))?;
    }
    Ok(Exit::Trouble)
}
