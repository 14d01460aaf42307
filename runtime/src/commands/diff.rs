//! `berth diff PLAN|SPEC`: what `berth apply` would change, from the servers' dry run.

use super::apply::ApplyArgs;
use super::input::PlanInputArgs;
use crate::backends::edge::apply::EdgeArgs;
use crate::report::{Exit, Ui};
use std::io;

#[derive(Debug, Clone, clap::Args)]
pub struct DiffArgs {
    #[command(flatten)]
    pub plan: PlanInputArgs,
    /// Exit 0 when nothing would change, 2 when something would, 1 on any error (as
    /// terraform's `-detailed-exitcode`).
    #[arg(long)]
    pub detailed_exitcode: bool,
}

/// `berth diff`: what `apply` would change, from the servers' dry run.
pub fn run(args: &DiffArgs, ui: &mut Ui<'_>) -> io::Result<Exit> {
    let apply_args = ApplyArgs {
        plan: args.plan.clone(),
        dry_run: true,
        prune: false,
        force_conflicts: false,
        concurrency: 8,
        wait: false,
        timeout: 300,
        lock_timeout: 300,
        force_unlock: false,
        allow_drift: false,
        detailed_exitcode: args.detailed_exitcode,
        edge: EdgeArgs::default(),
    };
    super::apply::run(&apply_args, ui)
}
